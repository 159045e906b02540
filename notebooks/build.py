"""Build the notebooks: each ``NN_name.py`` here (jupytext percent format, the source of truth) →
``NN_name.ipynb`` beside it (git-ignored), executed top to bottom unless ``--no-execute``.

    python notebooks/build.py                      # all eight, executed (make notebooks)
    python notebooks/build.py 03 05                # the ones whose names start so
    python notebooks/build.py --no-execute         # convert only, where the .ipynb is older (make lab)

The kernel runs in this folder (so ``import helpers`` works) with this checkout first on
``PYTHONPATH`` (so it imports this checkout's attnlab). ``tests/notebooks/test_notebooks.py`` executes the
same way (``make test-notebooks``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def notebook_sources(prefixes: list[str] | None = None) -> list[Path]:
    """The notebooks' sources in order (``01_….py`` … ``08_….py``), optionally those whose names
    start with one of ``prefixes``."""
    sources = sorted(p for p in HERE.glob("[0-9][0-9]_*.py"))
    if prefixes:
        sources = [p for p in sources if any(p.name.startswith(x) for x in prefixes)]
    return sources


def kernel_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of the notebook kernel: this one, with the checkout first on PYTHONPATH
    and ``extra`` (e.g. ``{"ATTNLAB_NOTEBOOK_PRECISION": "bf16"}``) on top."""
    env = dict(os.environ) | dict(extra or {})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


def edited(text: str, edits: list[tuple[str, str]]) -> str:
    """``text`` with each ``(old, new)`` of ``edits`` applied: the change a learner makes when a
    question invites an experiment. Each ``old`` must occur exactly once (else ``ValueError``), so
    an edit that no longer matches the notebook fails loudly instead of testing nothing."""
    for old, new in edits:
        if text.count(old) != 1:
            raise ValueError(f"the edit's text occurs {text.count(old)} times in the notebook, not once: {old!r}")
        text = text.replace(old, new)
    return text


def build(
    source: Path,
    *,
    execute: bool = True,
    timeout: int = 600,
    out_dir: Path | None = None,
    sign: bool = False,
    edits: list[tuple[str, str]] | None = None,
    env: dict[str, str] | None = None,
    name: str | None = None,
) -> tuple[Path, float]:
    """Convert ``source`` to a notebook and (by default) execute it; return its path and the
    execution time in seconds (0 when not executed). A failing cell raises
    :class:`nbclient.exceptions.CellExecutionError` naming the cell; the notebook is written
    either way, with the outputs up to the failure. ``sign`` marks the executed notebook as
    trusted for this user (``jupyter trust``), so JupyterLab shows its HTML outputs (the
    attention tables and embedded heatmaps) as they are instead of sanitizing them. ``edits``
    changes the source first (:func:`edited`), ``env`` adds variables to the kernel's
    environment, and ``name`` names the written notebook (default: the source's stem).

    Shape:
        no tensors; one ``.py`` source → one ``.ipynb``.
    """
    import jupytext
    import nbformat

    target = (out_dir or source.parent) / f"{name or source.stem}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nb = jupytext.reads(edited(source.read_text(encoding="utf-8"), edits or []), fmt="py:percent")
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    if not execute:
        nbformat.write(nb, target)
        return target, 0.0
    from nbclient import NotebookClient

    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}})
    start = time.perf_counter()
    try:
        client.execute(env=kernel_env(env))
    finally:
        nbformat.write(nb, target)
    seconds = time.perf_counter() - start
    if sign:
        from nbformat.sign import NotebookNotary

        NotebookNotary().sign(nb)
    return target, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="name prefixes, e.g. 03 05 (default: all)")
    parser.add_argument("--no-execute", action="store_true", help="convert only, skipping up-to-date notebooks")
    parser.add_argument("--timeout", type=int, default=600, help="seconds one cell may run")
    args = parser.parse_args(argv)
    sources = notebook_sources(args.names)
    if not sources:
        parser.error(f"no notebook matches {args.names}")
    total = 0.0
    for source in sources:
        target = source.with_suffix(".ipynb")
        if args.no_execute and target.is_file() and target.stat().st_mtime >= source.stat().st_mtime:
            print(f"{target.name}: up to date")
            continue
        path, seconds = build(source, execute=not args.no_execute, timeout=args.timeout, sign=True)
        total += seconds
        print(f"{path.relative_to(REPO)}" + (f": executed in {seconds:.0f} s" if seconds else ": converted"))
    if total:
        print(f"total execution {total:.0f} s ({total / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
