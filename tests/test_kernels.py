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
def test_linear_sends_one_row_to_the_kernel_and_more_rows_elsewhere(monkeypatch):
    calls = []
    real = kernels.matvec
    monkeypatch.setattr(kernels, "matvec", lambda *a: calls.append(a[0].shape) or real(*a))
    layer = accel.Linear(32, 24)
    with torch.inference_mode():
        for shape in ((1, 1, 32), (3, 32), (40, 32)):
            x = torch.randn(shape)
            torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias), atol=1e-5, rtol=1e-5)
    assert calls == [(1, 1, 32)]
    layer(torch.randn(1, 32)).sum().backward()  # with autograd: F.linear
    assert calls == [(1, 1, 32)] and layer.weight.grad is not None


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
    assert status == f"loaded {built[0]}" and none == "False" and same == "True" and len(built) == 1
    stamp = built[0].stat().st_mtime_ns
    assert _probe(env)[0] == status and built[0].stat().st_mtime_ns == stamp  # loaded, not rebuilt
    assert not list(tmp_path.rglob("*.partial"))
