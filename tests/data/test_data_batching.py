"""Length bucketing under a token cap, sharding across ranks, and collation into padded tensors."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.data import (
    CharTokenizer,
    Seq2SeqBatch,
    bucket_batches,
    collate_pairs,
    encode_pairs,
    make_task,
    pair_lengths,
)
from attnlab.functional import padding_mask


def random_lengths(n: int, seed: int, low: int = 1, high: int = 40) -> tuple[list[int], list[int]]:
    rng = random.Random(seed)
    return [rng.randint(low, high) for _ in range(n)], [rng.randint(low, high) for _ in range(n)]


def padded_size(batch: list[int], src: list[int], tgt: list[int]) -> int:
    return len(batch) * max(max(src[i], tgt[i]) for i in batch)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 300),
    max_tokens=st.integers(40, 600),
    seed=st.integers(0, 5),
    epoch=st.integers(0, 3),
    shuffle=st.booleans(),
)
def test_batches_respect_cap_and_cover_each_example_once(n, max_tokens, seed, epoch, shuffle):
    src, tgt = random_lengths(n, seed)
    batches = bucket_batches(src, tgt, max_tokens=max_tokens, shuffle=shuffle, seed=seed, epoch=epoch)
    assert all(batch and padded_size(batch, src, tgt) <= max_tokens for batch in batches)
    assert sorted(i for batch in batches for i in batch) == list(range(n))


def test_batches_group_similar_lengths_and_fill_the_budget():
    src, tgt = random_lengths(2000, seed=1, low=3, high=60)
    batches = bucket_batches(src, tgt, max_tokens=1000, seed=0)
    lengths = [max(s, t) for s, t in zip(src, tgt)]
    real = sum(lengths)
    bucketed = sum(padded_size(b, src, tgt) for b in batches)
    # Random batches of the same sizes pad far more.
    order = list(range(len(src)))
    random.Random(0).shuffle(order)
    random_batches, start = [], 0
    for b in batches:
        random_batches.append(order[start : start + len(b)])
        start += len(b)
    unbucketed = sum(padded_size(b, src, tgt) for b in random_batches)
    assert real / bucketed > 0.95
    assert real / unbucketed < 0.75
    assert sum(padded_size(b, src, tgt) for b in batches) / (len(batches) * 1000) > 0.9


def test_order_is_fixed_by_seed_and_epoch():
    src, tgt = random_lengths(500, seed=2)
    a = bucket_batches(src, tgt, max_tokens=300, seed=7, epoch=0)
    assert a == bucket_batches(src, tgt, max_tokens=300, seed=7, epoch=0)
    assert a != bucket_batches(src, tgt, max_tokens=300, seed=7, epoch=1)
    assert a != bucket_batches(src, tgt, max_tokens=300, seed=8, epoch=0)


def test_without_shuffle_batches_come_shortest_first():
    src, tgt = random_lengths(200, seed=3)
    batches = bucket_batches(src, tgt, max_tokens=200, shuffle=False, seed=1, epoch=5)
    assert batches == bucket_batches(src, tgt, max_tokens=200, shuffle=False, seed=2, epoch=0)
    flat = [max(src[i], tgt[i]) for batch in batches for i in batch]
    assert flat == sorted(flat)


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_shards_are_equal_disjoint_and_cover_the_epoch(world_size):
    src, tgt = random_lengths(301, seed=4)
    shards = [
        bucket_batches(src, tgt, max_tokens=250, seed=1, epoch=2, rank=r, world_size=world_size)
        for r in range(world_size)
    ]
    assert len({len(shard) for shard in shards}) == 1
    indices = [i for shard in shards for batch in shard for i in batch]
    assert sorted(indices) == list(range(301))
    assert all(padded_size(b, src, tgt) <= 250 for shard in shards for b in shard)


def test_shards_with_few_examples_and_impossible_splits():
    shards = [bucket_batches([5, 5, 5], [5, 5, 5], max_tokens=100, rank=r, world_size=3) for r in range(3)]
    assert sorted(i for shard in shards for b in shard for i in b) == [0, 1, 2]
    assert all(len(shard) == 1 for shard in shards)
    with pytest.raises(ValueError, match="cannot give each of 4 ranks"):
        bucket_batches([5, 5, 5], [5, 5, 5], max_tokens=100, world_size=4)
    with pytest.raises(ValueError, match="cannot be split evenly"):
        bucket_batches([5, 5, 5], [5, 5, 5], max_tokens=5, world_size=2)


def test_bad_arguments():
    with pytest.raises(ValueError, match="example 1 has length 50 > max_tokens=40"):
        bucket_batches([3, 50, 4], [3, 4, 5], max_tokens=40)
    with pytest.raises(ValueError, match="3 source lengths but 2 target"):
        bucket_batches([1, 2, 3], [1, 2], max_tokens=40)
    with pytest.raises(ValueError, match="rank"):
        bucket_batches([1, 2], [1, 2], max_tokens=40, rank=2, world_size=2)
    assert bucket_batches([], [], max_tokens=10) == []


def test_collate_shapes_bos_eos_and_masks():
    pairs = [([5, 6, 7], [8, 9]), ([10], [11, 12, 13, 14])]
    batch = collate_pairs(pairs, pad_id=0, bos_id=2, eos_id=3)
    assert isinstance(batch, Seq2SeqBatch) and len(batch) == 2
    expected_src = torch.tensor([[5, 6, 7], [10, 0, 0]])
    expected_tgt_in = torch.tensor([[2, 8, 9, 0, 0], [2, 11, 12, 13, 14]])
    expected_tgt_out = torch.tensor([[8, 9, 3, 0, 0], [11, 12, 13, 14, 3]])
    torch.testing.assert_close(batch.src, expected_src)
    torch.testing.assert_close(batch.tgt_in, expected_tgt_in)
    torch.testing.assert_close(batch.tgt_out, expected_tgt_out)
    assert batch.src.dtype == batch.tgt_in.dtype == batch.tgt_out.dtype == torch.long
    torch.testing.assert_close(batch.src_mask, torch.tensor([[True, True, True], [True, False, False]]))
    torch.testing.assert_close(batch.src_mask, padding_mask(tokens=batch.src, pad_id=0))
    torch.testing.assert_close(batch.tgt_mask, padding_mask(tokens=batch.tgt_out, pad_id=0))
    torch.testing.assert_close(batch.tgt_mask, padding_mask(tokens=batch.tgt_in, pad_id=0))
    assert (batch.n_src_tokens, batch.n_tgt_tokens) == (4, 3 + 5)
    moved = batch.to("cpu")
    assert moved is not batch and torch.equal(moved.tgt_out, batch.tgt_out) and moved.n_tgt_tokens == 8


def test_collate_errors():
    with pytest.raises(ValueError, match="empty batch"):
        collate_pairs([], pad_id=0, bos_id=2, eos_id=3)
    with pytest.raises(ValueError, match="pair 1 of the batch has an empty source"):
        collate_pairs([([4], [5]), ([], [5])], pad_id=0, bos_id=2, eos_id=3)


def test_pipeline_from_text_to_capped_batches():
    pairs = make_task("mixed", 400, seed=0)
    src_tok = CharTokenizer.train([s for s, _ in pairs])
    tgt_tok = CharTokenizer.train([t for _, t in pairs])
    encoded = encode_pairs(pairs, src_tok, tgt_tok)
    assert len(encoded) == len(pairs)
    assert src_tok.decode(encoded[0][0]) == pairs[0][0] and tgt_tok.decode(encoded[0][1]) == pairs[0][1]
    src_lengths, tgt_lengths = pair_lengths(encoded)
    max_tokens = 512
    batches = bucket_batches(src_lengths, tgt_lengths, max_tokens=max_tokens, seed=0)
    for indices in batches:
        batch = collate_pairs(
            [encoded[i] for i in indices], pad_id=tgt_tok.pad_id, bos_id=tgt_tok.bos_id, eos_id=tgt_tok.eos_id
        )
        B, S = batch.src.shape
        T = batch.tgt_in.shape[1]
        assert B * max(S, T) <= max_tokens  # the cap holds on the real tensors
    short = encode_pairs(pairs, src_tok, tgt_tok, max_len=12)
    assert 0 < len(short) < len(pairs)
    assert all(len(s) <= 12 and len(t) <= 12 for s, t in short)
    with pytest.raises(ValueError, match="max_len"):
        encode_pairs(pairs, src_tok, tgt_tok, max_len=0)
