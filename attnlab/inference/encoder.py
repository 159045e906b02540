"""Sentence embeddings from a BERT encoder: :class:`SentenceEncoder` (texts in, one vector each out).

The language-model recipe (:mod:`attnlab.recipes.lm`) loads encoders (``load_encoder``,
``load_sentence_encoder``); this module uses one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..data.tokenizers import PretrainedTokenizer
from ..models.bert import BertModel, sentence_embeddings

Tensor = torch.Tensor

__all__ = ["SentenceEncoder"]


@dataclass
class SentenceEncoder:
    """A BERT encoder, its tokenizer and the sentence-transformers pooling settings.

    Shape:
        :meth:`embed`: N texts → ``(N, D)``
    """

    model: BertModel  # the encoder (eval mode)
    tokenizer: PretrainedTokenizer  # with [CLS]/[SEP] as bos/eos
    max_length: int  # longer inputs are cut to this many tokens (sentence-transformers' max_seq_length)
    normalize: bool  # L2-normalise the pooled vectors (a Normalize module follows the pooling)

    def embed(self, texts: Sequence[str]) -> Tensor:
        """Shape: N texts → ``(N, D)``."""
        return sentence_embeddings(
            self.model, self.tokenizer, texts, max_length=self.max_length, normalize=self.normalize
        )
