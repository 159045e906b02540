"""End-to-end tests of the explorer in real headless Chromium (Debian's, driven by Playwright).

The server runs in a thread on a free loopback port with a tiny translator trained by the fixture.
Screenshots of every test go to ``test-artifacts/`` (git-ignored). Run with ``make test-browser``
(``pytest -m browser``); without /usr/bin/chromium the tests skip and say why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium (apt-get install chromium)"
    ),
    pytest.mark.explorer_only("the explorer's own tools (playground, model, masks), not pages of the lesson"),
]

import playwright.sync_api as playwright_api  # noqa: E402
from live_server import page_errors, serving  # noqa: E402
from test_web_api import train_tiny_translator  # noqa: E402

from attnlab import functional as AF  # noqa: E402
from attnlab.explain import compute_steps  # noqa: E402
from attnlab.web.app import create_app  # noqa: E402
from attnlab.web.models import load_explorer_model  # noqa: E402

TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def base_url(tmp_path_factory):
    model = load_explorer_model(train_tiny_translator(tmp_path_factory.mktemp("browser-translator"), steps=60))
    with serving(create_app([model])) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield b
        b.close()


@pytest.fixture
def page(browser, base_url, request):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=base_url, accept_downloads=True)
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    errors = page_errors(pg)
    yield pg
    ARTIFACTS.mkdir(exist_ok=True)
    pg.evaluate("document.fonts.ready.then(() => true)")
    pg.screenshot(path=str(ARTIFACTS / f"explorer-{request.node.name}.png"), full_page=True)
    context.close()
    assert not errors, errors


def _wait_for_request(pg, container: str, expected: dict) -> None:
    """Wait until the numbers on screen are the answer to ``expected`` (the debounced request)."""
    pg.wait_for_function(
        "([sel, want]) => { const d = document.querySelector(sel).dataset.request;"
        " return d !== undefined && JSON.stringify(JSON.parse(d)) === JSON.stringify(want); }",
        arg=[container, expected],
    )


def _shown(pg, prefix: str, n: int) -> tuple[list[str], list[float]]:
    texts = [pg.text_content(f"#{prefix}-{i}") for i in range(n)]
    values = [float(pg.get_attribute(f"#{prefix}-{i}", "data-value")) for i in range(n)]
    return texts, values


def _assert_weights_match(pg, steps) -> None:
    texts, values = _shown(pg, "weight", 3)
    torch.testing.assert_close(torch.tensor(values, dtype=torch.float64), steps.weights, rtol=0, atol=1e-15)
    for text, w in zip(texts, steps.weights.tolist()):
        assert abs(float(text) - w) <= 5e-5 + 1e-12, (text, w)
    scaled_texts, _ = _shown(pg, "scaled", 3)
    assert [float(s) for s in scaled_texts] == pytest.approx(steps.scaled.tolist(), abs=5e-5 + 1e-12)
    out_texts, _ = _shown(pg, "out", 3)
    assert [float(s) for s in out_texts] == pytest.approx(steps.output.tolist(), abs=5e-5 + 1e-12)


DEFAULT_VALUES = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]


def test_moving_score_and_dk_sliders_shows_attnlabs_weights(page):
    page.goto("/playground")
    _wait_for_request(page, "#results", {"scale": True, "values": DEFAULT_VALUES, "scores": [8, 4, 2], "d_k": 64})
    page.focus("#score-1")
    for _ in range(25):
        page.keyboard.press("ArrowRight")  # 4.0 → 6.5 in steps of 0.1
    box = page.locator("#dk").bounding_box()
    page.mouse.click(box["x"] + box["width"] * 0.3, box["y"] + box["height"] / 2)  # drag-free slider move
    scores = [float(page.input_value(f"#score-{i}")) for i in range(3)]
    d_k = int(page.input_value("#dk"))
    assert scores[1] == pytest.approx(6.5) and 200 < d_k < 420, (scores, d_k)
    assert page.input_value("#dk-number") == str(d_k)
    _wait_for_request(page, "#results", {"scale": True, "values": DEFAULT_VALUES, "scores": scores, "d_k": d_k})
    _assert_weights_match(page, compute_steps(scores, d_k=d_k, scale=True))
    bar = float(page.get_attribute("#bar-1", "width"))
    full = float(page.get_attribute("#bar-0", "width")) / float(page.get_attribute("#weight-0", "data-value"))
    assert bar == pytest.approx(full * float(page.get_attribute("#weight-1", "data-value")), rel=1e-6)


def test_sqrt_dk_toggle_and_saturation(page):
    page.goto("/playground")
    _wait_for_request(page, "#results", {"scale": True, "values": DEFAULT_VALUES, "scores": [8, 4, 2], "d_k": 64})
    assert page.locator("#saturated").is_hidden()
    page.uncheck("#scale")
    _wait_for_request(page, "#results", {"scale": False, "values": DEFAULT_VALUES, "scores": [8, 4, 2], "d_k": 64})
    steps = compute_steps([8, 4, 2], d_k=64, scale=False)
    _assert_weights_match(page, steps)
    assert steps.weights[0] > 0.95 and page.locator("#saturated").is_visible()
    assert "Not scaled" in page.text_content("#step2-title")
    page.check("#scale")
    _wait_for_request(page, "#results", {"scale": True, "values": DEFAULT_VALUES, "scores": [8, 4, 2], "d_k": 64})
    _assert_weights_match(page, compute_steps([8, 4, 2], d_k=64, scale=True))


def test_vector_mode_and_edited_values(page):
    page.goto("/playground")
    page.check("#mode-vectors")
    page.fill("#query-0", "3")
    page.fill("#value-2-0", "5")
    query, keys = [3, 2, 0, 1], [[2, 1, 0, 1], [0, 1, 1, 0], [1, 0, 2, -1]]
    values = [[1, 0, 0], [0, 1, 0], [5, 0, 1]]
    _wait_for_request(page, "#results", {"scale": True, "values": values, "query": query, "keys": keys})
    assert page.is_disabled("#dk") and page.input_value("#dk") == "4"
    steps = compute_steps(
        query=query,
        keys=[",".join(map(str, k)) for k in keys],
        values=[",".join(map(str, v)) for v in values],
        scale=True,
    )
    _assert_weights_match(page, steps)


def test_language_switch_is_remembered_on_every_page(page):
    page.goto("/playground")
    page.click("#lang-ja")
    assert page.text_content("h1") == "3 冊の本で見るスケール付き内積注意"
    assert page.text_content("#nav-model") == "モデル"
    assert page.get_attribute("html", "lang") == "ja"
    assert page.get_attribute("#lang-ja", "aria-pressed") == "true"
    page.wait_for_function("document.fonts.check('16px IPAexGothic', '本')")
    for path, heading in (("/masks", "マスク"), ("/model", "モデルのアテンションマップ"), ("/playground", "3 冊の本")):
        page.goto(path)
        assert heading in page.text_content("h1")
        assert page.text_content("#nav-playground") == "プレイグラウンド"
    page.wait_for_function("document.querySelector('#steps-table tbody td') !== null")
    assert page.text_content("#steps-table tbody td") == "本 1"
    page.click("#lang-en")
    assert page.text_content("#steps-table tbody td") == "Book 1"
    page.reload()
    assert page.text_content("#nav-model") == "Model"


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_model_page_shows_a_shipped_models_description_and_examples(browser, tmp_path_factory, lang):
    """A shipped model's one-line description in the page's language and its example inputs, as
    buttons that put the text in the box and run it (the first one already in the empty box)."""
    from attnlab import assets
    from attnlab.web import i18n

    model = load_explorer_model(train_tiny_translator(tmp_path_factory.mktemp("described"), steps=1))
    entry = assets.ASSETS["demo"]
    model.name, model.description, model.examples = entry.name, entry.description, entry.examples
    assert entry.description[lang].strip() and len(entry.examples) >= 2
    with serving(create_app([model])) as port:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        pg = context.new_page()
        pg.set_default_timeout(TIMEOUT_MS)
        errors = page_errors(pg)
        pg.goto(f"http://127.0.0.1:{port}/model?lang={lang}")
        pg.wait_for_function("() => document.querySelectorAll('#example-list button').length > 0")
        assert pg.text_content("#model-about") == entry.description[lang]
        assert pg.locator("#examples").is_visible()
        assert pg.text_content('#examples [data-i18n="md_examples"]') == i18n.t(lang, "md_examples")
        assert i18n.t("en", "md_examples") == "Try:" and i18n.t("ja", "md_examples") == "例文:"
        assert pg.locator("#example-list button").all_text_contents() == list(entry.examples)
        assert pg.input_value("#text") == entry.examples[0]
        pg.locator("#example-list button").nth(1).click()
        assert pg.input_value("#text") == entry.examples[1]
        pg.wait_for_function("() => document.querySelector('#output').textContent.trim() !== ''")
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"explorer-described-{lang}.png"), full_page=True)
        context.close()
    assert not errors, errors


def test_model_page_translates_and_draws_every_map(page, base_url):
    page.goto("/model")
    page.fill("#text", "three hundred")
    page.click("#run")
    page.wait_for_selector("#main-map")
    result = page.request.post(
        f"{base_url}/api/run",
        data=json.dumps({"model": page.input_value("#model-select"), "text": "three hundred"}),
        headers={"content-type": "application/json"},
    ).json()
    assert page.text_content("#output") == result["output"]
    S, T = len(result["tokens"]["src"]), len(result["tokens"]["tgt"])
    assert page.input_value("#group") == "cross"
    main = page.locator("#main-map")
    assert (main.get_attribute("data-rows"), main.get_attribute("data-cols")) == (str(T), str(S))
    assert page.locator("#main-map .cell").count() == T * S
    assert page.locator("#main-map .label.row").count() == T and page.locator("#main-map .label.col").count() == S
    cross = result["groups"][[g["name"] for g in result["groups"]].index("cross")]
    assert page.locator("#grid figure").count() == cross["layers"] * cross["heads"]
    page.select_option("#group", value="encoder_self")
    assert (main.get_attribute("data-rows"), main.get_attribute("data-cols")) == (str(S), str(S))
    page.select_option("#head", index=1)  # the second head (labels count from 1)
    assert page.locator("#grid figure.selected").get_attribute("data-head") == "1"
    cell = page.locator('#main-map .cell[data-r="0"][data-c="1"]')
    cell.hover()
    shown = float(page.text_content("#hover").rsplit(":", 1)[1])
    assert shown == pytest.approx(result["attentions"]["encoder_self"][0][1][0][1], abs=1e-4)
    assert page.locator("#main-map .cell.dim").count() == S * S - (2 * S - 1)
    with page.expect_download() as svg_download:
        page.click("#svg")
    svg = Path(svg_download.value.path()).read_text(encoding="utf-8")
    assert svg.startswith("<?xml") and svg.count('class="cell"') == S * S
    with page.expect_download() as png_download:
        page.click("#png")
    assert Path(png_download.value.path()).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png_download.value.suggested_filename.endswith("-encoder_self-L1-H2.png")


def test_model_page_reports_bad_input(page):
    page.goto("/model")
    page.fill("#text", "   ")
    page.click("#run")
    page.wait_for_selector("#error:not(.hidden)")
    assert "text is empty" in page.text_content("#error")


def test_masks_page_draws_the_helpers_and_flips_cells(page):
    page.goto("/masks")
    tokens = "the cat sat on the mat".split()
    T = len(tokens) + 2  # two padding tokens by default
    expected = {"length": T, "causal": True, "window": None, "window_causal": True, "padding": 2, "toggled": []}
    _wait_for_request(page, "#mask-result", expected)
    mask = AF.causal_mask(T) & AF.padding_mask(torch.tensor([T - 2]), max_len=T)  # (T, T)
    shown = [
        [page.get_attribute(f'#mask-svg .cell[data-r="{r}"][data-c="{c}"]', "data-v") == "true" for c in range(T)]
        for r in range(T)
    ]
    assert shown == mask.tolist()
    page.check("#window-on")
    _wait_for_request(page, "#mask-result", dict(expected, window=3))
    assert page.locator("#parts figure").count() == 3
    page.click('#mask-svg .cell[data-r="1"][data-c="5"]')
    _wait_for_request(page, "#mask-result", dict(expected, window=3, toggled=[[1, 5]]))
    assert page.get_attribute('#mask-svg .cell[data-r="1"][data-c="5"]', "data-v") == "true"
    assert page.get_attribute('#mask-svg .cell[data-r="1"][data-c="5"]', "stroke") == "#e07b00"
    assert page.text_content("#edited") == "Flipped by hand: 1"
