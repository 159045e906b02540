// The page's translator (onnx_translator.js + decode.js + tokenizer.js) on a folder that
// attnlab.export_onnx wrote, run by onnxruntime-web's WASM backend in Node: every sentence of the
// folder's decode_fixture.json is encoded, decoded greedily and with beam 4, and reported for
// tests/test_js_engine.py to compare with the fixture (made by attnlab.decode on the PyTorch model).
// Usage: node tests/js/onnx_fixture_check.mjs FOLDER [LIMIT] > RESULTS.json
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as ort from "onnxruntime-web";
import { makeTranslator } from "../../attnlab/web/static/engine/onnx_translator.js";
import { tokenizerFromJSON } from "../../attnlab/web/static/engine/tokenizer.js";

const [folder, limit] = [process.argv[2], Number(process.argv[3] || Infinity)];
ort.env.wasm.numThreads = 1; // the single-threaded build: what a host without cross-origin isolation gets
const read = (name) => readFileSync(join(folder, name));
const meta = JSON.parse(read("meta.json"));
const session = (name) => ort.InferenceSession.create(read(name), { executionProviders: ["wasm"] });
const [encoder, decoder] = await Promise.all([session("encoder.onnx"), session("decoder.onnx")]);
const tok = (name) => tokenizerFromJSON(JSON.parse(read(name)));
const translator = makeTranslator(ort, encoder, decoder, meta, tok(meta.src_tokenizer), tok(meta.tgt_tokenizer));
const fixture = JSON.parse(read("decode_fixture.json")).slice(0, limit);
const results = [];
for (const record of fixture) {
  const greedy = await translator.translate(record.text, { beamSize: 1 });
  const beam = await translator.translate(record.text, { beamSize: 4 });
  results.push({ src_ids: greedy.srcIds, greedy: greedy.ids, beam4: beam.ids, beam4_score: beam.score, steps: beam.attention.length });
}
process.stdout.write(JSON.stringify(results));
