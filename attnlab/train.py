"""One training loop for every model in attnlab.

The loop knows nothing model-specific. A *task* object supplies what differs between a
translator, a language model or a classifier:

- ``batches(epoch, rank, world_size)`` — the epoch's batches, in an order fixed by the seed;
- ``loss(model, batch)`` — ``(mean loss, number of target tokens)`` for one batch;
- ``evaluate(model)`` — a dict of validation metrics;
- ``metric`` / ``maximize`` — which metric picks the best checkpoint and drives early stopping;
- ``checkpoint_payload()`` — the model config dict and the tokenizers to save beside weights.

What the loop adds: AdamW, warm-up + inverse-square-root (or cosine) schedule, gradient
accumulation and clipping, bf16 autocast, evaluation, early stopping, a progress bar, a JSON-lines
log, atomic checkpoints and *exact* resume (the data order and every RNG are restored, so an
interrupted-then-resumed run reproduces the uninterrupted run's losses).
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Protocol

import torch
from torch import nn

from . import checkpoint as ckpt

__all__ = ["TrainConfig", "TrainTask", "TrainResult", "train", "lr_multiplier", "seed_everything"]


@dataclass
class TrainConfig:
    out_dir: str | None = None  # checkpoints + log.jsonl go here (None: write nothing)
    epochs: int = 10  # passes over the training data (an upper bound with max_steps/time_budget_s)
    max_steps: int | None = None  # stop after this many optimizer steps
    time_budget_s: float | None = None  # stop after this many seconds of training (evaluation excluded)
    lr: float = 1e-3  # peak learning rate, reached at the end of warm-up
    warmup_steps: int = 400  # linear warm-up; avoids early divergence with Adam (Vaswani §5.3)
    schedule: str = "inverse_sqrt"  # "inverse_sqrt" (Vaswani §5.3), "cosine" (to 10% at max_steps) or "constant"
    weight_decay: float = 0.01  # decoupled weight decay (AdamW), not applied to biases/norms/embeddings
    betas: tuple[float, float] = (0.9, 0.98)  # Adam β's of the paper (§5.3)
    eps: float = 1e-9  # Adam ε of the paper (§5.3)
    clip_norm: float | None = 1.0  # clip the global gradient norm (None: no clipping)
    grad_accum: int = 1  # batches whose gradients are summed into one optimizer step
    precision: str = "fp32"  # "fp32" or "bf16" (autocast; master weights stay fp32)
    eval_every_steps: int | None = None  # evaluate every N steps (None: at the end of each epoch)
    save_every_steps: int | None = None  # also save a resumable checkpoint every N steps
    patience: int | None = None  # early stopping: evaluations without improvement before stopping
    seed: int = 0  # seeds data order, initialisation and dropout
    log_every: int = 50  # optimizer steps between log lines
    progress: bool = True  # show a progress bar
    device: str = "cpu"  # "cpu", "cuda", "mps"


class TrainTask(Protocol):
    metric: str
    maximize: bool

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
    tokens: int = 0  # target tokens trained on
    stop_reason: str = ""  # "epochs", "max_steps", "time_budget", "early_stopping"

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.train_seconds if self.train_seconds else 0.0


def seed_everything(seed: int) -> None:
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def lr_multiplier(step: int, cfg: TrainConfig, total_steps: int | None = None) -> float:
    """Learning-rate factor for optimizer step ``step`` (1-based), peak 1.0 after warm-up."""
    step = max(step, 1)
    warm = max(cfg.warmup_steps, 1)
    if step < warm:
        return step / warm
    if cfg.schedule == "inverse_sqrt":
        return math.sqrt(warm / step)
    if cfg.schedule == "cosine":
        if not total_steps:
            raise ValueError("schedule='cosine' needs max_steps")
        progress = min((step - warm) / max(total_steps - warm, 1), 1.0)
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


def _autocast(cfg: TrainConfig):
    if cfg.precision == "fp32":
        return contextlib.nullcontext()
    if cfg.precision == "bf16":
        return torch.autocast(device_type=torch.device(cfg.device).type, dtype=torch.bfloat16)
    raise ValueError(f"precision must be 'fp32' or 'bf16', got {cfg.precision!r}")


class _Log:
    """Append-only JSON-lines log (only rank 0 writes)."""

    def __init__(self, path: Path | None, resume_step: int | None) -> None:
        self.path = path
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        if resume_step is None:
            path.write_text("")
        elif path.exists():
            # Drop what the interrupted run logged after its last checkpoint: those steps
            # are about to be run again.
            kept = [l for l in path.read_text().splitlines() if l and json.loads(l).get("step", 0) <= resume_step]
            path.write_text("".join(l + "\n" for l in kept))

    def write(self, record: dict) -> None:
        if self.path is not None:
            with self.path.open("a") as f:
                f.write(json.dumps(record) + "\n")


def _better(a: float, b: float | None, maximize: bool) -> bool:
    return b is None or (a > b if maximize else a < b)


def train(
    model: nn.Module,
    task: TrainTask,
    cfg: TrainConfig,
    *,
    resume: bool = False,
    rank: int = 0,
    world_size: int = 1,
) -> TrainResult:
    """Train ``model`` on ``task``; returns what happened. See the module docstring.

    Checkpoints (when ``cfg.out_dir`` is set): ``out_dir/best`` holds the best evaluated model
    (weights, config, tokenizers); ``out_dir/last`` additionally holds the optimizer, scheduler,
    data position and RNG states that ``resume=True`` continues from.
    """
    if cfg.grad_accum < 1:
        raise ValueError(f"grad_accum must be ≥ 1, got {cfg.grad_accum}")
    device = torch.device(cfg.device)
    out = Path(cfg.out_dir) if cfg.out_dir else None
    is_main = rank == 0
    model.to(device)
    optimizer = torch.optim.AdamW(_param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_multiplier(s + 1, cfg, cfg.max_steps))

    step, epoch, batch_in_epoch, tokens_done, train_seconds = 0, 0, 0, 0, 0.0
    best: dict | None = None
    evals_without_gain = 0
    if resume:
        if out is None or not (out / "last").is_dir():
            raise FileNotFoundError(f"--resume: no checkpoint to resume from at {out / 'last' if out else '(no out_dir)'}")
        last = ckpt.load_checkpoint(out / "last")
        ckpt.load_weights(model, last)
        state = last.trainer_state
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        step, epoch, batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        tokens_done, train_seconds = state["tokens"], state["train_seconds"]
        best, evals_without_gain = state["best"], state["evals_without_gain"]
        ckpt.set_rng_state(state["rng"])
    else:
        seed_everything(cfg.seed)
    log = _Log(out / "log.jsonl" if (out and is_main) else None, step if resume else None)
    history: list[dict] = []

    def save(kind: str) -> None:
        if out is None or not is_main:
            return
        config, tokenizers = task.checkpoint_payload()
        trainer_state = None
        if kind == "last":
            trainer_state = {
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "step": step,
                "epoch": epoch,
                "batch_in_epoch": batch_in_epoch,
                "tokens": tokens_done,
                "train_seconds": train_seconds,
                "best": best,
                "evals_without_gain": evals_without_gain,
                "rng": ckpt.rng_state(),
                "config": asdict(cfg),
            }
        ckpt.save_checkpoint(out / kind, model=model, config=config, tokenizers=tokenizers, trainer_state=trainer_state)

    def run_eval() -> bool:
        """Evaluate, log, keep the best; returns True when early stopping triggers."""
        nonlocal best, evals_without_gain
        model.eval()
        with torch.no_grad():
            metrics = task.evaluate(model)
        model.train()
        record = {"step": step, "epoch": epoch, "eval": metrics}
        history.append(record)
        log.write(record)
        if _better(metrics[task.metric], None if best is None else best[task.metric], task.maximize):
            best, evals_without_gain = dict(metrics), 0
            save("best")
        else:
            evals_without_gain += 1
        save("last")
        return cfg.patience is not None and evals_without_gain >= cfg.patience

    bar = None
    if cfg.progress and is_main:
        from tqdm.auto import tqdm

        bar = tqdm(total=cfg.max_steps, initial=step, unit="step", dynamic_ncols=True, leave=False)
    stop_reason = "epochs"
    model.train()
    window_loss, window_tokens, window_start = 0.0, 0, time.perf_counter()
    while epoch < cfg.epochs:
        batches = task.batches(epoch, rank, world_size)
        if not batches:
            raise ValueError("the task produced no training batches (is the training data empty?)")
        groups = [batches[i : i + cfg.grad_accum] for i in range(0, len(batches), cfg.grad_accum)]
        if bar is not None and cfg.max_steps is None:
            bar.total = cfg.epochs * len(groups)
        stop = False
        while batch_in_epoch < len(groups):
            t0 = time.perf_counter()
            group = groups[batch_in_epoch]
            n_tokens = 0
            optimizer.zero_grad(set_to_none=True)
            for batch in group:
                with _autocast(cfg):
                    loss, n = task.loss(model, batch)
                (loss / len(group)).backward()
                window_loss += loss.item() * n
                n_tokens += n
            if cfg.clip_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
            optimizer.step()
            scheduler.step()
            step += 1
            batch_in_epoch += 1
            tokens_done += n_tokens
            window_tokens += n_tokens
            train_seconds += time.perf_counter() - t0
            if bar is not None:
                bar.update(1)
                bar.set_postfix(epoch=epoch, loss=f"{loss.item():.3f}")
            if step % cfg.log_every == 0:
                elapsed = time.perf_counter() - window_start
                record = {
                    "step": step,
                    "epoch": epoch,
                    "loss": window_loss / max(window_tokens, 1),
                    "lr": scheduler.get_last_lr()[0],
                    "tokens_per_s": window_tokens / elapsed if elapsed else 0.0,
                    "train_seconds": train_seconds,
                }
                history.append(record)
                log.write(record)
                window_loss, window_tokens, window_start = 0.0, 0, time.perf_counter()
            if cfg.eval_every_steps and step % cfg.eval_every_steps == 0 and run_eval():
                stop, stop_reason = True, "early_stopping"
            elif cfg.save_every_steps and step % cfg.save_every_steps == 0:
                save("last")
            if cfg.max_steps is not None and step >= cfg.max_steps:
                stop, stop_reason = True, "max_steps"
            if cfg.time_budget_s is not None and train_seconds >= cfg.time_budget_s:
                stop, stop_reason = True, "time_budget"
            if stop:
                break
        if stop:
            epochs_done = epoch + batch_in_epoch / len(groups)
            if stop_reason != "early_stopping":
                run_eval()
            break
        epoch, batch_in_epoch = epoch + 1, 0
        epochs_done = float(epoch)
        if not cfg.eval_every_steps and run_eval():
            stop_reason = "early_stopping"
            break
    else:
        epochs_done = float(epoch)
    if bar is not None:
        bar.close()
    return TrainResult(step, epochs_done, best, history, train_seconds, tokens_done, stop_reason)
