"""Adapters that let the explorer run any attnlab model and show its attention maps.

The explorer knows nothing model-specific. Each model family registers an adapter under the
``model_type`` written in its checkpoint's config; the adapter turns a checkpoint directory into an
:class:`ExplorerModel`: an object with a ``kind`` (what the output means), a ``name`` (shown in the
model picker) and ``run(text)``, which returns a :class:`ModelRun` holding the output text, the
tokens on each axis and every layer's and head's attention weights, grouped by where they come from:

==================  ==================  ===============================================
group               rows × columns      what attends to what
==================  ==================  ===============================================
``encoder_self``    src × src           the encoder's self-attention over the input
``decoder_self``    tgt × tgt_in        the decoder's (causal) self-attention
``cross``           tgt × src           each output token over the input (source-target)
``self``            src × src           a single stack (GPT, BERT) over its own tokens
==================  ==================  ===============================================

``src`` are the input's tokens; ``tgt`` the output tokens, one row per output position (the row
of position ``i`` shows where the model looked while producing token ``i``); ``tgt_in`` the
decoder's input at each position (the start token, then the output so far), so that the causal
diagonal reads correctly: while producing token ``i`` the decoder sees its inputs ``0..i``.

Only directories named when the explorer starts are ever loaded (see :func:`load_explorer_model`); the web
API refers to models by name, never by path. A shipped model (:mod:`attnlab.assets`) is named as
users call it (``ja-en``, ``minilm``) and carries its description and example inputs; started
without models, the explorer offers every shipped model present (:func:`shipped_explorer_models`).

Shape:
    attentions[group]: ``(L, H, T, S)`` — layers, heads, query (row) tokens, key (column) tokens
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch

from .. import assets, loading
from ..assets.locate import shipped_model_dir, shipped_models_present
from ..checkpoint import CONFIG_FILE

__all__ = [
    "GROUP_AXES",
    "ModelRun",
    "ExplorerModel",
    "ADAPTERS",
    "adapter",
    "checkpoint_dir",
    "read_model_type",
    "load_explorer_model",
    "shipped_explorer_models",
    "unique_names",
]

#: Which token list labels the rows (queries) and the columns (keys) of each attention group.
GROUP_AXES: dict[str, tuple[str, str]] = {
    "encoder_self": ("src", "src"),
    "decoder_self": ("tgt", "tgt_in"),
    "cross": ("tgt", "src"),
    "self": ("src", "src"),
}


@dataclass
class ModelRun:
    """What one model run gives the explorer.

    Shape:
        - tokens["src"]: ``S`` strings; tokens["tgt"], tokens["tgt_in"]: ``T`` strings (decoders)
        - attentions[group]: ``(L, H, rows, cols)`` with rows/cols given by :data:`GROUP_AXES`
    """

    output: str  # the translation, continuation or a readable summary of the embedding / fill-mask
    tokens: dict[str, list[str]]  # "src" (the input's tokens) and, for decoders, "tgt" and "tgt_in"
    attentions: dict[str, torch.Tensor] = field(default_factory=dict)  # group -> (L, H, rows, cols)

    def __post_init__(self) -> None:
        for group, weights in self.attentions.items():
            if group not in GROUP_AXES:
                raise ValueError(f"unknown attention group {group!r}; use one of {sorted(GROUP_AXES)}")
            if weights.dim() != 4:
                raise ValueError(
                    f"attentions[{group!r}] must have shape (L, H, rows, cols), got {tuple(weights.shape)}"
                )
            rows, cols = GROUP_AXES[group]
            for axis, name in ((2, rows), (3, cols)):
                if name not in self.tokens:
                    raise ValueError(f"attentions[{group!r}] needs tokens[{name!r}]")
                if weights.shape[axis] != len(self.tokens[name]):
                    raise ValueError(
                        f"attentions[{group!r}] has shape {tuple(weights.shape)} but tokens[{name!r}] has "
                        f"{len(self.tokens[name])} entries (dimension {axis} must match)"
                    )


class ExplorerModel(Protocol):
    """A loaded model the explorer can run. Adapters return objects of this shape."""

    kind: str  # "translator", "generator", "encoder" or "rnn-translator": tells the UI what the output is
    name: str  # shown in the model picker and used by the API to pick the model
    description: dict[str, str] | None  # one line per language ("en", "ja"); None for a folder of the user's
    examples: tuple[str, ...]  # inputs the page offers to click (a shipped model's own)

    def run(self, text: str) -> ModelRun:
        """Run the model on ``text``; raise ``ValueError`` for input it cannot take."""
        ...


#: Adapters by the ``model_type`` of a checkpoint's config.
ADAPTERS: dict[str, Callable[[Path], ExplorerModel]] = {}


def adapter(model_type: str) -> Callable[[Callable[[Path], ExplorerModel]], Callable[[Path], ExplorerModel]]:
    """Register ``fn(checkpoint_dir) -> ExplorerModel`` for checkpoints of ``model_type``."""

    def register(fn: Callable[[Path], ExplorerModel]) -> Callable[[Path], ExplorerModel]:
        ADAPTERS[model_type] = fn
        return fn

    return register


# Which folder a name or path means, and its model_type: attnlab.loading's, under the names this
# module has always offered.
checkpoint_dir = loading.model_dir
read_model_type = loading.model_type


#: The inference precision the translators and GPTs are loaded in ("auto", "fp32", "bf16";
#: attnlab.accel.precision), for the adapters of the load in progress.
_precision: contextvars.ContextVar[str] = contextvars.ContextVar("explorer_precision", default="auto")


def load_explorer_model(path: Path, precision: str = "auto") -> ExplorerModel:
    """Load the checkpoint at ``path`` (a folder, or a shipped model's name) through the adapter
    registered for its ``model_type``; translators and GPTs decode in ``precision``.

    The model itself comes from :func:`attnlab.loading.load_model`; encoder–decoders of its
    ``translate`` family (the Transformer, the RNN translators) share the translator adapter.
    """
    token = _precision.set(precision)
    try:
        model = _load_directory(checkpoint_dir(path))
    finally:
        _precision.reset(token)
    entry = assets.shipped(path)
    if entry is not None:
        _describe(model, entry)
    return model


def _load_directory(directory: Path) -> ExplorerModel:
    found = loading.model_type(directory)
    translators = loading.FAMILIES["translate"].model_types
    load = ADAPTERS.get(found)
    if load is None and found in translators:
        load = _translator
    if load is None:
        raise ValueError(
            f"{directory / CONFIG_FILE}: the explorer has no adapter for model_type {found!r}; "
            f"it knows {sorted(set(ADAPTERS) | set(translators))}"
        )
    model = load(directory)
    # "runs/de-en/best" is better called "de-en" in the picker.
    model.name = directory.parent.name if directory.name in ("best", "last") else directory.name
    model.description, model.examples = None, ()
    return model


def _describe(model: ExplorerModel, entry: assets.ShippedModel) -> None:
    model.name, model.description, model.examples = entry.name, entry.description, entry.examples


def shipped_explorer_models(precision: str = "auto") -> tuple[list[ExplorerModel], list[str]]:
    """Every shipped model that is present, loaded, in :data:`attnlab.assets.SHIPPED` order; and the
    names of those that are not (weights not built yet, or their package not installed).

    What the explorer offers when it is started without ``--model``, so its model page is never
    empty on an installation that has them. (A folder named like a shipped model in the working
    directory is not taken for it here: these are the shipped models themselves.)
    """
    present = shipped_models_present()
    models = []
    for name in present:
        token = _precision.set(precision)
        try:
            model = _load_directory(shipped_model_dir(name))
        finally:
            _precision.reset(token)
        _describe(model, assets.SHIPPED[name])
        models.append(model)
    return models, [name for name in assets.SHIPPED if name not in present]


def unique_names(models: list[ExplorerModel]) -> dict[str, ExplorerModel]:
    """Models by name; a repeated name gets ``-2``, ``-3``, … so every model can be picked."""
    named: dict[str, ExplorerModel] = {}
    for model in models:
        name, n = model.name, 1
        while name in named:
            n += 1
            name = f"{model.name}-{n}"
        model.name = name
        named[name] = model
    return named


# --------------------------------------------------------------------------------------------
# Adapters.
# --------------------------------------------------------------------------------------------


class TranslatorModel:
    """An encoder–decoder translator: greedy translation, then every attention map of it.

    The translation comes from :func:`attnlab.decode.greedy_decode`; the maps from one
    teacher-forced pass over ``[BOS] + translation`` with ``need_weights=True``, which sees
    exactly the prefixes the decoder saw while generating (causal masking), so its cross-attention
    rows are the ones of the decoding steps.

    Shape:
        src ``(1, S)``; tgt_in ``(1, T)`` with ``T`` = output tokens + the end token (if produced)
    """

    def __init__(self, translator, name: str, kind: str) -> None:
        self.translator, self.name, self.kind = translator, name, kind

    def run(self, text: str) -> ModelRun:
        from ..data.enja import normalize_input
        from ..decode import greedy_decode
        from ..inference.translate import cut_loops, output_limit

        tr = self.translator
        model, src_tok, tgt_tok = tr.model, tr.src_tok, tr.tgt_tok
        # Normalised as Translator.translate does (a cased model keeps the user's capitals).
        src_ids = src_tok.encode(normalize_input(text, tr.src_lang, tr.lowercase) if tr.src_lang else text)
        if not src_ids:
            raise ValueError(f"cannot translate {text!r}: it has no tokens")
        max_src = getattr(model.config, "max_len", 512)
        if len(src_ids) > max_src:
            raise ValueError(f"the sentence has {len(src_ids)} tokens; this model takes at most {max_src}")
        device = tr.device
        src = torch.tensor([src_ids], device=device)  # (1, S)
        limit = output_limit(len(src_ids), max_src)
        hyp = greedy_decode(
            model, src, bos_id=tgt_tok.bos_id, eos_id=tgt_tok.eos_id, pad_id=tgt_tok.pad_id, max_len=limit
        )[0]
        # One row per produced token; the end token only if decoding stopped on it (not at the limit).
        produced = hyp.tokens + ([tgt_tok.eos_id] if len(hyp.tokens) < limit else [])
        tgt_in = torch.tensor([[tgt_tok.bos_id] + produced[:-1]], device=device)  # (1, T)
        out = model(src, tgt_in, need_weights=True)
        tokens = {
            "src": [src_tok.id_to_token(i) for i in src_ids],
            "tgt": [tgt_tok.id_to_token(i) for i in produced],
            "tgt_in": [tgt_tok.id_to_token(i) for i in tgt_in[0].tolist()],
        }
        names = {"encoder": "encoder_self", "decoder": "decoder_self", "cross": "cross"}
        attentions = {
            names[key]: torch.stack([w[0] for w in per_layer])
            .float()
            .cpu()  # L × (H, rows, cols) -> (L, H, rows, cols)
            for key, per_layer in (out.attentions or {}).items()
            if key in names and per_layer
        }
        # The text as Translator.translate gives it (a loop cut); the maps show what was decoded.
        return ModelRun(output=tgt_tok.decode(cut_loops(hyp.tokens)), tokens=tokens, attentions=attentions)


def _translator(path: Path) -> TranslatorModel:
    kind = "rnn-translator" if loading.model_type(path).startswith("rnn") else "translator"
    translator = loading.load_model(path, precision=_precision.get())
    translator.resolve_precision()  # now, not in the first request (the page reads translator.model)
    return TranslatorModel(translator, name=path.name, kind=kind)


adapter("transformer")(_translator)


class GeneratorModel:
    """A decoder-only language model (GPT): a greedy continuation and its causal self-attention.

    The prompt is continued by :func:`attnlab.decode.generate` with temperature 0 (the same text
    every time); one forward pass over prompt + continuation gives every layer's maps.

    Shape:
        tokens ``(1, T)`` with ``T`` = prompt + continuation ≤ the context window
    """

    def __init__(self, model, tokenizer, name: str, max_new_tokens: int = 40) -> None:
        self.model, self.tokenizer, self.name = model, tokenizer, name
        self.kind = "generator"
        self.max_new_tokens = max_new_tokens  # continuation length: keeps one request's work bounded

    def run(self, text: str) -> ModelRun:
        from ..decode import generate

        tok, model = self.tokenizer, self.model
        ids = tok.encode(text)
        if not ids:
            raise ValueError(f"cannot continue {text!r}: it has no tokens")
        window = model.config.n_positions
        if len(ids) >= window:
            raise ValueError(f"the text has {len(ids)} tokens; this model's context window is {window}")
        device = next(model.parameters()).device
        prompt = torch.tensor([ids], device=device)  # (1, T0)
        new = min(self.max_new_tokens, window - len(ids))
        full = generate(model, prompt, max_new_tokens=new, temperature=0.0, eos_id=getattr(tok, "eos_id", None)).tokens
        out = model(full, need_weights=True)  # full: (1, T)
        weights = torch.stack([w[0] for w in out.attentions]).float().cpu()  # L × (H, T, T) -> (L, H, T, T)
        continuation = full[0, len(ids) :].tolist()
        return ModelRun(
            output=tok.decode(continuation),
            tokens={"src": [tok.id_to_token(i) for i in full[0].tolist()]},
            attentions={"self": weights},
        )


class EncoderModel:
    """A BERT encoder: fill-mask when the text has the mask token (and the model its MLM head),
    otherwise the sentence embedding; and the bidirectional self-attention of every layer.

    Shape:
        tokens ``(1, S)`` = ``[CLS] text [SEP]``; embedding ``(D,)``
    """

    def __init__(self, model, tokenizer, name: str, top_k: int = 5) -> None:
        self.model, self.tokenizer, self.name = model, tokenizer, name
        self.kind = "encoder"
        self.top_k = top_k  # candidates shown for each mask

    def run(self, text: str) -> ModelRun:
        from ..models.bert import encode_with_masks, fill_mask, sentence_embeddings

        tok, model = self.tokenizer, self.model
        bert = getattr(model, "bert", model)
        ids = encode_with_masks(tok, text)
        if len(ids) <= 2:
            raise ValueError(f"cannot encode {text!r}: it has no tokens")
        if len(ids) > bert.config.n_positions:
            raise ValueError(f"the text has {len(ids)} tokens; this model takes at most {bert.config.n_positions}")
        device = next(bert.parameters()).device
        enc = bert(torch.tensor([ids], device=device), need_weights=True)  # (1, S)
        weights = torch.stack([w[0] for w in enc.attentions]).float().cpu()  # L × (H, S, S) -> (L, H, S, S)
        if tok.mask_id is not None and tok.mask_id in ids and hasattr(model, "bert"):
            slots = fill_mask(model, tok, text, top_k=self.top_k)
            output = "\n".join(
                f"{tok.id_to_token(tok.mask_id)} {n + 1}: " + ", ".join(f"{t} ({p:.2f})" for t, p in cands)
                for n, cands in enumerate(slots)
            )
        else:
            vec = sentence_embeddings(bert, tok, [text])[0]  # (D,)
            head = ", ".join(f"{x:.3f}" for x in vec[:6].tolist())
            output = f"embedding ({vec.numel()} numbers, length {vec.norm():.3f}): [{head}, …]"
        return ModelRun(output=output, tokens={"src": [tok.id_to_token(i) for i in ids]}, attentions={"self": weights})


def _language_model(path: Path) -> ExplorerModel:
    from ..models.gpt import GPT

    model, tokenizer = loading.load_model(path, precision=_precision.get())
    if isinstance(model, GPT):
        return GeneratorModel(model, tokenizer, name=path.name)
    return EncoderModel(model, tokenizer, name=path.name)


# attnlab's own GPT/BERT checkpoints, and HuggingFace GPT-2 / BERT folders (both name their
# model_type in config.json; attnlab.loading's lm family tells them apart).
for _model_type in ("gpt", "bert", "gpt2"):
    adapter(_model_type)(_language_model)


class QuestionAnswererModel:
    """A question answerer (``kind`` "encoder": one self-attention stack).

    The model page has one text box: the question comes first and ends at its first ``?``; the
    rest is the passage. The output is the answer; the maps are the encoder's self-attention over
    ``[CLS] question [SEP] passage [SEP]``, whose question rows × passage columns are the
    question–document attention.

    Shape:
        attentions["self"] ``(L, H, S, S)``
    """

    kind = "encoder"

    def __init__(self, qa, name: str) -> None:
        self.qa, self.name = qa, name

    def run(self, text: str) -> ModelRun:
        from ..data.squad import question_windows

        if "?" not in text:
            raise ValueError("write the question first, ending with '?', then the passage")
        cut = text.index("?") + 1
        question, context = text[:cut].strip(), text[cut:].strip()
        if not context:
            raise ValueError("the passage after the question is empty")
        qa = self.qa
        windows = question_windows(qa.tokenizer, qa.setup, 0, question, context)
        if len(windows) > 1:
            raise ValueError(
                f"question and passage exceed the model's window of {qa.setup.max_length} tokens; shorten the passage"
            )
        window = windows[0]
        answer = qa.answer([question], [context])[0]
        maps = qa.window_attention(window)  # (L, H, S, S)
        tokens = [qa.tokenizer.id_to_token(t) for t in window.input_ids]
        return ModelRun(output=f"answer: {answer.text}", tokens={"src": tokens}, attentions={"self": maps})


def _question_answerer(path: Path) -> ExplorerModel:
    return QuestionAnswererModel(loading.load_model(path), name=path.name)


adapter("bert_qa")(_question_answerer)


class ClassifierModel:
    """An attention-pooling text classifier (``kind`` "encoder": one self-attention stack, then
    the pooling). The output is the predicted label with its probability, then the tokens that got
    the most pooling weight; the maps are the encoder's self-attention over the text.

    Shape:
        attentions["self"] ``(L, H, S, S)``
    """

    kind = "encoder"

    def __init__(self, classifier, name: str, shown: int = 5) -> None:
        self.classifier, self.name = classifier, name
        self.shown = shown  # tokens listed by pooling weight in the output

    def run(self, text: str) -> ModelRun:
        clf = self.classifier
        prediction = clf.predict([text])[0]
        ids = clf.tokenizer.encode(text)[: clf.max_len]
        with torch.no_grad():
            out = clf.model(torch.tensor([ids], device=clf.device), need_weights=True)  # (1, S)
        attentions = {}
        if out.attentions:
            attentions["self"] = (
                torch.stack([w[0] for w in out.attentions]).float().cpu()
            )  # L × (H, S, S) -> (L, H, S, S)
        heaviest = sorted(zip(prediction.tokens, prediction.weights), key=lambda tw: -tw[1])[: self.shown]
        output = f"{prediction.label} ({prediction.probs[prediction.label]:.2f}); pooling weights: " + ", ".join(
            f"{t} {w:.2f}" for t, w in heaviest
        )
        return ModelRun(output=output, tokens={"src": prediction.tokens}, attentions=attentions)


def _classifier(path: Path) -> ExplorerModel:
    return ClassifierModel(loading.load_model(path), name=path.name)


adapter("attention_pool_classifier")(_classifier)


# The small models of the lesson's §9: a summarizer, a ViT and a GAT on the model page too.


class SummarizerModel:
    """A pointer-generator summarizer (``kind`` "rnn-translator": an RNN encoder–decoder with one
    attention over the document): the greedy summary, and each summary word's attention.

    Shape:
        attentions["cross"] ``(1, 1, T, S)``: T summary words (then [EOS]) × S document words
    """

    kind = "rnn-translator"

    def __init__(self, summarizer, name: str) -> None:
        self.summarizer, self.name = summarizer, name

    def run(self, text: str) -> ModelRun:
        if not self.summarizer.vocab.split(text):
            raise ValueError(f"cannot summarize {text[:60]!r}: it has no words")
        s = self.summarizer.summarize([text], beam_size=1, return_attention=True)[0]
        tokens = {"src": s.src_tokens, "tgt": s.tokens, "tgt_in": ["[BOS]", *s.tokens[:-1]]}
        return ModelRun(output=s.text, tokens=tokens, attentions={"cross": s.attention[None, None]})  # (1, 1, T, S)


def _summarizer(path: Path) -> ExplorerModel:
    return SummarizerModel(loading.load_model(path), name=path.name)


adapter("pointer_generator")(_summarizer)


def _whole_number(text: str, what: str, below: int) -> int:
    value = text.strip()
    if not value.isdigit() or int(value) >= below:
        raise ValueError(f"type {what}: a whole number from 0 to {below - 1}")
    return int(value)


class VitModel:
    """A Vision Transformer on the digits (``kind`` "encoder"): the text is the number of a held-out
    test image; the output its predicted digit; the maps the self-attention over [CLS] and the patches.

    Shape:
        attentions["self"] ``(L, H, 1+P, 1+P)``
    """

    kind = "encoder"

    def __init__(self, model, config: dict, name: str) -> None:
        from ..data.digits import digits_splits

        self.model, self.config, self.name = model, config, name
        self.data = digits_splits(seed=config.get("split_seed", 0))

    def run(self, text: str) -> ModelRun:
        n = len(self.data.test_y)
        index = _whole_number(text, f"the number of a held-out image (there are {n})", n)
        image = self.data.test_x[index].float()  # (8, 8)
        with torch.no_grad():
            out = self.model(image.unsqueeze(0), need_weights=True)  # (1, 8, 8)
        probs = torch.softmax(out.logits[0].float(), -1)  # (10,)
        weights = torch.stack([w[0] for w in out.attentions]).float()  # L × (1, H, N, N) -> (L, H, N, N)
        patches = weights.shape[-1] - 1
        output = (
            f"digit {int(probs.argmax())} ({float(probs.max()):.2f}); the image shows {int(self.data.test_y[index])}"
        )
        return ModelRun(output=output, tokens={"src": ["[CLS]", *(f"p{i}" for i in range(patches))]},
                        attentions={"self": weights})  # fmt: skip


def _vit(path: Path) -> ExplorerModel:
    model, config = loading.load_model(path)
    return VitModel(model, config, name=path.name)


adapter("vit")(_vit)


class GatModel:
    """A graph attention network on the karate club (``kind`` "encoder"): the text is a member's
    number; the output its predicted faction; the map the first layer's attention (nonzero only
    between friends and on the diagonal).

    Shape:
        attentions["self"] ``(1, H, N, N)``
    """

    kind = "encoder"

    def __init__(self, model, name: str) -> None:
        from ..data.graphs import karate_club

        self.model, self.name, self.data = model, name, karate_club()

    def run(self, text: str) -> ModelRun:
        n = len(self.data.labels)
        node = _whole_number(text, f"a member's number (the club has {n})", n)
        with torch.no_grad():
            out = self.model(self.data.features, self.data.mask, need_weights=True)
        first = out.attentions[0].float()  # (H, N, N)
        predicted = int(out.logits[node].argmax())
        output = f"member {node}: {self.data.class_names[predicted]} (joined {self.data.class_names[int(self.data.labels[node])]})"
        return ModelRun(output=output, tokens={"src": [str(i) for i in range(n)]}, attentions={"self": first[None]})


def _gat(path: Path) -> ExplorerModel:
    model, _ = loading.load_model(path)
    return GatModel(model, name=path.name)


adapter("gat")(_gat)
