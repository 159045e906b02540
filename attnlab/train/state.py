"""Where a training run stands: :class:`TrainState`, what the loop updates from step to step and,
one key per field, what a resumable checkpoint (``out_dir/last/trainer_state.pt``) saves; whether
it stands at a limit of the run's settings (the stop rules); and :func:`read_resume_point`, the
checkpoint a ``--resume`` continues from, checked against the run's settings.

Shape:
    no tensors except inside the saved optimizer and random states.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import checkpoint as ckpt
from .. import runs

if TYPE_CHECKING:
    from .config import TrainConfig, TrainTask

__all__ = ["START_AGAIN", "TrainState", "read_resume_point"]

#: What every refused ``--resume`` ends with.
START_AGAIN = "start the run again without --resume (with --overwrite to replace it)"


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

    def reached_target(self, target: float | None, task: TrainTask) -> bool:
        """Whether the best evaluation so far meets ``target`` (≥ it when ``task`` maximises its
        metric, ≤ for a loss). The best, not the latest: in a run they are the same evaluation (the
        first to reach the target is a new best), and a run resumed with a target its best already
        meets stops at its next evaluation, or, finished, stays finished."""
        if target is None or not self.best or task.metric not in self.best:
            return False
        value = self.best[task.metric]
        return value >= target if task.maximize else value <= target

    def at_limit(self, cfg: TrainConfig, task: TrainTask) -> bool:
        """Whether the run stands at a limit of ``cfg``'s settings: there is nothing left to train."""
        return (
            self.epoch >= cfg.epochs
            or (cfg.max_steps is not None and self.step >= cfg.max_steps)
            or (cfg.time_budget_s is not None and self.train_seconds >= cfg.time_budget_s)
            or (cfg.patience is not None and self.evals_without_gain >= cfg.patience)
            or self.reached_target(cfg.target, task)
        )

    def record_stop(self, stop: str | None, final: str) -> None:
        """Set ``stop_reason`` from what an evaluation said (``stop``: "target", "early_stopping" or
        None) and why the run ends here (``final``, "" when it goes on)."""
        # As in TrainResult.stop_reason: reaching the target outranks everything (the run met its goal,
        # whatever limit it reached at the same step); a step or time limit reached at the same step
        # outranks early stopping, which outranks the end of the epochs.
        if stop == "target":
            self.stop_reason = "target"
        elif stop == "early_stopping" and final in ("", "epochs"):
            self.stop_reason = "early_stopping"
        elif final:
            self.stop_reason = final


def read_resume_point(
    out: Path, *, world_size: int, grad_accum: int, strategy: str, is_main: bool
) -> tuple[Path, ckpt.Checkpoint, TrainState]:
    """The checkpoint a run in ``out`` resumes from (:func:`attnlab.runs.resume_point`), read and
    checked against this run's ``world_size``, ``grad_accum`` and ``strategy``: its folder, the
    checkpoint and its :class:`TrainState`. Rank 0 (``is_main``) says when it is the previous
    checkpoint that an interrupted save left.

    Raises:
        FileNotFoundError: there is no checkpoint.
        ValueError: it was written with other settings, or not by this loop, or it is damaged
            (one line naming the file).

    Shape:
        tensors as saved.
    """
    where = runs.resume_point(out)
    if where.name != "last" and is_main:
        print(
            f"attnlab: resuming from {where}: a save of {out / 'last'} was interrupted between its two "
            "renames; the next save completes it",
            file=sys.stderr,
        )
    try:
        last = ckpt.load_checkpoint(where)
        saved = TrainState.from_dict(last.trainer_state, where)
    except (ValueError, TypeError, FileNotFoundError) as err:
        raise ValueError(f"--resume: {err}; {START_AGAIN}") from None
    was = {"world_size": saved.world_size, "grad_accum": saved.config["grad_accum"], "strategy": saved.strategy}
    now = {"world_size": world_size, "grad_accum": grad_accum, "strategy": strategy}
    if world_size == 1:
        was.pop("strategy"), now.pop("strategy")  # one process: there is nothing to shard
    if was != now:
        raise ValueError(
            f"--resume: {where} was written with {was}, this run has {now}; the position in "
            "the epoch and the per-rank random states depend on them, so resume with the same settings"
        )
    return where, last, saved
