"""attnlab's native kernels, compiled on first use with the machine's C compiler.

The kernels of decoding one token at a time, in fp32: :func:`gemv`, the matrix–vector product that
dominates it (each weight matrix times a single row), and :func:`matvec`, the same for a few rows
(one per hypothesis of a beam); :func:`matvec_many`, the same product for
several matrices at once (a layer's query, key and value projections); and :func:`attend_one`,
attention of a single query over the cached keys and values; and :class:`DecoderLayer`, a whole
Transformer decoder layer for one decoding step in one call (at a few rows a step is mostly the
fixed cost of each tensor operation, which one call avoids). PyTorch's CPU path for that product
(MKL) runs on one thread; oneDNN's splits it but stops well short of the memory bandwidth; the
plain loop in ``gemv.c`` streams the weights on all of torch's threads.

The source is compiled once per machine (``cc -O3 -march=native -fopenmp``) into
``$ATTNLAB_CACHE`` (default ``~/.cache/attnlab``), under a name that hashes the source, the
flags, the compiler and the CPU's feature flags, and loaded with :mod:`ctypes`; no Python headers
or build step are involved. Without a C compiler with OpenMP (or with ``ATTNLAB_NATIVE=0``)
nothing is compiled: :func:`gemv` returns ``None`` and callers use PyTorch
(:func:`attnlab.accel.linear` falls back to oneDNN, then ``F.linear``). :func:`status` says which.

It runs on ``torch.get_num_threads()`` threads. With PyTorch's Linux wheels its OpenMP runtime is
the one PyTorch already loaded (both ask for ``libgomp.so.1``), so no second thread pool appears.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import threading
from pathlib import Path

import torch

from .. import machine

Tensor = torch.Tensor

__all__ = ["gemv", "matvec", "matvec_many", "attend_one", "DecoderLayer", "available", "status"]

_SOURCE = Path(__file__).with_name("gemv.c")
_FLAGS = ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC"]
_LIBS = ["-lm"]  # after the source: a linker with --as-needed drops a library named before its users
_lock = threading.Lock()
_gemv_f32 = None  # the loaded C functions, once built
_gemv_many_f32 = None
_attend_one_f32 = None
_decoder_layer_f32 = None
_tried = False  # whether loading was attempted (then _gemv_f32 and _status are final)
_status = "not loaded yet"


def _build() -> Path:
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise OSError("no C compiler (cc/gcc) on PATH")
    source = _SOURCE.read_bytes()
    key = hashlib.sha256(
        b"\0".join([source, " ".join(_FLAGS + _LIBS).encode(), compiler.encode(), machine.cpu_flags().encode()])
    )
    target = machine.cache_root() / "kernels" / key.hexdigest()[:16] / "libattnlab_kernels.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Compile next to the target and rename: another process may be building the same file.
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    try:
        subprocess.run(
            [compiler, *_FLAGS, str(_SOURCE), "-o", str(partial), *_LIBS],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
        os.replace(partial, target)
    except subprocess.CalledProcessError as err:
        raise OSError(f"{compiler} failed: {err.stderr.strip()[:500]}") from None
    finally:
        partial.unlink(missing_ok=True)
    return target


def _load():
    """The one-matrix C function (the others load with it), building and loading them on the first
    call; ``None`` if unavailable."""
    global _gemv_f32, _gemv_many_f32, _attend_one_f32, _decoder_layer_f32, _tried, _status
    if _tried:
        return _gemv_f32
    with _lock:
        if not _tried:
            if os.environ.get("ATTNLAB_NATIVE", "1") == "0":
                _status = "disabled by ATTNLAB_NATIVE=0"
            else:
                try:
                    path = _build()
                    lib = ctypes.CDLL(str(path))
                    p, long = ctypes.c_void_p, ctypes.c_long
                    fn, many, attend = (
                        lib.attnlab_linear_rows_f32,
                        lib.attnlab_gemv_many_f32,
                        lib.attnlab_attend_one_f32,
                    )
                    fn.argtypes = [p, p, p, p, long, long, long, ctypes.c_int]
                    many.argtypes = [p, p, p, p, long, long, long, long, ctypes.c_int]
                    attend.argtypes = [p] * 4 + [long] * 9 + [p, ctypes.c_float, ctypes.c_int]
                    layer = lib.attnlab_decoder_layer_f32
                    layer.argtypes = [p] * 8 + [long] * 8 + [ctypes.c_int] * 2 + [ctypes.c_float, ctypes.c_int]
                    fn.restype = many.restype = attend.restype = layer.restype = None
                    _gemv_f32, _gemv_many_f32, _attend_one_f32 = fn, many, attend
                    _decoder_layer_f32 = layer
                    _status = f"loaded {path}"
                except (OSError, AttributeError, subprocess.SubprocessError) as err:
                    _status = f"unavailable: {err}"
            _tried = True  # last: a thread that sees it also sees the outcome
    return _gemv_f32


def available() -> bool:
    """Whether the native kernels are compiled and loaded (compiling them on the first call)."""
    return _load() is not None


def status() -> str:
    """Why the kernels are or are not in use (after the first use or :func:`available`)."""
    return _status


def gemv(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor | None:
    """``x Wᵀ + b`` for a single fp32 row on a CPU, or ``None`` if the kernel cannot take it
    (not built here; another dtype or device; non-contiguous tensors; autograd wanted), in which
    case the caller computes it another way. Same numbers as ``F.linear`` up to the order of the
    additions (tested to 1e-5).

    Shape:
        x ``(..., n)`` with one row in all (e.g. ``(1, 1, n)``), weight ``(out, n)``, bias ``(out,)``
        → ``(..., out)``
    """
    n = x.shape[-1]
    if (
        x.numel() != n
        or n == 0
        or weight.dim() != 2
        or weight.shape[1] != n
        or x.dtype != torch.float32
        or weight.dtype != torch.float32
        or x.device.type != "cpu"
        or weight.device.type != "cpu"
        or not weight.is_contiguous()
        or (
            bias is not None
            and (
                bias.shape != weight.shape[:1]
                or bias.dtype != torch.float32
                or not bias.is_contiguous()
                or bias.device.type != "cpu"
            )
        )
        or (torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, weight, bias)))
    ):
        return None
    return matvec(x, weight, bias)


def matvec(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor | None:
    """``x Wᵀ + b`` for one row or a few, or ``None`` if the kernel is not built here: :func:`gemv`
    without its checks, for a caller that has made them (fp32 CPU rows, a contiguous 2-D fp32
    weight and bias, no autograd): decoding calls it ~40 times per token, so a dozen attribute
    checks per call would cost more than the product of a small layer.

    Each weight row is read from memory once for all the rows of ``x``, so a few rows (the
    hypotheses of a beam) cost little more than one; each output number is computed as for a
    single row, so a row gives the same bits alone or beside others.

    Shape:
        x ``(..., n)``, weight ``(out, n)``, bias ``(out,)`` → ``(..., out)``
    """
    fn = _gemv_f32 if _tried else _load()
    if fn is None:
        return None
    out, n = weight.shape
    y = x.new_empty(x.shape[:-1] + (out,))
    x = x.contiguous()  # held in a name: a temporary copy would be freed before the C call reads it
    fn(
        weight.data_ptr(),
        x.data_ptr(),
        None if bias is None else bias.data_ptr(),
        y.data_ptr(),
        x.numel() // n,
        out,
        n,
        torch.get_num_threads(),
    )
    return y


def matvec_many(x: Tensor, weights: tuple[Tensor, ...], biases: tuple[Tensor, ...] | None = None) -> Tensor | None:
    """``torch.cat([x W_mᵀ + b_m for each m], -1)`` in one call of the kernel, or ``None`` if it
    is not built here; same numbers as :func:`matvec` of each matrix. Decoding projects its rows
    (one per sequence or hypothesis) to their queries, keys and values this way: one parallel
    region over the three matrices instead of three. No checks, as :func:`matvec`: the caller
    guarantees fp32 CPU rows, contiguous 2-D fp32 weights of one shape, biases all given
    (contiguous, fp32) or ``None``, and no autograd.

    Shape:
        x ``(..., n)``, weights ``count × (out, n)``, biases ``count × (out,)`` → ``(..., count·out)``
    """
    if not _tried:
        _load()
    fn = _gemv_many_f32
    if fn is None:
        return None
    count, (out, n) = len(weights), weights[0].shape
    y = x.new_empty(x.shape[:-1] + (count * out,))
    x = x.contiguous()  # held in a name: a temporary copy would be freed before the C call reads it
    pointers = ctypes.c_void_p * count
    fn(
        pointers(*[w.data_ptr() for w in weights]),
        x.data_ptr(),
        None if biases is None else pointers(*[b.data_ptr() for b in biases]),
        y.data_ptr(),
        x.numel() // n,
        count,
        out,
        n,
        torch.get_num_threads(),
    )
    return y


def attend_one(
    q: Tensor, k: Tensor, v: Tensor, scale: float, groups: int = 1, lengths: Tensor | None = None
) -> Tensor | None:
    """``softmax(q kᵀ · scale) v`` for a single query per (batch, head), or ``None`` if the kernel
    is not built here: the attention of one decoding step over the cached keys and values, the
    numbers of ``F.scaled_dot_product_attention(q, k, v, scale=scale)`` up to rounding (the
    order of the additions and the exponential differ). No checks, as :func:`matvec`: the caller
    guarantees fp32 CPU tensors without autograd, ``q`` with one row and its last dimension
    contiguous, ``k`` and ``v`` of one shape and the same strides, each of their rows contiguous,
    ``q``'s batch ``groups`` times ``k``'s, and ``lengths`` (if given) a contiguous int64 tensor
    of values in ``0 … S``.

    Query row ``b`` attends to the keys and values of row ``b // groups`` (the hypotheses of one
    sentence share its source), and with ``lengths`` to their first ``lengths[b // groups]``
    positions only (the real tokens of a right-padded source; a row with none gets zeros).

    The output is laid out as ``(B, 1, H, Dh)`` (returned as its ``(B, H, 1, Dh)`` view), so
    merging the heads for the output projection, ``out.transpose(1, 2).reshape(B, 1, H·Dh)``,
    is a view, not a copy.

    Shape:
        q ``(B, H, 1, Dh)``, k and v ``(B / groups, H, S, Dh)``, lengths ``(B / groups,)`` →
        ``(B, H, 1, Dh)``
    """
    if not _tried:
        _load()
    fn = _attend_one_f32
    if fn is None:
        return None
    B, H, _, Dh = q.shape
    S = k.shape[2]
    q_sb, q_sh, _, _ = q.stride()
    kv_sb, kv_sh, _, _ = k.stride()
    out = q.new_empty((B, 1, H, Dh))  # (B, 1, H, Dh): heads already side by side
    fn(
        q.data_ptr(),
        k.data_ptr(),
        v.data_ptr(),
        out.data_ptr(),
        B,
        H,
        S,
        Dh,
        q_sb,
        q_sh,
        kv_sb,
        kv_sh,
        groups,
        None if lengths is None else lengths.data_ptr(),
        scale,
        torch.get_num_threads(),
    )
    return out.transpose(1, 2)  # (B, H, 1, Dh)


class DecoderLayer:
    """One decoding step of a Transformer decoder layer in one call of attnlab's kernel
    (``attnlab_decoder_layer_f32`` in ``gemv.c``): self-attention over a :class:`KVCache`-style
    buffer, source–target attention over the projected source, feed-forward, with the residuals
    and LayerNorms of a pre- or post-norm block. The numbers of the block's modules up to
    rounding (tested against :class:`attnlab.layers.DecoderBlock`).

    Built once per decoding run from the block's fp32 CPU parameters (their addresses are kept, so
    the parameters must not be replaced while it is in use); :meth:`build` returns ``None`` when
    the kernel is not built here. No checks per call, as :func:`matvec`.

    Shape:
        x ``(B, 1, D)``; cache buffers ``(B, H, cap, Dh)``; source keys/values
        ``(B / G, H, S, Dh)``, contiguous; lengths ``(B / G,)`` int64
    """

    def __init__(
        self, params: list[Tensor | None], d_model: int, n_heads: int, d_ff: int, pre: bool, act: int, eps: float
    ):
        self._keep = params  # the tensors whose addresses the kernel reads
        pointers = ctypes.c_void_p * len(params)
        self._params = pointers(*[None if t is None else t.data_ptr() for t in params])
        self.d_model, self.n_heads, self.d_ff, self.pre, self.act, self.eps = d_model, n_heads, d_ff, pre, act, eps
        self._scratch: Tensor | None = None  # working memory, kept between calls (grown when rows grow)

    @classmethod
    def build(cls, *args, **kwargs) -> DecoderLayer | None:
        if not _tried:
            _load()
        return None if _decoder_layer_f32 is None else cls(*args, **kwargs)

    def __call__(
        self, x: Tensor, k_cache: Tensor, v_cache: Tensor, filled: int, k_src: Tensor, v_src: Tensor, lengths: Tensor
    ) -> Tensor:
        """Run the step in place on ``x`` (contiguous); write the new position's keys and values at
        position ``filled`` of the cache buffers; return ``x``."""
        rows, D = x.shape[0], self.d_model
        need = rows * (4 * D + self.d_ff)
        if self._scratch is None or self._scratch.numel() < need:
            self._scratch = x.new_empty(need)
        scratch = self._scratch
        _decoder_layer_f32(
            self._params,
            x.data_ptr(),
            k_cache.data_ptr(),
            v_cache.data_ptr(),
            k_src.data_ptr(),
            v_src.data_ptr(),
            lengths.data_ptr(),
            scratch.data_ptr(),
            rows,
            D,
            self.n_heads,
            self.d_ff,
            k_cache.shape[2],
            filled,
            k_src.shape[2],
            rows // k_src.shape[0],
            int(self.pre),
            self.act,
            self.eps,
            torch.get_num_threads(),
        )
        return x
