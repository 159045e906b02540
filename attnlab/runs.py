"""Training run folders, where a run resumes from, and the random state an exact resume restores.

A training run (:func:`attnlab.train.train`) writes into its folder::

    log.jsonl   the run's JSON-lines log (RUN_LOG_FILE)
    best/       the checkpoint that scored best on the validation data
    last/       the latest checkpoint, with trainer_state.pt: what --resume continues from

One run per folder: :func:`check_run_folder` refuses a folder that holds another run unless the
run resumes it (:func:`resume_point`) or overwrites it (:func:`clear_run_folder`). The checkpoints
themselves are written and read by :mod:`attnlab.checkpoint`, atomically: an interrupted save
leaves hidden ``.NAME.tmp-*`` and ``.NAME.previous`` folders beside them, which
:func:`resume_point` and :func:`remove_save_leftovers` understand.

:func:`rng_state` and :func:`set_rng_state` capture and restore the global random generators
(Python, NumPy, PyTorch) in the plain types a checkpoint's trainer state may hold, so that a
resumed run draws what the uninterrupted one would have drawn.

Shape:
    no tensors cross this module's interface except the RNG states (uint8 tensors, as PyTorch
    gives them).
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .checkpoint import CONFIG_FILE, WEIGHTS_FILE, is_checkpoint, previous_path
from .files import fsync_dir

__all__ = [
    "RUN_LOG_FILE",
    "RUN_CHECKPOINTS",
    "resume_point",
    "check_run_folder",
    "clear_run_folder",
    "remove_save_leftovers",
    "rng_state",
    "set_rng_state",
]

RUN_LOG_FILE = "log.jsonl"  # a training run's JSON-lines log, beside its best/ and last/ checkpoints
# The checkpoints a training run keeps in its folder: the best so far and the last (see above).
RUN_CHECKPOINTS = ("best", "last")

Tensor = torch.Tensor

# --------------------------------------------------------------------------------------------
# Run folders: one run per folder, and where a run resumes from
# --------------------------------------------------------------------------------------------


def _run_entries(out: Path) -> list[Path]:
    """The entries of a training run in ``out``, in the order :func:`clear_run_folder` deletes them."""
    found = []
    for name in RUN_CHECKPOINTS:
        found += [out / name, out / f".{name}.previous"]
        if out.is_dir():
            found += sorted(p for p in out.iterdir() if p.name.startswith(f".{name}.tmp-"))
    found.append(out / RUN_LOG_FILE)  # last: a folder cleared halfway still shows a run
    return [p for p in found if p.exists() or p.is_symlink()]


def resume_point(out_dir: str | os.PathLike) -> Path:
    """The checkpoint a training run in ``out_dir`` resumes from: ``out_dir/last``, or, when a save
    was interrupted between its two renames (:mod:`attnlab.checkpoint`'s docstring, steps 3–4), the intact previous
    checkpoint ``out_dir/.last.previous``. The next save of ``last`` then completes the interrupted one.

    Raises:
        FileNotFoundError: neither exists (one line: there is nothing to resume).

    Shape:
        no tensors; returns a directory.
    """
    last = Path(out_dir) / "last"
    if last.is_dir():
        return last
    previous = previous_path(last)
    if is_checkpoint(previous):
        return previous
    raise FileNotFoundError(f"--resume: no checkpoint to resume from at {last}; start the run without --resume")


def check_run_folder(out_dir: str | os.PathLike | None, resume: bool, overwrite: bool = False) -> Path | None:
    """Check, before any work, that a run may write into ``out_dir``; return what it resumes from.

    A folder holds at most one run. With ``resume`` the run continues the one there (the
    checkpoint of :func:`resume_point` is returned); otherwise a folder already holding a run
    (its ``log.jsonl``, ``last/`` or ``best/``) is refused, unless ``overwrite``, which lets
    :func:`clear_run_folder` delete that run when training starts.

    Raises:
        ValueError: ``resume`` and ``overwrite`` together.
        FileNotFoundError: ``resume`` without a checkpoint to resume from (or without ``out_dir``).
        FileExistsError: ``out_dir`` holds another run, or is not a directory.

    Shape:
        no tensors.
    """
    if resume and overwrite:
        raise ValueError("--resume continues the run in the output folder and --overwrite deletes it: give one")
    if out_dir is None:
        if resume:
            raise FileNotFoundError("--resume: no checkpoint to resume from (no output folder given)")
        return None
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} exists and is not a directory; give a folder for the run")
    if resume:
        return resume_point(out)
    entries = _run_entries(out)
    if entries and not overwrite:
        names = ", ".join(p.name + ("/" if p.is_dir() else "") for p in entries)
        raise FileExistsError(
            f"{out} already holds a training run ({names}); continue it with --resume, replace it with "
            "--overwrite, or choose another folder"
        )
    if overwrite:
        _check_removable(entries)
    return None


def _check_removable(entries: list[Path]) -> None:
    for path in entries:
        # best/ and last/ are deleted only when they are checkpoints: a folder of the user's that
        # happens to be named so is never deleted. Hidden .previous/.tmp- folders are the saver's own.
        if (
            path.name in RUN_CHECKPOINTS
            and path.is_dir()
            and not path.is_symlink()
            and not is_checkpoint(path)
            and any(path.iterdir())
        ):
            raise FileExistsError(
                f"{path} is not a checkpoint (no {WEIGHTS_FILE} + {CONFIG_FILE}); refusing to delete it "
                "for --overwrite: move it away or choose another folder"
            )
        if path.name == RUN_LOG_FILE and path.is_dir() and not path.is_symlink():
            raise FileExistsError(f"{path} is a directory, not a training log; move it away or choose another folder")


def remove_save_leftovers(out_dir: str | os.PathLike) -> None:
    """Finish the clean-up of saves of ``out_dir/best`` and ``out_dir/last`` that a crash interrupted:
    delete their temporary ``.NAME.tmp-*`` folders, and a ``.NAME.previous`` whose ``NAME`` is in
    place (the crash came after the second rename). A ``.NAME.previous`` without ``NAME`` is the
    checkpoint to keep (:func:`resume_point`) and stays. The next save would do the same; a
    resumed run that has nothing left to save needs it done here.

    Shape:
        no tensors.
    """
    out = Path(out_dir)
    for name in RUN_CHECKPOINTS:
        previous = out / f".{name}.previous"
        if (out / name).is_dir() and previous.is_dir() and not previous.is_symlink():
            shutil.rmtree(previous, ignore_errors=True)
        for stale in out.glob(f".{name}.tmp-*"):
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)


def clear_run_folder(out_dir: str | os.PathLike) -> None:
    """Delete the training run in ``out_dir`` (``--overwrite``): its ``best/`` and ``last/``
    checkpoints with their interrupted-save leftovers, then ``log.jsonl``. Nothing else in the folder
    is touched, a symbolic link is removed without following it, and nothing is deleted unless
    everything may be (see :func:`check_run_folder`). Interrupted, it leaves a folder that is still
    seen as holding a run (the log goes last).

    Shape:
        no tensors.
    """
    out = Path(out_dir)
    entries = _run_entries(out)
    _check_removable(entries)
    for path in entries:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    if entries:
        fsync_dir(out)


# --------------------------------------------------------------------------------------------
# Random number generator state (exact resume)
# --------------------------------------------------------------------------------------------


def rng_state() -> dict[str, Any]:
    """The global RNG states of Python ``random``, NumPy's legacy ``np.random`` and PyTorch (CPU,
    and every CUDA device when CUDA is available), as tensors and plain types so that
    ``torch.load(..., weights_only=True)`` reads them back.

    Generators you create yourself (``np.random.default_rng``, ``torch.Generator``) are not
    global and are not included: save their state alongside.

    Shape:
        ``{"python": [...], "numpy": {...}, "torch": uint8 tensor, "cuda": [uint8 tensor, ...]}``.
    """
    version, internal, gauss_next = random.getstate()
    kind, key, pos, has_gauss, cached_gaussian = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss_next],
        "numpy": {
            "bit_generator": str(kind),
            "key": torch.from_numpy(key.astype(np.int64)),  # uint32 words, widened losslessly
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached_gaussian),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    """Restore what :func:`rng_state` returned. A ``"cuda"`` entry is ignored when CUDA is not
    available (a GPU run resumed on a CPU has no CUDA generators to restore).

    Shape:
        as returned by :func:`rng_state`.
    """
    if not isinstance(state, Mapping):
        raise TypeError(f"state must be the dict from rng_state(), got {type(state).__name__}")
    missing = [k for k in ("python", "numpy", "torch") if k not in state]
    if missing:
        raise ValueError(f"RNG state lacks {missing}; expected the dict from rng_state()")
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(int(x) for x in internal), gauss_next))
    np_state = state["numpy"]
    key = np_state["key"]
    key = key.numpy() if isinstance(key, Tensor) else np.asarray(key)
    np.random.set_state(
        (
            np_state["bit_generator"],
            key.astype(np.uint32),
            int(np_state["pos"]),
            int(np_state["has_gauss"]),
            float(np_state["cached_gaussian"]),
        )
    )
    torch.set_rng_state(state["torch"].cpu().to(torch.uint8))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu().to(torch.uint8) for s in state["cuda"]])
