"""Inference precision ``"auto"``: bf16 weights where the CPU computes bf16 natively and a short
measurement of the model's own decoding shows them faster here; fp32 otherwise.

A decoding step of a few rows is mostly reading the weights, so bf16 weights (half the bytes)
with the CPU's bf16 dot products (AVX-512 BF16, AMX; Arm's BF16) are up to twice as fast; on a
CPU without them bf16 is emulated and slower. Which one wins for a model on a machine is measured,
not guessed: :func:`resolve` times the caller's ``run(precision)`` (a few decoding steps of the
model in each precision: the fastest of a few interleaved runs after a warm-up, as the training
precision probe) once per machine and model shape, and caches the times in
``$ATTNLAB_CACHE/inference-precision.json``. bf16 changes the arithmetic (the rows are rounded to
bf16 too), so it is taken only when measurably faster (:data:`BF16_MIN_SPEEDUP`), and a caller
that knows the model's quality in both precisions (a shipped model's card) can refuse it.

``ATTNLAB_CALIBRATE=0`` (the tests) measures nothing: ``"auto"`` is then fp32, so results do not
depend on the machine's load.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from .. import machine
from . import kernels, rules

__all__ = [
    "PRECISIONS",
    "BF16_MIN_SPEEDUP",
    "native_bf16",
    "probe",
    "choose",
    "resolve",
    "check",
    "dtype_of",
    "forget_measurements",
]

#: The inference precisions a decoding entry point takes (CLI ``--precision``, ``load_translator``).
PRECISIONS = ("auto", "fp32", "bf16")
#: ``"auto"`` takes bf16 only when it is at least this much faster than fp32 (a noise margin),
#: in decoding and in training (:mod:`attnlab.train.precision` chooses by :func:`choose` too).
BF16_MIN_SPEEDUP = 1.05

Timer = Callable[[], float]


def check(precision: str) -> str:
    """``precision`` if it is one of :data:`PRECISIONS`, else a one-line error."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


def dtype_of(precision: str) -> torch.dtype:
    """The weights' dtype of a resolved precision (``"fp32"`` or ``"bf16"``)."""
    return {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]


def native_bf16() -> bool:
    """Whether this CPU computes bf16 products natively: AVX-512 BF16 or AMX (x86), BF16 (Arm);
    where attnlab's kernels are built, their instruction set in force must be ``avx512_bf16``
    (``ATTNLAB_ISA=avx2`` emulates a CPU without it).

    Shape:
        no tensors.
    """
    flags = set(machine.cpu_flags().split())
    if not flags & {"avx512_bf16", "amx_bf16", "bf16"}:
        return False
    if kernels.available():
        return kernels.isa() == "avx512_bf16" or not flags & {"avx512_bf16", "amx_bf16"}
    return True


def probe(run: Callable[[str], None], *, repeats: int = 3, timer: Timer = time.perf_counter) -> dict[str, float]:
    """Seconds of ``run(precision)`` in fp32 and in bf16: the fastest of ``repeats`` interleaved
    runs each, after one untimed run each.

    Shape:
        no tensors; returns ``{"fp32": s, "bf16": s}``.
    """
    for precision in ("fp32", "bf16"):
        run(precision)
    best = {"fp32": float("inf"), "bf16": float("inf")}
    for _ in range(repeats):
        for precision in ("fp32", "bf16"):
            start = timer()
            run(precision)
            best[precision] = min(best[precision], timer() - start)
    return best


def choose(times: dict[str, float]) -> str:
    """bf16 when measured times (:func:`probe`'s, or a training probe's seconds per step) show it
    at least :data:`BF16_MIN_SPEEDUP` × as fast as fp32, else fp32: bf16 changes the arithmetic,
    so a tie or a gain within noise keeps fp32's.

    Shape:
        no tensors.
    """
    return "bf16" if times["bf16"] * BF16_MIN_SPEEDUP <= times["fp32"] else "fp32"


def _cache():
    return machine.cache_root() / "inference-precision.json"


def forget_measurements() -> Path:
    """Drop the cached measurements (``attnlab calibrate``): the next ``"auto"`` measures again,
    e.g. on a quiet machine after a first measurement under load. Returns the cache's path."""
    path = _cache()
    path.unlink(missing_ok=True)
    return path


def _key(model_key: str) -> str:
    raw = "|".join(
        [
            machine.cpu_name(),
            machine.cpu_flags(),
            torch.__version__,
            str(torch.get_num_threads()),
            kernels.library_key(),
            kernels.isa() if kernels.available() else "none",
            model_key,
        ]
    )
    return hashlib.sha256(raw.encode()).hexdigest()[:20]


def model_key(model: torch.nn.Module) -> str:
    """A model's parameter names and shapes: what its decoding speed depends on."""
    return ";".join(f"{n}:{tuple(p.shape)}" for n, p in model.named_parameters())


def resolve(
    precision: str,
    *,
    device: torch.device | str,
    model: torch.nn.Module,
    run: Callable[[str], None],
    allowed: bool = True,
    timer: Timer = time.perf_counter,
) -> tuple[str, str]:
    """The precision to decode in, and why: ``precision`` itself unless it is ``"auto"``; for
    ``"auto"`` bf16 only on a CPU that computes bf16 natively (:func:`native_bf16`), where the
    caller allows it (``allowed``: e.g. a model card gives its quality in bf16), measuring is on
    (``ATTNLAB_CALIBRATE``), and ``run``'s decoding is measurably faster in bf16 (:func:`probe`,
    cached per machine, threads, kernels and ``model``'s shapes). Call it outside timed code.

    Shape:
        no tensors.
    """
    check(precision)
    if precision != "auto":
        return precision, "asked for"
    if torch.device(device).type != "cpu":
        return "fp32", "auto: not a CPU"
    if not native_bf16():
        return "fp32", "auto: this CPU has no native bf16"
    if not allowed:
        return "fp32", "auto: the model card gives no bf16 quality within its bound"
    if not rules.calibrating():
        return "fp32", "auto: measuring is off (ATTNLAB_CALIBRATE=0)"
    key, path = _key(model_key(model)), _cache()
    known = machine.read_json_cache(path)
    times = known.get(key)
    where = "cached"
    # Times taken while the machine was busy hold until it is quiet, then are taken again.
    if rules.provisional(times) or not isinstance(times, dict) or not {"fp32", "bf16"} <= set(times):
        busy = rules.busy()
        times, where = probe(run, timer=timer), "measured now" + (", the machine busy" if busy else "")
        times["busy"] = busy
        known[key] = times
        machine.write_json_cache(path, known)
    chosen = choose(times)
    why = (
        f"auto: decoding took {1000 * times['fp32']:.1f} ms in fp32 and {1000 * times['bf16']:.1f} ms in bf16 "
        f"on this machine ({where})"
    )
    if where.startswith("measured now"):
        print(f"attnlab: precision auto → {chosen} ({why.removeprefix('auto: ')}; {path})", file=sys.stderr)
    return chosen, why
