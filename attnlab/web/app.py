"""The explorer's FastAPI application: the lesson, three tool pages and the JSON API behind them.

Pages (plain HTML/CSS/JS under ``static/``, no build step, nothing fetched from the network):

- ``/``             the lesson (授業): its index, and ``/lesson/{n}`` for each section
  (:mod:`attnlab.web.lesson`: the pages, their content as ``static/data/lesson/*.json``, and the
  in-page models' folders; the lesson has no widget endpoint)
- ``/playground``   the "three books" query/key/value walk-through, live
- ``/model``        a model's output and the attention maps of every layer and head
- ``/masks``        causal, padding and sliding-window masks on a token grid

API (described at ``/openapi.json``; bad input gets a 4xx with a message, never a 500):

- ``POST /api/playground``  → :func:`attnlab.explain.compute_steps`
- ``POST /api/mask``        → the mask helpers of :mod:`attnlab.functional`
- ``GET  /api/models``      → the models named when the explorer started (shipped ones with their
  description and example inputs)
- ``POST /api/run``         → one model run (bounded text length, bounded concurrent work)

Every response carries the security headers (no inline script, no framing, no MIME sniffing), a
request naming a ``Host`` the explorer does not serve gets 400 (DNS rebinding), and bodies and
model work are bounded: the guards are in :mod:`attnlab.web.security`. The requests and answers
are the pydantic models of :mod:`attnlab.web.schemas`; this module holds the handlers and the app
factory.

Shape:
    playground: ``S`` keys (books) of width ``Dk``, values ``(S, Dv)``, output ``(Dv,)``;
    masks and weights: ``(T, S)``; attentions: ``{group: (L, H, T, S)}``
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Literal

import anyio
import torch
from fastapi import FastAPI, HTTPException
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from .. import functional as AF
from ..explain import compute_steps
from . import i18n
from .classroom import AnswerCache, Classroom, ResponseCache, qr_svg
from .lesson import lesson_router
from .models import GROUP_AXES, ExplorerModel, unique_names
from .schemas import (
    ERRORS,
    ClassroomInfo,
    GroupInfo,
    MaskRequest,
    MaskResponse,
    ModelInfo,
    PlaygroundRequest,
    PlaygroundResponse,
    RunResponse,
    run_request_model,
)
from .security import AllowedHosts, BodyLimit, GuardedFastAPI, Limits, WorkGate, check_port
from .site import RUNTIME_FILES, DataFiles, ModelFolders, node_modules_runtime

__all__ = ["STATIC_DIR", "create_app", "masks", "playground", "serve"]

STATIC_DIR = Path(str(resources.files("attnlab.web") / "static"))


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


def create_app(
    models: Sequence[ExplorerModel] = (),
    *,
    limits: Limits = Limits(),
    host: str = "127.0.0.1",
    allow_hosts: Sequence[str] = (),
    classroom: Classroom | None = None,
) -> FastAPI:
    """The explorer app serving ``models`` (already loaded; see :func:`attnlab.web.models.load_explorer_model`).

    ``host`` is the address it will be bound to and ``allow_hosts`` further names it may be reached
    by: requests with any other ``Host`` header get 400 (see :class:`AllowedHosts`). ``classroom``
    (``attnlab explore --classroom``) shows the addresses students type, and their QR code, on the
    index. Answers that depend only on the request are kept (:class:`ResponseCache`).
    """
    hosts = AllowedHosts(host, allow_hosts)
    named = unique_names(list(models))
    gate = WorkGate(limits.max_concurrent, limits.max_waiting, limits.wait_timeout_s)
    RunRequest = run_request_model(limits.max_text_chars)

    app = GuardedFastAPI(
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

    # The in-page engine's runtime and models at the URLs the static build writes them to
    # (attnlab.web.site), so the pages compute the same way in the explorer as on a static host.
    model_folders = ModelFolders()
    app.state.model_folders = model_folders

    @app.api_route("/static/vendor/onnxruntime-web/{filename}", methods=["GET", "HEAD"], include_in_schema=False)
    def onnx_runtime(filename: str) -> FileResponse:
        if filename not in RUNTIME_FILES:
            raise HTTPException(404, f"no runtime file {filename[:40]!r}")
        try:
            folder = node_modules_runtime()
        except FileNotFoundError as err:
            raise HTTPException(404, str(err)) from None
        return FileResponse(folder / filename, media_type=_MEDIA.get(Path(filename).suffix, "application/octet-stream"))

    @app.api_route("/static/models/{name}/{filename}", methods=["GET", "HEAD"], include_in_schema=False)
    def site_model_file(name: str, filename: str) -> FileResponse:
        try:
            path = model_folders.file(name, filename)
        except KeyError as err:
            raise HTTPException(404, str(err.args[0])) from None
        except FileNotFoundError as err:  # a shipped model not built here: say which, and how to build it
            raise HTTPException(
                503, f"the in-page model {name} needs the shipped model {name}, which is not installed here: {err}"
            ) from None
        return FileResponse(path, media_type=_MEDIA.get(path.suffix, "application/octet-stream"))

    # Figures that are measurements of PyTorch on a machine (site.SITE_DATA), measured on first ask.
    data_files = DataFiles()
    app.state.data_files = data_files

    @app.api_route("/static/data/{filename}", methods=["GET", "HEAD"], include_in_schema=False)
    async def site_data_file(filename: str) -> FileResponse:
        # Written on first ask (seconds of PyTorch), in a worker thread: the event loop stays free.
        try:
            path = await anyio.to_thread.run_sync(data_files.file, filename)
        except KeyError as err:
            raise HTTPException(404, str(err.args[0])) from None
        except FileNotFoundError as err:  # measured on a shipped model not built here: say which, never a 500
            model = getattr(err, "model", None)
            needs = (
                f"needs the shipped model {model}, which is not installed here" if model else "cannot be written here"
            )
            raise HTTPException(503, f"the data file {filename} {needs}: {err}") from None
        return FileResponse(path, media_type="application/json")

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


#: The media types of the in-page engine's files (a module script must come as JavaScript).
_MEDIA = {".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm", ".json": "application/json"}


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
