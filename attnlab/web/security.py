"""The explorer's guards: what a request must pass before a handler sees it, and the limits on work.

The explorer is a local server that a browser talks to, often on a classroom network. Each guard
here answers one way that can go wrong (no behaviour lives here beyond refusing and annotating;
the handlers are in :mod:`attnlab.web.app`):

- :class:`AllowedHosts` and :class:`HostCheck` (400 to an unknown ``Host``): **DNS rebinding**, a
  page on another site that re-points its own domain name at this machine and so reads the
  explorer's answers from the learner's browser. :func:`check_address` and :func:`check_port`
  refuse an unusable address, port or allowed name before the server starts.
- :class:`SecurityHeaders` (:data:`SECURITY_HEADERS`, with :data:`CONTENT_SECURITY_POLICY`):
  **injected script and style** (only the explorer's own files run, nothing inline or from another
  origin), **clickjacking** (no framing), **MIME sniffing** (a JSON answer is never run as a page),
  **referrer leaks** and **cross-origin embedding or scripting** of the explorer's window and answers.
- :class:`BodyLimit` (413, 408): **memory exhaustion** by an oversized request body (declared, or
  sent in chunks without a length) and **slow-body clients** that dribble a body byte by byte to
  hold a request open for ever.
- :class:`WorkGate` (429 with ``Retry-After``): **overload**: a class asking for more model runs
  than the machine can do at once waits in a bounded queue for a bounded time, then is told "busy"
  (the pages retry), instead of piling up work until every answer is late or the process dies.
- :class:`GuardedFastAPI`: places the Host check and the headers outside Starlette's own error
  handler, so **no response at all** (an unexpected 500 included) leaves without them.
- :class:`Limits`: the numbers these guards enforce (and the longest text ``/api/run`` takes), checked
  when the explorer starts.
"""

from __future__ import annotations

import asyncio
import ipaddress
import math
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "LOOPBACK_NAMES",
    "SECURITY_HEADERS",
    "WILDCARD_ADDRESSES",
    "AllowedHosts",
    "BodyLimit",
    "GuardedFastAPI",
    "HostCheck",
    "Limits",
    "SecurityHeaders",
    "WorkGate",
    "check_address",
    "check_port",
]


@dataclass(frozen=True)
class Limits:
    """How much work one explorer process accepts (the API answers 413/422/429 beyond these)."""

    max_text_chars: int = 400  # longest sentence /api/run accepts (characters)
    max_body_bytes: int = 64 * 1024  # largest request body of any POST
    # Model runs in progress at once. Two: the lesson's widgets are short and partly single-threaded,
    # so a class is served faster with two; one translator's long runs are faster one at a time
    # (--max-concurrent 1; docs/measured.md has both).
    max_concurrent: int = 2
    max_waiting: int = 64  # model requests queued behind those; more are refused with 429
    wait_timeout_s: float = 30.0  # a queued request gives up with 429 after waiting this long
    body_timeout_s: float = 10.0  # a request body not fully received by then gets 408 (slow-body clients)

    def __post_init__(self) -> None:
        # Zero slots or a zero-length text would start a server that refuses everything; catch
        # such settings before anything starts, with the name of the limit.
        for name, least in (("max_text_chars", 1), ("max_body_bytes", 1), ("max_concurrent", 1), ("max_waiting", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be a whole number of at least {least}, got {value!r}")
        for name in ("wait_timeout_s", "body_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")


def check_port(port: int) -> None:
    """Raise ``ValueError`` unless ``port`` is a TCP port one can listen on (1…65535)."""
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"port must be a whole number from 1 to 65535, got {port!r}")


# --------------------------------------------------------------------------------------------
# Which Host names are served (DNS rebinding) and the headers every response carries.
# --------------------------------------------------------------------------------------------

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
WILDCARD_ADDRESSES = ("0.0.0.0", "::")


def _host_name(value: str) -> str | None:
    """The name in a ``Host`` header (``name``, ``name:port``, ``[v6]``, ``[v6]:port``), lower-case,
    without the port, brackets or a trailing dot; ``None`` when it is malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not (rest[:1] == ":" and rest[1:].isdigit())):
            return None
    elif value.count(":") == 1:
        name, _, port = value.partition(":")
        if not port.isdigit():
            return None
    else:
        name = value  # no port, or a bare IPv6 address (which a browser would bracket)
    name = name.removesuffix(".")
    if not name or any(c.isspace() or c in "/\\@?#[]" for c in name):
        return None
    return name


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class AllowedHosts:
    """The ``Host`` header values the explorer answers, from the address it is bound to.

    A DNS-rebinding page (Jackson et al. 2007, "Protecting browsers from DNS rebinding attacks")
    reaches a local server under the attacker's own domain name, and the browser sends that name
    as ``Host``. So the explorer answers only names it knows: the loopback names, the bound
    address, and the names given in ``allow_hosts`` (``"*"`` switches the check off, e.g. behind a
    reverse proxy that checks names itself). When bound to every interface (``0.0.0.0`` or ``::``)
    the machine's own host name and any IP address are accepted as well: a browser that was sent
    to an address shows that address as the page's origin, which no other site can share.
    """

    def __init__(self, host: str = "127.0.0.1", allow_hosts: Sequence[str] = ()) -> None:
        if not isinstance(host, str) or _host_name(host) is None:
            raise ValueError(f"host must be an address or a host name such as 127.0.0.1, got {host!r}")
        if isinstance(allow_hosts, str):
            allow_hosts = [allow_hosts]  # one name, not its characters
        self.any_host = "*" in allow_hosts
        extra = []
        for name in allow_hosts:
            if name == "*":
                continue
            parsed = _host_name(name) if isinstance(name, str) and "://" not in name else None
            if parsed is None:
                raise ValueError(
                    f"allowed host must be a host name such as explorer.lan (without http:// or a path), got {name!r}"
                )
            extra.append(parsed)
        bound = _host_name(host)
        self.any_ip = bound in WILDCARD_ADDRESSES
        names = [*LOOPBACK_NAMES, bound, *extra]
        if self.any_ip:
            names += [socket.gethostname().lower(), socket.getfqdn().lower()]
        self.names = frozenset(names)

    def accepts(self, header: str | None) -> bool:
        """Whether a request with this ``Host`` header value is served (``None``: no header)."""
        if self.any_host:
            return True
        name = None if header is None else _host_name(header)
        if name is None:
            return False
        return name in self.names or (self.any_ip and _is_ip(name))

    def describe(self) -> str:
        shown = ", ".join(sorted(self.names))
        return shown + (", any IP address" if self.any_ip else "")


def check_address(host: str, port: int, allow_hosts: Sequence[str] = ()) -> None:
    """Raise ``ValueError`` for an unusable listening address or allowed host name, before serving."""
    check_port(port)
    AllowedHosts(host, allow_hosts)


# No inline script or style (the pages load theirs from /static), nothing from other origins, and
# no framing (clickjacking); old browsers get the same through X-Frame-Options. 'wasm-unsafe-eval'
# lets the page compile WebAssembly (the in-page models' runtime) and nothing else: JavaScript's
# eval and new Function stay forbidden (CSP Level 3).
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; img-src 'self'; font-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


class SecurityHeaders:
    """ASGI middleware: add :data:`SECURITY_HEADERS` to every response that does not set them."""

    def __init__(self, app) -> None:
        self.app = app
        self.headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in SECURITY_HEADERS.items()]

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                present = {k.lower() for k, _ in headers}
                headers += [(k, v) for k, v in self.headers if k not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class HostCheck:
    """ASGI middleware: answer 400 to a request whose ``Host`` is not in :class:`AllowedHosts`."""

    def __init__(self, app, hosts: AllowedHosts) -> None:
        self.app, self.hosts = app, hosts

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        raw = dict(scope.get("headers") or []).get(b"host")
        header = None if raw is None else raw.decode("latin-1")
        if self.hosts.accepts(header):
            return await self.app(scope, receive, send)
        shown = "no Host header" if header is None else f"Host {header[:100]!r}"
        detail = (
            f"{shown} is not served here: this explorer answers {self.hosts.describe()} "
            "(start it with --allow-host NAME to add a name)"
        )
        response = JSONResponse({"detail": detail}, status_code=400, headers={"Connection": "close"})
        await response(scope, receive, send)


# --------------------------------------------------------------------------------------------
# Bounded model work and request bodies.
# --------------------------------------------------------------------------------------------


class WorkGate:
    """At most ``slots`` model runs at once, at most ``max_waiting`` queued; the rest get 429.

    429 Too Many Requests with ``Retry-After``: the request was fine and the class is busy, so the
    page says so in its language and tries again (``common.js``), never a broken widget or a 5xx.
    """

    def __init__(self, slots: int, max_waiting: int, timeout_s: float) -> None:
        self.slots, self.max_waiting, self.timeout_s = slots, max_waiting, timeout_s
        self.waiting = 0
        self._sem: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _semaphore(self) -> asyncio.Semaphore:
        # One semaphore per event loop: the test client may run requests on a fresh loop.
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._sem, self._loop = asyncio.Semaphore(self.slots), loop
        return self._sem

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        sem = self._semaphore()
        busy = {"Retry-After": "1"}
        if not sem.locked():
            await sem.acquire()  # a slot is free: no waiting
        elif self.waiting >= self.max_waiting:
            raise HTTPException(
                429, f"busy: {self.waiting} model requests are already waiting; try again shortly", headers=busy
            )
        else:
            self.waiting += 1
            try:
                await asyncio.wait_for(sem.acquire(), self.timeout_s)
            except asyncio.TimeoutError:
                raise HTTPException(
                    429, f"busy: no model slot became free within {self.timeout_s:g} s", headers=busy
                ) from None
            finally:
                self.waiting -= 1
        try:
            yield
        finally:
            sem.release()


class BodyLimit:
    """ASGI middleware: refuse request bodies over ``max_bytes`` with 413 before parsing them, and
    bodies still incomplete after ``timeout_s`` with 408 (a client dribbling its body byte by byte
    must not hold the request open for ever)."""

    def __init__(self, app, max_bytes: int, timeout_s: float) -> None:
        self.app, self.max_bytes, self.timeout_s = app, max_bytes, timeout_s

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await self._refuse(scope, receive, send, 413, f"request body larger than {self.max_bytes} bytes")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        chunks, size, more = [], 0, True
        while more:
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0.0))
            except asyncio.TimeoutError:
                return await self._refuse(
                    scope, receive, send, 408, f"request body not received within {self.timeout_s:g} s"
                )
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:  # a body sent in chunks, or longer than its Content-Length
                return await self._refuse(scope, receive, send, 413, f"request body larger than {self.max_bytes} bytes")
            more = message.get("more_body", False)
        body, replayed = b"".join(chunks), False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _refuse(scope, receive, send, status: int, detail: str) -> None:
        # The rest of the body is never read, so the connection cannot carry another request.
        response = JSONResponse({"detail": detail}, status_code=status, headers={"Connection": "close"})
        await response(scope, receive, send)


# --------------------------------------------------------------------------------------------
# The order of the guards.
# --------------------------------------------------------------------------------------------


class GuardedFastAPI(FastAPI):
    """FastAPI with the Host check and the security headers outside Starlette's own error
    handler, so that no response at all (not even an unexpected 500) leaves without them."""

    def __init__(self, *, hosts: AllowedHosts, **kwargs) -> None:
        self.allowed_hosts = hosts
        super().__init__(**kwargs)

    def build_middleware_stack(self):
        return SecurityHeaders(HostCheck(super().build_middleware_stack(), self.allowed_hosts))
