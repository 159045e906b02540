"""What the model configs share: named presets, and the GPT/BERT stack's checks and dict round trip.

Every model config is a dataclass in its model's module, each field with its own default and
comment (the defaults are the paper's, so they differ between models). What is the same code
lives here:

- :func:`preset_config`: a config from a named preset plus fields (``gpt_config``,
  ``bert_config``, ``vit_config``, ...).
- :class:`StackConfig`: the behaviour of :class:`~attnlab.models.gpt.GPTConfig` and
  :class:`~attnlab.models.bert.BertConfig`, two stacks of :class:`~attnlab.layers.EncoderBlock`
  described with the names every attnlab config uses (``d_model``, ``n_layers``, ``n_heads``):
  the shared checks, the feed-forward width, the attention variant, and the plain-dict form
  written to a checkpoint's ``config.json`` and read back.
- :data:`RENAMED_FIELDS`: the GPT-2 names these two configs had before (``n_embd``, ``n_layer``,
  ``n_head``). A ``config.json`` written with them still loads (:meth:`StackConfig.from_dict`
  translates them, the one place that does); a setting given with one (``model.n_embd=64``, or
  ``gpt_config("tiny", n_embd=64)``) is refused with the new name (:func:`renamed_field_error`).
  Only the HuggingFace converter (:mod:`attnlab.models.convert_hf`) still speaks GPT-2's names.
- :func:`check_fields`: the checks every config (and the training settings) runs in
  ``__post_init__``: each field against its declared type, the ranges it names, and a cap on the
  parameters one weight matrix may ask for (:data:`MAX_PARAMETERS`). Because they run when the
  dataclass is made, a bad value is refused wherever it comes from — a ``--override``, a preset,
  a ``config.json`` — before any data is read or any weight allocated.
"""

from __future__ import annotations

import functools
import math
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import asdict, fields, is_dataclass
from typing import Any, Literal, TypeVar

from ..layers import ACTIVATIONS
from ..variants import AttentionSpec

__all__ = ["MAX_PARAMETERS", "RENAMED_FIELDS", "check_fields", "preset_config", "renamed_field_error", "StackConfig"]

#: The most parameters a config may ask for in one product of its sizes (one weight matrix, or one
#: kind of matrix over all layers): 2³¹, 8 GiB in fp32. Far above anything attnlab trains, it
#: turns a typo such as ``d_ff=10**12`` into a clear error instead of an attempt to allocate
#: terabytes.
MAX_PARAMETERS = 2**31

#: Field names GPTConfig and BertConfig took from GPT-2 until issue 38 → the names they have now,
#: those of every attnlab config (the Transformer's, the ViT's, the classifier's).
RENAMED_FIELDS: dict[str, str] = {"n_embd": "d_model", "n_layer": "n_layers", "n_head": "n_heads"}

C = TypeVar("C")
S = TypeVar("S", bound="StackConfig")


def preset_config(
    cls: type[C], presets: Mapping[str, Mapping[str, Any]], preset: str, family: str, /, **overrides: Any
) -> C:
    """``cls`` built from the named preset's fields, with ``overrides`` added or replacing them.

    ``family`` names the model in the error for an unknown preset ("unknown GPT preset 'x'").
    """
    if preset not in presets:
        raise ValueError(f"unknown {family} preset {preset!r}; choose from {sorted(presets)}")
    for name in overrides:
        error = renamed_field_error(cls, name)
        if error:
            raise error
    return cls(**{**presets[preset], **overrides})


def renamed_field_error(cls: type, name: str, prefix: str = "") -> ValueError | None:
    """The error for a setting of ``cls`` given by its old name (``n_embd``), naming the new one;
    None when ``name`` is no old name of a field ``cls`` has.

    A setting with an old name is refused rather than translated: one name per field in every
    command line, notebook and preset, and a clear message where an old one is still written.
    ``prefix`` is how the setting was written (``"model."`` for a ``--overrides`` key).

    Shape:
        no tensors.
    """
    new = RENAMED_FIELDS.get(name)
    if new is None or not is_dataclass(cls) or new not in {f.name for f in fields(cls)}:
        return None
    return ValueError(
        f"{prefix}{name} is now called {prefix}{new} (one name in every attnlab config); write {prefix}{new}=..."
    )


@functools.cache
def _declared_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in fields(cls)}


def _type_error(value: Any, tp: Any) -> str | None:
    """Why ``value`` is not a ``tp`` (None when it is one). Types not listed here are not checked."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        reasons = [_type_error(value, a) for a in args if a is not type(None)]
        return (
            None
            if None in reasons
            else " or ".join(r for r in reasons if r) + (" or null" if type(None) in args else "")
        )
    if origin is Literal:
        return None if value in args else f"one of {list(args)}"
    if tp is bool:
        return None if isinstance(value, bool) else "true or false"
    if tp is int:
        # bool is an int to Python, but true is no width; "12" from a hand-edited config.json is no number.
        return None if isinstance(value, int) and not isinstance(value, bool) else "an integer"
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        return None if ok else "a finite number"
    if tp is str:
        return None if isinstance(value, str) else "text"
    if tp is dict or origin is dict:
        return None if isinstance(value, dict) else "a mapping"
    if origin in (tuple, list) or tp in (tuple, list):
        if not isinstance(value, (tuple, list)):  # a tuple comes back from JSON as a list
            return "a list"
        if origin is tuple and args and args[-1] is not Ellipsis and len(args) != len(value):
            return f"a list of {len(args)} items"
        item_types = args[:1] * len(value) if origin is list or (args and args[-1] is Ellipsis) else args
        for item, item_tp in zip(value, item_types):
            reason = _type_error(item, item_tp)
            if reason:
                return f"a list whose items are each {reason}"
    return None


def check_fields(
    config: Any,
    *,
    positive: Iterable[str] = (),
    non_negative: Iterable[str] = (),
    fractions: Iterable[str] = (),
    choices: Mapping[str, Iterable[Any]] | None = None,
    sizes: Iterable[tuple[str, ...]] = (),
    ids: Mapping[str, Iterable[str]] | None = None,
) -> None:
    """Check the dataclass ``config``: every field against its declared type, then the ranges named.

    Types: an ``int`` field takes an integer (not ``true``, not ``"12"``), a ``float`` field a
    finite number (no NaN, no infinity), a ``bool`` ``true``/``false``, a ``str`` text, ``X |
    None`` also None, a tuple or list a list of such items. Then ``positive`` fields must be > 0
    (≥ 1 for integers), ``non_negative`` ≥ 0, ``fractions`` (dropout rates, label smoothing) in
    [0, 1), each ``choices`` field one of
    its values (None passes where the type allows it), the product of each group of ``sizes``
    (one weight matrix, or one matrix kind over all layers) at most :data:`MAX_PARAMETERS`, and
    each ``ids`` field (a token id such as ``pad_id``) in ``[0, size)`` for each vocabulary size named.

    Raises:
        ValueError: naming the field, what it must be, and the value it got.
    """
    declared = _declared_types(type(config))
    for name, tp in declared.items():
        value = getattr(config, name)
        reason = _type_error(value, tp)
        if reason:
            raise ValueError(f"{name} must be {reason}, got {value!r}")
    for name in positive:
        value = getattr(config, name)
        if value is not None and not value > 0:
            integer = int in (declared.get(name), *typing.get_args(declared.get(name)))
            raise ValueError(f"{name} must be {'≥ 1' if integer else '> 0'}, got {value!r}")
    for name in non_negative:
        value = getattr(config, name)
        if value is not None and not value >= 0:
            raise ValueError(f"{name} must be ≥ 0, got {value!r}")
    for name in fractions:
        value = getattr(config, name)
        if not 0.0 <= value < 1.0:
            raise ValueError(f"{name} must be in [0, 1), got {value!r}")
    for name, allowed in (choices or {}).items():
        value, allowed = getattr(config, name), list(allowed)
        if value is not None and value not in allowed:
            raise ValueError(f"unknown {name} {value!r}; choose from {allowed}")
    for group in sizes:
        values = [getattr(config, name) for name in group]
        if any(v is None or v <= 0 for v in values):  # (a range check above, or the caller's, reports those)
            continue
        if math.prod(values) > MAX_PARAMETERS:
            product = " × ".join(f"{name}={v}" for name, v in zip(group, values))
            raise ValueError(
                f"{product} asks for {math.prod(values):,} parameters, over the limit of "
                f"{MAX_PARAMETERS:,} (attnlab.models.config.MAX_PARAMETERS); is a size mistyped?"
            )
    for name, vocabularies in (ids or {}).items():
        value = getattr(config, name)
        for vocabulary in vocabularies:
            size = getattr(config, vocabulary)
            if not 0 <= value < size:
                raise ValueError(f"{name}={value} is outside the vocabulary ({vocabulary}={size})")


class StackConfig:
    """Shared behaviour of the GPT and BERT config dataclasses (a mixin: it declares no fields).

    A subclass is a dataclass with the fields ``vocab_size``, ``n_positions``, ``d_model``,
    ``n_layers``, ``n_heads``, ``n_inner``, ``activation``, ``backend``, ``attention``, ``window``
    and ``n_global``; its own ``__post_init__`` calls this one first, then checks its own fields.
    """

    def __post_init__(self) -> None:
        check_fields(
            self,
            positive=("vocab_size", "n_positions", "d_model", "n_layers", "n_heads", "n_inner", "layer_norm_eps"),
            non_negative=("init_std", "n_global"),
            fractions=("dropout",),
            sizes=(
                ("vocab_size", "d_model"),
                ("n_positions", "d_model"),
                ("n_layers", "d_model", "d_ff"),
                ("n_layers", "d_model", "d_model"),
            ),
        )
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; choose from {sorted(ACTIVATIONS)}")
        spec = self.attention_spec()  # a clear error now for a bad variant or window
        if self.backend != "auto":
            spec.replace(backend=self.backend)  # ... or a backend, which only attention="full" has

    @property
    def d_ff(self) -> int:
        """Feed-forward hidden width (``n_inner``, or 4·D as GPT-2 and BERT when it is None)."""
        return self.n_inner if self.n_inner is not None else 4 * self.d_model

    def attention_spec(self) -> AttentionSpec:
        """The self-attention variant of every block (see attnlab.variants.AttentionSpec)."""
        return AttentionSpec.from_config(self.attention, self.window, self.n_global)

    def to_dict(self) -> dict:
        """Every field by name, as written to a checkpoint's ``config.json``."""
        return asdict(self)

    @classmethod
    def from_dict(cls: type[S], d: dict) -> S:
        """The config of a :meth:`to_dict` dict; an unknown key is an error (a typo, or another model's config).

        This is where every GPT and BERT ``config.json`` becomes a config (a run folder, a shipped
        model, a QA model's encoder), so it is the one place that reads the field names used before
        issue 38 (:data:`RENAMED_FIELDS`: ``n_embd``, ``n_layer``, ``n_head``) as today's. Only the
        names changed, never a module's, so such a checkpoint's weights load as they are.
        """
        both = sorted(old for old, new in RENAMED_FIELDS.items() if old in d and new in d)
        if both:
            raise ValueError(f"both {both[0]!r} and its new name {RENAMED_FIELDS[both[0]]!r} are given; keep one")
        d = {RENAMED_FIELDS.get(k, k): v for k, v in d.items()}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown {cls.__name__} fields {unknown}; known: {sorted(known)}")
        return cls(**d)
