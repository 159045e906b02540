"""§3 Query, key, value: the three books, √d_k, and additive vs dot-product attention.

Three things the section's widgets show, each computed by attnlab's own code:

- the three books, computed in the page (``static/engine/lessonmath.js``, ``threeBooks``) with
  :func:`three_books` here as its reference: one query over three books whose scores the learner
  sets: the scores, their division by √d_k, the softmax written out as
  ``exp(s_i) / Σ_j exp(s_j)``, the weights, each book's value and the weighted sum, all from
  :func:`attnlab.explain.compute_steps` (which runs :func:`attnlab.functional.scaled_dot_product_attention`).
- random q and k with ``d_k`` components, computed in the page (``lessonmath.js``, ``dkSpread``)
  with :func:`dk_spread` here as its reference: q·k spreads like √d_k, and without the division
  the softmax saturates.
- the shipped ``rnn-attention`` translator (Bahdanau's additive attention) on a list of numbers,
  computed in the page (``static/engine/rnn.js``, ``additiveVsDot``, over the model's ONNX
  export) with :func:`additive_vs_dot` here as its reference: its own additive scores and
  weights, and beside them the scaled dot product of the same projected query and keys — a
  comparison, since the model was trained with the additive score.

Shape letters: ``S`` books or source tokens (keys), ``Dv`` value width, ``T`` output tokens
(queries), ``D`` the RNN's state width, ``A`` the additive scorer's hidden width, ``N`` random
queries, ``K`` keys per random query, ``Dk`` their width.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from ... import functional as AF
from ...decode import greedy_decode
from ...explain import compute_steps
from ...inference.translate import output_limit
from .common import (
    MAX_SEED,
    LessonModels,
    check_whole,
    checked_source_ids,
    is_number,
    rounded,
)

# --------------------------------------------------------------------------------------------
# The three books: scores → softmax → weighted sum of the values.
# --------------------------------------------------------------------------------------------

DEFAULT_BOOK_SCORES = (8.0, 4.0, 2.0)  # with d_k = 64: 1, 0.5, 0.25 after the division


#: Each book's value (what the book says), three made-up components small enough to add up by eye.
BOOK_VALUES = ((2.0, 0.0, 1.0), (0.0, 2.0, 1.0), (1.0, 1.0, 0.0))


MAX_BOOK_SCORE = 10.0  # the widget's sliders: exp(10) ≈ 22026 still prints readably


MAX_BOOK_DK = 1024


def check_three_books(scores: object, d_k: object, scale: object) -> None:
    """Raise ``ValueError`` with the page's one-line message for settings the widget cannot show.

    The page's JavaScript (``static/engine/lessonmath.js``, ``checkThreeBooks``) makes the same
    checks in the same order with the same messages; tests/web/lesson/test_lessonmath_parity.py holds them
    equal.

    Shape:
        no tensors; ``scores`` is a list of S numbers (S = 3 books).
    """
    S = len(BOOK_VALUES)
    if not isinstance(scores, (list, tuple)) or len(scores) != S:
        raise ValueError(f"the three books need {S} scores, one per book")
    for i, x in enumerate(scores):
        if not is_number(x) or abs(x) > MAX_BOOK_SCORE:
            raise ValueError(f"book {i + 1}'s score must be a number from -{MAX_BOOK_SCORE:g} to {MAX_BOOK_SCORE:g}")
    check_whole("d_k", d_k, 1, MAX_BOOK_DK)
    if not isinstance(scale, bool):
        raise ValueError("scale must be true or false")


@dataclass(frozen=True)
class ThreeBooks:
    """Every number the three books' widget shows (the page computes the same in JavaScript)."""

    raw: list[float]  # (S,) the scores q·k
    d_k: int  # the keys' width; the scores are divided by √d_k
    scale: bool  # whether they are divided
    factor: float  # what the scores are multiplied by: 1/√d_k, or 1 without the division
    scaled: list[float]  # (S,) what enters the softmax: raw · factor
    exp: list[float]  # (S,) exp of each softmax input
    exp_sum: float  # Σ exp: the softmax's denominator
    weights: list[float]  # (S,) the attention weights, exp / Σ exp (they add up to 1)
    values: list[list[float]]  # (S, Dv) each book's value
    weighted: list[list[float]]  # (S, Dv) weight × value, book by book
    output: list[float]  # (Dv,) Σ weight × value: the attention's output


def three_books(scores: Sequence[float] = DEFAULT_BOOK_SCORES, d_k: int = 64, scale: bool = True) -> ThreeBooks:
    """One query over the three books, step by step: the scores divided by √d_k, the softmax
    written out (``exp(s_i) / Σ_j exp(s_j)``), the weights, and the values' weighted sum.

    The reference for the page's ``threeBooks`` (``static/engine/lessonmath.js``). The weights
    and the output are :func:`attnlab.explain.compute_steps`'s (attnlab's
    ``scaled_dot_product_attention``, float64); ``exp`` and ``exp_sum`` spell out the same softmax
    so that the page can show it with its own numbers.

    Shape:
        raw, scaled, exp, weights ``(S,)``; values, weighted ``(S, Dv)``; output ``(Dv,)``
    """
    check_three_books(scores, d_k, scale)
    values = [",".join(repr(x) for x in row) for row in BOOK_VALUES]  # compute_steps' "2.0,0.0,1.0" rows
    steps = compute_steps([float(x) for x in scores], values=values, d_k=int(d_k), scale=scale)
    exp = torch.exp(steps.scaled)  # (S,)
    weighted = steps.weights.unsqueeze(1) * steps.values  # (S, 1) * (S, Dv) -> (S, Dv)
    return ThreeBooks(
        raw=steps.raw.tolist(),
        d_k=steps.d_k,
        scale=steps.scale,
        factor=1.0 / math.sqrt(steps.d_k) if steps.scale else 1.0,
        scaled=steps.scaled.tolist(),
        exp=exp.tolist(),
        exp_sum=float(exp.sum()),
        weights=steps.weights.tolist(),
        values=steps.values.tolist(),
        weighted=weighted.tolist(),
        output=steps.output.tolist(),
    )


# --------------------------------------------------------------------------------------------
# Random q and k: why divide by √d_k.
# --------------------------------------------------------------------------------------------

DK_VALUES = tuple(2**i for i in range(11))  # 1 … 1024: d_k moves in powers of two


MAX_DK_SCORES = 4096  # q·k values drawn per d_k (samples × keys): keeps the keys under 32 MiB at d_k = 1024


RAW_RANGE, RAW_BINS = 128.0, 64  # q·k histogram: [-128, 128] in bins of 4 (4·√1024 = 128)


SCALED_RANGE, SCALED_BINS = 6.0, 48  # q·k/√d_k histogram: [-6, 6] in bins of 0.25


def check_dk_spread(d_k: object, samples: object, keys: object, seed: object) -> None:
    """Raise ``ValueError`` with the page's one-line message for settings the widget cannot show.

    The page's JavaScript (``static/engine/lessonmath.js``, ``checkDkSpread``) makes the same
    checks in the same order with the same messages; tests/web/lesson/test_lessonmath_parity.py holds them
    equal.

    Shape:
        no tensors (numbers checked).
    """
    check_whole("d_k", d_k, 1, 1024)
    if d_k not in DK_VALUES:
        raise ValueError(f"d_k moves in powers of two from 1 to 1024, got {int(d_k)}")
    check_whole("samples", samples, 16, 1024)
    check_whole("keys", keys, 2, 16)
    check_whole("seed", seed, 0, MAX_SEED)
    if samples * keys > MAX_DK_SCORES:
        raise ValueError(f"samples × keys = {int(samples * keys)} is more than {MAX_DK_SCORES} scores")


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


def dk_spread(d_k: int = 64, samples: int = 256, keys: int = 8, seed: int = 0) -> DkSpreadResponse:
    """Random q and k with ``d_k`` components: q·k spreads like √d_k; without the division the
    softmax saturates (one key takes nearly all the weight), with it the weights stay soft.

    The reference for the page's ``dkSpread`` (``static/engine/lessonmath.js``), which draws the
    same random numbers with a port of torch's generator (``TorchGenerator``).

    Shape:
        per d_k: q ``(N, Dk)``, k ``(N, K, Dk)`` → scores and weights ``(N, K)``; the response keeps
        their histograms, the first query's row ``(K,)`` and one table row per d_k
    """
    check_dk_spread(d_k, samples, keys, seed)
    d_k, samples, keys, seed = int(d_k), int(samples), int(keys), int(seed)
    table: list[DkRow] = []
    chosen: dict[str, Any] = {}
    for dk in DK_VALUES:
        q, k = dk_draws(dk, samples, keys, seed)
        raw, w_plain = _dk_weights(q, k, 1.0)
        _, w_scaled = _dk_weights(q, k, 1.0 / math.sqrt(dk))
        table.append(
            DkRow(
                d_k=dk,
                sqrt_dk=math.sqrt(dk),
                std_raw=float(raw.std()),
                mean_max_unscaled=float(w_plain.max(dim=1).values.mean()),
                mean_max_scaled=float(w_scaled.max(dim=1).values.mean()),
            )
        )
        if dk == d_k:
            chosen = {"raw": raw, "plain": w_plain, "scaled": w_scaled}
    raw = chosen["raw"]  # (N, K)
    return DkSpreadResponse(
        d_k=d_k,
        sqrt_dk=math.sqrt(d_k),
        samples=samples,
        keys=keys,
        seed=seed,
        raw_hist=_histogram(raw.flatten(), RAW_RANGE, RAW_BINS),
        scaled_hist=_histogram(raw.flatten() / math.sqrt(d_k), SCALED_RANGE, SCALED_BINS),
        example=DkExample(
            raw=raw[0].tolist(),
            weights_unscaled=chosen["plain"][0].tolist(),
            weights_scaled=chosen["scaled"][0].tolist(),
        ),
        table=table,
    )


# --------------------------------------------------------------------------------------------
# Additive vs dot-product attention, on the shipped rnn-attention translator.
# --------------------------------------------------------------------------------------------

DEFAULT_NUMBERS = "forty-seven thousand ninety-three and four hundred five and nine"  # the model card's example


MAX_NUMBERS_CHARS = 300


MAX_NUMBERS_TOKENS = 24  # source tokens: two maps side by side stay readable


class AdditiveVsDotRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        DEFAULT_NUMBERS,
        min_length=1,
        max_length=MAX_NUMBERS_CHARS,
        strict=True,
        description="numbers in English words joined by 'and', as in §2",
    )


class ScoreMap(BaseModel):
    scores: list[list[float]] = Field(description="(T, S) the score of each output step's query with each source key")
    weights: list[list[float]] = Field(description="(T, S) the softmax of each row")


class AttentionCost(BaseModel):
    queries: int = Field(description="T, output steps (one query each)")
    keys: int = Field(description="S, source tokens")
    attn_dim: int = Field(description="A, the width the query and the keys are projected to")
    additive_hidden: int = Field(description="T·S·A: the numbers the additive score's hidden layer (tanh) computes")
    dot_scores: int = Field(description="T·S: the scores one (T×A)·(A×S) matrix product gives")


class AdditiveVsDotResponse(BaseModel):
    source: str
    translation: str
    src_tokens: list[str]
    tgt_tokens: list[str] = Field(description="the output tokens, the end token included: one row each")
    hidden_size: int = Field(description="D, the width of the decoder state and of each encoder state")
    attn_dim: int
    additive: ScoreMap = Field(description="vᵀ tanh(W_q s + W_k h + b): what the model was trained with and uses")
    dot: ScoreMap = Field(
        description="(W_q s)·(W_k h + b)/√A: the same projected query and keys, scored by a scaled dot product instead"
    )
    same_top: int = Field(description="rows in which both maps put the most weight on the same source token")
    cost: AttentionCost


@torch.inference_mode()
def decoder_queries(translator, ids: list[int]) -> tuple[list[int], torch.Tensor, torch.Tensor, torch.Tensor]:
    """Translate greedily, then replay the decoder and keep the state each step attends with.

    Bahdanau's decoder attends *before* its RNN step, with the previous state ``s_{i-1}``
    (:class:`attnlab.models.rnn_seq2seq.AdditiveDecoder`); the step that writes the end token
    counts too. ``keys`` are the model's projected keys ``W_k h_j + b``, computed once per sentence.

    Shape:
        ids ``(S,)`` → tokens ``(T',)`` (without BOS/EOS), queries ``(T, D)``, memory ``(S, D)``,
        keys ``(S, A)``
    """
    model, tok = translator.model, translator.tgt_tok
    src = torch.tensor([ids], device=translator.device)  # (1, S)
    limit = output_limit(len(ids), getattr(model.config, "max_len", 512))  # as Translator.translate
    hyp = greedy_decode(model, src, bos_id=tok.bos_id, eos_id=tok.eos_id, pad_id=tok.pad_id, max_len=limit)[0]
    inputs = ([tok.bos_id] + hyp.tokens)[:limit]  # one step per output token, the end token's included
    state = model.start(src)
    queries = []
    for i, token in enumerate(inputs):
        queries.append(state.hidden[0][-1, 0])  # (D,) the top layer's s_{i-1}
        if i + 1 < len(inputs):
            model.step(torch.tensor([[token]], device=src.device), state)
    return hyp.tokens, torch.stack(queries), state.memory[0], state.keys[0]  # (T, D), (S, D), (S, A)


def additive_and_dot_scores(additive, queries: torch.Tensor, keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Both scores of every (query, key) pair, from the same projections of an
    :class:`attnlab.layers.AdditiveAttention` (``q_proj`` = W_q, ``score`` = v; ``keys`` already
    hold ``W_k h + b``).

    Additive: a hidden layer (tanh) for every pair, then a dot product with v. Dot product: one
    matrix product of the projected queries with the keys, divided by √A.

    Shape:
        queries ``(T, D)``, keys ``(S, A)`` → additive ``(T, S)``, dot ``(T, S)``
    """
    q = additive.q_proj(queries)  # (T, A): W_q s
    hidden = torch.tanh(q.unsqueeze(1) + keys.unsqueeze(0))  # (T, 1, A) + (1, S, A) -> (T, S, A)
    scores_additive = hidden @ additive.score  # (T, S, A) x (A,) -> (T, S)
    scores_dot = (q @ keys.T) / math.sqrt(q.shape[-1])  # (T, A) x (A, S) -> (T, S)
    return scores_additive, scores_dot


@torch.inference_mode()
def additive_vs_dot(translator, req: AdditiveVsDotRequest) -> AdditiveVsDotResponse:
    """The shipped ``rnn-attention`` translator on a list of numbers: its own additive attention,
    and a scaled dot product of the same projected query and keys beside it.

    The additive weights are what the model computes when it translates (the same numbers as
    ``Translator.translate(..., return_attention=True)``). The model was trained with the
    additive score, so the dot-product weights are a comparison on its states, not something the
    model uses; they are computed by :func:`attnlab.functional.scaled_dot_product_attention`.

    Shape:
        additive, dot: scores and weights ``(T, S)``
    """
    model = translator.model
    if getattr(model.config, "attention", None) != "additive":
        raise ValueError(f"this view needs a translator with additive attention, not {model.config.attention!r}")
    if not req.text.split():
        raise ValueError("the text has no words: type numbers in English words, such as 'twelve and three hundred'")
    ids = checked_source_ids(translator, req.text, MAX_NUMBERS_TOKENS)
    tokens, queries, memory, keys = decoder_queries(translator, ids)  # (T, D), (S, D), (S, A)
    additive = model.decoder.attention.additive
    scores_add, scores_dot = additive_and_dot_scores(additive, queries, keys)  # (T, S) each
    weights_add = torch.softmax(scores_add, dim=-1)  # (T, S); one sentence, no padding
    q = additive.q_proj(queries)  # (T, A)
    _, weights_dot = AF.scaled_dot_product_attention(q, keys, memory, return_weights=True, backend="math")  # (T, S)
    T, S, A = len(queries), len(ids), keys.shape[-1]
    tok = translator.tgt_tok
    labels = ([tok.id_to_token(x) for x in tokens] + [tok.id_to_token(tok.eos_id)])[:T]
    same = int((weights_add.argmax(-1) == weights_dot.argmax(-1)).sum())
    return AdditiveVsDotResponse(
        source=req.text,
        translation=tok.decode(tokens),
        src_tokens=[translator.src_tok.id_to_token(x) for x in ids],
        tgt_tokens=labels,
        hidden_size=int(memory.shape[-1]),
        attn_dim=int(A),
        additive=ScoreMap(scores=rounded(scores_add), weights=rounded(weights_add)),
        dot=ScoreMap(scores=rounded(scores_dot), weights=rounded(weights_dot)),
        same_top=same,
        cost=AttentionCost(queries=T, keys=S, attn_dim=int(A), additive_hidden=T * S * int(A), dot_scores=T * S),
    )


def add_routes(router: APIRouter, models: LessonModels, gate) -> None:
    """§3's endpoints: none; the three books, the √d_k spread and the additive-vs-dot view all
    compute in the page (the module docstring)."""
