"""``attnlab lesson handout``: the lesson printed to PDF by headless Chromium through the print
stylesheet, in Japanese and English, for the class and for the teacher.

- Without a browser: which sections a --sections value names, and the one-line errors for a bad
  value or a missing Chromium (given before anything starts).
- With Debian's Chromium (marked ``browser``): the PDF is written, every section prints with its
  title on its first page, no page is empty, the student's version lists every question with no
  answer, explanation, hint or teacher note, and the teacher's version has every answer's
  explanation and each section's teacher notes.

Text is read back with pypdf. Chromium's PDFs map some kanji of the page's font to radicals (入
as the Kangxi radical ⼊, 長 as ⻑), so texts are compared after NFKC normalization and a small
table of the other radicals, with all spaces removed. A formula the page typesets as MathML
(figure.js: d_k, exp(s_i)/Σ exp(s_j), √d_k) prints as its drawn letters, the subscript without its
mark and in mathematical italics (𝑑𝑘); both sides are read so (:func:`typeset`, then NFKC).
Run with ``pytest -m browser tests/web/lesson/test_handout.py``; without /usr/bin/chromium those tests skip.
"""

from __future__ import annotations

import contextlib
import io
import re
import time
import unicodedata
from html.parser import HTMLParser
from pathlib import Path

import pytest

from attnlab import cli
from attnlab.web import handout
from attnlab.web import lesson as L
from attnlab.web.i18n import t

SECTIONS = L.load_sections()
LAST = max(SECTIONS)  # the final check, the lesson's last section
CHROMIUM = Path("/usr/bin/chromium")
FOOTER = re.compile(r"attnlab lesson §(\d+)\s*(\d+) / (\d+)")
browser = pytest.mark.browser
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium (apt-get install chromium)")


# The CJK Radicals Supplement characters the PDF may give for a kanji (NFKC does not map them).
RADICALS = str.maketrans("⺟⺠⻄⻑⻘⻝⻤⻩⻭⻲⻨⻫⻯", "母民西長青食鬼黄歯亀麦斉竜")


# figure.js's SUB: a subscript written the plain way (d_k, s_i, R_{n−m}; not p_gen or a_b_c), which
# the page typesets as <msub>.
SUBSCRIPT = re.compile(r"(^|[^A-Za-z0-9_])([A-Za-z])_(\{[^{}]+\}|[A-Za-z0-9](?![A-Za-z0-9_]))")


def typeset(text: str) -> str:
    """``text`` as the page draws its formulas: each subscript as figure.js finds it (scanning on
    after each one, as it does) becomes its letter followed by the subscript, without the mark
    or the braces (d_k → dk, R_{n−m} → Rn−m). Text with no formula is unchanged."""
    out, rest = [], text
    while m := SUBSCRIPT.search(rest):
        out.append(rest[: m.start()] + m[1] + m[2] + (m[3][1:-1] if m[3].startswith("{") else m[3]))
        rest = rest[m.end() :]
    return "".join(out) + rest


def norm(text: str) -> str:
    """For comparing a page's text with the PDF's: NFKC (⼊ → 入, （ → (), 𝑑 → d), the radicals
    above mapped to their kanji, formulas as drawn (:func:`typeset`), no whitespace at all. Applied
    to both sides alike (the PDF holds no marks of a typeset formula, so it is unchanged there)."""
    return re.sub(r"\s+", "", typeset(unicodedata.normalize("NFKC", text).translate(RADICALS)))


def plain(html: str) -> str:
    """The text of an HTML fragment (the teacher notes are served as HTML)."""
    parts: list[str] = []
    parser = HTMLParser()
    parser.handle_data = parts.append
    parser.feed(html)
    return "".join(parts)


# --------------------------------------------------------------------------------------------
# Without a browser.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "chosen"),
    [
        (f"1-{LAST}", list(range(1, LAST + 1))),
        ("3", [3]),
        ("1,4-6", [1, 4, 5, 6]),
        (f"{LAST},1", [1, LAST]),
        ("2-2,2", [2]),
        (" 7 – 8 ", [7, 8]),
    ],
)
def test_sections_are_numbers_ranges_and_lists(spec, chosen):
    assert handout.parse_sections(spec, list(SECTIONS)) == chosen


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("0", f"the lesson has sections 1–{LAST}, not 0"),
        (f"1-{LAST + 3}", f"the lesson has sections 1–{LAST}, not {LAST + 1}"),
        ("5-3", "the range 5-3 runs backwards"),
        ("intro", "'intro' is not a section number or a range"),
        ("", "name sections as numbers and ranges"),
        ("1,,2", "name sections as numbers and ranges"),
    ],
)
def test_bad_sections_are_one_line_errors_before_anything_starts(spec, message, tmp_path, capsys, monkeypatch):
    def no_browser(*args, **kwargs):
        raise AssertionError("Chromium started for a bad --sections")

    monkeypatch.setattr(handout, "DevTools", no_browser)
    monkeypatch.setattr(handout, "serving", no_browser)
    out = tmp_path / "h.pdf"
    code = cli.main(["lesson", "handout", "--sections", spec, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert err.startswith("attnlab: error: --sections") and err.count("\n") == 1 and message in err, err


def test_without_chromium_the_error_says_what_to_do(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no chromium, chromium-browser or google-chrome here
    out = tmp_path / "h.pdf"
    assert cli.main(["lesson", "handout", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("attnlab: error: attnlab lesson handout prints with Chromium")
    assert "apt install chromium" in err and "?print=1" in err and "Print" in err
    assert cli.main(["lesson", "handout", "--chromium", str(tmp_path / "nowhere"), "--out", str(out)]) == 2
    assert "was not found" in capsys.readouterr().err and not out.exists()


def test_the_help_describes_both_versions(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["lesson", "handout", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: attnlab lesson handout")
    assert "--teacher" in text and "--sections" in text and "answer key" in text and "?print=1" in text


@browser
@needs_chromium
def test_the_students_print_hides_what_only_the_teachers_shows_and_the_screen_keeps_it():
    """The answer key's page (?teacher=1) has teacher notes, answer marks, hints and explanations:
    printed, the teacher's version shows every one; the student's (no ``data-teacher``) none of
    them; on screen the print rules do not apply."""
    import playwright.sync_api as playwright_api
    from live_server import serving

    from attnlab.web.app import create_app

    kinds = [".teacher-notes", ".answer-mark", ".key-hint", ".explanation"]
    shown = "sels => sels.map(s => [...document.querySelectorAll(s)].filter(e => getComputedStyle(e).display !== 'none').length)"
    with serving(create_app()) as port, playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        page = chromium.new_page()
        page.goto(f"http://127.0.0.1:{port}/lesson/3?lang=en&teacher=1&print=1", timeout=120_000)
        page.wait_for_function(
            "sels => document.body.dataset.teacher === '1' && sels.every(s => document.querySelector(s))",
            arg=kinds,
            timeout=120_000,
        )
        page.emulate_media(media="print")
        assert all(n > 0 for n in page.evaluate(shown, kinds))  # the teacher's print
        page.evaluate("delete document.body.dataset.teacher")
        assert page.evaluate(shown, kinds) == [0] * len(kinds)  # the student's print
        page.emulate_media(media="screen")
        assert all(n > 0 for n in page.evaluate(shown, kinds))  # the print rules only in print
        chromium.close()


# --------------------------------------------------------------------------------------------
# Printed by Chromium.
# --------------------------------------------------------------------------------------------


class Printed:
    """A handout read back: its pages' text (footers removed), and which section each page is of."""

    def __init__(self, path: Path, log: str = "") -> None:
        from pypdf import PdfReader

        self.path, self.log = path, log
        self.pages: list[tuple[int, str]] = []
        for page in PdfReader(path).pages:
            text = page.extract_text() or ""
            footer = FOOTER.search(text)
            assert footer, text[-200:]
            self.pages.append((int(footer[1]), FOOTER.sub("", text)))
        self.all = norm("".join(text for _, text in self.pages))

    def section(self, n: int) -> list[str]:
        return [text for m, text in self.pages if m == n]


def make(tmp_path_factory, lang: str, teacher: bool, sections: str, via_cli: bool = False) -> Printed:
    out = tmp_path_factory.mktemp("handout") / f"{lang}{'-teacher' if teacher else ''}.pdf"
    log = io.StringIO()
    if via_cli:
        args = ["lesson", "handout", "--lang", lang, "--sections", sections, "--out", str(out)]
        with contextlib.redirect_stdout(log):
            assert cli.main(args + (["--teacher"] if teacher else [])) == 0
    else:
        handout.make_handout(
            out, lang=lang, teacher=teacher, sections=sections, progress=lambda line: log.write(line + "\n")
        )
    return Printed(out, log.getvalue())


CASES = {  # (lang, teacher) -> the sections printed: every section in Japanese, a few in English
    ("ja", False): f"1-{LAST}",
    ("ja", True): f"1-{LAST}",
    ("en", False): f"1,3,{LAST}",
    ("en", True): f"1,3,{LAST}",
}


@pytest.fixture(scope="module")
def printed(tmp_path_factory) -> dict[tuple[str, bool], Printed]:
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's Chromium (apt-get install chromium)")
    out = {}
    for (lang, teacher), sections in CASES.items():
        start = time.monotonic()
        out[lang, teacher] = make(tmp_path_factory, lang, teacher, sections, via_cli=(lang, teacher) == ("ja", False))
        assert time.monotonic() - start < 600
    return out


def chosen(lang: str, teacher: bool) -> list[int]:
    return handout.parse_sections(CASES[lang, teacher], list(SECTIONS))


@browser
@needs_chromium
@pytest.mark.parametrize(("lang", "teacher"), list(CASES))
def test_every_section_prints_with_its_title_and_no_empty_page(printed, lang, teacher):
    doc = printed[lang, teacher]
    assert doc.path.stat().st_size > 50_000 and doc.path.read_bytes().startswith(b"%PDF")
    assert [n for n, _ in doc.pages] == sorted(n for n, _ in doc.pages)  # in the lesson's order
    for n in chosen(lang, teacher):
        pages = doc.section(n)
        assert 2 <= len(pages) <= 15, (n, len(pages))
        title = getattr(SECTIONS[n].title, lang)
        assert norm(title) in norm(pages[0]), (n, title, pages[0][:200])
        for k, text in enumerate(pages, 1):
            assert len(norm(text)) >= 40, f"§{n} page {k} is (nearly) empty: {text!r}"
    # One progress line per section, naming it and its pages.
    lines = doc.log.strip().splitlines()
    assert len([line for line in lines if line.startswith("§")]) == len(chosen(lang, teacher)), doc.log


@browser
@needs_chromium
@pytest.mark.parametrize("lang", ["ja", "en"])
def test_the_students_version_has_the_questions_and_no_answers(printed, lang):
    doc = printed[lang, False]
    asked = 0
    for n in chosen(lang, False):
        section = SECTIONS[n]
        # The end-of-section check and the predictions asked at the widgets (predict:): on paper
        # both are questions, every word of them and every choice, with nothing of the answer.
        for q in (*section.check, *section.predict):
            assert norm(getattr(q.question, lang)) in doc.all, (n, getattr(q.question, lang))
            for choice in q.choices:
                assert norm(getattr(choice, lang)) in doc.all, (n, getattr(choice, lang))
            assert norm(getattr(q.explanation, lang))[:40] not in doc.all, (n, "an explanation")
            assert norm(getattr(q.hint, lang))[:40] not in doc.all, (n, "a hint")
            # The answer key's line ("答え: …"), for this question's answer. (Not the bare "答え:",
            # which §9's widgets print as labels: モデルが選んだ答え：「1925」.)
            right = getattr(q.choices[q.answer], lang)
            assert norm(t(lang, "ls_teacher_answer", answer=right)) not in doc.all, (n, "the answer", right)
        asked += len(section.predict)
        notes = plain(getattr(section.teacher.html, lang))
        assert norm(notes)[:60] not in doc.all, (n, "the teacher notes")
    assert asked >= 2  # the sections printed here do ask predictions
    for key in ("ls_teacher_notes", "ls_teacher_answer_mark", "ls_teacher_hint", "ls_teacher_key_intro"):
        assert norm(t(lang, key).split("{")[0]) not in doc.all, key
    # What only a screen can do does not print: the button that commits a prediction, the cover
    # over its widget, and a fold's "click to open" (paper prints the Going-further parts open).
    for key in ("ls_predict_commit", "ls_predict_cover", "ls_predict_pick", "ls_further_skip"):
        assert norm(t(lang, key)) not in doc.all, key


@browser
@needs_chromium
@pytest.mark.parametrize("lang", ["ja", "en"])
def test_the_teachers_version_has_every_answer_and_the_teacher_notes(printed, lang):
    doc = printed[lang, True]
    for n in chosen(lang, True):
        section = SECTIONS[n]
        # Every check question and every prediction: asked in full, its answer marked among the
        # choices and written out, and its explanation in full.
        for q in (*section.check, *section.predict):
            assert norm(getattr(q.question, lang)) in doc.all, (n, getattr(q.question, lang))
            right = getattr(q.choices[q.answer], lang)
            assert norm(right + t(lang, "ls_teacher_answer_mark")) in doc.all, (n, "the answer marked", right)
            answer = t(lang, "ls_teacher_answer", answer=right)
            assert norm(answer) in doc.all, (n, answer)
            assert norm(getattr(q.explanation, lang)) in doc.all, (n, getattr(q.explanation, lang))
        text = norm("".join(doc.section(n)))
        assert norm(t(lang, "ls_teacher_notes")) in text, n
        html = getattr(section.teacher.html, lang)
        assert norm(plain(html))[:60] in text, (n, "the notes' first lines")
        last = re.findall(r"<li>(.*?)</li>", html, re.S)[-1]  # the exercise's answer ends the notes
        assert norm(plain(last)) in text, (n, "the exercise's answer", last)


@browser
@needs_chromium
def test_both_versions_print_the_same_figures(printed):
    """The widgets print in both versions (a figure's labels and numbers are text in the PDF):
    §1's map labels its rows with the translation's tokens, the same in both."""
    from attnlab.loading import load_model
    from attnlab.web.lesson.common import DEFAULT_SENTENCE

    # The largest weight of the row of '▁walk' (the last layer, mean of the heads), as the map prints it.
    translator = load_model("ja-en", family="translate")
    result = translator.translate([DEFAULT_SENTENCE], beam_size=1, return_attention=True)[0]
    walk = result.tgt_tokens.index("▁walk")
    weight = f"{float(result.cross_attention[-1].float().mean(0)[walk].max()):.3f}"
    for version in (False, True):
        page = norm("".join(printed["ja", version].section(1)))
        for token in ("walk", "school", "every", "[EOS]", weight):
            assert token in page, (version, token)


@browser
@needs_chromium
def test_a_page_with_kept_answers_still_prints_blank_for_the_student():
    """The browser's own Print of a page (no ?print=1) that shows an answer kept in this browser:
    the circles stay empty and the explanation does not print."""
    from pypdf import PdfReader

    from attnlab.web.app import create_app

    q = SECTIONS[3].check[0]
    with handout.serving(create_app()) as base, handout.DevTools(str(CHROMIUM)) as devtools:
        target = devtools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = devtools.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        devtools.call("Page.navigate", {"url": f"{base}/lesson/3?lang=en"}, session=session)

        def run(expression: str):
            answer = devtools.call(
                "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=session
            )
            return answer.get("result", {}).get("value")

        deadline = time.monotonic() + 60
        while not run("!!document.querySelector('#q0-submit') && document.fonts.status === 'loaded'"):
            assert time.monotonic() < deadline, "the section did not load"
            time.sleep(0.2)
        shown = run(
            f"document.querySelector('#question-0 [data-choice=\"{q.answer}\"] input').click();"
            "document.querySelector('#q0-submit').click();"
            "document.querySelector('#q0-feedback').textContent"
        )
        assert norm(q.explanation.en)[:40] in norm(shown)  # the screen shows it
        devtools.call("Page.navigate", {"url": f"{base}/lesson/3?lang=en"}, session=session)
        deadline = time.monotonic() + 60
        while not run("(document.querySelector('#question-0') || {dataset: {}}).dataset.restored === '1'"):
            assert time.monotonic() < deadline, "the kept answer was not shown again"
            time.sleep(0.2)
        assert norm(q.explanation.en)[:40] in norm(run("document.querySelector('#q0-feedback').textContent"))
        devtools.call("Target.closeTarget", {"targetId": target})
        pdf, _ = handout.print_page(
            devtools, f"{base}/lesson/3?lang=en", footer=handout.section_footer(3), timeout_s=120
        )
    text = norm("".join(page.extract_text() for page in PdfReader(io.BytesIO(pdf)).pages))
    assert norm(q.question.en)[:50] in text
    assert norm(q.explanation.en)[:40] not in text and norm(t("en", "ls_correct")) not in text
