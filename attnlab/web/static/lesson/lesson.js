// The lesson: draws the index, each section and the glossary from the lesson API. A section's
// texts come from its Markdown files (attnlab/web/lesson/content/{ja,en}/NN-slug.md, served with
// both languages side by side); the interface's own strings from the catalog (Attn.t); the widgets
// (widgets/*.js) get their numbers from the API. The page's state (language, widget settings)
// lives in the address, so a link reproduces what its author saw.
(function () {
  "use strict";
  const { t, el, lang, getJSON, setParams } = window.Attn;
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
  function lessonLink(path, params, attrs, textOf) {
    const a = el("a", attrs || {});
    const apply = () => {
      const search = new URLSearchParams(params || {});
      search.set("lang", lang());
      a.href = path + "?" + search.toString();
      a.textContent = textOf();
    };
    apply();
    relabel.push(apply);
    return a;
  }

  let widgetCount = 0;

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
    const glossary = $("to-glossary");
    if (glossary) {
      const apply = () => { glossary.href = "/lesson/glossary?lang=" + lang(); };
      apply();
      relabel.push(apply);
    }
    try {
      const sections = await getJSON("/api/lesson/sections");
      toc.replaceChildren(
        ...sections.map((s) =>
          el("li", { class: s.final ? "toc-item toc-final" : "toc-item", id: "toc-" + s.id },
            el("div", { class: "toc-head" },
              lessonLink("/lesson/" + s.id, null, { class: "toc-link", id: "toc-link-" + s.id },
                () => t("ls_section_n", { n: s.id }) + " " + pick(s.title))),
            txt("p", { class: "toc-summary" }, s.summary),
            bound(el("p", { class: "note" }), () => t("ls_source", { src: pick(s.source) }))))
      );
    } catch (err) {
      toc.replaceChildren(el("li", { class: "error", role: "alert", text: t("error", { msg: err.message }) }));
    }
    toc.removeAttribute("aria-busy");
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
        out.setAttribute(attr.name, value);
      }
      for (const child of source.childNodes) {
        const c = copy(child);
        if (c) out.appendChild(c);
      }
      return out;
    };
    return Array.from(doc.body.childNodes, copy).filter(Boolean);
  }

  function htmlNode(node, text) {
    const apply = () => { node.replaceChildren(...safeNodes(pick(text))); };
    apply();
    relabel.push(apply);
    return node;
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
      const caption = el("figcaption", {},
        b.html ? htmlNode(el("div"), b.html) : null,
        b.where ? bound(el("p", { class: "where" }), () => t("ls_code_from", { where: b.where })) : null);
      const code = el("code");
      bound(code, () => pick(b.code));
      const pre = el("pre", { tabindex: "0", "data-language": b.language || "" }, code);
      const lines = pick(b.code).split("\n").length;
      // Long code stays folded: the text around it is the lesson, the code its evidence.
      const body = lines > LONG_CODE_LINES
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

  // One question. A first wrong answer gets the question's hint and a second try (the choice
  // already tried is struck out); the right answer and the explanation appear once it is answered
  // right or tried twice; then onDone() is called, and the form's data-done says how it went
  // (first, second or missed). A final check's question links to the section it draws on (titles:
  // the sections' titles by id).
  function question(q, i, titles, onDone) {
    const name = "q" + i;
    const state = { tries: 0, chosen: null, done: false, empty: false };
    const order = shuffled(q.choices.map((_, j) => j));
    const gap = () => (lang() === "ja" ? "　" : " "); // a full-width space between 問1 and a Japanese question
    const kind = ui("span", { class: "q-kind q-kind-" + q.kind }, "ls_kind_" + q.kind);
    const legend = el("legend", {}, bound(el("span"), () => t("ls_question_n", { n: i + 1 }) + gap()), kind, " ",
      txt("span", { class: "q-text" }, q.question));
    const inputs = [];
    const choices = order.map((j, shown) => {
      const input = el("input", { type: "radio", name, value: String(j), id: `q${i}-c${shown}` });
      inputs.push(input);
      return el("div", { class: "choice", "data-choice": String(j) }, input, " ", txt("label", { for: input.id }, q.choices[j]));
    });
    const feedback = el("div", { class: "feedback", id: `q${i}-feedback`, role: "status", tabindex: "-1" });
    const submit = ui("button", { type: "submit", class: "action", id: `q${i}-submit` }, "ls_check_answer");
    const tryLink = Object.keys(q.params || {}).length
      ? lessonLink(q.section ? "/lesson/" + q.section : window.location.pathname, q.params,
        { class: "try-apply", id: `q${i}-try` }, () => t("ls_check_try_it"))
      : null;
    const from = q.section
      ? el("p", { class: "q-from" },
        lessonLink("/lesson/" + q.section, null, { class: "q-section", id: `q${i}-section`, "data-section": String(q.section) },
          () => t("ls_from_section", { n: q.section, title: pick(titles[q.section]) })))
      : null;
    const hint = () => el("span", { class: "hint", text: pick(q.hint) });
    const show = () => {
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
          // The wrong choice cannot be taken twice: the second try is a real one.
          checked.checked = false;
          checked.disabled = true;
          checked.closest(".choice").classList.add("tried-choice");
        }
        if (state.done) {
          inputs.forEach((input) => { input.disabled = true; });
          submit.disabled = true;
          form.querySelector(`[data-choice="${q.answer}"]`).classList.add("right-choice");
          if (state.chosen !== q.answer) checked.closest(".choice").classList.add("wrong-choice");
          form.dataset.done = state.chosen === q.answer ? (state.tries === 1 ? "first" : "second") : "missed";
        }
      }
      show();
      if (state.done) {
        feedback.focus(); // the button that had the focus is disabled now
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
              el("a", { class: "review-link", href: `/lesson/${n}?lang=${lang()}`, text: t("ls_section_title", { n, title: pick(titles[n]) }) })]))
          : el("p", { text: t("ls_review_none") }));
    };
    relabel.push(apply);
    return { node: out, update: apply };
  }

  function neighbours(section, all) {
    const at = all.findIndex((s) => s.id === section.id);
    const links = [];
    if (at > 0) {
      const prev = all[at - 1];
      links.push(lessonLink("/lesson/" + prev.id, null, { rel: "prev", id: "prev-section" },
        () => t("ls_prev", { title: pick(prev.title) })));
    }
    if (at >= 0 && at < all.length - 1) {
      const next = all[at + 1];
      links.push(lessonLink("/lesson/" + next.id, null, { rel: "next", id: "next-section" },
        () => t("ls_next", { title: pick(next.title) })));
    }
    return el("nav", { class: "pager", "data-i18n-attr": "aria-label:ls_pager" }, links);
  }

  function renderSection(section, all) {
    const mounts = [];
    const header = el("header", { class: "section-head" },
      el("p", { class: "kicker" },
        ui("span", {}, "ls_section_n", { n: section.id }),
        " · ",
        bound(el("span"), () => t("ls_source", { src: pick(section.source) }))),
      txt("h1", { id: "section-title" }, section.title),
      txt("p", { class: "lead" }, section.summary),
      el("section", { class: "objectives", "aria-labelledby": "objectives-title" },
        ui("h2", { id: "objectives-title" }, "ls_objectives"),
        el("ul", {}, section.objectives.map((o) => txt("li", {}, o)))));
    const body = section.blocks.map((b, i) => block(b, i, section, mounts));
    const parts = [header, ...body];
    parts.push(el("section", { class: "key-points", "aria-labelledby": "key-points-title" },
      ui("h2", { id: "key-points-title" }, "ls_key_points"),
      el("ul", {}, section.key_points.map((k) => txt("li", {}, k)))));
    if (section.try.length) {
      parts.push(el("section", { class: "try-box", "aria-labelledby": "try-title" },
        ui("h2", { id: "try-title" }, "ls_try"),
        el("ul", {}, section.try.map((item, i) =>
          el("li", { id: "try-" + i }, txt("span", {}, item.text),
            Object.keys(item.params).length
              ? [" ", lessonLink(window.location.pathname, item.params, { class: "try-apply", id: "try-apply-" + i }, () => t("ls_try_apply"))]
              : null)))));
    }
    const final = section.check.some((q) => q.section);
    const titles = Object.fromEntries(all.map((s) => [s.id, s.title]));
    const forms = [];
    const score = final ? tally(section.check, forms, titles) : null;
    forms.push(...section.check.map((q, i) => question(q, i, titles, score && score.update)));
    parts.push(el("section", { class: "check", "aria-labelledby": "check-title" },
      ui("h2", { id: "check-title" }, final ? "ls_final_check" : "ls_check"),
      ui("p", { class: "note" }, final ? "ls_final_check_intro" : "ls_check_intro"),
      forms,
      score && score.node));
    if (section.links.length) {
      parts.push(el("nav", { class: "related", "aria-labelledby": "links-title" },
        ui("h2", { id: "links-title" }, "ls_links"),
        el("ul", {}, section.links.map((link) => el("li", {}, txt("a", { href: link.href }, link.label))))));
    }
    parts.push(neighbours(section, all));
    const crumbs = document.querySelector(".crumbs");
    if (crumbs && !$("to-glossary")) {
      crumbs.append(" · ", lessonLink("/lesson/glossary", null, { id: "to-glossary" }, () => t("ls_glossary")));
    }
    const article = $("section");
    article.replaceChildren(...parts);
    window.Attn.applyI18n(article);
    relabel.push(() => { document.title = pick(section.title) + " · " + t("app_title"); });
    relabel[relabel.length - 1]();
    for (const [root, name] of mounts) {
      const widget = widgets[name];
      if (!widget) throw new Error("unknown widget " + name);
      widget.mount(root, context(section, name));
    }
    article.removeAttribute("aria-busy");
  }

  async function showSection() {
    const n = window.location.pathname.split("/").filter(Boolean).pop();
    const article = $("section");
    try {
      const [section, all] = await Promise.all([getJSON("/api/lesson/sections/" + n), getJSON("/api/lesson/sections")]);
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

  // Show a failed request in a widget's error box.
  function fail(error, err) {
    error.textContent = t("error", { msg: err.message });
    error.classList.remove("hidden");
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
        fail(p.error, err);
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
      const [terms, sections] = await Promise.all([getJSON("/api/lesson/glossary"), getJSON("/api/lesson/sections")]);
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
        return el("div", { class: "term-entry", id: "term-" + g.id },
          el("dt", {}, txt("span", { class: "term-main" }, g.term), otherTerm),
          el("dd", {}, txt("p", {}, g.definition), uses));
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

  window.Lesson = {
    register(name, widget) {
      widgets[name] = widget;
    },
    memo,
    shuffled,
    pick,
    keepFocus,
    clampInt,
    fail,
    panes,
    loader,
    select,
    tokenButtons,
    slider,
  };

  document.addEventListener("DOMContentLoaded", () => {
    setParams({ lang: lang() }); // the address always names the language shown
    if (document.body.dataset.view === "index") showIndex();
    else if (document.body.dataset.view === "glossary") showGlossary();
    else showSection();
  });
  document.addEventListener("langchange", () => relabel.forEach((fn) => fn()));
})();
