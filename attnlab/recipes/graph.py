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
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import checkpoint as ckpt
from ..data.graphs import GraphData, karate_club
from ..models.gat import GAT, PRESETS, GATConfig
from ..train import seed_everything

Tensor = torch.Tensor

__all__ = [
    "GATSetup",
    "apply_overrides",
    "GATRun",
    "train_gat",
    "save_gat",
    "load_gat",
    "node_attention",
    "plot_graph_attention",
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


def apply_overrides(setup: GATSetup, overrides: Sequence[str]) -> GATSetup:
    """Apply ``key=value`` overrides: ``model.hidden=16``, ``lr=0.01``, ``labelled=[0,1,33]``, ``train.device=cuda``.

    ``train.device`` is accepted because every ``attnlab train`` command receives the shared
    training options that way; the other ``train.*`` settings (precision, compile, ...) belong to
    the generic trainer, which this full-batch loop does not use.
    """
    setup = dataclasses.replace(setup, model_overrides=dict(setup.model_overrides), labelled=list(setup.labelled))
    settings = [f.name for f in dataclasses.fields(GATSetup) if f.name != "model_overrides"]
    model_fields = {f.name for f in dataclasses.fields(GATConfig)} - {"n_features", "n_classes", "model_type"}
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} is not key=value (e.g. model.hidden=16, lr=0.01)")
        key, raw = item.split("=", 1)
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if key.startswith("model."):
            if key[len("model."):] not in model_fields:
                raise ValueError(f"unknown model field {key[len('model.'):]!r}; fields: {sorted(model_fields)}")
            setup.model_overrides[key[len("model."):]] = value
        elif key == "train.device":
            setup.device = value
        elif key.startswith("train."):
            raise ValueError(f"{key} does not apply: the GAT trains in its own full-batch loop "
                             "(of the train.* options it takes only train.device)")
        elif key in settings:
            setattr(setup, key, value)
        else:
            raise ValueError(f"unknown setting {key!r}; use model.<field>, train.device or one of {settings}")
    return setup


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


def train_gat(setup: GATSetup, data: GraphData | None = None) -> GATRun:
    """Full-batch semi-supervised training; accuracy on the nodes not in ``setup.labelled``.

    Shape:
        data.features ``(N, F)`` → predictions ``(N,)``
    """
    data = karate_club() if data is None else data
    _check_labelled(setup.labelled, data)
    if setup.model_preset not in PRESETS:
        raise ValueError(f"unknown GAT preset {setup.model_preset!r}; choose from {sorted(PRESETS)}")
    seed_everything(setup.seed)
    config = GATConfig(n_features=data.features.shape[1], n_classes=len(data.class_names),
                       **{**PRESETS[setup.model_preset], **setup.model_overrides})
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
    directory = ckpt.resolve_model_dir(path)
    checkpoint = ckpt.load_checkpoint(directory)
    config_dict = dict(checkpoint.config)
    if config_dict.get("model_type") != "gat":
        raise ValueError(f"{directory}: model_type {config_dict.get('model_type')!r} is not a GAT ('gat')")
    names = {f.name for f in dataclasses.fields(GATConfig)}
    model = GAT(GATConfig(**{k: v for k, v in config_dict.items() if k in names}))
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


def _layout(edges: Tensor, n: int, seed: int) -> np.ndarray:
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges.T.tolist())  # (2, E) -> E pairs
    pos = nx.spring_layout(g, seed=seed)
    return np.array([pos[i] for i in range(n)])  # (N, 2)


def plot_graph_attention(
    data: GraphData,
    weights: Any,
    predictions: Any,
    path: str | Path,
    *,
    labelled: Sequence[int] = (),
    node: int | None = None,
    title: str | None = None,
    seed: int = 0,
) -> Path:
    """Draw the graph with each edge's width and colour set by its attention coefficient.

    Without ``node``, an edge ``{i, j}`` shows the mean of ``α_ij`` and ``α_ji`` (how much the two
    members listen to each other). With ``node = k``, only ``α_kj`` is drawn: whom ``k`` listens
    to (its self-attention ``α_kk`` is written next to it). Nodes are coloured by predicted
    faction; a wrong prediction has a red ring, a labelled node a thick black ring.

    Args:
        data: the graph.
        weights: attention coefficients, rows are distributions over the neighbourhood.
        predictions: predicted class of every node.
        path: output ``.png`` or ``.svg`` file.
        labelled: the nodes whose label was given in training.
        node: draw only this node's attention.
        title: figure title.
        seed: seed of the spring layout.

    Shape:
        weights ``(N, N)``; predictions ``(N,)``
    """
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    from ..viz import check_weights, figure_path, new_figure, save_figure, to_array

    path = figure_path(path)
    N = len(data.labels)
    w = check_weights(weights, "weights", 2, "(N, N)")
    if w.shape != (N, N):
        raise ValueError(f"weights must be (N, N) = {(N, N)} for this graph, got {w.shape}")
    pred = to_array(predictions, "predictions").astype(int)
    if pred.shape != (N,):
        raise ValueError(f"predictions must have shape ({N},), got {pred.shape}")
    if node is not None and not 0 <= node < N:
        raise ValueError(f"node must be in [0, {N}), got {node}")
    xy = _layout(data.edges, N, seed)
    edges = data.edges.T.tolist()  # (2, E) -> E pairs
    if node is None:
        strength = [(w[i, j] + w[j, i]) / 2 for i, j in edges]
    else:
        strength = [w[node, j if i == node else i] if node in (i, j) else 0.0 for i, j in edges]
    vmax = max(max(strength), 1e-6)
    cmap, norm = colormaps["viridis"], Normalize(0.0, vmax)
    fig = new_figure(7.5, 6.0)
    ax = fig.add_subplot()
    for (i, j), s in sorted(zip(edges, strength), key=lambda e: e[1]):
        faded = node is not None and node not in (i, j)
        ax.plot(*xy[[i, j]].T, color="0.85" if faded else cmap(norm(s)), linewidth=0.6 if faded else 0.8 + 7.0 * s / vmax,
                zorder=1, solid_capstyle="round")
    faction_colours = ["#f4a261", "#2a9d8f"]
    for i in range(N):
        ring = "black" if i in labelled else ("#d62828" if pred[i] != int(data.labels[i]) else "white")
        ax.scatter(*xy[i], s=330, color=faction_colours[pred[i] % 2], edgecolors=ring,
                   linewidths=3.0 if ring != "white" else 1.0, zorder=2)
        ax.annotate(str(i), xy[i], ha="center", va="center", fontsize=8, zorder=3)
    if node is not None:
        ax.annotate(f"α_self = {w[node, node]:.2f}", xy[node], xytext=(12, 12), textcoords="offset points", fontsize=9)
    for k, name in enumerate(data.class_names):
        ax.scatter([], [], s=120, color=faction_colours[k], label=f"predicted {name}")
    ax.scatter([], [], s=120, color="white", edgecolors="black", linewidths=3.0, label="labelled in training")
    ax.scatter([], [], s=120, color="white", edgecolors="#d62828", linewidths=3.0, label="wrong prediction")
    ax.legend(loc="lower left", fontsize=8, frameon=False)
    ax.set_axis_off()
    fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, shrink=0.7,
                 label="attention α_ij" if node is not None else "attention (α_ij + α_ji) / 2")
    if title:
        ax.set_title(title)
    return save_figure(fig, path)
