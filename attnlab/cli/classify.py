"""The command line of classify: `attnlab train classify` and `attnlab classify`.

Parsing and printing only; the work is :mod:`attnlab.recipes.classify`'s (and :mod:`attnlab.inference`'s).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from ..data.corpus import read_lines, read_tsv
from ..loading import load_model
from ..recipes import TrainJob
from ..recipes.classify import ClassifySetup, train_classifier
from ..viz import format_token_weights, plot_token_weights
from .training import print_training


def train_command(
    *,
    data: Path,
    valid: Path | None = None,
    out: Path = Path("runs/classify"),
    preset: str = "small",
    tokenizer: Literal["bpe", "unigram", "char"] | None = None,
    vocab_size: int | None = None,
    epochs: int | None = None,
    minutes: float | None = None,
    seed: int | None = None,
    overrides: list[str] | None = None,
) -> TrainJob:
    """Train an attention-pooling text classifier on label<TAB>text lines.

    A Transformer encoder reads each text and a learned query pools its token states by
    attention; `attnlab classify` shows which tokens got the weight. Without --valid, 10% of each
    label is held out for validation. Writes OUT/best (best validation accuracy), OUT/last and
    OUT/log.jsonl.

    Args:
        data: training examples, one label<TAB>text per line.
        valid: validation examples in the same format (default: hold out 10% of --data).
        out: output folder.
        preset: a named preset (model size + training settings): small, tiny, ja-sentence-type.
        tokenizer: bpe, unigram or char (default: the preset's, bpe).
        vocab_size: subword vocabulary size, or characters kept by char (default: the preset's).
        epochs: passes over the training data.
        minutes: stop training after this many minutes (evaluation time excluded).
        seed: random seed (split, data order, initialisation, dropout).
        overrides: further settings as key=value: model.n_layers=3, train.lr=1e-3, max_len=64.
    """

    def run(setup: ClassifySetup) -> None:
        train_pairs = read_tsv(data).pairs
        valid_pairs = None if valid is None else read_tsv(valid).pairs
        clf, result = train_classifier(setup, train_pairs, valid_pairs)
        print_training(result, out)
        print(f"labels: {', '.join(clf.labels)}")

    return TrainJob(
        preset,
        run,
        {"tokenizer": tokenizer, "vocab_size": vocab_size},
        overrides,
        out=out,
        minutes=minutes,
        epochs=epochs,
        seed=seed,
    )


def classify_command(
    text: list[str] | None = None,
    /,
    *,
    model: Path,
    input: Path | None = None,
    plot: Path | None = None,
    device: str = "cpu",
) -> int:
    """Classify texts with a trained attention-pooling classifier and show which tokens got the weight.

    Prints the label, the probabilities and one bar per token (its pooling weight).

    Args:
        text: texts to classify (or use --input).
        model: a folder written by `attnlab train classify`.
        input: a file of texts, one per line.
        plot: write a heatmap of the first text's token weights here (PNG or SVG).
        device: cpu, cuda or mps.
    """
    texts = list(text or [])
    if input is not None:
        texts += [line for line in read_lines(input) if line.strip()]
    if not texts:
        raise ValueError("nothing to classify: give texts or --input FILE")
    predictions = load_model(model, device=device, family="classify").predict(texts)
    for p in predictions:
        print(format_token_weights(p), flush=True)
    if plot is not None:
        plot_token_weights(predictions[0], plot)
        print(f"token weights written to {plot}", file=sys.stderr)
    return 0


#: The job's commands by name, as the CLI registers them.
COMMANDS: dict[str, Callable] = {"train classify": train_command, "classify": classify_command}
