"""The encoder–decoder Transformer of "Attention Is All You Need" (Vaswani et al. 2017).

    source tokens ─ embed·√D + PE ─ [self-attention → feed-forward] × N ──► memory
    target tokens ─ embed·√D + PE ─ [causal self-attn → cross-attn(memory) → feed-forward] × N
                                     ─ linear → logits over the target vocabulary

Shape letters: ``B`` batch, ``S`` source length, ``T`` target length, ``D`` model width,
``H`` heads, ``V`` vocabulary size, ``L`` layers.

Decoding (greedy and beam search live in :mod:`attnlab.decode`) goes through the protocol of
:mod:`attnlab.models.seq2seq`, :meth:`Transformer.start` and :meth:`Transformer.step`: the encoder
output is projected to each layer's cross-attention keys/values once, and the decoder's
self-attention keys/values are kept in a :class:`~attnlab.layers.KVCache`, so each new token
costs one position of work instead of re-running the whole prefix.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .. import accel
from ..layers import ACTIVATIONS, DecoderBlock, EncoderBlock
from ..positional import SinusoidalPositionalEncoding
from ..variants import AttentionSpec
from .config import check_fields
from .seq2seq import DecoderState, Seq2SeqOutput, StepOutput, token_cross_entropy

Tensor = torch.Tensor

__all__ = ["TransformerConfig", "PRESETS", "Transformer", "NATIVE_ENCODER_MAX_TOKENS"]

#: Most source tokens (batch × length, padding included) that :meth:`Transformer.start` encodes
#: with attnlab's one-call encoder kernel at inference time, which needs (8·D + d_ff) floats of
#: working memory per token (40 MB for the Multi30k preset at this limit); a larger batch takes
#: the modules, which are no faster (docs/export.md has the measurements).
NATIVE_ENCODER_MAX_TOKENS = 4096


@dataclass
class TransformerConfig:
    src_vocab_size: int  # source vocabulary size (incl. special tokens)
    tgt_vocab_size: int  # target vocabulary size (equal to src with a joint vocabulary)
    d_model: int = 256  # model width D (512 in the paper's base model)
    n_heads: int = 4  # attention heads H; D must be divisible by H (8 in the paper)
    n_encoder_layers: int = 3  # encoder blocks (6 in the paper)
    n_decoder_layers: int = 3  # decoder blocks (6 in the paper)
    d_ff: int = 1024  # hidden width of the feed-forward nets (4·D in the paper)
    dropout: float = 0.1  # on embeddings, attention weights and sub-layer outputs (§5.4)
    norm: str = "post"  # "post": LayerNorm(x + f(x)) as in the paper; "pre": x + f(LayerNorm(x)), more stable
    activation: str = "relu"  # feed-forward activation: relu (paper), gelu
    max_len: int = 512  # longest sequence the sinusoidal table covers
    share_embeddings: bool = False  # one embedding for source and target (joint vocabulary; §3.4)
    tie_output: bool = True  # output projection = target embedding matrix (Press & Wolf 2017; §3.4)
    pad_id: int = 0  # padding token id in both vocabularies
    attention: str = "full"  # self-attention variant (encoder: symmetric, decoder: causal); see AttentionSpec
    window: int | None = None  # local window of "sliding_window"/"global_window"
    n_global: int = 0  # "global_window": the first n_global positions are global (Longformer)
    model_type: str = "transformer"  # checkpoint tag used to rebuild the right class

    def __post_init__(self) -> None:
        check_fields(
            self,
            positive=("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff", "max_len"),
            non_negative=("n_encoder_layers", "n_decoder_layers", "pad_id"),
            fractions=("dropout",),
            choices={"norm": ("post", "pre"), "activation": ACTIVATIONS},
            sizes=(
                ("src_vocab_size", "d_model"),
                ("tgt_vocab_size", "d_model"),
                ("max_len", "d_model"),
                ("n_encoder_layers", "d_model", "d_ff"),
                ("n_decoder_layers", "d_model", "d_ff"),
            ),
        )
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        for name in ("src_vocab_size", "tgt_vocab_size"):
            if self.pad_id >= getattr(self, name):
                raise ValueError(f"pad_id={self.pad_id} is outside the {name} of {getattr(self, name)}")
        AttentionSpec.from_config(self.attention, self.window, self.n_global)  # a clear error now


#: Named sizes. "demo" trains on the generated task in about two minutes on two CPU cores;
#: "multi30k" is sized for German→English Multi30k on a CPU.
PRESETS: dict[str, dict] = {
    "tiny": dict(d_model=32, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=64, dropout=0.0),
    "demo": dict(d_model=128, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=256, dropout=0.1, norm="pre"),
    "small": dict(d_model=256, n_heads=4, n_encoder_layers=3, n_decoder_layers=3, d_ff=1024, dropout=0.1),
    "multi30k": dict(
        d_model=256,
        n_heads=4,
        n_encoder_layers=3,
        n_decoder_layers=3,
        d_ff=1024,
        dropout=0.1,
        norm="pre",
        share_embeddings=True,
    ),
    # The shipped ja⇄en translators: sized so that both fit the package's 24 MB of assets when
    # stored in int8 (checkpoint.pack_checkpoint), and train on two cores in about an hour each.
    "enja": dict(
        d_model=256,
        n_heads=4,
        n_encoder_layers=4,
        n_decoder_layers=3,
        d_ff=1024,
        dropout=0.1,
        norm="pre",
        share_embeddings=True,
    ),
    "base": dict(d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048, dropout=0.1),
}


class Transformer(nn.Module):
    """Encoder–decoder Transformer. See the module docstring for the data flow."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = self.config = config
        if c.share_embeddings and c.src_vocab_size != c.tgt_vocab_size:
            raise ValueError(
                f"share_embeddings needs one vocabulary, got src {c.src_vocab_size} and tgt {c.tgt_vocab_size}"
            )
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model, padding_idx=c.pad_id)
        self.tgt_embed = (
            self.src_embed if c.share_embeddings else nn.Embedding(c.tgt_vocab_size, c.d_model, padding_idx=c.pad_id)
        )
        self.positions = SinusoidalPositionalEncoding(c.d_model, c.max_len)
        self.embed_dropout = nn.Dropout(c.dropout)
        block = dict(
            d_model=c.d_model,
            n_heads=c.n_heads,
            d_ff=c.d_ff,
            dropout=c.dropout,
            activation=c.activation,
            norm=c.norm,
            attention=AttentionSpec.from_config(c.attention, c.window, c.n_global),
        )
        self.encoder = nn.ModuleList(EncoderBlock(**block) for _ in range(c.n_encoder_layers))
        self.decoder = nn.ModuleList(DecoderBlock(**block) for _ in range(c.n_decoder_layers))
        # Pre-norm stacks end un-normalised; a final LayerNorm brings the output to scale.
        self.encoder_norm = nn.LayerNorm(c.d_model) if c.norm == "pre" else nn.Identity()
        self.decoder_norm = nn.LayerNorm(c.d_model) if c.norm == "pre" else nn.Identity()
        # accel.Linear: the few rows of beam search at batch 1 read this large matrix on every thread.
        self.out_proj = accel.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        self._init_weights()
        if c.tie_output:
            self.out_proj.weight = self.tgt_embed.weight

    def _init_weights(self) -> None:
        # Xavier-uniform for matrices (as the reference implementations of the paper), embeddings
        # N(0, D^-1/2) so that embedding·√D has unit scale, the padding row zero.
        for name, p in self.named_parameters():
            if p.dim() > 1 and "embed" not in name:
                nn.init.xavier_uniform_(p)
        for emb in {id(self.src_embed): self.src_embed, id(self.tgt_embed): self.tgt_embed}.values():
            nn.init.normal_(emb.weight, std=self.config.d_model**-0.5)
            with torch.no_grad():
                emb.weight[self.config.pad_id].zero_()

    # -- pieces --------------------------------------------------------------------------------

    def _embed(self, embedding: nn.Embedding, tokens: Tensor, offset: int = 0) -> Tensor:
        # §3.4: embeddings are multiplied by √D so they are not drowned by the positional code.
        x = embedding(tokens) * math.sqrt(self.config.d_model)  # (B, L, D)
        return self.embed_dropout(self.positions(x, offset))

    def encode(
        self, src: Tensor, src_mask: Tensor | None = None, *, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor]]:
        """Run the encoder.

        Shape:
            src ``(B, S)``; src_mask ``(B, S)`` True = real token → memory ``(B, S, D)``,
            weights ``L × (B, H, S, S)`` (empty unless ``need_weights``)
        """
        if src_mask is None:
            src_mask = src != self.config.pad_id  # (B, S)
        x = self._embed(self.src_embed, src)  # (B, S, D)
        # Without padding (one sentence, or sentences of one length) the mask hides nothing, and
        # the attention runs without one: the same numbers, none of a mask's work in each layer.
        mask = None if bool(src_mask.all()) else src_mask  # (B, S)
        weights = []
        for block in self.encoder:
            x, w, _ = block(x, key_padding_mask=mask, need_weights=need_weights)
            if need_weights:
                weights.append(w)
        return self.encoder_norm(x), weights

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_mask: Tensor,
        tgt_mask: Tensor | None = None,
        *,
        need_weights: bool = False,
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """Run the decoder over a whole (teacher-forced) target prefix.

        Shape:
            tgt_in ``(B, T)``; memory ``(B, S, D)``; src_mask ``(B, S)``; tgt_mask ``(B, T)``
            → logits ``(B, T, V)``, self weights ``L × (B, H, T, T)``, cross ``L × (B, H, T, S)``
        """
        x = self._embed(self.tgt_embed, tgt_in)  # (B, T, D)
        self_w, cross_w = [], []
        for block in self.decoder:
            x, sw, cw = block(
                x, memory, memory_padding_mask=src_mask, target_padding_mask=tgt_mask, need_weights=need_weights
            )
            if need_weights:
                self_w.append(sw)
                cross_w.append(cw)
        return self.out_proj(self.decoder_norm(x)), self_w, cross_w  # (B, T, V)

    def forward(
        self,
        src: Tensor,
        tgt_in: Tensor,
        *,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        labels: Tensor | None = None,
        label_smoothing: float = 0.0,
        need_weights: bool = False,
    ) -> Seq2SeqOutput:
        """Teacher-forced forward pass.

        Args:
            src: source token ids.
            tgt_in: target ids shifted right (starting with BOS).
            src_mask, tgt_mask: True = real token (default: ``!= pad_id``).
            labels: the next tokens (target + EOS); padding positions are ignored in the loss.
            label_smoothing: ε of label smoothing (Szegedy et al. 2016; 0.1 in Vaswani §5.4).
            need_weights: also return every attention map.

        Shape:
            src ``(B, S)``; tgt_in, labels ``(B, T)`` → logits ``(B, T, V)``
        """
        pad = self.config.pad_id
        src_mask = src != pad if src_mask is None else src_mask  # (B, S)
        tgt_mask = tgt_in != pad if tgt_mask is None else tgt_mask  # (B, T)
        memory, enc_w = self.encode(src, src_mask, need_weights=need_weights)
        logits, self_w, cross_w = self.decode(tgt_in, memory, src_mask, tgt_mask, need_weights=need_weights)
        loss = None
        if labels is not None:
            loss = token_cross_entropy(logits, labels, pad_id=pad, label_smoothing=label_smoothing)
        attentions = {"encoder": enc_w, "decoder": self_w, "cross": cross_w} if need_weights else None
        return Seq2SeqOutput(logits, loss, attentions)

    # -- incremental decoding ------------------------------------------------------------------

    def start(self, src: Tensor, src_mask: Tensor | None = None) -> DecoderState:
        """Encode the source once and project it to every layer's cross-attention keys/values.

        Shape:
            src ``(B, S)`` → state with memory_kv ``L × 2 × (B, H, S, Dh)``
        """
        src_mask = src != self.config.pad_id if src_mask is None else src_mask  # (B, S)
        lengths = src_mask.sum(1, keepdim=True)  # (B, 1)
        right_padded = bool((src_mask == (torch.arange(src_mask.shape[1], device=src.device) < lengths)).all())
        fast_step = self._fast_step() if right_padded else None
        encoder = None
        if fast_step is not None and src.numel() <= NATIVE_ENCODER_MAX_TOKENS:
            encoder = self._native_encoder()
        if encoder is not None:
            memory_kv = encoder(src, lengths.squeeze(1))  # L × 2 × (B, H, S, Dh)
        else:
            memory, _ = self.encode(src, src_mask)  # (B, S, D)
            # Contiguous: each source position's keys then lie in one run, as attnlab's one-query
            # attention kernel reads them (one copy per batch of sentences); fp32 for the native
            # step, whose arithmetic is fp32 whatever the weights' precision.
            memory_kv = [tuple(t.contiguous() for t in block.cross_attn.project_kv(memory)) for block in self.decoder]
            if fast_step is not None and memory_kv and memory_kv[0][0].dtype != torch.float32:
                memory_kv = [(k.float(), v.float()) for k, v in memory_kv]  # (bf16: only the native step applies)
        caches = [block.self_attn.new_cache() for block in self.decoder]
        return DecoderState(memory_kv, src_mask, caches, fast_step=fast_step)

    def _native_ok(self, blocks, norms_of) -> tuple[bool, int, float] | None:
        """``(pre, act, eps)`` shared by ``blocks`` if attnlab's layer kernels compute what they
        do, else ``None``: not with rotary positions, an attention variant other than full, an
        activation other than ReLU and GELU (exact or tanh), or LayerNorms without weights or of
        different ``eps``."""
        acts = {F.relu: 1, F.gelu: 2, ACTIVATIONS["gelu_tanh"]: 3}
        eps = None
        for b in blocks:
            attns = [m for m in (getattr(b, "self_attn", None), getattr(b, "cross_attn", None)) if m is not None]
            if any(a.rotary is not None or not a.has_short_decoding_path for a in attns) or b.ff.act not in acts:
                return None
            for n in norms_of(b):
                if n.weight is None or (eps is not None and n.eps != eps):
                    return None
                eps = n.eps
        if not blocks or len({b.norm for b in blocks}) != 1 or len({b.ff.act for b in blocks}) != 1:
            return None
        return blocks[0].norm == "pre", acts[blocks[0].ff.act], eps

    def _final_norm(self, module: nn.Module, eps: float) -> list | None | bool:
        """The stack's final LayerNorm as [weight, bias] for the kernels; ``None`` for none
        (post-norm); ``False`` if the kernels cannot apply it."""
        if isinstance(module, nn.Identity):
            return None
        if module.weight is None or module.eps != eps:
            return False
        return [module.weight, module.bias]

    @staticmethod
    def _tensors(*tensors) -> list[Tensor | None]:
        return [None if t is None else t.detach().contiguous() for t in tensors]

    def _plan(self) -> dict:
        """What :meth:`start` and the fast step read of the model's structure (its modules,
        parameters, and whether attnlab's kernels compute what they do), read again only when a
        module, parameter or buffer has been registered since
        (:func:`attnlab.accel.kernels.structure_version`): reading it costs more than a decoding
        step of a short sentence."""
        from ..accel.kernels import build_once, structure_version

        def read() -> dict:
            dec = [m for part in (self.tgt_embed, self.positions, self.embed_dropout, self.decoder, self.decoder_norm, self.out_proj)
                   for m in part.modules()]  # fmt: skip
            enc = [m for part in (self.src_embed, self.encoder, self.encoder_norm) for m in part.modules()]
            short = all(
                b.self_attn.has_short_decoding_path and b.cross_attn.has_short_decoding_path for b in self.decoder
            )
            return {
                "decoder_modules": dec,
                "encoder_modules": enc,
                "decoder_params": [p for m in dec for p in m.parameters(recurse=False)],
                "encoder_params": [p for m in enc for p in m.parameters(recurse=False)],
                "short": short,
                "decoder": self._native_decoder_parts(),
                "encoder": self._native_encoder_parts(),
            }

        return build_once(self, "plan", [], read, also=structure_version())

    def _native_layers(self, blocks: list, norms_of: Callable, linears_of: Callable, final_norm: nn.Module):
        """``(pre, act, eps, final, layers)`` for the kernels, or ``None`` where they cannot compute
        what ``blocks`` and ``final_norm`` do (:meth:`_native_ok`, :meth:`_final_norm`): each layer
        its LayerNorms' weights and biases, then its projections' weights and biases, in the order
        of :data:`attnlab.accel.kernels.DECODER_PARAMS` / ``ENCODER_PARAMS``."""
        ok = self._native_ok(blocks, norms_of)
        if ok is None:
            return None
        pre, act, eps = ok
        final = self._final_norm(final_norm, eps)
        if final is False:
            return None
        layers = [
            [t for n in norms_of(b) for t in (n.weight, n.bias)] + [t for lin in linears_of(b) for t in (lin.weight, lin.bias)]
            for b in blocks
        ]  # fmt: skip
        return pre, act, eps, final, layers

    def _native_decoder_parts(self) -> tuple[list, Callable] | None:
        """The parameters of the native decoding step and a function that builds it
        (:class:`attnlab.accel.kernels.DecoderStep`), or ``None`` where it cannot compute what
        the blocks do (see :meth:`_native_ok`)."""
        from ..accel.kernels import DecoderStep

        blocks = list(self.decoder)
        parts = self._native_layers(
            blocks,
            lambda b: (b.self_norm, b.cross_norm, b.ff_norm),
            lambda b: (
                (b.self_attn.q_proj, b.self_attn.k_proj, b.self_attn.v_proj, b.self_attn.out_proj)
                + (b.cross_attn.q_proj, b.cross_attn.out_proj, b.ff.up_proj, b.ff.down_proj)
            ),
            self.decoder_norm,
        )
        if parts is None:
            return None
        pre, act, eps, final, layers = parts
        c, out = self.config, self.out_proj
        tensors = [t for layer in layers for t in layer] + [self.tgt_embed.weight, self.positions.table]
        tensors += [*(final or []), out.weight, out.bias]

        def build():
            return DecoderStep.build(
                [self._tensors(*layer) for layer in layers],
                self.tgt_embed.weight.detach(),
                self.positions.table,
                math.sqrt(c.d_model),
                None if final is None else self._tensors(*final),
                out.weight.detach(),
                None if out.bias is None else out.bias.detach(),
                c.n_heads,
                blocks[0].ff.up_proj.out_features,
                pre,
                act,
                eps,
            )

        return tensors, build

    def _native_encoder_parts(self) -> tuple[list, Callable] | None:
        """As :meth:`_native_decoder_parts`, for the encoder and the decoder layers' source
        keys/values (:class:`attnlab.accel.kernels.EncoderStack`)."""
        from ..accel.kernels import EncoderStack

        blocks = list(self.encoder)
        parts = self._native_layers(
            blocks,
            lambda b: (b.attn_norm, b.ff_norm),
            lambda b: (
                (b.self_attn.q_proj, b.self_attn.k_proj, b.self_attn.v_proj, b.self_attn.out_proj)
                + (b.ff.up_proj, b.ff.down_proj)
            ),
            self.encoder_norm,
        )
        if parts is None:
            return None
        pre, act, eps, final, layers = parts
        cross = [
            [t for lin in (b.cross_attn.k_proj, b.cross_attn.v_proj) for t in (lin.weight, lin.bias)]
            for b in self.decoder
        ]
        c = self.config
        tensors = [t for layer in layers + cross for t in layer] + [self.src_embed.weight, self.positions.table]
        tensors += final or []

        def build():
            return EncoderStack.build(
                [self._tensors(*layer) for layer in layers],
                [self._tensors(*layer) for layer in cross],
                self.src_embed.weight.detach(),
                self.positions.table,
                math.sqrt(c.d_model),
                None if final is None else self._tensors(*final),
                c.n_heads,
                blocks[0].ff.up_proj.out_features,
                pre,
                act,
                eps,
            )

        return tensors, build

    def _native(self, kind: str):
        """The native ``"decoder"`` step or ``"encoder"`` of :meth:`_plan`, built once per set of
        parameters (:func:`attnlab.accel.kernels.build_once`); ``None`` where it does not apply or
        the kernels are not built here."""
        from ..accel.kernels import build_once

        parts = self._plan()[kind]
        return None if parts is None else build_once(self, kind, parts[0], parts[1])

    def _native_decoder(self):
        """The whole decoding step as one call of attnlab's kernel
        (:class:`attnlab.accel.kernels.DecoderStep`), or ``None`` (see :meth:`_native`)."""
        return self._native("decoder")

    def _native_encoder(self):
        """The encoder and the decoder layers' source keys/values as one call of attnlab's kernel
        (:class:`attnlab.accel.kernels.EncoderStack`), or ``None`` where it does not apply: as
        :meth:`_native_decoder`, and with hooks on the encoder's modules or parameters other than
        fp32 or bf16 on a CPU. Only at inference: :meth:`start` asks when its fast step applies."""
        plan = self._plan()
        if any(m._forward_hooks or m._forward_pre_hooks for m in plan["encoder_modules"]):
            return None
        if {(p.dtype, p.is_cpu) for p in plan["encoder_params"]} not in (
            {(torch.float32, True)},
            {(torch.bfloat16, True)},
        ):
            return None
        return self._native("encoder")

    def _fast_step(self):
        """:meth:`step` for one new token per row without weights, as the same operations on the
        same parameters without module calls and checks; or ``None`` where it does not apply
        (training, autograd, hooks, autocast, parameters not all fp32 on a CPU, an attention
        variant other than full). Each decoding step runs every decoder layer, and for a short
        sentence the fixed cost of the calls is most of it (docs/export.md has the profile).

        Where attnlab's kernels are built and compute what the blocks do, the step is one call
        (:meth:`_native_decoder`, the vocabulary projection included). Otherwise the self-attention is
        :meth:`MultiHeadAttention._attend_cached_row` (GPT's decoding step), the cross-attention
        :meth:`MultiHeadAttention._attend_source_row`: attnlab's one-query kernel over each
        sentence's real source tokens, shared by its hypotheses, which needs the padding at the
        end of each source (:meth:`start` checks it). Logits equal :meth:`step`'s up to rounding
        (tested).
        """
        if self.training or torch.is_grad_enabled() or torch.is_autocast_enabled("cpu"):
            return None
        # The modules that decoding runs (not the encoder's: start() has run it), listed once per
        # change of the model's structure (_plan): a walk over them costs as much as a step.
        plan = self._plan()
        if any(m._forward_hooks or m._forward_pre_hooks for m in plan["decoder_modules"]) or not plan["short"]:
            return None
        dtypes = {(p.dtype, p.is_cpu) for p in plan["decoder_params"]}
        if dtypes not in ({(torch.float32, True)}, {(torch.bfloat16, True)}):
            return None

        native = self._native_decoder()
        if native is not None:
            H, Dh = self.config.n_heads, self.config.d_model // self.config.n_heads
            seen: list = [None, None]  # the source mask last seen and its row lengths

            def native_step(tokens: Tensor, state: DecoderState) -> Tensor:
                if seen[0] is not state.src_mask:  # (a new mask after sentences left the batch)
                    seen[:] = state.src_mask, state.src_mask.sum(1)  # (N,) real source tokens, the first ones
                buffers = [c.storage_for_one(tokens.shape[0], H, Dh, state.memory_kv[0][0]) for c in state.caches]
                filled = buffers[0][2]  # positions already in the caches (every layer alike)
                logits = native(tokens, [(k, v) for k, v, _ in buffers], filled, state.memory_kv, seen[1])  # (B, V)
                for cache in state.caches:
                    cache.length = filled + 1
                state.length += 1
                return logits

            return native_step
        if dtypes != {(torch.float32, True)}:
            return None  # (bf16 weights: only the native step reads them in fp32 arithmetic)

        def norm(module: nn.LayerNorm) -> tuple:
            return module.normalized_shape, module.weight, module.bias, module.eps

        layers = [
            (b.norm == "pre", b.self_attn, b.cross_attn, norm(b.self_norm), norm(b.cross_norm), norm(b.ff_norm))
            + (b.ff.up_proj.weight, b.ff.up_proj.bias, b.ff.act, b.ff.down_proj.weight, b.ff.down_proj.bias)
            for b in self.decoder
        ]
        linear = accel.linear

        def step(tokens: Tensor, state: DecoderState) -> Tensor:
            x = self._embed(self.tgt_embed, tokens, offset=state.length)  # (B, 1, D)
            mask = state.src_mask  # (N, S)
            lengths = mask.sum(1)  # (N,) real source tokens, the first ones of each row
            for layer, cache, kv in zip(layers, state.caches, state.memory_kv):
                pre, self_attn, cross_attn, self_norm, cross_norm, ff_norm, w_up, b_up, act, w_down, b_down = layer
                if pre:
                    x = x + self_attn._attend_cached_row(F.layer_norm(x, *self_norm), cache).output  # (B, 1, D)
                    x = x + cross_attn._attend_source_row(F.layer_norm(x, *cross_norm), kv, mask, lengths).output
                    h = F.layer_norm(x, *ff_norm)  # (B, 1, D)
                    x = x + linear(act(linear(h, w_up, b_up)), w_down, b_down)  # (B, 1, D)
                else:
                    x = F.layer_norm(x + self_attn._attend_cached_row(x, cache).output, *self_norm)
                    x = F.layer_norm(x + cross_attn._attend_source_row(x, kv, mask, lengths).output, *cross_norm)
                    x = F.layer_norm(x + linear(act(linear(x, w_up, b_up)), w_down, b_down), *ff_norm)
            state.length += 1
            return self.out_proj(self.decoder_norm(x[:, -1]))  # (B, V)

        return step

    def step(self, tokens: Tensor, state: DecoderState, *, need_weights: bool = False) -> StepOutput:
        """Feed the next target token(s); return the logits of the last one.

        Shape:
            tokens ``(B, t)`` (usually ``t = 1``) → logits ``(B, V)``, cross weights ``(B, L, H, S)``
        """
        if state.fast_step is not None and tokens.shape[1] == 1 and not need_weights:
            return StepOutput(state.fast_step(tokens, state), None)  # (B, V)
        dtype = self.out_proj.weight.dtype
        if state.memory_kv and state.memory_kv[0][0].dtype != dtype:
            # A bf16 model's native encoder and step compute in fp32; the modules compute in bf16.
            state.memory_kv = [(k.to(dtype), v.to(dtype)) for k, v in state.memory_kv]
            for cache in state.caches:
                cache.cast(dtype)
        x = self._embed(self.tgt_embed, tokens, offset=state.length)  # (B, t, D)
        cross = []
        for block, cache, kv in zip(self.decoder, state.caches, state.memory_kv):
            x, _, cw = block(
                x, memory_padding_mask=state.src_mask, need_weights=need_weights, memory_kv=kv, cache=cache
            )
            if need_weights:
                cross.append(cw[:, :, -1])  # (B, H, S) of the newest position
        state.length += tokens.shape[1]
        logits = self.out_proj(self.decoder_norm(x[:, -1]))  # (B, V)
        return StepOutput(logits, torch.stack(cross, dim=1) if need_weights else None)  # (B, L, H, S)
