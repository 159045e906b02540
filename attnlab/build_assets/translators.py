"""The translators' builds: the ja⇄en translators, the demo's number translator and the bottleneck RNNs.

Each build (an :class:`~attnlab.build_assets.common.AssetBuild`) trains with the ordinary command
(``attnlab train translate --preset ja-en ...``, ``attnlab demo``, ``attnlab experiment
bottleneck``) and is judged by BLEU (and exact match for the demo) on held-out pairs, loaded
through :func:`attnlab.loading.load_model` in fp32; ``bleu_bf16`` repeats the BLEU in bf16, what
precision "auto" may take (:data:`BF16_NOTE`).

Shape:
    no tensors cross this module's interface: folders and text in, scores and translations out.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ..data import enja_mix, sentences
from ..data.corpus import read_parallel
from ..data.tasks import make_splits
from ..experiments import bottleneck, demo
from ..inference.translate import Translator
from ..loading import load_model, model_dir
from ..metrics import bleu, chrf, exact_match, sentence_form_share
from ..recipes import TrainJob
from ..recipes import translate as tr
from .common import Evaluation, fast_check, run_nothing

__all__ = ["BF16_NOTE", "PresetTranslator", "EnjaTranslator", "DemoTranslator", "BottleneckRNN"]


#: What a translator's card says of ``bleu_bf16`` (precision "auto" may take bf16 only where the card
#: gives it: attnlab.recipes.translate.bf16_within_card); the card's text adds the final full stop.
BF16_NOTE = (
    " bleu_bf16: the same BLEU decoded in bf16 (`--precision bf16`; what precision auto takes on a CPU with "
    "native bf16 where it is measured faster, when within 0.5 BLEU of fp32's)"
)


def _arg(value: float) -> str:
    return f"{value:g}"


def _preset_setup(preset: str, overrides: Sequence[str], seed: int) -> tr.TranslationSetup:
    """The setup ``attnlab train translate --preset PRESET OVERRIDES --seed SEED`` trains (no data read)."""
    return tr.TRANSLATE_JOB.setup(TrainJob(preset, run_nothing, {}, list(overrides), seed=seed))


def _translator_config(setup: tr.TranslationSetup, directory: Path) -> dict:
    translator = load_model(directory, family="translate", precision="fp32")
    config = tr.build_config(
        setup, translator.src_tok.vocab_size, translator.tgt_tok.vocab_size, translator.tgt_tok.pad_id
    )
    return tr.checkpoint_config(setup, config)


def _translations(directory: Path, inputs: Sequence[str]) -> dict[str, str]:
    translator = load_model(directory, family="translate", precision="fp32")
    return {text: r.text for text, r in zip(inputs, translator.translate(list(inputs), beam_size=1))}


def _translation_scores(
    directory: Path, pairs: Sequence[tuple[str, str]], beam: int, precision: str = "fp32"
) -> dict[str, float]:
    translator = load_model(directory, family="translate", precision=precision)
    with torch.inference_mode():
        return translator.evaluate([s for s, _ in pairs], [t for _, t in pairs], beam_size=beam)


def _greedy_bleu_check(directory: Path, pairs: Sequence[tuple[str, str]], what: str) -> dict:
    """The translators' fast check: greedy BLEU on ``pairs`` (the first test pairs), ±1 BLEU."""
    return fast_check(
        "bleu",
        _translation_scores(directory, pairs, 1)["bleu"],
        higher_is_better=True,
        tolerance=1.0,
        n=len(pairs),
        how=f"on the first {len(pairs)} {what}, greedy",
    )


def _greedy_translation_evaluation(
    scores: dict[str, float], evaluation: str, metric: str, value: float, *, tolerance: float, check_pairs: int
) -> Evaluation:
    """The evaluation of a translator scored greedily on generated test pairs (``scores``), whose
    check is ``metric`` (``value``) on the first ``check_pairs`` of them."""
    n = min(check_pairs, int(scores["n"]))
    return Evaluation(
        metrics=scores,
        evaluation=evaluation,
        check=fast_check(
            metric, value, higher_is_better=True, tolerance=tolerance, n=n, how=f"on the first {n} test pairs, greedy"
        ),
    )


@dataclass(frozen=True)
class PresetTranslator:
    """A translator trained by ``attnlab train translate --preset P`` on line-aligned corpus files
    ``DATA/corpus/{train,dev,test}.{src,tgt}`` (small_parallel_enja): how ja-en and en-ja were
    built before :class:`EnjaTranslator`; the tests build tiny stand-ins with it."""

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
        return model_dir(run)

    def setup(self) -> tr.TranslationSetup:
        return _preset_setup(self.preset, self.overrides, self.seed)

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
        tokenize = load_model(directory, family="translate", precision="fp32").bleu_tokenize
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
        return model_dir(run)

    def setup(self) -> tr.TranslationSetup:
        return _preset_setup(self.preset, self.overrides, self.seed)

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
        translator = load_model(directory, family="translate", precision="fp32")
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

    def _paragraph_scores(self, translator: Translator, data: Path) -> dict[str, float]:
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
        return model_dir(run)

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
        return model_dir(run / "models" / self.contestant)

    def _splits(self):
        settings = self.settings()
        return make_splits(settings.task, self.n_train, self.n_valid, self.n_test, seed=self.seed)

    def expected_config(self, directory: Path) -> dict:
        settings, splits = self.settings(), self._splits()
        translator = load_model(directory, family="translate", precision="fp32")
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
