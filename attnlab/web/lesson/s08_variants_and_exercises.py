"""TODO docstring"""

from __future__ import annotations

import functools
import tempfile
import threading
from pathlib import Path
from typing import Annotated, Literal

import torch
from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from ... import functional as AF
from .common import (
    LESSON_DIR,
    MAX_SEED,
    SMALL,
    LessonModels,
    Seed,
    _words,
    run,
)

LONG_CONTEXT_FILE = LESSON_DIR / "data" / "long-context.json"


COST_LENGTHS = (16, 32, 64, 128, 256, 512, 1024)


VariantName = Literal["full", "local", "sliding_window", "dilated", "global_window"]


VARIANTS: tuple[str, ...] = ("full", "local", "sliding_window", "dilated", "global_window")


VARIANT_TITLES = {
    "en": {
        "full": "full attention",
        "local": "local (blocks of {window})",
        "sliding_window": "sliding window ({window})",
        "dilated": "dilated window ({window}, every {dilation})",
        "global_window": "global ({n_global}) + window ({window})",
    },
    "ja": {
        "full": "全体への注意",
        "local": "局所注意（{window} 語ずつのブロック）",
        "sliding_window": "スライディングウィンドウ（幅 {window}）",
        "dilated": "間隔をあけたウィンドウ（幅 {window}、{dilation} つおき）",
        "global_window": "グローバル（{n_global} 語）＋ウィンドウ（幅 {window}）",
    },
}


class VariantParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    window: int = Field(4, ge=1, le=32, strict=True, description="window, or block size for local")
    dilation: int = Field(2, ge=1, le=4, strict=True, description="spacing of the dilated window's keys")
    n_global: int = Field(1, ge=0, le=4, strict=True, description="global positions at the start")
    causal: bool = Field(False, strict=True, description="hide the future (先を隠す工夫) as a decoder does")


def variant_mask(name: str, T: int, p: VariantParams) -> torch.Tensor:
    """The ``(T, T)`` mask of a variant, from the mask helpers of :mod:`attnlab.functional`."""
    if name == "full":
        return AF.causal_mask(T) if p.causal else torch.ones(T, T, dtype=torch.bool)
    if name == "local":
        return AF.block_local_mask(T, block=p.window, causal=p.causal)
    if name == "sliding_window":
        return AF.sliding_window_mask(T, window=p.window, causal=p.causal)
    if name == "dilated":
        return AF.dilated_window_mask(T, window=p.window, dilation=p.dilation, causal=p.causal)
    if name == "global_window":
        return AF.global_window_mask(T, window=p.window, global_positions=range(min(p.n_global, T)), causal=p.causal)
    raise ValueError(f"unknown variant {name!r}; choose from {list(VARIANTS)}")


class VariantsRequest(VariantParams):
    length: int = Field(16, ge=2, le=32, strict=True, description="T, positions drawn")


class MeasuredRow(BaseModel):
    length: int
    sdpa_s: float
    chunked_speedup: float
    sliding_window_speedup: float
    global_window_speedup: float


class Measured(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    setup: str
    rows: list[MeasuredRow]


class VariantsResponse(BaseModel):
    length: int
    pairs: int = Field(description="T², the scores of full attention without the causal mask")
    masks: dict[str, list[list[bool]]] = Field(description="(T, T) per variant")
    counts: dict[str, int] = Field(description="scores computed (allowed pairs) per variant")
    fractions: dict[str, float] = Field(description="counts / T²")
    cost_lengths: list[int]
    cost: dict[str, list[int]] = Field(description="scores computed at each of cost_lengths")
    measured: Measured = Field(description="measured long-context times (docs/variants.md)")


@functools.cache
def _measured() -> Measured:
    return Measured.model_validate_json(LONG_CONTEXT_FILE.read_text(encoding="utf-8"))


def variants(req: VariantsRequest) -> VariantsResponse:
    masks = {name: variant_mask(name, req.length, req) for name in VARIANTS}
    cost = {name: [int(variant_mask(name, n, req).sum()) for n in COST_LENGTHS] for name in VARIANTS}
    counts = {n: int(m.sum()) for n, m in masks.items()}
    pairs = req.length * req.length
    return VariantsResponse(
        length=req.length,
        pairs=pairs,
        masks={n: m.tolist() for n, m in masks.items()},
        counts=counts,
        fractions={n: c / pairs for n, c in counts.items()},
        cost_lengths=list(COST_LENGTHS),
        cost=cost,
        measured=_measured(),
    )


class AttentionMapRequest(VariantParams):
    text: str = Field(
        "The cat sat on the mat", min_length=1, max_length=300, strict=True, description="words separated by spaces"
    )
    variant: VariantName = "sliding_window"
    seed: Seed = 0


class AttentionMapResponse(BaseModel):
    tokens: list[str]
    variant: str
    mask: list[list[bool]]
    weights: list[list[float]] = Field(description="(T, T) softmax(q kᵀ/√16) under the variant's mask")


def attention_map(req: AttentionMapRequest) -> tuple[list[str], torch.Tensor, torch.Tensor]:
    """Self-attention weights over the typed words with random q and k (16 components, from
    ``seed``) under the variant's mask: the heatmap exercise.

    Shape:
        mask, weights ``(T, T)``
    """
    tokens = _words(req.text, "the sentence")
    T = len(tokens)
    g = torch.Generator().manual_seed(req.seed)
    q = torch.randn(T, 16, generator=g, dtype=torch.float64)  # (T, 16)
    k = torch.randn(T, 16, generator=g, dtype=torch.float64)  # (T, 16)
    mask = variant_mask(req.variant, T, req)  # (T, T)
    v = torch.eye(T, dtype=torch.float64)  # (T, T)
    _, weights = AF.scaled_dot_product_attention(q, k, v, mask, return_weights=True, backend="math")
    return tokens, mask, weights


class FigureQuery(AttentionMapRequest):
    # Query strings carry text: numbers and flags are converted here, unlike the JSON bodies.
    window: int = Field(4, ge=1, le=32)
    dilation: int = Field(2, ge=1, le=4)
    n_global: int = Field(1, ge=0, le=4)
    causal: bool = False
    seed: int = Field(0, ge=0, le=MAX_SEED)
    lang: Literal["ja", "en"] = "en"


_FIGURE_LOCK = threading.Lock()  # one matplotlib figure at a time: the font cache is shared


def attention_figure(req: FigureQuery, fmt: str) -> bytes:
    """The heatmap exercise as a PNG or SVG from :func:`attnlab.viz.plot_attention`, labelled in ``req.lang``."""
    from ...viz import plot_attention

    tokens, _, weights = attention_map(req)
    title = VARIANT_TITLES[req.lang][req.variant].format(**req.model_dump())
    with _FIGURE_LOCK, tempfile.TemporaryDirectory() as tmp:
        path = plot_attention(weights, tokens, tokens, Path(tmp) / f"map.{fmt}", title=title, lang=req.lang)
        return path.read_bytes()


def add_routes(router: APIRouter, models: LessonModels, gate) -> None:
    """§8's endpoints."""

    @router.post("/api/lesson/variants", response_model=VariantsResponse, responses=SMALL)
    def api_variants(req: VariantsRequest) -> VariantsResponse:
        """§8: the masks of full, local, sliding-window, dilated and global + window attention."""
        return variants(req)

    @router.post("/api/lesson/attention-map", response_model=AttentionMapResponse, responses=SMALL)
    def api_attention_map(req: AttentionMapRequest) -> AttentionMapResponse:
        """§8: the heatmap exercise's weights."""
        tokens, mask, weights = attention_map(req)
        return AttentionMapResponse(tokens=tokens, variant=req.variant, mask=mask.tolist(), weights=weights.tolist())

    @router.get(
        "/api/lesson/figures/attention-map.{fmt}",
        response_class=Response,
        responses={200: {"content": {"image/png": {}, "image/svg+xml": {}}}, 503: {"description": "busy"}},
    )
    async def api_attention_figure(fmt: Literal["png", "svg"], query: Annotated[FigureQuery, Query()]) -> Response:
        """§8: the heatmap exercise drawn by attnlab.viz (PNG or SVG), labels in ``lang``."""
        async with gate.slot():
            data = await run(attention_figure, query, fmt)
        media = "image/png" if fmt == "png" else "image/svg+xml"
        name = f"attention-{query.variant}-{query.lang}.{fmt}"
        return Response(data, media_type=media, headers={"Content-Disposition": f'attachment; filename="{name}"'})
