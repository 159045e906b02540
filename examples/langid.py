"""Language identification (English / German / Japanese) with the attention-pooling classifier.

Builds ``label<TAB>text`` files from the corpora in ``/work/shared/data`` (or ``--data``) into
``--out`` (default ``outputs/langid``, never inside the package), trains the classifier, reports
held-out accuracy (overall and per language) and writes a pooling-weight heatmap per language.

Sources, with the official splits kept apart (train / validation / test):

- English and German: Multi30k (``train``, ``val``, ``test_2016_flickr``). The two files are
  translations of each other, so English takes the even-numbered lines and German the odd ones:
  no sentence's translation is in the data under the other label.
- Japanese: small_parallel_enja (``train``, ``dev``, ``test``). Its Japanese side is
  word-segmented with spaces; the spaces are removed to get raw Japanese as it is written.

Run (under a minute on two CPU cores at the default size; whole sentences are easy, two-word
snippets are not)::

    python examples/langid.py --per-language 3000 --epochs 3
    python examples/langid.py --per-language 3000 --epochs 3 --max-words 2 --out outputs/langid-2w

The same training from the command line, on the files this script writes::

    attnlab train classify --data outputs/langid/train.tsv --valid outputs/langid/valid.tsv \\
        --out outputs/langid/model --epochs 3
    attnlab classify --model outputs/langid/model "Ein Hund läuft über die Wiese." --plot dog.png
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from attnlab.data.corpus import read_lines
from attnlab.recipes import classify as C
from attnlab.viz import format_token_weights, plot_token_weights

SPLITS = {  # our split → (Multi30k file stem, small_parallel_enja file stem)
    "train": ("train", "train"),
    "valid": ("val", "dev"),
    "test": ("test_2016_flickr", "test"),
}


def build_split(
    data: Path, split: str, per_language: int | None, max_words: int | None = None, seed: int = 0
) -> list[tuple[str, str]]:
    """``(label, text)`` pairs of one split, at most ``per_language`` per language, in file order.

    With ``max_words`` each sentence is cut to a random window of that many words (Japanese:
    of its segmented words, joined afterwards), which removes the give-away first word ("A",
    "Ein") and makes English vs German a real task.
    """
    import random

    rng = random.Random(f"langid/{split}/{seed}")
    m30k, enja = SPLITS[split]
    sources = (
        ("en", read_lines(data / "multi30k" / f"{m30k}.en")[0::2], " "),
        ("de", read_lines(data / "multi30k" / f"{m30k}.de")[1::2], " "),
        ("ja", read_lines(data / "small_parallel_enja" / f"{enja}.ja"), ""),
    )
    pairs = []
    for label, lines, joiner in sources:
        kept = 0
        for line in lines:
            words = line.split()
            if not words:
                continue
            if max_words is not None and len(words) > max_words:
                start = rng.randrange(len(words) - max_words + 1)
                words = words[start : start + max_words]
            pairs.append((label, joiner.join(words)))
            kept += 1
            if per_language is not None and kept == per_language:
                break
    return pairs


def write_tsv(pairs: list[tuple[str, str]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{label}\t{text}\n" for label, text in pairs), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, default=Path("/work/shared/data"), help="folder holding multi30k/ and small_parallel_enja/"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("outputs/langid"), help="where the TSV files, model and figures go"
    )
    parser.add_argument("--per-language", type=int, default=3000, help="training sentences per language")
    parser.add_argument("--eval-per-language", type=int, default=500, help="validation and test sentences per language")
    parser.add_argument(
        "--max-words", type=int, default=None, help="cut every sentence to a random window of this many words"
    )
    parser.add_argument("--epochs", type=int, default=3, help="passes over the training data")
    parser.add_argument("--max-tokens", type=int, default=None, help="padded tokens per batch (default: the preset's)")
    parser.add_argument("--preset", default="small", help="classifier preset: " + ", ".join(sorted(C.PRESETS)))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    for sub in ("multi30k", "small_parallel_enja"):
        if not (args.data / sub).is_dir():
            raise SystemExit(
                f"{args.data / sub}: not found (point --data at the folder holding multi30k/ and small_parallel_enja/)"
            )
    files = {}
    for split, n in (("train", args.per_language), ("valid", args.eval_per_language), ("test", args.eval_per_language)):
        files[split] = write_tsv(build_split(args.data, split, n, args.max_words, args.seed), args.out / f"{split}.tsv")
    print("data: " + ", ".join(f"{s} {p}" for s, p in files.items()))

    from attnlab.data.corpus import read_tsv

    train_pairs, valid_pairs, test_pairs = (read_tsv(files[s]).pairs for s in ("train", "valid", "test"))
    base = C.PRESETS[args.preset]
    if args.max_tokens is not None:
        base = dataclasses.replace(base, max_tokens=args.max_tokens)
    setup = dataclasses.replace(
        base, train=dataclasses.replace(base.train, out_dir=str(args.out / "model"), epochs=args.epochs, seed=args.seed)
    )
    start = time.perf_counter()
    clf, result = C.train_classifier(setup, train_pairs, valid_pairs)
    minutes = (time.perf_counter() - start) / 60
    scores = clf.evaluate(test_pairs)
    print(f"trained {result.steps} steps in {minutes:.1f} min; best validation {result.best}")
    print(
        f"held-out test accuracy {100 * scores['accuracy']:.2f}% on {scores['n']} sentences  ("
        + ", ".join(f"{k.split('/')[1]} {100 * v:.1f}%" for k, v in scores.items() if "/" in k)
        + ")"
    )

    examples = {label: next(text for y, text in test_pairs if y == label) for label in clf.labels}
    for label, text in examples.items():
        pred = clf.predict([text])[0]
        print(format_token_weights(pred))
        plot_token_weights(pred, args.out / f"weights_{label}.png")
    report = {
        "test": scores,
        "valid_best": result.best,
        "steps": result.steps,
        "train_minutes": minutes,
        "per_language": args.per_language,
        "max_words": args.max_words,
        "epochs": args.epochs,
        "max_tokens": setup.max_tokens,
        "preset": args.preset,
    }
    (args.out / "report.json").write_text(json.dumps(report, indent=2))
    print(f"model {args.out / 'model'}; heatmaps {args.out}/weights_*.png; report {args.out / 'report.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
