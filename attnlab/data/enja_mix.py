"""The ja⇄en translators' data: Tatoeba and small_parallel_enja as one raw, cased corpus.

Two corpora feed the shipped ``ja-en`` and ``en-ja`` translators:

- **tatoeba-jpn** (``train.{en,ja}``): pairs as people write them, cased English with its
  punctuation, Japanese without spaces, 1 to 40+ words, sometimes several sentences;
- **small_parallel_enja** (``{train,dev,test}.{en,ja}``): short pairs (4–16 words), tokenized,
  English lower-cased. :func:`attnlab.data.enja.to_raw` makes them raw text again, and
  :class:`TrueCaser` gives its English back its capitals.

**Why truecase rather than lower-case everything.** A learner types "The cat is chasing the dog."
and expects the same form back. Lower-casing the model's English (as the first translators did)
makes every output start with "i" and "tom"; keeping small_parallel_enja lower-cased beside a
cased Tatoeba would teach the model two spellings of one sentence. Both corpora come from the
Tanaka corpus, so their vocabularies overlap: a word's usual casing in Tatoeba's English (its
form when it is not the first word of a sentence) is the right casing for small_parallel_enja's
copy of it (``i`` → ``I``, ``tom`` → ``Tom``, ``japan`` → ``Japan``), and a sentence's first
letter is capitalised.

**Splits that share no sentence.** The two corpora share sentences (the same pair appears raw in
one and tokenized in the other), and Tatoeba repeats an English sentence with several Japanese
ones. A score is only worth something on sentences the model never saw, so :func:`build` draws
a development and a test split from Tatoeba and then removes from training every pair that has
either side equal to a held-out sentence, compared after :func:`normalize` (case, width, spaces
and punctuation ignored). small_parallel_enja's own dev and test sentences are held out the same
way, so its test set (the first translators' yardstick) stays comparable.

**Longer inputs.** small_parallel_enja never has more than 16 words, so a model trained on it
alone collapses a long sentence or a paragraph into a short one. :func:`concatenations` adds
pairs made of two or three pairs joined (English with a space, Japanese without), so that inputs
of 20–40 words and several sentences are seen in training.

Run ``python -m attnlab.data.enja_mix --data ../shared/data --out DIR`` to write the splits as
line-aligned files (``DIR/{train,dev,test,sp_test}.{ja,en}``) and ``DIR/stats.json``.

Shape:
    no tensors: lists of ``(japanese, english)`` strings in, the same out.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .corpus import read_parallel
from .enja import to_raw

__all__ = ["TrueCaser", "EnjaSplits", "normalize", "concatenations", "build", "write", "main"]

_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s*$")
_JA_SENTENCE_END = re.compile(r"[。！？!?」』）)]\s*$")


def normalize(text: str) -> str:
    """The form two sentences are compared in: NFKC, lower case, no spaces, no punctuation or symbols.

    ``"I can't tell."``, ``"i can 't tell ."`` and ``"I cant tell"`` all give ``"icanttell"``;
    ``"私 は テニス 部員 で す 。"`` and ``"私はテニス部員です"`` give the same string.
    """
    text = unicodedata.normalize("NFKC", text).lower()
    return "".join(ch for ch in text if not ch.isspace() and unicodedata.category(ch)[0] not in "PSZ")


class TrueCaser:
    """Each word's usual casing, learned from cased sentences (see the module docstring).

    A word's casing is the form it takes most often *inside* a sentence (the first word of a
    sentence is capitalised whatever it is, so it says nothing). Words never seen inside a
    sentence stay as they are.
    """

    def __init__(self, forms: dict[str, str]) -> None:
        self.forms = forms  # lower-cased word -> its usual form

    @classmethod
    def learn(cls, sentences: Iterable[str], min_count: int = 2) -> TrueCaser:
        counts: dict[str, Counter] = defaultdict(Counter)
        for sentence in sentences:
            starts = {0} | {m.end() for m in re.finditer(r"[.!?][\"')\]]*\s+", sentence)}
            for m in _WORD.finditer(sentence):
                if m.start() not in starts and not _after_quote(sentence, m.start()):
                    counts[m.group().lower()][m.group()] += 1
        forms = {}
        for word, seen in counts.items():
            form, n = seen.most_common(1)[0]
            if n >= min_count and form != word:
                forms[word] = form
        return cls(forms)

    def __call__(self, sentence: str) -> str:
        """``sentence`` with each known word in its usual casing and its first letter capitalised."""
        return _capitalise_sentences(_WORD.sub(lambda m: self._case(m.group()), sentence))

    def _case(self, word: str) -> str:
        form = self.forms.get(word.lower())
        if form is None and "'" in word:  # "john's" when only "John" was seen: case the head
            head, tail = word.split("'", 1)
            form = self.forms.get(head.lower(), head) + "'" + tail
        return form or word


def _after_quote(text: str, i: int) -> bool:
    # A word right after an opening quote starts quoted speech ("He said, "Go.""): not informative.
    j = i - 1
    while j >= 0 and text[j] == " ":
        j -= 1
    return j >= 0 and text[j] in "\"“'‘("


def _capitalise_sentences(text: str) -> str:
    def up(m: re.Match) -> str:
        return m.group(1) + m.group(2).upper()

    text = re.sub(r"^(\W*)([a-z])", up, text)
    return re.sub(r"([.!?][\"')\]]*\s+[\"'(]?)([a-z])", up, text)


def concatenations(
    pairs: Sequence[tuple[str, str]], n: int, *, seed: int = 0, sizes: Sequence[int] = (2, 3)
) -> list[tuple[str, str]]:
    """``n`` pairs made by joining two or three random pairs of ``pairs`` (Japanese, English).

    Only pairs whose both sides end a sentence are joined, so that the result reads as a short
    paragraph: ``("猫が鳴いた。", "The cat mewed.")`` + ``("犬が走った。", "The dog ran.")`` →
    ``("猫が鳴いた。犬が走った。", "The cat mewed. The dog ran.")``.
    """
    whole = [p for p in pairs if _JA_SENTENCE_END.search(p[0]) and _SENTENCE_END.search(p[1])]
    if len(whole) < max(sizes):
        return []
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = rng.sample(whole, rng.choice(list(sizes)))
        out.append(("".join(ja for ja, _ in parts), " ".join(en for _, en in parts)))
    return out


@dataclass
class EnjaSplits:
    """The splits :func:`build` makes, as ``(japanese, english)`` pairs, and how they were made."""

    train: list[tuple[str, str]]  # Tatoeba + small_parallel_enja (truecased), no held-out sentence
    dev: list[tuple[str, str]]  # drawn from Tatoeba: picks the best checkpoint
    test: list[tuple[str, str]]  # drawn from Tatoeba: the score reported
    sp_test: list[tuple[str, str]]  # small_parallel_enja's test set, raw (English lower-cased, as it ships)
    stats: dict = field(default_factory=dict)  # counts: read, duplicates, removed for overlap, concatenated


def _read_tatoeba(folder: Path) -> list[tuple[str, str]]:
    corpus = read_parallel(folder / "train.ja", folder / "train.en")
    return [(ja.strip(), " ".join(en.split())) for ja, en in corpus.pairs]


def _read_small_parallel(folder: Path, split: str) -> list[tuple[str, str]]:
    corpus = read_parallel(folder / f"{split}.ja", folder / f"{split}.en")
    return [(to_raw(ja, "ja"), to_raw(en, "en")) for ja, en in corpus.pairs]


def build(
    data: str | Path,
    *,
    n_dev: int = 500,
    n_test: int = 1000,
    concat_fraction: float = 0.25,
    seed: int = 0,
) -> EnjaSplits:
    """Read both corpora under ``data`` (``tatoeba-jpn/``, ``small_parallel_enja/``) and make the splits.

    Args:
        data: the folder holding both corpora (``../shared/data``).
        n_dev, n_test: pairs drawn from Tatoeba for each held-out split.
        concat_fraction: concatenated pairs added to training, as a fraction of its pairs.
        seed: the draw of the held-out pairs and of the concatenations.

    Raises:
        FileNotFoundError: a corpus file is missing (the message names it).
        ValueError: Tatoeba has too few pairs for the held-out splits and training.
    """
    data = Path(data)
    tatoeba = _read_tatoeba(data / "tatoeba-jpn")
    sp = data / "small_parallel_enja"
    sp_train, sp_dev, sp_test = (_read_small_parallel(sp, s) for s in ("train", "dev", "test"))
    stats: dict = {"tatoeba_read": len(tatoeba), "small_parallel_train_read": len(sp_train)}

    # Tatoeba without repeated pairs; the held-out pairs drawn so that no two share a side.
    seen, unique = set(), []
    for ja, en in tatoeba:
        key = (normalize(ja), normalize(en))
        if key not in seen and all(key):
            seen.add(key)
            unique.append((ja, en))
    stats["tatoeba_duplicates"] = len(tatoeba) - len(unique)
    if len(unique) < 2 * (n_dev + n_test):
        raise ValueError(
            f"tatoeba-jpn has {len(unique)} distinct pairs: too few to hold out {n_dev} + {n_test} and train on the rest"
        )
    rng = random.Random(seed)
    order = list(range(len(unique)))
    rng.shuffle(order)
    held_ja: set[str] = set()
    held_en: set[str] = set()
    for ja, en in sp_dev + sp_test:
        held_ja.add(normalize(ja))
        held_en.add(normalize(en))
    dev: list[tuple[str, str]] = []
    test: list[tuple[str, str]] = []
    for i in order:
        if len(test) >= n_test and len(dev) >= n_dev:
            break
        ja, en = unique[i]
        kj, ke = normalize(ja), normalize(en)
        if kj in held_ja or ke in held_en:
            continue
        (test if len(test) < n_test else dev).append((ja, en))
        held_ja.add(kj)
        held_en.add(ke)

    def keep(pair: tuple[str, str]) -> bool:
        return normalize(pair[0]) not in held_ja and normalize(pair[1]) not in held_en

    truecase = TrueCaser.learn(en for ja, en in unique if keep((ja, en)))
    tatoeba_train = [p for p in unique if keep(p)]
    sp_kept = [(ja, truecase(en)) for ja, en in sp_train if keep((ja, en))]
    stats["tatoeba_train"] = len(tatoeba_train)
    stats["small_parallel_train"] = len(sp_kept)
    stats["removed_for_overlap"] = (len(unique) - len(dev) - len(test) - len(tatoeba_train)) + (
        len(sp_train) - len(sp_kept)
    )
    # A pair in both corpora once: Tatoeba's raw form wins over small_parallel_enja's truecased one.
    tatoeba_keys = {(normalize(ja), normalize(en)) for ja, en in tatoeba_train}
    sp_new = [p for p in sp_kept if (normalize(p[0]), normalize(p[1])) not in tatoeba_keys]
    stats["shared_by_both_corpora"] = len(sp_kept) - len(sp_new)
    train = tatoeba_train + sp_new
    extra = concatenations(train, int(concat_fraction * len(train)), seed=seed)
    stats["concatenated"] = len(extra)
    stats["truecase_words"] = len(truecase.forms)
    train = train + extra
    random.Random(seed + 1).shuffle(train)
    stats.update(train=len(train), dev=len(dev), test=len(test), sp_test=len(sp_test))
    return EnjaSplits(train, dev, test, sp_test, stats)


def write(splits: EnjaSplits, out: str | Path) -> Path:
    """Write ``OUT/{train,dev,test,sp_test}.{ja,en}`` (line-aligned) and ``OUT/stats.json``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("train", "dev", "test", "sp_test"):
        pairs = getattr(splits, name)
        for side, lang in ((0, "ja"), (1, "en")):
            text = "".join(p[side].replace("\n", " ") + "\n" for p in pairs)
            (out / f"{name}.{lang}").write_text(text, encoding="utf-8")
    (out / "stats.json").write_text(json.dumps(splits.stats, indent=1) + "\n", encoding="utf-8")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnlab.data.enja_mix", description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="../shared/data", help="folder holding tatoeba-jpn/ and small_parallel_enja/")
    parser.add_argument("--out", required=True, help="folder for the split files")
    parser.add_argument("--seed", type=int, default=0, help="draw of the held-out pairs and the concatenations")
    parser.add_argument("--n-dev", type=int, default=500, help="development pairs drawn from Tatoeba")
    parser.add_argument("--n-test", type=int, default=1000, help="test pairs drawn from Tatoeba")
    args = parser.parse_args(argv)
    try:
        splits = build(args.data, n_dev=args.n_dev, n_test=args.n_test, seed=args.seed)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    write(splits, args.out)
    print(json.dumps(splits.stats))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
