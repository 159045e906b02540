// The shipped karate-club GAT in the page (§9's graph widget). models/karate-gat/
// (attnlab.onnx_apps.export_gat_onnx) holds the graph, features (N, F) and mask (N, N) →
// logits (N, C), hidden_attn (H, N, N) (the first layer's coefficients) and output_attn, and
// graph.json, the club as the widget draws it. The model runs once per page (its answer does not
// depend on the member picked); gatApp(gat, req) returns, field for field, what the Python
// reference attnlab.web.lesson.s09_transformers_at_work.gat_view returns.
//
// Shape letters: N members, F features, H heads, C factions.

import { meta, modelJSON, runtime, session } from "./models.js";
import { roundTo } from "./lessonmath.js";
import { argmax, loadOnce } from "./small_models.js";

export const GAT_MODEL = "karate-gat";
const MAX_SEED = 1000000;

const loadedModels = new Map();

/**
 * The GAT of models/NAME/ and its one run over the club, loaded once per page:
 * {name, meta, graph, logits: Float32Array(N·C), attn: Float32Array(H·N·N), H, N, C}.
 * Shape: a name → the model.
 */
export function loadGAT(name = GAT_MODEL, { onProgress = () => {} } = {}) {
  return loadOnce(loadedModels, name, async () => {
    const info = await meta(name);
    const [ort, graph, sess] = await Promise.all([
      runtime(),
      modelJSON(name, info.graph),
      session(name, "model.onnx", { onProgress }),
    ]);
    const N = graph.features.length;
    const F = graph.features[0].length;
    const out = await sess.run({
      features: new ort.Tensor("float32", Float32Array.from(graph.features.flat()), [N, F]),
      mask: new ort.Tensor("bool", Uint8Array.from(graph.mask.flat()), [N, N]),
    });
    const [H] = out.hidden_attn.dims;
    return { name, meta: info, graph, logits: out.logits.data, attn: out.hidden_attn.data, H, N, C: out.logits.dims[1] };
  });
}

/**
 * gat_view: one member's attention over its neighbours (itself included) per head of the first
 * layer, and every member's predicted faction.
 * Shape: a node → neighbours' weights (H,) each, predicted (N,)
 */
export async function gatApp(gat, { node = 0 } = {}) {
  const { graph, logits, attn, H, N, C } = gat;
  if (!(Number.isInteger(node) && node >= 0 && node <= MAX_SEED)) throw new Error("the member must be a whole number from 0");
  if (node >= N) throw new Error(`node must be below ${N} (the club's members are 0–${N - 1})`);
  const weight = (h, j) => attn[(h * N + node) * N + j];
  const neighbours = [];
  for (let j = 0; j < N; j++) {
    if (!graph.mask[node][j]) continue;
    const ws = Array.from({ length: H }, (_, h) => weight(h, j));
    const mean = Math.fround(ws.reduce((a, b) => a + b, 0) / H);
    neighbours.push({ node: j, weights: ws.map((w) => roundTo(w, 5)), mean: roundTo(mean, 5) });
  }
  return {
    model: gat.name,
    node,
    n_nodes: N,
    edges: graph.edges,
    positions: graph.positions,
    labelled: graph.labelled,
    truth: graph.truth,
    predicted: Array.from({ length: N }, (_, i) => argmax(logits.subarray(i * C, (i + 1) * C))),
    class_names: graph.class_names,
    n_heads: H,
    neighbours,
  };
}
