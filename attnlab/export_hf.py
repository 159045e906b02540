"""Export a trained translator as a HuggingFace ``transformers`` model that ``generate`` runs.

``attnlab export --model DIR --to hf OUT`` calls :func:`export_hf`, which builds a ``transformers``
encoder–decoder of the architecture that computes what attnlab's Transformer computes, copies the
weights into it and writes it with ``save_pretrained`` (``config.json``, ``generation_config.json``,
``model.safetensors``), plus attnlab's tokenizers and :data:`attnlab.export.EXPORT_INFO`.
``AutoModelForSeq2SeqLM.from_pretrained(OUT)`` loads it; :class:`HFTranslator` turns text into the
ids it reads and its ``generate`` output back into text, as
:class:`attnlab.inference.translate.Translator` does.

Which architecture: both of ``transformers``' candidates have attnlab's block (separate Q, K, V
and output projections with biases, LayerNorm ε = 1e-5, a two-layer feed-forward net), embeddings
scaled by √D (``scale_embedding``), a sinusoidal position table counted from 0, and no LayerNorm
on the embeddings; they differ where attnlab's two normalisations differ.

============================  ===============================================================
attnlab                       ``transformers``
============================  ===============================================================
``norm="pre"``                ``PegasusForConditionalGeneration``: pre-norm layers and a final
                              encoder and decoder ``layer_norm``
``norm="post"``               ``MarianMTModel``: post-norm layers, no final LayerNorm
LayerNorm ε (1e-5)            ``nn.LayerNorm``'s default, which both use (no setting exists)
embedding · √D                ``scale_embedding=True``
sinusoidal positions          the same function with the hidden dimensions permuted (below)
relu, gelu, gelu_tanh         ``relu``, ``gelu`` (erf), ``gelu_pytorch_tanh``
shared, tied embeddings       ``tie_word_embeddings=True`` (Marian also
                              ``share_encoder_decoder_embeddings``): one matrix
separate vocabularies         Marian: ``vocab_size`` / ``decoder_vocab_size`` and
                              ``share_encoder_decoder_embeddings=False``; Pegasus: untied
                              (``tie_word_embeddings=False``), one ``vocab_size`` = the larger
                              vocabulary, the smaller one padded with zero rows, and a
                              ``final_logits_bias`` of −∞ on target ids past the target
                              vocabulary, so they are never chosen
output projection             ``lm_head`` (no bias), ``final_logits_bias`` zeros
``[BOS]``, ``[EOS]``, pad     ``decoder_start_token_id``, ``eos_token_id``, ``pad_token_id``;
                              ``forced_eos_token_id=None`` (attnlab forces nothing)
``max_len``                   ``max_position_embeddings``
============================  ===============================================================

The position table: ``transformers``' sinusoid (``create_weight`` of both models) puts the sines of
all ``D/2`` frequencies in dimensions ``0 … D/2 − 1`` and the cosines in ``D/2 … D − 1``; attnlab's,
as the paper, interleaves them (sine in ``2i``, cosine in ``2i + 1``). The frequencies and the
positions are the same. Marian does not even store its table (``_keys_to_ignore_on_save``): it is
recomputed at every load, so writing attnlab's table into the file cannot work. Instead the export
permutes the hidden dimensions of the whole model: dimension ``h`` of the exported model holds
attnlab's dimension ``perm[h]`` (:func:`hf_permutation`), in the embeddings, in every LayerNorm, in
the columns of every matrix that reads the residual stream and the rows of every matrix that writes
it. LayerNorm, attention and the feed-forward net commute with such a permutation, and the output
projection reads it back, so the logits are the same numbers, while the position table becomes
exactly ``transformers``' own (the tests check both).

What cannot be exported, and why: the RNN encoder–decoders (no ``transformers`` encoder–decoder
has recurrent layers), windowed or chunked self-attention (neither model has it), another LayerNorm
ε than 1e-5, and sequences longer than ``max_len`` (as in attnlab).

Beam search differs in its bookkeeping, as CTranslate2's does (docs/export.md): ``generate`` takes
the best ``2K`` candidates, moves a finished one into a separate pool of ``K`` and keeps ``K`` live
hypotheses, and ranks finished ones by ``score / |Y|^α`` (``|Y|`` with the end token), where attnlab
keeps a finished hypothesis in its beam slot and divides by GNMT's ``((5 + |Y|) / 6)^α``. With
``α = 0`` and ``early_stopping="never"`` (what :class:`HFTranslator` passes) both stop only when no
live hypothesis can still win, and pick the same translation unless a hypothesis kept alive by one
search and not the other ends better. Greedy decoding has no such freedom: identical token ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .export import ExportedTranslator, write_export
from .positional import sinusoidal_encoding

__all__ = [
    "TRANSFORMERS_INSTALL",
    "require_transformers",
    "hf_architecture",
    "hf_permutation",
    "hf_model",
    "export_hf",
    "HFTranslator",
]

#: How to get the optional library.
TRANSFORMERS_INSTALL = "pip install 'attnlab[hf]'"
#: The oldest major version the export is written for: from 5 on, ``tie_word_embeddings=False``
#: also unties Pegasus's encoder and decoder embeddings (4.x passes one module to both).
MIN_TRANSFORMERS_MAJOR = 5

_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh"}
_LAYER_NORM_EPS = 1e-5  # nn.LayerNorm's default, the only ε Pegasus and Marian build


def require_transformers():
    """The ``transformers`` module, or an ImportError that says how to install it (or that it is too old)."""
    try:
        import transformers
    except ImportError as err:
        raise ImportError(
            f"transformers is not installed; it is an optional extra: {TRANSFORMERS_INSTALL}", name="transformers"
        ) from err
    major = int(transformers.__version__.split(".")[0])
    if major < MIN_TRANSFORMERS_MAJOR:
        raise ImportError(
            f"transformers {transformers.__version__} is too old for the HF export: it needs "
            f"{MIN_TRANSFORMERS_MAJOR}.0 or newer (untied Pegasus embeddings); pip install -U transformers",
            name="transformers",
        )
    return transformers


def hf_architecture(model: nn.Module) -> str:
    """``"pegasus"`` or ``"marian"``: the ``transformers`` model that computes what ``model`` does.

    Raises:
        ValueError: a model neither can express (the module docstring lists what and why).
    """
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type != "transformer":
        raise ValueError(
            f"only the Transformer translator can be exported to HuggingFace transformers, not model_type "
            f"{model_type!r} (no transformers encoder-decoder has recurrent layers)"
        )
    if config.attention != "full":
        raise ValueError(
            f"attention={config.attention!r} cannot be exported: Pegasus and Marian have no windowed or chunked "
            "self-attention (only full attention maps onto them)"
        )
    if config.activation not in _ACTIVATIONS:
        raise ValueError(
            f"activation {config.activation!r} has no transformers equivalent; known: {sorted(_ACTIVATIONS)}"
        )
    for name, module in model.named_modules():
        if isinstance(module, nn.LayerNorm) and module.eps != _LAYER_NORM_EPS:
            raise ValueError(
                f"{name} has LayerNorm eps={module.eps}, but Pegasus and Marian build theirs with {_LAYER_NORM_EPS} "
                "and have no setting for it"
            )
    return "pegasus" if config.norm == "pre" else "marian"


def hf_permutation(d_model: int) -> torch.Tensor:
    """Dimension ``h`` of the exported model holds attnlab's dimension ``perm[h]``: the even ones
    (attnlab's sines) first, then the odd ones (cosines), the order of ``transformers``' table.

    Shape:
        ``(D,)``
    """
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])  # (D,)


def _hf_config(model: nn.Module, arch: str, bos_id: int, eos_id: int):
    tf = require_transformers()
    c = model.config
    tied = c.share_embeddings and c.tie_output  # one matrix for source, target and output
    common = dict(
        d_model=c.d_model,
        encoder_layers=c.n_encoder_layers,
        decoder_layers=c.n_decoder_layers,
        encoder_attention_heads=c.n_heads,
        decoder_attention_heads=c.n_heads,
        encoder_ffn_dim=c.d_ff,
        decoder_ffn_dim=c.d_ff,
        activation_function=_ACTIVATIONS[c.activation],
        # attnlab's one dropout acts on embeddings, sub-layer outputs, attention weights and the
        # feed-forward hidden layer: HF's three, so that fine-tuning the export regularises alike.
        dropout=c.dropout,
        attention_dropout=c.dropout,
        activation_dropout=c.dropout,
        max_position_embeddings=c.max_len,
        scale_embedding=True,
        pad_token_id=c.pad_id,
        eos_token_id=eos_id,
        decoder_start_token_id=bos_id,
        forced_eos_token_id=None,
        architectures=["PegasusForConditionalGeneration" if arch == "pegasus" else "MarianMTModel"],
    )
    if arch == "marian":
        return tf.MarianConfig(
            vocab_size=c.src_vocab_size,
            decoder_vocab_size=c.tgt_vocab_size,
            share_encoder_decoder_embeddings=c.share_embeddings,
            # Separate vocabularies can still tie the output to the target embedding (Marian ties
            # lm_head to decoder.embed_tokens); False unties everything, each matrix written out.
            tie_word_embeddings=c.tie_output,
            **common,
        )
    # Pegasus has one vocabulary size for both sides: the larger one, the other padded.
    return tf.PegasusConfig(vocab_size=max(c.src_vocab_size, c.tgt_vocab_size), tie_word_embeddings=tied, **common)


def _fp32(t: torch.Tensor) -> torch.Tensor:
    # fp32 on the CPU whatever the model was loaded as: the export is written in fp32.
    return t.detach().to(device="cpu", dtype=torch.float32)


@torch.no_grad()
def _copy_linear(hf: nn.Linear, ours: nn.Linear, perm: torch.Tensor, *, reads: bool, writes: bool) -> None:
    """Copy a projection whose input (``reads``) and/or output (``writes``) is the residual stream,
    permuting that side; a missing bias becomes zeros."""
    weight = _fp32(ours.weight)  # (D_out, D_in)
    bias = _fp32(ours.bias) if ours.bias is not None else torch.zeros(weight.shape[0])  # (D_out,)
    if reads:
        weight = weight[:, perm]
    if writes:
        weight, bias = weight[perm], bias[perm]
    hf.weight.copy_(weight)
    hf.bias.copy_(bias)


@torch.no_grad()
def _copy_norm(hf: nn.LayerNorm, ours: nn.LayerNorm, perm: torch.Tensor) -> None:
    hf.weight.copy_(_fp32(ours.weight)[perm])
    hf.bias.copy_(_fp32(ours.bias)[perm])


def _copy_attention(hf, ours, perm: torch.Tensor) -> None:
    # Queries, keys and values read the residual stream (keys/values of cross-attention read the
    # encoder's output, in the same permuted basis); the heads are not permuted, so neither is
    # anything between the projections.
    for name in ("q_proj", "k_proj", "v_proj"):
        _copy_linear(getattr(hf, name), getattr(ours, name), perm, reads=True, writes=False)
    _copy_linear(hf.out_proj, ours.out_proj, perm, reads=False, writes=True)


def _padded(matrix: torch.Tensor, rows: int) -> torch.Tensor:
    out = torch.zeros(rows, matrix.shape[1])  # (V_hf, D)
    out[: matrix.shape[0]] = matrix
    return out


def hf_model(model: nn.Module, src_tok, tgt_tok):
    """A ``transformers`` model (Pegasus or Marian, :func:`hf_architecture`) computing what ``model``
    computes, in fp32, in eval mode.

    Raises:
        ImportError: transformers is missing or older than 5.
        ValueError: a model no architecture expresses, or tokenizers that do not fit it.

    Shape:
        no tensors; the model's logits are ``(B, T, V_tgt)`` (Pegasus with separate vocabularies:
        ``(B, T, max(V_src, V_tgt))``, −∞ past ``V_tgt``)
    """
    arch = hf_architecture(model)
    tf = require_transformers()
    c = model.config
    for tok, size, side in ((src_tok, c.src_vocab_size, "source"), (tgt_tok, c.tgt_vocab_size, "target")):
        if tok.vocab_size != size:
            raise ValueError(
                f"the {side} tokenizer has {tok.vocab_size} tokens but the model's {side} vocabulary {size}"
            )
        if tok.pad_id != c.pad_id:
            raise ValueError(f"the {side} tokenizer's padding id {tok.pad_id} differs from the model's {c.pad_id}")
    config = _hf_config(model, arch, tgt_tok.bos_id, tgt_tok.eos_id)
    cls = tf.PegasusForConditionalGeneration if arch == "pegasus" else tf.MarianMTModel
    hf = cls(config).eval()
    perm = hf_permutation(c.d_model)
    base = hf.model
    with torch.no_grad():
        # Embeddings and output: columns permuted; rows padded to the model's vocabulary sizes.
        src = _fp32(model.src_embed.weight)[:, perm]  # (V_src, D)
        tgt = _fp32(model.tgt_embed.weight)[:, perm]  # (V_tgt, D)
        out = _fp32(model.out_proj.weight)[:, perm]  # (V_tgt, D)
        enc_emb, dec_emb = base.encoder.embed_tokens.weight, base.decoder.embed_tokens.weight
        # Untied, each is its own Parameter; tied, these are one, written three times with the same values.
        enc_emb.copy_(_padded(src, enc_emb.shape[0]))
        dec_emb.copy_(_padded(tgt, dec_emb.shape[0]))
        if getattr(base, "shared", None) is not None:
            base.shared.weight.copy_(_padded(src, base.shared.weight.shape[0]))  # get_input_embeddings()
        hf.lm_head.weight.copy_(_padded(out, hf.lm_head.weight.shape[0]))
        hf.final_logits_bias.zero_()
        hf.final_logits_bias[:, c.tgt_vocab_size :] = float("-inf")  # ids past the target vocabulary
        positions = sinusoidal_encoding(c.max_len, c.d_model)[:, perm]  # (max_len, D): HF's own table
        base.encoder.embed_positions.weight.copy_(positions)
        base.decoder.embed_positions.weight.copy_(positions)
    for layer, block in zip(base.encoder.layers, model.encoder):
        _copy_attention(layer.self_attn, block.self_attn, perm)
        _copy_norm(layer.self_attn_layer_norm, block.attn_norm, perm)
        _copy_linear(layer.fc1, block.ff.up_proj, perm, reads=True, writes=False)
        _copy_linear(layer.fc2, block.ff.down_proj, perm, reads=False, writes=True)
        _copy_norm(layer.final_layer_norm, block.ff_norm, perm)
    for layer, block in zip(base.decoder.layers, model.decoder):
        _copy_attention(layer.self_attn, block.self_attn, perm)
        _copy_norm(layer.self_attn_layer_norm, block.self_norm, perm)
        _copy_attention(layer.encoder_attn, block.cross_attn, perm)
        _copy_norm(layer.encoder_attn_layer_norm, block.cross_norm, perm)
        _copy_linear(layer.fc1, block.ff.up_proj, perm, reads=True, writes=False)
        _copy_linear(layer.fc2, block.ff.down_proj, perm, reads=False, writes=True)
        _copy_norm(layer.final_layer_norm, block.ff_norm, perm)
    if arch == "pegasus":
        _copy_norm(base.encoder.layer_norm, model.encoder_norm, perm)
        _copy_norm(base.decoder.layer_norm, model.decoder_norm, perm)
    hf.generation_config = tf.GenerationConfig(
        decoder_start_token_id=tgt_tok.bos_id,
        bos_token_id=tgt_tok.bos_id,
        eos_token_id=tgt_tok.eos_id,
        pad_token_id=c.pad_id,
        forced_eos_token_id=None,
        max_length=c.max_len,  # counts the start token: max_len − 1 new tokens at most, as attnlab
    )
    return hf


def export_hf(
    model: nn.Module,
    src_tok,
    tgt_tok,
    out: str | Path,
    *,
    info: dict[str, Any] | None = None,
    force: bool = False,
) -> Path:
    """Write ``model`` as a ``transformers`` model folder ``out`` (plus attnlab's tokenizers).

    Args:
        model: an attnlab :class:`~attnlab.models.transformer.Transformer`.
        src_tok, tgt_tok: its tokenizers (the same object for a joint vocabulary).
        out: the folder to write; it must not exist unless ``force``.
        info: what :class:`HFTranslator` needs besides (``src_lang``, ``tgt_lang``, ``bleu_tokenize``,
            ``max_len``), written to :data:`attnlab.export.EXPORT_INFO`.
        force: replace an existing ``out``.

    Raises:
        ImportError: transformers is missing or older than 5.
        ValueError: a model neither Pegasus nor Marian can express (:func:`hf_architecture`).
        FileExistsError: ``out`` exists and ``force`` is not set.

    Shape:
        no tensors; returns ``out``.
    """

    def save(hf, folder: Path) -> dict[str, Any]:
        hf.save_pretrained(folder)
        architecture = hf.config.architectures[0]
        return {"format": "attnlab.hf", "version": 1, "architecture": architecture, "max_len": model.config.max_len}

    return write_export(out, lambda: hf_model(model, src_tok, tgt_tok), save, src_tok, tgt_tok, info=info, force=force)


class HFTranslator(ExportedTranslator):
    """An exported translator run by ``transformers``' ``generate``: text in, text out, tokenized by
    attnlab's tokenizers (batching and normalisation: :class:`attnlab.export.ExportedTranslator`).

    Greedy search is ``generate(num_beams=1, do_sample=False)``: the same token ids as attnlab's.
    Beam search passes ``length_penalty`` as ``transformers``' exponent α of ``|Y|^α`` (not GNMT's
    function: compare with α = 0) and ``early_stopping="never"``. ``generate`` runs on torch's
    threads: set their number with ``torch.set_num_threads``.

    Args:
        path: a folder written by :func:`export_hf`.
        dtype: the weights' type once loaded (fp32 as exported, or e.g. ``torch.bfloat16``).
        attn_implementation: ``transformers``' attention kernel (None: its default, ``sdpa``).
    """

    def __init__(
        self, path: str | Path, *, dtype: torch.dtype = torch.float32, attn_implementation: str | None = None
    ) -> None:
        tf = require_transformers()
        super().__init__(path)
        kwargs = {"attn_implementation": attn_implementation} if attn_implementation else {}
        self.model = tf.AutoModelForSeq2SeqLM.from_pretrained(self.path, dtype=dtype, **kwargs).eval()
        config = self.model.generation_config
        self.pad_id, self.eos_id = config.pad_token_id, config.eos_token_id

    @torch.inference_mode()
    def generate(
        self, sources: Sequence[Sequence[int]], *, beam_size: int = 1, length_penalty: float = 1.0, limit: int
    ) -> list[list[int]]:
        """One padded batch through ``generate``; the target ids of each source, without the start
        token or EOS, at most ``limit`` tokens counting EOS.

        Shape:
            ``B`` id lists → ``B`` id lists (``generate`` returns ``(B, 1 + T)``)
        """
        S = max(len(s) for s in sources)
        input_ids = torch.full((len(sources), S), self.pad_id, dtype=torch.long)  # (B, S)
        attention_mask = torch.zeros((len(sources), S), dtype=torch.long)  # (B, S), 1 = real token
        for row, s in enumerate(sources):
            input_ids[row, : len(s)] = torch.tensor(s)
            attention_mask[row, : len(s)] = 1
        # Beam-only settings are passed to beam search only: generate warns about them otherwise.
        beam = {"length_penalty": length_penalty, "early_stopping": "never"} if beam_size > 1 else {}
        out = self.model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            num_beams=beam_size,
            do_sample=False,
            # max_new_tokens=limit, said as a max_length (the start token counts): with the saved
            # max_length, max_new_tokens would log a warning at every call.
            max_length=1 + limit,
            **beam,
        )  # (B, 1 + T): the start token, the output, EOS, then padding
        results = []
        for row in out[:, 1:].tolist():
            results.append(row[: row.index(self.eos_id)] if self.eos_id in row else row)
        return results

    def _decode(
        self, sources: list[list[int]], *, beam_size: int, length_penalty: float, limit: int
    ) -> list[list[int]]:
        return self.generate(sources, beam_size=beam_size, length_penalty=length_penalty, limit=limit)
