"""The precision of a run's training steps: ``"fp32"``, ``"bf16"`` or ``"auto"``, which trains in
bf16 only where a short probe of this model's steps on this machine measures it faster.

:class:`TrainingPrecision` is what the loop asks, once, before its first step: it returns the
configured precision, or for ``"auto"`` runs :func:`probe_precision` on one batch (or reads its
times from the per-machine cache, ``machine.cache_root()/precision.json``, keyed by the machine,
PyTorch, the threads, the device, the model's parameter shapes and the batch size) and lets
:func:`choose_precision` decide. :func:`autocast` is the context the steps run in.

Shape:
    no tensors of its own; batches are whatever the task yields.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from .. import machine, runs
from ..accel import precision as inference_precision
from ..accel import rules as accel_rules
from ..accel.precision import BF16_MIN_SPEEDUP

if TYPE_CHECKING:
    from .. import distributed
    from .config import TrainTask

__all__ = ["BF16_MIN_SPEEDUP", "TrainingPrecision", "autocast", "choose_precision", "probe_precision"]


def autocast(precision: str, device: torch.device):
    """The context a training step runs in: nothing for ``"fp32"``, bf16 autocast for ``"bf16"``
    (weights and AdamW's state stay fp32); any other precision is a ValueError.

    Shape:
        no tensors; a context manager.
    """
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision == "bf16":
        # Matrix products run in bf16, reductions and the loss in fp32 (PyTorch's autocast lists);
        # bf16 has fp32's exponent range, so no loss scaling is needed (unlike fp16).
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    raise ValueError(f"precision must be 'fp32' or 'bf16', got {precision!r}")


# One rule for "auto", training and inference alike: bf16 only when it is measurably faster
# (attnlab.accel.precision's BF16_MIN_SPEEDUP margin), since it changes the arithmetic.
choose_precision = inference_precision.choose


def _precision_cache() -> Path:
    return machine.cache_root() / "precision.json"


def _batch_numel(batch: Any) -> int:
    """Elements in the tensors of a batch (a tensor, a dataclass, a mapping or a sequence of them)."""
    if isinstance(batch, torch.Tensor):
        return batch.numel()
    if hasattr(batch, "__dataclass_fields__"):
        batch = [getattr(batch, f.name) for f in fields(batch)]
    elif isinstance(batch, dict):
        batch = list(batch.values())
    if isinstance(batch, (list, tuple)):
        return sum(_batch_numel(x) for x in batch)
    return 0


def _precision_key(model: nn.Module, device: torch.device, batch: Any) -> str:
    """What the probe's answer depends on: the machine, PyTorch, the threads, the device, the
    model's parameter shapes and the batch size (rounded up to a power of two)."""
    import hashlib

    shapes = ";".join(f"{n}:{tuple(p.shape)}" for n, p in model.named_parameters())
    cpu = f"{machine.cpu_name()}|{machine.cpu_flags()}"  # bf16 support is in the flags
    bucket = 1 << max(_batch_numel(batch), 1).bit_length()
    raw = f"{cpu}|{torch.__version__}|{torch.get_num_threads()}|{device}|{shapes}|{bucket}"
    return hashlib.sha256(raw.encode()).hexdigest()[:20]


def probe_precision(step: Callable[[str], None], *, repeats: int = 2, clear: float = 2.0) -> dict[str, float]:
    """Seconds of one training step (forward and backward) in fp32 and in bf16: the fastest of
    ``repeats`` interleaved runs each, after one untimed run and one warm-up run each. ``step(precision)`` runs one.
    When the warm-ups already differ by ``clear`` × or more (bf16 emulated on a CPU without bf16
    instructions is many times slower), their times are the answer and the timed runs are skipped.

    Shape:
        no tensors; returns ``{"fp32": s, "bf16": s}``.
    """

    def timed(precision: str) -> float:
        start = time.perf_counter()
        step(precision)
        return time.perf_counter() - start

    # One untimed run of each first: the very first step pays one-time costs (allocations, kernel
    # selection) that would otherwise count against fp32, which runs first, and tip the choice.
    for precision in ("fp32", "bf16"):
        step(precision)
    best = {precision: timed(precision) for precision in ("fp32", "bf16")}  # warm-ups
    if max(best.values()) >= clear * min(best.values()):
        return best
    best = {"fp32": float("inf"), "bf16": float("inf")}
    for _ in range(repeats):
        for precision in ("fp32", "bf16"):
            best[precision] = min(best[precision], timed(precision))
    return best


class TrainingPrecision:
    """The precision of one run's steps, settled once before its first step
    (:meth:`resolve`); the run keeps it, and a resumed run keeps the one it started with
    (``TrainState.precision``).

    Shape:
        batches are whatever the task yields; the probe calls ``task.loss`` on one.
    """

    def __init__(self, configured: str, model: nn.Module, task: TrainTask, engine: distributed.Engine) -> None:
        self.configured = configured  # TrainConfig.precision: "fp32", "bf16" or "auto"
        self.model = model  # the unwrapped model: the probe runs no collectives
        self.task, self.engine = task, engine

    def resolve(self, batch: Any) -> str:
        """The configured precision, or for ``"auto"`` bf16 only where :func:`probe_precision` on
        ``batch`` measures it at least :data:`BF16_MIN_SPEEDUP` × as fast as fp32 here. The times
        are cached per machine and model shape; rank 0 decides for every rank. The probe leaves the
        weights, gradients and random states as they were.

        Shape:
            ``batch``: one of the task's batches; returns ``"fp32"`` or ``"bf16"``.
        """
        engine = self.engine
        if self.configured != "auto":
            return self.configured
        if not accel_rules.calibrating():
            return "fp32"  # measuring is off (ATTNLAB_CALIBRATE=0, the tests): fp32's arithmetic, no probe
        use_bf16 = False
        if engine.is_main:
            key = _precision_key(self.model, engine.device, batch)
            cache = _precision_cache()
            known = machine.read_json_cache(cache)
            times, where = known.get(key), "cached"
            # Times taken while the machine was busy hold until it is quiet, then are taken again.
            if accel_rules.provisional(times) or not isinstance(times, dict) or not {"fp32", "bf16"} <= set(times):
                busy = accel_rules.busy()
                times, where = self.probe(batch), "measured now" + (", the machine busy" if busy else "")
                times["busy"] = busy
                known[key] = times
                machine.write_json_cache(cache, known)
            use_bf16 = choose_precision(times) == "bf16"
            print(
                f"attnlab: precision auto → {'bf16' if use_bf16 else 'fp32'}: one training step took "
                f"{1000 * times['fp32']:.0f} ms in fp32 and {1000 * times['bf16']:.0f} ms in bf16 "
                f"(bf16 {times['fp32'] / times['bf16']:.2f}× as fast) on this machine for this model "
                f"({where}; {cache})",
                file=sys.stderr,
            )
        return "bf16" if engine.broadcast_flag(use_bf16) else "fp32"

    def probe(self, batch: Any) -> dict[str, float]:
        """:func:`probe_precision` on the unwrapped model (no collectives) and one batch.

        Shape:
            ``batch``: one of the task's batches; returns ``{"fp32": s, "bf16": s}``.
        """
        rng = runs.rng_state()

        def step(precision: str) -> None:
            with autocast(precision, self.engine.device):
                loss, _ = self.task.loss(self.model, batch)
            loss.backward()
            self.model.zero_grad(set_to_none=True)

        try:
            return probe_precision(step)
        finally:
            self.model.zero_grad(set_to_none=True)
            runs.set_rng_state(rng)
