"""TODO docstring"""

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
    _r,
    _words,
    seeded_attention,
    word_vector,
)


class PositionsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    length: int = Field(16, ge=2, le=64, strict=True, description="positions, T")
    d_model: int = Field(32, ge=4, le=128, strict=True, description="D, even")
    seed: Seed = 0

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
    rotary: list[list[float]] = Field(description="(T, T) ⟨R_m q, R_n k⟩/√D for one random q and k")


def positions(req: PositionsRequest) -> PositionsResponse:
    """The sinusoid table, how alike two positions' vectors are, and rotary scores (which depend
    only on the offset n − m, so they are constant along each diagonal)."""
    T, D = req.length, req.d_model
    pe = sinusoidal_encoding(T, D).double()  # (T, D)
    unit = pe / pe.norm(dim=1, keepdim=True)
    similarity = unit @ unit.T  # (T, T)
    g = torch.Generator().manual_seed(req.seed)
    q, k = torch.randn(2, D, generator=g)  # (D,) each
    rotary = RotaryEmbedding(D)
    rq = rotary(q.expand(T, D))  # (T, D): q placed at positions 0 … T-1
    rk = rotary(k.expand(T, D))  # (T, D)
    scores = (rq @ rk.T) / math.sqrt(D)  # (T, T): [m, n] = query at m, key at n
    return PositionsResponse(length=T, d_model=D, table=_r(pe, 5), similarity=_r(similarity, 5), rotary=_r(scores, 5))


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


@torch.no_grad()
def word_order(req: WordOrderRequest) -> WordOrderResponse:
    """Self-attention over two orderings of the same words, without and with sinusoidal positions.

    Without positions the outputs are the same vectors, permuted (self-attention is
    permutation-equivariant); with positions added to the word vectors they differ.
    """
    a, b = _words(req.a, "the first sentence", 2), _words(req.b, "the second sentence", 2)
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
    for name, add in (("without_positions", 0.0), ("with_positions", 1.0)):
        oa = mha((xa + add * pe).unsqueeze(0), need_weights=True).output[0]  # (T, D)
        ob = mha((xb + add * pe).unsqueeze(0), need_weights=True).output[0]  # (T, D)
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
        """§6: the sinusoid table, the similarity of positions, rotary scores."""
        return positions(req)

    @router.post("/api/lesson/word-order", response_model=WordOrderResponse, responses=SMALL)
    def api_word_order(req: WordOrderRequest) -> WordOrderResponse:
        """§6: the same words in two orders, self-attention without and with positions."""
        return word_order(req)
