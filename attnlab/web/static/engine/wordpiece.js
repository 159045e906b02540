// BERT's WordPiece tokenizer in the page, from a HuggingFace tokenizer.json (what attnlab's
// PretrainedTokenizer reads: MiniLM's and the shipped question answerer's). The same ids and
// character offsets as the Python package (attnlab.data.tokenizers.PretrainedTokenizer, which runs
// HuggingFace `tokenizers`), tested token for token in tests/site/test_site_bert_browser.py.
//
// The pipeline (Devlin et al. 2019, §3; Wu et al. 2016 for WordPiece):
//   1. the added (special) tokens ([CLS], [SEP], [MASK], …) are cut out of the raw text first;
//   2. BertNormalizer, per character: drop NUL, U+FFFD and the "other" categories (C*) except
//      tab/newline/return; any white space becomes a space; CJK ideographs get a space on each
//      side; accents are stripped (NFD, then the nonspacing marks Mn are dropped) and letters
//      lower-cased (both when the file says lowercase, strip_accents unset);
//   3. BertPreTokenizer: split on white space, and every punctuation character (ASCII punctuation
//      or a Unicode P* category) is a word of its own;
//   4. WordPiece: each word is cut greedily into the longest pieces in the vocabulary, pieces after
//      the first written with "##"; a word with a part no piece covers (or longer than
//      max_input_chars_per_word characters) is one [UNK].
// Offsets are in characters (Unicode code points) of the original text, as Python's str indices.
// Written from the algorithm; no code from other projects.
//
// Shapes: encode: a string → L ids; encodeWithOffsets: a string → L ids and L [start, end) pairs.

const ASCII_PUNCT = /^[!-/:-@[-`{-~]$/u;
const PUNCT = /^\p{P}$/u;
const OTHER = /^\p{C}$/u; // Cc, Cf, Cs, Co, Cn
const SPACE = /^\p{White_Space}$/u;
const NONSPACING_MARK = /^\p{Mn}$/u;

function isCJK(cp) {
  return (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0x3400 && cp <= 0x4dbf) || (cp >= 0x20000 && cp <= 0x2a6df) ||
    (cp >= 0x2a700 && cp <= 0x2b73f) || (cp >= 0x2b740 && cp <= 0x2b81f) || (cp >= 0x2b920 && cp <= 0x2ceaf) ||
    (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0x2f800 && cp <= 0x2fa1f);
}

const isSpace = (ch) => ch === "\t" || ch === "\n" || ch === "\r" || SPACE.test(ch);
const isControl = (ch) => ch !== "\t" && ch !== "\n" && ch !== "\r" && OTHER.test(ch);
const isPunct = (ch) => ASCII_PUNCT.test(ch) || PUNCT.test(ch);

export class WordPieceTokenizer {
  /** @param {object} json a HuggingFace tokenizer.json with a WordPiece model and a BertNormalizer. */
  constructor(json) {
    const model = json && json.model;
    if (!model || model.type !== "WordPiece") throw new Error("not a WordPiece tokenizer.json");
    const norm = json.normalizer || {};
    if (norm.type !== "BertNormalizer" || (json.pre_tokenizer || {}).type !== "BertPreTokenizer") {
      throw new Error("only BERT's normalizer and pre-tokenizer are supported in the page");
    }
    this.kind = "wordpiece";
    this.lowercase = norm.lowercase !== false;
    this.stripAccents = norm.strip_accents === null || norm.strip_accents === undefined ? this.lowercase : norm.strip_accents;
    this.cleanText = norm.clean_text !== false;
    this.chinese = norm.handle_chinese_chars !== false;
    this.prefix = model.continuing_subword_prefix || "##";
    this.maxChars = model.max_input_chars_per_word || 100;
    this.vocab = new Map(Object.entries(model.vocab));
    this.added = (json.added_tokens || []).map((t) => ({ content: t.content, id: t.id }));
    for (const t of this.added) this.vocab.set(t.content, t.id);
    this.inverse = [];
    for (const [tok, id] of this.vocab) this.inverse[id] = tok;
    this.unkId = this.vocab.get(model.unk_token);
    this.vocabSize = this.inverse.length;
  }

  idToToken(id) {
    if (!Number.isInteger(id) || id < 0 || id >= this.inverse.length) throw new RangeError(`token id ${id} is outside the vocabulary`);
    return this.inverse[id];
  }

  tokenToId(token) {
    const id = this.vocab.get(token);
    return id === undefined ? null : id;
  }

  // Normalised characters of chars[from, to), each with the index of the character it came from.
  normalize(chars, from, to) {
    const out = [];
    for (let i = from; i < to; i++) {
      const ch = chars[i];
      const cp = ch.codePointAt(0);
      if (this.cleanText) {
        if (cp === 0 || cp === 0xfffd || isControl(ch)) continue;
        if (isSpace(ch)) { out.push([" ", i]); continue; }
      }
      if (this.chinese && isCJK(cp)) { out.push([" ", i], [ch, i], [" ", i]); continue; }
      let s = ch;
      if (this.stripAccents) s = Array.from(s.normalize("NFD")).filter((c) => !NONSPACING_MARK.test(c)).join("");
      if (this.lowercase) s = Array.from(s).map((c) => c.toLowerCase()).join("");
      for (const c of s) out.push([c, i]);
    }
    return out;
  }

  // Words of normalised characters: split on spaces, punctuation alone.
  static words(norm) {
    const words = [];
    let cur = [];
    const flush = () => { if (cur.length) words.push(cur); cur = []; };
    for (const pair of norm) {
      const c = pair[0];
      if (isSpace(c)) flush();
      else if (isPunct(c)) { flush(); words.push([pair]); }
      else cur.push(pair);
    }
    flush();
    return words;
  }

  // WordPiece of one word: ids and [start, end) offsets in the original text.
  pieces(word, ids, offsets) {
    const chars = word.map((p) => p[0]);
    const end = (k) => word[k - 1][1] + 1; // one past the original character of the last piece char
    if (chars.length > this.maxChars) {
      ids.push(this.unkId);
      offsets.push([word[0][1], end(word.length)]);
      return;
    }
    const got = [];
    let start = 0;
    while (start < chars.length) {
      let stop = chars.length;
      let id = null;
      while (stop > start) {
        const piece = (start > 0 ? this.prefix : "") + chars.slice(start, stop).join("");
        const found = this.vocab.get(piece);
        if (found !== undefined) { id = found; break; }
        stop--;
      }
      if (id === null) {
        ids.push(this.unkId);
        offsets.push([word[0][1], end(word.length)]);
        return;
      }
      got.push([id, [word[start][1], end(stop)]]);
      start = stop;
    }
    for (const [id, off] of got) { ids.push(id); offsets.push(off); }
  }

  /** Shape: a string → {ids: L ids, offsets: L [start, end) code-point spans}. */
  encodeWithOffsets(text) {
    const chars = Array.from(text);
    const ids = [];
    const offsets = [];
    // The added tokens, matched in the raw text (leftmost, then longest).
    const specials = this.added.slice().sort((a, b) => b.content.length - a.content.length);
    let from = 0;
    let i = 0;
    const plain = (to) => {
      for (const word of WordPieceTokenizer.words(this.normalize(chars, from, to))) this.pieces(word, ids, offsets);
    };
    while (i < chars.length) {
      let hit = null;
      for (const t of specials) {
        const c = Array.from(t.content);
        if (c.length && chars.slice(i, i + c.length).join("") === t.content) { hit = [t, c.length]; break; }
      }
      if (hit) {
        plain(i);
        ids.push(hit[0].id);
        offsets.push([i, i + hit[1]]);
        i += hit[1];
        from = i;
      } else i++;
    }
    plain(chars.length);
    return { ids, offsets };
  }

  /** Shape: a string → L ids (no [CLS]/[SEP]). */
  encode(text) {
    return this.encodeWithOffsets(text).ids;
  }
}
