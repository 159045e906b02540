"""precision="auto": bf16 only where a probe of the model's steps shows it faster; cached; harmless."""

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlab.accel import precision as inference_precision
from attnlab.accel import rules
from attnlab.cli import JOBS
from attnlab.data.tasks import make_splits
from attnlab.experiments import demo
from attnlab.recipes import translate as tr
from attnlab.train import TrainConfig
from attnlab.train import precision as P  # the probe, the rule and their cache: patched where they live


@pytest.fixture(autouse=True)
def _measuring_on(monkeypatch):
    # tests/conftest.py turns measuring off for the suite (ATTNLAB_CALIBRATE=0: "auto" is fp32);
    # these tests are of the probe itself, on fake clocks and injected times.
    monkeypatch.setenv("ATTNLAB_CALIBRATE", "1")


@pytest.fixture(scope="module")
def splits():
    return make_splits("numbers-en-ja", 120, 10, 0, seed=5)


def setup(out, precision, **fields):
    train = TrainConfig(
        out_dir=str(out), max_steps=6, lr=3e-3, warmup_steps=2, log_every=1, progress=False, seed=3, precision=precision
    )
    return dataclasses.replace(
        tr.PRESETS["tiny"], max_tokens=200, eval_sentences=4, model_overrides={"dropout": 0.1}, train=train, **fields
    )


def losses(out):
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    return [r["loss"] for r in records if "loss" in r]


def _fake_clock(monkeypatch, durations):
    ticks = iter(x for d in durations for x in (0.0, d))  # each run: start, start + duration
    monkeypatch.setattr(P.time, "perf_counter", lambda: next(ticks))


def test_probe_takes_the_fastest_interleaved_run_after_a_warm_up(monkeypatch):
    calls = []
    # warm-ups fp32 1.5, bf16 2.0 (not clearly apart), then fp32 5, bf16 3, fp32 2, bf16 4
    _fake_clock(monkeypatch, [1.5, 2.0, 5.0, 3.0, 2.0, 4.0])
    best = P.probe_precision(calls.append, repeats=2)
    assert calls == ["fp32", "bf16"] * 4  # one untimed run and one warm-up each, then two interleaved rounds
    assert best == {"fp32": 2.0, "bf16": 3.0}


def test_probe_stops_after_the_warm_ups_when_they_are_clearly_apart(monkeypatch):
    calls = []
    _fake_clock(monkeypatch, [1.0, 20.0])  # emulated bf16: 20× slower
    assert P.probe_precision(calls.append, repeats=2) == {"fp32": 1.0, "bf16": 20.0}
    assert calls == ["fp32", "bf16"] * 2  # the untimed runs, then the warm-ups


@pytest.mark.parametrize(
    ("fp32", "bf16", "chosen"),
    [
        (1.05, 1.0, "bf16"),  # 5% faster: measurably faster, bf16
        (1.04, 1.0, "fp32"),  # 4% faster: within the noise margin, fp32 kept
        (1.0, 1.0, "fp32"),  # a tie keeps fp32's arithmetic
        (1.0, 3.0, "fp32"),
    ],
)
def test_the_probe_and_the_rule_pick_bf16_only_when_measurably_faster(monkeypatch, fp32, bf16, chosen):
    # The real probe on a fake clock: warm-ups, then two interleaved rounds, all at these times.
    _fake_clock(monkeypatch, [fp32, bf16] * 3)
    times = P.probe_precision(lambda precision: None, repeats=2)
    assert times == {"fp32": fp32, "bf16": bf16}
    assert P.choose_precision(times) == chosen


@given(
    fp32=st.floats(min_value=1e-4, max_value=1e3, allow_nan=False),
    bf16=st.floats(min_value=1e-4, max_value=1e3, allow_nan=False),
)
def test_auto_is_never_more_than_5_percent_slower_than_the_faster_precision(fp32, bf16):
    times = {"fp32": fp32, "bf16": bf16}
    chosen = P.choose_precision(times)
    assert times[chosen] <= 1.05 * min(fp32, bf16) * (1 + 1e-12)
    if chosen == "bf16":
        assert bf16 < fp32  # bf16's different arithmetic only for a real gain


@pytest.mark.parametrize(("fp32", "bf16", "chosen"), [(1.0, 0.5, "bf16"), (1.0, 2.0, "fp32"), (1.0, 0.97, "fp32")])
def test_auto_picks_bf16_only_when_measured_faster(tmp_path, monkeypatch, splits, capsys, fp32, bf16, chosen):
    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(rules, "busy", lambda: False)  # a quiet machine: its measurement is final
    monkeypatch.setattr(P, "probe_precision", lambda step, repeats=2: {"fp32": fp32, "bf16": bf16})
    _, result, _ = tr.train_translation(setup(tmp_path / "run", "auto"), splits.train, splits.valid)
    assert result.precision == chosen
    err = capsys.readouterr().err
    assert f"precision auto → {chosen}" in err and "measured now" in err
    cached = json.loads((tmp_path / "cache" / "precision.json").read_text())
    assert list(cached.values()) == [{"fp32": fp32, "bf16": bf16, "busy": False}]
    # The second run on this machine and model reads the cache instead of probing again.
    monkeypatch.setattr(P, "probe_precision", lambda step, repeats=2: pytest.fail("probed again"))
    _, again, _ = tr.train_translation(setup(tmp_path / "again", "auto"), splits.train, splits.valid)
    assert again.precision == chosen and "(cached;" in capsys.readouterr().err


def test_a_probe_taken_on_a_busy_machine_is_taken_again_once_it_is_quiet(tmp_path, monkeypatch, splits, capsys):
    # Other jobs on the cores distort both timings; such a figure holds while the machine stays
    # busy and is replaced by a quiet one (as the calibration and the inference probe do).
    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path / "cache"))
    cache = tmp_path / "cache" / "precision.json"
    monkeypatch.setattr(rules, "busy", lambda: True)
    monkeypatch.setattr(P, "probe_precision", lambda step, repeats=2: {"fp32": 1.0, "bf16": 0.5})
    _, loaded, _ = tr.train_translation(setup(tmp_path / "busy", "auto"), splits.train, splits.valid)
    assert loaded.precision == "bf16" and "measured now, the machine busy" in capsys.readouterr().err
    assert list(json.loads(cache.read_text()).values()) == [{"fp32": 1.0, "bf16": 0.5, "busy": True}]
    # Still busy: the busy figure is used, not probed again.
    monkeypatch.setattr(P, "probe_precision", lambda step, repeats=2: pytest.fail("probed again while busy"))
    _, still, _ = tr.train_translation(setup(tmp_path / "still", "auto"), splits.train, splits.valid)
    assert still.precision == "bf16" and "(cached;" in capsys.readouterr().err
    # Quiet: probed again, and the quiet figure replaces it.
    monkeypatch.setattr(rules, "busy", lambda: False)
    monkeypatch.setattr(P, "probe_precision", lambda step, repeats=2: {"fp32": 1.0, "bf16": 2.0})
    _, quiet, _ = tr.train_translation(setup(tmp_path / "quiet", "auto"), splits.train, splits.valid)
    assert quiet.precision == "fp32" and "measured now" in capsys.readouterr().err
    assert list(json.loads(cache.read_text()).values()) == [{"fp32": 1.0, "bf16": 2.0, "busy": False}]


def test_the_real_probe_leaves_weights_and_random_state_as_they_were(tmp_path, monkeypatch, splits):
    # "auto" choosing fp32 after a real probe must train exactly as a plain fp32 run: the probe's
    # forward/backward passes (with dropout) may not move the weights or the random streams.
    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(inference_precision, "BF16_MIN_SPEEDUP", float("inf"))  # the real probe runs; fp32 is chosen
    _, auto, _ = tr.train_translation(setup(tmp_path / "auto", "auto"), splits.train, splits.valid)
    _, plain, _ = tr.train_translation(setup(tmp_path / "fp32", "fp32"), splits.train, splits.valid)
    assert auto.precision == plain.precision == "fp32"
    cached = next(iter(json.loads((tmp_path / "cache" / "precision.json").read_text()).values()))
    assert cached["fp32"] > 0 and cached["bf16"] > 0  # it did measure
    assert losses(tmp_path / "auto") == losses(tmp_path / "fp32")
    assert len(set(losses(tmp_path / "fp32"))) > 3


def test_a_resumed_run_keeps_its_choice(tmp_path, monkeypatch, splits):
    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(P, "probe_precision", lambda step, repeats=2: {"fp32": 1.0, "bf16": 0.5})
    first = setup(tmp_path / "run", "auto")
    first = dataclasses.replace(first, train=dataclasses.replace(first.train, max_steps=3, save_every_steps=3))
    tr.train_translation(first, splits.train, splits.valid)
    # Another machine (or a changed cache) would measure otherwise: the run keeps what it started with.
    monkeypatch.setattr(P, "probe_precision", lambda step, repeats=2: pytest.fail("probed on resume"))
    (tmp_path / "cache" / "precision.json").unlink()
    _, result, _ = tr.train_translation(setup(tmp_path / "run", "auto"), splits.train, splits.valid, resume=True)
    assert result.precision == "bf16" and result.steps == 6


def test_presets_measure_instead_of_assuming():
    assert TrainConfig().precision == "auto"  # a user's own config measures too (issue 39)
    assert tr.PRESETS["multi30k"].train.precision == "auto"
    assert demo.demo_setup(None, seed=0).train.precision == "auto"
    # Every job but translation (whose presets are set in its recipe) and the GAT (its own
    # full-batch loop, no TrainConfig): its real presets measure, its tiny test preset stays fp32.
    checked = 0
    for job in JOBS:
        if job.name in ("translate", "gat"):
            continue
        for name, setup in job.presets.items():
            assert setup.train.precision == ("fp32" if name == "tiny" else "auto"), (job.name, name)
            checked += name != "tiny"
    assert checked >= 10
    assert tr.PRESETS["tiny"].train.precision == "fp32"
    with pytest.raises(ValueError, match="precision"):
        TrainConfig(precision="fp16")
