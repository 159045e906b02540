"""The translation recipe: corpus → tokenizers → model → training → decoding → BLEU.

This is the layer above the building blocks and the models (as torchtune's recipes): it knows
how the pieces fit together for translation, and nothing in the pieces knows about it. The CLI
commands ``attnlab train translate``, ``translate``, ``evaluate`` and ``demo`` are thin wrappers
over the functions here.

Architectures are looked up by name in :data:`ARCHS`, so a new encoder–decoder (the RNN models)
plugs into the same training, decoding, checkpoints and heatmaps by registering itself.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .. import checkpoint as ckpt
from ..accel import precision as inference_precision
from ..assets.locate import resolve_model_dir
from ..data import batching, enja, tokenizers
from ..data.corpus import read_split
from ..decode import check_beam
from ..inference.translate import Translator
from ..metrics import bleu, chrf, exact_match
from ..models.config import check_fields
from ..models.rnn_seq2seq import PRESETS as RNN_PRESETS
from ..models.rnn_seq2seq import RNNSeq2Seq, RNNSeq2SeqConfig
from ..models.transformer import PRESETS as TRANSFORMER_PRESETS
from ..models.transformer import Transformer, TransformerConfig
from ..runs import check_run_folder
from ..train import TrainConfig, TrainResult, train
from . import STAND_IN_SIZE, Job
from . import apply_overrides as _apply_overrides

Tensor = torch.Tensor


@dataclass(frozen=True)
class Arch:
    """How to build one kind of encoder–decoder from its config."""

    config_cls: type  # the model's config dataclass
    model_cls: Callable[[Any], nn.Module]  # builds the model from a config
    presets: dict[str, dict]  # named model sizes


#: Encoder–decoder architectures by name (``--arch``). Each model's ``config.model_type`` is its key.
ARCHS: dict[str, Arch] = {
    "transformer": Arch(TransformerConfig, Transformer, TRANSFORMER_PRESETS),
    "rnn": Arch(RNNSeq2SeqConfig, RNNSeq2Seq, RNN_PRESETS),
}


@dataclass
class TranslationSetup:
    """Everything that defines a translation run besides the data paths."""

    arch: str = "transformer"  # key of ARCHS
    model_preset: str = "small"  # key of the architecture's presets
    model_overrides: dict = field(default_factory=dict)  # config fields set on top of the preset
    tokenizer: str = "bpe"  # "bpe", "unigram" or "char"
    tgt_tokenizer: str | None = None  # a different kind for the target side (None: same as tokenizer)
    vocab_size: int = 8000  # subword vocabulary size (per side unless joint)
    joint_vocab: bool = True  # one tokenizer for both languages (lets the model share embeddings)
    max_tokens: int = 4096  # padded tokens per batch (source or target, whichever is longer)
    max_len: int = 128  # longest training sequence in tokens (longer pairs are dropped)
    label_smoothing: float = 0.1  # Vaswani §5.4
    eval_sentences: int = 500  # validation sentences decoded for BLEU at each evaluation
    eval_beam: int = 1  # beam size during training-time evaluation (1 = greedy, fastest)
    metric: str = "bleu"  # metric that picks the best checkpoint: one of METRICS (bleu, chrf, exact_match, loss)
    bleu_tokenize: str = "13a"  # sacreBLEU tokenizer of the target language ("ja-mecab" or "char" for Japanese)
    src_lang: str | None = None  # source language ("en", "ja"): how a user's sentence is normalised (data/enja.py)
    tgt_lang: str | None = None  # target language ("en", "ja"); with from_tokenized, how the corpus is made raw
    # The corpus is pre-tokenized (small_parallel_enja): make every line raw text first (Japanese
    # spaces removed, English detokenized; data/enja.py), so the model learns what users type.
    from_tokenized: bool = False
    # The training English is lower-cased (small_parallel_enja as it ships): lower-case a user's
    # English too. The shipped translators train on cased text (data/enja_mix.py) and leave it.
    lowercase: bool = False
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        check_fields(
            self,
            positive=("vocab_size", "max_tokens", "max_len", "eval_sentences"),
            fractions=("label_smoothing",),
            choices={
                "tokenizer": TOKENIZER_KINDS,
                "tgt_tokenizer": TOKENIZER_KINDS,
                "metric": METRICS,
                "src_lang": enja.LANGUAGES,
                "tgt_lang": enja.LANGUAGES,
            },
        )
        if self.from_tokenized and not (self.src_lang and self.tgt_lang):
            raise ValueError("from_tokenized needs src_lang and tgt_lang: the rules differ by language")
        check_beam(self.eval_beam)


#: The tokenizer kinds a translation can use (``tokenizer``, ``tgt_tokenizer``).
TOKENIZER_KINDS = ("bpe", "unigram", "char")
#: The validation metrics of a translation run (:meth:`TranslationTask.evaluate`); ``metric`` picks one.
METRICS = ("bleu", "chrf", "exact_match", "loss")


def _enja_setup(src_lang: str, tgt_lang: str) -> TranslationSetup:
    # The shipped ja⇄en translators, trained on the raw, cased corpus that data/enja_mix.py makes
    # from Tatoeba and small_parallel_enja (sentences and runs of two or three of them), and scored
    # as WAT scores Japanese (sacreBLEU ja-mecab) and English (13a). Stopped by steps, not the
    # clock, so the same command gives the same model on any machine.
    return TranslationSetup(
        model_preset="enja",
        tokenizer="bpe",
        vocab_size=8000,
        joint_vocab=True,
        max_tokens=2048,
        max_len=128,  # tokens: the concatenated pairs reach 40 words and more
        eval_sentences=500,
        bleu_tokenize="ja-mecab" if tgt_lang == "ja" else "13a",
        src_lang=src_lang,
        tgt_lang=tgt_lang,
        train=TrainConfig(
            epochs=100,
            max_steps=3000,  # the shipped models' step budget (their model cards give the time it took)
            lr=1.5e-3,
            warmup_steps=400,
            schedule="cosine",
            eval_every_steps=750,
            patience=None,
            precision="auto",
        ),
    )


#: Named presets (``--preset``): a model size plus the training settings that suit it.
PRESETS: dict[str, TranslationSetup] = {
    "multi30k": TranslationSetup(
        model_preset="multi30k",
        tokenizer="bpe",
        vocab_size=8000,
        joint_vocab=True,
        max_tokens=4096,  # more updates beat bigger batches within the 30-minute CPU budget
        eval_sentences=1014,
        # precision "auto": bf16 autocast only where a probe of this model's steps shows it faster
        # on this machine (it is on CPUs with bf16 instructions, not on others). Cosine decay paced by the 30-minute budget, which scored better than 1/√step (README).
        train=TrainConfig(
            epochs=30,
            lr=1.5e-3,
            warmup_steps=300,
            schedule="cosine",
            patience=None,
            time_budget_s=30 * 60,
            precision="auto",
        ),
    ),
    # small_parallel_enja (data/enja.py): trained on raw text, scored as WAT scores Japanese
    # (sacreBLEU ja-mecab) and English (13a). Stopped by steps, not the clock, so the same command
    # gives the same model on any machine.
    "ja-en": _enja_setup("ja", "en"),
    "en-ja": _enja_setup("en", "ja"),
    "small": TranslationSetup(),
    "tiny": TranslationSetup(
        model_preset="tiny",
        tokenizer="char",
        max_tokens=512,
        eval_sentences=50,
        train=TrainConfig(epochs=2, lr=3e-3, warmup_steps=10, log_every=10, precision="fp32"),
    ),
}


# --------------------------------------------------------------------------------------------
# The trainer's task.
# --------------------------------------------------------------------------------------------


class TranslationTask:
    """Supplies :func:`attnlab.train.train` with batches, the loss and the evaluation."""

    def __init__(
        self,
        setup: TranslationSetup,
        model_config: Any,
        src_tok,
        tgt_tok,
        train_pairs: Sequence[tuple[str, str]],
        valid_pairs: Sequence[tuple[str, str]],
    ) -> None:
        self.setup, self.model_config = setup, model_config
        self.src_tok, self.tgt_tok = src_tok, tgt_tok
        self.metric = setup.metric
        self.maximize = setup.metric != "loss"
        self.device = torch.device(setup.train.device)
        self.train_ids = _encode_pairs(train_pairs, src_tok, tgt_tok, setup.max_len)
        if not self.train_ids:
            raise ValueError(f"no training pair is at most max_len={setup.max_len} tokens long")
        self.valid_pairs = list(valid_pairs)[: setup.eval_sentences]
        self.valid_ids = _encode_pairs(self.valid_pairs, src_tok, tgt_tok, None)
        if not self.valid_ids:
            raise ValueError("no validation pair has tokens on both sides: the validation set is empty")
        self._src_len, self._tgt_len = batching.pair_lengths(self.train_ids)

    def batches(self, epoch: int, rank: int, world_size: int) -> list[batching.Seq2SeqBatch]:
        index_batches = batching.bucket_batches(
            self._src_len,
            self._tgt_len,
            max_tokens=self.setup.max_tokens,
            shuffle=True,
            seed=self.setup.train.seed,
            epoch=epoch,
            rank=rank,
            world_size=world_size,
        )
        return [self._collate([self.train_ids[i] for i in idx]) for idx in index_batches]

    def _collate(self, pairs) -> batching.Seq2SeqBatch:
        t = self.tgt_tok
        return batching.collate_pairs(pairs, pad_id=t.pad_id, bos_id=t.bos_id, eos_id=t.eos_id).to(self.device)

    def loss(self, model: nn.Module, batch) -> tuple[Tensor, int]:
        out = model(
            batch.src,
            batch.tgt_in,
            src_mask=batch.src_mask,
            tgt_mask=batch.tgt_mask,
            labels=batch.tgt_out,
            label_smoothing=self.setup.label_smoothing,
        )
        return out.loss, batch.n_tgt_tokens

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        # Validation loss (teacher forced, no smoothing) and BLEU of decoded translations.
        total, count = 0.0, 0
        idx_batches = batching.bucket_batches(
            *batching.pair_lengths(self.valid_ids), max_tokens=self.setup.max_tokens, shuffle=False
        )
        for idx in idx_batches:
            b = self._collate([self.valid_ids[i] for i in idx])
            out = model(b.src, b.tgt_in, src_mask=b.src_mask, tgt_mask=b.tgt_mask)
            total += F.cross_entropy(
                out.logits.flatten(0, 1), b.tgt_out.flatten(), ignore_index=self.tgt_tok.pad_id, reduction="sum"
            ).item()
            count += b.n_tgt_tokens
        translator = Translator(model, self.src_tok, self.tgt_tok)
        hyps = [t.text for t in translator.translate([s for s, _ in self.valid_pairs], beam_size=self.setup.eval_beam)]
        refs = [r for _, r in self.valid_pairs]
        return {
            "loss": total / max(count, 1),
            "bleu": bleu(hyps, refs, tokenize=self.setup.bleu_tokenize),
            "chrf": chrf(hyps, refs),
            "exact_match": exact_match(hyps, refs),
        }

    def checkpoint_payload(self) -> tuple[dict, dict]:
        toks = {"src_tokenizer": self.src_tok, "tgt_tokenizer": self.tgt_tok}
        return checkpoint_config(self.setup, self.model_config), toks


def checkpoint_config(setup: TranslationSetup, model_config: Any) -> dict:
    """The ``config.json`` of a translator trained with ``setup``: the model config, and what
    :func:`load_translator` needs besides (the BLEU tokenizer, the languages)."""
    config = dataclasses.asdict(model_config)
    config["bleu_tokenize"] = setup.bleu_tokenize
    config["src_lang"], config["tgt_lang"] = setup.src_lang, setup.tgt_lang
    if setup.src_lang is not None:  # only a model with a source language normalises its input
        config["lowercase"] = setup.lowercase or setup.from_tokenized
    return config


def _encode_pairs(pairs, src_tok, tgt_tok, max_len: int | None) -> list[tuple[list[int], list[int]]]:
    # A side that tokenizes to nothing cannot be trained or scored on; drop it.
    return [(s, t) for s, t in batching.encode_pairs(pairs, src_tok, tgt_tok, max_len) if s and t]


# --------------------------------------------------------------------------------------------
# Building, training, loading.
# --------------------------------------------------------------------------------------------


def model_config(setup: TranslationSetup) -> type:
    """The config class of the setup's architecture."""
    if setup.arch not in ARCHS:
        raise ValueError(f"unknown architecture {setup.arch!r}; choose from {sorted(ARCHS)}")
    return ARCHS[setup.arch].config_cls


def apply_overrides(setup: TranslationSetup, overrides: Sequence[str]) -> TranslationSetup:
    """Apply ``key=value`` overrides: ``model.d_model=512``, ``train.lr=1e-3``, ``vocab_size=4000``.

    ``model.*`` fields are checked against the architecture that will be built (an ``arch=...``
    among the overrides included).
    """
    return _apply_overrides(setup, overrides, model_config)


def build_config(setup: TranslationSetup, src_vocab: int, tgt_vocab: int, pad_id: int) -> Any:
    """The model config of ``setup``: its architecture's preset, its overrides, the tokenizers' sizes.

    Raises:
        ValueError: an unknown architecture or preset, an override of a size the tokenizers
            decide, or a field the config refuses.
    """
    if setup.arch not in ARCHS:
        raise ValueError(f"unknown architecture {setup.arch!r}; choose from {sorted(ARCHS)}")
    arch = ARCHS[setup.arch]
    if setup.model_preset not in arch.presets:
        raise ValueError(f"unknown {setup.arch} preset {setup.model_preset!r}; choose from {sorted(arch.presets)}")
    fixed = sorted(set(setup.model_overrides) & {"src_vocab_size", "tgt_vocab_size", "pad_id"})
    if fixed:
        raise ValueError(f"model fields {fixed} come from the tokenizers; set the size with vocab_size=N")
    fields = dict(arch.presets[setup.model_preset], **setup.model_overrides)
    if fields.get("share_embeddings") and not setup.joint_vocab:
        fields["share_embeddings"] = False  # two vocabularies cannot share one embedding table
    return arch.config_cls(src_vocab_size=src_vocab, tgt_vocab_size=tgt_vocab, pad_id=pad_id, **fields)


def build_model(setup: TranslationSetup, src_vocab: int, tgt_vocab: int, pad_id: int) -> tuple[nn.Module, Any]:
    config = build_config(setup, src_vocab, tgt_vocab, pad_id)
    return ARCHS[setup.arch].model_cls(config), config


def train_translation(
    setup: TranslationSetup,
    train_pairs: Sequence[tuple[str, str]],
    valid_pairs: Sequence[tuple[str, str]],
    *,
    resume: bool = False,
) -> tuple[nn.Module, TrainResult, Translator]:
    """Train tokenizers (or reload them when resuming) and a model; return the best translator.

    Raises:
        ValueError: no training or no validation pairs (checked before any tokenizer is trained).
    """
    out = Path(setup.train.out_dir) if setup.train.out_dir else None
    resume_from = check_run_folder(out, resume, setup.train.overwrite)  # before the data is looked at
    train_pairs, valid_pairs = list(train_pairs), list(valid_pairs)
    if not train_pairs:
        raise ValueError("the training set is empty: no sentence pairs to train on")
    if not valid_pairs:
        raise ValueError("the validation set is empty: the best model is chosen on it, give at least one pair")
    if setup.from_tokenized:
        train_pairs = raw_pairs(train_pairs, setup.src_lang, setup.tgt_lang)
        valid_pairs = raw_pairs(valid_pairs, setup.src_lang, setup.tgt_lang)
    if resume_from is not None:
        src_tok, tgt_tok = _load_tokenizers(resume_from)
    else:
        src_tok, tgt_tok = train_tokenizers(setup, [s for s, _ in train_pairs], [t for _, t in train_pairs])
    torch.manual_seed(setup.train.seed)
    model, config = build_model(setup, src_tok.vocab_size, tgt_tok.vocab_size, tgt_tok.pad_id)
    task = TranslationTask(setup, config, src_tok, tgt_tok, train_pairs, valid_pairs)
    result = train(model, task, setup.train, resume=resume)
    if out is not None and (out / "best").is_dir():
        ckpt.load_weights(model, ckpt.load_checkpoint(out / "best"))
    model.eval()
    return (
        model,
        result,
        Translator(
            model,
            src_tok,
            tgt_tok,
            bleu_tokenize=setup.bleu_tokenize,
            src_lang=setup.src_lang,
            tgt_lang=setup.tgt_lang,
            lowercase=setup.lowercase or setup.from_tokenized,
        ),
    )


def raw_pairs(pairs: Sequence[tuple[str, str]], src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
    """Tokenized corpus pairs as raw text (:func:`attnlab.data.enja.to_raw` on each side)."""
    return [(enja.to_raw(s, src_lang), enja.to_raw(t, tgt_lang)) for s, t in pairs]


def train_tokenizers(setup: TranslationSetup, src_texts: list[str], tgt_texts: list[str]):
    """The source and target tokenizers ``setup`` asks for, trained on the texts (one shared when
    ``setup.joint_vocab``).

    Shape:
        N source and N target texts → ``(src_tok, tgt_tok)``
    """
    tgt_kind = setup.tgt_tokenizer or setup.tokenizer
    if tgt_kind == setup.tokenizer:
        return tokenizers.build_tokenizers(
            src_texts,
            tgt_texts,
            kind=setup.tokenizer,
            joint=setup.joint_vocab,
            vocab_size=None if setup.tokenizer == "char" else setup.vocab_size,
        )
    if setup.joint_vocab:
        raise ValueError(f"a joint vocabulary needs one tokenizer kind, got {setup.tokenizer} and {tgt_kind}")

    def train_one(kind: str, texts: list[str]):
        if kind == "char":
            return tokenizers.CharTokenizer.train(texts)
        return tokenizers.train_subword_tokenizer(texts, setup.vocab_size, model=kind)

    return train_one(setup.tokenizer, src_texts), train_one(tgt_kind, tgt_texts)


def _load_tokenizers(directory: Path):
    files = ckpt.tokenizer_paths(directory)
    src = files.get("src_tokenizer", [directory / "src_tokenizer.json"])[0]
    tgt = files.get("tgt_tokenizer", [directory / "tgt_tokenizer.json"])[0]
    src_tok = tokenizers.load_tokenizer(src)
    # One file for both sides is a joint vocabulary: one object, as when it was trained.
    return src_tok, (src_tok if tgt == src else tokenizers.load_tokenizer(tgt))


#: Most BLEU a shipped model's card may show bf16 losing against fp32 for ``precision="auto"`` to
#: take bf16 (within the run-to-run spread of a 1,000-sentence test set).
BF16_MAX_BLEU_LOSS = 0.5


def bf16_within_card(directory: Path) -> bool:
    """Whether a model folder's card (``card.json``, written by ``make models``) allows bf16 for
    ``precision="auto"``: no scored card (a user's own run: speed decides), or a card that gives
    the test BLEU in both precisions (``bleu``, ``bleu_bf16``) within :data:`BF16_MAX_BLEU_LOSS`.
    A card with a BLEU but none for bf16 keeps fp32: its stated quality is fp32's."""
    try:
        card = json.loads((directory / "card.json").read_text())
    except (OSError, ValueError):
        return True
    metrics = card.get("metrics") if isinstance(card, dict) else None
    if not isinstance(metrics, dict) or "bleu" not in metrics:
        return True
    bf16 = metrics.get("bleu_bf16")
    return isinstance(bf16, (int, float)) and bf16 >= metrics["bleu"] - BF16_MAX_BLEU_LOSS


def load_translator(path: str | Path, device: str = "cpu", precision: str = "auto") -> Translator:
    """A trained translator from a model folder or a shipped model's name, decoding in
    ``precision``: ``"auto"`` (bf16 where this CPU computes it natively, a short measurement shows
    it faster and the model's card allows it: :meth:`Translator.resolve_precision`), ``"fp32"``
    or ``"bf16"``."""
    inference_precision.check(precision)
    directory = resolve_model_dir(path)
    checkpoint = ckpt.load_checkpoint(directory)
    config_dict = dict(checkpoint.config)
    model_type = config_dict.get("model_type")
    if model_type not in ARCHS:
        raise ValueError(f"{directory}: model_type {model_type!r} is not a translator; known: {sorted(ARCHS)}")
    arch = ARCHS[model_type]
    names = {f.name for f in dataclasses.fields(arch.config_cls)}
    config = checkpoint.make_config(lambda d: arch.config_cls(**{k: v for k, v in d.items() if k in names}))
    model = arch.model_cls(config)
    ckpt.load_weights(model, checkpoint)
    model.to(device).eval()
    src_tok, tgt_tok = _load_tokenizers(directory)
    return Translator(
        model,
        src_tok,
        tgt_tok,
        bleu_tokenize=config_dict.get("bleu_tokenize", "13a"),
        src_lang=config_dict.get("src_lang"),
        tgt_lang=config_dict.get("tgt_lang"),
        lowercase=config_dict.get("lowercase", True),  # written since cased training; before, always
        precision=precision,
        bf16_allowed=bf16_within_card(directory),
    )


def read_pairs(src: Path | None, tgt: Path | None, tsv: Path | None, split: str, on_empty: str = "skip"):
    """The sentence pairs of one split (:func:`attnlab.data.corpus.read_split`); the count skipped goes to stderr."""
    corpus = read_split(src, tgt, tsv, split=split, on_empty=on_empty)
    if corpus.n_skipped:
        print(f"{split}: skipped {corpus.n_skipped} pair(s) with an empty side", file=sys.stderr)
    return corpus.pairs


TRANSLATE_JOB = Job(
    name="translate",
    presets=PRESETS,
    setup_cls=TranslationSetup,
    model_config=model_config,
    train=train_translation,
    load=load_translator,
    check_model=lambda setup: build_config(setup, STAND_IN_SIZE, STAND_IN_SIZE, 0),
)
