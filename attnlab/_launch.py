"""The ``attnlab`` command's entry point: OpenMP settings first (see :mod:`attnlab.openmp`), then the CLI."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    import sys

    from . import openmp

    openmp.configure(argv=sys.argv[1:] if argv is None else argv)  # before anything imports torch
    from .cli import main as cli_main

    return cli_main(argv)
