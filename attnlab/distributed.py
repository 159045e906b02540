"""Several processes, one training run: PyTorch's own distributed engine, set up from torchrun.

``torchrun`` (``python -m torch.distributed.run``) starts one process per GPU or per group of CPU
cores and tells each who it is through environment variables:

==============  ===============================================================
``RANK``        this process's index among all processes, 0 … WORLD_SIZE-1
``WORLD_SIZE``  how many processes take part (over every machine)
``LOCAL_RANK``  the index on this machine (which GPU to use)
``MASTER_ADDR`` ``MASTER_PORT``  where the processes meet (torchrun's rendezvous store)
==============  ===============================================================

:func:`init_distributed` reads them and joins the process group — ``nccl`` between GPUs, ``gloo``
between CPU processes — with a *timeout*, so that a collective operation whose partner never
arrives fails instead of waiting forever. Started without torchrun it does nothing and the same
code runs as one process. :func:`session` wraps it for the command line.

When a rank dies, the others are stopped three ways, whichever comes first:

1. torchrun's agent watches its processes; when one exits with an error it terminates the
   others on its machine and exits non-zero itself, printing which rank failed and why;
2. gloo notices a closed connection at once: the survivors' next collective raises
   ``Connection reset by peer``;
3. a rank that hangs (or a machine that vanishes without closing its connections) is caught
   by the timeout: gloo raises ``Timed out waiting ... ms``; NCCL's watchdog aborts the
   communicator (``TORCH_NCCL_ASYNC_ERROR_HANDLING``, on by default).

**The engine.** :class:`Engine` is everything the training loop (:mod:`attnlab.train`) needs to
know about the other processes: how the model is wrapped, how gradient accumulation skips the
all-reduce, which rank logs and saves, how a step's loss is summed over the ranks, how the whole
model is gathered for evaluation and checkpoints. :class:`Engine` itself is the single process
(every method is the identity or does nothing), :class:`DDPEngine` replicates the model with
DistributedDataParallel and :class:`FSDPEngine` shards it with FSDP2; :func:`make_engine` picks
one. So the loop reads as a one-process loop.

Shape:
    the collectives here move small 1-D float64 tensors (a few per optimizer step), never
    activations; gradients are reduced by DistributedDataParallel / FSDP themselves.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import inspect
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "DDPEngine",
    "DistContext",
    "Engine",
    "FSDPEngine",
    "all_reduce",
    "barrier",
    "broadcast_flag",
    "gather_to_main",
    "init_distributed",
    "launched_by_torchrun",
    "make_engine",
    "rank_and_world",
    "resolve_device",
    "session",
    "shutdown",
]

#: How long a collective may wait for the slowest rank before it fails (PyTorch's own default for
#: gloo). Rank 0 evaluates and writes checkpoints while the others wait in a collective, so this
#: must exceed the longest evaluation; lower it (``--dist-timeout``) to hear sooner of a hung rank.
DEFAULT_TIMEOUT_S = 1800.0

_ENV_NEEDED = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class DistContext:
    """Who this process is in the run, and where it computes.

    Shape:
        no tensors.
    """

    rank: int  # index of this process among all processes (0 = the one that logs and saves)
    world_size: int  # number of processes in the run (1: no process group)
    local_rank: int  # index of this process on its machine (selects the GPU)
    device: str  # the device this process trains on: "cpu", "cuda:<local_rank>" or "mps"
    backend: str | None  # "gloo", "nccl", or None when running alone

    @property
    def is_main(self) -> bool:
        """True on rank 0: the process that logs, evaluates and writes checkpoints."""
        return self.rank == 0


def resolve_device(name: str = "auto", local_rank: int | None = None) -> str:
    """A concrete device name for ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"mps"``.

    ``"auto"`` picks CUDA when a GPU is visible, then Apple's MPS, then the CPU. A bare ``"cuda"``
    becomes ``"cuda:<local_rank>"`` (default: the current CUDA device), so that every process of a
    multi-GPU run uses its own GPU.

    Raises:
        ValueError: an unknown name, or a device this machine does not have.

    Shape:
        no tensors.
    """
    if not isinstance(name, str):
        raise TypeError(f"device must be a string such as 'auto', 'cpu', 'cuda', 'mps'; got {type(name).__name__}")
    if name == "auto":
        if torch.cuda.is_available():
            name = "cuda"
        elif torch.backends.mps.is_available():
            name = "mps"
        else:
            name = "cpu"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"unknown device {name!r}; choose auto, cpu, cuda, cuda:N or mps") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r}: CUDA is not available on this machine (try --device auto or cpu)")
        index = device.index
        if index is None:
            index = torch.cuda.current_device() if local_rank is None else local_rank
        if index >= torch.cuda.device_count():
            raise ValueError(f"device cuda:{index}: this machine has {torch.cuda.device_count()} GPU(s)")
        return f"cuda:{index}"
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {name!r}: Apple MPS is not available on this machine (try --device auto or cpu)")
    if device.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"unsupported device {name!r}; choose auto, cpu, cuda, cuda:N or mps")
    return str(device)


def launched_by_torchrun() -> bool:
    """True when the environment describes a process group (torchrun or an equivalent launcher).

    Shape:
        no tensors.
    """
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def _env_int(name: str) -> int:
    raw = os.environ.get(name, "")
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not an integer (set by torchrun)") from None


def init_distributed(device: str = "auto", *, timeout_s: float = DEFAULT_TIMEOUT_S) -> DistContext:
    """Join the process group described by torchrun's environment variables, or run alone.

    Without ``WORLD_SIZE`` in the environment (or with ``WORLD_SIZE=1``) nothing is initialised
    and the context says rank 0 of 1. Otherwise: the CUDA device becomes ``cuda:LOCAL_RANK``,
    the backend is ``nccl`` for CUDA and ``gloo`` otherwise, and every collective fails after
    ``timeout_s`` seconds instead of waiting for a partner forever. Calling it again returns
    the group already joined.

    Args:
        device: "auto", "cpu", "cuda" or "mps" (see :func:`resolve_device`).
        timeout_s: how long a collective waits for the slowest rank (see DEFAULT_TIMEOUT_S).

    Raises:
        ValueError: incomplete or non-integer torchrun variables, a bad timeout or device.

    Shape:
        no tensors.
    """
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    if dist.is_available() and dist.is_initialized():
        rank, world = dist.get_rank(), dist.get_world_size()
        local = _env_int("LOCAL_RANK") if "LOCAL_RANK" in os.environ else rank
        return DistContext(rank, world, local, resolve_device(device, local), dist.get_backend())
    if not launched_by_torchrun() or _env_int("WORLD_SIZE") == 1:
        return DistContext(0, 1, 0, resolve_device(device, 0), None)
    missing = [name for name in _ENV_NEEDED if name not in os.environ]
    if missing:
        raise ValueError(f"distributed launch: environment variables {missing} are missing; start with torchrun")
    rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
    local = _env_int("LOCAL_RANK") if "LOCAL_RANK" in os.environ else rank
    if not 0 <= rank < world:
        raise ValueError(f"distributed launch: RANK={rank} is not in 0..WORLD_SIZE-1={world - 1}")
    resolved = resolve_device(device, local)
    kind = torch.device(resolved).type
    if kind == "mps":
        raise ValueError("several processes on Apple MPS are not supported by PyTorch; use --device cpu or one process")
    timeout = datetime.timedelta(seconds=timeout_s)
    if kind == "cuda":
        torch.cuda.set_device(resolved)  # "cuda" tensors of this process now land on its own GPU
        dist.init_process_group("nccl", timeout=timeout, device_id=torch.device(resolved))
    else:
        dist.init_process_group("gloo", timeout=timeout)
    return DistContext(rank, world, local, resolved, dist.get_backend())


def shutdown() -> None:
    """Leave the process group (if one was joined); safe to call when running alone.

    Shape:
        no tensors.
    """
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


@contextlib.contextmanager
def session(device: str = "auto", *, timeout_s: float = DEFAULT_TIMEOUT_S) -> Iterator[DistContext]:
    """``with session(...) as ctx:`` — :func:`init_distributed`, then :func:`shutdown` on the way out.

    Only rank 0 talks: the standard output of the other ranks is discarded inside the block
    (their errors still reach standard error), so a command prints its summary once.

    Shape:
        no tensors.
    """
    joined_here = not (dist.is_available() and dist.is_initialized())
    ctx = init_distributed(device, timeout_s=timeout_s)
    try:
        if ctx.is_main:
            yield ctx
        else:
            with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
                yield ctx
    finally:
        if joined_here:
            shutdown()


def rank_and_world(rank: int | None = None, world_size: int | None = None) -> tuple[int, int]:
    """``(rank, world_size)``: the given values, else the joined process group's, else ``(0, 1)``.

    Raises:
        ValueError: values that contradict each other or the joined group.

    Shape:
        no tensors.
    """
    initialized = dist.is_available() and dist.is_initialized()
    if initialized:
        rank = dist.get_rank() if rank is None else rank
        world_size = dist.get_world_size() if world_size is None else world_size
        if (rank, world_size) != (dist.get_rank(), dist.get_world_size()):
            raise ValueError(
                f"rank={rank}, world_size={world_size} disagree with the process group "
                f"(rank {dist.get_rank()} of {dist.get_world_size()}); leave them out to use the group's"
            )
    rank = 0 if rank is None else rank
    world_size = 1 if world_size is None else world_size
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
    if world_size > 1 and not initialized:
        raise ValueError(
            f"world_size={world_size} needs a process group: launch with torchrun and call "
            "attnlab.distributed.init_distributed() first"
        )
    return rank, world_size


def _comm_device() -> torch.device:
    # NCCL moves only CUDA tensors; gloo only CPU ones.
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _explain(what: str, err: BaseException) -> RuntimeError:
    return RuntimeError(
        f"rank {dist.get_rank()} of {dist.get_world_size()}: {what} failed — another rank probably "
        f"died or hung (see its messages above; a hung rank is detected after the process group's "
        f"timeout). Stopping this rank. Cause: {err}"
    )


_REDUCE_OPS = {"sum": "SUM", "min": "MIN", "max": "MAX"}


def all_reduce(values: list[float], op: str = "sum") -> list[float]:
    """The element-wise ``op`` ("sum", "min" or "max") of ``values`` over all ranks, in float64
    (token counts stay exact up to 2**53).

    Shape:
        values: N floats on every rank → N floats, the same on every rank.
    """
    if op not in _REDUCE_OPS:
        raise ValueError(f"op must be one of {sorted(_REDUCE_OPS)}, got {op!r}")
    tensor = torch.tensor(values, dtype=torch.float64, device=_comm_device())  # (N,)
    try:
        dist.all_reduce(tensor, op=getattr(dist.ReduceOp, _REDUCE_OPS[op]))
    except RuntimeError as err:
        raise _explain("reducing the step's loss and token counts over the ranks", err) from err
    return tensor.tolist()


def broadcast_flag(flag: bool) -> bool:
    """Rank 0's ``flag`` on every rank (a decision only rank 0 can make, such as early stopping).

    The other ranks block here until rank 0 arrives: this is where they wait while rank 0
    evaluates and writes checkpoints.

    Shape:
        no tensors (one byte is sent).
    """
    tensor = torch.tensor([int(flag)], dtype=torch.uint8, device=_comm_device())  # (1,)
    try:
        dist.broadcast(tensor, src=0)
    except RuntimeError as err:
        raise _explain("waiting for rank 0 (evaluation, checkpoint or stop decision)", err) from err
    return bool(tensor.item())


def gather_to_main(obj: Any) -> list[Any] | None:
    """Every rank's ``obj`` (picklable), as a list indexed by rank on rank 0; None elsewhere.

    Shape:
        no tensors beyond those inside ``obj``.
    """
    out: list[Any] | None = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    try:
        dist.gather_object(obj, out, dst=0)
    except RuntimeError as err:
        raise _explain("gathering the ranks' random-number states for the checkpoint", err) from err
    return out


def barrier(what: str, timeout_s: float | None = None) -> None:
    """Wait until every rank gets here; fail naming the ranks that did not, after ``timeout_s``.

    On gloo this is ``monitored_barrier``, which reports *which* ranks are missing; NCCL has no
    monitored barrier, so there it is the ordinary barrier with the group's timeout.

    Shape:
        no tensors.
    """
    try:
        if dist.get_backend() == "gloo":
            timeout = None if timeout_s is None else datetime.timedelta(seconds=timeout_s)
            dist.monitored_barrier(timeout=timeout, wait_all_ranks=True)
        else:
            dist.barrier()
    except RuntimeError as err:
        raise _explain(f"waiting for every rank at {what}", err) from err


# --------------------------------------------------------------------------------------------
# The engine: what the training loop asks of the other processes
# --------------------------------------------------------------------------------------------


class Engine:
    """One process: what the training loop needs to know about the other ranks, when there are none.

    The loop hands the model to :meth:`wrap` once and trains what it returns; every other method
    stands where several processes must agree or exchange something (gradients, the step's loss,
    a stop decision, random states, the whole model for evaluation and saving). Here each is the
    identity or does nothing; :class:`DDPEngine` and :class:`FSDPEngine` make them real.

    Shape:
        no tensors beyond the model's (:meth:`all_reduce` takes and returns plain floats).
    """

    def __init__(self, device: torch.device, rank: int = 0, world_size: int = 1) -> None:
        self.device = device  # where this rank trains
        self.rank = rank  # this process's index; 0 logs, evaluates and writes checkpoints
        self.world_size = world_size  # number of processes in the run
        self.module: nn.Module | None = None  # the caller's model (set by wrap): evaluated and saved by rank 0
        self.trained: nn.Module | None = None  # the module whose parameters the optimizer updates

    @property
    def is_main(self) -> bool:
        """True on rank 0: the process that logs, evaluates and writes checkpoints."""
        return self.rank == 0

    def wrap(self, model: nn.Module, *, compile: bool = False, find_unused_parameters: bool = False) -> nn.Module:
        """Take charge of ``model`` (trained in place); return what the training forward calls,
        compiled with ``torch.compile`` when asked. ``find_unused_parameters``: some parameters
        take no part in the loss (:func:`attnlab.train.task_leaves_parameters_unused`); only DDP
        needs to know."""
        self.module = self.trained = model
        return torch.compile(model) if compile else model

    def parameters(self) -> list[nn.Parameter]:
        """The parameters the optimizer updates (this rank's shards under FSDP)."""
        return list(self.trained.parameters())

    def no_sync(self) -> contextlib.AbstractContextManager:
        """Backward passes inside accumulate their gradients locally, without reducing them over
        the ranks: all micro-batches of an accumulation group but the last, whose backward then
        reduces the group's sum once."""
        return contextlib.nullcontext()

    def all_reduce(self, values: list[float], op: str = "sum") -> list[float]:
        """The element-wise ``op`` of ``values`` over all ranks (see :func:`all_reduce`)."""
        return list(values)

    def broadcast_flag(self, flag: bool) -> bool:
        """Rank 0's ``flag`` on every rank (see :func:`broadcast_flag`)."""
        return flag

    def gather_to_main(self, obj: Any) -> list[Any] | None:
        """Every rank's ``obj`` as a list indexed by rank on rank 0; None elsewhere."""
        return [obj]

    def barrier(self, what: str) -> None:
        """Wait until every rank gets here (``what`` names the place in error messages)."""

    def full_model(self) -> nn.Module | None:
        """The whole model with the current weights on rank 0, for evaluation and saving; None
        elsewhere. Every rank calls it (FSDP gathers the shards)."""
        return self.module if self.is_main else None

    def release_full_model(self) -> None:
        """Done with :meth:`full_model`'s module until the next evaluation or checkpoint."""

    def optimizer_state(self, optimizer: torch.optim.Optimizer) -> dict | None:
        """The whole optimizer ``state_dict`` on rank 0 (None elsewhere); every rank calls it."""
        return optimizer.state_dict() if self.is_main else None

    def load_optimizer_state(self, optimizer: torch.optim.Optimizer, state: dict) -> None:
        """Restore what :meth:`optimizer_state` returned (on every rank)."""
        optimizer.load_state_dict(state)

    def finish(self) -> None:
        """Leave the trained weights in the caller's model, on every rank."""

    def explain(self, err: BaseException, where: str) -> None:
        """Add a note to ``err`` naming this rank and ``where`` it stopped, when another rank may
        be the cause (a failed collective)."""


class _ProcessGroup(Engine):
    """Several processes in the joined process group: the collectives are real."""

    def all_reduce(self, values: list[float], op: str = "sum") -> list[float]:
        return all_reduce(values, op)

    def broadcast_flag(self, flag: bool) -> bool:
        return broadcast_flag(flag)

    def gather_to_main(self, obj: Any) -> list[Any] | None:
        return gather_to_main(obj)

    def barrier(self, what: str) -> None:
        barrier(what)

    def explain(self, err: BaseException, where: str) -> None:
        err.add_note(
            f"(rank {self.rank} of {self.world_size}, {where}: if a collective operation "
            "failed, another rank probably died or hung — see its messages)"
        )


class DDPEngine(_ProcessGroup):
    """Every rank holds the whole model; DistributedDataParallel all-reduces the gradients.

    Shape:
        no tensors beyond the model's.
    """

    def wrap(self, model: nn.Module, *, compile: bool = False, find_unused_parameters: bool = False) -> nn.Module:
        # No buffer sync before each forward: the models' buffers are constant tables (positions), not
        # running statistics (PyTorch 2.13 renamed broadcast_buffers to forward_sync_buffers).
        ddp_args = inspect.signature(nn.parallel.DistributedDataParallel).parameters
        no_buffer_sync = {"forward_sync_buffers" if "forward_sync_buffers" in ddp_args else "broadcast_buffers": False}
        # find_unused_parameters only for a task whose loss leaves parameters out (BERT's pooler in
        # MLM-only training), which DDP would otherwise reject at the next step: it costs a walk over
        # the autograd graph per step (and a warning when nothing was unused). static_graph would
        # avoid the walk but fails with no_sync().
        self._ddp = nn.parallel.DistributedDataParallel(
            model,
            device_ids=[self.device.index] if self.device.type == "cuda" else None,
            find_unused_parameters=find_unused_parameters,
            **no_buffer_sync,
        )
        self.module = self.trained = model
        return torch.compile(self._ddp) if compile else self._ddp

    def no_sync(self) -> contextlib.AbstractContextManager:
        return self._ddp.no_sync()


class FSDPEngine(_ProcessGroup):
    """FSDP2 (``fully_shard``): parameters, gradients and AdamW moments are split over the ranks.

    The caller's model waits on the CPU and is filled from the shards on rank 0 whenever it is
    evaluated or saved; at the end every rank gets the whole trained model back.

    Shape:
        no tensors beyond the model's.
    """

    def wrap(self, model: nn.Module, *, compile: bool = False, find_unused_parameters: bool = False) -> nn.Module:
        # find_unused_parameters is DDP's alone: FSDP2's fully_shard has no such option.
        for tensor in model.state_dict().values():  # every rank shards rank 0's initialisation
            dist.broadcast(tensor, src=0)
        sharded = _shard(copy.deepcopy(model))
        model.to("cpu")  # the full model waits on the CPU; rank 0 fills it for evaluation/saving
        self.module, self.trained = model, sharded
        return torch.compile(sharded) if compile else sharded

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        self.trained.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            self.trained.set_requires_gradient_sync(True)

    def full_model(self) -> nn.Module | None:
        from torch.distributed.checkpoint.state_dict import get_model_state_dict

        full = get_model_state_dict(self.trained, options=_fsdp_options(cpu_offload=True))  # rank 0 only
        if not self.is_main:
            return None
        self.module.load_state_dict(full)
        return self.module.to(self.device)

    def release_full_model(self) -> None:
        if self.is_main:
            self.module.to("cpu")

    def optimizer_state(self, optimizer: torch.optim.Optimizer) -> dict | None:
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

        state = get_optimizer_state_dict(self.trained, optimizer, options=_fsdp_options(cpu_offload=True))
        return state if self.is_main else None

    def load_optimizer_state(self, optimizer: torch.optim.Optimizer, state: dict) -> None:
        from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

        set_optimizer_state_dict(self.trained, optimizer, state, options=_fsdp_options(cpu_offload=False))

    def finish(self) -> None:
        # Hand the caller a whole trained model on every rank, as with DDP.
        from torch.distributed.checkpoint.state_dict import get_model_state_dict

        self.module.load_state_dict(get_model_state_dict(self.trained, options=_fsdp_options(cpu_offload=False)))
        self.module.to(self.device)


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


def _fsdp_options(cpu_offload: bool):
    # Whole (unsharded) state dicts, as ordinary checkpoints hold them. With cpu_offload only rank 0
    # receives one, on its CPU; without, every rank gets it on its device.
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, cpu_offload=cpu_offload)


def make_engine(strategy: str, device: torch.device, rank: int = 0, world_size: int = 1) -> Engine:
    """The engine for a run: :class:`Engine` for one process, else :class:`DDPEngine` (``"ddp"``)
    or :class:`FSDPEngine` (``"fsdp"``). Several processes need the joined process group.

    Raises:
        ValueError: an unknown strategy.

    Shape:
        no tensors.
    """
    if strategy not in ("ddp", "fsdp"):
        raise ValueError(f"strategy must be 'ddp' or 'fsdp', got {strategy!r}")
    if world_size == 1:
        return Engine(device)
    return (FSDPEngine if strategy == "fsdp" else DDPEngine)(device, rank, world_size)
