"""BERT: a bidirectional Transformer encoder and its masked-LM pretraining (Devlin et al. 2019).

    token ids ─ embed + learned positions + token types ─ LayerNorm ─ [self-attention →
              feed-forward] × L ─ hidden states ─┬─ MLM head → logits over the vocabulary
                                                  └─ [CLS] → pooler (tanh) → next-sentence head

Unlike GPT every position attends to every other position, left *and* right (the lesson's
"bidirectional" model), so BERT cannot be trained to predict the next word; instead 15% of the
tokens are hidden and predicted from both sides (masked LM, §3.1 Task #1, see
:func:`mask_tokens`), optionally together with whether sentence B really follows sentence A
(next-sentence prediction, §3.1 Task #2). The blocks are :class:`attnlab.layers.EncoderBlock`
with the paper's post-norm and GELU. The attention weights of every layer can be read out
(``need_weights=True``) — the point of the lesson's "which words does each word look at".

Sentence embeddings (Sentence-BERT, Reimers & Gurevych 2019): :func:`mean_pool` the last hidden
states over the real tokens, then L2-normalise (:func:`sentence_embeddings`).

Shape letters: ``B`` batch, ``S`` sequence length, ``D`` width, ``H`` heads, ``V`` vocabulary,
``L`` layers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .. import functional as AF
from ..layers import ACTIVATIONS, EncoderBlock
from ..positional import LearnedPositionalEmbedding
from ..viz import ShowsAttention
from .config import StackConfig, check_fields, preset_config

Tensor = torch.Tensor

__all__ = [
    "BertConfig",
    "PRESETS",
    "bert_config",
    "BertModel",
    "BertOutput",
    "BertForMaskedLM",
    "MaskedLMOutput",
    "MLMHead",
    "init_bert_weights",
    "mask_tokens",
    "mean_pool",
    "sentence_embeddings",
    "encode_with_masks",
    "fill_mask",
]

IGNORE_INDEX = -100  # label of positions the loss skips (F.cross_entropy's default ignore_index)


@dataclass
class BertConfig(StackConfig):
    vocab_size: int = 30522  # token ids 0 … V-1 (BERT's uncased WordPiece has 30522)
    n_positions: int = 512  # longest sequence; sizes the learned position table
    d_model: int = 768  # model width D
    n_layers: int = 12  # number of Transformer blocks L
    n_heads: int = 12  # attention heads H; D must be divisible by H
    n_inner: int | None = None  # feed-forward hidden width (None: 4·D, as BERT)
    activation: str = "gelu"  # feed-forward and MLM-transform activation (BERT: exact GELU)
    layer_norm_eps: float = 1e-12  # ε inside every LayerNorm (BERT: 1e-12)
    bias: bool = True  # biases in the attention and feed-forward linear maps (BERT: yes)
    dropout: float = 0.1  # on embeddings, attention weights and sub-layer outputs (BERT: 0.1)
    type_vocab_size: int = 2  # token types ("segments"): sentence A = 0, sentence B = 1 (§3.2)
    pad_id: int = 0  # padding token id; its embedding row starts at zero
    next_sentence_head: bool = False  # also build the next-sentence prediction head (§3.1 Task #2)
    init_std: float = 0.02  # standard deviation of the normal initialisation (BERT)
    backend: str = "auto"  # attention backend (see attnlab.functional.scaled_dot_product_attention)
    attention: str = "full"  # attention variant: "full", "chunked", "sliding_window", "global_window"
    window: int | None = None  # local window of "sliding_window"/"global_window" (symmetric here)
    n_global: int = 0  # "global_window": the first n_global positions are global ([CLS]; Longformer)
    model_type: str = "bert"  # checkpoint tag used to rebuild the right class

    # d_ff, attention_spec(), to_dict() / from_dict() (config.json) and the shared checks: StackConfig.

    def __post_init__(self) -> None:
        super().__post_init__()
        check_fields(self, positive=("type_vocab_size",), sizes=(("type_vocab_size", "d_model"),))
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id={self.pad_id} is outside the vocabulary of size {self.vocab_size}")


#: Named sizes, in one place. ``vocab_size`` is filled in from the tokenizer when training.
#: "mini"/"small" are Turc et al. (2019)'s compact BERTs; "minilm-l6" is the shape of
#: all-MiniLM-L6-v2 (Wang et al. 2020's MiniLM, fine-tuned by sentence-transformers).
PRESETS: dict[str, dict] = {
    "tiny": dict(n_positions=64, d_model=32, n_layers=2, n_heads=2, dropout=0.0),
    "mini": dict(n_positions=256, d_model=256, n_layers=4, n_heads=4),
    "small": dict(n_positions=512, d_model=512, n_layers=4, n_heads=8),
    "minilm-l6": dict(n_positions=512, d_model=384, n_layers=6, n_heads=12, n_inner=1536),
    "base": dict(n_positions=512, d_model=768, n_layers=12, n_heads=12),
}


def bert_config(preset: str, **overrides) -> BertConfig:
    """A :class:`BertConfig` from a named preset, with fields overridden (e.g. ``vocab_size``)."""
    return preset_config(BertConfig, PRESETS, preset, "BERT", **overrides)


@dataclass
class BertOutput(ShowsAttention):  # attentions: AttentionMaps; shows itself in Jupyter
    hidden_states: Tensor  # (B, S, D) output of the last block
    all_hidden_states: list[Tensor]  # L+1 × (B, S, D): the embeddings, then each block's output
    attentions: list[Tensor] | None  # L × (B, H, S, S) when need_weights
    pooled: Tensor  # (B, D) tanh(W·h_[CLS] + b), the sentence-level feature of §3.1 / Task #2


@dataclass
class MaskedLMOutput(ShowsAttention):  # attentions: AttentionMaps; shows itself in Jupyter
    logits: Tensor  # (B, S, V) masked-LM logits at every position
    loss: Tensor | None  # masked-LM loss (+ next-sentence loss when its labels are given)
    attentions: list[Tensor] | None  # L × (B, H, S, S) when need_weights
    hidden_states: Tensor  # (B, S, D) last block's output
    next_sentence_logits: Tensor | None = None  # (B, 2): [is next, is random], with the NSP head


def init_bert_weights(module: nn.Module, std: float) -> None:
    """BERT's initialisation: every linear and embedding matrix of ``module`` ~ N(0, std), biases zero.

    ``std`` is ``config.init_std`` (0.02, BERT's ``initializer_range``). Used for the encoder, the
    pretraining heads and heads added later (the question-answering span head).
    """
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=std)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)


class BertModel(nn.Module):
    """The bidirectional encoder. See the module docstring for the data flow.

    Shape:
        input_ids, token_type_ids, attention_mask ``(B, S)`` → hidden states ``(B, S, D)``
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        c = self.config = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.pos_emb = LearnedPositionalEmbedding(c.n_positions, c.d_model)
        self.type_emb = nn.Embedding(c.type_vocab_size, c.d_model)
        self.emb_norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps)
        self.embed_dropout = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            EncoderBlock(
                c.d_model,
                c.n_heads,
                c.d_ff,
                dropout=c.dropout,
                activation=c.activation,
                norm="post",
                layer_norm_eps=c.layer_norm_eps,
                bias=c.bias,
                backend=c.backend,
                attention=c.attention_spec(),
            )
            for _ in range(c.n_layers)
        )
        self.pooler = nn.Linear(c.d_model, c.d_model)
        init_bert_weights(self, c.init_std)
        with torch.no_grad():
            self.tok_emb.weight[c.pad_id].zero_()

    def forward(
        self,
        input_ids: Tensor,
        *,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> BertOutput:
        """Encode a batch of token sequences.

        Args:
            input_ids: token ids, usually ``[CLS] sentence A [SEP] (sentence B [SEP])``.
            token_type_ids: 0 for sentence A, 1 for sentence B (default: all 0).
            attention_mask: boolean, ``True`` = real token, ``False`` = padding (default: all
                real); padding is never attended to.
            need_weights: also return every layer's attention weights.

        Shape:
            input_ids, token_type_ids, attention_mask ``(B, S)`` → hidden_states ``(B, S, D)``,
            attentions ``L × (B, H, S, S)``, pooled ``(B, D)``
        """
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must have shape (B, S), got {tuple(input_ids.shape)}")
        if input_ids.shape[1] > self.config.n_positions:
            raise ValueError(f"sequence of {input_ids.shape[1]} tokens exceeds n_positions={self.config.n_positions}")
        for name, t in (("token_type_ids", token_type_ids), ("attention_mask", attention_mask)):
            if t is not None and t.shape != input_ids.shape:
                raise ValueError(
                    f"{name} must have the shape of input_ids {tuple(input_ids.shape)}, got {tuple(t.shape)}"
                )
        if attention_mask is not None and attention_mask.dtype != torch.bool:
            raise TypeError(f"attention_mask must be boolean (True = real token), got dtype {attention_mask.dtype}")
        x = self.tok_emb(input_ids)  # (B, S, D)
        if token_type_ids is None:
            x = x + self.type_emb.weight[0]  # (B, S, D): every token is in sentence A
        else:
            x = x + self.type_emb(token_type_ids)  # (B, S, D)
        x = self.embed_dropout(self.emb_norm(self.pos_emb(x)))  # (B, S, D)
        all_hidden = [x]
        attentions = [] if need_weights else None
        for block in self.blocks:
            x, weights, _ = block(x, key_padding_mask=attention_mask, need_weights=need_weights)
            all_hidden.append(x)
            if need_weights:
                attentions.append(weights)
        pooled = torch.tanh(self.pooler(x[:, 0]))  # (B, D) from the [CLS] position
        return BertOutput(x, all_hidden, attentions, pooled)


class MLMHead(nn.Module):
    """Masked-LM head: ``LayerNorm(act(W h + b)) · Eᵀ + bias``, with ``E`` the token embeddings.

    The output matrix is the input embedding matrix (passed in at call time, so the two can never
    drift apart); only the per-token bias is the head's own (Devlin et al. 2019, App. A.2).

    Shape:
        hidden ``(B, S, D)``, embedding ``(V, D)`` → logits ``(B, S, V)``
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.transform = nn.Linear(config.d_model, config.d_model)
        self.act = ACTIVATIONS[config.activation]
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden: Tensor, embedding: Tensor) -> Tensor:
        h = self.norm(self.act(self.transform(hidden)))  # (B, S, D)
        return F.linear(h, embedding, self.bias)  # (B, S, D) x (V, D)ᵀ -> (B, S, V)


class BertForMaskedLM(nn.Module):
    """BERT with its pretraining heads: masked LM, and next-sentence prediction when
    ``config.next_sentence_head``.

    Shape:
        input_ids ``(B, S)`` → logits ``(B, S, V)``, next_sentence_logits ``(B, 2)``
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.mlm = MLMHead(config)
        self.next_sentence = nn.Linear(config.d_model, 2) if config.next_sentence_head else None
        init_bert_weights(self.mlm, config.init_std)
        if self.next_sentence is not None:
            init_bert_weights(self.next_sentence, config.init_std)

    def forward(
        self,
        input_ids: Tensor,
        *,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        labels: Tensor | None = None,
        next_sentence_labels: Tensor | None = None,
        need_weights: bool = False,
    ) -> MaskedLMOutput:
        """Masked-LM logits (and next-sentence logits) for a batch.

        Args:
            input_ids, token_type_ids, attention_mask, need_weights: as :meth:`BertModel.forward`.
            labels: the original token at each masked position, ``-100`` elsewhere (what
                :func:`mask_tokens` returns).
            next_sentence_labels: 0 if sentence B follows sentence A in the text, 1 if it is a
                random sentence (needs ``config.next_sentence_head``).

        Shape:
            input_ids, labels ``(B, S)``; next_sentence_labels ``(B,)`` → logits ``(B, S, V)``
        """
        out = self.bert(
            input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask, need_weights=need_weights
        )
        logits = self.mlm(out.hidden_states, self.bert.tok_emb.weight)  # (B, S, V)
        nsp_logits = self.next_sentence(out.pooled) if self.next_sentence is not None else None  # (B, 2)
        loss = None
        if labels is not None:
            if labels.shape != input_ids.shape:
                raise ValueError(
                    f"labels must have the shape of input_ids {tuple(input_ids.shape)}, got {tuple(labels.shape)}"
                )
            loss = F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]),  # (B·S, V)
                labels.reshape(-1),  # (B·S,)
                ignore_index=IGNORE_INDEX,
            )
        if next_sentence_labels is not None:
            if nsp_logits is None:
                raise ValueError(
                    "next_sentence_labels given but the model has no next-sentence head "
                    "(build it with BertConfig(next_sentence_head=True))"
                )
            nsp_loss = F.cross_entropy(nsp_logits, next_sentence_labels)
            loss = nsp_loss if loss is None else loss + nsp_loss
        return MaskedLMOutput(logits, loss, out.attentions, out.hidden_states, nsp_logits)


def mask_tokens(
    input_ids: Tensor,
    *,
    mask_id: int,
    vocab_size: int,
    special_ids: Sequence[int],
    p: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """BERT's masked-LM corruption (Devlin et al. 2019, §3.1 Task #1 and App. A.1).

    Each non-special token is selected with probability ``p`` (15%). A selected token is replaced
    by ``[MASK]`` 80% of the time, by a random (non-special) token 10% of the time, and left
    unchanged 10% of the time — so the model cannot learn that only ``[MASK]`` positions matter,
    since ``[MASK]`` never appears when the model is used. The labels hold the original token at
    the selected positions and ``-100`` (ignored by the loss) elsewhere.

    Args:
        input_ids: token ids to corrupt (not modified).
        mask_id: id of ``[MASK]``.
        vocab_size: the random replacements are drawn from ``0 … vocab_size-1`` minus ``special_ids``.
        special_ids: ids never selected and never drawn as replacements (padding, [CLS], [SEP], …).
        p: selection probability.
        generator: random number generator (for reproducible masks).

    Shape:
        input_ids ``(B, S)`` (any shape) → (corrupted ids, labels), both of the same shape
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    if not 0 <= mask_id < vocab_size:
        raise ValueError(f"mask_id={mask_id} is outside the vocabulary of size {vocab_size}")
    device = input_ids.device
    special = torch.tensor(sorted(set(int(i) for i in special_ids)), dtype=input_ids.dtype, device=device)
    allowed = torch.ones(vocab_size, dtype=torch.bool, device=device)
    allowed[special[(special >= 0) & (special < vocab_size)]] = False
    allowed[mask_id] = False
    replacement_ids = allowed.nonzero().squeeze(1)  # (V',)
    if replacement_ids.numel() == 0:
        raise ValueError("no ordinary token left to draw random replacements from")
    selected = (torch.rand(input_ids.shape, generator=generator, device=device) < p) & ~torch.isin(input_ids, special)
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    action = torch.rand(input_ids.shape, generator=generator, device=device)
    to_mask = selected & (action < 0.8)
    to_random = selected & (action >= 0.8) & (action < 0.9)
    random_ids = replacement_ids[
        torch.randint(replacement_ids.numel(), input_ids.shape, generator=generator, device=device)
    ]
    corrupted = torch.where(to_mask, torch.full_like(input_ids, mask_id), input_ids)
    corrupted = torch.where(to_random, random_ids, corrupted)
    return corrupted, labels


def mean_pool(hidden: Tensor, attention_mask: Tensor | None = None) -> Tensor:
    """Average the hidden states over the real (non-padding) tokens.

    Shape:
        hidden ``(B, S, D)``; attention_mask ``(B, S)`` boolean, True = real → ``(B, D)``
    """
    if attention_mask is None:
        return hidden.mean(dim=1)  # (B, D)
    m = attention_mask.to(hidden.dtype).unsqueeze(-1)  # (B, S, 1)
    return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)  # (B, D)


def _pad_batch(seqs: list[list[int]], pad_id: int, device) -> tuple[Tensor, Tensor]:
    lengths = torch.tensor([len(s) for s in seqs])
    S = int(lengths.max())
    ids = torch.full((len(seqs), S), pad_id, dtype=torch.long)  # (B, S)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return ids.to(device), AF.padding_mask(lengths, max_len=S).to(device)  # (B, S), (B, S)


@torch.no_grad()
def sentence_embeddings(
    model: BertModel,
    tokenizer,
    texts: Sequence[str],
    *,
    max_length: int | None = None,
    normalize: bool = True,
    batch_size: int = 32,
) -> Tensor:
    """One vector per text: ``[CLS] text [SEP]`` → BERT → mean over real tokens → L2-normalised.

    This is how sentence-transformers' all-MiniLM-L6-v2 embeds (Reimers & Gurevych 2019, §3:
    the MEAN pooling strategy, then a normalisation layer so cosine similarity is a dot product).
    Texts longer than ``max_length`` tokens (default: the model's ``n_positions``) are cut, the
    closing ``[SEP]`` kept.

    Args:
        model: a :class:`BertModel` (or anything with ``.bert`` holding one).
        tokenizer: an attnlab tokenizer whose ``bos_id``/``eos_id`` are ``[CLS]``/``[SEP]``.
        texts: the sentences.

    Shape:
        N texts → ``(N, D)``
    """
    bert = getattr(model, "bert", model)
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not one string")
    if not texts:
        raise ValueError("no texts to embed")
    max_length = bert.config.n_positions if max_length is None else min(max_length, bert.config.n_positions)
    device = next(bert.parameters()).device
    was_training = bert.training
    bert.eval()
    out = []
    for start in range(0, len(texts), batch_size):
        chunk = texts[start : start + batch_size]
        seqs = [[tokenizer.bos_id] + tokenizer.encode(t.strip())[: max_length - 2] + [tokenizer.eos_id] for t in chunk]
        ids, mask = _pad_batch(seqs, tokenizer.pad_id, device)  # (B, S), (B, S)
        hidden = bert(ids, attention_mask=mask).hidden_states  # (B, S, D)
        pooled = mean_pool(hidden, mask)  # (B, D)
        out.append(F.normalize(pooled, dim=-1) if normalize else pooled)
    bert.train(was_training)
    return torch.cat(out)  # (N, D)


@torch.no_grad()
def encode_with_masks(tokenizer, text: str) -> list[int]:
    """``[CLS] text [SEP]`` as ids, where each mask token written in ``text`` (the tokenizer's
    ``[MASK]``) becomes the mask id.

    The pieces between masks are tokenized on their own, so this works for character and subword
    tokenizers alike; a tokenizer without a mask token encodes ``text`` whole.

    Shape:
        one text with M masks → S ids, M of them the mask id
    """
    mask_str = tokenizer.id_to_token(tokenizer.mask_id) if tokenizer.mask_id is not None else None
    pieces = text.split(mask_str) if mask_str else [text]
    ids = [tokenizer.bos_id]
    for i, piece in enumerate(pieces):
        if i:
            ids.append(tokenizer.mask_id)
        if piece:
            ids.extend(tokenizer.encode(piece))
    ids.append(tokenizer.eos_id)
    return ids


def fill_mask(model: BertForMaskedLM, tokenizer, text: str, *, top_k: int = 5) -> list[list[tuple[str, float]]]:
    """The ``top_k`` most likely tokens (and their probabilities) at every mask token of ``text``.

    ``text`` writes the mask as the tokenizer's mask token (``[MASK]``); see
    :func:`encode_with_masks`.

    Shape:
        one text with M masks → M lists of ``top_k`` ``(token, probability)`` pairs
    """
    if not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be an integer ≥ 1, got {top_k!r}")
    if tokenizer.mask_id is None:
        raise ValueError("this tokenizer has no mask token")
    mask_str = tokenizer.id_to_token(tokenizer.mask_id)
    if mask_str not in text:
        raise ValueError(f"text has no {mask_str} to fill: {text!r}")
    ids = encode_with_masks(tokenizer, text)
    n_pos = model.config.n_positions
    if len(ids) > n_pos:
        raise ValueError(f"text is {len(ids)} tokens long, more than the model's n_positions={n_pos}")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    input_ids = torch.tensor([ids], device=device)  # (1, S)
    logits = model(input_ids).logits[0]  # (S, V)
    model.train(was_training)
    positions = (input_ids[0] == tokenizer.mask_id).nonzero().squeeze(1)  # (M,)
    probs = torch.softmax(logits[positions].float(), dim=-1)  # (M, V)
    top = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
    return [
        [(tokenizer.id_to_token(int(i)), float(p)) for p, i in zip(row_p, row_i)]
        for row_p, row_i in zip(top.values, top.indices)
    ]
