"""The models shipped with attnlab: the registry, one resolution path for names and folders, fp16
packing, the explorer's default models, the model card, the size budget, `make models` on tiny
stand-ins, and every shipped model present against its own card.

The stand-in assets are built into a temporary folder that takes the place of attnlab/assets
(``assets.ROOT`` is monkeypatched); the real ones are checked where they are installed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient
from safetensors import safe_open

from attnlab import assets
from attnlab import checkpoint as ckpt
from attnlab.assets import locate
from attnlab.assets.cards import ModelCard, read_model_card, write_model_card
from attnlab.build_assets import (
    BUILDS,
    config_differences,
)
from attnlab.cli import COMMANDS
from attnlab.cli import main as cli_main
from attnlab.loading import load_model
from attnlab.web.app import create_app
from attnlab.web.models import load_explorer_model, shipped_explorer_models

REPO = Path(__file__).resolve().parents[2]
LOCAL = "http://127.0.0.1:8000"
# The corpora of the real assets' quality checks (never copied into the repository).
DATA = Path(os.environ.get("ATTNLAB_DATA", REPO.parent / "shared" / "data"))
NUMBERS = ["three hundred", "seven", "forty-two thousand", "nine million", "five hundred six"]


# --------------------------------------------------------------------------------------------
# Tiny trained models and a stand-in assets folder.
# --------------------------------------------------------------------------------------------


def train_tiny_translator(out: Path, steps: int) -> Path:
    """The "tiny" translation recipe on generated number pairs (as tests/web/test_web_api.py)."""
    from attnlab.data.tasks import make_splits
    from attnlab.recipes.translate import PRESETS as TRANSLATE_PRESETS
    from attnlab.recipes.translate import train_translation
    from attnlab.train import TrainConfig

    splits = make_splits("numbers-en-ja", 300, 8, 0, seed=0)
    setup = dataclasses.replace(
        TRANSLATE_PRESETS["tiny"],
        eval_sentences=4,
        metric="loss",
        train=TrainConfig(
            out_dir=str(out), max_steps=steps, epochs=100, lr=3e-3, warmup_steps=10, log_every=1000, progress=False
        ),
    )
    train_translation(setup, splits.train, splits.valid)
    return out


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    # Enough steps that greedy decoding writes real numerals, with clear margins between tokens.
    return train_tiny_translator(tmp_path_factory.mktemp("tiny-translator"), steps=150)


@pytest.fixture
def asset_root(tmp_path, monkeypatch, tiny_run) -> Path:
    """A stand-in assets folder holding one packed model as "demo"; every other asset is absent."""
    root = tmp_path / "assets"
    ckpt.pack_checkpoint(tiny_run, root / "demo")
    monkeypatch.setattr(assets, "ROOT", root)
    monkeypatch.chdir(tmp_path)  # where no folder is called like a shipped model
    return root


# --------------------------------------------------------------------------------------------
# The registry.
# --------------------------------------------------------------------------------------------


def test_registry_names_folders_descriptions_and_examples():
    assert list(assets.ASSETS) == [
        "demo",
        "ja-en",
        "en-ja",
        "rnn-attention",
        "rnn-plain",
        "shakespeare-char",
        "ja-sentence-type",
        "shakespeare-mlm",
        "facts-summarizer",
        "facts-qa",
        "digits-vit",
        "karate-gat",
    ]
    assert set(assets.SHIPPED) == set(assets.ASSETS) | {"minilm"}
    for name, entry in assets.SHIPPED.items():
        assert entry.name == name
        assert (entry.folder == name) if name in assets.ASSETS else (entry.folder is None and entry.package)
        assert entry.command in COMMANDS, f"{name}: no `attnlab {entry.command}` command"
        assert entry.description_en.strip() and entry.description_ja.strip()
        assert any("\u3040" <= ch <= "\u9fff" for ch in entry.description_ja), f"{name}: Japanese description"
        assert entry.examples and all(e.strip() for e in entry.examples)
    assert "猫が犬を追いかけている。" in assets.ASSETS["ja-en"].examples
    assert "three hundred forty-two thousand" in assets.ASSETS["demo"].examples
    # Every shipped model has a build in `make models`, and nothing else has one.
    assert set(BUILDS) == set(assets.ASSETS)
    assert all(asset_build.name == name for name, asset_build in BUILDS.items())


def test_registry_module_is_data_only():
    """Importing the registry loads nothing beyond ``dataclasses`` and ``pathlib``: no PyTorch, no
    other attnlab module (measured in a fresh process, not read from the source)."""
    code = (
        "import sys, dataclasses, pathlib; before = set(sys.modules); import attnlab.assets; "
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["attnlab", "attnlab.assets"]


def test_assets_are_package_data_in_the_wheel():
    """Every file of every shipped model is matched by the package data that setuptools puts in
    the wheel (its globs, relative to the package), and ``make models`` runs the asset build."""
    from setuptools.config.pyprojecttoml import read_configuration

    config = read_configuration(REPO / "pyproject.toml", expand=False)  # as setuptools reads it
    package = REPO / "attnlab"
    packaged = {p for pattern in config["tool"]["setuptools"]["package-data"]["attnlab"] for p in package.glob(pattern)}
    shipped = [p for name in assets.ASSETS for p in (package / "assets" / name).rglob("*") if p.is_file()]
    assert {name for name in assets.ASSETS if (package / "assets" / name / "config.json").is_file()} == set(
        assets.ASSETS
    )
    assert shipped and not [str(p.relative_to(REPO)) for p in shipped if p not in packaged]
    dry_run = subprocess.run(["make", "-n", "models"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert "-m attnlab.build_assets" in dry_run


def test_the_shipped_models_fit_the_size_budget():
    total = assets.total_bytes()
    sizes = {name: f"{size / 1e6:.1f} MB" for name, size in assets.folder_bytes().items()}
    assert total <= assets.BUDGET_BYTES == 24_000_000, f"{total / 1e6:.1f} MB: {sizes}"


# --------------------------------------------------------------------------------------------
# One resolution path: a folder wins, then a shipped name; clear errors otherwise.
# --------------------------------------------------------------------------------------------


def test_a_shipped_name_resolves_to_its_asset_folder(asset_root):
    assert locate.resolve_model_dir("demo") == asset_root / "demo"
    assert locate.resolve_model_dir(Path("demo")) == asset_root / "demo"
    assert locate.shipped_models_present() == ["demo", "minilm"]


def test_an_existing_folder_wins_over_a_shipped_name(asset_root, tmp_path, monkeypatch, tiny_run):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "demo").mkdir()
    with pytest.raises(FileNotFoundError, match="no model found"):
        locate.resolve_model_dir("demo")  # the folder is taken, though it holds no model
    (tmp_path / "demo").rmdir()
    (tmp_path / "demo").symlink_to(tiny_run)
    assert locate.resolve_model_dir("demo") == Path("demo") / "best"


def test_an_unknown_name_lists_the_shipped_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="model directory not found") as err:
        locate.resolve_model_dir("ja_en")
    assert (
        "not a shipped model (demo, ja-en, en-ja, rnn-attention, rnn-plain, shakespeare-char, ja-sentence-type, "
        "shakespeare-mlm, facts-summarizer, facts-qa, digits-vit, karate-gat, minilm)" in str(err.value)
    )
    with pytest.raises(FileNotFoundError, match="no shipped model is called 'nope'"):
        locate.shipped_model_dir("nope")


def test_a_listed_model_without_weights_says_to_run_make_models(asset_root):
    with pytest.raises(FileNotFoundError, match=r"ja-en is a shipped model, but its weights are not built") as err:
        locate.resolve_model_dir("ja-en")
    assert "make models ONLY=ja-en" in str(err.value)
    # An asset folder holding only part of a checkpoint is not present either.
    (asset_root / "en-ja").mkdir()
    (asset_root / "en-ja" / "config.json").write_text('{"model_type": "transformer"}')
    with pytest.raises(FileNotFoundError, match="make models"):
        locate.resolve_model_dir("en-ja")


def test_minilm_resolves_through_the_same_path():
    from attnlab.models.convert_hf import minilm_dir

    assert locate.resolve_model_dir("minilm") == minilm_dir()


def test_shipped_names_work_in_every_command_that_takes_a_model(asset_root, tmp_path, capsys):
    assert cli_main(["translate", "--model", "demo", "--beam", "1", *NUMBERS[:2]]) == 0
    expected = [t.text for t in load_model(asset_root / "demo", family="translate").translate(NUMBERS[:2], beam_size=1)]
    assert capsys.readouterr().out.splitlines() == expected
    assert cli_main(["translate", "--model", "ja-en", "猫が犬を追いかけている。"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnlab: error: ja-en is a shipped model") and "make models" in err
    assert cli_main(["generate", "--model", "shakespeare-char", "--prompt", "ROMEO:"]) == 2
    assert "make models ONLY=shakespeare-char" in capsys.readouterr().err
    (tmp_path / "src.txt").write_text("seven\n")
    (tmp_path / "ref.txt").write_text("七\n")
    assert cli_main(["evaluate", "--model", "demo", "--src", "src.txt", "--ref", "ref.txt", "--beam", "1"]) == 0
    assert capsys.readouterr().out.startswith("BLEU ")
    assert cli_main(["evaluate", "--model", "nonexistent", "--src", "src.txt", "--ref", "ref.txt"]) == 2
    assert "not a shipped model (demo, ja-en" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# fp16 packing.
# --------------------------------------------------------------------------------------------


def test_packing_stores_fp16_and_loads_fp32_weights_equal_to_the_originals(tiny_run, tmp_path):
    packed = ckpt.pack_checkpoint(tiny_run, tmp_path / "packed")
    original = ckpt.load_checkpoint(tiny_run / "best")
    loaded = ckpt.load_checkpoint(packed)
    assert loaded.state_dict.keys() == original.state_dict.keys()
    for name, weight in original.state_dict.items():
        got = loaded.state_dict[name]
        assert got.dtype == weight.dtype == torch.float32, name
        torch.testing.assert_close(got, weight.half().float(), rtol=0, atol=0)  # exactly fp16's rounding
        torch.testing.assert_close(got, weight, rtol=1e-3, atol=1e-4)
    with safe_open(str(packed / ckpt.WEIGHTS_FILE), framework="pt") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"F16"}  # noqa: SIM118
    assert (packed / ckpt.WEIGHTS_FILE).stat().st_size < 0.6 * (tiny_run / "best" / ckpt.WEIGHTS_FILE).stat().st_size
    assert not (packed / ckpt.TRAINER_STATE_FILE).exists()
    assert loaded.config == original.config
    for name, files in original.tokenizer_files.items():
        assert [f.read_bytes() for f in loaded.tokenizer_files[name]] == [f.read_bytes() for f in files]
    # The tied output projection stays one tensor, and packing a packed model changes nothing.
    assert loaded.state_dict["out_proj.weight"] is loaded.state_dict["tgt_embed.weight"]
    again = ckpt.load_checkpoint(ckpt.pack_checkpoint(packed, tmp_path / "again"))
    assert all(torch.equal(again.state_dict[k], v) for k, v in loaded.state_dict.items())


def test_the_packed_model_translates_as_the_original(tiny_run, tmp_path):
    packed = load_model(ckpt.pack_checkpoint(tiny_run, tmp_path / "packed"), family="translate")
    assert all(p.dtype == torch.float32 for p in packed.model.parameters())
    original = [t.text for t in load_model(tiny_run, family="translate").translate(NUMBERS, beam_size=1)]
    assert [t.text for t in packed.translate(NUMBERS, beam_size=1)] == original
    assert any(len(text) >= 2 for text in original)  # a model that writes numerals, not an empty one


def test_packing_refuses_what_fp16_cannot_hold(tmp_path):
    model = torch.nn.Linear(3, 2)
    with torch.no_grad():
        model.weight[0, 1] = 1e5
    ckpt.save_checkpoint(tmp_path / "big", model=model, config={"model_type": "linear"})
    with pytest.raises(ValueError, match=r"'weight' holds a value of magnitude 1e\+05"):
        ckpt.pack_checkpoint(tmp_path / "big", tmp_path / "packed")
    assert not (tmp_path / "packed").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("not a checkpoint")
    with torch.no_grad():
        model.weight[0, 1] = 1.0
    ckpt.save_checkpoint(tmp_path / "small", model=model, config={"model_type": "linear"})
    with pytest.raises(FileExistsError, match="not a checkpoint"):
        ckpt.pack_checkpoint(tmp_path / "small", tmp_path / "mine")
    with pytest.raises(ValueError, match="float16, bfloat16 or int8"):
        ckpt.pack_checkpoint(tmp_path / "small", tmp_path / "packed", dtype=torch.int16)


def test_int8_packing_stores_each_matrix_row_with_its_scale_and_loads_it_back(tiny_run, tmp_path):
    packed = ckpt.pack_checkpoint(tiny_run, tmp_path / "int8", dtype=torch.int8)
    original = ckpt.load_checkpoint(tiny_run / "best")
    loaded = ckpt.load_checkpoint(packed)
    assert loaded.state_dict.keys() == original.state_dict.keys()  # the scales are not weights
    with safe_open(str(packed / ckpt.WEIGHTS_FILE), framework="pt") as f:
        stored = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    for name, weight in original.state_dict.items():
        got = loaded.state_dict[name]
        assert got.dtype == torch.float32, name
        if name not in stored:  # a tied name (out_proj.weight): stored once, under the name it is tied to
            continue
        if weight.ndim == 2:
            q, scale = stored[name], stored[name + ".int8_scale"]
            assert q.dtype == torch.int8 and scale.shape == (weight.shape[0],)
            live = weight.abs().amax(dim=1) > 0  # (rows,): a zero row (the padding embedding) stays zero
            assert bool((q.abs().amax(dim=1)[live] == 127).all()) and not bool(q[~live].any())
            # Each value is within half a step of its row's scale, the step being max|row| / 127.
            step = weight.abs().amax(dim=1, keepdim=True) / 127  # (rows, 1)
            assert bool(((got - weight).abs() <= step / 2 + 1e-7).all()), name
        else:
            assert stored[name].dtype == torch.float16, name
            torch.testing.assert_close(got, weight.half().float(), rtol=0, atol=0)
    assert loaded.state_dict["out_proj.weight"] is loaded.state_dict["tgt_embed.weight"]
    # One byte per matrix weight (fp16 vectors and fp32 row scales beside them) against fp32's four;
    # a model this tiny keeps more of its bytes in vectors and scales than the shipped ones do (0.25).
    assert (packed / ckpt.WEIGHTS_FILE).stat().st_size < 0.4 * (tiny_run / "best" / ckpt.WEIGHTS_FILE).stat().st_size
    translator = load_model(packed, family="translate")
    assert len(translator.translate(NUMBERS, beam_size=1)) == len(NUMBERS)


def test_an_int8_checkpoint_whose_scales_do_not_fit_is_refused(tiny_run, tmp_path):
    from safetensors.torch import save_file

    packed = ckpt.pack_checkpoint(tiny_run, tmp_path / "int8", dtype=torch.int8)
    with safe_open(str(packed / ckpt.WEIGHTS_FILE), framework="pt") as f:
        stored, metadata = {k: f.get_tensor(k) for k in f.keys()}, f.metadata()  # noqa: SIM118
    name = "tgt_embed.weight"
    stored[name + ".int8_scale"] = stored[name + ".int8_scale"][:-1]
    save_file(stored, str(packed / ckpt.WEIGHTS_FILE), metadata=metadata)
    with pytest.raises(ValueError, match=r"names 'tgt_embed.weight' with scales .* which do not match"):
        ckpt.load_checkpoint(packed)


# --------------------------------------------------------------------------------------------
# The explorer offers every shipped model present, with examples.
# --------------------------------------------------------------------------------------------


def test_explorer_offers_the_shipped_models_with_their_examples(asset_root):
    models, missing = shipped_explorer_models()
    assert [m.name for m in models] == ["demo", "minilm"]
    assert missing == [
        "ja-en",
        "en-ja",
        "rnn-attention",
        "rnn-plain",
        "shakespeare-char",
        "ja-sentence-type",
        "shakespeare-mlm",
        "facts-summarizer",
        "facts-qa",
        "digits-vit",
        "karate-gat",
    ]
    client = TestClient(create_app(models), base_url=LOCAL)
    listed = {m["name"]: m for m in client.get("/api/models").json()}
    demo = assets.ASSETS["demo"]
    assert listed["demo"] == {
        "name": "demo",
        "kind": "translator",
        "description": {"en": demo.description_en, "ja": demo.description_ja},
        "examples": list(demo.examples),
    }
    assert listed["minilm"]["kind"] == "encoder" and listed["minilm"]["examples"] == list(
        assets.PACKAGED["minilm"].examples
    )
    for example in listed["demo"]["examples"]:
        r = client.post("/api/run", json={"model": "demo", "text": example})
        assert r.status_code == 200, r.text
        assert (
            r.json()["output"]
            == load_model(asset_root / "demo", family="translate").translate([example], beam_size=1)[0].text
        )


def test_a_model_given_by_folder_has_no_description(tiny_run):
    model = load_explorer_model(tiny_run)
    info = TestClient(create_app([model]), base_url=LOCAL).get("/api/models").json()
    assert info == [{"name": tiny_run.name, "kind": "translator", "description": None, "examples": []}]


def test_explore_without_models_serves_the_shipped_ones(asset_root, monkeypatch, capsys):
    import attnlab.web.app as web_app

    served = {}
    monkeypatch.setattr(web_app, "serve", lambda models, **kw: served.update(models=[m.name for m in models]))
    assert cli_main(["explore", "--port", "8123"]) == 0
    assert served["models"] == ["demo", "minilm"]
    assert "not installed, so not offered: ja-en, en-ja" in capsys.readouterr().err
    assert cli_main(["explore", "--port", "8123", "--model", "demo"]) == 0
    assert served["models"] == ["demo"]


# --------------------------------------------------------------------------------------------
# The model card.
# --------------------------------------------------------------------------------------------


def card_facts(**changes) -> ModelCard:
    facts = dict(
        name="ja-en",
        description_en="Short Japanese sentences into English.",
        description_ja="短い日本語の文を英語に訳します。",
        usage='attnlab translate --model ja-en "猫が犬を追いかけている。"',
        command="attnlab train translate --preset ja-en --out runs/models/ja-en --seed 0",
        seed=0,
        data="small_parallel_enja, 50,000 training pairs",
        licence="Tanaka corpus: public domain / CC-BY",
        date="2025-11-30",
        parameters=4_699_904,
        weights_bytes=9_400_000,
        metrics={"bleu": 21.346, "chrf": 45.6, "exact_match": 0.123, "n": 500},
        evaluation="the 500 test pairs; beam 4",
        check={"metric": "bleu", "value": 20.5, "higher_is_better": True, "tolerance": 1.0, "n": 100, "how": "greedy"},
        example_outputs={"猫が犬を追いかけている。": "the cat is chasing the dog."},
        reproduce="attnlab evaluate --model ja-en --src test.ja --ref test.en --from-tokenized",
    )
    return ModelCard(**{**facts, **changes})


def test_model_card_states_the_facts_and_round_trips(tmp_path):
    path = write_model_card(tmp_path, card_facts())
    text = path.read_text(encoding="utf-8")
    for fact in (
        "# ja-en",
        "短い日本語の文を英語に訳します。",
        "- Command: `attnlab train translate --preset ja-en --out runs/models/ja-en --seed 0`",
        "- Seed: 0",
        "- Data: small_parallel_enja, 50,000 training pairs",
        "- Licence: Tanaka corpus: public domain / CC-BY",
        "- Packed: 2025-11-30",
        "4,699,904 parameters; weights 9.40 MB",
        "| bleu | 21.35 |",
        "| exact_match | 12.3% |",
        "| n | 500 |",
        "Reproduce: `attnlab evaluate --model ja-en",
        "a copy passes with at least 19.50",
        "| 猫が犬を追いかけている。 | the cat is chasing the dog. |",
    ):
        assert fact in text, fact
    assert "Packed from" not in text
    assert read_model_card(tmp_path) == card_facts()
    write_model_card(tmp_path, card_facts(packed_from="/work/runs/ja-en"))
    assert "Packed from the run folder `/work/runs/ja-en`" in (tmp_path / "MODEL_CARD.md").read_text(encoding="utf-8")
    (tmp_path / "card.json").write_text(json.dumps({"name": "x"}))
    with pytest.raises(ValueError, match="not a model card"):
        read_model_card(tmp_path)


def test_config_differences_name_each_entry():
    assert config_differences({"a": (1, 2), "b": 3}, {"a": [1, 2], "b": 3}) == []
    assert config_differences({"a": 1, "b": 3}, {"a": 2, "c": 4}) == [
        "a: 2 (expected 1)",
        "b: absent (expected 3)",
        "c: 4 (expected absent)",
    ]


# --------------------------------------------------------------------------------------------
# `make models` on tiny stand-ins.
# --------------------------------------------------------------------------------------------


def built(name: str) -> Path:
    folder = assets.asset_folder(name)
    if not (folder / ckpt.WEIGHTS_FILE).is_file():
        pytest.skip(f"{name}: weights not built yet (run `make models ONLY={name}`)")
    return folder


@pytest.mark.parametrize("name", list(assets.ASSETS))
def test_shipped_model_loads_with_the_config_make_models_writes(name):
    folder = built(name)
    asset_build, card = BUILDS[name], read_model_card(folder)
    assert (
        config_differences(asset_build.expected_config(folder), json.loads((folder / "config.json").read_text())) == []
    )
    loaded = ckpt.load_checkpoint(folder)
    assert all(t.dtype == torch.float32 for t in loaded.state_dict.values() if t.is_floating_point())
    assert card.name == name and card.command.startswith("attnlab ") and card.date and card.data and card.licence
    assert card.example_outputs == asset_build.example_outputs(folder, assets.ASSETS[name].examples)


@pytest.mark.parametrize("name", list(assets.ASSETS))
def test_shipped_model_meets_its_cards_quality_on_a_fast_held_out_subset(name):
    folder = built(name)
    asset_build, card = BUILDS[name], read_model_card(folder)
    missing = [p for p in asset_build.needs(DATA, training=False) if not p.is_file()]
    if missing:
        pytest.skip(f"{name}: its held-out data {missing[0]} is not here (set ATTNLAB_DATA to the corpora folder)")
    measured, check = asset_build.measure_check(folder, DATA), card.check
    if check["higher_is_better"]:
        assert measured >= check["value"] - check["tolerance"], (measured, check)
    else:
        assert measured <= check["value"] + check["tolerance"], (measured, check)


def test_a_joint_vocabulary_is_stored_once_and_loads_as_one_tokenizer(tiny_run, tmp_path):
    best = tiny_run / "best"
    files = ckpt.tokenizer_paths(best)
    assert files["src_tokenizer"] == files["tgt_tokenizer"]  # one file for both names
    assert not (best / "tgt_tokenizer.json").exists()
    translator = load_model(best, family="translate")
    assert translator.src_tok is translator.tgt_tok
    # A checkpoint written before this (two identical files) packs into one file too.
    legacy = tmp_path / "legacy"
    shutil.copytree(best, legacy)
    (legacy / "tgt_tokenizer.json").write_bytes((legacy / "src_tokenizer.json").read_bytes())
    (legacy / ckpt.TOKENIZERS_FILE).write_text(
        json.dumps({"src_tokenizer": ["src_tokenizer.json"], "tgt_tokenizer": ["tgt_tokenizer.json"]})
    )
    assert load_model(legacy, family="translate").src_tok is not load_model(legacy, family="translate").tgt_tok
    packed = ckpt.pack_checkpoint(legacy, tmp_path / "packed")
    assert ckpt.tokenizer_paths(packed)["tgt_tokenizer"] == [packed / "src_tokenizer.json"]
    assert not (packed / "tgt_tokenizer.json").exists()
    again = load_model(packed, family="translate")
    assert [t.text for t in again.translate(NUMBERS, beam_size=1)] == [
        t.text for t in translator.translate(NUMBERS, beam_size=1)
    ]
