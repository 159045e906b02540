"""§4 Self-attention and source–target attention: where MiniLM's pronoun looks.

The section's first widget (the translator's encoder self-attention beside its source–target
attention) is computed in the page (``static/engine/translation_views.js``; its reference is §1's
``translation_view``). This module holds
:func:`pronoun_view`, the reference of the page's ``pronounView`` (``static/engine/bert.js``, which
reads MiniLM's maps from the site's ``models/minilm`` folder): the row of one token (the pronoun) in every attention map of MiniLM,
every layer and head, and for each token the head that gives it the largest weight. The page's
note quotes these numbers for "…because it was too tired" and "…too wide"
(``tests/web/lesson/test_lesson_s04_s07.py`` checks they stay true).

The letters: L layers, H heads, S tokens ([CLS] and [SEP] included).
"""

from __future__ import annotations

import torch
from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from .common import (
    MAX_MINILM_TOKENS,
    LessonModels,
    english_sentence,
    rounded,
)


class PronounRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = english_sentence()
    pronoun: str = Field(
        "it", min_length=1, max_length=30, strict=True, description="the token whose attention is shown"
    )


class Strongest(BaseModel):
    layer: int
    head: int
    weight: float


class PronounResponse(BaseModel):
    model: str
    tokens: list[str]
    pronoun: int = Field(description="position of the pronoun (its first occurrence)")
    n_layers: int
    n_heads: int
    weights: list[list[list[float]]] = Field(description="(L, H, S) each head's weights from the pronoun")
    mean: list[list[float]] = Field(description="(L, S) the mean over heads")
    strongest: list[Strongest] = Field(description="per token: the layer and head that give it the most weight")


@torch.inference_mode()
def pronoun_view(model, req: PronounRequest) -> PronounResponse:
    """The row of the pronoun in every attention map of MiniLM (every layer, every head).

    Shape:
        weights ``(L, H, S)``: ``weights[l, h, j]`` = how much the pronoun attends to token ``j``
    """
    from ...models.bert import encode_with_masks

    tok = model.tokenizer
    bert = getattr(model.model, "bert", model.model)
    ids = encode_with_masks(tok, req.text)
    if len(ids) <= 2:
        raise ValueError(f"cannot encode {req.text!r}: it has no tokens")
    if len(ids) > MAX_MINILM_TOKENS:
        raise ValueError(f"the sentence has {len(ids)} tokens; this view shows at most {MAX_MINILM_TOKENS}")
    tokens = [tok.id_to_token(i) for i in ids]
    wanted = req.pronoun.strip().lower()
    if wanted not in tokens:
        shown = ", ".join(tokens[1:-1])
        raise ValueError(f"{req.pronoun!r} is not one of the sentence's tokens ({shown})")
    at = tokens.index(wanted)
    out = bert(torch.tensor([ids]), need_weights=True)
    weights = torch.stack([w[0, :, at] for w in out.attentions])  # L × (1, H, S, S) -> (L, H, S)
    L, H, S = weights.shape
    flat = weights.reshape(L * H, S)  # (L·H, S)
    best = flat.argmax(dim=0)  # (S,)
    strongest = [
        Strongest(layer=int(b) // H, head=int(b) % H, weight=round(float(flat[b, j]), 5)) for j, b in enumerate(best)
    ]
    return PronounResponse(
        model=model.name,
        tokens=tokens,
        pronoun=at,
        n_layers=L,
        n_heads=H,
        weights=rounded(weights, 5),
        mean=rounded(weights.mean(dim=1), 5),
        strongest=strongest,
    )


def add_routes(router: APIRouter, models: LessonModels, gate) -> None:
    """§4's endpoints: none of its own. The translation view it shares with §1 is registered there;
    the pronoun is computed in the page (``static/engine/bert.js``), :func:`pronoun_view` is its
    reference."""
