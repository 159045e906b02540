"""The command line's OpenMP wait policy: set before PyTorch loads, the user's choice kept, reported."""

import os
import subprocess
import sys
from pathlib import Path

from attnlab import openmp

REPO = Path(__file__).resolve().parents[1]


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
