// The shipped digits ViT in the page (§9's image widget). models/digits-vit/
// (attnlab.onnx_apps.export_vit_onnx) holds the graph, images (B, 8, 8) → logits (B, K) and
// cls_attn (L, B, H, 1 + P), [CLS]'s row of every attention map, and images.json, the held-out
// test digits. vitApp(vit, req) returns, field for field, what the Python reference
// attnlab.web.lesson.s09_transformers_at_work.vit_view returns.
//
// Shape letters: L layers, H heads, P patches, K classes.

import { meta, modelJSON, runtime, session } from "./models.js";
import { roundTo } from "./lessonmath.js";
import { loadOnce, softmax32 } from "./small_models.js";

export const VIT_MODEL = "digits-vit";
const MAX_SEED = 1000000;

const loadedModels = new Map();

/**
 * The ViT of models/NAME/, loaded once per page: {name, meta, images, labels, run(image)}.
 * run(image 8 × 8 nested) → {logits: Float32Array(K), cls: Float32Array(L·H·N), L, H, N}.
 * Shape: a name → the model.
 */
export function loadViT(name = VIT_MODEL, { onProgress = () => {} } = {}) {
  return loadOnce(loadedModels, name, async () => {
    const info = await meta(name);
    const [ort, data, sess] = await Promise.all([
      runtime(),
      modelJSON(name, info.images),
      session(name, "model.onnx", { onProgress }),
    ]);
    const S = info.image_size;
    return {
      name,
      meta: info,
      images: data.images,
      labels: data.labels,
      async run(image) {
        const pixels = Float32Array.from(image.flat());
        const out = await sess.run({ images: new ort.Tensor("float32", pixels, [1, S, S]) });
        const [L, , H, N] = out.cls_attn.dims;
        return { logits: out.logits.data, cls: out.cls_attn.data, L, H, N };
      },
    };
  });
}

/**
 * vit_view: one held-out digit through the ViT, its class probabilities and [CLS]'s attention
 * over the patches (and on itself) in every layer and head.
 * Shape: an index → image (8, 8), probs (K,), cls (L, H, P), cls_self (L, H)
 */
export async function vitApp(vit, { index = 2 } = {}) {
  const n = vit.labels.length;
  if (!(Number.isInteger(index) && index >= 0 && index <= MAX_SEED)) throw new Error("the image number must be a whole number from 0");
  if (index >= n) throw new Error(`index must be below ${n} (the held-out test images)`);
  const image = vit.images[index];
  const { logits, cls, L, H, N } = await vit.run(image);
  let top = 0;
  for (const row of image) for (const x of row) if (x > top) top = x;
  top = top || 1;
  const row = (l, h) => cls.subarray((l * H + h) * N, (l * H + h + 1) * N);
  return {
    model: vit.name,
    index,
    n_images: n,
    label: vit.labels[index],
    image: image.map((r) => r.map((x) => roundTo(Math.fround(x / top), 5))),
    patch: vit.meta.patch_size,
    probs: Array.from(softmax32(logits), (p) => roundTo(p, 6)),
    n_layers: L,
    n_heads: H,
    cls: Array.from({ length: L }, (_, l) => Array.from({ length: H }, (_, h) => Array.from(row(l, h).subarray(1), (w) => roundTo(w, 5)))),
    cls_self: Array.from({ length: L }, (_, l) => Array.from({ length: H }, (_, h) => roundTo(row(l, h)[0], 5))),
  };
}
