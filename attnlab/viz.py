"""Figures: attention heatmaps (one panel or a layer × head grid), masks, learning curves and bar
charts, written as PNG or SVG.

Every function builds a :class:`matplotlib.figure.Figure` on an Agg canvas directly instead of
going through ``pyplot``: nothing changes the backend of the user's session (a Jupyter notebook
keeps its inline backend), and the figure never enters pyplot's global registry, so there is no
open figure to leak and nothing to close — it is freed when the function returns. The output
format follows the path suffix (``.png`` or ``.svg``; anything else is a :class:`ValueError`
raised before any drawing), and missing parent directories are created.

Without a path, a plot function returns a :class:`Plot` instead of writing a file: in Jupyter it
shows itself inline (``_repr_png_`` or ``_repr_svg_``), and ``.save(path)`` writes it later.
Objects that hold attention weights elsewhere in attnlab (:class:`AttentionMaps`, the model
outputs through :class:`ShowsAttention`, results and reports) display through
:func:`attention_html`: a small map as a table of its numbers, a larger one as a heatmap.
:data:`display_options` sets the language of the labels (``"en"`` or ``"ja"``), the inline image
format and when numbers become a picture. This module imports nothing from attnlab (it is a leaf
of the import layers), so every layer may use it; matplotlib is imported only when drawing.

Japanese labels render because every function calls :func:`use_cjk_font` first (IPAexGothic,
shipped by ``matplotlib-fontja``, placed after DejaVu Sans in the fallback chain).

The figures of a trained model's results (a classifier's pooling weights, an answer's and a
summary's attention, a graph's attention coefficients; the image-patch overlays) live here too and
read those results by their fields. Figures drawn elsewhere use the same building blocks, so they
follow the same rules: :func:`figure_path` (check the suffix first),
:func:`to_array` and :func:`check_weights` (inputs), :func:`new_figure` and :func:`save_figure`.

Shape:
    one attention map: ``(T, S)`` — rows are target/query tokens, columns source/key tokens;
    a grid: ``(L, H, T, S)`` for ``L`` layers and ``H`` heads (one batch item);
    a mask: ``(T, S)`` boolean, ``True`` = may attend.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import html
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "DisplayOptions",
    "display_options",
    "Plot",
    "AttentionMaps",
    "ShowsAttention",
    "attention_html",
    "weights_table_html",
    "image_html",
    "cjk_font_path",
    "use_cjk_font",
    "figure_path",
    "to_array",
    "check_weights",
    "new_figure",
    "save_figure",
    "plot_attention",
    "plot_attention_grid",
    "plot_mask",
    "plot_curves",
    "plot_bars",
    "LABELS",
    "labels_in",
]

_FORMATS = {".png": "png", ".svg": "svg"}
_CELL_INCHES = 0.32  # one heatmap cell: big enough for a 9-pt token label
_MAX_LABELS = 60  # beyond this many tokens on an axis, label every k-th so labels stay legible
_WEIGHT_TOLERANCE = 1e-3  # float16/bfloat16 softmax can overshoot 1 by a few ulps
_MAX_WIDTH_INCHES = 12.0  # a grid wraps its heads into rows to stay within one screen (1,200 px at 100 dpi)
#: The PNG text key under which a Plot records its figure's titles, axis labels and legend
#: entries (not the tick labels: those are tokens), so a notebook's outputs can be checked for
#: the language of their captions without reading pixels.
PNG_LABELS_KEY = "attnlab:labels"

#: Axis, colour-bar and legend labels of the attention figures, by ``lang`` ("en" or "ja"). The
#: Japanese terms are the lesson's: クエリ (query), キー (key).
LABELS: dict[str, dict[str, str]] = {
    "en": {
        "source": "source (key)",
        "target": "target (query)",
        "weight": "attention weight",
        "panel": "layer {layer}, head {head}",
        "key_position": "key position (S)",
        "query_position": "query position (T)",
        "allowed": "may attend",
        "masked": "masked",
        "head": "head {head}",
        "left_out": "({left} of {total} layers left out: display_options.max_panels)",
        "maps": "{n} layer(s) × {shape}",
        "batch_item_0": " — batch item 0",
        "first_batch_item": " — the first batch item",
        "weights": "weights",
        "no_weights": "weights None (pass return_weights=True / need_weights=True)",
    },
    "ja": {
        "source": "ソース（キー）",
        "target": "ターゲット（クエリ）",
        "weight": "注意の重み",
        "panel": "第{layer}層・ヘッド{head}",
        "key_position": "キーの位置 (S)",
        "query_position": "クエリの位置 (T)",
        "allowed": "見てよい",
        "masked": "隠されている",
        "head": "ヘッド{head}",
        "left_out": "（{total} 層のうち {left} 層は省略: display_options.max_panels）",
        "maps": "{n} 層 × {shape}",
        "batch_item_0": " — バッチの 0 番目の例",
        "first_batch_item": " — バッチの最初の例",
        "weights": "注意の重み",
        "no_weights": "注意の重みなし（return_weights=True / need_weights=True で付きます）",
    },
}


@dataclass
class DisplayOptions:
    """How figures are labelled and how attnlab objects show themselves in Jupyter.

    Set the fields of :data:`display_options` (e.g. ``display_options.lang = "ja"`` at the top of
    a Japanese notebook); a plot function's own ``lang=`` argument wins over it.
    """

    lang: str = "en"  # "en" or "ja": axis labels, colour-bar and panel titles
    format: str = "png"  # "png" or "svg": how a Plot shows itself inline (only that one is rendered)
    dpi: int = 100  # resolution of inline PNG images (files are written at 150 dpi)
    max_table_cells: int = 80  # a single map with at most this many cells shows its numbers as a table
    max_panels: int = 24  # at most this many layer × head panels in an inline grid (later layers first)

    def __setattr__(self, name: str, value: Any) -> None:
        checks = {
            "lang": lambda v: v in LABELS,
            "format": lambda v: v in ("png", "svg"),
            "dpi": lambda v: isinstance(v, int) and not isinstance(v, bool) and 10 <= v <= 600,
            "max_table_cells": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
            "max_panels": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
        }
        if name not in checks:
            raise AttributeError(f"display options are {sorted(checks)}; got {name!r}")
        if not checks[name](value):
            allowed = {"lang": sorted(LABELS), "format": ["png", "svg"]}.get(name, "an int in range")
            raise ValueError(f"display_options.{name} must be {allowed}, got {value!r}")
        object.__setattr__(self, name, value)


#: The options every repr and plot function reads (one per process, like matplotlib's rcParams).
display_options = DisplayOptions()


def labels_in(lang: str | None) -> dict[str, str]:
    """The figure labels in ``lang`` (default: ``display_options.lang``; a ``ValueError`` naming the
    choices for another): what every plot and repr of attnlab writes on a figure or table.

    Shape:
        no tensors; returns the :data:`LABELS` entry of ``lang``.
    """
    lang = display_options.lang if lang is None else lang
    if lang not in LABELS:
        raise ValueError(f"lang must be one of {sorted(LABELS)}, got {lang!r}")
    return LABELS[lang]


@functools.cache
def cjk_font_path() -> Path:
    """The Japanese-capable font (IPAexGothic) shipped by the ``matplotlib-fontja`` dependency.

    Shape:
        no tensors; returns a file path.
    """
    path = Path(str(resources.files("matplotlib_fontja") / "fonts" / "ipaexg.ttf"))
    if not path.is_file():
        raise FileNotFoundError(f"CJK font not found at {path}; reinstall matplotlib-fontja")
    return path


@functools.cache
def use_cjk_font() -> str:
    """Register the CJK font with matplotlib and put it after DejaVu Sans in the fallback list.

    Matplotlib (≥ 3.6) falls back glyph by glyph along ``font.family``, so Latin text keeps its
    usual face and Japanese text renders instead of showing empty boxes.

    Shape:
        no tensors; returns the font's family name.
    """
    from matplotlib import font_manager, rcParams

    font_manager.fontManager.addfont(str(cjk_font_path()))
    name = font_manager.FontProperties(fname=str(cjk_font_path())).get_name()
    rcParams["font.family"] = ["DejaVu Sans", name]
    return name


# --------------------------------------------------------------------------------------------
# Building blocks, public for figures drawn elsewhere (the explainer's steps, the variants' report):
# input checks, figure creation, saving
# --------------------------------------------------------------------------------------------


def figure_path(path: str | Path) -> Path:
    """``path`` as a :class:`~pathlib.Path`, checked to end in ``.png`` or ``.svg`` (the format).

    Call it first, so that a bad name fails before any drawing.

    Raises:
        ValueError: any other suffix.

    Shape:
        no tensors; returns a file path.
    """
    path = Path(path)
    if path.suffix.lower() not in _FORMATS:
        raise ValueError(
            f"cannot tell the image format of {str(path)!r}: the file name must end in {' or '.join(_FORMATS)}"
        )
    return path


def to_array(x: Any, name: str) -> np.ndarray:
    """A tensor (any device/dtype), array or nested list → a NumPy array; ``name`` labels errors.

    Shape:
        any shape → the same shape.
    """
    if hasattr(x, "detach"):  # torch.Tensor, without importing torch here
        x = x.detach().cpu()
        x = x.float() if x.is_floating_point() else x
        x = x.numpy()
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a tensor, array or nested list; got {type(x).__name__}") from exc


def check_weights(x: Any, name: str, ndim: int, shape_doc: str) -> np.ndarray:
    """Attention weights checked for plotting: ``ndim`` dimensions, non-empty, real, finite and in
    [0, 1] (a rounding overshoot is clipped); errors name ``name`` and its expected ``shape_doc``
    (e.g. ``"(T, S)"``).

    Shape:
        ``ndim`` dimensions → the same shape, float64.
    """
    w = to_array(x, name)
    if w.ndim != ndim:
        raise ValueError(f"{name} must have shape {shape_doc}; got shape {tuple(w.shape)}")
    if not np.issubdtype(w.dtype, np.number) or np.issubdtype(w.dtype, np.complexfloating):
        raise TypeError(f"{name} must hold real numbers, got dtype {w.dtype}")
    w = w.astype(np.float64)
    if 0 in w.shape:
        raise ValueError(f"{name} is empty (shape {tuple(w.shape)}); nothing to plot")
    if not np.isfinite(w).all():
        raise ValueError(f"{name} contains NaN or infinity; attention weights must be finite")
    lo, hi = float(w.min()), float(w.max())
    if lo < -_WEIGHT_TOLERANCE or hi > 1 + _WEIGHT_TOLERANCE:
        raise ValueError(
            f"{name} has values in [{lo:.4g}, {hi:.4g}]; attention weights lie in [0, 1] "
            "(pass softmax outputs, not raw scores)"
        )
    return np.clip(w, 0.0, 1.0)


def _check_tokens(tokens: Sequence[Any], n: int, name: str, axis: str) -> list[str]:
    if isinstance(tokens, str):
        raise TypeError(f"{name} must be a sequence of tokens, not one string ({tokens!r})")
    labels = [str(t) for t in tokens]
    if len(labels) != n:
        raise ValueError(
            f"{name} has {len(labels)} tokens but the weights have {n} {axis}; give one label per row/column"
        )
    return labels


def new_figure(width: float, height: float):
    """A :class:`matplotlib.figure.Figure` of ``width`` × ``height`` inches on its own Agg canvas
    (pyplot and the session's backend untouched), constrained layout, the CJK font registered.

    Shape:
        no tensors; returns a figure.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    use_cjk_font()
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig, path: Path) -> Path:
    """Write ``fig`` to ``path`` (from :func:`figure_path`) at 150 dpi, creating missing folders.

    Shape:
        no tensors; returns the path written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format=_FORMATS[path.suffix.lower()], dpi=150)
    return path


class Plot:
    """A drawn figure that shows itself in Jupyter and is written to a file on request.

    What the plot functions return when they are given no path. In a notebook the last
    expression of a cell displays it inline (as PNG, or SVG with ``display_options.format =
    "svg"``); :meth:`save` writes it as a file plot functions would have; ``.figure`` is the
    :class:`matplotlib.figure.Figure` for further drawing.

    Shape:
        no tensors; holds one figure.
    """

    def __init__(self, figure) -> None:
        self.figure = figure

    def png(self, dpi: int | None = None) -> bytes:
        """The figure as PNG bytes (at ``display_options.dpi`` unless given)."""
        buffer = io.BytesIO()
        metadata = {PNG_LABELS_KEY: json.dumps(figure_labels(self.figure), ensure_ascii=False)}
        self.figure.savefig(buffer, format="png", dpi=dpi or display_options.dpi, metadata=metadata)
        return buffer.getvalue()

    def svg(self) -> str:
        """The figure as an SVG document (text)."""
        buffer = io.StringIO()
        self.figure.savefig(buffer, format="svg")
        return buffer.getvalue()

    def save(self, path: str | Path) -> Path:
        """Write the figure to ``path`` (``.png`` or ``.svg``, 150 dpi); returns the path."""
        return save_figure(self.figure, figure_path(path))

    def _repr_png_(self) -> bytes | None:
        return self.png() if display_options.format == "png" else None

    def _repr_svg_(self) -> str | None:
        return self.svg() if display_options.format == "svg" else None

    def __repr__(self) -> str:
        width, height = self.figure.get_size_inches()
        return f"<attnlab.viz.Plot {width:.1f}×{height:.1f} in, {len(self.figure.axes)} axes>"


def figure_labels(fig) -> list[str]:
    """The words a reader reads on ``fig`` besides its tick labels: the figure's title, each
    axes' title and axis labels (colour bars included) and legend entries, in drawing order.

    Shape:
        no tensors; returns a list of strings (empty ones left out).
    """
    texts = [fig._suptitle.get_text()] if getattr(fig, "_suptitle", None) is not None else []
    texts += [getattr(fig, name).get_text() for name in ("_supxlabel", "_supylabel") if getattr(fig, name, None)]
    for ax in fig.axes:
        texts += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        legend = ax.get_legend()
        if legend is not None:
            texts += [t.get_text() for t in legend.get_texts()]
    return [t for t in texts if t]


def _finish(fig, path: Path | None) -> Path | Plot:
    """Write ``fig`` to ``path``, or hand it back as a :class:`Plot` when there is no path."""
    return Plot(fig) if path is None else save_figure(fig, path)


def _checked_path(path: str | Path | None) -> Path | None:
    return None if path is None else figure_path(path)


def _positions(n: int) -> list[str]:
    return [str(i) for i in range(n)]


#: Kana and kanji: a column label with them is written upright, not turned on its side.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]")


def _column_label(label: str) -> tuple[str, int]:
    """A column's tick label and its rotation: Latin labels longer than two characters are turned
    90° (long tokens fit in a narrow column); short ones (positions, digits) and labels with
    Japanese stay upright, Japanese one character under the other (縦書き) when it has several,
    so no Japanese is read on its side."""
    if _CJK.search(label):
        return ("\n".join(label) if len(label) > 1 else label), 0
    return label, (0 if len(label) <= 2 else 90)


def _label_axis(ax, which: str, labels: list[str], fontsize: float) -> None:
    """Put one token label per cell (every k-th when there are very many)."""
    step = max(1, math.ceil(len(labels) / _MAX_LABELS))
    ticks = list(range(0, len(labels), step))
    shown = [labels[i] for i in ticks]
    # parse_math=False: a token like "$5" or "$x$" is text, not a mathtext formula.
    if which == "x":
        ax.set_xticks(ticks)
        texts = ax.set_xticklabels([_column_label(t)[0] for t in shown], fontsize=fontsize, parse_math=False)
        for text, label in zip(texts, shown):
            text.set_rotation(_column_label(label)[1])
    else:
        ax.set_yticks(ticks)
        ax.set_yticklabels(shown, fontsize=fontsize, parse_math=False)


def _label_fontsize(n: int) -> float:
    return 9.0 if n <= 30 else 7.0 if n <= 60 else 5.0


def _colour_bar(fig, image, ax, label: str, **options):
    """A colour bar with its label clear of the tick numbers (the CJK font's rotated label is
    otherwise drawn over them)."""
    bar = fig.colorbar(image, ax=ax, **options)
    bar.set_label(label, labelpad=8)
    return bar


def _vmax(w: np.ndarray, vmax: float | None) -> float:
    """The top of a heatmap's colour scale: ``vmax``, or the largest weight for ``None``."""
    top = max(float(w.max()), 1e-6) if vmax is None else float(vmax)
    if not top > 0:
        raise ValueError(f"vmax must be positive (or None for the largest weight), got {vmax!r}")
    return top


def _heatmap(ax, w: np.ndarray, src: list[str] | None, tgt: list[str] | None, vmax: float = 1.0):
    """Draw one ``(T, S)`` map on ``ax`` with the colour scale [0, ``vmax``] (fixed [0, 1] by default)."""
    image = ax.imshow(w, vmin=0.0, vmax=vmax, cmap="viridis", aspect="auto", interpolation="nearest")
    if src is not None:
        _label_axis(ax, "x", src, _label_fontsize(len(src)))
    else:
        ax.set_xticks([])
    if tgt is not None:
        _label_axis(ax, "y", tgt, _label_fontsize(len(tgt)))
    else:
        ax.set_yticks([])
    return image


# --------------------------------------------------------------------------------------------
# Attention heatmaps
# --------------------------------------------------------------------------------------------


def plot_attention(
    weights: Any,
    src_tokens: Sequence[Any] | None = None,
    tgt_tokens: Sequence[Any] | None = None,
    path: str | Path | None = None,
    *,
    title: str | None = None,
    lang: str | None = None,
    row_label: str | None = None,
    column_label: str | None = None,
    vmax: float | None = 1.0,
) -> Path | Plot:
    """One attention heatmap: which source token each target token looked at.

    Args:
        weights: attention weights of one head (or a head average) for one sentence pair, every
            value in [0, 1] — e.g. ``cross_weights[layer][b, head]``. Tensor, array or list.
        src_tokens: column labels (source / key tokens), ``S`` of them (default: positions).
        tgt_tokens: row labels (target / query tokens), ``T`` of them (default: positions).
        path: output file, ``.png`` or ``.svg``; without one the figure comes back as a
            :class:`Plot` (shown inline in Jupyter).
        title: optional title above the panel.
        lang: language of the axis labels, ``"en"`` or ``"ja"`` (default: ``display_options.lang``).
        row_label: the label of the rows' axis (default: target (query) in ``lang``). Say what
            the rows are when they are not a target's tokens: the queries of self-attention,
            sentences, heads.
        column_label: the label of the columns' axis (default: source (key) in ``lang``), e.g.
            the keys of self-attention.
        vmax: the weight drawn brightest: 1 (default, the same scale on every figure), a number,
            or ``None`` for this map's largest weight — a map whose weights are all small (spread
            over many keys) is otherwise uniformly dark; say so in the figure's caption.

    Returns:
        The path written, or the :class:`Plot` when no path is given.

    Shape:
        weights: ``(T, S)``.
    """
    path = _checked_path(path)
    text = labels_in(lang)
    w = check_weights(weights, "weights", 2, "(T, S)")
    T, S = w.shape
    src = _check_tokens(_positions(S) if src_tokens is None else src_tokens, S, "src_tokens", "columns (S)")
    tgt = _check_tokens(_positions(T) if tgt_tokens is None else tgt_tokens, T, "tgt_tokens", "rows (T)")
    # at most one screen wide: a long source gets narrower cells rather than a strip to scroll
    width = min(max(S * _CELL_INCHES + 2.2, 4.0), _MAX_WIDTH_INCHES)
    height = min(max(T * _CELL_INCHES + 1.6, 3.0), 24.0)
    fig = new_figure(width, height)
    ax = fig.add_subplot()
    image = _heatmap(ax, w, src, tgt, _vmax(w, vmax))
    ax.set_xlabel(text["source"] if column_label is None else column_label)
    ax.set_ylabel(text["target"] if row_label is None else row_label)
    if title is not None:
        ax.set_title(title, parse_math=False)
    _colour_bar(fig, image, ax, text["weight"])
    return _finish(fig, path)


def plot_attention_grid(
    weights: Any,
    src_tokens: Sequence[Any] | None = None,
    tgt_tokens: Sequence[Any] | None = None,
    path: str | Path | None = None,
    *,
    title: str | None = None,
    lang: str | None = None,
    layer_names: Sequence[int | None] | None = None,
    columns: int | None = None,
    row_label: str | None = None,
    column_label: str | None = None,
    vmax: float | None = 1.0,
) -> Path | Plot:
    """Every layer and head at once: a grid with one row per layer and one column per head.

    Panels count layers and heads from 1, as the lesson and the explorer do: ``weights[l][h]`` is
    titled ``layer l+1, head h+1`` (``head h+1`` alone where the layer's name is ``None``: maps
    that are not one layer's, such as one attention call's heads). Target labels sit on the first
    column, source labels on the bottom panel of each column, and one colour bar (fixed [0, 1]
    unless ``vmax`` says otherwise) serves all panels; the axes are named once, the rows' at the
    left and the columns' underneath. A layer whose heads would not fit in one screen's width
    (about 12 inches) wraps them onto several rows, so that the figure never becomes a strip
    wider than the screen.

    Args:
        weights: a ``(L, H, T, S)`` tensor/array, or a list of ``L`` tensors of shape
            ``(H, T, S)`` — e.g. ``[w[b] for w in output.cross_attentions]`` for sentence ``b``.
        src_tokens: column labels, ``S`` of them (default: positions).
        tgt_tokens: row labels, ``T`` of them (default: positions).
        path: output file, ``.png`` or ``.svg``; without one, a :class:`Plot` comes back.
        title: optional title above the grid.
        lang: language of the labels, ``"en"`` or ``"ja"`` (default: ``display_options.lang``).
        layer_names: the 0-based indices of the rows' layers in the model when ``weights``
            holds only some of them (panel titles then name the real layers, counted from 1);
            default ``0 … L−1``; ``None`` for a row that is no layer (its panels are titled by
            head only).
        columns: heads per row (default: as many as fit in about 12 inches).
        row_label: the label of the rows' axis, written once at the left of the grid (default:
            target (query) in ``lang``); e.g. the queries of self-attention.
        column_label: the label of the columns' axis, written once under the grid (default:
            source (key) in ``lang``).
        vmax: the weight drawn brightest on every panel: 1 (default), a number, or ``None`` for
            the largest weight of all panels.

    Returns:
        The path written, or the :class:`Plot` when no path is given.

    Shape:
        weights: ``(L, H, T, S)``.
    """
    path = _checked_path(path)
    text = labels_in(lang)
    if isinstance(weights, (list, tuple)):
        layers = [check_weights(w, f"weights[{i}]", 3, "(H, T, S)") for i, w in enumerate(weights)]
        if not layers:
            raise ValueError("weights is an empty list; give one (H, T, S) map per layer")
        shapes = {layer.shape for layer in layers}
        if len(shapes) != 1:
            raise ValueError(f"every layer must have the same (H, T, S) shape; got {sorted(shapes)}")
        w = np.stack(layers)  # (L, H, T, S)
    else:
        w = check_weights(weights, "weights", 4, "(L, H, T, S) (pick one batch item first)")
    L, H, T, S = w.shape
    src = _check_tokens(_positions(S) if src_tokens is None else src_tokens, S, "src_tokens", "columns (S)")
    tgt = _check_tokens(_positions(T) if tgt_tokens is None else tgt_tokens, T, "tgt_tokens", "rows (T)")
    names = list(range(L)) if layer_names is None else [None if x is None else int(x) for x in layer_names]
    if len(names) != L:
        raise ValueError(f"layer_names names {len(names)} layers but the weights have {L}")
    panel_w = max(S * _CELL_INCHES * 0.8, 1.8)
    panel_h = max(T * _CELL_INCHES * 0.8, 1.6)
    if columns is None:
        room = _MAX_WIDTH_INCHES - 2.5  # the colour bar and the row labels take the rest
        wanted = min(H, 4)  # at least four heads side by side: smaller panels rather than a tall column
        if room // panel_w < wanted:
            shrink = max(room / wanted / panel_w, 1.8 / panel_w)
            panel_w, panel_h = panel_w * shrink, max(panel_h * shrink, 1.6)
        columns = max(1, min(H, int(room // panel_w)))
    if columns < 1:
        raise ValueError(f"columns must be at least 1, got {columns}")
    columns = min(columns, H)
    rows_per_layer = math.ceil(H / columns)
    rows = L * rows_per_layer
    width = min(columns * panel_w + 2.5, 40.0)
    height = min(rows * panel_h + 1.5 + (0.4 if title else 0.0), 60.0)
    fig = new_figure(width, height)
    axes = fig.subplots(rows, columns, squeeze=False)
    top = _vmax(w, vmax)
    image = None
    for layer in range(L):
        for head in range(H):
            row, column = layer * rows_per_layer + head // columns, head % columns
            # the source tokens go under the last panel of each column
            last_in_column = layer == L - 1 and (row + 1 == rows or head + columns >= H)
            image = _heatmap(
                axes[row][column],
                w[layer, head],
                src if last_in_column else None,
                tgt if column == 0 else None,
                top,
            )
            label = text["head"] if names[layer] is None else text["panel"]
            number = None if names[layer] is None else names[layer] + 1  # counted from 1 on screen
            axes[row][column].set_title(label.format(layer=number, head=head + 1), fontsize=8)
        for empty in range(H, rows_per_layer * columns):  # the unused end of a wrapped layer
            axes[layer * rows_per_layer + empty // columns][empty % columns].set_visible(False)
    if title is not None:
        fig.suptitle(title, parse_math=False)
    fig.supxlabel(text["source"] if column_label is None else column_label, fontsize=9)
    fig.supylabel(text["target"] if row_label is None else row_label, fontsize=9)
    _colour_bar(fig, image, axes, text["weight"], shrink=0.8)
    return _finish(fig, path)


def plot_mask(
    mask: Any,
    path: str | Path | None = None,
    *,
    tokens: Sequence[Any] | None = None,
    title: str | None = None,
    lang: str | None = None,
) -> Path | Plot:
    """Draw a boolean attention mask: dark cells may attend, light cells are masked out.

    Args:
        mask: boolean, ``True`` = may attend (from the helpers in :mod:`attnlab.functional`);
            leading size-1 dimensions (``(1, 1, T, S)``) are dropped.
        path: output file, ``.png`` or ``.svg``; without one, a :class:`Plot` comes back.
        tokens: labels for both axes of a self-attention mask (needs ``T == S``); positions are
            numbered when omitted.
        title: optional title.
        lang: language of the labels, ``"en"`` or ``"ja"`` (default: ``display_options.lang``).

    Returns:
        The path written, or the :class:`Plot` when no path is given.

    Shape:
        mask: ``(T, S)``.
    """
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    path = _checked_path(path)
    text = labels_in(lang)
    m = to_array(mask, "mask")
    while m.ndim > 2 and m.shape[0] == 1:
        m = m[0]
    if m.ndim != 2:
        raise ValueError(f"mask must have shape (T, S); got shape {tuple(m.shape)}")
    if m.dtype != np.bool_:
        raise TypeError(
            f"mask must be boolean (True = may attend), got dtype {m.dtype}; build it with the "
            "helpers in attnlab.functional"
        )
    T, S = m.shape
    if 0 in m.shape:
        raise ValueError(f"mask is empty (shape {(T, S)}); nothing to plot")
    labels = None
    if tokens is not None:
        if T != S:
            raise ValueError(f"tokens label both axes, so the mask must be square; got (T, S) = {(T, S)}")
        labels = _check_tokens(tokens, S, "tokens", "positions")
    width = min(max(S * _CELL_INCHES + 1.8, 3.5), 24.0)
    height = min(max(T * _CELL_INCHES + 1.8, 3.0), 24.0)
    fig = new_figure(width, height)
    ax = fig.add_subplot()
    colours = ListedColormap(["#ececec", "#2b5d9c"])  # False = masked, True = may attend
    ax.imshow(m.astype(np.int8), cmap=colours, vmin=0, vmax=1, interpolation="nearest")
    # Thin white lines between cells so single positions are countable.
    ax.set_xticks(np.arange(-0.5, S, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, T, 1), minor=True)
    ax.grid(which="minor", color="white", linewidth=0.8)
    ax.tick_params(which="minor", length=0)
    if labels is not None:
        _label_axis(ax, "x", labels, _label_fontsize(S))
        _label_axis(ax, "y", labels, _label_fontsize(T))
    ax.set_xlabel(text["key_position"])
    ax.set_ylabel(text["query_position"])
    if title is not None:
        ax.set_title(title, parse_math=False)
    ax.legend(
        handles=[Patch(color="#2b5d9c", label=text["allowed"]), Patch(color="#ececec", label=text["masked"])],
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        fontsize=8,
    )
    return _finish(fig, path)


# --------------------------------------------------------------------------------------------
# Curves and bars (learning curves, benchmarks, BLEU by length)
# --------------------------------------------------------------------------------------------


def _series_values(values: Sequence[Any]) -> np.ndarray:
    """A y-series as floats; ``None`` becomes NaN, which matplotlib draws as a gap."""
    return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)


def plot_curves(
    series: Mapping[str, tuple[Sequence[Any], Sequence[Any]]],
    path: str | Path | None = None,
    *,
    xlabel: str,
    ylabel: str,
    title: str | None = None,
    logy: bool = False,
    logx: bool = False,
) -> Path:
    """Line plot of one or more named series: learning curves, benchmark timings, BLEU by length.

    Args:
        series: name → ``(xs, ys)``. ``xs`` may be numbers or category labels (strings, e.g.
            ``"1–10"``); a ``None`` in ``ys`` (an empty bucket) leaves a gap.
        path: output file, ``.png`` or ``.svg``; without one, a :class:`Plot` comes back.
        xlabel, ylabel: axis labels.
        title: optional title.
        logy, logx: logarithmic axes (every plotted value must then be > 0).

    Returns:
        The path written, or the :class:`Plot` when no path is given.

    Shape:
        each series: ``xs`` and ``ys`` of equal length ``n ≥ 1``.
    """
    path = _checked_path(path)
    if not isinstance(series, Mapping) or not series:
        raise ValueError("series must be a non-empty dict: name -> (xs, ys)")
    prepared = []
    for name, pair in series.items():
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"series[{name!r}] must be an (xs, ys) pair")
        xs, ys = list(pair[0]), _series_values(pair[1])
        if len(xs) != len(ys):
            raise ValueError(f"series[{name!r}] has {len(xs)} x values but {len(ys)} y values")
        if not xs:
            raise ValueError(f"series[{name!r}] is empty")
        for axis, flag, values in (("y", logy, ys), ("x", logx, xs)):
            if flag:
                finite = np.asarray([v for v in values if v is not None], dtype=np.float64)
                finite = finite[~np.isnan(finite)]
                if (finite <= 0).any():
                    raise ValueError(f"series[{name!r}] has {axis} values <= 0, which a log {axis}-axis cannot show")
        prepared.append((str(name), xs, ys))
    fig = new_figure(6.4, 4.2)
    ax = fig.add_subplot()
    for name, xs, ys in prepared:
        ax.plot(xs, ys, marker="o" if len(xs) <= 50 else None, markersize=4, label=name)
    if logy:
        ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title is not None:
        ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if len(prepared) > 1:
        ax.legend()
    return _finish(fig, path)


def plot_bars(
    series: Mapping[str, Mapping[str, float]],
    path: str | Path | None = None,
    *,
    ylabel: str,
    xlabel: str | None = None,
    title: str | None = None,
    logy: bool = False,
) -> Path:
    """Grouped bar chart, each bar labelled with its value: e.g. tokens/s per backend per length.

    Args:
        series: series name → (category → value). Categories are the x positions, in first-seen
            order; each series is one bar per category (a missing category leaves no bar). With
            one series no legend is drawn.
        path: output file, ``.png`` or ``.svg``; without one, a :class:`Plot` comes back.
        ylabel: y-axis label; xlabel and title optional.
        logy: logarithmic y-axis (values must be > 0).

    Returns:
        The path written, or the :class:`Plot` when no path is given.

    Shape:
        ``K`` series × up to ``C`` categories → ``C`` groups of up to ``K`` bars.
    """
    path = _checked_path(path)
    if not isinstance(series, Mapping) or not series:
        raise ValueError("series must be a non-empty dict: name -> {category: value}")
    categories: list[str] = []
    for name, values in series.items():
        if not isinstance(values, Mapping) or not values:
            raise TypeError(f"series[{name!r}] must be a non-empty dict: category -> value")
        for cat, v in values.items():
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise ValueError(f"series[{name!r}][{cat!r}] must be a finite number, got {v!r}")
            if logy and v <= 0:
                raise ValueError(f"series[{name!r}][{cat!r}] = {v} cannot be shown on a log axis")
            if str(cat) not in categories:
                categories.append(str(cat))
    k = len(series)
    bar_width = 0.8 / k
    # long category names (words, not lengths) stand upright so that they neither overlap nor widen
    # the figure past a screen
    upright = len(categories) > 6 and max(len(c) for c in categories) > 5
    width = min(max(len(categories) * (0.5 + 0.35 * k) + 2.0, 5.0), _MAX_WIDTH_INCHES)
    fig = new_figure(width, 4.2 + (0.08 * max(len(c) for c in categories) if upright else 0.0))
    ax = fig.add_subplot()
    for j, (name, values) in enumerate(series.items()):
        xs = [categories.index(str(c)) + (j - (k - 1) / 2) * bar_width for c in values]
        bars = ax.bar(xs, list(values.values()), width=bar_width, label=str(name))
        ax.bar_label(bars, fmt="%.3g", fontsize=7, padding=1)
    ax.set_xticks(range(len(categories)))
    ax.set_xticklabels(categories, parse_math=False, rotation=90 if upright else 0)
    if logy:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    if title is not None:
        ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    if k > 1:
        ax.legend()
    return _finish(fig, path)


def plot_image_attention(
    image: Any,
    weights: Any,
    patch_size: int,
    path: str | Path | None = None,
    *,
    titles: Sequence[str] | None = None,
    title: str | None = None,
    lang: str | None = None,
) -> Path | Plot:
    """Attention over image patches drawn on the image: one panel per row of ``weights``.

    Each panel colours every patch by its weight (one colour scale from 0 to the largest weight
    of the figure) and draws the digit's strokes on top as contour lines, so both stay readable.
    Titles (e.g. the generated token of each step, Japanese included) go above the panels.

    Args:
        image: the image, pixel values in any range.
        weights: patch weights in raster order, one row per panel, each in [0, 1].
        patch_size: side of a patch in pixels.
        path: output ``.png`` or ``.svg`` file; without one, a :class:`Plot` comes back.
        titles: one title per panel.
        title: a title for the whole figure.
        lang: language of the colour-bar label (default: ``display_options.lang``).

    Shape:
        image ``(H, W)``; weights ``(P,)`` or ``(K, P)`` with ``P = (H/p)·(W/p)``
    """
    import torch  # only to upsample the strokes

    path = _checked_path(path)
    text = labels_in(lang)
    img = to_array(image, "image").astype(np.float64)
    if img.ndim != 2:
        raise ValueError(f"image must have shape (H, W), got {img.shape}")
    w = to_array(weights, "weights")
    w = check_weights(w[None] if w.ndim == 1 else w, "weights", 2, "(K, P)")
    K, P = w.shape
    rows, cols = img.shape[0] // patch_size, img.shape[1] // patch_size
    if img.shape[0] % patch_size or img.shape[1] % patch_size or rows * cols != P:
        raise ValueError(
            f"{P} patch weights do not fit a {img.shape[0]}×{img.shape[1]} image cut into "
            f"{patch_size}×{patch_size} patches ({rows * cols} patches)"
        )
    if titles is not None and len(titles) != K:
        raise ValueError(f"{len(titles)} titles for {K} panels")
    grid = w.reshape(K, rows, cols)  # patch weights back in their image positions
    # The strokes: the image upsampled 8× (bilinear) so that its contour is smooth.
    fine = torch.nn.functional.interpolate(
        torch.from_numpy(img)[None, None], scale_factor=8, mode="bilinear", align_corners=False
    )[0, 0].numpy()  # (8H, 8W)
    span = float(img.max() - img.min())
    levels = [float(img.min()) + 0.35 * span, float(img.min()) + 0.7 * span] if span > 0 else None
    vmax = max(float(w.max()), 1e-6)
    ncols = min(K, 6)
    nrows = math.ceil(K / ncols)
    fig = new_figure(1.9 * ncols + 1.0, 2.1 * nrows + (0.4 if title else 0.0))
    axes = fig.subplots(nrows, ncols, squeeze=False)
    extent = (-0.5, img.shape[1] - 0.5, img.shape[0] - 0.5, -0.5)
    heat = None
    for k, ax in enumerate(axes.flat):
        ax.set_xticks([])
        ax.set_yticks([])
        if k >= K:
            ax.set_axis_off()
            continue
        heat = ax.imshow(grid[k], cmap="viridis", vmin=0.0, vmax=vmax, interpolation="nearest", extent=extent)
        if levels is not None:
            ys = np.linspace(-0.5, img.shape[0] - 0.5, fine.shape[0])
            xs = np.linspace(-0.5, img.shape[1] - 0.5, fine.shape[1])
            ax.contour(xs, ys, fine, levels=levels, colors=["white"], linewidths=[1.0, 2.0])
        ax.set_xlim(extent[0], extent[1])
        ax.set_ylim(extent[2], extent[3])
        if titles is not None:
            ax.set_title(str(titles[k]), fontsize=11)
    if title:
        fig.suptitle(title)
    _colour_bar(fig, heat, axes, text["weight"], shrink=0.8)
    return _finish(fig, path)


# --------------------------------------------------------------------------------------------
# Inline display in Jupyter: attention maps as a table of numbers (small) or a heatmap (large)
# --------------------------------------------------------------------------------------------


def image_html(plot: Plot, *, alt: str = "attention heatmap") -> str:
    """An ``<img>`` element holding ``plot`` as an embedded PNG (for ``_repr_html_`` methods).

    Shape:
        no tensors; returns HTML text.
    """
    data = base64.b64encode(plot.png()).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}" style="max-width:100%">'


def weights_table_html(
    weights: Any,
    src_tokens: Sequence[Any] | None = None,
    tgt_tokens: Sequence[Any] | None = None,
    *,
    digits: int = 3,
) -> str:
    """One attention map as an HTML table: a row per query, a column per key, each cell its
    weight, shaded by it (the numbers beside the picture).

    Shape:
        weights: ``(T, S)``, or ``(S,)`` for one query.
    """
    w = to_array(weights, "weights")
    w = check_weights(w[None] if w.ndim == 1 else w, "weights", 2, "(T, S)")
    T, S = w.shape
    src = _check_tokens(_positions(S) if src_tokens is None else src_tokens, S, "src_tokens", "columns (S)")
    tgt = _check_tokens(_positions(T) if tgt_tokens is None else tgt_tokens, T, "tgt_tokens", "rows (T)")
    cell = "padding:2px 6px;text-align:right;font-variant-numeric:tabular-nums"
    head = "".join(f'<th style="{cell}">{html.escape(t)}</th>' for t in src)
    rows = []
    for label, row in zip(tgt, w):
        cells = "".join(
            f'<td style="{cell};background-color:rgba(43,93,156,{x:.3f});color:{"white" if x > 0.55 else "black"}">'
            f"{x:.{digits}f}</td>"
            for x in row
        )
        rows.append(f'<tr><th style="{cell}">{html.escape(label)}</th>{cells}</tr>')
    return f'<table style="border-collapse:collapse"><tr><th></th>{head}</tr>{"".join(rows)}</table>'


def _as_grid(weights: Any) -> np.ndarray:
    """Weights of any of the shapes reprs meet as a ``(L, H, T, S)`` grid.

    ``(T, S)`` → one panel; ``(H, T, S)`` → one row of heads; ``(L, H, T, S)`` as it is (more
    leading dimensions: their first item); a list of per-layer ``(B, H, T, S)`` tensors (batch
    item 0 of each is taken) or ``(H, T, S)`` tensors → one row per layer.
    """
    if isinstance(weights, (list, tuple)):
        layers = [to_array(w, "weights") for w in weights]
        layers = [w[0] if w.ndim == 4 else w for w in layers]  # batch item 0
        layers = [w[None] if w.ndim == 2 else w for w in layers]
        return np.stack(layers)
    w = to_array(weights, "weights")
    while w.ndim > 4:
        w = w[0]
    return w.reshape((1,) * (4 - w.ndim) + w.shape)


def attention_html(
    weights: Any,
    src_tokens: Sequence[Any] | None = None,
    tgt_tokens: Sequence[Any] | None = None,
    *,
    title: str | None = None,
    caption: str | None = None,
    layer_names: Sequence[int | None] | None = None,
    lang: str | None = None,
    row_label: str | None = None,
    column_label: str | None = None,
) -> str:
    """HTML showing attention weights: a caption, then the numbers as a table when there is one
    small map (at most ``display_options.max_table_cells`` cells), else a heatmap (one panel,
    or a layer × head grid of at most ``display_options.max_panels`` panels, the last layers kept).

    Args:
        weights: ``(T, S)``, ``(H, T, S)``, ``(L, H, T, S)`` or a list of per-layer
            ``(B, H, T, S)`` maps (batch item 0 is shown); values in [0, 1].
        src_tokens, tgt_tokens: column and row labels (default: positions).
        title: a title on the heatmap.
        caption: a line of text above it (escaped).
        layer_names: the 0-based indices of the grid's rows' layers (default ``0 … L−1``;
            ``[None]`` for heads that belong to no named layer); titles count from 1.
        lang: language of the labels and notes (default: ``display_options.lang``).
        row_label, column_label: the heatmap's axis names (default: target (query) and source
            (key)); e.g. the query and key positions of one attention call.

    Shape:
        weights → a ``(L, H, T, S)`` grid; returns HTML text.
    """
    text = labels_in(lang)
    grid = _as_grid(weights)
    L, H, T, S = grid.shape
    names = list(range(L)) if layer_names is None else list(layer_names)
    parts = [] if caption is None else [f"<div>{html.escape(caption)}</div>"]
    if L * H == 1 and T * S <= display_options.max_table_cells:
        parts.append(weights_table_html(grid[0, 0], src_tokens, tgt_tokens))
        return "".join(parts)
    if L * H == 1:
        plot = plot_attention(
            grid[0, 0], src_tokens, tgt_tokens, title=title, lang=lang, row_label=row_label, column_label=column_label
        )
    else:
        keep = max(1, display_options.max_panels // H)  # whole layers, the last ones
        if keep < L:
            parts.append(f"<div>{html.escape(text['left_out'].format(left=L - keep, total=L))}</div>")
            grid, names = grid[-keep:], names[-keep:]
        plot = plot_attention_grid(
            grid, src_tokens, tgt_tokens, title=title, layer_names=names, lang=lang,
            row_label=row_label, column_label=column_label,
        )  # fmt: skip
    parts.append(image_html(plot))
    return "".join(parts)


def _describe(value: Any) -> str | None:
    """A short description of one field of an output: a tensor's shape, a number, a list's length."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        shape = tuple(value.shape)
        if shape == () or math.prod(shape) == 1:
            return f"{float(value.reshape(-1)[0]):.4g}"
        return str(shape)
    if isinstance(value, (int, float)):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)) and value and all(hasattr(v, "shape") for v in value):
        return f"{len(value)} × {tuple(value[0].shape)}"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_describe(v)}" for k, v in value.items()) + "}"
    if value is None:
        return "None"
    return None


class AttentionMaps(list):
    """Per-layer attention weights, ``L × (B, H, T, S)``: a plain list that also draws itself in
    Jupyter (every layer and head of batch item 0).

    Model outputs hold their maps in this type (see :class:`ShowsAttention`), so
    ``out.attentions`` displays as a grid; everything else sees an ordinary list.

    Shape:
        ``L`` tensors of ``(B, H, T, S)`` (or ``(H, T, S)``: graph attention has no batch).
    """

    def _repr_html_(self) -> str | None:
        if not self or not all(hasattr(w, "shape") and len(w.shape) in (3, 4) for w in self):
            return None
        return self.html()

    def html(self, lang: str | None = None) -> str | None:
        """The Jupyter display in ``lang`` (default: ``display_options.lang``)."""
        if not self or not all(hasattr(w, "shape") and len(w.shape) in (3, 4) for w in self):
            return None
        text = labels_in(lang)
        shape = tuple(self[0].shape)
        caption = text["maps"].format(n=len(self), shape=shape) + (text["batch_item_0"] if len(shape) == 4 else "")
        return attention_html(list(self), caption=caption, lang=lang)


def _wrap_maps(value: Any) -> Any:
    if isinstance(value, list) and not isinstance(value, AttentionMaps):
        return AttentionMaps(value)
    if isinstance(value, dict):
        return {k: _wrap_maps(v) for k, v in value.items()}
    return value


class ShowsAttention:
    """A mixin for model-output dataclasses with an ``attentions`` field (a list of per-layer
    maps, or a dict of such lists): the lists become :class:`AttentionMaps`, and the output shows
    itself in Jupyter as its fields' shapes and a grid of its attention (the ``"cross"`` maps of
    an encoder–decoder, else the first kind it has).

    Shape:
        ``attentions``: ``L × (B, H, T, S)``, or ``{kind: L × (B, H, T, S)}``.
    """

    def __post_init__(self) -> None:
        if getattr(self, "attentions", None) is not None:
            self.attentions = _wrap_maps(self.attentions)

    def _repr_html_(self) -> str:
        fields = [f.name for f in dataclasses.fields(self)] if dataclasses.is_dataclass(self) else []
        described = [(name, _describe(getattr(self, name))) for name in fields]
        line = " · ".join(f"{name} {d}" for name, d in described if d is not None)
        parts = [f"<div><b>{type(self).__name__}</b>: {html.escape(line)}</div>"]
        maps = getattr(self, "attentions", None)
        if isinstance(maps, dict):
            kind = "cross" if maps.get("cross") else next((k for k, v in maps.items() if v), None)
            maps = None if kind is None else maps[kind]
            if maps is not None:
                parts.append(f"<div>attentions[{kind!r}]</div>")
        if maps:
            parts.append(AttentionMaps(maps)._repr_html_() or "")
        return "".join(parts)


# --------------------------------------------------------------------------------------------
# Figures of a trained model's results: a classifier's pooling weights, an answer's and a
# summary's attention, a graph's attention coefficients. They read the result objects of
# attnlab.inference (and attnlab.data.graphs' GraphData) by their fields, importing none of them.
# --------------------------------------------------------------------------------------------


def format_token_weights(prediction: Any, *, width: int = 30) -> str:
    """Terminal bars of a text classifier's prediction (:class:`attnlab.inference.classify.Prediction`):
    one line per token, the bar proportional to its pooling weight.

    Shape:
        ``S`` tokens → ``S`` lines plus a header line.
    """
    probs = ", ".join(f"{name} {p:.2f}" for name, p in sorted(prediction.probs.items(), key=lambda kv: -kv[1]))
    lines = [f"{prediction.label}   ({probs})"]
    top = max(prediction.weights)
    label_width = min(max(len(t) for t in prediction.tokens), 20)
    for token, w in zip(prediction.tokens, prediction.weights):
        n = round(width * w / top) if top > 0 else 0
        lines.append(f"  {token[:20]:<{label_width}} {'█' * n}{' ' * (width - n)} {w:.3f}")
    return "\n".join(lines)


def plot_token_weights(prediction: Any, path: str | Path) -> Path:
    """A bar per token of a prediction (:class:`attnlab.inference.classify.Prediction`), its height the
    pooling weight (PNG or SVG); the title gives the prediction.

    Shape:
        weights ``(S,)`` → ``S`` bars
    """

    path = figure_path(path)
    w = check_weights([prediction.weights], "weights", 2, "(1, S)")[0]
    S = len(w)
    fig = new_figure(min(max(0.38 * S + 1.6, 4.5), 24.0), 3.2)
    ax = fig.add_subplot()
    ax.bar(range(S), w, color=[(0.16, 0.44, 0.70, 0.35 + 0.65 * x / max(w.max(), 1e-9)) for x in w])
    ax.set_xticks(range(S))
    ax.set_xticklabels(prediction.tokens, rotation=90 if S > 12 else 0, parse_math=False)
    ax.set_xlim(-0.6, S - 0.4)
    ax.set_ylabel("pooling weight")
    ax.grid(True, axis="y", alpha=0.3)
    p = prediction.probs[prediction.label]
    ax.set_title(f"attention pooling → {prediction.label} ({p:.0%})", parse_math=False)
    return save_figure(fig, path)


def plot_question_attention(answer: Any, path: str | Path, *, layer: int = -1) -> Path:
    """Heatmap of an answer's (:class:`attnlab.inference.qa.Answer`) question tokens (rows) × passage
    tokens (columns), mean over the heads of ``layer``.

    Each cell is the share of a question token's attention that goes to that passage token (the
    rest goes to the question and the special tokens), so rows need not sum to 1. A layer × head
    grid of the same maps is written beside it with the suffix ``_grid``.

    Shape:
        attention ``(L, H, Q, C)`` → a ``Q × C`` panel and an ``L × H`` grid
    """

    if answer.attention is None:
        raise ValueError("this answer has no attention; call answer(..., return_attention=True)")
    L = answer.attention.shape[0]
    if not -L <= layer < L:
        raise ValueError(f"layer must be in [{-L}, {L}), got {layer}")
    path = Path(path)
    plot_attention(
        answer.attention[layer].mean(0),
        answer.context_tokens,
        answer.question_tokens,
        path,
        title=f"question → passage attention (layer {layer % L + 1} of {L}, mean over heads); answer: {answer.text!r}",
    )
    grid = path.with_name(path.stem + "_grid" + path.suffix)
    plot_attention_grid(answer.attention, answer.context_tokens, answer.question_tokens, grid)
    return path


def plot_summary_attention(summary: Any, path: str | Path) -> Path:
    """Heatmap of a summary's (:class:`attnlab.inference.summarize.Summary`) words (rows, with their copy
    probability 1 − p_gen) over the document words.

    Shape:
        attention ``(T, S)`` → one ``T × S`` panel
    """

    if summary.attention is None or summary.p_gen is None:
        raise ValueError("this summary has no attention; call summarize(..., return_attention=True)")
    rows = [f"{w}  (copy {1 - p:.2f})" for w, p in zip(summary.tokens, summary.p_gen)]
    return plot_attention(
        summary.attention,
        summary.src_tokens,
        rows,
        path,
        title="pointer-generator attention (row: summary word, copy probability)",
    )


def spring_layout(edges: Any, n: int, seed: int) -> np.ndarray:
    """Fixed drawing positions of a graph's ``n`` nodes (networkx's force-directed layout, seeded),
    shared by :func:`plot_graph_attention` and the lesson's graph widget.

    Shape:
        edges: (2, E) node pairs; returns (N, 2) positions.
    """
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(to_array(edges, "edges").astype(int).T.tolist())  # (2, E) -> E pairs
    pos = nx.spring_layout(g, seed=seed)
    return np.array([pos[i] for i in range(n)])  # (N, 2)


def plot_graph_attention(
    data: Any,
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
        data: the graph (:class:`attnlab.data.graphs.GraphData`: its ``labels``, ``edges`` and ``class_names``).
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
    xy = spring_layout(data.edges, N, seed)
    edges = to_array(data.edges, "edges").astype(int).T.tolist()  # (2, E) -> E pairs
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
        ax.plot(
            *xy[[i, j]].T,
            color="0.85" if faded else cmap(norm(s)),
            linewidth=0.6 if faded else 0.8 + 7.0 * s / vmax,
            zorder=1,
            solid_capstyle="round",
        )
    faction_colours = ["#f4a261", "#2a9d8f"]
    for i in range(N):
        ring = "black" if i in labelled else ("#d62828" if pred[i] != int(data.labels[i]) else "white")
        ax.scatter(
            *xy[i],
            s=330,
            color=faction_colours[pred[i] % 2],
            edgecolors=ring,
            linewidths=3.0 if ring != "white" else 1.0,
            zorder=2,
        )
        ax.annotate(str(i), xy[i], ha="center", va="center", fontsize=8, zorder=3)
    if node is not None:
        ax.annotate(f"α_self = {w[node, node]:.2f}", xy[node], xytext=(12, 12), textcoords="offset points", fontsize=9)
    for k, name in enumerate(data.class_names):
        ax.scatter([], [], s=120, color=faction_colours[k], label=f"predicted {name}")
    ax.scatter([], [], s=120, color="white", edgecolors="black", linewidths=3.0, label="labelled in training")
    ax.scatter([], [], s=120, color="white", edgecolors="#d62828", linewidths=3.0, label="wrong prediction")
    ax.legend(loc="lower left", fontsize=8, frameon=False)
    ax.set_axis_off()
    fig.colorbar(
        ScalarMappable(norm=norm, cmap=cmap),
        ax=ax,
        shrink=0.7,
        label="attention α_ij" if node is not None else "attention (α_ij + α_ji) / 2",
    )
    if title:
        ax.set_title(title)
    return save_figure(fig, path)
