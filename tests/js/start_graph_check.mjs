// models.js's START_GRAPH (the one-node ONNX graph the page makes a session of to start
// onnxruntime-web's WebAssembly early, its failure only warned about) run by onnxruntime-web's WASM
// backend in Node: a session made from its bytes as the page makes it, then run on the value given,
// reported for tests/site/test_js_engine.py to compare with what the graph computes.
// Usage: node tests/js/start_graph_check.mjs VALUE > RESULT.json
// RESULT: {bytes, inputNames, outputNames, outputs: {NAME: {type, dims, data}}}
import * as ort from "onnxruntime-web";
import { START_GRAPH } from "../../attnlab/web/static/engine/models.js";

ort.env.wasm.numThreads = 1; // the single-threaded build: what a host without cross-origin isolation gets
const value = Number(process.argv[2]);
const session = await ort.InferenceSession.create(START_GRAPH, { executionProviders: ["wasm"] });
try {
  const feeds = { [session.inputNames[0]]: new ort.Tensor("float32", Float32Array.of(value), [1]) };
  const results = await session.run(feeds);
  const outputs = {};
  for (const [name, tensor] of Object.entries(results)) {
    outputs[name] = { type: tensor.type, dims: Array.from(tensor.dims), data: Array.from(tensor.data) };
  }
  process.stdout.write(
    JSON.stringify({
      bytes: Array.from(START_GRAPH),
      inputNames: session.inputNames,
      outputNames: session.outputNames,
      outputs,
    }),
  );
} finally {
  await session.release();
}
