"""A busy explorer, as a page shows it, in real headless Chromium, in Japanese and English.

A class asking more than the explorer can run at once gets 429 with ``Retry-After`` (``WorkGate``
in ``attnlab/web/app.py``). The page must say so in its language (the status line ``#busy-note``
of ``static/common.js``) and try again by itself; once the explorer answers, the widget is drawn
and no error box is left. When it stays busy through every try, the widget says, in its language,
to wait and try again: a message, never a broken widget. Here the widget's request is answered
429 by the browser itself (``page.route``), so nothing has to be loaded to make the server busy.
Since issue 36 every lesson widget computes in the page (§8's pooling, the last one to ask the
server, included), so the page that still asks is the explorer's own playground, through the same
``postJSON`` of common.js.

Screenshots go to ``test-artifacts/busy/`` (git-ignored). Run with
``pytest -m browser tests/web/test_busy_browser.py``; without /usr/bin/chromium the tests skip.
"""

from __future__ import annotations

import json

import pytest
from lesson_browser import ARTIFACTS_ROOT, BROWSER_MARKS, make_page

from attnlab.web import i18n

ARTIFACTS = ARTIFACTS_ROOT / "busy"
pytestmark = [
    *BROWSER_MARKS,
    pytest.mark.explorer_only(
        "the explorer's busy gate (429 + Retry-After) on the playground, the one page that still asks the server"
    ),
]

page = make_page(ARTIFACTS, timeout_ms=40_000, viewport={"width": 1100, "height": 800}, full_page=False)

# The explorer's playground: its scores are computed by the server (POST /api/playground).
API = "**/api/playground"


BUSY = {"status": 429, "headers": {"Retry-After": "1"}, "content_type": "application/json"}


def busy_then_through(pg, refusals: int) -> dict:
    """Answer the widget's first ``refusals`` requests 429 + Retry-After, then let them through."""
    seen = {"refused": 0, "passed": 0}

    def handle(route):
        if seen["refused"] < refusals:
            seen["refused"] += 1
            route.fulfill(body=json.dumps({"detail": "busy: try again shortly"}), **BUSY)
        else:
            seen["passed"] += 1
            route.continue_()

    pg.route(API, handle)
    return seen


def drawn(pg) -> None:
    pg.wait_for_selector("#results[data-seq]:not([data-seq='0'])", state="attached")


def test_a_busy_answer_shows_the_note_then_the_widget(page, lang):
    seen = busy_then_through(page, refusals=2)
    page.goto(f"/playground?lang={lang}")
    note = page.locator("#busy-note")
    note.wait_for(state="visible")
    assert note.inner_text() == i18n.t(lang, "busy_wait")
    assert note.get_attribute("role") == "status"  # read out by a screen reader, not an alert
    assert page.evaluate("() => document.documentElement.lang") == lang
    page.screenshot(path=str(ARTIFACTS / f"busy-note-{lang}.png"))
    # Meanwhile the page shows nothing broken: no error box, no half-drawn answer.
    assert page.locator("#error:not(.hidden)").count() == 0
    # The page tries again by itself; the third try goes through and the answer is drawn.
    drawn(page)
    assert seen == {"refused": 2, "passed": 1}
    page.wait_for_selector("#busy-note.hidden", state="attached")
    assert not note.is_visible()
    assert page.locator("#error:not(.hidden)").count() == 0
    assert page.locator("#steps-table tbody tr").count() > 0  # the scores and weights are there


def test_a_class_busy_through_every_try_asks_to_try_again(page, lang):
    # common.js tries six times (waits of about 1, 2, … 5 s, jittered), then gives up politely.
    seen = busy_then_through(page, refusals=100)
    page.goto(f"/playground?lang={lang}")
    error = page.locator("#error")
    error.wait_for(state="visible", timeout=60_000)
    assert seen["refused"] == 6 and seen["passed"] == 0
    assert i18n.t(lang, "busy_failed") in error.inner_text()
    assert "429" not in error.inner_text() and "HTTP" not in error.inner_text()
    assert not page.locator("#busy-note").is_visible()
    # The next move, once the class is quieter, draws it.
    page.unroute(API)
    page.click("#scale")
    drawn(page)
    page.wait_for_selector("#error.hidden", state="attached")
