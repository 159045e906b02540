// §6 Positional encoding.
// word-order (computed in the page: lessonmath.js's wordOrder): the same words in two orders through
//   one self-attention, without positions, with sinusoidal positions, and without positions but
//   with a causal mask; state a, b.
// pe-table (computed in the page: lessonmath.js's positions): the sinusoid table and how alike the
//   positions are; state len, dm, p.
// rope-scores (computed in the page: lessonmath.js's ropeScores): one query and one key placed at
//   every pair of positions with rotary position embedding; state rseed (which q and k).
// The page's numbers have Python references in attnlab/web/lesson/s06_positional_encoding.py.
(function () {
  "use strict";
  const { el, fmt, debounce } = window.Attn;
  const NS = "http://www.w3.org/2000/svg";
  // The lesson's arithmetic (an ES module), resolved against this script's address.
  const lessonMath = import("../../engine/lessonmath.js");
  const { clampInt, panes, loader, slider, memo } = window.Lesson;

  function svgNode(tag, attrs, text) {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) n.setAttribute(k, v);
    if (text !== undefined) n.textContent = text;
    return n;
  }

  // A heatmap (blue negative, white 0, red positive; |v| ≥ limit full colour). Each cell keeps its
  // value in data-v, its row and column in data-r and data-c.
  function heat(rows, opts) {
    const cols = rows[0].length;
    const cell = opts.cell || Math.max(3, Math.min(22, Math.floor(opts.width / cols)));
    const labels = cell >= 12;
    const sc = window.Heatmap.scene({
      matrix: rows, cell,
      rowLabels: labels ? rows.map((_, i) => String(i)) : [],
      colLabels: labels && opts.colLabels ? opts.colLabels : [],
      fill: opts.fill || ((v) => window.Charts.css(window.Charts.diverging(v, opts.limit || 1))),
      stroke: opts.highlight === undefined ? null : (r) => (r === opts.highlight ? "#f0a400" : null),
      key: false, // the figure's own colour key (colourKey) sits beside it
    });
    return window.Charts.picture(sc, opts.id, opts.label);
  }

  // The colour key of a heatmap: the diverging ramp from -limit to +limit with three numbers.
  function colourKey(limit, label, id) {
    const steps = 21, w = 10, left = 14, W = left * 2 + steps * w, H = 36;
    const svg = svgNode("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label, class: "pe-key colour-key", id });
    for (let i = 0; i < steps; i++) {
      const v = -limit + (2 * limit * i) / (steps - 1);
      svg.append(svgNode("rect", { x: left + i * w, y: 2, width: w, height: 12, fill: window.Charts.css(window.Charts.diverging(v, limit)) }));
    }
    svg.append(svgNode("rect", { x: left, y: 2, width: steps * w, height: 12, fill: "none", stroke: "#5f6b7a", "stroke-width": 0.5 }));
    const ticks = [[-limit, left, "start"], [0, left + (steps * w) / 2, "middle"], [limit, left + steps * w, "end"]];
    for (const [v, x, anchor] of ticks) {
      svg.append(svgNode("text", { x, y: 29, "text-anchor": anchor, "font-size": 12, fill: "#1f2933" }, v === 0 ? "0" : window.Charts.num(v, 2)));
    }
    return svg;
  }

  // A figure: a title above, the picture and its colour key, then what to read in it.
  function figure(id, title, picture, key, caption) {
    return el("figure", { class: "pe-figure", id },
      el("figcaption", { class: "pe-title", text: title }),
      el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": title }, picture),
      key ? el("div", { class: "pe-key-row" }, el("span", { class: "note", text: key.text }), key.node) : null,
      caption ? el("p", { class: "note", text: caption }) : null);
  }

  // Vertical bars around zero for values in [-1, 1], positions under them.
  function signedBars(values, highlight, label, idPrefix) {
    const bw = Math.max(3, Math.min(16, Math.floor(480 / values.length))), top = 8, mid = 64, H = 150;
    const W = values.length * bw + 44;
    const svg = svgNode("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label });
    const y = (v) => mid - v * (mid - top);
    for (const v of [1, 0, -1]) {
      svg.append(svgNode("line", { x1: 34, x2: W, y1: y(v), y2: y(v), stroke: v ? "#e3e8ef" : "#5f6b7a" }));
      svg.append(svgNode("text", { x: 30, y: y(v) + 4, "text-anchor": "end", "font-size": 12, fill: "#1f2933" }, String(v)));
    }
    // Position labels far enough apart to read: a label is about 7.5 px a digit at 12 px, and the
    // highlighted position's label always shows, so its neighbours within a step give way to it.
    const every = Math.max(1, Math.ceil((String(values.length - 1).length * 7.5 + 6) / bw));
    const labelled = (i) => i === highlight || (i % every === 0 && !(highlight >= 0 && i !== highlight && Math.abs(i - highlight) < every));
    values.forEach((v, i) => {
      svg.append(svgNode("rect", {
        id: idPrefix + i, x: 36 + i * bw, y: Math.min(y(v), mid), width: bw - 1, height: Math.abs(y(v) - mid),
        fill: i === highlight ? "#b35900" : "#2456a6", "data-value": v,
      }));
      if (labelled(i)) {
        svg.append(svgNode("text", { x: 36 + i * bw + (bw - 1) / 2, y: H - 4, "text-anchor": "middle", "font-size": 12, fill: i === highlight ? "#8a4500" : "#1f2933" }, String(i)));
      }
    });
    return svg;
  }

  // ---------------------------------------------------------------------------------------------
  // The sinusoid table and how alike the positions are.
  // ---------------------------------------------------------------------------------------------

  function mountTable(root, ctx) {
    const { s } = ctx;
    const state = {
      length: clampInt(ctx.param("len", "16"), 2, 64, 16),
      dModel: 2 * clampInt(Number(ctx.param("dm", "32")) / 2, 2, 64, 16),
      position: clampInt(ctx.param("p", "3"), 0, 63, 3),
    };
    state.position = Math.min(state.position, state.length - 1);
    let shown = null;
    const controls = el("div", { class: "widget-controls inline" });
    const panesOf = panes("pe", false);
    const out = panesOf.out;

    function buildControls() {
      controls.replaceChildren(
        slider(state, "pe-len", "length", 2, 64, 1, s("len_label"), () => {
          const p = root.querySelector("#pe-pos");
          p.max = String(state.length - 1);
          if (state.position > state.length - 1) { state.position = state.length - 1; p.value = String(state.position); root.querySelector("#pe-pos-out").textContent = p.value; }
          changed();
        }),
        slider(state, "pe-dm", "dModel", 4, 128, 4, s("dm_label"), changed),
        slider(state, "pe-pos", "position", 0, state.length - 1, 1, s("pos_label"), () => { remember(); draw(); }));
    }

    function remember() {
      ctx.setParams({ len: state.length, dm: state.dModel, p: state.position });
    }

    const send = debounce(loader(panesOf, {
      request: () => ({ length: state.length, d_model: state.dModel }),
      fetch: async (req) => (await lessonMath).positions(req),
      done: (res) => { shown = res; draw(); },
    }), 60);

    function changed() {
      remember();
      send();
    }

    function draw() {
      const r = shown;
      if (!r) return;
      const p = Math.min(state.position, r.length - 1);
      const vars = { t: r.length, d: r.d_model, p };
      // The similarities of sinusoidal positions are mostly well above 0: on a -1…1 scale the map
      // would be one colour. It is coloured from its own smallest value (rounded down to 0.1) to 1,
      // and its key says so with the numbers.
      const lo = Math.min(0.9, Math.floor(10 * Math.min(...r.similarity.flat())) / 10);
      const simFill = (v) => window.Charts.css(window.Charts.sequential(Math.max(0, (v - lo) / (1 - lo))));
      const simKey = window.Figure.keySVG({ title: "", lo, hi: 1, fill: simFill });
      simKey.id = "pe-key-sim";
      simKey.setAttribute("aria-label", s("key_sim"));
      out.replaceChildren(
        figure("pe-fig-table", s("table_title", vars),
          heat(r.table, { id: "pe-table", width: 560, highlight: p, label: s("table_title", vars) }),
          { text: s("key_label"), node: colourKey(1, s("key_table"), "pe-key-table") },
          s("table_caption", vars)),
        el("div", { class: "pair" },
          figure("pe-fig-sim", s("sim_title"),
            heat(r.similarity, { id: "pe-sim", width: 300, highlight: p, label: s("sim_title"), fill: simFill }),
            { text: s("key_label"), node: simKey },
            s("sim_caption", vars)),
          figure("pe-fig-row", s("sim_row", vars),
            signedBars(r.similarity[p], p, s("sim_row", vars), "pe-simrow-"), null, s("sim_row_caption", vars))),
        memo(el("p", { text: s("memo_table") })));
    }

    root.replaceChildren(controls, panesOf.error, out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    changed();
  }

  // ---------------------------------------------------------------------------------------------
  // Rotary position embedding: the same q and k at every pair of positions.
  // ---------------------------------------------------------------------------------------------

  function mountRope(root, ctx) {
    const { s } = ctx;
    const state = { seed: clampInt(ctx.param("rseed", "0"), 0, 1000000, 0) };
    let shown = null;
    const panesOf = panes("rope", false);
    const out = panesOf.out;
    const controls = el("div", { class: "widget-controls inline" });

    function buildControls() {
      const redraw = el("button", { type: "button", class: "plain", id: "rope-redraw", text: s("rope_redraw") });
      redraw.addEventListener("click", () => { state.seed += 1; changed(); });
      const reset = el("button", { type: "button", class: "plain", id: "rope-reset", text: s("rope_reset"), disabled: state.seed === 0 });
      reset.addEventListener("click", () => { state.seed = 0; changed(); });
      controls.replaceChildren(el("div", { class: "row" }, redraw, reset,
        el("span", { class: "note", id: "rope-seed", text: s("rope_pair", { n: state.seed + 1 }) })));
    }

    const send = debounce(loader(panesOf, {
      request: () => ({ seed: state.seed }),
      fetch: async (req) => (await lessonMath).ropeScores(req),
      done: (res) => { shown = res; draw(); },
    }), 60);

    function changed() {
      ctx.setParams({ rseed: state.seed || null });
      window.Lesson.keepFocus(root, buildControls);
      send();
    }

    function draw() {
      const r = shown;
      if (!r) return;
      const limit = Math.max(1e-9, ...r.scores.flat().map(Math.abs));
      const vlimit = Math.max(1e-9, ...r.q.map(Math.abs), ...r.k.map(Math.abs));
      const positions = r.scores.map((_, i) => String(i));
      const vectors = window.Charts.matrix({
        rows: [r.q, r.k], rowLabels: ["q", "k"], colLabels: r.q.map((_, i) => String(i + 1)), digits: 2, idPrefix: "rope-qk",
        colour: (v) => window.Charts.diverging(v, vlimit), caption: s("rope_vectors", { d: r.d_model }),
      });
      const diagonal = r.scores[0][0];
      out.replaceChildren(
        vectors,
        figure("rope-fig", s("rope_title"),
          heat(r.scores, { id: "rope-map", cell: 24, limit, colLabels: positions, label: s("rope_title") }),
          { text: s("key_label"), node: colourKey(limit, s("key_rope", { v: fmt(limit, 2) }), "rope-key") },
          s("rope_caption", { last: r.length - 1 })),
        el("p", { class: "note", id: "rope-plain" }, s("rope_plain") + " ",
          el("span", { class: "mono", id: "rope-diagonal", "data-value": diagonal, text: fmt(diagonal, 3) }), " = ",
          el("span", { class: "mono", id: "rope-plain-value", "data-value": r.plain, text: fmt(r.plain, 3) })),
        memo(el("p", { text: s("memo_rope") })));
    }

    root.replaceChildren(controls, panesOf.error, out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    changed();
  }

  // ---------------------------------------------------------------------------------------------
  // 「猫が犬を追う」 and 「犬が猫を追う」.
  // ---------------------------------------------------------------------------------------------

  function mountWordOrder(root, ctx) {
    const { s } = ctx;
    const state = { a: ctx.param("a", s("default_a")), b: ctx.param("b", s("default_b")) };
    let shown = null;
    const p = panes("wo", false);
    const out = p.out;
    const controls = el("div", { class: "widget-controls" });

    function buildControls() {
      const a = el("input", { type: "text", id: "wo-a", value: state.a, class: "wide", "aria-label": s("a_label") });
      const b = el("input", { type: "text", id: "wo-b", value: state.b, class: "wide", "aria-label": s("b_label") });
      a.addEventListener("input", () => { state.a = a.value; changed(); });
      b.addEventListener("input", () => { state.b = b.value; changed(); });
      const swap = el("button", { type: "button", class: "plain", id: "wo-swap", text: s("swap") });
      swap.addEventListener("click", () => { [state.a, state.b] = [state.b, state.a]; a.value = state.a; b.value = state.b; changed(); });
      controls.replaceChildren(
        el("label", { class: "row grow" }, el("span", { class: "name", text: s("a_label") }), a),
        el("label", { class: "row grow" }, el("span", { class: "name", text: s("b_label") }), b),
        el("div", { class: "row" }, swap, el("span", { class: "note", text: s("words_note") })));
    }

    const send = debounce(loader(p, {
      request: () => ({ a: state.a, b: state.b }),
      fetch: async (req) => (await lessonMath).wordOrder(req),
      done: (res) => { shown = res; draw(); },
    }), 150);

    function changed() {
      ctx.setParams({ a: state.a, b: state.b });
      send();
    }

    const same = (x) => x < 1e-9;
    const show = (x) => (same(x) ? fmt(0, 4) : fmt(x, 4));
    const CASES = [["without_positions", "none"], ["with_positions", "pe"], ["causal_without_positions", "causal"]];

    function verdict(x) {
      return el("span", { class: "badge " + (same(x) ? "badge-same" : "badge-differs"), text: same(x) ? s("same") : s("differs") });
    }

    function draw() {
      const r = shown;
      if (!r) return;
      const cell = (c, key, i) => {
        const x = i === null ? r[c].sentence_diff : r[c].diff[i];
        return el("td", { id: `wo-${key}-${i === null ? "sentence" : i}`, "data-value": x }, show(x), " ", verdict(x));
      };
      const rows = r.tokens_a.map((w, i) => el("tr", {},
        el("th", { scope: "row", text: w }),
        el("td", { text: String(i + 1) }),
        el("td", { text: String(r.match[i] + 1) }),
        CASES.map(([c, key]) => cell(c, key, i))));
      const sentence = el("tr", { class: "top-row" },
        el("th", { scope: "row", colspan: "3", text: s("sentence_row") }),
        CASES.map(([c, key]) => cell(c, key, null)));
      const limit = Math.max(1e-9, ...r.without_positions.out_a.flat().map(Math.abs), ...r.without_positions.out_b.flat().map(Math.abs));
      const vectors = (c, which, sentence) => window.Charts.matrix({
        rows: c[which].map((row) => row.slice(0, 8)), rowLabels: sentence, digits: 2, idPrefix: "wo-" + which,
        colour: (v) => window.Charts.diverging(v, limit), caption: s("vectors_" + which),
      });
      out.replaceChildren(
        el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": s("table_label") },
          el("table", { class: "steps", id: "wo-table" },
            el("thead", {}, el("tr", {}, ["th_word", "th_pos_a", "th_pos_b", "th_none", "th_pe", "th_causal"].map((k) => el("th", { scope: "col", text: s(k) })))),
            el("tbody", {}, rows, sentence))),
        el("p", { class: "note", text: s("table_note") }),
        el("details", {}, el("summary", { text: s("vectors_title") }),
          el("div", { class: "pair" }, vectors(r.without_positions, "out_a", r.tokens_a), vectors(r.without_positions, "out_b", r.tokens_b))),
        memo(el("p", { text: s("memo_word_order") })));
    }

    root.replaceChildren(controls, p.error, out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    changed();
  }

  window.Lesson.register("pe-table", { mount: mountTable });
  window.Lesson.register("rope-scores", { mount: mountRope });
  window.Lesson.register("word-order", { mount: mountWordOrder });
})();
