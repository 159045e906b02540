"""The command line of qa: `attnlab train qa` and `attnlab answer`.

Parsing and printing only; the work is :mod:`attnlab.recipes.qa`'s (and :mod:`attnlab.inference`'s).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from ..data.squad import facts_splits, read_squad
from ..loading import load_model
from ..recipes import TrainJob
from ..recipes.qa import QASetup, train_qa
from ..viz import plot_question_attention
from .training import print_training


def train_command(
    *,
    out: Path = Path("runs/qa"),
    train: Path | None = None,
    valid: Path | None = None,
    preset: str | None = None,
    init: str | None = None,
    n_train: int | None = None,
    epochs: int | None = None,
    max_steps: int | None = None,
    minutes: float | None = None,
    seed: int | None = None,
    overrides: list[str] | None = None,
) -> TrainJob:
    """Fine-tune an extractive question answerer (a span head on BERT, from all-MiniLM-L6-v2) on SQuAD-format JSON.

    Without --train it trains on a generated SQuAD-format set of templated facts ("X was born in
    Y in YEAR." → "Where was X born?") and then scores exact match and F1 on held-out generated
    questions (OUT/test.json). Writes OUT/best (best validation F1: weights, config, tokenizer),
    OUT/last and OUT/log.jsonl.

    Args:
        out: output folder.
        train: training questions, SQuAD v1.1 JSON (data → paragraphs → context, qas) (default: generated).
        valid: validation questions in the same format (needed with --train).
        preset: squad, facts or toy (default: facts for the generated set, squad with --train); toy trains a
            small encoder from scratch on the generated set.
        init: encoder to start from: minilm (the packaged all-MiniLM-L6-v2), a HuggingFace BERT folder, or scratch.
        n_train: generated paragraphs to train on (two questions each; without --train; default: the preset's).
        epochs: passes over the training data.
        max_steps: stop after this many optimizer steps.
        minutes: stop training after this many minutes (evaluation time excluded).
        seed: random seed (generated data, data order, the span head's initialisation).
        overrides: further settings as key=value: train.lr=5e-5, max_length=256, doc_stride=64, model.dropout=0.0.
    """
    if (train is None) != (valid is None):
        raise ValueError("give both --train and --valid (SQuAD-format files), or neither for the generated set")

    def run(setup: QASetup) -> None:
        test = None
        if train is None:
            generated = facts_splits(setup.paragraphs, seed=setup.train.seed)
            train_examples, valid_examples, test = generated.train, generated.valid, generated.test
        else:
            train_examples, valid_examples = read_squad(train), read_squad(valid)
        answerer, result = train_qa(setup, train_examples, valid_examples)
        print_training(result, out)
        if test is not None:
            scores = answerer.evaluate(test)
            (out / "test.json").write_text(json.dumps(scores, indent=2) + "\n")
            print(
                f"held-out generated questions: exact match {100 * scores['exact_match']:.1f}  "
                f"F1 {100 * scores['f1']:.1f}  ({scores['n']} questions)"
            )

    preset = preset or ("facts" if train is None else "squad")
    return TrainJob(
        preset,
        run,
        {"init": init, "paragraphs": n_train},
        overrides,
        out=out,
        minutes=minutes,
        epochs=epochs,
        max_steps=max_steps,
        seed=seed,
    )


def answer_command(
    question: list[str] | None = None,
    /,
    *,
    model: Path,
    context: str | None = None,
    context_file: Path | None = None,
    input: Path | None = None,
    attention_plot: Path | None = None,
    layer: int = -1,
    device: str = "cpu",
) -> int:
    """Answer questions from a passage with a trained question answerer; show the question–passage attention.

    Prints one answer per question. With --input (a SQuAD-format file) it answers every question
    in it and prints exact match and F1 instead.

    Args:
        question: questions about the passage.
        model: a folder written by `attnlab train qa`.
        context: the passage to find the answers in.
        context_file: read the passage from this text file instead of --context.
        input: a SQuAD-format JSON file to score (exact match and F1).
        attention_plot: write the first answer's question × passage attention heatmap here (PNG or
            SVG; mean over the heads of --layer); a layer × head grid is written beside it with the suffix _grid.
        layer: encoder layer of the heatmap (0-based; -1 = the last).
        device: cpu, cuda or mps.
    """
    answerer = load_model(model, device=device, family="qa")
    if input is not None:
        if question or context is not None or context_file is not None:
            raise ValueError("--input scores a SQuAD file; do not also give questions or a context")
        scores = answerer.evaluate(read_squad(input))
        print(f"exact match {100 * scores['exact_match']:.1f}  F1 {100 * scores['f1']:.1f}  ({scores['n']} questions)")
        return 0
    if context_file is not None:
        if context is not None:
            raise ValueError("give --context or --context-file, not both")
        context = context_file.read_text(encoding="utf-8")
    if context is None or not context.strip():
        raise ValueError("give the passage with --context TEXT or --context-file FILE")
    questions = list(question or [])
    if not questions:
        raise ValueError("give at least one question")
    answers = answerer.answer(questions, [context] * len(questions), return_attention=attention_plot is not None)
    for a in answers:
        print(a.text, flush=True)
    if attention_plot is not None:
        plot_question_attention(answers[0], attention_plot, layer=layer)
        print(f"attention heatmaps written to {attention_plot} and its _grid companion", file=sys.stderr)
    return 0


#: The job's commands by name, as the CLI registers them.
COMMANDS: dict[str, Callable] = {"train qa": train_command, "answer": answer_command}
