"""Attention variants for long sequences, and choosing attention by name.

Dense attention (:func:`attnlab.functional.scaled_dot_product_attention`) scores every query against
every key: O(T·S) time and memory. The variants keep its calling convention but touch only the
scores they need, or never hold them all at once, one module per family:

- :mod:`.sliding_window`: each query sees the last ``window`` keys (or ``window // 2`` on each side),
  computed block by block (:mod:`.local`, the banded machinery with its recomputing backward), so
  time and memory grow linearly with the length; :mod:`.dilated` spaces the keys ``dilation`` apart;
- :mod:`.global_window`: Longformer's sliding window plus a few global positions that attend to,
  and are attended by, every position (Beltagy et al. 2020, §3.1);
- :mod:`.chunked`: exact attention by the online softmax, chunk by chunk, with a backward pass that
  recomputes the scores (Milakov & Gimelshein 2018; Rabe & Staats 2021; Dao et al. 2022) — the
  algorithm of fused "flash" kernels, written in plain PyTorch;
- :mod:`.spec`: :data:`ATTENTION_VARIANTS` and :class:`AttentionSpec`, a variant chosen by name.

Each one equals the math reference given the equivalent dense mask, built by the mask helpers of
:mod:`attnlab.functional` (``dilated_window_mask``, ``global_window_mask``); tests/core/test_variants.py
checks that, forward and backward. :mod:`.blocks` holds what the blocked variants share.
"""

from .blocks import MAX_DENSE_WEIGHTS
from .chunked import chunked_attention
from .global_window import global_window_attention
from .sliding_window import sliding_window_attention
from .spec import ATTENTION_VARIANTS, AttentionSpec

__all__ = [
    "sliding_window_attention",
    "global_window_attention",
    "chunked_attention",
    "ATTENTION_VARIANTS",
    "AttentionSpec",
    "MAX_DENSE_WEIGHTS",
]
