"""Where a training run stands: :class:`TrainState`, what the loop updates from step to step and,
one key per field, what a resumable checkpoint (``out_dir/last/trainer_state.pt``) saves.

Shape:
    no tensors except inside the saved optimizer and random states.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .. import checkpoint as ckpt

__all__ = ["START_AGAIN", "TrainState"]

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
