"""A bounded load test of the explorer's model endpoint, on loopback only.

Starts ``attnlab explore`` as its own process on a free 127.0.0.1 port (the real command, with its
thread and OpenMP settings), or targets a running one with --url (a loopback address), runs N
concurrent clients (httpx, async) that each send requests back to back for a fixed time, then
stops by itself and prints requests/s, latency percentiles and the errors (any non-200 answer or
failed connection). The explorer queues up to 64 requests beyond its ``--max-concurrent`` runs;
more clients than that get 429 (busy), counted as errors here.

The server runs in a process of its own, as a user starts it, so that the clients' work does not
share its interpreter and threads. ``--max-concurrent`` compares the explorer's model slots: two
runs at once on the same cores slow each other several-fold (docs/measured.md).

    # a shipped translator, one client, then a class:
    python benchmarks/web_load.py --model ja-en --clients 1 --duration 20
    python benchmarks/web_load.py --model ja-en --clients 40 --duration 20 --max-concurrent 1
    # no model at hand: load the playground endpoint instead
    python benchmarks/web_load.py --endpoint playground --duration 5

Shape:
    one request = one sentence through the model (greedy translation + all attention maps)
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

import httpx

BODIES = {
    "playground": lambda model, text: {"scores": [8, 4, 2], "d_k": 64, "scale": True},
    "mask": lambda model, text: {"length": 16, "causal": True, "window": 4, "padding": 3},
    "run": lambda model, text: {"model": model, "text": text},
}


def check_loopback(url: str) -> None:
    """Refuse any target that is not this machine's loopback interface."""
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise SystemExit(f"web_load: refusing {url!r}: only loopback addresses (127.0.0.1, ::1, localhost) are allowed")


def start_server(models: list[str], max_concurrent: int) -> tuple[str, subprocess.Popen]:
    """``attnlab explore`` serving ``models`` (names or folders) on a free loopback port, as its
    own process (classroom_load's :func:`start_explorer`); returns its address once it answers."""
    from classroom_load import free_port, start_explorer

    port = free_port()
    extra = ["--max-concurrent", str(max_concurrent)] + [a for m in models for a in ("--model", m)]
    return f"http://127.0.0.1:{port}", start_explorer(port, extra)


async def run_load(url: str, endpoint: str, body: dict, clients: int, duration: float, timeout: float) -> dict:
    latencies: list[float] = []
    errors: Counter = Counter()
    stop_at = time.monotonic() + duration
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as client:

        async def worker() -> None:
            while time.monotonic() < stop_at:
                start = time.perf_counter()
                try:
                    r = await client.post(f"/api/{endpoint}", json=body)
                    ok = r.status_code == 200
                    if not ok:
                        errors[f"HTTP {r.status_code}"] += 1
                except httpx.HTTPError as err:
                    ok = False
                    errors[type(err).__name__] += 1
                if ok:
                    latencies.append(time.perf_counter() - start)

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(clients)))
        elapsed = time.monotonic() - started
    ordered = sorted(latencies)

    def pct(p: float) -> float:
        return 1000 * ordered[min(len(ordered) - 1, int(p * len(ordered)))] if ordered else float("nan")

    return {
        "endpoint": endpoint,
        "clients": clients,
        "seconds": round(elapsed, 2),
        "ok": len(latencies),
        "errors": sum(errors.values()),
        "error_kinds": dict(errors),
        "requests_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(pct(0.50), 1),
        "p95_ms": round(pct(0.95), 1),
        "p99_ms": round(pct(0.99), 1),
        "mean_ms": round(1000 * statistics.fmean(ordered), 1) if ordered else float("nan"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--model",
        action="append",
        default=[],
        help="a shipped model's name or a checkpoint folder to serve (repeatable)",
    )
    ap.add_argument("--max-concurrent", type=int, default=2, help="the explorer's model runs at once (its default: 2)")
    ap.add_argument("--url", help="target a running explorer instead (loopback only)")
    ap.add_argument("--endpoint", choices=sorted(BODIES), default="run")
    ap.add_argument("--text", default="three hundred forty-two thousand", help="sentence sent to the model")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of load (the script then stops)")
    ap.add_argument("--timeout", type=float, default=60.0, help="per-request timeout in seconds")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON line")
    args = ap.parse_args(argv)
    if not 1 <= args.clients <= 1000 or not 0 < args.duration <= 600:
        raise SystemExit("web_load: keep it bounded: 1..1000 clients, 0..600 seconds")

    server = None
    if args.url:
        check_loopback(args.url)
        url = args.url.rstrip("/")
    else:
        if args.endpoint == "run" and not args.model:
            raise SystemExit("web_load: --endpoint run needs --model NAME_OR_DIR (or --url of a running explorer)")
        url, server = start_server(args.model, args.max_concurrent)
    model = None
    if args.endpoint == "run":
        names = [m["name"] for m in httpx.get(f"{url}/api/models", timeout=10).json()]
        wanted = [Path(m).name for m in args.model]
        model = next((n for n in names if n in wanted), names[0] if names and not wanted else None)
        if model is None:
            raise SystemExit(f"web_load: the explorer offers {names}, not {wanted}")
    try:
        result = asyncio.run(
            run_load(
                url, args.endpoint, BODIES[args.endpoint](model, args.text), args.clients, args.duration, args.timeout
            )
        )
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
    result["model"] = model
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['endpoint']} ({model or '-'}): {result['clients']} clients for {result['seconds']} s on {url}")
        print(f"  {result['ok']} ok, {result['errors']} errors {result['error_kinds'] or ''}")
        print(
            f"  {result['requests_per_s']} requests/s   latency p50 {result['p50_ms']} ms   "
            f"p95 {result['p95_ms']} ms   p99 {result['p99_ms']} ms"
        )
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
