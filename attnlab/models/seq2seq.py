"""The sequence-to-sequence contract: what every encoder–decoder returns, and what decoding needs.

attnlab has four encoder–decoders: the Transformer (:mod:`attnlab.models.transformer`), the RNN
translators (:mod:`attnlab.models.rnn_seq2seq`), the image captioner
(:mod:`attnlab.models.captioner`) and the pointer-generator (:mod:`attnlab.models.pointer_generator`).
They agree on three things, all defined here:

- **The teacher-forced output**, :class:`Seq2SeqOutput`: logits for every target position, the
  loss when labels are given, and the attention maps when asked.
- **The decoding protocol**, :class:`Seq2SeqModel` and :class:`Seq2SeqState`: all that
  :func:`attnlab.decode.greedy_decode` and :func:`attnlab.decode.beam_search` use of a model::

      state = model.start(src, src_mask)                  # encode the source once
      out = model.step(tokens, state, need_weights=...)   # StepOutput: next-token logits (+ cross weights)
      state.reorder(index)                                # keep these rows (beam search)

  The search code knows nothing else about a model's insides; a model's state carries whatever
  its decoder needs (key/value caches for a Transformer, the recurrent state for an RNN). A state
  may also have ``expand(beam_size)``, which beam search calls instead of copying each sentence's
  state to its beams by ``reorder``: :class:`DecoderState` keeps the source side once per sentence.
  :class:`DecoderState` is the state of the Transformer decoders (the Transformer's and the
  captioner's).
- **The loss**: the mean over the target positions whose label is not padding. Models whose
  logits go through one softmax use :func:`token_cross_entropy` (with optional label
  smoothing); the pointer-generator, whose output is already a (mixed) distribution, scores
  ``−log P`` itself and averages it with :func:`mean_over_targets`, the same reduction.

Shape letters: ``B`` batch, ``S`` source length, ``T`` target length, ``V`` vocabulary,
``L`` layers, ``H`` heads, ``Dh`` head width.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, TypeVar, runtime_checkable

import torch
import torch.nn.functional as F

from ..layers import KVCache
from ..viz import ShowsAttention

Tensor = torch.Tensor

__all__ = [
    "Seq2SeqOutput",
    "StepOutput",
    "Seq2SeqState",
    "Seq2SeqModel",
    "DecoderState",
    "token_cross_entropy",
    "mean_over_targets",
]


@dataclass
class Seq2SeqOutput(ShowsAttention):  # attentions: AttentionMaps; shows itself in Jupyter
    """The teacher-forced forward pass of an encoder–decoder.

    Shape:
        logits ``(B, T, V)``; attentions ``"encoder"``: L × ``(B, H, S, S)``, ``"decoder"``:
        L × ``(B, H, T, T)``, ``"cross"``: L × ``(B, H, T, S)`` (a model without some of these
        leaves the key out or the list empty)
    """

    logits: Tensor  # (B, T, V) next-token scores at every target position
    loss: Tensor | None = None  # the training loss, averaged over the non-padding target tokens
    # "encoder": L × (B, H, S, S); "decoder": L × (B, H, T, T); "cross": L × (B, H, T, S)
    attentions: dict[str, list[Tensor]] | None = None


@dataclass
class StepOutput:
    """One decoding step: the scores of the next token, and where the new position looked.

    Shape:
        logits ``(B, V)``; cross_weights ``(B, L, H, S)`` or ``None``
    """

    logits: Tensor  # (B, V) next-token logits (or log-probabilities: decode applies log_softmax)
    cross_weights: Tensor | None  # (B, L, H, S) cross-attention of the new position, if asked


@runtime_checkable
class Seq2SeqState(Protocol):
    """What beam search needs of a decoder state: to follow the hypotheses it keeps.

    Shape:
        index ``(B',)`` row numbers → every batched tensor of the state becomes batch ``B'``
    """

    def reorder(self, index: Tensor) -> None:
        """Keep rows ``index`` (in that order, repeats allowed), in place."""
        ...


StateT = TypeVar("StateT", bound=Seq2SeqState)


@runtime_checkable
class Seq2SeqModel(Protocol[StateT]):
    """The decoding protocol: what :mod:`attnlab.decode`'s greedy and beam search use of a model.

    ``start`` encodes the source once; ``step`` advances every row by the given token(s),
    updating the state in place (its caches grow by one position per token), and returns the
    logits of the last one. ``step`` may return normalised log-probabilities instead of logits
    (the pointer-generator does): the search applies ``log_softmax``, which leaves them unchanged.

    Shape:
        start: src ``(B, S)``, src_mask ``(B, S)`` True = real source token (default: not
        padding) → state; step: tokens ``(B, t)`` (``t = 1`` when decoding) → logits ``(B, V)``,
        cross_weights ``(B, L, H, S)`` when ``need_weights`` (``None`` for a model without
        attention)
    """

    def start(self, src: Tensor, src_mask: Tensor | None = None) -> StateT:
        """Encode the source; return the state decoding starts from."""
        ...

    def step(self, tokens: Tensor, state: StateT, *, need_weights: bool = False) -> StepOutput:
        """Feed the next target token(s) of every row; return the next-token scores."""
        ...


@dataclass
class DecoderState:
    """The state of a Transformer decoder from one generated token to the next.

    The encoder output is projected to each layer's cross-attention keys/values once (they do not
    change while decoding); each layer's self-attention keys/values grow in a :class:`KVCache`.

    The source side is stored once per sentence, the decoder side once per row: after
    :meth:`expand` (beam search) each sentence has ``beams`` consecutive decoder rows, which the
    cross-attention runs as the query rows of one attention over the sentence's keys/values.

    Shape:
        memory_kv L × 2 × ``(N, H, S, Dh)``; src_mask ``(N, S)``; caches
        L × ``(N·beams, H, length, Dh)`` (``N`` sentences)
    """

    memory_kv: list[tuple[Tensor, Tensor]]  # per layer: cross-attention keys/values (N, H, S, Dh)
    src_mask: Tensor  # (N, S) True = real source token
    caches: list[KVCache] = field(default_factory=list)  # per layer: decoder self-attention cache
    length: int = 0  # target positions decoded so far
    beams: int = 1  # decoder rows per sentence: rows b·beams … b·beams + beams − 1 decode sentence b

    def expand(self, beam_size: int) -> None:
        """Give every sentence ``beam_size`` decoder rows, copies of its one row (the start of beam
        search); the source keys/values stay one per sentence.

        Shape:
            caches ``(N, H, length, Dh)`` → ``(N·beam_size, H, length, Dh)``
        """
        if self.beams != 1:
            raise ValueError(f"this state already has {self.beams} rows per sentence")
        if self.length:
            rows = torch.arange(self.src_mask.shape[0], device=self.src_mask.device).repeat_interleave(beam_size)
            for c in self.caches:
                self.reorder_cache(c, rows)
        self.beams = beam_size

    def reorder_cache(self, cache: KVCache, index: Tensor) -> None:
        """Keep rows ``index`` of one layer's cache (:meth:`KVCache.reorder`); an engine's state
        may copy them its own way.

        Shape:
            index ``(B',)`` → the cache's batch dimension becomes ``B'``
        """
        cache.reorder(index)

    def reorder(self, index: Tensor) -> None:
        """Keep decoder rows ``index`` (greedy decoding drops finished rows, beam search moves
        hypotheses between rows).

        With one row per sentence the sentences follow ``index``. After :meth:`expand`, ``index``
        must come in groups of ``beams`` rows of one sentence, in the sentences' order, as beam
        search's are (it permutes the beams of each sentence and drops finished sentences): the
        source side then only changes when sentences are dropped.

        Shape:
            index ``(B',)`` → the decoder's batch dimension becomes ``B'``; the source's
            ``B' / beams``
        """
        for c in self.caches:
            self.reorder_cache(c, index)
        K = self.beams
        if K == 1:
            sentences = index
        elif index.shape[0] // K != self.src_mask.shape[0]:
            sentences = index[::K] // K  # (B' / K,) the sentence of each group
        else:
            return  # the same sentences: beams only moved within their own
        self.memory_kv = [(k.index_select(0, sentences), v.index_select(0, sentences)) for k, v in self.memory_kv]
        self.src_mask = self.src_mask.index_select(0, sentences)


def token_cross_entropy(logits: Tensor, labels: Tensor, *, pad_id: int, label_smoothing: float = 0.0) -> Tensor:
    """Mean cross-entropy of the next-token logits over the target positions that are not padding.

    Positions whose label is ``pad_id`` count neither in the sum nor in the mean. With
    ``label_smoothing`` ε the target is ``1 − ε`` on the label plus ``ε`` spread evenly over the
    vocabulary (Szegedy et al. 2016, §7; ε = 0.1 in Vaswani et al. 2017, §5.4).

    Shape:
        logits ``(B, T, V)``, labels ``(B, T)`` → scalar
    """
    if labels.shape != logits.shape[:-1]:
        raise ValueError(
            f"labels must have shape {tuple(logits.shape[:-1])} (the logits' without V), got {tuple(labels.shape)}"
        )
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),  # (B·T, V)
        labels.reshape(-1),  # (B·T,)
        ignore_index=pad_id,
        label_smoothing=label_smoothing,
    )


def mean_over_targets(values: Tensor, labels: Tensor, *, pad_id: int) -> Tensor:
    """Average per-position loss terms over the target positions that are not padding.

    The reduction of :func:`token_cross_entropy`, for losses computed elsewhere (the
    pointer-generator's ``−log P(w*)`` and coverage terms). A batch of padding only gives 0
    (:func:`token_cross_entropy` gives NaN there: an empty mean).

    Shape:
        values ``(B, T)``, labels ``(B, T)`` → scalar
    """
    if values.shape != labels.shape:
        raise ValueError(
            f"values and labels must have the same shape, got {tuple(values.shape)} and {tuple(labels.shape)}"
        )
    real = labels != pad_id  # (B, T)
    return (values * real).sum() / real.sum().clamp(min=1)
