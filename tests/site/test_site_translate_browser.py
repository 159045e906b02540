"""§1's and §7's ja→en widgets computed in the page (issue 36): the page's own module
``static/engine/translation_views.js``, run in headless Chromium over the static folder
(:func:`attnlab.web.site.write_engine_folder`, ja-en exported as the site exports it, with its
encoder's optional outputs), gives what the Python view functions give on the PyTorch model:

- ``translation`` (:func:`~attnlab.web.lesson.s01_what_attention_does.translation_view`),
  ``shapes`` (:func:`~attnlab.web.lesson.s07_whole_transformer.shapes_view`) and ``token-walk``
  (:func:`~attnlab.web.lesson.s07_whole_transformer.token_walk_view`): texts, tokens, counts and
  shapes identical, every float within 1e-4, over the widgets' example sentences and 50 sentences
  of small_parallel_enja's test split (``ATTNLAB_DATA``) typed as a learner would;
- ``parallel-steps`` (:func:`~attnlab.web.lesson.s01_what_attention_does.steps_response` over
  the same measurements, :func:`~attnlab.web.lesson.s01_what_attention_does.parallel_steps`):
  the whole answer identical, the sentence's token count from the page's tokenizer;
- what the Python requests refuse, the page refuses in one line.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from lesson_browser import BROWSER_MARKS
from live_server import ensure_runtime, page_errors

from attnlab.web import site
from attnlab.web.lesson import s01_what_attention_does as S1
from attnlab.web.lesson import s07_whole_transformer as S7

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_engine_browser import split_sentences  # noqa: E402

pytestmark = BROWSER_MARKS

TOL = 1e-4
REPO = Path(__file__).resolve().parents[2]
CONTENT = REPO / "attnlab" / "web" / "lesson" / "content"


def _widget_sentences() -> list[str]:
    """The sentences the widgets start with or offer as examples, in both languages' pages."""
    import yaml

    found = {S7.SHAPES_SENTENCE, S7.TOKEN_WALK_SENTENCE}
    for lang in ("ja", "en"):
        for section in ("01-what-attention-does.md", "07-whole-transformer.md"):
            text = (CONTENT / lang / section).read_text(encoding="utf-8")
            front = yaml.safe_load(text.split("\n---", 1)[0].lstrip("-\n"))
            strings = front.get("strings", {}) if isinstance(front, dict) else {}
            for key in ("default_sentence", "example_1", "example_2", "example_3", "tw_default_sentence"):
                if isinstance(strings.get(key), str):
                    found.add(strings[key])
    return sorted(found)


# Typed as a learner types: spaces between words (the corpus' own form), half-width spaces, a
# question, a sentence without its full stop, and latin letters inside Japanese.
TYPED = ["駅 は どこ です か 。", "  今日は　いい天気ですね  ", "これはペンです", "私はPythonが好きです。", "猫？"]


@pytest.fixture(scope="module")
def translator():
    from attnlab.loading import load_model

    return load_model("ja-en", precision="fp32", family="translate")


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):
    """The static folder's check page, with ja-en and the views module loaded, then offline."""
    pytest.importorskip("onnx", reason="the ONNX export needs the onnx package: pip install 'attnlab[site]'")
    ensure_runtime()
    folder = site.write_engine_folder(tmp_path_factory.mktemp("site") / "site", ["ja-en"])
    with site.serve_folder(folder) as base:
        context = browser.new_context()
        page = context.new_page()
        errors = page_errors(page)
        page.goto(base + "engine/check.html?model=ja-en")
        page.evaluate(
            """async (base) => {
                 window.views = await import(base + "engine/translation_views.js");
                 const models = await import(base + "engine/models.js");
                 window.jaEn = await models.translator("ja-en");
               }""",
            base,
        )
        context.set_offline(True)
        yield page
        context.close()
        assert errors == []


def _run(page, view: str, texts: list[str]) -> list[dict]:
    """The page's ``views[view](jaEn, text)`` for each text: the answer, or {"error": message}."""
    return page.evaluate(
        """async ([view, texts]) => {
             const out = [];
             for (const text of texts) {
               try { out.push(await window.views[view](window.jaEn, text)); }
               catch (err) { out.push({ error: String(err.message || err) }); }
             }
             return out;
           }""",
        [view, texts],
    )


def _same(got, want, where: str = "") -> None:
    """Equal structures: strings, ints, bools and lengths identical; floats within TOL."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            _same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: length {len(got)} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        assert isinstance(got, (int, float)) and math.isclose(got, want, abs_tol=TOL), f"{where}: {got} != {want}"
    else:
        assert type(got) is type(want) and got == want, f"{where}: {got!r} != {want!r}"


def _sentences() -> list[str]:
    return _widget_sentences() + TYPED + split_sentences("ja", 50)


def _python(view, request, translator, texts: list[str]) -> list[dict]:
    out = []
    for text in texts:
        try:
            out.append(view(translator, request(text=text)).model_dump())
        except ValueError as err:
            out.append({"error": str(err)})
    return out


def _check(page, translator, js_view: str, py_view, request, texts: list[str]) -> None:
    got = _run(page, js_view, texts)
    want = _python(py_view, request, translator, texts)
    ok = [w for w in want if "error" not in w]
    assert len(ok) >= len(texts) - 2, f"the Python view refused {len(texts) - len(ok)} of the sentences"
    for text, g, w in zip(texts, got, want):
        if "error" in w:
            assert "error" in g and g["error"] == w["error"], f"{text!r}: page {g} != Python {w['error']!r}"
        else:
            _same(g, w, f"{js_view}({text!r})")


def test_translation_in_the_page_is_translation_view(page, translator):
    _check(page, translator, "translationView", S1.translation_view, S1.TranslationRequest, _sentences())


def test_shapes_in_the_page_are_shapes_view(page, translator):
    _check(page, translator, "shapesView", S7.shapes_view, S7.ShapesRequest, _sentences())


def test_token_walk_in_the_page_is_token_walk_view(page, translator):
    _check(page, translator, "tokenWalkView", S7.token_walk_view, S7.TokenWalkRequest, _sentences())


def test_parallel_steps_in_the_page_are_the_view_over_the_same_measurements(page, translator, monkeypatch):
    # Times made up but distinct per batch, length and model, so that every number of the answer
    # is traced to one entry of the data (the real measurements take minutes on a busy machine).
    def training(batch, lengths):
        return [0.0001 * batch + 0.00002 * n for n in lengths], [0.0003 * batch + 0.000004 * n * n for n in lengths]

    def shipped(models, lengths):
        return [[0.00011 * n for n in lengths], [0.0004 + 0.00003 * n for n in lengths]]

    monkeypatch.setattr(S1, "training_step_seconds", training)
    monkeypatch.setattr(S1, "encoder_seconds", shipped)
    from attnlab.loading import load_model

    rnn = load_model(S1.RNN_ATTENTION, precision="fp32", family="translate")
    data = json.loads(json.dumps(S1.steps_data(rnn, translator)))  # as the page reads the file
    assert sorted(data["train_ms"]) == ["1", "32", "8"] and len(data["shipped"]["rnn_ms"]) == S1.STEPS_MAX_TOKENS
    texts = _sentences()
    got = page.evaluate(
        """([data, texts, batches]) => texts.flatMap((text) => batches.map((batch) => {
             try { return window.views.parallelStepsView(window.jaEn, data, text, batch); }
             catch (err) { return { error: String(err.message || err) }; }
           }))""",
        [data, texts, list(S1.BATCHES)],
    )
    want = []
    for text in texts:
        for batch in S1.BATCHES:
            try:
                want.append(
                    S1.parallel_steps(rnn, translator, S1.StepsRequest(text=text, batch=batch), data).model_dump()
                )
            except ValueError as err:
                want.append({"error": str(err)})
    assert sum("error" not in w for w in want) >= len(want) - 6
    for g, w in zip(got, want):
        if "error" in w:
            assert g == w
        else:
            _same(g, w, "parallelStepsView")
            assert g == w  # not only close: the same numbers, read from the same file
    long = "あ" * 60  # 60 tokens or so: more than the table's lengths, fewer than max_len
    most = f"the measured times go up to {S1.STEPS_MAX_TOKENS} tokens"
    with pytest.raises(ValueError, match=most):
        S1.parallel_steps(rnn, translator, S1.StepsRequest(text=long, batch=1), data)
    assert page.evaluate(
        """([data, text]) => { try { window.views.parallelStepsView(window.jaEn, data, text, 1); return ""; }
                               catch (err) { return err.message; } }""",
        [data, long],
    ).endswith(most)


def test_bad_sentences_are_refused_in_one_line(page, translator):
    too_long = "あ" * 201
    got = _run(page, "translationView", ["", too_long, "あ" * 60, "　 "])
    assert got[0]["error"] == "the sentence is empty: type a Japanese sentence"
    assert got[1]["error"] == "the sentence has 201 characters; at most 200"
    for text, g in zip(["あ" * 60, "　 "], got[2:]):  # what the Python view says, word for word
        with pytest.raises(ValueError) as refused:
            S1.translation_view(translator, S1.TranslationRequest(text=text))
        assert g["error"] == str(refused.value)
    assert "this view shows at most 48" in got[2]["error"] and "it has no tokens" in got[3]["error"]
    assert all("\n" not in g["error"] for g in got)


def test_two_widgets_decoding_at_once_get_their_own_answers(page, translator):
    """§7's diagram and token walk ask the one ja-en at the same moment (one page, two widgets):
    onnxruntime-web runs a session's calls one at a time, so the views queue theirs."""
    texts = [S7.SHAPES_SENTENCE, S7.TOKEN_WALK_SENTENCE]
    shapes, walk = page.evaluate(
        """async (texts) => Promise.all([window.views.shapesView(window.jaEn, texts[0]),
                                         window.views.tokenWalkView(window.jaEn, texts[1])])""",
        texts,
    )
    _same(shapes, S7.shapes_view(translator, S7.ShapesRequest(text=texts[0])).model_dump(), "shapes")
    _same(walk, S7.token_walk_view(translator, S7.TokenWalkRequest(text=texts[1])).model_dump(), "walk")
