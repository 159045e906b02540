"""``attnlab explain``: its printed numbers against plain-Python maths, its options and its errors."""

from __future__ import annotations

import math
import re
import warnings

import pytest

from attnlab.cli import main
from attnlab.explain import compute_steps


def softmax(xs: list[float]) -> list[float]:
    top = max(xs)
    exps = [math.exp(x - top) for x in xs]
    return [e / sum(exps) for e in exps]


def run(capsys, *argv: str) -> str:
    assert main(["explain", *argv]) == 0
    return capsys.readouterr().out


def sections(out: str) -> dict[str, list[float]]:
    """The numbers of each numbered step ("1." … "4."), read back from the printed text."""
    found: dict[str, list[float]] = {}
    for block in out.split("\n\n"):
        head, *rows = block.splitlines()
        m = re.match(r"([1-4])\.", head)
        if not m:
            continue
        if m.group(1) == "4":
            found["4"] = [float(x) for x in re.findall(r"-?\d+\.\d+", rows[0])]
        else:
            # "   book 1: 0.4810  ████" -> 0.4810; the "sum" row is not a book.
            found[m.group(1)] = [
                float(re.search(r":\s*(-?\d+\.\d+)", r).group(1)) for r in rows if re.search(r"\d:", r)
            ]
    return found


def assert_printed(printed: list[float], expected: list[float]) -> None:
    assert len(printed) == len(expected)
    for p, e in zip(printed, expected):
        assert p == pytest.approx(e, abs=5.1e-5), (printed, expected)  # printed with 4 decimals


def test_default_three_books(capsys):
    out = run(capsys)
    raw = [8.0, 4.0, 2.0]
    scaled = [s / math.sqrt(64) for s in raw]
    weights = softmax(scaled)
    got = sections(out)
    assert_printed(got["1"], raw)
    assert_printed(got["2"], scaled)
    assert_printed(got["3"], weights)
    assert_printed(got["4"], weights)  # one-hot values: the output is the weights themselves
    assert "√d_k = 8" in out and "d_k = 64" in out
    assert "sum: 1.0000" in out
    assert f"book 1 ({100 * weights[0]:.1f}% of the weight)" in out
    assert "almost one-hot" not in out


def test_steps_at_full_precision():
    steps = compute_steps([3.0, -1.0, 0.5, 2.0], d_k=16)
    scaled = [s / 4 for s in (3.0, -1.0, 0.5, 2.0)]
    assert steps.scaled.tolist() == pytest.approx(scaled, abs=1e-15)
    assert steps.weights.tolist() == pytest.approx(softmax(scaled), abs=1e-15)
    assert steps.output.tolist() == pytest.approx(softmax(scaled), abs=1e-15)


def test_no_scale_saturates(capsys):
    out = run(capsys, "--scores", "8", "4", "2", "--no-scale")
    weights = softmax([8.0, 4.0, 2.0])
    got = sections(out)
    assert_printed(got["2"], [8.0, 4.0, 2.0])
    assert_printed(got["3"], weights)
    assert weights[0] > 0.95 and "almost one-hot" in out
    assert "--no-scale" in out


def test_d_k_changes_the_scaling(capsys):
    out = run(capsys, "--scores", "1", "2", "--d-k", "4")
    got = sections(out)
    assert_printed(got["2"], [0.5, 1.0])
    assert_printed(got["3"], softmax([0.5, 1.0]))


def test_query_and_keys_with_values(capsys):
    query = [1.0, 0.0, 2.0]
    keys = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.5, -2.0, 0.25]]
    values = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [-1.0, 0.0]]
    argv = ["--query", *map(str, query), "--keys", *(",".join(map(str, k)) for k in keys)]
    argv += ["--values", *(",".join(map(str, v)) for v in values)]
    out = run(capsys, *argv)
    raw = [sum(q * k for q, k in zip(query, key)) for key in keys]
    scaled = [r / math.sqrt(3) for r in raw]  # d_k is the vectors' length
    w = softmax(scaled)
    mixed = [sum(w[s] * values[s][d] for s in range(4)) for d in range(2)]
    got = sections(out)
    assert_printed(got["1"], raw)
    assert_printed(got["2"], scaled)
    assert_printed(got["3"], w)
    assert_printed(got["4"], mixed)
    assert "book 4" in out and "d_k = 3" in out


def test_japanese(capsys):
    out = run(capsys, "--lang", "ja")
    assert "本1" in out and "本3" in out and "ソフトマックス" in out and "合計: 1.0000" in out
    assert "book" not in out
    assert_printed(sections(out)["3"], softmax([1.0, 0.5, 0.25]))


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_plot_writes_png(capsys, tmp_path, lang):
    path = tmp_path / "figs" / "x.png"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = run(capsys, "--plot", str(path), "--lang", lang)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 5000
    assert str(path) in out
    missing = [str(w.message) for w in caught if "missing from" in str(w.message)]
    assert not missing, missing  # Japanese labels render with a CJK font, not as empty boxes


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--query", "1", "0", "--keys", "1,0", "1"], "all keys must have the same length"),
        (["--query", "1", "0"], "give --query and --keys together"),
        (["--keys", "1,0", "0,1"], "give --query and --keys together"),
        (["--query", "1", "0", "2", "--keys", "1,0", "0,1"], "query has 3 numbers but each key has 2"),
        (["--query", "1", "0", "--keys", "1,x", "0,1"], "keys must be comma-separated numbers"),
        (["--values", "1,0", "0,1"], "got 2 value vectors for 3 keys"),
        (["--d-k", "0"], "d_k must be ≥ 1"),
        (["--scores", "1", "2", "--query", "1", "--keys", "1"], "either --scores or --query"),
    ],
)
def test_bad_input_exits_2_with_message(capsys, argv, message):
    assert main(["explain", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("attnlab: error: ") and message in captured.err
    assert "Traceback" not in captured.err


def test_bad_option_values_exit_2(capsys):
    for argv, message in ((["--lang", "fr"], "invalid choice: 'fr'"), (["--d-k", "many"], "invalid int value")):
        with pytest.raises(SystemExit) as exc:
            main(["explain", *argv])
        assert exc.value.code == 2
        assert message in capsys.readouterr().err
