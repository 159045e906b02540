"""The explorer's FastAPI application: three pages and the JSON API behind them.

Pages (plain HTML/CSS/JS under ``static/``, no build step, nothing fetched from the network):

- ``/``        the playground: the "three books" query/key/value walk-through, live
- ``/model``   a model's output and the attention maps of every layer and head
- ``/masks``   causal, padding and sliding-window masks on a token grid

API (described at ``/openapi.json``; bad input gets a 4xx with a message, never a 500):

- ``POST /api/playground``  → :func:`attnlab.explain.compute_steps`
- ``POST /api/mask``        → the mask helpers of :mod:`attnlab.functional`
- ``GET  /api/models``      → the models named when the explorer started
- ``POST /api/run``         → one model run (bounded text length, bounded concurrent work)

Shape:
    playground: ``S`` keys (books) of width ``Dk``, values ``(S, Dv)``, output ``(Dv,)``;
    masks and weights: ``(T, S)``; attentions: ``{group: (L, H, T, S)}``
"""

from __future__ import annotations

import asyncio
import math
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, AsyncIterator, Literal, Sequence

import anyio
import torch
from fastapi import FastAPI, HTTPException
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field

from .. import functional as AF
from ..explain import compute_steps
from .models import GROUP_AXES, ExplorerModel, unique_names

__all__ = ["Limits", "create_app"]

STATIC_DIR = Path(str(resources.files("attnlab.web") / "static"))

MAX_KEYS = 16  # books in the playground (the page shows three)
MAX_KEY_WIDTH = 64  # numbers per key / query vector in the vector mode
MAX_VALUE_WIDTH = 16  # numbers per value vector
MAX_ABS = 1e4  # largest magnitude of any playground number: keeps every result finite
MAX_MASK_LEN = 32  # tokens on a side of the mask grid


@dataclass(frozen=True)
class Limits:
    """How much work one explorer process accepts (the API answers 413/422/503 beyond these)."""

    max_text_chars: int = 400  # longest sentence /api/run accepts (characters)
    max_body_bytes: int = 64 * 1024  # largest request body of any POST
    max_concurrent: int = 2  # model runs in progress at once (each uses the CPU fully)
    max_waiting: int = 64  # model requests queued behind those; more are refused with 503
    wait_timeout_s: float = 30.0  # a queued request gives up with 503 after waiting this long


# --------------------------------------------------------------------------------------------
# Request and response schemas (they become the OpenAPI description).
# --------------------------------------------------------------------------------------------

Number = Annotated[float, Field(ge=-MAX_ABS, le=MAX_ABS, allow_inf_nan=False)]


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
    d_k: int = Field(64, ge=1, le=1024, description="key width used for the √d_k scaling (ignored with query/keys)")
    scale: bool = Field(True, description="divide the scores by √d_k")


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

    length: int = Field(8, ge=1, le=MAX_MASK_LEN, description="T, the number of query tokens")
    key_length: int | None = Field(None, ge=1, le=MAX_MASK_LEN, description="S, the number of keys (default T)")
    causal: bool = Field(True, description="add the causal mask (no looking ahead)")
    window: int | None = Field(None, ge=1, le=MAX_MASK_LEN, description="add a sliding window of this size")
    window_causal: bool = Field(True, description="window looks back only (else symmetric, ±window//2)")
    padding: int = Field(0, ge=0, le=MAX_MASK_LEN, description="how many keys at the end are padding")
    toggled: list[tuple[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)]]] = Field(
        default_factory=list, max_length=MAX_MASK_LEN * MAX_MASK_LEN,
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


class ErrorResponse(BaseModel):
    detail: str


def _run_request_model(max_chars: int) -> type[BaseModel]:
    class RunRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")

        model: str = Field(min_length=1, max_length=200, description="a name from GET /api/models")
        text: str = Field(min_length=1, max_length=max_chars, description="the input sentence")

    return RunRequest


# --------------------------------------------------------------------------------------------
# Bounded model work.
# --------------------------------------------------------------------------------------------


class WorkGate:
    """At most ``slots`` model runs at once, at most ``max_waiting`` queued; the rest get 503."""

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
            raise HTTPException(503, f"busy: {self.waiting} model requests are already waiting; try again shortly",
                                headers=busy)
        else:
            self.waiting += 1
            try:
                await asyncio.wait_for(sem.acquire(), self.timeout_s)
            except asyncio.TimeoutError:
                raise HTTPException(503, f"busy: no model slot became free within {self.timeout_s:g} s",
                                    headers=busy) from None
            finally:
                self.waiting -= 1
        try:
            yield
        finally:
            sem.release()


class BodyLimit:
    """ASGI middleware: refuse request bodies over ``max_bytes`` with 413 before parsing them."""

    def __init__(self, app, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await self._too_large(scope, receive, send)
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                return await self._too_large(scope, receive, send)
            more = message.get("more_body", False)
        body, replayed = b"".join(chunks), False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope, receive, send) -> None:
        response = JSONResponse({"detail": f"request body larger than {self.max_bytes} bytes"}, status_code=413)
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
        raw=steps.raw.tolist(), scaled=steps.scaled.tolist(), weights=steps.weights.tolist(),
        values=steps.values.tolist(), output=steps.output.tolist(), d_k=steps.d_k, scale=steps.scale,
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
        length=T, key_length=S, parts={name: m.tolist() for name, m in parts.items()},
        mask=mask.tolist(), weights=weights.tolist(),
    )


def _rounded(weights: torch.Tensor) -> list:
    # Five decimals are far finer than a heatmap's colours and keep the JSON small.
    return torch.round(weights.detach().to(torch.float64), decimals=5).tolist()


# --------------------------------------------------------------------------------------------
# The application.
# --------------------------------------------------------------------------------------------

ERRORS = {
    400: {"model": ErrorResponse, "description": "malformed JSON"},
    404: {"model": ErrorResponse, "description": "unknown model"},
    413: {"model": ErrorResponse, "description": "request body too large"},
    503: {"model": ErrorResponse, "description": "too many model requests at once"},
}


def create_app(models: Sequence[ExplorerModel] = (), *, limits: Limits = Limits()) -> FastAPI:
    """The explorer app serving ``models`` (already loaded; see :func:`attnlab.web.models.load_model`)."""
    named = unique_names(list(models))
    gate = WorkGate(limits.max_concurrent, limits.max_waiting, limits.wait_timeout_s)
    RunRequest = _run_request_model(limits.max_text_chars)

    app = FastAPI(
        title="attnlab explorer",
        version="1",
        # FastAPI's /docs and /redoc pages load their scripts from a CDN; the explorer stays offline.
        docs_url=None,
        redoc_url=None,
        description="Move the numbers of scaled dot-product attention and watch every step; "
        "see the attention maps of attnlab's models. Every number comes from attnlab itself.",
    )
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)
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

    page = {"/": "playground.html", "/model": "model.html", "/masks": "masks.html"}
    for route, filename in page.items():
        app.add_api_route(route, _page(STATIC_DIR / filename), methods=["GET"], include_in_schema=False)

    @app.get("/fonts/ipaexg.ttf", include_in_schema=False)
    def cjk_font() -> FileResponse:
        from ..viz import cjk_font_path

        return FileResponse(cjk_font_path(), media_type="font/ttf",
                            headers={"Cache-Control": "public, max-age=604800"})

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.post("/api/playground", response_model=PlaygroundResponse, responses={400: ERRORS[400], 413: ERRORS[413]})
    def api_playground(req: PlaygroundRequest) -> PlaygroundResponse:
        """Raw scores, scaled scores, softmax weights and the mixed output for one query."""
        return playground(req)

    @app.post("/api/mask", response_model=MaskResponse, responses={400: ERRORS[400], 413: ERRORS[413]})
    def api_mask(req: MaskRequest) -> MaskResponse:
        """Causal, padding and sliding-window masks from attnlab's helpers, combined and edited."""
        return masks(req)

    @app.get("/api/models", response_model=list[ModelInfo])
    def api_models() -> list[ModelInfo]:
        """The models named when the explorer started (the only ones it can run)."""
        return [ModelInfo(name=m.name, kind=m.kind) for m in named.values()]

    async def api_run(req) -> RunResponse:
        """Run a model on a sentence: its output and the attention maps of every layer and head."""
        model = named.get(req.model)
        if model is None:
            known = ", ".join(sorted(named)) or "none (start the explorer with --model DIR)"
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
            model=model.name, kind=model.kind, output=result.output, tokens=result.tokens, groups=groups,
            attentions={g: _rounded(w) for g, w in result.attentions.items()}, elapsed_ms=elapsed,
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


def serve(models: Sequence[ExplorerModel], *, host: str = "127.0.0.1", port: int = 8000,
          limits: Limits = Limits(), log_level: Literal["info", "warning"] = "info") -> None:
    """Run the explorer with uvicorn until interrupted."""
    import uvicorn

    uvicorn.run(create_app(models, limits=limits), host=host, port=port, log_level=log_level)
