"""Recipes: how the building blocks and models fit together for one job (translation, language
modelling, classification, ...). Nothing below this layer knows about recipes.

A recipe only orchestrates: its presets, its setup dataclass, the training task, and how it trains
and loads. Using a trained model is :mod:`attnlab.inference`'s (``Translator``, ...), drawing it
:mod:`attnlab.viz`'s, and the command lines (``attnlab train <job>`` and the job's inference
commands) :mod:`attnlab.cli`'s. Every job describes itself with one :class:`Job` at the end of its
module (``TRANSLATE_JOB``, ...): its named presets (``PRESETS``), its setup dataclass, its model
config, how it trains and loads.

Settings stay typed: a command's options are set on the preset with :func:`replace_settings`
(``dataclasses.replace``); only the user's own ``--overrides key=value`` strings are parsed, by
:func:`apply_overrides`, into each field's declared type.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..models.config import renamed_field_error
from ..train import TrainConfig

__all__ = ["STAND_IN_SIZE", "Job", "TrainJob", "apply_overrides", "digit_image_presets", "replace_settings"]

#: The vocabulary (or class count) a recipe's ``check_model`` builds the model config with before
#: the data decides the real one: any size will do to check the other fields.
STAND_IN_SIZE = 64

#: A model config class, or a function of the setup that returns it (when another setting picks
#: the model, as translation's ``arch`` does).
ConfigClass = typing.Union[type, Callable[[Any], type]]  # noqa: UP007  (a runtime alias: Union works on 3.10)


# --------------------------------------------------------------------------------------------
# Settings: typed values by key, and the one parser of `key=value` overrides.
# --------------------------------------------------------------------------------------------


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _config_class(config_cls: ConfigClass, setup: Any) -> type:
    return config_cls if isinstance(config_cls, type) else config_cls(setup)


def _target(setup: Any, key: str, config_cls: ConfigClass) -> tuple[str, str, Any]:
    """Where ``key`` lands in ``setup``: ``("model" | "train" | "", field name, declared type)``."""
    own = _field_types(type(setup))
    settings = [name for name in own if name not in ("train", "model_overrides")]
    if key.startswith("model."):
        name = key[len("model.") :]
        model_cls = _config_class(config_cls, setup)
        fields = _field_types(model_cls)
        if name not in fields:
            raise renamed_field_error(model_cls, name, "model.") or ValueError(
                f"unknown model field {name!r}; fields: {sorted(fields)}"
            )
        return "model", name, fields[name]
    if key.startswith("train."):
        name = key[len("train.") :]
        train_fields = _field_types(TrainConfig)
        if "train" in own:
            if name not in train_fields:
                raise ValueError(f"unknown training field {name!r}; fields: {list(train_fields)}")
            return "train", name, train_fields[name]
        # A job with its own training loop (the GAT's full-batch one) has no TrainConfig: a
        # train.<field> it also has as a setting of its own (device, seed, ...) sets that setting.
        shared = [name for name in settings if name in train_fields]
        if name in shared:
            return "", name, own[name]
        raise ValueError(
            f"{key} does not apply: {type(setup).__name__} trains in its own loop, not with a "
            f"TrainConfig; of the train.* settings it takes {', '.join('train.' + s for s in shared)}"
        )
    if key in settings:
        return "", key, own[key]
    raise ValueError(f"unknown setting {key!r}; use model.<field>, train.<field> or one of {settings}")


def _describe(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("null" if a is type(None) else _describe(a) for a in args)
    if origin in (list, tuple):
        return "a JSON list such as [0.9, 0.98]"
    names = {int: "an integer", float: "a number", bool: "true or false", str: "text"}
    return names.get(tp, getattr(tp, "__name__", str(tp)))


def _parse(raw: str, tp: Any) -> Any:
    """``raw`` as a value of the declared type ``tp`` (ValueError when it is not one)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if type(None) in args and raw.strip().lower() in ("null", "none"):
            return None
        for option in args:
            if option is not type(None):
                try:
                    return _parse(raw, option)
                except ValueError:
                    pass
        raise ValueError
    if tp is bool:
        word = raw.strip().lower()
        if word not in ("true", "false", "1", "0"):
            raise ValueError
        return word in ("true", "1")
    if tp in (int, float):
        try:
            return tp(raw)
        except ValueError:
            raise ValueError from None
    if tp is str:
        # A JSON string ("bf16", with the quotes) reads as its text, so values written by
        # json.dumps work as well as plain ones.
        if len(raw) >= 2 and raw[0] == raw[-1] == '"':
            try:
                return str(json.loads(raw))
            except json.JSONDecodeError:
                pass
        return raw
    if origin in (list, tuple):
        try:
            items = json.loads(raw)
        except json.JSONDecodeError:
            raise ValueError from None
        if not isinstance(items, list):
            raise ValueError
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(items) != len(args):
                raise ValueError
            item_types = list(args)
        else:
            item_types = [args[0] if args else str] * len(items)
        values = [_parse(item if isinstance(item, str) else json.dumps(item), t) for item, t in zip(items, item_types)]
        return tuple(values) if origin is tuple else values
    raise ValueError(f"a {_describe(tp)} cannot be given as key=value")


def _apply(setup: Any, values: list[tuple[str, Any]], config_cls: ConfigClass, parse: bool) -> Any:
    # model.* last: their names and types are those of the model the other settings pick (arch=rnn).
    for phase in (False, True):
        top: dict[str, Any] = {}
        train: dict[str, Any] = {}
        model: dict[str, Any] = {}
        for key, value in values:
            if key.startswith("model.") != phase:
                continue
            where, name, tp = _target(setup, key, config_cls)
            if parse:
                try:
                    value = _parse(value, tp)
                except ValueError as err:
                    reason = f"expected {_describe(tp)}" if not err.args else err.args[0]
                    raise ValueError(f"override {key}={value}: {reason}") from None
            {"": top, "train": train, "model": model}[where][name] = value
        if train:
            top["train"] = dataclasses.replace(setup.train, **train)
        if model:
            top["model_overrides"] = {**setup.model_overrides, **model}
        setup = dataclasses.replace(setup, **top)
    return setup


def replace_settings(setup: Any, values: Mapping[str, Any], config_cls: ConfigClass) -> Any:
    """A copy of ``setup`` with typed values set by key: ``{"train.epochs": 3, "model.d_model": 64}``.

    ``model.<field>`` sets a field of the model config (``setup.model_overrides``),
    ``train.<field>`` one of the TrainConfig (``setup.train``), any other key a field of the
    setup itself; each is ``dataclasses.replace``, the preset is left untouched.

    Raises:
        ValueError: an unknown key.
    """
    return _apply(setup, list(values.items()), config_cls, parse=False)


def apply_overrides(setup: Any, overrides: Sequence[str], config_cls: ConfigClass) -> Any:
    """Apply ``key=value`` overrides: ``model.d_model=256``, ``train.lr=1e-3``, ``batch_size=32``.

    The keys are those of :func:`replace_settings`. Each value is read as the field's declared
    type: ``12`` (int), ``1e-3`` (float), ``true``/``false`` (bool), plain or JSON-quoted text,
    ``null`` where None is allowed, ``[0.9, 0.98]`` for lists and tuples. ``model.*`` overrides
    are checked against the model that the other overrides pick (``arch=rnn model.cell=lstm``).

    Raises:
        ValueError: an item that is not key=value, an unknown key, or a value of the wrong type.
    """
    pairs = []
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} is not key=value (e.g. model.d_model=256, train.lr=1e-3)")
        pairs.append(tuple(item.split("=", 1)))
    return _apply(setup, pairs, config_cls, parse=True)


# --------------------------------------------------------------------------------------------
# Presets shared by jobs.
# --------------------------------------------------------------------------------------------


def digit_image_presets(setup_cls: type) -> dict[str, Any]:
    """The named presets (``--preset``) of the two jobs on the 8×8 digit images (``vit`` and
    ``caption``), as ``setup_cls`` instances: one model size and training schedule suits both.

    "digits" trains without shifts: one-pixel shifts did not help the ViT within its step budget
    (the comparison is in docs/applications.md). Every preset but tiny trains with
    precision="auto": bf16 autocast only where a short probe of the model's steps on this machine
    measures it faster (attnlab.train.TrainingPrecision); tiny (tests and smoke runs of
    seconds) stays fp32, so that its runs are the same on every machine.
    """
    return {
        "digits": setup_cls(
            shift=0,
            train=TrainConfig(
                epochs=100,
                max_steps=1500,
                lr=3e-3,
                warmup_steps=50,
                schedule="cosine",
                weight_decay=0.05,
                log_every=50,
                precision="auto",
            ),
        ),
        "tiny": setup_cls(
            model_preset="tiny",
            shift=0,
            train=TrainConfig(epochs=8, lr=3e-3, warmup_steps=10, schedule="constant", log_every=10, precision="fp32"),
        ),
    }


# --------------------------------------------------------------------------------------------
# The descriptor of a job.
# --------------------------------------------------------------------------------------------


@dataclass
class TrainJob:
    """What one ``attnlab train <job>`` command line asks for; :meth:`Job.setup` makes the setup."""

    preset: str  # key of the recipe's presets
    run: Callable[[Any], None]  # trains with the finished setup and prints what came of it
    settings: dict[str, Any] = field(default_factory=dict)  # the job's own typed options by key (None: not given)
    overrides: Sequence[str] | None = None  # the user's own key=value strings, applied after the options
    out: Path | None = None  # output folder (train.out_dir)
    minutes: float | None = None  # training time budget (train.time_budget_s)
    epochs: int | None = None  # train.epochs
    max_steps: int | None = None  # train.max_steps
    seed: int | None = None  # train.seed
    resume: bool = False  # continue the run in `out` (checked with the run folder before any data is read)


@dataclass(frozen=True)
class Job:
    """One job, described: its presets, its setup, its model config, how it trains and loads.

    ``attnlab train <name>`` (:mod:`attnlab.cli`) turns its options into a :class:`TrainJob` and
    makes the setup with :meth:`setup`; the experiments and the shipped-asset builds do the same.
    """

    name: str  # the job, as in `attnlab train NAME`
    presets: Mapping[str, Any]  # named setups (--preset)
    setup_cls: type  # the dataclass every preset is
    model_config: ConfigClass  # the model's config class (checks the model.<field> settings)
    train: Callable[..., Any]  # trains from a setup and the data (the Python API)
    load: Callable[..., Any]  # loads a trained model from its folder
    # Builds a setup's model config with stand-ins for the sizes only the data decides (the
    # vocabulary), so that a bad model.* setting stops the run before any data is read (None: no check).
    check_model: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        wrong = [name for name, setup in self.presets.items() if not isinstance(setup, self.setup_cls)]
        if wrong:
            raise TypeError(f"job {self.name!r}: presets {wrong} are not {self.setup_cls.__name__}")

    def setup(self, job: TrainJob, train_options: Mapping[str, Any] | None = None) -> Any:
        """The setup ``job`` asks for: its preset with the options given, the user's overrides, then ``train_options``.

        ``train_options`` are TrainConfig fields (``{"device": "cuda:0", "precision": "bf16"}``),
        the command line's shared training options; they are applied last.

        Every setting is checked here, before any data is read: the types and ranges of the
        setup's and the TrainConfig's fields (their ``__post_init__``), the schedule, and the
        model config they make (``check_model``).

        Raises:
            ValueError: an unknown preset, key or architecture, or a value of the wrong type or
                out of range.
        """
        if job.preset not in self.presets:
            raise ValueError(f"unknown preset {job.preset!r}; choose from {sorted(self.presets)}")
        if job.minutes is not None and not (math.isfinite(job.minutes) and job.minutes >= 0):
            raise ValueError(f"--minutes must be a finite number ≥ 0, got {job.minutes}")
        given = {
            "train.out_dir": None if job.out is None else str(job.out),
            "train.time_budget_s": None if job.minutes is None else job.minutes * 60,
            "train.epochs": job.epochs,
            "train.max_steps": job.max_steps,
            "train.seed": job.seed,
            **job.settings,
        }
        setup = replace_settings(
            self.presets[job.preset], {k: v for k, v in given.items() if v is not None}, self.model_config
        )
        setup = apply_overrides(setup, job.overrides or (), self.model_config)
        setup = replace_settings(setup, {f"train.{k}": v for k, v in (train_options or {}).items()}, self.model_config)
        _config_class(self.model_config, setup)  # e.g. an unknown architecture fails here, before any data is read
        if isinstance(getattr(setup, "train", None), TrainConfig):
            setup.train.check_schedule()
        if self.check_model is not None:
            self.check_model(setup)
        return setup
