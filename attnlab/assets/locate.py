"""Where a model is: which folder a model name or path means, and where each shipped model is.

:func:`resolve_model_dir` is what every ``--model`` means: a checkpoint folder, a training run's
folder (its ``best/``), or the name of a shipped model (:mod:`attnlab.assets`:
:func:`shipped_model_dir`); an existing folder always wins over a shipped name. Every loader
resolves names through it, :func:`attnlab.loading.load_model` among them.

The registry itself (:mod:`attnlab.assets`) is data only, so that this lookup, the explorer and
the asset build (:mod:`attnlab.build_assets`) all read one list of names.

Shape:
    no tensors; names and paths in, directories out.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..checkpoint import WEIGHTS_FILE, is_checkpoint, model_folder
from . import PACKAGED, SHIPPED, asset_folder, shipped

__all__ = ["resolve_model_dir", "shipped_model_dir", "shipped_models_present"]


def resolve_model_dir(path: str | os.PathLike) -> Path:
    """The checkpoint a user means by ``path``: the folder itself when it holds a ``config.json``,
    else its ``best/`` checkpoint (``path`` is then a training output folder); or, when no file or
    folder of that name exists, the shipped model of that name (``ja-en``,
    ``demo``, ``minilm``...). An existing folder always wins over a shipped name.

    Raises:
        FileNotFoundError: ``path`` is neither a directory nor a shipped name (the message lists the
            shipped names), neither it nor ``path/best`` holds a ``config.json``, or ``path`` names
            a shipped model whose weights are not built yet (the message says ``make models``).

    Shape:
        no tensors; returns a directory.
    """
    entry = shipped(path)
    if entry is not None:
        return shipped_model_dir(entry.name)
    path = Path(path)
    if not path.is_dir():
        names = ", ".join(SHIPPED)
        kind = "is not a directory" if path.exists() else "does not exist"
        raise FileNotFoundError(f"model directory not found: {path} {kind}, and it is not a shipped model ({names})")
    return model_folder(path)


def shipped_model_dir(name: str) -> Path:
    """The checkpoint folder of the shipped model ``name`` (:data:`SHIPPED`).

    Raises:
        FileNotFoundError: ``name`` is not shipped (the message lists the names), its weights are not
            built yet (``make models`` builds them), or the package that holds it is not installed.

    Shape:
        no tensors; returns a directory.
    """
    if name not in SHIPPED:
        raise FileNotFoundError(f"no shipped model is called {name!r}; shipped: {', '.join(SHIPPED)}")
    if name in PACKAGED:
        from ..models.convert_hf import minilm_dir

        return minilm_dir()
    folder = asset_folder(name)
    if not is_checkpoint(folder):
        err = FileNotFoundError(
            f"{name} is a shipped model, but its weights are not built in this installation ({folder} holds no "
            f"{WEIGHTS_FILE}): run `make models ONLY={name}` in attnlab's source folder (see README, Ready-made models)"
        )
        err.model = name  # which shipped model is missing, for an answer that names it
        raise err
    return folder


def shipped_models_present() -> list[str]:
    """The names of the shipped models that can be loaded here: the assets whose weights are
    built, and the packaged ones whose package is installed.

    Shape:
        no tensors.
    """
    present = []
    for name in SHIPPED:
        try:
            shipped_model_dir(name)
        except FileNotFoundError:
            continue
        present.append(name)
    return present
