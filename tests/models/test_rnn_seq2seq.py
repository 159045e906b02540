"""RNN encoder–decoders with and without attention: attention maps, the bottleneck, decoding."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import functional as AF
from attnlab.decode import beam_search, greedy_decode
from attnlab.models.rnn_seq2seq import (
    ATTENTION_KINDS,
    CELLS,
    PRESETS,
    BahdanauAttention,
    LocalPAttention,
    RNNSeq2Seq,
    RNNSeq2SeqConfig,
)

BOS, EOS, PAD = 2, 3, 0
ATTENDING = [k for k in ATTENTION_KINDS if k != "none"]
VARIANTS = [(cell, kind) for cell in CELLS for kind in ATTENTION_KINDS]


def make_model(seed=0, **overrides):
    torch.manual_seed(seed)
    fields = dict(PRESETS["tiny"], local_window=2)
    fields.update(overrides)
    return RNNSeq2Seq(RNNSeq2SeqConfig(src_vocab_size=23, tgt_vocab_size=19, **fields)).eval()


def random_batch(B=4, S=7, T=6, seed=1):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(5, 23, (B, S), generator=g)
    src[0, S - 2 :] = PAD  # padded sources of different lengths
    src[1, S - 4 :] = PAD
    tgt = torch.randint(5, 19, (B, T), generator=g)
    tgt_in = torch.cat([torch.full((B, 1), BOS), tgt], dim=1)  # (B, T+1)
    tgt_out = torch.cat([tgt, torch.full((B, 1), EOS)], dim=1)  # (B, T+1)
    return src, tgt_in, tgt_out


# --------------------------------------------------------------------------------------------
# Attention maps.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("kind", ATTENDING)
def test_weights_sum_to_one_over_real_tokens_and_ignore_padding(kind, cell):
    model = make_model(attention=kind, cell=cell)
    src, tgt_in, _ = random_batch()
    (cross,) = model(src, tgt_in, need_weights=True).attentions["cross"]
    B, T = tgt_in.shape
    assert cross.shape == (B, 1, T, src.shape[1])
    pad = (src == PAD)[:, None, None, :].expand_as(cross)
    assert torch.all(cross[pad] == 0)
    assert torch.all(cross >= 0)
    torch.testing.assert_close(cross.sum(-1), torch.ones(B, 1, T))


@pytest.mark.parametrize("kind", ATTENDING)
@settings(max_examples=8, deadline=None)
@given(lengths=st.lists(st.integers(1, 9), min_size=1, max_size=4), seed=st.integers(0, 2**16))
def test_weights_property_over_random_lengths(kind, lengths, seed):
    model = make_model(attention=kind)
    g = torch.Generator().manual_seed(seed)
    S = max(lengths)
    mask = AF.padding_mask(torch.tensor(lengths), max_len=S)  # (B, S)
    src = torch.randint(5, 23, (len(lengths), S), generator=g).masked_fill(~mask, PAD)
    hyps = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=5, return_attention=True)
    for h, n in zip(hyps, lengths):
        assert h.cross_attention.shape[:2] == (1, 1) and h.cross_attention.shape[-1] == n
        torch.testing.assert_close(h.cross_attention.sum(-1), torch.ones(h.cross_attention.shape[:-1]))


def test_none_has_no_attention_maps_anywhere():
    model = make_model(attention="none")
    src, tgt_in, _ = random_batch()
    assert model(src, tgt_in, need_weights=True).attentions == {"cross": []}
    state = model.start(src)
    assert model.step(tgt_in[:, :1], state, need_weights=True).cross_weights is None
    for hyps in (
        greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=4, return_attention=True),
        beam_search(model, src, bos_id=BOS, eos_id=EOS, beam_size=3, max_len=4, return_attention=True),
    ):
        assert all(h.cross_attention is None for h in hyps)


def test_cached_additive_attention_equals_attnlab_additive_attention():
    torch.manual_seed(0)
    attn = BahdanauAttention(query_dim=6, key_dim=8, attn_dim=5)
    query, memory = torch.randn(3, 6), torch.randn(3, 4, 8)
    mask = AF.padding_mask(torch.tensor([4, 2, 1]), max_len=4)  # (B, S)
    step = attn(query, memory, mask, attn.prepare(memory))
    a = attn.additive
    ref_out, ref_w = AF.additive_attention(
        query.unsqueeze(1),
        memory,
        memory,
        a.q_proj.weight,
        a.k_proj.weight,
        a.score,
        mask.unsqueeze(1),
        bias=a.k_proj.bias,
    )
    torch.testing.assert_close(step.weights, ref_w.squeeze(1))
    torch.testing.assert_close(step.context, ref_out.squeeze(1))


# --------------------------------------------------------------------------------------------
# Local-p attention.
# --------------------------------------------------------------------------------------------


@settings(max_examples=15, deadline=None)
@given(
    window=st.integers(1, 4), lengths=st.lists(st.integers(1, 15), min_size=1, max_size=5), seed=st.integers(0, 2**16)
)
def test_local_weights_are_zero_outside_the_window(window, lengths, seed):
    torch.manual_seed(seed)
    D = 8
    attn = LocalPAttention(D, window)
    for p in attn.parameters():  # large weights spread the predicted centres over the sentence
        torch.nn.init.normal_(p, std=1.0)
    S = max(lengths)
    mask = AF.padding_mask(torch.tensor(lengths), max_len=S)
    query, memory = torch.randn(len(lengths), D), torch.randn(len(lengths), S, D)
    out = attn(query, memory, mask)
    j = torch.arange(S).unsqueeze(0)  # (1, S)
    p = out.centre.unsqueeze(1)  # (B, 1)
    outside = ((j - p).abs() > window) | ~mask
    assert torch.all(out.weights[outside] == 0)
    assert torch.all(out.centre >= 0) and torch.all(out.centre <= torch.tensor(lengths) - 1)
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(len(lengths)))
    # Independent reference: softmax of the general score minus (j − p)²/2σ², over the window.
    scores = (attn.q_proj(query).unsqueeze(1) * memory).sum(-1) - (j - p) ** 2 / (2 * (window / 2) ** 2)
    ref = torch.softmax(scores.masked_fill(outside, -math.inf), dim=-1)
    torch.testing.assert_close(out.weights, ref)
    torch.testing.assert_close(out.context, (ref.unsqueeze(-1) * memory).sum(1))


def test_local_centre_is_trained_through_the_gaussian():
    torch.manual_seed(0)
    attn = LocalPAttention(8, 2)
    query, memory = torch.randn(2, 8), torch.randn(2, 9, 8)
    attn(query, memory, torch.ones(2, 9, dtype=torch.bool)).context.sum().backward()
    assert attn.centre_proj.weight.grad.abs().sum() > 0
    assert attn.centre_score.weight.grad.abs().sum() > 0


# --------------------------------------------------------------------------------------------
# The bottleneck.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cell", CELLS)
def test_without_attention_only_the_final_state_reaches_the_decoder(cell):
    model = make_model(attention="none", cell=cell)
    src, tgt_in, _ = random_batch()
    mask = src != PAD
    encoded = model.encode(src, mask)
    base, _ = model.decode(tgt_in, encoded, mask)
    # Any change to the encoder outputs, at every position, changes nothing...
    noisy = encoded._replace(memory=encoded.memory + 10 * torch.randn_like(encoded.memory))
    torch.testing.assert_close(model.decode(tgt_in, noisy, mask)[0], base, rtol=0, atol=0)
    memory = encoded.memory.detach().requires_grad_()
    logits, _ = model.decode(tgt_in, encoded._replace(memory=memory), mask)
    logits.sum().backward()
    assert memory.grad is None or torch.all(memory.grad == 0)
    # ...while a change to the final state does (so the test above can fail).
    bumped = encoded._replace(final=tuple(h + 0.5 for h in encoded.final))
    assert not torch.allclose(model.decode(tgt_in, bumped, mask)[0], base)
    assert model.start(src).memory is None


@pytest.mark.parametrize("kind", ATTENDING)
def test_with_attention_the_decoder_reads_every_encoder_output(kind):
    model = make_model(attention=kind, local_window=8)  # window covers the whole toy source
    src, tgt_in, _ = random_batch()
    mask = src != PAD
    encoded = model.encode(src, mask)
    memory = encoded.memory.detach().requires_grad_()
    logits, _ = model.decode(tgt_in, encoded._replace(memory=memory), mask)
    logits.sum().backward()
    touched = memory.grad.abs().sum(-1) > 0  # (B, S)
    assert torch.equal(touched, mask)


@pytest.mark.parametrize("cell", CELLS)
def test_final_state_is_the_state_after_the_last_real_token_in_each_direction(cell):
    model = make_model(cell=cell, attention="none", n_layers=2)
    src, _, _ = random_batch()
    mask = src != PAD
    memory, final = model.encode(src, mask)
    half = model.config.hidden_size // 2
    last = mask.sum(1) - 1
    rows = torch.arange(src.shape[0])
    torch.testing.assert_close(final[0][-1, :, :half], memory[rows, last, :half])  # forward read to the end
    torch.testing.assert_close(final[0][-1, :, half:], memory[:, 0, half:])  # backward read to word 1
    assert torch.all(memory[~mask] == 0)
    assert len(final) == (2 if cell == "lstm" else 1) and final[0].shape == (2, src.shape[0], 2 * half)


# --------------------------------------------------------------------------------------------
# Training and decoding.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cell,kind", VARIANTS)
def test_overfits_a_tiny_batch(cell, kind):
    model = make_model(attention=kind, cell=cell, local_window=3).train()
    src, tgt_in, tgt_out = random_batch(B=4, S=6, T=5)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    first = None
    for _ in range(150):
        loss = model(src, tgt_in, labels=tgt_out).loss
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05 < first
    model.eval()
    hyps = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=10)
    assert [h.tokens for h in hyps] == tgt_out[:, :-1].tolist()


@pytest.mark.parametrize("cell,kind", VARIANTS)
def test_cached_step_logits_equal_teacher_forced_logits(cell, kind):
    model = make_model(attention=kind, cell=cell, n_layers=2)
    src, tgt_in, _ = random_batch()
    out = model(src, tgt_in, need_weights=True)
    state = model.start(src)
    steps = [model.step(tgt_in[:, t : t + 1], state, need_weights=True) for t in range(tgt_in.shape[1])]
    torch.testing.assert_close(torch.stack([s.logits for s in steps], dim=1), out.logits, atol=1e-5, rtol=1e-5)
    if kind != "none":
        cross = torch.cat([s.cross_weights for s in steps], dim=2)  # (B, 1, T, S)
        torch.testing.assert_close(cross, out.attentions["cross"][0], atol=1e-5, rtol=1e-5)
    # Feeding several tokens at once is the same as feeding them one by one.
    state = model.start(src)
    torch.testing.assert_close(model.step(tgt_in, state).logits, out.logits[:, -1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["none", "additive", "local"])
def test_beam_size_one_equals_greedy(kind):
    model = make_model(attention=kind, cell="lstm")
    src, _, _ = random_batch(B=5, seed=3)
    greedy = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=9, return_attention=True)
    beam = beam_search(model, src, bos_id=BOS, eos_id=EOS, beam_size=1, max_len=9, alpha=0.0, return_attention=True)
    assert [h.tokens for h in beam] == [h.tokens for h in greedy]
    for g, b in zip(greedy, beam):
        assert b.score == pytest.approx(g.score, abs=1e-5)
        if kind != "none":
            torch.testing.assert_close(b.cross_attention, g.cross_attention)


def test_beam_search_reorders_the_state():
    model = make_model(attention="general")
    src, _, _ = random_batch(B=3, seed=4)
    greedy = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=8)
    beam = beam_search(model, src, bos_id=BOS, eos_id=EOS, beam_size=4, max_len=8, alpha=0.0)
    for i, (b, g) in enumerate(zip(beam, greedy)):
        assert b.score >= g.score - 1e-5
        # The beam's score is the model's own log-probability of its output (state followed the beam).
        tgt_in = torch.tensor([[BOS] + b.tokens])
        with torch.no_grad():
            logp = torch.log_softmax(model(src[i : i + 1], tgt_in).logits, -1)[0]
        seq = b.tokens + [EOS] if len(b.tokens) < 8 else b.tokens
        assert b.score == pytest.approx(sum(float(logp[t, x]) for t, x in enumerate(seq)), abs=1e-4)


@pytest.mark.parametrize("kind", ["none", "dot"])
def test_padding_in_the_source_is_invisible(kind):
    model = make_model(attention=kind)
    src, tgt_in, _ = random_batch()
    longer = torch.cat([src, torch.full((src.shape[0], 3), PAD)], dim=1)
    torch.testing.assert_close(model(longer, tgt_in).logits, model(src, tgt_in).logits, atol=1e-6, rtol=1e-5)


def test_tied_and_shared_embeddings():
    model = make_model(tie_output=True)
    assert model.out_proj.weight is model.tgt_embed.weight
    shared = RNNSeq2Seq(
        RNNSeq2SeqConfig(src_vocab_size=19, tgt_vocab_size=19, share_embeddings=True, **PRESETS["tiny"])
    )
    assert shared.src_embed is shared.tgt_embed


@pytest.mark.parametrize(
    "fields,message",
    [
        (dict(attention="bahdanau"), "unknown attention 'bahdanau'"),
        (dict(cell="rnn"), "unknown RNN cell 'rnn'"),
        (dict(hidden_size=33), "odd hidden_size=33"),
        (dict(local_window=0), "local_window must be a positive integer"),
        (dict(dropout=1.0), r"dropout must be in \[0, 1\)"),
    ],
)
def test_bad_configs_are_named(fields, message):
    with pytest.raises(ValueError, match=message):
        RNNSeq2Seq(RNNSeq2SeqConfig(src_vocab_size=10, tgt_vocab_size=10, **dict(PRESETS["tiny"], **fields)))


def test_left_padded_or_empty_sources_are_rejected():
    model = make_model()
    src = torch.tensor([[PAD, 5, 6], [7, 8, 9]])
    with pytest.raises(ValueError, match="right-padded"):
        model.start(src)
    with pytest.raises(ValueError, match=r"source rows \[0\] have no real token"):
        model.start(torch.tensor([[PAD, PAD], [7, 8]]))
