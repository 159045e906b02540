"""Language-model recipes: train GPT on next-token prediction and BERT on masked-LM, load either.

The layer above :mod:`attnlab.models.gpt`, :mod:`attnlab.models.bert` and :mod:`attnlab.train`:
text → tokenizer → token stream → training/validation split → the trainer's task. The CLI
commands ``attnlab train lm``, ``train mlm``, ``generate``, ``fill-mask``, ``embed`` and
``similarity`` are thin wrappers over the functions here.

Data (both recipes): the text is split *by position*, the first 90% for training and the last 10%
for validation (as nanoGPT's shakespeare_char), so validation text is never seen in training.
The tokenizer is trained on the training part only.

- LM: each epoch cuts the training stream into contiguous blocks of ``block_size`` tokens from a
  random start offset, shuffles them and batches them; every position predicts the next token.
- MLM: the stream is cut into segments of ``max_len - 2`` tokens wrapped as ``[CLS] … [SEP]``
  (with next-sentence prediction: two half-length segments ``[CLS] A [SEP] B [SEP]`` where B
  follows A half of the time and is a random segment otherwise, Devlin et al. 2019 §3.1), and
  every epoch masks them afresh with :func:`attnlab.models.bert.mask_tokens`.

Shape letters: ``B`` batch, ``T`` block length, ``S`` sequence length, ``V`` vocabulary.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .. import checkpoint as ckpt
from ..accel import precision as inference_precision
from ..assets.locate import resolve_model_dir
from ..data import tokenizers
from ..data.tokenizers import PretrainedTokenizer, load_hf_tokenizer
from ..inference.encoder import SentenceEncoder
from ..models.bert import (
    BertConfig,
    BertForMaskedLM,
    BertModel,
    bert_config,
    mask_tokens,
)
from ..models.config import check_fields
from ..models.convert_hf import (
    is_hf_checkpoint,
    load_hf_config,
    load_hf_model,
    minilm_dir,
    sentence_transformers_pooling,
)
from ..models.gpt import GPT, GPTConfig, gpt_config
from ..runs import check_run_folder
from ..train import TrainConfig, TrainResult, train
from . import STAND_IN_SIZE, Job, apply_overrides

Tensor = torch.Tensor

__all__ = [
    "LMSetup",
    "MLMSetup",
    "LM_PRESETS",
    "MLM_PRESETS",
    "LMTask",
    "MLMTask",
    "MLMBatch",
    "apply_overrides",
    "split_text",
    "encode_text",
    "train_lm",
    "train_mlm",
    "load_pretrained",
    "load_language_model",
    "SentenceEncoder",
    "load_sentence_encoder",
    "load_encoder",
]

TOKENIZER_NAME = "tokenizer"  # file stem of the tokenizer inside a checkpoint


@dataclass
class LMSetup:
    """Everything that defines a causal-LM run besides the text."""

    model_preset: str = "shakespeare-char"  # key of attnlab.models.gpt.PRESETS
    model_overrides: dict = field(default_factory=dict)  # GPTConfig fields set on top of the preset
    tokenizer: str = "char"  # "char" (one token per character) or "bpe"
    vocab_size: int = 4000  # BPE vocabulary size (ignored for char)
    block_size: int | None = None  # tokens per training sequence (None: the model's n_positions)
    batch_size: int = 16  # sequences per batch
    valid_fraction: float = 0.1  # the last 10% of the text (by position) is the validation split
    eval_tokens: int | None = None  # validation tokens per evaluation (None: the whole split)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        check_fields(self, positive=("vocab_size", "batch_size", "eval_tokens"), choices={"tokenizer": ("char", "bpe")})
        _check_fraction(self.valid_fraction)
        if self.block_size is not None and self.block_size < 2:
            raise ValueError(f"block_size must be ≥ 2 (one input and one target), got {self.block_size}")


@dataclass
class MLMSetup:
    """Everything that defines a masked-LM run besides the text."""

    model_preset: str = "mini"  # key of attnlab.models.bert.PRESETS
    model_overrides: dict = field(default_factory=dict)  # BertConfig fields set on top of the preset
    tokenizer: str = "bpe"  # "bpe" or "char"
    vocab_size: int = 8000  # BPE vocabulary size (ignored for char)
    max_len: int = 128  # tokens per sequence, [CLS] and [SEP] included
    batch_size: int = 32  # sequences per batch
    mask_prob: float = 0.15  # share of tokens selected for prediction (Devlin et al. §3.1)
    next_sentence: bool = False  # also train next-sentence prediction (§3.1 Task #2)
    valid_fraction: float = 0.1  # the last 10% of the text (by position) is the validation split
    eval_sequences: int | None = 512  # validation sequences per evaluation (None: all)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        check_fields(
            self,
            positive=("vocab_size", "max_len", "batch_size", "mask_prob", "eval_sequences"),
            fractions=("mask_prob",),
            choices={"tokenizer": ("bpe", "char")},
        )
        _check_fraction(self.valid_fraction)


def _check_fraction(valid_fraction: float) -> None:
    if not 0.0 < valid_fraction < 1.0:
        raise ValueError(f"valid_fraction must be in (0, 1), got {valid_fraction}")


def _check_lm_model(setup: LMSetup) -> None:
    config = gpt_config(setup.model_preset, **{**setup.model_overrides, "vocab_size": STAND_IN_SIZE})
    if setup.block_size is not None and setup.block_size > config.n_positions:
        raise ValueError(f"block_size={setup.block_size} exceeds the model's n_positions={config.n_positions}")


def _check_mlm_model(setup: MLMSetup) -> None:
    config = bert_config(setup.model_preset, **{**setup.model_overrides, "vocab_size": STAND_IN_SIZE})
    if setup.max_len > config.n_positions:
        raise ValueError(f"max_len={setup.max_len} exceeds the model's n_positions={config.n_positions}")


#: Named LM recipes (``--preset``): a model size plus the training settings that suit it.
#: "shakespeare-char" aims at the lowest validation loss after 10 minutes on two CPU cores:
#: AdamW with β2 = 0.99 (few tokens per step, so a shorter second-moment memory, as nanoGPT's
#: shakespeare_char), a short warm-up, then a cosine decay timed to the 10-minute budget (the rate
#: reaches its floor when the clock runs out), no dropout (a few epochs only).
#: Every preset but tiny trains with precision="auto": bf16 autocast only where a short probe of the
#: model's steps on this machine measures it faster (attnlab.train.TrainingPrecision);
#: tiny (tests and smoke runs of seconds) stays fp32, so that its runs are the same on every machine.
_SHAKESPEARE_TRAIN = TrainConfig(
    epochs=1000,
    time_budget_s=10 * 60,
    lr=3e-3,
    warmup_steps=100,
    schedule="cosine",
    betas=(0.9, 0.99),
    eps=1e-8,
    weight_decay=0.1,
    clip_norm=1.0,
    eval_every_steps=250,
    log_every=50,
    precision="auto",
)

LM_PRESETS: dict[str, LMSetup] = {
    "shakespeare-char": LMSetup(
        model_preset="shakespeare-char", tokenizer="char", block_size=256, batch_size=16, train=_SHAKESPEARE_TRAIN
    ),
    # The shipped model (attnlab/assets/shakespeare-char): the same schedule, stopped by steps
    # rather than the clock, so `make models` gives the same model on any machine.
    "shakespeare-char-small": LMSetup(
        model_preset="shakespeare-char-small",
        tokenizer="char",
        block_size=128,
        batch_size=32,
        train=dataclasses.replace(_SHAKESPEARE_TRAIN, time_budget_s=None, max_steps=1500),
    ),
    "tiny": LMSetup(
        model_preset="tiny",
        tokenizer="char",
        block_size=32,
        batch_size=8,
        train=TrainConfig(
            epochs=1, lr=3e-3, warmup_steps=10, log_every=10, betas=(0.9, 0.99), eps=1e-8, precision="fp32"
        ),
    ),
}

#: Named MLM recipes (``--preset``).
MLM_PRESETS: dict[str, MLMSetup] = {
    "mini": MLMSetup(
        train=TrainConfig(
            epochs=1000,
            time_budget_s=10 * 60,
            lr=1e-3,
            warmup_steps=200,
            betas=(0.9, 0.98),
            eps=1e-8,
            weight_decay=0.01,
            eval_every_steps=250,
            precision="auto",
        ),
    ),
    "tiny": MLMSetup(
        model_preset="tiny",
        tokenizer="char",
        max_len=32,
        batch_size=8,
        train=TrainConfig(epochs=1, lr=3e-3, warmup_steps=10, log_every=10, eps=1e-8, precision="fp32"),
    ),
}


# --------------------------------------------------------------------------------------------
# Text and tokenizers.
# --------------------------------------------------------------------------------------------


def split_text(text: str, valid_fraction: float) -> tuple[str, str]:
    """The training and the validation text: the last ``valid_fraction`` of the characters validates."""
    _check_fraction(valid_fraction)
    if not text.strip():
        raise ValueError("the training text is empty")
    cut = int(len(text) * (1.0 - valid_fraction))
    return text[:cut], text[cut:]


def _build_tokenizer(kind: str, text: str, vocab_size: int):
    if kind == "char":
        return tokenizers.CharTokenizer.train([text])
    if kind == "bpe":
        # Paragraphs as training units: the merges never cross a blank line, and the newlines
        # inside a paragraph are in the alphabet, so the whole text encodes without [UNK].
        units = [p for p in text.split("\n\n") if p.strip()]
        return tokenizers.train_subword_tokenizer(units, vocab_size, model="bpe")
    raise ValueError(f"tokenizer must be 'char' or 'bpe', got {kind!r}")


def encode_text(tokenizer, text: str) -> Tensor:
    """``text`` as one long run of token ids, as the LM and MLM tasks read their corpora.

    Shape:
        returns ``(N,)`` int64
    """
    return torch.tensor(tokenizer.encode(text), dtype=torch.long)  # (N,)


def _checkpoint_tokenizer(directory: Path):
    return tokenizers.load_tokenizer(directory / f"{TOKENIZER_NAME}.json")


# --------------------------------------------------------------------------------------------
# Causal LM.
# --------------------------------------------------------------------------------------------


class LMTask:
    """Supplies :func:`attnlab.train.train` with next-token batches and the validation loss."""

    metric = "loss"
    maximize = False

    def __init__(self, setup: LMSetup, config: GPTConfig, tokenizer, train_ids: Tensor, valid_ids: Tensor) -> None:
        self.setup, self.config, self.tokenizer = setup, config, tokenizer
        self.block = setup.block_size or config.n_positions
        if self.block > config.n_positions:
            raise ValueError(f"block_size={self.block} exceeds the model's n_positions={config.n_positions}")
        if self.block < 2:
            raise ValueError(f"block_size must be ≥ 2 (one input and one target), got {self.block}")
        if train_ids.numel() < self.block + 1:
            raise ValueError(f"the training text has {train_ids.numel()} tokens, fewer than one block of {self.block}")
        if valid_ids.numel() < 2:
            raise ValueError("the validation split has fewer than 2 tokens; give a longer text")
        self.train_ids, self.valid_ids = train_ids, valid_ids
        self.device = torch.device(setup.train.device)

    def batches(self, epoch: int, rank: int, world_size: int) -> list[Tensor]:
        """Shape: a list of ``(B, T)`` id tensors covering the training stream once."""
        T, B = self.block, self.setup.batch_size
        g = torch.Generator().manual_seed(self.setup.train.seed * 1_000_003 + epoch)
        # A random start offset per epoch, so block boundaries fall somewhere else every time.
        offset = int(torch.randint(0, T, (1,), generator=g)) if self.train_ids.numel() > 2 * T else 0
        n = (self.train_ids.numel() - offset) // T
        blocks = self.train_ids[offset : offset + n * T].view(n, T)  # (n, T)
        order = torch.randperm(n, generator=g)
        batches = [blocks[order[i : i + B]] for i in range(0, n, B)]  # each (B, T)
        return [b.to(self.device) for b in batches[rank::world_size]]

    def loss(self, model: nn.Module, batch: Tensor) -> tuple[Tensor, int]:
        out = model(batch, labels=batch)
        return out.loss, batch.shape[0] * (batch.shape[1] - 1)

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        ids = self.valid_ids
        if self.setup.eval_tokens is not None:
            ids = ids[: self.setup.eval_tokens]
        T = min(self.block, ids.numel())
        n = ids.numel() // T
        blocks = ids[: n * T].view(n, T)  # (n, T)
        total, count = 0.0, 0
        for i in range(0, n, self.setup.batch_size):
            batch = blocks[i : i + self.setup.batch_size].to(self.device)  # (B, T)
            out = model(batch, labels=batch)
            k = batch.shape[0] * (T - 1)
            total += out.loss.item() * k
            count += k
        loss = total / max(count, 1)
        return {"loss": loss, "ppl": math.exp(min(loss, 50.0))}

    def checkpoint_payload(self) -> tuple[dict, dict]:
        return self.config.to_dict(), {TOKENIZER_NAME: self.tokenizer}


def _run_tokenizer(setup, resume_from: Path | None, train_text: str):
    """The tokenizer of a run: reloaded from the checkpoint it resumes from, else trained on the text."""
    if resume_from is not None:
        return _checkpoint_tokenizer(resume_from)
    return _build_tokenizer(setup.tokenizer, train_text, setup.vocab_size)


def _train_language_model(
    setup: LMSetup | MLMSetup,
    text: str,
    resume: bool,
    make_config: Callable[[Any], Any],
    task_cls: Callable[..., Any],
    model_cls: Callable[[Any], nn.Module],
) -> tuple[nn.Module, TrainResult, Any]:
    """The one training of :func:`train_lm` and :func:`train_mlm`, which differ only in the config,
    the task and the model: the run folder checked, the text split, the tokenizer trained (or the
    resumed run's), then the model trained and its best weights loaded."""
    out = Path(setup.train.out_dir) if setup.train.out_dir else None
    resume_from = check_run_folder(out, resume, setup.train.overwrite)
    train_text, valid_text = split_text(text, setup.valid_fraction)
    tokenizer = _run_tokenizer(setup, resume_from, train_text)
    config = make_config(tokenizer)
    task = task_cls(setup, config, tokenizer, encode_text(tokenizer, train_text), encode_text(tokenizer, valid_text))
    torch.manual_seed(setup.train.seed)
    model = model_cls(config)
    result = train(model, task, setup.train, resume=resume)
    if out is not None and (out / "best").is_dir():
        ckpt.load_weights(model, ckpt.load_checkpoint(out / "best"))
    return model.eval(), result, tokenizer


def train_lm(setup: LMSetup, text: str, *, resume: bool = False) -> tuple[GPT, TrainResult, Any]:
    """Train a GPT on ``text``; return the best model (by validation loss), the run and the tokenizer."""

    def make_config(tokenizer) -> GPTConfig:
        return gpt_config(setup.model_preset, **{**setup.model_overrides, "vocab_size": tokenizer.vocab_size})

    return _train_language_model(setup, text, resume, make_config, LMTask, GPT)


# --------------------------------------------------------------------------------------------
# Masked LM.
# --------------------------------------------------------------------------------------------


@dataclass
class MLMBatch:
    input_ids: Tensor  # (B, S) corrupted ids
    labels: Tensor  # (B, S) original id at selected positions, -100 elsewhere
    token_type_ids: Tensor  # (B, S) 0 for segment A, 1 for segment B
    next_sentence_labels: Tensor | None  # (B,) 0 = B follows A, 1 = random; None without NSP

    def to(self, device) -> MLMBatch:
        nsl = None if self.next_sentence_labels is None else self.next_sentence_labels.to(device)
        return MLMBatch(self.input_ids.to(device), self.labels.to(device), self.token_type_ids.to(device), nsl)


class MLMTask:
    """Supplies :func:`attnlab.train.train` with masked-LM batches and the validation metrics."""

    metric = "loss"
    maximize = False

    def __init__(self, setup: MLMSetup, config: BertConfig, tokenizer, train_ids: Tensor, valid_ids: Tensor) -> None:
        # Without next-sentence prediction the loss never reaches BERT's pooler (it feeds only the
        # NSP head): DDP must be told (attnlab.train.TrainTask).
        self.unused_parameters = not setup.next_sentence
        if tokenizer.mask_id is None:
            raise ValueError("masked-LM training needs a tokenizer with a [MASK] token")
        if setup.max_len > config.n_positions:
            raise ValueError(f"max_len={setup.max_len} exceeds the model's n_positions={config.n_positions}")
        self.setup, self.config, self.tokenizer = setup, config, tokenizer
        # With NSP, two segments share one sequence: [CLS] A [SEP] B [SEP].
        self.seg = (setup.max_len - 3) // 2 if setup.next_sentence else setup.max_len - 2
        if self.seg < 1:
            raise ValueError(f"max_len={setup.max_len} leaves no room for tokens")
        self.train_segments = self._segments(train_ids, "training")
        self.valid_segments = self._segments(valid_ids, "validation")
        if setup.eval_sequences is not None:
            self.valid_segments = self.valid_segments[: setup.eval_sequences + 1]
        self.special_ids = [tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id, tokenizer.mask_id]
        self.device = torch.device(setup.train.device)

    def _segments(self, ids: Tensor, what: str) -> Tensor:
        n = ids.numel() // self.seg
        minimum = 2 if self.setup.next_sentence else 1
        if n < minimum:
            raise ValueError(
                f"the {what} split has {ids.numel()} tokens, too few for {minimum} segment(s) of {self.seg}"
            )
        return ids[: n * self.seg].view(n, self.seg)  # (n, seg)

    def _sequences(self, segments: Tensor, g: torch.Generator) -> tuple[Tensor, Tensor, Tensor | None]:
        """Wrap segments as model inputs. Shape: segments ``(n, seg)`` → ids, types ``(n', S)``."""
        tok = self.tokenizer
        n = segments.shape[0]
        if not self.setup.next_sentence:
            cls = torch.full((n, 1), tok.bos_id)
            sep = torch.full((n, 1), tok.eos_id)
            ids = torch.cat([cls, segments, sep], dim=1)  # (n, S)
            return ids, torch.zeros_like(ids), None
        a = segments[:-1]  # (n-1, seg): sentence A
        follows = segments[1:]  # its true successor
        is_random = torch.rand(n - 1, generator=g) < 0.5  # (n-1,)
        # A random segment other than the true successor (shift by 2…n-1 positions).
        other = (torch.arange(n - 1) + 1 + torch.randint(1, max(n - 1, 2), (n - 1,), generator=g)) % n
        b = torch.where(is_random[:, None], segments[other], follows)  # (n-1, seg)
        m = n - 1
        cls, sep = torch.full((m, 1), tok.bos_id), torch.full((m, 1), tok.eos_id)
        ids = torch.cat([cls, a, sep, b, sep], dim=1)  # (n-1, S)
        types = torch.cat(
            [torch.zeros(m, self.seg + 2, dtype=torch.long), torch.ones(m, self.seg + 1, dtype=torch.long)], dim=1
        )
        return ids, types, is_random.long()

    def _batches(self, segments: Tensor, g: torch.Generator, shuffle: bool) -> list[MLMBatch]:
        ids, types, nsp = self._sequences(segments, g)
        inputs, labels = mask_tokens(
            ids,
            mask_id=self.tokenizer.mask_id,
            vocab_size=self.tokenizer.vocab_size,
            special_ids=self.special_ids,
            p=self.setup.mask_prob,
            generator=g,
        )
        order = torch.randperm(ids.shape[0], generator=g) if shuffle else torch.arange(ids.shape[0])
        B = self.setup.batch_size
        out = []
        for i in range(0, ids.shape[0], B):
            idx = order[i : i + B]
            out.append(MLMBatch(inputs[idx], labels[idx], types[idx], None if nsp is None else nsp[idx]))
        return out

    def batches(self, epoch: int, rank: int, world_size: int) -> list[MLMBatch]:
        g = torch.Generator().manual_seed(self.setup.train.seed * 1_000_003 + epoch)
        batches = self._batches(self.train_segments, g, shuffle=True)
        return [b.to(self.device) for b in batches[rank::world_size]]

    def loss(self, model: nn.Module, batch: MLMBatch) -> tuple[Tensor, int]:
        out = model(
            batch.input_ids,
            token_type_ids=batch.token_type_ids,
            labels=batch.labels,
            next_sentence_labels=batch.next_sentence_labels,
        )
        return out.loss, int((batch.labels != -100).sum())

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        # The same masks at every evaluation (a fixed generator), so the numbers are comparable.
        g = torch.Generator().manual_seed(12345)
        total, correct, count, nsp_correct, nsp_count = 0.0, 0, 0, 0, 0
        for batch in self._batches(self.valid_segments, g, shuffle=False):
            batch = batch.to(self.device)
            out = model(batch.input_ids, token_type_ids=batch.token_type_ids)
            selected = batch.labels != -100  # (B, S)
            logits = out.logits[selected]  # (n, V)
            targets = batch.labels[selected]  # (n,)
            total += torch.nn.functional.cross_entropy(logits, targets, reduction="sum").item()
            correct += int((logits.argmax(-1) == targets).sum())
            count += targets.numel()
            if batch.next_sentence_labels is not None:
                nsp_correct += int((out.next_sentence_logits.argmax(-1) == batch.next_sentence_labels).sum())
                nsp_count += batch.next_sentence_labels.numel()
        metrics = {"loss": total / max(count, 1), "accuracy": correct / max(count, 1)}
        if nsp_count:
            metrics["nsp_accuracy"] = nsp_correct / nsp_count
        return metrics

    def checkpoint_payload(self) -> tuple[dict, dict]:
        return self.config.to_dict(), {TOKENIZER_NAME: self.tokenizer}


def train_mlm(setup: MLMSetup, text: str, *, resume: bool = False) -> tuple[BertForMaskedLM, TrainResult, Any]:
    """Pretrain a BERT on ``text`` with masked LM (and NSP); return the best model, the run, the tokenizer."""

    def make_config(tokenizer) -> BertConfig:
        fields = {
            **setup.model_overrides,
            "vocab_size": tokenizer.vocab_size,
            "pad_id": tokenizer.pad_id,
            "next_sentence_head": setup.next_sentence,
        }
        return bert_config(setup.model_preset, **fields)

    return _train_language_model(setup, text, resume, make_config, MLMTask, BertForMaskedLM)


# --------------------------------------------------------------------------------------------
# Loading trained or pretrained models.
# --------------------------------------------------------------------------------------------


def load_pretrained(path: str | Path) -> tuple[nn.Module, PretrainedTokenizer]:
    """Model and tokenizer of a HuggingFace GPT-2 or BERT checkpoint directory (eval mode).

    Shape:
        a checkpoint directory → ``(model, tokenizer)``
    """
    path = Path(path)
    model = load_hf_model(path)
    return model, load_hf_tokenizer(path, load_hf_config(path).get("model_type"))


def gpt_precision(model: GPT, precision: str = "auto") -> tuple[GPT, str, str]:
    """A GPT in the inference precision ``precision`` (``"auto"``, ``"fp32"``, ``"bf16"``), the
    precision used and why: ``"auto"`` takes bf16 only on a CPU with native bf16 where 16 greedy
    tokens after a 16-token prompt are measurably faster in bf16 (:func:`attnlab.accel.precision.resolve`,
    cached per machine and model shape). bf16 is a copy; ``model`` stays as it was.

    Shape:
        no tensors.
    """
    from ..decode import generate

    device = next(model.parameters()).device
    copies: dict[torch.dtype, nn.Module] = {}

    def model_in(dtype: torch.dtype) -> GPT:
        if next(model.parameters()).dtype == dtype:
            return model
        if dtype not in copies:
            copies[dtype] = _copy_in(model, dtype)
        return copies[dtype]  # type: ignore[return-value]

    prompt = (torch.arange(16) % max(model.config.vocab_size - 1, 1)).unsqueeze(0).to(device)  # (1, 16)

    def run(precision: str) -> None:
        with torch.no_grad():
            generate(model_in(inference_precision.dtype_of(precision)), prompt, max_new_tokens=16, temperature=0.0)

    chosen, why = inference_precision.resolve(precision, device=device, model=model, run=run)
    return model_in(inference_precision.dtype_of(chosen)), chosen, why


def _copy_in(model: nn.Module, dtype: torch.dtype) -> nn.Module:
    import copy

    with torch.inference_mode(False):  # ordinary tensors (the kernels' caches read their versions)
        return copy.deepcopy(model).to(dtype).eval()


def load_language_model(path: str | Path, device: str = "cpu", precision: str = "fp32") -> tuple[nn.Module, Any]:
    """Model and tokenizer from an attnlab checkpoint (``train lm``/``train mlm``) or a
    HuggingFace GPT-2/BERT directory. Returns :class:`GPT`, :class:`BertForMaskedLM` or
    :class:`BertModel` (eval mode). A GPT is given in ``precision`` (:func:`gpt_precision`;
    ``"auto"``: bf16 where measured faster here); the others stay fp32."""
    inference_precision.check(precision)
    directory = resolve_model_dir(path)
    if (directory / ckpt.TOKENIZERS_FILE).is_file():
        checkpoint = ckpt.load_checkpoint(directory)
        model_type = checkpoint.model_type
        if model_type == "gpt":
            model: nn.Module = GPT(checkpoint.make_config(GPTConfig.from_dict))
        elif model_type == "bert":
            config = checkpoint.make_config(BertConfig.from_dict)
            has_head = any(k.startswith("mlm.") for k in checkpoint.state_dict)
            model = BertForMaskedLM(config) if has_head else BertModel(config)
        else:
            raise ValueError(f"{directory}: model_type {model_type!r} is not a language model (gpt, bert)")
        ckpt.load_weights(model, checkpoint)
        tokenizer = _checkpoint_tokenizer(directory)
    elif is_hf_checkpoint(directory):
        model, tokenizer = load_pretrained(directory)
    else:
        raise ValueError(
            f"{directory}: neither an attnlab checkpoint (no {ckpt.TOKENIZERS_FILE}) "
            "nor a HuggingFace checkpoint (no model_type in config.json)"
        )
    model = model.to(device).eval()
    if isinstance(model, GPT) and precision != "fp32":
        model = gpt_precision(model, precision)[0]
    return model, tokenizer


def load_sentence_encoder(path: str | Path | None = None) -> SentenceEncoder:
    """A sentence-transformers BERT checkpoint (default: the packaged all-MiniLM-L6-v2), pooled as
    its files say (:func:`attnlab.models.convert_hf.sentence_transformers_pooling`); a plain BERT
    directory is mean-pooled and normalised.

    Shape:
        a checkpoint directory → a :class:`SentenceEncoder`
    """
    path = minilm_dir() if path is None else Path(path)
    model, tokenizer = load_pretrained(path)
    if not isinstance(model, (BertModel, BertForMaskedLM)):
        raise ValueError(f"{path}: sentence embeddings need a BERT checkpoint, got {type(model).__name__}")
    bert = model.bert if isinstance(model, BertForMaskedLM) else model
    normalize, max_seq_length = sentence_transformers_pooling(path)
    max_length = bert.config.n_positions if max_seq_length is None else min(bert.config.n_positions, max_seq_length)
    return SentenceEncoder(bert, tokenizer, max_length, normalize)


def load_encoder(path: str | Path | None = None, device: str = "cpu") -> SentenceEncoder:
    """A sentence encoder: the packaged all-MiniLM-L6-v2 by default, a HuggingFace BERT
    (sentence-transformers) directory, or an attnlab BERT checkpoint (mean pooling, normalised)."""
    if path is not None:
        directory = resolve_model_dir(path)
        if (directory / ckpt.TOKENIZERS_FILE).is_file():
            model, tokenizer = load_language_model(directory, device)
            bert = getattr(model, "bert", model)
            if not isinstance(bert, BertModel):
                raise ValueError(f"{directory}: sentence embeddings need a BERT model, got {type(model).__name__}")
            return SentenceEncoder(bert, tokenizer, bert.config.n_positions, True)
        path = directory
    encoder = load_sentence_encoder(path)
    encoder.model.to(device)
    return encoder


LM_JOB = Job(
    name="lm",
    presets=LM_PRESETS,
    setup_cls=LMSetup,
    model_config=GPTConfig,
    train=train_lm,
    load=load_language_model,
    check_model=_check_lm_model,
)

MLM_JOB = Job(
    name="mlm",
    presets=MLM_PRESETS,
    setup_cls=MLMSetup,
    model_config=BertConfig,
    train=train_mlm,
    load=load_language_model,
    check_model=_check_mlm_model,
)
