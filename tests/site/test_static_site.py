"""The static site (``attnlab lesson build-site``): its files, and that it fetches nothing from outside
its folder (no browser; tests/site/test_static_site_browser.py opens it).

The build here exports only the demo translator (the fast one); the other models of SITE_MODELS are
exported by the same code path (tests/site/test_site_*.py test each exporter)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest
from fastapi.testclient import TestClient

from attnlab.export_onnx import export_translator_onnx
from attnlab.web import site
from attnlab.web.app import STATIC_DIR, create_app
from attnlab.web.lesson import LESSON_DATA_DIR, default_sections, lesson_data
from attnlab.web.lesson.common import page_href, render_shell
from attnlab.web.static_site import build_site, site_pages

pytestmark = pytest.mark.skipif(
    not (site.REPO / "node_modules" / "onnxruntime-web" / "dist" / site.RUNTIME_FILES[0]).is_file(),
    reason="needs onnxruntime-web in node_modules (npm ci)",
)

SECTIONS = sorted(default_sections())


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("site") / "site"
    report = build_site(out, models={"demo": export_translator_onnx})
    return out, report


def _refs(html: str) -> list[str]:
    """Every href and src of an HTML page."""
    found: list[str] = []

    class Refs(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.extend(v for k, v in attrs if k in ("href", "src") and v is not None)

    Refs().feed(html)
    return found


def test_the_folder_has_every_page_the_data_the_runtime_and_the_models(built):
    out, report = built
    files = set(report["files"])
    pages = {"index.html", "lesson/glossary.html", "lesson/plan.html", *(f"lesson/{n}.html" for n in SECTIONS)}
    assert pages <= files
    assert set(site_pages(SECTIONS)) == pages
    data = {f"{LESSON_DATA_DIR}/{name}.json" for name in ("sections", "glossary", "plan")}
    data |= {f"{LESSON_DATA_DIR}/sections/{n}.json" for n in SECTIONS}
    assert data <= files
    runtime = {f"static/vendor/onnxruntime-web/{name}" for name in site.RUNTIME_FILES}
    assert runtime <= files
    assert {
        "static/models/demo/meta.json",
        "static/models/demo/encoder.onnx",
        "static/models/demo/decoder.onnx",
    } <= files
    engine = {f"static/engine/{name}" for name in site.ENGINE_FILES}
    assert engine <= files
    assert {"static/i18n.js", "static/common.js", "static/lesson/lesson.js", "fonts/ipaexg.ttf", "sw.js"} <= files
    # the explorer's own tools and the page shells (templates) are not in the static site
    assert not files & {
        "static/playground.html",
        "static/masks.html",
        "static/model.html",
        "static/lesson/section.html",
    }
    assert not any(f.startswith("static/offline/") for f in files)
    assert report["bytes"] == sum((out / f).stat().st_size for f in files)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == report["files"]


def test_every_link_of_every_page_stays_in_the_folder_and_finds_its_file(built):
    out, report = built
    base = "http://host/sub/path/"  # any sub-path of any host
    for page in (f for f in report["files"] if f.endswith(".html") and not f.startswith("static/")):
        html = (out / page).read_text(encoding="utf-8")
        assert 'data-site="static"' in html
        root = re.search(r'data-root="([^"]*)"', html).group(1)
        assert urljoin(base + page, root) == base, (page, root)
        for ref in _refs(html):
            assert not ref.startswith(("/", "//", "http:", "https:")), (page, ref)
            target = urlparse(urljoin(base + page, ref))
            assert target.netloc == "host" and target.path.startswith("/sub/path/"), (page, ref)
            rel = target.path.removeprefix("/sub/path/") or "index.html"
            assert (out / rel).is_file(), (page, ref, rel)


def test_scripts_and_styles_name_no_absolute_url_outside_the_folder(built):
    out, report = built
    for f in report["files"]:
        if not f.endswith((".js", ".css", ".mjs")) or f.startswith("static/vendor/"):
            continue
        text = (out / f).read_text(encoding="utf-8")
        assert not re.search(r"""["'`(]/(static|fonts)/""", text), f
        # A lesson page's explorer path ("/lesson/3") only as what Attn.pageURL (lessonLink) turns
        # into the static build's file, never as a URL of its own.
        for line in text.splitlines():
            if re.search(r"""["'`]/lesson/""", line) and not line.lstrip().startswith(("//", "/*")):
                assert re.search(r"pageURL\(|[Ll]ink\)?\(|\[\"/lesson/glossary\", \"glossary\"", line), (f, line)
        # no address of another host in a string (the SVG and MathML namespaces are names, not fetched)
        assert not re.search(r"""["'`(]https?://(?!www\.w3\.org/)""", text), f
        # What still asks the explorer's API goes through Attn.postJSON/getJSON (which answer "needs
        # the explorer" on the static site) or is a link the page turns into that sentence: never a
        # fetch of its own, an image or a script.
        assert not re.search(r"""fetch\(\s*["'`]/api/""", text), f
        assert not re.search(r"""(src|action)\s*[:=]\s*["'`]/api/""", text) or f == "static/lesson/classroom.js", f


def test_the_lesson_data_files_are_what_the_explorer_serves_at_the_same_urls(built):
    out, _ = built
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    data = lesson_data()
    assert set(data) == {"sections", "glossary", "plan", *(f"sections/{n}" for n in SECTIONS)}
    for name, obj in data.items():
        written = json.loads((out / LESSON_DATA_DIR / f"{name}.json").read_text(encoding="utf-8"))
        assert written == obj
        served = client.get(f"/{LESSON_DATA_DIR}/{name}.json")
        assert served.status_code == 200 and served.json() == written
    # the lesson's old content endpoints are gone: the data files are the one source
    for gone in ("/api/lesson/sections", "/api/lesson/sections/3", "/api/lesson/glossary", "/api/lesson/plan"):
        assert client.get(gone).status_code == 404, gone
    assert client.get(f"/{LESSON_DATA_DIR}/nothing.json").status_code == 404
    assert client.get(f"/{LESSON_DATA_DIR}/sections/99.json").status_code == 404


def test_the_pages_are_the_explorers_shells_with_a_relative_root(built):
    out, _ = built
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    shells = STATIC_DIR / "lesson"  # the shells the explorer serves
    explorer = client.get("/lesson/3?lang=ja").text
    assert explorer == render_shell((shells / "section.html").read_text(encoding="utf-8"), "ja")
    assert 'data-root="/" data-site="explorer"' in explorer and "/static/lesson/lesson.js" in explorer
    static = (out / "lesson" / "3.html").read_text(encoding="utf-8")
    assert static == render_shell(
        (shells / "section.html").read_text(encoding="utf-8"), None, root="../", site="static"
    )
    as_explorer = static.replace("../", "/").replace('data-site="static"', 'data-site="explorer"')
    assert as_explorer.replace('href="/index.html"', 'href="/"') == explorer.replace(' data-lang="ja"', "").replace(
        'lang="ja"', 'lang="en"'
    )
    # the index of the static site has no link to the explorer's own tools
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "playground" not in index and "data-server-only" not in index
    assert "/playground" in client.get("/").text
    assert (
        page_href("/", "./", "static") == "./index.html"
        and page_href("/lesson/4", "../", "static") == "../lesson/4.html"
    )
    assert page_href("/lesson/4", "/", "explorer") == "/lesson/4" and page_href("/", "/", "explorer") == "/"


def test_the_service_worker_precaches_every_file_but_the_runtime_and_models(built):
    out, report = built
    text = (out / "sw.js").read_text(encoding="utf-8")
    files = json.loads(re.search(r"const FILES = (\[.*?\]);", text, re.S).group(1))
    assert "__VERSION__" not in text and re.search(r'const VERSION = "[0-9a-f]{16}";', text)
    lazy = [f for f in report["files"] if f.startswith(("static/vendor/", "static/models/"))]
    assert lazy and sorted(files) == sorted(set(report["files"]) - set(lazy) - {"sw.js"})
    assert "index.html" in files and "fonts/ipaexg.ttf" in files


def test_a_second_build_refuses_a_full_folder_and_leaves_nothing_behind(built, tmp_path):
    out, _ = built
    with pytest.raises(FileExistsError, match="not empty"):
        build_site(out, models={})
    assert (out / "index.html").is_file()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".site.")]
    with pytest.raises(FileNotFoundError, match="npm ci"):
        build_site(tmp_path / "again", models={}, repo=tmp_path)
    assert not (tmp_path / "again").exists()


def test_force_replaces_a_built_site_whole(tmp_path):
    out = tmp_path / "site"
    build_site(out, models={}, data=[])  # what is replaced, not what is measured: no data files
    (out / "stale.html").write_text("from an older build")
    report = build_site(out, models={}, data=[], force=True)
    assert not (out / "stale.html").exists() and (out / "index.html").is_file()
    assert "static/models/demo/meta.json" not in report["files"]
    assert [p.name for p in tmp_path.iterdir()] == ["site"]  # no temporary folder left beside it
