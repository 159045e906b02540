"""Sentence types of small_parallel_enja's Japanese: question, negation, past or other.

The shipped classifier ``ja-sentence-type`` (the lesson's attention-pooling exercise, §8) reads
a Japanese sentence and says whether it is a **question**, a **negation**, in the **past**, or
**other** (present or future, affirmative). Nobody labelled the corpus by hand. Each label is read
off the English translation of the sentence by the rules of :func:`english_sentence_type`:

- **question**: the English ends with ``?``;
- **negation**: it holds a negative word: ``not``, ``n't``/``'t`` (the corpus splits ``don 't``),
  ``never``, ``no``, ``nothing``, ``nobody``, ``none``, ``neither``, ``nor``, ``cannot``, ``nowhere``;
- **past**: it holds ``was``, ``were``, ``did``, ``had`` (``wasn 't`` too), a common irregular past
  form (``went``, ``saw``, …) or a word in ``-ed`` that does not follow a form of *be*, *have* or
  *get* (``is locked``, ``got tired`` are states, not past events);
- **other**: none of these.

A pair is **left out** where its English does not say clearly which one class it is: when two
rules fire (``did you go?`` is a question *and* past; ``i didn't go`` a negation *and* past), and
where English and Japanese tenses part ways: the present perfect (``have eaten``: Japanese writes
it with た), ``could``/``would`` (past or conditional), ``wish``/``used to``/``had better``/
``if … were`` (no past event), and polite requests (``could you …?``, ``… please?``). The rules are
simple and make mistakes (an irregular form counts as past wherever it stands, so ``this book is
sold here`` reads as past); the next check catches most of them.

A translation need not keep the form of its original: ``how about going to the movies?`` is
「映画に行きましょう。」, ``i don't like sad movies`` is 「悲しい映画は嫌いだ。」. So a pair is also
left out when its **Japanese disagrees** with the English label (:func:`japanese_forms`, read with
MeCab and the IPA dictionary, which attnlab already installs to score Japanese BLEU): a question,
negation or past pair is kept only when the Japanese has that form and none of the other two; an
"other" pair only when it has none of them. What is left is one label per sentence that both
languages agree on, so that each class has a marker a learner can look for in the Japanese: か
(or ？) for questions, ない/ません/ず for negation, た/だ for the past. The classifier never sees
MeCab's analysis: it reads characters, and learns for itself where to look.

``python -m attnlab.data.sentence_types CORPUS_DIR OUT_DIR`` writes ``train.tsv``, ``dev.tsv``
and ``test.tsv`` (``label<TAB>sentence``, the Japanese as raw text) for ``attnlab train classify``,
and ``test-english-only.tsv``: the test pairs labelled by the English rules alone (the Japanese
check skipped), to measure what the agreement rule leaves out.

Shape:
    no tensors: text lines in, labels and text lines out.
"""

from __future__ import annotations

import argparse
import sys
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from .corpus import read_parallel
from .enja import join_japanese

__all__ = [
    "LABELS",
    "SPLITS",
    "english_sentence_type",
    "japanese_markers",
    "japanese_forms",
    "sentence_type",
    "labelled_japanese",
    "labelled_split",
    "write_labelled_splits",
    "main",
]

#: The classes, in the order the lesson shows them.
LABELS = ("question", "negation", "past", "other")

#: small_parallel_enja's splits, as its files are named.
SPLITS = ("train", "dev", "test")

_NEGATIVE = frozenset("not 't n't never no nothing nobody none neither nor cannot nowhere".split())
_PAST_WORDS = frozenset(
    """was were did had wasn weren didn hadn went came saw took made got gave bought ate said told thought knew found left felt ran
    wrote met began broke brought caught sold sent spent stood understood won lost heard kept slept fell forgot
    drank drove flew grew hid became chose drew forgave froze held led lent meant paid rode rang rose sang sank
    sat shook shot spoke stole struck swam taught threw woke wore""".split()
)
# Past participles after a form of *have*: the present perfect.
_PARTICIPLES = frozenset(
    """been done seen gone known eaten taken given written spoken broken chosen driven forgotten gotten grown
    hidden ridden risen shaken stolen thrown worn begun drunk sung swum come become run made said told found
    left felt met brought caught sold sent spent stood understood won lost heard kept slept bought thought paid
    put read had got lived""".split()
)
_NOT_PAST_ED = frozenset("need red bed feed seed speed shed bleed breed weed hundred indeed".split())
_STATE_BEFORE_ED = frozenset("am is are 'm 're 's be been being was were get gets getting got".split())
_HAVE = frozenset("have has 've haven hasn".split())
# "could", "would": past or conditional; "wish", "better" ("had better"): no past event.
_UNCLEAR_TENSE = frozenset("could couldn would wouldn wish better".split())
_REQUESTS = ("could you", "would you", "will you", "won 't", "would you mind")


def _regular_past(tokens: list[str], i: int) -> bool:
    word = tokens[i]
    if not (word.endswith("ed") and len(word) > 3) or word in _NOT_PAST_ED:
        return False
    before = tokens[i - 1] if i else ""
    return before not in _STATE_BEFORE_ED and before not in _HAVE


def _present_perfect(tokens: list[str]) -> bool:
    for i, word in enumerate(tokens):
        if word in _HAVE:
            # "have eaten", "haven 't seen", "have you finished": a participle within three words.
            if any(w in _PARTICIPLES or (w.endswith("ed") and len(w) > 3) for w in tokens[i + 1 : i + 4]):
                return True
    return False


def english_sentence_type(line: str) -> str | None:
    """The class of a sentence pair, read off its English side (tokenized and lower-cased as
    small_parallel_enja's ``.en`` files are): one of :data:`LABELS`, or None when the pair is left
    out (see the module docstring).

    Shape:
        one line → one label or None.
    """
    tokens = line.lower().split()
    if not tokens:
        return None
    text = " ".join(tokens)
    if _UNCLEAR_TENSE.intersection(tokens) or "used to" in text or _present_perfect(tokens):
        return None
    found = set()
    if tokens[-1] == "?":
        if text.startswith(_REQUESTS) or "please" in tokens:
            return None
        found.add("question")
    if _NEGATIVE.intersection(tokens):
        found.add("negation")
    if any(w in _PAST_WORDS or _regular_past(tokens, i) for i, w in enumerate(tokens)):
        if "if" in tokens:  # "if i were you", "if he had come": no past event
            return None
        found.add("past")
    if len(found) > 1:
        return None
    return found.pop() if found else "other"


@lru_cache(maxsize=1)
def _tagger():
    try:
        import ipadic
        import MeCab
    except ImportError as e:  # installed with sacrebleu[ja], a declared dependency
        raise ImportError("reading Japanese forms needs MeCab: pip install 'sacrebleu[ja]'") from e
    return MeCab.Tagger(ipadic.MECAB_ARGS)


# Sentence-final particles that make a question: 〜か。〜の？〜かな。〜っけ。
_QUESTION_ENDINGS = frozenset("か の かな かしら っけ かい".split())


def japanese_markers(text: str) -> dict[str, list[int]]:
    """Which of question, negation and past the raw Japanese sentence ``text`` shows, and where:
    the positions (character indices into the NFC form of ``text``, as the character tokenizer
    reads it) of the morphemes that show it, found by MeCab with the IPA dictionary:

    - question: the sentence-final particle (か, の, かな, かしら, っけ, かい), or a ？;
    - negation: the auxiliary ない/ぬ/ん (ない, ません's ん, ず) or the adjective ない (無い);
    - past: the auxiliary た (だ in 読んだ), not たい (want to).

    Shape:
        one sentence of N characters → ``{form: positions}``, each position in ``[0, N)``; a form
        that does not occur is absent.
    """
    text = unicodedata.normalize("NFC", text)
    morphemes, at = [], 0
    for line in _tagger().parse(text).splitlines():
        if "\t" not in line:
            continue
        surface, features = line.split("\t", 1)
        start = text.find(surface, at)
        if start < 0:  # MeCab rewrote the surface (it never should): position unknown, skipped
            continue
        at = start + len(surface)
        morphemes.append((range(start, at), features.split(",")))
    markers: dict[str, list[int]] = {}
    words = [(span, f) for span, f in morphemes if f[0] != "記号"]
    if words and words[-1][1][0] == "助詞" and words[-1][1][6] in _QUESTION_ENDINGS:
        markers.setdefault("question", []).extend(words[-1][0])
    for span, f in morphemes:
        base = f[6] if len(f) > 6 else ""
        if f[0] == "記号" and text[span.start : span.stop] in ("？", "?"):
            markers.setdefault("question", []).extend(span)
        if f[0] == "助動詞" and f[4].startswith("特殊・タ") and f[4] != "特殊・タイ":
            markers.setdefault("past", []).extend(span)
        if (f[0] == "助動詞" and base in ("ない", "ぬ", "ん")) or (f[0] == "形容詞" and base in ("ない", "無い")):
            markers.setdefault("negation", []).extend(span)
    return {form: sorted(set(positions)) for form, positions in markers.items()}


def japanese_forms(text: str) -> set[str]:
    """Which of question, negation and past the raw Japanese sentence ``text`` shows
    (the keys of :func:`japanese_markers`).

    Shape:
        one sentence → a subset of ``{"question", "negation", "past"}``.
    """
    return set(japanese_markers(text))


def sentence_type(english: str, japanese: str) -> str | None:
    """The class of a pair (tokenized English, raw Japanese): the English label when the Japanese
    agrees with it (see the module docstring), else None.

    Shape:
        one pair → one label or None.
    """
    label = english_sentence_type(english)
    if label is None:
        return None
    forms = japanese_forms(japanese)
    agrees = not forms if label == "other" else forms == {label}
    return label if agrees else None


def labelled_japanese(
    en_file: str | Path, ja_file: str | Path, *, check_japanese: bool = True
) -> tuple[list[tuple[str, str]], Counter]:
    """``(label, Japanese sentence)`` for each kept pair of two line-aligned corpus files, the
    Japanese made raw text (its word-splitting spaces removed); and how many pairs each label
    got (``None``: left out). ``check_japanese=False`` keeps the English label without asking the
    Japanese (:func:`english_sentence_type` alone).

    Shape:
        N line pairs → at most N ``(label, text)`` pairs.
    """
    corpus = read_parallel(en_file, ja_file, on_empty="error")
    pairs, counts = [], Counter()
    for en, ja in zip(corpus.sources, corpus.targets):
        text = join_japanese(ja)
        label = sentence_type(en, text) if check_japanese else english_sentence_type(en)
        counts[label] += 1
        if label is not None:
            pairs.append((label, text))
    return pairs, counts


def _training_japanese(corpus_dir: Path) -> frozenset[str]:
    return frozenset(
        join_japanese(line) for line in read_parallel(corpus_dir / "train.en", corpus_dir / "train.ja").targets
    )


def labelled_split(
    corpus_dir: str | Path, split: str, *, check_japanese: bool = True
) -> tuple[list[tuple[str, str]], Counter]:
    """The ``(label, Japanese sentence)`` pairs of one split of small_parallel_enja (``train``,
    ``dev`` or ``test``) and their label counts. A dev or test sentence whose Japanese also occurs
    in the training split is left out (counted as ``"seen in train"``), so that scores on them are
    on sentences the model never read.

    Shape:
        N line pairs → at most N ``(label, text)`` pairs.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose from {list(SPLITS)}")
    corpus_dir = Path(corpus_dir)
    pairs, counts = labelled_japanese(
        corpus_dir / f"{split}.en", corpus_dir / f"{split}.ja", check_japanese=check_japanese
    )
    if split != "train":
        seen = _training_japanese(corpus_dir)
        kept = [(label, text) for label, text in pairs if text not in seen]
        counts["seen in train"] = len(pairs) - len(kept)
        pairs = kept
    return pairs, counts


def write_labelled_splits(corpus_dir: str | Path, out_dir: str | Path) -> dict[str, Counter]:
    """Write ``OUT_DIR/{train,dev,test}.tsv`` (``label<TAB>sentence``) from small_parallel_enja's
    ``{train,dev,test}.{en,ja}`` (:func:`labelled_split`), and ``test-english-only.tsv`` (the
    test pairs by the English rules alone); returns each file's label counts.

    Shape:
        no tensors.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = {}
    for split in SPLITS:
        pairs, counts[split] = labelled_split(corpus_dir, split)
        _write_tsv(out_dir / f"{split}.tsv", pairs)
    pairs, counts["test-english-only"] = labelled_split(corpus_dir, "test", check_japanese=False)
    _write_tsv(out_dir / "test-english-only.tsv", pairs)
    return counts


def _write_tsv(path: Path, pairs: list[tuple[str, str]]) -> None:
    path.write_text("".join(f"{label}\t{text}\n" for label, text in pairs), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m attnlab.data.sentence_types CORPUS_DIR OUT_DIR``."""
    parser = argparse.ArgumentParser(
        prog="python -m attnlab.data.sentence_types",
        description="Label small_parallel_enja's Japanese as question / negation / past / other from its English.",
    )
    parser.add_argument("corpus", type=Path, help="the small_parallel_enja folder ({train,dev,test}.{en,ja})")
    parser.add_argument("out", type=Path, help="where to write {train,dev,test}.tsv")
    args = parser.parse_args(argv)
    for split, counts in write_labelled_splits(args.corpus, args.out).items():
        shown = ", ".join(f"{k if k is not None else 'left out'} {v}" for k, v in counts.items())
        print(f"{split}: {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
