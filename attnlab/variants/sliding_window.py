"""Sliding-window (local) attention: each query sees the keys within a window of its position.

Beltagy et al. 2020, §3.1; Child et al. 2019. Computed in blocks (:mod:`attnlab.variants.local`),
optionally dilated (:mod:`attnlab.variants.dilated`).
"""

from __future__ import annotations

import math

import torch

from ..functional import AttentionResult
from .blocks import check_variant_call, check_weights_size, check_window_args, split_mask
from .dilated import dilated_band_attention
from .local import window_offsets

Tensor = torch.Tensor


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

    Causal (the default, as :func:`~attnlab.functional.sliding_window_mask`): query ``p`` sees keys
    ``p - (window-1)·d … p`` with ``d = dilation``; symmetric (``is_causal=False``): keys
    ``p + m·d`` for ``|m| ≤ window // 2``. One causal layer reaches ``(window − 1)·d`` positions
    back, so stacking ``L`` such layers reaches ``L · (window − 1)·d`` (symmetric:
    ``L · (window // 2)·d`` to each side), which is why local attention works for language
    (Beltagy et al. 2020, §3.1; Child et al. 2019). Computed in blocks of ``block_size`` queries,
    each against one band of keys cut out by a strided view, so time and memory grow linearly
    with the sequence length.
    Equal to :func:`~attnlab.functional.scaled_dot_product_attention` with
    ``mask & dilated_window_mask(...)`` (:func:`attnlab.functional.dilated_window_mask`).

    Args:
        q, k, v, mask, scale, dropout_p, return_weights: as
            :func:`~attnlab.functional.scaled_dot_product_attention` (the mask is cut into the
            blocks; a key-padding mask ``(..., 1, S)`` costs nothing).
        window: number of keys each query sees (causal) or the full width (symmetric).
        is_causal: causal window (keys up to the query) or symmetric window around it.
        dilation: spacing ``d`` between the attended keys (a dilated window).
        block_size: queries per block (default about ``window / 2``, between 16 and 128).

    Shape:
        - q: ``(..., T, Dh)``;  k: ``(..., S, Dh)``;  v: ``(..., S, Dv)``
        - mask: broadcastable to ``(..., T, S)``
        - output: ``(..., T, Dv)``;  weights: ``(..., T, S)`` (densified; detached) or ``None``
    """
    mask = check_variant_call(q, k, v, mask, dropout_p)
    check_window_args(window, dilation, block_size)
    if return_weights:
        check_weights_size("sliding_window_attention", q, k.shape[-2])
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    lo, hi = window_offsets(window, is_causal)
    out, weights, _ = dilated_band_attention(
        q,
        k,
        v,
        split_mask(mask),
        lo=lo,
        hi=hi,
        dilation=dilation,
        scale=scale,
        dropout_p=dropout_p,
        return_weights=return_weights,
        block_size=block_size,
    )
    return AttentionResult(out, weights)
