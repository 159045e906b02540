"""Export a trained translator to CTranslate2, OpenNMT's C++ inference engine for Transformers.

``attnlab export --model DIR --to ctranslate2 OUT`` (the translation recipe's command) calls
:func:`export_ctranslate2`, which fills a :class:`ctranslate2.specs.TransformerSpec` directly from
the model's weights: there is no intermediate OpenNMT-py, Fairseq or Marian checkpoint, because none
of those converters reads attnlab's layout without a lossy detour (below). The folder it writes is a
CTranslate2 model (``model.bin``, ``config.json``, the vocabularies as token lists) plus attnlab's
own tokenizers, so :class:`CTranslate2Translator` can turn text into the token strings CTranslate2
reads and its output back into text, exactly as :class:`attnlab.inference.translate.Translator` does.
(``--to hf``, a HuggingFace ``transformers`` model that ``generate`` runs, is :mod:`attnlab.export_hf`.)

How attnlab's Transformer maps onto CTranslate2's ``TransformerSpec``:

============================  ===============================================================
attnlab                       CTranslate2
============================  ===============================================================
``norm="pre"`` / ``"post"``   ``pre_norm=True`` / ``False``; the final encoder and decoder
                              LayerNorm exist only in pre-norm, in both
LayerNorm ε (1e-5)            ``config.layer_norm_epsilon`` (CTranslate2 defaults to 1e-6)
embedding · √D                ``scale_embeddings`` (the same √D)
sinusoidal positions          an explicit ``position_encodings.encodings`` table: CTranslate2's
                              built-in sinusoid is another function (sines then cosines
                              concatenated, not interleaved; positions counted from 1, not 0;
                              frequencies spaced by ``log(10⁴)/(D/2 − 1)``, not ``/(D/2)``),
                              so the table is written out, ``max_len`` rows
separate Q, K, V projections  fused: ``[Q; K; V]`` for self-attention, ``[K; V]`` for cross
shared / tied embeddings      the same array given twice (CTranslate2 stores it once)
relu, gelu, gelu_tanh         ``RELU``, ``GELU`` (erf), ``GELUTanh``
special tokens                ``[UNK]``, ``[BOS]`` (decoder start), ``[EOS]``; no source BOS/EOS
============================  ===============================================================

What cannot be exported, and why:

- **windowed self-attention** (``attention="sliding_window"``, ``"global_window"``, ``"chunked"``...):
  CTranslate2's ``sliding_window`` is a KV-cache limit for decoder-only models, not a mask on an
  encoder, and it has no global positions or chunks;
- **the RNN encoder–decoders**: no CTranslate2 specification has a recurrent layer;
- **sequences longer than ``max_len``**: the position table has ``max_len`` rows, as in attnlab.

The two engines agree on what is computed (the test checks logits within 1e-4 and identical greedy
output in fp32), but their **beam searches keep different hypotheses**: attnlab keeps a finished
hypothesis in its beam slot with a frozen score until every slot has finished, and normalises by
GNMT's ``((5 + |Y|) / 6)^α`` (``|Y|`` with the end token); CTranslate2 takes ``2K`` candidates,
moves a finished one out of the beam and refills the slot with the next live candidate, stops once
the best live hypothesis has finished (no penalty) or ``K`` have, and divides by ``|Y|^α``
(without the end token). With ``α = 0`` they pick the same translation whenever the first
hypothesis to finish is the best-scoring one; otherwise beam-4 outputs can differ.
"""

from __future__ import annotations

import abc
import json
import math
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .data import enja
from .data.tokenizers import load_tokenizer
from .positional import sinusoidal_encoding

__all__ = [
    "CTRANSLATE2_INSTALL",
    "EXPORT_INFO",
    "QUANTIZATIONS",
    "require_ctranslate2",
    "check_exportable",
    "ctranslate2_spec",
    "export_ctranslate2",
    "ExportedTranslator",
    "CTranslate2Translator",
]

#: How to get the optional engine.
CTRANSLATE2_INSTALL = "pip install 'attnlab[ctranslate2]'"
#: What the export writes next to CTranslate2's files: the languages and the BLEU tokenizer.
EXPORT_INFO = "attnlab_export.json"
#: Weight types ``--quantization`` stores (CTranslate2 also converts at load time, ``compute_type``).
QUANTIZATIONS = ("float32", "bfloat16", "float16", "int8", "int8_float32", "int8_bfloat16", "int16")

_ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "gelu_tanh": "GELUTanh"}


def require_ctranslate2():
    """The ``ctranslate2`` module, or an ImportError that says how to install it."""
    try:
        import ctranslate2
    except ImportError as err:
        raise ImportError(
            f"CTranslate2 is not installed; it is an optional extra: {CTRANSLATE2_INSTALL}", name="ctranslate2"
        ) from err
    return ctranslate2


def check_exportable(model: nn.Module) -> None:
    """Raise ``ValueError`` unless ``model`` is an attnlab Transformer that CTranslate2 can express
    (the module docstring lists what it cannot and why)."""
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type != "transformer":
        raise ValueError(
            f"only the Transformer translator can be exported to CTranslate2, not model_type {model_type!r} "
            "(CTranslate2 has no recurrent layers)"
        )
    if config.attention != "full":
        raise ValueError(
            f"attention={config.attention!r} cannot be exported: CTranslate2 has no windowed or chunked "
            "encoder self-attention (only full attention maps onto its TransformerSpec)"
        )
    if config.activation not in _ACTIVATIONS:
        raise ValueError(
            f"activation {config.activation!r} has no CTranslate2 equivalent; known: {sorted(_ACTIVATIONS)}"
        )


def _array(t: torch.Tensor) -> np.ndarray:
    # fp32 on the CPU whatever the model was loaded as: CTranslate2 quantizes from fp32.
    return t.detach().to(device="cpu", dtype=torch.float32).contiguous().numpy()


def _set_linear(spec, *linears: nn.Linear) -> None:
    """One CTranslate2 dense layer from one or more of ours stacked along the output dimension
    (fused Q/K/V: CTranslate2 computes them in one product)."""
    spec.weight = _array(torch.cat([lin.weight for lin in linears]))  # (ΣD_out, D_in)
    if linears[0].bias is not None:
        spec.bias = _array(torch.cat([lin.bias for lin in linears]))  # (ΣD_out,)


def _set_norm(spec, norm: nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def _vocabulary(tok, expected: int, side: str) -> list[str]:
    tokens = [tok.id_to_token(i) for i in range(tok.vocab_size)]
    if len(tokens) != expected:
        raise ValueError(f"the {side} tokenizer has {len(tokens)} tokens but the model's {side} vocabulary {expected}")
    if len(set(tokens)) != len(tokens):
        raise ValueError(f"the {side} vocabulary has repeated token strings; CTranslate2 looks tokens up by string")
    return tokens


def ctranslate2_spec(model: nn.Module, src_tok, tgt_tok):
    """A validated :class:`ctranslate2.specs.TransformerSpec` holding ``model``'s weights and vocabularies.

    Raises:
        ImportError: CTranslate2 is not installed.
        ValueError: a model :func:`check_exportable` refuses, or tokenizers that do not fit it.

    Shape:
        no tensors in or out; the spec holds fp32 arrays (embeddings ``(V, D)``, fused self-attention
        ``(3D, D)``, cross-attention keys/values ``(2D, D)``, positions ``(max_len, D)``)
    """
    check_exportable(model)
    ct2 = require_ctranslate2()
    specs = ct2.specs
    c = model.config
    pre_norm = c.norm == "pre"
    activation = getattr(specs.Activation, _ACTIVATIONS[c.activation])
    encoder = specs.TransformerEncoderSpec(c.n_encoder_layers, c.n_heads, pre_norm=pre_norm, activation=activation)
    decoder = specs.TransformerDecoderSpec(c.n_decoder_layers, c.n_heads, pre_norm=pre_norm, activation=activation)
    # Our table, not CTranslate2's own sinusoid (a different function; see the module docstring).
    positions = _array(sinusoidal_encoding(c.max_len, c.d_model))  # (max_len, D)

    encoder.embeddings[0].weight = _array(model.src_embed.weight)
    encoder.scale_embeddings = math.sqrt(c.d_model)
    encoder.position_encodings.encodings = positions
    for layer, block in zip(encoder.layer, model.encoder):
        attn = block.self_attn
        _set_linear(layer.self_attention.linear[0], attn.q_proj, attn.k_proj, attn.v_proj)
        _set_linear(layer.self_attention.linear[1], attn.out_proj)
        _set_norm(layer.self_attention.layer_norm, block.attn_norm)
        _set_linear(layer.ffn.linear_0, block.ff.up_proj)
        _set_linear(layer.ffn.linear_1, block.ff.down_proj)
        _set_norm(layer.ffn.layer_norm, block.ff_norm)
    if pre_norm:
        _set_norm(encoder.layer_norm, model.encoder_norm)

    decoder.embeddings.weight = _array(model.tgt_embed.weight)
    decoder.scale_embeddings = math.sqrt(c.d_model)
    decoder.position_encodings.encodings = positions
    for layer, block in zip(decoder.layer, model.decoder):
        self_attn, cross = block.self_attn, block.cross_attn
        _set_linear(layer.self_attention.linear[0], self_attn.q_proj, self_attn.k_proj, self_attn.v_proj)
        _set_linear(layer.self_attention.linear[1], self_attn.out_proj)
        _set_norm(layer.self_attention.layer_norm, block.self_norm)
        _set_linear(layer.attention.linear[0], cross.q_proj)
        _set_linear(layer.attention.linear[1], cross.k_proj, cross.v_proj)
        _set_linear(layer.attention.linear[2], cross.out_proj)
        _set_norm(layer.attention.layer_norm, block.cross_norm)
        _set_linear(layer.ffn.linear_0, block.ff.up_proj)
        _set_linear(layer.ffn.linear_1, block.ff.down_proj)
        _set_norm(layer.ffn.layer_norm, block.ff_norm)
    if pre_norm:
        _set_norm(decoder.layer_norm, model.decoder_norm)
    _set_linear(decoder.projection, model.out_proj)

    spec = specs.TransformerSpec(encoder, decoder)
    specials = tgt_tok.special_tokens
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = specials.unk, specials.bos, specials.eos
    spec.config.decoder_start_token = specials.bos
    spec.config.add_source_bos = spec.config.add_source_eos = False  # attnlab's sources carry neither
    spec.config.layer_norm_epsilon = model.encoder[0].attn_norm.eps if c.n_encoder_layers else 1e-5
    spec.register_source_vocabulary(_vocabulary(src_tok, c.src_vocab_size, "source"))
    spec.register_target_vocabulary(_vocabulary(tgt_tok, c.tgt_vocab_size, "target"))
    for tok, name in ((src_tok, "source"), (tgt_tok, "target")):
        if (tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id) != (c.pad_id, 1, 2, 3):
            raise ValueError(f"the {name} tokenizer's special ids differ from attnlab's (pad 0, unk 1, bos 2, eos 3)")
    spec.validate()
    return spec


def export_ctranslate2(
    model: nn.Module,
    src_tok,
    tgt_tok,
    out: str | Path,
    *,
    quantization: str | None = None,
    info: dict[str, Any] | None = None,
    force: bool = False,
) -> Path:
    """Write ``model`` as a CTranslate2 model folder ``out`` (plus attnlab's tokenizers).

    Args:
        model: an attnlab :class:`~attnlab.models.transformer.Transformer`.
        src_tok, tgt_tok: its tokenizers (the same object for a joint vocabulary).
        out: the folder to write; it must not exist unless ``force``.
        quantization: store the weights as one of :data:`QUANTIZATIONS` (None: fp32).
        info: what :class:`CTranslate2Translator` needs besides (``src_lang``, ``tgt_lang``,
            ``bleu_tokenize``), written to :data:`EXPORT_INFO`.
        force: replace an existing ``out``.

    Raises:
        ImportError: CTranslate2 is not installed.
        ValueError: a model CTranslate2 cannot express, or an unknown quantization.
        FileExistsError: ``out`` exists and ``force`` is not set.

    Shape:
        no tensors; returns ``out``.
    """
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ValueError(f"unknown quantization {quantization!r}; choose from {list(QUANTIZATIONS)}")

    def build():
        spec = ctranslate2_spec(model, src_tok, tgt_tok)
        spec.optimize(quantization=quantization)
        return spec

    def save(spec, folder: Path) -> dict[str, Any]:
        spec.save(str(folder))
        return {"format": "attnlab.ctranslate2", "version": 1, "quantization": quantization or "float32"}

    return write_export(out, build, save, src_tok, tgt_tok, info=info, force=force)


def write_export(
    out: str | Path,
    build: Callable[[], Any],
    save: Callable[[Any, Path], dict[str, Any]],
    src_tok,
    tgt_tok,
    *,
    info: dict[str, Any] | None = None,
    force: bool = False,
) -> Path:
    """The folder of an export, for every target engine: refuse an existing ``out`` unless
    ``force``; ``build()`` the engine's model *before* anything is deleted (a model the engine
    cannot express leaves ``out`` alone); replace ``out``; ``save(model, out)`` writes the engine's
    files and returns its fields of :data:`EXPORT_INFO`; then attnlab's tokenizers (one file for a
    joint vocabulary) and :data:`EXPORT_INFO` with ``info`` on top.

    Shape:
        no tensors; returns ``out``.
    """
    out = Path(out)
    if out.exists() and not force:
        raise FileExistsError(f"{out} exists; choose another folder or pass --force to replace it")
    built = build()
    if out.exists():
        shutil.rmtree(out) if out.is_dir() else out.unlink()
    out.mkdir(parents=True)
    payload = save(built, out)
    src_tok.save(out, "src_tokenizer")
    if tgt_tok is not src_tok:
        tgt_tok.save(out, "tgt_tokenizer")
    payload = {**payload, **(info or {})}
    (out / EXPORT_INFO).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return out


class ExportedTranslator(abc.ABC):
    """Text in, text out for a folder written by an attnlab export, tokenized by attnlab's tokenizers.

    What every engine shares: reading :data:`EXPORT_INFO` and the tokenizers, normalising the input
    as the model's training text was, and cutting the sentences into batches as
    :meth:`attnlab.inference.translate.Translator.translate` does (sorted by length, the same length
    limit per batch, ``min(2·S + 10, max_len − 1)``), so that greedy decoding gives the same tokens
    as attnlab. A subclass decodes one batch (:meth:`_decode`).

    Args:
        path: a folder written by :func:`export_ctranslate2` or :func:`attnlab.export_hf.export_hf`.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        info_file = self.path / EXPORT_INFO
        if not info_file.is_file():
            raise FileNotFoundError(f"{self.path}: no {EXPORT_INFO}; expected a folder written by `attnlab export`")
        self.info = json.loads(info_file.read_text(encoding="utf-8"))
        self.src_tok = load_tokenizer(self.path / "src_tokenizer.json")
        tgt = self.path / "tgt_tokenizer.json"
        self.tgt_tok = load_tokenizer(tgt) if tgt.is_file() else self.src_tok
        self.src_lang, self.tgt_lang = self.info.get("src_lang"), self.info.get("tgt_lang")
        self.bleu_tokenize = self.info.get("bleu_tokenize", "13a")
        self.max_len = int(self.info.get("max_len", 512))

    @abc.abstractmethod
    def _decode(
        self, sources: list[list[int]], *, beam_size: int, length_penalty: float, limit: int
    ) -> list[list[int]]:
        """Decode one batch: the target ids of each source, without BOS or EOS, at most ``limit``
        tokens counting the end token."""

    def translate_tokens(
        self,
        sources: Sequence[Sequence[int]],
        *,
        beam_size: int = 1,
        length_penalty: float = 1.0,
        max_len: int | None = None,
        batch_size: int = 64,
    ) -> list[list[int]]:
        """Decode lists of source ids; returns the target ids of each, without BOS or EOS.

        Shape:
            ``N`` id lists → ``N`` id lists
        """
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        results: list[list[int]] = [[] for _ in sources]
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            S = max(len(sources[i]) for i in idx)
            limit = max_len or min(2 * S + 10, self.max_len - 1)
            batch = [list(sources[i]) for i in idx]
            outputs = self._decode(batch, beam_size=beam_size, length_penalty=length_penalty, limit=limit)
            for i, ids in zip(idx, outputs):
                results[i] = ids
        return results

    def translate(
        self, texts: Sequence[str], *, beam_size: int = 1, length_penalty: float = 1.0, batch_size: int = 64
    ) -> list[str]:
        """Translate sentences, normalised as the model's training text was (see the class)."""
        lowercase = self.info.get("lowercase", True)  # as load_translator reads config.json
        inputs = [enja.normalize_input(x, self.src_lang, lowercase) for x in texts] if self.src_lang else list(texts)
        encoded = self.src_tok.encode_batch(inputs)
        for text, ids in zip(texts, encoded):
            if not ids:
                raise ValueError(f"cannot translate {text!r}: it has no tokens")
        ids = self.translate_tokens(encoded, beam_size=beam_size, length_penalty=length_penalty, batch_size=batch_size)
        return self.tgt_tok.decode_batch(ids)


class CTranslate2Translator(ExportedTranslator):
    """An exported translator run by CTranslate2: text in, text out, tokenized by attnlab's tokenizers
    (batching and normalisation: :class:`ExportedTranslator`).

    Args:
        path: a folder written by :func:`export_ctranslate2`.
        compute_type: CTranslate2's arithmetic (``float32``, ``int8``, ``bfloat16``, ``default``...).
        threads: CPU threads of one translation (``intra_threads``).
    """

    def __init__(self, path: str | Path, *, compute_type: str = "float32", threads: int = 1) -> None:
        ct2 = require_ctranslate2()
        super().__init__(path)
        self.translator = ct2.Translator(
            str(self.path), device="cpu", compute_type=compute_type, intra_threads=threads, inter_threads=1
        )

    def _decode(
        self, sources: list[list[int]], *, beam_size: int, length_penalty: float, limit: int
    ) -> list[list[int]]:
        to_token, to_id = self.src_tok.id_to_token, self.tgt_tok.token_to_id
        outputs = self.translator.translate_batch(
            [[to_token(x) for x in s] for s in sources],
            beam_size=beam_size,
            length_penalty=length_penalty,
            max_decoding_length=limit,
            min_decoding_length=0,  # attnlab lets EOS come first; CTranslate2's default forbids it
            max_input_length=0,
        )
        return [[to_id(t) for t in result.hypotheses[0]] for result in outputs]
