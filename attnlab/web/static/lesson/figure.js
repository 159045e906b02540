// The lesson's one visual standard, shared by every figure (heatmap.js, charts.js, the widgets):
// the smallest text size, the colour key of a heatmap, the hatching of masked cells, the palette
// of categories, and the "what to look at" line every widget shows above its figure with the
// thing it names outlined on the figure.
//
//   Figure.MIN_FONT                      12 (px): no text in a figure is smaller
//   Figure.keyItems(x, y, opts)          scene items (heatmap.js) of a colour key: a ramp from
//                                        opts.lo to opts.hi with opts.fill(v), its numbers, its
//                                        title opts.title and, with opts.masked, a hatched swatch
//   Figure.keySVG(opts)                  the same colour key as an SVG element (class colour-key)
//   Figure.hatchDefs(svg)                adds the hatch pattern (id fig-hatch) to an SVG
//   Figure.HATCH                         "url(#fig-hatch)", the fill of a masked cell
//   Figure.look(root, name, find)        the look line (strings fig_look_NAME) at the top of a
//                                        widget's root; find(root) -> the element(s) it names,
//                                        outlined (class look-target) after every redraw
(function () {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";
  const MIN_FONT = 12;
  const HATCH_ID = "fig-hatch";
  const HATCH = "url(#" + HATCH_ID + ")";
  const t = (key, vars) => window.Attn.t(key, vars);

  // Two decimals at most, no trailing zeros: 0, 0.5, 1.
  const tick = (v) => String(Math.round(v * 100) / 100);

  // A colour key as scene items: its title, then on the same line a ramp `width` px wide of
  // `steps` swatches with the numbers lo, mid and hi under it; with masked, a hatched swatch and
  // its word. One band, so that a key adds little height to its figure.
  // Returns { items, width, height }.
  function keyItems(x0, y, opts) {
    let x = x0;
    const size = MIN_FONT;
    const lo = opts.lo === undefined ? 0 : opts.lo;
    const hi = opts.hi === undefined ? 1 : opts.hi;
    const steps = opts.steps || 20;
    const width = opts.width || 160;
    const sw = width / steps;
    const items = [];
    const title = opts.title === undefined ? t("fig_key_weight") : opts.title;
    let top = y;
    let titleW = 0;
    if (title && opts.stacked) {
      // The title above the ramp: for a narrow picture (a phone), where one band would widen it.
      items.push({ t: "text", x, y: y + size, s: title, size, anchor: "start", key: true });
      top += size + 6;
      titleW = textWidth(title, size);
    } else if (title) {
      items.push({ t: "text", x, y: y + size - 1, s: title, size, anchor: "start", key: true });
      x += Math.ceil(textWidth(title, size)) + 8;
    }
    for (let i = 0; i < steps; i++) {
      const v = lo + ((i + 0.5) / steps) * (hi - lo);
      items.push({ t: "keyrect", x: x + i * sw, y: top, w: sw + 0.5, h: 12, fill: opts.fill(v) });
    }
    items.push({ t: "keyrect", x, y: top, w: width, h: 12, fill: "none", stroke: "#5f6b7a" });
    const ticks = opts.ticks || [lo, (lo + hi) / 2, hi];
    ticks.forEach((v, k) => {
      const tx = x + ((v - lo) / (hi - lo)) * width;
      const anchor = k === 0 ? "start" : k === ticks.length - 1 ? "end" : "middle";
      items.push({ t: "text", x: tx, y: top + 12 + size + 2, s: tick(v), size, anchor, key: true });
    });
    let right = Math.max(x + width + 6, x0 + titleW); // room for the last number's overhang
    let height = top - y + 12 + size + 6;
    if (opts.masked) {
      // The hatched swatch on a line of its own under the ramp (a phone has no room beside it).
      const my = y + height;
      items.push({ t: "keyrect", x: x0, y: my, w: 16, h: 12, fill: HATCH, stroke: "#5f6b7a", masked: true });
      const word = t("fig_key_masked");
      items.push({ t: "text", x: x0 + 20, y: my + 11, s: word, size, anchor: "start", key: true });
      right = Math.max(right, x0 + 20 + textWidth(word, size));
      height += 18;
    }
    return { items, width: Math.ceil(right - x0), height };
  }

  // The width of a ramp key in one band (title, ramp) of `width` px.
  const bandWidth = (title, width) => (title ? Math.ceil(textWidth(title, MIN_FONT)) + 8 : 0) + width + 6;

  // A width estimate good enough for layout: CJK characters are a full em, others about 0.6 em.
  function textWidth(text, size) {
    let w = 0;
    for (const ch of String(text)) w += /[\u2e80-\u9fff\uff00-\uffef]/.test(ch) ? size : size * 0.62;
    return w;
  }

  function add(parent, tag, attrs, text) {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    parent.append(node);
    return node;
  }

  // Diagonal grey lines on white: a masked cell (a pair that may not attend) is never a weight.
  function hatchDefs(svg) {
    if (svg.querySelector("#" + HATCH_ID)) return;
    const defs = add(svg, "defs", {});
    const pattern = add(defs, "pattern", { id: HATCH_ID, width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" });
    add(pattern, "rect", { width: 6, height: 6, fill: "#ffffff" });
    add(pattern, "line", { x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#8a94a3", "stroke-width": 2.5 });
    svg.prepend(defs);
  }

  // Draw scene items of a key into an SVG (charts that are not heatmap scenes use this).
  function drawItems(svg, items) {
    for (const it of items) {
      if (it.t === "keyrect") {
        add(svg, "rect", { x: it.x, y: it.y, width: it.w, height: it.h, fill: it.fill, stroke: it.stroke || null, class: it.masked ? "key-masked" : null });
      } else {
        add(svg, "text", { x: it.x, y: it.y, "font-size": it.size, "text-anchor": it.anchor, fill: "#1f2933" }, it.s);
      }
    }
  }

  function keySVG(opts) {
    // On a narrow screen (a phone) the title goes above the ramp, so that the key never widens the page.
    const room = (document.documentElement.clientWidth || 1e6) - 72;
    const title = opts.title === undefined ? t("fig_key_weight") : opts.title;
    if (!opts.stacked && bandWidth(title, opts.width || 160) > room) opts = Object.assign({}, opts, { stacked: true });
    const k = keyItems(2, 2, opts);
    const svg = document.createElementNS(NS, "svg");
    const W = k.width + 6, H = k.height + 2;
    svg.setAttribute("width", W);
    svg.setAttribute("height", H);
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("class", "colour-key");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", (opts.title || t("fig_key_weight")) + ": " + tick(opts.lo || 0) + "–" + tick(opts.hi === undefined ? 1 : opts.hi));
    hatchDefs(svg);
    drawItems(svg, k.items);
    return svg;
  }

  // The look line: one sentence above the widget saying what to look at; the element(s) it names
  // get the class look-target (an orange outline, lesson.css) after each redraw of the widget.
  function look(root, name, find) {
    const line = document.createElement("p");
    line.className = "look";
    line.id = "look-" + name;
    line.dataset.look = name;
    line.dataset.slidePart = "1"; // projector mode: on the widget's first slide (all of a one-slide widget)
    const text = document.createElement("span");
    text.className = "look-text";
    line.append(text);
    // A widget with modes names the one it shows (data-look-variant on a node inside it): the
    // line then reads fig_look_NAME_VARIANT, so it never points at something the mode hides.
    const label = () => {
      const holder = root.querySelector("[data-look-variant]");
      const variant = holder ? holder.dataset.lookVariant : "";
      const suffix = variant ? "_" + variant : "";
      const want = t("fig_look_" + name + suffix);
      // Written only when it changes: the observer below would see the write and mark again.
      if (text.textContent !== want) text.textContent = want;
    };
    label();
    document.addEventListener("langchange", label);
    const mark = () => {
      if (!line.isConnected || line.parentNode !== root) root.prepend(line);
      label();
      if (!find) return;
      let found = [];
      try {
        const got = find(root);
        found = !got ? [] : got.length !== undefined ? Array.from(got) : [got];
      } catch (err) {
        found = [];
      }
      root.querySelectorAll(".look-target").forEach((n) => { if (!found.includes(n)) n.classList.remove("look-target"); });
      found.forEach((n) => n.classList.add("look-target"));
      line.dataset.targets = String(found.length);
    };
    // Marked in the observer's callback, a microtask after the redraw: the outline is there in the
    // frame that first shows the new drawing, and no other task (a click, a test) sees it unmarked.
    new MutationObserver((records) => {
      // Our own marks change only class attributes, which the observer does not watch.
      if (records.some((r) => r.type === "childList")) mark();
    }).observe(root, { childList: true, subtree: true });
    root.prepend(line);
    mark();
    return line;
  }

  // Categories (series, heads, variants): Okabe–Ito's colour-blind-safe set, none of them a
  // shade of the blue ramp or the red/blue of signed numbers used for values.
  const CATEGORY = ["#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#0072b2", "#f0e442", "#000000"];

  // The element with the largest data-value among nodes (the strongest bar, the likeliest token).
  function largest(nodes) {
    let best = null;
    for (const n of nodes) if (!best || Number(n.dataset.value) > Number(best.dataset.value)) best = n;
    return best;
  }
  const all = (root, sel) => Array.from(root.querySelectorAll(sel));

  // What each widget's look line names, found on the widget as drawn now.
  const TARGETS = {
    families: (root) => root.querySelector("#fam-dec"),
    "apps-mlm": (root) => root.querySelector("#mlm-w td.apps-frame"),
    "apps-qa": (root) => [root.querySelector("#qa-answer"), root.querySelector("#qa-w td.apps-frame")].filter(Boolean),
    "apps-gpt": (root) => root.querySelector("#dec-w th.apps-mark"),
    "apps-summary": (root) => largest(all(root, '[id^="sum-word-"]')),
    "apps-vit": (root) => root.querySelector("#vit-map"),
    "apps-gat": (root) => root.querySelector("#gat-w"),
    translation: (root) => largest(all(root, '[id^="tr-w-"]')),
    "parallel-steps": (root) => root.querySelector('polyline[data-series="transformer"]'),
    bottleneck: (root) => root.querySelector("#bn-vector"),
    "bleu-by-length": (root) => {
      const bars = all(root, 'rect[id^="bl-bar-"]');
      const last = Math.max(-1, ...bars.map((b) => Number(b.id.split("-").pop())));
      return bars.filter((b) => Number(b.id.split("-").pop()) === last);
    },
    qkv: (root) => (root.querySelector('[data-look-variant="random"]') ? root.querySelector("#qkv-table tr.top-row") : largest(all(root, '[id^="qkv-bar-"]'))),
    "additive-vs-dot": (root) => all(root, ".av-map rect.cell[stroke]:not([stroke='#ffffff'])"),
    "self-vs-cross": (root) => root.querySelector("#sc-cross-fig") || root.querySelector("#sc-cross"),
    pronoun: (root) => largest(all(root, '[id^="pr-w-"]')),
    "multihead-steps": (root) => all(root, ".mh-head table").filter((t) => t.querySelector('td[id^="mh-w-"]')),
    "no-transpose": (root) => all(root, "#nt-pieces-bad .nt-foreign"),
    "head-view": (root) => {
      const lines = all(root, "line.hv-line");
      let best = null;
      for (const n of lines) if (!best || Number(n.dataset.w) > Number(best.dataset.w)) best = n;
      return best;
    },
    "word-order": (root) => root.querySelector("#wo-table tr.top-row"),
    "pe-table": (root) => all(root, "#pe-table rect.cell[stroke='#f0a400']"),
    "rope-scores": (root) => all(root, "#rope-map rect.cell").filter((n) => n.dataset.r === n.dataset.c),
    "transformer-diagram": (root) => root.querySelector("#td-box-dec_cross"),
    "next-token": (root) => largest(all(root, '[id^="gpt-p-"]')),
    variants: (root) => root.querySelector("#var-card-sliding_window"),
    "attention-map": (root) => all(root, '#map-svg rect.cell[data-r="0"]:not(.masked)'),
    pooling: (root) => root.querySelector("table.pool-weights .pool-peak"),
    "token-walk": (root) => root.querySelector("#tw-panel"),
  };

  // ---------------------------------------------------------------------------------------------
  // Formulas typeset as MathML (Chromium draws it natively; nothing fetched). The lesson's text
  // writes subscripts the plain way, R_{n−m}, d_k, W_q; each becomes <msub>. A code span that is a
  // formula (single letters, numbers and operators only, e.g. (R_m q)·(R_n k) = q·(R_{n−m} k)) is
  // typeset whole; a code span with words (a function name) is left as code.
  // ---------------------------------------------------------------------------------------------
  const MATH_NS = "http://www.w3.org/1998/Math/MathML";
  const SUB = /(^|[^A-Za-z0-9_])([A-Za-z])_(\{[^{}]+\}|[A-Za-z0-9](?![A-Za-z0-9_]))/;
  const mathEl = (tag, text) => {
    const n = document.createElementNS(MATH_NS, tag);
    if (text !== undefined) n.textContent = text;
    return n;
  };
  // Tokens of a plain formula: letters (mi), numbers (mn), operators (mo), subscripts (msub).
  function mathRow(text) {
    const row = mathEl("mrow");
    const re = /([A-Za-z])_(\{[^{}]+\}|[A-Za-z0-9])|([A-Za-z])|([0-9]+(?:\.[0-9]+)?)|(\s+)|(.)/gu;
    for (let m = re.exec(text); m; m = re.exec(text)) {
      if (m[1]) {
        const sub = mathEl("msub");
        sub.append(mathEl("mi", m[1]), m[2][0] === "{" ? mathRow(m[2].slice(1, -1)) : mathRow(m[2]));
        row.append(sub);
      } else if (m[3]) row.append(mathEl("mi", m[3]));
      else if (m[4]) row.append(mathEl("mn", m[4]));
      else if (m[6]) row.append(mathEl("mo", m[6]));
    }
    return row;
  }
  // A <math> drawing `row`, keeping the text as written in an annotation (not drawn; a copy, a
  // search in the page and the text of the paragraph still find it).
  function wrap(row, source, display) {
    const math = mathEl("math");
    if (display) math.setAttribute("class", "formula");
    const semantics = mathEl("semantics");
    const note = mathEl("annotation", source);
    note.setAttribute("encoding", "text/plain");
    semantics.append(row, note);
    math.append(semantics);
    return math;
  }
  function mathOf(text, display) {
    return wrap(mathRow(text), text, display);
  }
  // A link whose text becomes a formula keeps its words as its accessible name.
  function named(node) {
    const a = node.parentElement && node.parentElement.closest("a, button");
    if (a && !a.hasAttribute("aria-label")) a.setAttribute("aria-label", a.textContent.trim());
  }
  const FORMULA = /^(?:[A-Za-z]_(?:\{[^{}]+\}|[A-Za-z0-9])|[A-Za-z](?![A-Za-z])|[0-9.]+|[\s()·=+\-−×/√^,'′])+$/u;
  // Widgets keep their labels as written (their numbers and names are read back by the tests).
  const SKIP = "script, style, pre, textarea, input, select, option, svg, math, .lesson-code, .widget, [contenteditable]";
  function typeset(root) {
    for (const code of root.querySelectorAll("code")) {
      if (code.closest(SKIP) || !code.textContent.includes("_") || !FORMULA.test(code.textContent)) continue;
      named(code);
      code.replaceWith(mathOf(code.textContent, true));
    }
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const hits = [];
    for (let t = walker.nextNode(); t; t = walker.nextNode()) {
      if (t.nodeValue.includes("_") && SUB.test(t.nodeValue) && !(t.parentElement && t.parentElement.closest(SKIP + ", code"))) hits.push(t);
    }
    for (const t of hits) {
      named(t);
      const frag = document.createDocumentFragment();
      let rest = t.nodeValue;
      for (let m = SUB.exec(rest); m; m = SUB.exec(rest)) {
        frag.append(rest.slice(0, m.index) + m[1]);
        const sub = mathEl("msub");
        sub.append(mathEl("mi", m[2]), m[3][0] === "{" ? mathRow(m[3].slice(1, -1)) : mathRow(m[3]));
        frag.append(wrap(sub, m[0].slice(m[1].length)));
        rest = rest.slice(m.index + m[0].length);
      }
      frag.append(rest);
      t.replaceWith(frag);
    }
  }
  function typesetSoon() {
    const section = document.getElementById("section");
    if (!section || typesetSoon.pending) return;
    typesetSoon.pending = requestAnimationFrame(() => { typesetSoon.pending = 0; typeset(section); });
  }

  // Every widget the page mounts gets its look line (the widgets themselves need no change).
  function bindAll() {
    for (const root of document.querySelectorAll(".widget[data-widget]")) {
      if (root.dataset.looked) continue;
      root.dataset.looked = "1";
      const name = root.dataset.widget;
      look(root, name, TARGETS[name]);
    }
  }
  document.addEventListener("DOMContentLoaded", () => {
    bindAll();
    typesetSoon();
    new MutationObserver(() => { bindAll(); typesetSoon(); }).observe(document.body, { childList: true, subtree: true, characterData: true });
  });

  window.Figure = { bandWidth, typeset, TARGETS, MIN_FONT, HATCH, keyItems, keySVG, hatchDefs, drawItems, look, textWidth, CATEGORY };
})();
