// §1 What attention does. translation: one sentence through the shipped ja→en translator and the
// source–target attention of each output token. parallel-steps: the steps that must wait for the
// one before in one RNN layer and one Transformer layer, one training step of two same-width
// layers timed for a batch of each length, and the shipped encoders reading one sentence (batch 1).
// Every number is computed in the page (engine/translation_views.js: the ja→en translator through
// onnxruntime-web; the timings are the build's measurements of PyTorch, data/parallel-steps.json,
// labelled with their machine). State: text (the sentence, shared by both), tok (the
// output token, from 1), layer (from 1), head (0: the mean of the heads), batch (1, 8 or 32).
(function () {
  "use strict";
  const { el, fmt, debounce } = window.Attn;
  const { clampInt, panes, loader, select, tokenButtons } = window.Lesson;

  // The in-page views of the ja→en Transformer (imported once, relative to this script's URL).
  let viewsModule = null;
  const views = () => (viewsModule ||= import("../../engine/translation_views.js"));
  async function jaEn(p) {
    const models = await window.Lesson.inPageModels();
    return models.translator("ja-en", { onProgress: window.Lesson.modelProgress(p) });
  }

  // ---------------------------------------------------------------------------------------------
  // The translation and its source–target attention.
  // ---------------------------------------------------------------------------------------------

  function mountTranslation(root, ctx) {
    const { s } = ctx;
    const state = {
      text: ctx.param("text", s("default_sentence")),
      tok: clampInt(ctx.param("tok", "2"), 1, 200, 2) - 1,
      layer: ctx.param("layer", null) === null ? null : clampInt(ctx.param("layer", "1"), 1, 16, 1),
      head: clampInt(ctx.param("head", "0"), 0, 64, 0),
    };
    let shown = null;
    const controls = el("div", { class: "widget-controls inline" });
    const p = panes("tr");
    const out = p.out;

    function remember() {
      ctx.setParams({ text: state.text, tok: state.tok + 1, layer: state.layer, head: state.head });
    }

    function buildControls() {
      const text = el("input", { type: "text", id: "tr-text", value: state.text, class: "wide", lang: "ja", "aria-label": s("sentence_label") });
      text.addEventListener("input", () => { state.text = text.value; changed(); });
      const examples = ["example_1", "example_2", "example_3"].map((key, i) => {
        const b = el("button", { type: "button", class: "plain example", id: "tr-example-" + i, lang: "ja", text: s(key) });
        b.addEventListener("click", () => { state.text = s(key); text.value = state.text; changed(); });
        return b;
      });
      controls.replaceChildren(
        el("label", { class: "row grow" }, el("span", { text: s("sentence_label") }), text),
        el("div", { class: "row examples" }, el("span", { text: s("examples") }), examples));
    }

    // The first answer is asked for at once (the model starts loading with the page); typing is
    // debounced.
    const load = loader(p, {
      request: () => ({ text: state.text }),
      fetch: async (req) => {
        const [v, t] = await Promise.all([views(), jaEn(p)]);
        return v.translationView(t, req.text);
      },
      busy: () => s("loading"),
      done: (res) => {
        shown = res;
        if (state.layer === null || state.layer > res.n_decoder_layers) state.layer = res.n_decoder_layers;
        state.tok = Math.min(state.tok, res.tgt_tokens.length - 1);
        state.head = Math.min(state.head, res.n_heads);
        draw();
      },
    });
    const send = debounce(load, 250);

    function changed() {
      remember();
      send();
    }

    // The map the page shows: one layer, one head or their mean. (T, S)
    function chosen(r) {
      return state.head === 0 ? r.cross_mean[state.layer - 1] : r.cross[state.layer - 1][state.head - 1];
    }

    function selects(r) {
      const layer = select("tr-layer", s("layer_label"), r.n_decoder_layers, state.layer, (n) => s("layer_n", { n }), null,
        (v) => { state.layer = v; remember(); draw(); });
      const head = select("tr-head", s("head_label"), r.n_heads, state.head, (n) => s("head_n", { n }), s("head_mean"),
        (v) => { state.head = v; remember(); draw(); });
      return el("div", { class: "widget-controls inline" },
        el("label", { class: "row" }, el("span", { text: s("layer_label") }), layer),
        el("label", { class: "row" }, el("span", { text: s("head_label") }), head));
    }

    function render() {
      const r = shown;
      const rows = chosen(r);
      const word = r.tgt_tokens[state.tok];
      const which = state.head === 0 ? s("which_mean", { layer: state.layer }) : s("which_head", { layer: state.layer, head: state.head });
      const buttons = tokenButtons(s("output_tokens"), r.tgt_tokens, "tr-tok-", state.tok, (i) => { state.tok = i; remember(); draw(); });
      out.replaceChildren(
        el("p", { class: "translation-line" },
          el("span", { text: s("translation_label") + " " }),
          el("strong", { class: "mono", id: "tr-translation", lang: "en", text: r.translation })),
        el("p", { class: "note", text: s("decoding_note", { model: r.model, layers: r.n_decoder_layers, heads: r.n_heads }) }),
        selects(r),
        el("p", { class: "subhead", text: s("pick_output") }),
        buttons,
        // The word's weights and the whole map: one under the other on a screen, side by side
        // where the width allows it (a projector, paper: .side-figures in projector.css, print.css).
        el("div", { class: "side-figures" },
          el("div", {},
            el("p", { class: "subhead", id: "tr-bars-title", text: s("bars_title", { word, which }) }),
            window.Charts.bars({ values: rows[state.tok], labels: r.src_tokens, idPrefix: "tr-w-", label: s("bars_title", { word, which }), left: 120 })),
          el("div", {},
            el("p", { class: "subhead", text: s("map_title", { which }) }),
            el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": s("map_title", { which }) },
              window.Charts.map({ rows, rowLabels: r.tgt_tokens, colLabels: r.src_tokens, id: "tr-map", label: s("map_title", { which }), highlight: state.tok })))),
        el("p", { class: "note", text: s("map_note") }),
        window.Lesson.memo(el("p", { text: s("memo_translation") })));
    }

    function draw() {
      if (shown) window.Lesson.keepFocus(root, render);
    }

    root.replaceChildren(controls, p.status, p.error, out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    remember();
    load();
  }

  // ---------------------------------------------------------------------------------------------
  // RNN vs Transformer: steps that wait, and measured time.
  // ---------------------------------------------------------------------------------------------

  function mountSteps(root, ctx) {
    const { s } = ctx;
    const BATCHES = [1, 8, 32];
    const asked = Number(ctx.param("batch", "32"));
    const state = { text: ctx.param("text", s("default_sentence")), batch: BATCHES.includes(asked) ? asked : 32 };
    let shown = null;
    const p = panes("ps");
    const out = p.out;
    const controls = el("div", { class: "widget-controls inline" });
    const big = (n) => Number(n).toLocaleString(ctx.lang() === "ja" ? "ja-JP" : "en-US");

    // Counting a sentence's tokens needs the ja→en tokenizer, not the model: this widget answers
    // while the translator's graphs are still loading. The first answer is asked for at once.
    const load = loader(p, {
      request: () => ({ text: state.text, batch: state.batch }),
      fetch: async (req) => {
        const [v, models] = await Promise.all([views(), window.Lesson.inPageModels()]);
        const [t, data] = await Promise.all([models.sourceTokenizer("ja-en"), v.parallelStepsData()]);
        return v.parallelStepsView(t, data, req.text, req.batch);
      },
      busy: () => s("measuring"),
      done: (res) => { shown = res; draw(); },
    });
    const send = debounce(load, 300);

    function buildControls() {
      const batch = el("select", { id: "ps-batch", "aria-label": s("batch_label") },
        BATCHES.map((n) => el("option", { value: String(n), selected: n === state.batch, text: s("batch_n", { n }) })));
      batch.addEventListener("change", () => {
        state.batch = Number(batch.value);
        ctx.setParams({ batch: state.batch });
        send();
      });
      controls.replaceChildren(el("label", { class: "row" }, el("span", { text: s("batch_label") }), batch));
    }

    // One sentence saying which layer finished first at length index i, and by how much.
    function verdict(r, i) {
      const vars = { n: r.lengths[i], batch: r.batch, rnn: fmt(r.rnn_train_ms[i], 2), tr: fmt(r.transformer_train_ms[i], 2), x: fmt(r.speedup[i], 1) };
      return s("verdict_" + r.faster[i], vars);
    }

    function render() {
      const r = shown;
      const sh = r.shipped;
      const last = r.lengths.length - 1;
      const head = ["th_length", "th_rnn_steps", "th_tr_steps", "th_rnn_ms", "th_tr_ms", "th_ratio"].map((k) => el("th", { scope: "col", text: s(k) }));
      const body = r.lengths.map((n, i) => el("tr", {},
        el("th", { scope: "row", text: String(n) }),
        el("td", { id: "ps-rnn-" + i, "data-value": r.rnn_steps[i], text: String(r.rnn_steps[i]) }),
        el("td", { id: "ps-tr-" + i, "data-value": r.transformer_steps[i], text: String(r.transformer_steps[i]) }),
        el("td", { id: "ps-rnn-ms-" + i, "data-value": r.rnn_train_ms[i], text: fmt(r.rnn_train_ms[i], 2) }),
        el("td", { id: "ps-tr-ms-" + i, "data-value": r.transformer_train_ms[i], text: fmt(r.transformer_train_ms[i], 2) }),
        el("td", { id: "ps-ratio-" + i, "data-value": r.ratio[i], text: fmt(r.ratio[i], 2) })));
      const title = s("table_title", { batch: r.batch, d: r.rnn_layer.width });
      const table = el("table", { class: "steps", id: "ps-table" }, el("caption", { text: title }),
        el("thead", {}, el("tr", {}, head)), el("tbody", {}, body));
      const series = (a, b) => [
        { key: "rnn", name: s("rnn_name"), values: a, colour: "#b35900", dash: "6 3" },
        { key: "transformer", name: s("tr_name"), values: b, colour: "#2456a6" },
      ];
      const timeChart = s("time_chart", { batch: r.batch });
      out.replaceChildren(
        el("p", { id: "ps-sentence", text: s("sentence_line", { n: r.sentence_tokens, rnn: r.sentence_rnn_steps, tr: r.sentence_transformer_steps }) }),
        el("p", { class: "note", id: "ps-layers", text: s("layers_line", {
          d: r.rnn_layer.width, rp: big(r.rnn_layer.parameters), heads: r.transformer_layer.heads,
          ff: r.transformer_layer.ff_width, tp: big(r.transformer_layer.parameters),
        }) }),
        el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": title }, table),
        el("p", { class: "note", text: s("ratio_note") }),
        el("div", { class: "pair" },
          el("figure", {}, window.Charts.lines({ xs: r.lengths, series: series(r.rnn_steps, r.transformer_steps), label: s("steps_chart"), xLabel: s("th_length"), yLabel: window.Attn.t("fig_axis_steps") }),
            el("figcaption", { text: s("steps_chart") })),
          el("figure", {}, window.Charts.lines({ xs: r.lengths, series: series(r.rnn_train_ms, r.transformer_train_ms), label: timeChart, xLabel: s("th_length"), yLabel: window.Attn.t("fig_axis_ms") }),
            el("figcaption", { text: timeChart }))),
        el("p", { id: "ps-verdict", "data-faster": r.faster[last], text: verdict(r, last) }),
        el("p", { id: "ps-decoder", text: s("decoder_line", { n: r.sentence_tokens, rnn: r.training_rnn_steps, tr: r.training_transformer_steps, gen: r.generation_steps }) }),
        el("p", { class: "subhead", text: s("shipped_title") }),
        el("p", { id: "ps-shipped", "data-faster": sh.faster, "data-rnn-ms": sh.rnn_ms, "data-transformer-ms": sh.transformer_ms, text: s("shipped_line", {
          n: sh.tokens,
          rnn: sh.rnn.model, rl: sh.rnn.layers, rw: sh.rnn.width, rp: big(sh.rnn.parameters), rs: sh.rnn_steps,
          tr: sh.transformer.model, tl: sh.transformer.layers, tw: sh.transformer.width, tp: big(sh.transformer.parameters), ts: sh.transformer_steps,
          rms: fmt(sh.rnn_ms, 2), tms: fmt(sh.transformer_ms, 2),
        }) + " " + s("shipped_" + sh.faster, { x: fmt(sh.speedup, 1) }) }),
        window.Lesson.memo(el("p", { text: s("memo_steps", { repeats: r.repeats, threads: r.threads, srepeats: sh.repeats, machine: r.machine }) })));
    }

    function draw() {
      if (shown) window.Lesson.keepFocus(root, render);
    }

    root.replaceChildren(controls, p.status, p.error, out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    // The sentence typed in the translation widget above is the one counted here.
    ctx.onParams((values) => {
      if ("text" in values && values.text !== state.text) {
        state.text = values.text;
        send();
      }
    });
    load();
  }

  window.Lesson.register("translation", { mount: mountTranslation });
  window.Lesson.register("parallel-steps", { mount: mountSteps });
})();
