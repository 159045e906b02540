"""The in-page models (issue 36): onnxruntime running attnlab's ONNX export computes what PyTorch computes.

For the shipped translators (ja-en, en-ja, demo) exported as the site exports them
(:func:`attnlab.export_onnx.export_translator_onnx`): the encoder's cross-attention keys/values and
attention weights, and decoder steps from an empty cache (t = 0) on a padded batch of two and on
the rows of a beam reordered between steps, match the PyTorch model within 1e-4 (log-probabilities,
caches, self- and cross-attention rows against the model's own attention outputs); greedy decoding
driven step by step through onnxruntime gives attnlab.decode's ids on 20 sentences, and attnlab's
beam search over the graphs (:class:`attnlab.onnx_graphs.OnnxSeq2Seq`) the same beams as over
PyTorch; the compact weight storage gives what fp32 storage gives; a post-norm gelu model with
separate vocabularies and an untied output exports too; what cannot be exported is refused in one line; and
``attnlab export --to onnx`` writes a folder that loads and has the contract's names.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from attnlab.assets import ROOT as ASSETS_ROOT
from attnlab.cli import main as cli_main
from attnlab.decode import beam_search, greedy_decode
from attnlab.export_onnx import export_translator_onnx, source_ids, translator_alpha, write_decode_fixture
from attnlab.inference.translate import output_limit
from attnlab.loading import load_model
from attnlab.models.transformer import Transformer
from attnlab.onnx_graphs import (
    OnnxSeq2Seq,
    check_onnx_exportable,
    decoder_graph,
    encoder_graph,
    exact_storage,
    export_onnx,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ for export_models
from export_models import padded, tiny_config  # noqa: E402

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (optional extra: attnlab[site])")
pytest.importorskip("onnx", reason="onnx is not installed (optional extra: attnlab[site])")

TOL = 1e-4

SENTENCES = {
    "ja-en": [
        "猫が犬を追いかけている。",
        "私は毎朝コーヒーを飲みます。",
        "この本はとても面白い。",
        "彼は昨日東京に行った。",
        "明日は雨が降るでしょう。",
        "駅はどこですか。",
        "私たちは公園で遊んだ。",
        "彼女は医者です。",
        "この問題は難しすぎる。",
        "窓を開けてください。",
        "私の兄は背が高い。",
        "夏休みに海へ行きたい。",
        "彼はその映画を見なかった。",
        "学校まで歩いて十分です。",
        "お腹がすいた。",
        "この町には古い寺がある。",
        "毎日日本語を勉強しています。",
        "その車は高すぎる。",
        "母は台所で料理をしている。",
        "ありがとう。",
    ],
    "en-ja": [
        "The cat is chasing the dog.",
        "I drink coffee every morning.",
        "This book is very interesting.",
        "He went to Tokyo yesterday.",
        "It will rain tomorrow.",
        "Where is the station?",
        "We played in the park.",
        "She is a doctor.",
        "This problem is too difficult.",
        "Please open the window.",
        "My brother is tall.",
        "I want to go to the sea in summer.",
        "He did not see the movie.",
        "It takes ten minutes to walk to school.",
        "I am hungry.",
        "There is an old temple in this town.",
        "I study Japanese every day.",
        "That car is too expensive.",
        "My mother is cooking in the kitchen.",
        "Thank you.",
    ],
    "demo": [
        "three hundred forty-two thousand",
        "twenty million five hundred",
        "nine thousand nine hundred ninety-nine",
        "seven",
        "nineteen thousand and five",
        "two million one hundred",
        "eleven",
        "four hundred",
        "sixty thousand",
        "one billion",
        "eight hundred eighty-eight",
        "fifty-five thousand five",
        "three million three",
        "twelve thousand twelve",
        "ninety",
        "one hundred one",
        "seventy thousand seven hundred",
        "six million",
        "forty-four",
        "two thousand twenty-six",
    ],
}
MODELS = list(SENTENCES)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    # Small models on a shared machine: one PyTorch thread decodes them faster than two that wait
    # for each other (onnxruntime gets one too, below). Restored for the tests that follow.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _session(model_or_path):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # a shared machine; the graphs are small
    source = model_or_path.SerializeToString() if hasattr(model_or_path, "SerializeToString") else str(model_or_path)
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


class Exported:
    """A translator loaded in fp32 and its exported folder's two sessions."""

    def __init__(self, name: str, folder: Path, translator=None) -> None:
        self.name, self.folder = name, folder
        self.translator = translator or load_model(name, precision="fp32", family="translate")
        self.model = self.translator.model
        self.meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        self.encoder = _session(folder / "encoder.onnx")
        self.decoder = _session(folder / "decoder.onnx")
        c = self.model.config
        self.Ld, self.H, self.Dh = c.n_decoder_layers, c.n_heads, c.d_model // c.n_heads

    def empty_cache(self, B: int) -> np.ndarray:
        return np.zeros((self.Ld, B, self.H, 0, self.Dh), np.float32)  # (Ld, B, H, 0, Dh)

    def step(self, tokens, t: int, past_k, past_v, cross_k, cross_v, src: np.ndarray) -> dict[str, np.ndarray]:
        feeds = {
            "tokens": np.asarray(tokens, np.int64).reshape(-1, 1),  # (B, 1)
            "step": np.array([t], np.int64),
            "past_k": past_k,
            "past_v": past_v,
            "cross_k": cross_k,
            "cross_v": cross_v,
            "src_ids": src,
        }
        names = [o.name for o in self.decoder.get_outputs()]
        return dict(zip(names, self.decoder.run(None, feeds)))

    def greedy(self, ids: list[int]) -> list[int]:
        """Greedy decoding driven step by step through onnxruntime, as the page decodes."""
        src = np.array([ids], np.int64)  # (1, S)
        cross_k, cross_v, _ = self.encoder.run(None, {"src_ids": src})
        past_k = past_v = self.empty_cache(1)
        token, out = self.meta["bos_id"], []
        for t in range(output_limit(len(ids), self.meta["max_len"])):
            o = self.step([token], t, past_k, past_v, cross_k, cross_v, src)
            past_k, past_v = o["present_k"], o["present_v"]
            token = int(o["log_probs"][0].argmax())
            if token == self.meta["eos_id"]:
                break
            out.append(token)
        return out


@pytest.fixture(scope="module", params=MODELS)
def exported(request, tmp_path_factory) -> Exported:
    # What export_translator_onnx does (test_decode_fixture_runs_through_the_exported_folder calls
    # it), with the translator loaded once for the export and the comparisons.
    name = request.param
    translator = load_model(name, precision="fp32", family="translate")
    info = {"name": name, "src_lang": translator.src_lang, "tgt_lang": translator.tgt_lang}
    info["lowercase"] = translator.lowercase
    folder = tmp_path_factory.mktemp("onnx") / name
    export_onnx(translator.model, translator.src_tok, translator.tgt_tok, folder, info=info)
    return Exported(name, folder, translator)


def _sources(ex: Exported, texts: list[str]) -> torch.Tensor:
    return padded(source_ids(ex.translator, texts))  # (B, S), right-padded with 0


def _padded_pair(ex: Exported) -> torch.Tensor:
    """The longest and the shortest test sentence: a batch of two where the second is padded.

    Shape:
        → ``(2, S)``
    """
    texts = SENTENCES[ex.name]
    lengths = [len(ids) for ids in source_ids(ex.translator, texts)]
    src = _sources(ex, [texts[lengths.index(max(lengths))], texts[lengths.index(min(lengths))]])
    assert (src[1] == 0).any() and not (src[0] == 0).any()
    return src


def _random_model(norm: str, activation: str, shared: bool, tie: bool, **config) -> Transformer:
    """An untrained two-layer Transformer (parity of the graphs needs no training)."""
    torch.manual_seed(0)
    V_src, V_tgt = (40, 40) if shared else (40, 17)
    return Transformer(tiny_config(norm, activation, shared, V_src, V_tgt, tie_output=tie, **config)).eval()


@torch.no_grad()
def _teacher_forced(model, src: torch.Tensor, tgt_in: torch.Tensor):
    """The model's own outputs over a whole target prefix: log-probabilities (B, T, V), self and
    cross weights L × (B, H, T, T|S), and each decoder layer's self-attention keys/values
    L × (B, H, T, Dh), caught from its projections."""
    caught: dict[tuple[int, str], torch.Tensor] = {}
    hooks = []
    for i, block in enumerate(model.decoder):
        for which in ("k_proj", "v_proj"):

            def keep(module, args, output, key=(i, which)):
                caught[key] = output

            hooks.append(getattr(block.self_attn, which).register_forward_hook(keep))
    try:
        out = model(src, tgt_in, need_weights=True)
    finally:
        for h in hooks:
            h.remove()
    B, T = tgt_in.shape
    H = model.config.n_heads

    def heads(x):  # (B, T, D) -> (B, H, T, Dh)
        return x.view(B, T, H, -1).transpose(1, 2)

    keys = [heads(caught[(i, "k_proj")]) for i in range(len(model.decoder))]
    values = [heads(caught[(i, "v_proj")]) for i in range(len(model.decoder))]
    attn = out.attentions
    return torch.log_softmax(out.logits, -1), attn["decoder"], attn["cross"], keys, values


def _close(ours, reference, what: str) -> float:
    reference = reference.numpy() if isinstance(reference, torch.Tensor) else reference
    assert ours.shape == reference.shape, f"{what}: shape {ours.shape} != {reference.shape}"
    diff = float(np.abs(ours - reference).max()) if ours.size else 0.0
    assert diff < TOL, f"{what} differs by {diff:.2e}"
    return diff


def test_encoder_matches_pytorch(exported):
    ex = exported
    src = _padded_pair(ex)  # (2, S)
    cross_k, cross_v, enc_attn = ex.encoder.run(None, {"src_ids": src.numpy()})
    with torch.no_grad():
        memory, weights = ex.model.encode(src, need_weights=True)
        kv = [block.cross_attn.project_kv(memory) for block in ex.model.decoder]  # Ld × 2 × (B, H, S, Dh)
    _close(cross_k, torch.stack([k for k, _ in kv]), "cross_k")
    _close(cross_v, torch.stack([v for _, v in kv]), "cross_v")
    _close(enc_attn, torch.stack(weights), "enc_attn")  # (Le, B, H, S, S)
    assert (enc_attn[:, 1, :, :, src[1] == 0] == 0).all()  # padding is never attended to


def test_decoder_steps_match_pytorch_from_an_empty_cache(exported):
    ex = exported
    src = _padded_pair(ex)  # (2, S)
    g = torch.Generator().manual_seed(0)
    tgt_in = torch.randint(4, ex.model.config.tgt_vocab_size, (2, 5), generator=g)
    tgt_in[:, 0] = ex.meta["bos_id"]  # (B, T)
    log_probs, self_w, cross_w, keys, values = _teacher_forced(ex.model, src, tgt_in)
    cross_k, cross_v, _ = ex.encoder.run(None, {"src_ids": src.numpy()})
    past_k = past_v = ex.empty_cache(2)
    for t in range(tgt_in.shape[1]):
        o = ex.step(tgt_in[:, t], t, past_k, past_v, cross_k, cross_v, src.numpy())
        _close(o["log_probs"], log_probs[:, t], f"log_probs at t={t}")
        _close(o["present_k"], torch.stack([k[:, :, : t + 1] for k in keys]), f"present_k at t={t}")
        _close(o["present_v"], torch.stack([v[:, :, : t + 1] for v in values]), f"present_v at t={t}")
        _close(o["self_attn"], torch.stack([w[:, :, t, : t + 1] for w in self_w]), f"self_attn at t={t}")
        _close(o["cross_attn"], torch.stack([w[:, :, t] for w in cross_w]), f"cross_attn at t={t}")
        if t == 0:  # BOS sees only itself
            assert o["present_k"].shape == (ex.Ld, 2, ex.H, 1, ex.Dh)
            np.testing.assert_allclose(o["self_attn"], 1.0, atol=1e-6)
        assert (o["cross_attn"][:, 1][..., src[1].numpy() == 0] == 0).all()
        past_k, past_v = o["present_k"], o["present_v"]


def test_beam_rows_reordered_between_steps_match_pytorch(exported):
    # The page's beam: K rows of one source, the cache gathered along B when hypotheses move.
    ex = exported
    K = 4
    src = _sources(ex, SENTENCES[ex.name][4:5]).repeat(K, 1)  # (K, S)
    g = torch.Generator().manual_seed(1)
    history = torch.randint(4, ex.model.config.tgt_vocab_size, (K, 5), generator=g)
    history[:, 0] = ex.meta["bos_id"]  # (K, T)
    cross_k, cross_v, _ = ex.encoder.run(None, {"src_ids": src.numpy()})
    past_k = past_v = ex.empty_cache(K)
    for t in range(3):
        o = ex.step(history[:, t], t, past_k, past_v, cross_k, cross_v, src.numpy())
        past_k, past_v = o["present_k"], o["present_v"]
    order = torch.tensor([2, 2, 0, 3])  # row 1 dropped, row 2 kept twice
    past_k, past_v = past_k[:, order.numpy()], past_v[:, order.numpy()]
    history = history[order]  # (K, T): the hypotheses now in each row
    log_probs, self_w, cross_w, _, _ = _teacher_forced(ex.model, src, history)
    for t in range(3, 5):
        o = ex.step(history[:, t], t, past_k, past_v, cross_k, cross_v, src.numpy())
        _close(o["log_probs"], log_probs[:, t], f"beam log_probs at t={t}")
        _close(o["self_attn"], torch.stack([w[:, :, t, : t + 1] for w in self_w]), f"beam self_attn at t={t}")
        _close(o["cross_attn"], torch.stack([w[:, :, t] for w in cross_w]), f"beam cross_attn at t={t}")
        past_k, past_v = o["present_k"], o["present_v"]


def test_greedy_through_onnxruntime_gives_attnlab_decode_ids(exported):
    ex = exported
    texts = SENTENCES[ex.name]
    t = ex.translator.tgt_tok
    ours, theirs = [], []
    for ids in source_ids(ex.translator, texts):
        src = torch.tensor([ids])  # (1, S)
        limit = output_limit(len(ids), ex.model.config.max_len)
        ref = greedy_decode(ex.model, src, bos_id=t.bos_id, eos_id=t.eos_id, pad_id=t.pad_id, max_len=limit)[0]
        ours.append(ex.greedy(ids))
        theirs.append(ref.tokens)
    assert ours == theirs
    assert sum(map(len, ours)) > 3 * len(texts)  # real translations, not empty outputs compared


def test_attnlab_beam_search_over_onnxruntime_gives_the_same_beams(exported):
    # attnlab's own beam search (reordering the rows of the graphs' caches between steps) over
    # onnxruntime, against the same search over PyTorch: the beam the page's search must find.
    ex = exported
    onnx = OnnxSeq2Seq(ex.folder)
    t = ex.translator.tgt_tok
    for ids in source_ids(ex.translator, SENTENCES[ex.name][:4]):
        src = torch.tensor([ids])  # (1, S)
        kw = dict(bos_id=t.bos_id, eos_id=t.eos_id, pad_id=t.pad_id, max_len=output_limit(len(ids), 512))
        ours = beam_search(onnx, src, beam_size=4, alpha=translator_alpha(), **kw)[0]
        theirs = beam_search(ex.model, src, beam_size=4, alpha=translator_alpha(), **kw)[0]
        assert ours.tokens == theirs.tokens and ours.tokens
        assert abs(ours.score - theirs.score) < TOL


def test_compact_storage_equals_fp32(exported):
    ex = exported
    stored = exact_storage(ex.model)
    assert stored == ex.meta["weights"] == ("fp16" if ex.name == "demo" else "int8")
    full_graphs = encoder_graph(ex.model, "fp32"), decoder_graph(ex.model, "fp32")
    for graph, file in zip(full_graphs, ("encoder.onnx", "decoder.onnx")):
        assert (ex.folder / file).stat().st_size < graph.ByteSize() * (0.3 if stored == "int8" else 0.6)
    fp32_enc, fp32_dec = map(_session, full_graphs)
    src = _sources(ex, SENTENCES[ex.name][5:7]).numpy()
    compact = ex.encoder.run(None, {"src_ids": src})
    full = fp32_enc.run(None, {"src_ids": src})
    for a, b, what in zip(compact, full, ("cross_k", "cross_v", "enc_attn")):
        _close(a, b, f"{stored} vs fp32 {what}")
    cross_k, cross_v, _ = full
    tokens = np.full((2,), ex.meta["bos_id"])
    a = ex.step(tokens, 0, ex.empty_cache(2), ex.empty_cache(2), cross_k, cross_v, src)
    feeds = dict(
        tokens=tokens.reshape(-1, 1).astype(np.int64),
        step=np.array([0], np.int64),
        past_k=ex.empty_cache(2),
        past_v=ex.empty_cache(2),
        cross_k=cross_k,
        cross_v=cross_v,
        src_ids=src,
    )
    b = dict(zip([o.name for o in fp32_dec.get_outputs()], fp32_dec.run(None, feeds)))
    for name in a:
        _close(a[name], b[name], f"{stored} vs fp32 {name}")


@torch.no_grad()
def test_auto_storage_is_the_smallest_exact_one():
    model = _random_model("pre", "relu", True, True)
    assert exact_storage(model) == "fp32"  # trained (here: initialised) in fp32: nothing smaller is exact
    for p in model.parameters():
        p.copy_(p.half().float())
    assert exact_storage(model) == "fp16"
    for p in model.parameters():
        if p.dim() == 2:  # pack_checkpoint's int8: one scale per row, q·s in fp32
            scale = p.abs().amax(dim=1).clamp_min(torch.finfo(torch.float32).tiny) / 127  # (rows,)
            p.copy_(torch.round(p / scale[:, None]).clamp(-127, 127) * scale[:, None])
    assert exact_storage(model) == "int8"
    encoder = _session(encoder_graph(model, "auto"))
    src = np.array([[5, 9, 11, 30, 7]], np.int64)  # (1, S)
    full = _session(encoder_graph(model, "fp32"))
    _close(encoder.run(None, {"src_ids": src})[0], full.run(None, {"src_ids": src})[0], "int8 vs fp32 cross_k")


@pytest.mark.parametrize("variant", [("post", "gelu", False, False), ("pre", "gelu_tanh", True, True)])
def test_post_norm_gelu_untied_and_separate_vocabularies(variant):
    # The shipped translators are all pre-norm relu with a tied output: the other branches here.
    model = _random_model(*variant)
    encoder, decoder = _session(encoder_graph(model, "fp32")), _session(decoder_graph(model, "fp32"))
    src = torch.tensor([[5, 9, 11, 30, 7], [12, 6, 0, 0, 0]])  # (2, S), the second padded
    tgt_in = torch.tensor([[2, 7, 8, 9], [2, 9, 8, 7]])  # (B, T)
    log_probs, self_w, cross_w, _, _ = _teacher_forced(model, src, tgt_in)
    cross_k, cross_v, enc_attn = encoder.run(None, {"src_ids": src.numpy()})
    with torch.no_grad():
        _close(enc_attn, torch.stack(model.encode(src, need_weights=True)[1]), f"{variant} enc_attn")
    c = model.config
    past_k = past_v = np.zeros((c.n_decoder_layers, 2, c.n_heads, 0, c.d_model // c.n_heads), np.float32)
    for t in range(tgt_in.shape[1]):
        feeds = {
            "tokens": tgt_in[:, t : t + 1].numpy(),
            "step": np.array([t], np.int64),
            "past_k": past_k,
            "past_v": past_v,
            "cross_k": cross_k,
            "cross_v": cross_v,
            "src_ids": src.numpy(),
        }
        lp, past_k, past_v, sa, ca = decoder.run(None, feeds)
        _close(lp, log_probs[:, t], f"{variant} log_probs")
        _close(sa, torch.stack([w[:, :, t, : t + 1] for w in self_w]), f"{variant} self_attn")
        _close(ca, torch.stack([w[:, :, t] for w in cross_w]), f"{variant} cross_attn")


def test_what_cannot_be_exported_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(ValueError, match="recurrent") as err:
        export_translator_onnx("rnn-plain", tmp_path / "rnn")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "rnn").exists()
    model = _random_model("pre", "relu", True, True, attention="sliding_window", window=4)
    with pytest.raises(ValueError, match="only full attention") as err:
        check_onnx_exportable(model)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="unknown weights"):
        export_translator_onnx("demo", tmp_path / "x", weights="int4")
    assert cli_main(["export", "--model", "rnn-attention", "--to", "onnx", str(tmp_path / "rnn2")]) == 2
    assert "recurrent" in capsys.readouterr().err


def test_export_command_writes_a_folder_that_loads(tmp_path, capsys):
    out = tmp_path / "demo-onnx"
    assert cli_main(["export", "--model", "demo", "--to", "onnx", str(out)]) == 0
    assert "fp16 weights" in capsys.readouterr().out
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    contract = {"format", "version", "kind", "name", "src_lang", "tgt_lang", "d_model", "n_heads"}
    contract |= {"n_encoder_layers", "n_decoder_layers", "src_vocab_size", "tgt_vocab_size", "pad_id", "bos_id"}
    contract |= {"eos_id", "max_len", "weights", "src_tokenizer", "tgt_tokenizer", "source_wrap"}
    assert contract <= set(meta)
    assert (meta["format"], meta["version"], meta["kind"], meta["name"]) == ("attnlab.onnx", 1, "transformer", "demo")
    assert meta["source_wrap"] == {"bos": False, "eos": False}
    asset = ASSETS_ROOT / "demo"
    for key in ("src_tokenizer", "tgt_tokenizer"):  # copied unchanged
        assert (out / meta[key]).read_bytes() == (asset / meta[key]).read_bytes()
    encoder, decoder = _session(out / "encoder.onnx"), _session(out / "decoder.onnx")
    assert [i.name for i in encoder.get_inputs()] == ["src_ids"]
    assert [o.name for o in encoder.get_outputs()] == ["cross_k", "cross_v", "enc_attn"]
    assert [i.name for i in decoder.get_inputs()] == [
        "tokens", "step", "past_k", "past_v", "cross_k", "cross_v", "src_ids"
    ]  # fmt: skip
    assert [o.name for o in decoder.get_outputs()] == ["log_probs", "present_k", "present_v", "self_attn", "cross_attn"]
    ex = Exported("demo", out)
    text = "three hundred forty-two thousand"
    ids = ex.greedy(source_ids(ex.translator, [text])[0])
    assert ex.translator.tgt_tok.decode(ids) == ex.translator.translate([text])[0].text == "三十四万二千"
    assert cli_main(["export", "--model", "demo", "--to", "onnx", str(out)]) == 2  # exists: needs --force
    assert "--force" in capsys.readouterr().err
    assert cli_main(["export", "--model", "demo", "--to", "onnx", "--weights", "fp32", "--force", str(out)]) == 0
    assert json.loads((out / "meta.json").read_text(encoding="utf-8"))["weights"] == "fp32"


def test_decode_fixture_runs_through_the_exported_folder(tmp_path):
    texts = SENTENCES["demo"][:3]
    path = write_decode_fixture("demo", texts, tmp_path / "decode_fixture.json")
    records = json.loads(path.read_text(encoding="utf-8"))
    translator = load_model("demo", precision="fp32", family="translate")
    ex = Exported("demo", export_translator_onnx("demo", tmp_path / "demo"), translator)
    assert ex.meta["name"] == "demo" and ex.meta["weights"] == "fp16"
    assert [ex.greedy(r["src_ids"]) for r in records] == [r["greedy"] for r in records]
    assert [r["text"] for r in records] == texts
    assert [r["src_ids"] for r in records] == source_ids(translator, texts)
    greedy = [t.text for t in translator.translate(texts, beam_size=1, batch_size=1)]
    beam = translator.translate(texts, beam_size=4, alpha=translator_alpha(), batch_size=1)
    tok = translator.tgt_tok
    assert [tok.decode(r["greedy"]) for r in records] == greedy
    assert [tok.decode(r["beam4"]) for r in records] == [t.text for t in beam]
    assert all(r["beam4_score"] <= 0 and r["beam4"] for r in records)


def test_missing_onnx_says_how_to_install(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` now raises ImportError
    assert cli_main(["export", "--model", "demo", "--to", "onnx", str(tmp_path / "x")]) == 2
    assert "pip install 'attnlab[site]'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
