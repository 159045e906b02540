"""§2 The Seq2Seq bottleneck: the two shipped RNN translators, without attention (``rnn-plain``)
and with additive attention (``rnn-attention``), on the long test inputs of the experiment they
come from.

Both widgets compute in the page (issue 36); the functions here are the references their tests
compare with:

- :func:`bottleneck_view`: one list of numbers (a long test example, or one typed) through both
  models: their translations and scores, the one fixed-length vector the decoder without attention
  reads, and the alignment (attention weights) of the one with it. The page runs both models'
  ONNX exports (``static/engine/rnn.js``, ``bottleneck``) on the test pairs of
  :func:`write_bottleneck_test` (``static/data/bottleneck-test.json``).
- :func:`bleu_by_length_view`: both models' BLEU by source length on every test pair of
  ``attnlab experiment bottleneck``, a measurement written at build time by
  :func:`write_bleu_by_length` (``static/data/bleu-by-length.json``) and read by the page.

Shape letters: ``S`` source tokens, ``T`` target tokens (characters, the end token last), ``D``
the RNN's state width.
"""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path
from typing import Any

import torch
from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from ...data.tasks import make_splits
from ...experiments import bottleneck
from ...metrics import bleu, bleu_by_length
from .common import (
    MAX_SEED,
    RNN_ATTENTION,
    RNN_PLAIN,
    LessonModels,
    checked_source_ids,
    rounded,
)

MAX_NUMBER_LIST_CHARS = 600


MAX_NUMBER_LIST_TOKENS = 96


LONG_WORDS = 30  # §2's examples: test sources of at least this many words


@functools.cache
def bottleneck_pairs() -> tuple[tuple[str, str], ...]:
    """The test pairs of the ``experiment bottleneck`` run the shipped RNNs come from (its
    generated task, sizes and seed, as :mod:`attnlab.build_assets` runs it): never seen in
    training. Generating the task takes a few seconds; it is done once."""
    from ...build_assets import BUILDS

    rnn_build = BUILDS[RNN_ATTENTION]
    settings = rnn_build.settings()
    splits = make_splits(settings.task, rnn_build.n_train, rnn_build.n_valid, rnn_build.n_test, seed=rnn_build.seed)
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
    ids = checked_source_ids(attention, source, MAX_NUMBER_LIST_TOKENS)
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
        plain=PlainRNN(translation=without.text, bleu=plain_bleu, exact=plain_exact, fixed_vector=rounded(fixed, 4)),
        attention=AttentionRNN(
            translation=with_attention.text,
            bleu=att_bleu,
            exact=att_exact,
            tgt_tokens=with_attention.tgt_tokens,
            alignment=rounded(cross[-1].mean(0), 5),
            memory_shape=[len(ids), attention.model.config.hidden_size],
        ),
    )


BLEU_DECIMALS = 1  # the page shows BLEU to one decimal


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
            # Scores as the page prints them (one decimal), so that the drop quoted beside them
            # follows from the two scores shown (89.6 − 31.5 reads 58.1).
            shown = [None if b["bleu"] is None else round(b["bleu"], BLEU_DECIMALS) for b in by_length]
            filled = [b for b in shown if b is not None]
            rows.append(
                LengthModel(
                    model=name,
                    bleu=round(bleu(hyps, references, tokenize=tokenize), BLEU_DECIMALS),
                    card_bleu=_card_bleu(directories.get(name)),
                    by_length=shown,
                    drop=round(filled[0] - filled[-1], BLEU_DECIMALS) if len(filled) >= 2 else None,
                )
            )
        from ...build_assets import BUILDS

        rnn_build = BUILDS[RNN_ATTENTION]
        response = BleuByLengthResponse(
            n=len(pairs),
            data=(
                f"the {len(pairs)} generated test pairs of `experiment bottleneck` "
                f"(task {rnn_build.settings().task}, seed {rnn_build.seed}), the pairs the models' cards are measured on"
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


def _json_file(out: Path, value: dict) -> Path:
    import json

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    return out


def write_bottleneck_test(out: str | Path) -> Path:
    """Write ``bottleneck-test.json``: the test pairs of :func:`bottleneck_pairs` (the page's long
    examples are the ones of at least :data:`LONG_WORDS` words; a typed list that is a test source
    gets its reference) and the page's limits.

    Shape:
        no tensors; ``{"pairs": [[source, target], …], "long_words", "max_chars", "max_tokens"}``
    """
    return _json_file(
        Path(out),
        {
            "pairs": [list(p) for p in bottleneck_pairs()],
            "long_words": LONG_WORDS,
            "max_chars": MAX_NUMBER_LIST_CHARS,
            "max_tokens": MAX_NUMBER_LIST_TOKENS,
        },
    )


def write_bleu_by_length(out: str | Path) -> Path:
    """Write ``bleu-by-length.json``: :func:`bleu_by_length_view` of the shipped pair (PyTorch,
    greedy, on this machine), labelled with the machine and the date it was measured on.

    Shape:
        no tensors; the view's fields plus ``measured: {machine, date}``
    """
    import datetime

    from ...assets import locate
    from ...loading import load_model
    from ...machine import cpu_name

    directories = {name: locate.shipped_model_dir(name) for name in (RNN_PLAIN, RNN_ATTENTION)}
    models = {name: load_model(folder, precision="fp32", family="translate") for name, folder in directories.items()}
    value = bleu_by_length_view(models, directories).model_dump()
    value["measured"] = {"machine": cpu_name(), "date": datetime.date.today().isoformat()}
    return _json_file(Path(out), value)


def add_routes(router: APIRouter, models: LessonModels, gate) -> None:
    """§2's endpoints: none; both widgets compute in the page (the module docstring)."""
