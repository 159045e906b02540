"""The "three books" walk-through of scaled dot-product attention, for the terminal and a figure.

A query is compared with each key; the scores are divided by √d_k; a softmax turns them into
weights; the values are mixed by the weights. Every number printed here is computed by
:func:`attnlab.functional.scaled_dot_product_attention` (the ``"math"`` reference backend).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from . import functional as AF

if TYPE_CHECKING:
    from .viz import Plot

DEFAULT_SCORES = (8.0, 4.0, 2.0)

TEXT = {
    "en": {
        "title": "Scaled dot-product attention, step by step: softmax(q·kᵀ / √d_k) · V",
        "keys": "Keys (one per book)",
        "query": "Query",
        "raw": "1. Raw scores  q·k  (how well each key matches the query)",
        "scaled": "2. Scaled scores  q·k / √d_k  with d_k = {d_k}, √d_k = {sqrt:.4g}",
        "unscaled": "2. Not scaled (--no-scale): the raw scores go straight into the softmax",
        "weights": "3. Softmax weights (sum to 1): how much attention each book gets",
        "values": "Values (the books' contents)",
        "output": "4. Output  Σ weight·value  (the books' contents mixed by the weights)",
        "book": "book {i}",
        "sum": "sum",
        "top": "The query attends most to {book} ({pct:.1f}% of the weight).",
        "saturated": "Without the division the softmax is almost one-hot: large d_k makes dot products large.",
        "plot": "Figure written to {path}",
        "panels": ("raw scores q·k", "scaled q·k/√d_k", "softmax weights", "output Σ w·v"),
        "panels_noscale": ("raw scores q·k", "not scaled", "softmax weights", "output Σ w·v"),
    },
    "ja": {
        "title": "スケール付き内積注意を一歩ずつ: softmax(q·kᵀ / √d_k) · V",
        "keys": "キー（本ごとの見出し）",
        "query": "クエリ",
        "raw": "1. 生のスコア  q·k（クエリと各キーの合う度合い）",
        "scaled": "2. スケール後のスコア  q·k / √d_k（d_k = {d_k}, √d_k = {sqrt:.4g}）",
        "unscaled": "2. スケールなし（--no-scale）: 生のスコアをそのままソフトマックスへ",
        "weights": "3. ソフトマックスによる注意の重み（合計 1）: 各本のバリューを混ぜる割合",
        "values": "バリュー（本の中身）",
        "output": "4. 出力  Σ 重み·バリュー（重みでバリューを混ぜ合わせたもの）",
        "book": "本{i}",
        "sum": "合計",
        "top": "クエリがいちばん重みをかけるのは{book}です（重みの {pct:.1f}%）。",
        "saturated": "割り算をしないとソフトマックスがほぼ一択になります。d_k が大きいほど内積が大きくなるためです。",
        "plot": "図を {path} に書き出しました",
        "panels": ("生のスコア q·k", "スケール後 q·k/√d_k", "注意の重み", "出力 Σ 重み·v"),
        "panels_noscale": ("生のスコア q·k", "スケールなし", "注意の重み", "出力 Σ 重み·v"),
    },
}


@dataclass
class Steps:
    """Every intermediate of one attention query over a few keys."""

    raw: torch.Tensor  # (S,) q·k
    scaled: torch.Tensor  # (S,) what enters the softmax
    weights: torch.Tensor  # (S,)
    values: torch.Tensor  # (S, Dv)
    output: torch.Tensor  # (Dv,)
    d_k: int
    scale: bool

    def _repr_html_(self) -> str:  # Jupyter: the table of steps_html, in display_options' language
        from .viz import display_options

        return steps_html(self, display_options.lang)


def _vectors(rows: list[str] | None, what: str) -> torch.Tensor | None:
    if rows is None:
        return None
    try:
        parsed = [[float(x) for x in r.split(",")] for r in rows]
    except ValueError:
        raise ValueError(f"{what} must be comma-separated numbers such as 1,0,2; got {rows}") from None
    if len({len(r) for r in parsed}) != 1:
        raise ValueError(f"all {what} must have the same length; got lengths {[len(r) for r in parsed]}")
    return torch.tensor(parsed, dtype=torch.float64)


def compute_steps(
    scores: list[float] | None = None,
    *,
    query: list[float] | None = None,
    keys: list[str] | None = None,
    values: list[str] | None = None,
    d_k: int = 64,
    scale: bool = True,
) -> Steps:
    """Compute the walk-through's numbers.

    Either ``scores`` (the q·k values directly, for ``d_k``-dimensional keys) or a ``query`` and
    ``keys`` (then ``d_k`` is the vector length).
    """
    key_mat = _vectors(keys, "keys")
    if (query is None) != (key_mat is None):
        raise ValueError("give --query and --keys together (or neither, and --scores)")
    if query is not None:
        if scores is not None:
            raise ValueError("give either --scores or --query with --keys, not both")
        q = torch.tensor([query], dtype=torch.float64)  # (1, Dk)
        if key_mat.shape[1] != q.shape[1]:
            raise ValueError(f"query has {q.shape[1]} numbers but each key has {key_mat.shape[1]}")
        k, d_k = key_mat, q.shape[1]  # (S, Dk)
    else:
        raw = torch.tensor(list(scores or DEFAULT_SCORES), dtype=torch.float64)  # (S,)
        # A 1-wide query [1] against 1-wide keys [s_i] reproduces the given scores exactly.
        q, k = torch.ones(1, 1, dtype=torch.float64), raw.unsqueeze(1)  # (1, 1), (S, 1)
    if d_k < 1:
        raise ValueError(f"d_k must be ≥ 1, got {d_k}")
    S = k.shape[0]
    v = _vectors(values, "values")
    if v is None:
        v = torch.eye(S, dtype=torch.float64)  # each book's content is its own direction
    if v.shape[0] != S:
        raise ValueError(f"got {v.shape[0]} value vectors for {S} keys")
    factor = 1.0 / math.sqrt(d_k) if scale else 1.0
    out, weights = AF.scaled_dot_product_attention(q, k, v, scale=factor, return_weights=True, backend="math")
    raw = (q @ k.T)[0]  # (1, Dk) x (Dk, S) -> (S,)
    return Steps(raw, raw * factor, weights[0], v, out[0], d_k, scale)


def _fmt(t: torch.Tensor) -> str:
    return "[" + ", ".join(f"{x:.4f}" for x in t.tolist()) + "]"


def render(steps: Steps, lang: str = "en") -> str:
    """The walk-through as text."""
    tx = TEXT[lang]
    names = [tx["book"].format(i=i + 1) for i in range(len(steps.raw))]
    lines = [tx["title"], ""]
    lines.append(tx["raw"])
    lines += [f"   {n}: {s:.4f}" for n, s in zip(names, steps.raw.tolist())]
    lines.append("")
    if steps.scale:
        lines.append(tx["scaled"].format(d_k=steps.d_k, sqrt=math.sqrt(steps.d_k)))
    else:
        lines.append(tx["unscaled"])
    lines += [f"   {n}: {s:.4f}" for n, s in zip(names, steps.scaled.tolist())]
    lines.append("")
    lines.append(tx["weights"])
    for n, w in zip(names, steps.weights.tolist()):
        bar = "█" * round(w * 40)
        lines.append(f"   {n}: {w:.4f}  {bar}")
    lines.append(f"   {tx['sum']}: {steps.weights.sum().item():.4f}")
    lines.append("")
    lines.append(tx["values"])
    lines += [f"   {n}: {_fmt(v)}" for n, v in zip(names, steps.values)]
    lines.append("")
    lines.append(tx["output"])
    lines.append(f"   {_fmt(steps.output)}")
    lines.append("")
    top = int(steps.weights.argmax())
    lines.append(tx["top"].format(book=names[top], pct=100 * steps.weights[top].item()))
    if not steps.scale and steps.weights.max().item() > 0.95 and steps.d_k > 1:
        lines.append(tx["saturated"])
    return "\n".join(lines)


def plot_steps(steps: Steps, path: Path | None = None, lang: str = "en") -> Path | Plot:
    """Four bar charts: raw scores, scaled scores, weights, output.

    Drawn on its own figure (:func:`attnlab.viz.new_figure`): the session's matplotlib backend is
    left alone, so a notebook keeps showing its figures inline.

    Returns:
        The path written, or a :class:`attnlab.viz.Plot` (shown inline in Jupyter) without a path.
    """
    from .viz import Plot, figure_path, new_figure, save_figure

    path = None if path is None else figure_path(path)
    tx = TEXT[lang]
    names = [tx["book"].format(i=i + 1) for i in range(len(steps.raw))]
    fig = new_figure(12, 3.2)  # one screen wide (1,200 px at the inline 100 dpi)
    axes = fig.subplots(1, 4)
    titles = tx["panels"] if steps.scale else tx["panels_noscale"]
    data = (steps.raw, steps.scaled, steps.weights, steps.output)
    labels = (names, names, names, [str(i) for i in range(len(steps.output))])
    panels = zip(titles, data, labels)
    for ax, (title, values, xlabels) in zip(axes, panels):
        ax.bar(xlabels, values.tolist(), color="#4C72B0")
        ax.set_title(title, fontsize=10)
        for i, x in enumerate(values.tolist()):
            ax.annotate(f"{x:.3f}", (i, x), ha="center", va="bottom", fontsize=8)
    axes[2].set_ylim(0, 1.1)
    return Plot(fig) if path is None else save_figure(fig, path)


def steps_html(steps: Steps, lang: str = "en") -> str:
    """The walk-through as an HTML table (one row per book: q·k, what enters the softmax, the
    weight with a bar), the output under it.

    Shape:
        ``S`` books → ``S`` rows
    """
    from html import escape

    tx = TEXT[lang]
    names = [tx["book"].format(i=i + 1) for i in range(len(steps.raw))]
    scaled_head = "q·k/√d_k" if steps.scale else tx["panels_noscale"][1]
    cell = "padding:2px 8px;text-align:right;font-variant-numeric:tabular-nums"
    head = "".join(f'<th style="{cell}">{escape(h)}</th>' for h in ("", "q·k", scaled_head, tx["panels"][2], ""))
    rows = []
    for name, raw, scaled, w in zip(names, steps.raw.tolist(), steps.scaled.tolist(), steps.weights.tolist()):
        bar = f'<div style="background-color:#4C72B0;height:0.8em;width:{100 * w:.1f}px"></div>'
        rows.append(
            f'<tr><th style="{cell}">{escape(name)}</th><td style="{cell}">{raw:.4f}</td>'
            f'<td style="{cell}">{scaled:.4f}</td><td style="{cell}">{w:.4f}</td><td>{bar}</td></tr>'
        )
    note = f"d_k = {steps.d_k}" + (f", √d_k = {math.sqrt(steps.d_k):.4g}" if steps.scale else "")
    output = escape(tx["output"]) + ": " + _fmt(steps.output)
    return (
        f"<div>{escape(tx['title'])} ({note})</div>"
        f'<table style="border-collapse:collapse"><tr>{head}</tr>{"".join(rows)}</table><div>{output}</div>'
    )


def explain(
    scores: list[float] | None = None,
    *,
    query: list[float] | None = None,
    keys: list[str] | None = None,
    values: list[str] | None = None,
    d_k: int = 64,
    scale: bool = True,
    lang: str = "en",
    plot: Path | None = None,
) -> str:
    """Compute, render as text, and optionally plot the walk-through."""
    if lang not in TEXT:
        raise ValueError(f"lang must be one of {sorted(TEXT)}, got {lang!r}")
    steps = compute_steps(scores, query=query, keys=keys, values=values, d_k=d_k, scale=scale)
    text = render(steps, lang)
    if plot is not None:
        written = plot_steps(steps, Path(plot), lang)
        text += "\n" + TEXT[lang]["plot"].format(path=written)
    return text
