"""The command line of caption: `attnlab train caption` and `attnlab caption`.

Parsing and printing only; the work is :mod:`attnlab.recipes.caption`'s (and :mod:`attnlab.inference`'s).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import torch

from ..data.digits import held_out_image
from ..decode import check_beam
from ..inference.caption import DIGIT_NAMES
from ..loading import load_model
from ..recipes import TrainJob
from ..recipes.caption import CaptionSetup, train_captioner
from ..viz import plot_image_attention
from .training import print_training


def train_command(
    *,
    out: Path = Path("runs/caption"),
    lang: Literal["en", "ja"] = "en",
    preset: str = "digits",
    patch_size: int | None = None,
    max_steps: int | None = None,
    epochs: int | None = None,
    minutes: float | None = None,
    seed: int | None = None,
    overrides: list[str] | None = None,
) -> TrainJob:
    """Train a captioner that writes a digit's name from its image by cross-attending to the patches.

    Captions are spelled character by character: English (seven) or Japanese hiragana (なな).
    The best model by validation exact match is scored once on the held-out test images.
    Writes OUT/best, OUT/last, OUT/log.jsonl and OUT/test.json. Try `attnlab caption --model OUT`.

    Args:
        out: output folder.
        lang: caption language: en or ja.
        preset: a named preset (model size + training settings): digits, tiny.
        patch_size: side of a square patch in pixels, 2 (16 patches) or 4 (4 patches).
        max_steps: stop after this many optimizer steps.
        epochs: passes over the training images.
        minutes: stop training after this many minutes (evaluation time excluded).
        seed: random seed of the training (the data split is fixed).
        overrides: further settings as key=value: model.n_decoder_layers=1, train.lr=1e-3, shift=1.
    """

    def run(setup: CaptionSetup) -> None:
        captioner, result, data = train_captioner(setup)
        scores = {
            "greedy": captioner.evaluate(data.test_x, data.test_y),
            "beam4": captioner.evaluate(data.test_x, data.test_y, beam_size=4),
        }
        (out / "test.json").write_text(json.dumps(scores, indent=2))
        print_training(result, out)
        print(
            f"test exact match {100 * scores['greedy']['exact_match']:.2f}% greedy, "
            f"{100 * scores['beam4']['exact_match']:.2f}% beam 4, on {len(data.test_y)} held-out images"
        )

    return TrainJob(
        preset,
        run,
        {"lang": lang, "model.patch_size": patch_size},
        overrides,
        out=out,
        minutes=minutes,
        epochs=epochs,
        max_steps=max_steps,
        seed=seed,
    )


def caption_command(
    *,
    model: Path,
    index: list[int] | None = None,
    beam: int = 1,
    plot: Path | None = None,
    device: str = "cpu",
) -> int:
    """Caption held-out digit images and draw where each generated token looked.

    Args:
        model: a folder written by `attnlab train caption`.
        index: which test images (default: 0).
        beam: beam size (1 = greedy).
        plot: write the first image's cross-attention here, one panel per generated token
            (last decoder layer, mean over heads; PNG or SVG).
        device: cpu, cuda or mps.
    """
    check_beam(beam)  # before the model is loaded
    captioner, config = load_model(model, device=device, family="caption")
    picked = [held_out_image(config, i) for i in (index or [0])]
    images = torch.stack([image for image, _ in picked])  # (B, 8, 8)
    results = captioner.caption(images, beam_size=beam, return_attention=plot is not None)
    names = DIGIT_NAMES[captioner.lang]
    for i, (r, (_, label)) in zip(index or [0], zip(results, picked)):
        print(f"test image {i}: {r.text}   (true: {names[label]})")
    if plot is not None:
        first = results[0]
        weights = first.cross_attention[-1].mean(0)  # (T, P)
        plot_image_attention(
            images[0],
            weights,
            config["patch_size"],
            plot,
            titles=first.tokens,
            title=f"“{first.text}”: cross-attention per generated token",
        )
        print(f"attention written to {plot}", file=sys.stderr)
    return 0


#: The job's commands by name, as the CLI registers them.
COMMANDS: dict[str, Callable] = {"train caption": train_command, "caption": caption_command}
