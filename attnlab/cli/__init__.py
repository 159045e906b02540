"""The ``attnlab`` command line.

Each subcommand is a plain typed Python function. Its signature becomes the options (a parameter
without a default is a positional argument; ``bool`` defaults become ``--flag`` / ``--no-flag``;
``Literal[...]`` becomes a choice) and its docstring becomes the ``--help`` text: the summary line,
and one line per argument from the ``Args:`` section.

Each job's commands live in this package, one module per recipe (:mod:`attnlab.cli.translate`,
:mod:`attnlab.cli.lm`, ...), listed in its ``COMMANDS``: ``train <job>`` returns a
:class:`~attnlab.recipes.TrainJob`, which the job's descriptor (:class:`attnlab.recipes.Job`, in
:data:`JOBS`) turns into a setup with the shared training options of :func:`train_options`; the
inference commands (``translate``, ``generate``, ...) load a model and print its results. The
experiments' commands (``demo``, ``experiment ...``) are defined beside each experiment (its
module's ``COMMANDS``, :mod:`attnlab.experiments`). The few commands that belong to neither are
registered here with :func:`command`; their bodies import their heavy modules lazily. This module
only parses the command line, runs the command and reports errors.

Errors: :func:`main` is the one error boundary. A failure the user can fix (a missing or wrong
file, a bad setting, a model folder that does not load; see :func:`_expected`) is one line,
``attnlab: error: …``, and exit code 2; Ctrl-C stops quietly with 130; anything else is a bug,
reported in one line that says so, exit code 1. ``--debug`` (or ``ATTNLAB_DEBUG=1``) shows the
traceback of any of them instead.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from ..experiments import bottleneck, demo, variants
from ..recipes import Job, TrainJob
from ..recipes.caption import CAPTION_JOB
from ..recipes.classify import CLASSIFY_JOB
from ..recipes.graph import GAT_JOB
from ..recipes.lm import LM_JOB, MLM_JOB
from ..recipes.qa import QA_JOB
from ..recipes.summarize import SUMMARIZE_JOB
from ..recipes.translate import TRANSLATE_JOB
from ..recipes.vision import VIT_JOB
from . import caption, classify, graph, lm, qa, summarize, translate, vision

#: Every job whose commands the CLI makes (``attnlab train NAME`` and its inference commands).
JOBS: tuple[Job, ...] = (
    TRANSLATE_JOB,
    LM_JOB,
    MLM_JOB,
    CLASSIFY_JOB,
    VIT_JOB,
    CAPTION_JOB,
    GAT_JOB,
    SUMMARIZE_JOB,
    QA_JOB,
)

#: Every command by name ("train translate" nests under "train"): the jobs' own (this package's
#: modules), the experiments' (``demo``, ``experiment bottleneck``, ``experiment variants``), then
#: those of @command.
COMMANDS: dict[str, Callable] = {
    name: fn
    for module in (translate, lm, classify, vision, caption, graph, summarize, qa, demo, bottleneck, variants)
    for name, fn in module.COMMANDS.items()
}

#: The job each ``train <job>`` command runs.
TRAIN_JOBS: dict[str, Job] = {f"train {job.name}": job for job in JOBS}


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
    precision: Literal["fp32", "bf16", "auto"] | None = None,
    grad_accum: int | None = None,
    compile: bool | None = None,
    strategy: Literal["ddp", "fsdp"] | None = None,
    dist_timeout: float | None = None,
    overwrite: bool | None = None,
    target: float | None = None,
    threads: int | None = None,
) -> dict:
    """The options every `attnlab train ...` command takes, added by the CLI itself.

    They are set on the recipe's TrainConfig (``dataclasses.replace``, after the user's own
    --overrides), so each trainer needs no code for them; under torchrun the command also joins
    the process group first (see attnlab.distributed), which resolves --device once.

    Args:
        device: auto (CUDA, then MPS, then CPU), cpu, cuda or mps; under torchrun each process uses cuda:LOCAL_RANK.
        precision: fp32, bf16 autocast (matrix products in bfloat16; weights and optimizer state stay fp32), or auto (bf16 only where a short probe on this machine shows it faster).
        grad_accum: batches whose gradients are summed into one optimizer step (default: the recipe's).
        compile: torch.compile the model for the training steps (off unless given).
        strategy: with several processes: ddp replicates the model on each, fsdp shards it (FSDP2).
        dist_timeout: seconds a process waits for the others before stopping with an error (default 1800).
        overwrite: replace a run already in OUT (its log.jsonl, last/, best/) instead of stopping; not with --resume.
        target: stop once the validation metric that picks the best model reaches this value (at or above it;
            at or below it for a loss). The metric is the job's, on the scale log.jsonl shows: BLEU 0-100 for
            translate, accuracy 0-1 for classify and vit, loss for lm and mlm.
        threads: CPU threads of the training steps. By default as many as the cores other processes leave
            free, re-checked every 2 s (fewer while another job shares the cores); N fixes N, as OMP_NUM_THREADS=N does.
    """
    return {name: value for name, value in locals().items() if value is not None}


_TRAIN_OPTIONS = tuple(inspect.signature(train_options).parameters)


def _run_training(descriptor: Job, job: TrainJob, options: dict) -> None:
    """Run a `train ...` command's job inside a distributed session, with the shared options on its TrainConfig."""
    from ..distributed import DEFAULT_TIMEOUT_S, session
    from ..runs import check_run_folder

    timeout = options.pop("dist_timeout", DEFAULT_TIMEOUT_S)
    with session(options.pop("device"), timeout_s=timeout) as ctx:
        setup = descriptor.setup(job, {"device": ctx.device, **options})
        train = getattr(setup, "train", None)  # the GAT trains in its own loop and keeps no run folder
        if train is not None and hasattr(train, "overwrite"):
            # Before any data is read: a folder holding another run is refused, --resume needs a checkpoint.
            check_run_folder(train.out_dir, job.resume, train.overwrite)
        job.run(setup)


def _add_debug_flag(parser: argparse.ArgumentParser, default) -> None:
    parser.add_argument(
        "--debug",
        action="store_true",
        default=default,
        help="show the full traceback of an error (also: environment variable ATTNLAB_DEBUG=1)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attnlab",
        description="attnlab: attention and the Transformer, from softmax(QKᵀ/√d_k)·V to a CPU-trained translator.",
    )
    _add_debug_flag(parser, False)
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
            sub = top.add_parser(
                name, help=summary, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
            )
        else:
            group, leaf = words
            if group not in groups:
                group_parsers[group] = top.add_parser(group, help=f"{group} subcommands")
                groups[group] = group_parsers[group].add_subparsers(dest="subcommand", metavar="SUBCOMMAND")
                groups[group].required = True
            sub = groups[group].add_parser(
                leaf, help=summary, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
            )
        _add_function_arguments(sub, fn)
        _add_debug_flag(sub, argparse.SUPPRESS)  # `attnlab CMD ... --debug` as well as `attnlab --debug CMD ...`
        if words[0] == "train":
            clash = [p for p in inspect.signature(fn).parameters if p in _TRAIN_OPTIONS]
            if clash:
                raise TypeError(
                    f"command {name!r} declares {clash}, which every train command gets from "
                    "attnlab.cli.train_options; drop them from its signature"
                )
            _add_function_arguments(sub, train_options)
        # argparse before Python 3.13 reads a value such as "-1,0" (a vector whose first number is
        # negative) as an unknown option; treat anything that starts like a negative number as a value.
        sub._negative_number_matcher = re.compile(r"^-\.?\d")
        sub.set_defaults(_fn=fn, _train=words[0] == "train", _job=TRAIN_JOBS.get(name))
    return parser


def _check_options(fn: Callable, args: dict) -> None:
    """The checks every command gets before its body runs: an ``out`` folder that is not a file,
    and a ``device`` this machine has (the one device check of training, :func:`attnlab.distributed.resolve_device`)."""
    out = args.get("out")
    if isinstance(out, Path) and out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: a file of that name exists; the output must be a folder")
    if isinstance(args.get("device"), str):
        from ..distributed import resolve_device

        args["device"] = resolve_device(args["device"])


def _expected(err: BaseException) -> bool:
    """Whether ``err`` is a failure the user can fix rather than a bug: a file missing, unreadable
    or of the wrong kind, a bad setting, a model folder that does not load, a missing optional package."""
    if isinstance(err, (OSError, ValueError, TypeError, EOFError)):  # (JSON and Unicode errors are ValueErrors)
        return True
    if isinstance(err, ImportError):  # an optional dependency ("pip install ..."), not one of attnlab's modules
        return not (err.name or "").startswith("attnlab")
    import pickle

    if isinstance(err, pickle.UnpicklingError):
        return True
    if "torch" in sys.modules:
        import torch

        if isinstance(err, torch.OutOfMemoryError):
            return True
        if isinstance(err, RuntimeError) and "PytorchStreamReader" in str(err):  # a damaged torch.save file
            return True
    if "safetensors" in sys.modules:
        from safetensors import SafetensorError

        return isinstance(err, SafetensorError)
    return False


def _one_line(err: BaseException) -> str:
    if isinstance(err, OSError) and err.filename is not None and err.strerror:
        text = f"{err.filename}: {err.strerror}" + (f" (to {err.filename2})" if err.filename2 is not None else "")
    else:
        text = str(err) or type(err).__name__
    return " ".join(text.split())


def main(argv: list[str] | None = None) -> int:
    """Run one command line; returns the exit code (0, 2 for an expected error, 1 for a bug, 130 for Ctrl-C)."""
    parser = build_parser()
    args = vars(parser.parse_args(argv))
    debug = args.pop("debug", False) or os.environ.get("ATTNLAB_DEBUG", "").strip() not in ("", "0")
    fn, descriptor = args.pop("_fn"), args.pop("_job")
    args.pop("command", None)
    args.pop("subcommand", None)
    options = train_options(**{name: args.pop(name) for name in _TRAIN_OPTIONS}) if args.pop("_train") else None
    positional = [
        args.pop(name)
        for name, p in inspect.signature(fn).parameters.items()
        if p.kind is inspect.Parameter.POSITIONAL_ONLY
    ]
    try:
        _check_options(fn, args)
        result = fn(*positional, **args)
        if descriptor is not None:
            result = _run_training(descriptor, result, options)
    except KeyboardInterrupt:
        if debug:
            raise
        return 130
    except Exception as err:
        if debug:
            raise
        if _expected(err):
            print(f"attnlab: error: {_one_line(err)}", file=sys.stderr)
            return 2
        print(
            f"attnlab: internal error, a bug in attnlab: {type(err).__name__}: {_one_line(err)} — run again with "
            "--debug (or ATTNLAB_DEBUG=1) to see the traceback, and please report it",
            file=sys.stderr,
        )
        return 1
    return int(result or 0)


# --------------------------------------------------------------------------------------------
# The commands that belong to no job and no experiment.
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
    from ..explain import explain

    print(explain(scores=scores, query=query, keys=keys, values=values, d_k=d_k, scale=scale, lang=lang, plot=plot))
    return 0


@command("explore")
def explore_cmd(
    *,
    model: list[Path] | None = None,
    host: str | None = None,
    port: int = 8000,
    max_text_chars: int = 400,
    max_concurrent: int = 2,
    allow_host: list[str] | None = None,
    classroom: bool = False,
    precision: Literal["auto", "fp32", "bf16"] = "auto",
) -> int:
    """Open the explorer: a local web app with the lesson, the attention playground, masks and attention maps.

    Serves on http://HOST:PORT/ with no network access needed: the lesson (授業, nine sections in
    Japanese and English, opening in the browser's language), the "three books" playground (move
    the scores and d_k, watch the scaling, the softmax weights and the mixed output change), the
    masks page, and the model page showing every layer's and head's attention for a sentence you
    type. Only the models named here can be run; without --model, every shipped model that is
    installed (ja-en, en-ja, demo, ..., minilm) is offered, with example sentences.

    Args:
        model: checkpoint folders or shipped model names to offer on the model page (default: every shipped model installed).
        host: address to listen on (default 127.0.0.1, or with --classroom every interface);
            keep the loopback unless others must reach it. A --host given always wins.
        port: TCP port to listen on.
        max_text_chars: longest sentence the model page accepts.
        max_concurrent: model runs at once (1 serves long translations faster, 2 a class's short widgets); up to 64 further requests wait in a queue, at most 30 s
            each; beyond that, or after the wait, they get 429 with Retry-After and the page tries
            again by itself, saying it is busy.
        allow_host: further host names the explorer answers to (besides the bound address and
            localhost), e.g. a name that points at this machine; "*" turns the Host check off.
        classroom: serve a class: listen on every interface (unless --host names an address),
            print the addresses students type (and the one for this machine's own browser) and
            show the first as a QR code on the lesson's index.
        precision: the numbers the translators and GPTs run in: auto (bf16 where this CPU computes it natively,
            a short measurement shows it faster and the model card allows it; else fp32), fp32 or bf16.
    """
    from ..web.app import serve
    from ..web.classroom import Classroom
    from ..web.models import load_explorer_model, shipped_explorer_models
    from ..web.security import Limits, check_address

    limits = Limits(max_text_chars=max_text_chars, max_concurrent=max_concurrent)
    if host is None and not classroom:
        host = "127.0.0.1"
    check_address(host if host is not None else "0.0.0.0", port, allow_host or ())
    if model:
        models = [load_explorer_model(path, precision) for path in model]
    else:
        models, missing = shipped_explorer_models(precision)
        if missing:
            print(
                f"attnlab: note: not installed, so not offered: {', '.join(missing)} (see `make models`)",
                file=sys.stderr,
            )
    host, room = Classroom.serving(host, port) if classroom else (host, None)
    everywhere = host in ("0.0.0.0", "::")
    loopback = host in ("127.0.0.1", "localhost", "::1")
    if everywhere:
        print(f"attnlab: note: listening on every interface ({host}), reachable from other machines", file=sys.stderr)
    elif not loopback:
        print(f"attnlab: note: listening on {host}, reachable from other machines", file=sys.stderr)
    # A wildcard address (0.0.0.0) is not one anybody can type: this machine's browser uses the loopback.
    own = ("[::1]" if host == "::" else "127.0.0.1") if everywhere else ("[" + host + "]" if ":" in host else host)
    if room is None:
        print(f"attnlab explorer on http://{own}:{port}/  (Ctrl+C to stop)")
    else:
        print("attnlab explorer serving a class  (Ctrl+C to stop)")
        if loopback:
            print(
                f"attnlab: note: --host {host} listens on this machine only: students on other machines cannot reach it",
                file=sys.stderr,
            )
        elif room.urls:
            print("students open:  " + "   ".join(room.urls) + "   (a QR code is on the index page)")
        else:
            print("attnlab: note: no network address found: students cannot reach this machine", file=sys.stderr)
        print(f"this machine:   http://{own}:{port}/")
    from ..accel import calibrate

    calibrate.ensure()  # the engine's lines measured (or read from the cache) now, not in a first request
    serve(models, host=host, port=port, limits=limits, allow_hosts=allow_host or (), classroom=room)
    return 0


@command("calibrate")
def calibrate_cmd(*, threads: list[int] | None = None, show: bool = False) -> int:
    """Measure the engine's lines on this machine again (a few seconds) and print the table in force.

    attnlab measures them on first use and caches them per CPU, library versions and kernel build
    (under $ATTNLAB_CACHE); run this after a change the cache key does not see, or on a quiet
    machine after a first measurement under load. It also drops the cached measurements of
    precision auto, so that each model measures again on its next use. ATTNLAB_LINES=name=value,...
    forces lines; ATTNLAB_CALIBRATE=0 keeps the defaults.

    Args:
        threads: the thread counts to measure for (default: 1 and torch's default count).
        show: print the cached tables without measuring.
    """
    import dataclasses

    import torch

    from ..accel import calibrate, rules
    from ..accel import precision as inference_precision

    counts = threads or sorted({1, torch.get_num_threads()})
    if min(counts) < 1:
        raise ValueError("--threads takes numbers of at least 1")
    defaults = rules.DEFAULTS
    for n in counts:
        table = calibrate.calibrated(n, again=not show, quiet=True) if rules.calibrating() else defaults
        table = rules.forced_from_env(table)
        print(f"{n} thread(s): " + ", ".join(f"{name}={getattr(table, name)}" for name in rules.CALIBRATED))
        changed = [f.name for f in dataclasses.fields(table) if getattr(table, f.name) != getattr(defaults, f.name)]
        print("  differs from the defaults in: " + (", ".join(changed) or "nothing"))
    print(f"cached in {calibrate.cache_path()}")
    if not show:
        dropped = inference_precision.forget_measurements()
        print(f"precision auto measures again on each model's next use (dropped {dropped})")
    return 0


@command("lesson handout")
def lesson_handout_cmd(
    *,
    lang: Literal["ja", "en"] = "ja",
    out: str = "handout.pdf",
    teacher: bool = False,
    sections: str = "1-9",
    chromium: str | None = None,
    timeout: float = 180.0,
) -> int:
    """Print the lesson to one PDF: a handout for the class, or with --teacher the answer key.

    Runs the explorer in this process and prints each section's page with headless Chromium, as a
    browser prints it (the print stylesheet): the text, each widget's figures, and the checks with
    their choices and lines to write on. The teacher's version adds each question's answer,
    explanation and hint, and the section's teacher notes (time, questions to ask first,
    misconceptions, a class exercise with its answer). Without Chromium, print from any browser:
    open /lesson/N?print=1 (or ?print=1&teacher=1) in `attnlab explore` and use Print.

    Args:
        lang: the language of the handout.
        out: the PDF to write (replaced if it exists).
        teacher: the teacher's version, with the answers, explanations and teacher notes.
        sections: the sections to print: a number, a range or a list, e.g. 3, 1-9 or 1,4-6.
        chromium: the Chromium or Chrome program (default: chromium, chromium-browser or google-chrome on PATH).
        timeout: seconds to wait for one section's widgets to draw.
    """
    from ..web.handout import make_handout

    # `out` is a file, not a run folder, so it is a str here: the run-folder check of _check_options
    # would refuse to replace an existing handout.
    report = make_handout(
        Path(out), lang=lang, teacher=teacher, sections=sections, chromium=chromium, timeout_s=timeout, progress=print
    )
    kind = "teacher's version" if teacher else "handout"
    print(f"{kind}: {report.path}  ({report.pages} pages, {len(report.sections)} sections, {lang})")
    return 0


@command("lesson build-site")
def lesson_build_site_cmd(
    *, out: Path = Path("build/site"), weights: Literal["auto", "fp16", "fp32", "int8"] = "auto", force: bool = False
) -> int:
    """Write the whole lesson as a static site: a folder any web host serves, nothing to install.

    Both languages, every section, the glossary, the final check, the applications page, the
    projector view and the teacher's plan and answer key (?teacher=1); the widgets' models run in
    the learner's browser (onnxruntime-web, copied from node_modules: run `npm ci` first), and after
    the first visit the site works offline (a service worker). Publish it by copying the folder to
    any web space (GitHub Pages, a university's), or try it with `python -m http.server -d FOLDER`.

    Args:
        out: the folder to write (it must be new or empty, unless --force).
        weights: how the models store their weights (auto: the smallest storage exact for each).
        force: replace the folder if it has files.
    """
    from ..web.static_site import build_site

    report = build_site(out, weights=weights, force=force, progress=lambda line: print(f"  {line}"))
    models = ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in report["models"].items())
    print(f"site: {report['folder']}  ({len(report['files'])} files, {report['bytes'] / 1e6:.1f} MB; models: {models})")
    print(f"try it: python -m http.server -d {report['folder']}  then open http://localhost:8000/")
    return 0
