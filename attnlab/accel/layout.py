"""The one description of what attnlab's C kernels take: their structures, function signatures and
codes, from which both sides are made.

The C side includes ``layout.h``, which :func:`header` writes from these tables at build time
(:mod:`attnlab.accel.kernels`): the ``typedef struct``\\ s, the ``#define``\\ s of the codes and the
prototype of every exported function, so that the compiler rejects a C definition that disagrees
with them. The Python side builds its :class:`ctypes.Structure`\\ s (:func:`structure`) and the
functions' ``argtypes`` (:func:`argtypes`) from the same tables. A field or argument is added in
one place, and its order can never differ between the two.

A field's type is written as C writes it; every pointer is a ``c_void_p`` to ctypes (the Python side
passes ``tensor.data_ptr()`` or an array of them), ``long``, ``int`` and ``float`` are themselves.

Shape:
    no tensors; the shapes each field holds are in the C comments of the kernels that read it.
"""

from __future__ import annotations

import ctypes
import functools

__all__ = [
    "ACTIVATIONS",
    "ISAS",
    "WEIGHTS",
    "PANEL",
    "STRUCTS",
    "FUNCTIONS",
    "MATRICES",
    "header",
    "ctypes_layout",
    "structure",
    "argtypes",
]

#: The feed-forward activations the kernels compute, by the names of ``attnlab.layers.ACTIVATIONS``
#: (0: none, the plain products).
ACTIVATIONS = {"none": 0, "relu": 1, "gelu": 2, "gelu_tanh": 3}

#: The instruction sets the products have a variant for, in the order of preference (the last that
#: the CPU has is taken; ``ATTNLAB_ISA`` overrides). "generic" is plain C with the compiler's
#: vector extensions, for any CPU.
ISAS = {"generic": 0, "avx2": 1, "avx512": 2, "avx512_bf16": 3}

#: How a packed weight stores its numbers: fp32; bf16 widened exactly to fp32 as they are read;
#: bf16 in pairs of inputs for the AVX-512 BF16 dot product, which also rounds the rows to bf16.
WEIGHTS = {"f32": 0, "bf16": 1, "bf16_pairs": 2}

#: Outputs per panel of a packed weight (see ``attnlab_pack``): one AVX-512 register, two AVX2 ones.
PANEL = 16

_F = "const float *"  # an fp32 vector or matrix the kernel reads (NULL: absent, e.g. no bias)
_W = "weight_t"  # a weight matrix: packed (attnlab_pack), and as it is for a BLAS (weight_t)

# fmt: off
#: The structures the kernels take, field by field: a layer's parameters (the kernels read them
#: through these names), and the arguments of the whole-step kernels.
STRUCTS: dict[str, list[tuple[str, str]]] = {
    # A weight matrix (out, n) twice: packed by attnlab_pack for the kernels' own products
    # (fp32 or bf16 numbers), and as it is, row-major, in the same precision, for the BLAS
    # products (products_t); plain NULL where only the packed one is given.
    "weight_t": [("packed", "const void *"), ("plain", "const void *")],
    # One decoder layer (Vaswani et al. 2017, §3.1): its three LayerNorms, the self-attention's
    # projections, the cross-attention's query and output projections (its keys and values come
    # from the encoder, projected once per sentence), the feed-forward. (D, D) matrices but for W1
    # (F, D) and W2 (D, F).
    "decoder_layer_t": [
        ("self_norm_w", _F), ("self_norm_b", _F), ("cross_norm_w", _F), ("cross_norm_b", _F),
        ("ff_norm_w", _F), ("ff_norm_b", _F),
        ("self_wq", _W), ("self_bq", _F), ("self_wk", _W), ("self_bk", _F), ("self_wv", _W), ("self_bv", _F),
        ("self_wo", _W), ("self_bo", _F),
        ("cross_wq", _W), ("cross_bq", _F), ("cross_wo", _W), ("cross_bo", _F),
        ("ff_w1", _W), ("ff_b1", _F), ("ff_w2", _W), ("ff_b2", _F),
    ],
    # One encoder layer: its two LayerNorms, the self-attention's projections, the feed-forward.
    "encoder_layer_t": [
        ("attn_norm_w", _F), ("attn_norm_b", _F), ("ff_norm_w", _F), ("ff_norm_b", _F),
        ("wq", _W), ("bq", _F), ("wk", _W), ("bk", _F), ("wv", _W), ("bv", _F), ("wo", _W), ("bo", _F),
        ("ff_w1", _W), ("ff_b1", _F), ("ff_w2", _W), ("ff_b2", _F),
    ],
    # A decoder layer's cross-attention key and value projections, which the encoder kernel applies.
    "cross_kv_t": [("wk", _W), ("bk", _F), ("wv", _W), ("bv", _F)],
    # The products' settings of one call: how the packed weights store their numbers (WEIGHTS),
    # which variant computes (ISAS), on how many threads; and the BLAS that takes a product of at
    # least blas_rows rows (blas_rows_large for a matrix of more than blas_large weights) from the
    # packed kernels: sgemm for fp32 weights and gemm_bf16 for bf16 pairs (the rows rounded to bf16),
    # the Fortran-interface routines of the BLAS PyTorch uses (NULL: none).
    "products_t": [
        ("weights", "int"), ("isa", "int"), ("threads", "int"), ("sgemm", "const void *"),
        ("gemm_bf16", "const void *"), ("blas_rows", "long"), ("blas_rows_large", "long"), ("blas_large", "long"),
    ],
    # attnlab_decoder_step: one decoding step of `rows` rows at position L.
    "decoder_step_t": [
        ("layers", "const decoder_layer_t *"), ("n_layers", "long"),
        ("table", _F), ("tokens", "const long *"), ("pe", _F), ("embed_scale", "float"),
        ("Kc", "float *const *"), ("Vc", "float *const *"),  # per layer (rows, H, cap, Dh): the caches
        ("Km", "const float *const *"), ("Vm", "const float *const *"),  # per layer (rows / groups, H, S, Dh) or NULL
        ("lengths", "const long *"),  # (rows / groups,) real source tokens
        ("final_w", _F), ("final_b", _F), ("out_w", _W), ("out_b", _F), ("V", "long"),
        ("logits", "float *"), ("x", "float *"), ("scratch", "float *"),
        ("rows", "long"), ("D", "long"), ("H", "long"), ("F", "long"), ("cap", "long"), ("L", "long"),
        ("S", "long"), ("groups", "long"), ("pre", "int"), ("act", "int"), ("eps", "float"),
        ("products", "products_t"),
    ],
    # attnlab_encoder: the encoder of B right-padded sentences of S positions, and each decoder
    # layer's source keys and values.
    "encoder_t": [
        ("layers", "const encoder_layer_t *"), ("n_layers", "long"),
        ("table", _F), ("src", "const long *"), ("pe", _F), ("embed_scale", "float"), ("lengths", "const long *"),
        ("final_w", _F), ("final_b", _F), ("cross", "const cross_kv_t *"), ("n_cross", "long"),
        ("Km", "float *const *"), ("Vm", "float *const *"),  # per decoder layer (B, H, S, Dh): the outputs
        ("x", "float *"), ("scratch", "float *"),
        ("B", "long"), ("S", "long"), ("D", "long"), ("H", "long"), ("F", "long"),
        ("pre", "int"), ("act", "int"), ("eps", "float"),
        ("products", "products_t"),
    ],
}

#: Which fields of a layer structure are weight matrices (packed; the others are fp32 vectors).
MATRICES = {name: tuple(f for f, t in fields if t == _W) for name, fields in STRUCTS.items()}

#: The exported functions: name, arguments (name, C type). All return nothing.
FUNCTIONS: dict[str, list[tuple[str, str]]] = {
    "attnlab_pack": [("W", "const void *"), ("Wp", "void *"), ("out", "long"), ("n", "long"), ("weights", "int")],
    "attnlab_packed_rows": [
        ("W", "const weight_t *"), ("X", _F), ("b", _F), ("Y", "float *"), ("rows", "long"), ("out", "long"), ("n", "long"),
        ("products", "const products_t *"),
    ],
    "attnlab_decoder_step": [("a", "const decoder_step_t *")],
    # Where the C compiler put every field of every structure, and each one's size (ctypes_layout's
    # order), for a test that the two sides agree.
    "attnlab_layout": [("out", "long *")],
    "attnlab_encoder": [("a", "const encoder_t *")],
    "attnlab_top_k_log_softmax": [
        ("logits", _F), ("rows", "long"), ("V", "long"), ("K", "long"), ("val", "float *"), ("idx", "long *"),
        ("threads", "int"),
    ],
    "attnlab_gather_filled": [
        ("src", "const void *"), ("dst", "void *"), ("index", "const long *"), ("rows", "long"), ("blocks", "long"),
        ("block", "long"), ("used", "long"), ("size", "long"), ("threads", "int"),
    ],
    "attnlab_beam_step": [
        ("logits", _F), ("V", "long"), ("n", "long"), ("k", "long"), ("K", "long"), ("scores", _F),
        ("ended", "const long *"), ("t", "long"), ("max_len", "long"), ("eos", "long"), ("pad", "long"),
        ("cand_val", "float *"), ("cand_tok", "long *"), ("new_scores", "float *"), ("index", "long *"),
        ("tok", "long *"), ("new_ended", "long *"), ("threads", "int"),
    ],
}

# fmt: on

_SCALARS = {"long": ctypes.c_long, "int": ctypes.c_int, "float": ctypes.c_float}


def header() -> str:
    """``layout.h``: the codes, structures and prototypes above in C.

    Shape:
        no tensors.
    """
    lines = ["/* Generated by attnlab/accel/layout.py at build time; edit the tables there. */", "#pragma once", ""]
    for prefix, codes in (("ACT", ACTIVATIONS), ("ISA", ISAS), ("WEIGHTS", WEIGHTS)):
        lines += [f"#define {prefix}_{name.upper()} {code}" for name, code in codes.items()]
    lines += [f"#define ISA_COUNT {len(ISAS)}", f"#define PANEL {PANEL}", ""]
    for name, fields in STRUCTS.items():
        lines.append("typedef struct {")
        lines += [f"    {_declare(t, f)};" for f, t in fields]
        lines += [f"}} {name};", ""]
    for name, args in FUNCTIONS.items():
        lines.append(f"void {name}({', '.join(_declare(t, a) for a, t in args)});")
    places = [f"offsetof({name}, {f})" for name, fields in STRUCTS.items() for f, _ in fields]
    places += [f"sizeof({name})" for name in STRUCTS]
    lines += ["", "#include <stddef.h>", f"#define LAYOUT_PLACES {{{', '.join(places)}}}"]
    return "\n".join(lines) + "\n"


def ctypes_layout() -> list[int]:
    """Where ctypes puts every field of every structure, then each one's size: what
    ``attnlab_layout`` returns for the C compiler's structures, if the two sides agree.

    Shape:
        no tensors.
    """
    places = [getattr(structure(name), f).offset for name, fields in STRUCTS.items() for f, _ in fields]
    return places + [ctypes.sizeof(structure(name)) for name in STRUCTS]


def _declare(ctype: str, name: str) -> str:
    return f"{ctype}{name}" if ctype.endswith("*") else f"{ctype} {name}"


def _ctype(ctype: str):
    if "*" in ctype:
        return ctypes.c_void_p
    if ctype in STRUCTS:
        return structure(ctype)
    return _SCALARS[ctype]


@functools.cache
def structure(name: str) -> type[ctypes.Structure]:
    """The :class:`ctypes.Structure` of ``STRUCTS[name]``, laid out as the C compiler lays out the
    generated ``typedef`` (ctypes follows the platform's C rules of alignment).

    Shape:
        no tensors.
    """
    return type(name, (ctypes.Structure,), {"_fields_": [(f, _ctype(t)) for f, t in STRUCTS[name]]})


def argtypes(name: str) -> list:
    """The ``argtypes`` of ``FUNCTIONS[name]`` (a structure argument is passed by pointer).

    Shape:
        no tensors.
    """
    return [_ctype(t) for _, t in FUNCTIONS[name]]
