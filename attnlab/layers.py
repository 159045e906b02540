"""Building blocks with parameters: attention modules, the feed-forward net, Transformer blocks.

Shape letters: ``B`` batch, ``T`` query length, ``S`` key length, ``H`` heads, ``D`` model width,
``Dh`` head width. Tensors are batch-first. Masks are boolean with ``True`` = may attend (see
:mod:`attnlab.functional`).

These modules are the reference: plain :class:`torch.nn.Linear` projections and
:class:`torch.nn.Dropout`, nothing of attnlab's engine. The engine (:mod:`attnlab.accel`) sits
above them and reads their parameters where it computes the same numbers faster (decoding on a
CPU); :mod:`attnlab.decode` chooses it by name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from . import functional as AF
from .variants import AttentionSpec

Tensor = torch.Tensor

__all__ = [
    "AttentionOutput",
    "KVCache",
    "RollingKVCache",
    "MultiHeadAttention",
    "AdditiveAttention",
    "FeedForward",
    "EncoderBlock",
    "DecoderBlock",
    "BlockOutput",
]


class AttentionOutput(NamedTuple):
    output: Tensor  # (B, T, D)
    weights: Tensor | None  # (B, H, T, S) per head, or None when not requested

    def _repr_html_(self) -> str:  # Jupyter: shapes, then each head's weights of batch item 0
        return AF.attention_result_html(self)


class KVCache:
    """The projected keys and values of the positions decoded so far (one attention layer).

    Incremental decoding feeds one new position at a time; rather than re-projecting the whole
    prefix each step, the layer appends the new position's keys/values here and attends over
    everything stored. Storage grows by doubling so that appending is amortised O(1) copies.

    Shape:
        stored keys/values: ``(B, H, S, Dh)`` where ``S`` = positions seen so far
    """

    def __init__(self) -> None:
        self._k: Tensor | None = None  # (B, H, capacity, Dh)
        self._v: Tensor | None = None
        self.length = 0

    def __len__(self) -> int:
        return self.length

    def extend(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append ``(B, H, t, Dh)`` keys/values; return all of them, ``(B, H, S, Dh)``."""
        n, t = self.length, k.shape[-2]
        self._make_room(k, v, t)
        self._k[..., n : n + t, :] = k
        self._v[..., n : n + t, :] = v
        self.length = n + t
        return self._k[..., : self.length, :], self._v[..., : self.length, :]  # (B, H, S, Dh)

    def stored(self) -> tuple[Tensor, Tensor]:
        """The keys and values cached so far (views of the storage, not copies); a ``ValueError``
        before anything was stored.

        Shape:
            keys, values ``(B, H, len(self), Dh)``
        """
        if self._k is None:
            raise ValueError("the cache is empty: nothing was stored yet")
        return self._k[..., : self.length, :], self._v[..., : self.length, :]  # (B, H, S, Dh) each

    def _make_room(self, k: Tensor, v: Tensor, t: int) -> None:
        """Grow the storage (doubling) so that ``t`` more positions fit; ``k``, ``v`` give the shape."""
        n = self.length
        if self._k is None or n + t > self._k.shape[-2]:
            capacity = max(2 * (0 if self._k is None else self._k.shape[-2]), n + t, 16)
            new_k = k.new_empty(k.shape[:-2] + (capacity, k.shape[-1]))  # (B, H, cap, Dh)
            new_v = v.new_empty(v.shape[:-2] + (capacity, v.shape[-1]))  # (B, H, cap, Dv)
            if n:
                new_k[..., :n, :] = self._k[..., :n, :]
                new_v[..., :n, :] = self._v[..., :n, :]
            self._k, self._v = new_k, new_v

    def storage_for_one(self, rows: int, heads: int, head_dim: int, ref: Tensor) -> tuple[Tensor, Tensor, int]:
        """The storage with room for one more position, and the positions filled, for a caller
        that writes the new keys and values itself (attnlab's decoder-layer kernel) and then
        counts them with ``length += 1``. ``ref`` gives the dtype and device of the storage
        (keys and values stored in another dtype are converted: a bf16 model's prompt, cached by
        its modules, read by the fp32 arithmetic of the native step).

        Shape:
            → 2 × ``(rows, heads, capacity, head_dim)``, contiguous
        """
        self.cast(ref.dtype)
        if self._k is None or self.length + 1 > self._k.shape[-2]:
            like = ref.new_empty((rows, heads, 1, head_dim))  # (B, H, 1, Dh)
            self._make_room(like, like, 1)
        return self._k, self._v, self.length

    def reorder(self, index: Tensor, gather: Callable[[Tensor, Tensor, int], Tensor] | None = None) -> None:
        """Keep batch rows ``index`` (beam search re-ranks hypotheses between steps).

        ``gather(x, index, filled)`` copies the rows: by default ``x.index_select(0, index)``; an
        engine may pass one that copies only the ``filled`` positions decoded so far
        (:func:`attnlab.accel.reorder_rows`), the positions after them being unset."""
        if self._k is not None:
            if gather is None:
                self._k, self._v = self._k.index_select(0, index), self._v.index_select(0, index)
            else:
                self._k = gather(self._k, index, self.length)  # (B', H, capacity, Dh)
                self._v = gather(self._v, index, self.length)

    def cast(self, dtype: torch.dtype) -> None:
        """Store the keys and values in ``dtype`` from now on (the attention reading them computes
        in it: the modules of a bf16 model after attnlab's fp32 native step, or the reverse)."""
        if self._k is not None and self._k.dtype != dtype:
            self._k, self._v = self._k.to(dtype), self._v.to(dtype)


class RollingKVCache:
    """A key/value cache that keeps only the last ``window`` positions (sliding-window decoding).

    With local attention a new query never looks further back than its window, so older keys and
    values can be forgotten: memory stays ``O(window)`` however long the generation runs (the
    "rolling buffer cache" of Mistral 7B, Jiang et al. 2023, §2). :meth:`extend` returns the kept
    positions followed by the new ones — contiguous positions ending at the newest, which is what
    bottom-right aligned attention expects — and then keeps only the last ``window`` of them.
    Same interface as :class:`KVCache`; ``len(cache)`` counts every position seen (the position
    of the next token), :attr:`kept` how many are stored. Build it with
    :meth:`MultiHeadAttention.new_cache`, which sizes it for the layer's window.

    Shape:
        stored keys/values: ``(B, H, min(window, len(cache)), Dh)``
    """

    def __init__(self, window: int) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"RollingKVCache window must be a positive int, got {window!r}")
        self.window = window
        self._k: Tensor | None = None  # (B, H, kept, Dh)
        self._v: Tensor | None = None
        self.length = 0

    def __len__(self) -> int:
        return self.length

    @property
    def kept(self) -> int:
        """Positions stored now: ``min(window, len(self))``."""
        return 0 if self._k is None else self._k.shape[-2]

    def extend(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append ``(B, H, t, Dh)`` keys/values; return the kept ones and these, ``(B, H, kept + t, Dh)``."""
        if self._k is not None:
            k = torch.cat([self._k, k], dim=-2)  # (B, H, kept + t, Dh)
            v = torch.cat([self._v, v], dim=-2)  # (B, H, kept + t, Dv)
        self.length += k.shape[-2] - self.kept
        # A copy, so the cache does not pin the (possibly long) tensor it was sliced from.
        self._k = k[..., -self.window :, :].clone()  # (B, H, ≤ window, Dh)
        self._v = v[..., -self.window :, :].clone()  # (B, H, ≤ window, Dv)
        return k, v

    def stored(self) -> tuple[Tensor, Tensor]:
        """The keys and values kept now (the last :attr:`kept` positions); a ``ValueError`` before
        anything was stored.

        Shape:
            keys, values ``(B, H, kept, Dh)``
        """
        if self._k is None:
            raise ValueError("the cache is empty: nothing was stored yet")
        return self._k, self._v  # (B, H, kept, Dh) each

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (beam search re-ranks hypotheses between steps)."""
        if self._k is not None:
            self._k = self._k.index_select(0, index)
            self._v = self._v.index_select(0, index)


class MultiHeadAttention(nn.Module):
    """Multi-head attention (Vaswani et al. 2017, §3.2.2).

    Queries, keys and values are projected to ``H`` heads of width ``Dh = D / H``; each head
    attends on its own (a different "view" of the sequence), and the heads' outputs are
    concatenated and projected back to ``D``. Self-attention: ``key = value = query``.
    Cross-attention: keys/values come from another sequence (e.g. the encoder).

    Args:
        d_model: width ``D`` of the queries and of the output.
        n_heads: number of heads ``H`` (must divide ``D``).
        dropout: dropout on the attention weights during training, in ``[0, 1)``.
        bias: whether the four projections have biases.
        kdim, vdim: widths of the key and value inputs (default ``D``), for cross-attention.
        backend: attention backend name (see :func:`attnlab.functional.scaled_dot_product_attention`).
        rotary: a position module applied to the split queries and keys of *self*-attention,
            called as ``rotary(x, offset)`` with ``x`` ``(B, H, L, Dh)`` and ``offset`` the
            position of its first row (the cache length while decoding), e.g.
            :class:`attnlab.positional.RotaryEmbedding`. Values are left alone (Su et al. 2021).
        attention: how each head attends: a name in
            :data:`attnlab.variants.ATTENTION_VARIANTS` (``"full"``, ``"chunked"``) or an
            :class:`attnlab.variants.AttentionSpec` with options, e.g.
            ``AttentionSpec("sliding_window", window=256)``. ``is_causal`` of :meth:`forward`
            makes a window causal (decoder) or symmetric (encoder). ``backend`` applies to
            ``"full"`` only.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        kdim: int | None = None,
        vdim: int | None = None,
        backend: str = "auto",
        rotary: nn.Module | None = None,
        attention: str | AttentionSpec = "full",
    ) -> None:
        super().__init__()
        sizes = {"d_model": d_model, "n_heads": n_heads, "kdim": kdim, "vdim": vdim}
        for name, value in sizes.items():
            if value is None and name in ("kdim", "vdim"):
                continue  # default: d_model
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"MultiHeadAttention: {name} must be an int, got {type(value).__name__} {value!r}")
            if value < 1:
                raise ValueError(f"MultiHeadAttention: {name} must be ≥ 1, got {value}")
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
            # `not 0 <= x < 1` is also true for NaN.
            raise ValueError(f"MultiHeadAttention: dropout must be a number in [0, 1), got {dropout!r}")
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.dropout = dropout
        self.attention = attention if isinstance(attention, AttentionSpec) else AttentionSpec(attention)
        self.backend = backend
        self.rotary = rotary
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(kdim or d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(vdim or d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self._stackable = (kdim or d_model) == (vdim or d_model) == d_model  # see _project_qkv

    @property
    def backend(self) -> str:
        """The kernel of ``"full"`` attention (see :func:`attnlab.functional.scaled_dot_product_attention`)."""
        return self.attention.options.get("backend", "auto")

    @backend.setter
    def backend(self, name: str) -> None:
        # Lives in the spec; only "full" has the option, so another variant rejects a backend.
        options = {k: v for k, v in self.attention.options.items() if k != "backend"}
        spec = AttentionSpec(self.attention.name, **options)
        self.attention = spec if name == "auto" else spec.replace(backend=name)

    def split_heads(self, x: Tensor) -> Tensor:
        """A projection's output cut into the heads: head ``h`` takes the ``h``-th slice of
        ``head_dim`` features of every position (§3.2.2: each head attends in its own subspace).

        Shape:
            x ``(B, L, D)`` → ``(B, H, L, Dh)``
        """
        B, L, _ = x.shape
        return x.view(B, L, self.n_heads, self.head_dim).transpose(1, 2)  # (B, L, D) -> (B, H, L, Dh)

    def project_kv(self, key: Tensor, value: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Keys and values split into heads. Cross-attention calls this once per source.

        Shape:
            key: ``(B, S, kdim)``; value: ``(B, S, vdim)``; outputs: ``(B, H, S, Dh)`` each
        """
        value = key if value is None else value
        return self.split_heads(self.k_proj(key)), self.split_heads(self.v_proj(value))

    def _project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values of self-attention; with autograd in one matmul (the same
        numbers as ``q_proj``/``k_proj``/``v_proj`` applied one by one, up to rounding).

        Shape:
            x: ``(B, T, D)``; outputs: ``(B, H, T, Dh)`` each
        """
        projections = (self.q_proj, self.k_proj, self.v_proj)
        if not torch.is_grad_enabled():
            # Inference: stacking copies the three weight matrices at every call, which for a
            # short sentence costs more than the products; each projection alone needs no copy.
            return tuple(self.split_heads(p(x)) for p in projections)  # 3 × (B, H, T, Dh)
        weight = torch.cat([p.weight for p in projections])  # (3D, D)
        bias = None if self.q_proj.bias is None else torch.cat([p.bias for p in projections])  # (3D,)
        q, k, v = F.linear(x, weight, bias).split(self.d_model, dim=-1)  # (B, T, 3D) -> 3 × (B, T, D)
        return self.split_heads(q), self.split_heads(k), self.split_heads(v)  # (B, H, T, Dh) each

    def new_cache(self) -> KVCache | RollingKVCache:
        """An empty cache for incremental decoding: a :class:`RollingKVCache` holding just the
        positions a sliding window can see, else a :class:`KVCache`."""
        span = self.attention.recent_positions
        return KVCache() if span is None else RollingKVCache(span)

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        *,
        key_padding_mask: Tensor | None = None,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        kv: tuple[Tensor, Tensor] | None = None,
        cache: KVCache | RollingKVCache | None = None,
    ) -> AttentionOutput:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: the positions that ask.
            key, value: the positions asked (default: ``query``, i.e. self-attention).
            key_padding_mask: ``True`` where a key is a real token (see ``padding_mask``).
            attn_mask: boolean, ``True`` = may attend.
            is_causal: also apply the causal mask (aligned so the last query sees every key).
            need_weights: return per-head weights ``(B, H, T, S)``.
            kv: keys/values already projected by :meth:`project_kv` (cross-attention while
                decoding: the encoder side is projected once, not at every step). ``kv`` may
                have ``B / G`` rows, each shared by ``G`` consecutive query rows (the beams of one
                sentence); ``key_padding_mask`` then has ``B / G`` rows too.
            cache: a :class:`KVCache`; the new keys/values are appended to it and attention runs
                over everything it holds (incremental self-attention decoding). A
                :class:`RollingKVCache` (sliding-window attention, ``is_causal=True``) holds only
                the last positions; masks may then cover all positions seen (their last columns
                are used) or just the ones it returns.

        Shape:
            - query: ``(B, T, D)``;  key: ``(B, S, kdim)``;  value: ``(B, S, vdim)``
            - key_padding_mask: ``(B, S)`` (``S`` counts cached positions too; ``(B / G, S)``
              with a shared ``kv``)
            - kv: 2 × ``(B, H, S, Dh)`` or 2 × ``(B / G, H, S, Dh)``
            - attn_mask: ``(T, S)`` or ``(B, 1|H, T, S)``
            - output: ``(B, T, D)``;  weights: ``(B, H, T, S)``
        """
        # One step of decoding without masks or weights: the short path (see attend_cached_row).
        if (
            isinstance(cache, KVCache)
            and query.dim() == 3
            and query.shape[1] == 1
            and query.shape[2] == self.d_model
            and key is None
            and value is None
            and kv is None
            and key_padding_mask is None
            and attn_mask is None
            and not is_causal
            and not need_weights
            and self.has_short_decoding_path
            and query.dtype == self.q_proj.weight.dtype
        ):
            return self.attend_cached_row(query, cache)
        inputs = {"query": query, "key": key, "value": value}
        if kv is not None:
            inputs.update({"kv[0]": kv[0], "kv[1]": kv[1]})
        self._check_dtypes(inputs)
        if query.dim() != 3 or query.shape[-1] != self.d_model:
            raise ValueError(f"query must have shape (B, T, {self.d_model}), got {tuple(query.shape)}")
        B, T, _ = query.shape
        groups = 1 if kv is None else self._kv_groups(B, kv[0], attn_mask, is_causal)
        if kv is None and key is None and value is None and cache is None and self._stackable:
            # Self-attention over a whole sequence (training, encoding): one (B·T, D) x (D, 3D)
            # product with the three weights stacked is cheaper than three (D, D) ones, forward
            # and backward (measured in docs/foundation.md). Stacking copies 3·D² numbers per
            # call, so decoding (one row per step, with a cache) keeps the three separate products.
            q, k, v = self._project_qkv(query)  # (B, H, T, Dh) each
            key = query
        elif groups > 1:
            # Each group of consecutive query rows shares one row of keys/values (the beams of
            # one sentence, one source): its G·T positions become the query rows of that row's
            # attention, so the keys/values are read once per row and never copied per query row.
            n = B // groups
            q = self.q_proj(query).view(n, groups * T, self.n_heads, self.head_dim).transpose(1, 2)  # (B/G, H, G·T, Dh)
            k, v = kv  # (B/G, H, S, Dh)
        else:
            q = self.split_heads(self.q_proj(query))  # (B, H, T, Dh)
            if kv is not None:
                k, v = kv  # (B, H, S, Dh)
            else:
                key = query if key is None else key
                value = key if value is None else value
                k, v = self.project_kv(key, value)  # (B, H, S, Dh)
        if self.rotary is not None:
            if key is not query:
                raise ValueError("rotary positions apply to self-attention only (got a separate key or kv)")
            # Rotate before caching: a cached key keeps the angle of the position it was made at.
            offset = len(cache) if cache is not None else 0
            q, k = self.rotary(q, offset), self.rotary(k, offset)  # (B, H, T, Dh)
        if isinstance(cache, RollingKVCache):
            self._check_rolling(cache, is_causal)
            seen = len(cache) + T  # positions seen, counting the new ones
            k, v = cache.extend(k, v)  # (B, H, S, Dh): the last kept positions, then the new ones
            if key_padding_mask is not None and key_padding_mask.shape[-1] == seen:
                key_padding_mask = key_padding_mask[:, -k.shape[-2] :]  # (B, S)
            if attn_mask is not None and attn_mask.shape[-1] == seen:
                attn_mask = attn_mask[..., -k.shape[-2] :]  # (..., T, S)
        elif cache is not None:
            if self.attention.windowed and not is_causal:
                # One new query with is_causal=False would get a *symmetric* window: half as wide.
                raise ValueError(f"decoding with {self.attention!r} and a cache needs is_causal=True")
            k, v = cache.extend(k, v)  # (B, H, S_total, Dh)
        if attn_mask is not None and attn_mask.dim() == 3:
            raise ValueError(f"attn_mask of shape {tuple(attn_mask.shape)} is ambiguous: give (T, S) or (B, 1|H, T, S)")
        if key_padding_mask is not None:
            if key_padding_mask.shape != (k.shape[0], k.shape[-2]):
                raise ValueError(
                    f"key_padding_mask must have shape (B, S) = {(k.shape[0], k.shape[-2])}, "
                    f"got {tuple(key_padding_mask.shape)}"
                )
            key_padding_mask = key_padding_mask[:, None, None, :]  # (B, 1, 1, S)
        mask = AF.combine_masks(attn_mask, key_padding_mask)
        out, weights = self.attention(
            q,
            k,
            v,
            mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=is_causal,
            return_weights=need_weights,
        )  # (B, H, T, Dh); grouped: (B/G, H, G·T, Dh)
        # Grouped rows are laid out as (B/G, G·T) = (B, T) positions, so one reshape serves both.
        out = out.transpose(1, 2).reshape(B, T, self.d_model)  # (B, H, T, Dh) -> (B, T, D)
        if weights is not None and groups > 1:
            S = weights.shape[-1]
            weights = weights.view(B // groups, self.n_heads, groups, T, S).transpose(1, 2)  # (B/G, G, H, T, S)
            weights = weights.reshape(B, self.n_heads, T, S)  # (B, H, T, S)
        return AttentionOutput(self.out_proj(out), weights)

    def _kv_groups(self, B: int, k: Tensor, attn_mask: Tensor | None, is_causal: bool) -> int:
        """How many consecutive query rows share each row of the projected ``kv`` (1: one each)."""
        n = k.shape[0]
        if n == B:
            return 1
        if n == 0 or B % n:
            raise ValueError(
                f"kv has {n} rows for a query batch of {B}: give one row per query row, or one per "
                "group of consecutive query rows (B a multiple of kv's rows)"
            )
        if attn_mask is not None or is_causal:
            raise ValueError("kv shared by groups of query rows takes key_padding_mask only (no attn_mask, is_causal)")
        return B // n

    @property
    def has_short_decoding_path(self) -> bool:
        """Whether a decoding step (one new position, a :class:`KVCache`, no masks or weights,
        ``is_causal=False``) takes the short path of :meth:`forward`: self-attention with
        ``"full"`` attention (not the online softmax of ``backend="chunked"``)."""
        return self._stackable and self.attention.name == "full" and self.backend != "chunked"

    def attend_cached_row(self, x: Tensor, cache: KVCache) -> AttentionOutput:
        """One step of incremental self-attention decoding: one new position per sequence, no
        masks, no weights asked for, the keys and values before it in ``cache``.

        The general path of :meth:`forward` computes the same attention (the same operations, so
        the same numbers), but decoding runs this once per layer and token, where the fixed cost
        of each call is a large part of the step: the checks and masks are left out, as
        :meth:`forward` has made the cheap checks that this case needs. A single new query may see
        every cached key, so causal decoding needs no mask.

        Shape:
            x ``(B, 1, D)``; cache holding ``S - 1`` positions → output ``(B, 1, D)``
        """
        B = x.shape[0]
        q, k, v = self._project_qkv(x)  # (B, H, 1, Dh) each
        if self.rotary is not None:
            offset = len(cache)
            q, k = self.rotary(q, offset), self.rotary(k, offset)  # (B, H, 1, Dh)
        k, v = cache.extend(k, v)  # (B, H, S, Dh)
        scale = 1.0 / math.sqrt(self.head_dim)  # the default of AF.scaled_dot_product_attention
        dropout_p = self.dropout if self.training else 0.0
        out, _ = AF.pick_backend(self.backend, q, k)(q, k, v, None, scale, dropout_p, False, False)  # (B, H, 1, Dh)
        out = out.transpose(1, 2).reshape(B, 1, self.d_model)  # (B, H, 1, Dh) -> (B, 1, D)
        return AttentionOutput(self.out_proj(out), None)

    def _check_dtypes(self, inputs: dict[str, Tensor | None]) -> None:
        """Inputs must have the weights' dtype (else F.linear fails with "mat1 and mat2 must have
        the same dtype"), except under autocast, which casts both to its own dtype."""
        weight = self.q_proj.weight
        if torch.is_autocast_enabled(weight.device.type):
            return
        for name, x in inputs.items():
            if x is None:
                continue
            if not isinstance(x, Tensor):
                raise TypeError(f"MultiHeadAttention: {name} must be a torch.Tensor, got {type(x).__name__}")
            if not x.is_floating_point():
                raise TypeError(
                    f"MultiHeadAttention: {name} must be a floating-point tensor (embed token ids first), "
                    f"got dtype {x.dtype}"
                )
            if x.dtype != weight.dtype:
                raise TypeError(
                    f"MultiHeadAttention: {name} has dtype {x.dtype} but the weights are {weight.dtype}; "
                    f"convert one of them (e.g. module.to({x.dtype}) or {name}.to({weight.dtype}))"
                )

    def _check_rolling(self, cache: RollingKVCache, is_causal: bool) -> None:
        span = self.attention.recent_positions
        if span is None:
            raise ValueError(
                f"a RollingKVCache forgets old positions, which {self.attention!r} still attends to; "
                "use KVCache (or MultiHeadAttention.new_cache())"
            )
        if not is_causal:
            raise ValueError("decoding with a RollingKVCache is causal: pass is_causal=True")
        if cache.window < span:
            raise ValueError(
                f"RollingKVCache(window={cache.window}) keeps fewer positions than {self.attention!r} "
                f"sees ({span}); use MultiHeadAttention.new_cache()"
            )


class AdditiveAttention(nn.Module):
    """Bahdanau's additive attention as a module: ``score = vᵀ tanh(W_q q + W_k k + b)``.

    Args:
        query_dim: width of the queries (e.g. the decoder state).
        key_dim: width of the keys (e.g. the encoder states).
        attn_dim: width ``A`` of the scoring network's hidden layer.

    Shape:
        query ``(B, T, query_dim)``, keys ``(B, S, key_dim)``, values ``(B, S, Dv)``,
        mask broadcastable to ``(B, T, S)`` → output ``(B, T, Dv)``, weights ``(B, T, S)``
    """

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int) -> None:
        super().__init__()
        self.q_proj = nn.Linear(query_dim, attn_dim, bias=False)
        self.k_proj = nn.Linear(key_dim, attn_dim, bias=True)
        self.score = nn.Parameter(torch.empty(attn_dim))
        nn.init.normal_(self.score, std=attn_dim**-0.5)

    def forward(
        self, query: Tensor, keys: Tensor, values: Tensor | None = None, mask: Tensor | None = None
    ) -> AttentionOutput:
        values = keys if values is None else values
        out, weights = AF.additive_attention(
            query, keys, values, self.q_proj.weight, self.k_proj.weight, self.score, mask, bias=self.k_proj.bias
        )
        return AttentionOutput(out, weights)


#: The feed-forward activations by config name (``activation=`` of :class:`FeedForward`, the blocks
#: and the model configs): name → elementwise function.
ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
    # GPT-2's tanh approximation of GELU (Hendrycks & Gimpel 2016, eq. in §2).
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
}


class FeedForward(nn.Module):
    """Position-wise feed-forward network, ``down(act(up(x)))`` (Vaswani et al. 2017, §3.3).

    Shape:
        x ``(B, T, D)`` → ``(B, T, D)``; the hidden layer is ``(B, T, d_ff)``
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu", bias: bool = True):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; choose from {sorted(ACTIVATIONS)}")
        self.up_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.down_proj = nn.Linear(d_ff, d_model, bias=bias)
        self.act = ACTIVATIONS[activation]
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(self.dropout(self.act(self.up_proj(x))))


class BlockOutput(NamedTuple):
    hidden: Tensor  # (B, T, D)
    self_weights: Tensor | None  # (B, H, T, T') self-attention weights
    cross_weights: Tensor | None = None  # (B, H, T, S) cross-attention weights (decoder only)


def _check_norm(norm: str) -> None:
    if norm not in ("post", "pre"):
        raise ValueError(f"norm must be 'post' (the paper's) or 'pre', got {norm!r}")


class EncoderBlock(nn.Module):
    """Self-attention + feed-forward, each wrapped in a residual connection and LayerNorm.

    ``norm="post"`` is the paper's ``LayerNorm(x + Sublayer(x))`` (Vaswani et al. 2017, §3.1);
    ``norm="pre"`` is ``x + Sublayer(LayerNorm(x))`` (Xiong et al. 2020), which trains stably
    without a long warm-up and is what GPT-2 uses. With ``is_causal`` this is also the block of a
    decoder-only model (GPT). ``attention`` picks the self-attention variant (see
    :class:`MultiHeadAttention`), e.g. ``AttentionSpec("sliding_window", window=256)``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "relu",
        norm: str = "post",
        layer_norm_eps: float = 1e-5,
        bias: bool = True,
        backend: str = "auto",
        rotary: nn.Module | None = None,
        attention: str | AttentionSpec = "full",
    ) -> None:
        super().__init__()
        _check_norm(norm)
        self.norm = norm
        self.self_attn = MultiHeadAttention(
            d_model, n_heads, dropout=dropout, bias=bias, backend=backend, rotary=rotary, attention=attention
        )
        self.ff = FeedForward(d_model, d_ff, dropout=dropout, activation=activation, bias=bias)
        self.attn_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.ff_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        *,
        key_padding_mask: Tensor | None = None,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        cache: KVCache | RollingKVCache | None = None,
    ) -> BlockOutput:
        """Shape: x ``(B, T, D)``; key_padding_mask ``(B, S)`` → hidden ``(B, T, D)``."""

        def attend(h: Tensor) -> AttentionOutput:
            return self.self_attn(
                h,
                key_padding_mask=key_padding_mask,
                attn_mask=attn_mask,
                is_causal=is_causal,
                need_weights=need_weights,
                cache=cache,
            )

        if self.norm == "pre":
            a = attend(self.attn_norm(x))
            x = x + self.dropout(a.output)
            x = x + self.dropout(self.ff(self.ff_norm(x)))
        else:
            a = attend(x)
            x = self.attn_norm(x + self.dropout(a.output))
            x = self.ff_norm(x + self.dropout(self.ff(x)))
        return BlockOutput(x, a.weights)


class DecoderBlock(nn.Module):
    """Causal self-attention, source–target (cross) attention, feed-forward (Vaswani et al. §3.1).

    Each sub-layer has a residual connection and LayerNorm (post- or pre-norm, as
    :class:`EncoderBlock`). The queries of the cross-attention come from the target side; its
    keys and values are the encoder's output ("memory"). ``attention`` picks the variant of the
    self-attention only (see :class:`MultiHeadAttention`).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "relu",
        norm: str = "post",
        layer_norm_eps: float = 1e-5,
        bias: bool = True,
        backend: str = "auto",
        attention: str | AttentionSpec = "full",
    ) -> None:
        super().__init__()
        _check_norm(norm)
        self.norm = norm
        # The variant applies to self-attention: source and target positions are not aligned,
        # so a window over the source would mean nothing; cross-attention stays full.
        self.self_attn = MultiHeadAttention(
            d_model, n_heads, dropout=dropout, bias=bias, backend=backend, attention=attention
        )
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, bias=bias, backend=backend)
        self.ff = FeedForward(d_model, d_ff, dropout=dropout, activation=activation, bias=bias)
        self.self_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.cross_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.ff_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        *,
        memory_padding_mask: Tensor | None = None,
        target_padding_mask: Tensor | None = None,
        need_weights: bool = False,
        memory_kv: tuple[Tensor, Tensor] | None = None,
        cache: KVCache | RollingKVCache | None = None,
    ) -> BlockOutput:
        """Shape: x ``(B, T, D)``; memory ``(B, S, D)``; memory_padding_mask ``(B, S)``;
        target_padding_mask ``(B, T)`` (or ``(B, T_total)`` with a cache) → hidden ``(B, T, D)``.

        ``memory_kv`` (from ``cross_attn.project_kv(memory)``) replaces ``memory`` while decoding.
        """

        def self_attend(h: Tensor) -> AttentionOutput:
            return self.self_attn(
                h, key_padding_mask=target_padding_mask, is_causal=True, need_weights=need_weights, cache=cache
            )

        def cross_attend(h: Tensor) -> AttentionOutput:
            return self.cross_attn(
                h, memory, key_padding_mask=memory_padding_mask, need_weights=need_weights, kv=memory_kv
            )

        if self.norm == "pre":
            s = self_attend(self.self_norm(x))
            x = x + self.dropout(s.output)
            c = cross_attend(self.cross_norm(x))
            x = x + self.dropout(c.output)
            x = x + self.dropout(self.ff(self.ff_norm(x)))
        else:
            s = self_attend(x)
            x = self.self_norm(x + self.dropout(s.output))
            c = cross_attend(x)
            x = self.cross_norm(x + self.dropout(c.output))
            x = self.ff_norm(x + self.dropout(self.ff(x)))
        return BlockOutput(x, s.weights, c.weights)
