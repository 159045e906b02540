// The lesson's plain arithmetic, computed in the page: one function per widget, each the same
// numbers (and the same rounding) as its Python reference in attnlab/web/lesson/sNN_*.py, which
// stays the specification. tests/web/lesson/test_lessonmath_parity.py runs every function here under Node
// against the Python reference over all the settings a widget offers, edge values and bad input
// (the same one-line message in both languages).
//
// An ES module with no globals, importing only pytext.js beside it: the widgets load it with
// import(), Node runs it as it is. Nothing here fetches anything.
//
// Shape letters: S books (keys), Dv a value's width, T positions, D width.

import { pySplit } from "./pytext.js";

// ---------------------------------------------------------------------------------------------
// Shared helpers.
// ---------------------------------------------------------------------------------------------

const isNumber = (x) => typeof x === "number" && Number.isFinite(x);
const isWhole = (x) => typeof x === "number" && Number.isInteger(x);

// torch.round(x, decimals=d), which attnlab.web.lesson.common.rounded uses: x · 10^d to the
// nearest whole number, ties to the even one (C's nearbyint), then divided by 10^d. The same two
// float64 operations in both languages, so equal inputs give bit-for-bit equal outputs.
export function roundTo(x, decimals) {
  const ten = 10 ** decimals;
  const v = x * ten;
  let r = Math.round(v); // ties go up here …
  if (r - v === 0.5 && r % 2 !== 0) r -= 1; // … but to the even neighbour in torch
  return r / ten;
}

// rounded(x, d) for nested arrays: the same shape, every number rounded.
export const rounded = (x, decimals = 6) =>
  Array.isArray(x) ? x.map((y) => rounded(y, decimals)) : roundTo(x, decimals);

// The dot product of two vectors, added left to right.
const dot = (a, b) => a.reduce((sum, x, i) => sum + x * b[i], 0);

// A softmax over one row, as torch.softmax computes it: subtract the largest entry first, so
// exp never overflows (the weights are the same; only the rounding of the last bit may differ).
export function softmax(xs) {
  const top = Math.max(...xs);
  const e = xs.map((x) => Math.exp(x - top));
  const total = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / total);
}

// ---------------------------------------------------------------------------------------------
// §3 The three books: one query over three books whose scores the learner sets.
// Reference: attnlab.web.lesson.s03_query_key_value.three_books (attnlab.explain.compute_steps).
// ---------------------------------------------------------------------------------------------

export const BOOK_VALUES = [[2, 0, 1], [0, 2, 1], [1, 1, 0]]; // (S, Dv) each book's value
export const DEFAULT_BOOK_SCORES = [8, 4, 2]; // with d_k = 64: 1, 0.5, 0.25 after the division
export const MAX_BOOK_SCORE = 10; // the widget's sliders: exp(10) ≈ 22026 still prints readably
export const MAX_BOOK_DK = 1024;

// The request's checks, in the order the Python reference makes them, with its messages.
export function checkThreeBooks({ scores, d_k, scale }) {
  const S = BOOK_VALUES.length;
  if (!Array.isArray(scores) || scores.length !== S) {
    throw new Error(`the three books need ${S} scores, one per book`);
  }
  scores.forEach((x, i) => {
    if (!isNumber(x) || Math.abs(x) > MAX_BOOK_SCORE) {
      throw new Error(`book ${i + 1}'s score must be a number from -${MAX_BOOK_SCORE} to ${MAX_BOOK_SCORE}`);
    }
  });
  if (!isWhole(d_k) || d_k < 1 || d_k > MAX_BOOK_DK) {
    throw new Error(`d_k must be a whole number from 1 to ${MAX_BOOK_DK}`);
  }
  if (typeof scale !== "boolean") throw new Error("scale must be true or false");
}

// The scores divided by √d_k (or not), the softmax written out (exp(s_i) / Σ_j exp(s_j)), the
// weights, each book's value times its weight and their sum: the attention's output.
//
// Shape: raw, scaled, exp, weights (S,); values, weighted (S, Dv); output (Dv,)
export function threeBooks({ scores = DEFAULT_BOOK_SCORES, d_k = 64, scale = true } = {}) {
  checkThreeBooks({ scores, d_k, scale });
  const factor = scale ? 1 / Math.sqrt(d_k) : 1;
  const raw = scores.slice();
  const scaled = raw.map((s) => s * factor);
  const exp = scaled.map(Math.exp); // without subtracting the largest: the numbers the page writes out
  const weights = softmax(scaled);
  const values = BOOK_VALUES.map((v) => v.slice());
  const weighted = values.map((v, i) => v.map((x) => weights[i] * x)); // (S, Dv)
  const output = values[0].map((_, j) => weighted.reduce((sum, row) => sum + row[j], 0)); // (Dv,)
  return {
    raw, d_k, scale, factor, scaled, exp,
    exp_sum: exp.reduce((a, b) => a + b, 0),
    weights, values, weighted, output,
  };
}

// ---------------------------------------------------------------------------------------------
// Random numbers: torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=float64),
// number for number. Several widgets show numbers drawn by a seeded torch generator; this is the
// same generator, so the page draws the same numbers:
//   - the engine is the Mersenne Twister MT19937 (Matsumoto & Nishimura 1998) seeded with the
//     seed's low 32 bits, as torch's CPU generator;
//   - a uniform double in [0, 1) takes the low 53 bits of two 32-bit draws (the first the high
//     half): torch's uniform_real_distribution<double>;
//   - normals come from the Box–Muller transform (Box & Muller 1958). Fewer than 16 at a time:
//     one pair per two uniforms, the second kept for the next call (torch's
//     normal_distribution<double>, log1p(-u2)); 16 or more: all uniforms first, then pairs
//     (j, j + 8) of each block of 16, and a last partial block redrawn over the last 16 entries
//     (torch's normal_fill).
// Math.log/sin/cos may differ from the C library's in the last bit, so the numbers agree to
// about 1e-16 (tests/web/lesson/test_lessonmath_parity.py checks them against torch itself).
// ---------------------------------------------------------------------------------------------

export class TorchGenerator {
  constructor(seed) {
    this.mt = new Uint32Array(624);
    this.mt[0] = seed >>> 0;
    for (let i = 1; i < 624; i++) {
      const prev = this.mt[i - 1] ^ (this.mt[i - 1] >>> 30);
      this.mt[i] = (Math.imul(1812433253, prev) + i) >>> 0;
    }
    this.index = 624;
    this.nextNormal = null; // the second number of the last Box–Muller pair, if unused
  }

  uint32() {
    const mt = this.mt;
    if (this.index >= 624) { // the next 624 words at once (the reference's twist, without %)
      let k = 0;
      for (; k < 227; k++) {
        const y = (mt[k] & 0x80000000) | (mt[k + 1] & 0x7fffffff);
        mt[k] = mt[k + 397] ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
      }
      for (; k < 623; k++) {
        const y = (mt[k] & 0x80000000) | (mt[k + 1] & 0x7fffffff);
        mt[k] = mt[k - 227] ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
      }
      const y = (mt[623] & 0x80000000) | (mt[0] & 0x7fffffff);
      mt[623] = mt[396] ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
      this.index = 0;
    }
    let y = mt[this.index++];
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  // A double in [0, 1): the low 53 bits of (first << 32 | second), times 2^-53.
  uniform() {
    const high = this.uint32() & 0x1fffff; // the first draw's low 21 bits
    const low = this.uint32();
    return (high * 4294967296 + low) / 9007199254740992;
  }

  normal() {
    if (this.nextNormal !== null) {
      const v = this.nextNormal;
      this.nextNormal = null;
      return v;
    }
    const u1 = this.uniform();
    const u2 = this.uniform();
    const r = Math.sqrt(-2 * Math.log1p(-u2));
    const theta = 2 * Math.PI * u1;
    this.nextNormal = r * Math.sin(theta);
    return r * Math.cos(theta);
  }

  // n standard normal numbers, as torch.randn(n) (or any shape of n numbers, row by row).
  randn(n) {
    return Array.from(this.randnTyped(n));
  }

  // The same numbers in a Float64Array (millions of them for §3's random q and k).
  randnTyped(n) {
    if (n < 16) return Float64Array.from({ length: n }, () => this.normal());
    const data = new Float64Array(n);
    for (let i = 0; i < n; i++) data[i] = this.uniform();
    const fill16 = (o) => {
      for (let j = 0; j < 8; j++) {
        const u1 = 1 - data[o + j];
        const u2 = data[o + j + 8];
        const r = Math.sqrt(-2 * Math.log(u1));
        const theta = 2 * Math.PI * u2;
        data[o + j] = r * Math.cos(theta);
        data[o + j + 8] = r * Math.sin(theta);
      }
    };
    for (let i = 0; i + 16 <= n; i += 16) fill16(i);
    if (n % 16) {
      for (let j = n - 16; j < n; j++) data[j] = this.uniform();
      fill16(n - 16);
    }
    return data;
  }
}

// torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64), as a list.
export function seededRandn({ seed, n }) {
  return new TorchGenerator(seed).randn(n);
}

// ---------------------------------------------------------------------------------------------
// §6 Positional encoding: the sinusoid table and how alike its positions are; RoPE scores.
// References: attnlab.web.lesson.s06_positional_encoding.positions and .rope_scores.
// ---------------------------------------------------------------------------------------------

export const SINUSOID_BASE = 10000;

// The paper's table, PE(pos, 2i) = sin(pos / base^(2i/D)), PE(pos, 2i+1) = cos(…), stored as
// float32 like attnlab.positional.sinusoidal_encoding (Math.fround), read back as float64.
//
// Shape: (T, D)
export function sinusoidalEncoding(length, dModel) {
  return Array.from({ length }, (_, pos) => {
    const row = new Array(dModel);
    for (let i = 0; i < dModel; i += 2) {
      const angle = pos / SINUSOID_BASE ** (i / dModel);
      row[i] = Math.fround(Math.sin(angle));
      row[i + 1] = Math.fround(Math.cos(angle));
    }
    return row;
  });
}

function checkRange(name, x, lo, hi, even, why) {
  if (!isWhole(x) || x < lo || x > hi) throw new Error(`${name} must be a whole number from ${lo} to ${hi}`);
  if (even && x % 2) throw new Error(`${name} must be even (${why}), got ${x}`);
}

export function checkPositions({ length, d_model }) {
  checkRange("length", length, 2, 64);
  checkRange("d_model", d_model, 4, 128, true, "sines and cosines come in pairs");
}

// The sinusoid table and the cosine similarity of every two positions' rows.
//
// Shape: table (T, D); similarity (T, T); both rounded to 5 decimals
export function positions({ length = 16, d_model = 32 } = {}) {
  checkPositions({ length, d_model });
  const pe = sinusoidalEncoding(length, d_model); // (T, D)
  const unit = pe.map((row) => {
    const norm = Math.sqrt(dot(row, row));
    return row.map((x) => x / norm);
  }); // (T, D)
  const similarity = unit.map((a) => unit.map((b) => dot(a, b))); // (T, T)
  return { length, d_model, table: rounded(pe, 5), similarity: rounded(similarity, 5) };
}

export const MAX_SEED = 1000000;

export function checkRope({ length, d_model, seed }) {
  checkRange("length", length, 2, 32);
  checkRange("d_model", d_model, 2, 64, true, "RoPE turns pairs of components");
  checkRange("seed", seed, 0, MAX_SEED);
}

// Rotary position embedding (Su et al. 2021, §3.4): channel pair (2i, 2i+1) of a vector at
// position m turned by the angle m·θ_i, θ_i = base^(-2i/D), as attnlab.positional.apply_rotary.
function rotate(x, m) {
  const D = x.length;
  const out = new Array(D);
  for (let i = 0; i < D; i += 2) {
    const angle = m * SINUSOID_BASE ** (-i / D);
    const c = Math.cos(angle), s = Math.sin(angle);
    out[i] = x[i] * c - x[i + 1] * s;
    out[i + 1] = x[i] * s + x[i + 1] * c;
  }
  return out;
}

// One query and one key (drawn from seed, rounded to 2 decimals) placed at every pair of
// positions: scores[m][n] = (R_m q)·(R_n k)/√D, which depends on m and n only through n − m.
//
// Shape: q, k (D,); scores (T, T) rounded to 5 decimals; plain = q·k/√D rounded to 6
export function ropeScores({ length = 12, d_model = 8, seed = 0 } = {}) {
  checkRope({ length, d_model, seed });
  const draws = new TorchGenerator(seed).randn(2 * d_model).map((x) => roundTo(x, 2)); // (2, D)
  const q = draws.slice(0, d_model), k = draws.slice(d_model);
  const root = Math.sqrt(d_model);
  const rq = Array.from({ length }, (_, m) => rotate(q, m)); // (T, D)
  const rk = Array.from({ length }, (_, n) => rotate(k, n)); // (T, D)
  const scores = rq.map((a) => rk.map((b) => dot(a, b) / root)); // (T, T)
  return { length, d_model, seed, q, k, plain: roundTo(dot(q, k) / root, 6), scores: rounded(scores, 5) };
}

// ---------------------------------------------------------------------------------------------
// §5 Multi-head attention on a tiny example, and tutorial 001's version without transpose(1, 2).
// Reference: attnlab.web.lesson.s05_multi_head.multihead_example (attnlab.layers.MultiHeadAttention
// written out step by step, float64; common.word_vector and common.seeded_attention).
// Shape letters here: T words, D model width, H heads, Dh = D / H.
// ---------------------------------------------------------------------------------------------

export const MAX_WORDS = 12;
export const MAX_WORD_CHARS = 24;
const MAX_TEXT_CHARS = 300;

const codePoints = (text) => Array.from(text);

// Python's repr() of a string, for the words a message quotes (quotes and backslashes escaped).
function pyRepr(text) {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  const body = codePoints(text).map((c) => {
    if (c === "\\") return "\\\\";
    if (c === quote) return "\\" + c;
    if (c === "\n") return "\\n";
    if (c === "\r") return "\\r";
    if (c === "\t") return "\\t";
    return c;
  }).join("");
  return quote + body + quote;
}

// common._words: the words of a typed sentence, with the same limits and messages.
export function words(text, what, least = 1) {
  const ws = pySplit(text);
  if (ws.length < least) throw new Error(`${what} needs at least ${least} word(s) separated by spaces`);
  if (ws.length > MAX_WORDS) throw new Error(`${what} has ${ws.length} words; at most ${MAX_WORDS}`);
  const long = ws.find((w) => codePoints(w).length > MAX_WORD_CHARS);
  if (long !== undefined) {
    throw new Error(`${what}: the word ${pyRepr(codePoints(long).slice(0, 40).join(""))} is longer than ${MAX_WORD_CHARS} characters`);
  }
  return ws;
}

// CRC-32 (the IEEE polynomial, as zlib.crc32) of a string's UTF-8 bytes.
const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
export function crc32(text) {
  let c = 0xffffffff;
  for (const byte of new TextEncoder().encode(text)) c = CRC_TABLE[(c ^ byte) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

// common.word_vector: a fixed random embedding of a word, torch.randn(D) from the generator
// seeded with crc32(word) + (seed << 32). torch's generator keeps only the low 32 bits of a seed,
// so the vector is the word's alone: the seed does not change it (as in the reference).
//
// Shape: (D,)
export function wordVector(word, dModel) {
  return new TorchGenerator(crc32(word)).randn(dModel);
}

// common.seeded_attention's four weights (W_q, W_k, W_v, W_o as nn.Linear stores them: (out, in)),
// drawn in that order from one generator: N(0, 1/D), rounded to `decimals` (undefined: as drawn).
//
// Shape: 4 × (D, D)
function seededWeights(dModel, seed, decimals) {
  const g = new TorchGenerator(seed);
  return [0, 1, 2, 3].map(() => {
    const flat = g.randn(dModel * dModel).map((x) => (decimals === undefined ? x / Math.sqrt(dModel) : roundTo(x / Math.sqrt(dModel), decimals)));
    return Array.from({ length: dModel }, (_, r) => flat.slice(r * dModel, (r + 1) * dModel));
  });
}

const transpose = (m) => m[0].map((_, j) => m.map((row) => row[j]));
const matmul = (a, b) => a.map((row) => b[0].map((_, j) => row.reduce((sum, x, k) => sum + x * b[k][j], 0)));
const cols = (m, from, to) => m.map((row) => row.slice(from, to));

// One head's (or one position's) scaled dot-product attention: softmax(q kᵀ/√Dh) v.
//
// Shape: q (Tq, Dh), k, v (Tk, Dh) → weights (Tq, Tk), output (Tq, Dh)
function attend(q, k, v) {
  const scale = 1 / Math.sqrt(q[0].length);
  const weights = q.map((qi) => softmax(k.map((kj) => dot(qi, kj) * scale)));
  return { weights, output: matmul(weights, v) };
}

export function checkMultihead({ text, d_model, n_heads, seed }) {
  if (typeof text !== "string" || text.length < 1 || codePoints(text).length > MAX_TEXT_CHARS) {
    throw new Error(`the sentence must be text of 1 to ${MAX_TEXT_CHARS} characters`);
  }
  checkRange("d_model", d_model, 2, 16);
  checkRange("n_heads", n_heads, 1, 8);
  checkRange("seed", seed, 0, MAX_SEED);
  if (d_model % n_heads) throw new Error(`n_heads=${n_heads} must divide d_model=${d_model}`);
}

// Multi-head attention written out: project, split into heads, attend per head, concat, W_o.
//
// Shape: x (T, D) → q, k, v (T, D); per head q, k, v (T, Dh), weights (T, T), output (T, Dh);
// concat, output (T, D)
function multiheadSteps(W, x, H) {
  const [Wq, Wk, Wv, Wo] = W;
  const D = x[0].length, Dh = D / H;
  const q = matmul(x, transpose(Wq)), k = matmul(x, transpose(Wk)), v = matmul(x, transpose(Wv)); // (T, D)
  const heads = Array.from({ length: H }, (_, h) => {
    const [qh, kh, vh] = [q, k, v].map((m) => cols(m, h * Dh, (h + 1) * Dh)); // (T, Dh) each
    const { weights, output } = attend(qh, kh, vh);
    return { q: qh, k: kh, v: vh, weights, output };
  });
  const concat = x.map((_, t) => heads.flatMap((head) => head.output[t])); // (T, D): the heads side by side
  return { q, k, v, heads, concat, output: matmul(concat, transpose(Wo)) };
}

// Tutorial 001's forward: view(B, T, H, Dh) without transpose(1, 2), so at every position the
// heads attend to each other; then transpose(1, 2).contiguous().view(B, -1, D) cuts the
// (H, T, Dh) memory into rows of D numbers: row i gets pieces i·H … i·H + H − 1, head-major.
//
// Shape: x (T, D) → weights (T, H, H), step (T, H, Dh), merged, output (T, D)
function tutorialMultihead(W, x, H) {
  const [Wq, Wk, Wv, Wo] = W;
  const T = x.length, D = x[0].length, Dh = D / H;
  const pieces = (m) => m.map((row) => Array.from({ length: H }, (_, h) => row.slice(h * Dh, (h + 1) * Dh))); // (T, H, Dh)
  const [q, k, v] = [Wq, Wk, Wv].map((w) => pieces(matmul(x, transpose(w))));
  const perPosition = q.map((_, t) => attend(q[t], k[t], v[t])); // per position: (H, H), (H, Dh)
  const step = perPosition.map((p) => p.output); // (T, H, Dh)
  const flat = []; // the (H, T, Dh) memory after transpose(1, 2).contiguous()
  for (let h = 0; h < H; h++) for (let t = 0; t < T; t++) flat.push(...step[t][h]);
  const merged = Array.from({ length: T }, (_, i) => flat.slice(i * D, (i + 1) * D)); // (T, D)
  return { weights: perPosition.map((p) => p.weights), step, merged, output: matmul(merged, transpose(Wo)) };
}

// [j][i]: does position i of step(x) change when word j's vector moves by 1 in every component?
function influence(step, x) {
  const base = step(x);
  const flatRow = (r) => (Array.isArray(r[0]) ? r.flat() : r);
  return x.map((_, j) => {
    const moved = x.map((row, t) => (t === j ? row.map((a) => a + 1) : row));
    const out = step(moved);
    return out.map((row, i) => {
      const a = flatRow(row), b = flatRow(base[i]);
      return Math.max(...a.map((y, c) => Math.abs(y - b[c]))) > 1e-12;
    });
  });
}

// A tiny multi-head attention with its real shapes and numbers, and tutorial 001's version on
// the same words and weights: the words' vectors are word vectors rounded to 1 decimal, the
// weights seeded and rounded to 2.
export function multihead({ text = "the cat sat down", d_model = 8, n_heads = 2, seed = 0 } = {}) {
  checkMultihead({ text, d_model, n_heads, seed });
  const tokens = words(text, "the sentence");
  const T = tokens.length, D = d_model, H = n_heads, Dh = D / H;
  const W = seededWeights(D, seed, 2);
  const x = tokens.map((w) => wordVector(w, D).map((a) => roundTo(a, 1))); // (T, D)
  const s = multiheadSteps(W, x, H);
  const bad = tutorialMultihead(W, x, H);
  const shapes = {
    X: [T, D], W_q: [D, D], Q: [T, D], Q_heads: [H, T, Dh], weights: [H, T, T], heads: [H, T, Dh],
    concat: [T, D], W_o: [D, D], output: [T, D], no_transpose_Q: [T, H, Dh], no_transpose_weights: [T, H, H],
  };
  const maxDiff = Math.max(...bad.output.flatMap((row, t) => row.map((a, c) => Math.abs(a - s.output[t][c]))));
  const range = (n) => Array.from({ length: n }, (_, i) => i);
  return {
    tokens, d_model: D, n_heads: H, head_dim: Dh, shapes, x,
    w_q: transpose(W[0]), w_k: transpose(W[1]), w_v: transpose(W[2]), w_o: transpose(W[3]),
    q: s.q, k: s.k, v: s.v, heads: s.heads, concat: s.concat, output: s.output,
    without_transpose: {
      weights: bad.weights,
      output: bad.output,
      max_abs_diff: maxDiff,
      influence_split: influence((z) => tutorialMultihead(W, z, H).step, x),
      influence_merged: influence((z) => tutorialMultihead(W, z, H).merged, x),
      influence_correct: influence((z) => multiheadSteps(W, z, H).concat, x),
      // Which (word, head) piece each merge puts in row i, column block b.
      pieces: range(T).map((i) => range(H).map((b) => [(i * H + b) % T, Math.floor((i * H + b) / T)])),
      pieces_correct: range(T).map((i) => range(H).map((b) => [i, b])),
    },
  };
}

// ---------------------------------------------------------------------------------------------
// §3 Random q and k: why divide by √d_k.
// Reference: attnlab.web.lesson.s03_query_key_value.dk_spread.
// Shape letters here: N queries, K keys per query, Dk their width.
// ---------------------------------------------------------------------------------------------

export const DK_VALUES = Array.from({ length: 11 }, (_, i) => 2 ** i); // 1 … 1024
const MAX_DK_SCORES = 4096;
const RAW_RANGE = 128, RAW_BINS = 64; // q·k histogram: [-128, 128] in bins of 4
const SCALED_RANGE = 6, SCALED_BINS = 48; // q·k/√d_k histogram: [-6, 6] in bins of 0.25

export function checkDkSpread({ d_k, samples, keys, seed }) {
  checkRange("d_k", d_k, 1, 1024);
  if (!DK_VALUES.includes(d_k)) throw new Error(`d_k moves in powers of two from 1 to 1024, got ${d_k}`);
  checkRange("samples", samples, 16, 1024);
  checkRange("keys", keys, 2, 16);
  checkRange("seed", seed, 0, MAX_SEED);
  if (samples * keys > MAX_DK_SCORES) {
    throw new Error(`samples × keys = ${samples * keys} is more than ${MAX_DK_SCORES} scores`);
  }
}

// The random queries' scores with their own keys: q ~ N(0, 1)^(N, Dk) then k ~ N(0, 1)^(N, K, Dk),
// both from the generator seeded with seed·2048 + d_k (dk_draws).
//
// Shape: → (N, K) q·k, unscaled
function dkScores(dK, samples, keys, seed) {
  const g = new TorchGenerator(seed * 2048 + dK);
  const q = g.randnTyped(samples * dK); // (N, Dk)
  const k = g.randnTyped(samples * keys * dK); // (N, K, Dk)
  return Array.from({ length: samples }, (_, n) => Array.from({ length: keys }, (_, j) => {
    let sum = 0;
    for (let c = 0, qo = n * dK, ko = (n * keys + j) * dK; c < dK; c++) sum += q[qo + c] * k[ko + c];
    return sum;
  }));
}

// torch.histogram(x.clamp(-limit, limit), bins=linspace(-limit, limit, bins + 1)): each value in
// the last bin whose left edge it reaches (the right edge counts in the last bin).
function histogram(xs, limit, bins) {
  const edges = Array.from({ length: bins + 1 }, (_, i) => -limit + (2 * limit / bins) * i);
  const counts = new Array(bins).fill(0);
  let outside = 0;
  for (const x of xs) {
    if (x < -limit || x > limit) outside += 1;
    const v = Math.min(limit, Math.max(-limit, x));
    let lo = 0, hi = edges.length; // upper_bound: the first edge greater than v
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (edges[mid] <= v) lo = mid + 1; else hi = mid;
    }
    counts[Math.min(bins - 1, lo - 1)] += 1;
  }
  return { edges, counts, outside };
}

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
function std(xs) { // unbiased, as torch.std
  const m = mean(xs);
  return Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1));
}

// Random q and k with d_k components: q·k spreads like √d_k; without the division the softmax
// saturates (one key takes nearly all the weight), with it the weights stay soft. The table has
// every power of two from 1 to 1024, the same N, K and seed.
//
// Shape: per d_k scores and weights (N, K); the answer keeps their histograms, the first query's
// row (K,) and one table row per d_k
export function dkSpread({ d_k = 64, samples = 256, keys = 8, seed = 0 } = {}) {
  checkDkSpread({ d_k, samples, keys, seed });
  const { table, rows } = dkTable(samples, keys, seed);
  const chosen = rows.get(d_k);
  const flat = chosen.raw.flat();
  return {
    d_k, sqrt_dk: Math.sqrt(d_k), samples, keys, seed,
    raw_hist: histogram(flat, RAW_RANGE, RAW_BINS),
    scaled_hist: histogram(flat.map((x) => x / Math.sqrt(d_k)), SCALED_RANGE, SCALED_BINS),
    example: { raw: chosen.raw[0].slice(), weights_unscaled: chosen.plain[0].slice(), weights_scaled: chosen.scaled[0].slice() },
    table: table.map((row) => ({ ...row })),
  };
}

// The table and every d_k's scores depend on (samples, keys, seed) only, not on the chosen d_k:
// kept for the last few settings, so a d_k slider move only redraws the histograms (the 11 rows
// are some 2.4 million normal draws, too slow to redo on the main thread at each move).
const DK_TABLE_CACHE = new Map();
const DK_TABLE_CACHE_SIZE = 4;

// Shape: table rows (one per d_k) and, per d_k, scores and weights (N, K)
function dkTable(samples, keys, seed) {
  const key = `${samples},${keys},${seed}`;
  const hit = DK_TABLE_CACHE.get(key);
  if (hit) {
    DK_TABLE_CACHE.delete(key); // the newest last: the oldest is the first dropped
    DK_TABLE_CACHE.set(key, hit);
    return hit;
  }
  const table = [];
  const rows = new Map();
  for (const dK of DK_VALUES) {
    const raw = dkScores(dK, samples, keys, seed); // (N, K)
    const plain = raw.map((row) => softmax(row)); // (N, K)
    const scaled = raw.map((row) => softmax(row.map((x) => x * (1 / Math.sqrt(dK)))));
    table.push({
      d_k: dK,
      sqrt_dk: Math.sqrt(dK),
      std_raw: std(raw.flat()),
      mean_max_unscaled: mean(plain.map((row) => Math.max(...row))),
      mean_max_scaled: mean(scaled.map((row) => Math.max(...row))),
    });
    rows.set(dK, { raw, plain, scaled });
  }
  const entry = { table, rows };
  DK_TABLE_CACHE.set(key, entry);
  if (DK_TABLE_CACHE.size > DK_TABLE_CACHE_SIZE) DK_TABLE_CACHE.delete(DK_TABLE_CACHE.keys().next().value);
  return entry;
}

// ---------------------------------------------------------------------------------------------
// §8 The heatmap exercise: random q and k over the typed words, under a variant's mask.
// Reference: attnlab.web.lesson.s08_variants_and_exercises.attention_map_view (the masks of
// attnlab.functional's mask helpers, attnlab's scaled_dot_product_attention).
// Shape letters here: T positions (queries and keys are the same words).
// ---------------------------------------------------------------------------------------------

export const VARIANTS = ["full", "local", "sliding_window", "dilated", "global_window"];

// A variant's mask, as s08's variant_mask builds it from the mask helpers (T = S: a query at
// position i, a key at position j). A window is set by its reach r: 2r + 1 keys wide without the
// causal mask (|j − i| ≤ r), r + 1 with it (the query and the r before).
//
// Shape: (T, T) booleans, true = the query (row) may look at the key (column)
export function variantMask(name, T, params) {
  return Array.from({ length: T }, (_, i) => Array.from({ length: T }, (_, j) => allowedPair(name, T, params, i, j)));
}

// One entry of variantMask: may the query at i look at the key at j?
function allowedPair(name, T, { reach, block, dilation, n_global, causal }, i, j) {
  const w = causal ? reach + 1 : 2 * reach;
  const dilated = (d) => { // dilated_window_mask (d = 1: sliding_window_mask)
    const offset = j - i;
    const steps = Math.floor(Math.abs(offset) / d);
    if (((offset % d) + d) % d !== 0) return false;
    return causal ? offset <= 0 && steps < w : steps <= Math.floor(w / 2);
  };
  if (name === "full") return !causal || j <= i;
  if (name === "local") return Math.floor(i / block) === Math.floor(j / block) && (!causal || j <= i);
  if (name === "sliding_window") return dilated(1);
  if (name === "dilated") return dilated(dilation);
  if (name === "global_window") {
    const global = (p) => p < Math.min(n_global, T);
    return (dilated(1) || global(j) || global(i)) && (!causal || j <= i);
  }
  throw new Error(`unknown variant ${name}`);
}

export function checkAttentionMap({ text, variant, reach, block, dilation, n_global, causal, seed }) {
  if (typeof text !== "string" || text.length < 1 || codePoints(text).length > MAX_TEXT_CHARS) {
    throw new Error(`the sentence must be text of 1 to ${MAX_TEXT_CHARS} characters`);
  }
  if (!VARIANTS.includes(variant)) throw new Error(`variant must be one of ${VARIANTS.join(", ")}`);
  checkRange("reach", reach, 1, 16);
  checkRange("block", block, 1, 32);
  checkRange("dilation", dilation, 1, 4);
  checkRange("n_global", n_global, 0, 4);
  if (typeof causal !== "boolean") throw new Error("causal must be true or false");
  checkRange("seed", seed, 0, MAX_SEED);
}

// Self-attention weights over the typed words with random q and k (16 components each, drawn
// from seed: q first, then k) under the variant's mask: softmax(q kᵀ/√16) over the allowed keys,
// 0 elsewhere.
//
// Shape: mask, weights (T, T)
export function attentionMap({
  text = "The cat sat on the mat", variant = "sliding_window", reach = 2, block = 4, dilation = 2,
  n_global = 1, causal = false, seed = 0,
} = {}) {
  const params = { text, variant, reach, block, dilation, n_global, causal, seed };
  checkAttentionMap(params);
  const tokens = words(text, "the sentence");
  const T = tokens.length, width = 16;
  const g = new TorchGenerator(seed);
  const q = g.randnTyped(T * width), k = g.randnTyped(T * width); // (T, 16) each
  const mask = variantMask(variant, T, params);
  const weights = mask.map((row, i) => {
    const keys = [];
    row.forEach((ok, j) => {
      if (!ok) return;
      let sum = 0;
      for (let c = 0; c < width; c++) sum += q[i * width + c] * k[j * width + c];
      keys.push([j, sum / Math.sqrt(width)]);
    });
    const w = softmax(keys.map(([, s]) => s));
    const out = new Array(T).fill(0);
    keys.forEach(([j], n) => { out[j] = w[n]; });
    return out;
  });
  return { tokens, variant, mask, weights };
}

// ---------------------------------------------------------------------------------------------
// §6 Word order: the same words in two orders through one self-attention layer, without
// positions, with the sinusoid table added, and without positions but with a causal mask.
// Reference: attnlab.web.lesson.s06_positional_encoding.word_order_view (common.seeded_attention:
// attnlab's MultiHeadAttention in float64, 2 heads, no biases).
// Shape letters here: T words, D width, H = 2 heads of Dh = D / 2.
// ---------------------------------------------------------------------------------------------

const MAX_ORDER_CHARS = 300;

export function checkWordOrder({ a, b, d_model, seed }) {
  for (const [what, text] of [["the first sentence", a], ["the second sentence", b]]) {
    if (typeof text !== "string" || text.length < 1 || codePoints(text).length > MAX_ORDER_CHARS) {
      throw new Error(`${what} must be text of 1 to ${MAX_ORDER_CHARS} characters`);
    }
  }
  checkRange("d_model", d_model, 4, 64, true, "sines and cosines come in pairs");
  checkRange("seed", seed, 0, MAX_SEED);
}

// Multi-head self-attention of x, every query seeing every key (causal: only itself and the keys
// before it), as attnlab's MultiHeadAttention computes it: project, split, attend, concat, W_o.
//
// Shape: x (T, D) → (T, D)
function selfAttention(W, x, H, causal) {
  const [Wq, Wk, Wv, Wo] = W;
  const D = x[0].length, Dh = D / H, scale = 1 / Math.sqrt(Dh);
  const q = matmul(x, transpose(Wq)), k = matmul(x, transpose(Wk)), v = matmul(x, transpose(Wv)); // (T, D)
  const heads = Array.from({ length: H }, (_, h) => {
    const [qh, kh, vh] = [q, k, v].map((m) => cols(m, h * Dh, (h + 1) * Dh)); // (T, Dh) each
    const weights = qh.map((qi, i) => {
      const seen = causal ? kh.slice(0, i + 1) : kh; // the keys query i may attend to
      const w = softmax(seen.map((kj) => dot(qi, kj) * scale));
      return kh.map((_, j) => (j < w.length ? w[j] : 0)); // (T,): 0 for the hidden keys
    });
    return matmul(weights, vh); // (T, Dh)
  });
  const concat = x.map((_, t) => heads.flatMap((out) => out[t])); // (T, D)
  return matmul(concat, transpose(Wo)); // (T, D)
}

const norm = (xs) => Math.sqrt(xs.reduce((sum, x) => sum + x * x, 0));
const columnMean = (m) => m[0].map((_, c) => m.reduce((sum, row) => sum + row[c], 0) / m.length);

// The two sentences' outputs per case, how far each word's output moved between the orders, and
// how far the sentence vectors (the mean of the outputs) moved.
export function wordOrder({ a = "猫 が 犬 を 追う", b = "犬 が 猫 を 追う", d_model = 16, seed = 0 } = {}) {
  checkWordOrder({ a, b, d_model, seed });
  const wa = words(a, "the first sentence", 2), wb = words(b, "the second sentence", 2);
  const sortedA = [...wa].sort(), sortedB = [...wb].sort();
  if (sortedA.length !== sortedB.length || sortedA.some((w, i) => w !== sortedB[i])) {
    throw new Error("the second sentence must use exactly the words of the first, in another order");
  }
  const used = new Set();
  const match = wa.map((w) => {
    const j = wb.findIndex((v, k) => v === w && !used.has(k));
    used.add(j);
    return j;
  });
  const D = d_model, T = wa.length;
  const W = seededWeights(D, seed);
  const xa = wa.map((w) => wordVector(w, D)), xb = wb.map((w) => wordVector(w, D)); // (T, D)
  const pe = sinusoidalEncoding(T, D); // (T, D)
  const out = { tokens_a: wa, tokens_b: wb, match };
  for (const [name, add, causal] of [
    ["without_positions", 0, false],
    ["with_positions", 1, false],
    ["causal_without_positions", 0, true],
  ]) {
    const shift = (x) => x.map((row, t) => row.map((v, c) => v + add * pe[t][c]));
    const oa = selfAttention(W, shift(xa), 2, causal), ob = selfAttention(W, shift(xb), 2, causal); // (T, D)
    const ma = columnMean(oa), mb = columnMean(ob);
    out[name] = {
      out_a: oa,
      out_b: ob,
      diff: oa.map((row, i) => norm(row.map((v, c) => v - ob[match[i]][c]))),
      sentence_diff: norm(ma.map((v, c) => v - mb[c])),
    };
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// §8 Variants: every variant's mask at one length, how many scores each computes at longer
// lengths, and the measured long-context figures (static/lesson/data/long-context.json, measured
// by benchmarks/long_context.py on the machine it names) as two tables.
// Reference: attnlab.web.lesson.s08_variants_and_exercises.variants_view.
// ---------------------------------------------------------------------------------------------

export const COST_LENGTHS = [16, 32, 64, 128, 256, 512, 1024];
const MEASURED_CASES = ["sdpa", "chunked", "sliding_window", "global_window"];

export function checkVariants({ length, reach, block, dilation, n_global, causal }) {
  checkRange("length", length, 2, 32);
  checkRange("reach", reach, 1, 16);
  checkRange("block", block, 1, 32);
  checkRange("dilation", dilation, 1, 4);
  checkRange("n_global", n_global, 0, 4);
  if (typeof causal !== "boolean") throw new Error("causal must be true or false");
}

// How many pairs a variant's mask allows at length T, row by row, testing only the keys a row can
// reach (its block, its window, the global positions; a global row every key) with allowedPair,
// so T = 1024 costs a window per row, not T.
function maskCount(name, T, params) {
  const { reach, block, dilation, n_global } = params;
  const span = (reach + 1) * (name === "dilated" ? dilation : 1); // beyond it no window key lies
  let count = 0;
  for (let i = 0; i < T; i++) {
    let keys;
    if (name === "full" || (name === "global_window" && i < Math.min(n_global, T))) keys = [0, T];
    else if (name === "local") keys = [Math.floor(i / block) * block, Math.min(T, (Math.floor(i / block) + 1) * block)];
    else keys = [Math.max(0, i - span), Math.min(T, i + span + 1)];
    for (let j = keys[0]; j < keys[1]; j++) if (allowedPair(name, T, params, i, j)) count++;
    if (name === "global_window" && keys[1] - keys[0] < T) { // the global keys outside the window
      for (let j = 0; j < Math.min(n_global, T); j++) if ((j < keys[0] || j >= keys[1]) && allowedPair(name, T, params, i, j)) count++;
    }
  }
  return count;
}

// python's float(f"{x:.2g}"): two significant digits.
const significant = (x) => Number(x.toPrecision(2));

// The measured rows as a table of seconds and a table of speed ratios (s08's measured_tables).
export function measuredTables(measured) {
  const speedup = {
    sdpa: measured.rows.map(() => 1),
    chunked: measured.rows.map((r) => r.chunked_speedup),
    sliding_window: measured.rows.map((r) => r.sliding_window_speedup),
    global_window: measured.rows.map((r) => r.global_window_speedup),
  };
  const seconds = Object.fromEntries(MEASURED_CASES.map((c) => [c, measured.rows.map((r, i) => (c === "sdpa" ? r.sdpa_s : significant(r.sdpa_s / speedup[c][i])))]));
  return { lengths: measured.rows.map((r) => r.length), seconds, speedup };
}

export function variants({ length = 16, reach = 2, block = 4, dilation = 2, n_global = 1, causal = false, measured } = {}) {
  const params = { length, reach, block, dilation, n_global, causal };
  checkVariants(params);
  const masks = Object.fromEntries(VARIANTS.map((n) => [n, variantMask(n, length, params)]));
  const counts = Object.fromEntries(VARIANTS.map((n) => [n, masks[n].flat().filter(Boolean).length]));
  const pairs = length * length;
  return {
    length,
    pairs,
    masks,
    counts,
    fractions: Object.fromEntries(VARIANTS.map((n) => [n, counts[n] / pairs])),
    keys_per_row: Object.fromEntries(VARIANTS.map((n) => [n, Math.max(...masks[n].map((row) => row.filter(Boolean).length))])),
    cost_lengths: COST_LENGTHS,
    cost: Object.fromEntries(VARIANTS.map((n) => [n, COST_LENGTHS.map((T) => maskCount(n, T, params))])),
    measured,
    measured_tables: measuredTables(measured),
  };
}
