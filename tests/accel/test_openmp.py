"""The command line's OpenMP wait policy: set before PyTorch loads, the user's choice kept, reported."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import attnlab
from attnlab import openmp
from attnlab.layers import MultiHeadAttention
from attnlab.train import TrainConfig, train

REPO = Path(__file__).resolve().parents[2]


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", **extra)
    return env


def test_configure_sets_passive_unless_the_environment_chose(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)  # as before PyTorch loads
    env = {}
    assert openmp.configure(env) == "attnlab" and env["OMP_WAIT_POLICY"] == "PASSIVE"
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert openmp.configure(env) == "environment" and env["OMP_WAIT_POLICY"] == "ACTIVE"


def test_training_commands_keep_openmps_default_unless_the_threads_are_fixed(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    for command in ("train", "demo", "experiment"):
        env = {}
        assert openmp.configure(env, [command, "x"]) == "adaptive" and env == {}
    env = {"OMP_NUM_THREADS": "2"}  # fixed threads: nothing adapts, so the threads must not spin
    assert openmp.configure(env, ["demo"]) == "attnlab" and env["OMP_WAIT_POLICY"] == "PASSIVE"
    for flag in (["--threads", "2"], ["--threads=2"]):
        env = {}
        assert openmp.configure(env, ["train", "lm", *flag]) == "attnlab" and env["OMP_WAIT_POLICY"] == "PASSIVE"
    env = {}
    assert openmp.configure(env, ["translate", "--model", "demo"]) == "attnlab" and env["OMP_WAIT_POLICY"] == "PASSIVE"
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert openmp.configure(env, ["demo"]) == "environment" and env["OMP_WAIT_POLICY"] == "ACTIVE"


def test_configure_changes_nothing_once_torch_is_loaded():
    import torch  # noqa: F401

    env = {}
    assert openmp.configure(env) == "unknown" and env == {}


def test_importing_attnlab_does_not_load_torch_but_its_names_still_work():
    code = (
        "import sys, attnlab; loaded = 'torch' in sys.modules; "
        "from attnlab import MultiHeadAttention, scaled_dot_product_attention; "
        "print(loaded, MultiHeadAttention.__module__, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "attnlab.layers", "True"]


def test_every_name_in_attnlabs_all_is_importable():
    # The names are loaded on first use, so no linter sees them: importing them all is the check.
    namespace: dict = {}
    exec("from attnlab import *", namespace)  # raises AttributeError for a name that is not there
    assert len(attnlab.__all__) >= 17 and set(attnlab.__all__) <= set(namespace) <= set(dir(attnlab)) | {"__builtins__"}
    assert namespace["MultiHeadAttention"] is MultiHeadAttention


def test_the_command_runs_with_passive_threads_and_says_so(tmp_path):
    src, tgt = tmp_path / "s.txt", tmp_path / "t.txt"
    src.write_text("one\ntwo\nthree\nfour\n" * 5)
    tgt.write_text("一\n二\n三\n四\n" * 5)
    args = ["train", "translate", "--preset", "tiny", "--out", str(tmp_path / "run")]
    args += ["--train-src", str(src), "--train-tgt", str(tgt), "--valid-src", str(src), "--valid-tgt", str(tgt)]
    args += ["--overrides", "train.max_steps=2"]  # with its progress bar: an interactive run
    run = subprocess.run([sys.executable, "-m", "attnlab", *args], env=_env(), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "OpenMP wait policy PASSIVE (attnlab's default for the command line)" in run.stderr
    assert "threads 1" in run.stderr
    # The user's own choice is kept and reported as such.
    run = subprocess.run(
        [sys.executable, "-m", "attnlab", *args, "--overwrite"],
        env=_env(OMP_WAIT_POLICY="ACTIVE"),
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert "OpenMP wait policy ACTIVE (from the environment)" in run.stderr
    # Threads not fixed: the training loop adapts them, and the policy stays OpenMP's own.
    env = {k: v for k, v in _env().items() if k != "OMP_NUM_THREADS"}
    run = subprocess.run(
        [sys.executable, "-m", "attnlab", *args, "--overwrite"], env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert (
        "OpenMP wait policy unset (OpenMP's default, spin then sleep: the thread count follows the load" in run.stderr
    )
    if (os.cpu_count() or 1) > 1:
        assert "adapting to the cores other processes leave free" in run.stderr


# --------------------------------------------------------------------------------------------
# ThreadGovernor: the thread count follows the cores other processes leave free.
# --------------------------------------------------------------------------------------------


class FakeMachine:
    """A clock and /proc-style CPU-second counters that a test moves by hand."""

    def __init__(self) -> None:
        self.now, self.busy, self.own = 0.0, 0.0, 0.0
        self.set_calls: list[int] = []

    def run(self, seconds: float, own_cores: float, other_cores: float) -> None:
        self.now += seconds
        self.own += own_cores * seconds
        self.busy += (own_cores + other_cores) * seconds

    def governor(self, max_threads: int = 2, cores: int = 2) -> openmp.ThreadGovernor:
        return openmp.ThreadGovernor(
            max_threads,
            cores=cores,
            sample=lambda: (self.busy, self.own),
            clock=lambda: self.now,
            set_threads=self.set_calls.append,
        )


def test_a_competitor_takes_a_thread_away_at_the_first_measurement():
    m = FakeMachine()
    g = m.governor()
    m.run(1.0, own_cores=2.0, other_cores=0.9)
    assert g.poll() is None and m.set_calls == []  # not yet: less than interval_s has passed
    m.run(1.5, own_cores=1.6, other_cores=0.8)
    assert g.poll() == 1 and m.set_calls == [1] and g.threads == 1
    m.run(2.0, own_cores=1.0, other_cores=1.0)  # the competitor keeps its core: no change
    assert g.poll() is None and g.threads == 1


def test_threads_come_back_only_when_two_measurements_agree():
    m = FakeMachine()
    g = m.governor()
    m.run(2.0, own_cores=1.4, other_cores=1.0)
    assert g.poll() == 1
    m.run(2.0, own_cores=1.0, other_cores=0.0)  # the competitor is gone ...
    assert g.poll() is None and g.threads == 1  # ... but one measurement could be a lull
    m.run(2.0, own_cores=1.0, other_cores=0.05)
    assert g.poll() == 2 and m.set_calls == [1, 2]
    # A lull between two busy measurements does not bring a thread back.
    m.run(2.0, own_cores=1.5, other_cores=1.0)
    assert g.poll() == 1
    m.run(2.0, own_cores=1.0, other_cores=0.0)
    assert g.poll() is None
    m.run(2.0, own_cores=1.0, other_cores=1.0)
    assert g.poll() is None and g.threads == 1 and m.set_calls == [1, 2, 1]


def test_the_count_stays_between_one_and_max_threads():
    m = FakeMachine()
    g = m.governor(max_threads=4, cores=4)
    assert g.wanted(0.0) == 4 and g.wanted(0.2) == 4  # light background work: keep every core
    assert g.wanted(1.0) == 3 and g.wanted(2.6) == 1 and g.wanted(9.0) == 1
    assert m.governor(max_threads=2, cores=8).wanted(0.0) == 2  # never more than it was given
    with pytest.raises(ValueError, match="max_threads"):
        m.governor(max_threads=0)


@pytest.mark.skipif(not openmp.ThreadGovernor.available(), reason="needs Linux's /proc CPU times")
def test_proc_cpu_seconds_counts_this_process_inside_the_machine_total():
    busy0, own0 = openmp.proc_cpu_seconds()
    x = 0
    t0 = time.process_time()
    while time.process_time() - t0 < 0.3:  # burn 0.3 s of this process's CPU
        x += 1
    busy1, own1 = openmp.proc_cpu_seconds()
    assert own1 - own0 >= 0.2  # clock ticks are 10 ms
    assert busy1 - busy0 >= own1 - own0 - 0.05


# The governor in the training loop (TrainConfig.threads).

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from distributed_worker import NextTokenTask, TinyLM  # noqa: E402  (tests/ on the path first)

BASE = {"lr": 0.05, "eps": 1.0, "warmup_steps": 1, "log_every": 1, "progress": False, "epochs": 1}


def test_fixed_threads_hold_during_training_and_are_given_back(monkeypatch):
    import torch

    seen = []

    class Recording(NextTokenTask):
        def loss(self, model, batch):
            seen.append(torch.get_num_threads())
            return super().loss(model, batch)

    before = torch.get_num_threads()
    result = train(TinyLM(), Recording(n=24), TrainConfig(threads=1, **BASE))
    assert set(seen) == {1} and torch.get_num_threads() == before
    assert {r["threads"] for r in result.history if "loss" in r} == {1}  # the log says what ran


def test_the_governor_adapts_only_when_nothing_fixes_the_count(monkeypatch):
    import torch

    made = []
    real = openmp.ThreadGovernor

    class Spy(real):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(openmp, "ThreadGovernor", Spy)  # as attnlab.train.threads reads it
    monkeypatch.setattr(real, "available", staticmethod(lambda: True))
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    train(TinyLM(), NextTokenTask(n=24), TrainConfig(**BASE))  # threads=0, the default
    assert len(made) == 1 and made[0].max_threads == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the user fixed the count
    train(TinyLM(), NextTokenTask(n=24), TrainConfig(**BASE))
    monkeypatch.delenv("OMP_NUM_THREADS")
    train(TinyLM(), NextTokenTask(n=24), TrainConfig(threads=None, **BASE))  # leave PyTorch's
    assert len(made) == 1


def test_threads_must_not_be_negative():
    with pytest.raises(ValueError, match="threads"):
        TrainConfig(threads=-1)
