"""Graphs for graph attention: Zachary's karate club with node features, labels and edges.

The karate club (Zachary 1977) is the one networkx ships (``karate_club_graph``): 34 members, 78
friendships, and the faction each member joined when the club split (the ``club`` attribute:
"Mr. Hi", the instructor's, or "Officer", the administrator's).

Node features are the rows of the adjacency matrix with self-loops (member ``i``'s feature
vector marks ``i`` and its friends). One-hot identities would give a node whose 2-hop
neighbourhood holds no labelled node nothing to go on; neighbour sets let members with common
friends look alike even when they are far from the leaders.

Shape letters: ``N`` nodes, ``F`` features, ``E`` edges.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..functional import neighbour_mask

Tensor = torch.Tensor

__all__ = ["GraphData", "karate_club"]


@dataclass
class GraphData:
    """A graph with node features, labels and the edges as a list.

    Shape:
        features ``(N, F)``; mask ``(N, N)`` bool; labels ``(N,)``; edges ``(2, E)``
    """

    features: Tensor  # (N, F) float
    mask: Tensor  # (N, N) True where i may attend j (neighbours and itself)
    labels: Tensor  # (N,) class index of every node
    edges: Tensor  # (2, E) undirected edges, each once
    class_names: list[str]  # class index → name


def karate_club() -> GraphData:
    """Zachary's karate club: adjacency-row features, faction labels ("Mr. Hi" = 0, "Officer" = 1).

    Shape:
        N = 34 nodes, E = 78 edges, F = 34 features, C = 2 classes
    """
    try:
        import networkx as nx
    except ImportError:
        raise ImportError("the karate club graph ships with networkx: pip install 'attnlab[apps]'") from None
    g = nx.karate_club_graph()
    nodes = sorted(g.nodes)
    class_names = ["Mr. Hi", "Officer"]
    labels = torch.tensor([class_names.index(g.nodes[n]["club"]) for n in nodes])  # (N,)
    edges = torch.tensor(sorted((min(u, v), max(u, v)) for u, v in g.edges)).T  # (2, E)
    mask = neighbour_mask(edges, len(nodes))  # (N, N)
    return GraphData(mask.float(), mask, labels, edges, class_names)
