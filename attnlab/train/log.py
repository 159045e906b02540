"""What a training run shows and writes as it goes: :class:`TrainLog`, the append-only JSON-lines
log ``out_dir/log.jsonl`` (and :func:`read_log`, its reader); :class:`LogWindow`, the steps a log
line averages; :class:`ProgressBar`, the bar on the terminal.

Shape:
    no tensors.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from .state import START_AGAIN

if TYPE_CHECKING:
    from .config import TrainConfig
    from .state import TrainState

__all__ = ["LogWindow", "ProgressBar", "TrainLog", "read_log"]


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
            records = read_log(path)
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


def read_log(path: Path) -> list[tuple[str, dict]]:
    """The records of a run's log, each with its line. A last line without its newline was torn by
    an interrupted append: it is dropped (saying so on stderr). Any other line that is not a JSON
    object is damage the loop did not cause: a ValueError naming ``file:line``.

    Shape:
        no tensors; ``[(line, record), ...]``.
    """
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
                f"--resume: {path}:{number}: damaged log line ({exc.msg}); repair or delete that line, or {START_AGAIN}"
            ) from None
        if not isinstance(record, dict) or not isinstance(record.get("step", 0), int):
            # ValueError, not TypeError: the file is wrong, not the caller.
            raise ValueError(  # noqa: TRY004
                f"--resume: {path}:{number}: not a log record (a JSON object with an integer step); "
                f"repair or delete that line, or {START_AGAIN}"
            )
        records.append((line, record))
    return records


@dataclass
class LogWindow:
    """The training loss and tokens since the last log line (a log line reports their mean).

    Shape:
        no tensors.
    """

    loss: float = 0.0  # summed loss of the steps since the last log line, all ranks
    tokens: int = 0  # their target tokens, all ranks
    start: float = field(default_factory=time.perf_counter)  # when the window opened

    def record(self, state: TrainState, lr: float) -> dict:
        """The log line of the window's steps, at ``state`` with learning rate ``lr``: their mean
        loss per token and their speed, the clock and the threads the steps ran on."""
        elapsed = time.perf_counter() - self.start
        return {
            "step": state.step,
            "epoch": state.epoch,
            "loss": self.loss / max(self.tokens, 1),
            "lr": lr,
            "tokens_per_s": self.tokens / elapsed if elapsed else 0.0,
            "train_seconds": state.train_seconds,
            "threads": torch.get_num_threads(),
        }


class ProgressBar:
    """Rank 0's progress bar (tqdm): optimizer steps, or, when a time budget without a step limit
    or a target bounds the run, seconds of training; the latest evaluation beside the loss.

    Shape:
        no tensors.
    """

    def __init__(self, cfg: TrainConfig, state: TrainState) -> None:
        from tqdm.auto import tqdm

        self.cfg = cfg
        # A time budget with no step limit is the binding constraint: the bar counts its seconds, not steps.
        # With a target it is a safety net, and no one knows which limit will bind: the bar counts steps.
        self.by_time = cfg.max_steps is None and cfg.time_budget_s is not None and cfg.target is None
        self.metric: dict[str, str] = {}  # the latest evaluation, shown beside the training loss
        if self.by_time:
            self.bar = tqdm(
                total=round(cfg.time_budget_s),
                initial=round(state.train_seconds),
                unit="s",
                dynamic_ncols=True,
                leave=False,
                bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s training [{elapsed}{postfix}]",
            )
        else:
            self.bar = tqdm(total=cfg.max_steps, initial=state.step, unit="step", dynamic_ncols=True, leave=False)

    def set_epoch_length(self, steps: int) -> None:
        """Bounded by its epochs alone, the run's length is known once an epoch's steps are: show it."""
        cfg = self.cfg
        if cfg.max_steps is None and not self.by_time and cfg.target is None:
            self.bar.total = cfg.epochs * steps

    def advance(self, state: TrainState, step_loss: float, step_seconds: float) -> None:
        """After a step: one step (or its seconds) further, with the step's loss."""
        self.bar.update(min(step_seconds, self.bar.total - self.bar.n) if self.by_time else 1)
        self.bar.set_postfix(step=state.step, epoch=state.epoch, loss=f"{step_loss:.3f}", **self.metric)

    def close(self) -> None:
        self.bar.close()
