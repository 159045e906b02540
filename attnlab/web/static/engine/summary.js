// §9's summarizer in the page: the shipped pointer-generator (facts-summarizer; See et al. 2017)
// exported to ONNX (attnlab.onnx_rnn: the encoder, and one step giving the final mixed
// distribution over the document's extended ids, the attention and the switch p_gen), run by
// onnxruntime-web and decoded greedily with decode.js, as attnlab.recipes.summarize.Summarizer
// does. summaryView returns the object of its Python reference (s09_transformers_at_work.
// summary_view) field for field; tests/site/test_site_rnn_browser.py compares them.
//
// Shape letters: S document words, T summary steps, D state width, V vocabulary, V_ext the
// vocabulary extended by the document's rare words.

import { greedy } from "./decode.js";
import { meta as modelMeta, modelJSON, runtime, session } from "./models.js";
import { PY_SPACE } from "./pytext.js";
import { dataJSON, roundTo } from "./rnn.js";

const int64 = (ort, values, dims) => new ort.Tensor("int64", BigInt64Array.from(values, (v) => BigInt(v)), dims);

const SPACE_CLASS = PY_SPACE.source.replace(/\+$/, "").slice(1, -1); // the characters inside [...]
// attnlab.data.tokenizers._WORD: a word (letters, digits, _; inner - ' . , allowed) or one symbol.
const WORD = new RegExp(`[\\p{L}\\p{N}_]+(?:[-'.,][\\p{L}\\p{N}_]+)*|[^\\p{L}\\p{N}_${SPACE_CLASS}]`, "gu");

const SPECIALS = ["[PAD]", "[UNK]", "[BOS]", "[EOS]"];

/** attnlab.data.tokenizers.WordVocab in the page (vocab.json: {format, lowercase, words}). */
export class WordVocab {
  constructor(json) {
    if (json.format !== "attnlab.word_vocab") throw new Error("not an attnlab word vocabulary");
    this.lowercase = Boolean(json.lowercase);
    this.itos = SPECIALS.concat(json.words);
    this.stoi = new Map(this.itos.map((w, i) => [w, i]));
    Object.assign(this, { padId: 0, unkId: 1, bosId: 2, eosId: 3 });
  }

  get vocabSize() {
    return this.itos.length;
  }

  /** Words and punctuation marks (lower-cased if the vocabulary is). Shape: a string → N words. */
  split(text) {
    return (this.lowercase ? text.toLowerCase() : text).match(WORD) || [];
  }

  /** Shape: a string → N ids, [UNK] for a word outside the vocabulary. */
  encode(text) {
    return this.split(text).map((w) => this.stoi.get(w) ?? this.unkId);
  }

  /** Extended ids (rare words V, V+1, … in order of first appearance) and the rare words. Shape: N words → N ids, K words. */
  encodeSource(words) {
    const oovs = [];
    const index = new Map();
    const ids = words.map((w) => {
      const i = this.stoi.get(w);
      if (i !== undefined) return i;
      if (!index.has(w)) {
        index.set(w, this.vocabSize + oovs.length);
        oovs.push(w);
      }
      return index.get(w);
    });
    return { ids, oovs };
  }

  /** The words of extended ids; special tokens left out except [UNK]. Shape: N ids → at most N words. */
  decode(ids, oovs) {
    const out = [];
    for (const i of ids) {
      if (i >= this.vocabSize) {
        const k = i - this.vocabSize;
        if (k >= oovs.length) throw new Error(`extended id ${i} but the document has only ${oovs.length} rare words`);
        out.push(oovs[k]);
      } else if (i >= SPECIALS.length || i === this.unkId) out.push(this.itos[i]);
    }
    return out;
  }
}

/**
 * decode.js's step interface over the summarizer's two sessions. A step's per-row report:
 * {cross: the attention over the document (S,), pGen: the switch}.
 */
export class OnnxPointerGenerator {
  constructor(ort, encoder, decoder, meta) {
    Object.assign(this, { ort, encoder, decoder, meta });
  }

  /** Shape: S extended ids → a state of one row. */
  async start(srcIds) {
    const src = int64(this.ort, srcIds, [1, srcIds.length]);
    const out = await this.encoder.run({ src_ids: src });
    return { src, hidden: out.final_h, cell: out.final_c, memory: out.memory, keys: out.keys };
  }

  /** Shape: tokens (B,) → logProbs (B × V_ext). */
  async step(tokens, state) {
    const feeds = { tokens: int64(this.ort, tokens, [tokens.length, 1]), hidden: state.hidden, memory: state.memory, keys: state.keys, src_ids: state.src };
    if (this.meta.cell === "lstm") feeds.cell = state.cell;
    const out = await this.decoder.run(feeds);
    const S = out.cross_attn.dims[1];
    const attention = tokens.map((_, b) => ({ cross: Array.from(out.cross_attn.data.subarray(b * S, (b + 1) * S)), pGen: out.p_gen.data[b] }));
    return { logProbs: out.log_probs.data, state: { ...state, hidden: out.hidden_out, cell: out.cell_out }, attention };
  }
}

/**
 * The shipped summarizer, loaded once per page. Shape: a name → {meta, vocab, model}.
 */
export async function summarizer(name = "facts-summarizer", { onProgress = () => {} } = {}) {
  const ort = await runtime();
  const meta = await modelMeta(name);
  if (meta.format !== "attnlab.onnx" || meta.kind !== "pointer_generator") throw new Error("meta.json is not an attnlab pointer-generator export");
  const vocab = new WordVocab(await modelJSON(name, meta.vocab));
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
  return { name, meta, vocab, model: new OnnxPointerGenerator(ort, encoder, decoder, meta) };
}

/**
 * §9's summary (s09_transformers_at_work.summary_view): req {document} (null: the first example)
 * summarized greedily, with p_gen and the attention of every step (the [EOS] step included).
 * examples: summary-examples.json's documents.
 * Shape: S document words → attention (T, S), p_gen (T,).
 */
export async function summaryView(pg, examples, req = {}) {
  const { meta, vocab, model } = pg;
  let document = req.document ?? null;
  if (document === null) document = examples[0];
  else if (typeof document !== "string" || !document.length || document.length > 600) throw new Error("a document is 1 to 600 characters");
  if (!vocab.split(document).length) throw new Error("the document has no words");
  const words = vocab.split(document).slice(0, meta.max_src_len);
  const { ids, oovs } = vocab.encodeSource(words);
  let last = null;
  const probe = {
    start: (s) => model.start(s),
    step: async (t, s) => {
      const r = await model.step(t, s);
      last = r.state;
      return r;
    },
  };
  const maxLen = meta.max_summary_len;
  const hyp = await greedy(probe, ids, { bosId: meta.bos_id, eosId: meta.eos_id, maxLen });
  const attention = hyp.attention.slice();
  if (hyp.ids.length === maxLen && attention.length === maxLen) {
    // No [EOS] within the limit: the reference replays [BOS] + the summary, one row more than
    // the search decoded; feed the last word once more to get it.
    const extra = await model.step([hyp.ids[hyp.ids.length - 1]], last);
    attention.push(extra.attention[0]);
  }
  const summaryWords = vocab.decode(hyp.ids, oovs);
  const T = hyp.ids.length + 1;
  const known = vocab.decode(ids, oovs).map((w) => {
    const e = vocab.encode(w);
    return !(e.length === 1 && e[0] === vocab.unkId);
  });
  return {
    model: pg.name,
    examples,
    document,
    src_tokens: vocab.decode(ids, oovs),
    tokens: summaryWords.concat(["[EOS]"]).slice(0, T),
    p_gen: attention.slice(0, T).map((a) => roundTo(a.pGen, 6)),
    attention: attention.slice(0, T).map((a) => a.cross.map((v) => roundTo(v, 5))),
    known,
  };
}

/** The examples file (summary-examples.json's documents). Shape: → 3 strings. */
export async function summaryExamples() {
  return (await dataJSON("summary-examples.json")).documents;
}
