"""attnlab.accel.kernels: the native products and search kernels against PyTorch, their fallbacks and their build."""

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


def _probe(env: dict) -> list[str]:
    code = (
        "import torch; from attnlab.accel import kernels, reorder_rows\n"
        "x, index = torch.randn(3, 2, 8, 4), torch.tensor([2, 0, 0])  # (B, H, capacity, Dh), a beam's reorder\n"
        "with torch.no_grad(): y = reorder_rows(x, index, 5); g = kernels.gather_filled(x, index, 5)\n"
        "print(kernels.status()); print(g is None)\n"
        "print(bool(torch.equal(y[:, :, :5], x.index_select(0, index)[:, :, :5])))"
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
