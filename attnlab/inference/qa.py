"""Answering questions with a trained span-head BERT: :class:`QuestionAnswerer` ((question, passage) in,
answer span and attention out).

The question-answering recipe (:mod:`attnlab.recipes.qa`) trains and loads answerers; this module
uses one. :class:`QAReading` holds what it needs of the training settings: how a passage is cut
into windows and how long an answer may be.

Shape:
    attention ``(L, H, Q, C)`` per answer. Letters: ``S`` tokens of a window, ``Q`` question
    tokens, ``C`` passage tokens of a window, ``L`` layers, ``H`` heads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..data.squad import QAExample, QAWindow, collate_windows, question_windows, window_batches
from ..data.tokenizers import PretrainedTokenizer
from ..metrics import squad_scores
from ..models.config import check_fields
from ..models.qa import BertForQuestionAnswering, best_spans

Tensor = torch.Tensor

__all__ = ["Answer", "QAReading", "QuestionAnswerer"]


@dataclass
class QAReading:
    """How an answerer reads a passage: the window and answer-length settings of its training
    (a QA checkpoint carries the first four; ``attnlab.recipes.qa.QASetup`` documents them)."""

    max_length: int  # tokens per window, [CLS] question [SEP] passage [SEP]
    doc_stride: int  # passage tokens between the starts of consecutive windows
    max_query_tokens: int  # questions are cut to this many tokens
    max_answer_tokens: int  # longest predicted answer in tokens
    max_tokens: int = 4096  # padded tokens per batch of windows

    def __post_init__(self) -> None:
        check_fields(self, positive=("max_length", "doc_stride", "max_query_tokens", "max_answer_tokens", "max_tokens"))


@dataclass
class Answer:
    question: str
    context: str
    text: str  # the answer: context[start:end]
    start: int  # character offset of the answer in the context
    end: int  # one past its last character
    score: float  # start logit + end logit of the chosen span
    question_tokens: list[str] | None = None  # rows of `attention`
    context_tokens: list[str] | None = None  # columns of `attention`: the passage tokens of the best window
    attention: Tensor | None = None  # (L, H, Q, C) how much each question token attends to each passage token

    def _repr_html_(self) -> str:
        """Jupyter: :meth:`html` in ``attnlab.viz.display_options.lang``."""
        return self.html()

    def html(self, lang: str | None = None) -> str:
        """The question and the answer, then where in the passage each question token looks: the
        last layer's question → passage attention, averaged over its heads, each row
        renormalised over the passage (most of a row's weight goes to the special tokens and the
        question itself, which would leave the passage columns nearly blank); labelled in
        ``lang`` ("en" or "ja"; default: ``attnlab.viz.display_options.lang``)."""
        from html import escape

        from ..viz import attention_html, display_options, labels_in

        lang = display_options.lang if lang is None else lang
        labels_in(lang)  # a ValueError naming the languages for any other

        score = {"en": "score", "ja": "スコア"}[lang]
        head = f"<div>{escape(self.question)} → <b>{escape(self.text)}</b> ({score} {self.score:.2f})</div>"
        if self.attention is None:
            return head
        weights = self.attention[-1].float().mean(0)  # (H, Q, C) -> (Q, C)
        share = weights.sum(-1, keepdim=True)  # (Q, 1): the part of each row that reaches the passage
        weights = weights / share.clamp_min(1e-12)
        caption = {
            "en": "question → passage attention, last layer, mean over heads, each row renormalised over the passage "
            f"(it holds {100 * share.mean():.0f}% of a row's weight on average)",
            "ja": "質問 → 本文の注意の重み（最後の層、ヘッドの平均、各行を本文の中での割合に直したもの。"
            f"本文に届くのは行の重みの平均 {100 * share.mean():.0f}%）",
        }[lang]
        return head + attention_html(weights, self.context_tokens, self.question_tokens, caption=caption, lang=lang)


class QuestionAnswerer:
    """A trained span-head BERT with its tokenizer: (question, passage) in, answer span (and attention) out."""

    def __init__(self, model: BertForQuestionAnswering, tokenizer: PretrainedTokenizer, settings: dict) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.setup = QAReading(**settings)  # the window and answer-length settings the model was trained with

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @torch.no_grad()
    def answer(
        self, questions: Sequence[str], contexts: Sequence[str], *, return_attention: bool = False
    ) -> list[Answer]:
        """Answer each question from its passage; with ``return_attention`` also the question × passage attention.

        Shape:
            N questions and N passages → N answers; attention ``(L, H, Q, C)`` each
        """
        if isinstance(questions, str) or isinstance(contexts, str):
            raise TypeError("answer takes lists of questions and contexts, not single strings")
        if len(questions) != len(contexts):
            raise ValueError(f"{len(questions)} questions but {len(contexts)} contexts")
        was_training = self.model.training
        self.model.eval()
        windows = [
            w
            for i, (q, c) in enumerate(zip(questions, contexts))
            for w in question_windows(self.tokenizer, self.setup, i, q, c)
        ]
        best: list[tuple[float, QAWindow, int, int] | None] = [None] * len(questions)
        for group in window_batches(windows, self.setup.max_tokens, shuffle=False):
            batch = collate_windows([windows[i] for i in group], self.tokenizer.pad_id).to(self.device)
            out = self.model(
                batch.input_ids,
                token_type_ids=batch.token_type_ids,
                attention_mask=batch.attention_mask,
                span_mask=batch.span_mask,
            )
            spans = best_spans(out.start_logits, out.end_logits, batch.span_mask, self.setup.max_answer_tokens)
            for row, i in enumerate(group):
                w, score = windows[i], float(spans.score[row])
                if best[w.example] is None or score > best[w.example][0]:
                    best[w.example] = (score, w, int(spans.start[row]), int(spans.end[row]))
        answers = []
        for i, (score, w, s, e) in enumerate(best):
            a, b = w.offsets[s - w.context_start][0], w.offsets[e - w.context_start][1]
            answer = Answer(questions[i], contexts[i], contexts[i][a:b], a, b, score)
            if return_attention:
                self._attach_attention(answer, w)
            answers.append(answer)
        self.model.train(was_training)
        return answers

    @torch.no_grad()
    def window_attention(self, window: QAWindow) -> Tensor:
        """Every layer's and head's self-attention over one window ``[CLS] question [SEP] passage [SEP]``.

        Shape:
            one window of S tokens → ``(L, H, S, S)``
        """
        batch = collate_windows([window], self.tokenizer.pad_id).to(self.device)
        out = self.model(
            batch.input_ids,
            token_type_ids=batch.token_type_ids,
            attention_mask=batch.attention_mask,
            span_mask=batch.span_mask,
            need_weights=True,
        )
        return torch.stack([w[0] for w in out.attentions]).float().cpu()  # L × (H, S, S) -> (L, H, S, S)

    def _attach_attention(self, answer: Answer, window: QAWindow) -> None:
        maps = self.window_attention(window)  # (L, H, S, S)
        q = slice(1, 1 + window.n_question)
        c = slice(window.context_start, window.context_start + len(window.offsets))
        answer.attention = maps[:, :, q, c]  # (L, H, Q, C)
        ids = window.input_ids
        answer.question_tokens = [self.tokenizer.id_to_token(t) for t in ids[q]]
        answer.context_tokens = [self.tokenizer.id_to_token(t) for t in ids[c]]

    def evaluate(self, examples: Sequence[QAExample]) -> dict[str, float]:
        """Exact match and F1 (0–1, SQuAD v1.1 rules) on ``examples``.

        Shape:
            N examples → ``{"exact_match", "f1", "n"}``
        """
        if not examples:
            raise ValueError("nothing to evaluate: no examples")
        predictions = self.answer([ex.question for ex in examples], [ex.context for ex in examples])
        scores = squad_scores([p.text for p in predictions], [[t for t, _ in ex.answers] for ex in examples])
        return {**scores, "n": len(examples)}
