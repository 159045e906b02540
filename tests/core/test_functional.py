"""attnlab.functional against PyTorch and against the definitions, plus its error messages.

The independent references are ``torch.nn.functional.scaled_dot_product_attention`` (given a mask
built here with ``torch.tril``, never with attnlab's helpers), plain Python loops for the mask
helpers, and a per-pair loop for additive attention.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import functional as AF
from attnlab.accel import MATH_MAX_KEYS_LOW_PRECISION
from attnlab.functional import (
    additive_attention,
    causal_mask,
    combine_masks,
    padding_mask,
    scaled_dot_product_attention,
    sliding_window_mask,
)

BACKENDS = ["math", "sdpa"]
TOL = {
    torch.float64: dict(atol=1e-10, rtol=1e-10),
    torch.float32: dict(atol=1e-5, rtol=1e-5),
    torch.bfloat16: dict(atol=3e-2, rtol=3e-2),
}
SETTINGS = settings(max_examples=15, deadline=None)


def ref_causal(T: int, S: int) -> torch.Tensor:
    """Bottom-right aligned causal mask, built independently of attnlab: key j ≤ i + S - T."""
    return torch.ones(T, S, dtype=torch.bool).tril(S - T)  # (T, S)


def with_a_key_per_row(mask: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Allow one random key in every row, so that torch's reference has no all-masked row."""
    S = mask.shape[-1]
    pick = torch.randint(S, mask.shape[:-1] + (1,), generator=gen)  # (..., T, 1)
    return mask.scatter(-1, pick, True)  # (..., T, S)


def make_qkv(lead, T, S, Dh, Dv, dtype, gen):
    q = torch.randn(*lead, T, Dh, generator=gen, dtype=torch.float64).to(dtype)
    k = torch.randn(*lead, S, Dh, generator=gen, dtype=torch.float64).to(dtype)
    v = torch.randn(*lead, S, Dv, generator=gen, dtype=torch.float64).to(dtype)
    return q, k, v


def run_both(fn_ours, fn_ref, inputs, dtype):
    """Forward and gradients of ``fn_ours`` and ``fn_ref`` on copies of ``inputs``."""
    ours_in = [t.detach().clone().requires_grad_() for t in inputs]
    ref_in = [t.detach().clone().requires_grad_() for t in inputs]
    out_ours, out_ref = fn_ours(*ours_in), fn_ref(*ref_in)
    g = torch.randn(out_ref.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64).to(dtype)
    (out_ours * g).sum().backward()
    (out_ref * g).sum().backward()
    tol = TOL[dtype]
    torch.testing.assert_close(out_ours, out_ref, **tol)
    for a, b in zip(ours_in, ref_in):
        torch.testing.assert_close(a.grad, b.grad, **tol)


# --------------------------------------------------------------------------------------------
# Equality with torch.nn.functional.scaled_dot_product_attention
# --------------------------------------------------------------------------------------------

MASK_KINDS = ["none", "is_causal", "causal_mask", "padding", "boolean", "boolean_broadcast", "boolean+is_causal"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("kind", MASK_KINDS)
@pytest.mark.parametrize("lead", [(), (3,), (2, 3), (2, 1, 2)], ids=lambda s: "lead" + "x".join(map(str, s)))
def test_matches_torch_sdpa(backend, dtype, kind, lead):
    gen = torch.Generator().manual_seed(zlib.crc32(repr((backend, dtype, kind, lead)).encode()))
    T = int(torch.randint(1, 7, (1,), generator=gen))
    S = T + int(torch.randint(0, 4, (1,), generator=gen))  # S ≥ T so that causal rows see a key
    Dh, Dv = int(torch.randint(1, 9, (1,), generator=gen)), int(torch.randint(1, 9, (1,), generator=gen))
    q, k, v = make_qkv(lead, T, S, Dh, Dv, dtype, gen)

    mask, is_causal, ref_mask = None, False, None
    if kind == "is_causal":
        is_causal, ref_mask = True, ref_causal(T, S)
    elif kind == "causal_mask":
        mask = ref_mask = causal_mask(T, S)
        torch.testing.assert_close(mask, ref_causal(T, S))
    elif kind == "padding":
        B = lead[0] if lead else 1
        lengths = torch.randint(1, S + 1, (B,), generator=gen)
        # (B, S) -> (B, 1, ..., 1, S): one row of real/pad per batch element, shared by heads and queries
        keep_dims = (B,) + (1,) * (len(lead) - 1) + (1, S) if lead else (S,)
        mask = padding_mask(lengths, max_len=S).view(keep_dims)
        ref_mask = (torch.arange(S) < lengths[:, None]).view(keep_dims)  # (B, S) built by hand
    elif kind in ("boolean", "boolean+is_causal"):
        mask = torch.rand(*lead, T, S, generator=gen) < 0.5
        if kind == "boolean+is_causal":
            is_causal = True
            mask = mask | torch.eye(T, S, dtype=torch.bool)  # the diagonal survives the causal cut
            ref_mask = mask & ref_causal(T, S)
        else:
            mask = ref_mask = with_a_key_per_row(mask, gen)
    elif kind == "boolean_broadcast":
        mask = ref_mask = with_a_key_per_row(torch.rand(T, S, generator=gen) < 0.5, gen)  # (T, S)

    def ours(q, k, v):
        out, w = scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal, backend=backend)
        assert w is None
        return out

    def ref(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=ref_mask)

    run_both(ours, ref, (q, k, v), dtype)


@given(
    lead=st.lists(st.integers(1, 3), min_size=0, max_size=3),
    T=st.integers(1, 6),
    S=st.integers(1, 6),
    Dh=st.integers(1, 8),
    Dv=st.integers(1, 8),
    scale=st.one_of(st.none(), st.floats(0.05, 2.0)),
    seed=st.integers(0, 2**16),
)
@SETTINGS
def test_random_shapes_match_torch_sdpa(lead, T, S, Dh, Dv, scale, seed):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = make_qkv(tuple(lead), T, S, Dh, Dv, torch.float64, gen)
    mask = with_a_key_per_row(torch.rand(*lead, T, S, generator=gen) < 0.3, gen)
    for backend in BACKENDS:
        run_both(
            lambda q, k, v, backend=backend: (
                scaled_dot_product_attention(q, k, v, mask, scale=scale, backend=backend).output
            ),
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale),
            (q, k, v),
            torch.float64,
        )


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
def test_backends_agree_with_weights(dtype):
    """Math returns weights; their product with v is the output, and sdpa gives the same output."""
    gen = torch.Generator().manual_seed(3)
    q, k, v = make_qkv((2, 3), 5, 7, 4, 6, dtype, gen)
    mask = with_a_key_per_row(torch.rand(2, 1, 5, 7, generator=gen) < 0.5, gen)
    out_m, w = scaled_dot_product_attention(q, k, v, mask, return_weights=True, backend="math")
    out_s, none = scaled_dot_product_attention(q, k, v, mask, backend="sdpa")
    assert none is None and w.shape == (2, 3, 5, 7)
    ref_w = torch.softmax((q.double() @ k.double().transpose(-2, -1) / 2.0).masked_fill(~mask, -math.inf), -1)
    torch.testing.assert_close(w.double(), ref_w, **TOL[dtype])
    torch.testing.assert_close(out_m, out_s, **TOL[dtype])


def test_auto_backend_choice():
    gen = torch.Generator().manual_seed(0)
    q, k, v = make_qkv((2,), 3, 4, 5, 5, torch.float32, gen)
    assert scaled_dot_product_attention(q, k, v).weights is None
    _, w = scaled_dot_product_attention(q, k, v, return_weights=True)
    assert w is not None and w.shape == (2, 3, 4)


@pytest.mark.parametrize(
    "dtype, S, expected",
    [
        (torch.float32, 16, "sdpa"),
        (torch.float64, 16, "sdpa"),
        (torch.bfloat16, 16, "math"),
        (torch.float16, 16, "math"),
        (torch.bfloat16, MATH_MAX_KEYS_LOW_PRECISION, "math"),
        (torch.bfloat16, MATH_MAX_KEYS_LOW_PRECISION + 1, "sdpa"),
    ],
)
def test_auto_backend_takes_math_for_short_low_precision_attention_on_cpu(monkeypatch, dtype, S, expected):
    calls = []
    for name, fn in list(AF.BACKENDS.items()):
        monkeypatch.setitem(AF.BACKENDS, name, lambda *a, _n=name, _f=fn: calls.append(_n) or _f(*a))
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, n, 8, generator=gen).to(dtype) for n in (3, S, S))
    out, w = scaled_dot_product_attention(q, k, v, is_causal=True)
    assert calls == [expected] and w is None
    ref, _ = scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True, backend="math")
    torch.testing.assert_close(out.double(), ref, atol=3e-2, rtol=3e-2)


def test_auto_backend_without_the_engines_rule_is_the_fused_kernel():
    # The plain maths knows nothing of the engine: imported alone (attnlab.accel installs its rule
    # when imported), "auto" is PyTorch's fused kernel, where the engine's rule would take math;
    # a rule given by set_auto_rule decides, and None removes it again.
    code = """
import sys
import torch
from attnlab import functional as AF
calls = []
for name, fn in list(AF.BACKENDS.items()):
    AF.BACKENDS[name] = lambda *a, _n=name, _f=fn: calls.append(_n) or _f(*a)
q, k, v = (torch.randn(1, 2, n, 8, generator=torch.Generator().manual_seed(1)).bfloat16() for n in (3, 16, 16))
AF.scaled_dot_product_attention(q, k, v)
AF.set_auto_rule(lambda q, k: True)
AF.scaled_dot_product_attention(q, k, v)
AF.set_auto_rule(None)
AF.scaled_dot_product_attention(q, k, v)
print(" ".join(calls), "attnlab.accel" in sys.modules)
"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["sdpa", "math", "sdpa", "False"]


def test_dropout_is_applied_to_weights_and_rescaled():
    q, k = torch.zeros(1, 1, 4), torch.zeros(1, 400, 4)  # uniform weights 1/400
    v = torch.ones(1, 400, 1)
    torch.manual_seed(0)
    out, w = scaled_dot_product_attention(q, k, v, dropout_p=0.5, return_weights=True, backend="math")
    torch.testing.assert_close(w, torch.full((1, 1, 400), 1 / 400))  # weights reported before dropout
    # Each kept weight is doubled; about half are kept, so the output stays near 1.
    assert 0.8 < out.item() < 1.2 and out.item() != 1.0


# --------------------------------------------------------------------------------------------
# Gradcheck (float64)
# --------------------------------------------------------------------------------------------


def test_gradcheck_math_backend():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (t.requires_grad_() for t in make_qkv((2,), 3, 4, 3, 2, torch.float64, gen))
    mask = torch.tensor([[True, False, True, False], [False, False, False, False], [True, True, True, True]])

    def f(q, k, v):
        return scaled_dot_product_attention(q, k, v, mask, return_weights=True, backend="math")

    assert torch.autograd.gradcheck(f, (q, k, v))
    assert torch.autograd.gradcheck(
        lambda q, k, v: scaled_dot_product_attention(q, k, v, is_causal=True, backend="math").output, (q, k, v)
    )


def test_gradcheck_sdpa_backend():
    gen = torch.Generator().manual_seed(1)
    q, k, v = (t.requires_grad_() for t in make_qkv((2,), 3, 4, 3, 2, torch.float64, gen))
    mask = torch.tensor([[True, False, True, False], [False, False, False, False], [True, True, True, True]])
    assert torch.autograd.gradcheck(
        lambda q, k, v: scaled_dot_product_attention(q, k, v, mask, backend="sdpa").output, (q, k, v)
    )


def additive_params(Dq, Dk, A, gen):
    w_q = torch.randn(A, Dq, generator=gen, dtype=torch.float64)
    w_k = torch.randn(A, Dk, generator=gen, dtype=torch.float64)
    vec = torch.randn(A, generator=gen, dtype=torch.float64)
    bias = torch.randn(A, generator=gen, dtype=torch.float64)
    return w_q, w_k, vec, bias


def test_gradcheck_additive_attention():
    gen = torch.Generator().manual_seed(0)
    query = torch.randn(2, 3, 4, generator=gen, dtype=torch.float64)
    keys = torch.randn(2, 5, 3, generator=gen, dtype=torch.float64)
    values = torch.randn(2, 5, 2, generator=gen, dtype=torch.float64)
    params = additive_params(4, 3, 6, gen)
    mask = torch.rand(2, 3, 5, generator=gen) < 0.6
    mask[0, 1] = False  # one query with nothing to attend to
    inputs = tuple(t.requires_grad_() for t in (query, keys, values) + params)

    def f(query, keys, values, w_q, w_k, vec, bias):
        return additive_attention(query, keys, values, w_q, w_k, vec, mask, bias=bias)

    assert torch.autograd.gradcheck(f, inputs)


def test_additive_attention_matches_per_pair_loop():
    gen = torch.Generator().manual_seed(5)
    B, T, S, Dq, Dk, Dv, A = 2, 3, 4, 5, 3, 2, 6
    query = torch.randn(B, T, Dq, generator=gen, dtype=torch.float64)
    keys = torch.randn(B, S, Dk, generator=gen, dtype=torch.float64)
    values = torch.randn(B, S, Dv, generator=gen, dtype=torch.float64)
    w_q, w_k, vec, bias = additive_params(Dq, Dk, A, gen)
    mask = torch.ones(B, T, S, dtype=torch.bool)
    mask[1, 2, :2] = False
    out, weights = additive_attention(query, keys, values, w_q, w_k, vec, mask, bias=bias)

    for b in range(B):
        for t in range(T):
            scores = []
            for s in range(S):
                hidden = [
                    sum(w_q[a, i].item() * query[b, t, i].item() for i in range(Dq))
                    + sum(w_k[a, j].item() * keys[b, s, j].item() for j in range(Dk))
                    + bias[a].item()
                    for a in range(A)
                ]
                scores.append(sum(vec[a].item() * math.tanh(hidden[a]) for a in range(A)))
            allowed = [s for s in range(S) if mask[b, t, s]]
            top = max(scores[s] for s in allowed)
            z = sum(math.exp(scores[s] - top) for s in allowed)
            w = [math.exp(scores[s] - top) / z if s in allowed else 0.0 for s in range(S)]
            mixed = [sum(w[s] * values[b, s, d].item() for s in range(S)) for d in range(Dv)]
            torch.testing.assert_close(weights[b, t], torch.tensor(w, dtype=torch.float64), atol=1e-12, rtol=1e-12)
            torch.testing.assert_close(out[b, t], torch.tensor(mixed, dtype=torch.float64), atol=1e-12, rtol=1e-12)


def test_additive_attention_without_bias_and_module():
    from attnlab.layers import AdditiveAttention

    torch.manual_seed(0)
    mod = AdditiveAttention(query_dim=4, key_dim=3, attn_dim=5)
    query, keys = torch.randn(2, 1, 4), torch.randn(2, 6, 3)
    out, w = mod(query, keys)
    hidden = torch.tanh(query @ mod.q_proj.weight.T + (keys @ mod.k_proj.weight.T + mod.k_proj.bias))  # (2, 6, 5)
    ref_w = torch.softmax(hidden @ mod.score, dim=-1)  # (2, 6)
    torch.testing.assert_close(w[:, 0], ref_w)
    torch.testing.assert_close(out[:, 0], (ref_w.unsqueeze(-1) * keys).sum(1))
    _, w_nb = additive_attention(query, keys, keys, mod.q_proj.weight, mod.k_proj.weight, mod.score)
    ref_nb = torch.softmax(torch.tanh(query @ mod.q_proj.weight.T + keys @ mod.k_proj.weight.T) @ mod.score, -1)
    torch.testing.assert_close(w_nb[:, 0], ref_nb)


# --------------------------------------------------------------------------------------------
# Properties (hypothesis)
# --------------------------------------------------------------------------------------------


@given(B=st.integers(1, 3), T=st.integers(1, 6), S=st.integers(1, 6), Dh=st.integers(1, 6), seed=st.integers(0, 2**16))
@SETTINGS
def test_weights_sum_to_one_over_allowed_keys(B, T, S, Dh, seed):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = make_qkv((B,), T, S, Dh, Dh, torch.float64, gen)
    q = q * 5  # sharp weights too
    mask = torch.rand(B, T, S, generator=gen) < 0.6
    _, w = scaled_dot_product_attention(q, k, v, mask, return_weights=True, backend="math")
    has_key = mask.any(-1)
    torch.testing.assert_close(w.sum(-1), has_key.double())
    assert bool((w[~mask] == 0).all())
    assert bool((w >= 0).all())
    _, a_w = additive_attention(q, k, v, *additive_params(Dh, Dh, 3, gen)[:3], mask)
    torch.testing.assert_close(a_w.sum(-1), has_key.double())
    assert bool((a_w[~mask] == 0).all())


@given(T=st.integers(2, 7), seed=st.integers(0, 2**16), padded=st.booleans(), backend=st.sampled_from(BACKENDS))
@SETTINGS
def test_self_attention_is_permutation_equivariant(T, seed, padded, backend):
    from attnlab.layers import MultiHeadAttention

    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    mha = MultiHeadAttention(8, 2, backend=backend).double()
    x = torch.randn(2, T, 8, generator=gen, dtype=torch.float64)
    perm = torch.randperm(T, generator=gen)
    kpm = None
    if padded:
        kpm = torch.rand(2, T, generator=gen) < 0.7
        kpm[:, 0] = True
    out = mha(x, key_padding_mask=kpm).output
    out_p = mha(x[:, perm], key_padding_mask=None if kpm is None else kpm[:, perm]).output
    torch.testing.assert_close(out_p, out[:, perm])
    # The bare function, too: permuting keys together with values changes nothing.
    q, k, v = make_qkv((2,), 3, T, 4, 4, torch.float64, gen)
    o1 = scaled_dot_product_attention(q, k, v, backend=backend).output
    o2 = scaled_dot_product_attention(q, k[:, perm], v[:, perm], backend=backend).output
    torch.testing.assert_close(o1, o2)


@given(B=st.integers(1, 2), T=st.integers(1, 5), S=st.integers(1, 5), seed=st.integers(0, 2**16))
@SETTINGS
def test_fully_masked_rows_give_zeros_and_finite_gradients(B, T, S, seed):
    gen = torch.Generator().manual_seed(seed)
    mask = torch.rand(B, 2, T, S, generator=gen) < 0.5
    mask[0, 0, 0] = False  # at least one query with nothing to attend to
    empty = ~mask.any(-1)  # (B, 2, T)
    for backend in BACKENDS:
        for dtype in (torch.float32, torch.float64):
            q, k, v = (t.requires_grad_() for t in make_qkv((B, 2), T, S, 4, 3, dtype, gen))
            out = scaled_dot_product_attention(q, k, v, mask, backend=backend).output
            assert bool(torch.isfinite(out).all())
            assert bool((out[empty] == 0).all()), backend
            # Rows that do have keys agree with torch.
            ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | empty.unsqueeze(-1))
            torch.testing.assert_close(out[~empty], ref[~empty], **TOL[dtype])
            (out * torch.randn(out.shape, generator=gen, dtype=dtype)).sum().backward()
            for t in (q, k, v):
                assert bool(torch.isfinite(t.grad).all()), backend
            assert bool((q.grad[empty] == 0).all())


def test_causal_with_more_queries_than_keys_has_empty_rows():
    gen = torch.Generator().manual_seed(0)
    q, k, v = make_qkv((2,), 5, 3, 4, 4, torch.float32, gen)
    for backend in BACKENDS:
        out = scaled_dot_product_attention(q, k, v, is_causal=True, backend=backend).output
        assert bool((out[:, :2] == 0).all())  # queries 0, 1 stand before every key
        ref = F.scaled_dot_product_attention(q[:, 2:], k, v, is_causal=True)
        torch.testing.assert_close(out[:, 2:], ref)


# Every rank a mask can have next to queries of rank 2..5: 0 (a bool scalar) up to the queries'
# own rank, with some dims of size 1 (broadcast). Issue 17: a 1-D mask passed the check but made
# torch's fused kernel raise IndexError next to 4-D queries.
MASK_RANK_CASES = [(lead, rank) for lead in [(), (2,), (2, 3), (2, 3, 2)] for rank in range(len(lead) + 3)]


@pytest.mark.parametrize("backend", ["math", "sdpa", "auto"])
@pytest.mark.parametrize("lead, rank", MASK_RANK_CASES, ids=lambda c: str(c))
@pytest.mark.parametrize("is_causal", [False, True], ids=["plain", "causal"])
def test_masks_of_every_rank_work_on_every_backend(backend, lead, rank, is_causal):
    gen = torch.Generator().manual_seed(len(lead) * 10 + rank)
    T, S = 4, 6
    q, k, v = make_qkv(lead, T, S, 3, 2, torch.float64, gen)
    full_shape = lead + (T, S)
    shape = list(full_shape[len(full_shape) - rank :])  # the trailing `rank` dims ...
    for i in range(0, len(shape) - 1, 2):
        shape[i] = 1  # ... some of them broadcast
    mask = torch.rand(shape, generator=gen) < 0.7
    if rank:
        mask[..., -1] = True  # every row keeps a key: the reference needs none of the empty-row rule
    run_both(
        lambda q, k, v: scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal, backend=backend).output,
        lambda q, k, v: (
            scaled_dot_product_attention(q, k, v, mask.expand(full_shape), is_causal=is_causal, backend="math").output
        ),
        (q, k, v),
        torch.float64,
    )


@pytest.mark.parametrize(
    "dtype, big, backends",
    [(torch.float16, 300.0, ["math", "sdpa", "auto"]), (torch.bfloat16, 1e20, ["math"])],
    ids=["fp16", "bf16"],
)
def test_low_precision_overflow_does_not_let_a_masked_key_in(dtype, big, backends):
    """Issue 17 reproducer: the only allowed key scores -big² (below the dtype's range: -inf), the
    masked key scores 0. The output must be the allowed value 1.0, not the masked 100.0."""
    q = torch.full((1, 1, 1, 1), big, dtype=dtype)  # (B, H, T, Dh)
    k = torch.tensor([-big, 0.0], dtype=dtype).reshape(1, 1, 2, 1)  # (B, H, S, Dh)
    v = torch.tensor([1.0, 100.0], dtype=dtype).reshape(1, 1, 2, 1)
    mask = torch.tensor([True, False])
    assert bool(torch.isneginf(q @ k.transpose(-2, -1))[..., 0].all())  # the score does overflow
    for backend in backends:
        out = scaled_dot_product_attention(q, k, v, mask, scale=1.0, backend=backend).output
        assert out.item() == 1.0, backend
    # The same on the math path with the weights, and with a +inf score (no inf - inf = NaN).
    out, weights = scaled_dot_product_attention(q, k, v, mask, scale=1.0, return_weights=True)
    assert weights.flatten().tolist() == [1.0, 0.0]
    k_up = torch.tensor([big, 0.0], dtype=dtype).reshape(1, 1, 2, 1)  # scores +inf and 0, both allowed
    assert scaled_dot_product_attention(q, k_up, v, scale=1.0, backend="math").output.item() == 1.0
    # A row with nothing to attend to still gives zeros, and the gradients stay finite.
    q2 = torch.cat([q, q], dim=2).requires_grad_()  # (1, 1, 2, 1)
    k2, v2 = k.clone().requires_grad_(), v.clone().requires_grad_()
    mask2 = torch.tensor([[True, False], [False, False]])
    out = scaled_dot_product_attention(q2, k2, v2, mask2, scale=1.0, backend="math").output
    assert out.flatten().tolist() == [1.0, 0.0]
    out.sum().backward()
    assert all(bool(torch.isfinite(t.grad).all()) for t in (q2, k2, v2))


@pytest.mark.parametrize("backend", ["math", "sdpa", "auto"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_nan_at_padded_positions_stays_out_of_real_rows(backend, bad):
    """NaN/inf in the keys and values of padded positions, and in queries that may attend to
    nothing, must leave the real rows (output and gradients) as they are with zeros there."""
    gen = torch.Generator().manual_seed(3)
    B, H, T, S = 2, 2, 5, 6
    q, k, v = make_qkv((B, H), T, S, 4, 3, torch.float64, gen)
    keys = padding_mask(torch.tensor([6, 4]), max_len=S)  # (B, S): sequence 1 has 2 padded keys
    queries = padding_mask(torch.tensor([5, 3]), max_len=T)  # (B, T): sequence 1 has 2 padded queries
    for mask in (keys[:, None, None, :], queries[:, None, :, None] & keys[:, None, None, :]):  # (B, 1, 1|T, S)
        clean = [t.clone() for t in (q, k, v)]
        dirty = [t.clone() for t in (q, k, v)]
        dirty[1][1, :, 4:] = bad  # k at the padded keys
        dirty[2][1, :, 4:] = bad  # v at the padded keys
        if mask.shape[-2] == T:
            dirty[0][1, :, 3:] = bad  # q at the queries with nothing to attend to
        outs, grads = [], []
        for inputs in (clean, dirty):
            inputs = [t.requires_grad_() for t in inputs]
            out = scaled_dot_product_attention(*inputs, mask, backend=backend).output  # (B, H, T, 3)
            out.sum().backward()
            outs.append(out)
            grads.append([t.grad for t in inputs])
        real_rows = queries[:, None, :] if mask.shape[-2] == T else torch.ones(B, 1, T, dtype=torch.bool)
        torch.testing.assert_close(outs[1][real_rows.expand(B, H, T)], outs[0][real_rows.expand(B, H, T)])
        assert bool(torch.isfinite(outs[1][real_rows.expand(B, H, T)]).all())
        torch.testing.assert_close(grads[1][0][real_rows.expand(B, H, T)], grads[0][0][real_rows.expand(B, H, T)])
        real_keys = keys[:, None, :].expand(B, H, S)
        for g_dirty, g_clean in zip(grads[1][1:], grads[0][1:]):
            torch.testing.assert_close(g_dirty[real_keys], g_clean[real_keys])


# --------------------------------------------------------------------------------------------
# Mask helpers
# --------------------------------------------------------------------------------------------


@given(T=st.integers(1, 9), extra=st.integers(-3, 6))
@SETTINGS
def test_causal_mask_bottom_right(T, extra):
    S = max(1, T + extra)
    m = causal_mask(T, S)
    assert m.dtype == torch.bool and m.shape == (T, S)
    for i in range(T):
        for j in range(S):
            assert bool(m[i, j]) == (j <= i + S - T)
    if S >= T:
        assert bool(m[-1].all())  # the last query sees every key
    assert torch.equal(causal_mask(T), causal_mask(T, T))


@given(lengths=st.lists(st.integers(0, 7), min_size=1, max_size=5), extra=st.integers(0, 3))
@SETTINGS
def test_padding_mask_from_lengths(lengths, extra):
    max_len = max(lengths) + extra
    m = padding_mask(torch.tensor(lengths), max_len=max_len)
    assert m.shape == (len(lengths), max_len) and m.dtype == torch.bool
    for b, n in enumerate(lengths):
        assert m[b].tolist() == [s < n for s in range(max_len)]
    assert padding_mask(torch.tensor(lengths)).shape == (len(lengths), max(lengths))


def test_padding_mask_from_tokens():
    tokens = torch.tensor([[5, 6, 0, 0], [7, 0, 8, 0]])
    assert padding_mask(tokens=tokens, pad_id=0).tolist() == [[True, True, False, False], [True, False, True, False]]


@given(T=st.integers(1, 8), extra=st.integers(0, 4), window=st.integers(1, 6), causal=st.booleans())
@SETTINGS
def test_sliding_window_mask(T, extra, window, causal):
    S = T + extra
    m = sliding_window_mask(T, S, window=window, causal=causal)
    assert m.shape == (T, S)
    for i in range(T):
        p = i + S - T
        for j in range(S):
            expected = (p - window < j <= p) if causal else abs(j - p) <= window // 2
            assert bool(m[i, j]) == expected
    if causal:
        assert bool((m <= causal_mask(T, S)).all())  # never sees the future


@given(T=st.integers(1, 9), extra=st.integers(0, 4), block=st.integers(1, 5), causal=st.booleans())
@SETTINGS
def test_block_local_mask(T, extra, block, causal):
    S = T + extra
    m = AF.block_local_mask(T, S, block=block, causal=causal)
    assert m.shape == (T, S) and m.dtype == torch.bool
    for i in range(T):
        p = i + S - T
        for j in range(S):
            expected = p // block == j // block and (j <= p or not causal)
            assert bool(m[i, j]) == expected
    assert bool(m.any(dim=1).all())  # every query sees at least itself


def test_block_local_mask_checks_its_block():
    with pytest.raises(ValueError, match="block must be ≥ 1"):
        AF.block_local_mask(4, block=0)
    with pytest.raises(TypeError, match="block must be an int"):
        AF.block_local_mask(4, block=2.0)


def test_combine_masks():
    a = torch.tensor([[True, False], [True, True]])
    b = torch.tensor([True, False])  # broadcasts over rows
    assert combine_masks(a, b).tolist() == [[True, False], [True, False]]
    assert combine_masks(None, a, None) is a
    assert combine_masks() is None and combine_masks(None, None) is None
    with pytest.raises(TypeError, match="boolean"):
        combine_masks(a, torch.ones(2, 2))


# --------------------------------------------------------------------------------------------
# Errors name the problem
# --------------------------------------------------------------------------------------------


def _qkv(q=(2, 3, 4), k=(2, 5, 4), v=(2, 5, 4), dtype=torch.float32):
    return torch.zeros(q, dtype=dtype), torch.zeros(k, dtype=dtype), torch.zeros(v, dtype=dtype)


@pytest.mark.parametrize(
    "make, kwargs, err, pattern",
    [
        (lambda: _qkv(k=(2, 5, 6)), {}, ValueError, r"head dims differ.*Dh=4.*Dh=6"),
        (lambda: _qkv(k=(3, 5, 4), v=(3, 5, 4)), {}, ValueError, r"batch/head dims differ"),
        (lambda: _qkv(v=(2, 6, 4)), {}, ValueError, r"same length S"),
        (lambda: _qkv(), {"mask": torch.ones(4, 5, dtype=torch.bool)}, ValueError, r"not broadcastable"),
        (
            lambda: _qkv(q=(1, 3, 4), k=(1, 5, 4), v=(1, 5, 4)),
            {"mask": torch.ones(2, 3, 5, dtype=torch.bool)},
            ValueError,
            r"not broadcastable",
        ),
        (lambda: _qkv(), {"mask": torch.ones(3, 5)}, TypeError, r"mask must be boolean.*float32"),
        (lambda: _qkv(dtype=torch.int64), {}, TypeError, r"floating-point.*int64"),
        (lambda: _qkv(q=(2, 0, 4)), {}, ValueError, r"empty sequence.*T=0"),
        (lambda: _qkv(k=(2, 0, 4), v=(2, 0, 4)), {}, ValueError, r"empty sequence.*S=0"),
        (lambda: _qkv(), {"backend": "flash9"}, ValueError, r"unknown attention backend 'flash9'"),
        (
            lambda: _qkv(),
            {"backend": "sdpa", "return_weights": True},
            ValueError,
            r"sdpa.*cannot return attention weights",
        ),
        (lambda: _qkv(), {"dropout_p": 1.0}, ValueError, r"dropout_p"),
        (lambda: (torch.zeros(3, 4),) + _qkv()[1:], {}, ValueError, r"batch/head dims differ"),
        (lambda: (torch.zeros(4),) + _qkv()[1:], {}, ValueError, r"q must have shape"),
    ],
    ids=[
        "head-dims",
        "batch",
        "kv-length",
        "mask-shape",
        "mask-enlarges",
        "mask-dtype",
        "int-dtype",
        "empty-T",
        "empty-S",
        "backend",
        "sdpa-weights",
        "dropout",
        "batch-rank",
        "1-d",
    ],
)
def test_bad_input_messages(make, kwargs, err, pattern):
    q, k, v = make()
    with pytest.raises(err, match=pattern):
        scaled_dot_product_attention(q, k, v, **kwargs)


def test_bad_mixed_dtypes_and_mask_helpers():
    q, k, v = _qkv()
    with pytest.raises(TypeError, match="share one dtype"):
        scaled_dot_product_attention(q, k.double(), v)
    with pytest.raises(ValueError, match="positive lengths"):
        causal_mask(0)
    with pytest.raises(ValueError, match="window"):
        sliding_window_mask(3, window=0)
    with pytest.raises(ValueError, match="either lengths"):
        padding_mask(torch.tensor([1]), tokens=torch.zeros(1, 2))
    with pytest.raises(ValueError, match="pad_id"):
        padding_mask(tokens=torch.zeros(1, 2))
    with pytest.raises(ValueError, match="integer"):
        padding_mask(torch.tensor([1.5]))
    with pytest.raises(ValueError, match="max_len=2"):
        padding_mask(torch.tensor([3]), max_len=2)


def test_additive_bad_input_messages():
    gen = torch.Generator().manual_seed(0)
    w_q, w_k, vec, _ = additive_params(4, 3, 5, gen)
    query, keys, values = torch.zeros(2, 1, 4).double(), torch.zeros(2, 6, 3).double(), torch.zeros(2, 6, 2).double()
    with pytest.raises(ValueError, match="projection widths"):
        additive_attention(query, keys, values, w_k, w_q, vec)
    with pytest.raises(ValueError, match="same length S"):
        additive_attention(query, keys, values[:, :5], w_q, w_k, vec)
    with pytest.raises(ValueError, match="batch dims differ"):
        additive_attention(query[:1], keys, values, w_q, w_k, vec)
    with pytest.raises(TypeError, match="floating-point"):
        additive_attention(query.long(), keys, values, w_q, w_k, vec)
    with pytest.raises(ValueError, match="empty sequence"):
        additive_attention(query[:, :0], keys, values, w_q, w_k, vec)
    with pytest.raises(TypeError, match="boolean"):
        additive_attention(query, keys, values, w_q, w_k, vec, torch.ones(2, 1, 6))


def test_backends_table_is_public():
    assert {"math", "sdpa"} <= set(AF.BACKENDS)
