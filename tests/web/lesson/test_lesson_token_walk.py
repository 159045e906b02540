"""§7's token walk (:func:`~attnlab.web.lesson.s07_whole_transformer.token_walk_view`, which the
page's own computation is held to in tests/site/test_site_translate_browser.py): one sentence through
the whole ja-en Transformer.

Every number the view gives is computed again here, independently, from the model's own pieces
(its embedding table, its sine table, its first encoder layer's LayerNorm and feed-forward network
called by hand, the forward pass's attention maps, the softmax of its logits), and the default
sentence is one the model translates correctly. Bad input is refused with a message; the explorer
no longer serves the walk (the page computes it).
Tests of live numbers skip, naming the model, when ja-en is not built here.
"""

from __future__ import annotations

import math

import pytest
import torch
from fastapi.testclient import TestClient
from pydantic import ValidationError

from attnlab.assets import locate
from attnlab.web.app import create_app
from attnlab.web.lesson.common import source_ids
from attnlab.web.lesson.s07_whole_transformer import (
    TOKEN_WALK_FIRST,
    TOKEN_WALK_SENTENCE,
    TOKEN_WALK_TOP,
    TokenWalkRequest,
    token_walk_view,
)

LOCAL = "http://127.0.0.1:8000"


def present(name: str) -> bool:
    try:
        locate.shipped_model_dir(name)
    except FileNotFoundError:
        return False
    return True


needs_ja_en = pytest.mark.skipif(not present("ja-en"), reason="needs the shipped model ja-en (make models ONLY=ja-en)")


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), base_url=LOCAL)


@pytest.fixture(scope="module")
def ja_en():
    from attnlab.loading import load_model

    return load_model(locate.shipped_model_dir("ja-en"), family="translate")


def walk(ja_en, **body) -> dict:
    return token_walk_view(ja_en, TokenWalkRequest(**body)).model_dump()


def close(got, want, tol: float = 2e-5) -> None:
    torch.testing.assert_close(torch.tensor(got, dtype=torch.float64), want.to(torch.float64), atol=tol, rtol=0)


@needs_ja_en
def test_the_default_sentence_is_translated_correctly(ja_en):
    got = walk(ja_en)
    assert got["translation"] == "I drink coffee every morning."
    assert got["tgt_tokens"][-1] == "[EOS]"
    assert got["tgt_in_tokens"][0] == "[BOS]" and got["tgt_in_tokens"][1:] == got["tgt_tokens"][:-1]
    # the walk's picture: each English word's source–target attention (last layer) peaks on its Japanese piece
    src = got["src_tokens"]
    last = got["cross"][-1]
    peak = {got["tgt_tokens"][t]: src[max(range(len(src)), key=lambda j: row[j])] for t, row in enumerate(last)}
    assert peak["▁coffee"] == "コーヒーを" and peak["▁drink"] == "飲み" and peak["▁I"] == "▁私は"


@needs_ja_en
@pytest.mark.parametrize("text", [TOKEN_WALK_SENTENCE, "子供たちは公園で遊んでいる。"])
def test_every_number_is_the_models_own(ja_en, text):
    got = walk(ja_en, text=text)
    model = ja_en.model
    c = model.config
    ids = source_ids(ja_en, text)
    S = len(ids)
    assert got["src_tokens"] == [ja_en.src_tok.id_to_token(i) for i in ids]
    # the translation, independently: greedy decoding through the translator's own API
    assert got["translation"] == ja_en.translate([text])[0].text
    tgt_ids = [ja_en.tgt_tok.token_to_id(t) for t in got["tgt_in_tokens"]]
    T = len(tgt_ids)
    sizes = {"S": S, "T": T, "D": c.d_model, "H": c.n_heads, "F": c.d_ff, "V": c.tgt_vocab_size}
    assert got["sizes"] == sizes | {"L_enc": c.n_encoder_layers, "L_dec": c.n_decoder_layers}
    src = torch.tensor([ids])  # (1, S)
    tgt = torch.tensor([tgt_ids])  # (1, T)
    n = TOKEN_WALK_FIRST
    with torch.inference_mode():
        # step 1: embedding × √D (§3.4 of the paper) plus the sine code of each position
        emb = model.src_embed.weight[src[0]].double() * math.sqrt(c.d_model)  # (S, D)
        pos = torch.arange(S, dtype=torch.float64)[:, None]  # (S, 1)
        i2 = torch.arange(0, c.d_model, 2, dtype=torch.float64)  # (D/2,)
        angle = pos / 10000 ** (i2 / c.d_model)  # (S, D/2)
        pe = torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(S, c.d_model)  # (S, D) sin, cos interleaved
        for i, e in enumerate(got["embeddings"]):
            assert e["token"] == got["src_tokens"][i]
            close(e["embedding_first"], emb[i, :n])
            close(e["position_first"], pe[i, :n])
            close(e["sum_first"], (emb[i] + pe[i])[:n])
            close(
                [e["embedding_norm"], e["position_norm"], e["sum_norm"]],
                torch.stack([emb[i].norm(), pe[i].norm(), (emb[i] + pe[i]).norm()]),
                tol=1e-3,
            )
        # step 3: the first encoder layer by hand (pre-norm): x + attn(LN(x)), then + ff(LN(·))
        block = model.encoder[0]
        x = (emb + pe).float()[None]  # (1, S, D)
        a = block.self_attn(block.attn_norm(x)).output  # (1, S, D)
        h = x + a
        ff_in = block.ff_norm(h)[0]  # (S, D)
        hidden = torch.relu(block.ff.up_proj(ff_in))  # (S, F)
        ff_out = block.ff.down_proj(hidden)  # (S, D)
        layer_out = h[0] + ff_out  # (S, D)
        for i, f in enumerate(got["feed_forward"]):
            close(f["in_first"], ff_in[i, :n], tol=1e-4)
            close(f["out_first"], ff_out[i, :n], tol=1e-4)
            close(
                [f["in_norm"], f["out_norm"], f["layer_out_norm"], f["hidden_max"]],
                torch.stack([ff_in[i].norm(), ff_out[i].norm(), layer_out[i].norm(), hidden[i].max()]),
                tol=1e-3,
            )
            assert abs(f["active"] - int((hidden[i] > 0).sum())) <= 1  # a unit at ±1e-7 may fall either side
            assert 0 < f["active"] < c.d_ff
        # steps 2, 4, 5: the forward pass's own maps, the mean over the heads
        out = model(src, tgt, need_weights=True)
        for key, maps in (("encoder_self", "encoder"), ("decoder_self", "decoder"), ("cross", "cross")):
            want = torch.stack([w[0].mean(0) for w in out.attentions[maps]])  # (L, Q, K)
            close(got[key], want, tol=2e-6)
        dec = torch.tensor(got["decoder_self"])  # (L, T, T)
        assert (dec.triu(1) == 0).all()  # the causal mask: no position sees a later one
        torch.testing.assert_close(dec.sum(-1), torch.ones(c.n_decoder_layers, T), atol=1e-5, rtol=0)
        torch.testing.assert_close(
            torch.tensor(got["cross"]).sum(-1), torch.ones(c.n_decoder_layers, T), atol=1e-5, rtol=0
        )
        # step 6: softmax of the logits; the chosen token is the most likely (greedy)
        probs = torch.softmax(out.logits[0].double(), dim=-1)  # (T, V)
        for t, o in enumerate(got["outputs"]):
            p, idx = probs[t].topk(TOKEN_WALK_TOP)
            assert [w["token"] for w in o["top"]] == [ja_en.tgt_tok.id_to_token(int(j)) for j in idx]
            close([w["p"] for w in o["top"]], p, tol=1e-5)
            assert o["chosen"] == got["tgt_tokens"][t] == o["top"][0]["token"]
            assert abs(o["p_chosen"] - o["top"][0]["p"]) < 1e-12 and 0 < o["p_chosen"] <= 1


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"text": ""}, "at least 1"),
        ({"text": "あ" * 201}, "at most 200"),
        ({"text": 5}, "string"),
        ({"text": "猫", "extra": 1}, "xtra"),
    ],
)
def test_bad_input_is_refused_in_words(body, says):
    with pytest.raises(ValidationError) as refused:
        TokenWalkRequest(**body)
    assert says in str(refused.value)


def test_the_explorer_no_longer_serves_the_walk(client):
    for path in (
        "/api/lesson/token-walk",
        "/api/lesson/shapes",
        "/api/lesson/translation",
        "/api/lesson/parallel-steps",
    ):
        got = client.post(path, json={})
        assert got.status_code in (404, 405), (path, got.status_code)


@needs_ja_en
def test_a_sentence_too_long_for_the_walk_is_refused_naming_the_limit(ja_en):
    with pytest.raises(ValueError, match="this view shows at most 48"):
        walk(ja_en, text="猫が魚を食べた。" * 20)
