// §5 Multi-head attention on a tiny example (computed in the page: lessonmath.js's multihead, whose
// reference is attnlab/web/lesson/s05_multi_head.multihead_example): the steps X → Q, K, V →
// heads → per-head maps → concat → W_o with their real shapes and numbers, and tutorial 001's code
// without transpose(1, 2): what goes wrong when splitting (heads attend to heads) and when joining
// (the heads' pieces land in other words' rows). State in the address: words, dm (d_model), heads, seed.
(function () {
  "use strict";
  const { el, fmt, debounce } = window.Attn;
  const { panes, loader, memo, slidePart } = window.Lesson;
  const D_CHOICES = [4, 8, 12, 16];
  const H_CHOICES = [1, 2, 3, 4, 6, 8];
  const cache = new Map(); // one computation serves both widgets
  // The lesson's arithmetic (an ES module), resolved against this script's address.
  const lessonMath = import("../../engine/lessonmath.js");

  function fetchOnce(req) {
    const key = JSON.stringify(req);
    if (!cache.has(key)) {
      cache.set(key, lessonMath.then((M) => M.multihead(req)));
      if (cache.size > 8) cache.delete(cache.keys().next().value);
    }
    return cache.get(key).catch((err) => { cache.delete(key); throw err; });
  }

  function readState(ctx) {
    const d = Number(ctx.param("dm", "8"));
    const h = Number(ctx.param("heads", "2"));
    const dModel = D_CHOICES.includes(d) ? d : 8;
    return {
      text: ctx.param("words", ctx.s("default_words")),
      dModel,
      heads: H_CHOICES.includes(h) && dModel % h === 0 ? h : dModel % 2 === 0 ? 2 : 1,
      seed: Math.max(0, Math.min(1000000, Math.floor(Number(ctx.param("seed", "0"))) || 0)),
    };
  }

  const request = (st) => ({ text: st.text, d_model: st.dModel, n_heads: st.heads, seed: st.seed });
  const headClass = (dh) => (j) => "head-col head-" + Math.floor(j / dh);
  const diverging = (limit) => (v) => window.Charts.diverging(v, limit);
  const absMax = (rows) => Math.max(1e-9, ...rows.flat(Infinity).map(Math.abs));

  function shape(dims) {
    return "(" + dims.join(" × ") + ")";
  }

  function mat(rows, opts) {
    return window.Charts.matrix(Object.assign({ rows, colour: diverging(absMax(rows)) }, opts));
  }

  // ---------------------------------------------------------------------------------------------
  // The steps.
  // ---------------------------------------------------------------------------------------------

  function mountSteps(root, ctx) {
    const { s } = ctx;
    let state = readState(ctx);
    let shown = null;
    const controls = el("div", { class: "widget-controls inline" });
    const p = panes("mh", false);
    const out = p.out;

    function buildControls() {
      const words = el("input", { type: "text", id: "mh-words", value: state.text, "aria-label": s("words_label"), class: "wide" });
      words.addEventListener("input", () => { state.text = words.value; changed(); });
      const dm = el("select", { id: "mh-dm", "aria-label": s("dm_label") },
        D_CHOICES.map((d) => el("option", { value: String(d), selected: d === state.dModel, text: String(d) })));
      const heads = el("select", { id: "mh-heads", "aria-label": s("heads_label") },
        H_CHOICES.map((h) => el("option", { value: String(h), selected: h === state.heads, disabled: state.dModel % h !== 0, text: String(h) })));
      dm.addEventListener("change", () => {
        state.dModel = Number(dm.value);
        if (state.dModel % state.heads) state.heads = 1;
        window.Lesson.keepFocus(root, buildControls);
        changed();
      });
      heads.addEventListener("change", () => { state.heads = Number(heads.value); changed(); });
      controls.replaceChildren(
        el("label", { class: "row grow" }, el("span", { text: s("words_label") }), words),
        el("label", { class: "row" }, el("span", { text: s("dm_label") }), dm),
        el("label", { class: "row" }, el("span", { text: s("heads_label") }), heads),
        el("p", { class: "note", text: s("heads_note") }));
    }

    const send = debounce(loader(p, {
      request: () => request(state),
      fetch: fetchOnce,
      done: (res) => { shown = res; draw(); },
    }), 120);

    function changed() {
      ctx.setParams({ words: state.text, dm: state.dModel, heads: state.heads, seed: state.seed || null });
      send();
    }

    // Projector mode shows the steps over three slides (too many for one screen): part is the
    // slide (1–3) that shows a step; the controls are on every one.
    function step(part, title, note, ...content) {
      return el("section", { class: "mh-step", "data-slide-part": String(part) },
        el("p", { class: "subhead", text: title }), note ? el("p", { class: "note", text: note }) : null, content);
    }

    function draw() {
      const r = shown;
      if (!r) return;
      const dims = (k) => shape(r.shapes[k]);
      const cols = (n) => Array.from({ length: n }, (_, j) => String(j + 1));
      const hc = headClass(r.head_dim);
      const weightsOf = ["w_q", "w_k", "w_v", "w_o"].map((k) =>
        el("figure", {}, mat(r[k], { idPrefix: "mh-" + k.replace("_", ""), digits: 2, caption: s("weight_" + k) + " " + dims("W_q") })));
      const headCards = r.heads.map((h, i) => el("div", { class: "mh-head head-card-" + i, id: "mh-head-" + i },
        el("p", { class: "subhead", text: s("head_n", { h: i + 1 }) }),
        el("div", { class: "mats" },
          mat(h.q, { rowLabels: r.tokens, digits: 2, caption: "Q" + (i + 1) + " " + shape([r.tokens.length, r.head_dim]) }),
          mat(h.k, { rowLabels: r.tokens, digits: 2, caption: "K" + (i + 1) }),
          mat(h.v, { rowLabels: r.tokens, digits: 2, caption: "V" + (i + 1) })),
        window.Charts.matrix({
          rows: h.weights, rowLabels: r.tokens, colLabels: r.tokens, digits: 2, idPrefix: "mh-w-" + i,
          colour: (v) => window.Charts.sequential(v), caption: s("map_caption", { h: i + 1, t: r.tokens.length }),
        }),
        mat(h.output, { rowLabels: r.tokens, digits: 2, caption: s("head_out", { h: i + 1 }) + " " + shape([r.tokens.length, r.head_dim]) })));
      out.replaceChildren(
        step(1, s("step_x", { shape: dims("X") }), s("step_x_note"), mat(r.x, { rowLabels: r.tokens, colLabels: cols(r.d_model), idPrefix: "mh-x", digits: 1 })),
        el("details", { class: "mh-step", "data-slide-part": "1" }, el("summary", { text: s("step_w", { shape: dims("W_q") }) }), el("div", { class: "mats" }, weightsOf)),
        step(1, s("step_qkv", { shape: dims("Q") }), s("step_qkv_note", { h: r.n_heads, dh: r.head_dim }),
          el("div", { class: "mats" },
            mat(r.q, { rowLabels: r.tokens, colLabels: cols(r.d_model), colClass: hc, digits: 2, caption: "Q = X W_q", idPrefix: "mh-q" }),
            mat(r.k, { rowLabels: r.tokens, colLabels: cols(r.d_model), colClass: hc, digits: 2, caption: "K = X W_k" }),
            mat(r.v, { rowLabels: r.tokens, colLabels: cols(r.d_model), colClass: hc, digits: 2, caption: "V = X W_v" }))),
        step(2, s("step_heads", { shape: dims("Q_heads"), maps: dims("weights") }), s("step_heads_note", { dh: r.head_dim }),
          el("div", { class: "mh-heads" }, headCards)),
        step(3, s("step_concat", { shape: dims("concat") }), s("step_concat_note"),
          mat(r.concat, { rowLabels: r.tokens, colLabels: cols(r.d_model), colClass: hc, digits: 2, idPrefix: "mh-concat" })),
        step(3, s("step_out", { shape: dims("output") }), null,
          mat(r.output, { rowLabels: r.tokens, colLabels: cols(r.d_model), digits: 3, idPrefix: "mh-outm" })),
        slidePart(3, memo(el("p", { id: "mh-module", text: s("memo_steps") }))));
    }

    root.replaceChildren(controls, p.error, out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    changed();
  }

  // ---------------------------------------------------------------------------------------------
  // The missing transpose(1, 2).
  // ---------------------------------------------------------------------------------------------

  function mountNoTranspose(root, ctx) {
    const { s } = ctx;
    let state = readState(ctx);
    let shown = null;
    let word = 0;
    const p = panes("nt", false);
    const out = p.out;

    const load = loader(p, {
      request: () => request(state),
      fetch: fetchOnce,
      done: (res) => {
        shown = res;
        word = Math.min(word, res.tokens.length - 1);
        draw();
      },
    });
    const send = debounce(load, 120);

    // The pieces a merge puts side by side, one row per row of the joined matrix: "word · head",
    // marked when the piece belongs to another word than the row's.
    function piecesTable(r, pieces, id, caption) {
      const head = el("thead", {}, el("tr", {}, el("td"),
        Array.from({ length: r.n_heads }, (_, b) => el("th", { scope: "col", class: "head-" + b,
          text: s("block_n", { from: b * r.head_dim + 1, to: (b + 1) * r.head_dim }) }))));
      const body = el("tbody", {}, pieces.map((row, i) => el("tr", {},
        el("th", { scope: "row", text: s("row_n", { i: i + 1, w: r.tokens[i] }) }),
        row.map(([t, h], b) => {
          const foreign = t !== i;
          return el("td", {
            id: `${id}-${i}-${b}`, "data-word": String(t), "data-head": String(h),
            class: "nt-piece nt-piece-head-" + h + (foreign ? " nt-foreign" : ""),
            text: s("piece", { n: t + 1, w: r.tokens[t], h: h + 1 }) + (foreign ? " *" : ""),
          });
        }))));
      return el("figure", { class: "matrix-fig" }, el("figcaption", { text: caption }),
        el("table", { class: "matrix nt-pieces", id, "aria-label": caption }, head, body));
    }

    function draw() {
      const r = shown;
      if (!r) return;
      const bad = r.without_transpose;
      const T = r.tokens.length, H = r.n_heads, Dh = r.head_dim;
      const shapes = el("table", { class: "steps", id: "nt-shapes" },
        el("thead", {}, el("tr", {}, el("td"), el("th", { scope: "col", text: s("with_transpose") }), el("th", { scope: "col", text: s("without_transpose") }))),
        el("tbody", {},
          el("tr", {}, el("th", { scope: "row", text: s("shape_q") }), el("td", { text: shape(r.shapes.Q_heads) }), el("td", { text: shape(r.shapes.no_transpose_Q) })),
          el("tr", {}, el("th", { scope: "row", text: s("shape_maps") }), el("td", { text: shape(r.shapes.weights) }), el("td", { text: shape(r.shapes.no_transpose_weights) })),
          el("tr", {}, el("th", { scope: "row", text: s("shape_out") }), el("td", { text: shape(r.shapes.output) }), el("td", { text: shape(r.shapes.output) }))));
      const picker = el("select", { id: "nt-word", "aria-label": s("pick_word") },
        r.tokens.map((w, i) => el("option", { value: String(i), selected: i === word, text: (i + 1) + ". " + w })));
      picker.addEventListener("change", () => { word = Number(picker.value); window.Lesson.keepFocus(root, draw); });
      const heads = Array.from({ length: H }, (_, h) => s("head_n", { h: h + 1 }));
      const influence = (rows, prefix, caption) => window.Charts.matrix({
        rows, rowLabels: r.tokens, colLabels: r.tokens.map((w, i) => (i + 1) + ". " + w), idPrefix: prefix, caption,
        colour: (v) => (v ? [36, 86, 166] : [240, 243, 247]),
      });
      const foreign = bad.pieces.flat().filter(([t], k) => t !== Math.floor(k / H)).length;
      // Projector mode: the shapes and the split, the join, the changed word: one slide each.
      out.replaceChildren(
        ...slidePart(1, shapes,
          el("p", { class: "note", text: s("shapes_note", { t: T, h: H, dh: Dh }) }),
          el("p", { class: "subhead", text: s("split_title") }),
          el("p", { class: "note", text: s("split_note") }),
          el("div", { class: "row" }, el("label", { for: "nt-word", text: s("pick_word") }), picker),
          window.Charts.matrix({
            rows: bad.weights[word], rowLabels: heads, colLabels: heads, digits: 2, idPrefix: "nt-map",
            colour: (v) => window.Charts.sequential(v), caption: s("bad_map", { w: r.tokens[word], h: H }),
          })),
        ...slidePart(2, el("p", { class: "subhead", text: s("merge_title") }),
          el("p", { class: "note", text: s("merge_note") }),
          el("div", { class: "pair" },
            piecesTable(r, bad.pieces_correct, "nt-pieces-ok", s("pieces_ok")),
            piecesTable(r, bad.pieces, "nt-pieces-bad", s("pieces_bad"))),
          el("p", { class: "note", id: "nt-foreign", "data-value": foreign,
            text: foreign ? s("foreign_count", { n: foreign, all: T * H }) : s("foreign_none") })),
        ...slidePart(3, el("p", { class: "subhead", text: s("influence_title") }),
          el("p", { class: "note", text: s("influence_note") }),
          el("div", { class: "pair" },
            influence(bad.influence_correct, "nt-inf-ok", s("influence_ok")),
            influence(bad.influence_split, "nt-inf-split", s("influence_split")),
            influence(bad.influence_merged, "nt-inf-merged", s("influence_merged"))),
          el("p", { id: "nt-diff" }, s("final_diff") + " ",
            el("span", { class: "mono", id: "nt-diff-value", "data-value": bad.max_abs_diff, text: fmt(bad.max_abs_diff, 4) })),
          memo(el("p", { text: s("memo_no_transpose") }))));
    }

    root.replaceChildren(p.error, out);
    ctx.onLang(draw);
    ctx.onParams(() => { state = readState(ctx); send(); });
    load();
  }

  // On a projector, three slides: X to Q, K, V; the heads; concat and W_o.
  window.Lesson.register("multihead-steps", { mount: mountSteps, parts: 3 });
  window.Lesson.register("no-transpose", { mount: mountNoTranspose, parts: 3 });
})();
