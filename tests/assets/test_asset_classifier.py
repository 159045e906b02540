"""The shipped sentence-type classifier ``ja-sentence-type`` (the lesson's attention-pooling exercise):
the labelling rules (English side, Japanese agreement), the labelled files, ``make models`` on a tiny
stand-in corpus, and the shipped copy itself: it loads, classifies its own examples right, its
pooling peaks on the marker character, its card states what it was trained on and how well it does,
and it fits the size budget.

The shipped copy's tests skip where its weights are not built (``make models ONLY=ja-sentence-type``);
the tests that read small_parallel_enja skip where ``../shared/data`` (or ``ATTNLAB_DATA``) is absent.
"""

from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path

import pytest
import torch

from attnlab import assets, build_assets
from attnlab import checkpoint as ckpt
from attnlab.assets import cards
from attnlab.assets.cards import read_model_card
from attnlab.build_assets import SentenceTypeClassifier, pooling_peaks
from attnlab.data.sentence_types import (
    LABELS,
    english_sentence_type,
    japanese_forms,
    japanese_markers,
    labelled_split,
    sentence_type,
    write_labelled_splits,
)
from attnlab.loading import load_model
from attnlab.recipes.classify import PRESETS as CLASSIFY_PRESETS

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("ATTNLAB_DATA", REPO.parent / "shared" / "data"))
NAME = "ja-sentence-type"
# The grammatical marker of each class, as the lesson names it.
MARKER_CHARS = {"question": set("か？"), "negation": set("ないんずぬ"), "past": set("ただ")}


# --------------------------------------------------------------------------------------------
# The labels: the English decides, the Japanese must agree.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "english, label",
    [
        ("is this your book ?", "question"),
        ("i don 't like cats .", "negation"),
        ("he never shrinks from danger .", "negation"),
        ("i have nothing to declare .", "negation"),
        ("she was very busy .", "past"),
        ("we played around the farm .", "past"),
        ("he saw it also .", "past"),
        ("i drink coffee every morning .", "other"),
        ("the door is locked .", "other"),  # "is locked": a state, not a past event
        ("this book is sold here .", "past"),  # irregular forms count wherever they stand (see below)
        ("did you go ?", None),  # question and past: two labels
        ("i didn 't go .", None),  # negation and past
        ("i have eaten lunch .", None),  # present perfect: Japanese writes it with た
        ("i wish i had a car .", None),  # no past event
        ("you had better go .", None),
        ("could you say that again ?", None),  # a request, not a question
        ("please come here , will you ?", None),
        ("he could swim .", None),  # past or conditional
        ("", None),
    ],
)
def test_the_english_side_decides_the_label(english, label):
    assert english_sentence_type(english) == label


def test_the_japanese_markers_are_where_mecab_finds_them():
    assert japanese_markers("これはあなたの本ですか。") == {"question": [10]}
    assert japanese_markers("私は肉を食べない。") == {"negation": [6, 7]}
    assert japanese_markers("私は泳げません。") == {"negation": [6]}  # ません: the ん
    assert japanese_markers("彼は本を読んだ。") == {"past": [6]}  # だ is the past auxiliary here
    assert japanese_markers("彼女は来なかった。") == {"negation": [4, 5, 6], "past": [7]}
    assert japanese_markers("私は行きたい。") == {}  # たい (want to) is not the past
    assert japanese_markers("行きたい？") == {"question": [4]}
    assert japanese_markers("私たちはあなたの友達です。") == {}  # た inside words is no marker
    assert japanese_forms("彼女は来なかった。") == {"negation", "past"}


def test_a_pair_is_kept_only_when_both_languages_agree():
    assert sentence_type("is this your book ?", "これはあなたの本ですか。") == "question"
    assert sentence_type("i don 't like sad movies .", "悲しい映画は嫌いだ。") is None  # no ない in the Japanese
    assert sentence_type("how about going to the movies ?", "映画に行きましょう。") is None
    assert sentence_type("she was very busy .", "彼女は大変忙しかった。") == "past"
    assert sentence_type("i drink coffee .", "私はコーヒーを飲まない。") is None  # "other" needs no marker at all
    # The English rules' mistakes are caught where the Japanese disagrees.
    assert sentence_type("this book is sold here .", "この本はここで売られています。") is None
    assert sentence_type("i drink coffee .", "私はコーヒーを飲みます。") == "other"


def _write(folder: Path, split: str, pairs: list[tuple[str, str]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{split}.en").write_text("".join(e + "\n" for e, _ in pairs), encoding="utf-8")
    (folder / f"{split}.ja").write_text("".join(j + "\n" for _, j in pairs), encoding="utf-8")


# Tokenized as small_parallel_enja is: English lower-cased and split, Japanese split into words.
TINY = {
    "question": [
        ("is this your book ?", "これ は あなた の 本 です か 。"),
        ("do you like cats ?", "猫 が 好き です か 。"),
        ("is it raining ?", "雨 が 降 っ て い ます か 。"),
        ("are you a student ?", "あなた は 学生 です か 。"),
    ],
    "negation": [
        ("i don 't eat meat .", "私 は 肉 を 食べ な い 。"),
        ("he is not here .", "彼 は ここ に い ま せ ん 。"),
        ("i cannot swim .", "私 は 泳げ ま せ ん 。"),
        ("she doesn 't know .", "彼女 は 知 ら な い 。"),
    ],
    "past": [
        ("he met a friend .", "彼 は 友達 に 会 っ た 。"),
        ("i walked to the station .", "私 は 駅 まで 歩 い た 。"),
        ("she was busy .", "彼女 は 忙し かっ た 。"),
        ("we played tennis .", "私 たち は テニス を し た 。"),
    ],
    "other": [
        ("i drink coffee every morning .", "私 は 毎朝 コーヒー を 飲 み ます 。"),
        ("this book is interesting .", "この 本 は 面白 い 。"),
        ("he speaks english .", "彼 は 英語 を 話 し ます 。"),
        ("the sky is blue .", "空 は 青 い 。"),
    ],
}


def tiny_corpus(root: Path) -> Path:
    """small_parallel_enja's layout with a few pairs of every class; dev repeats one training sentence."""
    corpus = root / "small_parallel_enja"
    train = [pair for pairs in TINY.values() for pair in pairs] * 3
    extra = [("did you go ?", "行 き ま し た か 。"), ("how about tea ?", "お茶 に しよ う 。")]
    _write(corpus, "train", train + extra)
    _write(corpus, "dev", [TINY["question"][0], ("is that a dog ?", "あれ は 犬 です か 。")])
    _write(corpus, "test", [("is that a cat ?", "あれ は 猫 です か 。"), ("i ran .", "私 は 走 っ た 。")])
    return corpus


def test_the_labelled_files_hold_one_agreed_label_per_sentence(tmp_path):
    corpus = tiny_corpus(tmp_path)
    counts = write_labelled_splits(corpus, tmp_path / "out")
    train = (tmp_path / "out" / "train.tsv").read_text(encoding="utf-8").splitlines()
    assert len(train) == 48 and {line.split("\t")[0] for line in train} == set(LABELS)
    assert "question\tこれはあなたの本ですか。" in train  # raw Japanese: the word-splitting spaces removed
    assert counts["train"][None] == 2  # a question in the past, and a suggestion that is no question
    dev = (tmp_path / "out" / "dev.tsv").read_text(encoding="utf-8").splitlines()
    # A sentence also in train is never scored on.
    assert dev == ["question\tあれは犬ですか。"] and counts["dev"]["seen in train"] == 1
    test, _ = labelled_split(corpus, "test")
    assert test == [("question", "あれは猫ですか。"), ("past", "私は走った。")]
    english_only = (tmp_path / "out" / "test-english-only.tsv").read_text(encoding="utf-8").splitlines()
    assert english_only == ["question\tあれは猫ですか。", "past\t私は走った。"]


# --------------------------------------------------------------------------------------------
# make models, on the tiny corpus.
# --------------------------------------------------------------------------------------------


TINY_OVERRIDES = ("train.epochs=2", "train.patience=null", "train.warmup_steps=2", "max_tokens=256")


def test_make_models_prepares_the_labelled_data_trains_packs_and_describes_the_classifier(tmp_path):
    tiny_corpus(tmp_path / "data")
    asset_build = SentenceTypeClassifier(overrides=TINY_OVERRIDES)
    runs, root = tmp_path / "runs", tmp_path / "assets"
    lines: list[str] = []
    (card,) = build_assets.build(
        [NAME], data=tmp_path / "data", runs=runs, root=root, builds={NAME: asset_build}, log=lines.append
    )
    labelled = runs / f"{NAME}-data"
    assert (labelled / "train.tsv").is_file() and any("preparing the data" in line for line in lines)
    assert card.command == (
        f"attnlab train classify --data {labelled / 'train.tsv'} --valid {labelled / 'dev.tsv'} --preset {NAME} "
        f"--out {runs / NAME} --seed 0 --threads 1 --overwrite --overrides {' '.join(TINY_OVERRIDES)}"
    )
    folder = root / NAME
    assert read_model_card(folder) == card
    assert set(card.metrics) >= {"accuracy", "n", "accuracy_english_labels", "n_english_labels"}
    assert card.metrics["n"] == 2 and card.check["metric"] == "accuracy" and card.check["n"] == 2
    assert card.training["tokens_counted"] == "input tokens" and card.training["cores"] == os.cpu_count()
    assert card.training["load_before"] >= 0 and card.training["load_after"] >= 0
    text = (folder / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "input tokens/s" in text and "1-minute load average" in text and "Tanaka corpus" in text
    config = json.loads((folder / ckpt.CONFIG_FILE).read_text(encoding="utf-8"))
    assert build_assets.config_differences(asset_build.expected_config(folder), config) == []
    assert config["labels"] == sorted(LABELS) and config["n_layers"] == 1 and config["d_model"] == 32
    assert card.example_outputs.keys() == set(assets.ASSETS[NAME].examples)


# --------------------------------------------------------------------------------------------
# The shipped copy.
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shipped():
    folder = assets.asset_folder(NAME)
    if not (folder / ckpt.WEIGHTS_FILE).is_file():
        pytest.skip(f"{NAME}: weights not built yet (run `make models ONLY={NAME}`)")
    return load_model(NAME, family="classify")


def _peak(prediction) -> int:
    return max(range(len(prediction.weights)), key=prediction.weights.__getitem__)


def test_the_shipped_classifier_gets_its_own_examples_right_and_pools_on_the_marker(shipped):
    examples = assets.ASSETS[NAME].examples
    assert len(examples) == len(LABELS)  # one per class, in the order of LABELS
    for label, prediction in zip(LABELS, shipped.predict(list(examples))):
        assert prediction.label == label, (prediction.text, prediction.probs)
        assert prediction.probs[label] > 0.9
        assert sum(prediction.probs.values()) == pytest.approx(1.0, abs=1e-5)
        assert sum(prediction.weights) == pytest.approx(1.0, abs=1e-5)
        assert prediction.tokens == list(unicodedata.normalize("NFC", prediction.text))  # one token per character
        if label != "other":
            peak = _peak(prediction)
            assert prediction.tokens[peak] in MARKER_CHARS[label], (prediction.text, prediction.weights)
            assert peak in japanese_markers(prediction.text)[label]


@pytest.mark.parametrize(
    "text, label, peak",
    [
        ("明日は雨が降りますか。", "question", "か"),  # §8's check: predict the heaviest character
        ("私は行きたい。", "other", "た"),  # §8's check: た is the heaviest, yet not the past
        ("この本は面白くない。", "negation", None),  # §8's try-this
        ("彼女は来なかった。", "past", "た"),  # negation and past at once: one of the two (no such class)
    ],
)
def test_what_the_lesson_says_about_the_shipped_classifier_holds(shipped, text, label, peak):
    prediction = shipped.predict([text])[0]
    assert prediction.label == label, prediction.probs
    if peak is not None:
        assert prediction.tokens[_peak(prediction)] == peak, prediction.weights
    else:
        assert prediction.tokens[_peak(prediction)] in MARKER_CHARS[label]


def test_the_shipped_weights_are_fp16_and_load_as_fp32(shipped):
    folder = assets.asset_folder(NAME)
    from safetensors import safe_open

    with safe_open(str(folder / ckpt.WEIGHTS_FILE), framework="pt") as f:
        stored = {name: f.get_slice(name).get_dtype() for name in f.keys()}  # noqa: SIM118 (not a dict)
    assert set(stored.values()) <= {"F16", "I64", "BOOL"}, stored
    assert all(p.dtype == torch.float32 for p in shipped.model.parameters())


def test_the_card_says_what_it_was_trained_on_and_how_well_it_does():
    folder = assets.asset_folder(NAME)
    if not (folder / cards.CARD_JSON).is_file():
        pytest.skip(f"{NAME}: not built yet (run `make models ONLY={NAME}`)")
    card = read_model_card(folder)
    m = card.metrics
    assert m["accuracy"] >= 0.95 and m["n"] >= 300
    for label in ("question", "negation", "past"):
        assert m[f"accuracy/{label}"] >= 0.9
        assert m[f"peak_on_marker/{label}"] >= 0.8 and m[f"n/{label}"] >= 20
    assert m["accuracy_english_labels"] < m["accuracy"]  # the agreement rule is said, and its effect measured
    assert "small_parallel_enja" in card.data and "Tanaka corpus" in card.data and "MeCab" in card.data
    assert "CC-BY" in card.licence and "not shipped" in card.licence
    assert card.command.startswith("attnlab train classify ") and "--preset ja-sentence-type" in card.command
    t = card.training
    assert t["stop_reason"] == "early_stopping" and t["steps"] > 0 and t["minutes"] > 0
    assert "load_before" in t and "cores" in t  # whether the machine was shared while it trained
    text = (folder / cards.CARD_FILE).read_text(encoding="utf-8")
    assert "peak_on_marker/question" in text and "1-minute load average" in text
    assert card.parameters < 40_000 and card.weights_bytes < 100_000


def test_the_classifier_fits_the_asset_budget_with_room_to_spare():
    size = assets.folder_bytes()[NAME]
    if not size:
        pytest.skip(f"{NAME}: not built yet (run `make models ONLY={NAME}`)")
    assert size < 120_000, size
    assert assets.total_bytes() <= assets.BUDGET_BYTES
    preset = CLASSIFY_PRESETS[NAME]
    assert preset.tokenizer == "char" and preset.vocab_size == 500 and preset.train.patience == 3


# --------------------------------------------------------------------------------------------
# On the real corpus (skips without it).
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus() -> Path:
    folder = DATA / "small_parallel_enja"
    if not (folder / "test.ja").is_file():
        pytest.skip(f"needs small_parallel_enja under {DATA} (set ATTNLAB_DATA)")
    return folder


def test_the_cards_sentence_counts_are_the_labelled_splits(corpus):
    asset_build = build_assets.BUILDS[NAME]
    counts = {split: len(labelled_split(corpus, split)[0]) for split in ("train", "dev", "test")}
    assert f"{counts['train']:,} training sentences" in asset_build.data
    assert f"{counts['dev']} for validation" in asset_build.data and f"{counts['test']} for test" in asset_build.data


def test_the_pooling_peaks_of_the_card_are_measured_again(shipped, corpus):
    card = read_model_card(assets.asset_folder(NAME))
    test, _ = labelled_split(corpus, "test")
    again = pooling_peaks(shipped, test)
    for key, value in again.items():
        assert card.metrics[key] == pytest.approx(value, abs=1e-9), key


def test_the_explorers_model_page_runs_the_classifier_and_shows_its_self_attention(shipped):
    from fastapi.testclient import TestClient

    from attnlab.web.app import create_app
    from attnlab.web.models import load_explorer_model

    model = load_explorer_model(NAME)
    assert model.kind == "encoder"
    client = TestClient(create_app([model]), base_url="http://127.0.0.1:8000")
    text = assets.ASSETS[NAME].examples[0]
    r = client.post("/api/run", json={"model": model.name, "text": text})
    assert r.status_code == 200, r.text
    got, want = r.json(), shipped.predict([text])[0]
    assert got["output"].startswith(f"{want.label} ({want.probs[want.label]:.2f}); pooling weights: か ")
    assert got["tokens"]["src"] == want.tokens
    (group,) = got["groups"]
    assert (group["name"], group["layers"], group["heads"]) == ("self", 1, 2)
