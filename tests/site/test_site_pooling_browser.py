"""§8's attention-pooling exercise computed in the page (engine/pooling.js over the ONNX export of
``ja-sentence-type``, :func:`attnlab.onnx_apps.export_classifier_onnx`) in headless Chromium gives
what its Python reference gives (``s08_variants_and_exercises.pooling_view``): the character
tokenizer's ids token for token, and on at least 200 sentences (the examples, the held-out test
sentences the data file lists where the corpus is found, typed-style sentences) the same label,
peak, characters and unknown marks, probabilities and weights within 1e-4, and MeCab's markers
identical for every listed sentence (null, never guessed, for the others).

The folder is the one :func:`attnlab.web.site.write_engine_folder` writes (the engine, the WASM
runtime, the model) plus the widget's data file, served by Python's ``http.server`` with the
network cut once the model is loaded. Run with ``pytest -m browser tests/site/test_site_pooling_browser.py``.
"""

from __future__ import annotations

import json

import pytest
from lesson_browser import BROWSER_MARKS, shipped
from live_server import engine_folder, offline_page
from test_site_pooling import held_out, typed_sentences

from attnlab import assets
from attnlab.web import site
from attnlab.web.lesson import s08_variants_and_exercises as S8

pytestmark = BROWSER_MARKS

NAME = "ja-sentence-type"
TOL = 1e-4


@pytest.fixture(scope="module")
def classifier():
    shipped(NAME)
    from attnlab.loading import load_model

    return load_model(NAME)


@pytest.fixture(scope="module")
def folder(tmp_path_factory, classifier):
    out = engine_folder(tmp_path_factory, [NAME])
    site.write_site_data(out / "data", [S8.POOLING_SENTENCES_FILE])
    return out


LOAD = """async (base) => {
    const pooling = await import(base + "engine/pooling.js");
    window.pool = { pooling, model: await pooling.loadPooling() };
}"""


@pytest.fixture(scope="module")
def engine(browser, folder):
    """A page of the static folder with the classifier loaded, then offline: (page, errors)."""
    # The folder's listing: a page of the site that runs nothing itself.
    with offline_page(browser, folder, "engine/", lambda page, base: page.evaluate(LOAD, base)) as served:
        yield served.page, served.errors


def listed(folder) -> list[str]:
    data = json.loads((folder / "data" / S8.POOLING_SENTENCES_FILE).read_text(encoding="utf-8"))
    return [row["text"] for row in data["sentences"]]


def sentences(classifier, folder) -> list[str]:
    out = [*listed(folder), *typed_sentences(classifier, 200), *held_out()]
    # As typed: spaces around, a decomposed kana (NFC makes it one character).
    out += ["  私は行きました。 ", "\u304b\u3099ぎですか。", "\u3000全角の空白で始まる文。"]
    return list(dict.fromkeys(out))


def test_the_tokenizer_gives_pythons_ids(engine, classifier, folder):
    page, errors = engine
    texts = sentences(classifier, folder)
    got = page.evaluate("(texts) => texts.map((t) => window.pool.model.tokenizer.encode(t))", texts)
    assert len(texts) >= 200
    for text, ids in zip(texts, got):
        assert ids == classifier.tokenizer.encode(text), text
    assert any(1 in ids for ids in got), "some sentences must have characters outside the vocabulary"
    assert not errors, errors


def test_the_page_classifies_as_pooling_view(engine, classifier, folder):
    page, errors = engine
    texts = sentences(classifier, folder)
    on_list = set(listed(folder))
    got = page.evaluate(
        """async (texts) => {
            const out = [];
            for (const text of texts) {
                try { out.push({ ok: await window.pool.pooling.classify(window.pool.model, { text }) }); }
                catch (err) { out.push({ error: String(err.message) }); }
            }
            return out;
        }""",
        texts,
    )
    assert len(got) == len(texts) >= 200
    marked = unlisted = 0
    for text, g in zip(texts, got):
        want = S8.pooling_view(classifier, S8.PoolingRequest(text=text)).model_dump()
        assert "ok" in g, (text, g)
        r = g["ok"]
        for key in ("model", "text", "labels", "label", "chars", "known", "peak", "examples", "card"):
            assert r[key] == want[key], (text, key, r[key], want[key])
        assert len(r["probs"]) == 4 and max(abs(a - b) for a, b in zip(r["probs"], want["probs"])) <= TOL, text
        assert len(r["weights"]) == len(want["weights"]), text
        assert max(abs(a - b) for a, b in zip(r["weights"], want["weights"])) <= TOL, text
        if want["text"] in on_list:
            assert r["markers"] == want["markers"], text  # MeCab's, written at build time
            marked += bool(want["markers"])
        else:
            assert r["markers"] is None, text  # never guessed in the page
            unlisted += 1
    assert marked >= 3 and unlisted >= 100
    assert not errors, errors


def test_the_page_refuses_what_the_reference_refuses(engine, classifier):
    page, _ = engine
    bad = ["   ", "", "あ" * 65, "\u3000\n"]
    got = page.evaluate(
        """async (texts) => Promise.all(texts.map((text) =>
            window.pool.pooling.classify(window.pool.model, { text }).then(() => null, (err) => err.message)))""",
        bad,
    )
    for text, message in zip(bad, got):
        with pytest.raises(ValueError):
            S8.pooling_view(classifier, S8.PoolingRequest(text=text))
        assert message, text
    assert got[0] == "type a sentence: the text is blank"
    assert got[2] == "the sentence has 65 characters; this model reads at most 64"
    assert assets.ASSETS[NAME].examples[0] in listed_examples(page)


def listed_examples(page) -> list[str]:
    return page.evaluate("() => window.pool.model.sentences.filter((r) => r.source === 'example').map((r) => r.text)")
