"""Captioning digit images with a trained captioner: :class:`ImageCaptioner` (images in, captions and
cross-attention out).

The captioning recipe (:mod:`attnlab.recipes.caption`) trains and loads captioners; this module
uses one, and holds the captions themselves (:data:`DIGIT_NAMES`).

Shape letters: ``B`` batch, ``P`` patches, ``T`` caption length, ``L`` layers, ``H`` heads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..decode import beam_search, check_beam, greedy_decode
from ..metrics import exact_match
from ..models.captioner import Captioner

Tensor = torch.Tensor

__all__ = ["DIGIT_NAMES", "Caption", "ImageCaptioner", "digit_names"]

#: The caption of each digit 0–9, per language.
DIGIT_NAMES: dict[str, list[str]] = {
    "en": ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"],
    "ja": ["れい", "いち", "に", "さん", "よん", "ご", "ろく", "なな", "はち", "きゅう"],
}


def digit_names(lang: str) -> list[str]:
    """The captions of the digits 0–9 in ``lang`` ("en" or "ja"); another language is a ValueError."""
    if lang not in DIGIT_NAMES:
        raise ValueError(f"caption language must be one of {sorted(DIGIT_NAMES)}, got {lang!r}")
    return DIGIT_NAMES[lang]


@dataclass
class Caption:
    text: str  # the generated caption
    tokens: list[str]  # generated tokens incl. the end token (one per attention row)
    cross_attention: Tensor | None = None  # (L, H, T, P) cross-attention of each generated token, if asked


class ImageCaptioner:
    """A trained :class:`~attnlab.models.captioner.Captioner` with its tokenizer: images in, captions out."""

    def __init__(self, model: Captioner, tokenizer, lang: str) -> None:
        self.model, self.tokenizer, self.lang = model, tokenizer, lang

    @torch.no_grad()
    def caption(self, images: Tensor, *, beam_size: int = 1, return_attention: bool = False) -> list[Caption]:
        """Caption a batch of images with greedy (``beam_size=1``) or beam search.

        Shape:
            images ``(B, 8, 8)`` → ``B`` captions; cross_attention ``(L, H, T, P)`` each
        """
        check_beam(beam_size, vocab_size=self.tokenizer.vocab_size)
        was_training = self.model.training
        self.model.eval()
        device = next(self.model.parameters()).device
        images = images.to(device)
        t = self.tokenizer
        kw = dict(
            bos_id=t.bos_id,
            eos_id=t.eos_id,
            pad_id=t.pad_id,
            max_len=self.model.config.max_len - 1,
            src_mask=self.model.patch_mask(images),
            return_attention=return_attention,
        )
        src = images.flatten(1)  # (B, C·H·W): the decoder protocol's 2-D source
        hyps = (
            greedy_decode(self.model, src, **kw)
            if beam_size == 1
            else beam_search(self.model, src, beam_size=beam_size, **kw)
        )
        self.model.train(was_training)
        out = []
        for h in hyps:
            labels = [t.id_to_token(i) for i in h.tokens] + [t.id_to_token(t.eos_id)]
            cross = h.cross_attention
            if cross is not None:
                labels = labels[: cross.shape[2]]
            out.append(Caption(t.decode(h.tokens), labels, cross))
        return out

    def evaluate(self, images: Tensor, labels: Sequence[int] | Tensor, *, beam_size: int = 1) -> dict[str, float]:
        """Exact match of the captions against the digit names of ``labels``."""
        names = digit_names(self.lang)
        hyps = [c.text for c in self.caption(images, beam_size=beam_size)]
        return {"exact_match": exact_match(hyps, [names[int(y)] for y in labels]), "n": len(hyps)}
