"""The lesson's content as a whole: both languages agree, nothing unfinished is shipped, every check
tests understanding (predictions and transfers, real hints, answers not given away by position), the
final check draws on every section, every term is the glossary's, and every interface string the
pages ask for exists in both catalogs.

These read the content files and the served pages; the browser tests (test_lesson_browser.py,
test_lesson_checks_browser.py) check what a learner sees.
"""

from __future__ import annotations

import collections
import json
import re
import shutil
import types
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from attnlab.web import i18n
from attnlab.web import lesson as L
from attnlab.web.app import create_app

STATIC = Path(L.LESSON_DIR).parent  # attnlab/web/static
SECTIONS = L.load_sections()
GLOSSARY = L.load_glossary()
FINAL = max(SECTIONS)
LANGS = ("ja", "en")


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), base_url="http://127.0.0.1:8000")


def content_copy(tmp_path: Path) -> Path:
    """The shipped content (both languages and the glossary) copied to ``tmp_path``, to be broken there."""
    shutil.copytree(L.CONTENT_DIR, tmp_path / "content")
    return tmp_path / "content"


def replace_in(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def front_matter(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8").split("---\n", 2)[1])


def texts_of(section: L.Section, lang: str) -> list[str]:
    """Every text of a section a learner reads in ``lang``: front matter, body, checks, strings."""
    pick = lambda t: getattr(t, lang)  # noqa: E731
    out = [pick(section.title), pick(section.summary), pick(section.source)]
    out += [pick(t) for t in section.objectives + section.key_points]
    out += [pick(b.html) for b in section.blocks if b.html is not None]
    out += [pick(b.code) for b in section.blocks if b.code is not None and b.source is None]
    out += [pick(t.text) for t in section.try_]
    for q in section.check:
        out += [pick(q.question), pick(q.hint), pick(q.explanation), *(pick(c) for c in q.choices)]
    out += [pick(link.label) for link in section.links]
    out += [pick(s) for s in section.strings.values()]
    return out


# --------------------------------------------------------------------------------------------
# Both languages: the same sections, widgets and checks.
# --------------------------------------------------------------------------------------------


def test_both_languages_have_the_same_sections_widgets_and_checks():
    names = {lang: sorted(p.name for p in (L.CONTENT_DIR / lang).glob("*.md")) for lang in LANGS}
    assert names["ja"] == names["en"] and len(names["ja"]) == len(SECTIONS)
    assert list(SECTIONS) == list(range(1, len(SECTIONS) + 1))
    for name in names["ja"]:
        ja, en = (front_matter(L.CONTENT_DIR / lang / name) for lang in LANGS)
        for key in ("objectives", "key_points", "try", "check", "links"):
            assert len(ja.get(key) or []) == len(en.get(key) or []), (name, key)
        for a, b in zip(ja["check"], en["check"], strict=True):
            assert (a["kind"], a["answer"], len(a["choices"]), a.get("section")) == (
                b["kind"],
                b["answer"],
                len(b["choices"]),
                b.get("section"),
            ), name
        assert sorted(ja.get("strings") or {}) == sorted(en.get("strings") or {}), name
        widgets = {
            lang: re.findall(r"^::: *widget +([\w-]+)", (L.CONTENT_DIR / lang / name).read_text(encoding="utf-8"), re.M)
            for lang in LANGS
        }
        assert widgets["ja"] == widgets["en"], name


@pytest.mark.parametrize(
    "lang, old, new, message",
    [
        ("en", "  answer: 1\n", "  answer: 0\n", r"question 3's answer: 1 vs 0"),
        ("en", "  kind: predict\n", "  kind: recall\n", r"question 11's kind: 'predict' vs 'recall'"),
        ("ja", "  - 0.50、0.33、0.17\n", "", r"question 3's number of choices: 3 vs 4"),
        ("en", "- section: 2\n", "- section: 3\n", r"question 2's section: 2 vs 3"),
        ("en", "    temp: '0.5'\n", "    temp: '0.7'\n", r"question 11's params"),
        ("ja", "- href: /model\n", "- href: /masks\n", r"link 1's address"),
        ("en", "- Apply the ideas", "- One more objective.\n- Apply the ideas", r"the number of objectives: 3 vs 4"),
        ("ja", "\nlinks:\n", "\nstrings:\n  extra: 追加\nlinks:\n", r"their widget strings: \['extra'\] vs \[\]"),
        ("ja", "\nこの節には", "\n::: note\n注意\n:::\n\nこの節には", r"differ in their blocks"),
    ],
)
def test_a_pair_that_differs_is_refused_naming_the_file(tmp_path, lang, old, new, message):
    content = content_copy(tmp_path)
    name = f"{FINAL:02d}-{SECTIONS[FINAL].slug}"
    replace_in(content / lang / f"{name}.md", old, new)
    with pytest.raises(ValueError) as err:
        L.load_sections(content)
    assert f"section {name}" in str(err.value) or f"{name}.md" in str(err.value)
    assert re.search(message, str(err.value)), str(err.value)


def test_a_missing_language_file_or_glossary_term_is_refused(tmp_path):
    content = content_copy(tmp_path / "a")
    (content / "en" / "01-what-attention-does.md").unlink()
    with pytest.raises(ValueError, match=r"01-what-attention-does\.md has no en file"):
        L.load_sections(content)
    content = content_copy(tmp_path / "c")
    replace_in(content / "en" / "glossary.yaml", "- id: softmax\n", "- id: soft-max\n")
    with pytest.raises(ValueError, match=r"the ja and en glossaries differ in their terms"):
        L.load_sections(content)


def test_the_final_check_must_name_earlier_sections(tmp_path):
    name = f"{FINAL:02d}-{SECTIONS[FINAL].slug}.md"
    content = content_copy(tmp_path / "a")
    for lang in LANGS:
        replace_in(content / lang / name, "- section: 2\n", f"- section: {FINAL}\n")
    with pytest.raises(
        ValueError, match=rf"{name}: question 2 draws on section {FINAL}, which is not a section before it"
    ):
        L.load_sections(content)
    content = content_copy(tmp_path / "b")
    for lang in LANGS:
        replace_in(content / lang / name, "- section: 2\n  kind", "- kind")
    with pytest.raises(ValueError, match=rf"{name}: question 2 says no 'section:'"):
        L.load_sections(content)


# --------------------------------------------------------------------------------------------
# Nothing unfinished is shipped.
# --------------------------------------------------------------------------------------------

PLACEHOLDERS = re.compile(
    r"できしだい|準備中|予定|近日|後日|未定|ここに.{0,10}(入り|書き)ます|"
    r"\bTODO\b|\bFIXME\b|\bXXX\b|\bTBD\b|coming soon|lorem ipsum|to be written|not yet available|"
    r"once .{0,40} (is|are) (available|shipped|ready)",
    re.IGNORECASE,
)


def without_params(node):
    """A section's data without the widgets' inputs (``params``): an example sentence typed into a
    widget (「…食べる予定です。」) is data, not a statement of the page."""
    if isinstance(node, dict):
        return {k: without_params(v) for k, v in node.items() if k != "params"}
    if isinstance(node, list):
        return [without_params(v) for v in node]
    return node


def test_no_content_file_contains_placeholder_text():
    files = sorted(p for p in L.CONTENT_DIR.glob("*/*") if p.is_file())  # teacher/: test_teacher_notes.py
    assert len(files) == 2 * (len(SECTIONS) + 1)
    for path in files:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".md":  # the front matter without the widgets' inputs, then the body
            front = yaml.safe_load(text.split("---\n", 2)[1])
            text = yaml.safe_dump(without_params(front), allow_unicode=True, width=10_000) + text.split("---\n", 2)[2]
        for line in text.splitlines():
            assert not PLACEHOLDERS.search(line), f"{path}: {line.strip()[:120]}"
    for lang in i18n.LANGS:
        for key, text in i18n.catalog(lang).items():
            assert not PLACEHOLDERS.search(text), (lang, key, text)


def test_no_served_page_contains_placeholder_text(client):
    data = "/static/data/lesson/"  # the lesson's content as the pages read it
    served = {f"{data}sections.json": client.get(f"{data}sections.json").text}
    served[f"{data}glossary.json"] = client.get(f"{data}glossary.json").text
    served[f"{data}plan.json"] = client.get(f"{data}plan.json").text
    served["/static/i18n.js"] = client.get("/static/i18n.js").text
    for path in ["/", "/lesson/glossary", *(f"/lesson/{n}" for n in SECTIONS)]:
        for lang in LANGS:
            served[f"{path}?lang={lang}"] = client.get(path, params={"lang": lang}).text
    for n in SECTIONS:
        served[f"{data}sections/{n}.json"] = client.get(f"{data}sections/{n}.json").text
    for script in sorted((STATIC / "lesson").rglob("*.js")) + sorted((STATIC / "lesson").glob("*.html")):
        url = "/static/" + script.relative_to(STATIC).as_posix()
        served[url] = client.get(url).text
    for url, text in served.items():
        assert text, url
        if url.startswith(data):
            text = json.dumps(without_params(json.loads(text)), ensure_ascii=False)
        match = PLACEHOLDERS.search(text)
        assert not match, (url, text[max(0, match.start() - 80) : match.end() + 80])


# --------------------------------------------------------------------------------------------
# The checks test understanding.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", list(SECTIONS))
def test_at_least_half_of_each_sections_questions_are_predictions_or_transfers(n):
    kinds = collections.Counter(q.kind for q in SECTIONS[n].check)
    assert 2 * (kinds["predict"] + kinds["transfer"]) >= sum(kinds.values()), (n, dict(kinds))
    if n != FINAL:
        assert 3 <= len(SECTIONS[n].check) <= 5, n


@pytest.mark.parametrize("n", list(SECTIONS))
def test_every_question_has_a_hint_that_does_not_give_the_answer_away(n):
    for i, q in enumerate(SECTIONS[n].check, 1):
        for lang in LANGS:
            hint, explanation = getattr(q.hint, lang), getattr(q.explanation, lang)
            right = getattr(q.choices[q.answer], lang).strip("。. ")
            assert len(hint) >= 15 and hint != explanation, (n, i, lang, hint)
            if len(right) >= 6:  # a short choice ("2 倍") may appear in a hint by chance
                assert right not in hint, (n, i, lang, "the hint names the right choice")
            assert len(explanation) >= 30, (n, i, lang)
            others = [getattr(c, lang) for c in q.choices]
            assert len(set(others)) == len(others), (n, i, lang, "two choices are the same")


def test_the_stored_answer_positions_are_not_concentrated():
    """The page shuffles the choices; the files should not lean on one position either, and the
    right choice should not give itself away by being the longest."""
    answers = [(n, q) for n in SECTIONS for q in SECTIONS[n].check]
    positions = collections.Counter(q.answer for _, q in answers)
    assert len(positions) >= 3, positions
    assert max(positions.values()) <= 0.45 * len(answers), positions
    for n in SECTIONS:
        stored = [q.answer for q in SECTIONS[n].check]
        assert len(stored) < 3 or len(set(stored)) >= 2, (n, stored)
    for lang in LANGS:
        longest = sum(
            1
            for _, q in answers
            if len(getattr(q.choices[q.answer], lang))
            > max(len(getattr(c, lang)) for j, c in enumerate(q.choices) if j != q.answer)
        )
        assert longest <= 0.5 * len(answers), (lang, longest, len(answers))


def test_the_final_check_draws_on_every_section():
    final = SECTIONS[FINAL]
    assert FINAL == 10 and final.slug == "final-check"
    assert (final.title.ja, final.title.en) == ("まとめの確認", "Final check")
    assert 10 <= len(final.check) <= 14
    drawn = collections.Counter(q.section for q in final.check)
    assert set(drawn) == set(range(1, FINAL)), drawn
    assert not [b for b in final.blocks if b.type == "widget"]
    for n in range(1, FINAL):
        assert all(q.section is None for q in SECTIONS[n].check), n
    for q in final.check:
        for key, value in q.params.items():  # "now try it" opens the section the question draws on
            assert re.fullmatch(r"[\w.,-]+", key) and value, (q.section, q.params)


# --------------------------------------------------------------------------------------------
# Terms: one per concept, each in the glossary and used where the glossary says.
# --------------------------------------------------------------------------------------------


def test_every_glossary_term_is_used_and_introduced_where_the_glossary_says():
    uses = L.term_uses(SECTIONS, GLOSSARY)
    for term, entry in GLOSSARY.items():
        assert uses.get(term), f"glossary term {term!r} is never used in the lesson's text"
        assert entry.section in uses[term], (
            f"glossary term {term!r} is introduced in section {entry.section}: {uses[term]}"
        )
        for lang in LANGS:
            assert getattr(entry.term, lang) and len(getattr(entry.definition, lang)) > 20, (term, lang)


def test_term_links_point_at_glossary_entries_in_the_pages_language():
    for n, section in SECTIONS.items():
        for block in section.blocks:
            if block.html is None:
                continue
            for lang in LANGS:
                html = getattr(block.html, lang)
                for link_lang, term in re.findall(r'href="/lesson/glossary\?lang=(\w+)#term-([a-z0-9-]+)"', html):
                    assert link_lang == lang and term in GLOSSARY, (n, lang, term)
                assert not re.search(r"<h\d[^>]*>[^<]*<a [^>]*class=\"term\"", html), (n, lang, "a heading is linked")


def test_one_term_per_concept():
    """The terms the issues settled on: 注意の重み (never 注目の重み), 注意機構 introduced once in §1;
    重み行列, never a bare 「重み」, for W_q etc.; 因果マスク the term for the causal mask, introduced
    with 先を隠す工夫 as its explanation (issue 34): its first use on the pages comes with 先を隠す工夫
    in the same paragraph, and the glossary's entry explains it so."""
    # A section's "source" quotes the seed text's own chapter title (「注意機構の変種と拡張」): not ours.
    ja = {n: "\n".join(texts_of(s, "ja")).replace(s.source.ja, "") for n, s in SECTIONS.items()}
    catalog = "\n".join(i18n.catalog("ja").values())
    everything = "\n".join(ja.values()) + catalog
    assert "注目の重み" not in everything
    assert 1 <= ja[1].count("注意機構") <= 2 and not [n for n in ja if n != 1 and "注意機構" in ja[n]]
    assert not re.search(r"(?<!注意の)重み ?W_[qkvo]", everything)
    causal = GLOSSARY["causal-mask"]
    assert causal.term.ja == "因果マスク" and "先を隠す工夫" in causal.definition.ja
    paragraphs = [
        p
        for n in sorted(SECTIONS)
        for b in SECTIONS[n].blocks
        if b.html is not None
        for p in re.split(r"</p>|</li>", b.html.ja)
        if "因果マスク" in p
    ]
    assert paragraphs, "因果マスク is never used on the pages"
    assert "先を隠す工夫" in paragraphs[0], paragraphs[0]
    # The paraphrase never stands alone as the term: wherever a page (or the glossary) says 先を隠す工夫,
    # the same paragraph says 因果マスク (the explanation beside its term).
    alone = [
        (n, p)
        for n in sorted(SECTIONS)
        for p in re.split(r"</p>|</li>|</td>|\n", ja[n])
        if "先を隠す工夫" in p and "因果マスク" not in p
    ]
    alone += [
        (key, e.definition.ja)
        for key, e in GLOSSARY.items()
        if "先を隠す工夫" in e.definition.ja and key != "causal-mask"
    ]
    assert not alone, alone


def test_aliases_are_the_glossarys_and_the_pages_use_the_term():
    """The seed's words (スキップ結合, レイヤー正規化, 注目の重み, 交差注意, Self-Attention) are aliases of our
    terms in the glossary (shown as "also called" and linked); a page may name an alias only beside
    its term, in the same paragraph (「残差接続（スキップ結合とも呼びます）」)."""
    want = {
        "residual": "スキップ結合",
        "layer-norm": "レイヤー正規化",
        "attention-weight": "注目の重み",
        "source-target-attention": "交差注意",
        "self-attention": "Self-Attention",
    }
    for term, alias in want.items():
        assert alias in GLOSSARY[term].aliases["ja"] and alias in GLOSSARY[term].forms["ja"], term
    for entry in GLOSSARY.values():
        for lang in LANGS:
            for alias in entry.aliases.get(lang, []):
                for n, section in SECTIONS.items():
                    for b in section.blocks:
                        if b.html is None:
                            continue
                        for p in re.split(r"</p>|</li>|</td>", getattr(b.html, lang)):
                            text = re.sub(r"<[^>]+>", "", p)
                            if (
                                re.search(re.escape(alias), text, re.IGNORECASE)
                                and alias.lower() != getattr(entry.term, lang).lower()
                            ):
                                assert getattr(entry.term, lang).lower() in text.lower(), (n, lang, alias, text)


# --------------------------------------------------------------------------------------------
# Interface strings: both catalogs, every key the pages use.
# --------------------------------------------------------------------------------------------


def test_both_catalogs_have_the_same_keys_and_placeholders():
    en, ja = i18n.catalog("en"), i18n.catalog("ja")
    assert set(en) == set(ja), set(en) ^ set(ja)
    for key in en:
        assert en[key].strip() and ja[key].strip(), key
        assert set(re.findall(r"\{(\w+)\}", en[key])) == set(re.findall(r"\{(\w+)\}", ja[key])), key


def _used_ui_keys() -> dict[str, set[str]]:
    """Every catalog key the explorer's pages and scripts ask for, by file ("kind_" for "kind_" + x)."""
    used: dict[str, set[str]] = {}
    for path in sorted(STATIC.rglob("*.js")) + sorted(STATIC.rglob("*.html")):
        source = path.read_text(encoding="utf-8")
        keys: set[str] = set()
        for arg in re.findall(r"\bt\(([^,()]*(?:\([^()]*\)[^,()]*)*)[,)]", source):  # t(KEY…) or t(cond ? "a" : "b")
            keys.update(re.findall(r'"([\w-]+)"', arg))
        for arg in re.findall(r'\bui\("[\w-]+",\s*\{[^{}]*\},\s*([^,()]*)[,)]', source):
            keys.update(re.findall(r'"([\w-]+)"', arg))
        keys.update(re.findall(r'data-i18n="([\w-]+)"', source))
        keys.update(re.findall(r'"data-i18n":\s*"([\w-]+)"', source))
        keys.update(re.findall(r'data-title="([\w-]+)"', source))
        for attrs in re.findall(r'data-i18n-attr"?[=:]\s*"([^"]+)"', source):
            keys.update(pair.split(":", 1)[1] for pair in attrs.split(";"))
        keys.update(re.findall(r'\["/[\w/]*",\s*"[\w-]+",\s*"([\w-]+)"\]', source))  # the header's links
        if keys:
            used[str(path.relative_to(STATIC))] = keys
    return used


def test_every_interface_string_the_pages_use_exists_in_both_catalogs():
    used = _used_ui_keys()
    for name in ("common.js", "lesson/lesson.js", "lesson/index.html", "lesson/glossary.html", "playground.html"):
        assert used.get(name), f"no catalog key found in {name}: the scan is broken"
    assert {"ls_try_again", "ls_from_section", "ls_tally", "ls_kind_", "nav_lesson", "ls_glossary"} <= set().union(
        *used.values()
    )
    for lang in i18n.LANGS:
        catalog = i18n.catalog(lang)
        for name, keys in used.items():
            for key in keys:
                if key.endswith("_"):  # a prefix: "ls_kind_" + q.kind
                    assert any(k.startswith(key) for k in catalog), (lang, name, key)
                else:
                    assert key in catalog, (lang, name, key)
        for kind in ("predict", "transfer", "recall"):
            assert f"ls_kind_{kind}" in catalog, (lang, kind)


# --------------------------------------------------------------------------------------------
# Widget strings: every ctx.s("key") a widget reads is in the sections that use the widget.
# --------------------------------------------------------------------------------------------


def _widget_keys() -> dict[str, set[str]]:
    registered = {}
    for path in (L.LESSON_DIR / "widgets").glob("*.js"):
        source = path.read_text(encoding="utf-8")
        names = re.findall(r'register\("([\w-]+)"', source)
        keys = set(re.findall(r'\bs\("([\w-]+)"', source))  # s("key"); s("prefix_" + x) gives "prefix_"
        for name in names:
            registered[name] = keys
    return registered


def test_every_widget_string_is_in_the_sections_that_use_the_widget():
    users: dict[str, list[int]] = {}
    for section in SECTIONS.values():
        for block in section.blocks:
            if block.type == "widget":
                users.setdefault(block.widget, []).append(section.id)
    assert set(users) == set(L.WIDGETS), set(users) ^ set(L.WIDGETS)
    registered = _widget_keys()
    assert set(registered) == set(L.WIDGETS), set(registered) ^ set(L.WIDGETS)
    for widget, ids in users.items():
        for n in ids:
            strings = SECTIONS[n].strings
            missing = {k for k in registered[widget] if k not in strings and not k.endswith("_")}
            assert not missing, (widget, n, missing)
            prefixes = {k for k in registered[widget] if k.endswith("_")}
            assert all(any(key.startswith(p) for key in strings) for p in prefixes), (widget, n, prefixes)


def _widget_literals() -> dict[str, tuple[set[str], set[str]]]:
    """Per widget: every string literal in its script (keys listed in arrays count) and every prefix
    it reads keys by (``s("part_" + x)``, ``s(`part_${x}`)``)."""
    found = {}
    for path in (L.LESSON_DIR / "widgets").glob("*.js"):
        source = path.read_text(encoding="utf-8")
        literals = set(re.findall(r"[\"'`]([\w-]+)[\"'`]", source))
        prefixes = set(re.findall(r"\bs\(\s*[\"'`]([\w-]+?)(?:[\"'`]\s*\+|\$\{)", source))
        for name in re.findall(r'register\("([\w-]+)"', source):
            found[name] = (literals, prefixes)
    return found


def _module_literals(n: int) -> tuple[set[str], set[str]]:
    """Section ``n``'s Python module (``attnlab/web/lesson/sNN_*.py``, for what the server draws in
    the page's language, e.g. a figure's title): its string literals and its f-string prefixes
    (``f"fig_title_{variant}"`` gives ``fig_title_``)."""
    modules = list(Path(L.__file__).parent.glob(f"s{n:02d}_*.py"))
    source = "".join(m.read_text(encoding="utf-8") for m in modules)
    return set(re.findall(r"[\"']([\w-]+)[\"']", source)), set(re.findall(r"\bf[\"']([\w-]+?)\{", source))


def test_every_section_string_is_read_by_one_of_its_widgets():
    found = _widget_literals()
    for n, section in SECTIONS.items():
        widgets = [b.widget for b in section.blocks if b.type == "widget"]
        module = _module_literals(n)
        literals = set().union(module[0], *(found[w][0] for w in widgets))
        prefixes = set().union(module[1], *(found[w][1] for w in widgets))
        unused = {k for k in section.strings if k not in literals and not any(k.startswith(p) for p in prefixes)}
        assert not unused, f"section {n}: strings neither its widgets nor its module read: {sorted(unused)}"


def _fills(template: str, title: str, values: dict) -> bool:
    """Whether ``title`` is ``template``'s text with each ``{name}`` replaced by ``values[name]``
    (matched piece by piece, not by formatting the template again)."""
    parts = re.split(r"\{(\w+)\}", template)  # text, name, text, name, …, text
    assert len(parts) > 1 or "{" not in template, template
    pattern = "".join(re.escape(p if i % 2 == 0 else str(values[p])) for i, p in enumerate(parts))
    return re.fullmatch(pattern, title, re.S) is not None


def test_the_heatmap_titles_come_from_the_sections_strings(monkeypatch):
    """§8's downloaded heatmap is titled from the section's ``strings:`` (``fig_title_*``), in each
    language, with the settings and the window's side (``fig_side_*``) filled in; no title is held
    in Python: titles follow the strings when they change."""
    strings = SECTIONS[8].strings
    assert {f"fig_title_{v}" for v in L.VARIANTS} | {"fig_side_both", "fig_side_back"} <= set(strings)
    for lang in LANGS:
        for causal, side in ((False, "fig_side_both"), (True, "fig_side_back")):
            # distinct numbers: a setting written in another's place would show
            p = L.VariantParams(reach=3, block=5, dilation=2, n_global=1, causal=causal)
            values = {**p.model_dump(), "side": getattr(strings[side], lang)}
            for v in L.VARIANTS:
                title = L.variant_title(lang, v, p)
                assert _fills(getattr(strings[f"fig_title_{v}"], lang), title, values), (lang, v, title)
                assert "{" not in title and "}" not in title, title
            assert getattr(strings[side], lang) in L.variant_title(lang, "sliding_window", p)
    # Other strings, other titles: nothing of a title is written in Python.
    marked = {k: types.SimpleNamespace(ja=f"«{v.ja}»", en=f"«{v.en}»") for k, v in strings.items()}
    sections = collections.defaultdict(lambda: types.SimpleNamespace(strings=marked))
    monkeypatch.setattr(L.s08_variants_and_exercises, "default_sections", lambda: sections)
    for lang in LANGS:
        p = L.VariantParams(reach=3, block=5, dilation=2, n_global=1, causal=True)
        for v in L.VARIANTS:
            title = L.variant_title(lang, v, p)
            assert title.startswith("«") and title.endswith("»"), title
        assert f"«{getattr(strings['fig_side_back'], lang)}»" in L.variant_title(lang, "dilated", p)


def test_the_documented_section_file_loads(tmp_path):
    """docs/explorer.md's example of a section file is one the loader takes, block for block."""
    docs = (Path(__file__).resolve().parents[3] / "docs" / "explorer.md").read_text(encoding="utf-8")
    example = re.search(r"^````markdown\n(.*?)^````$", docs, re.S | re.M).group(1)
    for lang in LANGS:
        (tmp_path / lang).mkdir()
        (tmp_path / lang / "01-example.md").write_text(example, encoding="utf-8")
        (tmp_path / lang / "glossary.yaml").write_text("[]\n", encoding="utf-8")
    section = L.load_sections(tmp_path)[1]
    assert [b.type for b in section.blocks] == ["html", "widget", "note", "memo", "code", "code"]
    assert section.blocks[4].source == "attnlab.explain:compute_steps" and section.blocks[5].language == "bash"
    q = section.check[0]
    assert (q.kind, q.answer, len(q.choices), q.params) == ("predict", 1, 4, {"mode": "random", "dk": "256"})
    assert section.try_[0].params == {"mode": "books", "scale": "0"} and "dk_label" in section.strings


def test_term_links_skip_headings_names_and_other_words(tmp_path):
    """The linker: the first use per paragraph, whatever its case; not in headings, code, a name
    joined by "-" or "_", or a glossary entry's ``not_in`` phrase (the form meaning another word)."""
    docs = (Path(__file__).resolve().parents[3] / "docs" / "explorer.md").read_text(encoding="utf-8")
    front = re.search(r"^````markdown\n(---\n.*?\n---\n)", docs, re.S | re.M).group(1)
    body = (
        "## Values\n\n"
        "Values are mixed; the values again. Positive values are red. See `values` and rnn_seq2seq.py.\n\n"
        "The RNN-attention model and the RNN.\n"
    )
    entries = {
        "ja": "- {id: value, term: バリュー, section: 1, definition: 中身}\n- {id: rnn, term: RNN, section: 1, definition: 再帰}\n",
        "en": "- {id: value, term: value, forms: [values], not_in: [positive values], section: 1, definition: content}\n"
        "- {id: rnn, term: RNN, section: 1, definition: recurrent}\n",
    }
    for lang in LANGS:
        (tmp_path / lang).mkdir()
        (tmp_path / lang / "01-example.md").write_text(front + "\n" + body, encoding="utf-8")
        (tmp_path / lang / "glossary.yaml").write_text(entries[lang], encoding="utf-8")
    html = L.load_sections(tmp_path)[1].blocks[0].html.en
    heading, para, names = html.split("\n", 2)[0], html.split("<p>")[1], html.split("<p>")[2]
    assert "term" not in heading
    link = '<a href="/lesson/glossary?lang=en#term-value" class="term" data-term="value">'
    assert para.startswith(link + "Values</a> are mixed; the values again. Positive values are red.")
    assert para.count('class="term"') == 1 and "<code>values</code>" in para and "rnn_seq2seq.py" in para
    assert names.count('data-term="rnn"') == 1 and "RNN-attention model and the <a " in names
