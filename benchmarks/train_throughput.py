"""Training throughput of the translation demo setup: processes × threads, fp32 vs bf16.

Trains the ``attnlab demo`` model (English number words → Japanese numerals, generated data)
for a fixed time and prints the target tokens per second over all processes. Run it alone or
under torchrun; each process trains on its own shard of every epoch (DDP, gloo on the CPU)::

    OMP_NUM_THREADS=2 python benchmarks/train_throughput.py --seconds 30                  # 1 process × 2 threads
    torchrun --standalone --nproc_per_node 2 benchmarks/train_throughput.py --seconds 30  # 2 processes × 1 thread
    OMP_NUM_THREADS=2 python benchmarks/train_throughput.py --seconds 30 --precision bf16

Each process's batches hold up to ``--max-tokens`` padded tokens, so two processes take steps
of twice the global batch; tokens per second is the comparable figure. With ``--json FILE``
the result is appended to FILE as one JSON line.

Shape:
    batches of ≤ max_tokens padded tokens, (B, S) sources and (B, T) targets.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import torch

from attnlab import distributed
from attnlab.data.tasks import make_splits
from attnlab.experiments.demo import demo_setup
from attnlab.recipes.translate import train_translation


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="training time (evaluation excluded)")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--n-train", type=int, default=30000, help="generated training pairs")
    parser.add_argument("--max-tokens", type=int, default=4000, help="padded tokens per batch per process")
    parser.add_argument("--json", help="append the result to this file as a JSON line")
    args = parser.parse_args(argv)

    with distributed.session("cpu") as ctx:
        splits = make_splits("numbers-en-ja", args.n_train, 20, 0, seed=0)
        setup = demo_setup(None, minutes=args.seconds / 60, target=None, seed=0)  # a fixed time: no quality stop
        setup = dataclasses.replace(
            setup,
            max_tokens=args.max_tokens,
            eval_sentences=20,
            train=dataclasses.replace(setup.train, precision=args.precision, progress=False, eval_every_steps=None),
        )
        _, result, _ = train_translation(setup, splits.train, splits.valid)
        record = {
            "processes": ctx.world_size,
            "threads_per_process": torch.get_num_threads(),
            "precision": args.precision,
            "steps": result.steps,
            "train_seconds": round(result.train_seconds, 2),
            "target_tokens": result.tokens,
            "tokens_per_s": round(result.tokens_per_s, 1),
        }
        if ctx.is_main:
            print(json.dumps(record), file=sys.stderr)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(record) + "\n")
    return record


if __name__ == "__main__":
    main()
