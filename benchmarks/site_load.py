"""The static site's size and how soon its first section is usable (issue 36: ≤ 60 MB, ≤ 3 s).

Builds the site (``attnlab lesson build-site``, or takes ``--site DIR``), prints its size by part
(runtime, each model, the font, the rest), serves it with Python's ``http.server`` (a plain static
host: no cross-origin isolation headers) and opens ``lesson/N.html`` in Debian's headless Chromium,
each load in a fresh browser context (an empty cache, no service worker yet). For each load, in the
page's own clock (``performance.now()``, from the navigation's start):

- drawn: the section's text, pictures and controls are on the screen (no ``aria-busy``, the
  Japanese font loaded);
- usable: also every widget has drawn its first answer (a widget covered by its prediction
  computes behind the cover) or says it needs the explorer (counted apart).

docs/site.md quotes its figures with the machine and its load. Run:
``python benchmarks/site_load.py --site build/site --sections 1 3 --loads 5``.

``--profile`` also prints where the median load's time went, in the same clock: each file's
fetch (Resource Timing), each WebAssembly compile (the runtime's), the engine's own measures
(``attnlab …``: the runtime's import, each model file's fetch and InferenceSession, the warm-up),
each widget's first answer, and the main thread's long tasks (> 50 ms); with the medians of those
phases over the loads. ``--site`` may be given twice (``--site A --site B``) to compare two builds,
loads interleaved A, B, A, B, … so that both see the same machine load; the ratio B / A is printed.

Shape:
    no tensors: a folder in, megabytes and milliseconds out.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import tempfile
from pathlib import Path

from attnlab.web.site import serve_folder

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

USABLE = """() => {
  const drawn = document.querySelector('#section') && !document.querySelector('[aria-busy]')
    && document.documentElement.classList.contains('fonts-ready');
  if (!drawn) return false;
  const says = (w) => w && Array.from(w.querySelectorAll('.error:not(.hidden)'))
    .some((e) => e.textContent.includes(Attn.t('needs_explorer')));
  return Array.from(document.querySelectorAll('.widget-out'))
    .every((n) => n.dataset.seq !== '0' || says(n.closest('.widget')));
}"""


# Installed before any page script: records each widget's first answer (its output's data-seq
# leaves 0), the main thread's long tasks and every WebAssembly compile, in performance.now().
PROFILE_INIT = """(() => {
  const P = (window.__attnlabProfile = { longtasks: [], answers: {}, wasm: [], rendered: null });
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) P.longtasks.push([e.startTime, e.duration]);
    }).observe({ type: "longtask", buffered: true });
  } catch (e) { /* no long task timing */ }
  for (const fn of ["compile", "compileStreaming", "instantiate", "instantiateStreaming"]) {
    const orig = WebAssembly[fn];
    WebAssembly[fn] = function (...args) {
      const start = performance.now();
      const done = () => P.wasm.push([fn, start, performance.now()]);
      const out = orig.apply(this, args);
      out.then(done, done);
      return out;
    };
  }
  document.addEventListener("lesson:rendered", () => { P.rendered = performance.now(); });
  new MutationObserver((records) => {
    for (const r of records) {
      const n = r.target;
      if (!n.classList || !n.classList.contains("widget-out") || !n.dataset.seq || n.dataset.seq === "0") continue;
      const w = n.closest(".widget");
      const key = (w && w.dataset.widget) || n.id;
      if (!(key in P.answers)) P.answers[key] = performance.now();
    }
  }).observe(document, { subtree: true, attributes: true, attributeFilter: ["data-seq"] });
})();"""

# What the page recorded, read once it is usable.
PROFILE_READ = """() => {
  const P = window.__attnlabProfile;
  const nav = performance.getEntriesByType("navigation")[0];
  return {
    resources: performance.getEntriesByType("resource").map((e) => [e.name, e.startTime, e.responseEnd, e.encodedBodySize, e.initiatorType]),
    measures: performance.getEntriesByType("measure").filter((e) => e.name.startsWith("attnlab ")).map((e) => [e.name.slice(8), e.startTime, e.startTime + e.duration]),
    wasm: P.wasm, longtasks: P.longtasks, answers: P.answers, rendered: P.rendered,
    domContentLoaded: nav ? nav.domContentLoadedEventEnd : null,
  };
}"""


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def sizes(folder: Path) -> dict[str, int]:
    """Bytes by part of the site: the runtime, each model, the font, everything else."""
    parts: dict[str, int] = {}
    for path in folder.rglob("*"):
        if not path.is_file():
            continue
        rel = path.relative_to(folder).as_posix()
        if rel.startswith("static/vendor/"):
            key = "runtime (onnxruntime-web)"
        elif rel.startswith("static/models/"):
            key = "model " + rel.split("/")[2]
        elif rel.startswith("fonts/"):
            key = "font (IPAexGothic)"
        else:
            key = "pages, scripts, styles, data"
        parts[key] = parts.get(key, 0) + path.stat().st_size
    return parts


def _short(url: str, base: str) -> str:
    return url[len(base) :] if url.startswith(base) else url


def timeline(prof: dict, base: str) -> list[tuple[float, float, str]]:
    """One load's events as (start ms, end ms, what), sorted by start: files fetched (1 kB or more,
    or any model or runtime file), WebAssembly compiles, the engine's measures, first answers."""
    rows: list[tuple[float, float, str]] = []
    for name, start, end, size, _kind in prof["resources"]:
        short = _short(name, base)
        if size >= 1000 or "/models/" in short or "/vendor/" in short:
            rows.append((start, end, f"fetch {short} ({size / 1e6:.2f} MB)"))
    for fn, start, end in prof["wasm"]:
        rows.append((start, end, f"WebAssembly.{fn}"))
    for name, start, end in prof["measures"]:
        rows.append((start, end, f"engine: {name}"))
    if prof["rendered"] is not None:
        rows.append((prof["rendered"], prof["rendered"], "section rendered, widgets mounted"))
    for widget, at in prof["answers"].items():
        rows.append((at, at, f"first answer: {widget}"))
    return sorted(rows)


def phases(prof: dict, base: str) -> dict[str, float]:
    """Named durations and moments (ms) of one load, for the medians over loads."""
    out: dict[str, float] = {}
    if prof["domContentLoaded"] is not None:
        out["DOMContentLoaded at"] = prof["domContentLoaded"]
    if prof["rendered"] is not None:
        out["rendered at"] = prof["rendered"]
    for name, start, end, _size, _kind in prof["resources"]:
        short = _short(name, base)
        if short.endswith(".wasm"):
            out["runtime .wasm fetch"] = end - start
        elif short.startswith("static/models/") and short.endswith(".onnx"):
            out[f"fetch {short[14:]}"] = end - start
    for fn, start, end in prof["wasm"]:
        out[f"WebAssembly.{fn}"] = out.get(f"WebAssembly.{fn}", 0) + end - start
    for name, start, end in prof["measures"]:
        out[name] = end - start
    for widget, at in prof["answers"].items():
        out[f"first answer {widget} at"] = at
    out["long tasks, total"] = sum(d for _, d in prof["longtasks"])
    out["long tasks, longest"] = max((d for _, d in prof["longtasks"]), default=0)
    return out


def print_profile(profs: list[dict], usable: list[float], base: str, label: str) -> None:
    """The median load's timeline and the medians of its phases over all loads."""
    median_load = sorted(range(len(usable)), key=lambda i: usable[i])[len(usable) // 2]
    prof = profs[median_load]
    print(f"  profile {label}, the median load ({usable[median_load]:.0f} ms), ms from navigation start:")
    for start, end, what in timeline(prof, base):
        span = f"{start:7.0f} → {end:7.0f}  ({end - start:5.0f})" if end > start else f"{start:7.0f}" + " " * 20
        print(f"    {span}  {what}")
    tasks = sorted(prof["longtasks"], key=lambda t: -t[1])
    print(
        f"    main-thread long tasks: {len(tasks)}, {sum(d for _, d in tasks):.0f} ms in all; longest: "
        + ", ".join(f"{d:.0f} ms at {s:.0f}" for s, d in tasks[:5])
    )
    every = [phases(p, base) for p in profs]
    keys = [k for k in every[0] if all(k in e for e in every)]
    print(f"  phases over {len(profs)} loads (median, min–max ms):")
    for key in keys:
        values = [e[key] for e in every]
        print(f"    {key:46s} {statistics.median(values):7.0f}  ({min(values):.0f}–{max(values):.0f})")


def load_once(browser, base: str, n: int, lang: str, profile: bool) -> tuple[float, float, int, dict | None]:
    """One load of section n in a fresh context: (drawn ms, usable ms, widgets needing the explorer, profile)."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, locale="ja-JP")
    if profile:
        ctx.add_init_script(PROFILE_INIT)
    pg = ctx.new_page()
    pg.set_default_timeout(120_000)
    pg.goto(f"{base}lesson/{n}.html?lang={lang}")
    pg.wait_for_function(
        "() => document.querySelector('#section') && !document.querySelector('[aria-busy]')"
        " && document.documentElement.classList.contains('fonts-ready')",
        polling=10,
    )
    drawn = pg.evaluate("performance.now()")
    pg.wait_for_function(USABLE, polling=10)
    usable = pg.evaluate("performance.now()")
    needs = pg.evaluate(
        "() => Array.from(document.querySelectorAll('.widget .error:not(.hidden)'))"
        ".filter((e) => e.textContent.includes(Attn.t('needs_explorer'))).length"
    )
    prof = pg.evaluate(PROFILE_READ) if profile else None
    ctx.close()
    return drawn, usable, needs, prof


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--site",
        type=Path,
        action="append",
        help="a folder written by `attnlab lesson build-site` (default: build one); twice to compare two builds",
    )
    parser.add_argument("--sections", type=int, nargs="+", default=[1])
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--lang", default="ja")
    parser.add_argument("--profile", action="store_true", help="print where the median load's time went")
    args = parser.parse_args()
    folders = args.site or []
    if not folders:
        from attnlab.web.static_site import build_site

        folders = [Path(tempfile.mkdtemp(prefix="attnlab-site-")) / "site"]
        build_site(folders[0])
    if len(folders) > 2:
        parser.error("--site at most twice (A and B)")
    print(f"machine: {cpu_name()}, {os.cpu_count()} logical CPUs, load average {os.getloadavg()[0]:.1f}")
    for folder in folders:
        parts = sizes(folder)
        print(f"site {folder}: {sum(parts.values()) / 1e6:.1f} MB")
        for key, value in sorted(parts.items(), key=lambda kv: -kv[1]):
            print(f"  {key:32s} {value / 1e6:6.1f} MB")
    labels = ["A", "B"] if len(folders) == 2 else [""]

    from playwright.sync_api import sync_playwright

    with contextlib.ExitStack() as stack:
        bases = [stack.enter_context(serve_folder(folder)) for folder in folders]
        p = stack.enter_context(sync_playwright())
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for n in args.sections:
            runs: dict[int, list[tuple[float, float, int, dict | None]]] = {i: [] for i in range(len(folders))}
            for _ in range(args.loads):
                for i, base in enumerate(bases):  # interleaved: A, B, A, B, …
                    runs[i].append(load_once(browser, base, n, args.lang, args.profile))
            medians = []
            for i, folder in enumerate(folders):
                drawn = [r[0] for r in runs[i]]
                usable = [r[1] for r in runs[i]]
                medians.append(statistics.median(usable))
                name = f"{labels[i]} ({folder}) " if labels[i] else ""
                print(
                    f"§{n} ({args.lang}) {name}{args.loads} loads, fresh cache: drawn median {statistics.median(drawn):.0f} ms"
                    f" (min {min(drawn):.0f}, max {max(drawn):.0f}); usable median {statistics.median(usable):.0f} ms"
                    f" (min {min(usable):.0f}, max {max(usable):.0f}); widgets that still need the explorer: {runs[i][-1][2]}"
                )
                if args.profile:
                    print_profile([r[3] for r in runs[i]], usable, bases[i], f"§{n} {labels[i]}".strip())
            if len(folders) == 2:
                print(f"§{n} usable, median B / A: {medians[1] / medians[0]:.2f}")
        browser.close()
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
