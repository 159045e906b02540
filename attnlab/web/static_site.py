"""The whole lesson as a static site: ``attnlab lesson build-site --out DIR`` (and ``make site``).

The folder it writes is served by any static host (GitHub Pages, a university web space,
``python -m http.server``) from any sub-path, with no server code at view time and nothing fetched
from outside it; after the first visit its service worker (``sw.js``) keeps the site in the
browser's cache, so the lesson also works offline. The pages are the explorer's own (the shells of
``static/lesson/``, rendered by :func:`attnlab.web.lesson.common.render_shell` with a relative
root), so there is one implementation of each page::

    index.html                      the lesson's index
    lesson/N.html                   every section (the final check and §9's applications among them;
                                    ?teacher=1 is the answer key, ?view=present the projector view)
    lesson/glossary.html, lesson/plan.html   the glossary, the teacher's plan
    static/...                      the explorer's scripts and styles, i18n.js (from the catalogs)
    static/data/lesson/NAME.json    the lesson's content (attnlab.web.lesson.lesson_data)
    static/data/NAME                the measured figures of SITE_DATA, where there are any
    static/engine/, static/vendor/onnxruntime-web/, static/models/NAME/   the in-page engine,
                                    the runtime and every model of SITE_MODELS (attnlab.web.site)
    fonts/ipaexg.ttf                the Japanese font
    sw.js                           the service worker (offline after the first visit)

Every widget computes in the page. Should a page still ask the explorer's ``/api/...`` (a tool
page's request), the static site says in the widget that it needs the explorer (common.js's
``NeedsExplorer``). The classroom's QR code and the handout's PDF stay the explorer's.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from . import i18n, site
from .lesson import LESSON_DATA_DIR, LESSON_PAGES, default_sections, lesson_data
from .lesson.common import LESSON_DIR, page_href, render_shell

__all__ = ["EXPLORER_ONLY", "SiteReport", "build_site", "site_pages"]

STATIC_DIR = LESSON_DIR.parent

#: Files of ``static/`` the static site leaves out: the explorer's own tools (they run on its
#: server), the page shells (templates, written as pages instead) and the service worker's
#: template (written to the root).
EXPLORER_ONLY = frozenset(
    {"playground.html", "playground.js", "model.html", "model.js", "masks.html", "masks.js", "offline/sw.js"}
)

#: Precached on install (every page works offline once one was visited); the runtime's and the
#: models' files (many MB) are kept by the service worker when a page first loads them.
_LAZY_PREFIXES = ("static/vendor/", "static/models/")


class SiteReport(dict):
    """What :func:`build_site` wrote: ``folder``, ``files`` (relative paths, sorted), ``bytes`` (their
    total) and ``models`` (name → bytes of its folder).

    Shape:
        no tensors.
    """


def site_pages(sections: Iterable[int]) -> dict[str, tuple[str, str]]:
    """The static site's pages: file (relative to the folder) → (the shell in ``static/lesson/``,
    the page's root as a relative prefix).

    Shape:
        no tensors.
    """
    pages: dict[str, tuple[str, str]] = {}
    for path, shell in LESSON_PAGES.items():
        if "{n}" in path:
            for n in sections:
                pages[page_href(path.replace("{n}", str(n)), "", "static")] = (shell, "../")
        else:
            file = page_href(path, "", "static")
            pages[file] = (shell, "../" * file.count("/") or "./")
    return pages


def _copy_static(dest: Path) -> None:
    for path in sorted(STATIC_DIR.rglob("*")):
        rel = path.relative_to(STATIC_DIR).as_posix()
        if not path.is_file() or rel in EXPLORER_ONLY or "__pycache__" in rel or path.name.startswith("."):
            continue
        if path.parent == LESSON_DIR and path.suffix == ".html":
            continue  # a page shell: rendered into a page below
        target = dest / "static" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def _site_data(dest: Path, names: Sequence[str] | None) -> None:
    # SITE_DATA (file name → write(path)): measurements of PyTorch on this machine and test sets,
    # written at build time (the explorer writes the same on first ask).
    site.write_site_data(dest / "static" / "data", names)


def _service_worker(dest: Path) -> None:
    files = sorted(
        p.relative_to(dest).as_posix()
        for p in dest.rglob("*")
        if p.is_file() and not p.relative_to(dest).as_posix().startswith(_LAZY_PREFIXES)
    )
    digest = hashlib.sha256()
    for rel in sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()):
        digest.update(rel.encode() + b"\0" + (dest / rel).read_bytes())
    text = (STATIC_DIR / "offline" / "sw.js").read_text(encoding="utf-8")
    text = text.replace("__VERSION__", digest.hexdigest()[:16]).replace("[/* FILES */]", json.dumps(files, indent=0))
    (dest / "sw.js").write_text(text, encoding="utf-8")


def build_site(
    dest: str | Path,
    *,
    models: Mapping[str, Callable[..., Path]] | None = None,
    data: Sequence[str] | None = None,
    weights: str = "auto",
    repo: Path = site.REPO,
    force: bool = False,
    progress: Callable[[str], None] | None = None,
) -> SiteReport:
    """Write the static site (the layout in the module's docstring) to ``dest``.

    Args:
        dest: the folder to write; it must not exist or be empty, unless ``force`` (then replaced).
        models: the in-page models to export (default :data:`attnlab.web.site.SITE_MODELS`).
        data: the data files of :data:`attnlab.web.site.SITE_DATA` to write (default: all of them).
        weights: the models' weight storage (``auto``: the smallest exact one; see the exporters).
        repo: the checkout whose ``node_modules`` holds onnxruntime-web (``npm ci``).
        force: replace a ``dest`` that has files.
        progress: called with a line per step.

    Raises:
        FileNotFoundError: onnxruntime-web is not installed (run ``npm ci``), or a shipped model is
            missing (the exporter's message names ``make models``).
        FileExistsError: ``dest`` has files and ``force`` is not set. Nothing is left half-written
            in ``dest``: the site is written beside it and renamed into place at the end.

    Shape:
        no tensors; returns a :class:`SiteReport`.
    """
    say = progress or (lambda line: None)
    out = Path(dest)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise FileExistsError(f"{out} is not empty: give a new folder (or --force to replace it)")
    models = dict(site.SITE_MODELS if models is None else models)
    site.node_modules_runtime(repo)  # before the slow steps: the missing runtime is the quick error
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        sections = default_sections()
        say("pages and scripts")
        _copy_static(work)
        (work / "static" / "i18n.js").write_text(i18n.script(), encoding="utf-8")
        for file, (shell, root) in site_pages(sections).items():
            target = work / file
            target.parent.mkdir(parents=True, exist_ok=True)
            html = render_shell((LESSON_DIR / shell).read_text(encoding="utf-8"), None, root=root, site="static")
            target.write_text(html, encoding="utf-8")
        for name, obj in lesson_data(sections).items():
            target = work / LESSON_DATA_DIR / f"{name}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(obj, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
        from ..viz import cjk_font_path

        (work / "fonts").mkdir()
        shutil.copy2(cjk_font_path(), work / "fonts" / "ipaexg.ttf")
        say("onnxruntime-web")
        site.copy_runtime(work / "static" / "vendor" / "onnxruntime-web", repo=repo)
        sizes = {}
        for name, export in models.items():
            say(f"model {name}")
            folder = work / "static" / "models" / name
            export(name, folder, weights=weights)
            sizes[name] = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        _site_data(work, data)
        (work / ".nojekyll").write_text("")  # GitHub Pages: serve the folder as it is
        _service_worker(work)
        files = sorted(p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_file())
        total = sum((work / f).stat().st_size for f in files)
        old = None
        if out.exists():  # the old site moves aside first, so the folder is never half-written
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent)) / out.name
            out.replace(old)
        work.replace(out)
        if old is not None:
            shutil.rmtree(old.parent, ignore_errors=True)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return SiteReport(folder=out, files=files, bytes=total, models=sizes)
