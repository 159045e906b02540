"""What every shipped-asset build shares: its protocol, its evaluation, the fast check, config reading.

A build (:class:`AssetBuild`) says how ``make models`` makes one shipped model and how it is
judged; :meth:`AssetBuild.evaluate` returns an :class:`Evaluation`, whose fast check
(:func:`fast_check`) the tests repeat on every installed model. The builds themselves are grouped
by kind (:mod:`.translators`, :mod:`.language_models`, :mod:`.applications`), each importing
only this module of the package; :mod:`.driver` runs them.

Shape:
    no tensors cross this module's interface: folders in, dictionaries out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .. import checkpoint as ckpt

__all__ = ["Evaluation", "AssetBuild", "fast_check", "run_nothing", "read_config", "config_from"]


@dataclass
class Evaluation:
    """What :meth:`AssetBuild.evaluate` measured on a packed model."""

    metrics: dict[str, float]  # by metric name, on the whole held-out set
    evaluation: str  # how: data, size, decoding
    check: dict[str, Any]  # the fast check (see ModelCard.check)
    reproduce: str | None = None  # a command that measures `metrics` again


class AssetBuild(Protocol):
    """How ``make models`` makes one shipped model, and how the tests judge an installed copy.

    A build whose command reads files made from the corpora (not the corpora themselves) also has
    ``prepare(data, out)``, which writes them before the command runs
    (:class:`~attnlab.build_assets.applications.SentenceTypeClassifier`).
    """

    name: str  # the shipped name (a key of attnlab.assets.ASSETS)
    seed: int  # the training's seed
    threads: int | None  # OMP_NUM_THREADS of the training (1: it may run beside another; None: inherit)
    data: str  # the card's description of the data
    licence: str  # the data's licence or terms

    @property
    def run_key(self) -> str:
        """The training this model comes from: builds with one key share one run."""
        ...

    def command(self, data: Path, out: Path) -> list[str]:
        """The ``attnlab`` arguments that train it into ``out``, reading corpora under ``data``."""
        ...

    def needs(self, data: Path, training: bool) -> list[Path]:
        """The data files its evaluation (and, with ``training``, its training) reads."""
        ...

    def checkpoint(self, run: Path) -> Path:
        """The trained model inside the run folder ``run``."""
        ...

    def expected_config(self, directory: Path) -> dict:
        """The ``config.json`` this build makes, for the tokenizers of the model at ``directory``."""
        ...

    def evaluate(self, directory: Path, data: Path) -> Evaluation:
        """Quality of the model at ``directory`` on held-out data, and its fast check."""
        ...

    def measure_check(self, directory: Path, data: Path) -> float:
        """The fast check's value for the model at ``directory``."""
        ...

    def example_outputs(self, directory: Path, inputs: Sequence[str]) -> dict[str, str]:
        """The model's greedy output for each input."""
        ...


def fast_check(metric: str, value: float, *, higher_is_better: bool, tolerance: float, n: int, how: str) -> dict:
    """A card's fast check (:attr:`attnlab.assets.cards.ModelCard.check`): ``metric`` measured
    ``value`` on ``n`` held-out items (``how``, in words); an installed copy passes when it measures
    within ``tolerance`` of it, on the side ``higher_is_better`` says.

    Shape:
        no tensors; returns the card's ``check`` dictionary.
    """
    return {
        "metric": metric,
        "value": value,
        "higher_is_better": higher_is_better,
        "tolerance": tolerance,
        "n": n,
        "how": how,
    }


def run_nothing(setup: Any) -> None:
    """A TrainJob's ``run`` for a job that is only set up, never run (the expected config).

    Shape:
        no tensors.
    """


def read_config(directory: Path) -> dict:
    """The ``config.json`` of the model at ``directory``.

    Shape:
        no tensors.
    """
    return json.loads((directory / ckpt.CONFIG_FILE).read_text(encoding="utf-8"))


def config_from(directory: Path, *keys: str) -> dict:
    """The data-dependent fields of a trained model's ``config.json`` (vocabulary sizes, ids).

    Shape:
        no tensors.
    """
    config = read_config(directory)
    return {k: config[k] for k in keys if k in config}
