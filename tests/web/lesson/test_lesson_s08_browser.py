"""§8 in real headless Chromium, in Japanese and English: the attention-pooling widget shows exactly
the shipped classifier's numbers and is used by the keyboard alone; the variants widget's window
label agrees with its masks, its measured tables keep seconds and ratios apart, and its chart's
legend is not cut off; axe finds no serious or critical violation. Full-page screenshots are kept
in ``test-artifacts/lesson/`` (git-ignored). Run with ``pytest -m browser tests/web/lesson/test_lesson_s08_browser.py``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from lesson_browser import (
    ARTIFACTS_ROOT,
    BROWSER_MARKS,
    assert_accessible,
    goto_uncovered,
    make_page,
    params,
    shipped,
    tab_to,
    values,
    wait_request,
)

ARTIFACTS = ARTIFACTS_ROOT / "lesson"
TIMEOUT_MS = 30_000
TOL = 1e-4

pytestmark = BROWSER_MARKS


from attnlab import assets  # noqa: E402
from attnlab.data.sentence_types import LABELS  # noqa: E402
from attnlab.web import i18n  # noqa: E402
from attnlab.web import lesson as L  # noqa: E402
from attnlab.web.lesson import s08_variants_and_exercises as S8  # noqa: E402

NAME = "ja-sentence-type"
SECTION = L.load_sections()[8]
EXAMPLES = assets.ASSETS[NAME].examples


@pytest.fixture(scope="module")
def classifier():
    shipped(NAME)
    from attnlab.loading import load_model

    return load_model(NAME)


page = make_page(ARTIFACTS, timeout_ms=TIMEOUT_MS)
# A page that does not commit the predictions or open the folds by itself (AUTO_UNCOVER): for a test
# that looks at a fold as a fresh page leaves it, and uncovers the widgets only where it says so.
covered_page = make_page(ARTIFACTS, timeout_ms=TIMEOUT_MS, uncovered=False)


def in_order(pg, prefix: str, n: int) -> list[float]:
    return [float(pg.get_attribute(f"#{prefix}{i}", "data-value")) for i in range(n)]


def same_as_classifier(pg, classifier, text: str) -> dict:
    """The widget shows ``classifier``'s own prediction for ``text`` (pooling_view, the reference of
    the page's engine/pooling.js): class and peak identical, probabilities and weights within 1e-4
    (onnxruntime-web's float32 against PyTorch's). Returns the reference."""
    want = S8.pooling_view(classifier, S8.PoolingRequest(text=text))
    assert pg.get_attribute("#pool-label", "data-value") == want.label
    assert in_order(pg, "pool-p-", len(LABELS)) == pytest.approx(want.probs, abs=TOL)
    assert in_order(pg, "pool-w-", len(want.weights)) == pytest.approx(want.weights, abs=TOL)
    assert pg.locator("[id^=pool-w-]").count() == len(want.weights) == len(text)
    assert pg.get_attribute("#pool-peak", "data-value") == str(want.peak)
    assert pg.get_attribute(f"#pool-ch-{want.peak}", "class").split().count("pool-peak") == 1
    return want


def listed_sentences() -> list[dict]:
    """The pooling widget's listed sentences with MeCab's markers, as the page reads them."""
    return S8.pooling_sentences()["sentences"]


# --------------------------------------------------------------------------------------------
# Exercise 2: attention pooling.
# --------------------------------------------------------------------------------------------


def test_the_pooling_widget_shows_the_classifiers_numbers_and_works_by_keyboard(page, lang, classifier):
    s = {k: getattr(v, lang) for k, v in SECTION.strings.items()}
    goto_uncovered(page, "/lesson/8")
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
    want = same_as_classifier(page, classifier, EXAMPLES[2])
    assert params(page)["pool"] == EXAMPLES[2]
    assert page.get_attribute("#pool-markers", "data-value") == "past"  # MeCab's, written at build time
    for i in want.markers["past"]:
        assert "pool-marker" in page.get_attribute(f"#pool-ch-{i}", "class").split()
    # Typed with the keyboard: the question of the lesson's check, a sentence off the list. Its
    # numbers are computed in the page; the markers are not guessed, and the note says why.
    typed = "明日は雨が降りますか。"
    assert typed not in {row["text"] for row in listed_sentences()}
    tab_to(page, "#pool-text")
    page.keyboard.press("Control+A")
    page.keyboard.type(typed)
    wait_request(page, "#pool-out", {"text": typed})
    same_as_classifier(page, classifier, typed)
    peak = int(page.get_attribute("#pool-peak", "data-value"))
    assert page.text_content(f"#pool-ch-{peak}") == "か"
    assert page.get_attribute("#pool-markers", "data-value") == "unlisted"
    assert page.text_content("#pool-markers") == s["pool_markers_unlisted"]
    assert page.locator("th.pool-marker").count() == 0
    card = page.text_content("#pool-card")
    assert "374" in card and "%" in card
    assert_accessible(page)


def test_another_test_sentence_shows_its_markers_from_the_build(page, lang, classifier):
    tests = [row for row in listed_sentences() if row["source"] == "test"]
    if not tests:
        pytest.skip("the data file lists no test sentence: small_parallel_enja was not found at build time")
    goto_uncovered(page, "/lesson/8")
    wait_request(page, "#pool-out", {"text": EXAMPLES[0]})
    for row in tests[:3]:  # the button walks the held-out sentences in order
        page.click("#pool-another")
        wait_request(page, "#pool-out", {"text": row["text"]})
        same_as_classifier(page, classifier, row["text"])
        assert page.input_value("#pool-text") == row["text"]
        found = [label for label in LABELS if label in row["markers"]]
        assert page.get_attribute("#pool-markers", "data-value") == " ".join(found)
        marked = {i for positions in row["markers"].values() for i in positions}
        shown = {int(n.split("-")[-1]) for n in page.eval_on_selector_all("th.pool-marker", "ns => ns.map(n => n.id)")}
        assert shown == marked


def test_the_sentence_lives_in_the_address_and_unknown_characters_are_marked(page, lang, classifier):
    goto_uncovered(page, "/lesson/8?pool=𠮷野家は開いていない。")
    wait_request(page, "#pool-out", {"text": "𠮷野家は開いていない。"})
    same_as_classifier(page, classifier, "𠮷野家は開いていない。")
    assert page.text_content("#pool-ch-0") == "𠮷*"  # not in the vocabulary: read as unknown
    blank = "   "
    page.fill("#pool-text", blank)  # a blank box asks nothing; the last answer stays
    page.wait_for_timeout(400)
    assert page.get_attribute("#pool-label", "data-value") == classifier.predict(["𠮷野家は開いていない。"])[0].label


# --------------------------------------------------------------------------------------------
# Exercise 1: the heatmap's downloads, drawn in the page.
# --------------------------------------------------------------------------------------------


def test_the_heatmap_downloads_are_drawn_in_the_page(page, lang):
    goto_uncovered(page, "/lesson/8?variant=local&b=2")
    words = getattr(SECTION.strings["default_words"], lang)
    wait_request(page, "#map-out", {"text": words, "variant": "local", "block": 2})
    tokens, mask, _ = L.attention_map(L.AttentionMapRequest(text=words, variant="local", block=2))
    title = L.variant_title(lang, "local", L.VariantParams(block=2)) + getattr(SECTION.strings["map_axes"], lang)
    with page.expect_download() as svg_download:
        page.click("#map-svg-link")
    assert svg_download.value.suggested_filename == f"attention-local-{lang}.svg"
    root = ET.fromstring(Path(svg_download.value.path()).read_bytes())  # it parses as XML
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == ns + "svg"
    cells = [r for r in root.iter(ns + "rect") if (r.get("class") or "").startswith("cell")]
    assert len(cells) == len(tokens) ** 2
    assert sum(r.get("class") == "cell masked" for r in cells) == int((~mask).sum())
    texts = [t.text for t in root.iter(ns + "text")]
    assert texts[0] == title
    assert texts.count(tokens[1]) >= 2  # a row label and a column label
    key = i18n.catalog(lang)["fig_key_weight"]
    assert key in texts and {"0", "0.5", "1"} <= set(texts)  # the colour key on its 0–1 scale
    assert i18n.catalog(lang)["fig_key_masked"] in texts
    # Nothing cut: drawn on its own, every text of the file lies inside its picture.
    viewer = page.context.new_page()
    viewer.set_content(Path(svg_download.value.path()).read_text(encoding="utf-8"))
    right, bottom, width, height = viewer.evaluate(
        "() => { const svg = document.querySelector('svg'); const boxes = [...svg.querySelectorAll('text')]"
        ".map((t) => t.getBBox()); return [Math.max(...boxes.map((b) => b.x + b.width)),"
        " Math.max(...boxes.map((b) => b.y + b.height)), svg.width.baseVal.value, svg.height.baseVal.value]; }"
    )
    viewer.close()
    assert right <= width and bottom <= height, (right, bottom, width, height)
    with page.expect_download() as png_download:
        page.click("#map-png")
    assert png_download.value.suggested_filename == f"attention-local-{lang}.png"
    from PIL import Image

    with Image.open(png_download.value.path()) as image:
        image.load()
        width, height = image.size
    # Drawn at twice the SVG's size (a sharp picture on a slide).
    assert (width, height) == (2 * int(root.get("width")), 2 * int(root.get("height")))
    assert 400 <= width <= 3000 and 300 <= height <= 3000


# --------------------------------------------------------------------------------------------
# The variants: label and mask agree, seconds and ratios apart, the legend whole.
# --------------------------------------------------------------------------------------------


def test_the_window_label_agrees_with_the_mask_and_the_measured_tables_are_apart(covered_page, lang):
    page = covered_page  # the folds stay as the page leaves them unless the test opens them
    goto_uncovered(page, "/lesson/8")
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
    # The measurements (implementation names, float32) are developer text: folded as 発展 in the
    # basic path, beside them the measured peak memory (None: not run, said in words).
    assert page.eval_on_selector("#var-measured", "d => d.tagName === 'DETAILS' && d.classList.contains('further')")
    assert page.text_content("#var-measured summary .further-badge") == i18n.catalog(lang)["ls_further"]
    memory = want.measured.memory.rows
    assert memory and any(row.full_mib is None for row in memory)
    for i, row in enumerate(memory):
        for key, mib in (("full", row.full_mib), ("chunked", row.chunked_mib), ("sdpa", row.sdpa_mib)):
            cell = f"#var-m-{key}-{i}"
            if mib is None:
                assert page.get_attribute(cell, "data-value") == ""
                assert page.text_content(cell) == getattr(L.default_sections()[8].strings["mem_not_run"], lang)
            else:
                assert values(page, cell) == [mib] and page.text_content(cell) == f"{round(mib):,}"
    # On the basic path (a fresh page, folds untouched) the measurements are folded, and a fold the
    # reader opened stays open when the sliders redraw the widget. The prediction committed above is
    # kept in this browser, so the widget itself is shown.
    page.goto("/lesson/8")
    page.wait_for_selector("#var-measured", state="attached")
    assert page.get_attribute('.predict-gate[data-widget="variants"]', "data-revealed") == "1"
    assert page.is_visible("#var-out")
    assert not page.eval_on_selector_all("details.further", "ds => ds.some((d) => d.open)")
    assert not page.eval_on_selector("#var-measured", "d => d.open") and not page.is_visible("#var-seconds")
    page.eval_on_selector("#var-measured", "d => { d.open = true; }")
    page.wait_for_function("() => document.querySelector('#var-measured').open")
    page.eval_on_selector("#var-r", "n => { n.value = '4'; n.dispatchEvent(new Event('input', { bubbles: true })); }")
    wait_request(page, "#var-out", {"reach": 4})
    assert page.is_visible("#var-seconds") and page.is_visible("#var-memory")
    # The chart's legend: every series name inside the picture.
    right, width = page.evaluate(
        "() => { const svg = document.querySelector('#var-out svg[aria-label] polyline').ownerSVGElement;"
        " const texts = [...svg.querySelectorAll('text')];"
        " return [Math.max(...texts.map((t) => t.getBBox().x + t.getBBox().width)), svg.viewBox.baseVal.width]; }"
    )
    assert right <= width, (right, width)
    assert_accessible(page)
