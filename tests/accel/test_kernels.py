"""attnlab.accel.kernels: the native matrix-vector product against F.linear, its fallbacks and its build."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from attnlab import accel
from attnlab.accel import kernels

HAVE_CC = (os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")) is not None
needs_kernel = pytest.mark.skipif(
    not HAVE_CC or os.environ.get("ATTNLAB_NATIVE") == "0",
    reason="no C compiler here (or ATTNLAB_NATIVE=0): the kernel is not built",
)


@needs_kernel
def test_the_kernel_builds_where_there_is_a_compiler():
    assert kernels.available(), kernels.status()
    assert kernels.status().startswith("loaded ")


@needs_kernel
@pytest.mark.parametrize("n", [1, 3, 16, 17, 385])
@pytest.mark.parametrize("out", [1, 3, 4, 5, 77])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_gemv_equals_torch_linear(n, out, bias, threads):
    gen = torch.Generator().manual_seed(n * 100 + out)
    w = torch.randn(out, n, generator=gen)
    b = torch.randn(out, generator=gen) if bias else None
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for shape in ((n,), (1, n), (1, 1, n)):
            x = torch.randn(shape, generator=gen)
            with torch.no_grad():
                y = kernels.gemv(x, w, b)
            assert y is not None and y.shape == shape[:-1] + (out,)
            torch.testing.assert_close(y, F.linear(x, w, b), atol=1e-5, rtol=1e-5)
        strided = torch.randn(1, 2 * n, generator=gen)[:, ::2]  # one row, not contiguous: copied first
        with torch.no_grad():
            torch.testing.assert_close(kernels.gemv(strided, w, b), F.linear(strided, w, b), atol=1e-5, rtol=1e-5)
    finally:
        torch.set_num_threads(before)


def test_linear_refuses_mismatched_shapes_rather_than_reading_past_the_weight():
    with torch.inference_mode():
        with pytest.raises(RuntimeError, match="cannot be multiplied"):  # F.linear's message
            accel.linear(torch.randn(1, 10), torch.randn(12, 5))
        with pytest.raises(RuntimeError):
            accel.linear(torch.randn(1, 10), torch.randn(12, 10), torch.randn(7))  # bias of the wrong size


def test_gemv_declines_what_it_cannot_compute():
    w, b = torch.randn(8, 16), torch.randn(8)
    with torch.no_grad():
        assert kernels.gemv(torch.randn(2, 16), w, b) is None  # two rows
        assert kernels.gemv(torch.randn(1, 16).double(), w.double()) is None  # fp64
        assert kernels.gemv(torch.randn(1, 8), w.t()) is None  # a transposed (non-contiguous) weight
        assert kernels.gemv(torch.randn(1, 16), w, torch.randn(7)) is None  # bias of the wrong size
        assert kernels.gemv(torch.randn(1, 0), torch.randn(8, 0)) is None  # nothing to multiply
    wg = w.clone().requires_grad_()
    assert kernels.gemv(torch.randn(1, 16), wg) is None  # autograd wanted: F.linear's job
    assert kernels.gemv(torch.randn(1, 16), w, b.clone().requires_grad_()) is None  # ... for the bias too


@needs_kernel
@pytest.mark.parametrize("threads", [1, 2])
def test_linear_sends_one_row_or_a_few_to_the_kernel_and_more_rows_elsewhere(monkeypatch, threads):
    calls = []
    real = kernels.matvec
    monkeypatch.setattr(kernels, "matvec", lambda *a: calls.append(tuple(a[0].shape)) or real(*a))
    layer = torch.nn.Linear(32, 24)
    few = accel.KERNEL_MAX_ROWS if threads > 1 else accel.KERNEL_MAX_ROWS_ONE_THREAD
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            for shape in ((1, 1, 32), (few, 32), (2, few // 2, 32), (few + 1, 32), (40, 32)):
                x = torch.randn(shape)
                torch.testing.assert_close(
                    accel.linear(x, layer.weight, layer.bias),
                    F.linear(x, layer.weight, layer.bias),
                    atol=1e-5,
                    rtol=1e-5,
                )
        assert calls == [(1, 1, 32), (few, 32), (2, few // 2, 32)]
        accel.linear(torch.randn(1, 32), layer.weight, layer.bias).sum().backward()  # with autograd: F.linear
    finally:
        torch.set_num_threads(before)
    assert len(calls) == 3 and layer.weight.grad is not None


@needs_kernel
@pytest.mark.parametrize("n, out", [(3, 5), (40, 77), (256, 300)])
@pytest.mark.parametrize("rows", [2, 4, 7])
@pytest.mark.parametrize("threads", [1, 2])
def test_matvec_of_a_few_rows_is_each_row_alone(n, out, rows, threads):
    gen = torch.Generator().manual_seed(n * rows + out)
    w, b = torch.randn(out, n, generator=gen), torch.randn(out, generator=gen)
    x = torch.randn(rows, 1, n, generator=gen)  # the hypotheses of a beam, one decoding step
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            together = kernels.matvec(x, w, b)
            alone = torch.cat([kernels.matvec(x[i], w, b) for i in range(rows)]).view(rows, 1, out)
            strided = kernels.matvec(x.transpose(0, 1), w, None)  # (1, rows, n) seen through a transpose
    finally:
        torch.set_num_threads(before)
    assert together.shape == (rows, 1, out)
    assert torch.equal(together, alone)  # one weight pass for all rows, each row's additions unchanged
    torch.testing.assert_close(together, F.linear(x, w, b), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(strided, F.linear(x.transpose(0, 1), w), atol=1e-5, rtol=1e-5)


def _probe(env: dict) -> list[str]:
    code = (
        "import torch; from attnlab.accel import kernels, linear; import torch.nn.functional as F\n"
        "w, b, x = torch.randn(6, 10), torch.randn(6), torch.randn(1, 10)\n"
        "with torch.no_grad(): y = linear(x, w, b); g = kernels.gemv(x, w, b)\n"
        "print(kernels.status()); print(g is None); print(bool(torch.allclose(y, F.linear(x, w, b), atol=1e-5)))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True, timeout=300, check=True
    )
    return run.stdout.strip().splitlines()


def test_disabled_or_unbuildable_kernels_fall_back_to_torch(tmp_path):
    status, none, same = _probe({"ATTNLAB_NATIVE": "0", "ATTNLAB_CACHE": str(tmp_path)})
    assert status == "disabled by ATTNLAB_NATIVE=0" and none == "True" and same == "True"
    status, none, same = _probe({"CC": "false", "ATTNLAB_NATIVE": "1", "ATTNLAB_CACHE": str(tmp_path)})
    assert status.startswith("unavailable: false failed") and none == "True" and same == "True"
    assert not list(tmp_path.rglob("*.so"))  # nothing half-built left behind


@needs_kernel
def test_the_build_is_cached_per_machine(tmp_path):
    env = {"ATTNLAB_NATIVE": "1", "ATTNLAB_CACHE": str(tmp_path)}
    status, none, same = _probe(env)
    built = list(tmp_path.rglob("libattnlab_kernels.so"))
    assert status.startswith(f"loaded {built[0]} (") and none == "False" and same == "True" and len(built) == 1
    stamp = built[0].stat().st_mtime_ns
    assert _probe(env)[0] == status and built[0].stat().st_mtime_ns == stamp  # loaded, not rebuilt
    assert not list(tmp_path.rglob("*.partial"))


@needs_kernel
@pytest.mark.parametrize("n, out", [(3, 5), (40, 77), (256, 300)])
@pytest.mark.parametrize("rows", [1, 2, 5, 6, 13])
@pytest.mark.parametrize("threads", [1, 2])
def test_packed_product_equals_torch_and_each_row_alone(n, out, rows, threads):
    # The product inside the decoder and encoder kernels, with its weight packed into panels of 16
    # outputs (out = 5, 77, 300: panels that end past the last output). The panels at every row
    # count here (from some rows on the kernels take the BLAS: tests/accel/test_native_paths.py).
    gen = torch.Generator().manual_seed(n * rows + out)
    w, b = torch.randn(out, n, generator=gen), torch.randn(out, generator=gen)
    x = torch.randn(rows, n, generator=gen)
    packed = kernels.pack(w, "avx2" if "avx2" in kernels.isas() else "generic")
    assert packed.data.numel() == -(-out // kernels.PANEL) * kernels.PANEL * n and packed.weights == "f32"
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with kernels.using_blas(False):
            together = kernels.packed_linear(x, packed, b)
            alone = torch.cat([kernels.packed_linear(x[i : i + 1].contiguous(), packed, b) for i in range(rows)])
            no_bias = kernels.packed_linear(x, packed)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(together, alone)  # a row's additions do not depend on its neighbours
    torch.testing.assert_close(together, F.linear(x, w, b), atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(no_bias, F.linear(x, w), atol=1e-4, rtol=1e-5)
    # bf16 weights stay bf16 in the panels (half the bytes) and are widened exactly: the product of
    # the same numbers in fp32 (tests/accel/test_native_paths.py: every instruction set, and the BF16 dot
    # product's pairs)
    w16 = w.to(torch.bfloat16)
    packed16 = kernels.pack(w16, "generic")
    assert packed16.data.dtype == torch.int16 and packed16.data.numel() == packed.data.numel()
    torch.testing.assert_close(
        kernels.packed_linear(x, packed16, b, "generic"), F.linear(x, w16.float(), b), atol=1e-4, rtol=1e-5
    )


@needs_kernel
@pytest.mark.parametrize("V, k", [(1, 1), (7, 3), (70, 1), (6000, 4), (6001, 64)])
def test_top_k_log_softmax_equals_torch(V, k):
    gen = torch.Generator().manual_seed(V + k)
    logits = torch.randn(9, V, generator=gen) * 4
    logits[0, :] = 0.0  # all tied: the smallest ids first
    logits[1, V // 2] = 1e4  # one token takes all the probability
    logits[2, : V // 2] = float("-inf")  # tokens that cannot come
    val, idx = kernels.top_k_log_softmax(logits, k)
    ref = torch.log_softmax(logits, dim=-1)
    ref_val, _ = ref.topk(k, dim=-1)
    torch.testing.assert_close(val, ref_val, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ref.gather(1, idx), ref_val, atol=1e-5, rtol=1e-5)  # ids of those values
    assert idx[0].tolist() == list(range(k))
    assert idx[1, 0] == V // 2 and val[1, 0] == 0.0
    # declines what it cannot take
    assert kernels.top_k_log_softmax(logits.double(), k) is None
    assert kernels.top_k_log_softmax(torch.cat([logits, logits], 1)[:, ::2], k) is None  # strided
    assert kernels.top_k_log_softmax(logits, V + 1) is None


@needs_kernel
@pytest.mark.parametrize("n, k, K", [(3, 1, 4), (3, 4, 4), (5, 3, 3), (2, 1, 1), (4, 2, 2)])
@pytest.mark.parametrize("threads", [1, 2])
def test_beam_step_equals_the_pytorch_reference(n, k, K, threads):
    # attnlab.decode.beam_advance is beam_search's step in PyTorch; the kernel does it in one call.
    from attnlab.decode import beam_advance

    gen = torch.Generator().manual_seed(n * 100 + k * 10 + K)
    V, t, max_len, eos, pad = 50, 3, 20, 2, 0
    logits = torch.randn(n * k, V, generator=gen) * 3
    logits[::3, eos] += 5.0  # some hypotheses end here
    scores = -torch.rand(n, k, generator=gen) * 10
    ended = torch.full((n * k,), max_len, dtype=torch.long)
    ended[1::4] = 1  # finished before: their score is frozen, extended by padding
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = kernels.beam_step(logits, scores, ended, t, max_len, eos, pad, K)
    finally:
        torch.set_num_threads(before)
    want = beam_advance(logits, scores, ended, t, max_len, eos, pad, K)
    torch.testing.assert_close(got[0], want[0], atol=1e-5, rtol=1e-5)  # scores (n, K)
    # Rows extended, tokens, when each ended; not for the -inf offers that fill the beam of a sentence
    # with fewer live ones (which of those ties comes first is the sort's choice; they never win).
    live = want[0].isfinite().view(-1)
    assert live.any()
    for g, w in zip(got[1:], want[1:]):
        assert g[live].tolist() == w[live].tolist()
    assert ((got[3] == t) == ((got[2] == eos) & (ended[got[1]] == max_len))).all()
    assert kernels.beam_step(logits, scores.double(), ended, t, max_len, eos, pad, K) is None
    assert kernels.beam_step(logits, scores, ended, t, max_len, eos, pad, V + 1) is None


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("filled", [0, 1, 7, 16])
@pytest.mark.parametrize("threads", [1, 2])
def test_gather_filled_equals_index_select_on_the_filled_positions(dtype, filled, threads):
    # Beam search's reorder of a cache: the rows of index (repeated, dropped, moved), the first
    # `filled` positions of each head copied; the later ones are not read and not asked for.
    gen = torch.Generator().manual_seed(filled)
    x = torch.randn(6, 3, 16, 5, generator=gen).to(dtype)  # (B, H, capacity, Dh)
    index = torch.tensor([4, 4, 0, 5, 1])
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = kernels.gather_filled(x, index, filled)
        via_accel = accel.reorder_rows(x, index, filled)
    finally:
        torch.set_num_threads(before)
    want = x.index_select(0, index)
    assert got.shape == want.shape and got.dtype == dtype
    assert torch.equal(got[:, :, :filled], want[:, :, :filled])
    assert torch.equal(via_accel[:, :, :filled], want[:, :, :filled])
    assert kernels.gather_filled(x.transpose(1, 2), index, filled) is None  # not contiguous: the caller's index_select
    with accel.disabled():
        assert kernels.gather_filled(x, index, filled) is None
        assert torch.equal(accel.reorder_rows(x, index, filled), want)  # the reference, whole


@needs_kernel
def test_loading_the_kernels_finds_and_checks_the_blas_without_moving_the_seed():
    # At load the kernels look up PyTorch's BLAS and check one product of each routine against
    # torch's (on numbers of their own generator: a user's seeded sequence must not depend on
    # whether the kernels were loaded in between).
    code = (
        "import torch\n"
        "torch.manual_seed(0); a = torch.randn(4)\n"
        "torch.manual_seed(0)\n"
        "from attnlab.accel import kernels\n"
        "kernels.available(); b = torch.randn(4)\n"
        "print(kernels.status()); print(bool(torch.equal(a, b))); print(kernels.blas())\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    status, same, blas = run.stdout.strip().splitlines()[-3:]
    assert same == "True"
    if torch.backends.mkl.is_available():
        assert "BLAS: sgemm_" in status and blas == "True"
    else:
        assert "no BLAS" in status and blas == "False"
