"""What the model configs share: named presets, and the GPT/BERT stack's checks and dict round trip.

Every model config is a dataclass in its model's module, each field with its own default and
comment (the defaults are the paper's, so they differ between models). What is the same code
lives here:

- :func:`preset_config`: a config from a named preset plus fields (``gpt_config``,
  ``bert_config``, ``vit_config``, ...).
- :class:`StackConfig`: the behaviour of :class:`~attnlab.models.gpt.GPTConfig` and
  :class:`~attnlab.models.bert.BertConfig`, two stacks of :class:`~attnlab.layers.EncoderBlock`
  described with the GPT-2/BERT field names (``n_embd``, ``n_layer``, ``n_head``, ``n_inner``):
  the shared checks, the feed-forward width, the attention variant, and the plain-dict form
  written to a checkpoint's ``config.json`` and read back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import Any, TypeVar

from ..variants import AttentionSpec
from ..layers import ACTIVATIONS

__all__ = ["preset_config", "StackConfig"]

C = TypeVar("C")
S = TypeVar("S", bound="StackConfig")


def preset_config(cls: type[C], presets: Mapping[str, Mapping[str, Any]], preset: str, family: str, /,
                  **overrides: Any) -> C:
    """``cls`` built from the named preset's fields, with ``overrides`` added or replacing them.

    ``family`` names the model in the error for an unknown preset ("unknown GPT preset 'x'").
    """
    if preset not in presets:
        raise ValueError(f"unknown {family} preset {preset!r}; choose from {sorted(presets)}")
    return cls(**{**presets[preset], **overrides})


class StackConfig:
    """Shared behaviour of the GPT and BERT config dataclasses (a mixin: it declares no fields).

    A subclass is a dataclass with the fields ``vocab_size``, ``n_positions``, ``n_embd``,
    ``n_layer``, ``n_head``, ``n_inner``, ``activation``, ``backend``, ``attention``, ``window``
    and ``n_global``; its own ``__post_init__`` calls this one first, then checks its own fields.
    """

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; choose from {sorted(ACTIVATIONS)}")
        spec = self.attention_spec()  # a clear error now for a bad variant or window
        if self.backend != "auto":
            spec.replace(backend=self.backend)  # ... or a backend, which only attention="full" has
        for name in ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be ≥ 1, got {getattr(self, name)}")

    @property
    def d_ff(self) -> int:
        """Feed-forward hidden width (``n_inner``, or 4·D as GPT-2 and BERT when it is None)."""
        return self.n_inner if self.n_inner is not None else 4 * self.n_embd

    def attention_spec(self) -> AttentionSpec:
        """The self-attention variant of every block (see attnlab.variants.AttentionSpec)."""
        return AttentionSpec.from_config(self.attention, self.window, self.n_global)

    def to_dict(self) -> dict:
        """Every field by name, as written to a checkpoint's ``config.json``."""
        return asdict(self)

    @classmethod
    def from_dict(cls: type[S], d: dict) -> S:
        """The config of a :meth:`to_dict` dict; an unknown key is an error (a typo, or another model's config)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown {cls.__name__} fields {unknown}; known: {sorted(known)}")
        return cls(**d)
