// BLEU of one sentence in the page, as attnlab.metrics.bleu([hyp], [ref], tokenize="char")
// computes it through sacreBLEU: corpus BLEU of a one-sentence corpus (Papineni et al. 2002) with
// sacreBLEU's defaults — n-grams up to 4, the "exp" smoothing of an n-gram order with no match
// (mteval-v13a's: the k-th such order counts 1 / 2^k matches; Chen & Cherry 2014, method 3), the
// brevity penalty exp(1 − r/c) when the hypothesis is shorter, the score on a 0–100 scale.
// Written from the formulas; parity with sacreBLEU is tested in tests/site/test_site_rnn_browser.py.
//
// Shape: two strings → one number.

import { PY_SPACE } from "./pytext.js";

const MAX_ORDER = 4;
const SPACE_CHAR = new RegExp(`^${PY_SPACE.source}$`, "u");

/**
 * sacreBLEU's "char" tokens: every character of the line, white space dropped (it splits the
 * characters joined by spaces again on white space).
 * Shape: a string → L tokens.
 */
export function charTokens(line) {
  return [...line].filter((ch) => !SPACE_CHAR.test(ch));
}

// Every n-gram of 1 … MAX_ORDER tokens with its count (keys: the tokens joined by U+0000).
function ngrams(tokens) {
  const counts = new Map();
  for (let n = 1; n <= MAX_ORDER; n++) {
    for (let i = 0; i + n <= tokens.length; i++) {
      const key = n + "\u0000" + tokens.slice(i, i + n).join("\u0000");
      counts.set(key, (counts.get(key) || 0) + 1);
    }
  }
  return counts;
}

/**
 * BLEU (0–100) of hypothesis `hyp` against one reference `ref`, tokenize "char" (the number
 * lists' Japanese targets have no spaces), as sacreBLEU's corpus_score on [hyp], [[ref]].
 * Shape: two strings → a number.
 */
export function sentenceBleu(hyp, ref) {
  // sacreBLEU strips the end of each line first (white space only, so nothing changes for "char").
  const h = charTokens(hyp);
  const r = charTokens(ref);
  const hypCounts = ngrams(h);
  const refCounts = ngrams(r);
  const correct = new Array(MAX_ORDER).fill(0);
  const total = new Array(MAX_ORDER).fill(0);
  for (const [key, count] of hypCounts) {
    const n = Number(key.slice(0, key.indexOf("\u0000"))) - 1;
    total[n] += count;
    if (refCounts.has(key)) correct[n] += Math.min(count, refCounts.get(key));
  }
  const sysLen = h.length;
  const refLen = r.length;
  let bp = 1.0;
  if (sysLen < refLen) bp = sysLen > 0 ? Math.exp(1 - refLen / sysLen) : 0.0;
  if (!correct.some((c) => c > 0)) return 0.0;
  const precisions = new Array(MAX_ORDER).fill(0.0);
  let smooth = 1.0;
  for (let n = 1; n <= MAX_ORDER; n++) {
    if (total[n - 1] === 0) break;
    if (correct[n - 1] === 0) {
      smooth *= 2;
      precisions[n - 1] = 100.0 / (smooth * total[n - 1]);
    } else {
      precisions[n - 1] = (100.0 * correct[n - 1]) / total[n - 1];
    }
  }
  // sacreBLEU's my_log: log 0 counts as −9999999999 (an order with no n-gram at all).
  let sum = 0;
  for (const p of precisions) sum += p === 0 ? -9999999999 : Math.log(p);
  return bp * Math.exp(sum / MAX_ORDER);
}
