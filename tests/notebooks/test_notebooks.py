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
import os
import re
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
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


def _execute_and_read(source: Path, name: str, **options) -> dict:
    """Execute ``source`` (with ``build.build``'s ``edits``/``env`` options) into
    ``build/notebooks/NAME.ipynb``, record its time, check what every executed notebook must
    show, and return the notebook.

    The kernel computes on one thread (``OMP_NUM_THREADS=1`` unless the environment sets it): on a
    machine shared with other work, PyTorch's threads wait on each other and a training step can
    take many times longer on two threads than on one (notebooks/README.md gives the figures)."""
    pytest.importorskip("jupytext")
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    start = time.perf_counter()
    options["env"] = {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")} | options.get("env", {})
    path, seconds = build.build(source, execute=True, timeout=600, out_dir=OUT, name=name, **options)
    timings = OUT / "timings.json"
    record = json.loads(timings.read_text()) if timings.is_file() else {}
    record[name] = round(time.perf_counter() - start, 1)
    timings.write_text(json.dumps(record, indent=2) + "\n")
    nb = json.loads(path.read_text(encoding="utf-8"))
    outputs = [o for cell in nb["cells"] if cell["cell_type"] == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any(_shows_an_image(o) for o in outputs), "a notebook shows at least one figure inline"
    _assert_every_figure_is_followed_by_text(nb)
    _assert_no_english_only_captions(outputs)
    _assert_no_english_only_printed_lines(nb)
    _assert_layers_and_heads_counted_from_one(outputs)
    _assert_no_library_warnings(outputs)
    return nb


@pytest.mark.notebooks
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(source):
    _execute_and_read(source, source.stem)


#: The notebooks that train models and assert claims about what they learned: run again with
#: their training in bf16 (``ATTNLAB_NOTEBOOK_PRECISION``, read by ``helpers.PRECISION``), so
#: every claim is checked in both precisions. 05 trains only where the translators are not shipped.
TRAINING = ("04", "06", "07", "08")


@pytest.mark.notebooks
@pytest.mark.parametrize("source", [s for s in SOURCES if s.name[:2] in TRAINING], ids=lambda p: p.stem)
def test_training_notebook_holds_its_claims_in_bf16(source):
    nb = _execute_and_read(source, f"{source.stem}-bf16", env={"ATTNLAB_NOTEBOOK_PRECISION": "bf16"})
    if source.name.startswith("07"):
        assert "学習の精度: bf16" in _printed(nb), "07 says which precision it trained in"


#: Every change a question invites a learner to make, as text edits of the source: the notebook
#: must still run to the end (its check cells check what the text says about the default choice
#: and step aside, saying so, for another). ``(notebook prefix, edits, extra environment)``.
TROPHY = "The trophy didn't fit in the suitcase because it was too big."
EXPERIMENTS = {
    # 02, question 2: another sentence, the referent left as it was ("cat" is not in it)
    "02-another-sentence": ("02", [("sentence = SENTENCE  #", f"sentence = {TROPHY!r}  #")], {}),
    # 02, question 2: the sentence with "small", and the referent changed to match
    "02-another-sentence-and-referent": (
        "02",
        [
            ("sentence = SENTENCE  #", f"sentence = {TROPHY.replace('big', 'small')!r}  #"),
            ('pronoun, referent = "it", "cat"', 'pronoun, referent = "it", "trophy"'),
        ],
        {},
    ),
    # 04, question 2: one Transformer layer under the pooling
    "04-one-layer": ("04", [("    model_overrides=dict(n_layers=0),", "    model_overrides=dict(n_layers=1),")], {}),
    # 07: the other seed the notebook's comment names, in bf16 (the claim: at least 95% reversed)
    "07-seed-1-bf16": ("07", [("SEED = 0  #", "SEED = 1  #")], {"ATTNLAB_NOTEBOOK_PRECISION": "bf16"}),
}


@pytest.mark.notebooks
@pytest.mark.parametrize("experiment", sorted(EXPERIMENTS))
def test_each_suggested_experiment_runs_to_the_end(experiment):
    prefix, edits, env = EXPERIMENTS[experiment]
    (source,) = [s for s in SOURCES if s.name.startswith(prefix)]
    nb = _execute_and_read(source, f"{source.stem}-{experiment}", edits=edits, env=env)
    printed = _printed(nb)
    if prefix == "02":
        assert "文か語を変えたので" in printed, "the check cells say they leave the default sentence's claims alone"
    if "referent" in experiment:
        assert "trophy" in printed and "は文のトークンにないので" not in printed


def test_an_edit_that_does_not_match_the_notebook_fails_loudly():
    assert build.edited("a = 1\nb = 2\n", [("a = 1", "a = 3")]) == "a = 3\nb = 2\n"
    with pytest.raises(ValueError, match="0 times"):
        build.edited("a = 1\n", [("c = 1", "c = 2")])
    for prefix, edits, _ in EXPERIMENTS.values():
        (source,) = [s for s in SOURCES if s.name.startswith(prefix)]
        build.edited(source.read_text(encoding="utf-8"), edits)  # each experiment's edits still apply


def _printed(nb: dict) -> str:
    """Everything the notebook's code cells printed to stdout."""
    return "".join(
        "".join(o.get("text", ""))
        for cell in nb["cells"]
        if cell["cell_type"] == "code"
        for o in cell.get("outputs", [])
        if o.get("output_type") == "stream" and o.get("name") == "stdout"
    )


def _assert_no_library_warnings(outputs: list[dict]) -> None:
    """No English warning lines from the library in front of the learner (stderr), such as the
    precision probe's ``attnlab: precision auto → …``: the notebooks name their precision."""
    for output in outputs:
        if output.get("output_type") == "stream" and output.get("name") == "stderr":
            text = "".join(output.get("text", ""))
            assert "attnlab:" not in text and "Warning" not in text, f"a warning in a notebook's output: {text[:200]!r}"


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


def test_the_notebooks_precision_comes_from_one_variable_and_bad_values_are_refused(monkeypatch):
    """``helpers.notebook_precision`` reads ``ATTNLAB_NOTEBOOK_PRECISION``: unset or empty is fp32,
    fp32/bf16 in any case are taken, anything else (``auto`` included: a notebook names its
    precision) is a one-line error naming the variable."""
    import sys

    monkeypatch.syspath_prepend(str(NOTEBOOKS))
    sys.modules.pop("helpers", None)
    import helpers

    for value, expected in (("", "fp32"), ("BF16", "bf16"), (" fp32 ", "fp32")):
        monkeypatch.setenv(helpers.PRECISION_VARIABLE, value)
        assert helpers.notebook_precision() == expected
    monkeypatch.delenv(helpers.PRECISION_VARIABLE)
    assert helpers.notebook_precision() == "fp32"
    for bad in ("auto", "fp16"):
        monkeypatch.setenv(helpers.PRECISION_VARIABLE, bad)
        with pytest.raises(ValueError, match="ATTNLAB_NOTEBOOK_PRECISION must be fp32 or bf16"):
            helpers.notebook_precision()
    sys.modules.pop("helpers", None)
