"""``make models``: train, pack and describe the models shipped with attnlab (:mod:`attnlab.assets`).

The build of the shipped assets sits at the top of attnlab's layers, above the experiments and
the recipes it trains through, and outside the :mod:`attnlab.assets` package: the registry of
names there, their lookup (:mod:`attnlab.assets.locate`, which every loader uses) and the
cards (:mod:`attnlab.assets.cards`) sit low, and a package may not be both below the recipes and
above them (the import contract against cycles).

For each shipped model, its :data:`BUILDS` entry says how it is made and how it is judged:

1. **train** it with the ordinary command (``attnlab train translate --preset ja-en ...``,
   ``attnlab demo``, ``attnlab experiment bottleneck``, ``attnlab train lm ...``,
   ``attnlab train classify ...``), run as a subprocess so that the command in the card is exactly
   what ran; a build whose command reads files made from a corpus (the sentence-type classifier's
   labelled sentences) writes them first. Two trainings sized for one thread each (ja-en and
   en-ja) run side by side, each with ``OMP_NUM_THREADS=1``; the others one after another. The two
   RNNs come from one bottleneck run. The machine's load when each training starts and ends is
   recorded for its card;
2. **check** that the trained model's ``config.json`` is the one the build makes (a run packed
   with ``--from-run`` must come from the same settings);
3. **pack** it (:func:`attnlab.checkpoint.pack_checkpoint`: weights in fp16, or int8 with per-row
   scales for the ja⇄en translators, loaded back as fp32)
   into ``attnlab/assets/NAME``;
4. **measure** the packed model on held-out data and write its card (:func:`attnlab.assets.cards.write_model_card`):
   ``MODEL_CARD.md`` for people, ``card.json`` for the tests, which repeat the card's fast check on
   every model present (``tests/assets/test_assets.py``).

Finally the assets' total size is checked against :data:`attnlab.assets.BUDGET_BYTES`.

Run it as ``python -m attnlab.build_assets [--only NAME ...] [--data DIR] [--from-run DIR]``
(``make models`` does, with ``DATA``, ``ONLY`` and ``FROM_RUN``). Corpora are read from ``--data``
(default ``../shared/data``); the generated tasks need nothing.

Shape:
    no tensors cross this module's interface: folders and text in, asset folders and cards out.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import json
import math
import os
import random
import shlex
import subprocess
import sys
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from . import assets, machine
from . import checkpoint as ckpt
from .assets.cards import ModelCard, metric_text, write_model_card
from .assets.locate import resolve_model_dir
from .data import enja_mix, sentences
from .data.corpus import read_parallel, read_text
from .data.tasks import make_splits
from .experiments import bottleneck, demo
from .files import write_text_atomically
from .metrics import bleu, chrf, exact_match, rouge, sentence_form_share
from .models.gpt import gpt_config
from .recipes import TrainJob
from .recipes import classify as cl
from .recipes import lm as lm_recipe
from .recipes import translate as tr

__all__ = [
    "Evaluation",
    "AssetBuild",
    "PresetTranslator",
    "EnjaTranslator",
    "DemoTranslator",
    "BottleneckRNN",
    "TextLM",
    "SentenceTypeClassifier",
    "ShakespeareMLM",
    "FactsSummarizer",
    "FactsQA",
    "DigitsViT",
    "KarateGAT",
    "pooling_peaks",
    "BUILDS",
    "config_differences",
    "build",
    "main",
]

EXAMPLE_TOKENS = 40  # continuation length of a generator's example outputs (the explorer's too)
_STORAGE_DTYPES = {"float16": torch.float16, "int8": torch.int8}


# --------------------------------------------------------------------------------------------
# How each shipped model is made and judged.
# --------------------------------------------------------------------------------------------


@dataclass
class Evaluation:
    """What :meth:`AssetBuild.evaluate` measured on a packed model."""

    metrics: dict[str, float]  # by metric name, on the whole held-out set
    evaluation: str  # how: data, size, decoding
    check: dict[str, Any]  # the fast check (see ModelCard.check)
    reproduce: str | None = None  # a command that measures `metrics` again


class AssetBuild(Protocol):
    """How ``make models`` makes one shipped model, and how the tests judge an installed copy.

    A build whose command reads files made from the corpora (not the corpora themselves) also has
    ``prepare(data, out)``, which writes them before the command runs (:class:`SentenceTypeClassifier`).
    """

    name: str  # the shipped name (a key of attnlab.assets.ASSETS)
    seed: int  # the training's seed
    threads: int | None  # OMP_NUM_THREADS of the training (1: it may run beside another; None: inherit)
    data: str  # the card's description of the data
    licence: str  # the data's licence or terms

    @property
    def run_key(self) -> str:
        """The training this model comes from: builds with one key share one run."""
        ...

    def command(self, data: Path, out: Path) -> list[str]:
        """The ``attnlab`` arguments that train it into ``out``, reading corpora under ``data``."""
        ...

    def needs(self, data: Path, training: bool) -> list[Path]:
        """The data files its evaluation (and, with ``training``, its training) reads."""
        ...

    def checkpoint(self, run: Path) -> Path:
        """The trained model inside the run folder ``run``."""
        ...

    def expected_config(self, directory: Path) -> dict:
        """The ``config.json`` this build makes, for the tokenizers of the model at ``directory``."""
        ...

    def evaluate(self, directory: Path, data: Path) -> Evaluation:
        """Quality of the model at ``directory`` on held-out data, and its fast check."""
        ...

    def measure_check(self, directory: Path, data: Path) -> float:
        """The fast check's value for the model at ``directory``."""
        ...

    def example_outputs(self, directory: Path, inputs: Sequence[str]) -> dict[str, str]:
        """The model's greedy output for each input."""
        ...


def _run_nothing(setup: Any) -> None:
    """A TrainJob's ``run`` for a job that is only set up, never run (the expected config)."""


def _arg(value: float) -> str:
    return f"{value:g}"


def _translator_config(setup: tr.TranslationSetup, directory: Path) -> dict:
    translator = tr.load_translator(directory, precision="fp32")
    config = tr.build_config(
        setup, translator.src_tok.vocab_size, translator.tgt_tok.vocab_size, translator.tgt_tok.pad_id
    )
    return tr.checkpoint_config(setup, config)


def _translations(directory: Path, inputs: Sequence[str]) -> dict[str, str]:
    translator = tr.load_translator(directory, precision="fp32")
    return {text: r.text for text, r in zip(inputs, translator.translate(list(inputs), beam_size=1))}


#: What a translator's card says of ``bleu_bf16`` (precision "auto" may take bf16 only where the card
#: gives it: attnlab.recipes.translate.bf16_within_card); the card's text adds the final full stop.
BF16_NOTE = (
    " bleu_bf16: the same BLEU decoded in bf16 (`--precision bf16`; what precision auto takes on a CPU with "
    "native bf16 where it is measured faster, when within 0.5 BLEU of fp32's)"
)


def _translation_scores(
    directory: Path, pairs: Sequence[tuple[str, str]], beam: int, precision: str = "fp32"
) -> dict[str, float]:
    translator = tr.load_translator(directory, precision=precision)
    with torch.inference_mode():
        return translator.evaluate([s for s, _ in pairs], [t for _, t in pairs], beam_size=beam)


def _greedy_bleu_check(directory: Path, pairs: Sequence[tuple[str, str]], what: str) -> dict:
    """The translators' fast check: greedy BLEU on ``pairs`` (the first test pairs), ±1 BLEU."""
    return _check(
        "bleu",
        _translation_scores(directory, pairs, 1)["bleu"],
        higher_is_better=True,
        tolerance=1.0,
        n=len(pairs),
        how=f"on the first {len(pairs)} {what}, greedy",
    )


def _check(metric: str, value: float, *, higher_is_better: bool, tolerance: float, n: int, how: str) -> dict:
    return {
        "metric": metric,
        "value": value,
        "higher_is_better": higher_is_better,
        "tolerance": tolerance,
        "n": n,
        "how": how,
    }


def _greedy_translation_evaluation(
    scores: dict[str, float], evaluation: str, metric: str, value: float, *, tolerance: float, check_pairs: int
) -> Evaluation:
    """The evaluation of a translator scored greedily on generated test pairs (``scores``), whose
    check is ``metric`` (``value``) on the first ``check_pairs`` of them."""
    n = min(check_pairs, int(scores["n"]))
    return Evaluation(
        metrics=scores,
        evaluation=evaluation,
        check=_check(
            metric, value, higher_is_better=True, tolerance=tolerance, n=n, how=f"on the first {n} test pairs, greedy"
        ),
    )


@dataclass(frozen=True)
class PresetTranslator:
    """A translator trained by ``attnlab train translate --preset P`` on line-aligned corpus files
    ``DATA/corpus/{train,dev,test}.{src,tgt}`` (small_parallel_enja for ja-en and en-ja)."""

    name: str  # the shipped name
    preset: str  # key of attnlab.recipes.translate.PRESETS
    src: str  # source file suffix, e.g. "ja"
    tgt: str  # target file suffix
    corpus: str = "small_parallel_enja"  # folder under the data folder
    data: str = (
        "small_parallel_enja (50,000 training, 500 development, 500 test pairs of short sentences from the "
        "Tanaka corpus; commit 312408a), made raw text for training (attnlab.data.enja)"
    )
    licence: str = (
        "the Tanaka corpus: public domain / CC-BY (credit it when you use the model); the corpus is not shipped"
    )
    overrides: tuple[str, ...] = ()  # further key=value settings (the tests' tiny stand-ins)
    seed: int = 0  # the training's seed
    threads: int | None = 1  # each is sized for one thread, so ja-en and en-ja train side by side
    beam: int = 4  # beam of the card's metrics (`attnlab evaluate`'s default)
    check_pairs: int = 100  # test pairs of the fast check (greedy)

    @property
    def run_key(self) -> str:
        return self.name

    def _file(self, data: Path, split: str, side: str) -> Path:
        return data / self.corpus / f"{split}.{side}"

    def command(self, data: Path, out: Path) -> list[str]:
        args = ["train", "translate", "--preset", self.preset]
        for split, flag in (("train", "train"), ("dev", "valid")):
            args += [f"--{flag}-src", str(self._file(data, split, self.src))]
            args += [f"--{flag}-tgt", str(self._file(data, split, self.tgt))]
        args += ["--out", str(out), "--seed", str(self.seed), "--overwrite"]
        return args + (["--overrides", *self.overrides] if self.overrides else [])

    def needs(self, data: Path, training: bool) -> list[Path]:
        splits = ("train", "dev", "test") if training else ("test",)
        return [self._file(data, split, side) for split in splits for side in (self.src, self.tgt)]

    def checkpoint(self, run: Path) -> Path:
        return resolve_model_dir(run)

    def setup(self) -> tr.TranslationSetup:
        job = TrainJob(self.preset, _run_nothing, {}, list(self.overrides), seed=self.seed)
        return tr.TRANSLATE_JOB.setup(job)

    def expected_config(self, directory: Path) -> dict:
        return _translator_config(self.setup(), directory)

    def _test_pairs(self, data: Path) -> list[tuple[str, str]]:
        corpus = read_parallel(self._file(data, "test", self.src), self._file(data, "test", self.tgt), on_empty="error")
        pairs = list(zip(corpus.sources, corpus.targets))
        setup = self.setup()
        return tr.raw_pairs(pairs, setup.src_lang, setup.tgt_lang) if setup.from_tokenized else pairs

    def evaluate(self, directory: Path, data: Path) -> Evaluation:
        scores = _translation_scores(directory, self._test_pairs(data), self.beam)
        scores["bleu_bf16"] = _translation_scores(directory, self._test_pairs(data), self.beam, "bf16")["bleu"]
        tokenize = tr.load_translator(directory, precision="fp32").bleu_tokenize
        test_src, test_tgt = self._file(data, "test", self.src), self._file(data, "test", self.tgt)
        return Evaluation(
            metrics=scores,
            evaluation=(
                f"the {scores['n']} test pairs ({test_src.name} → {test_tgt.name}), made raw text as the training "
                f"text was; beam {self.beam}; sacreBLEU, tokenizer {tokenize}." + BF16_NOTE
            ),
            check=self._check(directory, data),
            reproduce=f"attnlab evaluate --model {self.name} --src {test_src} --ref {test_tgt}"
            + (" --from-tokenized" if self.setup().from_tokenized else ""),
        )

    def _check(self, directory: Path, data: Path) -> dict:
        return _greedy_bleu_check(directory, self._test_pairs(data)[: self.check_pairs], "test pairs")

    def measure_check(self, directory: Path, data: Path) -> float:
        return _translation_scores(directory, self._test_pairs(data)[: self.check_pairs], 1)["bleu"]

    def example_outputs(self, directory: Path, inputs: Sequence[str]) -> dict[str, str]:
        return _translations(directory, inputs)


@functools.lru_cache(maxsize=2)
def _enja_splits(data: str, n_dev: int, n_test: int) -> enja_mix.EnjaSplits:
    return enja_mix.build(data, n_dev=n_dev, n_test=n_test)


@dataclass(frozen=True)
class EnjaTranslator:
    """A ja⇄en translator trained on Tatoeba and small_parallel_enja mixed by
    :mod:`attnlab.data.enja_mix` (raw, cased text; held-out splits that share no sentence with
    training). ``prepare`` writes the splits beside the run folder (``RUNS/enja-data``), the
    training reads them, and the evaluation makes the same splits again from the corpora."""

    name: str  # the shipped name
    preset: str  # key of attnlab.recipes.translate.PRESETS
    src: str  # source language ("ja" or "en")
    tgt: str  # target language
    data: str = (
        "Tatoeba (tatoeba-jpn: 38,753 English–Japanese pairs as people write them, from the manythings.org "
        "export of 2018-04) and small_parallel_enja (50,000 short pairs from the Tanaka corpus, commit 312408a; "
        "its English truecased from Tatoeba's), mixed by attnlab.data.enja_mix: a 1,000-pair test and a "
        "500-pair development split drawn from Tatoeba, every training pair sharing a side with a held-out "
        "sentence (Tatoeba's or small_parallel_enja's dev/test) removed, and a quarter more pairs made by "
        "joining two or three pairs (paragraphs); `python -m attnlab.data.enja_mix --data DATA --out DIR` "
        "writes the files"
    )
    licence: str = (
        "Tatoeba sentences: CC-BY 2.0 FR, by the Tatoeba contributors (tatoeba.org); the Tanaka corpus "
        "(small_parallel_enja): public domain / CC-BY. Credit both when you use the model; the corpora are "
        "not shipped"
    )
    overrides: tuple[str, ...] = ()  # further key=value settings (the tests' tiny stand-ins)
    seed: int = 0  # the training's seed
    threads: int | None = 1  # each is sized for one thread, so ja-en and en-ja train side by side
    beam: int = 4  # beam of the card's metrics (`attnlab evaluate`'s default)
    check_pairs: int = 100  # test pairs of the fast check (greedy)
    n_dev: int = 500  # development pairs drawn from Tatoeba
    n_test: int = 1000  # test pairs drawn from Tatoeba
    paragraphs: int = 100  # paragraphs of four test sentences scored whole
    storage: str = "int8"  # the packed weights: int8 with per-row scales (both fit the assets budget)

    @property
    def run_key(self) -> str:
        return self.name

    @staticmethod
    def _split_dir(out: Path) -> Path:
        return out.parent / "enja-data"

    def _splits(self, data: Path) -> enja_mix.EnjaSplits:
        return _enja_splits(str(data), self.n_dev, self.n_test)

    def prepare(self, data: Path, out: Path) -> None:
        """Write the splits (``train``, ``dev``, ``test``, ``sp_test``) into ``RUNS/enja-data``."""
        enja_mix.write(self._splits(data), self._split_dir(out))

    def command(self, data: Path, out: Path) -> list[str]:
        split = self._split_dir(out)
        args = ["train", "translate", "--preset", self.preset]
        for name, flag in (("train", "train"), ("dev", "valid")):
            args += [
                f"--{flag}-src",
                str(split / f"{name}.{self.src}"),
                f"--{flag}-tgt",
                str(split / f"{name}.{self.tgt}"),
            ]
        args += ["--out", str(out), "--seed", str(self.seed), "--overwrite"]
        return args + (["--overrides", *self.overrides] if self.overrides else [])

    def needs(self, data: Path, training: bool) -> list[Path]:
        # The held-out splits are made again from the corpora for every evaluation.
        files = [data / "tatoeba-jpn" / f"train.{lang}" for lang in ("ja", "en")]
        return files + [
            data / "small_parallel_enja" / f"{s}.{lang}" for s in ("train", "dev", "test") for lang in ("ja", "en")
        ]

    def checkpoint(self, run: Path) -> Path:
        return resolve_model_dir(run)

    def setup(self) -> tr.TranslationSetup:
        job = TrainJob(self.preset, _run_nothing, {}, list(self.overrides), seed=self.seed)
        return tr.TRANSLATE_JOB.setup(job)

    def expected_config(self, directory: Path) -> dict:
        return _translator_config(self.setup(), directory)

    def pairs(self, data: Path, split: str) -> list[tuple[str, str]]:
        """A split's pairs as (source, target) of this direction."""
        pairs = getattr(self._splits(data), split)
        return [(ja, en) if self.src == "ja" else (en, ja) for ja, en in pairs]

    def paragraph_groups(self, data: Path) -> list[list[tuple[str, str]]]:
        """Groups of four test pairs whose both sides are one whole sentence: the paragraphs."""
        one = [
            p
            for p in self.pairs(data, "test")
            if all(len(sentences.split_sentences(text, lang)) == 1 for text, lang in zip(p, (self.src, self.tgt)))
        ]
        rng = random.Random(self.seed)
        rng.shuffle(one)
        return [one[i : i + 4] for i in range(0, min(len(one), 4 * self.paragraphs) - 3, 4)]

    def evaluate(self, directory: Path, data: Path) -> Evaluation:
        translator = tr.load_translator(directory, precision="fp32")
        tokenize = translator.bleu_tokenize
        metrics: dict[str, float] = {}
        with torch.inference_mode():
            test = self.pairs(data, "test")
            done = translator.translate([s for s, _ in test], beam_size=self.beam)
            hyps, refs = [t.text for t in done], [r for _, r in test]
            metrics.update(
                bleu=bleu(hyps, refs, tokenize=tokenize),
                chrf=chrf(hyps, refs),
                exact_match=exact_match(hyps, refs),
                n=len(test),
                loops_cut=sum(t.loop_cut for t in done) / len(done),
            )
            if self.tgt == "en":
                metrics["sentence_form"] = sentence_form_share(hyps)
            metrics["bleu_bf16"] = _translation_scores(directory, test, self.beam, "bf16")["bleu"]
            sp = self.pairs(data, "sp_test")
            sp_hyps = [t.text for t in translator.translate([s for s, _ in sp], beam_size=self.beam)]
            sp_refs = [r for _, r in sp]
            # small_parallel_enja's English is lower-cased: scored case-insensitively (sacreBLEU -lc).
            metrics["sp_bleu"] = bleu(sp_hyps, sp_refs, tokenize=tokenize, lowercase=self.tgt == "en")
            metrics["sp_chrf"] = (
                chrf([h.lower() for h in sp_hyps], sp_refs) if self.tgt == "en" else chrf(sp_hyps, sp_refs)
            )
            metrics.update(self._paragraph_scores(translator, data))
        split_note = f"{self.n_test} Tatoeba test pairs drawn by attnlab.data.enja_mix (seed 0)"
        return Evaluation(
            metrics=metrics,
            evaluation=(
                f"bleu/chrf/exact_match: the {split_note}, none of whose sentences is in the training data; beam "
                f"{self.beam}; sacreBLEU, tokenizer {tokenize}. sp_bleu/sp_chrf: small_parallel_enja's 500 test "
                "pairs made raw text"
                + (" (its English is lower-cased, so these two are case-insensitive)" if self.tgt == "en" else "")
                + ". paragraph_*: BLEU of paragraphs of four one-sentence test pairs, translated sentence by "
                "sentence and joined (sentences), as one text split by attnlab (split), and given to the model "
                "whole without splitting (whole); paragraph_ratio = split / sentences. loops_cut: the share of "
                "test outputs whose decoded tokens held a loop (an n-gram three times running) that the guard cut"
                + (
                    "; sentence_form: the share of English outputs that start with a capital and end with . ! or ?"
                    if self.tgt == "en"
                    else ""
                )
                + "."
                + BF16_NOTE
            ),
            check=self._check(directory, data),
            reproduce=(
                f"python -m attnlab.data.enja_mix --data {data} --out DIR && attnlab evaluate --model {self.name} "
                f"--src DIR/test.{self.src} --ref DIR/test.{self.tgt}"
            ),
        )

    def _paragraph_scores(self, translator: tr.Translator, data: Path) -> dict[str, float]:
        groups = self.paragraph_groups(data)
        if not groups:
            return {}
        src_join = "" if self.src == "ja" else " "
        tgt_join = "" if self.tgt == "ja" else " "
        refs = [tgt_join.join(r for _, r in g) for g in groups]
        flat = [s for g in groups for s, _ in g]
        one = [t.text for t in translator.translate(flat, beam_size=self.beam)]
        sentence_hyps = [tgt_join.join(one[4 * i : 4 * i + 4]) for i in range(len(groups))]
        texts = [src_join.join(s for s, _ in g) for g in groups]
        split_hyps = translator.translate_text(texts, beam_size=self.beam)
        whole_hyps = [t.text for t in translator.translate(texts, beam_size=self.beam)]
        tok = translator.bleu_tokenize
        scores = {
            "paragraph_bleu_sentences": bleu(sentence_hyps, refs, tokenize=tok),
            "paragraph_bleu_split": bleu(split_hyps, refs, tokenize=tok),
            "paragraph_bleu_whole": bleu(whole_hyps, refs, tokenize=tok),
            "paragraphs": len(groups),
        }
        scores["paragraph_ratio"] = scores["paragraph_bleu_split"] / max(scores["paragraph_bleu_sentences"], 1e-9)
        return scores

    def _check(self, directory: Path, data: Path) -> dict:
        return _greedy_bleu_check(directory, self.pairs(data, "test")[: self.check_pairs], "Tatoeba test pairs")

    def measure_check(self, directory: Path, data: Path) -> float:
        return _translation_scores(directory, self.pairs(data, "test")[: self.check_pairs], 1)["bleu"]

    def example_outputs(self, directory: Path, inputs: Sequence[str]) -> dict[str, str]:
        return _translations(directory, inputs)


@dataclass(frozen=True)
class DemoTranslator:
    """The number translator of ``attnlab demo`` (English number words → Japanese numerals)."""

    name: str = "demo"  # the shipped name
    minutes: float = 10.0  # `attnlab demo --minutes`: the safety cap (the demo stops on quality first)
    n_train: int = 30000  # `attnlab demo --n-train`
    seed: int = 0  # `attnlab demo --seed`
    threads: int | None = None  # as `make demo` runs it
    data: str = (
        f"generated by attnlab ({demo.TASK}: random numbers as English words and as Japanese numerals), "
        f"{demo.N_VALID} validation and {demo.N_TEST} held-out test pairs disjoint from the training pairs"
    )
    licence: str = "generated by attnlab (MIT)"
    check_pairs: int = 100  # test pairs of the fast check

    @property
    def run_key(self) -> str:
        return self.name

    def command(self, data: Path, out: Path) -> list[str]:
        args = ["demo", "--out", str(out), "--minutes", _arg(self.minutes), "--n-train", str(self.n_train)]
        return args + ["--seed", str(self.seed)]

    def needs(self, data: Path, training: bool) -> list[Path]:
        return []

    def checkpoint(self, run: Path) -> Path:
        return resolve_model_dir(run)

    def expected_config(self, directory: Path) -> dict:
        return _translator_config(demo.demo_setup(None, minutes=self.minutes, seed=self.seed), directory)

    def _test_pairs(self) -> list[tuple[str, str]]:
        return make_splits(demo.TASK, self.n_train, demo.N_VALID, demo.N_TEST, seed=self.seed).test

    def evaluate(self, directory: Path, data: Path) -> Evaluation:
        scores = _translation_scores(directory, self._test_pairs(), 1)
        scores["bleu_bf16"] = _translation_scores(directory, self._test_pairs(), 1, "bf16")["bleu"]
        return _greedy_translation_evaluation(
            scores,
            f"the demo's {scores['n']} generated test pairs (seed {self.seed}); greedy; sacreBLEU, tokenizer char."
            + BF16_NOTE,
            "exact_match",
            self.measure_check(directory, data),
            tolerance=0.03,
            check_pairs=self.check_pairs,
        )

    def measure_check(self, directory: Path, data: Path) -> float:
        return _translation_scores(directory, self._test_pairs()[: self.check_pairs], 1)["exact_match"]

    def example_outputs(self, directory: Path, inputs: Sequence[str]) -> dict[str, str]:
        return _translations(directory, inputs)


@dataclass(frozen=True)
class BottleneckRNN:
    """One RNN of ``attnlab experiment bottleneck`` (its generated number-lists task): the two RNN
    assets come from one run of the experiment."""

    name: str  # the shipped name
    contestant: str  # the experiment's name for it: "rnn-additive" or "rnn-none"
    minutes: float = 15.0  # `--minutes`: the whole experiment's budget (three models)
    n_train: int = 30000  # `--n-train`
    n_valid: int = 300  # `--n-valid`
    n_test: int = 1000  # `--n-test`
    seed: int = 0  # `--seed`
    threads: int | None = None  # as the experiment runs by default
    licence: str = "generated by attnlab (MIT)"
    check_pairs: int = 100  # test pairs of the fast check

    @property
    def data(self) -> str:
        settings = self.settings()
        return (
            f"generated by attnlab ({settings.task}: lists of 1–5 numbers as English words and as Japanese numerals), "
            f"{self.n_train:,} training, {self.n_valid} validation and {self.n_test} test pairs (seed {self.seed})"
        )

    @property
    def run_key(self) -> str:
        return "bottleneck"

    def settings(self) -> bottleneck.BottleneckSettings:
        return bottleneck.BottleneckSettings(
            minutes=self.minutes, n_train=self.n_train, n_valid=self.n_valid, n_test=self.n_test, seed=self.seed
        )

    def command(self, data: Path, out: Path) -> list[str]:
        sizes = ["--n-train", str(self.n_train), "--n-valid", str(self.n_valid), "--n-test", str(self.n_test)]
        return [
            "experiment",
            "bottleneck",
            "--out",
            str(out),
            "--minutes",
            _arg(self.minutes),
            *sizes,
            "--seed",
            str(self.seed),
        ]

    def needs(self, data: Path, training: bool) -> list[Path]:
        return []

    def checkpoint(self, run: Path) -> Path:
        return resolve_model_dir(run / "models" / self.contestant)

    def _splits(self):
        settings = self.settings()
        return make_splits(settings.task, self.n_train, self.n_valid, self.n_test, seed=self.seed)

    def expected_config(self, directory: Path) -> dict:
        settings, splits = self.settings(), self._splits()
        translator = tr.load_translator(directory, precision="fp32")
        setups = bottleneck.contestant_setups(
            settings,
            bottleneck.tokenization(settings, generated=True),
            bottleneck.bleu_tokenizer([t for _, t in splits.test], settings.bleu_tokenize),
            src_vocab=translator.src_tok.vocab_size,
            tgt_vocab=translator.tgt_tok.vocab_size,
            pad_id=translator.tgt_tok.pad_id,
            out_dir=Path("models"),
            budget_s=1.0,
            n_valid=len(splits.valid),
        )
        return _translator_config(setups[self.contestant], directory)

    def evaluate(self, directory: Path, data: Path) -> Evaluation:
        scores = _translation_scores(directory, self._splits().test, 1)
        scores["bleu_bf16"] = _translation_scores(directory, self._splits().test, 1, "bf16")["bleu"]
        return _greedy_translation_evaluation(
            scores,
            (
                f"the experiment's {scores['n']} generated test pairs (seed {self.seed}); greedy; sacreBLEU, "
                "tokenizer char (BLEU by source length: the experiment's report.md)."
            )
            + BF16_NOTE,
            "bleu",
            self.measure_check(directory, data),
            tolerance=1.0,
            check_pairs=self.check_pairs,
        )

    def measure_check(self, directory: Path, data: Path) -> float:
        return _translation_scores(directory, self._splits().test[: self.check_pairs], 1)["bleu"]

    def example_outputs(self, directory: Path, inputs: Sequence[str]) -> dict[str, str]:
        return _translations(directory, inputs)


@dataclass(frozen=True)
class TextLM:
    """A GPT trained by ``attnlab train lm --preset P`` on a text file (its last 10% validates)."""

    name: str  # the shipped name
    preset: str = "shakespeare-char"  # key of attnlab.recipes.lm.LM_PRESETS
    text: str = "tinyshakespeare/input.txt"  # the training text, under the data folder
    data: str = (
        "tinyshakespeare (1,115,394 characters of Shakespeare, as distributed with char-rnn): the first 90% "
        "trains, the last 10% validates"
    )
    licence: str = "public domain (the text); the text is not shipped"
    overrides: tuple[str, ...] = ()  # further key=value settings (the tests' tiny stand-ins)
    seed: int = 0  # the training's seed
    threads: int | None = None  # as `attnlab train lm` runs by default
    check_tokens: int = 16384  # validation tokens of the fast check

    @property
    def run_key(self) -> str:
        return self.name

    def command(self, data: Path, out: Path) -> list[str]:
        args = ["train", "lm", "--text", str(data / self.text), "--preset", self.preset, "--out", str(out)]
        args += ["--seed", str(self.seed), "--overwrite"]
        return args + (["--overrides", *self.overrides] if self.overrides else [])

    def needs(self, data: Path, training: bool) -> list[Path]:
        return [data / self.text]

    def checkpoint(self, run: Path) -> Path:
        return resolve_model_dir(run)

    def setup(self) -> lm_recipe.LMSetup:
        job = TrainJob(self.preset, _run_nothing, {}, list(self.overrides), seed=self.seed)
        return lm_recipe.LM_JOB.setup(job)

    def expected_config(self, directory: Path) -> dict:
        setup = self.setup()
        _, tokenizer = lm_recipe.load_language_model(directory)
        fields = {**setup.model_overrides, "vocab_size": tokenizer.vocab_size}
        return gpt_config(setup.model_preset, **fields).to_dict()

    def _loss(self, directory: Path, data: Path, tokens: int | None) -> dict[str, float]:
        setup = dataclasses.replace(self.setup(), eval_tokens=tokens)
        model, tokenizer = lm_recipe.load_language_model(directory)
        _, valid_text = lm_recipe.split_text(read_text(data / self.text), setup.valid_fraction)
        valid_ids = torch.tensor(tokenizer.encode(valid_text), dtype=torch.long)  # (N,)
        # LMTask.evaluate reads only the validation ids; the training ids are there to satisfy
        # its checks, so the validation ids stand in for them.
        task = lm_recipe.LMTask(setup, model.config, tokenizer, valid_ids, valid_ids)
        with torch.inference_mode():
            scores = task.evaluate(model)
        return {**scores, "tokens": valid_ids.numel() if tokens is None else min(tokens, valid_ids.numel())}

    def evaluate(self, directory: Path, data: Path) -> Evaluation:
        scores = self._loss(directory, data, None)
        n = min(self.check_tokens, scores["tokens"])
        return Evaluation(
            metrics={"loss": scores["loss"], "perplexity": scores["ppl"], "n": scores["tokens"]},
            evaluation=(
                f"cross-entropy per token (nats) on the whole validation text (the last 10% of {Path(self.text).name}), "
                f"in blocks of the training's length, as the training's validation"
            ),
            check=_check(
                "loss",
                self.measure_check(directory, data),
                higher_is_better=False,
                tolerance=0.02,
                n=n,
                how=f"on the first {n:,} validation tokens",
            ),
        )

    def measure_check(self, directory: Path, data: Path) -> float:
        return self._loss(directory, data, self.check_tokens)["loss"]

    def example_outputs(self, directory: Path, inputs: Sequence[str]) -> dict[str, str]:
        from .decode import generate

        model, tokenizer = lm_recipe.load_language_model(directory)
        outputs = {}
        with torch.inference_mode():
            for text in inputs:
                prompt = torch.tensor([tokenizer.encode(text)])  # (1, T0)
                new = min(EXAMPLE_TOKENS, model.config.n_positions - prompt.shape[1])
                full = generate(model, prompt, max_new_tokens=new, temperature=0.0, eos_id=tokenizer.eos_id).tokens
                outputs[text] = tokenizer.decode(full[0, prompt.shape[1] :].tolist())  # full: (1, T)
        return outputs


def pooling_peaks(classifier: cl.TextClassifier, pairs: Sequence[tuple[str, str]]) -> dict[str, float]:
    """How often the attention pooling's heaviest character is the class's marker.

    For each class with a marker (question, negation, past: :func:`attnlab.data.sentence_types.japanese_markers`),
    among the ``(label, sentence)`` pairs of that class that ``classifier`` gets right: the share
    whose highest pooling weight falls on a character of the marker (か; ない/ん/ず; た/だ), as
    ``peak_on_marker/<label>``, and how many there were, as ``n/<label>``.

    Shape:
        N pairs → two numbers per marked class.
    """
    from .data.sentence_types import LABELS, japanese_markers

    predictions = classifier.predict([text for _, text in pairs])
    hits: dict[str, int] = {}
    counted: dict[str, int] = {}
    for (label, text), p in zip(pairs, predictions):
        if label == "other" or p.label != label:
            continue
        if len(p.tokens) != len(unicodedata.normalize("NFC", text)):
            raise ValueError(f"{text!r}: the classifier did not read one token per character")
        peak = max(range(len(p.weights)), key=p.weights.__getitem__)
        counted[label] = counted.get(label, 0) + 1
        hits[label] = hits.get(label, 0) + (peak in japanese_markers(text).get(label, ()))
    shares = {}
    for label in LABELS:
        if counted.get(label):
            shares[f"peak_on_marker/{label}"] = hits[label] / counted[label]
            shares[f"n/{label}"] = counted[label]
    return shares


@dataclass(frozen=True)
class SentenceTypeClassifier:
    """The attention-pooling classifier of the lesson's §8, trained by ``attnlab train classify``
    on small_parallel_enja's Japanese labelled question / negation / past / other
    (:mod:`attnlab.data.sentence_types`): its ``prepare`` writes the labelled files, its command
    trains on them."""

    name: str = "ja-sentence-type"  # the shipped name
    preset: str = "ja-sentence-type"  # key of attnlab.recipes.classify.PRESETS
    corpus: str = "small_parallel_enja"  # folder under the data folder
    data: str = (
        "the Japanese side of small_parallel_enja (short sentences from the Tanaka corpus; commit 312408a), "
        "labelled question / negation / past / other by attnlab.data.sentence_types: the English side decides "
        "the label (ends with '?'; not/n't/never/no…; was/were/did/had, irregular past forms, -ed verbs), and a "
        "pair is left out when two labels apply, when the English is ambiguous (present perfect, could/would, "
        "requests) or when its Japanese disagrees (checked with MeCab: か/の at the end or ？; ない/ぬ/ん; た). "
        "36,787 training sentences (train), 373 for validation (dev) and 374 for test (test), none of them "
        "also in train; `python -m attnlab.data.sentence_types DATA/small_parallel_enja OUT` writes the files"
    )
    licence: str = (
        "the Tanaka corpus: public domain / CC-BY (credit it when you use the model); the corpus is not shipped"
    )
    overrides: tuple[str, ...] = ()  # further key=value settings (the tests' tiny stand-ins)
    seed: int = 0  # the training's seed
    threads: int | None = (
        None  # the command fixes one thread itself (--threads 1): a model this small gains nothing from more
    )
    tokens_counted: str = "input tokens"  # what the training's tokens/s counts

    @property
    def run_key(self) -> str:
        return self.name

    def _corpus(self, data: Path) -> Path:
        return data / self.corpus

    @staticmethod
    def _labelled(out: Path) -> Path:
        return out.parent / f"{out.name}-data"

    def prepare(self, data: Path, out: Path) -> None:
        """Write the labelled ``train.tsv``, ``dev.tsv``, ``test.tsv`` beside the run folder ``out``."""
        from .data.sentence_types import write_labelled_splits

        write_labelled_splits(self._corpus(data), self._labelled(out))

    def command(self, data: Path, out: Path) -> list[str]:
        labelled = self._labelled(out)
        args = ["train", "classify", "--data", str(labelled / "train.tsv"), "--valid", str(labelled / "dev.tsv")]
        args += ["--preset", self.preset, "--out", str(out), "--seed", str(self.seed), "--threads", "1", "--overwrite"]
        return args + (["--overrides", *self.overrides] if self.overrides else [])

    def needs(self, data: Path, training: bool) -> list[Path]:
        # The test sentences are checked against the training split's (none may be in both).
        return [self._corpus(data) / f"{split}.{side}" for split in ("train", "dev", "test") for side in ("en", "ja")]

    def checkpoint(self, run: Path) -> Path:
        return resolve_model_dir(run)

    def setup(self) -> cl.ClassifySetup:
        job = TrainJob(self.preset, _run_nothing, {}, list(self.overrides), seed=self.seed)
        return cl.CLASSIFY_JOB.setup(job)

    def expected_config(self, directory: Path) -> dict:
        from .data.sentence_types import LABELS

        tokenizer = cl.load_classifier(directory).tokenizer
        config = dataclasses.asdict(cl.build_config(self.setup(), tokenizer.vocab_size, len(LABELS), tokenizer.pad_id))
        return {**config, "labels": sorted(LABELS)}

    def _test(self, data: Path, check_japanese: bool = True) -> list[tuple[str, str]]:
        from .data.sentence_types import labelled_split

        return labelled_split(self._corpus(data), "test", check_japanese=check_japanese)[0]

    def evaluate(self, directory: Path, data: Path) -> Evaluation:
        classifier = cl.load_classifier(directory)
        test = self._test(data)
        scores = classifier.evaluate(test)
        english = self._test(data, check_japanese=False)
        scores["accuracy_english_labels"] = classifier.evaluate(english)["accuracy"]
        scores["n_english_labels"] = len(english)
        scores.update(pooling_peaks(classifier, test))
        n = int(scores["n"])
        return Evaluation(
            metrics=scores,
            evaluation=(
                f"the {n} test sentences (test.ja, labelled as the training sentences were); accuracy overall and per "
                "class; accuracy_english_labels: on the test sentences labelled by the English rules alone "
                f"({len(english)}; the Japanese may then lack the form, e.g. 'how about going?' → 行きましょう); "
                "peak_on_marker/C: among the correctly classified test sentences of class C (n/C of them), the "
                "share whose highest pooling weight falls on the marker MeCab finds (か or ？; ない/ん/ず; た/だ)"
            ),
            check=_check(
                "accuracy",
                self.measure_check(directory, data),
                higher_is_better=True,
                tolerance=0.01,
                n=n,
                how=f"on the {n} test sentences",
            ),
        )

    def measure_check(self, directory: Path, data: Path) -> float:
        return cl.load_classifier(directory).evaluate(self._test(data))["accuracy"]

    def example_outputs(self, directory: Path, inputs: Sequence[str]) -> dict[str, str]:
        outputs = {}
        for p in cl.load_classifier(directory).predict(list(inputs)):
            peak = max(range(len(p.weights)), key=p.weights.__getitem__)
            outputs[p.text] = (
                f"{p.label} ({p.probs[p.label]:.2f}); pooling peak: {p.tokens[peak]} ({p.weights[peak]:.2f})"
            )
        return outputs


# --------------------------------------------------------------------------------------------
# The small models of the lesson's §9 (Transformers at work): one per family and beyond text.
# Each is trained by its ordinary `attnlab train ...` command with a small preset, stopped by steps
# (or epochs), never by the clock, so that `make models` gives the same model on any machine.
# --------------------------------------------------------------------------------------------


def _config_from(directory: Path, *keys: str) -> dict:
    """The data-dependent fields of a trained model's ``config.json`` (vocabulary sizes, ids)."""
    config = _read_config(directory)
    return {k: config[k] for k in keys if k in config}


@dataclass
class ShakespeareMLM:
    """An encoder-only BERT trained by ``attnlab train mlm`` (masked LM) on tinyshakespeare, one
    character a token like shakespeare-char (the same text, read from both sides instead of from the
    left); the last 10% of the text validates. At this size and step count a 1,000-piece BPE
    vocabulary, and characters under the preset's decaying rate, learned only how often each token
    occurs, whatever its neighbours; characters at a constant rate of 3e-3 learn to read them."""

    name: str = "shakespeare-mlm"
    text: str = "tinyshakespeare/input.txt"
    data: str = (
        "tinyshakespeare (1,115,394 characters of Shakespeare, as distributed with char-rnn): the first 90% "
        "trains, the last 10% validates; 15% of the characters masked (80/10/10), no next-sentence task"
    )
    licence: str = "public domain (the text); the text is not shipped"
    max_steps: int = 3000  # optimizer steps (the preset's 10-minute clock is switched off)
    overrides: tuple[str, ...] = (
        "model_preset=tiny",
        "model.d_model=64",
        "model.n_heads=4",
        "model.n_positions=64",
        "max_len=64",
        "batch_size=32",
        "train.lr=3e-3",
        "train.schedule=constant",
        "train.time_budget_s=null",
        "train.eval_every_steps=500",
        "train.warmup_steps=100",
        "train.log_every=100",
    )
    seed: int = 0
    threads: int | None = None
    check_sequences: int = 64  # validation sequences of the fast check

    @property
    def run_key(self) -> str:
        return self.name

    def command(self, data: Path, out: Path) -> list[str]:
        args = ["train", "mlm", "--text", str(data / self.text), "--tokenizer", "char", "--preset", "mini"]
        args += ["--max-steps", str(self.max_steps), "--out", str(out), "--seed", str(self.seed), "--overwrite"]
        return args + ["--overrides", *self.overrides]

    def needs(self, data: Path, training: bool) -> list[Path]:
        return [data / self.text]

    def checkpoint(self, run: Path) -> Path:
        return resolve_model_dir(run)

    def setup(self) -> lm_recipe.MLMSetup:
        job = TrainJob("mini", _run_nothing, {"tokenizer": "char"}, list(self.overrides), seed=self.seed)
        return lm_recipe.MLM_JOB.setup(job)

    def expected_config(self, directory: Path) -> dict:
        from .models.bert import bert_config

        setup = self.setup()
        fields = {**setup.model_overrides, **_config_from(directory, "vocab_size", "pad_id")}
        return bert_config(setup.model_preset, **fields, next_sentence_head=setup.next_sentence).to_dict()

    def _scores(self, directory: Path, data: Path, sequences: int | None) -> dict[str, float]:
        setup = dataclasses.replace(self.setup(), eval_sequences=sequences)
        model, tokenizer = lm_recipe.load_language_model(directory)
        _, valid_text = lm_recipe.split_text(read_text(data / self.text), setup.valid_fraction)
        valid_ids = lm_recipe.encode_text(tokenizer, valid_text)
        task = lm_recipe.MLMTask(setup, model.config, tokenizer, valid_ids, valid_ids)
        with torch.inference_mode():
            scores = task.evaluate(model)
        return {**scores, "sequences": len(task.valid_segments)}

    def evaluate(self, directory: Path, data: Path) -> Evaluation:
        scores = self._scores(directory, data, None)
        n = self.check_sequences
        return Evaluation(
            metrics={"loss": scores["loss"], "accuracy": scores["accuracy"], "n_sequences": scores["sequences"]},
            evaluation=(
                "masked-LM cross-entropy (nats) and top-1 accuracy on the masked characters of the whole validation "
                "text (the last 10% of input.txt) in sequences of 64 characters, with the training's fixed "
                "evaluation masks"
            ),
            check=_check(
                "loss",
                self.measure_check(directory, data),
                higher_is_better=False,
                tolerance=0.05,
                n=n,
                how=f"on the first {n} validation sequences",
            ),
        )

    def measure_check(self, directory: Path, data: Path) -> float:
        return self._scores(directory, data, self.check_sequences)["loss"]

    def example_outputs(self, directory: Path, inputs: Sequence[str]) -> dict[str, str]:
        from .models.bert import fill_mask

        model, tokenizer = lm_recipe.load_language_model(directory)
        with torch.inference_mode():
            return {
                text: ", ".join(f"{t} ({p:.2f})" for t, p in fill_mask(model, tokenizer, text, top_k=3)[0])
                for text in inputs
            }


@dataclass
class FactsSummarizer:
    """A pointer-generator (an RNN encoder–decoder with attention that can copy) trained by
    ``attnlab train summarize --preset facts`` on the generated facts task."""

    name: str = "facts-summarizer"
    data: str = (
        "the generated facts task of attnlab.data.text_tasks (news-like sentences with invented names and "
        "numbers that must be copied): 4,000 training, 200 validation and 200 test documents (seeds 0, 1, 2)"
    )
    licence: str = "generated by attnlab (no external data)"
    seed: int = 0
    threads: int | None = None
    check_documents: int = 50  # test documents of the fast check

    @property
    def run_key(self) -> str:
        return self.name

    def command(self, data: Path, out: Path) -> list[str]:
        return ["train", "summarize", "--preset", "facts", "--out", str(out), "--seed", str(self.seed), "--overwrite"]

    def needs(self, data: Path, training: bool) -> list[Path]:
        return []

    def checkpoint(self, run: Path) -> Path:
        return resolve_model_dir(run)

    def setup(self):
        from .recipes import summarize as sm

        return sm.SUMMARIZE_JOB.setup(TrainJob("facts", _run_nothing, {}, [], seed=self.seed))

    def expected_config(self, directory: Path) -> dict:
        from .recipes import summarize as sm

        setup = self.setup()
        sizes = _config_from(directory, "vocab_size", "pad_id", "unk_id")
        config = dataclasses.asdict(sm.build_config(setup, sizes["vocab_size"], sizes["pad_id"], sizes["unk_id"]))
        config.update(max_src_len=setup.max_src_len, max_summary_len=setup.max_summary_len, beam_size=setup.beam_size)
        return config

    def _test(self):
        from .data.summaries import facts_splits

        return facts_splits(1, seed=self.seed).test

    def _scores(self, directory: Path, n: int | None) -> dict[str, float]:
        from .recipes import summarize as sm

        summarizer = sm.load_summarizer(directory)
        test = self._test()[:n]
        with torch.inference_mode():
            out = summarizer.summarize([e.document for e in test], beam_size=1)
        hyps = [s.text for s in out]
        scores = rouge(hyps, [summarizer.normalise(e.summary) for e in test])
        return {**scores, "copy_recall": sm.copy_recall(hyps, [e.rare for e in test]), "n": len(test)}

    def evaluate(self, directory: Path, data: Path) -> Evaluation:
        scores = self._scores(directory, None)
        n = self.check_documents
        return Evaluation(
            metrics={k: scores[k] for k in ("rouge1", "rouge2", "rougeL", "copy_recall", "n")},
            evaluation=(
                f"ROUGE F1 (0–1) and the share of invented names and numbers copied into the summary, on the "
                f"{scores['n']} generated test documents, greedy"
            ),
            check=_check(
                "rougeL",
                self.measure_check(directory, data),
                higher_is_better=True,
                tolerance=0.01,
                n=n,
                how=f"on the first {n} test documents, greedy",
            ),
        )

    def measure_check(self, directory: Path, data: Path) -> float:
        return self._scores(directory, self.check_documents)["rougeL"]

    def example_outputs(self, directory: Path, inputs: Sequence[str]) -> dict[str, str]:
        from .recipes import summarize as sm

        summarizer = sm.load_summarizer(directory)
        with torch.inference_mode():
            return {d: s.text for d, s in zip(inputs, summarizer.summarize(list(inputs), beam_size=1))}


@dataclass
class FactsQA:
    """An extractive question answerer (a small BERT with a span head, no pretraining) trained by
    ``attnlab train qa --preset toy`` on the generated SQuAD-format facts (attnlab.data.squad.facts_splits)."""

    name: str = "facts-qa"
    data: str = (
        "the generated question-answering facts of attnlab.data.text_tasks.make_qa_task (passages of three "
        "sentences about invented people: where they were born, what they founded, studied, where they moved; "
        "a question about one of them): 40,000 training, 50 validation and 100 test passages of two questions "
        "each (seeds 0, 1, 2)"
    )
    licence: str = "generated by attnlab (no external data)"
    seed: int = 0
    threads: int | None = None

    @property
    def run_key(self) -> str:
        return self.name

    def command(self, data: Path, out: Path) -> list[str]:
        return ["train", "qa", "--preset", "toy", "--out", str(out), "--seed", str(self.seed), "--overwrite"]

    def needs(self, data: Path, training: bool) -> list[Path]:
        return []

    def checkpoint(self, run: Path) -> Path:
        return resolve_model_dir(run)

    def setup(self):
        from .recipes import qa

        return qa.QA_JOB.setup(TrainJob("toy", _run_nothing, {}, [], seed=self.seed))

    def expected_config(self, directory: Path) -> dict:
        from .recipes import qa

        setup = self.setup()
        sizes = _config_from(directory, "vocab_size", "pad_id")
        config = qa.scratch_config(setup, sizes["vocab_size"], sizes["pad_id"]).to_dict()
        return {**config, **qa.inference_settings(setup)}

    def _scores(self, directory: Path) -> dict[str, float]:
        from .data.squad import facts_splits
        from .recipes import qa

        test = facts_splits(1, seed=self.seed, n_valid=1).test  # the same test split as the training's
        with torch.inference_mode():
            return qa.load_qa(directory).evaluate(test)

    def evaluate(self, directory: Path, data: Path) -> Evaluation:
        scores = self._scores(directory)
        return Evaluation(
            metrics={k: scores[k] for k in ("exact_match", "f1", "n")},
            evaluation=(
                f"SQuAD v1.1 exact match and F1 (0–1) on the {int(scores['n'])} held-out generated test questions "
                "(passages with names the training never saw), the best span of at most 30 tokens"
            ),
            check=_check(
                "exact_match",
                scores["exact_match"],
                higher_is_better=True,
                tolerance=0.0,
                n=int(scores["n"]),
                how=f"on the {int(scores['n'])} test questions",
            ),
        )

    def measure_check(self, directory: Path, data: Path) -> float:
        return self._scores(directory)["exact_match"]

    def example_outputs(self, directory: Path, inputs: Sequence[str]) -> dict[str, str]:
        from .recipes import qa

        answerer = qa.load_qa(directory)
        outputs = {}
        for text in inputs:  # "Question? Passage", as the explorer's model page reads them
            cut = text.index("?") + 1
            outputs[text] = answerer.answer([text[:cut].strip()], [text[cut:].strip()])[0].text
        return outputs


@dataclass
class DigitsViT:
    """A small Vision Transformer trained by ``attnlab train vit --preset digits`` on scikit-learn's
    8 × 8 handwritten digits (patches of 2 × 2 pixels)."""

    name: str = "digits-vit"
    data: str = (
        "scikit-learn's 1,797 handwritten digits (8 × 8 grey images, from the UCI optical recognition of "
        "handwritten digits data set), split 70/10/20 by class (attnlab.data.digits.digits_splits, seed 0)"
    )
    licence: str = "CC BY 4.0 (UCI Machine Learning Repository); the images are read from scikit-learn, not shipped"
    seed: int = 0
    threads: int | None = None
    check_images: int = 100

    @property
    def run_key(self) -> str:
        return self.name

    def command(self, data: Path, out: Path) -> list[str]:
        return ["train", "vit", "--preset", "digits", "--out", str(out), "--seed", str(self.seed), "--overwrite"]

    def needs(self, data: Path, training: bool) -> list[Path]:
        return []

    def checkpoint(self, run: Path) -> Path:
        return resolve_model_dir(run)

    def expected_config(self, directory: Path) -> dict:
        from .recipes import vision

        setup = vision.VIT_JOB.setup(TrainJob("digits", _run_nothing, {}, [], seed=self.seed))
        return {**dataclasses.asdict(vision.build_config(setup)), "split_seed": setup.seed}

    def _accuracy(self, directory: Path, n: int | None) -> dict[str, float]:
        from .data.digits import digits_splits
        from .recipes import vision

        model, config = vision.load_vit(directory)
        data = digits_splits(seed=config.get("split_seed", 0))
        with torch.inference_mode():
            scores = vision.evaluate_vit(model, data.test_x[:n], data.test_y[:n])
        return {**scores, "n": len(data.test_y[:n])}

    def evaluate(self, directory: Path, data: Path) -> Evaluation:
        scores = self._accuracy(directory, None)
        n = self.check_images
        return Evaluation(
            metrics={"accuracy": scores["accuracy"], "n": scores["n"]},
            evaluation=f"share of the {scores['n']} held-out test images classified right",
            check=_check(
                "accuracy",
                self.measure_check(directory, data),
                higher_is_better=True,
                tolerance=0.0,
                n=n,
                how=f"on the first {n} test images",
            ),
        )

    def measure_check(self, directory: Path, data: Path) -> float:
        return self._accuracy(directory, self.check_images)["accuracy"]

    def example_outputs(self, directory: Path, inputs: Sequence[str]) -> dict[str, str]:
        from .data.digits import held_out_image
        from .recipes import vision

        model, config = vision.load_vit(directory)
        outputs = {}
        for text in inputs:
            image, label = held_out_image(config, int(text))
            _, probs = vision.patch_attention(model, image, method="last")
            outputs[text] = f"{int(probs.argmax())} ({float(probs.max()):.2f}); true digit {label}"
        return outputs


@dataclass
class KarateGAT:
    """A graph attention network trained by ``attnlab train gat`` on Zachary's karate club: only the
    two leaders' factions are given, the 32 other members are the test set."""

    name: str = "karate-gat"
    data: str = (
        "Zachary's (1977) karate club: 34 members, 78 friendships, the faction each member joined; the two "
        "leaders (nodes 0 and 33) labelled, the 32 others held out"
    )
    licence: str = "published data (Zachary 1977), as distributed with networkx"
    seed: int = 0
    threads: int | None = None

    @property
    def run_key(self) -> str:
        return self.name

    def command(self, data: Path, out: Path) -> list[str]:
        return ["train", "gat", "--out", str(out), "--seed", str(self.seed), "--no-plot"]

    def needs(self, data: Path, training: bool) -> list[Path]:
        return []

    def checkpoint(self, run: Path) -> Path:
        return resolve_model_dir(run)

    def expected_config(self, directory: Path) -> dict:
        from .recipes import graph

        setup = graph.GATSetup(seed=self.seed)
        config = dataclasses.asdict(graph.build_config(setup, 34, 2))
        # The accuracy is what the training measured, written into config.json by save_gat.
        return {**config, "labelled": setup.labelled, "seed": setup.seed, **_config_from(directory, "accuracy")}

    def measure_check(self, directory: Path, data: Path) -> float:
        from .data.graphs import karate_club
        from .recipes import graph

        model, config = graph.load_gat(directory)
        g = karate_club()
        _, predicted = graph.node_attention(model, g)
        held_out = [i for i in range(len(g.labels)) if i not in config["labelled"]]
        return float((predicted[held_out] == g.labels[held_out]).float().mean())

    def evaluate(self, directory: Path, data: Path) -> Evaluation:
        accuracy = self.measure_check(directory, data)
        return Evaluation(
            metrics={"accuracy": accuracy, "n": 32},
            evaluation="share of the 32 unlabelled members placed in the faction they joined",
            check=_check("accuracy", accuracy, higher_is_better=True, tolerance=0.0, n=32, how="on the 32 members"),
        )

    def example_outputs(self, directory: Path, inputs: Sequence[str]) -> dict[str, str]:
        from .data.graphs import karate_club
        from .recipes import graph

        model, _ = graph.load_gat(directory)
        g = karate_club()
        weights, predicted = graph.node_attention(model, g)
        outputs = {}
        for text in inputs:
            i = int(text)
            row = weights[i]
            top = int(row.argmax())
            outputs[text] = f"{g.class_names[int(predicted[i])]}; attends most to member {top} ({float(row[top]):.2f})"
        return outputs


#: How ``make models`` makes each shipped model (:data:`attnlab.assets.ASSETS`), by name.
BUILDS: dict[str, AssetBuild] = {
    "demo": DemoTranslator(),
    "ja-en": EnjaTranslator("ja-en", preset="ja-en", src="ja", tgt="en"),
    "en-ja": EnjaTranslator("en-ja", preset="en-ja", src="en", tgt="ja"),
    "rnn-attention": BottleneckRNN("rnn-attention", contestant="rnn-additive"),
    "rnn-plain": BottleneckRNN("rnn-plain", contestant="rnn-none"),
    "shakespeare-char": TextLM("shakespeare-char", preset="shakespeare-char-small"),
    "ja-sentence-type": SentenceTypeClassifier(),
    "shakespeare-mlm": ShakespeareMLM(),
    "facts-summarizer": FactsSummarizer(),
    "facts-qa": FactsQA(),
    "digits-vit": DigitsViT(),
    "karate-gat": KarateGAT(),
}


# --------------------------------------------------------------------------------------------
# Building.
# --------------------------------------------------------------------------------------------


def config_differences(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    """The entries where two ``config.json`` contents differ, as ``key: actual (expected E)``."""
    expected = json.loads(json.dumps(expected))  # tuples → lists, as config.json holds them
    keys = sorted(set(expected) | set(actual))
    missing = object()
    return [
        f"{k}: {actual.get(k, missing)!r} (expected {expected.get(k, missing)!r})".replace(repr(missing), "absent")
        for k in keys
        if expected.get(k, missing) != actual.get(k, missing)
    ]


def _read_config(directory: Path) -> dict:
    return json.loads((directory / ckpt.CONFIG_FILE).read_text(encoding="utf-8"))


def _parameter_count(directory: Path) -> int:
    from safetensors import safe_open

    with safe_open(str(directory / ckpt.WEIGHTS_FILE), framework="pt") as f:
        return sum(math.prod(f.get_slice(name).get_shape()) for name in f.keys())  # noqa: SIM118 (not a dict)


def _attnlab_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("attnlab")
    except PackageNotFoundError:
        return "unknown"


def _usage(entry: assets.ShippedModel) -> str:
    example = entry.examples[0] if entry.examples else "..."
    if entry.command == "generate":
        return f"attnlab generate --model {entry.name} --prompt {shlex.quote(example)} --temperature 0"
    if entry.command in ("vit", "gat"):  # the example is a held-out image's index, or a member's number
        option = "--index" if entry.command == "vit" else "--node"
        return f"attnlab {entry.command} --model {entry.name} {option} {example}"
    return f"attnlab {entry.command} --model {entry.name} {shlex.quote(example)}"


def _threads_env(threads: int | None) -> dict[str, str]:
    env = dict(os.environ)
    if threads is not None:
        # PyTorch (OpenMP/MKL) and the tokenizers' Rust pool each start one thread per core otherwise.
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"):
            env[name] = str(threads)
    return env


def _attnlab(args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "attnlab.cli", *args]


def _train(trainings: Mapping[str, AssetBuild], data: Path, runs: Path, log: Callable[[str], None]) -> dict[str, Path]:
    """Run each training (one per run key) into ``runs/KEY``; return the run folders by key.

    The one-thread trainings run side by side first, each with its output in ``runs/KEY.log``
    (two of them fill a two-core machine); then the others, one after another, their output
    shown as it comes.

    Raises:
        RuntimeError: a training failed (the side-by-side ones are all waited for first).
    """
    runs.mkdir(parents=True, exist_ok=True)
    folders = {key: runs / key for key in trainings}
    for key, asset_build in trainings.items():
        prepare = getattr(asset_build, "prepare", None)
        if prepare is not None:
            log(f"preparing the data of {key}")
            prepare(data, folders[key])
    side = [key for key, r in trainings.items() if r.threads == 1]
    if len(side) < 2:
        side = []
    started: list[tuple[str, Path, subprocess.Popen]] = []
    load_before = os.getloadavg()[0]
    try:
        for key in side:
            asset_build, logfile = trainings[key], runs / f"{key}.log"
            log(f"training {key} (1 thread, beside {', '.join(k for k in side if k != key)}); output: {logfile}")
            with open(logfile, "w", encoding="utf-8") as out:
                command = _attnlab(asset_build.command(data, folders[key]))
                started.append((key, logfile, subprocess.Popen(command, env=_threads_env(1), stdout=out, stderr=out)))
        statuses = [(key, logfile, process.wait()) for key, logfile, process in started]
    except BaseException:
        for _, _, process in started:  # Ctrl-C or an error here: no training is left running unseen
            process.terminate()
        raise
    for key, logfile, status in statuses:
        if status != 0:
            raise RuntimeError(f"the training of {key} failed (exit status {status}); see {logfile}")
        _write_load(folders[key], load_before)
    for key, asset_build in trainings.items():
        if key in side:
            continue
        log(f"training {key}: attnlab {shlex.join(asset_build.command(data, folders[key]))}")
        load_before = os.getloadavg()[0]
        done = subprocess.run(_attnlab(asset_build.command(data, folders[key])), env=_threads_env(asset_build.threads))
        if done.returncode != 0:
            raise RuntimeError(f"the training of {key} failed (exit status {done.returncode}); see its output above")
        _write_load(folders[key], load_before)
    return folders


LOAD_FILE = "load.json"  # in a run folder: the machine's load around the training (training_facts reads it)


def _write_load(run: Path, before: float) -> None:
    """Record the 1-minute load average when a training started and ended, and the cores, in ``run``:
    the card says whether the training shared the machine."""
    if run.is_dir():
        facts = {"load_before": before, "load_after": os.getloadavg()[0], "cores": os.cpu_count()}
        write_text_atomically(run / LOAD_FILE, json.dumps(facts) + "\n")


def training_facts(checkpoint: Path) -> dict[str, Any] | None:
    """Steps, training minutes, mean target tokens/s and stop reason of the run that wrote
    ``checkpoint`` (its folder's or its parent's ``log.jsonl``), with this machine's CPU and, where
    the build recorded it (``load.json``), the load average when the training started and ended;
    None without a log."""
    log_path = next((p / "log.jsonl" for p in (checkpoint, checkpoint.parent) if (p / "log.jsonl").is_file()), None)
    if log_path is None:
        return None
    records = [json.loads(line) for line in log_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    timed = [r for r in records if "train_seconds" in r and "step" in r]
    if not timed:
        return None
    seconds = float(timed[-1]["train_seconds"])
    rates = [r["tokens_per_s"] for r in records if "tokens_per_s" in r]
    tokens_per_s, stop = (sum(rates) / len(rates) if rates else 0.0), ""
    state_path = log_path.parent / "last" / ckpt.TRAINER_STATE_FILE
    if state_path.is_file():  # the exact totals, and why the run stopped
        state = torch.load(state_path, map_location="cpu", weights_only=False)
        stop = state.get("stop_reason", "") if isinstance(state.get("stop_reason"), str) else ""
        if state.get("tokens") and seconds > 0:
            tokens_per_s = state["tokens"] / seconds
    facts = {
        "steps": int(timed[-1]["step"]),
        "minutes": seconds / 60,
        "tokens_per_s": tokens_per_s,
        "stop_reason": stop,
        "cpu": machine.cpu_name(),
    }
    load_path = log_path.parent / LOAD_FILE
    if load_path.is_file():
        facts.update(json.loads(load_path.read_text(encoding="utf-8")))
    return facts


def pack_asset(
    asset_build: AssetBuild,
    run: Path,
    destination: Path,
    data: Path,
    *,
    command: str,
    packed_from: Path | None = None,
    date: str | None = None,
    log: Callable[[str], None] = print,
) -> ModelCard:
    """Check the model in the run folder ``run`` against ``asset_build``, pack it into ``destination``,
    measure the packed model and write its card.

    Raises:
        ValueError: the trained model's config is not the one the build makes (e.g. a run of other
            settings given with --from-run); nothing is written then.
    """
    source = asset_build.checkpoint(run)
    wrong = config_differences(asset_build.expected_config(source), _read_config(source))
    if wrong:
        raise ValueError(
            f"{source} is not what the {asset_build.name} build makes ({len(wrong)} config.json entries differ: "
            f"{'; '.join(wrong[:5])}); train it with: attnlab {command}"
        )
    storage = getattr(asset_build, "storage", "float16")
    log(f"packing {source} → {destination} ({storage})")
    ckpt.pack_checkpoint(source, destination, dtype=_STORAGE_DTYPES[storage])
    log(f"measuring {asset_build.name} on held-out data")
    evaluation = asset_build.evaluate(destination, data)
    entry = assets.ASSETS[asset_build.name]
    card = ModelCard(
        name=asset_build.name,
        description_en=entry.description_en,
        description_ja=entry.description_ja,
        usage=_usage(entry),
        command=f"attnlab {command}",
        seed=asset_build.seed,
        data=asset_build.data,
        licence=asset_build.licence,
        date=date or datetime.date.today().isoformat(),
        parameters=_parameter_count(destination),
        weights_bytes=(destination / ckpt.WEIGHTS_FILE).stat().st_size,
        metrics=evaluation.metrics,
        evaluation=evaluation.evaluation,
        check=evaluation.check,
        example_outputs=asset_build.example_outputs(destination, entry.examples),
        reproduce=evaluation.reproduce,
        packed_from=None if packed_from is None else str(packed_from),
        attnlab_version=_attnlab_version(),
        training=training_facts(source),
        storage=storage,
    )
    if card.training is not None and hasattr(asset_build, "tokens_counted"):
        card.training["tokens_counted"] = asset_build.tokens_counted
    write_model_card(destination, card)
    return card


def build(
    names: Sequence[str] | None = None,
    *,
    data: Path = Path("../shared/data"),
    runs: Path = Path("runs/models"),
    from_run: Path | None = None,
    root: Path | None = None,
    builds: Mapping[str, AssetBuild] | None = None,
    log: Callable[[str], None] = print,
) -> list[ModelCard]:
    """Train (or, with ``from_run``, take), pack and describe the shipped models ``names`` (all by
    default); returns their cards.

    Args:
        names: which models (keys of ``builds``); default all.
        data: the folder holding the corpora (``small_parallel_enja/``, ``tinyshakespeare/``).
        runs: where the trainings write their run folders (``runs/NAME``).
        from_run: pack this already-trained run folder instead of training (one model only): for
            ja-en a folder written by `attnlab train translate --preset ja-en`, for the RNNs a
            bottleneck report folder.
        root: the assets folder (default: :data:`attnlab.assets.ROOT`, inside the package).
        builds: how each model is made (default :data:`BUILDS`; the tests pass tiny stand-ins).

    Raises:
        ValueError: an unknown name, ``from_run`` with other than one model, a run that does not
            match its build, or assets over :data:`attnlab.assets.BUDGET_BYTES` (after packing).
        FileNotFoundError: a data file or the ``from_run`` folder is missing (checked before any training).
        RuntimeError: a training failed.
    """
    builds = BUILDS if builds is None else builds
    root = assets.ROOT if root is None else Path(root)
    names = list(names or builds)
    unknown = [n for n in names if n not in builds]
    if unknown:
        raise ValueError(f"no shipped model is called {', '.join(unknown)}; choose from {', '.join(builds)}")
    chosen = [builds[n] for n in dict.fromkeys(names)]
    if from_run is not None:
        if len(chosen) != 1:
            raise ValueError("--from-run packs one model's run: name that model alone with --only NAME")
        if not Path(from_run).is_dir():
            raise FileNotFoundError(f"--from-run {from_run}: no such run folder")
    missing = [p for r in chosen for p in r.needs(data, training=from_run is None) if not p.is_file()]
    if missing:
        raise FileNotFoundError(
            f"{missing[0]} not found{f' (and {len(missing) - 1} more data files)' if len(missing) > 1 else ''}: "
            "give the folder holding the corpora with DATA=DIR (make) or --data DIR"
        )
    if from_run is None:
        trainings = {r.run_key: r for r in chosen}
        folders = _train(trainings, data, runs, log)
    else:
        folders = {chosen[0].run_key: Path(from_run)}
    cards = []
    for asset_build in chosen:
        folder = folders[asset_build.run_key]
        card = pack_asset(
            asset_build,
            folder,
            root / assets.ASSETS[asset_build.name].folder,
            data,
            command=shlex.join(asset_build.command(data, folder)),
            packed_from=from_run,
            log=log,
        )
        log(f"{asset_build.name}: " + ", ".join(f"{k} {metric_text(v, k)}" for k, v in card.metrics.items()))
        cards.append(card)
    total = assets.total_bytes(root)
    log(f"assets: {total / 1e6:.1f} MB of the {assets.BUDGET_BYTES / 1e6:.0f} MB budget")
    if total > assets.BUDGET_BYTES:
        sizes = ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in assets.folder_bytes(root).items())
        raise ValueError(
            f"the shipped models weigh {total / 1e6:.1f} MB together, over the {assets.BUDGET_BYTES / 1e6:.0f} MB "
            f"budget ({sizes}): make a model smaller or ship fewer"
        )
    return cards


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m attnlab.build_assets``: the command line of ``make models``."""
    parser = argparse.ArgumentParser(
        prog="python -m attnlab.build_assets",
        description="Train, pack (fp16 or int8) and describe the models shipped in attnlab/assets (make models).",
    )
    parser.add_argument("--only", nargs="+", metavar="NAME", help=f"build these models only ({', '.join(BUILDS)})")
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="folder holding the corpora")
    parser.add_argument("--runs", type=Path, default=Path("runs/models"), help="where the trainings write their runs")
    parser.add_argument(
        "--from-run", type=Path, help="pack this already-trained run folder instead of training (with --only NAME)"
    )
    args = parser.parse_args(argv)
    try:
        build(args.only, data=args.data, runs=args.runs, from_run=args.from_run)
    except (OSError, ValueError, RuntimeError) as err:
        print(f"make models: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
