"""Graph attention networks (Veličković et al. 2018, "Graph Attention Networks").

Attention where the "sequence" is a graph: node ``i`` attends to its neighbours ``j ∈ N(i) ∪ {i}``
and nobody else. One head of a GAT layer (§2.1):

    z_i   = W h_i                                         a shared linear map
    e_ij  = LeakyReLU(aᵀ [z_i ‖ z_j])                      additive score, slope 0.2 (eq. 3)
    α_ij  = softmax over j ∈ N(i) ∪ {i} of e_ij            masked: zero outside the neighbourhood
    h'_i  = Σ_j α_ij z_j

With ``a = [a_self ‖ a_neighbour]`` the score splits as ``a_selfᵀ z_i + a_neighbourᵀ z_j``, so the
``N × N`` score matrix is one broadcast sum of two vectors — no ``N × N × 2F'`` tensor. ``H`` heads
run side by side and are concatenated (hidden layers, eq. 5) or averaged (the output layer,
eq. 6). Dropout is applied to the layer's input and to the attention coefficients (§3.3).

The neighbourhood is a boolean ``(N, N)`` mask in attnlab's convention (``True`` = may attend),
from :func:`attnlab.functional.neighbour_mask`. Every node has its self-loop, so no row is empty.

Shape letters: ``N`` nodes, ``F`` input features, ``F'`` features per head, ``H`` heads,
``C`` classes, ``E`` edges, ``L`` layers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from ..viz import ShowsAttention
from .config import check_fields, preset_config

Tensor = torch.Tensor

__all__ = ["GATLayer", "GATLayerOutput", "GATConfig", "PRESETS", "gat_config", "GATOutput", "GAT"]


@dataclass
class GATLayerOutput:
    hidden: Tensor  # (N, H·F') concatenated heads, or (N, F') averaged
    weights: Tensor | None  # (H, N, N) attention coefficients α_ij per head, if asked


class GATLayer(nn.Module):
    """One multi-head graph attention layer (Veličković et al. 2018, §2.1–2.2).

    Args:
        in_features: input width ``F``.
        out_features: width ``F'`` of each head's output.
        n_heads: number of heads ``H``.
        combine: ``"concat"`` the heads (width ``H·F'``, hidden layers) or ``"mean"`` them
            (width ``F'``, the output layer).
        dropout: dropout on the input features and on the attention coefficients (0.6 in §3.3).
        negative_slope: slope of the LeakyReLU for negative scores (0.2 in the paper).

    Shape:
        x ``(N, F)``; mask ``(N, N)`` → hidden ``(N, H·F')`` or ``(N, F')``, weights ``(H, N, N)``
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        n_heads: int = 1,
        *,
        combine: Literal["concat", "mean"] = "concat",
        dropout: float = 0.0,
        negative_slope: float = 0.2,
    ) -> None:
        super().__init__()
        if combine not in ("concat", "mean"):
            raise ValueError(f"combine must be 'concat' or 'mean', got {combine!r}")
        if min(in_features, out_features, n_heads) < 1:
            raise ValueError(
                f"in_features, out_features and n_heads must be ≥ 1, got {in_features}, {out_features}, {n_heads}"
            )
        self.n_heads, self.out_features, self.combine = n_heads, out_features, combine
        self.negative_slope = negative_slope
        self.node_proj = nn.Linear(in_features, n_heads * out_features, bias=False)  # W of every head
        self.score_self = nn.Parameter(torch.empty(n_heads, out_features))  # first half of a: scores z_i
        self.score_neighbour = nn.Parameter(torch.empty(n_heads, out_features))  # second half of a: scores z_j
        self.bias = nn.Parameter(torch.zeros(n_heads * out_features if combine == "concat" else out_features))
        self.dropout = nn.Dropout(dropout)
        nn.init.xavier_uniform_(self.node_proj.weight)
        nn.init.xavier_uniform_(self.score_self)
        nn.init.xavier_uniform_(self.score_neighbour)

    def forward(self, x: Tensor, mask: Tensor, *, need_weights: bool = False) -> GATLayerOutput:
        if x.dim() != 2:
            raise ValueError(f"x must have shape (N, F), got {tuple(x.shape)}")
        N = x.shape[0]
        if mask.dtype != torch.bool or mask.shape != (N, N):
            raise ValueError(
                f"mask must be a boolean (N, N) = {(N, N)} tensor (True = may attend), "
                f"got {tuple(mask.shape)} {mask.dtype}; build it with neighbour_mask"
            )
        if not bool(mask.diagonal().all()):
            raise ValueError("every node must be in its own neighbourhood (mask[i, i] True): use neighbour_mask")
        H, Fo = self.n_heads, self.out_features
        z = self.node_proj(self.dropout(x)).view(N, H, Fo).transpose(0, 1)  # (N, H·F') -> (H, N, F')
        s_self = (z * self.score_self.unsqueeze(1)).sum(-1)  # (H, N)  a_selfᵀ z_i
        s_neigh = (z * self.score_neighbour.unsqueeze(1)).sum(-1)  # (H, N)  a_neighbourᵀ z_j
        scores = F.leaky_relu(s_self.unsqueeze(2) + s_neigh.unsqueeze(1), self.negative_slope)  # (H, N, N)
        # Non-neighbours get the most negative finite score, so exp() sends them to exactly 0
        # (the library's masking rule; the self-loop keeps every row non-empty).
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        alpha = torch.softmax(scores, dim=-1)  # (H, N, N)
        out = self.dropout(alpha) @ z  # (H, N, N) x (H, N, F') -> (H, N, F')
        if self.combine == "concat":
            hidden = out.transpose(0, 1).reshape(N, H * Fo)  # (H, N, F') -> (N, H·F')
        else:
            hidden = out.mean(dim=0)  # (N, F')
        return GATLayerOutput(hidden + self.bias, alpha if need_weights else None)


@dataclass
class GATConfig:
    n_features: int  # input feature width F per node
    n_classes: int  # number of node classes C
    hidden: int = 8  # features per head F' in the hidden layer (8 in the paper, §3.3)
    n_heads: int = 4  # heads of the hidden layer (8 in the paper)
    out_heads: int = 1  # heads of the output layer, averaged (1 on Cora, 8 on PubMed)
    dropout: float = 0.6  # input and attention dropout (§3.3)
    negative_slope: float = 0.2  # LeakyReLU slope of the attention scores
    model_type: str = "gat"  # checkpoint tag used to rebuild the right class

    def __post_init__(self) -> None:
        check_fields(
            self,
            positive=("n_features", "hidden", "n_heads", "out_heads"),
            fractions=("dropout",),
            non_negative=("negative_slope",),
            sizes=(("n_features", "n_heads", "hidden"), ("n_heads", "hidden", "n_classes", "out_heads")),
        )
        if self.n_classes < 2:
            raise ValueError(f"n_classes must be ≥ 2, got {self.n_classes}")


#: Named sizes. "paper" is the transductive Cora model of §3.3; "karate" is smaller for a 34-node graph.
PRESETS: dict[str, dict] = {
    "karate": dict(hidden=8, n_heads=4, out_heads=1, dropout=0.5),
    "paper": dict(hidden=8, n_heads=8, out_heads=1, dropout=0.6),
}


def gat_config(preset: str, **fields) -> GATConfig:
    """A :class:`GATConfig` from a named preset plus fields (``n_features``, ``n_classes``...)."""
    return preset_config(GATConfig, PRESETS, preset, "GAT", **fields)


@dataclass
class GATOutput(ShowsAttention):  # attentions: AttentionMaps; shows itself in Jupyter
    logits: Tensor  # (N, C) per node
    loss: Tensor | None  # mean cross-entropy over the labelled nodes, when labels were given
    attentions: list[Tensor] | None = None  # L × (H, N, N) attention coefficients per layer, if asked


class GAT(nn.Module):
    """Two-layer GAT for node classification (§3.3): concat heads → ELU → averaged output heads.

    Shape:
        x ``(N, F)``; mask ``(N, N)``; labels ``(N,)`` with ``-100`` on unlabelled nodes → logits ``(N, C)``
    """

    def __init__(self, config: GATConfig) -> None:
        super().__init__()
        c = self.config = config
        self.hidden_layer = GATLayer(
            c.n_features, c.hidden, c.n_heads, combine="concat", dropout=c.dropout, negative_slope=c.negative_slope
        )
        self.output_layer = GATLayer(
            c.hidden * c.n_heads,
            c.n_classes,
            c.out_heads,
            combine="mean",
            dropout=c.dropout,
            negative_slope=c.negative_slope,
        )

    def forward(
        self, x: Tensor, mask: Tensor, *, labels: Tensor | None = None, need_weights: bool = False
    ) -> GATOutput:
        """Class logits for every node; the loss counts only nodes whose label is not ``-100``.

        Shape:
            x ``(N, F)``; mask ``(N, N)``; labels ``(N,)`` → logits ``(N, C)``, attentions ``2 × (H, N, N)``
        """
        first = self.hidden_layer(x, mask, need_weights=need_weights)
        second = self.output_layer(F.elu(first.hidden), mask, need_weights=need_weights)  # (N, C)
        loss = None
        if labels is not None:
            if not bool((labels != -100).any()):
                raise ValueError("no labelled node: every label is -100")
            loss = F.cross_entropy(second.hidden, labels, ignore_index=-100)
        attentions = [first.weights, second.weights] if need_weights else None
        return GATOutput(second.hidden, loss, attentions)
