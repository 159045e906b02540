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

from attnlab.web.lesson import s03_query_key_value as S3

RUNNER = Path(__file__).parent / "js" / "run_lessonmath.mjs"
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
