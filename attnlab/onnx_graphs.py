"""attnlab's Transformer translator as two ONNX graphs: an encoder, and one decoder step with its cache.

The graphs are built node by node with ``onnx.helper`` from the model's own weights (not traced by
``torch.onnx.export``): every input, output and shape is the one of the contract shared with the
in-page JavaScript engine (``ONNX_CONTRACT.md``, docs/export.md), the attention weights are named
outputs, and nothing depends on an exporter's choices. Each block below is one small function that
emits the nodes of one piece of :class:`attnlab.models.transformer.Transformer`, in the same order
and with the same arithmetic:

- embeddings · √D plus the sinusoidal table (Vaswani et al. 2017, §3.4, §3.5), the table stored in
  fp32 whatever the weights (it is a function of the position, not a trained weight);
- pre-norm ``x + f(LN(x))`` or post-norm ``LN(x + f(x))`` blocks, LayerNorm with the model's ε
  (ONNX ``LayerNormalization``, opset 17);
- attention ``softmax(QKᵀ/√Dh)·V`` per head, keys the mask forbids set to −∞ before the softmax
  (``Where``), so that their weight is exactly 0 as in attnlab's masked softmax;
- relu, gelu (erf) or gelu_tanh; the output projection tied to the target embedding where the
  model ties them (one initializer read by ``Gather`` and by ``Gemm`` with ``transB``).

What is exported (contract names; ``Ld``/``Le`` decoder/encoder layers):

- ``encoder.onnx``: ``src_ids`` (B, S) → ``cross_k``, ``cross_v`` (Ld, B, H, S, Dh), every decoder
  layer's cross-attention keys/values of the encoder output (what ``Transformer.start`` computes
  once), and ``enc_attn`` (Le, B, H, S, S);
- ``decoder.onnx``: ``tokens`` (B, 1), ``step`` (1,), ``past_k``/``past_v`` (Ld, B, H, T, Dh),
  ``cross_k``/``cross_v``, ``src_ids`` → ``log_probs`` (B, V), ``present_k``/``present_v``
  (Ld, B, H, T + 1, Dh), ``self_attn`` (Ld, B, H, T + 1), ``cross_attn`` (Ld, B, H, S).

How the weights are stored (``weights=``): ``"fp32"`` as they are; ``"fp16"`` as fp16 initializers
followed by a ``Cast`` to fp32 (exact for a checkpoint packed in fp16, such as ``demo``);
``"int8"`` as int8 matrices with one fp32 scale per row, ``Cast`` then ``Mul`` (the layout of
:func:`attnlab.checkpoint.pack_checkpoint`'s int8 packing, so exact for the int8-packed ``ja-en``
and ``en-ja``, where fp16 would round every weight again); ``"auto"`` (the default of
:func:`export_onnx`) the smallest of these that is exact for the model (:func:`exact_storage`).
Vectors (biases, LayerNorm) are fp16 in both compact modes. The interface is fp32 in every mode.

What cannot be exported: the RNN translators (no attention blocks to map), windowed or chunked
self-attention (the contract's decoder attends to its whole cache) and a model without encoder or
decoder layers; :func:`check_onnx_exportable` says so in one line.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .models.seq2seq import StepOutput
from .positional import sinusoidal_encoding

__all__ = [
    # The graph-building blocks the other in-page exporters (onnx_rnn, onnx_apps, onnx_bert) share.
    "Graph",
    "value_info",
    "linear",
    "layer_norm",
    "apply_activation",
    "split_heads",
    "merge_heads",
    "attend_heads",
    "stack_outputs",
    "encoder_block",
    "resolve_weights",
    "replace_folder",
    "write_meta",
    "ONNX_INSTALL",
    "OPSET",
    "WEIGHTS",
    "META_FILE",
    "ENCODER_TAPS",
    "require_onnx",
    "check_onnx_exportable",
    "exact_storage",
    "encoder_graph",
    "decoder_graph",
    "export_onnx",
    "OnnxState",
    "OnnxSeq2Seq",
]

#: How to get the optional packages.
ONNX_INSTALL = "pip install 'attnlab[site]'"
#: The ONNX opset of the graphs (LayerNormalization is opset 17).
OPSET = 17
#: How ``weights=`` stores the initializers (module docstring); ``"auto"`` picks the smallest that
#: is exact for the model (:func:`exact_storage`).
WEIGHTS = ("auto", "fp16", "fp32", "int8")
#: The description of an exported folder (the contract's meta.json).
META_FILE = "meta.json"

_ACTIVATIONS = ("relu", "gelu", "gelu_tanh")

#: The encoder's optional outputs (``encoder_graph(..., taps=True)``), after the contract's three:
#: each name → the letters of its last axes (D: ``(B, S, D)``, F: ``(B, S, F)``, P: ``(S, D)``).
#: ``src_embed`` embedding·√D; ``src_positions`` the sinusoidal rows added to it; of the first
#: encoder layer, its feed-forward's input (after the pre-norm LayerNorm), hidden layer after the
#: activation and output, and the layer's output.
ENCODER_TAPS = {
    "src_embed": "D",
    "src_positions": "P",
    "enc0_ff_in": "D",
    "enc0_ff_hidden": "F",
    "enc0_ff_out": "D",
    "enc0_out": "D",
}


def require_onnx():
    """The ``onnx`` module, or an ImportError that says how to install it.

    Shape:
        no tensors
    """
    try:
        import onnx
    except ImportError as err:
        raise ImportError(f"onnx is not installed; it is an optional extra: {ONNX_INSTALL}", name="onnx") from err
    return onnx


def check_onnx_exportable(model: nn.Module) -> None:
    """Raise a one-line ``ValueError`` unless ``model`` is an attnlab Transformer the graphs express.

    Shape:
        no tensors
    """
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type != "transformer":
        raise ValueError(
            f"only the Transformer translator can be exported to ONNX, not model_type {model_type!r} "
            "(the in-page engine runs attention blocks, not recurrent layers)"
        )
    if config.attention != "full":
        raise ValueError(
            f"attention={config.attention!r} cannot be exported to ONNX: the decoder step attends to its whole "
            "cache (only full attention)"
        )
    if config.activation not in _ACTIVATIONS:
        raise ValueError(f"activation {config.activation!r} has no ONNX export; known: {list(_ACTIVATIONS)}")
    if not config.n_encoder_layers or not config.n_decoder_layers:
        raise ValueError("a Transformer without encoder or decoder layers cannot be exported to ONNX")


def _int8_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-row int8, as :func:`attnlab.checkpoint.pack_checkpoint` stores a matrix
    (``w ≈ q·s``, ``s = max|row| / 127``), the scale computed in float64 so that a matrix that was
    int8-packed gets its own scales back.

    Shape:
        a ``(rows, cols)`` → q ``(rows, cols)`` int8, scale ``(rows,)`` fp32
    """
    rows = a.astype(np.float64)
    scale = np.maximum((np.abs(rows).max(axis=1) / 127).astype(np.float32), np.finfo(np.float32).tiny)  # (rows,)
    q = np.clip(np.round(rows / scale.astype(np.float64)[:, None]), -127, 127).astype(np.int8)
    return q, scale


def exact_storage(model: nn.Module) -> str:
    """The smallest storage of :data:`WEIGHTS` that gives ``model``'s fp32 weights back: ``"int8"``
    for an int8-packed checkpoint (every matrix is an int8 row times its scale, to fp32 rounding),
    ``"fp16"`` for an fp16-packed one (every parameter is an fp16 number), else ``"fp32"``.

    Shape:
        no tensors; reads every parameter once
    """
    params = [p.detach().to(device="cpu", dtype=torch.float32) for p in model.parameters()]
    vectors_fp16 = all(bool((p.half().float() == p).all()) for p in params if p.dim() != 2)
    if vectors_fp16 and all(bool((p.half().float() == p).all()) for p in params if p.dim() == 2):
        return "fp16"
    if vectors_fp16:
        for p in params:
            if p.dim() == 2 and p.numel():
                a = p.numpy()
                q, scale = _int8_rows(a)
                if np.abs(q * scale[:, None] - a).max() > 1e-6 * max(float(np.abs(a).max()), 1e-30):
                    return "fp32"
        return "int8"
    return "fp32"


class Graph:
    """Nodes and initializers of one graph being built, with automatic names.

    ``weight`` stores a parameter once (tied parameters share one initializer) in the chosen
    storage and returns the name of its fp32 value.
    """

    def __init__(self, weights: str) -> None:
        self.onnx = require_onnx()
        self.weights = weights
        self.nodes: list = []
        self.initializers: list = []
        self._count = 0
        self._stored: dict[tuple, str] = {}

    def name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def op(self, op_type: str, *inputs: str, out: str | None = None, **attrs) -> str:
        """One node with one output; returns the output's name."""
        output = out or self.name(op_type.lower())
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), [output], **attrs))
        return output

    def const(self, value, dtype=np.float32, hint: str = "const") -> str:
        """An fp32 (or ``dtype``) initializer holding ``value``."""
        name = self.name(hint)
        self.initializers.append(self.onnx.numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def weight(self, t: torch.Tensor, hint: str, *, transpose: bool = False) -> str:
        """The fp32 value of parameter ``t`` (``transpose``: as ``(D_in, D_out)`` for ``MatMul``).

        Shape:
            t ``(rows, cols)`` or ``(n,)`` → the same (or transposed), fp32
        """
        key = (t.data_ptr(), tuple(t.shape), transpose)
        if key in self._stored:
            return self._stored[key]
        a = t.detach().to(device="cpu", dtype=torch.float32).numpy()
        if self.weights == "int8" and a.ndim == 2:
            q, scale = _int8_rows(a)  # (rows, cols), (rows,)
            value = self.op(
                "Mul",
                self.op("Cast", self.const(q, np.int8, hint), to=1),
                self.const(scale[:, None], hint=hint + "_scale"),
            )  # (rows, cols) fp32
        elif self.weights in ("fp16", "int8"):
            value = self.op("Cast", self.const(a, np.float16, hint), to=1)  # fp16 → fp32 (TensorProto.FLOAT = 1)
        else:
            value = self.const(a, hint=hint)
        if transpose:
            value = self.op("Transpose", value, perm=[1, 0])  # (D_out, D_in) -> (D_in, D_out)
        self._stored[key] = value
        return value

    def model(self, inputs: list, outputs: list, name: str):
        onnx = self.onnx
        graph = onnx.helper.make_graph(self.nodes, name, inputs, outputs, self.initializers)
        model = onnx.helper.make_model(
            graph, opset_imports=[onnx.helper.make_opsetid("", OPSET)], producer_name="attnlab"
        )
        model.ir_version = 8  # what onnxruntime (web) 1.17 and later read
        onnx.checker.check_model(model)
        return model


# -- the pieces -------------------------------------------------------------------------------------


def linear(g: Graph, x: str, lin: nn.Linear, hint: str) -> str:
    """``x Wᵀ + b`` (ONNX MatMul broadcasts over the leading dimensions).

    Shape:
        x ``(..., D_in)`` → ``(..., D_out)``
    """
    y = g.op("MatMul", x, g.weight(lin.weight, hint + "_w", transpose=True))  # (..., D_in) @ (D_in, D_out)
    return y if lin.bias is None else g.op("Add", y, g.weight(lin.bias, hint + "_b"))


def layer_norm(g: Graph, x: str, norm: nn.Module, hint: str) -> str:
    """LayerNorm over the last axis with the module's ε (ONNX LayerNormalization, opset 17:
    https://onnx.ai/onnx/operators/onnx__LayerNormalization.html, the biased variance as
    ``nn.LayerNorm``); the identity for the post-norm stacks' missing final norm.

    Shape:
        x ``(..., D)`` → ``(..., D)``
    """
    if isinstance(norm, nn.Identity):
        return x
    return g.op(
        "LayerNormalization",
        x,
        g.weight(norm.weight, hint + "_g"),
        g.weight(norm.bias, hint + "_b"),
        axis=-1,
        epsilon=float(norm.eps),
    )


def apply_activation(g: Graph, x: str, name: str) -> str:
    """relu; gelu with erf, ``x·(1 + erf(x/√2))/2``; gelu_tanh, ``x·(1 + tanh(√(2/π)(x + 0.044715x³)))/2``
    (Hendrycks & Gimpel 2016). Opset 17 has no Gelu operator (it came in opset 20)."""
    if name == "relu":
        return g.op("Relu", x)
    half = g.op("Mul", x, g.const(0.5))
    if name == "gelu":
        inner = g.op("Erf", g.op("Mul", x, g.const(1 / math.sqrt(2))))
    else:
        cube = g.op("Mul", g.op("Mul", x, x), x)
        inner = g.op(
            "Tanh",
            g.op("Mul", g.op("Add", x, g.op("Mul", cube, g.const(0.044715))), g.const(math.sqrt(2 / math.pi))),
        )
    return g.op("Mul", half, g.op("Add", inner, g.const(1.0)))


def _feed_forward(g: Graph, x: str, ff: nn.Module, activation: str, hint: str, taps: dict | None = None) -> str:
    """``down(act(up(x)))`` (Vaswani et al. 2017, §3.3); ``taps`` (when given) gets the names of its
    input, hidden layer (after the activation) and output as ``ff_in``, ``ff_hidden``, ``ff_out``.

    Shape:
        x ``(B, L, D)`` → ``(B, L, D)``; hidden ``(B, L, d_ff)``
    """
    hidden = apply_activation(g, linear(g, x, ff.up_proj, hint + "_up"), activation)  # (B, L, d_ff)
    out = linear(g, hidden, ff.down_proj, hint + "_down")  # (B, L, D)
    if taps is not None:
        taps.update(ff_in=x, ff_hidden=hidden, ff_out=out)
    return out


def split_heads(g: Graph, x: str, H: int, Dh: int) -> str:
    """Shape: x ``(B, L, D)`` → ``(B, H, L, Dh)``."""
    x = g.op("Reshape", x, g.const([0, -1, H, Dh], np.int64, "shape"))  # (B, L, H, Dh); 0 keeps B
    return g.op("Transpose", x, perm=[0, 2, 1, 3])  # (B, H, L, Dh)


def merge_heads(g: Graph, x: str, D: int) -> str:
    """Shape: x ``(B, H, L, Dh)`` → ``(B, L, D)``."""
    x = g.op("Transpose", x, perm=[0, 2, 1, 3])  # (B, L, H, Dh)
    return g.op("Reshape", x, g.const([0, -1, D], np.int64, "shape"))  # (B, L, D)


def attend_heads(g: Graph, q: str, k: str, v: str, mask: str | None, Dh: int) -> tuple[str, str]:
    """``softmax(QKᵀ/√Dh)·V`` per head; keys where ``mask`` is False get −∞ before the softmax
    (weight exactly 0; a source row always has a real token, so no row is all −∞). Returns the
    output and the weights. ONNX Softmax (opset ≥ 13) normalises along ``axis`` alone
    (https://onnx.ai/onnx/operators/onnx__Softmax.html); older opsets flattened the trailing axes.

    Shape:
        q ``(B, H, T, Dh)``; k, v ``(B, H, S, Dh)``; mask ``(B, 1, 1, S)`` bool → out
        ``(B, H, T, Dh)``, weights ``(B, H, T, S)``
    """
    kt = g.op("Transpose", k, perm=[0, 1, 3, 2])  # (B, H, Dh, S)
    scores = g.op("Mul", g.op("MatMul", q, kt), g.const(1.0 / math.sqrt(Dh)))  # (B, H, T, S)
    if mask is not None:
        scores = g.op("Where", mask, scores, g.const(-np.inf))  # (B, H, T, S)
    weights = g.op("Softmax", scores, axis=-1)  # (B, H, T, S)
    return g.op("MatMul", weights, v), weights  # (B, H, T, Dh)


def _source_mask(g: Graph, src_ids: str, pad_id: int) -> str:
    """True where a source token may be attended to (``id != pad``), for the keys of every head
    and query.

    Shape:
        src_ids ``(B, S)`` → ``(B, 1, 1, S)`` bool
    """
    real = g.op("Not", g.op("Equal", src_ids, g.const(pad_id, np.int64, "pad")))  # (B, S)
    return g.op("Unsqueeze", real, g.const([1, 2], np.int64, "axes"))  # (B, 1, 1, S)


def _embed(
    g: Graph, ids: str, embedding: nn.Embedding, positions: str, D: int, hint: str, taps: dict | None = None
) -> str:
    """``embedding[ids]·√D + PE`` (§3.4: the √D keeps the embeddings from being drowned by the
    positional code); ``taps`` (when given) gets the name of ``embedding[ids]·√D`` as ``embed``.

    Shape:
        ids ``(B, L)``; positions ``(L, D)`` or ``(1, D)`` → ``(B, L, D)``
    """
    x = g.op("Gather", g.weight(embedding.weight, hint), ids, axis=0)  # (B, L, D)
    scaled = g.op("Mul", x, g.const(math.sqrt(D)))  # (B, L, D)
    if taps is not None:
        taps["embed"] = scaled
    return g.op("Add", scaled, positions)  # (B, L, D)


def stack_outputs(g: Graph, parts: list[str], out: str) -> str:
    """Per-layer tensors stacked on a new first axis.

    Shape:
        L × ``(...)`` → ``(L, ...)``
    """
    axes = g.const([0], np.int64, "axes")
    return g.op("Concat", *[g.op("Unsqueeze", p, axes) for p in parts], axis=0, out=out)


def value_info(name: str, elem: int, shape: list):
    onnx = require_onnx()
    return onnx.helper.make_tensor_value_info(name, elem, shape)


def _positions_table(model: nn.Module) -> np.ndarray:
    c = model.config
    return sinusoidal_encoding(c.max_len, c.d_model).numpy()  # (max_len, D) the table the model adds


# -- the two graphs ---------------------------------------------------------------------------------


def encoder_graph(model: nn.Module, weights: str = "fp32", *, taps: bool = False):
    """The encoder as an ONNX model: ``src_ids`` → ``cross_k``, ``cross_v``, ``enc_attn``; with
    ``taps``, also the first layer's intermediate tensors of :data:`ENCODER_TAPS`, as further
    outputs after the contract's three (what §7's token walk prints; the same arithmetic, only
    more of it named).

    Shape:
        src_ids ``(B, S)`` int64 → cross_k, cross_v ``(Ld, B, H, S, Dh)``, enc_attn ``(Le, B, H, S, S)``;
        taps: src_embed, enc0_ff_in, enc0_ff_out, enc0_out ``(B, S, D)``, src_positions ``(S, D)``,
        enc0_ff_hidden ``(B, S, F)``
    """
    check_onnx_exportable(model)
    weights = resolve_weights(model, weights)
    c = model.config
    D, H = c.d_model, c.n_heads
    Dh = D // H
    g = Graph(weights)
    TensorProto = g.onnx.TensorProto
    src = "src_ids"
    S = g.op("Shape", src, start=1, end=2)  # (1,) the source length
    table = g.const(_positions_table(model), hint="positions")  # (max_len, D)
    positions = g.op("Slice", table, g.const([0], np.int64, "starts"), S, g.const([0], np.int64, "axes"))  # (S, D)
    mask = _source_mask(g, src, c.pad_id)  # (B, 1, 1, S)
    named: dict[str, str] = {}
    x = _embed(g, src, model.src_embed, positions, D, "src_embed", named)  # (B, S, D)
    attn = []
    for i, block in enumerate(model.encoder):
        x, w = encoder_block(g, x, mask, block, c.activation, H, Dh, D, f"enc{i}", named if i == 0 else None)
        attn.append(w)  # (B, H, S, S)
        if i == 0:
            named["out"] = x  # (B, S, D): the first layer's output
    memory = layer_norm(g, x, model.encoder_norm, "enc_norm")  # (B, S, D)
    keys, values = [], []
    for i, block in enumerate(model.decoder):
        keys.append(split_heads(g, linear(g, memory, block.cross_attn.k_proj, f"dec{i}_cross_k"), H, Dh))
        values.append(split_heads(g, linear(g, memory, block.cross_attn.v_proj, f"dec{i}_cross_v"), H, Dh))
    stack_outputs(g, keys, "cross_k")  # (Ld, B, H, S, Dh)
    stack_outputs(g, values, "cross_v")
    stack_outputs(g, attn, "enc_attn")  # (Le, B, H, S, S)
    Ld, Le, f32 = c.n_decoder_layers, c.n_encoder_layers, TensorProto.FLOAT
    outputs = [
        value_info("cross_k", f32, [Ld, "B", H, "S", Dh]),
        value_info("cross_v", f32, [Ld, "B", H, "S", Dh]),
        value_info("enc_attn", f32, [Le, "B", H, "S", "S"]),
    ]
    if taps:
        shapes = {"D": ["B", "S", D], "F": ["B", "S", c.d_ff], "P": ["S", D]}
        sources = {"src_embed": named["embed"], "src_positions": positions}
        sources |= {f"enc0_{k}": named[k] for k in ("ff_in", "ff_hidden", "ff_out", "out")}
        for tap, width in ENCODER_TAPS.items():
            g.op("Identity", sources[tap], out=tap)
            outputs.append(value_info(tap, f32, shapes[width]))
    return g.model([value_info(src, TensorProto.INT64, ["B", "S"])], outputs, "attnlab_encoder")


def encoder_block(
    g: Graph,
    x: str,
    mask: str,
    block: nn.Module,
    activation: str,
    H: int,
    Dh: int,
    D: int,
    hint: str,
    taps: dict | None = None,
) -> tuple[str, str]:
    """One :class:`attnlab.layers.EncoderBlock` (pre- or post-norm); returns the output and the
    self-attention weights (``taps``: the feed-forward's tensors, :func:`_feed_forward`).

    Shape:
        x ``(B, S, D)``; mask ``(B, 1, 1, S)`` → ``(B, S, D)``, weights ``(B, H, S, S)``
    """
    pre = block.norm == "pre"
    attn = block.self_attn

    def self_attention(h: str) -> tuple[str, str]:
        q = split_heads(g, linear(g, h, attn.q_proj, hint + "_q"), H, Dh)  # (B, H, S, Dh)
        k = split_heads(g, linear(g, h, attn.k_proj, hint + "_k"), H, Dh)
        v = split_heads(g, linear(g, h, attn.v_proj, hint + "_v"), H, Dh)
        out, w = attend_heads(g, q, k, v, mask, Dh)  # (B, H, S, Dh), (B, H, S, S)
        return linear(g, merge_heads(g, out, D), attn.out_proj, hint + "_o"), w  # (B, S, D)

    if pre:
        a, w = self_attention(layer_norm(g, x, block.attn_norm, hint + "_ln1"))
        x = g.op("Add", x, a)
        ff = _feed_forward(g, layer_norm(g, x, block.ff_norm, hint + "_ln2"), block.ff, activation, hint, taps)
        x = g.op("Add", x, ff)
    else:
        a, w = self_attention(x)
        x = layer_norm(g, g.op("Add", x, a), block.attn_norm, hint + "_ln1")
        x = layer_norm(
            g, g.op("Add", x, _feed_forward(g, x, block.ff, activation, hint, taps)), block.ff_norm, hint + "_ln2"
        )
    return x, w


def decoder_graph(model: nn.Module, weights: str = "fp32"):
    """One decoder step with its self-attention cache as an ONNX model (the contract's inputs and
    outputs; module docstring).

    Shape:
        tokens ``(B, 1)``, step ``(1,)``, past_k/past_v ``(Ld, B, H, T, Dh)``, cross_k/cross_v
        ``(Ld, B, H, S, Dh)``, src_ids ``(B, S)`` → log_probs ``(B, V)``, present_k/present_v
        ``(Ld, B, H, T + 1, Dh)``, self_attn ``(Ld, B, H, T + 1)``, cross_attn ``(Ld, B, H, S)``
    """
    check_onnx_exportable(model)
    weights = resolve_weights(model, weights)
    c = model.config
    D, H = c.d_model, c.n_heads
    Dh = D // H
    g = Graph(weights)
    TensorProto = g.onnx.TensorProto
    table = g.const(_positions_table(model), hint="positions")  # (max_len, D)
    position = g.op("Gather", table, "step", axis=0)  # (1, D): broadcasts over (B, 1, D)
    x = _embed(g, "tokens", model.tgt_embed, position, D, "tgt_embed")  # (B, 1, D)
    mask = _source_mask(g, "src_ids", c.pad_id)  # (B, 1, 1, S)
    keys, values, self_w, cross_w = [], [], [], []
    for i, block in enumerate(model.decoder):
        # A scalar index: Gather drops the layer axis (rank r + q − 1 with q = 0,
        # https://onnx.ai/onnx/operators/onnx__Gather.html).
        layer = g.const(i, np.int64, "layer")
        past = (g.op("Gather", "past_k", layer, axis=0), g.op("Gather", "past_v", layer, axis=0))  # (B, H, T, Dh)
        cross = (g.op("Gather", "cross_k", layer, axis=0), g.op("Gather", "cross_v", layer, axis=0))  # (B, H, S, Dh)
        x, k, v, sw, cw = _decoder_block(g, x, past, cross, mask, block, c.activation, H, Dh, D, f"dec{i}")
        keys.append(k)  # (B, H, T + 1, Dh)
        values.append(v)
        squeeze = g.const([2], np.int64, "axes")
        self_w.append(g.op("Squeeze", sw, squeeze))  # (B, H, 1, T + 1) -> (B, H, T + 1)
        cross_w.append(g.op("Squeeze", cw, squeeze))  # (B, H, 1, S) -> (B, H, S)
    x = layer_norm(g, x, model.decoder_norm, "dec_norm")  # (B, 1, D)
    x = g.op("Squeeze", x, g.const([1], np.int64, "axes"))  # (B, D)
    # Gemm with transB: logits = x · Wᵀ reading the (V, D) matrix as stored, so a tied output
    # projection shares the target embedding's initializer (Press & Wolf 2017;
    # https://onnx.ai/onnx/operators/onnx__Gemm.html: Y = A · Bᵀ with transB = 1).
    out_w = g.weight(model.out_proj.weight, "tgt_embed" if model.out_proj.weight is model.tgt_embed.weight else "out")
    logits = g.op("Gemm", x, out_w, transB=1)  # (B, D) @ (D, V) -> (B, V)
    if model.out_proj.bias is not None:
        logits = g.op("Add", logits, g.weight(model.out_proj.bias, "out_b"))
    g.op("LogSoftmax", logits, axis=-1, out="log_probs")  # (B, V), as attnlab.decode scores them
    stack_outputs(g, keys, "present_k")  # (Ld, B, H, T + 1, Dh)
    stack_outputs(g, values, "present_v")
    stack_outputs(g, self_w, "self_attn")  # (Ld, B, H, T + 1)
    stack_outputs(g, cross_w, "cross_attn")  # (Ld, B, H, S)
    Ld, f32, i64 = c.n_decoder_layers, TensorProto.FLOAT, TensorProto.INT64
    return g.model(
        [
            value_info("tokens", i64, ["B", 1]),
            value_info("step", i64, [1]),
            value_info("past_k", f32, [Ld, "B", H, "T", Dh]),
            value_info("past_v", f32, [Ld, "B", H, "T", Dh]),
            value_info("cross_k", f32, [Ld, "B", H, "S", Dh]),
            value_info("cross_v", f32, [Ld, "B", H, "S", Dh]),
            value_info("src_ids", i64, ["B", "S"]),
        ],
        [
            value_info("log_probs", f32, ["B", c.tgt_vocab_size]),
            value_info("present_k", f32, [Ld, "B", H, "T_next", Dh]),
            value_info("present_v", f32, [Ld, "B", H, "T_next", Dh]),
            value_info("self_attn", f32, [Ld, "B", H, "T_next"]),
            value_info("cross_attn", f32, [Ld, "B", H, "S"]),
        ],
        "attnlab_decoder_step",
    )


def _decoder_block(
    g: Graph,
    x: str,
    past: tuple[str, str],
    cross: tuple[str, str],
    mask: str,
    block: nn.Module,
    activation: str,
    H: int,
    Dh: int,
    D: int,
    hint: str,
) -> tuple[str, str, str, str, str]:
    """One :class:`attnlab.layers.DecoderBlock` for one new position: causal self-attention over
    the cache and itself (a single newest query may see every cached key, so it needs no mask),
    cross-attention over the source, feed-forward. Returns the output, the grown keys and values,
    and both attention weights.

    Shape:
        x ``(B, 1, D)``; past 2 × ``(B, H, T, Dh)``; cross 2 × ``(B, H, S, Dh)``; mask
        ``(B, 1, 1, S)`` → ``(B, 1, D)``, 2 × ``(B, H, T + 1, Dh)``, ``(B, H, 1, T + 1)``,
        ``(B, H, 1, S)``
    """
    pre = block.norm == "pre"
    sa, ca = block.self_attn, block.cross_attn
    grown: list[str] = []

    def self_attention(h: str) -> tuple[str, str]:
        q = split_heads(g, linear(g, h, sa.q_proj, hint + "_q"), H, Dh)  # (B, H, 1, Dh)
        k = g.op("Concat", past[0], split_heads(g, linear(g, h, sa.k_proj, hint + "_k"), H, Dh), axis=2)
        v = g.op("Concat", past[1], split_heads(g, linear(g, h, sa.v_proj, hint + "_v"), H, Dh), axis=2)
        grown.extend((k, v))  # (B, H, T + 1, Dh) each
        out, w = attend_heads(g, q, k, v, None, Dh)  # (B, H, 1, Dh), (B, H, 1, T + 1)
        return linear(g, merge_heads(g, out, D), sa.out_proj, hint + "_o"), w  # (B, 1, D)

    def cross_attention(h: str) -> tuple[str, str]:
        q = split_heads(g, linear(g, h, ca.q_proj, hint + "_cq"), H, Dh)  # (B, H, 1, Dh)
        out, w = attend_heads(g, q, cross[0], cross[1], mask, Dh)  # (B, H, 1, Dh), (B, H, 1, S)
        return linear(g, merge_heads(g, out, D), ca.out_proj, hint + "_co"), w  # (B, 1, D)

    if pre:
        s, sw = self_attention(layer_norm(g, x, block.self_norm, hint + "_ln1"))
        x = g.op("Add", x, s)
        c, cw = cross_attention(layer_norm(g, x, block.cross_norm, hint + "_ln2"))
        x = g.op("Add", x, c)
        x = g.op("Add", x, _feed_forward(g, layer_norm(g, x, block.ff_norm, hint + "_ln3"), block.ff, activation, hint))
    else:
        s, sw = self_attention(x)
        x = layer_norm(g, g.op("Add", x, s), block.self_norm, hint + "_ln1")
        c, cw = cross_attention(x)
        x = layer_norm(g, g.op("Add", x, c), block.cross_norm, hint + "_ln2")
        x = layer_norm(g, g.op("Add", x, _feed_forward(g, x, block.ff, activation, hint)), block.ff_norm, hint + "_ln3")
    return x, grown[0], grown[1], sw, cw


def resolve_weights(model: nn.Module, weights: str) -> str:
    """``weights`` checked, ``"auto"`` replaced by :func:`exact_storage`."""
    if weights not in WEIGHTS:
        raise ValueError(f"unknown weights {weights!r}; choose from {list(WEIGHTS)}")
    return exact_storage(model) if weights == "auto" else weights


# -- the folder -------------------------------------------------------------------------------------


def replace_folder(out: Path) -> None:
    """Make ``out`` an empty folder, removing what is there (a folder or a file): every in-page
    exporter calls it once its graphs are built, so a failed build deletes nothing.

    Shape:
        no tensors
    """
    if out.exists():
        shutil.rmtree(out) if out.is_dir() else out.unlink()
    out.mkdir(parents=True)


def write_meta(out: Path, meta: dict) -> None:
    """Write ``meta`` as ``out``'s :data:`META_FILE` (UTF-8, indented, non-ASCII kept).

    Shape:
        no tensors
    """
    (out / META_FILE).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def export_onnx(
    model: nn.Module,
    src_tok,
    tgt_tok,
    out: str | Path,
    *,
    weights: str = "auto",
    info: dict[str, Any] | None = None,
    force: bool = False,
    taps: bool = False,
) -> Path:
    """Write ``model`` as the contract's folder: ``encoder.onnx``, ``decoder.onnx``, :data:`META_FILE`
    and attnlab's tokenizer files (one file for a joint vocabulary).

    Args:
        model: an attnlab :class:`~attnlab.models.transformer.Transformer`.
        src_tok, tgt_tok: its tokenizers (the same object for a joint vocabulary).
        out: the folder to write; it must not exist unless ``force``.
        weights: how the initializers are stored, one of :data:`WEIGHTS` (module docstring);
            ``"auto"``: :func:`exact_storage`, the smallest exact one.
        info: ``name``, ``src_lang``, ``tgt_lang``, ``lowercase`` for :data:`META_FILE`.
        force: replace an existing ``out``.
        taps: give ``encoder.onnx`` the optional outputs of :data:`ENCODER_TAPS` (listed in
            :data:`META_FILE`'s ``"taps"``; ``[]`` without).

    Raises:
        ImportError: onnx is not installed.
        ValueError: a model :func:`check_onnx_exportable` refuses, or unknown ``weights``.
        FileExistsError: ``out`` exists and ``force`` is not set.

    Shape:
        no tensors; returns ``out``.
    """
    check_onnx_exportable(model)
    weights = resolve_weights(model, weights)
    out = Path(out)
    if out.exists() and not force:
        raise FileExistsError(f"{out} exists; choose another folder or pass --force to replace it")
    c = model.config
    for tok, side in ((src_tok, "source"), (tgt_tok, "target")):
        size = c.src_vocab_size if side == "source" else c.tgt_vocab_size
        if tok.vocab_size != size:
            raise ValueError(
                f"the {side} tokenizer has {tok.vocab_size} tokens but the model's {side} vocabulary {size}"
            )
        if tok.pad_id != c.pad_id:
            raise ValueError(f"the {side} tokenizer pads with {tok.pad_id} but the model with {c.pad_id}")
    onnx = require_onnx()
    encoder, decoder = (
        encoder_graph(model, weights, taps=taps),
        decoder_graph(model, weights),
    )  # before anything is deleted
    replace_folder(out)
    onnx.save(encoder, str(out / "encoder.onnx"))
    onnx.save(decoder, str(out / "decoder.onnx"))
    src_tok.save(out, "src_tokenizer")
    if tgt_tok is not src_tok:
        tgt_tok.save(out, "tgt_tokenizer")
    info = info or {}
    meta = {
        "format": "attnlab.onnx",
        "version": 1,
        "kind": "transformer",
        "name": info.get("name", out.name),
        "src_lang": info.get("src_lang"),
        "tgt_lang": info.get("tgt_lang"),
        "lowercase": info.get("lowercase", True),  # the English side is lower-cased before encoding
        "d_model": c.d_model,
        "n_heads": c.n_heads,
        "n_encoder_layers": c.n_encoder_layers,
        "n_decoder_layers": c.n_decoder_layers,
        "src_vocab_size": c.src_vocab_size,
        "tgt_vocab_size": c.tgt_vocab_size,
        "pad_id": c.pad_id,
        "bos_id": tgt_tok.bos_id,
        "eos_id": tgt_tok.eos_id,
        "max_len": c.max_len,
        "weights": weights,
        "src_tokenizer": "src_tokenizer.json",
        "tgt_tokenizer": "src_tokenizer.json" if tgt_tok is src_tok else "tgt_tokenizer.json",
        # attnlab's translators feed the source ids as the tokenizer gives them: no BOS, no EOS.
        "source_wrap": {"bos": False, "eos": False},
        # The encoder's outputs beyond the contract's three (ENCODER_TAPS), and the model's whole
        # config (what a page shows of the model: §7's sizes, activation, norm).
        "taps": list(ENCODER_TAPS) if taps else [],
        "config": {k: v for k, v in vars(c).items() if isinstance(v, (int, float, str, bool)) or v is None},
    }
    write_meta(out, meta)
    return out


# -- running an exported folder ---------------------------------------------------------------------


class OnnxState:
    """The decoding state of :class:`OnnxSeq2Seq`: per row, the source ids, the encoder's
    cross-attention keys/values and the self-attention cache, as the page keeps them.

    Shape:
        src_ids ``(B, S)``; cross_k, cross_v, past_k, past_v ``(Ld, B, H, S|T, Dh)``
    """

    def __init__(self, src_ids: np.ndarray, cross_k: np.ndarray, cross_v: np.ndarray, n_heads: int) -> None:
        Ld, B, _, _, Dh = cross_k.shape
        self.src_ids, self.cross_k, self.cross_v = src_ids, cross_k, cross_v
        self.past_k = np.zeros((Ld, B, n_heads, 0, Dh), np.float32)  # (Ld, B, H, 0, Dh): t = 0
        self.past_v = self.past_k
        self.length = 0  # target positions decoded so far

    def reorder(self, index: torch.Tensor) -> None:
        """Keep rows ``index`` (in that order, repeats allowed): the beam's gather along axis 1.

        Shape:
            index ``(B',)`` → every row-indexed array gets ``B'`` rows
        """
        rows = index.cpu().numpy()
        self.src_ids = self.src_ids[rows]  # (B', S)
        self.cross_k, self.cross_v = self.cross_k[:, rows], self.cross_v[:, rows]  # (Ld, B', H, S, Dh)
        self.past_k, self.past_v = self.past_k[:, rows], self.past_v[:, rows]  # (Ld, B', H, T, Dh)


class OnnxSeq2Seq:
    """An exported folder run by onnxruntime behind attnlab's decoding protocol
    (:class:`attnlab.models.seq2seq.Seq2SeqModel`): :func:`attnlab.decode.greedy_decode` and
    :func:`attnlab.decode.beam_search` then decode with the graphs, one ``decoder.onnx`` call per
    step, the way the page does with onnxruntime-web.

    Args:
        folder: a folder written by :func:`export_onnx`.
        threads: onnxruntime's threads per call.

    Shape:
        start: src ``(B, S)`` → :class:`OnnxState`; step: tokens ``(B, 1)`` → log-probabilities
        ``(B, V)``, cross_weights ``(B, Ld, H, S)`` when asked
    """

    def __init__(self, folder: str | Path, *, threads: int = 1) -> None:
        try:
            import onnxruntime as ort
        except ImportError as err:
            raise ImportError(f"onnxruntime is not installed; it is an optional extra: {ONNX_INSTALL}") from err
        folder = Path(folder)
        self.meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        providers = ["CPUExecutionProvider"]
        self.encoder = ort.InferenceSession(str(folder / "encoder.onnx"), options, providers=providers)
        self.decoder = ort.InferenceSession(str(folder / "decoder.onnx"), options, providers=providers)
        self._outputs = [o.name for o in self.decoder.get_outputs()]

    def start(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> OnnxState:
        """Encode ``src`` (right-padded with ``pad_id``; the graphs build the mask from the ids).

        Shape:
            src ``(B, S)`` → state with cross_k, cross_v ``(Ld, B, H, S, Dh)``
        """
        src_ids = src.cpu().numpy().astype(np.int64)  # (B, S)
        if src_mask is not None and not np.array_equal(src_mask.cpu().numpy(), src_ids != self.meta["pad_id"]):
            raise ValueError("the exported graphs mask exactly the padding ids: give src_mask None or src != pad_id")
        cross_k, cross_v = self.encoder.run(["cross_k", "cross_v"], {"src_ids": src_ids})
        return OnnxState(src_ids, cross_k, cross_v, self.meta["n_heads"])

    def step(self, tokens: torch.Tensor, state: OnnxState, *, need_weights: bool = False) -> StepOutput:
        """Feed each row's next token; returns its next-token log-probabilities.

        Shape:
            tokens ``(B, 1)`` → log-probabilities ``(B, V)``, cross_weights ``(B, Ld, H, S)``
        """
        if tokens.shape[1] != 1:
            raise ValueError(f"the decoder graph takes one token per row, got {tokens.shape[1]}")
        feeds = {
            "tokens": tokens.cpu().numpy().astype(np.int64),  # (B, 1)
            "step": np.array([state.length], np.int64),
            "past_k": state.past_k,
            "past_v": state.past_v,
            "cross_k": state.cross_k,
            "cross_v": state.cross_v,
            "src_ids": state.src_ids,
        }
        out = dict(zip(self._outputs, self.decoder.run(None, feeds)))
        state.past_k, state.past_v = out["present_k"], out["present_v"]  # (Ld, B, H, T + 1, Dh)
        state.length += 1
        cross = torch.from_numpy(out["cross_attn"]).transpose(0, 1) if need_weights else None  # (B, Ld, H, S)
        return StepOutput(torch.from_numpy(out["log_probs"]), cross)  # (B, V)
