"""A test's own engine lines (attnlab.accel.rules.Lines) for the whole test, undone after it."""

import contextvars
import dataclasses

from attnlab.accel import rules


def pin_lines(monkeypatch, **changes: int) -> rules.Lines:
    """Make the table in force (rules.lines()) the defaults with ``changes`` until the test ends:
    the tests run on the defaults (ATTNLAB_CALIBRATE=0, tests/conftest.py), here moved on purpose."""
    table = dataclasses.replace(rules.DEFAULTS, **changes)
    monkeypatch.setattr(rules, "_forced", contextvars.ContextVar("attnlab_lines_test", default=table))
    return table
