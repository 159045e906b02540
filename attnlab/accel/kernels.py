"""attnlab's native kernels, compiled on first use with the machine's C compiler.

The C sources, each headed by what it holds:

- ``panels.c``: the register tiles of the matrix products, built once per instruction set the CPU
  has (generic C, AVX2, AVX-512, AVX-512 BF16);
- ``products.c``: those products shared out over the threads: the product of weights packed once
  (:func:`pack`, :func:`packed_linear`; a weight matrix times one row or a few is the product that
  dominates decoding), which from a few rows on hands the product to the BLAS PyTorch uses
  (MKL's ``sgemm_``, and ``gemm_bf16bf16f32_`` for bf16 pairs; :func:`blas`, :func:`using_blas`, the lines in
  :mod:`attnlab.accel.rules`);
- ``layers.c``: the whole decoding step of the translators and GPT (:class:`DecoderStep`: embeddings, every layer, the
  vocabulary projection) and the translators' encoder (:class:`EncoderStack`), each one call, where
  a step of a few rows is otherwise mostly the fixed cost of ~100 tensor operations;
- ``search.c``: :func:`top_k_log_softmax` and :func:`beam_step`, the choice of the next tokens,
  and :func:`gather_filled`, the caches following the hypotheses;
- ``common.h``: what they share; ``layout.h``: their structures, codes and prototypes, written at
  build time from :mod:`attnlab.accel.layout`, whose tables the ctypes side is built from too.

Build. Every file is compiled with ``-O3 -ffp-contract=off -fopenmp`` (``panels.c`` once per
instruction set, with that set's flags; the others with ``-march=native``) and linked into one
library in ``$ATTNLAB_CACHE`` (default ``~/.cache/attnlab``), under a name that hashes the sources,
the flags, the compiler and the CPU's feature flags, and loaded with :mod:`ctypes`; no Python headers
or build step are involved. Without a C compiler with OpenMP (or with ``ATTNLAB_NATIVE=0``) nothing
is compiled: every function here returns ``None`` and callers use PyTorch. :func:`status` says which.

Instruction sets. The products run on the best variant the CPU has (:func:`isas` lists those built,
:func:`isa` says which is in force): ``avx512_bf16`` > ``avx512`` > ``avx2`` > ``generic``.
``ATTNLAB_ISA=<name>`` in the environment picks another for the process, :func:`using_isa` for a
block of code (the tests run every variant the machine has so). The fp32 variants give the same
bits for a product (each number is one multiply-add per input, in order). Under ``avx512_bf16`` the packed products of bf16
weights use the AVX-512 BF16 dot product, which rounds the rows to bf16 too: faster, and no longer
fp32 arithmetic on the bf16 weights.

Switching off. :func:`disabled` (``attnlab.accel.disabled``) turns every kernel here off for a block
of code: each function returns ``None`` (the classes' ``build`` too) as on a machine without a
compiler, and the callers compute with PyTorch. It is how the tests compare the two paths.

It runs on ``torch.get_num_threads()`` threads. With PyTorch's Linux wheels its OpenMP runtime is
the one PyTorch already loaded (both ask for ``libgomp.so.1``), so no second thread pool appears.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import machine
from . import layout, rules

Tensor = torch.Tensor

__all__ = [
    "DecoderStep",
    "EncoderStack",
    "Packed",
    "pack",
    "packed_linear",
    "build_once",
    "structure_version",
    "top_k_log_softmax",
    "beam_step",
    "gather_filled",
    "available",
    "status",
    "disabled",
    "isas",
    "isa",
    "using_isa",
    "PANEL",
    "c_layout",
]

_HERE = Path(__file__).parent
_SOURCES = ("common.h", "panels.c", "products.c", "layers.c", "search.c")
_FLAGS = ["-O3", "-ffp-contract=off", "-fPIC"]
_COMMON_FLAGS = ["-march=native", "-fopenmp"]
#: Each instruction set's flags and floats per vector for panels.c (x86 only, but "generic").
_ISA_FLAGS = {
    "generic": (["-mtune=native"], 8),
    "avx2": (["-mtune=native", "-mavx2", "-mfma"], 8),
    "avx512": (["-mtune=native", "-mavx2", "-mfma", "-mavx512f"], 16),
    "avx512_bf16": (["-mtune=native", "-mavx2", "-mfma", "-mavx512f", "-mavx512bf16", "-DDPBF16"], 16),
}
#: The CPU flags (/proc/cpuinfo) each instruction set needs.
_ISA_NEEDS = {"generic": (), "avx2": ("avx2", "fma"), "avx512": ("avx512f",), "avx512_bf16": ("avx512f", "avx512_bf16")}
_LIBS = ["-lm"]  # after the objects: a linker with --as-needed drops a library named before its users

#: Outputs per panel of a packed weight (layout.PANEL).
PANEL = layout.PANEL

_lock = threading.Lock()
_lib = None  # the loaded library, once built
_built_isas: tuple[str, ...] = ()
_default_isa = "generic"
_tried = False  # whether loading was attempted (then _lib and _status are final)
_status = "not loaded yet"
_library_key = "none"  # the built library's folder name: a hash of its sources, flags, compiler and CPU
_on: contextvars.ContextVar[bool] = contextvars.ContextVar("attnlab_native", default=True)
_isa_now: contextvars.ContextVar[str | None] = contextvars.ContextVar("attnlab_isa", default=None)
_blas_on: contextvars.ContextVar[bool] = contextvars.ContextVar("attnlab_blas", default=True)
_sgemm: int | None = None  # the address of the BLAS's SGEMM that the products may call (_find_blas)
_gemm_bf16: int | None = None  # and of its product of bf16 matrices (MKL's GEMM_BF16BF16F32)


def _cpu_isas() -> list[str]:
    """The instruction sets this CPU runs, from its flags ("generic" only off x86)."""
    if platform.machine().lower() not in ("x86_64", "amd64", "i686", "i386"):
        return ["generic"]
    flags = set(machine.cpu_flags().split())
    return [name for name, needs in _ISA_NEEDS.items() if all(f in flags for f in needs)]


def _compile(compiler: str, args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([compiler, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(job: subprocess.Popen) -> str | None:
    """Wait for a compiler run: ``None`` if it succeeded, else the start of its message."""
    try:
        _, err = job.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        job.kill()
        job.communicate()
        return "timed out"
    return None if job.returncode == 0 else err.strip()[:500]


def _hold_lock(path: Path):
    """An open file holding an exclusive lock on ``path`` (closing it releases the lock), or
    ``None`` where files cannot be locked here (the rename below still keeps builds apart)."""
    try:
        import fcntl

        handle = open(path, "w")  # noqa: SIM115 - held open: the lock lives as long as the file
    except (ImportError, OSError):
        return None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
    except OSError:
        handle.close()
        return None
    return handle


def _build() -> tuple[Path, tuple[str, ...]]:
    """The library's path and the instruction sets built into it (compiling it if not cached)."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise OSError("no C compiler (cc/gcc) on PATH")
    wanted = _cpu_isas()
    header = layout.header().encode()
    key = hashlib.sha256(
        b"\0".join(
            [(_HERE / name).read_bytes() for name in _SOURCES]
            + [header, repr((_FLAGS, _COMMON_FLAGS, _ISA_FLAGS, _LIBS, wanted)).encode(), compiler.encode()]
            + [machine.cpu_flags().encode()]
        )
    )
    folder = machine.cache_root() / "kernels" / key.hexdigest()[:16]
    target, listed = folder / "libattnlab_kernels.so", folder / "isas.txt"
    if target.exists() and listed.exists():
        return target, tuple(listed.read_text().split())
    folder.mkdir(parents=True, exist_ok=True)
    # One process builds, the others (parallel test workers, a class's explorers) wait for it.
    lock = _hold_lock(folder / "build.lock")
    try:
        if target.exists() and listed.exists():  # built by another process while this one waited
            return target, tuple(listed.read_text().split())
        # Built in a folder of its own, then renamed into place: another process may build the same.
        work = folder / f"build.{os.getpid()}.partial"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        try:
            (work / "layout.h").write_bytes(header)
            include = ["-I", str(work), "-I", str(_HERE)]
            jobs = {
                isa: _compile(
                    compiler,
                    [*_FLAGS, *_ISA_FLAGS[isa][0], f"-DISA={isa}", f"-DVW={_ISA_FLAGS[isa][1]}", *include]
                    + ["-c", str(_HERE / "panels.c"), "-o", str(work / f"panels_{isa}.o")],
                )
                for isa in wanted
            }
            errors = {isa: _finish(job) for isa, job in jobs.items()}
            built = [isa for isa, error in errors.items() if error is None]  # (an old compiler: fewer ISAs)
            if "generic" not in built:
                raise OSError(f"{compiler} failed: {errors['generic']}")
            have = [f"-DHAVE_ISA_{isa.upper()}" for isa in built]
            common = {
                name: _compile(
                    compiler,
                    [*_FLAGS, *_COMMON_FLAGS, *have, *include]
                    + ["-c", str(_HERE / f"{name}.c"), "-o", str(work / f"{name}.o")],
                )
                for name in ("products", "layers", "search")
            }
            for job in common.values():
                error = _finish(job)
                if error is not None:
                    raise OSError(f"{compiler} failed: {error}")
            objects = [str(work / f"panels_{isa}.o") for isa in built] + [str(work / f"{n}.o") for n in common]
            subprocess.run(
                [compiler, "-shared", "-fopenmp", *objects, "-o", str(work / target.name), *_LIBS],
                check=True,
                capture_output=True,
                text=True,
                timeout=120,
            )
            (work / listed.name).write_text(" ".join(built))
            os.replace(work / listed.name, listed)  # the list first: a library found is always listed
            os.replace(work / target.name, target)
        except subprocess.CalledProcessError as err:
            raise OSError(f"{compiler} failed: {err.stderr.strip()[:500]}") from None
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return target, tuple(built)
    finally:
        if lock is not None:
            lock.close()  # (releases the lock)


def _load():
    """The library, building and loading it on the first call; ``None`` if unavailable."""
    global _lib, _built_isas, _default_isa, _tried, _status, _library_key
    if _tried:
        return _lib
    with _lock:
        if not _tried:
            if os.environ.get("ATTNLAB_NATIVE", "1") == "0":
                _status = "disabled by ATTNLAB_NATIVE=0"
            else:
                try:
                    path, built = _build()
                    lib = ctypes.CDLL(str(path))
                    for name in layout.FUNCTIONS:
                        fn = getattr(lib, name)
                        fn.argtypes, fn.restype = layout.argtypes(name), None
                    asked = os.environ.get("ATTNLAB_ISA")
                    if asked and asked not in built:
                        raise OSError(f"ATTNLAB_ISA={asked} is not one this CPU runs ({', '.join(built)})")
                    _lib, _built_isas, _default_isa = lib, built, asked or built[-1]
                    _library_key = path.parent.name
                    blas = _find_blas(lib)
                    _status = f"loaded {path} ({_default_isa}); {blas}"
                except (OSError, AttributeError, subprocess.SubprocessError) as err:
                    _status = f"unavailable: {err}"
            _tried = True  # last: a thread that sees it also sees the outcome
    return _lib


def _torch_libraries() -> list[Path]:
    """The shared libraries of PyTorch's CPU operators, where its BLAS lives (one of them exists)."""
    folder = Path(torch.__file__).parent / "lib"
    return [folder / name for name in ("libtorch_cpu.so", "libtorch_cpu.dylib", "torch_cpu.dll")]


def _find_blas(lib) -> str:
    """Find the SGEMM and the bf16 product (``sgemm_``, ``gemm_bf16bf16f32_``: MKL's, in PyTorch's
    x86 wheels) of the BLAS that PyTorch uses, check each on one product against ``torch``'s, and
    keep their addresses for the products (``_sgemm``, ``_gemm_bf16``); say what was found."""
    global _sgemm, _gemm_bf16
    if not torch.backends.mkl.is_available():
        return "no BLAS: PyTorch is not built with MKL"
    path = next((p for p in _torch_libraries() if p.exists()), None)
    try:
        torch_cpu = ctypes.CDLL(str(path)) if path is not None else None
    except OSError:
        torch_cpu = None
    found = []
    gen = torch.Generator().manual_seed(0)  # (not the global generator: loading must not move a user's seed)
    for name, weights, dtype in (("sgemm_", "f32", torch.float32), ("gemm_bf16bf16f32_", "bf16_pairs", torch.bfloat16)):
        if weights == "bf16_pairs" and "avx512_bf16" not in _built_isas:
            continue  # (bf16 pairs, the rows rounded to bf16, are the avx512_bf16 products' only)
        fn = getattr(torch_cpu, name, None)
        address = None if fn is None else ctypes.cast(fn, ctypes.c_void_p).value
        x, w, b = (torch.randn(shape, generator=gen) for shape in ((5, 7), (9, 7), (9,)))
        w, y = w.to(dtype), torch.full((5, 9), float("nan"))
        products = _products(weights, "generic" if weights == "f32" else "avx512_bf16", 1, rules.DEFAULTS)
        products.sgemm, products.gemm_bf16 = (address, None) if weights == "f32" else (None, address)
        products.blas_rows = products.blas_rows_large = 1
        if address is not None:
            weight = layout.structure("weight_t")(packed=None, plain=w.data_ptr())
            lib.attnlab_packed_rows(ctypes.byref(weight), x.data_ptr(), b.data_ptr(), y.data_ptr(), 5, 9, 7, ctypes.byref(products))  # fmt: skip
        # (the bf16 product rounds the rows to bf16, as the BF16 dot product of the pairs' panels)
        want = torch.nn.functional.linear(x.to(dtype).float(), w.float(), b)
        if address is not None and torch.allclose(y, want, atol=1e-4, rtol=1e-4):
            found.append(name)
            if weights == "f32":
                _sgemm = address
            else:
                _gemm_bf16 = address
    return (
        f"BLAS: {', '.join(found)}" if found else "no BLAS: neither sgemm_ nor gemm_bf16bf16f32_ gave torch's numbers"
    )


def _on_now():
    """The library if it is built and not switched off here (:func:`disabled`), else ``None``."""
    lib = _lib if _tried else _load()
    return lib if lib is not None and _on.get() else None


def available() -> bool:
    """Whether the native kernels are compiled, loaded and not switched off by :func:`disabled`
    (compiling them on the first call)."""
    return _on_now() is not None


def library_key() -> str:
    """The kernels' build, as a short hash of their sources, flags, compiler and CPU (``"none"``
    without them): what a measurement of them is keyed by (:mod:`attnlab.accel.calibrate`)."""
    _load()
    return _library_key


def status() -> str:
    """Why the kernels are or are not in use (after the first use or :func:`available`)."""
    return _status


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Inside the block (in this thread), none of attnlab's native kernels is used: everything
    computes as on a machine without a C compiler, with PyTorch. The plain path, for comparing the
    two or for measuring what the kernels bring.

    Shape:
        no tensors.
    """
    token = _on.set(False)
    try:
        yield
    finally:
        _on.reset(token)


def isas() -> tuple[str, ...]:
    """The instruction sets whose product kernels are built here, worst first (empty without the
    kernels).

    Shape:
        no tensors.
    """
    _load()
    return _built_isas


def isa() -> str:
    """The instruction set the products use now: :func:`using_isa`'s, else ``ATTNLAB_ISA``'s, else
    the best the CPU has.

    Shape:
        no tensors.
    """
    if not _tried:
        _load()
    return _isa_now.get() or _default_isa


@contextlib.contextmanager
def using_isa(name: str) -> Iterator[None]:
    """Inside the block (in this thread), the products use the variant for ``name`` (one of
    :func:`isas`): a test runs each path the machine has so. Kernels built before the block keep
    the variant they were built for (their weights are packed for it).

    Shape:
        no tensors.
    """
    if name not in isas():
        raise ValueError(f"no {name!r} kernels here; built: {', '.join(isas()) or 'none'}")
    token = _isa_now.set(name)
    try:
        yield
    finally:
        _isa_now.reset(token)


def _isa_code() -> int:
    return layout.ISAS[_isa_now.get() or _default_isa]


def c_layout() -> list[int] | None:
    """Where the C compiler put every field of :mod:`attnlab.accel.layout`'s structures, then each
    one's size (as :func:`attnlab.accel.layout.ctypes_layout`), or ``None`` without the kernels.

    Shape:
        no tensors.
    """
    lib = _load()
    if lib is None:
        return None
    out = (ctypes.c_long * len(layout.ctypes_layout()))()
    lib.attnlab_layout(out)
    return list(out)


def _products(weights: str, isa_name: str, threads: int, table: rules.Lines | None = None):
    """The products' settings of a call (layout's ``products_t``): the BLAS from the lines of
    :mod:`attnlab.accel.rules` (``table``, default the table in force), unless :func:`using_blas`
    turned it off here."""
    on, bf16, table = _blas_on.get(), weights != "f32", table or rules.lines()
    return layout.structure("products_t")(
        weights=layout.WEIGHTS[weights], isa=layout.ISAS[isa_name], threads=threads,
        sgemm=_sgemm if on else None, gemm_bf16=_gemm_bf16 if on else None,
        blas_rows=table.blas_min_rows_bf16 if bf16 else table.blas_min_rows,
        blas_rows_large=table.blas_min_rows_bf16 if bf16 else table.blas_min_rows_large,
        blas_large=table.blas_large_weights,
    )  # fmt: skip


def blas(dtype: torch.dtype = torch.float32) -> bool:
    """Whether the products of many rows of ``dtype`` weights (fp32; bf16: packed in pairs for
    ``avx512_bf16``) may go to PyTorch's BLAS here: found, checked, and not turned off by
    :func:`using_blas`.

    Shape:
        no tensors.
    """
    _load()
    found = _sgemm if dtype == torch.float32 else _gemm_bf16 if dtype == torch.bfloat16 else None
    return found is not None and _blas_on.get()


@contextlib.contextmanager
def using_blas(on: bool) -> Iterator[None]:
    """Inside the block (in this thread), the layer kernels' products of many rows go to PyTorch's
    BLAS (``on``, the default where it is found) or stay with attnlab's packed products at every
    row count: a test runs both so. Read when a kernel is built (:class:`DecoderStep`,
    :class:`EncoderStack`) or called (:func:`packed_linear`).

    Shape:
        no tensors.
    """
    token = _blas_on.set(on)
    try:
        yield
    finally:
        _blas_on.reset(token)


def _pointers(tensors: list[Tensor | None]) -> ctypes.Array:
    return (ctypes.c_void_p * len(tensors))(*[None if t is None else t.data_ptr() for t in tensors])


@dataclass(frozen=True)
class Packed:
    """A weight matrix in the packed layout of attnlab's layer kernels (:func:`pack`).

    Shape:
        data ``(ceil(out / PANEL) · PANEL · n,)`` (bf16 pairs: ``n`` rounded up to even)
    """

    data: Tensor  # the panels' numbers: fp32, or the bits of bf16 numbers as int16
    out: int  # outputs of the matrix
    n: int  # inputs of the matrix
    weights: str  # how the numbers are stored: a key of layout.WEIGHTS
    plain: Tensor | None = None  # the matrix as it is (out, n) for the BLAS products (fp32; bf16 pairs)

    def weight(self):
        """The matrix as the kernels take it (layout's ``weight_t``): packed, and as it is."""
        plain = None if self.plain is None else self.plain.data_ptr()
        return layout.structure("weight_t")(packed=self.data.data_ptr(), plain=plain)


def pack(weight: Tensor, isa_name: str | None = None) -> Packed | None:
    """``weight`` (fp32 or bf16, on the CPU) in the packed layout of attnlab's layer kernels, for the
    products of ``isa_name`` (default :func:`isa`), or ``None`` if the kernels are not built here or
    switched off: panels of :data:`PANEL` outputs, each holding its outputs' weights input by input
    (``attnlab_pack`` in ``products.c``), in the weight's own precision: bf16 weights stay bf16,
    half the bytes for a step to read, widened to fp32 exactly as they are used, or (``avx512_bf16``)
    in pairs of inputs for the AVX-512 BF16 dot product.

    Shape:
        weight ``(out, n)`` → data ``(ceil(out / PANEL) · PANEL · n,)``
    """
    lib = _on_now()
    if lib is None:
        return None
    isa_name = isa_name or isa()
    out, n = weight.shape
    weight = weight.detach().contiguous()
    bf16 = weight.dtype == torch.bfloat16
    weights = ("bf16_pairs" if isa_name == "avx512_bf16" else "bf16") if bf16 else "f32"
    size = -(-out // PANEL) * PANEL * (n + n % 2 if weights == "bf16_pairs" else n)
    data = torch.empty(size, dtype=torch.int16) if bf16 else weight.new_empty(size)
    lib.attnlab_pack(weight.data_ptr(), data.data_ptr(), out, n, layout.WEIGHTS[weights])
    return Packed(data, out, n, weights, None if weights == "bf16" else weight)


def packed_linear(
    x: Tensor, packed: Packed, bias: Tensor | None = None, isa_name: str | None = None, threads: int | None = None
) -> Tensor:
    """``x Wᵀ + b`` for a weight packed by :func:`pack`, by the products of ``isa_name`` (default
    :func:`isa`; bf16 pairs only by ``avx512_bf16``): the product of the layer kernels on its own
    (for tests and measurements). Each number is the same alone or beside other rows. No checks per
    call (the caller gives fp32 CPU rows, contiguous); requires the kernels (:func:`available`).

    Shape:
        x ``(rows, n)`` contiguous fp32, packed from ``(out, n)``, bias ``(out,)`` fp32 → ``(rows, out)``
    """
    lib = _load()
    rows, n = x.shape
    y = x.new_empty((rows, packed.out))
    isa_name = "avx512_bf16" if packed.weights == "bf16_pairs" else isa_name or isa()
    products = _products(packed.weights, isa_name, threads or torch.get_num_threads())
    weight = packed.weight()
    lib.attnlab_packed_rows(
        ctypes.byref(weight), x.data_ptr(), None if bias is None else bias.data_ptr(), y.data_ptr(), rows,
        packed.out, n, ctypes.byref(products),
    )  # fmt: skip
    return y


def _vector(t: Tensor | None) -> Tensor | None:
    """A LayerNorm's or a bias's numbers as the kernels read them: fp32, contiguous."""
    return None if t is None else t.detach().float().contiguous()


def _weights_format(matrices: list[Tensor]) -> str | None:
    """The one dtype of the weight matrices as :func:`pack` stores it (``None``: mixed, which the
    kernels cannot take)."""
    dtypes = {t.dtype for t in matrices}
    return None if len(dtypes) != 1 else "bf16" if dtypes == {torch.bfloat16} else "f32"


def _layers(struct: str, layers: list[dict[str, Tensor | None]], isa_name: str, keep: list) -> ctypes.Array:
    """``layers`` (each a dict of a layer structure's fields, layout.STRUCTS[struct]) as an array
    of that structure, the weight matrices packed for ``isa_name``; what it points to goes into
    ``keep``."""
    Struct = layout.structure(struct)
    array = (Struct * len(layers))()
    matrices = layout.MATRICES[struct]
    for layer, fields in zip(array, layers):
        if set(fields) != {f for f, _ in layout.STRUCTS[struct]}:
            raise ValueError(f"{struct} takes {[f for f, _ in layout.STRUCTS[struct]]}, got {sorted(fields)}")
        for name, t in fields.items():
            if t is None:
                continue
            if name in matrices:
                packed = pack(t, isa_name)
                keep += [packed.data, packed.plain]
                setattr(layer, name, packed.weight())
            else:
                data = _vector(t)
                keep.append(data)
                setattr(layer, name, data.data_ptr())
    return array


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
    (``attnlab_decoder_step`` in ``layers.c``): the new tokens' embeddings (times ``scale``, plus
    the positional code), every layer's causal self-attention over a :class:`KVCache`-style
    buffer, source–target attention over the projected source and feed-forward, with the
    residuals and LayerNorms of pre- or post-norm blocks, and the stack's final LayerNorm (if
    any), and the projection to the vocabulary. At a few rows a step is mostly the fixed cost of
    each tensor operation, which one call avoids. The numbers of attnlab's modules up to rounding
    (tested against the Transformer's blocks and GPT's).

    ``layers``: each layer's tensors by the field names of ``decoder_layer_t``
    (:data:`attnlab.accel.layout.STRUCTS`; ``None`` for a bias or a norm's bias that is absent,
    and for the cross-attention of a decoder-only model). Built from fp32 or bf16 CPU tensors,
    whose weight matrices it packs in their precision for the instruction set in force
    (:func:`pack`: a copy, so build it once and keep it while the parameters do not change; the
    other tensors are read as fp32); the arithmetic is fp32 either way (but the BF16 dot product of
    ``avx512_bf16``, see :func:`pack`). :meth:`build` returns ``None`` when the kernels are not
    built here or switched off, or the tensors are neither. No checks per call: decoding calls it
    once per token, where a dozen attribute checks would cost more than a small step's products.

    Shape:
        tokens ``(B,)`` int64 → logits ``(B, V)``; cache buffers ``L × (B, H, cap, Dh)``; source
        keys/values ``L × (B / G, H, S, Dh)``, contiguous; lengths ``(B / G,)`` int64
    """

    def __init__(
        self,
        layers: list[dict[str, Tensor | None]],
        embedding: Tensor,
        positions: Tensor,
        scale: float,
        final: tuple[Tensor, Tensor | None] | None,
        out_weight: Tensor,
        out_bias: Tensor | None,
        n_heads: int,
        d_ff: int,
        pre: bool,
        activation: str,
        eps: float,
    ):
        matrices = [layer[f] for layer in layers for f in layout.MATRICES["decoder_layer_t"] if layer[f] is not None]
        fmt = _weights_format(matrices + [out_weight])
        self.isa, self.weights = isa(), fmt
        if fmt is None:
            return
        self._keep: list[Tensor] = []  # the tensors whose addresses the kernel reads
        self._layers = _layers("decoder_layer_t", layers, self.isa, self._keep)
        out = pack(out_weight, self.isa)
        self.weights = out.weights
        self.out_packed, self.out_bias, self.vocab_size = out, _vector(out_bias), out_weight.shape[0]
        embedding, positions = _vector(embedding), _vector(positions)
        final = None if final is None else [_vector(t) for t in final]
        self._keep += [embedding, positions, *(final or ())]
        self.n_layers, self.d_model = len(layers), embedding.shape[1]
        self.embedding, self.positions, self.scale, self.final = embedding, positions, scale, final
        self.n_heads, self.d_ff, self.pre, self.act, self.eps = n_heads, d_ff, pre, layout.ACTIVATIONS[activation], eps
        # The arguments that do not change from call to call, set once: a call copies them and sets
        # the others (a step of a few rows is short enough for ctypes' time per field to count).
        final_w, final_b = final if final is not None else (None, None)
        self._fixed = layout.structure("decoder_step_t")(
            layers=ctypes.cast(self._layers, ctypes.c_void_p), n_layers=self.n_layers, table=embedding.data_ptr(),
            pe=positions.data_ptr(), embed_scale=scale, final_w=None if final_w is None else final_w.data_ptr(),
            final_b=None if final_b is None else final_b.data_ptr(), out_w=self.out_packed.weight(),
            out_b=None if self.out_bias is None else self.out_bias.data_ptr(), V=self.vocab_size, D=self.d_model,
            H=n_heads, F=d_ff, pre=int(pre), act=self.act, eps=eps,
        )  # fmt: skip

    @classmethod
    def build(cls, *args, **kwargs) -> DecoderStep | None:
        """The step, or ``None`` if the kernels are not built here or switched off, or the tensors
        are not all fp32 or bf16 on a CPU (the weight matrices all of one of them)."""
        if _on_now() is None or not _kernel_dtypes(args, kwargs):
            return None
        step = cls(*args, **kwargs)
        return None if step.weights is None else step

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
        # Working memory per call, not kept on the object: the explorer decodes in two threads at
        # once with one model, and one buffer would be written by both.
        scratch = self.embedding.new_empty(rows * (6 * D + self.d_ff))  # layers.c, DECODER_SCRATCH
        x = self.embedding.new_empty((rows, D))
        logits = self.embedding.new_empty((rows, self.vocab_size))
        k_src = sources[0][0] if sources else None  # (B / G, H, S, Dh); none in a decoder-only model
        kc, vc = _pointers([k for k, _ in caches]), _pointers([v for _, v in caches])
        km = _pointers([k for k, _ in sources]) if sources else None
        vm = _pointers([v for _, v in sources]) if sources else None
        args = type(self._fixed).from_buffer_copy(self._fixed)
        args.tokens, args.Kc, args.Vc = tokens.data_ptr(), ctypes.addressof(kc), ctypes.addressof(vc)
        args.Km, args.Vm = (None, None) if km is None else (ctypes.addressof(km), ctypes.addressof(vm))
        args.lengths = None if lengths is None else lengths.data_ptr()
        args.logits, args.x, args.scratch = logits.data_ptr(), x.data_ptr(), scratch.data_ptr()
        args.rows, args.cap, args.L = rows, caches[0][0].shape[2], filled
        args.S, args.groups = (0, 1) if k_src is None else (k_src.shape[2], rows // k_src.shape[0])
        args.products = _products(self.weights, self.isa, rules.step_threads(rows))
        _lib.attnlab_decoder_step(ctypes.byref(args))
        return logits


class EncoderStack:
    """A Transformer encoder and its hand-over to the decoder in one call of attnlab's kernel
    (``attnlab_encoder`` in ``layers.c``): the source embeddings, every layer's self-attention
    over the real tokens of its sentence and feed-forward (pre- or post-norm), the final
    LayerNorm (if any), and each decoder layer's source keys and values (the cross-attention's
    key and value projections of the encoder's output). For a batch of a few short sentences
    the fixed cost of each tensor operation is most of the encoder's time, which one call
    avoids. The numbers of attnlab's modules up to rounding (tested against the Transformer's).

    Built as :class:`DecoderStep` (the weights packed); ``layers`` by the field names of
    ``encoder_layer_t``, ``cross`` (each decoder layer's ``wk bk wv bv``) of ``cross_kv_t``.

    Shape:
        src ``(B, S)`` int64, right-padded, lengths ``(B,)`` → ``L_dec × 2 × (B, H, S, Dh)``
    """

    def __init__(
        self,
        layers: list[dict[str, Tensor | None]],
        cross: list[dict[str, Tensor | None]],
        embedding: Tensor,
        positions: Tensor,
        scale: float,
        final: tuple[Tensor, Tensor | None] | None,
        n_heads: int,
        d_ff: int,
        pre: bool,
        activation: str,
        eps: float,
    ):
        matrices = [layer[f] for layer in layers for f in layout.MATRICES["encoder_layer_t"]]
        matrices += [layer[f] for layer in cross for f in layout.MATRICES["cross_kv_t"]]
        fmt = _weights_format([t for t in matrices if t is not None])
        self.isa, self.weights = isa(), fmt
        if fmt is None:
            return
        self.weights = "bf16_pairs" if fmt == "bf16" and self.isa == "avx512_bf16" else fmt
        self._keep: list[Tensor] = []
        self._layers = _layers("encoder_layer_t", layers, self.isa, self._keep)
        self._cross = _layers("cross_kv_t", cross, self.isa, self._keep)
        embedding, positions = _vector(embedding), _vector(positions)
        final = None if final is None else [_vector(t) for t in final]
        self._keep += [embedding, positions, *(final or ())]
        self.n_layers, self.n_cross, self.d_model = len(layers), len(cross), embedding.shape[1]
        self.embedding, self.positions, self.scale, self.final = embedding, positions, scale, final
        self.n_heads, self.d_ff, self.pre, self.act, self.eps = n_heads, d_ff, pre, layout.ACTIVATIONS[activation], eps

    @classmethod
    def build(cls, *args, **kwargs) -> EncoderStack | None:
        """The encoder, or ``None`` where :meth:`DecoderStep.build` would give ``None``."""
        if _on_now() is None or not _kernel_dtypes(args, kwargs):
            return None
        encoder = cls(*args, **kwargs)
        return None if encoder.weights is None else encoder

    def __call__(self, src: Tensor, lengths: Tensor) -> list[tuple[Tensor, Tensor]]:
        B, S = src.shape
        if S > self.positions.shape[0]:
            raise ValueError(f"sequence of {S} positions exceeds max_len={self.positions.shape[0]}")
        D, H = self.d_model, self.n_heads
        # int64 and contiguous, as the C code reads them, held in names while it does
        src, lengths = src.to(torch.long).contiguous(), lengths.to(torch.long).contiguous()
        x = self.embedding.new_empty(B * S * D)
        scratch = self.embedding.new_empty(B * S * (8 * D + self.d_ff))  # layers.c, ENCODER_SCRATCH
        out = [(x.new_empty((B, H, S, D // H)), x.new_empty((B, H, S, D // H))) for _ in range(self.n_cross)]
        final_w, final_b = self.final if self.final is not None else (None, None)
        km, vm = _pointers([k for k, _ in out]), _pointers([v for _, v in out])
        args = layout.structure("encoder_t")(
            layers=ctypes.cast(self._layers, ctypes.c_void_p), n_layers=self.n_layers,
            table=self.embedding.data_ptr(), src=src.data_ptr(), pe=self.positions.data_ptr(),
            embed_scale=self.scale, lengths=lengths.data_ptr(),
            final_w=None if final_w is None else final_w.data_ptr(),
            final_b=None if final_b is None else final_b.data_ptr(),
            cross=ctypes.cast(self._cross, ctypes.c_void_p), n_cross=self.n_cross,
            Km=ctypes.cast(km, ctypes.c_void_p), Vm=ctypes.cast(vm, ctypes.c_void_p),
            x=x.data_ptr(), scratch=scratch.data_ptr(), B=B, S=S, D=D, H=H, F=self.d_ff,
            pre=int(self.pre), act=self.act, eps=self.eps,
            products=_products(self.weights, self.isa, rules.step_threads(B * S)),
        )  # fmt: skip
        _lib.attnlab_encoder(ctypes.byref(args))
        return out


def top_k_log_softmax(logits: Tensor, k: int) -> tuple[Tensor, Tensor] | None:
    """``torch.log_softmax(logits, -1).topk(k)`` in one pass per row (the top ``k`` found first,
    then one sum of exponentials; no ``(B, V)`` array of log-probabilities is written), or
    ``None`` if the kernel is not built here (or switched off) or cannot take ``logits`` (not a contiguous 2-D fp32
    CPU tensor, ``k`` outside ``1 … V``). Of equal values the smaller token id comes first; the
    log-probabilities equal torch's up to rounding (tested).

    Shape:
        logits ``(B, V)`` → values ``(B, k)`` float32, indices ``(B, k)`` int64
    """
    lib = _on_now()
    if (
        lib is None
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
    lib.attnlab_top_k_log_softmax(logits.data_ptr(), B, V, k, val.data_ptr(), idx.data_ptr(), rules.step_threads(B))
    return val, idx


def gather_filled(x: Tensor, index: Tensor, filled: int) -> Tensor | None:
    """``x.index_select(0, index)`` where only the first ``filled`` positions (dim 2) count: a
    cache's storage following beam search's hypotheses, copying the positions decoded so far rather
    than its whole capacity, on torch's threads; the positions past ``filled`` of the result are
    left unset. ``None`` if the kernel is not built here (or switched off) or cannot take ``x``
    (not a contiguous 4-D CPU tensor, autograd wanted); ``index`` must hold valid rows.

    Shape:
        x ``(B, H, capacity, Dh)``, index ``(B',)`` int64 → ``(B', H, capacity, Dh)``
    """
    lib = _on_now()
    if lib is None or x.dim() != 4 or not x.is_cpu or not x.is_contiguous() or x.requires_grad:
        return None
    index = index.to(torch.long).contiguous()
    B, H, capacity, Dh = x.shape
    out = x.new_empty((index.shape[0], H, capacity, Dh))
    used = min(filled, capacity) * Dh
    lib.attnlab_gather_filled(
        x.data_ptr(), out.data_ptr(), index.data_ptr(), index.shape[0], H, capacity * Dh, used, x.element_size(),
        rules.step_threads(index.shape[0]),
    )  # fmt: skip
    return out


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
    lib = _on_now()
    if (
        lib is None
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
    lib.attnlab_beam_step(
        logits.data_ptr(), V, n, k, K, scores.data_ptr(), ended.data_ptr(), t, max_len, eos_id, pad_id,
        cand_val.data_ptr(), cand_tok.data_ptr(), new_scores.data_ptr(), index.data_ptr(), tok.data_ptr(),
        new_ended.data_ptr(), rules.step_threads(rows),
    )  # fmt: skip
    return new_scores, index, tok, new_ended
