// attnlab's tokenizers in the page: the same ids from the same tokenizer JSON files as the Python
// package (attnlab/data/tokenizers.py), so that a model exported to ONNX sees exactly the ids it
// was trained on. Two kinds, the ones the shipped translators, the RNN pair and the character
// GPT use:
//   - "bpe": a subword tokenizer trained by attnlab on HuggingFace `tokenizers` (the JSON wraps
//     that library's tokenizer.json). Encoding runs the same pipeline: the special tokens are cut
//     out of the raw text first; every other piece is NFC-normalised, pre-tokenized by Metaspace
//     (SentencePiece's scheme: a space becomes ▁, a ▁ is put in front, and the text is split
//     before every ▁; Kudo & Richardson 2018) and then by Digits (one token per digit), and each
//     word is split into characters and merged by BPE (Sennrich et al. 2016): the adjacent pair
//     with the best-ranked merge, leftmost first, until no pair has a merge. A character outside
//     the vocabulary becomes [UNK] (no byte fallback).
//   - "char": one token per Unicode character after NFC.
// Written from the algorithm and tested token for token against the Python package
// (tests/site/test_js_engine.py); no code from other projects.
//
// Shapes: encode: a string → L ids (plain numbers); decode: L ids → a string.

const FORMAT = "attnlab.tokenizer";
const METASPACE = "\u2581"; // ▁, SentencePiece's word-start marker
const NUMERIC = /^\p{N}$/u; // the Unicode number categories (Nd, Nl, No): what Digits splits off

// The special token strings in id order (pad 0, unk 1, bos 2, eos 3, then mask if present).
function specialList(special) {
  const names = [special.pad, special.unk, special.bos, special.eos];
  if (special.mask !== null && special.mask !== undefined) names.push(special.mask);
  return names;
}

// [BOS] ids [EOS] as the Python tokenizers' _wrap does.
function wrap(ids, bosId, eosId, addBos, addEos) {
  return (addBos ? [bosId] : []).concat(ids, addEos ? [eosId] : []);
}

function checkId(id, size) {
  if (!Number.isInteger(id) || id < 0) throw new RangeError(`token id ${id} is not a non-negative integer`);
  if (size !== undefined && id >= size) throw new RangeError(`token id ${id} is outside the vocabulary of size ${size}`);
}

/** One token per character (attnlab.data.tokenizers.CharTokenizer). */
export class CharTokenizer {
  /**
   * @param {object} json the tokenizer file: {format, version, kind: "char", special_tokens, chars}
   */
  constructor(json) {
    this.kind = "char";
    this.specials = specialList(json.special_tokens);
    this.vocab = this.specials.concat(json.chars);
    this.index = new Map(this.vocab.map((tok, i) => [tok, i]));
    this.padId = 0;
    this.unkId = 1;
    this.bosId = 2;
    this.eosId = 3;
    this.maskId = this.specials.length > 4 ? 4 : null;
  }

  get vocabSize() {
    return this.vocab.length;
  }

  /** Shape: a string of L characters → L ids (L + 1 or L + 2 with BOS/EOS). */
  encode(text, { addBos = false, addEos = false } = {}) {
    const ids = [];
    for (const ch of text.normalize("NFC")) {
      const id = this.index.get(ch);
      ids.push(id === undefined ? this.unkId : id);
    }
    return wrap(ids, this.bosId, this.eosId, addBos, addEos);
  }

  /** Shape: L ids → a string of at most L characters (special tokens left out unless skipSpecial is false). */
  decode(ids, { skipSpecial = true } = {}) {
    let out = "";
    for (const id of ids) {
      checkId(id, this.vocab.length);
      if (skipSpecial && id < this.specials.length) continue;
      out += this.vocab[id];
    }
    return out;
  }

  /** The display labels of a text's tokens (a space shown as ▁). Shape: a string → L strings. */
  tokens(text, opts = {}) {
    return this.encode(text, opts).map((id) => (this.vocab[id] === " " ? METASPACE : this.vocab[id]));
  }

  idToToken(id) {
    checkId(id, this.vocab.length);
    return this.vocab[id];
  }

  tokenToId(token) {
    const id = this.index.get(token);
    return id === undefined ? null : id;
  }
}

/** A BPE subword tokenizer (attnlab.data.tokenizers.SubwordTokenizer, kind "bpe"). */
export class BpeTokenizer {
  /**
   * @param {object} json the tokenizer file: {format, version, kind: "bpe", special_tokens, hf_tokenizer}
   */
  constructor(json) {
    const hf = json.hf_tokenizer;
    checkPipeline(hf);
    this.kind = "bpe";
    const model = hf.model;
    this.tokenOf = []; // id → token string
    this.idOf = new Map(); // token string → id
    for (const [token, id] of Object.entries(model.vocab)) {
      this.tokenOf[id] = token;
      this.idOf.set(token, id);
    }
    // The added tokens (attnlab's special tokens) are found in the raw text before anything else
    // and keep their ids; they are never normalised or split (attnlab saves them so).
    this.added = [];
    this.specialIds = new Set();
    for (const tok of hf.added_tokens) {
      if (tok.normalized || tok.lstrip || tok.rstrip || tok.single_word) {
        throw new Error(`added token ${tok.content}: only plain special tokens are supported in the page`);
      }
      this.added.push(tok.content);
      this.tokenOf[tok.id] = tok.content;
      this.idOf.set(tok.content, tok.id);
      if (tok.special) this.specialIds.add(tok.id);
    }
    // Longest first, so that of two special tokens starting at the same place the longer wins.
    this.added.sort((a, b) => b.length - a.length);
    this.vocabSize = this.tokenOf.length;
    // merges: the pair (left id, right id) → its rank (earlier = merged first) and the merged id.
    this.merges = new Map();
    model.merges.forEach((merge, rank) => {
      const [left, right] = typeof merge === "string" ? splitMergeString(merge) : merge;
      const a = this.idOf.get(left);
      const b = this.idOf.get(right);
      const ab = this.idOf.get(left + right);
      if (a === undefined || b === undefined || ab === undefined) {
        throw new Error(`merge ${rank} (${left} ${right}) uses a token outside the vocabulary`);
      }
      this.merges.set(a * this.vocabSize + b, { rank, id: ab });
    });
    const specials = specialList(json.special_tokens);
    [this.padId, this.unkId, this.bosId, this.eosId] = specials.slice(0, 4).map((tok) => this.idOf.get(tok));
    this.maskId = specials.length > 4 ? this.idOf.get(specials[4]) : null;
    this.unkToken = model.unk_token;
    this.wordCache = new Map(); // word → its ids (a sentence repeats words; the page re-encodes as one types)
  }

  /** Shape: a string → L ids (L + 1 or L + 2 with BOS/EOS). */
  encode(text, { addBos = false, addEos = false } = {}) {
    const ids = [];
    for (const piece of this.splitAdded(text)) {
      if (piece.special) {
        ids.push(this.idOf.get(piece.text));
        continue;
      }
      for (const word of preTokenize(piece.text.normalize("NFC"))) {
        for (const id of this.bpeWord(word)) ids.push(id);
      }
    }
    return wrap(ids, this.bosId, this.eosId, addBos, addEos);
  }

  /**
   * The text of ids: the Metaspace decoder (every ▁ a space, except in the first token, where it
   * marks the start). Ids outside the vocabulary are left out, as HuggingFace's decode does.
   * Shape: L ids → a string.
   */
  decode(ids, { skipSpecial = true } = {}) {
    const tokens = [];
    for (const id of ids) {
      checkId(id);
      const token = this.tokenOf[id];
      if (token === undefined) continue;
      if (skipSpecial && this.specialIds.has(id)) continue;
      tokens.push(token);
    }
    return tokens.map((tok, i) => tok.split(METASPACE).join(i === 0 ? "" : " ")).join("");
  }

  /** The display labels of a text's tokens. Shape: a string → L strings. */
  tokens(text, opts = {}) {
    return this.encode(text, opts).map((id) => this.tokenOf[id]);
  }

  idToToken(id) {
    checkId(id, this.vocabSize);
    const token = this.tokenOf[id];
    if (token === undefined) throw new RangeError(`token id ${id} is not in the vocabulary`);
    return token;
  }

  tokenToId(token) {
    const id = this.idOf.get(token);
    return id === undefined ? null : id;
  }

  // The text cut at the special tokens: [{text, special}], the special ones found leftmost first.
  splitAdded(text) {
    const pieces = [];
    let start = 0;
    let pos = 0;
    while (pos < text.length) {
      const hit = this.added.find((tok) => text.startsWith(tok, pos));
      if (hit === undefined) {
        pos += 1;
        continue;
      }
      if (pos > start) pieces.push({ text: text.slice(start, pos), special: false });
      pieces.push({ text: hit, special: true });
      pos += hit.length;
      start = pos;
    }
    if (text.length > start) pieces.push({ text: text.slice(start), special: false });
    return pieces;
  }

  // One pre-tokenized word → its ids by BPE: characters first (an unknown one is [UNK]), then
  // the merges, always the best-ranked adjacent pair (the leftmost of equal ones), until none applies.
  bpeWord(word) {
    const cached = this.wordCache.get(word);
    if (cached !== undefined) return cached;
    const symbols = [];
    for (const ch of word) {
      const id = this.idOf.get(ch);
      symbols.push(id === undefined ? this.idOf.get(this.unkToken) : id);
    }
    for (;;) {
      let best = null;
      let at = -1;
      for (let i = 0; i + 1 < symbols.length; i++) {
        const merge = this.merges.get(symbols[i] * this.vocabSize + symbols[i + 1]);
        if (merge !== undefined && (best === null || merge.rank < best.rank)) {
          best = merge;
          at = i;
        }
      }
      if (best === null) break;
      symbols.splice(at, 2, best.id);
    }
    if (this.wordCache.size < 50000) this.wordCache.set(word, symbols);
    return symbols;
  }
}

// "a b" (the older merges format) → ["a", "b"].
function splitMergeString(merge) {
  const space = merge.indexOf(" ", 1);
  return [merge.slice(0, space), merge.slice(space + 1)];
}

// Metaspace (replacement ▁, prepend_scheme "always", split) then Digits (individual digits) on one
// piece of normalised text. Shape: a string → its words, e.g. "I have 23" → ["▁I", "▁have", "▁", "2", "3"].
function preTokenize(text) {
  if (text.length === 0) return [];
  let s = text.split(" ").join(METASPACE);
  if (!s.startsWith(METASPACE)) s = METASPACE + s;
  const words = [];
  let current = "";
  for (const ch of s) {
    if (ch === METASPACE) {
      if (current) words.push(current);
      current = ch; // the marker starts the next word (merged with what follows)
    } else if (NUMERIC.test(ch)) {
      if (current) words.push(current);
      words.push(ch); // a digit is a word of its own
      current = "";
    } else {
      current += ch;
    }
  }
  if (current) words.push(current);
  return words;
}

// The HuggingFace pipeline attnlab trains (train_subword_tokenizer); anything else would be
// encoded differently here, so it is refused with a clear message instead.
function checkPipeline(hf) {
  const fail = (what) => {
    throw new Error(`this tokenizer's ${what} is not the one attnlab trains; the page cannot encode with it`);
  };
  const model = hf.model || {};
  if (model.type !== "BPE" || model.byte_fallback || model.continuing_subword_prefix || model.end_of_word_suffix ||
      model.fuse_unk || model.ignore_merges || (model.dropout !== null && model.dropout !== undefined)) fail("model");
  if (!hf.normalizer || hf.normalizer.type !== "NFC") fail("normalizer");
  const pre = hf.pre_tokenizer || {};
  const steps = pre.type === "Sequence" ? pre.pretokenizers : [];
  const [meta, digits] = steps;
  if (steps.length !== 2 || meta.type !== "Metaspace" || meta.replacement !== METASPACE ||
      meta.prepend_scheme !== "always" || meta.split !== true || digits.type !== "Digits" ||
      digits.individual_digits !== true) fail("pre-tokenizer");
  const dec = hf.decoder || {};
  if (dec.type !== "Metaspace" || dec.replacement !== METASPACE || dec.prepend_scheme !== "always") fail("decoder");
  if (hf.post_processor) fail("post-processor");
}

/**
 * A tokenizer from the parsed JSON of one of attnlab's tokenizer files.
 * Shape: an object → a tokenizer with encode (string → ids) and decode (ids → string).
 */
export function tokenizerFromJSON(json) {
  if (!json || json.format !== FORMAT) throw new Error(`not an attnlab tokenizer (format ${FORMAT})`);
  if (json.kind === "bpe") return new BpeTokenizer(json);
  if (json.kind === "char") return new CharTokenizer(json);
  throw new Error(`tokenizer kind ${json.kind} is not supported in the page (only "bpe" and "char")`);
}

/**
 * Fetch and build a tokenizer file (same origin: the site's own folder).
 * Shape: a URL → a tokenizer.
 */
export async function loadTokenizer(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: ${response.status} ${response.statusText}`);
  return tokenizerFromJSON(await response.json());
}
