"""`make models` end to end on tiny settings: each shipped-asset build trains, packs and describes
its model, checks names and data first, and stops on a failed training naming its log.

In a file of its own (not in test_assets.py) so that pytest-xdist's ``--dist loadfile`` can run
these few long builds on one worker while the registry's many short tests run on the other.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
import torch

from attnlab import assets, build_assets
from attnlab import checkpoint as ckpt
from attnlab.assets.cards import ModelCard, read_model_card
from attnlab.build_assets import (
    BottleneckRNN,
    DemoTranslator,
    EnjaTranslator,
    PresetTranslator,
    TextLM,
    config_differences,
)

REPO = Path(__file__).resolve().parents[2]
# The corpora of the real assets' quality checks (never copied into the repository).
DATA = Path(os.environ.get("ATTNLAB_DATA", REPO.parent / "shared" / "data"))


# --------------------------------------------------------------------------------------------
# Tiny trained models and a stand-in assets folder.
# --------------------------------------------------------------------------------------------


TINY_STEPS = 8
TINY_TRANSLATOR = (
    "model.d_model=32",
    "model.n_heads=2",
    "model.n_encoder_layers=1",
    "model.n_decoder_layers=1",
    "model.d_ff=64",
    "vocab_size=150",
    "max_tokens=512",
    "eval_sentences=6",
    f"train.max_steps={TINY_STEPS}",
    "train.warmup_steps=2",
    "train.eval_every_steps=8",
    "train.log_every=4",
    "train.progress=false",
)
JA_WORDS = [("猫", "cats"), ("犬", "dogs"), ("本", "books"), ("魚", "fish"), ("花", "flowers"), ("山", "mountains")]
JA_FRAMES = [
    ("私 は {} が 好き です 。", "i like {} ."),
    ("彼 は {} を 見 た 。", "he saw {} ."),
    ("{} は どこ です か 。", "where are {} ?"),
]


def write_tiny_enja(data: Path) -> None:
    """A small_parallel_enja look-alike: Japanese split into words by spaces, English lower-cased and tokenized."""
    pairs = [(ja.format(j), en.format(e)) for ja, en in JA_FRAMES for j, e in JA_WORDS]  # 18 pairs
    folder = data / "small_parallel_enja"
    folder.mkdir(parents=True)
    for split, chosen in (("train", pairs * 3), ("dev", pairs[:6]), ("test", pairs[6:12])):
        (folder / f"{split}.ja").write_text("".join(ja + "\n" for ja, _ in chosen), encoding="utf-8")
        (folder / f"{split}.en").write_text("".join(en + "\n" for _, en in chosen), encoding="utf-8")


def write_tiny_tatoeba(data: Path) -> None:
    """A tatoeba-jpn look-alike: raw, cased pairs, some of them also in the small_parallel_enja look-alike."""
    pairs = [(ja.format(j).replace(" ", ""), en.format(e)) for ja, en in JA_FRAMES for j, e in JA_WORDS]
    pairs = [(ja, en[0].upper() + en[1:].replace(" .", ".").replace(" ?", "?")) for ja, en in pairs]
    pairs += [(f"{n}冊の本がある。", f"There are {n} books.") for n in range(2, 40)]
    folder = data / "tatoeba-jpn"
    folder.mkdir(parents=True)
    (folder / "train.ja").write_text("".join(ja + "\n" for ja, _ in pairs), encoding="utf-8")
    (folder / "train.en").write_text("".join(en + "\n" for _, en in pairs), encoding="utf-8")


TINY_ENJA = dict(n_dev=6, n_test=12, paragraphs=2, check_pairs=6)


def check_built(asset_build, root: Path, card: ModelCard, data: Path) -> None:
    folder = root / asset_build.name
    assert read_model_card(folder) == card
    assert (
        config_differences(asset_build.expected_config(folder), json.loads((folder / "config.json").read_text())) == []
    )
    loaded = ckpt.load_checkpoint(folder)
    assert all(t.dtype == torch.float32 for t in loaded.state_dict.values() if t.is_floating_point())
    assert card.example_outputs == asset_build.example_outputs(folder, assets.ASSETS[asset_build.name].examples)
    assert card.check["value"] == pytest.approx(asset_build.measure_check(folder, data), abs=1e-9)
    assert card.parameters > 0 and card.weights_bytes == (folder / "model.safetensors").stat().st_size
    assert (folder / "MODEL_CARD.md").is_file()


def test_make_models_trains_ja_en_and_en_ja_side_by_side_then_packs_and_describes_them(tmp_path):
    data, runs, root = tmp_path / "data", tmp_path / "runs", tmp_path / "assets"
    write_tiny_enja(data)
    write_tiny_tatoeba(data)
    builds = {
        "ja-en": EnjaTranslator("ja-en", preset="ja-en", src="ja", tgt="en", overrides=TINY_TRANSLATOR, **TINY_ENJA),
        "en-ja": EnjaTranslator("en-ja", preset="en-ja", src="en", tgt="ja", overrides=TINY_TRANSLATOR, **TINY_ENJA),
    }
    logged = []
    cards = build_assets.build(None, data=data, runs=runs, root=root, builds=builds, log=logged.append)
    assert [c.name for c in cards] == ["ja-en", "en-ja"]
    # The splits are written first, beside the runs, and read by both trainings.
    split = runs / "enja-data"
    assert len((split / "test.ja").read_text(encoding="utf-8").splitlines()) == 12
    # Side by side: each with its output in a log file of its own, one thread each.
    assert any("training ja-en (1 thread, beside en-ja)" in line for line in logged)
    assert (runs / "ja-en.log").is_file() and (runs / "en-ja.log").is_file()
    for card, asset_build in zip(cards, builds.values()):
        check_built(asset_build, root, card, data)
        assert card.command.startswith(f"attnlab train translate --preset {asset_build.name} --train-src {split}")
        assert f"--out {runs / asset_build.name} --seed 0 --overwrite --overrides model.d_model=32" in card.command
        assert (
            card.seed == 0 and card.packed_from is None and "Tatoeba" in card.licence and "CC-BY 2.0 FR" in card.licence
        )
        assert (
            card.storage == "int8"
            and "int8 with one float32 scale per row" in (root / asset_build.name / "MODEL_CARD.md").read_text()
        )
        expected = {"bleu", "chrf", "exact_match", "n", "loops_cut", "sp_bleu", "sp_chrf"}
        expected |= {"paragraph_bleu_sentences", "paragraph_bleu_split", "paragraph_bleu_whole", "paragraphs"}
        expected |= {"paragraph_ratio", "bleu_bf16"} | ({"sentence_form"} if asset_build.tgt == "en" else set())
        assert set(card.metrics) == expected and card.metrics["n"] == 12
        assert 0 <= card.metrics["bleu_bf16"] <= 100 and "bleu_bf16: the same BLEU decoded in bf16" in card.evaluation
        assert f"attnlab evaluate --model {asset_build.name} --src DIR/test.{asset_build.src}" in card.reproduce
        # The training's own record: its steps and why it stopped, and the machine it ran on.
        assert card.training["steps"] == TINY_STEPS and card.training["stop_reason"] == "max_steps"
        assert card.training["minutes"] > 0 and card.training["tokens_per_s"] > 0 and card.training["cpu"]
        assert f"{TINY_STEPS:,} steps in" in (root / asset_build.name / "MODEL_CARD.md").read_text()
    config = json.loads((root / "en-ja" / "config.json").read_text())
    assert config["bleu_tokenize"] == "ja-mecab" and config["lowercase"] is False

    # An already-trained run is packed without training; a run of other settings is refused.
    again = build_assets.build(
        ["ja-en"], data=data, from_run=runs / "ja-en", root=tmp_path / "again", builds=builds, log=logged.append
    )
    assert again[0].packed_from == str(runs / "ja-en") and again[0].metrics == cards[0].metrics
    assert ckpt.load_checkpoint(tmp_path / "again" / "ja-en").config == ckpt.load_checkpoint(root / "ja-en").config
    other = {"ja-en": dataclasses.replace(builds["ja-en"], overrides=(*TINY_TRANSLATOR, "model.d_ff=128"))}
    with pytest.raises(ValueError, match=r"is not what the ja-en build makes \(1 config.json entries differ: d_ff: 64"):
        build_assets.build(["ja-en"], data=data, from_run=runs / "ja-en", root=tmp_path / "no", builds=other)
    assert not (tmp_path / "no").exists()


def test_make_models_builds_the_generated_and_text_models(tmp_path):
    data, runs, root = tmp_path / "data", tmp_path / "runs", tmp_path / "assets"
    data.mkdir()
    (data / "text.txt").write_text("To be, or not to be, that is the question.\n" * 80, encoding="utf-8")
    builds = {
        "demo": DemoTranslator(minutes=0.05, n_train=300),
        "rnn-attention": BottleneckRNN(
            "rnn-attention", "rnn-additive", minutes=0.15, n_train=200, n_valid=20, n_test=40
        ),
        "rnn-plain": BottleneckRNN("rnn-plain", "rnn-none", minutes=0.15, n_train=200, n_valid=20, n_test=40),
        "shakespeare-char": TextLM(
            "shakespeare-char", preset="tiny", text="text.txt", overrides=("train.max_steps=6", "train.progress=false")
        ),
    }
    cards = build_assets.build(None, data=data, runs=runs, root=root, builds=builds, log=lambda line: None)
    assert sorted(p.name for p in runs.iterdir()) == ["bottleneck", "demo", "shakespeare-char"]  # one bottleneck run
    for card, asset_build in zip(cards, builds.values()):
        check_built(asset_build, root, card, data)
    demo_card, rnn_card, plain_card, lm_card = cards
    assert demo_card.command == f"attnlab demo --out {runs / 'demo'} --minutes 0.05 --n-train 300 --seed 0"
    assert demo_card.check["metric"] == "exact_match" and demo_card.metrics["n"] == 500
    assert rnn_card.command == plain_card.command and "experiment bottleneck" in rnn_card.command
    assert json.loads((root / "rnn-plain" / "config.json").read_text())["attention"] == "none"
    assert json.loads((root / "rnn-attention" / "config.json").read_text())["attention"] == "additive"
    assert set(lm_card.metrics) == {"loss", "perplexity", "n"} and lm_card.check["higher_is_better"] is False
    assert lm_card.check["n"] == lm_card.metrics["n"] < 16384  # the whole (tiny) validation text
    assert lm_card.example_outputs.keys() == set(assets.ASSETS["shakespeare-char"].examples)


def test_make_models_checks_names_and_data_before_training(tmp_path):
    with pytest.raises(ValueError, match="no shipped model is called ja_en; choose from demo, ja-en"):
        build_assets.build(["ja_en"], data=tmp_path, runs=tmp_path / "runs")
    with pytest.raises(FileNotFoundError, match=r"tatoeba-jpn/train.ja not found \(and 7 more data files\)"):
        build_assets.build(["ja-en"], data=tmp_path, runs=tmp_path / "runs")
    with pytest.raises(ValueError, match="--from-run packs one model"):
        build_assets.build(["ja-en", "en-ja"], data=tmp_path, from_run=tmp_path)
    with pytest.raises(FileNotFoundError, match="--from-run .*: no such run folder"):
        build_assets.build(["demo"], data=tmp_path, from_run=tmp_path / "missing")
    assert not (tmp_path / "runs").exists()
    assert build_assets.main(["--only", "nope"]) == 2


def test_a_failed_training_stops_the_build_and_names_its_log(tmp_path):
    data = tmp_path / "data"
    write_tiny_enja(data)
    bad = (*TINY_TRANSLATOR, "model.d_model=-8")  # refused by the command before any data is read
    builds = {
        "ja-en": PresetTranslator("ja-en", preset="ja-en", src="ja", tgt="en", overrides=bad),
        "en-ja": PresetTranslator("en-ja", preset="en-ja", src="en", tgt="ja", overrides=bad),
    }
    runs = tmp_path / "runs"
    with pytest.raises(RuntimeError, match=r"the training of ja-en failed \(exit status 2\); see .*ja-en.log"):
        build_assets.build(None, data=data, runs=runs, root=tmp_path / "assets", builds=builds, log=lambda line: None)
    assert "d_model" in (runs / "ja-en.log").read_text(encoding="utf-8")
    assert not (tmp_path / "assets").exists()


# --------------------------------------------------------------------------------------------
# Every shipped model present, against its card.
# --------------------------------------------------------------------------------------------
