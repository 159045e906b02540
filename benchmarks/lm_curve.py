"""Validation loss against training minutes, from the log of ``attnlab train lm``.

Reads ``OUT/log.jsonl`` (training records carry ``step`` and ``train_seconds``; evaluation records
carry ``step`` and ``eval``), places every evaluation at the training time of its step (linear
interpolation between the surrounding training records; evaluation time is not counted, as in
the trainer's time budget), prints the table and writes a PNG.

The issue's quality-per-CPU-minute run::

    .venv/bin/attnlab train lm --text ../shared/data/tinyshakespeare/input.txt \\
        --preset shakespeare-char --out runs/shakespeare-char --precision bf16
    .venv/bin/python benchmarks/lm_curve.py runs/shakespeare-char --png outputs/shakespeare_curve.png
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path


def read_curve(log_path: Path) -> list[tuple[float, int, float]]:
    """``(minutes, step, validation loss)`` for every evaluation in the log."""
    if not log_path.is_file():
        raise FileNotFoundError(f"{log_path}: no such log (run `attnlab train lm --out DIR` first)")
    times: list[tuple[int, float]] = [(0, 0.0)]
    evals: list[tuple[int, float]] = []
    for n, line in enumerate(log_path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{log_path}:{n}: not JSON ({err.msg})") from None
        if "eval" in record:
            evals.append((record["step"], record["eval"]["loss"]))
        elif "train_seconds" in record:
            times.append((record["step"], record["train_seconds"]))
    times.sort()

    def seconds_at(step: int) -> float:
        for (s0, t0), (s1, t1) in itertools.pairwise(times):
            if s0 <= step <= s1:
                return t0 + (t1 - t0) * (step - s0) / max(s1 - s0, 1)
        s_last, t_last = times[-1]
        rate = t_last / max(s_last, 1)  # past the last record: extrapolate at the mean rate
        return rate * step

    return [(seconds_at(step) / 60, step, loss) for step, loss in evals]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="the --out folder of `attnlab train lm`")
    parser.add_argument("--png", type=Path, default=None, help="write the curve here")
    args = parser.parse_args(argv)
    curve = read_curve(args.run / "log.jsonl")
    print(f"{'minutes':>8}{'step':>8}{'val loss':>10}")
    for minutes, step, loss in curve:
        print(f"{minutes:8.2f}{step:8d}{loss:10.4f}")
    if args.png is not None and curve:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot([c[0] for c in curve], [c[2] for c in curve], marker="o")
        ax.set_xlabel("training minutes")
        ax.set_ylabel("validation loss (nats/token)")
        ax.set_title(args.run.name)
        ax.grid(alpha=0.3)
        args.png.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.png, dpi=120, bbox_inches="tight")
        print(f"curve written to {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
