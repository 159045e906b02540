"""§9 (Transformers at work) in real headless Chromium, in Japanese and English: every widget shows
exactly the numbers its shipped model computes (recomputed here from the model, not through the
API), the families' masks are the three families' masks, the colour keys and 0–1 scales are there,
no text is under 12 px, and axe finds no serious or critical violation. Full-page screenshots are
kept in ``test-artifacts/lesson/``. Run with ``pytest -m browser tests/web/lesson/test_lesson_s09_browser.py``.
"""

from __future__ import annotations

import pytest
import torch
from lesson_browser import (
    ARTIFACTS_ROOT,
    BROWSER_MARKS,
    assert_accessible,
    close,
    goto_uncovered,
    make_page,
    params,
    shipped,
    values,
    wait_request,
    wait_widgets,
)

pytestmark = BROWSER_MARKS

from attnlab.web import lesson as L  # noqa: E402

ARTIFACTS = ARTIFACTS_ROOT / "lesson"
SECTION = L.load_sections()[9]
page = make_page(ARTIFACTS, timeout_ms=90_000, uncovered=False)  # its prediction's cover is tested here


def strings(lang: str) -> dict[str, str]:
    return {k: getattr(v, lang) for k, v in SECTION.strings.items()}


def table(pg, prefix: str, rows: int, cols: int) -> list[list[float]]:
    return [values(pg, ", ".join(f"#{prefix}-{r}-{c}" for c in range(cols))) for r in range(rows)]


@pytest.fixture(scope="module")
def models():
    from attnlab.loading import load_model

    return {
        "mlm": load_model(shipped("shakespeare-mlm"), family="lm"),
        "gpt": load_model(shipped("shakespeare-char"), family="lm"),
        "sum": load_model(shipped("facts-summarizer"), family="summarize"),
        "vit": load_model(shipped("digits-vit"), family="vision"),
        "gat": load_model(shipped("karate-gat"), family="graph"),
    }


def test_every_widget_draws_the_models_numbers(page, lang, models):
    s = strings(lang)
    goto_uncovered(page, "/lesson/9")
    wait_widgets(page)

    # The families: full, causal (lower triangle with the diagonal), and both plus source–target.
    def ticks(fig: str) -> list[bool]:
        return page.eval_on_selector_all(f"#fam-{fig} rect[data-ok]", "ns => ns.map(n => n.dataset.ok === 'true')")

    assert ticks("enc") == [True] * 16
    assert ticks("dec") == [j <= i for i in range(4) for j in range(4)]
    assert ticks("encdec") == [True] * 16 + [j <= i for i in range(3) for j in range(3)] + [True] * 12

    # Encoder-only: the masked LM's candidates and the [MASK] row of every head.
    model, tok = models["mlm"]
    text = s["mlm_ex_0"]
    wait_request(page, "#mlm-out", {"text": text})
    before, after = text.split("[MASK]")
    ids = [tok.bos_id, *tok.encode(before), tok.mask_id, *tok.encode(after), tok.eos_id]
    at = ids.index(tok.mask_id)
    with torch.inference_mode():
        out = model(torch.tensor([ids]), need_weights=True)
    probs = torch.softmax(out.logits[0, at], -1)
    close(values(page, "[id^=mlm-p-]"), probs.topk(8).values.tolist(), tol=1e-5)
    assert page.get_attribute("#mlm-best", "data-value") == tok.id_to_token(int(probs.argmax()))
    weights = torch.stack([w[0, :, at] for w in out.attentions]).reshape(-1, len(ids))  # (L·H, S)
    close(table(page, "mlm-w", weights.shape[0], len(ids)), weights.tolist(), tol=1e-5)

    # Question answering: the page computes qa_view's numbers (tests/web/lesson/test_lesson_s09.py recomputes
    # those from the model): the start and end probabilities, every head's question → passage row, the span.
    page.wait_for_selector("#qa-best")
    from attnlab.loading import load_model

    qa = L.qa_view(load_model(shipped("facts-qa"), family="qa"), L.QARequest()).model_dump()  # the page's reference
    C = len(qa["passage_tokens"])
    close(table(page, "qa-p", 2, C), [qa["start_probs"], qa["end_probs"]], tol=1e-6)
    L_, H_ = qa["n_layers"], qa["n_heads"]
    close(table(page, "qa-w", L_ * H_, C), [row for layer in qa["weights"] for row in layer], tol=1e-6)
    assert page.get_attribute("#qa-answer", "data-value") == qa["answer"] == page.text_content("#qa-answer")
    assert page.get_attribute("#qa-head", "data-value") == " ".join(map(str, qa["best_head"]))
    assert page.input_value("#qa-passage") == qa["passage"] and page.input_value("#qa-question") == qa["question"]

    # Decoder-only: the next character and the last position's causal row.
    model, tok = models["gpt"]
    text = s["gpt_ex_0"]
    wait_request(page, "#dec-out", {"text": text})
    ids = tok.encode(text)
    with torch.inference_mode():
        out = model(torch.tensor([ids]), need_weights=True)
    close(values(page, "[id^=dec-p-]"), torch.softmax(out.logits[0, -1], -1).topk(8).values.tolist(), tol=1e-5)
    rows = torch.stack([w[0, :, -1] for w in out.attentions]).reshape(-1, len(ids))
    close(table(page, "dec-w", rows.shape[0], len(ids)), rows.tolist(), tol=1e-5)
    assert page.locator("#dec-w thead th").count() == len(ids)  # no column after the last character

    # Encoder–decoder: the copy share of each word and the attention (document words down).
    from attnlab.data.text_tasks import make_summarization_task

    doc = make_summarization_task(3, seed=7)[0].document
    summary = models["sum"].summarize([doc], beam_size=1, return_attention=True)[0]
    close(values(page, "[id^=sum-word-]"), [1 - p for p in summary.p_gen], tol=1e-5)
    T, S = summary.attention.shape
    close(table(page, "sum-a", S, T), summary.attention.T.tolist(), tol=1e-5)

    # The ViT: [CLS]'s rows over the 16 patches, every layer and head, and the probabilities.
    from attnlab.data.digits import digits_splits

    vit, config = models["vit"]
    image = digits_splits(seed=0).test_x[2].float()
    with torch.inference_mode():
        out = vit(image[None], need_weights=True)
    close(values(page, "[id^=vit-p-]"), torch.softmax(out.logits[0], -1).tolist(), tol=1e-5)
    cls = torch.stack([w[0, :, 0, 1:] for w in out.attentions]).reshape(-1, 16)  # (L·H, P)
    close(table(page, "vit-w", cls.shape[0], 16), cls.tolist(), tol=1e-5)
    assert page.get_attribute("#vit-pred", "data-value") == str(int(out.logits.argmax()))

    # The GAT: member 0's weights over its friends and itself, per head and their mean.
    from attnlab.data.graphs import karate_club

    gat, _ = models["gat"]
    g = karate_club()
    with torch.inference_mode():
        first = gat(g.features, g.mask, need_weights=True).attentions[0][:, 0]  # (H, N)
    friends = [j for j in range(34) if bool(g.mask[0, j])]
    want = [[*first[:, j].tolist(), float(first[:, j].mean())] for j in friends]
    close(table(page, "gat-w", len(friends), first.shape[0] + 1), want, tol=1e-5)

    # The visual standard: the lesson's one colour key (figure.js) under every table of weights and
    # picture, its title first and then its ticks 0, 0.5 and 1.
    keys = {"mlm-key": "key_label", "qa-key": "key_label", "qa-prob-key": "qa_prob_key", "dec-key": "key_label",
            "sum-key": "key_label", "sum-copy-key": "sum_key", "vit-key": "vit_key", "gat-key": "key_label"}  # fmt: skip
    for key, title in keys.items():
        assert page.is_visible(f"#{key}"), key
        assert page.get_attribute(f"#{key}", "class") == "colour-key", key
        texts = page.eval_on_selector(f"#{key}", "n => Array.from(n.querySelectorAll('text')).map(t => t.textContent)")
        assert texts == [s[title], "0", "0.5", "1"], (key, texts)
    small = page.evaluate(
        "() => Array.from(document.querySelectorAll('#section .widget *')).filter(n => n.childNodes.length"
        " && Array.from(n.childNodes).some(c => c.nodeType === 3 && c.textContent.trim())"
        " && n.getClientRects().length && parseFloat(getComputedStyle(n).fontSize) < 12).map(n => n.textContent.slice(0, 20))"
    )
    assert not small, small
    assert_accessible(page)


def test_the_widgets_follow_their_controls_and_keep_them_in_the_address(page, lang, models):
    s = strings(lang)
    goto_uncovered(page, "/lesson/9")
    wait_widgets(page)
    page.click("#mlm-ex-1")
    wait_request(page, "#mlm-out", {"text": s["mlm_ex_1"]})
    assert params(page)["mlm"] == s["mlm_ex_1"]
    page.click("#sum-ex-2")
    page.wait_for_function("() => document.querySelector('#sum-ex-2').getAttribute('aria-pressed') === 'true'")
    from attnlab.data.text_tasks import make_summarization_task

    wait_request(page, "#sum-out", {"document": make_summarization_task(3, seed=7)[2].document})
    assert params(page)["doc"] == "2"
    page.click("#vit-next")
    wait_request(page, "#vit-out", {"index": 3})
    assert params(page)["img"] == "3"
    page.select_option("#gat-node", "8")
    wait_request(page, "#gat-out", {"node": 8})
    assert params(page)["node"] == "8"
    from attnlab.data.graphs import karate_club

    g = karate_club()
    friends = sorted(j for j in range(34) if j != 8 and bool(g.mask[8, j]))
    drawn = page.eval_on_selector_all("[id^=gat-edge-]", "ns => ns.map(n => Number(n.id.slice(9)))")
    assert sorted(drawn) == friends == [0, 2, 30, 32, 33]  # one drawn edge per friend, weighted
    # A reload with those parameters shows the same states.
    page.reload()
    wait_widgets(page)
    assert page.input_value("#mlm-text") == s["mlm_ex_1"] and page.input_value("#vit-index") == "3"
    assert page.input_value("#gat-node") == "8"


def test_a_bad_line_shows_the_apis_message_not_a_broken_widget(page, lang):
    goto_uncovered(page, "/lesson/9")
    wait_widgets(page)
    page.fill("#mlm-text", "no mask here")
    page.wait_for_selector("#mlm-error:not(.hidden)")
    assert "[MASK]" in page.text_content("#mlm-error")
    page.fill("#mlm-text", "O my l[MASK]rd")
    wait_request(page, "#mlm-out", {"text": "O my l[MASK]rd"})
    assert page.is_hidden("#mlm-error")
    # The question answerer: a passage too long for its window is the API's message; a question of
    # one's own is answered from the passage (the address keeps it).
    page.fill("#qa-passage", "a " * 190)
    page.wait_for_selector("#qa-error:not(.hidden)")
    assert "too long" in page.text_content("#qa-error")
    passage = "Lirma Tovaskel was born in Oslo in 1962. Brunt Okelavi founded Harrow Labs in 1990."
    page.fill("#qa-passage", passage)
    page.fill("#qa-question", "When did Brunt Okelavi found Harrow Labs?")
    wait_request(page, "#qa-out", {"passage": passage, "question": "When did Brunt Okelavi found Harrow Labs?"})
    assert page.is_hidden("#qa-error")
    assert params(page)["qq"] == "When did Brunt Okelavi found Harrow Labs?"
    answer = page.get_attribute("#qa-answer", "data-value")
    assert answer and answer in passage
