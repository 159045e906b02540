// The page's translator (onnx_translator.js + decode.js + tokenizer.js) on a folder that
// attnlab.export_onnx wrote, run by onnxruntime-web's WASM backend in Node: the folder is served
// over HTTP (as a static host serves the site) and loaded by loadTranslator; every sentence of its
// decode_fixture.json is encoded, decoded greedily and with beam 4, and reported for
// tests/site/test_js_engine.py to compare with the fixture (made by attnlab.decode on the PyTorch model).
// Usage: node tests/js/onnx_fixture_check.mjs FOLDER [LIMIT] > RESULTS.json
// RESULTS: {progress: [loaded, total] last reported, results: [{src_ids, greedy, beam4, beam4_score}]}
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { join, normalize } from "node:path";
import * as ort from "onnxruntime-web";
import { loadTranslator } from "../../attnlab/web/static/engine/onnx_translator.js";

const [folder, limit] = [process.argv[2], Number(process.argv[3] || Infinity)];
ort.env.wasm.numThreads = 1; // the single-threaded build: what a host without cross-origin isolation gets

const server = createServer((request, response) => {
  const name = normalize(decodeURIComponent(new URL(request.url, "http://x").pathname)).replace(/^\/+/, "");
  try {
    const body = readFileSync(join(folder, name));
    response.writeHead(200, { "content-length": body.length });
    response.end(request.method === "HEAD" ? undefined : body);
  } catch {
    response.writeHead(404).end();
  }
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
let progress = null;
try {
  const base = `http://127.0.0.1:${server.address().port}/`;
  const translator = await loadTranslator(base, { ort, onProgress: (loaded, total) => (progress = [loaded, total]) });
  const fixture = JSON.parse(readFileSync(join(folder, "decode_fixture.json"), "utf8")).slice(0, limit);
  const results = [];
  for (const record of fixture) {
    const greedy = await translator.translate(record.text, { beamSize: 1 });
    const beam = await translator.translate(record.text, { beamSize: 4 });
    results.push({ src_ids: greedy.srcIds, greedy: greedy.ids, beam4: beam.ids, beam4_score: beam.score });
  }
  process.stdout.write(JSON.stringify({ progress, results }));
} finally {
  server.close();
}
