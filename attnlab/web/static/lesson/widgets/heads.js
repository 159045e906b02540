// §5 The heads of a real model (MiniLM, computed in the page: engine/bert.js's headsView): a head view (lines from one word
// to the words it attends to, one colour per head) and a neuron view (q, k and q⊙k of one head for
// one query word). State in the address: text, layer and head (from 1), q (the query word), hv
// (the heads drawn, e.g. "1,5,9").
(function () {
  "use strict";
  const { el, fmt, debounce } = window.Attn;
  const NS = "http://www.w3.org/2000/svg";
  // One colour per head (12 for MiniLM), dark enough to read on white.
  // Heads: none of them the red or blue of the neuron view's signed values (figures.css has the same).
  const COLOURS = ["#e69f00", "#009e73", "#cc79a7", "#6b4c9a", "#8c6d31", "#000000", "#999933", "#5f6b7a", "#44aa99", "#a05a00", "#117733", "#d17fd0"];
  const colour = (h) => COLOURS[h % COLOURS.length];

  function svgNode(tag, attrs, text) {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) n.setAttribute(k, v);
    if (text !== undefined) n.textContent = text;
    return n;
  }

  // A row of small coloured cells, one per component (hover shows the number).
  function strip(values, limit, id) {
    const cell = 7, W = values.length * cell, H = 14;
    const svg = svgNode("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: "strip", id, "aria-hidden": "true" });
    values.forEach((v, i) => {
      const r = svgNode("rect", { x: i * cell, y: 0, width: cell - 1, height: H, fill: window.Charts.css(window.Charts.diverging(v, limit)), "data-value": v });
      r.append(svgNode("title", {}, fmt(v, 3)));
      svg.append(r);
    });
    return svg;
  }

  function mount(root, ctx) {
    const { s } = ctx;
    const int = (name, fallback) => {
      const x = Math.floor(Number(ctx.param(name, String(fallback))));
      return Number.isFinite(x) ? x : fallback;
    };
    const state = {
      text: ctx.param("text", s("default_text")),
      layer: Math.max(1, int("layer", 3)),
      head: Math.max(1, int("head", 1)),
      query: ctx.param("q", null) === null ? null : Math.max(0, int("q", 0)),
      heads: null, // the heads drawn (0-based); null: all
      everyWord: false,
    };
    const hv = ctx.param("hv", null);
    if (hv) state.heads = hv.split(",").map(Number).filter((h) => Number.isInteger(h) && h >= 1 && h <= 64).map((h) => h - 1);
    let shown = null;
    let seq = 0;
    const controls = el("div", { class: "widget-controls inline" });
    const status = el("p", { class: "note", id: "hv-status", role: "status" });
    const error = el("div", { class: "error hidden", id: "hv-error", role: "alert" });
    const out = el("div", { class: "widget-out", id: "hv-out", "data-seq": "0" });

    function remember() {
      ctx.setParams({
        text: state.text, layer: state.layer, head: state.head, q: state.query,
        hv: state.heads === null ? null : state.heads.map((h) => h + 1).join(","),
      });
    }

    function buildControls() {
      const text = el("input", { type: "text", id: "hv-text", value: state.text, class: "wide", list: "hv-sentences", "aria-label": s("text_label") });
      const sentences = el("datalist", { id: "hv-sentences" });
      import("../../engine/bert.js").then((b) => b.minilmSentences()).then((ss) => sentences.replaceChildren(...ss.map((v) => el("option", { value: v })))).catch(() => {});
      text.addEventListener("input", () => { state.text = text.value; state.query = null; changed(); });
      const layers = shown ? shown.n_layers : 6;
      const layer = el("select", { id: "hv-layer", "aria-label": s("layer_label") },
        Array.from({ length: layers }, (_, l) => el("option", { value: String(l + 1), selected: l + 1 === state.layer, text: String(l + 1) })));
      layer.addEventListener("change", () => { state.layer = Number(layer.value); changed(); });
      controls.replaceChildren(
        el("label", { class: "row grow" }, el("span", { text: s("text_label") }), text, sentences),
        el("label", { class: "row" }, el("span", { text: s("layer_label") }), layer));
    }

    // In the page: engine/bert.js answers from MiniLM's views (head_view's response).
    const view = async (req) => (await import("../../engine/bert.js")).headsView(req, {
      onProgress: (loaded, total) => { status.textContent = window.Attn.t(total > 0 ? "ls_model_progress" : "ls_model_progress_mb", { pct: Math.min(100, Math.round((100 * loaded) / (total || 1))), mb: (loaded / 1e6).toFixed(1) }); },
    });
    const send = debounce(async () => {
      const req = { text: state.text, layer: state.layer - 1, head: state.head - 1, query: state.query === null ? 0 : state.query };
      const mine = ++seq;
      status.textContent = s("loading");
      try {
        let res = await view(req);
        if (mine !== seq) return;
        if (state.query === null) {
          // First look at a sentence: start from "it" when there is one (the pronoun example).
          const it = res.tokens.indexOf("it");
          state.query = it >= 0 ? it : Math.min(1, res.tokens.length - 1);
          if (state.query !== req.query) {
            req.query = state.query;
            res = await view(req);
            if (mine !== seq) return;
          }
          remember();
        }
        error.classList.add("hidden");
        status.textContent = "";
        shown = res;
        draw();
        out.dataset.request = JSON.stringify(req);
        out.dataset.seq = String(mine);
      } catch (err) {
        if (mine !== seq) return;
        status.textContent = "";
        error.textContent = err && err.name === "DeviceError" ? window.Attn.t("ls_model_device") : window.Attn.t("error", { msg: err.message });
        error.classList.remove("hidden");
      }
    }, 300);

    function changed() {
      remember();
      send();
    }

    function headPicker(r) {
      const drawn = state.heads === null ? new Set(Array.from({ length: r.n_heads }, (_, h) => h)) : new Set(state.heads);
      const boxes = Array.from({ length: r.n_heads }, (_, h) => {
        const box = el("input", { type: "checkbox", id: "hv-head-" + h, checked: drawn.has(h) });
        box.addEventListener("change", () => {
          const now = new Set(state.heads === null ? Array.from({ length: r.n_heads }, (_, k) => k) : state.heads);
          if (box.checked) now.add(h);
          else now.delete(h);
          state.heads = Array.from(now).sort((a, b) => a - b);
          remember();
          drawLines();
        });
        const swatch = el("i", { class: "swatch head-swatch-" + h, "aria-hidden": "true" });
        return el("label", { class: "head-box" }, box, swatch, el("span", { text: String(h + 1) }));
      });
      const all = el("button", { type: "button", class: "plain", id: "hv-all", text: s("all_heads") });
      all.addEventListener("click", () => { state.heads = null; remember(); draw(); });
      const none = el("button", { type: "button", class: "plain", id: "hv-none", text: s("no_heads") });
      none.addEventListener("click", () => { state.heads = []; remember(); draw(); });
      const every = el("input", { type: "checkbox", id: "hv-every", checked: state.everyWord });
      every.addEventListener("change", () => { state.everyWord = every.checked; drawLines(); });
      return el("fieldset", { class: "heads" }, el("legend", { text: s("hv_heads") }), boxes, all, none,
        el("label", { class: "row" }, every, " ", el("span", { text: s("every_word") })));
    }

    function tokenButtons(r) {
      return el("div", { class: "tokens", role: "group", "aria-label": s("query_label") },
        r.tokens.map((tok, i) => {
          const b = el("button", { type: "button", class: "tok-button", id: "hv-tok-" + i, "aria-pressed": String(i === state.query), text: tok });
          b.addEventListener("click", () => { state.query = i; changed(); });
          return b;
        }));
    }

    let lineLayer = null;
    // The head view's width and the room for each column of words: 480 and 140, or narrower on a
    // phone (Charts.room) with the words the same size.
    let hvW = 480, hvGutter = 140;

    function drawLines() {
      const r = shown;
      if (!r || !lineLayer) return;
      const heads = state.heads === null ? Array.from({ length: r.n_heads }, (_, h) => h) : state.heads;
      const rowY = (i) => 24 + i * 22;
      const nodes = [];
      const rows = state.everyWord ? r.tokens.map((_, i) => i) : [state.query];
      for (const h of heads) {
        for (const i of rows) {
          r.weights[h][i].forEach((w, j) => {
            if (w < 0.02) return;
            nodes.push(svgNode("line", {
              x1: hvGutter + 10, y1: rowY(i) - 4, x2: hvW - hvGutter - 10, y2: rowY(j) - 4, stroke: colour(h), "stroke-opacity": Math.min(1, 0.15 + w),
              "stroke-width": 1 + 4 * w, class: "hv-line", "data-head": h, "data-from": i, "data-to": j, "data-w": w,
            }));
          });
        }
      }
      lineLayer.replaceChildren(...nodes);
      root.querySelectorAll(".hv-token-left").forEach((n) => n.classList.toggle("hl", Number(n.dataset.i) === state.query));
    }

    function headView(r) {
      const H = 24 + r.tokens.length * 22;
      hvW = window.Charts.room(480, 300);
      hvGutter = hvW < 480 ? 100 : 140;
      const svg = svgNode("svg", { width: hvW, height: H, viewBox: `0 0 ${hvW} ${H}`, id: "hv-svg", role: "img", "aria-label": s("head_view_label", { layer: state.layer }) });
      lineLayer = svgNode("g", {});
      svg.append(lineLayer);
      r.tokens.forEach((tok, i) => {
        svg.append(svgNode("text", { x: hvGutter, y: 24 + i * 22, "text-anchor": "end", "font-size": 13, class: "hv-token-left", "data-i": i, fill: "#1f2933" }, tok));
        svg.append(svgNode("text", { x: hvW - hvGutter, y: 24 + i * 22, "font-size": 13, fill: "#1f2933" }, tok));
      });
      return svg;
    }

    function neuronView(r) {
      const n = r.neuron;
      const limit = Math.max(1e-9, ...n.k.flat().map(Math.abs), ...n.q.map(Math.abs));
      const plimit = Math.max(1e-9, ...n.products.flat().map(Math.abs));
      const head = el("select", { id: "nv-head", "aria-label": s("nv_head") },
        Array.from({ length: r.n_heads }, (_, h) => el("option", { value: String(h + 1), selected: h + 1 === state.head, text: String(h + 1) })));
      head.addEventListener("change", () => { state.head = Number(head.value); changed(); });
      const rows = r.tokens.map((tok, j) => el("tr", { class: j === n.query ? "top-row" : null },
        el("th", { scope: "row", text: tok }),
        el("td", {}, strip(n.k[j], limit, "nv-k-" + j)),
        el("td", {}, strip(n.products[j], plimit, "nv-p-" + j)),
        el("td", { id: "nv-score-" + j, "data-value": n.scores[j], text: fmt(n.scores[j], 2) }),
        el("td", { id: "nv-scaled-" + j, "data-value": n.scaled[j], text: fmt(n.scaled[j], 2) }),
        el("td", { id: "nv-weight-" + j, "data-value": n.weights[j], text: fmt(n.weights[j], 3) })));
      return el("div", { class: "neuron" },
        el("div", { class: "row" }, el("label", { for: "nv-head", text: s("nv_head") }), head,
          el("span", { text: s("nv_query", { w: r.tokens[n.query] }) })),
        el("div", { class: "row" }, el("span", { class: "mono", text: "q (" + r.head_dim + ")" }), strip(n.q, limit, "nv-q")),
        el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": s("nv_title") },
          el("table", { class: "steps neuron-table", id: "nv-table" },
            el("thead", {}, el("tr", {}, ["nv_key", "nv_k", "nv_qk", "nv_score", "nv_scaled", "nv_weight"].map((k) => el("th", { scope: "col", text: s(k) })))),
            el("tbody", {}, rows))),
        el("p", { class: "note", text: s("nv_note", { dh: r.head_dim }) }));
    }

    function draw() {
      if (shown) window.Lesson.keepFocus(root, render);
    }

    function render() {
      const r = shown;
      // Projector mode: the head view, then the neuron view, one slide each (the querying word on both).
      const part = window.Lesson.slidePart;
      out.replaceChildren(
        ...part(1, el("p", { class: "note", text: s("model_line", { model: r.model, layers: r.n_layers, heads: r.n_heads }) }),
          headPicker(r)),
        el("p", { class: "subhead", text: s("query_label") }),
        tokenButtons(r),
        part(1, el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": s("head_view_title") }, headView(r))),
        ...part(2, el("p", { class: "subhead", text: s("nv_title") }), neuronView(r)));
      drawLines();
    }

    root.replaceChildren(controls, status, error, out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    remember();
    send();
  }

  window.Lesson.register("head-view", { mount, parts: 2 });
})();
