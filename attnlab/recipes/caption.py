"""The captioning recipe: a digit image in, its name written out character by character, in English or Japanese.

Captions are the digit's name — English ``zero … nine`` or the Japanese readings used when
counting aloud, in hiragana (れい, いち, に, さん, よん, ご, ろく, なな, はち, きゅう). Hiragana and
not the kanji 七: a one-character caption would make the "decoder" a classifier; spelled out,
every caption is a short sequence (1–5 characters) that the decoder writes one token at a time
while cross-attending to the image. Tokens are characters (:class:`~attnlab.data.tokenizers.CharTokenizer`).

The images and splits are the ViT's (:func:`attnlab.data.digits.digits_splits`); the metric is
exact match of the greedy caption on held-out images.

Shape letters: ``B`` batch, ``P`` patches, ``T`` caption length, ``L`` layers, ``H`` heads.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .. import checkpoint as ckpt
from ..assets.locate import resolve_model_dir
from ..data import batching, tokenizers
from ..data.digits import DigitsSplits, digits_splits, image_batches, random_shift
from ..inference.caption import DIGIT_NAMES, ImageCaptioner, digit_names
from ..metrics import exact_match
from ..models.captioner import PRESETS as MODEL_PRESETS
from ..models.captioner import Captioner, CaptionerConfig
from ..models.config import check_fields
from ..runs import check_run_folder
from ..train import TrainConfig, TrainResult, train
from . import STAND_IN_SIZE, Job, digit_image_presets

Tensor = torch.Tensor

__all__ = [
    "CaptionSetup",
    "PRESETS",
    "CaptionTask",
    "train_captioner",
    "load_captioner",
]


@dataclass
class CaptionSetup:
    """Everything that defines a captioning run."""

    lang: str = "en"  # caption language: "en" or "ja" (a key of DIGIT_NAMES)
    model_preset: str = "digits"  # key of attnlab.models.captioner.PRESETS
    model_overrides: dict = field(default_factory=dict)  # config fields on top of the preset (e.g. patch_size)
    batch_size: int = 64  # images per batch
    shift: int = 1  # training augmentation: random translation by up to this many pixels (0: none)
    seed: int = 0  # seed of the data split (the training seed is train.seed)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        check_fields(self, positive=("batch_size",), non_negative=("shift",))
        if self.lang not in DIGIT_NAMES:
            raise ValueError(f"caption language must be one of {sorted(DIGIT_NAMES)}, got {self.lang!r}")


#: Named presets (``--preset``): those of every job on the digit images (:func:`attnlab.recipes.digit_image_presets`).
PRESETS: dict[str, CaptionSetup] = digit_image_presets(CaptionSetup)


class CaptionTask:
    """Supplies :func:`attnlab.train.train` with (image, caption) batches, the loss and exact match."""

    metric = "exact_match"
    maximize = True

    def __init__(self, setup: CaptionSetup, config: CaptionerConfig, tokenizer, data: DigitsSplits) -> None:
        self.setup, self.config, self.tokenizer, self.data = setup, config, tokenizer, data
        self.names = digit_names(setup.lang)
        self.caption_ids = tokenizer.encode_batch(self.names)  # one id list per digit
        self.device = torch.device(setup.train.device)

    def _captions(self, labels: Tensor) -> batching.Seq2SeqBatch:
        t = self.tokenizer
        # The image side is not a token sequence; collate_pairs is used for the caption side only.
        pairs = [([0], self.caption_ids[int(y)]) for y in labels]
        return batching.collate_pairs(pairs, pad_id=t.pad_id, bos_id=t.bos_id, eos_id=t.eos_id)

    def batches(self, epoch: int, rank: int, world_size: int) -> list[tuple[Tensor, batching.Seq2SeqBatch]]:
        s = self.setup
        g = torch.Generator().manual_seed(s.train.seed * 7919 + epoch)
        out = []
        for idx in image_batches(
            len(self.data.train_y), s.batch_size, seed=s.train.seed, epoch=epoch, rank=rank, world_size=world_size
        ):
            images = random_shift(self.data.train_x[idx], s.shift, g)
            out.append((images.to(self.device), self._captions(self.data.train_y[idx]).to(self.device)))
        return out

    def loss(self, model: nn.Module, batch: tuple[Tensor, batching.Seq2SeqBatch]) -> tuple[Tensor, int]:
        images, b = batch
        out = model(images, b.tgt_in, tgt_mask=b.tgt_mask, labels=b.tgt_out)
        return out.loss, b.n_tgt_tokens

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        images, labels = self.data.valid_x, self.data.valid_y
        b = self._captions(labels).to(self.device)
        out = model(images.to(self.device), b.tgt_in, tgt_mask=b.tgt_mask)
        loss = F.cross_entropy(
            out.logits.flatten(0, 1),
            b.tgt_out.flatten(),  # (B·T, V), (B·T,)
            ignore_index=self.tokenizer.pad_id,
        )
        captioner = ImageCaptioner(model, self.tokenizer, self.setup.lang)
        hyps = [c.text for c in captioner.caption(images)]
        return {"exact_match": exact_match(hyps, [self.names[int(y)] for y in labels]), "loss": loss.item()}

    def checkpoint_payload(self) -> tuple[dict, dict]:
        config = dataclasses.asdict(self.config)
        config.update(lang=self.setup.lang, split_seed=self.setup.seed)
        return config, {"tokenizer": self.tokenizer}


def build_config(setup: CaptionSetup, vocab_size: int, pad_id: int) -> CaptionerConfig:
    """The captioner config of ``setup``: its preset, its overrides, and the caption tokenizer's sizes."""
    if setup.model_preset not in MODEL_PRESETS:
        raise ValueError(f"unknown captioner preset {setup.model_preset!r}; choose from {sorted(MODEL_PRESETS)}")
    fixed = sorted(set(setup.model_overrides) & {"vocab_size", "pad_id"})
    if fixed:
        raise ValueError(f"model fields {fixed} come from the caption tokenizer and cannot be overridden")
    return CaptionerConfig(
        vocab_size=vocab_size, pad_id=pad_id, **{**MODEL_PRESETS[setup.model_preset], **setup.model_overrides}
    )


def train_captioner(
    setup: CaptionSetup, data: DigitsSplits | None = None
) -> tuple[ImageCaptioner, TrainResult, DigitsSplits]:
    """Train a captioner on the digits; returns the best one by validation exact match, the run and the data.

    Shape:
        images ``(N, 8, 8)`` → captions of up to 5 characters
    """
    check_run_folder(setup.train.out_dir, False, setup.train.overwrite)  # before any work
    build_config(setup, STAND_IN_SIZE, 0)  # a bad model setting fails before any data is read
    names = digit_names(setup.lang)
    data = digits_splits(seed=setup.seed) if data is None else data
    tok = tokenizers.CharTokenizer.train(names)
    torch.manual_seed(setup.train.seed)
    config = build_config(setup, tok.vocab_size, tok.pad_id)
    model = Captioner(config)
    result = train(model, CaptionTask(setup, config, tok, data), setup.train)
    out = Path(setup.train.out_dir) if setup.train.out_dir else None
    if out is not None and (out / "best").is_dir():
        ckpt.load_weights(model, ckpt.load_checkpoint(out / "best"))
    model.eval()
    return ImageCaptioner(model, tok, setup.lang), result, data


def load_captioner(path: str | Path, device: str = "cpu") -> tuple[ImageCaptioner, dict]:
    """A captioner saved by :func:`train_captioner` (run folder or checkpoint), and its saved config dict."""
    directory = resolve_model_dir(path)
    checkpoint = ckpt.load_checkpoint(directory)
    config_dict = dict(checkpoint.config)
    if config_dict.get("model_type") != "captioner":
        raise ValueError(f"{directory}: model_type {config_dict.get('model_type')!r} is not a captioner ('captioner')")
    names = {f.name for f in dataclasses.fields(CaptionerConfig)}
    config, lang = checkpoint.make_config(
        lambda d: (CaptionerConfig(**{k: v for k, v in d.items() if k in names}), CaptionSetup(lang=d["lang"]).lang)
    )
    model = Captioner(config)
    ckpt.load_weights(model, checkpoint)
    model.to(device).eval()
    tok = tokenizers.load_tokenizer(directory / "tokenizer.json")
    return ImageCaptioner(model, tok, lang), config_dict


CAPTION_JOB = Job(
    name="caption",
    presets=PRESETS,
    setup_cls=CaptionSetup,
    model_config=CaptionerConfig,
    train=train_captioner,
    load=load_captioner,
    check_model=lambda setup: build_config(setup, STAND_IN_SIZE, 0),
)
