"""Recipes: how the building blocks and models fit together for one job (translation, language
modelling, classification, ...). Nothing below this layer knows about recipes.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from ..train import TrainConfig

__all__ = ["apply_overrides"]


def apply_overrides(setup, overrides: Sequence[str], config_cls: type):
    """Apply ``key=value`` overrides: ``model.n_embd=256``, ``train.lr=1e-3``, ``batch_size=32``."""
    setup = dataclasses.replace(setup, model_overrides=dict(setup.model_overrides), train=dataclasses.replace(setup.train))
    settings = [f.name for f in dataclasses.fields(setup) if f.name not in ("train", "model_overrides")]
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} is not key=value (e.g. model.n_embd=256, train.lr=1e-3)")
        key, raw = item.split("=", 1)
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if key.startswith("model."):
            name = key[len("model.") :]
            names = {f.name for f in dataclasses.fields(config_cls)}
            if name not in names:
                raise ValueError(f"unknown model field {name!r}; fields: {sorted(names)}")
            setup.model_overrides[name] = value
        elif key.startswith("train."):
            name = key[len("train.") :]
            names = [f.name for f in dataclasses.fields(TrainConfig)]
            if name not in names:
                raise ValueError(f"unknown training field {name!r}; fields: {names}")
            setattr(setup.train, name, tuple(value) if isinstance(value, list) else value)
        elif key in settings:
            setattr(setup, key, value)
        else:
            raise ValueError(f"unknown setting {key!r}; use model.<field>, train.<field> or one of {settings}")
    return setup
