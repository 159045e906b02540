"""A paragraph into sentences and back: what lets a sentence translator take whole texts.

The translators are trained on sentences and on short runs of two or three (data/enja_mix.py).
Given a page of text, a model of that size drops or repeats clauses, so :func:`split_text` cuts
the text into lines and each line into sentences, the sentences are translated as one batch,
and :func:`join_text` puts the translations back where their sources were: the same line and
paragraph breaks, sentences of one line joined as the target language writes them (English with
a space, Japanese without).

The splitters are maintained libraries, chosen by ``benchmarks/sentence_split.py`` (its table is
in docs/translators.md): ``ja-sentence-segmenter`` for Japanese (rule-based: it ends a sentence
at 。！？ but not inside 「…」), ``pysbd`` for English (rules for abbreviations such as "Mr." and
"p.m." and for quoted speech).

Shape:
    no tensors: a text in, ``Segment`` pieces out; translated pieces in, a text out.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Segment", "split_sentences", "split_japanese", "split_english", "split_text", "join_text"]

_LANGS = ("ja", "en")


@dataclass(frozen=True)
class Segment:
    """One piece of a text: a sentence to translate, or the whitespace between sentences."""

    text: str  # the sentence (stripped) or the separator kept as it was ("\n", "\n\n", …)
    is_sentence: bool  # True: translate it; False: copy it


@functools.lru_cache(maxsize=1)
def _japanese_pipeline():
    try:
        from ja_sentence_segmenter.common.pipeline import make_pipeline
        from ja_sentence_segmenter.split.simple_splitter import split_punctuation
    except ImportError as e:  # a declared dependency; a clear message if an install lacks it
        raise ImportError(
            "splitting Japanese text needs ja-sentence-segmenter: pip install ja-sentence-segmenter"
        ) from e
    # Full-width and ASCII sentence ends; its splitter already keeps 「…。」 whole.
    return make_pipeline(functools.partial(split_punctuation, punctuations=r"。!?！？"))


@functools.lru_cache(maxsize=1)
def _english_segmenter():
    try:
        import pysbd
    except ImportError as e:
        raise ImportError("splitting English text needs pysbd: pip install pysbd") from e
    return pysbd.Segmenter(language="en", clean=False)


def split_japanese(line: str) -> list[str]:
    """The sentences of one line of Japanese (ja-sentence-segmenter), stripped, none empty."""
    return [s.strip() for s in _japanese_pipeline()(line) if s.strip()]


def split_english(line: str) -> list[str]:
    """The sentences of one line of English (pysbd), stripped, none empty."""
    return [s.strip() for s in _english_segmenter().segment(line) if s.strip()]


def split_sentences(line: str, lang: str) -> list[str]:
    """The sentences of one line in ``lang`` (``"ja"`` or ``"en"``)."""
    if lang not in _LANGS:
        raise ValueError(f"unknown language {lang!r}; choose from {list(_LANGS)}")
    return split_japanese(line) if lang == "ja" else split_english(line)


def split_text(text: str, lang: str) -> list[Segment]:
    """``text`` as sentences and the line breaks between them, in order.

    Every line break (and blank line) is kept as a separator segment, so that :func:`join_text`
    gives back a text of the same shape. Spaces at the ends of lines are dropped.
    """
    segments: list[Segment] = []
    for piece in re.split(r"(\n[ \t\r\n]*)", text):
        if piece.startswith("\n"):
            segments.append(Segment("\n" * piece.count("\n"), False))
        elif piece.strip():
            segments.extend(Segment(s, True) for s in split_sentences(piece.strip(), lang))
    return segments


def join_text(segments: Sequence[Segment], translations: Sequence[str], lang: str) -> str:
    """Put ``translations`` (one per sentence segment, in order) back into ``segments``' layout.

    Sentences of one line are joined as ``lang`` writes them: with a space in English, without
    in Japanese.

    Raises:
        ValueError: not one translation per sentence.
    """
    n = sum(s.is_sentence for s in segments)
    if n != len(translations):
        raise ValueError(f"{len(translations)} translations for {n} sentences")
    joiner = "" if lang == "ja" else " "
    out, line = [], []
    it = iter(translations)
    for seg in segments:
        if seg.is_sentence:
            line.append(next(it).strip())
        else:
            out.append(joiner.join(line))
            out.append(seg.text)
            line = []
    out.append(joiner.join(line))
    return "".join(out)
