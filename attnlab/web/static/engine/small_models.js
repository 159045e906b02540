// What the lesson's small in-page models share (gpt.js, vit.js, gat.js): one load per page and
// the two reductions their references use. (A failed load is said in the server's own words by
// the fetches of models.js / onnx_translator.js.)

/**
 * make() once per key for the page (a failed load may be retried).
 * Shape: a key, a model name and a function → a Promise of its result.
 */
export function loadOnce(cache, name, make) {
  if (!cache.has(name)) {
    const promise = make();
    cache.set(name, promise);
    promise.catch(() => cache.delete(name));
  }
  return cache.get(name);
}

/**
 * torch.softmax of one row of float32 logits, each probability rounded to float32 (the sum in
 * float64: the same numbers to ~1e-7, not bit for bit).
 * Shape: (V,) → (V,)
 */
export function softmax32(logits) {
  let max = -Infinity;
  for (const x of logits) if (x > max) max = x;
  const e = Array.from(logits, (x) => Math.exp(x - max)); // −∞ (a token left out) gives exactly 0
  const sum = e.reduce((a, b) => a + b, 0);
  return Float32Array.from(e, (x) => x / sum);
}

/** The first index of the largest value (torch.argmax). Shape: (V,) → an index. */
export function argmax(xs) {
  let best = 0;
  for (let i = 1; i < xs.length; i++) if (xs[i] > xs[best]) best = i;
  return best;
}
