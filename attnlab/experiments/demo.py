"""``attnlab demo``: the project's main job, on data the package generates itself.

It generates the number-translation task (English number words → Japanese numerals, e.g.
"three hundred forty-two thousand" → 三十四万二千), trains a small Transformer with a progress bar,
reports exact match and BLEU on held-out pairs, translates a few examples and writes
cross-attention heatmaps, so a learner sees *where the model looks* when it writes each kanji.

Training stops on quality, not on the clock: once validation exact match reaches the target
(99.7% of 2,000 validation pairs by default), or when it has stopped improving. Both rules look at evaluations made every
150 optimizer steps, so a slower machine trains the same way, only later; the time cap (10 minutes
by default) is a safety net, and the demo says so when it is what stopped training.
"""

from __future__ import annotations

import dataclasses
import json
import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import openmp
from ..data.tasks import make_splits
from ..recipes.translate import PRESETS, TranslationSetup, train_translation
from ..train import TrainConfig

TASK = "numbers-en-ja"  # the generated task (attnlab.data.tasks)
# The best checkpoint is chosen on N_VALID generated validation pairs and training stops when
# their exact match reaches TARGET. The promise is about the held-out pairs (≥ 99% exact match),
# so reaching the target must not be luck. Over 300 pairs 99.5% allows one error, and a model wrong
# once in 100 scores that in about one evaluation in five (binomial), which the best of a run's
# evaluations finds. Over 2,000 pairs 99.7% allows 6 errors, which such a model shows in about one
# evaluation in 4,000.
N_VALID = 2000  # generated validation pairs: the best checkpoint is chosen on them, all scored
N_TEST = 500  # generated held-out pairs the report scores (run_demo's default)

#: Sentences translated at the end of the demo (not in any split: checked against the test set).
EXAMPLES = [
    "three hundred forty-two thousand",
    "twenty million five hundred",
    "nine thousand nine hundred ninety-nine",
    "one billion two hundred thirty-four million five hundred sixty-seven thousand eight hundred ninety",
]


#: The demo's quality goal: validation exact match at which training stops (``--target``).
TARGET = 0.997
#: The demo's safety cap on training time, in minutes (``--minutes``).
MAX_MINUTES = 10.0


@dataclass
class DemoReport:
    out_dir: Path  # where everything was written
    exact_match: float  # on the held-out test pairs, greedy decoding
    bleu: float  # sacreBLEU with character tokenisation, same pairs
    train_minutes: float  # training time (evaluation excluded)
    tokens_per_s: float  # target tokens per second while training
    steps: int  # optimizer steps
    examples: list[tuple[str, str]]  # (source, translation)
    heatmaps: list[Path]  # written PNG files
    # Which rule stopped training (TrainResult.stop_reason): "target", "early_stopping" (it stopped
    # improving), "time_budget" (the safety cap) or "epochs".
    stop_reason: str = ""
    valid_exact_match: float | None = None  # the best validation exact match (None: never evaluated)
    target: float = TARGET  # the validation exact match training was to reach
    max_minutes: float = MAX_MINUTES  # the safety cap on training time

    def stopped(self) -> str:
        """Which rule stopped training, in words (what ``attnlab demo`` prints)."""
        best = "none" if self.valid_exact_match is None else f"{self.valid_exact_match:.1%}"
        if self.stop_reason == "target":
            return f"reached the quality target (validation exact match {best} ≥ {self.target:.1%})"
        if self.stop_reason == "early_stopping":
            return f"stopped improving (best validation exact match {best}, target {self.target:.1%})"
        if self.stop_reason == "time_budget":
            return (
                f"hit the {self.max_minutes:g}-minute safety cap before the quality target "
                f"(best validation exact match {best} < {self.target:.1%})"
            )
        return f"ran all its epochs (best validation exact match {best}, target {self.target:.1%})"

    def _repr_html_(self) -> str:
        """Jupyter: the scores, the example translations and the first heatmap written."""
        import base64
        from html import escape

        rows = "".join(f"<tr><td>{escape(s)}</td><td>{escape(t)}</td></tr>" for s, t in self.examples)
        parts = [
            f"<div><b>attnlab demo</b> ({escape(str(self.out_dir))}): exact match {100 * self.exact_match:.1f}%, "
            f"BLEU {self.bleu:.1f}; {self.steps} steps in {self.train_minutes:.1f} min "
            f"({self.tokens_per_s:,.0f} target tokens/s)</div>",
            f"<table>{rows}</table>",
        ]
        if self.heatmaps and Path(self.heatmaps[0]).is_file():
            data = base64.b64encode(Path(self.heatmaps[0]).read_bytes()).decode("ascii")
            parts.append(f'<img src="data:image/png;base64,{data}" alt="cross-attention" style="max-width:100%">')
        return "".join(parts)


def demo_splits(n_train: int, n_test: int = N_TEST, seed: int = 0):
    """The demo's generated pairs: ``n_train`` training, :data:`N_VALID` validation and ``n_test``
    held-out pairs, no source sentence in two of them (:func:`attnlab.data.tasks.make_splits`).

    Shape:
        output: ``TaskSplits`` of ``(source, target)`` string pairs.
    """
    return make_splits(TASK, n_train, N_VALID, n_test, seed=seed)


def demo_setup(
    out_dir: Path | None, *, minutes: float = MAX_MINUTES, target: float | None = TARGET, seed: int
) -> TranslationSetup:
    """A small pre-norm Transformer. English number words are few, so a 200-piece BPE makes each
    word one token (short sources: fast training); the target is read character by character so
    the heatmaps show which English word each kanji looks at.

    Training stops once validation exact match reaches ``target`` (None: no target), after three
    evaluations without improvement, or after ``minutes`` of training, whichever comes first."""
    return dataclasses.replace(
        PRESETS["small"],
        model_preset="demo",
        tokenizer="bpe",
        vocab_size=200,
        tgt_tokenizer="char",
        joint_vocab=False,
        max_tokens=2000,  # small batches: more updates per minute suit a 30k-pair task
        max_len=128,
        eval_sentences=N_VALID,  # every validation pair, so the target is judged on all of them
        label_smoothing=0.0,  # exact match is the goal here, not calibrated probabilities
        metric="exact_match",
        bleu_tokenize="char",
        train=TrainConfig(
            out_dir=None if out_dir is None else str(out_dir),
            epochs=100,
            time_budget_s=minutes * 60,  # a safety net: the target or the patience normally stops it first
            target=target,
            lr=3e-3,
            warmup_steps=100,
            # An evaluation (2,000 validation sentences, decoded greedily in batches) costs little
            # next to the 150 steps between two, and the run stops at most 150 steps after the
            # model reaches the target.
            eval_every_steps=150,
            # Exact match over 2,000 sentences moves in steps of 0.05%: three evaluations (450 steps)
            # without a new best mean it has stopped improving, not that the score wobbled.
            patience=3,
            log_every=25,
            seed=seed,
            # bf16 autocast only where a short probe of this model's steps on this machine measures it
            # faster than fp32 (attnlab.train.TrainingPrecision); the choice is cached per machine.
            precision="auto",
        ),
    )


def run_demo(
    out_dir: Path,
    *,
    minutes: float = MAX_MINUTES,
    target: float = TARGET,
    n_train: int = 30000,
    n_test: int = N_TEST,
    seed: int = 0,
    progress: bool = True,
    log=print,
) -> DemoReport:
    """Generate the task, train until validation exact match reaches ``target`` (or stops
    improving, or ``minutes`` of training run out), evaluate, translate the examples and draw heatmaps.

    Raises:
        ValueError: ``n_train`` or ``n_test`` below 1, ``minutes`` not a finite number > 0, or
            ``target`` not a number in [0, 1] (checked before anything is generated).
    """
    from ..viz import plot_attention, plot_attention_grid

    for name, value in (("n_train", n_train), ("n_test", n_test)):
        if value < 1:
            raise ValueError(f"{name} must be ≥ 1, got {value}")
    if not (math.isfinite(minutes) and minutes > 0):
        raise ValueError(f"minutes must be a finite number > 0, got {minutes}")
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0.0 <= target <= 1.0:
        raise ValueError(f"target must be a validation exact match in [0, 1] (0.997 = 99.7%), got {target!r}")
    out_dir = Path(out_dir)
    log(openmp.describe())  # the run's threads and OpenMP wait policy (attnlab/openmp.py)
    splits = demo_splits(n_train, n_test, seed)
    log(f"generated {len(splits.train):,} training pairs, e.g. {splits.train[0][0]!r} → {splits.train[0][1]!r}")
    setup = demo_setup(out_dir, minutes=minutes, target=target, seed=seed)
    setup.train.progress = progress
    # Running the demo again replaces its own earlier run (the folder with its report.json); any
    # other run in that folder is refused by the run-folder check, as for `attnlab train`.
    setup.train.overwrite = (out_dir / "report.json").is_file()
    log(
        f"training a {setup.model_preset} Transformer until validation exact match ≥ {target:.1%} "
        f"or it stops improving (safety cap: {minutes:g} min) …"
    )
    _, result, translator = train_translation(setup, splits.train, splits.valid)
    valid_em = result.best["exact_match"] if result.best else None
    if result.stop_reason == "time_budget":
        best = "none" if valid_em is None else f"{valid_em:.1%}"
        log(
            f"training hit the {minutes:g}-minute safety cap: the quality goal (validation exact match "
            f"≥ {target:.1%}) was not reached (best {best}); allow more time with --minutes"
        )
    scores = translator.evaluate([s for s, _ in splits.test], [t for _, t in splits.test], beam_size=1)
    results = translator.translate(EXAMPLES, beam_size=1, return_attention=True)
    heatmaps = []
    for i, r in enumerate(results):
        path = out_dir / f"cross_attention_{i}.png"
        plot_attention(
            r.cross_attention[-1].mean(0),
            r.src_tokens,
            r.tgt_tokens,
            path,
            title=textwrap.fill(r.source, 36) + f"\n→ {r.text}",
        )
        heatmaps.append(path)
    grid = out_dir / "cross_attention_grid.png"
    plot_attention_grid(results[0].cross_attention, results[0].src_tokens, results[0].tgt_tokens, grid)
    heatmaps.append(grid)
    report = DemoReport(
        out_dir,
        scores["exact_match"],
        scores["bleu"],
        result.train_seconds / 60,
        result.tokens_per_s,
        result.steps,
        [(r.source, r.text) for r in results],
        heatmaps,
        stop_reason=result.stop_reason,
        valid_exact_match=valid_em,
        target=target,
        max_minutes=minutes,
    )
    (out_dir / "report.json").write_text(
        json.dumps(
            {
                k: (str(v) if isinstance(v, Path) else [str(p) for p in v] if k == "heatmaps" else v)
                for k, v in dataclasses.asdict(report).items()
            },
            ensure_ascii=False,
            indent=2,
        )
    )
    return report


# --------------------------------------------------------------------------------------------
# The command line (attnlab.cli adds COMMANDS to its own, as it does those of each job in attnlab/cli/).
# --------------------------------------------------------------------------------------------


def demo_command(
    *,
    out: Path = Path("runs/demo"),
    minutes: float = MAX_MINUTES,
    target: float = TARGET,
    n_train: int = 30000,
    seed: int = 0,
) -> int:
    """The main job: train a small Transformer to translate numbers into Japanese, and show where it looks.

    Generates English number words → Japanese numerals ("three hundred forty-two thousand" →
    三十四万二千), trains with a progress bar until validation exact match reaches the target or
    stops improving, reports exact match and BLEU on held-out pairs, translates a few examples
    and writes cross-attention heatmaps.

    Args:
        out: output folder (model, log, heatmaps, report.json).
        minutes: safety cap on training time in minutes; training normally stops before, on quality.
        target: validation exact match at which training stops (0.997 = 99.7%, over 2,000 generated pairs).
        n_train: number of generated training pairs.
        seed: random seed of the data and the training.
    """
    report = run_demo(out, minutes=minutes, target=target, n_train=n_train, seed=seed)
    print()
    print(
        f"held-out exact match {100 * report.exact_match:.1f}%   BLEU {report.bleu:.1f}   "
        f"({report.steps} steps, {report.train_minutes:.1f} min, {report.tokens_per_s:,.0f} target tokens/s)"
    )
    print(f"training {report.stopped()}")
    for src, hyp in report.examples:
        print(f"  {src}  →  {hyp}")
    print(f'model:    {report.out_dir / "best"}   (try: attnlab translate --model {report.out_dir} "seven hundred")')
    print(f"heatmaps: {', '.join(str(p) for p in report.heatmaps)}")
    print(f"log:      {report.out_dir / 'log.jsonl'}   report: {report.out_dir / 'report.json'}")
    return 0


#: This experiment's commands by name (``attnlab demo``).
COMMANDS: dict[str, Callable[..., int]] = {"demo": demo_command}
