"""The models' fast decoding steps: where attnlab's native kernels (:mod:`attnlab.accel.kernels`)
compute what a model's modules compute, the one place that says so and hands the model's tensors to
them.

A decoding step of a few rows is mostly the fixed cost of each module call and tensor operation.
So, at inference:

- :func:`start` and :func:`step` are the fast path of :meth:`Transformer.start
  <attnlab.models.transformer.Transformer.start>` and :meth:`~attnlab.models.transformer.Transformer.step`:
  the encoder and the decoder layers' source keys/values in one call of the C encoder
  (:class:`~attnlab.accel.kernels.EncoderStack`), and each step in one call of the C decoder step
  (:class:`~attnlab.accel.kernels.DecoderStep`), the vocabulary projection included; where the
  kernels are not built (or switched off by :func:`attnlab.accel.disabled`) but the model is fp32,
  a step of the same operations as the blocks without their module calls and checks;
- :func:`gpt_stepper` is :meth:`GPT.token_stepper <attnlab.models.gpt.GPT.token_stepper>`: the C
  decoder step without cross-attention, or the same operations as ``GPT.forward`` without its
  module calls.

Every step these return names its engine in its ``engine`` attribute (:data:`ENGINES`): ``"native"``
for the C decoder step, ``"python"`` for the operations without module calls.

Each declines (returns ``None``) where it would not compute what the modules do: training or
autograd, hooks (they must see their calls), autocast, mixed or other dtypes, an attention variant
other than full, rotary positions (the C kernels), LayerNorms without weights or of different
``eps``. The models then run their modules. tests/test_native_paths.py compares every path with
the modules, for every configuration the kernels take and each instruction set the machine has.

Shape letters: ``B`` rows (sentences × beams), ``N`` sentences, ``S`` source length, ``D`` width,
``H`` heads, ``Dh`` head width, ``V`` vocabulary, ``L`` layers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .. import accel
from ..accel import kernels, layout
from ..layers import ACTIVATIONS, KVCache
from .seq2seq import DecoderState

Tensor = torch.Tensor

__all__ = [
    "start",
    "step",
    "gpt_stepper",
    "NATIVE_ENCODER_MAX_TOKENS",
    "NATIVE_ENCODER_MAX_TOKENS_ONE_CALL",
    "NativeDecoderState",
    "ENGINES",
]

#: Most source tokens (batch × length, padding included) that :func:`start` encodes with the C
#: encoder of an fp32 model whose C products cannot go to a BLAS (:func:`attnlab.accel.kernels.blas`).
#: A sentence or a few are mostly the fixed cost of each module call, which the one call does not
#: pay; past a few dozen tokens every product is a real matrix product, where the BLAS behind the
#: modules is faster than the kernels' packed products (the same line as
#: accel.ONE_CALL_STEP_MAX_ROWS for the decoder; docs/measured.md has the measurements). The default:
#: ``encoder_max_tokens`` of attnlab.accel.rules.lines() is the line in force.
NATIVE_ENCODER_MAX_TOKENS = accel.rules.DEFAULTS.encoder_max_tokens

#: Most source tokens the C encoder takes otherwise: a bf16 model (its modules compute in bf16,
#: the C encoder keeps fp32 arithmetic on the weights as they are) and an fp32 one whose C products
#: of many rows go to the BLAS (then as fast as the modules or faster at every batch measured). The
#: bound keeps the encoder's working memory ((8·D + d_ff) floats a token) small: 40 MB for the
#: Multi30k preset. The default, as above (``encoder_max_tokens_one_call``).
NATIVE_ENCODER_MAX_TOKENS_ONE_CALL = accel.rules.DEFAULTS.encoder_max_tokens_one_call

#: The activation functions of attnlab.layers by the names the kernels know them by
#: (attnlab.accel.layout.ACTIVATIONS).
_ACTIVATION_NAMES = {fn: name for name, fn in ACTIVATIONS.items()}

_FP32, _BF16 = {(torch.float32, True)}, {(torch.bfloat16, True)}

#: The engines of the fast steps, by the name each step carries in its ``engine`` attribute:
#: ``"native"``, one call of the C decoder step (:class:`attnlab.accel.kernels.DecoderStep`) per
#: step (a batch of many rows without a BLAS for its products goes to the Python one's tensor
#: operations, whose products are the BLAS's); ``"python"``, the blocks' operations on their
#: parameters without module calls and checks.
ENGINES = ("native", "python")


def _engine(name: str, step: Callable) -> Callable:
    """``step`` marked with its engine (one of :data:`ENGINES`)."""
    step.engine = name  # type: ignore[attr-defined]
    return step


@dataclass
class NativeDecoderState(DecoderState):
    """A :class:`~attnlab.models.seq2seq.DecoderState` that :func:`start` made, with the model's
    fast step for it (chosen once per source batch: it depends on the batch's padding)."""

    fast: Callable[[Tensor, DecoderState], Tensor] | None = None


# -- what the kernels compute --------------------------------------------------------------------


def _settings(blocks: list, norms_of: Callable) -> tuple[bool, str, float] | None:
    """``(pre, activation, eps)`` shared by ``blocks`` if attnlab's layer kernels compute what they
    do, else ``None``: not with rotary positions, an attention variant other than full, an
    activation the kernels do not know, or LayerNorms without weights or of different ``eps``."""
    eps = None
    for b in blocks:
        attns = [m for m in (getattr(b, "self_attn", None), getattr(b, "cross_attn", None)) if m is not None]
        if any(a.rotary is not None or not a.has_short_decoding_path for a in attns):
            return None
        if _ACTIVATION_NAMES.get(b.ff.act) not in layout.ACTIVATIONS:
            return None
        for n in norms_of(b):
            if n.weight is None or (eps is not None and n.eps != eps):
                return None
            eps = n.eps
    if not blocks or len({b.norm for b in blocks}) != 1 or len({b.ff.act for b in blocks}) != 1:
        return None
    return blocks[0].norm == "pre", _ACTIVATION_NAMES[blocks[0].ff.act], eps


def _final_norm(module: nn.Module, eps: float) -> tuple | None | bool:
    """A stack's final LayerNorm as (weight, bias) for the kernels; ``None`` for none (post-norm);
    ``False`` if the kernels cannot apply it."""
    if isinstance(module, nn.Identity):
        return None
    if module.weight is None or module.eps != eps:
        return False
    return module.weight, module.bias


def _fields(pairs: dict[tuple[str, str], nn.Module | None]) -> dict[str, Tensor | None]:
    """A layer structure's fields (attnlab.accel.layout.STRUCTS): each module (a LayerNorm or a
    linear map; ``None``: absent) gives the fields named for its weight and its bias."""
    out: dict[str, Tensor | None] = {}
    for (weight, bias), module in pairs.items():
        out[weight] = None if module is None else module.weight.detach().contiguous()
        out[bias] = None if module is None or module.bias is None else module.bias.detach().contiguous()
    return out


def _decoder_layer(b) -> dict[str, Tensor | None]:
    """A decoder block's tensors by the fields of ``decoder_layer_t``; a GPT block (an encoder
    block run causally) leaves the cross-attention empty."""
    cross = getattr(b, "cross_attn", None)
    sa = b.self_attn
    return _fields({
        ("self_norm_w", "self_norm_b"): b.attn_norm if cross is None else b.self_norm,
        ("cross_norm_w", "cross_norm_b"): getattr(b, "cross_norm", None),
        ("ff_norm_w", "ff_norm_b"): b.ff_norm,
        ("self_wq", "self_bq"): sa.q_proj, ("self_wk", "self_bk"): sa.k_proj, ("self_wv", "self_bv"): sa.v_proj,
        ("self_wo", "self_bo"): sa.out_proj,
        ("cross_wq", "cross_bq"): None if cross is None else cross.q_proj,
        ("cross_wo", "cross_bo"): None if cross is None else cross.out_proj,
        ("ff_w1", "ff_b1"): b.ff.up_proj, ("ff_w2", "ff_b2"): b.ff.down_proj,
    })  # fmt: skip


def _encoder_layer(b) -> dict[str, Tensor | None]:
    """An encoder block's tensors by the fields of ``encoder_layer_t``."""
    sa = b.self_attn
    return _fields({
        ("attn_norm_w", "attn_norm_b"): b.attn_norm, ("ff_norm_w", "ff_norm_b"): b.ff_norm,
        ("wq", "bq"): sa.q_proj, ("wk", "bk"): sa.k_proj, ("wv", "bv"): sa.v_proj, ("wo", "bo"): sa.out_proj,
        ("ff_w1", "ff_b1"): b.ff.up_proj, ("ff_w2", "ff_b2"): b.ff.down_proj,
    })  # fmt: skip


def _cross_kv(b) -> dict[str, Tensor | None]:
    """A decoder block's cross-attention key and value projections by the fields of ``cross_kv_t``."""
    return _fields({("wk", "bk"): b.cross_attn.k_proj, ("wv", "bv"): b.cross_attn.v_proj})


def _parameters(*modules: nn.Module | None) -> list[Tensor]:
    """The parameters a kernel reads (its build is kept while none is replaced or changed)."""
    return [p for m in modules if m is not None for p in m.parameters()]


def _built(model: nn.Module, name: str, tensors: list[Tensor], build: Callable):
    """``build()`` once per set of parameters and instruction set (kernels.build_once), or ``None``
    where the kernels are not built here or switched off."""
    if not kernels.available():
        return None
    return kernels.build_once(model, name, tensors, build, also=kernels.isa())


# -- the translator --------------------------------------------------------------------------------


def _plan(model) -> dict:
    """What :func:`start` and the fast step read of a Transformer's structure (its modules,
    parameters, and whether attnlab's kernels compute what they do), read again only when a module,
    parameter or buffer has been registered since (:func:`attnlab.accel.kernels.structure_version`):
    reading it costs more than a decoding step of a short sentence."""

    def read() -> dict:
        dec = [m for part in (model.tgt_embed, model.positions, model.embed_dropout, model.decoder, model.decoder_norm,
                              model.out_proj) for m in part.modules()]  # fmt: skip
        enc = [m for part in (model.src_embed, model.encoder, model.encoder_norm) for m in part.modules()]
        short = all(b.self_attn.has_short_decoding_path and b.cross_attn.has_short_decoding_path for b in model.decoder)
        return {
            "decoder_modules": dec,
            "encoder_modules": enc,
            "decoder_params": [p for m in dec for p in m.parameters(recurse=False)],
            "encoder_params": [p for m in enc for p in m.parameters(recurse=False)],
            "short": short,
            "decoder": _decoder_parts(model),
            "encoder": _encoder_parts(model),
        }

    return kernels.build_once(model, "plan", [], read, also=kernels.structure_version())


def _decoder_parts(model) -> tuple[list, Callable] | None:
    """The parameters of the C decoder step and a function that builds it, or ``None`` where it
    cannot compute what the blocks do (:func:`_settings`)."""
    blocks = list(model.decoder)
    settings = _settings(blocks, lambda b: (b.self_norm, b.cross_norm, b.ff_norm))
    if settings is None:
        return None
    pre, activation, eps = settings
    final = _final_norm(model.decoder_norm, eps)
    if final is False:
        return None
    c, out = model.config, model.out_proj

    def build():
        return kernels.DecoderStep.build(
            [_decoder_layer(b) for b in blocks],
            model.tgt_embed.weight.detach(),
            model.positions.table,
            math.sqrt(c.d_model),  # §3.4: the embeddings times √D
            None if final is None else [t if t is None else t.detach() for t in final],
            out.weight.detach(),
            None if out.bias is None else out.bias.detach(),
            c.n_heads,
            blocks[0].ff.up_proj.out_features,
            pre,
            activation,
            eps,
        )

    tensors = _parameters(model.decoder, model.decoder_norm, model.out_proj, model.tgt_embed)
    return tensors + [model.positions.table], build


def _encoder_parts(model) -> tuple[list, Callable] | None:
    """As :func:`_decoder_parts`, for the C encoder and the decoder layers' source keys/values."""
    blocks = list(model.encoder)
    settings = _settings(blocks, lambda b: (b.attn_norm, b.ff_norm))
    if settings is None:
        return None
    pre, activation, eps = settings
    final = _final_norm(model.encoder_norm, eps)
    if final is False:
        return None
    c = model.config

    def build():
        return kernels.EncoderStack.build(
            [_encoder_layer(b) for b in blocks],
            [_cross_kv(b) for b in model.decoder],
            model.src_embed.weight.detach(),
            model.positions.table,
            math.sqrt(c.d_model),
            None if final is None else [t if t is None else t.detach() for t in final],
            c.n_heads,
            blocks[0].ff.up_proj.out_features,
            pre,
            activation,
            eps,
        )

    tensors = _parameters(model.encoder, model.encoder_norm, model.src_embed)
    tensors += [p for b in model.decoder for p in b.cross_attn.parameters()]
    return tensors + [model.positions.table], build


def _native(model, kind: str):
    """The C ``"decoder"`` step or ``"encoder"`` of :func:`_plan`, built once per set of parameters;
    ``None`` where it does not apply or the kernels are not in use."""
    parts = _plan(model)[kind]
    return None if parts is None else _built(model, kind, parts[0], parts[1])


def _native_encoder(model):
    """The C encoder, or ``None`` where it does not apply: as the C step, and with hooks on the
    encoder's modules or its parameters not all fp32 or all bf16 on a CPU."""
    plan = _plan(model)
    if any(m._forward_hooks or m._forward_pre_hooks for m in plan["encoder_modules"]):
        return None
    if {(p.dtype, p.is_cpu) for p in plan["encoder_params"]} not in (_FP32, _BF16):
        return None
    return _native(model, "encoder")


def _transformer_step(model) -> Callable[[Tensor, DecoderState], Tensor] | None:
    """A Transformer's step for one new token per row without weights, or ``None`` where the blocks
    must run: the C decoder step where the kernels apply, else (fp32) the blocks' operations on
    their parameters without module calls and checks. Logits equal the blocks' up to rounding."""
    if model.training or torch.is_grad_enabled() or torch.is_autocast_enabled("cpu"):
        return None
    # The modules that decoding runs (not the encoder's: start() has run it), listed once per
    # change of the model's structure (_plan): a walk over them costs as much as a step.
    plan = _plan(model)
    if any(m._forward_hooks or m._forward_pre_hooks for m in plan["decoder_modules"]) or not plan["short"]:
        return None
    dtypes = {(p.dtype, p.is_cpu) for p in plan["decoder_params"]}
    if dtypes not in (_FP32, _BF16):
        return None
    native = _native(model, "decoder")
    if native is not None:
        H, Dh = model.config.n_heads, model.config.d_model // model.config.n_heads
        seen: list = [None, None]  # the source mask last seen and its row lengths
        # Many rows without a BLAS for the C step's products: the step of tensor operations, whose
        # products are the BLAS's (accel.prefer_one_call_step). It reads and extends the same fp32
        # caches; built on first need (a sentence or a few never need it).
        many_rows: list = []

        def native_step(tokens: Tensor, state: DecoderState) -> Tensor:
            if dtypes == _FP32 and not accel.prefer_one_call_step(tokens.shape[0], kernels.blas()):
                if not many_rows:
                    many_rows.append(_transformer_python_step(model))
                return many_rows[0](tokens, state)  # (B, V)
            if seen[0] is not state.src_mask:  # (a new mask after sentences left the batch)
                seen[:] = state.src_mask, state.src_mask.sum(1)  # (N,) real source tokens, the first ones
            buffers = [c.storage_for_one(tokens.shape[0], H, Dh, state.memory_kv[0][0]) for c in state.caches]
            filled = buffers[0][2]  # positions already in the caches (every layer alike)
            logits = native(tokens, [(k, v) for k, v, _ in buffers], filled, state.memory_kv, seen[1])  # (B, V)
            for cache in state.caches:
                cache.length = filled + 1
            state.length += 1
            return logits

        return _engine("native", native_step)
    if dtypes != _FP32:
        return None  # (bf16 weights: only the C step reads them in fp32 arithmetic)
    return _transformer_python_step(model)


def _transformer_python_step(model) -> Callable[[Tensor, DecoderState], Tensor]:
    """The decoder blocks' operations on their parameters without module calls and checks: the
    self-attention by :meth:`MultiHeadAttention.attend_cached_row` (GPT's decoding step), the
    cross-attention by :meth:`MultiHeadAttention.attend_source_row` (attnlab's one-query kernel over
    each sentence's real source tokens, shared by its hypotheses, where it is built)."""

    def norm(module: nn.LayerNorm) -> tuple:
        return module.normalized_shape, module.weight, module.bias, module.eps

    layers = [
        (b.norm == "pre", b.self_attn, b.cross_attn, norm(b.self_norm), norm(b.cross_norm), norm(b.ff_norm))
        + (b.ff.up_proj.weight, b.ff.up_proj.bias, b.ff.act, b.ff.down_proj.weight, b.ff.down_proj.bias)
        for b in model.decoder
    ]
    linear = accel.linear

    def step(tokens: Tensor, state: DecoderState) -> Tensor:
        x = model.embed(model.tgt_embed, tokens, offset=state.length)  # (B, 1, D)
        mask = state.src_mask  # (N, S)
        lengths = mask.sum(1)  # (N,) real source tokens, the first ones of each row
        for layer, cache, kv in zip(layers, state.caches, state.memory_kv):
            pre, self_attn, cross_attn, self_norm, cross_norm, ff_norm, w_up, b_up, act, w_down, b_down = layer
            if pre:
                x = x + self_attn.attend_cached_row(F.layer_norm(x, *self_norm), cache).output  # (B, 1, D)
                x = x + cross_attn.attend_source_row(F.layer_norm(x, *cross_norm), kv, mask, lengths).output
                h = F.layer_norm(x, *ff_norm)  # (B, 1, D)
                x = x + linear(act(linear(h, w_up, b_up)), w_down, b_down)  # (B, 1, D)
            else:
                x = F.layer_norm(x + self_attn.attend_cached_row(x, cache).output, *self_norm)
                x = F.layer_norm(x + cross_attn.attend_source_row(x, kv, mask, lengths).output, *cross_norm)
                x = F.layer_norm(x + linear(act(linear(x, w_up, b_up)), w_down, b_down), *ff_norm)
        state.length += 1
        return model.out_proj(model.decoder_norm(x[:, -1]))  # (B, V)

    return _engine("python", step)


def start(model, src: Tensor, src_mask: Tensor) -> NativeDecoderState | None:
    """:meth:`Transformer.start` where a fast step applies to this batch (see the module
    docstring), else ``None`` (the model encodes through its modules): the source encoded once (by
    the C encoder for up to :data:`NATIVE_ENCODER_MAX_TOKENS_ONE_CALL` tokens, or
    :data:`NATIVE_ENCODER_MAX_TOKENS` for an fp32 model without the BLAS) and projected to every
    decoder layer's cross-attention keys/values, contiguous and fp32, as the kernels read them.
    The fast step needs each source's padding at its end (its real tokens are counted, not masked).

    Shape:
        src ``(N, S)``, src_mask ``(N, S)`` True = real token → memory_kv ``L × 2 × (N, H, S, Dh)``
    """
    lengths = src_mask.sum(1, keepdim=True)  # (N, 1)
    if not bool((src_mask == (torch.arange(src_mask.shape[1], device=src.device) < lengths)).all()):
        return None  # not right-padded
    fast = _transformer_step(model)
    if fast is None:
        return None
    one_call = model.src_embed.weight.dtype == torch.bfloat16 or kernels.blas()
    table = accel.rules.lines(measured=False)
    limit = table.encoder_max_tokens_one_call if one_call else table.encoder_max_tokens
    encoder = _native_encoder(model) if src.numel() <= limit else None
    if encoder is not None:
        memory_kv = encoder(src, lengths.squeeze(1))  # L × 2 × (N, H, S, Dh)
    else:
        memory, _ = model.encode(src, src_mask)  # (N, S, D)
        # Contiguous: each source position's keys then lie in one run, as attnlab's one-query
        # attention kernel reads them (one copy per batch of sentences); fp32 for the C step, whose
        # arithmetic is fp32 whatever the weights' precision.
        memory_kv = [tuple(t.contiguous().float() for t in b.cross_attn.project_kv(memory)) for b in model.decoder]
    caches = [b.self_attn.new_cache() for b in model.decoder]
    return NativeDecoderState(memory_kv, src_mask, caches, fast=fast)


def step(model, tokens: Tensor, state: DecoderState, need_weights: bool) -> Tensor | None:
    """:meth:`Transformer.step`'s logits by the fast step of a state that :func:`start` made, for
    one token per row without weights; else ``None``, after putting the state in the modules' dtype
    (a bf16 model's C encoder and step compute in fp32, its modules in bf16).

    Shape:
        tokens ``(B, 1)`` → logits ``(B, V)``
    """
    if not isinstance(state, NativeDecoderState):
        return None
    if state.fast is not None and tokens.shape[1] == 1 and not need_weights:
        return state.fast(tokens, state)  # (B, V)
    dtype = model.out_proj.weight.dtype
    if state.memory_kv and state.memory_kv[0][0].dtype != dtype:
        state.memory_kv = [(k.to(dtype), v.to(dtype)) for k, v in state.memory_kv]
        for cache in state.caches:
            cache.cast(dtype)
    return None


# -- GPT -------------------------------------------------------------------------------------------


def _gpt_native(model):
    """GPT's whole decoding step as one call of the C decoder step (no cross-attention), built once
    per set of parameters, or ``None`` where it does not compute what ``forward`` does or the
    kernels are not in use: rotary positions, parameters other than all fp32 or all bf16 on a CPU,
    or :func:`_settings`."""
    blocks = list(model.blocks)
    if model.pos_emb is None or not blocks:
        return None
    settings = _settings(blocks, lambda b: (b.attn_norm, b.ff_norm))
    if settings is None or not settings[0] or _final_norm(model.final_norm, settings[2]) in (None, False):
        return None
    if {(p.dtype, p.is_cpu) for p in model.parameters()} not in (_FP32, _BF16):
        return None
    _, activation, eps = settings
    embedding, positions, final = model.tok_emb.weight, model.pos_emb.embedding.weight, model.final_norm

    def build():
        return kernels.DecoderStep.build(
            [_decoder_layer(b) for b in blocks],
            embedding.detach(),
            positions.detach(),
            1.0,  # GPT adds the position vectors to the embeddings unscaled
            (final.weight.detach(), None if final.bias is None else final.bias.detach()),
            embedding.detach(),  # tied output projection
            None,
            model.config.n_heads,
            model.config.d_ff,
            True,  # GPT-2's blocks are pre-norm
            activation,
            eps,
        )

    return _built(model, "step", list(model.parameters()), build)


def gpt_stepper(model) -> Callable[[Tensor, list[KVCache]], Tensor] | None:
    """:meth:`GPT.token_stepper <attnlab.models.gpt.GPT.token_stepper>`: ``step(input_ids, caches)``
    equal to ``model(input_ids, caches=caches).logits[:, -1]`` for one new token per row, or
    ``None`` where the model needs ``forward`` (training mode, forward hooks, autocast or mixed
    dtypes, an attention variant with a window or the online softmax).

    Where attnlab's kernels are in use and the model has learned positions, the step is one call of
    the C decoder step (the numbers of ``forward`` up to rounding); otherwise it runs ``forward``'s
    operations on ``forward``'s parameters without the machinery around them (the same numbers, bit
    for bit). The parameters are looked up here, once, so use the function only while the model is
    not modified; a step of several tokens or past the context window goes to ``forward`` (which
    names the problem).

    Shape:
        input_ids ``(B, 1)``; caches holding ``P`` positions → logits ``(B, V)`` at position ``P``
    """
    if model.training or any(m._forward_hooks or m._forward_pre_hooks for m in model.modules()):
        return None
    if torch.is_autocast_enabled(model.tok_emb.weight.device.type) or len({p.dtype for p in model.parameters()}) > 1:
        return None  # forward's attention checks the dtypes; with one dtype and no autocast they agree
    if not all(block.norm == "pre" and block.self_attn.has_short_decoding_path for block in model.blocks):
        return None
    n_positions = model.config.n_positions
    native = _gpt_native(model)
    step = _gpt_python_step(model)  # (a list of each block's parameters: cheap to build)
    if native is not None:
        H, Dh = model.config.n_heads, model.config.d_model // model.config.n_heads
        fp32 = model.tok_emb.weight.dtype == torch.float32

        def native_step(input_ids: Tensor, caches: list[KVCache]) -> Tensor:
            offset = len(caches[0])
            if fp32 and not accel.prefer_one_call_step(input_ids.shape[0], kernels.blas()):
                return step(input_ids, caches)  # many rows: the BLAS's products (as the translator's)
            if input_ids.shape[1] != 1 or offset >= n_positions:
                for c in caches:
                    c.cast(model.tok_emb.weight.dtype)  # the modules' dtype (fp32 below: the kernel's)
                return model(input_ids, caches=caches).logits[:, -1]  # forward names the problem
            buffers = [c.storage_for_one(input_ids.shape[0], H, Dh, native.embedding) for c in caches]  # fp32
            logits = native(input_ids, [(k, v) for k, v, _ in buffers], offset, [], None)  # (B, V)
            for c in caches:
                c.length = offset + 1
            return logits

        return _engine("native", native_step)
    return step


def _gpt_python_step(model) -> Callable[[Tensor, list[KVCache]], Tensor]:
    """GPT's ``forward`` operations for one new token per row on its parameters, without the module
    calls and checks around them (the same numbers, bit for bit)."""
    n_positions = model.config.n_positions

    def norm(module: nn.LayerNorm) -> tuple:
        return module.normalized_shape, module.weight, module.bias, module.eps

    layers = [
        (norm(b.attn_norm), b.self_attn, norm(b.ff_norm), b.ff.up_proj.weight, b.ff.up_proj.bias, b.ff.act)
        + (b.ff.down_proj.weight, b.ff.down_proj.bias)
        for b in model.blocks
    ]
    final_norm, embedding = norm(model.final_norm), model.tok_emb.weight
    positions = None if model.pos_emb is None else model.pos_emb.embedding.weight  # (n_positions, D)
    linear = accel.linear

    def step(input_ids: Tensor, caches: list[KVCache]) -> Tensor:
        offset = len(caches[0])
        if input_ids.shape[1] != 1 or offset >= n_positions:
            return model(input_ids, caches=caches).logits[:, -1]  # forward names the problem
        x = F.embedding(input_ids, embedding)  # (B, 1, D)
        if positions is not None:
            x = x + positions[offset]  # (B, 1, D)
        for (attn_norm, attn, ff_norm, w_up, b_up, act, w_down, b_down), cache in zip(layers, caches):
            x = x + attn.attend_cached_row(F.layer_norm(x, *attn_norm), cache).output  # (B, 1, D)
            h = F.layer_norm(x, *ff_norm)  # (B, 1, D)
            x = x + linear(act(linear(h, w_up, b_up)), w_down, b_down)  # (B, 1, D)
        x = F.layer_norm(x, *final_norm)
        return linear(x, embedding)[:, -1]  # (B, 1, D) x (V, D)ᵀ -> (B, V)

    return _engine("python", step)
