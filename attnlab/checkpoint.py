"""Checkpoints: safetensors weights + JSON config + tokenizer files (+ trainer state), written
atomically.

A checkpoint is a directory::

    model.safetensors   the state_dict (tied parameters stored once; see below)
    config.json         the model config as a JSON object, with a "model_type" key
    tokenizers.json     which files each tokenizer wrote: {"src": ["src.json"], ...}
    <name>.json ...     the tokenizer files themselves (written by ``tokenizer.save(dir, name)``)
    trainer_state.pt    optional: optimizer, scheduler, step, RNG states... for exact resume

**Atomic save.** An interrupted save (crash, Ctrl-C, full disk, power loss) never leaves a
half-written checkpoint under the final name and never destroys the previous good one. For a
final path ``run/last`` the sequence is:

1. check every input (config is JSON with a ``model_type``, tokenizers have ``.save``) before
   touching the disk; delete ``run/.last.tmp-*`` directories left by earlier interrupted saves;
2. write everything into a fresh sibling ``run/.last.tmp-<random>`` (same filesystem, so renames are
   atomic), ``fsync`` every file and then the directory — the data is on disk before any name
   points at it;
3. if ``run/last`` exists, ``os.replace(run/last, run/.last.previous)``;
4. ``os.replace(run/.last.tmp-<random>, run/last)`` — if this fails, step 3 is undone;
5. ``fsync(run)`` so both renames are durable, then delete ``run/.last.previous``.

A crash during 1–2 leaves ``run/last`` untouched. A crash between 3 and 4 (two renames apart)
leaves no ``run/last`` but the previous checkpoint complete in ``run/.last.previous``
(:func:`previous_path`); :func:`load_checkpoint` says so in its error,
:func:`attnlab.runs.resume_point` resumes a training run from there, and the next save finishes
the job. One writer per checkpoint directory at a time.

This module reads and writes checkpoint *files*. Training run folders (``best/``, ``last/``,
``log.jsonl``), resuming and RNG state are :mod:`attnlab.runs`; which folder a model name or path
means (shipped models, run folders) is :mod:`attnlab.assets.locate`; loading any model by name or
path is :mod:`attnlab.loading`.

**Tied weights.** A decoder whose output projection shares the embedding matrix has two
state_dict names for one tensor, and safetensors refuses shared memory. The file stores the tensor
once and records the alias in its metadata (``"attnlab.tied": {"out_proj.weight":
"embed.weight"}``); :func:`load_checkpoint` puts the alias back so both names map to one tensor,
and :func:`load_weights` checks that parameters tied in the model are equal in the checkpoint.

Shape:
    state_dict values keep the shapes and dtypes the model had; nothing is reshaped.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

from .files import contained_path, fsync_dir, new_file_mode

T = TypeVar("T")

Tensor = torch.Tensor

__all__ = [
    "Checkpoint",
    "save_checkpoint",
    "load_checkpoint",
    "load_weights",
    "pack_checkpoint",
    "tokenizer_paths",
    "model_folder",
    "is_checkpoint",
    "previous_path",
    "WEIGHTS_FILE",
    "CONFIG_FILE",
    "TOKENIZERS_FILE",
    "TRAINER_STATE_FILE",
]

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
TOKENIZERS_FILE = "tokenizers.json"
TRAINER_STATE_FILE = "trainer_state.pt"
_RESERVED = (WEIGHTS_FILE, CONFIG_FILE, TOKENIZERS_FILE, TRAINER_STATE_FILE)
_TIED_KEY = "attnlab.tied"  # safetensors metadata entry: JSON {alias name: stored name}
# safetensors metadata entry of a packed checkpoint: JSON {stored name: dtype the model trained in},
# for the tensors stored narrower (fp16) than that; load_checkpoint widens them back.
_DTYPES_KEY = "attnlab.dtypes"
_WIDENABLE = {"float32": torch.float32, "float64": torch.float64}  # what a packed tensor may widen back to
# safetensors metadata entry of an int8-packed checkpoint: JSON {matrix name: name of its per-row
# scales}; load_checkpoint multiplies each int8 row by its scale (and drops the scale tensors).
_SCALES_KEY = "attnlab.int8_scales"
_SCALE_SUFFIX = ".int8_scale"
_TOKENIZER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_LIST_LIMIT = 20  # how many key names an error message lists before "... and N more"


@dataclass
class Checkpoint:
    """What :func:`load_checkpoint` returns.

    Shape:
        ``state_dict`` tensors keep the shapes they were saved with.
    """

    state_dict: dict[str, Tensor]  # parameter/buffer name → tensor; tied names share one tensor
    config: dict[str, Any]  # the model config, including "model_type"
    directory: Path  # where the checkpoint was read from
    trainer_state: dict[str, Any] | None = None  # None when the checkpoint has no trainer state
    tokenizer_files: dict[str, list[Path]] = field(default_factory=dict)  # name → files written

    @property
    def model_type(self) -> str:
        """The ``"model_type"`` entry of the config (which model class to rebuild)."""
        return self.config["model_type"]

    def make_config(self, make: Callable[[dict[str, Any]], T]) -> T:
        """``make(config)`` on a copy of the config: the model config (and settings) it returns,
        with any value it refuses reported against ``config.json``, in one line.

        Raises:
            ValueError: ``make`` raised ValueError or TypeError (a field of the wrong type or out
                of range), or KeyError (an entry missing); the message names the file.
        """
        path = self.directory / CONFIG_FILE
        try:
            return make(dict(self.config))
        except KeyError as err:
            raise ValueError(f"{path}: no {err.args[0]!r} entry") from None
        except (TypeError, ValueError) as err:
            raise ValueError(f"{path}: {err}") from None


# --------------------------------------------------------------------------------------------
# Small helpers: names, fsync, model unwrapping, tied tensors
# --------------------------------------------------------------------------------------------


def _unwrap(model: nn.Module) -> nn.Module:
    """The module whose parameter names go in the file: drop ``torch.compile`` and
    DistributedDataParallel wrappers, which only prefix the names (``_orig_mod.``, ``module.``)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    while True:
        if hasattr(model, "_orig_mod") and isinstance(model._orig_mod, nn.Module):
            model = model._orig_mod
        elif isinstance(model, nn.parallel.DistributedDataParallel):
            model = model.module
        else:
            return model


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _files_under(directory: Path) -> set[str]:
    return {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()}


def _view_key(t: Tensor) -> tuple:
    """Identifies the exact memory a tensor views: same key ⇔ same tensor (tied)."""
    return (t.device, t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype)


def _dedupe_tied(state_dict: Mapping[str, Tensor]) -> tuple[dict[str, Tensor], dict[str, str]]:
    """Store each shared tensor once: returns (tensors to write, {alias: stored name})."""
    stored: dict[str, Tensor] = {}
    aliases: dict[str, str] = {}
    first_name_of_view: dict[tuple, str] = {}
    storages_used: set[tuple] = set()
    for name, t in state_dict.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"state_dict[{name!r}] is a {type(t).__name__}, not a tensor")
        t = t.detach()
        if t.numel() > 0:  # every empty tensor has data_ptr 0: never treat those as tied
            key = _view_key(t)
            if key in first_name_of_view:
                aliases[name] = first_name_of_view[key]
                continue
            first_name_of_view[key] = name
            storage = key[:2]
            if storage in storages_used:
                # Overlaps another entry's memory without being the same view (e.g. two slices
                # of one buffer): safetensors cannot share it, so this entry is stored as a copy.
                t = t.clone()
            storages_used.add(storage)
        stored[name] = t.contiguous()
    return stored, aliases


def _name_list(names: list[str]) -> str:
    shown = ", ".join(names[:_LIST_LIMIT])
    more = len(names) - _LIST_LIMIT
    return shown + (f", ... and {more} more" if more > 0 else "")


def _check_config(config: Any, where: str) -> dict:
    if not isinstance(config, dict):
        raise TypeError(f"{where}: config must be a dict (JSON object), got {type(config).__name__}")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ValueError(
            f"{where}: config has no 'model_type' string (got {model_type!r}); loaders need it "
            "to rebuild the right model class"
        )
    return config


def is_checkpoint(directory: Path) -> bool:
    """Whether ``directory`` holds a complete checkpoint's weights and config (it may still be damaged).

    Shape:
        no tensors.
    """
    return (directory / WEIGHTS_FILE).is_file() and (directory / CONFIG_FILE).is_file()


def previous_path(directory: Path) -> Path:
    """Where an interrupted save of ``directory`` left the previous checkpoint (module docstring,
    steps 3–4): the hidden sibling ``.NAME.previous``.

    Shape:
        no tensors.
    """
    return directory.parent / f".{directory.name}.previous"


def _first_line(message: object, limit: int = 200) -> str:
    """The first line of an exception's message, shortened: library errors can run to paragraphs."""
    text = str(message).strip().splitlines()[0] if str(message).strip() else "no message"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _unpickling_reason(exc: BaseException) -> str:
    # PyTorch's weights-only unpickler explains at length how to turn itself off; the cause is the
    # line after "WeightsUnpickler error:".
    text = str(exc)
    marker = "WeightsUnpickler error:"
    if marker in text:
        return _first_line(text.split(marker, 1)[1])
    return _first_line(exc)


# --------------------------------------------------------------------------------------------
# Save
# --------------------------------------------------------------------------------------------


def save_checkpoint(
    directory: str | os.PathLike,
    *,
    model: nn.Module,
    config: dict[str, Any],
    tokenizers: Mapping[str, Any] | None = None,
    trainer_state: dict[str, Any] | None = None,
) -> Path:
    """Write a checkpoint directory atomically (the sequence is in the module docstring).

    Args:
        directory: the checkpoint's final path. If it exists it must be a checkpoint (or empty):
            it is replaced, but only once the new one is completely on disk.
        model: the module to save (``torch.compile``/DDP wrappers are unwrapped).
        config: JSON-serialisable dict describing the model, with a ``"model_type"`` key — e.g.
            ``{"model_type": "transformer", **dataclasses.asdict(cfg)}``.
        tokenizers: name → object with ``.save(directory, name)``; names are file stems
            (letters, digits, ``_.-``) and must not clash with the checkpoint's own files.
        trainer_state: anything ``torch.save`` can store for exact resume (optimizer/scheduler
            state_dicts, step, epoch, :func:`rng_state`, best metric...). Use plain types and
            tensors so it loads with ``weights_only=True``.

    Returns:
        The final checkpoint path.

    Shape:
        the model's state_dict is written as is.
    """
    final = Path(directory)
    module = _unwrap(model)
    _check_config(config, "save_checkpoint")
    try:
        config_text = json.dumps(config, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    except (TypeError, ValueError) as exc:
        raise TypeError(f"save_checkpoint: config is not JSON-serialisable: {exc}") from exc
    tokenizers = dict(tokenizers or {})
    for name, tok in tokenizers.items():
        if not isinstance(name, str) or not _TOKENIZER_NAME.fullmatch(name):
            raise ValueError(f"tokenizer name {name!r} must be a file stem: letters, digits, _ . -")
        if not callable(getattr(tok, "save", None)):
            raise TypeError(f"tokenizers[{name!r}] ({type(tok).__name__}) has no .save(dir, name)")
    if trainer_state is not None and not isinstance(trainer_state, dict):
        raise TypeError(f"trainer_state must be a dict or None, got {type(trainer_state).__name__}")
    _check_replaceable(final)
    stored, aliases = _dedupe_tied(module.state_dict())
    return _write_checkpoint(final, stored, aliases, config_text, tokenizers, trainer_state)


def _check_replaceable(final: Path) -> None:
    """A checkpoint may replace only a checkpoint or an empty folder: never a folder of the user's."""
    if final.exists():
        if not final.is_dir():
            raise FileExistsError(f"{final} exists and is not a directory")
        if not is_checkpoint(final) and any(final.iterdir()):
            raise FileExistsError(
                f"{final} is a non-empty directory that is not a checkpoint (no {WEIGHTS_FILE} + "
                f"{CONFIG_FILE}); refusing to replace it"
            )


def _write_checkpoint(
    final: Path,
    stored: dict[str, Tensor],
    aliases: dict[str, str],
    config_text: str,
    tokenizers: dict[str, Any],
    trainer_state: dict[str, Any] | None,
    stored_dtypes: dict[str, str] | None = None,
    scales: dict[str, str] | None = None,
) -> Path:
    """Steps 1 (the clean-up) to 5 of the save, for checked inputs (see the module docstring)."""
    parent = final.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp_prefix = f".{final.name}.tmp-"
    for stale in parent.iterdir():
        if stale.name.startswith(tmp_prefix) and stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
    # Not tempfile.mkdtemp: its 0o700 mode would stay on the final checkpoint; os.mkdir honours
    # the umask like any other directory the user creates.
    tmp = parent / f"{tmp_prefix}{uuid.uuid4().hex[:12]}"
    os.mkdir(tmp)
    try:
        _write_contents(tmp, stored, aliases, config_text, tokenizers, trainer_state, stored_dtypes or {}, scales or {})
        _move_into_place(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _write_contents(
    tmp: Path,
    stored: dict[str, Tensor],
    aliases: dict[str, str],
    config_text: str,
    tokenizers: dict[str, Any],
    trainer_state: dict[str, Any] | None,
    stored_dtypes: dict[str, str],
    scales: dict[str, str] | None = None,
) -> None:
    """Step 2 of the save: fill the temporary directory and fsync it."""
    from safetensors.torch import save_file

    # Tokenizers first, so that a tokenizer that wrote one of our file names is caught here.
    manifest: dict[str, list[str]] = {}
    for name, tok in tokenizers.items():
        if isinstance(tok, _CopiedFiles) and tok.relative() in manifest.values():
            manifest[name] = tok.relative()  # packed from a checkpoint that shares these files
            continue
        before = _files_under(tmp)
        tok.save(tmp, name)
        written = sorted(_files_under(tmp) - before)
        if not written:
            raise ValueError(f"tokenizers[{name!r}].save({str(tmp)!r}, {name!r}) wrote no new file")
        clash = [f for f in written if f in _RESERVED]
        if clash:
            raise ValueError(f"tokenizers[{name!r}] wrote {clash}, which the checkpoint reserves")
        # A joint vocabulary is one tokenizer saved under two names (source and target): keep its
        # files once and point both names at them (the shipped translators' size budget counts).
        same = next((files for files in manifest.values() if _same_files(tmp, files, written)), None)
        if same is not None:
            for rel in written:
                (tmp / rel).unlink()
            written = same
        manifest[name] = written
    (tmp / TOKENIZERS_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    (tmp / CONFIG_FILE).write_text(config_text, encoding="utf-8")
    metadata = {"format": "pt", _TIED_KEY: json.dumps(aliases)}
    if stored_dtypes:
        metadata[_DTYPES_KEY] = json.dumps(stored_dtypes)
    if scales:
        metadata[_SCALES_KEY] = json.dumps(scales)
    save_file(stored, str(tmp / WEIGHTS_FILE), metadata=metadata)
    os.chmod(tmp / WEIGHTS_FILE, new_file_mode())  # save_file writes 0600; config.json follows the umask
    if trainer_state is not None:
        torch.save(trainer_state, tmp / TRAINER_STATE_FILE)
    for rel in _files_under(tmp):
        _fsync_file(tmp / rel)
    for sub in sorted((p for p in tmp.rglob("*") if p.is_dir()), reverse=True):
        fsync_dir(sub)
    fsync_dir(tmp)


def _same_files(root: Path, a: list[str], b: list[str]) -> bool:
    """Whether two lists of files under ``root`` hold the same bytes, pairwise in order."""
    return len(a) == len(b) and all((root / x).read_bytes() == (root / y).read_bytes() for x, y in zip(a, b))


def _move_into_place(tmp: Path, final: Path) -> None:
    """Steps 3–5 of the save: swap the finished directory in under the final name."""
    previous = previous_path(final)
    if final.exists() and previous.exists():
        # Left by an earlier save that died after step 4: `final` is the good one.
        shutil.rmtree(previous)
    if final.exists():
        os.replace(final, previous)
    try:
        os.replace(tmp, final)
    except BaseException:
        if previous.exists() and not final.exists():
            os.replace(previous, final)
        raise
    fsync_dir(final.parent)
    shutil.rmtree(previous, ignore_errors=True)


class _CopiedFiles:
    """Stands in for a tokenizer when a checkpoint is packed: its ``save`` copies the files that
    tokenizer wrote into the source checkpoint, under the same names."""

    def __init__(self, source: Path, files: list[Path]) -> None:
        self.source, self.files = source, files

    def relative(self) -> list[str]:
        return [path.relative_to(self.source).as_posix() for path in self.files]

    def save(self, directory: str | os.PathLike, name: str) -> None:
        for path in self.files:
            target = Path(directory) / path.relative_to(self.source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)


def pack_checkpoint(
    source: str | os.PathLike,
    destination: str | os.PathLike,
    *,
    dtype: torch.dtype = torch.float16,
) -> Path:
    """Write a compact copy of a trained model: how the models shipped with attnlab are stored.

    ``source`` is a checkpoint or a training output folder (its ``best/``: :func:`model_folder`). The copy at ``destination`` holds the config, the tokenizer files
    and the weights, every fp32/fp64 tensor stored in ``dtype`` (half the bytes) with its original
    dtype recorded in the file's metadata, so that :func:`load_checkpoint` hands it back in that
    dtype: the model computes as it was trained, with its weights rounded to ``dtype``. Integer
    and boolean tensors are copied as they are; the trainer state is left out. Written atomically,
    like :func:`save_checkpoint`.

    With ``dtype=torch.int8`` (a quarter of the bytes), each matrix (a 2-D float tensor:
    embeddings, projections) is stored as int8 with one fp32 scale per row, ``w ≈ q · s`` with
    ``s = max|row| / 127`` (symmetric per-row quantization, as in LLM.int8's vector-wise scheme,
    Dettmers et al. 2022, without its outlier split); vectors (biases, norms) are stored in fp16.
    :func:`load_checkpoint` dequantizes at load, so the model computes in fp32 as it was trained.

    Returns:
        ``destination``.

    Raises:
        ValueError: ``dtype`` is not a 16-bit float, or a weight is not finite or too large for it
            (fp16 holds magnitudes up to 65504).
        FileExistsError: ``destination`` is a file, or a non-empty folder that is not a checkpoint.

    Shape:
        every tensor keeps its shape.
    """
    if dtype not in (torch.float16, torch.bfloat16, torch.int8):
        raise ValueError(f"pack_checkpoint stores weights in float16, bfloat16 or int8, got {dtype}")
    final = Path(destination)
    checkpoint = load_checkpoint(model_folder(source))
    _check_replaceable(final)
    stored, aliases = _dedupe_tied(checkpoint.state_dict)
    vector_dtype = torch.float16 if dtype == torch.int8 else dtype
    largest = torch.finfo(vector_dtype).max
    widened: dict[str, str] = {}
    scales: dict[str, str] = {}
    for name, t in list(stored.items()):
        if t.dtype not in (torch.float32, torch.float64):
            continue
        if t.numel() and not bool(torch.isfinite(t).all()):
            raise ValueError(f"{checkpoint.directory}: {name!r} holds non-finite values; such weights cannot be packed")
        widened[name] = str(t.dtype).removeprefix("torch.")
        if dtype == torch.int8 and t.ndim == 2 and t.numel():
            scale = t.float().abs().amax(dim=1).clamp_min(torch.finfo(torch.float32).tiny) / 127  # (rows,)
            stored[name] = torch.round(t.float() / scale[:, None]).clamp(-127, 127).to(torch.int8)  # (rows, cols)
            stored[name + _SCALE_SUFFIX] = scale
            scales[name] = name + _SCALE_SUFFIX
            continue
        if t.numel() and float(t.abs().max()) > largest:
            raise ValueError(
                f"{checkpoint.directory}: {name!r} holds a value of magnitude {float(t.abs().max()):.4g}, "
                f"beyond {vector_dtype}'s largest ({largest:g})"
            )
        stored[name] = t.to(vector_dtype)
    config_text = json.dumps(checkpoint.config, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    tokenizers = {name: _CopiedFiles(checkpoint.directory, files) for name, files in checkpoint.tokenizer_files.items()}
    return _write_checkpoint(final, stored, aliases, config_text, tokenizers, None, widened, scales)


# --------------------------------------------------------------------------------------------
# Load
# --------------------------------------------------------------------------------------------


def model_folder(path: str | os.PathLike) -> Path:
    """The checkpoint in the folder ``path``: the folder itself when it holds a ``config.json``,
    else its ``best/`` checkpoint (``path`` is then a training output folder, :mod:`attnlab.runs`).
    (A shipped model's name is resolved one level up, by :func:`attnlab.assets.locate.resolve_model_dir`.)

    Raises:
        FileNotFoundError: ``path`` is not a directory, or neither it nor ``path/best`` holds a
            ``config.json``.

    Shape:
        no tensors; returns a directory.
    """
    path = Path(path)
    if not path.is_dir():
        kind = "is not a directory" if path.exists() else "does not exist"
        raise FileNotFoundError(f"model directory not found: {path} {kind}")
    for candidate in (path, path / "best"):
        if (candidate / CONFIG_FILE).is_file():
            return candidate
    raise FileNotFoundError(
        f"{path}: no model found ({path / CONFIG_FILE} not found, nor {path / 'best' / CONFIG_FILE}); "
        "expected an attnlab checkpoint or a training output folder holding best/"
    )


def tokenizer_paths(directory: str | os.PathLike) -> dict[str, list[Path]]:
    """The files of each tokenizer saved in a checkpoint folder, by name (its ``tokenizers.json``;
    two names may share files: a joint vocabulary is stored once). Empty without that file.

    Raises:
        ValueError: the manifest is not valid JSON or names a file outside ``directory``.
        FileNotFoundError: a listed file is missing.

    Shape:
        no tensors.
    """
    directory = Path(directory)
    tokenizer_files: dict[str, list[Path]] = {}
    manifest_path = directory / TOKENIZERS_FILE
    if manifest_path.is_file():
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{manifest_path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(manifest, dict) or not all(isinstance(files, list) for files in manifest.values()):
            raise ValueError(f"{manifest_path}: must map each tokenizer name to a list of file names")
        tokenizer_files = {
            name: [contained_path(directory, f, source=manifest_path, what=f"tokenizer {name!r} file") for f in files]
            for name, files in manifest.items()
        }
        for name, files in tokenizer_files.items():
            for f in files:
                if not f.is_file():
                    raise FileNotFoundError(f"{f}: tokenizer {name!r} file listed in {manifest_path} is missing")
    return tokenizer_files


def load_checkpoint(
    directory: str | os.PathLike,
    *,
    map_location: str | torch.device = "cpu",
    weights_only: bool = True,
) -> Checkpoint:
    """Read a checkpoint directory written by :func:`save_checkpoint`.

    Args:
        directory: the checkpoint directory.
        map_location: device for the tensors (weights and trainer state).
        weights_only: load ``trainer_state.pt`` with PyTorch's restricted unpickler (tensors and
            plain Python types only). Pass ``False`` only for checkpoints you wrote yourself:
            full unpickling can run arbitrary code.

    Returns:
        A :class:`Checkpoint`; tied names in ``state_dict`` map to one shared tensor.

    Raises:
        FileNotFoundError: no such directory or a required file is missing.
        ValueError: unreadable weights, invalid ``config.json`` (with file:line), no
            ``model_type``.

    Shape:
        tensors as saved.
    """
    from safetensors import SafetensorError, safe_open

    directory = Path(directory)
    if not directory.is_dir():
        previous = previous_path(directory)
        hint = ""
        if is_checkpoint(previous):
            hint = (
                f"; a save was interrupted between its two renames and the previous checkpoint is "
                f"intact at {previous} — rename it to {directory.name} or save again"
            )
        raise FileNotFoundError(f"{directory}: no such checkpoint directory{hint}")
    for required in (WEIGHTS_FILE, CONFIG_FILE):
        if not (directory / required).is_file():
            raise FileNotFoundError(f"{directory / required}: missing; not a complete checkpoint")

    config_path = directory / CONFIG_FILE
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{config_path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{config_path}: not UTF-8 text ({exc.reason})") from None
    _check_config(config, str(config_path))

    weights_path = directory / WEIGHTS_FILE
    device = str(map_location) if isinstance(map_location, torch.device) else map_location
    try:
        with safe_open(str(weights_path), framework="pt", device=device) as f:
            metadata = f.metadata() or {}
            state_dict = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 (safe_open is not a dict)
    except SafetensorError as exc:
        raise ValueError(f"{weights_path}: not a readable safetensors file ({exc})") from None
    try:
        aliases = json.loads(metadata.get(_TIED_KEY, "{}"))
        widen = json.loads(metadata.get(_DTYPES_KEY, "{}"))
        scales = json.loads(metadata.get(_SCALES_KEY, "{}"))
    except json.JSONDecodeError:
        raise ValueError(
            f"{weights_path}: corrupt {_TIED_KEY!r}, {_DTYPES_KEY!r} or {_SCALES_KEY!r} metadata"
        ) from None
    for name, scale_name in scales.items():
        # An int8-packed matrix (pack_checkpoint): each row times its scale gives the weights back.
        q, scale = state_dict.get(name), state_dict.pop(scale_name, None)
        if q is None or scale is None or q.dtype != torch.int8 or q.ndim != 2 or scale.shape != (q.shape[0],):
            raise ValueError(
                f"{weights_path}: {_SCALES_KEY!r} names {name!r} with scales {scale_name!r}, which do not match"
            )
        state_dict[name] = q.float() * scale.float()[:, None]  # (rows, cols)
    for name, dtype in widen.items():
        if name not in state_dict or dtype not in _WIDENABLE:
            raise ValueError(f"{weights_path}: {_DTYPES_KEY!r} names {name!r} as {dtype!r}, which cannot be restored")
        # A packed checkpoint (pack_checkpoint) stores its weights in fp16; the model computes in
        # the dtype it was trained in, so it gets that back here.
        state_dict[name] = state_dict[name].to(_WIDENABLE[dtype])
    for alias, target in aliases.items():
        if target not in state_dict:
            raise ValueError(f"{weights_path}: {alias!r} is tied to {target!r}, which is not stored")
        state_dict[alias] = state_dict[target]

    tokenizer_files = tokenizer_paths(directory)

    trainer_state = None
    state_path = directory / TRAINER_STATE_FILE
    if state_path.is_file():
        try:
            trainer_state = torch.load(state_path, map_location=map_location, weights_only=weights_only)
        except pickle.UnpicklingError as exc:
            raise ValueError(
                f"{state_path}: cannot be loaded with weights_only=True ({_unpickling_reason(exc)}): it is "
                "damaged, or holds more than tensors and plain Python types (keep trainer state to those)"
            ) from None
        # torch.load's errors for a damaged file vary (RuntimeError, OSError, EOFError, KeyError...).
        except Exception as exc:  # noqa: BLE001
            raise ValueError(
                f"{state_path}: damaged, not a PyTorch file ({type(exc).__name__}: {_first_line(exc)})"
            ) from None
    return Checkpoint(
        state_dict=state_dict,
        config=config,
        directory=directory,
        trainer_state=trainer_state,
        tokenizer_files=tokenizer_files,
    )


def load_weights(model: nn.Module, checkpoint: Checkpoint | Mapping[str, Tensor]) -> None:
    """Copy a checkpoint's tensors into ``model``, strictly.

    Every parameter/buffer of the model must be in the checkpoint with the same shape, and the
    checkpoint must hold nothing else; otherwise a ValueError lists the missing keys, the
    unexpected keys and the shape mismatches. Parameters tied in the model (one tensor, two
    names) stay tied — their storage is shared by construction — and the checkpoint must hold one
    value for them (tied there too, or equal).

    Shape:
        each checkpoint tensor must match the model's tensor of the same name.
    """
    module = _unwrap(model)
    state = checkpoint.state_dict if isinstance(checkpoint, Checkpoint) else checkpoint
    source = f"checkpoint {checkpoint.directory}" if isinstance(checkpoint, Checkpoint) else "state_dict"
    if not isinstance(state, Mapping):
        raise TypeError(f"checkpoint must be a Checkpoint or a state_dict, got {type(checkpoint).__name__}")
    expected = module.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    mismatched = [
        f"{k}: checkpoint {tuple(state[k].shape)} vs model {tuple(expected[k].shape)}"
        for k in expected
        if k in state and tuple(state[k].shape) != tuple(expected[k].shape)
    ]
    problems = []
    if missing:
        problems.append(f"missing from the checkpoint ({len(missing)}): {_name_list(missing)}")
    if unexpected:
        problems.append(f"unexpected in the checkpoint ({len(unexpected)}): {_name_list(unexpected)}")
    if mismatched:
        problems.append(f"shape mismatches ({len(mismatched)}): {_name_list(mismatched)}")
    if problems:
        raise ValueError(f"{source} does not fit {type(module).__name__}:\n  " + "\n  ".join(problems))
    first_name_of_view: dict[tuple, str] = {}
    for name, t in expected.items():
        if t.numel() == 0:
            continue
        first = first_name_of_view.setdefault(_view_key(t), name)
        if (
            first != name
            and state[first] is not state[name]
            and not torch.equal(state[first].to(state[name].device), state[name])
        ):
            raise ValueError(
                f"{source}: {name!r} and {first!r} are one tied tensor in the model but differ "
                "in the checkpoint (was it saved from an untied model?)"
            )
    module.load_state_dict(state, strict=True)
