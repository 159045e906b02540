"""The text-classification recipe: ``label<TAB>text`` lines → tokenizer → attention-pooling classifier.

``attnlab train classify`` and ``attnlab classify`` are thin wrappers over
:func:`train_classifier`, :func:`load_classifier` and :meth:`TextClassifier.predict`. Every
prediction carries the pooling weights over its tokens, shown as terminal bars
(:func:`attnlab.viz.format_token_weights`) or a one-row heatmap (:func:`attnlab.viz.plot_token_weights`).

Shape letters: ``B`` batch, ``S`` tokens, ``C`` classes.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .. import checkpoint as ckpt
from ..assets.locate import resolve_model_dir
from ..data import batching, tokenizers
from ..inference.classify import ClassBatch, TextClassifier, collate_texts, encode_texts
from ..models.classifier import PRESETS as MODEL_PRESETS
from ..models.classifier import AttentionPoolClassifier, ClassifierConfig
from ..models.config import check_fields
from ..runs import check_run_folder
from ..train import TrainConfig, TrainResult, train
from . import STAND_IN_SIZE, Job

Tensor = torch.Tensor

__all__ = [
    "ClassifySetup",
    "PRESETS",
    "ClassificationTask",
    "split_validation",
    "train_classifier",
    "load_classifier",
]


@dataclass
class ClassifySetup:
    """Everything that defines a classification run besides the data."""

    model_preset: str = "small"  # key of attnlab.models.classifier.PRESETS
    model_overrides: dict = field(default_factory=dict)  # config fields set on top of the preset
    tokenizer: str = "bpe"  # "bpe", "unigram" or "char"
    vocab_size: int = 4000  # subword vocabulary size; "char" keeps this many most frequent characters (the rest: unk)
    max_len: int = 128  # texts are cut to their first max_len tokens (training and prediction)
    max_tokens: int = 4096  # padded tokens per batch (short texts: many per batch; lower it for more steps)
    valid_fraction: float = 0.1  # share of the training lines held out when no validation file is given
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        check_fields(
            self, positive=("vocab_size", "max_len", "max_tokens"), choices={"tokenizer": ("bpe", "unigram", "char")}
        )
        if not 0.0 < self.valid_fraction < 1.0:
            raise ValueError(f"valid_fraction must be between 0 and 1, got {self.valid_fraction}")


#: Named presets (``--preset``): a model size plus the training settings that suit it.
#: Every preset but tiny trains with precision="auto": bf16 autocast only where a short probe of the
#: model's steps on this machine measures it faster (attnlab.train.TrainingPrecision);
#: tiny (tests and smoke runs of seconds) stays fp32, so that its runs are the same on every machine.
PRESETS: dict[str, ClassifySetup] = {
    "small": ClassifySetup(
        max_tokens=1024, train=TrainConfig(epochs=5, lr=2e-3, warmup_steps=50, log_every=50, precision="auto")
    ),
    "tiny": ClassifySetup(
        model_preset="tiny",
        vocab_size=200,
        max_tokens=512,
        train=TrainConfig(epochs=3, lr=3e-3, warmup_steps=10, log_every=10, precision="fp32"),
    ),
    # The shipped ja-sentence-type model (the lesson's attention-pooling exercise): characters, so
    # that the pooling weights fall on single kana (か, な, た); the 500 most frequent characters
    # of the training text (the rest are unk) and one narrow block (26k parameters) keep it under
    # 100 KB in fp16. Training stops when validation accuracy has not improved for 3 epochs (or
    # after 30 epochs), never on the clock.
    "ja-sentence-type": ClassifySetup(
        model_preset="tiny",
        model_overrides=dict(dropout=0.1),
        tokenizer="char",
        vocab_size=500,
        max_len=64,
        max_tokens=2048,
        train=TrainConfig(epochs=30, lr=3e-3, warmup_steps=200, patience=3, log_every=100, precision="auto"),
    ),
}


class ClassificationTask:
    """Supplies :func:`attnlab.train.train` with batches, the loss and the evaluation (accuracy)."""

    metric = "accuracy"
    maximize = True

    def __init__(
        self,
        setup: ClassifySetup,
        model_config: ClassifierConfig,
        tokenizer,
        labels: Sequence[str],
        train_pairs: Sequence[tuple[str, str]],
        valid_pairs: Sequence[tuple[str, str]],
    ) -> None:
        self.setup, self.model_config, self.tokenizer = setup, model_config, tokenizer
        self.labels = list(labels)
        index = {name: i for i, name in enumerate(self.labels)}
        for what, pairs in (("training", train_pairs), ("validation", valid_pairs)):
            unknown = sorted({label for label, _ in pairs} - set(index))
            if unknown:
                raise ValueError(f"{what} labels {unknown} are not among the known labels {self.labels}")
        self.device = torch.device(setup.train.device)
        self.train_ids = encode_texts(tokenizer, [t for _, t in train_pairs], setup.max_len)
        self.train_y = [index[label] for label, _ in train_pairs]
        self.valid_ids = encode_texts(tokenizer, [t for _, t in valid_pairs], setup.max_len)
        self.valid_y = [index[label] for label, _ in valid_pairs]
        if not self.valid_ids:
            raise ValueError("the validation set is empty")

    def _batches(
        self, ids, ys, *, shuffle: bool, epoch: int = 0, rank: int = 0, world_size: int = 1
    ) -> list[ClassBatch]:
        lengths = [len(x) for x in ids]
        groups = batching.bucket_batches(
            lengths,
            [1] * len(ids),
            max_tokens=self.setup.max_tokens,
            shuffle=shuffle,
            seed=self.setup.train.seed,
            epoch=epoch,
            rank=rank,
            world_size=world_size,
        )
        pad = self.tokenizer.pad_id
        return [collate_texts([ids[i] for i in g], [ys[i] for i in g], pad).to(self.device) for g in groups]

    def batches(self, epoch: int, rank: int, world_size: int) -> list[ClassBatch]:
        return self._batches(self.train_ids, self.train_y, shuffle=True, epoch=epoch, rank=rank, world_size=world_size)

    def loss(self, model: nn.Module, batch: ClassBatch) -> tuple[Tensor, int]:
        out = model(batch.input_ids, batch.mask, labels=batch.labels)
        return out.loss, len(batch.labels)

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        correct, total_loss = 0, 0.0
        for b in self._batches(self.valid_ids, self.valid_y, shuffle=False):
            logits = model(b.input_ids, b.mask).logits  # (B, C)
            total_loss += F.cross_entropy(logits, b.labels, reduction="sum").item()
            correct += int((logits.argmax(-1) == b.labels).sum())
        n = len(self.valid_y)
        return {"accuracy": correct / n, "loss": total_loss / n}

    def checkpoint_payload(self) -> tuple[dict, dict]:
        config = dataclasses.asdict(self.model_config)
        config["labels"] = self.labels
        return config, {"tokenizer": self.tokenizer}


def split_validation(
    pairs: Sequence[tuple[str, str]], fraction: float, seed: int = 0
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Hold out ``fraction`` of each label's examples (at least one per label) for validation.

    Shape:
        N pairs → ``(train, valid)`` with about ``(1 - fraction)·N`` and ``fraction·N`` pairs.
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"valid_fraction must be between 0 and 1, got {fraction}")
    by_label: dict[str, list[tuple[str, str]]] = {}
    for pair in pairs:
        by_label.setdefault(pair[0], []).append(pair)
    rng = random.Random(f"attnlab/classify-split/{seed}")
    train_part, valid_part = [], []
    for label in sorted(by_label):
        group = list(by_label[label])
        if len(group) < 2:
            raise ValueError(f"label {label!r} has a single example; it cannot appear in training and validation")
        rng.shuffle(group)
        k = max(1, round(fraction * len(group)))
        valid_part += group[:k]
        train_part += group[k:]
    return train_part, valid_part


def _train_tokenizer(setup: ClassifySetup, texts: list[str]):
    if setup.tokenizer == "char":
        return tokenizers.CharTokenizer.train(texts, vocab_size=setup.vocab_size)
    if setup.tokenizer in ("bpe", "unigram"):
        return tokenizers.train_subword_tokenizer(texts, setup.vocab_size, model=setup.tokenizer)
    raise ValueError(f"tokenizer must be 'bpe', 'unigram' or 'char', got {setup.tokenizer!r}")


def build_config(setup: ClassifySetup, vocab_size: int, n_classes: int, pad_id: int) -> ClassifierConfig:
    """The classifier config of ``setup``: its preset, its overrides, and the sizes the data decides."""
    if setup.model_preset not in MODEL_PRESETS:
        raise ValueError(f"unknown classifier preset {setup.model_preset!r}; choose from {sorted(MODEL_PRESETS)}")
    fixed = sorted(set(setup.model_overrides) & {"vocab_size", "n_classes", "pad_id", "max_len"})
    if fixed:
        raise ValueError(
            f"model fields {fixed} come from the data and the tokenizer; "
            "set the text length with max_len=N, not model.max_len"
        )
    return ClassifierConfig(
        vocab_size=vocab_size,
        n_classes=n_classes,
        max_len=setup.max_len,
        pad_id=pad_id,
        **{**MODEL_PRESETS[setup.model_preset], **setup.model_overrides},
    )


def train_classifier(
    setup: ClassifySetup,
    train_pairs: Sequence[tuple[str, str]],
    valid_pairs: Sequence[tuple[str, str]] | None = None,
) -> tuple[TextClassifier, TrainResult]:
    """Train a tokenizer and an attention-pooling classifier on ``(label, text)`` pairs.

    Without ``valid_pairs``, ``setup.valid_fraction`` of each label is held out. Returns the best
    model by validation accuracy (reloaded from ``out_dir/best`` when the run writes one).

    Shape:
        N ``(label, text)`` pairs → a classifier over the ``C`` labels seen in training.
    """
    check_run_folder(setup.train.out_dir, False, setup.train.overwrite)  # before any work
    build_config(setup, STAND_IN_SIZE, 2, 0)  # a bad model setting fails before the tokenizer is trained
    train_pairs = list(train_pairs)
    if valid_pairs is None:
        train_pairs, valid_pairs = split_validation(train_pairs, setup.valid_fraction, setup.train.seed)
    if not valid_pairs:
        raise ValueError("the validation set is empty")
    labels = sorted({label for label, _ in train_pairs})
    if len(labels) < 2:
        raise ValueError(f"the training data has {len(labels)} label(s) {labels}; a classifier needs at least 2")
    tok = _train_tokenizer(setup, [t for _, t in train_pairs])
    torch.manual_seed(setup.train.seed)
    config = build_config(setup, tok.vocab_size, len(labels), tok.pad_id)
    model = AttentionPoolClassifier(config)
    task = ClassificationTask(setup, config, tok, labels, train_pairs, list(valid_pairs))
    result = train(model, task, setup.train)
    out = Path(setup.train.out_dir) if setup.train.out_dir else None
    if out is not None and (out / "best").is_dir():
        ckpt.load_weights(model, ckpt.load_checkpoint(out / "best"))
    model.eval()
    return TextClassifier(model, tok, labels, max_len=setup.max_len), result


def _config_and_labels(config_dict: dict) -> tuple[ClassifierConfig, list[str]]:
    labels = config_dict.pop("labels")
    config = ClassifierConfig(**config_dict)
    if not (isinstance(labels, list) and len(labels) == config.n_classes and all(isinstance(x, str) for x in labels)):
        raise ValueError(f"labels must be a list of {config.n_classes} label names (n_classes), got {labels!r}")
    return config, labels


def load_classifier(path: str | Path, device: str = "cpu") -> TextClassifier:
    """A classifier saved by :func:`train_classifier` (a run folder or its ``best`` checkpoint)."""
    directory = resolve_model_dir(path)
    checkpoint = ckpt.load_checkpoint(directory)
    config_dict = dict(checkpoint.config)
    if config_dict.get("model_type") != ClassifierConfig.model_type:
        raise ValueError(
            f"{directory}: model_type {config_dict.get('model_type')!r} is not a text classifier "
            f"({ClassifierConfig.model_type!r})"
        )
    config, labels = checkpoint.make_config(_config_and_labels)
    model = AttentionPoolClassifier(config)
    ckpt.load_weights(model, checkpoint)
    model.to(device).eval()
    tok = tokenizers.load_tokenizer(directory / "tokenizer.json")
    return TextClassifier(model, tok, labels, max_len=config.max_len)


CLASSIFY_JOB = Job(
    name="classify",
    presets=PRESETS,
    setup_cls=ClassifySetup,
    model_config=ClassifierConfig,
    train=train_classifier,
    load=load_classifier,
    check_model=lambda setup: build_config(setup, STAND_IN_SIZE, 2, 0),
)
