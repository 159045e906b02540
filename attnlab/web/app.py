"""The explorer's FastAPI application: the lesson, three tool pages and the JSON API behind them.

Pages (plain HTML/CSS/JS under ``static/``, no build step, nothing fetched from the network):

- ``/``             the lesson (授業): its index, and ``/lesson/{n}`` for each section
  (:mod:`attnlab.web.lesson`, which also holds the lesson's API under ``/api/lesson/``)
- ``/playground``   the "three books" query/key/value walk-through, live
- ``/model``        a model's output and the attention maps of every layer and head
- ``/masks``        causal, padding and sliding-window masks on a token grid

API (described at ``/openapi.json``; bad input gets a 4xx with a message, never a 500):

- ``POST /api/playground``  → :func:`attnlab.explain.compute_steps`
- ``POST /api/mask``        → the mask helpers of :mod:`attnlab.functional`
- ``GET  /api/models``      → the models named when the explorer started (shipped ones with their
  description and example inputs)
- ``POST /api/run``         → one model run (bounded text length, bounded concurrent work)

Every response carries the security headers of :data:`SECURITY_HEADERS` (no inline script, no
framing, no MIME sniffing), and a request naming a ``Host`` the explorer does not serve gets 400:
see :class:`AllowedHosts` (DNS rebinding).

Shape:
    playground: ``S`` keys (books) of width ``Dk``, values ``(S, Dv)``, output ``(Dv,)``;
    masks and weights: ``(T, S)``; attentions: ``{group: (L, H, T, S)}``
"""

from __future__ import annotations

import asyncio
import ipaddress
import math
import socket
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

import anyio
import torch
from fastapi import FastAPI, HTTPException
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field

from .. import functional as AF
from ..explain import compute_steps
from . import i18n
from .classroom import AnswerCache, Classroom, ResponseCache, qr_svg
from .lesson import lesson_router
from .models import GROUP_AXES, ExplorerModel, unique_names

__all__ = ["AllowedHosts", "Limits", "check_address", "create_app", "serve"]

STATIC_DIR = Path(str(resources.files("attnlab.web") / "static"))

MAX_KEYS = 16  # books in the playground (the page shows three)
MAX_KEY_WIDTH = 64  # numbers per key / query vector in the vector mode
MAX_VALUE_WIDTH = 16  # numbers per value vector
MAX_ABS = 1e4  # largest magnitude of any playground number: keeps every result finite
MAX_MASK_LEN = 32  # tokens on a side of the mask grid


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
# no framing (clickjacking); old browsers get the same through X-Frame-Options.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; font-src 'self'; "
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
# Request and response schemas (they become the OpenAPI description).
# --------------------------------------------------------------------------------------------

# strict: a number must be a JSON number ("d_k": "64" is refused, not converted), a flag a JSON
# boolean. The models are not strict as a whole: FastAPI validates parsed JSON, where a [row,
# column] pair arrives as a list, which strict mode would not take for a tuple.
Number = Annotated[float, Field(ge=-MAX_ABS, le=MAX_ABS, allow_inf_nan=False, strict=True)]


class PlaygroundRequest(BaseModel):
    """Give ``scores`` (q·k per book, for keys of width ``d_k``) or ``query`` with ``keys``."""

    model_config = ConfigDict(extra="forbid")

    scores: list[Number] | None = Field(None, min_length=1, max_length=MAX_KEYS, description="q·k for each key")
    query: list[Number] | None = Field(None, min_length=1, max_length=MAX_KEY_WIDTH, description="the query vector")
    keys: list[Annotated[list[Number], Field(min_length=1, max_length=MAX_KEY_WIDTH)]] | None = Field(
        None, min_length=1, max_length=MAX_KEYS, description="one key vector per book, as wide as the query"
    )
    values: list[Annotated[list[Number], Field(min_length=1, max_length=MAX_VALUE_WIDTH)]] | None = Field(
        None, min_length=1, max_length=MAX_KEYS, description="one value vector per key (default: one-hot)"
    )
    d_k: int = Field(
        64, ge=1, le=1024, strict=True, description="key width used for the √d_k scaling (ignored with query/keys)"
    )
    scale: bool = Field(True, strict=True, description="divide the scores by √d_k")


class PlaygroundResponse(BaseModel):
    raw: list[float] = Field(description="q·k per key")
    scaled: list[float] = Field(description="what enters the softmax: q·k/√d_k, or q·k when scale is off")
    weights: list[float] = Field(description="softmax weights, summing to 1")
    values: list[list[float]] = Field(description="the value vectors used")
    output: list[float] = Field(description="Σ weight · value")
    d_k: int
    scale: bool
    factor: float = Field(description="the multiplier of the raw scores: 1/√d_k, or 1")


class MaskRequest(BaseModel):
    """A self-attention mask over ``length`` tokens (or ``length`` queries × ``key_length`` keys)."""

    model_config = ConfigDict(extra="forbid")

    length: int = Field(8, ge=1, le=MAX_MASK_LEN, strict=True, description="T, the number of query tokens")
    key_length: int | None = Field(
        None, ge=1, le=MAX_MASK_LEN, strict=True, description="S, the number of keys (default T)"
    )
    causal: bool = Field(True, strict=True, description="add the causal mask (no looking ahead)")
    window: int | None = Field(
        None, ge=1, le=MAX_MASK_LEN, strict=True, description="add a sliding window of this size"
    )
    window_causal: bool = Field(True, strict=True, description="window looks back only (else symmetric, ±window//2)")
    padding: int = Field(0, ge=0, le=MAX_MASK_LEN, strict=True, description="how many keys at the end are padding")
    toggled: list[tuple[Annotated[int, Field(ge=0, strict=True)], Annotated[int, Field(ge=0, strict=True)]]] = Field(
        default_factory=list,
        max_length=MAX_MASK_LEN * MAX_MASK_LEN,
        description="[row, column] cells the learner flipped by hand, applied after the helpers",
    )


class MaskResponse(BaseModel):
    length: int
    key_length: int
    parts: dict[str, list[list[bool]]] = Field(description="each helper's mask, broadcast to (T, S)")
    mask: list[list[bool]] = Field(description="all parts combined (logical AND), then the toggled cells flipped")
    weights: list[list[float]] = Field(description="softmax weights under the mask when all scores are equal")


class ModelInfo(BaseModel):
    name: str
    kind: str
    description: dict[str, str] | None = Field(
        None, description="a shipped model's one-line description by language (en, ja); null for other models"
    )
    examples: list[str] = Field(default_factory=list, description="inputs to try (a shipped model's own)")


class GroupInfo(BaseModel):
    name: str = Field(description="encoder_self, decoder_self, cross or self")
    rows: str = Field(description="which token list labels the rows (queries)")
    cols: str = Field(description="which token list labels the columns (keys)")
    layers: int
    heads: int


class RunResponse(BaseModel):
    model: str
    kind: str
    output: str
    tokens: dict[str, list[str]]
    groups: list[GroupInfo]
    attentions: dict[str, list[list[list[list[float]]]]] = Field(description="group -> [layer][head][row][col]")
    elapsed_ms: float


class ClassroomInfo(BaseModel):
    enabled: bool  # started with --classroom
    urls: list[str]  # the addresses students type (the first is the QR code)


class ErrorResponse(BaseModel):
    detail: str


def _run_request_model(max_chars: int) -> type[BaseModel]:
    class RunRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")

        model: str = Field(min_length=1, max_length=200, strict=True, description="a name from GET /api/models")
        text: str = Field(min_length=1, max_length=max_chars, strict=True, description="the input sentence")

    return RunRequest


# --------------------------------------------------------------------------------------------
# Bounded model work.
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
# The computations behind the API (each one calls attnlab itself).
# --------------------------------------------------------------------------------------------


def _as_rows(rows: list[list[float]]) -> list[str]:
    # compute_steps takes vectors as "1,0,2" strings (its CLI form); repr() round-trips floats exactly.
    return [",".join(repr(float(x)) for x in row) for row in rows]


def playground(req: PlaygroundRequest) -> PlaygroundResponse:
    """The walk-through numbers from :func:`attnlab.explain.compute_steps` (float64)."""
    steps = compute_steps(
        req.scores,
        query=req.query,
        keys=None if req.keys is None else _as_rows(req.keys),
        values=None if req.values is None else _as_rows(req.values),
        d_k=req.d_k,
        scale=req.scale,
    )
    factor = 1.0 / math.sqrt(steps.d_k) if steps.scale else 1.0
    return PlaygroundResponse(
        raw=steps.raw.tolist(),
        scaled=steps.scaled.tolist(),
        weights=steps.weights.tolist(),
        values=steps.values.tolist(),
        output=steps.output.tolist(),
        d_k=steps.d_k,
        scale=steps.scale,
        factor=factor,
    )


def masks(req: MaskRequest) -> MaskResponse:
    """Build each requested mask with the helpers, combine them, flip the toggled cells."""
    T = req.length
    S = req.key_length or T
    if req.padding > S:
        raise ValueError(f"padding={req.padding} is more than the {S} keys")
    parts: dict[str, torch.Tensor] = {}
    if req.causal:
        parts["causal"] = AF.causal_mask(T, S)  # (T, S)
    if req.window is not None:
        parts["window"] = AF.sliding_window_mask(T, S, window=req.window, causal=req.window_causal)  # (T, S)
    if req.padding:
        keep = AF.padding_mask(torch.tensor([S - req.padding]), max_len=S)  # (1, S)
        parts["padding"] = keep.expand(T, S)  # (1, S) -> (T, S)
    mask = AF.combine_masks(*parts.values())
    mask = torch.ones(T, S, dtype=torch.bool) if mask is None else mask.clone()  # (T, S)
    for i, j in req.toggled:
        if i >= T or j >= S:
            raise ValueError(f"toggled cell [{i}, {j}] is outside the {T}×{S} grid")
        mask[i, j] = ~mask[i, j]
    # Equal scores everywhere: the weights show the mask alone (uniform over the allowed keys,
    # zeros in a row with none allowed).
    q, k = torch.zeros(T, 1, dtype=torch.float64), torch.zeros(S, 1, dtype=torch.float64)  # (T, 1), (S, 1)
    v = torch.eye(S, dtype=torch.float64)  # (S, S)
    _, weights = AF.scaled_dot_product_attention(q, k, v, mask, return_weights=True, backend="math")  # (T, S)
    return MaskResponse(
        length=T,
        key_length=S,
        parts={name: m.tolist() for name, m in parts.items()},
        mask=mask.tolist(),
        weights=weights.tolist(),
    )


def _rounded(weights: torch.Tensor) -> list:
    # Five decimals are far finer than a heatmap's colours and keep the JSON small.
    return torch.round(weights.detach().to(torch.float64), decimals=5).tolist()


# --------------------------------------------------------------------------------------------
# The application.
# --------------------------------------------------------------------------------------------

ERRORS = {
    400: {"model": ErrorResponse, "description": "malformed JSON, or a Host this explorer does not serve"},
    404: {"model": ErrorResponse, "description": "unknown model"},
    408: {"model": ErrorResponse, "description": "request body not received in time"},
    413: {"model": ErrorResponse, "description": "request body too large"},
    429: {"model": ErrorResponse, "description": "busy: too many model requests at once (see Retry-After)"},
}


class _GuardedFastAPI(FastAPI):
    """FastAPI with the Host check and the security headers outside Starlette's own error
    handler, so that no response at all (not even an unexpected 500) leaves without them."""

    def __init__(self, *, hosts: AllowedHosts, **kwargs) -> None:
        self.allowed_hosts = hosts
        super().__init__(**kwargs)

    def build_middleware_stack(self):
        return SecurityHeaders(HostCheck(super().build_middleware_stack(), self.allowed_hosts))


def create_app(
    models: Sequence[ExplorerModel] = (),
    *,
    limits: Limits = Limits(),
    host: str = "127.0.0.1",
    allow_hosts: Sequence[str] = (),
    classroom: Classroom | None = None,
) -> FastAPI:
    """The explorer app serving ``models`` (already loaded; see :func:`attnlab.web.models.load_model`).

    ``host`` is the address it will be bound to and ``allow_hosts`` further names it may be reached
    by: requests with any other ``Host`` header get 400 (see :class:`AllowedHosts`). ``classroom``
    (``attnlab explore --classroom``) shows the addresses students type, and their QR code, on the
    index. Answers that depend only on the request are kept (:class:`ResponseCache`).
    """
    hosts = AllowedHosts(host, allow_hosts)
    named = unique_names(list(models))
    gate = WorkGate(limits.max_concurrent, limits.max_waiting, limits.wait_timeout_s)
    RunRequest = _run_request_model(limits.max_text_chars)

    app = _GuardedFastAPI(
        hosts=hosts,
        title="attnlab explorer",
        version="1",
        # FastAPI's /docs and /redoc pages load their scripts from a CDN; the explorer stays offline.
        docs_url=None,
        redoc_url=None,
        description="Move the numbers of scaled dot-product attention and watch every step; "
        "see the attention maps of attnlab's models. Every number comes from attnlab itself.",
    )
    app.state.answers = AnswerCache()
    app.add_middleware(ResponseCache, cache=app.state.answers)
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes, timeout_s=limits.body_timeout_s)
    app.state.models = named
    app.state.limits = limits
    app.state.gate = gate

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request, err: RequestValidationError) -> JSONResponse:
        errors = err.errors()
        broken = [e for e in errors if e.get("type") == "json_invalid"]
        if broken:
            reason = (broken[0].get("ctx") or {}).get("error", "not JSON")
            return JSONResponse({"detail": f"malformed JSON in the request body: {reason}"}, status_code=400)
        # Without the echoed input: it may be large, or NaN (which JSON cannot carry back).
        detail = [{k: v for k, v in e.items() if k not in ("input", "url")} for e in errors]
        return JSONResponse({"detail": jsonable_encoder(detail)}, status_code=422)

    @app.exception_handler(ValueError)
    async def _bad_value(request, err: ValueError) -> JSONResponse:
        # attnlab's own checks name the problem; they are the user's mistake, not the server's.
        return JSONResponse({"detail": str(err)}, status_code=422)

    page = {"/playground": "playground.html", "/model": "model.html", "/masks": "masks.html"}
    for route, filename in page.items():
        app.add_api_route(route, _page(STATIC_DIR / filename), methods=["GET"], include_in_schema=False)

    @app.get("/fonts/ipaexg.ttf", include_in_schema=False)
    def cjk_font() -> FileResponse:
        from ..viz import cjk_font_path

        return FileResponse(cjk_font_path(), media_type="font/ttf", headers={"Cache-Control": "public, max-age=604800"})

    @app.get("/static/i18n.js", include_in_schema=False)
    def interface_strings() -> Response:
        # Written from the catalogs strings/en.yaml and strings/ja.yaml (attnlab.web.i18n).
        return Response(i18n.script(), media_type="text/javascript", headers={"Cache-Control": "no-cache"})

    @app.get("/api/classroom", response_model=ClassroomInfo)
    def api_classroom() -> ClassroomInfo:
        """Whether the explorer serves a class (``--classroom``), and the addresses students type."""
        return ClassroomInfo(enabled=classroom is not None, urls=classroom.urls if classroom else [])

    @app.get("/api/classroom/qr.svg", include_in_schema=False)
    def api_classroom_qr() -> Response:
        if classroom is None or not classroom.urls:
            raise HTTPException(404, "not serving a class: start with `attnlab explore --classroom`")
        return Response(qr_svg(classroom.urls[0]), media_type="image/svg+xml")

    app.include_router(lesson_router(named, gate))
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    small_body = {status: ERRORS[status] for status in (400, 408, 413)}

    @app.post("/api/playground", response_model=PlaygroundResponse, responses=small_body)
    def api_playground(req: PlaygroundRequest) -> PlaygroundResponse:
        """Raw scores, scaled scores, softmax weights and the mixed output for one query."""
        return playground(req)

    @app.post("/api/mask", response_model=MaskResponse, responses=small_body)
    def api_mask(req: MaskRequest) -> MaskResponse:
        """Causal, padding and sliding-window masks from attnlab's helpers, combined and edited."""
        return masks(req)

    @app.get("/api/models", response_model=list[ModelInfo])
    def api_models() -> list[ModelInfo]:
        """The models named when the explorer started (the only ones it can run), with the
        description and example inputs of the shipped ones."""
        return [
            ModelInfo(
                name=m.name,
                kind=m.kind,
                description=getattr(m, "description", None),
                examples=list(getattr(m, "examples", ())),
            )
            for m in named.values()
        ]

    async def api_run(req) -> RunResponse:
        """Run a model on a sentence: its output and the attention maps of every layer and head."""
        model = named.get(req.model)
        if model is None:
            known = (
                ", ".join(sorted(named)) or "none (start the explorer with --model DIR, or build the shipped models)"
            )
            raise HTTPException(404, f"unknown model {req.model!r}; available: {known}")
        if not req.text.strip():
            raise HTTPException(422, "text is empty: type a sentence")
        async with gate.slot():
            start = time.perf_counter()
            result = await anyio.to_thread.run_sync(_run_model, model, req.text)
            elapsed = (time.perf_counter() - start) * 1000
        groups = [
            GroupInfo(name=g, rows=GROUP_AXES[g][0], cols=GROUP_AXES[g][1], layers=w.shape[0], heads=w.shape[1])
            for g, w in result.attentions.items()
        ]
        return RunResponse(
            model=model.name,
            kind=model.kind,
            output=result.output,
            tokens=result.tokens,
            groups=groups,
            attentions={g: _rounded(w) for g, w in result.attentions.items()},
            elapsed_ms=elapsed,
        )

    # RunRequest is built per app (its text bound comes from ``limits``); FastAPI reads the body
    # type from the annotation, which must be the class itself rather than a postponed string.
    api_run.__annotations__["req"] = RunRequest
    app.post("/api/run", response_model=RunResponse, responses=ERRORS)(api_run)
    return app


def _run_model(model: ExplorerModel, text: str):
    with torch.inference_mode():
        return model.run(text)


def _page(path: Path):
    def serve() -> FileResponse:
        return FileResponse(path, media_type="text/html; charset=utf-8", headers={"Cache-Control": "no-cache"})

    return serve


def serve(
    models: Sequence[ExplorerModel],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    limits: Limits = Limits(),
    allow_hosts: Sequence[str] = (),
    log_level: Literal["info", "warning"] = "info",
    classroom: Classroom | None = None,
) -> None:
    """Run the explorer with uvicorn until interrupted (``ValueError`` for a bad port or host name)."""
    import uvicorn

    check_port(port)
    app = create_app(models, limits=limits, host=host, allow_hosts=allow_hosts, classroom=classroom)
    if classroom is not None:
        # Load the models and compute the shared results before the first student arrives.
        import threading

        from .classroom import warm_up

        own = "127.0.0.1" if host in ("0.0.0.0", "::") else (f"[{host}]" if ":" in host else host)
        threading.Thread(target=warm_up, args=(f"http://{own}:{port}",), daemon=True).start()
    # Idle connections stay open 30 s (uvicorn's default is 5): a student thinks longer than 5 s
    # between two widget moves, and a connection closed just as the next request goes out is reset.
    uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_keep_alive=30)
