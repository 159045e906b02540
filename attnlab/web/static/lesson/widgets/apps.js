// §9 Transformers at work. families: the three families' masks drawn side by side (no numbers:
// which cell may attend). apps-mlm and apps-qa (engine/bert.js), apps-gpt (engine/gpt.js),
// apps-summary (engine/summary.js), apps-vit (engine/vit.js) and apps-gat (engine/gat.js): small
// shipped models doing their jobs in the page, with the attention behind each answer.
// State in the address: mlm, gpt (the typed lines), qp, qq (the QA passage and question when not
// the first example's), doc (the example document), img, node.
(function () {
  "use strict";
  const { el, postJSON, debounce } = window.Attn;
  // The BERT encoders' in-page module (static/engine/bert.js), imported when first needed.
  let bertModule = null;
  const bertEngine = () => (bertModule ||= import("../../engine/bert.js"));
  const { panes, loader, memo, keepFocus, slidePart } = window.Lesson;
  const { num, sequential, css, textOn } = window.Charts;
  const NS = "http://www.w3.org/2000/svg";
  const FIRST_IMAGE = 2; // the API's default: a held-out digit the model gets right (image 0 it gets wrong)
  const show = (tok) => (tok === " " ? "␣" : tok === "\n" ? "↵" : tok);

  // A phrase with its bracketed terms kept on one line: "（マスク言語モデル）" is one term, never split
  // at a line end (a 375 px column otherwise breaks Japanese anywhere).
  function unbroken(text) {
    return text.split(/([（(][^）)]*[）)])/).filter(Boolean).map((part) =>
      /^[（(]/.test(part) ? el("span", { class: "apps-term", text: part }) : document.createTextNode(part));
  }

  function svgNode(tag, attrs, text) {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // The colour key of a 0–1 table or picture: the lesson's one key (figure.js), with its title.
  function colourKey(title, id) {
    const node = window.Figure.keySVG({ title, lo: 0, hi: 1, fill: (v) => css(sequential(v)) });
    node.id = id;
    return node;
  }

  // A colour swatch (its colour set through the CSSOM: the page's CSP forbids style attributes).
  function swatch(colour) {
    const node = el("span", { class: "apps-swatch" });
    node.style.backgroundColor = colour;
    return node;
  }

  // A table of weights in [0, 1]: one row per (layer, head), one column per token; each cell keeps
  // its number in data-value and has the id prefix-r-c. One figure: its title, the table, and under
  // it its colour key (opts.keyTitle, id opts.keyId).
  function headTable(opts) {
    const head = el("tr", {}, el("td"), opts.cols.map((c, j) => el("th", {
      scope: "col", class: ["mono", opts.markCol === j ? "apps-mark" : ""].join(" ").trim(), text: c,
    })));
    const body = opts.rows.map((row, r) => el("tr", {}, el("th", { scope: "row", text: opts.rowLabels[r] }),
      row.map((v, c) => {
        const rgb = sequential(v);
        const td = el("td", {
          id: `${opts.idPrefix}-${r}-${c}`, "data-value": String(v), text: num(v, 2),
          class: opts.frame && opts.frame[0] === r && opts.frame[1] === c ? "apps-frame" : null,
        });
        td.style.backgroundColor = css(rgb);
        td.style.color = textOn(rgb);
        return td;
      })));
    return [el("figure", { class: "apps-figure" },
      el("p", { class: "apps-table-title", id: opts.idPrefix + "-title", text: opts.title }),
      el("div", { class: "scroll", tabindex: "0", role: "region", "aria-labelledby": opts.idPrefix + "-title" },
        el("table", { class: "matrix apps-table", id: opts.idPrefix, "aria-labelledby": opts.idPrefix + "-title" },
          el("thead", {}, head), el("tbody", {}, body))),
      colourKey(opts.keyTitle, opts.keyId))];
  }

  function candidateBars(s, cands, idPrefix, label) {
    return window.Charts.bars({
      values: cands.map((c) => c.p), labels: cands.map((c) => "「" + show(c.token) + "」"), idPrefix,
      label, max: 1, left: 70, format: (p) => num(p, 2), mono: true, scaleTitle: window.Attn.t("fig_scale_prob"),
    });
  }

  // ---------------------------------------------------------------------------------------------
  // The three families: which position may attend to which.
  // ---------------------------------------------------------------------------------------------

  // A title's width in px at 13 px bold (CJK characters about twice a Latin one's): the picture
  // is made wide enough for it, so that no title is cut.
  const titleWidth = (text) => Array.from(text).reduce((w, ch) => w + (ch.charCodeAt(0) > 0x2e7f ? 13.5 : 8), 0);

  function maskGrid(node, x0, y0, rows, cols, allowed, cell, rowLabels, colLabels, title) {
    node.append(svgNode("text", { x: x0 - 26, y: y0 - 30, "font-size": 13, "font-weight": "bold", fill: "#1f2933" }, title));
    colLabels.forEach((c, j) => node.append(svgNode("text", { x: x0 + j * cell + cell / 2, y: y0 - 6, "text-anchor": "middle", "font-size": 12, fill: "#1f2933" }, c)));
    rowLabels.forEach((r, i) => node.append(svgNode("text", { x: x0 - 6, y: y0 + i * cell + cell / 2 + 4, "text-anchor": "end", "font-size": 12, fill: "#1f2933" }, r)));
    let ticks = 0;
    for (let i = 0; i < rows; i++) {
      for (let j = 0; j < cols; j++) {
        const ok = allowed(i, j);
        ticks += ok ? 1 : 0;
        node.append(svgNode("rect", { x: x0 + j * cell, y: y0 + i * cell, width: cell - 2, height: cell - 2, fill: ok ? "#2171b5" : "#eef1f5", stroke: "#9aa5b1", "stroke-width": 0.5, "data-ok": String(ok) }));
      }
    }
    return ticks;
  }

  function mountFamilies(root, ctx) {
    const { s } = ctx;
    function render() {
      const cell = 24;
      const src = ["x1", "x2", "x3", "x4"];
      const out = ["y1", "y2", "y3"];
      const panels = [
        { id: "enc", title: s("fam_enc"), task: s("fam_enc_task"), draw(node) {
          maskGrid(node, 40, 50, 4, 4, () => true, cell, src, src, s("fam_self"));
          return Math.max(40 + 4 * cell + 10, 14 + titleWidth(s("fam_self")) + 8);
        } },
        { id: "dec", title: s("fam_dec"), task: s("fam_dec_task"), draw(node) {
          maskGrid(node, 40, 50, 4, 4, (i, j) => j <= i, cell, src, src, s("fam_causal"));
          return Math.max(40 + 4 * cell + 10, 14 + titleWidth(s("fam_causal")) + 8);
        } },
        { id: "encdec", title: s("fam_encdec"), task: s("fam_encdec_task"), draw(node) {
          const low = 50 + 4 * cell + 50;
          maskGrid(node, 40, 50, 4, 4, () => true, cell, src, src, s("fam_enc_self"));
          maskGrid(node, 40, low, 3, 3, (i, j) => j <= i, cell, out, out, s("fam_dec_self"));
          // The source–target grid sits right of the decoder's grid where the screen is wide enough,
          // else under it (a phone): the picture is never scaled, so its text keeps its 12–13 px.
          const right = Math.max(40 + 3 * cell + 40, 14 + titleWidth(s("fam_dec_self")) + 40);
          const wide = Math.max(right + 4 * cell + 10, right - 26 + titleWidth(s("fam_cross")) + 8);
          const narrow = Math.max(40 + 4 * cell + 10, 14 + titleWidth(s("fam_dec_self")) + 8, 14 + titleWidth(s("fam_cross")) + 8);
          const side = window.Charts.room(wide, narrow) >= wide;
          maskGrid(node, side ? right : 40, side ? low : low + 3 * cell + 50, 3, 4, () => true, cell, out, src, s("fam_cross"));
          this.height = side ? low + 3 * cell + 10 : low + 6 * cell + 60;
          return Math.max(side ? wide : narrow, 14 + titleWidth(s("fam_enc_self")) + 8);
        } },
      ];
      const figs = panels.map((p) => {
        const node = svgNode("svg", { role: "img", "aria-label": p.title + ": " + p.task, id: "fam-" + p.id });
        const W = p.draw(node);
        const H = p.height || 50 + 4 * cell + 10;
        node.setAttribute("width", W);
        node.setAttribute("height", H);
        node.setAttribute("viewBox", `0 0 ${W} ${H}`);
        return el("figure", { class: "apps-family", id: "fam-fig-" + p.id },
          el("figcaption", {}, el("strong", { text: p.title }), el("span", { class: "note" }, " ", unbroken(p.task))), node);
      });
      root.replaceChildren(
        el("div", { class: "apps-families" }, figs),
        el("div", { class: "apps-key-row" },
          swatch("#2171b5"), el("span", { class: "note", text: s("fam_may") }),
          swatch("#eef1f5"), el("span", { class: "note", text: s("fam_hidden") })),
        el("p", { class: "note", text: s("fam_note") }));
    }
    render();
    ctx.onLang(render);
  }

  // ---------------------------------------------------------------------------------------------
  // Encoder-only: a masked LM fills a hidden character.
  // ---------------------------------------------------------------------------------------------

  function textWidget(root, ctx, o) {
    const { s } = ctx;
    const typed = ctx.param(o.param, null);
    const state = { text: typed && typed.trim() ? typed : s(o.first) };
    const controls = el("div", { class: "widget-controls inline" });
    const p = panes(o.prefix);
    let shown = null;
    let input = null;

    function buildControls() {
      input = el("input", { type: "text", id: o.prefix + "-text", class: "wide", lang: "en", maxlength: String(o.max), "aria-label": s(o.label) });
      input.value = state.text;
      input.addEventListener("input", () => {
        if (!input.value.trim()) return;
        state.text = input.value;
        changed();
      });
      const examples = o.examples.map((key, i) => {
        const b = el("button", { type: "button", class: "plain", id: `${o.prefix}-ex-${i}`, lang: "en", text: s(key) });
        b.addEventListener("click", () => { state.text = s(key); input.value = state.text; changed(); });
        return b;
      });
      controls.replaceChildren(
        el("label", { class: "row grow" }, el("span", { text: s(o.label) }), input),
        el("div", { class: "examples", role: "group", "aria-label": s("examples") }, el("span", { class: "note", text: s("examples") }), examples));
    }

    const send = debounce(loader(p, {
      request: () => ({ text: state.text }),
      fetch: (req) => (o.compute ? o.compute(req, p) : postJSON(o.url, req)),
      busy: () => s("loading"),
      done: (res) => { shown = res; draw(); },
    }), 200);

    function changed() {
      ctx.setParams({ [o.param]: state.text === s(o.first) ? null : state.text });
      send();
    }

    function draw() {
      if (shown) keepFocus(root, () => p.out.replaceChildren(...o.render(shown).filter(Boolean)));
    }

    root.replaceChildren(controls, p.status, p.error, p.out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    changed();
  }

  function mountMLM(root, ctx) {
    const { s } = ctx;
    textWidget(root, ctx, {
      prefix: "mlm", param: "mlm", first: "mlm_ex_0", label: "mlm_label", max: 60,
      // In the page: engine/bert.js runs shakespeare-mlm (mlm_view's response).
      compute: async (req, p) => (await bertEngine()).mlmView(req, { onProgress: window.Lesson.modelProgress(p) }),
      examples: ["mlm_ex_0", "mlm_ex_1", "mlm_ex_2"],
      render(r) {
        const rows = [], labels = [];
        r.weights.forEach((layer, l) => layer.forEach((row, h) => { rows.push(row); labels.push(s("layer_head", { l: l + 1, h: h + 1 })); }));
        const st = r.strongest;
        const best = r.candidates[0];
        return [
          el("p", { class: "apps-result" }, el("span", { text: s("mlm_fill") + " " }),
            el("strong", { id: "mlm-best", "data-value": best.token, class: "mono", text: "「" + show(best.token) + "」" }),
            el("span", { text: " " + s("prob", { p: num(best.p, 2) }) })),
          el("p", { class: "subhead", text: s("mlm_bars") }),
          candidateBars(s, r.candidates, "mlm-p-", s("mlm_bars")),
          ...headTable({ rows, rowLabels: labels, cols: r.tokens.map(show), idPrefix: "mlm-w", markCol: r.mask,
            title: s("mlm_table"), frame: [st.layer * r.n_heads + st.head, st.position], keyTitle: s("key_label"), keyId: "mlm-key" }),
          el("p", { id: "mlm-strongest", "data-value": `${st.layer} ${st.head} ${st.position}`,
            text: s("mlm_strongest", { l: st.layer + 1, h: st.head + 1, tok: show(r.tokens[st.position]), w: num(st.weight, 2) }) }),
          el("p", { class: "note apps-honest", text: s("mlm_honest") }),
          memo(el("p", { text: s("mlm_source") })),
        ];
      },
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Encoder-only: extractive question answering (a span of the passage).
  // ---------------------------------------------------------------------------------------------

  function mountQA(root, ctx) {
    const { s } = ctx;
    const state = { passage: ctx.param("qp", null), question: ctx.param("qq", null) };
    const controls = el("div", { class: "widget-controls" });
    const p = panes("qa");
    let shown = null;
    let examples = null;
    let area = null, input = null;

    function buildControls() {
      const rows = [];
      if (examples) {
        const passages = examples.map((ex, i) => {
          const b = el("button", { type: "button", class: "plain", id: "qa-ex-" + i, "aria-pressed": String(ex.passage === state.passage), text: s("qa_passage", { n: i + 1 }) });
          b.addEventListener("click", () => { state.passage = ex.passage; state.question = ex.questions[0]; changed(true); });
          return b;
        });
        rows.push(el("div", { class: "examples", role: "group", "aria-label": s("qa_passages") }, el("span", { class: "note", text: s("qa_passages") }), passages));
        const ex = examples.find((e) => e.passage === state.passage);
        if (ex) {
          const questions = ex.questions.map((q, i) => {
            const b = el("button", { type: "button", class: "plain", id: "qa-q-" + i, lang: "en", "aria-pressed": String(q === state.question), text: q });
            b.addEventListener("click", () => { state.question = q; changed(true); });
            return b;
          });
          rows.push(el("div", { class: "examples", role: "group", "aria-label": s("qa_questions") }, el("span", { class: "note", text: s("qa_questions") }), questions));
        }
      }
      area = el("textarea", { id: "qa-passage", rows: "3", class: "wide", lang: "en", maxlength: "400", "aria-label": s("qa_passage_label") });
      area.value = state.passage || "";
      input = el("input", { type: "text", id: "qa-question", class: "wide", lang: "en", maxlength: "120", "aria-label": s("qa_question_label") });
      input.value = state.question || "";
      area.addEventListener("input", () => { if (area.value.trim()) { state.passage = area.value; changed(false); } });
      input.addEventListener("input", () => { if (input.value.trim()) { state.question = input.value; changed(false); } });
      rows.push(el("label", { class: "row grow" }, el("span", { text: s("qa_passage_label") }), area));
      rows.push(el("label", { class: "row grow" }, el("span", { text: s("qa_question_label") }), input));
      controls.replaceChildren(...rows);
    }

    const send = debounce(loader(p, {
      request: () => (state.passage && state.question ? { passage: state.passage, question: state.question } : {}),
      // In the page: engine/bert.js runs facts-qa (qa_view's response).
      fetch: async (req) => (await bertEngine()).qaView(req, { onProgress: window.Lesson.modelProgress(p) }),
      busy: () => s("loading"),
      done: (res) => {
        const first = !examples;
        examples = res.examples;
        shown = res;
        if (first) {
          if (!state.passage) state.passage = res.passage;
          if (!state.question) state.question = res.question;
          keepFocus(controls, buildControls);
        }
        draw();
      },
    }), 200);

    function changed(rebuild) {
      const first = examples ? examples[0] : null;
      ctx.setParams({
        qp: first && state.passage === first.passage ? null : state.passage,
        qq: first && state.question === first.questions[0] ? null : state.question,
      });
      if (rebuild) keepFocus(controls, buildControls);
      send();
    }

    function probRow(values, id, label) {
      return { values, id, label };
    }

    function render() {
      const r = shown;
      const [a, b] = r.answer_chars;
      const passage = el("p", { class: "apps-doc", lang: "en", id: "qa-text" },
        el("span", { text: r.passage.slice(0, a) }),
        el("mark", { id: "qa-answer", class: "apps-answer", "data-value": r.answer, text: r.passage.slice(a, b) }),
        el("span", { text: r.passage.slice(b) }));
      const [first, last] = r.answer_tokens;
      const rows = [], labels = [];
      r.weights.forEach((layer, l) => layer.forEach((row, h) => { rows.push(row); labels.push(s("layer_head", { l: l + 1, h: h + 1 }) + " · " + num(r.on_answer[l][h], 2)); }));
      const [bl, bh] = r.best_head;
      const tokens = r.passage_tokens;
      const probs = [probRow(r.start_probs, "start", s("qa_start")), probRow(r.end_probs, "end", s("qa_end"))];
      return [
        el("p", { class: "apps-result" }, el("span", { text: s("qa_said") + " " }),
          el("strong", { id: "qa-best", lang: "en", "data-value": r.answer, text: "「" + r.answer + "」" }),
          el("span", { text: " " + s("qa_probs", { s: num(r.start_probs[first], 2), e: num(r.end_probs[last], 2) }) })),
        el("p", { class: "subhead", text: s("qa_in_passage") }),
        passage,
        ...headTable({ rows: probs.map((x) => x.values), rowLabels: probs.map((x) => x.label), cols: tokens, idPrefix: "qa-p", title: s("qa_probs_table"), keyTitle: s("qa_prob_key"), keyId: "qa-prob-key" }),
        ...headTable({ rows, rowLabels: labels, cols: tokens, idPrefix: "qa-w", title: s("qa_table"), frame: [bl * r.n_heads + bh, first], keyTitle: s("key_label"), keyId: "qa-key" }),
        // Below a tenth, "the head that looks at the answer" would overstate it: the page says so.
        el("p", { id: "qa-head", "data-value": `${bl} ${bh}`, text: s(r.on_answer[bl][bh] < 0.1 ? "qa_head_weak" : "qa_head", { l: bl + 1, h: bh + 1, w: num(r.on_answer[bl][bh], 2) }) }),
        el("p", { class: "note apps-honest", text: s("qa_honest") }),
        memo(el("p", { text: s("qa_source") })),
      ];
    }

    function draw() {
      if (shown) keepFocus(root, () => p.out.replaceChildren(...render()));
    }

    root.replaceChildren(controls, p.status, p.error, p.out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    send();
  }

  // ---------------------------------------------------------------------------------------------
  // Decoder-only: the next character and the causal row.
  // ---------------------------------------------------------------------------------------------

  function mountGPT(root, ctx) {
    const { s } = ctx;
    textWidget(root, ctx, {
      prefix: "dec", param: "gpt", first: "gpt_ex_0", label: "gpt_label", max: 48,
      // In the page: the shipped character GPT through onnxruntime-web (engine/gpt.js, what
      // s09_transformers_at_work.gpt_view computes), its download shown on the status line.
      compute: async (req, p) => {
        const engine = await import("../../engine/gpt.js");
        return engine.gptApp(await engine.loadGPT(engine.GPT_MODEL, { onProgress: window.Lesson.modelProgress(p) }), req);
      },
      examples: ["gpt_ex_0", "gpt_ex_1"],
      render(r) {
        const rows = [], labels = [];
        r.weights.forEach((layer, l) => layer.forEach((row, h) => { rows.push(row); labels.push(s("layer_head", { l: l + 1, h: h + 1 })); }));
        const best = r.candidates[0];
        return [
          el("p", { class: "apps-result" }, el("span", { text: s("gpt_next") + " " }),
            el("strong", { id: "dec-best", "data-value": best.token, class: "mono", text: "「" + show(best.token) + "」" }),
            el("span", { text: " " + s("prob", { p: num(best.p, 2) }) })),
          el("p", { class: "subhead", text: s("gpt_bars") }),
          candidateBars(s, r.candidates, "dec-p-", s("gpt_bars")),
          ...headTable({ rows, rowLabels: labels, cols: r.tokens.map(show), idPrefix: "dec-w", markCol: r.tokens.length - 1, title: s("gpt_table"), keyTitle: s("key_label"), keyId: "dec-key" }),
          el("p", { class: "note", text: s("gpt_note") }),
          el("p", { class: "note apps-honest", text: s("gpt_honest") }),
          memo(el("p", { text: s("gpt_source") })),
        ];
      },
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Encoder–decoder: the pointer-generator's copy switch, word by word.
  // ---------------------------------------------------------------------------------------------

  function mountSummary(root, ctx) {
    const { s } = ctx;
    const state = { doc: Math.max(0, Math.min(2, Number(ctx.param("doc", "0")) || 0)) };
    const controls = el("div", { class: "widget-controls inline" });
    const p = panes("sum");
    let shown = null;
    let examples = null;

    function buildControls() {
      const buttons = [0, 1, 2].map((i) => {
        const b = el("button", { type: "button", class: "plain", id: "sum-ex-" + i, "aria-pressed": String(i === state.doc), text: s("sum_doc", { n: i + 1 }) });
        b.addEventListener("click", () => { state.doc = i; changed(); });
        return b;
      });
      controls.replaceChildren(el("div", { class: "examples", role: "group", "aria-label": s("sum_docs") }, el("span", { class: "note", text: s("sum_docs") }), buttons));
    }

    const send = loader(p, {
      request: () => (examples ? { document: examples[state.doc] } : {}),
      fetch: async (req) => {
        // In the page (engine/summary.js): the shipped pointer-generator's ONNX export through
        // onnxruntime-web, the same numbers as the Python view it replaces.
        const sum = await import("../../engine/summary.js");
        const [model, docs] = await Promise.all([
          sum.summarizer("facts-summarizer", { onProgress: window.Lesson.modelProgress(p) }),
          sum.summaryExamples(),
        ]);
        p.status.textContent = s("loading");
        return sum.summaryView(model, docs, req);
      },
      busy: () => s("loading"),
      done: (res) => {
        const first = !examples;
        examples = res.examples;
        shown = res;
        if (first && state.doc !== 0) { send(); return; }
        draw();
      },
    });

    function changed() {
      ctx.setParams({ doc: state.doc === 0 ? null : String(state.doc) });
      keepFocus(controls, buildControls);
      send();
    }

    function render() {
      const r = shown;
      const words = r.tokens.map((w, t) => {
        const copy = 1 - r.p_gen[t];
        const rgb = sequential(copy);
        const span = el("span", { class: "apps-word", id: "sum-word-" + t, "data-value": String(copy) },
          el("span", { class: "mono", text: w }), el("small", { text: num(copy, 2) }));
        span.style.backgroundColor = css(rgb);
        span.style.color = textOn(rgb);
        return span;
      });
      const doc = r.src_tokens.map((w, j) => el("span", { class: r.known[j] ? "mono" : "mono apps-unknown", text: w + " " }));
      // Projector mode: two slides (Lesson.slidePart), the summary's words and what they copy,
      // then the attention over the document (its rows, one per word, fill a screen of their own).
      return [
        ...slidePart(1, el("p", { class: "subhead", text: s("sum_document") }),
          el("p", { class: "apps-doc", lang: "en", id: "sum-doc" }, doc),
          el("p", { class: "note", text: s("sum_unknown") }),
          el("p", { class: "subhead", id: "sum-words-title", text: s("sum_words") }),
          el("p", { class: "apps-words", lang: "en", role: "group", "aria-labelledby": "sum-words-title" }, words),
          colourKey(s("sum_key"), "sum-copy-key")),
        slidePart(2, ...headTable({ rows: r.src_tokens.map((_, j) => r.attention.map((row) => row[j])), rowLabels: r.src_tokens, cols: r.tokens, idPrefix: "sum-a", title: s("sum_table"), keyTitle: s("key_label"), keyId: "sum-key" })),
        slidePart(1, el("p", { class: "note apps-honest", text: s("sum_honest") })),
        slidePart(2, memo(el("p", { text: s("sum_source") }))),
      ];
    }

    function draw() {
      if (shown) keepFocus(root, () => p.out.replaceChildren(...render()));
    }

    root.replaceChildren(controls, p.status, p.error, p.out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    changed();
  }

  // ---------------------------------------------------------------------------------------------
  // Beyond text: a ViT's patches, a GAT's edges.
  // ---------------------------------------------------------------------------------------------

  function mountVit(root, ctx) {
    const { s } = ctx;
    const state = { img: Math.max(0, Math.floor(Number(ctx.param("img", String(FIRST_IMAGE))))) || 0 };
    const controls = el("div", { class: "widget-controls inline" });
    const p = panes("vit");
    let shown = null;

    function buildControls() {
      const box = el("input", { type: "number", id: "vit-index", min: "0", max: shown ? String(shown.n_images - 1) : null, value: String(state.img), "aria-label": s("vit_label") });
      box.addEventListener("change", () => { const v = Math.floor(Number(box.value)); if (Number.isFinite(v) && v >= 0) { state.img = v; changed(); } });
      const next = el("button", { type: "button", class: "plain", id: "vit-next", text: s("vit_next") });
      next.addEventListener("click", () => { state.img = shown ? (state.img + 1) % shown.n_images : state.img + 1; box.value = String(state.img); changed(); });
      controls.replaceChildren(el("label", { class: "row" }, el("span", { text: s("vit_label") }), box), next);
    }

    const send = loader(p, {
      request: () => ({ index: state.img }),
      // In the page: the shipped ViT (engine/vit.js, what s09's vit_view computes).
      fetch: async (req) => {
        const engine = await import("../../engine/vit.js");
        return engine.vitApp(await engine.loadViT(engine.VIT_MODEL, { onProgress: window.Lesson.modelProgress(p) }), req);
      },
      busy: () => s("loading"),
      done: (res) => { shown = res; draw(); },
    });

    function changed() {
      ctx.setParams({ img: state.img === FIRST_IMAGE ? null : String(state.img) });
      send();
    }

    function picture(r, values, id, label, grey) {
      const n = r.image.length, cell = 20, W = n * cell + 2;
      const node = svgNode("svg", { width: W, height: W, viewBox: `0 0 ${W} ${W}`, role: "img", "aria-label": label, id });
      const per = n / r.patch;
      for (let y = 0; y < n; y++) for (let x = 0; x < n; x++) {
        const v = grey ? r.image[y][x] : values[Math.floor(y / r.patch) * per + Math.floor(x / r.patch)];
        const g = Math.round(255 * (1 - v));
        node.append(svgNode("rect", { x: 1 + x * cell, y: 1 + y * cell, width: cell, height: cell, fill: grey ? `rgb(${g},${g},${g})` : css(sequential(v)) }));
      }
      for (let k = 0; k <= per; k++) {
        const at = 1 + k * r.patch * cell;
        node.append(svgNode("line", { x1: at, x2: at, y1: 1, y2: W - 1, stroke: "#d97a00", "stroke-width": 1 }));
        node.append(svgNode("line", { y1: at, y2: at, x1: 1, x2: W - 1, stroke: "#d97a00", "stroke-width": 1 }));
      }
      return node;
    }

    function render() {
      const r = shown;
      const last = r.cls[r.n_layers - 1];
      const mean = last[0].map((_, k) => last.reduce((a, row) => a + row[k], 0) / last.length);
      const top = Math.max(...mean);
      const scaled = mean.map((v) => (top > 0 ? v / top : 0));
      const best = r.probs.indexOf(Math.max(...r.probs));
      const rows = [], labels = [];
      r.cls.forEach((layer, l) => layer.forEach((row, h) => { rows.push(row); labels.push(s("layer_head", { l: l + 1, h: h + 1 })); }));
      return [
        el("p", { class: "apps-result" }, el("span", { text: s("vit_pred") + " " }),
          el("strong", { id: "vit-pred", "data-value": String(best), text: String(best) }),
          el("span", { text: " " + s("prob", { p: num(r.probs[best], 2) }) + " " + s("vit_truth", { d: r.label }) })),
        el("div", { class: "apps-pictures" },
          el("figure", {}, el("figcaption", { text: s("vit_image") }), picture(r, null, "vit-image", s("vit_image"), true)),
          el("figure", {}, el("figcaption", { text: s("vit_map") }), picture(r, scaled, "vit-map", s("vit_map"), false))),
        el("p", { class: "note", id: "vit-mean", "data-value": JSON.stringify(mean), text: s("vit_map_note", { top: num(top, 2) }) }),
        colourKey(s("vit_key"), "vit-key"),
        window.Charts.bars({ values: r.probs, labels: r.probs.map((_, d) => String(d)), idPrefix: "vit-p-", label: s("vit_bars"), max: 1, left: 40, format: (v) => num(v, 2), scaleTitle: window.Attn.t("fig_scale_prob") }),
        el("details", {}, el("summary", { text: s("vit_heads") }),
          ...headTable({ rows, rowLabels: labels, cols: r.cls[0][0].map((_, k) => "p" + (k + 1)), idPrefix: "vit-w", title: s("vit_table"), keyTitle: s("key_label"), keyId: "vit-w-key" })),
        el("p", { class: "note apps-honest", text: s("vit_honest") }),
        memo(el("p", { text: s("vit_source") })),
      ];
    }

    function draw() {
      if (shown) {
        keepFocus(controls, buildControls);
        keepFocus(root, () => p.out.replaceChildren(...render()));
      }
    }

    root.replaceChildren(controls, p.status, p.error, p.out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    changed();
  }

  function mountGat(root, ctx) {
    const { s } = ctx;
    const state = { node: Math.max(0, Math.min(33, Number(ctx.param("node", "0")) || 0)) };
    const controls = el("div", { class: "widget-controls inline" });
    const p = panes("gat");
    let shown = null;

    function buildControls() {
      const pick = el("select", { id: "gat-node", "aria-label": s("gat_label") },
        Array.from({ length: 34 }, (_, i) => el("option", { value: String(i), selected: i === state.node, text: String(i) })));
      pick.addEventListener("change", () => { state.node = Number(pick.value); changed(); });
      controls.replaceChildren(el("label", { class: "row" }, el("span", { text: s("gat_label") }), pick));
    }

    const send = loader(p, {
      request: () => ({ node: state.node }),
      // In the page: the shipped GAT (engine/gat.js, what s09's gat_view computes).
      fetch: async (req) => {
        const engine = await import("../../engine/gat.js");
        return engine.gatApp(await engine.loadGAT(engine.GAT_MODEL, { onProgress: window.Lesson.modelProgress(p) }), req);
      },
      busy: () => s("loading"),
      done: (res) => { shown = res; draw(); },
    });

    function changed() {
      ctx.setParams({ node: state.node === 0 ? null : String(state.node) });
      send();
    }

    const FACTION = ["#d97a00", "#6b4fa0"];
    function graph(r) {
      const W = Math.min(window.Charts.room(460, 300), 460), H = 340, pad = 18;
      const at = (i) => [pad + r.positions[i][0] * (W - 2 * pad), pad + r.positions[i][1] * (H - 2 * pad)];
      const node = svgNode("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": s("gat_graph", { n: r.node }), id: "gat-graph" });
      const weight = Object.fromEntries(r.neighbours.map((n) => [n.node, n.mean]));
      const top = Math.max(...r.neighbours.filter((n) => n.node !== r.node).map((n) => n.mean), 1e-9);
      for (const [a, b] of r.edges) {
        const [x1, y1] = at(a), [x2, y2] = at(b);
        const other = a === r.node ? b : b === r.node ? a : null;
        const w = other === null ? null : weight[other];
        node.append(svgNode("line", { x1, y1, x2, y2, stroke: w === null ? "#c9d1db" : css(sequential(Math.max(0.2, w / top))), "stroke-width": w === null ? 1 : 1 + 5 * (w / top), "data-value": w === null ? null : String(w), id: w === null ? null : `gat-edge-${other}` }));
      }
      r.truth.forEach((_, i) => {
        const [x, y] = at(i);
        const c = svgNode("circle", { cx: x, cy: y, r: i === r.node ? 11 : 8, fill: FACTION[r.predicted[i]], stroke: i === r.node ? "#1f2933" : r.predicted[i] !== r.truth[i] ? "#c00" : "#fff", "stroke-width": i === r.node || r.predicted[i] !== r.truth[i] ? 3 : 1 });
        node.append(c);
        node.append(svgNode("text", { x, y: y + 4, "text-anchor": "middle", "font-size": 12, fill: r.predicted[i] === 0 ? "#1f2933" : "#fff" }, String(i)));
      });
      return node;
    }

    function render() {
      const r = shown;
      const wrong = r.truth.filter((t, i) => t !== r.predicted[i] && !r.labelled.includes(i)).length;
      const held = r.n_nodes - r.labelled.length;
      const rows = r.neighbours.map((n) => [...n.weights, n.mean]);
      const heads = Array.from({ length: r.n_heads }, (_, h) => s("gat_head", { h: h + 1 }));
      // Projector mode: two slides (Lesson.slidePart), the graph with the member's prediction,
      // then each head's weights over the member's neighbours.
      return [
        ...slidePart(1, el("p", { class: "apps-result", id: "gat-pred", "data-value": String(r.predicted[r.node]),
          text: s("gat_pred", { n: r.node, f: s("gat_faction_" + r.predicted[r.node]), t: s("gat_faction_" + r.truth[r.node]) }) }),
        el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": s("gat_graph", { n: r.node }) }, graph(r)),
        el("div", { class: "apps-key-row" },
          swatch(FACTION[0]), el("span", { class: "note", text: s("gat_faction_0") }),
          swatch(FACTION[1]), el("span", { class: "note", text: s("gat_faction_1") }),
          el("span", { class: "note", text: s("gat_wrong_key") }))),
        slidePart(2, ...headTable({ rows, rowLabels: r.neighbours.map((n) => s("gat_member", { n: n.node })), cols: [...heads, s("gat_mean")], idPrefix: "gat-w", title: s("gat_table", { n: r.node }), keyTitle: s("key_label"), keyId: "gat-key" })),
        ...slidePart(1, el("p", { class: "note", text: s("gat_edges") }),
          el("p", { class: "note", id: "gat-score", "data-value": String(held - wrong), text: s("gat_score", { right: held - wrong, n: held }) }),
          el("p", { class: "note apps-honest", text: s("gat_honest") })),
        slidePart(2, memo(el("p", { text: s("gat_source") }))),
      ];
    }

    function draw() {
      if (shown) keepFocus(root, () => p.out.replaceChildren(...render()));
    }

    root.replaceChildren(controls, p.status, p.error, p.out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    changed();
  }

  window.Lesson.register("families", { mount: mountFamilies });
  window.Lesson.register("apps-mlm", { mount: mountMLM });
  window.Lesson.register("apps-qa", { mount: mountQA });
  window.Lesson.register("apps-gpt", { mount: mountGPT });
  window.Lesson.register("apps-summary", { mount: mountSummary, parts: 2 });
  window.Lesson.register("apps-vit", { mount: mountVit });
  window.Lesson.register("apps-gat", { mount: mountGat, parts: 2 });
})();
