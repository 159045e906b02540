"""Exact attention in linear memory: the online softmax, chunk by chunk, with a recomputing backward.

softmax needs the row maximum and the row sum before any weight is known; the online softmax
(Milakov & Gimelshein 2018) keeps a running maximum ``m``, a running sum ``l`` and a running output
``acc``, and rescales them by ``exp(m_old - m_new)`` whenever a new chunk of keys raises the
maximum. After the last chunk, ``out = acc / l`` is exactly ``softmax(s) v``. Only one
(chunk × chunk) block of scores exists at a time. The backward pass recomputes each block's weights
as ``exp(s - lse)`` from the saved log-sum-exp ``lse = m + log l`` (Rabe & Staats 2021; Dao et al.
2022, Alg. 2 and 4): compute is traded for memory, which is what fused flash-attention kernels do
on a GPU.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from ..functional import AttentionResult, check_positive_int
from .blocks import check_variant_call, check_weights_size, dropout_scale, mask_bias, new_seed, take

Tensor = torch.Tensor


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

    Computes the same function as :func:`~attnlab.functional.scaled_dot_product_attention` (also
    reached as ``AttentionSpec("full", backend="chunked")``, so as the ``"chunked"`` backend of
    :class:`~attnlab.layers.MultiHeadAttention` and the model configs) but holds at most one
    ``q_chunk × k_chunk`` block of scores: for each chunk of queries it walks the key chunks,
    keeping a running maximum, sum and output that it rescales when the maximum grows. The backward pass recomputes each block's weights from the
    saved log-sum-exp instead of storing the ``(T, S)`` matrix. With ``is_causal`` the key chunks
    wholly in the future are skipped, halving the work. A readable reference for fused kernels.

    Args:
        q_chunk, k_chunk: rows of queries and keys per block.
        Others: as :func:`~attnlab.functional.scaled_dot_product_attention`.

    Shape:
        - q: ``(..., T, Dh)``;  k: ``(..., S, Dh)``;  v: ``(..., S, Dv)``
        - mask: broadcastable to ``(..., T, S)``
        - output: ``(..., T, Dv)``;  weights: ``(..., T, S)`` (recomputed; detached) or ``None``
    """
    mask = check_variant_call(q, k, v, mask, dropout_p)
    check_positive_int("q_chunk", q_chunk)
    check_positive_int("k_chunk", k_chunk)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if return_weights:
        check_weights_size("chunked attention", q, k.shape[-2])
    seed = new_seed() if dropout_p > 0.0 else 0
    plan = _ChunkPlan(q.shape[-2], k.shape[-2], mask, is_causal, scale, dropout_p, seed, q_chunk, k_chunk)
    out, lse = _ChunkedAttentionFn.apply(q, k, v, plan)
    weights = _chunked_weights(plan, q.detach(), k.detach(), lse) if return_weights else None
    return AttentionResult(out, weights)


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
            m = take(take(self.mask, -2, i0, i1), -1, j0, j1)
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
    return s if m is None else s.add_(mask_bias(m, s))


class _ChunkedAttentionFn(torch.autograd.Function):
    """Exact attention by the online softmax; the backward recomputes scores chunk by chunk."""

    @staticmethod
    def forward(ctx, q, k, v, plan: _ChunkPlan):
        out = q.new_empty(q.shape[:-1] + (v.shape[-1],))  # (..., T, Dv)
        lse = q.new_empty(q.shape[:-1])  # (..., T)
        for i0, i1 in plan.chunks(plan.T, plan.q_chunk):
            qi = q[..., i0:i1, :] * plan.scale  # (..., bq, Dh)
            m = qi.new_full(qi.shape[:-1] + (1,), -math.inf)  # (..., bq, 1) running maximum
            l = qi.new_zeros(qi.shape[:-1] + (1,))  # (..., bq, 1) running sum of exp  # noqa: E741
            acc = qi.new_zeros(qi.shape[:-1] + (v.shape[-1],))  # (..., bq, Dv) running output
            for j0, j1 in plan.key_chunks(i0, i1):
                s = _chunk_scores(plan, qi, k, i0, i1, j0, j1)  # (..., bq, bk)
                m_new = torch.maximum(m, s.amax(-1, keepdim=True))  # (..., bq, 1)
                # A row with no allowed key yet has m_new = -inf; subtract 0 instead so that
                # exp(-inf - 0) = 0 rather than exp(-inf + inf) = NaN.
                m_safe = m_new.masked_fill(m_new == -math.inf, 0.0)
                p = s.sub_(m_safe).exp_()  # (..., bq, bk) unnormalised weights
                alpha = torch.exp(m - m_safe)  # (..., bq, 1) rescales what came before
                l = l * alpha + p.sum(-1, keepdim=True)  # noqa: E741
                if plan.dropout_p > 0.0:
                    p = p * dropout_scale(plan.block_seed(i0, j0), p.shape, plan.dropout_p, p)
                acc = acc * alpha + p @ v[..., j0:j1, :]  # (..., bq, bk) x (..., bk, Dv) -> (..., bq, Dv)
                m = m_new
            empty = l == 0  # (..., bq, 1) rows that had nothing to attend to
            out[..., i0:i1, :] = (acc / l.masked_fill(empty, 1.0)).masked_fill_(empty, 0.0)
            lse[..., i0:i1] = (m + l.log()).masked_fill_(empty, math.inf).squeeze(-1)
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
                    drop = dropout_scale(plan.block_seed(i0, j0), p.shape, plan.dropout_p, p)
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
