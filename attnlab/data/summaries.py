"""Summarization data: ``{"document", "summary"}`` JSON lines, and splits of the generated "facts" task.

Shape:
    documents and summaries are strings; a split is a list of ``(document, summary)`` pairs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

from .text_tasks import SummaryExample, make_summarization_task

__all__ = ["FactsSplits", "facts_splits", "read_jsonl"]


def read_jsonl(path: str | os.PathLike, *, require_summary: bool = True) -> list[tuple[str, str | None]]:
    """``(document, summary)`` pairs from JSON lines ``{"document": ..., "summary": ...}``.

    Blank lines are skipped; other keys are ignored. Errors name the file and line.

    Shape:
        N lines → N pairs (summary None where absent and not required).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    pairs = []
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({err.msg})") from None
            if not isinstance(row, dict):
                raise ValueError(f'{path}:{lineno}: expected an object with "document" and "summary"')
            doc, summary = row.get("document"), row.get("summary")
            if not isinstance(doc, str) or not doc.strip():
                raise ValueError(f'{path}:{lineno}: "document" must be a non-empty string')
            if summary is None and not require_summary:
                pairs.append((doc, None))
                continue
            if not isinstance(summary, str) or not summary.strip():
                raise ValueError(f'{path}:{lineno}: "summary" must be a non-empty string')
            pairs.append((doc, summary))
    if not pairs:
        raise ValueError(f"{path}: no records")
    return pairs


class FactsSplits(NamedTuple):
    """Generated train/valid/test data of the "facts" task (different seeds: no shared names).

    Shape:
        train, valid: lists of ``(document, summary)``; test: list of :class:`SummaryExample`.
    """

    train: list[tuple[str, str]]
    valid: list[tuple[str, str]]
    test: list[SummaryExample]


def facts_splits(n_train: int, *, seed: int = 0, n_valid: int = 200, n_test: int = 200, **task) -> FactsSplits:
    """Splits of :func:`attnlab.data.text_tasks.make_summarization_task`; ``task`` passes
    ``max_facts``/``max_fillers`` on.

    Shape:
        n_train, n_valid, n_test examples.
    """
    train_ex, valid_ex, test_ex = (
        make_summarization_task(n, seed=3 * seed + k, **task) for k, n in enumerate((n_train, n_valid, n_test))
    )
    return FactsSplits(
        [(e.document, e.summary) for e in train_ex], [(e.document, e.summary) for e in valid_ex], test_ex
    )
