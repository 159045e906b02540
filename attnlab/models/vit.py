"""A small Vision Transformer (Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words").

    image ─ cut into P square patches ─ linear patch embedding ─ prepend [CLS] ─ + learned positions
          ─ [self-attention → feed-forward] × L ─ LayerNorm ─ [CLS] state ─ linear ─ logits

The image becomes a "sentence" of patches (§3.1, eq. 1): a patch of ``p × p`` pixels and ``C``
channels is flattened and linearly projected to width ``D``. A learned [CLS] vector is prepended
and its final state classifies the image (as BERT's [CLS]). Positions are learned, one vector per
token (§3.1: 2-D-aware position codes gave no gain). The blocks are attnlab's pre-norm
:class:`~attnlab.layers.EncoderBlock` (§3.1 uses pre-norm with a final LayerNorm).

Patches are numbered in raster order: patch ``r·(W/p) + c`` covers rows ``r·p … r·p + p - 1``
and columns ``c·p … c·p + p - 1``. Token 0 is [CLS]; token ``1 + i`` is patch ``i``.

What the [CLS] token attends to shows which parts of the image the classification reads:
:func:`cls_attention` gives that per layer and head, :func:`attention_rollout` (Abnar & Zuidema
2020) follows it through all layers.

The pieces (:func:`patchify`, :class:`PatchEmbedding`, :class:`PatchEncoder`) are shared with the
image captioner (:mod:`attnlab.models.captioner`), whose decoder cross-attends to the patch states.

Shape letters: ``B`` batch, ``C`` channels, ``P`` patches, ``N = 1 + P`` tokens, ``D`` width,
``H`` heads, ``L`` layers, ``K`` classes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..layers import EncoderBlock
from ..positional import LearnedPositionalEmbedding
from ..viz import ShowsAttention
from .config import check_fields, preset_config

Tensor = torch.Tensor

__all__ = [
    "ViTConfig",
    "PRESETS",
    "vit_config",
    "check_geometry",
    "as_image_batch",
    "patchify",
    "PatchEmbedding",
    "PatchEncoder",
    "ViTOutput",
    "ViT",
    "cls_attention",
    "attention_rollout",
]


@dataclass
class ViTConfig:
    image_size: int = 8  # side of the square input image in pixels (8 for scikit-learn's digits)
    patch_size: int = 2  # side of a square patch in pixels; must divide image_size
    channels: int = 1  # colour channels C (1: grey)
    n_classes: int = 10  # number of labels K
    d_model: int = 64  # model width D
    n_heads: int = 4  # attention heads H; D must be divisible by H
    n_layers: int = 3  # encoder blocks L
    d_ff: int = 128  # hidden width of the feed-forward nets
    dropout: float = 0.1  # on the embedded tokens, attention weights and sub-layer outputs
    model_type: str = "vit"  # checkpoint tag used to rebuild the right class

    def __post_init__(self) -> None:
        check_fields(
            self,
            positive=("channels", "d_model", "n_heads", "n_layers", "d_ff"),
            fractions=("dropout",),
            sizes=(
                ("image_size", "image_size", "d_model"),
                ("channels", "patch_size", "patch_size", "d_model"),
                ("n_layers", "d_model", "d_ff"),
                ("n_classes", "d_model"),
            ),
        )
        check_geometry(self.image_size, self.patch_size, self.d_model, self.n_heads)
        if self.n_classes < 2:
            raise ValueError(f"n_classes must be ≥ 2, got {self.n_classes}")

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2


def check_geometry(image_size: int, patch_size: int, d_model: int, n_heads: int) -> None:
    """Raise ``ValueError`` unless the patches tile the image and the width splits into the heads.

    Shared by the configs of every model with a patch encoder (ViT, the captioner).
    """
    if image_size < 1 or patch_size < 1:
        raise ValueError(f"image_size and patch_size must be ≥ 1, got {image_size} and {patch_size}")
    if image_size % patch_size:
        raise ValueError(f"patch_size={patch_size} does not divide image_size={image_size}")
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")


#: Named sizes. "tiny" is for tests; "digits" is sized for scikit-learn's 8×8 digits (1,257 training
#: images): wider or deeper models, or dropout, trained more slowly there for no gain in accuracy.
PRESETS: dict[str, dict] = {
    "tiny": dict(d_model=32, n_heads=2, n_layers=1, d_ff=64, dropout=0.0),
    "digits": dict(d_model=48, n_heads=4, n_layers=2, d_ff=96, dropout=0.0),
}


def vit_config(preset: str, **fields) -> ViTConfig:
    """A :class:`ViTConfig` from a named preset plus fields (``patch_size``, ``n_classes``...)."""
    return preset_config(ViTConfig, PRESETS, preset, "ViT", **fields)


def as_image_batch(images: Tensor, channels: int, image_size: int) -> Tensor:
    """Accept ``(B, H, W)`` (grey), ``(B, C, H, W)`` or flattened ``(B, C·H·W)`` images.

    Shape:
        images as above → ``(B, C, H, W)`` floating point
    """
    if not isinstance(images, Tensor) or not images.is_floating_point():
        raise TypeError("images must be a floating-point torch.Tensor (pixel intensities)")
    B = images.shape[0]
    if images.dim() == 2 and images.shape[1] == channels * image_size * image_size:
        return images.view(B, channels, image_size, image_size)  # (B, C·H·W) -> (B, C, H, W)
    if images.dim() == 3 and channels == 1:
        images = images.unsqueeze(1)  # (B, H, W) -> (B, 1, H, W)
    if images.dim() != 4 or images.shape[1:] != (channels, image_size, image_size):
        raise ValueError(
            f"images must have shape (B, {channels}, {image_size}, {image_size}), (B, {image_size}, {image_size}) "
            f"for grey, or (B, {channels * image_size * image_size}) flattened; got {tuple(images.shape)}"
        )
    return images


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """Cut images into non-overlapping square patches, in raster order, each flattened.

    Shape:
        images ``(B, C, H, W)`` → ``(B, P, C·p·p)`` with ``P = (H/p)·(W/p)``
    """
    B, C, Hi, Wi = images.shape
    if Hi % patch_size or Wi % patch_size:
        raise ValueError(f"patch_size={patch_size} does not divide the image size {Hi}×{Wi}")
    p = patch_size
    x = images.unfold(2, p, p).unfold(3, p, p)  # (B, C, H/p, W/p, p, p)
    x = x.permute(0, 2, 3, 1, 4, 5)  # (B, H/p, W/p, C, p, p)
    return x.reshape(B, (Hi // p) * (Wi // p), C * p * p)  # (B, P, C·p·p)


class PatchEmbedding(nn.Module):
    """Flatten each patch and project it linearly to width ``D`` (Dosovitskiy et al. §3.1, eq. 1).

    Shape:
        images ``(B, C, H, W)`` → ``(B, P, D)``
    """

    def __init__(self, patch_size: int, channels: int, d_model: int) -> None:
        super().__init__()
        self.patch_size = patch_size
        self.patch_proj = nn.Linear(channels * patch_size * patch_size, d_model)

    def forward(self, images: Tensor) -> Tensor:
        return self.patch_proj(patchify(images, self.patch_size))  # (B, P, D)


class PatchEncoder(nn.Module):
    """Learned positions + pre-norm encoder blocks + final LayerNorm over a sequence of ``N`` tokens.

    Every token attends to every token (an image has no padding), so there is no mask.

    Shape:
        tokens ``(B, N, D)`` → hidden ``(B, N, D)``, weights ``L × (B, H, N, N)`` when asked
    """

    def __init__(self, n_tokens: int, d_model: int, n_heads: int, n_layers: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.positions = LearnedPositionalEmbedding(n_tokens, d_model)
        nn.init.normal_(self.positions.embedding.weight, std=0.02)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            EncoderBlock(d_model, n_heads, d_ff, dropout=dropout, activation="gelu", norm="pre")
            for _ in range(n_layers)
        )
        self.final_norm = nn.LayerNorm(d_model)

    def forward(self, tokens: Tensor, *, need_weights: bool = False) -> tuple[Tensor, list[Tensor]]:
        x = self.dropout(self.positions(tokens))  # (B, N, D)
        weights = []
        for block in self.blocks:
            x, w, _ = block(x, need_weights=need_weights)
            if need_weights:
                weights.append(w)  # (B, H, N, N)
        return self.final_norm(x), weights


@dataclass
class ViTOutput(ShowsAttention):  # attentions: AttentionMaps; shows itself in Jupyter
    logits: Tensor  # (B, K)
    loss: Tensor | None  # mean cross-entropy when labels were given
    attentions: list[Tensor] | None = None  # L × (B, H, N, N) self-attention, token 0 = [CLS], if asked


class ViT(nn.Module):
    """Vision Transformer classifier. See the module docstring.

    Shape:
        images ``(B, C, H, W)``, ``(B, H, W)`` or ``(B, C·H·W)``; labels ``(B,)`` → logits ``(B, K)``
    """

    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        c = self.config = config
        self.patch_embed = PatchEmbedding(c.patch_size, c.channels, c.d_model)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c.d_model))
        self.encoder = PatchEncoder(1 + c.n_patches, c.d_model, c.n_heads, c.n_layers, c.d_ff, c.dropout)
        self.head = nn.Linear(c.d_model, c.n_classes)

    def forward(self, images: Tensor, *, labels: Tensor | None = None, need_weights: bool = False) -> ViTOutput:
        """Classify images; with ``need_weights`` also return every layer's attention.

        Shape:
            images ``(B, C, H, W)``; labels ``(B,)`` → logits ``(B, K)``, attentions ``L × (B, H, 1+P, 1+P)``
        """
        c = self.config
        images = as_image_batch(images, c.channels, c.image_size)  # (B, C, H, W)
        patches = self.patch_embed(images)  # (B, P, D)
        cls = self.cls_token.expand(patches.shape[0], 1, c.d_model)  # (B, 1, D)
        hidden, weights = self.encoder(torch.cat([cls, patches], dim=1), need_weights=need_weights)  # (B, 1+P, D)
        logits = self.head(hidden[:, 0])  # (B, K)
        loss = None if labels is None else F.cross_entropy(logits, labels)
        return ViTOutput(logits, loss, weights if need_weights else None)


def cls_attention(attentions: list[Tensor]) -> Tensor:
    """What the [CLS] token attends to, per layer and head (its row of each attention map).

    Column 0 is [CLS] itself, columns ``1 …`` the patches; each row sums to 1.

    Shape:
        attentions ``L × (B, H, N, N)`` → ``(B, L, H, N)``
    """
    if not attentions:
        raise ValueError("no attention maps: run the model with need_weights=True")
    return torch.stack([w[:, :, 0, :] for w in attentions], dim=1)  # (B, L, H, N)


def attention_rollout(attentions: list[Tensor]) -> Tensor:
    """Attention rollout (Abnar & Zuidema 2020, §3): how much each input token reaches each output.

    Each layer's head-averaged map is mixed with the identity for the residual connection,
    ``Â = ½·A + ½·I``, and the layers are multiplied, ``R = Â_L ⋯ Â_1``. Row ``i`` of ``R`` is
    a distribution over the input tokens (every ``Â`` is row-stochastic), so row 0 says which
    patches the [CLS] output is made of, through all layers.

    Shape:
        attentions ``L × (B, H, N, N)`` → ``(B, N, N)``
    """
    if not attentions:
        raise ValueError("no attention maps: run the model with need_weights=True")
    N = attentions[0].shape[-1]
    eye = torch.eye(N, dtype=attentions[0].dtype, device=attentions[0].device)  # (N, N)
    rollout = eye.expand(attentions[0].shape[0], N, N)  # (B, N, N)
    for w in attentions:
        mixed = 0.5 * w.mean(dim=1) + 0.5 * eye  # (B, N, N), rows sum to 1
        rollout = mixed @ rollout  # (B, N, N) x (B, N, N) -> (B, N, N)
    return rollout
