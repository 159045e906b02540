"""The notebooks as a textbook: every question has an answer, English stays out of the way, and
the learner's own functions are the ones the later cells use.

These read the sources only (``notebooks/NN_*.py``, jupytext percent format), so they run with
``make test``; what the executed outputs say (their captions' language, a sentence after every
figure) is checked in ``tests/notebooks/test_notebooks.py`` when the notebooks run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
SOURCES = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))
JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
QUESTION = re.compile(r"考える問題|試す問題")
ANSWER = "<details><summary>答えの例</summary>"


def cells(source: Path) -> list[tuple[str, str]]:
    """``(kind, text)`` per cell: ``"markdown"`` (the comment marks removed) or ``"code"``."""
    text = source.read_text(encoding="utf-8")
    parts = re.split(r"^# %%(.*)$", text, flags=re.M)
    out = []
    for header, body in zip(parts[1::2], parts[2::2]):
        if "[markdown]" in header:
            out.append(("markdown", "\n".join(re.sub(r"^# ?", "", line) for line in body.strip().splitlines())))
        else:
            out.append(("code", body.strip()))
    return out


def test_there_are_sources():
    assert len(SOURCES) == 8


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_every_question_is_followed_by_a_collapsed_japanese_answer(source):
    found = cells(source)
    questions = [i for i, (kind, text) in enumerate(found) if kind == "markdown" and QUESTION.search(text)]
    assert questions, "each notebook asks at least one 考える問題 or 試す問題"
    for i in questions:
        assert i + 1 < len(found), "the last cell is a question without an answer"
        kind, answer = found[i + 1]
        assert kind == "markdown" and answer.startswith(ANSWER) and answer.rstrip().endswith("</details>"), (
            f"the cell after the question {found[i][1][:60]!r} must be a collapsed 「答えの例」"
        )
        body = answer[len(ANSWER) : -len("</details>")]
        assert len(JAPANESE.findall(body)) >= 80, "the answer explains in Japanese, in a few sentences at least"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_english_is_kept_in_one_collapsed_note_not_doubled_paragraph_by_paragraph(source):
    text = source.read_text(encoding="utf-8")
    assert "_English:_" not in text
    notes = [t for kind, t in cells(source) if kind == "markdown" and "English" in t]
    assert len(notes) == 1 and notes[0].startswith("<details><summary>English"), "one collapsed English summary"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_later_cells_use_what_check_hands_back_not_the_solutions_module(source):
    text = source.read_text(encoding="utf-8")
    assert "import solutions" not in text, "the learner's function (or check's fallback) is used, not solutions.*"
    calls = re.findall(r"^(\w+) = check\(\"(\w+)\", (\w+)\)$", text, flags=re.M)
    assert calls, "check(...) hands back the function the later cells use: name = check(...)"
    for used, name, written in calls:
        assert written == name
        after = text.split(f'{used} = check("{name}"', 1)[1]
        assert re.search(rf"\b{used}\(", after), f"{used} (the learner's {name} when it passes) is used afterwards"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_the_lessons_terms_not_their_old_synonyms(source):
    prose = "\n".join(t for kind, t in cells(source) if kind == "markdown")
    code = "\n".join(t for kind, t in cells(source) if kind == "code")
    for old, new in (("点数", "スコア"), ("位置符号", "位置エンコーディング"), ("交差注意", "ソース・ターゲット注意"),
                     ("五つの仕事", "タスク")):  # fmt: skip
        assert old not in prose and old not in code, f"{old!r}: the lesson's glossary says {new!r}"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_claims_are_asserted_in_marked_check_cells_and_guards_explain_themselves(source):
    """A notebook's asserts on what its text says sit in a separate code cell under a text cell
    that begins 「**確かめのセル（チェック）:**」 and says what it checks, so a learner sees which
    cells are checks and can run the teaching cells with other choices; any other ``assert`` is a
    guard that tells the learner in Japanese what went wrong."""
    found = cells(source)
    checks = 0
    for i, (kind, text) in enumerate(found):
        if kind != "code":
            continue
        is_check = (
            i > 0 and found[i - 1][0] == "markdown" and found[i - 1][1].startswith("**確かめのセル（チェック）:**")
        )
        checks += is_check
        if is_check:
            assert re.search(r"^\s*assert ", text, re.M), f"a check cell without an assert: {text[:60]!r}"
            continue
        for line in re.findall(r"^\s*assert .*$", text, re.M):
            message = line.split(", ", 1)[1] if ", " in line else ""
            assert JAPANESE.search(message), (
                f"an assert outside a check cell needs a Japanese message: {line.strip()!r}"
            )
    assert checks, "each notebook has at least one check cell"
