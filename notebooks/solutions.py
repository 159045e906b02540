"""Model solutions of the notebooks' exercises (練習問題), and the test each answer must pass.

Try the exercise in its notebook first: :func:`helpers.check` runs the test in :data:`TESTS` on
your function. The solutions are here, out of sight, and each notebook's collapsed "解答例" cell
prints the one it needs. ``tests/test_notebook_exercises.py`` checks every solution against its
test, and that the tests reject typical wrong answers (the multi-head reshape without
``transpose(1, 2)`` among them).

Shape letters: ``B`` batch, ``H`` heads, ``T`` queries, ``S`` keys, ``D`` width, ``Dh`` head width.
"""

from __future__ import annotations

import math

import torch

Tensor = torch.Tensor


# --------------------------------------------------------------------------------------------
# 01 — the formula: attention with a boolean mask, by hand
# --------------------------------------------------------------------------------------------


def masked_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    """``softmax(q·kᵀ/√d_k)·v`` where only the keys with ``mask == True`` count; a query that may
    attend to nothing gets a zero vector (attnlab's convention), not NaN.

    Shape:
        q ``(..., T, Dh)``, k ``(..., S, Dh)``, v ``(..., S, Dv)``, mask ``(T, S)`` boolean → ``(..., T, Dv)``
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, S)
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a row of -inf only: NaN -> 0
    return weights @ v  # (..., T, Dv)


def _test_masked_attention(fn) -> None:
    from attnlab import causal_mask, scaled_dot_product_attention

    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g, dtype=torch.float64) for _ in range(3))
    for mask in (causal_mask(5), torch.rand(5, 5, generator=g) > 0.5, torch.ones(5, 5, dtype=torch.bool)):
        mask[1] = False  # a query with nothing to attend to
        expected, _ = scaled_dot_product_attention(q, k, v, mask, backend="math")
        got = fn(q, k, v, mask)
        assert not torch.isnan(got).any(), "a query that may attend to nothing must give zeros, not NaN"
        torch.testing.assert_close(got, expected, msg=lambda m: "does not match attnlab: " + m)


# --------------------------------------------------------------------------------------------
# 02 — MiniLM: which head looks at the previous token?
# --------------------------------------------------------------------------------------------


def previous_token_score(weights: Tensor) -> Tensor:
    """For each head, the mean weight a token puts on the token just before it (positions 1…S−1).

    Shape:
        weights ``(H, S, S)`` → ``(H,)``
    """
    S = weights.shape[-1]
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).sum(-1) / (S - 1)  # (H, S-1) -> (H,)


def _test_previous_token_score(fn) -> None:
    S = 6
    previous = torch.zeros(S, S)
    previous[0, 0] = 1.0
    previous[torch.arange(1, S), torch.arange(S - 1)] = 1.0  # every token looks one back
    uniform = torch.full((S, S), 1.0 / S)
    itself = torch.eye(S)
    got = fn(torch.stack([previous, uniform, itself]))
    torch.testing.assert_close(got, torch.tensor([1.0, 1.0 / S, 0.0]))


# --------------------------------------------------------------------------------------------
# 03 — multi-head attention: splitting and merging heads
# --------------------------------------------------------------------------------------------


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """Cut the width into ``n_heads`` slices and put the heads before the positions.

    Shape:
        x ``(B, T, D)`` → ``(B, H, T, D/H)``
    """
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, T, H, Dh) -> (B, H, T, Dh)


def _test_split_heads(fn) -> None:
    B, T, H, Dh = 2, 5, 3, 4
    x = torch.arange(B * T * H * Dh, dtype=torch.float32).reshape(B, T, H * Dh)
    got = fn(x, H)
    assert tuple(got.shape) == (B, H, T, Dh), f"expected shape (B, H, T, Dh) = {(B, H, T, Dh)}, got {tuple(got.shape)}"
    for h in range(H):  # head h sees every position, through its own slice of the width
        torch.testing.assert_close(
            got[:, h], x[:, :, h * Dh : (h + 1) * Dh], msg=lambda m, h=h: f"head {h} is not its slice of x: {m}"
        )


# --------------------------------------------------------------------------------------------
# 04 — attention pooling
# --------------------------------------------------------------------------------------------


def attention_pool(states: Tensor, mask: Tensor, k_weight: Tensor, k_bias: Tensor, query: Tensor):
    """Attention pooling (Yang et al. 2016): score each state against one learned query, softmax
    over the real tokens, and return the weighted sum and the weights.

    ``score_i = query · tanh(W_k h_i + b)``; padding (``mask == False``) gets weight 0.

    Shape:
        states ``(B, S, D)``, mask ``(B, S)`` boolean, k_weight ``(D, D)``, k_bias ``(D,)``,
        query ``(D,)`` → pooled ``(B, D)``, weights ``(B, S)``
    """
    keys = torch.tanh(states @ k_weight.T + k_bias)  # (B, S, D)
    scores = keys @ query  # (B, S)
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # (B, S)
    pooled = (weights.unsqueeze(-1) * states).sum(1)  # (B, S, 1) * (B, S, D) -> (B, D)
    return pooled, weights


def _test_attention_pool(fn) -> None:
    from attnlab.models.classifier import AttentionPooling

    torch.manual_seed(0)
    pool = AttentionPooling(8)
    states = torch.randn(3, 6, 8)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2, [True] + [False] * 5])
    expected = pool(states, mask)
    pooled, weights = fn(states, mask, pool.k_proj.weight, pool.k_proj.bias, pool.query)
    torch.testing.assert_close(weights, expected.weights, msg=lambda m: "weights differ from AttentionPooling: " + m)
    torch.testing.assert_close(pooled, expected.pooled, msg=lambda m: "pooled vectors differ: " + m)


# --------------------------------------------------------------------------------------------
# 05 — cross-attention: a hard alignment from the soft one
# --------------------------------------------------------------------------------------------


def hard_alignment(weights: Tensor, src_tokens: list[str], tgt_tokens: list[str]) -> list[tuple[str, str]]:
    """Pair every target token with the source token it attends to most.

    Shape:
        weights ``(T, S)`` → ``T`` pairs ``(target token, source token)``
    """
    return [(t, src_tokens[int(j)]) for t, j in zip(tgt_tokens, weights.argmax(dim=-1))]


def _test_hard_alignment(fn) -> None:
    w = torch.tensor([[0.1, 0.8, 0.1], [0.7, 0.2, 0.1], [0.2, 0.5, 0.3]])  # rows: targets
    got = fn(w, ["three", "hundred", "</s>"], ["百", "三", "</s>"])
    assert list(got) == [("百", "hundred"), ("三", "three"), ("</s>", "hundred")], got


# --------------------------------------------------------------------------------------------
# 06 — variants: the sliding-window mask by hand
# --------------------------------------------------------------------------------------------


def window_mask(T: int, window: int) -> Tensor:
    """Causal local attention: query ``i`` may attend to keys ``i − window < j ≤ i``.

    Shape:
        → ``(T, T)`` boolean, ``True`` = may attend
    """
    i = torch.arange(T).unsqueeze(1)  # (T, 1)
    j = torch.arange(T).unsqueeze(0)  # (1, T)
    return (j <= i) & (j > i - window)


def _test_window_mask(fn) -> None:
    from attnlab import sliding_window_mask

    for T, window in ((6, 1), (6, 3), (10, 4), (5, 8)):
        got = fn(T, window)
        assert got.dtype == torch.bool, f"a mask is boolean (True = may attend), got {got.dtype}"
        assert torch.equal(got, sliding_window_mask(T, window=window)), f"T={T}, window={window}"


# --------------------------------------------------------------------------------------------
# 07 — the Transformer: sinusoidal positions
# --------------------------------------------------------------------------------------------


def sinusoidal_table(length: int, d_model: int) -> Tensor:
    """The positional code of "Attention Is All You Need" §3.5: even channels ``sin(pos/10000^(2i/D))``,
    odd channels ``cos`` of the same angle.

    Shape:
        → ``(length, D)``
    """
    pos = torch.arange(length, dtype=torch.float64).unsqueeze(1)  # (L, 1)
    freq = 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (D/2,)
    table = torch.zeros(length, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(pos / freq)
    table[:, 1::2] = torch.cos(pos / freq)
    return table.float()


def _test_sinusoidal_table(fn) -> None:
    from attnlab.positional import SinusoidalPositionalEncoding

    for length, d in ((7, 4), (50, 32)):
        expected = SinusoidalPositionalEncoding(d, max_len=length)(torch.zeros(1, length, d))[0]
        torch.testing.assert_close(fn(length, d), expected, msg=lambda m: "does not match attnlab's table: " + m)


# --------------------------------------------------------------------------------------------
# 08 — applications: where does one row of attention look?
# --------------------------------------------------------------------------------------------


def top_attended(weights: Tensor, tokens: list[str], k: int = 3) -> list[tuple[str, float]]:
    """The ``k`` tokens one attention row gives the most weight, with their weights, largest first.

    Shape:
        weights ``(S,)`` → ``min(k, S)`` pairs
    """
    values, index = weights.topk(min(k, weights.shape[-1]))
    return [(tokens[int(i)], float(v)) for v, i in zip(values, index)]


def _test_top_attended(fn) -> None:
    got = fn(torch.tensor([0.1, 0.5, 0.05, 0.35]), ["a", "b", "c", "d"], k=2)
    assert [t for t, _ in got] == ["b", "d"], got
    assert [round(w, 6) for _, w in got] == [0.5, 0.35], got
    assert len(fn(torch.tensor([1.0]), ["x"], k=3)) == 1


#: Exercise name → its test (called with the reader's function; raises on a wrong answer).
TESTS = {
    "masked_attention": _test_masked_attention,
    "previous_token_score": _test_previous_token_score,
    "split_heads": _test_split_heads,
    "attention_pool": _test_attention_pool,
    "hard_alignment": _test_hard_alignment,
    "window_mask": _test_window_mask,
    "sinusoidal_table": _test_sinusoidal_table,
    "top_attended": _test_top_attended,
}
