"""Screenshots of the lesson's §9 (Transformers at work) in its three views, both languages.

    python docs/lesson9_screenshots.py [--out docs/img] [--port PORT]

With the explorer running (``attnlab explore --port PORT``, the shipped models built), Debian's
Chromium opens ``/lesson/9`` in Japanese and English, waits until every widget has drawn its first
answer (none of them an error) and the fonts are loaded, and writes:

- ``lesson-9-{en,ja}.png``: the page at 1280 px (the desktop, whole page);
- ``lesson-9-phone-{en,ja}.png``: the page at 375 px (a phone, whole page);
- ``lesson-9-projector-{en,ja}.png``: projector mode (``?view=present``) on the masked-LM slide;
- ``lesson-9-handout-{en,ja}.png``: the printed page (``?print=1``, print media), whole page.

Each is reduced to 256 colours (a few hundred KB). Look at every file before committing it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
DRAWN = "() => document.querySelector('#section') && !document.querySelector('#section[aria-busy]')"
ANSWERED = (
    "() => Array.from(document.querySelectorAll('.widget-out')).every((n) => n.dataset.seq !== '0')"
    " && document.querySelectorAll('.widget .error:not(.hidden)').length === 0"
)


def shoot(browser, base: str, out: Path, lang: str, name: str, query: str, width: int, *, media=None, full=True):
    ctx = browser.new_context(viewport={"width": width, "height": 900}, locale="ja-JP" if lang == "ja" else "en-US")
    page = ctx.new_page()
    page.set_default_timeout(60_000)
    page.goto(f"{base}/lesson/9?lang={lang}{query}")
    page.wait_for_function(DRAWN)
    if "view=present" not in query:
        page.wait_for_function(ANSWERED)
    if media:
        page.emulate_media(media=media)
    page.evaluate("() => document.fonts.ready.then(() => true)")
    page.wait_for_timeout(300)
    path = out / f"lesson-9{name}-{lang}.png"
    page.screenshot(path=str(path), full_page=full)
    ctx.close()
    # 256 colours keep the colour ramps true on a page of flat colours and text, and keep each file a few hundred KB.
    from PIL import Image

    image = (
        Image.open(path)
        .convert("RGB")
        .quantize(colors=256, method=Image.Quantize.MAXCOVERAGE, dither=Image.Dither.NONE)
    )
    image.save(path, optimize=True)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "img")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--only", nargs="*", default=["desktop", "phone", "projector", "handout"])
    args = parser.parse_args(argv)
    import playwright.sync_api as playwright_api

    base = f"http://127.0.0.1:{args.port}"
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for lang in ("en", "ja"):
            if "desktop" in args.only:
                print(shoot(browser, base, args.out, lang, "", "", 1280))
            if "phone" in args.only:
                print(shoot(browser, base, args.out, lang, "-phone", "", 375))
            if "projector" in args.only:
                print(shoot(browser, base, args.out, lang, "-projector", "&view=present&slide=6", 1280, full=False))
            if "handout" in args.only:
                print(shoot(browser, base, args.out, lang, "-handout", "&print=1", 1280, media="print"))
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
