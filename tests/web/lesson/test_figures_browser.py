"""The lesson's one visual standard (issue 34, items 5 and 6), checked on every figure of every
section page (§1 to the final check), in Japanese and English, on a desktop (1280 px) and a phone (375 px):

- no visible text inside a figure or widget is smaller than 12 px;
- no text is cut: an SVG's text lies inside its SVG, a box's text inside its box (unless the box
  scrolls), and no two unrotated labels of one SVG overlap;
- every heatmap (an SVG of ``rect.cell``, or a table of numbers coloured by value) has a colour key;
- masked cells are hatched and carry no number;
- every widget shows its "look here" line in the page's language, and the thing it names is
  outlined on the widget (one test per widget).

Each page is loaded once per language and width (the audit runs in the page, with every fold
opened, once its widgets have answered); the tests read the cached results.
"""

from __future__ import annotations

import re

import pytest
import yaml
from lesson_browser import BROWSER_MARKS, section_drawn, uncover, widgets_answered

from attnlab.web import lesson as L
from attnlab.web.i18n import STRINGS_DIR

pytestmark = BROWSER_MARKS

SECTIONS = sorted(L.load_sections())  # every section, the final check included
WIDTHS = (1280, 375)
WIDGETS = [
    "translation", "parallel-steps", "bottleneck", "bleu-by-length", "qkv", "additive-vs-dot",
    "self-vs-cross", "pronoun", "multihead-steps", "no-transpose", "head-view", "word-order",
    "pe-table", "rope-scores", "transformer-diagram", "token-walk", "next-token", "variants", "attention-map", "pooling",
    "families", "apps-mlm", "apps-qa", "apps-gpt", "apps-summary", "apps-vit", "apps-gat",
]  # fmt: skip

# Runs in the page; returns {"problems": [...], "looks": {widget: {text, targets}}}.
AUDIT = r"""
() => {
  const problems = [];
  const looks = {};
  const MIN = 11.5; // 12 px, less rounding
  const shown = (n) => {
    const r = n.getBoundingClientRect();
    if (r.width < 0.5 && r.height < 0.5) return false; // a flat line is still seen
    for (let a = n; a && a.nodeType === 1; a = a.parentElement) {
      const cs = getComputedStyle(a);
      if (cs.display === "none" || cs.visibility === "hidden" || Number(cs.opacity) === 0) return false;
    }
    return true;
  };
  const who = (n) => {
    const w = n.closest(".widget");
    const s = (n.textContent || "").trim().replace(/\s+/g, " ").slice(0, 40);
    return (w ? w.dataset.widget : "figure") + " <" + n.tagName.toLowerCase() + (n.id ? "#" + n.id : "") + "> \"" + s + "\"";
  };
  const section = document.getElementById("section");
  const scopes = Array.from(section.querySelectorAll(".widget"));
  const loose = Array.from(section.querySelectorAll("svg")).filter((s) => !s.closest(".widget") && !s.closest("button"));
  // A box that scrolls sideways keeps its content reachable: text inside it is not cut.
  const scrolls = (a) => {
    const cs = getComputedStyle(a);
    return /(auto|scroll)/.test(cs.overflowX) || /(auto|scroll)/.test(cs.overflowY);
  };
  const clips = (a) => {
    const cs = getComputedStyle(a);
    return /(hidden|clip)/.test(cs.overflowX) || /(hidden|clip)/.test(cs.overflowY);
  };

  // 1. Text size, and HTML text cut by its box.
  const textOwners = new Set();
  for (const scope of scopes.concat(loose)) {
    const walker = document.createTreeWalker(scope, NodeFilter.SHOW_TEXT);
    for (let t = walker.nextNode(); t; t = walker.nextNode()) {
      if (!t.nodeValue.trim()) continue;
      const owner = t.parentElement;
      if (!owner || owner.closest("option, script, style, title, desc")) continue;
      textOwners.add(owner);
    }
  }
  for (const el of textOwners) {
    if (!shown(el)) continue;
    let size = parseFloat(getComputedStyle(el).fontSize);
    const svg = el.ownerSVGElement || (el.tagName.toLowerCase() === "svg" ? el : null);
    if (svg && el.getScreenCTM) {
      const m = el.getScreenCTM();
      if (m) size *= Math.sqrt(Math.abs(m.a * m.d - m.b * m.c));
    }
    if (size < MIN) problems.push("text under 12 px (" + size.toFixed(1) + " px): " + who(el));
    if (!svg && !el.matches("input, textarea, select")) {
      const cs = getComputedStyle(el);
      if (el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0 && (cs.overflowX === "hidden" || cs.overflowX === "clip" || cs.textOverflow === "ellipsis"))
        problems.push("text cut by its box: " + who(el));
      // Text that runs out of its widget, over its neighbours (no box that scrolls in between).
      const w = el.closest(".widget");
      if (w) {
        let scroller = false;
        for (let a = el.parentElement; a && a !== w; a = a.parentElement) if (scrolls(a)) { scroller = true; break; }
        const r = el.getBoundingClientRect(), wr = w.getBoundingClientRect();
        if (!scroller && (r.right > wr.right + 1 || r.left < wr.left - 1))
          problems.push("text outside its widget (" + Math.round(r.right - wr.right) + " px): " + who(el));
      }
    }
  }

  // 2. SVG text inside its SVG; unrotated labels apart; the SVG itself not cut by a box that hides.
  const svgs = new Set();
  for (const scope of scopes) scope.querySelectorAll("svg").forEach((s) => { if (!s.ownerSVGElement) svgs.add(s); });
  loose.forEach((s) => { if (!s.ownerSVGElement) svgs.add(s); });
  for (const svg of svgs) {
    if (!shown(svg)) continue;
    const box = svg.getBoundingClientRect();
    const texts = Array.from(svg.querySelectorAll("text")).filter((t) => t.textContent.trim() && shown(t));
    const flat = [];
    for (const t of texts) {
      const r = t.getBoundingClientRect();
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1)
        problems.push("SVG text cut at the picture's edge: " + who(t));
      if (!t.closest("[transform]") || t.closest("[transform]") === svg) flat.push([t, r]);
    }
    for (let i = 0; i < flat.length; i++) {
      for (let j = i + 1; j < flat.length; j++) {
        const [a, ra] = flat[i], [b, rb] = flat[j];
        const w = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
        const h = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
        // Glyph boxes include the line's leading: a real overlap covers a good part of the smaller.
        if (w > 2 && h > 0.45 * Math.min(ra.height, rb.height)) problems.push("labels overlap: " + who(a) + " / " + who(b));
      }
    }
    for (let a = svg.parentElement; a && a !== document.body; a = a.parentElement) {
      if (scrolls(a)) break;
      if (clips(a)) {
        const r = a.getBoundingClientRect();
        if (box.right > r.right + 1 || box.bottom > r.bottom + 1 || box.left < r.left - 1) problems.push("picture cut by its box: " + who(svg));
        break;
      }
    }

    // 3. Heatmaps have a colour key; 4. masked cells are hatched and have no number.
    const cells = svg.querySelectorAll("rect.cell");
    if (cells.length) {
      const fig = svg.closest("figure, .pe-figure, .mask-card") || svg.parentElement;
      const keyed = svg.querySelector(".key-swatch") || (fig && fig.querySelector(".colour-key"));
      if (!keyed) problems.push("heatmap without a colour key: " + who(svg));
      for (const c of svg.querySelectorAll("rect.cell.masked")) {
        if (!/^url\(/.test(c.getAttribute("fill") || "")) problems.push("masked cell not hatched: " + who(svg));
        const r = c.getBoundingClientRect();
        for (const t of texts) {
          const q = t.getBoundingClientRect();
          const cx = (q.left + q.right) / 2, cy = (q.top + q.bottom) / 2;
          if (cx > r.left && cx < r.right && cy > r.top && cy < r.bottom) problems.push("masked cell with a number: " + who(t));
        }
      }
    }
  }
  for (const scope of scopes) {
    for (const table of scope.querySelectorAll("table")) {
      if (!shown(table)) continue;
      const coloured = Array.from(table.querySelectorAll("td")).some((td) => td.style.backgroundColor);
      if (!coloured) continue;
      const fig = table.closest("figure") || table.parentElement;
      if (!fig.querySelector(".colour-key") && !(fig.parentElement && fig.parentElement.querySelector(":scope > .colour-key")))
        problems.push("coloured table without a colour key: " + who(table));
    }
  }

  // 5. The look lines.
  for (const w of scopes) {
    const line = w.querySelector(":scope > .look");
    looks[w.dataset.widget] = {
      text: line ? line.textContent.trim() : null,
      shown: !!line && shown(line),
      targets: Array.from(w.querySelectorAll(".look-target")).filter(shown).length,
    };
  }
  return { problems: Array.from(new Set(problems)), looks };
}
"""


def _open_everything(pg) -> None:
    """Every fold opened (発展 regions, technical notes), and a prediction answered where one hides
    its widget, so that every figure is on screen."""
    pg.evaluate("() => { document.querySelectorAll('#section details').forEach((d) => { d.open = true; }); }")
    uncover(pg)  # each prediction committed (its first choice), so the widget behind it is drawn


_CACHE: dict[tuple[str, int], dict[int, dict]] = {}


@pytest.fixture(scope="module")
def audit(browser, base_url):
    """audit(lang, width) -> {section: {"problems": [...], "looks": {...}}}, each page loaded once."""

    def run(lang: str, width: int) -> dict[int, dict]:
        key = (lang, width)
        if key not in _CACHE:
            ctx = browser.new_context(
                viewport={"width": width, "height": 900}, base_url=base_url, locale="ja-JP" if lang == "ja" else "en-US"
            )
            pg = ctx.new_page()
            pg.set_default_timeout(90_000)
            errors: list[str] = []
            pg.on("pageerror", lambda e: errors.append(str(e)))
            out = {}
            for n in SECTIONS:
                pg.goto(f"/lesson/{n}?lang={lang}")
                section_drawn(pg)
                widgets_answered(pg)
                _open_everything(pg)
                pg.evaluate(
                    "() => document.fonts.ready.then(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))))"
                )
                out[n] = pg.evaluate(AUDIT)
            ctx.close()
            assert not errors, errors
            _CACHE[key] = out
        return _CACHE[key]

    return run


@pytest.mark.parametrize("width", WIDTHS)
def test_every_figure_meets_the_visual_standard(audit, lang, width):
    pages = audit(lang, width)
    problems = [f"§{n} {p}" for n, page in pages.items() for p in page["problems"]]
    assert not problems, "\n".join(problems[:60])


def _catalog(lang: str) -> dict[str, str]:
    return yaml.safe_load((STRINGS_DIR / f"{lang}.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("widget", WIDGETS)
def test_every_widget_says_what_to_look_at_and_outlines_it(audit, widget):
    for lang in ("ja", "en"):
        looks = {name: look for page in audit(lang, 1280).values() for name, look in page["looks"].items()}
        assert widget in looks, f"{widget} is on no section page ({lang})"
        look = looks[widget]
        want = _catalog(lang)[f"fig_look_{widget}"]
        assert look["text"] == want.strip(), (lang, look["text"])
        assert look["shown"], f"{widget}: the look line is not visible ({lang})"
        if lang == "ja":
            assert re.search(r"[\u3040-\u30ff]", look["text"]), look["text"]  # kana: written in Japanese
        else:
            assert not re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", look["text"]), look["text"]
        assert look["targets"] >= 1, f"{widget}: nothing outlined for its look line ({lang})"
