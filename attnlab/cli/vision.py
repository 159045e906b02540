"""The command line of vision: `attnlab train vit` and `attnlab vit`.

Parsing and printing only; the work is :mod:`attnlab.recipes.vision`'s (and :mod:`attnlab.inference`'s).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from ..data.digits import held_out_image
from ..loading import load_model
from ..recipes import TrainJob
from ..recipes.vision import ViTSetup, evaluate_vit, patch_attention, train_vit
from ..viz import plot_image_attention
from .training import print_training


def train_command(
    *,
    out: Path = Path("runs/vit"),
    preset: str = "digits",
    patch_size: int | None = None,
    max_steps: int | None = None,
    epochs: int | None = None,
    minutes: float | None = None,
    seed: int | None = None,
    overrides: list[str] | None = None,
) -> TrainJob:
    """Train a small Vision Transformer on scikit-learn's 8×8 handwritten digits; report test accuracy.

    The 1,797 images are split (stratified, seeded) into train / validation / test; the best
    model by validation accuracy is scored once on the test split. Writes OUT/best, OUT/last,
    OUT/log.jsonl and OUT/test.json. See where it looks with `attnlab vit --model OUT`.

    Args:
        out: output folder.
        preset: a named preset (model size + training settings): digits, tiny.
        patch_size: side of a square patch in pixels, 2 (16 patches) or 4 (4 patches).
        max_steps: stop after this many optimizer steps.
        epochs: passes over the training images.
        minutes: stop training after this many minutes (evaluation time excluded).
        seed: random seed of the training (the data split is fixed).
        overrides: further settings as key=value: model.n_layers=3, train.lr=1e-3, shift=1.
    """

    def run(setup: ViTSetup) -> None:
        model, result, data = train_vit(setup)
        scores = evaluate_vit(model, data.test_x, data.test_y)
        (out / "test.json").write_text(json.dumps({**scores, "n": len(data.test_y)}, indent=2))
        print_training(result, out)
        print(f"test accuracy {100 * scores['accuracy']:.2f}% on {len(data.test_y)} held-out images")

    return TrainJob(
        preset,
        run,
        {"model.patch_size": patch_size},
        overrides,
        out=out,
        minutes=minutes,
        epochs=epochs,
        max_steps=max_steps,
        seed=seed,
    )


def vit_command(
    *,
    model: Path,
    index: int = 0,
    method: Literal["rollout", "last"] = "rollout",
    plot: Path | None = None,
    device: str = "cpu",
) -> int:
    """Classify one held-out digit with a trained ViT and show which patches [CLS] attends to.

    Prints the prediction and the patch weights as a grid; --plot draws them over the image.

    Args:
        model: a folder written by `attnlab train vit`.
        index: which test image (0 … 358).
        method: rollout (through all layers, Abnar & Zuidema 2020) or last (the last layer's [CLS] row).
        plot: write the attention drawn over the image here (PNG or SVG).
        device: cpu, cuda or mps.
    """
    vit, config = load_model(model, device=device, family="vision")
    image, label = held_out_image(config, index)
    weights, probs = patch_attention(vit, image, method)
    side = config["image_size"] // config["patch_size"]
    print(f"test image {index}: true {label}, predicted {int(probs.argmax())} ({float(probs.max()):.1%})")
    kept = 1 - float(weights.sum())
    print(f"[CLS] attention over the {side}×{side} patches ({method}; [CLS] itself keeps {kept:.2f}):")
    for r in range(side):
        print("  " + " ".join(f"{float(w):.2f}" for w in weights[r * side : (r + 1) * side]))
    if plot is not None:
        plot_image_attention(
            image,
            weights,
            config["patch_size"],
            plot,
            titles=[f"predicted {int(probs.argmax())}"],
            title=f"[CLS] attention ({method})",
        )
        print(f"attention written to {plot}", file=sys.stderr)
    return 0


#: The job's commands by name, as the CLI registers them.
COMMANDS: dict[str, Callable] = {"train vit": train_command, "vit": vit_command}
