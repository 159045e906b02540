"""Model cards: the facts of each shipped model, as ``MODEL_CARD.md`` for people and ``card.json``
for the tests, written beside its weights in ``attnlab/assets/NAME/`` by ``make models``
(:mod:`attnlab.build_assets`).

A card says what the model is, how to use it, the data and its licence, the exact command and
seed that trained it, its size, its quality measured on held-out data, the fast check the tests
repeat on every installed copy, and example outputs. :func:`read_model_card` gives it back (the
lesson shows a card's numbers; the tests repeat its check).

Shape:
    no tensors: a dataclass in, two text files out.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..files import write_text_atomically

__all__ = [
    "CARD_FILE",
    "CARD_JSON",
    "ModelCard",
    "metric_text",
    "render_model_card",
    "write_model_card",
    "read_model_card",
]

CARD_FILE = "MODEL_CARD.md"
CARD_JSON = "card.json"

# --------------------------------------------------------------------------------------------
# The model card.
# --------------------------------------------------------------------------------------------


@dataclass
class ModelCard:
    """The facts of one shipped model: written as ``MODEL_CARD.md`` and ``card.json``."""

    name: str  # the shipped name (--model NAME)
    description_en: str  # one line, as in attnlab.assets
    description_ja: str  # the same in Japanese
    usage: str  # a command that uses it
    command: str  # the exact command that trained it
    seed: int  # the training's random seed
    data: str  # what it was trained and evaluated on
    licence: str  # the data's licence or terms of use
    date: str  # when the asset was packed (ISO date)
    parameters: int  # stored parameters (a tied matrix counted once)
    weights_bytes: int  # size of model.safetensors
    metrics: dict[str, float]  # quality measured on held-out data, by metric name
    evaluation: str  # how the metrics were measured: which data, how many, decoding, tokenizer
    check: dict[str, Any]  # the fast check the tests repeat: metric, value, higher_is_better, tolerance, n, how
    example_outputs: dict[str, str]  # the packed model's greedy output for each example input
    reproduce: str | None = None  # a command that measures the metrics again (None: none exists)
    packed_from: str | None = None  # the run folder packed with --from-run (None: trained by this build)
    attnlab_version: str = "unknown"  # the attnlab that packed it
    # How the training went, from its log: steps, minutes, target tokens/s, why it stopped, the CPU
    # (None: no log found). Minutes depend on the machine and its load; steps do not.
    training: dict[str, Any] | None = None
    storage: str = "float16"  # how model.safetensors stores the weights ("float16", or "int8" with per-row scales)


_STORAGE_WORDS = {"float16": "float16", "int8": "int8 with one float32 scale per row"}


def metric_text(value: float, name: str) -> str:
    """A metric's value as a card shows it: shares as percentages, counts with thousands separators,
    other scores to four significant figures (two decimals from 10 up)."""
    if name in ("exact_match", "loops_cut", "sentence_form") or name.startswith(("accuracy", "peak_on_marker")):
        return f"{100 * value:.1f}%"
    if name in ("n", "paragraphs") or name.startswith(("n/", "n_")):
        return f"{int(value):,}"
    return f"{value:.2f}" if abs(value) >= 10 else f"{value:.4g}"


def render_model_card(card: ModelCard) -> str:
    """``MODEL_CARD.md`` of ``card`` (Markdown)."""
    mb = card.weights_bytes / 1e6
    check = card.check
    direction = "at least" if check["higher_is_better"] else "at most"
    bound = check["value"] - check["tolerance"] if check["higher_is_better"] else check["value"] + check["tolerance"]
    lines = [
        f"# {card.name}",
        "",
        card.description_en,
        "",
        card.description_ja,
        "",
        "## Use",
        "",
        "```bash",
        card.usage,
        f"attnlab explore    # the model page offers {card.name} with example inputs",
        "```",
        "",
        "## Data and licence",
        "",
        f"- Data: {card.data}",
        f"- Licence: {card.licence}",
        "",
        "## Training",
        "",
        f"- Command: `{card.command}`",
        f"- Seed: {card.seed}",
    ]
    if card.packed_from:
        lines.append(
            f"- Packed from the run folder `{card.packed_from}` (trained by the command above; config checked)"
        )
    if card.training:
        t = card.training
        load = ""
        if t.get("load_before") is not None:
            load = (
                f"; 1-minute load average {t['load_before']:.1f} when it started and {t['load_after']:.1f} when it "
                f"ended, on {t['cores']} cores (other jobs share them when it exceeds about 1)"
            )
        lines.append(
            f"- Trained: {t['steps']:,} steps in {t['minutes']:.1f} min of training (evaluation excluded; "
            f"{t['tokens_per_s']:,.0f} {t.get('tokens_counted', 'target tokens')}/s), stopped by "
            f"{t['stop_reason'] or 'the end of its run'}, on {t['cpu']}{load}"
        )
    lines += [
        f"- Packed: {card.date}, attnlab {card.attnlab_version}",
        "",
        "## Size",
        "",
        f"- {card.parameters:,} parameters; weights {mb:.2f} MB ({_STORAGE_WORDS.get(card.storage, card.storage)}, "
        "loaded as float32)",
        "",
        "## Quality on held-out data",
        "",
        "| metric | value |",
        "|---|---:|",
    ]
    lines += [f"| {name} | {metric_text(value, name)} |" for name, value in card.metrics.items()]
    lines += ["", f"Measured on the packed weights: {card.evaluation}."]
    if card.reproduce:
        lines += ["", f"Reproduce: `{card.reproduce}`"]
    lines += [
        "",
        f"Fast check (repeated by the tests on every installed copy): {check['metric']} "
        f"{metric_text(check['value'], check['metric'])} {check['how']}; a copy passes with "
        f"{direction} {metric_text(bound, check['metric'])}.",
        "",
        "## Example outputs",
        "",
        "| input | output (greedy) |",
        "|---|---|",
    ]
    lines += [f"| {_cell(src)} | {_cell(out)} |" for src, out in card.example_outputs.items()]
    lines += ["", f"The same facts, machine-readable: `{CARD_JSON}`.", ""]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "↵")


def write_model_card(directory: str | os.PathLike, card: ModelCard) -> Path:
    """Write ``MODEL_CARD.md`` and ``card.json`` of ``card`` into the asset folder ``directory``.

    Returns:
        the path of ``MODEL_CARD.md``.
    """
    directory = Path(directory)
    payload = json.dumps(dataclasses.asdict(card), ensure_ascii=False, indent=2, allow_nan=False) + "\n"
    write_text_atomically(directory / CARD_JSON, payload)
    write_text_atomically(directory / CARD_FILE, render_model_card(card))
    return directory / CARD_FILE


def read_model_card(directory: str | os.PathLike) -> ModelCard:
    """The :class:`ModelCard` of the asset folder ``directory`` (from its ``card.json``).

    Raises:
        FileNotFoundError: no ``card.json``.
        ValueError: not valid JSON, or not a card (a field missing or unknown).
    """
    path = Path(directory) / CARD_JSON
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    try:
        return ModelCard(**payload)
    except TypeError as err:
        raise ValueError(f"{path}: not a model card ({err})") from None
