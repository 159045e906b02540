"""The inline displays in the learner's language, and figures that fit a screen: panels of one
attention call are titled by head (they are no layer), a layer's many heads wrap into rows
instead of a strip wider than the screen, and every PNG records the words a reader reads on it
(titles, axis labels, legends), which the notebook test checks for the notebook's language."""

from __future__ import annotations

import base64
import io
import json
import re

import pytest
import torch
from PIL import Image

from attnlab import MultiHeadAttention, scaled_dot_product_attention
from attnlab.inference.qa import Answer
from attnlab.inference.summarize import Summary
from attnlab.viz import (
    PNG_LABELS_KEY,
    AttentionMaps,
    display_options,
    plot_attention,
    plot_attention_grid,
    plot_curves,
)


@pytest.fixture(autouse=True)
def _restore_display_options():
    saved = {name: getattr(display_options, name) for name in ("lang", "max_panels", "max_table_cells")}
    yield
    for name, value in saved.items():
        setattr(display_options, name, value)


def _weights(*shape: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.softmax(torch.randn(*shape, generator=g), dim=-1)


def _png_labels(png: bytes) -> list[str]:
    return json.loads(Image.open(io.BytesIO(png)).text[PNG_LABELS_KEY])


def _embedded_pngs(html: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([^"]+)"', html)]


def test_a_png_records_its_titles_axis_labels_and_legend_but_not_its_ticks():
    series = {"÷√d_k なし": ([1, 2], [0.6, 0.9]), "÷√d_k あり": ([1, 2], [0.5, 0.4])}
    plot = plot_curves(series, xlabel="d_k", ylabel="最大の重み", title="飽和")
    assert _png_labels(plot.png()) == ["飽和", "d_k", "最大の重み", "÷√d_k なし", "÷√d_k あり"]
    grid = plot_attention_grid(_weights(1, 2, 3, 3), ["tok", "b", "c"], ["x", "y", "z"], title="題", lang="ja")
    labels = _png_labels(grid.png())
    assert (
        labels[0] == "題"
        and "第1層・ヘッド2" in labels
        and "第1層・ヘッド1" in labels
        and "注意の重み" in labels
        and "tok" not in labels
    )


def test_one_calls_heads_are_titled_by_head_not_by_a_layer():
    display_options.lang = "ja"
    display_options.max_table_cells = 0  # force the heatmap
    result = scaled_dot_product_attention(*(torch.randn(2, 3, 4, 8) for _ in range(3)), return_weights=True)
    (png,) = _embedded_pngs(result._repr_html_())
    titles = [t for t in _png_labels(png) if t.startswith(("ヘッド", "第"))]
    assert titles == ["ヘッド1", "ヘッド2", "ヘッド3"]  # counted from 1, as the lesson counts
    html = MultiHeadAttention(8, 2)(torch.randn(2, 10, 8), need_weights=True)._repr_html_()
    assert "バッチの最初の例" in html and "first batch item" not in html
    assert "ヘッド1" in _png_labels(_embedded_pngs(html)[0])


def test_many_heads_wrap_into_rows_no_wider_than_a_screen():
    plot = plot_attention_grid(_weights(1, 12, 13, 13), [f"t{i}" for i in range(13)], [f"t{i}" for i in range(13)])
    width, height = plot.figure.get_size_inches()
    assert width <= 12.0 and height > width / 2  # several rows of heads, not one strip
    png = plot.png()
    assert Image.open(io.BytesIO(png)).size[0] <= 1200
    visible = [ax for ax in plot.figure.axes if ax.get_visible() and ax.get_title()]
    assert [ax.get_title() for ax in visible] == [f"layer 1, head {h}" for h in range(1, 13)]
    with pytest.raises(ValueError, match="columns"):
        plot_attention_grid(_weights(1, 2, 3, 3), columns=0)


def test_attention_maps_summary_and_answer_speak_the_display_language():
    maps = AttentionMaps([_weights(1, 2, 5, 5), _weights(1, 2, 5, 5)])
    display_options.lang = "ja"
    assert "2 層 × (1, 2, 5, 5) — バッチの 0 番目の例" in maps._repr_html_()
    display_options.max_panels = 2
    assert "2 層のうち 1 層は省略" in maps._repr_html_()
    summary = Summary("doc", "a b", ["a", "b", "c"], ["a", "b", "[EOS]"], [0.2, 0.4, 0.9], _weights(3, 3))
    html = summary._repr_html_()
    assert "a (コピー 0.80)" in html and "copy" not in html and "文書への注意の重み" in html
    assert "a (copy 0.80)" in summary.html(lang="en")
    answer = Answer(
        "who?", "zorvak won", "zorvak", 0, 6, 3.5, ["who", "?"], ["zorvak", "won"], torch.full((1, 2, 2, 2), 0.25)
    )
    html = answer._repr_html_()
    assert "スコア 3.50" in html and "50%" in html and "question" not in html
    with pytest.raises(ValueError, match="lang"):
        summary.html(lang="fr")


def test_a_long_source_narrows_the_cells_instead_of_widening_past_a_screen():
    plot = plot_attention(_weights(14, 60), [f"t{i}" for i in range(60)], [f"q{i}" for i in range(14)])
    assert plot.figure.get_size_inches()[0] <= 12.0
    assert Image.open(io.BytesIO(plot.png())).size[0] <= 1200
