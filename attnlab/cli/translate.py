"""The command line of translate: `attnlab train translate`, `attnlab translate` and `attnlab evaluate`.

Parsing and printing only; the work is :mod:`attnlab.recipes.translate`'s (and :mod:`attnlab.inference`'s).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from ..data.corpus import read_lines, read_parallel
from ..decode import check_beam
from ..export import export_ctranslate2
from ..export_hf import export_hf, hf_architecture
from ..loading import load_model
from ..onnx_graphs import META_FILE, export_onnx
from ..recipes import TrainJob
from ..recipes.translate import TranslationSetup, raw_pairs, read_pairs, train_translation
from .training import print_training


def train_command(
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
) -> TrainJob:
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
        preset: a named preset (model size + training settings): multi30k, small, tiny.
        arch: model architecture (default: the preset's; transformer, or rnn when installed).
        attention: attention kind for architectures that have several (e.g. the RNN's additive).
        minutes: stop training after this many minutes (evaluation time excluded).
        epochs: number of passes over the training data.
        seed: random seed (data order, initialisation, dropout).
        resume: continue an interrupted run from OUT/last.
        on_empty: pairs with an empty side: skip them (with a count) or stop with file:line.
        overrides: further settings as key=value: model.d_model=512, train.lr=1e-3, vocab_size=4000.
    """

    def run(setup: TranslationSetup) -> None:
        train_pairs = read_pairs(train_src, train_tgt, train_tsv, "train", on_empty)
        valid_pairs = read_pairs(valid_src, valid_tgt, valid_tsv, "valid", on_empty)
        _, result, _ = train_translation(setup, train_pairs, valid_pairs, resume=resume)
        print_training(result, out, unit="target tokens")

    return TrainJob(
        preset,
        run,
        {"arch": arch, "model.attention": attention},
        overrides,
        out=out,
        minutes=minutes,
        epochs=epochs,
        seed=seed,
        resume=resume,
    )


def translate_command(
    text: list[str] | None = None,
    /,
    *,
    model: Path,
    input: Path | None = None,
    beam: int = 4,
    alpha: float = 0.6,
    attention_plot: Path | None = None,
    device: str = "cpu",
    precision: Literal["auto", "fp32", "bf16"] = "auto",
) -> int:
    """Translate sentences with a trained model.

    Args:
        text: sentences to translate (or use --input).
        model: a model folder written by `attnlab train translate` or `attnlab demo`, or a shipped model's name
            (ja-en, en-ja, demo, rnn-attention, rnn-plain).
        input: a file of sentences, one per line.
        beam: beam size (1 = greedy).
        alpha: length-penalty exponent of beam search (GNMT; 0 disables it).
        attention_plot: write the cross-attention heatmap of the first sentence here (PNG or SVG);
            a layer × head grid is written beside it with the suffix _grid.
        device: cpu, cuda or mps.
        precision: the numbers the model decodes in: auto (bf16 where this CPU computes it natively, a
            short measurement shows it faster and the model card allows it; else fp32), fp32 or bf16.
    """
    check_beam(beam, alpha)  # before the model is loaded
    sentences = list(text or [])
    if input is not None:
        sentences += [line for line in read_lines(input) if line.strip()]
    if not sentences:
        raise ValueError("nothing to translate: give sentences or --input FILE")
    translator = load_model(model, device=device, precision=precision, family="translate")
    # Each argument or input line is a text: several sentences are split, translated as one
    # batch and joined again (Translator.translate_text); the heatmap is of the first text whole.
    for line in translator.translate_text(sentences, beam_size=beam, alpha=alpha):
        print(line, flush=True)
    if attention_plot is not None:
        results = translator.translate(sentences[:1], beam_size=beam, alpha=alpha, return_attention=True)
        from ..viz import plot_attention, plot_attention_grid

        first = results[0]
        cross = first.cross_attention  # (L, H, T, S)
        if cross is None:
            raise ValueError(
                f"{model}: this model has no attention (an RNN with attention='none' reads only the "
                "encoder's final state), so there is no heatmap to draw"
            )
        plot_attention(
            cross[-1].mean(0),
            first.src_tokens,
            first.tgt_tokens,
            attention_plot,
            title="cross-attention (last layer, mean over heads)",
        )
        grid = attention_plot.with_name(attention_plot.stem + "_grid" + attention_plot.suffix)
        plot_attention_grid(cross, first.src_tokens, first.tgt_tokens, grid)
        print(f"attention heatmaps written to {attention_plot} and {grid}", file=sys.stderr)
    return 0


def evaluate_command(
    *,
    model: Path,
    src: Path,
    ref: Path,
    beam: int = 4,
    from_tokenized: bool = False,
    device: str = "cpu",
    precision: Literal["auto", "fp32", "bf16"] = "auto",
) -> int:
    """Score a trained translator on a test set: BLEU and chrF (sacreBLEU) and exact match.

    Args:
        model: a model folder written by `attnlab train translate` or `attnlab demo`, or a shipped model's name
            (ja-en, en-ja, demo, rnn-attention, rnn-plain).
        src: source sentences, one per line.
        ref: reference translations, line-aligned with --src.
        beam: beam size (1 = greedy).
        from_tokenized: the files are pre-tokenized like small_parallel_enja: make both sides raw text
            first, as the model's training text was (needs a model that knows its languages).
        device: cpu, cuda or mps.
        precision: the numbers the model decodes in: auto (bf16 where this CPU computes it natively, a
            short measurement shows it faster and the model card allows it; else fp32), fp32 or bf16.
    """
    check_beam(beam)
    corpus = read_parallel(src, ref, on_empty="error")
    translator = load_model(model, device=device, precision=precision, family="translate")
    sources, targets = corpus.sources, corpus.targets
    if from_tokenized:
        if not (translator.src_lang and translator.tgt_lang):
            raise ValueError(f"{model}: --from-tokenized needs a model trained with src_lang and tgt_lang")
        pairs = raw_pairs(list(zip(sources, targets)), translator.src_lang, translator.tgt_lang)
        sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    scores = translator.evaluate(sources, targets, beam_size=beam)
    print(
        f"BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}  exact match {100 * scores['exact_match']:.1f}%  "
        f"({scores['n']} sentences, BLEU tokenizer {translator.bleu_tokenize}, decoded in {translator.precision_used})"
    )
    return 0


def export_command(
    out: Path,
    /,
    *,
    model: Path,
    to: Literal["ctranslate2", "hf", "onnx"],
    quantization: Literal["float32", "bfloat16", "float16", "int8", "int8_float32", "int8_bfloat16", "int16"]
    | None = None,
    weights: Literal["auto", "fp16", "fp32", "int8"] | None = None,
    force: bool = False,
) -> int:
    """Export a trained translator to another inference engine: CTranslate2 (OpenNMT's C++ engine), HuggingFace transformers, or ONNX (the static site's in-page models).

    --to ctranslate2: OUT becomes a CTranslate2 model folder (model.bin, config.json, the vocabularies
    as token lists); load it with ctranslate2.Translator(OUT) or attnlab.export.CTranslate2Translator(OUT).
    Needs the optional extra: pip install 'attnlab[ctranslate2]'. --to hf: OUT becomes a transformers
    model folder (config.json, generation_config.json, model.safetensors: Pegasus for a pre-norm model,
    Marian for a post-norm one); load it with AutoModelForSeq2SeqLM.from_pretrained(OUT) or
    attnlab.export_hf.HFTranslator(OUT). Needs transformers 5 or newer: pip install 'attnlab[hf]'.
    --to onnx: OUT gets encoder.onnx, decoder.onnx (one decoding step with its cache, the attention
    weights as named outputs) and meta.json, what the static site runs with onnxruntime-web; needs
    pip install 'attnlab[site]'. All three write attnlab's tokenizers beside the model. Pre-norm and post-norm Transformers export;
    the RNN models and windowed attention do not (docs/export.md says why).

    Args:
        out: the folder to write.
        model: a model folder written by `attnlab train translate` or `attnlab demo`, or a shipped model's name
            (ja-en, en-ja, demo).
        to: the engine: ctranslate2, hf (HuggingFace transformers) or onnx (the static site's models).
        quantization: ctranslate2 only: store the weights in this type instead of fp32 (CTranslate2 can
            also convert when it loads a model, with compute_type).
        weights: onnx only: how the graphs store the weights (auto, the default: the smallest storage
            that gives the model's weights back exactly; fp16; fp32; int8 with one scale per row).
        force: replace OUT if it exists.
    """
    if to not in ("ctranslate2", "hf", "onnx"):
        raise ValueError(f"unknown export target {to!r}; choose ctranslate2, hf or onnx")
    if to != "ctranslate2" and quantization is not None:
        raise ValueError(f"--quantization applies to --to ctranslate2 only, not --to {to}")
    if to != "onnx" and weights is not None:
        raise ValueError(f"--weights applies to --to onnx only, not --to {to}")
    if out.exists() and not force:
        raise FileExistsError(f"{out} exists; choose another folder or pass --force to replace it")
    translator = load_model(model, family="translate")
    info = {
        "source_model": str(model),
        "src_lang": translator.src_lang,
        "tgt_lang": translator.tgt_lang,
        "bleu_tokenize": translator.bleu_tokenize,
        "lowercase": translator.lowercase,
        "max_len": getattr(translator.model.config, "max_len", 512),
    }
    if to == "onnx":
        info = {"name": Path(str(model)).name, **{k: info[k] for k in ("src_lang", "tgt_lang", "lowercase")}}
        export_onnx(
            translator.model,
            translator.src_tok,
            translator.tgt_tok,
            out,
            weights=weights or "auto",
            info=info,
            force=force,
        )
        stored = json.loads((out / META_FILE).read_text(encoding="utf-8"))["weights"]
        print(f"exported {model} to {out} (ONNX encoder and decoder step, {stored} weights)")
        return 0
    if to == "hf":
        export_hf(translator.model, translator.src_tok, translator.tgt_tok, out, info=info, force=force)
        architecture = {"pegasus": "Pegasus", "marian": "Marian"}[hf_architecture(translator.model)]
        print(f"exported {model} to {out} (HuggingFace transformers, {architecture}, float32 weights)")
        return 0
    export_ctranslate2(
        translator.model, translator.src_tok, translator.tgt_tok, out, quantization=quantization, info=info, force=force
    )
    print(f"exported {model} to {out} (CTranslate2, {quantization or 'float32'} weights)")
    return 0


#: The job's commands by name, as the CLI registers them.
COMMANDS: dict[str, Callable] = {
    "train translate": train_command,
    "translate": translate_command,
    "evaluate": evaluate_command,
    "export": export_command,
}
