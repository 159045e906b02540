"""Position information for attention, which by itself is blind to order.

Self-attention is permutation-equivariant: shuffle the tokens and the outputs shuffle the same
way. Word order therefore has to be put into the vectors. Three ways are here:

- :func:`sinusoidal_encoding` / :class:`SinusoidalPositionalEncoding` — fixed sines and cosines
  of geometrically spaced frequencies (Vaswani et al. 2017, §3.5), added to the embeddings;
- :class:`LearnedPositionalEmbedding` — one trained vector per position (GPT-2, BERT);
- :class:`RotaryEmbedding` — rotate each query/key pair of channels by an angle proportional to
  the position (Su et al. 2021, RoFormer), so that ``q·k`` depends on the positions only through
  their offset (and still on what q and k hold).

Shape letters: ``B`` batch, ``T`` length, ``D`` width, ``H`` heads, ``Dh`` head width.
"""

from __future__ import annotations

import torch
from torch import nn

Tensor = torch.Tensor

__all__ = [
    "sinusoidal_encoding",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "RotaryEmbedding",
    "apply_rotary",
]


def sinusoidal_encoding(length: int, d_model: int, *, base: float = 10000.0, offset: int = 0) -> Tensor:
    """The paper's table: ``PE(pos, 2i) = sin(pos / base^(2i/D))``, ``PE(pos, 2i+1) = cos(...)``.

    Shape:
        output: ``(length, D)`` for positions ``offset … offset + length - 1``
    """
    if d_model % 2:
        raise ValueError(f"sinusoidal encoding needs an even width, got d_model={d_model}")
    pos = torch.arange(offset, offset + length, dtype=torch.float64).unsqueeze(1)  # (T, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (D/2,)
    angle = pos / base ** (two_i / d_model)  # (T, D/2)
    pe = torch.empty(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.float()  # (T, D)


class SinusoidalPositionalEncoding(nn.Module):
    """Adds :func:`sinusoidal_encoding` to its input (no parameters).

    Shape:
        x ``(B, T, D)`` → ``(B, T, D)``; ``offset`` is the position of ``x[:, 0]`` (decoding
        with a cache feeds one position at a time)
    """

    def __init__(self, d_model: int, max_len: int = 4096) -> None:
        super().__init__()
        self.register_buffer("table", sinusoidal_encoding(max_len, d_model), persistent=False)  # (L, D)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        T = x.shape[1]
        if offset + T > self.table.shape[0]:
            raise ValueError(f"sequence of {offset + T} positions exceeds max_len={self.table.shape[0]}")
        return x + self.table[offset : offset + T].to(x.dtype)  # (B, T, D)


class LearnedPositionalEmbedding(nn.Module):
    """One trained vector per position, added to the token embeddings.

    Shape:
        x ``(B, T, D)`` → ``(B, T, D)``
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        T = x.shape[1]
        if offset + T > self.embedding.num_embeddings:
            raise ValueError(f"sequence of {offset + T} positions exceeds max_len={self.embedding.num_embeddings}")
        pos = torch.arange(offset, offset + T, device=x.device)  # (T,)
        return x + self.embedding(pos)  # (B, T, D)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate channel pairs ``(x[2i], x[2i+1])`` by the angles whose cos/sin are given.

    Shape:
        x ``(..., T, Dh)``; cos, sin ``(T, Dh/2)`` → ``(..., T, Dh)``
    """
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (..., T, Dh/2) each
    rot_even = x_even * cos - x_odd * sin
    rot_odd = x_even * sin + x_odd * cos
    return torch.stack((rot_even, rot_odd), dim=-1).flatten(-2)  # (..., T, Dh/2, 2) -> (..., T, Dh)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (Su et al. 2021, §3.4).

    Channel pair ``i`` of a query/key at position ``m`` is rotated by ``m·θ_i`` with
    ``θ_i = base^(-2i/Dh)``. Rotations compose, so ``⟨R_m q, R_n k⟩ = ⟨q, R_{n-m} k⟩``: the score
    depends on the positions only through the offset ``n - m`` (and still on q and k). Applied to
    queries and keys, never to values.

    Shape:
        x ``(..., T, Dh)`` (queries or keys) → same; ``offset`` is the position of ``x[..., 0, :]``
    """

    def __init__(self, head_dim: int, base: float = 10000.0) -> None:
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"rotary embedding needs an even head width, got {head_dim}")
        inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # (Dh/2,)
        self.register_buffer("inv_freq", inv_freq.float(), persistent=False)

    def angles(self, length: int, offset: int = 0, device=None) -> tuple[Tensor, Tensor]:
        pos = torch.arange(offset, offset + length, device=device or self.inv_freq.device, dtype=torch.float32)
        angle = torch.outer(pos, self.inv_freq)  # (T, Dh/2)
        return angle.cos(), angle.sin()

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        cos, sin = self.angles(x.shape[-2], offset, x.device)
        return apply_rotary(x, cos.to(x.dtype), sin.to(x.dtype))
