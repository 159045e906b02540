// §7 token-walk (computed in the page: engine/translation_views.js's tokenWalkView, the ja→en
// translator through onnxruntime-web): one sentence through the whole shipped ja→en
// Transformer, step by step, with the model's real numbers: (1) the source pieces, embedding +
// position; (2) the encoder's self-attention; (3) the feed-forward network; (4) the decoder's
// causal self-attention; (5) source–target attention onto the source; (6) the output
// probabilities and the chosen token. Next/back buttons; the step's part lit in the model map
// (pictures.js). Weights and probabilities are drawn on a 0–1 scale; masked positions hatched.
// The widget's words are §7's front-matter strings (tw_…).
// State in the address: walk (the sentence), walk_step (1–6), walk_out (the output position
// followed), walk_src (the source piece followed; -1: the one that output word looks at most).
(function () {
  "use strict";
  const { el, debounce } = window.Attn;
  const { clampInt, panes, loader, memo } = window.Lesson;

  const STEP_PARTS = { 1: ["src_embed"], 2: ["enc_self"], 3: ["enc_ffn"], 4: ["tgt_embed", "dec_self"], 5: ["memory", "dec_cross"], 6: ["output"] };
  const fmt = (x, d) => (Number.isFinite(x) ? x.toFixed(d) : "—");

  function mount(root, ctx) {
    const lang = () => (ctx.lang() === "ja" ? "ja" : "en");
    const s = ctx.s; // the strings: §7's front matter (tw_…)
    const state = {
      text: ctx.param("walk", s("tw_default_sentence")),
      step: clampInt(ctx.param("walk_step", "1"), 1, 6, 1),
      out: clampInt(ctx.param("walk_out", "2"), 0, 200, 2),
      src: clampInt(ctx.param("walk_src", "-1"), -1, 200, -1),
    };
    let res = null;
    const p = panes("tw");
    const controls = el("div", { class: "widget-controls inline" });
    const steps = el("ol", { class: "tw-steps", "aria-label": "" });
    const panel = el("section", { class: "tw-panel", id: "tw-panel", "aria-live": "polite" });
    const nav = el("div", { class: "tw-nav" });
    const mapBox = el("div", { class: "tw-map", id: "tw-map" });
    const mapTitle = el("p", { class: "model-map-title" });
    const provenance = el("p");

    function remember() {
      ctx.setParams({ walk: state.text, walk_step: state.step, walk_out: state.out, walk_src: state.src });
    }

    function buildControls() {
      const input = el("input", { type: "text", id: "tw-text", value: state.text, class: "wide", lang: "ja", "aria-label": s("tw_sentence_label") });
      input.addEventListener("input", () => { state.text = input.value; state.src = -1; remember(); send(); });
      controls.replaceChildren(el("label", { class: "row grow" }, el("span", { text: s("tw_sentence_label") }), input));
    }

    // The first answer is asked for at once (the model starts loading with the page); typing is
    // debounced.
    const load = loader(p, {
      request: () => ({ text: state.text }),
      fetch: async (req) => {
        const [views, models] = await Promise.all([import("../../engine/translation_views.js"), window.Lesson.inPageModels()]);
        return views.tokenWalkView(await models.translator("ja-en", { onProgress: window.Lesson.modelProgress(p) }), req.text);
      },
      busy: () => s("tw_loading"),
      done: (r) => { res = r; draw(); },
    });
    const send = debounce(load, 250);

    const argmax = (row) => row.reduce((best, v, i) => (v > row[best] ? i : best), 0);
    const outPos = () => Math.min(state.out, res.tgt_tokens.length - 1);
    const crossRow = () => res.cross[res.cross.length - 1][outPos()];
    const srcPos = () => (state.src >= 0 && state.src < res.src_tokens.length ? state.src : argmax(crossRow()));

    // One row of a 0–1 bar chart: label, track, value (data-value: the number from the API).
    function barRow(id, label, value, opts) {
      const o = opts || {};
      const row = el("div", { class: "tw-row" + (o.masked ? " tw-masked" : "") + (o.top ? " tw-top" : "") + (o.query ? " tw-q" : ""), id, "data-value": o.masked ? "" : String(value) },
        el("span", { class: "tw-tok", lang: o.lang || null, text: label }),
        el("span", { class: "tw-track", "aria-hidden": "true" }, o.masked ? null : el("span", { class: "tw-fill" })),
        el("span", { class: "tw-val", text: o.masked ? s("tw_masked") : fmt(value, 3) }));
      if (!o.masked) row.querySelector(".tw-fill").style.width = (Math.max(0, Math.min(1, value)) * 100).toFixed(1) + "%";
      return row;
    }
    const scaleRow = (key) => el("div", { class: "tw-scale", "aria-hidden": "true" }, el("span"), el("span", {}, el("span", { text: "0" }), el("span", { text: s(key) }), el("span", { text: "1" })), el("span"));

    function tokenPicker(label, tokens, current, prefix, onPick, tokLang) {
      return el("div", { class: "tw-pick" }, el("span", { text: label + " " }),
        el("span", { class: "tokens", role: "group", "aria-label": label },
          tokens.map((tok, i) => {
            const b = el("button", { type: "button", class: "tok-button", id: prefix + i, lang: tokLang, "aria-pressed": String(i === current), text: tok });
            b.addEventListener("click", () => { onPick(i); remember(); window.Lesson.keepFocus(root, render); });
            return b;
          })));
    }

    function numbersTable(head, rows, d) {
      return [el("p", { class: "subhead", id: "tw-numbers-title", text: head }), el("div", { class: "tw-scroll" }, el("table", { class: "tw-table", id: "tw-numbers", "aria-labelledby": "tw-numbers-title" },
        el("thead", {}, el("tr", {}, el("th", { scope: "col" }), [1, 2, 3, 4].map((k) => el("th", { scope: "col", class: "mono", text: "#" + k })), el("th", { scope: "col", text: s("tw_col_len", { d }) }))),
        el("tbody", {}, rows.map(([key, first, norm, id]) => el("tr", { id },
          el("th", { scope: "row", text: s(key) }),
          first.map((v, k) => el("td", { class: "mono", "data-value": String(v), id: id + "-" + k, text: fmt(v, 3) })),
          el("td", { class: "mono", "data-value": String(norm), id: id + "-norm", text: fmt(norm, 2) }))))))];
    }

    function body() {
      const r = res;
      const sp = srcPos();
      const op = outPos();
      const tok = r.src_tokens[sp];
      const H = r.sizes.H;
      if (state.step === 1) {
        const e = r.embeddings[sp];
        return [el("p", { class: "tw-look", text: s("tw_look1", { d: r.sizes.D }) }),
          tokenPicker(s("tw_follow_src"), r.src_tokens, sp, "tw-src-", (i) => { state.src = i; }, "ja"),
          el("p", { class: "note", text: s("tw_pieces_note") }),
          numbersTable(s("tw_t1_head", { tok, p: sp, n: 4 }), [["tw_row_emb", e.embedding_first, e.embedding_norm, "tw-emb"], ["tw_row_pos", e.position_first, e.position_norm, "tw-pos"], ["tw_row_sum", e.sum_first, e.sum_norm, "tw-sum"]], r.sizes.D),
          el("p", { class: "note", text: s("tw_len_note", { d: r.sizes.D }) }),
          el("p", { text: s("tw_text1") })];
      }
      if (state.step === 2) {
        const row = r.encoder_self[0][sp];
        return [el("p", { class: "tw-look", text: s("tw_look2", { tok, h: H }) }),
          tokenPicker(s("tw_follow_src"), r.src_tokens, sp, "tw-src-", (i) => { state.src = i; }, "ja"),
          el("div", { id: "tw-bars", role: "img", "aria-label": s("tw_look2", { tok, h: H }) }, scaleRow("tw_scale"), row.map((v, j) => barRow("tw-bar-" + j, r.src_tokens[j], v, { lang: "ja", top: j === argmax(row) }))),
          el("p", { text: s("tw_text2", { tok }) })];
      }
      if (state.step === 3) {
        const f = r.feed_forward[sp];
        return [el("p", { class: "tw-look", text: s("tw_look3", { d: r.sizes.D, f: r.sizes.F }) }),
          tokenPicker(s("tw_follow_src"), r.src_tokens, sp, "tw-src-", (i) => { state.src = i; }, "ja"),
          el("table", { class: "tw-table", id: "tw-numbers" },
            el("caption", { class: "subhead", text: s("tw_t3_head", { tok }) }),
            el("tbody", {},
              el("tr", { id: "tw-ffn-in" }, el("th", { scope: "row", text: s("tw_row_in") }), el("td", { class: "mono", "data-value": String(f.in_norm), text: fmt(f.in_norm, 2) })),
              el("tr", { id: "tw-ffn-active" }, el("th", { scope: "row", text: s("tw_row_hidden") }), el("td", { "data-value": String(f.active), text: s("tw_of_f", { n: f.active, f: r.sizes.F }) })),
              el("tr", { id: "tw-ffn-max" }, el("th", { scope: "row", text: s("tw_row_hidden_max") }), el("td", { class: "mono", "data-value": String(f.hidden_max), text: fmt(f.hidden_max, 3) })),
              el("tr", { id: "tw-ffn-out" }, el("th", { scope: "row", text: s("tw_row_out") }), el("td", { class: "mono", "data-value": String(f.out_norm), text: fmt(f.out_norm, 2) })),
              el("tr", { id: "tw-ffn-layer" }, el("th", { scope: "row", text: s("tw_row_layer") }), el("td", { class: "mono", "data-value": String(f.layer_out_norm), text: fmt(f.layer_out_norm, 2) })))),
          el("p", { class: "note", text: s("tw_len_note", { d: r.sizes.D }) }),
          el("p", { text: s("tw_text3", { l: r.sizes.L_enc }) })];
      }
      const outPicker = tokenPicker(s("tw_follow_out"), r.tgt_tokens, op, "tw-out-", (i) => { state.out = i; state.src = -1; }, "en");
      if (state.step === 4) {
        const row = r.decoder_self[0][op];
        const look = s("tw_look4", { p: op, tok: r.tgt_tokens[op], inp: r.tgt_in_tokens[op] });
        return [el("p", { class: "tw-look", text: look }), outPicker,
          el("p", { class: "note", text: s("tw_dec_in") }),
          el("div", { id: "tw-bars", role: "img", "aria-label": look }, scaleRow("tw_scale"),
            r.tgt_in_tokens.map((t, j) => barRow("tw-bar-" + j, j + ": " + t, row[j], { lang: "en", masked: j > op, query: j === op }))),
          el("p", { text: s("tw_text4", { h: H }) })];
      }
      if (state.step === 5) {
        const row = crossRow();
        const chosen = r.tgt_tokens[op];
        return [el("p", { class: "tw-look", text: s("tw_look5", { tok: chosen, l: r.sizes.L_dec, h: H }) }), outPicker,
          el("div", { id: "tw-bars", role: "img", "aria-label": s("tw_look5", { tok: chosen, l: r.sizes.L_dec, h: H }) }, scaleRow("tw_scale"),
            row.map((v, j) => barRow("tw-bar-" + j, r.src_tokens[j], v, { lang: "ja", top: j === argmax(row) }))),
          el("p", { text: s("tw_text5", { p: op }) })];
      }
      const o = r.outputs[op];
      return [el("p", { class: "tw-look", text: s("tw_look6", { k: o.top.length, v: r.sizes.V, tok: o.chosen }) }), outPicker,
        el("div", { id: "tw-bars", role: "img", "aria-label": s("tw_look6", { k: o.top.length, v: r.sizes.V, tok: o.chosen }) }, scaleRow("tw_scale_p"),
          o.top.map((c, j) => barRow("tw-bar-" + j, c.token, c.p, { lang: "en", top: c.token === o.chosen }))),
        el("p", { id: "tw-chosen", "data-value": o.chosen, text: s("tw_translation", { t: r.translation }) }),
        el("p", { text: s("tw_text6") })];
    }

    function render() {
      steps.setAttribute("aria-label", s("tw_steps_label"));
      steps.replaceChildren(...[1, 2, 3, 4, 5, 6].map((n) => {
        // On a phone only the step's number shows (its name is the panel's title and the button's label).
        const b = el("button", { type: "button", id: "tw-step-" + n, "aria-current": n === state.step ? "step" : null, "aria-label": n + ". " + s("tw_step_" + n) },
          el("span", { text: String(n) }), el("span", { class: "tw-step-name", "aria-hidden": "true", text: ". " + s("tw_step_" + n) }));
        b.addEventListener("click", () => go(n));
        return el("li", {}, b);
      }));
      const back = el("button", { type: "button", class: "action", id: "tw-prev", disabled: state.step === 1, text: s("tw_back") });
      const next = el("button", { type: "button", class: "action", id: "tw-next", disabled: state.step === 6, text: s("tw_next") });
      back.addEventListener("click", () => go(state.step - 1));
      next.addEventListener("click", () => go(state.step + 1));
      nav.replaceChildren(back, el("span", { id: "tw-counter", text: s("tw_step_n", { n: state.step }) }), next);
      panel.dataset.step = String(state.step);
      panel.replaceChildren(el("h3", { class: "tw-title", text: s("tw_step_n", { n: state.step }) + (lang() === "ja" ? "：" : ": ") + s("tw_step_" + state.step) }), ...(res ? body().flat() : []));
      mapTitle.textContent = s("tw_map_title");
      window.LessonPictures.renderModelMap(7, lang(), mapBox, { lit: STEP_PARTS[state.step] });
      provenance.textContent = s("source_tw");
      p.out.dataset.step = String(state.step);
    }

    function go(n) {
      state.step = Math.max(1, Math.min(6, n));
      remember();
      window.Lesson.keepFocus(root, render);
    }

    function draw() {
      if (res && state.out >= res.tgt_tokens.length) state.out = res.tgt_tokens.length - 1;
      render();
    }

    p.out.append(steps, el("div", { class: "tw-layout" }, el("div", {}, panel, nav), el("div", {}, mapTitle, mapBox)));
    root.replaceChildren(controls, p.status, p.error, p.out, memo(provenance));
    buildControls();
    render();
    ctx.onLang(() => { buildControls(); render(); });
    load();
  }

  window.Lesson.register("token-walk", { mount });
})();
