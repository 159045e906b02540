"""§1 What attention does: the shipped ja→en translator's source–target attention, and what an
RNN and a Transformer have to wait for.

Two views, computed in the page (``static/engine/translation_views.js``; these functions are the
references it is tested against):

- :func:`translation_view`: one sentence through ``ja-en`` (greedy), with every layer's and head's
  source–target attention and the encoder's self-attention (§1 and §4 draw them).
- :func:`parallel_steps`: the comparison of §1's second half. The steps that must
  wait for the one before (``T`` for one RNN layer, one for one Transformer layer) and the
  measured time of one training step (forward and backward) of two layers of the same width,
  built here from attnlab's own modules with fixed seeds (:func:`comparison_layers`), for a
  batch of sentences of each length; and, clearly apart, the shipped models' encoders reading
  one sentence (batch 1, inference), where the small shipped RNN is usually the faster one.

Times are measurements of PyTorch on a machine: :func:`steps_data` measures them all once (the
static site's build writes them to ``data/parallel-steps.json`` with the machine's name; the
explorer measures on the first ask of that file and keeps it), and :func:`steps_response` answers
from them; the page does the same from the file.

Shape letters: ``B`` batch, ``T`` length (tokens), ``D`` width.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import torch
from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, field_validator
from torch import nn

from ...layers import EncoderBlock
from ...models.rnn_seq2seq import recurrent_layer
from .common import (
    DEFAULT_SENTENCE,
    MAX_SENTENCE_CHARS,
    MAX_TRANSLATION_TOKENS,
    RNN_ATTENTION,
    TRANSLATOR,
    LessonModels,
    checked_source_ids,
    rounded,
)

STEP_LENGTHS = (8, 16, 32, 64, 128)  # input lengths (tokens) of the training-step table
BATCHES = (1, 8, 32)  # batch sizes the widget offers
DEFAULT_BATCH = 32
COMPARE_WIDTH = 128  # both layers' width D (small, so that the first measurement stays short)
COMPARE_HEADS = 4  # the Transformer layer's heads
COMPARE_FF = 256  # its feed-forward layer's hidden width: 2·D (small, as the width)
COMPARE_SEED = 0  # draws both layers' initial weights and the inputs
TRAIN_REPEATS = 3  # timed training steps per (layer, batch, length); the fastest is shown
TIMING_REPEATS = 7  # timed runs of a shipped encoder per length (after two warm-ups); the fastest is shown
CLOSE = 1.2  # a ratio of times within [1/CLOSE, CLOSE] counts as "about the same"
#: The site's table of the shipped encoders' times covers sentences of 1 … this many tokens: a
#: measurement per length, up to the longest sentence the translation widget above draws (every
#: length costs build time).
STEPS_MAX_TOKENS = MAX_TRANSLATION_TOKENS
MS_DECIMALS = 2  # the page shows milliseconds to two decimals; ratios are computed from those shown values


def _shown_ms(seconds: float) -> float:
    """A time in milliseconds as the page prints it (two decimals, at least 0.01), so that a ratio
    quoted beside two times follows from the two times shown (3.76 / 0.59 reads 6.4, not 6.3)."""
    return max(round(1000 * seconds, MS_DECIMALS), 10.0**-MS_DECIMALS)


class TranslationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        DEFAULT_SENTENCE, min_length=1, max_length=MAX_SENTENCE_CHARS, strict=True, description="a Japanese sentence"
    )


class TranslationResponse(BaseModel):
    model: str
    source: str
    translation: str
    decoding: str = Field(description="greedy: the most likely token at every step")
    src_tokens: list[str]
    tgt_tokens: list[str] = Field(description="the output tokens, the end token last (one row each)")
    n_encoder_layers: int
    n_decoder_layers: int
    n_heads: int
    cross: list[list[list[list[float]]]] = Field(description="(L_dec, H, T, S) source–target attention")
    cross_mean: list[list[list[float]]] = Field(description="(L_dec, T, S) the same, mean over heads")
    encoder_self: list[list[list[list[float]]]] = Field(description="(L_enc, H, S, S) encoder self-attention")
    encoder_self_mean: list[list[list[float]]] = Field(description="(L_enc, S, S) the same, mean over heads")


@torch.inference_mode()
def translation_view(translator, req: TranslationRequest, name: str = TRANSLATOR) -> TranslationResponse:
    """Translate ``req.text`` greedily; every layer's and head's cross-attention (one row per output
    token, from :attr:`Translation.cross_attention`) and the encoder's self-attention.

    Shape:
        cross ``(L_dec, H, T, S)``; encoder self ``(L_enc, H, S, S)``
    """
    ids = checked_source_ids(translator, req.text, MAX_TRANSLATION_TOKENS)
    result = translator.translate([req.text], beam_size=1, return_attention=True)[0]
    cross = result.cross_attention  # (L, H, T, S)
    _, enc = translator.model.encode(torch.tensor([ids], device=translator.device), need_weights=True)
    encoder_self = torch.stack([w[0] for w in enc])  # L × (1, H, S, S) -> (L, H, S, S)
    config = translator.model.config
    return TranslationResponse(
        model=name,
        source=req.text,
        translation=result.text,
        decoding="greedy",
        src_tokens=result.src_tokens,
        tgt_tokens=result.tgt_tokens,
        n_encoder_layers=config.n_encoder_layers,
        n_decoder_layers=config.n_decoder_layers,
        n_heads=config.n_heads,
        cross=rounded(cross, 5),
        cross_mean=rounded(cross.mean(dim=1), 5),
        encoder_self=rounded(encoder_self, 5),
        encoder_self_mean=rounded(encoder_self.mean(dim=1), 5),
    )


# --------------------------------------------------------------------------------------------
# RNN vs Transformer: steps that wait, and what they cost.
# --------------------------------------------------------------------------------------------


class StepsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        DEFAULT_SENTENCE, min_length=1, max_length=MAX_SENTENCE_CHARS, strict=True, description="a Japanese sentence"
    )
    batch: int = Field(
        DEFAULT_BATCH,
        strict=True,
        json_schema_extra={"enum": list(BATCHES)},
        description="sentences per training step in the timed table: 1, 8 or 32",
    )

    @field_validator("batch")
    @classmethod
    def _offered(cls, value: int) -> int:
        if value not in BATCHES:
            raise ValueError(f"batch must be one of {list(BATCHES)}, got {value}")
        return value


class LayerFacts(BaseModel):
    kind: Literal["rnn", "transformer"]
    cell: str | None = Field(description="the RNN's cell (GRU); null for the Transformer layer")
    width: int = Field(description="D: the hidden width (RNN) or d_model (Transformer)")
    heads: int | None = Field(description="attention heads; null for the RNN")
    ff_width: int | None = Field(description="the feed-forward layer's hidden width; null for the RNN")
    parameters: int


class EncoderFacts(BaseModel):
    model: str
    kind: Literal["rnn", "transformer"]
    cell: str | None = Field(description="the RNN's cell (GRU, LSTM); null for the Transformer")
    layers: int
    width: int = Field(description="hidden width (RNN) or d_model (Transformer)")
    parameters: int


class ShippedReading(BaseModel):
    """The shipped models' encoders reading one input of the sentence's length: batch 1, inference."""

    tokens: int = Field(description="the input length: the typed sentence's tokens for ja-en")
    rnn: EncoderFacts
    transformer: EncoderFacts
    rnn_steps: int = Field(description="steps in a row of the RNN encoder: T per layer")
    transformer_steps: int = Field(description="the same for the Transformer encoder: one per layer")
    rnn_ms: float = Field(description="time to encode one input of that length (fastest run)")
    transformer_ms: float
    faster: Literal["rnn", "transformer", "close"]
    speedup: float = Field(description="the slower time over the faster one (≥ 1)")
    repeats: int


class StepsResponse(BaseModel):
    sentence_tokens: int = Field(description="T: the typed sentence's tokens for ja-en")
    sentence_rnn_steps: int = Field(description="steps in a row for one RNN layer to read it (T)")
    sentence_transformer_steps: int = Field(description="the same for one Transformer layer (1)")
    training_rnn_steps: int = Field(description="one RNN decoder layer learning from a T-token target: T")
    training_transformer_steps: int = Field(description="one Transformer decoder layer, whole target at once: 1")
    generation_steps: int = Field(description="writing T tokens: one after another, in both models")
    batch: int
    batches: list[int] = Field(description="the batch sizes offered")
    lengths: list[int] = Field(description="T of each row of the training-step table")
    rnn_layer: LayerFacts
    transformer_layer: LayerFacts
    rnn_steps: list[int] = Field(description="per length: steps that wait for the one before in one RNN layer (T)")
    transformer_steps: list[int] = Field(description="the same for one Transformer layer (1)")
    rnn_train_ms: list[float] = Field(description="per length: one training step (forward + backward), fastest run")
    transformer_train_ms: list[float]
    ratio: list[float] = Field(description="rnn_train_ms / transformer_train_ms")
    faster: list[Literal["rnn", "transformer", "close"]] = Field(description="per length, from ratio and CLOSE")
    speedup: list[float] = Field(description="per length: the slower time over the faster one (≥ 1)")
    repeats: int
    threads: int = Field(description="torch threads of this process while timing")
    machine: str = Field(description="the machine the times were measured on: CPU, cores, date")
    shipped: ShippedReading


def _count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def which_is_faster(ratio: float) -> Literal["rnn", "transformer", "close"]:
    """Which of two times is clearly shorter, as the widget's verdict says it (the ``faster``
    fields): ``ratio`` is the RNN's time over the Transformer's; within [1/:data:`CLOSE`,
    :data:`CLOSE`] they are "close".

    Shape:
        no tensors.
    """
    if ratio >= CLOSE:
        return "transformer"
    if ratio <= 1 / CLOSE:
        return "rnn"
    return "close"


def comparison_layers(
    width: int = COMPARE_WIDTH, heads: int = COMPARE_HEADS, ff_width: int = COMPARE_FF, seed: int = COMPARE_SEED
) -> tuple[nn.Module, EncoderBlock]:
    """The two layers §1 times: a one-layer GRU (:func:`attnlab.models.rnn_seq2seq.recurrent_layer`,
    one direction) and one Transformer encoder layer (:class:`attnlab.layers.EncoderBlock`,
    pre-norm, as ja-en's), both ``width`` wide, without dropout, weights drawn from ``seed``
    (the global random state is left as it was). At the defaults the Transformer layer has about
    1.3 times the GRU's parameters: it does more arithmetic per token, not less.

    Shape:
        both: x ``(B, T, D)`` → ``(B, T, D)`` (see :func:`layer_output`)
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        rnn = recurrent_layer("gru", width, width, n_layers=1, dropout=0.0)
        transformer = EncoderBlock(width, heads, ff_width, dropout=0.0, norm="pre")
    return rnn.train(), transformer.train()


def layer_output(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The output sequence of either comparison layer.

    Shape:
        x ``(B, T, D)`` → ``(B, T, D)``
    """
    if isinstance(layer, nn.RNNBase):
        out, _ = layer(x)  # (B, T, D): T steps in a row, each waiting for the one before
        return out
    return layer(x).hidden  # (B, T, D): every position at once


def training_step(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """One training step's arithmetic: the forward pass, a loss (the mean square of the output,
    a stand-in for a real one) and the backward pass, which fills every parameter's ``.grad``.
    (The optimizer's update is left out: it costs the same for any order of computation.)

    Shape:
        x ``(B, T, D)`` → loss ``()``
    """
    layer.zero_grad(set_to_none=True)
    loss = layer_output(layer, x).pow(2).mean()  # ()
    loss.backward()
    return loss.detach()


def layer_facts(layer: nn.Module) -> LayerFacts:
    """What a comparison layer is: kind, width, heads, feed-forward width, parameters.

    Shape:
        reads the layer's sizes; returns no tensor
    """
    if isinstance(layer, nn.RNNBase):
        return LayerFacts(
            kind="rnn",
            cell=layer.mode,
            width=layer.hidden_size,
            heads=None,
            ff_width=None,
            parameters=_count_parameters(layer),
        )
    return LayerFacts(
        kind="transformer",
        cell=None,
        width=layer.self_attn.d_model,
        heads=layer.self_attn.n_heads,
        ff_width=layer.ff.up_proj.out_features,
        parameters=_count_parameters(layer),
    )


def comparison_input(batch: int, length: int, width: int = COMPARE_WIDTH, seed: int = COMPARE_SEED) -> torch.Tensor:
    """The input both layers get: ``batch`` sentences of ``length`` random vectors (standing for
    embedded tokens), drawn from ``seed``, ``batch`` and ``length``.

    Shape:
        output ``(B, T, D)``
    """
    g = torch.Generator().manual_seed(seed * 1_000_003 + batch * 1009 + length)
    return torch.randn(batch, length, width, generator=g)  # (B, T, D)


@functools.cache
def _timed_layers() -> tuple[nn.Module, EncoderBlock]:
    """The :func:`comparison_layers` this process times (built once)."""
    return comparison_layers()


_TRAIN_TIMES: dict[tuple[str, int, int], float] = {}  # (kind, batch, length) -> seconds
_TRAIN_LOCK = threading.Lock()


def training_step_seconds(
    batch: int, lengths: Sequence[int], repeats: int = TRAIN_REPEATS
) -> tuple[list[float], list[float]]:
    """Wall time of one :func:`training_step` of each :func:`comparison_layers` layer on a batch of
    ``batch`` inputs of each length: the fastest of ``repeats`` runs (after one warm-up run of
    each layer). The runs go
    round both layers and every length in turn, ``repeats`` times, so that a moment when the
    machine is busy with something else slows one run of each rather than all the runs of one.
    Each (batch, length) is measured once in this process, then remembered.

    Shape:
        input ``(batch, length, D)`` per length → seconds ``([rnn per length], [transformer per length])``
    """
    with _TRAIN_LOCK:  # one measurement at a time: two at once would slow each other down
        layers = dict(zip(("rnn", "transformer"), _timed_layers()))
        todo = [(kind, n) for n in lengths for kind in layers if (kind, batch, n) not in _TRAIN_TIMES]
        if todo:
            inputs = {n: comparison_input(batch, n) for _, n in todo}
            longest = max(inputs)
            for kind in {kind for kind, _ in todo}:
                training_step(layers[kind], inputs[longest])  # warm-up: the first run allocates
            best = [math.inf] * len(todo)
            for _ in range(repeats):
                for k, (kind, n) in enumerate(todo):
                    start = time.perf_counter()
                    training_step(layers[kind], inputs[n])
                    best[k] = min(best[k], time.perf_counter() - start)
            for (kind, n), seconds in zip(todo, best):
                _TRAIN_TIMES[(kind, batch, n)] = seconds
        return (
            [_TRAIN_TIMES[("rnn", batch, n)] for n in lengths],
            [_TRAIN_TIMES[("transformer", batch, n)] for n in lengths],
        )


def _encoder_facts(name: str, model: nn.Module) -> EncoderFacts:
    c = model.config
    if c.model_type == "rnn":
        return EncoderFacts(
            model=name,
            kind="rnn",
            cell=c.cell.upper(),
            layers=c.n_layers,
            width=c.hidden_size,
            parameters=_count_parameters(model),
        )
    return EncoderFacts(
        model=name,
        kind="transformer",
        cell=None,
        layers=c.n_encoder_layers,
        width=c.d_model,
        parameters=_count_parameters(model),
    )


_TIMES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {length: seconds}
_TIMES_LOCK = threading.Lock()


def encoder_seconds(
    models: tuple[nn.Module, ...], lengths: Sequence[int], repeats: int = TIMING_REPEATS
) -> list[list[float]]:
    """Wall time of each shipped model's ``encode`` on one input of each length (random tokens of
    its own vocabulary): the fastest of ``repeats`` runs, after two warm-up runs each, going round
    every model and length in turn. Each model and length is measured once in this process, then
    remembered.

    Shape:
        src ``(1, length)`` per model and length → seconds ``[model][length]``
    """
    with _TIMES_LOCK:
        todo = [(m, n) for n in lengths for m in models if n not in _TIMES.get(m, {})]
        if todo:
            inputs = []
            for model, n in todo:
                g = torch.Generator().manual_seed(n)
                src = torch.randint(0, model.config.src_vocab_size - 1, (1, n), generator=g)  # (1, T)
                src += (src >= model.config.pad_id).long()  # every id but the padding one
                inputs.append(src)
            best = [math.inf] * len(todo)
            with torch.inference_mode():
                for (model, _), src in zip(todo, inputs):
                    model.encode(src)
                    model.encode(src)
                for _ in range(repeats):
                    for k, ((model, _), src) in enumerate(zip(todo, inputs)):
                        start = time.perf_counter()
                        model.encode(src)
                        best[k] = min(best[k], time.perf_counter() - start)
            for (model, n), seconds in zip(todo, best):
                _TIMES.setdefault(model, {})[n] = seconds
        return [[_TIMES[m][n] for n in lengths] for m in models]


def parallel_steps(
    rnn_translator, transformer_translator, req: StepsRequest, data: dict | None = None
) -> StepsResponse:
    """What waits, and what it costs.

    Counts: one RNN layer's state at position t needs its state at t − 1, so reading T tokens is
    T steps in a row; one Transformer layer computes every position at once from the layer below:
    one step. While training, the decoders differ the same way (teacher forcing gives a
    Transformer layer the whole target at once, behind its causal mask); while generating, both
    write one token after another.

    Times: one training step of :func:`comparison_layers` on ``req.batch`` inputs of each of
    :data:`STEP_LENGTHS` (:func:`training_step_seconds`); and, apart, the shipped encoders of
    ``rnn-attention`` and ``ja-en`` reading one input of the typed sentence's length (batch 1,
    inference, :func:`encoder_seconds`). The shipped models differ in size, so the second pair
    of times says nothing about waiting; it is shown because it is what a reader of one
    sentence meets. ``data``: measurements written earlier by :func:`steps_data` (the site's
    ``data/parallel-steps.json``, what the page reads); without it they are measured now.

    Shape:
        timed inputs ``(batch, T, D)`` for each T in :data:`STEP_LENGTHS`; the shipped encoders'
        ``(1, sentence_tokens)``
    """
    sentence = len(checked_source_ids(transformer_translator, req.text, transformer_translator.model.config.max_len))
    if data is None:
        data = steps_data(rnn_translator, transformer_translator, batches=[req.batch], tokens=[sentence])
    return steps_response(data, sentence, req.batch)


def machine_label() -> str:
    """The machine a measurement ran on, as the page names it: the CPU's model, its logical
    cores and the date (UTC).

    Shape:
        no tensors.
    """
    import datetime
    import os
    import platform

    cpu = ""
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    cpu = cpu or platform.processor() or platform.machine() or "unknown CPU"
    day = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    return f"{cpu}, {os.cpu_count()} logical cores, {day}"


def steps_data(
    rnn_translator,
    transformer_translator,
    *,
    batches: Sequence[int] = BATCHES,
    tokens: Sequence[int] | None = None,
) -> dict:
    """Everything :func:`steps_response` needs that is measured: one training step of each
    :func:`comparison_layers` layer for every batch of ``batches`` and length of
    :data:`STEP_LENGTHS` (shown milliseconds), and the shipped encoders (``rnn-attention``,
    ``ja-en``) reading one input of each length of ``tokens`` (default: 1 … :data:`STEPS_MAX_TOKENS`),
    with the machine they ran on (:func:`machine_label`). The site writes it as
    ``data/parallel-steps.json``.

    Shape:
        timed inputs ``(batch, T, D)`` and ``(1, tokens)``; returns a JSON-ready dict
    """
    lengths = list(STEP_LENGTHS)
    tokens = list(range(1, STEPS_MAX_TOKENS + 1)) if tokens is None else list(tokens)
    train = {}
    for batch in batches:
        rnn_s, tr_s = training_step_seconds(batch, lengths)
        train[str(batch)] = {"rnn": [_shown_ms(t) for t in rnn_s], "transformer": [_shown_ms(t) for t in tr_s]}
    rnn, tr = rnn_translator.model, transformer_translator.model
    rnn_read, tr_read = encoder_seconds((rnn, tr), tokens)
    rnn_layer, transformer_layer = (layer_facts(layer) for layer in _timed_layers())
    return {
        "machine": machine_label(),
        "threads": torch.get_num_threads(),
        "close": CLOSE,
        "batches": list(BATCHES),  # offered by the widget; train_ms holds those measured
        "lengths": lengths,
        "rnn_layer": rnn_layer.model_dump(),
        "transformer_layer": transformer_layer.model_dump(),
        "repeats": TRAIN_REPEATS,
        "train_ms": train,
        "shipped": {
            "rnn": _encoder_facts(RNN_ATTENTION, rnn).model_dump(),
            "transformer": _encoder_facts(TRANSLATOR, tr).model_dump(),
            "repeats": TIMING_REPEATS,
            "rnn_ms": {str(n): _shown_ms(t) for n, t in zip(tokens, rnn_read)},
            "transformer_ms": {str(n): _shown_ms(t) for n, t in zip(tokens, tr_read)},
        },
    }


def write_steps_data(out: str | Path) -> Path:
    """Measure :func:`steps_data` with the shipped ``rnn-attention`` and ``ja-en`` and write it as
    JSON to ``out`` (the site's ``data/parallel-steps.json``).

    Shape:
        no tensors; returns ``out``.
    """
    from ...loading import load_model

    data = steps_data(load_model(RNN_ATTENTION, family="translate"), load_model(TRANSLATOR, family="translate"))
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def steps_response(data: dict, sentence: int, batch: int) -> StepsResponse:
    """The parallel-steps answer for a sentence of ``sentence`` tokens and ``batch``, from the
    measurements ``data`` (:func:`steps_data`); the page's engine computes the same
    (``static/engine/translation_views.js``, ``stepsResponse``).

    Raises:
        ValueError: ``batch`` or ``sentence`` is not in ``data``.

    Shape:
        no tensors.
    """
    if str(batch) not in data["train_ms"]:
        raise ValueError(f"batch must be one of {data['batches']}, got {batch}")
    shipped = data["shipped"]
    if str(sentence) not in shipped["rnn_ms"]:
        most = max(int(n) for n in shipped["rnn_ms"])
        raise ValueError(f"the sentence has {sentence} tokens; the measured times go up to {most} tokens")
    lengths = list(data["lengths"])
    rnn_ms, tr_ms = data["train_ms"][str(batch)]["rnn"], data["train_ms"][str(batch)]["transformer"]
    ratio = [r / t for r, t in zip(rnn_ms, tr_ms)]
    rnn_read, tr_read = shipped["rnn_ms"][str(sentence)], shipped["transformer_ms"][str(sentence)]
    shipped_rnn, shipped_tr = EncoderFacts(**shipped["rnn"]), EncoderFacts(**shipped["transformer"])
    return StepsResponse(
        sentence_tokens=sentence,
        sentence_rnn_steps=sentence,
        sentence_transformer_steps=1,
        training_rnn_steps=sentence,
        training_transformer_steps=1,
        generation_steps=sentence,
        batch=batch,
        batches=list(data["batches"]),
        lengths=lengths,
        rnn_layer=LayerFacts(**data["rnn_layer"]),
        transformer_layer=LayerFacts(**data["transformer_layer"]),
        rnn_steps=list(lengths),
        transformer_steps=[1] * len(lengths),
        rnn_train_ms=list(rnn_ms),
        transformer_train_ms=list(tr_ms),
        ratio=ratio,
        faster=[which_is_faster(r) for r in ratio],
        speedup=[max(r, 1 / r) for r in ratio],
        repeats=data["repeats"],
        threads=data["threads"],
        machine=data["machine"],
        shipped=ShippedReading(
            tokens=sentence,
            rnn=shipped_rnn,
            transformer=shipped_tr,
            rnn_steps=sentence * shipped_rnn.layers,
            transformer_steps=shipped_tr.layers,
            rnn_ms=rnn_read,
            transformer_ms=tr_read,
            faster=which_is_faster(rnn_read / tr_read),
            speedup=max(rnn_read, tr_read) / min(rnn_read, tr_read),
            repeats=shipped["repeats"],
        ),
    )


def add_routes(router: APIRouter, models: LessonModels, gate) -> None:
    """§1's endpoints: none. Both widgets compute in the page (issue 36): the translation with the
    ja-en translator exported to ONNX (``static/engine/translation_views.js``), the timings read
    from the site's measurements (``data/parallel-steps.json``, :func:`steps_data`).
    :func:`translation_view` and :func:`parallel_steps` stay as the references the page is
    tested against (tests/site/test_site_translate_browser.py)."""
