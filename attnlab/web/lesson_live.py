"""The lesson's widgets that run the shipped models: §1, §2, §4 and §7.

Every number here comes from the shipped model itself, run by attnlab's own code; the pages only
draw it. The models are loaded by :class:`attnlab.web.lesson.LessonModels` (a shipped model that is
not installed is a 503 naming it and ``make models ONLY=NAME``) and passed in.

- §1 :func:`translation_view`: one sentence through ``ja-en`` (greedy), the cross-attention of each
  output token (:attr:`attnlab.recipes.translate.Translation.cross_attention`) and the encoder's
  self-attention (also §4).
- §1 :func:`parallel_steps`: the steps that must wait for the previous one in the RNN encoder of
  ``rnn-attention`` (``T`` per layer) and in the Transformer encoder of ``ja-en`` (one per layer),
  and both encoders' measured time per sentence.
- §2 :func:`bottleneck_view`: ``rnn-plain`` and ``rnn-attention`` on a long list of numbers: the
  fixed vector the plain decoder reads at every step, and the attention RNN's alignment map.
- §2 :func:`bleu_by_length_view`: BLEU by source length of both RNNs on the bottleneck
  experiment's own test pairs (:func:`attnlab.metrics.bleu_by_length`), computed once and cached.
- §4 :func:`pronoun_view`: where MiniLM's "it" looks, in every layer and head.
- §7 :func:`shapes_view`: the shape of every tensor of ``ja-en`` for the sentence typed, recorded
  by hooks on a real forward pass.
- §7 :func:`next_token_view`: the next-character probabilities of ``shakespeare-char`` with a
  temperature and top-k (:func:`attnlab.decode.sampling_probs`).

Shape:
    translation: cross ``(L, H, T, S)``, encoder self ``(L, H, S, S)``; bottleneck: fixed vector
    ``(D,)``, alignment ``(T, S)``; pronoun: weights ``(L, H, S)``; next token: ``V`` entries
"""

from __future__ import annotations

import functools
import math
import os
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field

from ..data import enja
from ..data.tasks import make_splits
from ..decode import sample_next, sampling_probs
from ..experiments import bottleneck
from ..metrics import bleu, bleu_by_length

__all__ = [
    "TRANSLATOR",
    "RNN_PLAIN",
    "RNN_ATTENTION",
    "GPT_MODEL",
    "STEP_LENGTHS",
    "TranslationRequest",
    "translation_view",
    "StepsRequest",
    "parallel_steps",
    "BottleneckRequest",
    "bottleneck_view",
    "bottleneck_pairs",
    "long_examples",
    "bleu_by_length_view",
    "PronounRequest",
    "pronoun_view",
    "ShapesRequest",
    "shapes_view",
    "NextTokenRequest",
    "next_token_view",
]

#: The shipped models these widgets run (attnlab.assets).
TRANSLATOR = "ja-en"
RNN_PLAIN = "rnn-plain"
RNN_ATTENTION = "rnn-attention"
GPT_MODEL = "shakespeare-char"

MAX_SENTENCE_CHARS = 200
MAX_TRANSLATION_TOKENS = 48  # source tokens of a sentence shown as maps
MAX_NUMBER_LIST_CHARS = 600
MAX_NUMBER_LIST_TOKENS = 96
LONG_WORDS = 30  # §2's examples: test sources of at least this many words
STEP_LENGTHS = (8, 16, 32, 64, 128)  # source lengths (tokens) of the §1 comparison
TIMING_REPEATS = 7  # timed runs per length and model (after two warm-ups); the fastest is shown
MAX_PROMPT_CHARS = 1000
MAX_SEED = 1_000_000
DEFAULT_SENTENCE = "彼は昨日駅で古い友達に会った。"  # §1, §4: the verb jumps from last to second
SHAPES_SENTENCE = "この本はとても面白い。"  # §7: short, so the causal mask fits on the page


def _r(x: torch.Tensor, decimals: int = 5) -> list:
    return torch.round(x.detach().to(torch.float64), decimals=decimals).tolist()


def _source_ids(translator, text: str) -> list[int]:
    """The source ids :meth:`Translator.translate` reads for ``text`` (normalised as it does)."""
    normalized = enja.normalize_input(text, translator.src_lang) if translator.src_lang else text
    return translator.src_tok.encode(normalized)


def _check_source(translator, text: str, limit: int) -> list[int]:
    ids = _source_ids(translator, text)
    if not ids:
        raise ValueError(f"cannot translate {text[:60]!r}: it has no tokens")
    if len(ids) > limit:
        raise ValueError(f"the sentence has {len(ids)} tokens; this view shows at most {limit}")
    return ids


# --------------------------------------------------------------------------------------------
# §1 and §4: one sentence through the ja→en translator.
# --------------------------------------------------------------------------------------------


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
        cross=_r(cross),
        cross_mean=_r(cross.mean(dim=1)),
        encoder_self=_r(encoder_self),
        encoder_self_mean=_r(encoder_self.mean(dim=1)),
    )


# --------------------------------------------------------------------------------------------
# §1: what must wait in an RNN and in a Transformer.
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# §2: the bottleneck.
# --------------------------------------------------------------------------------------------


@functools.cache
def bottleneck_pairs() -> tuple[tuple[str, str], ...]:
    """The test pairs of the ``experiment bottleneck`` run the shipped RNNs come from (its
    generated task, sizes and seed, as :mod:`attnlab.experiments.assets` runs it): never seen in
    training. Generating the task takes a few seconds; it is done once."""
    from ..experiments.assets import RECIPES

    recipe = RECIPES[RNN_ATTENTION]
    settings = recipe.settings()
    splits = make_splits(settings.task, recipe.n_train, recipe.n_valid, recipe.n_test, seed=recipe.seed)
    return tuple(splits.test)


def long_examples() -> list[tuple[str, str]]:
    """The test pairs whose source has at least :data:`LONG_WORDS` words, in test-set order."""
    return [p for p in bottleneck_pairs() if len(p[0].split()) >= LONG_WORDS]


class BottleneckRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_NUMBER_LIST_CHARS,
        strict=True,
        description="numbers in English words joined by 'and'; null: a long test example",
    )
    example: int = Field(0, ge=0, le=MAX_SEED, strict=True, description="which long test example (wraps around)")


class PlainRNN(BaseModel):
    translation: str
    bleu: float | None = Field(description="BLEU of this one sentence (tokenizer char); null without a reference")
    exact: bool | None
    fixed_vector: list[float] = Field(description="(D,) the encoder's final state: all the decoder sees")


class AttentionRNN(BaseModel):
    translation: str
    bleu: float | None
    exact: bool | None
    tgt_tokens: list[str]
    alignment: list[list[float]] = Field(description="(T, S) the additive attention of each output token")
    memory_shape: list[int] = Field(description="(S, D): one vector per source token, all kept for the decoder")


class BottleneckResponse(BaseModel):
    source: str
    reference: str | None = Field(description="the test pair's target; null for a typed input not in the test set")
    example: int | None = Field(description="the long test example shown (null for a typed input)")
    n_examples: int
    words: int
    src_tokens: list[str]
    hidden_size: int
    plain: PlainRNN
    attention: AttentionRNN


def _score(hyp: str, ref: str | None) -> tuple[float | None, bool | None]:
    if ref is None:
        return None, None
    return bleu([hyp], [ref], tokenize="char"), hyp == ref


@torch.inference_mode()
def bottleneck_view(plain, attention, req: BottleneckRequest) -> BottleneckResponse:
    """A long list of numbers through the RNN without attention and the one with it.

    The plain RNN's decoder starts from and reads, at every step, one vector: the encoder's final
    state (:class:`attnlab.models.rnn_seq2seq.FixedContextDecoder`); it is returned as
    ``fixed_vector``, taken from the decoder state :meth:`RNNSeq2Seq.start` builds. The attention
    RNN keeps every encoder state and weights them anew for each output token (``alignment``).

    Shape:
        fixed_vector ``(D,)``; alignment ``(T, S)``
    """
    examples = long_examples()
    index: int | None = None
    if req.text is None:
        index = req.example % len(examples)
        source, reference = examples[index]
    else:
        source = req.text
        reference = dict(bottleneck_pairs()).get(source)
    ids = _check_source(attention, source, MAX_NUMBER_LIST_TOKENS)
    with_attention = attention.translate([source], beam_size=1, return_attention=True)[0]
    without = plain.translate([source], beam_size=1)[0]
    state = plain.model.start(torch.tensor([ids], device=plain.device))
    fixed = state.feed[0]  # (D,): the context FixedContextDecoder feeds at every step
    cross = with_attention.cross_attention  # (1, 1, T, S)
    plain_bleu, plain_exact = _score(without.text, reference)
    att_bleu, att_exact = _score(with_attention.text, reference)
    return BottleneckResponse(
        source=source,
        reference=reference,
        example=index,
        n_examples=len(examples),
        words=len(source.split()),
        src_tokens=with_attention.src_tokens,
        hidden_size=int(fixed.shape[0]),
        plain=PlainRNN(translation=without.text, bleu=plain_bleu, exact=plain_exact, fixed_vector=_r(fixed, 4)),
        attention=AttentionRNN(
            translation=with_attention.text,
            bleu=att_bleu,
            exact=att_exact,
            tgt_tokens=with_attention.tgt_tokens,
            alignment=_r(cross[-1].mean(0)),
            memory_shape=[len(ids), attention.model.config.hidden_size],
        ),
    )


class LengthModel(BaseModel):
    model: str
    bleu: float = Field(description="BLEU on all the test pairs used here")
    card_bleu: float | None = Field(description="the test BLEU in the model's card.json")
    by_length: list[float | None] = Field(description="BLEU of each bucket (null: empty bucket)")
    drop: float | None = Field(description="BLEU of the first non-empty bucket minus the last one")


class BleuByLengthResponse(BaseModel):
    n: int = Field(description="test pairs translated")
    data: str
    unit: str
    tokenize: str
    decoding: str
    buckets: list[list[int]] = Field(description="inclusive source-length ranges, in words")
    counts: list[int]
    models: list[LengthModel]


def _card_bleu(directory: Path | None) -> float | None:
    import json

    if directory is None or not (directory / "card.json").is_file():
        return None
    return json.loads((directory / "card.json").read_text(encoding="utf-8")).get("metrics", {}).get("bleu")


def _weights_key(directory: Path | None) -> tuple:
    if directory is None:
        return (None,)
    weights = directory / "model.safetensors"
    stat = os.stat(weights) if weights.exists() else None
    return (str(directory), stat.st_mtime_ns if stat else None, stat.st_size if stat else None)


_BLEU_CACHE: dict[tuple, BleuByLengthResponse] = {}
_BLEU_LOCK = threading.Lock()


@torch.inference_mode()
def bleu_by_length_view(models: dict[str, Any], directories: dict[str, Path | None]) -> BleuByLengthResponse:
    """BLEU by source length of each RNN on every test pair of the bottleneck experiment (greedy,
    tokenizer char, the experiment's buckets): the experiment's chart, remade with the shipped
    weights. Computed once per set of weights (a few seconds), then served from memory.

    ``models``: shipped name → translator; ``directories``: the same names → their folders (which
    key the cache and hold card.json).
    """
    key = tuple((name, _weights_key(directories.get(name))) for name in models)
    with _BLEU_LOCK:
        if key in _BLEU_CACHE:
            return _BLEU_CACHE[key]
        pairs = bottleneck_pairs()
        sources, references = [s for s, _ in pairs], [t for _, t in pairs]
        lengths = [len(s.split()) for s in sources]
        buckets = bottleneck.length_buckets(lengths)
        tokenize = bottleneck.bleu_tokenizer(references, None)
        rows = []
        for name, translator in models.items():
            hyps = [t.text for t in translator.translate(sources, beam_size=1)]
            by_length = bleu_by_length(
                sources, hyps, references, buckets=buckets, length_fn=lambda s: len(s.split()), tokenize=tokenize
            )
            filled = [b["bleu"] for b in by_length if b["bleu"] is not None]
            rows.append(
                LengthModel(
                    model=name,
                    bleu=bleu(hyps, references, tokenize=tokenize),
                    card_bleu=_card_bleu(directories.get(name)),
                    by_length=[b["bleu"] for b in by_length],
                    drop=filled[0] - filled[-1] if len(filled) >= 2 else None,
                )
            )
        from ..experiments.assets import RECIPES

        recipe = RECIPES[RNN_ATTENTION]
        response = BleuByLengthResponse(
            n=len(pairs),
            data=(
                f"the {len(pairs)} generated test pairs of `experiment bottleneck` "
                f"(task {recipe.settings().task}, seed {recipe.seed}), the pairs the models' cards are measured on"
            ),
            unit="words",
            tokenize=tokenize,
            decoding="greedy",
            buckets=[list(b) for b in buckets],
            counts=[sum(lo <= n <= hi for n in lengths) for lo, hi in buckets],
            models=rows,
        )
        _BLEU_CACHE[key] = response
        return response


# --------------------------------------------------------------------------------------------
# §4: the pronoun, in MiniLM.
# --------------------------------------------------------------------------------------------


MAX_MINILM_TOKENS = 40


def english_sentence() -> Any:
    """The ``text`` field of the requests that run an English sentence through MiniLM (§4, §5)."""
    return Field(
        "The animal didn't cross the street because it was too tired",
        min_length=1,
        max_length=200,
        strict=True,
        description="an English sentence",
    )


class PronounRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = english_sentence()
    pronoun: str = Field(
        "it", min_length=1, max_length=30, strict=True, description="the token whose attention is shown"
    )


class Strongest(BaseModel):
    layer: int
    head: int
    weight: float


class PronounResponse(BaseModel):
    model: str
    tokens: list[str]
    pronoun: int = Field(description="position of the pronoun (its first occurrence)")
    n_layers: int
    n_heads: int
    weights: list[list[list[float]]] = Field(description="(L, H, S) each head's weights from the pronoun")
    mean: list[list[float]] = Field(description="(L, S) the mean over heads")
    strongest: list[Strongest] = Field(description="per token: the layer and head that give it the most weight")


@torch.inference_mode()
def pronoun_view(model, req: PronounRequest) -> PronounResponse:
    """The row of the pronoun in every attention map of MiniLM (every layer, every head).

    Shape:
        weights ``(L, H, S)``: ``weights[l, h, j]`` = how much the pronoun attends to token ``j``
    """
    from ..models.bert import encode_with_masks

    tok = model.tokenizer
    bert = getattr(model.model, "bert", model.model)
    ids = encode_with_masks(tok, req.text)
    if len(ids) <= 2:
        raise ValueError(f"cannot encode {req.text!r}: it has no tokens")
    if len(ids) > MAX_MINILM_TOKENS:
        raise ValueError(f"the sentence has {len(ids)} tokens; this view shows at most {MAX_MINILM_TOKENS}")
    tokens = [tok.id_to_token(i) for i in ids]
    wanted = req.pronoun.strip().lower()
    if wanted not in tokens:
        shown = ", ".join(tokens[1:-1])
        raise ValueError(f"{req.pronoun!r} is not one of the sentence's tokens ({shown})")
    at = tokens.index(wanted)
    out = bert(torch.tensor([ids]), need_weights=True)
    weights = torch.stack([w[0, :, at] for w in out.attentions])  # L × (1, H, S, S) -> (L, H, S)
    L, H, S = weights.shape
    flat = weights.reshape(L * H, S)  # (L·H, S)
    best = flat.argmax(dim=0)  # (S,)
    strongest = [
        Strongest(layer=int(b) // H, head=int(b) % H, weight=round(float(flat[b, j]), 5)) for j, b in enumerate(best)
    ]
    return PronounResponse(
        model=model.name,
        tokens=tokens,
        pronoun=at,
        n_layers=L,
        n_heads=H,
        weights=_r(weights),
        mean=_r(weights.mean(dim=1)),
        strongest=strongest,
    )


# --------------------------------------------------------------------------------------------
# §7: the whole Transformer, tensor by tensor.
# --------------------------------------------------------------------------------------------


class ShapesRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        SHAPES_SENTENCE, min_length=1, max_length=MAX_SENTENCE_CHARS, strict=True, description="a Japanese sentence"
    )


class TensorShape(BaseModel):
    name: str = Field(description="what the tensor is (the page's label key)")
    shape: list[int]
    axes: str = Field(description="what each axis counts, e.g. 'B S D'")


class Part(BaseModel):
    id: str = Field(description="the diagram's box")
    tensors: list[TensorShape]


class ShapesResponse(BaseModel):
    model: str
    config: dict[str, Any] = Field(description="the ja-en model's config (config.json)")
    sizes: dict[str, int] = Field(description="the letters of the axes: B, S, T, D, H, Dh, F, V")
    src_tokens: list[str]
    tgt_in_tokens: list[str] = Field(description="the decoder's input: the start token, then the output shifted")
    tgt_tokens: list[str] = Field(description="what each decoder position predicts")
    translation: str
    parts: list[Part]
    same_in_every_layer: bool = Field(description="every encoder (decoder) layer had these shapes")
    causal_mask: list[list[bool]] = Field(description="(T, T) True: may attend (先を隠す工夫)")


class _Recorder:
    """Forward hooks that keep each module's inputs and output, call by call."""

    def __init__(self, modules: dict[str, torch.nn.Module]) -> None:
        self.calls: dict[str, list[tuple[tuple, dict, Any]]] = {name: [] for name in modules}
        self.handles = [
            m.register_forward_hook(self._hook(name), with_kwargs=True) for name, m in modules.items() if m is not None
        ]

    def _hook(self, name: str):
        def hook(module, args, kwargs, output):
            self.calls[name].append((args, kwargs, output))

        return hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def _shape(x: torch.Tensor) -> list[int]:
    return list(x.shape)


@torch.inference_mode()
def shapes_view(translator, req: ShapesRequest, name: str = TRANSLATOR) -> ShapesResponse:
    """Every part of the ``ja-en`` Transformer and the shapes of its tensors for ``req.text``.

    The sentence is translated (greedy); then one teacher-forced forward pass over the source and
    ``[BOS] + translation`` runs with hooks on the model's modules, which record the tensors that
    really flow. The per-head shapes come from the attention modules' own ``_split_heads``.

    Shape:
        the letters: B = 1 sentence, S source tokens, T decoder positions, D = d_model, H heads,
        Dh = D / H, F = d_ff, V target vocabulary
    """
    from ..functional import causal_mask

    model = translator.model
    c = model.config
    ids = _check_source(translator, req.text, MAX_TRANSLATION_TOKENS)
    tgt_tok = translator.tgt_tok
    tokens, produced = _greedy(translator, ids)
    tgt_in = [tgt_tok.bos_id] + produced[:-1]
    src = torch.tensor([ids], device=translator.device)  # (1, S)
    tgt = torch.tensor([tgt_in], device=translator.device)  # (1, T)
    enc0, dec0 = model.encoder[0], model.decoder[0]
    watched = {
        "src_embed": model.src_embed,
        "tgt_embed": model.tgt_embed if model.tgt_embed is not model.src_embed else None,
        "positions": model.positions,
        "encoder_norm": model.encoder_norm,
        "decoder_norm": model.decoder_norm,
        "out_proj": model.out_proj,
    }
    for i, block in enumerate(model.encoder):
        watched |= {f"enc{i}": block, f"enc{i}.self_attn": block.self_attn, f"enc{i}.ff.up": block.ff.up_proj}
        watched |= {f"enc{i}.ff": block.ff, f"enc{i}.attn_norm": block.attn_norm, f"enc{i}.ff_norm": block.ff_norm}
    for i, block in enumerate(model.decoder):
        watched |= {f"dec{i}": block, f"dec{i}.self_attn": block.self_attn, f"dec{i}.cross_attn": block.cross_attn}
        watched |= {f"dec{i}.ff.up": block.ff.up_proj, f"dec{i}.ff": block.ff, f"dec{i}.self_norm": block.self_norm}
        watched |= {f"dec{i}.cross_norm": block.cross_norm, f"dec{i}.ff_norm": block.ff_norm}
    rec = _Recorder(watched)
    try:
        out = model(src, tgt, need_weights=True)
    finally:
        rec.remove()
    calls = rec.calls
    embeds = calls["src_embed"] + calls["tgt_embed"]  # a shared embedding is called for both sides
    src_emb, tgt_emb = embeds[0][2], embeds[1][2]  # (1, S, D), (1, T, D)
    src_pos, tgt_pos = calls["positions"][0][2], calls["positions"][1][2]
    probs = torch.softmax(out.logits, dim=-1)  # (1, T, V)

    def layer_shapes(prefix: str, count: int, keys: list[str]) -> bool:
        def shapes(i: int) -> list:
            got = []
            for k in keys:
                for args, _kwargs, output in calls[f"{prefix}{i}{k}"]:
                    tensors = [a for a in args if isinstance(a, torch.Tensor)]
                    outs = output if isinstance(output, tuple) else (output,)
                    got.append([_shape(t) for t in tensors] + [_shape(o) for o in outs if isinstance(o, torch.Tensor)])
            return got

        first = shapes(0)
        return all(shapes(i) == first for i in range(1, count))

    same = layer_shapes("enc", c.n_encoder_layers, ["", ".self_attn", ".ff.up", ".ff"]) and layer_shapes(
        "dec", c.n_decoder_layers, ["", ".self_attn", ".cross_attn", ".ff.up", ".ff"]
    )

    def attention_tensors(attn: torch.nn.Module, call, side_q: str, side_k: str) -> list[TensorShape]:
        args, _kwargs, output = call
        query = args[0]
        key = args[1] if len(args) > 1 and isinstance(args[1], torch.Tensor) else query
        q = attn._split_heads(attn.q_proj(query))  # (B, H, Tq, Dh)
        k, v = attn.project_kv(key)  # (B, H, Tk, Dh) each
        return [
            TensorShape(name="query_in", shape=_shape(query), axes=f"B {side_q} D"),
            TensorShape(name="key_in", shape=_shape(key), axes=f"B {side_k} D"),
            TensorShape(name="q_heads", shape=_shape(q), axes=f"B H {side_q} Dh"),
            TensorShape(name="k_heads", shape=_shape(k), axes=f"B H {side_k} Dh"),
            TensorShape(name="v_heads", shape=_shape(v), axes=f"B H {side_k} Dh"),
            TensorShape(name="weights", shape=_shape(output.weights), axes=f"B H {side_q} {side_k}"),
            TensorShape(name="attn_out", shape=_shape(output.output), axes=f"B {side_q} D"),
        ]

    def residual_tensors(first_norm: str, next_norm: str, side: str) -> list[TensorShape]:
        # The sum x + sublayer(·) after the first attention: pre-norm feeds it to the next
        # LayerNorm, post-norm normalises it in the first one.
        residual = calls[next_norm][0][0][0] if c.norm == "pre" else calls[first_norm][0][0][0]
        return [
            TensorShape(name="norm_out", shape=_shape(calls[first_norm][0][2]), axes=f"B {side} D"),
            TensorShape(name="residual_out", shape=_shape(residual), axes=f"B {side} D"),
        ]

    enc_attn = calls["enc0.self_attn"][0]
    dec_self = calls["dec0.self_attn"][0]
    dec_cross = calls["dec0.cross_attn"][0]
    T = tgt.shape[1]
    mask = causal_mask(T)  # (T, T)
    self_tensors = attention_tensors(dec0.self_attn, dec_self, "T", "T")
    self_tensors.insert(5, TensorShape(name="causal_mask", shape=_shape(mask), axes="T T"))
    parts = [
        Part(
            id="src_embed",
            tensors=[
                TensorShape(name="ids", shape=_shape(src), axes="B S"),
                TensorShape(name="embedding", shape=_shape(src_emb), axes="B S D"),
                TensorShape(name="with_positions", shape=_shape(src_pos), axes="B S D"),
            ],
        ),
        Part(id="enc_self", tensors=attention_tensors(enc0.self_attn, enc_attn, "S", "S")),
        Part(id="enc_norm", tensors=residual_tensors("enc0.attn_norm", "enc0.ff_norm", "S")),
        Part(
            id="enc_ffn",
            tensors=[
                TensorShape(name="ffn_in", shape=_shape(calls["enc0.ff"][0][0][0]), axes="B S D"),
                TensorShape(name="ffn_hidden", shape=_shape(calls["enc0.ff.up"][0][2]), axes="B S F"),
                TensorShape(name="ffn_out", shape=_shape(calls["enc0.ff"][0][2]), axes="B S D"),
                TensorShape(name="block_out", shape=_shape(calls["enc0"][0][2].hidden), axes="B S D"),
            ],
        ),
        Part(
            id="memory",
            tensors=[TensorShape(name="memory", shape=_shape(calls["encoder_norm"][0][2]), axes="B S D")],
        ),
        Part(
            id="tgt_embed",
            tensors=[
                TensorShape(name="ids", shape=_shape(tgt), axes="B T"),
                TensorShape(name="embedding", shape=_shape(tgt_emb), axes="B T D"),
                TensorShape(name="with_positions", shape=_shape(tgt_pos), axes="B T D"),
            ],
        ),
        Part(id="dec_self", tensors=self_tensors),
        Part(id="dec_cross", tensors=attention_tensors(dec0.cross_attn, dec_cross, "T", "S")),
        Part(id="dec_norm", tensors=residual_tensors("dec0.self_norm", "dec0.cross_norm", "T")),
        Part(
            id="dec_ffn",
            tensors=[
                TensorShape(name="ffn_in", shape=_shape(calls["dec0.ff"][0][0][0]), axes="B T D"),
                TensorShape(name="ffn_hidden", shape=_shape(calls["dec0.ff.up"][0][2]), axes="B T F"),
                TensorShape(name="ffn_out", shape=_shape(calls["dec0.ff"][0][2]), axes="B T D"),
                TensorShape(name="block_out", shape=_shape(calls["dec0"][0][2].hidden), axes="B T D"),
            ],
        ),
        Part(
            id="output",
            tensors=[
                TensorShape(name="final_norm", shape=_shape(calls["decoder_norm"][0][2]), axes="B T D"),
                TensorShape(name="logits", shape=_shape(calls["out_proj"][0][2]), axes="B T V"),
                TensorShape(name="probs", shape=_shape(probs), axes="B T V"),
                TensorShape(name="next_token", shape=_shape(probs[0, -1]), axes="V"),
            ],
        ),
    ]
    config = {k: v for k, v in vars(c).items() if isinstance(v, (int, float, str, bool)) or v is None}
    sizes = {
        "B": 1,
        "S": len(ids),
        "T": T,
        "D": c.d_model,
        "H": c.n_heads,
        "Dh": c.d_model // c.n_heads,
        "F": c.d_ff,
        "V": c.tgt_vocab_size,
    }
    return ShapesResponse(
        model=name,
        config=config,
        sizes=sizes,
        src_tokens=[translator.src_tok.id_to_token(i) for i in ids],
        tgt_in_tokens=[tgt_tok.id_to_token(i) for i in tgt_in],
        tgt_tokens=[tgt_tok.id_to_token(i) for i in produced],
        translation=tgt_tok.decode(tokens),
        parts=parts,
        same_in_every_layer=same,
        causal_mask=mask.tolist(),
    )


def _greedy(translator, ids: list[int]) -> tuple[list[int], list[int]]:
    """The greedy translation's ids, and the same with the end token last when decoding stopped
    on it (what each decoder position predicts, as the explorer's model page shows them)."""
    from ..decode import greedy_decode

    model, tok = translator.model, translator.tgt_tok
    limit = min(2 * len(ids) + 10, getattr(model.config, "max_len", 512) - 1)
    src = torch.tensor([ids], device=translator.device)  # (1, S)
    hyp = greedy_decode(model, src, bos_id=tok.bos_id, eos_id=tok.eos_id, pad_id=tok.pad_id, max_len=limit)[0]
    return hyp.tokens, hyp.tokens + ([tok.eos_id] if len(hyp.tokens) < limit else [])


# --------------------------------------------------------------------------------------------
# §7: the next token of the shipped GPT.
# --------------------------------------------------------------------------------------------


class NextTokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        "To be, or not to be, that is the quest",
        min_length=1,
        max_length=MAX_PROMPT_CHARS,
        strict=True,
        description="the text so far",
    )
    temperature: float = Field(1.0, ge=0.0, le=5.0, allow_inf_nan=False, description="0: greedy")
    top_k: int | None = Field(None, ge=1, le=100_000, strict=True, description="keep the k most likely; null: all")
    sample: bool = Field(False, strict=True, description="also draw the next token from the distribution")
    seed: int = Field(0, ge=0, le=MAX_SEED, strict=True, description="the draw's random seed")


class TokenProb(BaseModel):
    id: int
    token: str
    logit: float
    p_model: float = Field(description="softmax of the logits (temperature 1, every token)")
    p: float = Field(description="after the temperature and top-k: what sampling draws from")


class NextTokenResponse(BaseModel):
    model: str
    context: str = Field(description="the characters the model read (the last n_positions)")
    truncated: bool
    n_positions: int
    vocab_size: int
    temperature: float
    top_k: int | None
    kept: int = Field(description="tokens whose probability is above 0 after top-k")
    tokens: list[TokenProb] = Field(description="every token, most likely first")
    sampled: TokenProb | None = Field(description="the token drawn (with seed), when asked")


@torch.inference_mode()
def next_token_view(model, tokenizer, req: NextTokenRequest, name: str = GPT_MODEL) -> NextTokenResponse:
    """The GPT's distribution over the next token after ``req.text``, before and after the
    temperature and top-k (:func:`attnlab.decode.sampling_probs`, what
    :func:`attnlab.decode.sample_next` draws from), and optionally one draw.

    Shape:
        ids ``(1, T)`` (the last ``n_positions`` tokens) → logits ``(V,)``
    """
    ids = tokenizer.encode(req.text)
    if not ids:
        raise ValueError("the text has no token the model knows")
    n_ctx = model.config.n_positions
    used = ids[-n_ctx:]
    logits = model(torch.tensor([used])).logits[0, -1].float()  # (1, T, V) -> (V,)
    p_model = torch.softmax(logits, dim=-1)  # (V,)
    p = sampling_probs(logits[None], temperature=req.temperature, top_k=req.top_k)[0]  # (V,)
    order = torch.argsort(logits, descending=True, stable=True)  # (V,)

    def entry(i: int) -> TokenProb:
        return TokenProb(
            id=i,
            token=tokenizer.id_to_token(i),
            logit=round(float(logits[i]), 6),
            p_model=float(p_model[i]),
            p=float(p[i]),
        )

    sampled = None
    if req.sample:
        g = torch.Generator().manual_seed(req.seed)
        token = sample_next(logits[None], temperature=req.temperature, top_k=req.top_k, generator=g)
        sampled = entry(int(token[0]))
    return NextTokenResponse(
        model=name,
        context=tokenizer.decode(used),
        truncated=len(used) < len(ids),
        n_positions=n_ctx,
        vocab_size=int(logits.shape[0]),
        temperature=req.temperature,
        top_k=req.top_k,
        kept=int((p > 0).sum()),
        tokens=[entry(int(i)) for i in order],
        sampled=sampled,
    )
