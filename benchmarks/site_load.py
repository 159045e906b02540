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

Shape:
    no tensors: a folder in, megabytes and milliseconds out.
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--site", type=Path, help="a folder written by `attnlab lesson build-site` (default: build one)"
    )
    parser.add_argument("--sections", type=int, nargs="+", default=[1])
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--lang", default="ja")
    args = parser.parse_args()
    folder = args.site
    if folder is None:
        from attnlab.web.static_site import build_site

        folder = Path(tempfile.mkdtemp(prefix="attnlab-site-")) / "site"
        build_site(folder)
    parts = sizes(folder)
    total = sum(parts.values())
    print(f"machine: {cpu_name()}, {os.cpu_count()} logical CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"site {folder}: {total / 1e6:.1f} MB")
    for key, value in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"  {key:32s} {value / 1e6:6.1f} MB")

    from playwright.sync_api import sync_playwright

    with serve_folder(folder) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for n in args.sections:
            drawn, usable, needs = [], [], 0
            for _ in range(args.loads):
                ctx = browser.new_context(viewport={"width": 1280, "height": 900}, locale="ja-JP")
                pg = ctx.new_page()
                pg.set_default_timeout(120_000)
                pg.goto(f"{base}lesson/{n}.html?lang={args.lang}")
                pg.wait_for_function(
                    "() => document.querySelector('#section') && !document.querySelector('[aria-busy]')"
                    " && document.documentElement.classList.contains('fonts-ready')",
                    polling=10,
                )
                drawn.append(pg.evaluate("performance.now()"))
                pg.wait_for_function(USABLE, polling=10)
                usable.append(pg.evaluate("performance.now()"))
                needs = pg.evaluate(
                    "() => Array.from(document.querySelectorAll('.widget .error:not(.hidden)'))"
                    ".filter((e) => e.textContent.includes(Attn.t('needs_explorer'))).length"
                )
                ctx.close()
            print(
                f"§{n} ({args.lang}), {args.loads} loads, fresh cache: drawn median {statistics.median(drawn):.0f} ms"
                f" (min {min(drawn):.0f}, max {max(drawn):.0f}); usable median {statistics.median(usable):.0f} ms"
                f" (min {min(usable):.0f}, max {max(usable):.0f}); widgets that still need the explorer: {needs}"
            )
        browser.close()
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
