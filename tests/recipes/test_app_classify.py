"""Attention-pooling classifier: pooling maths, padding, training on a generated task, CLI, plot."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import cli
from attnlab.functional import padding_mask
from attnlab.inference.classify import Prediction
from attnlab.models.classifier import (
    AttentionPoolClassifier,
    AttentionPooling,
    ClassifierConfig,
    classifier_config,
)
from attnlab.recipes import classify as cl
from attnlab.train import TrainConfig
from attnlab.viz import format_token_weights

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FILLER = [
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "is",
    "it",
    "on",
    "at",
    "by",
    "we",
    "you",
    "they",
    "he",
    "she",
    "or",
    "as",
    "be",
    "this",
    "that",
    "with",
    "from",
    "have",
]
KEYWORDS = ["red", "blue", "green"]


def keyword_task(n: int, seed: int) -> list[tuple[str, str]]:
    """Label = the one colour word hidden among 4–12 filler words, at a random place."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        words = [rng.choice(FILLER) for _ in range(rng.randint(4, 12))]
        label = rng.choice(KEYWORDS)
        words.insert(rng.randrange(len(words) + 1), label)
        pairs.append((label, " ".join(words)))
    return pairs


def tiny_setup(out_dir=None, **model) -> cl.ClassifySetup:
    return dataclasses.replace(
        cl.PRESETS["tiny"],
        model_overrides=model,
        train=TrainConfig(
            out_dir=None if out_dir is None else str(out_dir),
            epochs=4,
            lr=3e-3,
            warmup_steps=10,
            log_every=10,
            progress=False,
            seed=0,
        ),
    )


@pytest.fixture(scope="module")
def trained():
    train_pairs, valid_pairs, test_pairs = keyword_task(600, 1), keyword_task(100, 2), keyword_task(150, 3)
    # No encoder layer: each pooled state is one token's own embedding, so the pooling weights
    # can be checked against the one token that decides the label.
    clf, result = cl.train_classifier(tiny_setup(n_layers=0), train_pairs, valid_pairs)
    return clf, result, test_pairs


def test_pooling_learns_to_find_the_keyword(trained):
    clf, _, test_pairs = trained
    assert clf.labels == sorted(KEYWORDS)
    assert clf.evaluate(test_pairs)["accuracy"] >= 0.95
    preds = clf.predict([text for _, text in test_pairs])
    on_keyword, ratios = [], []
    for p, (label, _) in zip(preds, test_pairs):
        words = [t.lstrip("▁") for t in p.tokens]
        assert words.count(label) == 1  # every keyword is one token of its own
        on_keyword.append(max(range(len(p.weights)), key=p.weights.__getitem__) == words.index(label))
        ratios.append(p.weights[words.index(label)] * len(words))  # 1.0 = what a uniform pooling gives
    # Nothing forces the softmax to single out the keyword (the classifier also works when a
    # little weight on it stands out against a constant background of filler words), but it
    # mostly does: chance for the top token would be about 1/9, and uniform weight 1.0.
    assert sum(on_keyword) / len(on_keyword) >= 0.5
    assert sum(ratios) / len(ratios) >= 2.0


def test_prediction_weights_are_a_distribution_over_the_tokens(trained):
    clf, _, test_pairs = trained
    for p in clf.predict([text for _, text in test_pairs[:20]]):
        assert len(p.weights) == len(p.tokens) >= 5
        assert min(p.weights) >= 0.0
        assert sum(p.weights) == pytest.approx(1.0, abs=1e-5)
        assert sum(p.probs.values()) == pytest.approx(1.0, abs=1e-5)


def reference_pooling(
    pool: AttentionPooling, states: torch.Tensor, lengths: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Yang et al.'s formula written out per sequence, over its real tokens only."""
    pooled, weights = [], torch.zeros(states.shape[:2])
    for b, n in enumerate(lengths):
        u = torch.tanh(states[b, :n] @ pool.k_proj.weight.T + pool.k_proj.bias)  # (n, D)
        alpha = torch.softmax(u @ pool.query, dim=0)  # (n,)
        weights[b, :n] = alpha
        pooled.append(alpha @ states[b, :n])
    return torch.stack(pooled), weights


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.integers(1, 9), min_size=1, max_size=4), seed=st.integers(0, 1000))
def test_attention_pooling_matches_the_formula_and_ignores_padding(lengths, seed):
    torch.manual_seed(seed)
    pool = AttentionPooling(8)
    S = max(lengths)
    states = torch.randn(len(lengths), S, 8)
    mask = padding_mask(torch.tensor(lengths), max_len=S)
    out = pool(states, mask)
    ref_pooled, ref_weights = reference_pooling(pool, states, lengths)
    torch.testing.assert_close(out.weights, ref_weights, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out.pooled, ref_pooled, rtol=1e-5, atol=1e-6)
    assert bool((out.weights[~mask] == 0).all())
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(len(lengths)))


def test_classifier_output_does_not_depend_on_padding():
    torch.manual_seed(0)
    model = AttentionPoolClassifier(classifier_config("tiny", vocab_size=30, n_classes=3, n_layers=2)).eval()
    ids = torch.tensor([[5, 6, 7, 8]])
    padded = torch.tensor([[5, 6, 7, 8, 0, 0, 0], [9, 10, 11, 12, 13, 14, 15]])
    alone, batched = model(ids), model(padded)
    torch.testing.assert_close(batched.logits[:1], alone.logits, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(batched.pool_weights[0, :4], alone.pool_weights[0], rtol=1e-5, atol=1e-6)
    assert bool((batched.pool_weights[0, 4:] == 0).all())


def test_encoder_attention_is_returned_on_request():
    model = AttentionPoolClassifier(classifier_config("tiny", vocab_size=30, n_classes=2, n_layers=2)).eval()
    out = model(torch.tensor([[3, 4, 5, 0]]), need_weights=True)
    assert out.loss is None and out.logits.shape == (1, 2)
    assert len(out.attentions) == 2 and out.attentions[0].shape == (1, 2, 4, 4)
    assert bool((out.attentions[0][..., 3] == 0).all())  # nobody attends to the padding


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="at least 2 classes"):
        ClassifierConfig(vocab_size=10, n_classes=1)
    model = AttentionPoolClassifier(classifier_config("tiny", vocab_size=10, n_classes=2))
    with pytest.raises(ValueError, match="at least one real token"):
        model(torch.tensor([[0, 0]]))
    pairs = keyword_task(20, 0)
    with pytest.raises(ValueError, match="at least 2"):
        cl.train_classifier(tiny_setup(), [("red", t) for _, t in pairs], [("red", "x")])
    with pytest.raises(ValueError, match="purple"):
        cl.train_classifier(tiny_setup(), pairs, [("purple", "the a")])
    with pytest.raises(ValueError, match="max_len"):
        cl.train_classifier(tiny_setup(max_len=8), pairs)
    with pytest.raises(ValueError, match="single example"):
        cl.split_validation([("a", "x"), ("b", "y"), ("b", "z")], 0.5)


def test_split_validation_is_stratified_and_disjoint():
    pairs = keyword_task(300, 5)
    train_part, valid_part = cl.split_validation(pairs, 0.2, seed=1)
    assert sorted(train_part + valid_part) == sorted(pairs)
    for label in KEYWORDS:
        n = sum(y == label for y, _ in pairs)
        assert sum(y == label for y, _ in valid_part) == round(0.2 * n)


def test_cli_trains_classifies_and_plots(tmp_path, capsys):
    data = tmp_path / "train.tsv"
    data.write_text("".join(f"{y}\t{t}\n" for y, t in keyword_task(400, 7)), encoding="utf-8")
    out = tmp_path / "run"
    assert (
        cli.main(
            [
                "train",
                "classify",
                "--data",
                str(data),
                "--out",
                str(out),
                "--preset",
                "tiny",
                "--epochs",
                "4",
                "--overrides",
                "train.progress=false",
            ]
        )
        == 0
    )
    evals = [json.loads(l)["eval"] for l in (out / "log.jsonl").read_text().splitlines() if "eval" in l]
    assert max(e["accuracy"] for e in evals) >= 0.9  # the default model (one encoder block) learns it too
    capsys.readouterr()
    plot = tmp_path / "weights.png"
    assert cli.main(["classify", "--model", str(out), "the blue of it", "a red and green", "--plot", str(plot)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("blue")
    assert "█" in printed and printed.count("\n") >= 10  # a header and one bar per token, for both texts
    assert plot.read_bytes()[:8] == PNG_MAGIC
    reloaded = cl.load_classifier(out)
    assert reloaded.labels == sorted(KEYWORDS)


def test_format_token_weights_scales_bars_to_the_largest_weight():
    p = Prediction("a b", "x", {"x": 0.75, "y": 0.25}, ["a", "b"], [0.25, 0.75])
    lines = format_token_weights(p, width=12).splitlines()
    assert lines[0].startswith("x") and "x 0.75" in lines[0]
    assert lines[1].count("█") == 4 and lines[2].count("█") == 12
