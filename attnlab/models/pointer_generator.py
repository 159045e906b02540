"""Pointer-generator networks: a summarizer that can copy (See, Liu & Manning 2017, "Get To The Point").

A plain attentional decoder can only write words of its fixed vocabulary; names and numbers it
never saw in training come out as ``[UNK]``. The pointer-generator lets attention do double duty:
the attention distribution over the source is also a distribution over *source words to copy*,
and a learned switch ``p_gen`` mixes "generate from the vocabulary" with "copy what I attend to".

    source ─ OOV ids → [UNK] ─ embed ─ BiLSTM/BiGRU ─► memory h_i (B, S, D), final state
    decoder   s_t = RNN(x_t, s_{t-1}),  x_t = E y_{t-1},  s_0 = encoder final state
              e_ti = vᵀ tanh(W_h h_i + W_s s_t + w_c c_ti + b_attn)      (§2.1 eq. 1; w_c only with coverage, eq. 11)
              a_t  = softmax_i(e_t) over the real source positions        (eq. 2)
              h*_t = Σ_i a_ti h_i                                         (eq. 3)
              P_vocab = softmax(V'(V [s_t; h*_t] + b) + b')               (eq. 4)
              p_gen = σ(w_h*ᵀ h*_t + w_sᵀ s_t + w_xᵀ x_t + b_ptr)         (§2.2 eq. 8)
              P(w) = p_gen P_vocab(w) + (1 − p_gen) Σ_{i: w_i = w} a_ti    (eq. 9)
    coverage  c_t = Σ_{t' < t} a_t'  (eq. 10);  loss_t = −log P(w*_t) + λ Σ_i min(a_ti, c_ti)  (§2.3 eq. 12–13)

**The extended vocabulary.** Token ids ``0 … V−1`` are the fixed vocabulary. A source word outside
it gets the id ``V + k``, where ``k`` numbers the distinct out-of-vocabulary words of *that*
document in order of first appearance; ``V_ext = V + (most such words in any row of the batch)``.
The model takes sources in these *extended ids*: the encoder embeds every id ``≥ V`` as
``[UNK]`` (``config.unk_id``), and the copy distribution is scattered onto the extended ids, so
``P(w)`` covers the vocabulary *and* this document's own rare words (eq. 9: a word outside the
vocabulary has ``P_vocab(w) = 0``; a word absent from the source gets no copy mass). Targets use
the same ids (a summary word outside the vocabulary that is not in the source is ``[UNK]``), and a
copied id fed back into the decoder is embedded as ``[UNK]`` again. Mapping extended ids back to
words is the caller's job (it knows each document's list of rare words).

**Logits are log-probabilities.** ``forward(...).logits`` and ``step(...).logits`` hold
``log P(w)`` of the *final mixed distribution* over the extended vocabulary (``−inf`` for an
extended slot that no source word of this row fills). They are already normalised, so
:mod:`attnlab.decode`'s ``log_softmax`` leaves them unchanged and greedy/beam search pick tokens
by the true mixed probabilities; the loss is ``−log P(w*)`` on them directly.

**Decoding protocol** (:mod:`attnlab.models.seq2seq`, searched by :mod:`attnlab.decode`):
:meth:`PointerGenerator.start` encodes (the sources in extended ids), :meth:`PointerGenerator.step`
advances by one token and returns the attention ``a_t`` as cross weights ``(B, 1, 1, S)`` (one
"layer", one "head") for heatmaps, and :meth:`PointerGeneratorState.reorder` follows beam search.

Design choice: the decoder input is the previous word only (no input feeding of ``h*_{t-1}``),
as in the paper's equations. The decoder states then depend on the target prefix alone, so the
teacher-forced pass runs the decoder RNN over the whole summary in one call and, without
coverage, scores all ``T × S`` attention pairs at once; with coverage ``a_t`` depends on
``a_{<t}``, so attention (only attention) steps through ``t``.

Shape:
    src ``(B, S)`` and tgt_in ``(B, T)`` in extended ids → logits ``(B, T, V_ext)`` (log P), attention
    ``(B, T, S)``, p_gen ``(B, T)``. Letters: ``B`` batch, ``S`` source length, ``T`` target length,
    ``E`` embedding width, ``D`` hidden width (= memory width; each encoder direction ``D/2``),
    ``A`` attention width, ``L`` layers, ``V`` vocabulary, ``V_ext`` extended vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..layers import AdditiveAttention
from .config import check_fields

# The recurrent plumbing (state tuples, masked softmax, RNN construction) is the RNN translators'.
from .rnn_seq2seq import (
    CELLS,
    RNNEncoder,
    RNNSeq2SeqConfig,
    RNNState,
    from_torch_state,
    masked_softmax,
    recurrent_layer,
    to_torch_state,
)
from .seq2seq import Seq2SeqOutput, StepOutput, mean_over_targets

Tensor = torch.Tensor

__all__ = [
    "PRESETS",
    "PointerGenerator",
    "PointerGeneratorConfig",
    "PointerGeneratorOutput",
    "PointerGeneratorState",
    "mix_copy_distribution",
]


@dataclass
class PointerGeneratorConfig:
    vocab_size: int  # V: the fixed vocabulary shared by documents and summaries (incl. special tokens)
    cell: str = "lstm"  # recurrent cell of encoder and decoder: "lstm" (See et al.) or "gru"
    embed_dim: int = 128  # word embedding width E (one table for encoder and decoder, See §3)
    hidden_size: int = 256  # decoder state width D = encoder output width (D/2 per direction)
    attn_dim: int = 256  # hidden width A of the additive attention scorer vᵀ tanh(·)
    n_layers: int = 1  # stacked RNN layers in the encoder and in the decoder (See: 1)
    dropout: float = 0.0  # on embeddings and the vocabulary readout (See et al. used none)
    coverage: bool = False  # the coverage mechanism and loss of §2.3 (See et al. turn it on to fine-tune)
    coverage_weight: float = 1.0  # λ of the coverage loss (eq. 13; See et al.: 1)
    pad_id: int = 0  # padding id of sources and targets
    unk_id: int = 1  # the id that extended (out-of-vocabulary) ids are embedded as
    model_type: str = "pointer_generator"  # checkpoint tag used to rebuild the right class

    def __post_init__(self) -> None:
        _check_config(self)


#: Named sizes, in one place. "see2017" is the paper's shape (128-wide embeddings, a 256-unit LSTM
#: per encoder direction, hence D = 512 here; See et al. used a 50k vocabulary).
PRESETS: dict[str, dict] = {
    "tiny": dict(embed_dim=32, hidden_size=64, attn_dim=64),
    "small": dict(embed_dim=96, hidden_size=192, attn_dim=192),
    "see2017": dict(embed_dim=128, hidden_size=512, attn_dim=512),
}


def _check_config(c: PointerGeneratorConfig) -> None:
    for name in ("vocab_size", "embed_dim", "hidden_size", "attn_dim", "n_layers"):
        value = getattr(c, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    check_fields(
        c,
        non_negative=("coverage_weight",),
        fractions=("dropout",),
        sizes=(
            ("vocab_size", "embed_dim"),
            ("vocab_size", "hidden_size"),
            ("n_layers", "hidden_size", "hidden_size"),
            ("hidden_size", "attn_dim"),
        ),
    )
    if c.cell not in CELLS:
        raise ValueError(f"unknown RNN cell {c.cell!r}; choose from {list(CELLS)}")
    if c.hidden_size % 2:
        raise ValueError(
            f"the bidirectional encoder splits hidden_size in two halves; got odd hidden_size={c.hidden_size}"
        )
    for name in ("pad_id", "unk_id"):
        if not 0 <= getattr(c, name) < c.vocab_size:
            raise ValueError(f"{name}={getattr(c, name)} is outside the vocabulary of size {c.vocab_size}")


def mix_copy_distribution(p_vocab: Tensor, weights: Tensor, p_gen: Tensor, src_ext: Tensor, n_ext: int) -> Tensor:
    """The final distribution of eq. 9: ``p_gen·P_vocab`` plus ``(1 − p_gen)·a`` scattered onto source words.

    ``P_vocab`` is padded with zeros from ``V`` to ``n_ext`` (words outside the vocabulary cannot be
    generated); attention to every occurrence of a word adds up on that word's extended id.
    Padding positions carry zero attention, so they add nothing (to the padding id).

    Shape:
        p_vocab ``(B, T, V)``, weights ``(B, T, S)``, p_gen ``(B, T)``, src_ext ``(B, S)`` →
        ``(B, T, n_ext)``; each row sums to 1 when ``p_vocab`` and ``weights`` rows do
    """
    B, T, V = p_vocab.shape
    if n_ext < V:
        raise ValueError(f"n_ext={n_ext} is smaller than the vocabulary size {V}")
    gen = F.pad(p_gen.unsqueeze(-1) * p_vocab, (0, n_ext - V))  # (B, T, n_ext)
    copy = (1.0 - p_gen).unsqueeze(-1) * weights  # (B, T, S)
    index = src_ext.unsqueeze(1).expand(B, T, src_ext.shape[1])  # (B, T, S)
    return gen.scatter_add(-1, index, copy)  # (B, T, n_ext)


@dataclass(kw_only=True)
class PointerGeneratorOutput(Seq2SeqOutput):
    """:class:`~attnlab.models.seq2seq.Seq2SeqOutput` plus the pointer-generator's own terms.

    ``logits`` ``(B, T, V_ext)`` are log P of the final (mixed) distribution (see the module
    docstring); ``loss`` is NLL + coverage_weight · coverage loss, averaged over real target
    tokens; ``attentions`` is ``{"cross": [(B, 1, T, S)]}`` when need_weights.

    Shape:
        logits ``(B, T, V_ext)``; p_gen ``(B, T)``; nll, coverage_loss scalars
    """

    p_gen: Tensor  # (B, T) probability of generating (vs copying) at each step
    nll: Tensor | None = None  # mean −log P(w*) over real target tokens
    coverage_loss: Tensor | None = None  # mean Σ_i min(a_ti, c_ti) over real target tokens (coverage only)


@dataclass
class PointerGeneratorState:
    """Everything the decoder carries from one generated token to the next."""

    hidden: RNNState  # (L, B, D) each: the decoder RNN state
    memory: Tensor  # (B, S, D) encoder outputs h_i
    keys: Tensor  # (B, S, A) W_h h_i + b_attn, computed once per document
    src_mask: Tensor  # (B, S) True = real source token
    src_ext: Tensor  # (B, S) source ids in the extended vocabulary (where copy mass goes)
    n_ext: int  # V_ext: size of the extended vocabulary of this batch
    coverage: Tensor | None  # (B, S) c_t = sum of the attention so far; None without coverage

    def reorder(self, index: Tensor) -> None:
        """Keep rows ``index`` (beam search moves hypotheses between rows).

        Shape:
            index ``(B',)`` → every batch-first tensor becomes ``(B', ...)``, hidden ``(L, B', D)``
        """
        self.hidden = tuple(h.index_select(1, index) for h in self.hidden)
        for name in ("memory", "keys", "src_mask", "src_ext", "coverage"):
            t = getattr(self, name)
            if t is not None:
                setattr(self, name, t.index_select(0, index))


class PointerGenerator(nn.Module):
    """The pointer-generator summarizer. See the module docstring for the equations and ids.

    Shape:
        forward: src ``(B, S)`` (extended ids), tgt_in ``(B, T)`` → logits ``(B, T, V_ext)``
    """

    def __init__(self, config: PointerGeneratorConfig) -> None:
        super().__init__()
        c = self.config = config
        self.embed = nn.Embedding(c.vocab_size, c.embed_dim, padding_idx=c.pad_id)
        # The encoder of attnlab.models.rnn_seq2seq, bidirectional as in See et al. §2.1.
        encoder_config = RNNSeq2SeqConfig(
            src_vocab_size=c.vocab_size,
            tgt_vocab_size=c.vocab_size,
            cell=c.cell,
            embed_dim=c.embed_dim,
            hidden_size=c.hidden_size,
            n_layers=c.n_layers,
            bidirectional=True,
            dropout=c.dropout,
            pad_id=c.pad_id,
        )
        self.encoder = RNNEncoder(encoder_config, self.embed)
        self.decoder_rnn = recurrent_layer(c.cell, c.embed_dim, c.hidden_size, c.n_layers, c.dropout)
        # q_proj = W_s, k_proj = W_h with bias b_attn, score = v (eq. 1).
        self.attention = AdditiveAttention(c.hidden_size, c.hidden_size, c.attn_dim)
        self.coverage_proj = nn.Linear(1, c.attn_dim, bias=False) if c.coverage else None  # w_c (eq. 11)
        self.readout = nn.Linear(2 * c.hidden_size, c.embed_dim)  # V, b of eq. 4
        self.out_proj = nn.Linear(c.embed_dim, c.vocab_size)  # V', b' of eq. 4
        self.p_gen_proj = nn.Linear(2 * c.hidden_size + c.embed_dim, 1)  # [w_h*; w_s; w_x], b_ptr of eq. 8
        self.dropout = nn.Dropout(c.dropout)
        self._init_weights()

    def _init_weights(self) -> None:
        # Uniform in [−0.1, 0.1] for every parameter (Luong et al. 2015, §4.1; the same as
        # attnlab's RNN translators); the padding embedding is zero.
        for p in self.parameters():
            nn.init.uniform_(p, -0.1, 0.1)
        with torch.no_grad():
            self.embed.weight[self.config.pad_id].zero_()

    # -- pieces --------------------------------------------------------------------------------

    def _in_vocab(self, ids: Tensor) -> Tensor:
        """Extended ids → fixed-vocabulary ids (every id ≥ V becomes [UNK]).

        Shape:
            any → same
        """
        return ids.masked_fill(ids >= self.config.vocab_size, self.config.unk_id)

    def _check_ids(self, name: str, ids: Tensor) -> None:
        if ids.dim() != 2:
            raise ValueError(f"{name} must have shape (B, length), got {tuple(ids.shape)}")
        if ids.dtype != torch.long:
            raise TypeError(f"{name} must hold int64 token ids, got {ids.dtype}")
        if ids.numel() and int(ids.min()) < 0:
            raise ValueError(f"{name} holds negative token ids")

    def start(self, src: Tensor, src_mask: Tensor | None = None) -> PointerGeneratorState:
        """Encode the sources (in extended ids) and set up the decoder state.

        Shape:
            src ``(B, S)``, src_mask ``(B, S)`` (default ``src != pad_id``) → state with memory ``(B, S, D)``
        """
        self._check_ids("src", src)
        src_mask = src != self.config.pad_id if src_mask is None else src_mask  # (B, S)
        encoded = self.encoder(self._in_vocab(src), src_mask)
        n_ext = max(self.config.vocab_size, int(src.max()) + 1)
        coverage = encoded.memory.new_zeros(src.shape) if self.config.coverage else None  # (B, S) c_0 = 0
        return PointerGeneratorState(
            hidden=encoded.final,
            memory=encoded.memory,
            keys=self.attention.k_proj(encoded.memory),  # (B, S, A)
            src_mask=src_mask,
            src_ext=src,
            n_ext=n_ext,
            coverage=coverage,
        )

    def _attend(self, s: Tensor, state: PointerGeneratorState) -> tuple[Tensor, Tensor | None]:
        """Attention weights ``a_t`` for every decoder state (eq. 1–2), updating the coverage.

        Shape:
            s ``(B, T, D)`` → weights ``(B, T, S)``, coverage loss terms ``(B, T)`` (None without coverage)
        """
        q = self.attention.q_proj(s)  # (B, T, A)
        v = self.attention.score  # (A,)
        if state.coverage is None:
            hidden = torch.tanh(q.unsqueeze(2) + state.keys.unsqueeze(1))  # (B, T, 1, A) + (B, 1, S, A) -> (B, T, S, A)
            scores = hidden @ v  # (B, T, S, A) x (A,) -> (B, T, S)
            return masked_softmax(scores, state.src_mask.unsqueeze(1)), None  # (B, T, S)
        weights, penalties = [], []
        for t in range(s.shape[1]):
            cov = state.coverage  # (B, S)
            hidden = torch.tanh(q[:, t].unsqueeze(1) + state.keys + self.coverage_proj(cov.unsqueeze(-1)))  # (B, S, A)
            a = masked_softmax(hidden @ v, state.src_mask)  # (B, S, A) x (A,) -> (B, S)
            penalties.append(torch.minimum(a, cov).sum(dim=-1))  # (B,) eq. 12
            state.coverage = cov + a  # (B, S) eq. 10
            weights.append(a)
        return torch.stack(weights, dim=1), torch.stack(penalties, dim=1)  # (B, T, S), (B, T)

    def _decode(self, tokens: Tensor, state: PointerGeneratorState) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """Advance the decoder over ``tokens`` (teacher forcing, or one step at a time).

        Shape:
            tokens ``(B, T)`` → log P ``(B, T, V_ext)``, weights ``(B, T, S)``, p_gen ``(B, T)``,
            coverage terms ``(B, T)`` or None
        """
        self._check_ids("tokens", tokens)
        x = self.dropout(self.embed(self._in_vocab(tokens)))  # (B, T, E)
        s, hidden = self.decoder_rnn(x, to_torch_state(state.hidden))  # (B, T, D)
        state.hidden = from_torch_state(hidden)
        weights, penalties = self._attend(s, state)  # (B, T, S)
        context = weights @ state.memory  # (B, T, S) x (B, S, D) -> (B, T, D)
        vocab_logits = self.out_proj(self.dropout(self.readout(torch.cat([s, context], dim=-1))))  # (B, T, V)
        p_vocab = torch.softmax(vocab_logits.float(), dim=-1)  # (B, T, V)
        p_gen = torch.sigmoid(self.p_gen_proj(torch.cat([context, s, x], dim=-1))).squeeze(-1).float()  # (B, T)
        final = mix_copy_distribution(p_vocab, weights.float(), p_gen, state.src_ext, state.n_ext)  # (B, T, V_ext)
        return final.log(), weights, p_gen, penalties

    # -- the two ways in -----------------------------------------------------------------------

    def forward(
        self,
        src: Tensor,
        tgt_in: Tensor,
        *,
        src_mask: Tensor | None = None,
        labels: Tensor | None = None,
        need_weights: bool = False,
    ) -> PointerGeneratorOutput:
        """Teacher-forced pass over whole summaries.

        Args:
            src: document ids in the extended vocabulary, right-padded with ``pad_id``.
            tgt_in: ``[BOS]`` + summary ids (extended ids allowed; they are read as ``[UNK]``).
            src_mask: True = real source token (default ``src != pad_id``).
            labels: summary ids + ``[EOS]`` in the extended vocabulary; ``pad_id`` positions are
                ignored. Gives ``loss`` = NLL (+ ``coverage_weight`` × coverage loss).
            need_weights: also return the attention as ``attentions["cross"]`` (one layer, one head).

        Shape:
            src ``(B, S)``; tgt_in, labels ``(B, T)`` → logits ``(B, T, V_ext)``, p_gen ``(B, T)``,
            cross ``[(B, 1, T, S)]``
        """
        state = self.start(src, src_mask)
        log_p, weights, p_gen, penalties = self._decode(tgt_in, state)  # (B, T, V_ext)
        loss = nll = coverage_loss = None
        if labels is not None:
            if labels.shape != tgt_in.shape:
                raise ValueError(
                    f"labels must have the shape of tgt_in {tuple(tgt_in.shape)}, got {tuple(labels.shape)}"
                )
            if labels.numel() and int(labels.max()) >= state.n_ext:
                raise ValueError(
                    f"label id {int(labels.max())} is outside this batch's extended vocabulary "
                    f"(size {state.n_ext}): a target word outside the vocabulary must be in its source "
                    "(extended id) or [UNK]"
                )
            # The loss is −log P(w*) of the mixed distribution itself, not a cross-entropy of logits:
            # log P is already normalised (a softmax over it would only add rounding). Both terms use
            # the seq2seq reduction, the mean over the non-padding targets.
            # log P may be −inf only at extended slots no source word fills; a label never points
            # there (checked above per batch), but clamp so a rounding 0 cannot give an infinite loss.
            gold = log_p.gather(-1, labels.unsqueeze(-1)).squeeze(-1).clamp(min=-100.0)  # (B, T)
            nll = mean_over_targets(-gold, labels, pad_id=self.config.pad_id)
            loss = nll
            if penalties is not None:
                coverage_loss = mean_over_targets(penalties, labels, pad_id=self.config.pad_id)
                loss = nll + self.config.coverage_weight * coverage_loss
        attentions = {"cross": [weights.unsqueeze(1)]} if need_weights else None  # (B, 1, T, S)
        return PointerGeneratorOutput(log_p, loss, attentions, p_gen=p_gen, nll=nll, coverage_loss=coverage_loss)

    def step(self, tokens: Tensor, state: PointerGeneratorState, *, need_weights: bool = False) -> StepOutput:
        """Feed the next token(s); return log P of the next word over the extended vocabulary.

        Shape:
            tokens ``(B, t)`` (usually ``t = 1``) → logits ``(B, V_ext)`` (log-probabilities),
            cross weights ``(B, 1, 1, S)`` (None unless ``need_weights``)
        """
        log_p, weights, _, _ = self._decode(tokens, state)  # (B, t, V_ext)
        cross = weights[:, -1].unsqueeze(1).unsqueeze(1) if need_weights else None  # (B, 1, 1, S)
        return StepOutput(log_p[:, -1], cross)
