"""§5 Multi-head attention: a tiny MultiHeadAttention written out step by step, tutorial 001's
version without ``transpose(1, 2)`` (what goes wrong when splitting and when joining the heads),
and MiniLM's heads (head view and neuron view). The tiny example is computed in the page
(``static/engine/lessonmath.js``, ``multihead``); :func:`multihead_example` is its reference. The
heads are computed in the page too (``static/engine/bert.js``'s ``headsView``, from MiniLM's maps
in the site's ``models/minilm`` folder); :func:`head_view` is its reference.

Shape letters: ``T`` words, ``D`` model width, ``H`` heads, ``Dh = D / H`` head width, ``S``
MiniLM tokens.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from ... import functional as AF
from ...layers import MultiHeadAttention
from .common import (
    MAX_SEED,
    LessonModels,
    check_sentence,
    check_whole,
    english_sentence,
    rounded,
    seeded_attention,
    typed_words,
    word_vector,
)

MAX_HEAD_VIEW_TOKENS = 40  # MiniLM tokens drawn in the head view


MAX_MULTIHEAD_CHARS = 300


def check_multihead(text: object, d_model: object, n_heads: object, seed: object) -> None:
    """Raise ``ValueError`` with the page's one-line message for settings the widgets cannot show.

    The page's JavaScript (``static/engine/lessonmath.js``, ``checkMultihead``) makes the same
    checks in the same order with the same messages; tests/web/lesson/test_lessonmath_parity.py holds them
    equal.

    Shape:
        no tensors (a sentence of at most T words and numbers checked).
    """
    check_sentence(text, MAX_MULTIHEAD_CHARS)
    for name, x, lo, hi in (("d_model", d_model, 2, 16), ("n_heads", n_heads, 1, 8), ("seed", seed, 0, MAX_SEED)):
        check_whole(name, x, lo, hi)
    if int(d_model) % int(n_heads):
        raise ValueError(f"n_heads={int(n_heads)} must divide d_model={int(d_model)}")


class HeadSteps(BaseModel):
    q: list[list[float]] = Field(description="(T, Dh) this head's slice of Q")
    k: list[list[float]]
    v: list[list[float]]
    weights: list[list[float]] = Field(description="(T, T) softmax(q kᵀ/√Dh)")
    output: list[list[float]] = Field(description="(T, Dh) weights · v")


class TutorialSteps(BaseModel):
    weights: list[list[list[float]]] = Field(description="(T, H, H): per position, heads attend to heads")
    output: list[list[float]] = Field(description="(T, D) after the tutorial's merge and W_o")
    max_abs_diff: float = Field(description="largest difference to the correct output")
    influence_split: list[list[bool]] = Field(
        description="[j][i]: the tutorial's attention output at position i (per head, before joining) "
        "changes when word j changes"
    )
    influence_merged: list[list[bool]] = Field(
        description="[j][i]: row i of the tutorial's joined heads (before W_o) changes when word j changes"
    )
    influence_correct: list[list[bool]] = Field(
        description="[j][i]: row i of the correctly joined heads (before W_o) changes when word j changes"
    )
    pieces: list[list[tuple[int, int]]] = Field(
        description="(T, H): [i][b] = (word, head) whose Dh numbers the tutorial's merge puts in row i, column block b"
    )
    pieces_correct: list[list[tuple[int, int]]] = Field(description="the same for the correct merge")


class MultiheadResponse(BaseModel):
    tokens: list[str]
    d_model: int
    n_heads: int
    head_dim: int
    shapes: dict[str, list[int]]
    x: list[list[float]] = Field(description="(T, D) the words' vectors")
    w_q: list[list[float]] = Field(description="(D, D) as used: Q = X W_q")
    w_k: list[list[float]]
    w_v: list[list[float]]
    w_o: list[list[float]]
    q: list[list[float]]
    k: list[list[float]]
    v: list[list[float]]
    heads: list[HeadSteps]
    concat: list[list[float]] = Field(description="(T, D) the heads' outputs side by side")
    output: list[list[float]] = Field(description="(T, D) concat W_o")
    module_max_abs_diff: float = Field(description="largest difference to MultiHeadAttention(X) itself")
    without_transpose: TutorialSteps


def join_heads(heads: torch.Tensor) -> torch.Tensor:
    """The correct merge: move the positions back in front of the heads, then put each position's
    H pieces side by side.

    Shape:
        heads ``(H, T, Dh)`` → ``(T, D)``
    """
    H, T, Dh = heads.shape
    return heads.transpose(0, 1).reshape(T, H * Dh)  # (H, T, Dh) -> (T, H, Dh) -> (T, D)


def tutorial_join(step: torch.Tensor) -> torch.Tensor:
    """Tutorial 001's merge, ``output.transpose(1, 2).contiguous().view(B, -1, D)``, on a tensor
    that was never transposed when split. The transpose moves the heads in front of the positions
    (the layout of a correct split), and ``view`` then cuts that ``(H, T, Dh)`` memory into rows of
    D numbers: row ``i`` gets the pieces ``i·H … i·H + H − 1`` in head-major order, mostly of other
    words. It is the same as joining correctly split heads with ``view`` and no transpose back.

    Shape:
        step ``(B, T, H, Dh)`` → ``(B, T, D)``
    """
    B, T, H, Dh = step.shape
    return step.transpose(1, 2).contiguous().view(B, -1, H * Dh)  # (B, H, T, Dh) -> (B, T, D): rows scrambled


def merge_pieces(join, layout: Literal["THD", "HTD"], T: int, H: int, Dh: int) -> list[list[tuple[int, int]]]:
    """Where a merge puts each (word, head) piece, found by running ``join`` itself on labels:
    piece ``(t, h)`` is filled with the number ``t·H + h`` in a tensor laid out as ``layout``
    (``"THD"``: ``(1, T, H, Dh)``, the tutorial's split; ``"HTD"``: ``(H, T, Dh)``, the correct one).

    Shape:
        → ``(T, H)`` pairs ``(word, head)``: ``[i][b]`` is the piece in row ``i``, column block ``b``
    """
    t = torch.arange(T, dtype=torch.float64).view(T, 1)
    h = torch.arange(H, dtype=torch.float64).view(1, H)
    labels = (t * H + h).unsqueeze(-1).expand(T, H, Dh)  # (T, H, Dh): piece (t, h) holds t·H + h
    split = labels.transpose(0, 1).contiguous() if layout == "HTD" else labels.unsqueeze(0).contiguous()
    joined = join(split).reshape(T, H, Dh)  # (T, D) -> (T, H, Dh): the column blocks
    if not bool((joined == joined[..., :1]).all()):
        raise AssertionError("a merge cut a piece in two")  # both merges move whole pieces of Dh numbers
    ids = joined[..., 0].long().tolist()  # (T, H)
    return [[(x // H, x % H) for x in row] for row in ids]


def _multihead_steps(mha: MultiHeadAttention, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Multi-head attention written out: project, split into heads, attend per head, concat, W_o.

    Shape:
        x ``(T, D)`` → q, k, v ``(T, D)``; qh, kh, vh ``(H, T, Dh)``; weights ``(H, T, T)``;
        heads ``(H, T, Dh)``; concat, output ``(T, D)``
    """
    T, D = x.shape
    H, Dh = mha.n_heads, mha.head_dim
    q, k, v = x @ mha.q_proj.weight.T, x @ mha.k_proj.weight.T, x @ mha.v_proj.weight.T  # (T, D) each
    qh = q.view(T, H, Dh).transpose(0, 1)  # (T, D) -> (T, H, Dh) -> (H, T, Dh)
    kh = k.view(T, H, Dh).transpose(0, 1)  # (H, T, Dh)
    vh = v.view(T, H, Dh).transpose(0, 1)  # (H, T, Dh)
    heads, weights = AF.scaled_dot_product_attention(qh, kh, vh, return_weights=True, backend="math")  # (H, T, Dh)
    concat = join_heads(heads)  # (T, D)
    output = concat @ mha.out_proj.weight.T  # (T, D)
    return dict(q=q, k=k, v=v, qh=qh, kh=kh, vh=vh, weights=weights, heads=heads, concat=concat, output=output)


def tutorial_multihead(mha: MultiHeadAttention, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Tutorial 001's multi-head forward, which reshapes to heads without ``transpose(1, 2)``.

    ``view(B, T, H, Dh)`` leaves the heads where attention expects the positions, so the scores
    are ``(B, T, H, H)``: at every position the heads attend to each other, and no word ever
    looks at another word. The closing ``transpose(1, 2)`` then undoes a transpose that never
    happened, and the merged rows mix positions. The shapes all fit; only the numbers are wrong.

    Shape:
        x ``(T, D)`` → weights ``(T, H, H)``, step ``(T, H, Dh)`` (per position, before merging),
        merged ``(T, D)`` (joined, before W_o), output ``(T, D)``
    """
    T, D = x.shape
    H, Dh = mha.n_heads, mha.head_dim
    B = 1
    q = (x @ mha.q_proj.weight.T).view(B, T, H, Dh)  # (B, T, H, Dh): no transpose(1, 2)
    k = (x @ mha.k_proj.weight.T).view(B, T, H, Dh)
    v = (x @ mha.v_proj.weight.T).view(B, T, H, Dh)
    step, weights = AF.scaled_dot_product_attention(q, k, v, return_weights=True, backend="math")  # (B, T, H, Dh)
    merged = tutorial_join(step)  # (B, T, H, Dh) -> (B, T, D): rows scrambled
    output = merged @ mha.out_proj.weight.T  # (B, T, D)
    return dict(weights=weights[0], step=step[0], merged=merged[0], output=output[0])


def _influence(step, x: torch.Tensor) -> list[list[bool]]:
    """``[j][i]``: does position ``i`` of ``step(x)`` change when word ``j``'s vector changes?"""
    base = step(x)  # (T, ...)
    rows = []
    for j in range(x.shape[0]):
        moved = x.clone()
        moved[j] += 1.0
        diff = (step(moved) - base).flatten(1).abs().amax(dim=1)  # (T,)
        rows.append((diff > 1e-12).tolist())
    return rows


@torch.no_grad()
def multihead_example(
    text: str = "the cat sat down", d_model: int = 8, n_heads: int = 2, seed: int = 0
) -> MultiheadResponse:
    """A tiny multi-head attention with its real shapes and numbers (float64), and tutorial 001's
    version on the same words and weights.

    The reference for the page's ``multihead`` (``static/engine/lessonmath.js``), which computes
    every field but ``module_max_abs_diff`` (the page cannot run the module; here it is checked).

    Shape:
        ``T`` words of ``text``; X, Q, K, V, concat, output ``(T, D)``; per head q, k, v,
        output ``(T, Dh)`` and weights ``(T, T)``; without transpose: weights ``(T, H, H)``,
        influence grids ``(T, T)``, pieces ``(T, H)``
    """
    check_multihead(text, d_model, n_heads, seed)
    tokens = typed_words(text, "the sentence")
    T, D, H, seed = len(tokens), int(d_model), int(n_heads), int(seed)
    mha = seeded_attention(D, H, seed, decimals=2)
    x = torch.stack([word_vector(w, D, seed) for w in tokens]).round(decimals=1)  # (T, D)
    s = _multihead_steps(mha, x)
    module_out = mha(x.unsqueeze(0), need_weights=True).output[0]  # (1, T, D) -> (T, D)
    bad = tutorial_multihead(mha, x)
    Dh = mha.head_dim
    shapes = {
        "X": [T, D],
        "W_q": [D, D],
        "Q": [T, D],
        "Q_heads": [H, T, Dh],
        "weights": [H, T, T],
        "heads": [H, T, Dh],
        "concat": [T, D],
        "W_o": [D, D],
        "output": [T, D],
        "no_transpose_Q": [T, H, Dh],
        "no_transpose_weights": [T, H, H],
    }
    return MultiheadResponse(
        tokens=tokens,
        d_model=D,
        n_heads=H,
        head_dim=Dh,
        shapes=shapes,
        x=x.tolist(),
        w_q=mha.q_proj.weight.T.tolist(),
        w_k=mha.k_proj.weight.T.tolist(),
        w_v=mha.v_proj.weight.T.tolist(),
        w_o=mha.out_proj.weight.T.tolist(),
        q=s["q"].tolist(),
        k=s["k"].tolist(),
        v=s["v"].tolist(),
        heads=[
            HeadSteps(
                q=s["qh"][h].tolist(),
                k=s["kh"][h].tolist(),
                v=s["vh"][h].tolist(),
                weights=s["weights"][h].tolist(),
                output=s["heads"][h].tolist(),
            )
            for h in range(H)
        ],
        concat=s["concat"].tolist(),
        output=s["output"].tolist(),
        module_max_abs_diff=float((module_out - s["output"]).abs().max()),
        without_transpose=TutorialSteps(
            weights=bad["weights"].tolist(),
            output=bad["output"].tolist(),
            max_abs_diff=float((bad["output"] - s["output"]).abs().max()),
            influence_split=_influence(lambda z: tutorial_multihead(mha, z)["step"], x),
            influence_merged=_influence(lambda z: tutorial_multihead(mha, z)["merged"], x),
            influence_correct=_influence(lambda z: _multihead_steps(mha, z)["concat"], x),
            pieces=merge_pieces(lambda z: tutorial_join(z)[0], "THD", T, H, Dh),
            pieces_correct=merge_pieces(join_heads, "HTD", T, H, Dh),
        ),
    )


class HeadsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = english_sentence()
    layer: int = Field(0, ge=0, le=63, strict=True, description="0-based layer")
    head: int = Field(0, ge=0, le=63, strict=True, description="0-based head of the neuron view")
    query: int = Field(0, ge=0, le=MAX_HEAD_VIEW_TOKENS - 1, strict=True, description="token of the neuron view")


class Neuron(BaseModel):
    head: int
    query: int
    q: list[float] = Field(description="(Dh,) the query's vector in this head")
    k: list[list[float]] = Field(description="(S, Dh) every key's vector")
    products: list[list[float]] = Field(description="(S, Dh) q ⊙ k, element by element")
    scores: list[float] = Field(description="(S,) q·k, the sum of each row of products")
    scaled: list[float] = Field(description="(S,) q·k/√Dh")
    weights: list[float] = Field(description="(S,) softmax of scaled: this query's row of the head's map")


class HeadsResponse(BaseModel):
    model: str
    tokens: list[str]
    layer: int
    n_layers: int
    n_heads: int
    head_dim: int
    weights: list[list[list[float]]] = Field(description="(H, S, S) every head's map in this layer")
    neuron: Neuron


def head_view(model, req: HeadsRequest) -> HeadsResponse:
    """MiniLM's attention in one layer (every head) and, for one head and query token, the
    query and key vectors, their element-wise products and the softmax they lead to.

    The vectors come from the layer's own projections applied to the layer's input; their
    softmax equals the map the model returns (a test checks).
    """
    from ...models.bert import encode_with_masks

    tok = model.tokenizer
    bert = getattr(model.model, "bert", model.model)
    ids = encode_with_masks(tok, req.text)
    if len(ids) <= 2:
        raise ValueError(f"cannot encode {req.text!r}: it has no tokens")
    if len(ids) > MAX_HEAD_VIEW_TOKENS:
        raise ValueError(f"the sentence has {len(ids)} tokens; the head view draws at most {MAX_HEAD_VIEW_TOKENS}")
    L, H = len(bert.blocks), bert.config.n_heads
    if req.layer >= L:
        raise ValueError(f"layer {req.layer} does not exist: MiniLM has layers 0–{L - 1}")
    if req.head >= H:
        raise ValueError(f"head {req.head} does not exist: MiniLM has heads 0–{H - 1}")
    if req.query >= len(ids):
        raise ValueError(f"query {req.query} is not a token position: the sentence has {len(ids)} tokens")
    with torch.inference_mode():
        out = bert(torch.tensor([ids]), need_weights=True)  # (1, S)
        weights = out.attentions[req.layer][0]  # (H, S, S)
        x = out.all_hidden_states[req.layer]  # (1, S, D): the input of this layer's self-attention
        mha = bert.blocks[req.layer].self_attn
        S, Dh = len(ids), mha.head_dim
        q = mha.q_proj(x)[0].view(S, H, Dh)[:, req.head]  # (S, D) -> (S, H, Dh) -> (S, Dh)
        k = mha.k_proj(x)[0].view(S, H, Dh)[:, req.head]  # (S, Dh)
        qi = q[req.query]  # (Dh,)
        products = qi * k  # (S, Dh)
        scores = products.sum(dim=-1)  # (S,)
        scaled = scores / math.sqrt(Dh)
        neuron_weights = torch.softmax(scaled.double(), dim=-1)  # (S,)
    return HeadsResponse(
        model=model.name,
        tokens=[tok.id_to_token(i) for i in ids],
        layer=req.layer,
        n_layers=L,
        n_heads=H,
        head_dim=Dh,
        weights=rounded(weights, 5),
        neuron=Neuron(
            head=req.head,
            query=req.query,
            q=rounded(qi, 5),
            k=rounded(k, 5),
            products=rounded(products, 5),
            scores=rounded(scores, 5),
            scaled=rounded(scaled, 5),
            weights=rounded(neuron_weights, 5),
        ),
    )


def add_routes(router: APIRouter, models: LessonModels, gate) -> None:
    """§5's endpoints: none. The tiny example and MiniLM's heads are computed in the page
    (``static/engine/lessonmath.js``, ``static/engine/bert.js``); :func:`multihead_example` and
    :func:`head_view` are their references."""
