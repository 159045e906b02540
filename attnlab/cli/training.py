"""What every ``attnlab train`` command prints when its run ends (:func:`print_training`)."""

from __future__ import annotations

from pathlib import Path

from ..train import TrainResult

__all__ = ["STOPPED", "print_training"]


#: Why a run stopped (``TrainResult.stop_reason``), in the words of :func:`print_training`.
STOPPED = {
    "epochs": "it ran all its epochs",
    "max_steps": "it reached its step limit (max_steps)",
    "time_budget": "its time budget (--minutes) ran out",
    "early_stopping": "validation {metric} stopped improving (patience)",
    "target": "validation {metric} reached the target (--target)",
}


def print_training(result: TrainResult, out: Path, *, unit: str = "tokens") -> None:
    """What every ``attnlab train`` command prints at the end: steps, time, speed, why it stopped, the best scores."""
    why = STOPPED.get(result.stop_reason, result.stop_reason).format(metric=result.metric or "the metric")
    print(
        f"trained {result.steps} steps in {result.train_seconds / 60:.1f} min "
        f"({result.tokens_per_s:,.0f} {unit}/s, {result.precision or 'fp32'}); stopped: {why}"
    )
    if result.best:
        print("best validation: " + ", ".join(f"{k} {v:.4g}" for k, v in result.best.items()))
    if result.best_saved:
        print(f"model saved in {out / 'best'}")
    elif result.already_finished and (out / "best").is_dir():
        print(f"the run was already finished; its model is in {out / 'best'}")
    else:
        print("no model saved (no evaluation ran)")
