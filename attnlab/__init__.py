"""attnlab: the attention mechanism and the Transformer as real, fast, tested software."""

from .functional import (
    additive_attention,
    causal_mask,
    combine_masks,
    neighbour_mask,
    padding_mask,
    scaled_dot_product_attention,
    sliding_window_mask,
)
from .layers import AdditiveAttention, FeedForward, KVCache, MultiHeadAttention, RollingKVCache
from .variants import (
    ATTENTION_VARIANTS,
    AttentionSpec,
    chunked_attention,
    global_window_attention,
    sliding_window_attention,
)

__version__ = "0.1.0"

__all__ = [
    "scaled_dot_product_attention",
    "additive_attention",
    "sliding_window_attention",
    "global_window_attention",
    "chunked_attention",
    "ATTENTION_VARIANTS",
    "AttentionSpec",
    "causal_mask",
    "padding_mask",
    "sliding_window_mask",
    "neighbour_mask",
    "combine_masks",
    "MultiHeadAttention",
    "AdditiveAttention",
    "FeedForward",
    "KVCache",
    "RollingKVCache",
]
