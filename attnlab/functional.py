"""Pure attention functions and the mask helpers.

This file is the maths of the library. Every function is stateless: parameters come in as
arguments, tensors come out. Modules in :mod:`attnlab.layers` own the parameters and call these.

Shape letters used throughout attnlab:

    B   batch            T   query (target) length      S   key (source) length
    H   heads            D   model width                Dh  head width
    ... any number of leading batch/head dimensions

Mask convention (one for the whole library): a **boolean** tensor, ``True`` = *may attend*,
broadcastable to the score matrix ``(..., T, S)``. The mask helpers at the end of this file are the
only places that build masks: :func:`causal_mask`, :func:`padding_mask`, :func:`sliding_window_mask`,
:func:`block_local_mask`, :func:`dilated_window_mask`, :func:`global_window_mask`,
:func:`neighbour_mask` and :func:`combine_masks`. A query row with no key to attend to returns a zero output vector and zero
weights, never NaN.

Attention over sparse patterns for long sequences (sliding window, global + window), exact
attention in linear memory (chunked, the online softmax) and choosing attention by name
(``AttentionSpec``) build on this module in :mod:`attnlab.variants`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F

Tensor = torch.Tensor

__all__ = [
    "AttentionResult",
    "attention_result_html",
    "scaled_dot_product_attention",
    "pick_backend",
    "set_auto_rule",
    "additive_attention",
    "causal_mask",
    "padding_mask",
    "sliding_window_mask",
    "block_local_mask",
    "dilated_window_mask",
    "global_window_mask",
    "combine_masks",
    "neighbour_mask",
    "BACKENDS",
]


class AttentionResult(NamedTuple):
    """What every attention function returns: the mixed values and (on request) the weights.

    In Jupyter it shows the shapes and the weights (of the first batch item): their numbers when
    the map is small, else a heatmap per head (:func:`attnlab.viz.attention_html`).
    """

    output: Tensor  # (..., T, Dv)
    weights: Tensor | None  # (..., T, S), or None when not requested

    def _repr_html_(self) -> str:
        return attention_result_html(self)


def attention_result_html(result: tuple, lang: str | None = None) -> str:
    """The Jupyter display of an ``(output, weights)`` pair (:class:`AttentionResult`,
    :class:`attnlab.layers.AttentionOutput`): the shapes, then the weights if there are any, in
    ``lang`` (default: ``attnlab.viz.display_options.lang``). The panels are titled by head only:
    one attention call's weights belong to no layer; the axes are the query and key positions
    (an attention call may be self- or source–target attention, so neither is named).

    Shape:
        output ``(..., T, Dv)``; weights ``(..., T, S)`` or ``None``
    """
    from html import escape

    from .viz import attention_html, labels_in

    text = labels_in(lang)
    output, weights = result
    line = f"<b>{escape(type(result).__name__)}</b>: output {tuple(output.shape)}"
    if weights is None:
        return f"<div>{line} · {escape(text['no_weights'])}</div>"
    lead = text["first_batch_item"] if weights.dim() > 3 else ""
    caption = f"{text['weights']} {tuple(weights.shape)}{lead}"
    while weights.dim() > 3:
        weights = weights[0]  # (B, H, T, S) -> (H, T, S): one panel per head
    return f"<div>{line}</div>" + attention_html(
        weights.detach(), caption=caption, layer_names=[None], lang=lang,
        row_label=text["query_position"], column_label=text["key_position"],
    )  # fmt: skip


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
        raise ValueError(f"k and v must have the same length S; got k {tuple(k.shape)}, v {tuple(v.shape)}")
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(
            f"q, k, v batch/head dims differ: q {tuple(q.shape[:-2])}, k {tuple(k.shape[:-2])}, v {tuple(v.shape[:-2])}"
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
    # The mask must broadcast *to* the scores, not enlarge them: a (3, T, S) mask on (1, T, S)
    # scores would otherwise silently return three outputs. (Written out rather than with
    # torch.broadcast_shapes, whose Python implementation costs more than a decoding step's
    # attention.)
    n = mask.dim()
    if n > len(scores_shape) or any(m not in (1, s) for m, s in zip(mask.shape, scores_shape[len(scores_shape) - n :])):
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} is not broadcastable to the scores (..., T, S) = {tuple(scores_shape)}"
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
    if bool(key_used.all() & row_used.all()):  # nothing unreachable; reductions of the small mask
        return q, k, v
    # Padding leaves positions unreachable, but only a NaN or inf there needs the copies below.
    # Three sums and one host sync, no copy of q, k, v: a sum that overflows only sends finite
    # inputs down the exact path, which is still correct.
    if bool(torch.isfinite(q.detach().sum() + k.detach().sum() + v.detach().sum())):
        return q, k, v
    return q.masked_fill(~row_used, 0.0), k.masked_fill(~key_used, 0.0), v.masked_fill(~key_used, 0.0)


def check_attention_call(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float) -> Tensor | None:
    """The checks of :func:`scaled_dot_product_attention`, for every function with its calling
    convention (the variants in :mod:`attnlab.variants` too): raises naming the problem, and
    returns the mask viewed with the scores' rank (see :func:`_check_mask`).

    Shape:
        q ``(..., T, Dh)``;  k ``(..., S, Dh)``;  v ``(..., S, Dv)``;  mask broadcastable to ``(..., T, S)``
    """
    _check_qkv(q, k, v)
    mask = _check_mask(mask, q.shape[:-2] + (q.shape[-2], k.shape[-2]))  # (..., T, S), the scores' rank
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    return mask


def check_positive_int(name: str, value) -> None:
    """Raise unless ``value`` is an int ≥ 1 (a window, a dilation, a block or chunk size)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be ≥ 1, got {value}")


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

#: Backends by name, filled here and only here. ``"math"`` is the specification; every other entry
#: is tested against it. Exact attention by the online softmax is a variant, not an entry:
#: :func:`attnlab.variants.chunked_attention`, which ``AttentionSpec("full", backend="chunked")``
#: (and so ``MultiHeadAttention(backend="chunked")``) runs.
BACKENDS: dict[str, AttentionBackend] = {
    "math": _math_attention,
    "sdpa": _sdpa_attention,
}


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
            math when weights are requested or where the engine's rule says math is faster: bf16/fp16
            on a CPU with few keys, see :func:`set_auto_rule`), or any other name in
            :data:`BACKENDS`. The online-softmax computation of the same function is
            :func:`attnlab.variants.chunked_attention`.

    Shape:
        - q: ``(..., T, Dh)``
        - k: ``(..., S, Dh)``
        - v: ``(..., S, Dv)``
        - mask: broadcastable to ``(..., T, S)``
        - output: ``(..., T, Dv)``; weights: ``(..., T, S)`` or ``None``

    Returns:
        :class:`AttentionResult` ``(output, weights)``.
    """
    mask = check_attention_call(q, k, v, mask, dropout_p)  # (..., T, S)
    if is_causal and q.shape[-2] == 1:
        is_causal = False  # one query, aligned with the last key, sees every key (decoding with a cache)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    fn = pick_backend(backend, q, k, return_weights)
    if mask is not None:
        q, k, v = _quiet_unreachable(q, k, v, mask)
    return fn(q, k, v, mask, scale, dropout_p, is_causal, return_weights)


#: Whether ``backend="auto"`` takes ``"math"`` rather than ``"sdpa"`` for ``(q, k)`` when no weights
#: are asked for (see :func:`set_auto_rule`); ``None``: always ``"sdpa"``.
_auto_rule: Callable[[Tensor, Tensor], bool] | None = None


def set_auto_rule(rule: Callable[[Tensor, Tensor], bool] | None) -> None:
    """Let ``rule(q, k)`` decide where ``backend="auto"`` takes the explicit matmuls (``"math"``)
    rather than PyTorch's fused kernel (``"sdpa"``) when no weights are asked for.

    Both compute the same attention (tested against each other), so the choice is only about
    speed, and it is the engine's: :mod:`attnlab.accel` sets its measured rule
    (:func:`attnlab.accel.rules.prefer_math`: bf16/fp16 on a CPU with few keys) when it is
    imported, as attnlab's training, decoding, recipes and CLI do. The maths here knows nothing of
    the engine; without a rule, "auto" is the fused kernel. ``None`` removes the rule.

    Shape:
        q ``(..., T, Dh)``, k ``(..., S, Dh)`` (what ``rule`` receives)
    """
    global _auto_rule
    _auto_rule = rule


def pick_backend(backend: str, q: Tensor, k: Tensor, return_weights: bool = False) -> AttentionBackend:
    """The function in :data:`BACKENDS` that :func:`scaled_dot_product_attention` runs for
    ``backend`` (resolving ``"auto"``), called as ``fn(q, k, v, mask, scale, dropout_p,
    is_causal, return_weights)`` on checked inputs. A caller that has made the checks itself (one
    decoding query against a cache, :class:`attnlab.layers.MultiHeadAttention`) calls it directly.

    Shape:
        q ``(..., T, Dh)``, k ``(..., S, Dh)``
    """
    if backend == "auto":
        rule = _auto_rule
        backend = "math" if return_weights or (rule is not None and rule(q, k)) else "sdpa"
    try:
        return BACKENDS[backend]
    except KeyError:
        hint = "; exact chunked attention is attnlab.chunked_attention" if backend == "chunked" else ""
        raise ValueError(
            f"unknown attention backend {backend!r}; choose from {sorted(BACKENDS)} or 'auto'{hint}"
        ) from None


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
        raise ValueError(
            f"lengths must be a 1-D integer tensor, got shape {tuple(lengths.shape)} dtype {lengths.dtype}"
        )
    if bool((lengths < 0).any()):
        raise ValueError(f"lengths must be non-negative, got {lengths.tolist()}")
    S = int(lengths.max()) if max_len is None else max_len
    if lengths.numel() and int(lengths.max()) > S:
        raise ValueError(f"max_len={S} is shorter than the longest length {int(lengths.max())}")
    positions = torch.arange(S, device=lengths.device)  # (S,)
    return positions.unsqueeze(0) < lengths.unsqueeze(1)  # (B, S)


def sliding_window_mask(T: int, S: int | None = None, *, window: int, causal: bool = True, device=None) -> Tensor:
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


def block_local_mask(T: int, S: int | None = None, *, block: int, causal: bool = True, device=None) -> Tensor:
    """Block-local attention: the positions are cut into consecutive blocks of ``block``, and a
    query sees only the keys of its own block. This is the simplest block-local form, not the
    Image Transformer's local 1D attention (Parmar et al. 2018, §3.2), whose query blocks also
    attend to a wider memory block, the positions before them included. Unlike a sliding window,
    the first query of a block here sees no key of the block before it.

    Positions are aligned bottom-right as in :func:`causal_mask` (query ``i`` stands at
    ``p = i + S - T``); blocks are counted from key position 0. Causal: keys ``j ≤ p`` of the block.

    Shape:
        output: ``(T, S)`` boolean
    """
    S = T if S is None else S
    check_positive_int("block", block)
    if T <= 0 or S <= 0:
        raise ValueError(f"block_local_mask needs positive lengths, got T={T}, S={S}")
    p = torch.arange(T, device=device).unsqueeze(1) + (S - T)  # (T, 1) query positions
    j = torch.arange(S, device=device).unsqueeze(0)  # (1, S)
    same = (p // block) == (j // block)  # (T, S)
    return same & (j <= p) if causal else same  # (T, S)


def neighbour_mask(edges: Tensor, n_nodes: int) -> Tensor:
    """Who may attend to whom: ``mask[i, j]`` is True iff ``j`` is a neighbour of ``i`` or ``j = i``.

    The graph-attention mask (Veličković et al. 2018, §2.1: attention only over N(i) ∪ {i}).
    Edges are undirected: each ``(u, v)`` lets ``u`` attend to ``v`` and ``v`` to ``u``.

    Shape:
        edges ``(2, E)`` or ``(E, 2)`` integer node indices → ``(N, N)`` boolean
    """
    edges = torch.as_tensor(edges)
    if edges.is_floating_point() or edges.dim() != 2 or 2 not in edges.shape:
        raise ValueError(
            f"edges must be an integer tensor of shape (2, E) or (E, 2), got {tuple(edges.shape)} {edges.dtype}"
        )
    if edges.shape[0] != 2:
        edges = edges.T  # (E, 2) -> (2, E)
    if edges.numel() and (int(edges.min()) < 0 or int(edges.max()) >= n_nodes):
        raise ValueError(
            f"edge endpoints must be node indices in [0, {n_nodes}), got [{int(edges.min())}, {int(edges.max())}]"
        )
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


def dilated_window_mask(
    T: int, S: int | None = None, *, window: int, causal: bool = True, dilation: int = 1, device=None
) -> Tensor:
    """Dense mask of :func:`attnlab.variants.sliding_window_attention`: ``window`` keys spaced
    ``dilation`` apart.

    Positions are aligned bottom-right (query ``i`` stands at ``p = i + S - T``). Causal: keys
    ``p, p - d, …, p - (window - 1)·d``. Symmetric: keys ``p + m·d`` for ``|m| ≤ window // 2``.
    With ``dilation=1`` this is :func:`sliding_window_mask`. Dilation widens the receptive field
    at the same cost (Beltagy et al. 2020, §3.1, "dilated sliding window").

    Shape:
        output: ``(T, S)`` boolean
    """
    S = T if S is None else S
    check_positive_int("window", window)
    check_positive_int("dilation", dilation)
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
    """Dense mask of :func:`attnlab.variants.global_window_attention` (Longformer, Beltagy et al.
    2020, §3.1).

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
    is_global[global_positions_index(global_positions, S, device)] = True
    p = torch.arange(T, device=device) + (S - T)  # (T,) query positions
    global_query = torch.zeros(T, dtype=torch.bool, device=device)  # (T,)
    inside = p >= 0
    global_query[inside] = is_global[p[inside]]
    mask = local | is_global.unsqueeze(0) | global_query.unsqueeze(1)  # (T, S)
    if causal:
        mask = mask & causal_mask(T, S, device=device)
    return mask


def global_positions_index(global_positions, S: int, device=None) -> Tensor:
    """Sorted unique indices of the global positions, given as indices or an ``(S,)`` boolean tensor.

    Shape:
        global_positions: ``(g,)`` integer indices in ``[0, S)`` or ``(S,)`` boolean → ``(g,)`` long
    """
    if isinstance(global_positions, Tensor) and global_positions.dtype == torch.bool:
        if global_positions.shape != (S,):
            raise ValueError(
                f"global_positions as a boolean mask must have shape (S,) = ({S},), got {tuple(global_positions.shape)}"
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
                f"global_positions must be integer indices or an (S,) boolean tensor, got {global_positions!r}"
            ) from None
    if idx.is_floating_point() or idx.is_complex() or idx.dim() != 1:
        raise TypeError(
            "global_positions must be a 1-D sequence of integer indices or an (S,) boolean tensor, "
            f"got dtype {idx.dtype} shape {tuple(idx.shape)}"
        )
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= S):
        raise ValueError(f"global_positions must lie in [0, S) = [0, {S}), got {idx.tolist()}")
    return torch.unique(idx.long(), sorted=True)  # (g,)
