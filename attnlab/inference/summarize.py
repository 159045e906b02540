"""Summarising with a trained pointer-generator: :class:`Summarizer` (documents in, summaries,
attention and copy probabilities out).

The summarization recipe (:mod:`attnlab.recipes.summarize`) trains and loads summarizers; this
module uses one, and owns how a document becomes ids (:func:`encode_example`), which training
shares.

Shape:
    documents → summaries (strings); attention ``(T, S)`` per summary. ``S`` document words,
    ``T`` summary words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..data import batching
from ..data.tokenizers import WordVocab
from ..decode import beam_search, check_beam, greedy_decode
from ..metrics import rouge
from ..models.pointer_generator import PointerGenerator

Tensor = torch.Tensor

__all__ = ["Encoded", "Summarizer", "Summary", "encode_example"]


@dataclass
class Encoded:
    """A document (and its summary) in the word vocabulary extended by the document's own words."""

    src: list[int]  # document ids in the extended vocabulary (cut to max_src_len)
    tgt: list[int]  # summary ids (extended where copied; cut to max_tgt_len for training)
    oovs: list[str]  # the document's out-of-vocabulary words, by extended id


def encode_example(vocab: WordVocab, document: str, summary: str | None, max_src: int, max_tgt: int | None) -> Encoded:
    """``document`` (cut to ``max_src`` words) and ``summary`` (cut to ``max_tgt``; None: none) as ids of
    ``vocab`` extended by the document's out-of-vocabulary words, which the summary may copy.

    Shape:
        two strings → ``S`` source ids and ``T`` target ids
    """
    words = vocab.split(document)[:max_src]
    if not words:
        raise ValueError(f"document {document[:60]!r} has no words")
    src, oovs = vocab.encode_source(words)
    tgt = [] if summary is None else vocab.encode_target(vocab.split(summary)[:max_tgt], oovs)
    return Encoded(src, tgt, oovs)


@dataclass
class Summary:
    document: str  # the input document
    text: str  # the summary: its words joined by spaces
    src_tokens: list[str]  # the document words the model read (heatmap columns)
    tokens: list[str]  # the summary words followed by [EOS] (heatmap rows)
    p_gen: list[float] | None = None  # per row of `tokens`: probability of generating (1 − p_gen = copying)
    attention: Tensor | None = None  # (T, S) attention of each summary word over the document words

    def _repr_html_(self) -> str:
        """Jupyter: :meth:`html` in ``attnlab.viz.display_options.lang``."""
        return self.html()

    def html(self, lang: str | None = None) -> str:
        """The summary, then its attention over the document (rows: summary words with their
        copy probability 1 − p_gen), labelled in ``lang`` ("en" or "ja"; default:
        ``attnlab.viz.display_options.lang``)."""
        from html import escape

        from ..viz import attention_html, display_options, labels_in

        lang = display_options.lang if lang is None else lang
        labels_in(lang)  # a ValueError naming the languages for any other
        head = f"<div><b>{escape(self.text)}</b></div>"
        if self.attention is None or self.p_gen is None:
            note = {"en": "(summarize(..., return_attention=True) adds the attention)",
                    "ja": "（summarize(..., return_attention=True) で注意の重みが付きます）"}[lang]  # fmt: skip
            return head + f"<div>{escape(note)}</div>"
        copy, caption = {"en": ("copy", "attention over the document"),
                         "ja": ("コピー", "文書への注意の重み（行の括弧内はコピーの確率 1 − p_gen）")}[lang]  # fmt: skip
        rows = [f"{w} ({copy} {1 - p:.2f})" for w, p in zip(self.tokens, self.p_gen)]
        return head + attention_html(self.attention, self.src_tokens, rows, caption=caption, lang=lang)


class Summarizer:
    """A trained pointer-generator with its vocabulary: documents in, summaries (and attention) out."""

    def __init__(
        self, model: PointerGenerator, vocab: WordVocab, *, max_src_len: int, max_summary_len: int, beam_size: int = 4
    ) -> None:
        self.model, self.vocab = model, vocab
        self.max_src_len, self.max_summary_len, self.beam_size = max_src_len, max_summary_len, beam_size

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def normalise(self, text: str) -> str:
        """``text`` in the tokenization the summaries come out in (for ROUGE against references).

        Shape:
            str → str
        """
        return " ".join(self.vocab.split(text))

    @torch.no_grad()
    def summarize(
        self,
        documents: Sequence[str],
        *,
        beam_size: int | None = None,
        max_len: int | None = None,
        return_attention: bool = False,
        batch_size: int = 32,
    ) -> list[Summary]:
        """Summarise documents (batched by length); with ``return_attention`` also p_gen and attention.

        The attention and ``p_gen`` come from one teacher-forced pass over ``[BOS] + summary``,
        which replays exactly the decoder states (and coverage) of the search.

        Shape:
            N documents → N summaries; attention ``(T, S)`` each
        """
        if isinstance(documents, str):
            raise TypeError("summarize takes a list of documents, not one string")
        beam = self.beam_size if beam_size is None else beam_size
        check_beam(beam, vocab_size=self.vocab.vocab_size)
        limit = max_len or self.max_summary_len
        v = self.vocab
        was_training = self.model.training
        self.model.eval()
        encoded = [encode_example(v, d, None, self.max_src_len, None) for d in documents]
        order = sorted(range(len(documents)), key=lambda i: len(encoded[i].src))
        results: list[Summary | None] = [None] * len(documents)
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            batch = batching.collate_pairs(
                [(encoded[i].src, []) for i in idx], pad_id=v.pad_id, bos_id=v.bos_id, eos_id=v.eos_id
            ).to(self.device)
            kw = dict(bos_id=v.bos_id, eos_id=v.eos_id, pad_id=v.pad_id, max_len=limit, src_mask=batch.src_mask)
            hyps = (
                greedy_decode(self.model, batch.src, **kw)
                if beam == 1
                else beam_search(self.model, batch.src, beam_size=beam, **kw)
            )
            for row, (i, h) in enumerate(zip(idx, hyps)):
                e = encoded[i]
                words = v.decode(h.tokens, e.oovs)
                src_words = v.decode(e.src, e.oovs)
                summary = Summary(documents[i], " ".join(words), src_words, words + [v.SPECIALS[v.eos_id]])
                if return_attention:
                    src = batch.src[row : row + 1, : len(e.src)]  # (1, S)
                    tgt_in = torch.tensor([[v.bos_id, *h.tokens]], device=self.device)  # (1, T)
                    out = self.model(src, tgt_in, need_weights=True)
                    summary.attention = out.attentions["cross"][0][0, 0].float().cpu()  # (T, S)
                    summary.p_gen = out.p_gen[0].tolist()
                    summary.tokens = summary.tokens[: tgt_in.shape[1]]  # no [EOS] row if max_len cut it
                results[i] = summary
        self.model.train(was_training)
        return results  # type: ignore[return-value]

    def evaluate(self, pairs: Sequence[tuple[str, str]], *, beam_size: int | None = None) -> dict[str, float]:
        """ROUGE-1/2/L F1 (0–1) of the summaries of ``(document, reference)`` pairs.

        Shape:
            N pairs → ``{"rouge1", "rouge2", "rougeL", "n"}``
        """
        if not pairs:
            raise ValueError("nothing to evaluate: no pairs")
        hyps = [s.text for s in self.summarize([d for d, _ in pairs], beam_size=beam_size)]
        return {**rouge(hyps, [self.normalise(r) for _, r in pairs]), "n": len(pairs)}
