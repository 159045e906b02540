// §7 The whole Transformer. transformer-diagram (POST /api/lesson/shapes): a diagram of the shipped
// ja→en Transformer whose boxes open the shapes of their tensors for the sentence typed, recorded
// on a real forward pass. next-token (POST /api/lesson/next-token): the shipped character GPT's
// next-character probabilities, with temperature and top-k. State: text, part (the box open);
// prompt, temp, k (0: every token), seed.
(function () {
  "use strict";
  const { el, fmt, postJSON, debounce } = window.Attn;
  const { clampInt, fail, panes, loader } = window.Lesson;
  const shapeText = (shape) => "(" + shape.join(", ") + ")";

  // The boxes, top to bottom: the encoder's column and the decoder's.
  const ENCODER = ["src_embed", "enc_self", "enc_norm", "enc_ffn", "memory"];
  const DECODER = ["tgt_embed", "dec_self", "dec_cross", "dec_norm", "dec_ffn", "output"];
  // The tensor shown on each box itself.
  const MAIN = {
    src_embed: "with_positions", enc_self: "weights", enc_norm: "residual_out", enc_ffn: "ffn_hidden", memory: "memory",
    tgt_embed: "with_positions", dec_self: "weights", dec_cross: "weights", dec_norm: "residual_out", dec_ffn: "ffn_hidden", output: "probs",
  };

  function mountDiagram(root, ctx) {
    const { s } = ctx;
    const all = ENCODER.concat(DECODER);
    const asked = ctx.param("part", "dec_self");
    const state = { text: ctx.param("text", s("default_sentence")), part: all.includes(asked) ? asked : "dec_self" };
    let shown = null;
    const controls = el("div", { class: "widget-controls inline" });
    const p = panes("td");
    const out = p.out;

    function remember() {
      ctx.setParams({ text: state.text, part: state.part });
    }

    function buildControls() {
      const text = el("input", { type: "text", id: "td-text", value: state.text, class: "wide", lang: "ja", "aria-label": s("sentence_label") });
      text.addEventListener("input", () => { state.text = text.value; remember(); send(); });
      controls.replaceChildren(el("label", { class: "row grow" }, el("span", { text: s("sentence_label") }), text));
    }

    const send = debounce(loader(p, {
      request: () => ({ text: state.text }),
      fetch: (req) => postJSON("/api/lesson/shapes", req),
      busy: () => s("loading"),
      done: (res) => { shown = res; draw(); },
    }), 250);

    function box(r, id) {
      const part = r.parts.find((p) => p.id === id);
      const main = part.tensors.find((t) => t.name === MAIN[id]);
      const b = el("button", { type: "button", class: "td-box td-" + id, id: "td-box-" + id, "aria-pressed": String(id === state.part), "aria-controls": "td-detail" },
        el("span", { class: "td-name", text: s("box_" + id) }),
        el("span", { class: "td-shape mono", "data-value": JSON.stringify(main.shape), text: shapeText(main.shape) }));
      b.addEventListener("click", () => { state.part = id; remember(); draw(); });
      return b;
    }

    function detail(r) {
      const part = r.parts.find((p) => p.id === state.part);
      const rows = part.tensors.map((t, i) => el("tr", {},
        el("th", { scope: "row", text: s("t_" + t.name) }),
        el("td", { class: "mono", id: "td-shape-" + i, "data-value": JSON.stringify(t.shape), text: shapeText(t.shape) }),
        el("td", { class: "mono", text: t.axes })));
      const extra = [];
      if (state.part === "dec_self") {
        extra.push(el("p", { class: "subhead", text: s("mask_title", { t: r.sizes.T }) }),
          el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": s("mask_title", { t: r.sizes.T }) },
            window.Charts.matrix({ rows: r.causal_mask, rowLabels: r.tgt_in_tokens, colLabels: r.tgt_in_tokens, idPrefix: "td-mask" })),
          el("p", { class: "note", text: s("mask_note") }));
      }
      if (state.part === "src_embed") extra.push(el("p", { class: "mono", lang: "ja", text: r.src_tokens.join(" | ") }));
      if (state.part === "tgt_embed") {
        extra.push(el("p", { text: s("tgt_in_line") }), el("p", { class: "mono", lang: "en", text: r.tgt_in_tokens.join(" | ") }),
          el("p", { text: s("tgt_out_line") }), el("p", { class: "mono", lang: "en", text: r.tgt_tokens.join(" | ") }));
      }
      return el("section", { class: "td-detail", id: "td-detail", "aria-live": "polite", "aria-labelledby": "td-detail-title" },
        el("h3", { id: "td-detail-title", text: s("box_" + state.part) }),
        el("p", { text: s("part_" + state.part) }),
        el("table", { class: "steps", id: "td-tensors" },
          el("thead", {}, el("tr", {}, ["th_tensor", "th_shape", "th_axes"].map((k) => el("th", { scope: "col", text: s(k) })))),
          el("tbody", {}, rows)),
        extra);
    }

    function render() {
      const r = shown;
      const z = r.sizes;
      const layersEnc = r.config.n_encoder_layers, layersDec = r.config.n_decoder_layers;
      out.replaceChildren(
        el("p", { class: "translation-line" }, el("span", { text: s("translation_label") + " " }),
          el("strong", { class: "mono", id: "td-translation", lang: "en", text: r.translation })),
        el("p", { class: "note", id: "td-sizes", text: s("sizes_line", { S: z.S, T: z.T, D: z.D, H: z.H, Dh: z.Dh, F: z.F, V: z.V }) }),
        el("div", { class: "td-diagram", role: "group", "aria-label": s("diagram_label") },
          el("div", { class: "td-column" },
            el("p", { class: "td-column-title", text: s("encoder_title", { n: layersEnc }) }),
            box(r, "src_embed"),
            el("div", { class: "td-block" }, el("p", { class: "td-times", text: s("times", { n: layersEnc }) }),
              box(r, "enc_self"), box(r, "enc_norm"), box(r, "enc_ffn")),
            box(r, "memory")),
          el("div", { class: "td-column" },
            el("p", { class: "td-column-title", text: s("decoder_title", { n: layersDec }) }),
            box(r, "tgt_embed"),
            el("div", { class: "td-block" }, el("p", { class: "td-times", text: s("times", { n: layersDec }) }),
              box(r, "dec_self"), box(r, "dec_cross"), box(r, "dec_norm"), box(r, "dec_ffn")),
            box(r, "output"))),
        el("p", { class: "note", text: s("memory_arrow") }),
        detail(r),
        el("p", { class: "note", text: s(r.config.norm === "pre" ? "norm_pre" : "norm_post") }),
        el("p", { class: "note", text: s("source_shapes") }));
    }

    function draw() {
      if (shown) window.Lesson.keepFocus(root, render);
    }

    root.replaceChildren(controls, p.status, p.error, out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    remember();
    send();
  }

  // ---------------------------------------------------------------------------------------------
  // The next character of the shipped GPT.
  // ---------------------------------------------------------------------------------------------

  const TOP_K = [0, 1, 2, 3, 5, 10, 20];
  const SHOWN = 20; // bars drawn: the most likely tokens

  // A character as a label: spaces and line breaks made visible.
  function label(token) {
    if (token === " ") return "␣";
    if (token === "\n") return "↵";
    return token;
  }

  function mountNext(root, ctx) {
    const { s } = ctx;
    const state = {
      prompt: ctx.param("prompt", s("default_prompt")),
      temperature: Math.max(0, Math.min(2, Number(ctx.param("temp", "1")) || 0)),
      topK: TOP_K.includes(Number(ctx.param("k", "0"))) ? Number(ctx.param("k", "0")) : 0,
      seed: clampInt(ctx.param("seed", "0"), 0, 1000000, 0),
    };
    if (!Number.isFinite(Number(ctx.param("temp", "1")))) state.temperature = 1;
    let shown = null;
    let pendingDraw = false;
    const controls = el("div", { class: "widget-controls" });
    const p = panes("gpt");
    const { status, error, out } = p;
    let promptBox = null;

    function remember() {
      ctx.setParams({ prompt: state.prompt, temp: state.temperature, k: state.topK, seed: state.seed });
    }

    function request(sample) {
      const req = { text: state.prompt, temperature: state.temperature, top_k: state.topK === 0 ? null : state.topK };
      if (sample) Object.assign(req, { sample: true, seed: state.seed });
      return req;
    }

    function buildControls() {
      promptBox = el("textarea", { id: "gpt-prompt", rows: "3", class: "wide", lang: "en", "aria-label": s("prompt_label") });
      promptBox.value = state.prompt;
      promptBox.addEventListener("input", () => { state.prompt = promptBox.value; changed(); });
      const tOut = el("output", { id: "gpt-temp-out", for: "gpt-temp", text: fmt(state.temperature, 1) });
      const temp = el("input", { type: "range", id: "gpt-temp", min: "0", max: "2", step: "0.1", value: String(state.temperature), "aria-label": s("temp_label") });
      temp.addEventListener("input", () => { state.temperature = Number(temp.value); tOut.textContent = fmt(state.temperature, 1); changed(); });
      const k = el("select", { id: "gpt-topk", "aria-label": s("topk_label") },
        TOP_K.map((v) => el("option", { value: String(v), selected: v === state.topK, text: v === 0 ? s("topk_all") : String(v) })));
      k.addEventListener("change", () => { state.topK = Number(k.value); changed(); });
      const sample = el("button", { type: "button", class: "action", id: "gpt-sample", text: s("sample_button") });
      sample.addEventListener("click", () => append(true));
      const greedy = el("button", { type: "button", class: "plain", id: "gpt-greedy", text: s("greedy_button") });
      greedy.addEventListener("click", () => append(false));
      controls.replaceChildren(
        el("label", { class: "row grow" }, el("span", { text: s("prompt_label") }), promptBox),
        el("div", { class: "widget-controls inline" },
          el("label", { class: "row" }, el("span", { class: "name", text: s("temp_label") }), temp, tOut),
          el("label", { class: "row" }, el("span", { text: s("topk_label") }), k),
          sample, greedy));
    }

    // Add one character to the text: drawn from the distribution shown, or the most likely one.
    async function append(sample) {
      const mine = ++p.seq;
      try {
        const res = await postJSON("/api/lesson/next-token", request(sample));
        if (mine !== p.seq) return;
        const token = sample ? res.sampled.token : res.tokens[0].token;
        if (sample) state.seed += 1;
        state.prompt += token;
        if (promptBox) promptBox.value = state.prompt;
        status.textContent = s(sample ? "sampled_line" : "greedy_line", { tok: label(token) });
        pendingDraw = true;
        changed();
      } catch (err) {
        if (mine !== p.seq) return;
        fail(error, err);
      }
    }

    const send = debounce(async () => {
      const req = request(false);
      const mine = ++p.seq;
      if (!pendingDraw) status.textContent = s("loading");
      pendingDraw = false;
      try {
        const res = await postJSON("/api/lesson/next-token", req);
        if (mine !== p.seq) return;
        error.classList.add("hidden");
        if (status.textContent === s("loading")) status.textContent = "";
        shown = res;
        draw();
        out.dataset.request = JSON.stringify(req);
        out.dataset.seq = String(mine);
      } catch (err) {
        if (mine !== p.seq) return;
        status.textContent = "";
        fail(error, err);
      }
    }, 150);

    function changed() {
      remember();
      send();
    }

    function render() {
      const r = shown;
      const top = r.tokens.slice(0, SHOWN);
      const max = Math.max(1e-9, ...top.map((t) => t.p), ...top.map((t) => t.p_model));
      const tail = r.context.length > 60 ? "…" + r.context.slice(-60) : r.context;
      const rows = top.map((t, i) => el("tr", { class: t.p === 0 ? "dropped" : null },
        el("th", { scope: "row", class: "mono", text: label(t.token) }),
        el("td", { id: "gpt-logit-" + i, "data-value": t.logit, text: fmt(t.logit, 2) }),
        el("td", { id: "gpt-pm-" + i, "data-value": t.p_model, text: fmt(t.p_model, 3) }),
        el("td", { id: "gpt-pt-" + i, "data-value": t.p, text: fmt(t.p, 3) })));
      out.replaceChildren(
        el("p", { class: "note" }, el("span", { text: s("context_label") + " " }),
          el("span", { class: "mono context", lang: "en", text: tail.replace(/\n/g, "↵") })),
        el("p", { id: "gpt-kept", "data-value": r.kept, text: s("kept_line", { kept: r.kept, v: r.vocab_size, t: fmt(r.temperature, 1), k: r.top_k === null ? s("topk_all") : r.top_k }) }),
        el("p", { class: "subhead", text: s("bars_title", { n: top.length }) }),
        window.Charts.bars({ values: top.map((t) => t.p), labels: top.map((t) => label(t.token)), idPrefix: "gpt-p-", label: s("bars_title", { n: top.length }), left: 50, max }),
        el("details", {}, el("summary", { text: s("table_title") }),
          el("table", { class: "steps", id: "gpt-table" },
            el("thead", {}, el("tr", {}, ["th_token", "th_logit", "th_p_model", "th_p"].map((k) => el("th", { scope: "col", text: s(k) })))),
            el("tbody", {}, rows))),
        el("p", { class: "note", text: s("source_gpt", { model: r.model, n: r.n_positions }) }));
    }

    function draw() {
      if (shown) window.Lesson.keepFocus(root, render);
    }

    root.replaceChildren(controls, status, error, out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    changed();
  }

  window.Lesson.register("transformer-diagram", { mount: mountDiagram });
  window.Lesson.register("next-token", { mount: mountNext });
})();
