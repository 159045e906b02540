"""Settings for every test."""

import pytest

from attnlab import openmp


@pytest.fixture(autouse=True)
def _fixed_training_threads(monkeypatch):
    """Training adapts its thread count to the machine's load (attnlab.openmp.ThreadGovernor) unless
    the count is fixed. Tests compare runs bit for bit (an exact resume against an uninterrupted
    run), and the last bits of a sum can depend on the thread count, so in-process training keeps
    PyTorch's count here; tests of the governor switch it back on themselves."""
    monkeypatch.setattr(openmp.ThreadGovernor, "available", staticmethod(lambda: False))
