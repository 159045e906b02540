"""Typed settings end to end: the recipes' descriptors, replace_settings and the one override parser."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from attnlab.cli import COMMANDS, JOBS, TRAIN_JOBS
from attnlab.models.gat import GATConfig
from attnlab.models.gpt import GPTConfig
from attnlab.recipes import TrainJob, apply_overrides, graph, lm, replace_settings
from attnlab.recipes import translate as tr


def test_override_values_are_read_as_the_declared_type():
    setup = apply_overrides(
        lm.LM_PRESETS["tiny"],
        [
            "train.epochs=3",
            "train.lr=1e-2",
            "train.compile=true",
            "train.max_steps=null",
            "train.betas=[0.9, 0.95]",
            'train.precision="bf16"',
            "train.schedule=cosine",
            "block_size=none",
            "model.bias=False",
            "model.n_inner=64",
        ],
        GPTConfig,
    )
    assert setup.train.epochs == 3 and isinstance(setup.train.epochs, int)
    assert setup.train.lr == 0.01 and setup.train.compile is True and setup.train.max_steps is None
    assert setup.train.betas == (0.9, 0.95) and isinstance(setup.train.betas, tuple)
    assert setup.train.precision == "bf16" and setup.train.schedule == "cosine" and setup.block_size is None
    assert setup.model_overrides == {"bias": False, "n_inner": 64}
    assert lm.LM_PRESETS["tiny"].train.epochs == 1 and lm.LM_PRESETS["tiny"].model_overrides == {}


@pytest.mark.parametrize(
    "override, expected",
    [
        ("train.epochs=three", "train.epochs=three: expected an integer"),
        ("train.epochs=1.5", "expected an integer"),
        ("train.lr=fast", "expected a number"),
        ("train.progress=maybe", "expected true or false"),
        ("train.max_steps=many", "expected an integer or null"),
        ("train.betas=[0.9]", "expected a JSON list"),
        ("train.betas=0.9", "expected a JSON list"),
        ("model_overrides={}", "unknown setting 'model_overrides'"),
        ("train=1", "unknown setting 'train'"),
    ],
)
def test_a_bad_override_is_a_clear_error(override, expected):
    with pytest.raises(ValueError, match=expected.replace("[", r"\[")):
        apply_overrides(lm.LM_PRESETS["tiny"], [override], GPTConfig)


def test_model_fields_are_checked_against_the_architecture_the_overrides_pick():
    setup = tr.apply_overrides(tr.PRESETS["tiny"], ["model.cell=lstm", "arch=rnn"])
    assert setup.arch == "rnn" and setup.model_overrides == {"cell": "lstm"}
    with pytest.raises(ValueError, match="unknown model field 'cell'"):
        tr.apply_overrides(tr.PRESETS["tiny"], ["model.cell=lstm"])
    with pytest.raises(ValueError, match="unknown architecture 'lstm'"):
        tr.apply_overrides(tr.PRESETS["tiny"], ["arch=lstm", "model.cell=gru"])


def test_replace_settings_takes_typed_values():
    setup = replace_settings(
        tr.PRESETS["tiny"],
        {"train.time_budget_s": 90.0, "arch": "rnn", "model.cell": "lstm", "vocab_size": 99},
        tr.model_config,
    )
    assert (setup.train.time_budget_s, setup.arch, setup.model_overrides, setup.vocab_size) == (
        90.0,
        "rnn",
        {"cell": "lstm"},
        99,
    )
    assert tr.PRESETS["tiny"].arch == "transformer" and tr.PRESETS["tiny"].train.time_budget_s is None
    with pytest.raises(ValueError, match="unknown training field 'speed'"):
        replace_settings(tr.PRESETS["tiny"], {"train.speed": 1}, tr.model_config)


def test_a_job_with_its_own_loop_takes_the_train_keys_it_has():
    setup = apply_overrides(graph.GATSetup(), ["train.device=cpu", "train.seed=4", "labelled=[0, 1, 33]"], GATConfig)
    assert (setup.device, setup.seed, setup.labelled) == ("cpu", 4, [0, 1, 33])
    with pytest.raises(ValueError, match="train.precision does not apply"):
        replace_settings(graph.GATSetup(), {"train.precision": "bf16"}, GATConfig)


def test_recipe_setup_applies_options_then_overrides_then_the_shared_training_options():
    job = TrainJob(
        "tiny",
        run=lambda setup: None,
        settings={"arch": None, "vocab_size": 50},
        overrides=["vocab_size=60", "train.epochs=7", "train.device=mps"],
        out=Path("runs/x"),
        minutes=1.5,
        epochs=3,
    )
    setup = tr.TRANSLATE_JOB.setup(job, {"device": "cpu", "precision": "bf16"})
    assert setup.vocab_size == 60 and setup.train.epochs == 7  # the user's overrides win over the options
    assert setup.train.device == "cpu" and setup.train.precision == "bf16"  # the shared options win over both
    assert setup.train.out_dir == "runs/x" and setup.train.time_budget_s == 90.0 and setup.arch == "transformer"
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        tr.TRANSLATE_JOB.setup(TrainJob("huge", run=lambda setup: None))


def test_every_job_describes_itself_and_makes_its_commands():
    assert {job.name for job in JOBS} == {
        "translate",
        "lm",
        "mlm",
        "classify",
        "vit",
        "caption",
        "gat",
        "summarize",
        "qa",
    }
    for job in JOBS:
        assert callable(COMMANDS[f"train {job.name}"]) and TRAIN_JOBS[f"train {job.name}"] is job
    # Each job's commands (attnlab/cli/<recipe>.py) are the CLI's, train command and inference commands alike.
    for name in ("translate", "lm", "classify", "vision", "caption", "graph", "summarize", "qa"):
        module = importlib.import_module(f"attnlab.cli.{name}")
        assert any(command.startswith("train ") for command in module.COMMANDS), name
        assert all(COMMANDS[command] is fn for command, fn in module.COMMANDS.items()), name
        assert job.presets and all(isinstance(setup, job.setup_cls) for setup in job.presets.values())
