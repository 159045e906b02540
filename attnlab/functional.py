"""Pure attention functions and the mask helpers.

This file is the maths of the library. Every function is stateless: parameters come in as
arguments, tensors come out. Modules in :mod:`attnlab.layers` own the parameters and call these.

Shape letters used throughout attnlab:

    B   batch            T   query (target) length      S   key (source) length
    H   heads            D   model width                Dh  head width
    ... any number of leading batch/head dimensions

Mask convention (one for the whole library): a **boolean** tensor, ``True`` = *may attend*,
broadcastable to the score matrix ``(..., T, S)``. Build masks with :func:`causal_mask`,
:func:`padding_mask`, :func:`sliding_window_mask` and :func:`combine_masks`. A query row with no key
to attend to returns a zero output vector and zero weights, never NaN.
"""

from __future__ import annotations

import inspect
import math
from typing import Callable, NamedTuple

import torch
import torch.nn.functional as F

Tensor = torch.Tensor

__all__ = [
    "AttentionResult",
    "scaled_dot_product_attention",
    "additive_attention",
    "causal_mask",
    "padding_mask",
    "sliding_window_mask",
    "combine_masks",
    "neighbour_mask",
    "BACKENDS",
]


class AttentionResult(NamedTuple):
    """What every attention function returns: the mixed values and (on request) the weights."""

    output: Tensor  # (..., T, Dv)
    weights: Tensor | None  # (..., T, S), or None when not requested


# --------------------------------------------------------------------------------------------
# Validation: every public function checks its inputs and names the problem.
# --------------------------------------------------------------------------------------------


def _check_qkv(q: Tensor, k: Tensor, v: Tensor) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() < 2:
            raise ValueError(f"{name} must have shape (..., length, dim); got shape {tuple(t.shape)}")
        if not t.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share one dtype; got q={q.dtype}, k={k.dtype}, v={v.dtype}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"head dims differ: q has Dh={q.shape[-1]} but k has Dh={k.shape[-1]} "
            f"(q {tuple(q.shape)}, k {tuple(k.shape)})"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same length S; got k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(
            "q, k, v batch/head dims differ: "
            f"q {tuple(q.shape[:-2])}, k {tuple(k.shape[:-2])}, v {tuple(v.shape[:-2])}"
        )
    if q.shape[-2] == 0 or k.shape[-2] == 0:
        raise ValueError(
            f"empty sequence: query length T={q.shape[-2]}, key length S={k.shape[-2]}; "
            "attention needs at least one query and one key"
        )


def _check_mask(mask: Tensor | None, scores_shape: torch.Size) -> Tensor | None:
    """Check that ``mask`` is boolean and broadcasts to ``scores_shape``; return it viewed with
    the scores' rank (leading size-1 dims added), the form every backend accepts: torch's fused
    kernel rejects a 1-D mask next to 4-D queries, for one."""
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a boolean torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be boolean (True = may attend), got dtype {mask.dtype}; "
            "build it with attnlab.functional.causal_mask / padding_mask"
        )
    try:
        broadcast = torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        broadcast = None
    # The mask must broadcast *to* the scores, not enlarge them: a (3, T, S) mask on (1, T, S)
    # scores would otherwise silently return three outputs.
    if broadcast != torch.Size(scores_shape):
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} is not broadcastable to the scores "
            f"(..., T, S) = {tuple(scores_shape)}"
        )
    return mask.reshape((1,) * (len(scores_shape) - mask.dim()) + tuple(mask.shape))  # (..., T|1, S|1)


def _quiet_unreachable(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Zero the keys and values that no query may attend to, and the queries that may attend to
    nothing, so that a NaN or inf there (an uninitialised pad, an overflow in a padded row) stays
    out of the real rows: ``0 · NaN`` is NaN in the weights-times-values product, and in the
    backward pass of ``q kᵀ``. The output and the gradients are otherwise unchanged, as these
    positions get zero weight and zero gradient anyway.

    Shape:
        q: ``(..., T, Dh)``; k: ``(..., S, Dh)``; v: ``(..., S, Dv)``; mask: ``(..., T, S)`` with
        the rank of the scores (size-1 dims broadcast)
    """
    key_used = mask.any(dim=-2).unsqueeze(-1)  # (..., S, 1)
    row_used = mask.any(dim=-1, keepdim=True)  # (..., T, 1)
    if bool(key_used.all() & row_used.all()):  # one host sync for both
        return q, k, v
    return q.masked_fill(~row_used, 0.0), k.masked_fill(~key_used, 0.0), v.masked_fill(~key_used, 0.0)


def _resolve_mask(mask: Tensor | None, is_causal: bool, T: int, S: int, device) -> Tensor | None:
    """Fold ``is_causal`` into the boolean mask (used by the reference path)."""
    if not is_causal:
        return mask
    return combine_masks(mask, causal_mask(T, S, device=device))


# --------------------------------------------------------------------------------------------
# Scaled dot-product attention: the reference and its backends.
# --------------------------------------------------------------------------------------------


def _math_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    scale: float,
    dropout_p: float,
    is_causal: bool,
    return_weights: bool,
) -> AttentionResult:
    """The readable reference: ``softmax(q kᵀ · scale) v`` (Vaswani et al. 2017, eq. 1)."""
    T, S = q.shape[-2], k.shape[-2]
    mask = _resolve_mask(mask, is_causal, T, S, q.device)
    # Scaling q (T·Dh numbers) rather than the scores (T·S numbers) gives the same product and
    # saves one (..., T, S) tensor in the forward and in the backward pass.
    scores = (q * scale) @ k.transpose(-2, -1)  # (..., T, Dh) x (..., Dh, S) -> (..., T, S)
    # A score past the dtype's range (|q·k| > 65504 in fp16) is ±inf: clamp it to the largest
    # finite number, so that an allowed key that overflowed still ranks above every masked key
    # (-inf below) and a +inf cannot make inf - inf = NaN in the softmax. The clamp changes only
    # ±inf entries, so autograd may treat it as the identity (no_grad: no saved copy of the
    # scores); in place, as the product is a fresh tensor that matmul's backward does not need.
    with torch.no_grad():
        finfo = torch.finfo(scores.dtype)
        scores.clamp_(finfo.min, finfo.max)
    empty_rows = False
    if mask is not None:
        # -inf, not a finite fill value: exp() sends it to exactly 0, and no allowed score can
        # fall below it.
        scores.masked_fill_(~mask, float("-inf"))
        row_has_key = mask.any(dim=-1, keepdim=True)  # (..., T, 1)
        empty_rows = not bool(row_has_key.all())
        if empty_rows:
            # A row with no allowed key would be all -inf, and its softmax NaN: give it uniform
            # weights instead (finite forward and backward), made exactly zero below.
            scores.masked_fill_(~row_has_key, 0.0)
    weights = torch.softmax(scores, dim=-1)  # (..., T, S)
    if empty_rows:
        weights = weights * mask  # rows with nothing to attend to become all zeros
    mixed = weights
    if dropout_p > 0.0:
        mixed = F.dropout(weights, p=dropout_p)
    out = mixed @ v  # (..., T, S) x (..., S, Dv) -> (..., T, Dv)
    return AttentionResult(out, weights if return_weights else None)


def _sdpa_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    scale: float,
    dropout_p: float,
    is_causal: bool,
    return_weights: bool,
) -> AttentionResult:
    """PyTorch's fused kernel. Same contract as the reference, minus the weights."""
    if return_weights:
        raise ValueError("backend='sdpa' cannot return attention weights; use backend='math'")
    T, S = q.shape[-2], k.shape[-2]
    if is_causal and (mask is not None or T != S):
        # torch's is_causal aligns the diagonal top-left; attnlab's causal mask is aligned
        # bottom-right (the last query sees every key), which is what a key/value cache needs.
        mask, is_causal = _resolve_mask(mask, True, T, S, q.device), False
    empty_rows = None
    if mask is not None:
        row_has_key = mask.any(dim=-1, keepdim=True)  # (..., T, 1)
        if not bool(row_has_key.all()):
            # Let fully masked rows attend everywhere (finite forward and backward), then zero
            # their output: the documented "nothing to attend to gives zeros" contract.
            empty_rows = ~row_has_key
            mask = mask | empty_rows
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale
    )  # (..., T, Dv)
    if empty_rows is not None:
        out = out.masked_fill(empty_rows, 0.0)
    return AttentionResult(out, None)


AttentionBackend = Callable[..., AttentionResult]

#: Backends by name. ``"math"`` is the specification; every other entry is tested against it.
BACKENDS: dict[str, AttentionBackend] = {
    "math": _math_attention,
    "sdpa": _sdpa_attention,
}


#: Longest key length at which "auto" prefers the explicit matmuls for bf16/fp16 on a CPU.
MATH_MAX_KEYS_LOW_PRECISION = 512


def _math_is_faster(q: Tensor, k: Tensor) -> bool:
    """Whether "auto" should take the math path although no weights were asked for.

    PyTorch's fused CPU kernel is slower in bf16 than in fp32 at short lengths, while the
    explicit matmuls run on the CPU's bf16 instructions: causal forward + backward, B·T = 4096,
    H = 6, Dh = 64, one thread, math / fused = 0.36 at S = 128, 0.58 at 256, 0.83 at 512, 1.53
    at 1024 (and one decoding query over 272 keys: 77 µs vs 177 µs). In fp32 the fused kernel
    wins at every length, and past a few hundred keys the (T, S) weights the math path keeps
    for backward cost more memory than they save time. ``benchmarks/attention.py --crossover``
    measures it again.
    """
    return (
        q.device.type == "cpu"
        and q.dtype in (torch.bfloat16, torch.float16)
        and k.shape[-2] <= MATH_MAX_KEYS_LOW_PRECISION
    )


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    scale: float | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    return_weights: bool = False,
    backend: str = "auto",
) -> AttentionResult:
    r"""Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V.

    Each query scores every key by a dot product, the scores are scaled by ``1/√d_k`` (so their
    variance does not grow with the head width, Vaswani et al. 2017 §3.2.1), a softmax over the
    keys turns them into weights that sum to 1, and the output is the weighted sum of the values.

    Args:
        q, k, v: queries, keys and values.
        mask: boolean, ``True`` = may attend; broadcastable to ``(..., T, S)``.
        scale: multiplier of the scores; default ``1/√Dh``.
        dropout_p: dropout on the weights (pass 0.0 at evaluation time).
        is_causal: also apply :func:`causal_mask` (query ``i`` sees keys ``≤ i + S - T``).
        return_weights: also return the attention weights (forces the ``"math"`` backend under
            ``"auto"``).
        backend: ``"math"`` (the readable reference), ``"sdpa"``
            (``torch.nn.functional.scaled_dot_product_attention``) or ``"auto"`` (sdpa, except
            math when weights are requested or where math is measurably faster: bf16/fp16 on a
            CPU with at most :data:`MATH_MAX_KEYS_LOW_PRECISION` keys), or any other name in
            :data:`BACKENDS`.

    Shape:
        - q: ``(..., T, Dh)``
        - k: ``(..., S, Dh)``
        - v: ``(..., S, Dv)``
        - mask: broadcastable to ``(..., T, S)``
        - output: ``(..., T, Dv)``; weights: ``(..., T, S)`` or ``None``

    Returns:
        :class:`AttentionResult` ``(output, weights)``.
    """
    _check_qkv(q, k, v)
    T, S = q.shape[-2], k.shape[-2]
    mask = _check_mask(mask, q.shape[:-2] + (T, S))  # (..., T, S), the scores' rank
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    if backend == "auto":
        backend = "math" if return_weights or _math_is_faster(q, k) else "sdpa"
    try:
        fn = BACKENDS[backend]
    except KeyError:
        raise ValueError(f"unknown attention backend {backend!r}; choose from {sorted(BACKENDS)} or 'auto'") from None
    if mask is not None:
        q, k, v = _quiet_unreachable(q, k, v, mask)
    return fn(q, k, v, mask, scale, dropout_p, is_causal, return_weights)


# --------------------------------------------------------------------------------------------
# Additive (Bahdanau) attention.
# --------------------------------------------------------------------------------------------


def additive_attention(
    query: Tensor,
    keys: Tensor,
    values: Tensor,
    w_query: Tensor,
    w_key: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    bias: Tensor | None = None,
) -> AttentionResult:
    r"""Additive attention (Bahdanau, Cho & Bengio 2015, §3.1 and App. A.1.2).

    ``score(q, k) = vᵀ tanh(W_q q + W_k k + b)``: a one-hidden-layer network scores each
    query/key pair, a softmax over the keys gives the weights, the output mixes the values.
    Unlike the dot product it needs no matching widths for queries and keys.

    Args:
        query, keys, values: the decoder state(s), the encoder states and what to mix.
        w_query: ``W_q``, projects queries to the attention width ``A``.
        w_key: ``W_k``, projects keys to ``A``.
        v: the scoring vector.
        mask: boolean, ``True`` = may attend; broadcastable to ``(..., T, S)``.
        bias: optional ``b`` added inside the tanh.

    Shape:
        - query: ``(..., T, Dq)``;  keys: ``(..., S, Dk)``;  values: ``(..., S, Dv)``
        - w_query: ``(A, Dq)``;  w_key: ``(A, Dk)``;  v: ``(A,)``;  bias: ``(A,)``
        - output: ``(..., T, Dv)``;  weights: ``(..., T, S)`` (always returned)
    """
    for name, t in (("query", query), ("keys", keys), ("values", values)):
        if t.dim() < 2:
            raise ValueError(f"{name} must have shape (..., length, dim); got {tuple(t.shape)}")
        if not t.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(f"keys and values must have the same length S; got {tuple(keys.shape)}, {tuple(values.shape)}")
    if query.shape[:-2] != keys.shape[:-2]:
        raise ValueError(f"query and keys batch dims differ: {tuple(query.shape[:-2])} vs {tuple(keys.shape[:-2])}")
    if w_query.shape[-1] != query.shape[-1] or w_key.shape[-1] != keys.shape[-1]:
        raise ValueError(
            f"projection widths do not match: w_query {tuple(w_query.shape)} for query dim {query.shape[-1]}, "
            f"w_key {tuple(w_key.shape)} for key dim {keys.shape[-1]}"
        )
    if query.shape[-2] == 0 or keys.shape[-2] == 0:
        raise ValueError("empty sequence: additive attention needs at least one query and one key")
    T, S = query.shape[-2], keys.shape[-2]
    _check_mask(mask, query.shape[:-2] + (T, S))

    q_feat = query @ w_query.T  # (..., T, Dq) x (Dq, A) -> (..., T, A)
    k_feat = keys @ w_key.T  # (..., S, Dk) x (Dk, A) -> (..., S, A)
    hidden = q_feat.unsqueeze(-2) + k_feat.unsqueeze(-3)  # (..., T, 1, A) + (..., 1, S, A) -> (..., T, S, A)
    if bias is not None:
        hidden = hidden + bias
    scores = torch.tanh(hidden) @ v  # (..., T, S, A) x (A,) -> (..., T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)  # (..., T, S)
    if mask is not None:
        weights = weights * mask
    out = weights @ values  # (..., T, S) x (..., S, Dv) -> (..., T, Dv)
    return AttentionResult(out, weights)


# --------------------------------------------------------------------------------------------
# Mask helpers. The only places that build masks.
# --------------------------------------------------------------------------------------------


def causal_mask(T: int, S: int | None = None, *, device=None) -> Tensor:
    """Query ``i`` may attend key ``j`` iff ``j ≤ i + (S - T)``.

    With ``S == T`` this is the usual lower triangle. With ``S > T`` (queries are the *last* ``T``
    positions of an ``S``-long sequence, as when decoding with a key/value cache) the diagonal is
    aligned bottom-right, so the last query sees every key.

    Shape:
        output: ``(T, S)`` boolean
    """
    S = T if S is None else S
    if T <= 0 or S <= 0:
        raise ValueError(f"causal_mask needs positive lengths, got T={T}, S={S}")
    i = torch.arange(T, device=device).unsqueeze(1)  # (T, 1)
    j = torch.arange(S, device=device).unsqueeze(0)  # (1, S)
    return j <= i + (S - T)  # (T, S)


def padding_mask(
    lengths: Tensor | None = None,
    *,
    tokens: Tensor | None = None,
    pad_id: int | None = None,
    max_len: int | None = None,
) -> Tensor:
    """Which key positions are real (``True``) rather than padding.

    Give either ``lengths`` (and optionally ``max_len``), or ``tokens`` and ``pad_id``.
    To use it as an attention mask over ``(B, H, T, S)`` scores, index it as
    ``mask[:, None, None, :]``; over ``(B, T, S)`` scores, ``mask[:, None, :]``.

    Shape:
        - lengths: ``(B,)`` integer;  tokens: ``(B, S)`` integer
        - output: ``(B, S)`` boolean
    """
    if (lengths is None) == (tokens is None):
        raise ValueError("padding_mask takes either lengths=... or tokens=... with pad_id=..., not both")
    if tokens is not None:
        if pad_id is None:
            raise ValueError("padding_mask(tokens=...) needs pad_id")
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape (B, S), got {tuple(tokens.shape)}")
        return tokens != pad_id  # (B, S)
    lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1 or lengths.is_floating_point():
        raise ValueError(f"lengths must be a 1-D integer tensor, got shape {tuple(lengths.shape)} dtype {lengths.dtype}")
    if bool((lengths < 0).any()):
        raise ValueError(f"lengths must be non-negative, got {lengths.tolist()}")
    S = int(lengths.max()) if max_len is None else max_len
    if lengths.numel() and int(lengths.max()) > S:
        raise ValueError(f"max_len={S} is shorter than the longest length {int(lengths.max())}")
    positions = torch.arange(S, device=lengths.device)  # (S,)
    return positions.unsqueeze(0) < lengths.unsqueeze(1)  # (B, S)


def sliding_window_mask(
    T: int, S: int | None = None, *, window: int, causal: bool = True, device=None
) -> Tensor:
    """Local attention: query ``i`` sees keys within ``window`` positions of itself.

    Positions are aligned bottom-right as in :func:`causal_mask` (query ``i`` stands at
    ``i + S - T``). Causal: keys ``p - window < j ≤ p`` (the last ``window`` positions, itself
    included). Symmetric: ``|j - p| ≤ window // 2``.

    Shape:
        output: ``(T, S)`` boolean
    """
    S = T if S is None else S
    if window < 1:
        raise ValueError(f"window must be ≥ 1, got {window}")
    if T <= 0 or S <= 0:
        raise ValueError(f"sliding_window_mask needs positive lengths, got T={T}, S={S}")
    p = torch.arange(T, device=device).unsqueeze(1) + (S - T)  # (T, 1) query positions
    j = torch.arange(S, device=device).unsqueeze(0)  # (1, S)
    if causal:
        return (j <= p) & (j > p - window)  # (T, S)
    return (j - p).abs() <= window // 2  # (T, S)


def neighbour_mask(edges: Tensor, n_nodes: int) -> Tensor:
    """Who may attend to whom: ``mask[i, j]`` is True iff ``j`` is a neighbour of ``i`` or ``j = i``.

    The graph-attention mask (Veličković et al. 2018, §2.1: attention only over N(i) ∪ {i}).
    Edges are undirected: each ``(u, v)`` lets ``u`` attend to ``v`` and ``v`` to ``u``.

    Shape:
        edges ``(2, E)`` or ``(E, 2)`` integer node indices → ``(N, N)`` boolean
    """
    edges = torch.as_tensor(edges)
    if edges.is_floating_point() or edges.dim() != 2 or 2 not in edges.shape:
        raise ValueError(f"edges must be an integer tensor of shape (2, E) or (E, 2), got {tuple(edges.shape)} {edges.dtype}")
    if edges.shape[0] != 2:
        edges = edges.T  # (E, 2) -> (2, E)
    if edges.numel() and (int(edges.min()) < 0 or int(edges.max()) >= n_nodes):
        raise ValueError(f"edge endpoints must be node indices in [0, {n_nodes}), got [{int(edges.min())}, {int(edges.max())}]")
    mask = torch.eye(n_nodes, dtype=torch.bool, device=edges.device)  # (N, N) self-loops
    mask[edges[0], edges[1]] = True
    mask[edges[1], edges[0]] = True
    return mask


def combine_masks(*masks: Tensor | None) -> Tensor | None:
    """Logical AND of the given masks (``None`` = no restriction), broadcast together.

    Shape:
        each mask broadcastable to the others; output: the broadcast shape, or ``None``
    """
    out: Tensor | None = None
    for m in masks:
        if m is None:
            continue
        if m.dtype != torch.bool:
            raise TypeError(f"masks must be boolean (True = may attend), got dtype {m.dtype}")
        out = m if out is None else out & m
    return out


# ============================================================================================
# Attention variants for long sequences.
#
# Dense attention scores every query against every key: O(T·S) time and memory. The variants
# below keep the calling convention of scaled_dot_product_attention but touch only the scores
# they need, or never hold them all at once:
#   - sliding_window_attention: each query sees the last `window` keys (or `window // 2` on
#     each side), computed block by block, so time and memory grow linearly with the length;
#   - global_window_attention: Longformer's sliding window plus a few global positions that
#     attend to, and are attended by, every position (Beltagy et al. 2020, §3.1);
#   - chunked_attention: exact attention by the online softmax, chunk by chunk, with a backward
#     pass that recomputes the scores (Milakov & Gimelshein 2018; Rabe & Staats 2021; Dao et al.
#     2022) — the algorithm of fused "flash" kernels, written in plain PyTorch.
# Each one equals the math reference given the equivalent dense mask (dilated_window_mask,
# global_window_mask); tests/test_variants.py checks that, forward and backward.
# ============================================================================================

__all__ += [
    "sliding_window_attention",
    "global_window_attention",
    "chunked_attention",
    "dilated_window_mask",
    "global_window_mask",
    "ATTENTION_VARIANTS",
    "AttentionSpec",
    "MAX_DENSE_WEIGHTS",
]

#: Most elements a variant densifies into a ``(..., T, S)`` weight tensor on ``return_weights``
#: (64 MiB of float32): plenty for a heatmap, and a clear error instead of 32k × 32k weights.
MAX_DENSE_WEIGHTS = 1 << 24

# Score elements handled per step of the blocked loops: big enough for efficient matmuls, small
# enough that the per-step temporaries stay a few MiB whatever the sequence length.
_STEP_ELEMENTS = 1 << 21

_NEG_INF = float("-inf")
_POS_INF = float("inf")


def dilated_window_mask(
    T: int, S: int | None = None, *, window: int, causal: bool = True, dilation: int = 1, device=None
) -> Tensor:
    """Dense mask of :func:`sliding_window_attention`: ``window`` keys spaced ``dilation`` apart.

    Positions are aligned bottom-right (query ``i`` stands at ``p = i + S - T``). Causal: keys
    ``p, p - d, …, p - (window - 1)·d``. Symmetric: keys ``p + m·d`` for ``|m| ≤ window // 2``.
    With ``dilation=1`` this is :func:`sliding_window_mask`. Dilation widens the receptive field
    at the same cost (Beltagy et al. 2020, §3.1, "dilated sliding window").

    Shape:
        output: ``(T, S)`` boolean
    """
    S = T if S is None else S
    _check_positive_int("window", window)
    _check_positive_int("dilation", dilation)
    if T <= 0 or S <= 0:
        raise ValueError(f"dilated_window_mask needs positive lengths, got T={T}, S={S}")
    p = torch.arange(T, device=device).unsqueeze(1) + (S - T)  # (T, 1) query positions
    offset = torch.arange(S, device=device).unsqueeze(0) - p  # (T, S) key minus query position
    on_grid = offset.remainder(dilation) == 0  # (T, S)
    steps = offset.abs() // dilation  # (T, S)
    if causal:
        return on_grid & (offset <= 0) & (steps < window)  # (T, S)
    return on_grid & (steps <= window // 2)  # (T, S)


def global_window_mask(
    T: int,
    S: int | None = None,
    *,
    window: int,
    global_positions,
    causal: bool = True,
    dilation: int = 1,
    device=None,
) -> Tensor:
    """Dense mask of :func:`global_window_attention` (Longformer, Beltagy et al. 2020, §3.1).

    A query sees its :func:`dilated_window_mask` keys plus every global position; a global query
    sees every key. With ``causal`` nothing sees the future (a global position attends to all
    keys up to itself and is attended by every later query).

    Args:
        global_positions: key positions, as indices or an ``(S,)`` boolean tensor.

    Shape:
        output: ``(T, S)`` boolean
    """
    S = T if S is None else S
    local = dilated_window_mask(T, S, window=window, causal=causal, dilation=dilation, device=device)
    is_global = torch.zeros(S, dtype=torch.bool, device=device)  # (S,)
    is_global[_global_index(global_positions, S, device)] = True
    p = torch.arange(T, device=device) + (S - T)  # (T,) query positions
    global_query = torch.zeros(T, dtype=torch.bool, device=device)  # (T,)
    inside = p >= 0
    global_query[inside] = is_global[p[inside]]
    mask = local | is_global.unsqueeze(0) | global_query.unsqueeze(1)  # (T, S)
    if causal:
        mask = mask & causal_mask(T, S, device=device)
    return mask


# --------------------------------------------------------------------------------------------
# Shared helpers of the variants.
# --------------------------------------------------------------------------------------------


def _check_window_args(window: int, dilation: int, block_size: int | None) -> None:
    """The shared options of the windowed variants."""
    _check_positive_int("window", window)
    _check_positive_int("dilation", dilation)
    if block_size is not None:
        _check_positive_int("block_size", block_size)


def _check_positive_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be ≥ 1, got {value}")


def _check_variant_call(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float) -> Tensor | None:
    """Validate like scaled_dot_product_attention; return the mask with at least 2 dims."""
    _check_qkv(q, k, v)
    _check_mask(mask, q.shape[:-2] + (q.shape[-2], k.shape[-2]))
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    if mask is not None and mask.dim() < 2:
        mask = mask.reshape((1,) * (2 - mask.dim()) + tuple(mask.shape))  # (1, S) or (1, 1)
    return mask


def _check_weights_size(name: str, q: Tensor, S: int) -> None:
    n = math.prod(q.shape[:-1]) * S
    if n > MAX_DENSE_WEIGHTS:
        raise ValueError(
            f"{name}: return_weights=True would densify the weights into shape "
            f"{tuple(q.shape[:-1]) + (S,)} ({n:,} elements), above MAX_DENSE_WEIGHTS="
            f"{MAX_DENSE_WEIGHTS:,}; ask for weights on a shorter sequence (a heatmap needs a few "
            "hundred positions)"
        )


def _global_index(global_positions, S: int, device) -> Tensor:
    """Sorted unique indices ``(g,)`` of the global positions (given as indices or an ``(S,)`` bool)."""
    if isinstance(global_positions, Tensor) and global_positions.dtype == torch.bool:
        if global_positions.shape != (S,):
            raise ValueError(
                f"global_positions as a boolean mask must have shape (S,) = ({S},), "
                f"got {tuple(global_positions.shape)}"
            )
        return global_positions.to(device).nonzero().squeeze(-1)  # (g,)
    if isinstance(global_positions, Tensor):
        idx = global_positions.to(device)
    else:
        try:
            items = list(global_positions)
            idx = torch.as_tensor(items, device=device) if items else torch.zeros(0, dtype=torch.long, device=device)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(
                "global_positions must be integer indices or an (S,) boolean tensor, "
                f"got {global_positions!r}"
            ) from None
    if idx.is_floating_point() or idx.is_complex() or idx.dim() != 1:
        raise TypeError(
            "global_positions must be a 1-D sequence of integer indices or an (S,) boolean tensor, "
            f"got dtype {idx.dtype} shape {tuple(idx.shape)}"
        )
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= S):
        raise ValueError(f"global_positions must lie in [0, S) = [0, {S}), got {idx.tolist()}")
    return torch.unique(idx.long(), sorted=True)  # (g,)


def _pad_dim(x: Tensor, dim: int, before: int, after: int, value=0) -> Tensor:
    """Pad axis ``dim`` (negative) with ``before``/``after`` entries of ``value``."""
    if before == 0 and after == 0:
        return x
    return F.pad(x, (0, 0) * (-dim - 1) + (before, after), value=value)


def _shift(x: Tensor, shift: int, length: int, dim: int, value=0) -> Tensor:
    """``out[u] = x[u + shift]`` along axis ``dim`` for ``0 ≤ u < length``; ``value`` outside ``x``."""
    lo = min(max(0, -shift), length)  # first u with a source element
    hi = max(min(length, x.shape[dim] - shift), lo)  # one past the last
    piece = x.narrow(dim, lo + shift, hi - lo) if hi > lo else x.narrow(dim, 0, 0)
    return _pad_dim(piece, dim, lo, length - hi, value)


def _take(x: Tensor, dim: int, start: int, stop: int) -> Tensor:
    """Slice ``start:stop`` of axis ``dim`` unless that axis is broadcast (size 1)."""
    return x if x.shape[dim] == 1 else x.narrow(dim, start, stop - start)


class _MaskParts(NamedTuple):
    """A user mask sorted by what it restricts, so each part can be cut into blocks cheaply."""

    rows: Tensor | None  # (..., T|1, 1): whole query rows
    keys: Tensor | None  # (..., 1, S): key columns (padding)
    dense: Tensor | None  # (..., T, S): anything else


def _split_mask(mask: Tensor | None) -> _MaskParts:
    if mask is None:
        return _MaskParts(None, None, None)
    if mask.shape[-1] == 1:
        return _MaskParts(mask, None, None)
    if mask.shape[-2] == 1:
        return _MaskParts(None, mask, None)
    return _MaskParts(None, None, mask)


def _dropout_scale(seed: int, shape, p: float, like: Tensor) -> Tensor:
    """``keep / (1 - p)`` for one step, from a generator seeded per step so that the backward
    pass regenerates exactly the forward's dropout pattern instead of storing it."""
    gen = torch.Generator(device=like.device)
    gen.manual_seed(seed)
    keep = torch.rand(shape, generator=gen, device=like.device, dtype=like.dtype) >= p
    return keep.to(like.dtype) / (1.0 - p)


def _new_seed() -> int:
    return int(torch.randint(0, 2**31 - 1, ()).item())


# --------------------------------------------------------------------------------------------
# Local attention computed in blocks.
#
# Queries are cut into blocks of b rows. Query i (at key position p = i + S - T) needs keys
# p + lo … p + hi, so block n needs one contiguous band of keys, the same shape for every block:
# after shifting the keys so that block 0's band starts at index 0 (padding out-of-range keys),
# block n's band is rows n·b … n·b + Wk - 1, with Wk = m·b ≥ b + hi - lo. `unfold` turns the keys
# into all the bands at once as a strided view (no copy), so every block is scored by one batched
# matmul (..., nb, b, Dh) @ (..., nb, Dh, Wk): O(T · Wk) work and memory instead of O(T · S).
# Inside a band, query row r may use band column c iff lo ≤ c - r + lo ≤ hi, the same (b, Wk)
# pattern for every block.
#
# The loops go over groups of blocks with a custom autograd Function that stores only the output
# and the per-row log-sum-exp, and recomputes the scores in backward (as chunked_attention does):
# memory stays O(T·Dh) plus one group's scores, like a fused kernel's.
# --------------------------------------------------------------------------------------------


class _LocalPlan:
    """Block layout and block-cut masks of one local-attention call (nothing here needs grad)."""

    def __init__(
        self,
        q: Tensor,
        S: int,
        lo: int,
        hi: int,
        block_size: int,
        parts: _MaskParts,
        extra_mask: Tensor | None,
        n_extra: int,
        scale: float,
        dropout_p: float,
    ) -> None:
        T, device = q.shape[-2], q.device
        b = min(block_size, T)
        self.T, self.S, self.b = T, S, b
        self.nb = -(-T // b)  # query blocks
        self.m = -(-(b + hi - lo) // b)  # key blocks per band
        self.wk = self.m * b  # band width Wk
        self.s0 = S - T + lo  # key position where block 0's band starts
        self.lk = (self.nb + self.m - 1) * b  # length of the shifted keys
        self.tp = self.nb * b  # padded query length
        self.scale, self.dropout_p = scale, dropout_p
        self.seed = _new_seed() if dropout_p > 0.0 else 0
        r = torch.arange(b, device=device).unsqueeze(1)  # (b, 1)
        c = torch.arange(self.wk, device=device).unsqueeze(0)  # (1, Wk)
        self.rel = (c >= r) & (c - r <= hi - lo)  # (b, Wk)
        keys = parts.keys.squeeze(-2) if parts.keys is not None else torch.ones(S, dtype=torch.bool, device=device)
        self.keys = _shift(keys, self.s0, self.lk, -1, False)  # (..., Lk): False = padding or masked
        self.rows = None if parts.rows is None else self._cut_rows(parts.rows)  # (..., nb|1, b|1, 1)
        self.extra = None if extra_mask is None else self._cut_rows(extra_mask)  # (..., nb|1, b|1, g)
        self.dense = None
        if parts.dense is not None:
            dense = _shift(parts.dense, self.s0, self.lk, -1, False)  # (..., T, Lk)
            dense = _pad_dim(dense, -2, 0, self.tp - T, False).contiguous()  # (..., Tp, Lk)
            self.dense = _band_view(dense, self.nb, b, self.wk)  # (..., nb, b, Wk)
        lead = math.prod(q.shape[:-2])
        self.group = max(1, min(self.nb, _STEP_ELEMENTS // max(1, lead * b * (self.wk + n_extra))))

    def _cut_rows(self, x: Tensor) -> Tensor:
        """``(..., T|1, E)`` → ``(..., nb, b, E)`` (or ``(..., 1, 1, E)`` when broadcast over rows)."""
        if x.shape[-2] == 1:
            return x.unsqueeze(-3)  # (..., 1, 1, E)
        x = _pad_dim(x, -2, 0, self.tp - self.T, False)  # (..., Tp, E)
        return x.unflatten(-2, (self.nb, self.b))  # (..., nb, b, E)

    def groups(self):
        for g0 in range(0, self.nb, self.group):
            yield g0, min(self.nb, g0 + self.group)

    def band_mask(self, g0: int, g1: int) -> Tensor:
        """Which band entries of blocks ``g0:g1`` may attend; broadcastable to ``(..., G, b, Wk)``."""
        keys = self.keys[..., g0 * self.b : (g1 + self.m - 1) * self.b].unfold(-1, self.wk, self.b)  # (..., G, Wk)
        mask = self.rel & keys.unsqueeze(-2)  # (..., G, b, Wk)
        if self.rows is not None:
            mask = mask & _take(self.rows, -3, g0, g1)
        if self.dense is not None:
            mask = mask & self.dense[..., g0:g1, :, :]
        return mask

    def extra_mask(self, g0: int, g1: int) -> Tensor | None:
        """Which extra (global) keys blocks ``g0:g1`` may attend; broadcastable to ``(..., G, b, g)``."""
        mask = None if self.extra is None else _take(self.extra, -3, g0, g1)
        if self.rows is not None:
            rows = _take(self.rows, -3, g0, g1)
            mask = rows if mask is None else mask & rows
        return mask

    def queries(self, x: Tensor, g0: int, g1: int) -> Tensor:
        """Rows of blocks ``g0:g1``: ``(..., Tp, E)`` → ``(..., G, b, E)``."""
        return x[..., g0 * self.b : g1 * self.b, :].unflatten(-2, (g1 - g0, self.b))  # (..., G, b, E)

    def bands(self, x: Tensor, g0: int, g1: int) -> Tensor:
        """Key bands of blocks ``g0:g1`` as a strided view: ``(..., Lk, E)`` → ``(..., G, E, Wk)``."""
        return x[..., g0 * self.b : (g1 + self.m - 1) * self.b, :].unfold(-2, self.wk, self.b)  # (..., G, E, Wk)

    def fold_add(self, dst: Tensor, band_grad: Tensor, g0: int, g1: int) -> None:
        """Add per-band gradients ``(..., G, Wk, E)`` back onto the shifted keys ``(..., Lk, E)``.

        Bands of neighbouring blocks overlap; band piece ``s`` of block ``n`` is key block ``n + s``.
        """
        G, b, m = g1 - g0, self.b, self.m
        region = dst[..., g0 * b : (g1 + m - 1) * b, :].unflatten(-2, (G + m - 1, b))  # (..., G+m-1, b, E)
        pieces = band_grad.unflatten(-2, (m, b))  # (..., G, m, b, E)
        for s in range(m):
            region[..., s : s + G, :, :] += pieces[..., s, :, :]


def _band_view(x: Tensor, nb: int, b: int, wk: int) -> Tensor:
    """The diagonal bands of a contiguous ``(..., nb·b, L)`` tensor as a view ``(..., nb, b, Wk)``.

    Element ``(n, r, c)`` is ``x[..., n·b + r, n·b + c]``: block ``n`` starts ``b·L + b`` elements
    after block ``n - 1``. No two view elements share memory, so the view can also be written.
    """
    L = x.shape[-1]
    lead = x.shape[:-2]
    return x.as_strided(lead + (nb, b, wk), x.stride()[:-2] + (b * L + b, L, 1), x.storage_offset())


def _local_scores(
    plan: _LocalPlan, qp: Tensor, kr: Tensor, kx: Tensor | None, g0: int, g1: int
) -> tuple[Tensor, Tensor]:
    """Scaled queries of blocks ``g0:g1`` ``(..., G, b, Dh)`` and their scores against their bands
    then the extra keys ``(..., G, b, Wk + g)``, ``-inf`` where masked."""
    qg = plan.queries(qp, g0, g1) * plan.scale  # (..., G, b, Dh)
    s = (qg @ plan.bands(kr, g0, g1)).add_(_mask_bias(plan.band_mask(g0, g1), qg))  # (..., G, b, Wk)
    if kx is None:
        return qg, s
    sx = qg @ kx.transpose(-2, -1).unsqueeze(-3)  # (..., G, b, Dh) x (..., 1, Dh, g) -> (..., G, b, g)
    xmask = plan.extra_mask(g0, g1)
    if xmask is not None:
        sx.add_(_mask_bias(xmask, qg))
    return qg, torch.cat([s, sx], dim=-1)  # (..., G, b, Wk + g)


def _mask_bias(mask: Tensor, like: Tensor) -> Tensor:
    """0 where allowed, -inf where masked. Built at the mask's own (un-broadcast) size and then
    *added* to the scores: much faster than a broadcast masked_fill over every head."""
    return torch.zeros(mask.shape, dtype=like.dtype, device=like.device).masked_fill_(~mask, _NEG_INF)


def _softmax_lse(s: Tensor) -> tuple[Tensor, Tensor]:
    """Row softmax of masked scores ``s`` and the row log-sum-exp (kept for the backward pass).

    The largest weight of a row is ``exp(0) / Σ``, so ``lse = max - log(max weight)`` comes from
    the fused softmax at the cost of one reduction. A row with nothing allowed gets zero weights
    and ``lse = +inf``, so that recomputed weights ``exp(s - lse)`` are 0 there too, never NaN.
    """
    mx = s.amax(-1, keepdim=True)  # (..., 1)
    p = torch.softmax(s, dim=-1)
    lse = mx - p.amax(-1, keepdim=True).log()  # (..., 1)
    empty = mx == _NEG_INF
    if bool(empty.any()):
        p.masked_fill_(empty, 0.0)
        lse.masked_fill_(empty, _POS_INF)
    return p, lse


class _LocalAttentionFn(torch.autograd.Function):
    """Blocked local attention (optionally joined by extra global keys) with a recomputing backward."""

    @staticmethod
    def forward(ctx, q, k, v, kx, vx, plan: _LocalPlan):
        b, wk, tp = plan.b, plan.wk, plan.tp
        qp = _pad_dim(q, -2, 0, tp - plan.T)  # (..., Tp, Dh)
        kr = _shift(k, plan.s0, plan.lk, -2)  # (..., Lk, Dh)
        vr = _shift(v, plan.s0, plan.lk, -2)  # (..., Lk, Dv)
        out = q.new_empty(q.shape[:-2] + (tp, v.shape[-1]))  # (..., Tp, Dv)
        lse = q.new_empty(q.shape[:-2] + (tp,))  # (..., Tp)
        for g0, g1 in plan.groups():
            _, s = _local_scores(plan, qp, kr, kx, g0, g1)  # (..., G, b, Wk+g)
            p, lse_g = _softmax_lse(s)  # (..., G, b, Wk+g), (..., G, b, 1)
            if plan.dropout_p > 0.0:
                p = p * _dropout_scale(plan.seed + g0, p.shape, plan.dropout_p, p)
            o = p[..., :wk] @ plan.bands(vr, g0, g1).transpose(-2, -1)  # (..., G, b, Wk) x (..., G, Wk, Dv)
            if vx is not None:
                o += p[..., wk:] @ vx.unsqueeze(-3)  # (..., G, b, g) x (..., 1, g, Dv) -> (..., G, b, Dv)
            out[..., g0 * b : g1 * b, :] = o.flatten(-3, -2)  # (..., G·b, Dv)
            lse[..., g0 * b : g1 * b] = lse_g.flatten(-3)  # (..., G·b)
        out = out[..., : plan.T, :]  # (..., T, Dv)
        ctx.plan = plan
        ctx.mark_non_differentiable(lse)
        ctx.save_for_backward(q, k, v, kx, vx, out, lse)
        return out, lse

    @staticmethod
    def backward(ctx, d_out, _d_lse):
        q, k, v, kx, vx, out, lse = ctx.saved_tensors
        plan: _LocalPlan = ctx.plan
        b, wk, tp = plan.b, plan.wk, plan.tp
        qp = _pad_dim(q, -2, 0, tp - plan.T)  # (..., Tp, Dh)
        kr = _shift(k, plan.s0, plan.lk, -2)  # (..., Lk, Dh)
        vr = _shift(v, plan.s0, plan.lk, -2)  # (..., Lk, Dv)
        d_out = _pad_dim(d_out, -2, 0, tp - plan.T)  # (..., Tp, Dv)
        # D_i = Σ_j P_ij dP_ij = dO_i · O_i: the softmax Jacobian needs only this per-row number.
        delta = _pad_dim((d_out[..., : plan.T, :] * out).sum(-1), -1, 0, tp - plan.T)  # (..., Tp)
        dqp = torch.empty_like(qp)  # every block writes its rows once
        dkr, dvr = torch.zeros_like(kr), torch.zeros_like(vr)  # overlapping bands accumulate
        dkx = None if kx is None else torch.zeros_like(kx)
        dvx = None if vx is None else torch.zeros_like(vx)
        for g0, g1 in plan.groups():
            qg, s = _local_scores(plan, qp, kr, kx, g0, g1)  # (..., G, b, Dh), (..., G, b, Wk+g)
            lse_g = plan.queries(lse.unsqueeze(-1), g0, g1)  # (..., G, b, 1)
            p = s.sub_(lse_g).exp_()  # the forward's weights, recomputed
            pd = p
            if plan.dropout_p > 0.0:
                drop = _dropout_scale(plan.seed + g0, p.shape, plan.dropout_p, p)
                pd = p * drop
            do = plan.queries(d_out, g0, g1)  # (..., G, b, Dv)
            vb = plan.bands(vr, g0, g1)  # (..., G, Dv, Wk)
            plan.fold_add(dvr, pd[..., :wk].transpose(-2, -1) @ do, g0, g1)  # (..., G, Wk, Dv)
            dp = do @ vb  # (..., G, b, Dv) x (..., G, Dv, Wk) -> (..., G, b, Wk)
            if vx is not None:
                dvx += (pd[..., wk:].transpose(-2, -1) @ do).sum(-3)  # (..., G, g, Dv) -> (..., g, Dv)
                dp = torch.cat([dp, do @ vx.transpose(-2, -1).unsqueeze(-3)], dim=-1)  # (..., G, b, Wk+g)
            if plan.dropout_p > 0.0:
                dp = dp * drop
            ds = p.mul_(dp.sub_(plan.queries(delta.unsqueeze(-1), g0, g1)))  # dS = P ∘ (dP - D)
            kb = plan.bands(kr, g0, g1)  # (..., G, Dh, Wk)
            dq = ds[..., :wk] @ kb.transpose(-2, -1)  # (..., G, b, Wk) x (..., G, Wk, Dh) -> (..., G, b, Dh)
            plan.fold_add(dkr, ds[..., :wk].transpose(-2, -1) @ qg, g0, g1)  # (..., G, Wk, Dh)
            if kx is not None:
                dq += ds[..., wk:] @ kx.unsqueeze(-3)  # (..., G, b, g) x (..., 1, g, Dh)
                dkx += (ds[..., wk:].transpose(-2, -1) @ qg).sum(-3)  # (..., g, Dh)
            dqp[..., g0 * b : g1 * b, :] = dq.flatten(-3, -2)  # (..., G·b, Dh)
        # Views, not copies, whenever the shifted keys cover all of k (the usual case).
        dq = dqp.mul_(plan.scale)[..., : plan.T, :]  # (..., T, Dh)
        dk = _shift(dkr, -plan.s0, plan.S, -2)  # (..., S, Dh)
        dv = _shift(dvr, -plan.s0, plan.S, -2)  # (..., S, Dv)
        return dq, dk, dv, dkx, dvx, None


def _local_weights(plan: _LocalPlan, q: Tensor, k: Tensor, kx: Tensor | None, lse: Tensor):
    """Densify the weights of a :class:`_LocalAttentionFn` call (no grad): ``(..., T, S)`` for the
    band and ``(..., T, g)`` for the extra keys (or None)."""
    with torch.no_grad():
        qp = _pad_dim(q, -2, 0, plan.tp - plan.T)  # (..., Tp, Dh)
        kr = _shift(k, plan.s0, plan.lk, -2)  # (..., Lk, Dh)
        dense = q.new_zeros(q.shape[:-2] + (plan.tp, plan.lk))  # (..., Tp, Lk)
        bands = _band_view(dense, plan.nb, plan.b, plan.wk)  # (..., nb, b, Wk), writes into dense
        wx = None if kx is None else q.new_zeros(q.shape[:-2] + (plan.tp, kx.shape[-2]))  # (..., Tp, g)
        for g0, g1 in plan.groups():
            _, s = _local_scores(plan, qp, kr, kx, g0, g1)  # (..., G, b, Wk+g)
            p = s.sub_(plan.queries(lse.unsqueeze(-1), g0, g1)).exp_()
            bands[..., g0:g1, :, :] = p[..., : plan.wk]
            if wx is not None:
                wx[..., g0 * plan.b : g1 * plan.b, :] = p[..., plan.wk :].flatten(-3, -2)  # (..., G·b, g)
        dense = _shift(dense, -plan.s0, plan.S, -1)[..., : plan.T, :]  # (..., T, S)
        return dense, None if wx is None else wx[..., : plan.T, :]


def _to_residues(x: Tensor, d: int, dim: int, value=0) -> tuple[Tensor, int]:
    """Group a sequence axis by position mod ``d``: ``(.., L, ..)`` → ``(.., d, ⌈L/d⌉, ..)``.

    The axis is left-padded to a multiple of ``d`` first. Left padding keeps the bottom-right
    alignment (query ``i`` at key position ``i + S - T``) and makes the residue of a query's and a
    key's position mod ``d`` equal to their residue index, so a dilated window (keys ``p - m·d``)
    becomes an ordinary window inside each residue class. Returns the tensor and the padding.
    """
    pad = (-x.shape[dim]) % d
    x = _pad_dim(x, dim, pad, 0, value)
    x = x.unflatten(dim, (x.shape[dim] // d, d))  # the residue axis now sits at `dim`
    return x.movedim(dim, -3), pad  # (..., d, L'', E) or (..., d, E, L'')


def _from_residues(x: Tensor, pad: int) -> Tensor:
    """Inverse of :func:`_to_residues` along the rows: ``(..., d, L'', E)`` → ``(..., L, E)``."""
    x = x.movedim(-3, -2).flatten(-3, -2)  # (..., d, L'', E) -> (..., L'', d, E) -> (..., L''·d, E)
    return x[..., pad:, :]


def _dense_to_residues(x: Tensor, d: int) -> Tensor:
    """A ``(..., T, S)`` mask → ``(..., d, T'', S'')``: the pairs whose residues match."""
    x = _pad_dim(_pad_dim(x, -1, (-x.shape[-1]) % d, 0, False), -2, (-x.shape[-2]) % d, 0, False)  # (..., T', S')
    x = x.unflatten(-1, (x.shape[-1] // d, d)).unflatten(-3, (x.shape[-2] // d, d))  # (..., T'', d, S'', d)
    return x.diagonal(dim1=-3, dim2=-1).movedim(-1, -3)  # (..., T'', S'', d) -> (..., d, T'', S'')


def _dense_from_residues(w: Tensor, T: int, S: int, d: int) -> Tensor:
    """Weights ``(..., d, T'', S'')`` → ``(..., T, S)``; pairs of different residues are 0."""
    Tr, Sr = w.shape[-2], w.shape[-1]
    full = w.new_zeros(w.shape[:-3] + (Tr, d, Sr, d))  # (..., T'', d, S'', d)
    full.diagonal(dim1=-3, dim2=-1).copy_(w.movedim(-3, -1))  # (..., T'', S'', d)
    full = full.reshape(w.shape[:-3] + (Tr * d, Sr * d))  # (..., T', S')
    return full[..., Tr * d - T :, Sr * d - S :]  # (..., T, S)


def _window_offsets(window: int, causal: bool) -> tuple[int, int]:
    """Key offsets ``lo ≤ j - p ≤ hi`` (in units of the dilation) a query may attend."""
    return (-(window - 1), 0) if causal else (-(window // 2), window // 2)


def _default_block(lo: int, hi: int) -> int:
    # b ≈ half the window keeps the band Wk = m·b ≈ 1.5 windows (little wasted work) while the
    # blocks stay large enough for efficient matmuls.
    return max(16, min(128, (hi - lo + 1) // 2))


def _local_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    parts: _MaskParts,
    *,
    lo: int,
    hi: int,
    dilation: int,
    scale: float,
    dropout_p: float,
    return_weights: bool,
    block_size: int | None,
    extra: tuple[Tensor, Tensor, Tensor | None] | None = None,
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """Banded attention ``lo ≤ (j - p) / dilation ≤ hi`` joined by optional extra keys.

    ``extra`` is ``(kx, vx, xmask)``: keys ``(..., g, Dh)`` every query may also attend (in the
    same softmax), with ``xmask`` broadcastable to ``(..., T, g)``. Returns the output
    ``(..., T, Dv)`` and, on request, the band weights ``(..., T, S)`` and extra weights ``(..., T, g)``.
    """
    T, S = q.shape[-2], k.shape[-2]
    if dilation > 1:
        d = dilation
        qd, pad_t = _to_residues(q, d, -2)  # (..., d, T'', Dh)
        kd, _ = _to_residues(k, d, -2)  # (..., d, S'', Dh)
        vd, _ = _to_residues(v, d, -2)  # (..., d, S'', Dv)
        rows = parts.rows
        if rows is not None:
            rows = rows.unsqueeze(-3) if rows.shape[-2] == 1 else _to_residues(rows, d, -2, False)[0]
        # The left padding adds keys that do not exist: a key mask (False there) hides them.
        keys = parts.keys if parts.keys is not None else torch.ones(1, S, dtype=torch.bool, device=k.device)
        keys = _to_residues(keys, d, -1, False)[0]  # (..., d, 1, S'')
        dense = None if parts.dense is None else _dense_to_residues(parts.dense, d)  # (..., d, T'', S'')
        extra_d = None
        if extra is not None:
            kx, vx, xmask = extra
            if xmask is not None:
                xmask = xmask.unsqueeze(-3) if xmask.shape[-2] == 1 else _to_residues(xmask, d, -2, False)[0]
            expand = lambda x: x.unsqueeze(-3).expand(x.shape[:-2] + (d,) + x.shape[-2:])  # noqa: E731
            extra_d = (expand(kx), expand(vx), xmask)  # (..., d, g, Dh): every residue class sees them
        out, w, wx = _local_attention(
            qd, kd, vd, _MaskParts(rows, keys, dense), lo=lo, hi=hi, dilation=1, scale=scale,
            dropout_p=dropout_p, return_weights=return_weights, block_size=block_size, extra=extra_d,
        )
        out = _from_residues(out, pad_t)  # (..., T, Dv)
        if w is not None:
            w = _dense_from_residues(w, T, S, d)  # (..., T, S)
            wx = None if wx is None else _from_residues(wx, pad_t)  # (..., T, g)
        return out, w, wx

    kx = vx = xmask = None
    if extra is not None:
        kx, vx, xmask = extra
    block = _default_block(lo, hi) if block_size is None else block_size
    plan = _LocalPlan(q, S, lo, hi, block, parts, xmask, 0 if kx is None else kx.shape[-2], scale, dropout_p)
    out, lse = _LocalAttentionFn.apply(q, k, v, kx, vx, plan)
    if not return_weights:
        return out, None, None
    w, wx = _local_weights(plan, q.detach(), k.detach(), None if kx is None else kx.detach(), lse)
    return out, w, wx


def sliding_window_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    window: int,
    scale: float | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = True,
    dilation: int = 1,
    return_weights: bool = False,
    block_size: int | None = None,
) -> AttentionResult:
    """Local attention: each query attends only to the keys within ``window`` of its position.

    Causal (the default, as :func:`sliding_window_mask`): query ``p`` sees keys
    ``p - (window-1)·d … p`` with ``d = dilation``; symmetric (``is_causal=False``): keys
    ``p + m·d`` for ``|m| ≤ window // 2``. Stacking ``L`` such layers reaches ``L · window``
    positions back, which is why local attention works for language (Beltagy et al. 2020, §3.1;
    Child et al. 2019). Computed in blocks of ``block_size`` queries, each against one band of
    keys cut out by a strided view, so time and memory grow linearly with the sequence length.
    Equal to :func:`scaled_dot_product_attention` with ``mask & dilated_window_mask(...)``.

    Args:
        q, k, v, mask, scale, dropout_p, return_weights: as :func:`scaled_dot_product_attention`
            (the mask is cut into the blocks; a key-padding mask ``(..., 1, S)`` costs nothing).
        window: number of keys each query sees (causal) or the full width (symmetric).
        is_causal: causal window (keys up to the query) or symmetric window around it.
        dilation: spacing ``d`` between the attended keys (a dilated window).
        block_size: queries per block (default about ``window / 2``, between 16 and 128).

    Shape:
        - q: ``(..., T, Dh)``;  k: ``(..., S, Dh)``;  v: ``(..., S, Dv)``
        - mask: broadcastable to ``(..., T, S)``
        - output: ``(..., T, Dv)``;  weights: ``(..., T, S)`` (densified; detached) or ``None``
    """
    mask = _check_variant_call(q, k, v, mask, dropout_p)
    _check_window_args(window, dilation, block_size)
    if return_weights:
        _check_weights_size("sliding_window_attention", q, k.shape[-2])
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    lo, hi = _window_offsets(window, is_causal)
    out, weights, _ = _local_attention(
        q, k, v, _split_mask(mask), lo=lo, hi=hi, dilation=dilation, scale=scale, dropout_p=dropout_p,
        return_weights=return_weights, block_size=block_size,
    )
    return AttentionResult(out, weights)


def global_window_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    window: int,
    global_positions,
    scale: float | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = True,
    dilation: int = 1,
    return_weights: bool = False,
    block_size: int | None = None,
) -> AttentionResult:
    """Longformer attention: a sliding window plus global positions (Beltagy et al. 2020, §3.1).

    A few positions (e.g. ``[CLS]``, or the question tokens in QA) attend to every key and every
    query attends to them, so information crosses the whole sequence in one layer while the cost
    stays ``O(T · (window + g))`` for ``g`` global positions. Ordinary queries use one softmax
    over their window and the global keys (computed blocked, as :func:`sliding_window_attention`);
    the ``g`` global queries attend densely (``O(g · S)``). With ``is_causal`` nothing sees the
    future. Equal to :func:`scaled_dot_product_attention` with ``mask & global_window_mask(...)``.

    Args:
        global_positions: key positions, as indices or an ``(S,)`` boolean tensor; a query is
            global when its position (``i + S - T``) is.
        window, is_causal, dilation, block_size: as :func:`sliding_window_attention`.
        Others: as :func:`scaled_dot_product_attention`.

    Shape:
        - q: ``(..., T, Dh)``;  k: ``(..., S, Dh)``;  v: ``(..., S, Dv)``
        - mask: broadcastable to ``(..., T, S)``
        - output: ``(..., T, Dv)``;  weights: ``(..., T, S)`` (densified; detached) or ``None``
    """
    mask = _check_variant_call(q, k, v, mask, dropout_p)
    _check_window_args(window, dilation, block_size)
    T, S = q.shape[-2], k.shape[-2]
    if return_weights:
        _check_weights_size("global_window_attention", q, S)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    gidx = _global_index(global_positions, S, q.device)  # (g,)
    lo, hi = _window_offsets(window, is_causal)
    parts = _split_mask(mask)
    common = dict(lo=lo, hi=hi, dilation=dilation, scale=scale, dropout_p=dropout_p,
                  return_weights=return_weights, block_size=block_size)
    if gidx.numel() == 0:
        out, weights, _ = _local_attention(q, k, v, parts, **common)
        return AttentionResult(out, weights)

    # 1. Every query: its window without the global keys, plus the global keys, in one softmax.
    not_global = torch.ones(S, dtype=torch.bool, device=q.device).index_fill_(0, gidx, False)  # (S,)
    keys = not_global.unsqueeze(0) if parts.keys is None else parts.keys & not_global  # (..., 1, S)
    p = torch.arange(T, device=q.device) + (S - T)  # (T,) query positions
    xmask = (gidx.unsqueeze(0) <= p.unsqueeze(1)) if is_causal else None  # (T, g)
    user_cols = parts.keys if parts.keys is not None else parts.dense
    if user_cols is not None:
        cols = user_cols.index_select(-1, gidx)  # (..., 1|T, g)
        xmask = cols if xmask is None else xmask & cols
    extra = (k.index_select(-2, gidx), v.index_select(-2, gidx), xmask)  # (..., g, Dh), (..., g, Dv)
    out, weights, wx = _local_attention(q, k, v, parts._replace(keys=keys), extra=extra, **common)
    if weights is not None:
        weights = weights.index_copy(-1, gidx, wx)  # band weights are 0 on the global columns

    # 2. Global queries: dense attention over every key (O(g · S)).
    qidx = gidx - (S - T)
    qidx = qidx[(qidx >= 0) & (qidx < T)]  # (gq,) global queries among the T
    if qidx.numel():
        gmask = mask if mask is None or mask.shape[-2] == 1 else mask.index_select(-2, qidx)
        if is_causal:
            gmask = combine_masks(gmask, torch.arange(S, device=q.device) <= p[qidx].unsqueeze(1))  # (gq, S)
        out_g, w_g = _math_attention(
            q.index_select(-2, qidx), k, v, gmask, scale, dropout_p, False, return_weights
        )  # (..., gq, Dv), (..., gq, S)
        out = out.index_copy(-2, qidx, out_g)
        if weights is not None:
            weights = weights.index_copy(-2, qidx, w_g.detach().expand(weights.shape[:-2] + w_g.shape[-2:]))
    return AttentionResult(out, weights)


# --------------------------------------------------------------------------------------------
# Memory-efficient exact attention: the online softmax.
#
# softmax needs the row maximum and the row sum before any weight is known; the online softmax
# (Milakov & Gimelshein 2018) keeps a running maximum m, a running sum l and a running output
# acc, and rescales them by exp(m_old - m_new) whenever a new chunk of keys raises the maximum.
# After the last chunk, out = acc / l is exactly softmax(s) v. Only one (chunk × chunk) block of
# scores exists at a time. The backward pass recomputes each block's weights as exp(s - lse)
# from the saved log-sum-exp lse = m + log l (Rabe & Staats 2021; Dao et al. 2022, Alg. 2 and 4):
# compute is traded for memory, which is what fused flash-attention kernels do on a GPU.
# --------------------------------------------------------------------------------------------


class _ChunkPlan(NamedTuple):
    T: int
    S: int
    mask: Tensor | None  # (..., T|1, S|1)
    is_causal: bool
    scale: float
    dropout_p: float
    seed: int
    q_chunk: int
    k_chunk: int

    def chunks(self, n: int, size: int):
        return [(i, min(n, i + size)) for i in range(0, n, size)]

    def key_chunks(self, i0: int, i1: int):
        """Key chunks query rows ``i0:i1`` can see: causal skips those wholly in the future."""
        last = self.S if not self.is_causal else min(self.S, i1 + self.S - self.T)
        return [] if last <= 0 else self.chunks(last, self.k_chunk)

    def block_mask(self, i0: int, i1: int, j0: int, j1: int, device) -> Tensor | None:
        """The mask of scores ``[i0:i1, j0:j1]``; None if all of it may attend."""
        m = None
        if self.mask is not None:
            m = _take(_take(self.mask, -2, i0, i1), -1, j0, j1)
        if self.is_causal and j1 - 1 > i0 + self.S - self.T:  # the block crosses the diagonal
            c = torch.arange(j0, j1, device=device) <= torch.arange(i0, i1, device=device).unsqueeze(1) + (
                self.S - self.T
            )  # (bq, bk)
            m = c if m is None else m & c
        return m

    def block_seed(self, i0: int, j0: int) -> int:
        return self.seed + i0 * self.S + j0


def _chunk_scores(plan: _ChunkPlan, qi: Tensor, k: Tensor, i0: int, i1: int, j0: int, j1: int) -> Tensor:
    """Scaled, masked scores of query rows ``i0:i1`` against keys ``j0:j1``: ``(..., bq, bk)``."""
    s = qi @ k[..., j0:j1, :].transpose(-2, -1)  # (..., bq, Dh) x (..., Dh, bk) -> (..., bq, bk)
    m = plan.block_mask(i0, i1, j0, j1, qi.device)
    return s if m is None else s.add_(_mask_bias(m, s))


class _ChunkedAttentionFn(torch.autograd.Function):
    """Exact attention by the online softmax; the backward recomputes scores chunk by chunk."""

    @staticmethod
    def forward(ctx, q, k, v, plan: _ChunkPlan):
        out = q.new_empty(q.shape[:-1] + (v.shape[-1],))  # (..., T, Dv)
        lse = q.new_empty(q.shape[:-1])  # (..., T)
        for i0, i1 in plan.chunks(plan.T, plan.q_chunk):
            qi = q[..., i0:i1, :] * plan.scale  # (..., bq, Dh)
            m = qi.new_full(qi.shape[:-1] + (1,), _NEG_INF)  # (..., bq, 1) running maximum
            l = qi.new_zeros(qi.shape[:-1] + (1,))  # (..., bq, 1) running sum of exp  # noqa: E741
            acc = qi.new_zeros(qi.shape[:-1] + (v.shape[-1],))  # (..., bq, Dv) running output
            for j0, j1 in plan.key_chunks(i0, i1):
                s = _chunk_scores(plan, qi, k, i0, i1, j0, j1)  # (..., bq, bk)
                m_new = torch.maximum(m, s.amax(-1, keepdim=True))  # (..., bq, 1)
                # A row with no allowed key yet has m_new = -inf; subtract 0 instead so that
                # exp(-inf - 0) = 0 rather than exp(-inf + inf) = NaN.
                m_safe = m_new.masked_fill(m_new == _NEG_INF, 0.0)
                p = s.sub_(m_safe).exp_()  # (..., bq, bk) unnormalised weights
                alpha = torch.exp(m - m_safe)  # (..., bq, 1) rescales what came before
                l = l * alpha + p.sum(-1, keepdim=True)  # noqa: E741
                if plan.dropout_p > 0.0:
                    p = p * _dropout_scale(plan.block_seed(i0, j0), p.shape, plan.dropout_p, p)
                acc = acc * alpha + p @ v[..., j0:j1, :]  # (..., bq, bk) x (..., bk, Dv) -> (..., bq, Dv)
                m = m_new
            empty = l == 0  # (..., bq, 1) rows that had nothing to attend to
            out[..., i0:i1, :] = (acc / l.masked_fill(empty, 1.0)).masked_fill_(empty, 0.0)
            lse[..., i0:i1] = (m + l.log()).masked_fill_(empty, _POS_INF).squeeze(-1)
        ctx.plan = plan
        ctx.mark_non_differentiable(lse)
        ctx.save_for_backward(q, k, v, out, lse)
        return out, lse

    @staticmethod
    def backward(ctx, d_out, _d_lse):
        q, k, v, out, lse = ctx.saved_tensors
        plan: _ChunkPlan = ctx.plan
        delta = (d_out * out).sum(-1, keepdim=True)  # (..., T, 1)  D_i = dO_i · O_i
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for i0, i1 in plan.chunks(plan.T, plan.q_chunk):
            qi = q[..., i0:i1, :] * plan.scale  # (..., bq, Dh)
            do = d_out[..., i0:i1, :]  # (..., bq, Dv)
            lse_i = lse[..., i0:i1].unsqueeze(-1)  # (..., bq, 1)
            dqi = torch.zeros_like(qi)  # (..., bq, Dh)
            for j0, j1 in plan.key_chunks(i0, i1):
                p = _chunk_scores(plan, qi, k, i0, i1, j0, j1).sub_(lse_i).exp_()  # (..., bq, bk)
                pd = p
                if plan.dropout_p > 0.0:
                    drop = _dropout_scale(plan.block_seed(i0, j0), p.shape, plan.dropout_p, p)
                    pd = p * drop
                dv[..., j0:j1, :] += pd.transpose(-2, -1) @ do  # (..., bk, bq) x (..., bq, Dv)
                dp = do @ v[..., j0:j1, :].transpose(-2, -1)  # (..., bq, Dv) x (..., Dv, bk) -> (..., bq, bk)
                if plan.dropout_p > 0.0:
                    dp = dp * drop
                ds = p.mul_(dp.sub_(delta[..., i0:i1, :]))  # dS = P ∘ (dP - D)
                dqi += ds @ k[..., j0:j1, :]  # (..., bq, bk) x (..., bk, Dh) -> (..., bq, Dh)
                dk[..., j0:j1, :] += ds.transpose(-2, -1) @ qi  # (..., bk, bq) x (..., bq, Dh)
            dq[..., i0:i1, :] = dqi * plan.scale
        return dq, dk, dv, None


def _chunked_weights(plan: _ChunkPlan, q: Tensor, k: Tensor, lse: Tensor) -> Tensor:
    """The ``(..., T, S)`` weights, recomputed from the log-sum-exp (no grad)."""
    with torch.no_grad():
        w = q.new_zeros(q.shape[:-1] + (plan.S,))  # (..., T, S)
        for i0, i1 in plan.chunks(plan.T, plan.q_chunk):
            qi = q[..., i0:i1, :] * plan.scale
            for j0, j1 in plan.key_chunks(i0, i1):
                s = _chunk_scores(plan, qi, k, i0, i1, j0, j1)
                w[..., i0:i1, j0:j1] = s.sub_(lse[..., i0:i1].unsqueeze(-1)).exp_()
        return w


def _chunked_backend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    scale: float,
    dropout_p: float,
    is_causal: bool,
    return_weights: bool,
    q_chunk: int = 512,
    k_chunk: int = 512,
) -> AttentionResult:
    """The ``"chunked"`` backend of :func:`scaled_dot_product_attention` (inputs already checked)."""
    if mask is not None and mask.dim() < 2:
        mask = mask.reshape((1,) * (2 - mask.dim()) + tuple(mask.shape))  # (1, S) or (1, 1)
    if return_weights:
        _check_weights_size("chunked attention", q, k.shape[-2])
    seed = _new_seed() if dropout_p > 0.0 else 0
    plan = _ChunkPlan(q.shape[-2], k.shape[-2], mask, is_causal, scale, dropout_p, seed, q_chunk, k_chunk)
    out, lse = _ChunkedAttentionFn.apply(q, k, v, plan)
    weights = _chunked_weights(plan, q.detach(), k.detach(), lse) if return_weights else None
    return AttentionResult(out, weights)


BACKENDS["chunked"] = _chunked_backend


def chunked_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    scale: float | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    return_weights: bool = False,
    q_chunk: int = 512,
    k_chunk: int = 512,
) -> AttentionResult:
    """Exact attention in ``O(T + S)`` memory: the online softmax over chunks of keys.

    Computes the same function as :func:`scaled_dot_product_attention` (also available there as
    ``backend="chunked"``) but holds at most one ``q_chunk × k_chunk`` block of scores: for each
    chunk of queries it walks the key chunks, keeping a running maximum, sum and output that it
    rescales when the maximum grows. The backward pass recomputes each block's weights from the
    saved log-sum-exp instead of storing the ``(T, S)`` matrix. With ``is_causal`` the key chunks
    wholly in the future are skipped, halving the work. A readable reference for fused kernels.

    Args:
        q_chunk, k_chunk: rows of queries and keys per block.
        Others: as :func:`scaled_dot_product_attention`.

    Shape:
        - q: ``(..., T, Dh)``;  k: ``(..., S, Dh)``;  v: ``(..., S, Dv)``
        - mask: broadcastable to ``(..., T, S)``
        - output: ``(..., T, Dv)``;  weights: ``(..., T, S)`` (recomputed; detached) or ``None``
    """
    mask = _check_variant_call(q, k, v, mask, dropout_p)
    _check_positive_int("q_chunk", q_chunk)
    _check_positive_int("k_chunk", k_chunk)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    return _chunked_backend(q, k, v, mask, scale, dropout_p, is_causal, return_weights, q_chunk, k_chunk)


# --------------------------------------------------------------------------------------------
# Variants by name.
# --------------------------------------------------------------------------------------------

#: Attention functions by name; each has the calling convention of
#: :func:`scaled_dot_product_attention` plus its own keyword options.
ATTENTION_VARIANTS: dict[str, Callable[..., AttentionResult]] = {
    "full": scaled_dot_product_attention,
    "chunked": chunked_attention,
    "sliding_window": sliding_window_attention,
    "global_window": global_window_attention,
}

# The keywords every variant takes from its caller; the rest are the variant's own options.
_CALL_KEYWORDS = frozenset({"scale", "dropout_p", "is_causal", "return_weights"})


class AttentionSpec:
    """An attention variant chosen by name, with its options — the one thing layers and model
    configs pass around to pick how attention is computed.

    ``AttentionSpec("sliding_window", window=256)`` validates the name and the options against
    the function in :data:`ATTENTION_VARIANTS` at once (unknown or missing options are errors),
    and calling it runs that function. ``is_causal`` is always given by the caller (the layer), so
    a window is causal in a decoder and symmetric in an encoder.

    Shape:
        as :func:`scaled_dot_product_attention`: q ``(..., T, Dh)``, k ``(..., S, Dh)``,
        v ``(..., S, Dv)`` → output ``(..., T, Dv)``, weights ``(..., T, S)``
    """

    def __init__(self, name: str = "full", **options) -> None:
        if name not in ATTENTION_VARIANTS:
            raise ValueError(f"unknown attention variant {name!r}; choose from {sorted(ATTENTION_VARIANTS)}")
        params = inspect.signature(ATTENTION_VARIANTS[name]).parameters
        own = {n: p for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY and n not in _CALL_KEYWORDS}
        unknown = sorted(set(options) - set(own))
        if unknown:
            raise ValueError(f"attention {name!r} has no option(s) {unknown}; its options are {sorted(own)}")
        missing = sorted(n for n, p in own.items() if p.default is inspect.Parameter.empty and n not in options)
        if missing:
            raise ValueError(
                f"attention {name!r} needs option(s) {missing}, e.g. AttentionSpec({name!r}, "
                + ", ".join(f"{n}=..." for n in missing) + ")"
            )
        for key in ("window", "dilation", "block_size", "q_chunk", "k_chunk"):
            if options.get(key) is not None:
                _check_positive_int(key, options[key])
        if "global_positions" in options:
            gp = options["global_positions"]
            if isinstance(gp, Tensor) and gp.dtype == torch.bool:
                gp = gp.nonzero().squeeze(-1)
            # Kept as a tuple so specs compare, hash and print by value. The upper bound is the
            # sequence length, known only when called; here only the type and sign are checked.
            no_upper_bound = torch.iinfo(torch.long).max
            options["global_positions"] = tuple(_global_index(gp, no_upper_bound, None).tolist())
        self.name = name
        self.options = dict(options)

    @classmethod
    def from_config(cls, attention: str = "full", window: int | None = None, n_global: int = 0) -> "AttentionSpec":
        """The spec of a model config's flat fields: the variant name, its ``window`` and, for
        ``"global_window"``, the number of leading global positions (e.g. BERT's ``[CLS]``, or a
        GPT's first tokens as "attention sinks")."""
        options = {} if window is None else {"window": window}
        if attention == "global_window":
            options["global_positions"] = tuple(range(n_global))
        elif n_global:
            raise ValueError(f"n_global={n_global} applies to attention='global_window', not {attention!r}")
        return cls(attention, **options)

    def replace(self, **options) -> "AttentionSpec":
        """A copy with some options changed (validated again)."""
        return AttentionSpec(self.name, **{**self.options, **options})

    @property
    def windowed(self) -> bool:
        """Whether the variant has a window, whose shape ``is_causal`` decides."""
        return "window" in self.options

    @property
    def recent_positions(self) -> int | None:
        """How many most recent positions a causal query can see, or None if not bounded.

        A decoder needs to cache only that many keys/values (see ``layers.RollingKVCache``).
        """
        if self.name != "sliding_window":
            return None
        return (self.options["window"] - 1) * self.options.get("dilation", 1) + 1

    def __call__(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None = None,
        *,
        scale: float | None = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
        return_weights: bool = False,
    ) -> AttentionResult:
        return ATTENTION_VARIANTS[self.name](
            q, k, v, mask, scale=scale, dropout_p=dropout_p, is_causal=is_causal,
            return_weights=return_weights, **self.options,
        )

    def __eq__(self, other) -> bool:
        return isinstance(other, AttentionSpec) and (self.name, self.options) == (other.name, other.options)

    def __hash__(self) -> int:
        return hash((self.name, tuple(sorted(self.options.items()))))

    def __repr__(self) -> str:
        args = [repr(self.name)] + [f"{n}={v!r}" for n, v in self.options.items()]
        return f"AttentionSpec({', '.join(args)})"
