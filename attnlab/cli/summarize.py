"""The command line of summarize: `attnlab train summarize` and `attnlab summarize`.

Parsing and printing only; the work is :mod:`attnlab.recipes.summarize`'s (and :mod:`attnlab.inference`'s).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from ..data.corpus import read_lines
from ..data.summaries import facts_splits, read_jsonl
from ..decode import check_beam
from ..loading import load_model
from ..metrics import rouge
from ..recipes import TrainJob
from ..recipes.summarize import SummarizeSetup, evaluate_facts, train_summarizer
from ..viz import plot_summary_attention
from .training import print_training


def train_command(
    *,
    out: Path = Path("runs/summarize"),
    train: Path | None = None,
    valid: Path | None = None,
    preset: str | None = None,
    n_train: int = 4000,
    epochs: int | None = None,
    minutes: float | None = None,
    seed: int | None = None,
    overrides: list[str] | None = None,
) -> TrainJob:
    """Train a pointer-generator summarizer (attention that can copy) on JSON lines {"document", "summary"}.

    Without --train it trains on the generated "facts" task — documents of news-like sentences
    whose invented names and numbers must be copied into the summary — and then scores ROUGE and
    the copy rate of those names on held-out documents (OUT/test.json). Writes OUT/best (the best
    model by validation ROUGE-L: weights, config, word vocabulary), OUT/last and OUT/log.jsonl.

    Args:
        out: output folder.
        train: training examples, one {"document": ..., "summary": ...} object per line (default: the
            generated facts task).
        valid: validation examples in the same format (default: 5% of --train held out; generated with the facts task).
        preset: facts, small or see2017 (default: facts for the generated task, small with --train).
        n_train: number of generated training documents (without --train).
        epochs: passes over the training data.
        minutes: stop training after this many minutes (evaluation time excluded).
        seed: random seed (generated data, split, data order, initialisation).
        overrides: further settings as key=value: model.coverage=true, train.lr=1e-3, vocab_size=20000.
    """
    if train is None and valid is not None:
        raise ValueError("--valid needs --train (the generated task makes its own validation documents)")

    def run(setup: SummarizeSetup) -> None:
        test = None
        if train is None:
            generated = facts_splits(n_train, seed=setup.train.seed)
            train_pairs, valid_pairs, test = generated.train, generated.valid, generated.test
        else:
            train_pairs = read_jsonl(train)
            valid_pairs = None if valid is None else read_jsonl(valid)
        summarizer, result = train_summarizer(setup, train_pairs, valid_pairs)
        print_training(result, out)
        if test is not None:
            scores = evaluate_facts(summarizer, test)
            (out / "test.json").write_text(json.dumps(scores, indent=2) + "\n")
            print(
                f"held-out generated documents: ROUGE-1 {100 * scores['rouge1']:.1f}  "
                f"ROUGE-2 {100 * scores['rouge2']:.1f}  ROUGE-L {100 * scores['rougeL']:.1f}  "
                f"names/numbers copied {100 * scores['copy_recall']:.1f}%  "
                f"({scores['n']} documents, beam {scores['beam']})"
            )

    preset = preset or ("facts" if train is None else "small")
    return TrainJob(preset, run, {}, overrides, out=out, minutes=minutes, epochs=epochs, seed=seed)


def summarize_command(
    text: list[str] | None = None,
    /,
    *,
    model: Path,
    input: Path | None = None,
    beam: int | None = None,
    max_len: int | None = None,
    attention_plot: Path | None = None,
    device: str = "cpu",
) -> int:
    """Summarise documents with a trained pointer-generator; optionally draw where it looked and what it copied.

    Prints one summary per document. With a JSON-lines --input whose records all have a
    "summary", ROUGE-1/2/L against those references is printed too (to stderr).

    Args:
        text: documents to summarise (or use --input).
        model: a folder written by `attnlab train summarize`.
        input: documents as JSON lines {"document": ...} (.jsonl), or one document per line.
        beam: beam size (default: the model's; 1 = greedy).
        max_len: longest summary in words (default: the model's).
        attention_plot: write the first summary's attention over its document here (PNG or SVG);
            each row is labelled with the probability that the word was copied (1 − p_gen).
        device: cpu, cuda or mps.
    """
    if beam is not None:
        check_beam(beam)  # before the model is loaded
    if max_len is not None and max_len < 1:
        raise ValueError(f"--max-len must be ≥ 1, got {max_len}")
    documents, references = list(text or []), []
    if input is not None:
        if input.suffix == ".jsonl":
            records = read_jsonl(input, require_summary=False)
            documents += [d for d, _ in records]
            references = [s for _, s in records]
        else:
            documents += [line for line in read_lines(input) if line.strip()]
    if not documents:
        raise ValueError("nothing to summarise: give documents or --input FILE")
    summarizer = load_model(model, device=device, family="summarize")
    results = summarizer.summarize(
        documents, beam_size=beam, max_len=max_len, return_attention=attention_plot is not None
    )
    for r in results:
        print(r.text, flush=True)
    if references and not text and all(s is not None for s in references):
        scores = rouge([r.text for r in results], [summarizer.normalise(s) for s in references])
        print(
            f"ROUGE-1 {100 * scores['rouge1']:.1f}  ROUGE-2 {100 * scores['rouge2']:.1f}  "
            f"ROUGE-L {100 * scores['rougeL']:.1f}  ({len(results)} documents)",
            file=sys.stderr,
        )
    if attention_plot is not None:
        plot_summary_attention(results[0], attention_plot)
        print(f"attention heatmap written to {attention_plot}", file=sys.stderr)
    return 0


#: The job's commands by name, as the CLI registers them.
COMMANDS: dict[str, Callable] = {"train summarize": train_command, "summarize": summarize_command}
