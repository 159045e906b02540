"""The graph recipe: Zachary's karate club → a graph attention network → who each member listens to.

The data are Zachary's (1977) karate club (:func:`attnlab.data.graphs.karate_club`): 34 members,
78 friendships, and the faction each member joined when the club split. The task is the classic
semi-supervised one: only the two leaders are labelled — node 0 (Mr. Hi himself) and node 33 (the
administrator) — and the GAT must place the 32 others; accuracy is over those 32.

Training is a plain full-batch loop rather than :func:`attnlab.train.train`: the whole graph is
one batch of 34 nodes, an epoch is one step, and there is no validation set to evaluate on or
pick a checkpoint by (with two labels, the 32 others are the test set), so the generic
trainer's batching, schedule and best-checkpoint logic would have nothing to do.

Shape letters: ``N`` nodes, ``F`` features, ``H`` heads, ``C`` classes, ``E`` edges.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import checkpoint as ckpt
from ..assets.locate import resolve_model_dir
from ..data.graphs import GraphData, karate_club
from ..models.config import check_fields
from ..models.gat import GAT, GATConfig
from ..models.gat import PRESETS as MODEL_PRESETS
from ..train import seed_everything
from . import STAND_IN_SIZE, Job
from . import apply_overrides as _apply_overrides

Tensor = torch.Tensor

__all__ = [
    "GATSetup",
    "apply_overrides",
    "GATRun",
    "train_gat",
    "save_gat",
    "load_gat",
    "node_attention",
]


@dataclass
class GATSetup:
    """Everything that defines a GAT run on a graph."""

    model_preset: str = "karate"  # key of attnlab.models.gat.PRESETS
    model_overrides: dict = field(default_factory=dict)  # config fields on top of the preset
    labelled: list[int] = field(default_factory=lambda: [0, 33])  # nodes whose label the model sees
    epochs: int = 200  # full-batch steps
    lr: float = 0.005  # Adam learning rate (§3.3)
    weight_decay: float = 5e-4  # L2 penalty (§3.3, Cora)
    seed: int = 0  # initialisation and dropout
    device: str = "cpu"  # where the graph and the model live

    def __post_init__(self) -> None:
        check_fields(self, positive=("lr",), non_negative=("epochs", "weight_decay"))


def apply_overrides(setup: GATSetup, overrides: Sequence[str]) -> GATSetup:
    """Apply ``key=value`` overrides: ``model.hidden=16``, ``lr=0.01``, ``labelled=[0,1,33]``, ``train.device=cuda``.

    The GAT trains in its own full-batch loop, so of the ``train.*`` keys it takes only those
    that are its own settings (``train.device`` is ``device``); see :func:`attnlab.recipes.apply_overrides`.
    """
    return _apply_overrides(setup, overrides, GATConfig)


@dataclass
class GATRun:
    model: GAT  # the trained model (eval mode)
    setup: GATSetup  # how it was trained
    accuracy: float  # accuracy on the unlabelled nodes
    predictions: Tensor  # (N,) predicted class of every node
    losses: list[float]  # training loss per epoch


def _check_labelled(labelled: Sequence[int], data: GraphData) -> None:
    N = len(data.labels)
    bad = [i for i in labelled if not 0 <= i < N]
    if bad:
        raise ValueError(f"labelled nodes {bad} are not node indices in [0, {N})")
    if len(set(labelled)) == N:
        raise ValueError("every node is labelled: nothing is left to evaluate on")
    if not labelled:
        raise ValueError("no labelled node: give at least one per class")


def build_config(setup: GATSetup, n_features: int, n_classes: int) -> GATConfig:
    """The GAT config of ``setup``: its preset, its overrides, and the graph's feature width and classes."""
    if setup.model_preset not in MODEL_PRESETS:
        raise ValueError(f"unknown GAT preset {setup.model_preset!r}; choose from {sorted(MODEL_PRESETS)}")
    fixed = sorted(set(setup.model_overrides) & {"n_features", "n_classes", "model_type"})
    if fixed:
        raise ValueError(f"model fields {fixed} come from the graph (features and classes)")
    return GATConfig(
        n_features=n_features, n_classes=n_classes, **{**MODEL_PRESETS[setup.model_preset], **setup.model_overrides}
    )


def train_gat(setup: GATSetup, data: GraphData | None = None) -> GATRun:
    """Full-batch semi-supervised training; accuracy on the nodes not in ``setup.labelled``.

    Shape:
        data.features ``(N, F)`` → predictions ``(N,)``
    """
    data = karate_club() if data is None else data
    _check_labelled(setup.labelled, data)
    seed_everything(setup.seed)
    config = build_config(setup, data.features.shape[1], len(data.class_names))
    device = torch.device(setup.device)
    model = GAT(config).to(device)
    features, mask, labels = data.features.to(device), data.mask.to(device), data.labels.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=setup.lr, weight_decay=setup.weight_decay)
    known = torch.full_like(labels, -100)  # (N,) -100 = unlabelled, ignored by the loss
    known[setup.labelled] = labels[setup.labelled]
    losses = []
    model.train()
    for _ in range(setup.epochs):
        optimizer.zero_grad(set_to_none=True)
        loss = model(features, mask, labels=known).loss
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval().cpu()
    with torch.no_grad():
        predictions = model(data.features, data.mask).logits.argmax(-1)  # (N,)
    held_out = torch.ones(len(data.labels), dtype=torch.bool)
    held_out[setup.labelled] = False
    accuracy = float((predictions[held_out] == data.labels[held_out]).float().mean())
    return GATRun(model, setup, accuracy, predictions, losses)


def save_gat(run: GATRun, directory: str | Path) -> Path:
    """Write the trained GAT as an attnlab checkpoint (config records the labelled nodes and accuracy)."""
    config = dataclasses.asdict(run.model.config)
    config.update(labelled=list(run.setup.labelled), accuracy=run.accuracy, seed=run.setup.seed)
    return ckpt.save_checkpoint(directory, model=run.model, config=config)


def load_gat(path: str | Path) -> tuple[GAT, dict]:
    """A GAT saved by :func:`save_gat` (a run folder holding ``best/`` or the checkpoint itself), and its config."""
    directory = resolve_model_dir(path)
    checkpoint = ckpt.load_checkpoint(directory)
    config_dict = dict(checkpoint.config)
    if config_dict.get("model_type") != "gat":
        raise ValueError(f"{directory}: model_type {config_dict.get('model_type')!r} is not a GAT ('gat')")
    names = {f.name for f in dataclasses.fields(GATConfig)}
    model = GAT(checkpoint.make_config(lambda d: GATConfig(**{k: v for k, v in d.items() if k in names})))
    ckpt.load_weights(model, checkpoint)
    return model.eval(), config_dict


@torch.no_grad()
def node_attention(model: GAT, data: GraphData, layer: int = 0) -> tuple[Tensor, Tensor]:
    """Head-averaged attention coefficients of one layer, and the predicted classes.

    Row ``i`` is node ``i``'s distribution over its neighbourhood (itself included).

    Shape:
        → weights ``(N, N)``, predictions ``(N,)``
    """
    model.eval()
    out = model(data.features, data.mask, need_weights=True)
    if not -len(out.attentions) <= layer < len(out.attentions):
        raise ValueError(f"layer must be in [0, {len(out.attentions)}), got {layer}")
    return out.attentions[layer].mean(0), out.logits.argmax(-1)  # (N, N), (N,)


GAT_JOB = Job(
    name="gat",
    presets={"karate": GATSetup()},
    setup_cls=GATSetup,
    model_config=GATConfig,
    train=train_gat,
    load=load_gat,
    check_model=lambda setup: build_config(setup, STAND_IN_SIZE, 2),
)
