"""The training loop: :class:`Trainer` and :func:`train`, which builds one and calls its ``fit``.

What the loop adds: AdamW, warm-up + inverse-square-root (or cosine) schedule, gradient
accumulation and clipping, bf16 autocast, ``torch.compile``, evaluation, early stopping, a progress
bar, a JSON-lines log, atomic checkpoints and *exact* resume (the data order and every RNG are
restored, so an interrupted-then-resumed run reproduces the uninterrupted run's losses).

**When a run stops** (:data:`attnlab.train.config.STOP_REASONS`, ``TrainResult.stop_reason``): after its epochs, at
``max_steps``, when the clock (``time_budget_s``) runs out, when the metric has not improved for
``patience`` evaluations, or once an evaluation's metric reaches ``target`` (≥ it when the metric
is maximised, ≤ for a loss). A target makes a run stop on quality rather than on the clock, so
that where it stops does not depend on the machine's speed; a time budget beside it is then a
safety net. Only rank 0 evaluates; its decision is broadcast to the others.

**How it reads.** :class:`Trainer` holds the model, the optimizer and the state
(:class:`attnlab.train.state.TrainState`, where the run stands and what a resumable checkpoint
saves); its methods are the named steps: ``resume``, ``step`` (one optimizer update),
``evaluate``, ``checkpoint`` and ``fit``, the loop that calls them. What the loop only calls
lives beside it: the precision of the steps (:mod:`attnlab.train.precision`), their CPU threads
(:mod:`attnlab.train.threads`), the log and the progress bar (:mod:`attnlab.train.log`), the
settings and the schedule (:mod:`attnlab.train.config`).

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
import sys
import time
import warnings
from collections.abc import Iterable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .. import checkpoint as ckpt
from .. import distributed, openmp, runs
from .config import TrainConfig, TrainResult, TrainTask, lr_multiplier, seed_everything, task_leaves_parameters_unused
from .log import LogWindow, ProgressBar, TrainLog
from .precision import TrainingPrecision, autocast
from .state import START_AGAIN, TrainState, read_resume_point
from .threads import governor_for

__all__ = ["Trainer", "train"]


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
        self.finished = (
            saved.stop_reason if saved is not None and saved.stop_reason and saved.at_limit(cfg, task) else None
        )
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
                    f"{START_AGAIN}"
                ) from None
        log = self.out / runs.RUN_LOG_FILE if (self.out and engine.is_main and not self.finished) else None
        self.log = TrainLog(log, self.state if resume else None)
        if self.state.log_records is None:  # a checkpoint from before the count: count what was kept
            self.state.log_records = self.log.kept
        self.history: list[dict] = []  # every log record of this process
        self.window = LogWindow()
        self.precision = TrainingPrecision(cfg.precision, model, task, engine)  # settled before the first step
        self.bar: ProgressBar | None = None  # rank 0's progress bar, while fit() runs

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
        if self.out is None:
            raise FileNotFoundError("--resume: no checkpoint to resume from (no out_dir)")
        cfg, engine = self.cfg, self.engine
        self.resumed_from, last, saved = read_resume_point(
            self.out,
            world_size=engine.world_size,
            grad_accum=cfg.grad_accum,
            strategy=cfg.strategy,
            is_main=engine.is_main,
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
                with autocast(state.precision or cfg.precision, engine.device):
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
        if self.bar is not None:
            self.bar.metric = {f"valid_{task.metric}": f"{metrics[task.metric]:.4g}{target}"}
        if _better(metrics[task.metric], None if state.best is None else state.best[task.metric], task.maximize):
            state.best, state.evals_without_gain = dict(metrics), 0
            if self.out is not None:
                self._save("best", module)
                self.best_saved = True
        else:
            state.evals_without_gain += 1
        if state.reached_target(self.cfg.target, task):
            return "target"
        if self.cfg.patience is not None and state.evals_without_gain >= self.cfg.patience:
            return "early_stopping"
        return None

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
        self.state.record_stop(stop, final)
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
        self.state.record_stop(stop, final)
        return stop

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
        self.bar = ProgressBar(cfg, state) if cfg.progress and self.engine.is_main else None
        threads_before = torch.get_num_threads()
        self.governor = governor_for(cfg.threads, self.engine)
        if self.bar is not None:  # an interactive run: say what it runs on (the threads issue)
            adapt = ", adapting to the cores other processes leave free" if self.governor else ""
            print(f"attnlab: {openmp.describe()}{adapt}", file=sys.stderr)
        self.model.train()
        self.forward.train()
        self.window = LogWindow()
        try:
            while state.epoch < cfg.epochs:
                groups = self._accumulation_groups()
                if not state.precision:
                    state.precision = self.precision.resolve(groups[0][0])
                if self.bar is not None:
                    self.bar.set_epoch_length(len(groups))
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
        return self._result(stop_reason, epochs_done, self.history, best_saved=self.best_saved)

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
        return self._result(self.finished, epochs_done, [], already_finished=True)

    def _result(self, stop_reason: str, epochs_done: float, history: list[dict], **flags: bool) -> TrainResult:
        state = self.state
        return TrainResult(
            state.step,
            epochs_done,
            state.best,
            history,
            state.train_seconds,
            state.tokens,
            stop_reason,
            metric=self.task.metric,
            precision=state.precision or self.cfg.precision,
            **flags,
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

    def _limit_reached(self) -> str | None:
        """Every rank: "time_budget" or "max_steps" when the run stands at that limit (the time budget
        named first when both are), else None."""
        cfg, state = self.cfg, self.state
        # Clocks differ between ranks: rank 0's decides, or the ranks would part ways.
        if cfg.time_budget_s is not None and self.engine.broadcast_flag(state.train_seconds >= cfg.time_budget_s):
            return "time_budget"
        if cfg.max_steps is not None and state.step >= cfg.max_steps:
            return "max_steps"
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
        return self._limit_reached() or stop  # a limit reached at this step outranks early stopping

    def _report(self, step_loss: float, step_seconds: float) -> None:
        """After a step: advance the progress bar; every ``log_every`` steps, log the window's mean loss."""
        state = self.state
        if self.bar is not None:
            self.bar.advance(state, step_loss, step_seconds)
        if state.step % self.cfg.log_every == 0:
            self._record(self.window.record(state, self.scheduler.get_last_lr()[0]))
            self.window = LogWindow()

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
        autocast(cfg.precision, torch.device("cpu"))  # reject a bad precision before any work
    cfg.check_schedule()
    rank, world_size = distributed.rank_and_world(rank, world_size)
    device = torch.device(distributed.resolve_device(cfg.device))
    model.to(device)
    engine = distributed.make_engine(cfg.strategy, device, rank, world_size)
    return Trainer(model, task, cfg, engine, resume=resume).fit()
