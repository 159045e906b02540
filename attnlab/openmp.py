"""OpenMP settings for the command line, applied before PyTorch loads its OpenMP runtime.

PyTorch's CPU kernels run on OpenMP threads. Between two parallel regions an idle OpenMP thread
*spin-waits* by default (GNU libgomp: ``OMP_WAIT_POLICY`` unset spins for a while before it sleeps),
which is fastest when the process has the cores to itself. On a machine that is also running a
browser, an editor or a second job, the spinning threads compete with that work for the same
cores, and a training step can become ten times slower (docs/distributed.md has the figures).
``OMP_WAIT_POLICY=PASSIVE`` makes idle threads sleep at once: a little overhead per parallel
region on an idle machine, none of the collapse on a busy one. So the CLI uses it unless the user
chose a policy.

The runtime reads the variable once, when it is loaded, so it must be in the environment before
``import torch``: the ``attnlab`` command's entry point (:func:`attnlab._launch.main`) calls
:func:`configure` before it imports anything that imports PyTorch, and ``attnlab/__init__``
loads its PyTorch-backed names lazily for that reason. A program that imports PyTorch first (a
notebook, a test) keeps whatever its environment says; :func:`describe` reports what is in force.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

__all__ = ["DEFAULT_WAIT_POLICY", "configure", "describe"]

#: The wait policy of the ``attnlab`` command when the environment names none.
DEFAULT_WAIT_POLICY = "PASSIVE"

# Where the policy in force came from, set by configure(): "attnlab", "environment" or "unknown".
_source = "unknown"


def configure(environ: MutableMapping[str, str] | None = None) -> str:
    """Set ``OMP_WAIT_POLICY`` to :data:`DEFAULT_WAIT_POLICY` unless the environment sets it;
    return where the policy in force comes from: ``"attnlab"``, ``"environment"`` or, when
    PyTorch is already loaded (too late to change it), ``"unknown"``.

    Shape:
        no tensors.
    """
    global _source
    env = os.environ if environ is None else environ
    if "OMP_WAIT_POLICY" in env:
        _source = "environment"
    elif "torch" in sys.modules:
        _source = "unknown"
    else:
        env["OMP_WAIT_POLICY"] = DEFAULT_WAIT_POLICY
        _source = "attnlab"
    return _source


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
    }.get(_source, "set before attnlab started" if policy else "OpenMP's default: spin, then sleep")
    return (
        f"threads {torch.get_num_threads()} (OMP_NUM_THREADS or torch's default), "
        f"OpenMP wait policy {policy or 'unset'} ({origin})"
    )
