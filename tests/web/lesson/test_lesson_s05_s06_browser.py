"""§5 and §6 in real headless Chromium, in Japanese and English: the corrected widgets show
attnlab's own numbers (the tutorial's join, the three influence grids, the causal-mask column, the
RoPE scores), the figures have titles and colour keys, the RoPE figure sits after its text, the
widgets work from the keyboard, and axe finds no serious or critical violation. Full-page
screenshots go to ``test-artifacts/lesson/`` (git-ignored).

Run with ``pytest -m browser tests/web/lesson/test_lesson_s05_s06_browser.py``; without /usr/bin/chromium the
tests skip.
"""

from __future__ import annotations

import pytest
from lesson_browser import (
    ARTIFACTS_ROOT,
    BROWSER_MARKS,
    assert_accessible,
    close,
    goto_uncovered,
    make_page,
    params,
    section_drawn,
    tab_to,
    values,
    wait_request,
)

from attnlab.web import lesson as L

ARTIFACTS = ARTIFACTS_ROOT / "lesson"

pytestmark = BROWSER_MARKS
TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def sections():
    return L.default_sections()


page = make_page(ARTIFACTS, timeout_ms=TIMEOUT_MS)
# A page that does not commit the predictions by itself (AUTO_UNCOVER): for the test of a prediction's
# cover, which the learner lifts only by committing a choice.
covered_page = make_page(ARTIFACTS, timeout_ms=TIMEOUT_MS, uncovered=False)


def attr_grid(pg, prefix: str, rows: int, cols: int, attr: str = "data-value") -> list[list[str]]:
    return [[pg.get_attribute(f"#{prefix}-{r}-{c}", attr) for c in range(cols)] for r in range(rows)]


def fill(text: str, **vars) -> str:
    for k, v in vars.items():
        text = text.replace("{" + k + "}", str(v))
    return text


# --------------------------------------------------------------------------------------------
# §5: the tutorial's split and join.
# --------------------------------------------------------------------------------------------


def check_no_transpose(pg, want, s) -> None:
    """The no-transpose widget shows ``want``'s pieces, grids, count and difference."""
    bad, T, H = want.without_transpose, len(want.tokens), want.n_heads
    for prefix, pieces in (("nt-pieces-bad", bad.pieces), ("nt-pieces-ok", bad.pieces_correct)):
        words = attr_grid(pg, prefix, T, H, "data-word")
        heads = attr_grid(pg, prefix, T, H, "data-head")
        assert [
            [(int(w), int(h)) for w, h in zip(rw, rh, strict=True)] for rw, rh in zip(words, heads, strict=True)
        ] == [[tuple(p) for p in row] for row in pieces]
    marked = pg.eval_on_selector_all("#nt-pieces-bad .nt-foreign", "ns => ns.map(n => n.id)")
    foreign = [f"nt-pieces-bad-{i}-{b}" for i, row in enumerate(bad.pieces) for b, (t, _) in enumerate(row) if t != i]
    assert sorted(marked) == sorted(foreign)
    assert int(pg.get_attribute("#nt-foreign", "data-value")) == len(foreign)
    for prefix, grid in (
        ("nt-inf-ok", bad.influence_correct),
        ("nt-inf-split", bad.influence_split),
        ("nt-inf-merged", bad.influence_merged),
    ):
        assert attr_grid(pg, prefix, T, T) == [["true" if v else "false" for v in row] for row in grid], prefix
    close(values(pg, "#nt-diff-value"), [bad.max_abs_diff])
    # Each grid is labelled with the stage it is computed at.
    captions = pg.eval_on_selector_all(
        "#nt-out .pair figure.matrix-fig > figcaption", "ns => ns.map(n => n.textContent)"
    )
    for key in ("influence_ok", "influence_split", "influence_merged", "pieces_ok", "pieces_bad"):
        assert s(key) in captions, key


def test_the_missing_transpose_split_and_join_equal_attnlab(page, lang, sections):
    s5 = sections[5]
    s = lambda key: getattr(s5.strings[key], lang)  # noqa: E731
    words = s("default_words")
    goto_uncovered(page, "/lesson/5")
    wait_request(page, "#nt-out", {"text": words, "d_model": 8, "n_heads": 2})
    want = L.multihead_example(words, d_model=8, n_heads=2)
    check_no_transpose(page, want, s)
    # The keyboard alone: the heads select of the steps widget (3 does not divide 8: skipped).
    tab_to(page, "#mh-heads")
    page.keyboard.press("ArrowDown")
    wait_request(page, "#mh-out", {"n_heads": 4})
    wait_request(page, "#nt-out", {"n_heads": 4})  # the no-transpose widget follows the address
    assert params(page)["heads"] == "4"
    check_no_transpose(page, L.multihead_example(words, d_model=8, n_heads=4), s)
    tab_to(page, "#nt-word")
    page.keyboard.press("ArrowDown")  # the second word's H×H table
    four = L.multihead_example(words, d_model=8, n_heads=4)
    page.wait_for_function("() => document.querySelector('#nt-word').value === '1'")
    got = [[float(x) for x in row] for row in attr_grid(page, "nt-map", 4, 4)]
    close([x for row in got for x in row], [x for row in four.without_transpose.weights[1] for x in row])
    # A single head: the join moves nothing, the split's mistake remains.
    goto_uncovered(page, "/lesson/5?heads=1")
    wait_request(page, "#nt-out", {"n_heads": 1})
    one = L.multihead_example(words, d_model=8, n_heads=1)
    check_no_transpose(page, one, s)
    assert page.text_content("#nt-foreign") == s("foreign_none")
    # Provenance is folded into a technical note.
    assert page.locator("#nt-out details.memo").count() == 1 and "/api/lesson/multihead" not in page.inner_text(
        "#nt-out"
    )
    assert_accessible(page)


# --------------------------------------------------------------------------------------------
# §6: the causal mask, the figures, RoPE.
# --------------------------------------------------------------------------------------------


def test_causal_column_figures_and_rope_equal_attnlab(page, lang, sections):
    s6 = sections[6]
    s = lambda key, **v: fill(getattr(s6.strings[key], lang), **v)  # noqa: E731
    goto_uncovered(page, "/lesson/6")
    wait_request(page, "#wo-out", {"a": "猫 が 犬 を 追う", "b": "犬 が 猫 を 追う"})
    want = L.word_order(L.WordOrderRequest())
    close(values(page, "[id^=wo-causal-]:not(#wo-causal-sentence)"), want.causal_without_positions.diff)
    close(values(page, "#wo-causal-sentence"), [want.causal_without_positions.sentence_diff])
    badges = page.eval_on_selector_all(
        "[id^=wo-causal-]:not(#wo-causal-sentence) .badge", "ns => ns.map(n => n.textContent)"
    )
    assert badges == [s("differs")] * 3 + [s("same")] * 2  # を and 追う see the same words in both
    assert page.locator("#wo-out details.memo").count() == 1 and "/api/" not in page.inner_text("#wo-table")

    # Every figure has a title, and each heatmap a colour key.
    wait_request(page, "#pe-out", {"length": 16, "d_model": 32})
    wait_request(page, "#rope-out", {"seed": 0})
    titles = {
        "#pe-fig-table": s("table_title", t=16, d=32),
        "#pe-fig-sim": s("sim_title"),
        "#pe-fig-row": s("sim_row", p=3),
        "#rope-fig": s("rope_title"),
    }
    for fig, title in titles.items():
        assert page.text_content(f"{fig} > figcaption.pe-title") == title, fig
    for key, label in (("#pe-key-table", s("key_table")), ("#pe-key-sim", s("key_sim"))):
        assert page.get_attribute(key, "aria-label") == label
    rope = L.rope_scores()
    limit = max(abs(v) for row in rope.scores for v in row)
    assert page.get_attribute("#rope-key", "aria-label") == s("key_rope", v=f"{limit:.2f}")

    # The RoPE figure comes after the paragraph that explains RoPE (in document order: both may sit in a fold).
    order = page.evaluate(
        "() => { const text = Array.from(document.querySelectorAll('#section .lesson-text'))"
        ".find((k) => k.textContent.includes('q · (R(n − m) k)'));"
        " const pe = document.querySelector('#widget-pe-table'), rope = document.querySelector('#widget-rope-scores');"
        " const before = (a, b) => !!(a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING);"
        " return [!!text, !!text && before(pe, text), !!text && before(text, rope)]; }"
    )
    assert order == [True, True, True], order

    # RoPE's numbers: the heatmap, q and k, and the main diagonal against the unrotated q·k/√D.
    def check_rope(want) -> None:
        cells = page.eval_on_selector_all(
            "#rope-map .cell", "ns => ns.map(n => [+n.dataset.r, +n.dataset.c, +n.dataset.v])"
        )
        assert len(cells) == want.length**2
        for r, c, v in cells:
            assert v == pytest.approx(want.scores[r][c], abs=1e-12)
        close([float(x) for x in attr_grid(page, "rope-qk", 2, want.d_model)[0]], want.q)
        close(values(page, "#rope-diagonal"), [want.scores[0][0]])
        close(values(page, "#rope-plain-value"), [want.plain])

    check_rope(rope)
    # The keyboard alone: another q and k, then back.
    tab_to(page, "#rope-redraw")
    page.keyboard.press("Enter")
    wait_request(page, "#rope-out", {"seed": 1})
    assert params(page)["rseed"] == "1" and page.evaluate("() => document.activeElement.id") == "rope-redraw"
    check_rope(L.rope_scores(seed=1))
    assert page.text_content("#rope-seed") == s("rope_pair", n=2)
    tab_to(page, "#rope-reset")
    page.keyboard.press("Enter")
    wait_request(page, "#rope-out", {"seed": 0})
    assert "rseed" not in params(page)
    check_rope(rope)
    assert_accessible(page)


def test_the_word_order_prediction_is_asked_before_its_widget_shows(covered_page, lang, sections):
    """§6's prediction at the two-sentence table: the table stays covered until a choice is
    committed, then shows the numbers the prediction asked about."""
    page = covered_page  # nothing commits the prediction but the test's own click
    p = next(p for p in sections[6].predict if p.widget == "word-order")
    page.goto("/lesson/6")
    section_drawn(page)
    # Covered: the question sits right above the widget, which is out of sight and out of reach
    # (inert: no focus, no click), the cover in its place.
    gate = page.locator('.predict-gate[data-widget="word-order"]')
    assert gate.get_attribute("id") == "predict-0-gate" and gate.get_attribute("data-revealed") == "0"
    assert page.eval_on_selector("#predict-0", "f => f.nextElementSibling.id === 'predict-0-gate'")
    assert not page.is_visible("#widget-word-order") and page.is_visible("#predict-0-cover")
    assert page.eval_on_selector("#widget-word-order", "n => n.inert")
    assert page.text_content("#predict-0 .q-text") == getattr(p.question, lang)
    page.check(f'#predict-0 input[value="{p.answer}"]')
    page.click("#predict-0-submit")
    assert page.get_attribute("#predict-0-gate", "data-revealed") == "1"
    assert page.is_visible("#widget-word-order") and not page.is_visible("#predict-0-cover")
    assert not page.eval_on_selector("#widget-word-order", "n => n.inert")
    assert page.get_attribute("#predict-0-feedback", "data-result") == "correct"
    assert getattr(p.explanation, lang) in page.text_content("#predict-0-feedback")
    wait_request(page, "#wo-out", {"a": "猫 が 犬 を 追う", "b": "犬 が 猫 を 追う"})
    want = L.word_order(L.WordOrderRequest())
    close(values(page, "[id^=wo-none-]:not(#wo-none-sentence)"), want.without_positions.diff)
