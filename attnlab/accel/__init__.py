"""The engine: the places where attnlab computes the same numbers as plain PyTorch, faster.

Everything else in attnlab is written to be read, and the models (:mod:`attnlab.functional`,
:mod:`attnlab.layers`, :mod:`attnlab.models`, plain ``nn.Linear`` and dropout) are the reference:
they import nothing from here (an import contract in pyproject.toml says so). This package sits
above them and holds the few spots where the plain call was measurably slow on a CPU, each behind
one function whose contract is the plain call it replaces:

- :class:`attnlab.accel.kernels.DecoderStep` ``==`` a Transformer decoder's step through its
  modules (up to rounding): embeddings, every :class:`~attnlab.layers.DecoderBlock`, the final
  norm and the vocabulary projection in one call of attnlab's kernel, with the weights packed once
  (fp32, or bf16 read as they are) and, from a few rows on, the products by the BLAS PyTorch uses
  (:data:`attnlab.accel.rules.BLAS_MIN_ROWS`; :func:`attnlab.accel.kernels.using_blas` turns it
  off for a block); :class:`attnlab.accel.kernels.EncoderStack` the same for the
  encoder, and :func:`attnlab.accel.kernels.beam_step` for one step of beam search's
  bookkeeping. :mod:`attnlab.accel.engine` (the native engine) hands a Transformer's or GPT's
  tensors to them where they apply (at inference, on a CPU, no hooks), so that a decoding step is
  one call instead of ~100 tensor operations; :mod:`attnlab.decode` chooses it by the key
  ``engine="auto"`` (``"modules"``: the model's own modules). Their parameters and arguments are
  laid out once, in :mod:`attnlab.accel.layout`, for both the C and the Python side.
- :func:`reorder_rows` ``==`` ``x.index_select(0, index)`` on the positions of a key/value cache
  decoded so far (beam search's reorder between steps), copying only those, on all threads.
- :func:`prefer_math`: which kernel ``backend="auto"`` of
  :func:`attnlab.functional.scaled_dot_product_attention` takes when no weights are asked for,
  installed there by importing this package (:func:`attnlab.functional.set_auto_rule`).
  For bf16/fp16 on a CPU with at most :data:`MATH_MAX_KEYS_LOW_PRECISION` keys the explicit
  matmuls beat PyTorch's fused kernel, so "auto" takes them there; elsewhere the fused kernel.

- :class:`Lines` / :func:`lines`: every line above (rows, tokens, keys, threads) in one table
  (:mod:`attnlab.accel.rules`), the machine-dependent ones measured on the machine on first use
  and cached (:mod:`attnlab.accel.calibrate`; ``attnlab calibrate``, ``ATTNLAB_LINES``,
  ``ATTNLAB_CALIBRATE=0``); :mod:`attnlab.accel.precision`: inference precision ``"auto"`` (bf16
  where the CPU computes it natively and a cached measurement shows it faster).

All of it is on by default, exactly where it was measured faster (docs/foundation.md and
docs/gpt-bert.md have the figures; ``benchmarks/attention.py --crossover`` and
``benchmarks/lm.py`` measure them again). To turn parts off:

- ``engine="modules"`` of :mod:`attnlab.decode`'s searches and generation: the models' modules.
- :func:`disabled` (``with attnlab.accel.disabled(): …``): inside the block, in this thread, no
  native kernel is used, as on a machine without a C compiler: decoding runs the models' modules
  (their ``nn.Linear`` products are PyTorch's) and :func:`reorder_rows` is ``index_select``. The
  tests compare the two paths so.
- ``ATTNLAB_NATIVE=0`` in the environment: nothing is compiled or loaded (the same happens without
  a C compiler with OpenMP); :func:`attnlab.accel.kernels.status` says which. The kernels are
  cached under ``$ATTNLAB_CACHE`` (default ``~/.cache/attnlab``), keyed by their sources, flags,
  compiler and CPU.
- ``ATTNLAB_ISA=generic|avx2|avx512|avx512_bf16`` in the environment, or :func:`using_isa` for a
  block: the instruction set of the kernels' matrix products, by default the best the CPU has
  (:func:`isas` lists those built here). Under ``avx512_bf16`` the products of bf16 weights round
  the activations to bf16 too (the AVX-512 BF16 dot product); the others compute in fp32.
- ``backend="sdpa"`` (or ``"math"``) instead of ``"auto"`` on ``MultiHeadAttention`` /
  ``scaled_dot_product_attention`` (``backend`` of ``GPTConfig`` and ``BertConfig``) fixes the
  attention kernel.

Each fast path is tested against the plain one (``tests/accel/test_kernels.py``,
``tests/accel/test_native_paths.py``, ``tests/core/test_functional.py``). Apart from :mod:`.engine`, which
reads the models' modules, this package imports only torch, the standard library and attnlab's
machine facts.
"""

from __future__ import annotations

from .. import functional as _functional
from . import calibrate  # noqa: F401  (registers the calibration that rules.lines() runs on first use)
from .inference import reorder_rows
from .kernels import disabled, isas, using_isa
from .rules import (
    MATH_MAX_KEYS_LOW_PRECISION,
    ONE_CALL_STEP_MAX_ROWS,
    ONE_CALL_STEP_MAX_ROWS_ONE_THREAD,
    Lines,
    lines,
    prefer_math,
    prefer_one_call_step,
)

__all__ = [
    "reorder_rows",
    "prefer_math",
    "prefer_one_call_step",
    "Lines",
    "lines",
    "disabled",
    "using_isa",
    "isas",
    "MATH_MAX_KEYS_LOW_PRECISION",
    "ONE_CALL_STEP_MAX_ROWS",
    "ONE_CALL_STEP_MAX_ROWS_ONE_THREAD",
]

# "auto" attention in the plain maths takes the explicit matmuls where this engine's table says
# they are the faster (the maths itself knows nothing of the engine).
_functional.set_auto_rule(prefer_math)
