"""RNN encoder–decoders, with and without attention: the models attention was invented for.

The lesson's §3: a Seq2Seq model reads the source with one RNN (the encoder) and writes the
target with another (the decoder). Without attention the decoder gets *one fixed-length vector*
— the encoder's final state — however long the sentence is: the bottleneck. With attention it
looks back at every encoder state at every output step.

    source ─ embed ─ GRU/LSTM (bi-directional: each direction D/2 wide) ──► memory (B, S, D)
                                                                      └──► final state
    attention="none"      (Cho et al. 2014; Bahdanau's RNNencdec):
        c = top layer of the final state, the same for every step (no other path from the encoder)
        s_i = RNN([E y_{i-1}; c], s_{i-1});  readout_i = tanh(W_o [s_i; c; E y_{i-1}])
    attention="additive"  (Bahdanau, Cho & Bengio 2015, §3.1; RNNsearch):
        c_i = Σ_j α_ij h_j,  α_i = softmax_j(vᵀ tanh(W s_{i-1} + U h_j))   (before the RNN step)
        s_i = RNN([E y_{i-1}; c_i], s_{i-1});  readout_i = tanh(W_o [s_i; c_i; E y_{i-1}])
    attention="dot" | "general" | "local"  (Luong, Pham & Manning 2015, §3):
        h_t = RNN([E y_{t-1}; h̃_{t-1}], h_{t-1})            (input feeding, §3.3)
        c_t = attention(h_t, memory)                         (after the RNN step)
        h̃_t = tanh(W_c [c_t; h_t]) = readout_t
    logits = out_proj(readout)   (out_proj may share the target embedding, Press & Wolf 2017)

Every variant starts the decoder from the encoder's final state (both directions concatenated,
layer by layer).

Decoding uses the protocol of :mod:`attnlab.models.seq2seq` (what :mod:`attnlab.decode` searches
with): :meth:`RNNSeq2Seq.start` encodes once,
:meth:`RNNSeq2Seq.step` advances one token (cross weights ``(B, 1, 1, S)``, or ``None`` for
``attention="none"``), and :meth:`RNNDecoderState.reorder` follows beam search.

Shape:
    ``B`` batch, ``S`` source length, ``T`` target length, ``E`` embedding width, ``D`` hidden
    width (= memory width), ``A`` additive-attention width, ``L`` layers, ``V`` vocabulary.
    src ``(B, S)``, tgt_in ``(B, T)`` → logits ``(B, T, V)``, cross attention ``(B, 1, T, S)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .. import functional as AF
from ..layers import AdditiveAttention
from .config import check_fields
from .seq2seq import Seq2SeqOutput, StepOutput, token_cross_entropy

Tensor = torch.Tensor

__all__ = [
    "ATTENTION_KINDS",
    "CELLS",
    "RNNSeq2SeqConfig",
    "PRESETS",
    "RNNSeq2Seq",
    "RNNEncoder",
    "EncoderOutput",
    "RNNDecoderState",
    "AttentionStep",
    "BahdanauAttention",
    "DotAttention",
    "GeneralAttention",
    "LocalPAttention",
    "FixedContextDecoder",
    "AdditiveDecoder",
    "LuongDecoder",
    "RNNState",
    "recurrent_layer",
    "to_torch_state",
    "from_torch_state",
    "masked_softmax",
]

ATTENTION_KINDS = ("none", "additive", "dot", "general", "local")
CELLS = ("gru", "lstm")


@dataclass
class RNNSeq2SeqConfig:
    src_vocab_size: int  # source vocabulary size (incl. special tokens)
    tgt_vocab_size: int  # target vocabulary size (equal to src with a joint vocabulary)
    cell: str = "gru"  # recurrent cell: "gru" (Cho et al. 2014) or "lstm" (Hochreiter & Schmidhuber 1997)
    attention: str = "additive"  # "none" (fixed-vector bottleneck), "additive", "dot", "general", "local"
    embed_dim: int = 256  # token embedding width E (also the readout width, so out_proj can be tied)
    hidden_size: int = 256  # decoder state width D = encoder output width (bi-directional: D/2 per direction)
    n_layers: int = 1  # stacked RNN layers, in the encoder and in the decoder
    bidirectional: bool = True  # the encoder reads the source both ways (Bahdanau §3.2)
    attn_dim: int = 256  # hidden width A of the additive scorer vᵀ tanh(W s + U h)
    local_window: int = 4  # D of Luong's local-p: the window is [p_t − D, p_t + D], σ = D/2 (§3.2)
    dropout: float = 0.1  # on embeddings, between stacked RNN layers and on the readout
    share_embeddings: bool = False  # one embedding for source and target (joint vocabulary)
    tie_output: bool = True  # output projection = target embedding matrix (Press & Wolf 2017)
    pad_id: int = 0  # padding token id in both vocabularies
    model_type: str = "rnn"  # checkpoint tag used to rebuild the right class

    def __post_init__(self) -> None:
        _check_config(self)


#: Named sizes, with the same names as the Transformer's so every translation recipe works with
#: ``--arch rnn``. "demo" has about as many parameters as the Transformer "demo" preset on the
#: character-level numbers task (~0.7 M); "base" follows Bahdanau et al. 2015 (620-wide
#: embeddings, 1000 hidden units, 1000-wide alignment model).
PRESETS: dict[str, dict] = {
    "tiny": dict(embed_dim=32, hidden_size=32, attn_dim=32, n_layers=1, dropout=0.0),
    "demo": dict(embed_dim=192, hidden_size=192, attn_dim=192, n_layers=1, dropout=0.1),
    "small": dict(embed_dim=256, hidden_size=512, attn_dim=256, n_layers=2, dropout=0.2),
    "multi30k": dict(embed_dim=256, hidden_size=512, attn_dim=256, n_layers=2, dropout=0.3, share_embeddings=True),
    "base": dict(embed_dim=620, hidden_size=1000, attn_dim=1000, n_layers=1, dropout=0.2),
}


def _check_config(c: RNNSeq2SeqConfig) -> None:
    sizes = ("src_vocab_size", "tgt_vocab_size", "embed_dim", "hidden_size", "n_layers", "attn_dim", "local_window")
    for name in sizes:
        value = getattr(c, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    check_fields(
        c,
        fractions=("dropout",),
        ids={"pad_id": ("src_vocab_size", "tgt_vocab_size")},
        sizes=(
            ("src_vocab_size", "embed_dim"),
            ("tgt_vocab_size", "embed_dim"),
            ("n_layers", "hidden_size", "hidden_size"),
            ("embed_dim", "hidden_size"),
            ("hidden_size", "attn_dim"),
        ),
    )
    if c.cell not in CELLS:
        raise ValueError(f"unknown RNN cell {c.cell!r}; choose from {list(CELLS)}")
    if c.attention not in ATTENTION_KINDS:
        raise ValueError(f"unknown attention {c.attention!r}; choose from {list(ATTENTION_KINDS)}")
    if c.bidirectional and c.hidden_size % 2:
        raise ValueError(
            f"a bidirectional encoder splits hidden_size in two halves; got odd hidden_size={c.hidden_size}"
        )
    if c.share_embeddings and c.src_vocab_size != c.tgt_vocab_size:
        raise ValueError(
            f"share_embeddings needs one vocabulary, got src {c.src_vocab_size} and tgt {c.tgt_vocab_size}"
        )


def recurrent_layer(
    cell: str, input_size: int, hidden_size: int, n_layers: int, dropout: float, bidirectional: bool = False
) -> nn.RNNBase:
    """A batch-first ``nn.GRU`` or ``nn.LSTM`` (``cell``); dropout between stacked layers only.

    Shape:
        input ``(B, T, input_size)`` → output ``(B, T, dirs·hidden_size)``, state ``(L·dirs, B, hidden_size)``
    """
    cls = nn.GRU if cell == "gru" else nn.LSTM
    return cls(
        input_size,
        hidden_size,
        n_layers,
        batch_first=True,
        bidirectional=bidirectional,
        dropout=dropout if n_layers > 1 else 0.0,
    )


# A recurrent state is a tuple of (L, B, D) tensors: (h,) for a GRU, (h, c) for an LSTM.
RNNState = tuple[Tensor, ...]


def to_torch_state(state: RNNState) -> Tensor | tuple[Tensor, Tensor]:
    """An :data:`RNNState` as ``nn.GRU`` (``h``) or ``nn.LSTM`` (``(h, c)``) takes it.

    Shape:
        ``(L, B, D)`` each → the same tensors
    """
    return state[0] if len(state) == 1 else state


def from_torch_state(state: Tensor | tuple[Tensor, Tensor]) -> RNNState:
    """What ``nn.GRU``/``nn.LSTM`` return as their state, as an :data:`RNNState` (always a tuple).

    Shape:
        ``(L, B, D)`` each → the same tensors
    """
    return (state,) if isinstance(state, Tensor) else tuple(state)


# --------------------------------------------------------------------------------------------
# Encoder.
# --------------------------------------------------------------------------------------------


class EncoderOutput(NamedTuple):
    memory: Tensor  # (B, S, D) the encoder output at every source position (zeros at padding)
    final: RNNState  # (L, B, D) each: the final state, directions concatenated


class RNNEncoder(nn.Module):
    """Reads the source with a (bi-directional) GRU/LSTM; padding is skipped by packing.

    A bi-directional encoder runs one RNN left-to-right and one right-to-left, each ``D/2`` wide,
    and concatenates them (Bahdanau §3.2): position ``j``'s output summarises the words before
    *and* after it. The final state of the backward direction is the one after reading word 1.

    Shape:
        src ``(B, S)``, src_mask ``(B, S)`` (True = real token, right-padded) →
        memory ``(B, S, D)``, final ``(L, B, D)`` per state tensor
    """

    def __init__(self, config: RNNSeq2SeqConfig, embed: nn.Embedding) -> None:
        super().__init__()
        c = config
        self.embed = embed
        self.dropout = nn.Dropout(c.dropout)
        self.bidirectional = c.bidirectional
        self.n_layers = c.n_layers
        width = c.hidden_size // 2 if c.bidirectional else c.hidden_size
        self.rnn = recurrent_layer(c.cell, c.embed_dim, width, c.n_layers, c.dropout, bidirectional=c.bidirectional)

    def forward(self, src: Tensor, src_mask: Tensor) -> EncoderOutput:
        B, S = src.shape
        lengths = src_mask.sum(dim=1)  # (B,)
        if bool((lengths == 0).any()):
            raise ValueError(f"source rows {torch.nonzero(lengths == 0).flatten().tolist()} have no real token")
        if not torch.equal(src_mask, AF.padding_mask(lengths, max_len=S)):
            raise ValueError("the RNN encoder needs right-padded sources: src_mask must be True then False in each row")
        x = self.dropout(self.embed(src))  # (B, S, E)
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, state = self.rnn(packed)
        memory, _ = pad_packed_sequence(out, batch_first=True, total_length=S)  # (B, S, D)
        final = from_torch_state(state)  # (L·dirs, B, D/dirs) each
        if self.bidirectional:
            # torch orders h_n as (layer0 fwd, layer0 bwd, layer1 fwd, …): pair the directions.
            final = tuple(
                h.view(self.n_layers, 2, B, h.shape[-1])  # (L, 2, B, D/2)
                .permute(0, 2, 1, 3)  # (L, B, 2, D/2)
                .reshape(self.n_layers, B, 2 * h.shape[-1])  # (L, B, D)
                for h in final
            )
        return EncoderOutput(memory, final)


# --------------------------------------------------------------------------------------------
# Attention, one decoder step at a time.
# --------------------------------------------------------------------------------------------


class AttentionStep(NamedTuple):
    context: Tensor  # (B, D) the weighted sum of the memory
    weights: Tensor  # (B, S) over source positions; 0 at padding; each row sums to 1
    centre: Tensor | None = None  # (B,) local-p only: the predicted window centre p_t


def masked_softmax(scores: Tensor, mask: Tensor) -> Tensor:
    """Softmax over the allowed positions (the convention of :mod:`attnlab.functional`).

    Disallowed positions get weight exactly 0; every row needs at least one allowed position.

    Shape:
        scores ``(..., S)``, mask ``(..., S)`` boolean (broadcastable), True = may attend → ``(..., S)``
    """
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1) * mask  # (B, S)


class BahdanauAttention(nn.Module):
    """Additive attention for the decoder, with the keys projected once per sentence.

    The parameters are attnlab's :class:`~attnlab.layers.AdditiveAttention` (``q_proj`` = W,
    ``k_proj`` = U with bias, ``score`` = v). Its forward projects the keys on every call; here the
    ``U h_j`` term does not change between decoder steps, so :meth:`prepare` computes it once and
    each step only adds ``W s`` — the same numbers (tested against
    :func:`attnlab.functional.additive_attention`) at a fraction of the cost.

    Shape:
        prepare: memory ``(B, S, D)`` → keys ``(B, S, A)``;
        forward: query ``(B, D)``, memory ``(B, S, D)``, src_mask ``(B, S)``, keys ``(B, S, A)``
        → context ``(B, D)``, weights ``(B, S)``
    """

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int) -> None:
        super().__init__()
        self.additive = AdditiveAttention(query_dim, key_dim, attn_dim)

    def prepare(self, memory: Tensor) -> Tensor:
        return self.additive.k_proj(memory)  # (B, S, A), includes the bias b

    def forward(self, query: Tensor, memory: Tensor, src_mask: Tensor, keys: Tensor) -> AttentionStep:
        hidden = torch.tanh(self.additive.q_proj(query).unsqueeze(1) + keys)  # (B, 1, A) + (B, S, A) -> (B, S, A)
        scores = hidden @ self.additive.score  # (B, S, A) x (A,) -> (B, S)
        weights = masked_softmax(scores, src_mask)  # (B, S)
        context = (weights.unsqueeze(1) @ memory).squeeze(1)  # (B, 1, S) x (B, S, D) -> (B, D)
        return AttentionStep(context, weights)


def _dot_product_step(query: Tensor, memory: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    # Luong's scores are unscaled dot products (§3.1, eq. 8), hence scale=1.
    out, weights = AF.scaled_dot_product_attention(
        query.unsqueeze(1), memory, memory, mask.unsqueeze(1), scale=1.0, return_weights=True, backend="math"
    )  # (B, 1, D), (B, 1, S)
    return out.squeeze(1), weights.squeeze(1)  # (B, D), (B, S)


class DotAttention(nn.Module):
    """Luong's "dot" global attention: ``score(h_t, h̄_s) = h_tᵀ h̄_s`` (§3.1, eq. 8).

    Shape:
        query ``(B, D)``, memory ``(B, S, D)``, src_mask ``(B, S)`` → context ``(B, D)``, weights ``(B, S)``
    """

    def prepare(self, memory: Tensor) -> None:
        return None

    def forward(self, query: Tensor, memory: Tensor, src_mask: Tensor, keys: None = None) -> AttentionStep:
        return AttentionStep(*_dot_product_step(query, memory, src_mask))


class GeneralAttention(nn.Module):
    """Luong's "general" global attention: ``score(h_t, h̄_s) = h_tᵀ W_a h̄_s`` (§3.1, eq. 8).

    ``W_a`` is applied to the query (``q_proj(h_t) = W_aᵀ h_t``): one ``D×D`` product per step
    instead of one per source position.

    Shape:
        query ``(B, D)``, memory ``(B, S, D)``, src_mask ``(B, S)`` → context ``(B, D)``, weights ``(B, S)``
    """

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)

    def prepare(self, memory: Tensor) -> None:
        return None

    def forward(self, query: Tensor, memory: Tensor, src_mask: Tensor, keys: None = None) -> AttentionStep:
        return AttentionStep(*_dot_product_step(self.q_proj(query), memory, src_mask))


class LocalPAttention(nn.Module):
    """Luong's local-p attention (§3.2): look only at a window around a predicted position.

    The decoder state predicts the centre ``p_t = (S_b − 1)·sigmoid(v_pᵀ tanh(W_p h_t))`` (eq. 9;
    ``S_b`` is the sentence's real length, so the centre is always a real position). Only
    positions ``j`` with ``|j − p_t| ≤ W`` take part (``W`` = ``local_window``; the mask comes from
    the padding-mask helper); inside the window the "general" alignment is multiplied by a Gaussian
    ``exp(−(j − p_t)² / 2σ²)``, ``σ = W/2`` (eq. 10), which makes ``p_t`` trainable by gradient.

    Luong leaves the product unnormalised; here it is renormalised over the window, i.e. the weights
    are ``softmax_j(score_j − (j − p_t)²/2σ²)`` restricted to the window. They sum to 1 like every
    other kind, so the context stays a weighted average of encoder states.

    Shape:
        query ``(B, D)``, memory ``(B, S, D)``, src_mask ``(B, S)`` → context ``(B, D)``,
        weights ``(B, S)`` (zero outside the window), centre ``(B,)``
    """

    def __init__(self, hidden_size: int, window: int) -> None:
        super().__init__()
        self.window = window
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)  # W_a of the general score
        self.centre_proj = nn.Linear(hidden_size, hidden_size, bias=False)  # W_p
        self.centre_score = nn.Linear(hidden_size, 1, bias=False)  # v_p

    def prepare(self, memory: Tensor) -> None:
        return None

    def window_mask(self, centre: Tensor, src_mask: Tensor) -> Tensor:
        """Positions ``j`` with ``centre − W ≤ j ≤ centre + W`` that are real tokens.

        Shape:
            centre ``(B,)``, src_mask ``(B, S)`` → ``(B, S)`` boolean
        """
        S = src_mask.shape[1]
        first = torch.ceil(centre - self.window).clamp(0, S).long()  # (B,) first position inside
        end = (torch.floor(centre + self.window) + 1).clamp(0, S).long()  # (B,) one past the last
        before_end = AF.padding_mask(end, max_len=S)  # (B, S) j < end
        before_first = AF.padding_mask(first, max_len=S)  # (B, S) j < first
        return AF.combine_masks(before_end, ~before_first, src_mask)  # (B, S)

    def forward(self, query: Tensor, memory: Tensor, src_mask: Tensor, keys: None = None) -> AttentionStep:
        S = memory.shape[1]
        last = (src_mask.sum(dim=1) - 1).to(query.dtype)  # (B,) S_b − 1
        centre = last * torch.sigmoid(self.centre_score(torch.tanh(self.centre_proj(query)))).squeeze(-1)  # (B,)
        window = self.window_mask(centre.detach(), src_mask)  # (B, S)
        _, align = _dot_product_step(self.q_proj(query), memory, window)  # (B, S) softmax over the window
        positions = torch.arange(S, device=query.device, dtype=query.dtype)  # (S,)
        sigma = self.window / 2
        gauss = torch.exp(-((positions.unsqueeze(0) - centre.unsqueeze(1)) ** 2) / (2 * sigma**2))  # (B, S)
        # The window always holds the centre's nearest real position, where gauss ≥ e^{-2} and
        # align > 0, so the normaliser is positive.
        weights = align * gauss  # (B, S)
        weights = weights / weights.sum(dim=-1, keepdim=True)  # (B, S)
        context = (weights.unsqueeze(1) @ memory).squeeze(1)  # (B, 1, S) x (B, S, D) -> (B, D)
        return AttentionStep(context, weights, centre)


# --------------------------------------------------------------------------------------------
# Decoders. Each turns target embeddings into readout vectors (B, T, E), one step at a time or
# all at once, and keeps its recurrent state in an RNNDecoderState.
# --------------------------------------------------------------------------------------------


@dataclass
class RNNDecoderState:
    """Everything the decoder carries from one generated token to the next."""

    hidden: RNNState  # (L, B, D) each: the decoder RNN state (h, and c for an LSTM)
    src_mask: Tensor  # (B, S) True = real source token
    memory: Tensor | None  # (B, S, D) encoder outputs; None without attention (nothing else gets through)
    keys: Tensor | None  # (B, S, A) additive attention's projected keys; None for other kinds
    feed: Tensor | None  # (B, ·) the fixed context c ("none") or the previous readout h̃_{t-1} (Luong)
    length: int = 0  # target positions decoded so far

    def reorder(self, index: Tensor) -> None:
        """Keep rows ``index`` (beam search moves hypotheses between rows).

        Shape:
            index ``(B',)`` → every tensor's batch dimension becomes ``B'``
        """
        self.hidden = tuple(h.index_select(1, index) for h in self.hidden)
        self.src_mask = self.src_mask.index_select(0, index)
        for name in ("memory", "keys", "feed"):
            t = getattr(self, name)
            if t is not None:
                setattr(self, name, t.index_select(0, index))


class FixedContextDecoder(nn.Module):
    """The bottleneck: the decoder's only view of the source is the encoder's final state.

    ``c`` = the top layer of the final state is fed with every target embedding, and the decoder
    starts from the whole final state (Cho et al. 2014, §2.2; Bahdanau's RNNencdec baseline).
    :meth:`init_state` never keeps the memory, so no other path from the encoder exists.

    Shape:
        forward: emb ``(B, T, E)`` → readout ``(B, T, E)``, weights ``None``
    """

    def __init__(self, config: RNNSeq2SeqConfig) -> None:
        super().__init__()
        c = config
        self.rnn = recurrent_layer(c.cell, c.embed_dim + c.hidden_size, c.hidden_size, c.n_layers, c.dropout)
        self.readout = nn.Linear(2 * c.hidden_size + c.embed_dim, c.embed_dim)

    def init_state(self, encoded: EncoderOutput, src_mask: Tensor) -> RNNDecoderState:
        context = encoded.final[0][-1]  # (B, D) top layer's h
        return RNNDecoderState(encoded.final, src_mask, memory=None, keys=None, feed=context)

    def forward(self, emb: Tensor, state: RNNDecoderState) -> tuple[Tensor, None]:
        # The context does not depend on the step, so the whole sequence runs in one RNN call.
        T = emb.shape[1]
        context = state.feed.unsqueeze(1).expand(-1, T, -1)  # (B, T, D)
        out, hidden = self.rnn(torch.cat([emb, context], dim=-1), to_torch_state(state.hidden))  # (B, T, D)
        state.hidden = from_torch_state(hidden)
        state.length += T
        return torch.tanh(self.readout(torch.cat([out, context, emb], dim=-1))), None  # (B, T, E)


class AdditiveDecoder(nn.Module):
    """Bahdanau's RNNsearch decoder: attend with the previous state, then step the RNN (§3.1).

    Shape:
        forward: emb ``(B, T, E)`` → readout ``(B, T, E)``, weights ``(B, T, S)``
    """

    def __init__(self, config: RNNSeq2SeqConfig) -> None:
        super().__init__()
        c = config
        self.attention = BahdanauAttention(c.hidden_size, c.hidden_size, c.attn_dim)
        self.rnn = recurrent_layer(c.cell, c.embed_dim + c.hidden_size, c.hidden_size, c.n_layers, c.dropout)
        self.readout = nn.Linear(2 * c.hidden_size + c.embed_dim, c.embed_dim)

    def init_state(self, encoded: EncoderOutput, src_mask: Tensor) -> RNNDecoderState:
        return RNNDecoderState(encoded.final, src_mask, encoded.memory, self.attention.prepare(encoded.memory), None)

    def forward(self, emb: Tensor, state: RNNDecoderState) -> tuple[Tensor, Tensor]:
        readouts, weights = [], []
        for t in range(emb.shape[1]):
            e = emb[:, t]  # (B, E)
            att = self.attention(state.hidden[0][-1], state.memory, state.src_mask, state.keys)  # uses s_{i-1}
            x = torch.cat([e, att.context], dim=-1).unsqueeze(1)  # (B, 1, E + D)
            out, hidden = self.rnn(x, to_torch_state(state.hidden))  # (B, 1, D)
            state.hidden = from_torch_state(hidden)
            readouts.append(torch.tanh(self.readout(torch.cat([out[:, 0], att.context, e], dim=-1))))  # (B, E)
            weights.append(att.weights)
        state.length += emb.shape[1]
        return torch.stack(readouts, dim=1), torch.stack(weights, dim=1)  # (B, T, E), (B, T, S)


class LuongDecoder(nn.Module):
    """Luong's decoder: step the RNN, then attend with the new state; input feeding (§3, §3.3).

    ``attention`` is a :class:`DotAttention`, :class:`GeneralAttention` or :class:`LocalPAttention`.

    Shape:
        forward: emb ``(B, T, E)`` → readout ``(B, T, E)``, weights ``(B, T, S)``
    """

    def __init__(self, config: RNNSeq2SeqConfig, attention: nn.Module) -> None:
        super().__init__()
        c = config
        self.attention = attention
        # Input feeding: h̃_{t-1} enters the next step, so the model knows what it attended before.
        self.rnn = recurrent_layer(c.cell, 2 * c.embed_dim, c.hidden_size, c.n_layers, c.dropout)
        self.readout = nn.Linear(2 * c.hidden_size, c.embed_dim)  # W_c of eq. 5

    def init_state(self, encoded: EncoderOutput, src_mask: Tensor) -> RNNDecoderState:
        B, E = src_mask.shape[0], self.readout.out_features
        feed = encoded.memory.new_zeros(B, E)  # (B, E) h̃_0 = 0
        return RNNDecoderState(encoded.final, src_mask, encoded.memory, self.attention.prepare(encoded.memory), feed)

    def forward(self, emb: Tensor, state: RNNDecoderState) -> tuple[Tensor, Tensor]:
        readouts, weights = [], []
        for t in range(emb.shape[1]):
            x = torch.cat([emb[:, t], state.feed], dim=-1).unsqueeze(1)  # (B, 1, 2E)
            out, hidden = self.rnn(x, to_torch_state(state.hidden))  # (B, 1, D)
            state.hidden = from_torch_state(hidden)
            att = self.attention(out[:, 0], state.memory, state.src_mask, state.keys)
            state.feed = torch.tanh(self.readout(torch.cat([att.context, out[:, 0]], dim=-1)))  # (B, E) h̃_t
            readouts.append(state.feed)
            weights.append(att.weights)
        state.length += emb.shape[1]
        return torch.stack(readouts, dim=1), torch.stack(weights, dim=1)  # (B, T, E), (B, T, S)


def _build_decoder(c: RNNSeq2SeqConfig) -> nn.Module:
    if c.attention == "none":
        return FixedContextDecoder(c)
    if c.attention == "additive":
        return AdditiveDecoder(c)
    attention = {
        "dot": lambda: DotAttention(),
        "general": lambda: GeneralAttention(c.hidden_size),
        "local": lambda: LocalPAttention(c.hidden_size, c.local_window),
    }[c.attention]()
    return LuongDecoder(c, attention)


# --------------------------------------------------------------------------------------------
# The model.
# --------------------------------------------------------------------------------------------


class RNNSeq2Seq(nn.Module):
    """RNN encoder–decoder; ``config.attention`` picks the decoder. See the module docstring.

    Shape:
        src ``(B, S)``, tgt_in ``(B, T)`` → logits ``(B, T, V)``; one decoding step: tokens
        ``(B, 1)`` → logits ``(B, V)``, cross weights ``(B, 1, 1, S)`` or ``None``
    """

    def __init__(self, config: RNNSeq2SeqConfig) -> None:
        super().__init__()
        c = self.config = config
        self.src_embed = nn.Embedding(c.src_vocab_size, c.embed_dim, padding_idx=c.pad_id)
        self.tgt_embed = (
            self.src_embed if c.share_embeddings else nn.Embedding(c.tgt_vocab_size, c.embed_dim, padding_idx=c.pad_id)
        )
        self.encoder = RNNEncoder(c, self.src_embed)
        self.decoder = _build_decoder(c)
        self.dropout = nn.Dropout(c.dropout)
        self.out_proj = nn.Linear(c.embed_dim, c.tgt_vocab_size, bias=False)
        self._init_weights()
        if c.tie_output:
            self.out_proj.weight = self.tgt_embed.weight

    def _init_weights(self) -> None:
        # Luong et al. 2015 (§4.1): every parameter uniform in [−0.1, 0.1]; padding rows zero.
        for p in self.parameters():
            nn.init.uniform_(p, -0.1, 0.1)
        with torch.no_grad():
            self.src_embed.weight[self.config.pad_id].zero_()
            self.tgt_embed.weight[self.config.pad_id].zero_()

    def _src_mask(self, src: Tensor, src_mask: Tensor | None) -> Tensor:
        if src.dim() != 2:
            raise ValueError(f"src must have shape (B, S), got {tuple(src.shape)}")
        return src != self.config.pad_id if src_mask is None else src_mask  # (B, S)

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> EncoderOutput:
        """Run the encoder.

        Shape:
            src ``(B, S)``, src_mask ``(B, S)`` → memory ``(B, S, D)``, final ``(L, B, D)`` each
        """
        return self.encoder(src, self._src_mask(src, src_mask))

    def decode(self, tgt_in: Tensor, encoded: EncoderOutput, src_mask: Tensor) -> tuple[Tensor, Tensor | None]:
        """Run the decoder over a whole (teacher-forced) target prefix.

        The decoder is causal by construction (an RNN reads left to right), so target padding
        needs no mask: padded positions only follow the real ones, and the loss ignores them.

        Shape:
            tgt_in ``(B, T)``, src_mask ``(B, S)`` → logits ``(B, T, V)``, weights ``(B, T, S)`` or ``None``
        """
        state = self.decoder.init_state(encoded, src_mask)
        readout, weights = self.decoder(self.dropout(self.tgt_embed(tgt_in)), state)  # (B, T, E)
        return self.out_proj(self.dropout(readout)), weights  # (B, T, V)

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
        """Teacher-forced forward pass (same signature and output as the Transformer's).

        Args:
            src: source token ids (right-padded).
            tgt_in: target ids shifted right (starting with BOS).
            src_mask: True = real source token (default: ``!= pad_id``).
            tgt_mask: accepted for interface compatibility; the causal RNN does not need it.
            labels: the next tokens (target + EOS); padding positions are ignored in the loss.
            label_smoothing: ε of label smoothing.
            need_weights: also return the attention map as ``attentions["cross"]`` (one "layer",
                one "head"; an empty list for ``attention="none"``).

        Shape:
            src ``(B, S)``; tgt_in, labels ``(B, T)`` → logits ``(B, T, V)``; cross ``[(B, 1, T, S)]``
        """
        src_mask = self._src_mask(src, src_mask)
        logits, weights = self.decode(tgt_in, self.encoder(src, src_mask), src_mask)
        loss = None
        if labels is not None:
            loss = token_cross_entropy(logits, labels, pad_id=self.config.pad_id, label_smoothing=label_smoothing)
        attentions = None
        if need_weights:
            attentions = {"cross": [] if weights is None else [weights.unsqueeze(1)]}  # (B, 1, T, S)
        return Seq2SeqOutput(logits, loss, attentions)

    # -- incremental decoding ------------------------------------------------------------------

    def start(self, src: Tensor, src_mask: Tensor | None = None) -> RNNDecoderState:
        """Encode the source once and set up the decoder state.

        Shape:
            src ``(B, S)`` → state with hidden ``(L, B, D)`` each
        """
        src_mask = self._src_mask(src, src_mask)
        return self.decoder.init_state(self.encoder(src, src_mask), src_mask)

    def step(self, tokens: Tensor, state: RNNDecoderState, *, need_weights: bool = False) -> StepOutput:
        """Feed the next target token(s); return the logits of the last one.

        Shape:
            tokens ``(B, t)`` (usually ``t = 1``) → logits ``(B, V)``, cross weights ``(B, 1, 1, S)``
            (``None`` without attention or unless ``need_weights``)
        """
        readout, weights = self.decoder(self.dropout(self.tgt_embed(tokens)), state)  # (B, t, E)
        logits = self.out_proj(self.dropout(readout[:, -1]))  # (B, V)
        cross = None
        if need_weights and weights is not None:
            cross = weights[:, -1].unsqueeze(1).unsqueeze(1)  # (B, 1, 1, S)
        return StepOutput(logits, cross)
