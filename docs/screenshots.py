"""The README's screenshots of the lesson, made again from the running explorer.

    python docs/screenshots.py                  # all six: §3, §7, §8 in English and Japanese
    python docs/screenshots.py --only 7         # §7's two
    make screenshots                            # the same as the first line

The explorer (``attnlab.web.app.create_app``, with the shipped models) is served on a free loopback
port; Debian's Chromium (Playwright) opens each section in each language with the widget in the
state the README describes, waits until the widget has drawn its answer from the API (none of them
an error) and the fonts are loaded, and writes the widget's area alone to ``docs/img/``:

==================================  =========================================================
file                                what it shows
==================================  =========================================================
lesson-3-qkv{,-ja}.png              §3, the three books: scores, √d_k, softmax, the weights,
                                    the values and their weighted sum (the page's defaults)
lesson-7-transformer{,-ja}.png      §7, the diagram of the shipped ja-en with the shapes for
                                    the default sentence, source–target attention's box open
lesson-8-pooling{,-ja}.png          §8, the shipped ja-sentence-type on the question
                                    「この電車は京都に行きますか。」: each character's pooling weight
==================================  =========================================================

The page is 1280 px wide, the desktop the lesson is laid out for: narrower, the §3 tables scroll and
the §7 diagram folds into one tall column. The widget is then 1060 px wide, which GitHub shows at
about four fifths of its size, where the numbers are still readable. Run it after a change that a reader of the README would see (a shipped
model rebuilt, a widget's layout or strings changed) and look at the six files before committing.
Needs the shipped models (``make models``) and /usr/bin/chromium (``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

CHROMIUM = Path("/usr/bin/chromium")
IMG = Path(__file__).resolve().parent / "img"
VIEWPORT = {"width": 1280, "height": 900}  # the desktop the lesson is laid out for (and its browser tests use)


@dataclass(frozen=True)
class Shot:
    """One screenshot: section ``section``'s widget ``widget``, opened with ``params`` in the
    address, written to ``IMG / f"{name}.png"`` (English) and ``{name}-ja.png`` (Japanese)."""

    name: str
    section: int
    widget: str
    params: dict[str, str] = field(default_factory=dict)


SHOTS = [
    Shot("lesson-3-qkv", 3, "qkv", {"mode": "books"}),
    Shot("lesson-7-transformer", 7, "transformer-diagram", {"part": "dec_cross"}),
    Shot("lesson-8-pooling", 8, "pooling", {"pool": "この電車は京都に行きますか。"}),
]


# Functions, not expressions: the page's CSP forbids evaluating a string. A widget has answered
# when each of its output panes has drawn a response from the API (data-seq past 0).
WIDGET_ANSWERED = """(sel) => {
  const outs = Array.from(document.querySelectorAll(sel + ' .widget-out'));
  return outs.length > 0 && outs.every((n) => n.dataset.seq !== '0');
}"""
WIDGET_ERRORS = """(sel) => Array.from(document.querySelectorAll(sel + ' .error:not(.hidden)'))
  .map((n) => n.textContent.trim()).filter((t) => t.length > 0)"""


@contextlib.contextmanager
def explorer() -> Iterator[str]:
    """The explorer with the shipped models, on a free loopback port in this process (the handout's
    :func:`attnlab.web.handout.serving`); yields its address."""
    from attnlab.web.app import create_app
    from attnlab.web.handout import serving

    with serving(create_app()) as base:
        yield base


def take(browser, base: str, shot: Shot, lang: str, out: Path) -> Path:
    """Open ``shot``'s section in ``lang``, wait for its widget's numbers, and write the widget's
    area to ``out``; raises if the widget shows an error or the page logs one."""
    ctx = browser.new_context(viewport=VIEWPORT, base_url=base, locale="ja-JP" if lang == "ja" else "en-US")
    page = ctx.new_page()
    page.set_default_timeout(120_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(f"/lesson/{shot.section}?" + urlencode({"lang": lang, **shot.params}))
        selector = f"#widget-{shot.widget}"
        page.wait_for_function(WIDGET_ANSWERED, arg=selector)
        page.evaluate("() => document.fonts.ready.then(() => true)")
        shown = page.evaluate(WIDGET_ERRORS, selector)
        if shown or errors:
            raise RuntimeError(f"§{shot.section} ({lang}): {shown or errors}")
        widget = page.locator(selector)
        widget.scroll_into_view_if_needed()
        widget.screenshot(path=str(out), animations="disabled")
    finally:
        ctx.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", type=int, nargs="*", help="section numbers (3, 7, 8); all by default")
    ap.add_argument("--lang", nargs="*", choices=["en", "ja"], default=["en", "ja"])
    ap.add_argument("--out", type=Path, default=IMG, help="the folder written to (default: docs/img)")
    args = ap.parse_args(argv)
    if not CHROMIUM.exists():
        ap.error(f"needs Chromium at {CHROMIUM} (apt-get install chromium)")
    shots = [s for s in SHOTS if not args.only or s.section in args.only]
    args.out.mkdir(parents=True, exist_ok=True)

    import playwright.sync_api as playwright_api

    with explorer() as base, playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            for shot in shots:
                for lang in args.lang:
                    path = take(browser, base, shot, lang, args.out / f"{shot.name}{'-ja' if lang == 'ja' else ''}.png")
                    print(path)
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
