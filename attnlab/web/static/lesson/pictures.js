// The lesson's drawn pictures: a schematic of each section's idea (§1–§8), drawn before its text,
// and a small map of the whole encoder–decoder with the section's part lit. Plain SVG, no library.
// window.LessonPictures.renderSchematic(sectionId, lang, container) and
// renderModelMap(sectionId, lang, container, options) draw into container (replacing what was
// there) and return the <svg> (or null: no schematic for that section). figure(sectionId) builds
// the block the section page puts under its header, redrawn when the language changes.
// The visual standard: every label is at least 13 px in a 340-unit-wide drawing (so at least 12 px
// on a 320 px phone column), one line per label (Japanese words are never broken), every picture
// an <svg role="img"> with a <title> and <desc> in the page's language. The query, key and value
// have one colour each in every picture (QKV below); the part a section is about is lit in amber.
(function () {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";
  const W = 340; // every drawing's width in SVG units
  const QKV = {
    q: { fill: "#fde3cf", ink: "#9a3d00" }, // query: vermillion
    k: { fill: "#d4e6f6", ink: "#00518a" }, // key: blue
    v: { fill: "#d3efe2", ink: "#006647" }, // value: green
  };
  const INK = "#1f2a36";
  const MUTED = "#4d5a69";
  const BOX = { fill: "#f4f6f9", ink: "#55657a" };
  const LIT = { fill: "#ffe08a", ink: "#8a4b00" };
  const HEADS = ["#7b4fa0", "#a0467a", "#6b6b2a", "#5b6470"]; // §5's heads: none is a Q/K/V colour
  let uid = 0;

  const pick = (pair, lang) => (typeof pair === "string" || Array.isArray(pair) ? pair : pair[lang] || pair.en);

  function add(parent, tag, attrs, text) {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    parent.append(node);
    return node;
  }

  // About how wide a label is drawn: CJK and full-width characters 1 em, others 0.6 em.
  function width(text, size) {
    let w = 0;
    for (const ch of text) w += /[\u3000-\u9fff\uff00-\uffef]/.test(ch) ? size : 0.6 * size;
    return w;
  }

  // An <svg> of W × h units with its title and description (role="img"), an arrowhead marker per
  // colour, drawn at most `most` px wide (it narrows with a phone's column).
  function canvas(h, lang, title, desc, most) {
    const id = "pic" + ++uid;
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("viewBox", `0 0 ${W} ${h}`);
    svg.setAttribute("width", "100%");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-labelledby", id + "-t " + id + "-d");
    svg.setAttribute("lang", lang);
    svg.style.maxWidth = (most || 500) + "px";
    svg.classList.add("picture");
    add(svg, "title", { id: id + "-t" }, pick(title, lang));
    add(svg, "desc", { id: id + "-d" }, pick(desc, lang));
    const defs = add(svg, "defs");
    const colours = { ink: INK, q: QKV.q.ink, k: QKV.k.ink, v: QKV.v.ink, muted: MUTED, lit: LIT.ink };
    for (const [name, colour] of Object.entries(colours)) {
      const m = add(defs, "marker", { id: `${id}-a-${name}`, viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "9", markerHeight: "9", markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" });
      add(m, "path", { d: "M0,0 L10,5 L0,10 z", fill: colour });
    }
    const hatch = add(defs, "pattern", { id: id + "-hatch", width: "5", height: "5", patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" });
    add(hatch, "rect", { width: "5", height: "5", fill: "#ffffff" });
    add(hatch, "line", { x1: "0", y1: "0", x2: "0", y2: "5", stroke: "#9aa5b1", "stroke-width": "1.6" });
    svg.dataset.id = id;
    return svg;
  }

  function text(g, x, y, label, o) {
    const opts = o || {};
    return add(g, "text", {
      x, y, "font-size": opts.size || 14, "text-anchor": opts.anchor || "middle", fill: opts.fill || INK,
      "font-weight": opts.bold ? "bold" : null, "dominant-baseline": "central", class: opts.mono ? "mono" : null,
      lang: opts.lang || null, stroke: opts.halo ? "#ffffff" : null, "stroke-width": opts.halo ? 4 : null,
      "paint-order": opts.halo ? "stroke" : null, "stroke-linejoin": opts.halo ? "round" : null,
    }, label);
  }

  // A rounded box with its label (a string, or lines) centred; style: QKV.q, BOX, LIT, …
  function box(g, x, y, w, h, label, style, o) {
    const opts = o || {};
    const s = style || BOX;
    const group = add(g, "g", { class: "pic-box", "data-part": opts.part || null });
    add(group, "rect", { x, y, width: w, height: h, rx: 5, fill: s.fill, stroke: s.ink, "stroke-width": opts.stroke || 1.5 });
    const lines = Array.isArray(label) ? label : [label];
    const size = opts.size || 14;
    lines.forEach((line, i) => text(group, x + w / 2, y + h / 2 + (i - (lines.length - 1) / 2) * (size + 3), line, { size, fill: opts.ink || INK, bold: opts.bold, lang: opts.lang, mono: opts.mono }));
    return group;
  }

  function arrow(svg, g, points, o) {
    const opts = o || {};
    const colour = opts.colour || "ink";
    const ink = { ink: INK, q: QKV.q.ink, k: QKV.k.ink, v: QKV.v.ink, muted: MUTED, lit: LIT.ink }[colour];
    const d = typeof points === "string" ? points : "M" + points.map((p) => p.join(",")).join(" L");
    return add(g, "path", {
      d, fill: "none", stroke: ink, "stroke-width": opts.width || 1.6, "stroke-dasharray": opts.dash || null,
      "marker-end": opts.head === false ? null : `url(#${svg.dataset.id}-a-${colour})`, opacity: opts.opacity || null,
      "stroke-linecap": "round",
    });
  }

  // A row of token boxes centred in [x0, x1] at y; returns their boxes {x, y, w, h, cx}.
  function tokenRow(g, tokens, y, style, o) {
    const opts = o || {};
    const size = opts.size || 14;
    const pad = 10;
    const gap = opts.gap || 8;
    const ws = tokens.map((t) => Math.max(opts.least || 30, width(t, size) + 2 * pad));
    const total = ws.reduce((a, b) => a + b, 0) + gap * (tokens.length - 1);
    const x0 = opts.x0 === undefined ? 0 : opts.x0;
    const x1 = opts.x1 === undefined ? W : opts.x1;
    let x = x0 + (x1 - x0 - total) / 2;
    const h = opts.h || 28;
    return tokens.map((t, i) => {
      const b = { x, y, w: ws[i], h, cx: x + ws[i] / 2 };
      box(g, x, y, ws[i], h, t, (opts.styles && opts.styles[i]) || style, { size, lang: opts.lang, stroke: opts.strokes ? opts.strokes[i] : null });
      x += ws[i] + gap;
      return b;
    });
  }

  const L = (ja, en) => ({ ja, en });

  // ---------------------------------------------------------------------------------------------
  // The schematics, one per section.
  // ---------------------------------------------------------------------------------------------

  // §1: where each output word looks. The alignment is the shipped ja→en model's: in its last
  // decoder layer each English word's source–target attention peaks on these pieces.
  function s1(lang) {
    const svg = canvas(214, lang, L("アテンション：出力の語が入力のどこを見るか", "Attention: where each output word looks"),
      L("上に入力の日本語「私は 毎朝 コーヒーを 飲みます」、下に出力の英語「I drink coffee every morning」。英語の各語から、それを作るときに見た日本語の語へ矢印が伸びています。矢印は交差します。語の順番が違うからです。",
        "At the top the Japanese input 私は 毎朝 コーヒーを 飲みます, at the bottom the English output I drink coffee every morning. An arrow goes from each English word to the Japanese word it looks at while it is written. The arrows cross, because the word orders differ."), 480);
    const g = add(svg, "g");
    text(g, 6, 12, pick(L("入力（日本語）＝見られる側（キー）", "Input (Japanese) = what is looked at (keys)"), lang), { anchor: "start", size: 13, fill: QKV.k.ink });
    const src = tokenRow(g, ["私は", "毎朝", "コーヒーを", "飲みます"], 26, QKV.k, { lang: "ja" });
    const tgt = tokenRow(g, ["I", "drink", "coffee", "every", "morning"], 150, QKV.q, { lang: "en", gap: 6 });
    text(g, 6, 200, pick(L("出力（英語）＝見る側（クエリ）", "Output (English) = what looks (queries)"), lang), { anchor: "start", size: 13, fill: QKV.q.ink });
    const looks = [0, 3, 2, 1, 1];
    looks.forEach((j, i) => arrow(svg, g, [[tgt[i].cx, tgt[i].y - 2], [src[j].cx + (i === 4 ? 8 : i === 3 ? -8 : 0), src[j].y + src[j].h + 3]], { width: 2.2 }));
    return svg;
  }

  // §2: the RNN encoder–decoder squeezed through one vector, and the attention version.
  function s2(lang) {
    const svg = canvas(330, lang, L("Seq2Seq：1 つのベクトルに詰め込むか、毎回すべてを見直すか", "Seq2Seq: one vector, or a look back at every state"),
      L("上：RNN のエンコーダが「猫が 魚を 食べた」を 1 語ずつ読み、最後の状態 1 つ（c）だけをデコーダに渡します。デコーダは c だけから The cat ate fish を作ります。下：アテンションを使うと、デコーダは語を作るたびに、エンコーダのすべての状態へ手を伸ばし、いま必要な状態を重く混ぜます。",
        "Top: an RNN encoder reads 猫が 魚を 食べた word by word and hands only its last state (c) to the decoder, which writes The cat ate fish from c alone. Bottom: with attention the decoder reaches back to every encoder state each time it writes a word, and mixes in most of the state it needs now."), 500);
    const panel = (y0, withAttention) => {
      const g = add(svg, "g", { transform: `translate(0,${y0})` });
      text(g, 6, 10, pick(withAttention ? L("アテンションあり：毎回すべての状態を見る", "With attention: look at every state") : L("アテンションなし：1 つのベクトル c だけ", "Without attention: one vector c"), lang), { anchor: "start", size: 14, bold: true });
      const enc = [8, 52, 96].map((x) => ({ x, y: 56, w: 36, h: 30 }));
      const dec = [184, 222, 260, 298].map((x) => ({ x, y: 56, w: 34, h: 30 }));
      enc.forEach((b, i) => {
        box(g, b.x, b.y, b.w, b.h, "h" + (i + 1), withAttention ? QKV.k : BOX, { size: 13, stroke: withAttention ? null : 1.5 });
        text(g, b.x + b.w / 2, 110, ["猫が", "魚を", "食べた"][i], { size: 13, lang: "ja" });
        arrow(svg, g, [[b.x + b.w / 2, 100], [b.x + b.w / 2, b.y + b.h + 2]], { colour: "muted", width: 1.2 });
        if (i) arrow(svg, g, [[enc[i - 1].x + enc[i - 1].w, b.y + 15], [b.x - 1, b.y + 15]]);
      });
      dec.forEach((b, i) => {
        const now = withAttention && i === 2;
        box(g, b.x, b.y, b.w, b.h, "s" + (i + 1), now ? QKV.q : BOX, { size: 13, stroke: now ? 2.5 : null });
        text(g, b.x + b.w / 2, 110, ["The", "cat", "ate", "fish"][i], { size: 13, lang: "en", bold: now });
        arrow(svg, g, [[b.x + b.w / 2, b.y + b.h + 1], [b.x + b.w / 2, 100]], { colour: "muted", width: 1.2 });
        if (i) arrow(svg, g, [[dec[i - 1].x + dec[i - 1].w, b.y + 15], [b.x - 1, b.y + 15]]);
      });
      text(g, 62, 132, pick(L("エンコーダ", "Encoder"), lang), { size: 13, fill: MUTED });
      text(g, 270, 132, pick(L("デコーダ", "Decoder"), lang), { size: 13, fill: MUTED });
      if (!withAttention) {
        box(g, 144, 50, 26, 42, "c", LIT, { bold: true, stroke: 2.5 });
        arrow(svg, g, [[132, 71], [143, 71]], { width: 2.5 });
        arrow(svg, g, [[170, 71], [183, 71]], { width: 2.5 });
        text(g, 157, 36, pick(L("1 つだけ", "only this"), lang), { size: 13, fill: LIT.ink, bold: true });
      } else {
        const from = dec[2];
        [[0, 1.4], [1, 2.2], [2, 4.5]].forEach(([j, w]) => {
          const to = enc[j];
          arrow(svg, g, `M${from.x + 6 + 4 * j},${from.y - 1} C${from.x - 20},${from.y - 42 + 6 * j} ${to.x + to.w / 2 + 30},${to.y - 42 + 6 * j} ${to.x + to.w / 2},${to.y - 2}`, { colour: "q", width: w, opacity: 0.9 });
        });
        text(g, 160, 132, pick(L("矢印の太さ＝重み", "arrow width = weight"), lang), { size: 13, fill: QKV.q.ink });
      }
      return g;
    };
    panel(2, false);
    add(svg, "line", { x1: 4, x2: W - 4, y1: 160, y2: 160, stroke: "#c3ccd6", "stroke-width": 1 });
    panel(170, true);
    return svg;
  }

  // §3: the three books: a question (query) compared with the spines (keys) gives weights, which
  // mix the contents (values).
  function s3(lang) {
    const svg = canvas(316, lang, L("3 冊の本：クエリ、キー、バリュー", "Three books: query, keys, values"),
      L("上のクエリ（問い）を、3 冊の本の背表紙（キー）と比べて、本ごとのスコアを出します。ソフトマックスでスコアを合計 1 の重みにし、その重みで本の中身（バリュー）を混ぜたものが答え（出力）です。本 1 がいちばん合うので、いちばん重く混ざります。",
        "The query (the question) at the top is compared with the three books' spines (the keys), one score per book. Softmax turns the scores into weights that sum to 1, and the answer (the output) is the contents (the values) mixed by those weights. Book 1 fits best, so it is mixed in most."), 480);
    const g = add(svg, "g");
    const cols = [62, 170, 278];
    box(g, 95, 6, 150, 32, pick(L("クエリ（問い）", "Query (question)"), lang), QKV.q, { bold: true, stroke: 2 });
    text(g, 6, 58, pick(L("① 比べる", "① compare"), lang), { anchor: "start", size: 13, fill: MUTED });
    cols.forEach((cx) => arrow(svg, g, [[170, 40], [cx, 74]], { colour: "q", width: 1.6 }));
    const weights = [0.48, 0.29, 0.23];
    cols.forEach((cx, i) => {
      box(g, cx - 48, 78, 96, 30, pick(L(`キー ${i + 1}`, `Key ${i + 1}`), lang), QKV.k, { size: 13 });
      text(g, cx, 122, pick(L(`本 ${i + 1} の背表紙`, `book ${i + 1}'s spine`), lang), { size: 13, fill: MUTED });
      const h = 60 * weights[i];
      add(g, "rect", { x: cx - 14, y: 200 - h, width: 28, height: h, fill: "#8794a3" });
      add(g, "line", { x1: cx - 24, x2: cx + 24, y1: 200, y2: 200, stroke: MUTED });
      box(g, cx - 48, 214, 96, 30, pick(L(`バリュー ${i + 1}`, `Value ${i + 1}`), lang), QKV.v, { size: 13 });
      arrow(svg, g, [[cx, 246], [170 + (cx - 170) * 0.35, 278]], { colour: "v", width: 1 + 7 * weights[i] });
    });
    text(g, 170, 146, pick(L("② 重み（合計 1）", "② weights (sum to 1)"), lang), { size: 13, fill: MUTED });
    text(g, 6, 262, pick(L("③ 混ぜる", "③ mix"), lang), { anchor: "start", size: 13, fill: MUTED });
    box(g, 95, 280, 150, 32, pick(L("答え（出力）", "Answer (output)"), lang), QKV.v, { bold: true, stroke: 2 });
    return svg;
  }

  // §4: self-attention (one sentence looks at itself) vs source–target attention (the output looks
  // at the input).
  function s4(lang) {
    const svg = canvas(330, lang, L("自己注意とソース・ターゲット注意", "Self-attention and source–target attention"),
      L("上：自己注意。同じ英文の中で、it が文の語すべてを見ます。クエリもキーも同じ文から作ります。下：ソース・ターゲット注意。出力の英語の語 coffee が、入力の日本語の語すべてを見ます。クエリは出力側から、キーとバリューは入力側から作ります。",
        "Top: self-attention. Inside one English sentence, it looks at every word of that sentence; the queries and the keys come from the same sentence. Bottom: source–target attention. The output word coffee looks at every word of the Japanese input; the queries come from the output side, the keys and values from the input side."), 500);
    const g = add(svg, "g");
    text(g, 6, 10, pick(L("自己注意：同じ文の中を見る", "Self-attention: within one sentence"), lang), { anchor: "start", bold: true });
    const words = ["The", "animal", "…", "it", "was", "tired"];
    const row = tokenRow(g, words, 100, QKV.k, { lang: "en", gap: 6, styles: words.map((w) => (w === "it" ? QKV.q : QKV.k)), strokes: words.map((w) => (w === "it" ? 2.5 : null)) });
    const it = row[3];
    row.forEach((b, j) => {
      if (j === 3 || j === 2) return;
      const thick = j === 1 ? 4.5 : 1.3;
      const lift = 30 + Math.abs(b.cx - it.cx) * 0.25;
      arrow(svg, g, `M${it.cx},${it.y - 2} Q${(it.cx + b.cx) / 2},${it.y - lift - 20} ${b.cx},${b.y - 3}`, { colour: "q", width: thick });
    });
    text(g, 6, 146, pick(L("クエリもキーも、この文から", "queries and keys: this sentence"), lang), { anchor: "start", size: 13, fill: MUTED });
    add(g, "line", { x1: 4, x2: W - 4, y1: 166, y2: 166, stroke: "#c3ccd6" });
    text(g, 6, 182, pick(L("ソース・ターゲット注意：出力が入力を見る", "Source–target: output looks at input"), lang), { anchor: "start", bold: true });
    text(g, 6, 204, pick(L("入力（キー・バリュー）", "input (keys, values)"), lang), { anchor: "start", size: 13, fill: QKV.k.ink });
    const src = tokenRow(g, ["私は", "毎朝", "コーヒーを", "飲みます"], 216, QKV.k, { lang: "ja" });
    const tgt = tokenRow(g, ["I", "drink", "coffee", "…"], 286, BOX, { lang: "en", styles: [BOX, BOX, QKV.q, BOX], strokes: [null, null, 2.5, null] });
    text(g, W - 6, 322, pick(L("出力（クエリ）", "output (queries)"), lang), { anchor: "end", size: 13, fill: QKV.q.ink });
    src.forEach((b, j) => arrow(svg, g, [[tgt[2].cx + (j - 1.5) * 6, tgt[2].y - 2], [b.cx, b.y + b.h + 3]], { colour: "q", width: j === 2 ? 4.5 : 1.3 }));
    return svg;
  }

  // §5: D split into H heads of Dh, attention in each head, the heads joined, then W_o.
  function s5(lang) {
    const svg = canvas(352, lang, L("マルチヘッド注意：分けて、別々に注意し、つなぐ", "Multi-head attention: split, attend, join"),
      L("1 つの位置のベクトル（幅 D）を、H = 4 個のヘッドに幅 Dh = D ÷ H ずつ分けます。ヘッドごとに、それぞれのクエリ・キー・バリューで注意を計算します。4 つの結果をつなぎ直すと幅 D に戻り、最後に W_o をかけてヘッドの結果を混ぜます。",
        "One position's vector (width D) is split into H = 4 heads of width Dh = D ÷ H each. Each head computes attention with its own queries, keys and values. Joining the four results gives width D again, and W_o finally mixes the heads' results."), 500);
    const g = add(svg, "g");
    const x0 = 30;
    const seg = 70;
    const bar = (y, label) => {
      HEADS.forEach((c, i) => add(g, "rect", { x: x0 + i * seg, y, width: seg, height: 22, fill: c, stroke: "#fff", "stroke-width": 1.5 }));
      text(g, x0 + 2 * seg, y - 10, label, { size: 13 });
    };
    bar(22, pick(L("1 つの位置のベクトル（幅 D）", "one position's vector (width D)"), lang));
    text(g, x0 + seg / 2, 33, "Dh", { size: 13, fill: "#ffffff", bold: true });
    const split = text(g, 6, 70, pick(L("① ヘッドに分ける（H 個）", "① split into H heads"), lang), { anchor: "start", size: 13, fill: MUTED, halo: true });
    HEADS.forEach((c, i) => {
      const cx = x0 + i * seg + seg / 2;
      arrow(svg, g, [[cx, 46], [cx, 84]], { colour: "muted" });
      const gh = add(g, "g");
      add(gh, "rect", { x: cx - 31, y: 86, width: 62, height: 76, rx: 5, fill: "#ffffff", stroke: c, "stroke-width": 2.5 });
      text(gh, cx, 100, pick(L(`ヘッド${i + 1}`, `head ${i + 1}`), lang), { size: 13, fill: c, bold: true });
      [["Q", QKV.q], ["K", QKV.k], ["V", QKV.v]].forEach(([letter, s], k) => {
        add(gh, "rect", { x: cx - 27 + k * 19, y: 114, width: 16, height: 18, rx: 3, fill: s.fill, stroke: s.ink });
        text(gh, cx - 19 + k * 19, 123, letter, { size: 13, fill: s.ink, bold: true });
      });
      text(gh, cx, 148, pick(L("注意", "attend"), lang), { size: 13 });
      arrow(svg, g, [[cx, 164], [cx, 206]], { colour: "muted" });
    });
    g.append(split); // over the arrows
    text(g, 6, 184, pick(L("② ヘッドごとに注意", "② attention per head"), lang), { anchor: "start", size: 13, fill: MUTED, halo: true });
    bar(226, pick(L("③ つなぐ（幅 D に戻る）", "③ join (width D again)"), lang));
    arrow(svg, g, [[x0 + 2 * seg, 250], [x0 + 2 * seg, 270]]);
    box(g, x0 + 2 * seg - 60, 272, 120, 28, "", BOX);
    const wo = text(g, x0 + 2 * seg, 286, "", { size: 14 });
    wo.append(pick(L("W", "W"), lang));
    add(wo, "tspan", { "baseline-shift": "sub", "font-size": 13 }, "o");
    add(wo, "tspan", {}, pick(L(" をかける", " mixes heads"), lang));
    arrow(svg, g, [[x0 + 2 * seg, 302], [x0 + 2 * seg, 318]]);
    add(g, "rect", { x: x0, y: 320, width: 4 * seg, height: 22, fill: "#8a6fa8", stroke: "#fff" });
    text(g, x0 + 2 * seg, 331, pick(L("出力（幅 D）", "output (width D)"), lang), { size: 13, fill: "#ffffff", bold: true });
    return svg;
  }

  // §6: a position's wave added to each word's embedding; the same words in another order differ
  // only in the waves they get.
  function s6(lang) {
    const svg = canvas(262, lang, L("位置エンコーディング：語のベクトルに位置の波を足す", "Positional encoding: a wave per position added to each word"),
      L("3 つの語それぞれのベクトル（埋め込み）に、位置 0、1、2 ごとに決まった波の値を足して、エンコーダの入力にします。同じ語でも、位置が違えば足される波が違うので、語の順番が入力に残ります。",
        "Each of three words' vectors (its embedding) gets the wave values of its position 0, 1, 2 added, and the sum is the encoder's input. The same word at another position gets another wave, so the order of the words stays in the input."), 500);
    const g = add(svg, "g");
    const cols = [120, 196, 272].map((x) => x + 4);
    const words = ["猫が", "犬を", "追う"]; // the sentence of the section's text, 「猫 が 犬 を 追う」
    const labels = [L("語", "word"), L("埋め込み", "embedding"), L("位置の波", "position"), L("足した入力", "input")];
    [24, 76, 144, 218].forEach((y, i) => text(g, 4, y, pick(labels[i], lang), { anchor: "start", size: 13, fill: MUTED }));
    const pattern = { "猫が": [0.3, 0.8, 0.5, 0.9, 0.2, 0.6], "犬を": [0.9, 0.2, 0.6, 0.4, 0.8, 0.1], "追う": [0.6, 0.4, 0.1, 0.7, 0.5, 0.9] };
    cols.forEach((cx, p) => {
      box(g, cx - 32, 10, 64, 28, words[p], BOX, { lang: "ja" });
      pattern[words[p]].forEach((v, k) => add(g, "rect", { x: cx - 30 + k * 10, y: 64, width: 10, height: 24, fill: `rgba(60,70,85,${0.15 + 0.7 * v})` }));
      add(g, "rect", { x: cx - 30, y: 64, width: 60, height: 24, fill: "none", stroke: MUTED });
      text(g, cx, 110, "+", { size: 18, bold: true });
      add(g, "rect", { x: cx - 30, y: 126, width: 60, height: 36, fill: LIT.fill, stroke: LIT.ink });
      const pts = [];
      for (let k = 0; k <= 30; k++) pts.push([cx - 30 + 2 * k, 144 - 13 * Math.sin(k / 30 * Math.PI * (1 + p) + p)]);
      add(g, "path", { d: "M" + pts.map((q) => q.map((n) => n.toFixed(1)).join(",")).join(" L"), fill: "none", stroke: LIT.ink, "stroke-width": 2 });
      text(g, cx, 176, pick(L(`位置 ${p}`, `position ${p}`), lang), { size: 13, fill: LIT.ink });
      text(g, cx, 196, "=", { size: 16, bold: true });
      pattern[words[p]].forEach((v, k) => {
        const w = Math.abs(Math.sin(k / 6 * Math.PI * (1 + p) + p));
        add(g, "rect", { x: cx - 30 + k * 10, y: 206, width: 10, height: 24, fill: `rgba(138,75,0,${0.12 + 0.6 * (v * 0.6 + w * 0.4)})` });
      });
      add(g, "rect", { x: cx - 30, y: 206, width: 60, height: 24, fill: "none", stroke: LIT.ink });
    });
    text(g, 4, 250, pick(L("順番を変えると、語に足される波が変わる", "Reorder the words: each gets another wave"), lang), { anchor: "start", size: 13 });
    return svg;
  }

  // §7: the whole encoder–decoder, drawn with two layers a side; the encoder's output reaches the
  // source–target attention of every decoder layer by an arrow; the decoder's self-attention
  // carries the causal mask.
  function s7(lang) {
    const svg = canvas(490, lang, L("Transformer の全体：エンコーダの出力がデコーダのすべての層へ", "The whole Transformer: the encoder's output reaches every decoder layer"),
      L("左のエンコーダは、入力の語を埋め込みと位置にしてから、自己注意とフィードフォワード層の層を重ねます。その出力は矢印で、右のデコーダの各層のソース・ターゲット注意に入り、そこでキーとバリューになります。デコーダの自己注意には因果マスクがあり、各位置は自分より前だけを見ます。最後に線形変換とソフトマックスで次の語の確率を出します。",
        "The encoder (left) turns the input words into embeddings plus positions, then runs a stack of layers of self-attention and feed-forward. Its output goes by arrows into the source–target attention of every decoder layer (right), where it becomes the keys and values. The decoder's self-attention has a causal mask: each position sees only itself and earlier ones. A linear layer and softmax finally give the next word's probabilities."), 520);
    const g = add(svg, "g");
    const E = { x: 4, w: 138 };
    const D = { x: 172, w: 162 };
    const tr = (ja, en) => pick(L(ja, en), lang);
    const column = (c, y, h, label, style, part) => box(g, c.x + 5, y, c.w - 10, h, label, style, { size: 13, part });
    const down = (c, y1, y2, colour) => arrow(svg, g, [[c.x + c.w / 2, y1], [c.x + c.w / 2, y2]], { colour: colour || "ink" });
    const embedLabel = lang === "ja" ? "埋め込み＋位置" : ["embedding", "+ position"];
    // the encoder
    text(g, E.x + E.w / 2, 10, tr("エンコーダ", "Encoder"), { bold: true });
    column(E, 24, 26, tr("入力の語", "input words"), BOX);
    down(E, 51, 60);
    column(E, 62, 36, embedLabel, BOX);
    const encLayer = (y, n) => {
      add(g, "rect", { x: E.x, y, width: E.w, height: 92, rx: 6, fill: "none", stroke: "#9aa5b1", "stroke-dasharray": "4 3" });
      text(g, E.x + E.w / 2, y + 11, tr(`層 ${n}`, `layer ${n}`), { size: 13, fill: MUTED });
      column(E, y + 22, 26, tr("自己注意", "self-attention"), BOX);
      down(E, y + 49, y + 58);
      column(E, y + 60, 26, tr("フィードフォワード", "feed-forward"), BOX);
    };
    down(E, 99, 110);
    encLayer(112, 1);
    down(E, 205, 214);
    encLayer(216, 2);
    text(g, E.x + E.w / 2 + 16, 320, "⋮", { size: 16, fill: MUTED });
    down(E, 309, 332);
    box(g, E.x, 334, E.w, 40, [tr("エンコーダの出力", "encoder output"), tr("（メモリ）", "(memory)")], LIT, { size: 13, bold: true, stroke: 2.5 });
    // the decoder
    text(g, D.x + D.w / 2, 10, tr("デコーダ", "Decoder"), { bold: true });
    column(D, 24, 26, tr("これまでの出力", "output so far"), BOX);
    down(D, 51, 60);
    column(D, 62, 36, embedLabel, BOX);
    down(D, 99, 108);
    const crossY = [];
    const decLayer = (y, n) => {
      add(g, "rect", { x: D.x, y, width: D.w, height: 154, rx: 6, fill: "none", stroke: "#9aa5b1", "stroke-dasharray": "4 3" });
      text(g, D.x + D.w / 2, y + 11, tr(`層 ${n}`, `layer ${n}`), { size: 13, fill: MUTED });
      // self-attention with its causal mask drawn as a small triangle grid
      box(g, D.x + 8, y + 22, D.w - 16, 36, "", BOX);
      text(g, D.x + 14, y + 32, tr("自己注意", "self-attention"), { anchor: "start", size: 13 });
      text(g, D.x + 14, y + 49, tr("（因果マスク）", "(causal mask)"), { anchor: "start", size: 13, fill: MUTED });
      const gx = D.x + D.w - 40;
      for (let i = 0; i < 4; i++) for (let j = 0; j < 4; j++) {
        add(g, "rect", { x: gx + j * 6, y: y + 28 + i * 6, width: 6, height: 6, fill: j <= i ? "#55657a" : `url(#${svg.dataset.id}-hatch)`, stroke: "#ffffff", "stroke-width": 0.5 });
      }
      arrow(svg, g, [[D.x + D.w / 2, y + 59], [D.x + D.w / 2, y + 76]], { colour: "q" });
      text(g, D.x + D.w / 2 + 12, y + 67, "Q", { anchor: "start", size: 13, fill: QKV.q.ink, bold: true });
      box(g, D.x + 8, y + 78, D.w - 16, 36, lang === "ja" ? "ソース・ターゲット注意" : ["source–target", "attention"], QKV.q, { size: 13 });
      crossY.push(y + 96);
      down(D, y + 115, y + 122);
      box(g, D.x + 8, y + 124, D.w - 16, 24, tr("フィードフォワード", "feed-forward"), BOX, { size: 13 });
    };
    decLayer(110, 1);
    down(D, 265, 274);
    decLayer(276, 2);
    down(D, 431, 438);
    box(g, D.x + 8, 440, D.w - 16, 26, lang === "ja" ? "線形＋ソフトマックス" : "linear + softmax", BOX, { size: 13 });
    text(g, D.x + D.w / 2, 478, tr("↓ 次の語の確率", "↓ next word's probabilities"), { size: 13 });
    // the encoder's output into every decoder layer's source–target attention
    const trunk = 152;
    add(g, "path", { d: `M${E.x + E.w},354 L${trunk},354 L${trunk},${crossY[0]} M${trunk},354 L${trunk},${crossY[1]}`, fill: "none", stroke: LIT.ink, "stroke-width": 3 });
    crossY.forEach((y) => {
      arrow(svg, g, [[trunk, y], [D.x + 7, y]], { colour: "lit", width: 3 });
      text(g, trunk + 10, y - 10, "K", { size: 13, fill: QKV.k.ink, bold: true });
      text(g, trunk + 10, y + 11, "V", { size: 13, fill: QKV.v.ink, bold: true });
    });
    return svg;
  }

  // §8: which keys each query may see (rows: queries, columns: keys) in full attention and three
  // of its cheaper variants.
  function s8(lang) {
    const svg = canvas(318, lang, L("注意の種類：どのキーを見てよいか", "Attention variants: which keys each query may see"),
      L("10 × 10 の表が 4 つ。行がクエリ（いまの位置）、列がキーで、塗った升は見てよい、斜線の升は見ない組です。すべて：全部の組。局所：同じブロックの中だけ。スライディングウィンドウ：前後 2 つまで。グローバル＋ウィンドウ：窓に加えて、先頭の 1 つはすべてを見て、すべてから見られる。",
        "Four 10 × 10 grids. Rows are queries (the current position), columns are keys; a filled cell may attend, a hatched cell does not. Full: every pair. Local: only inside its block. Sliding window: up to 2 positions either side. Global + window: the window, plus a first position that sees and is seen by all."), 480);
    const g = add(svg, "g");
    const n = 10;
    const cell = 9;
    const kinds = [
      [L("すべて", "full"), () => true],
      [L("局所（ブロック）", "local (blocks)"), (i, j) => Math.floor(i / 5) === Math.floor(j / 5)],
      [L("スライディングウィンドウ", "sliding window"), (i, j) => Math.abs(i - j) <= 2],
      [L("グローバル＋ウィンドウ", "global + window"), (i, j) => Math.abs(i - j) <= 2 || i === 0 || j === 0],
    ];
    kinds.forEach(([label, may], k) => {
      const x = 30 + (k % 2) * 160;
      const y = 26 + Math.floor(k / 2) * 136;
      const grid = add(g, "g", { "data-pattern": String(k) });
      for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) {
        add(grid, "rect", { x: x + 10 + j * cell, y: y + i * cell, width: cell, height: cell, fill: may(i, j) ? QKV.k.ink : `url(#${svg.dataset.id}-hatch)`, stroke: "#ffffff", "stroke-width": 0.6 });
      }
      add(grid, "rect", { x: x + 10, y, width: n * cell, height: n * cell, fill: "none", stroke: MUTED });
      text(g, x + 10 + n * cell / 2, y + n * cell + 14, pick(label, lang), { size: 13, bold: true });
    });
    text(g, 40 + 45, 14, pick(L("キー →", "keys →"), lang), { size: 13, fill: MUTED });
    const q = text(g, 22, 26 + 45, pick(L("クエリ →", "queries →"), lang), { size: 13, fill: MUTED });
    q.setAttribute("transform", "rotate(90 22 71)");
    add(g, "rect", { x: 40, y: 296, width: 14, height: 14, fill: QKV.k.ink });
    text(g, 60, 303, pick(L("見てよい", "may attend"), lang), { anchor: "start", size: 13 });
    add(g, "rect", { x: 170, y: 296, width: 14, height: 14, fill: `url(#${svg.dataset.id}-hatch)`, stroke: MUTED });
    text(g, 190, 303, pick(L("見ない", "not attended"), lang), { anchor: "start", size: 13 });
    return svg;
  }

  // §9: the three families of Transformer, by what each position may look at and what each is
  // trained to do (BERT: Devlin et al. 2019; GPT: Radford et al. 2018; translation: Vaswani et al. 2017).
  function s9(lang) {
    const svg = canvas(380, lang, L("Transformer の 3 つの家族：どこを見て、何を学ぶか", "Three families of Transformer: where they look, what they learn"),
      L("上：エンコーダだけ（BERT）。隠した語 [MASK] から、前後すべての語へ矢印が伸びます。穴埋めを学びます。中：デコーダだけ（GPT）。最後の語 on から、前の語にだけ矢印が伸び、次の語（？）は見ません（因果マスク）。次の語を当てることを学びます。下：エンコーダ–デコーダ。出力の英語の語 like から、入力の日本語の語すべてへ矢印が伸びます。翻訳を学びます。",
        "Top: encoder only (BERT). From the hidden word [MASK], arrows reach every word before and after it; it learns to fill in blanks. Middle: decoder only (GPT). From the last word on, arrows reach only the words before it, never the next word (?) (causal mask); it learns to predict the next word. Bottom: encoder–decoder. From the output word like, arrows reach every word of the Japanese input; it learns to translate."), 500);
    const g = add(svg, "g");
    const title = (y, label) => text(g, 6, y, pick(label, lang), { anchor: "start", bold: true });
    const task = (y, label) => text(g, 6, y, pick(label, lang), { anchor: "start", size: 13, fill: MUTED });
    const rule = (y) => add(g, "line", { x1: 4, x2: W - 4, y1: y, y2: y, stroke: "#c3ccd6" });
    const curve = (from, to, thick) => {
      const lift = 26 + Math.abs(to.cx - from.cx) * 0.22;
      arrow(svg, g, `M${from.cx},${from.y - 2} Q${(from.cx + to.cx) / 2},${from.y - lift - 16} ${to.cx},${to.y - 3}`, { colour: "q", width: thick });
    };

    // Encoder only: the masked word looks both ways.
    title(10, L("エンコーダだけ（BERT）：前後を見る", "Encoder only (BERT): both directions"));
    const bert = ["the", "cat", "[MASK]", "on", "a", "mat"];
    const row1 = tokenRow(g, bert, 72, QKV.k, { lang: "en", gap: 6, styles: bert.map((w) => (w === "[MASK]" ? QKV.q : QKV.k)), strokes: bert.map((w) => (w === "[MASK]" ? 2.5 : null)) });
    row1.forEach((b, j) => { if (j !== 2) curve(row1[2], b, j === 1 || j === 3 ? 3 : 1.3); });
    task(114, L("学習：隠した語（[MASK]）を当てる", "Trained to: fill in the hidden word"));
    rule(128);

    // Decoder only: the last word looks back, never ahead.
    title(142, L("デコーダだけ（GPT）：因果マスクで前だけ見る", "Decoder only (GPT): looks back only"));
    const gpt = ["the", "cat", "sat", "on", "?"];
    const row2 = tokenRow(g, gpt, 200, QKV.k, { lang: "en", gap: 6, styles: gpt.map((w) => (w === "on" ? QKV.q : w === "?" ? { fill: `url(#${svg.dataset.id}-hatch)`, ink: MUTED } : QKV.k)), strokes: gpt.map((w) => (w === "on" ? 2.5 : null)) });
    row2.forEach((b, j) => { if (j < 3) curve(row2[3], b, j === 2 ? 3 : 1.3); });
    task(242, L("学習：次の語を当てる（？は見ない）", "Trained to: predict the next word (?)"));
    rule(256);

    // Encoder–decoder: the output looks at the input.
    title(270, L("エンコーダ–デコーダ（翻訳）", "Encoder–decoder (translation)"));
    const src = tokenRow(g, ["猫が", "好き", "です"], 286, QKV.k, { lang: "ja" });
    const tgt = tokenRow(g, ["I", "like", "…"], 330, BOX, { lang: "en", styles: [BOX, QKV.q, BOX], strokes: [null, 2.5, null] });
    src.forEach((b, j) => arrow(svg, g, [[tgt[1].cx + (j - 1) * 6, tgt[1].y - 2], [b.cx, b.y + b.h + 3]], { colour: "q", width: j === 1 ? 3.5 : 1.3 }));
    task(372, L("学習：訳す（出力の語が入力を見る）", "Trained to: translate (output → input)"));
    return svg;
  }

  const SCHEMATICS = { 1: s1, 2: s2, 3: s3, 4: s4, 5: s5, 6: s6, 7: s7, 8: s8, 9: s9 };

  // ---------------------------------------------------------------------------------------------
  // The model map: the encoder–decoder in a few boxes, the section's part lit.
  // ---------------------------------------------------------------------------------------------

  const ATTENTION = ["enc_self", "dec_self", "dec_cross"];
  const ALL = ["src_embed", "enc_self", "enc_ffn", "memory", "tgt_embed", "dec_self", "dec_cross", "dec_ffn", "output"];
  // What each section is about, as the map's parts.
  const LIT_PARTS = {
    1: ["dec_cross"],
    2: ["memory", "dec_cross"],
    3: ATTENTION,
    4: ATTENTION,
    5: ATTENTION,
    6: ["src_embed", "tgt_embed"],
    7: ALL,
    8: ["enc_self", "dec_self"],
    9: ALL,
    10: ALL, // the final check: every part
  };
  // The map's title: the section's part, except where the section is not about the Transformer's
  // own part (§2's RNN: where its idea sits in the Transformer) or is about all of it.
  const MAP_TITLES = {
    2: L("Transformer で、この節の考えが使われる部分（黄色）", "Where this section's idea sits in the Transformer (yellow)"),
    9: L("この節のモデルが使う部品（黄色：すべて）", "The parts this section's models use (yellow: all of them)"),
    10: L("最後の確認が扱う範囲（黄色：モデル全体）", "What the final check covers (yellow: the whole model)"),
  };
  const MAP_TITLE = L("モデルの中のこの節の部分（黄色）", "This section's part of the model (yellow)");

  function modelMap(sectionId, lang, litParts) {
    const on = new Set(litParts || LIT_PARTS[sectionId] || []);
    const svg = canvas(288, lang, L("モデル全体の地図", "Map of the whole model"),
      L("エンコーダ（左）とデコーダ（右）の部品の図。この節で扱う部品が黄色で示されています：", "The parts of the encoder (left) and the decoder (right). The parts this section is about are lit in yellow: "), 340);
    svg.classList.add("model-map");
    const g = add(svg, "g");
    const E = { x: 4, w: 150 };
    const D = { x: 174, w: 162 };
    const names = {};
    const part = (c, y, h, id, label) => {
      const style = on.has(id) ? LIT : BOX;
      const node = box(g, c.x + 6, y, c.w - 12, h, label, style, { size: 14, part: id, bold: on.has(id), stroke: on.has(id) ? 2.5 : 1.2 });
      node.dataset.lit = String(on.has(id));
      names[id] = Array.isArray(label) ? label.join(" ") : label;
      return node;
    };
    const tr = (ja, en) => pick(L(ja, en), lang);
    const down = (c, y1, y2) => arrow(svg, g, [[c.x + c.w / 2, y1], [c.x + c.w / 2, y2]], { colour: "muted", width: 1.3 });
    text(g, E.x + E.w / 2, 10, tr("エンコーダ × N", "Encoder × N"), { size: 14, bold: true });
    text(g, D.x + D.w / 2, 10, tr("デコーダ × N", "Decoder × N"), { size: 14, bold: true });
    text(g, E.x + E.w / 2, 30, tr("入力の語", "input words"), { size: 14, fill: MUTED });
    text(g, D.x + D.w / 2, 30, tr("これまでの出力", "output so far"), { size: 14, fill: MUTED });
    down(E, 38, 46);
    down(D, 38, 46);
    part(E, 48, 36, "src_embed", lang === "ja" ? ["埋め込み", "＋位置"] : ["embedding", "+ position"]);
    part(D, 48, 36, "tgt_embed", lang === "ja" ? ["埋め込み", "＋位置"] : ["embedding", "+ position"]);
    down(E, 85, 96);
    down(D, 85, 96);
    add(g, "rect", { x: E.x, y: 92, width: E.w, height: 74, rx: 6, fill: "none", stroke: "#9aa5b1", "stroke-dasharray": "4 3" });
    add(g, "rect", { x: D.x, y: 92, width: D.w, height: 130, rx: 6, fill: "none", stroke: "#9aa5b1", "stroke-dasharray": "4 3" });
    part(E, 98, 26, "enc_self", tr("自己注意", "self-attention"));
    down(E, 125, 132);
    part(E, 134, 26, "enc_ffn", tr("フィードフォワード", "feed-forward"));
    part(D, 98, 36, "dec_self", lang === "ja" ? ["自己注意", "（因果マスク）"] : ["self-attention", "(causal mask)"]);
    down(D, 135, 142);
    part(D, 144, 36, "dec_cross", lang === "ja" ? ["ソース・ターゲット", "注意"] : ["source–target", "attention"]);
    down(D, 181, 188);
    part(D, 190, 26, "dec_ffn", tr("フィードフォワード", "feed-forward"));
    down(E, 167, 178);
    part(E, 180, 36, "memory", lang === "ja" ? ["エンコーダの", "出力"] : ["encoder", "output"]);
    // the encoder's output into the decoder's source–target attention
    const lit = on.has("memory") || on.has("dec_cross");
    arrow(svg, g, [[E.x + E.w - 6, 198], [164, 198], [164, 162], [D.x + 5, 162]], { colour: lit ? "lit" : "muted", width: lit ? 2.5 : 1.5 });
    down(D, 223, 232);
    part(D, 234, 36, "output", lang === "ja" ? ["線形＋", "ソフトマックス"] : ["linear +", "softmax"]);
    text(g, W - 4, 280, tr("次の語の確率", "next word's probabilities"), { anchor: "end", size: 14, fill: MUTED });
    const litNames = ALL.filter((id) => on.has(id)).map((id) => names[id]);
    svg.querySelector("desc").textContent += litNames.join(lang === "ja" ? "、" : ", ") + (lang === "ja" ? "。" : ".");
    svg.dataset.lit = ALL.filter((id) => on.has(id)).join(" ");
    return svg;
  }

  // ---------------------------------------------------------------------------------------------
  // The API.
  // ---------------------------------------------------------------------------------------------

  function renderSchematic(sectionId, lang, container) {
    const draw = SCHEMATICS[sectionId];
    const svg = draw ? draw(lang === "ja" ? "ja" : "en") : null;
    if (svg) svg.id = "schematic-" + sectionId;
    container.replaceChildren(...(svg ? [svg] : []));
    return svg;
  }

  // options.lit: the parts to light instead of the section's (the token walk lights its step's).
  function renderModelMap(sectionId, lang, container, options) {
    const svg = modelMap(sectionId, lang === "ja" ? "ja" : "en", options && options.lit);
    container.replaceChildren(svg);
    return svg;
  }

  const CAPTIONS = {
    1: L("見るところ：矢印が交差するところ。英語は語順が違うので、出力の語ごとに入力の別の場所を見ます。",
      "Look at: where the arrows cross. English orders words differently, so each output word looks at another place in the input."),
    2: L("見るところ：上は c の 1 か所を必ず通ります。下は、語を作るたびに入力のすべてに矢印が届きます。",
      "Look at: on top everything must pass through c; below, arrows reach all of the input each time a word is written."),
    3: L("見るところ：オレンジ（クエリ）と青（キー）を比べて重みが決まり、緑（バリュー）が重みの分だけ混ざります。",
      "Look at: orange (query) against blue (keys) sets the weights; green (values) is mixed by those weights."),
    4: L("見るところ：上は同じ文の中、下は出力（オレンジ）から入力（青）へ。違うのは、クエリとキーをどの文から作るかだけです。",
      "Look at: top, inside one sentence; bottom, from the output (orange) to the input (blue). Only where the queries and keys come from differs."),
    5: L("見るところ：色ごとに分けたベクトルが、ヘッドごとに注意を計算し、同じ色の順につなぎ直されます。",
      "Look at: the vector split by colour, each colour's head attending on its own, then joined in the same order."),
    6: L("見るところ：同じ語でも、位置が違えば足される波（黄色）が違います。",
      "Look at: the same word at another position gets another wave (yellow)."),
    7: L("見るところ：黄色のエンコーダの出力が、矢印でデコーダのどの層にも入ります。",
      "Look at: the encoder's output (yellow) goes by arrows into every decoder layer."),
    8: L("見るところ：塗った升の数。すべてでは T × T、ほかは位置の数にほぼ比例します。",
      "Look at: how many cells are filled. Full: T × T; the others grow about in proportion to the positions."),
    9: L("見るところ：矢印の向き。BERT は前後の両方を、GPT は前だけを見ます。翻訳では、出力の語が入力の語を見ます。",
      "Look at: which way the arrows point. BERT looks both ways, GPT only back; in translation the output words look at the input."),
  };

  // The block a section page shows under its header: the schematic with a one-line "look at" and
  // the model map beside it (below it on a phone), both redrawn when the language changes.
  function figure(sectionId) {
    const lang = () => (window.Attn && window.Attn.lang ? window.Attn.lang() : document.documentElement.lang || "en");
    const node = document.createElement("figure");
    node.className = "section-pictures";
    node.id = "section-pictures";
    const pic = document.createElement("div");
    pic.className = "schematic";
    const caption = document.createElement("figcaption");
    caption.className = "look-at";
    caption.id = "schematic-look-at";
    const side = document.createElement("div");
    side.className = "model-map-box";
    const mapTitle = document.createElement("p");
    mapTitle.className = "model-map-title";
    const map = document.createElement("div");
    side.append(mapTitle, map);
    const draw = () => {
      const l = lang();
      const svg = renderSchematic(sectionId, l, pic);
      pic.hidden = !svg;
      caption.hidden = !svg;
      caption.textContent = CAPTIONS[sectionId] ? pick(CAPTIONS[sectionId], l) : "";
      mapTitle.textContent = pick(MAP_TITLES[sectionId] || MAP_TITLE, l);
      renderModelMap(sectionId, l, map);
    };
    draw();
    document.addEventListener("langchange", draw);
    if (SCHEMATICS[sectionId]) node.append(pic, caption);
    else node.classList.add("map-only"); // no drawn schematic (the final check): no empty column
    node.append(side);
    return node;
  }

  window.LessonPictures = { renderSchematic, renderModelMap, figure, LIT_PARTS, QKV };
})();
