"""The lesson's checks, final check and glossary in real headless Chromium, in Japanese and English.

- The choices' order: ``Lesson.shuffled`` run thousands of times in the page puts every choice in
  every position equally often (a chi-square test), and reloading a page moves the right answer.
- A question's tries: a wrong answer shows the hint and allows a second try; the right answer and
  the explanation appear only once it is answered right or tried twice.
- The final check (``/lesson/10``): listed last on the index, each question linked to its section,
  a tally with the sections to read again once every question is answered.
- The glossary: every term, its anchor, the term links in the text, the sections that use it.
- axe-core (no serious or critical violation) on the index, the glossary and the final check, and
  answering by keyboard alone.

Screenshots go to ``test-artifacts/lesson/`` (git-ignored). Run with
``pytest -m browser tests/web/lesson/test_lesson_checks_browser.py``; without /usr/bin/chromium the tests skip.
"""

from __future__ import annotations

import collections
from urllib.parse import parse_qs, urlparse

import pytest
from lesson_browser import (
    ARTIFACTS_ROOT,
    BROWSER_MARKS,
    assert_accessible,
    lesson_href,
    lesson_path,
    make_page,
    open_section,
    params,
    tab_to,
)

from attnlab.web import i18n
from attnlab.web import lesson as L

ARTIFACTS = ARTIFACTS_ROOT / "lesson"

pytestmark = BROWSER_MARKS
TIMEOUT_MS = 30_000
SECTIONS = L.load_sections()
GLOSSARY = L.load_glossary()
USES = L.term_uses(SECTIONS, L.load_glossary())
FINAL = max(SECTIONS)
# Chi-square critical values at p = 1e-4 (a false alarm once in 10,000 runs), by degrees of freedom.
CHI2_CRITICAL = {2: 18.42, 3: 21.11, 4: 23.51, 9: 33.72, 16: 42.31}


page = make_page(ARTIFACTS, timeout_ms=TIMEOUT_MS)


def t(lang: str, key: str, **values) -> str:
    return i18n.t(lang, key, **values)


def choice(i: int, stored: int) -> str:
    """The radio button of question ``i`` whose choice is ``stored`` (its index in the file)."""
    return f'#question-{i} input[value="{stored}"]'


def shown_position(pg, i: int, stored: int) -> int:
    """Where on the page (0: first) question ``i`` shows the choice stored at ``stored``."""
    return pg.eval_on_selector_all(
        f"#question-{i} .choice", "(ns, s) => ns.findIndex((n) => n.dataset.choice === String(s))", stored
    )


def wrong_choices(q) -> list[int]:
    return [j for j in range(len(q.choices)) if j != q.answer]


# --------------------------------------------------------------------------------------------
# Position carries no information.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_choices, draws", [(3, 6000), (4, 8000), (5, 10000)])
def test_the_shuffle_puts_every_choice_in_every_position_equally_often(page, lang, n_choices, draws):
    """``Lesson.shuffled`` (the page's own function, with the browser's Math.random) run thousands of
    times: the counts of (choice, position) fit the uniform distribution (chi-square, p = 1e-4)."""
    open_section(page, FINAL)
    counts = page.evaluate(
        """([k, draws]) => {
          const counts = Array.from({ length: k }, () => new Array(k).fill(0));
          const items = Array.from({ length: k }, (_, j) => j);
          for (let d = 0; d < draws; d++) {
            const order = window.Lesson.shuffled(items);
            order.forEach((item, position) => { counts[item][position] += 1; });
          }
          return counts;
        }""",
        [n_choices, draws],
    )
    expected = draws / n_choices
    for item, row in enumerate(counts):
        assert sum(row) == draws
        chi2 = sum((c - expected) ** 2 / expected for c in row)
        assert chi2 < CHI2_CRITICAL[n_choices - 1], (item, row, chi2)  # the right answer's position
    cells = [c for row in counts for c in row]
    chi2 = sum((c - expected) ** 2 / expected for c in cells)
    assert chi2 < CHI2_CRITICAL[(n_choices - 1) ** 2], (counts, chi2)
    # The input is left alone and every item comes out once.
    assert (
        page.evaluate(
            "() => { const a = [0, 1, 2, 3]; const b = window.Lesson.shuffled(a); return a.join() + '|' + [...b].sort().join(); }"
        )
        == "0,1,2,3|0,1,2,3"
    )


def test_reloading_a_section_moves_the_right_answer(page, lang):
    """Ten loads of the final check: each question's right answer is not always in the same place,
    and over all questions it lands in every position."""
    final = SECTIONS[FINAL]
    seen: dict[int, list[int]] = collections.defaultdict(list)
    for _ in range(10):
        open_section(page, FINAL)
        for i, q in enumerate(final.check):
            seen[i].append(shown_position(page, i, q.answer))
    for i, positions in seen.items():
        assert len(set(positions)) >= 2, (i, positions)
    everywhere = collections.Counter(p for positions in seen.values() for p in positions)
    assert set(everywhere) == set(range(max(len(q.choices) for q in final.check))), everywhere
    # Between two loads the whole order changes for most questions.
    orders = []
    for _ in range(2):
        open_section(page, FINAL)
        orders.append(page.eval_on_selector_all(".question .choice", "ns => ns.map(n => n.dataset.choice).join()"))
    assert orders[0] != orders[1]


# --------------------------------------------------------------------------------------------
# Two tries: the hint first, the answer after.
# --------------------------------------------------------------------------------------------


def test_a_wrong_answer_gets_the_hint_and_a_second_try(page, lang):
    final = SECTIONS[FINAL]
    pick = lambda text: getattr(text, lang)  # noqa: E731
    open_section(page, FINAL)
    q = final.check[0]
    feedback = page.locator("#q0-feedback")
    page.click("#q0-submit")  # nothing chosen
    assert feedback.get_attribute("data-result") == "none" and feedback.text_content() == t(lang, "ls_check_pick")
    first, second = wrong_choices(q)[:2]
    page.check(choice(0, first))
    page.click("#q0-submit")
    assert feedback.get_attribute("data-result") == "retry"
    assert feedback.locator(".hint").text_content() == pick(q.hint)
    assert t(lang, "ls_try_again") in feedback.text_content()
    # Nothing of the answer yet: no explanation, no marked choice, the right choice not named.
    assert feedback.locator(".explanation").count() == 0
    assert page.locator("#question-0 .right-choice").count() == 0
    assert pick(q.choices[q.answer]) not in feedback.text_content()
    # The wrong choice is struck out and cannot be taken again; the others can.
    assert page.is_disabled(choice(0, first)) and not page.is_checked(choice(0, first))
    assert page.locator(f'#question-0 .choice[data-choice="{first}"]').get_attribute("class").split() == [
        "choice",
        "tried-choice",
    ]
    assert all(page.is_enabled(choice(0, j)) for j in range(len(q.choices)) if j != first)
    page.click("#q0-submit")  # nothing chosen again: the hint stays
    assert feedback.get_attribute("data-result") == "none"
    assert feedback.locator(".hint").text_content() == pick(q.hint)
    page.check(choice(0, second))
    page.click("#q0-submit")
    assert feedback.get_attribute("data-result") == "wrong"
    assert t(lang, "ls_wrong", answer=pick(q.choices[q.answer])) in feedback.text_content()
    assert feedback.locator(".explanation").text_content() == pick(q.explanation)
    assert page.locator("#question-0 .right-choice").get_attribute("data-choice") == str(q.answer)
    assert all(page.is_disabled(choice(0, j)) for j in range(len(q.choices))) and page.is_disabled("#q0-submit")
    assert page.evaluate("() => document.activeElement.id") == "q0-feedback"  # the focus is not lost

    # Right at the second try.
    q = final.check[1]
    page.check(choice(1, wrong_choices(q)[0]))
    page.click("#q1-submit")
    assert page.get_attribute("#q1-feedback", "data-result") == "retry"
    page.check(choice(1, q.answer))
    page.click("#q1-submit")
    assert page.get_attribute("#q1-feedback", "data-result") == "correct"
    assert page.text_content("#q1-feedback .explanation") == pick(q.explanation)
    assert page.get_attribute("#question-1", "data-done") == "second"

    # Right at the first try: the explanation at once.
    q = final.check[2]
    page.check(choice(2, q.answer))
    page.click("#q2-submit")
    assert page.get_attribute("#q2-feedback", "data-result") == "correct"
    assert page.text_content("#q2-feedback .explanation") == pick(q.explanation)
    assert page.locator("#q2-feedback .hint").count() == 0

    # The other language: the same state, in its words.
    other = "en" if lang == "ja" else "ja"
    page.click(f"#lang-{other}")
    assert page.text_content("#q0-feedback .explanation") == getattr(final.check[0].explanation, other)
    assert page.text_content("#q1-feedback .explanation") == getattr(final.check[1].explanation, other)
    assert page.get_attribute("#q0-feedback", "data-result") == "wrong"
    assert_accessible(page)


# --------------------------------------------------------------------------------------------
# The final check.
# --------------------------------------------------------------------------------------------


def test_the_final_check_is_listed_last_and_links_every_question_to_its_section(page, lang):
    final = SECTIONS[FINAL]
    pick = lambda text: getattr(text, lang)  # noqa: E731
    page.goto("/")
    page.wait_for_selector("#toc:not([aria-busy])")
    items = page.eval_on_selector_all(".toc-item", "ns => ns.map(n => n.id)")
    assert items == [f"toc-{n}" for n in SECTIONS] and items[-1] == f"toc-{FINAL}"
    assert "toc-final" in page.get_attribute(f"#toc-{FINAL}", "class")
    assert page.locator(".toc-final").count() == 1
    page.click(f"#toc-link-{FINAL}")
    page.wait_for_function("() => !document.querySelector('#section[aria-busy]')")
    assert urlparse(page.url).path == lesson_path(f"/lesson/{FINAL}") and params(page)["lang"] == lang
    assert page.text_content("#section-title") == pick(final.title)
    assert page.text_content("#check-title") == t(lang, "ls_final_check")
    assert page.get_attribute("#prev-section", "href") == lesson_href(f"/lesson/{FINAL - 1}", f"?lang={lang}")
    assert page.locator("#next-section").count() == 0
    assert page.locator(".objectives li").count() == len(final.objectives)
    assert page.locator(".key-points li").count() == len(final.key_points)
    linked = []
    for i, q in enumerate(final.check):
        link = page.locator(f"#q{i}-section")
        assert link.get_attribute("href") == lesson_href(f"/lesson/{q.section}", f"?lang={lang}")
        assert link.text_content() == t(lang, "ls_from_section", n=q.section, title=pick(SECTIONS[q.section].title))
        linked.append(q.section)
    assert sorted(set(linked)) == list(range(1, FINAL))
    # The tally waits for the last question, then names the sections to read again.
    assert page.text_content("#check-tally") == ""
    missed = set()
    for i, q in enumerate(final.check):
        if i % 3 == 0:  # wrong twice
            for j in wrong_choices(q)[:2]:
                page.check(choice(i, j))
                page.click(f"#q{i}-submit")
            missed.add(q.section)
        elif i % 3 == 1:  # right at the second try
            page.check(choice(i, wrong_choices(q)[0]))
            page.click(f"#q{i}-submit")
            page.check(choice(i, q.answer))
            page.click(f"#q{i}-submit")
            missed.add(q.section)
        else:
            page.check(choice(i, q.answer))
            page.click(f"#q{i}-submit")
        if i < len(final.check) - 1:
            assert page.text_content("#check-tally") == ""
    first = sum(1 for i in range(len(final.check)) if i % 3 == 2)
    second = sum(1 for i in range(len(final.check)) if i % 3 == 1)
    tally = page.locator("#check-tally")
    assert t(lang, "ls_tally", n=len(final.check), first=first, second=second) in tally.text_content()
    review = tally.locator("a.review-link")
    assert [review.nth(k).get_attribute("href") for k in range(review.count())] == [
        lesson_href(f"/lesson/{n}", f"?lang={lang}") for n in sorted(missed)
    ]
    # A predict question's "now try it" opens its own section with the question's settings.
    with_params = [(i, q) for i, q in enumerate(final.check) if q.params]
    assert with_params
    for i, q in with_params:
        href = page.get_attribute(f"#q{i}-try", "href")
        url = urlparse(href)
        assert url.path == lesson_href(f"/lesson/{q.section}")
        assert {k: v[0] for k, v in parse_qs(url.query).items()} == {**q.params, "lang": lang}
    assert_accessible(page)


# --------------------------------------------------------------------------------------------
# The glossary.
# --------------------------------------------------------------------------------------------


def test_the_glossary_lists_every_term_with_its_anchor_and_uses(page, lang):
    other = "en" if lang == "ja" else "ja"
    page.goto("/lesson/glossary")
    page.wait_for_selector("#glossary:not([aria-busy])")
    assert page.text_content("h1") == t(lang, "ls_glossary")
    entries = page.eval_on_selector_all(".term-entry", "ns => ns.map(n => n.id)")
    assert entries == [f"term-{term}" for n in SECTIONS for term, g in GLOSSARY.items() if g.section == n]
    for term, g in GLOSSARY.items():
        entry = page.locator(f"#term-{term}")
        assert entry.locator(".term-main").text_content() == getattr(g.term, lang)
        assert entry.locator("dd p").first.text_content() == getattr(g.definition, lang)
        if g.term.ja != g.term.en:
            assert entry.locator(".term-other").text_content() == getattr(g.term, other)
            assert entry.locator(".term-other").get_attribute("lang") == other
        # Grouped under the section that introduces it, with links to every section that uses it.
        assert page.locator(f"#terms-{g.section} #term-{term}").count() == 1
        uses = entry.locator("a.term-use")
        assert [uses.nth(k).get_attribute("href") for k in range(uses.count())] == [
            lesson_href(f"/lesson/{n}", f"?lang={lang}") for n in USES.get(term, [])
        ]
    assert page.locator(".term-group h2 a").first.get_attribute("href") == lesson_href("/lesson/1", f"?lang={lang}")
    # An anchor from the text: the term is marked and scrolled into view.
    target = "softmax"
    page.goto(f"/lesson/glossary?lang={lang}#term-{target}")
    page.wait_for_selector(f"#term-{target}.term-target")
    assert page.evaluate(
        "(id) => { const r = document.getElementById(id).getBoundingClientRect(); return r.top > -2 && r.top < innerHeight; }",
        f"term-{target}",
    )
    assert page.locator(".term-target").count() == 1
    # The switch: the other language's terms, with their lang attribute.
    page.click(f"#lang-{other}")
    assert page.text_content(f"#term-{target} .term-main") == getattr(GLOSSARY[target].term, other)
    assert page.get_attribute(f"#term-{target} .term-other", "lang") == lang
    assert_accessible(page)


def test_term_links_in_the_text_open_the_glossary_entry_in_the_pages_language(page, lang):
    open_section(page, 3)
    links = page.locator("#section a.term")
    assert links.count() >= 5
    terms = set(page.eval_on_selector_all("#section a.term", "ns => ns.map(n => n.dataset.term)"))
    assert terms <= set(GLOSSARY) and {"query", "key", "value", "softmax"} <= terms
    assert page.locator("#section h2 a.term, #section h3 a.term").count() == 0  # headings are not linked
    link = page.locator('#section a.term[data-term="softmax"]').first
    assert link.get_attribute("href") == lesson_href("/lesson/glossary", f"?lang={lang}#term-softmax")
    assert page.get_attribute("#to-glossary", "href") == lesson_href(
        "/lesson/glossary", f"?lang={lang}"
    )  # every page links it
    link.click()
    page.wait_for_selector("#term-softmax.term-target")
    assert page.get_attribute("html", "lang") == lang
    assert page.text_content("#term-softmax .term-main") == getattr(GLOSSARY["softmax"].term, lang)
    # The glossary leads back to the section.
    page.click('#term-softmax a.term-use[data-section="3"]')
    page.wait_for_function("() => !document.querySelector('#section[aria-busy]')")
    assert urlparse(page.url).path == lesson_path("/lesson/3") and params(page)["lang"] == lang


# --------------------------------------------------------------------------------------------
# axe on the pages of this file, and the keyboard alone.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/lesson/glossary", f"/lesson/{FINAL}"])
def test_the_index_glossary_and_final_check_pass_axe(page, lang, path):
    page.goto(path)
    page.wait_for_function("() => !document.querySelector('[aria-busy]')")
    assert page.get_attribute("html", "lang") == lang
    if path == f"/lesson/{FINAL}":  # every feedback state on the page: retry, wrong, correct
        final = SECTIONS[FINAL]
        page.check(choice(0, wrong_choices(final.check[0])[0]))
        page.click("#q0-submit")
        for j in wrong_choices(final.check[1])[:2]:
            page.check(choice(1, j))
            page.click("#q1-submit")
        page.check(choice(2, final.check[2].answer))
        page.click("#q2-submit")
    assert_accessible(page)


def test_keyboard_only_from_the_index_to_an_answer(page, lang):
    final = SECTIONS[FINAL]
    page.goto("/")
    page.wait_for_selector("#toc:not([aria-busy])")
    tab_to(page, f"#toc-link-{FINAL}")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('#section') && !document.querySelector('#section[aria-busy]')")
    assert urlparse(page.url).path == lesson_path(f"/lesson/{FINAL}")
    # Question 1: Tab into its radio group, arrows to a wrong choice, Enter submits the form.
    q = final.check[0]
    wrong = wrong_choices(q)[0]
    tab_to(page, "#question-0 input[type=radio]")
    for _ in range(len(q.choices) + 1):
        if page.is_checked(choice(0, wrong)):
            break
        page.keyboard.press("ArrowDown")
    assert page.is_checked(choice(0, wrong))
    page.keyboard.press("Enter")  # Enter in a form's radio button submits it
    assert page.get_attribute("#q0-feedback", "data-result") == "retry"
    # The second try by keyboard: the tried choice is skipped, the right one reached.
    tab_to(page, "#question-0 input[type=radio]:not(:disabled)")
    for _ in range(len(q.choices) + 1):
        if page.is_checked(choice(0, q.answer)):
            break
        page.keyboard.press("ArrowDown")
    assert page.is_checked(choice(0, q.answer))
    tab_to(page, "#q0-submit")
    page.keyboard.press("Enter")
    assert page.get_attribute("#q0-feedback", "data-result") == "correct"
    assert page.evaluate("() => document.activeElement.id") == "q0-feedback"
    # From the feedback, Tab goes on to the next question's section link, then its choices.
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.id") == "q1-section"
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.name") == "q1"
    assert_accessible(page)
