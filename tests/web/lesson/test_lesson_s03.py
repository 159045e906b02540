"""§3 of the lesson (query, key, value): the three books' reference numbers (which the page's
JavaScript is held to by tests/web/lesson/test_lessonmath_parity.py) equal attnlab's own computation (the
softmax written out, the values' weighted sum); through the API, the additive-vs-dot-product
view equals the shipped rnn-attention model's own attention and attnlab's functions applied here
to the model's states, the numbers the page's text quotes are the numbers the widgets show, and
bad input is a one-line error naming the problem (a 422 from the API, a missing model a 503 naming
it).
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from fastapi.testclient import TestClient

from attnlab import functional as AF
from attnlab.assets import locate
from attnlab.explain import compute_steps
from attnlab.web import lesson as L
from attnlab.web.app import create_app
from attnlab.web.lesson import s03_query_key_value as S3

LOCAL = "http://127.0.0.1:8000"


def installed(name: str) -> bool:
    try:
        locate.shipped_model_dir(name)
    except FileNotFoundError:
        return False
    return True


needs_rnn = pytest.mark.skipif(
    not installed("rnn-attention"), reason="needs the shipped model rnn-attention (make models ONLY=rnn-attention)"
)


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), base_url=LOCAL)


@pytest.fixture(scope="module")
def rnn():
    from attnlab.loading import load_model

    return load_model(locate.shipped_model_dir("rnn-attention"))


@pytest.fixture(scope="module")
def section() -> L.Section:
    return L.load_sections()[3]


def tensor(x) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float64)


# --------------------------------------------------------------------------------------------
# The three books.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scores, d_k, scale",
    [
        ([8, 4, 2], 64, True),
        ([8, 10, 2], 64, True),
        ([8, 4, 2], 128, False),
        ([-3.5, 0, 9.5], 1, True),
        ([1, 1, 1], 1024, True),
    ],
)
def test_three_books_equal_attnlabs_attention(scores, d_k, scale):
    # The reference the page's lessonmath.js is held to (tests/web/lesson/test_lessonmath_parity.py).
    got = dataclasses.asdict(S3.three_books(scores, d_k, scale))
    # attnlab's reference attention, done here: a 1-wide query [1] against 1-wide keys [s_i].
    factor = 1 / math.sqrt(d_k) if scale else 1.0
    q, k, v = torch.ones(1, 1, dtype=torch.float64), tensor(scores).unsqueeze(1), tensor(S3.BOOK_VALUES)
    out, w = AF.scaled_dot_product_attention(q, k, v, scale=factor, return_weights=True, backend="math")
    torch.testing.assert_close(tensor(got["weights"]), w[0], rtol=0, atol=1e-15)
    torch.testing.assert_close(tensor(got["output"]), out[0], rtol=0, atol=1e-15)
    torch.testing.assert_close(tensor(got["raw"]), tensor(scores), rtol=0, atol=0)
    torch.testing.assert_close(tensor(got["scaled"]), tensor(scores) * factor, rtol=0, atol=1e-15)
    assert got["factor"] == factor and got["values"] == [list(row) for row in S3.BOOK_VALUES]
    # The same numbers as the playground's function, compute_steps.
    steps = compute_steps(scores, values=[",".join(map(str, row)) for row in S3.BOOK_VALUES], d_k=d_k, scale=scale)
    torch.testing.assert_close(tensor(got["weights"]), steps.weights, rtol=0, atol=0)
    torch.testing.assert_close(tensor(got["output"]), steps.output, rtol=0, atol=0)
    # The softmax written out, exp(s_i) / Σ exp(s_j), is the softmax the attention used.
    exp = torch.exp(tensor(scores) * factor)
    torch.testing.assert_close(tensor(got["exp"]), exp, rtol=1e-15, atol=0)
    assert got["exp_sum"] == pytest.approx(float(exp.sum()), rel=1e-15)
    torch.testing.assert_close(tensor(got["exp"]) / got["exp_sum"], tensor(got["weights"]), rtol=0, atol=1e-15)
    # The weighted sum, book by book and component by component.
    weighted = tensor(got["weighted"])
    torch.testing.assert_close(weighted, w[0].unsqueeze(1) * v, rtol=0, atol=1e-15)
    torch.testing.assert_close(weighted.sum(0), tensor(got["output"]), rtol=0, atol=1e-14)
    assert sum(got["weights"]) == pytest.approx(1.0, abs=1e-15)


def test_the_default_three_books_are_the_worked_example():
    """8, 4, 2 with d_k = 64: softmax(1, 0.5, 0.25) = 0.481, 0.292, 0.227."""
    got = S3.three_books()
    assert got.scaled == [1.0, 0.5, 0.25] and got.d_k == 64 and got.scale
    assert [round(w, 3) for w in got.weights] == [0.481, 0.292, 0.227]
    assert [round(x, 3) for x in got.exp] == [2.718, 1.649, 1.284] and round(got.exp_sum, 3) == 5.651
    assert [round(x, 3) for x in got.output] == [1.189, 0.811, 0.773]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"scores": [8, 4]}, "the three books need 3 scores, one per book"),
        ({"scores": [8, 4, 2, 1]}, "the three books need 3 scores, one per book"),
        ({"scores": [8, 4, 11]}, "book 3's score must be a number from -10 to 10"),
        ({"scores": [8, 4, "2"]}, "book 3's score must be a number from -10 to 10"),
        ({"scores": [8, 4, None]}, "book 3's score must be a number from -10 to 10"),
        ({"d_k": 0}, "d_k must be a whole number from 1 to 1024"),
        ({"d_k": 2048}, "d_k must be a whole number from 1 to 1024"),
        ({"d_k": 6.5}, "d_k must be a whole number from 1 to 1024"),
        ({"scale": "yes"}, "scale must be true or false"),
    ],
)
def test_three_books_bad_input_is_a_one_line_error(kwargs, message):
    # The page's JavaScript refuses the same input with the same words (tests/web/lesson/test_lessonmath_parity.py).
    with pytest.raises(ValueError) as err:
        S3.three_books(**kwargs)
    assert str(err.value) == message


def test_the_three_books_endpoint_is_gone(client):
    """The page computes the books itself (static/engine/lessonmath.js): the explorer has no route for them."""
    assert client.post("/api/lesson/three-books", json={}).status_code in (404, 405)


# --------------------------------------------------------------------------------------------
# Additive vs dot-product attention on the shipped rnn-attention translator.
# --------------------------------------------------------------------------------------------


def queries_by_hook(rnn, text: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]]:
    """The decoder states the model's attention is called with, caught by a hook on a
    teacher-forced forward pass over the model's own greedy output (a path independent of the
    endpoint's step-by-step replay).

    Shape:
        queries ``(T, D)``, memory ``(S, D)``, keys ``(S, A)``
    """
    model, tok = rnn.model, rnn.tgt_tok
    ids = rnn.src_tok.encode(text)
    out = rnn.translate([text], beam_size=1, return_attention=True)[0]
    target = tok.encode(out.text)
    caught: list[tuple[torch.Tensor, ...]] = []
    hook = model.decoder.attention.register_forward_pre_hook(lambda _m, args: caught.append(args))
    try:
        with torch.inference_mode():
            src = torch.tensor([ids])
            tgt_in = torch.tensor([[tok.bos_id] + target])  # (1, T)
            model(src, tgt_in, need_weights=True)
    finally:
        hook.remove()
    queries = torch.cat([args[0] for args in caught])  # (T, D)
    return queries, caught[0][1][0], caught[0][3][0], ids


def additive_vs_dot(rnn, body: dict) -> dict:
    """The reference the page's engine/rnn.js (additiveVsDot) is tested against, as the page
    receives it (the endpoint is gone: the widget computes in the page)."""
    return S3.additive_vs_dot(rnn, S3.AdditiveVsDotRequest(**body)).model_dump()


@needs_rnn
@pytest.mark.parametrize("text", [S3.DEFAULT_NUMBERS, "twelve and three hundred", "nine thousand and eight"])
def test_additive_weights_are_the_models_own_attention(rnn, text):
    got = additive_vs_dot(rnn, {"text": text})
    want = rnn.translate([text], beam_size=1, return_attention=True)[0]
    assert got["translation"] == want.text and got["tgt_tokens"] == want.tgt_tokens
    assert got["src_tokens"] == want.src_tokens and got["source"] == text
    cross = want.cross_attention[0, 0].double()  # (T, S): what the model returns when it translates
    torch.testing.assert_close(tensor(got["additive"]["weights"]), cross, rtol=0, atol=2e-6)


@needs_rnn
@pytest.mark.parametrize("text", [S3.DEFAULT_NUMBERS, "seven million and eighty-one thousand six hundred"])
def test_both_scores_equal_attnlabs_functions_on_the_models_states(rnn, text):
    got = additive_vs_dot(rnn, {"text": text})
    queries, memory, keys, ids = queries_by_hook(rnn, text)  # (T, D), (S, D), (S, A)
    additive = rnn.model.decoder.attention.additive
    T, S, A = len(queries), len(ids), additive.score.shape[0]
    assert len(got["tgt_tokens"]) == T and len(got["src_tokens"]) == S and got["attn_dim"] == A
    with torch.inference_mode():
        # Additive: attnlab's functional additive attention with the model's own parameters.
        _, w_add = AF.additive_attention(
            queries,
            memory,
            memory,
            additive.q_proj.weight,
            additive.k_proj.weight,
            additive.score,
            bias=additive.k_proj.bias,
        )
        s_add = torch.tanh(additive.q_proj(queries)[:, None] + additive.k_proj(memory)[None]) @ additive.score  # (T, S)
        # Dot product of the same projected query and keys, by attnlab's scaled dot-product attention.
        q = additive.q_proj(queries)  # (T, A)
        torch.testing.assert_close(keys, additive.k_proj(memory))
        _, w_dot = AF.scaled_dot_product_attention(q, keys, memory, return_weights=True, backend="math")
        s_dot = q @ keys.T / math.sqrt(A)
    for name, want in (("additive", (s_add, w_add)), ("dot", (s_dot, w_dot))):
        torch.testing.assert_close(tensor(got[name]["scores"]), want[0].double(), rtol=0, atol=2e-5)
        torch.testing.assert_close(tensor(got[name]["weights"]), want[1].double(), rtol=0, atol=2e-6)
        torch.testing.assert_close(
            tensor(got[name]["weights"]).sum(-1), torch.ones(T, dtype=torch.float64), atol=1e-5, rtol=0
        )
    same = int((w_add.argmax(-1) == w_dot.argmax(-1)).sum())
    assert got["same_top"] == same
    assert got["cost"] == {"queries": T, "keys": S, "attn_dim": A, "additive_hidden": T * S * A, "dot_scores": T * S}
    assert got["hidden_size"] == rnn.model.config.hidden_size


@needs_rnn
def test_the_two_maps_disagree_as_the_page_says(rnn, section):
    """The text and the checks say the dot product of the same vectors puts its weight on other
    words in most rows; the "try" prompt says row 3 (千) of the default example looks at thousand."""
    default = additive_vs_dot(rnn, {})
    assert default["source"] == S3.DEFAULT_NUMBERS == section.strings["av_example_a"].en
    assert default["tgt_tokens"][3] == "千"
    add_row, dot_row = default["additive"]["weights"][3], default["dot"]["weights"][3]
    assert default["src_tokens"][add_row.index(max(add_row))] == "▁thousand"
    assert dot_row.index(max(dot_row)) != add_row.index(max(add_row))
    assert 2 * default["same_top"] < len(default["tgt_tokens"])
    item = next(t for t in section.try_ if "numbers" in t.params)  # "in how many rows do the maps agree?"
    example = additive_vs_dot(rnn, {"text": item.params["numbers"]})
    assert 2 * example["same_top"] < len(example["tgt_tokens"])  # "in most rows, another word"
    dot = tensor(example["dot"]["weights"])
    assert float(dot.max(-1).values.mean()) > 0.5  # "the weights do not spread evenly"


@needs_rnn
@pytest.mark.parametrize(
    "body, pattern",
    [
        ({"text": ""}, "at least 1 character"),
        ({"text": "   "}, "has no words"),
        ({"text": "one and " * 20}, "this view shows at most 24"),
        ({"text": "x" * 301}, "at most 300 characters"),
        ({"text": 12}, "valid string"),
        ({"text": "twelve", "row": 2}, "Extra inputs"),
    ],
)
def test_additive_vs_dot_bad_input_is_refused_in_one_line(rnn, body, pattern):
    from pydantic import ValidationError

    with pytest.raises((ValidationError, ValueError), match=pattern):
        additive_vs_dot(rnn, body)


def test_the_additive_vs_dot_endpoint_is_gone(client):
    """The widget computes in the page (engine/rnn.js); the explorer no longer answers for it."""
    assert client.post("/api/lesson/additive-vs-dot", json={}).status_code in (404, 405)
    assert client.get("/static/data/lesson/sections/3.json").status_code == 200  # the rest of the lesson works


# --------------------------------------------------------------------------------------------
# The section's text: what it quotes is what the widgets show.
# --------------------------------------------------------------------------------------------


def shown(x: float) -> str:
    """A weight or output component as the widget prints it (three decimals)."""
    return f"{x:.3f}"


def test_numbers_in_the_text_are_the_widgets_numbers(section):
    default = S3.three_books()
    weights = ", ".join(shown(w) for w in default.weights)
    for lang in ("ja", "en"):

        def text(t: L.Text, lang: str = lang) -> str:
            return getattr(t, lang)

        shift = next(q for q in section.check if q.params.get("s") == "10,6,4")
        shifted = S3.three_books([10, 6, 4])
        torch.testing.assert_close(tensor(shifted.weights), tensor(default.weights), rtol=0, atol=1e-15)
        assert weights in text(shift.explanation)
        halve = next(q for q in section.check if q.params.get("s") == "4,2,1")
        halved = S3.three_books([4, 2, 1])
        # The question names no weight: the check is on the page while §3's first prediction (book
        # 1's weight, 0.481) may still be covered, so it must not give that answer away.
        assert shown(default.weights[0]) not in text(halve.question) and shown(halved.weights[0]) in text(
            halve.explanation
        )
        assert halved.weights[0] < default.weights[0]
        book2 = next(t for t in section.try_ if t.params.get("s") == "8,10,2")
        more = S3.three_books([8, 10, 2])
        # The try item asks where the output goes from 0.811; it does not give the new value away.
        assert shown(default.output[1]) in text(book2.text) and shown(more.output[1]) not in text(book2.text)
        assert more.weights[1] > more.weights[0]  # "book 2 overtakes book 1"
        assert "[0, 2, 1]" in text(book2.text) and list(S3.BOOK_VALUES[1]) == [0, 2, 1]
        flat = S3.three_books([8, 4, 2], scale=False)
        assert flat.weights[0] > 0.95 and "[2, 0, 1]" in text(section.try_[1].text)


def test_the_try_and_check_links_set_states_the_widgets_accept(section):
    for item in [*section.try_, *section.check]:
        params = item.params
        if "s" in params:
            scores = [float(x) for x in params["s"].split(",")]
            assert len(scores) == 3 and all(abs(x) <= S3.MAX_BOOK_SCORE for x in scores), params
        if "dk" in params:
            assert int(params["dk"]) in S3.DK_VALUES, params
        if "mode" in params:
            assert params["mode"] in ("books", "random"), params
        if "row" in params:
            assert 0 <= int(params["row"]), params
    kinds = [q.kind for q in section.check]
    assert 2 * sum(k in ("predict", "transfer") for k in kinds) >= len(kinds)
    assert all(q.params for q in section.check if q.kind == "predict")
    assert len({q.answer for q in section.check}) >= 3
    assert [b.widget for b in section.blocks if b.type == "widget"] == ["qkv", "additive-vs-dot"]


def test_the_prediction_at_the_three_books_is_the_softmax_of_8_4_2(section):
    """Asked before the widget shows it: book 1's share of softmax(8, 4, 2 / √64) is 0.48, not 1, a
    third, or its share of the scores (8/14 = 0.57)."""
    p = section.predict[0]
    assert p.widget == "qkv" and p.params == {"mode": "books", "s": "8,4,2", "dk": "64", "scale": "1"}
    got = S3.three_books()
    assert round(got.weights[0], 2) == 0.48 and round(8 / 14, 2) == 0.57
    for lang in ("ja", "en"):
        choices = [getattr(c, lang) for c in p.choices]
        assert "0.48" in choices[p.answer] and "0.57" in choices[3] and "0.33" in choices[2]
        explanation = getattr(p.explanation, lang)
        assert all(shown(w) in explanation for w in got.weights)
        exps = [math.exp(x / 8) for x in (8, 4, 2)]
        assert all(shown(e) in explanation for e in exps) and shown(sum(exps)) in explanation
        # Under the widget: "Book 1's score is twice book 2's, yet its weight is 0.481 against 0.292".
        under = " ".join(getattr(b.html, lang) for b in section.blocks if b.type == "html" and not b.further)
        assert f"{shown(got.weights[0])} " in under and shown(got.weights[1]) in under


def test_the_dot_product_question_matches_its_arithmetic(section):
    """ "The closer the directions, the larger the dot product" holds for equal lengths only: q = (1, 0)
    scores 1 against k = (1, 0) and 2 against the longer k = (2, 2), 45° away."""
    q = next(q for q in section.check if "(2, 2)" in q.question.en)
    query, a, b = tensor([1.0, 0.0]), tensor([1.0, 0.0]), tensor([2.0, 2.0])
    assert float(query @ a) == 1.0 and float(query @ b) == 2.0
    assert math.isclose(math.degrees(math.acos(float(query @ b) / float(b.norm()))), 45.0)
    assert "B" in q.choices[q.answer].en and "B" in q.choices[q.answer].ja
    for lang in ("ja", "en"):
        assert "q·A = 1·1 + 0·0 = 1" in getattr(q.explanation, lang)
        assert "q·B = 1·2 + 0·2 = 2" in getattr(q.explanation, lang)
    basic = [b for b in section.blocks if b.html and not b.further]
    assert any(
        "between vectors of the same length it is larger the closer their directions" in b.html.en for b in basic
    )
    assert any("長さの同じベクトルどうしなら、向きが近いほど大きくなります" in b.html.ja for b in basic)


def test_no_score_is_said_to_be_the_only_one_that_takes_different_widths(section):
    """Additive attention's W_q and W_k bring a query and keys of different widths to one width, but so
    do a Transformer's W_q and W_k, and the 'general' score sᵀWh: only the plain q·k needs equal widths."""
    en = " ".join(b.html.en for b in section.blocks if b.html)
    ja = " ".join(b.html.ja for b in section.blocks if b.html)
    assert "One advantage stays with additive attention" not in en
    assert (
        "Only the plain dot product q·k, with nothing in between, needs the query and the keys to have the same width"
        in en
    )
    assert "幅が同じでなければならないのは、間に何もはさまない、そのままの内積 q·k だけです" in ja
