// The engine check page (check.html): onnxruntime-web's WASM build and one translator of the site's
// models/ folder, run by the page's own engine (onnx_translator.js, decode.js, tokenizer.js).
// tests/site/test_engine_browser.py and benchmarks/site_engine.py drive it through window.engineCheck:
//   engineCheck.ready            a Promise of the first translator (?model=NAME, default demo)
//   engineCheck.readyMs          ms from the navigation's start to that translator being ready
//   engineCheck.load(name)       → {ms}: load models/NAME/ (kept for later runs)
//   engineCheck.run(name, records, {beam, alpha, attention})
//                                → per record {text, src_ids, ids, score, ms[, cross, encoder]}
//   engineCheck.threads          the WASM threads in use
// Everything is fetched by URLs relative to this module, so the folder runs from any static host.
import * as ort from "../vendor/onnxruntime-web/ort.wasm.min.mjs";
import { loadTranslator } from "./onnx_translator.js";

// Threads need SharedArrayBuffer, which a page has only when its host sends the cross-origin
// isolation headers (COOP/COEP); a plain static host gets the single-threaded path.
const threads = globalThis.crossOriginIsolated ? Math.max(1, Math.min(4, navigator.hardwareConcurrency || 1)) : 1;
ort.env.wasm.numThreads = threads;

const translators = new Map();
const status = document.getElementById("status");

async function load(name) {
  if (!/^[A-Za-z0-9_.-]+$/.test(name) || name === "." || name === "..") throw new Error(`not a model name: ${name}`);
  const start = performance.now();
  if (!translators.has(name)) {
    const base = new URL(`../models/${name}/`, import.meta.url).href;
    translators.set(name, await loadTranslator(base, { ort }));
  }
  return { ms: performance.now() - start };
}

// The records of a decode fixture (attnlab.export_onnx.write_decode_fixture), each translated from
// its text as a learner's sentence is. With attention, also the chosen hypothesis' cross-attention
// rows (one per decoded step, (Ld, H, S) flat) and the encoder's self-attention (Le, 1, H, S, S).
async function run(name, records, { beam = 4, alpha, attention = false } = {}) {
  await load(name);
  const translator = translators.get(name);
  const results = [];
  for (const record of records) {
    const start = performance.now();
    const out = await translator.translate(record.text, { beamSize: beam, alpha });
    const ms = performance.now() - start;
    const result = { text: out.text, src_ids: out.srcIds, ids: out.ids, score: out.score, ms };
    if (attention) {
      result.cross = out.attention.map((row) => Array.from(row.cross));
      const state = await translator.model.start(out.srcIds);
      result.encoder = { dims: state.encoderAttention.dims, data: Array.from(state.encoderAttention.data) };
    }
    results.push(result);
  }
  return results;
}

async function start() {
  const name = new URLSearchParams(location.search).get("model") || "demo";
  await load(name);
  window.engineCheck.readyMs = performance.now();
  status.textContent = `${name} ready (${threads} thread${threads === 1 ? "" : "s"})`;
  const form = document.getElementById("try");
  form.hidden = false;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const output = document.getElementById("output");
    try {
      const [out] = await run(name, [{ text: form.elements.text.value }]);
      output.textContent = out.text;
      status.textContent = `${name} ready (${threads} thread${threads === 1 ? "" : "s"})`;
    } catch (error) {
      // A sentence the model refuses (too long, no tokens) is said on the status line.
      output.textContent = "";
      status.textContent = error.message;
    }
  });
  return name;
}

window.engineCheck = { load, run, threads, readyMs: null };
window.engineCheck.ready = start().catch((error) => {
  status.textContent = `The translator could not be loaded: ${error.message}`;
  throw error;
});
