"""The builds of the models that put attention to work beyond translation and language modelling.

The attention-pooling sentence-type classifier of the lesson's §8, and the small models of §9
(Transformers at work), one per family and beyond text: a pointer-generator summarizer, an
extractive question answerer, a Vision Transformer and a graph attention network. Each is
trained by its ordinary ``attnlab train ...`` command with a small preset, stopped by steps (or
epochs), never by the clock, so that ``make models`` gives the same model on any machine; each is
loaded for its evaluation through :func:`attnlab.loading.load_model` by its family.

Shape:
    no tensors cross this module's interface: folders and text in, scores and outputs out.
"""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ..inference.classify import TextClassifier
from ..loading import load_model, model_dir
from ..metrics import rouge
from ..recipes import TrainJob, graph, qa, vision
from ..recipes import classify as cl
from ..recipes import summarize as sm
from .common import Evaluation, config_from, fast_check, run_nothing

__all__ = ["pooling_peaks", "SentenceTypeClassifier", "FactsSummarizer", "FactsQA", "DigitsViT", "KarateGAT"]


def pooling_peaks(classifier: TextClassifier, pairs: Sequence[tuple[str, str]]) -> dict[str, float]:
    """How often the attention pooling's heaviest character is the class's marker.

    For each class with a marker (question, negation, past: :func:`attnlab.data.sentence_types.japanese_markers`),
    among the ``(label, sentence)`` pairs of that class that ``classifier`` gets right: the share
    whose highest pooling weight falls on a character of the marker (か; ない/ん/ず; た/だ), as
    ``peak_on_marker/<label>``, and how many there were, as ``n/<label>``.

    Shape:
        N pairs → two numbers per marked class.
    """
    from ..data.sentence_types import LABELS, japanese_markers

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
        from ..data.sentence_types import write_labelled_splits

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
        return model_dir(run)

    def setup(self) -> cl.ClassifySetup:
        job = TrainJob(self.preset, run_nothing, {}, list(self.overrides), seed=self.seed)
        return cl.CLASSIFY_JOB.setup(job)

    def expected_config(self, directory: Path) -> dict:
        from ..data.sentence_types import LABELS

        tokenizer = load_model(directory, family="classify").tokenizer
        config = dataclasses.asdict(cl.build_config(self.setup(), tokenizer.vocab_size, len(LABELS), tokenizer.pad_id))
        return {**config, "labels": sorted(LABELS)}

    def _test(self, data: Path, check_japanese: bool = True) -> list[tuple[str, str]]:
        from ..data.sentence_types import labelled_split

        return labelled_split(self._corpus(data), "test", check_japanese=check_japanese)[0]

    def evaluate(self, directory: Path, data: Path) -> Evaluation:
        classifier = load_model(directory, family="classify")
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
            check=fast_check(
                "accuracy",
                self.measure_check(directory, data),
                higher_is_better=True,
                tolerance=0.01,
                n=n,
                how=f"on the {n} test sentences",
            ),
        )

    def measure_check(self, directory: Path, data: Path) -> float:
        return load_model(directory, family="classify").evaluate(self._test(data))["accuracy"]

    def example_outputs(self, directory: Path, inputs: Sequence[str]) -> dict[str, str]:
        outputs = {}
        for p in load_model(directory, family="classify").predict(list(inputs)):
            peak = max(range(len(p.weights)), key=p.weights.__getitem__)
            outputs[p.text] = (
                f"{p.label} ({p.probs[p.label]:.2f}); pooling peak: {p.tokens[peak]} ({p.weights[peak]:.2f})"
            )
        return outputs


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
        return model_dir(run)

    def setup(self):
        return sm.SUMMARIZE_JOB.setup(TrainJob("facts", run_nothing, {}, [], seed=self.seed))

    def expected_config(self, directory: Path) -> dict:
        setup = self.setup()
        sizes = config_from(directory, "vocab_size", "pad_id", "unk_id")
        config = dataclasses.asdict(sm.build_config(setup, sizes["vocab_size"], sizes["pad_id"], sizes["unk_id"]))
        config.update(max_src_len=setup.max_src_len, max_summary_len=setup.max_summary_len, beam_size=setup.beam_size)
        return config

    def _test(self):
        from ..data.summaries import facts_splits

        return facts_splits(1, seed=self.seed).test

    def _scores(self, directory: Path, n: int | None) -> dict[str, float]:
        summarizer = load_model(directory, family="summarize")
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
            check=fast_check(
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
        summarizer = load_model(directory, family="summarize")
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
        return model_dir(run)

    def setup(self):
        return qa.QA_JOB.setup(TrainJob("toy", run_nothing, {}, [], seed=self.seed))

    def expected_config(self, directory: Path) -> dict:
        setup = self.setup()
        sizes = config_from(directory, "vocab_size", "pad_id")
        config = qa.scratch_config(setup, sizes["vocab_size"], sizes["pad_id"]).to_dict()
        return {**config, **qa.inference_settings(setup)}

    def _scores(self, directory: Path) -> dict[str, float]:
        from ..data.squad import facts_splits

        test = facts_splits(1, seed=self.seed, n_valid=1).test  # the same test split as the training's
        with torch.inference_mode():
            return load_model(directory, family="qa").evaluate(test)

    def evaluate(self, directory: Path, data: Path) -> Evaluation:
        scores = self._scores(directory)
        return Evaluation(
            metrics={k: scores[k] for k in ("exact_match", "f1", "n")},
            evaluation=(
                f"SQuAD v1.1 exact match and F1 (0–1) on the {int(scores['n'])} held-out generated test questions "
                "(passages with names the training never saw), the best span of at most 30 tokens"
            ),
            check=fast_check(
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
        answerer = load_model(directory, family="qa")
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
        return model_dir(run)

    def expected_config(self, directory: Path) -> dict:
        setup = vision.VIT_JOB.setup(TrainJob("digits", run_nothing, {}, [], seed=self.seed))
        return {**dataclasses.asdict(vision.build_config(setup)), "split_seed": setup.seed}

    def _accuracy(self, directory: Path, n: int | None) -> dict[str, float]:
        from ..data.digits import digits_splits

        model, config = load_model(directory, family="vision")
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
            check=fast_check(
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
        from ..data.digits import held_out_image

        model, config = load_model(directory, family="vision")
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
        return model_dir(run)

    def expected_config(self, directory: Path) -> dict:
        setup = graph.GATSetup(seed=self.seed)
        config = dataclasses.asdict(graph.build_config(setup, 34, 2))
        # The accuracy is what the training measured, written into config.json by save_gat.
        return {**config, "labelled": setup.labelled, "seed": setup.seed, **config_from(directory, "accuracy")}

    def measure_check(self, directory: Path, data: Path) -> float:
        from ..data.graphs import karate_club

        model, config = load_model(directory, family="graph")
        g = karate_club()
        _, predicted = graph.node_attention(model, g)
        held_out = [i for i in range(len(g.labels)) if i not in config["labelled"]]
        return float((predicted[held_out] == g.labels[held_out]).float().mean())

    def evaluate(self, directory: Path, data: Path) -> Evaluation:
        accuracy = self.measure_check(directory, data)
        return Evaluation(
            metrics={"accuracy": accuracy, "n": 32},
            evaluation="share of the 32 unlabelled members placed in the faction they joined",
            check=fast_check("accuracy", accuracy, higher_is_better=True, tolerance=0.0, n=32, how="on the 32 members"),
        )

    def example_outputs(self, directory: Path, inputs: Sequence[str]) -> dict[str, str]:
        from ..data.graphs import karate_club

        model, _ = load_model(directory, family="graph")
        g = karate_club()
        weights, predicted = graph.node_attention(model, g)
        outputs = {}
        for text in inputs:
            i = int(text)
            row = weights[i]
            top = int(row.argmax())
            outputs[text] = f"{g.class_names[int(predicted[i])]}; attends most to member {top} ({float(row[top]):.2f})"
        return outputs
