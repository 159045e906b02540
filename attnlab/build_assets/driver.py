"""The driver of ``make models``: which builds there are (:data:`BUILDS`), and training, packing and
describing them (:func:`build`, :func:`pack_asset`; the command line :func:`main`).

Each build (:mod:`.translators`, :mod:`.language_models`, :mod:`.applications`) says how its model
is trained and judged; this module runs the trainings (:func:`build`: the one-thread ones side by
side, the others one after another, each a subprocess of the ordinary command), checks the
trained model's ``config.json`` against its build (:func:`config_differences`), packs it and
writes its card (:func:`pack_asset`, with the run's :func:`training_facts`), and checks the
assets' total size.

Shape:
    no tensors cross this module's interface: folders and text in, asset folders and cards out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from .. import assets, machine
from .. import checkpoint as ckpt
from ..assets.cards import ModelCard, metric_text, write_model_card
from ..files import write_text_atomically
from .applications import DigitsViT, FactsQA, FactsSummarizer, KarateGAT, SentenceTypeClassifier
from .common import AssetBuild, read_config
from .language_models import ShakespeareMLM, TextLM
from .translators import BottleneckRNN, DemoTranslator, EnjaTranslator

__all__ = ["BUILDS", "config_differences", "LOAD_FILE", "training_facts", "pack_asset", "build", "main"]

# A build's `storage` (default "float16") -> the dtype pack_checkpoint stores its weights in.
_STORAGE_DTYPES = {"float16": torch.float16, "int8": torch.int8}


#: How ``make models`` makes each shipped model (:data:`attnlab.assets.ASSETS`), by name.
BUILDS: dict[str, AssetBuild] = {
    "demo": DemoTranslator(),
    "ja-en": EnjaTranslator("ja-en", preset="ja-en", src="ja", tgt="en"),
    "en-ja": EnjaTranslator("en-ja", preset="en-ja", src="en", tgt="ja"),
    "rnn-attention": BottleneckRNN("rnn-attention", contestant="rnn-additive"),
    "rnn-plain": BottleneckRNN("rnn-plain", contestant="rnn-none"),
    "shakespeare-char": TextLM("shakespeare-char", preset="shakespeare-char-small"),
    "ja-sentence-type": SentenceTypeClassifier(),
    "shakespeare-mlm": ShakespeareMLM(),
    "facts-summarizer": FactsSummarizer(),
    "facts-qa": FactsQA(),
    "digits-vit": DigitsViT(),
    "karate-gat": KarateGAT(),
}


def config_differences(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    """The entries where two ``config.json`` contents differ, as ``key: actual (expected E)``.

    Shape:
        no tensors; one line per differing key, sorted by key.
    """
    expected = json.loads(json.dumps(expected))  # tuples → lists, as config.json holds them
    keys = sorted(set(expected) | set(actual))
    missing = object()
    return [
        f"{k}: {actual.get(k, missing)!r} (expected {expected.get(k, missing)!r})".replace(repr(missing), "absent")
        for k in keys
        if expected.get(k, missing) != actual.get(k, missing)
    ]


def _parameter_count(directory: Path) -> int:
    from safetensors import safe_open

    with safe_open(str(directory / ckpt.WEIGHTS_FILE), framework="pt") as f:
        return sum(math.prod(f.get_slice(name).get_shape()) for name in f.keys())  # noqa: SIM118 (not a dict)


def _attnlab_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("attnlab")
    except PackageNotFoundError:
        return "unknown"


def _usage(entry: assets.ShippedModel) -> str:
    example = entry.examples[0] if entry.examples else "..."
    if entry.command == "generate":
        return f"attnlab generate --model {entry.name} --prompt {shlex.quote(example)} --temperature 0"
    if entry.command in ("vit", "gat"):  # the example is a held-out image's index, or a member's number
        option = "--index" if entry.command == "vit" else "--node"
        return f"attnlab {entry.command} --model {entry.name} {option} {example}"
    return f"attnlab {entry.command} --model {entry.name} {shlex.quote(example)}"


def _threads_env(threads: int | None) -> dict[str, str]:
    env = dict(os.environ)
    if threads is not None:
        # PyTorch (OpenMP/MKL) and the tokenizers' Rust pool each start one thread per core otherwise.
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"):
            env[name] = str(threads)
    return env


def _attnlab(args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "attnlab.cli", *args]


def _train(trainings: Mapping[str, AssetBuild], data: Path, runs: Path, log: Callable[[str], None]) -> dict[str, Path]:
    """Run each training (one per run key) into ``runs/KEY``; return the run folders by key.

    The one-thread trainings run side by side first, each with its output in ``runs/KEY.log``
    (two of them fill a two-core machine); then the others, one after another, their output
    shown as it comes.

    Raises:
        RuntimeError: a training failed (the side-by-side ones are all waited for first).
    """
    runs.mkdir(parents=True, exist_ok=True)
    folders = {key: runs / key for key in trainings}
    for key, asset_build in trainings.items():
        prepare = getattr(asset_build, "prepare", None)
        if prepare is not None:
            log(f"preparing the data of {key}")
            prepare(data, folders[key])
    side = [key for key, r in trainings.items() if r.threads == 1]
    if len(side) < 2:
        side = []
    started: list[tuple[str, Path, subprocess.Popen]] = []
    load_before = os.getloadavg()[0]
    try:
        for key in side:
            asset_build, logfile = trainings[key], runs / f"{key}.log"
            log(f"training {key} (1 thread, beside {', '.join(k for k in side if k != key)}); output: {logfile}")
            with open(logfile, "w", encoding="utf-8") as out:
                command = _attnlab(asset_build.command(data, folders[key]))
                started.append((key, logfile, subprocess.Popen(command, env=_threads_env(1), stdout=out, stderr=out)))
        statuses = [(key, logfile, process.wait()) for key, logfile, process in started]
    except BaseException:
        for _, _, process in started:  # Ctrl-C or an error here: no training is left running unseen
            process.terminate()
        raise
    for key, logfile, status in statuses:
        if status != 0:
            raise RuntimeError(f"the training of {key} failed (exit status {status}); see {logfile}")
        _write_load(folders[key], load_before)
    for key, asset_build in trainings.items():
        if key in side:
            continue
        log(f"training {key}: attnlab {shlex.join(asset_build.command(data, folders[key]))}")
        load_before = os.getloadavg()[0]
        done = subprocess.run(_attnlab(asset_build.command(data, folders[key])), env=_threads_env(asset_build.threads))
        if done.returncode != 0:
            raise RuntimeError(f"the training of {key} failed (exit status {done.returncode}); see its output above")
        _write_load(folders[key], load_before)
    return folders


LOAD_FILE = "load.json"  # in a run folder: the machine's load around the training (training_facts reads it)


def _write_load(run: Path, before: float) -> None:
    """Record the 1-minute load average when a training started and ended, and the cores, in ``run``:
    the card says whether the training shared the machine."""
    if run.is_dir():
        facts = {"load_before": before, "load_after": os.getloadavg()[0], "cores": os.cpu_count()}
        write_text_atomically(run / LOAD_FILE, json.dumps(facts) + "\n")


def training_facts(checkpoint: Path) -> dict[str, Any] | None:
    """Steps, training minutes, mean target tokens/s and stop reason of the run that wrote
    ``checkpoint`` (its folder's or its parent's ``log.jsonl``), with this machine's CPU and, where
    the build recorded it (``load.json``), the load average when the training started and ended;
    None without a log.

    Shape:
        no tensors.
    """
    log_path = next((p / "log.jsonl" for p in (checkpoint, checkpoint.parent) if (p / "log.jsonl").is_file()), None)
    if log_path is None:
        return None
    records = [json.loads(line) for line in log_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    timed = [r for r in records if "train_seconds" in r and "step" in r]
    if not timed:
        return None
    seconds = float(timed[-1]["train_seconds"])
    rates = [r["tokens_per_s"] for r in records if "tokens_per_s" in r]
    tokens_per_s, stop = (sum(rates) / len(rates) if rates else 0.0), ""
    state_path = log_path.parent / "last" / ckpt.TRAINER_STATE_FILE
    if state_path.is_file():  # the exact totals, and why the run stopped
        state = torch.load(state_path, map_location="cpu", weights_only=False)
        stop = state.get("stop_reason", "") if isinstance(state.get("stop_reason"), str) else ""
        if state.get("tokens") and seconds > 0:
            tokens_per_s = state["tokens"] / seconds
    facts = {
        "steps": int(timed[-1]["step"]),
        "minutes": seconds / 60,
        "tokens_per_s": tokens_per_s,
        "stop_reason": stop,
        "cpu": machine.cpu_name(),
    }
    load_path = log_path.parent / LOAD_FILE
    if load_path.is_file():
        facts.update(json.loads(load_path.read_text(encoding="utf-8")))
    return facts


def pack_asset(
    asset_build: AssetBuild,
    run: Path,
    destination: Path,
    data: Path,
    *,
    command: str,
    packed_from: Path | None = None,
    date: str | None = None,
    log: Callable[[str], None] = print,
) -> ModelCard:
    """Check the model in the run folder ``run`` against ``asset_build``, pack it into ``destination``,
    measure the packed model and write its card.

    Raises:
        ValueError: the trained model's config is not the one the build makes (e.g. a run of other
            settings given with --from-run); nothing is written then.

    Shape:
        no tensors cross it: a run folder in, an asset folder and its card out.
    """
    source = asset_build.checkpoint(run)
    wrong = config_differences(asset_build.expected_config(source), read_config(source))
    if wrong:
        raise ValueError(
            f"{source} is not what the {asset_build.name} build makes ({len(wrong)} config.json entries differ: "
            f"{'; '.join(wrong[:5])}); train it with: attnlab {command}"
        )
    storage = getattr(asset_build, "storage", "float16")
    log(f"packing {source} → {destination} ({storage})")
    ckpt.pack_checkpoint(source, destination, dtype=_STORAGE_DTYPES[storage])
    log(f"measuring {asset_build.name} on held-out data")
    evaluation = asset_build.evaluate(destination, data)
    entry = assets.ASSETS[asset_build.name]
    card = ModelCard(
        name=asset_build.name,
        description_en=entry.description_en,
        description_ja=entry.description_ja,
        usage=_usage(entry),
        command=f"attnlab {command}",
        seed=asset_build.seed,
        data=asset_build.data,
        licence=asset_build.licence,
        date=date or datetime.date.today().isoformat(),
        parameters=_parameter_count(destination),
        weights_bytes=(destination / ckpt.WEIGHTS_FILE).stat().st_size,
        metrics=evaluation.metrics,
        evaluation=evaluation.evaluation,
        check=evaluation.check,
        example_outputs=asset_build.example_outputs(destination, entry.examples),
        reproduce=evaluation.reproduce,
        packed_from=None if packed_from is None else str(packed_from),
        attnlab_version=_attnlab_version(),
        training=training_facts(source),
        storage=storage,
    )
    if card.training is not None and hasattr(asset_build, "tokens_counted"):
        card.training["tokens_counted"] = asset_build.tokens_counted
    write_model_card(destination, card)
    return card


def build(
    names: Sequence[str] | None = None,
    *,
    data: Path = Path("../shared/data"),
    runs: Path = Path("runs/models"),
    from_run: Path | None = None,
    root: Path | None = None,
    builds: Mapping[str, AssetBuild] | None = None,
    log: Callable[[str], None] = print,
) -> list[ModelCard]:
    """Train (or, with ``from_run``, take), pack and describe the shipped models ``names`` (all by
    default); returns their cards.

    Args:
        names: which models (keys of ``builds``); default all.
        data: the folder holding the corpora (``small_parallel_enja/``, ``tinyshakespeare/``).
        runs: where the trainings write their run folders (``runs/NAME``).
        from_run: pack this already-trained run folder instead of training (one model only): for
            ja-en a folder written by `attnlab train translate --preset ja-en`, for the RNNs a
            bottleneck report folder.
        root: the assets folder (default: :data:`attnlab.assets.ROOT`, inside the package).
        builds: how each model is made (default :data:`BUILDS`; the tests pass tiny stand-ins).

    Raises:
        ValueError: an unknown name, ``from_run`` with other than one model, a run that does not
            match its build, or assets over :data:`attnlab.assets.BUDGET_BYTES` (after packing).
        FileNotFoundError: a data file or the ``from_run`` folder is missing (checked before any training).
        RuntimeError: a training failed.

    Shape:
        no tensors cross it: data folders in, asset folders and cards out.
    """
    builds = BUILDS if builds is None else builds
    root = assets.ROOT if root is None else Path(root)
    names = list(names or builds)
    unknown = [n for n in names if n not in builds]
    if unknown:
        raise ValueError(f"no shipped model is called {', '.join(unknown)}; choose from {', '.join(builds)}")
    chosen = [builds[n] for n in dict.fromkeys(names)]
    if from_run is not None:
        if len(chosen) != 1:
            raise ValueError("--from-run packs one model's run: name that model alone with --only NAME")
        if not Path(from_run).is_dir():
            raise FileNotFoundError(f"--from-run {from_run}: no such run folder")
    missing = [p for r in chosen for p in r.needs(data, training=from_run is None) if not p.is_file()]
    if missing:
        raise FileNotFoundError(
            f"{missing[0]} not found{f' (and {len(missing) - 1} more data files)' if len(missing) > 1 else ''}: "
            "give the folder holding the corpora with DATA=DIR (make) or --data DIR"
        )
    if from_run is None:
        trainings = {r.run_key: r for r in chosen}
        folders = _train(trainings, data, runs, log)
    else:
        folders = {chosen[0].run_key: Path(from_run)}
    cards = []
    for asset_build in chosen:
        folder = folders[asset_build.run_key]
        card = pack_asset(
            asset_build,
            folder,
            root / assets.ASSETS[asset_build.name].folder,
            data,
            command=shlex.join(asset_build.command(data, folder)),
            packed_from=from_run,
            log=log,
        )
        log(f"{asset_build.name}: " + ", ".join(f"{k} {metric_text(v, k)}" for k, v in card.metrics.items()))
        cards.append(card)
    total = assets.total_bytes(root)
    log(f"assets: {total / 1e6:.1f} MB of the {assets.BUDGET_BYTES / 1e6:.0f} MB budget")
    if total > assets.BUDGET_BYTES:
        sizes = ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in assets.folder_bytes(root).items())
        raise ValueError(
            f"the shipped models weigh {total / 1e6:.1f} MB together, over the {assets.BUDGET_BYTES / 1e6:.0f} MB "
            f"budget ({sizes}): make a model smaller or ship fewer"
        )
    return cards


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m attnlab.build_assets``: the command line of ``make models``; returns the exit
    status (2 with a one-line error).

    Shape:
        no tensors.
    """
    parser = argparse.ArgumentParser(
        prog="python -m attnlab.build_assets",
        description="Train, pack (fp16 or int8) and describe the models shipped in attnlab/assets (make models).",
    )
    parser.add_argument("--only", nargs="+", metavar="NAME", help=f"build these models only ({', '.join(BUILDS)})")
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="folder holding the corpora")
    parser.add_argument("--runs", type=Path, default=Path("runs/models"), help="where the trainings write their runs")
    parser.add_argument(
        "--from-run", type=Path, help="pack this already-trained run folder instead of training (with --only NAME)"
    )
    args = parser.parse_args(argv)
    try:
        build(args.only, data=args.data, runs=args.runs, from_run=args.from_run)
    except (OSError, ValueError, RuntimeError) as err:
        print(f"make models: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    return 0
