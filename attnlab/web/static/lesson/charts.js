// Small drawings for the lesson's widgets: bar charts, histograms, line charts and number tables.
// They only place what the API computed; every number drawn or printed is one the API returned
// (kept in data-value attributes, which the browser tests compare with attnlab's own results).
(function () {
  "use strict";
  const { el, fmt } = window.Attn;
  const NS = "http://www.w3.org/2000/svg";

  function svg(width, height, label) {
    const node = document.createElementNS(NS, "svg");
    node.setAttribute("width", width);
    node.setAttribute("height", height);
    node.setAttribute("viewBox", `0 0 ${width} ${height}`);
    node.setAttribute("role", "img");
    node.setAttribute("aria-label", label);
    return node;
  }

  // The width a chart may take: its natural width; on a phone (a window 640 px wide or less) no
  // more than the screen's width less the page's and the widget's margins (responsive.css), and
  // no less than `least`. The chart is drawn narrower, its text keeps its size.
  function room(natural, least) {
    const screen = document.documentElement.clientWidth;
    return screen && screen <= 640 ? Math.max(least, Math.min(natural, screen - 56)) : natural;
  }

  function add(parent, tag, attrs, text) {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    parent.append(node);
    return node;
  }

  // sRGB relative luminance (WCAG 2), to pick a text colour that keeps a 4.5:1 contrast.
  function luminance([r, g, b]) {
    const lin = (c) => {
      const x = c / 255;
      return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4);
    };
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
  }

  // Blue for negative, white for 0, red for positive; |v| ≥ limit is the full colour.
  function diverging(v, limit) {
    const x = Math.max(-1, Math.min(1, limit > 0 ? v / limit : 0));
    const end = x < 0 ? [33, 102, 172] : [178, 24, 43];
    const f = Math.abs(x);
    return [0, 1, 2].map((i) => Math.round(255 + f * (end[i] - 255)));
  }

  // White to deep blue for weights in [0, 1] (the ramp of the explorer's heatmaps).
  const BLUES = [[0, [247, 251, 255]], [0.25, [198, 219, 239]], [0.5, [107, 174, 214]], [0.75, [33, 113, 181]], [1, [8, 48, 107]]];
  function sequential(v) {
    const x = Math.max(0, Math.min(1, v));
    for (let i = 1; i < BLUES.length; i++) {
      const [p1, c1] = BLUES[i];
      const [p0, c0] = BLUES[i - 1];
      if (x <= p1) return c0.map((a, k) => Math.round(a + ((x - p0) / (p1 - p0)) * (c1[k] - a)));
    }
    return BLUES[BLUES.length - 1][1];
  }

  // A number with `digits` decimals, without the "-0.00" of a tiny negative number.
  function num(v, digits) {
    const text = fmt(v, digits);
    return /^-0\.?0*$/.test(text) ? text.slice(1) : text;
  }

  const SUPER = "⁰¹²³⁴⁵⁶⁷⁸⁹";
  const power = (e) => "10" + (e < 0 ? "⁻" : "") + String(Math.abs(e)).split("").map((d) => SUPER[Number(d)]).join("");

  const css = (rgb) => `rgb(${rgb.join(",")})`;
  // Black text keeps 4.5:1 on a background of luminance ≥ 0.175, white text on one ≤ 0.183.
  const textOn = (rgb) => (luminance(rgb) > 0.179 ? "#000000" : "#ffffff");

  // Horizontal bars for weights and probabilities, always on the 0–1 scale (a full track is 1, the
  // same on every page; a scale at the foot says so): opts.values, opts.labels, opts.idPrefix,
  // opts.label, opts.colour, opts.mono (labels that are characters: monospace, so l and I differ),
  // opts.scaleTitle (the scale's words; "weight" by default).
  function bars(opts) {
    const W = room(460, 280), bar = 20, gap = 6, left = opts.left || 90, right = 64;
    const foot = 40;
    const H = opts.values.length * (bar + gap) + gap + foot;
    const node = svg(W, H, opts.label);
    const span = W - left - right;
    const max = 1;
    opts.values.forEach((v, i) => {
      const y = gap + i * (bar + gap);
      add(node, "text", {
        x: left - 6, y: y + bar * 0.72, "text-anchor": "end", "font-size": opts.mono ? 15 : 13, fill: "#1f2933",
        "font-family": opts.mono ? '"DejaVu Sans Mono", Menlo, Consolas, "IPAexGothic", monospace' : null, class: "bar-label",
      }, opts.labels[i]);
      add(node, "rect", { x: left, y, width: span, height: bar, fill: "#e8edf4" });
      add(node, "rect", {
        id: opts.idPrefix ? opts.idPrefix + i : null, x: left, y, width: Math.max(0, (v / max) * span), height: bar,
        fill: opts.colour || "#2456a6", "data-value": v,
      });
      add(node, "text", { x: left + span + 6, y: y + bar * 0.72, "font-size": 12, fill: "#1f2933" }, opts.format ? opts.format(v) : fmt(v, 3));
    });
    // The scale: 0, 0.5 and 1 under the tracks.
    const y0 = gap + opts.values.length * (bar + gap);
    add(node, "line", { x1: left, x2: left + span, y1: y0, y2: y0, stroke: "#5f6b7a", class: "bar-scale" });
    for (const v of [0, 0.5, 1]) {
      add(node, "line", { x1: left + v * span, x2: left + v * span, y1: y0, y2: y0 + 4, stroke: "#5f6b7a" });
      add(node, "text", { x: left + v * span, y: y0 + 17, "text-anchor": v === 0 ? "start" : v === 1 ? "end" : "middle", "font-size": 12, fill: "#1f2933" }, String(v));
    }
    add(node, "text", { x: left + span / 2, y: y0 + 33, "text-anchor": "middle", "font-size": 12, fill: "#52606d" }, opts.scaleTitle || window.Attn.t("fig_scale_weight"));
    return node;
  }

  // A histogram: opts.edges (n + 1), opts.counts (n), opts.label, opts.idPrefix, opts.ticks (edge values to label).
  function histogram(opts) {
    const W = room(460, 280), H = 170, left = 40, bottom = 24, top = 8;
    const node = svg(W, H, opts.label);
    const n = opts.counts.length;
    const span = W - left - 10;
    const height = H - bottom - top;
    const max = Math.max(1, ...opts.counts);
    const lo = opts.edges[0], hi = opts.edges[n];
    const x = (v) => left + ((v - lo) / (hi - lo)) * span;
    opts.counts.forEach((c, i) => {
      const h = (c / max) * height;
      add(node, "rect", {
        id: opts.idPrefix ? opts.idPrefix + i : null, x: x(opts.edges[i]) + 0.5, y: top + height - h,
        width: Math.max(0.5, x(opts.edges[i + 1]) - x(opts.edges[i]) - 1), height: h, fill: opts.colour || "#2456a6", "data-value": c,
      });
    });
    add(node, "line", { x1: left, x2: left + span, y1: top + height, y2: top + height, stroke: "#5f6b7a" });
    for (const tick of opts.ticks || [lo, 0, hi]) {
      add(node, "line", { x1: x(tick), x2: x(tick), y1: top + height, y2: top + height + 4, stroke: "#5f6b7a" });
      add(node, "text", { x: x(tick), y: H - 6, "text-anchor": "middle", "font-size": 12, fill: "#1f2933" }, String(tick));
    }
    add(node, "text", { x: left - 4, y: top + 10, "text-anchor": "end", "font-size": 12, fill: "#1f2933" }, String(max));
    return node;
  }

  // Lines on log-log axes: opts.xs, opts.series [{name, values, colour, dash}], opts.label,
  // opts.xLabel, opts.yLabel (the y axis's title, written along it). Each series has its own marker
  // (circle, square, triangle, diamond, cross), dash and colour, so that lines lying on one another
  // stay apart; the legend repeats marker and dash. The plot is 480 px wide on a wide screen.
  const textWidth = (text) => [...text].reduce((w, ch) => w + (ch.codePointAt(0) >= 0x2e80 ? 12 : 7.2), 0);
  const MARKERS = ["circle", "square", "triangle", "diamond", "cross"];
  function marker(parent, shape, x, y, colour, value) {
    const r = 4.5;
    const attrs = { fill: shape === "cross" ? "none" : colour, stroke: colour, "stroke-width": shape === "cross" ? 2 : 1, "data-value": value, class: "marker marker-" + shape };
    if (shape === "circle") return add(parent, "circle", Object.assign({ cx: x, cy: y, r }, attrs));
    if (shape === "square") return add(parent, "rect", Object.assign({ x: x - r, y: y - r, width: 2 * r, height: 2 * r }, attrs));
    const pts = shape === "triangle" ? [[0, -r - 1], [r + 1, r], [-r - 1, r]]
      : shape === "diamond" ? [[0, -r - 1], [r + 1, 0], [0, r + 1], [-r - 1, 0]]
        : null;
    if (pts) return add(parent, "polygon", Object.assign({ points: pts.map(([dx, dy]) => `${(x + dx).toFixed(1)},${(y + dy).toFixed(1)}`).join(" ") }, attrs));
    return add(parent, "path", Object.assign({ d: `M${x - r},${y - r}L${x + r},${y + r}M${x - r},${y + r}L${x + r},${y - r}` }, attrs));
  }
  function lines(opts) {
    const left = opts.yLabel ? 78 : 64, top = 12, bottom = 44, plot = 480;
    const legend = Math.max(160, 52 + Math.max(0, ...opts.series.map((s) => textWidth(s.name))));
    // Where plot and legend do not fit side by side (a phone, a narrow column), the plot takes
    // the width there is and the legend goes under it.
    const fits = room(left + plot + legend, 0) >= left + plot + legend;
    const right = fits ? legend : 14;
    const W = fits ? left + plot + right : room(left + plot + right, left + 200 + right);
    const H = 300; // the plot and its axis labels; the legend under it adds legendH
    const legendH = fits ? 0 : opts.series.length * 20 + 8;
    const at = (k) => (fits ? { x: W - right + 12, y: top + 14 + k * 20 } : { x: 14, y: H + 10 + k * 20 });
    const node = svg(W, H + legendH, opts.label);
    const all = opts.series.flatMap((s) => s.values).filter((v) => v > 0);
    const lx = (v) => Math.log10(v);
    const x0 = lx(opts.xs[0]), x1 = lx(opts.xs[opts.xs.length - 1]);
    const y0 = Math.floor(lx(Math.min(...all))), y1 = Math.ceil(lx(Math.max(...all)));
    const X = (v) => left + ((lx(v) - x0) / (x1 - x0)) * (W - left - right - 8) + 4;
    const Y = (v) => top + (1 - (lx(v) - y0) / Math.max(1e-9, y1 - y0)) * (H - top - bottom);
    add(node, "rect", { x: left, y: top, width: W - left - right, height: H - top - bottom, fill: "#fbfcfe", stroke: "#d5dbe3" });
    for (let e = y0; e <= y1; e++) {
      add(node, "line", { x1: left, x2: W - right, y1: Y(10 ** e), y2: Y(10 ** e), stroke: "#e3e8ef" });
      add(node, "text", { x: left - 6, y: Y(10 ** e) + 4, "text-anchor": "end", "font-size": 12, fill: "#1f2933" }, power(e));
    }
    // On a narrow plot every other length is written, so that the numbers do not touch.
    const every = (W - left - right) / opts.xs.length < 44 ? 2 : 1;
    opts.xs.forEach((v, i) => {
      if (i % every && i !== opts.xs.length - 1) return;
      add(node, "text", { x: X(v), y: H - bottom + 17, "text-anchor": "middle", "font-size": 12, fill: "#1f2933" }, String(v));
    });
    add(node, "text", { x: left + (W - left - right) / 2, y: H - 8, "text-anchor": "middle", "font-size": 13, fill: "#1f2933", class: "axis-title" }, opts.xLabel);
    if (opts.yLabel) {
      const cy = top + (H - top - bottom) / 2;
      add(node, "text", { x: 16, y: cy, "text-anchor": "middle", "font-size": 13, fill: "#1f2933", transform: `rotate(-90 16 ${cy})`, class: "axis-title" }, opts.yLabel);
    }
    const anyDash = opts.series.some((s) => s.dash);
    opts.series.forEach((s, k) => {
      const shape = MARKERS[k % MARKERS.length];
      // The widget's own dashes where it gives any (a series without one is solid), else one each.
      const dash = anyDash ? s.dash || null : [null, "7 4", "2 3", "10 3 2 3", "4 4"][k % 5];
      const points = s.values.map((v, i) => `${X(opts.xs[i]).toFixed(1)},${Y(Math.max(v, 10 ** y0)).toFixed(1)}`).join(" ");
      add(node, "polyline", { points, fill: "none", stroke: s.colour, "stroke-width": 2, "stroke-dasharray": dash, "data-series": s.key });
      s.values.forEach((v, i) => marker(node, shape, X(opts.xs[i]), Y(Math.max(v, 10 ** y0)), s.colour, v));
      const { x, y } = at(k);
      add(node, "line", { x1: x, x2: x + 28, y1: y, y2: y, stroke: s.colour, "stroke-width": 2, "stroke-dasharray": dash });
      marker(node, shape, x + 14, y, s.colour, null);
      add(node, "text", { x: x + 34, y: y + 4, "font-size": 12, fill: "#1f2933" }, s.name);
    });
    return node;
  }

  // A table of numbers: opts.rows (2-D), opts.rowLabels, opts.colLabels, opts.digits, opts.idPrefix,
  // opts.colour(v) -> [r, g, b] or null, opts.caption, opts.colClass(j) -> class name.
  function matrix(opts) {
    const digits = opts.digits === undefined ? 2 : opts.digits;
    const head = opts.colLabels
      ? el("thead", {}, el("tr", {}, opts.rowLabels ? el("td") : null,
        opts.colLabels.map((c, j) => el("th", { scope: "col", class: opts.colClass ? opts.colClass(j) : null, text: c }))))
      : null;
    const body = el("tbody", {}, opts.rows.map((row, r) =>
      el("tr", {}, opts.rowLabels ? el("th", { scope: "row", text: opts.rowLabels[r] }) : null,
        row.map((v, c) => {
          const td = el("td", {
            id: opts.idPrefix ? `${opts.idPrefix}-${r}-${c}` : null, "data-value": String(v), // String: el() drops false
            class: opts.colClass ? opts.colClass(c) : null,
            text: typeof v === "boolean" ? (v ? "✓" : "·") : num(v, digits),
          });
          const rgb = opts.colour ? opts.colour(v) : null;
          if (rgb) {
            td.style.backgroundColor = css(rgb);
            td.style.color = textOn(rgb);
          }
          return td;
        }))));
    const table = el("table", { class: "matrix", "aria-label": opts.caption || null }, head, body);
    // A table coloured by value is a heatmap: its colour key goes under it (figure.js).
    const key = opts.colour && opts.key !== false ? matrixKey(opts) : null;
    // The caption sits above the table as a figure caption: a <caption> would wrap at the
    // table's width, which for a small matrix is a few characters.
    if (!opts.caption && !key) return table;
    return el("figure", { class: "matrix-fig" }, opts.caption ? el("figcaption", { text: opts.caption }) : null, table, key);
  }

  // The key of a coloured table: for true/false cells two swatches (opts.keyLabels, by default
  // "changed"/"unchanged"); for numbers in [0, 1] the weight ramp; otherwise a ramp from −m to +m
  // (m the largest magnitude), titled opts.keyTitle or "value".
  function matrixKey(opts) {
    const F = window.Figure, t = window.Attn.t;
    const flat = opts.rows.flat();
    if (flat.length && flat.every((v) => typeof v === "boolean")) {
      const labels = opts.keyLabels || [t("fig_key_changed"), t("fig_key_unchanged")];
      const node = document.createElementNS(NS, "svg");
      const items = [];
      let x = 2;
      [true, false].forEach((v, k) => {
        const rgb = opts.colour(v);
        items.push({ t: "keyrect", x, y: 3, w: 14, h: 14, fill: rgb ? css(rgb) : "#ffffff", stroke: "#5f6b7a" });
        items.push({ t: "text", x: x + 18, y: 15, s: labels[k], size: F.MIN_FONT, anchor: "start" });
        x += 18 + F.textWidth(labels[k], F.MIN_FONT) + 16;
      });
      for (const [k, v] of Object.entries({ width: Math.ceil(x), height: 20, viewBox: `0 0 ${Math.ceil(x)} 20`, class: "colour-key", role: "img", "aria-label": labels.join(" / ") })) node.setAttribute(k, v);
      F.drawItems(node, items);
      return node;
    }
    const nums = flat.filter((v) => typeof v === "number" && Number.isFinite(v));
    const unit = nums.every((v) => v >= 0 && v <= 1);
    const m = Math.max(1e-9, ...nums.map(Math.abs));
    const fill = (v) => { const rgb = opts.colour(v); return rgb ? css(rgb) : "#ffffff"; };
    return unit
      ? F.keySVG({ title: opts.keyTitle || t("fig_key_weight"), lo: 0, hi: 1, fill, width: 120, stacked: true })
      : F.keySVG({ title: opts.keyTitle || t("fig_key_value"), lo: -m, hi: m, fill, width: 120, stacked: true });
  }

  // Grouped vertical bars (e.g. BLEU per length bucket and model): opts.categories (labels),
  // opts.series [{key, name, values (null: no bar), colour}], opts.max, opts.label, opts.idPrefix,
  // opts.yLabel. Each bar keeps its number in data-value and has the id idPrefix-key-i.
  function groups(opts) {
    const n = opts.categories.length, k = opts.series.length;
    const left = 44, right = 10, bottom = 44;
    // On a phone the groups are narrower and the legend's entries one under the other.
    const fit = room(1e6, 0); // 1e6 on a wider screen
    const groupW = Math.max(fit < 1e6 ? 36 : 60, Math.min(120, Math.floor(440 / n), Math.floor((fit - left - right) / n)));
    const W = left + n * groupW + right;
    const stacked = left + (k - 1) * 170 + 150 > W;
    const key = (j) => (stacked ? { x: left, y: 6 + j * 17 } : { x: left + j * 170, y: 6 });
    const top = stacked ? Math.max(40, 6 + k * 17 + 20) : 40, H = 200 + top;
    const node = svg(W, H, opts.label);
    const height = H - top - bottom, max = opts.max || 100;
    const y = (v) => top + height - (v / max) * height;
    for (const tick of [0, 0.25, 0.5, 0.75, 1].map((f) => f * max)) {
      add(node, "line", { x1: left, x2: W - right, y1: y(tick), y2: y(tick), stroke: tick ? "#e3e8ef" : "#5f6b7a" });
      add(node, "text", { x: left - 6, y: y(tick) + 4, "text-anchor": "end", "font-size": 12, fill: "#1f2933" }, String(Math.round(tick)));
    }
    const barW = Math.floor((groupW - 16) / k);
    opts.categories.forEach((cat, i) => {
      const x0 = left + i * groupW + 8;
      opts.series.forEach((s, j) => {
        const v = s.values[i];
        if (v === null || v === undefined) return;
        add(node, "rect", {
          id: opts.idPrefix ? `${opts.idPrefix}-${s.key}-${i}` : null, x: x0 + j * barW, y: y(v), width: barW - 2,
          height: Math.max(0, top + height - y(v)), fill: s.colour, "data-value": v,
        });
        add(node, "text", { x: x0 + j * barW + (barW - 2) / 2, y: y(v) - 3, "text-anchor": "middle", "font-size": 12, fill: "#1f2933" }, fmt(v, barW >= 36 ? 1 : 0)); // a narrow bar: whole numbers, so that neighbours' numbers do not touch
      });
      add(node, "text", { x: x0 + (groupW - 16) / 2, y: top + height + 16, "text-anchor": "middle", "font-size": 12, fill: "#1f2933" }, cat);
    });
    if (opts.xLabel) add(node, "text", { x: left + (n * groupW) / 2, y: H - 6, "text-anchor": "middle", "font-size": 12, fill: "#1f2933" }, opts.xLabel);
    opts.series.forEach((s, j) => {
      const { x, y } = key(j);
      add(node, "rect", { x, y, width: 12, height: 12, fill: s.colour });
      add(node, "text", { x: x + 16, y: y + 10, "font-size": 12, fill: "#1f2933" }, s.name);
    });
    return node;
  }

  // An attention map (weights in [0, 1], white to blue) drawn by heatmap.js: opts.rows, opts.rowLabels,
  // opts.colLabels, opts.id, opts.label, opts.highlight (a row framed in orange), opts.cell.
  // Each cell keeps its weight in data-v, its row and column in data-r and data-c.
  function map(opts) {
    const sc = window.Heatmap.scene({
      matrix: opts.rows, rowLabels: opts.rowLabels, colLabels: opts.colLabels, cell: opts.cell || 26,
      fill: (v) => window.Heatmap.blues(v),
      stroke: opts.highlight === undefined || opts.highlight === null ? null : (r) => (r === opts.highlight ? "#d97a00" : null),
    });
    return picture(sc, opts.id, opts.label);
  }

  // A heatmap.js scene as an SVG image with an id and an accessible name.
  function picture(sc, id, label) {
    const node = window.Heatmap.toSVG(sc);
    node.id = id;
    node.setAttribute("role", "img");
    node.setAttribute("aria-label", label);
    return node;
  }

  // On a phone, heatmaps and tables of numbers wider than the screen scroll sideways inside their
  // own box (responsive.css). A box that scrolls and holds nothing focusable gets tabindex="0" for
  // as long as it scrolls, so that the keyboard can scroll it too (WCAG 2.1.1).
  const SCROLL_BOXES = ".widget figure, .widget table, .widget .mh-head";
  const FOCUSABLE = "a[href], button, input, select, textarea, summary, [tabindex]";
  function markScrollBoxes() {
    for (const box of document.querySelectorAll(SCROLL_BOXES)) {
      const scrolls = box.scrollWidth > box.clientWidth + 1 && getComputedStyle(box).overflowX === "auto";
      if (scrolls && !box.hasAttribute("tabindex") && !box.querySelector(FOCUSABLE)) {
        box.setAttribute("tabindex", "0");
        box.dataset.scrollBox = "";
      } else if (!scrolls && "scrollBox" in box.dataset) {
        box.removeAttribute("tabindex");
        delete box.dataset.scrollBox;
      }
    }
  }
  let marking = 0;
  const markSoon = () => { if (!marking) marking = requestAnimationFrame(() => { marking = 0; markScrollBoxes(); }); };
  new MutationObserver(markSoon).observe(document.body, { childList: true, subtree: true });
  window.addEventListener("resize", markSoon);

  window.Charts = { bars, histogram, lines, matrix, groups, map, picture, diverging, sequential, css, textOn, luminance, num, room };
})();
