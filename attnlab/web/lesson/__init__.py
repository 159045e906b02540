"""The lesson (授業): a guided, bilingual walk through attention and the Transformer.

The explorer opens on the lesson's index. Each of its nine sections is one page with learning
objectives, a short explanation, live widgets whose numbers come from the API below, 「やってみよう
/ Try this」 prompts, a 要点 (key points) box and a 理解の確認 check; a tenth page is the final
check across all sections, and ``/lesson/glossary`` the bilingual glossary (用語集).

Where things live (one home each):

- ``content/LANG/NN-slug.md``: a section's text in one language (Markdown with front matter;
  :mod:`.content` parses and merges both languages and checks they agree);
  ``content/LANG/glossary.yaml``: the glossary.
- ``sNN_slug.py``: the section's API (its widgets' computations and endpoints), numbered like
  the content files; :mod:`.common` holds what several sections share (the shipped models, seeded
  inputs, the shells).
- ``static/lesson/widgets/*.js``: the widgets, which only draw what the API returns.

Pages: ``/`` (the index), ``/lesson/{n}`` (section ``n``, its state in the address, e.g.
``?lang=ja&dk=512``), ``/lesson/glossary``, ``/lesson/plan`` (:data:`LESSON_PAGES`; the static build,
:mod:`attnlab.web.static_site`, writes the same pages as ``index.html``, ``lesson/N.html`` …). The
pages read the lesson's content from ``/static/data/lesson/NAME.json`` (:func:`lesson_data`), the
files the static build writes at the same URLs.

API (bad input gets a 4xx with a message, never a 500): the sections' endpoints that remain (see the
``sNN_*`` modules; the content itself is the data files above, a missing one a 404). A widget whose
shipped model is not installed answers 503 naming it and ``make models ONLY=NAME``; the rest of the
lesson works.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse

from ..models import ExplorerModel
from . import (
    s01_what_attention_does,
    s02_seq2seq_bottleneck,
    s03_query_key_value,
    s04_self_and_source_target,
    s05_multi_head,
    s06_positional_encoding,
    s07_whole_transformer,
    s08_variants_and_exercises,
    s09_transformers_at_work,
)
from .common import *  # noqa: F403
from .common import LESSON_DIR, LessonModels, page_language, page_shell
from .content import *  # noqa: F403
from .content import (
    Section,
    SectionSummary,
    default_glossary,
    default_sections,
    lesson_plan,
    term_uses,
)
from .s01_what_attention_does import *  # noqa: F403
from .s02_seq2seq_bottleneck import *  # noqa: F403
from .s03_query_key_value import *  # noqa: F403
from .s04_self_and_source_target import *  # noqa: F403
from .s05_multi_head import *  # noqa: F403
from .s06_positional_encoding import *  # noqa: F403
from .s07_whole_transformer import *  # noqa: F403
from .s08_variants_and_exercises import *  # noqa: F403
from .s09_transformers_at_work import *  # noqa: F403

#: The lesson's pages: the explorer's path → its shell in ``static/lesson/`` (``/lesson/{n}``: every
#: section, the final check among them). The static build writes each as a file (see
#: :func:`attnlab.web.lesson.common.page_href`): ``index.html``, ``lesson/N.html``,
#: ``lesson/glossary.html``, ``lesson/plan.html``.
LESSON_PAGES = {
    "/": "index.html",
    "/lesson/glossary": "glossary.html",
    "/lesson/plan": "plan.html",
    "/lesson/{n}": "section.html",
}

#: Where the pages read the lesson's content (lesson.js, ``Attn.dataURL``): one JSON file per name
#: under this folder of the site, ``static/data/lesson/NAME.json``, the same in the explorer (which
#: answers those URLs) and in the static build (which writes them).
LESSON_DATA_DIR = "static/data/lesson"


def lesson_data(sections: Mapping[int, Section] | None = None) -> dict[str, Any]:
    """The lesson's content as the pages read it: name → a JSON-ready object, for
    ``sections`` (every section's summary, in order), ``sections/N`` (one section's texts in both
    languages, blocks, prompts, check, teacher notes), ``glossary`` (each term with the sections
    whose text uses it) and ``plan`` (the teacher's two sessions). The explorer serves these at
    ``static/data/lesson/NAME.json`` and the static build writes them there: one source for both.

    Shape:
        no tensors; returns a dict of JSON-ready objects.
    """
    sections = dict(default_sections() if sections is None else sections)
    uses = term_uses(sections, default_glossary())
    glossary = [e.model_copy(update={"used_in": uses.get(i, [])}) for i, e in default_glossary().items()]
    data: dict[str, Any] = {"sections": [SectionSummary.of(s).model_dump(mode="json") for s in sections.values()]}
    for n, section in sections.items():
        data[f"sections/{n}"] = section.model_dump(mode="json", by_alias=True)
    data["glossary"] = [e.model_dump(mode="json") for e in glossary]
    data["plan"] = lesson_plan(sections).model_dump(mode="json")
    return data


SECTION_MODULES = (
    s01_what_attention_does,
    s02_seq2seq_bottleneck,
    s03_query_key_value,
    s04_self_and_source_target,
    s05_multi_head,
    s06_positional_encoding,
    s07_whole_transformer,
    s08_variants_and_exercises,
    s09_transformers_at_work,
)


def lesson_router(
    models: Mapping[str, ExplorerModel], gate, sections: Mapping[int, Section] | None = None
) -> APIRouter:
    """The lesson's pages and API. ``gate`` bounds model and figure work (the app's ``WorkGate``)."""
    sections = dict(default_sections() if sections is None else sections)
    lesson_models = LessonModels(models)
    router = APIRouter()
    data: dict[str, Any] | None = None  # lesson_data(sections), made on the first ask

    @router.get("/" + LESSON_DATA_DIR + "/{name:path}", include_in_schema=False)
    def lesson_data_file(name: str) -> JSONResponse:
        # The files the static build writes (lesson_data), answered from the same objects.
        nonlocal data
        if data is None:
            data = lesson_data(sections)
        key = name.removesuffix(".json")
        if not name.endswith(".json") or key not in data:
            raise HTTPException(404, f"no lesson data {name[:40]!r}")
        return JSONResponse(data[key], headers={"Cache-Control": "no-cache"})

    @router.get("/", include_in_schema=False)
    def index_page(request: Request) -> HTMLResponse:
        return page_shell(LESSON_DIR / "index.html", page_language(request))

    @router.get("/lesson", include_in_schema=False)
    def lesson_index_page(request: Request) -> HTMLResponse:
        return page_shell(LESSON_DIR / "index.html", page_language(request))

    @router.get("/lesson/glossary", include_in_schema=False)
    def glossary_page(request: Request) -> HTMLResponse:
        return page_shell(LESSON_DIR / "glossary.html", page_language(request))

    @router.get("/lesson/plan", include_in_schema=False)
    def plan_page(request: Request) -> HTMLResponse:
        return page_shell(LESSON_DIR / "plan.html", page_language(request))

    @router.get("/lesson/{n}", include_in_schema=False)
    def section_page(n: str, request: Request) -> HTMLResponse:
        if not n.isdigit() or int(n) not in sections:
            raise HTTPException(404, f"no lesson section {n[:20]!r}; the sections are 1–{len(sections)}")
        return page_shell(LESSON_DIR / "section.html", page_language(request))

    for module in SECTION_MODULES:
        module.add_routes(router, lesson_models, gate)
    return router
