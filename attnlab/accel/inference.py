"""Inference-time shortcuts for ``F.linear`` and a key/value cache's reorder: same numbers, less time per token.

Decoding one token multiplies each weight matrix by a single row, so its cost is reading the
weights from memory. :func:`linear` sends those few-row products to kernels that use every thread;
:func:`reorder_rows` copies only the positions of a cache decoded so far. Training (autograd on)
always takes the plain PyTorch call.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import kernels, rules

Tensor = torch.Tensor

__all__ = [
    "linear",
    "reorder_rows",
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
