"""The vision recipe: scikit-learn's handwritten digits → a small Vision Transformer → where [CLS] looks.

The data are scikit-learn's 1,797 8×8 grey images of handwritten digits, split by
:func:`attnlab.data.digits.digits_splits` (fixed, stratified); the test images are used once, for
the reported accuracy.

The image-overlay heatmaps here (:func:`plot_image_attention`) also serve the captioner.

Shape letters: ``B`` batch, ``P`` patches, ``L`` layers, ``H`` heads, ``K`` panels.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from .. import checkpoint as ckpt
from ..assets.locate import resolve_model_dir
from ..data.digits import DigitsSplits, digits_splits, image_batches, random_shift
from ..models.config import check_fields
from ..models.vit import PRESETS as MODEL_PRESETS
from ..models.vit import ViT, ViTConfig, attention_rollout, cls_attention
from ..runs import check_run_folder
from ..train import TrainConfig, TrainResult, train
from . import Job, digit_image_presets

Tensor = torch.Tensor

__all__ = [
    "ViTSetup",
    "PRESETS",
    "ImageClassificationTask",
    "train_vit",
    "load_vit",
    "evaluate_vit",
    "patch_attention",
]


@dataclass
class ViTSetup:
    """Everything that defines a ViT run on the digits."""

    model_preset: str = "digits"  # key of attnlab.models.vit.PRESETS
    model_overrides: dict = field(default_factory=dict)  # config fields on top of the preset (e.g. patch_size)
    batch_size: int = 64  # images per batch
    shift: int = 1  # training augmentation: random translation by up to this many pixels (0: none)
    seed: int = 0  # seed of the data split (the training seed is train.seed)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        check_fields(self, positive=("batch_size",), non_negative=("shift",))


#: Named presets (``--preset``): those of every job on the digit images (:func:`attnlab.recipes.digit_image_presets`).
PRESETS: dict[str, ViTSetup] = digit_image_presets(ViTSetup)


class ImageClassificationTask:
    """Supplies :func:`attnlab.train.train` with digit batches, the loss and validation accuracy."""

    metric = "accuracy"
    maximize = True

    def __init__(self, setup: ViTSetup, config: ViTConfig, data: DigitsSplits) -> None:
        self.setup, self.config, self.data = setup, config, data
        self.device = torch.device(setup.train.device)

    def batches(self, epoch: int, rank: int, world_size: int) -> list[tuple[Tensor, Tensor]]:
        s = self.setup
        g = torch.Generator().manual_seed(s.train.seed * 7919 + epoch)
        out = []
        for idx in image_batches(
            len(self.data.train_y), s.batch_size, seed=s.train.seed, epoch=epoch, rank=rank, world_size=world_size
        ):
            x = random_shift(self.data.train_x[idx], s.shift, g)
            out.append((x.to(self.device), self.data.train_y[idx].to(self.device)))
        return out

    def loss(self, model: nn.Module, batch: tuple[Tensor, Tensor]) -> tuple[Tensor, int]:
        x, y = batch
        return model(x, labels=y).loss, len(y)

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        return evaluate_vit(model, self.data.valid_x, self.data.valid_y)

    def checkpoint_payload(self) -> tuple[dict, dict]:
        config = dataclasses.asdict(self.config)
        config["split_seed"] = self.setup.seed
        return config, {}


@torch.no_grad()
def evaluate_vit(model: nn.Module, images: Tensor, labels: Tensor, batch_size: int = 256) -> dict[str, float]:
    """Accuracy and mean cross-entropy of an image classifier.

    Shape:
        images ``(N, 8, 8)``; labels ``(N,)``
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    correct, total_loss = 0, 0.0
    for start in range(0, len(labels), batch_size):
        x, y = images[start : start + batch_size].to(device), labels[start : start + batch_size].to(device)
        out = model(x, labels=y)
        total_loss += out.loss.item() * len(y)
        correct += int((out.logits.argmax(-1) == y).sum())
    model.train(was_training)
    return {"accuracy": correct / len(labels), "loss": total_loss / len(labels)}


def build_config(setup: ViTSetup) -> ViTConfig:
    """The ViT config of ``setup``: its preset and its overrides."""
    if setup.model_preset not in MODEL_PRESETS:
        raise ValueError(f"unknown ViT preset {setup.model_preset!r}; choose from {sorted(MODEL_PRESETS)}")
    fixed = sorted(set(setup.model_overrides) & {"n_classes", "image_size", "channels"})
    if fixed:
        raise ValueError(f"model fields {fixed} are fixed by the digits (10 classes of 8×8 grey images)")
    return ViTConfig(**{**MODEL_PRESETS[setup.model_preset], **setup.model_overrides})


def train_vit(setup: ViTSetup, data: DigitsSplits | None = None) -> tuple[ViT, TrainResult, DigitsSplits]:
    """Train a ViT on the digits; returns the best model by validation accuracy, the run and the data.

    Shape:
        images ``(N, 8, 8)`` → a classifier over the 10 digits
    """
    check_run_folder(setup.train.out_dir, False, setup.train.overwrite)  # before any work
    config = build_config(setup)
    data = digits_splits(seed=setup.seed) if data is None else data
    torch.manual_seed(setup.train.seed)
    model = ViT(config)
    result = train(model, ImageClassificationTask(setup, config, data), setup.train)
    out = Path(setup.train.out_dir) if setup.train.out_dir else None
    if out is not None and (out / "best").is_dir():
        ckpt.load_weights(model, ckpt.load_checkpoint(out / "best"))
    model.eval()
    return model, result, data


def load_vit(path: str | Path, device: str = "cpu") -> tuple[ViT, dict]:
    """A ViT saved by :func:`train_vit` (run folder or checkpoint), and its saved config dict."""
    directory = resolve_model_dir(path)
    checkpoint = ckpt.load_checkpoint(directory)
    config_dict = dict(checkpoint.config)
    if config_dict.get("model_type") != "vit":
        raise ValueError(f"{directory}: model_type {config_dict.get('model_type')!r} is not a ViT ('vit')")
    names = {f.name for f in dataclasses.fields(ViTConfig)}
    model = ViT(checkpoint.make_config(lambda d: ViTConfig(**{k: v for k, v in d.items() if k in names})))
    ckpt.load_weights(model, checkpoint)
    return model.to(device).eval(), config_dict


@torch.no_grad()
def patch_attention(model: ViT, image: Tensor, method: str = "rollout") -> tuple[Tensor, Tensor]:
    """[CLS]'s attention over the patches of one image, and the class probabilities.

    ``method="last"``: the last layer's [CLS] row, averaged over heads; ``"rollout"``:
    :func:`attention_rollout` through every layer. Either is a distribution over [CLS] and the
    patches; the returned patch weights are column 1 onward (they sum to 1 minus [CLS]'s share).

    Shape:
        image ``(8, 8)`` → weights ``(P,)``, probabilities ``(10,)``
    """
    model.eval()
    device = next(model.parameters()).device
    out = model(image.unsqueeze(0).to(device), need_weights=True)  # a batch of one (1, 8, 8)
    if method == "last":
        row = cls_attention(out.attentions)[0, -1].mean(0)  # (1+P,)
    elif method == "rollout":
        row = attention_rollout(out.attentions)[0, 0]  # (1+P,)
    else:
        raise ValueError(f"method must be 'last' or 'rollout', got {method!r}")
    return row[1:].cpu(), torch.softmax(out.logits[0].float(), -1).cpu()  # (P,), (10,)


VIT_JOB = Job(
    name="vit",
    presets=PRESETS,
    setup_cls=ViTSetup,
    model_config=ViTConfig,
    train=train_vit,
    load=load_vit,
    check_model=build_config,
)
