"""The question-answering recipe: SQuAD-format JSON → windows of ``[CLS] question [SEP] passage [SEP]``
→ BERT span head (from MiniLM) → exact match and F1.

``attnlab train qa`` and ``attnlab answer`` are thin wrappers over :func:`train_qa`,
:func:`load_qa` and :meth:`QuestionAnswerer.answer`.

**Offsets.** Answers are character spans of the passage, the model predicts token positions. The
HuggingFace tokenizer reports each token's character span in the original text (through
lower-casing and accent handling), so an answer's characters map to its first and last token for
training, and a predicted token span maps back to the exact passage text for the answer.

**Long passages** are cut into overlapping windows of ``max_length`` tokens, ``doc_stride`` passage
tokens apart (Devlin et al. 2019's SQuAD setup). Training uses the windows that contain the whole
answer; prediction scores every window and keeps the best span over all of them.

**Scores** follow the official SQuAD v1.1 evaluation (written here from its definition): answers
are normalised — lower-cased, punctuation removed, the articles a/an/the removed, whitespace
collapsed — then exact match is equality and F1 the harmonic mean of token precision and recall,
each the maximum over the reference answers, averaged over questions (reported on 0–1).

Shape:
    batches ``(B, S)`` of windows; attention ``(L, H, Q, C)`` per answer. Letters: ``B`` windows in a
    batch, ``S`` tokens, ``Q`` question tokens, ``C`` passage tokens of a window, ``L`` layers,
    ``H`` heads.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import string
import sys
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import torch
from torch import nn

from .. import checkpoint as ckpt
from ..data import batching
from ..functional import padding_mask
from ..models.bert import BertConfig, BertForMaskedLM, BertModel
from ..models.qa import MODEL_TYPE, BertForQuestionAnswering, best_spans
from ..train import TrainConfig, TrainResult, train
from . import Recipe, TrainJob, print_training
from .translate import resolve_model_dir

Tensor = torch.Tensor

__all__ = [
    "RECIPES",
    "Answer",
    "QAExample",
    "QAExplorerModel",
    "QASetup",
    "QASplits",
    "QATask",
    "QuestionAnswerer",
    "SpanTokenizer",
    "answer_exact_match",
    "answer_f1",
    "explorer_model",
    "facts_splits",
    "load_qa",
    "normalize_answer",
    "plot_question_attention",
    "read_squad",
    "squad_examples",
    "squad_scores",
    "train_qa",
]


# --------------------------------------------------------------------------------------------
# SQuAD data and scores.
# --------------------------------------------------------------------------------------------


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

    need(isinstance(root, dict) and isinstance(root.get("data"), list), "top level",
         'expected {"data": [...]} (SQuAD format)')
    examples, unanswerable = [], 0
    for a, article in enumerate(root["data"]):
        need(isinstance(article, dict) and isinstance(article.get("paragraphs"), list), f"data[{a}]",
             'expected {"paragraphs": [...]}')
        for p, para in enumerate(article["paragraphs"]):
            where = f"data[{a}].paragraphs[{p}]"
            need(isinstance(para, dict) and isinstance(para.get("context"), str) and para["context"].strip(),
                 where, '"context" must be a non-empty string')
            need(isinstance(para.get("qas"), list), where, '"qas" must be a list')
            context = para["context"]
            for q, qa in enumerate(para["qas"]):
                where_q = f"{where}.qas[{q}]"
                need(isinstance(qa, dict) and isinstance(qa.get("question"), str) and qa["question"].strip(),
                     where_q, '"question" must be a non-empty string')
                answers = []
                for k, ans in enumerate(qa.get("answers") or []):
                    need(isinstance(ans, dict) and isinstance(ans.get("text"), str) and ans["text"].strip()
                         and isinstance(ans.get("answer_start"), int), f"{where_q}.answers[{k}]",
                         'expected {"text": non-empty string, "answer_start": integer}')
                    start = _locate(context, ans["text"], ans["answer_start"])
                    need(start is not None, f"{where_q}.answers[{k}]", f"answer {ans['text']!r} is not in the context")
                    answers.append((ans["text"], start))
                if not answers:
                    unanswerable += 1
                    continue
                examples.append(QAExample(str(qa.get("id", f"{a}-{p}-{q}")), qa["question"], context, answers))
    if unanswerable:
        warnings.warn(f"{source}: skipped {unanswerable} question(s) without answers (SQuAD 2.0 unanswerable "
                      "questions are not supported)", stacklevel=3)
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
    from ..data.text_tasks import make_qa_task

    return QASplits(*(squad_examples(make_qa_task(n, seed=3 * seed + k), source=f"generated facts (seed {3 * seed + k})")
                      for k, n in enumerate((n_train, n_valid, n_test))))


_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalisation: lower-case, drop punctuation, drop a/an/the, collapse whitespace.

    Shape:
        str → str
    """
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_exact_match(prediction: str, references: Sequence[str]) -> float:
    """1.0 if the normalised prediction equals any normalised reference, else 0.0.

    Shape:
        one prediction, R references → a number
    """
    if not references:
        raise ValueError("no reference answers")
    return float(any(normalize_answer(prediction) == normalize_answer(r) for r in references))


def _f1(prediction: str, reference: str) -> float:
    pred, ref = normalize_answer(prediction).split(), normalize_answer(reference).split()
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def answer_f1(prediction: str, references: Sequence[str]) -> float:
    """Token F1 of the normalised prediction against the best-matching normalised reference.

    Shape:
        one prediction, R references → a number in [0, 1]
    """
    if not references:
        raise ValueError("no reference answers")
    return max(_f1(prediction, r) for r in references)


def squad_scores(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> dict[str, float]:
    """Mean exact match and F1 over questions (0–1), as the SQuAD v1.1 evaluation.

    Shape:
        N predictions and N lists of references → ``{"exact_match", "f1"}``
    """
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} reference lists")
    if not predictions:
        raise ValueError("nothing to score")
    n = len(predictions)
    return {
        "exact_match": sum(answer_exact_match(p, r) for p, r in zip(predictions, references)) / n,
        "f1": sum(answer_f1(p, r) for p, r in zip(predictions, references)) / n,
    }


# --------------------------------------------------------------------------------------------
# Tokenizer with character offsets.
# --------------------------------------------------------------------------------------------


class SpanTokenizer:
    """A HuggingFace ``tokenizers.Tokenizer`` (BERT WordPiece) that reports character offsets.

    Saved as the HuggingFace ``tokenizer.json`` itself, so any HF tool can read it too.

    Shape:
        ``encode``: str → L ids and L ``(start, end)`` character spans.
    """

    def __init__(self, hf_tokenizer, *, cls: str = "[CLS]", sep: str = "[SEP]", pad: str = "[PAD]") -> None:
        self._hf = hf_tokenizer
        # attnlab pads and cuts itself; a tokenizer.json may ask for fixed-length encodings.
        self._hf.no_padding()
        self._hf.no_truncation()
        ids = {}
        for role, token in (("cls", cls), ("sep", sep), ("pad", pad)):
            ids[role] = hf_tokenizer.token_to_id(token)
            if ids[role] is None:
                raise ValueError(f"the tokenizer has no {token!r} ({role}) token; a BERT WordPiece tokenizer is needed")
        self.cls_id, self.sep_id, self.pad_id = ids["cls"], ids["sep"], ids["pad"]

    @classmethod
    def from_checkpoint(cls, directory: str | os.PathLike) -> SpanTokenizer:
        """The ``tokenizer.json`` of a HuggingFace checkpoint directory.

        Shape:
            a directory → a tokenizer
        """
        from tokenizers import Tokenizer

        path = Path(directory) / "tokenizer.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing; question answering needs a fast tokenizer (tokenizer.json) "
                                    "for character offsets")
        return cls(Tokenizer.from_file(str(path)))

    @classmethod
    def load(cls, path: str | os.PathLike) -> SpanTokenizer:
        from tokenizers import Tokenizer

        if not Path(path).is_file():
            raise FileNotFoundError(f"{path}: no such tokenizer file")
        return cls(Tokenizer.from_file(str(path)))

    def encode(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        enc = self._hf.encode(text, add_special_tokens=False)
        return list(enc.ids), [tuple(o) for o in enc.offsets]

    def id_to_token(self, token_id: int) -> str:
        return self._hf.id_to_token(int(token_id))

    def save(self, directory: str | os.PathLike, name: str) -> Path:
        path = Path(directory) / f"{name}.json"
        path.write_text(self._hf.to_str(), encoding="utf-8")
        return path


# --------------------------------------------------------------------------------------------
# Settings, windows, batches.
# --------------------------------------------------------------------------------------------


@dataclass
class QASetup:
    """Everything that defines a question-answering run besides the data."""

    init: str = "minilm"  # encoder to start from: "minilm" (packaged all-MiniLM-L6-v2) or a HF BERT directory
    model_overrides: dict = field(default_factory=dict)  # encoder settings that keep its weights: dropout, backend
    max_length: int = 384  # tokens per window, [CLS] question [SEP] passage [SEP] (Devlin et al.: 384)
    doc_stride: int = 128  # passage tokens between the starts of consecutive windows
    max_query_tokens: int = 64  # questions are cut to this many tokens
    max_answer_tokens: int = 30  # longest predicted answer in tokens
    max_tokens: int = 4096  # padded tokens per batch
    eval_examples: int = 2000  # validation questions scored at each evaluation
    train: TrainConfig = field(default_factory=TrainConfig)


#: Named recipes (``--preset``). "facts" suits the generated set of attnlab.data.text_tasks.
RECIPES: dict[str, QASetup] = {
    "squad": QASetup(train=TrainConfig(epochs=2, lr=1e-4, warmup_steps=500, schedule="constant",
                                       betas=(0.9, 0.999), eps=1e-6, eval_every_steps=2000, log_every=100)),
    "facts": QASetup(max_length=128, max_tokens=1024, eval_examples=200,
                     train=TrainConfig(epochs=6, lr=2e-4, warmup_steps=20, schedule="constant",
                                       betas=(0.9, 0.999), eps=1e-6, log_every=10)),
}


@dataclass
class _Window:
    example: int  # index of the example it belongs to
    input_ids: list[int]  # [CLS] question [SEP] passage piece [SEP]
    n_question: int  # question tokens (positions 1 … n_question)
    offsets: list[tuple[int, int]]  # character span of each passage token of the window
    start: int = -1  # answer start position in input_ids (-1: the answer is not in this window)
    end: int = -1  # answer end position (inclusive)

    @property
    def context_start(self) -> int:
        return self.n_question + 2


def _windows(tok: SpanTokenizer, setup: QASetup, index: int, question: str, context: str,
             answer: tuple[str, int] | None = None) -> list[_Window]:
    q_ids, _ = tok.encode(question)
    q_ids = q_ids[: setup.max_query_tokens]
    if not q_ids:
        raise ValueError(f"question {question!r} has no tokens")
    c_ids, c_offsets = tok.encode(context)
    if not c_ids:
        raise ValueError(f"context {context[:60]!r} has no tokens")
    room = setup.max_length - len(q_ids) - 3
    if room < 1:
        raise ValueError(f"max_length={setup.max_length} leaves no room for the passage after a "
                         f"{len(q_ids)}-token question")
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
        w = _Window(index, [tok.cls_id, *q_ids, tok.sep_id, *c_ids[piece], tok.sep_id], len(q_ids), c_offsets[piece])
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


def _collate(windows: Sequence[_Window], pad_id: int) -> QABatch:
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


def _window_batches(windows: Sequence[_Window], max_tokens: int, *, shuffle: bool, seed: int = 0, epoch: int = 0,
                    rank: int = 0, world_size: int = 1) -> list[list[int]]:
    lengths = [len(w.input_ids) for w in windows]
    return batching.bucket_batches(lengths, [1] * len(windows), max_tokens=max_tokens, shuffle=shuffle,
                                   seed=seed, epoch=epoch, rank=rank, world_size=world_size)


# --------------------------------------------------------------------------------------------
# The trainer's task.
# --------------------------------------------------------------------------------------------


class QATask:
    """Supplies :func:`attnlab.train.train` with batches, the loss and the evaluation (EM, F1)."""

    metric = "f1"
    maximize = True

    def __init__(self, setup: QASetup, config: BertConfig, tokenizer: SpanTokenizer,
                 train_examples: Sequence[QAExample], valid_examples: Sequence[QAExample]) -> None:
        self.setup, self.config, self.tokenizer = setup, config, tokenizer
        self.device = torch.device(setup.train.device)
        self.windows = [w for i, ex in enumerate(train_examples)
                        for w in _windows(tokenizer, setup, i, ex.question, ex.context, ex.answers[0]) if w.start >= 0]
        if not self.windows:
            raise ValueError("no training question has its answer inside a window; raise max_length")
        self.valid = list(valid_examples)[: setup.eval_examples]
        if not self.valid:
            raise ValueError("the validation set is empty")

    def batches(self, epoch: int, rank: int, world_size: int) -> list[QABatch]:
        groups = _window_batches(self.windows, self.setup.max_tokens, shuffle=True, seed=self.setup.train.seed,
                                 epoch=epoch, rank=rank, world_size=world_size)
        return [_collate([self.windows[i] for i in g], self.tokenizer.pad_id).to(self.device) for g in groups]

    def loss(self, model: nn.Module, batch: QABatch) -> tuple[Tensor, int]:
        out = model(batch.input_ids, token_type_ids=batch.token_type_ids, attention_mask=batch.attention_mask,
                    span_mask=batch.span_mask, start_positions=batch.start, end_positions=batch.end)
        return out.loss, len(batch.start)

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        qa = QuestionAnswerer(model, self.tokenizer, _inference_settings(self.setup))
        predictions = qa.answer([ex.question for ex in self.valid], [ex.context for ex in self.valid])
        return squad_scores([p.text for p in predictions], [[t for t, _ in ex.answers] for ex in self.valid])

    def checkpoint_payload(self) -> tuple[dict, dict]:
        return {**self.config.to_dict(), **_inference_settings(self.setup)}, {"tokenizer": self.tokenizer}


def _inference_settings(setup: QASetup) -> dict:
    return {"max_length": setup.max_length, "doc_stride": setup.doc_stride,
            "max_query_tokens": setup.max_query_tokens, "max_answer_tokens": setup.max_answer_tokens}


# --------------------------------------------------------------------------------------------
# Training and loading.
# --------------------------------------------------------------------------------------------


_ADJUSTABLE = ("dropout", "backend")  # encoder fields that can change without changing its weights


def _initial_model(setup: QASetup) -> tuple[BertForQuestionAnswering, SpanTokenizer]:
    from ..models.convert_hf import load_bert, minilm_dir

    fixed = sorted(set(setup.model_overrides) - set(_ADJUSTABLE))
    if fixed:
        raise ValueError(f"model fields {fixed} are fixed by the pretrained encoder; only {list(_ADJUSTABLE)} can change")
    directory = minilm_dir() if setup.init == "minilm" else Path(setup.init)
    encoder = load_bert(directory)
    if isinstance(encoder, BertForMaskedLM):
        encoder = encoder.bert
    if not isinstance(encoder, BertModel):
        raise ValueError(f"{directory}: not a BERT checkpoint")
    if setup.model_overrides:
        adjusted = BertModel(dataclasses.replace(encoder.config, **setup.model_overrides))
        adjusted.load_state_dict(encoder.state_dict())
        encoder = adjusted
    return BertForQuestionAnswering.from_encoder(encoder), SpanTokenizer.from_checkpoint(directory)


def train_qa(
    setup: QASetup, train_examples: Sequence[QAExample], valid_examples: Sequence[QAExample]
) -> tuple[QuestionAnswerer, TrainResult]:
    """Fine-tune a span head and its encoder (from ``setup.init``) on SQuAD-format examples.

    Returns the best model by validation F1 (reloaded from ``out_dir/best`` when the run writes one).

    Shape:
        N training examples → a :class:`QuestionAnswerer`.
    """
    if setup.doc_stride < 1:
        raise ValueError(f"doc_stride must be ≥ 1, got {setup.doc_stride}")
    torch.manual_seed(setup.train.seed)
    model, tokenizer = _initial_model(setup)
    if setup.max_length > model.config.n_positions:
        raise ValueError(f"max_length={setup.max_length} exceeds the encoder's n_positions={model.config.n_positions}")
    model.train()
    task = QATask(setup, model.config, tokenizer, train_examples, valid_examples)
    result = train(model, task, setup.train)
    out = Path(setup.train.out_dir) if setup.train.out_dir else None
    if out is not None and (out / "best").is_dir():
        ckpt.load_weights(model, ckpt.load_checkpoint(out / "best"))
    model.eval()
    return QuestionAnswerer(model, tokenizer, _inference_settings(setup)), result


def load_qa(path: str | os.PathLike, device: str = "cpu") -> QuestionAnswerer:
    """A question answerer saved by :func:`train_qa` (a run folder or its ``best`` checkpoint).

    Shape:
        a checkpoint directory → a :class:`QuestionAnswerer`
    """
    directory = resolve_model_dir(path)
    checkpoint = ckpt.load_checkpoint(directory)
    config_dict = dict(checkpoint.config)
    if config_dict.get("model_type") != MODEL_TYPE:
        raise ValueError(f"{directory}: model_type {config_dict.get('model_type')!r} is not a question answerer "
                         f"({MODEL_TYPE!r})")
    settings = {k: config_dict.pop(k) for k in ("max_length", "doc_stride", "max_query_tokens", "max_answer_tokens")}
    model = BertForQuestionAnswering(BertConfig.from_dict(config_dict))
    ckpt.load_weights(model, checkpoint)
    model.to(device).eval()
    return QuestionAnswerer(model, SpanTokenizer.load(directory / "tokenizer.json"), settings)


# --------------------------------------------------------------------------------------------
# Using a trained model.
# --------------------------------------------------------------------------------------------


@dataclass
class Answer:
    question: str
    context: str
    text: str  # the answer: context[start:end]
    start: int  # character offset of the answer in the context
    end: int  # one past its last character
    score: float  # start logit + end logit of the chosen span
    question_tokens: list[str] | None = None  # rows of `attention`
    context_tokens: list[str] | None = None  # columns of `attention`: the passage tokens of the best window
    attention: Tensor | None = None  # (L, H, Q, C) how much each question token attends to each passage token


class QuestionAnswerer:
    """A trained span-head BERT with its tokenizer: (question, passage) in, answer span (and attention) out."""

    def __init__(self, model: BertForQuestionAnswering, tokenizer: SpanTokenizer, settings: dict) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.setup = QASetup(**settings)  # the window and answer-length settings the model was trained with

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @torch.no_grad()
    def answer(
        self, questions: Sequence[str], contexts: Sequence[str], *, return_attention: bool = False
    ) -> list[Answer]:
        """Answer each question from its passage; with ``return_attention`` also the question × passage attention.

        Shape:
            N questions and N passages → N answers; attention ``(L, H, Q, C)`` each
        """
        if isinstance(questions, str) or isinstance(contexts, str):
            raise TypeError("answer takes lists of questions and contexts, not single strings")
        if len(questions) != len(contexts):
            raise ValueError(f"{len(questions)} questions but {len(contexts)} contexts")
        was_training = self.model.training
        self.model.eval()
        windows = [w for i, (q, c) in enumerate(zip(questions, contexts))
                   for w in _windows(self.tokenizer, self.setup, i, q, c)]
        best: list[tuple[float, _Window, int, int] | None] = [None] * len(questions)
        for group in _window_batches(windows, self.setup.max_tokens, shuffle=False):
            batch = _collate([windows[i] for i in group], self.tokenizer.pad_id).to(self.device)
            out = self.model(batch.input_ids, token_type_ids=batch.token_type_ids,
                             attention_mask=batch.attention_mask, span_mask=batch.span_mask)
            spans = best_spans(out.start_logits, out.end_logits, batch.span_mask, self.setup.max_answer_tokens)
            for row, i in enumerate(group):
                w, score = windows[i], float(spans.score[row])
                if best[w.example] is None or score > best[w.example][0]:
                    best[w.example] = (score, w, int(spans.start[row]), int(spans.end[row]))
        answers = []
        for i, (score, w, s, e) in enumerate(best):
            a, b = w.offsets[s - w.context_start][0], w.offsets[e - w.context_start][1]
            answer = Answer(questions[i], contexts[i], contexts[i][a:b], a, b, score)
            if return_attention:
                self._attach_attention(answer, w)
            answers.append(answer)
        self.model.train(was_training)
        return answers

    def _attach_attention(self, answer: Answer, window: _Window) -> None:
        batch = _collate([window], self.tokenizer.pad_id).to(self.device)
        out = self.model(batch.input_ids, token_type_ids=batch.token_type_ids, attention_mask=batch.attention_mask,
                         span_mask=batch.span_mask, need_weights=True)
        maps = torch.stack([w[0] for w in out.attentions]).float().cpu()  # L × (H, S, S) -> (L, H, S, S)
        q = slice(1, 1 + window.n_question)
        c = slice(window.context_start, window.context_start + len(window.offsets))
        answer.attention = maps[:, :, q, c]  # (L, H, Q, C)
        ids = window.input_ids
        answer.question_tokens = [self.tokenizer.id_to_token(t) for t in ids[q]]
        answer.context_tokens = [self.tokenizer.id_to_token(t) for t in ids[c]]

    def evaluate(self, examples: Sequence[QAExample]) -> dict[str, float]:
        """Exact match and F1 (0–1, SQuAD v1.1 rules) on ``examples``.

        Shape:
            N examples → ``{"exact_match", "f1", "n"}``
        """
        if not examples:
            raise ValueError("nothing to evaluate: no examples")
        predictions = self.answer([ex.question for ex in examples], [ex.context for ex in examples])
        scores = squad_scores([p.text for p in predictions], [[t for t, _ in ex.answers] for ex in examples])
        return {**scores, "n": len(examples)}


def plot_question_attention(answer: Answer, path: str | os.PathLike, *, layer: int = -1) -> Path:
    """Heatmap of question tokens (rows) × passage tokens (columns), mean over the heads of ``layer``.

    Each cell is the share of a question token's attention that goes to that passage token (the
    rest goes to the question and the special tokens), so rows need not sum to 1. A layer × head
    grid of the same maps is written beside it with the suffix ``_grid``.

    Shape:
        attention ``(L, H, Q, C)`` → a ``Q × C`` panel and an ``L × H`` grid
    """
    from ..viz import plot_attention, plot_attention_grid

    if answer.attention is None:
        raise ValueError("this answer has no attention; call answer(..., return_attention=True)")
    L = answer.attention.shape[0]
    if not -L <= layer < L:
        raise ValueError(f"layer must be in [{-L}, {L}), got {layer}")
    path = Path(path)
    plot_attention(answer.attention[layer].mean(0), answer.context_tokens, answer.question_tokens, path,
                   title=f"question → passage attention (layer {layer % L}, mean over heads); answer: {answer.text!r}")
    grid = path.with_name(path.stem + "_grid" + path.suffix)
    plot_attention_grid(answer.attention, answer.context_tokens, answer.question_tokens, grid)
    return path


class QAExplorerModel:
    """The explorer's view of a question answerer (``kind`` "encoder": one self-attention stack).

    The model page has one text box: the question comes first and ends at its first ``?``; the
    rest is the passage. The output is the answer; the maps are the encoder's self-attention over
    ``[CLS] question [SEP] passage [SEP]``, whose question rows × passage columns are the
    question–document attention.

    Shape:
        attentions["self"] ``(L, H, S, S)``
    """

    kind = "encoder"

    def __init__(self, qa: QuestionAnswerer, name: str) -> None:
        self.qa, self.name = qa, name

    def run(self, text: str):
        from ..web.models import ModelRun

        if "?" not in text:
            raise ValueError("write the question first, ending with '?', then the passage")
        cut = text.index("?") + 1
        question, context = text[:cut].strip(), text[cut:].strip()
        if not context:
            raise ValueError("the passage after the question is empty")
        windows = _windows(self.qa.tokenizer, self.qa.setup, 0, question, context)
        if len(windows) > 1:
            raise ValueError(f"question and passage exceed the model's window of {self.qa.setup.max_length} "
                             "tokens; shorten the passage")
        window = windows[0]
        answer = self.qa.answer([question], [context])[0]
        batch = _collate([window], self.qa.tokenizer.pad_id).to(self.qa.device)
        with torch.no_grad():
            out = self.qa.model(batch.input_ids, token_type_ids=batch.token_type_ids,
                                attention_mask=batch.attention_mask, span_mask=batch.span_mask, need_weights=True)
        maps = torch.stack([w[0] for w in out.attentions]).float().cpu()  # L × (H, S, S) -> (L, H, S, S)
        tokens = [self.qa.tokenizer.id_to_token(t) for t in window.input_ids]
        return ModelRun(output=f"answer: {answer.text}", tokens={"src": tokens}, attentions={"self": maps})


def explorer_model(path: Path) -> QAExplorerModel:
    """Load a question answerer for the explorer (registered in :mod:`attnlab.web.models`).

    Shape:
        a checkpoint directory → an explorer model
    """
    return QAExplorerModel(load_qa(path), name=Path(path).name)


# --------------------------------------------------------------------------------------------
# The recipe's descriptor: `attnlab train qa` and `attnlab answer`.
# --------------------------------------------------------------------------------------------


def train_command(
    *,
    out: Path = Path("runs/qa"),
    train: Path | None = None,
    valid: Path | None = None,
    preset: str | None = None,
    init: str | None = None,
    n_train: int = 400,
    epochs: int | None = None,
    max_steps: int | None = None,
    minutes: float | None = None,
    seed: int | None = None,
    overrides: list[str] | None = None,
) -> TrainJob:
    """Fine-tune an extractive question answerer (a span head on BERT, from all-MiniLM-L6-v2) on SQuAD-format JSON.

    Without --train it trains on a generated SQuAD-format set of templated facts ("X was born in
    Y in YEAR." → "Where was X born?") and then scores exact match and F1 on held-out generated
    questions (OUT/test.json). Writes OUT/best (best validation F1: weights, config, tokenizer),
    OUT/last and OUT/log.jsonl.

    Args:
        out: output folder.
        train: training questions, SQuAD v1.1 JSON (data → paragraphs → context, qas) (default: generated).
        valid: validation questions in the same format (needed with --train).
        preset: squad or facts (default: facts for the generated set, squad with --train).
        init: encoder to start from: minilm (the packaged all-MiniLM-L6-v2) or a HuggingFace BERT folder.
        n_train: generated paragraphs to train on (two questions each; without --train).
        epochs: passes over the training data.
        max_steps: stop after this many optimizer steps.
        minutes: stop training after this many minutes (evaluation time excluded).
        seed: random seed (generated data, data order, the span head's initialisation).
        overrides: further settings as key=value: train.lr=5e-5, max_length=256, doc_stride=64, model.dropout=0.0.
    """
    if (train is None) != (valid is None):
        raise ValueError("give both --train and --valid (SQuAD-format files), or neither for the generated set")

    def run(setup: QASetup) -> None:
        test = None
        if train is None:
            generated = facts_splits(n_train, seed=setup.train.seed)
            train_examples, valid_examples, test = generated.train, generated.valid, generated.test
        else:
            train_examples, valid_examples = read_squad(train), read_squad(valid)
        answerer, result = train_qa(setup, train_examples, valid_examples)
        print_training(result, out)
        if test is not None:
            scores = answerer.evaluate(test)
            (out / "test.json").write_text(json.dumps(scores, indent=2) + "\n")
            print(f"held-out generated questions: exact match {100 * scores['exact_match']:.1f}  "
                  f"F1 {100 * scores['f1']:.1f}  ({scores['n']} questions)")

    preset = preset or ("facts" if train is None else "squad")
    return TrainJob(preset, run, {"init": init}, overrides, out=out, minutes=minutes, epochs=epochs,
                    max_steps=max_steps, seed=seed)


def answer_command(
    question: list[str] | None = None,
    /,
    *,
    model: Path,
    context: str | None = None,
    context_file: Path | None = None,
    input: Path | None = None,
    attention_plot: Path | None = None,
    layer: int = -1,
    device: str = "cpu",
) -> int:
    """Answer questions from a passage with a trained question answerer; show the question–passage attention.

    Prints one answer per question. With --input (a SQuAD-format file) it answers every question
    in it and prints exact match and F1 instead.

    Args:
        question: questions about the passage.
        model: a folder written by `attnlab train qa`.
        context: the passage to find the answers in.
        context_file: read the passage from this text file instead of --context.
        input: a SQuAD-format JSON file to score (exact match and F1).
        attention_plot: write the first answer's question × passage attention heatmap here (PNG or
            SVG; mean over the heads of --layer); a layer × head grid is written beside it with the suffix _grid.
        layer: encoder layer of the heatmap (0-based; -1 = the last).
        device: cpu, cuda or mps.
    """
    answerer = load_qa(model, device=device)
    if input is not None:
        if question or context is not None or context_file is not None:
            raise ValueError("--input scores a SQuAD file; do not also give questions or a context")
        scores = answerer.evaluate(read_squad(input))
        print(f"exact match {100 * scores['exact_match']:.1f}  F1 {100 * scores['f1']:.1f}  ({scores['n']} questions)")
        return 0
    if context_file is not None:
        if context is not None:
            raise ValueError("give --context or --context-file, not both")
        context = context_file.read_text(encoding="utf-8")
    if context is None or not context.strip():
        raise ValueError("give the passage with --context TEXT or --context-file FILE")
    questions = list(question or [])
    if not questions:
        raise ValueError("give at least one question")
    answers = answerer.answer(questions, [context] * len(questions), return_attention=attention_plot is not None)
    for a in answers:
        print(a.text, flush=True)
    if attention_plot is not None:
        plot_question_attention(answers[0], attention_plot, layer=layer)
        print(f"attention heatmaps written to {attention_plot} and its _grid companion", file=sys.stderr)
    return 0


QA_JOB = Recipe(
    name="qa",
    presets=RECIPES,
    setup_cls=QASetup,
    model_config=BertConfig,
    train=train_qa,
    load=load_qa,
    train_command=train_command,
    commands={"answer": answer_command},
)
