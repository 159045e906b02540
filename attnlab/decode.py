"""Decoding: turning a trained model's next-token distributions into sequences.

Sequence-to-sequence models (the Transformer, the RNN encoder–decoders) are decoded through one
small protocol, so the search code below knows nothing about their insides:

- ``model.start(src, src_mask) -> state`` encodes the source once;
- ``model.step(tokens (B, 1), state, need_weights=...) -> StepOutput(logits (B, V),
  cross_weights (B, L, H, S) | None)`` advances every row by one token;
- ``state.reorder(index)`` keeps the given rows (beam search).

Shape letters: ``B`` batch, ``K`` beam size, ``S`` source length, ``T`` output length,
``V`` vocabulary, ``L`` layers, ``H`` heads.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

Tensor = torch.Tensor

__all__ = ["Hypothesis", "greedy_decode", "beam_search", "length_penalty"]


@dataclass
class Hypothesis:
    tokens: list[int]  # generated ids, without BOS and EOS
    score: float  # total log-probability (beam search: divided by the length penalty)
    cross_attention: Tensor | None = None  # (L, H, T, S) over the real source positions, if asked


def _check_src(src: Tensor, src_mask: Tensor | None, pad_id: int) -> Tensor:
    if src.dim() != 2:
        raise ValueError(f"src must have shape (B, S), got {tuple(src.shape)}")
    if src.shape[1] == 0:
        raise ValueError("src is empty: nothing to translate")
    return src != pad_id if src_mask is None else src_mask


@torch.no_grad()
def greedy_decode(
    model,
    src: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    pad_id: int = 0,
    max_len: int = 128,
    src_mask: Tensor | None = None,
    return_attention: bool = False,
) -> list[Hypothesis]:
    """Pick the most likely next token at every step, for a whole batch at once.

    Shape:
        src ``(B, S)`` → ``B`` hypotheses; cross_attention ``(L, H, T, S_b)`` each
    """
    src_mask = _check_src(src, src_mask, pad_id)
    B = src.shape[0]
    state = model.start(src, src_mask)
    tokens = torch.full((B, 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    out = torch.full((B, max_len), pad_id, dtype=torch.long, device=src.device)  # (B, T_max)
    scores = torch.zeros(B, device=src.device)
    done = torch.zeros(B, dtype=torch.bool, device=src.device)
    lengths = torch.full((B,), max_len, dtype=torch.long, device=src.device)
    attn: list[Tensor] = []
    for t in range(max_len):
        step = model.step(tokens, state, need_weights=return_attention)
        logp = torch.log_softmax(step.logits.float(), dim=-1)  # (B, V)
        best_logp, nxt = logp.max(dim=-1)  # (B,)
        nxt = nxt.masked_fill(done, pad_id)
        scores += best_logp.masked_fill(done, 0.0)
        out[:, t] = nxt
        if return_attention:
            attn.append(step.cross_weights)  # (B, L, H, S)
        newly_done = ~done & (nxt == eos_id)
        lengths = torch.where(newly_done, torch.full_like(lengths, t), lengths)
        done |= newly_done
        if bool(done.all()):
            break
        tokens = nxt.unsqueeze(1)  # (B, 1)
    hyps = []
    for b in range(B):
        n = int(lengths[b])
        cross = None
        if return_attention:
            steps = min(n + 1, len(attn))  # include the step that produced EOS
            a = torch.stack([attn[i][b] for i in range(steps)], dim=2)  # (L, H, T, S)
            cross = a[..., src_mask[b]]  # (L, H, T, S_b)
        hyps.append(Hypothesis(out[b, :n].tolist(), float(scores[b]), cross))
    return hyps


def length_penalty(length: int, alpha: float) -> float:
    """GNMT's length normaliser ``((5 + |Y|) / 6)^α`` (Wu et al. 2016, §7); α = 0 disables it."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(
    model,
    src: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    pad_id: int = 0,
    beam_size: int = 4,
    max_len: int = 128,
    alpha: float = 0.6,
    src_mask: Tensor | None = None,
    return_attention: bool = False,
) -> list[Hypothesis]:
    """Keep the ``beam_size`` best partial translations per sentence, batched over sentences.

    All ``B·K`` hypotheses decode together as rows of one batch; after each step the best ``K``
    of the ``K·V`` extensions of each sentence survive, and the decoder state is reordered to
    follow them. A hypothesis that emitted EOS stays in the beam with a frozen score until the
    search ends; the final choice divides each score by :func:`length_penalty`. With
    ``beam_size=1`` this is exactly :func:`greedy_decode`.

    Shape:
        src ``(B, S)`` → ``B`` hypotheses; cross_attention ``(L, H, T, S_b)`` each
    """
    if beam_size < 1:
        raise ValueError(f"beam_size must be ≥ 1, got {beam_size}")
    src_mask = _check_src(src, src_mask, pad_id)
    B, K, dev = src.shape[0], beam_size, src.device
    rows = torch.arange(B, device=dev).repeat_interleave(K)  # (B·K,) sentence of each row
    state = model.start(src.index_select(0, rows), src_mask.index_select(0, rows))
    tokens = torch.full((B * K, 1), bos_id, dtype=torch.long, device=dev)  # (B·K, 1)
    # Only the first beam is live at the start; the others are copies that must not be chosen.
    scores = torch.full((B, K), float("-inf"), device=dev)
    scores[:, 0] = 0.0
    history = torch.empty((B * K, 0), dtype=torch.long, device=dev)  # (B·K, t)
    finished = torch.zeros(B * K, dtype=torch.bool, device=dev)
    lengths = torch.zeros(B * K, dtype=torch.long, device=dev)
    attn_hist: Tensor | None = None  # (B·K, t, L, H, S)
    for _ in range(max_len):
        step = model.step(tokens, state, need_weights=return_attention)
        logp = torch.log_softmax(step.logits.float(), dim=-1)  # (B·K, V)
        V = logp.shape[-1]
        # A finished hypothesis can only "extend" by padding at no cost: its score is frozen.
        frozen = torch.full_like(logp, float("-inf"))
        frozen[:, pad_id] = 0.0
        logp = torch.where(finished.unsqueeze(1), frozen, logp)
        cand = (scores.view(B * K, 1) + logp).view(B, K * V)  # (B, K·V)
        scores, flat = cand.topk(K, dim=-1)  # (B, K)
        beam, tok = flat // V, flat % V  # (B, K) each
        index = (torch.arange(B, device=dev).unsqueeze(1) * K + beam).view(-1)  # (B·K,)
        tok = tok.view(-1)  # (B·K,)
        state.reorder(index)
        finished = finished.index_select(0, index)
        lengths = lengths.index_select(0, index) + (~finished).long()
        history = torch.cat([history.index_select(0, index), tok.unsqueeze(1)], dim=1)  # (B·K, t+1)
        if return_attention:
            new = step.cross_weights.index_select(0, index).unsqueeze(1)  # (B·K, 1, L, H, S)
            attn_hist = new if attn_hist is None else torch.cat([attn_hist.index_select(0, index), new], dim=1)
        finished = finished | (tok == eos_id)
        if bool(finished.all()):
            break
        tokens = tok.unsqueeze(1)  # (B·K, 1)
    # Lengths count the EOS token; the penalty uses the number of real tokens plus EOS as GNMT.
    penalties = torch.tensor([length_penalty(int(n), alpha) for n in lengths.tolist()], device=dev)
    final = scores.view(-1) / penalties  # (B·K,)
    final = final.masked_fill(~torch.isfinite(scores.view(-1)), float("-inf"))
    best = final.view(B, K).argmax(dim=-1)  # (B,)
    hyps = []
    for b in range(B):
        r = b * K + int(best[b])
        seq = history[r].tolist()
        n = seq.index(eos_id) if eos_id in seq else len(seq)
        cross = None
        if return_attention:
            steps = min(n + 1, attn_hist.shape[1])
            cross = attn_hist[r, :steps].permute(1, 2, 0, 3)[..., src_mask[b]]  # (L, H, T, S_b)
        hyps.append(Hypothesis(seq[:n], float(final[r]), cross))
    return hyps
