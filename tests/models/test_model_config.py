"""The model configs' shared pieces: presets, the GPT/BERT checks, and config.json round trips.

The stored dicts below are the ``config.json`` contents GPT and BERT checkpoints are written
with, and were written with before issue 38 gave every config one vocabulary (GPT-2's ``n_embd``,
``n_layer``, ``n_head`` then): both must keep loading.
"""

from __future__ import annotations

import json

import pytest

from attnlab.models.bert import BertConfig, bert_config
from attnlab.models.captioner import captioner_config
from attnlab.models.classifier import classifier_config
from attnlab.models.config import StackConfig, preset_config
from attnlab.models.gat import gat_config
from attnlab.models.gpt import GPTConfig, gpt_config
from attnlab.models.vit import vit_config

GPT_JSON = """{"vocab_size": 65, "n_positions": 256, "d_model": 192, "n_layers": 6, "n_heads": 6, "n_inner": null,
 "activation": "gelu", "layer_norm_eps": 1e-05, "bias": true, "dropout": 0.0, "positions": "learned",
 "rotary_base": 10000.0, "init_std": 0.02, "backend": "auto", "attention": "full", "window": null,
 "n_global": 0, "model_type": "gpt"}"""

BERT_JSON = """{"vocab_size": 30522, "n_positions": 512, "d_model": 384, "n_layers": 6, "n_heads": 12,
 "n_inner": 1536, "activation": "gelu", "layer_norm_eps": 1e-12, "bias": true, "dropout": 0.1,
 "type_vocab_size": 2, "pad_id": 0, "next_sentence_head": false, "init_std": 0.02, "backend": "auto",
 "attention": "full", "window": null, "n_global": 0, "model_type": "bert_qa"}"""

# The same two configs as written before issue 38, with GPT-2's names for width, layers and heads.
OLD_GPT_JSON = """{"vocab_size": 65, "n_positions": 256, "n_embd": 192, "n_layer": 6, "n_head": 6, "n_inner": null,
 "activation": "gelu", "layer_norm_eps": 1e-05, "bias": true, "dropout": 0.0, "positions": "learned",
 "rotary_base": 10000.0, "init_std": 0.02, "backend": "auto", "attention": "full", "window": null,
 "n_global": 0, "model_type": "gpt"}"""

OLD_BERT_JSON = """{"vocab_size": 30522, "n_positions": 512, "n_embd": 384, "n_layer": 6, "n_head": 12,
 "n_inner": 1536, "activation": "gelu", "layer_norm_eps": 1e-12, "bias": true, "dropout": 0.1,
 "type_vocab_size": 2, "pad_id": 0, "next_sentence_head": false, "init_std": 0.02, "backend": "auto",
 "attention": "full", "window": null, "n_global": 0, "model_type": "bert_qa"}"""


def test_config_json_loads_and_round_trips():
    gpt = GPTConfig.from_dict(json.loads(GPT_JSON))
    assert gpt == gpt_config("shakespeare-char", vocab_size=65)
    assert gpt.to_dict() == json.loads(GPT_JSON)
    bert = BertConfig.from_dict(json.loads(BERT_JSON))
    assert bert == bert_config("minilm-l6", model_type="bert_qa")
    assert bert.to_dict() == json.loads(BERT_JSON)
    assert list(bert.to_dict()) == list(json.loads(BERT_JSON))  # same keys, same order


def test_config_json_written_before_the_rename_still_loads_and_is_written_back_with_the_new_names():
    gpt = GPTConfig.from_dict(json.loads(OLD_GPT_JSON))
    assert gpt == gpt_config("shakespeare-char", vocab_size=65)
    assert (gpt.d_model, gpt.n_layers, gpt.n_heads) == (192, 6, 6)
    assert gpt.to_dict() == json.loads(GPT_JSON)
    bert = BertConfig.from_dict(json.loads(OLD_BERT_JSON))
    assert bert == bert_config("minilm-l6", model_type="bert_qa")
    assert list(bert.to_dict()) == list(json.loads(BERT_JSON))  # the old keys' places, under the new names
    with pytest.raises(ValueError, match="both 'n_embd' and its new name 'd_model' are given; keep one"):
        GPTConfig.from_dict({**json.loads(GPT_JSON), "n_embd": 192})


@pytest.mark.parametrize("make", [gpt_config, bert_config])
@pytest.mark.parametrize("old, new", [("n_embd", "d_model"), ("n_layer", "n_layers"), ("n_head", "n_heads")])
def test_a_setting_with_an_old_name_is_refused_naming_the_new_one(make, old, new):
    with pytest.raises(ValueError, match=f"^{old} is now called {new} .*; write {new}=...$"):
        make("tiny", **{old: 4})


@pytest.mark.parametrize("cls", [GPTConfig, BertConfig])
def test_gpt_and_bert_share_their_checks(cls):
    assert issubclass(cls, StackConfig)
    with pytest.raises(ValueError, match="divisible"):
        cls(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="activation"):
        cls(activation="swish")
    with pytest.raises(ValueError, match="n_layers must be ≥ 1"):
        cls(n_layers=0)
    with pytest.raises(ValueError, match="window"):
        cls(attention="sliding_window")
    with pytest.raises(ValueError, match=f"unknown {cls.__name__} fields"):
        cls.from_dict({"d_model": 64, "width": 3})
    c = cls(d_model=64, n_heads=4, n_inner=None)
    assert c.d_ff == 256
    assert c.attention_spec().name == "full"


def test_each_model_keeps_its_own_checks():
    with pytest.raises(ValueError, match="positions"):
        GPTConfig(positions="sinusoidal")
    with pytest.raises(ValueError, match="type_vocab_size"):
        BertConfig(type_vocab_size=0)


@pytest.mark.parametrize("make, family", [
    (gpt_config, "GPT"), (bert_config, "BERT"), (vit_config, "ViT"), (captioner_config, "captioner"),
    (classifier_config, "classifier"), (gat_config, "GAT"),
])  # fmt: skip
def test_every_preset_function_names_its_model_in_the_error(make, family):
    with pytest.raises(ValueError, match=f"unknown {family} preset 'nope'; choose from"):
        make("nope")


def test_preset_config_overrides_any_field_name():
    class Cfg:
        def __init__(self, **kw):
            self.kw = kw

    made = preset_config(Cfg, {"a": {"preset": 1, "cls": 2}}, "a", "test", preset=3, family=4)
    assert made.kw == {"preset": 3, "cls": 2, "family": 4}
    # An old GPT-2 name is refused only for a config that has the field under its new name.
    assert preset_config(Cfg, {"a": {}}, "a", "test", n_embd=5).kw == {"n_embd": 5}
