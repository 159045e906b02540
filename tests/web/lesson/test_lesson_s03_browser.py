"""§3 of the lesson in real headless Chromium (Debian's, driven by Playwright), in Japanese and
English: the three books' softmax line and weighted sum, and additive vs dot-product attention on
the shipped rnn-attention model. Every number on the page is compared with attnlab's own Python
computation, the widgets are driven by the keyboard alone, axe-core finds no serious or critical
violation, and screenshots are kept in ``test-artifacts/lesson/`` (git-ignored): the whole page,
and each widget alone (``s03-books-LANG.png``, ``s03-additive-LANG.png``).

Run with ``pytest -m browser tests/web/lesson/test_lesson_s03_browser.py``; without /usr/bin/chromium the
tests skip.
"""

from __future__ import annotations

import pytest
import torch
from lesson_browser import (
    ARTIFACTS_ROOT,
    BROWSER_MARKS,
    assert_accessible,
    make_page,
    params,
    shipped,
    tab_to,
    values,
    wait_request,
    wait_widgets,
)

from attnlab import functional as AF
from attnlab.web import lesson as L
from attnlab.web.lesson import s03_query_key_value as S3

ARTIFACTS = ARTIFACTS_ROOT / "lesson"

pytestmark = BROWSER_MARKS
TIMEOUT_MS = 30_000
SECTION = L.load_sections()[3]


@pytest.fixture(scope="module")
def rnn():
    from attnlab.loading import load_model

    return load_model(shipped("rnn-attention"))


page = make_page(ARTIFACTS, timeout_ms=TIMEOUT_MS)


def cells(pg, selector: str) -> torch.Tensor:
    """A heatmap's cells (heatmap.js keeps row, column and value in data attributes) as a matrix."""
    found = pg.eval_on_selector_all(
        f"{selector} .cell", "ns => ns.map(n => [+n.dataset.r, +n.dataset.c, +n.dataset.v])"
    )
    rows, cols = max(r for r, _, _ in found) + 1, max(c for _, c, _ in found) + 1
    out = torch.full((rows, cols), float("nan"), dtype=torch.float64)
    for r, c, v in found:
        out[r, c] = v
    return out


def close(got, want, tol: float = 1e-12) -> None:
    torch.testing.assert_close(
        torch.as_tensor(got, dtype=torch.float64), torch.as_tensor(want, dtype=torch.float64), atol=tol, rtol=0
    )


def f3(x: float) -> str:
    return f"{x:.3f}"


def s(key: str, lang: str, **names) -> str:
    text = getattr(SECTION.strings[key], lang)
    for name, value in names.items():
        text = text.replace("{" + name + "}", str(value))
    return text


# --------------------------------------------------------------------------------------------
# The three books: the softmax written out, the values and their weighted sum.
# --------------------------------------------------------------------------------------------


def assert_books_equal(pg, want: S3.ThreeBooks) -> None:
    close(values(pg, "[id^=qkv-raw-]"), want.raw)
    close(values(pg, "[id^=qkv-scaled-]"), want.scaled)
    close(values(pg, "[id^=qkv-exp-]"), want.exp)
    close(values(pg, "[id^=qkv-weight-]"), want.weights)
    close(values(pg, "[id^=qkv-sum-]"), want.output)
    assert float(pg.get_attribute("#qkv-softmax", "data-sum")) == want.exp_sum
    for i, v in enumerate(want.values):
        assert pg.text_content(f"#qkv-value-{i}") == "[" + ", ".join(str(int(x)) for x in v) + "]"
    # The worked lines: each component's sum written out with the numbers shown above.
    for j, out in enumerate(want.output):
        terms = " + ".join(f"{f3(w)}×{int(v[j])}" for w, v in zip(want.weights, want.values))
        assert pg.text_content(f"#qkv-sum-{j}") == f"{terms} = {f3(out)}"
    # The softmax in one line, book 1: exp(a) / (exp(a) + exp(b) + exp(c)) = e / Σ = w.
    inputs = [f"exp({f3(x)})" for x in want.scaled]
    line = f"{inputs[0]} / ({' + '.join(inputs)}) = {f3(want.exp[0])} / {f3(want.exp_sum)} = {f3(want.weights[0])}"
    assert pg.text_content("#qkv-softmax") == line


def test_three_books_show_the_softmax_and_the_weighted_sum(page, lang):
    page.goto("/lesson/3")
    wait_request(page, "#qkv-out", {"scores": [8, 4, 2], "d_k": 64, "scale": True})
    want = S3.three_books()
    assert_books_equal(page, want)
    # The brief's worked example, as a student reads it.
    assert page.text_content("#qkv-softmax") == (
        "exp(1.000) / (exp(1.000) + exp(0.500) + exp(0.250)) = 2.718 / 5.651 = 0.481"
    )
    assert page.text_content("#qkv-sum-0") == "0.481×2 + 0.292×0 + 0.227×1 = 1.189"
    assert page.text_content("#qkv-output") == "o = 0.481·v₁ + 0.292·v₂ + 0.227·v₃ = [1.189, 0.811, 0.773]"
    # The caveat stands next to the d_k control, in books mode only.
    assert page.text_content("#qkv-dk-note") == s("dk_books_note", lang)
    # By keyboard: book 2's score up to 10 (ten steps of 0.5), then no division.
    page.focus("#qkv-score-1")
    for _ in range(12):
        page.keyboard.press("ArrowRight")
    wait_request(page, "#qkv-out", {"scores": [8, 10, 2], "d_k": 64, "scale": True})
    assert params(page)["s"] == "8,10,2"
    more = S3.three_books([8, 10, 2])
    assert_books_equal(page, more)
    assert more.weights[1] > more.weights[0]  # book 2 overtakes book 1
    tab_to(page, "#qkv-scale")
    page.keyboard.press("Space")
    wait_request(page, "#qkv-out", {"scores": [8, 10, 2], "scale": False})
    assert_books_equal(page, S3.three_books([8, 10, 2], scale=False))
    assert page.text_content("#qkv-dk-note") == s("dk_no_effect", lang) and page.is_disabled("#qkv-dk")
    # The provenance is folded away in a technical note.
    memo = page.locator("#widget-qkv details.memo")
    assert memo.count() == 1 and memo.get_attribute("open") is None
    assert "engine/lessonmath.js" in memo.text_content() and "/api/" not in memo.text_content()
    outside = "n => { const c = n.cloneNode(true); c.querySelectorAll('details').forEach((d) => d.remove()); return c.textContent; }"
    assert "/api/" not in page.locator("#qkv-out").evaluate(outside)  # none in the text a student reads
    assert_accessible(page)


def test_a_predict_question_link_opens_the_state_it_asks_about(page, lang):
    """問1: add 2 to every score; its "now try it" link shows the same weights as 8, 4, 2."""
    q = next(i for i, q in enumerate(SECTION.check) if q.params.get("s") == "10,6,4")
    page.goto(f"/lesson/3?{'&'.join(f'{k}={v}' for k, v in SECTION.check[q].params.items())}")
    wait_request(page, "#qkv-out", {"scores": [10, 6, 4], "d_k": 64, "scale": True})
    shifted = S3.three_books([10, 6, 4])
    assert_books_equal(page, shifted)
    assert [f3(w) for w in shifted.weights] == [f3(w) for w in S3.three_books().weights]


# --------------------------------------------------------------------------------------------
# Additive vs dot-product attention on the shipped rnn-attention translator.
# --------------------------------------------------------------------------------------------


def model_maps(rnn, text: str) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """The model's own attention when it translates ``text``, and the scaled dot product of the
    same projected query and keys, computed here from states caught by a hook on the model.

    Shape:
        additive ``(T, S)``, dot ``(T, S)``
    """
    model, tok = rnn.model, rnn.tgt_tok
    out = rnn.translate([text], beam_size=1, return_attention=True)[0]
    caught = []
    hook = model.decoder.attention.register_forward_pre_hook(lambda _m, args: caught.append(args))
    try:
        with torch.inference_mode():
            src = torch.tensor([rnn.src_tok.encode(text)])
            model(src, torch.tensor([[tok.bos_id] + tok.encode(out.text)]), need_weights=True)
    finally:
        hook.remove()
    additive = model.decoder.attention.additive
    with torch.inference_mode():
        q = additive.q_proj(torch.cat([args[0] for args in caught]))  # (T, A)
        memory, keys = caught[0][1][0], caught[0][3][0]  # (S, D), (S, A)
        _, dot = AF.scaled_dot_product_attention(q, keys, memory, return_weights=True, backend="math")
    return out.cross_attention[0, 0].double(), dot.double(), out.tgt_tokens


def test_additive_and_dot_product_maps_equal_the_model(page, lang, rnn):
    page.goto("/lesson/3")
    wait_request(page, "#av-out", {"text": S3.DEFAULT_NUMBERS})
    wait_widgets(page)
    additive, dot, tokens = model_maps(rnn, S3.DEFAULT_NUMBERS)
    close(cells(page, "#av-map-add"), additive, tol=2e-6)
    # The page (engine/rnn.js) takes the dot products of the graph's float32 projected query and
    # keys in float64; PyTorch sums them in float32, about 5e-6 apart on these weights (issue 36's
    # in-page contract: within 1e-4).
    close(cells(page, "#av-map-dot"), dot, tol=1e-5)
    assert page.text_content("#av-translation") == "四万七千九十三、四百五、九"
    same = int((additive.argmax(-1) == dot.argmax(-1)).sum())
    assert page.text_content("#av-same") == s("av_same_top", lang, n=same, t=len(tokens))
    T, S, A = additive.shape[0], additive.shape[1], rnn.model.config.attn_dim
    assert page.text_content("#av-cost") == s(
        "av_cost", lang, t=T, s=S, a=A, pairs=f"{T * S:,}", hidden=f"{T * S * A:,}"
    )
    assert page.is_visible("#av-not-used") and page.text_content("#av-not-used") == s("av_not_used", lang)
    close(values(page, "[id^=av-add-weight-]"), additive[0], tol=2e-6)
    close(values(page, "[id^=av-dot-weight-]"), dot[0], tol=1e-5)
    # By keyboard: the output token 千 (row 3), as the "try this" prompt says.
    tab_to(page, "#av-row-3")
    page.keyboard.press("Enter")
    assert params(page)["row"] == "3" and page.get_attribute("#av-row-3", "aria-pressed") == "true"
    assert page.evaluate("() => document.activeElement.id") == "av-row-3"  # the focus stays
    assert page.text_content("#av-row-title") == s("av_row_title", lang, tok="千")
    close(values(page, "[id^=av-add-weight-]"), additive[3], tol=2e-6)
    close(values(page, "[id^=av-dot-weight-]"), dot[3], tol=2e-6)
    assert page.text_content("#av-add-weight-2.av-best") == f3(float(additive[3, 2]))  # ▁thousand
    # An example by keyboard: a new sentence, new maps.
    tab_to(page, "#av-ex-1")
    page.keyboard.press("Enter")
    wait_request(page, "#av-out", {"text": "twelve and three hundred"})
    assert params(page)["numbers"] == "twelve and three hundred" and "row" not in params(page)
    additive, dot, _ = model_maps(rnn, "twelve and three hundred")
    close(cells(page, "#av-map-add"), additive, tol=2e-6)
    # The page (engine/rnn.js) takes the dot products of the graph's float32 projected query and
    # keys in float64; PyTorch sums them in float32, about 5e-6 apart on these weights (issue 36's
    # in-page contract: within 1e-4).
    close(cells(page, "#av-map-dot"), dot, tol=1e-5)
    assert page.input_value("#av-text") == "twelve and three hundred"
    assert_accessible(page)


def test_a_typed_list_and_a_teachers_link(page, lang, rnn):
    text = "nine thousand and eight"
    page.goto(f"/lesson/3?numbers={text.replace(' ', '+')}&row=2")
    wait_request(page, "#av-out", {"text": text})
    assert page.input_value("#av-text") == text and page.get_attribute("#av-row-2", "aria-pressed") == "true"
    additive, dot, tokens = model_maps(rnn, text)
    close(values(page, "[id^=av-add-weight-]"), additive[2], tol=2e-6)
    page.fill("#av-text", "seven and eleven")
    wait_request(page, "#av-out", {"text": "seven and eleven"})
    additive, _, _ = model_maps(rnn, "seven and eleven")
    close(cells(page, "#av-map-add"), additive, tol=2e-6)
    # Too long a list: the API's message in the widget's error box, the last maps kept.
    page.fill("#av-text", "one and " * 20)
    page.wait_for_selector("#av-error:not(.hidden)")
    assert "24" in page.text_content("#av-error")


def test_screenshots_of_section_3(page, lang, rnn):
    """The pictures the README may show: each §3 widget alone, in both languages."""
    page.goto("/lesson/3")
    wait_request(page, "#qkv-out", {"scores": [8, 4, 2]})
    wait_request(page, "#av-out", {"text": S3.DEFAULT_NUMBERS})
    wait_widgets(page)
    page.evaluate("() => document.fonts.ready.then(() => true)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for widget, name in (("#widget-qkv", "books"), ("#widget-additive-vs-dot", "additive")):
        box = page.locator(widget)
        box.screenshot(path=str(ARTIFACTS / f"s03-{name}-{lang}.png"))
        assert box.bounding_box()["width"] > 900  # full width, not squeezed
    # The two maps stand side by side, their grids level with each other.
    add, dot = page.locator("#av-map-add").bounding_box(), page.locator("#av-map-dot").bounding_box()
    assert dot["x"] > add["x"] + add["width"] and abs(add["y"] + add["height"] - dot["y"] - dot["height"]) < 2
