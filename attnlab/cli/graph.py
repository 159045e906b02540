"""The command line of graph: `attnlab train gat` and `attnlab gat`.

Parsing and printing only; the work is :mod:`attnlab.recipes.graph`'s (and :mod:`attnlab.inference`'s).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path

from ..data.graphs import karate_club
from ..loading import load_model
from ..recipes import TrainJob
from ..recipes.graph import GATSetup, node_attention, save_gat, train_gat
from ..viz import plot_graph_attention


def train_command(
    *,
    out: Path = Path("runs/gat"),
    labelled: list[int] | None = None,
    epochs: int | None = None,
    seed: int = 0,
    seeds: int = 1,
    plot: bool = True,
    overrides: list[str] | None = None,
) -> TrainJob:
    """Train a graph attention network on Zachary's karate club: which faction did each member join?

    Semi-supervised node classification: only the labelled members' factions are given (default:
    node 0, the instructor, and node 33, the administrator); accuracy is over all the others.
    Saves the model (first seed) to OUT/best and draws the attention on the graph to
    OUT/attention.png. With --seeds N, trains N seeds and reports the mean accuracy.

    Args:
        out: output folder.
        labelled: the nodes whose faction the model sees in training (default: 0 33).
        epochs: full-batch training steps (default: 200).
        seed: random seed of the first run.
        seeds: how many seeds to train (seed, seed+1, ...) for a mean accuracy.
        plot: draw the first layer's attention on the graph to OUT/attention.png.
        overrides: further settings as key=value: model.hidden=16, model.n_heads=8, lr=0.01.
    """
    if seeds < 1:
        raise ValueError(f"--seeds must be ≥ 1, got {seeds}")

    def run(base: GATSetup) -> None:
        data = karate_club()
        runs = [train_gat(dataclasses.replace(base, seed=base.seed + k), data) for k in range(seeds)]
        save_gat(runs[0], out / "best")
        n_eval = len(data.labels) - len(set(base.labelled))
        accs = [r.accuracy for r in runs]
        for r in runs:
            print(f"seed {r.setup.seed}: accuracy {100 * r.accuracy:.1f}% on the {n_eval} unlabelled members")
        if seeds > 1:
            mean = sum(accs) / seeds
            sd = (sum((a - mean) ** 2 for a in accs) / (seeds - 1)) ** 0.5
            print(f"mean accuracy over {seeds} seeds: {100 * mean:.1f}% ± {100 * sd:.1f}% (sd)")
        (out / "results.json").write_text(json.dumps({"labelled": base.labelled, "accuracy": accs}, indent=2))
        if plot:
            weights, predictions = node_attention(runs[0].model, data)
            plot_graph_attention(
                data,
                weights,
                predictions,
                out / "attention.png",
                labelled=base.labelled,
                title=f"GAT attention, layer 1 (accuracy {100 * runs[0].accuracy:.0f}%)",
            )
            print(f"attention drawn to {out / 'attention.png'}")
        print(f"model saved in {out / 'best'}")

    return TrainJob("karate", run, {"labelled": labelled}, overrides, epochs=epochs, seed=seed)


def gat_command(*, model: Path, node: int | None = None, layer: int = 0, plot: Path | None = None) -> int:
    """Show a trained GAT's predictions on the karate club and whom each member attends to.

    Args:
        model: a folder written by `attnlab train gat`.
        node: list this member's attention over its friends (and draw only it with --plot).
        layer: which GAT layer's attention: 0 (hidden) or 1 (output).
        plot: draw the attention on the graph here (PNG or SVG).
    """
    gat, config = load_model(model, family="graph")
    data = karate_club()
    weights, predictions = node_attention(gat, data, layer)
    names = data.class_names
    wrong = [i for i in range(len(predictions)) if int(predictions[i]) != int(data.labels[i])]
    print(f"labelled in training: {config['labelled']}; wrong: {wrong or 'none'}")
    if node is not None:
        if not 0 <= node < len(predictions):
            raise ValueError(f"--node must be in [0, {len(predictions)}), got {node}")
        print(f"member {node}: predicted {names[int(predictions[node])]}, joined {names[int(data.labels[node])]}")
        row = weights[node]
        for j in sorted(data.mask[node].nonzero().flatten().tolist(), key=lambda j: -float(row[j])):
            who = "itself" if j == node else f"member {j} ({names[int(data.labels[j])]})"
            print(f"  {float(row[j]):.3f}  {who}")
    if plot is not None:
        plot_graph_attention(
            data,
            weights,
            predictions,
            plot,
            labelled=config["labelled"],
            node=node,
            title=f"GAT attention, layer {layer + 1}",
        )
        print(f"attention drawn to {plot}", file=sys.stderr)
    return 0


#: The job's commands by name, as the CLI registers them.
COMMANDS: dict[str, Callable] = {"train gat": train_command, "gat": gat_command}
