"""The ``attnlab`` command line.

Each subcommand is a plain typed Python function registered with :func:`command`. Its signature
becomes the options (a parameter without a default is a positional argument; ``bool`` defaults
become ``--flag`` / ``--no-flag``; ``Literal[...]`` becomes a choice) and its docstring becomes the
``--help`` text: the summary line, and one line per argument from the ``Args:`` section.
Command bodies import their heavy modules lazily so that ``attnlab --help`` stays instant.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
import types
import typing
from pathlib import Path
from typing import Callable, Literal

COMMANDS: dict[str, Callable] = {}


def command(name: str) -> Callable[[Callable], Callable]:
    """Register ``fn`` as the subcommand ``name`` (``"train translate"`` nests under ``train``)."""

    def register(fn: Callable) -> Callable:
        COMMANDS[name] = fn
        return fn

    return register


# --------------------------------------------------------------------------------------------
# From typed functions to argparse.
# --------------------------------------------------------------------------------------------


def _arg_docs(doc: str) -> dict[str, str]:
    """The ``name: text`` entries of a Google-style ``Args:`` section (continuations joined)."""
    docs: dict[str, str] = {}
    lines = doc.splitlines()
    if "Args:" not in lines:
        return docs
    current = None
    for line in lines[lines.index("Args:") + 1 :]:
        if line and not line.startswith(" "):
            break  # the next section
        m = re.match(r"^ {4}(\w+):\s*(.*)$", line)
        if m:
            current = m.group(1)
            docs[current] = m.group(2)
        elif current and line.strip():
            docs[current] += " " + line.strip()
    return docs


def _unwrap_optional(tp):
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _add_function_arguments(parser: argparse.ArgumentParser, fn: Callable) -> None:
    hints = typing.get_type_hints(fn)
    docs = _arg_docs(inspect.getdoc(fn) or "")
    for name, param in inspect.signature(fn).parameters.items():
        tp = _unwrap_optional(hints.get(name, str))
        help_text = docs.get(name, "")
        flag = "--" + name.replace("_", "-")
        has_default = param.default is not inspect.Parameter.empty
        kwargs: dict = {"help": help_text}
        if tp is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=param.default, help=help_text)
            continue
        origin = typing.get_origin(tp)
        if origin is Literal:
            kwargs["choices"] = list(typing.get_args(tp))
            kwargs["type"] = type(kwargs["choices"][0])
        elif origin is list:
            (item,) = typing.get_args(tp) or (str,)
            kwargs["type"] = _unwrap_optional(item)
            kwargs["nargs"] = "*" if has_default else "+"
        elif tp is Path:
            kwargs["type"] = Path
        elif tp in (int, float, str):
            kwargs["type"] = tp
        if has_default:
            if param.default is not None and "choices" not in kwargs and origin is not list:
                kwargs["help"] = (help_text + f" (default: {param.default})").strip()
            parser.add_argument(flag, dest=name, default=param.default, **kwargs)
        else:
            parser.add_argument(name, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attnlab",
        description="attnlab: attention and the Transformer, from softmax(QKᵀ/√d_k)·V to a CPU-trained translator.",
    )
    groups: dict[str, argparse._SubParsersAction] = {}
    top = parser.add_subparsers(dest="command", metavar="COMMAND")
    top.required = True
    group_parsers: dict[str, argparse.ArgumentParser] = {}
    for name in sorted(COMMANDS):
        fn = COMMANDS[name]
        doc = inspect.getdoc(fn) or ""
        summary = doc.split("\n\n")[0].replace("\n", " ")
        description = doc.split("Args:")[0].strip()
        words = name.split()
        if len(words) == 1:
            sub = top.add_parser(name, help=summary, description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
        else:
            group, leaf = words
            if group not in groups:
                group_parsers[group] = top.add_parser(group, help=f"{group} subcommands")
                groups[group] = group_parsers[group].add_subparsers(dest="subcommand", metavar="SUBCOMMAND")
                groups[group].required = True
            sub = groups[group].add_parser(leaf, help=summary, description=description,
                                           formatter_class=argparse.RawDescriptionHelpFormatter)
        _add_function_arguments(sub, fn)
        sub.set_defaults(_fn=fn)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = vars(parser.parse_args(argv))
    fn = args.pop("_fn")
    args.pop("command", None)
    args.pop("subcommand", None)
    try:
        result = fn(**args)
    except (ValueError, FileNotFoundError, TypeError) as err:
        # Bad input is reported as one clear line, not a traceback.
        print(f"attnlab: error: {err}", file=sys.stderr)
        return 2
    return int(result or 0)


# --------------------------------------------------------------------------------------------
# Commands.
# --------------------------------------------------------------------------------------------


@command("explain")
def explain_cmd(
    scores: list[float] | None = None,
    *,
    query: list[float] | None = None,
    keys: list[str] | None = None,
    values: list[str] | None = None,
    d_k: int = 64,
    scale: bool = True,
    lang: Literal["en", "ja"] = "en",
    plot: Path | None = None,
) -> int:
    """Walk through scaled dot-product attention for three books, step by step.

    The lesson's "three books": a query (what you are looking for) is compared with each book's
    key (its spine label); the scores are divided by √d_k, a softmax turns them into attention
    weights, and the books' values (their contents) are mixed by those weights.

    Args:
        scores: raw query·key scores, one per key (default: 8 4 2 for three books).
        query: a query vector; with --keys, the scores are computed as query·key.
        keys: key vectors, one per key, each as comma-separated numbers ("1,0,2").
        values: value vectors, one per key, comma-separated (default: one-hot per book).
        d_k: key dimension used for the √d_k scaling (with --query, the vector length).
        scale: divide the scores by √d_k; --no-scale skips it, to see the softmax saturate.
        lang: language of the explanation, en or ja.
        plot: also write a figure of the steps to this PNG/SVG file.
    """
    from .explain import explain

    print(explain(scores=scores, query=query, keys=keys, values=values, d_k=d_k,
                  scale=scale, lang=lang, plot=plot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
