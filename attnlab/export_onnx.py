"""A shipped (or trained) translator as the in-page models of the static site, and their decode fixtures.

The site's JavaScript runs attnlab's translators through onnxruntime-web from two ONNX graphs per
translator (an encoder, and one decoder step with its cache: :mod:`attnlab.onnx_graphs` builds
them) and decodes with its own greedy and beam search. This module is what the site build calls:

- :func:`export_translator_onnx` loads a translator the way ``attnlab translate`` does
  (:func:`attnlab.loading.load_model`, in fp32) and writes its folder
  (``encoder.onnx``, ``decoder.onnx``, ``meta.json``, the tokenizer files);
- :func:`write_decode_fixture` writes what the page's decoding must reproduce token for token:
  the greedy and beam-4 ids of :mod:`attnlab.decode` on the PyTorch model, with the settings
  :class:`~attnlab.inference.translate.Translator` decodes with (its ``alpha``, its output limit).

It sits above the recipes because it loads through them; ``attnlab export --to onnx`` (the
recipe's command) calls :func:`attnlab.onnx_graphs.export_onnx` with the model it has loaded.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Sequence
from pathlib import Path

import torch

from .data import enja
from .decode import beam_search, greedy_decode
from .inference.translate import Translator, output_limit
from .loading import load_model
from .onnx_graphs import export_onnx
from .onnx_rnn import export_pointer_generator_onnx, export_rnn_onnx

__all__ = [
    "FIXTURE_BEAM",
    "export_rnn_translator_onnx",
    "export_summarizer_onnx",
    "export_translator_onnx",
    "write_decode_fixture",
    "source_ids",
    "translator_alpha",
]

#: The beam of the fixtures' beam search (the page's beam).
FIXTURE_BEAM = 4


def translator_alpha() -> float:
    """The length-penalty exponent :meth:`Translator.translate` uses unless told otherwise.

    Shape:
        no tensors
    """
    return float(inspect.signature(Translator.translate).parameters["alpha"].default)


def export_translator_onnx(
    model_dir_or_name: str | Path,
    out_dir: str | Path,
    *,
    weights: str = "auto",
    force: bool = False,
    taps: bool = False,
) -> Path:
    """Write a translator's in-page models: ``out_dir`` gets ``encoder.onnx``, ``decoder.onnx``,
    ``meta.json`` and the tokenizer files (:func:`attnlab.onnx_graphs.export_onnx`).

    Args:
        model_dir_or_name: a shipped translator's name (``ja-en``, ``en-ja``, ``demo``) or a model
            folder written by ``attnlab train translate``.
        out_dir: the folder to write; it must not exist unless ``force``.
        weights: how the graphs store the weights: ``"auto"`` (the smallest storage that is exact
            for the model: int8 for ja-en and en-ja, fp16 for demo), ``"fp16"``, ``"fp32"``, ``"int8"``.
        force: replace an existing ``out_dir``.
        taps: also give the encoder the first layer's intermediate tensors as outputs
            (:data:`attnlab.onnx_graphs.ENCODER_TAPS`; §7's token walk reads them).

    Raises:
        ValueError: a model the graphs cannot express (an RNN, windowed attention), in one line.

    Shape:
        no tensors; returns ``out_dir``.
    """
    translator = load_model(model_dir_or_name, precision="fp32", family="translate")
    info = {
        "name": Path(str(model_dir_or_name)).name,
        "src_lang": translator.src_lang,
        "tgt_lang": translator.tgt_lang,
        "lowercase": translator.lowercase,
    }
    return export_onnx(
        translator.model,
        translator.src_tok,
        translator.tgt_tok,
        out_dir,
        weights=weights,
        info=info,
        force=force,
        taps=taps,
    )


def source_ids(translator: Translator, texts: Sequence[str]) -> list[list[int]]:
    """The source ids the translator decodes for ``texts``: normalised as its training text was,
    then encoded (no BOS or EOS: ``meta.json``'s ``source_wrap``).

    Shape:
        ``N`` texts → ``N`` id lists
    """
    lang = translator.src_lang
    inputs = [enja.normalize_input(x, lang, translator.lowercase) for x in texts] if lang else list(texts)
    encoded = translator.src_tok.encode_batch(inputs)
    for text, ids in zip(texts, encoded):
        if not ids:
            raise ValueError(f"cannot translate {text!r}: it has no tokens")
    return encoded


@torch.no_grad()
def write_decode_fixture(model_name: str | Path, sentences: Sequence[str], out_path: str | Path) -> Path:
    """Write ``decode_fixture.json``: for each sentence ``{"text", "src_ids", "greedy", "beam4",
    "beam4_score"}``, decoded one sentence at a time (the page's batch of one) by
    :func:`attnlab.decode.greedy_decode` and :func:`attnlab.decode.beam_search` (beam
    :data:`FIXTURE_BEAM`, :func:`translator_alpha`) on the fp32 PyTorch model, at most
    :func:`attnlab.inference.translate.output_limit` tokens as the translator allows. Ids are
    without BOS and EOS; ``beam4_score`` is the chosen hypothesis' log-probability divided by the
    length penalty.

    Shape:
        ``N`` sentences → a JSON list of ``N`` records
    """
    translator = load_model(model_name, precision="fp32", family="translate")
    model, tgt = translator.model, translator.tgt_tok
    alpha, max_len = translator_alpha(), getattr(model.config, "max_len", 512)
    records = []
    for text, ids in zip(sentences, source_ids(translator, sentences)):
        src = torch.tensor([ids], dtype=torch.long)  # (1, S)
        kw = dict(bos_id=tgt.bos_id, eos_id=tgt.eos_id, pad_id=tgt.pad_id, max_len=output_limit(len(ids), max_len))
        greedy = greedy_decode(model, src, **kw)[0]
        beam = beam_search(model, src, beam_size=FIXTURE_BEAM, alpha=alpha, **kw)[0]
        records.append(
            {"text": text, "src_ids": ids, "greedy": greedy.tokens, "beam4": beam.tokens, "beam4_score": beam.score}
        )
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = ",\n".join(json.dumps(r, ensure_ascii=False) for r in records)  # one sentence a line
    out.write_text(f"[\n{lines}\n]\n", encoding="utf-8")
    return out


# -- the RNN pair (§2, §3) ---------------------------------------------------------------------------


def export_rnn_translator_onnx(
    model_dir_or_name: str | Path, out_dir: str | Path, *, weights: str = "auto", force: bool = False
) -> Path:
    """Write an RNN translator's in-page models (``rnn-plain``, ``rnn-attention`` or a folder of
    ``attnlab train translate --arch rnn``): ``encoder.onnx``, ``decoder.onnx``, ``meta.json``
    (``kind: "rnn"``) and the tokenizer files (:func:`attnlab.onnx_rnn.export_rnn_onnx`).

    Args:
        model_dir_or_name: a shipped RNN's name or a model folder.
        out_dir: the folder to write; it must not exist unless ``force``.
        weights: ``"auto"`` (the smallest exact storage: fp16 for the shipped pair), ``"fp16"``,
            ``"fp32"``, ``"int8"``.
        force: replace an existing ``out_dir``.

    Raises:
        ValueError: not an RNN with attention "none" or "additive", in one line.

    Shape:
        no tensors; returns ``out_dir``.
    """
    translator = load_model(model_dir_or_name, precision="fp32", family="translate")
    info = {
        "name": Path(str(model_dir_or_name)).name,
        "src_lang": translator.src_lang,
        "tgt_lang": translator.tgt_lang,
        "lowercase": translator.lowercase,
    }
    return export_rnn_onnx(
        translator.model, translator.src_tok, translator.tgt_tok, out_dir, weights=weights, info=info, force=force
    )


def export_summarizer_onnx(
    model_dir_or_name: str | Path, out_dir: str | Path, *, weights: str = "auto", force: bool = False
) -> Path:
    """Write a pointer-generator summarizer's in-page models (``facts-summarizer`` or a folder of
    ``attnlab train summarize``): ``encoder.onnx``, ``decoder.onnx``, ``meta.json`` (``kind:
    "pointer_generator"``, with the summarizer's limits) and ``vocab.json``
    (:func:`attnlab.onnx_rnn.export_pointer_generator_onnx`).

    Shape:
        no tensors; returns ``out_dir``.
    """
    s = load_model(model_dir_or_name, family="summarize")
    s.model.float()
    info = {
        "name": Path(str(model_dir_or_name)).name,
        "max_src_len": s.max_src_len,
        "max_summary_len": s.max_summary_len,
        "beam_size": s.beam_size,
    }
    return export_pointer_generator_onnx(s.model, s.vocab, out_dir, weights=weights, info=info, force=force)
