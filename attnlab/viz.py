"""Attention heatmaps (matplotlib) from ``(B, H, T, S)`` weight tensors and token lists."""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path


@functools.cache
def cjk_font_path() -> Path:
    """The Japanese-capable font (IPAexGothic) shipped by the ``matplotlib-fontja`` dependency."""
    path = Path(str(resources.files("matplotlib_fontja") / "fonts" / "ipaexg.ttf"))
    if not path.is_file():
        raise FileNotFoundError(f"CJK font not found at {path}; reinstall matplotlib-fontja")
    return path


@functools.cache
def use_cjk_font() -> str:
    """Register the CJK font with matplotlib and put it after DejaVu Sans in the fallback list.

    Matplotlib (≥ 3.6) falls back glyph by glyph along ``font.family``, so Latin text keeps its
    usual face and Japanese text renders instead of showing empty boxes.
    """
    from matplotlib import font_manager, rcParams

    font_manager.fontManager.addfont(str(cjk_font_path()))
    name = font_manager.FontProperties(fname=str(cjk_font_path())).get_name()
    rcParams["font.family"] = ["DejaVu Sans", name]
    return name
