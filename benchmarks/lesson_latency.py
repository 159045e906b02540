"""How long each of the lesson's widgets waits for its numbers: every lesson endpoint, one request
at a time, in-process (FastAPI's TestClient: the server's own work, no network).

The lesson's target is < 300 ms per widget answer on the development machine. Each case is
sent once to warm up (MiniLM is loaded then), then ``--repeats`` times; the median and the
slowest are printed, with the target's verdict, and written as JSON with ``--json``.

    python benchmarks/lesson_latency.py                 # 20 repeats per case
    python benchmarks/lesson_latency.py --repeats 5 --json outputs/bench/lesson_latency.json

Shape:
    one request = one widget update (the defaults the pages send, and their largest settings)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

TARGET_MS = 300.0

# (name, method, path, body or query): what the widgets send, at their defaults and at the
# largest settings their controls allow.
CASES = [
    ("§3 three books", "post", "/api/playground", {"scores": [8, 4, 2], "d_k": 64, "scale": True}),
    ("§3 random q, k (d_k = 64)", "post", "/api/lesson/dk-spread", {"d_k": 64, "seed": 0}),
    ("§3 random q, k (d_k = 1024)", "post", "/api/lesson/dk-spread", {"d_k": 1024, "seed": 0}),
    (
        "§5 multi-head steps",
        "post",
        "/api/lesson/multihead",
        {"text": "the cat ate the fish", "d_model": 8, "n_heads": 2},
    ),
    (
        "§5 multi-head (D = 16, 12 words)",
        "post",
        "/api/lesson/multihead",
        {"text": " ".join("abcdefghijkl"), "d_model": 16, "n_heads": 8},
    ),
    ("§5 head + neuron view (MiniLM)", "post", "/api/lesson/heads", {"query": 10, "layer": 2}),
    ("§6 sinusoids (16 × 32)", "post", "/api/lesson/positions", {"length": 16, "d_model": 32}),
    ("§6 sinusoids (64 × 128)", "post", "/api/lesson/positions", {"length": 64, "d_model": 128}),
    ("§6 word order", "post", "/api/lesson/word-order", {}),
    ("§8 variants (T = 16)", "post", "/api/lesson/variants", {"length": 16}),
    ("§8 variants (T = 32, causal)", "post", "/api/lesson/variants", {"length": 32, "causal": True}),
    ("§8 heatmap exercise", "post", "/api/lesson/attention-map", {}),
    ("§8 heatmap PNG (matplotlib)", "get", "/api/lesson/figures/attention-map.png", {"lang": "ja"}),
    ("§8 heatmap SVG (matplotlib)", "get", "/api/lesson/figures/attention-map.svg", {"lang": "ja"}),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: PyTorch's choice)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    from fastapi.testclient import TestClient

    from attnlab.web.app import create_app

    client = TestClient(create_app(), base_url="http://127.0.0.1:8000")
    rows = []
    print(f"{'case':38s} {'median ms':>10s} {'max ms':>8s}  < {TARGET_MS:.0f} ms")
    for name, method, path, payload in CASES:

        def send(method=method, path=path, payload=payload):
            return client.post(path, json=payload) if method == "post" else client.get(path, params=payload)

        first = send()
        if first.status_code != 200:
            print(f"{name}: HTTP {first.status_code}: {first.text[:200]}", file=sys.stderr)
            return 1
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            send()
            times.append((time.perf_counter() - start) * 1000)
        median, worst = statistics.median(times), max(times)
        rows.append({"case": name, "path": path, "median_ms": median, "max_ms": worst, "repeats": args.repeats})
        print(f"{name:38s} {median:10.1f} {worst:8.1f}  {'yes' if median < TARGET_MS else 'NO'}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps({"target_ms": TARGET_MS, "threads": torch.get_num_threads(), "cases": rows}, indent=1)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
