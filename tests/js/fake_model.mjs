// A deterministic stand-in for a translator, defined identically in tests/site/test_js_engine.py
// (TableModel there): the log-probabilities of the next token come from a table indexed by the
// step t and by a hash of the row's whole prefix (so that a wrong reorder shows), and the
// reported "attention" of each step is a function of that hash.
// Shape: table (T, R, V) flattened; a step of R' rows → logProbs (R' × V).
export const HASH = 1000003;

export class TableModel {
  /** @param {{table: (number|null)[], T: number, R: number, V: number}} spec null = -∞ */
  constructor({ table, T, R, V }) {
    this.table = Float32Array.from(table, (x) => (x === null ? -Infinity : x));
    Object.assign(this, { T, R, V });
    this.steps = 0; // calls of step so far: where the search stopped
  }

  start() {
    return { h: [0], t: 0 };
  }

  step(tokens, state) {
    const { T, R, V } = this;
    this.steps += 1;
    const h = tokens.map((tok, i) => (state.h[i] * 31 + tok + 1) % HASH);
    const logProbs = new Float32Array(tokens.length * V);
    h.forEach((hash, i) => {
      const at = ((state.t % T) * R + (hash % R)) * V;
      logProbs.set(this.table.subarray(at, at + V), i * V);
    });
    const attention = h.map((hash) => [(hash % 7) / 8, (hash % 5) / 8, (hash % 3) / 8]);
    return { logProbs, state: { h, t: state.t + 1 }, attention };
  }

  reorder(state, rows) {
    return { h: rows.map((r) => state.h[r]), t: state.t };
  }
}
