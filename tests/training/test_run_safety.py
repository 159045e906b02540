"""Nothing lost, nothing clobbered (issue 17, items 1, 2 and 8): where a run resumes from, finished
runs, torn logs, damaged checkpoints, one run per folder, and a crash at each step of the
checkpoint write followed by a resume that ends exactly where the uninterrupted run ends."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from attnlab import runs
from attnlab.recipes import lm
from attnlab.train import TrainConfig, train

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
sys.path.insert(0, str(TESTS))
from distributed_worker import NextTokenTask, TinyLM  # noqa: E402  (tests/ on the path first)

# Near-SGD AdamW (ε ≫ |g|), as in test_distributed; dropout on, so that the random states matter.
BASE = {"lr": 0.05, "eps": 1.0, "warmup_steps": 1, "log_every": 1, "progress": False, "epochs": 100}
TIMING = ("tokens_per_s", "train_seconds")  # the clock differs from run to run; everything else must not


def run(out: Path | None, resume: bool = False, task: NextTokenTask | None = None, **fields):
    torch.manual_seed(0)
    model = TinyLM(dropout=0.2)
    cfg = TrainConfig(out_dir=None if out is None else str(out), **{**BASE, **fields})
    return model, train(model, task or NextTokenTask(n=24), cfg, resume=resume)


def log_records(out: Path) -> list[dict]:
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING} for r in records]


def loss_records(out: Path) -> list[dict]:
    """The training-loss lines (a run cut short by a smaller max_steps also logged a final evaluation)."""
    return [r for r in log_records(out) if "loss" in r]


def weights(directory: Path) -> dict[str, torch.Tensor]:
    return load_file(str(directory / "model.safetensors"))


def assert_same_weights(a: Path, b: Path) -> None:
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for name in wa:
        assert torch.equal(wa[name], wb[name]), f"{b}: {name}"


def snapshot(out: Path) -> dict[str, bytes]:
    """Every file of a run folder with its bytes."""
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def one_line_error(err: pytest.ExceptionInfo, *needles: str) -> str:
    text = str(err.value)
    assert "\n" not in text, text
    for needle in needles:
        assert needle in text, text
    return text


# --------------------------------------------------------------------------------------------
# Item 1: where a run resumes from
# --------------------------------------------------------------------------------------------


def test_resume_after_a_crash_between_the_two_renames(tmp_path, capsys):
    # Reproducer: the state between `last -> .last.previous` and `.last.tmp-* -> last`.
    run(tmp_path / "full", max_steps=6, save_every_steps=3)
    run(tmp_path / "cut", max_steps=3, save_every_steps=3)
    cut = tmp_path / "cut"
    os.replace(cut / "last", cut / ".last.previous")
    assert runs.resume_point(cut) == cut / ".last.previous"
    assert runs.check_run_folder(cut, resume=True) == cut / ".last.previous"
    capsys.readouterr()
    _, result = run(cut, resume=True, max_steps=6, save_every_steps=3)
    assert "resuming from" in capsys.readouterr().err
    assert result.steps == 6 and not result.already_finished
    assert_same_weights(tmp_path / "full" / "last", cut / "last")
    assert loss_records(tmp_path / "full") == loss_records(cut)
    assert not (cut / ".last.previous").exists()  # the next save completed the interrupted one


def test_lm_recipe_resumes_from_the_previous_checkpoint(tmp_path):
    # The recipes reload their tokenizers from the same place the trainer resumes from.
    def setup(out, max_steps):
        return dataclasses.replace(
            lm.LM_PRESETS["tiny"],
            block_size=16,
            batch_size=4,
            train=dataclasses.replace(
                lm.LM_PRESETS["tiny"].train,
                out_dir=str(out),
                epochs=50,
                max_steps=max_steps,
                progress=False,
                save_every_steps=1,
                log_every=1,
            ),
        )

    text = "the quick brown fox jumps over the lazy dog. " * 40
    full, _, _ = lm.train_lm(setup(tmp_path / "a", 4), text)
    lm.train_lm(setup(tmp_path / "b", 2), text)
    os.replace(tmp_path / "b" / "last", tmp_path / "b" / ".last.previous")
    resumed, result, tok = lm.train_lm(setup(tmp_path / "b", 4), text, resume=True)
    assert result.steps == 4 and tok.kind == "char"
    for (name, p), q in zip(full.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(p, q), name


def test_no_checkpoint_to_resume_from_is_one_line(tmp_path):
    for out in (tmp_path / "empty", None):
        with pytest.raises(FileNotFoundError) as err:
            runs.check_run_folder(out, resume=True)
        one_line_error(err, "--resume", "no checkpoint")
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / ".last.previous").mkdir()  # not a checkpoint: nothing to resume from
    with pytest.raises(FileNotFoundError):
        runs.resume_point(tmp_path / "half")
    with pytest.raises(FileNotFoundError, match="resume"):
        run(tmp_path / "none", resume=True, max_steps=2)


# --------------------------------------------------------------------------------------------
# Item 1: a finished run is not resumed
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "limit"),
    [
        ("max_steps", {"max_steps": 4, "save_every_steps": 2}),
        ("epochs", {"epochs": 1, "eval_every_steps": 2}),  # no evaluation at the end: last/ still records it
        ("time_budget", {"time_budget_s": 1e-9}),
        ("early_stopping", {"patience": 1, "lr": 5.0, "eval_every_steps": 1, "max_steps": 50}),  # too large a rate
        ("early_stopping", {"patience": 1, "lr": 5.0, "epochs": 30}),  # evaluated at the end of each epoch
    ],
)
def test_resume_on_a_finished_run_changes_nothing(tmp_path, capsys, reason, limit):
    out = tmp_path / "run"
    _, first = run(out, **limit)
    assert first.best_saved and not first.already_finished and first.stop_reason == reason
    assert torch.load(out / "last" / "trainer_state.pt", weights_only=True)["stop_reason"] == reason
    before = snapshot(out)
    capsys.readouterr()
    model, again = run(out, resume=True, **limit)
    assert "finished" in capsys.readouterr().err
    assert again.already_finished and not again.best_saved and again.history == []
    assert (again.steps, again.stop_reason, again.best, again.tokens) == (
        first.steps,
        first.stop_reason,
        first.best,
        first.tokens,
    )
    assert again.epochs_done == pytest.approx(first.epochs_done)
    assert snapshot(out) == before  # no extra step, no new best/, the log untouched
    last = weights(out / "last")
    assert all(torch.equal(last[k], v) for k, v in model.state_dict().items())


def test_raising_the_limit_continues_a_finished_run(tmp_path):
    run(tmp_path / "full", max_steps=6, save_every_steps=2)
    run(tmp_path / "cut", max_steps=4, save_every_steps=2)
    _, result = run(tmp_path / "cut", resume=True, max_steps=6, save_every_steps=2)
    assert result.steps == 6 and not result.already_finished
    assert_same_weights(tmp_path / "full" / "last", tmp_path / "cut" / "last")
    assert loss_records(tmp_path / "full") == loss_records(tmp_path / "cut")


def test_lm_recipe_reports_a_finished_run_from_its_saved_state(tmp_path):
    setup = dataclasses.replace(
        lm.LM_PRESETS["tiny"],
        block_size=16,
        batch_size=4,
        train=dataclasses.replace(
            lm.LM_PRESETS["tiny"].train, out_dir=str(tmp_path), epochs=50, max_steps=3, progress=False, log_every=1
        ),
    )
    text = "the quick brown fox jumps over the lazy dog. " * 40
    model, first, _ = lm.train_lm(setup, text)
    before = snapshot(tmp_path)
    again_model, again, _ = lm.train_lm(setup, text, resume=True)
    assert again.already_finished and again.steps == 3 and again.stop_reason == "max_steps"
    assert again.best == first.best
    assert snapshot(tmp_path) == before
    for (name, p), q in zip(model.state_dict().items(), again_model.state_dict().values()):
        assert torch.equal(p, q), name  # both are the best/ model


# --------------------------------------------------------------------------------------------
# Item 1: a torn log is repaired; a damaged one is a clear error
# --------------------------------------------------------------------------------------------


def test_a_torn_last_log_line_is_dropped_on_resume(tmp_path, capsys):
    run(tmp_path / "full", max_steps=4, save_every_steps=2)
    cut = tmp_path / "cut"
    run(cut, max_steps=2, save_every_steps=2)
    with (cut / "log.jsonl").open("a") as f:
        f.write('{"step": 3, "epoch": 0, "lo')  # an append interrupted by a crash
    capsys.readouterr()
    run(cut, resume=True, max_steps=4, save_every_steps=2)
    err = capsys.readouterr().err
    assert err.count("dropped a partial last line") == 1 and "log.jsonl:" in err
    assert loss_records(tmp_path / "full") == loss_records(cut)


@pytest.mark.parametrize("damage", ['{"step": 1, "lo\n', "[1, 2]\n", '{"step": "one"}\n'])
def test_a_damaged_log_line_in_the_middle_names_file_and_line(tmp_path, damage):
    out = tmp_path / "run"
    run(out, max_steps=2, save_every_steps=2)
    lines = (out / "log.jsonl").read_text().splitlines(keepends=True)
    (out / "log.jsonl").write_text(lines[0] + damage + "".join(lines[1:]))
    before = snapshot(out)
    with pytest.raises(ValueError) as err:
        run(out, resume=True, max_steps=4, save_every_steps=2)
    one_line_error(err, f"{out / 'log.jsonl'}:2:", "without --resume")
    assert snapshot(out) == before


# --------------------------------------------------------------------------------------------
# Item 1: a damaged checkpoint is a one-line error naming the file and the way out
# --------------------------------------------------------------------------------------------


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _state(path: Path, **change) -> None:
    state = torch.load(path, weights_only=True)
    for key, value in change.items():
        if value is None:
            del state[key]
        else:
            state[key] = value
    torch.save(state, path)


DAMAGES = {
    "state truncated": ("trainer_state.pt", _truncate),
    "state garbage": ("trainer_state.pt", lambda p: p.write_bytes(b"not a zip file at all" * 9)),
    "state empty": ("trainer_state.pt", lambda p: p.write_bytes(b"")),
    "state missing": ("trainer_state.pt", lambda p: p.unlink()),
    "state a list": ("trainer_state.pt", lambda p: torch.save([1, 2, 3], p)),
    "state without config": ("trainer_state.pt", lambda p: _state(p, config=None)),
    "config without grad_accum": ("trainer_state.pt", lambda p: _state(p, config={"lr": 1.0})),
    "step not a number": ("trainer_state.pt", lambda p: _state(p, step="12")),
    "optimizer of another model": ("trainer_state.pt", lambda p: _state(p, optimizer={"state": {}})),
    "weights truncated": ("model.safetensors", _truncate),
    "weights missing": ("model.safetensors", lambda p: p.unlink()),
    "config garbage": ("config.json", lambda p: p.write_text("{oops")),
    "config not an object": ("config.json", lambda p: p.write_text("[1]")),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_checkpoint_is_a_one_line_error(tmp_path, damage):
    out = tmp_path / "run"
    run(out, max_steps=2, save_every_steps=2)
    name, spoil = DAMAGES[damage]
    spoil(out / "last" / name)
    before = snapshot(out)
    with pytest.raises(ValueError) as err:
        run(out, resume=True, max_steps=4, save_every_steps=2)
    one_line_error(err, "--resume", str(out / "last"), "without --resume", "--overwrite")
    assert "PytorchStreamReader" not in str(err.value) and "Traceback" not in str(err.value)
    assert snapshot(out) == before  # nothing written


# --------------------------------------------------------------------------------------------
# Item 2: one run per folder
# --------------------------------------------------------------------------------------------


class NoData(NextTokenTask):
    """A task that fails the test if the loop asks it for data."""

    def batches(self, epoch, rank, world_size):
        raise AssertionError("the data was read")


def test_a_folder_holding_a_run_is_refused_before_any_work(tmp_path):
    out = tmp_path / "run"
    run(out, max_steps=2)
    before = snapshot(out)
    for fields in ({"max_steps": 2}, {"epochs": 0}):  # --epochs 0 used to truncate the log
        with pytest.raises(FileExistsError) as err:
            run(out, task=NoData(n=24), **fields)
        one_line_error(err, str(out), "log.jsonl", "--resume", "--overwrite")
    assert snapshot(out) == before
    # Every recipe checks first, before it reads or builds anything: here the data is not even valid.
    setup = dataclasses.replace(
        lm.LM_PRESETS["tiny"], train=dataclasses.replace(lm.LM_PRESETS["tiny"].train, out_dir=str(out))
    )
    with pytest.raises(FileExistsError):
        lm.train_lm(setup, None)
    from attnlab.recipes import caption, classify, qa, summarize, translate, vision

    calls = [
        lambda s: caption.train_captioner(s, data=object()),
        lambda s: classify.train_classifier(s, None),
        lambda s: qa.train_qa(s, None, None),
        lambda s: summarize.train_summarizer(s, None),
        lambda s: vision.train_vit(s, data=object()),
        lambda s: translate.train_translation(s, None, None),
        lambda s: lm.train_mlm(s, None),
    ]
    setups = [
        caption.CaptionSetup(),
        classify.ClassifySetup(),
        qa.QASetup(),
        summarize.SummarizeSetup(),
        vision.ViTSetup(),
        translate.PRESETS["tiny"],
        lm.MLM_PRESETS["tiny"],
    ]
    for call, recipe_setup in zip(calls, setups, strict=True):
        recipe_setup = dataclasses.replace(
            recipe_setup, train=dataclasses.replace(recipe_setup.train, out_dir=str(out))
        )
        with pytest.raises(FileExistsError):
            call(recipe_setup)
    assert snapshot(out) == before


def test_a_folder_without_a_run_is_fine(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert runs.check_run_folder(out, resume=False) is None
    _, result = run(out, max_steps=2)
    assert result.best_saved and (out / "notes.txt").read_text() == "mine"


def test_epochs_zero_saves_nothing_and_says_so(tmp_path):
    _, result = run(tmp_path / "run", epochs=0)
    assert not result.best_saved and result.steps == 0
    assert not (tmp_path / "run" / "best").exists() and not (tmp_path / "run" / "last").exists()


def test_overwrite_replaces_the_old_run(tmp_path):
    out = tmp_path / "run"
    run(out, max_steps=4, save_every_steps=2)
    (out / "notes.txt").write_text("mine")
    (out / ".last.tmp-leftover").mkdir()  # an interrupted save of the old run
    _, result = run(out, max_steps=2, overwrite=True)
    assert result.best_saved and result.steps == 2
    assert [r["step"] for r in log_records(out) if "loss" in r] == [1, 2]  # the old run's lines are gone
    assert torch.load(out / "last" / "trainer_state.pt", weights_only=True)["step"] == 2
    assert sorted(p.name for p in out.iterdir()) == ["best", "last", "log.jsonl", "notes.txt"]
    # --epochs 0 with --overwrite: the old run is gone, nothing new is claimed to be saved
    _, result = run(out, epochs=0, overwrite=True)
    assert not result.best_saved
    assert sorted(p.name for p in out.iterdir()) == ["log.jsonl", "notes.txt"]


def test_overwrite_never_deletes_what_is_not_a_run(tmp_path):
    out = tmp_path / "run"
    (out / "best").mkdir(parents=True)
    (out / "best" / "holiday.jpg").write_bytes(b"precious")
    (out / "log.jsonl").write_text("")
    with pytest.raises(FileExistsError) as err:
        run(out, max_steps=2, overwrite=True)
    one_line_error(err, str(out / "best"), "not a checkpoint")
    assert (out / "best" / "holiday.jpg").read_bytes() == b"precious" and (out / "log.jsonl").exists()
    # a symbolic link named last/ is removed, not followed
    elsewhere = tmp_path / "elsewhere"
    run(elsewhere, max_steps=1)
    (out / "best" / "holiday.jpg").unlink()
    (out / "last").symlink_to(elsewhere / "last", target_is_directory=True)
    runs.check_run_folder(out, resume=False, overwrite=True)
    runs.clear_run_folder(out)
    assert sorted(os.listdir(out)) == [] and (elsewhere / "last" / "model.safetensors").is_file()


def test_resume_and_overwrite_together_and_a_file_as_folder(tmp_path):
    with pytest.raises(ValueError) as err:
        runs.check_run_folder(tmp_path, resume=True, overwrite=True)
    one_line_error(err, "--resume", "--overwrite")
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError) as err:
        run(tmp_path / "file", max_steps=1)
    one_line_error(err, "not a directory")


def test_train_config_has_an_overwrite_field():
    assert TrainConfig().overwrite is False


# --------------------------------------------------------------------------------------------
# Item 8: a crash at each step of the checkpoint write, then resume
# --------------------------------------------------------------------------------------------

CRASH_RUN = {"max_steps": 8, "save_every_steps": 2, "eval_every_steps": 3}
# Its saves: last@2, best@3, last@3, last@4, best@6, last@6, last@8, then, after the final evaluation,
# best@8 and last@8 again. Its log: 8 loss lines and 3 evaluations (steps 3, 6, 8), 11 lines.
CRASHES = [
    *[(op, "last", 2) for op in ("write", "rename_old", "rename_new", "remove_previous")],  # the save at step 3
    # The final save: killed while writing it, the run resumes at step 8 without its final evaluation;
    # killed after its renames, the run is finished.
    *[(op, "last", 6) for op in ("write", "rename_old", "rename_new", "remove_previous")],
    *[(op, "best", 2) for op in ("write", "rename_old", "rename_new", "remove_previous")],  # best@6
    ("log", "", 5),  # the 5th log line (step 4's loss) is torn
    ("log", "", 11),  # the final evaluation's line is torn: its checkpoints were not written yet
]

_DRIVER = textwrap.dedent(
    """
    import json, os, shutil, sys
    from pathlib import Path
    repo, tests, run_json, cases_json, root = sys.argv[1:6]
    sys.path[:0] = [repo, tests]
    import torch
    torch.set_num_threads(1)  # no thread pool: forking after the reference run below is safe
    import safetensors.torch
    import attnlab.checkpoint as ck
    import attnlab.train as tr
    from distributed_worker import NextTokenTask, TinyLM

    FIELDS = json.loads(run_json)
    root = Path(root)

    def die():
        os._exit(17)  # a kill: no exception handler, no clean-up, no atexit

    def inject(op, kind, nth):
        # Die at step `op` of the nth save of the `kind` checkpoint (or at the nth log append).
        on = {"count": 0, "now": False}
        real_save, real_save_file = ck.save_checkpoint, safetensors.torch.save_file
        real_replace, real_rmtree = os.replace, shutil.rmtree

        def save(directory, **kw):
            if Path(directory).name == kind:
                on["count"] += 1
            on["now"] = Path(directory).name == kind and on["count"] == nth
            return real_save(directory, **kw)

        def save_file(tensors, filename, metadata=None):
            # (the checkpoint's weights, written into its temporary directory)
            if on["now"] and op == "write":
                Path(filename).write_bytes(b"\\0" * 64)  # a weights file cut short
                die()
            return real_save_file(tensors, filename, metadata=metadata)

        def replace(src, dst):
            if on["now"] and op == "rename_old" and Path(src).name == kind:
                die()
            if on["now"] and op == "rename_new" and Path(src).name.startswith(f".{kind}.tmp-"):
                die()
            return real_replace(src, dst)

        def rmtree(path, *a, **k):
            if on["now"] and op == "remove_previous" and Path(path).name == f".{kind}.previous":
                next(p for p in Path(path).iterdir() if p.is_file()).unlink()  # removed halfway
                die()
            return real_rmtree(path, *a, **k)

        real_log = tr.TrainLog.write
        writes = {"count": 0}

        def log_write(self, record):
            writes["count"] += 1
            if op == "log" and writes["count"] == nth:
                line = json.dumps(record) + "\\n"
                with self.path.open("a") as f:
                    f.write(line[: len(line) // 2])
                die()
            real_log(self, record)

        ck.save_checkpoint, ck.os.replace, ck.shutil.rmtree = save, replace, rmtree
        safetensors.torch.save_file = save_file  # imported by the save when it writes
        tr.TrainLog.write = log_write

    def train(out, resume):
        torch.manual_seed(0)
        model = TinyLM(dropout=0.2)
        cfg = tr.TrainConfig(out_dir=str(out), **FIELDS)
        tr.train(model, NextTokenTask(n=24), cfg, resume=resume)

    def child(target, stderr, *args):
        pid = os.fork()
        if pid == 0:
            fd = os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            os.dup2(fd, 2)
            try:
                target(*args)
            except BaseException:
                import traceback
                traceback.print_exc()
                os._exit(1)
            os._exit(0)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

    def crashed_run(out, case):
        inject(*case)
        train(out, resume=False)

    # The reference run here, in the driver: the children it forks then start warm (imports done,
    # first-call costs paid) and take a fraction of a second each.
    train(root / "reference", resume=False)
    codes = {}
    for i, case in enumerate(json.loads(cases_json)):
        out = root / f"case{i}"
        codes[f"case{i}"] = [child(crashed_run, root / f"case{i}.err", out, case),
                             child(train, root / f"case{i}.err", out, True)]
    print(json.dumps(codes))
    """
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the driver forks one process per crash")
def test_a_crash_at_each_step_of_the_checkpoint_write_then_resume_equals_the_uninterrupted_run(tmp_path):
    driver = tmp_path / "driver.py"
    driver.write_text(_DRIVER, encoding="utf-8")
    fields = {**BASE, **CRASH_RUN}
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, str(driver), str(REPO), str(TESTS), json.dumps(fields), json.dumps(CRASHES), str(tmp_path)],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    codes = json.loads(proc.stdout.strip().splitlines()[-1])
    reference = tmp_path / "reference"
    expected_log = log_records(reference)
    assert sum("eval" in r for r in expected_log) == 3 and len(expected_log) == 11
    for i, case in enumerate(CRASHES):
        out, err = tmp_path / f"case{i}", (tmp_path / f"case{i}.err").read_text()
        assert codes[f"case{i}"] == [17, 0], (case, err[-3000:])  # it crashed where asked, then resumed
        assert_same_weights(reference / "last", out / "last")
        assert_same_weights(reference / "best", out / "best")
        saved = torch.load(out / "last" / "trainer_state.pt", weights_only=True)
        expected = torch.load(reference / "last" / "trainer_state.pt", weights_only=True)
        for key in ("step", "epoch", "batch_in_epoch", "tokens", "best", "evals_without_gain", "stop_reason"):
            assert saved[key] == expected[key], (case, key)
        assert log_records(out) == expected_log, case
        assert sorted(os.listdir(out)) == ["best", "last", "log.jsonl"], case  # no leftovers
        if case[0] == "log":
            assert err.count("dropped a partial last line") == 1, case
        if case[:2] == ("rename_new", "last"):
            assert "resuming from" in err and ".last.previous" in err, case


# --------------------------------------------------------------------------------------------
# Through the command line: the run folder is checked before any data is read.
# --------------------------------------------------------------------------------------------


def _occupied(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    out.mkdir()
    (out / "log.jsonl").write_text('{"step": 1}\n')
    return out


def test_cli_refuses_an_occupied_folder_before_reading_data(tmp_path, capsys):
    from attnlab.cli import main

    out = _occupied(tmp_path)
    missing = tmp_path / "no-such-file.tsv"  # would be a FileNotFoundError if the data were read first
    code = main(
        [
            "train",
            "translate",
            "--train-tsv",
            str(missing),
            "--valid-tsv",
            str(missing),
            "--out",
            str(out),
            "--preset",
            "tiny",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "log.jsonl" in err and "--overwrite" in err and "no-such-file" not in err
    assert (out / "log.jsonl").read_text() == '{"step": 1}\n'


def test_cli_epochs_zero_with_overwrite_says_nothing_was_saved(tmp_path, capsys):
    from attnlab.cli import main

    out = _occupied(tmp_path)
    text = tmp_path / "t.txt"
    text.write_text("to be or not to be, that is the question\n" * 40)
    code = main(
        [
            "train",
            "lm",
            "--text",
            str(text),
            "--out",
            str(out),
            "--preset",
            "tiny",
            "--epochs",
            "0",
            "--overwrite",
            "--device",
            "cpu",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert "no model saved" in printed and "model saved in" not in printed
    assert not (out / "best").exists()


def test_cli_resume_with_overwrite_is_one_line(tmp_path, capsys):
    from attnlab.cli import main

    out = _occupied(tmp_path)
    text = tmp_path / "t.txt"
    text.write_text("abc\n" * 40)
    code = main(["train", "lm", "--text", str(text), "--out", str(out), "--preset", "tiny", "--resume", "--overwrite"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("attnlab: error:")


def test_the_demo_replaces_its_own_earlier_run_but_not_another(tmp_path):
    from attnlab.experiments.demo import run_demo

    out = tmp_path / "demo"
    first = run_demo(out, minutes=0.02, n_train=300, n_test=20, progress=False, log=lambda *a: None)
    assert (out / "report.json").is_file() and first.steps >= 1
    second = run_demo(out, minutes=0.02, n_train=300, n_test=20, progress=False, log=lambda *a: None)
    assert second.steps >= 1
    other = _occupied(tmp_path)
    with pytest.raises(FileExistsError, match="log.jsonl"):
        run_demo(other, minutes=0.02, n_train=300, n_test=20, progress=False, log=lambda *a: None)
