"""The question-answering recipe: SQuAD-format JSON → windows of ``[CLS] question [SEP] passage [SEP]``
→ BERT span head (from MiniLM) → exact match and F1.

``attnlab train qa`` and ``attnlab answer`` are thin wrappers over :func:`train_qa`,
:func:`load_qa` and :meth:`QuestionAnswerer.answer`.

The data side — the SQuAD reader, the windows and their offsets — is :mod:`attnlab.data.squad`;
the scores are SQuAD v1.1's exact match and F1 (:func:`attnlab.metrics.squad_scores`).

Shape:
    batches ``(B, S)`` of windows; attention ``(L, H, Q, C)`` per answer. Letters: ``B`` windows in a
    batch, ``S`` tokens, ``Q`` question tokens, ``C`` passage tokens of a window, ``L`` layers,
    ``H`` heads.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from .. import checkpoint as ckpt
from ..assets.locate import resolve_model_dir
from ..data.squad import (
    QABatch,
    QAExample,
    collate_windows,
    question_windows,
    window_batches,
)
from ..data.tokenizers import PretrainedTokenizer, load_hf_tokenizer
from ..inference.qa import QuestionAnswerer
from ..metrics import squad_scores
from ..models.bert import BertConfig, BertForMaskedLM, BertModel, bert_config
from ..models.config import check_fields
from ..models.qa import MODEL_TYPE, BertForQuestionAnswering
from ..runs import check_run_folder
from ..train import TrainConfig, TrainResult, train
from . import Job

Tensor = torch.Tensor

__all__ = [
    "PRESETS",
    "QASetup",
    "QATask",
    "load_qa",
    "inference_settings",
    "scratch_config",
    "train_qa",
]


# --------------------------------------------------------------------------------------------
# Settings.
# --------------------------------------------------------------------------------------------


@dataclass
class QASetup:
    """Everything that defines a question-answering run besides the data."""

    # Encoder to start from: "minilm" (packaged all-MiniLM-L6-v2), a HF BERT directory, or "scratch":
    # a new encoder of model_preset's size (+ model_overrides) with a WordPiece vocabulary of
    # vocab_size pieces trained on the training questions and passages.
    init: str = "minilm"
    model_overrides: dict = field(default_factory=dict)  # encoder settings (pretrained: only dropout, backend)
    model_preset: str = "tiny"  # size of a "scratch" encoder (attnlab.models.bert.PRESETS)
    vocab_size: int = 1000  # WordPiece pieces of a "scratch" encoder's tokenizer (special tokens included)
    paragraphs: int = 400  # generated paragraphs (two questions each) to train on when no data is given
    max_length: int = 384  # tokens per window, [CLS] question [SEP] passage [SEP] (Devlin et al.: 384)
    doc_stride: int = 128  # passage tokens between the starts of consecutive windows
    max_query_tokens: int = 64  # questions are cut to this many tokens
    max_answer_tokens: int = 30  # longest predicted answer in tokens
    max_tokens: int = 4096  # padded tokens per batch
    eval_examples: int = 2000  # validation questions scored at each evaluation
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        check_fields(
            self,
            positive=(
                "max_length",
                "doc_stride",
                "max_query_tokens",
                "max_answer_tokens",
                "max_tokens",
                "eval_examples",
                "vocab_size",
                "paragraphs",
            ),
        )


#: Named presets (``--preset``). "facts" suits the generated set of attnlab.data.text_tasks.
#: Every preset trains with precision="auto": bf16 autocast only where a short probe of the
#: model's steps on this machine measures it faster (attnlab.train.TrainingPrecision).
PRESETS: dict[str, QASetup] = {
    "squad": QASetup(
        train=TrainConfig(
            epochs=2,
            lr=1e-4,
            warmup_steps=500,
            schedule="constant",
            betas=(0.9, 0.999),
            eps=1e-6,
            eval_every_steps=2000,
            log_every=100,
            precision="auto",
        )
    ),
    "facts": QASetup(
        max_length=128,
        max_tokens=1024,
        eval_examples=200,
        train=TrainConfig(
            epochs=6,
            lr=2e-4,
            warmup_steps=20,
            schedule="constant",
            betas=(0.9, 0.999),
            eps=1e-6,
            log_every=10,
            precision="auto",
        ),
    ),
    # A small encoder trained from scratch on the generated facts (the lesson's shipped "facts-qa"):
    # no pretraining, so it needs many more steps than "facts", and a hundred times the paragraphs so that
    # it sees each passage about once (with 4,000 it learned the training names and found 67% of the answers).
    "toy": QASetup(
        init="scratch",
        model_preset="tiny",
        model_overrides={"d_model": 64, "n_heads": 4, "n_layers": 2, "n_positions": 128, "dropout": 0.0},
        vocab_size=800,
        paragraphs=40000,
        max_length=128,
        max_tokens=2048,
        eval_examples=200,
        train=TrainConfig(
            epochs=100,
            max_steps=4000,
            lr=2e-3,
            warmup_steps=200,
            schedule="cosine",
            betas=(0.9, 0.98),
            eval_every_steps=500,
            log_every=100,
            precision="auto",
        ),
    ),
}


# --------------------------------------------------------------------------------------------
# The trainer's task.
# --------------------------------------------------------------------------------------------


class QATask:
    """Supplies :func:`attnlab.train.train` with batches, the loss and the evaluation (EM, F1)."""

    metric = "f1"
    maximize = True
    # The span head reads every token's state, never BERT's pooled [CLS] vector: the loss leaves
    # the pooler out, and DDP must be told (attnlab.train.TrainTask).
    unused_parameters = True

    def __init__(
        self,
        setup: QASetup,
        config: BertConfig,
        tokenizer: PretrainedTokenizer,
        train_examples: Sequence[QAExample],
        valid_examples: Sequence[QAExample],
    ) -> None:
        self.setup, self.config, self.tokenizer = setup, config, tokenizer
        self.device = torch.device(setup.train.device)
        self.windows = [
            w
            for i, ex in enumerate(train_examples)
            for w in question_windows(tokenizer, setup, i, ex.question, ex.context, ex.answers[0])
            if w.start >= 0
        ]
        if not self.windows:
            raise ValueError("no training question has its answer inside a window; raise max_length")
        self.valid = list(valid_examples)[: setup.eval_examples]
        if not self.valid:
            raise ValueError("the validation set is empty")

    def batches(self, epoch: int, rank: int, world_size: int) -> list[QABatch]:
        groups = window_batches(
            self.windows,
            self.setup.max_tokens,
            shuffle=True,
            seed=self.setup.train.seed,
            epoch=epoch,
            rank=rank,
            world_size=world_size,
        )
        return [collate_windows([self.windows[i] for i in g], self.tokenizer.pad_id).to(self.device) for g in groups]

    def loss(self, model: nn.Module, batch: QABatch) -> tuple[Tensor, int]:
        out = model(
            batch.input_ids,
            token_type_ids=batch.token_type_ids,
            attention_mask=batch.attention_mask,
            span_mask=batch.span_mask,
            start_positions=batch.start,
            end_positions=batch.end,
        )
        return out.loss, len(batch.start)

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        qa = QuestionAnswerer(model, self.tokenizer, inference_settings(self.setup))
        predictions = qa.answer([ex.question for ex in self.valid], [ex.context for ex in self.valid])
        return squad_scores([p.text for p in predictions], [[t for t, _ in ex.answers] for ex in self.valid])

    def checkpoint_payload(self) -> tuple[dict, dict]:
        return {**self.config.to_dict(), **inference_settings(self.setup)}, {"tokenizer": self.tokenizer}


def inference_settings(setup: QASetup) -> dict:
    """The reading settings a QA checkpoint carries beside its config (window, stride, query and
    answer lengths): what the answerer needs to read a passage as training did.

    Shape:
        no tensors.
    """
    return {
        "max_length": setup.max_length,
        "doc_stride": setup.doc_stride,
        "max_query_tokens": setup.max_query_tokens,
        "max_answer_tokens": setup.max_answer_tokens,
    }


def _settings_and_config(config_dict: dict) -> tuple[dict, BertConfig]:
    """A QA checkpoint's ``config.json``: the inference settings (checked as a QASetup's) and the encoder's config."""
    settings = {k: config_dict.pop(k) for k in ("max_length", "doc_stride", "max_query_tokens", "max_answer_tokens")}
    QASetup(**settings)  # checks their types and ranges
    return settings, BertConfig.from_dict(config_dict)


# --------------------------------------------------------------------------------------------
# Training and loading.
# --------------------------------------------------------------------------------------------


_ADJUSTABLE = ("dropout", "backend")  # encoder fields that can change without changing its weights


def _check_overrides(setup: QASetup) -> None:
    """Only the encoder fields that keep its weights can change; their values are checked as BertConfig's.
    A "scratch" encoder takes any field: its config is built (with a stand-in vocabulary) to check them."""
    if setup.init == "scratch":
        scratch_config(setup, setup.vocab_size, 0)
        return
    fixed = sorted(set(setup.model_overrides) - set(_ADJUSTABLE))
    if fixed:
        raise ValueError(
            f"model fields {fixed} are fixed by the pretrained encoder; only {list(_ADJUSTABLE)} can change"
        )
    BertConfig(**setup.model_overrides)


def scratch_config(setup: QASetup, vocab_size: int, pad_id: int) -> BertConfig:
    """The config of a QA encoder trained from scratch (``init="scratch"``) for a tokenizer of
    ``vocab_size`` pieces padded with ``pad_id``.

    Shape:
        no tensors.
    """
    return bert_config(
        setup.model_preset,
        **{**setup.model_overrides, "vocab_size": vocab_size, "pad_id": pad_id, "model_type": MODEL_TYPE},
    )


def scratch_tokenizer(texts: Sequence[str], vocab_size: int) -> PretrainedTokenizer:
    """A lower-cased WordPiece tokenizer (BERT's normaliser and pre-tokenizer) trained on ``texts``,
    with BERT's special tokens; it reports character offsets like a pretrained one.

    Shape:
        N texts → a tokenizer of at most ``vocab_size`` pieces
    """
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    hf = HFTokenizer(models.WordPiece(unk_token="[UNK]"))
    hf.normalizer = normalizers.BertNormalizer(lowercase=True)
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    hf.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False)
    hf.train_from_iterator(list(texts), trainer)
    return PretrainedTokenizer(hf, pad="[PAD]", unk="[UNK]", bos="[CLS]", eos="[SEP]", mask="[MASK]")


def _initial_model(
    setup: QASetup, train_examples: Sequence[QAExample] = ()
) -> tuple[BertForQuestionAnswering, PretrainedTokenizer]:
    from ..models.convert_hf import load_bert, minilm_dir

    _check_overrides(setup)
    if setup.init == "scratch":
        texts = sorted({ex.context for ex in train_examples}) + [ex.question for ex in train_examples]
        if not texts:
            raise ValueError("a scratch encoder needs training examples to learn its vocabulary from")
        tokenizer = scratch_tokenizer(texts, setup.vocab_size)
        config = scratch_config(setup, tokenizer.vocab_size, tokenizer.pad_id)
        return BertForQuestionAnswering(config), tokenizer
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
    return BertForQuestionAnswering.from_encoder(encoder), load_hf_tokenizer(directory, "bert")


def train_qa(
    setup: QASetup, train_examples: Sequence[QAExample], valid_examples: Sequence[QAExample]
) -> tuple[QuestionAnswerer, TrainResult]:
    """Fine-tune a span head and its encoder (from ``setup.init``) on SQuAD-format examples.

    Returns the best model by validation F1 (reloaded from ``out_dir/best`` when the run writes one).

    Shape:
        N training examples → a :class:`QuestionAnswerer`.
    """
    check_run_folder(setup.train.out_dir, False, setup.train.overwrite)  # before any work
    if setup.doc_stride < 1:
        raise ValueError(f"doc_stride must be ≥ 1, got {setup.doc_stride}")
    if not valid_examples:
        raise ValueError("the validation set is empty")
    torch.manual_seed(setup.train.seed)
    model, tokenizer = _initial_model(setup, train_examples)
    if setup.max_length > model.config.n_positions:
        raise ValueError(f"max_length={setup.max_length} exceeds the encoder's n_positions={model.config.n_positions}")
    model.train()
    task = QATask(setup, model.config, tokenizer, train_examples, valid_examples)
    result = train(model, task, setup.train)
    out = Path(setup.train.out_dir) if setup.train.out_dir else None
    if out is not None and (out / "best").is_dir():
        ckpt.load_weights(model, ckpt.load_checkpoint(out / "best"))
    model.eval()
    return QuestionAnswerer(model, tokenizer, inference_settings(setup)), result


def load_qa(path: str | os.PathLike, device: str = "cpu") -> QuestionAnswerer:
    """A question answerer saved by :func:`train_qa` (a run folder or its ``best`` checkpoint).

    Shape:
        a checkpoint directory → a :class:`QuestionAnswerer`
    """
    directory = resolve_model_dir(path)
    checkpoint = ckpt.load_checkpoint(directory)
    config_dict = dict(checkpoint.config)
    if config_dict.get("model_type") != MODEL_TYPE:
        raise ValueError(
            f"{directory}: model_type {config_dict.get('model_type')!r} is not a question answerer ({MODEL_TYPE!r})"
        )
    settings, config = checkpoint.make_config(_settings_and_config)
    model = BertForQuestionAnswering(config)
    ckpt.load_weights(model, checkpoint)
    model.to(device).eval()
    return QuestionAnswerer(model, load_hf_tokenizer(directory, "bert"), settings)


QA_JOB = Job(
    name="qa",
    presets=PRESETS,
    setup_cls=QASetup,
    model_config=BertConfig,
    train=train_qa,
    load=load_qa,
    check_model=_check_overrides,
)
