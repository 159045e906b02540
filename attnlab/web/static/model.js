// The model page: run a model chosen at start-up on a sentence (POST /api/run) and draw the
// attention maps of every layer and head, with a picker, an all-heads grid and downloads.
(function () {
  "use strict";
  const { t, el, lang, getJSON, postJSON } = window.Attn;
  const $ = (id) => document.getElementById(id);
  const TEXT_STORE = "attnlab.model.text";

  let models = [];
  let result = null; // the last /api/run response
  const view = { group: null, layer: 0, head: 0 };
  let mainScene = null;
  let maps = []; // hover controllers of every drawn map: {highlight, rowsAxis, colsAxis}
  let runs = 0;

  // Whitespace tokens (a character model's spaces) would be invisible labels.
  const shownToken = (tok) => (tok.trim() ? tok : "␣");

  function groupInfo() {
    return result.groups.find((g) => g.name === view.group);
  }

  function options(select, items, selected) {
    select.replaceChildren(...items.map(([value, label]) => el("option", { value: String(value), selected: String(value) === String(selected) }, label)));
  }

  async function init() {
    const saved = window.sessionStorage.getItem(TEXT_STORE);
    if (saved) $("text").value = saved;
    try {
      models = await getJSON("/api/models");
    } catch (err) {
      showError(err.message);
      return;
    }
    $("no-models").classList.toggle("hidden", models.length > 0);
    $("run").disabled = models.length === 0;
    fillModels();
    $("run").addEventListener("click", runModel);
    $("text").addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) runModel();
    });
    $("model-select").addEventListener("change", showKind);
    $("group").addEventListener("change", (ev) => { view.group = ev.target.value; view.layer = 0; view.head = 0; draw(); });
    $("layer").addEventListener("change", (ev) => { view.layer = Number(ev.target.value); draw(); });
    $("head").addEventListener("change", (ev) => { view.head = Number(ev.target.value); draw(); });
    $("stretch").addEventListener("change", () => result && draw());
    $("png").addEventListener("click", () => mainScene && window.Heatmap.downloadPNG(mainScene, fileName("png")));
    $("svg").addEventListener("click", () => mainScene && window.Heatmap.downloadSVG(mainScene, fileName("svg")));
  }

  function fillModels() {
    const current = $("model-select").value;
    options($("model-select"), models.map((m) => [m.name, m.name + " (" + t("kind_" + m.kind) + ")"]), current);
    showKind();
  }

  // A shipped model comes with a one-line description (in both languages) and inputs to try:
  // clicking one puts it in the text box and runs it; an empty text box starts with the first.
  function showKind() {
    const m = models.find((x) => x.name === $("model-select").value);
    $("model-kind").textContent = m ? t("kind_" + m.kind) : "";
    const about = m && m.description ? m.description[lang()] || m.description.en : "";
    $("model-about").textContent = about;
    const examples = m ? m.examples || [] : [];
    $("examples").classList.toggle("hidden", examples.length === 0);
    $("example-list").replaceChildren(...examples.map((text) =>
      el("button", { type: "button", class: "plain example", text, onclick: () => tryExample(text) })));
    if (examples.length && !$("text").value.trim()) $("text").value = examples[0];
  }

  function tryExample(text) {
    if ($("run").disabled) return; // a run is in progress
    $("text").value = text;
    runModel();
  }

  function showError(message) {
    $("error").textContent = message ? t("error", { msg: message }) : "";
    $("error").classList.toggle("hidden", !message);
  }

  async function runModel() {
    const text = $("text").value;
    window.sessionStorage.setItem(TEXT_STORE, text);
    const button = $("run");
    button.disabled = true;
    button.textContent = t("md_running");
    showError("");
    try {
      const res = await postJSON("/api/run", { model: $("model-select").value, text });
      result = res;
      // Cross-attention (which input word each output word looked at) is the map learners ask for first.
      const names = res.groups.map((g) => g.name);
      view.group = names.includes("cross") ? "cross" : names.length ? names[0] : null;
      view.layer = 0;
      view.head = 0;
      runs += 1;
      draw();
    } catch (err) {
      showError(err.message);
    } finally {
      button.disabled = false;
      button.textContent = t("md_run");
    }
  }

  function fileName(ext) {
    return `attnlab-${result.model}-${view.group}-L${view.layer + 1}-H${view.head + 1}.${ext}`;
  }

  function tokenLists() {
    const box = $("token-lists");
    box.replaceChildren(
      ...Object.entries(result.tokens).map(([axis, tokens]) =>
        el("div", {},
          el("h3", { text: t("axis_" + axis) }),
          el("div", { class: "tokens", id: "tokens-" + axis },
            tokens.map((tok, i) => el("span", {
              class: "tok", "data-axis": axis, "data-i": i, text: shownToken(tok),
              onmouseenter: () => highlightToken(axis, i), onmouseleave: () => highlightToken(null, null),
            }))))
      )
    );
  }

  function highlightToken(axis, i) {
    document.querySelectorAll(".tok").forEach((n) =>
      n.classList.toggle("hl", axis !== null && n.dataset.axis === axis && n.dataset.i === String(i)));
    for (const m of maps) {
      const r = axis !== null && m.rowsAxis === axis ? i : null;
      const c = axis !== null && m.colsAxis === axis && m.rowsAxis !== axis ? i : null;
      m.highlight(r, c);
    }
  }

  function draw() {
    $("result").classList.remove("hidden");
    $("output").textContent = result.output;
    $("elapsed").textContent = t("md_elapsed", { ms: Math.round(result.elapsed_ms) });
    tokenLists();
    if (!view.group) return;
    const g = groupInfo();
    options($("group"), result.groups.map((x) => [x.name, t("group_" + x.name)]), view.group);
    options($("layer"), Array.from({ length: g.layers }, (_, l) => [l, String(l + 1)]), view.layer);
    options($("head"), Array.from({ length: g.heads }, (_, h) => [h, String(h + 1)]), view.head);
    maps = [];
    drawMain(g);
    drawGrid(g);
    $("result").dataset.runs = String(runs);
  }

  // Colours run from 0 to 1, or (the default) from 0 to the map's largest weight, so that the
  // pattern of a head with spread-out weights is still visible. Hovering shows the true number.
  function fillFor(matrix) {
    const top = $("stretch").checked ? Math.max(...matrix.flat(), 1e-9) : 1;
    return (v) => window.Heatmap.blues(v / top);
  }

  function drawMain(g) {
    const matrix = result.attentions[g.name][view.layer][view.head];
    const rowLabels = result.tokens[g.rows].map(shownToken);
    const colLabels = result.tokens[g.cols].map(shownToken);
    const cell = Math.max(14, Math.min(40, Math.floor(640 / Math.max(colLabels.length, 1))));
    mainScene = window.Heatmap.scene({
      matrix, rowLabels, colLabels, cell, values: cell >= 30, fill: fillFor(matrix),
      title: t("md_map_title", { group: t("group_" + g.name), l: view.layer + 1, h: view.head + 1 }),
    });
    const svg = window.Heatmap.toSVG(mainScene);
    svg.id = "main-map";
    svg.dataset.rows = String(matrix.length);
    svg.dataset.cols = String(matrix[0].length);
    const hover = window.Heatmap.interactive(svg, (r, c, v) => {
      $("hover").textContent = r === null ? "" : t("md_cell", { q: rowLabels[r], k: colLabels[c], w: Number(v).toFixed(4) });
    });
    maps.push({ highlight: hover.highlight, rowsAxis: g.rows, colsAxis: g.cols });
    $("heatmap").replaceChildren(
      svg,
      el("p", { class: "note", text: t("md_axes", { rows: t("axis_" + g.rows), cols: t("axis_" + g.cols) }) + " · " +
        t("md_rows_cols", { rows: matrix.length, cols: matrix[0].length }) })
    );
  }

  function drawGrid(g) {
    const grid = $("grid");
    const maps4 = result.attentions[g.name];
    const rows = maps4[0][0].length;
    const cols = maps4[0][0][0].length;
    const cell = Math.max(2, Math.min(12, Math.floor(132 / Math.max(rows, cols))));
    grid.style.gridTemplateColumns = `repeat(${g.heads}, max-content)`;
    const figures = [];
    maps4.forEach((layer, l) => layer.forEach((matrix, h) => {
      const svg = window.Heatmap.toSVG(window.Heatmap.scene({ matrix, cell, fill: fillFor(matrix) }));
      const hover = window.Heatmap.interactive(svg);
      maps.push({ highlight: hover.highlight, rowsAxis: g.rows, colsAxis: g.cols });
      figures.push(el("figure", {
        class: l === view.layer && h === view.head ? "selected" : null, "data-layer": l, "data-head": h,
        onclick: () => { view.layer = l; view.head = h; draw(); },
      }, svg, el("figcaption", { text: t("md_small_title", { l: l + 1, h: h + 1 }) })));
    }));
    grid.replaceChildren(...figures);
  }

  document.addEventListener("DOMContentLoaded", init);
  document.addEventListener("langchange", () => {
    fillModels();
    $("run").textContent = t("md_run");
    if (result) draw();
  });
})();
