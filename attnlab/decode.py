"""Decoding: turning a trained model's next-token distributions into sequences.

Sequence-to-sequence models (the Transformer, the RNN encoder–decoders, the captioner, the
pointer-generator) are decoded through one small protocol,
:class:`~attnlab.models.seq2seq.Seq2SeqModel`, so the search code below knows nothing about their
insides: ``model.start(src, src_mask)`` encodes the source once, ``model.step(tokens, state,
need_weights=...)`` advances every row by one token, and ``state.reorder(index)`` keeps the given
rows (beam search).

Every search and :func:`generate` take ``engine``, the key that picks what computes the model's
steps (as Hugging Face picks an attention implementation and CTranslate2 a compute type):
``"auto"``, attnlab's native engine where it can run (:mod:`attnlab.accel.engine`: one call of its
C kernels per step), else the model's modules; ``"modules"``, the modules alone (the reference).
Both give the same numbers up to rounding (tests/accel/test_native_paths.py).

Decoder-only language models (GPT) are sampled by :func:`generate` / :func:`iter_generate`
(greedy, temperature, top-k, top-p) with a key/value cache; see the section at the end.

Shape letters: ``B`` batch, ``K`` beam size, ``S`` source length, ``T`` output length,
``V`` vocabulary, ``L`` layers, ``H`` heads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from .accel import engine as engines
from .accel import kernels
from .models.seq2seq import Seq2SeqModel

Tensor = torch.Tensor

__all__ = [
    "Hypothesis",
    "greedy_decode",
    "beam_search",
    "beam_advance",
    "beams_decided",
    "check_beam",
    "length_penalty",
    "MAX_BEAM",
    "MAX_NEW_TOKENS",
    "Generation",
    "sampling_probs",
    "sample_next",
    "iter_generate",
    "generate",
]


@dataclass
class Hypothesis:
    tokens: list[int]  # generated ids, without BOS and EOS
    score: float  # total log-probability (beam search: divided by the length penalty)
    cross_attention: Tensor | None = (
        None  # (L, H, T, S) over the real source positions, if asked (None: model without attention)
    )


#: The most tokens one call generates per sequence (``max_len`` of the seq2seq decoders,
#: ``max_new_tokens`` of :func:`generate`): far beyond any output attnlab's models are trained
#: for, it stops a mistyped length before it allocates the output or runs for hours.
MAX_NEW_TOKENS = 100_000


def _check_length(name: str, value: int, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= MAX_NEW_TOKENS:
        raise ValueError(
            f"{name} must be an integer from {minimum} to {MAX_NEW_TOKENS:,} "
            f"(attnlab.decode.MAX_NEW_TOKENS), got {value!r}"
        )


def _check_src(src: Tensor, src_mask: Tensor | None, pad_id: int) -> Tensor:
    if src.dim() != 2:
        raise ValueError(f"src must have shape (B, S), got {tuple(src.shape)}")
    if src.shape[1] == 0:
        raise ValueError("src is empty: nothing to translate")
    return src != pad_id if src_mask is None else src_mask


@torch.no_grad()
def greedy_decode(
    model: Seq2SeqModel,
    src: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    pad_id: int = 0,
    max_len: int = 128,
    src_mask: Tensor | None = None,
    return_attention: bool = False,
    engine: str = "auto",
) -> list[Hypothesis]:
    """Pick the most likely next token at every step, for a whole batch at once. ``engine``:
    ``"auto"`` or ``"modules"`` (see the module docstring).

    Shape:
        src ``(B, S)`` → ``B`` hypotheses; cross_attention ``(L, H, T, S_b)`` each
    """
    _check_length("max_len", max_len, 1)
    src_mask = _check_src(src, src_mask, pad_id)
    model = engines.decoder(model, engine)
    B = src.shape[0]
    state = model.start(src, src_mask)
    tokens = torch.full((B, 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    out = torch.full((B, max_len), pad_id, dtype=torch.long, device=src.device)  # (B, T_max)
    scores = torch.zeros(B, device=src.device)
    lengths = torch.full((B,), max_len, dtype=torch.long, device=src.device)
    # Per sentence, the cross-attention of each step it was decoded in, the EOS step included.
    attn: list[list[Tensor]] = [[] for _ in range(B)]
    # A sentence that has ended is dropped from the batch (state.reorder): a batch costs the sum of
    # its sentences' lengths, not its size times the longest one. `alive` maps rows to sentences.
    alive = torch.arange(B, device=src.device)  # (b,)
    for t in range(max_len):
        step = model.step(tokens, state, need_weights=return_attention)
        logits = step.logits.float()  # (b, V)
        fast = kernels.top_k_log_softmax(logits, 1)  # the same numbers up to rounding, one pass
        if fast is not None:
            best_logp, nxt = fast[0].squeeze(1), fast[1].squeeze(1)  # (b,)
        else:
            best_logp, nxt = torch.log_softmax(logits, dim=-1).max(dim=-1)  # (b,)
        out[alive, t] = nxt
        scores[alive] += best_logp
        if return_attention and step.cross_weights is not None:  # None: the model has no attention
            for row, b in enumerate(alive.tolist()):
                attn[b].append(step.cross_weights[row])  # (L, H, S)
        finished = nxt == eos_id  # (b,)
        if bool(finished.any()):
            lengths[alive[finished]] = t
            if bool(finished.all()):
                break
            keep = (~finished).nonzero().squeeze(1)  # (b',)
            state.reorder(keep)
            alive, nxt = alive[keep], nxt[keep]
        tokens = nxt.unsqueeze(1)  # (b, 1)
    hyps = []
    for b in range(B):
        cross = None
        if attn[b]:
            cross = torch.stack(attn[b], dim=2)[..., src_mask[b]]  # (L, H, T, S_b)
        hyps.append(Hypothesis(out[b, : int(lengths[b])].tolist(), float(scores[b]), cross))
    return hyps


#: The widest beam :func:`beam_search` accepts. Each step scores beam_size × V extensions of every
#: sentence, so the time grows with the beam while the quality does not: it levels off after a few
#: beams and can drop for wide ones (Koehn & Knowles 2017, "Six Challenges for Neural Machine
#: Translation"). 64 leaves room to experiment and stops a mistyped ``--beam 100000`` at once.
MAX_BEAM = 64


def check_beam(beam_size: int, alpha: float = 0.6, vocab_size: int | None = None) -> None:
    """Raise ``ValueError`` unless ``beam_size`` is an integer in 1 … :data:`MAX_BEAM` (and at most
    ``vocab_size``, when given: a beam wider than the vocabulary has nothing to keep) and ``alpha``,
    the length-penalty exponent, is a finite number ≥ 0."""
    if not isinstance(beam_size, int) or isinstance(beam_size, bool) or beam_size < 1:
        raise ValueError(f"beam size must be an integer ≥ 1, got {beam_size!r}")
    if beam_size > MAX_BEAM:
        raise ValueError(
            f"beam size {beam_size} is over the limit of {MAX_BEAM} (attnlab.decode.MAX_BEAM); "
            "wider beams cost time and rarely help"
        )
    if vocab_size is not None and beam_size > vocab_size:
        raise ValueError(f"beam size {beam_size} is larger than the vocabulary ({vocab_size} tokens)")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (math.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha (the length-penalty exponent) must be a finite number ≥ 0, got {alpha!r}")


def length_penalty(length: int, alpha: float) -> float:
    """GNMT's length normaliser ``((5 + |Y|) / 6)^α`` (Wu et al. 2016, §7); α = 0 disables it."""
    return ((5.0 + length) / 6.0) ** alpha


def beams_decided(scores: Tensor, finished: Tensor, lengths: Tensor, alpha: float, max_len: int) -> Tensor:
    """Which sentences are decided: a finished hypothesis already beats all that the live ones
    could still become, so that decoding on cannot change the result (every beam finished
    included).

    A live hypothesis's log-probability only falls as tokens are added, and its length penalty is
    at most that of ``max_len`` tokens; the score is ≤ 0, so ``score / length_penalty(max_len)``
    bounds its final value. Without this exit a sentence whose best hypothesis ended at step 5
    would decode to ``max_len`` until its last beam slot also ended. Once a sentence is decided
    its best finished hypothesis also stays in the beam (no live score is above it), so stopping
    it gives what decoding on would.

    :func:`beam_search` stops a sentence where this is True (its early exit).

    Shape:
        scores, finished, lengths ``(N, K)`` → ``(N,)`` bool
    """
    penalty = ((5.0 + lengths.to(scores.dtype)) / 6.0) ** alpha  # (N, K), as length_penalty
    best_done = torch.where(finished, scores / penalty, float("-inf")).amax(dim=1)  # (N,)
    live = ~finished & torch.isfinite(scores)
    bound = torch.where(live, scores / length_penalty(max_len, alpha), float("-inf")).amax(dim=1)  # (N,)
    return best_done >= bound


@torch.no_grad()
def beam_search(
    model: Seq2SeqModel,
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
    engine: str = "auto",
) -> list[Hypothesis]:
    """Keep the ``beam_size`` best partial translations per sentence, batched over sentences.

    All ``B·K`` hypotheses decode together as rows of one batch; after each step the best ``K``
    of the ``K·V`` extensions of each sentence survive, and the decoder state is reordered to
    follow them. A hypothesis that emitted EOS stays in the beam with a frozen score; the final
    choice divides each score by :func:`length_penalty`. A sentence is done when every one of its
    hypotheses has ended, or earlier once no live one can still beat its best finished one (the
    same result, fewer steps); done sentences leave the batch, so that a batch costs the sum of
    its sentences' searches rather than its size times the longest one. With ``beam_size=1``
    this is exactly :func:`greedy_decode`. ``engine``: ``"auto"`` or ``"modules"`` (see the module
    docstring).

    Raises:
        ValueError: a beam size or ``alpha`` that :func:`check_beam` refuses, a beam wider than the
            model's vocabulary (found at the first step), or a malformed ``src``.

    Shape:
        src ``(B, S)`` → ``B`` hypotheses; cross_attention ``(L, H, T, S_b)`` each
    """
    check_beam(beam_size, alpha)
    _check_length("max_len", max_len, 1)
    src_mask = _check_src(src, src_mask, pad_id)
    model = engines.decoder(model, engine)
    B, K, dev = src.shape[0], beam_size, src.device
    # Encode each sentence once, and run the first step on one row per sentence: its K beams
    # would all be the same hypothesis, BOS. The K rows appear after it, when the K best first
    # tokens are known; a state that can (the Transformer's) then keeps the source side once per
    # sentence and gives each its K decoder rows, any other is copied to the K rows by reorder.
    state = model.start(src, src_mask)
    expand = getattr(state, "expand", None)
    # The search runs on the n sentences not done yet, k rows each (1 before the first step, K
    # after): `sentence` maps them to the batch, rows j·k … j·k + k − 1 are the j-th's.
    sentence = torch.arange(B, device=dev)  # (n,)
    tokens = torch.full((B, 1), bos_id, dtype=torch.long, device=dev)  # (n·k, 1)
    scores = torch.zeros((B, 1), device=dev)  # (n, k)
    history = torch.empty((B, 0), dtype=torch.long, device=dev)  # (n·k, t)
    # The step at which each hypothesis emitted EOS; max_len while it is live.
    ended = torch.full((B,), max_len, dtype=torch.long, device=dev)  # (n·k,)
    attn_hist: Tensor | None = None  # (n·k, t, L, H, S)
    hyps: list[Hypothesis | None] = [None] * B
    for t in range(max_len):
        step = model.step(tokens, state, need_weights=return_attention)
        logits = step.logits.float()  # (n·k, V)
        n, V = scores.shape[0], logits.shape[-1]
        if K > V:
            check_beam(K, alpha, V)  # raises: fewer tokens than beams
        # attnlab's kernel computes what beam_advance does in one call (one pass over each row's logits,
        # no (n·k, V) array of log-probabilities); the same numbers up to rounding (tested).
        fast = kernels.beam_step(logits, scores, ended, t, max_len, eos_id, pad_id, K)
        if fast is not None:
            scores, index, tok, ended = fast  # (n, K), then (n·K,) each
        else:
            scores, index, tok, ended = beam_advance(logits, scores, ended, t, max_len, eos_id, pad_id, K)
        history = torch.cat([history.index_select(0, index), tok.unsqueeze(1)], dim=1)  # (n·K, t+1)
        if return_attention and step.cross_weights is not None:  # None: the model has no attention
            new = step.cross_weights.index_select(0, index).unsqueeze(1)  # (n·K, 1, L, H, S)
            attn_hist = new if attn_hist is None else torch.cat([attn_hist.index_select(0, index), new], dim=1)
        finished = (ended <= t).view(n, K)
        lengths = (ended.clamp(max=t) + 1).view(n, K)  # (n, K) tokens counting EOS, as GNMT's |Y|
        keep = None
        if t == max_len - 1:
            done = torch.ones(n, dtype=torch.bool, device=dev)
        elif bool(finished.any()):  # (a sentence with no finished hypothesis is not done)
            done = finished.all(dim=1) | beams_decided(scores, finished, lengths, alpha, max_len)  # (n,)
        else:
            done = None
        if done is not None and bool(done.any()):
            gone = done.nonzero().squeeze(1)  # (d,)
            _finish(hyps, gone, sentence, scores, lengths, ended, history, attn_hist, src_mask, alpha)
            if bool(done.all()):
                break
            keep = (~done).nonzero().squeeze(1)  # (n',)
            rows = (keep.unsqueeze(1) * K + torch.arange(K, device=dev)).view(-1)  # (n'·K,)
            index, tok = index.index_select(0, rows), tok.index_select(0, rows)
            sentence, scores = sentence[keep], scores[keep]
            ended, history = ended[rows], history[rows]
            if attn_hist is not None:
                attn_hist = attn_hist[rows]
        if t == 0 and K > 1 and callable(expand):
            if keep is not None:
                state.reorder(keep)  # still one row per sentence
            expand(K)
        elif K > 1 or keep is not None:  # (one beam with no sentence done: every row stays)
            state.reorder(index)
        tokens = tok.unsqueeze(1)  # (n·K, 1)
    return hyps  # type: ignore[return-value]


def beam_advance(
    logits: Tensor, scores: Tensor, ended: Tensor, t: int, max_len: int, eos_id: int, pad_id: int, K: int
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One step of :func:`beam_search` in PyTorch (the reference of
    :func:`attnlab.accel.kernels.beam_step`): each live row offers its ``K`` best extensions, a
    finished one (``ended < t``) itself, extended by padding at no cost, and each sentence keeps the
    ``K`` best of its rows' offers.

    Shape:
        logits ``(n·k, V)``; scores ``(n, k)``; ended ``(n·k,)`` → scores ``(n, K)``, and per new row
        ``(n·K,)``: the row it extends, its token, the step at which it ended
    """
    (n, k), dev = scores.shape, logits.device
    logp = torch.log_softmax(logits, dim=-1)  # (n·k, V)
    # A sentence's K best extensions are among the K best of each of its rows, so one pass over the
    # vocabulary picks those per row, and the sentence chooses among its k·K.
    best_logp, best_tok = logp.topk(K, dim=-1)  # (n·k, K)
    # A finished hypothesis can only "extend" by padding at no cost: its score is frozen.
    finished = (ended < t).unsqueeze(1)  # (n·k, 1)
    best_logp = best_logp.masked_fill(finished, float("-inf"))
    best_logp[:, :1].masked_fill_(finished, 0.0)
    best_tok[:, :1].masked_fill_(finished, pad_id)
    cand = (scores.view(n * k, 1) + best_logp).view(n, k * K)  # (n, k·K)
    scores, pick = cand.topk(K, dim=-1)  # (n, K)
    first_row = torch.arange(0, n * k, k, device=dev).unsqueeze(1)  # (n, 1) each sentence's first row
    index = (first_row + pick // K).view(-1)  # (n·K,) the row each new hypothesis extends
    tok = best_tok.view(n, k * K).gather(1, pick).view(-1)  # (n·K,)
    ended = ended.index_select(0, index)
    ended = ended.masked_fill((tok == eos_id) & (ended == max_len), t)
    return scores, index, tok, ended


def _finish(
    hyps: list[Hypothesis | None],
    gone: Tensor,
    sentence: Tensor,
    scores: Tensor,
    lengths: Tensor,
    ended: Tensor,
    history: Tensor,
    attn_hist: Tensor | None,
    src_mask: Tensor,
    alpha: float,
) -> None:
    """Write the best hypothesis of the sentences ``gone`` (rows of the search) into ``hyps``.

    The length penalty is computed in double precision, as :func:`length_penalty`'s Python floats.

    Shape:
        gone ``(d,)``; sentence ``(n,)``; scores, lengths ``(n, K)``; ended ``(n·K,)``;
        history ``(n·K, t)``; attn_hist ``(n·K, t, L, H, S)``
    """
    K, t = scores.shape[1], history.shape[1]
    penalty = ((5.0 + lengths[gone].double()) / 6.0).pow(alpha).to(scores.dtype)  # (d, K)
    final = (scores[gone] / penalty).masked_fill(~torch.isfinite(scores[gone]), float("-inf"))  # (d, K)
    best = final.argmax(dim=-1)  # (d,)
    rows = gone * K + best  # (d,)
    best_score = final.gather(1, best.unsqueeze(1)).squeeze(1)  # (d,)
    real = ended[rows].clamp(max=t)  # (d,) tokens before EOS (all t when it never came)
    steps = (real + 1).clamp(max=t)  # (d,) steps decoded, the EOS step included
    found = zip(sentence[gone].tolist(), history[rows].tolist(), real.tolist(), best_score.tolist())
    for (b, seq, n, score), r, m in zip(found, rows.tolist(), steps.tolist()):
        cross = None
        if attn_hist is not None:
            cross = attn_hist[r, :m].permute(1, 2, 0, 3)[..., src_mask[b]]  # (L, H, T, S_b)
        hyps[b] = Hypothesis(seq[:n], score, cross)


# --------------------------------------------------------------------------------------------
# Language-model sampling (decoder-only models such as attnlab.models.gpt.GPT).
#
# Protocol: ``model(input_ids (B, T), caches=...) -> output with .logits (B, T, V)``,
# ``model.new_caches() -> list[KVCache]`` (one per layer) and ``model.config.n_positions``;
# optionally ``model.token_stepper() -> step or None``, where ``step(input_ids (B, 1), caches)``
# computes ``model(input_ids, caches=caches).logits[:, -1]`` (attnlab.models.gpt.GPT); the engine
# (attnlab.accel.engine.stepper) may give a faster one.
# The prompt is fed once ("prefill"); after that each step feeds only the newest token and the
# caches supply the keys/values of everything before it.
# --------------------------------------------------------------------------------------------


@dataclass
class Generation:
    tokens: Tensor  # (B, T0 + N) the prompt followed by the N generated tokens
    logits: Tensor | None = None  # (B, N, V) the raw logits each new token was chosen from, if asked


def _check_sampling(temperature: float, top_k: int | None, top_p: float | None) -> None:
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be a finite number ≥ 0 (0 = greedy), got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be ≥ 1, got {top_k}")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")


def sampling_probs(
    logits: Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> Tensor:
    """The distribution :func:`sample_next` draws the next token from.

    ``temperature == 0`` is greedy: all the probability on the most likely token (the first one
    on a tie, as ``argmax``). Otherwise the logits are divided by the temperature (below 1
    sharpens the distribution, above 1 flattens it), restricted to the ``top_k`` most likely
    tokens and/or to the smallest set whose probability reaches ``top_p`` (nucleus sampling,
    Holtzman et al. 2020, §3.1), and turned into probabilities by a softmax; the tokens left out
    get exactly 0.

    Shape:
        logits ``(B, V)`` → probabilities ``(B, V)`` (float32; each row sums to 1)
    """
    _check_sampling(temperature, top_k, top_p)
    if temperature == 0:
        best = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
        return torch.zeros_like(logits, dtype=torch.float32).scatter(-1, best, 1.0)  # (B, V)
    logits = logits.float() / temperature  # (B, V)
    if top_k is not None and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)  # (B, V) each
        probs = torch.softmax(sorted_logits, dim=-1)  # (B, V)
        # Drop a token once the tokens ranked above it already reach top_p (the first never is).
        drop_sorted = probs.cumsum(dim=-1) - probs >= top_p  # (B, V)
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)  # back to vocabulary order
        logits = logits.masked_fill(drop, float("-inf"))
    return torch.softmax(logits, dim=-1)  # (B, V)


def sample_next(
    logits: Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Choose the next token of every row from its logits.

    ``temperature == 0`` is greedy (argmax). Otherwise a token is drawn from
    :func:`sampling_probs` (temperature, then ``top_k`` and/or ``top_p``).

    Shape:
        logits ``(B, V)`` → token ids ``(B,)``
    """
    _check_sampling(temperature, top_k, top_p)
    if temperature == 0:
        return logits.argmax(dim=-1)  # (B,)
    probs = sampling_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)  # (B,)


# inference_mode rather than no_grad: it also skips autograd's view and version tracking, a
# measurable part of the per-token cost when each step is one position.
@torch.inference_mode()
def iter_generate(
    model,
    input_ids: Tensor,
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    eos_id: int | None = None,
    engine: str = "auto",
) -> Iterator[tuple[Tensor, Tensor]]:
    """Generate continuations token by token, yielding each new token as soon as it is chosen.

    With ``use_cache`` the prompt is fed once and every later step feeds one token against the
    layers' key/value caches; without it every step re-runs the whole sequence (the reference the
    cache is tested against). When the sequence outgrows the model's context window
    (``n_positions``), the uncached path looks at the last ``n_positions`` tokens; the cached path
    re-fills its caches from the last ``n_positions // 2`` tokens whenever they are full, so the
    cost per token stays constant. Rows that emit ``eos_id`` keep emitting it; the iteration
    ends early once every row has. ``engine``: what computes a cached step, ``"auto"`` (attnlab's
    native engine where it can run, else the model's own step) or ``"modules"``.

    Shape:
        input_ids ``(B, T0)`` → yields ``(token (B,), logits (B, V))`` up to ``max_new_tokens`` times
    """
    _check_sampling(temperature, top_k, top_p)
    if input_ids.dim() != 2 or input_ids.shape[1] == 0:
        raise ValueError(f"input_ids must have shape (B, T0) with T0 ≥ 1, got {tuple(input_ids.shape)}")
    _check_length("max_new_tokens", max_new_tokens, 0)
    engines.check_engine(engine)
    n_ctx = model.config.n_positions
    B, T0 = input_ids.shape
    seq = input_ids.new_empty((B, T0 + max_new_tokens))  # (B, T0 + N), filled as we go
    seq[:, :T0] = input_ids
    done = torch.zeros(B, dtype=torch.bool, device=input_ids.device)
    caches = None
    was_training = model.training
    model.eval()
    # The engine's computation of one cached step (attnlab.accel.engine.stepper), or the model's own.
    stepper = engines.stepper(model, engine) if use_cache else None
    try:
        for n in range(T0, T0 + max_new_tokens):  # n = tokens in the sequence so far
            if not use_cache:
                logits = model(seq[:, max(0, n - n_ctx) : n]).logits[:, -1]  # (B, V)
            elif caches is None or len(caches[0]) >= n_ctx:
                # Prefill (first step), or re-fill a full window from its most recent half.
                keep = min(n, n_ctx if caches is None else n_ctx // 2)
                caches = model.new_caches()
                logits = model(seq[:, n - keep : n], caches=caches).logits[:, -1]  # (B, V)
            elif stepper is not None:
                logits = stepper(seq[:, n - 1 : n], caches)  # (B, V), as the line below
            else:
                logits = model(seq[:, n - 1 : n], caches=caches).logits[:, -1]  # (B, V)
            token = sample_next(logits, temperature=temperature, top_k=top_k, top_p=top_p, generator=generator)
            if eos_id is not None:
                token = token.masked_fill(done, eos_id)
                done |= token == eos_id
            seq[:, n] = token
            yield token, logits
            if eos_id is not None and bool(done.all()):
                return
    finally:
        model.train(was_training)


def generate(
    model,
    input_ids: Tensor,
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    eos_id: int | None = None,
    stream: Callable[[Tensor], None] | None = None,
    return_logits: bool = False,
    engine: str = "auto",
) -> Generation:
    """Continue ``input_ids`` by up to ``max_new_tokens`` tokens (see :func:`iter_generate`).

    Args:
        model: a decoder-only LM (see the protocol above this section).
        input_ids: the prompt.
        max_new_tokens: how many tokens to add (fewer if every row reaches ``eos_id``).
        temperature: 0 for greedy decoding; otherwise the sampling temperature.
        top_k: sample only among the k most likely tokens.
        top_p: sample only among the most likely tokens whose probabilities sum to ``top_p``.
        generator: random number generator (reproducible sampling).
        use_cache: keep key/value caches (one position of work per token) instead of
            re-running the whole sequence at every step.
        eos_id: stop a row when it emits this token.
        stream: called with each new token ``(B,)`` as soon as it is chosen.
        return_logits: also return the logits of every step.
        engine: ``"auto"`` (attnlab's native engine where it can run) or ``"modules"``.

    Shape:
        input_ids ``(B, T0)`` → tokens ``(B, T0 + N)``, logits ``(B, N, V)``
    """
    new_tokens, step_logits = [], []
    for token, logits in iter_generate(
        model,
        input_ids,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        generator=generator,
        use_cache=use_cache,
        eos_id=eos_id,
        engine=engine,
    ):
        new_tokens.append(token)
        if return_logits:
            step_logits.append(logits)
        if stream is not None:
            stream(token)
    B = input_ids.shape[0]
    if not new_tokens:
        empty = torch.zeros((B, 0, model.config.vocab_size), device=input_ids.device)  # (B, 0, V)
        return Generation(input_ids.clone(), empty if return_logits else None)
    tokens = torch.cat([input_ids, torch.stack(new_tokens, dim=1)], dim=1)  # (B, T0 + N)
    return Generation(tokens, torch.stack(step_logits, dim=1) if return_logits else None)  # (B, N, V)
