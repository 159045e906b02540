"""TODO docstring"""

from __future__ import annotations

import math
from typing import Any

import torch
from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ... import functional as AF
from .common import (
    SMALL,
    LessonModels,
    Seed,
)

DK_VALUES = tuple(2**i for i in range(11))  # 1 … 1024: d_k moves in powers of two


MAX_DK_SCORES = 4096  # q·k values drawn per d_k (samples × keys): keeps the keys under 32 MiB at d_k = 1024


RAW_RANGE, RAW_BINS = 128.0, 64  # q·k histogram: [-128, 128] in bins of 4 (4·√1024 = 128)


SCALED_RANGE, SCALED_BINS = 6.0, 48  # q·k/√d_k histogram: [-6, 6] in bins of 0.25


def _power_of_two(value: int) -> int:
    if value not in DK_VALUES:
        raise ValueError(f"d_k moves in powers of two from 1 to 1024, got {value}")
    return value


class DkSpreadRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    d_k: int = Field(64, ge=1, le=1024, strict=True, description="components of q and k: a power of two")
    samples: int = Field(256, ge=16, le=1024, strict=True, description="queries drawn, N")
    keys: int = Field(8, ge=2, le=16, strict=True, description="keys per query, K (N·K ≤ 4096)")
    seed: Seed = 0

    @model_validator(mode="after")
    def _dk(self) -> DkSpreadRequest:
        _power_of_two(self.d_k)
        if self.samples * self.keys > MAX_DK_SCORES:
            raise ValueError(f"samples × keys = {self.samples * self.keys} is more than {MAX_DK_SCORES} scores")
        return self


class Histogram(BaseModel):
    edges: list[float] = Field(description="bin edges; values beyond them are counted in the outer bins")
    counts: list[int]
    outside: int = Field(description="how many values lay beyond the edges")


class DkRow(BaseModel):
    d_k: int
    sqrt_dk: float
    std_raw: float = Field(description="measured spread (standard deviation) of q·k")
    mean_max_unscaled: float = Field(description="mean of the largest softmax weight without the division")
    mean_max_scaled: float = Field(description="the same with q·k/√d_k")


class DkExample(BaseModel):
    raw: list[float] = Field(description="q·k of the first query with its K keys")
    weights_unscaled: list[float] = Field(description="softmax(q·k)")
    weights_scaled: list[float] = Field(description="softmax(q·k/√d_k)")


class DkSpreadResponse(BaseModel):
    d_k: int
    sqrt_dk: float
    samples: int
    keys: int
    seed: int
    raw_hist: Histogram
    scaled_hist: Histogram
    example: DkExample
    table: list[DkRow] = Field(description="every power of two from 1 to 1024, same N, K and seed")


def dk_draws(d_k: int, samples: int, keys: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The random queries and keys of one d_k: entries N(0, 1), float64, from ``seed·2048 + d_k``.

    Shape:
        q ``(N, Dk)``, k ``(N, K, Dk)``
    """
    g = torch.Generator().manual_seed(seed * 2048 + d_k)
    q = torch.randn(samples, d_k, generator=g, dtype=torch.float64)  # (N, Dk)
    k = torch.randn(samples, keys, d_k, generator=g, dtype=torch.float64)  # (N, K, Dk)
    return q, k


def _dk_weights(q: torch.Tensor, k: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores and softmax weights of each query over its own keys, by attnlab's attention.

    Shape:
        q ``(N, Dk)``, k ``(N, K, Dk)`` → scores ``(N, K)`` (unscaled), weights ``(N, K)``
    """
    qn = q.unsqueeze(1)  # (N, 1, Dk): one query per batch item
    v = torch.eye(k.shape[1], dtype=k.dtype).expand(k.shape[0], -1, -1)  # (N, K, K)
    _, w = AF.scaled_dot_product_attention(qn, k, v, scale=scale, return_weights=True, backend="math")
    scores = (qn @ k.transpose(1, 2))[:, 0]  # (N, 1, Dk) x (N, Dk, K) -> (N, K)
    return scores, w[:, 0]  # (N, K), (N, K)


def _histogram(x: torch.Tensor, limit: float, bins: int) -> Histogram:
    edges = torch.linspace(-limit, limit, bins + 1, dtype=torch.float64)
    outside = int(((x < -limit) | (x > limit)).sum())
    counts, _ = torch.histogram(x.clamp(-limit, limit), bins=edges)
    return Histogram(edges=edges.tolist(), counts=[int(c) for c in counts.tolist()], outside=outside)


def dk_spread(req: DkSpreadRequest) -> DkSpreadResponse:
    """Random q and k with ``d_k`` components: q·k spreads like √d_k; without the division the
    softmax saturates (one key takes nearly all the weight), with it the weights stay soft."""
    table: list[DkRow] = []
    chosen: dict[str, Any] = {}
    for d_k in DK_VALUES:
        q, k = dk_draws(d_k, req.samples, req.keys, req.seed)
        raw, w_plain = _dk_weights(q, k, 1.0)
        _, w_scaled = _dk_weights(q, k, 1.0 / math.sqrt(d_k))
        table.append(
            DkRow(
                d_k=d_k,
                sqrt_dk=math.sqrt(d_k),
                std_raw=float(raw.std()),
                mean_max_unscaled=float(w_plain.max(dim=1).values.mean()),
                mean_max_scaled=float(w_scaled.max(dim=1).values.mean()),
            )
        )
        if d_k == req.d_k:
            chosen = {"raw": raw, "plain": w_plain, "scaled": w_scaled}
    raw = chosen["raw"]  # (N, K)
    return DkSpreadResponse(
        d_k=req.d_k,
        sqrt_dk=math.sqrt(req.d_k),
        samples=req.samples,
        keys=req.keys,
        seed=req.seed,
        raw_hist=_histogram(raw.flatten(), RAW_RANGE, RAW_BINS),
        scaled_hist=_histogram(raw.flatten() / math.sqrt(req.d_k), SCALED_RANGE, SCALED_BINS),
        example=DkExample(
            raw=raw[0].tolist(),
            weights_unscaled=chosen["plain"][0].tolist(),
            weights_scaled=chosen["scaled"][0].tolist(),
        ),
        table=table,
    )


def add_routes(router: APIRouter, models: LessonModels, gate) -> None:
    """§3's endpoints."""

    @router.post("/api/lesson/dk-spread", response_model=DkSpreadResponse, responses=SMALL)
    def api_dk_spread(req: DkSpreadRequest) -> DkSpreadResponse:
        """§3: random q and k with d_k components; q·k histograms and softmax saturation."""
        return dk_spread(req)
