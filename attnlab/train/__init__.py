"""One training loop for every model in attnlab.

The loop knows nothing model-specific. A *task* object (:class:`TrainTask`) supplies what differs
between a translator, a language model or a classifier:

- ``batches(epoch, rank, world_size)`` — the epoch's batches, in an order fixed by the seed;
- ``loss(model, batch)`` — ``(mean loss, number of target tokens)`` for one batch;
- ``evaluate(model)`` — a dict of validation metrics;
- ``metric`` / ``maximize`` — which metric picks the best checkpoint and drives early stopping;
- ``checkpoint_payload()`` — the model config dict and the tokenizers to save beside weights.

:func:`train` runs it: ``train(model, task, TrainConfig(...))`` returns a :class:`TrainResult`.

One home per part (this package re-exports their public names):

- ``trainer.py`` — :class:`Trainer`, the loop and its named steps (resume, step, evaluate,
  checkpoint, fit), and :func:`train`; how gradients are averaged and when a run stops;
- ``config.py`` — :class:`TrainConfig`, :class:`TrainTask`, :class:`TrainResult`, the
  learning-rate schedule (:func:`lr_multiplier`), the seeds;
- ``state.py`` — :class:`TrainState`, where a run stands and what a resumable checkpoint saves;
- ``log.py`` — the JSON-lines log (:class:`TrainLog`, :func:`read_log`) and the progress bar;
- ``precision.py`` — the precision of the steps: ``"auto"``'s probe, its choice and its
  per-machine cache (:class:`TrainingPrecision`, :func:`probe_precision`, :func:`choose_precision`);
- ``threads.py`` — the CPU threads of the steps (:func:`governor_for`).

Shape:
    batches are whatever the task yields; the loop only calls ``task.loss`` on them.
"""

from .config import (
    PRECISIONS,
    SCHEDULES,
    STOP_REASONS,
    TrainConfig,
    TrainResult,
    TrainTask,
    lr_multiplier,
    seed_everything,
    task_leaves_parameters_unused,
)
from .log import LogWindow, ProgressBar, TrainLog, read_log
from .precision import BF16_MIN_SPEEDUP, TrainingPrecision, autocast, choose_precision, probe_precision
from .state import START_AGAIN, TrainState
from .threads import governor_for
from .trainer import Trainer, train

__all__ = [
    "BF16_MIN_SPEEDUP",
    "PRECISIONS",
    "SCHEDULES",
    "START_AGAIN",
    "STOP_REASONS",
    "LogWindow",
    "ProgressBar",
    "TrainConfig",
    "TrainLog",
    "TrainResult",
    "TrainState",
    "TrainTask",
    "Trainer",
    "TrainingPrecision",
    "autocast",
    "choose_precision",
    "governor_for",
    "lr_multiplier",
    "probe_precision",
    "read_log",
    "seed_everything",
    "task_leaves_parameters_unused",
    "train",
]
