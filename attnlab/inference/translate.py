"""Translating with a trained encoder–decoder: :class:`Translator` (text in, text and attention out).

The translation recipe (:mod:`attnlab.recipes.translate`) trains and loads translators; this
module uses one. It knows the model only through the decoding protocol of :mod:`attnlab.decode`
and its tokenizers, so the CLI, the explorer and the ONNX export share one way to translate.

Shape letters: ``B`` sentences, ``S`` source tokens, ``T`` target tokens, ``L`` layers, ``H`` heads.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from ..accel import precision as inference_precision
from ..data import enja, sentences
from ..decode import Hypothesis, beam_search, check_beam, greedy_decode
from ..metrics import bleu, chrf, exact_match, repeated_span

Tensor = torch.Tensor

__all__ = ["Translation", "Translator", "cut_loops", "output_limit"]


@dataclass
class Translation:
    source: str  # the input sentence
    text: str  # the detokenized translation
    src_tokens: list[str]  # source token labels (heatmap columns)
    tgt_tokens: list[str]  # generated token labels incl. the end token (heatmap rows)
    cross_attention: Tensor | None = None  # (L, H, T, S) for the chosen hypothesis, if asked
    # A loop the decoder fell into (an n-gram three or more times in a row, metrics.repeated_span)
    # was cut to one occurrence in ``text``; the tokens and attention show what was decoded.
    loop_cut: bool = False

    def _repr_html_(self) -> str:
        """Jupyter: the sentence and its translation, then the source–target (cross-) attention of
        the last layer (averaged over its heads) with the tokens on the axes; the words in
        ``attnlab.viz.display_options.lang`` (the lesson's terms in Japanese)."""
        from html import escape

        from ..viz import attention_html, display_options

        ja = display_options.lang == "ja"
        head = f"<div>{escape(self.source)} → <b>{escape(self.text)}</b></div>"
        if self.cross_attention is None:
            hint = (
                "（translate(..., return_attention=True) でソース・ターゲット注意が付きます）"
                if ja
                else "(translate(..., return_attention=True) adds the cross-attention)"
            )
            return head + f"<div>{hint}</div>"
        L = self.cross_attention.shape[0]
        caption = (  # layers counted from 1, as the lesson counts them
            f"ソース・ターゲット注意（デコーダの最後の層: {L} 層中の第 {L} 層）、ヘッドの平均"
            if ja
            else f"cross-attention (the decoder's last layer: layer {L} of {L}), mean over heads"
        )
        weights = self.cross_attention[-1].float().mean(0)  # (H, T, S) -> (T, S)
        return head + attention_html(weights, self.src_tokens, self.tgt_tokens, caption=caption)


class Translator:
    """A trained encoder–decoder with its tokenizers: text in, text (and attention) out."""

    def __init__(
        self,
        model: nn.Module,
        src_tok,
        tgt_tok,
        *,
        bleu_tokenize: str = "13a",
        src_lang: str | None = None,
        tgt_lang: str | None = None,
        lowercase: bool = True,
        precision: str | None = None,
        bf16_allowed: bool = True,
    ) -> None:
        self.model, self.src_tok, self.tgt_tok = model, src_tok, tgt_tok
        self.bleu_tokenize = bleu_tokenize
        # The precision asked for ("auto", "fp32", "bf16"; None: the model's as it is), resolved on
        # the first translation (resolve_precision): the one used, and why.
        self.precision = None if precision is None else inference_precision.check(precision)
        self.precision_used: str | None = None
        self.precision_reason = ""
        self._bf16_allowed = bf16_allowed
        # With a source language, a user's sentence is normalised as the training text was
        # (data/enja.py: Japanese without word-splitting spaces; English lower-cased when the
        # training English was).
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self.lowercase = lowercase

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def resolve_precision(self) -> str:
        """The precision this translator decodes in (``"fp32"`` or ``"bf16"``), decided once: the
        one asked for, or for ``"auto"`` bf16 only on a CPU with native bf16 where the model's card
        allows it and a few beam-search steps (beam 4, one 12-token sentence) are measurably faster
        in bf16 (:func:`attnlab.accel.precision.resolve`, cached per machine and model shape). The
        model is then a bf16 copy of the one given (which stays as it was). Translating calls it
        first; timed code calls it before timing."""
        if self.precision_used is not None:
            return self.precision_used
        if self.precision is None:  # the model's own precision
            bf16 = next(self.model.parameters()).dtype == torch.bfloat16
            self.precision_used, self.precision_reason = ("bf16" if bf16 else "fp32"), "the model's own"
            return self.precision_used
        copies: dict[torch.dtype, nn.Module] = {}

        def model_in(dtype: torch.dtype) -> nn.Module:
            if next(self.model.parameters()).dtype == dtype:
                return self.model
            if dtype not in copies:
                # Ordinary tensors even when called under inference_mode: the kernels' caches key
                # the parameters by their version counters, which inference tensors lack.
                with torch.inference_mode(False):
                    copies[dtype] = copy.deepcopy(self.model).to(dtype).eval()
            return copies[dtype]

        V = self.tgt_tok.vocab_size
        src = (torch.arange(12) % max(self.src_tok.vocab_size - 4, 1) + 4).unsqueeze(0).to(self.device)  # (1, 12)

        def run(precision: str) -> None:
            with torch.no_grad():  # an end token that never comes: always 12 steps
                beam_search(model_in(inference_precision.dtype_of(precision)), src, beam_size=4, alpha=0.6,
                            bos_id=self.tgt_tok.bos_id, eos_id=V, pad_id=self.tgt_tok.pad_id, max_len=12)  # fmt: skip

        chosen, why = inference_precision.resolve(
            self.precision, device=self.device, model=self.model, run=run, allowed=self._bf16_allowed
        )
        self.model = model_in(inference_precision.dtype_of(chosen))
        self.precision_used, self.precision_reason = chosen, why
        return chosen

    @torch.no_grad()
    def translate(
        self,
        texts: Sequence[str],
        *,
        beam_size: int = 1,
        alpha: float = 0.6,
        max_len: int | None = None,
        return_attention: bool = False,
        batch_size: int = 64,
    ) -> list[Translation]:
        """Translate sentences (batched, sorted by length for little padding).

        Raises:
            ValueError: a sentence with no tokens, or a beam or ``alpha`` that
                :func:`attnlab.decode.check_beam` refuses (checked before any decoding).
        """
        check_beam(beam_size, alpha, self.tgt_tok.vocab_size)
        inputs = (
            [enja.normalize_input(x, self.src_lang, self.lowercase) for x in texts] if self.src_lang else list(texts)
        )
        encoded = self.src_tok.encode_batch(inputs)
        for text, ids in zip(texts, encoded):
            if not ids:
                raise ValueError(f"cannot translate {text!r}: it has no tokens")
        # Bad input is refused first; then the precision is settled (a probe may run once).
        self.resolve_precision()
        was_training = self.model.training
        if was_training:  # (a walk over every module: a tenth of a short sentence's latency)
            self.model.eval()
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
        results: list[Translation | None] = [None] * len(texts)
        t = self.tgt_tok
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            S = max(len(encoded[i]) for i in idx)
            src = torch.full((len(idx), S), self.src_tok.pad_id, dtype=torch.long)
            for row, i in enumerate(idx):
                src[row, : len(encoded[i])] = torch.tensor(encoded[i])
            src = src.to(self.device)  # (B, S)
            limit = max_len or output_limit(S, getattr(self.model.config, "max_len", 512))
            kw = dict(
                bos_id=t.bos_id, eos_id=t.eos_id, pad_id=t.pad_id, max_len=limit, return_attention=return_attention
            )
            hyps: list[Hypothesis] = (
                greedy_decode(self.model, src, **kw)
                if beam_size == 1
                else beam_search(self.model, src, beam_size=beam_size, alpha=alpha, **kw)
            )
            for i, h in zip(idx, hyps):
                labels = [t.id_to_token(x) for x in h.tokens] + [t.id_to_token(t.eos_id)]
                src_labels = [self.src_tok.id_to_token(x) for x in encoded[i]]
                cross = h.cross_attention
                if cross is not None:
                    labels = labels[: cross.shape[2]]
                kept = cut_loops(h.tokens)
                results[i] = Translation(
                    texts[i], t.decode(kept), src_labels, labels, cross, loop_cut=len(kept) < len(h.tokens)
                )
        if was_training:
            self.model.train()
        return results  # type: ignore[return-value]

    def translate_text(
        self, texts: Sequence[str], *, beam_size: int = 1, alpha: float = 0.6, batch_size: int = 64
    ) -> list[str]:
        """Translate whole texts: paragraphs, several sentences, line breaks.

        Each text is cut into lines and sentences (:func:`attnlab.data.sentences.split_text`, for
        the model's source language), every sentence of every text is translated in one
        :meth:`translate` call (batched), and the translations are put back with the same line and
        paragraph breaks. A model without a source language (``src_lang``) takes each text whole.

        Raises:
            ValueError: as :meth:`translate`.
        """
        if self.src_lang is None or self.tgt_lang is None:
            return [r.text for r in self.translate(texts, beam_size=beam_size, alpha=alpha, batch_size=batch_size)]
        layouts = [sentences.split_text(text, self.src_lang) for text in texts]
        flat = [seg.text for layout in layouts for seg in layout if seg.is_sentence]
        done = self.translate(flat, beam_size=beam_size, alpha=alpha, batch_size=batch_size) if flat else []
        out, k = [], 0
        for layout in layouts:
            n = sum(seg.is_sentence for seg in layout)
            out.append(sentences.join_text(layout, [r.text for r in done[k : k + n]], self.tgt_lang))
            k += n
        return out

    def evaluate(self, sources: Sequence[str], references: Sequence[str], *, beam_size: int = 4) -> dict[str, float]:
        """BLEU, chrF and exact match of the translations of ``sources`` against ``references``."""
        if len(sources) != len(references):
            raise ValueError(f"{len(sources)} sources but {len(references)} references")
        hyps = [t.text for t in self.translate(sources, beam_size=beam_size)]
        return {
            "bleu": bleu(hyps, references, tokenize=self.bleu_tokenize),
            "chrf": chrf(hyps, references),
            "exact_match": exact_match(hyps, references),
            "n": len(sources),
        }


def output_limit(src_tokens: int, max_len: int = 512) -> int:
    """The most tokens a translation of a ``src_tokens``-token sentence may take: twice the source
    and ten more, within the model's positions. Tied to the input so that a decoder that never
    emits its end token stops near the source's length, not at the model's limit.

    Shape:
        two counts → a count
    """
    return min(2 * src_tokens + 10, max_len - 1)


def cut_loops(tokens: Sequence[int], *, times: int = 3, max_n: int = 4) -> list[int]:
    """``tokens`` with every loop (an n-gram repeated ``times`` or more times in a row,
    :func:`attnlab.metrics.repeated_span`) cut to one occurrence: the guard against a decoder
    that repeats itself once it has lost its place in the source.

    Shape:
        ``T`` ids → ``T' ≤ T`` ids
    """
    tokens = list(tokens)
    while (span := repeated_span(tokens, times=times, max_n=max_n)) is not None:
        start, n, count = span
        tokens = tokens[: start + n] + tokens[start + count * n :]
    return tokens
