"""The summarization recipe: JSON lines ``{"document", "summary"}`` → word vocabulary → pointer-generator → ROUGE.

``attnlab train summarize`` and ``attnlab summarize`` are thin wrappers over
:func:`train_summarizer`, :func:`load_summarizer` and :meth:`Summarizer.summarize`.

Why words and not subwords: the pointer-generator's point is the *out-of-vocabulary* word —
a name or number the vocabulary lacks, which the model copies from the document through the
extended vocabulary (:mod:`attnlab.models.pointer_generator`). A subword tokenizer has no such
words (it spells them in pieces), so See et al. (2017) and this recipe use a word vocabulary of the
most frequent training words (:class:`attnlab.data.tokenizers.WordVocab`): text is split into
words and punctuation (lower-cased by default, as See et al.), and summaries come out as those
tokens joined by spaces.
ROUGE is computed on the same tokenization of hypothesis and reference.

Data: JSON lines read by :func:`attnlab.data.summaries.read_jsonl`; without training files the
recipe uses the generated "facts" task of :mod:`attnlab.data.text_tasks`
(:func:`attnlab.data.summaries.facts_splits`), whose names and numbers must be copied.

Shape:
    documents → summaries (strings); batches ``(B, S)`` documents and ``(B, T)`` summaries in
    extended ids; attention ``(T, S)`` per summary. ``V_ext`` is the extended vocabulary.
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from .. import checkpoint as ckpt
from ..assets.locate import resolve_model_dir
from ..data import batching
from ..data.text_tasks import SummaryExample
from ..data.tokenizers import WordVocab
from ..decode import check_beam
from ..inference.summarize import Encoded, Summarizer, encode_example
from ..metrics import rouge
from ..models.config import check_fields
from ..models.pointer_generator import PRESETS as MODEL_PRESETS
from ..models.pointer_generator import PointerGenerator, PointerGeneratorConfig
from ..runs import check_run_folder
from ..train import TrainConfig, TrainResult, train
from . import STAND_IN_SIZE, Job

Tensor = torch.Tensor

__all__ = [
    "PRESETS",
    "SummarizationTask",
    "SummarizeSetup",
    "copy_recall",
    "evaluate_facts",
    "load_summarizer",
    "split_validation",
    "train_summarizer",
]


# --------------------------------------------------------------------------------------------
# Settings and data.
# --------------------------------------------------------------------------------------------


@dataclass
class SummarizeSetup:
    """Everything that defines a summarization run besides the data."""

    model_preset: str = "small"  # key of attnlab.models.pointer_generator.PRESETS
    model_overrides: dict = field(default_factory=dict)  # config fields set on top of the preset
    vocab_size: int = 50000  # words in the vocabulary incl. 4 special tokens (See et al.: 50k)
    min_count: int = 2  # a word must occur this often in the training data to enter the vocabulary
    lowercase: bool = True  # lower-case all text before splitting (See et al. did)
    max_src_len: int = 400  # documents are cut to their first words (See et al.: 400)
    max_tgt_len: int = 100  # training summaries are cut to their first words (See et al.: 100)
    max_summary_len: int = 120  # longest generated summary in words (See et al.: 120 at test time)
    max_tokens: int = 8192  # padded words per batch (documents, the longer side)
    valid_fraction: float = 0.05  # share of the training examples held out when no validation file is given
    eval_examples: int = 200  # validation documents summarised for ROUGE at each evaluation
    eval_beam: int = 1  # beam size during training-time evaluation (1 = greedy, fastest)
    beam_size: int = 4  # beam size when the trained model summarises (See et al.: 4)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        check_fields(
            self,
            positive=(
                "vocab_size",
                "min_count",
                "max_src_len",
                "max_tgt_len",
                "max_summary_len",
                "max_tokens",
                "eval_examples",
            ),
        )
        if not 0.0 < self.valid_fraction < 1.0:
            raise ValueError(f"valid_fraction must be between 0 and 1, got {self.valid_fraction}")
        check_beam(self.eval_beam)
        check_beam(self.beam_size)


#: Named presets (``--preset``): a model size plus the training settings that suit it.
#: "facts" is the generated task of attnlab.data.text_tasks (tests and the default demo).
#: Every preset trains with precision="auto": bf16 autocast only where a short probe of the
#: model's steps on this machine measures it faster (attnlab.train.TrainingPrecision).
PRESETS: dict[str, SummarizeSetup] = {
    "facts": SummarizeSetup(
        model_preset="tiny",
        vocab_size=2000,
        min_count=3,
        max_src_len=120,
        max_tgt_len=60,
        max_summary_len=60,
        max_tokens=2048,
        eval_examples=100,
        beam_size=1,
        train=TrainConfig(
            epochs=4,
            lr=3e-3,
            warmup_steps=20,
            schedule="constant",
            weight_decay=0.0,
            betas=(0.9, 0.999),
            eps=1e-8,
            log_every=20,
            precision="auto",
        ),
    ),
    "small": SummarizeSetup(
        max_tokens=8192,
        train=TrainConfig(
            epochs=10,
            lr=1e-3,
            warmup_steps=200,
            schedule="constant",
            betas=(0.9, 0.999),
            eps=1e-8,
            clip_norm=2.0,
            precision="auto",
        ),
    ),
    "see2017": SummarizeSetup(
        model_preset="see2017",
        max_tokens=16 * 400,
        train=TrainConfig(
            epochs=30,
            lr=1e-3,
            warmup_steps=200,
            schedule="constant",
            betas=(0.9, 0.999),
            eps=1e-8,
            clip_norm=2.0,
            precision="auto",
        ),
    ),
}


def split_validation(pairs: Sequence, fraction: float, seed: int = 0) -> tuple[list, list]:
    """Hold out ``fraction`` of the examples (at least one) for validation, chosen by ``seed``.

    Shape:
        N items → ``(train, valid)`` with about ``(1 − fraction)·N`` and ``fraction·N`` items.
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"valid_fraction must be between 0 and 1, got {fraction}")
    if len(pairs) < 2:
        raise ValueError(f"need at least 2 examples to hold some out for validation, got {len(pairs)}")
    order = list(range(len(pairs)))
    random.Random(f"attnlab/summarize-split/{seed}").shuffle(order)
    k = max(1, round(fraction * len(pairs)))
    held = set(order[:k])
    return [p for i, p in enumerate(pairs) if i not in held], [pairs[i] for i in sorted(held)]


# --------------------------------------------------------------------------------------------
# The trainer's task.
# --------------------------------------------------------------------------------------------


class SummarizationTask:
    """Supplies :func:`attnlab.train.train` with batches, the loss and the evaluation (ROUGE)."""

    metric = "rougeL"
    maximize = True

    def __init__(
        self,
        setup: SummarizeSetup,
        model_config: PointerGeneratorConfig,
        vocab: WordVocab,
        train_pairs: Sequence[tuple[str, str]],
        valid_pairs: Sequence[tuple[str, str]],
    ) -> None:
        self.setup, self.model_config, self.vocab = setup, model_config, vocab
        self.device = torch.device(setup.train.device)
        self.train_data = [encode_example(vocab, d, s, setup.max_src_len, setup.max_tgt_len) for d, s in train_pairs]
        self.train_data = [e for e in self.train_data if e.tgt]
        if not self.train_data:
            raise ValueError("no training example has a non-empty summary")
        self.valid_pairs = list(valid_pairs)[: setup.eval_examples]
        if not self.valid_pairs:
            raise ValueError("the validation set is empty")
        self.valid_data = [encode_example(vocab, d, s, setup.max_src_len, None) for d, s in self.valid_pairs]

    def _collate(self, items: Sequence[Encoded]) -> batching.Seq2SeqBatch:
        v = self.vocab
        pairs = [(e.src, e.tgt) for e in items]
        return batching.collate_pairs(pairs, pad_id=v.pad_id, bos_id=v.bos_id, eos_id=v.eos_id).to(self.device)

    def _batches(
        self, data: Sequence[Encoded], *, shuffle: bool, epoch: int = 0, rank: int = 0, world_size: int = 1
    ) -> list[batching.Seq2SeqBatch]:
        groups = batching.bucket_batches(
            [len(e.src) for e in data],
            [len(e.tgt) + 1 for e in data],
            max_tokens=self.setup.max_tokens,
            shuffle=shuffle,
            seed=self.setup.train.seed,
            epoch=epoch,
            rank=rank,
            world_size=world_size,
        )
        return [self._collate([data[i] for i in g]) for g in groups]

    def batches(self, epoch: int, rank: int, world_size: int) -> list[batching.Seq2SeqBatch]:
        return self._batches(self.train_data, shuffle=True, epoch=epoch, rank=rank, world_size=world_size)

    def loss(self, model: nn.Module, batch: batching.Seq2SeqBatch) -> tuple[Tensor, int]:
        out = model(batch.src, batch.tgt_in, src_mask=batch.src_mask, labels=batch.tgt_out)
        return out.loss, batch.n_tgt_tokens

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        total, count = 0.0, 0
        for b in self._batches(self.valid_data, shuffle=False):
            out = model(b.src, b.tgt_in, src_mask=b.src_mask, labels=b.tgt_out)
            total += float(out.nll) * b.n_tgt_tokens
            count += b.n_tgt_tokens
        summarizer = Summarizer(
            model, self.vocab, max_src_len=self.setup.max_src_len, max_summary_len=self.setup.max_summary_len
        )
        hyps = [s.text for s in summarizer.summarize([d for d, _ in self.valid_pairs], beam_size=self.setup.eval_beam)]
        scores = rouge(hyps, [summarizer.normalise(r) for _, r in self.valid_pairs])
        return {"loss": total / max(count, 1), **scores}

    def checkpoint_payload(self) -> tuple[dict, dict]:
        config = dataclasses.asdict(self.model_config)
        s = self.setup
        config.update(max_src_len=s.max_src_len, max_summary_len=s.max_summary_len, beam_size=s.beam_size)
        return config, {"vocab": self.vocab}


# --------------------------------------------------------------------------------------------
# Training and loading.
# --------------------------------------------------------------------------------------------


def build_config(setup: SummarizeSetup, vocab_size: int, pad_id: int, unk_id: int) -> PointerGeneratorConfig:
    """The pointer-generator config of ``setup``: its preset, its overrides, and the vocabulary's sizes."""
    if setup.model_preset not in MODEL_PRESETS:
        raise ValueError(
            f"unknown pointer-generator preset {setup.model_preset!r}; choose from {sorted(MODEL_PRESETS)}"
        )
    fixed = sorted(set(setup.model_overrides) & {"vocab_size", "pad_id", "unk_id"})
    if fixed:
        raise ValueError(f"model fields {fixed} come from the vocabulary; set the size with vocab_size=N")
    return PointerGeneratorConfig(
        vocab_size=vocab_size,
        pad_id=pad_id,
        unk_id=unk_id,
        **{**MODEL_PRESETS[setup.model_preset], **setup.model_overrides},
    )


def train_summarizer(
    setup: SummarizeSetup,
    train_pairs: Sequence[tuple[str, str]],
    valid_pairs: Sequence[tuple[str, str]] | None = None,
) -> tuple[Summarizer, TrainResult]:
    """Build the word vocabulary and train a pointer-generator on ``(document, summary)`` pairs.

    Without ``valid_pairs``, ``setup.valid_fraction`` of the examples is held out. Returns the best
    model by validation ROUGE-L (reloaded from ``out_dir/best`` when the run writes one).

    Shape:
        N ``(document, summary)`` pairs → a :class:`Summarizer`.
    """
    check_run_folder(setup.train.out_dir, False, setup.train.overwrite)  # before any work
    build_config(setup, STAND_IN_SIZE, 0, 1)  # a bad model setting fails before the vocabulary is built
    train_pairs = list(train_pairs)
    if valid_pairs is None:
        train_pairs, valid_pairs = split_validation(train_pairs, setup.valid_fraction, setup.train.seed)
    if not valid_pairs:
        raise ValueError("the validation set is empty")
    vocab = WordVocab.build(
        (t for pair in train_pairs for t in pair),
        max_size=setup.vocab_size,
        min_count=setup.min_count,
        lowercase=setup.lowercase,
    )
    torch.manual_seed(setup.train.seed)
    config = build_config(setup, vocab.vocab_size, vocab.pad_id, vocab.unk_id)
    model = PointerGenerator(config)
    task = SummarizationTask(setup, config, vocab, train_pairs, list(valid_pairs))
    result = train(model, task, setup.train)
    out = Path(setup.train.out_dir) if setup.train.out_dir else None
    if out is not None and (out / "best").is_dir():
        ckpt.load_weights(model, ckpt.load_checkpoint(out / "best"))
    model.eval()
    return Summarizer(
        model, vocab, max_src_len=setup.max_src_len, max_summary_len=setup.max_summary_len, beam_size=setup.beam_size
    ), result


def load_summarizer(path: str | os.PathLike, device: str = "cpu") -> Summarizer:
    """A summarizer saved by :func:`train_summarizer` (a run folder or its ``best`` checkpoint).

    Shape:
        a checkpoint directory → a :class:`Summarizer`
    """
    directory = resolve_model_dir(path)
    checkpoint = ckpt.load_checkpoint(directory)
    config_dict = dict(checkpoint.config)
    if config_dict.get("model_type") != PointerGeneratorConfig.model_type:
        raise ValueError(
            f"{directory}: model_type {config_dict.get('model_type')!r} is not a summarizer "
            f"({PointerGeneratorConfig.model_type!r})"
        )
    names = {f.name for f in dataclasses.fields(PointerGeneratorConfig)}
    settings = ("max_src_len", "max_summary_len", "beam_size")  # checked as a SummarizeSetup's
    config, kept = checkpoint.make_config(
        lambda d: (
            PointerGeneratorConfig(**{k: v for k, v in d.items() if k in names}),
            SummarizeSetup(**{k: d[k] for k in settings}),
        )
    )
    model = PointerGenerator(config)
    ckpt.load_weights(model, checkpoint)
    model.to(device).eval()
    vocab = WordVocab.load(directory / "vocab.json")
    return Summarizer(
        model, vocab, max_src_len=kept.max_src_len, max_summary_len=kept.max_summary_len, beam_size=kept.beam_size
    )


def evaluate_facts(
    summarizer: Summarizer, examples: Sequence[SummaryExample], *, beam_size: int | None = None
) -> dict[str, float]:
    """ROUGE-1/2/L (0–1) and the copy rate of the invented names and numbers on generated examples.

    Shape:
        N examples → ``{"rouge1", "rouge2", "rougeL", "copy_recall", "n", "beam"}``
    """
    beam = summarizer.beam_size if beam_size is None else beam_size
    out = summarizer.summarize([e.document for e in examples], beam_size=beam)
    hyps = [s.text for s in out]
    return {
        **rouge(hyps, [summarizer.normalise(e.summary) for e in examples]),
        "copy_recall": copy_recall(hyps, [e.rare for e in examples]),
        "n": len(examples),
        "beam": beam,
    }


def copy_recall(summaries: Sequence[str], rare: Sequence[Sequence[str]]) -> float:
    """Fraction of the rare words (names, numbers) that appear in the corresponding summaries.

    Shape:
        N summaries and N word lists → a number in [0, 1]
    """
    if len(summaries) != len(rare):
        raise ValueError(f"{len(summaries)} summaries but {len(rare)} rare-word lists")
    hits = total = 0
    for text, words in zip(summaries, rare):
        present = set(text.split())
        hits += sum(w in present for w in words)
        total += len(words)
    if total == 0:
        raise ValueError("no rare words to look for")
    return hits / total


SUMMARIZE_JOB = Job(
    name="summarize",
    presets=PRESETS,
    setup_cls=SummarizeSetup,
    model_config=PointerGeneratorConfig,
    train=train_summarizer,
    load=load_summarizer,
    check_model=lambda setup: build_config(setup, STAND_IN_SIZE, 0, 1),
)
