"""Which sentence splitter should the translators' paragraph mode use? Measured, not guessed.

Paragraphs are made from held-out Tatoeba pairs whose sides are one sentence each (no sentence
end inside), four at a time, so the right split is known; each splitter is scored on the share of
paragraphs it splits exactly right, on the share of quoted speech kept whole (a 「…。」 or
"...!" inside a sentence must not end it), and on its time per paragraph.

Run: ``python benchmarks/sentence_split.py --data ../shared/data`` (a few seconds; prints a table
with the CPU's name).

Shape:
    no tensors: text in, a table out.
"""

from __future__ import annotations

import argparse
import importlib
import random
import re
import time
from collections.abc import Callable

from attnlab import machine
from attnlab.data import enja_mix

QUOTED = {
    "ja": [
        ("彼は「もう帰る。」と言った。", 1),
        ("「行こう！」と彼女が叫んだので、皆が振り向いた。", 1),
        ("母は「早く寝なさい。」と言った。私はまだ眠くなかった。", 2),
        ("これはペンです。あれは本です。", 2),
        ("駅まで歩いて10分です。バスなら3分です。", 2),
    ],
    "en": [
        ('He said, "Go home." Then he left.', 2),
        ("Mr. Smith arrived at 3 p.m. today.", 1),
        ('"Stop!" she shouted.', 1),
        ("The U.S. is big. Japan is not.", 2),
        ("It costs $3.50. That is cheap.", 2),
    ],
}


def _splitters(lang: str) -> dict[str, Callable[[str], list[str]] | str]:
    found: dict[str, Callable[[str], list[str]] | str] = {}
    try:
        pysbd = importlib.import_module("pysbd")
        seg = pysbd.Segmenter(language=lang, clean=False)
        found["pysbd"] = lambda text: [s.strip() for s in seg.segment(text) if s.strip()]
    except Exception as e:  # noqa: BLE001 - a splitter that does not load is a result too
        found["pysbd"] = f"does not load: {type(e).__name__}: {e}"[:120]
    if lang == "ja":
        try:
            from attnlab.data.sentences import split_japanese

            found["ja-sentence-segmenter"] = split_japanese
        except Exception as e:  # noqa: BLE001
            found["ja-sentence-segmenter"] = f"does not load: {type(e).__name__}: {e}"[:120]
        try:
            bunkai = importlib.import_module("bunkai")
            b = bunkai.Bunkai()
            found["bunkai"] = lambda text: [s.strip() for s in b(text) if s.strip()]
        except Exception as e:  # noqa: BLE001
            found["bunkai"] = f"does not load: {type(e).__name__}: {str(e)[:80]}"
        found["regex 。！？"] = lambda text: [s for s in re.split(r"(?<=[。！？!?])", text) if s.strip()]
    else:
        found["regex .!?"] = lambda text: [s for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--paragraphs", type=int, default=250)
    args = parser.parse_args()
    splits = enja_mix.build(args.data)
    single = [
        (ja, en)
        for ja, en in splits.test
        if len(re.findall(r"[。！？!?]", ja)) == 1
        and re.search(r"[。！？!?]$", ja)
        and len(re.findall(r"[.!?]", en)) == 1
        and re.search(r"[.!?]$", en)
    ]
    rng = random.Random(0)
    paragraphs = [rng.sample(single, 4) for _ in range(args.paragraphs)]
    isa = [f for f in ("avx2", "avx512f", "avx512_bf16") if f in machine.cpu_flags().split()]
    print(f"CPU: {machine.cpu_name()} ({' '.join(isa)})")
    print(f"{len(single)} one-sentence test pairs; {len(paragraphs)} paragraphs of 4 sentences per language\n")
    print("| language | splitter | paragraphs split exactly | quoted-speech cases right | ms per paragraph |")
    print("|---|---|---:|---:|---:|")
    for lang, side, joiner in (("ja", 0, ""), ("en", 1, " ")):
        for name, split in _splitters(lang).items():
            if isinstance(split, str):
                print(f"| {lang} | {name} | {split} | | |")
                continue
            texts = [joiner.join(p[side] for p in para) for para in paragraphs]
            start = time.perf_counter()
            outputs = [split(t) for t in texts]
            ms = 1000 * (time.perf_counter() - start) / len(texts)
            exact = sum(out == [p[side] for p in para] for out, para in zip(outputs, paragraphs))
            quoted = sum(len(split(t)) == n for t, n in QUOTED[lang])
            print(f"| {lang} | {name} | {exact / len(texts):.1%} | {quoted}/{len(QUOTED[lang])} | {ms:.2f} |")


if __name__ == "__main__":
    main()
