// The lesson: draws the index, each section and the glossary from the lesson API. A section's
// texts come from its Markdown files (attnlab/web/lesson/content/{ja,en}/NN-slug.md, served with
// both languages side by side); the interface's own strings from the catalog (Attn.t); the widgets
// (widgets/*.js) get their numbers from the API. The page's state (language, widget settings)
// lives in the address, so a link reproduces what its author saw. The address also picks a mode:
// ?view=present&slide=N (projector mode), ?teacher=1 (the answer key), ?print=1 (a printed page).
// The answers a student gives are kept in this browser (localStorage) and ticked on the index.
(function () {
  "use strict";
  const { t, el, lang, getJSON, setParams, pageURL, dataURL } = window.Attn;
  const $ = (id) => document.getElementById(id);

  const widgets = {}; // name -> { mount(root, ctx) }
  const LONG_CODE_LINES = 16;
  const relabel = []; // functions that rewrite the page's texts in the current language

  function pick(text) {
    if (!text) return "";
    return text[lang()] || text.en;
  }

  function fill(text, vars) {
    for (const [name, value] of Object.entries(vars || {})) text = text.split("{" + name + "}").join(String(value));
    return text;
  }

  // A node whose text follows the language: from a {ja, en} pair or a UI string key.
  function bound(node, textOf) {
    const apply = () => { node.textContent = textOf(); };
    apply();
    relabel.push(apply);
    return node;
  }
  const txt = (tag, attrs, text) => bound(el(tag, attrs), () => pick(text));
  const ui = (tag, attrs, key, vars) => bound(el(tag, attrs), () => t(key, vars));

  // A link into the lesson that keeps the current language (and, for "try" links, sets params).
  // path: a page's explorer path ("/lesson/3"; Attn.pageURL makes it the static build's file), or
  // HERE, this very page (its own address, whatever the host calls it).
  const HERE = {};
  const hrefOf = (path) => (path === HERE ? window.location.pathname : pageURL(path));
  function lessonLink(path, params, attrs, textOf) {
    const a = el("a", attrs || {});
    const apply = () => {
      const search = new URLSearchParams(params || {});
      search.set("lang", lang());
      a.href = hrefOf(path) + "?" + search.toString();
      a.textContent = textOf();
    };
    apply();
    relabel.push(apply);
    return a;
  }

  // The page's modes, from the address: ?view=present (projector mode: one slide at a time),
  // ?teacher=1 (the answer key: every question shows its answer and explanation unanswered; the
  // teacher notes open), ?print=1 (a page being printed: the checks stay blank), ?further=1 (the
  // whole lesson: the 発展 / "Going further" folds open; without it, the 基礎 path: folded).
  function readMode() {
    const q = new URLSearchParams(window.location.search);
    return { present: q.get("view") === "present", teacher: q.get("teacher") === "1", print: q.get("print") === "1",
      further: q.get("further") === "1" };
  }
  const mode = readMode();

  // ---------------------------------------------------------------------------------------------
  // Progress a student keeps: which questions were answered (right at the first or second try, or
  // missed), in this browser's localStorage only; nothing is sent anywhere. A section is finished
  // when all its questions are answered. An answer is kept under the section's id, the question's
  // index and a hash of the question (its text in both languages, its choices and answer), so an
  // edited question starts blank instead of showing a stale answer.
  // ---------------------------------------------------------------------------------------------

  const progress = (() => {
    const KEY = "attnlab.progress";
    const RESULTS = ["first", "second", "missed"];
    const blank = () => ({ v: 1, sections: {} });

    function read() {
      try {
        const data = JSON.parse(window.localStorage.getItem(KEY) || "null");
        return data && data.v === 1 && data.sections && typeof data.sections === "object" ? data : blank();
      } catch (err) {
        return blank(); // storage off (a private window) or a damaged value: no progress, no error
      }
    }

    function write(data) {
      try {
        window.localStorage.setItem(KEY, JSON.stringify(data));
      } catch (err) {
        // storage full or off: the page works, it only forgets
      }
    }

    // 32-bit FNV-1a over the string's UTF-16 code units, in hex (crypto.subtle needs a secure
    // context, which a classroom's http://192.168.… address is not).
    function hash(text) {
      let h = 0x811c9dc5;
      for (let i = 0; i < text.length; i++) {
        h ^= text.charCodeAt(i);
        h = Math.imul(h, 0x01000193) >>> 0;
      }
      return h.toString(16).padStart(8, "0");
    }

    function keyOf(q, i) {
      return i + ":" + hash(JSON.stringify([q.question, q.choices, q.answer]));
    }

    function valid(rec, q) {
      const ok = (c) => Number.isInteger(c) && c >= 0 && c < q.choices.length;
      return rec && RESULTS.includes(rec.r) && ok(rec.c) && (rec.w === undefined || ok(rec.w));
    }

    // The section's kept answers that still match its questions: question index -> {r, c, w}
    // (r: first, second or missed; c: the choice taken last; w: the wrong choice of a first try).
    function answers(section) {
      const kept = read().sections[section.id] || {};
      const out = {};
      section.check.forEach((q, i) => {
        const rec = kept[keyOf(q, i)];
        if (valid(rec, q)) out[i] = rec;
      });
      return out;
    }

    function record(section, i, rec) {
      const data = read();
      const current = new Set(section.check.map(keyOf));
      const kept = {};
      for (const [key, value] of Object.entries(data.sections[section.id] || {})) if (current.has(key)) kept[key] = value;
      kept[keyOf(section.check[i], i)] = rec;
      data.sections[section.id] = kept;
      write(data);
    }

    // The ids of the sections with anything kept.
    function started() {
      return Object.entries(read().sections).filter(([, kept]) => kept && Object.keys(kept).length).map(([id]) => Number(id));
    }

    function clear() {
      try {
        window.localStorage.removeItem(KEY);
      } catch (err) {
        // nothing kept
      }
    }

    return { answers, record, started, clear, keyOf };
  })();

  let widgetCount = 0;
  const paramReads = {}; // widget name -> the address parameters it read (projector mode's try links)

  // What a widget gets: its strings, the address's parameters, and change notifications.
  function context(section, name) {
    const id = ++widgetCount;
    return {
      name,
      lang,
      section,
      s(key, vars) {
        const entry = section.strings[key];
        return fill(entry ? pick(entry) : key, vars);
      },
      param(key, fallback) {
        (paramReads[name] = paramReads[name] || new Set()).add(key);
        const value = new URLSearchParams(window.location.search).get(key);
        return value === null ? fallback : value;
      },
      setParams(values) {
        setParams(values);
        document.dispatchEvent(new CustomEvent("lesson:params", { detail: { from: id, values } }));
      },
      onLang(fn) {
        document.addEventListener("langchange", fn);
      },
      onParams(fn) {
        document.addEventListener("lesson:params", (ev) => {
          if (ev.detail.from !== id) fn(ev.detail.values);
        });
      },
    };
  }

  // ---------------------------------------------------------------------------------------------
  // The index.
  // ---------------------------------------------------------------------------------------------

  async function showIndex() {
    const toc = $("toc");
    let sections;
    const glossary = $("to-glossary");
    if (glossary) {
      const apply = () => { glossary.href = pageURL("/lesson/glossary") + "?lang=" + lang(); };
      apply();
      relabel.push(apply);
    }
    try {
      sections = await getJSON(dataURL("sections"));
      toc.replaceChildren(
        ...sections.map((s) =>
          el("li", { class: s.final ? "toc-item toc-final" : "toc-item", id: "toc-" + s.id },
            el("div", { class: "toc-head" },
              lessonLink("/lesson/" + s.id, null, { class: "toc-link", id: "toc-link-" + s.id },
                () => t("ls_toc_link", { n: s.id, title: pick(s.title) })),
              tocMinutes(s)),
            txt("p", { class: "toc-summary" }, s.summary),
            bound(el("p", { class: "note" }), () => t("ls_source", { src: pick(s.source) }))))
      );
    } catch (err) {
      toc.replaceChildren(el("li", { class: "error", role: "alert", text: t("error", { msg: err.message }) }));
      toc.removeAttribute("aria-busy");
      return;
    }
    toc.removeAttribute("aria-busy");
    showPaths(sections);
    await showProgress(sections);
  }

  // The minutes of the basic path (teacher notes' minutes) and of the whole lesson (with each
  // section's further_minutes), summed over the sections that have them.
  function pathMinutes(sections) {
    const basic = sections.reduce((sum, s) => sum + (s.minutes || 0), 0);
    const further = sections.reduce((sum, s) => sum + (s.further_minutes || 0), 0);
    return { basic, further, whole: basic + further };
  }

  // A section's time on the index: 「基礎 約 10 分 · 発展 +15 分」.
  function tocMinutes(s) {
    if (!s.minutes) return null;
    const node = el("span", { class: "toc-minutes", id: "toc-minutes-" + s.id, "data-minutes": String(s.minutes),
      "data-further-minutes": String(s.further_minutes || 0) });
    return bound(node, () => t("ls_toc_minutes", { n: s.minutes }) +
      (s.further_minutes ? t("ls_list_sep") + t("ls_toc_further", { n: s.further_minutes }) : ""));
  }

  // The index offers two paths through the same pages: the 基礎 (basic) path, whose 発展 parts
  // stay folded, and the whole lesson, which opens them (?further=1, kept from page to page).
  function showPaths(sections) {
    const box = $("paths");
    if (!box || !sections.length) return;
    const m = pathMinutes(sections);
    const first = sections[0].id;
    const card = (id, title, text, minutes, params) => el("div", { class: "path-card", id: "path-" + id, "data-minutes": String(minutes) },
      el("h3", {}, ui("span", {}, title), " ", ui("span", { class: "path-minutes" }, "ls_path_minutes", { n: minutes })),
      ui("p", {}, text),
      lessonLink("/lesson/" + first, params, { class: "path-start action-link", id: "path-start-" + id }, () => t("ls_path_start")));
    box.replaceChildren(
      ui("h2", { id: "paths-title" }, "ls_paths_title"),
      el("div", { class: "path-cards" },
        card("basic", "ls_path_basic", "ls_path_basic_text", m.basic, null),
        card("whole", "ls_path_whole", "ls_path_whole_text", m.whole, { further: "1" })),
      el("p", { class: "note" }, lessonLink("/lesson/plan", null, { id: "to-plan" }, () => t("ls_plan_link"))));
    box.classList.remove("hidden");
  }

  // The student's progress on the index: a tick and a count on each section begun ("✓ 5/5",
  // "3/5"), how many sections are finished, and a button (with a confirmation) that clears it all.
  // Only the sections with kept answers are asked for their questions, to match the answers
  // against the questions as they are now.
  async function showProgress(sections) {
    const box = $("progress");
    if (!box) return;
    const begun = progress.started();
    const counts = {}; // section id -> { answered, total }
    const fetched = await Promise.all(sections.filter((s) => begun.includes(s.id)).map((s) =>
      getJSON(dataURL("sections/" + s.id)).catch(() => null)));
    for (const section of fetched.filter(Boolean)) {
      counts[section.id] = { answered: Object.keys(progress.answers(section)).length, total: section.check.length };
    }
    const badges = [];
    for (const s of sections) {
      const c = counts[s.id];
      if (!c || !c.answered) continue;
      const done = c.answered === c.total;
      const badge = el("span", { class: "progress-badge", id: "progress-" + s.id, "data-state": done ? "done" : "begun" });
      bound(badge, () => t(done ? "ls_progress_done" : "ls_progress_some", { n: c.answered, total: c.total }));
      $("toc-" + s.id).querySelector(".toc-head").append(badge);
      badges.push(badge);
    }
    let finished = sections.filter((s) => counts[s.id] && counts[s.id].answered === counts[s.id].total).length;
    // Progress counts the basic path: the minutes of the sections finished (their check answered,
    // the check being on the basic path) out of the basic path's minutes.
    const basicTotal = pathMinutes(sections).basic;
    let basicDone = sections.filter((s) => counts[s.id] && counts[s.id].answered === counts[s.id].total)
      .reduce((sum, s) => sum + (s.minutes || 0), 0);
    const summary = el("p", { class: "progress-summary", id: "progress-summary", tabindex: "-1" });
    bound(summary, () => t("ls_progress_summary", { n: finished, total: sections.length }));
    const basic = el("p", { class: "progress-basic", id: "progress-basic", "data-done": String(basicDone), "data-total": String(basicTotal) });
    bound(basic, () => t("ls_progress_basic", { n: basicDone, total: basicTotal }));
    const reset = ui("button", { type: "button", class: "plain", id: "progress-reset" }, "ls_progress_reset");
    reset.addEventListener("click", () => {
      if (!window.confirm(t("ls_progress_reset_confirm"))) return;
      progress.clear();
      badges.forEach((b) => b.remove());
      finished = 0;
      basicDone = 0;
      predictStore.clear();
      summary.textContent = t("ls_progress_summary", { n: finished, total: sections.length });
      basic.textContent = t("ls_progress_basic", { n: basicDone, total: basicTotal });
      basic.dataset.done = "0";
      reset.classList.add("hidden");
      summary.focus(); // the button that had the focus is gone
    });
    if (!badges.length) reset.classList.add("hidden");
    box.replaceChildren(
      ui("h3", { id: "progress-title" }, "ls_progress_title"),
      el("div", { class: "progress-row" }, summary, reset),
      basicTotal ? basic : null,
      ui("p", { class: "note" }, "ls_progress_note"));
    box.classList.remove("hidden");
  }

  // ---------------------------------------------------------------------------------------------
  // A section.
  // ---------------------------------------------------------------------------------------------

  // A node whose inner HTML follows the language. The HTML comes from the lesson's own Markdown
  // files, rendered by the server with raw HTML disabled (attnlab/web/lesson/content.py).
  // The markup is parsed inertly (DOMParser runs no script) and rebuilt from a short list of
  // elements and attributes, so even a content file that slipped something else in adds nothing
  // else to the page (the policy of test_web_security: no innerHTML anywhere).
  const SAFE_TAGS = new Set(["p", "a", "strong", "em", "code", "pre", "ul", "ol", "li", "h2", "h3", "h4",
    "table", "thead", "tbody", "tr", "th", "td", "blockquote", "br", "hr", "sub", "sup", "span", "div"]);
  const SAFE_ATTRS = new Set(["href", "class", "data-term", "lang", "title", "start", "align"]);

  // A link of the lesson's text to one of its pages is written as the explorer's path ("/lesson/3?…",
  // "/lesson/glossary?…#term-softmax"): the same page on this site (Attn.pageURL).
  function lessonHref(href) {
    const m = /^(\/|\/lesson\/[a-z0-9-]+)([?#].*)?$/.exec(href);
    return m ? pageURL(m[1]) + (m[2] || "") : href;
  }

  function safeNodes(html) {
    const doc = new DOMParser().parseFromString("<body>" + html + "</body>", "text/html");
    const copy = (source) => {
      if (source.nodeType === Node.TEXT_NODE) return document.createTextNode(source.textContent);
      if (source.nodeType !== Node.ELEMENT_NODE) return null;
      const tag = source.tagName.toLowerCase();
      if (!SAFE_TAGS.has(tag)) return document.createTextNode(source.textContent);
      const out = document.createElement(tag);
      for (const attr of source.attributes) {
        const value = attr.value;
        if (!SAFE_ATTRS.has(attr.name)) continue;
        if (attr.name === "href" && !/^(\/|#|https?:)/.test(value)) continue;
        out.setAttribute(attr.name, attr.name === "href" ? lessonHref(value) : value);
      }
      for (const child of source.childNodes) {
        const c = copy(child);
        if (c) out.appendChild(c);
      }
      return out;
    };
    return Array.from(doc.body.childNodes, copy).filter(Boolean);
  }

  // A glossary link that is the whole of its table cell or list item ("| layers |", "4. ロジット")
  // stands on its own, not inside a sentence: marked term-alone, it gets a full touch target
  // (responsive.css); a link inside a sentence keeps the size of the text.
  const INLINE_TAGS = new Set(["STRONG", "EM", "CODE", "SPAN", "SUB", "SUP"]);
  function markAloneTerms(root) {
    for (const a of root.querySelectorAll("a.term")) {
      let block = a.parentElement;
      while (block && INLINE_TAGS.has(block.tagName)) block = block.parentElement;
      if (block && block !== root && block.textContent.trim() === a.textContent.trim()) a.classList.add("term-alone");
    }
  }

  function htmlNode(node, text) {
    const apply = () => { node.replaceChildren(...safeNodes(pick(text))); markAloneTerms(node); };
    apply();
    relabel.push(apply);
    return node;
  }

  // Projector mode shows a widget with natural parts (its registration's `parts`) over several
  // slides: slidePart(part, ...nodes) names the slide of the widget that shows each node, a number
  // or a list ("1 2"); a node without one is on every slide of the widget (its controls). Returns
  // the node, or the nodes as an array (spread it into replaceChildren, which takes no arrays).
  function slidePart(part, ...nodes) {
    nodes.forEach((node) => { node.dataset.slidePart = String(part); });
    return nodes.length === 1 ? nodes[0] : nodes;
  }

  // A technical note (endpoints, function names) folded away: students can open it, need not.
  function memo(...nodes) {
    return el("details", { class: "memo" }, ui("summary", {}, "ls_memo"), ...nodes);
  }

  function block(b, index, section, mounts) {
    const id = "block-" + index;
    if (b.type === "html") return htmlNode(el("div", { class: "lesson-text", id }), b.html);
    if (b.type === "note") return htmlNode(el("div", { class: "lesson-note", role: "note", id }), b.html);
    if (b.type === "memo") return el("div", { class: "lesson-memo", id }, memo(htmlNode(el("div"), b.html)));
    if (b.type === "code") {
      // attnlab's own source says where it lives, and that it is shown as written (its docstrings
      // and comments are English, also on the Japanese page).
      const where = b.source && b.file && b.lines
        ? bound(el("p", { class: "where" }), () => t("ls_code_from", { file: b.file, first: b.lines[0], last: b.lines[1] }))
        : null;
      const caption = el("figcaption", {}, b.html ? htmlNode(el("div"), b.html) : null, where);
      const code = el("code");
      bound(code, () => pick(b.code));
      const pre = el("pre", { tabindex: "0", "data-language": b.language || "" }, code);
      const lines = pick(b.code).split("\n").length;
      // attnlab's source and long code stay folded: the text around them is the lesson, the code
      // its evidence. Short code written for the page (comments in its language) stays open.
      const body = b.source || lines > LONG_CODE_LINES
        ? el("details", {}, bound(el("summary"), () => t("ls_code_open", { n: lines })), pre)
        : pre;
      return el("figure", { class: "lesson-code", id }, body, caption);
    }
    if (b.type === "widget") {
      const root = el("div", { class: "widget", id: "widget-" + b.widget, "data-widget": b.widget });
      mounts.push([root, b.widget]);
      return root;
    }
    return null;
  }

  // The blocks of a section's page, in order, each run of blocks inside a ':::: further' region
  // (block.further) folded into one <details class="further"> titled 「発展」/"Going further":
  // visibly marked and skippable (open with ?further=1, in the answer key and on paper). A
  // prediction (section.predict) is asked directly above the first block of its widget.
  function pageBlocks(section, mounts, asks) {
    const out = [];
    let fold = null;
    let folds = 0;
    section.blocks.forEach((b, i) => {
      const node = block(b, i, section, mounts);
      if (!node) return;
      const asked = b.type === "widget" ? asks.take(b.widget, node) : null;
      const nodes = asked ? [asked.box, asked.gate] : [node];
      if (!b.further) {
        fold = null;
        out.push(...nodes);
        return;
      }
      if (!fold) {
        folds += 1;
        fold = el("details", { class: "further", id: "further-" + folds, "data-further": String(folds),
          open: mode.further || mode.teacher || mode.print },
          el("summary", {}, ui("span", { class: "further-badge" }, "ls_further"), " ",
            ui("span", { class: "further-skip" }, "ls_further_skip")),
          el("div", { class: "further-body" }));
        out.push(fold);
      }
      fold.lastElementChild.append(...nodes);
    });
    return out;
  }

  // Predictions at the widgets (front matter predict:): a question asked right above its widget,
  // whose widget stays covered (hidden from sight and from the keyboard) until a choice is
  // committed; then the widget is revealed and the explanation shown, right or wrong. One try:
  // a prediction is a guess, not a test. The choice is kept in this browser like the check's
  // answers (not in projector mode, the answer key or on paper); the answer key and paper show
  // the widget uncovered. take(name, node) returns { box, gate } for a widget with a prediction.
  // The text that reads the widget's result is held back with it (issue 34, "predict, then see"):
  // once the page is laid out, hold() marks data-held the text blocks right after each covered
  // gate, up to the next heading, widget, note, code or fold (whatever is not running text ends
  // it); lesson.css shows nothing of a held block before its first heading, so the sentence that
  // gives the answer away ("the weights are 0.481 and 0.292") waits for the choice, and unrelated
  // text after a heading stays. It works on the laid-out nodes, so the same rule holds on the page
  // and on a projector slide (a slide's text pieces are blocks of their own).
  const predictStore = (() => {
    const KEY = "attnlab.predictions";
    const read = () => {
      try { return JSON.parse(window.localStorage.getItem(KEY) || "{}") || {}; } catch (err) { return {}; }
    };
    const keyOf = (section, p) => section.id + ":" + p.widget + ":" + progress.keyOf(p, 0);
    return {
      get(section, p) {
        const c = read()[keyOf(section, p)];
        return Number.isInteger(c) && c >= 0 && c < p.choices.length ? c : null;
      },
      set(section, p, c) {
        try {
          const data = read();
          data[keyOf(section, p)] = c;
          window.localStorage.setItem(KEY, JSON.stringify(data));
        } catch (err) {
          // storage off: the page works, it only forgets
        }
      },
      clear() {
        try { window.localStorage.removeItem(KEY); } catch (err) { /* nothing kept */ }
      },
    };
  })();

  function predictions(section) {
    const byWidget = Object.fromEntries((section.predict || []).map((p, k) => [p.widget, [p, k]]));
    const keep = !mode.present && !mode.teacher && !mode.print;
    const asked = [];
    return {
      take(name, node) {
        const found = byWidget[name];
        if (!found) return null;
        delete byWidget[name]; // the first block of the widget only
        const made = prediction(section, found[0], found[1], node, keep);
        asked.push(made);
        return made;
      },
      hold() {
        asked.forEach((made) => made.hold(textAfter(made.gate)));
      },
    };
  }

  // The running-text blocks right after a gate, up to the next heading (a block that opens with
  // one is not taken; one with a heading further on is taken and ends the run) or anything that
  // is not running text: a widget, a prediction, a note, a memo, code, a 発展 fold.
  function textAfter(gate) {
    const out = [];
    const heading = (n) => /^H[1-6]$/.test(n.tagName);
    for (let n = gate.nextElementSibling; n && n.classList.contains("lesson-text"); n = n.nextElementSibling) {
      const parts = Array.from(n.children);
      if (parts.length && heading(parts[0])) break;
      out.push(n);
      if (parts.some(heading)) break;
    }
    return out;
  }

  function prediction(section, p, k, widgetNode, keep) {
    const id = "predict-" + k;
    const order = shuffled(p.choices.map((_, j) => j), mode.print ? seededRandom(p.question.en) : null);
    const inputs = [];
    const choices = order.map((j, shown) => {
      const input = el("input", { type: "radio", name: id, value: String(j), id: `${id}-c${shown}` });
      inputs.push(input);
      const mark = mode.teacher && j === p.answer ? [" ", ui("strong", { class: "answer-mark" }, "ls_teacher_answer_mark")] : null;
      return el("div", { class: "choice", "data-choice": String(j) }, input, " ", txt("label", { for: input.id }, p.choices[j]), mark);
    });
    const feedback = el("div", { class: "feedback", id: id + "-feedback", role: "status", tabindex: "-1" });
    const submit = mode.teacher ? null : ui("button", { type: "submit", class: "action", id: id + "-submit" }, "ls_predict_commit");
    const tryLink = Object.keys(p.params || {}).length
      ? lessonLink(HERE, p.params, { class: "try-apply", id: id + "-try" }, () => t("ls_check_try_it"))
      : null;
    const form = el("form", { class: "prediction", id, novalidate: true, "data-widget": p.widget },
      el("fieldset", {},
        el("legend", {}, ui("span", { class: "predict-badge" }, "ls_predict_title"), " ", txt("span", { class: "q-text" }, p.question)),
        choices),
      submit, feedback);
    const cover = el("div", { class: "predict-cover", id: id + "-cover" }, ui("p", {}, "ls_predict_cover"));
    const gate = el("div", { class: "predict-gate", id: id + "-gate", "data-widget": p.widget }, cover, widgetNode);
    let chosen = null;
    const show = () => {
      if (mode.teacher) {
        feedback.dataset.result = "key";
        feedback.replaceChildren(el("strong", { text: t("ls_teacher_answer", { answer: pick(p.choices[p.answer]) }) }), " ",
          el("span", { class: "explanation", text: pick(p.explanation) }));
        return;
      }
      if (chosen === null) return;
      const right = chosen === p.answer;
      feedback.dataset.result = right ? "correct" : "wrong";
      feedback.replaceChildren(
        el("strong", { text: right ? t("ls_predict_right") : t("ls_predict_wrong", { answer: pick(p.choices[p.answer]) }) }),
        " ", el("span", { class: "explanation", text: pick(p.explanation) }), ...(tryLink ? [" ", tryLink] : []));
    };
    relabel.push(show);
    let held = [];
    const reveal = () => {
      gate.dataset.revealed = "1";
      held.forEach((n) => n.removeAttribute("data-held"));
      widgetNode.inert = false;
      widgetNode.removeAttribute("aria-hidden");
      cover.hidden = true;
      document.dispatchEvent(new CustomEvent("lesson:revealed", { detail: { widget: p.widget } }));
    };
    const commit = (c, focus) => {
      chosen = c;
      form.dataset.done = c === p.answer ? "right" : "wrong";
      inputs.forEach((input) => { input.disabled = true; input.checked = Number(input.value) === c; });
      if (submit) submit.disabled = true;
      form.querySelector(`[data-choice="${p.answer}"]`).classList.add("right-choice");
      if (c !== p.answer) form.querySelector(`[data-choice="${c}"]`).classList.add("wrong-choice");
      show();
      reveal();
      if (focus) feedback.focus();
    };
    if (mode.teacher || mode.print) {
      // The answer key and paper: nothing to guess on screen; the widget is shown.
      if (mode.teacher) {
        inputs.forEach((input) => { input.disabled = true; });
        form.querySelector(`[data-choice="${p.answer}"]`).classList.add("right-choice");
        show();
      }
      reveal();
      return { box: form, gate, hold() {} };
    }
    gate.dataset.revealed = "0";
    widgetNode.inert = true; // covered: nothing in it takes the focus or a click
    widgetNode.setAttribute("aria-hidden", "true");
    const saved = keep ? predictStore.get(section, p) : null;
    if (saved !== null) commit(saved, false);
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      if (chosen !== null) return;
      const checked = form.querySelector("input:checked");
      if (!checked) {
        feedback.dataset.result = "none";
        feedback.replaceChildren(el("strong", { text: t("ls_predict_pick") }));
        return;
      }
      const c = Number(checked.value);
      if (keep) predictStore.set(section, p, c);
      commit(c, true);
    });
    // hold(nodes): the text that reads the widget, hidden while the gate is covered.
    const hold = (nodes) => {
      held = nodes;
      if (gate.dataset.revealed !== "1") held.forEach((n) => { n.dataset.held = id; });
    };
    return { box: form, gate, hold };
  }

  // Fisher–Yates on a copy: the order in which a question's choices are shown, new on every load,
  // so that the position of the right answer carries no information.
  function shuffled(items, random) {
    const out = items.slice();
    const draw = random || Math.random;
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(draw() * (i + 1));
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  }

  // On paper (?print=1) the student's handout and the teacher's answer key must list the choices
  // in the same order, so that "the second one" means the same on both: a shuffle seeded by the
  // question's own text (still unrelated to where the answer is stored).
  function seededRandom(text) {
    let h = 2166136261;
    for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619) >>> 0;
    return () => {
      h = (Math.imul(h ^ (h >>> 15), 2246822507) + 0x9e3779b9) >>> 0;
      return h / 4294967296;
    };
  }

  // One question. A first wrong answer gets the question's hint and a second try (the choice
  // already tried is struck out); the right answer and the explanation appear once it is answered
  // right or tried twice; then onDone() is called, and the form's data-done says how it went
  // (first, second or missed). A final check's question links to the section it draws on (titles:
  // the sections' titles by id). opts.saved: an answer kept from an earlier visit ({r, c, w}, see
  // progress), shown as answered; opts.onAnswer(record): called once it is answered;
  // opts.teacher: the answer key (the answer, explanation and hint shown, nothing to answer).
  function question(q, i, titles, onDone, opts) {
    const options = opts || {};
    const name = "q" + i;
    const state = { tries: 0, chosen: null, done: false, empty: false, wrong: undefined };
    const onPaper = new URLSearchParams(window.location.search).get("print") === "1";
    const order = shuffled(q.choices.map((_, j) => j), onPaper ? seededRandom(q.question.en) : null);
    const gap = () => (lang() === "ja" ? "　" : " "); // a full-width space between 問1 and a Japanese question
    const kind = ui("span", { class: "q-kind q-kind-" + q.kind }, "ls_kind_" + q.kind);
    const legend = el("legend", {}, bound(el("span"), () => t("ls_question_n", { n: i + 1 }) + gap()), kind, " ",
      txt("span", { class: "q-text" }, q.question));
    const inputs = [];
    const choices = order.map((j, shown) => {
      const input = el("input", { type: "radio", name, value: String(j), id: `q${i}-c${shown}` });
      inputs.push(input);
      const label = txt("label", { for: input.id }, q.choices[j]);
      const mark = options.teacher && j === q.answer ? ui("strong", { class: "answer-mark" }, "ls_teacher_answer_mark") : null;
      return el("div", { class: "choice", "data-choice": String(j) }, input, " ", label, mark ? [" ", mark] : null);
    });
    const feedback = el("div", { class: "feedback", id: `q${i}-feedback`, role: "status", tabindex: "-1" });
    const submit = options.teacher ? null : ui("button", { type: "submit", class: "action", id: `q${i}-submit` }, "ls_check_answer");
    const tryLink = Object.keys(q.params || {}).length
      ? (options.link || lessonLink)(q.section ? "/lesson/" + q.section : HERE, q.params,
        { class: "try-apply", id: `q${i}-try` }, () => t("ls_check_try_it"), q.section)
      : null;
    const from = q.section
      ? el("p", { class: "q-from" },
        lessonLink("/lesson/" + q.section, null, { class: "q-section", id: `q${i}-section`, "data-section": String(q.section) },
          () => t("ls_from_section", { n: q.section, title: pick(titles[q.section]) })))
      : null;
    const hint = () => el("span", { class: "hint", text: pick(q.hint) });
    const show = () => {
      if (options.teacher) {
        feedback.dataset.result = "key";
        feedback.replaceChildren(
          el("strong", { text: t("ls_teacher_answer", { answer: pick(q.choices[q.answer]) }) }),
          " ",
          el("span", { class: "explanation", text: pick(q.explanation) }),
          el("span", { class: "key-hint" }, el("strong", { text: t("ls_teacher_hint") }), " ", hint()),
          ...(tryLink ? [" ", tryLink] : []));
        return;
      }
      if (state.empty) {
        feedback.dataset.result = "none";
        // After a wrong first try the hint stays in view.
        feedback.replaceChildren(el("strong", { text: t("ls_check_pick") }), ...(state.tries && !state.done ? [" ", hint()] : []));
        return;
      }
      if (!state.tries) return;
      const right = state.chosen === q.answer;
      if (!right && !state.done) {
        feedback.dataset.result = "retry";
        feedback.replaceChildren(el("strong", { text: t("ls_try_again") }), " ", hint());
        return;
      }
      feedback.dataset.result = right ? "correct" : "wrong";
      feedback.replaceChildren(
        el("strong", { text: right ? t("ls_correct") : t("ls_wrong", { answer: pick(q.choices[q.answer]) }) }),
        " ",
        el("span", { class: "explanation", text: pick(q.explanation) }),
        ...(tryLink ? [" ", tryLink] : [])
      );
    };
    relabel.push(show);
    const form = el("form", { class: "question", id: "question-" + i, novalidate: true, "data-kind": q.kind },
      from, el("fieldset", {}, legend, choices), submit, feedback);
    const choiceOf = (j) => form.querySelector(`[data-choice="${j}"]`);
    // The wrong choice of a first try cannot be taken twice: the second try is a real one.
    const strike = (j) => {
      const input = choiceOf(j).querySelector("input");
      input.checked = false;
      input.disabled = true;
      choiceOf(j).classList.add("tried-choice");
    };
    const finish = () => {
      inputs.forEach((input) => { input.disabled = true; });
      if (submit) submit.disabled = true;
      choiceOf(q.answer).classList.add("right-choice");
      choiceOf(state.chosen).querySelector("input").checked = true;
      if (state.chosen !== q.answer) choiceOf(state.chosen).classList.add("wrong-choice");
      form.dataset.done = state.chosen === q.answer ? (state.tries === 1 ? "first" : "second") : "missed";
    };
    if (options.teacher) {
      inputs.forEach((input) => { input.disabled = true; });
      choiceOf(q.answer).classList.add("right-choice");
      choiceOf(q.answer).querySelector("input").checked = true;
      form.dataset.teacher = "1";
      show();
      return form;
    }
    const saved = options.saved;
    if (saved) {
      // Answered on an earlier visit: shown as it was left.
      state.tries = saved.r === "first" ? 1 : 2;
      state.chosen = saved.c;
      state.done = true;
      if (saved.w !== undefined && saved.w !== saved.c) { state.wrong = saved.w; strike(saved.w); }
      finish();
      form.dataset.restored = "1";
      form.append(ui("p", { class: "note restored-note" }, "ls_progress_restored"));
      show();
    }
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      if (state.done) return;
      const checked = form.querySelector("input:checked");
      state.empty = !checked;
      if (checked) {
        state.tries += 1;
        state.chosen = Number(checked.value);
        state.done = state.chosen === q.answer || state.tries >= 2;
        if (!state.done) {
          state.wrong = state.chosen;
          strike(state.chosen);
        }
        if (state.done) finish();
      }
      show();
      if (state.done) {
        feedback.focus(); // the button that had the focus is disabled now
        if (options.onAnswer) {
          const rec = { r: form.dataset.done, c: state.chosen };
          if (state.wrong !== undefined) rec.w = state.wrong;
          options.onAnswer(rec);
        }
        if (onDone) onDone();
      }
    });
    return form;
  }

  // The final check's tally, once every question is answered: how many right at the first try,
  // and the sections to read again (those of the questions not right at the first try).
  function tally(check, forms, titles) {
    const out = el("div", { class: "tally", id: "check-tally", role: "status" });
    const apply = () => {
      if (forms.some((f) => !f.dataset.done)) { out.replaceChildren(); return; }
      const first = forms.filter((f) => f.dataset.done === "first").length;
      const second = forms.filter((f) => f.dataset.done === "second").length;
      const again = [...new Set(check.filter((q, i) => forms[i].dataset.done !== "first").map((q) => q.section))].sort((a, b) => a - b);
      out.replaceChildren(
        el("p", { text: t("ls_tally", { n: check.length, first, second }) }),
        again.length
          ? el("p", {}, t("ls_review"), " ",
            again.map((n, k) => [k ? t("ls_list_sep") : "",
              // Redrawn whole on a language switch, so a plain link (not lessonLink, which relabels itself).
              el("a", { class: "review-link", href: `${pageURL("/lesson/" + n)}?lang=${lang()}`, text: t("ls_section_title", { n, title: pick(titles[n]) }) })]))
          : el("p", { text: t("ls_review_none") }));
    };
    relabel.push(apply);
    return { node: out, update: apply };
  }

  function neighbours(section, all) {
    // The answer key goes on to the next section's; the whole lesson (?further=1) stays whole.
    const keep = mode.teacher || mode.further
      ? Object.assign({}, mode.teacher ? { teacher: "1" } : {}, mode.further ? { further: "1" } : {})
      : null;
    const at = all.findIndex((s) => s.id === section.id);
    const links = [];
    if (at > 0) {
      const prev = all[at - 1];
      links.push(lessonLink("/lesson/" + prev.id, keep, { rel: "prev", id: "prev-section" },
        () => t("ls_prev", { title: pick(prev.title) })));
    }
    if (at >= 0 && at < all.length - 1) {
      const next = all[at + 1];
      links.push(lessonLink("/lesson/" + next.id, keep, { rel: "next", id: "next-section" },
        () => t("ls_next", { title: pick(next.title) })));
    }
    return el("nav", { class: "pager", "data-i18n-attr": "aria-label:ls_pager" }, links);
  }

  // The teacher notes (先生向けメモ), folded at the end of the page; open in the answer key
  // (?teacher=1). Drawn only when the section has them.
  function teacherNotes(notes) {
    if (!notes || !notes.html) return null;
    // minutes: the basic path's time; further_minutes: the 発展 part's (the second session).
    const minutes = Number.isFinite(notes.minutes) && notes.minutes > 0
      ? [" ", notes.further_minutes > 0
        ? ui("span", { class: "teacher-minutes", id: "teacher-minutes" }, "ls_teacher_minutes_further", { n: notes.minutes, m: notes.further_minutes })
        : ui("span", { class: "teacher-minutes", id: "teacher-minutes" }, "ls_teacher_minutes", { n: notes.minutes })]
      : null;
    return el("details", { class: "teacher-notes", id: "teacher-notes", open: mode.teacher },
      el("summary", {}, ui("span", { class: "teacher-notes-title" }, "ls_teacher_notes"), minutes),
      htmlNode(el("div", { class: "teacher-notes-body lesson-text" }), notes.html));
  }

  // The address of this page (its widget settings kept) in another mode: present (true: projector
  // mode at that slide; false: the page), and an anchor.
  function modeHref(present, slide, anchor) {
    const search = new URLSearchParams(window.location.search);
    search.delete("view");
    search.delete("slide");
    if (present) {
      search.set("view", "present");
      search.set("slide", String(slide));
    }
    search.set("lang", lang());
    return window.location.pathname + "?" + search.toString() + (anchor ? "#" + anchor : "");
  }

  // Another section in projector mode, at a slide (a number, or "last"); the answer key kept.
  function presentHref(id, slide) {
    const search = new URLSearchParams({ view: "present", slide: String(slide) });
    if (mode.teacher) search.set("teacher", "1");
    search.set("lang", lang());
    return pageURL("/lesson/" + id) + "?" + search.toString();
  }

  // The header, the blocks, key points, try box and check of a section as a list of parts, each
  // { kind, nodes }; in projector mode the running text comes in slide-sized pieces.
  function renderSection(section, all) {
    const mounts = [];
    const presentLink = mode.present ? null : el("a", { class: "present-link", id: "present-link" });
    if (presentLink) {
      const apply = () => {
        presentLink.href = modeHref(true, 1);
        presentLink.textContent = t("ls_present");
      };
      apply();
      relabel.push(apply);
      document.addEventListener("lesson:params", apply);
      presentLink.addEventListener("click", apply); // the widgets' settings of this moment go along
    }
    const header = el("header", { class: "section-head" },
      el("div", { class: "section-tools" },
        el("p", { class: "kicker" },
          ui("span", {}, "ls_section_n", { n: section.id }),
          " · ",
          bound(el("span"), () => t("ls_source", { src: pick(section.source) }))),
        presentLink),
      txt("h1", { id: "section-title" }, section.title),
      txt("p", { class: "lead" }, section.summary),
      el("section", { class: "objectives", "aria-labelledby": "objectives-title" },
        ui("h2", { id: "objectives-title" }, "ls_objectives"),
        el("ul", {}, section.objectives.map((o) => txt("li", {}, o)))));
    const slides = [{ kind: "title", nodes: [header] }];
    // The section's drawn picture and the model map (pictures.js), before the text.
    if (window.LessonPictures) slides.push({ kind: "picture", nodes: [window.LessonPictures.figure(section.id)] });
    const asks = predictions(section);
    if (mode.present) slides.push(...textSlides(section, mounts, asks));
    else slides.push({ kind: "blocks", nodes: pageBlocks(section, mounts, asks) });
    // The key points come after the check (they would answer it), folded until every question of
    // the check is answered; open in the answer key and on paper.
    const keyList = el("ul", {}, section.key_points.map((k) => txt("li", {}, k)));
    const keyPoints = mode.present
      ? el("section", { class: "key-points", id: "key-points", "aria-labelledby": "key-points-title" },
        ui("h2", { id: "key-points-title" }, "ls_key_points"), keyList)
      : el("details", { class: "key-points", id: "key-points", open: mode.teacher || mode.print },
        el("summary", {}, ui("h2", { id: "key-points-title" }, "ls_key_points"), " ",
          ui("span", { class: "key-points-lock", id: "key-points-lock" }, "ls_key_points_locked")),
        keyList);
    const link = mode.present ? slideLinker(slides) : lessonLink;
    // A try item marked further uses a folded widget or idea: it goes in the try box's own 発展
    // fold (open where the page's folds are), and the slides, which carry the basic path, skip it.
    const tryItem = (item, i) =>
      el("li", { id: "try-" + i }, txt("span", {}, item.text),
        Object.keys(item.params).length
          ? [" ", link(HERE, item.params, { class: "try-apply", id: "try-apply-" + i }, () => t("ls_try_apply"))]
          : null);
    const basicTries = section.try.map((item, i) => (item.further ? null : tryItem(item, i))).filter(Boolean);
    const furtherTries = mode.present ? [] : section.try.map((item, i) => (item.further ? tryItem(item, i) : null)).filter(Boolean);
    if (basicTries.length || furtherTries.length) {
      slides.push({ kind: "try", nodes: [el("section", { class: "try-box", "aria-labelledby": "try-title" },
        ui("h2", { id: "try-title" }, "ls_try"),
        basicTries.length ? el("ul", {}, basicTries) : null,
        furtherTries.length
          ? el("details", { class: "further try-further", id: "try-further", open: mode.further || mode.teacher || mode.print },
            el("summary", {}, ui("span", { class: "further-badge" }, "ls_further"), " ",
              ui("span", { class: "further-skip" }, "ls_further_skip")),
            el("div", { class: "further-body" }, el("ul", {}, furtherTries)))
          : null)] });
    }
    const final = section.check.some((q) => q.section);
    const titles = Object.fromEntries(all.map((s) => [s.id, s.title]));
    const forms = [];
    const score = final ? tally(section.check, forms, titles) : null;
    // Answers are kept and shown again on the page itself: not in projector mode (the class would
    // see the answers of whoever used this browser), the answer key or a printed page.
    const keep = !mode.present && !mode.teacher && !mode.print;
    const saved = keep ? progress.answers(section) : {};
    const checkDone = () => {
      if (score) score.update();
      if (forms.length && forms.every((f) => f.dataset.done)) {
        keyPoints.dataset.unlocked = "1";
        if (!mode.present) keyPoints.open = true;
      }
    };
    forms.push(...section.check.map((q, i) => question(q, i, titles, checkDone, {
      teacher: mode.teacher,
      saved: saved[i],
      onAnswer: keep ? (rec) => progress.record(section, i, rec) : null,
      link,
    })));
    checkDone();
    const checkTitle = ui("h2", { id: "check-title" }, final ? "ls_final_check" : "ls_check");
    const checkIntro = ui("p", { class: "note" }, mode.teacher ? "ls_teacher_key_intro" : final ? "ls_final_check_intro" : "ls_check_intro");
    if (mode.present) {
      // One question per slide, under the check's title; the tally with the last one.
      forms.forEach((form, i) => {
        const head = i === 0 ? [checkTitle, checkIntro] : [ui("h2", { class: "check-title-again" }, final ? "ls_final_check" : "ls_check")];
        slides.push({ kind: "question", nodes: [el("section", { class: "check", "aria-labelledby": i === 0 ? "check-title" : null }, head, form,
          i === forms.length - 1 && score ? score.node : null)] });
      });
      slides.push({ kind: "key-points", nodes: [keyPoints] });
    } else {
      slides.push({ kind: "check", nodes: [el("section", { class: "check", "aria-labelledby": "check-title" },
        checkTitle, checkIntro, forms, score && score.node)] });
      slides.push({ kind: "key-points", nodes: [keyPoints] });
      const notes = teacherNotes(section.teacher);
      if (notes) slides.push({ kind: "notes", nodes: [notes] });
      if (section.links.length) {
        slides.push({ kind: "links", nodes: [el("nav", { class: "related", "aria-labelledby": "links-title" },
          ui("h2", { id: "links-title" }, "ls_links"),
          el("ul", {}, section.links.map((l) => el("li", {}, txt("a", { href: l.href }, l.label)))))] });
      }
      slides.push({ kind: "pager", nodes: [neighbours(section, all)] });
    }
    const crumbs = document.querySelector(".crumbs");
    if (crumbs && !$("to-glossary") && !mode.present) {
      crumbs.append(" · ", lessonLink("/lesson/glossary", null, { id: "to-glossary" }, () => t("ls_glossary")));
    }
    const article = $("section");
    if (mode.present) present(section, all, slides, article);
    else article.replaceChildren(...slides.flatMap((part) => part.nodes).filter(Boolean));
    asks.hold(); // laid out: the text after each covered widget waits with it
    window.Attn.applyI18n(article);
    relabel.push(() => { document.title = pick(section.title) + " · " + t("app_title"); });
    relabel[relabel.length - 1]();
    for (const [root, name] of mounts) {
      const widget = widgets[name];
      if (!widget) throw new Error("unknown widget " + name);
      widget.mount(root, context(section, name));
    }
    afterMount.forEach((fn) => fn());
    article.removeAttribute("aria-busy");
    document.dispatchEvent(new CustomEvent("lesson:rendered", { detail: { section, mode } }));
  }

  const afterMount = []; // what needs the widgets mounted (the parameters they read)

  // ---------------------------------------------------------------------------------------------
  // Projector mode (?view=present&slide=N): one idea or widget per screen, in large type. The
  // slides: the title and objectives; the running text cut at its headings (and, when long, between
  // paragraphs); each widget; the key points; the try box; each question. The widgets are mounted
  // once, all slides built at once and only shown or hidden, so a widget keeps its state between
  // visits. Keys: → PageDown Space for next, ← PageUp Shift+Space for back (a presenter's clicker
  // sends PageDown/PageUp or the arrows; PageDown and Space first scroll a slide taller than the
  // screen), Home and End. The slide is in the address, so a teacher can prepare a list of links.
  // Every slide is fitted to the screen (fitSlide); a widget with natural parts too tall for one
  // screen (its registration's `parts`, e.g. §5's steps) is shown over one slide per part.
  // ---------------------------------------------------------------------------------------------

  const SLIDE_TEXT = 1250; // about how many characters of running text fit on one slide

  // The top-level elements (paragraphs, lists, headings, tables) of a Markdown block, each with
  // its size (Japanese characters count double: they are twice as wide) and whether it is a
  // heading; when the two languages do not have the same sequence of elements, the block is one
  // piece (k: null), so that a slide holds the same text in both languages.
  const FIGURE_JA = /[上下]の(図|表|グラフ|ヒートマップ|ウィジェット|地図|例|ボタン|欄|スライダー)|[上下]では|左側|右側|[上下]図|次の図/;
  const FIGURE_EN = /\b(below|above|on the left|on the right|left-hand|right-hand)\b/i;

  function piecesOf(text) {
    const tops = (html) => safeNodes(html).filter((n) => n.nodeType === Node.ELEMENT_NODE);
    const ja = tops(text.ja);
    const en = tops(text.en);
    const same = ja.length === en.length && ja.every((n, k) => n.tagName === en[k].tagName);
    const size = (a, b) => Math.max(b.textContent.length, 2 * a.textContent.length);
    // figure: the piece points at a figure by its place (「下の」, "below"): it belongs with the figure.
    const figure = (a, b) => FIGURE_JA.test(a.textContent) || FIGURE_EN.test(b.textContent);
    if (!same) {
      const all = (nodes) => ({ textContent: nodes.map((n) => n.textContent).join("") });
      return [{ k: null, size: size(all(ja), all(en)), heading: false, figure: figure(all(ja), all(en)) }];
    }
    return en.map((n, k) => ({ k, size: size(ja[k], n), heading: /^H[23]$/.test(n.tagName), figure: figure(ja[k], n) }));
  }

  // A node that shows the element k of a Markdown block (all of it for k null), in the language shown.
  function pieceNode(node, text, k) {
    const apply = () => {
      const nodes = safeNodes(pick(text));
      node.replaceChildren(...(k === null ? nodes : [nodes.filter((n) => n.nodeType === Node.ELEMENT_NODE)[k]]));
    };
    apply();
    relabel.push(apply);
    return node;
  }

  // Projector slides carry the lesson's basic path only: a block inside ':::: further' (発展),
  // code, technical notes (endpoints, file paths) and note boxes stay on the page, off the
  // screen. The sentence that introduces a widget (the paragraph right before it, and its heading
  // when the paragraph was the heading's only text) goes on the widget's slide, above a
  // prediction asked at the widget, so that no slide talks about a figure it does not show.
  const WIDGET_INTRO = 600; // the most text (in the units of piecesOf) that moves onto a widget's slide
  const WIDGET_TEXT = 600; // a text slide this short before a widget goes onto the widget's slide whole
  const WIDGET_POINTING = 500; // the most text pointing at the figure that follows it onto its slide

  function textSlides(section, mounts, asks) {
    const out = [];
    let open = null; // the text slide being filled: { kind, nodes, size, headingOnly, pieces }
    const add = (node, size, heading, figure) => {
      // Right after a widget, text that points back at it (「上の図」, "above") stays on its slide.
      const last = out[out.length - 1];
      if (!open && figure && !heading && size <= WIDGET_INTRO / 2 && last && last.kind === "widget" && !last.part) {
        node.classList.add("widget-intro");
        last.nodes.push(node);
        return;
      }
      const full = open && !open.headingOnly && open.size + size > SLIDE_TEXT;
      // A heading starts a slide unless the slide is empty, or less than half full (a short part
      // shares the screen with the next rather than leave it half empty); so does text that would
      // overfill it.
      const short = open && open.size < SLIDE_TEXT / 2;
      if (!open || (heading && !short && (open.size > 0 || !open.headingOnly)) || full) {
        open = { kind: "text", nodes: [], size: 0, headingOnly: true, pieces: [] };
        out.push(open);
      }
      open.nodes.push(node);
      open.pieces.push({ node, size, heading, figure });
      open.size += size;
      open.headingOnly = open.headingOnly && heading;
    };
    // The text that introduces a widget, taken off the end of the open text slide: all of a short
    // slide; else from the first piece that points at the figure by its place (「下の」, "below")
    // or, without one, the last paragraph; and the heading too when nothing else would be left.
    const intro = () => {
      if (!open || !open.pieces.length) return [];
      const pieces = open.pieces;
      let from = pieces.length;
      if (open.size <= WIDGET_TEXT) from = 0;
      else {
        const pointing = pieces.findIndex((piece) => piece.figure);
        const last = pieces[pieces.length - 1];
        // Text that points at the figure goes with it (up to WIDGET_POINTING: the widget keeps the screen).
        const pointed = pointing >= 0 ? pieces.slice(pointing).reduce((sum, piece) => sum + piece.size, 0) : Infinity;
        if (pointed <= WIDGET_POINTING) from = pointing;
        else if (!last.heading && last.size <= WIDGET_INTRO) from = pieces.length - 1;
        if (from === 1 && pieces[0].heading) from = 0;
      }
      const taken = pieces.splice(from);
      open.nodes = open.pieces.map((piece) => piece.node);
      open.size = open.pieces.reduce((sum, piece) => sum + piece.size, 0);
      if (!open.pieces.length) out.splice(out.indexOf(open), 1);
      return taken.map((piece) => {
        piece.node.classList.add("widget-intro");
        return piece.node;
      });
    };
    section.blocks.forEach((b, i) => {
      if (b.further) return; // 発展: on the page only
      if (b.type === "widget") {
        const lead = intro();
        open = null;
        // A widget too tall for one screen that has natural parts (its registration's `parts`)
        // gets one slide per part; the widget itself is mounted once and moves to the part shown.
        const node = block(b, i, section, mounts);
        const asked = asks.take(b.widget, node);
        const moving = asked ? asked.gate : node;
        const parts = (widgets[b.widget] && widgets[b.widget].parts) || 1;
        for (let part = 1; part <= parts; part++) {
          out.push({ kind: "widget", widget: b.widget, widgetNode: moving, box: asked ? asked.box : null,
            part: parts > 1 ? part : 0, parts, nodes: part === 1 ? [...lead, ...(asked ? [asked.box] : []), moving] : [] });
        }
      } else if (b.type === "html") {
        piecesOf(b.html).forEach((piece, n) =>
          add(pieceNode(el("div", { class: "lesson-text", id: n ? `block-${i}-${n}` : `block-${i}` }), b.html, piece.k),
            piece.size, piece.heading, piece.figure));
      }
      // Code, technical notes and note boxes: on the page only.
    });
    return out;
  }

  // How a try link (or a question's "now try it") is made in projector mode: it stays in
  // projector mode and opens the slide of the widget that reads the link's parameters (known once
  // the widgets are mounted); one into another section opens that section's page. Parameters that
  // no slide's widget reads are a 発展 widget's (on the page only): that link opens the page with
  // its 発展 folds open (?further=1).
  function slideLinker(slides) {
    return (path, params, attrs, textOf, otherSection) => {
      if (otherSection) return lessonLink(path, params, attrs, textOf);
      const a = el("a", attrs || {});
      const apply = () => {
        const keys = Object.keys(params || {});
        let best = 0;
        let at = 0;
        slides.forEach((s, k) => {
          if (s.kind !== "widget") return;
          const reads = paramReads[s.widget] || new Set();
          const score = keys.filter((key) => reads.has(key)).length;
          if (score > best) { best = score; at = k + 1; }
        });
        const search = new URLSearchParams(params || {});
        if (!at && keys.length && mounted) {
          search.set("further", "1");
        } else {
          search.set("view", "present");
          search.set("slide", String(at || currentSlide()));
        }
        if (mode.teacher) search.set("teacher", "1");
        search.set("lang", lang());
        a.href = hrefOf(path) + "?" + search.toString();
        a.textContent = textOf();
      };
      let mounted = false; // which widget reads what is known once they are mounted
      apply();
      relabel.push(apply);
      afterMount.push(() => {
        mounted = true;
        apply();
      });
      return a;
    };
  }

  // Fitting a slide to the screen ("one idea per screen"): a slide taller than the screen has its
  // type made smaller step by step (a widget's slide: its zoom, which scales its figures too), down
  // to a floor that a class still reads from the back of the room; what is still too tall there
  // scrolls inside the slide (PageDown and Space show its rest) and is marked slide-tall. A slide
  // of text (or a question) that fills less than half the screen at full size has its type made
  // larger, step by step up to FIT_GROW, while it still fits (issue 34: no slide half empty); a
  // widget's slide is never made larger.
  const FIT_STEP = 0.05;
  const FIT_FLOOR = { text: 0.62, widget: 0.6 };
  const FIT_GROW = 1.8;
  const FIT_HALF = 0.55; // grow a text slide until its content fills this much of the screen

  function fitSlide(node) {
    if (node.hidden) return 1;
    const inner = node.firstElementChild;
    const widget = node.classList.contains("slide-widget");
    const base = widget ? Number(getComputedStyle(node).getPropertyValue("--widget-zoom")) || 1 : 1;
    const floor = widget ? FIT_FLOOR.widget : FIT_FLOOR.text;
    const apply = (f) => {
      node.style.setProperty("--fit", String(f));
      if (widget) inner.style.zoom = String(Math.round(base * f * 1000) / 1000);
    };
    const over = () => node.scrollHeight > node.clientHeight + 1;
    let f = 1;
    apply(f);
    const shrink = () => {
      while (over() && f > floor) {
        f = Math.max(floor, Math.round((f - FIT_STEP) * 100) / 100);
        apply(f);
      }
    };
    node.classList.remove("slide-intro-off");
    shrink();
    // A widget too tall for its introducing sentence too, even at the floor: the sentence stays on
    // the page only (the widget keeps the screen).
    if (widget && over() && node.querySelector(".widget-intro")) {
      node.classList.add("slide-intro-off");
      f = 1;
      apply(f);
      shrink();
    }
    const used = () => inner.getBoundingClientRect().height / node.clientHeight;
    while (!widget && f >= 1 && f < FIT_GROW && !over() && used() < FIT_HALF) {
      f = Math.round((f + FIT_STEP) * 100) / 100;
      apply(f);
      if (over()) {
        f = Math.round((f - FIT_STEP) * 100) / 100;
        apply(f);
        break;
      }
    }
    node.dataset.fit = String(f);
    node.classList.toggle("slide-tall", over());
    return f;
  }

  function currentSlide() {
    return Number(new URLSearchParams(window.location.search).get("slide")) || 1;
  }

  function present(section, all, slides, article) {
    document.body.dataset.present = "1";
    const total = slides.length;
    const at = all.findIndex((s) => s.id === section.id);
    const before = at > 0 ? all[at - 1] : null;
    const after = at >= 0 && at < all.length - 1 ? all[at + 1] : null;
    const nodes = slides.map((s, k) => {
      const node = el("section", { class: "slide slide-" + s.kind, id: "slide-" + (k + 1), "data-slide": String(k + 1), tabindex: "-1", hidden: true },
        el("div", { class: "slide-inner" }, s.nodes));
      if (s.part) {
        node.dataset.part = String(s.part);
        node.dataset.parts = String(s.parts);
      }
      return node;
    });
    const labelSlides = () => nodes.forEach((node, k) => node.setAttribute("aria-label", t("ls_slide_label", { n: k + 1, total })));
    labelSlides();
    relabel.push(labelSlides);
    article.replaceChildren(...nodes);

    const prev = el("button", { type: "button", class: "slide-button", id: "slide-prev", "aria-keyshortcuts": "ArrowLeft PageUp" });
    const next = el("button", { type: "button", class: "slide-button slide-next", id: "slide-next", "aria-keyshortcuts": "ArrowRight PageDown Space" });
    const counter = el("p", { class: "slide-counter", id: "slide-counter", "aria-live": "polite" });
    const exit = el("a", { class: "slide-exit", id: "slide-exit" });
    const where = el("p", { class: "slide-where" });
    const bar = el("nav", { class: "slide-bar", id: "slide-bar" }, exit, where, el("div", { class: "slide-steps" }, prev, counter, next));
    article.after(bar);

    let current = 0;
    // Fit the slide shown now, and again whenever its content changes size (a widget's answer
    // arrives, a figure is redrawn, a question is answered), the window is resized or the fonts
    // arrive; once per frame at most.
    let pending = 0;
    const refit = () => {
      if (pending) return;
      pending = window.requestAnimationFrame(() => {
        pending = 0;
        if (current) fitSlide(nodes[current - 1]);
      });
    };
    const watcher = typeof ResizeObserver === "function" ? new ResizeObserver(refit) : null;
    window.addEventListener("resize", refit);
    document.fonts.ready.then(refit);
    relabel.push(refit);
    const anchorOf = (k) => {
      // A widget's slide leaves to the widget (its introducing sentence is above it on the page).
      const first = nodes[k - 1].querySelector(".widget[id]") || nodes[k - 1].querySelector("[id]:not(.slide)");
      return first ? first.id : "";
    };
    const labels = () => {
      bar.setAttribute("aria-label", t("ls_slides_nav"));
      counter.textContent = t("ls_slide_counter", { n: current, total });
      where.textContent = t("ls_section_title", { n: section.id, title: pick(section.title) });
      prev.textContent = current === 1 && before ? t("ls_slide_prev_section") : t("ls_slide_prev");
      next.textContent = current === total && after ? t("ls_slide_next_section") : t("ls_slide_next");
      prev.disabled = current === 1 && !before;
      next.disabled = current === total && !after;
      exit.textContent = t("ls_present_exit");
      exit.href = modeHref(false, 0, anchorOf(current));
    };
    relabel.push(labels);

    function go(n) {
      const k = Math.max(1, Math.min(total, n));
      const active = document.activeElement;
      const lost = active && active !== document.body && nodes.some((node) => node.hidden === false && node.contains(active));
      if (current) nodes[current - 1].hidden = true;
      current = k;
      // A part of a widget: the widget moves onto this slide, which shows that part of it.
      // Its prediction goes along while the widget is still covered (a slide opened from the
      // address at a later part), so that the question is always right above its covered widget.
      const part = slides[k - 1];
      const inner = nodes[k - 1].firstElementChild;
      if (part.part === 1 && (part.widgetNode.parentNode !== inner || (part.box && part.box.parentNode !== inner))) {
        // The first part keeps the widget under its introducing sentence and its prediction.
        inner.append(...(part.box ? [part.box] : []), part.widgetNode);
      } else if (part.part > 1) {
        const covered = part.box && part.widgetNode.dataset.revealed === "0";
        // Once answered, the prediction goes back to the first part's slide (under its sentence).
        const first = nodes[k - part.part].firstElementChild;
        if (part.box && !covered && part.box.parentNode !== first) first.insertBefore(part.box, part.widgetNode.parentNode === first ? part.widgetNode : null);
        if (part.widgetNode.parentNode !== inner || (covered && part.box.parentNode !== inner)) {
          inner.prepend(...(covered ? [part.box] : []), part.widgetNode);
        }
      }
      nodes[k - 1].hidden = false;
      fitSlide(nodes[k - 1]);
      nodes[k - 1].scrollTop = 0;
      if (watcher) {
        watcher.disconnect();
        watcher.observe(nodes[k - 1].firstElementChild);
      }
      setParams({ slide: k });
      labels();
      // The focus never stays on a slide no longer shown.
      if (lost) nodes[k - 1].focus({ preventScroll: true });
      document.dispatchEvent(new CustomEvent("lesson:slide", { detail: { slide: k, total } }));
    }
    const forward = () => {
      if (current < total) go(current + 1);
      else if (after) window.location.assign(presentHref(after.id, 1));
    };
    const back = () => {
      if (current > 1) go(current - 1);
      else if (before) window.location.assign(presentHref(before.id, "last"));
    };
    // PageDown and Space show the rest of a slide taller than the screen before moving on.
    const page = (down) => {
      const node = nodes[current - 1];
      const more = down ? node.scrollTop + node.clientHeight < node.scrollHeight - 4 : node.scrollTop > 0;
      if (more) node.scrollBy({ top: (down ? 1 : -1) * Math.round(node.clientHeight * 0.85), behavior: "instant" });
      else if (down) forward();
      else back();
    };
    prev.addEventListener("click", back);
    next.addEventListener("click", forward);
    document.addEventListener("keydown", (ev) => {
      if (ev.defaultPrevented || ev.altKey || ev.ctrlKey || ev.metaKey) return;
      const target = ev.target instanceof Element ? ev.target : document.body;
      const tag = target.tagName;
      const type = tag === "INPUT" ? target.type : "";
      const typing = target.isContentEditable || tag === "TEXTAREA" || tag === "SELECT" ||
        (tag === "INPUT" && !["range", "radio", "checkbox", "button", "submit", "reset"].includes(type));
      const control = typing || tag === "INPUT"; // a slider or a radio button uses the arrows, Home and End
      const presses = tag === "BUTTON" || tag === "SUMMARY" || tag === "INPUT"; // Space activates these
      let act = null;
      if (ev.key === "ArrowRight" && !control) act = forward;
      else if (ev.key === "ArrowLeft" && !control) act = back;
      else if (ev.key === "PageDown" && !typing) act = () => page(true);
      else if (ev.key === "PageUp" && !typing) act = () => page(false);
      else if (ev.key === " " && !typing && !presses) act = () => page(!ev.shiftKey);
      else if (ev.key === "Home" && !control) act = () => go(1);
      else if (ev.key === "End" && !control) act = () => go(total);
      if (!act) return;
      ev.preventDefault();
      act();
    });
    const asked = new URLSearchParams(window.location.search).get("slide");
    go(asked === "last" ? total : Number(asked) || 1);
  }

  async function showSection() {
    // The section's number from the address: /lesson/3 (the explorer) or lesson/3.html (the static build).
    const n = window.location.pathname.split("/").filter(Boolean).pop().replace(/\.html$/, "");
    const article = $("section");
    try {
      const [section, all] = await Promise.all([getJSON(dataURL("sections/" + n)), getJSON(dataURL("sections"))]);
      renderSection(section, all);
    } catch (err) {
      article.replaceChildren(el("p", { class: "error", role: "alert", text: t("error", { msg: err.message }) }));
      article.removeAttribute("aria-busy");
    }
  }

  // Redraw part of a widget without losing the keyboard focus: the element that had it is
  // found again by its id in the redrawn part.
  function keepFocus(root, redraw) {
    const active = document.activeElement;
    const id = active && active.id && root.contains(active) ? active.id : null;
    redraw();
    if (id && document.activeElement !== active) {
      const again = document.getElementById(id);
      if (again && root.contains(again)) again.focus();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // What the widgets share.
  // ---------------------------------------------------------------------------------------------

  // An integer from the address (or a control), kept in [lo, hi]; fallback when it is not a number.
  function clampInt(v, lo, hi, fallback) {
    const x = Math.floor(Number(v));
    return Number.isFinite(x) ? Math.max(lo, Math.min(hi, x)) : fallback;
  }

  // Show a failed request in a widget's error box. On the static build, a widget whose computation
  // still needs the explorer's API says so in a plain sentence (Attn.NeedsExplorer), marked
  // .needs-explorer, not as an error code.
  function fail(error, err) {
    const needs = Boolean(err && err.name === "NeedsExplorer");
    error.textContent = needs ? err.message : t("error", { msg: err.message });
    error.classList.toggle("needs-explorer", needs);
    error.classList.remove("hidden");
  }

  // The in-page models (static/engine/models.js), imported when a widget first needs one.
  let modelsModule = null;
  function inPageModels() {
    if (!modelsModule) modelsModule = import("../engine/models.js");
    return modelsModule;
  }

  // An onProgress(loaded, total) for models.js's loaders that shows the download on p's status
  // line ("Loading the model… 42%"), so the page stays usable and says what it is waiting for.
  function modelProgress(p) {
    return (loaded, total) => {
      if (!p.status) return;
      const mb = (loaded / 1e6).toFixed(1);
      p.status.textContent = total > 0
        ? t("ls_model_progress", { pct: Math.min(100, Math.round((100 * loaded) / total)), mb })
        : t("ls_model_progress_mb", { mb });
    };
  }

  // A failure to run an in-page model, said plainly: a device that cannot run models at all gets
  // its own sentence (not a stack of WebAssembly words), an engine error with a code its sentence
  // in the page's language (ls_err_CODE); anything else is shown as fail() shows it.
  function modelFail(error, err) {
    if (err && err.name === "DeviceError") {
      error.textContent = t("ls_model_device");
      error.classList.remove("hidden");
    } else if (err && err.code && t("ls_err_" + err.code) !== "ls_err_" + err.code) {
      // An engine error the page can say in the reader's language (err.code names its sentence).
      error.textContent = t("ls_err_" + err.code);
      error.classList.remove("hidden");
    } else fail(error, err);
  }

  // A widget's status line (unless withStatus is false), error box and output, with the ids
  // prefix-status, prefix-error and prefix-out.
  function panes(prefix, withStatus) {
    return {
      status: withStatus === false ? null : el("p", { class: "note", id: prefix + "-status", role: "status" }),
      error: el("div", { class: "error hidden", id: prefix + "-error", role: "alert" }),
      out: el("div", { class: "widget-out", id: prefix + "-out", "data-seq": "0" }),
      seq: 0, // the number of the latest request: older answers are dropped
    };
  }

  // An async function that asks opts.fetch(req) for req = opts.request(), shows opts.busy() (when
  // given) in the status line meanwhile, and hands the newest answer to opts.done(res); the output
  // keeps the request and its number in data-request and data-seq (the browser tests wait on them).
  function loader(p, opts) {
    return async () => {
      const req = opts.request();
      const mine = ++p.seq;
      if (p.status && opts.busy) p.status.textContent = opts.busy();
      try {
        const res = await opts.fetch(req);
        if (mine !== p.seq) return;
        p.error.classList.add("hidden");
        if (p.status) p.status.textContent = "";
        opts.done(res, req);
        p.out.dataset.request = JSON.stringify(req);
        p.out.dataset.seq = String(mine);
      } catch (err) {
        if (mine !== p.seq) return;
        if (p.status) p.status.textContent = "";
        modelFail(p.error, err);
      }
    };
  }

  // A <select> of 1..count (optionText(n) as each option's text), with a first option "0" when
  // first (its text) is given; onChange(number) when the choice changes.
  function select(id, label, count, value, optionText, first, onChange) {
    const node = el("select", { id, "aria-label": label },
      first ? el("option", { value: "0", selected: value === 0, text: first }) : null,
      Array.from({ length: count }, (_, i) => el("option", { value: String(i + 1), selected: i + 1 === value, text: optionText(i + 1) })));
    if (onChange) node.addEventListener("change", () => onChange(Number(node.value)));
    return node;
  }

  // A row of token buttons (ids prefix + i) with the current one pressed; onPick(i) on a click.
  function tokenButtons(label, tokens, prefix, current, onPick, disabled) {
    return el("div", { class: "tokens", role: "group", "aria-label": label },
      tokens.map((tok, i) => {
        const b = el("button", { type: "button", class: "tok-button", id: prefix + i, "aria-pressed": String(i === current), disabled: i === disabled, text: tok });
        b.addEventListener("click", () => onPick(i));
        return b;
      }));
  }

  // A labelled range input for state[key] with its value in an <output> (id id-out); onValue()
  // after each move.
  function slider(state, id, key, min, max, step, label, onValue) {
    const o = el("output", { id: id + "-out", for: id, text: String(state[key]) });
    const input = el("input", { type: "range", id, min: String(min), max: String(max), step: String(step), value: String(state[key]), "aria-label": label });
    input.addEventListener("input", () => { state[key] = Number(input.value); o.textContent = input.value; onValue(); });
    return el("label", { class: "row" }, el("span", { class: "name", text: label }), input, o);
  }

  // ---------------------------------------------------------------------------------------------
  // The glossary (用語集): every term in both languages, grouped by the section that introduces
  // it, with links to every section whose text uses it.
  // ---------------------------------------------------------------------------------------------

  async function showGlossary() {
    const list = $("glossary");
    try {
      const [terms, sections] = await Promise.all([getJSON(dataURL("glossary")), getJSON(dataURL("sections"))]);
      const titles = Object.fromEntries(sections.map((s) => [s.id, s.title]));
      const other = () => (lang() === "ja" ? "en" : "ja");
      const entry = (g) => {
        const same = g.term.ja === g.term.en; // RoPE, d_k: one spelling in both languages
        const otherTerm = same ? null : el("span", { class: "term-other" });
        if (otherTerm) bound(otherTerm, () => { otherTerm.lang = other(); return g.term[other()]; });
        const uses = g.used_in.length
          ? el("p", { class: "term-uses" }, ui("span", {}, "ls_glossary_used"), " ",
            g.used_in.map((n, k) => [k ? t("ls_list_sep") : "",
              lessonLink("/lesson/" + n, null, { class: "term-use", "data-section": String(n) }, () => t("ls_section_n", { n }))]))
          : null;
        // Other names for the same idea (the seed text's スキップ結合 for 残差接続): "also called …";
        // the lesson's own text uses the term.
        const aliases = el("p", { class: "term-aliases", "data-term": g.id });
        const showAliases = () => {
          const names = (g.aliases && g.aliases[lang()]) || [];
          aliases.hidden = !names.length;
          aliases.replaceChildren(...(names.length
            ? [el("span", { text: t("ls_glossary_aliases") }), " ",
              ...names.flatMap((a, k) => [k ? t("ls_list_sep") : "", el("span", { class: "term-alias", text: a })])]
            : []));
        };
        showAliases();
        relabel.push(showAliases);
        return el("div", { class: "term-entry", id: "term-" + g.id },
          el("dt", {}, txt("span", { class: "term-main" }, g.term), otherTerm),
          el("dd", {}, txt("p", {}, g.definition), aliases, uses));
      };
      const groups = sections.filter((s) => terms.some((g) => g.section === s.id)).map((s) =>
        el("section", { class: "term-group", id: "terms-" + s.id, "aria-labelledby": "terms-title-" + s.id },
          el("h2", { id: "terms-title-" + s.id },
            lessonLink("/lesson/" + s.id, null, { class: "term-section" },
              () => t("ls_section_title", { n: s.id, title: pick(titles[s.id]) }))),
          el("dl", { class: "glossary-list" }, terms.filter((g) => g.section === s.id).map(entry))));
      list.replaceChildren(...groups);
      window.Attn.applyI18n(list);
      // The term in the address (#term-ID) is marked and brought into view, now and on a new anchor.
      const mark = () => {
        list.querySelectorAll(".term-target").forEach((n) => n.classList.remove("term-target"));
        const target = window.location.hash && document.getElementById(decodeURIComponent(window.location.hash.slice(1)));
        if (target && list.contains(target)) { target.classList.add("term-target"); target.scrollIntoView(); }
      };
      mark();
      window.addEventListener("hashchange", mark);
    } catch (err) {
      list.replaceChildren(el("p", { class: "error", role: "alert", text: t("error", { msg: err.message }) }));
    }
    list.removeAttribute("aria-busy");
  }

  // ---------------------------------------------------------------------------------------------
  // The teacher's plan (/lesson/plan): the first session, the 基礎 path in about 90 minutes, and
  // the second, the 発展 parts, each section with its minutes (from its teacher notes) and its
  // place on the clock, linked to its answer key; the totals are the rows' sums.
  // ---------------------------------------------------------------------------------------------

  async function showPlan() {
    const box = $("plan");
    try {
      const plan = await getJSON(dataURL("plan"));
      const clock = (m) => Math.floor(m / 60) + ":" + String(m % 60).padStart(2, "0");
      const table = (id, rows, total, params) => el("table", { class: "plan-table", id: "plan-" + id, "data-total": String(total) },
        el("thead", {}, el("tr", {}, ui("th", { scope: "col" }, "ls_plan_time"), ui("th", { scope: "col" }, "ls_plan_section"),
          ui("th", { scope: "col", class: "num" }, "ls_plan_minutes"))),
        el("tbody", {}, rows.map((r) => el("tr", { class: "plan-row", "data-section": String(r.section), "data-minutes": String(r.minutes),
          "data-start": String(r.start), "data-end": String(r.end) },
          el("td", { class: "plan-clock", text: clock(r.start) + "–" + clock(r.end) }),
          el("td", {}, lessonLink("/lesson/" + r.section, params, { class: "plan-link" },
            () => t("ls_section_title", { n: r.section, title: pick(r.title) }))),
          el("td", { class: "num", text: String(r.minutes) })))),
        el("tfoot", {}, el("tr", {}, ui("th", { scope: "row", colspan: "2" }, "ls_plan_total"),
          el("td", { class: "num plan-total", text: String(total) }))));
      box.replaceChildren(
        el("section", { class: "plan-session", "aria-labelledby": "plan-basic-title" },
          ui("h2", { id: "plan-basic-title" }, "ls_plan_basic", { n: plan.basic_total }),
          ui("p", { class: "note" }, "ls_plan_basic_text"),
          table("basic", plan.basic, plan.basic_total, { teacher: "1" })),
        el("section", { class: "plan-session", "aria-labelledby": "plan-further-title" },
          ui("h2", { id: "plan-further-title" }, "ls_plan_further", { n: plan.further_total }),
          ui("p", { class: "note" }, plan.further.length ? "ls_plan_further_text" : "ls_plan_further_none"),
          plan.further.length ? table("further", plan.further, plan.further_total, { teacher: "1", further: "1" }) : null));
    } catch (err) {
      box.replaceChildren(el("p", { class: "error", role: "alert", text: t("error", { msg: err.message }) }));
    }
    box.removeAttribute("aria-busy");
  }

  window.Lesson = {
    register(name, widget) {
      widgets[name] = widget;
    },
    memo,
    slidePart,
    shuffled,
    pick,
    keepFocus,
    clampInt,
    fail,
    panes,
    loader,
    inPageModels,
    modelProgress,
    select,
    tokenButtons,
    slider,
  };

  document.addEventListener("DOMContentLoaded", () => {
    setParams({ lang: lang() }); // the address always names the language shown
    if (mode.teacher) document.body.dataset.teacher = "1"; // the answer key: styles (and print) hook on it
    if (mode.present && document.body.dataset.view === "section") document.body.dataset.present = "1";
    if (document.body.dataset.view === "index") showIndex();
    else if (document.body.dataset.view === "glossary") showGlossary();
    else if (document.body.dataset.view === "plan") showPlan();
    else showSection();
  });
  document.addEventListener("langchange", () => relabel.forEach((fn) => fn()));
})();
