"""attnlab's RNN encoder–decoders (``rnn-plain``, ``rnn-attention``) as two ONNX graphs for the page.

The lesson's §2 and §3 widgets run the shipped RNN pair in the learner's browser (issue 36). As for
the Transformer translators (:mod:`attnlab.onnx_graphs`, whose graph builder this module reuses),
the graphs are built node by node from the model's own weights, not traced:

- ``encoder.onnx``: ``src_ids`` (B, S) → ``memory`` (B, S, D), ``final_h`` (L, B, D) (and
  ``final_c`` for an LSTM), and for additive attention ``keys`` (B, S, A) = ``U h_j + b``, the
  projection :meth:`BahdanauAttention.prepare` computes once per sentence;
- ``decoder.onnx``: one step. ``tokens`` (B, 1), ``hidden`` (L, B, D) (``cell`` for an LSTM), and
  either ``context`` (B, D) (``attention="none"``: the fixed vector, all the decoder sees) or
  ``memory``, ``keys``, ``src_ids`` (additive) → ``log_probs`` (B, V), ``hidden_out`` (and
  ``cell_out``), and for additive attention ``cross_attn`` (B, S) (the weights), ``attn_scores``
  (B, S) (vᵀ tanh(W s + U h + b) before the softmax) and ``query_proj`` (B, A) (W s_{i-1}).

The recurrent layers are ONNX's ``GRU`` and ``LSTM`` operators
(https://onnx.ai/onnx/operators/onnx__GRU.html, …/onnx__LSTM.html) with the weights re-ordered:
PyTorch stacks a GRU's gates as (r, z, n) and ONNX as (z, r, h); an LSTM's as (i, f, g, o) and
ONNX as (i, o, f, c). PyTorch's GRU applies the reset gate *after* the recurrent product,
``n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))``, which is ONNX's ``linear_before_reset=1``.
tests/export/test_onnx_rnn.py checks both cells, both directions and two layers against ``nn.GRU`` /
``nn.LSTM``. The encoder passes each row's length (``src_ids != pad``) as ``sequence_lens``, so a
right-padded row's backward direction starts at its last real token, as packing does in PyTorch.

The decoder step is the model's own arithmetic in the same order:
``attention="none"`` (:class:`~attnlab.models.rnn_seq2seq.FixedContextDecoder`)
``s_i = RNN([E y; c], s_{i-1})``, ``readout = tanh(W_o [s_i; c; E y])``; ``attention="additive"``
(:class:`~attnlab.models.rnn_seq2seq.AdditiveDecoder`, Bahdanau et al. 2015 §3.1) attends with
``s_{i-1}`` first, masked keys at −∞ before the softmax (weight exactly 0). Luong's kinds
(dot, general, local) are not exported: no widget runs them.

The pointer-generator summarizer (:class:`attnlab.models.pointer_generator.PointerGenerator`, See
et al. 2017; §9's summary) has its own two graphs at the end of this module: the same encoder
(extended ids read as [UNK]), and a step that outputs the final mixed distribution over the
document's extended ids, its attention and its switch ``p_gen``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .onnx_graphs import Graph, linear, replace_folder, require_onnx, resolve_weights, value_info, write_meta

__all__ = [
    "RNN_KINDS",
    "check_rnn_exportable",
    "rnn_encoder_graph",
    "rnn_decoder_graph",
    "export_rnn_onnx",
    "check_pointer_generator_exportable",
    "pointer_generator_encoder_graph",
    "pointer_generator_decoder_graph",
    "export_pointer_generator_onnx",
]

#: The decoders this module exports (``config.attention``).
RNN_KINDS = ("none", "additive")

# Gate blocks of PyTorch's stacked matrices in ONNX's order (module docstring).
_GATE_ORDER = {"gru": (1, 0, 2), "lstm": (0, 3, 1, 2)}


def check_rnn_exportable(model: nn.Module) -> None:
    """Raise a one-line ``ValueError`` unless ``model`` is an RNN seq2seq these graphs express.

    Shape:
        no tensors
    """
    config = getattr(model, "config", None)
    if getattr(config, "model_type", None) != "rnn":
        raise ValueError(f"not an RNN encoder–decoder: model_type {getattr(config, 'model_type', None)!r}")
    if config.attention not in RNN_KINDS:
        raise ValueError(f"attention={config.attention!r} has no ONNX export; exported: {list(RNN_KINDS)}")


def _gates(w: torch.Tensor, cell: str) -> torch.Tensor:
    """A stacked gate matrix or bias with its blocks in ONNX's order.

    Shape:
        ``(G·H, ...)`` → ``(G·H, ...)``, G = 3 (GRU) or 4 (LSTM)
    """
    blocks = w.chunk(len(_GATE_ORDER[cell]), dim=0)  # G × (H, ...)
    return torch.cat([blocks[i] for i in _GATE_ORDER[cell]], dim=0)


def rnn_layer(
    g: Graph, x: str, rnn: nn.RNNBase, layer: int, state: tuple[str, ...] | None, lens: str | None, hint: str
) -> tuple[str, tuple[str, ...]]:
    """One layer of ``rnn`` (both directions when it is bidirectional) as ONNX's GRU/LSTM node.

    ``state`` (``(h,)`` or ``(h, c)``, each ``(dirs, B, H)``) starts it; None starts from zeros.
    Returns the output sequence with the directions concatenated and the final state.

    Shape:
        x ``(S, B, I)`` → y ``(S, B, dirs·H)``; state ``(dirs, B, H)`` each
    """
    cell = "gru" if isinstance(rnn, nn.GRU) else "lstm"
    H, dirs = rnn.hidden_size, 2 if rnn.bidirectional else 1
    suffixes = [f"_l{layer}"] + ([f"_l{layer}_reverse"] if dirs == 2 else [])
    keep = g.__dict__.setdefault("_rnn_tensors", [])  # the re-ordered tensors outlive the graph build

    def stacked(prefix: str, name: str) -> str:
        parts = [_gates(getattr(rnn, prefix + s).detach(), cell) for s in suffixes]
        t = torch.cat(parts, dim=0).contiguous()  # (dirs·G·H, cols) or (dirs·G·H,)
        keep.append(t)
        value = g.weight(t, f"{hint}_{name}")
        shape = [dirs, -1] + ([t.shape[1]] if t.dim() == 2 else [])
        return g.op("Reshape", value, g.const(shape, np.int64, "shape"))  # (dirs, G·H, cols) | (dirs, G·H)

    W, R = stacked("weight_ih", "W"), stacked("weight_hh", "R")  # (dirs, G·H, I), (dirs, G·H, H)
    if rnn.bias:
        B = g.op("Concat", stacked("bias_ih", "Wb"), stacked("bias_hh", "Rb"), axis=1)  # (dirs, 2·G·H)
    else:
        B = ""
    inputs = [x, W, R, B, lens or "", *(state or [])]
    outs = [g.name(hint + "_y"), g.name(hint + "_h")] + ([g.name(hint + "_c")] if cell == "lstm" else [])
    attrs: dict[str, Any] = {"hidden_size": H, "direction": "bidirectional" if dirs == 2 else "forward"}
    if cell == "gru":
        attrs["linear_before_reset"] = 1  # PyTorch: r ⊙ (W_hn h + b_hn)
    g.nodes.append(g.onnx.helper.make_node(cell.upper(), inputs, outs, **attrs))
    y = g.op("Transpose", outs[0], perm=[0, 2, 1, 3])  # (S, dirs, B, H) -> (S, B, dirs, H)
    y = g.op("Reshape", y, g.const([0, 0, dirs * H], np.int64, "shape"))  # (S, B, dirs·H)
    return y, tuple(outs[1:])


def _pair_directions(g: Graph, h: str, H: int) -> str:
    """A bidirectional layer's final state as one vector per row, forward half first.

    Shape:
        h ``(2, B, H)`` → ``(1, B, 2H)``
    """
    h = g.op("Transpose", h, perm=[1, 0, 2])  # (B, 2, H)
    h = g.op("Reshape", h, g.const([1, -1, 2 * H], np.int64, "shape"))  # (1, B, 2H)
    return h


def _src_mask(g: Graph, src_ids: str, pad_id: int) -> str:
    """True where the source token is real. Shape: src_ids ``(B, S)`` → ``(B, S)`` bool."""
    return g.op("Not", g.op("Equal", src_ids, g.const(pad_id, np.int64, "pad")))


def rnn_encoder_graph(model: nn.Module, weights: str = "fp32"):
    """The encoder: ``src_ids`` → ``memory``, ``final_h`` (``final_c``), ``keys`` (additive only).

    Shape:
        src_ids ``(B, S)`` int64 (right-padded) → memory ``(B, S, D)``, final_h ``(L, B, D)``,
        keys ``(B, S, A)``
    """
    check_rnn_exportable(model)
    weights = resolve_weights(model, weights)
    c = model.config
    g = Graph(weights)
    TensorProto = g.onnx.TensorProto
    real = _src_mask(g, "src_ids", c.pad_id)  # (B, S)
    lens = g.op("Cast", real, to=TensorProto.INT32)  # (B, S) int32
    lens = g.op("ReduceSum", lens, g.const([1], np.int64, "axes"), keepdims=0)  # (B,) each row's length
    x = g.op("Gather", g.weight(model.src_embed.weight, "src_embed"), "src_ids", axis=0)  # (B, S, E)
    x = g.op("Transpose", x, perm=[1, 0, 2])  # (S, B, E): ONNX's RNN layout 0
    rnn = model.encoder.rnn
    H = rnn.hidden_size
    finals: list[list[str]] = []
    for layer in range(c.n_layers):
        x, state = rnn_layer(g, x, rnn, layer, None, lens, f"enc{layer}")  # (S, B, dirs·H)
        finals.append([_pair_directions(g, s, H) if rnn.bidirectional else s for s in state])  # (1, B, D)
    # Padded positions: ONNX leaves zeros after a row's length, as pad_packed_sequence does.
    memory = g.op("Transpose", x, perm=[1, 0, 2], out="memory")  # (B, S, D)
    f32 = TensorProto.FLOAT
    names = ["final_h", "final_c"][: len(finals[0])]
    for k, name in enumerate(names):
        g.op("Concat", *[f[k] for f in finals], axis=0, out=name)  # (L, B, D)
    outputs = [value_info("memory", f32, ["B", "S", c.hidden_size])]
    outputs += [value_info(n, f32, [c.n_layers, "B", c.hidden_size]) for n in names]
    if c.attention == "additive":
        g.op(
            "Identity", linear(g, memory, model.decoder.attention.additive.k_proj, "keys_proj"), out="keys"
        )  # (B, S, A)
        outputs.append(value_info("keys", f32, ["B", "S", c.attn_dim]))
    return g.model([value_info("src_ids", TensorProto.INT64, ["B", "S"])], outputs, "attnlab_rnn_encoder")


def rnn_decoder_graph(model: nn.Module, weights: str = "fp32"):
    """One decoder step (module docstring for the inputs and outputs of each kind).

    Shape:
        tokens ``(B, 1)``, hidden ``(L, B, D)``, context ``(B, D)`` | memory ``(B, S, D)``, keys
        ``(B, S, A)``, src_ids ``(B, S)`` → log_probs ``(B, V)``, hidden_out ``(L, B, D)``,
        cross_attn, attn_scores ``(B, S)``, query_proj ``(B, A)``
    """
    check_rnn_exportable(model)
    weights = resolve_weights(model, weights)
    c = model.config
    g = Graph(weights)
    TensorProto = g.onnx.TensorProto
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    lstm = c.cell == "lstm"
    D, L = c.hidden_size, c.n_layers
    dec = model.decoder
    emb = g.op("Gather", g.weight(model.tgt_embed.weight, "tgt_embed"), "tokens", axis=0)  # (B, 1, E)
    emb = g.op("Squeeze", emb, g.const([1], np.int64, "axes"))  # (B, E)
    inputs = [value_info("tokens", i64, ["B", 1]), value_info("hidden", f32, [L, "B", D])]
    if lstm:
        inputs.append(value_info("cell", f32, [L, "B", D]))
    outputs = []
    if c.attention == "none":
        context = "context"  # (B, D): the encoder's final state, the same at every step
        inputs.append(value_info("context", f32, ["B", D]))
    else:
        inputs += [
            value_info("memory", f32, ["B", "S", D]),
            value_info("keys", f32, ["B", "S", c.attn_dim]),
            value_info("src_ids", i64, ["B", "S"]),
        ]
        additive = dec.attention.additive
        top = g.op("Gather", "hidden", g.const(L - 1, np.int64, "layer"), axis=0)  # (B, D) s_{i-1}
        q = linear(g, top, additive.q_proj, "attn_q")  # (B, A)
        g.op("Identity", q, out="query_proj")
        hidden = g.op("Tanh", g.op("Add", g.op("Unsqueeze", q, g.const([1], np.int64, "axes")), "keys"))  # (B, S, A)
        v = g.op("Unsqueeze", g.weight(additive.score, "attn_v"), g.const([1], np.int64, "axes"))  # (A, 1)
        scores = g.op("Squeeze", g.op("MatMul", hidden, v), g.const([2], np.int64, "axes"))  # (B, S)
        g.op("Identity", scores, out="attn_scores")
        masked = g.op("Where", _src_mask(g, "src_ids", c.pad_id), scores, g.const(-np.inf))  # (B, S)
        weights_ = g.op("Softmax", masked, axis=-1, out="cross_attn")  # (B, S)
        w3 = g.op("Unsqueeze", weights_, g.const([1], np.int64, "axes"))  # (B, 1, S)
        context = g.op("Squeeze", g.op("MatMul", w3, "memory"), g.const([1], np.int64, "axes"))  # (B, D)
        outputs += [
            value_info("cross_attn", f32, ["B", "S"]),
            value_info("attn_scores", f32, ["B", "S"]),
            value_info("query_proj", f32, ["B", c.attn_dim]),
        ]
    x = g.op("Unsqueeze", g.op("Concat", emb, context, axis=-1), g.const([0], np.int64, "axes"))  # (1, B, E + D)
    new_h, new_c = [], []
    for layer in range(L):
        idx = g.const([layer], np.int64, "layer")
        state = [g.op("Gather", "hidden", idx, axis=0)]  # (1, B, D)
        if lstm:
            state.append(g.op("Gather", "cell", idx, axis=0))
        x, final = rnn_layer(g, x, dec.rnn, layer, tuple(state), None, f"dec{layer}")  # (1, B, D)
        new_h.append(final[0])
        if lstm:
            new_c.append(final[1])
    g.op("Concat", *new_h, axis=0, out="hidden_out")  # (L, B, D)
    if lstm:
        g.op("Concat", *new_c, axis=0, out="cell_out")
    out = g.op("Squeeze", x, g.const([0], np.int64, "axes"))  # (B, D) s_i
    readout = g.op("Tanh", linear(g, g.op("Concat", out, context, emb, axis=-1), dec.readout, "readout"))  # (B, E)
    tied = model.out_proj.weight is model.tgt_embed.weight
    logits = g.op("Gemm", readout, g.weight(model.out_proj.weight, "tgt_embed" if tied else "out"), transB=1)  # (B, V)
    g.op("LogSoftmax", logits, axis=-1, out="log_probs")  # (B, V), as attnlab.decode scores them
    outputs = (
        [value_info("log_probs", f32, ["B", c.tgt_vocab_size]), value_info("hidden_out", f32, [L, "B", D])]
        + ([value_info("cell_out", f32, [L, "B", D])] if lstm else [])
        + outputs
    )
    return g.model(inputs, outputs, "attnlab_rnn_decoder_step")


def export_rnn_onnx(
    model: nn.Module,
    src_tok,
    tgt_tok,
    out: str | Path,
    *,
    weights: str = "auto",
    info: dict[str, Any] | None = None,
    force: bool = False,
) -> Path:
    """Write ``model`` as an in-page folder: ``encoder.onnx``, ``decoder.onnx``, :data:`META_FILE`
    (``kind: "rnn"``) and the tokenizer files.

    Raises:
        ImportError: onnx is not installed.
        ValueError: a model :func:`check_rnn_exportable` refuses, or unknown ``weights``.
        FileExistsError: ``out`` exists and ``force`` is not set.

    Shape:
        no tensors; returns ``out``.
    """
    check_rnn_exportable(model)
    weights = resolve_weights(model, weights)
    out = Path(out)
    if out.exists() and not force:
        raise FileExistsError(f"{out} exists; choose another folder or pass --force to replace it")
    onnx = require_onnx()
    encoder, decoder = rnn_encoder_graph(model, weights), rnn_decoder_graph(model, weights)
    replace_folder(out)
    onnx.save(encoder, str(out / "encoder.onnx"))
    onnx.save(decoder, str(out / "decoder.onnx"))
    src_tok.save(out, "src_tokenizer")
    tgt_tok.save(out, "tgt_tokenizer")
    c = model.config
    info = info or {}
    meta = {
        "format": "attnlab.onnx",
        "version": 1,
        "kind": "rnn",
        "name": info.get("name", out.name),
        "src_lang": info.get("src_lang"),
        "tgt_lang": info.get("tgt_lang"),
        "lowercase": info.get("lowercase", False),
        "cell": c.cell,
        "attention": c.attention,
        "embed_dim": c.embed_dim,
        "hidden_size": c.hidden_size,
        "attn_dim": c.attn_dim,
        "n_layers": c.n_layers,
        "src_vocab_size": c.src_vocab_size,
        "tgt_vocab_size": c.tgt_vocab_size,
        "pad_id": c.pad_id,
        "bos_id": tgt_tok.bos_id,
        "eos_id": tgt_tok.eos_id,
        "max_len": 512,  # no position table: output_limit's default ceiling, as Translator uses it
        "weights": weights,
        "src_tokenizer": "src_tokenizer.json",
        "tgt_tokenizer": "tgt_tokenizer.json",
        "source_wrap": {"bos": False, "eos": False},
    }
    write_meta(out, meta)
    return out


# -- the pointer-generator (§9's summary) -----------------------------------------------------------


def check_pointer_generator_exportable(model: nn.Module) -> None:
    """Raise a one-line ``ValueError`` unless ``model`` is a pointer-generator these graphs express
    (no coverage: the shipped ``facts-summarizer`` has none).

    Shape:
        no tensors
    """
    config = getattr(model, "config", None)
    if getattr(config, "model_type", None) != "pointer_generator":
        raise ValueError(f"not a pointer-generator: model_type {getattr(config, 'model_type', None)!r}")
    if config.coverage:
        raise ValueError("a pointer-generator with coverage has no ONNX export (the step would carry the coverage)")


def _in_vocab(g: Graph, ids: str, vocab_size: int, unk_id: int) -> str:
    """Extended ids → fixed-vocabulary ids (every id ≥ V read as [UNK], as the model embeds them).

    Shape:
        ids ``(B, L)`` → ``(B, L)``
    """
    outside = g.op("GreaterOrEqual", ids, g.const(vocab_size, np.int64, "vocab"))
    return g.op("Where", outside, g.const(unk_id, np.int64, "unk"), ids)


def pointer_generator_encoder_graph(model: nn.Module, weights: str = "fp32"):
    """The summarizer's encoder: ``src_ids`` (extended ids) → ``memory``, ``final_h``, ``final_c``,
    ``keys`` (``W_h h_i + b_attn`` of See et al. 2017, eq. 1, computed once per document).

    Shape:
        src_ids ``(B, S)`` → memory ``(B, S, D)``, final_h/final_c ``(L, B, D)``, keys ``(B, S, A)``
    """
    check_pointer_generator_exportable(model)
    weights = resolve_weights(model, weights)
    c = model.config
    g = Graph(weights)
    TensorProto = g.onnx.TensorProto
    f32 = TensorProto.FLOAT
    real = _src_mask(g, "src_ids", c.pad_id)  # (B, S)
    lens = g.op("ReduceSum", g.op("Cast", real, to=TensorProto.INT32), g.const([1], np.int64, "axes"), keepdims=0)
    ids = _in_vocab(g, "src_ids", c.vocab_size, c.unk_id)  # (B, S)
    x = g.op(
        "Transpose", g.op("Gather", g.weight(model.embed.weight, "embed"), ids, axis=0), perm=[1, 0, 2]
    )  # (S, B, E)
    rnn = model.encoder.rnn
    finals: list[list[str]] = []
    for layer in range(c.n_layers):
        x, state = rnn_layer(g, x, rnn, layer, None, lens, f"enc{layer}")  # (S, B, D)
        finals.append([_pair_directions(g, s, rnn.hidden_size) for s in state])  # (1, B, D) each
    memory = g.op("Transpose", x, perm=[1, 0, 2], out="memory")  # (B, S, D)
    names = ["final_h", "final_c"][: len(finals[0])]
    for k, name in enumerate(names):
        g.op("Concat", *[f[k] for f in finals], axis=0, out=name)  # (L, B, D)
    g.op("Identity", linear(g, memory, model.attention.k_proj, "keys_proj"), out="keys")  # (B, S, A)
    outputs = [value_info("memory", f32, ["B", "S", c.hidden_size])]
    outputs += [value_info(n, f32, [c.n_layers, "B", c.hidden_size]) for n in names]
    outputs.append(value_info("keys", f32, ["B", "S", c.attn_dim]))
    return g.model([value_info("src_ids", TensorProto.INT64, ["B", "S"])], outputs, "attnlab_pointer_generator_encoder")


def pointer_generator_decoder_graph(model: nn.Module, weights: str = "fp32"):
    """One step of the summarizer's decoder (See et al. 2017, §2.2): the RNN step first, then
    additive attention with the new state, the vocabulary distribution, the switch ``p_gen`` and
    the final mix (eq. 9) over the extended ids of this document.

    Shape:
        tokens ``(B, 1)`` (extended ids), hidden/cell ``(L, B, D)``, memory ``(B, S, D)``, keys
        ``(B, S, A)``, src_ids ``(B, S)`` → log_probs ``(B, V_ext)`` (V_ext = max(V, max id + 1)),
        hidden_out/cell_out ``(L, B, D)``, cross_attn ``(B, S)``, p_gen ``(B,)``
    """
    check_pointer_generator_exportable(model)
    weights = resolve_weights(model, weights)
    c = model.config
    g = Graph(weights)
    TensorProto = g.onnx.TensorProto
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    lstm = c.cell == "lstm"
    D, L, V = c.hidden_size, c.n_layers, c.vocab_size
    ax = lambda *a: g.const(list(a), np.int64, "axes")  # noqa: E731
    x = g.op("Gather", g.weight(model.embed.weight, "embed"), _in_vocab(g, "tokens", V, c.unk_id), axis=0)  # (B, 1, E)
    emb = g.op("Squeeze", x, ax(1))  # (B, E)
    h = g.op("Transpose", x, perm=[1, 0, 2])  # (1, B, E)
    new_h, new_c = [], []
    for layer in range(L):
        idx = g.const([layer], np.int64, "layer")
        state = [g.op("Gather", "hidden", idx, axis=0)] + ([g.op("Gather", "cell", idx, axis=0)] if lstm else [])
        h, final = rnn_layer(g, h, model.decoder_rnn, layer, tuple(state), None, f"dec{layer}")  # (1, B, D)
        new_h.append(final[0])
        if lstm:
            new_c.append(final[1])
    g.op("Concat", *new_h, axis=0, out="hidden_out")  # (L, B, D)
    if lstm:
        g.op("Concat", *new_c, axis=0, out="cell_out")
    s = g.op("Squeeze", h, ax(0))  # (B, D) s_t
    q = linear(g, s, model.attention.q_proj, "attn_q")  # (B, A)
    hidden = g.op("Tanh", g.op("Add", g.op("Unsqueeze", q, ax(1)), "keys"))  # (B, S, A)
    v = g.op("Unsqueeze", g.weight(model.attention.score, "attn_v"), ax(1))  # (A, 1)
    scores = g.op("Squeeze", g.op("MatMul", hidden, v), ax(2))  # (B, S)
    masked = g.op("Where", _src_mask(g, "src_ids", c.pad_id), scores, g.const(-np.inf))  # (B, S)
    attn = g.op("Softmax", masked, axis=-1, out="cross_attn")  # (B, S)
    context = g.op("Squeeze", g.op("MatMul", g.op("Unsqueeze", attn, ax(1)), "memory"), ax(1))  # (B, D)
    readout = linear(g, g.op("Concat", s, context, axis=-1), model.readout, "readout")  # (B, E): no tanh (eq. 4)
    p_vocab = g.op("Softmax", linear(g, readout, model.out_proj, "out"), axis=-1)  # (B, V)
    p_gen = g.op("Sigmoid", linear(g, g.op("Concat", context, s, emb, axis=-1), model.p_gen_proj, "p_gen"))  # (B, 1)
    g.op("Squeeze", p_gen, ax(1), out="p_gen")  # (B,)
    # eq. 9: p_gen·P_vocab padded with zeros up to V_ext, plus (1 − p_gen)·a added at each source
    # word's extended id (ScatterElements with reduction "add", opset 16).
    n_ext = g.op(
        "Max",
        g.op("Add", g.op("ReduceMax", "src_ids", keepdims=0), g.const(1, np.int64, "one")),
        g.const(V, np.int64, "vocab"),
    )
    extra = g.op("Reshape", g.op("Sub", n_ext, g.const(V, np.int64, "vocab")), g.const([1], np.int64, "shape"))  # (1,)
    pads = g.op("Concat", g.const([0, 0, 0], np.int64, "pads"), extra, axis=0)  # (4,): (B, V) → (B, V_ext)
    gen = g.op("Pad", g.op("Mul", p_gen, p_vocab), pads)  # (B, V_ext)
    copy = g.op("Mul", g.op("Sub", g.const(1.0), p_gen), attn)  # (B, S)
    final = g.op("ScatterElements", gen, "src_ids", copy, axis=1, reduction="add")  # (B, V_ext)
    g.op("Log", final, out="log_probs")  # (B, V_ext): −inf where no word of this row fills a slot
    inputs = [value_info("tokens", i64, ["B", 1]), value_info("hidden", f32, [L, "B", D])]
    inputs += [value_info("cell", f32, [L, "B", D])] if lstm else []
    inputs += [
        value_info("memory", f32, ["B", "S", D]),
        value_info("keys", f32, ["B", "S", c.attn_dim]),
        value_info("src_ids", i64, ["B", "S"]),
    ]
    outputs = [value_info("log_probs", f32, ["B", "V_ext"]), value_info("hidden_out", f32, [L, "B", D])]
    outputs += [value_info("cell_out", f32, [L, "B", D])] if lstm else []
    outputs += [value_info("cross_attn", f32, ["B", "S"]), value_info("p_gen", f32, ["B"])]
    return g.model(inputs, outputs, "attnlab_pointer_generator_step")


def export_pointer_generator_onnx(
    model: nn.Module,
    vocab,
    out: str | Path,
    *,
    weights: str = "auto",
    info: dict[str, Any] | None = None,
    force: bool = False,
) -> Path:
    """Write a pointer-generator summarizer as an in-page folder: ``encoder.onnx``, ``decoder.onnx``,
    :data:`META_FILE` (``kind: "pointer_generator"``) and its ``vocab.json`` (attnlab's word
    vocabulary, as saved).

    Raises:
        ValueError: a model :func:`check_pointer_generator_exportable` refuses.
        FileExistsError: ``out`` exists and ``force`` is not set.

    Shape:
        no tensors; returns ``out``.
    """
    check_pointer_generator_exportable(model)
    weights = resolve_weights(model, weights)
    out = Path(out)
    if out.exists() and not force:
        raise FileExistsError(f"{out} exists; choose another folder or pass --force to replace it")
    onnx = require_onnx()
    encoder = pointer_generator_encoder_graph(model, weights)
    decoder = pointer_generator_decoder_graph(model, weights)
    replace_folder(out)
    onnx.save(encoder, str(out / "encoder.onnx"))
    onnx.save(decoder, str(out / "decoder.onnx"))
    vocab.save(out, "vocab")
    c = model.config
    info = info or {}
    meta = {
        "format": "attnlab.onnx",
        "version": 1,
        "kind": "pointer_generator",
        "name": info.get("name", out.name),
        "cell": c.cell,
        "hidden_size": c.hidden_size,
        "attn_dim": c.attn_dim,
        "n_layers": c.n_layers,
        "vocab_size": c.vocab_size,
        "pad_id": c.pad_id,
        "unk_id": c.unk_id,
        "bos_id": vocab.bos_id,
        "eos_id": vocab.eos_id,
        "max_src_len": info.get("max_src_len"),
        "max_summary_len": info.get("max_summary_len"),
        "beam_size": info.get("beam_size"),
        "weights": weights,
        "vocab": "vocab.json",
    }
    write_meta(out, meta)
    return out
