"""Translation throughput: attnlab's decoder against CTranslate2 and HF ``generate``, side by side, on the same weights.

    python benchmarks/translate_throughput.py                                # ja-en, the default grid
    python benchmarks/translate_throughput.py --batch1-sentences 1000        # every row on 1,000 sentences (9.5 min, 2 cores)
    python benchmarks/translate_throughput.py --threads 2 --beams 4          # one corner of it
    python benchmarks/translate_throughput.py --engines attnlab-fp32 attnlab-bf16 ct2-float32 ct2-int8 hf-fp32
    python benchmarks/translate_throughput.py --model RUN/best --src test_2016_flickr.de --ref test_2016_flickr.en
    python benchmarks/translate_throughput.py --step-rows 8 16 32 48 64 96 128   # one decoding step by rows

The model (a shipped name or a folder) is exported with ``attnlab export --to ctranslate2`` (and
``--to hf`` for the ``hf-fp32`` engine) into a temporary folder, so every engine runs the same fp32
weights; CTranslate2 converts them to int8 (or bf16, where this CPU has it) when it loads them.
``hf-fp32`` is HuggingFace ``transformers``' ``generate`` on the exported Pegasus (pre-norm) or
Marian (post-norm) model, on torch's threads like the attnlab engines. All engines get the same
sentences, sorted by length and cut into the same batches with the same length limit, and tokenized
by the same attnlab tokenizers; the timed region is text in → text out.

Default data: small_parallel_enja's dev + test splits (500 + 500 = 1,000 sentences, read from
``../shared/data/small_parallel_enja`` beside the repository or its worktree folder, or ``--data``), made raw as the
shipped translators' training text was (:func:`attnlab.data.enja.to_raw`).

The grid: beam 1 and 4 × batch 1 and 32 × 1 and 2 threads × the engines. The batch-32 runs
translate every sentence and give the BLEU of each engine; the batch-1 runs, the slow ones, time
the first ``--batch1-sentences`` (200). Every row also says how many of its outputs are the same
as attnlab fp32's (in fp32 they must all be). Beam search runs without a length penalty
(``--alpha 0``) because the engines normalise by different functions of the length (GNMT's in
attnlab, ``|Y|^α`` in CTranslate2 and ``generate``; docs/export.md). Then the latency of one short
sentence: the median of ``--latency-runs`` translations.

Each engine runs in a process of its own (engines sharing a process slow each other down; see
:class:`Workers`), and they take turns: each translates a chunk of ``--chunk`` sentences (128; the sentences
sorted by length first), then the next engine the same chunk, the first engine changing from chunk
to chunk; the latency runs alternate the same way. A busy or slow minute of the machine (other
processes, or on a virtual machine other guests: "steal") then falls on every engine alike, and
the ratios hold where the absolute figures move. Before each timed call the machine is left idle
for ``--gap`` seconds (0.3): after a parallel region an OpenMP runtime keeps its threads spinning
for a while before they sleep (PyTorch and CTranslate2 each bring a copy of GNU's), and without
the gap those threads took cores from the next engine's call.

Prints Markdown with ``lscpu``'s model name, the load average before and after and the CPU steal
during the run; ``--out`` also writes it with ``results.json``.

``--step-rows R …`` measures instead the time of one fp32 decoding step of the model by rows
(sentences × beams): attnlab's one-call C step (its products of many rows by the BLAS PyTorch uses,
and by its packed panels alone) against the modules' step (whose products are the
BLAS's), alternating, each the median of ``--step-repeats`` steps, on each of ``--threads``. Where
the BLAS is found the one call takes every row count; else :data:`attnlab.accel.ONE_CALL_STEP_MAX_ROWS`
(and ``…_ONE_THREAD``) are the row counts past which the tensor operations take over. Then the
other lines drawn the same way: the C encoder against the modules by source tokens
(``encoder_max_tokens_one_call``, ``encoder_max_tokens`` of attnlab.accel.rules.Lines) and the C step's products by rows,
packed panels against the BLAS (``accel.rules.BLAS_MIN_ROWS``, ``BLAS_MIN_ROWS_LARGE``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from attnlab.data import enja  # noqa: E402
from attnlab.data.corpus import read_lines  # noqa: E402
from attnlab.export import CTranslate2Translator, export_ctranslate2, require_ctranslate2  # noqa: E402
from attnlab.export_hf import HFTranslator, export_hf, require_transformers  # noqa: E402
from attnlab.loading import load_model  # noqa: E402
from attnlab.metrics import bleu  # noqa: E402

# attnlab-auto: a translator's default (load_model's precision "auto": bf16 where this CPU computes it natively
# and a short measurement shows it faster, unless the model card says otherwise; the report names it).
ENGINES = ("attnlab-auto", "attnlab-fp32", "attnlab-bf16", "ct2-float32", "ct2-int8", "ct2-bfloat16", "hf-fp32")
DEFAULT_ENGINES = ("attnlab-auto", "attnlab-fp32", "ct2-float32", "ct2-int8", "ct2-bfloat16", "hf-fp32")
REFERENCE = "ct2-float32"  # the ratios are against this engine
SHORT = {"ja": "猫が好きです。", "en": "i like cats ."}  # the latency sentence, by source language


@dataclass
class Row:
    engine: str
    beam: int
    batch: int
    threads: int
    sentences: int
    seconds: float
    target_tokens: int  # tokens of the outputs (target tokenizer) plus one end token each
    bleu: float | None = None  # only for the runs over every sentence
    same_as_attnlab_fp32: int | None = None
    outputs: list[str] = field(default_factory=list, repr=False)

    @property
    def sentences_per_s(self) -> float:
        return self.sentences / self.seconds

    @property
    def tokens_per_s(self) -> float:
        return self.target_tokens / self.seconds


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or "unknown CPU"
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def cpu_times() -> list[int] | None:
    """The machine's CPU time counters (``/proc/stat``'s first line), or ``None`` off Linux."""
    try:
        return [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None


def cpu_steal(before: list[int] | None, after: list[int] | None) -> float | None:
    """Percent of the CPU time between two :func:`cpu_times` that the hypervisor gave to other
    machines ("steal", the 8th counter): on a shared host it slows every engine and is not in the
    load average."""
    if before is None or after is None or len(before) < 8:
        return None
    delta = [b - a for a, b in zip(before, after)]
    total = sum(delta[:8])
    return 100.0 * delta[7] / total if total else None


def default_data() -> Path:
    candidates = [base / "shared" / "data" / "small_parallel_enja" for base in (REPO.parent, REPO.parent.parent)]
    return next((c for c in candidates if c.is_dir()), candidates[0])


def load_data(args, src_lang: str | None, tgt_lang: str | None) -> tuple[list[str], list[str]]:
    if args.src is not None:
        sources, refs = read_lines(args.src), read_lines(args.ref)
    else:
        if not (src_lang and tgt_lang):
            raise SystemExit("the model has no src_lang/tgt_lang: give its test set with --src and --ref")
        sources, refs = [], []
        for split in ("dev", "test"):
            sources += [enja.to_raw(line, src_lang) for line in read_lines(args.data / f"{split}.{src_lang}")]
            refs += [enja.to_raw(line, tgt_lang) for line in read_lines(args.data / f"{split}.{tgt_lang}")]
    if len(sources) != len(refs):
        raise SystemExit(f"{len(sources)} sources but {len(refs)} references")
    return sources[: args.sentences], refs[: args.sentences]


class Engines:
    """Each engine as ``translate(texts, beam, batch, threads) -> outputs``; models load once per setting."""

    def __init__(self, model: str, exported: Path | None, exported_hf: Path | None, alpha: float) -> None:
        self.model, self.exported, self.exported_hf, self.alpha = model, exported, exported_hf, alpha
        self._attnlab: dict[str, object] = {}
        self._ct2: dict[tuple[str, int], CTranslate2Translator] = {}
        self._hf: HFTranslator | None = None

    def translate(self, engine: str, texts: list[str], beam: int, batch: int, threads: int) -> list[str]:
        kind, precision = engine.split("-", 1)
        if kind == "attnlab":
            torch.set_num_threads(threads)
            if precision not in self._attnlab:
                translator = load_model(self.model, precision=precision, family="translate")
                translator.resolve_precision()  # (the warm-up call's work, never a timed one's)
                self._attnlab[precision] = translator
            translator = self._attnlab[precision]
            return [t.text for t in translator.translate(texts, beam_size=beam, alpha=self.alpha, batch_size=batch)]
        if kind == "hf":
            torch.set_num_threads(threads)  # generate runs on torch's threads, as attnlab does
            if self._hf is None:
                self._hf = HFTranslator(self.exported_hf)
            return self._hf.translate(texts, beam_size=beam, length_penalty=self.alpha, batch_size=batch)
        key = (precision, threads)
        if key not in self._ct2:
            self._ct2[key] = CTranslate2Translator(self.exported, compute_type=precision, threads=threads)
        return self._ct2[key].translate(texts, beam_size=beam, length_penalty=self.alpha, batch_size=batch)


def _serve(conn, model: str, exported: Path | None, exported_hf: Path | None, alpha: float) -> None:
    """A worker process: translate what the pipe sends, reply with the outputs and the seconds."""
    runner = Engines(model, exported, exported_hf, alpha)
    while (job := conn.recv()) is not None:
        try:
            start = time.perf_counter()
            outputs = runner.translate(*job)
            conn.send((outputs, time.perf_counter() - start))
        except Exception as err:  # noqa: BLE001 - reported by the parent, which stops the run
            conn.send(err)


class Workers:
    """One process per engine, each timing its own calls (text in → text out).

    Separate processes because engines in one process slow each other down: after CTranslate2
    (which brings its own OpenMP runtime) has run in a process, every parallel region of PyTorch's
    runtime there costs several times more, so attnlab's short products were 3-7× slower (measured
    with attnlab's kernel and ``F.scaled_dot_product_attention`` before and after one
    CTranslate2 translation, docs/export.md).
    """

    def __init__(self, engines: list[str], *setup) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipes, self.processes = {}, []
        for engine in engines:
            parent, child = context.Pipe()
            process = context.Process(target=_serve, args=(child, *setup), daemon=True)
            process.start()
            self.pipes[engine] = parent
            self.processes.append(process)

    def translate(self, engine: str, texts: list[str], beam: int, batch: int, threads: int) -> tuple[list[str], float]:
        pipe = self.pipes[engine]
        pipe.send((engine, texts, beam, batch, threads))
        reply = pipe.recv()
        if isinstance(reply, Exception):
            raise SystemExit(f"{engine} failed: {reply}")
        return reply

    def close(self) -> None:
        for pipe in self.pipes.values():
            pipe.send(None)
        for process in self.processes:
            process.join(timeout=30)


def run(args) -> dict:
    ct2 = require_ctranslate2() if any(e.startswith("ct2-") for e in args.engines) else None
    tf = require_transformers() if "hf-fp32" in args.engines else None
    supported = ct2.get_supported_compute_types("cpu") if ct2 else set()
    engines = [e for e in args.engines if not e.startswith("ct2-") or e[4:] in supported]
    skipped = [e for e in args.engines if e not in engines]
    translator = load_model(args.model, family="translate")
    sources, refs = load_data(args, translator.src_lang, translator.tgt_lang)
    tgt_tok = translator.tgt_tok
    load_before = os.getloadavg()
    cpu_before = cpu_times()
    work = Path(tempfile.mkdtemp(prefix="attnlab-ct2-"))
    info = {
        "src_lang": translator.src_lang,
        "tgt_lang": translator.tgt_lang,
        "max_len": translator.model.config.max_len,
    }
    exported = exported_hf = None
    if ct2:
        exported = export_ctranslate2(translator.model, translator.src_tok, tgt_tok, work / "model", info=info)
    if tf:
        exported_hf = export_hf(translator.model, translator.src_tok, tgt_tok, work / "hf", info=info)
    choices = engine_choices(args)  # measured (or read from the cache) here, before any timing
    runner = Workers(engines, args.model, exported, exported_hf, args.alpha)

    def tokens(outputs: list[str]) -> int:
        return sum(len(ids) + 1 for ids in tgt_tok.encode_batch(outputs))

    # Sorted by source length once (as every engine sorts its input), so that each chunk below is
    # a run of similar lengths and its batches need little padding.
    lengths = [len(ids) for ids in translator.src_tok.encode_batch(sources)]
    order = sorted(range(len(sources)), key=lambda i: lengths[i])
    sorted_sources, sorted_refs = [sources[i] for i in order], [refs[i] for i in order]
    batch1 = sorted(range(min(args.batch1_sentences, len(sources))), key=lambda i: lengths[i])
    batch1_sources = [sources[i] for i in batch1]

    rows: list[Row] = []
    for threads in args.threads:
        for beam in args.beams:
            for batch in args.batch_sizes:
                texts = sorted_sources if batch > 1 else batch1_sources
                for engine in engines:
                    runner.translate(engine, texts[:8], beam, batch, threads)  # warm-up: first calls, lazy loads
                # The engines take turns chunk by chunk (the first engine changes each chunk), so
                # that a slower or busier minute of the machine falls on all of them alike.
                size = max(batch, args.chunk // batch * batch)  # whole batches
                seconds = dict.fromkeys(engines, 0.0)
                outputs: dict[str, list[str]] = {e: [] for e in engines}
                for i, start in enumerate(range(0, len(texts), size)):
                    part = texts[start : start + size]
                    turn = i % len(engines)
                    for engine in engines[turn:] + engines[:turn]:
                        time.sleep(args.gap)  # the previous engine's threads stop spinning first
                        out, took = runner.translate(engine, part, beam, batch, threads)
                        outputs[engine] += out
                        seconds[engine] += took
                config = []
                for engine in engines:
                    out = outputs[engine]
                    row = Row(engine, beam, batch, threads, len(texts), seconds[engine], tokens(out), outputs=out)
                    if len(texts) == len(sources):
                        row.bleu = bleu(out, sorted_refs, tokenize=translator.bleu_tokenize)
                    config.append(row)
                    print(
                        f"  {engine:13s} beam {beam} batch {batch:2d} threads {threads}: "
                        f"{row.sentences_per_s:7.1f} sent/s {row.tokens_per_s:8.0f} tok/s",
                        file=sys.stderr,
                        flush=True,
                    )
                reference = next((r for r in config if r.engine == "attnlab-fp32"), None)
                for row in config:
                    if reference is not None:
                        row.same_as_attnlab_fp32 = sum(a == b for a, b in zip(row.outputs, reference.outputs))
                rows += config

    short = SHORT.get(translator.src_lang or "en", SHORT["en"]) if args.latency_text is None else args.latency_text
    latency = []
    for threads in args.threads:
        for beam in args.beams:
            times: dict[str, list[float]] = {e: [] for e in engines}
            for engine in engines:
                runner.translate(engine, [short], beam, 1, threads)
            for _ in range(args.latency_runs):  # in turns, as above
                for engine in engines:
                    time.sleep(args.gap)
                    times[engine].append(runner.translate(engine, [short], beam, 1, threads)[1])
            latency += [
                {"engine": e, "beam": beam, "threads": threads, "ms": 1000 * statistics.median(times[e])}
                for e in engines
            ]
    steal = cpu_steal(cpu_before, cpu_times())
    runner.close()
    return {
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "ctranslate2": ct2.__version__ if ct2 else None,
        "transformers": tf.__version__ if tf else None,
        "model": args.model,
        "sentences": len(sources),
        "batch1_sentences": min(args.batch1_sentences, len(sources)),
        "alpha": args.alpha,
        "skipped": skipped,
        "supported_compute_types": sorted(supported),
        # How idle OpenMP threads wait decides 2-thread figures on a busy machine (spinning threads
        # fight the other processes for the cores), so the report says what was set.
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "steal_percent": steal,
        "chunk": args.chunk,
        "gap": args.gap,
        "short_sentence": short,
        "rows": rows,
        "latency": latency,
        "choices": choices,
    }


def engine_choices(args) -> dict:
    """What attnlab chose on this machine for each of ``--threads``: the engine's lines (measured on
    first use and cached: attnlab.accel.calibrate; the workers read the same cache) and the
    precision of a translator's "auto", each resolved here so that no measurement falls in a
    timed call."""
    from attnlab.accel import calibrate, rules

    out = {}
    kept = torch.get_num_threads()
    try:
        for threads in args.threads:
            torch.set_num_threads(threads)
            (table,) = calibrate.ensure(threads)
            auto = load_model(args.model, precision="auto", family="translate")
            chosen = auto.resolve_precision()
            out[threads] = {
                "lines": {name: getattr(table, name) for name in rules.CALIBRATED},
                "auto_precision": chosen,
                "why": auto.precision_reason,
            }
            print(
                f"threads {threads}: lines {out[threads]['lines']}; precision auto → {chosen} ({auto.precision_reason})"
            )
    finally:
        torch.set_num_threads(kept)
    return out


def markdown(result: dict) -> str:
    rows: list[Row] = result["rows"]
    ref = {(r.beam, r.batch, r.threads): r for r in rows if r.engine == REFERENCE}
    load = lambda xs: " / ".join(f"{x:.2f}" for x in xs)  # noqa: E731
    lines = [
        f"**{result['model']}** on {result['cpu']} ({result['cores']} cores), torch {result['torch']}, "
        f"CTranslate2 {result['ctranslate2']}, transformers {result['transformers']}; "
        f"{result['sentences']:,} sentences (batch 1: the first "
        f"{result['batch1_sentences']:,}), beam search without length penalty (α = {result['alpha']}).",
        f"Load average (1 / 5 / 15 min) before {load(result['load_before'])}, after {load(result['load_after'])}; "
        f"OMP_WAIT_POLICY {result['omp_wait_policy']}; CPU steal during the run "
        + ("unknown" if result["steal_percent"] is None else f"{result['steal_percent']:.1f}%")
        + ". The engines took turns every "
        f"{result['chunk']} sentences, each call after {result['gap']:g} s of idleness.",
    ]
    for threads, c in result.get("choices", {}).items():
        lines.append(
            f"attnlab on {threads} thread(s): precision auto → {c['auto_precision']} ({c['why']}); lines "
            + ", ".join(f"{k}={v}" for k, v in c["lines"].items())
            + f" (ATTNLAB_CALIBRATE={os.environ.get('ATTNLAB_CALIBRATE', '1')}, ATTNLAB_LINES={os.environ.get('ATTNLAB_LINES', '')!r})."
        )
    if result["skipped"]:
        lines.append(
            f"Not run: {', '.join(result['skipped'])} (CTranslate2 on this CPU supports "
            f"{', '.join(result['supported_compute_types'])})."
        )
    lines += [
        "",
        f"| beam | batch | threads | engine | sentences/s | target tokens/s | × {REFERENCE} | BLEU | same as attnlab fp32 |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        base = ref.get((r.beam, r.batch, r.threads))
        ratio = f"{r.sentences_per_s / base.sentences_per_s:.2f}" if base else "–"
        score = f"{r.bleu:.2f}" if r.bleu is not None else "–"
        same = f"{r.same_as_attnlab_fp32}/{r.sentences}" if r.same_as_attnlab_fp32 is not None else "–"
        lines.append(
            f"| {r.beam} | {r.batch} | {r.threads} | {r.engine} | {r.sentences_per_s:,.1f} | "
            f"{r.tokens_per_s:,.0f} | {ratio} | {score} | {same} |"
        )
    lines += ["", f"Latency of one short sentence ({result['short_sentence']!r}), median:", ""]
    engines = list(dict.fromkeys(x["engine"] for x in result["latency"]))
    lines += ["| beam | threads | " + " | ".join(engines) + " |", "|---:|---:|" + "---:|" * len(engines)]
    cells: dict[tuple[int, int], dict[str, float]] = {}
    for x in result["latency"]:
        cells.setdefault((x["beam"], x["threads"]), {})[x["engine"]] = x["ms"]
    for (beam, threads), ms in cells.items():
        lines.append(f"| {beam} | {threads} | " + " | ".join(f"{ms[e]:.1f} ms" for e in engines) + " |")
    return "\n".join(lines) + "\n"


def step_rows(args) -> str:
    """The ``--step-rows`` table: milliseconds of one fp32 decoding step by rows, the one C call
    (its products of many rows by the BLAS, and by its packed panels alone) against the tensor
    operations, side by side; then the encoder's and the products' lines."""
    from attnlab.accel import engine, kernels, rules

    translator = load_model(args.model, family="translate")
    model = translator.model.eval().float()
    native = engine.decoder(model)  # the native engine's start/step (the "ops" path: the modules')
    sources, _ = load_data(args, translator.src_lang, translator.tgt_lang)
    encoded = translator.src_tok.encode_batch(sources)
    S = 12  # every row's source: its first 12 tokens (sentences of at least 12)
    long_enough = [ids[:S] for ids in encoded if len(ids) >= S]
    load_before = os.getloadavg()[0]
    lines = [
        f"One fp32 decoding step of `{args.model}` by rows (source {S} tokens, 8 positions already decoded), "
        f"milliseconds, median of {args.step_repeats}; {cpu_name()}; load average {load_before:.2f} before; "
        f"BLAS for the C step's products: {'yes' if kernels.blas() else 'none found'}.",
        "",
        "| threads | rows | one C call | C, packed products only | tensor operations | C / tensor ops |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    table = rules.lines()  # the lines in force here (measured on first use), resolved before any timing
    paths = {"C": True, "packed": False, "ops": False}  # path: the BLAS on for it

    @contextlib.contextmanager
    def take(path: str):  # every row count to the one C call, or none
        limit = 0 if path == "ops" else 1 << 30
        with rules.using(table, one_call_step_max_rows=limit, one_call_step_max_rows_one_thread=limit):
            with kernels.using_blas(paths[path]):
                yield

    for threads in args.threads:
        torch.set_num_threads(threads)
        table = rules.lines()  # this thread count's lines (measured on first use), before any timing
        for rows in args.step_rows:
            picked = [long_enough[i % len(long_enough)] for i in range(rows)]
            src = torch.tensor(picked)  # (rows, S)
            times: dict[str, list[float]] = {path: [] for path in paths}
            with torch.inference_mode():
                states = {}
                for path in paths:
                    with take(path):
                        state = native.start(src)
                        tokens = torch.full((rows, 1), translator.tgt_tok.bos_id)
                        for _ in range(8):  # a cache of 8 positions, as early in a sentence
                            native.step(tokens, state)
                    states[path] = (state, tokens)
                for _ in range(args.step_repeats):
                    for path in paths:  # alternating: a busy moment falls on all
                        state, tokens = states[path]
                        for cache in state.caches:  # the same cache length every time
                            cache.length = 8
                        state.length = 8
                        with take(path):
                            start = time.perf_counter()
                            native.step(tokens, state)
                            times[path].append(time.perf_counter() - start)
            c, packed, ops = (1e3 * statistics.median(times[p]) for p in paths)
            lines.append(f"| {threads} | {rows} | {c:.2f} | {packed:.2f} | {ops:.2f} | {c / ops:.2f} |")
            print(lines[-1], flush=True)
    lines += ["", f"attnlab takes the one C call at every row count where its products have the BLAS, else up to "
              f"{table.one_call_step_max_rows} rows on several threads, {table.one_call_step_max_rows_one_thread} on one "
              f"(attnlab.accel.rules.lines(): {table})."]  # fmt: skip
    lines += ["", *encoder_tokens(model, long_enough, args), "", *product_rows(model, args), ""]
    lines += [f"Load average after: {os.getloadavg()[0]:.2f}."]
    return "\n".join(lines)


def _median_ms(fn, repeats: int) -> float:
    fn()  # warm-up: lazy builds, first allocations
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def encoder_tokens(model, sources: list[list[int]], args) -> list[str]:
    """``model.start`` (the source encoded, every decoder layer's source keys/values) with the C
    encoder against the modules, by source tokens (sentences × 12 tokens), on the last of
    ``--threads``; attnlab takes the C encoder up to ``encoder_max_tokens_one_call`` tokens where
    its products have the BLAS, else ``encoder_max_tokens`` (attnlab.accel.rules.Lines)."""
    from attnlab.accel import engine, kernels, rules

    native = engine.decoder(model)
    torch.set_num_threads(args.threads[-1])
    table = rules.lines()
    lines = [
        f"`model.start` by source tokens, {args.threads[-1]} threads, milliseconds, median of {args.step_repeats}:",
        "",
        "| sentences | tokens | C encoder | modules | C / modules |",
        "|---:|---:|---:|---:|---:|",
    ]
    for n in (1, 4, 8, 16, 32, 64, 128):
        src = torch.tensor([sources[i % len(sources)] for i in range(n)])  # (n, 12)
        ms = {}
        with torch.inference_mode():
            for path, limit in (("C", 1 << 30), ("modules", 0)):
                with rules.using(table, encoder_max_tokens=limit, encoder_max_tokens_one_call=limit):
                    ms[path] = _median_ms(lambda src=src: native.start(src), args.step_repeats)
        lines.append(f"| {n} | {src.numel()} | {ms['C']:.2f} | {ms['modules']:.2f} | {ms['C'] / ms['modules']:.2f} |")
    limit = table.encoder_max_tokens_one_call if kernels.blas() else table.encoder_max_tokens
    return lines + ["", f"attnlab takes the C encoder up to {limit} tokens here (attnlab.accel.engine)."]


def product_rows(model, args) -> list[str]:
    """The products inside the C step by rows, for each shape of the model's decoder: the packed
    panels against the BLAS (each thread its share of the outputs), on the last of ``--threads``,
    for fp32 weights and (where the BLAS has a bf16 product for them) bf16 weights; attnlab takes
    the BLAS from ``rules.BLAS_MIN_ROWS`` rows (``BLAS_MIN_ROWS_LARGE`` for a matrix of more than
    ``BLAS_LARGE_WEIGHTS`` weights), bf16 from ``BLAS_MIN_ROWS_BF16``."""
    from attnlab.accel import kernels, rules

    if not kernels.blas():
        return ["No BLAS for the kernels' products here: the packed panels take every row count."]
    block = model.decoder[0]
    shapes = {
        "W_q (D, D)": block.self_attn.q_proj.weight,
        "FF up (F, D)": block.ff.up_proj.weight,
        "FF down (D, F)": block.ff.down_proj.weight,
        "vocabulary (V, D)": model.out_proj.weight,
    }
    torch.set_num_threads(args.threads[-1])
    kept = rules.lines()  # the lines in force here (measured on first use)
    lines = []
    dtypes = [torch.float32] + ([torch.bfloat16] if kernels.blas(torch.bfloat16) else [])
    with rules.using(kept, blas_min_rows=1, blas_min_rows_large=1, blas_min_rows_bf16=1):  # the BLAS unless turned off
        for dtype in dtypes:
            lines += [
                f"The C step's products of {str(dtype).removeprefix('torch.')} weights by rows, {args.threads[-1]} "
                f"threads, microseconds (packed panels / BLAS), median of {args.step_repeats}:",
                "",
                "| rows | " + " | ".join(shapes) + " |",
                "|---:|" + "---:|" * len(shapes),
            ]
            packed = {name: kernels.pack(w.detach().to(dtype).contiguous()) for name, w in shapes.items()}
            with torch.inference_mode():
                for rows in (1, 2, 4, 8, 16, 32, 64, 128):
                    cells = []
                    for p in packed.values():
                        x = torch.randn(rows, p.n)
                        with kernels.using_blas(False):
                            panels = 1e3 * _median_ms(lambda x=x, p=p: kernels.packed_linear(x, p), args.step_repeats)
                        blas = 1e3 * _median_ms(lambda x=x, p=p: kernels.packed_linear(x, p), args.step_repeats)
                        cells.append(f"{panels:.0f} / {blas:.0f}")
                    lines.append(f"| {rows} | " + " | ".join(cells) + " |")
            lines.append("")
    return lines + [
        f"attnlab takes the BLAS from {kept.blas_min_rows} rows, from {kept.blas_min_rows_large} for a matrix "
        f"of more than {kept.blas_large_weights:,} weights; bf16 weights from {kept.blas_min_rows_bf16} rows "
        "(attnlab.accel.rules.lines(), measured here).",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="ja-en", help="a shipped translator's name or a model folder")
    parser.add_argument(
        "--data",
        type=Path,
        default=default_data(),
        help="small_parallel_enja (dev.* and test.* are read; default: ../shared/data beside the repository "
        "or beside the folder holding it, as for a git worktree)",
    )
    parser.add_argument("--src", type=Path, help="source sentences instead of small_parallel_enja (raw text)")
    parser.add_argument("--ref", type=Path, help="their references, line-aligned with --src")
    parser.add_argument("--sentences", type=int, default=1000, help="sentences of the batch-32 runs (and BLEU)")
    parser.add_argument("--batch1-sentences", type=int, default=200, help="sentences of the batch-1 runs")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(DEFAULT_ENGINES))
    parser.add_argument("--alpha", type=float, default=0.0, help="length penalty of both engines (see above)")
    parser.add_argument(
        "--chunk", type=int, default=128, help="sentences each engine translates before the next takes its turn"
    )
    parser.add_argument(
        "--gap",
        type=float,
        default=0.3,
        help="seconds of idleness before each timed call, so that the previous engine's threads have stopped spinning",
    )
    parser.add_argument("--latency-text", help="the short sentence of the latency table")
    parser.add_argument("--latency-runs", type=int, default=20)
    parser.add_argument("--out", type=Path, help="also write report.md and results.json here")
    parser.add_argument("--step-rows", type=int, nargs="+", help="instead: one decoding step's time by rows (above)")
    parser.add_argument("--step-repeats", type=int, default=15, help="steps timed per row count and path")
    args = parser.parse_args()
    if (args.src is None) != (args.ref is None):
        parser.error("--src and --ref go together")
    if args.gap < 0:
        parser.error(f"--gap must be at least 0, got {args.gap}")
    for name in ("sentences", "batch1_sentences", "chunk", "latency_runs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if min(args.beams + args.batch_sizes + args.threads) < 1:
        parser.error("--beams, --batch-sizes and --threads take numbers of at least 1")
    if args.step_rows is not None:
        if min(args.step_rows) < 1 or args.step_repeats < 1:
            parser.error("--step-rows and --step-repeats take numbers of at least 1")
        print(step_rows(args))
        return
    result = run(args)
    text = markdown(result)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report.md").write_text(text, encoding="utf-8")
        payload = {**result, "rows": [{k: v for k, v in asdict(r).items() if k != "outputs"} for r in result["rows"]]}
        (args.out / "results.json").write_text(
            json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )


if __name__ == "__main__":
    main()
