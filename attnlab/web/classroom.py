"""Serving a class from one laptop: the addresses students type, their QR code, and answers cached.

``attnlab explore --classroom`` listens on every interface, prints the address of each of this
machine's network interfaces (the ones students on the same network can type) and shows the first
as a QR code on the lesson's index. Everything the explorer serves is read-only, and the Host check
stays on: the addresses it prints are the names it answers to.

Results that do not depend on who asks (the default sentence of each widget, the §2 length table,
the §8 cost curves, and every other answer that is a function of the request alone) are computed
once and kept by :class:`ResponseCache`, so forty students opening the same page cost one
computation.
"""

from __future__ import annotations

import hashlib
import io
import socket
import struct
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from .site import SITE_DATA, SITE_MODELS

__all__ = ["WARM_UP", "warm_up", "Classroom", "lan_addresses", "qr_svg", "AnswerCache", "ResponseCache", "CACHED_PATHS"]

_SIOCGIFADDR = 0x8915  # Linux: an interface's IPv4 address


def lan_addresses() -> list[str]:
    """The IPv4 addresses of this machine's network interfaces, loopback left out.

    Read from the interfaces themselves (Linux ``SIOCGIFADDR``), so nothing is sent anywhere;
    elsewhere, the addresses the host name resolves to.
    """
    found: list[str] = []
    try:
        import fcntl  # Unix only

        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for _, name in socket.if_nameindex():
                packed = struct.pack("256s", name.encode()[:15])
                try:
                    answer = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, packed)
                except OSError:
                    continue  # an interface without an IPv4 address
                found.append(socket.inet_ntoa(answer[20:24]))
    except (OSError, AttributeError, ImportError):
        pass
    if not found:
        try:
            found = [info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)]
        except OSError:
            found = []
    unique = list(dict.fromkeys(a for a in found if not a.startswith("127.")))
    return unique


def qr_svg(text: str, scale: int = 6) -> str:
    """``text`` as a QR code (error correction M, a 4-module quiet zone), as an SVG document."""
    import segno

    code = segno.make(text, error="m", micro=False)
    buffer = io.BytesIO()
    code.save(buffer, kind="svg", scale=scale, border=4, xmldecl=False, svgns=True, title=text)
    return buffer.getvalue().decode("utf-8")


@dataclass(frozen=True)
class Classroom:
    """The explorer serving a class: the addresses printed for the students."""

    port: int  # the port the explorer listens on
    addresses: tuple[str, ...] = field(default_factory=tuple)  # this machine's LAN addresses

    @classmethod
    def serving(cls, host: str | None, port: int) -> tuple[str, Classroom]:
        """The address to listen on for a class and the class itself: every interface when no
        ``host`` is given (``None``), else ``host`` as given (a ``--host`` always wins, the
        loopback too: a benchmark serves a class on 127.0.0.1 alone); and the addresses students
        type: this machine's LAN addresses when listening on every interface, else ``host``."""
        host = "0.0.0.0" if host is None else host
        addresses = lan_addresses() if host in ("0.0.0.0", "::") else [host]
        return host, cls(port=port, addresses=tuple(addresses))

    @property
    def urls(self) -> list[str]:
        """The addresses students type, the first one the QR code shows."""
        return [f"http://{a}:{self.port}/" for a in self.addresses]


#: POST endpoints whose answer is a function of the request body alone (models fixed, no clock,
#: no sampling), so one answer serves every student who sends the same body.
CACHED_PATHS = frozenset(
    {
        "/api/playground",
        "/api/mask",
    }
)


class AnswerCache:
    """Answers kept by key, least recently used dropped first beyond ``max_bytes`` (thread-safe)."""

    def __init__(self, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[bytes, tuple[list, bytes]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: bytes) -> tuple[list, bytes] | None:
        with self._lock:
            hit = self._entries.get(key)
            if hit is None:
                self.misses += 1
            else:
                self._entries.move_to_end(key)
                self.hits += 1
            return hit

    def put(self, key: bytes, headers: list, payload: bytes) -> None:
        size = len(payload) + 64
        if size > self.max_bytes // 4:
            return  # one huge answer must not empty the cache
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = (headers, payload)
            self._bytes += size
            while self._bytes > self.max_bytes and self._entries:
                _, (_, old) = self._entries.popitem(last=False)
                self._bytes -= len(old) + 64

    def clear(self) -> None:
        """Forget every answer (a benchmark that times the computation itself)."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)


class ResponseCache:
    """ASGI middleware: the 200 answers of :data:`CACHED_PATHS`, kept in ``cache`` by (path, body).
    Anything else passes through untouched."""

    def __init__(self, app, cache: AnswerCache, paths: frozenset[str] = CACHED_PATHS) -> None:
        self.app, self.cache, self.paths = app, cache, paths

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in self.paths:
            await self.app(scope, receive, send)
            return
        chunks = []
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        key = hashlib.sha256(scope["path"].encode() + b"\0" + body).digest()
        hit = self.cache.get(key)
        if hit is not None:
            headers, payload = hit
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": payload})
            return

        sent = False

        async def replay():
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        start: dict = {}
        parts: list[bytes] = []

        async def keep(message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                parts.append(message.get("body", b""))
                if not message.get("more_body", False) and start.get("status") == 200:
                    self.cache.put(key, list(start.get("headers", [])), b"".join(parts))
            await send(message)

        await self.app(scope, replay, keep)


#: What a class asks first: every widget's default request. :func:`warm_up` sends them once when
#: the explorer starts serving a class, so the shipped models are loaded and the slow, shared
#: results (the §2 length table, the §1 timings, the §8 cost curves) are computed before the
#: first student arrives.
WARM_UP = (
    # Every widget computes in the page: the explorer exports each in-page model and writes each data
    # file (§1's times, §2's test pairs and BLEU, §8's pooling sentences) on its first ask, so ask
    # for them all before the class does.
    *(("GET", f"/static/models/{name}/meta.json") for name in SITE_MODELS),
    *(("GET", f"/static/data/{name}") for name in SITE_DATA),
)


def warm_up(base_url: str, timeout_s: float = 120.0) -> dict[str, int]:
    """Send :data:`WARM_UP` to the explorer at ``base_url`` (its own loopback address), once the
    server answers; returns each path's status (a model that is not installed answers 503)."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(base_url + "/static/data/lesson/sections.json", timeout=5).close()
            break
        except (urllib.error.URLError, OSError):
            if time.monotonic() > deadline:
                return {}
            time.sleep(0.2)
    statuses = {}
    for method, path in WARM_UP:
        data = b"{}" if method == "POST" else None
        request = urllib.request.Request(base_url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as answer:
                statuses[path] = answer.status
        except urllib.error.HTTPError as err:
            statuses[path] = err.code
        except (urllib.error.URLError, OSError):
            statuses[path] = 0
    return statuses
