"""Where one short sentence's translation time goes: a loop to run under a profiler.

    python benchmarks/profile_latency.py --engine attnlab-auto --beam 4 --threads 1
    perf record -F 2000 -g -o perf.data -- python benchmarks/profile_latency.py --engine ct2-float32 --beam 4
    perf report -i perf.data --no-children --sort dso,symbol --percent-limit 1 --stdio

It translates the latency sentence of ``benchmarks/translate_throughput.py`` (or ``--text``) again
and again for ``--seconds`` with one engine (the same engines and the same exported weights as that
benchmark), then prints the calls per second and the median time of one call. For attnlab it also
splits one call into its stages by wall time, measured around each stage in the same loop
(``--stages``): the source tokenized, the encoder, every decoder step (the C step or the modules),
the beam bookkeeping between steps, and the detokenized text. Run it under ``perf record`` for the
C-level view (which library, which kernel); docs/measured.md gives what it showed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from attnlab.export import CTranslate2Translator, export_ctranslate2  # noqa: E402
from attnlab.loading import load_model  # noqa: E402

sys.path.insert(0, str(REPO / "benchmarks"))
from translate_throughput import SHORT, default_data, load_data  # noqa: E402


class StageClock:
    """Wall time per named stage, summed over the calls of the loop (seconds)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def wrap(self, owner, name: str, stage: str) -> None:
        """Time every call of ``owner.name`` as ``stage``."""
        inner = getattr(owner, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds[stage] += time.perf_counter() - start
                self.calls[stage] += 1

        setattr(owner, name, timed)


def batch_texts(args, translator) -> list[str]:
    """The first ``--batch`` sentences of translate_throughput.py's default data (none for 1)."""
    if args.batch <= 1:
        return []
    ns = argparse.Namespace(src=None, ref=None, data=default_data(), sentences=args.batch)
    return load_data(ns, translator.src_lang, translator.tgt_lang)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="ja-en", help="a shipped translator's name or a model folder")
    parser.add_argument("--engine", default="attnlab-auto", help="attnlab-auto|fp32|bf16 or ct2-float32|int8|bfloat16")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--text", help="the sentence (default: translate_throughput.py's latency sentence)")
    parser.add_argument(
        "--batch", type=int, default=1, help="instead of one sentence, a batch of the benchmark's first N sentences"
    )
    parser.add_argument("--stages", action="store_true", help="attnlab: split one call into its stages")
    args = parser.parse_args()

    kind, precision = args.engine.split("-", 1)
    if kind == "attnlab":
        torch.set_num_threads(args.threads)
        translator = load_model(args.model, precision=precision, family="translate")
        translator.resolve_precision()
        text = args.text or SHORT.get(translator.src_lang or "en", SHORT["en"])
        clock = StageClock()
        if args.stages:
            from attnlab.accel.engine import NativeTranslator

            clock.wrap(translator.src_tok, "encode_batch", "tokenize")
            clock.wrap(translator.tgt_tok, "decode", "detokenize")
            # The searches decode through the engine the key picks (accel.engine.decoder): its
            # start and step are the encoder and the decoder steps, whichever path runs inside.
            clock.wrap(NativeTranslator, "start", "encoder (start)")
            clock.wrap(NativeTranslator, "step", "decoder steps")

        texts = batch_texts(args, translator) or [text]

        def call() -> str:
            return translator.translate(texts, beam_size=args.beam, alpha=0.0, batch_size=len(texts))[0].text

        described = f"attnlab {translator.precision}"
    else:
        work = Path(tempfile.mkdtemp(prefix="attnlab-ct2-"))
        probe = load_model(args.model, precision="fp32", family="translate")
        text = args.text or SHORT.get(probe.src_lang or "en", SHORT["en"])
        info = {"src_lang": probe.src_lang, "tgt_lang": probe.tgt_lang, "max_len": probe.model.config.max_len}
        export_ctranslate2(probe.model, probe.src_tok, probe.tgt_tok, work / "ct2", info=info)
        engine = CTranslate2Translator(work / "ct2", compute_type=precision, threads=args.threads)

        texts = batch_texts(args, probe) or [text]

        def call() -> str:
            return engine.translate(texts, beam_size=args.beam, length_penalty=0.0, batch_size=len(texts))[0]

        described = f"CTranslate2 {precision}"
        clock = None

    out = call()  # warm-up: first-call costs (kernels, caches) stay out of the loop
    times = []
    stop = time.perf_counter() + args.seconds
    if clock is not None:
        clock.seconds.clear()
        clock.calls.clear()
    while time.perf_counter() < stop:
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    median = statistics.median(times) * 1e3
    print(f"{described}, beam {args.beam}, batch {args.batch}, {args.threads} thread(s): first output {out!r}")
    print(f"{len(times)} calls in {sum(times):.1f} s: median {median:.2f} ms, {len(times) / sum(times):.1f} calls/s")
    if clock is not None and clock.seconds:
        total = sum(times)
        print("| stage | ms per call | calls per call | share |")
        print("|---|---:|---:|---:|")
        for stage, seconds in clock.seconds.items():
            print(
                f"| {stage} | {seconds / len(times) * 1e3:.3f} | {clock.calls[stage] / len(times):.1f} |"
                f" {seconds / total:.0%} |"
            )
        rest = total - sum(clock.seconds.values())
        print(f"| everything else (Python around the stages) | {rest / len(times) * 1e3:.3f} | | {rest / total:.0%} |")


if __name__ == "__main__":
    main()
