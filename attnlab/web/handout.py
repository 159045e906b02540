"""The lesson on paper: ``attnlab lesson handout`` prints sections of the lesson into one PDF.

The explorer runs inside this process, on a free loopback port (uvicorn in a thread). Chromium,
driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: no port, no extra
package), opens each section's page with ``?print=1`` (``&teacher=1`` for the teacher's version),
waits until the page is drawn and every widget has shown its first answer (or its error), and
prints it through the print stylesheet (``static/lesson/print.css``) with
``Page.printToPDF``. pypdf joins the sections' PDFs, each starting on a new page, into one file.

The student's version has the text, the widgets' figures as they first appear, and the checks
with their choices and lines to write on; the teacher's version adds each answer, its explanation
and hint, and the section's teacher notes. Without Chromium the same pages print from any
browser: open ``/lesson/N?print=1`` (or ``?teacher=1``) and use its Print command.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import io
import json
import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "HandoutReport",
    "SectionPrint",
    "find_chromium",
    "make_handout",
    "parse_sections",
    "section_footer",
    "section_url",
]

#: The width the page is laid out at on screen before printing, in CSS px; with PRINT_SCALE it is
#: about the width of an A4 page's text (186 mm at 96 px per inch is 703 px, over 0.8).
VIEWPORT = (880, 1240)
PRINT_SCALE = 0.8
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--mute-audio",
    "--remote-debugging-pipe",
)
NO_CHROMIUM = (
    "attnlab lesson handout prints with Chromium, which was not found: install it (Debian and Ubuntu: "
    "apt install chromium) or name it with --chromium; or print from a browser: run attnlab explore, "
    "open /lesson/N?print=1 (?print=1&teacher=1 for the answer key) and use the browser's Print"
)

# Whether a section's page is ready to print, run in the page: "wait" with what is missing, or
# "ready" with the widgets that show an error instead of a figure (printed as they are).
_READY = """(() => {
  if (!document.documentElement.classList.contains("fonts-ready")) return {state: "wait", what: "fonts"};
  const article = document.getElementById("section");
  if (!article || article.hasAttribute("aria-busy")) return {state: "wait", what: "the section"};
  const broken = article.querySelector(":scope > .error[role=alert]");
  if (broken) return {state: "failed", what: broken.textContent};
  const failed = [];
  for (const w of article.querySelectorAll(".widget")) {
    const error = w.querySelector(".error:not(.hidden)");
    if (error) { failed.push(w.dataset.widget + ": " + error.textContent.trim()); continue; }
    if (Array.from(w.querySelectorAll(".widget-out")).some((n) => n.dataset.seq === "0"))
      return {state: "wait", what: "widget " + w.dataset.widget};
  }
  return {state: "ready", failed, title: document.title, pages: null};
})()"""


# --------------------------------------------------------------------------------------------
# What to print.
# --------------------------------------------------------------------------------------------


def parse_sections(spec: str, available: Sequence[int]) -> list[int]:
    """The sections named by ``spec`` ("1-9", "3", "1,4-6"), in the lesson's order, each once;
    ``ValueError`` naming what is wrong otherwise."""
    have = sorted(available)
    span = f"{have[0]}–{have[-1]}" if have else "none"
    chosen: set[int] = set()
    parts = [p.strip() for p in spec.split(",")]
    if not spec.strip() or any(not p for p in parts):
        raise ValueError(f"--sections {spec!r}: name sections as numbers and ranges, e.g. 1-9, 3 or 1,4-6")
    for part in parts:
        m = re.fullmatch(r"(\d+)(?:\s*[-–]\s*(\d+))?", part)
        if not m:
            raise ValueError(f"--sections {spec!r}: {part!r} is not a section number or a range such as 1-9")
        lo, hi = int(m[1]), int(m[2] or m[1])
        if lo > hi:
            raise ValueError(f"--sections {spec!r}: the range {part} runs backwards")
        missing = [n for n in range(lo, hi + 1) if n not in have]
        if missing:
            raise ValueError(f"--sections {spec!r}: the lesson has sections {span}, not {missing[0]}")
        chosen.update(range(lo, hi + 1))
    return [n for n in have if n in chosen]


def section_url(base: str, n: int, lang: str, teacher: bool) -> str:
    """The address of section ``n`` as it prints: ?print=1 keeps a browser's saved answers off it."""
    return f"{base}/lesson/{n}?lang={lang}&print=1" + ("&teacher=1" if teacher else "")


def find_chromium(explicit: str | None = None) -> str:
    """The Chromium (or Chrome) program: ``explicit`` if given, else the first of CHROMIUM_NAMES on
    PATH; ``FileNotFoundError`` with what to do otherwise."""
    for name in (explicit,) if explicit else CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise FileNotFoundError(NO_CHROMIUM)


# --------------------------------------------------------------------------------------------
# Chromium over the DevTools protocol, on a pipe.
# --------------------------------------------------------------------------------------------


class DevToolsError(RuntimeError):
    """Chromium answered a command with an error, stopped, or did not answer in time."""


class DevTools:
    """One headless Chromium, spoken to over ``--remote-debugging-pipe``: commands are JSON
    messages ending in a NUL byte, written to the browser's fd 3; answers and events come back the
    same way on its fd 4. Usable as a context manager (the browser stops at the end)."""

    def __init__(self, chromium: str, *, timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self._next = 0
        self._answers: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._profile = tempfile.TemporaryDirectory(prefix="attnlab-handout-")
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        # The browser must find the pipes at fds 3 and 4. A tiny Python trampoline moves them there
        # (copies at 10 and above first, so that moving one never overwrites the other) and
        # execs Chromium: no preexec_fn, which is unsafe with the server's thread running.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_r, from_browser_w)]
        trampoline = (
            "import os, sys; r, w = int(sys.argv[1]), int(sys.argv[2]); os.dup2(r, 3); os.dup2(w, 4); "
            "os.close(r); os.close(w); os.execv(sys.argv[3], sys.argv[3:])"
        )
        args = [*CHROMIUM_ARGS, f"--user-data-dir={self._profile.name}", "about:blank"]
        self._log = tempfile.TemporaryFile()
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", trampoline, str(high[0]), str(high[1]), chromium, *args],
                pass_fds=high,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._log,
            )
        finally:
            for fd in (*high, to_browser_r, from_browser_w):
                os.close(fd)
        self._send = os.fdopen(to_browser_w, "wb", buffering=0)
        self._receive = os.fdopen(from_browser_r, "rb", buffering=0)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        pending = b""
        while True:
            chunk = self._receive.read(1 << 16)
            if not chunk:
                self._answers.put(None)  # the browser is gone
                return
            pending += chunk
            *messages, pending = pending.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                if "id" in message:  # events (no id) are not needed here
                    self._answers.put(message)

    def call(self, method: str, params: dict | None = None, *, session: str | None = None, timeout_s=None) -> dict:
        """Send one command and wait for its answer (its ``result``)."""
        self._next += 1
        ident = self._next
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        try:
            self._send.write(json.dumps(message).encode() + b"\0")
        except (BrokenPipeError, OSError):
            raise DevToolsError(f"Chromium stopped: {self.log_tail()}") from None
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            try:
                answer = self._answers.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise DevToolsError(f"Chromium did not answer {method} in time") from None
            if answer is None:
                raise DevToolsError(f"Chromium stopped: {self.log_tail()}")
            if answer.get("id") != ident:
                continue  # the answer to a command given up on
            if "error" in answer:
                raise DevToolsError(f"{method}: {answer['error'].get('message', answer['error'])}")
            return answer.get("result", {})

    def log_tail(self) -> str:
        self._log.seek(0)
        lines = [line for line in self._log.read().decode(errors="replace").splitlines() if line.strip()]
        return lines[-1].strip() if lines else f"exit code {self._process.poll()}"

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call("Browser.close", timeout_s=5)
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        for stream in (self._send, self._receive, self._log):
            with contextlib.suppress(OSError):
                stream.close()
        self._profile.cleanup()

    def __enter__(self) -> DevTools:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class SectionPrint:
    """One section printed: its number, title, pages, the widgets that showed an error, seconds."""

    n: int
    title: str
    pages: int
    failed: list[str] = field(default_factory=list)
    seconds: float = 0.0


def print_page(devtools: DevTools, url: str, *, footer: str, timeout_s: float) -> tuple[bytes, dict]:
    """``url`` printed to PDF once the page is ready (see _READY); returns the PDF and _READY's answer."""
    target = devtools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    try:
        session = devtools.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        width, height = VIEWPORT
        devtools.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        devtools.call("Page.enable", session=session)
        devtools.call("Page.navigate", {"url": url}, session=session)
        deadline = time.monotonic() + timeout_s
        state: dict = {}
        while time.monotonic() < deadline:
            answer = devtools.call("Runtime.evaluate", {"expression": _READY, "returnByValue": True}, session=session)
            state = answer.get("result", {}).get("value") or {"state": "wait", "what": "the page"}
            if state["state"] == "failed":
                raise ValueError(f"{url}: the page shows an error: {state['what']}")
            if state["state"] == "ready":
                break
            time.sleep(0.25)
        else:
            raise TimeoutError(f"{url}: still waiting for {state.get('what', 'the page')} after {timeout_s:.0f} s")
        time.sleep(0.3)  # charts drawn in the frame after their numbers arrive
        pdf = devtools.call(
            "Page.printToPDF",
            {
                "printBackground": True,
                "preferCSSPageSize": True,
                "scale": PRINT_SCALE,
                "displayHeaderFooter": True,
                "headerTemplate": "<span></span>",
                "footerTemplate": footer,
            },
            session=session,
            timeout_s=120,
        )
        return base64.b64decode(pdf["data"]), state
    finally:
        with contextlib.suppress(DevToolsError):
            devtools.call("Target.closeTarget", {"targetId": target})


def section_footer(n: int) -> str:
    """The page footer (Chromium's template: no page fonts there, so ASCII only): the section and
    the page within it, for :func:`print_page`'s ``footer``.

    Shape:
        no tensors.
    """
    return (
        '<div style="font: 7pt sans-serif; color: #555; width: 100%; margin: 0 12mm; display: flex; '
        f'justify-content: space-between"><span>attnlab lesson &#167;{n}</span>'
        '<span><span class="pageNumber"></span> / <span class="totalPages"></span></span></div>'
    )


# --------------------------------------------------------------------------------------------
# The explorer in this process, and the whole handout.
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def serving(app, *, timeout_s: float = 30.0) -> Iterator[str]:
    """``app`` served by uvicorn on a free loopback port, in a thread; yields its base address."""
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise OSError(f"the explorer did not start on 127.0.0.1:{port}")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@dataclass
class HandoutReport:
    path: Path
    lang: str
    teacher: bool
    sections: list[SectionPrint]

    @property
    def pages(self) -> int:
        return sum(s.pages for s in self.sections)


def make_handout(
    out: Path,
    *,
    lang: Literal["ja", "en"] = "ja",
    teacher: bool = False,
    sections: str = "1-9",
    chromium: str | None = None,
    timeout_s: float = 180.0,
    progress: Callable[[str], None] | None = None,
) -> HandoutReport:
    """Print ``sections`` of the lesson in ``lang`` into the PDF ``out`` (the teacher's version
    with ``teacher``); ``progress`` gets one line per section. ``ValueError`` for bad sections,
    ``FileNotFoundError`` without Chromium, ``TimeoutError`` when a page never gets ready."""
    from .lesson import default_sections

    available = default_sections()
    chosen = parse_sections(sections, list(available))
    program = find_chromium(chromium)
    try:
        from pypdf import PdfReader, PdfWriter
    except ImportError as err:
        raise ImportError("attnlab lesson handout needs pypdf: pip install 'attnlab[web]'", name=err.name) from None
    from .app import create_app

    out = Path(out)
    if out.is_dir():
        raise IsADirectoryError(f"--out {out}: a folder of that name exists; name the PDF to write")
    out.parent.mkdir(parents=True, exist_ok=True)
    writer = PdfWriter()
    done: list[SectionPrint] = []
    with serving(create_app()) as base, DevTools(program) as devtools:
        for n in chosen:
            title = getattr(available[n].title, lang)
            start = time.monotonic()
            url = section_url(base, n, lang, teacher)
            pdf, state = print_page(devtools, url, footer=section_footer(n), timeout_s=timeout_s)
            reader = PdfReader(io.BytesIO(pdf))
            writer.append(reader)
            printed = SectionPrint(n, title, len(reader.pages), list(state["failed"]), time.monotonic() - start)
            done.append(printed)
            if progress:
                failed = f"; shown with an error: {', '.join(printed.failed)}" if printed.failed else ""
                progress(f"§{n} {title}: {printed.pages} pages ({printed.seconds:.1f} s){failed}")
    kind = "teacher's version" if teacher else "handout"
    writer.add_metadata({"/Title": f"attnlab lesson, {kind} ({lang}), sections {sections}", "/Creator": "attnlab"})
    with open(out, "wb") as f:
        writer.write(f)
    return HandoutReport(out, lang, teacher, done)
