// The shipped character GPT in the page: §7's next-token chart and §9's decoder-only widget.
//
// models/shakespeare-char/ (attnlab.onnx_apps.export_gpt_onnx) holds one graph over the whole
// text, ids (B, T) → logits (B, V) at the last position and attn (L, B, H, T), the last
// position's causal row in every layer and head; and the character tokenizer (tokenizer.js).
// The two functions below return, field for field, what the Python references return:
//   nextToken(gpt, req) = attnlab.web.lesson.s07_whole_transformer.next_token_view
//   gptApp(gpt, req)    = attnlab.web.lesson.s09_transformers_at_work.gpt_view
// Sampling is attnlab.decode.sample_next with torch.Generator().manual_seed(seed): torch's CPU
// torch.multinomial(probs, 1) draws one Exp(1) number per token (exponential_: −log1p(−u) of
// the generator's doubles, in token order, stored as float32) and takes the argmax of
// probs / q (the exponential race; the first maximum on a tie), which is what sampleToken does
// with lessonmath.js's port of the same generator.
//
// Shape letters: T characters read, V vocabulary, L layers, H heads.

import { meta, modelJSON, runtime, session } from "./models.js";
import { TorchGenerator, roundTo } from "./lessonmath.js";
import { argmax, loadOnce, softmax32 } from "./small_models.js";
import { tokenizerFromJSON } from "./tokenizer.js";

export const GPT_MODEL = "shakespeare-char";
/** Candidates (tokens) shown for the next character (s09's CANDIDATES). */
export const CANDIDATES = 8;
const MAX_PROMPT_CHARS = 1000; // s07's NextTokenRequest.text
const MAX_LINE_CHARS = 200; // s09's GPTRequest.text
const MAX_SEED = 1000000;
const f32 = Math.fround;

const loadedModels = new Map();

/**
 * The GPT of models/NAME/, loaded once per page: {name, meta, tokenizer, run(ids)}.
 * run(ids) → {logits: Float32Array(V), attn: Float32Array(L·H·T), L, H, T}.
 * Shape: a name → the model.
 */
export function loadGPT(name = GPT_MODEL, { onProgress = () => {} } = {}) {
  return loadOnce(loadedModels, name, async () => {
    const info = await meta(name);
    const [ort, tok, sess] = await Promise.all([
      runtime(),
      modelJSON(name, info.tokenizer),
      session(name, "model.onnx", { onProgress }),
    ]);
    return {
      name,
      meta: info,
      tokenizer: tokenizerFromJSON(tok),
      async run(ids) {
        const feeds = { ids: new ort.Tensor("int64", BigInt64Array.from(ids, (v) => BigInt(v)), [1, ids.length]) };
        const out = await sess.run(feeds);
        const [L, , H, T] = out.attn.dims;
        return { logits: out.logits.data, attn: out.attn.data, L, H, T };
      },
    };
  });
}

const codePoints = (text) => [...text].length;

function checkText(text, max) {
  if (typeof text !== "string" || codePoints(text) < 1) throw new Error("write some text");
  if (codePoints(text) > max) throw new Error(`the text is longer than ${max} characters`);
}

/**
 * attnlab.decode.sampling_probs for one row: temperature 0 puts everything on the argmax;
 * otherwise the float32 logits divided by the temperature, those below the k-th largest set to
 * −∞ (top-k), then a softmax; the tokens left out get exactly 0.
 * Shape: logits (V,) → probabilities (V,) float32
 */
export function samplingProbs(logits, { temperature = 1, topK = null } = {}) {
  const V = logits.length;
  if (temperature === 0) {
    const p = new Float32Array(V);
    p[argmax(logits)] = 1;
    return p;
  }
  const scaled = Float32Array.from(logits, (x) => f32(x / temperature));
  if (topK !== null && topK < V) {
    const kth = Float32Array.from(scaled).sort((a, b) => b - a)[topK - 1];
    for (let i = 0; i < V; i++) if (scaled[i] < kth) scaled[i] = -Infinity;
  }
  return softmax32(scaled);
}

/**
 * attnlab.decode.sample_next for one row with torch.Generator().manual_seed(seed) (see the top of
 * this module): the argmax of probs / q, q ~ Exp(1) drawn in token order.
 * Shape: logits (V,) → a token id
 */
export function sampleToken(logits, { temperature = 1, topK = null, seed = 0 } = {}) {
  if (temperature === 0) return argmax(logits);
  const p = samplingProbs(logits, { temperature, topK });
  const g = new TorchGenerator(seed);
  const ratio = Float32Array.from(p, (pi) => pi / f32(-Math.log1p(-g.uniform())));
  return argmax(ratio);
}

/**
 * next_token_view: the GPT's distribution over the next character before and after the
 * temperature and top-k, every token most likely first, and optionally one seeded draw.
 * req: {text, temperature = 1, top_k = null, sample = false, seed = 0}.
 * Shape: the text → tokens (V,) entries
 */
export async function nextToken(gpt, req) {
  const { text, temperature = 1, top_k: topK = null, sample = false, seed = 0 } = req;
  checkText(text, MAX_PROMPT_CHARS);
  if (!(typeof temperature === "number" && temperature >= 0 && temperature <= 5)) throw new Error("the temperature must be between 0 and 5");
  if (topK !== null && !(Number.isInteger(topK) && topK >= 1 && topK <= 100000)) throw new Error("top-k must be a whole number from 1");
  if (!(Number.isInteger(seed) && seed >= 0 && seed <= MAX_SEED)) throw new Error(`the seed must be a whole number from 0 to ${MAX_SEED}`);
  const tok = gpt.tokenizer;
  const ids = tok.encode(text);
  if (!ids.length) throw new Error("the text has no token the model knows");
  const nCtx = gpt.meta.n_positions;
  const used = ids.slice(-nCtx);
  const { logits } = await gpt.run(used);
  const pModel = softmax32(logits);
  const p = samplingProbs(logits, { temperature, topK });
  const order = Array.from(logits.keys()).sort((a, b) => logits[b] - logits[a] || a - b); // stable, descending
  const entry = (i) => ({ id: i, token: tok.idToToken(i), logit: roundTo(logits[i], 6), p_model: pModel[i], p: p[i] });
  return {
    model: gpt.name,
    context: tok.decode(used),
    truncated: used.length < ids.length,
    n_positions: nCtx,
    vocab_size: logits.length,
    temperature,
    top_k: topK,
    kept: p.reduce((n, x) => n + (x > 0 ? 1 : 0), 0),
    tokens: order.map(entry),
    sampled: sample ? entry(sampleToken(logits, { temperature, topK, seed })) : null,
  };
}

/**
 * gpt_view: the next character's most likely candidates after req.text and the last position's
 * causal attention row in every layer and head.
 * Shape: the text (T characters read) → weights (L, H, T)
 */
export async function gptApp(gpt, req) {
  const { text } = req;
  checkText(text, MAX_LINE_CHARS);
  const tok = gpt.tokenizer;
  const ids = tok.encode(text);
  if (!ids.length || ids.every((i) => i === tok.unkId)) {
    throw new Error("the text has no character the model knows (it read only Shakespeare's English)");
  }
  const used = ids.slice(-gpt.meta.n_positions);
  const { logits, attn, L, H, T } = await gpt.run(used);
  const probs = softmax32(logits);
  const top = Array.from(probs.keys()).sort((a, b) => probs[b] - probs[a] || a - b).slice(0, CANDIDATES);
  const weights = Array.from({ length: L }, (_, l) =>
    Array.from({ length: H }, (_, h) => Array.from(attn.subarray((l * H + h) * T, (l * H + h + 1) * T), (w) => roundTo(w, 5))));
  return {
    model: gpt.name,
    tokens: used.map((i) => tok.idToToken(i)),
    truncated: used.length < ids.length,
    candidates: top.map((i) => ({ token: tok.idToToken(i), p: roundTo(probs[i], 6) })),
    n_layers: L,
    n_heads: H,
    weights,
  };
}
