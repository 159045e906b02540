// The lesson's views of the ja→en Transformer, computed in the page: what §1's translation and
// parallel-steps widgets and §7's shapes and token-walk widgets draw, each the same object the
// Python view function returns (attnlab/web/lesson/s01_what_attention_does.py: translation_view,
// parallel_steps; s07_whole_transformer.py: shapes_view, token_walk_view), and tested against it
// in Chromium (tests/site/test_site_translate_browser.py).
//
// The translator is models.js's translator("ja-en") (onnx_translator.js over onnxruntime-web);
// the sentence is decoded greedily by decode.js's greedy (attnlab.decode.greedy_decode), through
// a thin wrapper that keeps what the views need of each step: the encoder's self-attention, and
// for the token walk every step's log-probabilities. The token walk's numbers inside the first
// encoder layer come from the encoder's optional outputs (attnlab.onnx_graphs.ENCODER_TAPS).
//
// §1's timings are measurements of PyTorch on a machine: they are not computed here but read
// from the data file the build writes (static/data/parallel-steps.json, attnlab.web.site's
// SITE_DATA), labelled with that machine.
//
// Shape letters: B = 1 sentence, S source tokens, T decoder positions, D = d_model, H heads,
// Dh = D / H, F = d_ff, V target vocabulary, Ld/Le decoder/encoder layers.

import { greedy } from "./decode.js";
import { cutLoops, normalizeInput, outputLimit } from "./onnx_translator.js";

/** The longest sentence the lesson's requests take, in characters (common.MAX_SENTENCE_CHARS). */
export const MAX_SENTENCE_CHARS = 200;
/** The most source tokens a sentence drawn as maps may have (common.MAX_TRANSLATION_TOKENS). */
export const MAX_TRANSLATION_TOKENS = 48;
/** The token walk: the most likely next tokens shown per position, and the numbers printed per vector. */
export const TOKEN_WALK_TOP = 5;
export const TOKEN_WALK_FIRST = 4;
/** A ratio of times within [1/CLOSE, CLOSE] counts as "about the same" (s01.CLOSE). */
export const CLOSE = 1.2;
/** The encoder's optional outputs the token walk reads (attnlab.onnx_graphs.ENCODER_TAPS). */
export const TAPS = ["src_embed", "src_positions", "enc0_ff_in", "enc0_ff_hidden", "enc0_ff_out", "enc0_out"];

// -- small helpers ------------------------------------------------------------------------------

/** x rounded to d decimals, as the Python views round what they send (common.rounded). */
export function roundTo(x, d = 6) {
  const k = 10 ** d;
  return Math.round(x * k) / k;
}

/** The L2 norm of n numbers from `offset` (torch's x.norm()), rounded to 6 decimals as the views do. */
function norm(data, offset, n) {
  let s = 0;
  for (let i = 0; i < n; i++) s += data[offset + i] * data[offset + i];
  return roundTo(Math.sqrt(s), 6);
}

/**
 * Python's repr of a string (what the views' messages quote): single quotes unless the text has
 * a single quote and no double one; backslashes, the quote and line breaks escaped.
 * Shape: a string → a string.
 */
export function pyRepr(text) {
  const q = text.includes("'") && !text.includes('"') ? '"' : "'";
  const named = { "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" };
  // Python escapes what str.isprintable() refuses: separators other than the space, controls,
  // unassigned and private code points, as \xhh, \uhhhh or \Uhhhhhhhh.
  const escaped = text.replace(/[\\\n\r\t]|(?! )[\p{Z}\p{C}]/gu, (c) => {
    if (named[c]) return named[c];
    const n = c.codePointAt(0);
    const hex = n.toString(16);
    return n <= 0xff ? "\\x" + hex.padStart(2, "0") : n <= 0xffff ? "\\u" + hex.padStart(4, "0") : "\\U" + hex.padStart(8, "0");
  });
  return q + (q === "'" ? escaped.replaceAll("'", "\\'") : escaped) + q;
}

// The first n characters (code points, as Python slices) of a text.
const head = (text, n) => [...text].slice(0, n).join("");

function first(data, offset, n) {
  return Array.from(data.subarray(offset, offset + n), (v) => roundTo(v, 6));
}

/**
 * The sentence's text checked as the Python requests check it (a string of 1 … 200 characters;
 * Python counts code points).
 * Shape: a string → nothing (throws a one-line Error).
 */
export function checkText(text) {
  if (typeof text !== "string") throw new Error("the sentence must be text");
  const n = [...text].length;
  if (n < 1) throw new Error("the sentence is empty: type a Japanese sentence");
  if (n > MAX_SENTENCE_CHARS) throw new Error(`the sentence has ${n} characters; at most ${MAX_SENTENCE_CHARS}`);
}

/**
 * The source ids the translator reads for `text` (common.source_ids): normalised, then encoded.
 * Shape: a string → S ids.
 */
export function sourceIds(t, text) {
  const { meta } = t;
  const input = meta.src_lang ? normalizeInput(text, meta.src_lang, Boolean(meta.lowercase)) : text;
  const wrap = meta.source_wrap || { bos: false, eos: false };
  return t.srcTokenizer.encode(input, { addBos: wrap.bos, addEos: wrap.eos });
}

/**
 * sourceIds, refused in one line when the sentence has no tokens or more than `limit`
 * (common.checked_source_ids).
 * Shape: a string → S ids, 1 ≤ S ≤ limit.
 */
export function checkedSourceIds(t, text, limit) {
  checkText(text);
  const ids = sourceIds(t, text);
  if (!ids.length) throw new Error(`cannot translate ${pyRepr(head(text, 60))}: it has no tokens`);
  if (ids.length > limit) throw new Error(`the sentence has ${ids.length} tokens; this view shows at most ${limit}`);
  return ids;
}

/**
 * Greedy decoding of srcIds with decode.js's greedy over the translator's graphs, keeping what
 * the views draw: per step the cross- and self-attention rows, the encoder's self-attention, and
 * (logProbs) each step's log-probabilities, V each. `produced` is what each decoder position wrote: the
 * ids, then EOS when decoding stopped on it (s07._greedy).
 * Shape: S ids → T steps; attention[t] {cross (Ld, H, S), self (Ld, H, t + 1)}; encoder (Le, 1, H, S, S);
 * crossDims the dims of cross_k (Ld, 1, H, S, Dh).
 */
export function decodeGreedy(t, srcIds) {
  // §7's diagram and token walk (and any two views of one page) decode the same sentence on
  // load: the translator's last decoding is kept and given again for the same ids, so the page
  // decodes it once. Nothing of it is changed by the views that read it.
  const key = srcIds.join(" ");
  const last = lastDecoding.get(t);
  if (last && last.key === key) return last.run;
  const mine = { key, run: decodeOnce(t, srcIds) };
  lastDecoding.set(t, mine);
  mine.run.catch(() => {
    if (lastDecoding.get(t) === mine) lastDecoding.delete(t); // a failed decoding may be tried again
  });
  return mine.run;
}

const lastDecoding = new WeakMap(); // translator → {key: the ids, run: a Promise of decodeOnce's result}

async function decodeOnce(t, srcIds) {
  const { meta, model } = t;
  const kept = { encoder: null, crossDims: null, logProbs: [] };
  const recording = {
    start: async (src) => {
      const state = await model.start(src);
      kept.encoder = state.encoderAttention;
      kept.crossDims = state.crossK.dims;
      return state;
    },
    step: async (tokens, state) => {
      const out = await model.step(tokens, state);
      kept.logProbs.push(Float32Array.from(out.logProbs));
      return out;
    },
    reorder: (state, rows) => model.reorder(state, rows),
  };
  const limit = outputLimit(srcIds.length, meta.max_len);
  const hyp = await greedy(recording, srcIds, { bosId: meta.bos_id, eosId: meta.eos_id, maxLen: limit });
  const steps = hyp.attention.length;
  const produced = steps > hyp.ids.length ? hyp.ids.concat([meta.eos_id]) : hyp.ids.slice();
  return { ids: hyp.ids, produced, attention: hyp.attention, encoder: kept.encoder, crossDims: kept.crossDims, logProbs: kept.logProbs };
}

// Per layer, the mean over the H heads of flat (H, R, C) maps: L × (R, C) nested lists.
function headMean(flat, L, H, R, C, d) {
  const out = [];
  for (let l = 0; l < L; l++) {
    const rows = [];
    for (let r = 0; r < R; r++) {
      const row = [];
      for (let c = 0; c < C; c++) {
        let s = 0;
        for (let h = 0; h < H; h++) s += flat(l, h, r, c);
        row.push(roundTo(s / H, d));
      }
      rows.push(row);
    }
    out.push(rows);
  }
  return out;
}

// The encoder's self-attention (Le, 1, H, S, S) as an accessor (l, h, q, k).
function encoderAccess(enc) {
  const [, , H, S] = enc.dims;
  return (l, h, q, k) => enc.data[((l * H + h) * S + q) * S + k];
}

// -- §1: the translation and its source–target attention ----------------------------------------

/**
 * §1's translation widget (s01.translation_view): the sentence translated greedily, every decoder
 * layer's and head's source–target attention per output token and their mean over heads, and the
 * encoder's self-attention (rounded to 5 decimals, as the view sends them).
 * Shape: a sentence → cross (Ld, H, T, S), cross_mean (Ld, T, S), encoder_self (Le, H, S, S),
 * encoder_self_mean (Le, S, S).
 */
export async function translationView(t, text, { name = "ja-en" } = {}) {
  const { meta } = t;
  const ids = checkedSourceIds(t, text, MAX_TRANSLATION_TOKENS);
  const run = await decodeGreedy(t, ids);
  const Ld = meta.n_decoder_layers, Le = meta.n_encoder_layers, H = meta.n_heads, S = ids.length;
  const T = run.attention.length;
  const crossAt = (l, h, q, k) => run.attention[q].cross[(l * H + h) * S + k];
  const cross = [];
  for (let l = 0; l < Ld; l++) {
    const heads = [];
    for (let h = 0; h < H; h++) {
      heads.push(Array.from({ length: T }, (_, q) => Array.from({ length: S }, (_, k) => roundTo(crossAt(l, h, q, k), 5))));
    }
    cross.push(heads);
  }
  const enc = encoderAccess(run.encoder);
  const encoderSelf = [];
  for (let l = 0; l < Le; l++) {
    const heads = [];
    for (let h = 0; h < H; h++) {
      heads.push(Array.from({ length: S }, (_, q) => Array.from({ length: S }, (_, k) => roundTo(enc(l, h, q, k), 5))));
    }
    encoderSelf.push(heads);
  }
  const labels = run.ids.concat([meta.eos_id]).map((id) => t.tgtTokenizer.idToToken(id)).slice(0, T);
  return {
    model: name,
    source: text,
    translation: t.tgtTokenizer.decode(cutLoops(run.ids)),
    decoding: "greedy",
    src_tokens: ids.map((id) => t.srcTokenizer.idToToken(id)),
    tgt_tokens: labels,
    n_encoder_layers: Le,
    n_decoder_layers: Ld,
    n_heads: H,
    cross,
    cross_mean: headMean(crossAt, Ld, H, T, S, 5),
    encoder_self: encoderSelf,
    encoder_self_mean: headMean(enc, Le, H, S, S, 5),
  };
}

// -- §1: what waits, and what it costs (from the build's measurements) ---------------------------

/** Which of two times is clearly shorter (s01.which_is_faster): ratio = RNN's / Transformer's. */
export function whichIsFaster(ratio, close = CLOSE) {
  if (ratio >= close) return "transformer";
  if (ratio <= 1 / close) return "rnn";
  return "close";
}

/**
 * §1's parallel-steps widget (s01.parallel_steps with the build's measurements, s01.steps_response):
 * the steps that wait in one RNN and one Transformer layer for a sentence of `tokens` tokens,
 * and the times measured at build time for `batch` (data: static/data/parallel-steps.json).
 * Shape: counts → the widget's response (per length of data.lengths).
 */
export function stepsResponse(data, tokens, batch) {
  if (!(String(batch) in data.train_ms)) throw new Error(`batch must be one of [${data.batches.join(", ")}], got ${batch}`);
  const sh = data.shipped;
  if (!(String(tokens) in sh.rnn_ms)) {
    const most = Math.max(...Object.keys(sh.rnn_ms).map(Number));
    throw new Error(`the sentence has ${tokens} tokens; the measured times go up to ${most} tokens`);
  }
  const lengths = data.lengths.slice();
  const rnnMs = data.train_ms[String(batch)].rnn.slice();
  const trMs = data.train_ms[String(batch)].transformer.slice();
  const ratio = rnnMs.map((r, i) => r / trMs[i]);
  const rnnRead = sh.rnn_ms[String(tokens)], trRead = sh.transformer_ms[String(tokens)];
  return {
    sentence_tokens: tokens,
    sentence_rnn_steps: tokens,
    sentence_transformer_steps: 1,
    training_rnn_steps: tokens,
    training_transformer_steps: 1,
    generation_steps: tokens,
    batch,
    batches: data.batches.slice(),
    lengths,
    rnn_layer: { ...data.rnn_layer },
    transformer_layer: { ...data.transformer_layer },
    rnn_steps: lengths.slice(),
    transformer_steps: lengths.map(() => 1),
    rnn_train_ms: rnnMs,
    transformer_train_ms: trMs,
    ratio,
    faster: ratio.map((r) => whichIsFaster(r, data.close)),
    speedup: ratio.map((r) => Math.max(r, 1 / r)),
    repeats: data.repeats,
    threads: data.threads,
    machine: data.machine,
    shipped: {
      tokens,
      rnn: { ...sh.rnn },
      transformer: { ...sh.transformer },
      rnn_steps: tokens * sh.rnn.layers,
      transformer_steps: sh.transformer.layers,
      rnn_ms: rnnRead,
      transformer_ms: trRead,
      faster: whichIsFaster(rnnRead / trRead, data.close),
      speedup: Math.max(rnnRead, trRead) / Math.min(rnnRead, trRead),
      repeats: sh.repeats,
    },
  };
}

/**
 * The parallel-steps widget's response for a typed sentence: its ja-en token count (the page's
 * tokenizer) and the build's measurements. Shape: a sentence and a batch → the response.
 */
export function parallelStepsView(t, data, text, batch) {
  checkText(text);
  const ids = sourceIds(t, text);
  if (!ids.length) throw new Error(`cannot translate ${pyRepr(head(text, 60))}: it has no tokens`);
  if (ids.length > t.meta.max_len) throw new Error(`the sentence has ${ids.length} tokens; this view shows at most ${t.meta.max_len}`);
  return stepsResponse(data, ids.length, batch);
}

// -- §7: the shapes of every tensor -------------------------------------------------------------

const tensor = (name, kind, axes, sizes) => ({ name, kind, shape: axes.split(" ").map((a) => sizes[a]), axes });

/**
 * The parts of the ja-en Transformer in the order they run, each with its tensors' shapes
 * (s07.shapes_view's parts): the shapes follow from the axes' letters and `sizes` (S and T from
 * the sentence and its decoding, H and Dh from the encoder's real cross_k tensor, D, F, V from
 * the model's config). Layer 1 of each stack stands for all: every layer of attnlab's stacks is
 * built from the one config (same D, H, F), so each maps (B, L, D) to (B, L, D) with the same
 * intermediate shapes.
 * Shape: sizes → parts.
 */
export function shapeParts(sizes, normOrder) {
  const sized = (name, kind, axes) => tensor(name, kind, axes, sizes); // (not the i18n sized(): a tensor entry)
  const attention = (q, k, causal) => [
    sized("query_in", "vectors", `B ${q} D`),
    sized("key_in", "vectors", `B ${k} D`),
    sized("q_heads", "heads", `B H ${q} Dh`),
    sized("k_heads", "heads", `B H ${k} Dh`),
    sized("v_heads", "heads", `B H ${k} Dh`),
    ...(causal ? [sized("causal_mask", "mask", "T T")] : []),
    sized("weights", "weights", `B H ${q} ${k}`),
    sized("attn_out", "vectors", `B ${q} D`),
  ];
  const ffn = (side) => [sized("ffn_in", "vectors", `B ${side} D`), sized("ffn_hidden", "vectors", `B ${side} F`), sized("ffn_out", "vectors", `B ${side} D`)];
  const wrapped = (sub, part, side) => {
    const last = part.tensors[part.tensors.length - 1];
    const normPart = { id: `${sub}_norm`, kind: "norm", tensors: [sized("norm_in", "vectors", `B ${side} D`), sized("norm_out", "vectors", `B ${side} D`)] };
    const add = {
      id: `${sub}_add`,
      kind: "add",
      tensors: [sized("residual_in", "vectors", `B ${side} D`), { ...last, name: "sublayer_out" }, sized("residual_out", "vectors", `B ${side} D`)],
    };
    return normOrder === "pre" ? [normPart, part, add] : [part, add, normPart];
  };
  const embed = (id, side) => ({
    id,
    kind: "embed",
    tensors: [sized("ids", "ids", `B ${side}`), sized("embedding", "vectors", `B ${side} D`), sized("with_positions", "vectors", `B ${side} D`)],
  });
  return [
    embed("src_embed", "S"),
    ...wrapped("enc_self", { id: "enc_self", kind: "attention", tensors: attention("S", "S", false) }, "S"),
    ...wrapped("enc_ffn", { id: "enc_ffn", kind: "ffn", tensors: ffn("S") }, "S"),
    { id: "memory", kind: "memory", tensors: [sized("block_out", "vectors", "B S D"), sized("memory", "vectors", "B S D")] },
    embed("tgt_embed", "T"),
    ...wrapped("dec_self", { id: "dec_self", kind: "attention", tensors: attention("T", "T", true) }, "T"),
    ...wrapped("dec_cross", { id: "dec_cross", kind: "attention", tensors: attention("T", "S", false) }, "T"),
    ...wrapped("dec_ffn", { id: "dec_ffn", kind: "ffn", tensors: ffn("T") }, "T"),
    {
      id: "output",
      kind: "output",
      tensors: [
        sized("block_out", "vectors", "B T D"),
        sized("final_norm", "vectors", "B T D"),
        sized("logits", "vectors", "B T V"),
        sized("probs", "vectors", "B T V"),
        sized("next_token", "vectors", "V"),
      ],
    },
  ];
}

/**
 * §7's Transformer diagram (s07.shapes_view): the sentence decoded greedily, then every part's
 * tensor shapes, the decoder's input and output tokens and the causal mask.
 * Shape: a sentence → sizes {B, S, T, D, H, Dh, F, V}, parts, causal_mask (T, T).
 */
export async function shapesView(t, text, { name = "ja-en" } = {}) {
  const { meta } = t;
  const c = meta.config;
  const ids = checkedSourceIds(t, text, MAX_TRANSLATION_TOKENS);
  const run = await decodeGreedy(t, ids);
  const [, , H, , Dh] = run.crossDims; // (Ld, B, H, S, Dh): the real cross_k tensor's heads and head size
  const T = run.produced.length;
  const tgtIn = [meta.bos_id].concat(run.produced.slice(0, -1));
  const sizes = { B: 1, S: ids.length, T, D: c.d_model, H, Dh, F: c.d_ff, V: c.tgt_vocab_size };
  return {
    model: name,
    config: { ...c },
    norm: c.norm,
    sizes,
    src_tokens: ids.map((id) => t.srcTokenizer.idToToken(id)),
    tgt_in_tokens: tgtIn.map((id) => t.tgtTokenizer.idToToken(id)),
    tgt_tokens: run.produced.map((id) => t.tgtTokenizer.idToToken(id)),
    translation: t.tgtTokenizer.decode(run.ids),
    parts: shapeParts(sizes, c.norm),
    same_in_every_layer: true,
    causal_mask: Array.from({ length: T }, (_, q) => Array.from({ length: T }, (_, k) => k <= q)),
  };
}

// -- §7: one sentence through the whole Transformer, with its numbers ----------------------------

/**
 * §7's token walk (s07.token_walk_view): the sentence decoded greedily; per source token its
 * embedding × √D, positional code and their sum, and its trip through the first encoder layer's
 * feed-forward network (the encoder's tap outputs); every layer's attention maps as the mean over
 * heads; at every decoder position the most likely next tokens.
 * Shape: a sentence → embeddings, feed_forward (S each), encoder_self Le × (S, S),
 * decoder_self Ld × (T, T), cross Ld × (T, S), outputs (T).
 */
export async function tokenWalkView(t, text, { name = "ja-en" } = {}) {
  const { meta, model } = t;
  const c = meta.config;
  const missing = TAPS.filter((tap) => !(meta.taps || []).includes(tap));
  if (missing.length) throw new Error(`this ja-en export has no encoder outputs ${missing.join(", ")} (export it with taps)`);
  const ids = checkedSourceIds(t, text, MAX_TRANSLATION_TOKENS);
  const S = ids.length, D = c.d_model, F = c.d_ff, H = meta.n_heads, n = TOKEN_WALK_FIRST;
  const src = new model.ort.Tensor("int64", BigInt64Array.from(ids, (v) => BigInt(v)), [1, S]);
  // Two views may decode with this translator at once (§7's diagram and token walk): their runs
  // interleave safely, as models.js queues every session's run() for the page and each step
  // returns a new state.
  const taps = await model.encoder.run({ src_ids: src }, TAPS);
  const run = await decodeGreedy(t, ids);
  const emb = taps.src_embed.data, pe = taps.src_positions.data; // (1, S, D), (S, D)
  const ffIn = taps.enc0_ff_in.data, hidden = taps.enc0_ff_hidden.data; // (1, S, D), (1, S, F)
  const ffOut = taps.enc0_ff_out.data, layerOut = taps.enc0_out.data; // (1, S, D) each
  const sum = new Float32Array(S * D);
  for (let i = 0; i < S * D; i++) sum[i] = emb[i] + pe[i]; // float32, as the model adds them
  const pieces = ids.map((id) => t.srcTokenizer.idToToken(id));
  const embeddings = pieces.map((token, i) => ({
    token,
    embedding_first: first(emb, i * D, n),
    position_first: first(pe, i * D, n),
    sum_first: first(sum, i * D, n),
    embedding_norm: norm(emb, i * D, D),
    position_norm: norm(pe, i * D, D),
    sum_norm: norm(sum, i * D, D),
  }));
  const feedForward = pieces.map((token, i) => {
    let active = 0, max = -Infinity;
    for (let j = 0; j < F; j++) {
      const h = hidden[i * F + j];
      if (h > 0) active++;
      if (h > max) max = h;
    }
    return {
      token,
      in_first: first(ffIn, i * D, n),
      in_norm: norm(ffIn, i * D, D),
      active,
      hidden_max: roundTo(max, 6),
      out_first: first(ffOut, i * D, n),
      out_norm: norm(ffOut, i * D, D),
      layer_out_norm: norm(layerOut, i * D, D),
    };
  });

  const T = run.produced.length;
  const Ld = meta.n_decoder_layers, Le = meta.n_encoder_layers;
  const tgtIn = [meta.bos_id].concat(run.produced.slice(0, -1));
  // Step q's self-attention row covers positions 0 … q; the later ones are masked: weight 0.
  const selfAt = (l, h, q, k) => (k <= q ? run.attention[q].self[(l * H + h) * (q + 1) + k] : 0);
  const crossAt = (l, h, q, k) => run.attention[q].cross[(l * H + h) * S + k];
  const outputs = run.produced.map((chosen, q) => {
    const lp = run.logProbs[q];
    const order = Array.from(lp.keys()).sort((a, b) => lp[b] - lp[a] || a - b).slice(0, TOKEN_WALK_TOP);
    return {
      top: order.map((i) => ({ token: t.tgtTokenizer.idToToken(i), p: roundTo(Math.exp(lp[i]), 6) })),
      chosen: t.tgtTokenizer.idToToken(chosen),
      p_chosen: roundTo(Math.exp(lp[chosen]), 6),
    };
  });
  return {
    model: name,
    sizes: { S, T, D, H, F, V: c.tgt_vocab_size, L_enc: Le, L_dec: Ld },
    src_tokens: pieces,
    tgt_in_tokens: tgtIn.map((id) => t.tgtTokenizer.idToToken(id)),
    tgt_tokens: run.produced.map((id) => t.tgtTokenizer.idToToken(id)),
    translation: t.tgtTokenizer.decode(run.ids),
    embeddings,
    feed_forward: feedForward,
    encoder_self: headMean(encoderAccess(run.encoder), Le, H, S, S, 6),
    decoder_self: headMean(selfAt, Ld, H, T, T, 6),
    cross: headMean(crossAt, Ld, H, T, S, 6),
    outputs,
  };
}

/** The build's measurements for §1 (static/data/parallel-steps.json), fetched once per page. */
let stepsData = null;
export function parallelStepsData() {
  if (!stepsData) {
    stepsData = fetch(new URL("../data/parallel-steps.json", import.meta.url)).then((r) => {
      if (!r.ok) throw new Error(`parallel-steps.json: ${r.status} ${r.statusText}`);
      return r.json();
    });
    stepsData.catch(() => { stepsData = null; });
  }
  return stepsData;
}
