"""The lesson's content: one Markdown file per section per language, merged into one bilingual section.

A section lives in ``content/ja/NN-slug.md`` and ``content/en/NN-slug.md``. Each file starts with
YAML front matter (title, summary, the seed section it follows, learning objectives, key points,
"try this" prompts, the check's questions and the widgets' labels) and goes on in Markdown. The
body may hold directives, as ``:::`` containers (markdown-it's container syntax):

- ``::: widget NAME`` … ``:::``          a live widget (``lesson.js`` mounts it)
- ``::: note`` … ``:::``                 a remark set apart from the text
- ``::: memo`` … ``:::``                 a technical note, folded (技術メモ: endpoints, functions)
- ``::: code attnlab.module:qualname`` … ``:::``  that object's source, read from attnlab itself,
  with the Markdown inside as its caption (the page folds it and says it is attnlab's source as
  written, its comments English); ``::: code`` with a fenced block inside shows that code
- ``:::: further`` … ``::::``            a 発展 / "Going further" region (FOUR colons): everything inside,
  text and three-colon directives alike, is marked ``further: true``; the page folds each region
  (「発展」) so that a learner on the 基礎 (basic) path can skip it. Regions do not nest, and
  everything outside them is the basic path.

The front matter may hold ``predict:``, predictions asked at a widget before it is shown: a list of
``{widget, question, choices, answer, hint, explanation, params?}`` (a check question's fields
without ``kind``). The page asks each one directly above the first block of its widget and keeps
the widget covered until the learner has chosen. At most one prediction per widget, and the widget
must be on the basic path (not inside ``:::: further``). A "try" item that uses a folded widget or
idea says ``further: true``: the page lists it in a 発展 fold of its own inside the try box, and the
projector's slides (the basic path) leave it out.

Both languages must have the same sections, the same directives in the same order, the same
"try" parameters and the same questions (kind, number of choices, answer): :func:`load_sections`
refuses a pair that differs, naming the file. A question may say which section it draws on
(``section: N``): the final check's questions all do, each naming a section before its own page.
Glossary terms (``content/LANG/glossary.yaml``) are
linked to the glossary page wherever they appear in running text: the term, its other ``forms`` and
its ``aliases`` (the names other texts use for the same idea, e.g. the seed's スキップ結合 for 残差接続;
the glossary page shows them as "also called …", and the lesson's own text uses the term).

A section may have teacher notes, ``content/ja/teacher/NN-slug.md`` and ``content/en/teacher/NN-slug.md``
(both or neither): front matter ``minutes: N`` (the time the section's basic path takes in class, the
same in both languages; all sections together make the first session's plan, about 90 minutes) and, optionally,
``further_minutes: N`` (the time its 発展 part takes, in the second session's plan; 0 when absent), then Markdown in four parts under fixed headings (:data:`TEACHER_HEADINGS`): what to ask
the class before touching a widget, the misconceptions students show (each item links to the widget
that dispels it, ``#widget-NAME`` on the section's own page or ``/lesson/N#widget-NAME`` on another),
one class exercise and its answer. :func:`load_sections` refuses notes that break this, naming the
file and line.

Markdown is parsed by markdown-it-py with raw HTML disabled, so a content file cannot inject
markup; the HTML it produces is what the page shows.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import textwrap
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.container import container_plugin
from mdit_py_plugins.front_matter import front_matter_plugin
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

__all__ = [
    "CONTENT_DIR",
    "LANGS",
    "WIDGETS",
    "Text",
    "Block",
    "TryItem",
    "Question",
    "Prediction",
    "Link",
    "Section",
    "SectionSummary",
    "TeacherNotes",
    "TEACHER_HEADINGS",
    "GlossaryEntry",
    "PlanRow",
    "LessonPlan",
    "lesson_plan",
    "load_sections",
    "load_glossary",
    "term_uses",
    "default_sections",
    "default_glossary",
]

CONTENT_DIR = Path(str(resources.files("attnlab.web.lesson") / "content"))
LANGS = ("ja", "en")
DIRECTIVES = ("widget", "note", "memo", "code")
FURTHER = "further"  # the 発展 region's container: ``:::: further`` … ``::::``

#: The widgets ``lesson.js`` knows (a section naming another one is refused when loading).
WIDGETS = frozenset(
    {
        "translation",
        "parallel-steps",
        "bottleneck",
        "bleu-by-length",
        "qkv",
        "additive-vs-dot",
        "self-vs-cross",
        "pronoun",
        "multihead-steps",
        "no-transpose",
        "head-view",
        "pe-table",
        "word-order",
        "rope-scores",
        "transformer-diagram",
        "next-token",
        "token-walk",
        "variants",
        "attention-map",
        "pooling",
        # §9 (widgets/apps.js)
        "families",
        "apps-mlm",
        "apps-qa",
        "apps-gpt",
        "apps-summary",
        "apps-vit",
        "apps-gat",
    }
)


# --------------------------------------------------------------------------------------------
# The bilingual section the API serves.
# --------------------------------------------------------------------------------------------


class Text(BaseModel):
    """A text in both languages."""

    model_config = ConfigDict(extra="forbid")

    ja: str = Field(min_length=1)
    en: str = Field(min_length=1)


class Block(BaseModel):
    """One piece of a section, in page order.

    ``html``: running text (Markdown rendered to HTML, glossary terms linked); ``widget``: a live
    widget; ``note``: a remark set apart; ``memo``: a folded technical note; ``code``: code (from
    attnlab's own source when ``source`` is set, with ``where`` it lives) and its caption.
    """

    model_config = ConfigDict(extra="forbid")

    type: Literal["html", "widget", "note", "memo", "code"]
    html: Text | None = None  # html, note, memo: the text; code: the caption (optional)
    widget: str | None = None
    code: Text | None = None  # literal code may differ by language (its comments)
    language: str = ""  # the code's language, for the reader ("python", "bash")
    source: str | None = None  # "attnlab.module:qualname"
    where: str | None = None  # filled in: "attnlab/positional.py, lines 98–124"
    file: str | None = None  # filled in with source: "attnlab/positional.py"
    lines: tuple[int, int] | None = None  # filled in with source: its first and last line, (98, 124)
    further: bool = False  # inside a ``:::: further`` region (発展): folded, off the basic path


class TryItem(BaseModel):
    """A 「やってみよう」 prompt; ``params`` (optional) is the widget state its link sets;
    ``further``: it uses a widget or an idea of a ``:::: further`` region, so the page lists it in
    the try box's own 発展 fold, off the basic path."""

    model_config = ConfigDict(extra="forbid")

    text: Text
    params: dict[str, str] = Field(default_factory=dict)
    further: bool = False  # a 発展 item: folded like the region it belongs to, left off the slides


class Question(BaseModel):
    """One 理解の確認 question.

    ``kind`` says what it tests: ``predict`` (what will happen if…, then try it), ``transfer``
    (the idea applied to a new case: other T and H, a mask removed, d_k changed) or ``recall``.
    Choices are stored in any order; the page shuffles them on every load.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["predict", "transfer", "recall"]
    question: Text
    choices: list[Text] = Field(min_length=2, max_length=5)
    answer: int = Field(ge=0)  # index into choices as stored
    hint: Text  # shown after a first wrong answer, before the second try
    explanation: Text  # shown once answered right, or after the second try
    params: dict[str, str] = Field(default_factory=dict)  # a predict question's "now try it" link
    section: int | None = None  # the final check: the section a question draws on

    @model_validator(mode="after")
    def _answer_is_a_choice(self) -> Question:
        if self.answer >= len(self.choices):
            raise ValueError(f"answer {self.answer} is not one of the {len(self.choices)} choices")
        return self


class Prediction(BaseModel):
    """A prediction asked at a widget (front matter ``predict:``): the page shows it directly above
    the widget's first block and keeps the widget covered until a choice is committed; then the
    widget is revealed and the explanation shown, right or wrong. ``params``: the widget state the
    question is about (set when the widget is revealed, like a try link)."""

    model_config = ConfigDict(extra="forbid")

    widget: str
    question: Text
    choices: list[Text] = Field(min_length=2, max_length=5)
    answer: int = Field(ge=0)  # index into choices as stored (the page shuffles them)
    hint: Text
    explanation: Text
    params: dict[str, str] = Field(default_factory=dict)


class Link(BaseModel):
    model_config = ConfigDict(extra="forbid")

    href: str = Field(pattern=r"^/[\w/.?=&%#-]*$")  # the explorer's own pages only
    label: Text


class TeacherNotes(BaseModel):
    """A section's teacher notes: the minutes it takes in class, and the notes (Markdown rendered to
    HTML, glossary terms linked) in both languages."""

    model_config = ConfigDict(extra="forbid")

    minutes: int = Field(ge=1, le=120)  # the basic path
    further_minutes: int = Field(default=0, ge=0, le=120)  # the 発展 part (the second session)
    html: Text


class Section(BaseModel):
    """A section of the lesson, both languages merged."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    id: int = Field(ge=1)
    slug: str = Field(pattern=r"^[a-z0-9-]+$")
    source: Text  # the part of the seed texts this section follows
    title: Text
    summary: Text
    objectives: list[Text] = Field(min_length=1)  # 学習目標
    key_points: list[Text] = Field(min_length=1)  # 要点
    blocks: list[Block] = Field(default_factory=list)
    try_: list[TryItem] = Field(default_factory=list, alias="try")
    check: list[Question] = Field(min_length=1)
    predict: list[Prediction] = Field(default_factory=list)  # asked at their widgets, before they show
    links: list[Link] = Field(default_factory=list)
    strings: dict[str, Text] = Field(default_factory=dict)  # the widgets' labels
    teacher: TeacherNotes | None = None  # content/LANG/teacher/NN-slug.md, when written


class SectionSummary(BaseModel):
    """A section on the index; ``final``: its check is the final one, drawing on the sections before it;
    ``minutes`` and ``further_minutes``: its basic path's and its 発展 part's time in class (from the
    teacher notes; None without them); ``further``: whether it has a 発展 part."""

    id: int
    slug: str
    source: Text
    title: Text
    summary: Text
    final: bool = False
    minutes: int | None = None
    further_minutes: int | None = None
    further: bool = False

    @classmethod
    def of(cls, section: Section) -> SectionSummary:
        fields = section.model_dump(include={"id", "slug", "source", "title", "summary"})
        notes = section.teacher
        return cls(
            **fields,
            final=any(q.section is not None for q in section.check),
            minutes=notes.minutes if notes else None,
            further_minutes=notes.further_minutes if notes else None,
            further=any(b.further for b in section.blocks),
        )


class GlossaryEntry(BaseModel):
    """One term of the glossary (用語集) in both languages."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9-]+$")
    term: Text
    definition: Text
    section: int  # the section that introduces it
    forms: dict[str, list[str]]  # per language: the surface forms linked in running text
    aliases: dict[str, list[str]] = Field(default_factory=dict)  # per language: other names ("also called"), linked too
    not_in: dict[str, list[str]] = Field(default_factory=dict)  # per language: phrases where a form is another word
    used_in: list[int] = Field(default_factory=list)  # the sections whose text links it (term_uses)


# --------------------------------------------------------------------------------------------
# One language's file.
# --------------------------------------------------------------------------------------------


class _FileQuestion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["predict", "transfer", "recall"]
    question: str
    choices: list[str] = Field(min_length=2, max_length=5)
    answer: int = Field(ge=0)
    hint: str
    explanation: str
    params: dict[str, str] = Field(default_factory=dict)
    section: int | None = None


class _FilePrediction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    widget: str
    question: str
    choices: list[str] = Field(min_length=2, max_length=5)
    answer: int = Field(ge=0)
    hint: str
    explanation: str
    params: dict[str, str] = Field(default_factory=dict)


class _FileTry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str
    params: dict[str, str] = Field(default_factory=dict)
    further: bool = False  # ``further: true``: the item belongs to the section's 発展 part


class _FileLink(BaseModel):
    model_config = ConfigDict(extra="forbid")

    href: str
    label: str


class _FrontMatter(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    title: str
    summary: str
    source: str
    objectives: list[str] = Field(min_length=1)
    key_points: list[str] = Field(min_length=1)
    try_: list[_FileTry] = Field(default_factory=list, alias="try")
    check: list[_FileQuestion] = Field(min_length=1)
    predict: list[_FilePrediction] = Field(default_factory=list)
    links: list[_FileLink] = Field(default_factory=list)
    strings: dict[str, str] = Field(default_factory=dict)


def _params_as_strings(raw: dict) -> dict:
    """YAML reads ``dk: 512`` as a number; widget parameters are address strings."""
    for item in list(raw.get("try") or []) + list(raw.get("check") or []) + list(raw.get("predict") or []):
        if isinstance(item, dict) and isinstance(item.get("params"), dict):
            item["params"] = {
                str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in item["params"].items()
            }
    return raw


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "typographer": False}).enable("table")
    md.use(front_matter_plugin)
    for name in (*DIRECTIVES, FURTHER):
        md.use(container_plugin, name=name)
    return md


def _link_terms(md: MarkdownIt, tokens: list[Token], forms: list[tuple[str, str]], lang: str) -> None:
    """Turn the first use of each glossary term in every paragraph, list item or table cell into a
    link to the glossary page in the text's language (``/lesson/glossary?lang=ja#term-ID``).
    Headings, text inside links and code are left alone."""
    skips = [(phrase[1:].lower(), term) for phrase, term in forms if phrase.startswith("!")]
    forms = [(f, term) for f, term in forms if not f.startswith("!")]
    if not forms:
        return
    # English forms match whatever their case ("Self-attention" at the start of a sentence).
    pattern = re.compile("|".join(re.escape(f) for f, _ in forms), re.IGNORECASE)
    ids = {f.lower(): term for f, term in forms}
    for at, token in enumerate(tokens):
        if token.type != "inline" or not token.children:
            continue
        if at and tokens[at - 1].type == "heading_open":
            continue  # a heading names the idea; the paragraphs under it link it
        seen: set[str] = set()
        children: list[Token] = []
        depth = 0  # inside a link
        for child in token.children:
            if child.type == "link_open":
                depth += 1
            elif child.type == "link_close":
                depth -= 1
            if child.type != "text" or depth:
                children.append(child)
                continue
            text, pos = child.content, 0
            for m in pattern.finditer(text):
                term = ids[m.group(0).lower()]
                if term in seen or not _word_edges(text, m.start(), m.end()) or _inside(text, m, skips, term):
                    continue
                seen.add(term)
                if m.start() > pos:
                    children.append(_text_token(text[pos : m.start()]))
                opener = Token("link_open", "a", 1)
                opener.attrs = {"href": f"/lesson/glossary?lang={lang}#term-{term}", "class": "term", "data-term": term}
                children += [opener, _text_token(m.group(0)), Token("link_close", "a", -1)]
                pos = m.end()
            if pos < len(text):
                children.append(_text_token(text[pos:]))
        token.children = children


def _word_edges(text: str, start: int, end: int) -> bool:
    """An English form must be a whole word; Japanese has no spaces, so any match is a use."""
    if not text[start:end].isascii():
        return True
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    # A hyphen joins words ("multi-head" is not a use of "head"), and so does an underscore in a
    # name ("rnn_seq2seq.py" is not a use of "RNN").
    return not (before.isalnum() or after.isalnum() or before in "-_" or after in "-_")


def _inside(text: str, m: re.Match, skips: list[tuple[str, str]], term: str) -> bool:
    """Whether the match lies in one of the term's ``not_in`` phrases (the form is another word there)."""
    lower = text.lower()
    for phrase, owner in skips:
        if owner != term:
            continue
        start = lower.find(phrase)
        while start != -1:
            if start <= m.start() and m.end() <= start + len(phrase):
                return True
            start = lower.find(phrase, start + 1)
    return False


def _text_token(content: str) -> Token:
    token = Token("text", "", 0)
    token.content = content
    return token


def _parse_file(path: Path, forms: list[tuple[str, str]], lang: str) -> tuple[_FrontMatter, list[dict[str, Any]]]:
    """One language's file: its front matter and its body as a list of blocks (dicts)."""
    md = _markdown()
    text = path.read_text(encoding="utf-8")
    tokens = md.parse(text)
    if not tokens or tokens[0].type != "front_matter":
        raise ValueError(f"{path}: a section file starts with YAML front matter between '---' lines")
    try:
        raw = yaml.safe_load(tokens[0].content) or {}
        front = _FrontMatter.model_validate(_params_as_strings(raw))
    except yaml.YAMLError as err:
        raise ValueError(f"{path}: front matter: {err}") from None
    except ValidationError as err:
        raise ValueError(_front_error(path, tokens[0].content, err)) from None
    _link_terms(md, tokens, forms, lang)

    blocks: list[dict[str, Any]] = []
    pending: list[Token] = []
    further: int | None = None  # the line of the open ``:::: further``, None outside one
    region_start = 0  # the number of blocks before the open region

    def flush() -> None:
        html = md.renderer.render(pending, md.options, {}).strip()
        if html:
            blocks.append({"type": "html", "html": html, "further": further is not None})
        pending.clear()

    i, body = 1, tokens
    while i < len(body):
        token = body[i]
        line = (token.map or [0])[0] + 1
        if token.type == f"container_{FURTHER}_open":
            if further is not None:
                raise ValueError(f"{path}:{line}: a ':::: further' region inside another (opened at line {further})")
            if token.markup != "::::":
                raise ValueError(
                    f"{path}:{line}: a further region opens with four colons, ':::: further', and closes with "
                    f"'::::' (three-colon directives go inside it)"
                )
            # markdown-it closes a container left open at the end of the file; the line after the
            # region (token.map's end) must be its own closing '::::'.
            lines = text.splitlines()
            end = (token.map or [0, 0])[1]
            if end >= len(lines) or not lines[end].strip().startswith("::::"):
                raise ValueError(f"{path}:{line}: ':::: further' is never closed (with '::::')")
            flush()
            further, region_start = line, len(blocks)
            i += 1
            continue
        if token.type == f"container_{FURTHER}_close":
            flush()
            if len(blocks) == region_start:
                raise ValueError(f"{path}:{further}: an empty ':::: further' region")
            further = None
            i += 1
            continue
        kind = next((d for d in DIRECTIVES if token.type == f"container_{d}_open"), None)
        if kind is None:
            if token.type.startswith("container_"):
                raise ValueError(f"{path}:{line}: unexpected {token.type}")
            pending.append(token)
            i += 1
            continue
        flush()
        arg = token.info.strip()[len(kind) :].strip()
        depth, j = 1, i + 1
        while depth:
            if j >= len(body):
                raise ValueError(f"{path}:{line}: '::: {kind}' is never closed")
            if body[j].type == f"container_{kind}_open":
                depth += 1
            elif body[j].type == f"container_{kind}_close":
                depth -= 1
            j += 1
        inner = body[i + 1 : j - 1]
        blocks.append({**_directive(path, line, kind, arg, inner, md), "further": further is not None, "line": line})
        i = j
    flush()
    _check_predictions(path, tokens[0].content, front, blocks)
    return front, blocks


def _front_error(path: Path, front_text: str, err: ValidationError) -> str:
    """A front matter's first validation error on one line, at the line of the value it is about:
    ``path:12: front matter: predict.0.kind: Extra inputs are not permitted``."""
    first = err.errors()[0]
    loc = [str(part) for part in first["loc"]]
    line = 1
    try:
        node = yaml.compose(front_text)
        for part in loc:
            if isinstance(node, yaml.MappingNode):
                node = next(v for k, v in node.value if k.value == part)
            elif isinstance(node, yaml.SequenceNode):
                node = node.value[int(part)]
            line = node.start_mark.line + 2  # the front matter starts on the file's second line
    except (yaml.YAMLError, StopIteration, IndexError, ValueError):
        pass
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{path}:{line}: front matter: {'.'.join(loc) or 'top level'}: {first['msg']}{more}"


def _front_lines(front_text: str, key: str) -> list[int]:
    """The file's line of each item of the front matter's list ``key`` (the front matter starts on
    the file's second line, after '---')."""
    try:
        root = yaml.compose(front_text)
    except yaml.YAMLError:
        return []
    if not isinstance(root, yaml.MappingNode):
        return []
    for k, v in root.value:
        if k.value == key and isinstance(v, yaml.SequenceNode):
            return [item.start_mark.line + 2 for item in v.value]
    return []


def _check_predictions(path: Path, front_text: str, front: _FrontMatter, blocks: list[dict[str, Any]]) -> None:
    """Each prediction names a widget on this page, on its basic path, and no widget has two."""
    lines = _front_lines(front_text, "predict")
    first: dict[str, dict[str, Any]] = {}
    for b in blocks:
        if b["type"] == "widget":
            first.setdefault(b["widget"], b)
    seen: dict[str, int] = {}
    for n, p in enumerate(front.predict):
        line = lines[n] if n < len(lines) else 1
        where = f"{path}:{line}: prediction {n + 1} (widget {p.widget!r})"
        if p.widget not in first:
            on_page = sorted(first) or "none"
            raise ValueError(f"{where}: no '::: widget {p.widget}' on this page; its widgets: {on_page}")
        if first[p.widget]["further"]:
            raise ValueError(
                f"{where}: the widget is inside ':::: further' (line {first[p.widget]['line']}); "
                f"a prediction is asked on the basic path"
            )
        if p.widget in seen:
            raise ValueError(f"{where}: a second prediction for this widget (the first at line {seen[p.widget]})")
        seen[p.widget] = line
        if p.answer >= len(p.choices):
            raise ValueError(f"{where}: answer {p.answer} is not one of its {len(p.choices)} choices")


def _directive(path: Path, line: int, kind: str, arg: str, inner: list[Token], md: MarkdownIt) -> dict[str, Any]:
    if kind == "widget":
        if arg not in WIDGETS:
            raise ValueError(f"{path}:{line}: unknown widget {arg!r}; lesson.js has {sorted(WIDGETS)}")
        return {"type": "widget", "widget": arg}
    if kind in ("note", "memo"):
        html = md.renderer.render(inner, md.options, {}).strip()
        if not html:
            raise ValueError(f"{path}:{line}: an empty '::: {kind}'")
        return {"type": kind, "html": html}
    # code: a fenced block inside, or an attnlab object's source named after "code".
    fences = [t for t in inner if t.type == "fence"]
    caption = md.renderer.render([t for t in inner if t.type != "fence"], md.options, {}).strip()
    if arg and fences:
        raise ValueError(f"{path}:{line}: '::: code {arg}' reads its code from attnlab; remove the fenced block")
    if not arg and len(fences) != 1:
        raise ValueError(f"{path}:{line}: '::: code' needs one fenced code block or an 'attnlab.module:name'")
    block: dict[str, Any] = {"type": "code", "caption": caption}
    if arg:
        block.update(_source_code(path, line, arg))
    else:
        block.update(code=fences[0].content.rstrip("\n"), language=fences[0].info.strip())
    return block


def _source_code(path: Path, line: int, source: str) -> dict[str, Any]:
    module_name, _, qualname = source.partition(":")
    if not module_name.startswith("attnlab.") or not qualname:
        raise ValueError(f"{path}:{line}: code source {source!r} must be 'attnlab.module:name'")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"{path}:{line}: code source {source!r}: {err}") from None
    lines, first = inspect.getsourcelines(obj)
    file = Path(inspect.getsourcefile(obj)).resolve()
    package_root = Path(importlib.import_module("attnlab").__file__).resolve().parent.parent
    relative, last = file.relative_to(package_root).as_posix(), first + len(lines) - 1
    return {
        "code": textwrap.dedent("".join(lines)).rstrip(),
        "source": source,
        "where": f"{relative}, lines {first}–{last}",
        "file": relative,
        "lines": (first, last),
        "language": "python",
    }


# --------------------------------------------------------------------------------------------
# Both languages merged, checked against each other.
# --------------------------------------------------------------------------------------------


def _pair(ja: Any, en: Any) -> Text:
    return Text(ja=ja, en=en)


def _merge_blocks(name: str, ja: list[dict], en: list[dict]) -> list[Block]:
    shape = [(b["type"], b.get("widget"), b.get("source"), b["further"]) for b in ja]
    other = [(b["type"], b.get("widget"), b.get("source"), b["further"]) for b in en]
    if shape != other:
        raise ValueError(f"{name}: the ja and en files differ in their blocks: {shape} vs {other}")
    merged = []
    for a, b in zip(ja, en, strict=True):
        if a["type"] in ("html", "note", "memo"):
            merged.append(Block(type=a["type"], html=_pair(a["html"], b["html"]), further=a["further"]))
        elif a["type"] == "widget":
            merged.append(Block(type="widget", widget=a["widget"], further=a["further"]))
        else:
            caption = _pair(a["caption"], b["caption"]) if a["caption"] or b["caption"] else None
            if bool(a["caption"]) != bool(b["caption"]):
                raise ValueError(f"{name}: a code block has a caption in one language only")
            merged.append(
                Block(
                    type="code",
                    html=caption,
                    code=_pair(a["code"], b["code"]),
                    language=a.get("language", ""),
                    source=a.get("source"),
                    where=a.get("where"),
                    file=a.get("file"),
                    lines=a.get("lines"),
                    further=a["further"],
                )
            )
    return merged


def _merge(ident: int, slug: str, ja: tuple[_FrontMatter, list], en: tuple[_FrontMatter, list]) -> Section:
    name = f"{ident:02d}-{slug}.md"  # the file, in content/ja/ and content/en/
    (fja, bja), (fen, ben) = ja, en

    def same(what: str, a: Any, b: Any) -> None:
        if a != b:
            raise ValueError(f"{name}: the ja and en files differ in {what}: {a!r} vs {b!r}")

    for what in ("objectives", "key_points", "try_", "check", "links"):
        same(f"the number of {what.rstrip('_')}", len(getattr(fja, what)), len(getattr(fen, what)))
    same("their widget strings", sorted(fja.strings), sorted(fen.strings))
    for n, (a, b) in enumerate(zip(fja.try_, fen.try_, strict=True), 1):
        same(f"try item {n}'s params", a.params, b.params)
        same(f"try item {n}'s further", a.further, b.further)
    for n, (a, b) in enumerate(zip(fja.check, fen.check, strict=True), 1):
        for field in ("kind", "answer", "params", "section"):
            same(f"question {n}'s {field}", getattr(a, field), getattr(b, field))
        same(f"question {n}'s number of choices", len(a.choices), len(b.choices))
        if a.answer >= len(a.choices):
            raise ValueError(f"{name}: question {n}: answer {a.answer} is not one of its {len(a.choices)} choices")
    same("the number of predictions", len(fja.predict), len(fen.predict))
    for n, (a, b) in enumerate(zip(fja.predict, fen.predict, strict=True), 1):
        for field in ("widget", "answer", "params"):
            same(f"prediction {n}'s {field}", getattr(a, field), getattr(b, field))
        same(f"prediction {n}'s number of choices", len(a.choices), len(b.choices))
    for n, (a, b) in enumerate(zip(fja.links, fen.links, strict=True), 1):
        same(f"link {n}'s address", a.href, b.href)
    return Section(
        id=ident,
        slug=slug,
        source=_pair(fja.source, fen.source),
        title=_pair(fja.title, fen.title),
        summary=_pair(fja.summary, fen.summary),
        objectives=[_pair(a, b) for a, b in zip(fja.objectives, fen.objectives, strict=True)],
        key_points=[_pair(a, b) for a, b in zip(fja.key_points, fen.key_points, strict=True)],
        blocks=_merge_blocks(name, bja, ben),
        try_=[
            TryItem(text=_pair(a.text, b.text), params=a.params, further=a.further)
            for a, b in zip(fja.try_, fen.try_, strict=True)
        ],
        check=[
            Question(
                kind=a.kind,
                question=_pair(a.question, b.question),
                choices=[_pair(x, y) for x, y in zip(a.choices, b.choices, strict=True)],
                answer=a.answer,
                hint=_pair(a.hint, b.hint),
                explanation=_pair(a.explanation, b.explanation),
                params=a.params,
                section=a.section,
            )
            for a, b in zip(fja.check, fen.check, strict=True)
        ],
        predict=[
            Prediction(
                widget=a.widget,
                question=_pair(a.question, b.question),
                choices=[_pair(x, y) for x, y in zip(a.choices, b.choices, strict=True)],
                answer=a.answer,
                hint=_pair(a.hint, b.hint),
                explanation=_pair(a.explanation, b.explanation),
                params=a.params,
            )
            for a, b in zip(fja.predict, fen.predict, strict=True)
        ],
        links=[Link(href=a.href, label=_pair(a.label, b.label)) for a, b in zip(fja.links, fen.links, strict=True)],
        strings={key: _pair(fja.strings[key], fen.strings[key]) for key in fja.strings},
    )


def load_glossary(directory: Path = CONTENT_DIR) -> dict[str, GlossaryEntry]:
    """The glossary (``LANG/glossary.yaml``), both languages merged, by term id, in file order."""
    raw = {}
    for lang in LANGS:
        path = directory / lang / "glossary.yaml"
        try:
            raw[lang] = yaml.safe_load(path.read_text(encoding="utf-8")) or []
        except (OSError, yaml.YAMLError) as err:
            raise ValueError(f"{path}: {err}") from None
    ids = {lang: [e.get("id") for e in raw[lang]] for lang in LANGS}
    if ids["ja"] != ids["en"]:
        raise ValueError(f"{directory}: the ja and en glossaries differ in their terms: {ids['ja']} vs {ids['en']}")
    entries = {}
    for a, b in zip(raw["ja"], raw["en"], strict=True):
        try:
            entry = GlossaryEntry(
                id=a["id"],
                term=_pair(a["term"], b["term"]),
                definition=_pair(a["definition"], b["definition"]),
                section=a["section"],
                forms={
                    "ja": [a["term"], *a.get("forms", []), *a.get("aliases", [])],
                    "en": [b["term"], *b.get("forms", []), *b.get("aliases", [])],
                },
                aliases={"ja": a.get("aliases", []), "en": b.get("aliases", [])},
                not_in={"ja": a.get("not_in", []), "en": b.get("not_in", [])},
            )
        except (KeyError, ValidationError) as err:
            raise ValueError(f"{directory}: glossary term {a.get('id')!r}: {err}") from None
        if a["section"] != b["section"]:
            raise ValueError(f"{directory}: glossary term {a['id']!r} is introduced in different sections")
        entries[entry.id] = entry
    return entries


def _forms(glossary: dict[str, GlossaryEntry], lang: str) -> list[tuple[str, str]]:
    """(surface form, term id), longest first, so that 自己注意 wins over 注意; then, as
    ("!phrase", term id), the phrases in which a form of the term is another word ("positive
    values", "scores 100")."""
    pairs = [(form, entry.id) for entry in glossary.values() for form in entry.forms[lang]]
    skips = [("!" + phrase, entry.id) for entry in glossary.values() for phrase in entry.not_in.get(lang, [])]
    return sorted(pairs, key=lambda p: -len(p[0])) + skips


def load_sections(directory: Path = CONTENT_DIR) -> dict[int, Section]:
    """Every section, both languages merged and checked, by id (``ValueError`` naming the file otherwise)."""
    glossary = load_glossary(directory)
    files = {}
    for lang in LANGS:
        for path in sorted((directory / lang).glob("*.md")):
            match = re.fullmatch(r"(\d\d)-([a-z0-9-]+)\.md", path.name)
            if not match:
                raise ValueError(f"{path}: section files are named NN-slug.md")
            files.setdefault(path.name, {})[lang] = path
    sections: dict[int, Section] = {}
    for name, pair in files.items():
        missing = [lang for lang in LANGS if lang not in pair]
        if missing:
            raise ValueError(f"{directory}: {name} has no {'/'.join(missing)} file")
        match = re.fullmatch(r"(\d\d)-([a-z0-9-]+)\.md", name)
        ident, slug = int(match[1]), match[2]
        if ident in sections:
            raise ValueError(f"{pair['ja']}: section {ident} is defined twice")
        parsed = {lang: _parse_file(pair[lang], _forms(glossary, lang), lang) for lang in LANGS}
        sections[ident] = _merge(ident, slug, parsed["ja"], parsed["en"])
    sections = dict(sorted(sections.items()))
    if list(sections) != list(range(1, len(sections) + 1)):
        raise ValueError(f"{directory}: sections must be numbered 1, 2, 3, … without gaps; got {list(sections)}")
    for entry in glossary.values():
        if entry.section not in sections:
            raise ValueError(f"glossary term {entry.id!r}: section {entry.section} does not exist")
    for section in sections.values():
        _check_final(directory, section)
    return _with_teacher_notes(directory, sections, glossary)


def _check_final(directory: Path, section: Section) -> None:
    """A final check (questions with ``section:``) names, for every question, a section before it;
    a section's own check names none."""
    drawn = [q.section for q in section.check]
    if not any(n is not None for n in drawn):
        return
    name = f"{directory}/ja/{section.id:02d}-{section.slug}.md"
    for n, source in enumerate(drawn, 1):
        if source is None:
            raise ValueError(f"{name}: question {n} says no 'section:', and the others of this final check do")
        if not 1 <= source < section.id:
            raise ValueError(f"{name}: question {n} draws on section {source}, which is not a section before it")


# --------------------------------------------------------------------------------------------
# Teacher notes.
# --------------------------------------------------------------------------------------------

#: The headings of a teacher note's four parts, in order: the first three at level 3 (the page puts
#: the notes under a level-2 heading of its own), the answer at level 4 under the exercise.
TEACHER_HEADINGS = {
    "ja": (("h3", "最初に聞くこと"), ("h3", "よくある誤解"), ("h3", "クラス演習"), ("h4", "解答")),
    "en": (("h3", "Ask first"), ("h3", "Misconceptions"), ("h3", "Class exercise"), ("h4", "Answer")),
}
_MISCONCEPTIONS = 1  # the part whose items must each link to a widget
_WIDGET_LINK = re.compile(r"^(?:/lesson/(\d+)(?:\?[\w=&%.,-]*)?)?#widget-([a-z0-9-]+)$")


class _TeacherFront(BaseModel):
    model_config = ConfigDict(extra="forbid")

    minutes: int = Field(strict=True, ge=1, le=120)  # the basic path
    further_minutes: int = Field(default=0, strict=True, ge=0, le=120)  # the 発展 part


def _widgets_of(section: Section) -> set[str]:
    return {b.widget for b in section.blocks if b.type == "widget" and b.widget}


def _parse_teacher(
    path: Path, forms: list[tuple[str, str]], lang: str, section: Section, sections: dict[int, Section]
) -> tuple[tuple[int, int], str]:
    """One language's teacher notes: ((minutes, further minutes), HTML). Checks the four parts' headings and that every
    misconception links to a widget that is on the page it names."""
    md = _markdown()
    tokens = md.parse(path.read_text(encoding="utf-8"))
    if not tokens or tokens[0].type != "front_matter":
        raise ValueError(f"{path}:1: teacher notes start with YAML front matter ('minutes: N') between '---' lines")
    try:
        front = _TeacherFront.model_validate(yaml.safe_load(tokens[0].content) or {})
    except (yaml.YAMLError, ValidationError) as err:
        raise ValueError(f"{path}:1: front matter: {err}") from None
    _link_terms(md, tokens, forms, lang)
    body = tokens[1:]
    line_of = lambda token: (token.map or [0])[0] + 1  # noqa: E731

    # The headings, in order, and what lies between them.
    expected = TEACHER_HEADINGS[lang]
    found: list[tuple[int, Token]] = [(i, t) for i, t in enumerate(body) if t.type == "heading_open"]
    for (i, token), (tag, text) in zip(found, expected, strict=False):
        title = body[i + 1].content.strip()
        if (token.tag, title) != (tag, text):
            raise ValueError(
                f"{path}:{line_of(token)}: expected the heading {'#' * int(tag[1])} {text}, found "
                f"{'#' * int(token.tag[1])} {title}; the parts are {[t for _, t in expected]}, in this order"
            )
    if len(found) != len(expected):
        where = line_of(found[len(expected)][1]) if len(found) > len(expected) else len(path.read_text().splitlines())
        raise ValueError(f"{path}:{where}: teacher notes have exactly the headings {[t for _, t in expected]}")
    for token in body:
        if token.type.startswith("container_"):
            raise ValueError(f"{path}:{line_of(token)}: teacher notes take plain Markdown, no '::: ' directives")
    bounds = [i for i, _ in found] + [len(body)]
    for n, (start, end) in enumerate(zip(bounds, bounds[1:], strict=False)):
        part = body[start + 3 : end]  # after heading_open, inline, heading_close
        if not any(t.type == "inline" and t.content.strip() for t in part):
            raise ValueError(f"{path}:{line_of(body[start])}: the part '{expected[n][1]}' is empty")

    # Every misconception (a top-level item of that part's list) names the widget that dispels it.
    start, end = bounds[_MISCONCEPTIONS], bounds[_MISCONCEPTIONS + 1]
    items, depth = [], 0
    for i in range(start, end):
        token = body[i]
        if token.type in ("bullet_list_open", "ordered_list_open"):
            depth += 1
        elif token.type in ("bullet_list_close", "ordered_list_close"):
            depth -= 1
        elif token.type == "list_item_open" and depth == 1:
            items.append(i)
    if not items:
        raise ValueError(f"{path}:{line_of(body[start])}: list the misconceptions as items, one per misconception")
    for k, first in enumerate(items):
        last = items[k + 1] if k + 1 < len(items) else end
        links = [
            child.attrs.get("href", "")
            for token in body[first:last]
            if token.type == "inline"
            for child in token.children or []
            if child.type == "link_open"
        ]
        widgets = [m for m in map(_WIDGET_LINK.match, map(str, links)) if m]
        if not widgets:
            raise ValueError(
                f"{path}:{line_of(body[first])}: a misconception links to the widget that dispels it "
                f"([…](#widget-NAME), or [...](/lesson/N#widget-NAME) for another section's)"
            )
        for m in widgets:
            page = int(m[1]) if m[1] else section.id
            if page not in sections or m[2] not in _widgets_of(sections[page]):
                raise ValueError(f"{path}:{line_of(body[first])}: section {page}'s page has no widget {m[2]!r}")
    html = md.renderer.render(body, md.options, {}).strip()
    if front.further_minutes and not any(b.further for b in section.blocks):
        raise ValueError(
            f"{path}:1: further_minutes {front.further_minutes}, and the section has no ':::: further' part"
        )
    return (front.minutes, front.further_minutes), html


def _with_teacher_notes(
    directory: Path, sections: dict[int, Section], glossary: dict[str, GlossaryEntry]
) -> dict[int, Section]:
    """The sections with their teacher notes (``LANG/teacher/NN-slug.md``), checked in both languages."""
    names = {f"{s.id:02d}-{s.slug}.md": s for s in sections.values()}
    found: dict[str, dict[str, Path]] = {}
    for lang in LANGS:
        for path in sorted((directory / lang / "teacher").glob("*.md")):
            if path.name not in names:
                raise ValueError(f"{path}:1: teacher notes are named after their section; no section {path.name}")
            found.setdefault(path.name, {})[lang] = path
    out = dict(sections)
    for name, pair in found.items():
        missing = [lang for lang in LANGS if lang not in pair]
        if missing:
            other = next(iter(pair.values()))
            raise ValueError(f"{other}:1: teacher notes in one language only; write {'/'.join(missing)}/teacher/{name}")
        section = names[name]
        parsed = {lang: _parse_teacher(pair[lang], _forms(glossary, lang), lang, section, sections) for lang in LANGS}
        (mja, hja), (men, hen) = parsed["ja"], parsed["en"]
        for k, key in enumerate(("minutes", "further_minutes")):
            if mja[k] != men[k]:
                raise ValueError(
                    f"{pair['en']}:1: {key} {men[k]} here, {mja[k]} in {pair['ja']}; a section takes one time"
                )
        notes = TeacherNotes(minutes=mja[0], further_minutes=mja[1], html=_pair(hja, hen))
        out[section.id] = section.model_copy(update={"teacher": notes})
    return out


class PlanRow(BaseModel):
    """One section in a session's plan: from ``start`` to ``end`` minutes into the session."""

    section: int
    title: Text
    minutes: int
    start: int
    end: int


class LessonPlan(BaseModel):
    """The teacher's two plans: ``basic``, the first session (the 基礎 path, ~90 minutes: each
    section's teacher-notes ``minutes``), and ``further``, the second session (the 発展 parts: each
    section's ``further_minutes``, the sections without one left out); each total is its rows' sum."""

    basic: list[PlanRow]
    basic_total: int
    further: list[PlanRow]
    further_total: int


def lesson_plan(sections: dict[int, Section]) -> LessonPlan:
    """The two sessions' plans, from the teacher notes' minutes (a section without notes is left out)."""

    def rows(minutes_of) -> list[PlanRow]:
        out, clock = [], 0
        for s in sections.values():
            m = minutes_of(s.teacher) if s.teacher else 0
            if m:
                out.append(PlanRow(section=s.id, title=s.title, minutes=m, start=clock, end=clock + m))
                clock += m
        return out

    basic = rows(lambda notes: notes.minutes)
    further = rows(lambda notes: notes.further_minutes)
    return LessonPlan(
        basic=basic,
        basic_total=sum(r.minutes for r in basic),
        further=further,
        further_total=sum(r.minutes for r in further),
    )


def term_uses(sections: dict[int, Section], glossary: dict[str, GlossaryEntry] | None = None) -> dict[str, list[int]]:
    """For each glossary term, the sections whose text links it (in either language), in order; with
    the ``glossary``, also those whose widgets' labels (front matter ``strings``) name it, a form a
    whole word there (labels are plain text, not linked, but on the page all the same)."""
    uses: dict[str, list[int]] = {}
    for n, section in sections.items():
        found = set()
        for block in section.blocks:
            if block.html is not None:
                found.update(re.findall(r'data-term="([a-z0-9-]+)"', block.html.ja + block.html.en))
        for entry in (glossary or {}).values():
            for lang in LANGS:
                labels = "\n".join(getattr(s, lang) for s in section.strings.values())
                for form in entry.forms[lang]:
                    at = labels.lower().find(form.lower())
                    while at != -1 and not _word_edges(labels, at, at + len(form)):
                        at = labels.lower().find(form.lower(), at + 1)
                    if at != -1:
                        found.add(entry.id)
        for term in sorted(found):
            uses.setdefault(term, []).append(n)
    return uses


@functools.cache
def default_sections() -> dict[int, Section]:
    return load_sections()


@functools.cache
def default_glossary() -> dict[str, GlossaryEntry]:
    return load_glossary()
