"""Inference-time shortcuts for ``nn.Linear`` and ``nn.Dropout``: same numbers, less time per token.

Decoding one token multiplies each weight matrix by a single row, so its cost is reading the
weights from memory, plus the Python around a few dozen small calls. :func:`linear` sends those
few-row products to kernels that use every thread; :func:`apply_dropout` skips a dropout call
that would change nothing. Training (autograd on) always takes the plain PyTorch call.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from . import kernels, rules

Tensor = torch.Tensor

__all__ = [
    "linear",
    "stacked_linear",
    "attend_one_query",
    "reorder_rows",
    "Linear",
    "apply_dropout",
    "KERNEL_MAX_ROWS",
    "KERNEL_MAX_ROWS_ONE_THREAD",
    "ONEDNN_MAX_ROWS",
    "ONEDNN_MIN_WEIGHT",
]


def _onednn_linear_available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


_ONEDNN_LINEAR = _onednn_linear_available()

#: Most rows (product of the leading dims) for which :func:`linear` takes oneDNN at inference time.
#: Past them (beam 4 over a batch of 32 sentences has 128 rows) MKL's blocked product through
#: ``F.linear`` is the faster again (docs/measured.md, the AVX-512 BF16 Xeon).
ONEDNN_MAX_ROWS = rules.DEFAULTS.onednn_max_rows  # (the default; rules.lines() has the line in force)

#: Most rows for which :func:`linear` takes attnlab's kernel (:func:`attnlab.accel.kernels.matvec`),
#: on more than one thread and on one: beam 4 over one sentence has 4 rows. Beyond them MKL's
#: blocked product is the faster (docs/foundation.md has the measurements).
KERNEL_MAX_ROWS = rules.DEFAULTS.kernel_max_rows  # (the defaults; rules.lines() has the lines in force)
KERNEL_MAX_ROWS_ONE_THREAD = rules.DEFAULTS.kernel_max_rows_one_thread

#: Fewest weight numbers for which :func:`linear` takes oneDNN for 2 … :data:`ONEDNN_MAX_ROWS`
#: rows. Below it the weights stay in the caches and the time is the call's own, where MKL's is
#: the cheaper; from it on (the vocabulary projection of a translator, a 1024 × 1024 layer) the
#: product is a stream through memory that oneDNN splits over the threads better than MKL.
ONEDNN_MIN_WEIGHT = rules.DEFAULTS.onednn_min_weight  # (the default, as above)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x Wᵀ + b``, the same numbers as :func:`torch.nn.functional.linear` (the reference).

    Decoding one token multiplies each weight matrix by a single row, so the cost is reading the
    weights from memory. On a CPU, fp32 ``F.linear`` hands that product to MKL's
    matrix-vector routine, which uses one thread for these sizes. So without autograd (nothing
    to train through), on a CPU and in fp32:

    - one row, or a few (:data:`KERNEL_MAX_ROWS`: the hypotheses of a beam), go to attnlab's own
      kernel (:func:`attnlab.accel.kernels.matvec`, compiled on first use), which streams the
      weights once on all of torch's threads;
    - one row where the kernel could not be built, and up to :data:`ONEDNN_MAX_ROWS` rows (beam
      search, a short prompt) times a weight of at least :data:`ONEDNN_MIN_WEIGHT` numbers on
      more than one thread, go to oneDNN's inner product (the kernel ``torch.compile`` uses on
      CPUs), which also splits the work over the threads; on one thread, or for a smaller
      weight, MKL's call costs less than oneDNN's;
    - everything else, training included, is ``F.linear``.

    Every path is tested against ``F.linear``; docs/foundation.md has the measured times.

    Shape:
        x ``(..., in)``, weight ``(out, in)``, bias ``(out,)`` → ``(..., out)``
    """
    table = rules.lines(measured=False)
    if (
        x.is_cpu
        and x.dtype == weight.dtype == torch.float32
        and not torch.is_grad_enabled()
        and 0 < x.numel() <= table.onednn_max_rows * x.shape[-1]
        and weight.shape[-1] == x.shape[-1]  # else F.linear names the mismatch (the kernel would read past W)
    ):
        if (
            x.numel()
            <= (table.kernel_max_rows if torch.get_num_threads() > 1 else table.kernel_max_rows_one_thread)
            * x.shape[-1]
            and weight.is_cpu
            and weight.dim() == 2
            and weight.is_contiguous()
            and (
                bias is None
                or (
                    bias.is_cpu
                    and bias.dtype == torch.float32
                    and bias.is_contiguous()
                    and bias.numel() == weight.shape[0]
                )
            )
        ):
            y = kernels.matvec(x, weight, bias)
            if y is not None:
                return y
        if _ONEDNN_LINEAR and (
            x.numel() == x.shape[-1] or (weight.numel() >= table.onednn_min_weight and torch.get_num_threads() > 1)
        ):
            return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
    return F.linear(x, weight, bias)


def stacked_linear(x: Tensor, weights: tuple[Tensor, ...], biases: tuple[Tensor, ...] | None = None) -> Tensor:
    """``torch.cat([linear(x, w, b) for w, b in zip(weights, biases)], dim=-1)`` (the reference):
    several weight matrices of one shape applied to the same input, outputs side by side.

    Decoding projects the new position to its queries, keys and values. For the rows that
    :func:`linear` gives to attnlab's kernel (one, or a few: :data:`KERNEL_MAX_ROWS`), in fp32
    on a CPU without autograd, the three products are one call of the kernel
    (:func:`attnlab.accel.kernels.matvec_many`): one pass of the threads over the three matrices,
    with the numbers of :func:`linear`'s kernel. Stacking the weights into one matrix would also
    give one product, but copies them at every call or keeps a second copy. Everything else is
    the reference, product by product.

    Shape:
        x ``(..., in)``, weights ``count × (out, in)``, biases ``count × (out,)`` → ``(..., count·out)``
    """
    shape = weights[0].shape  # (out, in), the same for every matrix
    table = rules.lines(measured=False)
    if (
        x.shape[-1] == shape[-1] > 0
        and 0
        < x.numel()
        <= (table.kernel_max_rows if torch.get_num_threads() > 1 else table.kernel_max_rows_one_thread) * shape[-1]
        and x.is_cpu
        and x.dtype == torch.float32
        and not torch.is_grad_enabled()
        and all(w.shape == shape and w.dtype == torch.float32 and w.is_cpu and w.is_contiguous() for w in weights)
        and (
            biases is None
            or all(
                b.numel() == shape[0] and b.dtype == torch.float32 and b.is_cpu and b.is_contiguous() for b in biases
            )
        )
    ):
        y = kernels.matvec_many(x, weights, biases)
        if y is not None:
            return y
    if biases is None:
        biases = (None,) * len(weights)
    return torch.cat([linear(x, w, b) for w, b in zip(weights, biases)], dim=-1)  # (..., count·out)


def attend_one_query(
    q: Tensor, k: Tensor, v: Tensor, scale: float, groups: int = 1, lengths: Tensor | None = None
) -> Tensor | None:
    """``F.scaled_dot_product_attention(q, k, v, scale=scale)`` (the reference, up to rounding)
    for a single query per (batch, head) and no mask, computed by attnlab's kernel
    (:func:`attnlab.accel.kernels.attend_one`); ``None`` where the kernel does not apply (not
    fp32 on a CPU, autograd wanted, another layout, or the kernel not built), and the caller
    takes its usual attention.

    That is one decoding step over a key/value cache: PyTorch's fused kernel is built for blocks
    of queries, and for a single one its fixed cost per call exceeds the arithmetic several times
    (docs/gpt-bert.md has the measurements). Its output is laid out so that merging the heads is a
    view (see :func:`attnlab.accel.kernels.attend_one`).

    With ``groups`` the queries come in groups of that many consecutive rows that share one row
    of ``k`` and ``v`` (the hypotheses of a sentence in beam search, attending to its source);
    with ``lengths`` (int64, one per row of ``k``, each in ``0 … S``) a row sees only its first
    ``lengths[b]`` keys (a right-padded source), and a row that sees none gives zeros. The
    reference is then ``F.scaled_dot_product_attention`` over ``k`` and ``v`` repeated
    ``groups`` times, with the mask ``position < length``.

    Shape:
        q ``(B, H, 1, Dh)``, k and v ``(B / groups, H, S, Dh)``, lengths ``(B / groups,)`` →
        ``(B, H, 1, Dh)``
    """
    if (
        q.dim() == 4
        and q.shape[2] == 1
        and q.dtype == k.dtype == v.dtype == torch.float32
        and q.is_cpu
        and k.is_cpu
        and v.is_cpu
        and k.shape == v.shape
        and groups >= 1
        and k.shape[0] * groups == q.shape[0]
        and k.shape[1] == q.shape[1]
        and k.shape[3] == q.shape[3]
        and k.shape[2] > 0
        and q.stride(3) == 1
        and k.stride() == v.stride()
        and k.stride()[2:] == (k.shape[3], 1)  # each cached row contiguous (a KVCache's are)
        and not (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad))
        and (
            lengths is None
            or (
                lengths.dtype == torch.int64
                and lengths.is_cpu
                and lengths.shape == k.shape[:1]
                and lengths.is_contiguous()
            )
        )
    ):
        return kernels.attend_one(q, k, v, scale, groups, lengths)
    return None


def reorder_rows(x: Tensor, index: Tensor, filled: int) -> Tensor:
    """``x.index_select(0, index)`` (the reference) for a key/value cache's storage, of which only
    the first ``filled`` positions are read: beam search moves its hypotheses between rows after
    every step, and the whole capacity is up to twice what has been decoded. Without autograd on a
    CPU attnlab's kernel copies just those positions, on all of torch's threads
    (:func:`attnlab.accel.kernels.gather_filled`); the result's later positions are then unset.

    Shape:
        x ``(B, H, capacity, Dh)``, index ``(B',)`` → ``(B', H, capacity, Dh)``
    """
    if not torch.is_grad_enabled() or not x.requires_grad:
        y = kernels.gather_filled(x, index, filled)
        if y is not None:
            return y
    return x.index_select(0, index)


class Linear(nn.Linear):
    """:class:`torch.nn.Linear` computed by :func:`linear` (attnlab's kernel or oneDNN for a few
    rows at inference); same parameters, initialisation and state-dict names.

    Shape:
        x ``(..., in_features)`` → ``(..., out_features)``
    """

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)


def apply_dropout(module: nn.Dropout, x: Tensor) -> Tensor:
    """``module(x)``, without the call when it would return ``x`` unchanged (evaluation, or
    ``p = 0``): decoding one token passes ~20 dropouts, and each module call costs Python time.

    Shape:
        x any shape → the same shape
    """
    return module(x) if module.training and module.p > 0 else x
