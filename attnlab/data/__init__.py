"""Data for attnlab: corpus readers, tokenizers, generated tasks, and length-bucketed batching.

The readers of the other jobs are modules of their own: :mod:`.squad` (SQuAD and its windows),
:mod:`.summaries`, :mod:`.digits` and :mod:`.graphs`.

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
    PretrainedTokenizer,
    SpecialTokens,
    SubwordTokenizer,
    Tokenizer,
    WordVocab,
    build_tokenizers,
    load_hf_tokenizer,
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
    "WordVocab",
    "PretrainedTokenizer",
    "train_subword_tokenizer",
    "build_tokenizers",
    "load_tokenizer",
    "load_hf_tokenizer",
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
