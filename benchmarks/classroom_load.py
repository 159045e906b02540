"""A class of students on one laptop: simulated students walk the lesson against the explorer.

Starts ``attnlab explore`` as its own process on a free loopback port (the real command, with its
thread and OpenMP settings), then runs N simulated students (httpx, async) who each open the index,
then every section in order: the page, its content, and the requests its widgets send, with a
think time between actions. Some requests are each student's own (another sentence, seed or
setting), the rest the widgets' defaults, as in a class where everyone starts from the same page
and some type their own input. A busy answer (429) is retried as the pages do (after
``Retry-After``, growing, with jitter, at most 6 tries); it counts as served only if a retry
succeeds. Loopback only; the run is bounded in time and requests and stops by itself.

    python benchmarks/classroom_load.py --students 40                 # one run, ~2 minutes
    python benchmarks/classroom_load.py --sweep 10 20 40 80 --json outputs/bench/classroom.json

Printed: the CPU (``lscpu`` model name and ISA flags), the load average, requests/s, and per
endpoint the count, p50/p95/p99 of what the student waited (retries included), busy answers,
errors, 5xx and lost requests, with the goal's verdict (p95 < 1 s for every widget, 0 5xx, 0 lost).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import httpx

GOAL_P95_S = 1.0
MAX_TRIES = 6  # as static/common.js


def section_requests(n: int, rng: random.Random, own: bool) -> list[tuple[str, str, dict]]:
    """The widget requests of section ``n``: the defaults, or (``own``) a student's own input."""
    # Every widget computes in the page: a student's page asks the server for its models' files
    # (exported on the first ask, then kept) and its data files once, then computes. What the class
    # costs the server is those files.
    table = {
        1: [("get", "/static/models/ja-en/meta.json", {}), ("get", "/static/data/parallel-steps.json", {})],
        2: [("get", "/static/models/rnn-plain/meta.json", {}), ("get", "/static/data/bottleneck-test.json", {})],
        3: [("get", "/static/models/rnn-attention/meta.json", {})],
        4: [("get", "/static/models/minilm/meta.json", {})],
        5: [("get", "/static/models/minilm/meta.json", {})],
        6: [],
        7: [("get", "/static/models/shakespeare-char/meta.json", {})],
        8: [
            ("get", "/static/models/ja-sentence-type/meta.json", {}),
            ("get", "/static/data/pooling-sentences.json", {}),
        ],
        9: [("get", f"/static/models/{name}/meta.json", {}) for name in ("shakespeare-mlm", "facts-qa", "digits-vit")],
    }
    return table[n]


def cpu_description() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown CPU"
    model = next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "?")
    flags = next((line.split(":", 1)[1].split() for line in out.splitlines() if line.startswith("Flags")), [])
    isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    return f"{model} ({os.cpu_count()} cores; {' '.join(isa) or 'no avx2'})"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_explorer(port: int, extra: list[str]) -> subprocess.Popen:
    """``attnlab explore`` on loopback ``port`` as its own process (the real command, with its thread
    and OpenMP settings) with the ``extra`` arguments; returns it once the lesson's data answers.
    benchmarks/web_load.py starts its explorer here too."""
    cmd = [sys.executable, "-m", "attnlab", "explore", "--host", "127.0.0.1", "--port", str(port), *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the explorer did not start: {proc.stderr.read()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/static/data/lesson/sections.json", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("the explorer did not answer within 120 s")


class Tally:
    def __init__(self) -> None:
        self.waits: dict[str, list[float]] = defaultdict(list)
        self.busy: dict[str, int] = defaultdict(int)
        self.errors: dict[str, int] = defaultdict(int)
        self.server_errors: dict[str, int] = defaultdict(int)
        self.lost: dict[str, int] = defaultdict(int)
        self.why: dict[str, int] = defaultdict(int)  # "path: status or exception" of each failure
        self.requests = 0


async def ask(client: httpx.AsyncClient, tally: Tally, method: str, path: str, body: dict, rng: random.Random) -> None:
    start = time.perf_counter()
    for attempt in range(1, MAX_TRIES + 1):
        tally.requests += 1
        try:
            if method == "post":
                r = await client.post(path, json=body)
            else:
                r = await client.get(path, params=body)
        except httpx.HTTPError as err:
            tally.why[f"{path}: {type(err).__name__}"] += 1
            tally.errors[path] += 1
            tally.lost[path] += 1
            return
        if r.status_code == 429 and attempt < MAX_TRIES:
            tally.busy[path] += 1
            after = float(r.headers.get("retry-after", "1"))
            await asyncio.sleep(after * attempt * (0.5 + rng.random()))
            continue
        if r.status_code >= 500:
            tally.server_errors[path] += 1
        if r.status_code != 200:
            tally.why[f"{path}: {r.status_code} {r.text[:80]}"] += 1
            tally.errors[path] += 1
            tally.lost[path] += 1
            return
        tally.waits[path].append(time.perf_counter() - start)
        return


async def student(
    i: int, base: str, tally: Tally, think: tuple[float, float], stop_at: float, own_share: float
) -> None:
    rng = random.Random(i)
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        await asyncio.sleep(rng.uniform(0, think[1]))  # students do not all start in the same second
        await ask(client, tally, "get", "/", {}, rng)
        for n in range(1, 10):
            if time.monotonic() > stop_at:
                return
            await ask(client, tally, "get", f"/lesson/{n}", {}, rng)
            await ask(client, tally, "get", f"/static/data/lesson/sections/{n}.json", {}, rng)
            for method, path, body in section_requests(n, rng, rng.random() < own_share):
                if time.monotonic() > stop_at:
                    return
                await asyncio.sleep(rng.uniform(*think))
                await ask(client, tally, method, path, body, rng)


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def run_once(base: str, students: int, think: tuple[float, float], duration: float, own_share: float) -> dict:
    tally = Tally()
    start = time.monotonic()

    async def main() -> None:
        await asyncio.gather(*(student(i, base, tally, think, start + duration, own_share) for i in range(students)))

    load_before = os.getloadavg()[0]
    asyncio.run(main())
    seconds = time.monotonic() - start
    rows = {}
    for path in sorted(set(tally.waits) | set(tally.errors) | set(tally.busy)):
        waits = tally.waits.get(path, [])
        rows[path] = {
            "served": len(waits),
            "p50_s": percentile(waits, 0.50) if waits else None,
            "p95_s": percentile(waits, 0.95) if waits else None,
            "p99_s": percentile(waits, 0.99) if waits else None,
            "busy": tally.busy.get(path, 0),
            "errors": tally.errors.get(path, 0),
            "server_errors": tally.server_errors.get(path, 0),
            "lost": tally.lost.get(path, 0),
        }
    widget_rows = {p: r for p, r in rows.items() if p.startswith("/api/lesson/")}
    worst = max((r["p95_s"] or 0.0 for r in widget_rows.values()), default=0.0)
    return {
        "students": students,
        "seconds": seconds,
        "requests": tally.requests,
        "requests_per_s": tally.requests / seconds,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg()[0],
        "worst_widget_p95_s": worst,
        "server_errors": sum(r["server_errors"] for r in rows.values()),
        "lost": sum(r["lost"] for r in rows.values()),
        "busy": sum(r["busy"] for r in rows.values()),
        "goal_met": worst < GOAL_P95_S and not any(r["server_errors"] or r["lost"] for r in rows.values()),
        "failures": dict(tally.why),
        "endpoints": rows,
    }


def show(result: dict) -> None:
    print(
        f"\n{result['students']} students, {result['seconds']:.0f} s: {result['requests']} requests "
        f"({result['requests_per_s']:.1f}/s), busy answers {result['busy']}, 5xx {result['server_errors']}, "
        f"lost {result['lost']}; load average {result['load_average_before']:.1f} → {result['load_average_after']:.1f}"
    )
    print(
        f"  {'endpoint':34s} {'served':>6s} {'p50 ms':>8s} {'p95 ms':>8s} {'p99 ms':>8s} {'busy':>5s} {'err':>4s} {'5xx':>4s}"
    )
    for path, r in result["endpoints"].items():
        ms = lambda x: "-" if x is None else f"{x * 1000:.0f}"  # noqa: E731
        print(
            f"  {path:34s} {r['served']:6d} {ms(r['p50_s']):>8s} {ms(r['p95_s']):>8s} {ms(r['p99_s']):>8s} "
            f"{r['busy']:5d} {r['errors']:4d} {r['server_errors']:4d}"
        )
    for why, count in result["failures"].items():
        print(f"  failed: {why} ×{count}")
    verdict = "met" if result["goal_met"] else "NOT met"
    print(
        f"  worst widget p95: {result['worst_widget_p95_s'] * 1000:.0f} ms; goal (p95 < 1 s, 0 5xx, 0 lost): {verdict}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--sweep", type=int, nargs="*", default=None, help="several class sizes, one run each")
    parser.add_argument("--duration", type=float, default=120.0, help="seconds per run (students stop then)")
    parser.add_argument("--think", type=float, nargs=2, default=(2.0, 6.0), help="think time between actions (s)")
    parser.add_argument("--own-share", type=float, default=0.3, help="share of sections a student gives own input")
    parser.add_argument("--url", default=None, help="a running explorer on loopback (default: start one)")
    parser.add_argument("--explore-args", nargs="*", default=[], help="extra arguments for attnlab explore")
    parser.add_argument("--settle", type=float, default=30.0, help="seconds to wait after start (warm-up)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    sizes = args.sweep or [args.students]
    if any(n < 1 or n > 400 for n in sizes) or args.duration <= 0 or args.duration > 1800:
        raise SystemExit("classroom_load: 1–400 students and a duration of at most 30 minutes")
    print(f"CPU: {cpu_description()}")
    proc = None
    if args.url:
        host = httpx.URL(args.url).host
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise SystemExit("classroom_load: only loopback addresses")
        base = args.url.rstrip("/")
    else:
        port = free_port()
        proc = start_explorer(port, args.explore_args)
        base = f"http://127.0.0.1:{port}"
        time.sleep(args.settle)  # --classroom warms up in the background: let it finish
    results = []
    try:
        for n in sizes:
            result = run_once(base, n, tuple(args.think), args.duration, args.own_share)
            show(result)
            results.append(result)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
    if len(results) > 1:
        passing = [r["students"] for r in results if r["worst_widget_p95_s"] < GOAL_P95_S]
        print(f"\nlargest class measured with every widget's p95 under 1 s: {max(passing) if passing else 'none'}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"cpu": cpu_description(), "runs": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
