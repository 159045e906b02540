"""Projector mode, the progress a student keeps and the answer key, in real headless Chromium, in
Japanese and English.

- Projector mode (``/lesson/N?view=present&slide=K``): the slides (title and objectives, the
  section's picture, the text, one per widget, the try box, one per question, the key points: the
  basic path only, 発展 / "Going further" stays on the page), moved by → ← PageDown PageUp Space
  Home End and the buttons (PageDown and Space show the rest of a tall slide first); the slide in
  the address, restored on load; the widgets working on their slides; on to the next section.
- Progress (localStorage only): answers shown again after a reload, ticks and counts on the
  index, a reset with a confirmation; an edited question does not take an old answer.
- The answer key (``?teacher=1``) and the teacher notes.
- axe-core (no serious or critical violation) in projector mode and in the answer key.

Screenshots go to ``test-artifacts/projector/`` (git-ignored). Run with
``pytest -m browser tests/web/lesson/test_projector_progress_browser.py``; without /usr/bin/chromium the tests skip.
"""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlparse

import pytest
from lesson_browser import (
    ARTIFACTS_ROOT,
    BROWSER_MARKS,
    assert_accessible,
    lesson_href,
    lesson_path,
    make_page,
    params,
    section_drawn,
    widgets_answered,
    written,
)

from attnlab.web import i18n
from attnlab.web import lesson as L

ARTIFACTS = ARTIFACTS_ROOT / "projector"

pytestmark = BROWSER_MARKS
TIMEOUT_MS = 30_000
SECTIONS = L.load_sections()
PROGRESS_KEY = "attnlab.progress"


page = make_page(ARTIFACTS, timeout_ms=TIMEOUT_MS, viewport={"width": 1280, "height": 800}, full_page=False)
# For the tests that answer a section's data themselves (page.route): the static build's service
# worker would answer the request from its cache before Playwright's route sees it. None of these
# tests is about working offline (that is tests/site/'s), so the worker is kept out of them.
routed_page = make_page(
    ARTIFACTS,
    timeout_ms=TIMEOUT_MS,
    viewport={"width": 1280, "height": 800},
    full_page=False,
    service_workers="block",
)


def t(lang: str, key: str, **values) -> str:
    return i18n.t(lang, key, **values)


def present(pg, n: int, slide: int | str | None = None, extra: str = "") -> None:
    pg.goto(f"/lesson/{n}?view=present" + (f"&slide={slide}" if slide is not None else "") + extra)
    section_drawn(pg)


def shown(pg) -> list[int]:
    """The slides on screen (there must be one)."""
    return pg.eval_on_selector_all(".slide:not([hidden])", "ns => ns.map(n => Number(n.dataset.slide))")


def total(pg) -> int:
    return pg.locator(".slide").count()


def at(pg, k: int, lang: str) -> None:
    """Slide k alone is shown, named in the counter and the address."""
    assert shown(pg) == [k]
    assert pg.text_content("#slide-counter") == t(lang, "ls_slide_counter", n=k, total=total(pg))
    assert params(pg)["slide"] == str(k) and params(pg)["view"] == "present"


def kinds(pg) -> list[str]:
    return pg.eval_on_selector_all(
        ".slide", "ns => ns.map(n => [...n.classList].find(c => c.startsWith('slide-')).slice(6))"
    )


def slide_of(pg, selector: str) -> int:
    return pg.eval_on_selector(selector, "n => Number(n.closest('.slide').dataset.slide)")


def fits(pg, k: int) -> bool:
    return pg.eval_on_selector(f"#slide-{k}", "n => n.scrollHeight <= n.clientHeight + 4")


def scroll_top(pg, k: int) -> int:
    return pg.eval_on_selector(f"#slide-{k}", "n => Math.round(n.scrollTop)")


def at_section(n: int) -> re.Pattern:
    """The address of section n's page with a query (``/lesson/2?`` in the explorer,
    ``/lesson/2.html?`` on the static build), for ``wait_for_url``."""
    return re.compile(re.escape(lesson_path(f"/lesson/{n}")) + r"\?")


def kept(pg) -> dict:
    return json.loads(pg.evaluate(f"() => window.localStorage.getItem('{PROGRESS_KEY}') || 'null'") or "null")


# --------------------------------------------------------------------------------------------
# Projector mode: the slides.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [3, 6, 9])
def test_a_section_becomes_slides_in_page_order(page, lang, n):
    section = SECTIONS[n]
    present(page, n)
    at(page, 1, lang)
    k = kinds(page)
    # Title and objectives first; the section's drawn picture (its schematic and the model map:
    # pictures.js) on a slide of its own; then text and widgets; the try box; one per question; the
    # key points last (after the check, which they would answer: issue 34).
    assert k[0] == "title" and page.locator("#slide-1 #section-title").count() == 1
    assert page.locator("#slide-1 .objectives li").count() == len(section.objectives)
    assert k[1] == "picture" and k.count("picture") == 1
    assert page.locator("#slide-2 #section-pictures svg.model-map").count() == 1
    widgets = [b.widget for b in section.blocks if b.type == "widget" and not b.further]
    # One slide per widget, or one per part for a widget shown in parts (§3's second widget: its
    # maps, then the numbers of the row picked), each part numbered on its slide.
    parts = page.eval_on_selector_all(
        ".slide-widget", "ns => ns.map(n => [Number(n.dataset.part || 0), Number(n.dataset.parts || 1)])"
    )
    assert len(parts) == k.count("widget")
    shown_as = [list(range(1, n + 1)) if p == 1 else [0] for p, n in parts if p <= 1]  # one entry per widget
    assert len(shown_as) == len(widgets) and [p for p, _ in parts] == [p for seq in shown_as for p in seq]
    on_slides = page.eval_on_selector_all(".slide-widget .widget", "ns => ns.map(n => n.dataset.widget)")
    assert on_slides == widgets
    tail = (["try"] if section.try_ else []) + ["question"] * len(section.check) + ["key-points"]
    assert k[-len(tail) :] == tail
    assert set(k[2 : -len(tail)]) <= {"text", "widget"} and k.count("text") >= 1
    for i in range(len(section.check)):
        assert slide_of(page, f"#question-{i}") == len(k) - len(section.check) + i
    # Every block of text on the basic path is on some slide (発展 is on none), and the language's
    # text is there; code, technical notes and note boxes stay on the page (issue 34). A widget of
    # a 発展 region is on no slide, and a widget's own 発展 part is not shown on its slide.
    for b in section.blocks:
        if b.type == "widget" and b.further:
            assert page.locator(f"#widget-{b.widget}").count() == 0, b.widget
    assert page.locator(".slide details.further:visible").count() == 0
    html = [b for b in section.blocks if b.type == "html"]
    for i, b in enumerate(section.blocks):
        if b.type == "html":
            assert page.locator(f"#block-{i}").count() == (0 if b.further else 1)
    assert html
    assert page.locator(".slide-inner > :is(.lesson-code, .lesson-memo, .lesson-note, details.further)").count() == 0
    # A heading starts its slide, unless the text before it on the slide is short (less than half a
    # slide's worth: lesson.js's SLIDE_TEXT / 2, Japanese characters counting double), so that two
    # short parts share a screen rather than leave one half empty.
    for h2 in page.query_selector_all(".slide-text .lesson-text h2"):
        before = h2.evaluate(
            """n => {
              const inner = n.closest('.slide-inner'), own = n.closest('.lesson-text');
              const prior = [...inner.children].slice(0, [...inner.children].indexOf(own));
              const text = prior.map((c) => c.textContent).join('');
              return /[\u3040-\u30ff\u4e00-\u9fff]/.test(text) ? 2 * text.length : text.length;
            }"""
        )
        assert before < 1250 / 2, before
    # The page's own header, footer and pager are not on the screen.
    assert not page.is_visible("header.top") and not page.is_visible(".foot")
    assert page.locator(".pager").count() == 0 and page.locator("#teacher-notes").count() == 0


def test_keys_and_buttons_move_through_the_slides(page, lang):
    present(page, 3)
    n = total(page)
    at(page, 1, lang)
    page.keyboard.press("ArrowRight")
    at(page, 2, lang)
    page.keyboard.press("ArrowLeft")
    at(page, 1, lang)
    page.keyboard.press("ArrowLeft")  # the first section before §3 is §2: back there, at its last slide
    page.wait_for_url(at_section(2))
    section_drawn(page)
    assert shown(page) == [total(page)] and params(page)["slide"] == str(total(page))
    present(page, 3, 1)
    page.keyboard.press("End")
    at(page, n, lang)
    page.keyboard.press("Home")
    at(page, 1, lang)
    # A presenter's clicker: PageDown / PageUp. A slide taller than the screen is scrolled through
    # first; the next slide comes once its end is in view.
    k = 1
    for _ in range(60):
        if k == 6:
            break
        before = scroll_top(page, k)
        end = page.eval_on_selector(f"#slide-{k}", "n => n.scrollTop + n.clientHeight >= n.scrollHeight - 4")
        page.keyboard.press("PageDown")
        if end:
            k += 1
            at(page, k, lang)
            assert scroll_top(page, k) == 0
        else:
            at(page, k, lang)
            assert scroll_top(page, k) > before
    assert k == 6
    page.keyboard.press("PageUp")
    at(page, 5, lang)
    page.keyboard.press("Space")
    k = shown(page)[0]
    assert k == 6 or (k == 5 and not fits(page, 5))
    page.keyboard.press("End")
    page.keyboard.press("Shift+Space")
    at(page, n - 1, lang)
    # The buttons, and their words.
    page.click("#slide-next")
    at(page, n, lang)
    assert page.text_content("#slide-next") == t(lang, "ls_slide_next_section")
    page.click("#slide-prev")
    at(page, n - 1, lang)
    assert page.text_content("#slide-next") == t(lang, "ls_slide_next")
    page.keyboard.press("Home")
    assert page.text_content("#slide-prev") == t(lang, "ls_slide_prev_section")
    page.keyboard.press("End")
    page.keyboard.press("PageDown")  # past the last slide: the next section, in projector mode
    page.wait_for_url(at_section(4))
    section_drawn(page)
    assert {k: params(page)[k] for k in ("view", "slide", "lang")} == {"view": "present", "slide": "1", "lang": lang}
    at(page, 1, lang)
    # The last section's last slide has nowhere to go.
    present(page, max(SECTIONS), "last")
    at(page, total(page), lang)
    assert page.is_disabled("#slide-next")
    page.keyboard.press("ArrowRight")
    at(page, total(page), lang)
    assert_accessible(page)


def test_the_address_restores_the_slide_and_widgets_work_on_theirs(page, lang):
    present(page, 3)
    widgets_answered(page)
    qkv = slide_of(page, "#widget-qkv")
    # §3's other widget (additive attention) is 発展: on the page, folded, and on no slide.
    assert page.locator("#widget-additive-vs-dot").count() == 0
    # Reached by the keys: its numbers are there.
    for _ in range(qkv - 1):
        page.keyboard.press("ArrowRight")
    at(page, qkv, lang)
    weights = page.eval_on_selector_all("[id^=qkv-weight-]", "ns => ns.map(n => Number(n.dataset.value))")
    assert len(weights) == 3 and abs(sum(weights) - 1) < 1e-3 and page.is_visible("#qkv-weight-0")
    # Loaded from the address, with the widget's settings: that slide, those numbers.
    present(page, 3, qkv, "&mode=books&s=10,6,4&dk=64&scale=1")
    widgets_answered(page)
    at(page, qkv, lang)
    assert page.is_visible("#qkv-steps")
    assert page.text_content("#qkv-weight-0") == "0.481"
    # A slider on the slide: the arrow keys move the slider, not the slides; the state is kept
    # when the slide is left and shown again (the widget is mounted once).
    page.focus("#qkv-score-0")
    page.keyboard.press("ArrowLeft")
    at(page, qkv, lang)
    page.wait_for_function("() => document.querySelector('#qkv-score-0').value === '9.5'")
    page.wait_for_function("() => JSON.parse(document.querySelector('#qkv-out').dataset.request).scores[0] === 9.5")
    after = page.text_content("#qkv-weight-0")
    assert after != "0.481" and params(page)["s"].startswith("9.5")
    page.click("#slide-next")  # the focus was on the slider; the page moves on
    at(page, qkv + 1, lang)
    assert page.evaluate("() => !document.activeElement.closest('.slide[hidden]')")
    page.click("#slide-prev")
    assert page.text_content("#qkv-weight-0") == after
    # Another section's second widget of the basic path (§6's table of positions) shows its
    # numbers on its own slide, loaded from the address.
    page.keyboard.press("End")
    page.keyboard.press("Home")
    present(page, 6)
    widgets_answered(page)
    other = slide_of(page, "#widget-pe-table")
    assert other > slide_of(page, "#widget-word-order")
    present(page, 6, other)
    widgets_answered(page)
    at(page, other, lang)
    assert page.is_visible("#widget-pe-table")
    assert page.locator(f"#slide-{other} .widget-out svg, #slide-{other} .widget-out table").count() > 0
    # Out of range, or "last".
    present(page, 3, 999)
    at(page, total(page), lang)
    present(page, 3, "x")
    at(page, 1, lang)
    # The page links to projector mode with its settings; projector mode links back to that slide.
    page.goto("/lesson/3?mode=books&s=8,4,2&dk=64")
    section_drawn(page)
    assert page.text_content("#present-link") == t(lang, "ls_present")
    page.click("#present-link")
    section_drawn(page)
    at(page, 1, lang)
    assert params(page)["s"] == "8,4,2"
    present(page, 3, qkv)
    href = page.get_attribute("#slide-exit", "href")
    assert "view=" not in href and "slide=" not in href and href.endswith("#widget-qkv")


def test_try_links_in_projector_mode_open_the_widgets_slide(page, lang):
    section = SECTIONS[3]
    present(page, 3)
    widgets_answered(page)
    qkv = slide_of(page, "#widget-qkv")
    # The parameters the slides' widgets read. A try item marked further (it sets a 発展 widget, e.g.
    # the additive-attention example's row and numbers) is on no slide, as its fold is not; every
    # other item's link opens the slide of the widget it sets.
    expected = {"dk": qkv, "s": qkv, "mode": qkv}
    seen = set()
    for i, item in enumerate(section.try_):
        if not item.params:
            continue
        if item.further:
            assert page.locator(f"#try-apply-{i}").count() == 0, (i, item.params)
            seen.add("off the slides")
            continue
        href = page.get_attribute(f"#try-apply-{i}", "href")
        got = {k: v[0] for k, v in parse_qs(urlparse(href).query).items()}
        assert got["lang"] == lang and urlparse(href).path == "/lesson/3"
        assert {k: got[k] for k in item.params} == dict(item.params), (i, item.params)
        assert got["view"] == "present" and "further" not in got
        slide = next(expected[k] for k in item.params if k in expected)
        assert got["slide"] == str(slide), (i, item.params)
        seen.add("slide")
    assert seen == {"off the slides", "slide"}
    present(page, 3, slide_of(page, "#try-apply-0"))
    page.click("#try-apply-0")
    section_drawn(page)
    at(page, qkv, lang)


def test_projector_mode_is_accessible(page, lang):
    present(page, 3)
    widgets_answered(page)
    assert_accessible(page)
    for selector in ("#widget-qkv", "#question-0"):
        present(page, 3, slide_of(page, selector))
        widgets_answered(page)
        assert_accessible(page)
    present(page, 9, "last")
    assert_accessible(page)


# --------------------------------------------------------------------------------------------
# Progress a student keeps.
# --------------------------------------------------------------------------------------------


def answer(pg, i: int, stored: int) -> None:
    pg.check(f'#question-{i} input[value="{stored}"]')
    pg.click(f"#q{i}-submit")


def wrong(q) -> int:
    return next(j for j in range(len(q.choices)) if j != q.answer)


def index_badges(pg) -> dict[int, str]:
    pg.goto("/")
    pg.wait_for_selector("#progress:not(.hidden)")
    return dict(
        pg.eval_on_selector_all(
            ".progress-badge", "ns => ns.map(n => [Number(n.id.replace('progress-', '')), n.textContent])"
        )
    )


def test_answers_survive_a_reload_and_tick_the_index(page, lang):
    section = SECTIONS[2]
    pick = lambda text: getattr(text, lang)  # noqa: E731
    n = len(section.check)
    assert index_badges(page) == {}
    assert page.text_content("#progress-summary") == t(lang, "ls_progress_summary", n=0, total=len(SECTIONS))
    assert page.is_hidden("#progress-reset")

    page.goto("/lesson/2")
    section_drawn(page)
    q0, q1, q2 = section.check[:3]
    answer(page, 0, q0.answer)  # right at the first try
    answer(page, 1, wrong(q1))  # right at the second
    answer(page, 1, q1.answer)
    answer(page, 2, wrong(q2))  # missed
    answer(page, 2, next(j for j in range(len(q2.choices)) if j not in (q2.answer, wrong(q2))))
    page.reload()
    section_drawn(page)
    done = page.eval_on_selector_all(".question", "ns => ns.map(n => n.dataset.done || '')")
    assert done == ["first", "second", "missed"] + [""] * (n - 3)
    for i, q in enumerate(section.check[:3]):
        assert page.get_attribute(f"#question-{i}", "data-restored") == "1"
        assert page.text_content(f"#question-{i} .restored-note") == t(lang, "ls_progress_restored")
        assert page.text_content(f"#q{i}-feedback .explanation") == pick(q.explanation)
        assert page.locator(f"#question-{i} .right-choice").get_attribute("data-choice") == str(q.answer)
        assert page.is_disabled(f"#q{i}-submit")
        assert all(page.is_disabled(f'#question-{i} input[value="{j}"]') for j in range(len(q.choices)))
    assert page.get_attribute("#q0-feedback", "data-result") == "correct"
    assert page.get_attribute("#q2-feedback", "data-result") == "wrong"
    assert page.locator("#question-1 .tried-choice").get_attribute("data-choice") == str(wrong(q1))
    assert page.locator("#question-2 .tried-choice").get_attribute("data-choice") == str(wrong(q2))
    assert page.locator("#question-2 .wrong-choice").count() == 1
    assert page.is_enabled("#q3-submit") and not page.get_attribute("#question-3", "data-done")

    assert index_badges(page) == {2: t(lang, "ls_progress_some", n=3, total=n)}
    assert page.get_attribute("#progress-2", "data-state") == "begun"
    assert page.text_content("#progress-summary") == t(lang, "ls_progress_summary", n=0, total=len(SECTIONS))

    page.goto("/lesson/2")
    section_drawn(page)
    for i in range(3, n):
        answer(page, i, section.check[i].answer)
    assert index_badges(page) == {2: t(lang, "ls_progress_done", n=n, total=n)}
    assert page.get_attribute("#progress-2", "data-state") == "done"
    assert t(lang, "ls_progress_done", n=n, total=n).startswith("✓")
    assert page.text_content("#progress-summary") == t(lang, "ls_progress_summary", n=1, total=len(SECTIONS))
    # What is kept: per section, by question index and a hash of the question.
    data = kept(page)
    assert data["v"] == 1 and list(data["sections"]) == ["2"]
    assert all(re.fullmatch(r"\d+:[0-9a-f]{8}", key) for key in data["sections"]["2"])
    assert sorted(int(key.split(":")[0]) for key in data["sections"]["2"]) == list(range(n))
    assert_accessible(page)

    # The other language shows the same progress in its words.
    other = "en" if lang == "ja" else "ja"
    page.click(f"#lang-{other}")
    assert page.text_content("#progress-2") == t(other, "ls_progress_done", n=n, total=n)


def test_reset_asks_first_then_clears_everything(page, lang):
    page.goto("/lesson/3")
    section_drawn(page)
    answer(page, 0, SECTIONS[3].check[0].answer)
    page.goto("/lesson/9")
    section_drawn(page)
    answer(page, 0, SECTIONS[9].check[0].answer)
    assert set(index_badges(page)) == {3, 9}
    assert page.is_visible("#progress-reset")
    asked = []

    def dismiss(dialog):
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.click("#progress-reset")
    assert asked == [t(lang, "ls_progress_reset_confirm")]
    assert set(index_badges(page)) == {3, 9}  # nothing cleared
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#progress-reset")
    assert page.locator(".progress-badge").count() == 0 and page.is_hidden("#progress-reset")
    assert page.evaluate("() => document.activeElement.id") == "progress-summary"
    assert kept(page) is None
    assert index_badges(page) == {}
    page.goto("/lesson/3")
    section_drawn(page)
    assert page.locator(".question[data-done]").count() == 0


def test_an_edited_question_does_not_keep_its_old_answer(routed_page, lang):
    page = routed_page
    section = SECTIONS[4]
    page.goto("/lesson/4")
    section_drawn(page)
    answer(page, 0, section.check[0].answer)
    answer(page, 1, section.check[1].answer)

    def edited(route):
        body = json.loads(route.fetch().text())
        body["check"][0]["question"]["en"] += " (edited)"
        route.fulfill(json=body)

    page.route("**/static/data/lesson/sections/4.json", edited)
    page.reload()
    section_drawn(page)
    assert page.get_attribute("#question-0", "data-done") is None and page.is_enabled("#q0-submit")
    assert page.get_attribute("#question-1", "data-done") == "first"
    assert index_badges(page) == {4: t(lang, "ls_progress_some", n=1, total=len(section.check))}
    # Answering the edited question keeps only the answers to the questions as they are now.
    page.goto("/lesson/4")
    section_drawn(page)
    answer(page, 0, section.check[0].answer)
    assert len(kept(page)["sections"]["4"]) == 2
    # A damaged value is ignored, not an error.
    page.evaluate(f"() => window.localStorage.setItem('{PROGRESS_KEY}', '{{not json')")
    assert index_badges(page) == {}
    page.goto("/lesson/4")
    section_drawn(page)
    assert page.locator(".question[data-done]").count() == 0


def test_projector_mode_and_the_answer_key_neither_show_nor_keep_answers(page, lang):
    q = SECTIONS[5].check[0]
    page.goto("/lesson/5")
    section_drawn(page)
    answer(page, 0, q.answer)
    before = kept(page)
    present(page, 5, "last")
    slide = slide_of(page, "#question-0")
    present(page, 5, slide)
    assert page.get_attribute("#question-0", "data-done") is None  # the room does not see it
    page.check(f'#question-0 input[value="{wrong(q)}"]')
    page.click("#q0-submit")
    page.check(f'#question-0 input[value="{q.answer}"]')
    page.click("#q0-submit")
    assert page.get_attribute("#question-0", "data-done") == "second"
    page.goto("/lesson/5?teacher=1")
    section_drawn(page)
    page.goto("/lesson/5?print=1")
    section_drawn(page)
    assert page.locator(".question[data-done]").count() == 0
    assert kept(page) == before


# --------------------------------------------------------------------------------------------
# The answer key and the teacher notes.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [3, 9])
def test_teacher_1_shows_every_answer_and_explanation(page, lang, n):
    section = SECTIONS[n]
    pick = lambda text: getattr(text, lang)  # noqa: E731
    page.goto(f"/lesson/{n}?teacher=1")
    section_drawn(page)
    assert page.get_attribute("body", "data-teacher") == "1"
    assert page.text_content("#check-title + .note") == t(lang, "ls_teacher_key_intro")
    assert page.locator(".question button[type=submit]").count() == 0
    for i, q in enumerate(section.check):
        feedback = page.locator(f"#q{i}-feedback")
        assert feedback.get_attribute("data-result") == "key"
        assert t(lang, "ls_teacher_answer", answer=pick(q.choices[q.answer])) in feedback.text_content()
        # A formula typeset as MathML is read as the content writes it (written).
        assert written(page, f"#q{i}-feedback .explanation") == pick(q.explanation)
        assert written(page, f"#q{i}-feedback .hint") == pick(q.hint)
        right = page.locator(f"#question-{i} .right-choice")
        assert right.count() == 1 and right.get_attribute("data-choice") == str(q.answer)
        assert right.locator(".answer-mark").text_content() == t(lang, "ls_teacher_answer_mark")
        assert page.is_checked(f'#question-{i} input[value="{q.answer}"]')
        assert all(page.is_disabled(f'#question-{i} input[value="{j}"]') for j in range(len(q.choices)))
    if section.teacher is not None:
        assert page.get_attribute("#teacher-notes", "open") is not None
    assert page.get_attribute("#prev-section", "href") == lesson_href(f"/lesson/{n - 1}", f"?teacher=1&lang={lang}")
    assert_accessible(page)
    # Without teacher=1 nothing of the answers shows: the check's questions show no answer, nothing
    # is marked as the key, and a prediction at a widget shows its answer only once committed (this
    # module's pages commit each prediction as a reader does: make_page's AUTO_UNCOVER).
    page.goto(f"/lesson/{n}")
    section_drawn(page)
    assert page.get_attribute("body", "data-teacher") is None
    assert page.locator(".check :is(.feedback .explanation, .right-choice)").count() == 0
    assert page.locator(".answer-mark, .feedback[data-result=key]").count() == 0
    assert page.locator(".prediction").count() == len(section.predict)
    assert page.locator(".prediction:not([data-done]) :is(.explanation, .right-choice)").count() == 0
    assert (
        page.locator(".prediction[data-done] .right-choice").count() == page.locator(".prediction[data-done]").count()
    )
    # In projector mode too (a teacher going through the answers with the class).
    present(page, n, "last", "&teacher=1")
    assert page.get_attribute("body", "data-teacher") == "1"
    # The last slide is the key points (after the check); the one before it, the last question.
    assert page.is_visible("#key-points li")
    page.keyboard.press("ArrowLeft")
    last = len(section.check) - 1
    assert page.is_visible(f"#q{last}-feedback .explanation")
    page.keyboard.press("End")
    page.keyboard.press("ArrowRight")  # the next section keeps the answer key
    if n < max(SECTIONS):
        page.wait_for_url(at_section(n + 1))
        assert params(page)["teacher"] == "1"


def test_teacher_notes_are_folded_at_the_end_and_drawn_only_when_present(routed_page, lang):
    page = routed_page
    with_notes = [n for n, s in SECTIONS.items() if getattr(s, "teacher", None)]
    n = with_notes[0] if with_notes else 3

    def fake(route):
        body = json.loads(route.fetch().text())
        if not body.get("teacher"):
            body["teacher"] = {
                "minutes": 25,
                "html": {
                    "ja": "<p>問いかけ<script>x()</script></p><h3>誤解</h3>",
                    "en": "<p>Ask<script>x()</script></p><h3>Misconceptions</h3>",
                },
            }
        route.fulfill(json=body)

    if not with_notes:
        page.route(f"**/static/data/lesson/sections/{n}.json", fake)
    page.goto(f"/lesson/{n}")
    section_drawn(page)
    notes = page.locator("#teacher-notes")
    assert notes.count() == 1 and notes.get_attribute("open") is None
    assert notes.locator("summary").text_content().startswith(t(lang, "ls_teacher_notes"))
    # The basic path's minutes, and the 発展 part's beside them when the section has one.
    minutes = SECTIONS[n].teacher.minutes if with_notes else 25
    further = SECTIONS[n].teacher.further_minutes if with_notes else 0
    assert page.text_content("#teacher-minutes") == (
        t(lang, "ls_teacher_minutes_further", n=minutes, m=further)
        if further
        else t(lang, "ls_teacher_minutes", n=minutes)
    )
    assert notes.locator("script").count() == 0
    # After the check, before the related pages and the pager.
    order = page.eval_on_selector_all("#section > *", "ns => ns.map(n => n.id || n.className)")
    assert order.index("teacher-notes") > order.index("check")
    nav = [i for i, c in enumerate(order) if c in ("related", "pager")]
    assert all(i > order.index("teacher-notes") for i in nav)
    page.click("#teacher-notes summary")
    assert notes.get_attribute("open") is not None and page.is_visible(".teacher-notes-body")
    assert_accessible(page)
    # A section without notes: no box, no error.

    def strip(route):
        body = json.loads(route.fetch().text())
        body.pop("teacher", None)
        route.fulfill(json=body)

    page.unroute(f"**/static/data/lesson/sections/{n}.json")
    page.route(f"**/static/data/lesson/sections/{n}.json", strip)
    page.goto(f"/lesson/{n}")
    section_drawn(page)
    assert page.locator("#teacher-notes").count() == 0 and page.locator(".question").count() == len(SECTIONS[n].check)
    page.unroute(f"**/static/data/lesson/sections/{n}.json")

    def null(route):
        body = json.loads(route.fetch().text())
        body["teacher"] = None
        route.fulfill(json=body)

    page.route(f"**/static/data/lesson/sections/{n}.json", null)
    page.goto(f"/lesson/{n}")
    section_drawn(page)
    assert page.locator("#teacher-notes").count() == 0
