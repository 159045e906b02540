"""The lesson's small shipped models beside the translators as ONNX graphs: the character GPT
(§7's next-token chart, §9's decoder-only widget), the digits ViT and the karate-club GAT (§9).

As :mod:`attnlab.onnx_graphs` does for the translators, each graph is built node by node from the
model's own weights (no tracer), with the same arithmetic as the PyTorch module, in the same order,
and the attention weights the widgets draw are named outputs:

- ``shakespeare-char/model.onnx`` (:func:`gpt_graph`): ``ids`` int64 ``(B, T)`` → ``logits``
  ``(B, V)`` at the last position and ``attn`` ``(L, B, H, T)``, the last position's causal row
  in every layer and head. The widgets read one text at a time and never generate step by step
  in a loop (one character is appended per click, then the text is read again), so the graph
  runs the whole text at once and needs no key/value cache: T ≤ ``n_positions`` (128).
- ``digits-vit/model.onnx`` (:func:`vit_graph`): ``images`` float32 ``(B, 8, 8)`` →
  ``logits`` ``(B, K)`` and ``cls_attn`` ``(L, B, H, 1 + P)``, [CLS]'s row of every map
  (:func:`attnlab.models.vit.cls_attention`); ``images.json`` holds the held-out test digits.
- ``karate-gat/model.onnx`` (:func:`gat_graph`): ``features`` float32 ``(N, F)`` and ``mask``
  bool ``(N, N)`` → ``logits`` ``(N, C)``, ``hidden_attn`` ``(H, N, N)`` (the first layer's
  coefficients) and ``output_attn`` ``(H', N, N)``; ``graph.json`` holds the club (features,
  edges, factions, the members labelled in training, the drawing's fixed positions).

- ``ja-sentence-type/model.onnx`` (:func:`classifier_graph`, §8's attention-pooling exercise):
  ``ids`` int64 ``(B, S)`` (padded with ``pad_id``) → ``logits`` ``(B, C)``, ``probs`` ``(B, C)``
  (their softmax) and ``pool_weights`` ``(B, S)``, the attention pooling's weight of every
  character (0 on padding); ``tokenizer.json`` is the character tokenizer.

Each folder has a ``meta.json`` (``"format": "attnlab.onnx"``, ``"kind"``: ``gpt`` | ``vit`` |
``gat`` | ``classifier``, the sizes, ``"weights"``). Weights are stored as :func:`attnlab.onnx_graphs.exact_storage`
picks (fp16 for all three shipped checkpoints, which are fp16-packed: exact).

Shape letters: B batch, T characters, V vocabulary, D width, H heads, Dh = D / H, L layers,
P patches, K classes, N nodes, F features, C classes of the graph (or of the classifier),
S characters of the classifier's input.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .onnx_graphs import (
    WEIGHTS,
    Graph,
    apply_activation,
    attend_heads,
    encoder_block,
    exact_storage,
    layer_norm,
    linear,
    merge_heads,
    replace_folder,
    split_heads,
    stack_outputs,
    value_info,
    write_meta,
)

__all__ = [
    "gpt_graph",
    "vit_graph",
    "gat_graph",
    "export_gpt_onnx",
    "export_vit_onnx",
    "export_gat_onnx",
    "classifier_graph",
    "export_classifier_onnx",
    "vit_images",
    "gat_graph_data",
]


def _storage(model: nn.Module, weights: str) -> str:
    if weights not in WEIGHTS:
        raise ValueError(f"unknown weights {weights!r}; choose from {list(WEIGHTS)}")
    return exact_storage(model) if weights == "auto" else weights


def _pre_norm_block(g: Graph, x: str, block: nn.Module, mask: str | None, H: int, Dh: int, D: int, act: str, hint: str):
    """One pre-norm :class:`attnlab.layers.EncoderBlock`: ``x + attn(LN(x))``, then
    ``x + ff(LN(x))`` (GPT-2 §2.3; ViT §3.1). Returns the output and the attention weights.

    Shape:
        x ``(B, T, D)``; mask ``(T, T)`` bool or None → ``(B, T, D)``, weights ``(B, H, T, T)``
    """
    sa = block.self_attn
    h = layer_norm(g, x, block.attn_norm, hint + "_ln1")
    q = split_heads(g, linear(g, h, sa.q_proj, hint + "_q"), H, Dh)  # (B, H, T, Dh)
    k = split_heads(g, linear(g, h, sa.k_proj, hint + "_k"), H, Dh)  # (B, H, T, Dh)
    v = split_heads(g, linear(g, h, sa.v_proj, hint + "_v"), H, Dh)  # (B, H, T, Dh)
    out, w = attend_heads(g, q, k, v, mask, Dh)  # (B, H, T, Dh), (B, H, T, T)
    x = g.op("Add", x, linear(g, merge_heads(g, out, D), sa.out_proj, hint + "_o"))  # (B, T, D)
    ff = block.ff
    h = layer_norm(g, x, block.ff_norm, hint + "_ln2")
    hidden = apply_activation(g, linear(g, h, ff.up_proj, hint + "_up"), act)  # (B, T, d_ff)
    return g.op("Add", x, linear(g, hidden, ff.down_proj, hint + "_down")), w  # (B, T, D)


# -- the character GPT ------------------------------------------------------------------------------


def gpt_graph(model: nn.Module, weights: str = "auto"):
    """:class:`attnlab.models.gpt.GPT` (learned positions, full causal attention) as one graph
    over the whole text.

    Shape:
        ids ``(B, T)`` → logits ``(B, V)`` (last position), attn ``(L, B, H, T)`` (its causal row)
    """
    c = model.config
    if c.positions != "learned" or c.attention != "full":
        raise ValueError("only a GPT with learned positions and full causal attention can be exported to ONNX")
    g = Graph(_storage(model, weights))
    TensorProto = g.onnx.TensorProto
    D, H = c.d_model, c.n_heads
    Dh = D // H
    i64 = np.int64
    T = g.op("Gather", g.op("Shape", "ids"), g.const(1, i64, "axis1"), axis=0)  # scalar T
    positions = g.op("Range", g.const(0, i64, "zero"), T, g.const(1, i64, "one"))  # (T,)
    x = g.op("Gather", g.weight(model.tok_emb.weight, "tok_emb"), "ids", axis=0)  # (B, T, D)
    pos = g.op("Gather", g.weight(model.pos_emb.embedding.weight, "pos_emb"), positions, axis=0)  # (T, D)
    x = g.op("Add", x, pos)  # (B, T, D): GPT-2 adds learned positions, no √D
    # Causal mask, True = may attend: key position ≤ query position (bool, as the mask helpers).
    mask = g.op(
        "GreaterOrEqual",
        g.op("Unsqueeze", positions, g.const([1], i64, "axes")),  # (T, 1) queries
        g.op("Unsqueeze", positions, g.const([0], i64, "axes")),  # (1, T) keys
    )  # (T, T)
    last = g.const(-1, i64, "last")
    rows = []
    for i, block in enumerate(model.blocks):
        x, w = _pre_norm_block(g, x, block, mask, H, Dh, D, c.activation, f"h{i}")
        rows.append(g.op("Gather", w, last, axis=2))  # (B, H, T, T) -> (B, H, T): the last query
    x = layer_norm(g, x, model.final_norm, "final_norm")  # (B, T, D)
    x = g.op("Gather", x, last, axis=1)  # (B, D)
    g.op("Gemm", x, g.weight(model.tok_emb.weight, "tok_emb"), transB=1, out="logits")  # (B, V), tied
    stack_outputs(g, rows, "attn")  # (L, B, H, T)
    f32 = TensorProto.FLOAT
    return g.model(
        [value_info("ids", TensorProto.INT64, ["B", "T"])],
        [value_info("logits", f32, ["B", c.vocab_size]), value_info("attn", f32, [c.n_layers, "B", H, "T"])],
        "attnlab_gpt",
    )


def _fresh(out: str | Path, force: bool) -> Path:
    out = Path(out)
    if out.exists() and not force:
        raise FileExistsError(f"{out} exists; choose another folder or pass --force to replace it")
    replace_folder(out)
    return out


def _write_graph(
    model: nn.Module, graph_of: Callable[[nn.Module, str], object], weights: str, out_dir: str | Path, force: bool
) -> tuple[Path, str]:
    """Every exporter's start: the weights' storage (``weights``: a key of ``WEIGHTS``; "auto" the
    exact one), the graph built by ``graph_of`` before the folder is touched (a model this export
    does not take leaves nothing behind), then ``out_dir`` made fresh with ``model.onnx`` in it.
    Returns the folder and the storage.

    Shape:
        no tensors.
    """
    import onnx

    storage = _storage(model, weights)
    graph = graph_of(model, storage)
    out = _fresh(out_dir, force)
    onnx.save(graph, str(out / "model.onnx"))
    return out, storage


def _write_meta(out: Path, meta: dict) -> None:
    meta = {"format": "attnlab.onnx", "version": 1, **meta}
    write_meta(out, meta)


def export_gpt_onnx(
    model_dir_or_name: str | Path, out_dir: str | Path, *, weights: str = "auto", force: bool = False
) -> Path:
    """Write the character GPT's in-page folder: ``model.onnx``, ``tokenizer.json``, ``meta.json``.

    Shape:
        no tensors; returns ``out_dir``.
    """
    from .loading import load_model  # a shipped name or a folder, as everywhere else

    model, tokenizer = load_model(model_dir_or_name)
    if getattr(model.config, "model_type", None) != "gpt":
        raise ValueError(f"{model_dir_or_name}: not a GPT (only a GPT has this in-page export)")
    out, storage = _write_graph(model, gpt_graph, weights, out_dir, force)
    tokenizer.save(out, "tokenizer")
    c = model.config
    _write_meta(
        out,
        {
            "kind": "gpt",
            "name": Path(str(model_dir_or_name)).name,
            "vocab_size": c.vocab_size,
            "n_positions": c.n_positions,
            "d_model": c.d_model,
            "n_layers": c.n_layers,
            "n_heads": c.n_heads,
            "weights": storage,
            "tokenizer": "tokenizer.json",
        },
    )
    return out


# -- the ViT ----------------------------------------------------------------------------------------


def vit_graph(model: nn.Module, weights: str = "auto"):
    """:class:`attnlab.models.vit.ViT` on grey images: patches in raster order
    (:func:`attnlab.models.vit.patchify`), [CLS] first, learned positions, pre-norm blocks.

    Shape:
        images ``(B, S, S)`` → logits ``(B, K)``, cls_attn ``(L, B, H, 1 + P)``
    """
    c = model.config
    if c.channels != 1:
        raise ValueError("only a grey-image ViT (channels=1) has an in-page export")
    g = Graph(_storage(model, weights))
    TensorProto = g.onnx.TensorProto
    D, H, p, S = c.d_model, c.n_heads, c.patch_size, c.image_size
    Dh, n = D // H, S // p
    i64 = np.int64
    x = g.op("Reshape", "images", g.const([-1, n, p, n, p], i64, "shape"))  # (B, r, i, c, j)
    x = g.op("Transpose", x, perm=[0, 1, 3, 2, 4])  # (B, r, c, i, j): patch r·n + c, pixels row by row
    x = g.op("Reshape", x, g.const([0, n * n, p * p], i64, "shape"))  # (B, P, p·p)
    patches = linear(g, x, model.patch_embed.patch_proj, "patch")  # (B, P, D)
    batch = g.op("Slice", g.op("Shape", "images"), g.const([0], i64, "s"), g.const([1], i64, "e"))  # (1,) = [B]
    shape = g.op("Concat", batch, g.const([1, D], i64, "shape"), axis=0)  # [B, 1, D]
    cls = g.op("Expand", g.weight(model.cls_token, "cls"), shape)  # (B, 1, D)
    x = g.op("Concat", cls, patches, axis=1)  # (B, 1 + P, D)
    x = g.op("Add", x, g.weight(model.encoder.positions.embedding.weight, "pos"))  # (B, 1 + P, D)
    first = g.const(0, i64, "first")
    rows = []
    for i, block in enumerate(model.encoder.blocks):
        x, w = _pre_norm_block(g, x, block, None, H, Dh, D, "gelu", f"b{i}")
        rows.append(g.op("Gather", w, first, axis=2))  # (B, H, N, N) -> (B, H, N): [CLS]'s row
    x = layer_norm(g, x, model.encoder.final_norm, "final_norm")  # (B, 1 + P, D)
    x = g.op("Gather", x, first, axis=1)  # (B, D): [CLS]
    g.op(
        "Add",
        g.op("MatMul", x, g.weight(model.head.weight, "head", transpose=True)),
        g.weight(model.head.bias, "head_b"),
        out="logits",
    )
    stack_outputs(g, rows, "cls_attn")  # (L, B, H, 1 + P)
    f32 = TensorProto.FLOAT
    return g.model(
        [value_info("images", f32, ["B", S, S])],
        [
            value_info("logits", f32, ["B", c.n_classes]),
            value_info("cls_attn", f32, [c.n_layers, "B", H, 1 + n * n]),
        ],
        "attnlab_vit",
    )


def vit_images(config: dict) -> dict:
    """The held-out test digits the widget shows (the split of ``config["split_seed"]``).

    Shape:
        → images ``(N, 8, 8)`` grey levels as the model reads them, labels ``(N,)``
    """
    from .data.digits import digits_splits

    data = digits_splits(seed=config.get("split_seed", 0))
    return {
        "split_seed": config.get("split_seed", 0),
        "images": data.test_x.float().tolist(),
        "labels": [int(y) for y in data.test_y],
    }


def export_vit_onnx(
    model_dir_or_name: str | Path, out_dir: str | Path, *, weights: str = "auto", force: bool = False
) -> Path:
    """Write the digits ViT's in-page folder: ``model.onnx``, ``images.json``, ``meta.json``.

    Shape:
        no tensors; returns ``out_dir``.
    """
    from .loading import load_model  # a shipped name or a folder, as everywhere else

    model, config = load_model(model_dir_or_name)
    out, storage = _write_graph(model, vit_graph, weights, out_dir, force)
    (out / "images.json").write_text(json.dumps(vit_images(config), separators=(",", ":")) + "\n", encoding="utf-8")
    c = model.config
    _write_meta(
        out,
        {
            "kind": "vit",
            "name": Path(str(model_dir_or_name)).name,
            "image_size": c.image_size,
            "patch_size": c.patch_size,
            "n_classes": c.n_classes,
            "d_model": c.d_model,
            "n_layers": c.n_layers,
            "n_heads": c.n_heads,
            "weights": storage,
            "images": "images.json",
        },
    )
    return out


# -- the GAT ----------------------------------------------------------------------------------------


def _gat_layer(g: Graph, x: str, layer: nn.Module, hint: str) -> tuple[str, str]:
    """One :class:`attnlab.models.gat.GATLayer` (Veličković et al. 2018, §2.1): additive scores
    ``LeakyReLU(a_selfᵀz_i + a_neighbourᵀz_j)``, non-neighbours at float32's most negative number
    (exactly 0 after the softmax, the module's rule), heads concatenated or averaged.

    Shape:
        x ``(N, F)``; mask ``(N, N)`` → hidden ``(N, H·F')`` or ``(N, F')``, weights ``(H, N, N)``
    """
    H, Fo = layer.n_heads, layer.out_features
    i64 = np.int64
    z = g.op("MatMul", x, g.weight(layer.node_proj.weight, hint + "_w", transpose=True))  # (N, H·F')
    z = g.op("Transpose", g.op("Reshape", z, g.const([0, H, Fo], i64, "shape")), perm=[1, 0, 2])  # (H, N, F')
    axis1, last = g.const([1], i64, "axes"), g.const([-1], i64, "axes")

    def score(a: torch.Tensor, name: str) -> str:
        a = g.op("Unsqueeze", g.weight(a, hint + name), axis1)  # (H, 1, F')
        return g.op("ReduceSum", g.op("Mul", z, a), last, keepdims=0)  # (H, N)

    s_self, s_neigh = score(layer.score_self, "_as"), score(layer.score_neighbour, "_an")
    scores = g.op(
        "Add",
        g.op("Unsqueeze", s_self, g.const([2], i64, "axes")),  # (H, N, 1)
        g.op("Unsqueeze", s_neigh, axis1),  # (H, 1, N)
    )  # (H, N, N)
    scores = g.op("LeakyRelu", scores, alpha=float(layer.negative_slope))
    scores = g.op("Where", "mask", scores, g.const(np.finfo(np.float32).min))  # (H, N, N)
    alpha = g.op("Softmax", scores, axis=-1)  # (H, N, N)
    out = g.op("MatMul", alpha, z)  # (H, N, F')
    if layer.combine == "concat":
        hidden = g.op(
            "Reshape", g.op("Transpose", out, perm=[1, 0, 2]), g.const([0, H * Fo], i64, "shape")
        )  # (N, H·F')
    else:
        hidden = g.op("ReduceMean", out, axes=[0], keepdims=0)  # (N, F')
    return g.op("Add", hidden, g.weight(layer.bias, hint + "_b")), alpha


def gat_graph(model: nn.Module, weights: str = "auto"):
    """:class:`attnlab.models.gat.GAT`: hidden layer (heads concatenated), ELU, output layer
    (heads averaged).

    Shape:
        features ``(N, F)``; mask ``(N, N)`` bool → logits ``(N, C)``, hidden_attn ``(H, N, N)``,
        output_attn ``(H', N, N)``
    """
    c = model.config
    g = Graph(_storage(model, weights))
    TensorProto = g.onnx.TensorProto
    hidden, a1 = _gat_layer(g, "features", model.hidden_layer, "l1")
    hidden = g.op("Elu", hidden, alpha=1.0)  # F.elu's default α = 1
    logits, a2 = _gat_layer(g, hidden, model.output_layer, "l2")
    g.op("Identity", logits, out="logits")
    g.op("Identity", a1, out="hidden_attn")
    g.op("Identity", a2, out="output_attn")
    f32 = TensorProto.FLOAT
    return g.model(
        [value_info("features", f32, ["N", c.n_features]), value_info("mask", TensorProto.BOOL, ["N", "N"])],
        [
            value_info("logits", f32, ["N", c.n_classes]),
            value_info("hidden_attn", f32, [c.n_heads, "N", "N"]),
            value_info("output_attn", f32, [c.out_heads, "N", "N"]),
        ],
        "attnlab_gat",
    )


def gat_graph_data(config: dict) -> dict:
    """Zachary's karate club as the widget draws it: features, neighbourhoods, edges, factions,
    the members labelled in training, and the fixed drawing (spring layout, seed 0, scaled to
    [0, 1], rounded to 4 decimals as the lesson's reference does).

    Shape:
        → features ``(N, F)``, mask ``(N, N)`` (0/1), edges ``(E, 2)``, positions ``(N, 2)``
    """
    from .data.graphs import karate_club
    from .viz import spring_layout

    data = karate_club()
    n = data.features.shape[0]
    pos = spring_layout(data.edges, n, seed=0)  # (N, 2)
    pos = (pos - pos.min(0)) / np.maximum(pos.max(0) - pos.min(0), 1e-9)
    return {
        "features": data.features.float().tolist(),
        "mask": data.mask.int().tolist(),
        "edges": [[int(a), int(b)] for a, b in data.edges.T.tolist()],
        "positions": [[round(float(x), 4), round(float(y), 4)] for x, y in pos],
        "labelled": [int(i) for i in config.get("labelled", [])],
        "truth": [int(v) for v in data.labels],
        "class_names": list(data.class_names),
    }


def export_gat_onnx(
    model_dir_or_name: str | Path, out_dir: str | Path, *, weights: str = "auto", force: bool = False
) -> Path:
    """Write the karate-club GAT's in-page folder: ``model.onnx``, ``graph.json``, ``meta.json``.

    Shape:
        no tensors; returns ``out_dir``.
    """
    from .loading import load_model  # a shipped name or a folder, as everywhere else

    model, config = load_model(model_dir_or_name)
    out, storage = _write_graph(model, gat_graph, weights, out_dir, force)
    (out / "graph.json").write_text(json.dumps(gat_graph_data(config), separators=(",", ":")) + "\n", encoding="utf-8")
    c = model.config
    _write_meta(
        out,
        {
            "kind": "gat",
            "name": Path(str(model_dir_or_name)).name,
            "n_features": c.n_features,
            "n_classes": c.n_classes,
            "n_heads": c.n_heads,
            "out_heads": c.out_heads,
            "weights": storage,
            "graph": "graph.json",
        },
    )
    return out


# -- the attention-pooling classifier ---------------------------------------------------------------


def classifier_graph(model: nn.Module, weights: str = "auto"):
    """:class:`attnlab.models.classifier.AttentionPoolClassifier`: embeddings · √D plus the
    sinusoidal table, pre-norm encoder blocks over the real characters, the final LayerNorm, then
    attention pooling (Yang et al. 2016, §2.2): ``α = softmax_i(uᵀ tanh(W_k h_i + b))`` over the
    real characters (``scale = 1``, as the module's call), ``c = Σ α_i h_i``, logits ``c W_oᵀ + b``.
    Padding (``ids == pad_id``) is masked as the module's ``padding_mask`` masks it.

    Shape:
        ids ``(B, S)`` → logits ``(B, C)``, probs ``(B, C)``, pool_weights ``(B, S)``
    """
    from .layers import ACTIVATIONS
    from .models.classifier import AttentionPoolClassifier

    if not isinstance(model, AttentionPoolClassifier):
        raise ValueError(f"not an attention-pooling classifier: {type(model).__name__}")
    c = model.config
    for block in model.blocks:
        if block.norm != "pre" or block.ff.act is not ACTIVATIONS["relu"]:
            raise ValueError("only a classifier of pre-norm ReLU blocks (the recipe's) has an in-page export")
    g = Graph(_storage(model, weights))
    TensorProto = g.onnx.TensorProto
    D, H = c.d_model, c.n_heads
    Dh = D // H
    i64 = np.int64
    S = g.op("Shape", "ids", start=1, end=2)  # (1,) the length
    table = g.const(model.positions.table.detach().cpu().numpy(), hint="positions")  # (max_len, D), fp32 always
    positions = g.op("Slice", table, g.const([0], i64, "starts"), S, g.const([0], i64, "axes"))  # (S, D)
    real = g.op("Not", g.op("Equal", "ids", g.const(c.pad_id, i64, "pad")))  # (B, S) True = a character
    mask = g.op("Unsqueeze", real, g.const([1, 2], i64, "axes"))  # (B, 1, 1, S): keys of every head and query
    x = g.op("Gather", g.weight(model.embed.weight, "embed"), "ids", axis=0)  # (B, S, D)
    x = g.op("Add", g.op("Mul", x, g.const(math.sqrt(D))), positions)  # (B, S, D)
    for i, block in enumerate(model.blocks):
        x, _ = encoder_block(g, x, mask, block, "relu", H, Dh, D, f"b{i}")  # (B, S, D)
    states = layer_norm(g, x, model.final_norm, "final_norm")  # (B, S, D)
    keys = g.op("Tanh", linear(g, states, model.pool.k_proj, "pool_k"))  # (B, S, D)
    query = g.op("Unsqueeze", g.weight(model.pool.query, "pool_query"), g.const([1], i64, "axes"))  # (D, 1)
    scores = g.op("Squeeze", g.op("MatMul", keys, query), g.const([2], i64, "axes"))  # (B, S)
    scores = g.op("Where", real, scores, g.const(-np.inf))  # (B, S): padding gets exactly 0
    alpha = g.op("Softmax", scores, axis=-1, out="pool_weights")  # (B, S)
    pooled = g.op("MatMul", g.op("Unsqueeze", alpha, g.const([1], i64, "axes")), states)  # (B, 1, D)
    pooled = g.op("Squeeze", pooled, g.const([1], i64, "axes"))  # (B, D)
    g.op("Identity", linear(g, pooled, model.out_proj, "out"), out="logits")  # (B, C)
    g.op("Softmax", "logits", axis=-1, out="probs")  # (B, C)
    f32 = TensorProto.FLOAT
    return g.model(
        [value_info("ids", TensorProto.INT64, ["B", "S"])],
        [
            value_info("logits", f32, ["B", c.n_classes]),
            value_info("probs", f32, ["B", c.n_classes]),
            value_info("pool_weights", f32, ["B", "S"]),
        ],
        "attnlab_classifier",
    )


def classifier_card(directory: Path) -> dict | None:
    """The held-out scores of a classifier's model card (``card.json``) that §8's widget quotes:
    accuracy, the number of test sentences and, per class with a marker, the share of correctly
    classified test sentences whose heaviest character is the marker; None without a card.

    Shape:
        no tensors
    """
    from .assets.cards import read_model_card

    if not (directory / "card.json").is_file():
        return None
    metrics = read_model_card(directory).metrics
    shares = {k.split("/", 1)[1]: v for k, v in metrics.items() if k.startswith("peak_on_marker/")}
    return {"accuracy": metrics["accuracy"], "n": int(metrics["n"]), "peak_on_marker": shares}


def export_classifier_onnx(
    model_dir_or_name: str | Path, out_dir: str | Path, *, weights: str = "auto", force: bool = False
) -> Path:
    """Write an attention-pooling classifier's in-page folder: ``model.onnx``, ``tokenizer.json``,
    ``meta.json`` (its labels, ``max_len``, ``pad_id``/``unk_id``, a shipped model's example
    sentences and its model card's held-out scores).

    Shape:
        no tensors; returns ``out_dir``.
    """
    from . import assets
    from .assets.locate import resolve_model_dir
    from .loading import load_model  # a shipped name or a folder, as everywhere else
    from .recipes.classify import TextClassifier

    classifier = load_model(model_dir_or_name)
    if not isinstance(classifier, TextClassifier):
        raise ValueError(f"{model_dir_or_name}: not a text classifier (only one has this in-page export)")
    model, tok = classifier.model, classifier.tokenizer
    name = Path(str(model_dir_or_name)).name
    shipped = assets.ASSETS.get(str(model_dir_or_name))
    card = classifier_card(resolve_model_dir(model_dir_or_name))
    out, storage = _write_graph(model, classifier_graph, weights, out_dir, force)
    tok.save(out, "tokenizer")
    c = model.config
    _write_meta(
        out,
        {
            "kind": "classifier",
            "name": name,
            "labels": list(classifier.labels),
            "max_len": classifier.max_len,
            "pad_id": tok.pad_id,
            "unk_id": tok.unk_id,
            "d_model": c.d_model,
            "n_layers": c.n_layers,
            "n_heads": c.n_heads,
            "weights": storage,
            "tokenizer": "tokenizer.json",
            "examples": list(shipped.examples) if shipped else [],
            "card": card,
        },
    )
    return out
