"""attnlab.positional against the papers' formulas, computed here independently."""

from __future__ import annotations

import cmath
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.positional import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    sinusoidal_encoding,
)

SETTINGS = settings(max_examples=25, deadline=None)


def paper_pe(pos: int, j: int, d_model: int) -> float:
    """Vaswani et al. 2017, §3.5: PE(pos, 2i) = sin(pos/10000^(2i/d)), PE(pos, 2i+1) = cos(...)."""
    i = j // 2
    angle = pos / 10000 ** (2 * i / d_model)
    return math.sin(angle) if j % 2 == 0 else math.cos(angle)


@pytest.mark.parametrize("d_model", [4, 16, 512])
@pytest.mark.parametrize("pos", [0, 1, 2, 7, 50, 1023])
def test_sinusoidal_matches_paper_at_chosen_positions(pos, d_model):
    table = sinusoidal_encoding(1024, d_model)
    assert table.shape == (1024, d_model) and table.dtype == torch.float32
    for j in sorted({0, 1, 2, 3, d_model // 2, d_model // 2 + 1, d_model - 2, d_model - 1}):
        assert table[pos, j].item() == pytest.approx(paper_pe(pos, j, d_model), abs=1e-6), (pos, j)


@given(pos=st.integers(0, 5000), j=st.integers(0, 63), offset=st.integers(0, 100))
@SETTINGS
def test_sinusoidal_matches_paper_hypothesis(pos, j, offset):
    row = sinusoidal_encoding(1, 64, offset=pos)[0]
    assert row[j].item() == pytest.approx(paper_pe(pos, j, 64), abs=1e-6)
    # The table is the same whether or not it starts at an offset.
    torch.testing.assert_close(sinusoidal_encoding(5, 64, offset=offset), sinusoidal_encoding(offset + 5, 64)[offset:])


def test_sinusoidal_relative_position_is_a_linear_map():
    """§3.5's reason for the choice: PE(pos + k) is a fixed rotation of PE(pos) for each frequency."""
    D, k = 8, 3
    pe = sinusoidal_encoding(20, D).double()
    for i in range(D // 2):
        w = 1 / 10000 ** (2 * i / D)
        rot = torch.tensor(
            [[math.cos(k * w), -math.sin(k * w)], [math.sin(k * w), math.cos(k * w)]], dtype=torch.float64
        )
        pair = pe[:, 2 * i : 2 * i + 2]  # (T, 2) = (sin a, cos a); times rot = (sin(a + kw), cos(a + kw))
        torch.testing.assert_close(pair[:-k] @ rot, pair[k:], atol=1e-6, rtol=0)


def test_sinusoidal_module_adds_table_and_respects_offset():
    pe = SinusoidalPositionalEncoding(8, max_len=32)
    assert list(pe.parameters()) == []
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(pe(x), x + sinusoidal_encoding(5, 8))
    torch.testing.assert_close(pe(x, offset=7), x + sinusoidal_encoding(12, 8)[7:])
    torch.testing.assert_close(pe(x.double()), x.double() + sinusoidal_encoding(5, 8).double())
    with pytest.raises(ValueError, match="exceeds max_len=32"):
        pe(x, offset=30)
    with pytest.raises(ValueError, match="even width"):
        sinusoidal_encoding(4, 7)


def test_learned_positional_embedding():
    torch.manual_seed(0)
    emb = LearnedPositionalEmbedding(10, 4)
    x = torch.randn(3, 4, 4)
    out = emb(x, offset=2)
    torch.testing.assert_close(out, x + emb.embedding.weight[2:6])
    out.sum().backward()
    grad = emb.embedding.weight.grad
    assert bool((grad[2:6] == 3).all()) and bool((grad[:2] == 0).all()) and bool((grad[6:] == 0).all())
    with pytest.raises(ValueError, match="exceeds max_len=10"):
        emb(torch.randn(1, 11, 4))


def rope_reference(x: torch.Tensor, positions: list[int], base: float = 10000.0) -> torch.Tensor:
    """Su et al. 2021 §3.4 as complex multiplication: (x_2i + i·x_2i+1) · e^{i·m·θ_i}, θ_i = base^(-2i/d)."""
    _, Dh = x.shape
    out = torch.empty_like(x, dtype=torch.float64)
    for t, m in enumerate(positions):
        for i in range(Dh // 2):
            z = complex(x[t, 2 * i].item(), x[t, 2 * i + 1].item()) * cmath.exp(1j * m * base ** (-2 * i / Dh))
            out[t, 2 * i], out[t, 2 * i + 1] = z.real, z.imag
    return out


def test_rotary_matches_complex_reference():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(6, 8, generator=gen, dtype=torch.float64)
    rope = RotaryEmbedding(8)
    torch.testing.assert_close(rope(x), rope_reference(x, list(range(6))), atol=1e-5, rtol=0)
    torch.testing.assert_close(rope(x, offset=40), rope_reference(x, list(range(40, 46))), atol=1e-5, rtol=0)
    xb = x.expand(2, 3, 6, 8)  # (B, H, T, Dh): any leading dims
    torch.testing.assert_close(RotaryEmbedding(8)(xb), rope(x).expand(2, 3, 6, 8))


@given(m=st.integers(0, 300), n=st.integers(0, 300), shift=st.integers(0, 300), seed=st.integers(0, 2**16))
@SETTINGS
def test_rotary_dot_product_depends_only_on_offset(m, n, shift, seed):
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 16, generator=gen, dtype=torch.float64).unbind(0)
    rope = RotaryEmbedding(16)

    def score(pq: int, pk: int) -> float:
        rq = rope(q[None], offset=pq)[0]
        rk = rope(k[None], offset=pk)[0]
        return float(rq @ rk)

    # The rotary angles are computed in float32, so allow float32-sized error at positions ~600.
    assert score(m, n) == pytest.approx(score(m + shift, n + shift), abs=2e-3)
    if m == n:  # same position: the rotation cancels entirely
        assert score(m, n) == pytest.approx(float(q @ k), abs=2e-3)


@given(T=st.integers(1, 8), offset=st.integers(0, 1000), seed=st.integers(0, 2**16))
@SETTINGS
def test_rotary_preserves_norms(T, offset, seed):
    x = torch.randn(2, T, 12, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    y = RotaryEmbedding(12)(x, offset=offset)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))
    # Each channel pair keeps its own norm: it is a rotation within the pair.
    torch.testing.assert_close(y.view(2, T, 6, 2).norm(dim=-1), x.view(2, T, 6, 2).norm(dim=-1))


def test_rotary_bad_width():
    with pytest.raises(ValueError, match="even head width"):
        RotaryEmbedding(7)
