// §4 Self vs source–target attention. self-vs-cross (computed in the page: §1's translation view,
// engine/translation_views.js, over the ja→en translator in onnxruntime-web): the same
// sentence through the shipped ja→en translator, its encoder self-attention next to its
// source–target attention. pronoun (computed in the page: engine/bert.js): where MiniLM's "it" looks, in every
// layer and head. State: text, el (encoder layer), dl (decoder layer), head (0: mean) for the
// translator; en, pr, to (the word compared, a token position), pl, ph for MiniLM.
(function () {
  "use strict";
  const { el, fmt, debounce } = window.Attn;
  const { clampInt, panes, loader, select, tokenButtons, memo } = window.Lesson;

  function mountSelfCross(root, ctx) {
    const { s } = ctx;
    const state = {
      text: ctx.param("text", s("default_sentence")),
      encLayer: ctx.param("el", null) === null ? null : clampInt(ctx.param("el", "1"), 1, 16, 1),
      decLayer: ctx.param("dl", null) === null ? null : clampInt(ctx.param("dl", "1"), 1, 16, 1),
      head: clampInt(ctx.param("head", "0"), 0, 64, 0),
    };
    let shown = null;
    const controls = el("div", { class: "widget-controls inline" });
    const p = panes("sc");
    const out = p.out;
    const technical = memo(el("p", { text: s("source_translation") })); // made once: stays open across redraws

    function remember() {
      ctx.setParams({ text: state.text, el: state.encLayer, dl: state.decLayer, head: state.head });
    }

    function buildControls() {
      const text = el("input", { type: "text", id: "sc-text", value: state.text, class: "wide", lang: "ja", "aria-label": s("sentence_label") });
      text.addEventListener("input", () => { state.text = text.value; remember(); send(); });
      controls.replaceChildren(el("label", { class: "row grow" }, el("span", { text: s("sentence_label") }), text));
    }

    const send = debounce(loader(p, {
      request: () => ({ text: state.text }),
      fetch: async (req) => {
        const [views, models] = await Promise.all([import("../../engine/translation_views.js"), window.Lesson.inPageModels()]);
        return views.translationView(await models.translator("ja-en", { onProgress: window.Lesson.modelProgress(p) }), req.text);
      },
      busy: () => s("loading"),
      done: (res) => {
        shown = res;
        if (state.encLayer === null || state.encLayer > res.n_encoder_layers) state.encLayer = res.n_encoder_layers;
        if (state.decLayer === null || state.decLayer > res.n_decoder_layers) state.decLayer = res.n_decoder_layers;
        state.head = Math.min(state.head, res.n_heads);
        remember();
        draw();
      },
    }), 250);

    function render() {
      const r = shown;
      const pick = (all, mean, layer) => (state.head === 0 ? mean[layer - 1] : all[layer - 1][state.head - 1]);
      const selfRows = pick(r.encoder_self, r.encoder_self_mean, state.encLayer);
      const crossRows = pick(r.cross, r.cross_mean, state.decLayer);
      const headText = state.head === 0 ? s("head_mean") : s("head_n", { n: state.head });
      const encSel = select("sc-enc-layer", s("enc_layer_label"), r.n_encoder_layers, state.encLayer, (n) => s("layer_n", { n }), null,
        (v) => { state.encLayer = v; remember(); draw(); });
      const decSel = select("sc-dec-layer", s("dec_layer_label"), r.n_decoder_layers, state.decLayer, (n) => s("layer_n", { n }), null,
        (v) => { state.decLayer = v; remember(); draw(); });
      const headSel = select("sc-head", s("head_label"), r.n_heads, state.head, (n) => s("head_n", { n }), s("head_mean"),
        (v) => { state.head = v; remember(); draw(); });
      const selfTitle = s("self_title", { layer: state.encLayer, head: headText });
      const crossTitle = s("cross_title", { layer: state.decLayer, head: headText });
      out.replaceChildren(
        el("p", { class: "translation-line" }, el("span", { text: s("translation_label") + " " }),
          el("strong", { class: "mono", id: "sc-translation", lang: "en", text: r.translation })),
        el("div", { class: "widget-controls inline" },
          el("label", { class: "row" }, el("span", { text: s("enc_layer_label") }), encSel),
          el("label", { class: "row" }, el("span", { text: s("dec_layer_label") }), decSel),
          el("label", { class: "row" }, el("span", { text: s("head_label") }), headSel)),
        el("div", { class: "pair side-by-side" },
          el("figure", { id: "sc-self-fig" },
            el("figcaption", { class: "map-title", text: selfTitle }),
            el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": selfTitle },
              window.Charts.map({ rows: selfRows, rowLabels: r.src_tokens, colLabels: r.src_tokens, id: "sc-self", label: selfTitle })),
            el("p", { class: "note", text: s("self_note", { s: r.src_tokens.length }) })),
          el("figure", { id: "sc-cross-fig" },
            el("figcaption", { class: "map-title", text: crossTitle }),
            el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": crossTitle },
              window.Charts.map({ rows: crossRows, rowLabels: r.tgt_tokens, colLabels: r.src_tokens, id: "sc-cross", label: crossTitle })),
            el("p", { class: "note", text: s("cross_note", { t: r.tgt_tokens.length, s: r.src_tokens.length }) }))));
    }

    function draw() {
      if (shown) window.Lesson.keepFocus(root, render);
    }

    root.replaceChildren(controls, p.status, p.error, out, technical);
    buildControls();
    ctx.onLang(() => { buildControls(); technical.querySelector("p").textContent = s("source_translation"); draw(); });
    remember();
    send();
  }

  // ---------------------------------------------------------------------------------------------
  // MiniLM and the pronoun.
  // ---------------------------------------------------------------------------------------------

  function mountPronoun(root, ctx) {
    const { s } = ctx;
    const state = {
      text: ctx.param("en", s("default_english")),
      pronoun: ctx.param("pr", "it"),
      to: ctx.param("to", null) === null ? null : clampInt(ctx.param("to", "0"), 0, 39, 0),
      layer: ctx.param("pl", null) === null ? null : clampInt(ctx.param("pl", "1"), 1, 64, 1),
      head: ctx.param("ph", null) === null ? null : clampInt(ctx.param("ph", "0"), 0, 64, 0),
    };
    let shown = null;
    const controls = el("div", { class: "widget-controls inline" });
    const p = panes("pr");
    const out = p.out;
    const provenance = el("p");
    const technical = memo(provenance);

    function remember() {
      ctx.setParams({ en: state.text, pr: state.pronoun, to: state.to, pl: state.layer, ph: state.head });
    }

    function buildControls() {
      const text = el("input", { type: "text", id: "pr-text", value: state.text, class: "wide", lang: "en", list: "pr-sentences", "aria-label": s("english_label") });
      const sentences = el("datalist", { id: "pr-sentences" });
      import("../../engine/bert.js").then((b) => b.minilmSentences()).then((ss) => sentences.replaceChildren(...ss.map((v) => el("option", { value: v })))).catch(() => {});
      text.addEventListener("input", () => { state.text = text.value; state.to = null; changed(); });
      const pronoun = el("input", { type: "text", id: "pr-pronoun", value: state.pronoun, size: "8", lang: "en", "aria-label": s("pronoun_label") });
      pronoun.addEventListener("input", () => { state.pronoun = pronoun.value; changed(); });
      controls.replaceChildren(
        el("label", { class: "row grow" }, el("span", { text: s("english_label") }), text, sentences),
        el("label", { class: "row" }, el("span", { text: s("pronoun_label") }), pronoun));
    }

    const send = debounce(loader(p, {
      request: () => ({ text: state.text, pronoun: state.pronoun }),
      // In the page: engine/bert.js answers from MiniLM's views (pronoun_view's response).
      fetch: async (req) => (await import("../../engine/bert.js")).pronounView(req, { onProgress: window.Lesson.modelProgress(p) }),
      busy: () => s("loading"),
      done: (res) => {
        shown = res;
        if (state.to === null || state.to >= res.tokens.length) {
          // First look: compare with "animal" when the sentence has it, else the most-attended word.
          const animal = res.tokens.indexOf("animal");
          state.to = animal >= 0 ? animal : Math.min(1, res.tokens.length - 1);
        }
        if (state.layer === null || state.layer > res.n_layers || state.head === null || state.head > res.n_heads) {
          const best = res.strongest[state.to];
          state.layer = best.layer + 1;
          state.head = best.head + 1;
        }
        remember();
        draw();
      },
    }), 300);

    function changed() {
      remember();
      send();
    }

    function render() {
      const r = shown;
      const word = r.tokens[state.to];
      const it = r.tokens[r.pronoun];
      const buttons = tokenButtons(s("compare_label"), r.tokens, "pr-tok-", state.to, (i) => { state.to = i; remember(); draw(); }, r.pronoun);
      const grid = r.weights.map((layer) => layer.map((row) => row[state.to]));  // (L, H): weight to the word
      const table = window.Charts.matrix({
        rows: grid,
        rowLabels: grid.map((_, l) => s("layer_n", { n: l + 1 })),
        colLabels: grid[0].map((_, h) => String(h + 1)),
        digits: 2, idPrefix: "pr-grid", colour: (v) => window.Charts.sequential(v),
        caption: s("grid_title", { it, word }),
      });
      const layerSel = select("pr-layer", s("layer_label"), r.n_layers, state.layer, (n) => s("layer_n", { n }), null,
        (v) => { state.layer = v; remember(); draw(); });
      const headSel = select("pr-head", s("head_label"), r.n_heads, state.head, (n) => s("head_n", { n }), s("head_mean"),
        (v) => { state.head = v; remember(); draw(); });
      const row = state.head === 0 ? r.mean[state.layer - 1] : r.weights[state.layer - 1][state.head - 1];
      const which = state.head === 0 ? s("which_mean", { layer: state.layer }) : s("which_head", { layer: state.layer, head: state.head });
      const best = r.strongest[state.to];
      out.replaceChildren(
        el("p", { class: "subhead", text: s("compare_label") }),
        buttons,
        el("p", { id: "pr-strongest", "data-value": best.weight, text: s("strongest_line", { it, word, layer: best.layer + 1, head: best.head + 1, w: fmt(best.weight, 2) }) }),
        // The layers × heads table and one head's weights: side by side where the width allows
        // it (a projector: .side-figures in projector.css).
        el("div", { class: "side-figures" },
          el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": s("grid_title", { it, word }) }, table),
          el("div", {},
            el("div", { class: "widget-controls inline" },
              el("label", { class: "row" }, el("span", { text: s("layer_label") }), layerSel),
              el("label", { class: "row" }, el("span", { text: s("head_label") }), headSel)),
            el("p", { class: "subhead", text: s("row_title", { it, which }) }),
            window.Charts.bars({ values: row, labels: r.tokens, idPrefix: "pr-w-", label: s("row_title", { it, which }), left: 100 }))),
        el("p", { class: "note", text: s("special_tokens") }));
      provenance.textContent = s("source_pronoun", { model: r.model });
    }

    function draw() {
      if (shown) window.Lesson.keepFocus(root, render);
    }

    root.replaceChildren(controls, p.status, p.error, out, technical);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    changed();
  }

  window.Lesson.register("self-vs-cross", { mount: mountSelfCross });
  window.Lesson.register("pronoun", { mount: mountPronoun });
})();
