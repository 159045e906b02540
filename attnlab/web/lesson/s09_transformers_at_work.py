"""§9 Transformers at work: the three families, and small shipped models doing their jobs live.

Endpoints (each runs one shipped model of :mod:`attnlab.assets`; a model that is not installed
is a 503 naming it and ``make models ONLY=NAME``; bad input is a 4xx):

- the masked LM (computed in the page, ``static/engine/bert.js``; :func:`mlm_view` is its
  reference): the encoder-only ``shakespeare-mlm`` fills the one ``[MASK]`` of a
  line: its candidates and probabilities, and the row of ``[MASK]`` in every layer's and head's
  self-attention (no mask: it sees both sides).
- question answering (computed in the page, ``static/engine/bert.js``; :func:`qa_view` is its
  reference): the encoder-only ``facts-qa`` (a small BERT with a span head,
  trained from scratch on generated facts) picks the answer span of a question in a passage: the
  start and end probabilities of every passage token, and per layer and head the question tokens'
  mean attention over the passage, with the head that puts most of it on the answer.
- ``gpt_view`` (in the page: ``static/engine/gpt.js``; no endpoint): the decoder-only ``shakespeare-char`` (§7's GPT): the next
  character's probabilities and the last position's row in every layer's and head's causal
  self-attention (only itself and the characters before it).
- §9's summary, computed in the page (``static/engine/summary.js`` over the model's ONNX export)
  with :func:`summary_view` as its reference: the encoder–decoder ``facts-summarizer`` (a
  pointer-generator, See et al. 2017): the summary word by word with p_gen (generate) and 1 − p_gen (copy), and each
  word's source–target attention over the document.
- ``vit_view`` (in the page: ``static/engine/vit.js``; no endpoint): ``digits-vit`` on one held-out 8 × 8 digit: the class
  probabilities and [CLS]'s attention over the 16 patches, per layer and head.
- ``gat_view`` (in the page: ``static/engine/gat.js``; no endpoint): ``karate-gat`` on Zachary's karate club: one member's attention
  over its neighbours (itself included), per head of the first layer, and every member's faction.

The letters: L layers, H heads, S tokens (or characters, or document words), T summary words,
P patches, N nodes, Q question tokens, C passage tokens.
"""

from __future__ import annotations

from pathlib import Path

import torch
from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from .common import MAX_SEED, LessonModels, rounded

__all__ = [
    "MLMRequest",
    "QARequest",
    "QAResponse",
    "qa_view",
    "qa_examples",
    "MLMResponse",
    "GPTRequest",
    "GPTResponse",
    "SummaryRequest",
    "SummaryResponse",
    "VitRequest",
    "VitResponse",
    "GatRequest",
    "GatResponse",
    "mlm_view",
    "gpt_view",
    "summary_view",
    "summary_examples",
    "vit_view",
    "gat_view",
]

MLM_MODEL = "shakespeare-mlm"
QA_MODEL = "facts-qa"
SUMMARY_MODEL = "facts-summarizer"
VIT_MODEL = "digits-vit"
GAT_MODEL = "karate-gat"
GPT_APP_MODEL = "shakespeare-char"

MAX_LINE_CHARS = 200
CANDIDATES = 8  # candidates (tokens) shown for a mask and for the next character
DEFAULT_MLM = "ROMEO: I will l[MASK]ve thee, my lord."
DEFAULT_GPT = "KING HENRY: My lord, the"
FIRST_IMAGE = 2  # the ViT's first held-out image shown: one it gets right (image 0 it gets wrong)
N_SUMMARY_EXAMPLES = 3  # held-out generated documents offered as examples
N_QA_EXAMPLES = 3  # held-out generated passages offered as examples (three questions each)
QA_SEED = 7  # the QA facts task's seed of the offered passages (the build's splits take seeds 0, 1 and 2)
MAX_PASSAGE_CHARS = 400
MAX_QUESTION_CHARS = 120
SUMMARY_SEED = 7  # the facts task's seed of the offered documents (not a training seed: see _examples)


# --------------------------------------------------------------------------------------------
# Encoder-only: the masked LM.
# --------------------------------------------------------------------------------------------


class MLMRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        DEFAULT_MLM, min_length=1, max_length=MAX_LINE_CHARS, strict=True, description="a line with one [MASK]"
    )


class Candidate(BaseModel):
    token: str
    p: float


class HeadPick(BaseModel):
    layer: int
    head: int
    position: int
    weight: float


class MLMResponse(BaseModel):
    model: str
    tokens: list[str] = Field(description="[CLS] line [SEP], as the model's BPE pieces")
    mask: int = Field(description="position of [MASK]")
    candidates: list[Candidate] = Field(description="the most likely tokens at [MASK], most likely first")
    n_layers: int
    n_heads: int
    weights: list[list[list[float]]] = Field(description="(L, H, S) each head's weights from [MASK]")
    strongest: HeadPick = Field(description="the largest weight from [MASK] to another word (not [CLS], [SEP], itself)")


@torch.inference_mode()
def mlm_view(model, tokenizer, req: MLMRequest, name: str = MLM_MODEL) -> MLMResponse:
    """Fill the one ``[MASK]`` of ``req.text``; the ``[MASK]`` row of every attention map.

    Shape:
        ids ``(1, S)`` → weights ``(L, H, S)``; candidates ``(CANDIDATES,)``
    """
    from ...models.bert import encode_with_masks

    mask_str = tokenizer.id_to_token(tokenizer.mask_id)
    if req.text.count(mask_str) != 1:
        raise ValueError(f"write exactly one {mask_str} in the line (found {req.text.count(mask_str)})")
    ids = encode_with_masks(tokenizer, req.text)
    if len(ids) > model.config.n_positions:
        raise ValueError(f"the line has {len(ids)} tokens; this model reads at most {model.config.n_positions}")
    at = ids.index(tokenizer.mask_id)
    out = model(torch.tensor([ids]), need_weights=True)
    probs = torch.softmax(out.logits[0, at].float(), dim=-1)  # (V,)
    top = probs.topk(CANDIDATES)
    weights = torch.stack([w[0, :, at] for w in out.attentions]).float()  # L × (1, H, S, S) -> (L, H, S)
    L, H, S = weights.shape
    others = weights.clone()
    others[:, :, [0, S - 1, at]] = -1.0  # [CLS], [SEP] and the mask itself are not "another word"
    best = int(others.reshape(-1).argmax())
    layer, head, position = best // (H * S), (best // S) % H, best % S
    return MLMResponse(
        model=name,
        tokens=[tokenizer.id_to_token(i) for i in ids],
        mask=at,
        candidates=[
            Candidate(token=tokenizer.id_to_token(int(i)), p=round(float(p), 6))
            for p, i in zip(top.values, top.indices)
        ],
        n_layers=L,
        n_heads=H,
        weights=rounded(weights, 5),
        strongest=HeadPick(
            layer=layer, head=head, position=position, weight=round(float(weights[layer, head, position]), 5)
        ),
    )


# --------------------------------------------------------------------------------------------
# Encoder-only: extractive question answering.
# --------------------------------------------------------------------------------------------


def qa_examples() -> list[dict]:
    """Passages of the generated facts task the question answerer never saw (seed ``QA_SEED``),
    each with its three questions: ``[{"passage", "questions"}]``."""
    from ...data.text_tasks import make_qa_task

    data = make_qa_task(N_QA_EXAMPLES, seed=QA_SEED, questions_per_paragraph=3)["data"]
    # The page opens on the first example: like the lesson's default sentences, one the model gets
    # right (tested). The generator's first passage, whose founder the model gets wrong, comes last.
    data = data[1:] + data[:1]
    return [
        {"passage": a["paragraphs"][0]["context"], "questions": [q["question"] for q in a["paragraphs"][0]["qas"]]}
        for a in data
    ]


class QARequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    passage: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_PASSAGE_CHARS,
        strict=True,
        description="the passage (null: the first example)",
    )
    question: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_QUESTION_CHARS,
        strict=True,
        description="a question about the passage (null: the first example's first question)",
    )


class QAResponse(BaseModel):
    model: str
    examples: list[dict] = Field(description="held-out passages, each with three questions")
    passage: str
    question: str
    question_tokens: list[str]
    passage_tokens: list[str]
    offsets: list[list[int]] = Field(description="(C, 2) each passage token's character span in the passage")
    answer: str
    answer_tokens: list[int] = Field(description="the answer's first and last passage token (inclusive)")
    answer_chars: list[int] = Field(description="the answer's character span in the passage")
    start_probs: list[float] = Field(description="(C,) softmax of the start scores over the passage tokens")
    end_probs: list[float] = Field(description="(C,) softmax of the end scores over the passage tokens")
    n_layers: int
    n_heads: int
    weights: list[list[list[float]]] = Field(
        description="(L, H, C) the question tokens' attention on each passage token, mean over the question tokens"
    )
    on_answer: list[list[float]] = Field(description="(L, H) the part of that attention on the answer's tokens")
    best_head: list[int] = Field(description="(layer, head) with the largest part on the answer")


@torch.inference_mode()
def qa_view(answerer, req: QARequest, name: str = QA_MODEL) -> QAResponse:
    """Answer ``req.question`` from ``req.passage``: the span, start/end probabilities and the
    question → passage attention of every head.

    Shape:
        one window ``(1, S)`` → probabilities ``(C,)``, weights ``(L, H, C)``, on_answer ``(L, H)``
    """
    from ...data.squad import collate_windows, question_windows
    from ...models.qa import best_spans

    examples = qa_examples()
    passage = req.passage if req.passage is not None else examples[0]["passage"]
    question = req.question if req.question is not None else examples[0]["questions"][0]
    if not passage.strip() or not question.strip():
        raise ValueError("write a passage and a question")
    tok, setup = answerer.tokenizer, answerer.setup
    windows = question_windows(tok, setup, 0, question, passage)
    if len(windows) > 1:
        raise ValueError(
            f"the passage is too long for this model: with the question it reads at most {setup.max_length} tokens"
        )
    w = windows[0]
    batch = collate_windows([w], tok.pad_id)
    out = answerer.model(
        batch.input_ids,
        token_type_ids=batch.token_type_ids,
        attention_mask=batch.attention_mask,
        span_mask=batch.span_mask,
        need_weights=True,
    )
    span = best_spans(out.start_logits, out.end_logits, batch.span_mask, setup.max_answer_tokens)
    c0, C = w.context_start, len(w.offsets)
    c = slice(c0, c0 + C)
    start_probs = torch.softmax(out.start_logits[0, c].float(), -1)  # (C,)
    end_probs = torch.softmax(out.end_logits[0, c].float(), -1)  # (C,)
    maps = torch.stack([a[0] for a in out.attentions]).float()  # L × (H, S, S) -> (L, H, S, S)
    weights = maps[:, :, 1 : 1 + w.n_question, c].mean(2)  # (L, H, Q, C) -> (L, H, C)
    first, last = int(span.start[0]) - c0, int(span.end[0]) - c0
    on_answer = weights[:, :, first : last + 1].sum(-1)  # (L, H)
    H = on_answer.shape[1]
    best = int(on_answer.reshape(-1).argmax())
    a, b = w.offsets[first][0], w.offsets[last][1]
    ids = w.input_ids
    return QAResponse(
        model=name,
        examples=examples,
        passage=passage,
        question=question,
        question_tokens=[tok.id_to_token(i) for i in ids[1 : 1 + w.n_question]],
        passage_tokens=[tok.id_to_token(i) for i in ids[c]],
        offsets=[list(o) for o in w.offsets],
        answer=passage[a:b],
        answer_tokens=[first, last],
        answer_chars=[a, b],
        start_probs=[round(float(p), 6) for p in start_probs],
        end_probs=[round(float(p), 6) for p in end_probs],
        n_layers=weights.shape[0],
        n_heads=H,
        weights=rounded(weights, 5),
        on_answer=rounded(on_answer, 5),
        best_head=[best // H, best % H],
    )


# --------------------------------------------------------------------------------------------
# Decoder-only: the next character and the causal row.
# --------------------------------------------------------------------------------------------


class GPTRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(DEFAULT_GPT, min_length=1, max_length=MAX_LINE_CHARS, strict=True, description="the text so far")


class GPTResponse(BaseModel):
    model: str
    tokens: list[str] = Field(description="the characters read (the last n_positions)")
    truncated: bool
    candidates: list[Candidate] = Field(description="the most likely next characters (temperature 1)")
    n_layers: int
    n_heads: int
    weights: list[list[list[float]]] = Field(description="(L, H, S) the last position's causal row")


@torch.inference_mode()
def gpt_view(model, tokenizer, req: GPTRequest, name: str = GPT_APP_MODEL) -> GPTResponse:
    """The next character's probabilities after ``req.text`` and the last position's attention row.

    Shape:
        ids ``(1, S)`` → weights ``(L, H, S)``
    """
    ids = tokenizer.encode(req.text)
    if not ids or all(i == tokenizer.unk_id for i in ids):
        raise ValueError("the text has no character the model knows (it read only Shakespeare's English)")
    used = ids[-model.config.n_positions :]
    out = model(torch.tensor([used]), need_weights=True)
    probs = torch.softmax(out.logits[0, -1].float(), dim=-1)  # (V,)
    top = probs.topk(CANDIDATES)
    weights = torch.stack([w[0, :, -1] for w in out.attentions]).float()  # L × (1, H, S, S) -> (L, H, S)
    return GPTResponse(
        model=name,
        tokens=[tokenizer.id_to_token(i) for i in used],
        truncated=len(used) < len(ids),
        candidates=[
            Candidate(token=tokenizer.id_to_token(int(i)), p=round(float(p), 6))
            for p, i in zip(top.values, top.indices)
        ],
        n_layers=weights.shape[0],
        n_heads=weights.shape[1],
        weights=rounded(weights, 5),
    )


# --------------------------------------------------------------------------------------------
# Encoder–decoder: the pointer-generator's copy switch.
# --------------------------------------------------------------------------------------------


def summary_examples() -> list[str]:
    """Documents of the generated facts task the summarizer never saw (seed ``SUMMARY_SEED``, which
    no split of ``make models`` uses: the build's splits take seeds 0, 1 and 2)."""
    from ...data.text_tasks import make_summarization_task

    return [e.document for e in make_summarization_task(N_SUMMARY_EXAMPLES, seed=SUMMARY_SEED)]


def write_summary_examples(out) -> Path:
    """Write ``summary-examples.json`` for the page (``{"documents": [...]}``, :func:`summary_examples`):
    generating the task is Python's; the page summarizes them itself (``static/engine/summary.js``).

    Shape:
        no tensors
    """
    import json

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"documents": summary_examples()}, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


class SummaryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    document: str | None = Field(
        None, min_length=1, max_length=600, strict=True, description="a document (null: the first example)"
    )


class SummaryResponse(BaseModel):
    model: str
    examples: list[str]
    document: str
    src_tokens: list[str] = Field(description="the document's words as the model read them")
    tokens: list[str] = Field(description="the summary's words, then [EOS]")
    p_gen: list[float] = Field(description="per summary word: the probability of generating (1 − p_gen: copying)")
    attention: list[list[float]] = Field(description="(T, S) each summary word's attention over the document")
    known: list[bool] = Field(description="per document word: in the model's vocabulary")


@torch.inference_mode()
def summary_view(summarizer, req: SummaryRequest, name: str = SUMMARY_MODEL) -> SummaryResponse:
    """Summarize one document greedily; p_gen and the attention of each summary word.

    Shape:
        document (S words) → attention ``(T, S)``, p_gen ``(T,)``
    """
    examples = summary_examples()
    document = req.document if req.document is not None else examples[0]
    if not summarizer.vocab.split(document):
        raise ValueError("the document has no words")
    s = summarizer.summarize([document], beam_size=1, return_attention=True)[0]
    vocab = summarizer.vocab
    known = [vocab.encode(w) != [vocab.unk_id] for w in s.src_tokens]
    return SummaryResponse(
        model=name,
        examples=examples,
        document=document,
        src_tokens=s.src_tokens,
        tokens=s.tokens,
        p_gen=[round(float(p), 6) for p in s.p_gen],
        attention=rounded(s.attention, 5),
        known=known,
    )


# --------------------------------------------------------------------------------------------
# Beyond text: image patches and a graph's edges.
# --------------------------------------------------------------------------------------------


class VitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    index: int = Field(
        FIRST_IMAGE, ge=0, le=MAX_SEED, strict=True, description="a held-out test image (default: one it gets right)"
    )


class VitResponse(BaseModel):
    model: str
    index: int
    n_images: int
    label: int = Field(description="the true digit")
    image: list[list[float]] = Field(description="(8, 8) the grey levels, 0 (white) to 1 (black)")
    patch: int = Field(description="pixels per patch side")
    probs: list[float] = Field(description="(10,) the class probabilities")
    n_layers: int
    n_heads: int
    cls: list[list[list[float]]] = Field(description="(L, H, P) [CLS]'s weights over the patches")
    cls_self: list[list[float]] = Field(description="(L, H) [CLS]'s weight on itself (the rest of its row)")


@torch.inference_mode()
def vit_view(loaded, req: VitRequest, name: str = VIT_MODEL) -> VitResponse:
    """One held-out digit through the ViT: probabilities and [CLS]'s attention over the patches.

    Shape:
        image ``(8, 8)`` → cls ``(L, H, P)`` with P = (8 / patch)²
    """
    from ...data.digits import digits_splits
    from ...models.vit import cls_attention

    model, config = loaded
    data = digits_splits(seed=config.get("split_seed", 0))
    n = len(data.test_y)
    if req.index >= n:
        raise ValueError(f"index must be below {n} (the held-out test images)")
    image = data.test_x[req.index].float()  # (8, 8)
    out = model(image.unsqueeze(0), need_weights=True)  # (1, 8, 8)
    rows = cls_attention(out.attentions)[0].float()  # (L, H, 1+P)
    top = float(image.max()) or 1.0
    return VitResponse(
        model=name,
        index=req.index,
        n_images=n,
        label=int(data.test_y[req.index]),
        image=rounded(image / top, 5),
        patch=int(config["patch_size"]),
        probs=[round(float(p), 6) for p in torch.softmax(out.logits[0].float(), -1)],
        n_layers=rows.shape[0],
        n_heads=rows.shape[1],
        cls=rounded(rows[:, :, 1:], 5),
        cls_self=rounded(rows[:, :, 0], 5),
    )


class GatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    node: int = Field(0, ge=0, le=MAX_SEED, strict=True, description="the member whose attention is shown")


class Neighbour(BaseModel):
    node: int
    weights: list[float] = Field(description="(H,) per head of the first layer")
    mean: float


class GatResponse(BaseModel):
    model: str
    node: int
    n_nodes: int
    edges: list[tuple[int, int]]
    positions: list[tuple[float, float]] = Field(description="(N, 2) a fixed drawing of the graph, in [0, 1]")
    labelled: list[int] = Field(description="the members whose faction the model saw in training")
    truth: list[int] = Field(description="(N,) the faction each member joined")
    predicted: list[int] = Field(description="(N,) the faction the model gives each member")
    class_names: list[str]
    n_heads: int
    neighbours: list[Neighbour] = Field(description="the node's neighbours and itself, by node number")


@torch.inference_mode()
def gat_view(loaded, req: GatRequest, name: str = GAT_MODEL) -> GatResponse:
    """One member's attention over its neighbours in the GAT's first layer, and every prediction.

    Shape:
        features ``(N, F)`` → the node's row of each head ``(H, N)``, nonzero on its neighbours
    """
    import numpy as np

    from ...data.graphs import karate_club
    from ...viz import spring_layout

    model, config = loaded
    data = karate_club()
    n = data.features.shape[0]
    if req.node >= n:
        raise ValueError(f"node must be below {n} (the club's members are 0–{n - 1})")
    out = model(data.features, data.mask, need_weights=True)
    first = out.attentions[0][:, req.node].float()  # (H, N, N) -> (H, N)
    nbrs = [int(j) for j in torch.nonzero(data.mask[req.node]).squeeze(1)]
    pos = spring_layout(data.edges, n, seed=0)  # (N, 2)
    pos = (pos - pos.min(0)) / np.maximum(pos.max(0) - pos.min(0), 1e-9)
    return GatResponse(
        model=name,
        node=req.node,
        n_nodes=n,
        edges=[(int(a), int(b)) for a, b in data.edges.T.tolist()],
        positions=[(round(float(x), 4), round(float(y), 4)) for x, y in pos],
        labelled=[int(i) for i in config.get("labelled", [])],
        truth=[int(c) for c in data.labels],
        predicted=[int(c) for c in out.logits.argmax(-1)],
        class_names=list(data.class_names),
        n_heads=first.shape[0],
        neighbours=[
            Neighbour(node=j, weights=rounded(first[:, j], 5), mean=round(float(first[:, j].mean()), 5)) for j in nbrs
        ],
    )


# --------------------------------------------------------------------------------------------
# Routes.
# --------------------------------------------------------------------------------------------


def add_routes(router: APIRouter, models: LessonModels, gate) -> None:
    """§9's endpoints. The GPT, ViT and GAT widgets compute in the page (static/engine/gpt.js,
    vit.js, gat.js over the ONNX exports of attnlab.onnx_apps): gpt_view, vit_view and gat_view
    stay as the references their parity tests compare with, and have no endpoint."""

    # Every §9 widget computes in the page: the masked LM and QA (static/engine/bert.js), the
    # decoder-only GPT (gpt.js), the summary (summary.js), the image (vit.js) and the graph (gat.js);
    # mlm_view, qa_view, gpt_view, summary_view, vit_view and gat_view are their references.
