"""§6 Positional encoding: why self-attention needs positions (the same words in two orders,
without and with positions, and with a causal mask), the sinusoid table and how alike its
positions are, and rotary position embedding (RoPE) scores.

Shape letters: ``T`` positions (words), ``D`` width.
"""

from __future__ import annotations

import math

import torch
from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ...positional import RotaryEmbedding, sinusoidal_encoding
from .common import (
    SMALL,
    LessonModels,
    Seed,
    rounded,
    seeded_attention,
    typed_words,
    word_vector,
)


class PositionsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    length: int = Field(16, ge=2, le=64, strict=True, description="positions, T")
    d_model: int = Field(32, ge=4, le=128, strict=True, description="D, even")

    @model_validator(mode="after")
    def _even(self) -> PositionsRequest:
        if self.d_model % 2:
            raise ValueError(f"d_model must be even (sines and cosines come in pairs), got {self.d_model}")
        return self


class PositionsResponse(BaseModel):
    length: int
    d_model: int
    table: list[list[float]] = Field(description="(T, D) sinusoidal_encoding(T, D)")
    similarity: list[list[float]] = Field(description="(T, T) cosine similarity of the table's rows")


def positions(req: PositionsRequest) -> PositionsResponse:
    """The sinusoid table and how alike two positions' vectors are.

    Shape:
        table ``(T, D)``; similarity ``(T, T)``
    """
    T, D = req.length, req.d_model
    pe = sinusoidal_encoding(T, D).double()  # (T, D)
    unit = pe / pe.norm(dim=1, keepdim=True)  # (T, D)
    similarity = unit @ unit.T  # (T, T)
    return PositionsResponse(length=T, d_model=D, table=rounded(pe, 5), similarity=rounded(similarity, 5))


class RopeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    length: int = Field(12, ge=2, le=32, strict=True, description="positions, T")
    d_model: int = Field(8, ge=2, le=64, strict=True, description="D, the width of q and k (even)")
    seed: Seed = 0

    @model_validator(mode="after")
    def _even(self) -> RopeRequest:
        if self.d_model % 2:
            raise ValueError(f"d_model must be even (RoPE turns pairs of components), got {self.d_model}")
        return self


class RopeResponse(BaseModel):
    length: int
    d_model: int
    seed: int
    q: list[float] = Field(description="(D,) the query, drawn from seed and rounded to 2 decimals")
    k: list[float] = Field(description="(D,) the key")
    plain: float = Field(description="q·k/√D without any rotation")
    scores: list[list[float]] = Field(description="(T, T) [m][n] = (R_m q)·(R_n k)/√D")


def rope_scores(req: RopeRequest) -> RopeResponse:
    """One query and one key placed at every pair of positions with :class:`RotaryEmbedding`.

    ``(R_m q)·(R_n k) = q·(R_{n−m} k)``: the score depends on the positions only through the
    offset ``n − m`` (constant along each diagonal), and on what ``q`` and ``k`` hold (another
    seed, another pattern; the main diagonal is the unrotated ``q·k/√D``).

    Shape:
        q, k ``(D,)``; scores ``(T, T)``, ``[m][n]``: query at position m, key at position n
    """
    T, D = req.length, req.d_model
    g = torch.Generator().manual_seed(req.seed)
    q, k = torch.randn(2, D, generator=g, dtype=torch.float64).round(decimals=2)  # (D,) each
    rotary = RotaryEmbedding(D)
    rq = rotary(q.expand(T, D))  # (T, D): q placed at positions 0 … T-1
    rk = rotary(k.expand(T, D))  # (T, D)
    scores = (rq @ rk.T) / math.sqrt(D)  # (T, T): [m, n] = query at m, key at n
    return RopeResponse(
        length=T,
        d_model=D,
        seed=req.seed,
        q=q.tolist(),
        k=k.tolist(),
        plain=round(float(q @ k) / math.sqrt(D), 6),
        scores=rounded(scores, 5),
    )


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


def add_routes(router: APIRouter, models: LessonModels, gate) -> None:
    """§6's endpoints."""

    @router.post("/api/lesson/positions", response_model=PositionsResponse, responses=SMALL)
    def api_positions(req: PositionsRequest) -> PositionsResponse:
        """§6: the sinusoid table and the similarity of positions."""
        return positions(req)

    @router.post("/api/lesson/rope", response_model=RopeResponse, responses=SMALL)
    def api_rope(req: RopeRequest) -> RopeResponse:
        """§6: one query and one key at every pair of positions with rotary position embedding."""
        return rope_scores(req)

    @router.post("/api/lesson/word-order", response_model=WordOrderResponse, responses=SMALL)
    def api_word_order(req: WordOrderRequest) -> WordOrderResponse:
        """§6: the same words in two orders, self-attention without and with positions."""
        return word_order(req)
