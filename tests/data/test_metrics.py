"""Metrics: BLEU/chrF against direct sacreBLEU calls, hand-checkable cases, exact match, ROUGE
on hand-computed examples and a brute-force LCS, BLEU by source-length bucket."""

from __future__ import annotations

import itertools

import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.metrics import (
    OFFLINE_TOKENIZERS,
    bleu,
    bleu_by_length,
    chrf,
    exact_match,
    rouge,
)

HYPS = [
    "A man in a blue shirt is standing on a ladder cleaning windows.",
    "Two dogs run across the grassy field together.",
    "The girl is reading a book under a large tree.",
    "A group of people stand in front of an igloo.",
]
REFS = [
    "A man in a blue shirt is standing on a ladder and cleaning a window.",
    "Two dogs are running through a grassy field.",
    "A young girl reads a book beneath a big tree.",
    "A group of people standing in front of an igloo.",
]
REFS_ALT = [
    "A man wearing a blue shirt stands on a ladder cleaning windows.",
    "Two dogs run together across a field of grass.",
    "A girl is reading under a large tree.",
    "Several people stand before an igloo.",
]


# --------------------------------------------------------------------------------------------
# BLEU and chrF
# --------------------------------------------------------------------------------------------


def test_bleu_equals_sacrebleu():
    expected = sacrebleu.corpus_bleu(HYPS, [REFS]).score
    assert bleu(HYPS, REFS) == pytest.approx(expected, abs=1e-9)
    assert 0 < expected < 100  # a partial match, so the comparison is not trivial


def test_bleu_multiple_references_per_segment_equals_sacrebleu_streams():
    per_segment = [[r, a] for r, a in zip(REFS, REFS_ALT)]
    expected = sacrebleu.corpus_bleu(HYPS, [REFS, REFS_ALT]).score
    assert bleu(HYPS, per_segment) == pytest.approx(expected, abs=1e-9)
    assert bleu(HYPS, per_segment) > bleu(HYPS, REFS)


def test_bleu_variable_reference_counts():
    per_segment = [[REFS[0], REFS_ALT[0]], REFS[1], [REFS[2]], [REFS[3], REFS_ALT[3]]]
    expected = sacrebleu.corpus_bleu(HYPS, [REFS, [REFS_ALT[0], None, None, REFS_ALT[3]]]).score
    assert bleu(HYPS, per_segment) == pytest.approx(expected, abs=1e-9)


def test_bleu_identical_is_100_and_disjoint_is_0():
    assert bleu(REFS, REFS) == pytest.approx(100.0)
    disjoint_h = ["alpha beta gamma delta epsilon zeta", "one two three four five six"]
    disjoint_r = ["red green blue cyan magenta yellow", "north south east west up down"]
    assert bleu(disjoint_h, disjoint_r) == 0.0


def test_bleu_japanese_char_tokenizer():
    hyps = ["三十四万二千", "今日は良い天気です。"]
    refs = ["三十四万二千", "今日は良い天気でした。"]
    expected = sacrebleu.corpus_bleu(hyps, [refs], tokenize="char").score
    assert bleu(hyps, refs, tokenize="char") == pytest.approx(expected)
    # Without segmentation "13a" sees each Japanese sentence as one word: the score collapses.
    assert bleu(hyps, refs, tokenize="char") > bleu(hyps, refs, tokenize="13a") + 20


@pytest.mark.parametrize("tokenize", OFFLINE_TOKENIZERS)
def test_offline_tokenizers_work(tokenize):
    expected = sacrebleu.corpus_bleu(HYPS, [REFS], tokenize=tokenize).score
    assert bleu(HYPS, REFS, tokenize=tokenize) == pytest.approx(expected)


def test_ja_mecab_without_its_package_names_the_alternative(monkeypatch):
    # attnlab installs mecab-python3 and ipadic (sacrebleu[ja]); an install without them is
    # what sacreBLEU sees when its import of MeCab failed.
    import sacrebleu.tokenizers.tokenizer_ja_mecab as ja_mecab

    monkeypatch.setattr(ja_mecab, "MeCab", None)
    with pytest.raises(ValueError, match="'char'"):
        bleu(["今日は"], ["今日は"], tokenize="ja-mecab")


def test_unknown_tokenizer():
    with pytest.raises(ValueError, match="unknown BLEU tokenizer 'moses'"):
        bleu(HYPS, REFS, tokenize="moses")


def test_chrf_equals_sacrebleu():
    assert chrf(HYPS, REFS) == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score)
    expected_pp = sacrebleu.corpus_chrf(HYPS, [REFS], word_order=2).score
    assert chrf(HYPS, REFS, word_order=2) == pytest.approx(expected_pp)
    assert chrf(REFS, REFS) == pytest.approx(100.0)
    assert chrf(["xyz"], ["abc"]) == 0.0


@pytest.mark.parametrize("fn", [bleu, chrf, exact_match, rouge])
def test_input_errors(fn):
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        fn(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="at least one"):
        fn([], [])
    with pytest.raises(TypeError, match="single string"):
        fn("a b c", ["a b c"])
    with pytest.raises(TypeError, match=r"hypotheses\[1\]"):
        fn(["a", 3], ["a", "b"])


# --------------------------------------------------------------------------------------------
# Exact match
# --------------------------------------------------------------------------------------------


def test_exact_match_normalises_whitespace_only():
    hyps = ["2024-05-01", "  three  hundred\tforty ", "三十四万\u3000二千", "Hello"]
    refs = ["2024-05-01", "three hundred forty", "三十四万 二千", "hello"]
    # Case differs in the last pair: whitespace is the only normalisation.
    assert exact_match(hyps, refs) == pytest.approx(3 / 4)
    assert exact_match(["a"], ["b"]) == 0.0


# --------------------------------------------------------------------------------------------
# ROUGE
# --------------------------------------------------------------------------------------------


def test_rouge_hand_computed():
    # hyp: the cat sat on the mat / ref: the cat is on the mat (6 tokens each)
    #   unigrams: the×2, cat, on, mat overlap → 5/6 both ways → F1 = 5/6
    #   bigrams: "the cat", "on the", "the mat" of 5 each → F1 = 3/5
    #   LCS: the cat on the mat = 5 → F1 = 5/6
    scores = rouge(["The cat sat on the mat"], ["the cat is on the mat"])
    assert scores["rouge1"] == pytest.approx(5 / 6)
    assert scores["rouge2"] == pytest.approx(3 / 5)
    assert scores["rougeL"] == pytest.approx(5 / 6)


def test_rouge_l_differs_from_rouge_1_on_reordering():
    # Same bag of words, reversed order: ROUGE-1 = 1, no shared bigram, LCS = 1 of 4.
    scores = rouge(["a b c d"], ["d c b a"])
    assert scores == pytest.approx({"rouge1": 1.0, "rouge2": 0.0, "rougeL": 0.25})


def test_rouge_clips_repeated_ngrams_and_averages_segments():
    # "the the the" vs "the cat": clipped unigram overlap 1 → P = 1/3, R = 1/2, F1 = 0.4.
    # Second segment identical → 1.0. Mean = 0.7.
    scores = rouge(["the the the", "a cat"], ["the cat", "a cat"])
    assert scores["rouge1"] == pytest.approx((0.4 + 1.0) / 2)
    # ROUGE-2: segment 1 has no shared bigram, segment 2 matches → 0.5.
    assert scores["rouge2"] == pytest.approx(0.5)


def test_rouge_empty_and_japanese_by_characters():
    assert rouge([""], ["some reference"]) == {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}
    # 東京都 vs 京都府: chars 京, 都 shared → P = R = 2/3; bigram 京都 shared → 1/2; LCS 2 → 2/3.
    scores = rouge(["東京都"], ["京都府"], tokenizer=list)
    assert scores == pytest.approx({"rouge1": 2 / 3, "rouge2": 1 / 2, "rougeL": 2 / 3})


def _brute_force_lcs(a: list[str], b: list[str]) -> int:
    for k in range(min(len(a), len(b)), 0, -1):
        subs_b = set(itertools.combinations(b, k))
        if any(sub in subs_b for sub in itertools.combinations(a, k)):
            return k
    return 0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from("abc"), max_size=7),
    st.lists(st.sampled_from("abc"), max_size=7),
)
def test_rouge_l_is_the_f1_of_the_brute_force_lcs(a, b):
    # ROUGE-L's F1 with P = LCS/|a|, R = LCS/|b| is 2·LCS/(|a| + |b|): for fixed lengths one
    # value per LCS length, so a wrong LCS shows as a wrong score.
    lcs = _brute_force_lcs(a, b)
    want = 2 * lcs / (len(a) + len(b)) if lcs else 0.0
    assert rouge(["".join(a)], ["".join(b)], tokenizer=list)["rougeL"] == pytest.approx(want, rel=1e-12, abs=0)


# --------------------------------------------------------------------------------------------
# BLEU by source length
# --------------------------------------------------------------------------------------------


def test_bleu_by_length_explicit_buckets():
    sources = ["w " * n for n in (3, 5, 12, 14, 30)]
    hyps = HYPS + ["completely unrelated words appear within another output"]
    refs = REFS + ["A cat sleeps on the warm windowsill in the sun."]
    rows = bleu_by_length(sources, hyps, refs, buckets=[(1, 10), (11, 20), (21, 25), (26, 40)])
    assert [r["bucket"] for r in rows] == [(1, 10), (11, 20), (21, 25), (26, 40)]
    assert [r["n"] for r in rows] == [2, 2, 0, 1]
    assert rows[0]["bleu"] == pytest.approx(sacrebleu.corpus_bleu(HYPS[:2], [REFS[:2]]).score)
    assert rows[1]["bleu"] == pytest.approx(sacrebleu.corpus_bleu(HYPS[2:4], [REFS[2:4]]).score)
    assert rows[2]["bleu"] is None
    assert rows[3]["bleu"] == 0.0


def test_bleu_by_length_leaves_out_sentences_outside_buckets_and_uses_length_fn():
    sources = ["猫", "猫が寝る", "猫が窓辺で寝ている"]  # 1, 4, 9 characters
    rows = bleu_by_length(sources, HYPS[:3], REFS[:3], buckets=[(1, 4)], length_fn=len)
    assert rows == [
        {"bucket": (1, 4), "n": 2, "bleu": pytest.approx(bleu(HYPS[:2], REFS[:2]))},
    ]


def test_bleu_by_length_auto_buckets_partition_the_data():
    lengths = [1, 2, 2, 3, 5, 8, 8, 9, 13, 21, 21, 34]
    sources = ["x " * n for n in lengths]
    hyps = [HYPS[i % 4] for i in range(len(lengths))]
    refs = [REFS[i % 4] for i in range(len(lengths))]
    rows = bleu_by_length(sources, hyps, refs)
    buckets = [r["bucket"] for r in rows]
    assert 2 <= len(buckets) <= 5
    assert buckets[0][0] == min(lengths) and buckets[-1][1] == max(lengths)
    for (_, hi), (lo, _) in itertools.pairwise(buckets):
        assert lo == hi + 1  # contiguous, no overlap
    assert sum(r["n"] for r in rows) == len(lengths)
    assert all(r["n"] > 0 and r["bleu"] is not None for r in rows)


def test_bleu_by_length_errors():
    with pytest.raises(ValueError, match="overlap"):
        bleu_by_length(["a"], ["a"], ["a"], buckets=[(1, 10), (10, 20)])
    with pytest.raises(ValueError, match="low <= high"):
        bleu_by_length(["a"], ["a"], ["a"], buckets=[(5, 1)])
    with pytest.raises(ValueError, match="2 sources but 1 hypotheses"):
        bleu_by_length(["a", "b"], ["a"], ["a"])
    with pytest.raises(TypeError, match="length_fn"):
        bleu_by_length(["a"], ["a"], ["a"], length_fn=lambda s: 1.5)
