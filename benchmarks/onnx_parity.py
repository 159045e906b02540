"""Do the exported ONNX translators decode as the PyTorch ones do, on real test sentences?

Exports a shipped translator as the static site does (:func:`attnlab.export_onnx.export_translator_onnx`),
then decodes the first ``--n`` sentences of small_parallel_enja's test set one at a time twice:
with attnlab.decode on the PyTorch model, and with the same search over onnxruntime
(:class:`attnlab.onnx_graphs.OnnxSeq2Seq`). Prints how many greedy outputs and beam-4 outputs
(the Translator's α) are identical, the largest score difference among identical beams, and the
sentences that differ. docs/export.md quotes its figures.

Run: ``python benchmarks/onnx_parity.py --model ja-en --data ../shared/data`` (a few minutes on
two busy cores; ``--beam-n`` limits the beam-4 part).

Shape:
    no tensors: sentences in, counts out.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from attnlab.decode import beam_search, greedy_decode
from attnlab.export_onnx import export_translator_onnx, source_ids, translator_alpha
from attnlab.inference.translate import output_limit
from attnlab.loading import load_model
from attnlab.onnx_graphs import OnnxSeq2Seq


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("ja-en", "en-ja"), default="ja-en")
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="the folder of small_parallel_enja")
    parser.add_argument("--n", type=int, default=500, help="test sentences decoded greedily")
    parser.add_argument("--beam-n", type=int, default=200, help="of those, how many also with beam 4")
    parser.add_argument("--weights", default="auto", help="the export's weight storage (auto, fp16, fp32, int8)")
    args = parser.parse_args()

    torch.set_num_threads(1)  # one thread for each engine: the comparison, not the speed
    side = args.model.split("-")[0]
    lines = (args.data / "small_parallel_enja" / f"test.{side}").read_text(encoding="utf-8").splitlines()[: args.n]
    if side == "ja":
        lines = [line.replace(" ", "") for line in lines]  # the corpus splits Japanese words with spaces
    translator = load_model(args.model, precision="fp32", family="translate")
    folder = export_translator_onnx(args.model, Path(tempfile.mkdtemp()) / args.model, weights=args.weights)
    onnx = OnnxSeq2Seq(folder)
    tok, alpha = translator.tgt_tok, translator_alpha()
    same_greedy = same_beam = 0
    worst = 0.0
    differ: list[str] = []
    start = time.perf_counter()
    for i, ids in enumerate(source_ids(translator, lines)):
        src = torch.tensor([ids])  # (1, S)
        kw = dict(bos_id=tok.bos_id, eos_id=tok.eos_id, pad_id=tok.pad_id, max_len=output_limit(len(ids), 512))
        a, b = greedy_decode(translator.model, src, **kw)[0], greedy_decode(onnx, src, **kw)[0]
        same_greedy += a.tokens == b.tokens
        if a.tokens != b.tokens:
            differ.append(f"greedy: {lines[i]}")
        if i < args.beam_n:
            a = beam_search(translator.model, src, beam_size=4, alpha=alpha, **kw)[0]
            b = beam_search(onnx, src, beam_size=4, alpha=alpha, **kw)[0]
            if a.tokens == b.tokens:
                same_beam += 1
                worst = max(worst, abs(a.score - b.score))
            else:
                differ.append(f"beam 4: {lines[i]}")
    seconds = time.perf_counter() - start
    print(
        f"{args.model} ({onnx.meta['weights']} weights): greedy identical {same_greedy}/{len(lines)}, "
        f"beam 4 identical {same_beam}/{min(args.beam_n, len(lines))} (max |Δ score| {worst:.1e}), {seconds:.0f} s"
    )
    for line in differ:
        print("  differs:", line)


if __name__ == "__main__":
    main()
