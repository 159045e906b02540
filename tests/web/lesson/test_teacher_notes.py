"""The teacher notes (``content/{ja,en}/teacher/NN-slug.md``): every section has them in both
languages, with the same sane number of minutes; every misconception links to a widget that is on the
page it names; every class exercise has an answer, one per question; the API serves them; and
:func:`load_sections` refuses broken notes naming the file and line.
"""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from attnlab.web import lesson as L
from attnlab.web.app import create_app

SECTIONS = L.load_sections()
LANGS = ("ja", "en")
PLACEHOLDERS = re.compile(r"FIXME|TODO|TBD|XXX|lorem", re.IGNORECASE)


def notes_file(lang: str, section: L.Section, root: Path = L.CONTENT_DIR) -> Path:
    return root / lang / "teacher" / f"{section.id:02d}-{section.slug}.md"


def widgets_on(n: int) -> set[str]:
    return {b.widget for b in SECTIONS[n].blocks if b.type == "widget"}


class Parts(HTMLParser):
    """The notes' HTML cut at its headings: {heading text: [(tag, attrs, depth) of what follows]},
    plus, per part, its top-level list items with the hrefs of their links and their text."""

    def __init__(self) -> None:
        super().__init__()
        self.order: list[str] = []
        self.items: dict[str, list[dict]] = {}
        self.text: dict[str, str] = {}
        self._heading: str | None = None
        self._in_heading = False
        self._lists = 0
        self._item: dict | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("h3", "h4"):
            self._in_heading, self._heading = True, ""
        elif tag in ("ul", "ol"):
            self._lists += 1
        elif tag == "li" and self._lists == 1 and self.order:
            self._item = {"hrefs": [], "text": ""}
            self.items[self.order[-1]].append(self._item)
        elif tag == "a" and self._item is not None:
            self._item["hrefs"].append(attrs.get("href", ""))

    def handle_endtag(self, tag):
        if tag in ("h3", "h4"):
            self._in_heading = False
            self.order.append(self._heading.strip())
            self.items[self.order[-1]] = []
            self.text[self.order[-1]] = ""
        elif tag in ("ul", "ol"):
            self._lists -= 1
        elif tag == "li" and self._lists == 1:
            self._item = None

    def handle_data(self, data):
        if self._in_heading:
            self._heading += data
        elif self.order:
            self.text[self.order[-1]] += data
            if self._item is not None:
                self._item["text"] += data


def parts(html: str) -> Parts:
    p = Parts()
    p.feed(html)
    return p


# --------------------------------------------------------------------------------------------
# The shipped notes.
# --------------------------------------------------------------------------------------------


def test_every_section_has_notes_in_both_languages():
    # Sections 1..N, the last one the final check (its questions each name an earlier section).
    assert sorted(SECTIONS) == list(range(1, len(SECTIONS) + 1)) and len(SECTIONS) >= 10
    assert all(q.section is not None and q.section < max(SECTIONS) for q in SECTIONS[max(SECTIONS)].check)
    for section in SECTIONS.values():
        for lang in LANGS:
            assert notes_file(lang, section).is_file(), notes_file(lang, section)
        assert section.teacher is not None, section.id
        assert section.teacher.html.ja and section.teacher.html.en


@pytest.mark.parametrize("n", sorted(SECTIONS))
def test_minutes_are_sane_and_the_same_in_both_languages(n):
    section = SECTIONS[n]
    minutes = {
        lang: yaml.safe_load(notes_file(lang, section).read_text("utf-8").split("---\n", 2)[1]) for lang in LANGS
    }
    want = {"minutes": section.teacher.minutes}
    if section.teacher.further_minutes:
        want["further_minutes"] = section.teacher.further_minutes
    assert minutes["ja"] == minutes["en"] == want
    # minutes: the section's basic path, one part of a 90-minute lesson; further_minutes: its 発展 part.
    assert 3 <= section.teacher.minutes <= 30, "a section's basic path is one part of a lesson, not a whole one"
    assert 0 <= section.teacher.further_minutes <= 60


@pytest.mark.parametrize("n", sorted(SECTIONS))
@pytest.mark.parametrize("lang", LANGS)
def test_the_time_plan_adds_up_to_the_minutes(n, lang):
    """The first paragraph splits the section's time ('About 5 minutes to ask, 12 with …'); the split
    adds up to the front matter's minutes."""
    section = SECTIONS[n]
    first = getattr(section.teacher.html, lang).split("</p>", 1)[0]
    sentence = re.split(r"[.。]", first, maxsplit=1)[0]
    pattern = r"(\d+) 分" if lang == "ja" else r"\b(\d+)(?: minutes)? (?:to|with|for)\b"
    numbers = [int(x) for x in re.findall(pattern, sentence)]
    assert len(numbers) >= 3 and sum(numbers) == section.teacher.minutes, (sentence, numbers)


@pytest.mark.parametrize("n", sorted(SECTIONS))
@pytest.mark.parametrize("lang", LANGS)
def test_the_four_parts_are_there_in_order(n, lang):
    p = parts(getattr(SECTIONS[n].teacher.html, lang))
    assert p.order == [text for _, text in L.TEACHER_HEADINGS[lang]]
    for heading in p.order:
        assert p.text[heading].strip(), (n, lang, heading)
    ask = L.TEACHER_HEADINGS[lang][0][1]
    assert len(p.items[ask]) >= 2, "at least two questions to ask before the widgets"
    assert all("?" in item["text"] or "？" in item["text"] or "か。" in item["text"] for item in p.items[ask]), p.items[
        ask
    ]


@pytest.mark.parametrize("n", sorted(SECTIONS))
@pytest.mark.parametrize("lang", LANGS)
def test_every_misconception_names_a_widget_on_the_page_it_links(n, lang):
    p = parts(getattr(SECTIONS[n].teacher.html, lang))
    misconceptions = p.items[L.TEACHER_HEADINGS[lang][1][1]]
    assert len(misconceptions) >= 3, (n, lang)
    named = set()
    for item in misconceptions:
        # The misconception itself, quoted in bold, then what dispels it.
        assert re.match(r"\s*[「'‘“]", item["text"]), item["text"][:60]
        links = [
            re.fullmatch(r"(?:/lesson/(\d+)(?:\?lang=(\w+)[^#]*)?)?#widget-([a-z0-9-]+)", h) for h in item["hrefs"]
        ]
        links = [m for m in links if m]
        assert links, (n, lang, item["text"][:60])
        for m in links:
            page = int(m[1]) if m[1] else n
            assert m[3] in widgets_on(page), (n, lang, page, m[3])
            assert m[2] in (None, lang), "a link to another section keeps the notes' language"
            named.add((page, m[3]))
    if widgets_on(n):
        # The notes of a section with widgets refer to that section's own widgets…
        assert {w for page, w in named if page == n}, (n, lang)
    else:
        # …and the final check's, having none, to the sections its questions draw on.
        assert {page for page, _ in named} <= {q.section for q in SECTIONS[n].check}


@pytest.mark.parametrize("n", sorted(SECTIONS))
def test_both_languages_name_the_same_widgets(n):
    named = {}
    for lang in LANGS:
        html = getattr(SECTIONS[n].teacher.html, lang)
        named[lang] = sorted(re.findall(r'href="(?:/lesson/(\d+)[^"#]*)?#widget-([a-z0-9-]+)"', html))
    assert named["ja"] == named["en"]


@pytest.mark.parametrize("n", sorted(SECTIONS))
@pytest.mark.parametrize("lang", LANGS)
def test_the_exercise_has_an_answer_for_each_of_its_questions(n, lang):
    headings = [text for _, text in L.TEACHER_HEADINGS[lang]]
    p = parts(getattr(SECTIONS[n].teacher.html, lang))
    exercise, answer = p.items[headings[2]], p.items[headings[3]]
    assert len(exercise) >= 2, (n, lang, "an exercise asks a few numbered questions")
    assert len(answer) == len(exercise), (n, lang, len(exercise), len(answer))
    for item in answer:
        assert len(item["text"].strip()) >= 2, item


def test_no_placeholder_text_and_the_glossarys_terms():
    for section in SECTIONS.values():
        for lang in LANGS:
            text = notes_file(lang, section).read_text("utf-8")
            assert not PLACEHOLDERS.search(text), (section.id, lang)
        ja = notes_file("ja", section).read_text("utf-8")
        assert "注目の重み" not in ja and "注意機構" not in ja
        if section.id >= 5:  # 因果マスク is the term (§7 explains it as 先を隠す工夫), not the paraphrase
            assert "先を隠す工夫" not in ja, section.id
        assert "です" in ja and "である。" not in ja  # です・ます throughout


def test_glossary_terms_in_the_notes_link_to_the_glossary_in_their_language():
    linked, glossary = 0, L.load_glossary()  # read once: it parses every entry in both languages
    for section in SECTIONS.values():
        for lang in LANGS:
            for link_lang, term in re.findall(
                r'href="/lesson/glossary\?lang=(\w+)#term-([a-z0-9-]+)"', getattr(section.teacher.html, lang)
            ):
                assert link_lang == lang and term in glossary
                linked += 1
    assert linked > 50


def test_the_data_files_serve_the_notes():
    client = TestClient(create_app(), base_url="http://127.0.0.1:8000")
    for n in (1, max(SECTIONS)):
        body = client.get(f"/static/data/lesson/sections/{n}.json").json()
        assert body["teacher"]["minutes"] == SECTIONS[n].teacher.minutes
        assert set(body["teacher"]["html"]) == {"ja", "en"}
        assert "<h4>" in body["teacher"]["html"]["ja"] and "<script" not in body["teacher"]["html"]["en"]


# --------------------------------------------------------------------------------------------
# Broken notes are refused, naming the file and line.
# --------------------------------------------------------------------------------------------


@pytest.fixture
def content(tmp_path) -> Path:
    shutil.copytree(L.CONTENT_DIR, tmp_path / "content")
    return tmp_path / "content"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text("utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1), "utf-8")


def line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text("utf-8").splitlines(), 1) if needle in line)


def test_notes_in_one_language_only_are_refused(content):
    section = SECTIONS[3]
    notes_file("en", section, content).unlink()
    with pytest.raises(ValueError, match=r"teacher/03-query-key-value\.md:1: teacher notes in one language only"):
        L.load_sections(content)


def test_sections_without_notes_load(content):
    for lang in LANGS:
        notes_file(lang, SECTIONS[4], content).unlink()
    sections = L.load_sections(content)
    assert sections[4].teacher is None and sections[5].teacher is not None


def test_different_minutes_are_refused(content):
    m = SECTIONS[2].teacher.minutes
    edit(notes_file("ja", SECTIONS[2], content), f"\nminutes: {m}\n", f"\nminutes: {m + 5}\n")
    with pytest.raises(ValueError, match=rf"en/teacher/02-seq2seq-bottleneck\.md:1: minutes {m} here, {m + 5} in"):
        L.load_sections(content)


@pytest.mark.parametrize("minutes", ["0", "'twenty'", "600"])
def test_bad_minutes_are_refused(content, minutes):
    m = SECTIONS[2].teacher.minutes
    edit(notes_file("en", SECTIONS[2], content), f"\nminutes: {m}\n", f"\nminutes: {minutes}\n")
    with pytest.raises(ValueError, match=r"en/teacher/02-seq2seq-bottleneck\.md:1: front matter"):
        L.load_sections(content)


def test_a_misconception_without_a_widget_is_refused_at_its_line(content):
    path = notes_file("en", SECTIONS[1], content)
    edit(path, "In [the translation map](#widget-translation) as it opens", "In the translation map as it opens")
    line = line_of(path, "Attention always lands on the word")
    with pytest.raises(ValueError, match=rf"01-what-attention-does\.md:{line}: a misconception links to the widget"):
        L.load_sections(content)


def test_a_widget_that_is_not_on_the_page_is_refused(content):
    path = notes_file("ja", SECTIONS[6], content)
    edit(path, "(#widget-pe-table)", "(#widget-qkv)")
    line = line_of(path, "(#widget-qkv)")
    with pytest.raises(ValueError, match=rf"06-positional-encoding\.md:{line}: section 6's page has no widget 'qkv'"):
        L.load_sections(content)
    edit(path, "(#widget-qkv)", "(/lesson/3?lang=ja#widget-qkv)")
    assert L.load_sections(content)[6].teacher is not None  # on section 3's page it is


def test_a_missing_or_misnamed_part_is_refused(content):
    path = notes_file("en", SECTIONS[7], content)
    edit(path, "### Class exercise", "### Exercise")
    line = line_of(path, "### Exercise")
    with pytest.raises(ValueError, match=rf"07-whole-transformer\.md:{line}: expected the heading ### Class exercise"):
        L.load_sections(content)
    edit(path, "### Exercise", "### Class exercise")
    edit(path, "#### Answer", "Answer:")
    with pytest.raises(ValueError, match=r"07-whole-transformer\.md:\d+: teacher notes have exactly the headings"):
        L.load_sections(content)


def test_notes_for_no_section_and_directives_are_refused(content):
    stray = content / "en" / "teacher" / "10-more.md"
    stray.write_text("---\nminutes: 10\n---\n", "utf-8")
    with pytest.raises(ValueError, match=r"10-more\.md:1: teacher notes are named after their section"):
        L.load_sections(content)
    stray.unlink()
    path = notes_file("ja", SECTIONS[8], content)
    edit(path, "### クラス演習\n", "### クラス演習\n\n::: note\n注意\n:::\n")
    with pytest.raises(
        ValueError, match=rf"08-variants-and-exercises\.md:{line_of(path, '::: note')}: teacher notes take plain"
    ):
        L.load_sections(content)
