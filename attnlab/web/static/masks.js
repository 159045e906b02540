// The masks page: the grid comes from POST /api/mask (attnlab.functional's mask helpers); clicking
// a cell adds it to the list of hand-flipped cells that the API applies after the helpers.
(function () {
  "use strict";
  const { t, el, postJSON, debounce } = window.Attn;
  const $ = (id) => document.getElementById(id);
  const MAX_WORDS = 24;
  const ALLOWED = "#2456a6";
  const BLOCKED = "#edf1f6";
  const DEFAULT_TOKENS = { en: "the cat sat on the mat", ja: "猫 が マット の 上 に 座った" };

  let toggled = new Set(); // "row,col"
  let tokensEdited = false;
  let lastLength = null;
  let seq = 0;
  let shown = null;

  function words() {
    return $("tokens").value.split(/\s+/).filter(Boolean).slice(0, MAX_WORDS);
  }

  function labels() {
    const pads = Number($("padding").value);
    return words().concat(Array(pads).fill("<pad>"));
  }

  function request() {
    const length = Math.max(1, labels().length);
    if (length !== lastLength) toggled = new Set(); // a different grid: old edits no longer apply
    lastLength = length;
    return {
      length,
      causal: $("causal").checked,
      window: $("window-on").checked ? Number($("window").value) : null,
      window_causal: $("window-causal").checked,
      padding: Math.min(Number($("padding").value), length),
      toggled: Array.from(toggled, (k) => k.split(",").map(Number)),
    };
  }

  const send = debounce(async () => {
    const req = request();
    const mine = ++seq;
    try {
      const res = await postJSON("/api/mask", req);
      if (mine !== seq) return;
      $("error").classList.add("hidden");
      shown = { res, req, mine };
      draw();
    } catch (err) {
      if (mine !== seq) return;
      $("error").textContent = t("error", { msg: err.message });
      $("error").classList.remove("hidden");
    }
  }, 40);

  const maskFill = (v) => (v ? ALLOWED : BLOCKED);

  function draw() {
    const { res, req, mine } = shown;
    const names = labels().length ? labels() : ["·"];
    const cell = Math.max(16, Math.min(30, Math.floor(420 / res.key_length)));
    const combined = window.Heatmap.scene({
      matrix: res.mask, rowLabels: names, colLabels: names, cell, fill: maskFill,
      stroke: (r, c) => (toggled.has(r + "," + c) ? "#e07b00" : null),
    });
    const svg = window.Heatmap.toSVG(combined);
    svg.id = "mask-svg";
    svg.addEventListener("click", (ev) => {
      const node = ev.target;
      if (!node.classList.contains("cell")) return;
      const key = node.dataset.r + "," + node.dataset.c;
      if (toggled.has(key)) toggled.delete(key);
      else toggled.add(key);
      send();
    });
    window.Heatmap.interactive(svg);
    $("combined").replaceChildren(svg);

    const weights = window.Heatmap.scene({
      matrix: res.weights, rowLabels: names, colLabels: names, cell, values: cell >= 24,
      format: (v) => (v === 0 ? "0" : Number(v).toFixed(2)),
    });
    const wsvg = window.Heatmap.toSVG(weights);
    wsvg.id = "weights-svg";
    window.Heatmap.interactive(wsvg);
    $("weights").replaceChildren(wsvg);

    const parts = Object.entries(res.parts);
    $("parts").replaceChildren(
      ...(parts.length
        ? parts.map(([name, grid]) => el("figure", { "data-part": name },
            window.Heatmap.toSVG(window.Heatmap.scene({ matrix: grid, cell: 10, fill: maskFill })),
            el("figcaption", { text: t("part_" + name) })))
        : [el("p", { class: "note", text: t("mk_none_parts") })])
    );
    $("edited").textContent = toggled.size ? t("mk_edited", { n: toggled.size }) : "";
    const box = $("mask-result");
    box.dataset.request = JSON.stringify(req);
    box.dataset.seq = String(mine);
  }

  function syncOutputs() {
    $("padding-out").textContent = $("padding").value;
    $("window-out").textContent = $("window").value;
    $("window").max = String(Math.max(1, labels().length));
  }

  function changed() {
    syncOutputs();
    send();
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("tokens").value = DEFAULT_TOKENS[window.Attn.lang()];
    $("tokens").addEventListener("input", () => { tokensEdited = true; changed(); });
    for (const id of ["padding", "window", "causal", "window-on", "window-causal"]) {
      $(id).addEventListener("input", changed);
      $(id).addEventListener("change", changed);
    }
    $("reset").addEventListener("click", () => { toggled = new Set(); send(); });
    changed();
  });
  document.addEventListener("langchange", () => {
    if (!tokensEdited) {
      $("tokens").value = DEFAULT_TOKENS[window.Attn.lang()];
      changed();
    } else if (shown) {
      draw();
    }
  });
})();
