"""Every registered ``attnlab`` command has a working ``--help`` that documents all its parameters.

The list comes from ``attnlab.cli.COMMANDS``, so commands added later are covered automatically.
"""

from __future__ import annotations

import inspect
import re

import pytest

from attnlab.cli import COMMANDS, main


def documented_args(fn) -> dict[str, str]:
    """``name: text`` entries of the docstring's ``Args:`` section (continuation lines joined)."""
    doc = inspect.getdoc(fn) or ""
    m = re.search(r"^Args:\n((?:[ \t]+.*\n?|\n)+)", doc, flags=re.MULTILINE)
    entries: dict[str, str] = {}
    if not m:
        return entries
    current = None
    for line in m.group(1).splitlines():
        entry = re.match(r"^ {4}(\w+):\s*(.*)$", line)
        if entry:
            current = entry.group(1)
            entries[current] = entry.group(2)
        elif current and line.strip():
            entries[current] += " " + line.strip()
    return entries


def help_text(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    return capsys.readouterr().out


def squash(text: str) -> str:
    """Whitespace removed: argparse re-wraps help text (and may break lines at hyphens)."""
    return "".join(text.split())


def test_commands_are_registered():
    assert "explain" in COMMANDS


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_lists_every_parameter(capsys, monkeypatch, name):
    monkeypatch.setenv("COLUMNS", "100")
    fn = COMMANDS[name]
    out = help_text(capsys, [*name.split(), "--help"])
    assert out.startswith("usage: attnlab " + name)
    summary = (inspect.getdoc(fn) or "").split("\n\n")[0]
    assert summary, f"command {name!r} has no docstring summary"
    assert squash(summary) in squash(out)
    docs = documented_args(fn)
    for pname, param in inspect.signature(fn).parameters.items():
        flag = "--" + pname.replace("_", "-")
        positional = param.kind is inspect.Parameter.POSITIONAL_ONLY or (
            param.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and param.default is inspect.Parameter.empty
        )
        if positional:
            assert re.search(rf"\b{pname}\b", out), f"{name}: positional {pname} missing from --help"
        else:
            assert flag in out, f"{name}: {flag} missing from --help"
        assert docs.get(pname), f"{name}: parameter {pname!r} has no entry in the docstring's Args: section"
        assert squash(docs[pname]) in squash(out), f"{name}: the help of {pname!r} is not shown"


def test_top_level_help_lists_every_command(capsys):
    out = help_text(capsys, ["--help"])
    for name in COMMANDS:
        assert name.split()[0] in out
    for group in {n.split()[0] for n in COMMANDS if " " in n}:
        leaves = [n.split()[1] for n in COMMANDS if n.startswith(group + " ")]
        group_out = help_text(capsys, [group, "--help"])
        for leaf in leaves:
            assert leaf in group_out


def test_unknown_command_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["no-such-command"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_bool_parameters_have_both_flags(capsys):
    out = help_text(capsys, ["explain", "--help"])
    assert "--scale" in out and "--no-scale" in out
