"""OpenMP settings for the command line, applied before PyTorch loads its OpenMP runtime, and
the thread count of training, which follows the machine's load.

PyTorch's CPU kernels run on OpenMP threads. Between two parallel regions an idle OpenMP thread
*spin-waits* by default (GNU libgomp: ``OMP_WAIT_POLICY`` unset spins for a while before it sleeps),
which is fastest when the process has the cores to itself. On a machine that is also running a
browser, an editor or a second job, the spinning threads compete with that work for the same
cores, and a step can become several times slower (docs/distributed.md has the figures). Two
remedies, each measured there:

- **Training adapts its thread count** (:class:`ThreadGovernor`, ``TrainConfig.threads = 0``):
  as many threads as the cores that other processes leave free. With no thread waiting on a busy
  core, spinning costs nothing, so the training commands (``train``, ``demo``, ``experiment``)
  keep OpenMP's default policy, the fastest on an idle machine.
- **Every other command** (translate, explore, export, …) runs with ``OMP_WAIT_POLICY=PASSIVE``:
  idle threads sleep at once, a little overhead per parallel region on an idle machine and none of
  the collapse on a busy one. So does a training command whose threads the user fixed with
  ``OMP_NUM_THREADS``.

A policy the user set is always kept. The runtime reads the variable once, when it is loaded, so
it must be in the environment before ``import torch``: the ``attnlab`` command's entry point
(:func:`attnlab._launch.main`) calls :func:`configure` before it imports anything that imports
PyTorch, and ``attnlab/__init__`` loads its PyTorch-backed names lazily for that reason. A program
that imports PyTorch first (a notebook, a test) keeps whatever its environment says;
:func:`describe` reports what is in force.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping, Sequence

__all__ = ["ADAPTIVE_COMMANDS", "DEFAULT_WAIT_POLICY", "ThreadGovernor", "configure", "describe", "proc_cpu_seconds"]

#: The wait policy of the ``attnlab`` command when the environment names none.
DEFAULT_WAIT_POLICY = "PASSIVE"

#: The commands whose work is the training loop, which adapts its threads to the load
#: (:class:`ThreadGovernor`); they keep OpenMP's default wait policy.
ADAPTIVE_COMMANDS = ("train", "demo", "experiment")

# Where the policy in force came from, set by configure(): "attnlab", "adaptive", "environment" or "unknown".
_source = "unknown"


def configure(environ: MutableMapping[str, str] | None = None, argv: Sequence[str] | None = None) -> str:
    """Choose ``OMP_WAIT_POLICY`` for the command ``argv`` (``sys.argv[1:]``) unless the
    environment sets it; return where the policy in force comes from:

    - ``"environment"``: the user's own setting, kept;
    - ``"adaptive"``: a training command (:data:`ADAPTIVE_COMMANDS`) whose threads the user did not
      fix (``OMP_NUM_THREADS``, ``--threads``), left to OpenMP's default, because the training loop
      adapts its thread count instead;
    - ``"attnlab"``: set to :data:`DEFAULT_WAIT_POLICY`;
    - ``"unknown"``: PyTorch is already loaded, too late to change it.

    Shape:
        no tensors.
    """
    global _source
    env = os.environ if environ is None else environ
    command = next(iter(argv or ()), "")
    if "OMP_WAIT_POLICY" in env:
        _source = "environment"
    elif "torch" in sys.modules:
        _source = "unknown"
    elif command in ADAPTIVE_COMMANDS and not _threads_fixed(env, argv or ()):
        _source = "adaptive"
    else:
        env["OMP_WAIT_POLICY"] = DEFAULT_WAIT_POLICY
        _source = "attnlab"
    return _source


def _threads_fixed(env: MutableMapping[str, str], argv: Sequence[str]) -> bool:
    """Whether the user fixed the thread count (``OMP_NUM_THREADS`` or a ``--threads`` flag)."""
    return "OMP_NUM_THREADS" in env or any(a == "--threads" or a.startswith("--threads=") for a in argv)


def describe() -> str:
    """One line for a run's log: the threads PyTorch uses and the OpenMP wait policy in force.

    Shape:
        no tensors.
    """
    import torch

    policy = os.environ.get("OMP_WAIT_POLICY")
    origin = {
        "attnlab": "attnlab's default for the command line",
        "environment": "from the environment",
        "adaptive": "OpenMP's default, spin then sleep: the thread count follows the load instead",
    }.get(_source, "set before attnlab started" if policy else "OpenMP's default: spin, then sleep")
    return (
        f"threads {torch.get_num_threads()} (OMP_NUM_THREADS or torch's default), "
        f"OpenMP wait policy {policy or 'unset'} ({origin})"
    )


# --------------------------------------------------------------------------------------------
# The number of threads: follow the cores other processes leave free.
# --------------------------------------------------------------------------------------------


def proc_cpu_seconds() -> tuple[float, float]:
    """(CPU seconds all processes have used, CPU seconds this process has used), from /proc.

    ``/proc/stat``'s first line sums every CPU's time by kind, in clock ticks; busy time is all of
    it but ``idle`` and ``iowait``. ``/proc/self/stat`` gives this process's ``utime`` and
    ``stime`` (all its threads), fields 14 and 15, counted after the command name in parentheses,
    which may itself hold spaces. :class:`ThreadGovernor` samples it by default.

    Shape:
        no tensors.
    """
    hz = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    busy = sum(ticks[:8]) - idle  # user nice system idle iowait irq softirq steal (guest is inside user)
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    own = int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of the whole line
    return busy / hz, own / hz


class ThreadGovernor:
    """Keeps PyTorch's intra-op threads at the number of cores that other processes leave free.

    Why: OpenMP threads meet at a barrier after every parallel region, so a step runs at the pace
    of its slowest thread. When another program takes one of the cores, the thread that shares it
    holds every barrier up, and spinning threads make it worse; a thread fewer then trains faster
    than all of them (docs/distributed.md has the measurements). On an idle machine all the cores
    are fastest. Neither fixed choice suits a laptop where a browser or a second job comes and goes,
    so the trainer asks this class, every step, whether to change; it measures every
    ``interval_s`` seconds how much CPU time the *other* processes used (all CPU time from
    ``/proc/stat`` less this process's own) and keeps ``floor(cores − others + margin)`` threads,
    between 1 and ``max_threads``. It drops threads at the first such measurement (a competitor
    costs most while we spin against it) and adds them back only after two measurements agree.

    Changing the thread count can change the last bits of floating-point sums, so a run whose
    results must be bit-identical with another (an exact resume) should fix its threads instead
    (``TrainConfig.threads`` or ``OMP_NUM_THREADS``).

    Shape:
        no tensors.
    """

    def __init__(
        self,
        max_threads: int,
        *,
        interval_s: float = 2.0,
        margin: float = 0.3,
        cores: int | None = None,
        sample=proc_cpu_seconds,
        clock=None,
        set_threads=None,
    ) -> None:
        import time

        if max_threads < 1:
            raise ValueError(f"max_threads must be ≥ 1, got {max_threads}")
        self.max_threads = max_threads
        self.interval_s = interval_s
        self.margin = margin
        self.cores = cores or os.cpu_count() or 1
        self._sample = sample
        self._clock = clock or time.monotonic
        if set_threads is None:
            import torch

            set_threads = torch.set_num_threads
        self._set_threads = set_threads
        self.threads = max_threads  # the count in force (the caller starts with max_threads)
        self._pending: int | None = None  # a higher count seen once, waiting for a second look
        self._last = (self._clock(), *self._sample())

    @staticmethod
    def available() -> bool:
        """Whether this system exposes the CPU times the governor reads (Linux's /proc)."""
        return os.path.exists("/proc/stat") and os.path.exists("/proc/self/stat")

    def wanted(self, others: float) -> int:
        """The thread count for ``others`` cores' worth of CPU used by other processes."""
        free = self.cores - others
        return max(1, min(self.max_threads, int(free + self.margin)))

    def poll(self) -> int | None:
        """Measure if ``interval_s`` has passed and set the thread count; return it if it changed."""
        now = self._clock()
        if now - self._last[0] < self.interval_s:
            return None
        busy, own = self._sample()
        elapsed = now - self._last[0]
        others = max(0.0, (busy - self._last[1]) - (own - self._last[2])) / elapsed
        self._last = (now, busy, own)
        want = self.wanted(others)
        if want > self.threads and self._pending != want:
            self._pending = want  # more cores look free: wait for a second measurement to agree
            return None
        self._pending = None
        if want == self.threads:
            return None
        self.threads = want
        self._set_threads(want)
        return want
