"""Global + window attention (Longformer, Beltagy et al. 2020, §3.1): a sliding window plus a few
global positions that attend to, and are attended by, every position.
"""

from __future__ import annotations

import math

import torch

from ..functional import AttentionResult, combine_masks, global_positions_index, scaled_dot_product_attention
from .blocks import check_variant_call, check_weights_size, check_window_args, split_mask
from .dilated import dilated_band_attention
from .local import window_offsets

Tensor = torch.Tensor


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
    over their window and the global keys (computed blocked, as
    :func:`~attnlab.variants.sliding_window_attention`); the ``g`` global queries attend densely
    (``O(g · S)``). With ``is_causal`` nothing sees the future. Equal to
    :func:`~attnlab.functional.scaled_dot_product_attention` with ``mask & global_window_mask(...)``
    (:func:`attnlab.functional.global_window_mask`).

    Args:
        global_positions: key positions, as indices or an ``(S,)`` boolean tensor; a query is
            global when its position (``i + S - T``) is.
        window, is_causal, dilation, block_size: as :func:`~attnlab.variants.sliding_window_attention`.
        Others: as :func:`~attnlab.functional.scaled_dot_product_attention`.

    Shape:
        - q: ``(..., T, Dh)``;  k: ``(..., S, Dh)``;  v: ``(..., S, Dv)``
        - mask: broadcastable to ``(..., T, S)``
        - output: ``(..., T, Dv)``;  weights: ``(..., T, S)`` (densified; detached) or ``None``
    """
    mask = check_variant_call(q, k, v, mask, dropout_p)
    check_window_args(window, dilation, block_size)
    T, S = q.shape[-2], k.shape[-2]
    if return_weights:
        check_weights_size("global_window_attention", q, S)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    gidx = global_positions_index(global_positions, S, q.device)  # (g,)
    lo, hi = window_offsets(window, is_causal)
    parts = split_mask(mask)
    common = dict(
        lo=lo,
        hi=hi,
        dilation=dilation,
        scale=scale,
        dropout_p=dropout_p,
        return_weights=return_weights,
        block_size=block_size,
    )
    if gidx.numel() == 0:
        out, weights, _ = dilated_band_attention(q, k, v, parts, **common)
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
    out, weights, wx = dilated_band_attention(q, k, v, parts._replace(keys=keys), extra=extra, **common)
    if weights is not None:
        weights = weights.index_copy(-1, gidx, wx)  # band weights are 0 on the global columns

    # 2. Global queries: dense attention over every key (O(g · S)).
    qidx = gidx - (S - T)
    qidx = qidx[(qidx >= 0) & (qidx < T)]  # (gq,) global queries among the T
    if qidx.numel():
        gmask = mask if mask is None or mask.shape[-2] == 1 else mask.index_select(-2, qidx)
        if is_causal:
            gmask = combine_masks(gmask, torch.arange(S, device=q.device) <= p[qidx].unsqueeze(1))  # (gq, S)
        out_g, w_g = scaled_dot_product_attention(
            q.index_select(-2, qidx),
            k,
            v,
            gmask,
            scale=scale,
            dropout_p=dropout_p,
            return_weights=return_weights,
            backend="math",
        )  # (..., gq, Dv), (..., gq, S)
        out = out.index_copy(-2, qidx, out_g)
        if weights is not None:
            weights = weights.index_copy(-2, qidx, w_g.detach().expand(weights.shape[:-2] + w_g.shape[-2:]))
    return AttentionResult(out, weights)
