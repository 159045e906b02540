"""The notebooks: their sources are plain Python with exercises (always checked), and — marked
``notebooks``, run by ``make test-notebooks`` and in CI, not by ``make test`` — each one executed
top to bottom in a Jupyter kernel, in order (05 trains the translator stand-in 08 reuses).

The executed notebooks are written to ``build/notebooks/`` with the time each took.
"""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import re
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
OUT = REPO / "build" / "notebooks"

_spec = importlib.util.spec_from_file_location("notebook_build", NOTEBOOKS / "build.py")
build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build)

SOURCES = build.notebook_sources()


def test_there_are_eight_notebooks_one_per_part():
    assert [p.name[:2] for p in SOURCES] == [f"{i:02d}" for i in range(1, 9)]


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_each_source_is_python_with_japanese_english_and_exercises(source):
    text = source.read_text(encoding="utf-8")
    compile(text, str(source), "exec")  # no shell escapes or magics: the file runs as a script too
    assert text.startswith("# ---\n# jupyter:\n") and "format_name: percent" in text
    assert "練習問題" in text and "Exercises" in text
    assert re.search(r"^\w+ = check\(", text, re.M), "the exercises are checked with helpers.check, its function kept"
    assert re.search(r"[\u3040-\u30ff]", text), "Japanese text"
    markdown = re.findall(r"# %% \[markdown\]\n((?:#.*\n)+)", text)
    assert markdown and all(re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", m) for m in markdown), (
        "every text cell has Japanese"
    )


@pytest.mark.notebooks
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(source):
    pytest.importorskip("jupytext")
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    start = time.perf_counter()
    path, seconds = build.build(source, execute=True, timeout=600, out_dir=OUT)
    timings = OUT / "timings.json"
    record = json.loads(timings.read_text()) if timings.is_file() else {}
    record[source.stem] = round(time.perf_counter() - start, 1)
    timings.write_text(json.dumps(record, indent=2) + "\n")
    nb = json.loads(path.read_text(encoding="utf-8"))
    outputs = [o for cell in nb["cells"] if cell["cell_type"] == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any(_shows_an_image(o) for o in outputs), "a notebook shows at least one figure inline"
    _assert_every_figure_is_followed_by_text(nb)
    _assert_no_english_only_captions(outputs)
    _assert_no_english_only_printed_lines(nb)
    _assert_layers_and_heads_counted_from_one(outputs)


# --------------------------------------------------------------------------------------------
# What the executed outputs say
# --------------------------------------------------------------------------------------------

JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
#: Latin words a Japanese caption may carry on their own: model and token names.
ALLOWED_WORDS = {"MiniLM", "BERT", "GPT", "Transformer", "PAD", "EOS", "BOS", "CLS", "SEP", "MASK"}


def english_only(text: str) -> bool:
    """Whether ``text`` (a title, axis label, legend entry, table header or caption) is English
    with no Japanese: it has no kana or kanji and has a Latin word of three or more letters that
    is neither a code identifier (with ``_ . ( ) [ ] = :`` or digits in it, or in backticks) nor an
    allowed model or token name."""
    if JAPANESE.search(text):
        return False
    text = re.sub(r"`[^`]*`", " ", text)
    words = [w for w in re.split(r"[\s,;/]+", text) if w and not re.search(r"[_.()\[\]=:0-9]", w)]
    return any(re.fullmatch(r"[A-Za-z][A-Za-z'-]{2,}", w) and w not in ALLOWED_WORDS for w in words)


def printed_line_is_english_only(line: str) -> bool:
    """Whether a line the notebook printed is English prose with no Japanese: :func:`english_only`
    once the quoted parts are taken out. What a notebook prints in quotes (``repr`` of a token, a
    sentence, a list or dict of them) is data, not its words; the rest is what it says."""
    return english_only(re.sub(r"'[^'\n]*'|\"[^\"\n]*\"", " ", line))


def test_printed_line_is_english_only_leaves_data_in_quotes_alone():
    assert printed_line_is_english_only("shipped model 'ja-en'")
    assert printed_line_is_english_only("a pointer-generator trained 25 s on the generated facts task")
    assert printed_line_is_english_only("Tensor-likes are not close!")
    assert not printed_line_is_english_only("同梱モデル 'ja-en'")
    assert not printed_line_is_english_only("['[CLS]', 'the', 'cat', 'sat', '[SEP]']")
    assert not printed_line_is_english_only("[('pt', '23 de dezembro de 1909'), ('en', 'Mar 17, 1913')]")
    assert not printed_line_is_english_only("Counter({'en': 1742, 'de': 707})")
    assert not printed_line_is_english_only("'ROMEO:\\nI have so the shall '")
    assert not printed_line_is_english_only("'three[MASK] forty-two thousand' の [MASK] の候補: '▁hundred' 0.46")
    assert not printed_line_is_english_only("T =   512: 全体   7.99 ms") and not printed_line_is_english_only("")


def _assert_no_english_only_printed_lines(nb: dict) -> None:
    """Every line a code cell printed to stdout says something in Japanese or is data (numbers,
    identifiers, quoted tokens and sentences). The collapsed model-solution cells (tagged
    ``solution``) print source code and are left alone, as is stderr (libraries' warnings)."""
    for cell in nb["cells"]:
        if cell["cell_type"] != "code" or "solution" in cell.get("metadata", {}).get("tags", []):
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") != "stream" or output.get("name") != "stdout":
                continue
            bad = [line for line in "".join(output.get("text", "")).splitlines() if printed_line_is_english_only(line)]
            assert not bad, f"English-only printed lines in a Japanese notebook: {bad}"


def test_english_only_tells_a_caption_from_identifiers_and_tokens():
    assert english_only("cross-attention, layer 1 of 0–1, mean over heads")
    assert english_only("the first batch item") and english_only("dense")
    assert not english_only("第0層・ヘッド2") and not english_only("d_k") and not english_only("q·k/√d_k")
    assert not english_only("[MASK]") and not english_only("ソース・ターゲット注意 第1層: I drink coffee")
    assert not english_only("attentions['cross']") and not english_only("GPT")


def _pngs(output: dict) -> list[bytes]:
    data = output.get("data", {})
    found = [base64.b64decode(data["image/png"])] if "image/png" in data else []
    html = "".join(data.get("text/html", ""))
    return found + [base64.b64decode(m) for m in re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", html)]


#: A layer or head numbered 0 in what a reader sees: the lesson and the explorer count from 1.
COUNTED_FROM_ZERO = re.compile(r"第\s*0\s*層|ヘッド\s*0(?![.0-9])|\blayer 0\b|\bhead 0\b")


def _assert_layers_and_heads_counted_from_one(outputs: list[dict]) -> None:
    """Printed lines, HTML displays and figure labels number layers and heads from 1, as the lesson
    does (``weights[0]`` is 第1層), so a student moving between the two reads the same numbers."""
    from PIL import Image

    from attnlab.viz import PNG_LABELS_KEY

    for output in outputs:
        texts = ["".join(output.get("text", "")), "".join(output.get("data", {}).get("text/plain", ""))]
        texts.append("".join(output.get("data", {}).get("text/html", "")))
        texts += [Image.open(io.BytesIO(png)).text.get(PNG_LABELS_KEY, "") for png in _pngs(output)]
        for text in texts:
            found = COUNTED_FROM_ZERO.search(text)
            assert not found, f"a layer or head counted from 0 ({found.group()!r}): the lesson counts from 1"


def test_counted_from_zero_finds_layer_and_head_zero_only():
    assert COUNTED_FROM_ZERO.search("第0層・ヘッド2") and COUNTED_FROM_ZERO.search("ヘッド0")
    assert COUNTED_FROM_ZERO.search('["layer 0, head 3"]')
    assert not COUNTED_FROM_ZERO.search("第10層・ヘッド10") and not COUNTED_FROM_ZERO.search("ヘッド 0.25")


def _assert_no_english_only_captions(outputs: list[dict]) -> None:
    """Every figure records its titles, axis labels and legend entries (attnlab.viz writes them
    into the PNG), and none of those, nor a table header or a caption line of an HTML display, is
    English only. Token labels (ticks, weight-table headers) and model output (bold or token spans)
    are the data, not captions, and are left alone."""
    from PIL import Image

    from attnlab.viz import PNG_LABELS_KEY

    for output in outputs:
        for png in _pngs(output):
            labels = Image.open(io.BytesIO(png)).text.get(PNG_LABELS_KEY)
            assert labels is not None, (
                "draw figures with attnlab.viz (or wrap them in viz.Plot) so their labels are checked"
            )
            bad = [t for t in json.loads(labels) if english_only(t)]
            assert not bad, f"English-only figure labels in a Japanese notebook: {bad}"
        html = "".join(output.get("data", {}).get("text/html", ""))
        for table in re.findall(r"<table.*?</table>", html, flags=re.S):
            headers = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th[^>]*>(.*?)</th>", table, flags=re.S)]
            if headers and headers[0] == "":
                continue  # a weights table: its headers are the tokens
            bad = [h for h in headers if english_only(h)]
            assert not bad, f"English-only table headers in a Japanese notebook: {bad}"
        for caption in re.findall(r"<div>(.*?)</div>", html, flags=re.S):
            if re.search(r"<(b|span|img|table)\b", caption):
                continue  # the model's own text, its tokens, or the figure itself
            text = re.sub(r"<[^>]+>", " ", caption)
            assert not english_only(text), f"an English-only caption in a Japanese notebook: {text!r}"


def _assert_every_figure_is_followed_by_text(nb: dict) -> None:
    """A code cell that shows a figure is followed by a text cell (what to see in it)."""
    cells = nb["cells"]
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "code" and any(_pngs(o) for o in cell.get("outputs", [])):
            assert i + 1 < len(cells) and cells[i + 1]["cell_type"] == "markdown", (
                f"the figure of cell {i} ({''.join(cell['source'])[:60]!r}) needs a sentence after it"
            )


def _shows_an_image(output: dict) -> bool:
    """An output holding a PNG or SVG, or HTML with an embedded PNG (the attention reprs)."""
    data = output.get("data", {})
    return bool({"image/png", "image/svg+xml"} & set(data)) or "data:image/png" in "".join(data.get("text/html", ""))
