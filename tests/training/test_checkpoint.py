"""Checkpoints: round trip with tied weights, atomic replacement under failures and hard crashes,
clear errors, and RNG state restore."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from torch import nn

import attnlab.checkpoint as ckpt_mod
from attnlab.assets.locate import resolve_model_dir
from attnlab.checkpoint import (
    load_checkpoint,
    load_weights,
    save_checkpoint,
)
from attnlab.runs import rng_state, set_rng_state

REPO = Path(__file__).resolve().parents[2]


class TinyLM(nn.Module):
    """Embedding → linear → norm → output projection tied to the embedding."""

    def __init__(self, vocab: int = 11, width: int = 8, tied: bool = True) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.mix = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)
        self.out_proj = nn.Linear(width, vocab, bias=False)
        if tied:
            self.out_proj.weight = self.embed.weight
        self.register_buffer("position_scale", torch.linspace(0.5, 1.5, 5))
        self.register_buffer("scratch", torch.zeros(3), persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.norm(self.mix(self.embed(ids)))  # (B, T, D)
        return self.out_proj(h * self.position_scale[: ids.shape[1], None])  # (B, T, V)


class FakeTokenizer:
    def __init__(self, vocab: list[str]) -> None:
        self.vocab = vocab

    def save(self, directory, name):
        path = Path(directory) / f"{name}.json"
        path.write_text(json.dumps({"vocab": self.vocab}), encoding="utf-8")
        return path


CONFIG = {"model_type": "tiny_lm", "vocab": 11, "width": 8}


def _model(seed: int, tied: bool = True) -> TinyLM:
    torch.manual_seed(seed)
    return TinyLM(tied=tied)


def _weights_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# --------------------------------------------------------------------------------------------
# Round trip
# --------------------------------------------------------------------------------------------


def test_round_trip_with_tied_weights(tmp_path):
    model = _model(0)
    path = save_checkpoint(tmp_path / "ck", model=model, config=CONFIG)
    assert path == tmp_path / "ck"
    assert sorted(os.listdir(path)) == ["config.json", "model.safetensors", "tokenizers.json"]

    # The file holds the tied matrix once.
    with safe_open(str(path / "model.safetensors"), framework="pt") as f:
        stored = set(f.keys())
    assert "embed.weight" in stored and "out_proj.weight" not in stored

    ck = load_checkpoint(path)
    assert ck.config == CONFIG and ck.model_type == "tiny_lm" and ck.trainer_state is None
    assert _weights_equal(ck.state_dict, model.state_dict())
    assert ck.state_dict["out_proj.weight"] is ck.state_dict["embed.weight"]

    fresh = _model(1)
    assert not torch.equal(fresh.embed.weight, model.embed.weight)
    load_weights(fresh, ck)
    assert _weights_equal(fresh.state_dict(), model.state_dict())
    assert fresh.out_proj.weight is fresh.embed.weight  # the tie survives loading
    with torch.no_grad():
        fresh.embed.weight[0, 0] += 1.0
    assert fresh.out_proj.weight[0, 0] == fresh.embed.weight[0, 0]
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        fresh.embed.weight[0, 0] -= 1.0
        torch.testing.assert_close(fresh(ids), model(ids), rtol=0, atol=0)


def test_file_is_plain_safetensors_that_safetensors_load_model_reads(tmp_path):
    """An independent reader (safetensors' own tied-weight aware loader) accepts the file."""
    from safetensors.torch import load_model

    model = _model(0)
    save_checkpoint(tmp_path / "ck", model=model, config=CONFIG)
    other = _model(5)
    missing, unexpected = load_model(other, str(tmp_path / "ck" / "model.safetensors"))
    assert not missing and not unexpected
    assert _weights_equal(other.state_dict(), model.state_dict())


def test_untied_model_round_trip(tmp_path):
    model = _model(0, tied=False)
    ck = load_checkpoint(save_checkpoint(tmp_path / "ck", model=model, config=CONFIG))
    assert ck.state_dict["out_proj.weight"] is not ck.state_dict["embed.weight"]
    fresh = _model(3, tied=False)
    load_weights(fresh, ck)
    assert _weights_equal(fresh.state_dict(), model.state_dict())


def test_untied_checkpoint_into_tied_model_is_refused(tmp_path):
    ck = load_checkpoint(save_checkpoint(tmp_path / "ck", model=_model(0, tied=False), config=CONFIG))
    with pytest.raises(ValueError, match="tied tensor in the model but differ"):
        load_weights(_model(1, tied=True), ck)


def test_tokenizers_and_trainer_state_round_trip(tmp_path):
    model = _model(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.tensor([[1, 2]])).sum().backward()
    optimizer.step()
    src, tgt = FakeTokenizer(["a", "b"]), FakeTokenizer(["三", "十"])
    state = {"optimizer": optimizer.state_dict(), "step": 7, "epoch": 1, "best": {"bleu": 12.5}, "rng": rng_state()}
    path = save_checkpoint(
        tmp_path / "ck", model=model, config=CONFIG, tokenizers={"src": src, "tgt": tgt}, trainer_state=state
    )
    ck = load_checkpoint(path)  # weights_only=True: the state must be plain types + tensors
    assert ck.tokenizer_files == {"src": [path / "src.json"], "tgt": [path / "tgt.json"]}
    assert json.loads((path / "tgt.json").read_text(encoding="utf-8")) == {"vocab": ["三", "十"]}
    assert ck.trainer_state["step"] == 7 and ck.trainer_state["best"] == {"bleu": 12.5}
    restored = torch.optim.AdamW(_model(1).parameters(), lr=1e-3)
    restored.load_state_dict(ck.trainer_state["optimizer"])
    for a, b in zip(optimizer.state.values(), restored.state.values()):
        torch.testing.assert_close(a["exp_avg"], b["exp_avg"])


def test_compile_style_wrapper_is_unwrapped(tmp_path):
    class Wrapper(nn.Module):  # what torch.compile returns: the model under `_orig_mod`
        def __init__(self, inner):
            super().__init__()
            self._orig_mod = inner

    model = _model(0)
    ck = load_checkpoint(save_checkpoint(tmp_path / "ck", model=Wrapper(model), config=CONFIG))
    assert set(ck.state_dict) == set(model.state_dict())
    other = Wrapper(_model(2))
    load_weights(other, ck)
    assert _weights_equal(other._orig_mod.state_dict(), model.state_dict())


# --------------------------------------------------------------------------------------------
# Atomic replacement
# --------------------------------------------------------------------------------------------


def _assert_is_v1(path: Path, v1: TinyLM) -> None:
    ck = load_checkpoint(path)
    assert ck.config["version"] == 1
    assert _weights_equal(ck.state_dict, v1.state_dict())


def test_overwrite_replaces_the_previous_checkpoint(tmp_path):
    save_checkpoint(tmp_path / "ck", model=_model(0), config={**CONFIG, "version": 1}, trainer_state={"step": 1})
    v2 = _model(1)
    save_checkpoint(tmp_path / "ck", model=v2, config={**CONFIG, "version": 2})
    ck = load_checkpoint(tmp_path / "ck")
    assert ck.config["version"] == 2 and ck.trainer_state is None  # old trainer_state.pt gone
    assert _weights_equal(ck.state_dict, v2.state_dict())
    assert os.listdir(tmp_path) == ["ck"]  # no temporary or backup directory left behind


def test_failure_while_writing_keeps_previous_checkpoint(tmp_path, monkeypatch):
    v1 = _model(0)
    save_checkpoint(tmp_path / "ck", model=v1, config={**CONFIG, "version": 1})

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ckpt_mod.torch, "save", disk_full)
    with pytest.raises(OSError, match="No space left"):
        save_checkpoint(tmp_path / "ck", model=_model(1), config={**CONFIG, "version": 2}, trainer_state={"step": 2})
    _assert_is_v1(tmp_path / "ck", v1)
    assert os.listdir(tmp_path) == ["ck"]


def test_failure_of_the_final_rename_restores_previous(tmp_path, monkeypatch):
    v1 = _model(0)
    save_checkpoint(tmp_path / "ck", model=v1, config={**CONFIG, "version": 1})
    real_replace = os.replace
    calls = []

    def flaky_replace(src, dst):
        calls.append((Path(src).name, Path(dst).name))
        if len(calls) == 2:  # the rename of the new directory onto the final name
            raise OSError("simulated rename failure")
        real_replace(src, dst)

    monkeypatch.setattr(ckpt_mod.os, "replace", flaky_replace)
    with pytest.raises(OSError, match="simulated"):
        save_checkpoint(tmp_path / "ck", model=_model(1), config={**CONFIG, "version": 2})
    assert calls[0] == ("ck", ".ck.previous") and calls[1][1] == "ck"
    _assert_is_v1(tmp_path / "ck", v1)
    assert os.listdir(tmp_path) == ["ck"]


def test_failure_on_first_save_leaves_nothing(tmp_path, monkeypatch):
    def interrupted(fd):
        raise KeyboardInterrupt  # Ctrl-C while the new directory is being synced to disk

    monkeypatch.setattr(ckpt_mod.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path / "ck", model=_model(0), config=CONFIG)
    assert os.listdir(tmp_path) == []


_CRASH_SCRIPT = textwrap.dedent(
    """
    import os, sys, torch
    sys.path.insert(0, sys.argv[1])
    import attnlab.checkpoint as ck
    from torch import nn
    where, directory = sys.argv[2], sys.argv[3]
    torch.manual_seed(1)
    model = nn.Linear(3, 2)
    if where == "writing":
        def die(*a, **k):
            os._exit(17)  # a kill: no exception handler, no cleanup runs
        ck.torch.save = die
    else:
        real, calls = os.replace, []
        def die_on_second(src, dst):
            calls.append(src)
            if len(calls) == 2:
                os._exit(17)
            real(src, dst)
        ck.os.replace = die_on_second
    ck.save_checkpoint(directory, model=model, config={"model_type": "lin", "version": 2},
                       trainer_state={"step": 2})
    """
)


@pytest.mark.parametrize("where", ["writing", "between_renames"])
def test_hard_crash_never_loses_the_previous_checkpoint(tmp_path, where):
    torch.manual_seed(0)
    v1 = nn.Linear(3, 2)
    final = tmp_path / "ck"
    save_checkpoint(final, model=v1, config={"model_type": "lin", "version": 1})
    script = tmp_path / "crash.py"
    script.write_text(_CRASH_SCRIPT, encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, str(script), str(REPO), where, str(final)],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 17, proc.stderr

    leftovers = sorted(os.listdir(tmp_path))
    if where == "writing":
        # The final name still holds v1; a hidden, partial temp directory is left over.
        _assert_is_v1(final, v1)
        assert any(name.startswith(".ck.tmp-") for name in leftovers)
    else:
        # No directory under the final name (never a partial one); v1 is intact as the backup,
        # and the load error points there.
        assert not final.exists()
        _assert_is_v1(tmp_path / ".ck.previous", v1)
        with pytest.raises(FileNotFoundError, match=r"\.ck\.previous"):
            load_checkpoint(final)

    # The next save recovers and cleans up whatever the crash left.
    v3 = nn.Linear(3, 2)
    save_checkpoint(final, model=v3, config={"model_type": "lin", "version": 3})
    assert sorted(os.listdir(tmp_path)) == ["ck", "crash.py"]
    assert _weights_equal(load_checkpoint(final).state_dict, v3.state_dict())


def test_refuses_to_replace_a_directory_that_is_not_a_checkpoint(tmp_path):
    target = tmp_path / "results"
    target.mkdir()
    (target / "notes.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(FileExistsError, match="not a checkpoint"):
        save_checkpoint(target, model=_model(0), config=CONFIG)
    assert (target / "notes.txt").read_text(encoding="utf-8") == "keep me"


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


def test_missing_directory_and_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such checkpoint directory"):
        load_checkpoint(tmp_path / "nowhere")
    path = save_checkpoint(tmp_path / "ck", model=_model(0), config=CONFIG)
    (path / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="model.safetensors: missing"):
        load_checkpoint(path)


def test_config_errors(tmp_path):
    with pytest.raises(ValueError, match="model_type"):
        save_checkpoint(tmp_path / "a", model=_model(0), config={"width": 8})
    with pytest.raises(TypeError, match="JSON-serialisable"):
        save_checkpoint(tmp_path / "a", model=_model(0), config={"model_type": "x", "f": object()})
    assert not (tmp_path / "a").exists()

    path = save_checkpoint(tmp_path / "ck", model=_model(0), config=CONFIG)
    (path / "config.json").write_text('{"width": 8}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="config.json: config has no 'model_type'"):
        load_checkpoint(path)
    (path / "config.json").write_text('{\n  "model_type": "x",\n  "width": \n}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"config.json:4: not valid JSON"):
        load_checkpoint(path)


def test_tokenizer_errors(tmp_path):
    class NoSave:
        pass

    class Sneaky(FakeTokenizer):
        def save(self, directory, name):
            (Path(directory) / "config.json").write_text("{}", encoding="utf-8")

    with pytest.raises(TypeError, match="has no .save"):
        save_checkpoint(tmp_path / "a", model=_model(0), config=CONFIG, tokenizers={"src": NoSave()})
    with pytest.raises(ValueError, match="file stem"):
        save_checkpoint(tmp_path / "a", model=_model(0), config=CONFIG, tokenizers={"../evil": FakeTokenizer([])})
    with pytest.raises(ValueError, match="reserves"):
        save_checkpoint(tmp_path / "a", model=_model(0), config=CONFIG, tokenizers={"x": Sneaky([])})
    assert os.listdir(tmp_path) == []


def test_load_weights_lists_missing_unexpected_and_mismatched_keys(tmp_path):
    class Other(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(11, 8)
            self.mix = nn.Linear(8, 4)  # different shape
            self.extra = nn.Linear(2, 2)  # not in the checkpoint

    ck = load_checkpoint(save_checkpoint(tmp_path / "ck", model=_model(0), config=CONFIG))
    with pytest.raises(ValueError) as info:
        load_weights(Other(), ck)
    message = str(info.value)
    assert "does not fit Other" in message
    assert "missing from the checkpoint (2): extra.weight, extra.bias" in message
    assert "unexpected in the checkpoint" in message and "norm.weight" in message
    assert "mix.weight: checkpoint (8, 8) vs model (4, 8)" in message


# --------------------------------------------------------------------------------------------
# RNG state
# --------------------------------------------------------------------------------------------


def _draw() -> tuple:
    return (
        [random.random() for _ in range(3)],
        np.random.rand(3).tolist(),
        np.random.standard_normal(3).tolist(),  # odd count: leaves a cached Gaussian
        torch.rand(3),
        torch.randn(2),
    )


def _assert_same_draws(a: tuple, b: tuple) -> None:
    assert a[:3] == b[:3]
    torch.testing.assert_close(a[3], b[3], rtol=0, atol=0)
    torch.testing.assert_close(a[4], b[4], rtol=0, atol=0)


def test_rng_state_reproduces_python_numpy_torch():
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    np.random.standard_normal()  # put a cached Gaussian in numpy's state
    state = rng_state()
    first = _draw()
    second = _draw()
    assert first[0] != second[0]  # the generators advanced
    set_rng_state(state)
    _assert_same_draws(_draw(), first)


def test_rng_state_survives_a_checkpoint(tmp_path):
    random.seed(4), np.random.seed(5), torch.manual_seed(6)
    path = save_checkpoint(tmp_path / "ck", model=_model(0), config=CONFIG, trainer_state={"rng": rng_state()})
    expected = _draw()
    _draw()  # move on, as a run would before being interrupted
    set_rng_state(load_checkpoint(path).trainer_state["rng"])
    _assert_same_draws(_draw(), expected)


def test_set_rng_state_rejects_other_dicts():
    with pytest.raises(ValueError, match="lacks"):
        set_rng_state({"python": None})


def test_resolve_model_dir_takes_a_checkpoint_or_a_run_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="model directory not found"):
        resolve_model_dir(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="no model found"):
        resolve_model_dir(tmp_path)
    save_checkpoint(tmp_path / "best", model=TinyLM(), config={"model_type": "tiny"})
    assert resolve_model_dir(tmp_path) == tmp_path / "best"
    assert resolve_model_dir(tmp_path / "best") == tmp_path / "best"
