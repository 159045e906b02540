"""TODO docstring"""

from __future__ import annotations

from typing import Any

import torch
from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from ...decode import sample_next, sampling_probs
from .common import (
    GPT_MODEL,
    LIVE,
    MAX_SEED,
    MAX_SENTENCE_CHARS,
    MAX_TRANSLATION_TOKENS,
    TRANSLATOR,
    LessonModels,
    _check_source,
    run,
)

SHAPES_SENTENCE = "この本はとても面白い。"  # §7: short, so the causal mask fits on the page


class ShapesRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        SHAPES_SENTENCE, min_length=1, max_length=MAX_SENTENCE_CHARS, strict=True, description="a Japanese sentence"
    )


class TensorShape(BaseModel):
    name: str = Field(description="what the tensor is (the page's label key)")
    shape: list[int]
    axes: str = Field(description="what each axis counts, e.g. 'B S D'")


class Part(BaseModel):
    id: str = Field(description="the diagram's box")
    tensors: list[TensorShape]


class ShapesResponse(BaseModel):
    model: str
    config: dict[str, Any] = Field(description="the ja-en model's config (config.json)")
    sizes: dict[str, int] = Field(description="the letters of the axes: B, S, T, D, H, Dh, F, V")
    src_tokens: list[str]
    tgt_in_tokens: list[str] = Field(description="the decoder's input: the start token, then the output shifted")
    tgt_tokens: list[str] = Field(description="what each decoder position predicts")
    translation: str
    parts: list[Part]
    same_in_every_layer: bool = Field(description="every encoder (decoder) layer had these shapes")
    causal_mask: list[list[bool]] = Field(description="(T, T) True: may attend (先を隠す工夫)")


class _Recorder:
    """Forward hooks that keep each module's inputs and output, call by call."""

    def __init__(self, modules: dict[str, torch.nn.Module]) -> None:
        self.calls: dict[str, list[tuple[tuple, dict, Any]]] = {name: [] for name in modules}
        self.handles = [
            m.register_forward_hook(self._hook(name), with_kwargs=True) for name, m in modules.items() if m is not None
        ]

    def _hook(self, name: str):
        def hook(module, args, kwargs, output):
            self.calls[name].append((args, kwargs, output))

        return hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def _shape(x: torch.Tensor) -> list[int]:
    return list(x.shape)


@torch.inference_mode()
def shapes_view(translator, req: ShapesRequest, name: str = TRANSLATOR) -> ShapesResponse:
    """Every part of the ``ja-en`` Transformer and the shapes of its tensors for ``req.text``.

    The sentence is translated (greedy); then one teacher-forced forward pass over the source and
    ``[BOS] + translation`` runs with hooks on the model's modules, which record the tensors that
    really flow. The per-head shapes come from the attention modules' own ``_split_heads``.

    Shape:
        the letters: B = 1 sentence, S source tokens, T decoder positions, D = d_model, H heads,
        Dh = D / H, F = d_ff, V target vocabulary
    """
    from ...functional import causal_mask

    model = translator.model
    c = model.config
    ids = _check_source(translator, req.text, MAX_TRANSLATION_TOKENS)
    tgt_tok = translator.tgt_tok
    tokens, produced = _greedy(translator, ids)
    tgt_in = [tgt_tok.bos_id] + produced[:-1]
    src = torch.tensor([ids], device=translator.device)  # (1, S)
    tgt = torch.tensor([tgt_in], device=translator.device)  # (1, T)
    enc0, dec0 = model.encoder[0], model.decoder[0]
    watched = {
        "src_embed": model.src_embed,
        "tgt_embed": model.tgt_embed if model.tgt_embed is not model.src_embed else None,
        "positions": model.positions,
        "encoder_norm": model.encoder_norm,
        "decoder_norm": model.decoder_norm,
        "out_proj": model.out_proj,
    }
    for i, block in enumerate(model.encoder):
        watched |= {f"enc{i}": block, f"enc{i}.self_attn": block.self_attn, f"enc{i}.ff.up": block.ff.up_proj}
        watched |= {f"enc{i}.ff": block.ff, f"enc{i}.attn_norm": block.attn_norm, f"enc{i}.ff_norm": block.ff_norm}
    for i, block in enumerate(model.decoder):
        watched |= {f"dec{i}": block, f"dec{i}.self_attn": block.self_attn, f"dec{i}.cross_attn": block.cross_attn}
        watched |= {f"dec{i}.ff.up": block.ff.up_proj, f"dec{i}.ff": block.ff, f"dec{i}.self_norm": block.self_norm}
        watched |= {f"dec{i}.cross_norm": block.cross_norm, f"dec{i}.ff_norm": block.ff_norm}
    rec = _Recorder(watched)
    try:
        out = model(src, tgt, need_weights=True)
    finally:
        rec.remove()
    calls = rec.calls
    embeds = calls["src_embed"] + calls["tgt_embed"]  # a shared embedding is called for both sides
    src_emb, tgt_emb = embeds[0][2], embeds[1][2]  # (1, S, D), (1, T, D)
    src_pos, tgt_pos = calls["positions"][0][2], calls["positions"][1][2]
    probs = torch.softmax(out.logits, dim=-1)  # (1, T, V)

    def layer_shapes(prefix: str, count: int, keys: list[str]) -> bool:
        def shapes(i: int) -> list:
            got = []
            for k in keys:
                for args, _kwargs, output in calls[f"{prefix}{i}{k}"]:
                    tensors = [a for a in args if isinstance(a, torch.Tensor)]
                    outs = output if isinstance(output, tuple) else (output,)
                    got.append([_shape(t) for t in tensors] + [_shape(o) for o in outs if isinstance(o, torch.Tensor)])
            return got

        first = shapes(0)
        return all(shapes(i) == first for i in range(1, count))

    same = layer_shapes("enc", c.n_encoder_layers, ["", ".self_attn", ".ff.up", ".ff"]) and layer_shapes(
        "dec", c.n_decoder_layers, ["", ".self_attn", ".cross_attn", ".ff.up", ".ff"]
    )

    def attention_tensors(attn: torch.nn.Module, call, side_q: str, side_k: str) -> list[TensorShape]:
        args, _kwargs, output = call
        query = args[0]
        key = args[1] if len(args) > 1 and isinstance(args[1], torch.Tensor) else query
        q = attn._split_heads(attn.q_proj(query))  # (B, H, Tq, Dh)
        k, v = attn.project_kv(key)  # (B, H, Tk, Dh) each
        return [
            TensorShape(name="query_in", shape=_shape(query), axes=f"B {side_q} D"),
            TensorShape(name="key_in", shape=_shape(key), axes=f"B {side_k} D"),
            TensorShape(name="q_heads", shape=_shape(q), axes=f"B H {side_q} Dh"),
            TensorShape(name="k_heads", shape=_shape(k), axes=f"B H {side_k} Dh"),
            TensorShape(name="v_heads", shape=_shape(v), axes=f"B H {side_k} Dh"),
            TensorShape(name="weights", shape=_shape(output.weights), axes=f"B H {side_q} {side_k}"),
            TensorShape(name="attn_out", shape=_shape(output.output), axes=f"B {side_q} D"),
        ]

    def residual_tensors(first_norm: str, next_norm: str, side: str) -> list[TensorShape]:
        # The sum x + sublayer(·) after the first attention: pre-norm feeds it to the next
        # LayerNorm, post-norm normalises it in the first one.
        residual = calls[next_norm][0][0][0] if c.norm == "pre" else calls[first_norm][0][0][0]
        return [
            TensorShape(name="norm_out", shape=_shape(calls[first_norm][0][2]), axes=f"B {side} D"),
            TensorShape(name="residual_out", shape=_shape(residual), axes=f"B {side} D"),
        ]

    enc_attn = calls["enc0.self_attn"][0]
    dec_self = calls["dec0.self_attn"][0]
    dec_cross = calls["dec0.cross_attn"][0]
    T = tgt.shape[1]
    mask = causal_mask(T)  # (T, T)
    self_tensors = attention_tensors(dec0.self_attn, dec_self, "T", "T")
    self_tensors.insert(5, TensorShape(name="causal_mask", shape=_shape(mask), axes="T T"))
    parts = [
        Part(
            id="src_embed",
            tensors=[
                TensorShape(name="ids", shape=_shape(src), axes="B S"),
                TensorShape(name="embedding", shape=_shape(src_emb), axes="B S D"),
                TensorShape(name="with_positions", shape=_shape(src_pos), axes="B S D"),
            ],
        ),
        Part(id="enc_self", tensors=attention_tensors(enc0.self_attn, enc_attn, "S", "S")),
        Part(id="enc_norm", tensors=residual_tensors("enc0.attn_norm", "enc0.ff_norm", "S")),
        Part(
            id="enc_ffn",
            tensors=[
                TensorShape(name="ffn_in", shape=_shape(calls["enc0.ff"][0][0][0]), axes="B S D"),
                TensorShape(name="ffn_hidden", shape=_shape(calls["enc0.ff.up"][0][2]), axes="B S F"),
                TensorShape(name="ffn_out", shape=_shape(calls["enc0.ff"][0][2]), axes="B S D"),
                TensorShape(name="block_out", shape=_shape(calls["enc0"][0][2].hidden), axes="B S D"),
            ],
        ),
        Part(
            id="memory",
            tensors=[TensorShape(name="memory", shape=_shape(calls["encoder_norm"][0][2]), axes="B S D")],
        ),
        Part(
            id="tgt_embed",
            tensors=[
                TensorShape(name="ids", shape=_shape(tgt), axes="B T"),
                TensorShape(name="embedding", shape=_shape(tgt_emb), axes="B T D"),
                TensorShape(name="with_positions", shape=_shape(tgt_pos), axes="B T D"),
            ],
        ),
        Part(id="dec_self", tensors=self_tensors),
        Part(id="dec_cross", tensors=attention_tensors(dec0.cross_attn, dec_cross, "T", "S")),
        Part(id="dec_norm", tensors=residual_tensors("dec0.self_norm", "dec0.cross_norm", "T")),
        Part(
            id="dec_ffn",
            tensors=[
                TensorShape(name="ffn_in", shape=_shape(calls["dec0.ff"][0][0][0]), axes="B T D"),
                TensorShape(name="ffn_hidden", shape=_shape(calls["dec0.ff.up"][0][2]), axes="B T F"),
                TensorShape(name="ffn_out", shape=_shape(calls["dec0.ff"][0][2]), axes="B T D"),
                TensorShape(name="block_out", shape=_shape(calls["dec0"][0][2].hidden), axes="B T D"),
            ],
        ),
        Part(
            id="output",
            tensors=[
                TensorShape(name="final_norm", shape=_shape(calls["decoder_norm"][0][2]), axes="B T D"),
                TensorShape(name="logits", shape=_shape(calls["out_proj"][0][2]), axes="B T V"),
                TensorShape(name="probs", shape=_shape(probs), axes="B T V"),
                TensorShape(name="next_token", shape=_shape(probs[0, -1]), axes="V"),
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
    """§7's endpoints."""

    @router.post("/api/lesson/shapes", response_model=ShapesResponse, responses=LIVE)
    async def api_shapes(req: ShapesRequest) -> ShapesResponse:
        """§7: the shape of every tensor in the shipped ja→en Transformer for a sentence."""
        async with gate.slot():
            translator = await run(models.translator, TRANSLATOR, "the Transformer diagram")
            return await run(shapes_view, translator, req)

    @router.post("/api/lesson/next-token", response_model=NextTokenResponse, responses=LIVE)
    async def api_next_token(req: NextTokenRequest) -> NextTokenResponse:
        """§7: the shipped GPT's next-character probabilities, with temperature and top-k."""
        async with gate.slot():
            model, tokenizer = await run(models.language_model, GPT_MODEL, "the next-token chart")
            return await run(next_token_view, model, tokenizer, req)
