"""Stopping on quality (issue 14, item 1): ``TrainConfig.target`` in the training loop, with
resume; the demo that trains until validation exact match reaches its target, with the clock as
a safety cap; and ``--target`` on the command line (``attnlab demo`` and every ``attnlab train``).

The loop's tests train the tiny next-token model of tests/distributed_worker.py (a few
milliseconds a step) with an ``evaluate`` that returns a scripted sequence of metric values, so
that the evaluation at which the target is reached is known in advance. The two-process case is
in tests/training/test_distributed.py (``test_two_ranks_stop_together_at_the_target``).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import sys
from pathlib import Path

import pytest
import torch

from attnlab import cli
from attnlab.cli import JOBS
from attnlab.cli import translate as translate_cli
from attnlab.cli.training import STOPPED, print_training
from attnlab.experiments import demo
from attnlab.recipes import TrainJob
from attnlab.train import STOP_REASONS, TrainConfig, TrainResult, train

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from distributed_worker import NextTokenTask, TinyLM  # noqa: E402  (tests/ on the path first)

BASE = {"lr": 0.05, "eps": 1.0, "warmup_steps": 1, "log_every": 1, "progress": False, "epochs": 100}
STEPS_PER_EPOCH = 6  # NextTokenTask(n=24): six batches an epoch, one step each


class ScriptedTask(NextTokenTask):
    """The next-token task trained for real, whose evaluations return ``values`` one after the other."""

    def __init__(self, values: list[float], metric: str = "score", maximize: bool = True) -> None:
        super().__init__(n=24)
        self.values, self.metric, self.maximize = list(values), metric, maximize
        self.evaluations = 0

    def evaluate(self, model):
        value = self.values[min(self.evaluations, len(self.values) - 1)]  # the last value repeats
        self.evaluations += 1
        return {self.metric: value}


def run(task: ScriptedTask, out: Path | None = None, resume: bool = False, **fields) -> TrainResult:
    torch.manual_seed(0)
    cfg = TrainConfig(out_dir=None if out is None else str(out), **{**BASE, **fields})
    return train(TinyLM(), task, cfg, resume=resume)


def evaluated_steps(result: TrainResult) -> list[int]:
    return [r["step"] for r in result.history if "eval" in r]


def snapshot(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------------------------
# The rule in the training loop
# --------------------------------------------------------------------------------------------


def test_a_maximised_metric_stops_at_the_first_evaluation_at_or_above_the_target():
    task = ScriptedTask([0.2, 0.5, 0.89, 0.9, 0.95])
    result = run(task, eval_every_steps=2, max_steps=50, target=0.9)
    assert result.stop_reason == "target" and result.metric == "score"
    assert result.steps == 8 and evaluated_steps(result) == [2, 4, 6, 8]  # no extra final evaluation
    assert result.best == {"score": 0.9}  # reaching the target exactly counts
    # Without a target the same run goes on to its step limit: the rule above is what stopped it.
    assert run(ScriptedTask(task.values), eval_every_steps=2, max_steps=12).stop_reason == "max_steps"


def test_a_loss_stops_at_the_first_evaluation_at_or_below_the_target():
    # 3.0 would meet a target of 2.0 if higher were better; for a loss only ≤ 2.0 does.
    task = ScriptedTask([3.0, 2.5, 2.0, 1.0], metric="loss", maximize=False)
    result = run(task, eval_every_steps=1, max_steps=50, target=2.0)
    assert result.stop_reason == "target"
    assert result.steps == 3 and evaluated_steps(result) == [1, 2, 3]
    assert result.best == {"loss": 2.0}


def test_the_target_is_checked_at_the_end_of_each_epoch_too():
    result = run(ScriptedTask([0.1, 0.3, 0.95]), target=0.9)  # eval_every_steps=None: after each epoch
    assert result.stop_reason == "target"
    assert result.steps == 3 * STEPS_PER_EPOCH and result.epochs_done == 3.0


def test_the_target_outranks_early_stopping_and_a_limit_at_the_same_step():
    # Patience would run out at the third evaluation too; the run met its goal, and says so.
    result = run(ScriptedTask([0.5, 0.5, 0.5]), eval_every_steps=1, max_steps=50, patience=2, target=0.5)
    assert (result.stop_reason, result.steps) == ("target", 1)
    result = run(ScriptedTask([0.1, 0.2, 0.95]), eval_every_steps=1, max_steps=3, target=0.9)
    assert (result.stop_reason, evaluated_steps(result)) == ("target", [1, 2, 3])
    # The final evaluation after a step limit reaches the target: the run met its goal.
    result = run(ScriptedTask([0.95]), max_steps=4, target=0.9)
    assert (result.stop_reason, evaluated_steps(result)) == ("target", [4])
    # ... and when it does not, the limit is the reason, as before.
    assert run(ScriptedTask([0.5]), max_steps=4, target=0.9).stop_reason == "max_steps"


def test_early_stopping_still_stops_a_run_that_does_not_reach_its_target():
    result = run(ScriptedTask([0.5, 0.6, 0.6, 0.6]), eval_every_steps=1, max_steps=50, patience=2, target=0.9)
    assert (result.stop_reason, result.steps, result.best) == ("early_stopping", 4, {"score": 0.6})


def test_the_stop_reasons_are_documented_and_each_has_words():
    assert set(STOP_REASONS) == set(STOPPED)
    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    assert fields["target"].default is None and TrainConfig().target is None


# --------------------------------------------------------------------------------------------
# Resume
# --------------------------------------------------------------------------------------------


def test_a_run_finished_by_its_target_stays_finished(tmp_path, capsys):
    out = tmp_path / "run"
    settings = {"eval_every_steps": 2, "max_steps": 50, "target": 0.9}
    first = run(ScriptedTask([0.5, 0.95]), out, **settings)
    assert (first.stop_reason, first.steps) == ("target", 4)
    assert torch.load(out / "last" / "trainer_state.pt", weights_only=True)["stop_reason"] == "target"
    before = snapshot(out)
    capsys.readouterr()
    again = run(ScriptedTask([0.1]), out, resume=True, **settings)
    assert "finished" in capsys.readouterr().err
    assert again.already_finished and (again.steps, again.stop_reason, again.best) == (4, "target", first.best)
    assert snapshot(out) == before  # nothing trained, nothing written
    # A stricter target continues the run from where it stopped.
    more = run(ScriptedTask([0.97, 0.99]), out, resume=True, **{**settings, "target": 0.98})
    assert not more.already_finished and (more.stop_reason, more.steps) == ("target", 8)
    assert more.best == {"score": 0.99}


def test_a_run_whose_best_meets_the_target_it_is_resumed_with_is_finished(tmp_path):
    out = tmp_path / "run"
    run(ScriptedTask([0.5, 0.8]), out, eval_every_steps=1, max_steps=2)
    again = run(ScriptedTask([0.1]), out, resume=True, eval_every_steps=1, max_steps=10, target=0.7)
    assert again.already_finished and (again.steps, again.stop_reason) == (2, "max_steps")


def test_an_interrupted_run_resumed_with_a_target_stops_at_it(tmp_path):
    out = tmp_path / "run"
    run(ScriptedTask([0.3]), out, save_every_steps=2, max_steps=2)  # as if killed at step 2
    state = torch.load(out / "last" / "trainer_state.pt", weights_only=True)
    state["stop_reason"] = ""
    torch.save(state, out / "last" / "trainer_state.pt")
    result = run(ScriptedTask([0.6, 0.95]), out, resume=True, eval_every_steps=2, max_steps=50, target=0.9)
    assert not result.already_finished and (result.stop_reason, result.steps) == ("target", 6)


# --------------------------------------------------------------------------------------------
# Bad values
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "high", True])
def test_a_target_that_is_not_a_finite_number_is_refused(bad):
    with pytest.raises(ValueError, match="target must be a finite number") as err:
        TrainConfig(target=bad)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("bad", [1.5, -0.1, math.nan])
def test_the_demo_refuses_a_target_outside_0_1_before_generating_anything(tmp_path, bad):
    with pytest.raises(ValueError, match=r"target must be a validation exact match in \[0, 1\]"):
        demo.run_demo(tmp_path / "demo", target=bad, log=lambda *_: pytest.fail("the task was generated"))
    assert not (tmp_path / "demo").exists()


def test_cli_a_bad_target_is_one_line_before_any_data_is_read(tmp_path, capsys):
    missing = tmp_path / "no-such-file.tsv"  # read only after the settings are checked
    argv = ["train", "translate", "--train-tsv", str(missing), "--valid-tsv", str(missing), "--out", str(tmp_path)]
    code = cli.main([*argv, "--preset", "tiny", "--device", "cpu", "--target", "nan"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith("attnlab: error: target must be a finite number") and "no-such-file" not in err[0]


# --------------------------------------------------------------------------------------------
# The command line: --target on every train command, the words of the summary
# --------------------------------------------------------------------------------------------


def test_cli_train_translate_target_reaches_the_train_config(tmp_path, monkeypatch, capsys):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("one\t一\ntwo\t二\n", encoding="utf-8")
    seen = {}

    def fake_train(setup, train_pairs, valid_pairs, resume=False):
        seen["train"] = setup.train
        result = TrainResult(12, 1.0, {"bleu": 31.0}, stop_reason="target", metric="bleu")
        return None, result, None

    monkeypatch.setattr(translate_cli, "train_translation", fake_train)  # the name `attnlab train translate` calls
    argv = ["train", "translate", "--train-tsv", str(pairs), "--valid-tsv", str(pairs), "--out", str(tmp_path / "r")]
    assert cli.main([*argv, "--preset", "tiny", "--device", "cpu", "--target", "30"]) == 0
    assert seen["train"].target == 30.0 and seen["train"].out_dir == str(tmp_path / "r")
    assert "stopped: validation bleu reached the target (--target)" in capsys.readouterr().out
    assert cli.main([*argv, "--preset", "tiny", "--device", "cpu"]) == 0
    assert seen["train"].target is None  # not given: the preset's (none)


def test_every_train_command_takes_target_onto_its_train_config(capsys):
    for job in JOBS:
        with pytest.raises(SystemExit):
            cli.main(["train", job.name, "--help"])
        assert "--target" in capsys.readouterr().out, job.name
        preset = next(iter(job.presets))
        if not isinstance(getattr(job.presets[preset], "train", None), TrainConfig):
            # The GAT trains in its own full-batch loop: --target is refused, as --precision is.
            with pytest.raises(ValueError, match="train.target does not apply"):
                job.setup(TrainJob(preset, run=lambda setup: None), {"target": 0.5})
            continue
        setup = job.setup(TrainJob(preset, run=lambda setup: None), {"target": 0.5})
        assert setup.train.target == 0.5, job.name
        assert job.presets[preset].train.target is None  # the preset itself is untouched


@pytest.mark.parametrize("reason", STOP_REASONS)
def test_the_training_summary_says_why_it_stopped_in_words(capsys, tmp_path, reason):
    print_training(TrainResult(5, 1.0, {"loss": 1.5}, stop_reason=reason, metric="loss"), tmp_path)
    line = capsys.readouterr().out.splitlines()[0]
    assert line.endswith("; stopped: " + STOPPED[reason].format(metric="loss")), line


# --------------------------------------------------------------------------------------------
# The demo
# --------------------------------------------------------------------------------------------


def _report(**fields) -> demo.DemoReport:
    base = dict(
        out_dir=Path("runs/demo"),
        exact_match=0.996,
        bleu=99.9,
        train_minutes=1.4,
        tokens_per_s=15000.0,
        steps=600,
        examples=[("seven", "七")],
        heatmaps=[],
    )
    return demo.DemoReport(**{**base, **fields})


def test_the_demo_report_says_which_rule_stopped_training():
    assert (
        _report(stop_reason="target", valid_exact_match=0.999).stopped()
        == "reached the quality target (validation exact match 99.9% ≥ 99.7%)"
    )
    assert _report(stop_reason="early_stopping", valid_exact_match=0.99).stopped().startswith("stopped improving")
    capped = _report(stop_reason="time_budget", valid_exact_match=0.95).stopped()
    assert capped.startswith("hit the 10-minute safety cap") and "95.0% < 99.7%" in capped


def test_the_demo_trains_to_the_quality_target_with_the_clock_as_a_cap_only():
    train = demo.demo_setup(None, seed=0).train
    assert (train.target, train.time_budget_s, train.patience) == (0.997, 600.0, 3)
    assert train.eval_every_steps and train.max_steps is None
    # The command line's defaults are the demo's.
    params = inspect.signature(cli.COMMANDS["demo"]).parameters
    assert (params["target"].default, params["minutes"].default) == (demo.TARGET, demo.MAX_MINUTES)


def test_the_demo_validates_on_enough_pairs_that_its_target_holds_out():
    splits = demo.demo_splits(30000, seed=0)  # run_demo's defaults
    assert [len(split) for split in splits] == [30000, 2000, 500]
    sources = [{src for src, _ in split} for split in splits]
    assert [len(s) for s in sources] == [30000, 2000, 500]  # no source twice within a split
    train, valid, test = sources
    assert not (train & valid) and not (train & test) and not (valid & test)
    setup = demo.demo_setup(None, seed=0)
    assert setup.eval_sentences == demo.N_VALID  # every validation pair is scored
    # At the target at most 6 of the 2,000 validation pairs may be wrong (demo.N_VALID's comment says why that is enough).
    assert round((1 - setup.train.target) * demo.N_VALID) == 6


def test_cli_demo_passes_target_and_cap_and_prints_the_stop_rule(monkeypatch, capsys, tmp_path):
    seen = {}

    def fake_run_demo(out, **kwargs):
        seen.update(kwargs)
        return _report(out_dir=out, stop_reason="target", valid_exact_match=0.99667, target=kwargs["target"])

    monkeypatch.setattr(demo, "run_demo", fake_run_demo)
    assert cli.main(["demo", "--out", str(tmp_path / "d"), "--target", "0.99", "--minutes", "3"]) == 0
    assert (seen["target"], seen["minutes"]) == (0.99, 3.0)
    out = capsys.readouterr().out
    assert "training reached the quality target (validation exact match 99.7% ≥ 99.0%)" in out
    assert cli.main(["demo", "--out", str(tmp_path / "d")]) == 0
    assert (seen["target"], seen["minutes"]) == (0.997, 10.0)


def test_a_tiny_demo_stops_at_its_target_and_records_why(tmp_path, monkeypatch):
    # The demo's own setup, evaluated every 5 steps instead of 150 so that the test is quick; a
    # target of 0 is met by the first evaluation.
    real_setup = demo.demo_setup

    def quick_setup(*args, **kwargs):
        setup = real_setup(*args, **kwargs)
        return dataclasses.replace(setup, train=dataclasses.replace(setup.train, eval_every_steps=5))

    monkeypatch.setattr(demo, "demo_setup", quick_setup)
    lines = []
    report = demo.run_demo(tmp_path, target=0.0, n_train=300, n_test=20, progress=False, log=lines.append)
    assert (report.stop_reason, report.steps, report.target) == ("target", 5, 0.0)
    assert report.valid_exact_match is not None and report.stopped().startswith("reached the quality target")
    assert not any("was not reached" in line for line in lines)
    saved = json.loads((tmp_path / "report.json").read_text())
    assert (saved["stop_reason"], saved["steps"], saved["target"]) == ("target", 5, 0.0)


def test_a_demo_that_hits_the_cap_says_the_quality_goal_was_not_reached(tmp_path):
    lines = []
    report = demo.run_demo(tmp_path, minutes=0.01, n_train=300, n_test=20, progress=False, log=lines.append)
    assert report.stop_reason == "time_budget" and report.valid_exact_match < demo.TARGET
    message = [line for line in lines if "was not reached" in line]
    assert len(message) == 1 and "0.01-minute" in message[0] and "was not reached" in message[0]
    assert json.loads((tmp_path / "report.json").read_text())["stop_reason"] == "time_budget"
