"""GPT: a decoder-only Transformer language model (Radford et al. 2018, 2019).

    token ids ─ embed (+ learned positions) ─ [causal self-attention → feed-forward] × L
              ─ LayerNorm ─ · embeddingᵀ → logits over the vocabulary

Every position attends only to itself and the positions before it (the lesson's "masked
self-attention": each word looks back at the words before it), so one forward pass over a text
trains every next-token prediction at once. The blocks are :class:`attnlab.layers.EncoderBlock`
with ``norm="pre"`` and ``is_causal=True`` (GPT-2, §2.3, moved the LayerNorm to the input of each
sub-block and added one after the last block). The output projection is the token embedding
matrix itself (tied weights, Press & Wolf 2017).

Positions are either learned vectors added to the embeddings (GPT-2) or rotary (Su et al. 2021):
queries and keys are rotated by their position inside attention, so nothing is added to the
embeddings and a score depends only on the distance between two positions.

Decoding keeps a :class:`attnlab.layers.KVCache` per layer: after the prompt has been fed once,
each new token costs one position of work (see :func:`attnlab.decode.generate`).

Shape letters: ``B`` batch, ``T`` new positions, ``S`` positions attended (cache + new),
``D`` width, ``H`` heads, ``V`` vocabulary, ``L`` layers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..layers import EncoderBlock, KVCache
from ..positional import LearnedPositionalEmbedding, RotaryEmbedding
from ..viz import ShowsAttention
from .config import StackConfig, check_fields, preset_config

Tensor = torch.Tensor

__all__ = ["GPTConfig", "PRESETS", "GPT", "LMOutput", "gpt_config", "causal_lm_loss"]


@dataclass
class GPTConfig(StackConfig):
    vocab_size: int = 50257  # token ids 0 … V-1 (GPT-2's byte-level BPE has 50257)
    n_positions: int = 1024  # longest sequence (context window); sizes the learned position table
    d_model: int = 768  # model width D
    n_layers: int = 12  # number of Transformer blocks L
    n_heads: int = 12  # attention heads H; D must be divisible by H
    n_inner: int | None = None  # feed-forward hidden width (None: 4·D, as GPT-2)
    activation: str = "gelu_tanh"  # feed-forward activation; GPT-2 uses GELU's tanh approximation
    layer_norm_eps: float = 1e-5  # ε inside every LayerNorm (GPT-2: 1e-5)
    bias: bool = True  # biases in the attention and feed-forward linear maps (GPT-2: yes)
    dropout: float = 0.0  # on embeddings, attention weights and sub-layer outputs (0 for short CPU runs)
    positions: str = "learned"  # "learned" (GPT-2: a trained vector per position) or "rotary" (RoPE)
    rotary_base: float = 10000.0  # RoPE's base b of the angles θ_i = b^(-2i/Dh) (Su et al. 2021, §3.4)
    init_std: float = 0.02  # standard deviation of the normal initialisation (GPT-2)
    backend: str = "auto"  # attention backend (see attnlab.functional.scaled_dot_product_attention)
    attention: str = "full"  # attention variant: "full", "chunked", "sliding_window", "global_window"
    window: int | None = None  # local window of "sliding_window"/"global_window" (e.g. 256)
    n_global: int = 0  # "global_window": the first n_global positions are global (Longformer)
    model_type: str = "gpt"  # checkpoint tag used to rebuild the right class

    # d_ff, attention_spec(), to_dict() / from_dict() (config.json) and the shared checks: StackConfig.

    def __post_init__(self) -> None:
        super().__post_init__()
        check_fields(self, positive=("rotary_base",))
        if self.positions not in ("learned", "rotary"):
            raise ValueError(f"positions must be 'learned' or 'rotary', got {self.positions!r}")


#: Named sizes, in one place. ``vocab_size`` is filled in from the tokenizer when training.
#: "shakespeare-char" is sized for the best validation loss after ~10 minutes of training on two
#: CPU cores (tinyshakespeare, ~1M characters): big enough to get well below nanoGPT's 4×128 CPU
#: recipe, small enough to see several epochs of the text in that time.
PRESETS: dict[str, dict] = {
    "tiny": dict(n_positions=64, d_model=32, n_layers=2, n_heads=2),
    # Exact GELU rather than GPT-2's tanh approximation: the same curve, and PyTorch's CPU kernel
    # for it is faster (the measurement is in docs/gpt-bert.md).
    "shakespeare-char": dict(n_positions=256, d_model=192, n_layers=6, n_heads=6, dropout=0.0, activation="gelu"),
    # The shipped character GPT (attnlab/assets/shakespeare-char): small enough for the package's
    # 24 MB of assets next to the translators, big enough to show sensible next-character odds.
    "shakespeare-char-small": dict(n_positions=128, d_model=64, n_layers=4, n_heads=4, dropout=0.0, activation="gelu"),
    "bench-small": dict(n_positions=256, d_model=128, n_layers=4, n_heads=4),
    "bench-large": dict(n_positions=256, d_model=384, n_layers=6, n_heads=6),
    "gpt2": dict(n_positions=1024, d_model=768, n_layers=12, n_heads=12),
    "gpt2-medium": dict(n_positions=1024, d_model=1024, n_layers=24, n_heads=16),
}


def gpt_config(preset: str, **overrides) -> GPTConfig:
    """A :class:`GPTConfig` from a named preset, with fields overridden (e.g. ``vocab_size``)."""
    return preset_config(GPTConfig, PRESETS, preset, "GPT", **overrides)


@dataclass
class LMOutput(ShowsAttention):  # attentions: AttentionMaps; shows itself in Jupyter
    logits: Tensor  # (B, T, V) next-token logits at every new position
    loss: Tensor | None = None  # mean next-token cross-entropy over the labelled positions
    attentions: list[Tensor] | None = None  # per layer (B, H, T, S), when need_weights


class GPT(nn.Module):
    """Decoder-only Transformer language model. See the module docstring for the data flow.

    Shape:
        input_ids ``(B, T)`` → logits ``(B, T, V)``; with caches holding ``P`` positions, the
        new tokens sit at positions ``P … P+T-1`` and attend to ``S = P + T`` keys
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        c = self.config = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        # Rotary has no parameters; one module (its angle table) serves every layer.
        rotary = RotaryEmbedding(c.d_model // c.n_heads, base=c.rotary_base) if c.positions == "rotary" else None
        self.pos_emb = LearnedPositionalEmbedding(c.n_positions, c.d_model) if c.positions == "learned" else None
        self.embed_dropout = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            EncoderBlock(
                c.d_model,
                c.n_heads,
                c.d_ff,
                dropout=c.dropout,
                activation=c.activation,
                norm="pre",
                layer_norm_eps=c.layer_norm_eps,
                bias=c.bias,
                backend=c.backend,
                rotary=rotary,
                attention=c.attention_spec(),
            )
            for _ in range(c.n_layers)
        )
        self.final_norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps)
        self._init_weights()

    def _init_weights(self) -> None:
        # GPT-2 (Radford et al. 2019, §2.3): N(0, 0.02) everywhere, and the projections that write
        # into the residual stream scaled by 1/√(2L) so the stream's variance does not grow with depth.
        std = self.config.init_std
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        residual_std = std / math.sqrt(2 * self.config.n_layers)
        for block in self.blocks:
            nn.init.normal_(block.self_attn.out_proj.weight, std=residual_std)
            nn.init.normal_(block.ff.down_proj.weight, std=residual_std)

    def new_caches(self) -> list[KVCache]:
        """One empty key/value cache per layer, for incremental decoding."""
        return [block.self_attn.new_cache() for block in self.blocks]  # rolling for a sliding window

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(
        self,
        input_ids: Tensor,
        *,
        labels: Tensor | None = None,
        caches: list[KVCache] | None = None,
        need_weights: bool = False,
    ) -> LMOutput:
        """Next-token logits for every position of ``input_ids``.

        Args:
            input_ids: token ids.
            labels: the targets, aligned with ``input_ids`` (usually ``input_ids`` itself): the
                logits at position ``t`` are scored against ``labels[:, t+1]`` (the shift happens
                here); ``-100`` marks positions to ignore.
            caches: one :class:`KVCache` per layer; the new positions continue after the ones
                the caches hold, and their keys/values are appended.
            need_weights: also return every layer's attention weights.

        Shape:
            input_ids, labels ``(B, T)`` → logits ``(B, T, V)``, attentions ``L × (B, H, T, S)``
        """
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must have shape (B, T), got {tuple(input_ids.shape)}")
        if input_ids.dtype not in (torch.long, torch.int):
            raise TypeError(f"input_ids must be an integer tensor, got dtype {input_ids.dtype}")
        if caches is not None and len(caches) != len(self.blocks):
            raise ValueError(f"need one KVCache per layer ({len(self.blocks)}), got {len(caches)}")
        T = input_ids.shape[1]
        offset = len(caches[0]) if caches else 0
        if offset + T > self.config.n_positions:
            raise ValueError(
                f"sequence of {offset + T} positions exceeds the context window n_positions={self.config.n_positions}"
            )
        x = self.tok_emb(input_ids)  # (B, T, D)
        if self.pos_emb is not None:
            x = self.pos_emb(x, offset)  # (B, T, D)
        x = self.embed_dropout(x)
        # A single new position after a cache may see every cached key, so the causal mask would
        # be all True: skip building it (one mask per layer per generated token).
        # A window needs is_causal even then: it decides the window's shape (causal, not symmetric).
        is_causal = T > 1 or self.blocks[0].self_attn.attention.windowed
        attentions = [] if need_weights else None
        for i, block in enumerate(self.blocks):
            x, weights, _ = block(
                x, is_causal=is_causal, need_weights=need_weights, cache=caches[i] if caches else None
            )
            if need_weights:
                attentions.append(weights)
        x = self.final_norm(x)
        logits = F.linear(x, self.tok_emb.weight)  # (B, T, D) x (V, D)ᵀ -> (B, T, V), tied output
        loss = None if labels is None else causal_lm_loss(logits, labels)
        return LMOutput(logits, loss, attentions)

    def token_stepper(self) -> Callable[[Tensor, list[KVCache]], Tensor] | None:
        """A function ``step(input_ids, caches)`` equal to ``self(input_ids,
        caches=caches).logits[:, -1]`` for one new token per row, or ``None`` where this model
        needs :meth:`forward` with its full checks (training mode, forward hooks, autocast or
        mixed dtypes, an attention variant with a window or the online softmax).

        This is the model's own step: :meth:`forward` itself, marked ``engine = "modules"``.
        A faster engine is chosen outside the model: :func:`attnlab.decode.iter_generate`'s
        ``engine`` (:func:`attnlab.accel.engine.gpt_stepper`, attnlab's C decoder step).

        Shape:
            input_ids ``(B, 1)``; caches holding ``P`` positions → logits ``(B, V)`` at position ``P``
        """
        if self.training or any(m._forward_hooks or m._forward_pre_hooks for m in self.modules()):
            return None
        if torch.is_autocast_enabled(self.tok_emb.weight.device.type) or len({p.dtype for p in self.parameters()}) > 1:
            return None
        if not all(block.norm == "pre" and block.self_attn.has_short_decoding_path for block in self.blocks):
            return None

        def step(input_ids: Tensor, caches: list[KVCache]) -> Tensor:
            return self(input_ids, caches=caches).logits[:, -1]  # (B, V)

        step.engine = "modules"  # type: ignore[attr-defined]
        return step


def causal_lm_loss(logits: Tensor, labels: Tensor, ignore_index: int = -100) -> Tensor:
    """Mean cross-entropy of predicting ``labels[:, t+1]`` from the logits at ``t``.

    Shape:
        logits ``(B, T, V)``; labels ``(B, T)`` → scalar
    """
    if labels.shape != logits.shape[:2]:
        raise ValueError(f"labels must have shape (B, T) = {tuple(logits.shape[:2])}, got {tuple(labels.shape)}")
    V = logits.shape[-1]
    return F.cross_entropy(
        logits[:, :-1].reshape(-1, V),  # (B·(T-1), V)
        labels[:, 1:].reshape(-1),  # (B·(T-1),)
        ignore_index=ignore_index,
    )
