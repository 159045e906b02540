"""§7 The whole Transformer: the shapes of every tensor in the shipped ``ja-en`` translator, and the
shipped character GPT's next-character probabilities.

:func:`shapes_view` (the reference of the page's ``static/engine/translation_views.js``) runs a
sentence through ``ja-en`` with hooks on its modules and returns,
part by part in the diagram's order, the shape of every tensor that really flowed, each with what
its axes count (B, S, T, D, H, Dh, F, V) and its kind (token ids, vectors per position, vectors per
head, attention weights, mask), so that the page never mixes an attention-weight shape with the
shape of the vectors that flow along the stack. :func:`next_token_view` gives the GPT's
distribution over the next character before and after the temperature and top-k: the page
computes it itself (``static/engine/gpt.js`` over the ONNX export of :mod:`attnlab.onnx_apps`),
so it has no endpoint and stays as the reference the page's parity test compares with.

The letters: B sentences (1), S source tokens, T decoder positions, D = d_model, H heads,
Dh = D / H, F = d_ff, V the target vocabulary.
"""

from __future__ import annotations

import threading
from typing import Any, Literal

import torch
from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from ...decode import sample_next, sampling_probs
from .common import (
    GPT_MODEL,
    MAX_SEED,
    MAX_SENTENCE_CHARS,
    MAX_TRANSLATION_TOKENS,
    TRANSLATOR,
    LessonModels,
    checked_source_ids,
    rounded,
)

# §7's default sentence: with ja-en it gives S = 5 source tokens and T = 8 decoder positions, so
# that S, T, H = 4 and Dh = 64 all differ and every shape on the page can be read back to its
# letters (a sentence with S = H made (1, 4, 4, 4) ambiguous); short enough for the mask's table.
SHAPES_SENTENCE = "子供たちは公園で遊んでいる。"

#: The sublayers of an encoder and a decoder layer, in order; each is wrapped as
#: ``x + sublayer(LayerNorm(x))`` (pre-norm) or ``LayerNorm(x + sublayer(x))`` (post-norm).
ENCODER_SUBLAYERS = ("enc_self", "enc_ffn")
DECODER_SUBLAYERS = ("dec_self", "dec_cross", "dec_ffn")

TensorKind = Literal["ids", "vectors", "heads", "weights", "mask"]


class ShapesRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        SHAPES_SENTENCE, min_length=1, max_length=MAX_SENTENCE_CHARS, strict=True, description="a Japanese sentence"
    )


class TensorShape(BaseModel):
    name: str = Field(description="what the tensor is (the page's label key)")
    kind: TensorKind = Field(
        description="ids: token ids; vectors: one vector per position (B, S|T, D|F|V); heads: one per head "
        "and position (B, H, ·, Dh); weights: attention weights (B, H, queries, keys); mask: (T, T)"
    )
    shape: list[int]
    axes: str = Field(description="the letter of each axis, e.g. 'B S D'")


class Part(BaseModel):
    id: str = Field(description="the diagram's box, e.g. enc_self, enc_self_norm, enc_self_add")
    kind: Literal["embed", "norm", "attention", "add", "ffn", "memory", "output"]
    tensors: list[TensorShape]


class ShapesResponse(BaseModel):
    model: str
    config: dict[str, Any] = Field(description="the ja-en model's config (config.json)")
    norm: Literal["pre", "post"] = Field(
        description="pre: x + sublayer(LayerNorm(x)); post: LayerNorm(x + sublayer(x)) (the order the parts run in)"
    )
    sizes: dict[str, int] = Field(description="the letters of the axes: B, S, T, D, H, Dh, F, V")
    src_tokens: list[str]
    tgt_in_tokens: list[str] = Field(description="the decoder's input: the start token, then the output shifted")
    tgt_tokens: list[str] = Field(description="what each decoder position predicts")
    translation: str
    parts: list[Part] = Field(description="in the order they run: the encoder's, then the decoder's")
    same_in_every_layer: bool = Field(description="every encoder (decoder) layer had these shapes")
    causal_mask: list[list[bool]] = Field(description="(T, T) True: may attend (先を隠す工夫)")


class _Recorder:
    """Forward hooks that keep each module's inputs and output, call by call.

    Only the calls made by the thread that created it are kept: the model is shared, and another
    request running it at the same time (the explorer serves several at once) must not be recorded.
    """

    def __init__(self, modules: dict[str, torch.nn.Module]) -> None:
        self.thread = threading.get_ident()
        self.calls: dict[str, list[tuple[tuple, dict, Any]]] = {name: [] for name in modules}
        self.handles = [
            m.register_forward_hook(self._hook(name), with_kwargs=True) for name, m in modules.items() if m is not None
        ]

    def _hook(self, name: str):
        def hook(module, args, kwargs, output):
            if threading.get_ident() == self.thread:
                self.calls[name].append((args, kwargs, output))

        return hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def _shape(x: torch.Tensor) -> list[int]:
    return list(x.shape)


def _t(name: str, kind: TensorKind, x: torch.Tensor, axes: str) -> TensorShape:
    return TensorShape(name=name, kind=kind, shape=_shape(x), axes=axes)


def _watched(model) -> dict[str, torch.nn.Module | None]:
    """The modules whose calls :func:`shapes_view` records, by the name it reads them back with."""
    watched: dict[str, torch.nn.Module | None] = {
        "src_embed": model.src_embed,
        "tgt_embed": model.tgt_embed if model.tgt_embed is not model.src_embed else None,
        "positions": model.positions,
        "encoder_norm": model.encoder_norm,
        "decoder_norm": model.decoder_norm,
        "out_proj": model.out_proj,
    }
    for i, block in enumerate(model.encoder):
        watched |= {f"enc{i}": block, f"enc{i}.self_attn": block.self_attn, f"enc{i}.ff": block.ff}
        watched |= {f"enc{i}.ff.up": block.ff.up_proj, f"enc{i}.self_norm": block.attn_norm}
        watched |= {f"enc{i}.ff_norm": block.ff_norm}
    for i, block in enumerate(model.decoder):
        watched |= {f"dec{i}": block, f"dec{i}.self_attn": block.self_attn, f"dec{i}.cross_attn": block.cross_attn}
        watched |= {f"dec{i}.ff": block.ff, f"dec{i}.ff.up": block.ff.up_proj, f"dec{i}.self_norm": block.self_norm}
        watched |= {f"dec{i}.cross_norm": block.cross_norm, f"dec{i}.ff_norm": block.ff_norm}
    return watched


@torch.inference_mode()
def shapes_view(translator, req: ShapesRequest, name: str = TRANSLATOR) -> ShapesResponse:
    """Every part of the ``ja-en`` Transformer and the shapes of its tensors for ``req.text``.

    The sentence is translated (greedy); then one teacher-forced forward pass over the source and
    ``[BOS] + translation`` runs with hooks on the model's modules, which record the tensors that
    really flow. The per-head shapes come from the attention modules' own ``split_heads`` and
    ``project_kv``. Each sublayer is three parts in the order the model runs them: pre-norm
    ``…_norm`` (LayerNorm), the sublayer, ``…_add`` (the residual sum); post-norm the sublayer,
    ``…_add``, ``…_norm``. The parts show layer 1 of each stack (``same_in_every_layer`` says
    whether every layer had the same shapes).

    Shape:
        the letters: B = 1 sentence, S source tokens, T decoder positions, D = d_model, H heads,
        Dh = D / H, F = d_ff, V target vocabulary. Attention weights are ``(B, H, queries, keys)``:
        ``(B, H, S, S)`` in the encoder, ``(B, H, T, T)`` and ``(B, H, T, S)`` in the decoder.
    """
    from ...functional import causal_mask

    model = translator.model
    c = model.config
    ids = checked_source_ids(translator, req.text, MAX_TRANSLATION_TOKENS)
    tgt_tok = translator.tgt_tok
    tokens, produced = _greedy(translator, ids)
    tgt_in = [tgt_tok.bos_id] + produced[:-1]
    src = torch.tensor([ids], device=translator.device)  # (B, S)
    tgt = torch.tensor([tgt_in], device=translator.device)  # (B, T)
    rec = _Recorder(_watched(model))
    try:
        out = model(src, tgt, need_weights=True)
    finally:
        rec.remove()
    calls = rec.calls

    def first(key: str) -> tuple[tuple, dict, Any]:
        return calls[key][0]

    def arg(key: str) -> torch.Tensor:  # a module's first input, on its first call
        return first(key)[0][0]

    def result(key: str) -> Any:  # a module's output, on its first call
        return first(key)[2]

    embeds = calls["src_embed"] + calls["tgt_embed"]  # a shared embedding is called for both sides
    src_emb, tgt_emb = embeds[0][2], embeds[1][2]  # (B, S, D), (B, T, D)
    src_pos, tgt_pos = calls["positions"][0][2], calls["positions"][1][2]  # (B, S, D), (B, T, D)
    probs = torch.softmax(out.logits, dim=-1)  # (B, T, V)
    T = tgt.shape[1]
    mask = causal_mask(T)  # (T, T) True: may attend

    def same_layers(prefix: str, count: int, keys: list[str]) -> bool:
        def shapes(i: int) -> list:
            got = []
            for k in keys:
                for args, _kwargs, output in calls[f"{prefix}{i}{k}"]:
                    tensors = [a for a in args if isinstance(a, torch.Tensor)]
                    outs = output if isinstance(output, tuple) else (output,)
                    got.append([_shape(t) for t in tensors] + [_shape(o) for o in outs if isinstance(o, torch.Tensor)])
            return got

        layer0 = shapes(0)
        return all(shapes(i) == layer0 for i in range(1, count))

    same = same_layers("enc", c.n_encoder_layers, ["", ".self_attn", ".ff.up", ".ff"]) and same_layers(
        "dec", c.n_decoder_layers, ["", ".self_attn", ".cross_attn", ".ff.up", ".ff"]
    )

    def attention(attn: torch.nn.Module, key: str, q_side: str, k_side: str, causal: bool) -> list[TensorShape]:
        args, _kwargs, output = first(key)
        query = args[0]  # (B, Tq, D)
        memory = args[1] if len(args) > 1 and isinstance(args[1], torch.Tensor) else query  # (B, Tk, D)
        q = attn.split_heads(attn.q_proj(query))  # (B, H, Tq, Dh)
        k, v = attn.project_kv(memory)  # (B, H, Tk, Dh) each
        tensors = [
            _t("query_in", "vectors", query, f"B {q_side} D"),
            _t("key_in", "vectors", memory, f"B {k_side} D"),
            _t("q_heads", "heads", q, f"B H {q_side} Dh"),
            _t("k_heads", "heads", k, f"B H {k_side} Dh"),
            _t("v_heads", "heads", v, f"B H {k_side} Dh"),
        ]
        if causal:
            tensors.append(_t("causal_mask", "mask", mask, "T T"))
        return tensors + [
            _t("weights", "weights", output.weights, f"B H {q_side} {k_side}"),  # (B, H, Tq, Tk)
            _t("attn_out", "vectors", output.output, f"B {q_side} D"),  # heads joined, times W_o
        ]

    def ffn(prefix: str, side: str) -> list[TensorShape]:
        return [
            _t("ffn_in", "vectors", arg(f"{prefix}.ff"), f"B {side} D"),
            _t("ffn_hidden", "vectors", result(f"{prefix}.ff.up"), f"B {side} F"),  # widened to F
            _t("ffn_out", "vectors", result(f"{prefix}.ff"), f"B {side} D"),  # back to D
        ]

    def wrapped(block: str, sub: str, norm: str, sublayer: Part, side: str, next_norm: str | None) -> list[Part]:
        """A sublayer with its LayerNorm and its residual sum, in the order the model runs them."""
        sub_out = sublayer.tensors[-1]  # attn_out or ffn_out: (B, side, D)
        if c.norm == "pre":
            skip = arg(norm)  # x, the norm's input, is also what the residual path carries
            total = arg(next_norm) if next_norm else result(block).hidden  # x + sublayer(LayerNorm(x))
        else:
            skip = sublayer_input[sub]
            total = arg(norm)  # LayerNorm(x + sublayer(x)) normalises the sum
        norm_part = Part(
            id=f"{sub}_norm",
            kind="norm",
            tensors=[
                _t("norm_in", "vectors", arg(norm), f"B {side} D"),
                _t("norm_out", "vectors", result(norm), f"B {side} D"),
            ],
        )
        add_part = Part(
            id=f"{sub}_add",
            kind="add",
            tensors=[
                _t("residual_in", "vectors", skip, f"B {side} D"),
                TensorShape(name="sublayer_out", kind="vectors", shape=sub_out.shape, axes=sub_out.axes),
                _t("residual_out", "vectors", total, f"B {side} D"),
            ],
        )
        return [norm_part, sublayer, add_part] if c.norm == "pre" else [sublayer, add_part, norm_part]

    enc0, dec0 = model.encoder[0], model.decoder[0]
    sublayer_input = {
        "enc_self": arg("enc0.self_attn"),
        "enc_ffn": arg("enc0.ff"),
        "dec_self": arg("dec0.self_attn"),
        "dec_cross": arg("dec0.cross_attn"),
        "dec_ffn": arg("dec0.ff"),
    }
    enc_self = Part(
        id="enc_self", kind="attention", tensors=attention(enc0.self_attn, "enc0.self_attn", "S", "S", False)
    )
    enc_ffn = Part(id="enc_ffn", kind="ffn", tensors=ffn("enc0", "S"))
    dec_self = Part(
        id="dec_self", kind="attention", tensors=attention(dec0.self_attn, "dec0.self_attn", "T", "T", True)
    )
    dec_cross = Part(
        id="dec_cross", kind="attention", tensors=attention(dec0.cross_attn, "dec0.cross_attn", "T", "S", False)
    )
    dec_ffn = Part(id="dec_ffn", kind="ffn", tensors=ffn("dec0", "T"))
    last_enc, last_dec = f"enc{c.n_encoder_layers - 1}", f"dec{c.n_decoder_layers - 1}"

    def embed_part(part_id: str, ids, emb, pos, length: str) -> Part:
        """Token ids → embeddings → + positions, for the source (S) or the target (T)."""
        return Part(
            id=part_id,
            kind="embed",
            tensors=[
                _t("ids", "ids", ids, f"B {length}"),
                _t("embedding", "vectors", emb, f"B {length} D"),
                _t("with_positions", "vectors", pos, f"B {length} D"),
            ],
        )

    parts = [
        embed_part("src_embed", src, src_emb, src_pos, "S"),
        *wrapped("enc0", "enc_self", "enc0.self_norm", enc_self, "S", "enc0.ff_norm"),
        *wrapped("enc0", "enc_ffn", "enc0.ff_norm", enc_ffn, "S", None),
        Part(
            id="memory",
            kind="memory",
            tensors=[
                _t("block_out", "vectors", result(last_enc).hidden, "B S D"),
                _t("memory", "vectors", result("encoder_norm"), "B S D"),
            ],
        ),
        embed_part("tgt_embed", tgt, tgt_emb, tgt_pos, "T"),
        *wrapped("dec0", "dec_self", "dec0.self_norm", dec_self, "T", "dec0.cross_norm"),
        *wrapped("dec0", "dec_cross", "dec0.cross_norm", dec_cross, "T", "dec0.ff_norm"),
        *wrapped("dec0", "dec_ffn", "dec0.ff_norm", dec_ffn, "T", None),
        Part(
            id="output",
            kind="output",
            tensors=[
                _t("block_out", "vectors", result(last_dec).hidden, "B T D"),
                _t("final_norm", "vectors", result("decoder_norm"), "B T D"),
                _t("logits", "vectors", result("out_proj"), "B T V"),
                _t("probs", "vectors", probs, "B T V"),
                _t("next_token", "vectors", probs[0, -1], "V"),
            ],
        ),
    ]
    config = {k: v for k, v in vars(c).items() if isinstance(v, (int, float, str, bool)) or v is None}
    sizes = {
        "B": 1,
        "S": len(ids),
        "T": T,
        "D": c.d_model,
        "H": c.n_heads,
        "Dh": c.d_model // c.n_heads,
        "F": c.d_ff,
        "V": c.tgt_vocab_size,
    }
    return ShapesResponse(
        model=name,
        config=config,
        norm=c.norm,
        sizes=sizes,
        src_tokens=[translator.src_tok.id_to_token(i) for i in ids],
        tgt_in_tokens=[tgt_tok.id_to_token(i) for i in tgt_in],
        tgt_tokens=[tgt_tok.id_to_token(i) for i in produced],
        translation=tgt_tok.decode(tokens),
        parts=parts,
        same_in_every_layer=same,
        causal_mask=mask.tolist(),
    )


def _greedy(translator, ids: list[int]) -> tuple[list[int], list[int]]:
    """The greedy translation's ids, and the same with the end token last when decoding stopped
    on it (what each decoder position predicts, as the explorer's model page shows them)."""
    from ...decode import greedy_decode

    model, tok = translator.model, translator.tgt_tok
    limit = min(2 * len(ids) + 10, getattr(model.config, "max_len", 512) - 1)
    src = torch.tensor([ids], device=translator.device)  # (1, S)
    hyp = greedy_decode(model, src, bos_id=tok.bos_id, eos_id=tok.eos_id, pad_id=tok.pad_id, max_len=limit)[0]
    return hyp.tokens, hyp.tokens + ([tok.eos_id] if len(hyp.tokens) < limit else [])


# The token walk's default sentence: ja-en translates it correctly ("I drink coffee every
# morning."), and in its last decoder layer each English word's source–target attention peaks on
# the Japanese piece it translates (coffee → コーヒーを, drink → 飲み), so the walk shows a clean row.
TOKEN_WALK_SENTENCE = "私は毎朝コーヒーを飲みます。"
TOKEN_WALK_TOP = 5  # the most likely next tokens shown at each decoder position
TOKEN_WALK_FIRST = 4  # how many of a vector's D numbers the page prints (the norm sums all of them)


class TokenWalkRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        TOKEN_WALK_SENTENCE, min_length=1, max_length=MAX_SENTENCE_CHARS, strict=True, description="a Japanese sentence"
    )


class WalkEmbedding(BaseModel):
    """One source token entering the encoder: its embedding × √D, its position's sine code, the sum."""

    token: str
    embedding_first: list[float] = Field(description="the first numbers of embedding × √D")
    position_first: list[float] = Field(description="the first numbers of the positional encoding")
    sum_first: list[float] = Field(description="the first numbers of the sum (what the encoder reads)")
    embedding_norm: float = Field(description="the length (L2 norm over all D numbers) of embedding × √D")
    position_norm: float
    sum_norm: float


class WalkFeedForward(BaseModel):
    """One source token through the first encoder layer's feed-forward network."""

    token: str
    in_first: list[float] = Field(description="the first numbers of its input (after the layer norm)")
    in_norm: float
    active: int = Field(description="how many of the F hidden numbers are above 0 after ReLU")
    hidden_max: float = Field(description="the largest hidden number after ReLU")
    out_first: list[float] = Field(description="the first numbers of its output (width D again)")
    out_norm: float
    layer_out_norm: float = Field(description="the length of the layer's output, x + attention + feed-forward")


class WalkChoice(BaseModel):
    token: str
    p: float


class WalkOutput(BaseModel):
    """One decoder position: the most likely next tokens and the one greedy decoding chose."""

    top: list[WalkChoice] = Field(description="the most likely next tokens, most likely first (softmax, 0–1)")
    chosen: str = Field(description="the token greedy decoding wrote here (the most likely one)")
    p_chosen: float


class TokenWalkResponse(BaseModel):
    model: str
    sizes: dict[str, int] = Field(description="S, T, D, H, F, V, and the layers L_enc and L_dec")
    src_tokens: list[str]
    tgt_in_tokens: list[str] = Field(description="the decoder's input at each position: [BOS], then the output")
    tgt_tokens: list[str] = Field(description="what each decoder position wrote (its chosen token)")
    translation: str
    embeddings: list[WalkEmbedding] = Field(description="one per source token")
    feed_forward: list[WalkFeedForward] = Field(description="one per source token, encoder layer 1")
    encoder_self: list[list[list[float]]] = Field(description="per layer, (S, S): the heads' mean weights")
    decoder_self: list[list[list[float]]] = Field(description="per layer, (T, T): the heads' mean; 0 where masked")
    cross: list[list[list[float]]] = Field(description="per layer, (T, S): the heads' mean weights")
    outputs: list[WalkOutput] = Field(description="one per decoder position")


@torch.inference_mode()
def token_walk_view(translator, req: TokenWalkRequest, name: str = TRANSLATOR) -> TokenWalkResponse:
    """One sentence through the whole ``ja-en`` Transformer, with the real numbers at each step.

    The sentence is translated greedily; one teacher-forced forward pass over the source and
    ``[BOS] + translation`` (``need_weights=True``) gives every attention map, and hooks on the first
    encoder layer's feed-forward network record its input, hidden layer and output. Attention maps
    are the mean over the H heads (each row still sums to 1).

    Shape:
        src ``(1, S)``, tgt ``(1, T)``; maps per layer ``(S, S)``, ``(T, T)``, ``(T, S)``; outputs
        the top :data:`TOKEN_WALK_TOP` of each position's ``V`` probabilities
    """
    model = translator.model
    c = model.config
    ids = checked_source_ids(translator, req.text, MAX_TRANSLATION_TOKENS)
    tgt_tok = translator.tgt_tok
    tokens, produced = _greedy(translator, ids)
    tgt_in = [tgt_tok.bos_id] + produced[:-1]
    src = torch.tensor([ids], device=translator.device)  # (B, S)
    tgt = torch.tensor([tgt_in], device=translator.device)  # (B, T)
    block = model.encoder[0]
    rec = _Recorder({"ff": block.ff, "up": block.ff.up_proj, "enc0": block})
    try:
        out = model(src, tgt, need_weights=True)
    finally:
        rec.remove()
    n = TOKEN_WALK_FIRST
    S = len(ids)
    emb = model.src_embed(src)[0].float() * c.d_model**0.5  # (S, D)
    pe = model.positions.table[:S].float()  # (S, D)
    total = emb + pe  # (S, D)
    ff_in = rec.calls["ff"][0][0][0][0].float()  # (S, D)
    ff_out = rec.calls["ff"][0][2][0].float()  # (S, D)
    hidden = block.ff.act(rec.calls["up"][0][2][0].float())  # (S, F)
    layer_out = rec.calls["enc0"][0][2].hidden[0].float()  # (S, D)
    src_pieces = [translator.src_tok.id_to_token(i) for i in ids]

    def first(x: torch.Tensor) -> list[float]:
        return rounded(x[:n])

    def norm(x: torch.Tensor) -> float:
        return round(float(x.norm()), 6)

    embeddings = [
        WalkEmbedding(
            token=src_pieces[i],
            embedding_first=first(emb[i]),
            position_first=first(pe[i]),
            sum_first=first(total[i]),
            embedding_norm=norm(emb[i]),
            position_norm=norm(pe[i]),
            sum_norm=norm(total[i]),
        )
        for i in range(S)
    ]
    feed_forward = [
        WalkFeedForward(
            token=src_pieces[i],
            in_first=first(ff_in[i]),
            in_norm=norm(ff_in[i]),
            active=int((hidden[i] > 0).sum()),
            hidden_max=round(float(hidden[i].max()), 6),
            out_first=first(ff_out[i]),
            out_norm=norm(ff_out[i]),
            layer_out_norm=norm(layer_out[i]),
        )
        for i in range(S)
    ]
    att = out.attentions

    def mean_heads(maps: list[torch.Tensor]) -> list:
        return [rounded(w[0].float().mean(0)) for w in maps]  # L × (H, Q, K) -> L × (Q, K)

    probs = torch.softmax(out.logits[0].float(), dim=-1)  # (T, V)
    top_p, top_i = probs.topk(TOKEN_WALK_TOP, dim=-1)  # (T, k)
    outputs = [
        WalkOutput(
            top=[
                WalkChoice(token=tgt_tok.id_to_token(int(i)), p=round(float(p), 6))
                for p, i in zip(top_p[t], top_i[t], strict=True)
            ],
            chosen=tgt_tok.id_to_token(produced[t]),
            p_chosen=round(float(probs[t, produced[t]]), 6),
        )
        for t in range(len(produced))
    ]
    sizes = {
        "S": S,
        "T": len(tgt_in),
        "D": c.d_model,
        "H": c.n_heads,
        "F": c.d_ff,
        "V": c.tgt_vocab_size,
        "L_enc": c.n_encoder_layers,
        "L_dec": c.n_decoder_layers,
    }
    return TokenWalkResponse(
        model=name,
        sizes=sizes,
        src_tokens=src_pieces,
        tgt_in_tokens=[tgt_tok.id_to_token(i) for i in tgt_in],
        tgt_tokens=[tgt_tok.id_to_token(i) for i in produced],
        translation=tgt_tok.decode(tokens),
        embeddings=embeddings,
        feed_forward=feed_forward,
        encoder_self=mean_heads(att["encoder"]),
        decoder_self=mean_heads(att["decoder"]),
        cross=mean_heads(att["cross"]),
        outputs=outputs,
    )


MAX_PROMPT_CHARS = 1000


class NextTokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        "To be, or not to be, that is the quest",
        min_length=1,
        max_length=MAX_PROMPT_CHARS,
        strict=True,
        description="the text so far",
    )
    temperature: float = Field(1.0, ge=0.0, le=5.0, allow_inf_nan=False, description="0: greedy")
    top_k: int | None = Field(None, ge=1, le=100_000, strict=True, description="keep the k most likely; null: all")
    sample: bool = Field(False, strict=True, description="also draw the next token from the distribution")
    seed: int = Field(0, ge=0, le=MAX_SEED, strict=True, description="the draw's random seed")


class TokenProb(BaseModel):
    id: int
    token: str
    logit: float
    p_model: float = Field(description="softmax of the logits (temperature 1, every token)")
    p: float = Field(description="after the temperature and top-k: what sampling draws from")


class NextTokenResponse(BaseModel):
    model: str
    context: str = Field(description="the characters the model read (the last n_positions)")
    truncated: bool
    n_positions: int
    vocab_size: int
    temperature: float
    top_k: int | None
    kept: int = Field(description="tokens whose probability is above 0 after top-k")
    tokens: list[TokenProb] = Field(description="every token, most likely first")
    sampled: TokenProb | None = Field(description="the token drawn (with seed), when asked")


@torch.inference_mode()
def next_token_view(model, tokenizer, req: NextTokenRequest, name: str = GPT_MODEL) -> NextTokenResponse:
    """The GPT's distribution over the next token after ``req.text``, before and after the
    temperature and top-k (:func:`attnlab.decode.sampling_probs`, what
    :func:`attnlab.decode.sample_next` draws from), and optionally one draw.

    Shape:
        ids ``(1, T)`` (the last ``n_positions`` tokens) → logits ``(V,)``
    """
    ids = tokenizer.encode(req.text)
    if not ids:
        raise ValueError("the text has no token the model knows")
    n_ctx = model.config.n_positions
    used = ids[-n_ctx:]
    logits = model(torch.tensor([used])).logits[0, -1].float()  # (1, T, V) -> (V,)
    p_model = torch.softmax(logits, dim=-1)  # (V,)
    p = sampling_probs(logits[None], temperature=req.temperature, top_k=req.top_k)[0]  # (V,)
    order = torch.argsort(logits, descending=True, stable=True)  # (V,)

    def entry(i: int) -> TokenProb:
        return TokenProb(
            id=i,
            token=tokenizer.id_to_token(i),
            logit=round(float(logits[i]), 6),
            p_model=float(p_model[i]),
            p=float(p[i]),
        )

    sampled = None
    if req.sample:
        g = torch.Generator().manual_seed(req.seed)
        token = sample_next(logits[None], temperature=req.temperature, top_k=req.top_k, generator=g)
        sampled = entry(int(token[0]))
    return NextTokenResponse(
        model=name,
        context=tokenizer.decode(used),
        truncated=len(used) < len(ids),
        n_positions=n_ctx,
        vocab_size=int(logits.shape[0]),
        temperature=req.temperature,
        top_k=req.top_k,
        kept=int((p > 0).sum()),
        tokens=[entry(int(i)) for i in order],
        sampled=sampled,
    )


def add_routes(router: APIRouter, models: LessonModels, gate) -> None:
    """§7's endpoints: none. The Transformer diagram, the token walk and the next-token chart
    compute in the page (issue 36: ``static/engine/translation_views.js`` over the ja-en translator
    and ``static/engine/gpt.js`` over the character GPT, both exported to ONNX); :func:`shapes_view`,
    :func:`token_walk_view` and :func:`next_token_view` stay as the references the page is tested
    against."""
