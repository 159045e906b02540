"""How fast is the in-page engine in headless Chromium: a translator ready after the page loads, and
one short sentence translated with beam 4 and its attention weights (issue 36's goal: ≤ 300 ms)?

Writes the static engine folder (:func:`attnlab.web.site.write_engine_folder`: the engine, the
onnxruntime-web WASM runtime and ``--model`` exported to ONNX), serves it with Python's
``http.server`` (no cross-origin isolation headers, so single-threaded WASM; ``--isolated`` sends
them and the page runs threads), and opens ``engine/check.html?model=NAME`` in Debian's Chromium
through Playwright, the page tests/site/test_engine_browser.py checks. Prints:

- load → ready: from the navigation's start to the translator ready to translate (the runtime and
  both models fetched from the local server and compiled), each in a fresh browser context (an
  empty cache), ``--loads`` times, and when each file of the last load had arrived;
- the sentence: ``engineCheck.run`` with beam 4 and the attention rows, the time of
  ``translate`` in the page (tokenize, encoder, the beam's decoder steps with their attention
  rows, detokenize), one warm-up then ``--repeats`` runs.

docs/export.md quotes its figures, with the machine and its load. Run:
``python benchmarks/site_engine.py`` (ja-en, about a minute on two busy cores).

Shape:
    no tensors: a sentence in, milliseconds out.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import tempfile
from pathlib import Path

from attnlab.web import site

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def cpu_name() -> str:
    """``lscpu``'s model name (the processor's name as Linux reports it), else platform's."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return platform.processor() or "unknown CPU"
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ja-en", help="a shipped translator (ja-en, en-ja, demo)")
    parser.add_argument("--sentence", default="猫が好きです。")
    parser.add_argument("--loads", type=int, default=5, help="page loads timed, each in a fresh context")
    parser.add_argument("--repeats", type=int, default=20, help="translations timed after one warm-up")
    parser.add_argument("--isolated", action="store_true", help="send COOP/COEP: the page runs WASM threads")
    args = parser.parse_args()

    import playwright.sync_api as playwright_api

    folder = site.write_engine_folder(Path(tempfile.mkdtemp()) / "site", [args.model])
    headers = site.ISOLATION_HEADERS if args.isolated else None
    url = f"engine/check.html?model={args.model}"
    run = "([name, records]) => window.engineCheck.run(name, records, {beam: 4, attention: true})"
    with site.serve_folder(folder, headers=headers) as base, playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        loads = []
        for _ in range(args.loads):
            context = browser.new_context()
            page = context.new_page()
            page.goto(base + url)
            page.evaluate("() => window.engineCheck.ready")
            loads.append(page.evaluate("() => window.engineCheck.readyMs"))
            threads = page.evaluate("() => window.engineCheck.threads")
            # Where the time goes: when each file had arrived (ms from the navigation's start).
            arrived = page.evaluate(
                "() => performance.getEntriesByType('resource').map((e) => [e.name.split('/').pop(), e.responseEnd])"
            )
            if len(loads) < args.loads:
                context.close()
        context.set_offline(True)
        records = [{"text": args.sentence}]
        (first,) = page.evaluate(run, [args.model, records])
        times = [page.evaluate(run, [args.model, records])[0]["ms"] for _ in range(args.repeats)]
        version = browser.version
        browser.close()
    load_1, load_5, load_15 = os.getloadavg()
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores, load average {load_1:.2f} {load_5:.2f} {load_15:.2f}")
    print(f"Chromium {version} headless; WASM threads: {threads}; model {args.model}")
    print(
        f"load → ready: median {statistics.median(loads):.0f} ms of {len(loads)} "
        f"(min {min(loads):.0f}, max {max(loads):.0f})"
    )
    print("  the last load's files arrived at: " + ", ".join(f"{n} {t:.0f} ms" for n, t in arrived))
    print(
        f"{args.sentence!r} → {first['text']!r} ({len(first['ids'])} tokens, {len(first['cross'])} attention rows), "
        f"beam 4: median {statistics.median(times):.1f} ms of {len(times)} "
        f"(min {min(times):.1f}, max {max(times):.1f}; the first run {first['ms']:.1f} ms)"
    )


if __name__ == "__main__":
    main()
