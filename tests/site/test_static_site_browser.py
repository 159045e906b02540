"""The static site in a real browser: built by ``attnlab lesson build-site`` (once per session, see
:func:`lesson_browser.static_site_folder`), served from a sub-path by Python's ``http.server``
(:func:`attnlab.web.site.serve_folder`), then the network cut: every page in both languages still
opens from the service worker's cache, with its content and widgets, no console error and no
request outside the folder; a model downloaded once still runs offline.

Run with ``pytest -m browser tests/site/test_static_site_browser.py``; without /usr/bin/chromium it skips.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
from lesson_browser import ARTIFACTS_ROOT, AUTO_UNCOVER, BROWSER_MARKS, static_site_folder
from live_server import page_errors

from attnlab.web import i18n
from attnlab.web.site import serve_folder

pytestmark = BROWSER_MARKS

SUB = "attnlab/"  # the folder is served under a sub-path, like https://user.github.io/attnlab/
TIMEOUT_MS = 60_000
ARTIFACTS = ARTIFACTS_ROOT / "static-site"


@pytest.fixture(scope="module")
def folder():
    return static_site_folder()


@pytest.fixture(scope="module")
def hosted(folder, tmp_path_factory):
    """A web space whose folder attnlab/ is the site (a link to it)."""
    root = tmp_path_factory.mktemp("host")
    os.symlink(folder, root / SUB.rstrip("/"))
    return root


def _pages(folder) -> list[str]:
    sections = [s["id"] for s in json.loads((folder / "static/data/lesson/sections.json").read_text(encoding="utf-8"))]
    return [
        "index.html",
        *(f"lesson/{n}.html" for n in sections),
        "lesson/glossary.html",
        "lesson/plan.html",
        "lesson/3.html?teacher=1",  # the answer key
        "lesson/1.html?view=present&slide=2",  # the projector view
    ]


def _widget_blocks(folder, n: int) -> list[str]:
    section = json.loads((folder / f"static/data/lesson/sections/{n}.json").read_text(encoding="utf-8"))
    return [b["widget"] for b in section["blocks"] if b["type"] == "widget"]


def _check_page(pg, folder, page: str, lang: str) -> dict:
    """The page is drawn: its language, title and heading, its content (sections, terms, plan rows),
    its widgets mounted; any widget error is only "needs the explorer". Returns what it saw."""
    pg.wait_for_function("() => document.querySelector('main') && !document.querySelector('[aria-busy]')")
    assert pg.evaluate("document.documentElement.lang") == lang
    title = pg.title()
    assert title.endswith(i18n.t(lang, "app_title")) and len(title) > len(i18n.t(lang, "app_title")) + 3, title
    assert pg.locator("h1").first.inner_text().strip(), page
    # Every widget computes its first answer in the page (its model downloaded, or offline taken from
    # the service worker's cache), or says it needs the explorer: wait for each to do one or the other.
    pg.wait_for_function(
        "() => Array.from(document.querySelectorAll('.widget-out')).every((n) => n.dataset.seq !== '0'"
        " || n.closest('.widget').querySelector('.error:not(.hidden)'))"
    )
    # A widget still asking the explorer's API says so in the page's language (Lesson.fail marks it
    # .needs-explorer; a widget with its own error box shows the same sentence after "Error:").
    shown = pg.locator("main .error:not(.hidden)").all_inner_texts()
    needs = i18n.t(lang, "needs_explorer")
    assert all(needs in text for text in shown), (page, shown)
    file = page.split("?")[0]
    seen = {"needs": len(shown)}
    if file == "index.html":
        assert pg.locator("#toc .toc-link").count() >= 9
    elif file == "lesson/glossary.html":
        assert pg.locator(".term-entry").count() > 20
    elif file == "lesson/plan.html":
        assert pg.locator(".plan-row").count() >= 9
    else:
        n = int(file.removeprefix("lesson/").removesuffix(".html"))
        want = _widget_blocks(folder, n)
        if "view=present" not in page:
            assert pg.locator("#section h1").inner_text().strip()
            mounted = pg.eval_on_selector_all(
                ".widget[data-widget]", "ns => ns.filter((n) => n.childElementCount > 0).map((n) => n.dataset.widget)"
            )
            assert sorted(mounted) == sorted(want), (page, mounted, want)
        if "teacher=1" in page:
            assert pg.locator("#teacher-notes[open]").count() == 1
    return seen


@pytest.mark.parametrize("lang", ["ja", "en"])
def test_every_page_opens_offline_after_the_first_visit_in_both_languages(browser, folder, hosted, lang):
    pages = _pages(folder)
    with serve_folder(hosted) as host:
        base = host + SUB
        ctx = browser.new_context(viewport={"width": 1280, "height": 900}, locale="ja-JP" if lang == "ja" else "en-US")
        ctx.add_init_script(AUTO_UNCOVER)
        pg = ctx.new_page()
        pg.set_default_timeout(TIMEOUT_MS)
        errors = page_errors(pg)
        outside: list[str] = []
        pg.on("request", lambda r: None if r.url.startswith(base) else outside.append(r.url))
        # No ?lang=: a static host has no Accept-Language to read; the page takes the browser's.
        pg.goto(base + "index.html")
        _check_page(pg, folder, "index.html", lang)
        # The service worker has installed (every page and file precached) and controls the page.
        pg.evaluate("() => navigator.serviceWorker.ready.then(() => true)")
        pg.reload()
        pg.wait_for_function("() => navigator.serviceWorker.controller !== null")
        for page in pages:  # the first visit, online
            pg.goto(base + page)
            _check_page(pg, folder, page, lang)
    # The server is gone and the browser offline: nothing can come from the network now.
    ctx.set_offline(True)
    needs = 0
    for page in pages:
        pg.goto(base + page)
        needs += _check_page(pg, folder, page, lang)["needs"]
    pg.reload()
    _check_page(pg, folder, pages[-1], lang)
    # Through the page's own links: the index → §1 → next → glossary.
    pg.goto(base + "index.html")
    pg.wait_for_function("() => !document.querySelector('[aria-busy]')")
    pg.click("#toc-link-1")
    pg.wait_for_url("**/lesson/1.html?*")
    _check_page(pg, folder, "lesson/1.html", lang)
    pg.click("#next-section")
    pg.wait_for_url("**/lesson/2.html?*")
    _check_page(pg, folder, "lesson/2.html", lang)
    pg.click("#nav-glossary")
    pg.wait_for_url("**/lesson/glossary.html*")
    _check_page(pg, folder, "lesson/glossary.html", lang)
    ctx.close()
    assert not outside, outside[:5]
    assert not errors, errors[:5]
    print(f"widgets that still need the explorer, summed over the pages ({lang}): {needs}")


def test_the_language_follows_the_address_then_the_browser(browser, folder):
    with serve_folder(folder) as base:
        for locale, address, want in [("ja-JP", "", "ja"), ("en-US", "", "en"), ("en-US", "?lang=ja", "ja")]:
            ctx = browser.new_context(locale=locale)
            pg = ctx.new_page()
            errors = page_errors(pg)
            pg.goto(base + "lesson/4.html" + address)
            pg.wait_for_function("() => !document.querySelector('[aria-busy]')")
            assert pg.evaluate("document.documentElement.lang") == want
            assert pg.title().endswith(i18n.t(want, "app_title"))
            assert f"lang={want}" in pg.url  # the address names the language shown
            ctx.close()
            assert not errors, errors


def test_an_api_widget_says_it_needs_the_explorer_and_server_links_are_gone(browser, folder):
    with serve_folder(folder) as base:
        ctx = browser.new_context(locale="en-US")
        pg = ctx.new_page()
        errors = page_errors(pg)
        requests: list[str] = []
        pg.on("request", lambda r: requests.append(r.url))
        pg.goto(base + "index.html")
        pg.wait_for_function("() => !document.querySelector('[aria-busy]')")
        # Every call of the explorer's API through Attn answers "needs the explorer", unsent.
        got = pg.evaluate(
            "() => Promise.all([Attn.postJSON('/api/lesson/translation', {text: 'x'}), Attn.getJSON('/api/lesson/bleu-by-length')]"
            ".map((p) => p.then(() => 'answered', (e) => e.name + ': ' + e.message)))"
        )
        assert got == [f"NeedsExplorer: {i18n.t('en', 'needs_explorer')}"] * 2
        assert not [u for u in requests if "/api/" in u]
        # Lesson.fail shows it as the plain sentence, marked, not as "Error: …".
        shown = pg.evaluate(
            "() => { const box = document.createElement('div'); box.className = 'error hidden';"
            " document.body.append(box); Lesson.fail(box, new Attn.NeedsExplorer());"
            " return [box.textContent, box.classList.contains('needs-explorer'), box.classList.contains('hidden')]; }"
        )
        assert shown == [i18n.t("en", "needs_explorer"), True, False]
        # No link to the explorer's own tools or its classroom QR code on the static site.
        assert pg.locator("a[href*='playground'], a[href*='masks'], #classroom-qr").count() == 0
        assert pg.locator("#classroom").is_hidden()
        # A link a widget draws to the server turns into the sentence when followed.
        pg.evaluate(
            "() => { const a = Attn.el('a', {href: '/api/lesson/figures/attention-map.png', id: 'fig'}, 'PNG');"
            " document.querySelector('main').append(a); }"
        )
        pg.click("#fig")
        assert pg.locator("main .needs-explorer").inner_text() == i18n.t("en", "needs_explorer")
        assert pg.url.endswith("index.html?lang=en")
        ctx.close()
        assert not errors, errors


def test_a_model_downloaded_once_runs_offline(browser, folder, tmp_path):
    # A copy the test may serve and then take away, so the model's second run cannot reach it.
    copy = tmp_path / "site"
    shutil.copytree(folder, copy, symlinks=True)
    with serve_folder(copy) as base:
        ctx = browser.new_context()
        pg = ctx.new_page()
        pg.set_default_timeout(120_000)
        errors = page_errors(pg)
        pg.goto(base + "index.html")
        pg.evaluate("() => navigator.serviceWorker.ready.then(() => true)")
        pg.goto(base + "static/engine/check.html?model=demo")
        pg.wait_for_function("() => navigator.serviceWorker.controller !== null")
        pg.evaluate("() => engineCheck.ready.then(() => true)")
        online = pg.evaluate("() => engineCheck.run('demo', [{text: 'the cat sat on the mat'}])")
    shutil.rmtree(copy)
    ctx.set_offline(True)
    pg.reload()
    pg.evaluate("() => engineCheck.ready.then(() => true)")
    offline = pg.evaluate("() => engineCheck.run('demo', [{text: 'the cat sat on the mat'}])")
    assert offline[0]["ids"] == online[0]["ids"] and offline[0]["text"] == online[0]["text"]
    assert len(online[0]["ids"]) > 1
    ctx.close()
    assert not errors, errors


@pytest.mark.parametrize("lang", ["ja", "en"])
def test_on_a_phone_a_models_loading_line_keeps_the_layout(browser, folder, lang):
    """375 px: while a model downloads, the widget's status line (Lesson.modelProgress, the longest
    form "Loading the model… 100% (11.9 MB)") wraps inside the screen; nothing sticks out sideways."""
    with serve_folder(folder) as base:
        ctx = browser.new_context(
            viewport={"width": 375, "height": 812}, is_mobile=True, has_touch=True, device_scale_factor=2
        )
        ctx.add_init_script(AUTO_UNCOVER)
        pg = ctx.new_page()
        pg.set_default_timeout(TIMEOUT_MS)
        errors = page_errors(pg)
        pg.goto(f"{base}lesson/1.html?lang={lang}")
        pg.wait_for_function("() => !document.querySelector('[aria-busy]')")
        widths = "() => [document.documentElement.clientWidth, document.documentElement.scrollWidth]"
        before = pg.evaluate(widths)
        lines = pg.evaluate(
            "() => Array.from(document.querySelectorAll('.widget [id$=-status]')).map((node) => {"
            " Lesson.modelProgress({ status: node })(11.9e6, 11.9e6); const r = node.getBoundingClientRect();"
            " return [node.id, node.textContent, r.left, r.right]; })"
        )
        assert lines, "no widget status line on §1"
        for name, text, left, right in lines:
            assert "11.9" in text and "100" in text, (name, text)
            assert left >= 0 and right <= 375, (name, left, right)
        assert pg.evaluate(widths) == before == [375, 375]
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        pg.locator(".widget").first.screenshot(path=str(ARTIFACTS / f"phone-loading-{lang}.png"))
        ctx.close()
        assert not errors, errors
