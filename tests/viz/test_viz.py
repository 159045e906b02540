"""Figures: valid PNG/SVG files by suffix, Japanese labels without missing-glyph warnings, input
checks, and no leaked pyplot state."""

from __future__ import annotations

import struct
import warnings

import matplotlib
import pytest
import torch

from attnlab.functional import causal_mask
from attnlab.viz import (
    LABELS,
    figure_labels,
    plot_attention,
    plot_attention_grid,
    plot_bars,
    plot_curves,
    plot_mask,
    use_cjk_font,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SRC_JA = ["三", "十", "四", "万", "二", "千", "</s>"]
TGT_EN = ["three", "hundred", "forty", "-", "two", "thousand"]


def _weights(*shape: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.softmax(torch.randn(*shape, generator=g), dim=-1)


def _png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    return struct.unpack(">II", data[16:24])  # IHDR width, height


def _assert_image(path, suffix: str) -> None:
    data = path.read_bytes()
    if suffix == ".png":
        assert data[:8] == PNG_SIGNATURE
    else:
        assert data.lstrip().startswith(b"<?xml") and b"<svg" in data[:2000]
        assert data.rstrip().endswith(b"</svg>")


def _all_plots(tmp_path, suffix: str) -> list:
    """Call every plot function once with Japanese text somewhere in it."""
    return [
        plot_attention(_weights(6, 7), SRC_JA, TGT_EN, tmp_path / f"one{suffix}", title="交差注意"),
        plot_attention_grid(_weights(2, 3, 6, 7), SRC_JA, TGT_EN, tmp_path / f"grid{suffix}", title="層×ヘッド"),
        plot_mask(causal_mask(7, 7), tmp_path / f"mask{suffix}", tokens=SRC_JA, title="因果マスク"),
        plot_curves(
            {"学習": ([1, 2, 3], [3.0, 2.0, 1.5]), "検証": ([1, 2, 3], [3.2, None, 1.9])},
            tmp_path / f"curves{suffix}",
            xlabel="エポック",
            ylabel="損失",
            logy=True,
        ),
        plot_bars(
            {"math": {"短い": 1.0, "長い": 2.0}, "sdpa": {"短い": 3.0, "長い": 5.0}},
            tmp_path / f"bars{suffix}",
            ylabel="トークン/秒",
        ),
    ]


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_every_plot_writes_a_valid_file_without_glyph_warnings(tmp_path, suffix):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a "Glyph ... missing from font(s)" warning fails here
        paths = _all_plots(tmp_path, suffix)
    assert len(paths) == 5
    for path in paths:
        assert path.is_file()
        _assert_image(path, suffix)


def test_glyph_check_would_catch_a_missing_font(tmp_path):
    """The warning test above is meaningful: without the CJK fallback, Japanese does warn."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"font.family": ["DejaVu Sans"]}):
        fig = Figure()
        FigureCanvasAgg(fig)
        fig.text(0.5, 0.5, "三十四万")
        with pytest.warns(UserWarning, match="missing from font"):
            fig.savefig(tmp_path / "boxes.png")


def test_svg_uses_the_cjk_font_for_japanese(tmp_path):
    path = plot_attention(_weights(6, 7), SRC_JA, TGT_EN, tmp_path / "a.svg")
    font = use_cjk_font()
    assert f'id="{font}-'.encode() in path.read_bytes()  # glyph outlines taken from IPAexGothic


def test_suffix_decides_the_format_and_others_are_rejected(tmp_path):
    for name in ("a.PNG", "b.Svg"):
        _assert_image(
            plot_attention(_weights(2, 3), list("abc"), list("xy"), tmp_path / name),
            ".png" if name.lower().endswith("png") else ".svg",
        )
    for bad in ("a.pdf", "a.jpg", "noext"):
        with pytest.raises(ValueError, match=r"\.png or \.svg"):
            plot_attention(_weights(2, 3), list("abc"), list("xy"), tmp_path / bad)
        assert not (tmp_path / bad).exists()


def test_parent_directories_are_created(tmp_path):
    path = tmp_path / "deep" / "er" / "heat.png"
    assert plot_attention(_weights(2, 3), list("abc"), list("xy"), path) == path
    assert path.is_file()


def test_heatmap_grows_with_the_number_of_tokens(tmp_path):
    small = _png_size(plot_attention(_weights(4, 4), list("abcd"), list("wxyz"), tmp_path / "s.png"))
    wide = _png_size(plot_attention(_weights(4, 40), [f"t{i}" for i in range(40)], list("wxyz"), tmp_path / "w.png"))
    assert wide[0] > small[0] * 1.5


def test_grid_accepts_a_list_of_layers(tmp_path):
    layers = [_weights(4, 3, 5) for _ in range(2)]  # two layers of (H, T, S)
    path = plot_attention_grid(layers, list("abcde"), list("xyz"), tmp_path / "g.png")
    _assert_image(path, ".png")
    with pytest.raises(ValueError, match="same"):
        plot_attention_grid([_weights(4, 3, 5), _weights(2, 3, 5)], list("abcde"), list("xyz"), tmp_path / "bad.png")


def test_tokens_with_dollar_signs_are_plain_text(tmp_path):
    # "$x$" would be parsed as mathtext (and "$5 $" could fail) if labels were not plain text.
    path = plot_attention(_weights(2, 3), ["$x$", "$5", "a_b^c"], ["$", "{}"], tmp_path / "d.png")
    _assert_image(path, ".png")


def test_input_errors(tmp_path):
    out = tmp_path / "x.png"
    with pytest.raises(ValueError, match=r"shape \(T, S\)"):
        plot_attention(_weights(2, 3, 4), list("abcd"), list("xyz"), out)
    with pytest.raises(ValueError, match="src_tokens has 2 tokens"):
        plot_attention(_weights(3, 4), list("ab"), list("xyz"), out)
    with pytest.raises(ValueError, match="tgt_tokens has 1 tokens"):
        plot_attention(_weights(3, 4), list("abcd"), ["x"], out)
    with pytest.raises(TypeError, match="not one string"):
        plot_attention(_weights(3, 4), "abcd", list("xyz"), out)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        plot_attention(torch.randn(3, 4) * 5, list("abcd"), list("xyz"), out)
    with pytest.raises(ValueError, match="NaN"):
        plot_attention(torch.full((3, 4), float("nan")), list("abcd"), list("xyz"), out)
    with pytest.raises(ValueError, match=r"\(L, H, T, S\)"):
        plot_attention_grid(_weights(3, 4), list("abcd"), list("xyz"), out)
    with pytest.raises(TypeError, match="boolean"):
        plot_mask(torch.ones(3, 3), out)
    with pytest.raises(ValueError, match="square"):
        plot_mask(causal_mask(2, 3), out, tokens=list("abc"))
    with pytest.raises(ValueError, match="log y-axis"):
        plot_curves({"a": ([1, 2], [1.0, 0.0])}, out, xlabel="x", ylabel="y", logy=True)
    with pytest.raises(ValueError, match="2 x values but 3 y values"):
        plot_curves({"a": ([1, 2], [1, 2, 3])}, out, xlabel="x", ylabel="y")
    with pytest.raises(ValueError, match="finite number"):
        plot_bars({"a": {"x": float("inf")}}, out, ylabel="y")
    assert not out.exists()


def test_mask_accepts_leading_singleton_dims(tmp_path):
    path = plot_mask(causal_mask(4, 6)[None, None], tmp_path / "m.svg")
    _assert_image(path, ".svg")


def test_no_pyplot_figures_leak_and_backend_is_untouched(tmp_path):
    import matplotlib.pyplot as plt

    backend, figures = matplotlib.get_backend(), plt.get_fignums()
    _all_plots(tmp_path, ".png")
    assert plt.get_fignums() == figures
    assert matplotlib.get_backend() == backend


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_figure_labels_follow_the_language(tmp_path, lang):
    """The SVG keeps each label's text in a comment next to its outlines: the chosen language's
    labels are there and the other language's are not."""
    other = "ja" if lang == "en" else "en"
    figures = {
        "attention": plot_attention(_weights(6, 7), SRC_JA, TGT_EN, tmp_path / "a.svg", lang=lang),
        "grid": plot_attention_grid(_weights(1, 2, 6, 7), SRC_JA, TGT_EN, tmp_path / "g.svg", lang=lang),
        "mask": plot_mask(causal_mask(7, 7), tmp_path / "m.svg", tokens=SRC_JA, lang=lang),
    }
    keys = {
        "attention": ("source", "target", "weight"),
        "grid": ("weight",),
        "mask": ("key_position", "query_position", "allowed", "masked"),
    }
    for name, path in figures.items():
        svg = path.read_text(encoding="utf-8")
        for key in keys[name]:
            assert f"<!-- {LABELS[lang][key]} -->" in svg, (name, key)
            assert f"<!-- {LABELS[other][key]} -->" not in svg, (name, key)
    grid = figures["grid"].read_text(encoding="utf-8")
    assert f"<!-- {LABELS[lang]['panel'].format(layer=1, head=2)} -->" in grid


def test_plot_attention_axis_labels_can_say_what_rows_and_columns_are():
    """Self-attention has no source and target, and a map's rows may be sentences or heads: the
    labels given replace the default ones, and the PNG's labels record (what the notebooks'
    tests read) holds them."""
    import io
    import json

    from PIL import Image

    from attnlab.viz import PNG_LABELS_KEY

    def labels(plot) -> list[str]:
        return json.loads(Image.open(io.BytesIO(plot.png())).text[PNG_LABELS_KEY])

    default = labels(plot_attention(_weights(2, 7), SRC_JA, ["a", "b"], lang="ja"))
    assert LABELS["ja"]["source"] in default and LABELS["ja"]["target"] in default
    given = labels(
        plot_attention(
            _weights(2, 7),
            SRC_JA,
            ["ヘッド1", "ヘッド2"],
            lang="ja",
            row_label="ヘッド",
            column_label="キー（見られる側）",
        )
    )
    assert "ヘッド" in given and "キー（見られる側）" in given and LABELS["ja"]["weight"] in given
    assert LABELS["ja"]["source"] not in given and LABELS["ja"]["target"] not in given
    rows_only = labels(plot_attention(_weights(2, 7), lang="en", row_label="sentence"))
    assert "sentence" in rows_only and LABELS["en"]["source"] in rows_only  # the other default stays


def test_an_unknown_figure_language_is_refused_before_drawing(tmp_path):
    with pytest.raises(ValueError, match=r"lang must be one of \['en', 'ja'\], got 'fr'"):
        plot_attention(_weights(2, 3), list("abc"), list("xy"), tmp_path / "a.png", lang="fr")
    assert not (tmp_path / "a.png").exists()


def test_a_heatmap_scale_can_follow_its_largest_weight_and_grids_name_their_axes():
    """``vmax=None`` tops the colour scale at the map's largest weight (small weights spread over
    many keys are otherwise uniformly dark); the default stays the fixed [0, 1]; a grid names
    its rows' and columns' axes once, in the given words or the default query/key ones."""
    weights = torch.full((2, 5), 0.2)
    weights[0, 1] = 0.06
    fixed = plot_attention(weights, list("abcde"), ["x", "y"]).figure.axes[0].images[0]
    scaled = plot_attention(weights, list("abcde"), ["x", "y"], vmax=None).figure.axes[0].images[0]
    assert fixed.get_clim() == (0.0, 1.0) and scaled.get_clim() == (0.0, pytest.approx(0.2))
    with pytest.raises(ValueError, match="vmax must be positive"):
        plot_attention(weights, vmax=0)
    maps = torch.full((1, 2, 3, 3), 0.1)
    maps[0, 1, 2, 0] = 0.3
    grid = plot_attention_grid(maps, lang="ja", vmax=None, row_label="クエリ", column_label="キー")
    assert {"クエリ", "キー"} <= set(figure_labels(grid.figure))
    assert {round(im.get_clim()[1], 6) for ax in grid.figure.axes for im in ax.images} == {0.3}
    default = figure_labels(plot_attention_grid(_weights(1, 2, 3, 3), lang="ja").figure)
    assert LABELS["ja"]["source"] in default and LABELS["ja"]["target"] in default


def test_japanese_column_labels_stand_upright_and_latin_ones_turn():
    """Japanese is not read on its side: a column label with kana or kanji is upright, its
    characters one under the other; Latin tokens keep the 90° turn that fits long ones, and
    labels of one or two characters (positions) stand upright."""
    plot = plot_attention(_weights(1, 5), ["猫", "ソース", "cat", "[PAD]", "12"], ["x"])
    ticks = plot.figure.axes[0].get_xticklabels()
    assert [t.get_rotation() for t in ticks] == [0, 0, 90, 90, 0]
    assert [t.get_text() for t in ticks] == ["猫", "ソ\nー\nス", "cat", "[PAD]", "12"]
