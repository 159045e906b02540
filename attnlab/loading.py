"""One way to load a model: by a shipped name, a run folder, a checkpoint folder or a HuggingFace folder.

``load_model(name_or_path)`` is what every part of attnlab that loads a model it did not build
itself goes through: the CLI, the explorer (:mod:`attnlab.web.models`, whose
``load_explorer_model`` wraps what this returns for its pages), the lesson's API, the notebooks,
the benchmarks and the tests. It takes what a user gives ``--model``:

- a **shipped model's name** (``ja-en``, ``demo``, ``minilm``...: :mod:`attnlab.assets`);
- a **checkpoint folder** (``config.json``, ``model.safetensors``, tokenizers:
  :mod:`attnlab.checkpoint`) or a **training run's folder** (its ``best/``: :mod:`attnlab.runs`);
- a **HuggingFace folder** of a GPT-2 or BERT model (imported by :mod:`attnlab.models.convert_hf`);

finds the folder (:func:`model_dir`, an existing folder winning over a shipped name), reads the
``model_type`` of its ``config.json`` (:func:`model_type`) and hands the folder to the loader of
that family (:data:`FAMILIES`), which returns the object that runs it:

==========================================  ========================================================
``model_type``                              ``load_model`` returns
==========================================  ========================================================
``transformer``, ``rnn``                    a :class:`~attnlab.recipes.translate.Translator`
``gpt``, ``bert``; HF ``gpt2``, ``bert``    ``(model, tokenizer)``: a GPT, ``BertForMaskedLM`` or ``BertModel``
``bert_qa``                                 a :class:`~attnlab.recipes.qa.QuestionAnswerer`
``pointer_generator``                       a :class:`~attnlab.recipes.summarize.Summarizer`
``attention_pool_classifier``               a :class:`~attnlab.recipes.classify.TextClassifier`
``vit``                                     ``(ViT, config dict)``
``captioner``                               ``(ImageCaptioner, config dict)``
``gat``                                     ``(GAT, config dict)``
==========================================  ========================================================

Each family's loader is its recipe's ``load_*`` function
(:func:`attnlab.recipes.translate.load_translator`, ...), which resolves names the same way
(:func:`attnlab.assets.locate.resolve_model_dir`); this module only chooses among them. A caller
that knows which family it needs names it (``load_model("ja-en", family="translate")``), so that
a folder of another family is refused in one line; one that does not (the explorer, given any
folder) leaves ``family`` out. Adding a family: its loader in its recipe, and a :class:`Family`
entry here.

Shape:
    no tensors cross this module's interface: a name or path in, a loaded model out.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .accel import precision as inference_precision
from .assets.locate import resolve_model_dir
from .checkpoint import CONFIG_FILE
from .models.classifier import ClassifierConfig
from .models.pointer_generator import PointerGeneratorConfig
from .models.qa import MODEL_TYPE as QA_MODEL_TYPE
from .recipes import caption, classify, graph, lm, qa, summarize, translate, vision

__all__ = ["Family", "FAMILIES", "model_dir", "model_type", "family_of", "load_model"]


@dataclass(frozen=True)
class Family:
    """How one family of checkpoints is loaded."""

    name: str  # the family, as the recipe that trains it is called ("translate", "lm", ...)
    model_types: tuple[str, ...]  # the config.json model_type values it loads
    returns: str  # what load_model gives for it, in words (for errors and the table above)
    load: Callable[[Path, str, str | None], Any]  # (folder, device, precision) -> the loaded model
    # The inference precisions it runs in ("auto", "fp32", "bf16") and its default; None: fp32 only.
    default_precision: str | None = None


def _translator(directory: Path, device: str, precision: str | None) -> Any:
    return translate.load_translator(directory, device=device, precision=precision or "auto")


def _language_model(directory: Path, device: str, precision: str | None) -> Any:
    return lm.load_language_model(directory, device=device, precision=precision or "fp32")


#: Every family :func:`load_model` knows, by the name of the recipe that trains it.
FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("translate", tuple(translate.ARCHS), "a Translator", _translator, "auto"),
        # attnlab's own GPT and BERT checkpoints, and HuggingFace GPT-2 and BERT folders (both
        # name their model_type in config.json; load_language_model tells them apart).
        Family("lm", ("gpt", "bert", "gpt2"), "(model, tokenizer)", _language_model, "fp32"),
        Family("qa", (QA_MODEL_TYPE,), "a QuestionAnswerer", lambda d, device, _: qa.load_qa(d, device=device)),
        Family(
            "summarize",
            (PointerGeneratorConfig.model_type,),
            "a Summarizer",
            lambda d, device, _: summarize.load_summarizer(d, device=device),
        ),
        Family(
            "classify",
            (ClassifierConfig.model_type,),
            "a TextClassifier",
            lambda d, device, _: classify.load_classifier(d, device=device),
        ),
        Family("vision", ("vit",), "(ViT, config)", lambda d, device, _: vision.load_vit(d, device=device)),
        Family(
            "caption",
            ("captioner",),
            "(ImageCaptioner, config)",
            lambda d, device, _: caption.load_captioner(d, device),
        ),
        # A GAT computes on the CPU its graph is on; its loader takes no device.
        Family("graph", ("gat",), "(GAT, config)", lambda d, device, _: graph.load_gat(d)),
    )
}

_BY_MODEL_TYPE: dict[str, Family] = {t: f for f in FAMILIES.values() for t in f.model_types}


def model_dir(name_or_path: str | os.PathLike) -> Path:
    """The folder ``name_or_path`` means: the folder itself when it holds a ``config.json``, its
    ``best/`` (a training run), or the shipped model of that name
    (:func:`attnlab.assets.locate.resolve_model_dir`; an existing folder wins over a shipped name).

    Raises:
        FileNotFoundError: none of these (the message lists the shipped names, or says
            ``make models`` for a shipped model whose weights are not built).

    Shape:
        no tensors; returns a directory.
    """
    return resolve_model_dir(name_or_path)


def model_type(name_or_path: str | os.PathLike) -> str:
    """The ``model_type`` recorded in the ``config.json`` of the model ``name_or_path`` names
    (attnlab's own, or a HuggingFace folder's ``gpt2``/``bert``).

    Raises:
        FileNotFoundError: as :func:`model_dir`.
        ValueError: ``config.json`` is not valid JSON or names no ``model_type`` string.

    Shape:
        no tensors.
    """
    config_file = model_dir(name_or_path) / CONFIG_FILE
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{config_file}:{err.lineno}: not valid JSON ({err.msg})") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"{config_file}: not UTF-8 text ({err.reason})") from None
    found = config.get("model_type") if isinstance(config, dict) else None
    if not isinstance(found, str):
        raise ValueError(f'{config_file}: no "model_type" string; cannot tell which model this is')
    return found


def family_of(name_or_path: str | os.PathLike) -> Family:
    """The :class:`Family` that loads the model ``name_or_path`` names, by its ``model_type``.

    Raises:
        FileNotFoundError, ValueError: as :func:`model_type`; ValueError also for a
            ``model_type`` no family loads (the message lists the known ones).

    Shape:
        no tensors.
    """
    found = model_type(name_or_path)
    family = _BY_MODEL_TYPE.get(found)
    if family is None:
        raise ValueError(
            f"{model_dir(name_or_path) / CONFIG_FILE}: attnlab cannot load model_type {found!r}; "
            f"it knows {sorted(_BY_MODEL_TYPE)}"
        )
    return family


def load_model(
    name_or_path: str | os.PathLike, *, device: str = "cpu", precision: str | None = None, family: str | None = None
) -> Any:
    """The model ``name_or_path`` names, loaded in eval mode onto ``device``, as its family's
    loader gives it (the table in this module's docstring).

    Args:
        name_or_path: a shipped model's name, a checkpoint folder, a training run's folder, or a
            HuggingFace GPT-2/BERT folder.
        device: where the weights go (``"cpu"``, ``"cuda"``...).
        precision: the inference precision of a translator (default ``"auto"``: bf16 where this
            CPU computes it natively, a short measurement shows it faster and the model's card
            allows it) or of a GPT (default ``"fp32"``): ``"auto"``, ``"fp32"`` or ``"bf16"``.
            The other families compute in fp32 and take only None or ``"fp32"``.
        family: the family the caller needs (a key of :data:`FAMILIES`, e.g. ``"translate"`` for
            ``attnlab translate``); None: whichever the folder holds.

    Raises:
        FileNotFoundError: nothing of that name (the message lists the shipped names), or a
            shipped model whose weights are not built here (it says ``make models``).
        ValueError: an unknown ``model_type``, a model of another family than ``family``, a
            damaged checkpoint, or a precision the family does not run in (each one line).

    Shape:
        no tensors; returns the loaded model.
    """
    if precision is not None:
        inference_precision.check(precision)
    if family is not None and family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose from {sorted(FAMILIES)}")
    found = family_of(name_or_path)
    if family is not None and found.name != family:
        raise ValueError(
            f"{model_dir(name_or_path)}: model_type {model_type(name_or_path)!r} is a {found.name} model, "
            f"not a {family} model ({', '.join(FAMILIES[family].model_types)}): {FAMILIES[family].returns} was asked for"
        )
    family = found
    if precision not in (None, "fp32") and family.default_precision is None:
        raise ValueError(
            f"precision {precision!r}: a {family.name} model ({', '.join(family.model_types)}) computes in fp32 only"
        )
    return family.load(model_dir(name_or_path), device, precision)
