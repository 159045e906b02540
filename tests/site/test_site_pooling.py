"""§8's attention-pooling classifier in the page: the ONNX export of ``ja-sentence-type``
(:func:`attnlab.onnx_apps.export_classifier_onnx`) gives what PyTorch gives
(``TextClassifier.predict``: the same label, probabilities and pooling weights within 1e-4) on many
sentences, batched with padding too; its folder holds what the page reads and is small; the widget's
data file (``pooling-sentences.json``) lists the examples always and the held-out test sentences
where the corpus is found, each with MeCab's markers; both are registered for the static build.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import numpy as np
import pytest

from attnlab import assets
from attnlab.assets import locate
from attnlab.assets.cards import read_model_card
from attnlab.data.sentence_types import LABELS, japanese_markers
from attnlab.web import site
from attnlab.web.lesson import s08_variants_and_exercises as S8

pytest.importorskip("onnx", reason="the ONNX export needs the onnx package: pip install 'attnlab[site]'")
ort = pytest.importorskip("onnxruntime", reason="the check needs onnxruntime: pip install 'attnlab[site]'")

from attnlab.onnx_apps import export_classifier_onnx  # noqa: E402

NAME = "ja-sentence-type"
TOL = 1e-4
CORPUS = Path(os.environ.get("ATTNLAB_DATA", "../shared/data")) / "small_parallel_enja"


@pytest.fixture(scope="module")
def classifier():
    try:
        locate.shipped_model_dir(NAME)
    except FileNotFoundError:
        pytest.skip(f"needs the shipped model {NAME} (make models ONLY={NAME})")
    from attnlab.loading import load_model

    return load_model(NAME)


@pytest.fixture(scope="module")
def folder(classifier, tmp_path_factory):
    return export_classifier_onnx(NAME, tmp_path_factory.mktemp("pool") / NAME)


def typed_sentences(classifier, n: int = 120) -> list[str]:
    """Sentences as a learner types them: random runs of the model's own characters (with the
    markers か, ない, た among them), characters it never read, punctuation, one character, 64."""
    rng = random.Random(0)
    chars = [c for c in classifier.tokenizer.chars if not c.isspace()]
    out = [
        "明日は雨が降りますか。",
        "私は行きたい。",
        "𠮷野家は閉まっていない。",
        "か",
        "。",
        "Hello, world?",
        "ｶﾀｶﾅ と 全角ＡＢＣ",
        "彼は来なかった？",
        "あ" * 64,
        "これは本です" * 10 + "か。",
    ]
    for _ in range(n):
        body = "".join(rng.choice(chars) for _ in range(rng.randint(1, 40)))
        out.append(body + rng.choice(["か。", "ない。", "た。", "ます。", "", "？"]))
    return [t for t in dict.fromkeys(out) if 0 < len(t) <= 64]


def held_out() -> list[str]:
    return [text for _, text in S8.held_out_sentences(CORPUS.parent)]


def test_the_graph_is_the_pytorch_classifier_on_many_sentences(classifier, folder):
    sess = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    texts = [*assets.ASSETS[NAME].examples, *typed_sentences(classifier), *held_out()]
    assert len(texts) > 100
    tok = classifier.tokenizer
    labels_seen = set()
    for text in texts:
        ids = tok.encode(text)[: classifier.max_len]
        logits, probs, weights = sess.run(None, {"ids": np.array([ids], np.int64)})  # (1, C), (1, C), (1, S)
        want = classifier.predict([text])[0]
        assert logits.shape == probs.shape == (1, 4) and weights.shape == (1, len(ids))
        assert classifier.labels[int(probs[0].argmax())] == want.label, text
        assert np.abs(probs[0] - [want.probs[label] for label in classifier.labels]).max() < TOL, text
        assert np.abs(weights[0] - want.weights).max() < TOL, text
        assert int(weights[0].argmax()) == int(np.argmax(want.weights)), text
        labels_seen.add(want.label)
    assert labels_seen == set(LABELS), "the sentences must reach every class"
    # A padded batch gives each row what it gives alone, and padding gets exactly 0 weight.
    rows = [tok.encode(t) for t in ("私は行きたい。", "この電車は京都に行きますか。", "か")]
    S = max(map(len, rows))
    batch = np.array([r + [tok.pad_id] * (S - len(r)) for r in rows], np.int64)
    _, probs, weights = sess.run(None, {"ids": batch})
    for i, r in enumerate(rows):
        _, alone_p, alone_w = sess.run(None, {"ids": np.array([r], np.int64)})
        assert np.abs(probs[i] - alone_p[0]).max() < 1e-5
        assert np.abs(weights[i, : len(r)] - alone_w[0]).max() < 1e-5
        assert float(np.abs(weights[i, len(r) :]).max(initial=0.0)) == 0.0


def test_the_folder_holds_what_the_page_reads_and_is_small(classifier, folder):
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    assert meta["kind"] == "classifier" and meta["weights"] == "fp16"
    assert meta["labels"] == classifier.labels and meta["max_len"] == 64
    assert meta["pad_id"] == classifier.tokenizer.pad_id and meta["unk_id"] == classifier.tokenizer.unk_id
    assert meta["examples"] == list(assets.ASSETS[NAME].examples)
    metrics = read_model_card(assets.asset_folder(NAME)).metrics
    assert meta["card"] == {
        "accuracy": metrics["accuracy"],
        "n": metrics["n"],
        "peak_on_marker": {label: metrics[f"peak_on_marker/{label}"] for label in ("question", "negation", "past")},
    }
    assert meta["card"] == S8.pooling_view(classifier, S8.PoolingRequest()).card.model_dump()
    tok = json.loads((folder / meta["tokenizer"]).read_text(encoding="utf-8"))
    assert tok["kind"] == "char" and tok["chars"] == classifier.tokenizer.chars
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    print("ja-sentence-type folder:", size, "bytes")
    assert size < 120_000
    assert site.SITE_MODELS[NAME] is export_classifier_onnx
    assert site.SITE_DATA[S8.POOLING_SENTENCES_FILE] is not None


def test_the_export_refuses_what_is_not_a_classifier(tmp_path):
    try:
        locate.shipped_model_dir("karate-gat")
    except FileNotFoundError:
        pytest.skip("needs the shipped model karate-gat")
    with pytest.raises(ValueError, match="not a text classifier"):
        export_classifier_onnx("karate-gat", tmp_path / "x")


def test_the_data_file_lists_the_examples_without_the_corpus(classifier, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLAB_DATA", str(tmp_path / "no-corpus-here"))
    out = site.write_site_data(tmp_path / "data", [S8.POOLING_SENTENCES_FILE])[0]
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["labels"] == list(LABELS) and data["held_out_source"] is None
    assert [r["text"] for r in data["sentences"]] == list(assets.ASSETS[NAME].examples)
    for row in data["sentences"]:
        assert row["source"] == "example" and row["markers"] == japanese_markers(row["text"])
    assert data["sentences"][0]["markers"] == {"question": [12]}  # the か of 行きますか。


def test_the_data_file_lists_the_held_out_sentences_with_the_corpus(classifier, tmp_path, monkeypatch):
    if not (CORPUS / "test.ja").is_file():
        pytest.skip(f"needs small_parallel_enja in {CORPUS.parent} (set ATTNLAB_DATA)")
    monkeypatch.setenv("ATTNLAB_DATA", str(CORPUS.parent))
    data = json.loads(S8.write_pooling_sentences(tmp_path / "p.json").read_text(encoding="utf-8"))
    tests = [r for r in data["sentences"] if r["source"] == "test"]
    card = read_model_card(assets.asset_folder(NAME)).metrics
    assert len(tests) == card["n"] == 374  # the sentences the card measured
    assert {r["label"] for r in tests} == set(LABELS)
    for row in tests[::7]:
        assert row["markers"] == japanese_markers(row["text"])
    # The card's accuracy, measured again on the listed sentences.
    predictions = classifier.predict([r["text"] for r in tests])
    accuracy = sum(p.label == r["label"] for p, r in zip(predictions, tests)) / len(tests)
    assert accuracy == pytest.approx(card["accuracy"])
