"""§1 and §2 of the lesson in real headless Chromium (Debian's, driven by Playwright), in Japanese
and English: the widgets' numbers equal attnlab's own computation (or, for measured times, the
numbers the timing functions returned through the API), the widgets work from the keyboard, the
provenance lines are folded into the 技術メモ, a wrong first answer gets a hint and a second try,
and axe-core finds no serious or critical violation. Full-page screenshots are kept in
``test-artifacts/lesson/``. Run with ``pytest -m browser tests/web/lesson/test_lesson_s01_s02_browser.py``.
"""

from __future__ import annotations

import re

import pytest
import torch
from lesson_browser import (
    ARTIFACTS_ROOT,
    BROWSER_MARKS,
    assert_accessible,
    close,
    make_page,
    params,
    shipped,
    tab_to,
    values,
    wait_request,
)

ARTIFACTS = ARTIFACTS_ROOT / "lesson"
TIMEOUT_MS = 60_000

pytestmark = BROWSER_MARKS


from attnlab.data.enja import normalize_input  # noqa: E402
from attnlab.web import lesson as LV  # noqa: E402
from attnlab.web.lesson import s01_what_attention_does as S1  # noqa: E402

SECTIONS = LV.load_sections()


@pytest.fixture(scope="module")
def ja_en():
    from attnlab.loading import load_model

    return load_model(shipped("ja-en"))


@pytest.fixture(scope="module")
def rnns():
    from attnlab.loading import load_model

    return {name: load_model(shipped(name)) for name in ("rnn-plain", "rnn-attention")}


page = make_page(ARTIFACTS, timeout_ms=TIMEOUT_MS)


def steps_answer(pg, rnns, ja_en, **body) -> dict:
    """What §1's parallel-steps widget must show for ``body``: the Python view over the same
    measurements the page reads (the site's ``data/parallel-steps.json``, measured once)."""
    data = pg.request.get("/static/data/parallel-steps.json").json()
    return S1.parallel_steps(rnns["rnn-attention"], ja_en, S1.StepsRequest(**body), data).model_dump()


def memos_are_folded(pg, widget: str, provenance: str) -> None:
    """The widget's provenance line is inside a closed 技術メモ, and nowhere else in the widget."""
    memo = pg.locator(f"{widget} details.memo")
    assert memo.count() >= 1 and memo.first.get_attribute("open") is None
    assert provenance in memo.first.text_content() and not pg.locator(f"{widget} .memo p").first.is_visible()
    outside = pg.evaluate(
        "([w, text]) => Array.from(document.querySelectorAll(w + ' p')).filter(p => !p.closest('details'))"
        ".some(p => p.textContent.includes(text))",
        [widget, provenance],
    )
    assert not outside


def answer_with_a_second_try(pg, n: int, lang: str) -> None:
    """Question i: a wrong first answer gets the hint and a second try, then the right one."""
    for i, q in enumerate(SECTIONS[n].check):
        wrong = next(j for j in range(len(q.choices)) if j != q.answer)
        pg.check(f"#question-{i} input[value='{wrong}']")
        pg.click(f"#q{i}-submit")
        feedback = pg.locator(f"#q{i}-feedback")
        assert feedback.get_attribute("data-result") == "retry"
        assert feedback.locator(".hint").text_content() == getattr(q.hint, lang)
        pg.check(f"#question-{i} input[value='{q.answer}']")
        pg.click(f"#q{i}-submit")
        assert feedback.get_attribute("data-result") == "correct"
        assert feedback.locator(".explanation").text_content() == getattr(q.explanation, lang)


# --------------------------------------------------------------------------------------------
# §1.
# --------------------------------------------------------------------------------------------


def test_section_1_translation_steps_and_times_equal_attnlab(page, lang, ja_en, rnns):
    strings = SECTIONS[1].strings
    sentence = getattr(strings["default_sentence"], lang)
    page.goto("/lesson/1")
    wait_request(page, "#tr-out", {"text": sentence})
    want = ja_en.translate([sentence], beam_size=1, return_attention=True)[0]
    assert page.text_content("#tr-translation") == want.text
    close(values(page, "[id^=tr-w-]"), want.cross_attention[-1].mean(0)[1].tolist(), tol=1e-5)  # '▁walk'
    memos_are_folded(page, "#widget-translation", "engine/translation_views.js")

    wait_request(page, "#ps-out", {"text": sentence, "batch": 32})
    T = len(ja_en.src_tok.encode(normalize_input(sentence, "ja")))
    lengths = list(S1.STEP_LENGTHS)
    assert values(page, "[id^=ps-rnn-]:not([id^=ps-rnn-ms-])") == lengths  # T steps in a row
    assert values(page, "[id^=ps-tr-]:not([id^=ps-tr-ms-])") == [1] * len(lengths)  # one step
    api = steps_answer(page, rnns, ja_en, text=sentence, batch=32)
    assert values(page, "[id^=ps-rnn-ms-]") == api["rnn_train_ms"]  # measured once, then remembered
    assert values(page, "[id^=ps-tr-ms-]") == api["transformer_train_ms"]
    assert values(page, "[id^=ps-ratio-]") == api["ratio"]
    rnn_layer, transformer_layer = S1.comparison_layers()
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    digits = re.sub(r"\D", "", page.text_content("#ps-layers"))
    for number in (
        rnn_layer.hidden_size,
        count(rnn_layer),
        transformer_layer.self_attn.n_heads,
        count(transformer_layer),
    ):
        assert str(number) in digits
    sentence_line = page.text_content("#ps-sentence")
    assert f"{T}" in sentence_line and getattr(strings["sentence_line"], lang).split("{")[0] in sentence_line
    assert page.get_attribute("#ps-verdict", "data-faster") == api["faster"][-1]
    shipped = page.locator("#ps-shipped")
    assert float(shipped.get_attribute("data-rnn-ms")) == api["shipped"]["rnn_ms"]
    assert float(shipped.get_attribute("data-transformer-ms")) == api["shipped"]["transformer_ms"]
    assert shipped.get_attribute("data-faster") == api["shipped"]["faster"]
    assert str(rnns["rnn-attention"].model.config.hidden_size) in shipped.text_content()
    memos_are_folded(page, "#widget-parallel-steps", "data/parallel-steps.json")
    assert api["machine"] in page.locator("#widget-parallel-steps details.memo").first.text_content()

    # The sentence typed above is the one counted here.
    longer = sentence + sentence
    page.fill("#tr-text", longer)
    wait_request(page, "#ps-out", {"text": longer})
    n = len(ja_en.src_tok.encode(normalize_input(longer, "ja")))
    assert str(n) in page.text_content("#ps-sentence")
    answer_with_a_second_try(page, 1, lang)
    assert_accessible(page)


def test_section_1_batch_from_the_keyboard_and_a_try_link(page, lang, ja_en, rnns):
    page.goto("/lesson/1")
    wait_request(page, "#ps-out", {"batch": 32})
    tab_to(page, "#ps-batch")
    page.keyboard.press("ArrowUp")  # 32 → 8
    wait_request(page, "#ps-out", {"batch": 8})
    page.keyboard.press("ArrowUp")  # 8 → 1
    wait_request(page, "#ps-out", {"batch": 1})
    assert params(page)["batch"] == "1" and page.input_value("#ps-batch") == "1"
    api = steps_answer(page, rnns, ja_en, batch=1, text=params(page)["text"])
    assert values(page, "[id^=ps-rnn-ms-]") == api["rnn_train_ms"]
    assert values(page, "[id^=ps-ratio-]") == api["ratio"]
    assert f"{api['batch']}" in page.text_content("#ps-table caption")
    # A batch in the address opens the table with that batch (the Going further try item's link);
    # then a check question answered from the keyboard.
    assert any(t.params.get("batch") == "1" for t in SECTIONS[1].try_)
    page.goto("/lesson/1?batch=8")
    wait_request(page, "#ps-out", {"batch": 8})
    assert page.input_value("#ps-batch") == "8"
    q = 0
    tab_to(page, f"#question-{q} input")
    page.keyboard.press("Space")
    tab_to(page, f"#q{q}-submit")
    page.keyboard.press("Enter")
    assert page.get_attribute(f"#q{q}-feedback", "data-result") in ("correct", "retry")
    assert_accessible(page)


# --------------------------------------------------------------------------------------------
# §2.
# --------------------------------------------------------------------------------------------


def test_section_2_widgets_equal_attnlab_from_the_keyboard(page, lang, rnns):
    plain, attention = rnns["rnn-plain"], rnns["rnn-attention"]
    page.goto("/lesson/2")
    wait_request(page, "#bn-out", {"example": 0})
    source, reference = LV.long_examples()[0]
    assert page.input_value("#bn-text") == source and page.text_content("#bn-reference") == reference
    with_att = attention.translate([source], beam_size=1, return_attention=True)[0]
    assert page.text_content("#bn-att-out") == with_att.text
    assert page.text_content("#bn-plain-out") == plain.translate([source], beam_size=1)[0].text
    with torch.no_grad():
        final = plain.model.encode(torch.tensor([plain.src_tok.encode(source)])).final[0][-1][0]  # (D,)
    close(values(page, "#bn-vector rect"), final.tolist(), tol=6e-5)
    memos_are_folded(page, "#widget-bottleneck", "engine/rnn.js")
    tab_to(page, "#bn-next")
    page.keyboard.press("Enter")
    wait_request(page, "#bn-out", {"example": 1})
    assert params(page)["ex"] == "1" and page.text_content("#bn-reference") == LV.long_examples()[1][1]
    page.wait_for_function("() => document.querySelector('#bl-out').dataset.seq === '1'", timeout=180_000)
    memos_are_folded(page, "#widget-bleu-by-length", "static/data/bleu-by-length.json")
    assert str(len(LV.bottleneck_pairs())) in page.text_content("#bl-data")
    # The short-input question's try link: the same count of numbers, and the model's own output.
    q = next(q for q in SECTIONS[2].check if q.params.get("nums"))
    page.goto("/lesson/2?" + "&".join(f"{k}={v.replace(' ', '+')}" for k, v in q.params.items()))
    wait_request(page, "#bn-out", {"text": q.params["nums"]})
    assert len(values(page, "#bn-vector rect")) == plain.model.config.hidden_size
    assert page.text_content("#bn-plain-out") == plain.translate([q.params["nums"]], beam_size=1)[0].text
    answer_with_a_second_try(page, 2, lang)
    assert_accessible(page)
