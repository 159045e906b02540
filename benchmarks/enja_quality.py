"""Japanese⇄English translators on small_parallel_enja: test BLEU/chrF, harder inputs, own sentences.

    python benchmarks/enja_quality.py                               # the shipped ja-en and en-ja models
    python benchmarks/enja_quality.py --ja-en RUN/best --en-ja RUN/best --runs RUN_JA_EN RUN_EN_JA

Scores follow WAT's conventions: sacreBLEU with ``13a`` for English output and ``ja-mecab`` for
Japanese output, plus chrF, on the corpus's test split made raw text exactly as the training text
was (``attnlab.data.enja.to_raw``). Besides the whole test split it reports:

- **long inputs**: three consecutive test sentences joined into one (20+ words, longer than any
  training sentence, which has at most 16), with the joined references;
- **names and numbers**: the test pairs whose English holds a person's or a place's name or a number;
- **own sentences**: sentences written for this benchmark (not from the corpus), with their output.

With ``--runs`` (training folders holding ``log.jsonl``) it also plots validation BLEU against
training minutes. Prints Markdown; ``--out`` also writes it with ``summary.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from multi30k import bleu_curve  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

from attnlab.data import enja  # noqa: E402
from attnlab.loading import load_model  # noqa: E402
from attnlab.metrics import bleu, chrf  # noqa: E402

# Written for this benchmark: everyday sentences, names, numbers, a long one and an unusual one.
OWN = {
    "ja-en": [
        "猫が犬を追いかけている。",
        "犬が猫を追いかけている。",
        "明日は雨が降るかもしれないので、傘を持って行きなさい。",
        "トムは毎朝七時に起きて、駅まで歩いて行きます。",
        "この本は三年前に京都で買いました。",
        "私の姉は病院で看護師として働いています。",
        "昨日の会議はとても長かったが、結論は出なかった。",
        "駅の近くに新しいパン屋ができた。",
        "彼女は英語とフランス語を話せます。",
        "もし時間があれば、一緒に映画を見に行きませんか。",
    ],
    "en-ja": [
        "The cat is chasing the dog.",
        "I have lived in Tokyo for ten years.",
        "Could you tell me the way to the station?",
        "Tom bought three apples and two oranges.",
        "My mother gets up early every morning.",
        "It was so cold yesterday that the river froze.",
        "She has been studying English since she was a child.",
        "Please call me when you arrive at the airport.",
        "This computer is too old to use.",
        "If it rains tomorrow, we will stay at home and read books.",
    ],
}

NAMES = r"tom|mary|john|jim|bill|ken|jack|bob|betty|jane|meg|mike|lucy|tony|kyoto|tokyo|osaka|london|paris|new york"
NUMBER_WORDS = r"two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|fifty|hundred|thousand"
SPECIAL = re.compile(rf"\b({NAMES}|{NUMBER_WORDS})\b|\d")


def read_raw(data: Path, split: str, lang: str) -> list[str]:
    return [enja.to_raw(line, lang) for line in (data / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()]


def score(translator, sources, references, beam: int) -> dict:
    t0 = time.perf_counter()
    hyps = [t.text for t in translator.translate(sources, beam_size=beam)]
    seconds = time.perf_counter() - t0
    return {
        "bleu": bleu(hyps, references, tokenize=translator.bleu_tokenize),
        "chrf": chrf(hyps, references),
        "n": len(sources),
        "sentences_per_s": len(sources) / seconds,
    }


def joined(lines: list[str], lang: str, k: int = 3) -> list[str]:
    sep = "" if lang == "ja" else " "
    return [sep.join(lines[i : i + k]) for i in range(0, len(lines) - k + 1, k)]


def long_pairs(test: dict[str, list[str]], src: str, tgt: str) -> tuple[list[str], list[str]]:
    """Three consecutive test pairs joined into one, kept when the English side has 20+ words."""
    keep = [i for i, en in enumerate(joined(test["en"], "en")) if len(en.split()) >= 20]
    sources, refs = joined(test[src], src), joined(test[tgt], tgt)
    return [sources[i] for i in keep], [refs[i] for i in keep]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "small_parallel_enja")
    parser.add_argument("--ja-en", default="ja-en", help="model folder or shipped name")
    parser.add_argument("--en-ja", default="en-ja", help="model folder or shipped name")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--runs", type=Path, nargs="*", default=[], help="training folders (log.jsonl) to plot")
    parser.add_argument("--out", type=Path, default=None, help="write report.md, summary.json and the curve here")
    args = parser.parse_args()
    for name in ("test.en", "test.ja"):
        if not (args.data / name).is_file():
            print(f"missing {args.data / name}: pass --data DIR holding small_parallel_enja", file=sys.stderr)
            return 2
    test = {lang: read_raw(args.data, "test", lang) for lang in ("en", "ja")}
    special = [i for i, en in enumerate(test["en"]) if SPECIAL.search(en)]
    lines, summary = [], {"beam": args.beam, "directions": {}}
    lines.append(f"## small_parallel_enja test split (beam {args.beam})\n")
    lines.append("| direction | subset | sentences | BLEU | chrF | sentences/s |\n|---|---|---:|---:|---:|---:|")
    for direction, model in (("ja-en", args.ja_en), ("en-ja", args.en_ja)):
        src, tgt = direction.split("-")
        translator = load_model(model, family="translate")
        translator.resolve_precision()  # ("auto" measured, or read, before the timed translations)
        subsets = {
            "all": (test[src], test[tgt]),
            "long (3 joined, 20+ words)": long_pairs(test, src, tgt),
            "names and numbers": ([test[src][i] for i in special], [test[tgt][i] for i in special]),
        }
        results = {}
        for name, (sources, refs) in subsets.items():
            r = results[name] = score(translator, sources, refs, args.beam)
            lines.append(
                f"| {direction} | {name} | {r['n']} | {r['bleu']:.1f} | {r['chrf']:.1f} | {r['sentences_per_s']:.1f} |"
            )
        own = translator.translate(OWN[direction], beam_size=args.beam)
        results["own"] = [(t.source, t.text) for t in own]
        summary["directions"][direction] = results
    for direction in ("ja-en", "en-ja"):
        lines.append(f"\n### {direction}: sentences written for this benchmark\n")
        lines.append("| input | output |\n|---|---|")
        lines += [f"| {s} | {t} |" for s, t in summary["directions"][direction]["own"]]
    if args.runs:
        from attnlab.viz import plot_curves

        curves = {run.name: bleu_curve(run / "log.jsonl") for run in args.runs}
        summary["curves"] = curves
        lines.append("\n### validation BLEU (greedy, 500 dev sentences) against training minutes\n")
        lines.append("| run | step | minutes | BLEU |\n|---|---:|---:|---:|")
        for run, curve in curves.items():
            lines += [f"| {run} | {step} | {m:.1f} | {b:.1f} |" for m, b, step in curve]
        if args.out:
            path = plot_curves(
                {run: ([m for m, _, _ in c], [b for _, b, _ in c]) for run, c in curves.items()},
                args.out / "bleu_vs_minutes.png",
                xlabel="training minutes (evaluation excluded)",
                ylabel="validation sacreBLEU",
                title="small_parallel_enja, attnlab ja-en / en-ja presets",
            )
            lines.append(f"\n![BLEU against minutes]({path.name})")
    report = "\n".join(lines)
    print(report)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report.md").write_text(report + "\n", encoding="utf-8")
        (args.out / "summary.json").write_text(json.dumps(summary, ensure_ascii=False, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
