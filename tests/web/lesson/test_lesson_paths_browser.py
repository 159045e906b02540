"""The third edition's paths as a learner and a teacher see them, in Japanese and English, in real
headless Chromium: the 発展 / "Going further" folds, a prediction asked at its widget (the widget
covered until a choice is committed, then revealed with the explanation), the key points after the
check (folded until it is answered), the index's two paths and the basic path's progress, the
glossary in the top navigation (with its aliases), the teacher's plan, and projector slides without
発展, code and notes, each widget with the sentence that introduces it.

The explorer here serves the shipped lesson with one small place converted
(tests/lesson_paths_fixture.py: §6's "other ways" folded, a prediction at its word-order widget,
its teacher notes split into minutes and further_minutes). Screenshots go to
``test-artifacts/lesson-paths/``. Run with ``pytest -m browser tests/web/lesson/test_lesson_paths_browser.py``.
"""

from __future__ import annotations

import html
import re
from urllib.parse import parse_qs, urlparse

import pytest
from lesson_browser import ARTIFACTS_ROOT, BROWSER_MARKS, lesson_href, make_page, section_drawn, widgets_answered
from lesson_paths_fixture import BASIC_MINUTES, FURTHER_MINUTES, SECTION, paths_content

from attnlab.web import i18n
from attnlab.web import lesson as L

ARTIFACTS = ARTIFACTS_ROOT / "lesson-paths"
pytestmark = BROWSER_MARKS
page = make_page(ARTIFACTS, timeout_ms=60_000, uncovered=False)  # the covers and folds are what it tests


@pytest.fixture(scope="module")
def sections(tmp_path_factory) -> dict[int, L.Section]:
    return L.load_sections(paths_content(tmp_path_factory.mktemp("paths")))


@pytest.fixture(scope="module")
def lesson_sections(sections):
    """The shared lesson under test (the explorer or the static build) serves this content."""
    return sections


def t(lang: str, key: str, **values) -> str:
    return i18n.t(lang, key, **values)


def pick(text, lang: str) -> str:
    return getattr(text, lang)


def query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}


def answer_all(pg, section: L.Section) -> None:
    """Answer every question of the check right at the first try."""
    for i, q in enumerate(section.check):
        pg.check(f'#question-{i} input[value="{q.answer}"]')
        pg.click(f"#q{i}-submit")
        pg.wait_for_selector(f"#question-{i}[data-done]")


# --------------------------------------------------------------------------------------------
# 発展 folds.
# --------------------------------------------------------------------------------------------


def test_a_further_region_is_a_marked_fold_closed_on_the_basic_path(page, lang, sections):
    section = sections[SECTION]
    page.goto(f"/lesson/{SECTION}")
    section_drawn(page)
    folds = page.locator("details.further")
    assert folds.count() == 1
    fold = folds.first
    assert fold.get_attribute("open") is None
    assert fold.locator("> summary .further-badge").text_content() == t(lang, "ls_further")
    assert fold.locator("> summary .further-skip").text_content() == t(lang, "ls_further_skip")
    # Every block inside the region is in the fold, every other block outside it.
    for i, b in enumerate(section.blocks):
        target = f"#widget-{b.widget}" if b.type == "widget" else f"#block-{i}"
        assert page.eval_on_selector(target, "n => !!n.closest('details.further')") == b.further, (i, b.type)
    assert not page.is_visible("#widget-rope-scores") and page.is_visible("#widget-pe-table")
    # The fold is visibly marked: a dashed border, its badge visible.
    assert page.eval_on_selector("details.further", "n => getComputedStyle(n).borderTopStyle") == "dashed"
    assert page.is_visible("details.further .further-badge")
    fold.locator("> summary").click()
    assert fold.get_attribute("open") == "" and page.is_visible("#widget-rope-scores")


def test_the_whole_lesson_opens_the_folds_and_keeps_them_open_from_page_to_page(page, lang):
    page.goto(f"/lesson/{SECTION}?further=1")
    section_drawn(page)
    assert page.get_attribute("details.further", "open") == ""
    assert query(page.get_attribute("#next-section", "href")) == {"further": "1", "lang": lang}
    assert query(page.get_attribute("#prev-section", "href")) == {"further": "1", "lang": lang}
    page.goto(f"/lesson/{SECTION}?teacher=1")
    section_drawn(page)
    assert page.get_attribute("details.further", "open") == ""  # the answer key shows everything


# --------------------------------------------------------------------------------------------
# Predict, then see.
# --------------------------------------------------------------------------------------------


def test_the_try_items_of_the_further_part_are_folded_apart_and_off_the_slides(page, lang, sections):
    """§2's "Try this": the items on the basic path in the box, the 発展 one (the BLEU table, a folded
    widget) in a fold of its own inside the box, marked like the page's folds, closed on the basic
    path and open in the whole lesson; the projector's slide carries the basic items only."""
    section = sections[2]
    basic = [i for i, item in enumerate(section.try_) if not item.further]
    further = [i for i, item in enumerate(section.try_) if item.further]
    assert basic and further
    page.goto("/lesson/2")
    section_drawn(page)
    assert page.eval_on_selector_all(".try-box > ul > li", "ns => ns.map(n => n.id)") == [f"try-{i}" for i in basic]
    fold = page.locator(".try-box > details.further#try-further")
    assert fold.count() == 1 and fold.get_attribute("open") is None
    assert fold.locator("> summary .further-badge").text_content() == t(lang, "ls_further")
    assert fold.locator("> summary .further-skip").text_content() == t(lang, "ls_further_skip")
    assert page.eval_on_selector_all("#try-further li", "ns => ns.map(n => n.id)") == [f"try-{i}" for i in further]
    assert page.text_content(f"#try-{further[0]} > span") == pick(section.try_[further[0]].text, lang)
    assert page.is_visible(f"#try-{basic[0]}") and not page.is_visible(f"#try-{further[0]}")
    fold.locator("> summary").click()
    assert fold.get_attribute("open") == "" and page.is_visible(f"#try-{further[0]}")
    page.goto("/lesson/2?further=1")
    section_drawn(page)
    assert page.get_attribute("#try-further", "open") == ""
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto("/lesson/2?view=present&slide=1")
    section_drawn(page)
    assert page.locator(".slide .try-box").count() == 1
    assert page.locator(".slide [id^=try-]:is(li)").count() == len(basic)
    assert page.locator("#try-further").count() == 0 and page.locator(f"#try-{further[0]}").count() == 0


def test_a_prediction_covers_its_widget_until_a_choice_is_committed(page, lang, sections):
    section = sections[SECTION]
    (p,) = section.predict
    page.goto(f"/lesson/{SECTION}")
    section_drawn(page)
    # Directly above the widget's first block: the prediction, then the covered widget.
    assert page.eval_on_selector("#predict-0", "n => n.nextElementSibling.id") == "predict-0-gate"
    assert page.eval_on_selector("#predict-0-gate", "n => n.contains(document.querySelector('#widget-word-order'))")
    assert page.text_content("#predict-0 .q-text") == pick(p.question, lang)
    assert page.text_content("#predict-0 .predict-badge") == t(lang, "ls_predict_title")
    assert page.is_visible("#predict-0-cover") and not page.is_visible("#widget-word-order")
    assert page.text_content("#predict-0-cover") == t(lang, "ls_predict_cover")
    assert page.get_attribute("#widget-word-order", "aria-hidden") == "true"
    assert page.eval_on_selector("#widget-word-order", "n => n.inert") is True
    # The cover hides the widget's figures: nothing of it is painted, its box clipped.
    box = page.locator("#predict-0-gate").bounding_box()
    assert box["height"] <= 16 * 12 + 4
    # Nothing chosen: asked to choose, still covered.
    page.click("#predict-0-submit")
    assert page.get_attribute("#predict-0-feedback", "data-result") == "none"
    assert page.text_content("#predict-0-feedback") == t(lang, "ls_predict_pick")
    assert not page.is_visible("#widget-word-order")
    # The choices are shuffled: the wrong one is found by its value.
    wrong = next(j for j in range(len(p.choices)) if j != p.answer)
    page.check(f'#predict-0 input[value="{wrong}"]')
    page.click("#predict-0-submit")
    assert page.get_attribute("#predict-0-gate", "data-revealed") == "1"
    assert page.is_visible("#widget-word-order") and not page.is_visible("#predict-0-cover")
    assert page.get_attribute("#widget-word-order", "aria-hidden") is None
    widgets_answered(page)
    feedback = page.locator("#predict-0-feedback")
    assert feedback.get_attribute("data-result") == "wrong"
    answer = pick(p.choices[p.answer], lang)
    assert feedback.locator("strong").text_content() == t(lang, "ls_predict_wrong", answer=answer)
    assert feedback.locator(".explanation").text_content() == pick(p.explanation, lang)
    assert page.get_attribute("#predict-0", "data-done") == "wrong"
    assert "right-choice" in page.get_attribute(f'#predict-0 [data-choice="{p.answer}"]', "class")
    assert page.eval_on_selector_all("#predict-0 input", "ns => ns.every((n) => n.disabled)")
    # Kept in this browser: a reload shows the widget and the prediction as they were left.
    page.reload()
    section_drawn(page)
    assert page.get_attribute("#predict-0-gate", "data-revealed") == "1" and page.is_visible("#widget-word-order")
    assert page.get_attribute("#predict-0", "data-done") == "wrong"


def test_a_right_prediction_says_so_and_the_answer_key_shows_the_widget(page, lang, sections):
    (p,) = sections[SECTION].predict
    page.goto(f"/lesson/{SECTION}")
    section_drawn(page)
    page.check(f'#predict-0 input[value="{p.answer}"]')
    page.click("#predict-0-submit")
    assert page.get_attribute("#predict-0-feedback", "data-result") == "correct"
    assert page.text_content("#predict-0-feedback strong") == t(lang, "ls_predict_right")
    page.goto(f"/lesson/{SECTION}?teacher=1")
    section_drawn(page)
    assert page.is_visible("#widget-word-order") and not page.is_visible("#predict-0-cover")
    assert page.locator("#predict-0 .answer-mark").count() == 1
    assert page.get_attribute("#predict-0-feedback", "data-result") == "key"


# --------------------------------------------------------------------------------------------
# The key points after the check.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, SECTION])
def test_the_key_points_come_after_the_check_folded_until_it_is_answered(page, lang, sections, n):
    section = sections[n]
    page.goto(f"/lesson/{n}")
    section_drawn(page)
    # After the check in the page's order.
    assert page.evaluate(
        "() => !!(document.querySelector('section.check').compareDocumentPosition("
        "document.querySelector('#key-points')) & Node.DOCUMENT_POSITION_FOLLOWING)"
    )
    assert page.get_attribute("#key-points", "open") is None
    assert not page.is_visible("#key-points li")
    assert page.text_content("#key-points-title") == t(lang, "ls_key_points")
    assert page.is_visible("#key-points-lock")
    for i, q in enumerate(section.check[:-1]):
        page.check(f'#question-{i} input[value="{q.answer}"]')
        page.click(f"#q{i}-submit")
    assert page.get_attribute("#key-points", "open") is None  # one question still open
    last = len(section.check) - 1
    page.check(f'#question-{last} input[value="{section.check[last].answer}"]')
    page.click(f"#q{last}-submit")
    assert page.get_attribute("#key-points", "open") == ""
    assert page.locator("#key-points li").all_text_contents() == [pick(k, lang) for k in section.key_points]
    assert page.is_visible("#key-points li") and not page.is_visible("#key-points-lock")


# --------------------------------------------------------------------------------------------
# The index: two paths; progress counts the basic path.
# --------------------------------------------------------------------------------------------


def test_the_index_offers_two_paths_and_counts_the_basic_path(page, lang, sections):
    basic = sum(s.teacher.minutes for s in sections.values())
    further = sum(s.teacher.further_minutes for s in sections.values())
    assert further == FURTHER_MINUTES
    page.goto("/")
    page.wait_for_selector("#paths:not(.hidden)")
    assert page.text_content("#paths-title") == t(lang, "ls_paths_title")
    assert page.get_attribute("#path-basic", "data-minutes") == str(basic)
    assert page.get_attribute("#path-whole", "data-minutes") == str(basic + further)
    assert t(lang, "ls_path_minutes", n=basic) in page.text_content("#path-basic h3")
    assert page.get_attribute("#path-start-basic", "href") == lesson_href("/lesson/1", f"?lang={lang}", on_index=True)
    assert query(page.get_attribute("#path-start-whole", "href")) == {"further": "1", "lang": lang}
    assert page.text_content(f"#toc-minutes-{SECTION}") == (
        t(lang, "ls_toc_minutes", n=BASIC_MINUTES)
        + t(lang, "ls_list_sep")
        + t(lang, "ls_toc_further", n=FURTHER_MINUTES)
    )
    assert page.text_content("#toc-minutes-1") == t(lang, "ls_toc_minutes", n=sections[1].teacher.minutes)
    assert page.get_attribute("#progress-basic", "data-done") == "0"
    assert page.get_attribute("#progress-basic", "data-total") == str(basic)
    # Finish §6 (its check is on the basic path): its basic minutes count, not its 発展 minutes.
    page.goto(f"/lesson/{SECTION}")
    section_drawn(page)
    answer_all(page, sections[SECTION])
    page.goto("/")
    page.wait_for_selector("#progress-basic")
    assert page.get_attribute("#progress-basic", "data-done") == str(BASIC_MINUTES)
    assert page.text_content("#progress-basic") == t(lang, "ls_progress_basic", n=BASIC_MINUTES, total=basic)
    page.on("dialog", lambda d: d.accept())
    page.click("#progress-reset")
    assert page.get_attribute("#progress-basic", "data-done") == "0"


# --------------------------------------------------------------------------------------------
# The glossary in the top navigation; the teacher's plan.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", f"/lesson/{SECTION}", "/lesson/glossary", "/lesson/plan"])
def test_every_lesson_page_has_the_glossary_in_its_top_navigation(page, lang, path):
    page.goto(path)
    page.wait_for_selector("#nav-glossary")
    assert page.text_content("#nav-glossary") == t(lang, "nav_glossary")
    assert page.get_attribute("#nav-glossary", "href") == lesson_href("/lesson/glossary", on_index=path == "/")
    assert page.is_visible("#nav-glossary")
    if path == "/lesson/glossary":
        assert page.get_attribute("#nav-glossary", "aria-current") == "page"


def test_the_glossary_shows_aliases(page, lang):
    page.goto("/lesson/glossary")
    page.wait_for_selector("#glossary:not([aria-busy])")
    glossary = L.load_glossary()
    residual = page.locator("#term-residual .term-aliases")
    assert residual.is_visible()
    assert residual.locator(".term-alias").all_text_contents() == glossary["residual"].aliases[lang]
    assert residual.text_content().startswith(t(lang, "ls_glossary_aliases"))
    assert not page.is_visible("#term-query .term-aliases")  # a term without aliases says nothing
    page.click("#nav-glossary")
    page.wait_for_selector("#glossary:not([aria-busy])")


def test_the_plan_lists_each_sections_minutes_and_adds_up(page, lang, sections):
    page.goto("/")
    page.wait_for_selector("#to-plan")
    page.click("#to-plan")
    page.wait_for_selector("#plan:not([aria-busy])")
    rows = page.eval_on_selector_all(
        "#plan-basic .plan-row",
        "ns => ns.map((n) => [Number(n.dataset.section), Number(n.dataset.minutes), Number(n.dataset.start), Number(n.dataset.end)])",
    )
    assert [r[:2] for r in rows] == [[n, s.teacher.minutes] for n, s in sections.items()]
    clock = 0
    for _, minutes, start, end in rows:
        assert (start, end) == (clock, clock + minutes)
        clock = end
    total = sum(s.teacher.minutes for s in sections.values())
    assert page.text_content("#plan-basic .plan-total") == str(total) == page.get_attribute("#plan-basic", "data-total")
    assert page.text_content("#plan-basic-title") == t(lang, "ls_plan_basic", n=total)
    further = page.eval_on_selector_all(
        "#plan-further .plan-row", "ns => ns.map((n) => [Number(n.dataset.section), Number(n.dataset.minutes)])"
    )
    assert further == [[SECTION, FURTHER_MINUTES]]
    assert page.text_content("#plan-further .plan-total") == str(FURTHER_MINUTES)
    link = page.get_attribute(f'#plan-further .plan-row[data-section="{SECTION}"] a', "href")
    assert query(link) == {"teacher": "1", "further": "1", "lang": lang}


# --------------------------------------------------------------------------------------------
# Projector slides.
# --------------------------------------------------------------------------------------------


def slides_of(pg) -> list[dict]:
    return pg.eval_on_selector_all(
        ".slide",
        """ns => ns.map((s) => ({
          kind: [...s.classList].find((c) => c.startsWith('slide-') && c !== 'slide-tall').slice(6),
          widgets: [...s.querySelectorAll('.widget')].map((w) => w.dataset.widget),
          text: s.textContent,
          code: s.querySelectorAll('.slide-inner > :is(.lesson-code, .lesson-memo, .lesson-note, details.further)').length,
          intro: [...s.querySelectorAll('.widget-intro')].map((n) => n.id),
          predict: s.querySelectorAll('.prediction').length,
        }))""",
    )


def test_projector_slides_carry_the_basic_path_and_each_widget_with_its_sentence(page, lang, sections):
    section = sections[SECTION]
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(f"/lesson/{SECTION}?view=present&slide=1")
    section_drawn(page)
    slides = slides_of(page)
    assert all(s["code"] == 0 for s in slides), "code, technical notes, note boxes and 発展 stay off the slides"
    on_slides = [w for s in slides for w in s["widgets"]]
    assert on_slides == [b.widget for b in section.blocks if b.type == "widget" and not b.further]
    for i, b in enumerate(section.blocks):
        if b.type == "html":  # 発展's text is on no slide; the basic path's is
            assert page.locator(f".slide #block-{i}").count() == (0 if b.further else 1), i
    # The widget's slide: the sentence before it, the prediction, then the widget (covered).
    (word,) = [s for s in slides if "word-order" in s["widgets"]]
    first_widget = next(i for i, b in enumerate(section.blocks) if b.widget == "word-order")
    # The introducing sentence: the last paragraph of the text block right before the widget.
    before = pick(section.blocks[first_widget - 1].html, lang)
    last_paragraph = html.unescape(re.sub(r"<[^>]+>", "", before.rsplit("<p>", 1)[1])).strip()
    k = slides.index(word) + 1
    page.goto(f"/lesson/{SECTION}?view=present&slide={k}")
    section_drawn(page)
    order = page.eval_on_selector(f"#slide-{k} .slide-inner", "n => [...n.children].map((c) => c.id || c.className)")
    at = order.index("predict-0")
    # Above: the text that introduces the widget, ending with the paragraph right before it; then
    # the prediction and the covered widget; below it, only text that points back at it (「上の例」).
    lead, after = order[:at], order[at + 2 :]
    assert lead and order[at + 1] == "predict-0-gate" and word["predict"] == 1
    assert re.fullmatch(rf"block-{first_widget - 1}(-\d+)?", lead[-1])
    assert page.text_content(f"#{lead[-1]}").strip() == last_paragraph
    assert lead + after == word["intro"]
    for node in after:  # the piece points back in one language or the other (a slide is the same in both)
        b = section.blocks[int(node.split("-")[1])]
        assert re.search(r"上の|above", b.html.ja + b.html.en), node
    assert not page.is_visible("#widget-word-order")
    (p,) = section.predict
    page.check(f'#predict-0 input[value="{p.answer}"]')
    page.click("#predict-0-submit")
    assert page.is_visible("#widget-word-order")


# Words that point at a figure by its place on the page (「下の層」, the layer below, is no figure).
FIGURE_WORDS = {
    "ja": re.compile(
        r"[上下]の(図|表|グラフ|ヒートマップ|ウィジェット|地図|例|ボタン|欄|スライダー)|[上下]では|左側|右側|[上下]図|次の図"
    ),
    "en": re.compile(r"\b(below|above|on the left|on the right|left-hand|right-hand)\b", re.IGNORECASE),
}


@pytest.mark.parametrize("n", sorted(L.load_sections()))
def test_no_slide_is_half_empty_or_points_at_a_figure_it_does_not_show(page, lang, sections, n):
    """Issue 34's projector rules, on a 1280 × 720 projector: every slide's content fills at least
    half its height (a lone paragraph whose widget is on the next slide is what this catches), and
    a slide without a widget does not point at a figure by its place (「下の図」「左側」, "below"),
    with no exceptions: a sentence about a figure names it (「重みの表」, "the alignment map") or
    stands on the figure's slide."""
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(f"/lesson/{n}?view=present&slide=1")
    section_drawn(page)
    widgets_answered(page)
    total = page.locator(".slide").count()
    problems = []
    for k in range(1, total + 1):
        page.goto(f"/lesson/{n}?view=present&slide={k}")
        section_drawn(page)
        widgets_answered(page)
        page.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
        m = page.eval_on_selector(
            f"#slide-{k}",
            """s => {
              const inner = s.querySelector('.slide-inner');
              const kids = [...inner.children].filter((c) => c.getBoundingClientRect().height > 0);
              const top = Math.min(...kids.map((c) => c.getBoundingClientRect().top));
              const bottom = Math.max(...kids.map((c) => c.getBoundingClientRect().bottom));
              return { used: (bottom - top) / s.clientHeight, widget: !!s.querySelector('.widget'),
                kind: [...s.classList].find((c) => c.startsWith('slide-') && c !== 'slide-tall').slice(6),
                text: [...s.querySelectorAll('.lesson-text')].map((t) => t.textContent).join(' ') };
            }""",
        )
        if m["used"] < 0.5:
            problems.append((k, m["kind"], f"{m['used']:.0%} used"))
        if not m["widget"]:
            words = dict.fromkeys(x.group(0).lower() for x in FIGURE_WORDS[lang].finditer(m["text"]))
            if words:
                problems.append((k, m["kind"], list(words)))
    assert not problems, problems
