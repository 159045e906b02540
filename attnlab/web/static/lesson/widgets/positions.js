// §6 Positional encoding. pe-table (POST /api/lesson/positions): the sinusoid table, how alike the
// positions are, rotary scores; state len, dm, p. word-order (POST /api/lesson/word-order): the same
// words in two orders, self-attention without and with positions; state a, b.
(function () {
  "use strict";
  const { el, fmt, postJSON, debounce } = window.Attn;
  const NS = "http://www.w3.org/2000/svg";
  const { clampInt, panes, loader, slider } = window.Lesson;

  function heat(rows, opts) {
    const cols = rows[0].length;
    const cell = opts.cell || Math.max(3, Math.min(22, Math.floor(opts.width / cols)));
    const labels = cell >= 12;
    const sc = window.Heatmap.scene({
      matrix: rows, cell,
      rowLabels: labels ? rows.map((_, i) => String(i)) : [],
      colLabels: labels && opts.colLabels ? opts.colLabels : [],
      fill: (v) => window.Charts.css(window.Charts.diverging(v, opts.limit || 1)),
      stroke: opts.highlight === undefined ? null : (r) => (r === opts.highlight ? "#f0a400" : null),
    });
    return window.Charts.picture(sc, opts.id, opts.label);
  }

  // Vertical bars around zero for values in [-1, 1].
  function signedBars(values, highlight, label, idPrefix) {
    const bw = Math.max(3, Math.min(16, Math.floor(480 / values.length))), H = 120, mid = 60;
    const W = values.length * bw + 40;
    const svg = document.createElementNS(NS, "svg");
    for (const [k, v] of Object.entries({ width: W, height: H + 16, viewBox: `0 0 ${W} ${H + 16}`, role: "img", "aria-label": label })) svg.setAttribute(k, v);
    const add = (tag, attrs, text) => {
      const n = document.createElementNS(NS, tag);
      for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
      if (text !== undefined) n.textContent = text;
      svg.append(n);
    };
    add("line", { x1: 30, x2: W, y1: mid, y2: mid, stroke: "#5f6b7a" });
    add("text", { x: 26, y: 14, "text-anchor": "end", "font-size": 11, fill: "#1f2933" }, "1");
    add("text", { x: 26, y: H - 2, "text-anchor": "end", "font-size": 11, fill: "#1f2933" }, "-1");
    values.forEach((v, i) => {
      const h = Math.abs(v) * (mid - 6);
      add("rect", {
        id: idPrefix + i, x: 32 + i * bw, y: v >= 0 ? mid - h : mid, width: bw - 1, height: h,
        fill: i === highlight ? "#b35900" : "#2456a6", "data-value": v,
      });
    });
    return svg;
  }

  // ---------------------------------------------------------------------------------------------
  // The sinusoid table.
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
      fetch: (req) => postJSON("/api/lesson/positions", req),
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
      const rotaryLimit = Math.max(1e-9, ...r.rotary.flat().map(Math.abs));
      out.replaceChildren(
        el("figure", {}, el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": s("table_title", { t: r.length, d: r.d_model }) },
          heat(r.table, { id: "pe-table", width: 560, highlight: p, label: s("table_title", { t: r.length, d: r.d_model }) })),
          el("figcaption", { text: s("table_caption", { t: r.length, d: r.d_model }) })),
        el("div", { class: "pair" },
          el("figure", {}, heat(r.similarity, { id: "pe-sim", width: 300, highlight: p, label: s("sim_title") }),
            el("figcaption", { text: s("sim_caption") })),
          el("figure", {}, signedBars(r.similarity[p], p, s("sim_row", { p }), "pe-simrow-"),
            el("figcaption", { text: s("sim_row", { p }) }))),
        el("figure", {}, heat(r.rotary, { id: "pe-rotary", width: 300, limit: rotaryLimit, label: s("rotary_title") }),
          el("figcaption", { text: s("rotary_caption") })));
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
      fetch: (req) => postJSON("/api/lesson/word-order", req),
      done: (res) => { shown = res; draw(); },
    }), 150);

    function changed() {
      ctx.setParams({ a: state.a, b: state.b });
      send();
    }

    const same = (x) => x < 1e-9;
    const show = (x) => (same(x) ? fmt(0, 4) : fmt(x, 4));

    function verdict(x, id) {
      return el("span", { class: "badge " + (same(x) ? "badge-same" : "badge-differs"), id, text: same(x) ? s("same") : s("differs") });
    }

    function draw() {
      const r = shown;
      if (!r) return;
      const rows = r.tokens_a.map((w, i) => el("tr", {},
        el("th", { scope: "row", text: w }),
        el("td", { text: String(i + 1) }),
        el("td", { text: String(r.match[i] + 1) }),
        el("td", { id: "wo-none-" + i, "data-value": r.without_positions.diff[i] }, show(r.without_positions.diff[i]), " ", verdict(r.without_positions.diff[i])),
        el("td", { id: "wo-pe-" + i, "data-value": r.with_positions.diff[i] }, show(r.with_positions.diff[i]), " ", verdict(r.with_positions.diff[i]))));
      const sentence = el("tr", { class: "top-row" },
        el("th", { scope: "row", colspan: "3", text: s("sentence_row") }),
        el("td", { id: "wo-none-sentence", "data-value": r.without_positions.sentence_diff }, show(r.without_positions.sentence_diff), " ",
          verdict(r.without_positions.sentence_diff)),
        el("td", { id: "wo-pe-sentence", "data-value": r.with_positions.sentence_diff }, show(r.with_positions.sentence_diff), " ",
          verdict(r.with_positions.sentence_diff)));
      const limit = Math.max(1e-9, ...r.without_positions.out_a.flat().map(Math.abs), ...r.with_positions.out_a.flat().map(Math.abs));
      const vectors = (c, which, sentence) => window.Charts.matrix({
        rows: c[which].map((row) => row.slice(0, 8)), rowLabels: sentence, digits: 2, idPrefix: "wo-" + which,
        colour: (v) => window.Charts.diverging(v, limit), caption: s("vectors_" + which),
      });
      out.replaceChildren(
        el("table", { class: "steps", id: "wo-table" },
          el("thead", {}, el("tr", {}, ["th_word", "th_pos_a", "th_pos_b", "th_none", "th_pe"].map((k) => el("th", { scope: "col", text: s(k) })))),
          el("tbody", {}, rows, sentence)),
        el("p", { class: "note", text: s("table_note") }),
        el("details", {}, el("summary", { text: s("vectors_title") }),
          el("div", { class: "pair" }, vectors(r.without_positions, "out_a", r.tokens_a), vectors(r.without_positions, "out_b", r.tokens_b))));
    }

    root.replaceChildren(controls, p.error, out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    changed();
  }

  window.Lesson.register("pe-table", { mount: mountTable });
  window.Lesson.register("word-order", { mount: mountWordOrder });
})();
