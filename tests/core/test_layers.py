"""attnlab.layers against torch.nn (weights copied across) and against plain re-computations."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from attnlab.accel import reorder_rows
from attnlab.functional import causal_mask, padding_mask
from attnlab.layers import (
    DecoderBlock,
    EncoderBlock,
    FeedForward,
    KVCache,
    MultiHeadAttention,
    RollingKVCache,
)

TOL64 = dict(atol=1e-10, rtol=1e-10)


def randomize_(module: nn.Module, seed: int) -> nn.Module:
    """Random values in every parameter (LayerNorm gains and biases too), so nothing is a no-op."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.5)
    return module


def copy_mha_to_torch(ours: MultiHeadAttention, ref: nn.MultiheadAttention) -> None:
    """attnlab's four projections into torch's packed (or, with kdim/vdim, separate) weights."""
    with torch.no_grad():
        if ref._qkv_same_embed_dim:
            ref.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        else:
            ref.q_proj_weight.copy_(ours.q_proj.weight)
            ref.k_proj_weight.copy_(ours.k_proj.weight)
            ref.v_proj_weight.copy_(ours.v_proj.weight)
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        if ours.q_proj.bias is not None:
            ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
            ref.out_proj.bias.copy_(ours.out_proj.bias)


def torch_grads(ours: MultiHeadAttention, ref: nn.MultiheadAttention) -> dict[str, torch.Tensor]:
    """torch's parameter gradients under attnlab's names."""
    D = ours.d_model
    if ref._qkv_same_embed_dim:
        wq, wk, wv = ref.in_proj_weight.grad.split(D)
    else:
        wq, wk, wv = ref.q_proj_weight.grad, ref.k_proj_weight.grad, ref.v_proj_weight.grad
    grads = {"q_proj.weight": wq, "k_proj.weight": wk, "v_proj.weight": wv, "out_proj.weight": ref.out_proj.weight.grad}
    if ref.in_proj_bias is not None:
        bq, bk, bv = ref.in_proj_bias.grad.split(D)
        grads.update({"q_proj.bias": bq, "k_proj.bias": bk, "v_proj.bias": bv, "out_proj.bias": ref.out_proj.bias.grad})
    return grads


CASES = [
    # (name, d_model, n_heads, kdim, vdim, T, S, bias, causal)
    ("self", 16, 4, None, None, 5, 5, True, False),
    ("self-causal", 16, 2, None, None, 6, 6, True, True),
    ("self-nobias", 12, 3, None, None, 4, 4, False, False),
    ("cross", 16, 4, None, None, 3, 7, True, False),
    ("cross-kdim-vdim", 16, 4, 10, 6, 4, 7, True, False),
    ("cross-kdim-vdim-nobias", 8, 2, 5, 11, 2, 6, False, False),
]


@pytest.mark.parametrize("backend", ["math", "sdpa", "auto"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_mha_matches_torch_multihead_attention(case, backend, dtype):
    name, D, H, kdim, vdim, T, S, bias, causal = case
    torch.manual_seed(0)
    ours = MultiHeadAttention(D, H, bias=bias, kdim=kdim, vdim=vdim, backend=backend).to(dtype)
    randomize_(ours, 1)
    ref = nn.MultiheadAttention(D, H, bias=bias, kdim=kdim, vdim=vdim, batch_first=True).to(dtype)
    copy_mha_to_torch(ours, ref)

    B = 3
    gen = torch.Generator().manual_seed(2)
    query = torch.randn(B, T, D, generator=gen, dtype=dtype)
    self_attention = name.startswith("self")
    key = query if self_attention else torch.randn(B, S, kdim or D, generator=gen, dtype=dtype)
    value = query if self_attention else torch.randn(B, S, vdim or D, generator=gen, dtype=dtype)
    lengths = torch.tensor([S, max(1, S - 2), 1 if not causal else S - 1])
    real = padding_mask(lengths, max_len=S)  # (B, S) True = real token
    attn_mask = causal_mask(T, S) if causal else None

    inputs = [t.detach().clone().requires_grad_() for t in (query, key, value)]
    ref_inputs = [t.detach().clone().requires_grad_() for t in (query, key, value)]
    if self_attention:  # one tensor plays all three roles, as in real self-attention
        inputs = inputs[:1] * 3
        ref_inputs = ref_inputs[:1] * 3

    want_weights = backend != "sdpa"
    out, w = ours(*inputs, key_padding_mask=real, attn_mask=attn_mask, need_weights=want_weights)
    # torch's masks say the opposite: True = ignore this key.
    ref_out, ref_w_avg = ref(
        *ref_inputs,
        key_padding_mask=~real,
        attn_mask=None if attn_mask is None else ~attn_mask,
        need_weights=True,
        average_attn_weights=True,
    )
    _, ref_w = ref(
        *ref_inputs,
        key_padding_mask=~real,
        attn_mask=None if attn_mask is None else ~attn_mask,
        need_weights=True,
        average_attn_weights=False,
    )
    tol = TOL64 if dtype == torch.float64 else dict(atol=2e-5, rtol=2e-5)
    torch.testing.assert_close(out, ref_out, **tol)
    if want_weights:
        assert w.shape == (B, H, T, S)
        torch.testing.assert_close(w, ref_w, **tol)
        torch.testing.assert_close(w.mean(1), ref_w_avg, **tol)
    else:
        assert w is None

    g = torch.randn(out.shape, generator=gen, dtype=dtype)
    (out * g).sum().backward()
    (ref_out * g).sum().backward()
    for a, b in zip(inputs, ref_inputs):
        torch.testing.assert_close(a.grad, b.grad, **tol)
    ref_grads = torch_grads(ours, ref)
    for pname, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, ref_grads[pname], **tol, msg=lambda m, pname=pname: f"{pname}: {m}")


def test_mha_is_causal_flag_equals_causal_mask():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).double()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    ref = nn.MultiheadAttention(8, 2, batch_first=True).double()
    copy_mha_to_torch(mha, ref)
    for backend in ("math", "sdpa"):
        mha.backend = backend
        out = mha(x, is_causal=True).output
        torch.testing.assert_close(out, ref(x, x, x, attn_mask=~causal_mask(5), need_weights=False)[0], **TOL64)


def test_mha_dropout_only_in_training():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2, dropout=0.5, backend="math")
    x = torch.randn(2, 6, 8)
    mha.eval()
    torch.testing.assert_close(mha(x).output, mha(x).output)
    mha.train()
    assert not torch.allclose(mha(x).output, mha(x).output)


def test_mha_bad_input_messages():
    with pytest.raises(ValueError, match="not divisible by n_heads"):
        MultiHeadAttention(10, 3)
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 4, 8)
    with pytest.raises(ValueError, match=r"query must have shape \(B, T, 8\)"):
        mha(torch.randn(2, 4, 6))
    with pytest.raises(ValueError, match="key_padding_mask must have shape"):
        mha(x, key_padding_mask=torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="ambiguous"):
        mha(x, attn_mask=torch.ones(2, 4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="cannot return attention weights"):
        MultiHeadAttention(8, 2, backend="sdpa")(x, need_weights=True)


@pytest.mark.parametrize(
    "args, kwargs, err, pattern",
    [
        ((8, 0), {}, ValueError, r"n_heads must be ≥ 1, got 0"),
        ((8, -2), {}, ValueError, r"n_heads must be ≥ 1, got -2"),
        ((0, 1), {}, ValueError, r"d_model must be ≥ 1, got 0"),
        ((-8, 2), {}, ValueError, r"d_model must be ≥ 1, got -8"),
        ((8, 3), {}, ValueError, r"d_model=8 is not divisible by n_heads=3"),
        ((8, 2.0), {}, TypeError, r"n_heads must be an int, got float"),
        (("8", 2), {}, TypeError, r"d_model must be an int, got str"),
        ((8, True), {}, TypeError, r"n_heads must be an int, got bool"),
        ((8, 2), {"kdim": 0}, ValueError, r"kdim must be ≥ 1"),
        ((8, 2), {"vdim": 2.5}, TypeError, r"vdim must be an int"),
        ((8, 2), {"dropout": 1.0}, ValueError, r"dropout must be a number in \[0, 1\), got 1.0"),
        ((8, 2), {"dropout": -0.1}, ValueError, r"dropout must be a number in \[0, 1\)"),
        ((8, 2), {"dropout": float("nan")}, ValueError, r"dropout must be a number in \[0, 1\), got nan"),
        ((8, 2), {"dropout": "0.1"}, ValueError, r"dropout must be a number"),
    ],
)
def test_mha_bad_settings_are_named(args, kwargs, err, pattern):
    with pytest.raises(err, match=pattern):
        MultiHeadAttention(*args, **kwargs)


def test_mha_dtype_mismatch_is_named():
    mha = MultiHeadAttention(8, 2)  # float32 weights
    x = torch.randn(2, 4, 8)
    with pytest.raises(TypeError, match=r"query has dtype torch.float16 but the weights are torch.float32"):
        mha(x.half())
    with pytest.raises(TypeError, match=r"key has dtype torch.float64 but the weights are torch.float32"):
        mha(x, x.double())
    with pytest.raises(TypeError, match=r"value has dtype torch.bfloat16"):
        mha(x, x, x.bfloat16())
    with pytest.raises(TypeError, match=r"kv\[1\] has dtype torch.float64"):
        k, v = mha.project_kv(x)
        mha(x, kv=(k, v.double()))
    with pytest.raises(TypeError, match=r"query must be a floating-point tensor.*int64"):
        mha(torch.zeros(2, 4, 8, dtype=torch.long))
    with pytest.raises(TypeError, match=r"query must be a torch.Tensor, got list"):
        mha([[0.0] * 8])
    # Autocast casts inputs and weights itself: a bf16 input to fp32 weights is fine there.
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert mha(x.bfloat16()).output.shape == (2, 4, 8)


@pytest.mark.parametrize("backend", ["math", "sdpa", "auto"])
def test_mha_nan_in_padded_positions_stays_out_of_real_rows(backend):
    """Garbage (NaN) in the padded positions of the input: the real positions' outputs equal
    those with zeros there. (Parameter gradients cannot stay clean: any linear layer's weight
    gradient multiplies the padded inputs by their zero gradient, and 0 · NaN is NaN.)"""
    mha = randomize_(MultiHeadAttention(8, 2, backend=backend).double(), 1)
    x = torch.randn(2, 5, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    real = padding_mask(torch.tensor([5, 3]), max_len=5)  # (B, T)
    dirty = x.clone()
    dirty[1, 3:] = float("nan")
    clean = x.masked_fill(~real[..., None], 0.0)
    for extra in ({}, {"is_causal": True}):
        expected = mha(clean, key_padding_mask=real, **extra).output[real]
        out = mha(dirty, key_padding_mask=real, **extra).output[real]
        assert bool(torch.isfinite(out).all())
        torch.testing.assert_close(out, expected, **TOL64)


# --------------------------------------------------------------------------------------------
# The key/value cache seam
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["math", "sdpa"])
@pytest.mark.parametrize("chunks", [[1] * 20, [3, 1, 5, 11]], ids=["one-at-a-time", "chunks"])
def test_cached_decoding_equals_full_causal_attention(backend, chunks):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, backend=backend).double()
    T = sum(chunks)  # 20 > the cache's initial capacity of 16, so storage grows once
    x = torch.randn(2, T, 16, dtype=torch.float64)
    full = mha(x, is_causal=True).output
    cache, outs, start = KVCache(), [], 0
    for n in chunks:
        outs.append(mha(x[:, start : start + n], is_causal=True, cache=cache).output)
        start += n
        assert len(cache) == start
    torch.testing.assert_close(torch.cat(outs, 1), full, **TOL64)


def test_cached_decoding_with_key_padding():
    """Left-padded prompts: the padding mask covers every cached position."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).double()
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    real = torch.tensor([[True] * 6, [False, False, True, True, True, True]])
    full = mha(x, key_padding_mask=real, is_causal=True).output
    cache = KVCache()
    steps = [
        mha(x[:, t : t + 1], key_padding_mask=real[:, : t + 1], is_causal=True, cache=cache).output for t in range(6)
    ]
    out = torch.cat(steps, 1)
    torch.testing.assert_close(out[0], full[0], **TOL64)
    torch.testing.assert_close(out[1, 2:], full[1, 2:], **TOL64)
    assert bool((steps[0][1] == mha.out_proj.bias).all())  # a pad query with nothing to see: zero mix, bias only


@pytest.mark.parametrize(
    "dtype, backend, tol",
    [
        (torch.float64, "auto", TOL64),
        # fp32: the step's products are attnlab's kernel (one row per sequence), the full pass's
        # MKL's, summed in other orders; and attnlab's one-query attention kernel: rounding.
        (torch.float32, "auto", dict(atol=2e-5, rtol=1e-5)),
        (torch.float32, "sdpa", dict(atol=2e-5, rtol=1e-5)),
        (torch.float32, "math", dict(atol=2e-5, rtol=1e-5)),
        (torch.bfloat16, "auto", dict(atol=2e-2, rtol=2e-2)),
    ],
)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("rotary", [False, True])
def test_one_row_decoding_step_equals_the_general_path(dtype, backend, tol, bias, rotary):
    """One new position without masks (GPT's decoding step, is_causal=False) takes the short
    path; is_causal=True, which masks nothing for one new query, takes the general one."""
    from attnlab.positional import RotaryEmbedding

    torch.manual_seed(0)
    mha = MultiHeadAttention(24, 3, bias=bias, backend=backend, rotary=RotaryEmbedding(8) if rotary else None)
    mha = randomize_(mha, 1).to(dtype)
    x = torch.randn(2, 20, 24).to(dtype)  # 20 > the cache's initial capacity of 16: storage grows once
    full = mha(x, is_causal=True).output
    with torch.inference_mode():  # as generation runs (the kernels need no autograd)
        short, general = KVCache(), KVCache()
        a = [mha(x[:, t : t + 1], cache=short).output for t in range(20)]
        b = [mha(x[:, t : t + 1], is_causal=True, cache=general).output for t in range(20)]
    torch.testing.assert_close(torch.cat(a, 1), torch.cat(b, 1), **tol)
    if dtype != torch.bfloat16:  # bf16 rounds the uncached path (one stacked q, k, v product) differently
        torch.testing.assert_close(torch.cat(a, 1), full, **tol)
    (k, v), (general_k, general_v) = short.stored(), general.stored()
    assert k.shape == general_k.shape == (2, 3, 20, 8)
    torch.testing.assert_close(k, general_k, **tol)
    torch.testing.assert_close(v, general_v, **tol)


def test_which_steps_take_the_one_row_path(monkeypatch):
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).eval()
    calls = []
    real = MultiHeadAttention.attend_cached_row
    monkeypatch.setattr(MultiHeadAttention, "attend_cached_row", lambda *a: calls.append(1) or real(*a))
    cache = KVCache()
    with torch.inference_mode():
        mha(torch.randn(1, 3, 8), cache=cache)  # a prompt: several positions
        mha(torch.randn(1, 1, 8), cache=cache)  # a step
        mha(torch.randn(1, 1, 8), cache=cache, need_weights=True)
        mha(torch.randn(1, 1, 8), cache=cache, key_padding_mask=torch.ones(1, 6, dtype=torch.bool))
        mha(torch.randn(1, 1, 8), cache=cache, attn_mask=torch.ones(1, 7, dtype=torch.bool))
        mha(torch.randn(1, 1, 8), cache=cache, is_causal=True)
        mha(torch.randn(1, 1, 8))  # no cache
        assert calls == [1] and len(cache) == 8
        chunked = MultiHeadAttention(8, 2, backend="chunked").eval()
        chunked(torch.randn(1, 1, 8), cache=KVCache())  # the online softmax is not a one-row kernel
        assert calls == [1]
        with pytest.raises(TypeError, match="dtype"):
            mha(torch.randn(1, 1, 8).double(), cache=KVCache())  # the general path names the problem


def test_stacked_self_attention_projection_equals_the_three_projections():
    # Self-attention without a cache projects q, k, v in one matmul; giving key/value explicitly
    # takes the three separate products. Same outputs and the same gradients for every weight.
    torch.manual_seed(0)
    mha = MultiHeadAttention(12, 3).double()
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    grads = []
    for args in ((x,), (x, x, x)):
        mha.zero_grad()
        out = mha(*args, is_causal=True).output
        out.square().sum().backward()
        grads.append((out.detach(), {n: p.grad.clone() for n, p in mha.named_parameters()}))
    torch.testing.assert_close(grads[0][0], grads[1][0], **TOL64)
    for name in grads[0][1]:
        torch.testing.assert_close(grads[0][1][name], grads[1][1][name], **TOL64, msg=name)
    assert set(grads[0][1]) == {
        f"{p}.{w}" for p in ("q_proj", "k_proj", "v_proj", "out_proj") for w in ("weight", "bias")
    }


def test_project_kv_equals_key_value():
    torch.manual_seed(0)
    mha = MultiHeadAttention(12, 3, kdim=5, vdim=7).double()
    q = torch.randn(2, 4, 12, dtype=torch.float64)
    key, value = torch.randn(2, 6, 5, dtype=torch.float64), torch.randn(2, 6, 7, dtype=torch.float64)
    real = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
    kv = mha.project_kv(key, value)
    assert kv[0].shape == (2, 3, 6, 4) and kv[1].shape == (2, 3, 6, 4)
    a = mha(q, key, value, key_padding_mask=real, need_weights=True)
    b = mha(q, kv=kv, key_padding_mask=real, need_weights=True)
    torch.testing.assert_close(a.output, b.output, **TOL64)
    torch.testing.assert_close(a.weights, b.weights, **TOL64)
    # project_kv(key) alone means value = key
    mha_same = MultiHeadAttention(8, 2).double()
    mem = torch.randn(2, 5, 8, dtype=torch.float64)
    _, v1 = mha_same.project_kv(mem)
    torch.testing.assert_close(v1, mha_same.project_kv(mem, mem)[1])


@pytest.mark.parametrize("T", [1, 3])
def test_kv_shared_by_groups_of_query_rows_equals_one_copy_per_row(T):
    # The beams of a sentence share its source: kv with one row per group of G query rows gives
    # what the kv copied to every row gives, weights included (each query row its own).
    torch.manual_seed(0)
    mha = MultiHeadAttention(12, 3).double()
    G = 4
    memory = torch.randn(2, 6, 12, dtype=torch.float64)
    real = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
    q = torch.randn(2 * G, T, 12, dtype=torch.float64)
    kv = mha.project_kv(memory)  # (2, H, S, Dh) each
    rows = torch.arange(2).repeat_interleave(G)
    copied = mha(q, kv=(kv[0][rows], kv[1][rows]), key_padding_mask=real[rows], need_weights=True)
    shared = mha(q, kv=kv, key_padding_mask=real, need_weights=True)
    assert shared.weights.shape == (2 * G, 3, T, 6)
    torch.testing.assert_close(shared.output, copied.output, **TOL64)
    torch.testing.assert_close(shared.weights, copied.weights, **TOL64)
    with pytest.raises(ValueError, match="multiple of kv's rows"):
        mha(q[:3], kv=kv, key_padding_mask=real)
    with pytest.raises(ValueError, match="key_padding_mask only"):
        mha(q, kv=kv, is_causal=True)
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(B, S\) = \(2, 6\)"):
        mha(q, kv=kv, key_padding_mask=real[rows])


def test_a_cache_gives_back_what_it_stored():
    k, v = torch.randn(2, 3, 20, 4), torch.randn(2, 3, 20, 4)  # (B, H, S, Dh): past the first capacity
    cache, rolling = KVCache(), RollingKVCache(6)
    for c in (cache, rolling):
        with pytest.raises(ValueError, match="empty"):
            c.stored()
        c.extend(k[:, :, :3], v[:, :, :3])
        c.extend(k[:, :, 3:], v[:, :, 3:])
    got_k, got_v = cache.stored()
    assert torch.equal(got_k, k) and torch.equal(got_v, v)
    got_k, got_v = rolling.stored()  # only the last window
    assert torch.equal(got_k, k[:, :, -6:]) and torch.equal(got_v, v[:, :, -6:])


def test_cache_reorder():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).double()
    prefix = torch.randn(3, 5, 8, dtype=torch.float64)
    nxt = torch.randn(3, 1, 8, dtype=torch.float64)
    cache = KVCache()
    mha(prefix, is_causal=True, cache=cache)
    index = torch.tensor([2, 0, 0])
    cache.reorder(index)
    step = mha(nxt, is_causal=True, cache=cache).output
    full = mha(torch.cat([prefix[index], nxt], 1), is_causal=True).output
    torch.testing.assert_close(step[:, 0], full[:, -1], **TOL64)
    KVCache().reorder(index)  # an empty cache has nothing to reorder


@pytest.mark.parametrize("gather", [None, reorder_rows], ids=["index_select", "engine"])
@pytest.mark.parametrize("grad", [False, True])
def test_cache_reorders_every_step_follow_the_rows(grad, gather):
    # Beam search reorders after every step, growing the batch (K beams) then shrinking it
    # (finished sentences) while the capacity doubles: each step equals the full recomputation,
    # whether the rows are copied whole (the modules) or only their filled positions (the engine's
    # gather, attnlab.accel.reorder_rows).
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).double()
    seqs = torch.randn(3, 1, 8, dtype=torch.float64)  # (B, t, D) every row's inputs so far
    cache = KVCache()
    with torch.set_grad_enabled(grad):
        mha(seqs, is_causal=True, cache=cache)
        for index in ([0, 0, 1, 1, 2, 2], [1, 0, 3, 3, 5, 4], [2, 2, 5, 4], [1, 0, 3, 2], [3, 0], [1, 0, 0]) * 3:
            index = torch.tensor(index)
            cache.reorder(index, gather=gather)
            nxt = torch.randn(len(index), 1, 8, dtype=torch.float64)
            seqs = torch.cat([seqs[index], nxt], dim=1)
            step = mha(nxt, is_causal=True, cache=cache).output
            torch.testing.assert_close(step[:, 0], mha(seqs, is_causal=True).output[:, -1], **TOL64)
    assert len(cache) == seqs.shape[1] > 16  # past the first capacity


# --------------------------------------------------------------------------------------------
# FeedForward and the blocks, against plain re-computations and torch.nn's Transformer layers
# --------------------------------------------------------------------------------------------


def plain_linear(x, lin):
    y = x @ lin.weight.T
    return y if lin.bias is None else y + lin.bias


def plain_layer_norm(x, ln):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + ln.eps) * ln.weight + ln.bias


def plain_attention(mha, q_in, kv_in, allowed):
    """Multi-head attention written out: project, split, softmax over allowed keys, merge, project.

    allowed: (B, T, S) bool or None.
    """
    B, T, D = q_in.shape
    H, Dh = mha.n_heads, D // mha.n_heads
    q = plain_linear(q_in, mha.q_proj).reshape(B, T, H, Dh)  # (B, T, H, Dh)
    k = plain_linear(kv_in, mha.k_proj).reshape(B, -1, H, Dh)  # (B, S, H, Dh)
    v = plain_linear(kv_in, mha.v_proj).reshape(B, -1, H, Dh)  # (B, S, H, Dh)
    scores = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(Dh)  # (B, H, T, S)
    if allowed is not None:
        scores = scores.masked_fill(~allowed[:, None], -math.inf)
    w = torch.softmax(scores, -1)
    mixed = torch.einsum("bhts,bshd->bthd", w, v).reshape(B, T, D)  # (B, T, D)
    return plain_linear(mixed, mha.out_proj)


GELU = {
    "relu": lambda x: torch.clamp(x, min=0),
    "gelu": lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
}


@pytest.mark.parametrize("activation", sorted(GELU))
@pytest.mark.parametrize("bias", [True, False])
def test_feed_forward(activation, bias):
    ff = randomize_(FeedForward(6, 10, activation=activation, bias=bias).double(), 0)
    x = torch.randn(2, 3, 6, dtype=torch.float64)
    expected = plain_linear(GELU[activation](plain_linear(x, ff.up_proj)), ff.down_proj)
    torch.testing.assert_close(ff(x), expected, **TOL64)
    assert ff.up_proj.weight.shape == (10, 6) and ff.down_proj.weight.shape == (6, 10)
    with pytest.raises(ValueError, match="unknown activation 'swishy'"):
        FeedForward(6, 10, activation="swishy")


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("causal", [False, True])
def test_encoder_block_plain_recomputation(norm, causal):
    blk = randomize_(EncoderBlock(8, 2, 12, norm=norm, activation="gelu").double(), 3)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    real = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    allowed = real[:, None, :] & (torch.ones(5, 5, dtype=torch.bool).tril() if causal else True)  # (B, T, S)
    out = blk(x, key_padding_mask=real, is_causal=causal, need_weights=True)

    def ff(h):
        return plain_linear(GELU["gelu"](plain_linear(h, blk.ff.up_proj)), blk.ff.down_proj)

    if norm == "post":
        h = plain_layer_norm(x + plain_attention(blk.self_attn, x, x, allowed), blk.attn_norm)
        expected = plain_layer_norm(h + ff(h), blk.ff_norm)
    else:
        a = plain_layer_norm(x, blk.attn_norm)
        h = x + plain_attention(blk.self_attn, a, a, allowed)
        expected = h + ff(plain_layer_norm(h, blk.ff_norm))
    torch.testing.assert_close(out.hidden, expected, **TOL64)
    assert out.self_weights.shape == (2, 2, 5, 5) and out.cross_weights is None
    with pytest.raises(ValueError, match="norm must be 'post'"):
        EncoderBlock(8, 2, 12, norm="sandwich")


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_decoder_block_plain_recomputation(norm):
    blk = randomize_(DecoderBlock(8, 2, 12, norm=norm).double(), 4)
    x = torch.randn(2, 4, 8, dtype=torch.float64)
    memory = torch.randn(2, 6, 8, dtype=torch.float64)
    mem_real = torch.tensor([[True] * 6, [True] * 2 + [False] * 4])
    out = blk(x, memory, memory_padding_mask=mem_real, need_weights=True)
    self_allowed = torch.ones(4, 4, dtype=torch.bool).tril().expand(2, 4, 4)
    cross_allowed = mem_real[:, None, :].expand(2, 4, 6)

    def ff(h):
        return plain_linear(torch.relu(plain_linear(h, blk.ff.up_proj)), blk.ff.down_proj)

    if norm == "post":
        h = plain_layer_norm(x + plain_attention(blk.self_attn, x, x, self_allowed), blk.self_norm)
        h = plain_layer_norm(h + plain_attention(blk.cross_attn, h, memory, cross_allowed), blk.cross_norm)
        expected = plain_layer_norm(h + ff(h), blk.ff_norm)
    else:
        a = plain_layer_norm(x, blk.self_norm)
        h = x + plain_attention(blk.self_attn, a, a, self_allowed)
        h = h + plain_attention(blk.cross_attn, plain_layer_norm(h, blk.cross_norm), memory, cross_allowed)
        expected = h + ff(plain_layer_norm(h, blk.ff_norm))
    torch.testing.assert_close(out.hidden, expected, **TOL64)
    assert out.self_weights.shape == (2, 2, 4, 4) and out.cross_weights.shape == (2, 2, 4, 6)
    torch.testing.assert_close(out.cross_weights[1, :, :, 2:], torch.zeros(2, 4, 4, dtype=torch.float64))


@pytest.mark.parametrize("norm_first", [False, True])
def test_blocks_match_torch_transformer_layers(norm_first):
    norm = "pre" if norm_first else "post"
    D, H, F_ = 8, 2, 16
    enc = randomize_(EncoderBlock(D, H, F_, norm=norm).double(), 5)
    dec = randomize_(DecoderBlock(D, H, F_, norm=norm).double(), 6)
    t_enc = nn.TransformerEncoderLayer(D, H, F_, dropout=0.0, batch_first=True, norm_first=norm_first).double()
    t_dec = nn.TransformerDecoderLayer(D, H, F_, dropout=0.0, batch_first=True, norm_first=norm_first).double()
    with torch.no_grad():
        copy_mha_to_torch(enc.self_attn, t_enc.self_attn)
        copy_mha_to_torch(dec.self_attn, t_dec.self_attn)
        copy_mha_to_torch(dec.cross_attn, t_dec.multihead_attn)
        pairs = [
            (enc.ff.up_proj, t_enc.linear1),
            (enc.ff.down_proj, t_enc.linear2),
            (enc.attn_norm, t_enc.norm1),
            (enc.ff_norm, t_enc.norm2),
            (dec.ff.up_proj, t_dec.linear1),
            (dec.ff.down_proj, t_dec.linear2),
            (dec.self_norm, t_dec.norm1),
            (dec.cross_norm, t_dec.norm2),
            (dec.ff_norm, t_dec.norm3),
        ]
        for ours, theirs in pairs:
            theirs.weight.copy_(ours.weight)
            theirs.bias.copy_(ours.bias)
    src, tgt = torch.randn(2, 6, D, dtype=torch.float64), torch.randn(2, 4, D, dtype=torch.float64)
    src_real = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    memory = enc(src, key_padding_mask=src_real).hidden
    torch.testing.assert_close(memory, t_enc(src, src_key_padding_mask=~src_real), **TOL64)
    memory = memory.detach()
    hidden = dec(tgt, memory, memory_padding_mask=src_real).hidden
    ref_hidden = t_dec(tgt, memory, tgt_mask=~causal_mask(4), memory_key_padding_mask=~src_real)
    torch.testing.assert_close(hidden, ref_hidden, **TOL64)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_decoder_block_cached_decoding(norm):
    """Step-by-step decoding with a self-attention cache and pre-projected memory equals the full pass."""
    blk = randomize_(DecoderBlock(8, 2, 12, norm=norm).double(), 7)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    memory = torch.randn(2, 3, 8, dtype=torch.float64)
    mem_real = torch.tensor([[True] * 3, [True, True, False]])
    full = blk(x, memory, memory_padding_mask=mem_real).hidden
    cache, memory_kv = KVCache(), blk.cross_attn.project_kv(memory)
    steps = [
        blk(x[:, t : t + 1], memory_kv=memory_kv, memory_padding_mask=mem_real, cache=cache).hidden for t in range(5)
    ]
    torch.testing.assert_close(torch.cat(steps, 1), full, **TOL64)
