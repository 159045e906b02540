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

**Several processes** (``torchrun``, see :mod:`attnlab.distributed` and docs/distributed.md).
Every rank runs this same loop on its own shard of each epoch's batches (``task.batches(epoch,
rank, world_size)``). The model is wrapped in DistributedDataParallel (``strategy="ddp"``: every
rank holds the whole model, gradients are all-reduced) or sharded with FSDP2 ``fully_shard``
(``strategy="fsdp"``: parameters, gradients and AdamW moments are split over the ranks). Only rank
0 logs, evaluates and writes checkpoints; the others wait in a collective meanwhile. A resumable
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
import copy
import inspect
import json
import math
import time
import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from . import checkpoint as ckpt
from . import distributed

__all__ = ["TrainConfig", "TrainResult", "TrainTask", "lr_multiplier", "seed_everything", "train"]


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
    precision: str = "fp32"  # "fp32" or "bf16" (autocast on CPU, CUDA, MPS; weights and AdamW state stay fp32)
    compile: bool = False  # torch.compile the model for training steps (evaluation runs the plain model)
    strategy: str = "ddp"  # with several processes: "ddp" (replicate the model) or "fsdp" (shard it, FSDP2)
    eval_every_steps: int | None = None  # evaluate every N steps (None: at the end of each epoch)
    save_every_steps: int | None = None  # also save a resumable checkpoint every N steps
    patience: int | None = None  # early stopping: evaluations without improvement before stopping
    seed: int = 0  # seeds data order, initialisation and dropout
    log_every: int = 50  # optimizer steps between log lines
    progress: bool = True  # show a progress bar
    device: str = "cpu"  # "cpu", "cuda", "mps" or "auto" (CUDA, else MPS, else CPU); "cuda" = this rank's GPU


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


def _rank_seed(seed: int, rank: int) -> int:
    # Rank 0 keeps the configured seed (a one-process run is unchanged); other ranks get their own
    # streams, so that their dropout masks differ.
    return seed + 1_000_003 * rank


@dataclass
class _Engine:
    """The model in the forms the loop needs: the caller's module (evaluated and saved by rank 0)
    and what the training forward runs through (DDP / FSDP / compiled wrappers)."""

    module: nn.Module  # the caller's model; trained in place (DDP), or refreshed from the shards (FSDP)
    forward: nn.Module  # what task.loss calls
    ddp: nn.parallel.DistributedDataParallel | None = None  # set with strategy "ddp" on several ranks
    sharded: nn.Module | None = None  # the fully_shard-ed copy with strategy "fsdp" on several ranks

    def parameters(self) -> list[nn.Parameter]:
        return list((self.sharded or self.module).parameters())

    def grad_sync(self, enabled: bool):
        """Skip the gradient all-reduce for all but the last micro-batch of an accumulation group
        (the gradients accumulate locally; the last backward reduces their sum once)."""
        if self.ddp is not None and not enabled:
            return self.ddp.no_sync()
        if self.sharded is not None:
            self.sharded.set_requires_gradient_sync(enabled)
        return contextlib.nullcontext()


def _shard(model: nn.Module) -> nn.Module:
    """FSDP2: each element of an ``nn.ModuleList`` (the layer stacks) becomes one shard unit,
    the root holds the rest (embeddings, tied output projection, final norm). Units are
    sharded children first, as ``fully_shard`` requires."""
    from torch.distributed.fsdp import fully_shard

    units = {id(layer) for m in model.modules() if isinstance(m, nn.ModuleList) for layer in m}
    for module in reversed(list(model.modules())):  # reversed pre-order: descendants first
        if id(module) in units:
            fully_shard(module)
    fully_shard(model)
    return model


def _prepare(model: nn.Module, cfg: TrainConfig, device: torch.device, world_size: int) -> _Engine:
    if world_size == 1:
        return _Engine(model, torch.compile(model) if cfg.compile else model)
    if cfg.strategy == "fsdp":
        import torch.distributed as dist

        for tensor in model.state_dict().values():  # every rank shards rank 0's initialisation
            dist.broadcast(tensor, src=0)
        sharded = _shard(copy.deepcopy(model))
        model.to("cpu")  # the full model waits on the CPU; rank 0 fills it for evaluation/saving
        return _Engine(model, torch.compile(sharded) if cfg.compile else sharded, sharded=sharded)
    # No buffer sync before each forward: the models' buffers are constant tables (positions), not
    # running statistics (PyTorch 2.13 renamed broadcast_buffers to forward_sync_buffers).
    ddp_args = inspect.signature(nn.parallel.DistributedDataParallel).parameters
    no_buffer_sync = {"forward_sync_buffers" if "forward_sync_buffers" in ddp_args else "broadcast_buffers": False}
    # find_unused_parameters=True: some trainers leave parameters out of the loss (BERT's pooler
    # during MLM-only training), which DDP otherwise rejects at the next step. It costs one walk
    # over the autograd graph per step; static_graph would avoid it but fails with no_sync().
    ddp = nn.parallel.DistributedDataParallel(
        model,
        device_ids=[device.index] if device.type == "cuda" else None,
        find_unused_parameters=True,
        **no_buffer_sync,
    )
    return _Engine(model, torch.compile(ddp) if cfg.compile else ddp, ddp=ddp)


def _fsdp_options(cpu_offload: bool):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, cpu_offload=cpu_offload)


def _scale_grads(params: Iterable[nn.Parameter], factor: float) -> None:
    for p in params:
        if p.grad is not None:
            p.grad.mul_(factor)


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
    rank: int | None = None,
    world_size: int | None = None,
) -> TrainResult:
    """Train ``model`` on ``task``; returns what happened. See the module docstring.

    Checkpoints (when ``cfg.out_dir`` is set): ``out_dir/best`` holds the best evaluated model
    (weights, config, tokenizers); ``out_dir/last`` additionally holds the optimizer, scheduler,
    data position and RNG states that ``resume=True`` continues from.

    ``rank``/``world_size`` default to the joined process group's (see
    :func:`attnlab.distributed.init_distributed`), or 0 of 1. Under several processes every rank
    calls ``train`` with the same config; ``out_dir`` must be one shared folder (rank 0 writes it,
    every rank reads ``out_dir/last`` to resume), and resuming needs the same number of processes,
    ``grad_accum`` and ``strategy``.

    Shape:
        batches are whatever the task yields; the loop only calls ``task.loss`` on them.
    """
    if cfg.grad_accum < 1:
        raise ValueError(f"grad_accum must be ≥ 1, got {cfg.grad_accum}")
    if cfg.strategy not in ("ddp", "fsdp"):
        raise ValueError(f"strategy must be 'ddp' or 'fsdp', got {cfg.strategy!r}")
    _autocast(cfg.precision, torch.device("cpu"))  # reject a bad precision before any work
    rank, world_size = distributed.rank_and_world(rank, world_size)
    device = torch.device(distributed.resolve_device(cfg.device))
    out = Path(cfg.out_dir) if cfg.out_dir else None
    is_main = rank == 0
    many = world_size > 1
    model.to(device)

    step, epoch, batch_in_epoch, tokens_done, train_seconds = 0, 0, 0, 0, 0.0
    best: dict | None = None
    evals_without_gain = 0
    state: dict | None = None
    if resume:
        if out is None or not (out / "last").is_dir():
            raise FileNotFoundError(f"--resume: no checkpoint to resume from at {out / 'last' if out else '(no out_dir)'}")
        last = ckpt.load_checkpoint(out / "last")
        state = last.trainer_state
        saved = {"world_size": state.get("world_size", 1), "grad_accum": state["config"]["grad_accum"],
                 "strategy": state.get("strategy", "ddp")}
        wanted = {"world_size": world_size, "grad_accum": cfg.grad_accum, "strategy": cfg.strategy}
        if not many:
            saved.pop("strategy"), wanted.pop("strategy")  # one process: there is nothing to shard
        if saved != wanted:
            raise ValueError(
                f"--resume: {out / 'last'} was written with {saved}, this run has {wanted}; the position in "
                "the epoch and the per-rank random states depend on them, so resume with the same settings"
            )
        ckpt.load_weights(model, last)
        step, epoch, batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        tokens_done, train_seconds = state["tokens"], state["train_seconds"]
        best, evals_without_gain = state["best"], state["evals_without_gain"]
    if many:
        distributed.barrier("the start of training")
    engine = _prepare(model, cfg, device, world_size)
    params = engine.parameters()
    optimizer = torch.optim.AdamW(_param_groups(engine.sharded or model, cfg.weight_decay), lr=cfg.lr,
                                  betas=cfg.betas, eps=cfg.eps)
    def time_progress() -> float | None:
        # Read when the scheduler steps: the seconds trained before the current step.
        return train_seconds / cfg.time_budget_s if cfg.time_budget_s else None

    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_multiplier(s + 1, cfg, cfg.max_steps, time_progress())
    )
    if state is not None:
        if engine.sharded is not None:
            from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

            set_optimizer_state_dict(engine.sharded, optimizer, state["optimizer"], options=_fsdp_options(False))
        else:
            optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        ckpt.set_rng_state(state["rng_per_rank"][rank] if many else state["rng"])
    else:
        seed_everything(_rank_seed(cfg.seed, rank))
    log = _Log(out / "log.jsonl" if (out and is_main) else None, step if resume else None)
    history: list[dict] = []

    def full_model() -> nn.Module | None:
        """The whole model with the current weights on rank 0 (None elsewhere). With FSDP every
        rank takes part in gathering the shards."""
        if engine.sharded is None:
            return model if is_main else None
        from torch.distributed.checkpoint.state_dict import get_model_state_dict

        full = get_model_state_dict(engine.sharded, options=_fsdp_options(True))  # rank 0 only
        if not is_main:
            return None
        model.load_state_dict(full)
        return model.to(device)

    def optimizer_state() -> dict | None:
        if engine.sharded is None:
            return optimizer.state_dict() if is_main else None
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

        return get_optimizer_state_dict(engine.sharded, optimizer, options=_fsdp_options(True))

    def save(kind: str, module: nn.Module, rngs: list | None = None, optim: dict | None = None) -> None:
        config, tokenizers = task.checkpoint_payload()
        trainer_state = None
        if kind == "last":
            trainer_state = {
                "optimizer": optim,
                "scheduler": scheduler.state_dict(),
                "step": step,
                "epoch": epoch,
                "batch_in_epoch": batch_in_epoch,
                "tokens": tokens_done,
                "train_seconds": train_seconds,
                "best": best,
                "evals_without_gain": evals_without_gain,
                "rng": rngs[0],
                "config": asdict(cfg),
                "world_size": world_size,
                "strategy": cfg.strategy,
            }
            if many:
                trainer_state["rng_per_rank"] = rngs
        ckpt.save_checkpoint(out / kind, model=module, config=config, tokenizers=tokenizers, trainer_state=trainer_state)

    def run_eval(module: nn.Module) -> bool:
        """Rank 0: evaluate, log, keep the best; returns True when early stopping triggers."""
        nonlocal best, evals_without_gain
        module.eval()
        with torch.no_grad():
            metrics = task.evaluate(module)
        module.train()
        record = {"step": step, "epoch": epoch, "train_seconds": train_seconds, "eval": metrics}
        history.append(record)
        log.write(record)
        if _better(metrics[task.metric], None if best is None else best[task.metric], task.maximize):
            best, evals_without_gain = dict(metrics), 0
            if out is not None:
                save("best", module)
        else:
            evals_without_gain += 1
        return cfg.patience is not None and evals_without_gain >= cfg.patience

    def checkpoint_point(evaluate: bool) -> bool:
        """Every rank calls this at the same step. Rank 0 evaluates (if asked) and writes
        out_dir/last; the others wait. Returns True (on every rank) when early stopping triggers."""
        if out is None and not evaluate:
            return False
        module = full_model()
        stop = run_eval(module) if is_main and evaluate else False
        if out is not None:
            # Captured after the evaluation, as a one-process run does: resuming continues from
            # exactly the random state the uninterrupted run continued from.
            rngs = distributed.gather_to_main(ckpt.rng_state()) if many else [ckpt.rng_state()]
            optim = optimizer_state()
            if is_main:
                save("last", module, rngs, optim)
        if engine.sharded is not None and is_main:
            model.to("cpu")
        return distributed.broadcast_flag(stop) if many else stop

    bar = None
    if cfg.progress and is_main:
        from tqdm.auto import tqdm

        # A time budget with no step limit is the binding constraint: count its seconds, not steps.
        by_time = cfg.max_steps is None and cfg.time_budget_s is not None
        bar = (tqdm(total=round(cfg.time_budget_s), initial=round(train_seconds), unit="s", dynamic_ncols=True,
                    leave=False, bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s training [{elapsed}{postfix}]")
               if by_time else tqdm(total=cfg.max_steps, initial=step, unit="step", dynamic_ncols=True, leave=False))
    stop_reason = "epochs"
    model.train()
    engine.forward.train()
    window_loss, window_tokens, window_start = 0.0, 0, time.perf_counter()
    try:
        while epoch < cfg.epochs:
            batches = task.batches(epoch, rank, world_size)
            if not batches:
                raise ValueError("the task produced no training batches (is the training data empty?)")
            groups = [batches[i : i + cfg.grad_accum] for i in range(0, len(batches), cfg.grad_accum)]
            if many:
                # A rank with an extra step would wait forever in its all-reduce: every rank takes
                # as many steps as the rank with the fewest groups.
                fewest, most = distributed.all_reduce([len(groups), -len(groups)], op="min")
                fewest, most = int(fewest), int(-most)
                if fewest != most:
                    if is_main:
                        warnings.warn(f"epoch {epoch}: the ranks got {fewest} to {most} accumulation groups of "
                                      f"batches; every rank trains on its first {fewest}", stacklevel=2)
                    groups = groups[:fewest]
            if bar is not None and cfg.max_steps is None and not by_time:
                bar.total = cfg.epochs * len(groups)
            stop = False
            while batch_in_epoch < len(groups):
                t0 = time.perf_counter()
                group = groups[batch_in_epoch]
                # Weight by tokens (module docstring) whenever more than one micro-batch meets in a step.
                weighted = many or len(group) > 1
                local_loss, local_tokens = 0.0, 0
                optimizer.zero_grad(set_to_none=True)
                for k, batch in enumerate(group):
                    with engine.grad_sync(k == len(group) - 1):
                        with _autocast(cfg.precision, device):
                            loss, n = task.loss(engine.forward, batch)
                        (loss * n if weighted else loss).backward()
                    local_loss += loss.item() * n
                    local_tokens += n
                if many:
                    step_loss, step_tokens = distributed.all_reduce([local_loss, local_tokens], op="sum")
                    step_tokens = int(step_tokens)
                else:
                    step_loss, step_tokens = local_loss, local_tokens
                if weighted:
                    # DDP/FSDP averaged the ranks' summed losses (÷ world_size): rescale to ÷ tokens.
                    _scale_grads(params, world_size / max(step_tokens, 1))
                if cfg.clip_norm is not None:
                    torch.nn.utils.clip_grad_norm_(params, cfg.clip_norm)
                optimizer.step()
                scheduler.step()
                step += 1
                batch_in_epoch += 1
                tokens_done += step_tokens
                window_loss += step_loss
                window_tokens += step_tokens
                train_seconds += time.perf_counter() - t0
                if bar is not None:
                    bar.update(min(time.perf_counter() - t0, bar.total - bar.n) if by_time else 1)
                    bar.set_postfix(step=step, epoch=epoch, loss=f"{step_loss / max(step_tokens, 1):.3f}")
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
                if cfg.eval_every_steps and step % cfg.eval_every_steps == 0:
                    if checkpoint_point(evaluate=True):
                        stop, stop_reason = True, "early_stopping"
                elif cfg.save_every_steps and step % cfg.save_every_steps == 0:
                    checkpoint_point(evaluate=False)
                if cfg.max_steps is not None and step >= cfg.max_steps:
                    stop, stop_reason = True, "max_steps"
                if cfg.time_budget_s is not None:
                    # Clocks differ between ranks: rank 0's decides, or the ranks would part ways.
                    over = train_seconds >= cfg.time_budget_s
                    if distributed.broadcast_flag(over) if many else over:
                        stop, stop_reason = True, "time_budget"
                if stop:
                    break
            if stop:
                epochs_done = epoch + batch_in_epoch / len(groups)
                if stop_reason != "early_stopping":
                    checkpoint_point(evaluate=True)
                break
            epoch, batch_in_epoch = epoch + 1, 0
            epochs_done = float(epoch)
            if not cfg.eval_every_steps and checkpoint_point(evaluate=True):
                stop_reason = "early_stopping"
                break
        else:
            epochs_done = float(epoch)
    except RuntimeError as err:
        if many:
            err.add_note(f"(rank {rank} of {world_size}, optimizer step {step + 1}: if a collective operation "
                         "failed, another rank probably died or hung — see its messages)")
        raise
    finally:
        if bar is not None:
            bar.close()
    if engine.sharded is not None:
        # Hand the caller a whole trained model on every rank, as with DDP.
        from torch.distributed.checkpoint.state_dict import get_model_state_dict

        model.load_state_dict(get_model_state_dict(engine.sharded, options=_fsdp_options(False)))
        model.to(device)
    return TrainResult(step, epochs_done, best, history, train_seconds, tokens_done, stop_reason)
