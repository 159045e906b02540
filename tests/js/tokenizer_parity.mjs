// Runs the page's tokenizers (attnlab/web/static/engine/tokenizer.js) on the cases that
// tests/site/test_js_engine.py writes, and prints what they give, for the test to compare with Python.
// Usage: node tests/js/tokenizer_parity.mjs CASES.json > RESULTS.json
// CASES: {tokenizers: {name: path}, encode: [[name, text, addBos, addEos]], decode: [[name, ids, skipSpecial]]}
// RESULTS: {encode: [ids], decode: [text or {error}]}
import { readFileSync } from "node:fs";
import { tokenizerFromJSON } from "../../attnlab/web/static/engine/tokenizer.js";

const cases = JSON.parse(readFileSync(process.argv[2], "utf8"));
const tokenizers = {};
for (const [name, path] of Object.entries(cases.tokenizers)) {
  tokenizers[name] = tokenizerFromJSON(JSON.parse(readFileSync(path, "utf8")));
}
const attempt = (fn) => {
  try {
    return fn();
  } catch (err) {
    return { error: String(err.message) };
  }
};
const out = {
  encode: cases.encode.map(([name, text, addBos, addEos]) =>
    attempt(() => tokenizers[name].encode(text, { addBos, addEos }))),
  decode: cases.decode.map(([name, ids, skipSpecial]) =>
    attempt(() => tokenizers[name].decode(ids, { skipSpecial }))),
};
process.stdout.write(JSON.stringify(out));
