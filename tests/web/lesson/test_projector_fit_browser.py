"""Projector mode fits the screen: every slide of every section, in Japanese and English, on a
1920 × 1080 and a 1280 × 720 projector, in real headless Chromium.

"One idea per screen": a slide taller than the screen has its type (a widget's slide: its zoom)
made smaller step by step down to a floor (``fitSlide`` in ``static/lesson/lesson.js``), and a
widget with natural parts too tall for one screen is shown over several slides, one part each
(``parts`` in its registration). Each slide is checked once its widget has drawn: no vertical
overflow beyond a pixel or two, nor any sideways. A slide that cannot fit even at the floor
scrolls inside its own box and is marked ``slide-tall``; :data:`MAY_SCROLL` names each such slide
of the lesson as it opens (none today), so a new one fails here until it is either fixed or named.
The one known case needs settings a class would rarely choose: §5's steps with eight heads, whose
heads part is a screen and a half even at the floor size (checked by its own test below).

Screenshots of a few slides (a title, a text, a widget) go to ``test-artifacts/projector-fit/``.
Run with ``pytest -m browser tests/web/lesson/test_projector_fit_browser.py``; without /usr/bin/chromium the
tests skip.
"""

from __future__ import annotations

import pytest
from lesson_browser import (
    ARTIFACTS_ROOT,
    BROWSER_MARKS,
    make_page,
    section_drawn,
    widgets_answered,
)

from attnlab.web import lesson as L

ARTIFACTS = ARTIFACTS_ROOT / "projector-fit"
pytestmark = BROWSER_MARKS
SECTIONS = L.load_sections()
SCREENS = {"1920x1080": (1920, 1080), "1280x720": (1280, 720)}
TOLERANCE_PX = 2

#: (screen, lang, section, slide kind, widget) of the slides allowed to scroll inside their own box
#: at the floor size, each with the reason. None today: every slide fits.
MAY_SCROLL: dict[tuple[str, str, int, str, str | None], str] = {}

#: Slides kept as screenshots: (section, slide) → a name.
SHOTS = {(1, 1): "title", (3, 3): "text", (5, 5): "widget-part"}

page = make_page(ARTIFACTS, timeout_ms=60_000, viewport={"width": 1920, "height": 1080}, full_page=False)


def settled(pg) -> None:
    """Two frames: the fit done when a slide was shown, and any refit its widget's redraw asked for."""
    pg.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")


def measure(pg) -> dict:
    return pg.evaluate(
        """() => {
          const s = document.querySelector('.slide:not([hidden])');
          const w = s.querySelector('.widget');
          return {
            slide: Number(s.dataset.slide),
            kind: [...s.classList].find((c) => c.startsWith('slide-') && c !== 'slide-tall').slice(6),
            widget: w ? w.dataset.widget : null,
            over: s.scrollHeight - s.clientHeight,
            wide: s.scrollWidth - s.clientWidth,
            fit: Number(s.dataset.fit),
            tall: s.classList.contains('slide-tall'),
            scrolls: getComputedStyle(s).overflowY === 'auto',
            font: parseFloat(getComputedStyle(s.querySelector('p, li, legend, .widget') || s).fontSize),
          };
        }"""
    )


@pytest.mark.parametrize("screen", list(SCREENS))
@pytest.mark.parametrize("n", sorted(SECTIONS))
def test_every_slide_fits_the_screen(page, lang, n, screen):
    width, height = SCREENS[screen]
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"/lesson/{n}?view=present&slide=1")
    section_drawn(page)
    widgets_answered(page)
    total = page.locator(".slide").count()
    problems = []
    for k in range(1, total + 1):
        if k > 1:
            page.keyboard.press("ArrowRight")
        page.wait_for_selector(f"#slide-{k}:not([hidden])")
        settled(page)
        m = measure(page)
        assert m["slide"] == k
        key = (screen, lang, n, m["kind"], m["widget"])
        if m["over"] > TOLERANCE_PX or m["tall"]:
            if key in MAY_SCROLL:
                assert m["tall"] and m["scrolls"], (key, m)  # it scrolls inside its own box
            else:
                problems.append((k, m))
        if m["wide"] > TOLERANCE_PX:
            problems.append((k, m))
        # The fit never goes below its floor: still readable from the back of the room.
        assert m["fit"] >= 0.6, (k, m)
        if screen == "1920x1080" and (n, k) in SHOTS:
            page.evaluate("() => document.fonts.ready.then(() => true)")
            page.screenshot(path=str(ARTIFACTS / f"{SHOTS[(n, k)]}-s{n}-{k}-{lang}-{screen}.png"))
    assert not problems, problems


def test_a_slide_refits_when_its_widget_grows_and_the_screen_changes(page, lang):
    page.goto("/lesson/5?view=present&slide=1")
    section_drawn(page)
    widgets_answered(page)
    first = page.eval_on_selector(".slide-widget", "n => Number(n.dataset.slide)")
    # §5's steps with eight heads instead of two (set on the slide: the parts fit, then grow).
    page.goto(f"/lesson/5?view=present&slide={first + 1}")
    section_drawn(page)
    widgets_answered(page)
    settled(page)
    two = measure(page)
    assert two["widget"] == "multihead-steps" and two["over"] <= TOLERANCE_PX and not two["tall"]
    page.select_option("#mh-dm", "16")
    page.select_option("#mh-heads", "8")
    page.wait_for_function("() => document.querySelectorAll('.mh-head').length === 8")
    settled(page)
    settled(page)
    eight = measure(page)
    assert eight["fit"] < two["fit"]  # refitted once the widget redrew, without moving the slide
    # The named exception: eight heads' Q, K, V, maps and outputs do not fit one screen even at
    # the floor size; that part scrolls inside its own box, and PageDown shows its rest first.
    assert eight["fit"] == 0.6 and eight["tall"] and eight["scrolls"], eight
    page.locator(f"#slide-{first + 1}").focus()
    page.keyboard.press("PageDown")
    assert page.eval_on_selector(f"#slide-{first + 1}", "n => n.scrollTop") > 0
    assert page.evaluate("() => new URLSearchParams(location.search).get('heads')") == "8"
    # The other parts still fit.
    for k in (first, first + 2):
        page.goto(f"/lesson/5?view=present&slide={k}&dm=16&heads=8")
        section_drawn(page)
        widgets_answered(page)
        settled(page)
        m = measure(page)
        assert m["widget"] == "multihead-steps" and m["over"] <= TOLERANCE_PX, (k, m)
    # A smaller window: the slide shown is fitted again.
    page.goto(f"/lesson/5?view=present&slide={first}")
    section_drawn(page)
    widgets_answered(page)
    settled(page)
    big = measure(page)
    page.set_viewport_size({"width": 1280, "height": 720})
    settled(page)
    settled(page)
    small = measure(page)
    assert small["over"] <= TOLERANCE_PX and small["fit"] < big["fit"], (big, small)
