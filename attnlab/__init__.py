"""attnlab: the attention mechanism and the Transformer as real, fast, tested software."""

# The names below load PyTorch, so they are imported on first use (PEP 562): the `attnlab`
# command must set OpenMP's wait policy before PyTorch loads (attnlab/openmp.py), and importing
# attnlab.cli imports this package first.
_LAZY = {
    "additive_attention": "functional",
    "causal_mask": "functional",
    "combine_masks": "functional",
    "neighbour_mask": "functional",
    "padding_mask": "functional",
    "scaled_dot_product_attention": "functional",
    "sliding_window_mask": "functional",
    "AdditiveAttention": "layers",
    "FeedForward": "layers",
    "KVCache": "layers",
    "MultiHeadAttention": "layers",
    "RollingKVCache": "layers",
    "ATTENTION_VARIANTS": "variants",
    "AttentionSpec": "variants",
    "chunked_attention": "variants",
    "global_window_attention": "variants",
    "sliding_window_attention": "variants",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'attnlab' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
