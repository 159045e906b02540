"""What the blocked variants share: input checks, slicing and padding, the user mask sorted by what
it restricts, additive mask biases and dropout that the backward pass can replay.

Shape letters as in :mod:`attnlab.functional`; ``E`` is any feature width.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..functional import check_attention_call, check_positive_int

Tensor = torch.Tensor

#: Most elements a variant densifies into a ``(..., T, S)`` weight tensor on ``return_weights``
#: (64 MiB of float32): plenty for a heatmap, and a clear error instead of 32k × 32k weights.
MAX_DENSE_WEIGHTS = 1 << 24


# --------------------------------------------------------------------------------------------
# Checks.
# --------------------------------------------------------------------------------------------


def check_variant_call(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float) -> Tensor | None:
    """Validate like :func:`attnlab.functional.scaled_dot_product_attention`; return the mask with
    at least 2 dims.

    Shape:
        q ``(..., T, Dh)``;  k ``(..., S, Dh)``;  v ``(..., S, Dv)``;  mask broadcastable to
        ``(..., T, S)`` → the same mask, ``(1, S)`` or ``(1, 1)`` if it had fewer dims
    """
    check_attention_call(q, k, v, mask, dropout_p)
    if mask is not None and mask.dim() < 2:
        mask = mask.reshape((1,) * (2 - mask.dim()) + tuple(mask.shape))  # (1, S) or (1, 1)
    return mask


def check_window_args(window: int, dilation: int, block_size: int | None) -> None:
    """The shared options of the windowed variants."""
    check_positive_int("window", window)
    check_positive_int("dilation", dilation)
    if block_size is not None:
        check_positive_int("block_size", block_size)


def check_weights_size(name: str, q: Tensor, S: int) -> None:
    """Refuse ``return_weights`` when the dense weights would exceed :data:`MAX_DENSE_WEIGHTS`.

    Shape:
        q: ``(..., T, Dh)``; the weights would be ``(..., T, S)``
    """
    n = math.prod(q.shape[:-1]) * S
    if n > MAX_DENSE_WEIGHTS:
        raise ValueError(
            f"{name}: return_weights=True would densify the weights into shape "
            f"{tuple(q.shape[:-1]) + (S,)} ({n:,} elements), above MAX_DENSE_WEIGHTS="
            f"{MAX_DENSE_WEIGHTS:,}; ask for weights on a shorter sequence (a heatmap needs a few "
            "hundred positions)"
        )


# --------------------------------------------------------------------------------------------
# Slicing and padding.
# --------------------------------------------------------------------------------------------


def pad_dim(x: Tensor, dim: int, before: int, after: int, value=0) -> Tensor:
    """Pad axis ``dim`` (negative) with ``before``/``after`` entries of ``value``.

    Shape:
        ``(..., L, ...)`` → ``(..., before + L + after, ...)`` along ``dim``
    """
    if before == 0 and after == 0:
        return x
    return F.pad(x, (0, 0) * (-dim - 1) + (before, after), value=value)


def take(x: Tensor, dim: int, start: int, stop: int) -> Tensor:
    """Slice ``start:stop`` of axis ``dim`` unless that axis is broadcast (size 1).

    Shape:
        ``(..., L|1, ...)`` → ``(..., stop - start|1, ...)`` along ``dim``
    """
    return x if x.shape[dim] == 1 else x.narrow(dim, start, stop - start)


# --------------------------------------------------------------------------------------------
# Masks cut into blocks.
# --------------------------------------------------------------------------------------------


class MaskParts(NamedTuple):
    """A user mask sorted by what it restricts, so each part can be cut into blocks cheaply."""

    rows: Tensor | None  # (..., T|1, 1): whole query rows
    keys: Tensor | None  # (..., 1, S): key columns (padding)
    dense: Tensor | None  # (..., T, S): anything else


def split_mask(mask: Tensor | None) -> MaskParts:
    """Sort a user mask (at least 2 dims) into :class:`MaskParts`.

    Shape:
        mask: ``(..., T|1, S|1)`` boolean
    """
    if mask is None:
        return MaskParts(None, None, None)
    if mask.shape[-1] == 1:
        return MaskParts(mask, None, None)
    if mask.shape[-2] == 1:
        return MaskParts(None, mask, None)
    return MaskParts(None, None, mask)


def mask_bias(mask: Tensor, like: Tensor) -> Tensor:
    """0 where allowed, -inf where masked. Built at the mask's own (un-broadcast) size and then
    *added* to the scores: much faster than a broadcast masked_fill over every head.

    Shape:
        mask: any boolean shape → the same shape, in ``like``'s dtype and device
    """
    return torch.zeros(mask.shape, dtype=like.dtype, device=like.device).masked_fill_(~mask, -math.inf)


# --------------------------------------------------------------------------------------------
# Dropout the backward pass can replay.
# --------------------------------------------------------------------------------------------


def dropout_scale(seed: int, shape, p: float, like: Tensor) -> Tensor:
    """``keep / (1 - p)`` for one step, from a generator seeded per step so that the backward
    pass regenerates exactly the forward's dropout pattern instead of storing it.

    Shape:
        output: ``shape``, in ``like``'s dtype and device
    """
    gen = torch.Generator(device=like.device)
    gen.manual_seed(seed)
    keep = torch.rand(shape, generator=gen, device=like.device, dtype=like.dtype) >= p
    return keep.to(like.dtype) / (1.0 - p)


def new_seed() -> int:
    """A fresh seed for :func:`dropout_scale`, drawn from torch's global generator."""
    return int(torch.randint(0, 2**31 - 1, ()).item())
