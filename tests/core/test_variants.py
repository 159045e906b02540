"""Attention variants (sliding window, global + window, chunked) against dense references.

References: attnlab's math backend given the equivalent dense mask (the specification), the
masks themselves against plain Python loops written from the definitions, and
``torch.nn.functional.scaled_dot_product_attention`` for the exact chunked attention. Every
comparison covers the output and the gradients of q, k and v.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import functional as AF
from attnlab.functional import (
    combine_masks,
    dilated_window_mask,
    global_window_mask,
    scaled_dot_product_attention,
    sliding_window_mask,
)
from attnlab.layers import DecoderBlock, EncoderBlock, KVCache, MultiHeadAttention, RollingKVCache
from attnlab.variants import (
    ATTENTION_VARIANTS,
    AttentionSpec,
    blocks,
    chunked_attention,
    global_window_attention,
    sliding_window_attention,
)

TOL = {
    torch.float64: dict(atol=1e-10, rtol=1e-10),
    torch.float32: dict(atol=2e-5, rtol=2e-5),
}
SETTINGS = settings(max_examples=25, deadline=None)


# --------------------------------------------------------------------------------------------
# Helpers: inputs, the reference, and masks written from the definitions.
# --------------------------------------------------------------------------------------------


def qkv(T, S, *, dtype=torch.float64, lead=(2, 3), dh=8, dv=5, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(*lead, T, dh, generator=gen, dtype=dtype).requires_grad_()  # (B, H, T, Dh)
    k = torch.randn(*lead, S, dh, generator=gen, dtype=dtype).requires_grad_()  # (B, H, S, Dh)
    v = torch.randn(*lead, S, dv, generator=gen, dtype=dtype).requires_grad_()  # (B, H, S, Dv)
    return q, k, v


def user_mask(kind, T, S, seed=1):
    """A user mask of each broadcast kind the variants cut into blocks differently."""
    gen = torch.Generator().manual_seed(seed)
    if kind is None:
        return None
    if kind == "key_padding":  # (B, 1, 1, S), each row keeps its first keys
        lengths = torch.tensor([S, max(1, S - 3)])
        return AF.padding_mask(lengths, max_len=S)[:, None, None, :]
    if kind == "dense":  # (B, H, T, S)
        return torch.rand(2, 3, T, S, generator=gen) > 0.3
    if kind == "rows":  # (B, 1, T, 1): some queries see nothing at all
        return torch.rand(2, 1, T, 1, generator=gen) > 0.3
    raise ValueError(kind)


def outputs_and_grads(fn, q, k, v, seed=2):
    out = fn(q, k, v)
    if isinstance(out, AF.AttentionResult):
        out = out.output
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=out.dtype)
    grads = torch.autograd.grad(out, (q, k, v), g)
    return (out, *grads)


def assert_same(fn, ref, q, k, v, dtype=torch.float64):
    for got, want in zip(outputs_and_grads(fn, q, k, v), outputs_and_grads(ref, q, k, v)):
        torch.testing.assert_close(got, want, **TOL[dtype])


def reference(mask):
    return lambda q, k, v: scaled_dot_product_attention(q, k, v, mask, backend="math").output


def loop_window_mask(T, S, window, causal, dilation):
    """Query i (at p = i + S - T) sees key j iff j = p - m·d, 0 ≤ m < w (causal), or
    j = p + m·d, |m| ≤ w // 2 (symmetric)."""
    m = torch.zeros(T, S, dtype=torch.bool)
    for i in range(T):
        p = i + S - T
        steps = range(window) if causal else range(-(window // 2), window // 2 + 1)
        for s in steps:
            j = p - s * dilation if causal else p + s * dilation
            if 0 <= j < S:
                m[i, j] = True
    return m


def loop_global_mask(T, S, window, causal, dilation, positions):
    m = loop_window_mask(T, S, window, causal, dilation)
    for i in range(T):
        p = i + S - T
        for j in range(S):
            if p in positions or j in positions:
                m[i, j] = True
            if causal and j > p:
                m[i, j] = False
    return m


# --------------------------------------------------------------------------------------------
# Dense masks of the variants.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("T,S", [(1, 1), (5, 5), (9, 9), (3, 11), (11, 4)])
@pytest.mark.parametrize("window", [1, 2, 3, 4, 20])
@pytest.mark.parametrize("dilation", [1, 2, 3])
@pytest.mark.parametrize("causal", [True, False])
def test_dilated_window_mask_matches_definition(T, S, window, dilation, causal):
    got = dilated_window_mask(T, S, window=window, causal=causal, dilation=dilation)
    assert torch.equal(got, loop_window_mask(T, S, window, causal, dilation))
    if dilation == 1:  # the lead's helper is the undilated special case
        assert torch.equal(got, sliding_window_mask(T, S, window=window, causal=causal))


@pytest.mark.parametrize("T,S", [(6, 6), (3, 9), (9, 5)])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("positions", [[0], [1, 4], [0, 2, 4]])
def test_global_window_mask_matches_definition(T, S, causal, positions):
    got = global_window_mask(T, S, window=2, global_positions=positions, causal=causal, dilation=2)
    assert torch.equal(got, loop_global_mask(T, S, 2, causal, 2, set(positions)))
    as_bool = torch.zeros(S, dtype=torch.bool)
    as_bool[positions] = True
    assert torch.equal(got, global_window_mask(T, S, window=2, global_positions=as_bool, causal=causal, dilation=2))


# --------------------------------------------------------------------------------------------
# Sliding window == math reference with the dense window mask.
# --------------------------------------------------------------------------------------------

LENGTHS = [(1, 1), (7, 7), (13, 13), (16, 16), (3, 20), (20, 6)]  # decode-like T < S; T > S


@pytest.mark.parametrize("T,S", LENGTHS)
@pytest.mark.parametrize("window", [1, 3, 8, 50])  # 50 > every length: a window wider than the sequence
@pytest.mark.parametrize("causal", [True, False])
def test_sliding_window_equals_reference(T, S, window, causal):
    q, k, v = qkv(T, S)
    mask = sliding_window_mask(T, S, window=window, causal=causal)
    for block in (4, None):  # 4: several blocks, lengths not multiples of the block size
        assert_same(
            lambda q, k, v, block=block: sliding_window_attention(
                q, k, v, window=window, is_causal=causal, block_size=block
            ),
            reference(mask),
            q,
            k,
            v,
        )


@pytest.mark.parametrize("kind", ["key_padding", "dense", "rows"])
@pytest.mark.parametrize("dilation", [1, 2, 3])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("T,S", [(13, 13), (4, 15), (15, 7)])
def test_sliding_window_with_masks_and_dilation(kind, dilation, causal, T, S):
    q, k, v = qkv(T, S)
    um = user_mask(kind, T, S)
    mask = combine_masks(loop_window_mask(T, S, 3, causal, dilation), um)
    assert_same(
        lambda q, k, v: sliding_window_attention(
            q, k, v, um, window=3, is_causal=causal, dilation=dilation, block_size=4
        ),
        reference(mask),
        q,
        k,
        v,
    )


@pytest.mark.parametrize("causal", [True, False])
def test_sliding_window_float32(causal):
    q, k, v = qkv(37, 37, dtype=torch.float32)
    um = user_mask("key_padding", 37, 37)
    mask = combine_masks(sliding_window_mask(37, window=8, causal=causal), um)
    assert_same(
        lambda q, k, v: sliding_window_attention(q, k, v, um, window=8, is_causal=causal, block_size=8),
        reference(mask),
        q,
        k,
        v,
        dtype=torch.float32,
    )


@SETTINGS
@given(
    T=st.integers(1, 24),
    S=st.integers(1, 24),
    window=st.integers(1, 30),
    dilation=st.integers(1, 4),
    causal=st.booleans(),
    block=st.integers(1, 9),
    padded=st.booleans(),
)
def test_sliding_window_property(T, S, window, dilation, causal, block, padded):
    q, k, v = qkv(T, S, lead=(2, 1))
    um = user_mask("key_padding", T, S) if padded else None
    mask = combine_masks(loop_window_mask(T, S, window, causal, dilation), um)
    assert_same(
        lambda q, k, v: sliding_window_attention(
            q, k, v, um, window=window, is_causal=causal, dilation=dilation, block_size=block
        ),
        reference(mask),
        q,
        k,
        v,
    )


def test_sliding_window_weights_are_the_reference_weights():
    q, k, v = qkv(11, 11)
    um = user_mask("key_padding", 11, 11)
    got = sliding_window_attention(q, k, v, um, window=4, dilation=2, return_weights=True, block_size=3)
    want = scaled_dot_product_attention(
        q, k, v, combine_masks(loop_window_mask(11, 11, 4, True, 2), um), backend="math", return_weights=True
    )
    torch.testing.assert_close(got.weights, want.weights, **TOL[torch.float64])
    torch.testing.assert_close(got.output, want.output, **TOL[torch.float64])


def test_sliding_window_memory_is_linear_in_length():
    """No (T, S) tensor: a length whose dense scores would need 40 GB runs in a few MB."""
    T = 100_000  # dense float32 scores: 4·10¹⁰ bytes
    q, k, v = (torch.randn(1, 1, T, 4) for _ in range(3))
    out = sliding_window_attention(q, k, v, window=8).output
    # Spot-check one row against its own 8 keys.
    i = 54_321
    w = torch.softmax(q[0, 0, i] @ k[0, 0, i - 7 : i + 1].T / 2.0, dim=-1)
    torch.testing.assert_close(out[0, 0, i], w @ v[0, 0, i - 7 : i + 1], atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------------------------
# Global + sliding window (Longformer).
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("T,S", [(13, 13), (5, 17), (17, 9)])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("positions", [[0], [0, 3, 8], [2, 6]])
@pytest.mark.parametrize("kind", [None, "key_padding", "dense"])
def test_global_window_equals_reference(T, S, causal, positions, kind):
    q, k, v = qkv(T, S)
    um = user_mask(kind, T, S)
    mask = combine_masks(loop_global_mask(T, S, 3, causal, 1, set(positions)), um)
    assert_same(
        lambda q, k, v: global_window_attention(
            q, k, v, um, window=3, global_positions=positions, is_causal=causal, block_size=4
        ),
        reference(mask),
        q,
        k,
        v,
    )


@pytest.mark.parametrize("causal", [True, False])
def test_global_window_with_dilation_float32_and_weights(causal):
    T = 21
    q, k, v = qkv(T, T, dtype=torch.float32)
    positions = [0, 10]
    mask = loop_global_mask(T, T, 3, causal, 2, set(positions))
    fn = lambda q, k, v: global_window_attention(  # noqa: E731
        q, k, v, window=3, global_positions=positions, is_causal=causal, dilation=2, block_size=4
    )
    assert_same(fn, reference(mask), q, k, v, dtype=torch.float32)
    got = global_window_attention(
        q, k, v, window=3, global_positions=positions, is_causal=causal, dilation=2, return_weights=True
    ).weights
    want = scaled_dot_product_attention(q, k, v, mask, backend="math", return_weights=True).weights
    torch.testing.assert_close(got, want, **TOL[torch.float32])


def test_global_tokens_see_and_are_seen_by_every_position():
    T, positions = 40, [0, 17]
    q, k, v = qkv(T, T, lead=(1, 2))
    w = global_window_attention(
        q, k, v, window=4, global_positions=positions, is_causal=False, return_weights=True
    ).weights  # (1, 2, T, T)
    assert (w[..., positions, :] > 0).all()  # global rows attend to every key
    assert (w[..., :, positions] > 0).all()  # every query attends to the global keys
    local = sliding_window_mask(T, window=4, causal=False)
    others = [i for i in range(T) if i not in positions]
    outside = ~local[others][:, others]  # (T-g, T-g): beyond the window, between ordinary positions
    assert (w[..., others, :][..., others][..., outside] == 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(1, 2, T, dtype=w.dtype))

    wc = global_window_attention(q, k, v, window=4, global_positions=positions, return_weights=True).weights
    later = torch.arange(T) >= 17
    assert (wc[..., later, 17] > 0).all() and (wc[..., ~later, 17] == 0).all()  # seen by later queries
    assert (wc[..., 17, :18] > 0).all() and (wc[..., 17, 18:] == 0).all()  # sees everything up to itself


def test_global_window_without_global_positions_is_sliding_window():
    q, k, v = qkv(9, 9)
    assert_same(
        lambda q, k, v: global_window_attention(q, k, v, window=3, global_positions=[]),
        lambda q, k, v: sliding_window_attention(q, k, v, window=3),
        q,
        k,
        v,
    )


# --------------------------------------------------------------------------------------------
# Exact chunked attention == PyTorch SDPA.
# --------------------------------------------------------------------------------------------


def torch_sdpa(mask=None, causal=False):
    def fn(q, k, v):
        T, S = q.shape[-2], k.shape[-2]
        m = mask
        if causal:  # bottom-right aligned, built independently of attnlab
            tri = torch.ones(T, S, dtype=torch.bool).tril(S - T)
            m = tri if m is None else m & tri
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    return fn


@pytest.mark.parametrize("T,S", [(1, 1), (7, 7), (13, 13), (4, 19), (19, 19)])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("kind", [None, "key_padding", "dense"])
@pytest.mark.parametrize("chunks", [(4, 3), (512, 512)])
def test_chunked_equals_torch_sdpa(T, S, causal, kind, chunks):
    q, k, v = qkv(T, S)
    um = user_mask(kind, T, S, seed=T * 31 + S)
    if um is not None and causal:
        um = um | torch.eye(T, S, dtype=torch.bool).roll(S - T, -1)  # every row keeps its own key
    qc, kc = chunks
    assert_same(
        lambda q, k, v: chunked_attention(q, k, v, um, is_causal=causal, q_chunk=qc, k_chunk=kc),
        torch_sdpa(um, causal),
        q,
        k,
        v,
    )


def test_chunked_float32_and_backend_name():
    q, k, v = qkv(70, 70, dtype=torch.float32)
    um = user_mask("key_padding", 70, 70)
    assert_same(
        lambda q, k, v: AttentionSpec("full", backend="chunked")(q, k, v, um, is_causal=True),
        torch_sdpa(um, causal=True),
        q,
        k,
        v,
        dtype=torch.float32,
    )
    got = chunked_attention(q, k, v, um, is_causal=True, return_weights=True, q_chunk=16, k_chunk=16)
    want = scaled_dot_product_attention(q, k, v, um, is_causal=True, return_weights=True, backend="math")
    torch.testing.assert_close(got.weights, want.weights, **TOL[torch.float32])


def test_chunked_backend_name_resolves_in_the_spec_not_in_functional():
    x = torch.randn(2, 9, D, dtype=torch.float64)
    torch.manual_seed(0)
    chunked = MultiHeadAttention(D, H, backend="chunked").double()
    torch.manual_seed(0)
    math_ = MultiHeadAttention(D, H, backend="math").double()
    assert chunked.backend == "chunked"
    torch.testing.assert_close(chunked(x, is_causal=True).output, math_(x, is_causal=True).output, **TOL[torch.float64])
    q, k, v = qkv(4, 4)
    with pytest.raises(ValueError, match="chunked_attention"):
        scaled_dot_product_attention(q, k, v, backend="chunked")


# --------------------------------------------------------------------------------------------
# Contract shared by all variants: empty rows, gradcheck, dropout, errors.
# --------------------------------------------------------------------------------------------

VARIANT_CALLS = {
    "sliding_window": lambda q, k, v, m, **kw: sliding_window_attention(q, k, v, m, window=3, block_size=2, **kw),
    "dilated": lambda q, k, v, m, **kw: sliding_window_attention(q, k, v, m, window=2, dilation=2, **kw),
    "global_window": lambda q, k, v, m, **kw: global_window_attention(
        q, k, v, m, window=2, global_positions=[1], block_size=2, **kw
    ),
    "chunked": lambda q, k, v, m, **kw: chunked_attention(q, k, v, m, q_chunk=2, k_chunk=3, **kw),
}


@pytest.mark.parametrize("name", list(VARIANT_CALLS))
def test_fully_masked_rows_give_zeros_never_nan(name):
    q, k, v = qkv(6, 6)
    mask = torch.ones(2, 3, 6, 6, dtype=torch.bool)
    mask[0, :, 2] = False  # query 2 of batch 0 may attend nothing
    mask[1] = False  # batch 1 attends nothing at all
    out, w = VARIANT_CALLS[name](q, k, v, mask, return_weights=True)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert (out[0, :, 2] == 0).all() and (out[1] == 0).all() and (w[1] == 0).all()
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    assert all(torch.isfinite(g).all() for g in grads)
    assert (grads[0][1] == 0).all()


@pytest.mark.parametrize("name", list(VARIANT_CALLS))
def test_gradcheck(name):
    q, k, v = qkv(5, 5, lead=(1, 2), dh=3, dv=2)
    mask = user_mask("key_padding", 5, 5)[:1]
    assert torch.autograd.gradcheck(lambda q, k, v: VARIANT_CALLS[name](q, k, v, mask).output, (q, k, v))


@pytest.mark.parametrize("name", list(VARIANT_CALLS))
def test_dropout_backward_matches_its_forward(name):
    """The backward regenerates the forward's dropout pattern (nothing stored): reseeding makes
    the function deterministic, so finite differences check the analytic gradients."""
    q, k, v = qkv(6, 6, lead=(1, 2), dh=3, dv=2)

    def fn(q, k, v):
        torch.manual_seed(123)
        return VARIANT_CALLS[name](q, k, v, None, dropout_p=0.4).output

    assert torch.autograd.gradcheck(fn, (q, k, v))
    plain = VARIANT_CALLS[name](q, k, v, None).output
    assert not torch.allclose(fn(q, k, v), plain)  # dropout did something
    torch.testing.assert_close(fn(q, k, v), fn(q, k, v))


def test_weights_size_limit(monkeypatch):
    monkeypatch.setattr(blocks, "MAX_DENSE_WEIGHTS", 100)
    q, k, v = qkv(11, 11)
    for call in VARIANT_CALLS.values():
        with pytest.raises(ValueError, match="MAX_DENSE_WEIGHTS"):
            call(q, k, v, None, return_weights=True)
        assert call(q, k, v, None).weights is None  # without weights there is no limit


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda q, k, v: sliding_window_attention(q, k, v, window=0), "window must be ≥ 1"),
        (lambda q, k, v: sliding_window_attention(q, k, v, window=2.5), "window must be an int"),
        (lambda q, k, v: sliding_window_attention(q, k, v, window=2, dilation=0), "dilation must be ≥ 1"),
        (lambda q, k, v: sliding_window_attention(q, k, v, window=2, dropout_p=1.0), "dropout_p"),
        (lambda q, k, v: sliding_window_attention(q, k, v, torch.ones(4, 4), window=2), "boolean"),
        (lambda q, k, v: global_window_attention(q, k, v, window=2, global_positions=[4]), r"\[0, S\)"),
        (lambda q, k, v: global_window_attention(q, k, v, window=2, global_positions=[-1]), r"\[0, S\)"),
        (lambda q, k, v: global_window_attention(q, k, v, window=2, global_positions=[0.5]), "integer"),
        (lambda q, k, v: global_window_attention(q, k, v, window=2, global_positions=[[0]]), "1-D"),
        (
            lambda q, k, v: global_window_attention(
                q, k, v, window=2, global_positions=torch.ones(3, dtype=torch.bool)
            ),
            "shape",
        ),
        (lambda q, k, v: chunked_attention(q, k, v, q_chunk=0), "q_chunk must be ≥ 1"),
        (lambda q, k, v: chunked_attention(q[..., :2], k, v), "head dims differ"),
    ],
)
def test_bad_input_messages(call, match):
    q, k, v = qkv(4, 4)
    with pytest.raises((ValueError, TypeError), match=match):
        call(q, k, v)


# --------------------------------------------------------------------------------------------
# Variants by name.
# --------------------------------------------------------------------------------------------


def test_registry_and_spec():
    assert ATTENTION_VARIANTS["full"] is scaled_dot_product_attention
    assert {"full", "chunked", "sliding_window", "global_window"} <= set(ATTENTION_VARIANTS)
    spec = AttentionSpec("sliding_window", window=4, dilation=2)
    assert spec == AttentionSpec("sliding_window", dilation=2, window=4)
    assert hash(spec) == hash(AttentionSpec("sliding_window", dilation=2, window=4))
    assert spec.recent_positions == 7 and spec.windowed
    assert AttentionSpec("full").recent_positions is None and not AttentionSpec("full").windowed
    assert spec.replace(window=2).options == {"window": 2, "dilation": 2}
    assert "window=4" in repr(spec)
    g = AttentionSpec("global_window", window=2, global_positions=torch.tensor([True, False, True]))
    assert g.options["global_positions"] == (0, 2)
    q, k, v = qkv(6, 6)
    torch.testing.assert_close(
        spec(q, k, v, is_causal=True).output, sliding_window_attention(q, k, v, window=4, dilation=2).output
    )


@pytest.mark.parametrize(
    "name, options, match",
    [
        ("sparse", {}, "unknown attention variant"),
        ("sliding_window", {}, r"needs option\(s\) \['window'\]"),
        ("sliding_window", {"window": 4, "backend": "math"}, "has no option"),
        ("sliding_window", {"window": 0}, "window must be ≥ 1"),
        ("global_window", {"window": 2, "global_positions": [-3]}, r"\[0, S\)"),
    ],
)
def test_spec_errors(name, options, match):
    with pytest.raises(ValueError, match=match):
        AttentionSpec(name, **options)


# --------------------------------------------------------------------------------------------
# Layers: MHA/blocks with each variant == "full" with the equivalent dense mask.
# --------------------------------------------------------------------------------------------

D, H = 12, 3

SPEC_MASKS = [
    # (spec, is_causal, dense mask (T, S) the spec stands for)
    (AttentionSpec("sliding_window", window=3), True, lambda T: sliding_window_mask(T, window=3)),
    (AttentionSpec("sliding_window", window=4), False, lambda T: sliding_window_mask(T, window=4, causal=False)),
    (AttentionSpec("sliding_window", window=3, dilation=2), True, lambda T: loop_window_mask(T, T, 3, True, 2)),
    (AttentionSpec("global_window", window=2, global_positions=[0, 5]), True,
     lambda T: loop_global_mask(T, T, 2, True, 1, {0, 5})),
    (AttentionSpec("global_window", window=2, global_positions=[0]), False,
     lambda T: loop_global_mask(T, T, 2, False, 1, {0})),
    (AttentionSpec("chunked", q_chunk=3, k_chunk=4), True, lambda T: torch.ones(T, T, dtype=torch.bool).tril()),
    (AttentionSpec("chunked"), False, lambda T: torch.ones(T, T, dtype=torch.bool)),
]  # fmt: skip


def twins(make):
    """The same module built twice with identical random parameters (float64)."""
    torch.manual_seed(0)
    a = make("full").double()
    b = make(None).double()
    b.load_state_dict(a.state_dict())
    return a, b


@pytest.mark.parametrize("spec, causal, dense", SPEC_MASKS, ids=[f"{s!r}-{c}" for s, c, _ in SPEC_MASKS])
def test_mha_variant_equals_full_with_dense_mask(spec, causal, dense):
    T = 11
    full, variant = twins(lambda a: MultiHeadAttention(D, H, attention=spec if a is None else a))
    x = torch.randn(2, T, D, dtype=torch.float64, requires_grad=True)
    kpm = AF.padding_mask(torch.tensor([T, T - 4]), max_len=T)  # (B, S)
    got = variant(x, key_padding_mask=kpm, is_causal=causal, need_weights=True)
    want = full(x, key_padding_mask=kpm, attn_mask=dense(T), need_weights=True)
    torch.testing.assert_close(got.output, want.output, **TOL[torch.float64])
    torch.testing.assert_close(got.weights, want.weights, **TOL[torch.float64])
    g = torch.randn_like(got.output)
    got_grads = torch.autograd.grad(got.output, [x, *variant.parameters()], g)
    want_grads = torch.autograd.grad(want.output, [x, *full.parameters()], g)
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a, b, **TOL[torch.float64])


def test_blocks_pass_the_variant_through():
    spec, T = AttentionSpec("sliding_window", window=3), 9
    mask = sliding_window_mask(T, window=3)
    x = torch.randn(2, T, D, dtype=torch.float64)
    full, variant = twins(lambda a: EncoderBlock(D, H, 20, norm="pre", attention=spec if a is None else a))
    torch.testing.assert_close(variant(x, is_causal=True).hidden, full(x, attn_mask=mask).hidden, **TOL[torch.float64])
    memory = torch.randn(2, 5, D, dtype=torch.float64)
    for window in (T, 2):  # the decoder's self-attention is causal; a window of T changes nothing
        spec = AttentionSpec("sliding_window", window=window)
        full, variant = twins(lambda a, spec=spec: DecoderBlock(D, H, 20, attention=spec if a is None else a))
        assert variant.self_attn.attention == spec and variant.cross_attn.attention == AttentionSpec("full")
        same = torch.allclose(variant(x, memory).hidden, full(x, memory).hidden, **TOL[torch.float64])
        assert same == (window == T)


def test_backend_option_only_for_full():
    assert MultiHeadAttention(D, H, backend="math").attention == AttentionSpec("full", backend="math")
    with pytest.raises(ValueError, match="has no option"):
        MultiHeadAttention(D, H, backend="math", attention=AttentionSpec("sliding_window", window=2))
    with pytest.raises(ValueError, match="needs option"):
        MultiHeadAttention(D, H, attention="sliding_window")


# --------------------------------------------------------------------------------------------
# Rolling key/value cache: decoding with a window keeps only the last positions.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("window, dilation", [(1, 1), (3, 1), (4, 2), (40, 1)])
@pytest.mark.parametrize("chunks", [[1] * 12, [5, 1, 1, 3, 1, 1], [12]])
def test_rolling_cache_decoding_equals_full_recomputation(window, dilation, chunks):
    T = sum(chunks)
    spec = AttentionSpec("sliding_window", window=window, dilation=dilation)
    full, variant = twins(lambda a: MultiHeadAttention(D, H, attention=spec if a is None else a))
    x = torch.randn(2, T, D, dtype=torch.float64)
    kpm = AF.padding_mask(torch.tensor([T, T - 2]), max_len=T)  # (B, T)
    kpm[1, 0] = False  # a left-padded row too
    want = full(x, key_padding_mask=kpm, attn_mask=loop_window_mask(T, T, window, True, dilation)).output
    cache = variant.new_cache()
    assert isinstance(cache, RollingKVCache) and cache.window == (window - 1) * dilation + 1
    outs, start = [], 0
    for t in chunks:
        # The padding mask may cover every position seen so far; the layer keeps the last columns.
        out = variant(x[:, start : start + t], key_padding_mask=kpm[:, : start + t], is_causal=True, cache=cache)
        outs.append(out.output)
        start += t
        assert len(cache) == start and cache.kept == min(start, cache.window)
    torch.testing.assert_close(torch.cat(outs, dim=1), want, **TOL[torch.float64])


def test_rolling_cache_with_block_and_reorder():
    spec = AttentionSpec("sliding_window", window=3)
    torch.manual_seed(0)
    block = EncoderBlock(D, H, 20, norm="pre", attention=spec).double()
    x = torch.randn(3, 8, D, dtype=torch.float64)
    cache, plain = block.self_attn.new_cache(), KVCache()
    for t in range(8):  # a plain KVCache with the same window gives the same outputs
        a = block(x[:, t : t + 1], is_causal=True, cache=cache).hidden
        b = block(x[:, t : t + 1], is_causal=True, cache=plain).hidden
        torch.testing.assert_close(a, b, **TOL[torch.float64])
    assert cache.kept == 3 and len(plain) == 8
    index = torch.tensor([2, 0])
    cache.reorder(index)
    plain.reorder(index)
    nxt = torch.randn(2, 1, D, dtype=torch.float64)
    torch.testing.assert_close(
        block(nxt, is_causal=True, cache=cache).hidden,
        block(nxt, is_causal=True, cache=plain).hidden,
        **TOL[torch.float64],
    )


def test_rolling_cache_errors():
    full = MultiHeadAttention(D, H)
    x = torch.randn(1, 1, D)
    assert isinstance(full.new_cache(), KVCache)
    with pytest.raises(ValueError, match="forgets old positions"):
        full(x, is_causal=True, cache=RollingKVCache(4))
    windowed = MultiHeadAttention(D, H, attention=AttentionSpec("sliding_window", window=4))
    with pytest.raises(ValueError, match="keeps fewer positions"):
        windowed(x, is_causal=True, cache=RollingKVCache(3))
    with pytest.raises(ValueError, match="is_causal=True"):
        windowed(x, cache=RollingKVCache(4))
    with pytest.raises(ValueError, match="is_causal=True"):
        windowed(x, cache=KVCache())
    with pytest.raises(ValueError, match="positive int"):
        RollingKVCache(0)


def test_all_registered_variants_run_in_mha():
    """Every name in ATTENTION_VARIANTS works in MultiHeadAttention given its required options."""
    options = {"sliding_window": {"window": 3}, "global_window": {"window": 3, "global_positions": [0]}}
    x = torch.randn(2, 7, D)
    outs = {}
    for name in ATTENTION_VARIANTS:
        torch.manual_seed(0)
        mha = MultiHeadAttention(D, H, attention=AttentionSpec(name, **options.get(name, {})))
        outs[name] = mha(x, is_causal=True).output
        assert outs[name].shape == (2, 7, D) and torch.isfinite(outs[name]).all()
    torch.testing.assert_close(outs["chunked"], outs["full"], atol=1e-5, rtol=1e-5)
    torch.manual_seed(0)
    wide = MultiHeadAttention(D, H, attention=AttentionSpec("sliding_window", window=7))
    # A causal window as wide as the sequence is full causal attention.
    torch.testing.assert_close(wide(x, is_causal=True).output, outs["full"], atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------------------------
# Model configs: attention / window / n_global reach the blocks and their caches.
# --------------------------------------------------------------------------------------------


def tiny_gpt(seed=0, **fields):
    from attnlab.models.gpt import GPT, GPTConfig

    torch.manual_seed(seed)
    config = GPTConfig(vocab_size=31, n_positions=40, d_model=16, n_layers=2, n_heads=2, **fields)
    return GPT(config).double().eval()


@pytest.mark.parametrize("fields", [dict(attention="sliding_window", window=4),
                                    dict(attention="sliding_window", window=3, positions="rotary"),
                                    dict(attention="global_window", window=3, n_global=2),
                                    dict(attention="chunked")])  # fmt: skip
def test_gpt_variant_cached_generation_equals_full_forward(fields):
    model = tiny_gpt(**fields)
    ids = torch.randint(0, 31, (2, 14), generator=torch.Generator().manual_seed(3))
    full = model(ids).logits  # (B, T, V)
    caches = model.new_caches()
    if fields["attention"] == "sliding_window":
        assert all(isinstance(c, RollingKVCache) and c.window == fields["window"] for c in caches)
    steps, start = [], 0
    for t in [5, 1, 1, 4, 1, 1, 1]:
        steps.append(model(ids[:, start : start + t], caches=caches).logits)
        start += t
    torch.testing.assert_close(torch.cat(steps, dim=1), full, **TOL[torch.float64])
    if fields["attention"] == "sliding_window":
        assert all(c.kept == fields["window"] for c in caches)


def test_gpt_window_reaches_the_blocks():
    ids = torch.randint(0, 31, (2, 12), generator=torch.Generator().manual_seed(4))
    full = tiny_gpt()(ids).logits
    wide = tiny_gpt(attention="sliding_window", window=12)  # same seed: same weights
    narrow = tiny_gpt(attention="sliding_window", window=3)
    assert narrow.blocks[0].self_attn.attention == AttentionSpec("sliding_window", window=3)
    torch.testing.assert_close(wide(ids).logits, full, **TOL[torch.float64])  # a window of T is full attention
    assert not torch.allclose(narrow(ids).logits, full)
    # The first 3 positions see the same keys either way.
    torch.testing.assert_close(narrow(ids).logits[:, :3], full[:, :3], **TOL[torch.float64])


def test_bert_and_transformer_configs_take_the_variant():
    from attnlab.models.bert import BertConfig, BertModel
    from attnlab.models.transformer import PRESETS, Transformer, TransformerConfig

    ids = torch.randint(1, 40, (2, 10), generator=torch.Generator().manual_seed(5))
    mask = torch.ones(2, 10, dtype=torch.bool)
    mask[1, 7:] = False
    hidden = {}
    for name, fields in {"full": {}, "wide": dict(attention="global_window", window=20, n_global=1),
                         "narrow": dict(attention="global_window", window=2, n_global=1)}.items():  # fmt: skip
        torch.manual_seed(0)
        bert = BertModel(BertConfig(vocab_size=40, n_positions=16, d_model=16, n_layers=2, n_heads=2, **fields))
        hidden[name] = bert.double().eval()(ids, attention_mask=mask).hidden_states
    # Symmetric window of 20 ≥ 2·T: every position in reach, so the same as full attention.
    torch.testing.assert_close(hidden["wide"], hidden["full"], **TOL[torch.float64])
    assert not torch.allclose(hidden["narrow"], hidden["full"])

    torch.manual_seed(0)
    config = TransformerConfig(src_vocab_size=23, tgt_vocab_size=19, **dict(PRESETS["tiny"], n_decoder_layers=2),
                               attention="sliding_window", window=3)  # fmt: skip
    model = Transformer(config).double().eval()
    src = torch.randint(5, 23, (2, 9), generator=torch.Generator().manual_seed(6))
    tgt = torch.randint(5, 19, (2, 8), generator=torch.Generator().manual_seed(7))
    full = model(src, tgt).logits  # (B, T, V)
    state = model.start(src)
    assert all(isinstance(c, RollingKVCache) for c in state.caches)
    steps = torch.stack([model.step(tgt[:, t : t + 1], state).logits for t in range(tgt.shape[1])], dim=1)
    torch.testing.assert_close(steps, full, **TOL[torch.float64])


@pytest.mark.parametrize(
    "fields, match",
    [
        (dict(attention="sliding_window"), "needs option"),
        (dict(attention="full", window=4), "has no option"),
        (dict(attention="full", n_global=2), "n_global"),
        (dict(attention="sliding_window", window=4, backend="math"), "has no option"),
        (dict(attention="sliding_window", window=0), "window must be ≥ 1"),
        (dict(attention="linear"), "unknown attention variant"),
    ],
)
def test_model_config_errors(fields, match):
    from attnlab.models.bert import BertConfig
    from attnlab.models.gpt import GPTConfig
    from attnlab.models.transformer import TransformerConfig

    with pytest.raises(ValueError, match=match):
        GPTConfig(**fields)
    with pytest.raises(ValueError, match=match):
        BertConfig(**fields)
    if "backend" not in fields:  # the Transformer config has no backend field
        with pytest.raises(ValueError, match=match):
            TransformerConfig(src_vocab_size=5, tgt_vocab_size=5, **fields)


# --------------------------------------------------------------------------------------------
# `attnlab experiment variants`.
# --------------------------------------------------------------------------------------------

SONNET = (
    "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate:\n"
    "Rough winds do shake the darling buds of May,\nAnd summer's lease hath all too short a date.\n"
) * 40


def test_parse_variant():
    from attnlab.experiments.variants import parse_variant

    assert parse_variant("full") == AttentionSpec("full")
    assert parse_variant("sliding_window:64") == AttentionSpec("sliding_window", window=64)
    assert parse_variant("global_window:16:4") == AttentionSpec(
        "global_window", window=16, global_positions=(0, 1, 2, 3)
    )
    for bad, match in [("sparse", "unknown attention"), ("sliding_window", "needs option"),
                       ("sliding_window:x", "integers"), ("global_window:1:2:3", "NAME")]:  # fmt: skip
        with pytest.raises(ValueError, match=match):
            parse_variant(bad)


def test_experiment_rejects_windows_as_long_as_the_block(tmp_path):
    from attnlab.experiments.variants import VariantsSettings, run_variants

    with pytest.raises(ValueError, match="full attention"):
        run_variants(SONNET, tmp_path, VariantsSettings(variants=("sliding_window:32",), block_size=32))
    assert not any(tmp_path.iterdir())  # checked before anything was trained or written


def _full_and_window_runs(settings) -> list:
    """The full and the 4-wide sliding-window contestants of ``settings``, trained in-process."""
    from attnlab.experiments.variants import train_variant

    runs = [("full", {"attention": "full"}), ("sliding_window:4", {"attention": "sliding_window", "window": 4})]
    return [train_variant(v, f, SONNET, settings) for v, f in runs]


def test_one_variant_run_and_report(tmp_path):
    """One contestant trained in-process for a second, then the report files."""
    from attnlab.experiments.variants import VariantsReport, VariantsSettings, write_report

    settings = VariantsSettings(variants=("full", "sliding_window:4"), minutes=0.04, model_preset="tiny",
                                block_size=16, batch_size=4, eval_tokens=256, evals=2, progress=False)  # fmt: skip
    rows = _full_and_window_runs(settings)
    for r in rows:
        assert r.steps > 0 and r.curve and all(torch.isfinite(torch.tensor(loss)) for _, loss in r.curve)
        assert r.best_valid_loss <= r.curve[0][1] and r.tokens_per_s > 0
    assert rows[0].parameters == rows[1].parameters  # a variant adds no parameters
    assert rows[1].attention == repr(AttentionSpec("sliding_window", window=4))
    write_report(VariantsReport(tmp_path, rows, 1.0), settings)
    report = (tmp_path / "report.md").read_text()
    assert "`sliding_window:4`" in report and "`full`" in report
    assert len((tmp_path / "variants.csv").read_text().strip().splitlines()) == 3
    assert (tmp_path / "variants.png").stat().st_size > 0


def test_a_step_budget_gives_every_variant_the_same_evaluation_points():
    """With ``steps`` the run stops on steps, not on the clock, and the evaluations are spread over
    them: every variant's curve has its points at the same steps, the last at the end."""
    from attnlab.experiments.variants import VariantsSettings, train_variant

    settings = VariantsSettings(variants=("full", "sliding_window:4"), steps=6, model_preset="tiny",
                                block_size=16, batch_size=4, eval_tokens=256, evals=3, progress=False)  # fmt: skip
    rows = _full_and_window_runs(settings)
    for r in rows:
        assert r.steps == 6 and r.curve_steps == [2, 4, 6] and len(r.curve) == 3
    # Steps that evals do not divide: every ceil(7 / 3) = 3 steps, and once more at the end; more
    # evaluations than steps: one after every step.
    for steps, evals, want in ((7, 3, [3, 6, 7]), (2, 6, [1, 2])):
        short = dataclasses.replace(settings, steps=steps, evals=evals)
        r = train_variant("full", {"attention": "full"}, SONNET, short)
        assert r.steps == steps and r.curve_steps == want and len(r.curve) == len(want), (steps, evals)
    with pytest.raises(ValueError, match="steps"):
        VariantsSettings(steps=0)


def test_the_variants_train_in_the_precision_the_settings_name(monkeypatch):
    """``VariantsSettings.precision`` reaches every variant's ``TrainConfig`` (the notebooks name
    theirs, so no precision probe runs in front of a learner); ``None`` is fp32, like for like."""
    from attnlab.experiments import variants

    class Stop(Exception):
        pass

    seen = []

    def record(**fields):
        seen.append(fields["precision"])
        raise Stop  # the configuration is all this test needs: no training

    monkeypatch.setattr(variants, "TrainConfig", record)
    for precision in ("bf16", None):
        settings = variants.VariantsSettings(steps=2, precision=precision, progress=False)
        with pytest.raises(Stop):
            variants.train_variant("full", {"attention": "full"}, SONNET, settings)
    assert seen == ["bf16", "fp32"]
    with pytest.raises(ValueError, match="precision must be one of"):
        variants.VariantsSettings(precision="fp16")


@pytest.mark.slow
def test_experiment_variants_command(tmp_path):
    from attnlab.cli import main

    text = tmp_path / "sonnet.txt"
    text.write_text(SONNET)
    out = tmp_path / "report"
    code = main(["experiment", "variants", "--out", str(out), "--minutes", "0.1", "--text", str(text),
                 "--variants", "full", "global_window:4:1", "--preset", "tiny", "--block-size", "16",
                 "--batch-size", "4", "--no-progress"])  # fmt: skip
    assert code == 0
    results = json.loads((out / "results.json").read_text())["results"]
    assert [r["variant"] for r in results] == ["full", "global_window:4:1"]
    assert all(r["steps"] > 0 and r["peak_mib"] >= 0 for r in results)


def test_backend_attribute_switches_the_kernel_of_full_attention():
    mha = MultiHeadAttention(D, H)
    assert mha.backend == "auto"
    mha.backend = "math"
    assert mha.attention == AttentionSpec("full", backend="math") and mha.backend == "math"
    x = torch.randn(1, 3, D)
    assert mha(x, need_weights=True).weights is not None  # the math kernel returns weights
    mha.backend = "sdpa"
    with pytest.raises(ValueError, match="cannot return attention weights"):
        mha(x, need_weights=True)
    mha.backend = "auto"
    assert mha.attention == AttentionSpec("full")
    windowed = MultiHeadAttention(D, H, attention=AttentionSpec("sliding_window", window=2))
    with pytest.raises(ValueError, match="has no option"):
        windowed.backend = "math"
