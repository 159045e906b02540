// §2 The Seq2Seq bottleneck. bottleneck: a long list of numbers through the shipped RNN without
// attention (the one fixed-length vector its decoder reads) and with it (the alignment map).
// bleu-by-length: both RNNs' BLEU by source length on the bottleneck experiment's test pairs.
// The two RNNs run in the page (engine/rnn.js: attnlab's ONNX exports through onnxruntime-web,
// the same numbers as the Python view it replaces); the BLEU table is a measurement made when the
// site is built (static/data/bleu-by-length.json). State: ex (the long test example), nums (a
// list typed instead).
(function () {
  "use strict";
  const { el, fmt, debounce } = window.Attn;
  const NS = "http://www.w3.org/2000/svg";
  const { clampInt, fail, panes, loader, slidePart } = window.Lesson;
  let engine = null; // engine/rnn.js, imported once (relative to this script's URL)
  const rnnEngine = () => (engine = engine || import("../../engine/rnn.js"));

  // The fixed vector as a grid of coloured cells (blue negative, red positive), `perRow` a row.
  function vectorGrid(values, label) {
    const perRow = 47, cell = 10;
    const rows = Math.ceil(values.length / perRow);
    const W = perRow * cell, H = rows * cell;
    const limit = Math.max(1e-9, ...values.map(Math.abs));
    const svg = document.createElementNS(NS, "svg");
    for (const [k, v] of Object.entries({ width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label, id: "bn-vector" })) svg.setAttribute(k, v);
    values.forEach((v, i) => {
      const r = document.createElementNS(NS, "rect");
      const attrs = {
        x: (i % perRow) * cell, y: Math.floor(i / perRow) * cell, width: cell - 1, height: cell - 1, class: "cell",
        fill: window.Charts.css(window.Charts.diverging(v, limit)), "data-value": v,
      };
      for (const [k, a] of Object.entries(attrs)) r.setAttribute(k, a);
      svg.append(r);
    });
    // Its colour key: the same ramp from −limit to +limit (the lesson's figure standard).
    const key = window.Figure.keySVG({ title: window.Attn.t("fig_key_value"), lo: -limit, hi: limit,
      fill: (v) => window.Charts.css(window.Charts.diverging(v, limit)) });
    const box = document.createElement("figure");
    box.className = "bn-vector-fig";
    box.append(svg, key);
    return box;
  }

  function verdict(s, part, id) {
    if (part.exact === null) return el("span", { class: "note", id, text: s("no_reference") });
    return el("span", { id, class: "badge " + (part.exact ? "badge-same" : "badge-differs"), "data-value": part.bleu },
      s(part.exact ? "exact" : "not_exact", { bleu: fmt(part.bleu, 1) }));
  }

  function mountBottleneck(root, ctx) {
    const { s } = ctx;
    const typed = ctx.param("nums", null);
    const state = { example: clampInt(ctx.param("ex", "0"), 0, 1000000, 0), text: typed && typed.trim() ? typed : null };
    let shown = null;
    const controls = el("div", { class: "widget-controls inline" });
    const p = panes("bn");
    const out = p.out;
    let input = null;

    function remember() {
      ctx.setParams({ ex: state.text === null ? state.example : null, nums: state.text });
    }

    function buildControls() {
      input = el("textarea", { id: "bn-text", rows: "3", class: "wide", lang: "en", "aria-label": s("input_label") });
      input.value = state.text !== null ? state.text : shown ? shown.source : "";
      input.addEventListener("input", () => {
        state.text = input.value.trim() ? input.value : null;
        changed();
      });
      const next = el("button", { type: "button", class: "plain", id: "bn-next", text: s("next_example") });
      next.addEventListener("click", () => {
        state.example = state.text === null ? state.example + 1 : state.example;
        state.text = null;
        changed();
      });
      controls.replaceChildren(
        el("label", { class: "row grow" }, el("span", { text: s("input_label") }), input),
        next);
    }

    const send = debounce(loader(p, {
      request: () => (state.text === null ? { example: state.example } : { text: state.text }),
      fetch: async (req) => {
        const rnn = await rnnEngine();
        const onProgress = window.Lesson.modelProgress(p);
        const [plain, attention, test] = await Promise.all([
          rnn.rnnTranslator("rnn-plain", { onProgress }),
          rnn.rnnTranslator("rnn-attention", { onProgress }),
          rnn.dataJSON("bottleneck-test.json"),
        ]);
        p.status.textContent = s("loading");
        return rnn.bottleneck(plain, attention, test, req);
      },
      busy: () => s("loading"),
      done: (res) => {
        shown = res;
        if (state.text === null && input && document.activeElement !== input) input.value = res.source;
        draw();
      },
    }), 300);

    function changed() {
      remember();
      send();
    }

    function render() {
      const r = shown;
      const a = r.attention, p = r.plain;
      const which = r.example === null ? s("typed_input") : s("example_n", { n: r.example + 1, total: r.n_examples });
      // Projector mode: what each model outputs, then how the one with attention aligns the
      // output with the input, one slide each.
      const plainCard = el("section", { class: "model-card", id: "bn-plain", "aria-labelledby": "bn-plain-title", "data-slide-part": "1" },
        el("h3", { id: "bn-plain-title", text: s("plain_title") }),
        el("p", {}, el("span", { text: s("output_label") + " " }), el("strong", { class: "mono", id: "bn-plain-out", lang: "ja", text: p.translation })),
        verdict(s, p, "bn-plain-verdict"),
        el("p", { class: "subhead", text: s("vector_title", { d: r.hidden_size }) }),
        vectorGrid(p.fixed_vector, s("vector_title", { d: r.hidden_size })),
        el("p", { class: "note", text: s("vector_note", { words: r.words, tokens: r.src_tokens.length, d: r.hidden_size }) }));
      const attentionCard = el("section", { class: "model-card", id: "bn-attention", "aria-labelledby": "bn-att-title" },
        el("h3", { id: "bn-att-title", text: s("attention_title") }),
        slidePart(1, el("p", {}, el("span", { text: s("output_label") + " " }), el("strong", { class: "mono", id: "bn-att-out", lang: "ja", text: a.translation })),
          verdict(s, a, "bn-att-verdict")),
        slidePart(2, el("p", { class: "subhead", text: s("map_title") }),
          el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": s("map_title") },
            window.Charts.map({ rows: a.alignment, rowLabels: a.tgt_tokens, colLabels: r.src_tokens, id: "bn-map", label: s("map_title"), cell: 14 })),
          el("p", { class: "note", text: s("memory_note", { s: a.memory_shape[0], d: a.memory_shape[1] }) })));
      out.replaceChildren(
        el("p", { class: "note", id: "bn-which", text: which + " · " + s("words_line", { words: r.words, tokens: r.src_tokens.length }) }),
        el("p", {}, el("span", { text: s("reference_label") + " " }),
          el("strong", { class: "mono", id: "bn-reference", lang: "ja", text: r.reference === null ? s("no_reference") : r.reference })),
        el("div", { class: "pair bottleneck-pair" }, plainCard, attentionCard),
        slidePart(2, window.Lesson.memo(el("p", { text: s("memo_bottleneck") }))));
    }

    function draw() {
      if (shown) window.Lesson.keepFocus(root, render);
    }

    root.replaceChildren(controls, p.status, p.error, out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    changed();
  }

  // ---------------------------------------------------------------------------------------------
  // BLEU by source length.
  // ---------------------------------------------------------------------------------------------

  function mountLengths(root, ctx) {
    const { s } = ctx;
    let shown = null;
    const { status, error, out } = panes("bl");
    const COLOURS = { "rnn-plain": "#b35900", "rnn-attention": "#2456a6" };
    const name = (m) => (m === "rnn-plain" ? s("plain_name") : s("attention_name"));
    const bucket = ([lo, hi]) => (lo === hi ? String(lo) : `${lo}–${hi}`);
    const score = (v) => (v === null || v === undefined ? "–" : fmt(v, 1));

    function render() {
      const r = shown;
      const labels = r.buckets.map(bucket);
      const chart = window.Charts.groups({
        categories: labels,
        series: r.models.map((m) => ({ key: m.model, name: name(m.model), values: m.by_length, colour: COLOURS[m.model] || "#5f6b7a" })),
        max: 100, label: s("chart_title"), idPrefix: "bl-bar", xLabel: s("th_length"),
      });
      const table = el("table", { class: "steps", id: "bl-table" }, el("caption", { text: s("table_title") }),
        el("thead", {}, el("tr", {}, el("th", { scope: "col", text: s("th_length") }), el("th", { scope: "col", text: s("th_count") }),
          r.models.map((m) => el("th", { scope: "col", text: name(m.model) })))),
        el("tbody", {}, labels.map((label, i) => el("tr", {},
          el("th", { scope: "row", text: label }),
          el("td", { id: "bl-count-" + i, "data-value": r.counts[i], text: String(r.counts[i]) }),
          r.models.map((m) => el("td", { id: `bl-${m.model}-${i}`, "data-value": m.by_length[i] === null ? "" : m.by_length[i], text: score(m.by_length[i]) }))))));
      out.replaceChildren(
        el("figure", {}, chart, el("figcaption", { text: s("chart_title") })),
        el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": s("table_title") }, table),
        el("ul", { id: "bl-summary" }, r.models.map((m) => el("li", { id: "bl-line-" + m.model, "data-value": m.bleu },
          s("overall_line", { model: name(m.model), bleu: score(m.bleu), card: score(m.card_bleu), drop: score(m.drop) })))),
        el("p", { class: "note", id: "bl-data", text: s("data_note", { n: r.n }) }),
        window.Lesson.memo(el("p", { text: s("memo_data", { tokenize: r.tokenize }) })));
    }

    function draw() {
      if (shown) window.Lesson.keepFocus(root, render);
    }

    async function load() {
      status.textContent = s("computing");
      try {
        shown = await (await rnnEngine()).dataJSON("bleu-by-length.json");
        status.textContent = "";
        draw();
        out.dataset.request = "{}";
        out.dataset.seq = "1";
      } catch (err) {
        status.textContent = "";
        fail(error, err);
      }
    }

    root.replaceChildren(status, error, out);
    ctx.onLang(draw);
    load();
  }

  window.Lesson.register("bottleneck", { mount: mountBottleneck, parts: 2 });
  window.Lesson.register("bleu-by-length", { mount: mountLengths });
})();
