"""SQuAD-format question answering data: the reader, the generated facts splits, and the windows
``[CLS] question [SEP] passage [SEP]`` a BERT span head reads.

**Offsets.** Answers are character spans of the passage, the model predicts token positions. The
HuggingFace tokenizer reports each token's character span in the original text (through
lower-casing and accent handling), so an answer's characters map to its first and last token for
training, and a predicted token span maps back to the exact passage text for the answer.

**Long passages** are cut into overlapping windows of ``max_length`` tokens, ``doc_stride`` passage
tokens apart (Devlin et al. 2019's SQuAD setup). Training uses the windows that contain the whole
answer; prediction scores every window and keeps the best span over all of them.

Shape:
    batches ``(B, S)`` of windows. Letters: ``B`` windows in a batch, ``S`` tokens.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Protocol

import torch

from ..functional import padding_mask
from . import batching
from .text_tasks import make_qa_task
from .tokenizers import PretrainedTokenizer

Tensor = torch.Tensor

__all__ = [
    "QABatch",
    "QAExample",
    "QASplits",
    "QAWindow",
    "WindowSettings",
    "collate_windows",
    "facts_splits",
    "question_windows",
    "read_squad",
    "squad_examples",
    "window_batches",
]


@dataclass
class QAExample:
    id: str  # the question's id
    question: str
    context: str  # the passage
    answers: list[tuple[str, int]]  # (text, character offset in context); SQuAD dev sets have several


def _locate(context: str, text: str, start: int) -> int | None:
    """``start`` if the answer is there, else the occurrence of ``text`` nearest to it (None: absent)."""
    if context[start : start + len(text)] == text:
        return start
    hits = [m.start() for m in re.finditer(re.escape(text), context)]
    return min(hits, key=lambda h: abs(h - start)) if hits else None


def read_squad(path: str | os.PathLike) -> list[QAExample]:
    """The answerable questions of a SQuAD-format file (v1.1: ``data → paragraphs → context, qas``).

    An ``answer_start`` that does not point at its text is moved to the nearest occurrence of the
    text; an answer whose text is not in the passage is an error. Questions without answers
    (SQuAD 2.0's unanswerable ones) are skipped with a warning: the span head has no "no answer".

    Raises:
        FileNotFoundError: no such file.
        ValueError: invalid JSON or structure; the message names the file and the entry
            (``data[3].paragraphs[0].qas[2]``).

    Shape:
        one file → N examples.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        root = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    return squad_examples(root, source=str(path))


def squad_examples(root: dict, *, source: str = "SQuAD data") -> list[QAExample]:
    """The answerable questions of a SQuAD-format object already in memory (see :func:`read_squad`).

    Shape:
        one dataset → N examples.
    """

    def need(cond: bool, where: str, what: str) -> None:
        if not cond:
            raise ValueError(f"{source}: {where}: {what}")

    need(
        isinstance(root, dict) and isinstance(root.get("data"), list),
        "top level",
        'expected {"data": [...]} (SQuAD format)',
    )
    examples, unanswerable = [], 0
    for a, article in enumerate(root["data"]):
        need(
            isinstance(article, dict) and isinstance(article.get("paragraphs"), list),
            f"data[{a}]",
            'expected {"paragraphs": [...]}',
        )
        for p, para in enumerate(article["paragraphs"]):
            where = f"data[{a}].paragraphs[{p}]"
            need(
                isinstance(para, dict) and isinstance(para.get("context"), str) and para["context"].strip(),
                where,
                '"context" must be a non-empty string',
            )
            need(isinstance(para.get("qas"), list), where, '"qas" must be a list')
            context = para["context"]
            for q, qa in enumerate(para["qas"]):
                where_q = f"{where}.qas[{q}]"
                need(
                    isinstance(qa, dict) and isinstance(qa.get("question"), str) and qa["question"].strip(),
                    where_q,
                    '"question" must be a non-empty string',
                )
                answers = []
                for k, ans in enumerate(qa.get("answers") or []):
                    need(
                        isinstance(ans, dict)
                        and isinstance(ans.get("text"), str)
                        and ans["text"].strip()
                        and isinstance(ans.get("answer_start"), int),
                        f"{where_q}.answers[{k}]",
                        'expected {"text": non-empty string, "answer_start": integer}',
                    )
                    start = _locate(context, ans["text"], ans["answer_start"])
                    need(start is not None, f"{where_q}.answers[{k}]", f"answer {ans['text']!r} is not in the context")
                    answers.append((ans["text"], start))
                if not answers:
                    unanswerable += 1
                    continue
                examples.append(QAExample(str(qa.get("id", f"{a}-{p}-{q}")), qa["question"], context, answers))
    if unanswerable:
        warnings.warn(
            f"{source}: skipped {unanswerable} question(s) without answers (SQuAD 2.0 unanswerable "
            "questions are not supported)",
            stacklevel=3,
        )
    if not examples:
        raise ValueError(f"{source}: no answerable questions")
    return examples


class QASplits(NamedTuple):
    """Generated train/valid/test questions (paragraphs from different seeds: no shared names).

    Shape:
        each field: a list of :class:`QAExample`.
    """

    train: list[QAExample]
    valid: list[QAExample]
    test: list[QAExample]


def facts_splits(n_train: int, *, seed: int = 0, n_valid: int = 50, n_test: int = 100) -> QASplits:
    """Splits of the generated SQuAD-format facts set (:func:`attnlab.data.text_tasks.make_qa_task`),
    counted in paragraphs of two questions each.

    Shape:
        n_train, n_valid, n_test paragraphs → 2·n questions per split.
    """
    return QASplits(
        *(
            squad_examples(make_qa_task(n, seed=3 * seed + k), source=f"generated facts (seed {3 * seed + k})")
            for k, n in enumerate((n_train, n_valid, n_test))
        )
    )


@dataclass
class QAWindow:
    """One window of an example: ``[CLS] question [SEP] passage piece [SEP]`` as ids, the passage
    tokens' character spans, and the answer's token positions when it lies inside.

    Shape:
        ``input_ids``: S ids; ``offsets``: C spans (the passage tokens, positions
        ``context_start … context_start + C − 1``)
    """

    example: int  # index of the example it belongs to
    input_ids: list[int]  # [CLS] question [SEP] passage piece [SEP]
    n_question: int  # question tokens (positions 1 … n_question)
    offsets: list[tuple[int, int]]  # character span of each passage token of the window
    start: int = -1  # answer start position in input_ids (-1: the answer is not in this window)
    end: int = -1  # answer end position (inclusive)

    @property
    def context_start(self) -> int:
        """Position of the first passage token (after ``[CLS]``, the question and ``[SEP]``)."""
        return self.n_question + 2


class WindowSettings(Protocol):
    """How examples are cut into windows (a question-answering setup has these fields).

    Shape:
        no tensors; lengths in tokens.
    """

    max_length: int  # tokens per window, [CLS] question [SEP] passage [SEP]
    doc_stride: int  # passage tokens between the starts of consecutive windows
    max_query_tokens: int  # questions are cut to this many tokens


def question_windows(
    tok: PretrainedTokenizer,
    setup: WindowSettings,
    index: int,
    question: str,
    context: str,
    answer: tuple[str, int] | None = None,
) -> list[QAWindow]:
    """The windows of one example (the ``index``-th), ``setup.doc_stride`` passage tokens apart.

    ``tok`` is a BERT tokenizer (``bos`` = ``[CLS]``, ``eos`` = ``[SEP]``) that reports character
    offsets. With ``answer`` = ``(text, character offset)``, each window that holds the whole
    answer gets its token positions (``start``/``end``); the others keep -1.

    Shape:
        one question and passage → W windows of at most ``setup.max_length`` ids
    """
    q_ids, _ = tok.encode_with_offsets(question)
    q_ids = q_ids[: setup.max_query_tokens]
    if not q_ids:
        raise ValueError(f"question {question!r} has no tokens")
    c_ids, c_offsets = tok.encode_with_offsets(context)
    if not c_ids:
        raise ValueError(f"context {context[:60]!r} has no tokens")
    room = setup.max_length - len(q_ids) - 3
    if room < 1:
        raise ValueError(
            f"max_length={setup.max_length} leaves no room for the passage after a {len(q_ids)}-token question"
        )
    tok_start = tok_end = None
    if answer is not None:
        a_start, a_end = answer[1], answer[1] + len(answer[0])
        # First token ending after the answer starts, last token starting before it ends; an
        # answer made only of characters the tokenizer drops has no tokens and labels no window.
        tok_start = next((i for i, (s, e) in enumerate(c_offsets) if e > a_start), None)
        tok_end = max((i for i, (s, e) in enumerate(c_offsets) if s < a_end), default=None)
        if tok_start is None or tok_end is None or tok_end < tok_start:
            tok_start = tok_end = None
    out = []
    first = 0
    while True:
        piece = slice(first, min(first + room, len(c_ids)))
        w = QAWindow(index, [tok.bos_id, *q_ids, tok.eos_id, *c_ids[piece], tok.eos_id], len(q_ids), c_offsets[piece])
        if tok_start is not None and piece.start <= tok_start and tok_end < piece.stop:
            w.start, w.end = w.context_start + tok_start - first, w.context_start + tok_end - first
        out.append(w)
        if piece.stop >= len(c_ids):
            return out
        first += min(setup.doc_stride, room)


@dataclass
class QABatch:
    """Padded windows.

    Shape:
        every tensor ``(B, S)`` except start/end ``(B,)``
    """

    input_ids: Tensor  # (B, S) padded with the tokenizer's pad id
    token_type_ids: Tensor  # (B, S) 0 for [CLS] question [SEP], 1 for passage [SEP]
    attention_mask: Tensor  # (B, S) True at real tokens
    span_mask: Tensor  # (B, S) True at passage tokens (possible answer starts/ends)
    start: Tensor  # (B,) answer start positions (-1 when unknown)
    end: Tensor  # (B,) answer end positions

    def to(self, device) -> QABatch:
        return QABatch(*(getattr(self, f.name).to(device) for f in dataclasses.fields(self)))


def collate_windows(windows: Sequence[QAWindow], pad_id: int) -> QABatch:
    """Pad windows into one batch with its segment ids, attention mask and passage (span) mask.

    Shape:
        B windows → a :class:`QABatch` of ``(B, S)`` tensors, ``S`` the longest window
    """
    lengths = torch.tensor([len(w.input_ids) for w in windows])  # (B,)
    S = int(lengths.max())
    ids = torch.tensor([w.input_ids + [pad_id] * (S - len(w.input_ids)) for w in windows])  # (B, S)
    passage_start = torch.tensor([w.context_start for w in windows])  # (B,)
    passage_end = torch.tensor([w.context_start + len(w.offsets) for w in windows])  # (B,)
    before_passage = padding_mask(passage_start, max_len=S)  # (B, S) j < start
    to_passage_end = padding_mask(passage_end, max_len=S)  # (B, S) j < end
    attention_mask = padding_mask(lengths, max_len=S)  # (B, S)
    return QABatch(
        input_ids=ids,
        token_type_ids=(~before_passage & attention_mask).long(),  # (B, S) segment B from the passage on
        attention_mask=attention_mask,
        span_mask=to_passage_end & ~before_passage,  # (B, S)
        start=torch.tensor([w.start for w in windows]),
        end=torch.tensor([w.end for w in windows]),
    )


def window_batches(
    windows: Sequence[QAWindow],
    max_tokens: int,
    *,
    shuffle: bool,
    seed: int = 0,
    epoch: int = 0,
    rank: int = 0,
    world_size: int = 1,
) -> list[list[int]]:
    """Index batches of windows of similar length, at most ``max_tokens`` padded tokens each
    (:func:`attnlab.data.batching.bucket_batches`).

    Shape:
        W windows → lists of window indices
    """
    lengths = [len(w.input_ids) for w in windows]
    return batching.bucket_batches(
        lengths,
        [1] * len(windows),
        max_tokens=max_tokens,
        shuffle=shuffle,
        seed=seed,
        epoch=epoch,
        rank=rank,
        world_size=world_size,
    )
