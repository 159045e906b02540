"""Attention-pooling text classifier: the lesson's first exercise, as a trainable model.

    token ids ─ embed·√D + sinusoidal positions ─ [self-attention → feed-forward] × L ─ LayerNorm
              ─ states h_1 … h_S ─ attention pooling (one learned query) ─ c = Σ α_i h_i ─ linear ─ logits

Attention pooling (Yang et al. 2016, "Hierarchical Attention Networks", §2.2): each state is
scored against a learned *context vector* ``u`` — ``u_i = tanh(W_k h_i + b)``, ``s_i = uᵀ u_i``
— the scores go through a softmax over the real (non-padding) tokens, and the sentence
representation is ``c = Σ_i α_i h_i``. The weights ``α`` are returned with every prediction:
they say which token states the representation is made of.

Why Transformer encoder blocks and not a BiGRU: attnlab's blocks already exist, are tested, run
every position in parallel (a GRU steps through the sentence one token at a time, which on a CPU
costs more than the whole attention for sentences this short) and expose their own self-attention
maps. The caveat holds for both: after self-attention (or a recurrent pass) a state ``h_i`` carries
information from other tokens too, so ``α_i`` says which *positions* the classifier read, not
which words alone decided (Jain & Wallace 2019, "Attention is not Explanation").

Shape letters: ``B`` batch, ``S`` sequence length, ``D`` width, ``H`` heads, ``C`` classes,
``L`` layers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .. import functional as AF
from ..layers import EncoderBlock
from ..positional import SinusoidalPositionalEncoding
from ..viz import ShowsAttention
from .config import check_fields, preset_config

Tensor = torch.Tensor

__all__ = [
    "ClassifierConfig",
    "PRESETS",
    "classifier_config",
    "AttentionPooling",
    "PooledOutput",
    "ClassifierOutput",
    "AttentionPoolClassifier",
]


@dataclass
class ClassifierConfig:
    vocab_size: int  # token ids 0 … V-1, from the tokenizer
    n_classes: int  # number of labels C
    d_model: int = 64  # model width D
    n_heads: int = 4  # self-attention heads H; D must be divisible by H
    n_layers: int = 2  # encoder blocks L before the pooling (0: pool the embeddings themselves)
    d_ff: int = 128  # hidden width of the feed-forward nets
    dropout: float = 0.1  # on embeddings, attention weights, sub-layer outputs and the pooled vector
    max_len: int = 512  # longest input in tokens (sizes the sinusoidal table)
    pad_id: int = 0  # padding token id; padding never receives pooling weight
    model_type: str = "attention_pool_classifier"  # checkpoint tag used to rebuild the right class

    def __post_init__(self) -> None:
        check_fields(
            self,
            positive=("vocab_size", "d_model", "n_heads", "d_ff", "max_len"),
            non_negative=("n_layers",),
            fractions=("dropout",),
            ids={"pad_id": ("vocab_size",)},
            sizes=(
                ("vocab_size", "d_model"),
                ("max_len", "d_model"),
                ("n_layers", "d_model", "d_ff"),
                ("n_classes", "d_model"),
            ),
        )
        if self.n_classes < 2:
            raise ValueError(f"a classifier needs at least 2 classes, got n_classes={self.n_classes}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")


#: Named sizes. "tiny" is for tests; "small" trains on the language-ID demo in a few minutes on a CPU.
PRESETS: dict[str, dict] = {
    "tiny": dict(d_model=32, n_heads=2, n_layers=1, d_ff=64, dropout=0.0),
    "small": dict(d_model=64, n_heads=4, n_layers=2, d_ff=128, dropout=0.1),
    "base": dict(d_model=128, n_heads=4, n_layers=3, d_ff=256, dropout=0.1),
}


def classifier_config(preset: str, **fields) -> ClassifierConfig:
    """A :class:`ClassifierConfig` from a named preset plus fields (``vocab_size``, ``n_classes``...)."""
    return preset_config(ClassifierConfig, PRESETS, preset, "classifier", **fields)


@dataclass
class PooledOutput:
    pooled: Tensor  # (B, D) the attention-weighted sum of the states
    weights: Tensor  # (B, S) pooling weights; each row sums to 1 over the real tokens, 0 on padding


class AttentionPooling(nn.Module):
    """One learned query attends over a sequence of states (Yang et al. 2016, §2.2).

    ``α = softmax_i(uᵀ tanh(W_k h_i + b))`` over the positions the mask allows, output
    ``Σ_i α_i h_i``. The softmax and the masking are :func:`attnlab.functional.scaled_dot_product_attention`
    with one query and ``scale=1`` (the context vector learns its own scale).

    Args:
        d_model: width ``D`` of the states.

    Shape:
        states ``(B, S, D)``, mask ``(B, S)`` (True = real token) → pooled ``(B, D)``, weights ``(B, S)``
    """

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.k_proj = nn.Linear(d_model, d_model)
        self.query = nn.Parameter(torch.empty(d_model))
        nn.init.normal_(self.query, std=d_model**-0.5)

    def forward(self, states: Tensor, mask: Tensor | None = None) -> PooledOutput:
        if states.dim() != 3:
            raise ValueError(f"states must have shape (B, S, D), got {tuple(states.shape)}")
        B, _, D = states.shape
        keys = torch.tanh(self.k_proj(states))  # (B, S, D)
        # Under bf16 autocast the projection gives bf16 keys while the learned query and the
        # (normed) states stay fp32; attention takes one dtype, the keys' (a no-op in fp32).
        query = self.query.to(keys.dtype).expand(B, 1, D)  # (B, 1, D)
        states = states.to(keys.dtype)
        attn_mask = None if mask is None else mask.unsqueeze(1)  # (B, 1, S)
        out, weights = AF.scaled_dot_product_attention(
            query, keys, states, attn_mask, scale=1.0, return_weights=True, backend="math"
        )  # (B, 1, D), (B, 1, S)
        return PooledOutput(out.squeeze(1), weights.squeeze(1))  # (B, D), (B, S)


@dataclass
class ClassifierOutput(ShowsAttention):  # attentions: AttentionMaps; shows itself in Jupyter
    logits: Tensor  # (B, C)
    loss: Tensor | None  # mean cross-entropy when labels were given
    pool_weights: Tensor  # (B, S) attention-pooling weights over the tokens
    attentions: list[Tensor] | None = None  # L × (B, H, S, S) encoder self-attention, if asked


class AttentionPoolClassifier(nn.Module):
    """Sequence encoder + attention pooling + linear classifier. See the module docstring.

    Shape:
        input_ids ``(B, S)``; mask ``(B, S)``; labels ``(B,)`` → logits ``(B, C)``, pool_weights ``(B, S)``
    """

    def __init__(self, config: ClassifierConfig) -> None:
        super().__init__()
        c = self.config = config
        self.embed = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.positions = SinusoidalPositionalEncoding(c.d_model, c.max_len)
        self.embed_dropout = nn.Dropout(c.dropout)
        # Pre-norm blocks train without a long warm-up (Xiong et al. 2020); the final LayerNorm
        # brings the un-normalised residual stream to scale before it is pooled.
        self.blocks = nn.ModuleList(
            EncoderBlock(c.d_model, c.n_heads, c.d_ff, dropout=c.dropout, norm="pre") for _ in range(c.n_layers)
        )
        self.final_norm = nn.LayerNorm(c.d_model)
        self.pool = AttentionPooling(c.d_model)
        self.pool_dropout = nn.Dropout(c.dropout)
        self.out_proj = nn.Linear(c.d_model, c.n_classes)
        nn.init.normal_(self.embed.weight, std=c.d_model**-0.5)
        with torch.no_grad():
            self.embed.weight[c.pad_id].zero_()

    def forward(
        self,
        input_ids: Tensor,
        mask: Tensor | None = None,
        *,
        labels: Tensor | None = None,
        need_weights: bool = False,
    ) -> ClassifierOutput:
        """Classify a batch of token sequences.

        Args:
            input_ids: token ids, padded with ``pad_id``.
            mask: True = real token (default: ``input_ids != pad_id``).
            labels: class indices; when given, the loss is returned.
            need_weights: also return every encoder layer's self-attention.

        Shape:
            input_ids ``(B, S)``; mask ``(B, S)``; labels ``(B,)`` → logits ``(B, C)``,
            pool_weights ``(B, S)``, attentions ``L × (B, H, S, S)``
        """
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must have shape (B, S), got {tuple(input_ids.shape)}")
        if mask is None:
            mask = AF.padding_mask(tokens=input_ids, pad_id=self.config.pad_id)  # (B, S)
        if not bool(mask.any(dim=1).all()):
            raise ValueError("every sequence needs at least one real token (an empty text cannot be classified)")
        x = self.embed(input_ids) * math.sqrt(self.config.d_model)  # (B, S, D)
        x = self.embed_dropout(self.positions(x))
        attentions = []
        for block in self.blocks:
            x, w, _ = block(x, key_padding_mask=mask, need_weights=need_weights)
            if need_weights:
                attentions.append(w)
        pooled = self.pool(self.final_norm(x), mask)
        logits = self.out_proj(self.pool_dropout(pooled.pooled))  # (B, C)
        loss = None if labels is None else F.cross_entropy(logits, labels)
        return ClassifierOutput(logits, loss, pooled.weights, attentions if need_weights else None)
