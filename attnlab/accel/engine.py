"""attnlab's native engine: where its C kernels (:mod:`attnlab.accel.kernels`) compute what a
model's modules compute, the one place that says so and hands the model's tensors to them.

The models (:mod:`attnlab.models`) are the reference and know nothing of this module; decoding
chooses the engine by a key (:data:`ENGINES`), as Hugging Face picks an attention implementation
and CTranslate2 a compute type:

- ``"auto"`` (the default of :mod:`attnlab.decode`'s searches and generation): the native engine
  where it can run, else the modules;
- ``"modules"``: the model's own modules, the reference.

A decoding step of a few rows is mostly the fixed cost of each module call and tensor operation.
So, at inference:

- :func:`decoder` wraps a :class:`~attnlab.models.transformer.Transformer` for the seq2seq search
  (its ``start`` and ``step``): :func:`start` encodes the source and projects the decoder layers'
  source keys/values in one call of the C encoder (:class:`~attnlab.accel.kernels.EncoderStack`),
  :func:`step` runs each step in one call of the C decoder step
  (:class:`~attnlab.accel.kernels.DecoderStep`), the vocabulary projection included;
- :func:`stepper` / :func:`gpt_stepper` give a GPT's one-token step as one call of the C decoder
  step without cross-attention.

Every step these make names its engine in its ``engine`` attribute: ``"native"``.

Each declines (returns ``None``) where it would not compute what the modules do: training or
autograd, hooks (they must see their calls), autocast, mixed or other dtypes, an attention variant
other than full, rotary positions (the C kernels), LayerNorms without weights or of different
``eps``, the kernels not built here or switched off (:func:`attnlab.accel.disabled`). The model's
modules then run. An fp32 step of many rows without a BLAS for the C products also goes to the
modules, whose products are the BLAS's (:func:`attnlab.accel.rules.prefer_one_call_step`).
tests/accel/test_native_paths.py compares every path with the modules, for every configuration the
kernels take and each instruction set the machine has.

Shape letters: ``B`` rows (sentences × beams), ``N`` sentences, ``S`` source length, ``D`` width,
``H`` heads, ``Dh`` head width, ``V`` vocabulary, ``L`` layers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from ..layers import ACTIVATIONS, KVCache
from ..models.gpt import GPT
from ..models.seq2seq import DecoderState, StepOutput
from ..models.transformer import Transformer
from . import kernels, layout, rules
from .inference import reorder_rows

Tensor = torch.Tensor

__all__ = [
    "ENGINES",
    "check_engine",
    "decoder",
    "stepper",
    "NativeTranslator",
    "start",
    "step",
    "gpt_stepper",
    "NativeDecoderState",
]

#: The activation functions of attnlab.layers by the names the kernels know them by
#: (attnlab.accel.layout.ACTIVATIONS).
_ACTIVATION_NAMES = {fn: name for name, fn in ACTIVATIONS.items()}

_FP32, _BF16 = {(torch.float32, True)}, {(torch.bfloat16, True)}

#: The keys that choose a decoding engine (``engine=`` of :mod:`attnlab.decode`): ``"auto"``, the
#: native engine where it can run, else the modules; ``"modules"``, the model's modules alone.
ENGINES = ("auto", "modules")


def check_engine(engine: str) -> str:
    """``engine`` if it is one of :data:`ENGINES`, else a one-line ``ValueError``."""
    if engine not in ENGINES:
        raise ValueError(f"unknown decoding engine {engine!r}; choose from {list(ENGINES)}")
    return engine


def _engine(name: str, step: Callable) -> Callable:
    """``step`` marked with the engine that computes it."""
    step.engine = name  # type: ignore[attr-defined]
    return step


@dataclass
class NativeDecoderState(DecoderState):
    """A :class:`~attnlab.models.seq2seq.DecoderState` that :func:`start` made, with the model's
    fast step for it (chosen once per source batch: it depends on the batch's padding)."""

    fast: Callable[[Tensor, DecoderState], Tensor] | None = None

    def reorder_cache(self, cache: KVCache, index: Tensor) -> None:
        """As the modules' state, copying only the positions decoded so far, on all threads
        (:func:`attnlab.accel.reorder_rows`)."""
        cache.reorder(index, gather=reorder_rows)


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
    """A Transformer's step for one new token per row without weights by the C decoder step, or
    ``None`` where the modules must run. Logits equal the modules' up to rounding."""
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
    if native is None:
        return None
    H, Dh = model.config.n_heads, model.config.d_model // model.config.n_heads
    seen: list = [None, None]  # the source mask last seen and its row lengths

    def native_step(tokens: Tensor, state: DecoderState) -> Tensor:
        if dtypes == _FP32 and not rules.prefer_one_call_step(tokens.shape[0], kernels.blas()):
            # Many rows without a BLAS for the C step's products: the modules, whose products are
            # the BLAS's. They read and extend the same fp32 caches.
            return model.step(tokens, state).logits  # (B, V)
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


def start(model, src: Tensor, src_mask: Tensor) -> NativeDecoderState | None:
    """:meth:`Transformer.start` where a fast step applies to this batch (see the module
    docstring), else ``None`` (the model encodes through its modules): the source encoded once (by
    the C encoder for up to ``encoder_max_tokens_one_call`` tokens, or ``encoder_max_tokens`` for
    an fp32 model without the BLAS: :class:`attnlab.accel.rules.Lines`) and projected to every
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
    table = rules.lines(measured=False)
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
    """GPT's step by the native engine: ``step(input_ids, caches)`` equal to ``model(input_ids,
    caches=caches).logits[:, -1]`` (up to rounding) for one new token per row, one call of the C
    decoder step; ``None`` where the model's own step must run (where
    :meth:`GPT.token_stepper <attnlab.models.gpt.GPT.token_stepper>` is ``None``, rotary
    positions, the kernels not in use). A step of several tokens, past the context window, or of
    many fp32 rows without a BLAS for the C products goes to ``forward``. The parameters are looked
    up here, once, so use the function only while the model is not modified.

    Shape:
        input_ids ``(B, 1)``; caches holding ``P`` positions → logits ``(B, V)`` at position ``P``
    """
    if model.token_stepper() is None:
        return None  # training, hooks, autocast, mixed dtypes, another attention: forward
    return _gpt_native_step(model)


def _gpt_native_step(model) -> Callable[[Tensor, list[KVCache]], Tensor] | None:
    """:func:`gpt_stepper` for a model whose own step exists (its checks made)."""
    native = _gpt_native(model)
    if native is None:
        return None
    n_positions = model.config.n_positions
    H, Dh = model.config.n_heads, model.config.d_model // model.config.n_heads
    fp32 = model.tok_emb.weight.dtype == torch.float32

    def native_step(input_ids: Tensor, caches: list[KVCache]) -> Tensor:
        offset = len(caches[0])
        if fp32 and not rules.prefer_one_call_step(input_ids.shape[0], kernels.blas()):
            return model(input_ids, caches=caches).logits[:, -1]  # many rows: the BLAS's products
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


# -- choosing the engine ---------------------------------------------------------------------------


class NativeTranslator:
    """A :class:`~attnlab.models.transformer.Transformer`'s decoding protocol
    (:class:`~attnlab.models.seq2seq.Seq2SeqModel`) by the native engine where it applies to a
    batch, else by the model's own :meth:`~attnlab.models.transformer.Transformer.start` and
    :meth:`~attnlab.models.transformer.Transformer.step` (the same numbers up to rounding).

    Shape:
        as :class:`~attnlab.models.seq2seq.Seq2SeqModel`
    """

    engine = "native"

    def __init__(self, model: Transformer) -> None:
        self.model = model

    def start(self, src: Tensor, src_mask: Tensor | None = None) -> DecoderState:
        """:meth:`Transformer.start`, by the C encoder where the native step applies."""
        src_mask = src != self.model.config.pad_id if src_mask is None else src_mask  # (N, S)
        state = start(self.model, src, src_mask)
        return self.model.start(src, src_mask) if state is None else state

    def step(self, tokens: Tensor, state: DecoderState, *, need_weights: bool = False) -> StepOutput:
        """:meth:`Transformer.step`, by the C decoder step where it applies."""
        logits = step(self.model, tokens, state, need_weights)
        if logits is not None:
            return StepOutput(logits, None)  # (B, V)
        return self.model.step(tokens, state, need_weights=need_weights)


def decoder(model, engine: str = "auto"):
    """What a seq2seq search decodes ``model`` through for the engine key ``engine``
    (:data:`ENGINES`): a :class:`NativeTranslator` for a Transformer under ``"auto"``, else the
    model itself (its modules).

    Shape:
        no tensors.
    """
    if check_engine(engine) == "modules" or not isinstance(model, Transformer):
        return model
    return NativeTranslator(model)


def stepper(model, engine: str = "auto") -> Callable[[Tensor, list[KVCache]], Tensor] | None:
    """A language model's one-token step for the engine key ``engine`` (:data:`ENGINES`): under
    ``"auto"`` the native engine's (:func:`gpt_stepper`) where it applies, else the model's own
    (``model.token_stepper()``, or ``None``: ``forward``).

    Shape:
        input_ids ``(B, 1)``; caches holding ``P`` positions → logits ``(B, V)`` at position ``P``
    """
    own = model.token_stepper() if hasattr(model, "token_stepper") else None
    if check_engine(engine) == "auto" and own is not None and isinstance(model, GPT):
        native = _gpt_native_step(model)
        if native is not None:
            return native
    return own
