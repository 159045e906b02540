// §7 The whole Transformer. transformer-diagram (computed in the page: engine/translation_views.js's
// shapesView over the ja→en translator in onnxruntime-web): a diagram of the shipped
// ja→en Transformer whose boxes open the shapes of their tensors for the sentence typed, recorded
// on a real forward pass. Every shape is drawn with the letter of each axis under its number, and
// the shapes of the vectors that flow along the stack (B, S|T, D) are kept apart from those of the
// attention weights (B, H, queries, keys). Each sublayer is drawn in the order the model runs it
// (pre-norm: LayerNorm → sublayer → residual sum). next-token (in the page: engine/gpt.js, what
// s07's next_token_view computes): the shipped character GPT's next-character probabilities, with
// temperature and top-k.
// State: text, part (the box open); prompt, temp, k (0: every token), seed.
(function () {
  "use strict";
  const { el, fmt, debounce } = window.Attn;
  const { clampInt, fail, panes, loader, memo } = window.Lesson;

  // The sublayers of one encoder and one decoder layer; each comes with a LayerNorm (…_norm) and
  // a residual sum (…_add), in the order the API lists them (the model's order).
  const ENCODER = { embed: "src_embed", sublayers: ["enc_self", "enc_ffn"], last: "memory" };
  const DECODER = { embed: "tgt_embed", sublayers: ["dec_self", "dec_cross", "dec_ffn"], last: "output" };
  // What each box shows: [tensor, lane label key] in the vectors lane, and the weights lane.
  const VECTORS = {
    src_embed: [["with_positions", null]], tgt_embed: [["with_positions", null]],
    enc_self: [["attn_out", null]], dec_self: [["attn_out", null]], dec_cross: [["attn_out", null]],
    enc_ffn: [["ffn_hidden", "lane_hidden"], ["ffn_out", "lane_out"]],
    dec_ffn: [["ffn_hidden", "lane_hidden"], ["ffn_out", "lane_out"]],
    memory: [["memory", null]], output: [["probs", null]],
  };
  const SIZES_SENTENCE = ["S", "T"];
  const SIZES_MODEL = ["B", "D", "H", "Dh", "F", "V"];

  // A shape with the letter of each axis under its number: (1, 4, 7, 5) over B H T S.
  function shapeNode(t, id) {
    const letters = t.axes.split(" ");
    return el("span", { class: "td-dims mono", id, "data-value": JSON.stringify(t.shape), "data-axes": t.axes },
      el("span", { class: "td-paren", text: "(" }),
      t.shape.map((n, i) => [
        i ? el("span", { class: "td-comma", text: "," }) : null,
        el("span", { class: "td-dim" }, el("span", { class: "td-n", text: String(n) }), el("span", { class: "td-l", text: letters[i] })),
      ]),
      el("span", { class: "td-paren", text: ")" }));
  }

  function mountDiagram(root, ctx) {
    const { s } = ctx;
    const asked = ctx.param("part", "dec_cross");
    const state = { text: ctx.param("text", s("default_sentence")), part: asked };
    let shown = null;
    const controls = el("div", { class: "widget-controls inline" });
    const p = panes("td");
    const out = p.out;
    const provenance = el("p", { text: s("source_shapes") });
    const technical = memo(provenance); // made once: it stays open across redraws

    function remember() {
      ctx.setParams({ text: state.text, part: state.part });
    }

    function buildControls() {
      const text = el("input", { type: "text", id: "td-text", value: state.text, class: "wide", lang: "ja", "aria-label": s("sentence_label") });
      text.addEventListener("input", () => { state.text = text.value; remember(); send(); });
      controls.replaceChildren(el("label", { class: "row grow" }, el("span", { text: s("sentence_label") }), text));
    }

    // The first answer is asked for at once (the model starts loading with the page); typing is
    // debounced.
    const load = loader(p, {
      request: () => ({ text: state.text }),
      fetch: async (req) => {
        const [views, models] = await Promise.all([import("../../engine/translation_views.js"), window.Lesson.inPageModels()]);
        return views.shapesView(await models.translator("ja-en", { onProgress: window.Lesson.modelProgress(p) }), req.text);
      },
      busy: () => s("loading"),
      done: (res) => {
        shown = res;
        if (!res.parts.some((part) => part.id === state.part)) state.part = "dec_cross";
        remember();
        draw();
      },
    });
    const send = debounce(load, 250);

    const partOf = (r, id) => r.parts.find((x) => x.id === id);
    const tensor = (part, name) => part.tensors.find((t) => t.name === name);
    // The sublayer a …_norm or …_add part belongs to.
    const sublayerOf = (id) => id.replace(/_(norm|add)$/, "");

    function title(part) {
      if (part.kind === "norm") return s("norm_title", { sub: s("box_" + sublayerOf(part.id)) });
      if (part.kind === "add") return s("add_title", { sub: s("box_" + sublayerOf(part.id)) });
      return s("box_" + part.id);
    }

    function pick(r, id) {
      return () => { state.part = id; remember(); draw(); };
    }

    // A main box: its name, the vectors it hands on, and (attention) its weights, in two lanes.
    function box(r, id) {
      const part = partOf(r, id);
      const vectors = VECTORS[id].map(([name, lane]) => el("span", { class: "td-lane-item" },
        lane ? el("span", { class: "td-lane-label", text: s(lane) }) : null,
        shapeNode(tensor(part, name), `td-box-${id}-${name}`)));
      const weights = tensor(part, "weights");
      const b = el("button", { type: "button", class: "td-box td-" + part.kind, id: "td-box-" + id, "aria-pressed": String(id === state.part), "aria-controls": "td-detail" },
        el("span", { class: "td-name" }, el("span", { text: s("box_" + id) }),
          id === "dec_cross" ? el("span", { class: "td-from", text: s("from_memory") }) : null),
        el("span", { class: "td-lane td-lane-vectors" }, vectors),
        el("span", { class: "td-lane td-lane-weights" }, weights ? shapeNode(weights, `td-box-${id}-weights`) : null));
      b.addEventListener("click", pick(r, id));
      return b;
    }

    // A LayerNorm or a residual sum: a slim box; neither changes the shape.
    function slim(r, id) {
      const part = partOf(r, id);
      const b = el("button", { type: "button", class: "td-slim td-" + part.kind, id: "td-box-" + id, "aria-pressed": String(id === state.part), "aria-controls": "td-detail" },
        el("span", { class: "td-slim-mark", "aria-hidden": "true", text: part.kind === "add" ? "⊕" : "≡" }),
        el("span", { text: s(part.kind === "add" ? "box_add" : "box_norm") }));
      b.addEventListener("click", pick(r, id));
      return b;
    }

    // One sublayer with its LayerNorm and residual sum, in the order the model runs them, and the
    // residual path drawn as a rail beside them.
    function sublayer(r, sub) {
      const order = r.parts.map((x) => x.id).filter((id) => id === sub || sublayerOf(id) === sub);
      return el("div", { class: "td-sub", role: "group", "aria-label": s("sub_label", { sub: s("box_" + sub) }) },
        el("span", { class: "td-rail", "aria-hidden": "true" }),
        order.map((id) => (id === sub ? box(r, id) : slim(r, id))));
    }

    function column(r, side, layers, heading) {
      return el("div", { class: "td-column" },
        el("p", { class: "td-column-title", text: heading }),
        el("div", { class: "td-lanes-head", "aria-hidden": "true" }, el("span"),
          el("span", { class: "td-lane-vectors", text: s("lane_vectors") }),
          el("span", { class: "td-lane-weights", text: s("lane_weights") })),
        box(r, side.embed),
        el("div", { class: "td-block" }, el("p", { class: "td-times", text: s("times", { n: layers }) }),
          side.sublayers.map((sub) => sublayer(r, sub))),
        box(r, side.last));
    }

    function sizes(r) {
      const item = (k) => el("div", { class: "td-size" },
        el("dt", { class: "mono", text: k }),
        el("dd", {}, el("strong", { class: "mono", id: "td-size-" + k, "data-value": String(r.sizes[k]), text: String(r.sizes[k]) }),
          " ", el("span", { text: s("size_" + k) })));
      return el("div", { class: "td-sizes", id: "td-sizes" },
        el("div", { class: "td-size-group" }, el("p", { class: "td-size-title", text: s("sizes_sentence") }),
          el("dl", {}, SIZES_SENTENCE.map(item))),
        el("div", { class: "td-size-group" }, el("p", { class: "td-size-title", text: s("sizes_model") }),
          el("dl", {}, SIZES_MODEL.map(item))));
    }

    function detail(r) {
      const part = partOf(r, state.part);
      const rows = part.tensors.map((t, i) => el("tr", { class: "td-row-" + t.kind },
        el("th", { scope: "row", text: s("t_" + t.name) }),
        el("td", {}, el("span", { class: "td-kind td-kind-" + t.kind, text: s("kind_" + t.kind) })),
        el("td", {}, shapeNode(t, "td-shape-" + i))));
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
      const text = part.kind === "norm" || part.kind === "add" ? s(`part_${part.kind}_${r.norm}`) : s("part_" + part.id);
      return el("section", { class: "td-detail", id: "td-detail", "aria-live": "polite", "aria-labelledby": "td-detail-title" },
        el("h3", { id: "td-detail-title", text: title(part) }),
        el("p", { text }),
        el("table", { class: "steps td-tensors", id: "td-tensors" },
          el("thead", {}, el("tr", {}, ["th_tensor", "th_kind", "th_shape"].map((k) => el("th", { scope: "col", text: s(k) })))),
          el("tbody", {}, rows)),
        extra);
    }

    function render() {
      const r = shown;
      out.replaceChildren(
        el("p", { class: "translation-line" }, el("span", { text: s("translation_label") + " " }),
          el("strong", { class: "mono", id: "td-translation", lang: "en", text: r.translation })),
        sizes(r),
        el("div", { class: "td-diagram", role: "group", "aria-label": s("diagram_label") },
          column(r, ENCODER, r.config.n_encoder_layers, s("encoder_title", { n: r.config.n_encoder_layers })),
          column(r, DECODER, r.config.n_decoder_layers, s("decoder_title", { n: r.config.n_decoder_layers }))),
        el("p", { class: "note", id: "td-norm-note", text: s(r.norm === "pre" ? "norm_pre" : "norm_post") }),
        el("p", { class: "note", text: s("memory_arrow") }),
        detail(r));
      provenance.textContent = s("source_shapes");
    }

    function draw() {
      if (shown) window.Lesson.keepFocus(root, render);
    }

    root.replaceChildren(controls, p.status, p.error, out, technical);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    remember();
    load();
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

  // The GPT's distribution in the page (onnxruntime-web), the model loaded once; its download is
  // shown on the widget's status line.
  // p.loading is set while the download is shown, so that the line is cleared once it is done.
  async function nextTokenInPage(req, p) {
    const engine = await import("../../engine/gpt.js");
    const progress = window.Lesson.modelProgress(p);
    const onProgress = (loaded, total) => { p.loading = true; progress(loaded, total); };
    return engine.nextToken(await engine.loadGPT(engine.GPT_MODEL, { onProgress }), req);
  }

  // A failure said plainly: a device that cannot run the model gets the lesson's own sentence.
  function failModel(error, err) {
    if (err && err.name === "DeviceError") {
      error.textContent = window.Attn.t("ls_model_device");
      error.classList.remove("hidden");
    } else fail(error, err);
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
    const provenance = el("p");
    const technical = memo(provenance);
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
        const res = await nextTokenInPage(request(sample), p);
        if (mine !== p.seq) return;
        const token = sample ? res.sampled.token : res.tokens[0].token;
        if (sample) state.seed += 1;
        state.prompt += token;
        if (promptBox) promptBox.value = state.prompt;
        p.loading = false;
        status.textContent = s(sample ? "sampled_line" : "greedy_line", { tok: label(token) });
        pendingDraw = true;
        changed();
      } catch (err) {
        if (mine !== p.seq) return;
        failModel(error, err);
      }
    }

    const send = debounce(async () => {
      const req = request(false);
      const mine = ++p.seq;
      if (!pendingDraw) status.textContent = s("loading");
      pendingDraw = false;
      try {
        const res = await nextTokenInPage(req, p);
        if (mine !== p.seq) return;
        error.classList.add("hidden");
        if (status.textContent === s("loading") || p.loading) status.textContent = "";
        p.loading = false;
        shown = res;
        draw();
        out.dataset.request = JSON.stringify(req);
        out.dataset.seq = String(mine);
      } catch (err) {
        if (mine !== p.seq) return;
        status.textContent = "";
        failModel(error, err);
      }
    }, 150);

    function changed() {
      remember();
      send();
    }

    function render() {
      const r = shown;
      const top = r.tokens.slice(0, SHOWN);
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
        window.Charts.bars({ values: top.map((t) => t.p), labels: top.map((t) => label(t.token)), idPrefix: "gpt-p-", label: s("bars_title", { n: top.length }), left: 50, mono: true, scaleTitle: window.Attn.t("fig_scale_prob") }),
        el("details", {}, el("summary", { text: s("table_title") }),
          el("table", { class: "steps", id: "gpt-table" },
            el("thead", {}, el("tr", {}, ["th_token", "th_logit", "th_p_model", "th_p"].map((k) => el("th", { scope: "col", text: s(k) })))),
            el("tbody", {}, rows))),
        el("p", { class: "note", text: s("symbols_note") }));
      provenance.textContent = s("source_gpt", { model: r.model, n: r.n_positions });
    }

    function draw() {
      if (shown) window.Lesson.keepFocus(root, render);
    }

    root.replaceChildren(controls, status, error, out, technical);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    changed();
  }

  window.Lesson.register("transformer-diagram", { mount: mountDiagram });
  window.Lesson.register("next-token", { mount: mountNext });
})();
