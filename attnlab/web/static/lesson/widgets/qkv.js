// §3 Query, key, value. Two modes, both computed in the page by lessonmath.js: the three books
// (threeBooks: the scores, the softmax written out, the weights, the books' values and their
// weighted sum) and random q and k with d_k components (dkSpread); their Python references are
// three_books and dk_spread in attnlab/web/lesson/s03_query_key_value.py. This file only formats
// the numbers. State in the address: mode, dk (a power of two), scale, s (the three scores), seed.
(function () {
  "use strict";
  const { el, fmt, debounce } = window.Attn;
  const DK_MAX_EXP = 10;
  const num = (x, digits) => window.Charts.num(x, digits);
  // exp(·) spans 4.5e-5 … 22026 here: three decimals, or three significant digits when tiny.
  const expText = (x) => (Math.abs(x) >= 0.001 ? num(x, 3) : Number(x).toPrecision(3));
  // The books' values are small whole numbers; print them without decimals.
  const valueText = (x) => (Number.isInteger(x) ? String(x) : num(x, 2));
  const vector = (xs, f) => "[" + xs.map(f).join(", ") + "]";
  const SUB = ["₀", "₁", "₂", "₃", "₄", "₅", "₆", "₇", "₈", "₉"];
  // The lesson's arithmetic (an ES module), resolved against this script's address.
  const lessonMath = import("../../engine/lessonmath.js");

  function parseScores(text) {
    const xs = String(text || "").split(",").map(Number);
    return xs.length === 3 && xs.every((x) => Number.isFinite(x) && Math.abs(x) <= 10) ? xs : [8, 4, 2];
  }

  function mount(root, ctx) {
    const { s } = ctx;
    const dkExp = Math.round(Math.log2(Number(ctx.param("dk", "64"))));
    const state = {
      mode: ctx.param("mode", "books") === "random" ? "random" : "books",
      dk: 2 ** (Number.isInteger(dkExp) && dkExp >= 0 && dkExp <= DK_MAX_EXP ? dkExp : 6),
      scale: ctx.param("scale", "1") !== "0",
      scores: parseScores(ctx.param("s", "8,4,2")),
      seed: Math.max(0, Math.min(1000000, Math.floor(Number(ctx.param("seed", "0"))) || 0)),
    };
    let seq = 0;
    let shown = null; // {mode, res, req}
    const out = el("div", { class: "widget-out", id: "qkv-out", "data-seq": "0" });
    const controls = el("div", { class: "widget-controls" });
    const error = el("div", { class: "error hidden", id: "qkv-error", role: "alert" });

    function remember() {
      ctx.setParams({
        mode: state.mode, dk: state.dk, scale: state.scale ? 1 : 0, s: state.scores.join(","),
        seed: state.mode === "random" ? state.seed : null,
      });
    }

    function buildControls() {
      const radios = ["books", "random"].map((m) => {
        const input = el("input", { type: "radio", name: "qkv-mode", value: m, id: "qkv-mode-" + m, checked: state.mode === m });
        input.addEventListener("change", () => { state.mode = m; changed(true); });
        return el("label", { class: "row" }, input, " ", el("span", { text: s("mode_" + m) }));
      });
      const dkOut = el("output", { id: "qkv-dk-out", for: "qkv-dk", text: String(state.dk) });
      const dk = el("input", {
        type: "range", id: "qkv-dk", min: "0", max: String(DK_MAX_EXP), step: "1", value: String(Math.log2(state.dk)),
        "aria-label": s("dk_label"), "aria-valuetext": "d_k = " + state.dk,
      });
      dk.addEventListener("input", () => {
        state.dk = 2 ** Number(dk.value);
        dkOut.textContent = String(state.dk);
        dk.setAttribute("aria-valuetext", "d_k = " + state.dk);
        changed(false);
      });
      const dkNote = el("p", { class: "note", id: "qkv-dk-note" });
      const scale = el("input", { type: "checkbox", id: "qkv-scale", checked: state.scale });
      scale.addEventListener("change", () => { state.scale = scale.checked; changed(true); });
      const books = el("div", { id: "qkv-books-controls" }, state.scores.map((v, i) => {
        const o = el("output", { id: `qkv-score-out-${i}`, text: fmt(v, 1) });
        const slider = el("input", {
          type: "range", id: "qkv-score-" + i, min: "-10", max: "10", step: "0.5", value: String(v),
          "aria-label": s("score_of", { i: i + 1 }),
        });
        slider.addEventListener("input", () => { state.scores[i] = Number(slider.value); o.textContent = fmt(state.scores[i], 1); changed(false); });
        return el("label", { class: "row" }, el("span", { class: "name", text: s("book", { i: i + 1 }) }), slider, o);
      }), el("label", { class: "row" }, scale, " ", el("span", { text: s("scale_label") })));
      const seed = el("input", { type: "number", id: "qkv-seed", min: "0", max: "1000000", step: "1", value: String(state.seed), "aria-label": s("seed_label") });
      seed.addEventListener("input", () => {
        const x = Number(seed.value);
        if (Number.isInteger(x) && x >= 0 && x <= 1000000) { state.seed = x; changed(false); }
      });
      const redraw = el("button", { type: "button", class: "plain", id: "qkv-redraw", text: s("redraw") });
      redraw.addEventListener("click", () => { state.seed = (state.seed + 1) % 1000001; seed.value = String(state.seed); changed(false); });
      const random = el("div", { id: "qkv-random-controls" },
        el("label", { class: "row" }, el("span", { text: s("seed_label") }), seed, redraw));
      controls.replaceChildren(
        el("fieldset", {}, el("legend", { text: s("mode_label") }), radios),
        el("fieldset", {}, el("legend", { text: s("dk_label") }), el("div", { class: "row" }, dk, el("span", { class: "mono" }, "d_k = ", dkOut)), dkNote),
        books, random);
      sync();
    }

    // d_k is disabled where it changes nothing: the three books without the division.
    function sync() {
      const books = state.mode === "books";
      const idle = books && !state.scale;
      const dk = root.querySelector("#qkv-dk");
      dk.disabled = idle;
      const note = root.querySelector("#qkv-dk-note");
      note.textContent = idle ? s("dk_no_effect") : books ? s("dk_books_note") : s("dk_random_note");
      root.querySelector("#qkv-books-controls").classList.toggle("hidden", !books);
      root.querySelector("#qkv-random-controls").classList.toggle("hidden", books);
    }

    // The mode (and so the function) is fixed when the request is built: a toggle while the
    // module is still loading must not run the other mode's function on this request.
    async function answer(mode, req) {
      const M = await lessonMath;
      return mode === "books" ? M.threeBooks(req) : M.dkSpread(req);
    }

    const send = debounce(async () => {
      const mode = state.mode;
      const req = mode === "books"
        ? { scores: state.scores.slice(), d_k: state.dk, scale: state.scale }
        : { d_k: state.dk, seed: state.seed };
      const mine = ++seq;
      try {
        const res = await answer(mode, req);
        if (mine !== seq) return;
        error.classList.add("hidden");
        shown = { mode, res, req };
        draw();
        out.dataset.request = JSON.stringify(req);
        out.dataset.mode = mode;
        out.dataset.lookVariant = mode === "random" ? "random" : ""; // the look line follows the mode
        out.dataset.seq = String(mine);
      } catch (err) {
        if (mine !== seq) return;
        error.textContent = window.Attn.t("error", { msg: err.message });
        error.classList.remove("hidden");
      }
    }, 60);

    function changed(structural) {
      remember();
      if (structural) sync();
      send();
    }

    function drawBooks(res) {
      const best = res.weights.indexOf(Math.max(...res.weights));
      const bookName = (i) => s("book", { i: i + 1 });
      // 1–2. The scores, what enters the softmax, its exp, the weights.
      const rows = res.weights.map((w, i) => el("tr", { class: i === best ? "top-row" : null },
        el("th", { scope: "row", text: bookName(i) }),
        el("td", { id: "qkv-raw-" + i, "data-value": res.raw[i], text: num(res.raw[i], 2) }),
        el("td", { id: "qkv-scaled-" + i, "data-value": res.scaled[i], text: num(res.scaled[i], 3) }),
        el("td", { id: "qkv-exp-" + i, "data-value": res.exp[i], text: expText(res.exp[i]) }),
        el("td", { id: "qkv-weight-" + i, "data-value": w, text: num(w, 3) })));
      const table = el("table", { class: "steps", id: "qkv-steps" },
        el("caption", { text: res.scale ? s("steps_caption", { dk: res.d_k }) : s("steps_caption_off") }),
        el("thead", {}, el("tr", {}, el("th", { scope: "col", text: s("th_book") }), el("th", { scope: "col", text: s("th_raw") }),
          el("th", { scope: "col", text: s(res.scale ? "th_scaled" : "th_scaled_off") }),
          el("th", { scope: "col", text: s("th_exp") }), el("th", { scope: "col", text: s("th_weight") }))),
        el("tbody", {}, rows));
      // The softmax in one line, with book 1's numbers: exp(a) / (exp(a) + exp(b) + exp(c)) = e / Σ = w.
      const inputs = res.scaled.map((x) => "exp(" + num(x, 3) + ")");
      const softmax = el("p", { class: "qkv-softmax" },
        el("span", { text: s("softmax_intro", { book: bookName(0) }) }), " ",
        el("span", { class: "mono", id: "qkv-softmax", "data-value": res.weights[0], "data-exp": res.exp[0], "data-sum": res.exp_sum,
          text: `${inputs[0]} / (${inputs.join(" + ")}) = ${expText(res.exp[0])} / ${expText(res.exp_sum)} = ${num(res.weights[0], 3)}` }));
      const chart = window.Charts.bars({
        values: res.weights, labels: res.weights.map((_, i) => bookName(i)), idPrefix: "qkv-bar-",
        label: s("weights_title"), format: (w) => (100 * w).toFixed(1) + "%",
      });
      const saturated = !res.scale && res.weights[best] > 0.95;
      // 3. The values and their weighted sum: the worked numbers per component, then the vector.
      const dims = res.output.length;
      const values = el("table", { class: "steps qkv-values", id: "qkv-values" },
        el("caption", { text: s("values_caption") }),
        el("thead", {}, el("tr", {}, el("th", { scope: "col", text: s("th_book") }), el("th", { scope: "col", text: s("th_weight") }),
          el("th", { scope: "col", text: s("th_value") }), el("th", { scope: "col", text: s("th_weighted") }))),
        el("tbody", {}, res.values.map((v, i) => el("tr", {},
          el("th", { scope: "row", text: bookName(i) }),
          el("td", { "data-value": res.weights[i], text: num(res.weights[i], 3) }),
          el("td", { id: "qkv-value-" + i, "data-values": JSON.stringify(v), text: vector(v, valueText) }),
          el("td", { id: "qkv-weighted-" + i, "data-values": JSON.stringify(res.weighted[i]), text: vector(res.weighted[i], (x) => num(x, 3)) })))));
      const sums = el("ul", { class: "qkv-sums", id: "qkv-sums" },
        Array.from({ length: dims }, (_, j) => el("li", {},
          el("span", { class: "qkv-component", text: s("component", { j: j + 1 }) }), " ",
          el("span", { class: "mono", id: "qkv-sum-" + j, "data-value": res.output[j],
            text: res.values.map((v, i) => `${num(res.weights[i], 3)}×${valueText(v[j])}`).join(" + ") + " = " + num(res.output[j], 3) }))));
      const output = el("p", { class: "qkv-output" },
        el("strong", { text: s("output_label") }), " ",
        el("span", { class: "mono", id: "qkv-output", "data-values": JSON.stringify(res.output),
          text: s("output_line", {
            terms: res.weights.map((w, i) => `${num(w, 3)}·v${SUB[i + 1] || i + 1}`).join(" + "),
            vec: vector(res.output, (x) => num(x, 3)),
          }) }));
      out.replaceChildren(el("div", {},
        table,
        softmax,
        el("p", { class: "subhead", text: s("weights_title") }), chart,
        el("p", { id: "qkv-top", text: s("top_line", { book: bookName(best), pct: (100 * res.weights[best]).toFixed(1) }) }),
        saturated ? el("p", { class: "warn", id: "qkv-saturated", text: s("saturated") }) : null,
        el("p", { class: "subhead", text: s("values_title") }),
        values, sums, output,
        el("p", { class: "note", text: s("rounding") }),
        el("p", { class: "note" }, el("a", { href: "/playground", text: s("open_playground") })),
        window.Lesson.memo(el("p", { text: s("source_books") }))));
    }

    function drawRandom(res) {
      const C = window.Charts;
      const rawTicks = [-128, -64, 0, 64, 128];
      const keyLabels = res.example.raw.map((_, i) => s("key", { i: i + 1 }));
      const row = res.table.find((r) => r.d_k === res.d_k);
      const table = el("table", { class: "steps", id: "qkv-table" },
        el("caption", { text: s("table_title") }),
        el("thead", {}, el("tr", {}, ["th_dk", "th_sqrt", "th_std", "th_max_plain", "th_max_scaled"].map((k) => el("th", { scope: "col", text: s(k) })))),
        el("tbody", {}, res.table.map((r) => el("tr", { class: r.d_k === res.d_k ? "top-row" : null, id: "qkv-row-" + r.d_k },
          el("th", { scope: "row", text: String(r.d_k) }),
          el("td", { "data-value": r.sqrt_dk, text: fmt(r.sqrt_dk, 2) }),
          el("td", { class: "std", "data-value": r.std_raw, text: fmt(r.std_raw, 2) }),
          el("td", { class: "max-plain", "data-value": r.mean_max_unscaled, text: fmt(r.mean_max_unscaled, 3) }),
          el("td", { class: "max-scaled", "data-value": r.mean_max_scaled, text: fmt(r.mean_max_scaled, 3) })))));
      out.replaceChildren(el("div", {},
        el("div", { class: "pair" },
          el("figure", {},
            C.histogram({ edges: res.raw_hist.edges, counts: res.raw_hist.counts, idPrefix: "qkv-hraw-", ticks: rawTicks, label: s("hist_raw", { dk: res.d_k }) }),
            el("figcaption", { text: s("hist_raw", { dk: res.d_k }) })),
          el("figure", {},
            C.histogram({ edges: res.scaled_hist.edges, counts: res.scaled_hist.counts, idPrefix: "qkv-hscaled-", ticks: [-6, -3, 0, 3, 6], colour: "#1b7f5a", label: s("hist_scaled", { dk: res.d_k }) }),
            el("figcaption", { text: s("hist_scaled", { dk: res.d_k }) }))),
        el("p", { id: "qkv-spread" }, s("spread_line", { dk: res.d_k, std: fmt(row.std_raw, 2), sqrt: fmt(res.sqrt_dk, 2) })),
        res.raw_hist.outside ? el("p", { class: "note", id: "qkv-outside", text: s("outside", { n: res.raw_hist.outside }) }) : null,
        el("p", { class: "subhead", text: s("example_title", { k: res.keys }) }),
        el("div", { class: "pair" },
          el("figure", {}, C.bars({ values: res.example.weights_unscaled, labels: keyLabels, idPrefix: "qkv-plain-", colour: "#b35900", label: s("weights_plain") }),
            el("figcaption", { text: s("weights_plain") })),
          el("figure", {}, C.bars({ values: res.example.weights_scaled, labels: keyLabels, idPrefix: "qkv-soft-", label: s("weights_scaled", { dk: res.d_k }) }),
            el("figcaption", { text: s("weights_scaled", { dk: res.d_k }) }))),
        table,
        window.Lesson.memo(el("p", { text: s("source_random", { n: res.samples, k: res.keys }) }))));
    }

    function draw() {
      if (!shown) return;
      if (shown.mode === "books") drawBooks(shown.res);
      else drawRandom(shown.res);
    }

    root.replaceChildren(el("div", { class: "widget-grid" }, controls, el("div", {}, error, out)));
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    remember();
    send();
  }

  window.Lesson.register("qkv", { mount });
})();
