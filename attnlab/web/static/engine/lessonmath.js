// The lesson's plain arithmetic, computed in the page: one function per widget, each the same
// numbers (and the same rounding) as its Python reference in attnlab/web/lesson/sNN_*.py, which
// stays the specification. tests/test_lessonmath_parity.py runs every function here under Node
// against the Python reference over all the settings a widget offers, edge values and bad input
// (the same one-line message in both languages).
//
// An ES module with no imports and no globals: the widgets load it with import(), Node runs it
// as it is. Nothing here fetches anything.
//
// Shape letters: S books (keys), Dv a value's width, T positions, D width.

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
// about 1e-16 (tests/test_lessonmath_parity.py checks them against torch itself).
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
    if (this.index >= 624) {
      for (let k = 0; k < 624; k++) {
        const y = (mt[k] & 0x80000000) | (mt[(k + 1) % 624] & 0x7fffffff);
        mt[k] = mt[(k + 397) % 624] ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
      }
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
    if (n < 16) return Array.from({ length: n }, () => this.normal());
    const data = Array.from({ length: n }, () => this.uniform());
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
