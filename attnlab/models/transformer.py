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
costs one position of work instead of re-running the whole prefix. ``start`` and ``step`` are
the modules, the reference; attnlab's faster engine (:mod:`attnlab.accel.engine`, its C kernels)
is chosen outside the model, by the ``engine`` key of :mod:`attnlab.decode`'s searches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ..layers import ACTIVATIONS, DecoderBlock, EncoderBlock
from ..positional import SinusoidalPositionalEncoding
from ..variants import AttentionSpec
from .config import check_fields
from .seq2seq import DecoderState, Seq2SeqOutput, StepOutput, token_cross_entropy

Tensor = torch.Tensor

__all__ = ["TransformerConfig", "PRESETS", "Transformer"]


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
        self.out_proj = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
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

    def embed(self, embedding: nn.Embedding, tokens: Tensor, offset: int = 0) -> Tensor:
        """What the encoder (``embedding=src_embed``) or the decoder (``tgt_embed``) reads for
        ``tokens``: their embeddings times √D plus the positional code from position ``offset``
        on, then the embedding dropout.

        Shape:
            tokens ``(B, L)`` → ``(B, L, D)``
        """
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
        x = self.embed(self.src_embed, src)  # (B, S, D)
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
        x = self.embed(self.tgt_embed, tgt_in)  # (B, T, D)
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
        memory, _ = self.encode(src, src_mask)  # (B, S, D)
        memory_kv = [block.cross_attn.project_kv(memory) for block in self.decoder]  # L × 2 × (B, H, S, Dh)
        return DecoderState(memory_kv, src_mask, [block.self_attn.new_cache() for block in self.decoder])

    def step(self, tokens: Tensor, state: DecoderState, *, need_weights: bool = False) -> StepOutput:
        """Feed the next target token(s); return the logits of the last one.

        Shape:
            tokens ``(B, t)`` (usually ``t = 1``) → logits ``(B, V)``, cross weights ``(B, L, H, S)``
        """
        x = self.embed(self.tgt_embed, tokens, offset=state.length)  # (B, t, D)
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
