// Runs the page's greedy and beam search (attnlab/web/static/engine/decode.js) over the table
// model of tests/js/fake_model.mjs on the cases that tests/site/test_js_engine.py writes.
// Usage: node tests/js/decode_parity.mjs CASES.json > RESULTS.json
// CASES: {tables: [{table, T, R, V}], cases: [{table, kind: "greedy"|"beam", beam, alpha, maxLen, bos, eos, pad}]}
// RESULTS: [{ids, score, attention, steps (the model's step calls)} or {error}]
import { readFileSync } from "node:fs";
import { beamSearch, greedy } from "../../attnlab/web/static/engine/decode.js";
import { TableModel } from "./fake_model.mjs";

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
const models = spec.tables.map((t) => new TableModel(t));
const results = [];
for (const c of spec.cases) {
  const model = models[c.table];
  const opts = { bosId: c.bos, eosId: c.eos, padId: c.pad, maxLen: c.maxLen, beamSize: c.beam, alpha: c.alpha };
  try {
    model.steps = 0;
    const out = c.kind === "greedy" ? await greedy(model, null, opts) : await beamSearch(model, null, opts);
    results.push({ ...out, steps: model.steps });
  } catch (err) {
    results.push({ error: String(err.message) });
  }
}
process.stdout.write(JSON.stringify(results));
