// Shared by every page: the language switch, the header, JSON requests and small helpers.
(function () {
  "use strict";
  const STORE = "attnlab.lang";
  const STRINGS = window.ATTN_STRINGS;

  const LANGS = ["ja", "en"];

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
    ].map(([href, id, key]) =>
      el("a", { href, "data-i18n": key, "aria-current": id === page ? "page" : null, id: "nav-" + id })
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
      el("a", { class: "brand", href: "/", "data-i18n": "app_title" }),
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

  async function request(url, init) {
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

  window.Attn = { lang, t, setLang, setParams, applyI18n, el, postJSON, getJSON, debounce, fmt };

  document.addEventListener("DOMContentLoaded", () => {
    // A language named in the address is remembered, like one picked with the switch.
    if (urlLang()) window.localStorage.setItem(STORE, urlLang());
    header();
    refreshLang();
    // See html.fonts-ready in style.css: show the page once the Japanese font can draw it.
    const ready = () => document.documentElement.classList.add("fonts-ready");
    document.fonts.load("16px IPAexGothic", "日本語").then(ready, ready);
    setTimeout(ready, 3000);
  });
})();
