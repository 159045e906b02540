"""The engine's lines measured on the machine that runs them (:class:`attnlab.accel.rules.Lines`).

Where a product of a few rows should leave attnlab's packed panels for the BLAS, and up to how
many rows a decoding step is faster on one thread than on all of them, depends on the CPU, its
caches and the BLAS: lines drawn on one Intel Xeon lost up to half of a step's speed on an AMD
EPYC (issue 39). So on first use (:func:`attnlab.accel.rules.lines`) this module measures, in a
few seconds, for the current number of torch threads:

- the products of the layer kernels (:func:`attnlab.accel.kernels.packed_linear`) of a
  ``(1024, 256)`` and a ``(8192, 256)`` weight (a feed-forward and a vocabulary projection of the
  shipped translators' size), fp32 and (where the BLAS has the bf16 product) bf16, at 1 … 32
  rows, by the packed panels and by the BLAS: each BLAS line is the fewest rows from which the
  BLAS is the faster at every row count measured;
- a whole decoding step (:class:`attnlab.accel.kernels.DecoderStep` of that shape, random
  weights) at 1 … 16 rows on one thread and on all: steps of up to ``one_thread_max_rows`` rows run
  on one thread, where all of them are not measurably faster (:data:`MORE_THREADS_MIN_SPEEDUP`).

Each measurement is the fastest of a few interleaved runs after a warm-up; one taken while the
machine is busy (load average above its cores) is used until it is quiet, then taken again. The table is cached in
``$ATTNLAB_CACHE/lines.json`` per CPU model and flags, PyTorch and its libraries, the kernels'
build, the instruction set and the threads (:func:`key`); ``attnlab calibrate`` measures again.
Timed code (benchmarks) calls :func:`ensure` first, so no measurement falls inside a timed region.
The choice from the timings (:func:`choose`) is a plain function, tested on given timings.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from .. import machine
from . import kernels, layout, rules

__all__ = ["measure", "choose", "calibrated", "ensure", "key", "cache_path", "PRODUCT_ROWS", "STEP_ROWS"]

#: Row counts of the products' measurement, and of the step's (one thread against all).
PRODUCT_ROWS = (1, 2, 4, 8, 16, 32)
STEP_ROWS = (1, 2, 4, 8, 16)
#: The products' weights measured: a (F, D) feed-forward matrix below ``blas_large_weights`` and a
#: (V, D) vocabulary projection above it.
SHAPES = {"small": (1024, 256), "large": (8192, 256)}
#: The shape of the step measured: the shipped translators' decoder (D, H, F, L, V, source length).
STEP_SHAPE = {"D": 256, "H": 4, "F": 1024, "L": 3, "V": 8000, "S": 12}
#: All threads take a step only where they are at least this much faster than one (noise margin:
#: a tie frees the other cores, as CTranslate2's one- and two-thread speeds of one sentence are close).
MORE_THREADS_MIN_SPEEDUP = 1.05
NEVER = 1 << 30

Timer = Callable[[], float]


def key(threads: int) -> str:
    """What the lines depend on: the CPU (model name and flags), PyTorch and its libraries (its
    build configuration names MKL's and oneDNN's versions), the MKL settings that emulate another
    CPU, the kernels' build and instruction set, and the threads."""
    raw = "|".join(
        [
            machine.cpu_name(),
            machine.cpu_flags(),
            torch.__version__,
            torch.__config__.show(),
            os.environ.get("MKL_ENABLE_INSTRUCTIONS", ""),
            os.environ.get("MKL_DEBUG_CPU_TYPE", ""),
            kernels.library_key(),
            kernels.isa() if kernels.available() else "none",
            str(threads),
        ]
    )
    return hashlib.sha256(raw.encode()).hexdigest()[:20]


def cache_path() -> Path:
    return machine.cache_root() / "lines.json"


def _timed(fn: Callable[[], object], timer: Timer) -> float:
    start = timer()
    fn()
    return timer() - start


def _fastest(runs: dict[str, Callable[[], object]], repeats: int, timer: Timer) -> dict[str, float]:
    """The fastest of ``repeats`` interleaved runs of each, after one warm-up run each."""
    for fn in runs.values():
        fn()
    best = {name: math.inf for name in runs}
    for _ in range(repeats):
        for name, fn in runs.items():
            best[name] = min(best[name], _timed(fn, timer))
    return best


def _synthetic_step(dtype: torch.dtype, gen: torch.Generator, shape: dict) -> kernels.DecoderStep | None:
    """A decoder step of ``shape`` (:data:`STEP_SHAPE`) with random weights (the speed does not depend on them)."""
    D, F, L, V = (shape[k] for k in "DFLV")
    shapes = {"ff_w1": (F, D), "ff_b1": (F,), "ff_w2": (D, F)}

    def tensor(name: str) -> torch.Tensor:
        shape = shapes.get(name, (D, D) if name in layout.MATRICES["decoder_layer_t"] else (D,))
        t = torch.randn(shape, generator=gen) * 0.05
        if name.endswith("norm_w"):
            t += 1
        return t.to(dtype) if name in layout.MATRICES["decoder_layer_t"] else t

    layers = [{name: tensor(name) for name, _ in layout.STRUCTS["decoder_layer_t"]} for _ in range(L)]
    embedding = torch.randn(V, D, generator=gen) * 0.05
    return kernels.DecoderStep.build(
        layers, embedding, torch.randn(64, D, generator=gen) * 0.05, math.sqrt(D), None,
        embedding.to(dtype), None, shape["H"], F, True, "relu", 1e-5,
    )  # fmt: skip


def _step_runs(step: kernels.DecoderStep, rows: int, gen: torch.Generator, shape: dict) -> Callable[[], object]:
    D, H, L, S, V = (shape[k] for k in "DHLSV")
    Dh = D // H
    caches = [(torch.zeros(rows, H, 16, Dh), torch.zeros(rows, H, 16, Dh)) for _ in range(L)]  # (B, H, cap, Dh)
    sources = [
        (torch.randn(rows, H, S, Dh, generator=gen), torch.randn(rows, H, S, Dh, generator=gen)) for _ in range(L)
    ]
    lengths = torch.full((rows,), S, dtype=torch.long)  # (B,)
    tokens = torch.randint(0, V, (rows,), generator=gen)
    return lambda: step(tokens, caches, 8, sources, lengths)  # 8 positions already decoded


def measure(
    threads: int,
    *,
    repeats: int = 15,
    step_repeats: int = 7,
    timer: Timer = time.perf_counter,
    shapes: dict[str, tuple[int, int]] | None = None,
    step_shape: dict[str, int] | None = None,
) -> dict:
    """The timings :func:`choose` reads, in seconds, on ``threads`` threads (kernels needed):
    ``{"products": {dtype: {shape: {rows: {"panels": s, "blas": s}}}}, "step": {dtype: {rows:
    {"one": s, "all": s}}}}``: the fastest of ``repeats`` (products) or ``step_repeats`` (steps)
    interleaved runs. ``timer`` is the clock, ``shapes`` and ``step_shape`` what is measured
    (:data:`SHAPES`, :data:`STEP_SHAPE`; the tests give a fake clock and small shapes).

    Shape:
        no tensors.
    """
    shapes, step_shape = shapes or SHAPES, step_shape or STEP_SHAPE
    kept = torch.get_num_threads()
    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    out: dict = {"products": {}, "step": {}}
    dtypes = [torch.float32] + ([torch.bfloat16] if kernels.blas(torch.bfloat16) else [])
    try:
        with (
            torch.inference_mode(),
            rules.using(rules.DEFAULTS, blas_min_rows=1, blas_min_rows_large=1, blas_min_rows_bf16=1),
        ):
            if kernels.blas():
                for dtype in dtypes:
                    name = str(dtype).removeprefix("torch.")
                    for shape_name, shape in shapes.items():
                        packed = kernels.pack((torch.randn(shape, generator=gen) * 0.05).to(dtype))
                        cells = {}
                        for rows in PRODUCT_ROWS:
                            x = torch.randn(rows, shape[1], generator=gen)

                            def panels(x=x, packed=packed):
                                with kernels.using_blas(False):
                                    return kernels.packed_linear(x, packed)

                            cells[rows] = _fastest(
                                {"panels": panels, "blas": lambda x=x, packed=packed: kernels.packed_linear(x, packed)},
                                repeats,
                                timer,
                            )
                        out["products"].setdefault(name, {})[shape_name] = cells
        if threads > 1:
            table = choose(out, 1)
            for dtype in dtypes:
                step = _synthetic_step(dtype, gen, step_shape)
                if step is None:
                    continue
                cells = {}
                with torch.inference_mode():
                    for rows in STEP_ROWS:
                        run = _step_runs(step, rows, gen, step_shape)

                        def on(n: int, run=run):
                            def go():
                                with rules.using(table, one_thread_max_rows=n):
                                    return run()

                            return go

                        cells[rows] = _fastest({"one": on(NEVER), "all": on(0)}, step_repeats, timer)
                out["step"][str(dtype).removeprefix("torch.")] = cells
    finally:
        torch.set_num_threads(kept)
    return out


def _blas_line(cells: dict) -> int:
    """Fewest rows from which the BLAS is the faster at every row count measured (:data:`NEVER`
    if it is not faster at the most)."""
    line = NEVER
    for rows in sorted(cells, key=int, reverse=True):
        if cells[rows]["blas"] <= cells[rows]["panels"]:
            line = int(rows)
        else:
            break
    return line


def choose(timings: dict, threads: int) -> rules.Lines:
    """The table for ``threads`` threads from :func:`measure`'s timings: the defaults, with each
    BLAS line at the fewest rows from which the BLAS wins at every row count measured (bf16: the
    larger of the two shapes' lines), and ``one_thread_max_rows`` the most rows up to which one
    thread is as fast as all of them or within :data:`MORE_THREADS_MIN_SPEEDUP` (at every row
    count up to it). Lines without timings keep their defaults.

    Shape:
        no tensors.
    """
    changes: dict[str, int] = {}
    products = timings.get("products", {})
    fp32 = products.get("float32", {})
    if "small" in fp32:
        changes["blas_min_rows"] = _blas_line(fp32["small"])
    if "large" in fp32:
        changes["blas_min_rows_large"] = _blas_line(fp32["large"])
    bf16 = products.get("bfloat16", {})
    if bf16:
        changes["blas_min_rows_bf16"] = max(_blas_line(cells) for cells in bf16.values())
    if threads == 1:
        changes["one_thread_max_rows"] = 0
    elif timings.get("step"):
        most = NEVER
        for cells in timings["step"].values():  # each precision measured; the line holds for all
            line = 0
            for rows in sorted(cells, key=int):
                if cells[rows]["all"] * MORE_THREADS_MIN_SPEEDUP > cells[rows]["one"]:
                    line = int(rows)
                else:
                    break
            most = min(most, line)
        changes["one_thread_max_rows"] = 0 if most == NEVER else most
    return dataclasses.replace(rules.DEFAULTS, **changes)


def _read_cache() -> dict:
    return machine.read_json_cache(cache_path())


def _write_cache(known: dict) -> None:
    machine.write_json_cache(cache_path(), known)


def calibrated(threads: int, *, again: bool = False, quiet: bool = False) -> rules.Lines:
    """The measured table for ``threads`` threads: from the cache, else (or with ``again``)
    measured now and cached. Without the kernels nothing is measured: the defaults.

    Shape:
        no tensors.
    """
    if not kernels.available():
        return rules.DEFAULTS
    k = key(threads)
    known = _read_cache()
    entry = known.get(k)
    # A table measured while the machine was busy holds until the machine is quiet, then is measured again.
    if not again and not rules.provisional(entry) and isinstance(entry, dict) and isinstance(entry.get("lines"), dict):
        try:
            return dataclasses.replace(rules.DEFAULTS, **entry["lines"])
        except TypeError:
            pass  # (a table of another version of attnlab: measured again)
    busy = rules.busy()
    start = time.perf_counter()
    timings = measure(threads)
    table = choose(timings, threads)
    took = time.perf_counter() - start
    lines = {name: getattr(table, name) for name in rules.CALIBRATED}
    known = _read_cache()  # (another process may have written meanwhile)
    known[k] = {
        "lines": lines,
        "threads": threads,
        "cpu": machine.cpu_name(),
        "seconds": round(took, 2),
        "busy": busy,
        "timings": timings,
    }
    _write_cache(known)
    if not quiet:
        print(
            f"attnlab: calibrated the kernel lines for {threads} thread(s) in {took:.1f} s: "
            + ", ".join(f"{n}={v}" for n, v in lines.items())
            + (" (the machine was busy: measured again once it is quiet)" if busy else "")
            + f" ({cache_path()}; `attnlab calibrate` measures again)",
            file=sys.stderr,
        )
    return table


def ensure(*threads: int) -> list[rules.Lines]:
    """The tables in force for each of ``threads`` (default the current count), resolved now
    (measured where not cached): timed code calls it first, so no calibration falls in its time.

    Shape:
        no tensors.
    """
    kept = torch.get_num_threads()
    out = []
    try:
        for n in threads or (kept,):
            torch.set_num_threads(n)
            out.append(rules.lines())
    finally:
        torch.set_num_threads(kept)
    return out


rules.measure = calibrated
