// §8 Variants and exercises. variants (computed in the page: lessonmath.js's variants, whose
// reference is attnlab/web/lesson/s08_variants_and_exercises.variants_view): the masks of full, local,
// sliding-window, dilated and global + window attention (sparse attention), what they cost
// against length, and, folded as 「発展」, the measured long-context times (seconds and ratios in
// separate tables) and peak memory.
// attention-map (computed in the page: lessonmath.js's attentionMap, whose reference is
// attnlab/web/lesson/s08_variants_and_exercises.attention_map_view): the heatmap exercise,
// downloadable as SVG and PNG drawn in the page from the same scene as the picture on the screen
// (heatmap.js: the same word labels and 0–1 colour key, with the variant's title). State: len, r (a window's reach), b (block size), dil, g, causal,
// variant, words, seed.
(function () {
  "use strict";
  const { el, fmt, debounce } = window.Attn;
  const NAMES = ["full", "local", "sliding_window", "dilated", "global_window"];
  // The lesson's arithmetic (an ES module), resolved against this script's address.
  const lessonMath = import("../../engine/lessonmath.js");
  // The measured long-context figures (benchmarks/long_context.py's output, shipped with the page).
  const MEASURED_URL = new URL("../data/long-context.json", document.currentScript.src).href;
  let measuredFile = null;
  function measured() {
    if (!measuredFile) {
      measuredFile = fetch(MEASURED_URL).then((r) => {
        if (!r.ok) throw new Error(`long-context.json: ${r.status}`);
        return r.json();
      });
      measuredFile.catch(() => { measuredFile = null; });
    }
    return measuredFile;
  }
  const COLOURS = { full: "#5f6b7a", local: "#1b7f5a", sliding_window: "#2456a6", dilated: "#b35900", global_window: "#7b3fa0" };
  const DASH = { full: null, local: "6 3", sliding_window: null, dilated: "2 3", global_window: "8 3 2 3" };
  const { clampInt, panes, loader, slider, memo, slidePart } = window.Lesson;
  const CASES = ["sdpa", "chunked", "sliding_window", "global_window"];
  const CASE_HEADS = { sdpa: "th_sdpa", chunked: "th_chunked", sliding_window: "th_sliding", global_window: "th_global" };

  // The settings both widgets share (the variants widget moves them).
  function params(ctx) {
    return {
      reach: clampInt(ctx.param("r", "2"), 1, 8, 2),
      block: clampInt(ctx.param("b", "4"), 1, 16, 4),
      dilation: clampInt(ctx.param("dil", "2"), 1, 4, 2),
      n_global: clampInt(ctx.param("g", "1"), 0, 4, 1),
      causal: ctx.param("causal", "0") === "1",
    };
  }

  function maskFigure(name, mask, label) {
    const cell = Math.max(6, Math.min(14, Math.floor(200 / mask.length)));
    const sc = window.Heatmap.scene({ matrix: mask, cell, fill: (v) => (v ? COLOURS[name] : "#eef1f5"),
      key: { swatches: [{ fill: COLOURS[name], label: window.Attn.t("fig_key_computed") }, { fill: "#eef1f5", label: window.Attn.t("fig_key_skipped") }] } });
    return window.Charts.picture(sc, "var-mask-" + name, label);
  }

  function mountVariants(root, ctx) {
    const { s } = ctx;
    const state = Object.assign({ length: clampInt(ctx.param("len", "16"), 4, 32, 16) }, params(ctx));
    let shown = null;
    let asked = null; // the request `shown` answers
    // The measured part's fold: closed on the basic path, open in the whole lesson (?further=1).
    let measuredOpen = new URLSearchParams(window.location.search).get("further") === "1";
    const controls = el("div", { class: "widget-controls inline" });
    const p = panes("var", false);
    const out = p.out;
    const range = (id, key, min, max, label) => slider(state, id, key, min, max, 1, label, changed);

    function buildControls() {
      const causal = el("input", { type: "checkbox", id: "var-causal", checked: state.causal });
      causal.addEventListener("change", () => { state.causal = causal.checked; changed(); });
      controls.replaceChildren(
        range("var-len", "length", 4, 32, s("len_label")),
        range("var-r", "reach", 1, 8, s("reach_label")),
        range("var-b", "block", 1, 16, s("block_label")),
        range("var-dil", "dilation", 1, 4, s("dilation_label")),
        range("var-g", "n_global", 0, 4, s("global_label")),
        el("label", { class: "row" }, causal, " ", el("span", { text: s("causal_label") })));
    }

    const send = debounce(loader(p, {
      request: () => ({ length: state.length, reach: state.reach, block: state.block, dilation: state.dilation, n_global: state.n_global, causal: state.causal }),
      fetch: async (req) => (await lessonMath).variants({ ...req, measured: await measured() }),
      done: (res, req) => { shown = res; asked = req; draw(); },
    }), 60);

    function changed() {
      ctx.setParams({ len: state.length, r: state.reach, b: state.block, dil: state.dilation, g: state.n_global, causal: state.causal ? 1 : 0 });
      send();
    }

    function draw() {
      const r = shown;
      if (!r) return;
      const figures = NAMES.map((name) => el("figure", { class: "mask-card", id: "var-card-" + name },
        maskFigure(name, r.masks[name], s("name_" + name)),
        el("figcaption", {},
          el("strong", { text: s("name_" + name) }), el("br"),
          el("span", { id: "var-count-" + name, "data-value": r.counts[name] },
            s("count_line", { n: r.counts[name], total: r.pairs, pct: (100 * r.fractions[name]).toFixed(0) })), el("br"),
          el("span", { id: "var-keys-" + name, "data-value": r.keys_per_row[name] },
            s("keys_line", { k: r.keys_per_row[name] })))));
      const series = NAMES.map((name) => ({ key: name, name: s("name_" + name), values: r.cost[name], colour: COLOURS[name], dash: DASH[name] }));
      const costTable = el("table", { class: "steps", id: "var-cost" },
        el("caption", { text: s("cost_table") }),
        el("thead", {}, el("tr", {}, el("th", { scope: "col", text: s("th_length") }), NAMES.map((n) => el("th", { scope: "col", text: s("name_" + n) })))),
        el("tbody", {}, r.cost_lengths.map((L, i) => el("tr", {}, el("th", { scope: "row", text: String(L) }),
          NAMES.map((n) => el("td", { id: `var-cost-${n}-${i}`, "data-value": r.cost[n][i], text: String(r.cost[n][i]) }))))));
      const m = r.measured_tables;
      const measuredTable = (id, caption, cell) => el("div", { class: "scroll", tabindex: "0", role: "region", "aria-labelledby": id + "-title" },
        el("table", { class: "steps", id },
          el("caption", { id: id + "-title", text: caption }),
          el("thead", {}, el("tr", {}, el("th", { scope: "col", text: s("th_length") }), CASES.map((c) => el("th", { scope: "col", text: s(CASE_HEADS[c]) })))),
          el("tbody", {}, m.lengths.map((L, i) => el("tr", {},
            el("th", { scope: "row", text: L.toLocaleString("en-US") }),
            CASES.map((c) => cell(c, i)))))));
      // SDPA's seconds as measured; the others derived from the ratios, shown to 2 significant digits.
      const secondsText = (c, v) => (c === "sdpa" ? String(v) : v.toPrecision(2));
      const seconds = measuredTable("var-seconds", s("seconds_title"),
        (c, i) => el("td", { id: `var-s-${c}-${i}`, "data-value": m.seconds[c][i], text: secondsText(c, m.seconds[c][i]) }));
      const ratios = measuredTable("var-ratios", s("ratio_title"),
        (c, i) => el("td", { id: `var-x-${c}-${i}`, "data-value": m.speedup[c][i], text: "×" + String(m.speedup[c][i]) }));
      // The measured peak memory (a separate run, the same lengths): full attention that stores
      // every score was not run where the scores alone do not fit (null).
      const mem = r.measured.memory.rows;
      const memCell = (id, v) => el("td", { id, "data-value": v === null ? "" : String(v),
        text: v === null ? s("mem_not_run") : Math.round(v).toLocaleString("en-US") });
      const memory = el("div", { class: "scroll", tabindex: "0", role: "region", "aria-labelledby": "var-memory-title" },
        el("table", { class: "steps", id: "var-memory" },
          el("caption", { id: "var-memory-title", text: s("mem_title") }),
          el("thead", {}, el("tr", {}, el("th", { scope: "col", text: s("th_length") }),
            [s("th_full_mem"), s("th_chunked"), s("th_sdpa")].map((h) => el("th", { scope: "col", text: h })))),
          el("tbody", {}, mem.map((row, i) => el("tr", {},
            el("th", { scope: "row", text: row.length.toLocaleString("en-US") }),
            memCell(`var-m-full-${i}`, row.full_mib), memCell(`var-m-chunked-${i}`, row.chunked_mib),
            memCell(`var-m-sdpa-${i}`, row.sdpa_mib))))));
      // The measurements name implementations and number formats (developer text): folded into a
      // 「発展」 part of the widget, as the page folds its own (open with ?further=1).
      const measured = el("details", { class: "further", id: "var-measured", open: measuredOpen },
        el("summary", {}, el("span", { class: "further-badge", text: window.Attn.t("ls_further") }), " ",
          el("span", { class: "further-skip", text: window.Attn.t("ls_further_skip") })),
        el("div", { class: "further-body" },
          el("p", { class: "subhead", text: s("measured_title") }),
          el("p", { class: "note", text: s("measured_setup") }),
          seconds,
          ratios,
          el("p", { class: "note", text: s("measured_note") }),
          memory,
          el("p", { class: "note", text: s("mem_note") }),
          memo(el("p", { text: s("measured_source") }))));
      measured.addEventListener("toggle", () => { measuredOpen = measured.open; });  // kept across redraws
      // Projector mode: the masks on one slide; the counted cost and, folded, the measurements on the next.
      out.replaceChildren(
        ...slidePart(1, el("div", { class: "masks-row" }, figures),
          el("p", { class: "note", id: "var-mask-note", text: s(asked.causal ? "mask_note_causal" : "mask_note", { r: asked.reach, k: 2 * asked.reach + 1, k1: asked.reach + 1, b: asked.block }) }),
          memo(el("p", { text: s("mask_source") }))),
        ...slidePart(2, el("p", { class: "subhead", text: s("cost_title") }),
          window.Charts.lines({ xs: r.cost_lengths, series, label: s("cost_title"), xLabel: s("th_length"), yLabel: window.Attn.t("fig_axis_scores") }),
          costTable),
        slidePart(2, measured));
    }

    // The sliders set the masks and the counted cost; the measured times do not depend on them.
    root.replaceChildren(slidePart("1 2", controls), p.error, out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    changed();
  }

  // ---------------------------------------------------------------------------------------------
  // The heatmap exercise.
  // ---------------------------------------------------------------------------------------------

  function mountMap(root, ctx) {
    const { s } = ctx;
    const v = ctx.param("variant", "sliding_window");
    const state = Object.assign({
      text: ctx.param("words", s("default_words")),
      variant: NAMES.includes(v) ? v : "sliding_window",
      seed: clampInt(ctx.param("seed", "0"), 0, 1000000, 0),
    }, params(ctx));
    let shown = null;
    let asked = null; // the request `shown` answers
    const controls = el("div", { class: "widget-controls inline" });
    const p = panes("map", false);
    const out = p.out;

    function request() {
      return { text: state.text, variant: state.variant, reach: state.reach, block: state.block, dilation: state.dilation, n_global: state.n_global, causal: state.causal, seed: state.seed };
    }

    // The downloaded figure's title: the variant and its settings (fig_title_VARIANT, {side} the
    // window's side; s08_variants_and_exercises.variant_title is the Python reference), then what
    // rows and columns are.
    function figureTitle(r, req) {
      const side = s(req.causal ? "fig_side_back" : "fig_side_both");
      return s("fig_title_" + r.variant, { side, reach: req.reach, block: req.block, dilation: req.dilation, n_global: req.n_global }) +
        s("map_axes");
    }

    function buildControls() {
      const text = el("input", { type: "text", id: "map-words", value: state.text, class: "wide", "aria-label": s("words_label") });
      text.addEventListener("input", () => { state.text = text.value; changed(); });
      const variant = el("select", { id: "map-variant", "aria-label": s("variant_label") },
        NAMES.map((n) => el("option", { value: n, selected: n === state.variant, text: s("name_" + n) })));
      variant.addEventListener("change", () => { state.variant = variant.value; changed(); });
      const seed = el("input", { type: "number", id: "map-seed", min: "0", max: "1000000", value: String(state.seed), "aria-label": s("seed_label") });
      seed.addEventListener("input", () => {
        const x = Number(seed.value);
        if (Number.isInteger(x) && x >= 0 && x <= 1000000) { state.seed = x; changed(); }
      });
      controls.replaceChildren(
        el("label", { class: "row grow" }, el("span", { text: s("words_label") }), text),
        el("label", { class: "row" }, el("span", { text: s("variant_label") }), variant),
        el("label", { class: "row" }, el("span", { text: s("seed_label") }), seed));
    }

    const send = debounce(loader(p, {
      request,
      fetch: async (req) => (await lessonMath).attentionMap(req),
      done: (res, req) => { shown = res; asked = req; draw(); },
    }), 120);

    function changed() {
      ctx.setParams({ words: state.text, variant: state.variant, seed: state.seed || null });
      send();
    }

    function draw() {
      const r = shown;
      if (!r) return;
      // A masked pair is hatched and has no number: its weight is not a small one, it is never computed.
      const opts = { matrix: r.weights, rowLabels: r.tokens, colLabels: r.tokens, cell: 34, values: true,
        masked: (i, j) => !r.mask[i][j], format: (x) => (x === 0 ? "0" : fmt(x, 2)) };
      const sc = window.Heatmap.scene(opts);
      const svg = window.Charts.picture(sc, "map-svg", s("map_label", { name: s("name_" + r.variant) }));
      // The download: the same scene with the title, drawn as SVG or onto a canvas (PNG).
      const saved = () => window.Heatmap.scene(Object.assign({}, opts, { title: figureTitle(r, asked) }));
      const name = `attention-${r.variant}-${ctx.lang()}`;
      const png = el("button", { type: "button", class: "plain", id: "map-png", text: s("download_png") });
      png.addEventListener("click", () => window.Heatmap.downloadPNG(saved(), name + ".png"));
      const svgLink = el("button", { type: "button", class: "plain", id: "map-svg-link", text: s("download_svg") });
      svgLink.addEventListener("click", () => window.Heatmap.downloadSVG(saved(), name + ".svg"));
      out.replaceChildren(
        el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": s("map_label", { name: s("name_" + r.variant) }) }, svg),
        el("p", { class: "row" }, png, svgLink),
        el("p", { class: "note", text: s("map_note") }),
        memo(el("p", { text: s("map_source") })));
    }

    root.replaceChildren(controls, p.error, out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    ctx.onParams(() => { Object.assign(state, params(ctx)); send(); });
    changed();
  }

  window.Lesson.register("variants", { mount: mountVariants, parts: 2 });
  window.Lesson.register("attention-map", { mount: mountMap });
})();
