"""Settings for every test, and the browser tests' shared fixtures.

The browser tests' ``lesson_site`` and ``base_url`` (the lesson under test: the explorer on a
loopback port, or the static build with ``ATTNLAB_TEST_SITE=static``), ``browser`` (Debian's Chromium
through Playwright) and ``lang`` (each test in Japanese and English) live in ``lesson_browser``
and are offered here once, for every browser test module; nothing is started unless a test asks for
them, and a module may define its own (``test_web_browser.py``'s explorer serves a run folder).
"""

import os

import pytest
from lesson_browser import (  # noqa: F401
    STATIC_SITE,
    base_url_fixture,
    browser_fixture,
    lang_fixture,
    lesson_app_fixture,
    lesson_sections_fixture,
    lesson_site_fixture,
)

from attnlab import openmp

# No measurement decides anything in a test (processes the tests start inherit this): the engine's
# lines are the defaults (attnlab.accel.rules.DEFAULTS) and precision "auto" is fp32, in inference
# and in training, so results do not depend on the machine's load. The tests of the calibration
# and of the probes turn it back on with a fake clock or injected timings.
os.environ["ATTNLAB_CALIBRATE"] = "0"

# Under pytest-xdist (`make test`: one worker per core) each worker takes its share of the cores,
# so that two workers' thread pools do not fight over them; tests of the thread count set it.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))


@pytest.fixture(autouse=True)
def _fixed_training_threads(monkeypatch):
    """Training adapts its thread count to the machine's load (attnlab.openmp.ThreadGovernor) unless
    the count is fixed. Tests compare runs bit for bit (an exact resume against an uninterrupted
    run), and the last bits of a sum can depend on the thread count, so in-process training keeps
    PyTorch's count here; tests of the governor switch it back on themselves."""
    monkeypatch.setattr(openmp.ThreadGovernor, "available", staticmethod(lambda: False))


def pytest_collection_modifyitems(config, items):
    """``ATTNLAB_TEST_SITE=static`` (the lesson's browser tests against the static build,
    ``make test-site``): a test marked ``explorer_only(reason)`` is about the explorer's server itself
    and skips, saying why; a browser test that does not open the lesson through the shared
    ``lesson_site`` fixture (the engine's parity pages and the static build's own tests serve their
    folders themselves; the explorer's tools) would run exactly as in the ordinary run and is
    deselected."""
    if not STATIC_SITE:
        return
    other = [i for i in items if i.get_closest_marker("browser") and "lesson_site" not in i.fixturenames]
    if other:
        config.hook.pytest_deselected(items=other)
        gone = {id(i) for i in other}
        items[:] = [i for i in items if id(i) not in gone]
    for item in items:
        marker = item.get_closest_marker("explorer_only")
        if marker is not None:
            reason = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "")
            if not reason:
                raise pytest.UsageError(f"{item.nodeid}: explorer_only needs a reason")
            item.add_marker(pytest.mark.skip(reason=f"explorer only: {reason}"))
