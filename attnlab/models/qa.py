"""Extractive question answering: a span head on BERT (Devlin et al. 2019, §4.2, SQuAD v1.1).

The question and the passage are read together, ``[CLS] question [SEP] passage [SEP]`` (token
types 0 and 1), by the bidirectional encoder of :mod:`attnlab.models.bert`, so every passage token
attends to every question token and back: this question–document attention is where the answer
is found, and the encoder's attention maps are returned for display. Two vectors ``S`` and ``E``
(the rows of ``span_proj``) score each token as the answer's start and end:

    start_logits_i = S · h_i,   end_logits_j = E · h_j
    loss = ½ (CE(start_logits, i*) + CE(end_logits, j*))
    answer = argmax_{i ≤ j < i + max_answer_tokens} start_logits_i + end_logits_j

Only passage tokens can be answers: ``span_mask`` (True = may be a start/end) removes the question,
the special tokens and the padding from both softmaxes and from the search. The encoder can start
from any BERT checkpoint (:meth:`BertForQuestionAnswering.from_encoder`; the recipe uses the
packaged all-MiniLM-L6-v2 through :mod:`attnlab.models.convert_hf`); the span head starts random.

Shape:
    input_ids ``(B, S)`` → start/end logits ``(B, S)``, attentions ``L × (B, H, S, S)``. Letters:
    ``B`` batch, ``S`` sequence length (question + passage + 3 special tokens), ``D`` width, ``H``
    heads, ``L`` layers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from ..viz import ShowsAttention
from .bert import BertConfig, BertModel, init_bert_weights

Tensor = torch.Tensor

__all__ = ["MODEL_TYPE", "BertForQuestionAnswering", "QAOutput", "SpanPrediction", "best_spans"]

MODEL_TYPE = "bert_qa"  # config.model_type of a question-answering BERT (checkpoint tag)


@dataclass
class QAOutput(ShowsAttention):  # attentions: AttentionMaps; shows itself in Jupyter
    start_logits: Tensor  # (B, S) answer-start scores; very negative outside span_mask
    end_logits: Tensor  # (B, S) answer-end scores; very negative outside span_mask
    loss: Tensor | None  # ½ (start CE + end CE) when positions are given
    attentions: list[Tensor] | None  # L × (B, H, S, S) encoder self-attention when need_weights


class SpanPrediction(NamedTuple):
    """The best span of each row: token positions (inclusive) and its score ``start + end logit``.

    Shape:
        start, end, score ``(B,)``
    """

    start: Tensor  # (B,) first answer token
    end: Tensor  # (B,) last answer token (inclusive)
    score: Tensor  # (B,) start_logits[start] + end_logits[end]


def best_spans(start_logits: Tensor, end_logits: Tensor, span_mask: Tensor, max_answer_tokens: int) -> SpanPrediction:
    """The span ``i ≤ j < i + max_answer_tokens`` inside ``span_mask`` maximising ``start_i + end_j``.

    Devlin et al. (2019, §4.2) score a span by ``S·h_i + E·h_j`` and take the best with ``j ≥ i``;
    the length cap (30 word pieces in their SQuAD code) keeps answers phrase-sized.

    Shape:
        start_logits, end_logits, span_mask ``(B, S)`` → :class:`SpanPrediction` of ``(B,)`` tensors
    """
    if max_answer_tokens < 1:
        raise ValueError(f"max_answer_tokens must be ≥ 1, got {max_answer_tokens}")
    if not bool(span_mask.any(dim=-1).all()):
        raise ValueError("a row of span_mask allows no position: there is no passage to answer from")
    B, S = start_logits.shape
    pair = start_logits.float().unsqueeze(2) + end_logits.float().unsqueeze(1)  # (B, S, 1) + (B, 1, S) -> (B, S, S)
    ones = torch.ones(S, S, dtype=torch.bool, device=start_logits.device)
    band = ones.triu().tril(max_answer_tokens - 1)  # (S, S) j ≥ i and j − i < max_answer_tokens
    allowed = band & span_mask.unsqueeze(2) & span_mask.unsqueeze(1)  # (B, S, S)
    pair = pair.masked_fill(~allowed, float("-inf"))
    score, flat = pair.view(B, S * S).max(dim=-1)  # (B,)
    return SpanPrediction(flat // S, flat % S, score)


class BertForQuestionAnswering(nn.Module):
    """BERT with a start/end span head. See the module docstring.

    Shape:
        input_ids ``(B, S)`` → start_logits, end_logits ``(B, S)``
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        if config.model_type != MODEL_TYPE:
            raise ValueError(f"a question-answering BERT has model_type {MODEL_TYPE!r}, got {config.model_type!r}")
        self.config = config
        self.bert = BertModel(config)
        self.span_proj = nn.Linear(config.d_model, 2)  # rows: the start vector S and the end vector E
        init_bert_weights(self.span_proj, config.init_std)

    @classmethod
    def from_encoder(cls, encoder: BertModel) -> BertForQuestionAnswering:
        """A QA model whose encoder is a copy of ``encoder`` (e.g. MiniLM); the span head is new.

        Shape:
            the encoder's weights are copied as they are.
        """
        config = dataclasses.replace(encoder.config, model_type=MODEL_TYPE)
        model = cls(config)
        model.bert.load_state_dict(encoder.state_dict())
        return model

    def forward(
        self,
        input_ids: Tensor,
        *,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        span_mask: Tensor | None = None,
        start_positions: Tensor | None = None,
        end_positions: Tensor | None = None,
        need_weights: bool = False,
    ) -> QAOutput:
        """Start/end logits (and the loss) for ``[CLS] question [SEP] passage [SEP]`` sequences.

        Args:
            input_ids, token_type_ids, attention_mask, need_weights: as :meth:`BertModel.forward`.
            span_mask: boolean, True where an answer may start or end (the passage tokens);
                default: every real token.
            start_positions, end_positions: the answer's first and last token positions (both
                inside ``span_mask``); give both for the loss.

        Shape:
            input_ids, token_type_ids, attention_mask, span_mask ``(B, S)``; positions ``(B,)`` →
            start_logits, end_logits ``(B, S)``; attentions ``L × (B, H, S, S)``
        """
        out = self.bert(
            input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask, need_weights=need_weights
        )
        if span_mask is None:
            span_mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids, dtype=torch.bool)
        if span_mask.shape != input_ids.shape or span_mask.dtype != torch.bool:
            raise ValueError(
                f"span_mask must be a boolean tensor of shape {tuple(input_ids.shape)}, "
                f"got {span_mask.dtype} {tuple(span_mask.shape)}"
            )
        logits = self.span_proj(out.hidden_states).float()  # (B, S, 2)
        logits = logits.masked_fill(~span_mask.unsqueeze(-1), torch.finfo(logits.dtype).min)
        start_logits, end_logits = logits.unbind(dim=-1)  # (B, S) each
        loss = None
        if (start_positions is None) != (end_positions is None):
            raise ValueError("give both start_positions and end_positions, or neither")
        if start_positions is not None:
            rows = torch.arange(input_ids.shape[0], device=input_ids.device)  # (B,)
            for name, pos in (("start_positions", start_positions), ("end_positions", end_positions)):
                if pos.shape != rows.shape:
                    raise ValueError(f"{name} must have shape ({input_ids.shape[0]},), got {tuple(pos.shape)}")
                if bool(((pos < 0) | (pos >= input_ids.shape[1])).any()) or not bool(span_mask[rows, pos].all()):
                    raise ValueError(f"{name} must point at passage tokens (inside span_mask)")
            loss = 0.5 * (F.cross_entropy(start_logits, start_positions) + F.cross_entropy(end_logits, end_positions))
        return QAOutput(start_logits, end_logits, loss, out.attentions)
