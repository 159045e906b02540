"""How long each of the lesson's widgets waits for its numbers: every lesson endpoint, one request
at a time, in-process (FastAPI's TestClient: the server's own work, no network).

The lesson's target is < 300 ms per widget answer on the development machine. Each case is
sent once to warm up (the models are loaded then, and the first answer's time is printed as
"first": the BLEU-by-length table and the encoder timings are computed then and kept), then
``--repeats`` times; the median and the slowest are printed, with the target's verdict, the load
average before and after, and written as JSON with ``--json``. The widgets of §1, §2, §4 and §7
run the shipped models; a case whose model is not installed is reported and skipped.

    python benchmarks/lesson_latency.py                 # 20 repeats per case
    python benchmarks/lesson_latency.py --repeats 5 --json outputs/bench/lesson_latency.json

Shape:
    one request = one widget update (the defaults the pages send, and their largest settings)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

TARGET_MS = 300.0

# (name, method, path, body or query): what the widgets send, at their defaults and at the
# largest settings their controls allow.
LONG_JA = "私たちは来週の日曜日に駅の近くの新しいレストランで友達と一緒に昼ご飯を食べる予定です。"
# Every widget computes in the page (static/engine/*.js over the models exported to ONNX): the
# server's part of the lesson is its files — each in-page model's folder and each data file,
# exported or measured on the first ask and then kept.
CASES = [
    ("§1 measured times (data file)", "get", "/static/data/parallel-steps.json", {}),
    ("§2 test pairs (data file)", "get", "/static/data/bottleneck-test.json", {}),
    ("§2 BLEU by length (data file)", "get", "/static/data/bleu-by-length.json", {}),
    ("§1 §4 §7 ja-en encoder (in-page model)", "get", "/static/models/ja-en/encoder.onnx", {}),
    ("§2 §3 rnn-attention step (in-page model)", "get", "/static/models/rnn-attention/decoder.onnx", {}),
    ("§4 §5 MiniLM views (in-page data)", "get", "/static/models/minilm/meta.json", {}),
    ("§8 attention pooling (in-page model)", "get", "/static/models/ja-sentence-type/model.onnx", {}),
    ("§8 pooling sentences, MeCab's markers (data file)", "get", "/static/data/pooling-sentences.json", {}),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: PyTorch's choice)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    from attnlab.accel import calibrate

    calibrate.ensure()  # the engine's lines measured (or read) before any timed request

    from fastapi.testclient import TestClient

    from attnlab.web.app import create_app

    app = create_app()
    client = TestClient(app, base_url="http://127.0.0.1:8000")
    rows = []
    load_before = os.getloadavg()
    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}")
    print(f"{'case':40s} {'first ms':>9s} {'median ms':>10s} {'max ms':>8s}  < {TARGET_MS:.0f} ms")
    for name, method, path, payload in CASES:

        def send(method=method, path=path, payload=payload):
            # The explorer keeps answers that depend only on the request (ResponseCache); this
            # benchmark times the computation, so every request starts with an empty cache.
            app.state.answers.clear()
            return client.post(path, json=payload) if method == "post" else client.get(path, params=payload)

        start = time.perf_counter()
        first = send()
        first_ms = (time.perf_counter() - start) * 1000
        if first.status_code == 503 and "make models ONLY=" in first.text:
            print(f"{name:40s} skipped: {first.json()['detail'][:120]}")
            continue
        if first.status_code != 200:
            print(f"{name}: HTTP {first.status_code}: {first.text[:200]}", file=sys.stderr)
            return 1
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            send()
            times.append((time.perf_counter() - start) * 1000)
        median, worst = statistics.median(times), max(times)
        rows.append(
            {
                "case": name,
                "path": path,
                "first_ms": first_ms,
                "median_ms": median,
                "max_ms": worst,
                "repeats": args.repeats,
            }
        )
        verdict = "yes" if median < TARGET_MS else "NO"
        print(f"{name:40s} {first_ms:9.1f} {median:10.1f} {worst:8.1f}  {verdict}")
    load_after = os.getloadavg()
    print(f"load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "target_ms": TARGET_MS,
                    "threads": torch.get_num_threads(),
                    "cpus": os.cpu_count(),
                    "load_before": load_before,
                    "load_after": load_after,
                    "cases": rows,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
