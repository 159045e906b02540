"""§8 in real headless Chromium, in Japanese and English: the attention-pooling widget shows exactly
the shipped classifier's numbers and is used by the keyboard alone; the variants widget's window
label agrees with its masks, its measured tables keep seconds and ratios apart, and its chart's
legend is not cut off; axe finds no serious or critical violation. Full-page screenshots are kept
in ``test-artifacts/lesson/`` (git-ignored). Run with ``pytest -m browser tests/test_lesson_s08_browser.py``.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "lesson"
TIMEOUT_MS = 30_000

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium (apt-get install chromium)"
    ),
]

import playwright.sync_api as playwright_api  # noqa: E402
from axe_playwright_python.sync_playwright import Axe  # noqa: E402
from live_server import page_errors, serving  # noqa: E402

from attnlab import assets, checkpoint  # noqa: E402
from attnlab.data.sentence_types import LABELS  # noqa: E402
from attnlab.web import lesson as L  # noqa: E402
from attnlab.web.app import create_app  # noqa: E402

NAME = "ja-sentence-type"
SECTION = L.load_sections()[8]
EXAMPLES = assets.ASSETS[NAME].examples


@pytest.fixture(scope="module")
def base_url():
    with serving(create_app()) as port:
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


@pytest.fixture(scope="module")
def classifier():
    try:
        checkpoint.shipped_model_dir(NAME)
    except FileNotFoundError:
        pytest.skip(f"needs the shipped model {NAME} (make models ONLY={NAME})")
    from attnlab.recipes.classify import load_classifier

    return load_classifier(NAME)


@pytest.fixture(params=["ja", "en"])
def lang(request) -> str:
    return request.param


@pytest.fixture
def page(browser, base_url, lang, request):
    """A page in a browser whose language is ``lang``; a full-page screenshot is kept afterwards."""
    context = browser.new_context(
        viewport={"width": 1280, "height": 900}, base_url=base_url, locale="ja-JP" if lang == "ja" else "en-US"
    )
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    errors = page_errors(pg)
    yield pg
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    pg.evaluate("() => document.fonts.ready.then(() => true)")
    name = re.sub(r"[^\w.-]+", "-", request.node.name).strip("-")
    pg.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    context.close()
    assert not errors, errors


def params(pg) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(pg.url).query).items()}


def wait_request(pg, container: str, expected: dict) -> None:
    """Wait until the numbers in ``container`` answer ``expected`` (the widget's last request)."""
    pg.wait_for_function(
        "([sel, want]) => { const n = document.querySelector(sel); const d = n && n.dataset.request;"
        " if (!d) return false; const got = JSON.parse(d);"
        " return Object.entries(want).every(([k, v]) => JSON.stringify(got[k]) === JSON.stringify(v)); }",
        arg=[container, expected],
    )


def values(pg, selector: str) -> list[float]:
    return pg.eval_on_selector_all(selector, "ns => ns.map(n => Number(n.getAttribute('data-value')))")


def in_order(pg, prefix: str, n: int) -> list[float]:
    return [float(pg.get_attribute(f"#{prefix}{i}", "data-value")) for i in range(n)]


def assert_accessible(pg) -> None:
    results = Axe().run(pg)
    bad = [
        (v["id"], v["impact"], [n["target"] for n in v["nodes"][:3]])
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert not bad, bad


def tab_to(pg, selector: str, limit: int = 400) -> None:
    """Press Tab (and nothing else) until the element matching ``selector`` has the focus."""
    for _ in range(limit):
        if pg.evaluate("(sel) => document.activeElement && document.activeElement.matches(sel)", selector):
            return
        pg.keyboard.press("Tab")
    pytest.fail(f"{selector} cannot be reached with the Tab key")


def same_as_classifier(pg, classifier, text: str) -> None:
    """The widget shows ``classifier``'s own prediction for ``text``: class, probabilities, weights."""
    want = classifier.predict([text])[0]
    assert pg.get_attribute("#pool-label", "data-value") == want.label
    assert in_order(pg, "pool-p-", len(LABELS)) == [want.probs[label] for label in LABELS]
    assert in_order(pg, "pool-w-", len(want.weights)) == want.weights
    assert pg.locator("[id^=pool-w-]").count() == len(want.weights) == len(text)
    peak = max(range(len(want.weights)), key=want.weights.__getitem__)
    assert pg.get_attribute("#pool-peak", "data-value") == str(peak)
    assert pg.get_attribute(f"#pool-ch-{peak}", "class").split().count("pool-peak") == 1


# --------------------------------------------------------------------------------------------
# Exercise 2: attention pooling.
# --------------------------------------------------------------------------------------------


def test_the_pooling_widget_shows_the_classifiers_numbers_and_works_by_keyboard(page, lang, classifier):
    s = {k: getattr(v, lang) for k, v in SECTION.strings.items()}
    page.goto("/lesson/8")
    wait_request(page, "#pool-out", {"text": EXAMPLES[0]})
    same_as_classifier(page, classifier, EXAMPLES[0])
    assert page.text_content("#pool-label") == s["pool_class_question"]
    assert "pool" not in params(page)  # the first example is the default: the address stays short
    # One button per class, each with its class's name in the page's language.
    for label, example in zip(LABELS, EXAMPLES):
        assert page.text_content(f"#pool-ex-{label}") == s[f"pool_class_{label}"] + s["pool_example_sep"] + example
    tab_to(page, "#pool-ex-past")
    page.keyboard.press("Enter")
    wait_request(page, "#pool-out", {"text": EXAMPLES[2]})
    same_as_classifier(page, classifier, EXAMPLES[2])
    assert params(page)["pool"] == EXAMPLES[2]
    assert page.get_attribute("#pool-markers", "data-value") == "past"
    # Typed with the keyboard: the question of the lesson's check.
    tab_to(page, "#pool-text")
    page.keyboard.press("Control+A")
    page.keyboard.type("明日は雨が降りますか。")
    wait_request(page, "#pool-out", {"text": "明日は雨が降りますか。"})
    same_as_classifier(page, classifier, "明日は雨が降りますか。")
    peak = int(page.get_attribute("#pool-peak", "data-value"))
    assert page.text_content(f"#pool-ch-{peak}") == "か"
    assert "pool-marker" in page.get_attribute(f"#pool-ch-{peak}", "class")
    card = page.text_content("#pool-card")
    assert "374" in card and "%" in card
    assert_accessible(page)


def test_the_sentence_lives_in_the_address_and_unknown_characters_are_marked(page, lang, classifier):
    page.goto("/lesson/8?pool=𠮷野家は開いていない。")
    wait_request(page, "#pool-out", {"text": "𠮷野家は開いていない。"})
    same_as_classifier(page, classifier, "𠮷野家は開いていない。")
    assert page.text_content("#pool-ch-0") == "𠮷*"  # not in the vocabulary: read as unknown
    blank = "   "
    page.fill("#pool-text", blank)  # a blank box asks nothing; the last answer stays
    page.wait_for_timeout(400)
    assert page.get_attribute("#pool-label", "data-value") == classifier.predict(["𠮷野家は開いていない。"])[0].label


# --------------------------------------------------------------------------------------------
# The variants: label and mask agree, seconds and ratios apart, the legend whole.
# --------------------------------------------------------------------------------------------


def test_the_window_label_agrees_with_the_mask_and_the_measured_tables_are_apart(page, lang):
    page.goto("/lesson/8")
    wait_request(page, "#var-out", {"length": 16, "reach": 2, "block": 4, "causal": False})
    want = L.variants(L.VariantsRequest())
    for name in L.VARIANTS:
        assert values(page, f"#var-keys-{name}") == [want.keys_per_row[name]]
    assert want.keys_per_row["sliding_window"] == 5
    assert "5" in page.text_content("#var-mask-note")  # "itself and 2 on each side: at most 5 keys"
    page.focus("#var-r")
    page.keyboard.press("ArrowRight")  # reach 2 → 3
    wait_request(page, "#var-out", {"reach": 3})
    assert params(page)["r"] == "3" and values(page, "#var-keys-sliding_window") == [7]
    page.focus("#var-causal")
    page.keyboard.press("Space")
    wait_request(page, "#var-out", {"reach": 3, "causal": True})
    assert values(page, "#var-keys-sliding_window") == [4]  # itself and 3 back
    tables = L.variants(L.VariantsRequest()).measured_tables
    for i in range(len(tables.lengths)):
        for case in L.MEASURED_CASES:
            assert values(page, f"#var-s-{case}-{i}") == [tables.seconds[case][i]]
            assert values(page, f"#var-x-{case}-{i}") == [tables.speedup[case][i]]
            assert page.text_content(f"#var-s-{case}-{i}").replace(".", "").isdigit()  # seconds: no ×
            assert page.text_content(f"#var-x-{case}-{i}").startswith("×")
    # The chart's legend: every series name inside the picture.
    right, width = page.evaluate(
        "() => { const svg = document.querySelector('#var-out svg[aria-label] polyline').ownerSVGElement;"
        " const texts = [...svg.querySelectorAll('text')];"
        " return [Math.max(...texts.map((t) => t.getBBox().x + t.getBBox().width)), svg.viewBox.baseVal.width]; }"
    )
    assert right <= width, (right, width)
    assert_accessible(page)
