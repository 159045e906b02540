"""What the browser tests of the lesson share: Debian's Chromium driven by Playwright, the explorer
served on a loopback port, a page in Japanese or English whose console errors fail the test (a
screenshot is kept at the end), and the helpers that read the widgets' numbers, wait for a section,
move by the Tab key and run axe-core.

A test module marks itself with ``pytestmark = BROWSER_MARKS`` (the tests skip without
/usr/bin/chromium); the fixtures ``base_url``, ``browser`` and ``lang`` defined here (as
``base_url_fixture``, ``browser_fixture`` and ``lang_fixture``, named apart so that a test's
arguments do not shadow them) reach every module through ``tests/conftest.py``; its ``page``
fixture comes from :func:`make_page`, which takes what differs between the modules (the
screenshots' folder, the default timeout, the viewport).
Playwright and axe are imported only when a browser is started, so importing this module never
needs Chromium.

Every browser test of the lesson's pages opens them through ONE fixture, ``lesson_site`` (a
:class:`LessonSite`: the base URL and the mode; ``base_url`` is its URL); a module changes what is
served by overriding ``lesson_app`` (the explorer's app factory) or ``lesson_sections`` (its own
content, in both modes). A test about the explorer's server itself is marked
``explorer_only(reason)`` (tests/conftest.py skips it on the static build, saying why).
``ATTNLAB_TEST_SITE=static`` (``make test-site``) runs the same tests against the static build instead of the explorer
(:func:`static_site_folder`: ``attnlab lesson build-site``, built once per test session, or the
folder ``ATTNLAB_TEST_SITE_DIR`` names), served by Python's ``http.server``
(:func:`attnlab.web.site.serve_folder`, answering ``/lesson/3`` with ``lesson/3.html`` as GitHub
Pages does, so the tests' addresses stay the same).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import torch
from live_server import page_errors, serving

from attnlab.assets import locate
from attnlab.web.app import create_app

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS_ROOT = Path(__file__).resolve().parents[1] / "test-artifacts"
DESKTOP = {"width": 1280, "height": 900}

BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium (apt-get install chromium)"
    ),
]


def shipped(name: str) -> Path:
    """The shipped model ``name``'s directory; the test skips when it is not built here."""
    try:
        return locate.shipped_model_dir(name)
    except FileNotFoundError:
        pytest.skip(f"needs the shipped model {name} (make models ONLY={name})")


#: The lesson's browser tests run against the static build (see the module's docstring).
STATIC_SITE = os.environ.get("ATTNLAB_TEST_SITE", "explorer") == "static"

_built_site: list[Path] = []


def static_site_folder() -> Path:
    """The static build the tests serve: ``ATTNLAB_TEST_SITE_DIR`` when set (a folder written by
    ``attnlab lesson build-site``), else the site built once in this session into a temporary folder."""
    given = os.environ.get("ATTNLAB_TEST_SITE_DIR")
    if given:
        return Path(given)
    if not _built_site:
        from attnlab.web.static_site import build_site

        out = Path(tempfile.mkdtemp(prefix="attnlab-test-site-")) / "site"
        build_site(out)
        _built_site.append(out)
    return _built_site[0]


def static_site_with(sections: Mapping[int, Any], where: Path) -> Path:
    """The static build with the lesson's content replaced by ``sections`` (a test's own content):
    the built folder hard-linked into ``where`` (no copy of the models), its
    ``static/data/lesson/*.json`` and section pages written for ``sections`` as ``build-site``
    writes them (:func:`attnlab.web.lesson.lesson_data`, :func:`attnlab.web.static_site.site_pages`)."""
    import json
    import shutil

    from attnlab.web.lesson import LESSON_DATA_DIR, LESSON_DIR, lesson_data
    from attnlab.web.lesson.common import render_shell
    from attnlab.web.static_site import site_pages

    out = where / "site"

    def link(src, dst):  # a hard link where the file system allows, else a copy
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(static_site_folder(), out, copy_function=link)
    shutil.rmtree(out / LESSON_DATA_DIR)
    for name, obj in lesson_data(sections).items():
        target = out / LESSON_DATA_DIR / f"{name}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    for file, (shell, root) in site_pages(sections).items():
        target = out / file
        target.unlink(missing_ok=True)  # a hard link: never write through it into the shared build
        html = render_shell((LESSON_DIR / shell).read_text(encoding="utf-8"), None, root=root, site="static")
        target.write_text(html, encoding="utf-8")
    return out


@dataclasses.dataclass(frozen=True)
class LessonSite:
    """The lesson the browser tests open: its base URL (no trailing slash) and the mode, ``explorer``
    (``attnlab explore``'s app served by uvicorn) or ``static`` (the folder ``build-site`` writes,
    served by a plain static host)."""

    url: str
    mode: str

    @property
    def static(self) -> bool:
        return self.mode == "static"


@contextlib.contextmanager
def serving_lesson(app_factory=create_app, sections: Mapping[int, Any] | None = None) -> Iterator[LessonSite]:
    """The lesson being served: the explorer (``app_factory()`` served by uvicorn), or with
    ``ATTNLAB_TEST_SITE=static`` the static build served by Python's ``http.server``. ``sections``:
    the lesson's content instead of the shipped one (in the explorer, :func:`default_sections`
    answers them while the app is made; on the static build, :func:`static_site_with`)."""
    if STATIC_SITE:
        from attnlab.web.site import serve_folder

        with contextlib.ExitStack() as stack:
            folder = static_site_folder()
            if sections is not None:
                where = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="attnlab-test-site-")))
                folder = static_site_with(sections, where)
            url = stack.enter_context(serve_folder(folder, pretty=True))
            yield LessonSite(url.rstrip("/"), "static")
    else:
        with pytest.MonkeyPatch.context() as mp:
            if sections is not None:
                from attnlab.web import lesson as L

                mp.setattr(L, "default_sections", lambda: sections)
            app = app_factory()
        with serving(app) as port:
            yield LessonSite(f"http://127.0.0.1:{port}", "explorer")


def lesson_href(path: str, query: str = "", *, on_index: bool = False) -> str:
    """The href lesson.js writes for the lesson page whose explorer path is ``path`` (``/lesson/3``)
    followed by ``query``: that path in the explorer; on the static build the page's file relative to
    the page the link is on (``../lesson/3.html``; ``./lesson/3.html`` on the index)."""
    if not STATIC_SITE:
        return path + query
    from attnlab.web.lesson.common import page_href

    return page_href(path, "./" if on_index else "../", "static") + query


def lesson_path(path: str) -> str:
    """The address path of the lesson page whose explorer path is ``path``, reached by following a
    link: ``/lesson/3`` in the explorer, ``/lesson/3.html`` on the static build (served at the root)."""
    return path if not STATIC_SITE else lesson_href(path, on_index=True).removeprefix(".")


@pytest.fixture(scope="module", name="lesson_app")
def lesson_app_fixture():
    """What the explorer serves, as a factory (``create_app``); a module overrides it to serve a
    classroom or its own models. Unused on the static build."""
    return create_app


@pytest.fixture(scope="module", name="lesson_sections")
def lesson_sections_fixture():
    """The lesson's content the tests see (None: the shipped lesson); a module overrides it to test
    its own content, in both modes (:func:`serving_lesson`)."""
    return None


@pytest.fixture(scope="module", name="lesson_site")
def lesson_site_fixture(lesson_app, lesson_sections):
    """THE lesson under test, for every browser test of the lesson's pages: a :class:`LessonSite`
    (base URL and mode), the explorer or, with ``ATTNLAB_TEST_SITE=static``, the static build."""
    with serving_lesson(lesson_app, lesson_sections) as served:
        yield served


@pytest.fixture(scope="module", name="base_url")
def base_url_fixture(lesson_site):
    return lesson_site.url


@pytest.fixture(scope="module", name="browser")
def browser_fixture():
    import playwright.sync_api as playwright_api

    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield b
        b.close()


@pytest.fixture(params=["ja", "en"], name="lang")
def lang_fixture(request) -> str:
    return request.param


# Run in every document of an uncovered page before its own scripts: as soon as the lesson draws a
# prediction, commit its first choice (the widget behind it is revealed), and open every 発展 /
# "Going further" fold — what a reader does before using a widget, done for the tests of the widgets
# themselves (the same steps as :func:`uncover`, kept up as the page redraws).
AUTO_UNCOVER = """
(() => {
  const go = () => {
    document.querySelectorAll('details.further:not([open])').forEach((d) => { d.open = true; });
    document.querySelectorAll('[id^=predict-][id$=-gate][data-revealed="0"]').forEach((gate) => {
      const form = gate.previousElementSibling;
      const input = form && form.querySelector('input[type=radio]');
      if (input && !form.dataset.autoUncovered) {
        form.dataset.autoUncovered = '1';
        input.checked = true;
        form.requestSubmit();
      }
    });
  };
  new MutationObserver(go).observe(document, { childList: true, subtree: true });
})();
"""


def make_page(
    artifacts: Path,
    *,
    timeout_ms: int = 30_000,
    viewport: dict | None = None,
    full_page: bool = True,
    uncovered: bool = True,
    **context,
):
    """A ``page`` fixture: a page in a browser whose language is ``lang`` (navigator.language and
    Accept-Language), at ``viewport`` (the desktop's 1280 × 900 by default), with ``timeout_ms`` as
    its default timeout and ``context`` passed on to ``browser.new_context``. ``uncovered``: every
    prediction is committed and every Going-further fold opened as the page draws them
    (:data:`AUTO_UNCOVER`; the tests of the predictions and folds themselves pass False). At the end
    a screenshot (of the whole page, or of the screen alone) is kept in ``artifacts`` and the test
    fails on any console error the page had."""

    @pytest.fixture
    def page(browser, base_url, lang, request):
        ctx = browser.new_context(
            viewport=viewport or DESKTOP,
            base_url=base_url,
            locale="ja-JP" if lang == "ja" else "en-US",
            **context,
        )
        if uncovered:
            ctx.add_init_script(AUTO_UNCOVER)
        pg = ctx.new_page()
        pg.set_default_timeout(timeout_ms)
        errors = page_errors(pg)
        outside = outside_requests(pg, base_url)
        yield pg
        artifacts.mkdir(parents=True, exist_ok=True)
        pg.evaluate("() => document.fonts.ready.then(() => true)")
        name = re.sub(r"[^\w.-]+", "-", request.node.name).strip("-")
        pg.screenshot(path=str(artifacts / f"{name}.png"), full_page=full_page)
        ctx.close()
        assert not errors, errors
        assert not outside, f"the page asked outside the lesson's site: {outside}"

    return page


def outside_requests(pg, base_url: str) -> list[str]:
    """The list the page's requests to anything but the lesson's own site (``base_url``) are
    appended to from now on: on the static build nothing may come from outside the folder (the
    explorer's pages are held to the same)."""
    asked: list[str] = []
    own = base_url.rstrip("/") + "/"
    pg.on(
        "request",
        lambda r: (
            asked.append(r.url) if r.url.startswith(("http:", "https:", "ws:")) and not r.url.startswith(own) else None
        ),
    )
    return asked


def params(pg) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(pg.url).query).items()}


def wait_request(pg, container: str, expected: dict) -> None:
    """Wait until the numbers in ``container`` answer ``expected`` (the widget's last request)."""
    pg.wait_for_function(
        "([sel, want]) => { const n = document.querySelector(sel); const d = n && n.dataset.request;"
        " if (!d) return false; const got = JSON.parse(d);"
        " return Object.entries(want).every(([k, v]) => JSON.stringify(got[k]) === JSON.stringify(v)); }",
        arg=[container, expected],
    )


def section_drawn(pg) -> None:
    """Wait until the section's page is drawn (``#section`` there and no longer aria-busy)."""
    # Functions, not expressions: the page's CSP forbids evaluating a string.
    pg.wait_for_function("() => document.querySelector('#section') && !document.querySelector('#section[aria-busy]')")


def widgets_answered(pg) -> None:
    """Wait until every widget on the page has shown its first answer (hidden slides included),
    none of them an error. On the static build a widget that still needs the explorer's API says so
    at once (``.needs-explorer``): the wait ends there and fails naming the widgets."""
    if STATIC_SITE:
        says = (
            "(w) => w && Array.from(w.querySelectorAll('.error:not(.hidden)'))"
            ".some((e) => e.textContent.includes(Attn.t('needs_explorer')))"
        )
        pg.wait_for_function(
            f"() => {{ const says = {says}; return Array.from(document.querySelectorAll('.widget-out'))"
            ".every((n) => n.dataset.seq !== '0' || says(n.closest('.widget'))); }"
        )
        needs = pg.evaluate(
            f"() => {{ const says = {says}; return Array.from(document.querySelectorAll('.widget'))"
            ".filter(says).map((w) => w.id); }"
        )
        assert not needs, f"on the static build these widgets still need the explorer: {needs}"
    pg.wait_for_function(
        "() => Array.from(document.querySelectorAll('.widget-out')).every((n) => n.dataset.seq !== '0')"
        " && document.querySelectorAll('.widget .error:not(.hidden)').length === 0"
    )


def wait_widgets(pg) -> None:
    """Wait until the section is drawn and every widget has shown its first answer."""
    section_drawn(pg)
    widgets_answered(pg)


def open_section(pg, n: int) -> None:
    pg.goto(f"/lesson/{n}")
    section_drawn(pg)


def values(pg, selector: str, attr: str = "data-value") -> list[float]:
    return pg.eval_on_selector_all(selector, f"ns => ns.map(n => Number(n.getAttribute('{attr}')))")


def close(got: list[float], want: list[float], tol: float = 1e-12) -> None:
    assert len(got) == len(want)
    torch.testing.assert_close(
        torch.tensor(got, dtype=torch.float64), torch.tensor(want, dtype=torch.float64), atol=tol, rtol=0
    )


def assert_accessible(pg) -> None:
    """axe-core: no serious or critical violation on the page as it is now."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(pg)
    bad = [
        (v["id"], v["impact"], [n["target"] for n in v["nodes"][:3]])
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert not bad, bad


# An element's text as the content files write it: a formula the page typesets as MathML
# (figure.js) is read from its annotation ("√d_k"), not from the drawn letters ("√dk").
WRITTEN = (
    "(n) => { const c = n.cloneNode(true); c.querySelectorAll('math').forEach((m) => {"
    " const a = m.querySelector('annotation'); m.replaceWith(a ? a.textContent : m.textContent); });"
    " return c.textContent; }"
)


def written(pg, selector: str) -> str:
    """The text of the first element matching ``selector``, formulas as written (:data:`WRITTEN`)."""
    return pg.eval_on_selector(selector, WRITTEN)


def written_all(locator) -> list[str]:
    """The texts of every element of ``locator``, formulas as written (:data:`WRITTEN`)."""
    return locator.evaluate_all(f"(ns) => ns.map({WRITTEN})")


def uncover(pg) -> None:
    """The third edition's basic path covers a widget until its prediction is committed and folds the
    発展 / "Going further" regions: for the tests of the widgets themselves, commit every prediction on
    the page (its first choice) and open every fold."""
    section_drawn(pg)
    pg.evaluate(
        "() => { document.querySelectorAll('details.further').forEach((d) => { d.open = true; });"
        " document.querySelectorAll('[id^=predict-][id$=-gate][data-revealed=\"0\"]').forEach((gate) => {"
        " const form = gate.previousElementSibling; const input = form && form.querySelector('input[type=radio]');"
        " if (input) { input.checked = true; form.requestSubmit(); } }); }"
    )


def goto_uncovered(pg, url: str) -> None:
    """Open a lesson page with its widgets uncovered and its folds open (:func:`uncover`)."""
    pg.goto(url)
    uncover(pg)


def tab_to(pg, selector: str, limit: int = 400) -> None:
    """Press Tab (and nothing else) until the element matching ``selector`` has the focus."""
    for _ in range(limit):
        if pg.evaluate("(sel) => document.activeElement && document.activeElement.matches(sel)", selector):
            return
        pg.keyboard.press("Tab")
    pytest.fail(f"{selector} cannot be reached with the Tab key")
