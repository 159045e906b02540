"""attnlab.models.gpt: causality, the key/value cache, the loss, tied embeddings, configs.

References are independent of the model's own code paths: the loss against a per-position
log-softmax loop, the cached forward against the uncached one, causality by perturbing inputs.
(Equality with HuggingFace's GPT-2 is in test_convert_hf.py.)
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import accel
from attnlab.accel import engine
from attnlab.layers import KVCache, MultiHeadAttention
from attnlab.models.gpt import GPT, PRESETS, GPTConfig, LMOutput, gpt_config
from attnlab.positional import RotaryEmbedding

SETTINGS = settings(max_examples=10, deadline=None)
POSITIONS = ["learned", "rotary"]


def tiny(positions: str = "learned", **kw) -> GPT:
    torch.manual_seed(0)
    cfg = gpt_config("tiny", vocab_size=37, positions=positions, **kw)
    return GPT(cfg).eval()


@pytest.mark.parametrize("positions", POSITIONS)
def test_shapes_and_output_type(positions):
    model = tiny(positions)
    ids = torch.randint(0, 37, (3, 11))
    out = model(ids, need_weights=True)
    assert isinstance(out, LMOutput)
    assert out.logits.shape == (3, 11, 37)
    assert out.loss is None
    assert len(out.attentions) == model.config.n_layers
    assert all(a.shape == (3, model.config.n_heads, 11, 11) for a in out.attentions)
    assert model(ids).attentions is None


@pytest.mark.parametrize("positions", POSITIONS)
@SETTINGS
@given(t=st.integers(0, 9), seed=st.integers(0, 2**16))
def test_causality_changing_token_t_never_changes_earlier_logits(positions, t, seed):
    model = tiny(positions)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 37, (2, 10), generator=g)
    changed = ids.clone()
    changed[:, t] = (changed[:, t] + 1 + torch.randint(0, 36, (2,), generator=g)) % 37
    with torch.no_grad():
        a, b = model(ids).logits, model(changed).logits
    torch.testing.assert_close(a[:, :t], b[:, :t], atol=1e-6, rtol=1e-6)
    assert not torch.allclose(a[:, t], b[:, t])  # the changed position itself does see it


@pytest.mark.parametrize("positions", POSITIONS)
def test_attention_maps_are_causal_distributions(positions):
    model = tiny(positions)
    out = model(torch.randint(0, 37, (2, 9)), need_weights=True)
    for w in out.attentions:
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
        upper = torch.ones(9, 9, dtype=torch.bool).triu(1)
        assert (w[..., upper] == 0).all()


@pytest.mark.parametrize("positions", POSITIONS)
@SETTINGS
@given(cuts=st.lists(st.integers(1, 13), min_size=1, max_size=4, unique=True), seed=st.integers(0, 2**16))
def test_cached_chunks_equal_full_forward(positions, cuts, seed):
    """Feeding a sequence in pieces through the caches gives the logits of one full pass."""
    model = tiny(positions)
    ids = torch.randint(0, 37, (2, 14), generator=torch.Generator().manual_seed(seed))
    bounds = [0] + sorted(cuts) + [14]
    caches = model.new_caches()
    with torch.no_grad():
        pieces = [model(ids[:, a:b], caches=caches).logits for a, b in itertools.pairwise(bounds)]
        full = model(ids).logits
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=1e-5)
    assert all(len(c) == 14 for c in caches)


@pytest.mark.parametrize("positions", POSITIONS)
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize(
    "dtype, kw",
    [
        (torch.float32, {}),
        (torch.float32, dict(bias=False, activation="relu")),
        (torch.float32, dict(activation="gelu")),
        (torch.float64, dict(activation="gelu")),
        (torch.bfloat16, {}),
    ],
)
@pytest.mark.parametrize("path", ["native", "modules"])
def test_token_stepper_equals_forward(positions, batch, dtype, kw, path):
    """The model's own stepper is forward: the same logits, bit for bit (here with every native
    kernel switched off, as on a machine without a compiler; with them: tests/accel/test_native_paths.py).
    The native engine's (attnlab.accel.engine.stepper: fp32 or bf16, learned positions, attnlab's
    kernels built) is one C call per step: the same logits up to rounding."""
    native = path == "native" and dtype != torch.float64 and positions == "learned" and accel.isas()
    if path == "native" and not native:
        pytest.skip("the native step is for fp32 or bf16 models with learned positions, where the kernels are built")
    with accel.disabled() if path == "modules" else contextlib.nullcontext():
        model = tiny(positions, **kw).to(dtype)
        step = engine.stepper(model) if native else model.token_stepper()
        assert step is not None
        assert step.engine == ("native" if native else "modules")
        # The native step reads bf16 weights as they are and computes in fp32: forward in fp32 on
        # the same weights widened to fp32 (exact) is its reference; the BF16 dot product (the
        # avx512_bf16 kernels) rounds the activations to bf16 too.
        reference = copy.deepcopy(model).float() if native and dtype == torch.bfloat16 else model
        tol = 5e-2 if native and dtype == torch.bfloat16 and accel.kernels.isa() == "avx512_bf16" else 1e-5
        ids = torch.randint(0, 37, (batch, 24), generator=torch.Generator().manual_seed(batch))  # caches grow past 16
        with torch.inference_mode():
            a, b = reference.new_caches(), model.new_caches()
            reference(ids[:, :4], caches=a)
            reference(ids[:, :4], caches=b)  # (for bf16: the prompt's keys and values in fp32 for both)
            for t in range(4, 24):
                want = reference(ids[:, t : t + 1], caches=a).logits[:, -1]  # (B, V)
                got = step(ids[:, t : t + 1], b)
                assert got.shape == (batch, 37), t
                if native:
                    torch.testing.assert_close(got, want, atol=tol, rtol=tol)
                else:
                    assert torch.equal(got, want), t
    assert all(len(x) == len(y) == 24 for x, y in zip(a, b))


def test_token_stepper_is_none_where_forward_is_needed():
    assert tiny().train().token_stepper() is None  # dropout, training
    model = tiny()
    handle = model.blocks[1].ff.register_forward_hook(lambda *a: None)
    assert model.token_stepper() is None  # a hook must see its call
    handle.remove()
    assert model.token_stepper() is not None
    assert tiny(attention="sliding_window", window=4).token_stepper() is None  # a rolling cache, is_causal
    assert tiny(backend="chunked").token_stepper() is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert tiny().token_stepper() is None


def test_token_stepper_past_the_context_window_raises_as_forward():
    model = tiny()  # n_positions = 64
    caches = model.new_caches()
    with torch.inference_mode():
        model(torch.zeros(1, 64, dtype=torch.long), caches=caches)
        with pytest.raises(ValueError, match="exceeds the context window"):
            model.token_stepper()(torch.zeros(1, 1, dtype=torch.long), caches)


def test_cached_attention_maps_cover_all_positions():
    model = tiny()
    caches = model.new_caches()
    ids = torch.randint(0, 37, (1, 6))
    model(ids[:, :4], caches=caches)
    out = model(ids[:, 4:], caches=caches, need_weights=True)
    full = model(ids, need_weights=True)
    for w_step, w_full in zip(out.attentions, full.attentions):
        assert w_step.shape == (1, model.config.n_heads, 2, 6)
        torch.testing.assert_close(w_step, w_full[:, :, 4:], atol=1e-6, rtol=1e-6)


def test_loss_is_shifted_next_token_cross_entropy():
    model = tiny()
    ids = torch.randint(0, 37, (2, 8))
    labels = ids.clone()
    labels[0, 5] = -100  # ignored position
    out = model(ids, labels=labels)
    logp = torch.log_softmax(out.logits.detach().double(), dim=-1)
    terms = [-logp[b, t, labels[b, t + 1]] for b in range(2) for t in range(7) if labels[b, t + 1] != -100]
    expected = torch.stack(terms).mean()
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-5)


def test_output_projection_is_the_token_embedding():
    model = tiny()
    ids = torch.randint(0, 37, (2, 5))
    out = model(ids)
    h = model.final_norm(_hidden(model, ids))
    torch.testing.assert_close(out.logits, h @ model.tok_emb.weight.T)
    # No separate output matrix exists: the parameters are exactly the embedding, positions,
    # the blocks and the final norm.
    n_blocks = sum(p.numel() for p in model.blocks.parameters())
    expected = model.tok_emb.weight.numel() + model.pos_emb.embedding.weight.numel() + n_blocks + 2 * 32
    assert model.num_parameters() == expected


def _hidden(model: GPT, ids: torch.Tensor) -> torch.Tensor:
    x = model.pos_emb(model.tok_emb(ids))
    for block in model.blocks:
        x = block(x, is_causal=True).hidden
    return x


def test_rotary_model_has_no_position_table_and_shares_one_rotary_module():
    model = tiny("rotary")
    assert model.pos_emb is None
    rotaries = {id(b.self_attn.rotary) for b in model.blocks}
    assert len(rotaries) == 1 and None not in rotaries
    assert not any("rotary" in k for k in model.state_dict())


def test_rotary_attention_depends_on_relative_positions_only():
    """Rotary q/k at offset P (after P cached keys that are masked out) give the same output as
    at offset 0: the scores see only distances (Su et al. 2021, §3.4.2)."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2, rotary=RotaryEmbedding(8)).eval()
    x = torch.randn(1, 4, 16)
    ref = mha(x, is_causal=True).output
    cache = KVCache()
    mha(torch.randn(1, 5, 16), is_causal=True, cache=cache)  # 5 positions, hidden below
    real = torch.tensor([[False] * 5 + [True] * 4])
    shifted = mha(x, is_causal=True, cache=cache, key_padding_mask=real).output
    torch.testing.assert_close(shifted, ref, atol=1e-5, rtol=1e-5)
    # ... and the rotation is really applied: without it the same weights give another output.
    plain = MultiHeadAttention(16, 2).eval()
    plain.load_state_dict(mha.state_dict())
    assert not torch.allclose(plain(x, is_causal=True).output, ref, atol=1e-4)


def test_rotary_refuses_cross_attention():
    mha = MultiHeadAttention(16, 2, rotary=RotaryEmbedding(8))
    with pytest.raises(ValueError, match="self-attention only"):
        mha(torch.randn(1, 3, 16), torch.randn(1, 4, 16))


def test_training_steps_reduce_loss_on_a_repeating_pattern():
    torch.manual_seed(0)
    model = GPT(gpt_config("tiny", vocab_size=10)).train()
    pattern = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8] * 4])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    first = None
    for _ in range(60):
        loss = model(pattern, labels=pattern).loss
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.3 * first
    assert model.tok_emb.weight.grad is not None


def test_context_window_and_input_errors():
    model = tiny()
    n = model.config.n_positions
    with pytest.raises(ValueError, match="n_positions"):
        model(torch.zeros(1, n + 1, dtype=torch.long))
    caches = model.new_caches()
    model(torch.zeros(1, n - 1, dtype=torch.long), caches=caches)
    with pytest.raises(ValueError, match="n_positions"):
        model(torch.zeros(1, 2, dtype=torch.long), caches=caches)
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        model(torch.zeros(5, dtype=torch.long))
    with pytest.raises(TypeError, match="integer"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match="one KVCache per layer"):
        model(torch.zeros(1, 3, dtype=torch.long), caches=[KVCache()])
    with pytest.raises(ValueError, match="labels"):
        model(torch.zeros(1, 3, dtype=torch.long), labels=torch.zeros(1, 4, dtype=torch.long))


def test_config_validation_and_presets():
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="positions"):
        GPTConfig(positions="sinusoidal")
    with pytest.raises(ValueError, match="unknown GPT preset"):
        gpt_config("nope")
    with pytest.raises(ValueError, match="unknown GPTConfig fields"):
        GPTConfig.from_dict({"d_model": 64, "width": 3})
    cfg = gpt_config("shakespeare-char", vocab_size=65)
    assert GPTConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.d_ff == 4 * cfg.d_model
    for name, fields in PRESETS.items():
        c = GPTConfig(**fields)
        assert c.d_model % c.n_heads == 0, name


def test_init_scales_residual_projections():
    torch.manual_seed(0)
    model = GPT(gpt_config("bench-large", vocab_size=100))
    std = model.config.init_std
    assert model.blocks[0].ff.up_proj.weight.std().item() == pytest.approx(std, rel=0.05)
    expected = std / math.sqrt(2 * model.config.n_layers)
    assert model.blocks[0].ff.down_proj.weight.std().item() == pytest.approx(expected, rel=0.05)


def test_bf16_autocast_forward_is_close_to_fp32():
    model = tiny()
    ids = torch.randint(0, 37, (2, 12))
    ref = model(ids, labels=ids).loss
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = model(ids, labels=ids).loss
    assert low.item() == pytest.approx(ref.item(), rel=2e-2)
