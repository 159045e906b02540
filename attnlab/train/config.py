"""What a training run is given and what it gives back: :class:`TrainConfig` (the loop's settings,
each checked when the config is made), :class:`TrainTask` (what a model-specific task supplies),
:class:`TrainResult`; the learning-rate schedule (:func:`lr_multiplier`) and the seeds.

Shape:
    no tensors; see each function.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import nn

from ..models.config import check_fields

__all__ = [
    "PRECISIONS",
    "SCHEDULES",
    "STOP_REASONS",
    "TrainConfig",
    "TrainResult",
    "TrainTask",
    "lr_multiplier",
    "seed_everything",
    "task_leaves_parameters_unused",
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
    """What :func:`attnlab.train.train` needs from a model-specific task (see :mod:`attnlab.train`).

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

    Shape:
        no tensors; a float in (0, 1].
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


def task_leaves_parameters_unused(task: TrainTask) -> bool:
    """Whether ``task``'s loss leaves some of the model's parameters out (its optional
    ``unused_parameters``; False when it does not say), which DDP must be told."""
    return bool(getattr(task, "unused_parameters", False))
