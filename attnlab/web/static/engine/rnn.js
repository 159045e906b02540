// The RNN pair (rnn-plain: no attention, rnn-attention: Bahdanau's additive attention) in the
// page, and what §2's bottleneck and §3's additive-vs-dot widgets show of them. The models are
// attnlab's ONNX exports (attnlab.onnx_rnn: an encoder, and one decoder step) run by
// onnxruntime-web behind decode.js's step interface, so greedy decoding here is attnlab.decode's.
// Each function returns the object its Python reference returns (the view functions of
// attnlab/web/lesson/s02_seq2seq_bottleneck.py and s03_query_key_value.py), field for field;
// tests/site/test_site_rnn_browser.py compares them on many inputs.
//
// Shape letters: B rows, S source tokens, T output steps, D state width, A additive-attention
// width, L layers, V target vocabulary.

import { sentenceBleu } from "./bleu.js";
import { greedy } from "./decode.js";
import { meta as modelMeta, modelJSON, runtime, session } from "./models.js";
import { cutLoops, fetchJSON, gatherAxis1, outputLimit } from "./onnx_translator.js";
import { pySplit } from "./pytext.js";
import { tokenizerFromJSON } from "./tokenizer.js";

const int64 = (ort, values, dims) => new ort.Tensor("int64", BigInt64Array.from(values, (v) => BigInt(v)), dims);

/** A lesson data file, static/data/NAME (written at build time; cached). Shape: a name → an object. */
const dataFiles = new Map();
export function dataJSON(name) {
  if (!dataFiles.has(name)) {
    const p = fetchJSON(new URL(`../data/${name}`, import.meta.url).href);
    dataFiles.set(name, p);
    p.catch(() => dataFiles.delete(name));
  }
  return dataFiles.get(name);
}

/**
 * Python's torch.round(x, decimals) on a float64: the nearest multiple of 10^-d, a tie to the
 * even one (what attnlab.web.lesson.common.rounded sends).
 * Shape: a number → a number.
 */
export function roundTo(x, decimals) {
  const f = 10 ** decimals;
  const y = x * f;
  let r = Math.round(y);
  if (Math.abs(y % 1) === 0.5) r = 2 * Math.round(y / 2);
  return r / f;
}

const roundRow = (row, d) => Array.from(row, (v) => roundTo(v, d));

// Rows `rows` of a tensor along axis 0. Shape: (B, ...rest) → (rows.length, ...rest).
function gatherAxis0(ort, tensor, rows) {
  const [B, ...rest] = tensor.dims;
  const block = rest.reduce((a, b) => a * b, 1);
  const Out = tensor.type === "int64" ? BigInt64Array : Float32Array;
  const out = new Out(rows.length * block);
  rows.forEach((r, i) => {
    if (r < 0 || r >= B) throw new RangeError(`row ${r} is outside 0…${B - 1}`);
    out.set(tensor.data.subarray(r * block, (r + 1) * block), i * block);
  });
  return new ort.Tensor(tensor.type, out, [rows.length, ...rest]);
}

// Row b of a (B, N) tensor as a Float32Array. Shape: (B, N) → (N,).
const row = (tensor, b) => tensor.data.subarray(b * tensor.dims[1], (b + 1) * tensor.dims[1]);

/**
 * decode.js's step interface over an RNN's two sessions (attnlab.onnx_rnn's contract).
 * State: {src (B, S), hidden (L, B, D), cell (L, B, D) for an LSTM, memory (B, S, D), keys
 * (B, S, A) (additive), context (B, D) (no attention), finalH (L, 1, D): the encoder's final state}.
 * A step's per-row report (additive only): {cross: weights (S,), scores: vᵀtanh(…) (S,),
 * query: W s_{i-1} (A,)}.
 */
export class OnnxRnnModel {
  constructor(ort, encoder, decoder, meta) {
    Object.assign(this, { ort, encoder, decoder, meta });
  }

  /** Encode one sentence. Shape: S ids → a state of one row. */
  async start(srcIds) {
    const { ort, meta } = this;
    if (!srcIds.length) throw new Error("nothing to translate: the sentence has no tokens");
    const src = int64(ort, srcIds, [1, srcIds.length]);
    const out = await this.encoder.run({ src_ids: src });
    const L = meta.n_layers;
    const D = meta.hidden_size;
    const state = { src, hidden: out.final_h, cell: out.final_c, memory: out.memory, keys: out.keys, finalH: out.final_h };
    if (meta.attention === "none") {
      // The top layer's final state: the one vector FixedContextDecoder reads at every step.
      state.context = new ort.Tensor("float32", out.final_h.data.slice((L - 1) * D, L * D), [1, D]);
    }
    return state;
  }

  /** One step for every row. Shape: tokens (B,) → logProbs (B × V). */
  async step(tokens, state) {
    const { ort, meta } = this;
    const B = tokens.length;
    const feeds = { tokens: int64(ort, tokens, [B, 1]), hidden: state.hidden };
    if (meta.cell === "lstm") feeds.cell = state.cell;
    if (meta.attention === "none") feeds.context = state.context;
    else Object.assign(feeds, { memory: state.memory, keys: state.keys, src_ids: state.src });
    const out = await this.decoder.run(feeds);
    const next = { ...state, hidden: out.hidden_out, cell: out.cell_out };
    let attention;
    if (meta.attention !== "none") {
      attention = [];
      for (let b = 0; b < B; b++) {
        attention.push({ cross: Array.from(row(out.cross_attn, b)), scores: Array.from(row(out.attn_scores, b)), query: Array.from(row(out.query_proj, b)) });
      }
    }
    return { logProbs: out.log_probs.data, state: next, attention };
  }

  /** Keep rows[i] as row i (beam search). Shape: B rows → rows.length rows. */
  reorder(state, rows) {
    const { ort } = this;
    const next = { ...state, hidden: gatherAxis1(ort, state.hidden, rows) };
    if (state.cell) next.cell = gatherAxis1(ort, state.cell, rows);
    for (const name of ["src", "memory", "keys", "context"]) if (state[name]) next[name] = gatherAxis0(ort, state[name], rows);
    return next;
  }
}

function checkMeta(meta) {
  if (!meta || meta.format !== "attnlab.onnx" || meta.kind !== "rnn") throw new Error("meta.json is not an attnlab RNN export");
}

/**
 * One of the RNN pair loaded once per page (models.js caches the sessions).
 * Returns {meta, srcTokenizer, tgtTokenizer, model, encode(text), translate(text)}:
 * translate decodes greedily as Translator.translate(beam_size=1, return_attention=True), with
 * {text, ids, srcIds, srcTokens, tgtTokens, attention (T reports or []), finalH (L·D)}.
 * Shape: a name → a translator.
 */
export async function rnnTranslator(name, { onProgress = () => {} } = {}) {
  const ort = await runtime();
  const meta = await modelMeta(name);
  checkMeta(meta);
  const srcTokenizer = tokenizerFromJSON(await modelJSON(name, meta.src_tokenizer));
  const tgtTokenizer = tokenizerFromJSON(await modelJSON(name, meta.tgt_tokenizer));
  // Two downloads, reported as one: each session's share of the total.
  const parts = [0, 0];
  const totals = [0, 0];
  const report = (i) => (got, total) => {
    parts[i] = got;
    totals[i] = total;
    onProgress(parts[0] + parts[1], totals[0] && totals[1] ? totals[0] + totals[1] : 0);
  };
  const [encoder, decoder] = await Promise.all([
    session(name, "encoder.onnx", { onProgress: report(0) }),
    session(name, "decoder.onnx", { onProgress: report(1) }),
  ]);
  const model = new OnnxRnnModel(ort, encoder, decoder, meta);
  const encode = (text) => srcTokenizer.encode(text); // no src_lang: the text is encoded as typed
  async function translate(text, srcIds = encode(text)) {
    if (!srcIds.length) throw new Error("nothing to translate: the sentence has no tokens");
    let first = null;
    const probe = { start: async (s) => (first = await model.start(s)), step: (t, s) => model.step(t, s), reorder: (s, r) => model.reorder(s, r) };
    const hyp = await greedy(probe, srcIds, { bosId: meta.bos_id, eosId: meta.eos_id, maxLen: outputLimit(srcIds.length, meta.max_len) });
    const kept = cutLoops(hyp.ids);
    const labels = hyp.ids.concat([meta.eos_id]).map((id) => tgtTokenizer.idToToken(id));
    return {
      text: tgtTokenizer.decode(kept),
      ids: hyp.ids,
      srcIds,
      srcTokens: srcIds.map((id) => srcTokenizer.idToToken(id)),
      tgtTokens: hyp.attention.length ? labels.slice(0, hyp.attention.length) : labels,
      attention: hyp.attention,
      finalH: first.finalH.data,
      keys: first.keys ? first.keys.data : null,
    };
  }
  return { meta, srcTokenizer, tgtTokenizer, model, encode, translate };
}

// A Python repr of a short text, for the messages the reference writes with !r.
const pyRepr = (text) => (text.includes("'") && !text.includes('"') ? `"${text}"` : `'${text.replace(/'/g, "\\'")}'`);

// common.checked_source_ids: the ids, or a one-line error. Shape: a string → 1 … limit ids.
function checkedIds(t, text, limit) {
  const ids = t.encode(text);
  if (!ids.length) throw new Error(`cannot translate ${pyRepr(text.slice(0, 60))}: it has no tokens`);
  if (ids.length > limit) throw new Error(`the sentence has ${ids.length} tokens; this view shows at most ${limit}`);
  return ids;
}

const MAX_SEED = 1000000; // attnlab.web.lesson.common.MAX_SEED

/**
 * §2's bottleneck (s02_seq2seq_bottleneck.bottleneck_view): req {text} (a typed list) or
 * {example} (which long test example; wraps around) through both models.
 * test: bottleneck-test.json ({pairs, long_words, max_chars, max_tokens}).
 * Shape: fixed_vector (D,), alignment (T, S).
 */
export async function bottleneck(plain, attention, test, req) {
  const examples = test.pairs.filter(([s]) => pySplit(s).length >= test.long_words);
  let index = null;
  let source;
  let reference;
  if (req.text === null || req.text === undefined) {
    const ex = req.example ?? 0;
    if (!Number.isInteger(ex) || ex < 0 || ex > MAX_SEED) throw new RangeError(`example must be a whole number from 0 to ${MAX_SEED}`);
    index = ex % examples.length;
    [source, reference] = examples[index];
  } else {
    if (typeof req.text !== "string" || !req.text.length) throw new Error("type a list of numbers");
    if (req.text.length > test.max_chars) throw new Error(`the list has ${req.text.length} characters; at most ${test.max_chars}`);
    source = req.text;
    const hit = test.pairs.find(([s]) => s === source);
    reference = hit ? hit[1] : null;
  }
  const ids = checkedIds(attention, source, test.max_tokens);
  const withAttention = await attention.translate(source, ids);
  const without = await plain.translate(source, plain.encode(source));
  const D = plain.meta.hidden_size;
  const L = plain.meta.n_layers;
  const fixed = without.finalH.slice((L - 1) * D, L * D); // (D,): the context FixedContextDecoder feeds
  const score = (hyp) => (reference === null ? [null, null] : [sentenceBleu(hyp, reference), hyp === reference]);
  const [plainBleu, plainExact] = score(without.text);
  const [attBleu, attExact] = score(withAttention.text);
  return {
    source,
    reference,
    example: index,
    n_examples: examples.length,
    words: pySplit(source).length,
    src_tokens: withAttention.srcTokens,
    hidden_size: D,
    plain: { translation: without.text, bleu: plainBleu, exact: plainExact, fixed_vector: roundRow(fixed, 4) },
    attention: {
      translation: withAttention.text,
      bleu: attBleu,
      exact: attExact,
      tgt_tokens: withAttention.tgtTokens,
      alignment: withAttention.attention.map((a) => roundRow(a.cross, 5)),
      memory_shape: [ids.length, attention.meta.hidden_size],
    },
  };
}

const argmax = (xs) => xs.indexOf(Math.max(...xs));

function softmax(xs) {
  const m = Math.max(...xs);
  const e = xs.map((x) => Math.exp(x - m));
  const z = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / z);
}

/**
 * §3's additive-vs-dot view (s03_query_key_value.additive_vs_dot): rnn-attention on a list of
 * numbers, its own additive scores and weights at every output step, and beside them the scaled
 * dot product (W_q s)·(W_k h + b)/√A of the same projected query and keys.
 * Limits as the reference's request: text of 1 … maxChars characters, at most maxTokens tokens.
 * Shape: scores and weights (T, S).
 */
export async function additiveVsDot(attention, text, { maxChars = 300, maxTokens = 24 } = {}) {
  if (attention.meta.attention !== "additive") throw new Error(`this view needs a translator with additive attention, not '${attention.meta.attention}'`);
  if (typeof text !== "string" || !text.length) throw new Error("type numbers in English words");
  if (text.length > maxChars) throw new Error(`the text has ${text.length} characters; at most ${maxChars}`);
  if (!pySplit(text).length) throw new Error("the text has no words: type numbers in English words, such as 'twelve and three hundred'");
  const ids = checkedIds(attention, text, maxTokens);
  const tr = await attention.translate(text, ids);
  const S = ids.length;
  const A = attention.meta.attn_dim;
  const keys = tr.keys; // (S, A) row-major
  const scale = 1 / Math.sqrt(A);
  const add = { scores: [], weights: [] };
  const dot = { scores: [], weights: [] };
  let same = 0;
  for (const step of tr.attention) {
    const q = step.query; // (A,)
    const dotScores = [];
    for (let j = 0; j < S; j++) {
      let s = 0;
      for (let k = 0; k < A; k++) s += q[k] * keys[j * A + k];
      dotScores.push(s * scale);
    }
    const dotWeights = softmax(dotScores);
    if (argmax(step.cross) === argmax(dotWeights)) same++;
    add.scores.push(roundRow(step.scores, 6));
    add.weights.push(roundRow(step.cross, 6));
    dot.scores.push(roundRow(dotScores, 6));
    dot.weights.push(roundRow(dotWeights, 6));
  }
  const T = tr.attention.length;
  const tok = attention.tgtTokenizer;
  const labels = tr.ids.concat([attention.meta.eos_id]).map((id) => tok.idToToken(id)).slice(0, T);
  return {
    source: text,
    translation: tok.decode(tr.ids),
    src_tokens: tr.srcTokens,
    tgt_tokens: labels,
    hidden_size: attention.meta.hidden_size,
    attn_dim: A,
    additive: add,
    dot,
    same_top: same,
    cost: { queries: T, keys: S, attn_dim: A, additive_hidden: T * S * A, dot_scores: T * S },
  };
}
