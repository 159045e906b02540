// §3 Additive vs dot-product attention: the shipped rnn-attention translator on a list of
// numbers, run in the page (engine/rnn.js, additiveVsDot: attnlab's ONNX export through
// onnxruntime-web, the same numbers as the Python view it replaces). Left, the model's own
// additive attention; right, a scaled dot product of the same projected query and keys, computed
// for comparison. State in the address: numbers (the list typed, when not the first example),
// row (the output token whose scores are listed).
(function () {
  "use strict";
  const { el, debounce } = window.Attn;
  const { clampInt, panes, loader, tokenButtons, memo, keepFocus, slidePart } = window.Lesson;
  const num = (x, digits) => window.Charts.num(x, digits);
  const EXAMPLES = ["av_example_a", "av_example_b", "av_example_c"];

  function mount(root, ctx) {
    const { s } = ctx;
    const typed = ctx.param("numbers", null);
    const state = {
      text: typed && typed.trim() ? typed : s(EXAMPLES[0]),
      row: clampInt(ctx.param("row", "0"), 0, 1000, 0),
    };
    let shown = null;
    const controls = el("div", { class: "widget-controls inline" });
    const p = panes("av");
    let input = null;

    function remember() {
      ctx.setParams({ numbers: state.text === s(EXAMPLES[0]) ? null : state.text, row: state.row || null });
    }

    function buildControls() {
      input = el("textarea", { id: "av-text", rows: "2", class: "wide", lang: "en", "aria-label": s("av_input_label") });
      input.value = state.text;
      input.addEventListener("input", () => {
        if (!input.value.trim()) return; // an empty box asks nothing; the last answer stays
        state.text = input.value;
        state.row = 0;
        changed();
      });
      const examples = el("div", { class: "examples", role: "group", "aria-label": s("av_examples") },
        el("span", { class: "note", text: s("av_examples") }),
        EXAMPLES.map((key, i) => {
          const b = el("button", { type: "button", class: "plain", id: "av-ex-" + i, lang: "en", text: s(key) });
          b.addEventListener("click", () => {
            state.text = s(key);
            state.row = 0;
            input.value = state.text;
            changed();
          });
          return b;
        }));
      controls.replaceChildren(
        el("label", { class: "row grow" }, el("span", { text: s("av_input_label") }), input),
        examples);
    }

    const send = debounce(loader(p, {
      request: () => ({ text: state.text }),
      fetch: async (req) => {
        const rnn = await import("../../engine/rnn.js");
        const attention = await rnn.rnnTranslator("rnn-attention", { onProgress: window.Lesson.modelProgress(p) });
        p.status.textContent = s("av_loading");
        return rnn.additiveVsDot(attention, req.text);
      },
      busy: () => s("av_loading"),
      done: (res) => {
        shown = res;
        state.row = Math.min(state.row, res.tgt_tokens.length - 1);
        draw();
      },
    }), 300);

    function changed() {
      remember();
      send();
    }

    function pick(i) {
      state.row = i;
      remember();
      draw();
    }

    function rowTable(r) {
      const i = state.row;
      const add = r.additive, dot = r.dot;
      const bestAdd = add.weights[i].indexOf(Math.max(...add.weights[i]));
      const bestDot = dot.weights[i].indexOf(Math.max(...dot.weights[i]));
      const cell = (id, v, digits, bold) => el("td", { id, "data-value": v, class: bold ? "av-best" : null, text: num(v, digits) });
      return el("div", { class: "scroll", tabindex: "0", role: "region", "aria-labelledby": "av-row-title" },
        el("table", { class: "steps av-row-table", id: "av-row-table" },
          el("caption", { id: "av-row-title", text: s("av_row_title", { tok: r.tgt_tokens[i] }) }),
          el("thead", {}, el("tr", {},
            ["av_th_src", "av_th_add_score", "av_th_add_weight", "av_th_dot_score", "av_th_dot_weight"].map((k) => el("th", { scope: "col", text: s(k) })))),
          el("tbody", {}, r.src_tokens.map((tok, j) => el("tr", {},
            el("th", { scope: "row", class: "mono", lang: "en", text: tok }),
            cell("av-add-score-" + j, add.scores[i][j], 3),
            cell("av-add-weight-" + j, add.weights[i][j], 3, j === bestAdd),
            cell("av-dot-score-" + j, dot.scores[i][j], 3),
            cell("av-dot-weight-" + j, dot.weights[i][j], 3, j === bestDot))))));
    }

    function render() {
      const r = shown;
      const c = r.cost;
      const map = (which, id, title) => el("figure", { class: "av-map" },
        el("figcaption", { class: "map-title", id: id + "-title", text: title }),
        el("div", { class: "scroll", tabindex: "0", role: "region", "aria-labelledby": id + "-title" },
          window.Charts.map({ rows: r[which].weights, rowLabels: r.tgt_tokens, colLabels: r.src_tokens, id, label: title, highlight: state.row, cell: 22 })));
      // Projector mode: the two maps, then the chosen row's numbers and the cost, one slide each
      // (the row picker on both).
      p.out.replaceChildren(
        el("p", { class: "translation-line" }, el("span", { text: s("av_translation") + " " }),
          el("strong", { class: "mono", id: "av-translation", lang: "ja", text: r.translation })),
        el("div", { class: "av-rows" }, el("span", { class: "note", text: s("av_rows_label") }),
          tokenButtons(s("av_rows_label"), r.tgt_tokens, "av-row-", state.row, pick)),
        ...slidePart(1, el("div", { class: "pair av-pair" },
          map("additive", "av-map-add", s("av_map_additive")),
          map("dot", "av-map-dot", s("av_map_dot", { a: r.attn_dim }))),
        el("p", { class: "note", text: s("av_map_axes") }),
        el("p", { class: "lesson-note av-not-used", id: "av-not-used", text: s("av_not_used") }),
        el("p", { id: "av-same", "data-value": r.same_top, text: s("av_same_top", { n: r.same_top, t: r.tgt_tokens.length }) })),
        ...slidePart(2, rowTable(r),
          el("p", { id: "av-cost", "data-value": c.additive_hidden,
            text: s("av_cost", { t: c.queries, s: c.keys, a: c.attn_dim, pairs: c.dot_scores.toLocaleString("en-US"), hidden: c.additive_hidden.toLocaleString("en-US") }) }),
          memo(el("p", { text: s("source_additive") }))));
    }

    function draw() {
      if (shown) keepFocus(root, render);
    }

    root.replaceChildren(controls, p.status, p.error, p.out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    changed();
  }

  window.Lesson.register("additive-vs-dot", { mount, parts: 2 });
})();
