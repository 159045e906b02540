"""Thirty everyday sentences per direction, and two paragraphs, through the shipped translators.

Not a score: the lines a reader would try first, printed beside their outputs so that a person
can judge them (the closing notes and docs/translators.md quote this output). The sentences are
in ``benchmarks/everyday/{ja,en}.txt`` (written for attnlab, none taken from a corpus), the
paragraphs in ``paragraphs.{ja,en}.txt``; a paragraph goes through ``Translator.translate_text``
(split into sentences, translated as one batch, joined again).

Run: ``python benchmarks/translate_everyday.py [--ja-en MODEL] [--en-ja MODEL] [--beam 4]``
(MODEL: a shipped name or a model folder, e.g. an older model to compare with).

Shape:
    no tensors: text in, a Markdown table out.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from attnlab import machine
from attnlab.loading import load_model

HERE = Path(__file__).parent / "everyday"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ⏎ ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ja-en", default="ja-en", help="the ja→en model (shipped name or folder)")
    parser.add_argument("--en-ja", default="en-ja", help="the en→ja model (shipped name or folder)")
    parser.add_argument("--beam", type=int, default=4, help="beam size (1 = greedy)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    from attnlab.accel import calibrate

    calibrate.ensure()  # the engine's lines measured (or read) before any timed call
    print(f"CPU: {machine.cpu_name()}; beam {args.beam}\n")
    for src, model in (("ja", args.ja_en), ("en", args.en_ja)):
        translator = load_model(model, family="translate")
        lines = (HERE / f"{src}.txt").read_text(encoding="utf-8").splitlines()
        outputs = translator.translate_text(lines, beam_size=args.beam)
        print(f"### {model} ({src} → {'en' if src == 'ja' else 'ja'})\n")
        print("| # | input | output |\n|---:|---|---|")
        for i, (line, out) in enumerate(zip(lines, outputs), 1):
            print(f"| {i} | {_cell(line)} | {_cell(out)} |")
        paragraphs = (HERE / f"paragraphs.{src}.txt").read_text(encoding="utf-8").splitlines()
        for text, out in zip(paragraphs, translator.translate_text(paragraphs, beam_size=args.beam)):
            print(f"| ¶ | {_cell(text)} | {_cell(out)} |")
        print()


if __name__ == "__main__":
    main()
