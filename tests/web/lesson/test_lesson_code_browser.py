"""The code on the lesson's pages, in real headless Chromium, in Japanese and English: every excerpt
of attnlab's own source (``::: code attnlab.module:name``, English docstrings and comments) is folded
until the student opens it, and says in the page's language that it is attnlab's source as written,
where it lives and, on the Japanese page, that its comments are English; short code written for the
page (its comments in the page's language) stays open. Full-page screenshots are kept in
``test-artifacts/lesson/`` (git-ignored). Run with ``pytest -m browser tests/web/lesson/test_lesson_code_browser.py``.
"""

from __future__ import annotations

import pytest
from lesson_browser import (
    ARTIFACTS_ROOT,
    BROWSER_MARKS,
    make_page,
    section_drawn,
)

from attnlab.web import lesson as L

pytestmark = BROWSER_MARKS
ARTIFACTS = ARTIFACTS_ROOT / "lesson"
SECTIONS = L.load_sections()
WITH_SOURCE = [n for n, s in SECTIONS.items() if any(b.type == "code" and b.source for b in s.blocks)]
LONG_CODE_LINES = 16  # lesson.js: longer code is folded whatever it is

page = make_page(ARTIFACTS, timeout_ms=60_000, full_page=False)


def where_line(lang: str, file: str, first: int, last: int) -> str:
    if lang == "ja":
        return f"attnlab のソースコード {file} の {first}〜{last} 行目を、そのまま載せています（コメントは英語です）。"
    return f"attnlab's source as written: {file}, lines {first}–{last}."


def test_the_sections_show_attnlabs_source():
    assert {3, 6} <= set(WITH_SOURCE)  # §3 additive_and_dot_scores, §6 sinusoidal_encoding: short ones
    short = [
        (n, b.source)
        for n in WITH_SOURCE
        for b in SECTIONS[n].blocks
        if b.source and len(b.code.en.splitlines()) <= LONG_CODE_LINES
    ]
    assert short, "no short source excerpt left: the fold below would be tested on long code only"


@pytest.mark.parametrize("n", WITH_SOURCE)
def test_attnlabs_source_is_folded_and_captioned_in_the_pages_language(page, lang, n):
    page.goto(f"/lesson/{n}?lang={lang}")
    section_drawn(page)
    for i, b in enumerate(SECTIONS[n].blocks):
        if b.type != "code":
            continue
        fig = f"#block-{i}"
        shown = page.eval_on_selector(
            fig,
            "f => ({folded: !!f.querySelector(':scope > details:not([open]) pre'),"
            " code: f.querySelector('pre code').textContent,"
            " where: (f.querySelector('figcaption .where') || {}).textContent || null})",
        )
        assert shown["code"] == getattr(b.code, lang), (n, i)
        if b.source:
            first, last = b.lines
            assert b.where == f"{b.file}, lines {first}–{last}"
            assert shown["folded"], (n, b.source, "attnlab's source is shown unfolded")
            assert shown["where"] == where_line(lang, b.file, first, last), (n, b.source, shown["where"])
        else:
            assert shown["where"] is None
            # Written for the page, comments in its language: open unless long.
            assert shown["folded"] == (len(getattr(b.code, lang).splitlines()) > LONG_CODE_LINES), (n, i)


def test_a_folded_excerpt_opens_from_the_keyboard(page, lang):
    """§6's sinusoidal_encoding: folded, its summary in the page's language, opened by Enter."""
    index = next(i for i, b in enumerate(SECTIONS[6].blocks) if b.source == "attnlab.positional:sinusoidal_encoding")
    page.goto(f"/lesson/6?lang={lang}")
    section_drawn(page)
    summary = page.locator(f"#block-{index} > details > summary")
    summary.scroll_into_view_if_needed()
    lines = len(SECTIONS[6].blocks[index].code.en.splitlines())
    assert summary.inner_text() == {"ja": f"コードを見る（{lines} 行）", "en": f"Show the code ({lines} lines)"}[lang]
    assert not page.locator(f"#block-{index} pre").is_visible()
    summary.focus()
    page.keyboard.press("Enter")
    assert page.locator(f"#block-{index} pre").is_visible()
    assert "def sinusoidal_encoding" in page.inner_text(f"#block-{index} pre")
