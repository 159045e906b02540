"""Dilated windows: keys ``p, p - d, p - 2d, …`` (Beltagy et al. 2020, §3.1, "dilated sliding window").

A dilated window is reduced to the undilated one of :mod:`attnlab.variants.local` with strided
views: after left-padding to a multiple of ``d``, the positions of each residue class ``p mod d``
form an ordinary sequence, and a dilated window over the whole sequence is an ordinary window
inside each class. Left padding keeps the bottom-right alignment.
"""

from __future__ import annotations

import torch

from .blocks import MaskParts, pad_dim
from .local import band_attention

Tensor = torch.Tensor


def dilated_band_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    parts: MaskParts,
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

    As :func:`attnlab.variants.local.band_attention`, which it is for ``dilation=1``; with
    ``d = dilation > 1`` each residue class of the positions mod ``d`` attends on its own, and the
    extra keys join every class.

    Shape:
        - q: ``(..., T, Dh)``;  k: ``(..., S, Dh)``;  v: ``(..., S, Dv)``;  parts: see ``MaskParts``
        - extra: kx ``(..., g, Dh)``, vx ``(..., g, Dv)``, xmask broadcastable to ``(..., T, g)``
        - output: ``(..., T, Dv)``; on request the band weights ``(..., T, S)`` and the extra
          weights ``(..., T, g)`` (detached), else ``None``
    """
    if dilation == 1:
        return band_attention(
            q,
            k,
            v,
            parts,
            lo=lo,
            hi=hi,
            scale=scale,
            dropout_p=dropout_p,
            return_weights=return_weights,
            block_size=block_size,
            extra=extra,
        )
    T, S = q.shape[-2], k.shape[-2]
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
    out, w, wx = band_attention(
        qd,
        kd,
        vd,
        MaskParts(rows, keys, dense),
        lo=lo,
        hi=hi,
        scale=scale,
        dropout_p=dropout_p,
        return_weights=return_weights,
        block_size=block_size,
        extra=extra_d,
    )
    out = _from_residues(out, pad_t)  # (..., T, Dv)
    if w is not None:
        w = _dense_from_residues(w, T, S, d)  # (..., T, S)
        wx = None if wx is None else _from_residues(wx, pad_t)  # (..., T, g)
    return out, w, wx


def _to_residues(x: Tensor, d: int, dim: int, value=0) -> tuple[Tensor, int]:
    """Group a sequence axis by position mod ``d``: ``(.., L, ..)`` → ``(.., d, ⌈L/d⌉, ..)``.

    The axis is left-padded to a multiple of ``d`` first. Left padding keeps the bottom-right
    alignment (query ``i`` at key position ``i + S - T``) and makes the residue of a query's and a
    key's position mod ``d`` equal to their residue index, so a dilated window (keys ``p - m·d``)
    becomes an ordinary window inside each residue class. Returns the tensor and the padding.
    """
    pad = (-x.shape[dim]) % d
    x = pad_dim(x, dim, pad, 0, value)
    x = x.unflatten(dim, (x.shape[dim] // d, d))  # the residue axis now sits at `dim`
    return x.movedim(dim, -3), pad  # (..., d, L'', E) or (..., d, E, L'')


def _from_residues(x: Tensor, pad: int) -> Tensor:
    """Inverse of :func:`_to_residues` along the rows: ``(..., d, L'', E)`` → ``(..., L, E)``."""
    x = x.movedim(-3, -2).flatten(-3, -2)  # (..., d, L'', E) -> (..., L'', d, E) -> (..., L''·d, E)
    return x[..., pad:, :]


def _dense_to_residues(x: Tensor, d: int) -> Tensor:
    """A ``(..., T, S)`` mask → ``(..., d, T'', S'')``: the pairs whose residues match."""
    x = pad_dim(pad_dim(x, -1, (-x.shape[-1]) % d, 0, False), -2, (-x.shape[-2]) % d, 0, False)  # (..., T', S')
    x = x.unflatten(-1, (x.shape[-1] // d, d)).unflatten(-3, (x.shape[-2] // d, d))  # (..., T'', d, S'', d)
    return x.diagonal(dim1=-3, dim2=-1).movedim(-1, -3)  # (..., T'', S'', d) -> (..., d, T'', S'')


def _dense_from_residues(w: Tensor, T: int, S: int, d: int) -> Tensor:
    """Weights ``(..., d, T'', S'')`` → ``(..., T, S)``; pairs of different residues are 0."""
    Tr, Sr = w.shape[-2], w.shape[-1]
    full = w.new_zeros(w.shape[:-3] + (Tr, d, Sr, d))  # (..., T'', d, S'', d)
    full.diagonal(dim1=-3, dim2=-1).copy_(w.movedim(-3, -1))  # (..., T'', S'', d)
    full = full.reshape(w.shape[:-3] + (Tr * d, Sr * d))  # (..., T', S')
    return full[..., Tr * d - T :, Sr * d - S :]  # (..., T, S)
