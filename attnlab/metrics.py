"""Translation, summarization and question-answering metrics: sacreBLEU BLEU and chrF, exact match,
ROUGE-1/2/L, SQuAD's answer exact match and F1, and BLEU by source-length bucket.

Every function takes *detokenized* text — the strings a user would read — one hypothesis per
segment, in the same order as the references. Corpus scores (BLEU, chrF) are computed over the
whole list, not averaged per sentence, which is how sacreBLEU and the papers report them.

Scales: BLEU and chrF are on 0–100 (sacreBLEU's convention); exact match, ROUGE F1 and the SQuAD
scores are fractions on 0–1.

Japanese (or Chinese) targets: the default BLEU tokenizer ``"13a"`` splits on spaces and
punctuation, so an unsegmented Japanese sentence becomes one "word" and BLEU collapses to ~0.
Use ``tokenize="char"`` (every character is a token; always available) or ``tokenize="zh"``
(isolates CJK ideographs and full-width symbols, keeps kana runs together). ``"ja-mecab"`` splits
Japanese into words with MeCab and the IPA dictionary, as WAT scores Japanese; attnlab installs
it (``sacrebleu[ja]``) and the ja⇄en translators are scored with it. The ``spm``/``flores*``
tokenizers need a SentencePiece model that sacreBLEU downloads, so they do not work offline.
:data:`OFFLINE_TOKENIZERS` lists the ones that need no extra package.

Shape:
    hypotheses, references, sources: sequences of ``N`` strings, aligned by index; ``N ≥ 1``.
"""

from __future__ import annotations

import itertools
import re
import string
from collections import Counter
from collections.abc import Callable, Sequence

__all__ = [
    "OFFLINE_TOKENIZERS",
    "bleu",
    "chrf",
    "exact_match",
    "rouge",
    "normalize_answer",
    "answer_exact_match",
    "answer_f1",
    "squad_scores",
    "bleu_by_length",
    "repeated_span",
    "repetition_rate",
    "sentence_form_share",
]

#: sacreBLEU tokenizers that need no extra package and no download.
OFFLINE_TOKENIZERS = ("13a", "intl", "char", "zh", "none")

_WHITESPACE = re.compile(r"\s+")


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def _check_strings(name: str, texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError(f"{name} must be a sequence of strings, not a single string")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"{name}[{i}] must be a str, got {type(t).__name__}")
    return texts


def _check_pair(hypotheses: Sequence[str], references: Sequence[str]) -> tuple[list, list]:
    hyps = _check_strings("hypotheses", hypotheses)
    if isinstance(references, str):
        raise TypeError("references must be a sequence of strings, not a single string")
    refs = list(references)
    if len(hyps) != len(refs):
        raise ValueError(f"got {len(hyps)} hypotheses but {len(refs)} references; they must be aligned one to one")
    if not hyps:
        raise ValueError("no hypotheses: a score needs at least one segment")
    return hyps, refs


def _reference_streams(refs: list) -> list[list[str | None]]:
    """Per-segment references → sacreBLEU's reference *streams* (one list per reference set).

    Each element of ``refs`` is either one reference string or a list of alternative references
    for that segment. Segments with fewer alternatives are padded with ``None``, which sacreBLEU
    reads as "no reference here".
    """
    per_segment: list[list[str]] = []
    for i, r in enumerate(refs):
        alts = [r] if isinstance(r, str) else list(r)
        if not alts:
            raise ValueError(f"references[{i}] is an empty list; give at least one reference")
        for j, a in enumerate(alts):
            if not isinstance(a, str):
                raise TypeError(f"references[{i}][{j}] must be a str, got {type(a).__name__}")
        per_segment.append(alts)
    n_streams = max(len(a) for a in per_segment)
    return [[a[k] if k < len(a) else None for a in per_segment] for k in range(n_streams)]


# --------------------------------------------------------------------------------------------
# sacreBLEU wrappers
# --------------------------------------------------------------------------------------------


def bleu(
    hypotheses: Sequence[str],
    references: Sequence[str] | Sequence[Sequence[str]],
    *,
    tokenize: str = "13a",
    lowercase: bool = False,
) -> float:
    """Corpus BLEU (Papineni et al. 2002) as computed by sacreBLEU, on a 0–100 scale.

    Args:
        hypotheses: one detokenized system output per segment.
        references: one reference string per segment, or per segment a list of alternative
            references (the counts may differ between segments).
        tokenize: a sacreBLEU tokenizer name. ``"13a"`` (the WMT standard) for English, German
            and other space-separated languages; ``"ja-mecab"`` (WAT's choice), ``"char"`` or ``"zh"``
            for Japanese targets (see the module docstring).
        lowercase: case-insensitive BLEU (sacreBLEU's ``-lc``), for references that are lower-cased
            (small_parallel_enja's English) scored against cased output.

    Shape:
        hypotheses, references: ``N`` items each.
    """
    from sacrebleu.metrics import BLEU

    hyps, refs = _check_pair(hypotheses, references)
    metric = _sacrebleu_metric(BLEU, tokenize=tokenize, lowercase=lowercase)
    return float(metric.corpus_score(hyps, _reference_streams(refs)).score)


def chrf(
    hypotheses: Sequence[str],
    references: Sequence[str] | Sequence[Sequence[str]],
    *,
    word_order: int = 0,
) -> float:
    """Corpus chrF (Popović 2015; character n-grams up to 6, β = 2) by sacreBLEU, 0–100.

    chrF works on characters, so it needs no word segmentation and suits Japanese as is.

    Args:
        hypotheses: one detokenized system output per segment.
        references: as in :func:`bleu`.
        word_order: add word n-grams up to this order; ``2`` gives chrF++ (Popović 2017).

    Shape:
        hypotheses, references: ``N`` items each.
    """
    from sacrebleu.metrics import CHRF

    if not isinstance(word_order, int) or word_order < 0:
        raise ValueError(f"word_order must be a non-negative int, got {word_order!r}")
    hyps, refs = _check_pair(hypotheses, references)
    metric = CHRF(word_order=word_order)
    return float(metric.corpus_score(hyps, _reference_streams(refs)).score)


def _sacrebleu_metric(cls, *, tokenize: str, **options):
    if tokenize not in cls.TOKENIZERS:
        raise ValueError(
            f"unknown BLEU tokenizer {tokenize!r}; sacreBLEU knows {sorted(cls.TOKENIZERS)} "
            f"(usable offline: {list(OFFLINE_TOKENIZERS)})"
        )
    try:
        return cls(tokenize=tokenize, **options)
    except (ImportError, RuntimeError) as exc:
        # sacreBLEU raises these when a tokenizer's optional package is missing.
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ValueError(
            f"BLEU tokenizer {tokenize!r} is not usable here ({reason}); for Japanese targets "
            "use tokenize='char' or 'zh', which need nothing extra"
        ) from exc


# --------------------------------------------------------------------------------------------
# Exact match
# --------------------------------------------------------------------------------------------


def _normalise_whitespace(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Fraction of segments whose hypothesis equals the reference, on 0–1.

    Both sides are compared after whitespace normalisation: leading/trailing whitespace removed
    and every internal run of whitespace (spaces, tabs, newlines, U+3000) collapsed to one space.
    Case, punctuation and Unicode form are compared as they are.

    Shape:
        hypotheses, references: ``N`` strings each.
    """
    hyps, refs = _check_pair(hypotheses, references)
    refs = _check_strings("references", refs)
    hits = sum(_normalise_whitespace(h) == _normalise_whitespace(r) for h, r in zip(hyps, refs))
    return hits / len(hyps)


# --------------------------------------------------------------------------------------------
# ROUGE (Lin 2004), written here: sentence-level F1, averaged over segments
# --------------------------------------------------------------------------------------------


def _lower_split(text: str) -> list[str]:
    return text.lower().split()


def _ngrams(tokens: list[str], n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def _f1(overlap: int, hyp_total: int, ref_total: int) -> float:
    if overlap == 0:
        return 0.0
    precision, recall = overlap / hyp_total, overlap / ref_total
    return 2 * precision * recall / (precision + recall)


def _lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence, by the O(|a|·|b|) dynamic programme with one
    row of memory (Lin 2004, §3.1)."""
    if len(a) < len(b):
        a, b = b, a
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, start=1):
            cur[j] = prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1])
        prev = cur
    return prev[-1]


def rouge(
    hypotheses: Sequence[str],
    references: Sequence[str],
    *,
    tokenizer: Callable[[str], list[str]] = _lower_split,
) -> dict[str, float]:
    """ROUGE-1, ROUGE-2 and ROUGE-L F1 (Lin 2004), each the mean over segments, on 0–1.

    ROUGE-N counts clipped n-gram overlap (an n-gram appearing twice in the hypothesis and once in
    the reference counts once): precision = overlap / hypothesis n-grams, recall = overlap /
    reference n-grams, F1 their harmonic mean. ROUGE-L uses the longest common subsequence
    instead: P = LCS/|hyp|, R = LCS/|ref| (the sentence-level variant, §3.1, with β = 1). A segment
    with no n-grams on either side (empty text, or one token for ROUGE-2) scores 0.

    Args:
        hypotheses: one system summary per segment.
        references: one reference summary per segment.
        tokenizer: text → tokens. The default lower-cases and splits on whitespace, which suits
            English; pass ``list`` to score Japanese by characters.

    Returns:
        ``{"rouge1": f, "rouge2": f, "rougeL": f}``.

    Shape:
        hypotheses, references: ``N`` strings each.
    """
    hyps, refs = _check_pair(hypotheses, references)
    refs = _check_strings("references", refs)
    totals = {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}
    for h, r in zip(hyps, refs):
        ht, rt = list(tokenizer(h)), list(tokenizer(r))
        for n in (1, 2):
            hg, rg = _ngrams(ht, n), _ngrams(rt, n)
            overlap = sum((hg & rg).values())  # Counter & = clipped counts
            totals[f"rouge{n}"] += _f1(overlap, sum(hg.values()), sum(rg.values()))
        totals["rougeL"] += _f1(_lcs_length(ht, rt), len(ht), len(rt))
    return {k: v / len(hyps) for k, v in totals.items()}


# --------------------------------------------------------------------------------------------
# Question answering: the SQuAD v1.1 evaluation, written here from its definition
# --------------------------------------------------------------------------------------------

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalisation: lower-case, drop punctuation, drop a/an/the, collapse whitespace.

    Shape:
        str → str
    """
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_exact_match(prediction: str, references: Sequence[str]) -> float:
    """1.0 if the normalised prediction equals any normalised reference, else 0.0.

    Shape:
        one prediction, R references → a number
    """
    if not references:
        raise ValueError("no reference answers")
    return float(any(normalize_answer(prediction) == normalize_answer(r) for r in references))


def answer_f1(prediction: str, references: Sequence[str]) -> float:
    """Token F1 of the normalised prediction against the best-matching normalised reference.

    Tokens are counted with clipping, as ROUGE-1: a word twice in the prediction and once in the
    reference overlaps once.

    Shape:
        one prediction, R references → a number in [0, 1]
    """
    if not references:
        raise ValueError("no reference answers")
    pred = Counter(normalize_answer(prediction).split())
    scores = []
    for reference in references:
        ref = Counter(normalize_answer(reference).split())
        scores.append(_f1(sum((pred & ref).values()), sum(pred.values()), sum(ref.values())))
    return max(scores)


def squad_scores(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> dict[str, float]:
    """Mean exact match and F1 over questions (0–1), as the SQuAD v1.1 evaluation: each question
    scores the best over its reference answers.

    Shape:
        N predictions and N lists of references → ``{"exact_match", "f1"}``
    """
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} reference lists")
    if not predictions:
        raise ValueError("nothing to score")
    n = len(predictions)
    return {
        "exact_match": sum(answer_exact_match(p, r) for p, r in zip(predictions, references)) / n,
        "f1": sum(answer_f1(p, r) for p, r in zip(predictions, references)) / n,
    }


# --------------------------------------------------------------------------------------------
# BLEU by source length (the bottleneck experiment: Bahdanau et al. 2015, Fig. 2)
# --------------------------------------------------------------------------------------------


def _whitespace_length(text: str) -> int:
    return len(text.split())


def _auto_buckets(lengths: list[int], n_buckets: int = 5) -> list[tuple[int, int]]:
    """Up to ``n_buckets`` contiguous inclusive ranges covering min..max, each holding roughly
    the same number of sentences (cut at the length quantiles)."""
    ordered = sorted(lengths)
    starts = sorted({ordered[(i * len(ordered)) // n_buckets] for i in range(n_buckets)})
    ends = [s - 1 for s in starts[1:]] + [ordered[-1]]
    return list(zip(starts, ends))


def _check_buckets(buckets: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    checked: list[tuple[int, int]] = []
    for i, b in enumerate(buckets):
        if len(b) != 2 or not all(isinstance(x, int) for x in b):
            raise TypeError(f"buckets[{i}] must be a (low, high) pair of ints, got {b!r}")
        lo, hi = b
        if lo < 0 or hi < lo:
            raise ValueError(f"buckets[{i}] = {b!r}: need 0 <= low <= high (both inclusive)")
        checked.append((lo, hi))
    ordered = sorted(checked)
    for (lo1, hi1), (lo2, hi2) in itertools.pairwise(ordered):
        if lo2 <= hi1:
            raise ValueError(
                f"buckets {(lo1, hi1)} and {(lo2, hi2)} overlap; a sentence must fall in at most one bucket"
            )
    return checked


def bleu_by_length(
    sources: Sequence[str],
    hypotheses: Sequence[str],
    references: Sequence[str],
    *,
    buckets: Sequence[tuple[int, int]] | None = None,
    length_fn: Callable[[str], int] = _whitespace_length,
    tokenize: str = "13a",
) -> list[dict]:
    """Corpus BLEU of the segments whose *source* length falls in each bucket.

    This is the measurement behind "one fixed-length vector cannot hold a long sentence"
    (Bahdanau et al. 2015, Fig. 2): a model without attention loses BLEU as sources grow.

    Args:
        sources: the source sentences (only their lengths are used).
        hypotheses: one detokenized system output per source.
        references: one reference per source.
        buckets: inclusive ``(low, high)`` source-length ranges, e.g.
            ``[(1, 10), (11, 20), (21, 30)]``; they must not overlap. Sentences outside every
            bucket are left out. ``None`` chooses up to 5 contiguous buckets from the data with
            about equally many sentences each.
        length_fn: source text → length. Default: whitespace tokens (English, German); pass
            ``len`` for characters, which is the sensible unit for Japanese sources.
        tokenize: sacreBLEU tokenizer for the *targets* (see :func:`bleu`).

    Returns:
        One dict per bucket, in the given order: ``{"bucket": (low, high), "n": count,
        "bleu": score or None}`` — ``None`` when the bucket is empty.

    Shape:
        sources, hypotheses, references: ``N`` strings each.
    """
    srcs = _check_strings("sources", sources)
    hyps, refs = _check_pair(hypotheses, references)
    if len(srcs) != len(hyps):
        raise ValueError(f"got {len(srcs)} sources but {len(hyps)} hypotheses; they must align")
    lengths = []
    for i, s in enumerate(srcs):
        n = length_fn(s)
        if not isinstance(n, int) or n < 0:
            raise TypeError(f"length_fn(sources[{i}]) returned {n!r}; it must be an int >= 0")
        lengths.append(n)
    chosen = _auto_buckets(lengths) if buckets is None else _check_buckets(buckets)
    rows = []
    for lo, hi in chosen:
        idx = [i for i, n in enumerate(lengths) if lo <= n <= hi]
        score = None
        if idx:
            score = bleu([hyps[i] for i in idx], [refs[i] for i in idx], tokenize=tokenize)
        rows.append({"bucket": (lo, hi), "n": len(idx), "bleu": score})
    return rows


# --------------------------------------------------------------------------------------------
# Degenerate output: loops and sentence form
# --------------------------------------------------------------------------------------------


def repeated_span(tokens: Sequence, *, times: int = 3, max_n: int = 4) -> tuple[int, int, int] | None:
    """The first run of an n-gram (n ≤ ``max_n``) repeated ``times`` or more times in a row, as
    ``(start, n, count)``; None when there is none.

    A decoder that has lost its place in the source repeats itself (``コーヒーとコーヒーとコーヒーと``);
    natural text seldom says the same n-gram three times running (``very, very`` is two).

    Shape:
        tokens: ``T`` items (ids, words or characters) → ``(start, n, count)`` or None
    """
    tokens = list(tokens)
    for start in range(len(tokens)):
        for n in range(1, max_n + 1):
            gram = tokens[start : start + n]
            if len(gram) < n:
                break
            count = 1
            while tokens[start + count * n : start + (count + 1) * n] == gram:
                count += 1
            if count >= times:
                return start, n, count
    return None


def _units(text: str) -> list[str]:
    # Words where the text has spaces (English), characters where it has none (Japanese).
    words = text.split()
    return words if len(words) > 1 else list(text.strip())


def repetition_rate(texts: Sequence[str], *, times: int = 3, max_n: int = 4) -> float:
    """The share of ``texts`` that contain a loop (:func:`repeated_span` over their words, or
    their characters when they have no spaces). For Japanese characters, a loop is a span of up
    to ``4 · max_n`` characters, so that a repeated word of a few characters counts.

    Shape:
        texts: ``N`` strings → a fraction in [0, 1]
    """
    texts = _check_strings("texts", texts)
    if not texts:
        return 0.0
    hits = 0
    for t in texts:
        units = _units(t)
        span = max_n if len(t.split()) > 1 else 4 * max_n
        hits += repeated_span(units, times=times, max_n=span) is not None
    return hits / len(texts)


def sentence_form_share(texts: Sequence[str]) -> float:
    """The share of English ``texts`` that start with a capital letter (or a digit or quote) and end
    with sentence punctuation (. ! ? or a closing quote after one): what a reader expects of a
    translated sentence.

    Shape:
        texts: ``N`` strings → a fraction in [0, 1]
    """
    texts = _check_strings("texts", texts)
    if not texts:
        return 0.0
    good = re.compile(r"^[\"'“‘(]?[A-Z0-9].*[.!?…][\"'”’)]?$", re.DOTALL)
    return sum(bool(good.match(t.strip())) for t in texts) / len(texts)
