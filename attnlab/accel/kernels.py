"""attnlab's native kernels, compiled on first use with the machine's C compiler.

The kernels of decoding one token at a time: :func:`gemv`, the matrix–vector product that
dominates it (each weight matrix times a single row), and :func:`matvec`, the same for a few rows
(one per hypothesis of a beam); :func:`matvec_many`, the same product for several matrices at
once (a layer's query, key and value projections); :func:`attend_one`, attention of a single
query over the cached keys and values. PyTorch's CPU path for that product (MKL) runs on one
thread; oneDNN's splits it but stops well short of the memory bandwidth; the loop in ``gemv.c``
streams the weights on all of torch's threads.

And the native path of the translators and GPT, where a step of a few rows is mostly the fixed
cost of each tensor operation, which one call avoids: :class:`DecoderStep`, a whole decoding step
(embeddings, every layer, the vocabulary projection); :class:`EncoderStack`, the encoder and the
decoder's source keys/values; :func:`beam_step` and :func:`top_k_log_softmax`, the choice of the
next tokens. They take weights packed once (:func:`pack`; fp32, or bf16 widened exactly as they
are read) into panels whose register tiles feed several multiply-adds per load, faster than MKL
from 1 to 128 rows on the development machine (docs/export.md), and they are built once per set
of parameters (:func:`build_once`).

The source is compiled once per machine (``cc -O3 -march=native -ffp-contract=off -fopenmp``) into
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
import weakref
from pathlib import Path

import torch

from .. import machine

Tensor = torch.Tensor

__all__ = [
    "gemv",
    "matvec",
    "matvec_many",
    "attend_one",
    "DecoderStep",
    "EncoderStack",
    "pack",
    "packed_linear",
    "build_once",
    "structure_version",
    "top_k_log_softmax",
    "beam_step",
    "available",
    "status",
]

_SOURCE = Path(__file__).with_name("gemv.c")
_FLAGS = ["-O3", "-march=native", "-ffp-contract=off", "-fopenmp", "-shared", "-fPIC"]
_LIBS = ["-lm"]  # after the source: a linker with --as-needed drops a library named before its users
_lock = threading.Lock()
_gemv_f32 = None  # the loaded C functions, once built
_gemv_many_f32 = None
_attend_one_f32 = None
_decoder_step_f32 = None
_encoder_f32 = None
_top_k_f32 = None
_beam_step_f32 = None
_pack = None
_packed_rows_f32 = None
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
    global _gemv_f32, _gemv_many_f32, _attend_one_f32, _tried, _status
    global _decoder_step_f32, _encoder_f32, _top_k_f32, _beam_step_f32, _pack, _packed_rows_f32
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
                    step, encoder = lib.attnlab_decoder_step_f32, lib.attnlab_encoder_f32
                    step.argtypes = [p, long, p, p, p, ctypes.c_float] + [p] * 9 + [long, p] + [p] * 2 + [long] * 8
                    step.argtypes += [ctypes.c_int] * 2 + [ctypes.c_float] + [ctypes.c_int] * 2
                    encoder.argtypes = [p, long, p, p, p, ctypes.c_float, p, p, p, p, long, p, p, p, p]
                    encoder.argtypes += [long] * 5 + [ctypes.c_int] * 2 + [ctypes.c_float] + [ctypes.c_int] * 2
                    top_k, beam = lib.attnlab_top_k_log_softmax_f32, lib.attnlab_beam_step_f32
                    top_k.argtypes = [p, long, long, long, p, p, ctypes.c_int]
                    beam.argtypes = [p] + [long] * 4 + [p, p] + [long] * 4 + [p] * 6 + [ctypes.c_int]
                    pack, packed = lib.attnlab_pack, lib.attnlab_packed_rows_f32
                    pack.argtypes = [p, p, long, long, long]
                    packed.argtypes = [p, p, p, p, long, long, long, ctypes.c_int, ctypes.c_int]
                    for f in (fn, many, attend, step, encoder, top_k, beam, pack, packed):
                        f.restype = None
                    _gemv_f32, _gemv_many_f32, _attend_one_f32 = fn, many, attend
                    _decoder_step_f32, _encoder_f32, _top_k_f32, _beam_step_f32 = step, encoder, top_k, beam
                    _pack, _packed_rows_f32 = pack, packed
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


def _pointers(tensors: list[Tensor | None]) -> ctypes.Array:
    return (ctypes.c_void_p * len(tensors))(*[None if t is None else t.data_ptr() for t in tensors])


#: The parameters of one layer as the C functions list them (gemv.c, DECODER_PARAMS and
#: ENCODER_PARAMS): the LayerNorms' weights and biases, then the projections' weights and biases
#: (the positions of the weight matrices, which the kernels take packed, in the second tuple).
DECODER_PARAMS, DECODER_MATRICES = 22, (6, 8, 10, 12, 14, 16, 18, 20)
ENCODER_PARAMS, ENCODER_MATRICES = 16, (4, 6, 8, 10, 12, 14)

#: Outputs per panel of a packed weight (gemv.c, PANEL).
PANEL = 16


def pack(weight: Tensor) -> Tensor:
    """``weight`` (fp32 or bf16, on the CPU) in the packed layout of attnlab's decoder and encoder
    kernels: panels of :data:`PANEL` outputs, each holding its outputs' weights input by input
    (``attnlab_pack`` in ``gemv.c``), in the weight's own precision: bf16 weights stay bf16
    (returned as an int16 tensor of their bits), half the bytes for a step to read, widened to
    fp32 exactly as they are used. Requires the kernels (:func:`available`).

    Shape:
        weight ``(out, n)`` → ``(ceil(out / PANEL) · PANEL · n,)``
    """
    if not _tried:
        _load()
    out, n = weight.shape
    weight = weight.detach().contiguous()
    size = -(-out // PANEL) * PANEL * n
    packed = torch.empty(size, dtype=torch.int16) if weight.dtype == torch.bfloat16 else weight.new_empty(size)
    _pack(weight.data_ptr(), packed.data_ptr(), out, n, weight.element_size())
    return packed


def packed_linear(x: Tensor, packed: Tensor, out: int, bias: Tensor | None = None) -> Tensor:
    """``x Wᵀ + b`` for a weight packed by :func:`pack` (fp32 or bf16 numbers, fp32 arithmetic):
    the product of the decoder and encoder kernels on its own (for tests and benchmarks). Each
    number is the same alone or beside other rows. No checks, as :func:`matvec`.

    Shape:
        x ``(rows, n)`` contiguous fp32, packed from ``(out, n)``, bias ``(out,)`` fp32 → ``(rows, out)``
    """
    rows, n = x.shape
    y = x.new_empty((rows, out))
    _packed_rows_f32(
        packed.data_ptr(), x.data_ptr(), None if bias is None else bias.data_ptr(), y.data_ptr(), rows, out, n,
        int(packed.dtype == torch.int16), torch.get_num_threads(),
    )  # fmt: skip
    return y


def _vector(t: Tensor | None) -> Tensor | None:
    """A LayerNorm's or a bias's numbers as the kernels read them: fp32, contiguous."""
    return None if t is None else t.detach().float().contiguous()


def _packed_layers(layers: list[list[Tensor | None]], matrices: tuple[int, ...]) -> list[Tensor | None]:
    """The layers' parameters in one list, their weight matrices packed."""
    return [pack(t) if i in matrices and t is not None else _vector(t) for layer in layers for i, t in enumerate(layer)]


def _weights_bf16(*groups: tuple[list[list[Tensor | None]], tuple[int, ...]]) -> bool | None:
    """Whether the weight matrices (positions ``matrices`` of each layer, for each ``(layers,
    matrices)`` group) are bf16 (``False``: fp32; ``None``: mixed, which the kernels cannot take)."""
    dtypes = {t.dtype for layers, matrices in groups for layer in layers for i, t in enumerate(layer)
              if i in matrices and t is not None}  # fmt: skip
    return None if len(dtypes) != 1 else dtypes == {torch.bfloat16}


def _inputs(embedding: Tensor, positions: Tensor, final: list | None) -> tuple[Tensor, Tensor, list | None]:
    """The embedding table, the positional table and the final LayerNorm as the kernels read them:
    fp32, contiguous (copies of bf16 ones)."""
    return _vector(embedding), _vector(positions), None if final is None else [_vector(t) for t in final]


#: What build_once built, per owner (held weakly: a model's copies, pickles and deep copies do not
#: carry it, and it goes with the model).
_built: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def build_once(owner: object, name: str, tensors: list[Tensor | None], build, *, also: object = None):
    """``build()`` once for these ``tensors`` (the parameters a kernel reads, which it may pack
    into copies) and ``also`` (any other part of the key), kept for ``owner`` (a model) under
    ``name`` and built again only when one of the tensors is replaced or changed in place (a
    training step, ``load_state_dict``, ``.to()``) or ``also`` changes: a translation of one
    sentence would otherwise cost as much as packing the vocabulary projection's weights."""
    key = (also, tuple((id(t), t.data_ptr(), t._version) for t in tensors if t is not None))
    cache = _built.setdefault(owner, {})
    cached = cache.get(name)
    if cached is not None and cached[0] == key:
        return cached[2]
    built = build()
    cache[name] = (key, tensors, built)  # the tensors held: their ids stay theirs
    return built


def _kernel_dtypes(*values) -> bool:
    """Whether every tensor in ``values`` (nested in lists, tuples and dicts) is fp32 or bf16 on a
    CPU (the kernels' weights; their arithmetic is fp32)."""
    for v in values:
        if isinstance(v, Tensor):
            if v.dtype not in (torch.float32, torch.bfloat16) or not v.is_cpu:
                return False
        elif isinstance(v, (list, tuple)):
            if not _kernel_dtypes(*v):
                return False
        elif isinstance(v, dict) and not _kernel_dtypes(*v.values()):
            return False
    return True


_structure = 0  # registrations seen since structure_version() was first called
_watching = False


def _registered(*args) -> None:
    global _structure
    _structure += 1


def structure_version() -> int:
    """A number that changes whenever a module, parameter or buffer is registered on any module
    (``model.block = …``, ``module.weight = nn.Parameter(…)``), through PyTorch's global
    registration hooks (installed on the first call): a model's structure, read once, stays valid
    while it is unchanged."""
    global _watching
    if not _watching:
        from torch.nn.modules import module

        module.register_module_module_registration_hook(_registered)
        module.register_module_parameter_registration_hook(_registered)
        module.register_module_buffer_registration_hook(_registered)
        _watching = True
    return _structure


class DecoderStep:
    """A whole decoding step of a Transformer decoder in one call of attnlab's kernel
    (``attnlab_decoder_step_f32`` in ``gemv.c``): the new tokens' embeddings (times ``scale``,
    plus the positional code), every layer's causal self-attention over a :class:`KVCache`-style
    buffer, source–target attention over the projected source and feed-forward, with the
    residuals and LayerNorms of pre- or post-norm blocks, and the stack's final LayerNorm (if
    any), and the projection to the vocabulary. At a few rows a step is mostly the fixed cost of
    each tensor operation, which one call avoids. The numbers of attnlab's modules up to rounding
    (tested against the Transformer's blocks).

    Built from fp32 or bf16 CPU tensors, whose weight matrices it packs in their precision
    (:func:`pack`: a copy, so build it once and keep it while the parameters do not change; the
    other tensors are read as fp32); the arithmetic is fp32 either way, so bf16 weights halve the
    bytes a step reads and lose nothing else. :meth:`build` returns ``None`` when the kernel is
    not built here or the tensors are neither. No checks per call, as :func:`matvec`.

    Shape:
        tokens ``(B,)`` int64 → logits ``(B, V)``; cache buffers ``L × (B, H, cap, Dh)``; source
        keys/values ``L × (B / G, H, S, Dh)``, contiguous; lengths ``(B / G,)`` int64
    """

    def __init__(
        self,
        layers: list[list[Tensor | None]],
        embedding: Tensor,
        positions: Tensor,
        scale: float,
        final: tuple[Tensor, Tensor | None] | None,
        out_weight: Tensor,
        out_bias: Tensor | None,
        n_heads: int,
        d_ff: int,
        pre: bool,
        act: int,
        eps: float,
    ):
        self.bf16 = _weights_bf16((layers, DECODER_MATRICES), ([[out_weight]], (0,)))
        flat = _packed_layers(layers, DECODER_MATRICES)
        self.out_packed, self.out_bias, self.vocab_size = pack(out_weight), _vector(out_bias), out_weight.shape[0]
        embedding, positions, final = _inputs(embedding, positions, final)
        self._keep = [*flat, embedding, positions, *(final or ())]  # the tensors whose addresses the kernel reads
        self._params = _pointers(flat)
        self.n_layers, self.d_model = len(layers), embedding.shape[1]
        self.embedding, self.positions, self.scale, self.final = embedding, positions, scale, final
        self.n_heads, self.d_ff, self.pre, self.act, self.eps = n_heads, d_ff, pre, act, eps

    @classmethod
    def build(cls, *args, **kwargs) -> DecoderStep | None:
        """The step, or ``None`` if the kernel is not built here or the tensors are not all fp32 or
        bf16 on a CPU (the weight matrices all of one of them)."""
        if not _tried:
            _load()
        if _decoder_step_f32 is None or not _kernel_dtypes(args, kwargs):
            return None
        step = cls(*args, **kwargs)
        return None if step.bf16 is None else step

    def __call__(
        self,
        tokens: Tensor,
        caches: list[tuple[Tensor, Tensor]],
        filled: int,
        sources: list[tuple[Tensor, Tensor]],
        lengths: Tensor | None,
    ) -> Tensor:
        """Embed ``tokens`` at position ``filled``, write each layer's new keys and values at that
        position of its cache buffers, return the logits of the next token. ``sources`` empty
        and ``lengths`` ``None``: a decoder-only model (GPT), whose layers have no
        cross-attention."""
        if filled >= self.positions.shape[0]:
            raise ValueError(f"sequence of {filled + 1} positions exceeds max_len={self.positions.shape[0]}")
        tokens = tokens.reshape(-1).to(torch.long).contiguous()  # (B,), as the C code reads them
        rows, D = tokens.shape[0], self.d_model
        need = rows * (6 * D + self.d_ff)
        # Working memory per call, not kept on the object: the explorer decodes in two threads at
        # once with one model, and one buffer would be written by both.
        scratch = self.embedding.new_empty(need)
        x = self.embedding.new_empty((rows, D))
        logits = self.embedding.new_empty((rows, self.vocab_size))
        k_src = sources[0][0] if sources else None  # (B / G, H, S, Dh); none in a decoder-only model
        final_w, final_b = self.final if self.final is not None else (None, None)
        _decoder_step_f32(
            self._params,
            self.n_layers,
            self.embedding.data_ptr(),
            tokens.data_ptr(),
            self.positions.data_ptr(),
            self.scale,
            _pointers([k for k, _ in caches]),
            _pointers([v for _, v in caches]),
            _pointers([k for k, _ in sources]) if sources else None,
            _pointers([v for _, v in sources]) if sources else None,
            None if lengths is None else lengths.data_ptr(),
            None if final_w is None else final_w.data_ptr(),
            None if final_b is None else final_b.data_ptr(),
            self.out_packed.data_ptr(),
            None if self.out_bias is None else self.out_bias.data_ptr(),
            self.vocab_size,
            logits.data_ptr(),
            x.data_ptr(),
            scratch.data_ptr(),
            rows,
            D,
            self.n_heads,
            self.d_ff,
            caches[0][0].shape[2],
            filled,
            0 if k_src is None else k_src.shape[2],
            1 if k_src is None else rows // k_src.shape[0],
            int(self.pre),
            self.act,
            self.eps,
            int(self.bf16),
            torch.get_num_threads(),
        )
        return logits


class EncoderStack:
    """A Transformer encoder and its hand-over to the decoder in one call of attnlab's kernel
    (``attnlab_encoder_f32`` in ``gemv.c``): the source embeddings, every layer's self-attention
    over the real tokens of its sentence and feed-forward (pre- or post-norm), the final
    LayerNorm (if any), and each decoder layer's source keys and values (the cross-attention's
    key and value projections of the encoder's output). For a batch of a few short sentences
    the fixed cost of each tensor operation is most of the encoder's time, which one call
    avoids. The numbers of attnlab's modules up to rounding (tested against the Transformer's).

    Built as :class:`DecoderStep` (the weights packed); ``cross`` lists each decoder layer's
    ``Wk bk Wv bv``.

    Shape:
        src ``(B, S)`` int64, right-padded, lengths ``(B,)`` → ``L_dec × 2 × (B, H, S, Dh)``
    """

    def __init__(
        self,
        layers: list[list[Tensor | None]],
        cross: list[list[Tensor | None]],
        embedding: Tensor,
        positions: Tensor,
        scale: float,
        final: tuple[Tensor, Tensor | None] | None,
        n_heads: int,
        d_ff: int,
        pre: bool,
        act: int,
        eps: float,
    ):
        self.bf16 = _weights_bf16((layers, ENCODER_MATRICES), (cross, (0, 2)))
        flat, flat_cross = _packed_layers(layers, ENCODER_MATRICES), _packed_layers(cross, (0, 2))
        embedding, positions, final = _inputs(embedding, positions, final)
        self._keep = [*flat, *flat_cross, embedding, positions, *(final or ())]
        self._params, self._cross = _pointers(flat), _pointers(flat_cross)
        self.n_layers, self.n_cross, self.d_model = len(layers), len(cross), embedding.shape[1]
        self.embedding, self.positions, self.scale, self.final = embedding, positions, scale, final
        self.n_heads, self.d_ff, self.pre, self.act, self.eps = n_heads, d_ff, pre, act, eps

    @classmethod
    def build(cls, *args, **kwargs) -> EncoderStack | None:
        """The encoder, or ``None`` where :meth:`DecoderStep.build` would give ``None``."""
        if not _tried:
            _load()
        if _encoder_f32 is None or not _kernel_dtypes(args, kwargs):
            return None
        encoder = cls(*args, **kwargs)
        return None if encoder.bf16 is None else encoder

    def __call__(self, src: Tensor, lengths: Tensor) -> list[tuple[Tensor, Tensor]]:
        B, S = src.shape
        if S > self.positions.shape[0]:
            raise ValueError(f"sequence of {S} positions exceeds max_len={self.positions.shape[0]}")
        D, H = self.d_model, self.n_heads
        # int64 and contiguous, as the C code reads them, held in names while it does
        src, lengths = src.to(torch.long).contiguous(), lengths.to(torch.long).contiguous()
        x = self.embedding.new_empty(B * S * D)
        scratch = self.embedding.new_empty(B * S * (8 * D + self.d_ff))
        out = [(x.new_empty((B, H, S, D // H)), x.new_empty((B, H, S, D // H))) for _ in range(self.n_cross)]
        final_w, final_b = self.final if self.final is not None else (None, None)
        _encoder_f32(
            self._params,
            self.n_layers,
            self.embedding.data_ptr(),
            src.data_ptr(),
            self.positions.data_ptr(),
            self.scale,
            lengths.data_ptr(),
            None if final_w is None else final_w.data_ptr(),
            None if final_b is None else final_b.data_ptr(),
            self._cross,
            self.n_cross,
            _pointers([k for k, _ in out]),
            _pointers([v for _, v in out]),
            x.data_ptr(),
            scratch.data_ptr(),
            B,
            S,
            D,
            H,
            self.d_ff,
            int(self.pre),
            self.act,
            self.eps,
            int(self.bf16),
            torch.get_num_threads(),
        )
        return out


def top_k_log_softmax(logits: Tensor, k: int) -> tuple[Tensor, Tensor] | None:
    """``torch.log_softmax(logits, -1).topk(k)`` in one pass per row (the top ``k`` found first,
    then one sum of exponentials; no ``(B, V)`` array of log-probabilities is written), or
    ``None`` if the kernel is not built here or cannot take ``logits`` (not a contiguous 2-D fp32
    CPU tensor, ``k`` outside ``1 … V``). Of equal values the smaller token id comes first; the
    log-probabilities equal torch's up to rounding (tested).

    Shape:
        logits ``(B, V)`` → values ``(B, k)`` float32, indices ``(B, k)`` int64
    """
    if not _tried:
        _load()
    if (
        _top_k_f32 is None
        or logits.dim() != 2
        or logits.dtype != torch.float32
        or not logits.is_cpu
        or not logits.is_contiguous()
        or not 1 <= k <= logits.shape[1]
        or logits.requires_grad
    ):
        return None
    B, V = logits.shape
    val, idx = logits.new_empty((B, k)), torch.empty((B, k), dtype=torch.long)
    _top_k_f32(logits.data_ptr(), B, V, k, val.data_ptr(), idx.data_ptr(), torch.get_num_threads())
    return val, idx


def beam_step(
    logits: Tensor, scores: Tensor, ended: Tensor, t: int, max_len: int, eos_id: int, pad_id: int, beam_size: int
) -> tuple[Tensor, Tensor, Tensor, Tensor] | None:
    """One step of :func:`attnlab.decode.beam_search`'s bookkeeping in one call, or ``None`` if
    the kernel is not built here or cannot take the tensors (``logits`` not a contiguous 2-D fp32
    CPU tensor; ``scores`` not fp32 or ``ended`` not int64, both contiguous on the CPU; a beam
    wider than the vocabulary): for ``n`` sentences of ``k`` rows, each live row offers its
    ``beam_size`` best extensions (its score plus the token's log-probability), a finished one
    (``ended < t``) itself extended by ``pad_id`` at no cost, and each sentence keeps the
    ``beam_size`` best of its offers; of equal scores the earlier offer (row, then rank) wins.
    The numbers of the PyTorch operations in ``beam_search`` up to rounding (tested).

    Shape:
        logits ``(n·k, V)``, scores ``(n, k)``, ended ``(n·k,)`` → scores ``(n, K)``, and per new
        row ``(n·K,)``: the row it extends, its token, the step at which it ended (``t`` for a
        new EOS, ``max_len`` while live)
    """
    if not _tried:
        _load()
    if (
        _beam_step_f32 is None
        or logits.dim() != 2
        or logits.dtype != torch.float32
        or not logits.is_cpu
        or not logits.is_contiguous()
        or scores.dtype != torch.float32
        or not scores.is_contiguous()
        or not scores.is_cpu
        or ended.dtype != torch.long
        or not ended.is_contiguous()
        or not ended.is_cpu
        or not 1 <= beam_size <= min(logits.shape[1], 64)
    ):
        return None
    (n, k), (rows, V), K = scores.shape, logits.shape, beam_size
    cand_val, cand_tok = logits.new_empty(rows * K), torch.empty(rows * K, dtype=torch.long)
    new_scores = logits.new_empty((n, K))
    index, tok, new_ended = (torch.empty(n * K, dtype=torch.long) for _ in range(3))
    _beam_step_f32(
        logits.data_ptr(), V, n, k, K, scores.data_ptr(), ended.data_ptr(), t, max_len, eos_id, pad_id,
        cand_val.data_ptr(), cand_tok.data_ptr(), new_scores.data_ptr(), index.data_ptr(), tok.data_ptr(),
        new_ended.data_ptr(), torch.get_num_threads(),
    )  # fmt: skip
    return new_scores, index, tok, new_ended
