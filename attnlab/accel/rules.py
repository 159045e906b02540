"""Which kernel takes a piece of work where the choice is only about speed: the attention kernel of
``backend="auto"``, and the one-call decoding step or the step of tensor operations."""

from __future__ import annotations

import torch

Tensor = torch.Tensor

__all__ = [
    "prefer_math",
    "prefer_one_call_step",
    "MATH_MAX_KEYS_LOW_PRECISION",
    "ONE_CALL_STEP_MAX_ROWS",
    "ONE_CALL_STEP_MAX_ROWS_ONE_THREAD",
    "BLAS_MIN_ROWS",
    "BLAS_MIN_ROWS_LARGE",
    "BLAS_LARGE_WEIGHTS",
    "BLAS_MIN_ROWS_BF16",
]

#: Longest key length at which "auto" prefers the explicit matmuls for bf16/fp16 on a CPU.
MATH_MAX_KEYS_LOW_PRECISION = 512


def prefer_math(q: Tensor, k: Tensor) -> bool:
    """Whether "auto" should take the math path (explicit matmuls and softmax) rather than the
    fused ``torch.nn.functional.scaled_dot_product_attention``, although no weights were asked for.
    Both compute the same attention; this only picks the faster one.

    PyTorch's fused CPU kernel is slower in bf16 than in fp32 at short lengths, while the
    explicit matmuls run on the CPU's bf16 instructions, so for bf16/fp16 on a CPU with at most
    :data:`MATH_MAX_KEYS_LOW_PRECISION` keys the math path is faster, in training (forward and
    backward) and for a decoding query alike. In fp32 the fused kernel wins at every length, and
    past a few hundred keys the ``(T, S)`` weights the math path keeps for backward cost more
    memory than they save time. docs/foundation.md has the measurements;
    ``benchmarks/attention.py --crossover`` measures them again.

    Shape:
        q ``(..., T, Dh)``, k ``(..., S, Dh)``
    """
    return (
        q.device.type == "cpu"
        and q.dtype in (torch.bfloat16, torch.float16)
        and k.shape[-2] <= MATH_MAX_KEYS_LOW_PRECISION
    )


#: Most rows (sentences × beams) that a model's fp32 decoding step hands to attnlab's one-call C
#: step (:class:`attnlab.accel.kernels.DecoderStep`) on more than one thread, and on one, where the
#: step's products cannot go to a BLAS (:func:`attnlab.accel.kernels.blas`: PyTorch without MKL).
#: At a few rows a step is mostly the fixed cost of ~100 tensor operations, which the one call does
#: not pay; with more rows each weight matrix meets a real matrix product, where the BLAS that
#: PyTorch calls outruns the kernels' row-panel products, so the step of the same operations as
#: tensor calls (:mod:`attnlab.models.native`) takes over. With the BLAS the one call's own
#: products of many rows are the BLAS's (:data:`BLAS_MIN_ROWS`), and it is the faster at every row
#: count measured. docs/measured.md has the per-row measurements;
#: ``benchmarks/translate_throughput.py --step-rows`` takes them again.
ONE_CALL_STEP_MAX_ROWS = 48
ONE_CALL_STEP_MAX_ROWS_ONE_THREAD = 16


def prefer_one_call_step(rows: int, blas: bool) -> bool:
    """Whether an fp32 decoding step of ``rows`` rows should be attnlab's one C call rather than
    tensor operations: always where the call's products may go to the BLAS (``blas``), else up to
    :data:`ONE_CALL_STEP_MAX_ROWS`. Both compute the same step; this only picks the faster one."""
    if blas:
        return True
    limit = ONE_CALL_STEP_MAX_ROWS if torch.get_num_threads() > 1 else ONE_CALL_STEP_MAX_ROWS_ONE_THREAD
    return rows <= limit


#: Fewest rows at which a product inside attnlab's layer kernels (the one-call decoding step and
#: encoder, :mod:`attnlab.accel.kernels`) goes to the BLAS PyTorch uses (MKL's SGEMM, each thread
#: computing its share of the outputs) rather than the kernels' packed panels; for a matrix of
#: more than :data:`BLAS_LARGE_WEIGHTS` weights (a vocabulary projection) from
#: :data:`BLAS_MIN_ROWS_LARGE` rows. The panels stream each weight once for every few rows, which
#: is what a product of one row or a few costs anyway, and wins there, longest for a large matrix;
#: with more rows the BLAS's blocking for the caches and registers wins. docs/measured.md has the
#: measurements; ``benchmarks/translate_throughput.py --step-rows`` takes them again.
BLAS_MIN_ROWS = 2
BLAS_MIN_ROWS_LARGE = 16
BLAS_LARGE_WEIGHTS = 1 << 20

#: The same line for bf16 weights under ``avx512_bf16`` (the BLAS's bf16 product, which rounds the
#: rows to bf16 as the kernels' BF16 dot product does), for matrices of every size.
BLAS_MIN_ROWS_BF16 = 8
