"""What the tests that run the explorer for real share: a uvicorn server on a free loopback port, in
a thread, and a browser page's errors (the browser tests assert there are none)."""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn


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
