// Shared by every page: the language switch, the header, JSON requests and small helpers.
(function () {
  "use strict";
  const STORE = "attnlab.lang";
  const STRINGS = window.ATTN_STRINGS;

  const LANGS = ["ja", "en"];

  // Where this page lives. The same pages run in the explorer (`attnlab explore`: data-site
  // "explorer", root "/") and in the static build (`attnlab lesson build-site`: data-site "static",
  // root a relative prefix such as "../", so the folder works under any sub-path of any host).
  // Every URL a page builds comes from these: siteURL("static/x.js") for a file, pageURL("/lesson/3")
  // for a page (the explorer's /lesson/3; the static build's lesson/3.html), dataURL for the lesson's
  // JSON (the same files in both: the explorer serves at those URLs what the build writes there).
  const ROOT = document.documentElement.dataset.root || "/";
  const STATIC_SITE = document.documentElement.dataset.site === "static";
  // The explorer's own tools (playground, model, masks) need its server: not in the static build.
  const SERVER_PAGES = ["/playground", "/model", "/masks"];

  function siteURL(path) {
    return ROOT + String(path).replace(/^\/+/, "");
  }

  function pageURL(path) {
    const name = String(path).replace(/^\/+/, "").replace(/\/+$/, "");
    if (!STATIC_SITE) return ROOT + name;
    return ROOT + (name === "" || name === "lesson" ? "index.html" : name + ".html");
  }

  function dataURL(name) {
    return siteURL("static/data/lesson/" + name + ".json");
  }

  // The language in the address (?lang=ja) wins: a teacher's link shows what the teacher saw.
  function urlLang() {
    const value = new URLSearchParams(window.location.search).get("lang");
    return LANGS.includes(value) ? value : null;
  }

  // Address, then the learner's last choice, then the browser's preferred languages, then the
  // server's reading of Accept-Language (data-lang on <html>), then English.
  function lang() {
    const fromUrl = urlLang();
    if (fromUrl) return fromUrl;
    const saved = window.localStorage.getItem(STORE);
    if (LANGS.includes(saved)) return saved;
    const preferred = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language || ""];
    for (const tag of preferred) {
      const primary = String(tag).toLowerCase().split("-")[0];
      if (LANGS.includes(primary)) return primary;
    }
    const hint = document.documentElement.dataset.lang;
    return LANGS.includes(hint) ? hint : "en";
  }

  // Put (or, with null, remove) parameters in the address without reloading the page.
  function setParams(values) {
    const url = new URL(window.location.href);
    for (const [name, value] of Object.entries(values)) {
      if (value === null || value === undefined) url.searchParams.delete(name);
      else url.searchParams.set(name, String(value));
    }
    window.history.replaceState(window.history.state, "", url);
  }

  function t(key, vars) {
    const table = STRINGS[lang()];
    let text = key in table ? table[key] : STRINGS.en[key];
    if (text === undefined) return key;
    for (const [name, value] of Object.entries(vars || {})) {
      text = text.split("{" + name + "}").join(String(value));
    }
    return text;
  }

  // Static text: a data-i18n attribute names the string for the element's text; data-i18n-attr
  // lists "attribute:key" pairs separated by ";" for attributes.
  function applyI18n(root) {
    root.querySelectorAll("[data-i18n]").forEach((node) => {
      node.textContent = t(node.dataset.i18n);
    });
    root.querySelectorAll("[data-i18n-attr]").forEach((node) => {
      for (const pair of node.dataset.i18nAttr.split(";")) {
        const [attr, key] = pair.split(":");
        node.setAttribute(attr, t(key));
      }
    });
  }

  function setLang(value) {
    window.localStorage.setItem(STORE, value);
    if (urlLang() || document.body.dataset.page === "lesson") setParams({ lang: value });
    refreshLang();
    document.dispatchEvent(new CustomEvent("langchange"));
  }

  function refreshLang() {
    const current = lang();
    document.documentElement.lang = current;
    document.title = t(document.body.dataset.title) + " · " + t("app_title");
    applyI18n(document);
    document.querySelectorAll(".lang-switch button").forEach((b) => {
      b.setAttribute("aria-pressed", String(b.dataset.lang === current));
      b.textContent = b.dataset.label;
    });
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const child of children.flat(Infinity)) {
      if (child !== null && child !== undefined) node.append(child);
    }
    return node;
  }

  function header() {
    const page = document.body.dataset.page;
    const links = [
      ["/", "lesson", "nav_lesson"],
      ["/playground", "playground", "nav_playground"],
      ["/model", "model", "nav_model"],
      ["/masks", "masks", "nav_masks"],
      ["/lesson/glossary", "glossary", "nav_glossary"], // the lesson's terms, one click from every page
    ].filter(([href]) => !(STATIC_SITE && SERVER_PAGES.includes(href))).map(([href, id, key]) =>
      el("a", { href: pageURL(href), "data-i18n": key, "aria-current": id === page ? "page" : null, id: "nav-" + id })
    );
    const switcher = el(
      "div",
      { class: "lang-switch", role: "group", "data-i18n-attr": "aria-label:lang_label" },
      el("button", { type: "button", "data-lang": "ja", "data-label": "日本語", id: "lang-ja", onclick: () => setLang("ja") }),
      el("button", { type: "button", "data-lang": "en", "data-label": "English", id: "lang-en", onclick: () => setLang("en") })
    );
    const top = el(
      "header",
      { class: "top" },
      el("a", { class: "skip", href: "#main", "data-i18n": "skip_to_main" }),
      el("a", { class: "brand", href: pageURL("/"), "data-i18n": "app_title" }),
      el("nav", {}, links),
      switcher
    );
    document.body.prepend(top);
    document.body.append(el("footer", { class: "foot", "data-i18n": "offline_note" }));
  }

  function errorText(data, status) {
    if (data && typeof data.detail === "string") return data.detail;
    if (data && Array.isArray(data.detail)) {
      return data.detail.map((e) => (e.loc || []).slice(1).join(".") + ": " + e.msg).join("; ");
    }
    return "HTTP " + status;
  }

  // A busy explorer (a class of students at once) answers 429 with Retry-After. The page says so
  // in its language in a status line and tries again by itself, a few times, before giving up
  // with a message that asks to try again: never a broken widget.
  const BUSY_TRIES = 6;
  let busyCount = 0;

  function busyNote(show) {
    let note = document.getElementById("busy-note");
    if (!note) {
      note = el("div", { id: "busy-note", class: "busy-note hidden", role: "status" });
      document.body.appendChild(note);
    }
    busyCount = Math.max(0, busyCount + (show ? 1 : -1));
    note.textContent = t("busy_wait");
    note.classList.toggle("hidden", busyCount === 0);
  }

  // On the static build there is no server: a widget that still asks the explorer's API (its
  // computation not yet moved into the page) gets this error, which it shows as a plain sentence
  // ("needs the explorer"), instead of the host's 404 or 405. The explorer's own answers are unchanged.
  class NeedsExplorer extends Error {
    constructor() {
      super(t("needs_explorer"));
      this.name = "NeedsExplorer";
    }
  }

  function needsServer(url) {
    return STATIC_SITE && /^\/api\//.test(String(url));
  }

  async function request(url, init) {
    if (needsServer(url)) throw new NeedsExplorer();
    for (let attempt = 1; ; attempt++) {
      const response = await fetch(url, init);
      if (response.status === 429 && attempt < BUSY_TRIES) {
        const after = Number(response.headers.get("Retry-After")) || 1;
        busyNote(true);
        // Spread the retries of a whole class over time (jitter), growing with each attempt.
        await new Promise((resolve) => setTimeout(resolve, 1000 * after * attempt * (0.5 + Math.random())));
        busyNote(false);
        continue;
      }
      const data = await response.json().catch(() => null);
      if (response.status === 429) {
        const err = new Error(t("busy_failed"));
        err.busy = true;
        throw err;
      }
      if (!response.ok) throw new Error(errorText(data, response.status));
      return data;
    }
  }

  async function postJSON(url, body) {
    return request(url, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  }

  async function getJSON(url) {
    return request(url);
  }

  function debounce(fn, ms) {
    let timer = null;
    return (...args) => {
      clearTimeout(timer);
      timer = setTimeout(() => fn(...args), ms);
    };
  }

  function fmt(x, digits = 4) {
    return Number(x).toFixed(digits);
  }

  // On the static build, a link a widget draws to the explorer's server (a figure of /api/..., the
  // /playground tool) has nothing behind it: following it says so in place of the link.
  function serverLink(ev) {
    const a = ev.target instanceof Element ? ev.target.closest("a[href]") : null;
    const href = a ? a.getAttribute("href") : "";
    if (!a || !(needsServer(href) || SERVER_PAGES.some((p) => href === p || href.startsWith(p + "?")))) return;
    ev.preventDefault();
    a.replaceWith(el("span", { class: "needs-explorer", role: "status", text: t("needs_explorer") }));
  }

  // The static build works offline after the first visit: its service worker (sw.js at the
  // folder's root, written by the build) keeps every file of the site in the browser's cache.
  function registerOffline() {
    if (!STATIC_SITE || !("serviceWorker" in navigator)) return;
    navigator.serviceWorker.register(siteURL("sw.js")).catch(() => {
      // file:// or an insecure http:// address (not localhost): the site still works online
    });
  }

  window.Attn = {
    lang, t, setLang, setParams, applyI18n, el, postJSON, getJSON, debounce, fmt,
    siteURL, pageURL, dataURL, isStatic: STATIC_SITE, needsServer, NeedsExplorer,
  };

  document.addEventListener("DOMContentLoaded", () => {
    // A language named in the address is remembered, like one picked with the switch.
    if (urlLang()) window.localStorage.setItem(STORE, urlLang());
    header();
    // Links of the shells to the explorer's own tools: hidden where there is no explorer.
    if (STATIC_SITE) {
      document.querySelectorAll("[data-server-only]").forEach((node) => { node.hidden = true; });
      document.addEventListener("click", serverLink, true);
    }
    refreshLang();
    registerOffline();
    // See html.fonts-ready in style.css: show the page once the Japanese font can draw it.
    const ready = () => document.documentElement.classList.add("fonts-ready");
    document.fonts.load("16px IPAexGothic", "日本語").then(ready, ready);
    setTimeout(ready, 3000);
  });
})();
