// Greedy decoding and beam search in the page, mirroring attnlab.decode (greedy_decode and
// beam_search) step for step, so that the page's translations are the Python package's: the same
// choice among equal scores, the same float32 sums, the same early stop and the same final choice.
//
// The search knows nothing of the model's insides; it talks to it through one small interface
// (the JavaScript form of attnlab.models.seq2seq.Seq2SeqModel; onnx_translator.js implements it
// over onnxruntime-web, the parity test over a table):
//   await model.start(src)            → state            encode the source once (one sentence)
//   await model.step(tokens, state)   → {logProbs, state, attention?}
//        tokens: the last token of each of the R rows (an array of R ids);
//        logProbs: Float32Array (R × V), row-major, each row a log-softmax over the vocabulary;
//        attention: optional, one entry per row (whatever the model reports of the new position,
//        e.g. its cross-attention row); kept per hypothesis, step by step.
//   await model.reorder(state, rows) → state            keep rows[i] as the new row i (beam search)
//
// Scores are float32 sums, as PyTorch's float32 tensors accumulate them (Math.fround after every
// operation PyTorch does in float32); the length penalty of the final choice is computed in
// double precision and rounded to float32, as attnlab's _finish does.
//
// Shapes: R rows (1 for greedy; 1 at the first step of beam search, K after), V vocabulary,
// K beam size, T output length.

const f32 = Math.fround;

/** The widest beam (attnlab.decode.MAX_BEAM). */
export const MAX_BEAM = 64;
/** The most tokens one call generates (attnlab.decode.MAX_NEW_TOKENS). */
export const MAX_NEW_TOKENS = 100000;

function checkMaxLen(maxLen) {
  if (!Number.isInteger(maxLen) || maxLen < 1 || maxLen > MAX_NEW_TOKENS) {
    throw new RangeError(`maxLen must be an integer from 1 to ${MAX_NEW_TOKENS}, got ${maxLen}`);
  }
}

/**
 * Refuse a beam size outside 1 … MAX_BEAM (or wider than the vocabulary, when given) and a length
 * penalty exponent that is not a finite number ≥ 0 (attnlab.decode.check_beam).
 * Shape: numbers → nothing (throws RangeError).
 */
export function checkBeam(beamSize, alpha = 0.6, vocabSize = undefined) {
  if (!Number.isInteger(beamSize) || beamSize < 1) throw new RangeError(`beam size must be an integer ≥ 1, got ${beamSize}`);
  if (beamSize > MAX_BEAM) throw new RangeError(`beam size ${beamSize} is over the limit of ${MAX_BEAM}`);
  if (vocabSize !== undefined && beamSize > vocabSize) {
    throw new RangeError(`beam size ${beamSize} is larger than the vocabulary (${vocabSize} tokens)`);
  }
  if (typeof alpha !== "number" || !Number.isFinite(alpha) || alpha < 0) {
    throw new RangeError(`alpha (the length-penalty exponent) must be a finite number ≥ 0, got ${alpha}`);
  }
}

/**
 * GNMT's length normaliser ((5 + |Y|) / 6)^α (Wu et al. 2016, §7), in double precision; α = 0 disables it.
 * Shape: a length and an exponent → a number.
 */
export function lengthPenalty(length, alpha) {
  return ((5 + length) / 6) ** alpha;
}

// The K best entries of a row, best first; of equal values the smaller index first (attnlab's
// search kernel: a later value enters only if strictly larger than the K-th so far).
// Shape: values (n,) → K indices.
function topK(values, offset, n, K) {
  const idx = [];
  for (let j = 0; j < n; j++) {
    const v = values[offset + j];
    if (idx.length === K && !(v > values[offset + idx[K - 1]])) continue;
    let p = idx.length < K ? idx.length : K - 1;
    if (idx.length < K) idx.push(j);
    while (p > 0 && values[offset + idx[p - 1]] < v) {
      idx[p] = idx[p - 1];
      p--;
    }
    idx[p] = j;
  }
  return idx;
}

/**
 * Greedy decoding of one sentence: the most likely next token at every step, until EOS or maxLen
 * tokens (attnlab.decode.greedy_decode).
 *
 * opts: {bosId, eosId, maxLen = 128}.
 * Returns {ids, score, attention}: ids (T,) without BOS and EOS; score, the float32 sum of the
 * chosen tokens' log-probabilities, EOS included; attention, the model's per-step report for each
 * step decoded, the EOS step included ([] when the model reports none).
 * Shape: src → T ids (T ≤ maxLen).
 */
export async function greedy(model, src, { bosId, eosId, maxLen = 128 } = {}) {
  checkMaxLen(maxLen);
  let state = await model.start(src);
  let token = bosId;
  let score = f32(0);
  const out = [];
  const attention = [];
  let length = maxLen;
  for (let t = 0; t < maxLen; t++) {
    const step = await model.step([token], state);
    state = step.state;
    const V = step.logProbs.length;
    const best = topK(step.logProbs, 0, V, 1)[0];
    out.push(best);
    score = f32(score + step.logProbs[best]);
    if (step.attention) attention.push(step.attention[0]);
    if (best === eosId) {
      length = t;
      break;
    }
    token = best;
  }
  return { ids: out.slice(0, length), score, attention };
}

// Whether the search is decided: a finished hypothesis already beats all that the live ones could
// still become (attnlab.decode._decided). The live bound is score / lengthPenalty(maxLen): a
// score only falls as tokens are added, and no penalty exceeds maxLen's. All in float32 as
// PyTorch computes it on the (1, K) tensors.
// Shape: scores, finished, lengths (K,) → a boolean.
function decided(scores, finished, lengths, alpha, maxLen) {
  const a = alpha;
  let bestDone = -Infinity;
  let bound = -Infinity;
  const top = f32(lengthPenalty(maxLen, alpha));
  for (let i = 0; i < scores.length; i++) {
    if (finished[i]) {
      const penalty = f32(f32(f32(5 + lengths[i]) / 6) ** a);
      bestDone = Math.max(bestDone, f32(scores[i] / penalty));
    } else if (Number.isFinite(scores[i])) {
      bound = Math.max(bound, f32(scores[i] / top));
    }
  }
  return bestDone >= bound;
}

/**
 * Beam search over one sentence (attnlab.decode.beam_search): the K best partial translations
 * survive each step; a hypothesis that emitted EOS stays in the beam with its score frozen
 * (extended by padding at no cost); the search stops when every hypothesis has ended, when no
 * live one can still beat the best finished one, or after maxLen steps; the final choice divides
 * each score by the length penalty of its length (EOS counted) and takes the best, the first of
 * equal ones. beamSize 1 gives greedy's translation.
 *
 * opts: {bosId, eosId, padId = 0, beamSize = 4, maxLen = 128, alpha = 0.6}.
 * Returns {ids, score, attention, beams}: ids (T,) without BOS and EOS; score, the log-probability
 * divided by the length penalty; attention, the model's per-step report along the chosen
 * hypothesis, the EOS step included; beams, the K hypotheses of the last step in beam order (best
 * raw score first), each {ids, score: its float32 log-probability, final: score / length penalty
 * (null where the score is -∞)}, the chosen one among them (what attnlab.decode._finish chooses from).
 * Shape: src → T ids (T ≤ maxLen); internally R = 1 row at the first step, then K rows.
 */
export async function beamSearch(model, src, { bosId, eosId, padId = 0, beamSize = 4, maxLen = 128, alpha = 0.6 } = {}) {
  checkBeam(beamSize, alpha);
  checkMaxLen(maxLen);
  const K = beamSize;
  let state = await model.start(src);
  let tokens = [bosId]; // (R,) the last token of each row
  let scores = [f32(0)]; // (R,) float32 log-probabilities so far
  let history = [[]]; // (R, t) the tokens of each hypothesis
  let attn = [[]]; // (R, t) the model's reports along each hypothesis
  let ended = [maxLen]; // (R,) the step at which each emitted EOS; maxLen while live
  for (let t = 0; t < maxLen; t++) {
    const step = await model.step(tokens, state);
    state = step.state;
    const R = tokens.length;
    const V = step.logProbs.length / R;
    if (K > V) checkBeam(K, alpha, V); // throws: fewer tokens than beams
    // Every live row offers its K best extensions, a finished one itself extended by padding
    // (score unchanged; its other offers -∞): R·K offers, in row order then rank.
    const offerScore = new Float64Array(R * K);
    const offerToken = new Int32Array(R * K);
    for (let r = 0; r < R; r++) {
      if (ended[r] < t) {
        offerScore.fill(-Infinity, r * K, r * K + K);
        offerToken.fill(padId, r * K, r * K + K);
        offerScore[r * K] = scores[r];
        continue;
      }
      const best = topK(step.logProbs, r * V, V, K);
      for (let i = 0; i < K; i++) {
        offerScore[r * K + i] = f32(step.logProbs[r * V + best[i]] + scores[r]);
        offerToken[r * K + i] = best[i];
      }
    }
    // The sentence keeps the K best offers (of equal scores the earlier offer).
    const picks = topK(offerScore, 0, R * K, K);
    const index = picks.map((p) => Math.floor(p / K)); // (K,) the row each new hypothesis extends
    tokens = picks.map((p) => offerToken[p]);
    scores = picks.map((p) => offerScore[p]);
    ended = index.map((r, i) => (tokens[i] === eosId && ended[r] === maxLen ? t : ended[r]));
    history = index.map((r, i) => history[r].concat([tokens[i]]));
    if (step.attention) attn = index.map((r) => attn[r].concat([step.attention[r]]));
    const finished = ended.map((e) => e <= t);
    const lengths = ended.map((e) => Math.min(e, t) + 1); // tokens counting EOS, as GNMT's |Y|
    const done =
      t === maxLen - 1 ||
      (finished.some(Boolean) && (finished.every(Boolean) || decided(scores, finished, lengths, alpha, maxLen)));
    if (done) return finish(scores, lengths, ended, history, attn, alpha, t + 1);
    if (K > 1) state = await model.reorder(state, index);
  }
  throw new Error("unreachable: the last step always finishes the search");
}

// The best hypothesis by score / length penalty (penalty in double precision, rounded to float32;
// the first of equal ones), cut before its EOS (attnlab.decode._finish).
// Shape: scores, lengths, ended (K,), history (K, steps) → {ids (T,), score, attention (T + 1 or T,),
// beams (K,)}.
function finish(scores, lengths, ended, history, attn, alpha, steps) {
  let best = 0;
  let bestScore = -Infinity;
  const beams = [];
  for (let i = 0; i < scores.length; i++) {
    const final = Number.isFinite(scores[i]) ? f32(scores[i] / f32(lengthPenalty(lengths[i], alpha))) : -Infinity;
    if (i === 0 || final > bestScore) {
      best = i;
      bestScore = final;
    }
    const ids = history[i].slice(0, Math.min(ended[i], steps));
    beams.push({ ids, score: Number.isFinite(scores[i]) ? scores[i] : null, final: Number.isFinite(final) ? final : null });
  }
  const real = Math.min(ended[best], steps); // tokens before EOS (all of them when it never came)
  const decoded = Math.min(real + 1, steps); // steps decoded, the EOS step included
  return { ids: history[best].slice(0, real), score: bestScore, attention: attn[best].slice(0, decoded), beams };
}
