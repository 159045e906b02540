"""Settings for every test, and the browser tests' shared fixtures.

The browser tests' ``base_url`` (the explorer on a loopback port), ``browser`` (Debian's Chromium
through Playwright) and ``lang`` (each test in Japanese and English) live in ``lesson_browser``
and are offered here once, for every browser test module; nothing is started unless a test asks for
them, and a module may define its own (``test_web_browser.py``'s explorer serves a run folder).
"""

import pytest
from lesson_browser import base_url_fixture, browser_fixture, lang_fixture  # noqa: F401

from attnlab import openmp


@pytest.fixture(autouse=True)
def _fixed_training_threads(monkeypatch):
    """Training adapts its thread count to the machine's load (attnlab.openmp.ThreadGovernor) unless
    the count is fixed. Tests compare runs bit for bit (an exact resume against an uninterrupted
    run), and the last bits of a sum can depend on the thread count, so in-process training keeps
    PyTorch's count here; tests of the governor switch it back on themselves."""
    monkeypatch.setattr(openmp.ThreadGovernor, "available", staticmethod(lambda: False))
