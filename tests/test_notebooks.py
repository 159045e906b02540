"""The notebooks: their sources are plain Python with exercises (always checked), and — marked
``notebooks``, run by ``make test-notebooks`` and in CI, not by ``make test`` — each one executed
top to bottom in a Jupyter kernel, in order (05 trains the translator stand-in 08 reuses).

The executed notebooks are written to ``build/notebooks/`` with the time each took.
"""

from __future__ import annotations

import importlib.util
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
    assert re.search(r"^check\(", text, re.M), "the exercises are checked with helpers.check"
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


def _shows_an_image(output: dict) -> bool:
    """An output holding a PNG or SVG, or HTML with an embedded PNG (the attention reprs)."""
    data = output.get("data", {})
    return bool({"image/png", "image/svg+xml"} & set(data)) or "data:image/png" in "".join(data.get("text/html", ""))
