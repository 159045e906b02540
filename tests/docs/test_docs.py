"""Every ```` ```python ```` block in README*.md and docs/*.md runs.

The blocks of one file run in order in one namespace (a later block may use an earlier one's
names), in a temporary working directory, with matplotlib's non-interactive backend. A block
written as an interactive session (``>>>`` lines) runs as a doctest, so its printed results are
checked too. A fragment that cannot run on its own is fenced ```` ```python no-run ````; any
other info string (``bash``, ``text``, ``py``…) is not run either.
"""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>```+|~~~+)(?P<info>[^\n]*)$")


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """``(first line number, source)`` of each block fenced exactly ```` ```python ````."""
    blocks, lines = [], path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info, start = m.group("fence"), m.group("info").strip(), i + 1
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            i += 1
        if info == "python":
            blocks.append((start + 1, "\n".join(lines[start:i])))
        i += 1
    return blocks


def doc_files() -> list[Path]:
    files = sorted(ROOT.glob("README*.md")) + sorted((ROOT / "docs").glob("*.md"))
    return [f for f in files if python_blocks(f)]


def run_block(path: Path, lineno: int, source: str, namespace: dict) -> None:
    where = f"{path.relative_to(ROOT)}:{lineno}"
    if source.lstrip().startswith(">>>"):
        test = doctest.DocTestParser().get_doctest(source, namespace, where, str(path), lineno - 1)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        result = runner.run(test, clear_globs=False)
        assert result.failed == 0, f"{where}: {result.failed} doctest example(s) failed (see the output above)"
        return
    try:
        code = compile(source, where, "exec")
        exec(code, namespace)
    except Exception as err:
        raise AssertionError(
            f"{where}: the python block raised {type(err).__name__}: {err}. Make it runnable, or fence it "
            "```python no-run if it is a fragment."
        ) from err


def test_block_parser(tmp_path):
    md = tmp_path / "x.md"
    md.write_text(
        "text\n```python\na = 1\n```\n```python no-run\nb = undefined\n```\n````text\n```python\n````\n"
        "  ```python\nc = a + 1\n  ```\n"
    )
    assert python_blocks(md) == [(3, "a = 1"), (12, "c = a + 1")]


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict = {"__name__": "__docs__"}
    for lineno, source in python_blocks(path):
        run_block(path, lineno, source, namespace)


def test_foundation_doc_has_a_runnable_example():
    blocks = python_blocks(ROOT / "docs" / "foundation.md")
    assert blocks and len(blocks[0][1].splitlines()) <= 12  # the README's short example
