// The ONNX translator adapter (attnlab/web/static/engine/onnx_translator.js) over a stand-in for
// onnxruntime-web whose "decoder" keeps each row's tokens in its self-attention cache and reads
// them back from there: decoding through the adapter must give what decoding the table model
// directly gives (tests/js/fake_model.mjs), which holds only if the cache follows the beam's
// hypotheses (gathered along axis 1) and the source side is tiled to the beam's rows. The stand-in
// also checks every input against ONNX_CONTRACT.md's names, types and shapes.
// Then the translator's text helpers on the cases tests/site/test_js_engine.py writes (compared there
// with attnlab's Python).
// Usage: node tests/js/onnx_translator_check.mjs CASES.json > RESULTS.json
import { readFileSync } from "node:fs";
import { beamSearch, greedy } from "../../attnlab/web/static/engine/decode.js";
import { OnnxTranslatorModel, cutLoops, makeTranslator, normalizeInput, outputLimit } from "../../attnlab/web/static/engine/onnx_translator.js";
import { HASH, TableModel } from "./fake_model.mjs";

class Tensor {
  constructor(type, data, dims) {
    const size = dims.reduce((a, b) => a * b, 1);
    if (data.length !== size) throw new Error(`tensor of ${data.length} numbers for dims ${dims}`);
    Object.assign(this, { type, data, dims });
  }
}
const ort = { Tensor };
const [Ld, H, Dh] = [2, 3, 4];
const meta = { n_heads: H, d_model: H * Dh, n_decoder_layers: Ld };

function expect(ok, what) {
  if (!ok) throw new Error(`contract: ${what}`);
}

// The encoder: cross_k/v of the sentence (a function of its ids), enc_attn zeros.
const encoder = {
  async run({ src_ids: src }) {
    expect(src.type === "int64" && src.dims.length === 2, "src_ids int64 (B, S)");
    const [B, S] = src.dims;
    const cross = new Float32Array(Ld * B * H * S * Dh).map((_, i) => Number(src.data[Math.floor(i / Dh) % S]) + i % Dh);
    return {
      cross_k: new Tensor("float32", cross, [Ld, B, H, S, Dh]),
      cross_v: new Tensor("float32", cross.slice(), [Ld, B, H, S, Dh]),
      enc_attn: new Tensor("float32", new Float32Array(2 * B * H * S * S), [2, B, H, S, S]),
    };
  },
};

// The decoder: appends each row's token to its cache (every layer/head/dim holds the token id) and
// answers the table model's log-probabilities for the row's whole history read from the cache.
function makeDecoder(table) {
  return {
    async run(f) {
      const [B, one] = f.tokens.dims;
      expect(f.tokens.type === "int64" && one === 1, "tokens int64 (B, 1)");
      expect(f.step.type === "int64" && f.step.dims.length === 1 && f.step.dims[0] === 1, "step int64 (1,)");
      const t = Number(f.step.data[0]);
      for (const name of ["past_k", "past_v"]) {
        expect(f[name].type === "float32" && f[name].dims.join() === [Ld, B, H, t, Dh].join(), `${name} (Ld, B, H, t, Dh)`);
      }
      const S = f.src_ids.dims[1];
      expect(f.src_ids.dims.join() === [B, S].join(), "src_ids (B, S)");
      for (const name of ["cross_k", "cross_v"]) {
        expect(f[name].dims.join() === [Ld, B, H, S, Dh].join(), `${name} (Ld, B, H, S, Dh)`);
        for (let b = 1; b < B; b++) {
          for (let j = 0; j < H * S * Dh; j++) expect(f[name].data[b * H * S * Dh + j] === f[name].data[j], `${name} rows of one sentence`);
        }
      }
      const T1 = t + 1;
      const present = new Float32Array(Ld * B * H * T1 * Dh);
      const logProbs = new Float32Array(B * table.V);
      for (let b = 0; b < B; b++) {
        const history = [];
        for (let tau = 0; tau < t; tau++) history.push(f.past_k.data[(((0 * B + b) * H) * t + tau) * Dh]);
        history.push(Number(f.tokens.data[b]));
        for (let l = 0; l < Ld; l++) {
          for (let h = 0; h < H; h++) {
            for (let tau = 0; tau < T1; tau++) {
              present.fill(history[tau], (((l * B + b) * H + h) * T1 + tau) * Dh, (((l * B + b) * H + h) * T1 + tau + 1) * Dh);
            }
          }
        }
        const hash = history.reduce((acc, tok) => (acc * 31 + tok + 1) % HASH, 0);
        const at = ((t % table.T) * table.R + (hash % table.R)) * table.V;
        logProbs.set(table.table.subarray(at, at + table.V), b * table.V);
      }
      const dims = [Ld, B, H, T1, Dh];
      return {
        log_probs: new Tensor("float32", logProbs, [B, table.V]),
        present_k: new Tensor("float32", present, dims),
        present_v: new Tensor("float32", present.slice(), dims),
        self_attn: new Tensor("float32", new Float32Array(Ld * B * H * T1).fill(1 / T1), [Ld, B, H, T1]),
        cross_attn: new Tensor("float32", new Float32Array(Ld * B * H * S).fill(1 / S), [Ld, B, H, S]),
      };
    },
  };
}

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
let compared = 0;
for (const t of spec.tables) {
  const table = new TableModel(t);
  const adapter = new OnnxTranslatorModel(ort, encoder, makeDecoder(table), meta);
  for (const maxLen of [1, 4, 12, 30]) {
    for (const beamSize of [1, 2, 3, 4]) {
      const opts = { bosId: 2, eosId: 3, padId: 0, maxLen, beamSize, alpha: 0.6 };
      const direct = beamSize === 1 ? await greedy(table, null, opts) : await beamSearch(table, null, opts);
      const viaOnnx = beamSize === 1 ? await greedy(adapter, [5, 9, 7], opts) : await beamSearch(adapter, [5, 9, 7], opts);
      const same = direct.ids.join() === viaOnnx.ids.join() && direct.score === viaOnnx.score;
      if (!same) throw new Error(`beam ${beamSize} max_len ${maxLen}: adapter ${viaOnnx.ids} (${viaOnnx.score}) != table ${direct.ids} (${direct.score})`);
      const rows = viaOnnx.attention;
      if (rows.length !== Math.min(direct.ids.length + 1, maxLen) || rows.some((r, i) => r.self.length !== Ld * H * (i + 1) || r.cross.length !== Ld * H * 3)) {
        throw new Error(`beam ${beamSize} max_len ${maxLen}: attention rows of the wrong shapes`);
      }
      compared++;
    }
  }
}
// A source longer than the model's max_len is refused before the encoder runs (which would throw).
const wordIds = { encode: (text) => text.split(" ").map((w) => w.length + 4), idToToken: String };
const noEncoder = { async run() { throw new Error("the encoder ran"); } };
const tooLong = makeTranslator(ort, noEncoder, noEncoder, { ...meta, max_len: 3, bos_id: 2, eos_id: 3, pad_id: 0 }, wordIds, wordIds);
let tooLongError = null;
try {
  await tooLong.translate("a bb ccc dddd e");
} catch (e) {
  tooLongError = e.message;
}
process.stdout.write(JSON.stringify({
  compared,
  tooLongError,
  normalize: spec.normalize.map(([text, lang, lower]) => normalizeInput(text, lang, lower)),
  cutLoops: spec.cutLoops.map((ids) => cutLoops(ids)),
  outputLimit: spec.outputLimit.map(([s, m]) => outputLimit(s, m)),
}));
