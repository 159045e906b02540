"""Attention chosen by name: :data:`ATTENTION_VARIANTS` and :class:`AttentionSpec`, the one thing
layers and model configs pass around to pick how attention is computed.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch

from ..functional import AttentionResult, check_positive_int, global_positions_index, scaled_dot_product_attention
from .chunked import chunked_attention
from .global_window import global_window_attention
from .sliding_window import sliding_window_attention

Tensor = torch.Tensor

#: Attention functions by name; each has the calling convention of
#: :func:`scaled_dot_product_attention` plus its own keyword options. ``"full"``'s ``backend``
#: option takes the names of ``functional.BACKENDS`` and ``"chunked"`` (see ``AttentionSpec.__call__``).
ATTENTION_VARIANTS: dict[str, Callable[..., AttentionResult]] = {
    "full": scaled_dot_product_attention,
    "chunked": chunked_attention,
    "sliding_window": sliding_window_attention,
    "global_window": global_window_attention,
}

# The keywords every variant takes from its caller; the rest are the variant's own options.
_CALL_KEYWORDS = frozenset({"scale", "dropout_p", "is_causal", "return_weights"})


class AttentionSpec:
    """An attention variant chosen by name, with its options — the one thing layers and model
    configs pass around to pick how attention is computed.

    ``AttentionSpec("sliding_window", window=256)`` validates the name and the options against
    the function in :data:`ATTENTION_VARIANTS` at once (unknown or missing options are errors),
    and calling it runs that function. ``is_causal`` is always given by the caller (the layer), so
    a window is causal in a decoder and symmetric in an encoder.

    Shape:
        as :func:`scaled_dot_product_attention`: q ``(..., T, Dh)``, k ``(..., S, Dh)``,
        v ``(..., S, Dv)`` → output ``(..., T, Dv)``, weights ``(..., T, S)``
    """

    def __init__(self, name: str = "full", **options) -> None:
        if name not in ATTENTION_VARIANTS:
            raise ValueError(f"unknown attention variant {name!r}; choose from {sorted(ATTENTION_VARIANTS)}")
        params = inspect.signature(ATTENTION_VARIANTS[name]).parameters
        own = {n: p for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY and n not in _CALL_KEYWORDS}
        unknown = sorted(set(options) - set(own))
        if unknown:
            raise ValueError(f"attention {name!r} has no option(s) {unknown}; its options are {sorted(own)}")
        missing = sorted(n for n, p in own.items() if p.default is inspect.Parameter.empty and n not in options)
        if missing:
            raise ValueError(
                f"attention {name!r} needs option(s) {missing}, e.g. AttentionSpec({name!r}, "
                + ", ".join(f"{n}=..." for n in missing)
                + ")"
            )
        for key in ("window", "dilation", "block_size", "q_chunk", "k_chunk"):
            if options.get(key) is not None:
                check_positive_int(key, options[key])
        if "global_positions" in options:
            gp = options["global_positions"]
            if isinstance(gp, Tensor) and gp.dtype == torch.bool:
                gp = gp.nonzero().squeeze(-1)
            # Kept as a tuple so specs compare, hash and print by value. The upper bound is the
            # sequence length, known only when called; here only the type and sign are checked.
            no_upper_bound = torch.iinfo(torch.long).max
            options["global_positions"] = tuple(global_positions_index(gp, no_upper_bound, None).tolist())
        self.name = name
        self.options = dict(options)

    @classmethod
    def from_config(cls, attention: str = "full", window: int | None = None, n_global: int = 0) -> AttentionSpec:
        """The spec of a model config's flat fields: the variant name, its ``window`` and, for
        ``"global_window"``, the number of leading global positions (e.g. BERT's ``[CLS]``, or a
        GPT's first tokens as "attention sinks")."""
        options = {} if window is None else {"window": window}
        if attention == "global_window":
            options["global_positions"] = tuple(range(n_global))
        elif n_global:
            raise ValueError(f"n_global={n_global} applies to attention='global_window', not {attention!r}")
        return cls(attention, **options)

    def replace(self, **options) -> AttentionSpec:
        """A copy with some options changed (validated again)."""
        return AttentionSpec(self.name, **{**self.options, **options})

    @property
    def windowed(self) -> bool:
        """Whether the variant has a window, whose shape ``is_causal`` decides."""
        return "window" in self.options

    @property
    def recent_positions(self) -> int | None:
        """How many most recent positions a causal query can see, or None if not bounded.

        A decoder needs to cache only that many keys/values (see ``layers.RollingKVCache``).
        """
        if self.name != "sliding_window":
            return None
        return (self.options["window"] - 1) * self.options.get("dilation", 1) + 1

    def __call__(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None = None,
        *,
        scale: float | None = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
        return_weights: bool = False,
    ) -> AttentionResult:
        fn, options = ATTENTION_VARIANTS[self.name], self.options
        if self.name == "full" and options.get("backend") == "chunked":
            # The online softmax computes full attention exactly, so "chunked" is also a backend
            # name of "full" (MultiHeadAttention(backend="chunked"), a config's backend field). It
            # is resolved here rather than in functional.BACKENDS, which holds the core backends.
            fn, options = chunked_attention, {}
        return fn(
            q,
            k,
            v,
            mask,
            scale=scale,
            dropout_p=dropout_p,
            is_causal=is_causal,
            return_weights=return_weights,
            **options,
        )

    def __eq__(self, other) -> bool:
        return isinstance(other, AttentionSpec) and (self.name, self.options) == (other.name, other.options)

    def __hash__(self) -> int:
        return hash((self.name, tuple(sorted(self.options.items()))))

    def __repr__(self) -> str:
        args = [repr(self.name)] + [f"{n}={v!r}" for n, v in self.options.items()]
        return f"AttentionSpec({', '.join(args)})"
