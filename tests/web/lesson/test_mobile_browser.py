"""The explorer on a phone and a tablet, in real headless Chromium with mobile emulation.

Every page a student opens (the lesson's index, every section, the glossary, /playground, /model,
/masks), in Japanese and English, on a phone 375 × 812 CSS px (``is_mobile``, ``has_touch``,
device scale factor 2):

- no page-wide horizontal scroll: the layout viewport stays 375 px wide (a mobile browser widens
  it, and zooms the page out, when something sticks out) and the document is no wider;
- touch targets (the size chosen in lesson/responsive.css, after WCAG 2.5.5): every button, select,
  text field, slider and every link that stands on its own (navigation, a widget's links) is at
  least 44 × 44 CSS px; a checkbox or radio button is at least 24 × 24 px and, with its label
  (which toggles it too), a target at least 44 px tall and wide. Links inside a sentence of the
  lesson's text keep the size of the text (WCAG 2.5.8's inline exception);
- every heatmap, chart (SVG) and table lies within the screen, or inside a box that scrolls
  sideways (``overflow-x: auto``) and itself lies within the screen;
- text is readable: no HTML text under 11 px, no chart label drawn under 8 px;
- axe-core finds no serious or critical violation (its target-size rule included).

And a tablet (768 × 1024, touch) smoke check of every page in English: no page-wide horizontal
scroll, the same touch targets. Screenshots go to ``test-artifacts/mobile/`` (git-ignored): the
first screen of every page, and the whole of the index, §3, §7 and §8. Run with
``pytest -m browser tests/web/lesson/test_mobile_browser.py``; without /usr/bin/chromium the tests skip.
"""

from __future__ import annotations

import re

import pytest
from lesson_browser import (
    ARTIFACTS_ROOT,
    AUTO_UNCOVER,
    BROWSER_MARKS,
    STATIC_SITE,
    assert_accessible,
    section_drawn,
    widgets_answered,
)

ARTIFACTS = ARTIFACTS_ROOT / "mobile"

pytestmark = BROWSER_MARKS

from live_server import page_errors  # noqa: E402
from test_lesson_browser import missing  # noqa: E402

from attnlab.assets import locate  # noqa: E402
from attnlab.web import i18n  # noqa: E402
from attnlab.web import lesson as L  # noqa: E402
from attnlab.web.app import create_app  # noqa: E402
from attnlab.web.classroom import Classroom  # noqa: E402

TIMEOUT_MS = 30_000
WIDGET_TIMEOUT_MS = 240_000  # §2's BLEU table runs two RNNs over a test set the first time
PHONE = {"width": 375, "height": 812}
TABLET = {"width": 768, "height": 1024}
TARGET = 44  # CSS px: buttons, selects, fields, sliders, links that stand alone
BOX = 24  # CSS px: a checkbox or radio button itself (its label makes up the rest)
SECTIONS = sorted(L.load_sections())
EXPLORER_TOOLS = ("/playground", "/model", "/masks")  # the explorer's own pages: not in the static build
PAGES = [
    "/",
    *[f"/lesson/{n}" for n in SECTIONS],
    "/lesson/glossary",
    *(pytest.param(p, marks=pytest.mark.explorer_only(f"{p} is the explorer's own tool")) for p in EXPLORER_TOOLS),
]
FULL_PAGE = {"/", "/lesson/3", "/lesson/7", "/lesson/8"}


@pytest.fixture(scope="module")
def explorer_models() -> list:
    """The shipped ja-en translator for the explorer's model page, when it is installed."""
    try:
        from attnlab.web.models import load_explorer_model

        return [load_explorer_model(locate.shipped_model_dir("ja-en"))]
    except FileNotFoundError:
        return []


@pytest.fixture(scope="module")
def lesson_app(explorer_models):
    """The explorer serving a class (the index shows the address and QR code students use); the
    shared ``lesson_site`` serves it, or with ATTNLAB_TEST_SITE=static the static build."""
    room = Classroom(port=8000, addresses=("192.0.2.7", "198.51.100.3"))
    return lambda: create_app(explorer_models, classroom=room)


@pytest.fixture(scope="module")
def base_url(lesson_site, explorer_models):
    """The lesson's address, and whether the explorer's model page has a model to run."""
    return lesson_site.url, bool(explorer_models) and not lesson_site.static


def open_page(browser, base_url, path: str, lang: str, viewport: dict):
    """A new touch-screen browser page showing ``path`` in ``lang``, every widget drawn."""
    url, has_model = base_url
    if path.startswith("/lesson/") and path[len("/lesson/") :].isdigit():
        absent = missing(int(path.rsplit("/", 1)[1]))
        if absent:
            pytest.skip(f"{path} runs models not installed here: {', '.join(absent)}")
    context = browser.new_context(
        viewport=viewport,
        is_mobile=True,
        has_touch=True,
        device_scale_factor=2,
        base_url=url,
        locale="ja-JP" if lang == "ja" else "en-US",
    )
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    errors = page_errors(pg)
    pg.goto(f"{path}?lang={lang}")
    pg.wait_for_function("() => document.documentElement.classList.contains('fonts-ready')")
    pg.wait_for_function("() => !document.querySelector('[aria-busy]')")
    if path == "/" and not STATIC_SITE:  # the classroom's QR code is the explorer's (--classroom)
        pg.wait_for_selector("#classroom-qr")
    if STATIC_SITE and path.startswith("/lesson/") and path != "/lesson/glossary":
        widgets_answered(pg)  # fails at once, naming a widget that still needs the explorer's API
    if path.startswith("/lesson/") and path != "/lesson/glossary":
        pg.wait_for_function(
            "() => Array.from(document.querySelectorAll('.widget-out')).every((n) => n.dataset.seq !== '0')",
            timeout=WIDGET_TIMEOUT_MS,
        )
        assert pg.locator(".widget .error:not(.hidden)").count() == 0
    elif path == "/playground":
        pg.wait_for_function("() => document.querySelector('#results').dataset.seq !== '0'")
    elif path == "/masks":
        pg.wait_for_function("() => document.querySelector('#mask-result').dataset.seq !== '0'")
    elif path == "/model" and has_model:
        pg.wait_for_function("() => document.querySelector('#model-select').options.length > 0")
        pg.fill("#text", "猫が犬を追いかけている。")
        pg.tap("#run")
        pg.wait_for_selector("#main-map")
    pg.evaluate("() => document.fonts.ready.then(() => true)")
    pg.wait_for_timeout(300)  # charts.js marks its scroll boxes on the next animation frame
    return context, pg, errors


def shoot(pg, name: str, full_page: bool = False) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full_page)


# What the page measures in itself (a function, not an expression: the page's CSP forbids eval).
WIDTHS = "() => [window.innerWidth, document.documentElement.clientWidth, document.documentElement.scrollWidth]"

SMALL_TARGETS = """([target, box]) => {
  const shown = (n) => { const r = n.getBoundingClientRect(); return r.width > 0 && r.height > 0
    && getComputedStyle(n).visibility !== 'hidden' && r.right > 0 && r.bottom > -10000; };
  const name = (n) => n.tagName.toLowerCase() + (n.id ? '#' + n.id : '') + (n.type ? '[' + n.type + ']' : '')
    + (n.getAttribute('class') ? '.' + n.getAttribute('class').trim().split(/\\s+/).join('.') : '')
    + ' "' + (n.textContent || '').trim().slice(0, 24) + '"';
  const size = (r) => Math.round(r.width) + 'x' + Math.round(r.height);
  // A link inside a sentence (outside the widgets): its block holds more text than the link.
  const inline = (a) => {
    if (a.closest('.widget, .top')) return false;
    let block = a.parentElement;
    while (block && getComputedStyle(block).display.startsWith('inline')) block = block.parentElement;
    return block && block.textContent.trim() !== a.textContent.trim();
  };
  const bad = [];
  for (const n of document.querySelectorAll('a[href], button, input:not([type=hidden]), select, textarea, summary, [role=button]')) {
    if (!shown(n) || n.closest('svg')) continue;
    const r = n.getBoundingClientRect();
    if (n.tagName === 'A' && inline(n)) continue;
    if (n.type === 'checkbox' || n.type === 'radio') {
      let left = r.left, right = r.right, top = r.top, bottom = r.bottom;
      for (const label of n.labels || []) {
        const l = label.getBoundingClientRect();
        left = Math.min(left, l.left); right = Math.max(right, l.right);
        top = Math.min(top, l.top); bottom = Math.max(bottom, l.bottom);
      }
      if (r.width < box || r.height < box || right - left < target || bottom - top < target)
        bad.push(name(n) + ' ' + size(r) + ' with its label ' + Math.round(right - left) + 'x' + Math.round(bottom - top));
    } else if (r.width < target || r.height < target) {
      bad.push(name(n) + ' ' + size(r));
    }
  }
  return bad;
}"""

# Every heatmap, chart and table within the screen, or inside a sideways-scrolling box that is.
OUTSIDE = """() => {
  const vw = document.documentElement.clientWidth;
  const within = (r) => r.left >= -0.5 && r.right <= vw + 0.5;
  const scroller = (n) => {
    for (let p = n.parentElement; p && p !== document.body; p = p.parentElement) {
      const x = getComputedStyle(p).overflowX;
      if (x === 'auto' || x === 'scroll') return p;
    }
    return null;
  };
  const bad = [];
  const things = [...document.querySelectorAll('svg, table, canvas, pre, img')].filter((n) => !n.parentElement.closest('svg'));
  for (const n of things) {
    const r = n.getBoundingClientRect();
    if (!r.width || !r.height) continue;
    const box = scroller(n);
    const x = getComputedStyle(n).overflowX;
    const self = (x === 'auto' || x === 'scroll') ? n : null; // a table shown as a scroll box
    if (within(r) || (self && within(r)) || (box && within(box.getBoundingClientRect()))) continue;
    bad.push(n.tagName.toLowerCase() + (n.id ? '#' + n.id : '') + ' in ' + (n.parentElement.id || n.parentElement.className)
      + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
  }
  return bad;
}"""

# Text too small to read on a phone: HTML text under 11 px; chart labels drawn under 8 px (an SVG
# text's font size times the picture's scale on the screen).
TINY_TEXT = """() => {
  const bad = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const seen = new Set();
  for (let t = walker.nextNode(); t; t = walker.nextNode()) {
    const n = t.parentElement;
    if (!n || seen.has(n) || !t.textContent.trim()) continue;
    seen.add(n);
    const r = n.getBoundingClientRect();
    if (!r.width || !r.height || n.closest('.skip')) continue;
    const svg = n.closest('svg');
    if (svg) {
      const size = parseFloat(getComputedStyle(n).fontSize) * (svg.getScreenCTM() ? svg.getScreenCTM().a : 1);
      if (size < 8) bad.push('svg text "' + t.textContent.trim().slice(0, 16) + '" ' + size.toFixed(1) + 'px');
    } else {
      const size = parseFloat(getComputedStyle(n).fontSize);
      if (size < 11) bad.push(n.tagName.toLowerCase() + '.' + n.className + ' "' + t.textContent.trim().slice(0, 16) + '" ' + size + 'px');
    }
  }
  return bad.slice(0, 20);
}"""


def assert_no_page_scroll(pg, width: int) -> None:
    inner, client, scroll = pg.evaluate(WIDTHS)
    assert (inner, client) == (width, width), f"the page widened the viewport to {inner} px"
    assert scroll <= client, f"the page is {scroll} px wide on a {client} px screen"


def assert_targets(pg) -> None:
    small = pg.evaluate(SMALL_TARGETS, [TARGET, BOX])
    assert not small, f"touch targets under {TARGET} px: {small}"


def slug(path: str) -> str:
    return re.sub(r"[^\w]+", "-", path).strip("-") or "index"


@pytest.mark.parametrize("lang", ["ja", "en"])
@pytest.mark.parametrize("path", PAGES)
def test_phone(browser, base_url, path, lang):
    context, pg, errors = open_page(browser, base_url, path, lang, PHONE)
    try:
        shoot(pg, f"phone-{lang}-{slug(path)}", full_page=path in FULL_PAGE)
        assert_no_page_scroll(pg, PHONE["width"])
        assert_targets(pg)
        outside = pg.evaluate(OUTSIDE)
        assert not outside, f"pictures or tables outside the screen, in no scroll box: {outside}"
        tiny = pg.evaluate(TINY_TEXT)
        assert not tiny, f"text too small to read: {tiny}"
        # The header: the language switch and its links in view and usable (the static build has the
        # lesson's two: the explorer's own tools are not in it).
        links = (
            ("#nav-lesson", "#nav-glossary")
            if STATIC_SITE
            else ("#nav-lesson", "#nav-playground", "#nav-model", "#nav-masks")
        )
        for selector in ("#lang-ja", "#lang-en", *links):
            box = pg.locator(selector).bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], selector
        assert_accessible(pg)
    finally:
        context.close()
    assert not errors, errors


def test_phone_language_switch_and_nav_by_touch(browser, base_url):
    """The header works with a finger: tapping the language switch relabels the page, tapping a
    link of the header opens that page."""
    context, pg, errors = open_page(browser, base_url, "/", "ja", PHONE)
    try:
        pg.tap("#lang-en")
        pg.wait_for_function("() => document.documentElement.lang === 'en'")
        if STATIC_SITE:  # the static build's header: the lesson and its glossary
            assert pg.text_content("#nav-glossary") == "Glossary"
            pg.tap("#nav-glossary")
            pg.wait_for_url("**/lesson/glossary.html*")
            pg.wait_for_selector("#glossary:not([aria-busy])")
        else:
            assert pg.text_content("#nav-playground") == "Playground"
            pg.tap("#nav-masks")
            pg.wait_for_url("**/masks")
            pg.wait_for_function("() => document.querySelector('#mask-result').dataset.seq !== '0'")
        assert_no_page_scroll(pg, PHONE["width"])
    finally:
        context.close()
    assert not errors, errors


@pytest.mark.parametrize("path", PAGES)
def test_tablet(browser, base_url, path):
    context, pg, errors = open_page(browser, base_url, path, "en", TABLET)
    try:
        shoot(pg, f"tablet-en-{slug(path)}")
        assert_no_page_scroll(pg, TABLET["width"])
        assert_targets(pg)
    finally:
        context.close()
    assert not errors, errors


def phone_context(browser, url: str, lang: str, **context):
    return browser.new_context(
        viewport=PHONE,
        is_mobile=True,
        has_touch=True,
        device_scale_factor=2,
        base_url=url,
        locale="ja-JP" if lang == "ja" else "en-US",
        **context,
    )


def answer_first_question(pg) -> None:
    """Answer the section's first check question by touch and see its feedback: the page works."""
    pg.locator("#question-0 input[type=radio]").first.tap()
    pg.locator("#q0-submit").tap()
    pg.wait_for_function("() => ['correct', 'retry'].includes(document.querySelector('#q0-feedback').dataset.result)")


def test_phone_a_section_stays_usable_while_its_model_loads(browser, base_url, lang):
    """Issue 36, item 6: on a phone, while §1's translator (ja-en, ~12 MB) downloads, the page is
    there to read and use (its text, its check, no sideways scroll) and the widgets say they are
    loading; once the download runs, the status line shows its progress ("Loading the model… 42%"),
    then the widgets answer."""
    url, _ = base_url
    if missing(1):
        pytest.skip(f"§1 runs models not installed here: {', '.join(missing(1))}")
    # Requests of a service worker escape page.route: without one, every model byte passes here.
    context = phone_context(browser, url, lang, service_workers="block")
    context.add_init_script(AUTO_UNCOVER)
    held = []
    hold = lambda route: held.append(route)  # noqa: E731  (a bound method cannot be a handler)
    context.route("**/static/models/ja-en/*.onnx", hold)  # the download waits until released
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    errors = page_errors(pg)
    try:
        # Every text a widget's status line shows, from the first one on.
        pg.add_init_script(
            "window.statusTexts = []; new MutationObserver(() => document.querySelectorAll('.widget [id$=-status]')"
            ".forEach((n) => { const t = n.textContent; if (t && window.statusTexts.at(-1) !== t) window.statusTexts.push(t); }))"
            ".observe(document, { childList: true, subtree: true, characterData: true });"
        )
        pg.goto(f"/lesson/1?lang={lang}")
        section_drawn(pg)
        pg.wait_for_function("() => window.statusTexts.length > 0")
        for _ in range(TIMEOUT_MS // 100):  # the graphs are asked for after meta.json and the tokenizer
            if held:
                break
            pg.wait_for_timeout(100)
        assert held, "§1 asked for no ONNX file of ja-en"
        # Each widget either says what it is waiting for or has answered already (the parallel-steps
        # widget counts tokens with the tokenizer alone, before the model arrives).
        widgets = pg.eval_on_selector_all(
            ".widget:has([id$=-status])",
            "ws => ws.map((w) => [w.querySelector('[id$=-status]').textContent,"
            " (w.querySelector('.widget-out') || {dataset: {}}).dataset.seq])",
        )
        assert widgets and all(text or seq not in (None, "0") for text, seq in widgets), widgets
        assert any(text and seq == "0" for text, seq in widgets), widgets  # the translator's widget waits, saying so
        assert pg.locator(".widget .error:not(.hidden)").count() == 0
        assert pg.locator("#section h1").first.is_visible() and pg.inner_text("#section").strip()
        answer_first_question(pg)
        assert_no_page_scroll(pg, PHONE["width"])
        shoot(pg, f"phone-{lang}-loading")
        assert pg.evaluate(
            "() => Array.from(document.querySelectorAll('.widget-out')).some((n) => n.dataset.seq === '0')"
        )
        for route in held:
            route.continue_()
        context.unroute("**/static/models/ja-en/*.onnx", hold)
        pg.wait_for_function(
            "() => Array.from(document.querySelectorAll('.widget-out')).every((n) => n.dataset.seq !== '0')",
            timeout=WIDGET_TIMEOUT_MS,
        )
        assert pg.locator(".widget .error:not(.hidden)").count() == 0
        shown = pg.evaluate("() => window.statusTexts")
        # "Loading the model… 42% (11.9 MB)" / 「モデルを読み込み中… 42%（11.9 MB）」, any numbers
        progress = re.compile(
            re.escape(i18n.t(lang, "ls_model_progress", pct="PCT", mb="MB_"))
            .replace("PCT", r"\d{1,3}")
            .replace("MB_", r"\d+\.\d")
        )
        assert any(progress.fullmatch(t) for t in shown), (progress.pattern, shown)
        assert_no_page_scroll(pg, PHONE["width"])
    finally:
        context.close()
    assert not errors, errors


def test_phone_a_device_that_cannot_run_the_models_is_told_plainly(browser, base_url, lang):
    """Issue 36, item 6: a phone whose browser has no WebAssembly (or none with SIMD) cannot run the
    in-page models: each model widget says so in one plain sentence of the page's language, nothing
    sticks out sideways, and the rest of the page (text, pictures, the check) works."""
    url, _ = base_url
    context = phone_context(browser, url, lang)
    context.add_init_script(AUTO_UNCOVER)
    context.add_init_script("Object.defineProperty(window, 'WebAssembly', { value: undefined })")
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    errors = page_errors(pg)
    try:
        pg.goto(f"/lesson/1?lang={lang}")
        section_drawn(pg)
        sentence = i18n.t(lang, "ls_model_device")
        pg.wait_for_function(
            "(s) => Array.from(document.querySelectorAll('.widget .error:not(.hidden)')).some((e) => e.textContent === s)",
            arg=sentence,
        )
        told = pg.eval_on_selector_all(".widget .error:not(.hidden)", "ns => ns.map((n) => n.textContent)")
        assert told and all(t == sentence for t in told), told
        for box in pg.locator(".widget .error:not(.hidden)").all():
            b = box.bounding_box()
            assert b and b["x"] >= 0 and b["x"] + b["width"] <= PHONE["width"]
        answer_first_question(pg)
        assert_no_page_scroll(pg, PHONE["width"])
        shoot(pg, f"phone-{lang}-no-wasm", full_page=True)
    finally:
        context.close()
    assert not errors, errors
