// Heatmaps drawn by hand: a "scene" (rectangles and text) is laid out once, then rendered either
// as SVG (on the page, interactive, downloadable) or onto a canvas (PNG download). Drawing the PNG
// from the scene rather than rasterising the SVG keeps the page's fonts, Japanese included.
(function () {
  "use strict";
  const SVG_NS = "http://www.w3.org/2000/svg";
  const FONT = '"DejaVu Sans", Arial, "IPAexGothic", sans-serif';
  const measure = document.createElement("canvas").getContext("2d");

  // Label widths for the layout. Measured without the web font: asking a canvas for a web font
  // that is still loading leaves Chromium drawing that font's glyphs as empty boxes on the page.
  // Japanese characters are a full em wide in any font, so the estimate holds.
  function textWidth(text, size, bold = false) {
    measure.font = (bold ? "bold " : "") + size + 'px "DejaVu Sans", Arial, sans-serif';
    let width = 0;
    for (const ch of text) width += /[\u3000-\u9fff\uff00-\uffef]/.test(ch) ? size : measure.measureText(ch).width;
    return width * 1.08 + 2; // a margin for fonts wider than the one measured
  }

  // A white-to-blue ramp: weight 0 is nearly white, weight 1 deep blue.
  const STOPS = [
    [0.0, [247, 251, 255]],
    [0.25, [198, 219, 239]],
    [0.5, [107, 174, 214]],
    [0.75, [33, 113, 181]],
    [1.0, [8, 48, 107]],
  ];

  function blues(v) {
    const x = Math.min(1, Math.max(0, v));
    for (let i = 1; i < STOPS.length; i++) {
      const [p1, c1] = STOPS[i];
      const [p0, c0] = STOPS[i - 1];
      if (x <= p1) {
        const f = (x - p0) / (p1 - p0);
        const c = c0.map((a, k) => Math.round(a + f * (c1[k] - a)));
        return "rgb(" + c.join(",") + ")";
      }
    }
    return "rgb(8,48,107)";
  }

  // Dark text on light cells, white text on dark ones.
  function darkText(colour) {
    const m = /rgb\((\d+),(\d+),(\d+)\)/.exec(colour.replace(/\s/g, ""));
    if (!m) return !/^#(0|1|2|3)/.test(colour);
    return 0.299 * m[1] + 0.587 * m[2] + 0.114 * m[3] > 140;
  }

  // opts: matrix (rows × cols numbers), rowLabels, colLabels, cell (px), title, fill(v, r, c),
  // values (bool: print numbers in cells), stroke(r, c) -> colour or null, fontSize,
  // masked(r, c) -> true for a pair that may not attend (drawn hatched, never printed as a number),
  // key: the colour key drawn under the map (lesson/figure.js's standard) — by default the 0–1
  // weight ramp; { title, lo, hi, fill(v) } for another ramp, { swatches: [{ fill, label }] } for
  // categories, false for none (the explorer's pages without figure.js have none either).
  function scene(opts) {
    const m = opts.matrix;
    const rows = m.length;
    const cols = rows ? m[0].length : 0;
    const cell = opts.cell || 28;
    const size = Math.max(12, opts.fontSize || 12); // the lesson's standard: no text under 12 px
    const rowLabels = opts.rowLabels || [];
    const colLabels = opts.colLabels || [];
    const fill = opts.fill || ((v) => blues(v));
    const left = rowLabels.length ? Math.ceil(Math.max(...rowLabels.map((s) => textWidth(s, size)))) + 10 : 2;
    const colSpan = colLabels.length ? Math.ceil(Math.max(...colLabels.map((s) => textWidth(s, size)))) : 0;
    // Labels wider than a cell are written at -55°: their height is the projection on the vertical.
    const rotate = colSpan > cell - 4;
    const titleH = opts.title ? size + 10 : 0;
    const labelH = !colLabels.length ? 2 : rotate ? Math.ceil(colSpan * 0.82 + size) + 6 : size + 8;
    const top = titleH + labelH;
    const overhang = rotate ? Math.ceil(colSpan * 0.6) : 0;
    const masked = opts.masked || (() => false);
    const anyMasked = !!opts.masked && m.some((row, r) => row.some((_, c) => masked(r, c)));
    const key = keyFor(opts, fill, anyMasked, left, top + rows * cell + 10, left + cols * cell + overhang);
    const width = Math.max(left + cols * cell + overhang + 4, opts.title ? textWidth(opts.title, size, true) + 8 : 0, key ? key.x + key.width + 6 : 0);
    const height = top + rows * cell + 4 + (key ? key.height + 8 : 0);
    const items = [];
    if (opts.title) items.push({ t: "text", x: 4, y: size + 2, s: opts.title, size, anchor: "start", weight: "bold" });
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) {
        const v = m[r][c];
        const hidden = masked(r, c);
        items.push({
          t: "rect", x: left + c * cell, y: top + r * cell, w: cell, h: cell, fill: hidden ? HATCH : fill(v, r, c),
          stroke: opts.stroke ? opts.stroke(r, c) : null, r, c, v, masked: hidden,
        });
        if (opts.values && !hidden) {
          items.push({
            t: "text", x: left + c * cell + cell / 2, y: top + r * cell + cell / 2 + size * 0.35,
            s: opts.format ? opts.format(v) : Number(v).toFixed(2), size,
            anchor: "middle", fill: darkText(fill(v, r, c)) ? "#1f2933" : "#fff", nohit: true,
          });
        }
      }
    }
    rowLabels.forEach((s, r) => {
      items.push({ t: "text", x: left - 6, y: top + r * cell + cell / 2 + size * 0.35, s, size, anchor: "end", role: "row", i: r });
    });
    colLabels.forEach((s, c) => {
      items.push(rotate
        ? { t: "text", x: left + c * cell + cell / 2, y: top - 6, s, size, anchor: "start", rotate: -55, role: "col", i: c }
        : { t: "text", x: left + c * cell + cell / 2, y: top - 6, s, size, anchor: "middle", role: "col", i: c });
    });
    if (key) items.push(...key.items);
    return { width: Math.ceil(width), height: Math.ceil(height), items, rows, cols, key: !!key, masked: anyMasked };
  }

  const HATCH = "url(#fig-hatch)";

  // The colour key's scene items at (x, y), or null (opts.key false, or no figure.js on the page).
  // `room`: the picture's width without its key; a key in one band wider than that moves left to
  // the picture's edge, then puts its title above a shorter ramp, so that it never widens a map.
  function keyFor(opts, fill, anyMasked, x, y, room) {
    const F = window.Figure;
    if (!F || opts.key === false) return null;
    const k = opts.key || {};
    if (k.swatches) {
      // Swatches side by side; one under the other where side by side would widen the map.
      const items = [];
      const widths = k.swatches.map((sw) => 18 + F.textWidth(sw.label, F.MIN_FONT) + 14);
      const inline = x + widths.reduce((a, b) => a + b, 0) <= room;
      let at = x, row = y;
      k.swatches.forEach((sw, i) => {
        items.push({ t: "keyrect", x: at, y: row, w: 14, h: 14, fill: sw.fill, stroke: "#5f6b7a", masked: sw.fill === HATCH });
        items.push({ t: "text", x: at + 18, y: row + 12, s: sw.label, size: F.MIN_FONT, anchor: "start", key: true });
        if (inline) at += widths[i];
        else row += 18;
      });
      return { items, width: Math.ceil(inline ? at - x : Math.max(...widths)), height: inline ? 16 : row - y, x };
    }
    const title = k.title === undefined ? window.Attn.t("fig_key_weight") : k.title;
    const base = { title, lo: k.lo, hi: k.hi, fill: k.fill || ((v) => fill(v, -1, -1)), masked: anyMasked || k.masked };
    if (x + F.bandWidth(title, 160) <= room) return Object.assign(F.keyItems(x, y, base), { x });
    if (4 + F.bandWidth(title, 160) <= room) return Object.assign(F.keyItems(4, y, base), { x: 4 });
    return Object.assign(F.keyItems(4, y, Object.assign(base, { stacked: true, width: Math.max(100, Math.min(160, room - 14)) })), { x: 4 });
  }

  function toSVG(sc) {
    const svg = document.createElementNS(SVG_NS, "svg");
    svg.setAttribute("xmlns", SVG_NS);
    svg.setAttribute("width", sc.width);
    svg.setAttribute("height", sc.height);
    svg.setAttribute("viewBox", "0 0 " + sc.width + " " + sc.height);
    svg.setAttribute("font-family", FONT);
    const bg = document.createElementNS(SVG_NS, "rect");
    bg.setAttribute("width", sc.width);
    bg.setAttribute("height", sc.height);
    bg.setAttribute("fill", "#ffffff");
    svg.append(bg);
    if (window.Figure && sc.items.some((it) => it.fill === HATCH)) window.Figure.hatchDefs(svg);
    for (const it of sc.items) {
      if (it.t === "keyrect") {
        const r = document.createElementNS(SVG_NS, "rect");
        for (const [k, v] of [["x", it.x], ["y", it.y], ["width", it.w], ["height", it.h], ["fill", it.fill]]) r.setAttribute(k, v);
        if (it.stroke) r.setAttribute("stroke", it.stroke);
        r.setAttribute("class", it.masked ? "key-swatch key-masked" : "key-swatch");
        svg.append(r);
      } else if (it.t === "rect") {
        const r = document.createElementNS(SVG_NS, "rect");
        r.setAttribute("x", it.x);
        r.setAttribute("y", it.y);
        r.setAttribute("width", it.w);
        r.setAttribute("height", it.h);
        r.setAttribute("fill", it.fill);
        r.setAttribute("class", it.masked ? "cell masked" : "cell");
        if (it.masked) r.setAttribute("data-masked", "1");
        r.setAttribute("data-r", it.r);
        r.setAttribute("data-c", it.c);
        r.setAttribute("data-v", it.v);
        if (it.stroke) {
          r.setAttribute("stroke", it.stroke);
          r.setAttribute("stroke-width", "2");
        } else {
          r.setAttribute("stroke", "#ffffff");
          r.setAttribute("stroke-width", "0.5");
        }
        svg.append(r);
      } else {
        const tx = document.createElementNS(SVG_NS, "text");
        tx.setAttribute("x", it.x);
        tx.setAttribute("y", it.y);
        tx.setAttribute("font-size", it.size);
        tx.setAttribute("text-anchor", it.anchor);
        tx.setAttribute("fill", it.fill || "#1f2933");
        if (it.weight) tx.setAttribute("font-weight", it.weight);
        if (it.rotate) tx.setAttribute("transform", "rotate(" + it.rotate + " " + it.x + " " + it.y + ")");
        if (it.key) tx.setAttribute("class", "key-label");
        if (it.role) {
          tx.setAttribute("class", "label " + it.role);
          tx.setAttribute("data-" + it.role, it.i);
        }
        if (it.nohit) tx.setAttribute("pointer-events", "none");
        tx.textContent = it.s;
        svg.append(tx);
      }
    }
    return svg;
  }

  function toCanvas(sc, scale) {
    const canvas = document.createElement("canvas");
    canvas.width = Math.ceil(sc.width * scale);
    canvas.height = Math.ceil(sc.height * scale);
    const ctx = canvas.getContext("2d");
    ctx.scale(scale, scale);
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, sc.width, sc.height);
    for (const it of sc.items) {
      if (it.t === "rect" || it.t === "keyrect") {
        if (it.fill === HATCH) hatchCanvas(ctx, it);
        else if (it.fill !== "none") {
          ctx.fillStyle = it.fill;
          ctx.fillRect(it.x, it.y, it.w, it.h);
        }
        if (it.t === "keyrect" && !it.stroke) continue;
        ctx.strokeStyle = it.stroke || "#ffffff";
        ctx.lineWidth = it.t === "keyrect" ? 1 : it.stroke ? 2 : 0.5;
        ctx.strokeRect(it.x, it.y, it.w, it.h);
      } else {
        ctx.save();
        ctx.font = (it.weight ? "bold " : "") + it.size + "px " + FONT;
        ctx.fillStyle = it.fill || "#1f2933";
        ctx.textAlign = it.anchor === "middle" ? "center" : it.anchor === "end" ? "right" : "left";
        ctx.translate(it.x, it.y);
        if (it.rotate) ctx.rotate((it.rotate * Math.PI) / 180);
        ctx.fillText(it.s, 0, 0);
        ctx.restore();
      }
    }
    return canvas;
  }

  // The hatching of a masked cell on a canvas (the SVG uses figure.js's pattern).
  function hatchCanvas(ctx, it) {
    ctx.save();
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(it.x, it.y, it.w, it.h);
    ctx.beginPath();
    ctx.rect(it.x, it.y, it.w, it.h);
    ctx.clip();
    ctx.strokeStyle = "#8a94a3";
    ctx.lineWidth = 2;
    for (let d = -it.h; d < it.w; d += 6) {
      ctx.beginPath();
      ctx.moveTo(it.x + d, it.y + it.h);
      ctx.lineTo(it.x + d + it.h, it.y);
      ctx.stroke();
    }
    ctx.restore();
  }

  function save(blob, filename) {
    const url = URL.createObjectURL(blob);
    const a = document.createElement("a");
    a.href = url;
    a.download = filename;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }

  function downloadSVG(sc, filename) {
    const text = new XMLSerializer().serializeToString(toSVG(sc));
    save(new Blob(['<?xml version="1.0" encoding="UTF-8"?>\n' + text], { type: "image/svg+xml" }), filename);
  }

  function downloadPNG(sc, filename) {
    toCanvas(sc, 2).toBlob((blob) => save(blob, filename), "image/png");
  }

  // Hover: highlight a cell's row and column, or a label's whole row / column.
  function interactive(svg, onCell) {
    const cells = Array.from(svg.querySelectorAll(".cell"));
    const rowLabels = Array.from(svg.querySelectorAll(".label.row"));
    const colLabels = Array.from(svg.querySelectorAll(".label.col"));
    function highlight(r, c) {
      for (const node of cells) {
        const inRow = r !== null && node.dataset.r === String(r);
        const inCol = c !== null && node.dataset.c === String(c);
        const keep = (r === null && c === null) || inRow || inCol;
        node.classList.toggle("dim", !keep);
      }
      rowLabels.forEach((n) => n.classList.toggle("hl", r !== null && n.dataset.row === String(r)));
      colLabels.forEach((n) => n.classList.toggle("hl", c !== null && n.dataset.col === String(c)));
    }
    svg.addEventListener("mouseover", (ev) => {
      const node = ev.target;
      if (node.classList.contains("cell")) {
        highlight(Number(node.dataset.r), Number(node.dataset.c));
        if (onCell) onCell(Number(node.dataset.r), Number(node.dataset.c), Number(node.dataset.v));
      } else if (node.classList.contains("row")) {
        highlight(Number(node.dataset.row), null);
      } else if (node.classList.contains("col")) {
        highlight(null, Number(node.dataset.col));
      }
    });
    svg.addEventListener("mouseleave", () => {
      highlight(null, null);
      if (onCell) onCell(null);
    });
    return { highlight };
  }

  window.Heatmap = { scene, toSVG, toCanvas, downloadSVG, downloadPNG, interactive, blues };
})();
