"""A test's own engine lines (attnlab.accel.rules.Lines) for the whole test, undone after it."""

import dataclasses

from attnlab import accel
from attnlab.accel import rules


def pin_lines(monkeypatch, **changes: int) -> rules.Lines:
    """Make the table in force (``rules.lines()``, in every thread) the defaults with ``changes``
    until the test ends: the tests run on the defaults (ATTNLAB_CALIBRATE=0, tests/conftest.py),
    here moved on purpose. Every line of attnlab reads the table through ``rules.lines``."""
    table = dataclasses.replace(rules.DEFAULTS, **changes)

    def pinned(measured: bool = True) -> rules.Lines:
        return table

    monkeypatch.setattr(rules, "lines", pinned)
    monkeypatch.setattr(accel, "lines", pinned)
    return table
