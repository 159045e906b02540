"""Data for attnlab: corpus readers, tokenizers, generated tasks, and length-bucketed batching.

Shape:
    Readers and tasks give lists of ``(source, target)`` strings; ``collate_pairs`` gives
    ``src (B, S)``, ``tgt_in``/``tgt_out (B, T)`` and their ``(B, S)``/``(B, T)`` masks.
"""

from .batching import Seq2SeqBatch, bucket_batches, collate_pairs, encode_pairs, pair_lengths
from .corpus import ParallelCorpus, read_lines, read_parallel, read_tsv
from .tasks import (
    DATE_FORMATS,
    TASKS,
    TaskSplits,
    english_number,
    japanese_numeral,
    make_splits,
    make_task,
    render_date,
)
from .tokenizers import (
    CharTokenizer,
    SpecialTokens,
    SubwordTokenizer,
    Tokenizer,
    build_tokenizers,
    load_tokenizer,
    train_subword_tokenizer,
)

__all__ = [
    "ParallelCorpus",
    "read_parallel",
    "read_tsv",
    "read_lines",
    "SpecialTokens",
    "Tokenizer",
    "SubwordTokenizer",
    "CharTokenizer",
    "train_subword_tokenizer",
    "build_tokenizers",
    "load_tokenizer",
    "TASKS",
    "DATE_FORMATS",
    "TaskSplits",
    "english_number",
    "japanese_numeral",
    "render_date",
    "make_task",
    "make_splits",
    "Seq2SeqBatch",
    "bucket_batches",
    "collate_pairs",
    "encode_pairs",
    "pair_lengths",
]
