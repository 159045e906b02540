"""Which kernel takes a piece of work where the choice is only about speed, and the one table of
the lines that decide it (:class:`Lines`): the attention kernel of ``backend="auto"``, the one-call
decoding step or the step of tensor operations, the BLAS or the packed products, one thread or
all of them.

The lines depend on the machine (the CPU, its caches, the BLAS), so they are measured on the
machine that runs them: :func:`lines` gives the table in force for the current number of torch
threads, measured once by a short calibration (:mod:`attnlab.accel.calibrate`, a few seconds on
first use) and cached per CPU model, library versions and kernel build under ``$ATTNLAB_CACHE``;
``attnlab calibrate`` measures again. The defaults (:data:`DEFAULTS`) are the lines drawn on the
Intel Xeon with AVX-512 BF16 of docs/measured.md; they hold where nothing is measured:

- ``ATTNLAB_CALIBRATE=0`` in the environment: no calibration, the defaults (the tests run so, for
  deterministic paths);
- ``ATTNLAB_LINES="blas_min_rows=4,one_thread_max_rows=8"``: force lines (over the calibrated or
  default table), one ``name=value`` per field of :class:`Lines`;
- :func:`using` (``with rules.using(rules.DEFAULTS): …``): a table for a block of code, in this
  thread (the tests and benchmarks pin lines so).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

Tensor = torch.Tensor

__all__ = [
    "Lines",
    "DEFAULTS",
    "CALIBRATED",
    "RETIRED",
    "lines",
    "using",
    "forced_from_env",
    "step_threads",
    "prefer_math",
    "prefer_one_call_step",
    "MATH_MAX_KEYS_LOW_PRECISION",
    "ONE_CALL_STEP_MAX_ROWS",
    "ONE_CALL_STEP_MAX_ROWS_ONE_THREAD",
    "BLAS_MIN_ROWS",
    "BLAS_MIN_ROWS_LARGE",
    "BLAS_LARGE_WEIGHTS",
    "BLAS_MIN_ROWS_BF16",
]


@dataclass(frozen=True)
class Lines:
    """Every line of attnlab's engine in one table: where each fast path takes over from another.
    Each is only about speed (both sides compute the same numbers, tested against each other)."""

    # Longest key length at which "auto" attention prefers the explicit matmuls for bf16/fp16 on a
    # CPU (prefer_math; docs/foundation.md; benchmarks/attention.py --crossover).
    math_max_keys_low_precision: int = 512
    # Most rows (sentences × beams) an fp32 step hands to the one-call C step where its products
    # cannot go to a BLAS, on several threads and on one (prefer_one_call_step; --step-rows).
    one_call_step_max_rows: int = 48
    one_call_step_max_rows_one_thread: int = 16
    # Fewest rows at which a product inside the layer kernels goes to the BLAS rather than the
    # packed panels (calibrated); from blas_min_rows_large for a matrix of more than
    # blas_large_weights weights (a vocabulary projection, calibrated); bf16 weights in pairs
    # (avx512_bf16) from blas_min_rows_bf16 (calibrated). 1 << 30: never.
    blas_min_rows: int = 2
    blas_min_rows_large: int = 16
    blas_large_weights: int = 1 << 20
    blas_min_rows_bf16: int = 8
    # Most source tokens (batch × length, padding included) the C encoder takes for an fp32 model
    # without the BLAS, and otherwise (attnlab.accel.engine.start; its working memory bound).
    encoder_max_tokens: int = 32
    encoder_max_tokens_one_call: int = 4096
    # Most rows (sentences × beams; source tokens for the encoder) of a step that the one-call
    # kernels run on one thread although torch has more (calibrated): where the other threads'
    # share is smaller than what waking them and waiting for them costs, as for one sentence on
    # some CPUs. 0: every step on all of torch's threads.
    one_thread_max_rows: int = 0


#: The lines drawn on the Intel Xeon (AVX-512 BF16, AMX) of docs/measured.md: the table where
#: nothing is measured (``ATTNLAB_CALIBRATE=0``, no kernels).
DEFAULTS = Lines()

#: Lines of earlier versions whose paths are gone (``accel.linear``'s router among attnlab's
#: kernel, oneDNN and ``F.linear``, removed by issue 38): nothing reads them any more, so
#: ``ATTNLAB_LINES`` naming one is ignored with a warning rather than failing a user's decode.
RETIRED = frozenset({"kernel_max_rows", "kernel_max_rows_one_thread", "onednn_max_rows", "onednn_min_weight"})

#: The fields the calibration measures (:mod:`attnlab.accel.calibrate`); the others keep their
#: defaults unless forced.
CALIBRATED = ("blas_min_rows", "blas_min_rows_large", "blas_min_rows_bf16", "one_thread_max_rows")

# The defaults under their former names (read-only: :func:`lines` has the table in force).
MATH_MAX_KEYS_LOW_PRECISION = DEFAULTS.math_max_keys_low_precision
ONE_CALL_STEP_MAX_ROWS = DEFAULTS.one_call_step_max_rows
ONE_CALL_STEP_MAX_ROWS_ONE_THREAD = DEFAULTS.one_call_step_max_rows_one_thread
BLAS_MIN_ROWS = DEFAULTS.blas_min_rows
BLAS_MIN_ROWS_LARGE = DEFAULTS.blas_min_rows_large
BLAS_LARGE_WEIGHTS = DEFAULTS.blas_large_weights
BLAS_MIN_ROWS_BF16 = DEFAULTS.blas_min_rows_bf16

_forced: contextvars.ContextVar[Lines | None] = contextvars.ContextVar("attnlab_lines", default=None)
_by_threads: dict[int, Lines] = {}
_static: Lines | None = None  # the defaults with ATTNLAB_LINES over them
_lock = threading.Lock()
#: Measures the table for a number of threads: set by attnlab.accel.calibrate when it is imported
#: (the package imports it), so that this module imports nothing of attnlab.
measure: Callable[[int], Lines] | None = None


def forced_from_env(base: Lines) -> Lines:
    """``base`` with the lines that ``ATTNLAB_LINES`` forces (``name=value,…``; a bad entry is a
    clear error, a line of :data:`RETIRED` a warning and otherwise ignored)."""
    spec = os.environ.get("ATTNLAB_LINES", "").strip()
    if not spec:
        return base
    names = {f.name for f in dataclasses.fields(Lines)}
    changes = {}
    for item in spec.replace(";", ",").split(","):
        if not item.strip():
            continue
        name, _, value = item.partition("=")
        name = name.strip()
        if name in RETIRED and value.strip().lstrip("-").isdigit():
            warnings.warn(f"ATTNLAB_LINES: {name} is no longer a line of attnlab's engine; ignored", stacklevel=2)
            continue
        if name not in names or not value.strip().lstrip("-").isdigit():
            raise ValueError(f"ATTNLAB_LINES: {item.strip()!r} is not NAME=INTEGER with NAME one of {sorted(names)}")
        changes[name] = int(value)
    return dataclasses.replace(base, **changes)


def busy() -> bool:
    """Whether other work keeps this machine's cores busy now (the 1-minute load average above the
    core count): a measurement taken then is provisional, and taken again once the machine is
    quieter (:mod:`attnlab.accel.calibrate`, :mod:`attnlab.accel.precision`)."""
    try:
        return os.getloadavg()[0] > (os.cpu_count() or 1)
    except OSError:  # (no load average on this platform)
        return False


def provisional(entry: object) -> bool:
    """Whether a cached measurement (a dict with ``"busy"``, as the calibration, the inference
    precision probe and the training precision probe write them) was taken while the machine was busy
    and the machine is quiet now: it is to be taken again."""
    return isinstance(entry, dict) and bool(entry.get("busy")) and not busy()


def calibrating() -> bool:
    """Whether lines are measured here (``ATTNLAB_CALIBRATE`` is not ``0``)."""
    return os.environ.get("ATTNLAB_CALIBRATE", "1").strip() not in ("0", "false", "no", "off")


def lines(measured: bool = True) -> Lines:
    """The table in force: :func:`using`'s in this block, else the one for the current number of
    torch threads (measured on first use, or read from the cache; the defaults where nothing is
    measured), with ``ATTNLAB_LINES`` over it. ``measured=False``: for a line the calibration does
    not measure (not in :data:`CALIBRATED`), without measuring anything first.

    Shape:
        no tensors.
    """
    table = _forced.get()
    if table is not None:
        return table
    threads = torch.get_num_threads()
    table = _by_threads.get(threads)
    if table is None and not measured:
        global _static
        if _static is None:
            _static = forced_from_env(DEFAULTS)
        return _static
    if table is None:
        with _lock:
            table = _by_threads.get(threads)
            if table is None:
                base = measure(threads) if calibrating() and measure is not None else DEFAULTS
                table = _by_threads[threads] = forced_from_env(base)
    return table


def forget() -> None:
    """Drop the tables resolved in this process (the next :func:`lines` resolves again)."""
    global _static
    with _lock:
        _by_threads.clear()
        _static = None


@contextlib.contextmanager
def using(table: Lines | None = None, **changes: int) -> Iterator[Lines]:
    """Inside the block (in this thread), ``table`` (default: the table in force) with ``changes``
    is the table in force: a test or a benchmark pins lines so.

    Shape:
        no tensors.
    """
    chosen = dataclasses.replace(table or lines(), **changes)
    token = _forced.set(chosen)
    try:
        yield chosen
    finally:
        _forced.reset(token)


def step_threads(rows: int) -> int:
    """Threads for a one-call step (or encoder) of ``rows`` rows: one up to the table's
    ``one_thread_max_rows``, else all of torch's."""
    threads = torch.get_num_threads()
    return 1 if threads > 1 and rows <= lines().one_thread_max_rows else threads


def prefer_math(q: Tensor, k: Tensor) -> bool:
    """Whether "auto" should take the math path (explicit matmuls and softmax) rather than the
    fused ``torch.nn.functional.scaled_dot_product_attention``, although no weights were asked for.
    Both compute the same attention; this only picks the faster one.

    PyTorch's fused CPU kernel is slower in bf16 than in fp32 at short lengths, while the
    explicit matmuls run on the CPU's bf16 instructions, so for bf16/fp16 on a CPU with at most
    ``math_max_keys_low_precision`` keys (:class:`Lines`) the math path is faster, in training
    (forward and backward) and for a decoding query alike. In fp32 the fused kernel wins at every
    length, and past a few hundred keys the ``(T, S)`` weights the math path keeps for backward cost
    more memory than they save time. docs/foundation.md has the measurements;
    ``benchmarks/attention.py --crossover`` measures them again.

    Shape:
        q ``(..., T, Dh)``, k ``(..., S, Dh)``
    """
    return (
        q.device.type == "cpu"
        and q.dtype in (torch.bfloat16, torch.float16)
        and k.shape[-2] <= lines(measured=False).math_max_keys_low_precision
    )


def prefer_one_call_step(rows: int, blas: bool) -> bool:
    """Whether an fp32 decoding step of ``rows`` rows should be attnlab's one C call rather than
    tensor operations: always where the call's products may go to the BLAS (``blas``), else up to
    ``one_call_step_max_rows`` (:class:`Lines`). At a few rows a step is mostly the fixed cost of
    ~100 tensor operations, which the one call does not pay; with more rows and no BLAS for the C
    products the BLAS behind PyTorch's operations wins. Both compute the same step; this only
    picks the faster one. docs/measured.md; ``benchmarks/translate_throughput.py --step-rows``."""
    if blas:
        return True
    table = lines(measured=False)
    limit = table.one_call_step_max_rows if torch.get_num_threads() > 1 else table.one_call_step_max_rows_one_thread
    return rows <= limit
