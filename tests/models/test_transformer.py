"""The encoder–decoder Transformer and its decoding: invariants that must hold for any weights."""

import pytest
import torch

from attnlab import accel
from attnlab.accel import engine
from attnlab.accel.engine import NativeDecoderState
from attnlab.decode import beam_search, greedy_decode
from attnlab.models.seq2seq import DecoderState
from attnlab.models.transformer import PRESETS, Transformer, TransformerConfig

BOS, EOS, PAD = 2, 3, 0


def make_model(seed=0, **overrides):
    torch.manual_seed(seed)
    fields = dict(PRESETS["tiny"], **overrides)
    return Transformer(TransformerConfig(src_vocab_size=23, tgt_vocab_size=19, **fields)).eval()


def random_batch(B=4, S=7, T=6, seed=1):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(5, 23, (B, S), generator=g)
    src[0, S - 2 :] = PAD  # one padded source
    tgt = torch.randint(5, 19, (B, T), generator=g)
    tgt_in = torch.cat([torch.full((B, 1), BOS), tgt], dim=1)  # (B, T+1)
    tgt_out = torch.cat([tgt, torch.full((B, 1), EOS)], dim=1)  # (B, T+1)
    return src, tgt_in, tgt_out


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_overfits_a_tiny_batch(norm):
    model = make_model(norm=norm, d_model=32, d_ff=64).train()
    src, tgt_in, tgt_out = random_batch()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = None
    for _ in range(250):
        loss = model(src, tgt_in, labels=tgt_out).loss
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05 < first
    model.eval()
    hyps = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=12)
    assert [h.tokens for h in hyps] == tgt_out[:, :-1].tolist()


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_cached_step_logits_equal_full_forward(norm):
    model = make_model(norm=norm, n_encoder_layers=2, n_decoder_layers=2)
    src, tgt_in, _ = random_batch()
    full = model(src, tgt_in).logits  # (B, T, V)
    state = model.start(src)
    steps = torch.stack([model.step(tgt_in[:, t : t + 1], state).logits for t in range(tgt_in.shape[1])], dim=1)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)


def test_cached_greedy_equals_uncached_greedy():
    model = make_model(n_decoder_layers=2)
    src, _, _ = random_batch(B=3)
    cached = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=10)
    # Uncached reference: re-run the whole decoder over the growing prefix at every step.
    for b, hyp in enumerate(cached):
        prefix = torch.tensor([[BOS]])
        tokens = []
        for _ in range(10):
            logits = model(src[b : b + 1], prefix, src_mask=src[b : b + 1] != PAD).logits[0, -1]
            nxt = int(logits.argmax())
            if nxt == EOS:
                break
            tokens.append(nxt)
            prefix = torch.cat([prefix, torch.tensor([[nxt]])], dim=1)
        assert hyp.tokens == tokens


def test_beam_size_one_equals_greedy():
    model = make_model(n_decoder_layers=2)
    src, _, _ = random_batch(B=5, seed=3)
    greedy = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=9, return_attention=True)
    beam = beam_search(model, src, bos_id=BOS, eos_id=EOS, beam_size=1, max_len=9, alpha=0.0, return_attention=True)
    assert [h.tokens for h in beam] == [h.tokens for h in greedy]
    for g, b in zip(greedy, beam):
        torch.testing.assert_close(b.cross_attention, g.cross_attention)
        assert b.score == pytest.approx(g.score, abs=1e-5)


def test_expanded_state_keeps_one_source_per_sentence_and_follows_beams():
    # expand() gives each sentence K decoder rows over one copy of its source keys/values; the
    # steps and reorders give what copying the whole state to every row gives.
    model = make_model(n_decoder_layers=2)
    src, tgt_in, _ = random_batch(B=3)
    K = 2
    shared, copied = model.start(src), model.start(src)
    shared.expand(K)
    copied.reorder(torch.arange(3).repeat_interleave(K))
    assert shared.memory_kv[0][0].shape[0] == 3 and copied.memory_kv[0][0].shape[0] == 3 * K
    tokens = tgt_in[:, :1].repeat_interleave(K, dim=0)  # (B·K, 1)
    # within sentences, then dropping the middle sentence (the groups of beam search)
    for index in (torch.tensor([1, 0, 2, 2, 5, 4]), torch.tensor([1, 1, 5, 4])):
        a = model.step(tokens, shared, need_weights=True)
        b = model.step(tokens, copied, need_weights=True)
        torch.testing.assert_close(a.logits, b.logits)
        torch.testing.assert_close(a.cross_weights, b.cross_weights)
        shared.reorder(index)
        copied.reorder(index)
        tokens = (tokens[index] + 1) % 19
    assert shared.src_mask.shape[0] == 2 and shared.memory_kv[0][0].shape[0] == 2
    torch.testing.assert_close(model.step(tokens, shared).logits, model.step(tokens, copied).logits)


def test_beam_search_batched_equals_one_by_one():
    # Sentences leave the batch when they are done; the others must not notice.
    model = make_model(n_decoder_layers=2)
    src, _, _ = random_batch(B=6, seed=4)
    kw = dict(bos_id=BOS, eos_id=EOS, beam_size=3, max_len=9, return_attention=True)
    batched = beam_search(model, src, **kw)
    for b, h in enumerate(batched):
        one = beam_search(model, src[b : b + 1], **kw)[0]
        assert h.tokens == one.tokens
        assert h.score == pytest.approx(one.score, abs=1e-5)
        torch.testing.assert_close(h.cross_attention, one.cross_attention, atol=1e-5, rtol=1e-5)


def test_beam_search_finds_at_least_the_greedy_log_probability():
    model = make_model(n_decoder_layers=2)
    src, _, _ = random_batch(B=4, seed=5)
    greedy = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=8)
    beam = beam_search(model, src, bos_id=BOS, eos_id=EOS, beam_size=5, max_len=8, alpha=0.0)
    for g, b in zip(greedy, beam):
        assert b.score >= g.score - 1e-5


def test_cross_attention_maps_cover_real_source_and_sum_to_one():
    model = make_model(n_decoder_layers=2)
    src, _, _ = random_batch(B=2)
    hyps = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=6, return_attention=True)
    real = (src != PAD).sum(1).tolist()
    for h, n in zip(hyps, real):
        L, H, T, S = h.cross_attention.shape
        assert (L, H, S) == (2, model.config.n_heads, n)
        assert T == min(len(h.tokens) + 1, 6)
        torch.testing.assert_close(h.cross_attention.sum(-1), torch.ones(L, H, T))


def test_changing_a_future_target_token_never_changes_earlier_logits():
    model = make_model(norm="pre", n_decoder_layers=2)
    src, tgt_in, _ = random_batch()
    base = model(src, tgt_in).logits
    for t in range(1, tgt_in.shape[1]):
        changed = tgt_in.clone()
        changed[:, t] = 5 + (changed[:, t] - 5 + 1) % 14  # another ordinary token
        out = model(src, changed).logits
        torch.testing.assert_close(out[:, :t], base[:, :t])
        assert not torch.allclose(out[:, t:], base[:, t:])


def test_padding_in_the_source_is_invisible():
    model = make_model()
    src, tgt_in, _ = random_batch()
    longer = torch.cat([src, torch.full((src.shape[0], 3), PAD)], dim=1)
    torch.testing.assert_close(model(longer, tgt_in).logits, model(src, tgt_in).logits, atol=1e-5, rtol=1e-5)


def test_attention_maps_have_the_documented_shapes():
    model = make_model(n_encoder_layers=2, n_decoder_layers=3)
    src, tgt_in, _ = random_batch(B=2, S=5, T=4)
    att = model(src, tgt_in, need_weights=True).attentions
    H = model.config.n_heads
    assert [w.shape for w in att["encoder"]] == [(2, H, 5, 5)] * 2
    assert [w.shape for w in att["decoder"]] == [(2, H, 5, 5)] * 3
    assert [w.shape for w in att["cross"]] == [(2, H, 5, 5)] * 3
    # causal: decoder self-attention has nothing above the diagonal
    assert torch.all(att["decoder"][0].triu(1) == 0)


def test_tied_output_shares_the_embedding_matrix():
    model = make_model(tie_output=True)
    assert model.out_proj.weight is model.tgt_embed.weight
    with pytest.raises(ValueError, match="share_embeddings needs one vocabulary"):
        Transformer(TransformerConfig(src_vocab_size=10, tgt_vocab_size=12, share_embeddings=True, **PRESETS["tiny"]))


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_beam_search_stops_early_only_when_the_result_is_decided(alpha, monkeypatch):
    # A briefly trained model ends its hypotheses at different steps; the early exit must give
    # exactly what searching until every beam slot has ended gives, in fewer steps.
    model = make_model(n_decoder_layers=2, d_model=32, d_ff=64).train()
    src, tgt_in, tgt_out = random_batch(B=6, seed=7)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(40):
        loss = model(src, tgt_in, labels=tgt_out).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    steps = {"calls": 0}
    real_step = model.step

    def counted(*args, **kwargs):
        steps["calls"] += 1
        return real_step(*args, **kwargs)

    monkeypatch.setattr(model, "step", counted)
    kw = dict(bos_id=BOS, eos_id=EOS, beam_size=4, max_len=20, alpha=alpha, return_attention=True)
    early = [beam_search(model, src[b : b + 1], **kw)[0] for b in range(len(src))]
    early_steps = steps["calls"]
    monkeypatch.setattr(
        "attnlab.decode.beams_decided", lambda scores, *args: torch.zeros(len(scores), dtype=torch.bool)
    )
    steps["calls"] = 0
    full = [beam_search(model, src[b : b + 1], **kw)[0] for b in range(len(src))]
    assert [h.tokens for h in early] == [h.tokens for h in full]
    assert [h.score for h in early] == pytest.approx([h.score for h in full], abs=1e-6)
    for e, f in zip(early, full):
        torch.testing.assert_close(e.cross_attention, f.cross_attention)
    assert early_steps < steps["calls"]


def fast(state):
    """The fast step that the native engine's start chose for this state (attnlab.accel.engine), or None."""
    return state.fast if isinstance(state, NativeDecoderState) else None


def plain_state(model, src):
    """The decoding state of the seq2seq contract computed by the modules alone."""
    mask = src != PAD
    memory, _ = model.encode(src, mask)
    caches = [block.self_attn.new_cache() for block in model.decoder]
    return DecoderState([block.cross_attn.project_kv(memory) for block in model.decoder], mask, caches)


def test_fast_decoding_step_only_where_it_computes_the_same():
    # (The fast steps against the blocks, for every configuration: tests/accel/test_native_paths.py.)
    model = make_model(n_decoder_layers=2)
    src, tgt_in, _ = random_batch(B=3)
    assert fast(engine.decoder(model).start(src)) is None  # autograd on: the blocks
    with torch.no_grad():
        assert fast(engine.decoder(model).start(src)) is not None
        left = torch.cat([torch.full((3, 2), PAD), src[:, :-2]], dim=1)  # padding first: not its layout
        assert fast(engine.decoder(model).start(left)) is None
        state = model.start(src)
        with_weights = model.step(tgt_in[:, :1], state, need_weights=True)  # the maps need the blocks
        assert with_weights.cross_weights is not None
        model.train()
        assert fast(engine.decoder(model).start(src)) is None
        model.eval()
        handle = model.decoder[0].ff.register_forward_hook(lambda *a: None)
        assert fast(engine.decoder(model).start(src)) is None  # a hook would not run
        handle.remove()
        model.encoder[0].register_forward_hook(lambda *a: None)  # the encoder has run by then
        assert fast(engine.decoder(model).start(src)) is not None
        assert fast(engine.decoder(make_model(n_decoder_layers=2).double()).start(src)) is None
        # bf16 weights: only the native step reads them (in fp32 arithmetic), where it is built
        bf16 = fast(engine.decoder(make_model(n_decoder_layers=2).to(torch.bfloat16)).start(src))
        assert (bf16 is not None and bf16.engine == "native") if accel.isas() else bf16 is None
        with accel.disabled():
            assert fast(engine.decoder(make_model(n_decoder_layers=2).to(torch.bfloat16)).start(src)) is None


def test_native_kernels_follow_the_parameters_and_leave_hooks_to_the_modules(monkeypatch):
    from attnlab.accel import kernels

    if not accel.isas():
        pytest.skip("no C compiler here: the native kernels are not built")
    builds = []  # each build (and packing) of the C decoder step
    real_build = kernels.DecoderStep.build.__func__
    monkeypatch.setattr(
        kernels.DecoderStep, "build", classmethod(lambda cls, *a, **kw: builds.append(1) or real_build(cls, *a, **kw))
    )
    model = make_model(n_decoder_layers=2)
    src, tgt_in, _ = random_batch(B=2)

    native = engine.decoder(model)

    def logits():
        fast_state, plain = native.start(src), plain_state(model, src)
        return native.step(tgt_in[:, :1], fast_state).logits, model.step(tgt_in[:, :1], plain).logits

    with torch.no_grad():
        a, b = logits()
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        assert len(builds) == 1
        logits()
        assert len(builds) == 1  # built (and packed) once for these parameters
        model.out_proj.weight.mul_(2.0)  # changed in place (a training step, load_state_dict)
        model.encoder[0].ff.up_proj.weight.add_(0.5)
        a2, b2 = logits()
        assert len(builds) == 2  # built again for the new values
        torch.testing.assert_close(a2, b2, atol=1e-5, rtol=1e-5)
        assert not torch.allclose(a, a2)
        calls = []
        model.encoder[0].register_forward_hook(lambda *args: calls.append(1))
        native.start(src)
        assert calls == [1]  # the module ran, not the kernel
        # A module replaced after the kernels were built (the structure is read again) ...
        new_ff = type(model.decoder[1].ff)(32, 64)
        model.decoder[1].ff = new_ff
        a3, b3 = logits()
        torch.testing.assert_close(a3, b3, atol=1e-5, rtol=1e-5)
        assert not torch.allclose(a2, a3)
        new_ff.register_forward_hook(lambda *args: calls.append(2))
        assert fast(engine.decoder(model).start(src)) is None  # ... and its hooks are seen
        # ... and parameters converted in place to another dtype: no fp32 kernels for them
        assert fast(engine.decoder(model.double()).start(src)) is None


def test_beam_search_with_the_fast_step_batched_equals_one_by_one_and_beam_one_greedy():
    model = make_model(n_decoder_layers=2)
    src, _, _ = random_batch(B=6, seed=4)
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=9)
    batched = beam_search(model, src, beam_size=3, **kw)
    for b, h in enumerate(batched):
        one = beam_search(model, src[b : b + 1], beam_size=3, **kw)[0]
        assert h.tokens == one.tokens
        assert h.score == pytest.approx(one.score, abs=1e-5)
    greedy = greedy_decode(model, src, **kw)
    assert [h.tokens for h in beam_search(model, src, beam_size=1, alpha=0.0, **kw)] == [h.tokens for h in greedy]


def test_two_threads_decoding_with_one_model_get_what_each_gets_alone():
    # The explorer runs two translations at once on one model: the native kernels' working memory
    # must be per call.
    import threading

    model = make_model(n_decoder_layers=2, d_model=128, d_ff=512)  # calls long enough to overlap
    batches = [random_batch(B=3, seed=s)[0] for s in (5, 6)]
    kw = dict(bos_id=BOS, eos_id=EOS, beam_size=3, max_len=12)
    alone = [[h.tokens for h in beam_search(model, src, **kw)] for src in batches]
    results: dict = {}

    def run(i: int) -> None:
        results[i] = [[h.tokens for h in beam_search(model, batches[i], **kw)] for _ in range(40)]

    threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for i in (0, 1):
        assert all(r == alone[i] for r in results[i])
