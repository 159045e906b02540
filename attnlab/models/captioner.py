"""Cross-modal attention: a Transformer decoder that writes what an image shows, looking at its patches.

    image ─ patches ─ linear ─ + learned positions ─ [self-attention → feed-forward] × L_enc ──► patch states
    caption tokens ─ embed·√D + learned positions ─ [causal self-attn → cross-attn(patch states) → feed-forward] × L_dec
                   ─ LayerNorm ─ linear (tied to the embedding) → next-token logits

The encoder is the Vision Transformer's (:class:`~attnlab.models.vit.PatchEmbedding` and
:class:`~attnlab.models.vit.PatchEncoder`, without [CLS]: the decoder reads every patch); the
decoder is the translator's :class:`~attnlab.layers.DecoderBlock`. The queries of the
cross-attention come from the text being written and its keys/values from the image patches — the
"cross-modal attention" of Xu et al. 2015 ("Show, Attend and Tell", §3.1.2, there over CNN
features), here with scaled dot-product attention. Each generated token's cross-attention is a
distribution over the patches, drawn on the image by
:func:`attnlab.viz.plot_image_attention`.

Decoding goes through the seq2seq protocol (:mod:`attnlab.models.seq2seq`), so
:mod:`attnlab.decode`'s greedy and beam search work unchanged: the "source" is the image flattened
to one row of pixels, and the source mask is over the *patches* (all real — an image has no
padding), built with :meth:`Captioner.patch_mask`::

    hyps = greedy_decode(model, images.flatten(1), src_mask=model.patch_mask(images), bos_id=..., eos_id=...)

Shape letters: ``B`` batch, ``C`` channels, ``P`` patches, ``T`` caption length, ``D`` width,
``H`` heads, ``L`` decoder layers, ``V`` vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from .. import functional as AF
from ..layers import DecoderBlock, KVCache
from ..positional import LearnedPositionalEmbedding
from .config import check_fields, preset_config
from .seq2seq import DecoderState, Seq2SeqOutput, StepOutput, token_cross_entropy
from .vit import PatchEmbedding, PatchEncoder, as_image_batch, check_geometry

Tensor = torch.Tensor

__all__ = ["CaptionerConfig", "PRESETS", "captioner_config", "Captioner"]


@dataclass
class CaptionerConfig:
    vocab_size: int  # caption vocabulary size V (incl. special tokens), from the tokenizer
    image_size: int = 8  # side of the square input image in pixels
    patch_size: int = 2  # side of a square patch; must divide image_size
    channels: int = 1  # colour channels C
    d_model: int = 64  # model width D
    n_heads: int = 4  # attention heads H
    n_encoder_layers: int = 2  # image encoder blocks
    n_decoder_layers: int = 2  # caption decoder blocks L
    d_ff: int = 128  # hidden width of the feed-forward nets
    dropout: float = 0.1  # on embeddings, attention weights and sub-layer outputs
    max_len: int = 16  # longest caption in tokens, BOS included (sizes the position table)
    pad_id: int = 0  # padding token id of the caption vocabulary
    model_type: str = "captioner"  # checkpoint tag used to rebuild the right class

    def __post_init__(self) -> None:
        check_fields(
            self,
            positive=(
                "vocab_size",
                "channels",
                "d_model",
                "n_heads",
                "n_encoder_layers",
                "n_decoder_layers",
                "d_ff",
                "max_len",
            ),
            fractions=("dropout",),
            ids={"pad_id": ("vocab_size",)},
            sizes=(
                ("vocab_size", "d_model"),
                ("max_len", "d_model"),
                ("image_size", "image_size", "d_model"),
                ("channels", "patch_size", "patch_size", "d_model"),
                ("n_encoder_layers", "d_model", "d_ff"),
                ("n_decoder_layers", "d_model", "d_ff"),
            ),
        )
        check_geometry(self.image_size, self.patch_size, self.d_model, self.n_heads)

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2


#: Named sizes. "tiny" is for tests; "digits" learns the digit names in a couple of minutes on a CPU.
PRESETS: dict[str, dict] = {
    "tiny": dict(d_model=32, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=64, dropout=0.0),
    "digits": dict(d_model=48, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=96, dropout=0.0),
}


def captioner_config(preset: str, **fields) -> CaptionerConfig:
    """A :class:`CaptionerConfig` from a named preset plus fields (``vocab_size``, ``patch_size``...)."""
    return preset_config(CaptionerConfig, PRESETS, preset, "captioner", **fields)


class Captioner(nn.Module):
    """Image encoder + caption decoder with cross-attention. See the module docstring.

    Shape:
        images ``(B, C, H, W)`` (or ``(B, H, W)``, ``(B, C·H·W)``); tgt_in ``(B, T)`` → logits ``(B, T, V)``
    """

    def __init__(self, config: CaptionerConfig) -> None:
        super().__init__()
        c = self.config = config
        self.patch_embed = PatchEmbedding(c.patch_size, c.channels, c.d_model)
        self.encoder = PatchEncoder(c.n_patches, c.d_model, c.n_heads, c.n_encoder_layers, c.d_ff, c.dropout)
        self.tgt_embed = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.tgt_positions = LearnedPositionalEmbedding(c.max_len, c.d_model)
        self.embed_dropout = nn.Dropout(c.dropout)
        self.decoder = nn.ModuleList(
            DecoderBlock(c.d_model, c.n_heads, c.d_ff, dropout=c.dropout, activation="gelu", norm="pre")
            for _ in range(c.n_decoder_layers)
        )
        self.decoder_norm = nn.LayerNorm(c.d_model)
        self.out_proj = nn.Linear(c.d_model, c.vocab_size, bias=False)
        nn.init.normal_(self.tgt_embed.weight, std=c.d_model**-0.5)
        nn.init.normal_(self.tgt_positions.embedding.weight, std=0.02)
        with torch.no_grad():
            self.tgt_embed.weight[c.pad_id].zero_()
        # Output projection = embedding matrix (Press & Wolf 2017; Vaswani et al. §3.4).
        self.out_proj.weight = self.tgt_embed.weight

    # -- pieces --------------------------------------------------------------------------------

    def patch_mask(self, images: Tensor) -> Tensor:
        """All patches are real: the source mask for :mod:`attnlab.decode`, built by the mask helper.

        Shape:
            images with batch size ``B`` → ``(B, P)`` boolean, all True
        """
        P = self.config.n_patches
        lengths = torch.full((images.shape[0],), P, dtype=torch.long, device=images.device)  # (B,)
        return AF.padding_mask(lengths, max_len=P)  # (B, P)

    def encode(self, images: Tensor, *, need_weights: bool = False) -> tuple[Tensor, list[Tensor]]:
        """Patch states the decoder attends to.

        Shape:
            images ``(B, C, H, W)`` → memory ``(B, P, D)``, encoder weights ``L_enc × (B, H, P, P)``
        """
        c = self.config
        images = as_image_batch(images, c.channels, c.image_size)  # (B, C, H, W)
        return self.encoder(self.patch_embed(images), need_weights=need_weights)  # (B, P, D)

    def _embed(self, tokens: Tensor, offset: int = 0) -> Tensor:
        x = self.tgt_embed(tokens) * math.sqrt(self.config.d_model)  # (B, T, D)
        return self.embed_dropout(self.tgt_positions(x, offset))

    def forward(
        self,
        images: Tensor,
        tgt_in: Tensor,
        *,
        tgt_mask: Tensor | None = None,
        labels: Tensor | None = None,
        need_weights: bool = False,
    ) -> Seq2SeqOutput:
        """Teacher-forced forward pass.

        Args:
            images: the images to describe.
            tgt_in: caption ids shifted right (starting with BOS), padded with ``pad_id``.
            tgt_mask: True = real caption token (default: ``tgt_in != pad_id``).
            labels: the next tokens (caption + EOS); padding positions are ignored in the loss.
            need_weights: also return the attention maps ("encoder", "decoder", "cross").

        Shape:
            images ``(B, C, H, W)``; tgt_in, labels ``(B, T)`` → logits ``(B, T, V)``,
            attentions["cross"] ``L × (B, H, T, P)``
        """
        if tgt_in.dim() != 2:
            raise ValueError(f"tgt_in must have shape (B, T), got {tuple(tgt_in.shape)}")
        if tgt_mask is None:
            tgt_mask = AF.padding_mask(tokens=tgt_in, pad_id=self.config.pad_id)  # (B, T)
        memory, enc_w = self.encode(images, need_weights=need_weights)  # (B, P, D)
        memory_mask = self.patch_mask(memory)  # (B, P)
        x = self._embed(tgt_in)  # (B, T, D)
        self_w, cross_w = [], []
        for block in self.decoder:
            x, sw, cw = block(
                x, memory, memory_padding_mask=memory_mask, target_padding_mask=tgt_mask, need_weights=need_weights
            )
            if need_weights:
                self_w.append(sw)
                cross_w.append(cw)
        logits = self.out_proj(self.decoder_norm(x))  # (B, T, V)
        loss = None if labels is None else token_cross_entropy(logits, labels, pad_id=self.config.pad_id)
        attentions = {"encoder": enc_w, "decoder": self_w, "cross": cross_w} if need_weights else None
        return Seq2SeqOutput(logits, loss, attentions)

    # -- incremental decoding (the protocol of attnlab.models.seq2seq) -----------------------

    def start(self, src: Tensor, src_mask: Tensor | None = None) -> DecoderState:
        """Encode the images once and project the patch states to every layer's cross-attention keys/values.

        ``src`` is a batch of images (flattened rows ``(B, C·H·W)`` as :mod:`attnlab.decode` passes
        them, or any shape :func:`~attnlab.models.vit.as_image_batch` accepts); ``src_mask`` is
        over the patches, :meth:`patch_mask` (the default).

        Shape:
            src ``(B, C·H·W)``; src_mask ``(B, P)`` → state with memory_kv ``L × 2 × (B, H, P, Dh)``
        """
        memory, _ = self.encode(src)  # (B, P, D)
        mask = self.patch_mask(memory) if src_mask is None else src_mask
        if mask.shape != memory.shape[:2]:
            raise ValueError(
                f"src_mask must be over the {self.config.n_patches} patches, shape {tuple(memory.shape[:2])}; "
                f"got {tuple(mask.shape)} (pass src_mask=model.patch_mask(images) to the decoder)"
            )
        memory_kv = [block.cross_attn.project_kv(memory) for block in self.decoder]
        return DecoderState(memory_kv, mask, [KVCache() for _ in self.decoder])

    def step(self, tokens: Tensor, state: DecoderState, *, need_weights: bool = False) -> StepOutput:
        """Feed the next caption token(s); return the logits of the last one.

        Shape:
            tokens ``(B, t)`` → logits ``(B, V)``, cross weights ``(B, L, H, P)`` of the newest position
        """
        if state.length + tokens.shape[1] > self.config.max_len:
            raise ValueError(f"caption longer than max_len={self.config.max_len} tokens")
        x = self._embed(tokens, offset=state.length)  # (B, t, D)
        cross = []
        for block, cache, kv in zip(self.decoder, state.caches, state.memory_kv):
            x, _, cw = block(
                x, memory_padding_mask=state.src_mask, need_weights=need_weights, memory_kv=kv, cache=cache
            )
            if need_weights:
                cross.append(cw[:, :, -1])  # (B, H, P)
        state.length += tokens.shape[1]
        logits = self.out_proj(self.decoder_norm(x[:, -1]))  # (B, V)
        return StepOutput(logits, torch.stack(cross, dim=1) if need_weights else None)  # (B, L, H, P)
