"""§6 Positional encoding: why self-attention needs positions (the same words in two orders,
without and with positions, and with a causal mask: :func:`word_order_view`), the sinusoid table
and how alike its positions are (:func:`positions`), and rotary position embedding (RoPE) scores
(:func:`rope_scores`). All three are computed in the page (``static/engine/lessonmath.js``); the
functions here are their reference.

Shape letters: ``T`` positions (words), ``D`` width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ...positional import apply_rotary, sinusoidal_encoding
from .common import (
    MAX_SEED,
    LessonModels,
    Seed,
    check_whole,
    rounded,
    seeded_attention,
    typed_words,
    word_vector,
)


def _check_range(name: str, x: object, lo: int, hi: int, even_why: str | None = None) -> None:
    """The page's one-line messages (``checkRange`` in ``static/engine/lessonmath.js``)."""
    check_whole(name, x, lo, hi)
    if even_why and int(x) % 2:
        raise ValueError(f"{name} must be even ({even_why}), got {int(x)}")


@dataclass(frozen=True)
class Positions:
    """The sinusoid table and how alike its positions are (the page computes the same in JavaScript)."""

    length: int  # positions, T (2 … 64)
    d_model: int  # D, even (4 … 128)
    table: list[list[float]]  # (T, D) sinusoidal_encoding(T, D), rounded to 5 decimals
    similarity: list[list[float]]  # (T, T) cosine similarity of the table's rows, rounded to 5 decimals


def positions(length: int = 16, d_model: int = 32) -> Positions:
    """The sinusoid table and how alike two positions' vectors are.

    The reference for the page's ``positions`` (``static/engine/lessonmath.js``).

    Shape:
        table ``(T, D)``; similarity ``(T, T)``
    """
    _check_range("length", length, 2, 64)
    _check_range("d_model", d_model, 4, 128, "sines and cosines come in pairs")
    T, D = int(length), int(d_model)
    pe = sinusoidal_encoding(T, D).double()  # (T, D)
    unit = pe / pe.norm(dim=1, keepdim=True)  # (T, D)
    similarity = unit @ unit.T  # (T, T)
    return Positions(length=T, d_model=D, table=rounded(pe, 5), similarity=rounded(similarity, 5))


@dataclass(frozen=True)
class Rope:
    """One query and one key at every pair of positions (the page computes the same in JavaScript)."""

    length: int  # positions, T (2 … 32)
    d_model: int  # D, the width of q and k (even, 2 … 64)
    seed: int  # draws q and k
    q: list[float]  # (D,) the query, drawn from seed and rounded to 2 decimals
    k: list[float]  # (D,) the key
    plain: float  # q·k/√D without any rotation, rounded to 6 decimals
    scores: list[list[float]]  # (T, T) [m][n] = (R_m q)·(R_n k)/√D, rounded to 5 decimals


def rope_scores(length: int = 12, d_model: int = 8, seed: int = 0) -> Rope:
    """One query and one key placed at every pair of positions with rotary position embedding.

    ``(R_m q)·(R_n k) = q·(R_{n−m} k)``: the score depends on the positions only through the
    offset ``n − m`` (constant along each diagonal), and on what ``q`` and ``k`` hold (another
    seed, another pattern; the main diagonal is the unrotated ``q·k/√D``).

    The reference for the page's ``ropeScores`` (``static/engine/lessonmath.js``). The rotation is
    :func:`attnlab.positional.apply_rotary` with :class:`RotaryEmbedding`'s angles ``m·θ_i``,
    ``θ_i = base^(-2i/D)``, computed in float64 here (the module keeps them in float32 for the
    models): the page's JavaScript computes in float64, and the rounded scores must agree digit
    for digit.

    Shape:
        q, k ``(D,)``; scores ``(T, T)``, ``[m][n]``: query at position m, key at position n
    """
    _check_range("length", length, 2, 32)
    _check_range("d_model", d_model, 2, 64, "RoPE turns pairs of components")
    _check_range("seed", seed, 0, MAX_SEED)
    T, D = int(length), int(d_model)
    g = torch.Generator().manual_seed(int(seed))
    q, k = torch.randn(2, D, generator=g, dtype=torch.float64).round(decimals=2)  # (D,) each
    theta = ROPE_BASE ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)  # (D/2,)
    angle = torch.outer(torch.arange(T, dtype=torch.float64), theta)  # (T, D/2): position m · θ_i
    rq = apply_rotary(q.expand(T, D), angle.cos(), angle.sin())  # (T, D): q placed at positions 0 … T-1
    rk = apply_rotary(k.expand(T, D), angle.cos(), angle.sin())  # (T, D)
    scores = (rq @ rk.T) / math.sqrt(D)  # (T, T): [m, n] = query at m, key at n
    return Rope(
        length=T,
        d_model=D,
        seed=int(seed),
        q=q.tolist(),
        k=k.tolist(),
        plain=rounded(q @ k / math.sqrt(D), 6),
        scores=rounded(scores, 5),
    )


ROPE_BASE = 10000.0  # RotaryEmbedding's default base


class WordOrderRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    a: str = Field(
        "猫 が 犬 を 追う", min_length=1, max_length=300, strict=True, description="words separated by spaces"
    )
    b: str = Field(
        "犬 が 猫 を 追う", min_length=1, max_length=300, strict=True, description="the same words reordered"
    )
    d_model: int = Field(16, ge=4, le=64, strict=True, description="D, even")
    seed: Seed = 0

    @model_validator(mode="after")
    def _even(self) -> WordOrderRequest:
        if self.d_model % 2:
            raise ValueError(f"d_model must be even, got {self.d_model}")
        return self


class OrderCase(BaseModel):
    out_a: list[list[float]] = Field(description="(T, D) self-attention outputs of sentence a")
    out_b: list[list[float]]
    diff: list[float] = Field(description="per word of a: |out_a − out_b of the same word|")
    sentence_diff: float = Field(description="|mean of out_a − mean of out_b|: the sentence vectors")


class WordOrderResponse(BaseModel):
    tokens_a: list[str]
    tokens_b: list[str]
    match: list[int] = Field(description="for each word of a, its position in b")
    without_positions: OrderCase
    with_positions: OrderCase
    causal_without_positions: OrderCase = Field(
        description="no positions, but a causal mask: each word sees only itself and the words before it"
    )


@torch.no_grad()
def word_order(req: WordOrderRequest) -> WordOrderResponse:
    """Self-attention over two orderings of the same words: without positions, with sinusoidal
    positions, and without positions but with a causal mask.

    Unmasked and without positions, the outputs are the same vectors, permuted (self-attention is
    permutation-equivariant). With positions added to the word vectors they differ. A causal mask
    breaks the symmetry too: a word's output then depends on which words come before it (as a set,
    in this one layer), so it changes unless that set is the same in both sentences.

    Shape:
        ``T`` words; per case out_a, out_b ``(T, D)``, diff ``(T,)``
    """
    a, b = typed_words(req.a, "the first sentence", 2), typed_words(req.b, "the second sentence", 2)
    if sorted(a) != sorted(b):
        raise ValueError("the second sentence must use exactly the words of the first, in another order")
    match, used = [], set()
    for w in a:
        j = next(j for j, v in enumerate(b) if v == w and j not in used)
        used.add(j)
        match.append(j)
    D, T = req.d_model, len(a)
    mha = seeded_attention(D, 2, req.seed)
    xa = torch.stack([word_vector(w, D, req.seed) for w in a])  # (T, D)
    xb = torch.stack([word_vector(w, D, req.seed) for w in b])  # (T, D)
    pe = sinusoidal_encoding(T, D).double()  # (T, D)
    cases = {}
    for name, add, causal in (
        ("without_positions", 0.0, False),
        ("with_positions", 1.0, False),
        ("causal_without_positions", 0.0, True),
    ):
        oa = mha((xa + add * pe).unsqueeze(0), is_causal=causal, need_weights=True).output[0]  # (T, D)
        ob = mha((xb + add * pe).unsqueeze(0), is_causal=causal, need_weights=True).output[0]  # (T, D)
        diff = (oa - ob[match]).norm(dim=1)  # (T,): each word against itself in the other sentence
        cases[name] = OrderCase(
            out_a=oa.tolist(),
            out_b=ob.tolist(),
            diff=diff.tolist(),
            sentence_diff=float((oa.mean(0) - ob.mean(0)).norm()),
        )
    return WordOrderResponse(tokens_a=a, tokens_b=b, match=match, **cases)


#: The longest sentence the word-order widget takes (characters).
MAX_ORDER_CHARS = 300


def check_word_order(a: object, b: object, d_model: object, seed: object) -> None:
    """Raise ``ValueError`` with the page's one-line message for settings the widget cannot show.

    The page's JavaScript (``static/engine/lessonmath.js``, ``checkWordOrder``) makes the same
    checks in the same order with the same messages; tests/web/lesson/test_lessonmath_parity.py holds them
    equal.

    Shape:
        no tensors
    """
    for what, text in (("the first sentence", a), ("the second sentence", b)):
        if not isinstance(text, str) or not 1 <= len(text) <= MAX_ORDER_CHARS:
            raise ValueError(f"{what} must be text of 1 to {MAX_ORDER_CHARS} characters")
    _check_range("d_model", d_model, 4, 64, "sines and cosines come in pairs")
    _check_range("seed", seed, 0, MAX_SEED)


def word_order_view(
    a: str = "猫 が 犬 を 追う", b: str = "犬 が 猫 を 追う", d_model: int = 16, seed: int = 0
) -> WordOrderResponse:
    """The word-order widget's numbers (:func:`word_order`): the reference for the page's
    ``wordOrder`` (``static/engine/lessonmath.js``), which computes them in the page.

    Shape:
        ``T`` words; per case out_a, out_b ``(T, D)``, diff ``(T,)``
    """
    check_word_order(a, b, d_model, seed)
    return word_order(WordOrderRequest(a=a, b=b, d_model=int(d_model), seed=int(seed)))


def add_routes(router: APIRouter, models: LessonModels, gate) -> None:
    """§6's endpoints: none any more (its widgets compute in the page, lessonmath.js)."""
