"""What the tests that run the explorer or the page's engine for real share: a uvicorn server on a
free loopback port, in a thread; a browser page's errors (the browser tests assert there are none);
and the engine's static folder (:func:`attnlab.web.site.write_engine_folder`) served by Python's
``http.server`` and opened in Chromium with the network cut once the page has loaded what it needs."""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(app) -> Iterator[int]:
    """``app`` served by uvicorn on a free loopback port, in a thread; yields the port."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            pytest.fail("the explorer server did not start")
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


def page_errors(pg) -> list[str]:
    """The list the page's uncaught errors and console errors are appended to from now on."""
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    # A 4xx the test provokes is logged by the browser as a failed resource; a 5xx never may be.
    pg.on(
        "console",
        lambda m: errors.append(m.text) if m.type == "error" and not re.search(r"status of 4\d\d", m.text) else None,
    )
    return errors


def ensure_runtime() -> None:
    """node_modules' onnxruntime-web, installed by ``npm ci`` if it is missing; skip without npm."""
    # attnlab.web.site is imported where it is used: every test session imports this module
    # (tests/conftest.py through lesson_browser), most without a browser test.
    from attnlab.web import site

    try:
        site.node_modules_runtime()
        return
    except FileNotFoundError:
        pass
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not on PATH, so node_modules (onnxruntime-web) cannot be installed: the engine cannot run")
    done = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--silent"], cwd=REPO, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"npm ci failed:\n{done.stderr[-2000:]}"
    site.node_modules_runtime()


def engine_folder(tmp_path_factory, models) -> Path:
    """The static folder :func:`attnlab.web.site.write_engine_folder` writes with ``models`` (the
    engine, onnxruntime-web's WASM runtime, the models' exports), in a fresh tmp folder; the test
    skips without the onnx package or npm."""
    pytest.importorskip("onnx", reason="the ONNX export needs the onnx package: pip install 'attnlab[site]'")
    ensure_runtime()
    from attnlab.web import site

    return site.write_engine_folder(tmp_path_factory.mktemp("site") / "site", models)


@dataclass
class ServedPage:
    """A page of a served static folder: the Playwright page, its errors (:func:`page_errors`), every
    URL it requested, and the folder's base URL (``http://127.0.0.1:PORT/``)."""

    page: object
    errors: list[str]
    requests: list[str]
    base: str


@contextlib.contextmanager
def offline_page(
    browser, folder: Path, path: str, load: Callable[[object, str], object] | None = None, *, headers=None
) -> Iterator[ServedPage]:
    """``folder`` served by Python's ``http.server`` (:func:`attnlab.web.site.serve_folder`, with
    ``headers`` added to every answer) and ``base + path`` opened in a fresh context of ``browser``,
    its errors and requests collected from the start; ``load(page, base)`` runs (what the page
    must fetch: the runtime, the models), then the network is cut. The context closes on exit."""
    from attnlab.web import site

    with site.serve_folder(folder, headers=headers) as base:
        context = browser.new_context()
        try:
            page = context.new_page()
            served = ServedPage(page, page_errors(page), [], base)
            page.on("request", lambda r: served.requests.append(r.url))
            page.goto(base + path)
            if load is not None:
                load(page, base)
            context.set_offline(True)
            yield served
        finally:
            context.close()
