"""The BERT encoders' ONNX export (:mod:`attnlab.onnx_bert`) against PyTorch, in onnxruntime (Python):

- the shipped masked LM and question answerer: the graph's attention maps, logits and span logits
  equal the PyTorch model's within 1e-4 (stored in the smallest exact storage, fp16 or fp32);
- MiniLM's graph in fp32 equals PyTorch within 1e-4; in int8 it does not (the measured reason the
  site carries MiniLM's views instead, docs/export.md) — the test keeps that figure honest;
- the MiniLM folder: its views are PyTorch's own float32 maps and query/key vectors;
- the folders hold what the page reads (meta.json's ids and settings, the tokenizer, the examples).
"""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
import torch

from attnlab.assets import locate
from attnlab.models.bert import encode_with_masks

onnx = pytest.importorskip("onnx", reason="the ONNX export needs the onnx package: pip install 'attnlab[site]'")
pytest.importorskip("onnxruntime", reason="the check runs the graphs in onnxruntime")

from attnlab.onnx_bert import (  # noqa: E402
    MINILM_SENTENCES,
    bert_graph,
    export_bert_onnx,
    export_minilm_views,
    load_bert_model,
    onnx_outputs,
)
from attnlab.onnx_graphs import exact_storage  # noqa: E402

TOL = 1e-4


def need(name: str) -> None:
    try:
        locate.shipped_model_dir(name)
    except FileNotFoundError:
        pytest.skip(f"needs the shipped model {name} (make models ONLY={name})")


def minilm_or_skip():
    try:
        return load_bert_model("minilm")
    except FileNotFoundError as err:
        pytest.skip(str(err))


def _attn(out) -> np.ndarray:
    return torch.stack(list(out.attentions)).numpy()  # L × (1, H, S, S) -> (L, 1, H, S, S)


def test_the_masked_lm_graph_equals_pytorch(tmp_path):
    need("shakespeare-mlm")
    folder = export_bert_onnx("shakespeare-mlm", tmp_path / "mlm")
    model, tok, _ = load_bert_model("shakespeare-mlm")
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    assert meta["kind"] == "bert" and meta["head"] == "mlm" and meta["weights"] == exact_storage(model)
    assert (meta["mask_id"], meta["cls_id"], meta["sep_id"]) == (tok.mask_id, tok.bos_id, tok.eos_id)
    for text in ("ROMEO: I will l[MASK]ve thee, my lord.", "O my l[MASK]rd", "[MASK]", "a" * 58 + "[MASK]"):
        ids = encode_with_masks(tok, text)
        with torch.inference_mode():
            want = model(torch.tensor([ids]), need_weights=True)
        got = onnx_outputs(folder, ids)
        np.testing.assert_allclose(got["attn"], _attn(want), atol=TOL, rtol=0)
        np.testing.assert_allclose(got["logits"], want.logits.numpy(), atol=TOL, rtol=0)
        assert int(got["logits"][0, ids.index(tok.mask_id)].argmax()) == int(
            want.logits[0, ids.index(tok.mask_id)].argmax()
        )


def test_the_question_answerer_graph_equals_pytorch(tmp_path):
    need("facts-qa")
    from attnlab.web.lesson import qa_examples

    folder = export_bert_onnx("facts-qa", tmp_path / "qa", extra=lambda: {"examples.json": qa_examples()})
    model, tok, settings = load_bert_model("facts-qa")
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    assert meta["head"] == "qa" and {k: meta[k] for k in settings} == settings and settings["max_length"] == 128
    assert json.loads((folder / "examples.json").read_text(encoding="utf-8")) == qa_examples()
    for ex in qa_examples():
        for question in ex["questions"]:
            q, c = tok.encode(question), tok.encode(ex["passage"])
            ids = [tok.bos_id, *q, tok.eos_id, *c, tok.eos_id]
            types = [0] * (len(q) + 2) + [1] * (len(c) + 1)
            with torch.inference_mode():
                want = model(torch.tensor([ids]), token_type_ids=torch.tensor([types]), need_weights=True)
            got = onnx_outputs(folder, ids, types)
            np.testing.assert_allclose(got["attn"], _attn(want), atol=TOL, rtol=0)
            np.testing.assert_allclose(got["start_logits"], want.start_logits.numpy(), atol=TOL, rtol=0)
            np.testing.assert_allclose(got["end_logits"], want.end_logits.numpy(), atol=TOL, rtol=0)


def test_minilm_in_fp32_equals_pytorch_and_int8_does_not(tmp_path):
    """The measurement behind carrying MiniLM's views (docs/export.md): fp32 is exact to 1e-4 but
    90 MB; int8 (what would fit the site) moves attention weights by more than 0.01."""
    import onnxruntime as ort

    model, tok, _ = minilm_or_skip()
    worst = {}
    for weights in ("fp32", "int8"):
        path = tmp_path / f"minilm-{weights}.onnx"
        onnx.save(bert_graph(model, weights), str(path))
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        worst[weights] = 0.0
        for text in MINILM_SENTENCES[:4]:
            ids = encode_with_masks(tok, text)
            with torch.inference_mode():
                want = model(torch.tensor([ids]), need_weights=True)
            feed = {"input_ids": np.array([ids], dtype=np.int64), "token_type_ids": np.zeros((1, len(ids)), np.int64)}
            got = sess.run(["attn"], feed)[0]
            worst[weights] = max(worst[weights], float(np.abs(got - _attn(want)).max()))
    assert worst["fp32"] <= TOL, worst
    assert worst["int8"] > 0.01, worst


def test_the_minilm_folder_holds_pytorchs_views(tmp_path):
    model, tok, _ = minilm_or_skip()
    folder = export_minilm_views("minilm", tmp_path / "minilm")
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    assert meta["kind"] == "bert-views" and (meta["n_layers"], meta["n_heads"], meta["head_dim"]) == (6, 12, 32)
    views = json.loads((folder / "views.json").read_text(encoding="utf-8"))["sentences"]
    assert [v["text"] for v in views] == list(MINILM_SENTENCES)
    assert json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["model"]["type"] == "WordPiece"
    for v in views:
        ids = encode_with_masks(tok, v["text"])
        assert v["ids"] == ids and v["tokens"] == [tok.id_to_token(i) for i in ids]
        S = len(ids)
        with torch.inference_mode():
            out = model(torch.tensor([ids]), need_weights=True)
            block = model.blocks[3]
            x = out.all_hidden_states[3]  # (1, S, D): layer 4's input
            q = block.self_attn.q_proj(x)[0].view(S, 12, 32).transpose(0, 1)  # (H, S, Dh)
        attn = np.frombuffer(base64.b64decode(v["attn"]), "<f4").reshape(6, 12, S, S)
        assert np.array_equal(attn, _attn(out)[:, 0])
        queries = np.frombuffer(base64.b64decode(v["queries"]), "<f4").reshape(6, 12, S, 32)
        assert np.array_equal(queries[3], q.numpy())
    assert (folder / "views.json").stat().st_size < 6e6  # the site's budget: a few MB, not MiniLM's 90


def test_unknown_storage_and_existing_folders_are_refused(tmp_path):
    need("shakespeare-mlm")
    with pytest.raises(ValueError, match="unknown weights"):
        export_bert_onnx("shakespeare-mlm", tmp_path / "a", weights="int4")
    (tmp_path / "b").mkdir()
    with pytest.raises(FileExistsError, match="exists"):
        export_bert_onnx("shakespeare-mlm", tmp_path / "b")
