"""German→English on Multi30k: train with the ``multi30k`` preset, then score sacreBLEU on
``test_2016_flickr`` and plot validation BLEU against training minutes.

    python benchmarks/multi30k.py                       # data from ../shared/data/multi30k
    python benchmarks/multi30k.py --data DIR --minutes 30 --out outputs/multi30k

The corpus is read by path (never copied into the repository). Writes ``OUT/model`` (the
trained translator), ``OUT/bleu_vs_minutes.png`` and ``OUT/summary.json``, and prints a table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def bleu_curve(log_path: Path) -> list[tuple[float, float, int]]:
    """(training minutes, validation BLEU, step) for every evaluation in a training log."""
    records = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    # The final checkpoint repeats the last evaluation when it falls on the last step: one per step.
    by_step = {r["step"]: (r["train_seconds"] / 60, r["eval"]["bleu"], r["step"]) for r in records if "eval" in r}
    return list(by_step.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "multi30k")
    parser.add_argument("--out", type=Path, default=REPO / "outputs" / "multi30k")
    parser.add_argument("--minutes", type=float, default=30.0, help="training budget (evaluation excluded)")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--overrides", nargs="*", default=[], help="extra key=value settings for the recipe")
    args = parser.parse_args()
    d = args.data
    for name in ("train.de", "train.en", "val.de", "val.en", "test_2016_flickr.de", "test_2016_flickr.en"):
        if not (d / name).is_file():
            print(f"missing {d / name}: pass --data DIR holding the Multi30k files", file=sys.stderr)
            return 2
    model_dir = args.out / "model"
    attnlab = [sys.executable, "-m", "attnlab.cli"]
    t0 = time.time()
    subprocess.run(
        attnlab
        + [
            "train",
            "translate",
            "--preset",
            "multi30k",
            "--out",
            str(model_dir),
            "--minutes",
            str(args.minutes),
            "--train-src",
            str(d / "train.de"),
            "--train-tgt",
            str(d / "train.en"),
            "--valid-src",
            str(d / "val.de"),
            "--valid-tgt",
            str(d / "val.en"),
            *(["--overrides", *args.overrides] if args.overrides else []),
        ],
        check=True,
    )
    wall = time.time() - t0
    test = subprocess.run(
        attnlab
        + [
            "evaluate",
            "--model",
            str(model_dir),
            "--src",
            str(d / "test_2016_flickr.de"),
            "--ref",
            str(d / "test_2016_flickr.en"),
            "--beam",
            str(args.beam),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    curve = bleu_curve(model_dir / "log.jsonl")
    logs = [json.loads(l) for l in (model_dir / "log.jsonl").read_text().splitlines() if '"tokens_per_s"' in l]
    tok_s = sum(r["tokens_per_s"] for r in logs) / max(len(logs), 1)

    sys.path.insert(0, str(REPO))
    from attnlab.viz import plot_curves

    plot_curves(
        {"validation BLEU (greedy)": ([m for m, _, _ in curve], [b for _, b, _ in curve])},
        args.out / "bleu_vs_minutes.png",
        xlabel="training minutes (2 CPU cores)",
        ylabel="sacreBLEU",
        title="Multi30k de→en, attnlab multi30k preset",
    )
    print("\n| training minutes | step | validation BLEU (greedy) |\n|---:|---:|---:|")
    for minutes, b, step in curve:
        print(f"| {minutes:.1f} | {step} | {b:.2f} |")
    print(f"\ntest_2016_flickr (beam {args.beam}): {test}")
    print(f"mean training throughput: {tok_s:,.0f} target tokens/s; wall time incl. evaluation {wall / 60:.1f} min")
    summary = {
        "test": test,
        "curve": curve,
        "target_tokens_per_s": tok_s,
        "wall_minutes": wall / 60,
        "command": " ".join(sys.argv),
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
