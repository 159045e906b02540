"""Readers for parallel corpora (two line-aligned files, or one TSV) and monolingual text.

Every problem is reported with the file and the line it is on, because a corpus of
29 000 lines with one bad byte is otherwise a needle in a haystack:

- different line counts: ``train.de has 29000 lines but train.en has 28999``
- invalid UTF-8: ``train.de:17: invalid UTF-8 at byte 5 of the line (byte 1234 of the file)``
- empty source or target line: skipped and counted (``on_empty="skip"``) or an error
  naming ``file:line`` (``on_empty="error"``)
- a TSV line without exactly one tab: ``pairs.tsv:3: expected exactly one tab ...``

Lines are split on ``\\n`` (a trailing ``\\r`` is dropped, so CRLF files read the same), a
UTF-8 byte-order mark at the start of a file is ignored, and parallel/TSV segments are
stripped of surrounding whitespace. A final newline does not start an extra line.

Shape:
    Plain Python data, no tensors: ``ParallelCorpus.pairs`` is a list of N ``(src, tgt)``
    string pairs; ``read_lines`` returns a list of N strings.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

OnEmpty = Literal["skip", "error"]

__all__ = ["ParallelCorpus", "read_parallel", "read_tsv", "read_lines", "read_split", "read_text"]


@dataclass
class ParallelCorpus:
    """Sentence pairs read from disk, with what was skipped and where they came from.

    Shape:
        ``pairs``: N ``(source, target)`` strings; ``skipped_lines``: 1-based line numbers.
    """

    pairs: list[tuple[str, str]]  # (source, target) per kept line, in file order
    src_path: Path  # source file (the TSV itself for read_tsv)
    tgt_path: Path  # target file (the TSV itself for read_tsv)
    skipped_lines: list[int] = field(default_factory=list)  # 1-based lines dropped as empty

    @property
    def n_skipped(self) -> int:
        """How many lines were skipped because the source or target was empty."""
        return len(self.skipped_lines)

    @property
    def sources(self) -> list[str]:
        return [src for src, _ in self.pairs]

    @property
    def targets(self) -> list[str]:
        return [tgt for _, tgt in self.pairs]

    def __len__(self) -> int:
        return len(self.pairs)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self.pairs)


def _check_on_empty(on_empty: str) -> None:
    if on_empty not in ("skip", "error"):
        raise ValueError(f"on_empty must be 'skip' or 'error', got {on_empty!r}")


def _read_bytes(path: Path) -> bytes:
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a directory, expected a text file")
    return path.read_bytes()


def _decode(data: bytes, path: Path) -> str:
    """Decode UTF-8, turning a decoding error into one that names the line and byte."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line_start = data.rfind(b"\n", 0, err.start) + 1
        line_no = data.count(b"\n", 0, err.start) + 1
        bad = data[err.start : err.end].hex(" ")
        raise ValueError(
            f"{path}:{line_no}: invalid UTF-8 at byte {err.start - line_start} of the line "
            f"(byte {err.start} of the file): {err.reason} (bytes {bad})"
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def _split_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # a final newline ends the last line, it does not start a new one
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def read_lines(path: str | os.PathLike) -> list[str]:
    """Read a UTF-8 text file as a list of lines (without their line endings).

    Empty lines are kept: for language modelling they are part of the text.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: invalid UTF-8, naming ``file:line`` and the byte offset.

    Shape:
        output: N strings, one per line.
    """
    path = Path(path)
    return _split_lines(_decode(_read_bytes(path), path))


def read_parallel(
    src_path: str | os.PathLike, tgt_path: str | os.PathLike, *, on_empty: OnEmpty = "skip"
) -> ParallelCorpus:
    """Read two line-aligned files (line ``i`` of ``tgt_path`` translates line ``i`` of ``src_path``).

    Args:
        src_path: source-language file, one sentence per line.
        tgt_path: target-language file with exactly as many lines.
        on_empty: ``"skip"`` drops pairs whose source or target is empty (after stripping
            whitespace) and records their line numbers; ``"error"`` raises naming file:line.

    Raises:
        FileNotFoundError, ValueError (line counts differ, invalid UTF-8, empty line).

    Shape:
        output.pairs: N ``(source, target)`` strings.
    """
    _check_on_empty(on_empty)
    src_path, tgt_path = Path(src_path), Path(tgt_path)
    src_lines = _split_lines(_decode(_read_bytes(src_path), src_path))
    tgt_lines = _split_lines(_decode(_read_bytes(tgt_path), tgt_path))
    if len(src_lines) != len(tgt_lines):
        raise ValueError(
            f"{src_path} has {len(src_lines)} lines but {tgt_path} has {len(tgt_lines)}; "
            "a parallel corpus needs one target line per source line"
        )
    corpus = ParallelCorpus(pairs=[], src_path=src_path, tgt_path=tgt_path)
    for line_no, (src, tgt) in enumerate(zip(src_lines, tgt_lines), start=1):
        src, tgt = src.strip(), tgt.strip()
        if not src or not tgt:
            if on_empty == "error":
                side, where = ("source", src_path) if not src else ("target", tgt_path)
                raise ValueError(f"{where}:{line_no}: empty {side} line (pass on_empty='skip' to skip such pairs)")
            corpus.skipped_lines.append(line_no)
            continue
        corpus.pairs.append((src, tgt))
    return corpus


def read_tsv(path: str | os.PathLike, *, on_empty: OnEmpty = "skip") -> ParallelCorpus:
    """Read a tab-separated parallel corpus: one ``source<TAB>target`` pair per line.

    A completely empty line counts as an empty pair (skipped or an error by ``on_empty``);
    any other line must contain exactly one tab.

    Raises:
        FileNotFoundError, ValueError (wrong number of tabs, invalid UTF-8, empty side).

    Shape:
        output.pairs: N ``(source, target)`` strings.
    """
    _check_on_empty(on_empty)
    path = Path(path)
    corpus = ParallelCorpus(pairs=[], src_path=path, tgt_path=path)
    for line_no, line in enumerate(_split_lines(_decode(_read_bytes(path), path)), start=1):
        if line.strip():
            n_tabs = line.count("\t")
            if n_tabs != 1:
                raise ValueError(f"{path}:{line_no}: expected exactly one tab (source<TAB>target), found {n_tabs}")
            src, tgt = (part.strip() for part in line.split("\t"))
        else:
            src = tgt = ""
        if not src or not tgt:
            if on_empty == "error":
                side = "source" if not src else "target"
                raise ValueError(f"{path}:{line_no}: empty {side} (pass on_empty='skip' to skip such pairs)")
            corpus.skipped_lines.append(line_no)
            continue
        corpus.pairs.append((src, tgt))
    return corpus


def read_split(
    src: str | os.PathLike | None,
    tgt: str | os.PathLike | None,
    tsv: str | os.PathLike | None,
    *,
    split: str,
    on_empty: OnEmpty = "skip",
) -> ParallelCorpus:
    """One split of a parallel corpus, given as two line-aligned files or as one TSV (not both).

    Args:
        src: source file (with ``tgt``).
        tgt: target file, line-aligned with ``src``.
        tsv: a ``source<TAB>target`` file instead of ``src``/``tgt``.
        split: the split's name as the command-line options spell it (``--{split}-src``,
            ``--{split}-tsv``), used in the error messages.
        on_empty: as for :func:`read_parallel`.

    Raises:
        ValueError: both forms or neither given; and as :func:`read_parallel` / :func:`read_tsv`.

    Shape:
        output.pairs: N ``(source, target)`` strings.
    """
    if tsv is not None:
        if src is not None or tgt is not None:
            raise ValueError(f"give either --{split}-tsv or --{split}-src/--{split}-tgt, not both")
        return read_tsv(tsv, on_empty=on_empty)
    if src is not None and tgt is not None:
        return read_parallel(src, tgt, on_empty=on_empty)
    raise ValueError(f"give --{split}-src and --{split}-tgt (two line-aligned files) or --{split}-tsv")


def read_text(path: str | os.PathLike) -> str:
    """A whole UTF-8 text file as one string, line endings kept (a language model's training text).

    Raises:
        FileNotFoundError: not a file.
        ValueError: invalid UTF-8, with the byte offset.

    Shape:
        output: one string.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such text file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: invalid UTF-8 at byte {err.start}") from None
