"""The CPU threads of a run's training steps (``TrainConfig.threads``): a fixed count, PyTorch's
own, or a governor that follows the cores other processes leave free (:class:`attnlab.openmp.ThreadGovernor`).

Shape:
    no tensors.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import torch

from .. import openmp

if TYPE_CHECKING:
    from .. import distributed

__all__ = ["governor_for"]


def governor_for(threads: int | None, engine: distributed.Engine) -> openmp.ThreadGovernor | None:
    """Apply ``threads`` (``TrainConfig.threads``): fix the count (N), or return a governor that
    adapts it (0), or leave it (None). The caller polls the governor after each step and puts
    the count back when the run ends.

    The governor runs only where it can help and cannot surprise: one process on a CPU (under
    torchrun each process has its cores already), Linux's CPU times to read, and no
    ``OMP_NUM_THREADS``, which is the user fixing the count.

    Shape:
        no tensors.
    """
    if threads:
        torch.set_num_threads(threads)
        return None
    if (
        threads is None
        or engine.world_size > 1
        or engine.device.type != "cpu"
        or "OMP_NUM_THREADS" in os.environ
        or not openmp.ThreadGovernor.available()
        or torch.get_num_threads() < 2
    ):
        return None
    return openmp.ThreadGovernor(torch.get_num_threads())
