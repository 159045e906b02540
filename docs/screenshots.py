"""The README's screenshots of the lesson, made again from the running explorer.

    python docs/screenshots.py                  # all of them, in English and Japanese
    python docs/screenshots.py --only 7         # §7's
    make screenshots                            # the same as the first line

The explorer (``attnlab.web.app.create_app``, with the shipped models) is served on a free loopback
port; Debian's Chromium (Playwright) opens each page in each language in the state the README
describes, waits until its widgets have drawn their answers from the API (none of them an error)
and the fonts are loaded, and writes the area named below to ``docs/img/``:

==================================  =========================================================
file                                what it shows
==================================  =========================================================
lesson-index{,-ja}.png              the lesson's index: the basic path and
                                    the folded "Going further", the sections and the tools
lesson-3-opening{,-ja}.png          §3's opening: the drawn picture of the three books as
                                    query, keys and values, and the map of the model with the
                                    section's part lit
lesson-3-predict{,-ja}.png          §3's first prediction, asked where the learner meets the
                                    widget; the widget stays covered until a choice is made
lesson-3-qkv{,-ja}.png              §3, the three books after the prediction: scores, √d_k,
                                    softmax, the weights and the weighted sum of the values
lesson-7-token-walk{,-ja}.png       §7, one token through the shipped ja-en translator, step by
                                    step with the real numbers, the map lit where the step is
lesson-8-pooling{,-ja}.png          §8, the shipped ja-sentence-type on the question
                                    「この電車は京都に行きますか。」: each character's pooling weight
==================================  =========================================================

The page is 1280 px wide, the desktop the lesson is laid out for: narrower, the tables scroll and
the pictures stack. Run it after a change that a reader of the README would see (a shipped model
rebuilt, a page's layout or strings changed) and look at the files before committing.
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
    """One screenshot of the page at ``path`` (a section's number, or a path such as "/lesson"),
    opened with ``params`` in the address, written to ``IMG / f"{name}.png"`` (English) and
    ``{name}-ja.png`` (Japanese). ``area`` names what is cut out: ``widget:NAME`` (the widget, its
    prediction answered first, as a learner would), ``predict:NAME`` (the prediction asked at the
    widget and the covered widget under it, nothing answered) or ``top`` (the first screen)."""

    name: str
    path: int | str
    area: str
    params: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"/lesson/{self.path}" if isinstance(self.path, int) else self.path


SHOTS = [
    Shot("lesson-index", "/lesson", "top"),
    Shot("lesson-3-opening", 3, "top"),
    Shot("lesson-3-predict", 3, "predict:qkv"),
    Shot("lesson-3-qkv", 3, "widget:qkv", {"mode": "books"}),
    Shot("lesson-7-token-walk", 7, "widget:token-walk"),
    Shot("lesson-8-pooling", 8, "widget:pooling", {"pool": "この電車は京都に行きますか。"}),
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


# A widget as a learner sees it after the prediction asked at it: the "Going further" fold it
# sits in opened, and the prediction's first choice committed, so that the widget is uncovered (a function: the page's CSP forbids evaluating a string).
COMMIT = """(name) => {
  const widget = document.querySelector('#widget-' + name);
  for (let d = widget && widget.closest('details'); d; d = d.parentElement.closest('details')) d.open = true;
  const gate = document.querySelector('.predict-gate[data-widget="' + name + '"]');
  if (!gate || gate.dataset.revealed !== '0') return false;
  const form = gate.previousElementSibling;
  form.querySelector('input[type=radio]').checked = true;
  form.requestSubmit();
  return true;
}"""
# The box around the prediction's form and the covered widget under it, in page coordinates.
PREDICT_BOX = """(name) => {
  const gate = document.querySelector('.predict-gate[data-widget="' + name + '"]');
  const a = gate.previousElementSibling.getBoundingClientRect(), b = gate.getBoundingClientRect();
  return { x: Math.min(a.left, b.left) - 8, y: a.top + window.scrollY - 8,
           width: Math.max(a.right, b.right) - Math.min(a.left, b.left) + 16, height: b.bottom - a.top + 16 };
}"""


def take(browser, base: str, shot: Shot, lang: str, out: Path) -> Path:
    """Open ``shot``'s page in ``lang``, wait for its widgets' numbers, and write its area to
    ``out``; raises if a widget shows an error or the page logs one."""
    ctx = browser.new_context(viewport=VIEWPORT, base_url=base, locale="ja-JP" if lang == "ja" else "en-US")
    page = ctx.new_page()
    page.set_default_timeout(120_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    kind, _, name = shot.area.partition(":")
    try:
        page.goto(f"{shot.url}?" + urlencode({"lang": lang, **shot.params}))
        page.wait_for_function("() => document.querySelector('#main [aria-busy=true]') === null")
        if kind == "widget":
            page.evaluate(COMMIT, name)
            selector = f"#widget-{name}"
            page.wait_for_function(WIDGET_ANSWERED, arg=selector)
        else:
            selector = "#main"
        page.evaluate("() => document.fonts.ready.then(() => true)")
        shown = page.evaluate(WIDGET_ERRORS, selector)
        if shown or errors:
            raise RuntimeError(f"{shot.url} ({lang}): {shown or errors}")
        if kind == "widget":
            widget = page.locator(selector)
            widget.scroll_into_view_if_needed()
            widget.screenshot(path=str(out), animations="disabled")
        elif kind == "predict":
            page.screenshot(path=str(out), clip=page.evaluate(PREDICT_BOX, name), full_page=True, animations="disabled")
        elif kind == "top":
            page.screenshot(path=str(out), animations="disabled")
        else:
            raise ValueError(f"unknown area {shot.area!r}")
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
    shots = [s for s in SHOTS if not args.only or s.path in args.only]
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
