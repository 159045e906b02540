"""The RNN pair's ONNX graphs (attnlab.onnx_rnn) against PyTorch: the recurrent cells with their
gates re-ordered for ONNX's GRU/LSTM operators, and the shipped rnn-plain / rnn-attention decoded
greedily through onnxruntime token for token as attnlab.decode does on the PyTorch model."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from attnlab.models.rnn_seq2seq import RNNSeq2Seq, RNNSeq2SeqConfig  # noqa: E402
from attnlab.onnx_graphs import Graph, value_info  # noqa: E402
from attnlab.onnx_rnn import check_rnn_exportable, rnn_decoder_graph, rnn_encoder_graph, rnn_layer  # noqa: E402


@pytest.fixture(autouse=True)
def _no_grad():
    # No autograd in these comparisons; scoped to each test (a module-level switch would leak into
    # every other test the same worker runs).
    with torch.no_grad():
        yield


def _session(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _run(sess, feeds):
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_onnx_recurrent_operator_with_reordered_gates_is_torchs_cell(cell, bidirectional):
    """PyTorch stacks gates (r, z, n) / (i, f, g, o), ONNX (z, r, h) / (i, o, f, c); with the
    blocks re-ordered (and linear_before_reset for the GRU) ONNX's operator gives nn.GRU's and
    nn.LSTM's outputs and final states, from a given initial state, two layers stacked."""
    torch.manual_seed(0)
    cls = nn.GRU if cell == "gru" else nn.LSTM
    rnn = cls(5, 7, num_layers=2, bidirectional=bidirectional).eval()
    for p in rnn.parameters():
        nn.init.uniform_(p, -0.8, 0.8)  # larger than the default, so that every gate matters
    dirs = 2 if bidirectional else 1
    g = Graph("fp32")
    f32 = g.onnx.TensorProto.FLOAT
    x = "x"
    outs = []
    for layer in range(2):
        state = tuple(f"{n}{layer}" for n in (("h",) if cell == "gru" else ("h", "c")))
        x, final = rnn_layer(g, x, rnn, layer, state, None, f"l{layer}")
        for k, name in enumerate(final):
            outs.append(g.op("Identity", name, out=f"final{k}_{layer}"))
    g.op("Identity", x, out="y")
    inputs = [value_info("x", f32, ["S", "B", 5])]
    kinds = ("h",) if cell == "gru" else ("h", "c")
    inputs += [value_info(f"{n}{layer}", f32, [dirs, "B", 7]) for layer in range(2) for n in kinds]
    outputs = [value_info("y", f32, ["S", "B", dirs * 7])] + [value_info(o, f32, [dirs, "B", 7]) for o in outs]
    sess = _session(g.model(inputs, outputs, "rnn_check"))
    xs = torch.randn(6, 3, 5)  # (S, B, I)
    h0 = torch.randn(2 * dirs, 3, 7)
    c0 = torch.randn(2 * dirs, 3, 7)
    y, final = rnn(xs, h0 if cell == "gru" else (h0, c0))
    feeds = {"x": xs.numpy()}
    for layer in range(2):
        feeds[f"h{layer}"] = h0[layer * dirs : (layer + 1) * dirs].numpy()
        if cell == "lstm":
            feeds[f"c{layer}"] = c0[layer * dirs : (layer + 1) * dirs].numpy()
    got = _run(sess, feeds)
    np.testing.assert_allclose(got["y"], y.numpy(), atol=1e-5)
    finals = (final,) if cell == "gru" else final
    for k, f in enumerate(finals):
        for layer in range(2):
            np.testing.assert_allclose(
                got[f"final{k}_{layer}"], f[layer * dirs : (layer + 1) * dirs].numpy(), atol=1e-5
            )


@pytest.mark.parametrize("attention", ["none", "additive"])
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_random_rnn_graphs_equal_the_model_on_a_padded_batch(attention, cell):
    """Two layers, a bidirectional encoder, a right-padded batch: memory (zeros at padding), final
    states, keys, and every step's log-probabilities, states and attention equal the model's."""
    torch.manual_seed(1)
    c = RNNSeq2SeqConfig(20, 15, cell=cell, attention=attention, embed_dim=12, hidden_size=10, attn_dim=9, n_layers=2)
    model = RNNSeq2Seq(c).eval()
    src = torch.tensor([[5, 6, 7, 8, 9], [4, 11, 3, 0, 0]])  # (B, S), the second row padded
    enc, dec = _session(rnn_encoder_graph(model)), _session(rnn_decoder_graph(model))
    got = _run(enc, {"src_ids": src.numpy()})
    state = model.start(src)
    encoded = model.encode(src)
    np.testing.assert_allclose(got["memory"], encoded.memory.numpy(), atol=1e-5)
    np.testing.assert_allclose(got["final_h"], encoded.final[0].numpy(), atol=1e-5)
    if cell == "lstm":
        np.testing.assert_allclose(got["final_c"], encoded.final[1].numpy(), atol=1e-5)
    if attention == "additive":
        np.testing.assert_allclose(got["keys"], state.keys.numpy(), atol=1e-5)
    hidden, cellv = got["final_h"], got.get("final_c")
    tokens = np.array([[2], [2]])
    for _ in range(4):
        feeds = {"tokens": tokens, "hidden": hidden}
        if cell == "lstm":
            feeds["cell"] = cellv
        if attention == "none":
            feeds["context"] = got["final_h"][-1]
        else:
            feeds.update(memory=got["memory"], keys=got["keys"], src_ids=src.numpy())
        out = _run(dec, feeds)
        step = model.step(torch.from_numpy(tokens), state, need_weights=True)
        np.testing.assert_allclose(out["log_probs"], torch.log_softmax(step.logits, -1).numpy(), atol=1e-5)
        np.testing.assert_allclose(out["hidden_out"], state.hidden[0].numpy(), atol=1e-5)
        if attention == "additive":
            np.testing.assert_allclose(out["cross_attn"], step.cross_weights[:, 0, 0].numpy(), atol=1e-6)
            assert (out["cross_attn"][1, 3:] == 0).all()  # padding gets exactly nothing
        hidden, cellv = out["hidden_out"], out.get("cell_out")
        tokens = torch.log_softmax(step.logits, -1).argmax(-1, keepdim=True).numpy()


def test_luong_kinds_are_refused_in_one_line():
    model = RNNSeq2Seq(RNNSeq2SeqConfig(20, 15, attention="dot", embed_dim=8, hidden_size=8, attn_dim=8))
    with pytest.raises(ValueError, match=r"attention='dot' has no ONNX export"):
        check_rnn_exportable(model)


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    from attnlab.assets import asset_folder
    from attnlab.export_onnx import export_rnn_translator_onnx
    from attnlab.loading import load_model

    out = {}
    for name in ("rnn-plain", "rnn-attention"):
        if not (asset_folder(name) / "model.safetensors").is_file():
            pytest.skip(f"{name} is not shipped here")
        folder = export_rnn_translator_onnx(name, tmp_path_factory.mktemp("rnn") / name)
        out[name] = (load_model(name, precision="fp32", family="translate"), folder)
    return out


def _greedy_onnx(folder, ids):
    meta = json.loads((folder / "meta.json").read_text())
    enc, dec = _session_file(folder / "encoder.onnx"), _session_file(folder / "decoder.onnx")
    src = np.array([ids], np.int64)
    e = _run(enc, {"src_ids": src})
    hidden, tok, out, attn = e["final_h"], meta["bos_id"], [], []
    limit = min(2 * len(ids) + 10, meta["max_len"] - 1)
    for _ in range(limit):
        feeds = {"tokens": np.array([[tok]]), "hidden": hidden}
        if meta["attention"] == "none":
            feeds["context"] = e["final_h"][-1]
        else:
            feeds.update(memory=e["memory"], keys=e["keys"], src_ids=src)
        o = _run(dec, feeds)
        hidden = o["hidden_out"]
        tok = int(o["log_probs"][0].argmax())
        if "cross_attn" in o:
            attn.append(o["cross_attn"][0])
        if tok == meta["eos_id"]:
            break
        out.append(tok)
    return out, attn


def _session_file(path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_shipped_rnn_folders_decode_as_the_translator(shipped):
    """The shipped pair exported (fp16 storage, exact for their fp16-packed weights): greedy
    decoding through onnxruntime gives the Translator's ids on every long test example and
    typed lists, and rnn-attention's alignment within 1e-4."""
    from attnlab.web.lesson.s02_seq2seq_bottleneck import long_examples

    texts = [s for s, _ in long_examples()[:12]] + [
        "twelve and three hundred",
        "one",
        "nine hundred and ninety nine and seven",
        "forty two and eighteen and six hundred and five and thirty",
    ]
    for name, (translator, folder) in shipped.items():
        meta = json.loads((folder / "meta.json").read_text())
        assert meta["kind"] == "rnn" and meta["weights"] == "fp16"
        for text in texts:
            ids = translator.src_tok.encode_batch([text])[0]
            want = translator.translate([text], beam_size=1, return_attention=True)[0]
            got, attn = _greedy_onnx(folder, ids)
            assert translator.tgt_tok.decode(got) == want.text, (name, text)
            if name == "rnn-attention":
                cross = want.cross_attention[0, 0].numpy()  # (T, S)
                np.testing.assert_allclose(np.stack(attn), cross, atol=1e-4)


def test_pointer_generator_graphs_summarize_as_the_summarizer(tmp_path):
    """facts-summarizer exported: greedy decoding through onnxruntime over the document's extended
    ids gives Summarizer.summarize's words; attention within 1e-4, p_gen within 1e-4; a word
    outside the vocabulary is copied by its extended id."""
    from attnlab.assets import asset_folder
    from attnlab.data.text_tasks import make_summarization_task
    from attnlab.export_onnx import export_summarizer_onnx
    from attnlab.loading import load_model

    if not (asset_folder("facts-summarizer") / "model.safetensors").is_file():
        pytest.skip("facts-summarizer is not shipped here")
    folder = export_summarizer_onnx("facts-summarizer", tmp_path / "fs")
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["kind"] == "pointer_generator" and (folder / "vocab.json").is_file()
    s = load_model("facts-summarizer", family="summarize")
    enc, dec = _session_file(folder / "encoder.onnx"), _session_file(folder / "decoder.onnx")
    docs = [e.document for e in make_summarization_task(6, seed=21)] + ["Zorblax of Quibbleton won the chess debate."]
    for doc in docs:
        want = s.summarize([doc], beam_size=1, return_attention=True)[0]
        words = s.vocab.split(doc)[: s.max_src_len]
        ids, oovs = s.vocab.encode_source(words)
        src = np.array([ids], np.int64)
        e = _run(enc, {"src_ids": src})
        state = {"hidden": e["final_h"], "cell": e["final_c"]}
        tok, out, attn, p_gen = meta["bos_id"], [], [], []
        for _ in range(meta["max_summary_len"]):
            o = _run(
                dec, {"tokens": np.array([[tok]]), **state, "memory": e["memory"], "keys": e["keys"], "src_ids": src}
            )
            state = {"hidden": o["hidden_out"], "cell": o["cell_out"]}
            assert o["log_probs"].shape == (1, max(meta["vocab_size"], max(ids) + 1))
            attn.append(o["cross_attn"][0])
            p_gen.append(float(o["p_gen"][0]))
            tok = int(o["log_probs"][0].argmax())
            if tok == meta["eos_id"]:
                break
            out.append(tok)
        assert " ".join(s.vocab.decode(out, oovs)) == want.text, doc
        np.testing.assert_allclose(np.stack(attn), want.attention.numpy()[: len(attn)], atol=1e-4)
        np.testing.assert_allclose(p_gen, want.p_gen[: len(p_gen)], atol=1e-4)
