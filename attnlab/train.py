"""One training loop for every model in attnlab.

The loop knows nothing model-specific. A *task* object supplies what differs between a
translator, a language model or a classifier:

- ``batches(epoch, rank, world_size)`` — the epoch's batches, in an order fixed by the seed;
- ``loss(model, batch)`` — ``(mean loss, number of target tokens)`` for one batch;
- ``evaluate(model)`` — a dict of validation metrics;
- ``metric`` / ``maximize`` — which metric picks the best checkpoint and drives early stopping;
- ``checkpoint_payload()`` — the model config dict and the tokenizers to save beside weights.

What the loop adds: AdamW, warm-up + inverse-square-root (or cosine) schedule, gradient
accumulation and clipping, bf16 autocast, ``torch.compile``, evaluation, early stopping, a progress
bar, a JSON-lines log, atomic checkpoints and *exact* resume (the data order and every RNG are
restored, so an interrupted-then-resumed run reproduces the uninterrupted run's losses).

**When a run stops** (:data:`STOP_REASONS`, ``TrainResult.stop_reason``): after its epochs, at
``max_steps``, when the clock (``time_budget_s``) runs out, when the metric has not improved for
``patience`` evaluations, or once an evaluation's metric reaches ``target`` (≥ it when the metric
is maximised, ≤ for a loss). A target makes a run stop on quality rather than on the clock, so
that where it stops does not depend on the machine's speed; a time budget beside it is then a
safety net. Only rank 0 evaluates; its decision is broadcast to the others.

**How it reads.** :class:`TrainState` is where the run stands (step, epoch, position in the
epoch, tokens, the training clock, the best metrics and patience) and, one key per field, what a
resumable checkpoint saves (with the optimizer, scheduler and random states). :class:`Trainer`
holds the model, the optimizer and the state; its methods are the named steps: ``resume``,
``step`` (one optimizer update), ``evaluate``, ``checkpoint`` and ``fit``, the loop that calls
them. :func:`train` builds one and calls ``fit``.

**Several processes** (``torchrun``, see :mod:`attnlab.distributed` and docs/distributed.md).
Every rank runs this same loop on its own shard of each epoch's batches (``task.batches(epoch,
rank, world_size)``). The model is wrapped in DistributedDataParallel (``strategy="ddp"``: every
rank holds the whole model, gradients are all-reduced) or sharded with FSDP2 ``fully_shard``
(``strategy="fsdp"``: parameters, gradients and AdamW moments are split over the ranks); how is
the business of the :class:`attnlab.distributed.Engine`, through which the loop does everything
that involves other ranks. Only rank 0 logs, evaluates and writes checkpoints; the others wait
in a collective meanwhile. A resumable
checkpoint holds the random-number state of *every* rank, so resuming with the same number of
processes is exact too.

**How gradients are averaged.** Each optimizer step's gradient is the gradient of the mean loss
over *all target tokens of the global batch* — every micro-batch of the accumulation group on
every rank — so each token weighs the same however the tokens fall on ranks and micro-batches:

    g = Σ_{rank r, micro-batch k} n_rk · ∇ mean_loss_rk  /  Σ_{r,k} n_rk

Each micro-batch back-propagates ``n_rk · mean_loss_rk`` (its summed loss); DDP/FSDP average the
ranks' sums (÷ world_size) and the loop then multiplies by ``world_size / N`` with ``N`` the
global token count (one small all-reduce per step). Hence one step over K accumulated batches
equals one step over their union, and 2 ranks × 1 batch equal 1 process × 2 accumulated batches.
(Averaging per-batch means instead would let a rank holding a short batch pull as hard as one
holding a long batch.) A lone micro-batch on a lone process back-propagates its mean loss
directly: the same gradient, without the rounding of the multiply-divide.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from . import checkpoint as ckpt
from . import distributed, machine, openmp, runs
from .accel import rules as accel_rules
from .models.config import check_fields

__all__ = [
    "TrainConfig",
    "TrainLog",
    "TrainResult",
    "TrainState",
    "TrainTask",
    "Trainer",
    "lr_multiplier",
    "seed_everything",
    "train",
]


#: The learning-rate schedules of :func:`lr_multiplier` (``TrainConfig.schedule``).
SCHEDULES = ("inverse_sqrt", "cosine", "constant")
#: The numeric precisions of the training steps (``TrainConfig.precision``).
PRECISIONS = ("fp32", "bf16", "auto")
#: Why a run stops (``TrainResult.stop_reason``): its epochs ran out, ``max_steps``, ``time_budget_s``,
#: ``patience`` (early stopping) or ``target``.
STOP_REASONS = ("epochs", "max_steps", "time_budget", "early_stopping", "target")


@dataclass
class TrainConfig:
    out_dir: str | None = None  # checkpoints + log.jsonl go here (None: write nothing)
    epochs: int = 10  # passes over the training data (an upper bound with max_steps/time_budget_s)
    max_steps: int | None = None  # stop after this many optimizer steps
    time_budget_s: float | None = None  # stop after this many seconds of training (evaluation excluded)
    lr: float = 1e-3  # peak learning rate, reached at the end of warm-up
    warmup_steps: int = 400  # linear warm-up; avoids early divergence with Adam (Vaswani §5.3)
    schedule: str = "inverse_sqrt"  # "inverse_sqrt" (Vaswani §5.3), "cosine" (to 10% at max_steps, or at time_budget_s without max_steps) or "constant"
    weight_decay: float = 0.01  # decoupled weight decay (AdamW), not applied to biases/norms/embeddings
    betas: tuple[float, float] = (0.9, 0.98)  # Adam β's of the paper (§5.3)
    eps: float = 1e-9  # Adam ε of the paper (§5.3)
    clip_norm: float | None = 1.0  # clip the global gradient norm (None: no clipping)
    grad_accum: int = 1  # batches whose gradients are summed into one optimizer step
    # "fp32", "bf16" (autocast on CPU, CUDA, MPS; weights and AdamW state stay fp32) or "auto": bf16
    # only where a short probe of this model's steps on this machine shows it faster (cached per machine;
    # fp32 without probing under ATTNLAB_CALIBRATE=0). Like-for-like experiments pin "fp32".
    precision: str = "auto"
    compile: bool = False  # torch.compile the model for training steps (evaluation runs the plain model)
    strategy: str = "ddp"  # with several processes: "ddp" (replicate the model) or "fsdp" (shard it, FSDP2)
    eval_every_steps: int | None = None  # evaluate every N steps (None: at the end of each epoch)
    save_every_steps: int | None = None  # also save a resumable checkpoint every N steps
    patience: int | None = None  # early stopping: evaluations without improvement before stopping
    target: float | None = None  # stop once the validation metric reaches this value (≥ when maximised, ≤ for a loss)
    seed: int = 0  # seeds data order, initialisation and dropout
    log_every: int = 50  # optimizer steps between log lines
    progress: bool = True  # show a progress bar
    device: str = "cpu"  # "cpu", "cuda", "mps" or "auto" (CUDA, else MPS, else CPU); "cuda" = this rank's GPU
    # CPU threads of the steps: 0 follows the cores other processes leave free (openmp.ThreadGovernor),
    # re-checked every few seconds, when running alone on a CPU without OMP_NUM_THREADS set; N fixes
    # N threads (what a bit-exact comparison of two runs needs); None leaves PyTorch's setting.
    threads: int | None = 0
    # Replace a run already in out_dir (its log.jsonl, last/, best/) when training starts; without it
    # such a folder is refused unless resuming, so that no run is ever overwritten by mistake.
    overwrite: bool = False

    def __post_init__(self) -> None:
        # Every field is checked when the config is made (a preset, an override, replace()), so a
        # bad setting stops the run before any data is read, not at the first evaluation. The
        # device is checked against this machine by distributed.resolve_device when training starts.
        check_fields(
            self,
            positive=(
                "lr",
                "eps",
                "clip_norm",
                "grad_accum",
                "eval_every_steps",
                "save_every_steps",
                "patience",
                "log_every",
            ),
            non_negative=("epochs", "max_steps", "time_budget_s", "warmup_steps", "weight_decay", "threads"),
            choices={"schedule": SCHEDULES, "precision": PRECISIONS, "strategy": ("ddp", "fsdp")},
        )
        if not all(0.0 <= beta < 1.0 for beta in self.betas):
            raise ValueError(f"betas must each be in [0, 1), got {self.betas!r}")

    def check_schedule(self) -> None:
        """Raise ``ValueError`` unless the schedule can run: ``"cosine"`` decays towards the end of
        the run, so it needs ``max_steps`` or ``time_budget_s`` to know where that is. (Checked when
        training starts, not in ``__post_init__``: settings are often given one at a time.)"""
        if self.schedule == "cosine" and not self.max_steps and not self.time_budget_s:
            raise ValueError("schedule='cosine' needs max_steps or time_budget_s (--minutes) to know when the run ends")


class TrainTask(Protocol):
    """What :func:`train` needs from a model-specific task (see the module docstring).

    ``loss`` may receive the model wrapped (DistributedDataParallel, FSDP, ``torch.compile``):
    it must only *call* it (its forward), not reach for other methods or attributes.
    ``evaluate`` always receives the plain model and runs on rank 0 only.

    Shape:
        ``loss`` returns a scalar mean loss and the number of tokens (or examples) it averages.
    """

    metric: str
    maximize: bool
    # Optional (False when absent): True when some of the model's parameters take no part in the
    # loss (BERT's pooler in MLM-only training). DistributedDataParallel must then look for them
    # after every backward (find_unused_parameters), an extra walk over the autograd graph that
    # every other task is spared. tests/recipes/test_recipe_gradients.py checks each recipe's answer.
    # unused_parameters: bool

    def batches(self, epoch: int, rank: int, world_size: int) -> list[Any]: ...

    def loss(self, model: nn.Module, batch: Any) -> tuple[torch.Tensor, int]: ...

    def evaluate(self, model: nn.Module) -> dict[str, float]: ...

    def checkpoint_payload(self) -> tuple[dict, dict]: ...


@dataclass
class TrainResult:
    steps: int  # optimizer steps taken in total
    epochs_done: float  # epochs completed (fractional when stopped mid-epoch)
    best: dict[str, float] | None  # metrics of the best evaluation
    history: list[dict] = field(default_factory=list)  # every log record of this process
    train_seconds: float = 0.0  # time spent in training steps (evaluation excluded)
    tokens: int = 0  # target tokens trained on, summed over all ranks
    # Why the run stopped: one of STOP_REASONS. Reaching the target outranks a step or time limit
    # reached at the same step (the run met its goal), which outranks early stopping, which outranks
    # the end of the epochs.
    stop_reason: str = ""
    best_saved: bool = False  # this call wrote out_dir/best (False: nothing was saved there)
    already_finished: bool = False  # resume=True found the run finished: nothing was trained or written
    metric: str = ""  # the task's metric: the one that picks the best evaluation and meets the target
    precision: str = ""  # the precision the steps ran in ("auto" resolved to "fp32" or "bf16")

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.train_seconds if self.train_seconds else 0.0


def seed_everything(seed: int) -> None:
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def lr_multiplier(step: int, cfg: TrainConfig, total_steps: int | None = None, progress: float | None = None) -> float:
    """Learning-rate factor for optimizer step ``step`` (1-based), peak 1.0 after warm-up.

    ``"cosine"`` decays over ``total_steps``, or, when the run is bounded by time instead
    (``progress``: the share of ``time_budget_s`` spent so far), over the time budget: the rate
    then reaches its floor when the clock runs out, whatever the machine's speed. Annealing at
    the very end of the budget is what a fixed-time run gains from a schedule (Hägele et al.
    2024, §3: the cool-down, not the schedule's shape, gives the final drop in loss). A rate
    paced by the clock differs from run to run (a resumed run continues from the saved seconds);
    for bit-exact reruns and resumes give ``max_steps``.
    """
    step = max(step, 1)
    warm = max(cfg.warmup_steps, 1)
    if step < warm:
        return step / warm
    if cfg.schedule == "inverse_sqrt":
        return math.sqrt(warm / step)
    if cfg.schedule == "cosine":
        if total_steps:
            progress = (step - warm) / max(total_steps - warm, 1)
        elif progress is None:
            raise ValueError("schedule='cosine' needs max_steps or time_budget_s")
        progress = min(max(progress, 0.0), 1.0)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))
    if cfg.schedule == "constant":
        return 1.0
    raise ValueError(f"unknown schedule {cfg.schedule!r}; choose inverse_sqrt, cosine or constant")


def _param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    # Decay only matrices of linear maps: decaying norms, biases and embeddings hurts
    # (Loshchilov & Hutter 2019 decouple decay; the exclusions follow common practice).
    decay, no_decay = [], []
    seen: set[int] = set()
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if not p.requires_grad or id(p) in seen:
                continue
            seen.add(id(p))
            is_matrix = p.dim() >= 2 and not isinstance(module, nn.Embedding)
            (decay if is_matrix and name == "weight" else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def _autocast(precision: str, device: torch.device):
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision == "bf16":
        # Matrix products run in bf16, reductions and the loss in fp32 (PyTorch's autocast lists);
        # bf16 has fp32's exponent range, so no loss scaling is needed (unlike fp16).
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    raise ValueError(f"precision must be 'fp32' or 'bf16', got {precision!r}")


#: A probe picks bf16 only when its step is at least this much faster than fp32's (noise margin).
BF16_MIN_SPEEDUP = 1.05


def choose_precision(times: dict[str, float]) -> str:
    """The precision ``"auto"`` trains in, given a probe's seconds per step (:func:`probe_precision`):
    bf16 only when it is measurably faster, at least :data:`BF16_MIN_SPEEDUP` × as fast as fp32,
    else fp32. bf16 changes the arithmetic, so a tie or a gain within noise keeps fp32; and the
    step chosen is never slower than the faster one by more than that margin (5%).

    Shape:
        no tensors; ``{"fp32": s, "bf16": s}`` → ``"fp32"`` or ``"bf16"``.
    """
    return "bf16" if times["bf16"] * BF16_MIN_SPEEDUP <= times["fp32"] else "fp32"


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


def task_leaves_parameters_unused(task: TrainTask) -> bool:
    """Whether ``task``'s loss leaves some of the model's parameters out (its optional
    ``unused_parameters``; False when it does not say), which DDP must be told."""
    return bool(getattr(task, "unused_parameters", False))


def _rank_seed(seed: int, rank: int) -> int:
    # Rank 0 keeps the configured seed (a one-process run is unchanged); other ranks get their own
    # streams, so that their dropout masks differ.
    return seed + 1_000_003 * rank


def _scale_grads(params: Iterable[nn.Parameter], factor: float) -> None:
    for p in params:
        if p.grad is not None:
            p.grad.mul_(factor)


def _better(a: float, b: float | None, maximize: bool) -> bool:
    return b is None or (a > b if maximize else a < b)


def _reached(value: float, target: float, maximize: bool) -> bool:
    return value >= target if maximize else value <= target


_START_AGAIN = "start the run again without --resume (with --overwrite to replace it)"


class TrainLog:
    """A run's append-only JSON-lines log, ``Trainer.log`` (only rank 0 writes): one record per
    :meth:`write`; on resume, the records logged after the checkpoint are dropped.

    Shape:
        no tensors.
    """

    def __init__(self, path: Path | None, resumed: TrainState | None) -> None:
        self.path = path
        self.kept = 0  # records kept from the interrupted run
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        if resumed is None:
            path.write_text("")
        elif path.exists():
            # Drop what the interrupted run logged after its last checkpoint: those steps are about
            # to be run again. The checkpoint counted the records before it; cutting by step would
            # keep an evaluation logged after a checkpoint of the same step (the final one).
            records = _read_log(path)
            if resumed.log_records is None:
                kept = [line for line, record in records if record.get("step", 0) <= resumed.step]
            else:
                if len(records) < resumed.log_records:
                    print(
                        f"attnlab: {path}: {len(records)} records where the checkpoint saw "
                        f"{resumed.log_records}; lines were lost, the log goes on from here",
                        file=sys.stderr,
                    )
                kept = [line for line, _ in records[: resumed.log_records]]
            self.kept = len(kept)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text("".join(line + "\n" for line in kept))
            tmp.replace(path)  # a crash while rewriting keeps the old log whole

    def write(self, record: dict) -> None:
        if self.path is not None:
            with self.path.open("a") as f:
                f.write(json.dumps(record) + "\n")


def _read_log(path: Path) -> list[tuple[str, dict]]:
    """The records of a run's log, each with its line. A last line without its newline was torn by
    an interrupted append: it is dropped (saying so on stderr). Any other line that is not a JSON
    object is damage the loop did not cause: a ValueError naming ``file:line``."""
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    torn = lines.pop()  # "" when the file ends with a newline
    if torn.strip():
        try:
            complete = isinstance(json.loads(torn), dict)  # whole, only its newline is missing
        except json.JSONDecodeError:
            complete = False
        if complete:
            lines.append(torn)
        else:
            print(
                f"attnlab: {path}:{len(lines) + 1}: dropped a partial last line left by an interrupted write",
                file=sys.stderr,
            )
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"--resume: {path}:{number}: damaged log line ({exc.msg}); repair or delete that line, "
                f"or {_START_AGAIN}"
            ) from None
        if not isinstance(record, dict) or not isinstance(record.get("step", 0), int):
            # ValueError, not TypeError: the file is wrong, not the caller.
            raise ValueError(  # noqa: TRY004
                f"--resume: {path}:{number}: not a log record (a JSON object with an integer step); "
                f"repair or delete that line, or {_START_AGAIN}"
            )
        records.append((line, record))
    return records


@dataclass
class _Window:
    """The training loss and tokens since the last log line (a log line reports their mean)."""

    loss: float = 0.0  # summed loss of the steps since the last log line, all ranks
    tokens: int = 0  # their target tokens, all ranks
    start: float = field(default_factory=time.perf_counter)  # when the window opened


# Saved by every version of this loop, with their types; world_size, strategy and rng_per_rank came with
# several processes, stop_reason with the rule that a finished run is not resumed.
_REQUIRED_STATE = {
    "optimizer": dict,
    "scheduler": dict,
    "step": int,
    "epoch": int,
    "batch_in_epoch": int,
    "tokens": int,
    "train_seconds": (int, float),
    "best": (dict, type(None)),
    "evals_without_gain": int,
    "rng": dict,
    "config": dict,
}


@dataclass
class TrainState:
    """Where a run stands: what the loop updates from step to step and, one key per field, what
    ``out_dir/last/trainer_state.pt`` holds for ``resume=True``.

    The position in the data, the counters, the clock and the early-stopping record change with
    every step and are restored on resume; ``config``, ``world_size`` and ``strategy`` describe
    the run that writes the checkpoint; ``optimizer``, ``scheduler`` and the random states are
    captured when ``out_dir/last`` is written (None in between) and put back on resume.

    Shape:
        no tensors except inside ``optimizer``, ``rng`` and ``rng_per_rank``.
    """

    step: int = 0  # optimizer steps taken
    epoch: int = 0  # the epoch being trained (0-based)
    batch_in_epoch: int = 0  # accumulation groups of this epoch already trained: the position in the data
    tokens: int = 0  # target tokens trained on, summed over all ranks
    # Seconds spent in training steps (evaluation excluded): the clock of time_budget_s and of the cosine
    # schedule paced by it.
    train_seconds: float = 0.0
    best: dict[str, float] | None = None  # metrics of the best evaluation so far
    evals_without_gain: int = 0  # evaluations since the best one (for patience)
    # Why the run stopped, set in the checkpoint written after its final evaluation ("" until then):
    # resuming a run that has it, and whose limit this run's settings keep, finds nothing to do.
    stop_reason: str = ""
    # The precision the steps ran in ("fp32"/"bf16"; "auto" resolved once, kept for an exact resume).
    precision: str = ""
    # Records in out_dir/log.jsonl when the state was saved: a resumed run keeps exactly those (None:
    # a checkpoint from before this count, whose log is cut by step instead).
    log_records: int | None = 0
    config: dict[str, Any] = field(default_factory=dict)  # the run's TrainConfig, as a dict (asdict)
    world_size: int = 1  # number of processes of the run
    strategy: str = "ddp"  # the run's TrainConfig.strategy
    optimizer: dict | None = None  # AdamW's state_dict (the whole, unsharded one under FSDP)
    scheduler: dict | None = None  # the learning-rate scheduler's state_dict
    rng: dict | None = None  # rank 0's random states (runs.rng_state())
    rng_per_rank: list[dict] | None = None  # every rank's random states, with several processes

    def to_dict(self) -> dict[str, Any]:
        """The ``trainer_state.pt`` dict: plain types and tensors, so it loads with ``weights_only=True``.

        Shape:
            tensors as held.
        """
        state = {f.name: getattr(self, f.name) for f in fields(self)}  # not asdict: it would deep-copy tensors
        if state["rng_per_rank"] is None:
            del state["rng_per_rank"]
        return state

    @classmethod
    def from_dict(cls, state: dict[str, Any] | None, where: Path) -> TrainState:
        """Read what :meth:`to_dict` wrote (``where``: the checkpoint, for error messages).

        Raises:
            ValueError: no trainer state, or one this loop did not write (a one-line message
                naming the file).

        Shape:
            tensors as saved.
        """
        path = where / ckpt.TRAINER_STATE_FILE
        if state is None:
            raise ValueError(f"{path}: missing; {where} is not a checkpoint to resume from")
        if not isinstance(state, dict):  # the file is wrong, not the caller: ValueError
            raise ValueError(  # noqa: TRY004
                f"{path}: holds a {type(state).__name__}, not the trainer state of attnlab.train"
            )
        missing = [name for name in _REQUIRED_STATE if name not in state]
        if missing:
            raise ValueError(f"{path}: lacks {missing}; it was not written by attnlab.train")
        wrong = [
            name
            for name, kind in _REQUIRED_STATE.items()
            if not isinstance(state[name], kind) or (kind is int and isinstance(state[name], bool))
        ]
        if not wrong and not isinstance(state["config"].get("grad_accum"), int):
            wrong = ["config"]
        world_size = state.get("world_size", 1)
        if not isinstance(world_size, int) or world_size < 1:
            wrong.append("world_size")
        elif world_size > 1 and not (
            isinstance(state.get("rng_per_rank"), list) and len(state["rng_per_rank"]) == world_size
        ):
            wrong.append("rng_per_rank")
        if not isinstance(state.get("stop_reason", ""), str):
            wrong.append("stop_reason")
        if not isinstance(state.get("log_records", 0), int) or state.get("log_records", 0) < 0:
            wrong.append("log_records")
        if wrong:
            raise ValueError(f"{path}: damaged: {wrong} do not have the types attnlab.train saves")
        return cls(**{"log_records": None, **{f.name: state[f.name] for f in fields(cls) if f.name in state}})

    def rng_of(self, rank: int) -> dict:
        """The random states saved for ``rank``."""
        return self.rng_per_rank[rank] if self.world_size > 1 else self.rng


class Trainer:
    """One run of :func:`train`: the model in its engine, the optimizer and schedule, the loop state.

    Its methods are the loop's named steps — :meth:`resume`, :meth:`step`, :meth:`evaluate`,
    :meth:`checkpoint` — and :meth:`fit`, the loop that calls them. Whatever differs between one
    process and several is behind ``engine`` (:class:`attnlab.distributed.Engine`).

    Shape:
        batches are whatever the task yields; the loop only calls ``task.loss`` on them.
    """

    def __init__(
        self, model: nn.Module, task: TrainTask, cfg: TrainConfig, engine: distributed.Engine, *, resume: bool = False
    ) -> None:
        self.model, self.task, self.cfg, self.engine = model, task, cfg, engine
        self.out = Path(cfg.out_dir) if cfg.out_dir else None
        self.state = TrainState(config=asdict(cfg), world_size=engine.world_size, strategy=cfg.strategy)
        self.best_saved = False  # whether this run has written out_dir/best
        saved = self.resume() if resume else None  # loads the weights, which the engine then wraps
        # Resuming a run that reached its limit (under this run's settings) trains and writes nothing.
        self.finished = saved.stop_reason if saved is not None and saved.stop_reason and self._limit(saved) else None
        if self.out is not None and engine.is_main:
            if resume:
                runs.remove_save_leftovers(self.out)  # what a crash left of a save that has completed
            elif cfg.overwrite:
                runs.clear_run_folder(self.out)  # checked by train(); deleted only now that training starts
        engine.barrier("the start of training")
        # what task.loss calls
        self.forward = engine.wrap(
            model, compile=cfg.compile, find_unused_parameters=task_leaves_parameters_unused(task)
        )
        self.params = engine.parameters()
        self.optimizer = torch.optim.AdamW(
            _param_groups(engine.trained, cfg.weight_decay), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: lr_multiplier(s + 1, cfg, cfg.max_steps, self._time_progress())
        )
        if saved is None:
            seed_everything(_rank_seed(cfg.seed, engine.rank))
        else:  # the rest of resume(), which needed the optimizer and the scheduler
            try:
                engine.load_optimizer_state(self.optimizer, saved.optimizer)
                self.scheduler.load_state_dict(saved.scheduler)
                runs.set_rng_state(saved.rng_of(engine.rank))
            except (ValueError, TypeError, KeyError, IndexError, RuntimeError) as err:
                raise ValueError(
                    f"--resume: {self.resumed_from / ckpt.TRAINER_STATE_FILE}: its optimizer, schedule "
                    f"or random states do not fit this run ({type(err).__name__}: "
                    f"{str(err).strip().splitlines()[0] if str(err).strip() else ''}); "
                    f"{_START_AGAIN}"
                ) from None
        log = self.out / runs.RUN_LOG_FILE if (self.out and engine.is_main and not self.finished) else None
        self.log = TrainLog(log, self.state if resume else None)
        if self.state.log_records is None:  # a checkpoint from before the count: count what was kept
            self.state.log_records = self.log.kept
        self.history: list[dict] = []  # every log record of this process
        self.window = _Window()
        # A time budget with no step limit is the binding constraint: the bar counts its seconds, not steps.
        # With a target it is a safety net, and no one knows which limit will bind: the bar counts steps.
        self.by_time = cfg.max_steps is None and cfg.time_budget_s is not None and cfg.target is None
        self.bar = None
        self.bar_metric: dict[str, str] = {}  # the latest evaluation, shown beside the training loss

    def resolve_precision(self, batch: Any) -> str:
        """The precision of this run's steps: the configured one, or for ``"auto"`` the saved
        choice of a resumed run, else bf16 only where :func:`probe_precision` on ``batch``
        measures it at least :data:`BF16_MIN_SPEEDUP` × as fast as fp32 here. The times are
        cached per machine and model shape; rank 0 decides for every rank. The probe leaves the
        weights, gradients and random states as they were."""
        cfg, engine, state = self.cfg, self.engine, self.state
        if cfg.precision != "auto":
            return cfg.precision
        if state.precision:
            return state.precision
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
                times, where = self._probe(batch), "measured now" + (", the machine busy" if busy else "")
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

    def _probe(self, batch: Any) -> dict[str, float]:
        """:func:`probe_precision` on the unwrapped model (no collectives) and one batch."""
        rng = runs.rng_state()

        def step(precision: str) -> None:
            with _autocast(precision, self.engine.device):
                loss, _ = self.task.loss(self.model, batch)
            loss.backward()
            self.model.zero_grad(set_to_none=True)

        try:
            return probe_precision(step)
        finally:
            self.model.zero_grad(set_to_none=True)
            runs.set_rng_state(rng)

    def _time_progress(self) -> float | None:
        # Read when the scheduler steps: the share of the time budget trained before the current step.
        return self.state.train_seconds / self.cfg.time_budget_s if self.cfg.time_budget_s else None

    # ----------------------------------------------------------------------------------------
    # The named steps
    # ----------------------------------------------------------------------------------------

    def resume(self) -> TrainState:
        """Continue from ``out_dir/last``: check that it was written with this run's settings,
        load its weights into the model and take over its position, counters and best metrics.

        Returns the saved state, whose optimizer, schedule and random states ``__init__`` puts
        back once those exist.

        The checkpoint is ``out_dir/last``, or the intact ``out_dir/.last.previous`` that a save
        interrupted between its two renames left (:func:`attnlab.runs.resume_point`).

        Raises:
            FileNotFoundError: neither exists.
            ValueError: it was written with another number of processes, ``grad_accum`` or
                ``strategy``, or not by this loop, or it is damaged (one line naming the file).
        """
        out, cfg, engine = self.out, self.cfg, self.engine
        if out is None:
            raise FileNotFoundError("--resume: no checkpoint to resume from (no out_dir)")
        where = self.resumed_from = runs.resume_point(out)
        if where.name != "last" and engine.is_main:
            print(
                f"attnlab: resuming from {where}: a save of {out / 'last'} was interrupted between its two "
                "renames; the next save completes it",
                file=sys.stderr,
            )
        try:
            last = ckpt.load_checkpoint(where)
            saved = TrainState.from_dict(last.trainer_state, where)
        except (ValueError, TypeError, FileNotFoundError) as err:
            raise ValueError(f"--resume: {err}; {_START_AGAIN}") from None
        was = {"world_size": saved.world_size, "grad_accum": saved.config["grad_accum"], "strategy": saved.strategy}
        now = {"world_size": engine.world_size, "grad_accum": cfg.grad_accum, "strategy": cfg.strategy}
        if engine.world_size == 1:
            was.pop("strategy"), now.pop("strategy")  # one process: there is nothing to shard
        if was != now:
            raise ValueError(
                f"--resume: {where} was written with {was}, this run has {now}; the position in "
                "the epoch and the per-rank random states depend on them, so resume with the same settings"
            )
        ckpt.load_weights(self.model, last)
        # This run's settings are the ones saved from now on; the captured states are put back
        # into the optimizer, scheduler and generators, and captured afresh at each checkpoint.
        self.state = replace(
            saved,
            config=self.state.config,
            world_size=self.state.world_size,
            strategy=self.state.strategy,
            optimizer=None,
            scheduler=None,
            rng=None,
            rng_per_rank=None,
        )
        return saved

    def step(self, group: list[Any]) -> None:
        """One optimizer update over an accumulation group of micro-batches: forward (under
        autocast) and backward of each, gradients weighted by tokens (module docstring),
        clipping, AdamW, the schedule; then the progress bar and, when due, a log line."""
        cfg, state, engine = self.cfg, self.state, self.engine
        start = time.perf_counter()
        # Weight by tokens whenever more than one micro-batch meets in a step.
        weighted = engine.world_size > 1 or len(group) > 1
        local_loss, local_tokens = 0.0, 0
        self.optimizer.zero_grad(set_to_none=True)
        for k, batch in enumerate(group):
            last = k == len(group) - 1  # only the last backward of the group reduces gradients over the ranks
            with contextlib.nullcontext() if last else engine.no_sync():
                with _autocast(state.precision or cfg.precision, engine.device):
                    loss, n = self.task.loss(self.forward, batch)
                (loss * n if weighted else loss).backward()
            local_loss += loss.item() * n
            local_tokens += n
        step_loss, step_tokens = engine.all_reduce([local_loss, local_tokens], op="sum")
        step_tokens = int(step_tokens)
        if weighted:
            # DDP/FSDP averaged the ranks' summed losses (÷ world_size): rescale to ÷ tokens.
            _scale_grads(self.params, engine.world_size / max(step_tokens, 1))
        if cfg.clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.params, cfg.clip_norm)
        self.optimizer.step()
        self.scheduler.step()
        state.step += 1
        state.batch_in_epoch += 1
        state.tokens += step_tokens
        self.window.loss += step_loss
        self.window.tokens += step_tokens
        state.train_seconds += time.perf_counter() - start
        self._report(step_loss / max(step_tokens, 1), time.perf_counter() - start)

    def evaluate(self, module: nn.Module) -> str | None:
        """Rank 0: evaluate ``module``, log the metrics, keep the best (saved as ``out_dir/best``).
        Returns "target" when the metric has reached ``target``, "early_stopping" when it has not
        improved for ``patience`` evaluations, else None."""
        state, task = self.state, self.task
        module.eval()
        with torch.no_grad():
            metrics = task.evaluate(module)
        module.train()
        if task.metric not in metrics:  # (the recipes check their metric when the setup is made)
            raise ValueError(
                f"the task's metric {task.metric!r} is not among the metrics its evaluate() returns: {sorted(metrics)}"
            )
        self._record({"step": state.step, "epoch": state.epoch, "train_seconds": state.train_seconds, "eval": metrics})
        target = "" if self.cfg.target is None else f" (target {self.cfg.target:g})"
        self.bar_metric = {f"valid_{task.metric}": f"{metrics[task.metric]:.4g}{target}"}
        if _better(metrics[task.metric], None if state.best is None else state.best[task.metric], task.maximize):
            state.best, state.evals_without_gain = dict(metrics), 0
            if self.out is not None:
                self._save("best", module)
                self.best_saved = True
        else:
            state.evals_without_gain += 1
        if self._target_reached(state.best):
            return "target"
        if self.cfg.patience is not None and state.evals_without_gain >= self.cfg.patience:
            return "early_stopping"
        return None

    def _target_reached(self, best: dict[str, float] | None) -> bool:
        """Whether the best evaluation so far meets ``target``. The best, not the latest: in a run
        they are the same evaluation (the first to reach the target is a new best), and a run
        resumed with a target its best already meets stops at its next evaluation, or, finished,
        stays finished."""
        target, metric = self.cfg.target, self.task.metric
        if target is None or not best or metric not in best:
            return False
        return _reached(best[metric], target, self.task.maximize)

    def checkpoint(self, evaluate: bool, final: str = "") -> str | None:
        """Every rank calls this at the same step. Rank 0 evaluates (if asked) and writes
        ``out_dir/last``; the others wait. Returns, on every rank, what the evaluation says:
        "target", "early_stopping" or None (see :meth:`evaluate`).

        ``final``: why the run stops, when this is its last checkpoint. The checkpoint records it
        (or what the evaluation says, by the precedence of ``TrainResult.stop_reason``), so that
        a resumed run knows it is finished."""
        engine = self.engine
        if self.out is None and not evaluate:
            return None
        module = engine.full_model()
        stop = self.evaluate(module) if engine.is_main and evaluate else None
        self._set_stop_reason(stop, final)
        if self.out is not None:
            # Captured after the evaluation, as a one-process run does: resuming continues from
            # exactly the random state the uninterrupted run continued from.
            rngs = engine.gather_to_main(runs.rng_state())
            optimizer = engine.optimizer_state(self.optimizer)
            if engine.is_main:
                snapshot = replace(
                    self.state,
                    optimizer=optimizer,
                    scheduler=self.scheduler.state_dict(),
                    rng=rngs[0],
                    rng_per_rank=rngs if engine.world_size > 1 else None,
                )
                self._save("last", module, snapshot)
        engine.release_full_model()
        # Only rank 0 evaluated: its decision, one flag per rule, is every rank's.
        if engine.broadcast_flag(stop == "target"):
            stop = "target"
        elif engine.broadcast_flag(stop == "early_stopping"):
            stop = "early_stopping"
        else:
            stop = None
        self._set_stop_reason(stop, final)
        return stop

    def _set_stop_reason(self, stop: str | None, final: str) -> None:
        # As in TrainResult.stop_reason: reaching the target outranks everything (the run met its goal,
        # whatever limit it reached at the same step); a step or time limit reached at the same step
        # outranks early stopping, which outranks the end of the epochs.
        if stop == "target":
            self.state.stop_reason = "target"
        elif stop == "early_stopping" and final in ("", "epochs"):
            self.state.stop_reason = "early_stopping"
        elif final:
            self.state.stop_reason = final

    def fit(self) -> TrainResult:
        """The loop: epoch after epoch, one :meth:`step` per accumulation group of batches, with
        evaluations and checkpoints when due, until the epochs, ``max_steps``, the time budget
        or the patience run out or an evaluation reaches the target; then a final evaluation
        (unless one has just been made). A resumed run that had finished returns at once (see
        :meth:`_finished_result`)."""
        cfg, state = self.cfg, self.state
        if self.finished:
            return self._finished_result()
        stop_reason, epochs_done = "epochs", float(state.epoch)
        state.stop_reason = ""  # set again when this run stops; the checkpoint written then records it
        self.bar = self._progress_bar()
        threads_before = torch.get_num_threads()
        self.governor = self._thread_governor()
        if self.bar is not None:  # an interactive run: say what it runs on (the threads issue)
            adapt = ", adapting to the cores other processes leave free" if self.governor else ""
            print(f"attnlab: {openmp.describe()}{adapt}", file=sys.stderr)
        self.model.train()
        self.forward.train()
        self.window = _Window()
        try:
            while state.epoch < cfg.epochs:
                groups = self._accumulation_groups()
                if not state.precision:
                    state.precision = self.resolve_precision(groups[0][0])
                if self.bar is not None and cfg.max_steps is None and not self.by_time and cfg.target is None:
                    self.bar.total = cfg.epochs * len(groups)
                # A resumed run may stand at its limit already: killed after the checkpoint of its last
                # step, before the final evaluation.
                stop = self._limit_reached()
                while state.batch_in_epoch < len(groups) and stop is None:
                    self.step(groups[state.batch_in_epoch])
                    if self.governor is not None:
                        self.governor.poll()
                    stop = self._after_step()
                if stop is not None:
                    stop_reason, epochs_done = stop, state.epoch + state.batch_in_epoch / len(groups)
                    # (early stopping and the target have just evaluated)
                    if stop not in ("early_stopping", "target"):
                        if self.checkpoint(evaluate=True, final=stop) == "target":  # the final evaluation
                            stop_reason = "target"
                    break
                state.epoch, state.batch_in_epoch = state.epoch + 1, 0
                epochs_done = float(state.epoch)
                final = "epochs" if state.epoch >= cfg.epochs else ""
                if not cfg.eval_every_steps:
                    said = self.checkpoint(evaluate=True, final=final)
                    if said:
                        stop_reason = said
                        break
                elif final:
                    self.checkpoint(evaluate=False, final=final)  # nothing to evaluate; last/ records the end
        except RuntimeError as err:
            self.engine.explain(err, f"optimizer step {state.step + 1}")
            raise
        finally:
            if self.bar is not None:
                self.bar.close()
            torch.set_num_threads(threads_before)  # the governor's or cfg.threads' choice ends with the run
        self.engine.finish()
        return TrainResult(
            state.step,
            epochs_done,
            state.best,
            self.history,
            state.train_seconds,
            state.tokens,
            stop_reason,
            best_saved=self.best_saved,
            metric=self.task.metric,
            precision=self.state.precision or self.cfg.precision,
        )

    def _thread_governor(self) -> openmp.ThreadGovernor | None:
        """Apply ``cfg.threads``: fix the count, or return a governor that adapts it (0), or leave it (None).

        The governor runs only where it can help and cannot surprise: one process on a CPU (under
        torchrun each process has its cores already), Linux's CPU times to read, and no
        ``OMP_NUM_THREADS``, which is the user fixing the count.
        """
        threads, engine = self.cfg.threads, self.engine
        if threads:
            torch.set_num_threads(threads)
            return None
        if (
            threads is None
            or engine.world_size > 1
            or engine.device.type != "cpu"
            or "OMP_NUM_THREADS" in os.environ
            or not openmp.ThreadGovernor.available()
            or torch.get_num_threads() < 2
        ):
            return None
        return openmp.ThreadGovernor(torch.get_num_threads())

    def _finished_result(self) -> TrainResult:
        """A resumed run that had already finished: say so and report it from its saved state,
        training nothing and writing nothing (``best/``, ``last/`` and the log stay as they are)."""
        state, engine = self.state, self.engine
        if engine.is_main:
            print(
                f"attnlab: {self.out}: the run is finished (stopped by {self.finished} at step {state.step}); "
                "nothing to resume. To train on, raise its limit (epochs, max_steps, time budget or patience) "
                "or set a stricter target",
                file=sys.stderr,
            )
        epochs_done = float(state.epoch)
        if state.batch_in_epoch:  # stopped within an epoch
            epochs_done += state.batch_in_epoch / len(self._accumulation_groups())
        engine.finish()
        return TrainResult(
            state.step,
            epochs_done,
            state.best,
            [],
            state.train_seconds,
            state.tokens,
            self.finished,
            already_finished=True,
            metric=self.task.metric,
            precision=self.state.precision or self.cfg.precision,
        )

    # ----------------------------------------------------------------------------------------
    # Helpers of the steps
    # ----------------------------------------------------------------------------------------

    def _accumulation_groups(self) -> list[list[Any]]:
        """This rank's batches of the current epoch in groups of ``grad_accum``, one step each."""
        engine = self.engine
        batches = self.task.batches(self.state.epoch, engine.rank, engine.world_size)
        if not batches:
            raise ValueError("the task produced no training batches (is the training data empty?)")
        accum = self.cfg.grad_accum
        groups = [batches[i : i + accum] for i in range(0, len(batches), accum)]
        # A rank with an extra step would wait forever in its all-reduce: every rank takes as many
        # steps as the rank with the fewest groups.
        fewest, most = engine.all_reduce([len(groups), -len(groups)], op="min")
        fewest, most = int(fewest), int(-most)
        if fewest != most:
            if engine.is_main:
                warnings.warn(
                    f"epoch {self.state.epoch}: the ranks got {fewest} to {most} accumulation groups of "
                    f"batches; every rank trains on its first {fewest}",
                    stacklevel=4,
                )
            groups = groups[:fewest]
        return groups

    def _limit(self, state: TrainState) -> bool:
        """Whether ``state`` stands at a limit of this run's settings: there is nothing left to train."""
        cfg = self.cfg
        return (
            state.epoch >= cfg.epochs
            or (cfg.max_steps is not None and state.step >= cfg.max_steps)
            or (cfg.time_budget_s is not None and state.train_seconds >= cfg.time_budget_s)
            or (cfg.patience is not None and state.evals_without_gain >= cfg.patience)
            or self._target_reached(state.best)
        )

    def _limit_reached(self) -> str | None:
        """Every rank: "max_steps" or "time_budget" when the run stands at that limit (rank 0's clock decides)."""
        cfg, state = self.cfg, self.state
        if cfg.max_steps is not None and state.step >= cfg.max_steps:
            return "max_steps"
        if cfg.time_budget_s is not None and self.engine.broadcast_flag(state.train_seconds >= cfg.time_budget_s):
            return "time_budget"
        return None

    def _after_step(self) -> str | None:
        """Evaluate or save when due; then why the loop stops here (a TrainResult.stop_reason), or None."""
        cfg, state = self.cfg, self.state
        stop = None
        if cfg.eval_every_steps and state.step % cfg.eval_every_steps == 0:
            stop = self.checkpoint(evaluate=True)
            if stop == "target":  # the run met its goal: no limit reached at this step outranks that
                return stop
        elif cfg.save_every_steps and state.step % cfg.save_every_steps == 0:
            self.checkpoint(evaluate=False)
        if cfg.max_steps is not None and state.step >= cfg.max_steps:
            stop = "max_steps"
        # Clocks differ between ranks: rank 0's decides, or the ranks would part ways.
        if cfg.time_budget_s is not None and self.engine.broadcast_flag(state.train_seconds >= cfg.time_budget_s):
            stop = "time_budget"
        return stop

    def _report(self, step_loss: float, step_seconds: float) -> None:
        """After a step: advance the progress bar; every ``log_every`` steps, log the window's mean loss."""
        state = self.state
        if self.bar is not None:
            self.bar.update(min(step_seconds, self.bar.total - self.bar.n) if self.by_time else 1)
            self.bar.set_postfix(step=state.step, epoch=state.epoch, loss=f"{step_loss:.3f}", **self.bar_metric)
        if state.step % self.cfg.log_every == 0:
            elapsed = time.perf_counter() - self.window.start
            self._record(
                {
                    "step": state.step,
                    "epoch": state.epoch,
                    "loss": self.window.loss / max(self.window.tokens, 1),
                    "lr": self.scheduler.get_last_lr()[0],
                    "tokens_per_s": self.window.tokens / elapsed if elapsed else 0.0,
                    "train_seconds": state.train_seconds,
                    "threads": torch.get_num_threads(),
                }
            )
            self.window = _Window()

    def _record(self, record: dict) -> None:
        self.history.append(record)
        self.log.write(record)
        self.state.log_records += 1

    def _save(self, kind: str, module: nn.Module, snapshot: TrainState | None = None) -> None:
        config, tokenizers = self.task.checkpoint_payload()
        trainer_state = None if snapshot is None else snapshot.to_dict()
        ckpt.save_checkpoint(
            self.out / kind, model=module, config=config, tokenizers=tokenizers, trainer_state=trainer_state
        )

    def _progress_bar(self):
        if not (self.cfg.progress and self.engine.is_main):
            return None
        from tqdm.auto import tqdm

        cfg, state = self.cfg, self.state
        if self.by_time:
            return tqdm(
                total=round(cfg.time_budget_s),
                initial=round(state.train_seconds),
                unit="s",
                dynamic_ncols=True,
                leave=False,
                bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s training [{elapsed}{postfix}]",
            )
        return tqdm(total=cfg.max_steps, initial=state.step, unit="step", dynamic_ncols=True, leave=False)


def train(
    model: nn.Module,
    task: TrainTask,
    cfg: TrainConfig,
    *,
    resume: bool = False,
    rank: int | None = None,
    world_size: int | None = None,
) -> TrainResult:
    """Train ``model`` on ``task``; returns what happened. See the module docstring.

    Checkpoints (when ``cfg.out_dir`` is set): ``out_dir/best`` holds the best evaluated model
    (weights, config, tokenizers); ``out_dir/last`` additionally holds the optimizer, scheduler,
    data position and RNG states that ``resume=True`` continues from (a :class:`TrainState`).

    One run per folder (:func:`attnlab.runs.check_run_folder`, checked first): an
    ``out_dir`` that already holds a run is refused unless ``resume=True`` (continue it) or
    ``cfg.overwrite`` (delete it when training starts). Resuming a run that reached its limit under
    these settings trains and writes nothing and returns its saved state (``already_finished``); a
    log line torn by a crash is dropped; a damaged checkpoint is a one-line ValueError.

    ``rank``/``world_size`` default to the joined process group's (see
    :func:`attnlab.distributed.init_distributed`), or 0 of 1. Under several processes every rank
    calls ``train`` with the same config; ``out_dir`` must be one shared folder (rank 0 writes it,
    every rank reads ``out_dir/last`` to resume), and resuming needs the same number of processes,
    ``grad_accum`` and ``strategy``.

    Shape:
        batches are whatever the task yields; the loop only calls ``task.loss`` on them.
    """
    runs.check_run_folder(cfg.out_dir, resume, cfg.overwrite)  # before any work
    if cfg.grad_accum < 1:
        raise ValueError(f"grad_accum must be ≥ 1, got {cfg.grad_accum}")
    if cfg.strategy not in ("ddp", "fsdp"):
        raise ValueError(f"strategy must be 'ddp' or 'fsdp', got {cfg.strategy!r}")
    if cfg.precision != "auto":
        _autocast(cfg.precision, torch.device("cpu"))  # reject a bad precision before any work
    cfg.check_schedule()
    rank, world_size = distributed.rank_and_world(rank, world_size)
    device = torch.device(distributed.resolve_device(cfg.device))
    model.to(device)
    engine = distributed.make_engine(cfg.strategy, device, rank, world_size)
    return Trainer(model, task, cfg, engine, resume=resume).fit()
