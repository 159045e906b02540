"""attnlab: the attention mechanism and the Transformer as real, fast, tested software."""

from .functional import (
    additive_attention,
    causal_mask,
    combine_masks,
    padding_mask,
    scaled_dot_product_attention,
    sliding_window_mask,
)
from .layers import AdditiveAttention, FeedForward, KVCache, MultiHeadAttention

__version__ = "0.1.0"

__all__ = [
    "scaled_dot_product_attention",
    "additive_attention",
    "causal_mask",
    "padding_mask",
    "sliding_window_mask",
    "combine_masks",
    "MultiHeadAttention",
    "AdditiveAttention",
    "FeedForward",
    "KVCache",
]
