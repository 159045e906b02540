"""attnlab.models.bert: masking statistics, padding, bidirectionality, the heads, pooling.

References: counting on large samples for :func:`mask_tokens`, per-sentence loops for
:func:`mean_pool` and padding, per-position log-softmax for the loss. (Equality with
HuggingFace's BERT and sentence-transformers is in test_convert_hf.py.)
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlab.models.bert import (
    PRESETS,
    BertConfig,
    BertForMaskedLM,
    BertModel,
    bert_config,
    fill_mask,
    mask_tokens,
    mean_pool,
    sentence_embeddings,
)

V = 50


def tiny(**kw) -> BertModel:
    torch.manual_seed(0)
    return BertModel(bert_config("tiny", **{"vocab_size": V, **kw})).eval()


def tiny_mlm(**kw) -> BertForMaskedLM:
    torch.manual_seed(0)
    return BertForMaskedLM(bert_config("tiny", **{"vocab_size": V, **kw})).eval()


# --------------------------------------------------------------------------------------------
# Masking.
# --------------------------------------------------------------------------------------------


def test_mask_tokens_proportions_on_a_large_sample():
    g = torch.Generator().manual_seed(0)
    vocab, mask_id, specials = 1000, 4, [0, 1, 2, 3]
    ids = torch.randint(5, vocab, (400, 250), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3  # [CLS] … [SEP]
    ids[::3, -60:] = 0  # padding
    corrupted, labels = mask_tokens(ids, mask_id=mask_id, vocab_size=vocab, special_ids=specials, generator=g)
    special = ids < 4
    selected = labels != -100
    n_ordinary = int((~special).sum())
    # 15% of the ordinary tokens; never a special token.
    assert not selected[special].any()
    assert selected.sum().item() / n_ordinary == pytest.approx(0.15, abs=0.005)
    # Labels are the original tokens where selected.
    assert torch.equal(labels[selected], ids[selected])
    # Unselected tokens are untouched.
    assert torch.equal(corrupted[~selected], ids[~selected])
    sel_orig, sel_new = ids[selected], corrupted[selected]
    n = sel_orig.numel()
    frac_mask = (sel_new == mask_id).float().mean().item()
    frac_same = (sel_new == sel_orig).float().mean().item()
    frac_random = ((sel_new != mask_id) & (sel_new != sel_orig)).float().mean().item()
    assert n > 10_000
    assert frac_mask == pytest.approx(0.8, abs=0.015)
    # A random replacement equals the original with probability 1/(V - 5); negligible here.
    assert frac_same == pytest.approx(0.1, abs=0.01)
    assert frac_random == pytest.approx(0.1, abs=0.01)
    # Random replacements are ordinary tokens, spread over the vocabulary.
    randoms = sel_new[(sel_new != mask_id) & (sel_new != sel_orig)]
    assert randoms.min() >= 5 and randoms.max() < vocab
    n_values = vocab - 5
    expected_distinct = n_values * (1 - (1 - 1 / n_values) ** randoms.numel())  # uniform draws
    assert randoms.unique().numel() == pytest.approx(expected_distinct, rel=0.05)


def test_mask_tokens_is_reproducible_and_respects_p():
    ids = torch.randint(5, 100, (8, 64))
    a = mask_tokens(ids, mask_id=4, vocab_size=100, special_ids=[0], generator=torch.Generator().manual_seed(3))
    b = mask_tokens(ids, mask_id=4, vocab_size=100, special_ids=[0], generator=torch.Generator().manual_seed(3))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    none = mask_tokens(ids, mask_id=4, vocab_size=100, special_ids=[0], p=0.0)
    assert torch.equal(none[0], ids) and (none[1] == -100).all()
    every = mask_tokens(ids, mask_id=4, vocab_size=100, special_ids=[0], p=1.0)
    assert torch.equal(every[1], ids)
    with pytest.raises(ValueError, match="p must be"):
        mask_tokens(ids, mask_id=4, vocab_size=100, special_ids=[0], p=1.5)
    with pytest.raises(ValueError, match="mask_id"):
        mask_tokens(ids, mask_id=100, vocab_size=100, special_ids=[0])


# --------------------------------------------------------------------------------------------
# The encoder.
# --------------------------------------------------------------------------------------------


def test_shapes_hidden_states_and_attentions():
    model = tiny()
    ids = torch.randint(5, V, (3, 9))
    out = model(ids, need_weights=True)
    L, H = model.config.n_layers, model.config.n_heads
    assert out.hidden_states.shape == (3, 9, 32)
    assert len(out.all_hidden_states) == L + 1
    assert out.all_hidden_states[-1] is out.hidden_states
    assert len(out.attentions) == L and out.attentions[0].shape == (3, H, 9, 9)
    assert out.pooled.shape == (3, 32)
    assert model(ids).attentions is None


def test_bidirectional_a_later_token_changes_earlier_outputs():
    model = tiny()
    ids = torch.randint(5, V, (1, 8))
    changed = ids.clone()
    changed[0, 7] = 5 if ids[0, 7] != 5 else 6
    a, b = model(ids).hidden_states, model(changed).hidden_states
    assert not torch.allclose(a[0, 0], b[0, 0])


def test_padding_does_not_change_real_positions():
    model = tiny()
    sents = [torch.randint(5, V, (n,)) for n in (7, 4, 1)]
    ids = torch.zeros(3, 7, dtype=torch.long)
    mask = torch.zeros(3, 7, dtype=torch.bool)
    for i, s in enumerate(sents):
        ids[i, : len(s)], mask[i, : len(s)] = s, True
    out = model(ids, attention_mask=mask, need_weights=True)
    for i, s in enumerate(sents):
        alone = model(s[None]).hidden_states[0]
        torch.testing.assert_close(out.hidden_states[i, : len(s)], alone, atol=1e-5, rtol=1e-5)
    for w in out.attentions:
        assert (w.masked_select(~mask[:, None, None, :].expand_as(w)) == 0).all()


def test_token_types_matter_and_default_to_zero():
    model = tiny()
    ids = torch.randint(5, V, (2, 6))
    zeros = torch.zeros_like(ids)
    torch.testing.assert_close(model(ids).hidden_states, model(ids, token_type_ids=zeros).hidden_states)
    ones = torch.ones_like(ids)
    assert not torch.allclose(model(ids).hidden_states, model(ids, token_type_ids=ones).hidden_states)


def test_encoder_input_errors():
    model = tiny()
    ids = torch.randint(5, V, (2, 6))
    with pytest.raises(TypeError, match="boolean"):
        model(ids, attention_mask=torch.ones(2, 6))
    with pytest.raises(ValueError, match="attention_mask"):
        model(ids, attention_mask=torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="n_positions"):
        model(torch.zeros(1, 65, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(B, S\)"):
        model(torch.zeros(6, dtype=torch.long))


# --------------------------------------------------------------------------------------------
# Heads.
# --------------------------------------------------------------------------------------------


def test_mlm_loss_is_cross_entropy_over_selected_positions():
    model = tiny_mlm()
    ids = torch.randint(5, V, (2, 10))
    labels = torch.full_like(ids, -100)
    labels[0, 3], labels[1, 7], labels[1, 1] = 11, 12, 13
    out = model(ids, labels=labels)
    logp = torch.log_softmax(out.logits.detach().double(), -1)
    expected = -(logp[0, 3, 11] + logp[1, 7, 12] + logp[1, 1, 13]) / 3
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-5)


def test_mlm_decoder_is_tied_to_the_embeddings():
    model = tiny_mlm()
    ids = torch.randint(5, V, (1, 5))
    out = model(ids)
    h = model.mlm.norm(F.gelu(model.mlm.transform(out.hidden_states)))
    torch.testing.assert_close(out.logits, h @ model.bert.tok_emb.weight.T + model.mlm.bias)
    assert not any(p.shape == (V, 32) for n, p in model.named_parameters() if not n.startswith("bert.tok_emb"))


def test_next_sentence_head_is_optional():
    model = tiny_mlm()
    ids = torch.randint(5, V, (2, 6))
    assert model.next_sentence is None and model(ids).next_sentence_logits is None
    with pytest.raises(ValueError, match="next-sentence head"):
        model(ids, next_sentence_labels=torch.tensor([0, 1]))
    nsp = tiny_mlm(next_sentence_head=True)
    out = nsp(ids, labels=ids, next_sentence_labels=torch.tensor([0, 1]))
    assert out.next_sentence_logits.shape == (2, 2)
    mlm_only = nsp(ids, labels=ids).loss
    nsp_only = F.cross_entropy(out.next_sentence_logits, torch.tensor([0, 1]))
    assert out.loss.item() == pytest.approx((mlm_only + nsp_only).item(), rel=1e-5)


def test_a_few_steps_learn_to_fill_a_masked_pattern():
    torch.manual_seed(0)
    model = BertForMaskedLM(bert_config("tiny", vocab_size=20)).train()
    seq = torch.tensor([[2] + [5, 6, 7, 8, 9, 10] * 3 + [3]]).repeat(16, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(80):
        inp, labels = mask_tokens(seq, mask_id=4, vocab_size=20, special_ids=[0, 1, 2, 3, 4], generator=g)
        loss = model(inp, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert sum(losses[-10:]) / 10 < 0.3 * sum(losses[:10]) / 10


# --------------------------------------------------------------------------------------------
# Pooling, embeddings, fill-mask.
# --------------------------------------------------------------------------------------------


def test_mean_pool_averages_real_tokens_only():
    hidden = torch.randn(3, 5, 4)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.bool)
    pooled = mean_pool(hidden, mask)
    for i in range(3):
        torch.testing.assert_close(pooled[i], hidden[i, mask[i]].mean(0))
    torch.testing.assert_close(mean_pool(hidden), hidden.mean(1))


class _ToyTokenizer:
    """Characters a–z as ids 5…30, with BERT-style specials."""

    pad_id, unk_id, bos_id, eos_id, mask_id = 0, 1, 2, 3, 4

    def encode(self, text, **kw):
        return [5 + ord(c) - ord("a") for c in text if "a" <= c <= "z"]

    def id_to_token(self, i):
        return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"][i] if i < 5 else chr(ord("a") + i - 5)


def test_sentence_embeddings_are_normalised_mean_pools_independent_of_batching():
    model = tiny()
    tok = _ToyTokenizer()
    texts = ["abc", "hello world", "z"]
    emb = sentence_embeddings(model, tok, texts, batch_size=2)
    assert emb.shape == (3, 32)
    torch.testing.assert_close(emb.norm(dim=-1), torch.ones(3))
    for i, t in enumerate(texts):
        ids = torch.tensor([[2] + tok.encode(t) + [3]])
        ref = F.normalize(model(ids).hidden_states.mean(1), dim=-1)[0]
        torch.testing.assert_close(emb[i], ref, atol=1e-5, rtol=1e-5)
    cut = sentence_embeddings(model, tok, ["abcdefgh"], max_length=4, normalize=False)
    ref = model(torch.tensor([[2, 5, 6, 3]])).hidden_states.mean(1)
    torch.testing.assert_close(cut, ref, atol=1e-5, rtol=1e-5)
    with pytest.raises(TypeError):
        sentence_embeddings(model, tok, "abc")


def test_fill_mask_ranks_the_mlm_distribution_at_each_mask():
    model = tiny_mlm(vocab_size=31)
    tok = _ToyTokenizer()
    result = fill_mask(model, tok, "ab[MASK]c[MASK]", top_k=3)
    assert len(result) == 2 and all(len(r) == 3 for r in result)
    logits = model(torch.tensor([[2, 5, 6, 4, 7, 4, 3]])).logits[0]
    probs = torch.softmax(logits, -1)
    for row, pos in zip(result, (3, 5)):
        best = probs[pos].topk(3)
        assert [t for t, _ in row] == [tok.id_to_token(int(i)) for i in best.indices]
        assert [p for _, p in row] == pytest.approx(best.values.tolist(), rel=1e-5)
    with pytest.raises(ValueError, match="no \\[MASK\\]"):
        fill_mask(model, tok, "abc")


def test_config_validation_and_presets():
    with pytest.raises(ValueError, match="divisible"):
        BertConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="activation"):
        BertConfig(activation="swish")
    with pytest.raises(ValueError, match="unknown BERT preset"):
        bert_config("nope")
    cfg = bert_config("minilm-l6", vocab_size=30522)
    assert BertConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.d_ff == 1536
    for name, fields in PRESETS.items():
        c = BertConfig(**fields)
        assert c.d_model % c.n_heads == 0, name


# --------------------------------------------------------------------------------------------
# The `attnlab fill-mask` command on a tiny model trained here.
# --------------------------------------------------------------------------------------------


def test_fill_mask_command_prints_the_models_candidates(tmp_path, capsys):
    from attnlab.cli import main
    from attnlab.loading import load_model

    (tmp_path / "text.txt").write_text("the cat sat on the mat. " * 60, encoding="utf-8")
    out = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "mlm",
                "--text",
                str(tmp_path / "text.txt"),
                "--out",
                str(out),
                "--preset",
                "tiny",
                "--max-steps",
                "40",
                "--overrides",
                "train.progress=false",
                "train.lr=0.01",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["fill-mask", "--model", str(out), "the c[MASK]t sat on the m[MASK]t.", "--top-k", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "[MASK] #1:" and lines[4] == "[MASK] #2:" and len(lines) == 8
    model, tok = load_model(out, family="lm")
    expected = fill_mask(model, tok, "the c[MASK]t sat on the m[MASK]t.", top_k=3)
    for block, cands in zip((lines[1:4], lines[5:8]), expected):
        for line, (token, p) in zip(block, cands):
            shown_p, shown_tok = line.split("%", 1)
            assert float(shown_p) == pytest.approx(100 * p, abs=0.01)
            assert shown_tok.strip() in (token, repr(token))
    assert main(["fill-mask", "--model", str(out), "no mask here"]) == 2
    assert "no [MASK]" in capsys.readouterr().err
