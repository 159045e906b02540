"""``attnlab experiment variants``: what do cheaper attention patterns cost a language model?

The lesson lists local attention and sparse attention (Longformer's sliding window) as ways to cut
attention's cost and asks how they affect performance. This experiment measures it:

1. one text (tinyshakespeare by default), split by position into training and validation parts,
   one character tokenizer;
2. the same small GPT (same preset, same seed, hence the same initial weights and parameter
   count) trained once per attention variant — full attention, causal sliding windows of a few
   sizes, Longformer's global + window (the first positions global), and on request the exact
   chunked attention — each for the same number of optimizer steps (``steps``) or, without one,
   for the same training-time budget (``minutes``);
3. per variant: the best validation loss, training tokens per second, the peak resident memory of
   the run, the parameter count, and the validation-loss curve against training time;
4. a report folder: ``report.md`` (the table), ``variants.csv``, ``results.json`` and
   ``variants.png`` (loss against time; throughput and memory).

A variant is written ``NAME[:WINDOW[:N_GLOBAL]]``, e.g. ``full``, ``sliding_window:64``,
``global_window:16:4``, ``chunked`` (names of :data:`attnlab.variants.ATTENTION_VARIANTS`).

Additive (Bahdanau) attention is not among them: it scores with its own parameters
(``W_q, W_k, v``) and an ``(T, S, A)`` hidden tensor, so it is not a drop-in replacement for the
dot product inside multi-head attention; ``attnlab experiment bottleneck`` compares it where it
belongs, in an RNN encoder–decoder.

Shape:
    no tensors cross this module's interface: a text in, files and a :class:`VariantsReport` out.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..models.config import check_fields
from ..models.gpt import gpt_config
from ..train import PRECISIONS, TrainConfig
from ..variants import ATTENTION_VARIANTS, AttentionSpec

__all__ = [
    "DEFAULT_VARIANTS",
    "VariantsSettings",
    "VariantResult",
    "VariantsReport",
    "parse_variant",
    "run_variants",
    "train_variant",
    "write_report",
]

#: The default contestants: full attention, two local windows, and Longformer's global + window.
DEFAULT_VARIANTS = ("full", "sliding_window:16", "sliding_window:64", "global_window:16:4")


@dataclass
class VariantsSettings:
    """Everything that defines the comparison besides the text."""

    variants: tuple[str, ...] = DEFAULT_VARIANTS  # NAME[:WINDOW[:N_GLOBAL]] each
    minutes: float = 15.0  # wall-clock budget of the whole run; each variant trains 80% of an equal share
    # optimizer steps per variant: when set, every variant trains exactly this many and `minutes` is not used
    steps: int | None = None
    model_preset: str = "bench-small"  # attnlab.models.gpt.PRESETS key (the same model for every variant)
    block_size: int = 256  # tokens per training sequence (windows are only local if smaller than this)
    batch_size: int = 16  # sequences per batch
    eval_tokens: int = 32768  # validation tokens per evaluation (the same ones every time)
    evals: int = 6  # evaluations per variant, spread evenly over its steps (the loss curve's points)
    lr: float = 2e-3  # peak learning rate (AdamW, warm-up then inverse square root decay)
    seed: int = 0  # data order and initial weights (the same for every variant)
    progress: bool = True  # show a progress bar per variant
    # the precision of every variant's training steps (TrainConfig.precision: "fp32", "bf16" or "auto");
    # None: fp32, like for like. The same for every variant, so their speeds compare.
    precision: str | None = None

    def __post_init__(self) -> None:
        check_fields(self, positive=("minutes", "steps", "block_size", "batch_size", "eval_tokens", "evals", "lr"))
        if self.precision is not None and self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS} or None, got {self.precision!r}")


@dataclass
class VariantResult:
    variant: str  # as given, e.g. "sliding_window:64"
    attention: str  # repr of the AttentionSpec the blocks used
    parameters: int  # trainable parameters (the variants add none)
    best_valid_loss: float  # lowest validation loss (nats per character)
    final_valid_loss: float  # validation loss at the end of the budget
    tokens_per_s: float  # training tokens per second (evaluation excluded)
    train_seconds: float  # time spent training
    steps: int  # optimizer steps taken
    peak_mib: float  # peak resident memory of the run above the memory before it (MiB)
    curve: list[tuple[float, float]] = field(default_factory=list)  # (train seconds, valid loss)
    curve_steps: list[int] = field(default_factory=list)  # the optimizer step of each point of `curve`


@dataclass
class VariantsReport:
    out_dir: Path
    results: list[VariantResult]
    wall_seconds: float

    def _repr_html_(self) -> str:
        """Jupyter: one row per variant (loss, speed and memory against full attention), then the
        report's figure (variants.png)."""
        import base64
        from html import escape

        full = next((r for r in self.results if r.variant == "full"), None)
        head = "".join(
            f"<th>{h}</th>"
            for h in ("variant", "best valid loss", "Δ vs full", "tokens/s", "speed vs full", "peak MiB", "steps")
        )
        rows = []
        for r in self.results:
            delta = "—" if full is None else f"{r.best_valid_loss - full.best_valid_loss:+.3f}"
            speed = "—" if full is None or not full.tokens_per_s else f"{r.tokens_per_s / full.tokens_per_s:.2f}×"
            cells = (
                r.variant,
                _fmt(r.best_valid_loss),
                delta,
                f"{r.tokens_per_s:,.0f}",
                speed,
                f"{r.peak_mib:.0f}",
                r.steps,
            )
            rows.append("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in cells) + "</tr>")
        parts = [f"<table><tr>{head}</tr>{''.join(rows)}</table>", f"<div>whole run {self.wall_seconds:.0f} s</div>"]
        figure = Path(self.out_dir) / "variants.png"
        if figure.is_file():
            data = base64.b64encode(figure.read_bytes()).decode("ascii")
            parts.append(f'<img src="data:image/png;base64,{data}" alt="variants" style="max-width:100%">')
        return "".join(parts)


def parse_variant(text: str) -> AttentionSpec:
    """``NAME[:WINDOW[:N_GLOBAL]]`` → the :class:`AttentionSpec` a GPT config gets (errors name the part)."""
    parts = text.split(":")
    name = parts[0]
    if name not in ATTENTION_VARIANTS:
        raise ValueError(f"variant {text!r}: unknown attention {name!r}; choose from {sorted(ATTENTION_VARIANTS)}")
    if len(parts) > 3:
        raise ValueError(f"variant {text!r} is not NAME[:WINDOW[:N_GLOBAL]]")
    try:
        numbers = [int(p) for p in parts[1:]]
    except ValueError:
        raise ValueError(f"variant {text!r}: WINDOW and N_GLOBAL must be integers") from None
    window = numbers[0] if numbers else None
    n_global = numbers[1] if len(numbers) > 1 else 0
    return AttentionSpec.from_config(name, window, n_global)


def _config_fields(text: str) -> dict:
    parse_variant(text)  # validate first
    parts = text.split(":")
    fields: dict = {"attention": parts[0]}
    if len(parts) > 1:
        fields["window"] = int(parts[1])
    if len(parts) > 2:
        fields["n_global"] = int(parts[2])
    return fields


def _reset_peak_rss() -> None:
    """Reset the process's RSS high-water mark to its current RSS (Linux); elsewhere a no-op."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _peak_rss_bytes() -> int:
    try:
        import resource
    except ImportError:  # not on POSIX
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def run_variants(text: str, out_dir: str | Path, settings: VariantsSettings | None = None) -> VariantsReport:
    """Train the same GPT once per attention variant for equal steps (``settings.steps``) or, without
    them, equal time; write the report folder."""
    settings = settings or VariantsSettings()
    if not settings.variants:
        raise ValueError("no variants to compare")
    if settings.minutes <= 0:
        raise ValueError(f"minutes must be > 0, got {settings.minutes}")
    fields = [_config_fields(v) for v in settings.variants]  # every spec is checked before any training
    for v, f in zip(settings.variants, fields):
        if f.get("window") is not None and f["window"] >= settings.block_size:
            raise ValueError(
                f"variant {v!r}: window {f['window']} ≥ block_size {settings.block_size} is full attention"
            )
        # The model of each variant is checked here, not in its training process: an unknown
        # preset or a block longer than the context is one clear error before any training.
        config = gpt_config(settings.model_preset, **{**f, "vocab_size": 128})
        if settings.block_size > config.n_positions:
            raise ValueError(f"block_size={settings.block_size} exceeds the model's n_positions={config.n_positions}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        text_path = Path(tmp) / "text.txt"
        text_path.write_text(text, encoding="utf-8")
        for i, (variant, model_fields) in enumerate(zip(settings.variants, fields)):
            # A fresh Python process per variant: its peak memory is its own, not what earlier
            # runs left in the allocator, and nothing carries over between contestants.
            job, answer = Path(tmp) / f"job{i}.json", Path(tmp) / f"result{i}.json"
            job.write_text(json.dumps({"variant": variant, "fields": model_fields, "text": str(text_path),
                                       "settings": dataclasses.asdict(settings), "answer": str(answer)}))  # fmt: skip
            proc = subprocess.run([sys.executable, "-m", __name__, str(job)])
            if proc.returncode != 0 or not answer.is_file():
                raise RuntimeError(f"variant {variant!r}: the training process failed (exit code {proc.returncode})")
            results.append(VariantResult(**json.loads(answer.read_text())))
    report = VariantsReport(out, results, time.perf_counter() - start)
    write_report(report, settings)
    return report


def _budget_s(settings: VariantsSettings) -> float:
    return 0.8 * settings.minutes * 60 / len(settings.variants)


def _budget_text(settings: VariantsSettings) -> str:
    """Each variant's budget in words: its steps, or its seconds without a step budget."""
    return f"{settings.steps} optimizer steps" if settings.steps is not None else f"{_budget_s(settings):.0f} s"


def train_variant(variant: str, model_fields: dict, text: str, settings: VariantsSettings) -> VariantResult:
    """Train one variant in this process and measure it: the GPT of ``settings`` with the attention
    of ``model_fields`` (:func:`parse_variant`'s fields), for ``settings.steps`` optimizer steps or
    else its share of ``settings.minutes``. :func:`run_variants` runs it in a fresh process per
    variant.

    Shape:
        no tensors; ``text`` is the corpus (the last tenth is the validation text).
    """
    from ..recipes.lm import LMSetup, train_lm

    by_steps = settings.steps is not None
    train = TrainConfig(
        epochs=1000, max_steps=settings.steps, time_budget_s=None if by_steps else _budget_s(settings),
        lr=settings.lr, warmup_steps=50, schedule="inverse_sqrt",
        betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1, clip_norm=1.0, seed=settings.seed,
        eval_every_steps=None, log_every=50, progress=settings.progress,
        # like for like: every variant in the same arithmetic (fp32 unless a caller asks), whatever a probe says
        precision="fp32" if settings.precision is None else settings.precision,
    )  # fmt: skip
    setup = LMSetup(
        model_preset=settings.model_preset, model_overrides=model_fields, tokenizer="char",
        block_size=settings.block_size, batch_size=settings.batch_size, eval_tokens=settings.eval_tokens,
        train=train,
    )  # fmt: skip
    # With a step budget every variant evaluates at the same steps (its curve has the same points);
    # with a time budget only, every variant evaluates about `evals` times over its own budget.
    if by_steps:
        every = _steps_per_eval_of_steps(settings.steps, settings.evals)
    else:
        every = _steps_per_eval(setup, _budget_s(settings), settings.evals)
    setup.train = dataclasses.replace(train, eval_every_steps=every)
    _reset_peak_rss()
    base = _peak_rss_bytes()
    model, result, _ = train_lm(setup, text)
    peak = max(_peak_rss_bytes() - base, 0)
    # one point per evaluated step (the run's final evaluation may repeat the last scheduled one)
    evaluations = list({r["step"]: r for r in result.history if "eval" in r}.values())
    curve = [(r["train_seconds"], r["eval"]["loss"]) for r in evaluations]
    return VariantResult(
        variant=variant,
        attention=repr(model.blocks[0].self_attn.attention),
        parameters=sum(p.numel() for p in model.parameters() if p.requires_grad),
        best_valid_loss=min(loss for _, loss in curve) if curve else math.nan,
        final_valid_loss=curve[-1][1] if curve else math.nan,
        tokens_per_s=result.tokens_per_s,
        train_seconds=result.train_seconds,
        steps=result.steps,
        peak_mib=peak / 2**20,
        curve=curve,
        curve_steps=[r["step"] for r in evaluations],
    )


def _steps_per_eval_of_steps(steps: int, evals: int) -> int:
    """Optimizer steps between evaluations for a run of ``steps`` steps: ``evals`` evaluations
    spread evenly over them (the last at the end of the run), the same for every variant."""
    return max(1, math.ceil(steps / max(evals, 1)))


def _steps_per_eval(setup, budget: float, evals: int) -> int:
    """Optimizer steps between evaluations so that about ``evals`` happen within ``budget`` (a
    time budget only: with ``steps`` the interval is :func:`_steps_per_eval_of_steps`), from the
    time of a few training steps of this variant on random tokens."""
    import torch

    from ..models.gpt import GPT

    vocab = 128  # about a character vocabulary; the step time hardly depends on it
    config = gpt_config(setup.model_preset, **{**setup.model_overrides, "vocab_size": vocab})
    model = GPT(config)
    gen = torch.Generator().manual_seed(0)
    batch = torch.randint(0, vocab, (setup.batch_size, setup.block_size), generator=gen)  # (B, T)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        model(batch, labels=batch).loss.backward()
        opt.step()
        opt.zero_grad()
        times.append(time.perf_counter() - t0)
    step_s = min(times[1:])  # the first step pays one-off costs
    return max(1, int(budget / step_s / max(evals, 1)))


def _fmt(x: float, digits: int = 3) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def write_report(report: VariantsReport, settings: VariantsSettings) -> None:
    """The report folder of ``report.out_dir``: ``variants.csv``, ``results.json``, ``report.md``
    and the curves in ``variants.png``.

    Shape:
        no tensors.
    """
    out = report.out_dir
    rows = report.results
    full = next((r for r in rows if r.variant == "full"), None)
    header = ["variant", "attention", "best valid loss", "final valid loss", "tokens/s", "peak MiB",
              "parameters", "steps", "train s"]  # fmt: skip
    with open(out / "variants.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        for r in rows:
            w.writerow([r.variant, r.attention, r.best_valid_loss, r.final_valid_loss, round(r.tokens_per_s, 1),
                        round(r.peak_mib, 1), r.parameters, r.steps, round(r.train_seconds, 1)])  # fmt: skip
    (out / "results.json").write_text(
        json.dumps(
            {
                "settings": dataclasses.asdict(settings),
                "wall_seconds": report.wall_seconds,
                "results": [dataclasses.asdict(r) for r in rows],
            },
            indent=2,
        ),  # fmt: skip
        encoding="utf-8",
    )
    lines = [
        "# Attention variants on a character-level GPT",
        "",
        f"Same model (`{settings.model_preset}`, {rows[0].parameters:,} parameters for every variant), same "
        f"seed and data, block size {settings.block_size}, batch {settings.batch_size}; each variant trained "
        f"for {_budget_text(settings)} in a fresh process. Validation loss in nats per character on the "
        "last 10% of the text.",
        "",
        "| variant | best valid loss | Δ vs full | tokens/s | speed vs full | peak MiB | steps |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        delta = "—" if full is None else f"{r.best_valid_loss - full.best_valid_loss:+.3f}"
        speed = "—" if full is None or not full.tokens_per_s else f"{r.tokens_per_s / full.tokens_per_s:.2f}×"
        lines.append(f"| `{r.variant}` | {_fmt(r.best_valid_loss)} | {delta} | {r.tokens_per_s:,.0f} | {speed} | "
                     f"{r.peak_mib:.0f} | {r.steps} |")  # fmt: skip
    lines += [
        "",
        "Peak MiB: the growth of the process's resident memory during that variant's run (Linux "
        "high-water mark, reset before each run): model, optimizer state, activations and temporaries.",
        "",
        f"Whole run: {report.wall_seconds / 60:.1f} min. Curves: `variants.png`; numbers: `variants.csv`, "
        "`results.json`.",
    ]
    (out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _plot(rows, out / "variants.png")


def _plot(rows: Sequence[VariantResult], path: Path) -> None:
    from ..viz import figure_path, new_figure, save_figure

    path = figure_path(path)
    fig = new_figure(12, 4.5)
    ax_l, ax_s = fig.subplots(1, 2)
    for i, r in enumerate(rows):
        if r.curve:
            xs, ys = zip(*r.curve)
            ax_l.plot(xs, ys, marker="o", color=f"C{i}", label=r.variant)
    ax_l.set_xlabel("training time (s)")
    ax_l.set_ylabel("validation loss (nats/char)")
    ax_l.grid(True, alpha=0.3)
    ax_l.legend(fontsize=8)
    names = [r.variant for r in rows]
    bars = ax_s.bar(names, [r.tokens_per_s for r in rows], color=[f"C{i}" for i in range(len(rows))])
    for bar, r in zip(bars, rows):
        ax_s.annotate(f"{r.peak_mib:.0f} MiB", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                      ha="center", va="bottom", fontsize=8)  # fmt: skip
    ax_s.set_ylabel("training tokens/s (label: peak memory)")
    ax_s.tick_params(axis="x", labelrotation=20, labelsize=8)
    save_figure(fig, path)


# --------------------------------------------------------------------------------------------
# The command line (attnlab.cli adds COMMANDS to its own, as it does those of each job in attnlab/cli/).
# --------------------------------------------------------------------------------------------


def variants_command(
    *,
    out: Path = Path("runs/variants"),
    minutes: float = 15.0,
    steps: int | None = None,
    text: Path = Path("../shared/data/tinyshakespeare/input.txt"),
    variants: list[str] | None = None,
    preset: str = "bench-small",
    block_size: int = 256,
    batch_size: int = 16,
    seed: int = 0,
    progress: bool = True,
) -> int:
    """Attention variants on a GPT: validation loss, tokens/s, peak memory for the same training time or steps.

    Trains the same character-level GPT (same size, seed and data) once per attention variant,
    each in a fresh process for an equal share of the time budget, or for the same number of
    optimizer steps with --steps, and writes OUT/report.md (the
    table), variants.csv, results.json and variants.png (validation loss against training time;
    throughput and peak memory).

    Args:
        out: report folder.
        minutes: wall-clock budget of the whole run; each variant trains for 80% of an equal share.
        steps: optimizer steps per variant instead of a time budget (every variant then evaluates
            at the same steps; --minutes is not used).
        text: training text (the last 10% is the validation split).
        variants: NAME[:WINDOW[:N_GLOBAL]] each, e.g. full sliding_window:64 global_window:16:4 chunked
            (default: full sliding_window:16 sliding_window:64 global_window:16:4).
        preset: GPT size (attnlab.models.gpt.PRESETS).
        block_size: tokens per training sequence.
        batch_size: sequences per batch.
        seed: data order and initial weights, the same for every variant.
        progress: show a progress bar per variant.
    """
    from ..data.corpus import read_text

    settings = VariantsSettings(
        variants=tuple(variants or DEFAULT_VARIANTS),
        minutes=minutes,
        steps=steps,
        model_preset=preset,
        block_size=block_size,
        batch_size=batch_size,
        seed=seed,
        progress=progress,
    )
    report = run_variants(read_text(text), out, settings)
    print((report.out_dir / "report.md").read_text(encoding="utf-8"))
    print(f"report: {report.out_dir / 'report.md'}  ({report.wall_seconds / 60:.1f} min)")
    return 0


#: This experiment's commands by name (``attnlab experiment variants``).
COMMANDS: dict[str, Callable[..., int]] = {"experiment variants": variants_command}


def _worker(job_path: str) -> None:
    """Entry of the per-variant process: ``python -m attnlab.experiments.variants JOB.json``."""
    job = json.loads(Path(job_path).read_text())
    settings = VariantsSettings(**{**job["settings"], "variants": tuple(job["settings"]["variants"])})
    text = Path(job["text"]).read_text(encoding="utf-8")
    result = train_variant(job["variant"], job["fields"], text, settings)
    Path(job["answer"]).write_text(json.dumps(dataclasses.asdict(result)))


if __name__ == "__main__":
    _worker(sys.argv[1])
