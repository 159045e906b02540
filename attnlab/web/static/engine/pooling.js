// §8's attention-pooling exercise in the page: the shipped classifier ja-sentence-type reads a
// Japanese sentence character by character and says whether it is a question, a negation, in the
// past or none of these, with the pooling weight of every character.
//
// models/ja-sentence-type/ (attnlab.onnx_apps.export_classifier_onnx) holds one graph,
// ids (B, S) → logits (B, C), probs (B, C) and pool_weights (B, S), the character tokenizer
// (tokenizer.js) and meta.json (labels, max_len, the example sentences, the model card's held-out
// scores). The grammatical markers come from MeCab, which runs when the site is built, not in the
// page: static/data/pooling-sentences.json (attnlab.web.site's SITE_DATA) lists the sentences the
// widget offers with MeCab's markers; a typed sentence not on that list gets markers null.
//   classify(model, req) = attnlab.web.lesson.s08_variants_and_exercises.pooling_view
// field for field (markers null where the reference would run MeCab on an unlisted sentence).
//
// Shape letters: C characters of the sentence (its tokens), K classes.

import { meta, modelJSON, runtime, session } from "./models.js";
import { fetchJSON } from "./onnx_translator.js";
import { pyStrip } from "./pytext.js";
import { argmax, loadOnce } from "./small_models.js";
import { tokenizerFromJSON } from "./tokenizer.js";

export const POOLING_MODEL = "ja-sentence-type";
const SENTENCES_URL = new URL("../data/pooling-sentences.json", import.meta.url).href;

const loadedModels = new Map();


/**
 * The classifier of models/NAME/ with the listed sentences, loaded once per page:
 * {name, meta, tokenizer, labels (the lesson's order), sentences (the listed ones, in order:
 * {text, source, label, markers}), listed (text → markers), run(ids)}.
 * run(ids) → {probs: Float32Array(K) in meta.labels' order, weights: Float32Array(C)}.
 * Shape: a name → the model.
 */
export function loadPooling(name = POOLING_MODEL, { onProgress = () => {} } = {}) {
  return loadOnce(loadedModels, name, async () => {
    const info = await meta(name);
    const [ort, tok, sess, data] = await Promise.all([
      runtime(),
      modelJSON(name, info.tokenizer),
      session(name, "model.onnx", { onProgress }),
      fetchJSON(SENTENCES_URL), // the explorer's 503 sentence shown as the other files' are
    ]);
    return {
      name,
      meta: info,
      tokenizer: tokenizerFromJSON(tok),
      labels: data.labels,
      sentences: data.sentences,
      listed: new Map(data.sentences.map((row) => [row.text, row.markers])),
      async run(ids) {
        const feeds = { ids: new ort.Tensor("int64", BigInt64Array.from(ids, (v) => BigInt(v)), [1, ids.length]) };
        const out = await sess.run(feeds);
        return { probs: out.probs.data, weights: out.pool_weights.data };
      },
    };
  });
}

/**
 * pooling_view: the class probabilities (in the lesson's order of labels) and the pooling weight
 * of each character of req.text (NFC, stripped as Python strips), with MeCab's markers where the
 * sentence is listed (else null), the example of each class and the model card's scores.
 * Shape: a sentence of C characters → probs (K,), weights (C,)
 */
export async function classify(model, req) {
  const raw = req && typeof req.text === "string" ? req.text : null;
  if (raw === null) throw new Error("the text must be a string");
  const text = pyStrip(raw.normalize("NFC"));
  if (!text) throw new Error("type a sentence: the text is blank");
  const chars = [...text]; // code points, as Python's list(text)
  const most = model.meta.max_len;
  if (chars.length > most) throw new Error(`the sentence has ${chars.length} characters; this model reads at most ${most}`);
  const ids = model.tokenizer.encode(text);
  const { probs, weights } = await model.run(ids);
  const order = model.meta.labels; // the model's own order of its classes
  const at = (label) => order.indexOf(label);
  const w = Array.from(weights);
  const labels = model.labels;
  return {
    model: model.name,
    text,
    labels: [...labels],
    label: order[argmax(probs)],
    probs: labels.map((label) => probs[at(label)]),
    chars,
    known: ids.map((i) => i !== model.meta.unk_id),
    weights: w,
    peak: argmax(w),
    markers: model.listed.has(text) ? model.listed.get(text) : null,
    examples: Object.fromEntries(labels.map((label, i) => [label, model.meta.examples[i]])),
    card: model.meta.card,
  };
}
