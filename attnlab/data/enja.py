"""From the pre-tokenized small_parallel_enja corpus to the raw text that users type.

small_parallel_enja (50k Tanaka-corpus pairs) ships tokenized: the Japanese is split into words by
spaces and the English is lower-cased and split Moses-style (``i can 't tell .``). A translator
trained on that form would expect users to type it. So the translation recipe trains on raw
text instead, made by two rules that :func:`to_raw` applies to each line:

- **Japanese**: the word-splitting spaces are removed (``私 は テニス 部員 で す 。`` →
  ``私はテニス部員です。``). Japanese is written without spaces; a space stays only between two
  Latin letters or digits (``CD 2 枚`` keeps ``CD 2``), where removing it would join two words.
- **English**: the tokens are put back together by sacremoses' Moses detokenizer (the
  detokenizer of the Moses toolkit, as sacreBLEU and fairseq use it): ``i can 't tell .`` →
  ``i can't tell.``. The corpus's lower-casing is not undone here: a model trained on this text
  alone reads and writes lower-case English, and :func:`normalize_input` lower-cases what a user
  types for it. The shipped translators train on a cased mix instead (:mod:`.enja_mix` truecases
  this corpus's English).

The test split is normalised the same way before scoring, so BLEU compares raw text with raw text
(sacreBLEU's ``13a`` tokenizer for English, ``ja-mecab`` for Japanese, as WAT scores Japanese).
"""

from __future__ import annotations

import re
from functools import lru_cache

#: The languages :func:`to_raw` and :func:`normalize_input` know.
LANGUAGES = ("en", "ja")

# A space is kept only between two ASCII letters or digits; every other space in a Japanese line
# is a word boundary of the tokenized corpus.
_JA_SPACE = re.compile(r"(?<![A-Za-z0-9]) +| +(?![A-Za-z0-9])")


def _check_lang(lang: str) -> None:
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; choose from {list(LANGUAGES)}")


def join_japanese(line: str) -> str:
    """Remove the word-splitting spaces of a tokenized Japanese line (not those between Latin words)."""
    return _JA_SPACE.sub("", line.strip())


@lru_cache(maxsize=1)
def _moses_detokenizer():
    try:
        from sacremoses import MosesDetokenizer
    except ImportError as e:  # a declared dependency; a clear message if an install lacks it
        raise ImportError("detokenizing English needs sacremoses: pip install sacremoses") from e
    return MosesDetokenizer(lang="en")


def detokenize_english(line: str) -> str:
    """Put a Moses-tokenized English line back together (``i 'm here .`` → ``i'm here.``)."""
    return _moses_detokenizer().detokenize(line.split())


def to_raw(line: str, lang: str) -> str:
    """One tokenized corpus line as raw text in ``lang`` (``"ja"`` or ``"en"``); see the module docstring."""
    _check_lang(lang)
    return join_japanese(line) if lang == "ja" else detokenize_english(line)


def normalize_input(text: str, lang: str, lowercase: bool = True) -> str:
    """What the translator reads for a user's sentence in ``lang``: Japanese without
    word-splitting spaces; English with single spaces, lower-cased when ``lowercase`` (a model
    trained on this corpus's lower-cased English; the shipped translators read cased text and
    pass False); both stripped."""
    _check_lang(lang)
    if lang == "ja":
        return join_japanese(text)
    return " ".join((text.lower() if lowercase else text).split())
