"""``attnlab demo``: the project's main job, on data the package generates itself.

It generates the number-translation task (English number words → Japanese numerals, e.g.
"three hundred forty-two thousand" → 三十四万二千), trains a small Transformer with a progress bar,
reports exact match and BLEU on held-out pairs, translates a few examples and writes
cross-attention heatmaps, so a learner sees *where the model looks* when it writes each kanji.
"""

from __future__ import annotations

import dataclasses
import json
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path

from ..data.tasks import make_splits
from ..recipes.translate import RECIPES, TranslationSetup, train_translation
from ..train import TrainConfig

#: Sentences translated at the end of the demo (not in any split: checked against the test set).
EXAMPLES = [
    "three hundred forty-two thousand",
    "twenty million five hundred",
    "nine thousand nine hundred ninety-nine",
    "one billion two hundred thirty-four million five hundred sixty-seven thousand eight hundred ninety",
]


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


def demo_setup(out_dir: Path | None, *, minutes: float, seed: int) -> TranslationSetup:
    """A small pre-norm Transformer. English number words are few, so a 200-piece BPE makes each
    word one token (short sources: fast training); the target is read character by character so
    the heatmaps show which English word each kanji looks at."""
    return dataclasses.replace(
        RECIPES["small"],
        model_preset="demo",
        tokenizer="bpe",
        vocab_size=200,
        tgt_tokenizer="char",
        joint_vocab=False,
        max_tokens=2000,  # small batches: more updates per minute suit a 30k-pair task
        max_len=128,
        eval_sentences=300,
        label_smoothing=0.0,  # exact match is the goal here, not calibrated probabilities
        metric="exact_match",
        bleu_tokenize="char",
        train=TrainConfig(
            out_dir=None if out_dir is None else str(out_dir),
            epochs=100,
            time_budget_s=minutes * 60,
            lr=3e-3,
            warmup_steps=100,
            eval_every_steps=150,
            patience=2,  # stop once validation exact match has stopped improving (it reaches 100%)
            log_every=25,
            seed=seed,
        ),
    )


def run_demo(
    out_dir: Path,
    *,
    minutes: float = 2.0,
    n_train: int = 30000,
    n_test: int = 500,
    seed: int = 0,
    progress: bool = True,
    log=print,
) -> DemoReport:
    """Generate the task, train, evaluate, translate the examples and draw heatmaps.

    Raises:
        ValueError: ``n_train`` or ``n_test`` below 1, or ``minutes`` not a finite number > 0
            (checked before anything is generated).
    """
    from ..viz import plot_attention, plot_attention_grid

    for name, value in (("n_train", n_train), ("n_test", n_test)):
        if value < 1:
            raise ValueError(f"{name} must be ≥ 1, got {value}")
    if not (math.isfinite(minutes) and minutes > 0):
        raise ValueError(f"minutes must be a finite number > 0, got {minutes}")
    out_dir = Path(out_dir)
    splits = make_splits("numbers-en-ja", n_train, 300, n_test, seed=seed)
    log(f"generated {len(splits.train):,} training pairs, e.g. {splits.train[0][0]!r} → {splits.train[0][1]!r}")
    setup = demo_setup(out_dir, minutes=minutes, seed=seed)
    setup.train.progress = progress
    # Running the demo again replaces its own earlier run (the folder with its report.json); any
    # other run in that folder is refused by the run-folder check, as for `attnlab train`.
    setup.train.overwrite = (out_dir / "report.json").is_file()
    log(f"training a {setup.model_preset} Transformer for up to {minutes:g} min …")
    _, result, translator = train_translation(setup, splits.train, splits.valid)
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
