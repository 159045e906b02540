// The lesson's BERT-style encoders in the page: §4's pronoun and §5's heads (MiniLM), §9's masked
// LM (shakespeare-mlm) and question answerer (facts-qa). Each function returns the same object as
// its Python reference, the view function the explorer's endpoint used to serve:
//   pronounView  ← attnlab.web.lesson.s04_self_and_source_target.pronoun_view
//   headsView    ← attnlab.web.lesson.s05_multi_head.head_view
//   mlmView      ← attnlab.web.lesson.s09_transformers_at_work.mlm_view
//   qaView       ← attnlab.web.lesson.s09_transformers_at_work.qa_view (+ attnlab.data.squad's
//                  question_windows, attnlab.models.qa.best_spans)
// tests/site/test_site_bert_browser.py holds them equal (tokens identical, numbers within 1e-4).
//
// The two shipped models run through onnxruntime-web from attnlab.onnx_bert's graph (their weights
// stored exactly: both checkpoints are fp16-packed).
// MiniLM does not fit the site (90 MB in fp32; int8 changes its attention weights by up to 0.06,
// fp16 is 45 MB: docs/export.md), so its folder carries PyTorch's own maps and query/key vectors
// for the page's sentences (attnlab.onnx_bert.MINILM_SENTENCES); the page tokenizes what is typed
// with MiniLM's WordPiece and answers for those sentences, and says so for any other.
//
// Shapes: L layers, H heads, S tokens, Dh head width, V vocabulary, C passage tokens, Q question tokens.

import { meta, modelJSON, modelURL, runtime, session } from "./models.js";
import { fetchBytes, announcedSize } from "./onnx_translator.js";
import { roundTo } from "./lessonmath.js";
import { pyStrip } from "./pytext.js";
import { CharTokenizer } from "./tokenizer.js";
import { WordPieceTokenizer } from "./wordpiece.js";

export const MLM_MODEL = "shakespeare-mlm";
export const QA_MODEL = "facts-qa";
export const MINILM = "minilm";
const CANDIDATES = 8; // s09's CANDIDATES
const MAX_LINE_CHARS = 200; // s09's MAX_LINE_CHARS
const MAX_PASSAGE_CHARS = 400;
const MAX_QUESTION_CHARS = 120;
const MAX_MINILM_TOKENS = 40; // lesson.common's MAX_MINILM_TOKENS (§4)
const MAX_HEAD_VIEW_TOKENS = 40; // s05's MAX_HEAD_VIEW_TOKENS
const MAX_ENGLISH_CHARS = 200; // lesson.common.english_sentence's max_length

/** A request the page cannot answer (the explorer's 4xx): its message is shown as it is. */
export class ViewError extends Error {
  constructor(message) {
    super(message);
    this.name = "ViewError";
  }
}

// Python's repr of a string, as the reference's messages write it.
function pyRepr(s) {
  const q = s.includes("'") && !s.includes('"') ? '"' : "'";
  return q + s.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/\t/g, "\\t").replace(q === "'" ? /'/g : /(?!)/g, "\\'") + q;
}

const pyRound = (x, d) => Number(x.toFixed(d)); // Python's round(float, d) on the page's magnitudes
const r5 = (x) => roundTo(x, 5);

function checkText(name, value, max) {
  if (typeof value !== "string") throw new ViewError(`${name} must be text`);
  const n = Array.from(value).length;
  if (n < 1) throw new ViewError(`${name} must not be empty`);
  if (n > max) throw new ViewError(`${name} must be at most ${max} characters (it has ${n})`);
}

// Softmax in float64 of float32 scores, as torch.softmax(x.float()) to far below the page's digits.
function softmax(xs) {
  const m = Math.max(...xs);
  const e = xs.map((x) => Math.exp(x - m));
  const z = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / z);
}

// The k largest of probs (largest first; equal ones in index order, as torch.topk on distinct values).
function topk(probs, k) {
  return probs.map((p, i) => [p, i]).sort((a, b) => b[0] - a[0] || a[1] - b[1]).slice(0, k);
}

// ---------------------------------------------------------------------------------------------
// Running an exported BERT (attnlab.onnx_bert.bert_graph): one sequence, B = 1.
// ---------------------------------------------------------------------------------------------

// (Runs of every model on the page wait for each other: models.js queues onnxruntime-web's run().)
async function runBert(name, ids, types, onProgress) {
  const ort = await runtime();
  const sess = await session(name, "model.onnx", { onProgress });
  const S = ids.length;
  const feeds = {
    input_ids: new ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [1, S]),
    token_type_ids: new ort.Tensor("int64", BigInt64Array.from(types, BigInt), [1, S]),
  };
  return sess.run(feeds);
}

// (L, 1, H, S, S) attn as a function (l, h, i, j) → weight.
function mapsOf(tensor) {
  const [L, , H, S] = tensor.dims;
  const d = tensor.data;
  return { L, H, S, at: (l, h, i, j) => d[((l * H + h) * S + i) * S + j] };
}

async function tokenizerOf(name) {
  const m = await meta(name);
  const json = await modelJSON(name, m.tokenizer);
  return json.format === "attnlab.tokenizer" ? new CharTokenizer(json) : new WordPieceTokenizer(json);
}

// attnlab.models.bert.encode_with_masks: [CLS] text [SEP], each written mask its own id.
function encodeWithMasks(tok, text, m) {
  const maskStr = tok.idToToken(m.mask_id);
  const ids = [m.cls_id];
  text.split(maskStr).forEach((piece, i) => {
    if (i) ids.push(m.mask_id);
    if (piece) ids.push(...tok.encode(piece));
  });
  ids.push(m.sep_id);
  return ids;
}

// ---------------------------------------------------------------------------------------------
// §9 masked LM.
// ---------------------------------------------------------------------------------------------

/**
 * mlm_view: fill the one [MASK] of req.text; the [MASK] row of every attention map.
 * Shape: S ids → weights (L, H, S); candidates (8,).
 */
export async function mlmView(req, { onProgress } = {}) {
  checkText("text", req.text, MAX_LINE_CHARS);
  const [m, tok] = await Promise.all([meta(MLM_MODEL), tokenizerOf(MLM_MODEL)]);
  const maskStr = tok.idToToken(m.mask_id);
  const found = req.text.split(maskStr).length - 1;
  if (found !== 1) throw new ViewError(`write exactly one ${maskStr} in the line (found ${found})`);
  const ids = encodeWithMasks(tok, req.text, m);
  if (ids.length > m.n_positions) throw new ViewError(`the line has ${ids.length} tokens; this model reads at most ${m.n_positions}`);
  const at = ids.indexOf(m.mask_id);
  const out = await runBert(MLM_MODEL, ids, ids.map(() => 0), onProgress);
  const V = out.logits.dims[2];
  const logits = Array.from(out.logits.data.subarray(at * V, (at + 1) * V));
  const probs = softmax(logits);
  const maps = mapsOf(out.attn);
  const { L, H, S } = maps;
  const weights = [];
  let best = null;
  for (let l = 0; l < L; l++) {
    const layer = [];
    for (let h = 0; h < H; h++) {
      const row = [];
      for (let j = 0; j < S; j++) {
        const w = maps.at(l, h, at, j);
        row.push(w);
        const other = j === 0 || j === S - 1 || j === at ? -1 : w; // [CLS], [SEP], the mask itself
        if (best === null || other > best.v) best = { v: other, layer: l, head: h, position: j, w };
      }
      layer.push(row);
    }
    weights.push(layer);
  }
  return {
    model: MLM_MODEL,
    tokens: ids.map((i) => tok.idToToken(i)),
    mask: at,
    candidates: topk(probs, CANDIDATES).map(([p, i]) => ({ token: tok.idToToken(i), p: pyRound(p, 6) })),
    n_layers: L,
    n_heads: H,
    weights: weights.map((layer) => layer.map((row) => row.map(r5))),
    strongest: { layer: best.layer, head: best.head, position: best.position, weight: pyRound(best.w, 5) },
  };
}

// ---------------------------------------------------------------------------------------------
// §9 question answering.
// ---------------------------------------------------------------------------------------------

/** The held-out passages and questions the page offers (s09's qa_examples, written at export). */
export function qaExamples() {
  return modelJSON(QA_MODEL, "examples.json");
}

/**
 * qa_view: the answer span of req.question in req.passage, the start/end probabilities and the
 * question tokens' mean attention over the passage, per layer and head.
 * Shape: one window of S = Q + C + 3 ids → probabilities (C,), weights (L, H, C), on_answer (L, H).
 */
export async function qaView(req, { onProgress } = {}) {
  const [m, tok, examples] = await Promise.all([meta(QA_MODEL), tokenizerOf(QA_MODEL), qaExamples()]);
  if (req.passage !== null && req.passage !== undefined) checkText("passage", req.passage, MAX_PASSAGE_CHARS);
  if (req.question !== null && req.question !== undefined) checkText("question", req.question, MAX_QUESTION_CHARS);
  const passage = req.passage ?? examples[0].passage;
  const question = req.question ?? examples[0].questions[0];
  if (!pyStrip(passage) || !pyStrip(question)) throw new ViewError("write a passage and a question");
  // attnlab.data.squad.question_windows, the one-window case.
  const q = tok.encodeWithOffsets(question).ids.slice(0, m.max_query_tokens);
  if (!q.length) throw new ViewError(`question ${pyRepr(question)} has no tokens`);
  const c = tok.encodeWithOffsets(passage);
  if (!c.ids.length) throw new ViewError(`context ${pyRepr(Array.from(passage).slice(0, 60).join(""))} has no tokens`);
  const room = m.max_length - q.length - 3;
  if (room < 1) throw new ViewError(`max_length=${m.max_length} leaves no room for the passage after a ${q.length}-token question`);
  if (c.ids.length > room) {
    throw new ViewError(`the passage is too long for this model: with the question it reads at most ${m.max_length} tokens`);
  }
  const ids = [m.cls_id, ...q, m.sep_id, ...c.ids, m.sep_id];
  const c0 = q.length + 2;
  const C = c.ids.length;
  const types = ids.map((_, i) => (i < c0 ? 0 : 1));
  const out = await runBert(QA_MODEL, ids, types, onProgress);
  const start = Array.from(out.start_logits.data.subarray(c0, c0 + C));
  const end = Array.from(out.end_logits.data.subarray(c0, c0 + C));
  // best_spans: i ≤ j < i + max_answer_tokens inside the passage, the largest start_i + end_j (float32).
  let first = 0, last = 0, bestScore = -Infinity;
  for (let i = 0; i < C; i++) {
    for (let j = i; j < Math.min(C, i + m.max_answer_tokens); j++) {
      const score = Math.fround(start[i] + end[j]);
      if (score > bestScore) { bestScore = score; first = i; last = j; }
    }
  }
  const maps = mapsOf(out.attn);
  const { L, H } = maps;
  const weights = [], onAnswer = [];
  let best = 0, bestOn = -Infinity;
  for (let l = 0; l < L; l++) {
    const wl = [], ol = [];
    for (let h = 0; h < H; h++) {
      const row = [];
      for (let j = 0; j < C; j++) {
        let sum = 0;
        for (let i = 1; i <= q.length; i++) sum += maps.at(l, h, i, c0 + j);
        row.push(sum / q.length);
      }
      let on = 0;
      for (let j = first; j <= last; j++) on += row[j];
      if (on > bestOn) { bestOn = on; best = l * H + h; }
      wl.push(row.map(r5));
      ol.push(r5(on));
    }
    weights.push(wl);
    onAnswer.push(ol);
  }
  const chars = Array.from(passage);
  const a = c.offsets[first][0], b = c.offsets[last][1];
  return {
    model: QA_MODEL,
    examples,
    passage,
    question,
    question_tokens: q.map((i) => tok.idToToken(i)),
    passage_tokens: c.ids.map((i) => tok.idToToken(i)),
    offsets: c.offsets.map((o) => [o[0], o[1]]),
    answer: chars.slice(a, b).join(""),
    answer_tokens: [first, last],
    answer_chars: [a, b],
    start_probs: softmax(start).map((p) => pyRound(p, 6)),
    end_probs: softmax(end).map((p) => pyRound(p, 6)),
    n_layers: L,
    n_heads: H,
    weights,
    on_answer: onAnswer,
    best_head: [Math.floor(best / H), best % H],
  };
}

// ---------------------------------------------------------------------------------------------
// MiniLM: §4's pronoun and §5's heads, from the views its folder carries.
// ---------------------------------------------------------------------------------------------

let minilmPromise = null;

function floats(b64) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return new Float32Array(bytes.buffer);
}

/**
 * MiniLM's tokenizer and the views of its folder (loaded once per page, its download reported).
 * Shape: → {meta, tok, sentences: [{text, ids, tokens, attn (L, H, S, S), queries, keys (L, H, S, Dh)}]}
 */
export function minilm({ onProgress = () => {} } = {}) {
  if (!minilmPromise) {
    minilmPromise = (async () => {
      const m = await meta(MINILM);
      const url = modelURL(MINILM, m.views);
      const total = await announcedSize([url]);
      let got = 0;
      const [tokJSON, bytes] = await Promise.all([
        modelJSON(MINILM, m.tokenizer),
        fetchBytes(url, (n) => { got += n; onProgress(got, total); }),
      ]);
      const views = JSON.parse(new TextDecoder().decode(bytes));
      const sentences = views.sentences.map((v) => ({
        ...v, attn: floats(v.attn), queries: floats(v.queries), keys: floats(v.keys),
      }));
      return { meta: m, tok: new WordPieceTokenizer(tokJSON), sentences };
    })();
    minilmPromise.catch(() => { minilmPromise = null; });
  }
  return minilmPromise;
}

/** The sentences whose MiniLM views the page carries. Shape: → strings. */
export async function minilmSentences(opts) {
  return (await minilm(opts)).sentences.map((v) => v.text);
}

// The typed sentence's ids and its stored view, or the page's one-line error.
async function minilmSentence(text, maxTokens, what, opts) {
  checkText("text", text, MAX_ENGLISH_CHARS);
  const lm = await minilm(opts);
  const m = lm.meta;
  const ids = encodeWithMasks(lm.tok, text, m);
  if (ids.length <= 2) throw new ViewError(`cannot encode ${pyRepr(text)}: it has no tokens`);
  if (ids.length > maxTokens) throw new ViewError(`the sentence has ${ids.length} tokens; ${what} at most ${maxTokens}`);
  const key = ids.join(",");
  const view = lm.sentences.find((v) => v.ids.join(",") === key);
  if (!view) {
    const err = new ViewError("MiniLM's numbers are on this page for its example sentences only: pick one of them");
    err.sentences = lm.sentences.map((v) => v.text);
    err.code = "minilm_sentence";
    throw err;
  }
  return { lm, m, ids, view };
}

/**
 * pronoun_view: the row of the pronoun (its first occurrence) in every attention map of MiniLM.
 * Shape: weights (L, H, S), mean (L, S), strongest (S,).
 */
export async function pronounView(req, opts = {}) {
  checkText("pronoun", req.pronoun, 30);
  const { m, view } = await minilmSentence(req.text, MAX_MINILM_TOKENS, "this view shows", opts);
  const tokens = view.tokens;
  const wanted = pyStrip(req.pronoun).toLowerCase();
  const at = tokens.indexOf(wanted);
  if (at < 0) {
    throw new ViewError(`${pyRepr(req.pronoun)} is not one of the sentence's tokens (${tokens.slice(1, -1).join(", ")})`);
  }
  const L = m.n_layers, H = m.n_heads, S = tokens.length;
  const w = (l, h, j) => view.attn[((l * H + h) * S + at) * S + j];
  const weights = [], mean = [];
  for (let l = 0; l < L; l++) {
    weights.push(Array.from({ length: H }, (_, h) => Array.from({ length: S }, (_, j) => r5(w(l, h, j)))));
    mean.push(Array.from({ length: S }, (_, j) => {
      let sum = 0;
      for (let h = 0; h < H; h++) sum += w(l, h, j);
      return r5(Math.fround(sum / H));
    }));
  }
  const strongest = Array.from({ length: S }, (_, j) => {
    let b = 0;
    for (let k = 1; k < L * H; k++) if (w(Math.floor(k / H), k % H, j) > w(Math.floor(b / H), b % H, j)) b = k;
    return { layer: Math.floor(b / H), head: b % H, weight: pyRound(w(Math.floor(b / H), b % H, j), 5) };
  });
  return { model: MINILM, tokens, pronoun: at, n_layers: L, n_heads: H, weights, mean, strongest };
}

/**
 * head_view: MiniLM's attention in one layer (every head) and, for one head and query token, the
 * query and key vectors, their element-wise products, the scores and their softmax.
 * Shape: weights (H, S, S); q (Dh,), k and products (S, Dh), scores, scaled, weights (S,).
 */
export async function headsView(req, opts = {}) {
  for (const [name, x] of [["layer", req.layer], ["head", req.head], ["query", req.query]]) {
    const hi = name === "query" ? MAX_HEAD_VIEW_TOKENS - 1 : 63;
    if (!Number.isInteger(x) || x < 0 || x > hi) throw new ViewError(`${name} must be a whole number from 0 to ${hi}`);
  }
  const { m, ids, view } = await minilmSentence(req.text, MAX_HEAD_VIEW_TOKENS, "the head view draws", opts);
  const L = m.n_layers, H = m.n_heads, Dh = m.head_dim, S = ids.length;
  if (req.layer >= L) throw new ViewError(`layer ${req.layer} does not exist: MiniLM has layers 0–${L - 1}`);
  if (req.head >= H) throw new ViewError(`head ${req.head} does not exist: MiniLM has heads 0–${H - 1}`);
  if (req.query >= S) throw new ViewError(`query ${req.query} is not a token position: the sentence has ${S} tokens`);
  const weights = Array.from({ length: H }, (_, h) =>
    Array.from({ length: S }, (_, i) => Array.from({ length: S }, (_, j) => r5(view.attn[((req.layer * H + h) * S + i) * S + j]))));
  const vec = (a, s) => {
    const base = ((req.layer * H + req.head) * S + s) * Dh;
    return Array.from(a.subarray(base, base + Dh));
  };
  const qi = vec(view.queries, req.query);
  const k = Array.from({ length: S }, (_, s) => vec(view.keys, s));
  const products = k.map((row) => row.map((x, d) => Math.fround(qi[d] * x)));
  const scores = products.map((row) => row.reduce((a, b) => Math.fround(a + b), 0));
  const root = Math.fround(Math.sqrt(Dh));
  const scaled = scores.map((x) => Math.fround(x / root));
  return {
    model: MINILM,
    tokens: view.tokens,
    layer: req.layer,
    n_layers: L,
    n_heads: H,
    head_dim: Dh,
    weights,
    neuron: {
      head: req.head,
      query: req.query,
      q: qi.map(r5),
      k: k.map((row) => row.map(r5)),
      products: products.map((row) => row.map(r5)),
      scores: scores.map(r5),
      scaled: scaled.map(r5),
      weights: softmax(scaled).map(r5),
    },
  };
}
