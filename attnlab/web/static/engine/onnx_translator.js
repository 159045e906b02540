// attnlab's Transformer translators in the page: the encoder and the one-step decoder exported to
// ONNX (attnlab.export_onnx, ONNX_CONTRACT.md) run by onnxruntime-web, behind the step interface
// of decode.js, so that greedy and beam search here are attnlab.decode's.
//
// The encoder runs once per sentence and gives every decoder layer's cross-attention keys and
// values; each decoder step feeds the last token of every row with the self-attention cache of
// the rows so far and returns the next token's log-probabilities, the grown cache and this step's
// attention rows. Beam search reorders rows by gathering the cache along its row axis (axis 1).
//
// onnxruntime-web is passed in (the module object, `import * as ort from ".../ort.min.mjs"`) or
// found as the global `ort` of its classic script; nothing is fetched from outside the site.
//
// Shape letters: Ld decoder layers, Le encoder layers, B rows (1 for greedy, 1 then K for a beam
// of K), H heads, S source length, T target positions so far, Dh head size, V vocabulary.

import { beamSearch, greedy } from "./decode.js";
import { pySplit, pyStrip } from "./pytext.js";
import { tokenizerFromJSON } from "./tokenizer.js";

const ASCII_ALNUM = /^[A-Za-z0-9]$/;

const FORMAT = "attnlab.onnx";
const VERSION = 1;
/** The length-penalty exponent attnlab's Translator.translate decodes with unless told otherwise. */
export const DEFAULT_ALPHA = 0.6;

const int64 = (ort, values, dims) => new ort.Tensor("int64", BigInt64Array.from(values, (v) => BigInt(v)), dims);

/**
 * Rows `rows` of a tensor along axis 1 (the row axis of the caches), as a new tensor.
 * Shape: (A, B, ...rest) → (A, rows.length, ...rest).
 */
export function gatherAxis1(ort, tensor, rows) {
  const [A, B, ...rest] = tensor.dims;
  const block = rest.reduce((a, b) => a * b, 1); // the numbers of one (a, b) slice
  const out = new Float32Array(A * rows.length * block);
  for (let a = 0; a < A; a++) {
    for (let i = 0; i < rows.length; i++) {
      if (rows[i] < 0 || rows[i] >= B) throw new RangeError(`row ${rows[i]} is outside 0…${B - 1}`);
      const from = (a * B + rows[i]) * block;
      out.set(tensor.data.subarray(from, from + block), (a * rows.length + i) * block);
    }
  }
  return new ort.Tensor("float32", out, [A, rows.length, ...rest]);
}

/**
 * Row b of a tensor whose axis 1 is the row axis, as one flat array.
 * Shape: (A, B, ...rest) → A × prod(rest) numbers, i.e. (A, ...rest) row-major.
 */
export function rowOfAxis1(tensor, b) {
  const [A, B, ...rest] = tensor.dims;
  const block = rest.reduce((x, y) => x * y, 1);
  const out = new Float32Array(A * block);
  for (let a = 0; a < A; a++) out.set(tensor.data.subarray((a * B + b) * block, (a * B + b + 1) * block), a * block);
  return out;
}

/**
 * The step interface of decode.js over the two ONNX sessions of one translator (ONNX_CONTRACT.md).
 * State: {src (B, S) int64 ids, crossK/crossV (Ld, B, H, S, Dh), pastK/pastV (Ld, B, H, T, Dh), t}.
 */
export class OnnxTranslatorModel {
  /** @param {object} ort onnxruntime-web; encoder, decoder: its InferenceSessions; meta: meta.json */
  constructor(ort, encoder, decoder, meta) {
    Object.assign(this, { ort, encoder, decoder, meta });
    this.heads = meta.n_heads;
    this.headDim = meta.d_model / meta.n_heads;
    this.layers = meta.n_decoder_layers;
  }

  /**
   * Encode one sentence. srcIds: its ids, already wrapped as meta.source_wrap says.
   * Also keeps the encoder's self-attention (Le, 1, H, S, S) as state.encoderAttention.
   * Shape: S ids → a state of B = 1 row with an empty cache (T = 0).
   */
  async start(srcIds) {
    const { ort } = this;
    if (!srcIds.length) throw new Error("nothing to translate: the sentence has no tokens");
    const S = srcIds.length;
    const src = int64(ort, srcIds, [1, S]);
    const out = await this.encoder.run({ src_ids: src });
    const empty = [this.layers, 1, this.heads, 0, this.headDim];
    return {
      src,
      srcIds: Array.from(srcIds),
      crossK: out.cross_k,
      crossV: out.cross_v,
      pastK: new ort.Tensor("float32", new Float32Array(0), empty),
      pastV: new ort.Tensor("float32", new Float32Array(0), empty),
      t: 0,
      encoderAttention: out.enc_attn,
    };
  }

  /**
   * One decoder step for every row: tokens are the rows' last tokens (BOS at t = 0).
   * Returns logProbs (B × V), the state with the grown cache, and per row its attention of this
   * step: {cross: (Ld, H, S), self: (Ld, H, T + 1)} as flat Float32Arrays.
   * Shape: tokens (B,) → logProbs (B, V).
   */
  async step(tokens, state) {
    const { ort } = this;
    const B = tokens.length;
    if (state.pastK.dims[1] !== B || state.crossK.dims[1] !== B) {
      throw new Error(`${B} tokens for a state of ${state.pastK.dims[1]} rows`);
    }
    const out = await this.decoder.run({
      tokens: int64(ort, tokens, [B, 1]),
      step: int64(ort, [state.t], [1]),
      past_k: state.pastK,
      past_v: state.pastV,
      cross_k: state.crossK,
      cross_v: state.crossV,
      src_ids: state.src,
    });
    const attention = [];
    for (let b = 0; b < B; b++) {
      attention.push({ cross: rowOfAxis1(out.cross_attn, b), self: rowOfAxis1(out.self_attn, b) });
    }
    const next = { ...state, pastK: out.present_k, pastV: out.present_v, t: state.t + 1 };
    return { logProbs: out.log_probs.data, state: next, attention };
  }

  /**
   * Keep rows[i] as row i: the self-attention cache follows the hypotheses (gathered along axis 1).
   * The source side is the same sentence in every row, so it is only copied when the number of
   * rows changes (the first step of a beam: 1 row → K).
   * Shape: (Ld, B, H, T, Dh) → (Ld, rows.length, H, T, Dh).
   */
  reorder(state, rows) {
    const { ort } = this;
    const next = {
      ...state,
      pastK: gatherAxis1(ort, state.pastK, rows),
      pastV: gatherAxis1(ort, state.pastV, rows),
    };
    if (rows.length !== state.crossK.dims[1]) {
      next.crossK = gatherAxis1(ort, state.crossK, rows);
      next.crossV = gatherAxis1(ort, state.crossV, rows);
      const S = state.srcIds.length;
      next.src = int64(ort, rows.flatMap(() => state.srcIds), [rows.length, S]);
    }
    return next;
  }
}

// What the translator reads for a user's sentence (attnlab.data.enja.normalize_input): Japanese
// without the spaces that split words (a space stays only between two ASCII letters or digits);
// English with single spaces, lower-cased for a model trained on lower-cased text; both stripped.
// Shape: a string → a string.
export function normalizeInput(text, lang, lowercase = false) {
  if (lang === "ja") {
    // enja._JA_SPACE without a lookbehind (Safari < 16.4 cannot parse one): it removes every run
    // of spaces except a single space between two ASCII letters or digits.
    return pyStrip(text).replace(/ +/g, (run, at, s) => (run.length === 1 && ASCII_ALNUM.test(s[at - 1] ?? "") && ASCII_ALNUM.test(s[at + 1] ?? "") ? run : ""));
  }
  if (lang === "en") return pySplit(lowercase ? text.toLowerCase() : text).join(" ");
  return text;
}

/**
 * The most tokens a translation of an S-token sentence may take (attnlab.recipes.translate.output_limit).
 * Shape: two counts → a count.
 */
export function outputLimit(srcTokens, maxLen = 512) {
  return Math.min(2 * srcTokens + 10, maxLen - 1);
}

/**
 * The first run of an n-gram (n ≤ maxN) repeated `times` or more times in a row, as
 * {start, n, count}, or null (attnlab.metrics.repeated_span).
 * Shape: T ids → a span or null.
 */
export function repeatedSpan(tokens, { times = 3, maxN = 4 } = {}) {
  const same = (a, b, n) => {
    for (let i = 0; i < n; i++) if (tokens[a + i] !== tokens[b + i]) return false;
    return true;
  };
  for (let start = 0; start < tokens.length; start++) {
    for (let n = 1; n <= maxN && start + n <= tokens.length; n++) {
      let count = 1;
      while (start + (count + 1) * n <= tokens.length && same(start, start + count * n, n)) count++;
      if (count >= times) return { start, n, count };
    }
  }
  return null;
}

/**
 * Ids with every loop (an n-gram repeated 3 or more times in a row) cut to one occurrence
 * (attnlab.recipes.translate.cut_loops): the guard against a decoder that lost its place.
 * Shape: T ids → at most T ids.
 */
export function cutLoops(tokens, opts = {}) {
  let out = Array.from(tokens);
  for (let span = repeatedSpan(out, opts); span !== null; span = repeatedSpan(out, opts)) {
    out = out.slice(0, span.start + span.n).concat(out.slice(span.start + span.count * span.n));
  }
  return out;
}

/**
 * work() timed as a User Timing measure "attnlab LABEL" (benchmarks/site_load.py --profile reads
 * them: where a page's first seconds go); a browser without measure options just runs work.
 * Shape: a label and a function → its result.
 */
export async function timed(label, work) {
  const start = performance.now();
  try {
    return await work();
  } finally {
    try {
      performance.measure(`attnlab ${label}`, { start, end: performance.now() });
    } catch {
      // User Timing Level 3 is missing: nothing is recorded
    }
  }
}

// The error of a failed request: the explorer's own sentence when it sends one (e.g. a shipped
// model not built here, and the command that builds it), else the address and the status.
async function responseError(url, response) {
  const body = await response.json().catch(() => null);
  if (body && typeof body.detail === "string") return new Error(body.detail);
  return new Error(`${url}: ${response.status} ${response.statusText}`);
}

export async function fetchJSON(url) {
  const response = await fetch(url);
  if (!response.ok) throw await responseError(url, response);
  return response.json();
}

// The bytes of a file, reporting each chunk as it arrives (a model is megabytes: the page shows
// how far the download is, issue 36 item 6). Shape: a URL → a Uint8Array.
export async function fetchBytes(url, onChunk) {
  const response = await fetch(url);
  if (!response.ok) throw await responseError(url, response);
  if (!response.body) {
    const bytes = new Uint8Array(await response.arrayBuffer());
    onChunk(bytes.length);
    return bytes;
  }
  const chunks = [];
  let size = 0;
  const reader = response.body.getReader();
  for (let part = await reader.read(); !part.done; part = await reader.read()) {
    chunks.push(part.value);
    size += part.value.length;
    onChunk(part.value.length);
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.length;
  }
  return bytes;
}

// The sizes the server announces (Content-Length), for a progress bar's total; 0 where it says none.
export async function announcedSize(urls) {
  const sizes = await Promise.all(
    urls.map(async (url) => {
      try {
        const response = await fetch(url, { method: "HEAD" });
        return Number(response.headers.get("content-length")) || 0;
      } catch {
        return 0;
      }
    }),
  );
  return sizes.every((n) => n > 0) ? sizes.reduce((a, b) => a + b, 0) : 0;
}

function checkMeta(meta) {
  if (!meta || meta.format !== FORMAT || meta.version !== VERSION) {
    throw new Error(`meta.json is not attnlab's ONNX format ${FORMAT} version ${VERSION}`);
  }
  if (meta.kind !== "transformer") throw new Error(`model kind ${meta.kind} is not a Transformer translator`);
}

/**
 * A translator from a site folder written by attnlab.export_onnx: meta.json, encoder.onnx,
 * decoder.onnx and the two tokenizer files.
 *
 * options: {ort (default: the global ort; or a Promise of it, still loading), sessionOptions
 * (default: the wasm backend), onProgress(loaded, total): called as the two models download
 * (total 0 when the server gives no sizes), warmUp (default true): one throw-away search on load,
 * so the first sentence is fast, json(url): how a JSON file of the folder is fetched (default:
 * fetchJSON; models.js passes its per-page cache, so meta.json and a tokenizer are fetched once)}.
 * Every file is asked for at once (the graphs are most of the bytes, so their download starts
 * first, beside the runtime's own loading); each graph's session is made as soon as its bytes and
 * the runtime are there.
 * Returns {meta, srcTokenizer, tgtTokenizer, model, translate(text, {beamSize, alpha})}.
 * Shape: a folder URL → a translator.
 */
export async function loadTranslator(
  baseUrl,
  { ort = globalThis.ort, sessionOptions = { executionProviders: ["wasm"] }, onProgress = () => {}, warmUp = true, json = fetchJSON } = {},
) {
  if (!ort) throw new Error("onnxruntime-web is not loaded");
  const base = baseUrl.endsWith("/") ? baseUrl : baseUrl + "/";
  const name = base.split("/").slice(-2)[0];
  const urls = [base + "encoder.onnx", base + "decoder.onnx"];
  // The progress line counts against the announced total: chunks that arrive before the sizes do
  // are counted, and shown once the total is known.
  let loaded = 0;
  let total = null;
  const sized = announcedSize(urls).then((n) => {
    total = n;
    if (loaded) onProgress(loaded, total);
  });
  const count = (n) => {
    loaded += n;
    if (total !== null) onProgress(loaded, total);
  };
  const ready = Promise.resolve(ort);
  const sessions = urls.map(async (url) => {
    const file = `${name}/${url.slice(base.length)}`;
    const bytes = await timed(`fetch ${file}`, () => fetchBytes(url, count));
    const runtime = await ready;
    return timed(`session ${file}`, () => runtime.InferenceSession.create(bytes, sessionOptions));
  });
  sessions.forEach((s) => s.catch(() => {})); // a failure is thrown below, once
  const meta = await json(base + "meta.json");
  checkMeta(meta);
  const srcJSON = json(base + meta.src_tokenizer);
  const tgtJSON = meta.tgt_tokenizer === meta.src_tokenizer ? srcJSON : json(base + meta.tgt_tokenizer);
  const [src, tgt] = await Promise.all([srcJSON, tgtJSON]);
  const [encoder, decoder] = await Promise.all(sessions);
  await sized;
  const translator = makeTranslator(await ready, encoder, decoder, meta, tokenizerFromJSON(src), tokenizerFromJSON(tgt));
  if (warmUp) await timed(`warm-up ${name}`, () => warm(translator));
  return translator;
}

// One short beam-4 search on a one-token source, thrown away: onnxruntime-web's first run of a
// session grows its memory and sets up its kernels (hundreds of ms), so a learner's first
// sentence would pay it; paid here, it is part of loading the model.
async function warm({ model, meta }) {
  const id = [meta.pad_id, meta.bos_id, meta.eos_id].includes(4) ? 5 : 4; // an ordinary token
  const opts = { bosId: meta.bos_id, eosId: meta.eos_id, padId: meta.pad_id, maxLen: 2, beamSize: 4, alpha: DEFAULT_ALPHA };
  await beamSearch(model, [id], opts);
}

/**
 * The translator of loaded parts (loadTranslator's second half; tests build it from files).
 * translate(text, {beamSize = 4, alpha}) → {text, ids, score, srcIds, srcTokens, tgtTokens,
 * attention, loopCut, beams}: the source normalised and encoded as the Python Translator does, decoded
 * by greedy (beam 1) or beam search within outputLimit, loops cut, and the labels and per-step
 * attention of the heatmaps (tgtTokens: the output tokens and EOS, one per decoded step); beams,
 * beam search's K final hypotheses (decode.js's beamSearch; absent for greedy).
 * Shape: a string → a translation of T ids.
 */
export function makeTranslator(ort, encoder, decoder, meta, srcTokenizer, tgtTokenizer) {
  const model = new OnnxTranslatorModel(ort, encoder, decoder, meta);
  const wrapSrc = meta.source_wrap || { bos: false, eos: false };
  async function translate(text, { beamSize = 4, alpha = meta.alpha ?? DEFAULT_ALPHA } = {}) {
    const input = meta.src_lang ? normalizeInput(text, meta.src_lang, Boolean(meta.lowercase)) : text;
    const srcIds = srcTokenizer.encode(input, { addBos: wrapSrc.bos, addEos: wrapSrc.eos });
    if (!srcIds.length) throw new Error("nothing to translate: the sentence has no tokens");
    // The encoder's position table has max_len rows: say so in attnlab's words (positional.py)
    // rather than let onnxruntime fail with a broadcast error.
    if (srcIds.length > meta.max_len) throw new Error(`sequence of ${srcIds.length} positions exceeds max_len=${meta.max_len}`);
    const opts = {
      bosId: meta.bos_id,
      eosId: meta.eos_id,
      padId: meta.pad_id,
      maxLen: outputLimit(srcIds.length, meta.max_len),
      beamSize,
      alpha,
    };
    const hyp = beamSize === 1 ? await greedy(model, srcIds, opts) : await beamSearch(model, srcIds, opts);
    const kept = cutLoops(hyp.ids);
    const labels = hyp.ids.concat([meta.eos_id]).map((id) => tgtTokenizer.idToToken(id));
    return {
      text: tgtTokenizer.decode(kept),
      ids: hyp.ids,
      score: hyp.score,
      srcIds,
      srcTokens: srcIds.map((id) => srcTokenizer.idToToken(id)),
      tgtTokens: labels.slice(0, hyp.attention.length),
      attention: hyp.attention,
      loopCut: kept.length < hyp.ids.length,
      beams: hyp.beams,
    };
  }
  return { meta, srcTokenizer, tgtTokenizer, model, translate };
}
