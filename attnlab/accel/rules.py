"""Which attention kernel ``backend="auto"`` takes where the choice is only about speed."""

from __future__ import annotations

import torch

Tensor = torch.Tensor

__all__ = ["prefer_math", "MATH_MAX_KEYS_LOW_PRECISION"]

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
