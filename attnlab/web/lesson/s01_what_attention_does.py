"""TODO docstring"""

from __future__ import annotations

import math
import threading
import time
import weakref

import torch
from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from .common import (
    DEFAULT_SENTENCE,
    LIVE,
    MAX_SENTENCE_CHARS,
    MAX_TRANSLATION_TOKENS,
    RNN_ATTENTION,
    TRANSLATOR,
    LessonModels,
    _check_source,
    _r5,
    run,
)

STEP_LENGTHS = (8, 16, 32, 64, 128)  # source lengths (tokens) of the §1 comparison


TIMING_REPEATS = 7  # timed runs per length and model (after two warm-ups); the fastest is shown


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
    ids = _check_source(translator, req.text, MAX_TRANSLATION_TOKENS)
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
        cross=_r5(cross),
        cross_mean=_r5(cross.mean(dim=1)),
        encoder_self=_r5(encoder_self),
        encoder_self_mean=_r5(encoder_self.mean(dim=1)),
    )


class StepsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        DEFAULT_SENTENCE, min_length=1, max_length=MAX_SENTENCE_CHARS, strict=True, description="a Japanese sentence"
    )


class EncoderFacts(BaseModel):
    model: str
    kind: str = Field(description="rnn or transformer")
    cell: str | None = Field(description="the RNN's cell (GRU, LSTM); null for the Transformer")
    layers: int
    width: int = Field(description="hidden width (RNN) or d_model (Transformer)")
    parameters: int


class StepsResponse(BaseModel):
    sentence_tokens: int = Field(description="the typed sentence's tokens for ja-en")
    lengths: list[int] = Field(description="source lengths compared (the sentence's among them)")
    rnn: EncoderFacts
    transformer: EncoderFacts
    rnn_steps: list[int] = Field(description="encoder steps that wait for the previous one: T per layer")
    transformer_steps: list[int] = Field(description="the same for the Transformer encoder: one per layer")
    training_rnn_steps: list[int] = Field(description="decoder steps in a row while training (target length T)")
    training_transformer_steps: list[int] = Field(description="the same for the Transformer decoder (teacher forcing)")
    generation_steps: list[int] = Field(description="tokens generated one after another (both models)")
    rnn_ms: list[float] = Field(description="measured time to encode one sentence of each length (fastest run)")
    transformer_ms: list[float]
    rnn_growth: float = Field(description="rnn_ms at the longest length / at the shortest")
    transformer_growth: float
    repeats: int
    threads: int = Field(description="torch threads of this process while timing")


def _count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def _encoder_facts(name: str, model: torch.nn.Module) -> EncoderFacts:
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
    models: tuple[torch.nn.Module, ...], lengths: list[int], repeats: int = TIMING_REPEATS
) -> list[list[float]]:
    """Wall time of each model's ``encode`` on one sentence of each length (random tokens): the
    fastest of ``repeats`` runs. The runs go round every model and length in turn, ``repeats``
    times, after two warm-up runs each, so that a moment when the machine is busy with something
    else slows one run of each rather than all the runs of one. Each model and length is measured
    once in this process, then remembered.

    Shape:
        src ``(1, length)`` per model and length → seconds ``[model][length]``
    """
    with _TIMES_LOCK:  # one measurement at a time: two at once would slow each other down
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


def parallel_steps(rnn_translator, transformer_translator, req: StepsRequest) -> StepsResponse:
    """The chain of steps that must wait for each other, and measured time, for the RNN encoder of
    ``rnn-attention`` and the Transformer encoder of ``ja-en``, at the typed sentence's length
    and at :data:`STEP_LENGTHS`.

    An RNN layer's state at position t needs its state at t − 1: T steps in a row per layer. A
    Transformer layer computes every position at once from the layer below: one step per layer.
    While training, the decoders are the same (teacher forcing gives the Transformer the whole
    target at once, behind its causal mask); while generating, both make one token after another.
    """
    sentence = len(_check_source(transformer_translator, req.text, transformer_translator.model.config.max_len))
    lengths = sorted(set(STEP_LENGTHS) | {sentence})
    rnn, tr = rnn_translator.model, transformer_translator.model
    rnn_facts, tr_facts = _encoder_facts(RNN_ATTENTION, rnn), _encoder_facts(TRANSLATOR, tr)
    rnn_s, tr_s = encoder_seconds((rnn, tr), lengths)
    rnn_ms, tr_ms = [1000 * t for t in rnn_s], [1000 * t for t in tr_s]
    return StepsResponse(
        sentence_tokens=sentence,
        lengths=lengths,
        rnn=rnn_facts,
        transformer=tr_facts,
        rnn_steps=[n * rnn_facts.layers for n in lengths],
        transformer_steps=[tr_facts.layers for _ in lengths],
        training_rnn_steps=[n * rnn.config.n_layers for n in lengths],
        training_transformer_steps=[tr.config.n_decoder_layers for _ in lengths],
        generation_steps=list(lengths),
        rnn_ms=rnn_ms,
        transformer_ms=tr_ms,
        rnn_growth=rnn_ms[-1] / rnn_ms[0],
        transformer_growth=tr_ms[-1] / tr_ms[0],
        repeats=TIMING_REPEATS,
        threads=torch.get_num_threads(),
    )


def add_routes(router: APIRouter, models: LessonModels, gate) -> None:
    """§1's endpoints."""

    @router.post("/api/lesson/translation", response_model=TranslationResponse, responses=LIVE)
    async def api_translation(req: TranslationRequest) -> TranslationResponse:
        """§1, §4: a sentence through the shipped ja→en translator (greedy): the source–target
        attention of each output token and the encoder's self-attention, every layer and head."""
        async with gate.slot():
            translator = await run(models.translator, TRANSLATOR, "the translation view")
            return await run(translation_view, translator, req)

    @router.post("/api/lesson/parallel-steps", response_model=StepsResponse, responses=LIVE)
    async def api_parallel_steps(req: StepsRequest) -> StepsResponse:
        """§1: steps that must wait for the previous one in the RNN encoder of rnn-attention and the
        Transformer encoder of ja-en, and their measured time per sentence."""
        async with gate.slot():
            what = "the RNN vs Transformer comparison"
            rnn = await run(models.translator, RNN_ATTENTION, what)
            transformer = await run(models.translator, TRANSLATOR, what)
            return await run(parallel_steps, rnn, transformer, req)
