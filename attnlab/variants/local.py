"""Local attention computed in blocks: the banded machinery of the windowed variants.

Queries are cut into blocks of ``b`` rows. Query ``i`` (at key position ``p = i + S - T``) needs
keys ``p + lo … p + hi``, so block ``n`` needs one contiguous band of keys, the same shape for every
block: after shifting the keys so that block 0's band starts at index 0 (padding out-of-range
keys), block ``n``'s band is rows ``n·b … n·b + Wk - 1``, with ``Wk = m·b ≥ b + hi - lo``. ``unfold``
turns the keys into all the bands at once as a strided view (no copy), so every block is scored by
one batched matmul ``(..., nb, b, Dh) @ (..., nb, Dh, Wk)``: ``O(T · Wk)`` work and memory instead of
``O(T · S)``. Inside a band, query row ``r`` may use band column ``c`` iff ``lo ≤ c - r + lo ≤ hi``,
the same ``(b, Wk)`` pattern for every block.

The loops go over groups of blocks with a custom autograd Function that stores only the output
and the per-row log-sum-exp, and recomputes the scores in backward (as
:func:`attnlab.variants.chunked_attention` does): memory stays ``O(T·Dh)`` plus one group's scores,
like a fused kernel's. :mod:`attnlab.variants.dilated` reduces a dilated window to this one.
"""

from __future__ import annotations

import math

import torch

from .blocks import MaskParts, dropout_scale, mask_bias, new_seed, pad_dim, take

Tensor = torch.Tensor

# Score elements handled per step of the blocked loops: big enough for efficient matmuls, small
# enough that the per-step temporaries stay a few MiB whatever the sequence length.
_STEP_ELEMENTS = 1 << 21


def window_offsets(window: int, causal: bool) -> tuple[int, int]:
    """Key offsets ``lo ≤ j - p ≤ hi`` (in units of the dilation) a query may attend."""
    return (-(window - 1), 0) if causal else (-(window // 2), window // 2)


def band_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    parts: MaskParts,
    *,
    lo: int,
    hi: int,
    scale: float,
    dropout_p: float,
    return_weights: bool,
    block_size: int | None,
    extra: tuple[Tensor, Tensor, Tensor | None] | None = None,
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """Banded attention ``lo ≤ j - p ≤ hi`` joined by optional extra keys (inputs already checked).

    ``extra`` is ``(kx, vx, xmask)``: keys every query may also attend (in the same softmax), with
    ``xmask`` broadcastable to ``(..., T, g)``. ``block_size`` defaults to about half the band.

    Shape:
        - q: ``(..., T, Dh)``;  k: ``(..., S, Dh)``;  v: ``(..., S, Dv)``;  parts: see :class:`MaskParts`
        - kx: ``(..., g, Dh)``;  vx: ``(..., g, Dv)``
        - output: ``(..., T, Dv)``; on request the band weights ``(..., T, S)`` and the extra
          weights ``(..., T, g)`` (detached), else ``None``
    """
    S = k.shape[-2]
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


def _default_block(lo: int, hi: int) -> int:
    # b ≈ half the window keeps the band Wk = m·b ≈ 1.5 windows (little wasted work) while the
    # blocks stay large enough for efficient matmuls.
    return max(16, min(128, (hi - lo + 1) // 2))


def _shift(x: Tensor, shift: int, length: int, dim: int, value=0) -> Tensor:
    """``out[u] = x[u + shift]`` along axis ``dim`` for ``0 ≤ u < length``; ``value`` outside ``x``."""
    lo = min(max(0, -shift), length)  # first u with a source element
    hi = max(min(length, x.shape[dim] - shift), lo)  # one past the last
    piece = x.narrow(dim, lo + shift, hi - lo) if hi > lo else x.narrow(dim, 0, 0)
    return pad_dim(piece, dim, lo, length - hi, value)


class _LocalPlan:
    """Block layout and block-cut masks of one local-attention call (nothing here needs grad)."""

    def __init__(
        self,
        q: Tensor,
        S: int,
        lo: int,
        hi: int,
        block_size: int,
        parts: MaskParts,
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
        self.seed = new_seed() if dropout_p > 0.0 else 0
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
            dense = pad_dim(dense, -2, 0, self.tp - T, False).contiguous()  # (..., Tp, Lk)
            self.dense = _band_view(dense, self.nb, b, self.wk)  # (..., nb, b, Wk)
        lead = math.prod(q.shape[:-2])
        self.group = max(1, min(self.nb, _STEP_ELEMENTS // max(1, lead * b * (self.wk + n_extra))))

    def _cut_rows(self, x: Tensor) -> Tensor:
        """``(..., T|1, E)`` → ``(..., nb, b, E)`` (or ``(..., 1, 1, E)`` when broadcast over rows)."""
        if x.shape[-2] == 1:
            return x.unsqueeze(-3)  # (..., 1, 1, E)
        x = pad_dim(x, -2, 0, self.tp - self.T, False)  # (..., Tp, E)
        return x.unflatten(-2, (self.nb, self.b))  # (..., nb, b, E)

    def groups(self):
        for g0 in range(0, self.nb, self.group):
            yield g0, min(self.nb, g0 + self.group)

    def band_mask(self, g0: int, g1: int) -> Tensor:
        """Which band entries of blocks ``g0:g1`` may attend; broadcastable to ``(..., G, b, Wk)``."""
        keys = self.keys[..., g0 * self.b : (g1 + self.m - 1) * self.b].unfold(-1, self.wk, self.b)  # (..., G, Wk)
        mask = self.rel & keys.unsqueeze(-2)  # (..., G, b, Wk)
        if self.rows is not None:
            mask = mask & take(self.rows, -3, g0, g1)
        if self.dense is not None:
            mask = mask & self.dense[..., g0:g1, :, :]
        return mask

    def extra_mask(self, g0: int, g1: int) -> Tensor | None:
        """Which extra (global) keys blocks ``g0:g1`` may attend; broadcastable to ``(..., G, b, g)``."""
        mask = None if self.extra is None else take(self.extra, -3, g0, g1)
        if self.rows is not None:
            rows = take(self.rows, -3, g0, g1)
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
    s = (qg @ plan.bands(kr, g0, g1)).add_(mask_bias(plan.band_mask(g0, g1), qg))  # (..., G, b, Wk)
    if kx is None:
        return qg, s
    sx = qg @ kx.transpose(-2, -1).unsqueeze(-3)  # (..., G, b, Dh) x (..., 1, Dh, g) -> (..., G, b, g)
    xmask = plan.extra_mask(g0, g1)
    if xmask is not None:
        sx.add_(mask_bias(xmask, qg))
    return qg, torch.cat([s, sx], dim=-1)  # (..., G, b, Wk + g)


def _softmax_lse(s: Tensor) -> tuple[Tensor, Tensor]:
    """Row softmax of masked scores ``s`` and the row log-sum-exp (kept for the backward pass).

    The largest weight of a row is ``exp(0) / Σ``, so ``lse = max - log(max weight)`` comes from
    the fused softmax at the cost of one reduction. A row with nothing allowed gets zero weights
    and ``lse = +inf``, so that recomputed weights ``exp(s - lse)`` are 0 there too, never NaN.
    """
    mx = s.amax(-1, keepdim=True)  # (..., 1)
    p = torch.softmax(s, dim=-1)
    lse = mx - p.amax(-1, keepdim=True).log()  # (..., 1)
    empty = mx == -math.inf
    if bool(empty.any()):
        p.masked_fill_(empty, 0.0)
        lse.masked_fill_(empty, math.inf)
    return p, lse


class _LocalAttentionFn(torch.autograd.Function):
    """Blocked local attention (optionally joined by extra global keys) with a recomputing backward."""

    @staticmethod
    def forward(ctx, q, k, v, kx, vx, plan: _LocalPlan):
        b, wk, tp = plan.b, plan.wk, plan.tp
        qp = pad_dim(q, -2, 0, tp - plan.T)  # (..., Tp, Dh)
        kr = _shift(k, plan.s0, plan.lk, -2)  # (..., Lk, Dh)
        vr = _shift(v, plan.s0, plan.lk, -2)  # (..., Lk, Dv)
        out = q.new_empty(q.shape[:-2] + (tp, v.shape[-1]))  # (..., Tp, Dv)
        lse = q.new_empty(q.shape[:-2] + (tp,))  # (..., Tp)
        for g0, g1 in plan.groups():
            _, s = _local_scores(plan, qp, kr, kx, g0, g1)  # (..., G, b, Wk+g)
            p, lse_g = _softmax_lse(s)  # (..., G, b, Wk+g), (..., G, b, 1)
            if plan.dropout_p > 0.0:
                p = p * dropout_scale(plan.seed + g0, p.shape, plan.dropout_p, p)
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
        qp = pad_dim(q, -2, 0, tp - plan.T)  # (..., Tp, Dh)
        kr = _shift(k, plan.s0, plan.lk, -2)  # (..., Lk, Dh)
        vr = _shift(v, plan.s0, plan.lk, -2)  # (..., Lk, Dv)
        d_out = pad_dim(d_out, -2, 0, tp - plan.T)  # (..., Tp, Dv)
        # D_i = Σ_j P_ij dP_ij = dO_i · O_i: the softmax Jacobian needs only this per-row number.
        delta = pad_dim((d_out[..., : plan.T, :] * out).sum(-1), -1, 0, tp - plan.T)  # (..., Tp)
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
                drop = dropout_scale(plan.seed + g0, p.shape, plan.dropout_p, p)
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
        qp = pad_dim(q, -2, 0, plan.tp - plan.T)  # (..., Tp, Dh)
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
