// The playground: three books, live. Every number shown comes from POST /api/playground
// (attnlab.explain.compute_steps); this file only gathers the controls and draws the answer.
(function () {
  "use strict";
  const { t, el, fmt, postJSON, debounce } = window.Attn;
  const SUB = ["₀", "₁", "₂", "₃", "₄", "₅", "₆", "₇", "₈", "₉"];
  const MAX_WIDTH = 8;

  const state = {
    mode: "scores",
    scores: [8, 4, 2],
    dk: 64,
    scale: true,
    values: [
      [1, 0, 0],
      [0, 1, 0],
      [0, 0, 1],
    ],
    width: 4,
    query: [1, 2, 0, 1, 0, 0, 0, 0],
    keys: [
      [2, 1, 0, 1, 0, 0, 0, 0],
      [0, 1, 1, 0, 0, 0, 0, 0],
      [1, 0, 2, -1, 0, 0, 0, 0],
    ],
  };
  let seq = 0;
  let shown = null; // the last response drawn, redrawn when the language changes

  const $ = (id) => document.getElementById(id);
  const book = (i) => t("book", { i: i + 1 });

  function request() {
    const req = { scale: state.scale, values: state.values.map((v) => v.slice()) };
    if (state.mode === "scores") {
      req.scores = state.scores.slice();
      req.d_k = state.dk;
    } else {
      req.query = state.query.slice(0, state.width);
      req.keys = state.keys.map((k) => k.slice(0, state.width));
    }
    return req;
  }

  // A number field that updates state only while its text is a finite number.
  function numberInput(id, value, onValue, label) {
    return el("input", {
      type: "number", id, value: String(value), step: "0.1", "aria-label": label,
      oninput: (ev) => {
        const x = parseFloat(ev.target.value);
        ev.target.setCustomValidity(Number.isFinite(x) ? "" : "number");
        if (Number.isFinite(x)) onValue(x);
      },
    });
  }

  function buildScores() {
    const box = $("score-controls");
    box.replaceChildren(
      ...state.scores.map((s, i) => {
        const out = el("output", { id: "score-out-" + i, for: "score-" + i }, fmt(s, 1));
        const slider = el("input", {
          type: "range", id: "score-" + i, min: "-10", max: "10", step: "0.1", value: String(s),
          "aria-label": t("score_of", { i: i + 1 }),
          oninput: (ev) => {
            state.scores[i] = parseFloat(ev.target.value);
            out.textContent = fmt(state.scores[i], 1);
            changed();
          },
        });
        return el("label", { class: "row" }, el("span", { class: "name", text: book(i) }), slider, out);
      })
    );
  }

  function buildVectors() {
    const box = $("vector-controls");
    const widthSelect = el(
      "select", { id: "width", onchange: (ev) => { state.width = Number(ev.target.value); buildVectors(); changed(); } },
      Array.from({ length: MAX_WIDTH }, (_, j) => el("option", { value: String(j + 1), selected: j + 1 === state.width }, String(j + 1)))
    );
    const head = el("tr", {}, el("th"), Array.from({ length: state.width }, (_, j) => el("th", { text: t("dim", { j: j + 1 }) })));
    const qRow = el("tr", {}, el("th", { text: "q" }),
      Array.from({ length: state.width }, (_, j) => el("td", {}, numberInput("query-" + j, state.query[j], (x) => { state.query[j] = x; changed(); }, "q " + (j + 1)))));
    const kRows = state.keys.map((k, i) => el("tr", {}, el("th", { text: book(i) }),
      Array.from({ length: state.width }, (_, j) => el("td", {}, numberInput("key-" + i + "-" + j, k[j], (x) => { state.keys[i][j] = x; changed(); }, book(i) + " " + (j + 1))))));
    box.replaceChildren(
      el("fieldset", {},
        el("legend", { text: t("query_label") + " / " + t("keys_label") }),
        el("label", { class: "row" }, el("span", { text: t("width_label") }), widthSelect),
        el("table", { class: "vectors" }, head, qRow, kRows))
    );
  }

  function buildValues() {
    const dims = state.values[0].length;
    const head = el("tr", {}, el("th"), Array.from({ length: dims }, (_, j) => el("th", { text: t("dim", { j: j + 1 }) })));
    const rows = state.values.map((v, i) => el("tr", {}, el("th", { text: book(i) }),
      v.map((x, j) => el("td", {}, numberInput("value-" + i + "-" + j, x, (y) => { state.values[i][j] = y; changed(); }, book(i) + " v" + (j + 1))))));
    $("values").replaceChildren(head, ...rows);
  }

  function syncDk() {
    const vectors = state.mode === "vectors";
    $("dk").disabled = vectors;
    $("dk-number").disabled = vectors;
    $("dk-note").classList.toggle("hidden", !vectors);
    $("dk-note").textContent = t("dk_vectors_note", { n: state.width });
    const dk = vectors ? state.width : state.dk;
    $("dk").value = String(dk);
    if (document.activeElement !== $("dk-number")) $("dk-number").value = String(dk);
    $("score-controls").classList.toggle("hidden", vectors);
    $("vector-controls").classList.toggle("hidden", !vectors);
  }

  const send = debounce(async () => {
    const req = request();
    const mine = ++seq;
    try {
      const res = await postJSON("/api/playground", req);
      if (mine !== seq) return; // a newer request is on its way
      $("error").classList.add("hidden");
      draw(res, req, mine);
    } catch (err) {
      if (mine !== seq) return;
      $("error").textContent = t("error", { msg: err.message });
      $("error").classList.remove("hidden");
    }
  }, 60);

  function changed() {
    syncDk();
    send();
  }

  function chart(weights) {
    const NS = "http://www.w3.org/2000/svg";
    // 520 px, or the width of its box where that is narrower (a phone), its text the same size.
    // (Before the font is in, the page is not laid out: then the screen's width less the margins.)
    const room = $("chart").clientWidth || document.documentElement.clientWidth - 50;
    const W = Math.max(280, Math.min(520, room)), bar = 26, gap = 10, left = 80, right = 70;
    const svg = document.createElementNS(NS, "svg");
    const H = weights.length * (bar + gap) + gap;
    svg.setAttribute("width", W);
    svg.setAttribute("height", H);
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", t("chart_title"));
    const span = W - left - right;
    const best = weights.indexOf(Math.max(...weights));
    const add = (tag, attrs, text) => {
      const n = document.createElementNS(NS, tag);
      for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
      if (text !== undefined) n.textContent = text;
      svg.append(n);
      return n;
    };
    weights.forEach((w, i) => {
      const y = gap + i * (bar + gap);
      add("text", { x: left - 8, y: y + bar * 0.68, "text-anchor": "end", "font-size": 13 }, book(i));
      add("rect", { x: left, y, width: span, height: bar, fill: "#eef2f7" });
      add("rect", { id: "bar-" + i, x: left, y, width: Math.max(0, w * span), height: bar, fill: i === best ? "#2456a6" : "#7fa3d9", "data-value": w });
      add("text", { x: left + span + 6, y: y + bar * 0.68, "font-size": 13, "font-family": "DejaVu Sans Mono, monospace" }, (100 * w).toFixed(1) + "%");
    });
    return svg;
  }

  function vec(xs, idPrefix) {
    return el("span", {}, "[", xs.map((x, j) => [j ? ", " : "", el("span", { id: idPrefix ? idPrefix + j : null, "data-value": x, text: fmt(x) })]), "]");
  }

  function draw(res, req, mine) {
    shown = { res, req, mine };
    const results = $("results");
    const best = res.weights.indexOf(Math.max(...res.weights));
    $("step2-title").textContent = t(res.scale ? "step2" : "step2_off");
    $("steps-table").tBodies[0].replaceChildren(
      ...res.weights.map((w, i) => el("tr", { class: i === best ? "top-row" : null },
        el("td", { text: book(i) }),
        el("td", { id: "raw-" + i, "data-value": res.raw[i], text: fmt(res.raw[i]) }),
        el("td", { id: "scaled-" + i, "data-value": res.scaled[i], text: fmt(res.scaled[i]) }),
        el("td", { id: "weight-" + i, "data-value": w, text: fmt(w) })))
    );
    $("chart").replaceChildren(chart(res.weights));
    $("top-line").textContent = t("top", { book: book(best), pct: (100 * res.weights[best]).toFixed(1) });
    $("saturated").classList.toggle("hidden", !(!res.scale && res.weights[best] > 0.95 && res.d_k > 1));
    $("output").replaceChildren(vec(res.output, "out-"));
    formula(res);
    results.dataset.request = JSON.stringify(req);
    results.dataset.seq = String(mine);
  }

  function formula(res) {
    const n = res.raw.length;
    const s = (i) => "s" + SUB[i + 1];
    const lines = [el("div", { class: "general", text: t(res.scale ? "formula_general" : "formula_general_off") })];
    if (res.scale) {
      lines.push(el("div", { text: t("sqrt_line", { dk: res.d_k, sqrt: fmt(Math.sqrt(res.d_k)) }) }));
      for (let i = 0; i < n; i++) {
        lines.push(el("div", { text: `${s(i)} = q·k${SUB[i + 1]} / √d_k = ${fmt(res.raw[i])} / ${fmt(Math.sqrt(res.d_k))} = ${fmt(res.scaled[i])}` }));
      }
    } else {
      lines.push(el("div", { text: t("factor_off") }));
      for (let i = 0; i < n; i++) lines.push(el("div", { text: `${s(i)} = q·k${SUB[i + 1]} = ${fmt(res.scaled[i])}` }));
    }
    const exp = (x) => ["e", el("sup", { text: fmt(x, 2) })];
    const denom = () => res.scaled.map((x, j) => [j ? " + " : "", exp(x)]); // fresh nodes for each line
    for (let i = 0; i < n; i++) {
      lines.push(el("div", {}, `w${SUB[i + 1]} = e`, el("sup", { text: s(i) }), " / Σⱼ e", el("sup", { text: "sⱼ" }),
        " = ", exp(res.scaled[i]), " / (", denom(), `) = ${fmt(res.weights[i])}`));
    }
    const terms = res.weights.map((w, i) => `${fmt(w, 3)}·[${res.values[i].map((x) => fmt(x, 1)).join(", ")}]`).join(" + ");
    lines.push(el("div", { text: "o = Σ wᵢ·vᵢ" }));
    lines.push(el("div", { text: `  = ${terms}` }));
    lines.push(el("div", { text: `  = [${res.output.map((x) => fmt(x)).join(", ")}]` }));
    $("formula").replaceChildren(...lines);
  }

  function buildAll() {
    buildScores();
    buildVectors();
    buildValues();
    syncDk();
    if (shown) draw(shown.res, shown.req, shown.mine);
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("mode-scores").checked = true; // the browser may restore an older choice on reload
    $("scale").checked = state.scale;
    document.querySelectorAll('input[name="mode"]').forEach((radio) =>
      radio.addEventListener("change", (ev) => { state.mode = ev.target.value; changed(); }));
    $("dk").addEventListener("input", (ev) => { state.dk = Number(ev.target.value); $("dk-number").value = ev.target.value; changed(); });
    $("dk-number").addEventListener("input", (ev) => {
      const x = Math.round(Number(ev.target.value));
      if (x >= 1 && x <= 1024) { state.dk = x; changed(); }
    });
    $("scale").addEventListener("change", (ev) => { state.scale = ev.target.checked; changed(); });
    buildAll();
    send();
  });
  document.addEventListener("langchange", buildAll);
})();
