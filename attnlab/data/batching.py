"""Length-bucketed batching with a token cap, collation into padded tensors, and pair encoding.

Sentences vary from 3 to 40+ tokens. Batching random sentences together pads every
short one up to the longest, wasting most of the compute; a fixed batch *size* also makes
memory use swing with sentence length. So, as in "Attention Is All You Need" §5.1
("sentence pairs were batched together by approximate sequence length"), batches are
groups of similar length whose *padded* size is capped:

    batch size × max(source length, target length) ≤ max_tokens

Pipeline: ``encode_pairs`` → ``pair_lengths`` → ``bucket_batches`` (indices per batch, per
epoch, per rank) → ``collate_pairs`` (padded tensors and masks).

Shape:
    ``collate_pairs`` returns ``src (B, S)``, ``tgt_in (B, T)``, ``tgt_out (B, T)``,
    ``src_mask (B, S)``, ``tgt_mask (B, T)``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import torch
from torch import Tensor

from ..functional import padding_mask
from .tokenizers import Tokenizer

__all__ = ["Seq2SeqBatch", "bucket_batches", "collate_pairs", "encode_pairs", "pair_lengths"]

IdPair = tuple[list[int], list[int]]


def encode_pairs(
    pairs: Sequence[tuple[str, str]],
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    max_len: int | None = None,
) -> list[IdPair]:
    """Tokenize ``(source, target)`` text pairs into id pairs (no BOS/EOS; ``collate_pairs`` adds them).

    With ``max_len``, pairs whose source or target has more than ``max_len`` ids are dropped
    (use it for training data only: evaluation must see every sentence). Compare the
    lengths of input and output to know how many were dropped.

    Shape:
        pairs: N text pairs → at most N ``(src_ids, tgt_ids)``.
    """
    if max_len is not None and max_len < 1:
        raise ValueError(f"max_len must be at least 1, got {max_len}")
    src_ids = src_tok.encode_batch([src for src, _ in pairs])
    tgt_ids = tgt_tok.encode_batch([tgt for _, tgt in pairs])
    encoded = list(zip(src_ids, tgt_ids))
    if max_len is not None:
        encoded = [(s, t) for s, t in encoded if len(s) <= max_len and len(t) <= max_len]
    return encoded


def pair_lengths(pairs: Sequence[IdPair]) -> tuple[list[int], list[int]]:
    """The lengths ``collate_pairs`` will pad to: ``len(src)`` and ``len(tgt) + 1`` (BOS/EOS added).

    Shape:
        pairs: N id pairs → two lists of N lengths.
    """
    return [len(s) for s, _ in pairs], [len(t) + 1 for _, t in pairs]


def bucket_batches(
    src_lengths: Sequence[int],
    tgt_lengths: Sequence[int],
    *,
    max_tokens: int,
    shuffle: bool = True,
    seed: int = 0,
    epoch: int = 0,
    rank: int = 0,
    world_size: int = 1,
) -> list[list[int]]:
    """Group example indices into batches of similar length with at most ``max_tokens`` padded tokens.

    Each batch satisfies ``len(batch) * max(max src len, max tgt len) <= max_tokens``.
    An example longer than ``max_tokens`` on its own cannot satisfy the cap, so it raises a
    ``ValueError`` naming it (drop such pairs with ``encode_pairs(max_len=...)`` or raise
    ``max_tokens``) rather than silently blowing the memory budget the cap exists for.

    With ``shuffle`` the result depends only on ``(seed, epoch)``: examples are shuffled,
    stably sorted by length (so equal-length examples meet different partners each epoch),
    packed greedily, and the batch order is shuffled. Without it, batches come shortest
    first and ``seed``/``epoch`` are ignored.

    Sharding for distributed training: the epoch's batches are made a multiple of
    ``world_size`` by halving the largest batches (which keeps every cap), and rank ``r``
    gets batches ``r, r + world_size, ...``. So every rank gets the same number of
    batches, the ranks' batches are disjoint, and together they hold every example
    exactly once.

    Raises:
        ValueError: mismatched lengths, an over-long example, bad rank/world_size, or too
            few examples to give every rank a batch.

    Shape:
        src_lengths, tgt_lengths: N ints → this rank's list of batches of indices into N.
    """
    n = len(src_lengths)
    if len(tgt_lengths) != n:
        raise ValueError(f"got {n} source lengths but {len(tgt_lengths)} target lengths")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
    if n == 0:
        return []
    if n < world_size:
        raise ValueError(f"cannot give each of {world_size} ranks a batch from only {n} examples")
    lengths = [max(int(s), int(t)) for s, t in zip(src_lengths, tgt_lengths)]
    longest = max(range(n), key=lengths.__getitem__)
    if lengths[longest] > max_tokens:
        raise ValueError(
            f"example {longest} has length {lengths[longest]} > max_tokens={max_tokens}; "
            "raise max_tokens or drop long pairs with encode_pairs(max_len=...)"
        )

    rng = random.Random(f"attnlab/bucket/{seed}/{epoch}")
    order = list(range(n))
    if shuffle:
        rng.shuffle(order)
    order.sort(key=lengths.__getitem__)  # stable: ties keep their shuffled order

    batches: list[list[int]] = []
    current: list[int] = []
    current_max = 0
    for i in order:
        new_max = max(current_max, lengths[i])
        if current and (len(current) + 1) * new_max > max_tokens:
            batches.append(current)
            current, new_max = [], lengths[i]
        current.append(i)
        current_max = new_max
    batches.append(current)

    while len(batches) % world_size:
        # Halve the batch with the most examples (the first such one, for determinism).
        biggest = max(range(len(batches)), key=lambda b: len(batches[b]))
        batch = batches[biggest]
        if len(batch) < 2:
            raise ValueError(
                f"{n} examples, one per batch under max_tokens={max_tokens}, cannot be split "
                f"evenly over world_size={world_size} ranks; raise max_tokens"
            )
        half = len(batch) // 2
        batches[biggest : biggest + 1] = [batch[:half], batch[half:]]

    if shuffle:
        rng.shuffle(batches)
    return batches[rank::world_size]


@dataclass
class Seq2SeqBatch:
    """A padded batch for an encoder–decoder, with teacher forcing inputs and targets.

    ``tgt_in`` is BOS + y and ``tgt_out`` is y + EOS: the decoder reads ``tgt_in[:, :t+1]``
    and is trained to predict ``tgt_out[:, t]``. Masks are True at real tokens.

    Shape:
        src (B, S), tgt_in (B, T), tgt_out (B, T) int64; src_mask (B, S), tgt_mask (B, T) bool.
    """

    src: Tensor  # (B, S) source ids, padded with pad_id
    tgt_in: Tensor  # (B, T) BOS + target ids, padded with pad_id
    tgt_out: Tensor  # (B, T) target ids + EOS, padded with pad_id (loss ignores pad)
    src_mask: Tensor  # (B, S) True at real source tokens
    tgt_mask: Tensor  # (B, T) True at real target positions (same for tgt_in and tgt_out)
    n_src_tokens: int  # real source tokens in the batch
    n_tgt_tokens: int  # real target positions = tokens the loss is computed on

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Seq2SeqBatch:
        """A copy with every tensor moved to ``device``."""
        moved = {
            f.name: getattr(self, f.name).to(device, non_blocking=non_blocking)
            for f in fields(self)
            if isinstance(getattr(self, f.name), Tensor)
        }
        return replace(self, **moved)

    def __len__(self) -> int:
        return self.src.shape[0]


def collate_pairs(pairs: Sequence[IdPair], *, pad_id: int, bos_id: int, eos_id: int) -> Seq2SeqBatch:
    """Pad id pairs into a :class:`Seq2SeqBatch` (adds BOS to the decoder input and EOS to its target).

    Raises:
        ValueError: an empty batch or an empty source (the encoder would have nothing to attend to).

    Shape:
        pairs: B ``(src_ids, tgt_ids)`` → src (B, S), tgt_in/tgt_out (B, T) with
        S = max len(src), T = max len(tgt) + 1.
    """
    if not pairs:
        raise ValueError("cannot collate an empty batch")
    for i, (src, _) in enumerate(pairs):
        if len(src) == 0:
            raise ValueError(f"pair {i} of the batch has an empty source")
    src_lengths = torch.tensor([len(s) for s, _ in pairs])  # (B,)
    tgt_lengths = torch.tensor([len(t) + 1 for _, t in pairs])  # (B,)
    S, T = int(src_lengths.max()), int(tgt_lengths.max())
    # Pad as Python lists and convert once: one tensor per batch instead of 3B small copies.
    src = torch.tensor([list(s) + [pad_id] * (S - len(s)) for s, _ in pairs], dtype=torch.long)  # (B, S)
    tgt_in = torch.tensor([[bos_id, *t] + [pad_id] * (T - 1 - len(t)) for _, t in pairs], dtype=torch.long)  # (B, T)
    tgt_out = torch.tensor([[*t, eos_id] + [pad_id] * (T - 1 - len(t)) for _, t in pairs], dtype=torch.long)  # (B, T)
    return Seq2SeqBatch(
        src=src,
        tgt_in=tgt_in,
        tgt_out=tgt_out,
        src_mask=padding_mask(src_lengths, max_len=S),  # (B, S)
        tgt_mask=padding_mask(tgt_lengths, max_len=T),  # (B, T)
        n_src_tokens=int(src_lengths.sum()),
        n_tgt_tokens=int(tgt_lengths.sum()),
    )
