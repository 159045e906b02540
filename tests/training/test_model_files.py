"""Files of a model folder (issue 17): names read from it stay inside it, written files follow the
umask, and a pickled HuggingFace checkpoint is never unpickled beyond tensors."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from attnlab.checkpoint import load_checkpoint, save_checkpoint
from attnlab.data.tokenizers import CharTokenizer
from attnlab.files import contained_path, new_file_mode
from attnlab.models.convert_hf import load_hf_state_dict

BAD_NAMES = [
    "../../etc/passwd",
    "../outside.json",
    "sub/../../outside.json",
    "/etc/passwd",
    "C:\\Windows\\win.ini",
    "..\\..\\outside.json",
    "",
    "a\0b",
]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _symlink_or_skip(link: Path, target: Path) -> None:
    try:
        link.symlink_to(target)
    except (OSError, NotImplementedError):
        pytest.skip("this platform cannot create symbolic links")


# --------------------------------------------------------------------------------------------
# contained_path
# --------------------------------------------------------------------------------------------


def test_contained_path_accepts_names_inside_the_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    assert contained_path(tmp_path, "a.json", source="index") == tmp_path / "a.json"
    assert contained_path(tmp_path, "sub/b.json", source="index") == tmp_path / "sub" / "b.json"
    assert contained_path(tmp_path, "./c.json", source="index") == tmp_path / "c.json"
    (tmp_path / "real.json").write_text("{}")
    _symlink_or_skip(tmp_path / "alias.json", tmp_path / "real.json")  # a link that stays inside
    assert contained_path(tmp_path, "alias.json", source="index") == tmp_path / "alias.json"


@pytest.mark.parametrize("name", BAD_NAMES)
def test_contained_path_rejects_names_that_leave_the_folder(tmp_path, name):
    with pytest.raises(ValueError, match=r"^index.json: weight_map entry .* (relative path|not a file name)") as err:
        contained_path(tmp_path, name, source="index.json", what="weight_map entry")
    assert "\n" not in str(err.value)


def test_contained_path_rejects_non_strings_and_escaping_symlinks(tmp_path):
    with pytest.raises(ValueError, match=r"index.json: entry 3 must be a file name \(a string\), got int"):
        contained_path(tmp_path, 3, source="index.json")
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "secret.txt").write_text("secret")
    _symlink_or_skip(folder / "shard.safetensors", tmp_path / "secret.txt")
    with pytest.raises(ValueError, match=r"index.json: entry 'shard.safetensors' leads out of .*model.*symbolic link"):
        contained_path(folder, "shard.safetensors", source="index.json")
    (folder / "up").symlink_to(tmp_path)  # a linked directory on the way
    with pytest.raises(ValueError, match="leads out of"):
        contained_path(folder, "up/secret.txt", source="index.json")


# --------------------------------------------------------------------------------------------
# attnlab checkpoints: tokenizers.json
# --------------------------------------------------------------------------------------------


def _checkpoint(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    return save_checkpoint(
        tmp_path / "ck",
        model=nn.Linear(3, 2),
        config={"model_type": "linear"},
        tokenizers={"src": CharTokenizer(["a", "b"])},
    )


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", "../outside.json"])
def test_checkpoint_tokenizer_manifest_names_stay_inside(tmp_path, name):
    path = _checkpoint(tmp_path)
    (tmp_path / "outside.json").write_text("{}")
    (path / "tokenizers.json").write_text(json.dumps({"src": [name]}))
    with pytest.raises(ValueError, match=r"tokenizers.json: tokenizer 'src' file .* must be a relative path") as err:
        load_checkpoint(path)
    assert "\n" not in str(err.value)


def test_checkpoint_tokenizer_manifest_symlink_out_and_wrong_types(tmp_path):
    path = _checkpoint(tmp_path)
    (tmp_path / "outside.json").write_text("{}")
    _symlink_or_skip(path / "linked.json", tmp_path / "outside.json")
    (path / "tokenizers.json").write_text(json.dumps({"src": ["linked.json"]}))
    with pytest.raises(ValueError, match=r"tokenizers.json: tokenizer 'src' file 'linked.json' leads out of"):
        load_checkpoint(path)
    for manifest in (["src.json"], {"src": "src.json"}, {"src": [7]}):
        (path / "tokenizers.json").write_text(json.dumps(manifest))
        with pytest.raises(ValueError, match=r"tokenizers.json: "):
            load_checkpoint(path)
    (path / "tokenizers.json").write_text(json.dumps({"src": ["src.json"]}))
    assert load_checkpoint(path).tokenizer_files == {"src": [path / "src.json"]}


# --------------------------------------------------------------------------------------------
# HuggingFace checkpoints: the safetensors shard index, pytorch_model.bin
# --------------------------------------------------------------------------------------------


def _sharded(folder: Path, shard_names: dict[str, str]) -> dict[str, torch.Tensor]:
    """Write one tensor per shard and an index mapping each tensor to its shard name."""
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for i, (tensor, shard) in enumerate(shard_names.items()):
        tensors[tensor] = torch.full((2,), float(i))
        target = folder / shard
        if not target.exists() and ".." not in shard and not Path(shard).is_absolute():
            save_file({tensor: tensors[tensor]}, str(target))
    index = {"metadata": {}, "weight_map": shard_names}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return tensors


def test_sharded_safetensors_load(tmp_path):
    tensors = _sharded(tmp_path / "m", {"a": "model-1.safetensors", "b": "model-2.safetensors"})
    state = load_hf_state_dict(tmp_path / "m")
    assert state.keys() == tensors.keys() and all(torch.equal(state[k], tensors[k]) for k in tensors)


@pytest.mark.parametrize("name", ["../outside.safetensors", "../../etc/passwd", "ABSOLUTE"])
def test_shard_index_names_stay_inside_and_nothing_outside_is_read(tmp_path, name, monkeypatch):
    import safetensors.torch

    outside = tmp_path / "outside.safetensors"
    save_file({"b": torch.zeros(2)}, str(outside))
    name = str(outside) if name == "ABSOLUTE" else name
    _sharded(tmp_path / "m", {"a": "model-1.safetensors", "b": name})
    read = []
    real_load = safetensors.torch.load_file
    monkeypatch.setattr(safetensors.torch, "load_file", lambda f, *a, **k: read.append(f) or real_load(f, *a, **k))
    with pytest.raises(ValueError, match=r"model.safetensors.index.json: weight_map entry .* relative path") as err:
        load_hf_state_dict(tmp_path / "m")
    assert "\n" not in str(err.value)
    assert read == []  # checked before any shard is read


def test_shard_index_symlink_out_missing_shard_and_bad_map(tmp_path):
    outside = tmp_path / "outside.safetensors"
    save_file({"b": torch.zeros(2)}, str(outside))
    folder = tmp_path / "m"
    _sharded(folder, {"a": "model-1.safetensors"})
    _symlink_or_skip(folder / "model-2.safetensors", outside)
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}})
    )
    with pytest.raises(ValueError, match=r"weight_map entry 'model-2.safetensors' leads out of"):
        load_hf_state_dict(folder)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "model-3.safetensors"}}))
    with pytest.raises(FileNotFoundError, match=r"model-3.safetensors: shard listed in .*index.json is missing"):
        load_hf_state_dict(folder)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": ["model-1.safetensors"]}))
    with pytest.raises(ValueError, match=r"index.json: weight_map must map tensor names to shard file names"):
        load_hf_state_dict(folder)


class _RunsCode:
    def __reduce__(self):
        return (os.getcwd, ())


def test_pickled_checkpoint_error_points_to_safetensors(tmp_path):
    torch.save({"w": torch.zeros(2), "hook": _RunsCode()}, tmp_path / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"pytorch_model.bin: holds pickled objects other than tensors") as err:
        load_hf_state_dict(tmp_path)
    message = str(err.value)
    assert "convert the checkpoint to safetensors" in message
    assert "weights_only" not in message and "\n" not in message
    (tmp_path / "pytorch_model.bin").write_bytes(b"not a checkpoint at all")
    with pytest.raises(ValueError, match=r"pytorch_model.bin: not a readable PyTorch checkpoint") as err:
        load_hf_state_dict(tmp_path)
    assert "weights_only" not in str(err.value) and "\n" not in str(err.value)
    torch.save({"w": torch.ones(2)}, tmp_path / "pytorch_model.bin")
    assert torch.equal(load_hf_state_dict(tmp_path)["w"], torch.ones(2))


# --------------------------------------------------------------------------------------------
# Written files follow the umask
# --------------------------------------------------------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002])
def test_written_files_follow_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        assert new_file_mode() == 0o666 & ~umask
        path = save_checkpoint(
            tmp_path / "ck",
            model=nn.Linear(3, 2),
            config={"model_type": "linear"},
            tokenizers={"src": CharTokenizer(["a", "b"])},
            trainer_state={"step": 1},
        )
        tok = CharTokenizer(["x"]).save(tmp_path / "alone", "tok")
    finally:
        os.umask(old)
    files = sorted(p for p in path.iterdir() if p.is_file())
    assert {p.name for p in files} >= {"config.json", "model.safetensors", "src.json", "tokenizers.json"}
    assert {p.name: _mode(p) for p in files} == {p.name: 0o666 & ~umask for p in files}
    assert _mode(tok) == 0o666 & ~umask
