"""The model configs' shared pieces: presets, the GPT/BERT checks, and config.json round trips.

The stored dicts below are the ``config.json`` contents GPT and BERT checkpoints were written
with; they must keep loading.
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

GPT_JSON = """{"vocab_size": 65, "n_positions": 256, "n_embd": 192, "n_layer": 6, "n_head": 6, "n_inner": null,
 "activation": "gelu", "layer_norm_eps": 1e-05, "bias": true, "dropout": 0.0, "positions": "learned",
 "rotary_base": 10000.0, "init_std": 0.02, "backend": "auto", "attention": "full", "window": null,
 "n_global": 0, "model_type": "gpt"}"""

BERT_JSON = """{"vocab_size": 30522, "n_positions": 512, "n_embd": 384, "n_layer": 6, "n_head": 12,
 "n_inner": 1536, "activation": "gelu", "layer_norm_eps": 1e-12, "bias": true, "dropout": 0.1,
 "type_vocab_size": 2, "pad_id": 0, "next_sentence_head": false, "init_std": 0.02, "backend": "auto",
 "attention": "full", "window": null, "n_global": 0, "model_type": "bert_qa"}"""


def test_config_json_written_before_still_loads_and_round_trips():
    gpt = GPTConfig.from_dict(json.loads(GPT_JSON))
    assert gpt == gpt_config("shakespeare-char", vocab_size=65)
    assert gpt.to_dict() == json.loads(GPT_JSON)
    bert = BertConfig.from_dict(json.loads(BERT_JSON))
    assert bert == bert_config("minilm-l6", model_type="bert_qa")
    assert bert.to_dict() == json.loads(BERT_JSON)
    assert list(bert.to_dict()) == list(json.loads(BERT_JSON))  # same keys, same order


@pytest.mark.parametrize("cls", [GPTConfig, BertConfig])
def test_gpt_and_bert_share_their_checks(cls):
    assert issubclass(cls, StackConfig)
    with pytest.raises(ValueError, match="divisible"):
        cls(n_embd=30, n_head=4)
    with pytest.raises(ValueError, match="activation"):
        cls(activation="swish")
    with pytest.raises(ValueError, match="n_layer must be ≥ 1"):
        cls(n_layer=0)
    with pytest.raises(ValueError, match="window"):
        cls(attention="sliding_window")
    with pytest.raises(ValueError, match=f"unknown {cls.__name__} fields"):
        cls.from_dict({"n_embd": 64, "width": 3})
    c = cls(n_embd=64, n_head=4, n_inner=None)
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
