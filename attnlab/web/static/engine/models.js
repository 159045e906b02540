// The lesson's in-page models: where their files are, onnxruntime-web loaded once, and each model
// loaded once per page, so every widget that uses a model shares one download and one session.
//
// The files sit beside this module at the same relative URLs in the explorer and in the static
// build (attnlab.web.site): static/engine/ (this module), static/vendor/onnxruntime-web/ (the
// runtime), static/models/NAME/ (meta.json, the ONNX graphs, the tokenizers; attnlab.export_onnx).
// Nothing is fetched from outside the site.
//
// A widget (a classic script) reaches this module by a dynamic import relative to its own URL:
//   const models = import("../../engine/models.js");
//   const { translator } = await models;  const t = await translator("ja-en", { onProgress });

import { announcedSize, fetchBytes, fetchJSON, loadTranslator, timed } from "./onnx_translator.js";
import { tokenizerFromJSON } from "./tokenizer.js";

// The smallest WebAssembly module that uses a SIMD instruction (v128.const; drop): the runtime's
// one WASM build needs SIMD, so a browser that cannot validate this cannot run the models.
const SIMD_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 4, 1, 96, 0, 0, 3, 2, 1, 0, 10, 23, 1, 21, 0, 253, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 26, 11,
]);

/**
 * Whether this browser can run the in-page models: WebAssembly with SIMD (every current desktop
 * and phone browser; not very old ones, or WebAssembly switched off by a policy).
 * Shape: no arguments → a boolean.
 */
export function canRunModels() {
  try {
    return typeof WebAssembly === "object" && WebAssembly.validate(SIMD_PROBE);
  } catch {
    return false;
  }
}

/** The error a widget shows when the device cannot run a model: said plainly, in the page's words. */
export class DeviceError extends Error {
  constructor(message) {
    super(message);
    this.name = "DeviceError";
  }
}

/** The URL of models/NAME/FILE (FILE "" gives the folder, ending in "/"). Shape: strings → a URL string. */
export function modelURL(name, file = "") {
  if (!/^[A-Za-z0-9_.-]+$/.test(name) || name === "." || name === "..") throw new Error(`not a model name: ${name}`);
  return new URL(`../models/${name}/${file}`, import.meta.url).href;
}

let runtimePromise = null;

// A one-node ONNX graph (Identity of a float32 vector of one element, input "x", output "y"), made
// into a session as soon as the runtime is imported: onnxruntime-web downloads, compiles and starts
// its WebAssembly on the first InferenceSession.create, so without it that start (seconds on a
// loaded machine) waited for a model's bytes; with it, it runs while the models download
// (benchmarks/site_load.py --profile). Exported for its test (tests/js/start_graph_check.mjs).
export const START_GRAPH = new Uint8Array([
  8, 8, 58, 55, 10, 16, 10, 1, 120, 18, 1, 121, 34, 8, 73, 100, 101, 110, 116, 105, 116, 121, 18, 1, 116, 90, 15, 10,
  1, 120, 18, 10, 10, 8, 8, 1, 18, 4, 10, 2, 8, 1, 98, 15, 10, 1, 121, 18, 10, 10, 8, 8, 1, 18, 4, 10, 2, 8, 1, 66, 4,
  10, 0, 16, 17,
]);

// Start onnxruntime's WebAssembly (its download, compile and start) without waiting for it: the
// models' sessions wait for it inside onnxruntime; a failure to load the runtime is theirs to
// report, so here it is only a warning (never a console error, which the page's tests count as a
// failure): the page then just loses the early start.
function startWebAssembly(ort) {
  timed("runtime start", () => ort.InferenceSession.create(START_GRAPH, { executionProviders: ["wasm"] }))
    .then((s) => s.release())
    .catch((err) => console.warn(`attnlab: the runtime's early start failed (the models start it themselves): ${err}`));
}

// onnxruntime-web's WASM backend runs one inference at a time: two run() calls that overlap, on any
// sessions of the one runtime, fail inside it ("Cannot read properties of null"), and a lesson page
// has several widgets computing at once (§9 has six). So every run() of every session waits for
// the one before it: one queue for the page, whichever module asks.
function queueRuns(ort) {
  const proto = ort.InferenceSession.prototype;
  if (proto.attnlabQueued) return;
  const run = proto.run;
  let last = Promise.resolve();
  proto.run = function queuedRun(...args) {
    const mine = last.then(() => run.apply(this, args));
    last = mine.catch(() => {}); // a failed run does not block the ones after it
    return mine;
  };
  proto.attnlabQueued = true;
}

/**
 * onnxruntime-web's WASM build, imported once. Threads need SharedArrayBuffer, which a page has
 * only when its host sends the cross-origin isolation headers; elsewhere it runs single-threaded.
 * Shape: no arguments → the ort module.
 */
export function runtime() {
  if (!canRunModels()) return Promise.reject(new DeviceError("WebAssembly with SIMD is not available in this browser"));
  if (!runtimePromise) {
    runtimePromise = timed("runtime import", () => import("../vendor/onnxruntime-web/ort.wasm.min.mjs")).then((ort) => {
      ort.env.wasm.numThreads = globalThis.crossOriginIsolated ? Math.max(1, Math.min(4, navigator.hardwareConcurrency || 1)) : 1;
      queueRuns(ort);
      startWebAssembly(ort);
      return ort;
    });
    runtimePromise.catch(() => { runtimePromise = null; }); // a failed load may be retried
  }
  return runtimePromise;
}

const loaded = new Map(); // "kind:name[:file]" → Promise

function once(key, make) {
  if (!loaded.has(key)) {
    const promise = make();
    loaded.set(key, promise);
    promise.catch(() => loaded.delete(key)); // a failed load may be retried
  }
  return loaded.get(key);
}

// One fetch per JSON file of the page, whoever asks: meta(), modelJSON() and the translators' loading.
const jsonAt = (url) => once(`json:${url}`, () => fetchJSON(url));

/** A model's meta.json (cached). Shape: a name → an object. */
export function meta(name) {
  return jsonAt(modelURL(name, "meta.json"));
}

/** Any JSON file of a model's folder, e.g. a tokenizer (cached). Shape: names → an object. */
export function modelJSON(name, file) {
  return jsonAt(modelURL(name, file));
}

/**
 * One ONNX graph of a model's folder as an onnxruntime-web session (cached), its download reported
 * to onProgress(loadedBytes, totalBytes) (total 0 when the server gives no size). The download
 * starts at once, beside the runtime's loading; the session is made when both are there.
 * Shape: names → an InferenceSession.
 */
export function session(name, file, { onProgress = () => {} } = {}) {
  return once(`session:${name}:${file}`, async () => {
    if (!canRunModels()) return runtime(); // its DeviceError, before any download
    const ort = runtime();
    ort.catch(() => {}); // awaited below, after the download
    const url = modelURL(name, file);
    let got = 0;
    let total = null;
    const sized = announcedSize([url]).then((n) => {
      total = n;
      if (got) onProgress(got, total);
    });
    const report = (n) => {
      got += n;
      if (total !== null) onProgress(got, total);
    };
    const bytes = await timed(`fetch ${name}/${file}`, () => fetchBytes(url, report));
    await sized;
    const runtimeModule = await ort;
    return timed(`session ${name}/${file}`, () => runtimeModule.InferenceSession.create(bytes, { executionProviders: ["wasm"] }));
  });
}

/**
 * One of the lesson's translators (ja-en, en-ja, demo), loaded once per page (onnx_translator.js);
 * translate(text, {beamSize, alpha}) decodes as attnlab.decode does. Its graphs download beside
 * the runtime's loading. No warm-up search: every lesson widget that uses a translator decodes its
 * own sentence as soon as it is loaded, and that first answer is what a warm-up would have paid
 * for, so a throw-away search before it would only make the page's first answer later.
 * Shape: a name → a translator.
 */
export function translator(name, { onProgress = () => {} } = {}) {
  return once(`translator:${name}`, () => {
    if (!canRunModels()) return runtime(); // its DeviceError, before any download
    return timed(`translator ${name}`, () => loadTranslator(modelURL(name), { ort: runtime(), onProgress, warmUp: false, json: jsonAt }));
  });
}

/**
 * What a translator reads a sentence with, without its graphs: {meta, srcTokenizer} (cached;
 * meta.json and the tokenizer file are the translator's own fetches). A widget that only counts a
 * sentence's tokens (§1's parallel steps) answers with it while the graphs are still loading.
 * Shape: a name → {meta, srcTokenizer}.
 */
export function sourceTokenizer(name) {
  return once(`source:${name}`, async () => {
    const m = await meta(name);
    return { meta: m, srcTokenizer: tokenizerFromJSON(await modelJSON(name, m.src_tokenizer)) };
  });
}
