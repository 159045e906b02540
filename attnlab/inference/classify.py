"""Classifying text with a trained attention-pooling classifier: :class:`TextClassifier` (texts in,
labels, probabilities and each token's pooling weight out).

The text-classification recipe (:mod:`attnlab.recipes.classify`) trains and loads classifiers;
this module uses one, and owns how texts become a batch (:func:`encode_texts`,
:func:`collate_texts`), which training shares.

Shape letters: ``B`` batch, ``S`` tokens, ``C`` classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..functional import padding_mask
from ..models.classifier import AttentionPoolClassifier

Tensor = torch.Tensor

__all__ = ["ClassBatch", "Prediction", "TextClassifier", "collate_texts", "encode_texts"]


@dataclass
class ClassBatch:
    """Padded token ids with their labels.

    Shape:
        input_ids ``(B, S)`` int64; mask ``(B, S)`` bool (True = real token); labels ``(B,)`` int64
    """

    input_ids: Tensor  # (B, S) padded with pad_id
    mask: Tensor  # (B, S) True at real tokens
    labels: Tensor  # (B,) class indices

    def to(self, device: torch.device | str) -> ClassBatch:
        return ClassBatch(self.input_ids.to(device), self.mask.to(device), self.labels.to(device))


def collate_texts(ids: Sequence[list[int]], labels: Sequence[int], pad_id: int) -> ClassBatch:
    """Token ids padded into one batch with their labels.

    Shape:
        ``B`` id lists → input_ids ``(B, S)``, mask ``(B, S)``, labels ``(B,)``
    """
    lengths = torch.tensor([len(x) for x in ids])  # (B,)
    S = int(lengths.max())
    input_ids = torch.tensor([list(x) + [pad_id] * (S - len(x)) for x in ids], dtype=torch.long)  # (B, S)
    return ClassBatch(input_ids, padding_mask(lengths, max_len=S), torch.tensor(list(labels), dtype=torch.long))


def encode_texts(tok, texts: Sequence[str], max_len: int) -> list[list[int]]:
    """Each text as token ids, cut to ``max_len``; a text with no tokens is a ValueError.

    Shape:
        N texts → N id lists of at most ``max_len``
    """
    encoded = [ids[:max_len] for ids in tok.encode_batch(list(texts))]
    for text, ids in zip(texts, encoded):
        if not ids:
            raise ValueError(f"cannot classify {text!r}: it has no tokens")
    return encoded


@dataclass
class Prediction:
    text: str  # the input text
    label: str  # the most probable label
    probs: dict[str, float]  # label → probability
    tokens: list[str]  # the tokens the model read (after cutting to max_len)
    weights: list[float]  # pooling weight of each token; they sum to 1

    def _repr_html_(self) -> str:
        """Jupyter: the label and probabilities, then each token shaded by its pooling weight."""
        from html import escape

        probs = ", ".join(f"{escape(k)} {p:.2f}" for k, p in sorted(self.probs.items(), key=lambda kv: -kv[1]))
        top = max(self.weights, default=0.0) or 1.0
        spans = "".join(
            f'<span style="background-color:rgba(43,93,156,{0.85 * w / top:.3f});color:{"white" if w / top > 0.6 else "black"};'
            f'padding:1px 3px;margin:1px;display:inline-block" title="{w:.3f}">{escape(t)}<sub>{w:.2f}</sub></span>'
            for t, w in zip(self.tokens, self.weights)
        )
        return f"<div><b>{escape(self.label)}</b> ({probs})</div><div>{spans}</div>"


class TextClassifier:
    """A trained attention-pooling classifier with its tokenizer and label names."""

    def __init__(self, model: AttentionPoolClassifier, tokenizer, labels: Sequence[str], *, max_len: int) -> None:
        self.model, self.tokenizer, self.labels, self.max_len = model, tokenizer, list(labels), max_len

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @torch.no_grad()
    def predict(self, texts: Sequence[str], *, batch_size: int = 64) -> list[Prediction]:
        """Labels, probabilities and per-token pooling weights for each text."""
        if isinstance(texts, str):
            raise TypeError("predict takes a list of texts, not one string")
        was_training = self.model.training
        self.model.eval()
        encoded = encode_texts(self.tokenizer, texts, self.max_len)
        results: list[Prediction] = []
        for start in range(0, len(encoded), batch_size):
            chunk = encoded[start : start + batch_size]
            b = collate_texts(chunk, [0] * len(chunk), self.tokenizer.pad_id).to(self.device)
            out = self.model(b.input_ids, b.mask)
            probs = torch.softmax(out.logits.float(), dim=-1).cpu()  # (B, C)
            weights = out.pool_weights.float().cpu()  # (B, S)
            for row, ids in enumerate(chunk):
                text = texts[start + row]
                results.append(
                    Prediction(
                        text=text,
                        label=self.labels[int(probs[row].argmax())],
                        probs={name: float(p) for name, p in zip(self.labels, probs[row])},
                        tokens=[self.tokenizer.id_to_token(i) for i in ids],
                        weights=weights[row, : len(ids)].tolist(),
                    )
                )
        self.model.train(was_training)
        return results

    def evaluate(self, pairs: Sequence[tuple[str, str]]) -> dict[str, float]:
        """Accuracy on ``(label, text)`` pairs, overall and per label (``accuracy/<label>``)."""
        if not pairs:
            raise ValueError("nothing to evaluate: no pairs")
        preds = self.predict([t for _, t in pairs])
        scores = {"accuracy": sum(p.label == y for p, (y, _) in zip(preds, pairs)) / len(pairs), "n": len(pairs)}
        for label in self.labels:
            idx = [i for i, (y, _) in enumerate(pairs) if y == label]
            if idx:
                scores[f"accuracy/{label}"] = sum(preds[i].label == label for i in idx) / len(idx)
        return scores
