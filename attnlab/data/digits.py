"""The handwritten digits: scikit-learn's 1,797 8×8 grey images, a fixed split, batches and shifts.

The data are the images that ship inside scikit-learn (``sklearn.datasets.load_digits``, the UCI
optical-recognition test set; nothing is downloaded). Pixels are 0–16 and are scaled to [0, 1].
:func:`digits_splits` makes a fixed stratified train/validation/test split; the ViT and the
captioner recipes both read it, so their test images are the same.

Shape letters: ``N`` images, ``B`` batch, ``H``/``W`` image height and width.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch

Tensor = torch.Tensor

__all__ = ["DigitsSplits", "digits_splits", "image_batches", "random_shift"]


@dataclass
class DigitsSplits:
    """Images in [0, 1] and their digit labels, split three ways.

    Shape:
        ``*_x``: ``(N, 8, 8)`` float32; ``*_y``: ``(N,)`` int64
    """

    train_x: Tensor  # (N_train, 8, 8)
    train_y: Tensor  # (N_train,)
    valid_x: Tensor  # (N_valid, 8, 8)
    valid_y: Tensor  # (N_valid,)
    test_x: Tensor  # (N_test, 8, 8)
    test_y: Tensor  # (N_test,)


def _load_digits() -> tuple[np.ndarray, np.ndarray]:
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ImportError("the digits data ship with scikit-learn: pip install 'attnlab[apps]'") from None
    digits = load_digits()
    return digits.images.astype(np.float32) / 16.0, digits.target.astype(np.int64)


def digits_splits(valid_fraction: float = 0.1, test_fraction: float = 0.2, seed: int = 0) -> DigitsSplits:
    """Stratified, seeded split of the 1,797 digits: each class is shuffled and cut in the same proportions.

    Shape:
        see :class:`DigitsSplits`; with the defaults about 1,257 / 180 / 360 images
    """
    if not (0 < valid_fraction < 1 and 0 < test_fraction < 1 and valid_fraction + test_fraction < 1):
        raise ValueError(
            f"fractions must be in (0, 1) and leave training data: valid={valid_fraction}, test={test_fraction}"
        )
    images, labels = _load_digits()
    rng = random.Random(f"attnlab/digits/{seed}")
    parts: dict[str, list[int]] = {"train": [], "valid": [], "test": []}
    for digit in range(10):
        idx = [i for i in range(len(labels)) if labels[i] == digit]
        rng.shuffle(idx)
        n_test, n_valid = round(test_fraction * len(idx)), round(valid_fraction * len(idx))
        parts["test"] += idx[:n_test]
        parts["valid"] += idx[n_test : n_test + n_valid]
        parts["train"] += idx[n_test + n_valid :]
    x, y = torch.from_numpy(images), torch.from_numpy(labels)
    out = {}
    for name, idx in parts.items():
        index = torch.tensor(sorted(idx))
        out[f"{name}_x"], out[f"{name}_y"] = x[index], y[index]
    return DigitsSplits(**out)


def image_batches(
    n: int, batch_size: int, *, seed: int, epoch: int, rank: int = 0, world_size: int = 1
) -> list[Tensor]:
    """Shuffled index batches for one epoch (fixed by ``seed`` and ``epoch``), sharded by rank.

    Every rank gets the same number of batches (distributed training steps in lockstep), so with
    several ranks up to ``world_size - 1`` batches of the epoch are left out — different ones
    each epoch, as the order is reshuffled.

    Shape:
        → ``floor(ceil(n / batch_size) / world_size)`` index tensors of at most ``batch_size``
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
    g = torch.Generator().manual_seed(seed * 100_003 + epoch)
    order = torch.randperm(n, generator=g)  # (n,)
    batches = list(order.split(batch_size))
    if len(batches) < world_size:
        raise ValueError(f"{n} images make {len(batches)} batches, too few for {world_size} ranks")
    usable = len(batches) - len(batches) % world_size
    return batches[:usable][rank::world_size]


def random_shift(images: Tensor, max_shift: int, generator: torch.Generator) -> Tensor:
    """Translate each image by a random offset in ``[-max_shift, max_shift]²``, filling with zeros.

    Digits vary in where they sit in the frame; small shifts are the augmentation that keeps
    their label (flips and large rotations would not: 6 ↔ 9).

    Shape:
        images ``(B, H, W)`` → ``(B, H, W)``
    """
    if max_shift == 0:
        return images
    B, Hi, Wi = images.shape
    padded = torch.nn.functional.pad(images, (max_shift,) * 4)  # (B, H + 2s, W + 2s)
    windows = padded.unfold(1, Hi, 1).unfold(2, Wi, 1)  # (B, 2s+1, 2s+1, H, W) every shifted view
    dy, dx = torch.randint(0, 2 * max_shift + 1, (2, B), generator=generator)  # (B,) each
    return windows[torch.arange(B), dy, dx]  # (B, H, W)


def held_out_image(config: dict, index: int) -> tuple[Tensor, int]:
    """Held-out test image ``index`` of the digits split a model was trained on, and its label.

    Shape:
        → image ``(8, 8)``, label
    """
    data = digits_splits(seed=config.get("split_seed", 0))
    if not 0 <= index < len(data.test_y):
        raise ValueError(f"--index must be in [0, {len(data.test_y)}) (the held-out test images), got {index}")
    return data.test_x[index], int(data.test_y[index])
