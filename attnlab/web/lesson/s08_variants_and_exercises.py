"""§8 Variants of attention, and exercises: the sparse-attention masks and what they cost, the
heatmap exercise, and attention pooling on the shipped classifier ``ja-sentence-type``.

:func:`variants_view` (the reference of the page's ``static/engine/lessonmath.js``) builds the masks of full, block-local, sliding-window, dilated and
global + window attention with :mod:`attnlab.functional`'s mask helpers, counts the scores each
computes at several lengths, and returns the measured long-context times of docs/variants.md
(seconds and ratios apart) with the peak memory of full (every score stored), chunked and SDPA
attention at the same lengths. A window is set by its reach ``r``: without the causal mask a query
sees itself and ``r`` positions on each side (``2r + 1`` keys), with it itself and the ``r``
before (``r + 1`` keys); the block-local variant has its own block size.

The heatmap exercise: random q and k over the typed words, under a variant's mask, computed in the
page (``static/engine/lessonmath.js``, ``attentionMap``) with :func:`attention_map_view` as its
reference; the page draws its PNG/SVG download itself (``heatmap.js``, titled as :func:`variant_title`).

The attention-pooling exercise runs a Japanese sentence through ``ja-sentence-type`` (question /
negation / past / other) in the page (``static/engine/pooling.js`` over the ONNX export of
:func:`attnlab.onnx_apps.export_classifier_onnx`); :func:`pooling_view` is its reference: the class
probabilities and the pooling weight of every character, as
:meth:`attnlab.inference.classify.TextClassifier.predict` gives them, with the grammatical markers
MeCab finds in the sentence (:func:`attnlab.data.sentence_types.japanese_markers`). MeCab cannot run
in a page, so the markers of the sentences the widget lists are written when the site is built
(:func:`write_pooling_sentences`, ``static/data/pooling-sentences.json``).

§8 has no endpoint: every widget computes in the page.

Shape letters: T positions (query and key), C characters of a sentence.
"""

from __future__ import annotations

import functools
import unicodedata
from pathlib import Path
from typing import Literal

import torch
from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from ... import functional as AF
from .common import (
    LESSON_DIR,
    MAX_SEED,
    LessonModels,
    Seed,
    check_sentence,
    check_whole,
    typed_words,
)
from .content import default_sections

_SECTION = 8  # this section's number: its content is content/{ja,en}/08-variants-and-exercises.md

LONG_CONTEXT_FILE = LESSON_DIR / "data" / "long-context.json"


COST_LENGTHS = (16, 32, 64, 128, 256, 512, 1024)


VariantName = Literal["full", "local", "sliding_window", "dilated", "global_window"]


VARIANTS: tuple[str, ...] = ("full", "local", "sliding_window", "dilated", "global_window")


class VariantParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reach: int = Field(
        2, ge=1, le=16, strict=True, description="a window's reach r: r keys on each side (causal: r keys back)"
    )
    block: int = Field(4, ge=1, le=32, strict=True, description="block size of local attention")
    dilation: int = Field(2, ge=1, le=4, strict=True, description="spacing of the dilated window's keys")
    n_global: int = Field(1, ge=0, le=4, strict=True, description="global positions at the start")
    causal: bool = Field(False, strict=True, description="hide the future (先を隠す工夫) as a decoder does")


def window_size(p: VariantParams) -> int:
    """The ``window`` argument of :mod:`attnlab.functional`'s window masks for the reach ``p.reach``:
    symmetric masks keep ``|j - i| ≤ window // 2`` (so ``2r``: ``2r + 1`` keys), causal ones the
    last ``window`` positions, the query's own included (so ``r + 1``)."""
    return p.reach + 1 if p.causal else 2 * p.reach


def variant_mask(name: str, T: int, p: VariantParams) -> torch.Tensor:
    """The mask of a variant, from the mask helpers of :mod:`attnlab.functional`.

    Shape:
        output ``(T, T)`` boolean, True = the query (row) may look at the key (column)
    """
    if name == "full":
        return AF.causal_mask(T) if p.causal else torch.ones(T, T, dtype=torch.bool)
    if name == "local":
        return AF.block_local_mask(T, block=p.block, causal=p.causal)
    w = window_size(p)
    if name == "sliding_window":
        return AF.sliding_window_mask(T, window=w, causal=p.causal)
    if name == "dilated":
        return AF.dilated_window_mask(T, window=w, dilation=p.dilation, causal=p.causal)
    if name == "global_window":
        return AF.global_window_mask(T, window=w, global_positions=range(min(p.n_global, T)), causal=p.causal)
    raise ValueError(f"unknown variant {name!r}; choose from {list(VARIANTS)}")


class VariantsRequest(VariantParams):
    length: int = Field(16, ge=2, le=32, strict=True, description="T, positions drawn")


class MeasuredRow(BaseModel):
    length: int
    sdpa_s: float
    chunked_speedup: float
    sliding_window_speedup: float
    global_window_speedup: float


class MemoryRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    length: int
    full_mib: float | None = Field(
        description="the reference that stores every T×T score; None: not run (it cannot fit)"
    )
    chunked_mib: float
    sdpa_mib: float


class MeasuredMemory(BaseModel):
    """Peak memory of one forward + backward pass above the inputs, each case in a fresh process
    (benchmarks/long_context.py's worker), at the lengths of the time tables."""

    model_config = ConfigDict(extra="forbid")

    source: str
    machine: str
    setup: str
    rows: list[MemoryRow]


class Measured(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    setup: str
    rows: list[MeasuredRow]
    memory: MeasuredMemory


def scores_gib(length: int, heads: int = 8, itemsize: int = 4) -> float:
    """The memory of one copy of every head's ``T×T`` scores in float32, in GiB: what an
    implementation that stores every score needs at the least (arithmetic, not measured)."""
    return heads * length * length * itemsize / 2**30


#: The measured cases, in the tables' column order.
MEASURED_CASES = ("sdpa", "chunked", "sliding_window", "global_window")


class MeasuredTables(BaseModel):
    """The measured figures as two tables, so that seconds and ratios never share one."""

    lengths: list[int]
    seconds: dict[str, list[float]] = Field(
        description="forward + backward seconds per case: SDPA's as measured, the others SDPA's divided by their "
        "speed ratio (2 significant digits)"
    )
    speedup: dict[str, list[float]] = Field(description="speed against full attention (SDPA) in the same run; 1 = same")


class VariantsResponse(BaseModel):
    length: int
    pairs: int = Field(description="T², the scores of full attention without the causal mask")
    masks: dict[str, list[list[bool]]] = Field(description="(T, T) per variant")
    counts: dict[str, int] = Field(description="scores computed (allowed pairs) per variant")
    fractions: dict[str, float] = Field(description="counts / T²")
    keys_per_row: dict[str, int] = Field(description="the most keys any one query sees, per variant")
    cost_lengths: list[int]
    cost: dict[str, list[int]] = Field(description="scores computed at each of cost_lengths")
    measured: Measured = Field(description="measured long-context times (docs/variants.md) and peak memory")
    measured_tables: MeasuredTables


@functools.cache
def _measured() -> Measured:
    return Measured.model_validate_json(LONG_CONTEXT_FILE.read_text(encoding="utf-8"))


def _significant(x: float, digits: int = 2) -> float:
    return float(f"{x:.{digits}g}")


def measured_tables(m: Measured) -> MeasuredTables:
    """The measured rows as a table of seconds and a table of ratios.

    Shape:
        R measured lengths → each case's R seconds and R ratios
    """
    speedup = {
        "sdpa": [1.0 for _ in m.rows],
        "chunked": [r.chunked_speedup for r in m.rows],
        "sliding_window": [r.sliding_window_speedup for r in m.rows],
        "global_window": [r.global_window_speedup for r in m.rows],
    }
    seconds = {
        case: [r.sdpa_s if case == "sdpa" else _significant(r.sdpa_s / x) for r, x in zip(m.rows, ratios)]
        for case, ratios in speedup.items()
    }
    return MeasuredTables(lengths=[r.length for r in m.rows], seconds=seconds, speedup=speedup)


@functools.lru_cache(maxsize=256)
def _cost(reach: int, block: int, dilation: int, n_global: int, causal: bool) -> tuple[tuple[str, list[int]], ...]:
    """Each variant's score count at every one of :data:`COST_LENGTHS` (kept: it does not depend
    on the length drawn, and the masks at 1024 positions are a million entries each).

    Shape:
        per variant, ``len(COST_LENGTHS)`` counts
    """
    p = VariantParams(reach=reach, block=block, dilation=dilation, n_global=n_global, causal=causal)
    return tuple((name, [int(variant_mask(name, n, p).sum()) for n in COST_LENGTHS]) for name in VARIANTS)


def variants(req: VariantsRequest) -> VariantsResponse:
    """Every variant's mask at ``req.length``, its score count at each of :data:`COST_LENGTHS`, and
    the measured long-context figures.

    Shape:
        masks ``(T, T)`` per variant; cost ``len(COST_LENGTHS)`` counts per variant
    """
    masks = {name: variant_mask(name, req.length, req) for name in VARIANTS}
    cost = dict(_cost(req.reach, req.block, req.dilation, req.n_global, req.causal))
    counts = {n: int(m.sum()) for n, m in masks.items()}
    pairs = req.length * req.length
    return VariantsResponse(
        length=req.length,
        pairs=pairs,
        masks={n: m.tolist() for n, m in masks.items()},
        counts=counts,
        fractions={n: c / pairs for n, c in counts.items()},
        keys_per_row={n: int(m.sum(dim=1).max()) for n, m in masks.items()},
        cost_lengths=list(COST_LENGTHS),
        cost=cost,
        measured=_measured(),
        measured_tables=measured_tables(_measured()),
    )


def check_variants(length, reach, block, dilation, n_global, causal) -> None:
    """Raise ``ValueError`` with the page's one-line message for settings the widget cannot show
    (``checkVariants`` in ``static/engine/lessonmath.js``: the same checks, order and messages).

    Shape:
        no tensors
    """
    for name, x, lo, hi in (
        ("length", length, 2, 32),
        ("reach", reach, 1, 16),
        ("block", block, 1, 32),
        ("dilation", dilation, 1, 4),
        ("n_global", n_global, 0, 4),
    ):
        check_whole(name, x, lo, hi)
    if not isinstance(causal, bool):
        raise ValueError("causal must be true or false")


def variants_view(
    length: int = 16, reach: int = 2, block: int = 4, dilation: int = 2, n_global: int = 1, causal: bool = False
) -> VariantsResponse:
    """The variants widget's numbers (:func:`variants`): the reference for the page's ``variants``
    (``static/engine/lessonmath.js``), which computes them in the page from the same measured file.

    Shape:
        masks ``(T, T)`` per variant
    """
    check_variants(length, reach, block, dilation, n_global, causal)
    return variants(
        VariantsRequest(
            length=int(length),
            reach=int(reach),
            block=int(block),
            dilation=int(dilation),
            n_global=int(n_global),
            causal=causal,
        )
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
    tokens = typed_words(req.text, "the sentence")
    T = len(tokens)
    g = torch.Generator().manual_seed(req.seed)
    q = torch.randn(T, 16, generator=g, dtype=torch.float64)  # (T, 16)
    k = torch.randn(T, 16, generator=g, dtype=torch.float64)  # (T, 16)
    mask = variant_mask(req.variant, T, req)  # (T, T)
    v = torch.eye(T, dtype=torch.float64)  # (T, T)
    _, weights = AF.scaled_dot_product_attention(q, k, v, mask, return_weights=True, backend="math")
    return tokens, mask, weights


MAX_MAP_CHARS = 300


def check_attention_map(text, variant, reach, block, dilation, n_global, causal, seed) -> None:
    """Raise ``ValueError`` with the page's one-line message for settings the exercise cannot show.

    The page's JavaScript (``static/engine/lessonmath.js``, ``checkAttentionMap``) makes the same
    checks in the same order with the same messages; tests/web/lesson/test_lessonmath_parity.py holds them
    equal.

    Shape:
        no tensors (a sentence of at most T words and numbers checked).
    """
    check_sentence(text, MAX_MAP_CHARS)
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}")
    for name, x, lo, hi in (("reach", reach, 1, 16), ("block", block, 1, 32), ("dilation", dilation, 1, 4)):
        check_whole(name, x, lo, hi)
    check_whole("n_global", n_global, 0, 4)
    if not isinstance(causal, bool):
        raise ValueError("causal must be true or false")
    check_whole("seed", seed, 0, MAX_SEED)


def attention_map_view(
    text: str = "The cat sat on the mat",
    variant: str = "sliding_window",
    reach: int = 2,
    block: int = 4,
    dilation: int = 2,
    n_global: int = 1,
    causal: bool = False,
    seed: int = 0,
) -> AttentionMapResponse:
    """The heatmap exercise's words, mask and weights (:func:`attention_map`).

    The reference for the page's ``attentionMap`` (``static/engine/lessonmath.js``); the
    downloadable figure is drawn by the page from the same numbers (``heatmap.js``).

    Shape:
        mask, weights ``(T, T)``
    """
    check_attention_map(text, variant, reach, block, dilation, n_global, causal, seed)
    req = AttentionMapRequest(
        text=text,
        variant=variant,
        reach=int(reach),
        block=int(block),
        dilation=int(dilation),
        n_global=int(n_global),
        causal=causal,
        seed=int(seed),
    )
    tokens, mask, weights = attention_map(req)
    return AttentionMapResponse(tokens=tokens, variant=variant, mask=mask.tolist(), weights=weights.tolist())


def variant_title(lang: str, variant: str, p: VariantParams) -> str:
    """The heatmap's title in ``lang`` for ``variant`` with the settings ``p``, from the section's
    ``strings:`` (``fig_title_VARIANT``, with ``{side}`` the window's side: ``fig_side_both``, or
    ``fig_side_back`` with the causal mask)."""
    strings = default_sections()[_SECTION].strings
    side = getattr(strings["fig_side_back" if p.causal else "fig_side_both"], lang)
    return getattr(strings[f"fig_title_{variant}"], lang).format(side=side, **p.model_dump())


# ---------------------------------------------------------------------------------------------
# Exercise 2: attention pooling on the shipped sentence-type classifier.
# ---------------------------------------------------------------------------------------------

#: The shipped classifier of the pooling exercise (attnlab.assets).
CLASSIFIER = "ja-sentence-type"


MAX_POOLING_CHARS = 64  # the classifier reads at most this many characters (its max_len)


class PoolingRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        "この電車は京都に行きますか。",
        min_length=1,
        max_length=MAX_POOLING_CHARS,
        strict=True,
        description="a short Japanese sentence",
    )


class PoolingCard(BaseModel):
    """What the model card measured on held-out sentences (attnlab/assets/ja-sentence-type/card.json)."""

    accuracy: float = Field(description="on the test sentences")
    n: int = Field(description="test sentences")
    peak_on_marker: dict[str, float] = Field(
        description="per class: among the correctly classified test sentences, the share whose heaviest character "
        "is the marker MeCab finds"
    )


@functools.cache
def _card(directory: Path) -> PoolingCard:
    from ...assets.cards import read_model_card

    metrics = read_model_card(directory).metrics
    shares = {k.split("/", 1)[1]: v for k, v in metrics.items() if k.startswith("peak_on_marker/")}
    return PoolingCard(accuracy=metrics["accuracy"], n=int(metrics["n"]), peak_on_marker=shares)


class PoolingResponse(BaseModel):
    model: str
    text: str = Field(description="the sentence as the model read it (NFC, stripped)")
    labels: list[str] = Field(description="the classes: question, negation, past, other")
    label: str = Field(description="the most probable class")
    probs: list[float] = Field(description="each class's probability, in the order of labels")
    chars: list[str] = Field(description="the sentence's characters, one per token")
    known: list[bool] = Field(description="False where the character is not in the vocabulary (read as unk)")
    weights: list[float] = Field(description="the pooling weight of each character; they sum to 1")
    peak: int = Field(description="the character with the highest pooling weight")
    markers: dict[str, list[int]] | None = Field(
        description="positions of the question / negation / past markers MeCab finds (the model never sees them); "
        "the page gives None for a sentence off the build's list (pooling-sentences.json): MeCab runs at build time"
    )
    examples: dict[str, str] = Field(description="one example sentence per class (the model's own)")
    card: PoolingCard = Field(description="the model card's held-out scores")


def pooling_view(classifier, req: PoolingRequest) -> PoolingResponse:
    """Classify ``req.text`` with ``classifier`` and return what it says, as
    :meth:`attnlab.inference.classify.TextClassifier.predict` gives it: the probabilities and the
    pooling weight of each character; with the markers MeCab finds, to compare the peak with.

    Raises:
        ValueError: the sentence is blank or longer than the model reads.

    Shape:
        a sentence of C characters → probs ``(4,)``, weights ``(C,)``
    """
    from ... import assets
    from ...data.sentence_types import LABELS, japanese_markers

    text = unicodedata.normalize("NFC", req.text).strip()
    if not text:
        raise ValueError("type a sentence: the text is blank")
    if len(text) > classifier.max_len:
        raise ValueError(f"the sentence has {len(text)} characters; this model reads at most {classifier.max_len}")
    prediction = classifier.predict([text])[0]
    tok = classifier.tokenizer
    ids = tok.encode(text)  # (C,) one id per character
    weights = prediction.weights
    return PoolingResponse(
        model=CLASSIFIER,
        text=text,
        labels=list(LABELS),
        label=prediction.label,
        probs=[prediction.probs[name] for name in LABELS],
        chars=list(text),
        known=[i != tok.unk_id for i in ids],
        weights=weights,
        peak=max(range(len(weights)), key=weights.__getitem__),
        markers=japanese_markers(text),
        examples=dict(zip(LABELS, assets.ASSETS[CLASSIFIER].examples)),
        card=_card(assets.asset_folder(CLASSIFIER)),
    )


#: The pooling widget's data file (attnlab.web.site's SITE_DATA): its listed sentences with MeCab's markers.
POOLING_SENTENCES_FILE = "pooling-sentences.json"


def corpus_folder() -> Path:
    """Where the corpora are read at build time: ``ATTNLAB_DATA`` when set, else ``../shared/data``
    beside the checkout (``attnlab.build_assets``'s default ``--data``).

    Shape:
        no tensors
    """
    import os

    given = os.environ.get("ATTNLAB_DATA")
    return Path(given) if given else LESSON_DIR.parents[3].parent / "shared" / "data"


def held_out_sentences(data: Path | None = None) -> list[tuple[str, str]]:
    """The classifier's test sentences, ``(label, sentence)``: small_parallel_enja's test split
    labelled as its training sentences were, none of them in its training split
    (:func:`attnlab.data.sentence_types.labelled_split`, what the model card measured); empty when
    the corpus is not on this machine (it is not shipped).

    Shape:
        no tensors
    """
    from ...data.sentence_types import labelled_split

    corpus = (corpus_folder() if data is None else Path(data)) / "small_parallel_enja"
    if not all((corpus / f"{split}.{side}").is_file() for split in ("train", "test") for side in ("en", "ja")):
        return []
    return labelled_split(corpus, "test")[0]


def pooling_sentences(data: Path | None = None) -> dict:
    """The sentences the pooling widget lists, each with the markers MeCab finds in it
    (:func:`attnlab.data.sentence_types.japanese_markers`; MeCab runs here, at build time, never in
    the page): the classifier's example sentences, always, then its held-out test sentences where
    the corpus is found (:func:`held_out_sentences`).

    Shape:
        no tensors; ``{"labels", "held_out_source", "sentences": [{"text", "source", "label",
        "markers"}, …]}`` (``source`` "example" or "test"; ``label`` the test set's, null for an example)
    """
    from ... import assets
    from ...data.sentence_types import LABELS, japanese_markers

    rows, seen = [], set()
    listed = [(None, "example", t) for t in assets.ASSETS[CLASSIFIER].examples]
    listed += [(label, "test", t) for label, t in held_out_sentences(data)]
    for label, source, raw in listed:
        text = unicodedata.normalize("NFC", raw).strip()
        if text in seen or not text or len(text) > MAX_POOLING_CHARS:
            continue
        seen.add(text)
        rows.append({"text": text, "source": source, "label": label, "markers": japanese_markers(text)})
    tests = sum(r["source"] == "test" for r in rows)
    return {
        "labels": list(LABELS),
        "held_out_source": "small_parallel_enja's test split (attnlab.data.sentence_types)" if tests else None,
        "sentences": rows,
    }


def write_pooling_sentences(out: str | Path) -> Path:
    """Write :data:`POOLING_SENTENCES_FILE` (:func:`pooling_sentences`) as ``out``.

    Shape:
        no tensors
    """
    import json

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(pooling_sentences(), ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    return out


def add_routes(router: APIRouter, models: LessonModels, gate) -> None:
    """§8's endpoints: none; every widget computes in the page (the module docstring)."""
