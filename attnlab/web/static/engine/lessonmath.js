// The lesson's plain arithmetic, computed in the page: one function per widget, each the same
// numbers (and the same rounding) as its Python reference in attnlab/web/lesson/sNN_*.py, which
// stays the specification. tests/test_lessonmath_parity.py runs every function here under Node
// against the Python reference over all the settings a widget offers, edge values and bad input
// (the same one-line message in both languages).
//
// An ES module with no imports and no globals: the widgets load it with import(), Node runs it
// as it is. Nothing here fetches anything.
//
// Shape letters: S books (keys), Dv a value's width.

// ---------------------------------------------------------------------------------------------
// Shared helpers.
// ---------------------------------------------------------------------------------------------

const isNumber = (x) => typeof x === "number" && Number.isFinite(x);
const isWhole = (x) => typeof x === "number" && Number.isInteger(x);

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
