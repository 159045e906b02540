"""The lesson's arithmetic computed in the page (``attnlab/web/static/engine/lessonmath.js``)
equals its Python reference (the ``attnlab.web.lesson`` functions), run under Node on the same
settings: every slider position a widget offers, edge values, and bad input, which must be refused
with the same one-line message in both languages.

Numbers are compared within 1e-12 (relative for numbers above 1: exp(10) ≈ 22026 carries about
4e-12 of rounding); numbers the reference rounds must be exactly equal. Skips only without
``node`` on PATH.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import random
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from attnlab.web.lesson import s03_query_key_value as S3
from attnlab.web.lesson import s05_multi_head as S5
from attnlab.web.lesson import s06_positional_encoding as S6
from attnlab.web.lesson import s08_variants_and_exercises as S8

RUNNER = Path(__file__).resolve().parents[2] / "js" / "run_lessonmath.mjs"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not on PATH: the page's JavaScript cannot be run here")

TOL = 1e-12


def _json_arg(x):
    """``x`` as JSON the runner revives: NaN and ±inf, which JSON cannot carry, as ``{"$float": ...}``."""
    if isinstance(x, float) and not math.isfinite(x):
        return {"$float": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}
    if isinstance(x, dict):
        return {k: _json_arg(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_arg(v) for v in x]
    return x


def run_js(fn: str, cases: list[dict]) -> list[dict]:
    """``fn`` of lessonmath.js on each case's keyword arguments: ``{"ok": result}`` or ``{"error": message}``."""
    proc = subprocess.run(
        [NODE, str(RUNNER)],
        input=json.dumps({"fn": fn, "cases": _json_arg(cases)}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    answers = json.loads(proc.stdout)
    assert len(answers) == len(cases)
    return answers


def run_py(fn, cases: list[dict]) -> list[dict]:
    """The reference on the same cases, answered as the runner answers."""
    answers = []
    for kwargs in cases:
        try:
            answers.append({"ok": dataclasses.asdict(fn(**kwargs))})
        except ValueError as err:
            answers.append({"error": str(err)})
    return answers


def assert_same(got, want, where: str = "") -> None:
    """Equal structure; numbers within TOL (relative above 1), everything else exactly equal."""
    if isinstance(want, bool) or isinstance(got, bool):
        assert got is want, f"{where}: {got!r} != {want!r}"
    elif isinstance(want, (int, float)):
        assert isinstance(got, (int, float)), f"{where}: {got!r} is not a number"
        assert abs(got - want) <= TOL * max(1.0, abs(want)), f"{where}: {got!r} != {want!r}"
    elif isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            assert_same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: {got!r} != {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def assert_parity(js_fn: str, py_fn, cases: list[dict]) -> list[dict]:
    got, want = run_js(js_fn, cases), run_py(py_fn, cases)
    for case, g, w in zip(cases, got, want):
        assert_same(g, w, f"{js_fn}({case})")
    return want


# --------------------------------------------------------------------------------------------
# §3 The three books.
# --------------------------------------------------------------------------------------------

SLIDER_SCORES = [x / 2 for x in range(-20, 21)]  # the widget's sliders: -10 … 10 in steps of 0.5
SLIDER_DK = [2**i for i in range(11)]  # the d_k slider: 1 … 1024, powers of two


def test_three_books_every_slider_position():
    """Each book's slider over all its positions (the others at 8, 4, 2), for every d_k, with and
    without the division; and 300 random settings of all three."""
    cases = []
    for book, x, d_k, scale in itertools.product(range(3), SLIDER_SCORES, SLIDER_DK, (True, False)):
        scores = list(S3.DEFAULT_BOOK_SCORES)
        scores[book] = x
        cases.append({"scores": scores, "d_k": d_k, "scale": scale})
    rng = random.Random(36)
    for _ in range(300):
        cases.append(
            {
                "scores": [rng.choice(SLIDER_SCORES) for _ in range(3)],
                "d_k": rng.choice(SLIDER_DK),
                "scale": rng.random() < 0.5,
            }
        )
    want = assert_parity("threeBooks", S3.three_books, cases)
    assert all("ok" in w for w in want)


@pytest.mark.parametrize(
    "case",
    [
        {},  # the defaults: the worked example 8, 4, 2 with d_k = 64
        {"scores": [10, 10, 10], "d_k": 1, "scale": True},
        {"scores": [-10, -10, -10], "d_k": 1, "scale": False},
        {"scores": [10, -10, 0], "d_k": 1, "scale": False},  # exp spans 4.5e-5 … 22026
        {"scores": [0.1, -0.3, 1e-9], "d_k": 3, "scale": True},  # off the sliders, still allowed
        {"scores": [8.0, 4.0, 2.0], "d_k": 64.0, "scale": True},  # whole floats are whole numbers
        {"scores": [0, 0, 0], "d_k": 1024, "scale": True},
    ],
)
def test_three_books_edge_values(case):
    want = assert_parity("threeBooks", S3.three_books, [case])
    assert "ok" in want[0]


def test_the_default_three_books_are_the_worked_example_in_both():
    (got,) = run_js("threeBooks", [{}])
    assert [round(w, 3) for w in got["ok"]["weights"]] == [0.481, 0.292, 0.227]
    assert got["ok"]["scaled"] == [1.0, 0.5, 0.25]


@pytest.mark.parametrize(
    "case, message",
    [
        ({"scores": [8, 4]}, "the three books need 3 scores, one per book"),
        ({"scores": [8, 4, 2, 1]}, "the three books need 3 scores, one per book"),
        ({"scores": "8,4,2"}, "the three books need 3 scores, one per book"),
        ({"scores": None}, "the three books need 3 scores, one per book"),
        ({"scores": [8, 4, 11]}, "book 3's score must be a number from -10 to 10"),
        ({"scores": [-10.5, 4, 2]}, "book 1's score must be a number from -10 to 10"),
        ({"scores": [8, "4", 2]}, "book 2's score must be a number from -10 to 10"),
        ({"scores": [8, None, 2]}, "book 2's score must be a number from -10 to 10"),
        ({"scores": [8, True, 2]}, "book 2's score must be a number from -10 to 10"),
        ({"scores": [float("nan"), 4, 2]}, "book 1's score must be a number from -10 to 10"),
        ({"scores": [8, 4, float("inf")]}, "book 3's score must be a number from -10 to 10"),
        ({"d_k": 0}, "d_k must be a whole number from 1 to 1024"),
        ({"d_k": 2048}, "d_k must be a whole number from 1 to 1024"),
        ({"d_k": 6.5}, "d_k must be a whole number from 1 to 1024"),
        ({"d_k": "64"}, "d_k must be a whole number from 1 to 1024"),
        ({"d_k": True}, "d_k must be a whole number from 1 to 1024"),
        ({"d_k": float("inf")}, "d_k must be a whole number from 1 to 1024"),
        ({"scale": "yes"}, "scale must be true or false"),
        ({"scale": 1}, "scale must be true or false"),
        ({"scale": None}, "scale must be true or false"),
        ({"scores": [8, 4, 11], "d_k": 0}, "book 3's score must be a number from -10 to 10"),  # the first problem
    ],
)
def test_three_books_bad_input_gives_the_same_message(case, message):
    (got,) = run_js("threeBooks", [case])
    (want,) = run_py(S3.three_books, [case])
    assert got == want == {"error": message}


# --------------------------------------------------------------------------------------------
# Random numbers: the page's TorchGenerator draws torch.randn's numbers.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 7, 4095, 123_456, 1_000_000, 2**31 + 5, 2**32 - 1])
def test_seeded_randn_is_torch_randn(seed):
    """Both of torch's paths: fewer than 16 numbers (Box–Muller pairs) and 16 or more (blocks of
    16, a last partial block redrawn), every count from 1 to 80 and a few large ones."""
    sizes = list(range(1, 81)) + [128, 1000, 4096]
    got = run_js("seededRandn", [{"seed": seed, "n": n} for n in sizes])
    for n, answer in zip(sizes, got):
        g = torch.Generator().manual_seed(seed)
        want = torch.randn(n, generator=g, dtype=torch.float64).tolist()
        assert_same(answer["ok"], want, f"randn({n}, seed={seed})")


# --------------------------------------------------------------------------------------------
# §6 The sinusoid table, RoPE.
# --------------------------------------------------------------------------------------------

SLIDER_LENGTHS = list(range(2, 65))  # the pe-table widget's length slider
SLIDER_WIDTHS = list(range(4, 129, 4))  # its d_model slider (steps of 4)


def test_positions_every_slider_position():
    """Every length at the default width and the widest, every width at the default length and the
    longest, and 40 random settings; the rounded numbers equal digit for digit."""
    cases = [{"length": t, "d_model": d} for t in SLIDER_LENGTHS for d in (4, 32, 128)]
    cases += [{"length": t, "d_model": d} for d in SLIDER_WIDTHS for t in (2, 16, 64)]
    rng = random.Random(6)
    cases += [{"length": rng.choice(SLIDER_LENGTHS), "d_model": rng.choice(SLIDER_WIDTHS)} for _ in range(40)]
    cases += [{}, {"length": 5, "d_model": 6}, {"length": 16.0, "d_model": 32.0}]  # off the slider's steps
    got, want = run_js("positions", cases), run_py(S6.positions, cases)
    for case, g, w in zip(cases, got, want):
        assert "ok" in w and g == w, f"positions({case})"  # exactly equal: both rounded the same way


def _last_digit_apart(got, want, unit: float) -> bool:
    """Equal, or one unit of the last kept decimal apart."""
    return got == want or abs(got - want) <= unit * (1 + 1e-9)


def test_rope_every_seed_the_widget_reaches_first():
    """The widget changes only the seed (its redraw button counts up from 0): seeds 0 … 299 at the
    widget's size, and other sizes and seeds; the rounded numbers equal digit for digit.

    One exception, at widths the widget never uses: q and k have two decimals, so q·k is a
    multiple of 0.0001, and where √D is whole (D = 4, 16, 36, 64) q·k/√D can be an exact tie at
    the kept decimal (0.6505625 to 6 decimals). Its last digit then depends on the order the two
    languages add in, and may differ by one unit there (plain, and the diagonal of scores).
    """
    cases = [{"seed": seed} for seed in range(300)]
    sizes = [(t, d) for t in (2, 12, 32) for d in (2, 4, 8, 14, 16, 36, 64)]
    cases += [{"length": t, "d_model": d, "seed": seed} for t, d in sizes for seed in (0, 5, 11)]
    cases += [{"length": 12.0, "d_model": 8.0, "seed": 1_000_000}]
    got, want = run_js("ropeScores", cases), run_py(S6.rope_scores, cases)
    for case, g, w in zip(cases, got, want):
        assert "ok" in w, f"ropeScores({case})"
        g, w = g["ok"], w["ok"]
        if math.isqrt(w["d_model"]) ** 2 != w["d_model"]:
            assert g == w, f"ropeScores({case})"
            continue
        assert {k: v for k, v in g.items() if k not in ("plain", "scores")} == {
            k: v for k, v in w.items() if k not in ("plain", "scores")
        }
        assert _last_digit_apart(g["plain"], w["plain"], 1e-6), f"ropeScores({case}).plain"
        for m, (grow, wrow) in enumerate(zip(g["scores"], w["scores"], strict=True)):
            for n, (x, y) in enumerate(zip(grow, wrow, strict=True)):
                assert x == y if m != n else _last_digit_apart(x, y, 1e-5), f"ropeScores({case}).scores[{m}][{n}]"


@pytest.mark.parametrize(
    "fn, js, case, message",
    [
        (S6.positions, "positions", {"length": 1}, "length must be a whole number from 2 to 64"),
        (S6.positions, "positions", {"length": 65}, "length must be a whole number from 2 to 64"),
        (S6.positions, "positions", {"length": 2.5}, "length must be a whole number from 2 to 64"),
        (S6.positions, "positions", {"length": "16"}, "length must be a whole number from 2 to 64"),
        (S6.positions, "positions", {"length": None}, "length must be a whole number from 2 to 64"),
        (S6.positions, "positions", {"d_model": 2}, "d_model must be a whole number from 4 to 128"),
        (S6.positions, "positions", {"d_model": 130}, "d_model must be a whole number from 4 to 128"),
        (S6.positions, "positions", {"d_model": 7}, "d_model must be even (sines and cosines come in pairs), got 7"),
        (S6.positions, "positions", {"d_model": 7.0}, "d_model must be even (sines and cosines come in pairs), got 7"),
        (S6.positions, "positions", {"d_model": True}, "d_model must be a whole number from 4 to 128"),
        (S6.rope_scores, "ropeScores", {"length": 1}, "length must be a whole number from 2 to 32"),
        (S6.rope_scores, "ropeScores", {"length": 33}, "length must be a whole number from 2 to 32"),
        (S6.rope_scores, "ropeScores", {"d_model": 7}, "d_model must be even (RoPE turns pairs of components), got 7"),
        (S6.rope_scores, "ropeScores", {"d_model": 66}, "d_model must be a whole number from 2 to 64"),
        (S6.rope_scores, "ropeScores", {"seed": -1}, "seed must be a whole number from 0 to 1000000"),
        (S6.rope_scores, "ropeScores", {"seed": 1_000_001}, "seed must be a whole number from 0 to 1000000"),
        (S6.rope_scores, "ropeScores", {"seed": "1"}, "seed must be a whole number from 0 to 1000000"),
        (S6.rope_scores, "ropeScores", {"seed": float("nan")}, "seed must be a whole number from 0 to 1000000"),
    ],
)
def test_positions_and_rope_bad_input_gives_the_same_message(fn, js, case, message):
    (got,) = run_js(js, [case])
    (want,) = run_py(fn, [case])
    assert got == want == {"error": message}


# --------------------------------------------------------------------------------------------
# §5 Multi-head attention on a tiny example.
# --------------------------------------------------------------------------------------------

WIDGET_D = [4, 8, 12, 16]  # the multihead widgets' d_model choices
WIDGET_H = [1, 2, 3, 4, 6, 8]  # their head choices (only those dividing d_model are offered)


def _multihead_py(**kwargs):
    """The reference's answer as JSON carries it, without the check against the module itself
    (which the page cannot run)."""
    got = S5.multihead_example(**kwargs).model_dump(mode="json")
    got.pop("module_max_abs_diff")
    return got


def test_multihead_every_choice_the_widgets_offer():
    """Every (d_model, heads) pair the widgets offer on the default words of both languages; a
    few pairs with another seed, one word and twelve words."""
    texts = ["the cat sat down", "猫 が 魚 を 食べた", "alone", " ".join(f"w{i}" for i in range(12))]
    pairs = [(d, h) for d in WIDGET_D for h in WIDGET_H if d % h == 0]
    cases = [{"text": text, "d_model": d, "n_heads": h} for text in texts[:2] for d, h in pairs]
    few = [(4, 1), (8, 2), (12, 3), (16, 8)]
    cases += [{"text": texts[0], "d_model": d, "n_heads": h, "seed": 3} for d, h in few]
    cases += [{"text": text, "d_model": d, "n_heads": h} for text in texts[2:] for d, h in few]
    cases += [{}, {"d_model": 2, "n_heads": 1}, {"d_model": 3, "n_heads": 3, "seed": 1_000_000}]
    cases += [{"text": "  tabs\tand\u3000ideographic  spaces\n"}, {"text": "x" * 24}]
    got = run_js("multihead", cases)
    for case, g in zip(cases, got):
        assert "ok" in g, f"multihead({case}): {g}"
        assert_same(g["ok"], _multihead_py(**case), f"multihead({case})")


@pytest.mark.parametrize(
    "case",
    [
        {"text": ""},
        {"text": "   "},
        {"text": "x" * 301},
        {"text": " ".join(["w"] * 13)},
        {"text": "a " + "x" * 25},
        {"text": "it's " + "y'" * 13},  # a word with a quote: Python's repr picks the other quote
        {"text": 'say "' + "z" * 30 + "'"},
        {"text": "back\\slash" * 3},
        {"text": None},
        {"d_model": 1},
        {"d_model": 17},
        {"d_model": 8.5},
        {"n_heads": 0},
        {"n_heads": 9},
        {"d_model": 8, "n_heads": 3},
        {"d_model": 8.0, "n_heads": 3.0},
        {"seed": -1},
        {"seed": "0"},
        {"seed": True},
    ],
)
def test_multihead_bad_input_gives_the_same_message(case):
    (got,) = run_js("multihead", [case])
    try:
        S5.multihead_example(**case)
    except ValueError as err:
        want = {"error": str(err)}
    else:
        pytest.fail(f"the reference accepted {case}")
    assert got == want


# --------------------------------------------------------------------------------------------
# §3 Random q and k.
# --------------------------------------------------------------------------------------------


def _dk_py(**kwargs):
    return S3.dk_spread(**kwargs).model_dump(mode="json")


def test_dk_spread_every_dk_the_slider_offers():
    """The widget sends d_k (a power of two) and a seed: every d_k for seed 0 (each answer's table
    holds every d_k), other seeds and the request's other sizes; histogram counts equal exactly,
    the rest within 1e-12."""
    cases = [{"d_k": d_k} for d_k in S3.DK_VALUES] + [{"d_k": 1024, "seed": 3}]
    cases += [{"seed": seed} for seed in (1, 1_000_000)]
    cases += [
        {"d_k": 1, "samples": 16, "keys": 2, "seed": 5},
        {"d_k": 1024, "samples": 1024, "keys": 4, "seed": 0},
        {"d_k": 2, "samples": 256, "keys": 16, "seed": 7},
        {"d_k": 64.0, "samples": 17, "keys": 3, "seed": 8.0},
    ]
    got = run_js("dkSpread", cases)
    for case, g in zip(cases, got):
        assert "ok" in g, f"dkSpread({case}): {g}"
        w = _dk_py(**case)
        for hist in ("raw_hist", "scaled_hist"):
            assert g["ok"][hist] == w[hist], f"dkSpread({case}).{hist}"
        assert_same(g["ok"], w, f"dkSpread({case})")


@pytest.mark.parametrize(
    "case, message",
    [
        ({"d_k": 3}, "d_k moves in powers of two from 1 to 1024, got 3"),
        ({"d_k": 0}, "d_k must be a whole number from 1 to 1024"),
        ({"d_k": 2048}, "d_k must be a whole number from 1 to 1024"),
        ({"d_k": 6.5}, "d_k must be a whole number from 1 to 1024"),
        ({"d_k": "64"}, "d_k must be a whole number from 1 to 1024"),
        ({"samples": 15}, "samples must be a whole number from 16 to 1024"),
        ({"keys": 17}, "keys must be a whole number from 2 to 16"),
        ({"keys": 1}, "keys must be a whole number from 2 to 16"),
        ({"seed": -1}, "seed must be a whole number from 0 to 1000000"),
        ({"seed": None}, "seed must be a whole number from 0 to 1000000"),
        ({"samples": 1024, "keys": 8}, "samples × keys = 8192 is more than 4096 scores"),
    ],
)
def test_dk_spread_bad_input_gives_the_same_message(case, message):
    (got,) = run_js("dkSpread", [case])
    with pytest.raises(ValueError) as err:
        S3.dk_spread(**case)
    assert got == {"error": str(err.value)} == {"error": message}


# --------------------------------------------------------------------------------------------
# §8 The heatmap exercise.
# --------------------------------------------------------------------------------------------


def test_attention_map_every_variant_and_setting():
    """Every variant, with and without the causal mask, over every reach, block, dilation and
    number of global positions the requests allow (the others at their defaults), on the default
    words, a Japanese sentence, one word and twelve, and a few seeds."""
    texts = ["The cat sat on the mat", "猫 が 犬 を 追う", "alone", " ".join(f"w{i}" for i in range(12))]
    cases = []
    for variant, causal in itertools.product(S8.VARIANTS, (False, True)):
        cases += [{"variant": variant, "causal": causal, "text": text} for text in texts]
        cases += [{"variant": variant, "causal": causal, "text": texts[3], "reach": r} for r in range(1, 17)]
        cases += [{"variant": variant, "causal": causal, "text": texts[3], "block": b} for b in (1, 2, 3, 5, 12, 32)]
        cases += [{"variant": variant, "causal": causal, "text": texts[3], "dilation": d} for d in range(1, 5)]
        cases += [{"variant": variant, "causal": causal, "text": texts[3], "n_global": n} for n in range(5)]
        cases += [{"variant": variant, "causal": causal, "seed": seed} for seed in (1, 7, 1_000_000)]
    got = run_js("attentionMap", cases)
    for case, g in zip(cases, got):
        assert "ok" in g, f"attentionMap({case}): {g}"
        w = S8.attention_map_view(**case).model_dump(mode="json")
        assert g["ok"]["mask"] == w["mask"], f"attentionMap({case}).mask"
        assert_same(g["ok"], w, f"attentionMap({case})")


@pytest.mark.parametrize(
    "case",
    [
        {"text": ""},
        {"text": " "},
        {"text": " ".join(["w"] * 13)},
        {"variant": "linear"},
        {"variant": None},
        {"reach": 0},
        {"reach": 17},
        {"block": 33},
        {"dilation": 5},
        {"n_global": -1},
        {"n_global": 5},
        {"causal": "no"},
        {"seed": 1_000_001},
        {"seed": 2.5},
    ],
)
def test_attention_map_bad_input_gives_the_same_message(case):
    (got,) = run_js("attentionMap", [case])
    with pytest.raises(ValueError) as err:
        S8.attention_map_view(**case)
    assert got == {"error": str(err.value)}


# --------------------------------------------------------------------------------------------
# §6 Word order: one self-attention layer over two orders of the same words.
# --------------------------------------------------------------------------------------------


def _pydantic_free(response) -> dict:
    return response.model_dump(mode="json")


def test_word_order_every_width_and_many_sentences():
    """Every even width the request allows on the default pair, the widget's swap, and reorderings
    of Japanese, English and repeated words over several seeds: every output, difference and
    sentence difference equal (float64 in both)."""
    pairs = [
        ("猫 が 犬 を 追う", "犬 が 猫 を 追う"),
        ("犬 が 猫 を 追う", "猫 が 犬 を 追う"),
        ("the dog bites the man", "the man bites the dog"),
        ("a b", "b a"),
        ("x x y", "y x x"),
        (" ".join(f"w{i}" for i in range(12)), " ".join(f"w{i}" for i in reversed(range(12)))),
        ("same order here", "same order here"),
    ]
    cases = [{"a": a, "b": b, "d_model": d} for d in range(4, 65, 2) for a, b in pairs[:1]]
    cases += [{"a": a, "b": b, "seed": seed} for a, b in pairs for seed in (0, 3, 1_000_000)]
    got = run_js("wordOrder", cases)
    for case, g in zip(cases, got):
        assert "ok" in g, f"wordOrder({case}): {g}"
        want = _pydantic_free(S6.word_order_view(**case))
        assert g["ok"]["match"] == want["match"] and g["ok"]["tokens_b"] == want["tokens_b"]
        assert_same(g["ok"], want, f"wordOrder({case})")


@pytest.mark.parametrize(
    "case",
    [
        {"a": ""},
        {"b": "x" * 301},
        {"a": "猫", "b": "猫"},
        {"a": "a b c", "b": "a b d"},
        {"a": "a b", "b": "a b b"},
        {"d_model": 5},
        {"d_model": 2},
        {"d_model": 66},
        {"d_model": 8.5},
        {"seed": -1},
        {"seed": True},
        {"a": " ".join(["w"] * 13), "b": " ".join(["w"] * 13)},
        {"a": "a " + "z" * 25, "b": "z" * 25 + " a"},
    ],
)
def test_word_order_bad_input_gives_the_same_message(case):
    (got,) = run_js("wordOrder", [case])
    with pytest.raises(ValueError) as err:
        S6.word_order_view(**case)
    assert got == {"error": str(err.value)}


# --------------------------------------------------------------------------------------------
# §8 Variants: masks, cost against length, the measured tables.
# --------------------------------------------------------------------------------------------


def test_variants_every_setting_the_sliders_offer():
    """Every length, reach, dilation and number of global positions the widget's sliders offer
    (reach 1–8; block sizes 1–16 sampled; one at a time, the others at their defaults), with and
    without the causal mask, from the same measured file the page fetches."""
    measured = json.loads(S8.LONG_CONTEXT_FILE.read_text(encoding="utf-8"))
    cases = []
    for causal in (False, True):
        cases += [{"causal": causal, "length": n} for n in range(2, 33)]
        cases += [{"causal": causal, "reach": r} for r in range(1, 9)]
        cases += [{"causal": causal, "block": b} for b in (1, 2, 3, 5, 8, 16)]
        cases += [{"causal": causal, "dilation": d} for d in range(1, 5)]
        cases += [{"causal": causal, "n_global": g} for g in range(5)]
    got = run_js("variants", [{**c, "measured": measured} for c in cases])
    for case, g in zip(cases, got):
        assert "ok" in g, f"variants({case}): {g}"
        want = S8.variants_view(**case).model_dump(mode="json")
        assert g["ok"]["masks"] == want["masks"] and g["ok"]["cost"] == want["cost"], f"variants({case})"
        assert_same(g["ok"], want, f"variants({case})")


@pytest.mark.parametrize(
    "case",
    [{"length": 1}, {"length": 33}, {"reach": 0}, {"block": 33}, {"dilation": 0}, {"n_global": 5}, {"causal": 1}],
)
def test_variants_bad_input_gives_the_same_message(case):
    (got,) = run_js("variants", [case])
    with pytest.raises(ValueError) as err:
        S8.variants_view(**case)
    assert got == {"error": str(err.value)}
