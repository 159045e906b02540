"""Graph attention: the layer against the paper's formula, neighbourhood masking, karate club, CLI, plot."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import cli
from attnlab.data.graphs import karate_club
from attnlab.functional import neighbour_mask
from attnlab.models.gat import GAT, GATLayer, gat_config
from attnlab.recipes import graph

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def reference_layer(layer: GATLayer, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Veličković et al. eqs. 1–6 node by node: e_ij = LeakyReLU(aᵀ[Wh_i ‖ Wh_j]), softmax over N(i)."""
    H, Fo, N = layer.n_heads, layer.out_features, x.shape[0]
    alpha = torch.zeros(H, N, N)
    heads = []
    for h in range(H):
        W = layer.node_proj.weight[h * Fo : (h + 1) * Fo]  # (F', F)
        a = torch.cat([layer.score_self[h], layer.score_neighbour[h]])  # (2F',)
        z = x @ W.T  # (N, F')
        out = torch.zeros(N, Fo)
        for i in range(N):
            nbrs = [j for j in range(N) if mask[i, j]]
            e = torch.stack([F.leaky_relu(a @ torch.cat([z[i], z[j]]), layer.negative_slope) for j in nbrs])
            w = torch.softmax(e, dim=0)
            alpha[h, i, nbrs] = w
            out[i] = sum(wj * z[j] for wj, j in zip(w, nbrs))
        heads.append(out)
    hidden = torch.cat(heads, dim=1) if layer.combine == "concat" else torch.stack(heads).mean(0)
    return hidden + layer.bias, alpha


def random_graph(n: int, p: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if torch.rand(1, generator=g).item() < p]
    return torch.tensor(pairs, dtype=torch.long).reshape(-1, 2)


@pytest.mark.parametrize("combine", ["concat", "mean"])
def test_layer_matches_the_paper_node_by_node(combine):
    torch.manual_seed(0)
    layer = GATLayer(5, 3, n_heads=2, combine=combine).eval()
    with torch.no_grad():
        layer.bias.normal_()
    x = torch.randn(6, 5)
    mask = neighbour_mask(random_graph(6, 0.4, 1), 6)
    out = layer(x, mask, need_weights=True)
    ref_hidden, ref_alpha = reference_layer(layer, x, mask)
    torch.testing.assert_close(out.hidden, ref_hidden, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.weights, ref_alpha, rtol=1e-5, atol=1e-6)
    assert out.hidden.shape == ((6, 6) if combine == "concat" else (6, 3))


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 12), p=st.floats(0.0, 1.0), seed=st.integers(0, 10_000))
def test_attention_is_a_distribution_over_each_neighbourhood(n, p, seed):
    torch.manual_seed(seed)
    mask = neighbour_mask(random_graph(n, p, seed), n)
    assert bool((mask == mask.T).all()) and bool(mask.diagonal().all())
    layer = GATLayer(4, 2, n_heads=3, dropout=0.5).eval()
    weights = layer(torch.randn(n, 4), mask, need_weights=True).weights  # (H, N, N)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, n))
    assert bool((weights[:, ~mask] == 0).all())
    assert bool((weights[:, mask] > 0).all())


def test_gat_is_permutation_equivariant():
    torch.manual_seed(0)
    model = GAT(gat_config("karate", n_features=7, n_classes=3)).eval()
    edges = random_graph(9, 0.35, 3)
    x, mask = torch.randn(9, 7), neighbour_mask(edges, 9)
    perm = torch.randperm(9)
    out = model(x, mask, need_weights=True)
    permuted = model(x[perm], mask[perm][:, perm], need_weights=True)
    torch.testing.assert_close(permuted.logits, out.logits[perm], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(permuted.attentions[0], out.attentions[0][:, perm][:, :, perm], rtol=1e-5, atol=1e-6)


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="node indices"):
        neighbour_mask(torch.tensor([[0, 5]]), 3)
    with pytest.raises(ValueError, match="shape"):
        neighbour_mask(torch.tensor([0, 1, 2]), 3)
    layer = GATLayer(2, 2)
    with pytest.raises(ValueError, match="own neighbourhood"):
        layer(torch.randn(3, 2), torch.zeros(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="boolean"):
        layer(torch.randn(3, 2), torch.ones(3, 3))
    with pytest.raises(ValueError, match="combine"):
        GATLayer(2, 2, combine="sum")
    with pytest.raises(ValueError, match="not node indices"):
        graph.train_gat(graph.GATSetup(labelled=[0, 40]))
    with pytest.raises(ValueError, match="train.device"):
        graph.apply_overrides(graph.GATSetup(), ['train.precision="bf16"'])


def test_karate_club_data():
    data = karate_club()
    assert data.features.shape == (34, 34) and data.edges.shape == (2, 78)
    assert int(data.mask.sum()) == 34 + 2 * 78
    assert int(data.labels[0]) == 0 and int(data.labels[33]) == 1  # the instructor's and the administrator's side
    assert int((data.labels == 0).sum()) == 17


def test_two_labelled_leaders_place_most_members():
    run = graph.train_gat(graph.GATSetup(seed=0))
    # Only nodes 0 and 33 are labelled; the other 32 are scored. A majority-class guess gets 50%.
    assert run.accuracy >= 0.85
    assert run.losses[-1] < run.losses[0]


def test_cli_trains_explains_and_plots(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(["train", "gat", "--out", str(out), "--seeds", "2", "--epochs", "60"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["labelled"] == [0, 33] and len(results["accuracy"]) == 2
    assert (out / "attention.png").read_bytes()[:8] == PNG_MAGIC
    assert "mean accuracy over 2 seeds" in capsys.readouterr().out
    plot = tmp_path / "node.png"
    assert cli.main(["gat", "--model", str(out), "--node", "0", "--layer", "1", "--plot", str(plot)]) == 0
    printed = capsys.readouterr().out
    neighbours = [line for line in printed.splitlines() if line.startswith("  ")]
    assert len(neighbours) == 17  # member 0 has 16 friends, plus itself
    assert sum(float(line.split()[0]) for line in neighbours) == pytest.approx(1.0, abs=0.01)
    assert plot.read_bytes()[:8] == PNG_MAGIC
