"""Inline display in Jupyter: the ``_repr_png_`` / ``_repr_svg_`` / ``_repr_html_`` methods return
real images and HTML holding the numbers, the plot functions hand back a :class:`Plot` without a
path, and model outputs keep their attention maps in lists that draw themselves."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
import torch

from attnlab import MultiHeadAttention, scaled_dot_product_attention
from attnlab.experiments.demo import DemoReport
from attnlab.experiments.variants import VariantResult, VariantsReport
from attnlab.explain import compute_steps, plot_steps
from attnlab.inference.classify import Prediction
from attnlab.inference.qa import Answer
from attnlab.inference.summarize import Summary
from attnlab.inference.translate import Translation
from attnlab.models.gpt import GPT, gpt_config
from attnlab.models.transformer import PRESETS, Transformer, TransformerConfig
from attnlab.viz import (
    AttentionMaps,
    Plot,
    attention_html,
    display_options,
    plot_attention,
    plot_attention_grid,
    plot_bars,
    plot_curves,
    plot_mask,
    weights_table_html,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _restore_display_options():
    saved = {
        name: getattr(display_options, name) for name in ("lang", "format", "dpi", "max_table_cells", "max_panels")
    }
    yield
    for name, value in saved.items():
        setattr(display_options, name, value)


def _weights(*shape: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.softmax(torch.randn(*shape, generator=g), dim=-1)


def _embedded_pngs(html: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([^"]+)"', html)]


def _numbers(html: str) -> list[float]:
    return [float(x) for x in re.findall(r">(\d\.\d{3})</td>", html)]


def test_plot_without_a_path_is_a_plot_that_renders_png_and_svg(tmp_path):
    plot = plot_attention(_weights(3, 4), list("abcd"), list("xyz"), title="$x$ 交差注意")
    assert isinstance(plot, Plot)
    png = plot._repr_png_()
    assert png[:8] == PNG_SIGNATURE and len(png) > 1000
    assert plot._repr_svg_() is None  # only the chosen format is rendered
    display_options.format = "svg"
    svg = plot._repr_svg_()
    assert plot._repr_png_() is None
    assert svg.lstrip().startswith("<?xml") and svg.rstrip().endswith("</svg>")
    assert plot.save(tmp_path / "a.png").read_bytes()[:8] == PNG_SIGNATURE
    assert "Plot" in repr(plot)


def test_every_plot_function_returns_a_plot_without_a_path():
    plots = [
        plot_attention(_weights(3, 4)),  # tokens default to positions
        plot_attention_grid(_weights(2, 2, 3, 4)),
        plot_mask(torch.ones(3, 3, dtype=torch.bool).tril()),
        plot_curves({"a": ([1, 2], [1.0, 0.5])}, xlabel="x", ylabel="y"),
        plot_bars({"a": {"x": 1.0}}, ylabel="y"),
        plot_steps(compute_steps()),
    ]
    for plot in plots:
        assert isinstance(plot, Plot) and plot.png()[:8] == PNG_SIGNATURE


def test_labels_follow_the_display_language_and_the_lang_argument():
    ax = plot_attention(_weights(2, 2)).figure.axes[0]
    assert ax.get_xlabel() == "source (key)"
    display_options.lang = "ja"
    ax = plot_attention(_weights(2, 2)).figure.axes[0]
    assert ax.get_xlabel() == "ソース（キー）" and ax.get_ylabel() == "ターゲット（クエリ）"
    assert plot_attention(_weights(2, 2), lang="en").figure.axes[0].get_xlabel() == "source (key)"
    grid = plot_attention_grid(_weights(2, 1, 2, 2), layer_names=[4, 5]).figure
    assert grid.axes[1].get_title() == "第6層・ヘッド1"  # index 5 is the sixth layer
    with pytest.raises(ValueError, match="lang"):
        plot_attention(_weights(2, 2), lang="fr")


def test_display_options_are_checked():
    with pytest.raises(ValueError, match="lang"):
        display_options.lang = "de"
    with pytest.raises(ValueError, match="format"):
        display_options.format = "jpg"
    with pytest.raises(AttributeError, match="display options"):
        display_options.colour = "red"


def test_a_small_map_shows_its_numbers_and_escaped_tokens():
    w = torch.tensor([[0.25, 0.75], [1.0, 0.0]])
    html = weights_table_html(w, ["<s>", "猫"], ["a&b", "x"])
    assert _numbers(html) == [0.25, 0.75, 1.0, 0.0]
    assert "&lt;s&gt;" in html and "a&amp;b" in html and "猫" in html
    assert "<img" not in attention_html(w)


def test_a_large_map_or_many_heads_become_a_heatmap_with_a_limit_on_panels():
    html = attention_html(_weights(12, 12))
    (png,) = _embedded_pngs(html)
    assert png[:8] == PNG_SIGNATURE
    display_options.max_panels = 4
    html = attention_html(_weights(6, 2, 3, 3))  # 6 layers × 2 heads: the last 2 layers shown
    assert "4 of 6 layers left out" in html and len(_embedded_pngs(html)) == 1
    display_options.max_table_cells = 0
    assert "<table" not in attention_html(_weights(2, 2))


def test_attention_result_and_attention_output_show_shapes_and_weights():
    q, k, v = torch.randn(1, 2, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 4)
    result = scaled_dot_product_attention(q, k, v, return_weights=True)
    html = result._repr_html_()
    assert "AttentionResult" in html and "(1, 2, 4)" in html
    assert _numbers(html) == pytest.approx(result.weights[0].flatten().tolist(), abs=5e-4)
    assert "weights None" in scaled_dot_product_attention(q, k, v)._repr_html_()
    out = MultiHeadAttention(8, 2)(torch.randn(2, 10, 8), need_weights=True)
    html = out._repr_html_()
    assert "AttentionOutput" in html and "(2, 2, 10, 10)" in html and _embedded_pngs(html)


def test_model_outputs_keep_attention_lists_that_draw_themselves():
    torch.manual_seed(0)
    gpt = GPT(gpt_config("tiny", vocab_size=11)).eval()
    out = gpt(torch.randint(0, 11, (2, 5)), need_weights=True)
    assert isinstance(out.attentions, AttentionMaps) and isinstance(out.attentions, list)
    assert out.attentions == list(out.attentions)  # still an ordinary list to everything else
    (png,) = _embedded_pngs(out.attentions._repr_html_())
    assert png[:8] == PNG_SIGNATURE
    html = out._repr_html_()
    assert "LMOutput" in html and "logits (2, 5, 11)" in html and "2 × (2, 2, 5, 5)" in html
    assert gpt(torch.randint(0, 11, (1, 3))).attentions is None

    config = TransformerConfig(src_vocab_size=9, tgt_vocab_size=9, **PRESETS["tiny"])
    seq = Transformer(config).eval()(torch.randint(1, 9, (1, 4)), torch.randint(1, 9, (1, 3)), need_weights=True)
    assert all(isinstance(v, AttentionMaps) for v in seq.attentions.values())
    assert "attentions['cross']" in seq._repr_html_()


def test_explain_steps_show_the_walk_through_numbers():
    steps = compute_steps([8.0, 4.0, 2.0], d_k=64)
    html = steps._repr_html_()
    for w in steps.weights.tolist():
        assert f"{w:.4f}" in html
    assert "8.0000" in html and "1.0000" in html  # raw 8, scaled 8/√64 = 1
    display_options.lang = "ja"
    assert "本1" in steps._repr_html_()


def test_results_and_reports_show_their_text_and_attention(tmp_path):
    cross = _weights(2, 2, 3, 4)  # (L, H, T, S)
    tr = Translation("three hundred", "三百", ["▁three", "▁hundred", "x", "y"], ["三", "百", "</s>"], cross)
    html = tr._repr_html_()
    assert "三百" in html and "▁hundred" in html
    assert _numbers(html) == pytest.approx(cross[-1].mean(0).flatten().tolist(), abs=5e-4)
    assert "return_attention" in Translation("a", "b", ["a"], ["b"])._repr_html_()

    pred = Prediction("Ein Hund", "de", {"de": 0.9, "en": 0.1}, ["▁Ein", "▁Hund"], [0.7, 0.3])
    html = pred._repr_html_()
    assert "<b>de</b>" in html and "0.70" in html and "▁Hund" in html

    summary = Summary("doc", "a b", ["a", "b", "c"], ["a", "b", "[EOS]"], [0.2, 0.4, 0.9], _weights(3, 3))
    html = summary._repr_html_()
    assert "a (copy 0.80)" in html and len(_numbers(html)) == 9

    half = torch.full((1, 2, 2, 2), 0.25)  # half of each row reaches the passage: shown renormalised
    answer = Answer("who?", "zorvak won", "zorvak", 0, 6, 3.5, ["who", "?"], ["zorvak", "won"], half)
    html = answer._repr_html_()
    assert "zorvak" in html and _numbers(html) == [0.5] * 4 and "50%" in html

    plot_attention(_weights(2, 2), path=tmp_path / "cross_attention_0.png")
    demo = DemoReport(tmp_path, 0.998, 99.9, 2.0, 15000.0, 909, [("seven", "七")], [tmp_path / "cross_attention_0.png"])
    html = demo._repr_html_()
    assert "99.8%" in html and "七" in html and _embedded_pngs(html)[0][:8] == PNG_SIGNATURE

    rows = [
        VariantResult("full", "full", 100, 2.0, 2.1, 1000.0, 10.0, 5, 50.0),
        VariantResult("sliding_window:16", "sw", 100, 2.25, 2.3, 1500.0, 10.0, 7, 40.0),
    ]
    html = VariantsReport(Path(tmp_path), rows, 30.0)._repr_html_()
    assert "+0.250" in html and "1.50×" in html and "sliding_window:16" in html


def test_an_attention_calls_heads_are_drawn_on_query_and_key_axes():
    """One attention call may be self- or source–target attention: its grid names its axes the
    query and key positions, never target and source."""
    import io
    import json

    from PIL import Image

    from attnlab.viz import LABELS, PNG_LABELS_KEY

    display_options.lang = "ja"
    try:
        out = MultiHeadAttention(8, 2)(torch.randn(1, 10, 8), need_weights=True)
        (png,) = _embedded_pngs(out._repr_html_())
    finally:
        display_options.lang = "en"
    labels = json.loads(Image.open(io.BytesIO(png)).text[PNG_LABELS_KEY])
    assert LABELS["ja"]["query_position"] in labels and LABELS["ja"]["key_position"] in labels
    assert LABELS["ja"]["source"] not in labels and LABELS["ja"]["target"] not in labels
