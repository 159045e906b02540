"""Multi-process training under torchrun (DDP and FSDP2 on gloo, loopback), gradient accumulation,
bf16 autocast, failure handling, and the shared `attnlab train ...` options.

The multi-process tests start real process groups with ``python -m torch.distributed.run`` (two
CPU processes) running tests/distributed_worker.py, and compare what they trained with a single
process trained here.
"""

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from attnlab import cli, distributed
from attnlab.train import TrainConfig, lr_multiplier, train

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from distributed_worker import NextTokenTask, TinyLM

WORKER = Path(__file__).resolve().parents[1].joinpath("distributed_worker.py")
# Near-SGD AdamW for the first steps (ε ≫ |g|: the update is ≈ lr·g, not ≈ lr·sign(g)), so that
# the comparisons see the gradient's size and direction, not only its sign.
BASE = {"lr": 0.05, "eps": 1.0, "warmup_steps": 1, "log_every": 1, "progress": False}


def _fsdp2_available() -> bool:
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError:
        return False
    return True


needs_gloo = pytest.mark.skipif(
    not (dist.is_available() and dist.is_gloo_available()),
    reason="this PyTorch build has no torch.distributed gloo backend",
)
FSDP2 = _fsdp2_available()


def _env() -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    if sys.platform == "linux":
        env["GLOO_SOCKET_IFNAME"] = "lo"  # gloo talks over loopback, whatever the hostname resolves to
    return env


def torchrun(args: list[str], timeout: float = 150) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``python -m torch.distributed.run --standalone --nproc_per_node 2 ARGS``; (result, seconds)."""
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "--max-restarts",
        "0",
        *args,
    ]
    start = time.monotonic()
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, env=_env())
    return proc, time.monotonic() - start


def run_worker(tmp_path: Path, spec: dict, timeout: float = 150):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return torchrun([str(WORKER), str(path)], timeout)


def params(path: Path) -> dict:
    return torch.load(path, weights_only=True)


def logged_losses(out: Path) -> dict[int, float]:
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in records if "loss" in r}


def single_process(out_dir: Path, **fields) -> TinyLM:
    torch.manual_seed(0)
    model = TinyLM(dropout=fields.pop("dropout", 0.0))
    train(model, NextTokenTask(), TrainConfig(out_dir=str(out_dir), **fields))
    return model


# --------------------------------------------------------------------------------------------
# Two processes under torchrun: one launch trains several runs, the tests below read them.
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    root = tmp_path_factory.mktemp("two_ranks")
    short = dict(BASE, max_steps=4, save_every_steps=2)
    # dropout on and accumulation over 2 batches: the resumed run must restore every rank's RNG
    resumable = dict(BASE, grad_accum=2, save_every_steps=3)
    runs = {
        "ddp": {"train": dict(short, out_dir=str(root / "ddp"))},
        "full": {"train": dict(resumable, out_dir=str(root / "full"), max_steps=7), "dropout": 0.2},
        "cut": {"train": dict(resumable, out_dir=str(root / "cut"), max_steps=3), "dropout": 0.2},
        "resumed": {"train": dict(resumable, out_dir=str(root / "cut"), max_steps=7), "dropout": 0.2, "resume": True},
        # the loss (the task's metric) is below 100 at once: the first evaluation, at step 2, meets the target
        "target": {"train": dict(BASE, out_dir=str(root / "target"), max_steps=6, eval_every_steps=2, target=100.0)},
    }
    if FSDP2:
        runs["fsdp"] = {"train": dict(short, out_dir=str(root / "fsdp"), strategy="fsdp")}
    proc, _ = run_worker(root, {"timeout_s": 60, "runs": list(runs.values())})
    assert proc.returncode == 0, proc.stderr[-4000:]
    return root


@needs_gloo
def test_two_ranks_equal_one_process_accumulating_the_same_batches(two_ranks, tmp_path):
    # The epoch has an even number of batches, so rank r gets batches r, r+2, ... and step i of the
    # 2-process run sees batches 2i and 2i+1 — the same global batch as one process with grad_accum=2.
    assert len(NextTokenTask().batches(0, 0, 1)) % 2 == 0
    reference = single_process(tmp_path, **dict(BASE, max_steps=4, save_every_steps=2, grad_accum=2))
    torch.manual_seed(0)
    initial = TinyLM().state_dict()
    for rank in (0, 1):
        got = params(two_ranks / "ddp" / f"params_rank{rank}.pt")
        for name, value in reference.state_dict().items():
            torch.testing.assert_close(got[name], value, rtol=1e-4, atol=1e-5, msg=f"rank {rank}: {name}")
    moved = max((reference.state_dict()[k] - initial[k]).abs().max().item() for k in initial)
    assert moved > 1e-2  # four real steps were taken
    # rank 0 logged the global (all-ranks) loss of each step, which is the accumulated loss here
    ddp_losses, ref_losses = logged_losses(two_ranks / "ddp"), logged_losses(tmp_path)
    assert sorted(ddp_losses) == [1, 2, 3, 4]
    for step, loss in ref_losses.items():
        assert ddp_losses[step] == pytest.approx(loss, rel=1e-5)


@needs_gloo
@pytest.mark.skipif(not FSDP2, reason="this PyTorch has no FSDP2 (torch.distributed.fsdp.fully_shard, PyTorch >= 2.6)")
def test_fsdp_on_cpu_trains_like_ddp(two_ranks):
    ddp = params(two_ranks / "ddp" / "params_rank0.pt")
    for rank in (0, 1):
        fsdp = params(two_ranks / "fsdp" / f"params_rank{rank}.pt")  # whole model handed back on every rank
        for name, value in ddp.items():
            torch.testing.assert_close(fsdp[name], value, rtol=1e-4, atol=1e-5, msg=name)
    # its checkpoints hold the whole model, gathered from the shards
    saved = torch.load(two_ranks / "fsdp" / "last" / "trainer_state.pt", weights_only=True)
    assert saved["strategy"] == "fsdp" and saved["world_size"] == 2


@needs_gloo
def test_only_rank_zero_logs_and_writes_checkpoints(two_ranks):
    saves = [json.loads((two_ranks / "ddp" / f"saves_rank{r}.json").read_text())["count"] for r in (0, 1)]
    # last at step 2, last at step 4, then the final evaluation writes best and last
    assert saves == [4, 0]
    records = [json.loads(line) for line in (two_ranks / "ddp" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "loss" in r] == [1, 2, 3, 4]  # each step logged once
    assert sum("eval" in r for r in records) == 1
    state = torch.load(two_ranks / "ddp" / "last" / "trainer_state.pt", weights_only=True)
    assert state["world_size"] == 2 and len(state["rng_per_rank"]) == 2
    # the ranks draw from different random streams (their dropout masks differ)
    assert not torch.equal(state["rng_per_rank"][0]["torch"], state["rng_per_rank"][1]["torch"])


@needs_gloo
def test_resumed_two_process_run_matches_the_uninterrupted_one(two_ranks):
    full, resumed = logged_losses(two_ranks / "full"), logged_losses(two_ranks / "cut")
    assert sorted(full) == sorted(resumed) == list(range(1, 8))
    for step in full:
        assert resumed[step] == pytest.approx(full[step], rel=1e-6, abs=1e-7), step
    assert len({round(v, 5) for v in full.values()}) == 7  # dropout on: the match is not trivial
    for rank in (0, 1):
        a, b = params(two_ranks / "full" / f"params_rank{rank}.pt"), params(two_ranks / "cut" / f"params_rank{rank}.pt")
        for name in a:
            torch.testing.assert_close(b[name], a[name], rtol=1e-6, atol=1e-7, msg=name)


@needs_gloo
def test_two_ranks_stop_together_at_the_target(two_ranks):
    # Only rank 0 evaluates: unless its decision reached rank 1, that rank would have trained on
    # alone and waited forever in its next all-reduce (the launch above would have failed).
    out = two_ranks / "target"
    state = torch.load(out / "last" / "trainer_state.pt", weights_only=True)
    assert (state["step"], state["stop_reason"]) == (2, "target")
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "eval" in r] == [2]
    rank0, rank1 = params(out / "params_rank0.pt"), params(out / "params_rank1.pt")
    for name, value in rank0.items():
        torch.testing.assert_close(rank1[name], value, rtol=0, atol=0, msg=name)


# --------------------------------------------------------------------------------------------
# A rank that dies or hangs stops the run within a bounded time.
# --------------------------------------------------------------------------------------------


@needs_gloo
def test_a_killed_rank_stops_the_torchrun_job_with_a_message(tmp_path):
    spec = {
        "timeout_s": 60,
        "kill": [1, 3],
        "runs": [{"train": dict(BASE, out_dir=str(tmp_path / "run"), max_steps=50)}],
    }
    proc, seconds = run_worker(tmp_path, spec)
    assert proc.returncode != 0
    assert seconds < 90
    assert "SIGKILL" in proc.stderr  # torchrun names the failed rank and the signal


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_gloo
def test_without_torchrun_the_surviving_rank_explains_and_exits(tmp_path):
    # No agent to stop the others: rank 0 must notice by itself that rank 1 is gone.
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(
        json.dumps(
            {
                "timeout_s": 60,
                "kill": [1, 3],
                "runs": [{"train": dict(BASE, out_dir=str(tmp_path / "run"), max_steps=50)}],
            }
        )
    )
    port = str(_free_port())
    procs = []
    start = time.monotonic()
    for rank in (0, 1):
        env = dict(
            _env(), RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, str(WORKER), str(spec_path)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    try:
        _, err0 = procs[0].communicate(timeout=90)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
    assert procs[1].returncode == -9  # it did die
    assert procs[0].returncode not in (0, None)
    assert time.monotonic() - start < 90
    assert "another rank probably died" in err0, err0[-3000:]


@needs_gloo
def test_a_hung_rank_is_caught_by_the_timeout(tmp_path):
    spec = {
        "timeout_s": 4,
        "hang": [1, 3],
        "runs": [{"train": dict(BASE, out_dir=str(tmp_path / "run"), max_steps=50)}],
    }
    proc, seconds = run_worker(tmp_path, spec)
    assert proc.returncode != 0
    assert seconds < 90  # rank 1 sleeps for 600 s: the 4 s timeout ended the run
    assert re.search(r"(?i)time(d )?out", proc.stderr)  # gloo: "Timed out waiting ..." or "Application timeout ..."
    assert "another rank probably died or hung" in proc.stderr


# --------------------------------------------------------------------------------------------
# The command line under torchrun, and the shared training options.
# --------------------------------------------------------------------------------------------


@needs_gloo
def test_cli_train_translate_runs_unchanged_under_torchrun(tmp_path):
    from attnlab.data.tasks import make_splits

    splits = make_splits("numbers-en-ja", 120, 10, 10, seed=3)
    tsv = tmp_path / "train.tsv"
    tsv.write_text("".join(f"{s}\t{t}\n" for s, t in splits.train), encoding="utf-8")
    valid = tmp_path / "valid.tsv"
    valid.write_text("".join(f"{s}\t{t}\n" for s, t in splits.valid), encoding="utf-8")
    out = tmp_path / "model"
    proc, _ = torchrun(
        [
            "-m",
            "attnlab.cli",
            "train",
            "translate",
            "--train-tsv",
            str(tsv),
            "--valid-tsv",
            str(valid),
            "--out",
            str(out),
            "--preset",
            "tiny",
            "--device",
            "cpu",
            "--grad-accum",
            "2",
            "--precision",
            "bf16",
            "--overrides",
            "train.max_steps=3",
            "train.progress=false",
            "train.log_every=1",
            "eval_sentences=5",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.count("model saved in") == 1  # rank 1's summary is silenced
    state = torch.load(out / "last" / "trainer_state.pt", weights_only=True)
    assert state["world_size"] == 2 and state["step"] == 3
    assert state["config"]["grad_accum"] == 2 and state["config"]["precision"] == "bf16"
    assert sorted(logged_losses(out)) == [1, 2, 3]


#: What PyTorch prints when DDP was told to look for unused parameters and found none: the extra
#: walk over the autograd graph every step was needless.
NEEDLESS_SEARCH = "find_unused_parameters=True was specified"


def _torchrun_train(tmp_path: Path, job: str, out: Path):
    text = tmp_path / "input.txt"
    text.write_text("the cat sat on the mat. the dog ran in the park. a bird sang on the tree.\n" * 60)
    return torchrun(
        ["-m", "attnlab.cli", "train", job, "--text", str(text), "--out", str(out), "--preset", "tiny"]
        + ["--device", "cpu", "--max-steps", "3", "--overrides", "train.progress=false", "train.log_every=1"]
    )


@needs_gloo
def test_cli_train_lm_under_ddp_does_not_look_for_unused_parameters(tmp_path):
    # The GPT's loss reaches every parameter: DDP is not told to search for unused ones each step.
    out = tmp_path / "lm"
    proc, _ = _torchrun_train(tmp_path, "lm", out)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert NEEDLESS_SEARCH not in proc.stderr
    state = torch.load(out / "last" / "trainer_state.pt", weights_only=True)
    assert state["world_size"] == 2 and state["step"] == 3
    assert sorted(logged_losses(out)) == [1, 2, 3]


@needs_gloo
def test_cli_train_mlm_whose_loss_leaves_the_pooler_out_still_trains_under_ddp(tmp_path):
    # MLM without next-sentence prediction never uses BERT's pooler: without find_unused_parameters
    # DDP would stop at the second step, waiting for the pooler's gradient.
    out = tmp_path / "mlm"
    proc, _ = _torchrun_train(tmp_path, "mlm", out)
    assert proc.returncode == 0, proc.stderr[-4000:]
    state = torch.load(out / "last" / "trainer_state.pt", weights_only=True)
    assert state["world_size"] == 2 and state["step"] == 3
    assert sorted(logged_losses(out)) == [1, 2, 3]


def test_every_train_command_takes_the_shared_options(capsys):
    train_commands = [name for name in cli.COMMANDS if name.split()[0] == "train"]
    assert "train translate" in train_commands
    for name in train_commands:
        with pytest.raises(SystemExit):
            cli.main([*name.split(), "--help"])
        help_text = capsys.readouterr().out
        for option in ("--device", "--precision", "--grad-accum", "--compile", "--strategy", "--dist-timeout"):
            assert option in help_text, (name, option)


def test_a_train_command_that_redeclares_a_shared_option_is_a_clear_error(monkeypatch):
    def clash(*, device: str = "cpu", overrides: list[str] | None = None) -> int:
        """A command that wants its own --device.

        Args:
            device: a device.
            overrides: settings.
        """
        return 0

    monkeypatch.setitem(cli.COMMANDS, "train clash", clash)
    with pytest.raises(TypeError, match=r"'train clash' declares \['device'\]"):
        cli.build_parser()


# --------------------------------------------------------------------------------------------
# One process: gradient accumulation, bf16, devices, resume checks.
# --------------------------------------------------------------------------------------------


def test_grad_accum_equals_one_step_over_the_union_of_the_batches(tmp_path):
    fields = dict(BASE, grad_accum=3, max_steps=1, clip_norm=None, weight_decay=0.0)
    trained = single_process(tmp_path, **fields)

    torch.manual_seed(0)
    model = TinyLM()
    batches = NextTokenTask().batches(0, 0, 1)[:3]
    counts = [int((labels != -100).sum()) for _, _, labels in batches]
    assert len(set(counts)) > 1  # unequal token counts: a plain mean of batch means would differ
    # the loss of the union: every target token weighs the same
    total = sum(model(*b) * n for b, n in zip(batches, counts)) / sum(counts)
    total.backward()
    cfg = TrainConfig(**fields)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=cfg.lr * lr_multiplier(1, cfg), betas=cfg.betas, eps=cfg.eps, weight_decay=0.0
    )
    optimizer.step()
    for name, value in model.state_dict().items():
        torch.testing.assert_close(trained.state_dict()[name], value, rtol=1e-5, atol=1e-6, msg=name)

    torch.manual_seed(0)
    mean_of_means = TinyLM()
    (sum(mean_of_means(*b) for b in batches) / 3).backward()
    torch.optim.AdamW(mean_of_means.parameters(), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=0.0).step()
    gap = max(
        (mean_of_means.state_dict()[k] - trained.state_dict()[k]).abs().max().item() for k in trained.state_dict()
    )
    assert gap > 1e-5  # the test can tell the two averages apart


def test_bf16_training_reaches_the_fp32_loss(tmp_path):
    def run(precision: str) -> list[float]:
        out = tmp_path / precision
        single_process(out, **dict(BASE, lr=0.01, eps=1e-9, warmup_steps=5, max_steps=60, precision=precision))
        records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
        return [r["loss"] for r in records if "loss" in r] + [records[-1]["eval"]["loss"]]

    fp32, bf16 = run("fp32"), run("bf16")
    assert fp32 != bf16  # autocast really ran the matrix products in bf16
    assert fp32[-1] < fp32[0] - 0.3  # both learned something
    assert bf16[-1] == pytest.approx(fp32[-1], rel=0.03)


def test_resolve_device():
    expected = "cuda:0" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    if expected.startswith("cuda"):
        expected = f"cuda:{torch.cuda.current_device()}"
    assert distributed.resolve_device("auto") == expected
    assert distributed.resolve_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="unknown device 'gpu'"):
        distributed.resolve_device("gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            distributed.resolve_device("cuda")


def test_alone_there_is_no_process_group(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    ctx = distributed.init_distributed("cpu")
    assert (ctx.rank, ctx.world_size, ctx.backend, ctx.is_main) == (0, 1, None, True)
    assert not dist.is_initialized()
    assert distributed.rank_and_world() == (0, 1)
    with pytest.raises(ValueError, match="needs a process group"):
        distributed.rank_and_world(0, 2)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with pytest.raises(ValueError, match="MASTER_ADDR"):
        distributed.init_distributed("cpu")


def test_resume_with_other_accumulation_is_refused(tmp_path):
    single_process(tmp_path, **dict(BASE, max_steps=2))
    torch.manual_seed(0)
    with pytest.raises(ValueError, match="grad_accum"):
        train(
            TinyLM(),
            NextTokenTask(),
            TrainConfig(out_dir=str(tmp_path), **dict(BASE, max_steps=4, grad_accum=2)),
            resume=True,
        )


def test_bad_strategy_and_precision_are_clear_errors():
    with pytest.raises(ValueError, match="strategy"):
        train(TinyLM(), NextTokenTask(), TrainConfig(strategy="zero3", progress=False))
    with pytest.raises(ValueError, match="precision"):
        train(TinyLM(), NextTokenTask(), TrainConfig(precision="fp16", progress=False))


@pytest.mark.slow
def test_compiled_training_matches_eager(tmp_path):
    eager = single_process(tmp_path / "eager", **dict(BASE, max_steps=3))
    compiled = single_process(tmp_path / "compiled", **dict(BASE, max_steps=3, compile=True))
    for name, value in eager.state_dict().items():
        torch.testing.assert_close(compiled.state_dict()[name], value, rtol=1e-4, atol=1e-5, msg=name)


@needs_gloo
@pytest.mark.slow
def test_compiled_ddp_with_accumulation_matches_eager_ddp(tmp_path):
    runs = [
        {"train": dict(BASE, out_dir=str(tmp_path / kind), max_steps=3, grad_accum=2, compile=kind == "compiled")}
        for kind in ("compiled", "eager")
    ]
    proc, _ = run_worker(tmp_path, {"timeout_s": 300, "runs": runs}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    compiled, eager = params(tmp_path / "compiled" / "params_rank0.pt"), params(tmp_path / "eager" / "params_rank0.pt")
    for name, value in eager.items():
        torch.testing.assert_close(compiled[name], value, rtol=1e-4, atol=1e-5, msg=name)
