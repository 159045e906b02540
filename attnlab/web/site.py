"""The static site's in-page engine as a plain folder: what ``attnlab lesson build-site`` grows from.

A static host (GitHub Pages, a university web space, ``python -m http.server``) serves files and
nothing else, so everything the page runs must be in the folder: the engine's ES modules
(``static/engine/``: tokenizer, decoding, the ONNX translator and the check page), onnxruntime-web's
WASM build, copied from the repository's ``node_modules`` (``npm ci`` installs it from
``package-lock.json``), and each translator exported to ONNX (:func:`attnlab.export_onnx.export_translator_onnx`).
The folder it writes::

    engine/        every .js and .html of static/engine/ (tokenizer, decode, the translator, the page)
    vendor/onnxruntime-web/   ort.wasm.min.mjs, ort-wasm-simd-threaded.mjs, ort-wasm-simd-threaded.wasm
    models/NAME/   encoder.onnx, decoder.onnx, meta.json, the tokenizer files

The pages import the runtime and the models by relative URLs (``../vendor/…``, ``../models/…``),
so the folder works wherever it is put and fetches nothing from outside it.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ..export_onnx import export_rnn_translator_onnx, export_summarizer_onnx, export_translator_onnx
from ..onnx_apps import export_classifier_onnx, export_gat_onnx, export_gpt_onnx, export_vit_onnx
from ..onnx_bert import export_bert_onnx, export_minilm_views

__all__ = [
    "ENGINE_FILES",
    "ISOLATION_HEADERS",
    "RUNTIME_FILES",
    "SITE_DATA",
    "SITE_MODELS",
    "DataFiles",
    "ModelFolders",
    "copy_runtime",
    "node_modules_runtime",
    "serve_folder",
    "write_engine_folder",
    "write_site_data",
]

REPO = Path(__file__).resolve().parents[2]
ENGINE_DIR = Path(__file__).resolve().parent / "static" / "engine"

#: onnxruntime-web's files a page needs for WASM, single- and multi-threaded: the wasm-only ES
#: module entry (no WebGL/WebGPU/JSEP), the Emscripten loader it imports (also the script of the
#: threads' workers when the page is cross-origin isolated) and the WASM binary, which since
#: onnxruntime-web 1.19 is one threaded SIMD build that runs single-threaded with numThreads = 1.
RUNTIME_FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")

#: The headers that make a page cross-origin isolated (SharedArrayBuffer, so WASM threads); a
#: plain static host sends none of them, and the page then runs single-threaded.
ISOLATION_HEADERS = {"Cross-Origin-Opener-Policy": "same-origin", "Cross-Origin-Embedder-Policy": "require-corp"}

#: The engine's files: every module and page of ``attnlab/web/static/engine/`` (a new module
#: there is copied without a change here).
ENGINE_FILES = tuple(sorted(p.name for p in ENGINE_DIR.iterdir() if p.suffix in (".js", ".html")))

#: A model's folder name under ``models/`` (the check page's regex in ``engine/check.js``).
_MODEL_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")

#: The in-page models of the lesson: a shipped model's name → the function that writes its folder
#: ``models/NAME/`` (called as ``export(name, out_dir, weights=...)``; ``out_dir`` must not exist).
#: The static build writes each of them; ``attnlab explore`` exports one the first time a page
#: asks for it (:class:`ModelFolders`), so both serve the same files at the same URLs.
SITE_MODELS: dict[str, Callable[..., Path]] = {
    # ja-en with its encoder's optional outputs (ENCODER_TAPS): §7's token walk prints them.
    "ja-en": functools.partial(export_translator_onnx, taps=True),
    "demo": export_translator_onnx,  # the engine's check page (static/engine/check.html)
    "rnn-plain": export_rnn_translator_onnx,  # §2 bottleneck
    "rnn-attention": export_rnn_translator_onnx,  # §2 bottleneck, §3 additive-vs-dot
    "facts-summarizer": export_summarizer_onnx,  # §9 summary
    "shakespeare-char": export_gpt_onnx,  # §7's next-token chart and §9's decoder-only widget
    "digits-vit": export_vit_onnx,
    "karate-gat": export_gat_onnx,
    "minilm": export_minilm_views,  # §4 pronoun, §5 heads: MiniLM's views of the page's sentences
    "shakespeare-mlm": export_bert_onnx,  # §9 masked LM
    "facts-qa": functools.partial(export_bert_onnx, extra=lambda: {"examples.json": _qa_examples()}),  # §9 QA
    "ja-sentence-type": export_classifier_onnx,  # §8 attention pooling
}


def _qa_examples() -> list[dict]:
    """§9's question-answering examples (held-out passages with their questions), for the page."""
    from .lesson.s09_transformers_at_work import qa_examples

    return qa_examples()


def _parallel_steps(out: Path) -> Path:
    from .lesson.s01_what_attention_does import write_steps_data

    return write_steps_data(out)


def _bottleneck_test(out: Path) -> Path:
    from .lesson.s02_seq2seq_bottleneck import write_bottleneck_test

    return write_bottleneck_test(out)


def _bleu_by_length(out: Path) -> Path:
    from .lesson.s02_seq2seq_bottleneck import write_bleu_by_length

    return write_bleu_by_length(out)


def _pooling_sentences(out: Path) -> Path:
    from .lesson.s08_variants_and_exercises import write_pooling_sentences

    return write_pooling_sentences(out)


def _summary_examples(out: Path) -> Path:
    from .lesson.s09_transformers_at_work import write_summary_examples

    return write_summary_examples(out)


#: The lesson's data files: ``data/NAME.json`` → the function that writes it (called as
#: ``write(out_path)``), for what the page reads rather than computes: measurements of PyTorch on
#: a machine (labelled with it) and test sets. The static build writes each of them; ``attnlab
#: explore`` writes one the first time a page asks for it (:class:`DataFiles`).
SITE_DATA: dict[str, Callable[[Path], Path]] = {
    "parallel-steps.json": _parallel_steps,  # §1: training-step and encoder times, RNN vs Transformer
    "bottleneck-test.json": _bottleneck_test,  # §2: the RNN pair's test pairs (the long examples, references)
    "bleu-by-length.json": _bleu_by_length,  # §2: both RNNs' BLEU by source length on those pairs
    "summary-examples.json": _summary_examples,  # §9: the documents the summarizer never saw
    # §8: the pooling widget's sentences with MeCab's markers (MeCab cannot run in a page); the
    # classifier's held-out test sentences among them where the corpus is found (ATTNLAB_DATA).
    "pooling-sentences.json": _pooling_sentences,
}


class DataFiles:
    """The explorer's ``static/data/NAME`` files: each of ``files`` (default :data:`SITE_DATA`)
    written the first time it is asked for, into a temporary folder of this process (removed at
    exit), and kept. Thread-safe: one writer per file, whoever asks first.

    Shape:
        no tensors.
    """

    def __init__(self, files: dict[str, Callable[[Path], Path]] | None = None) -> None:
        self.files = dict(SITE_DATA if files is None else files)
        self._root: Path | None = None
        self._locks = {name: threading.Lock() for name in self.files}
        self._lock = threading.Lock()

    def file(self, name: str) -> Path:
        """The written file ``name``, writing it first if this process has not yet.

        Raises:
            KeyError: ``name`` is not one of the data files (the message lists them).

        Shape:
            no tensors; returns a file.
        """
        if name not in self.files:
            raise KeyError(f"no data file {name[:40]!r}; the data files are {sorted(self.files)}")
        with self._lock:
            if self._root is None:
                self._root = Path(tempfile.mkdtemp(prefix="attnlab-site-data-"))
                atexit.register(shutil.rmtree, self._root, True)
        out = self._root / name
        with self._locks[name]:
            if not out.is_file():
                work = self._root / f".{name}.partial"
                self.files[name](work)
                work.replace(out)
        return out


def write_site_data(dest: str | Path, names: Sequence[str] | None = None) -> list[Path]:
    """Write the data files ``names`` (default: all of :data:`SITE_DATA`) as ``dest/NAME`` (the
    static build's ``static/data/`` folder).

    Raises:
        KeyError: a name that is not in :data:`SITE_DATA`.

    Shape:
        no tensors; returns the files.
    """
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    wanted = list(SITE_DATA) if names is None else list(names)
    unknown = [n for n in wanted if n not in SITE_DATA]
    if unknown:
        raise KeyError(f"no data files {unknown}; the site's data files are {sorted(SITE_DATA)}")
    return [SITE_DATA[name](out / name) for name in wanted]


class ModelFolders:
    """The explorer's ``static/models/NAME/`` folders: each model of ``models`` (default
    :data:`SITE_MODELS`) is exported the first time one of its files is asked for, into a
    temporary folder of this process (removed at exit), so the explorer serves what the static
    build writes without a build step. Thread-safe: one export per model, whoever asks first.

    Shape:
        no tensors.
    """

    def __init__(self, models: dict[str, Callable[..., Path]] | None = None, *, weights: str = "auto") -> None:
        self.models = dict(SITE_MODELS if models is None else models)
        self.weights = weights
        self._root: Path | None = None
        self._locks = {name: threading.Lock() for name in self.models}
        self._lock = threading.Lock()

    def _base(self) -> Path:
        with self._lock:
            if self._root is None:
                self._root = Path(tempfile.mkdtemp(prefix="attnlab-site-models-"))
                atexit.register(shutil.rmtree, self._root, True)
            return self._root

    def folder(self, name: str) -> Path:
        """The exported folder of ``name``, exporting it first if this process has not yet.

        Raises:
            KeyError: ``name`` is not one of the in-page models (the message lists them).

        Shape:
            no tensors; returns a folder.
        """
        if name not in self.models:
            raise KeyError(f"no in-page model {name!r}; the in-page models are {sorted(self.models)}")
        out = self._base() / name
        with self._locks[name]:
            if not out.is_dir():
                work = self._base() / f".{name}.partial"
                shutil.rmtree(work, ignore_errors=True)
                self.models[name](name, work, weights=self.weights)
                work.replace(out)
        return out

    def file(self, name: str, filename: str) -> Path:
        """One file of ``name``'s folder (exported first if needed).

        Raises:
            KeyError: no such model, or no such file in its folder (a plain name only: no folders).

        Shape:
            no tensors; returns a file.
        """
        if not _MODEL_NAME.fullmatch(filename) or filename in (".", ".."):
            raise KeyError(f"no file {filename[:40]!r} in model {name!r}")
        path = self.folder(name) / filename
        if not path.is_file():
            raise KeyError(f"no file {filename[:40]!r} in model {name!r}")
        return path


def node_modules_runtime(repo: Path = REPO) -> Path:
    """The folder of onnxruntime-web's built files in ``repo``'s ``node_modules``.

    Raises:
        FileNotFoundError: one of :data:`RUNTIME_FILES` is missing there (npm has not installed it).

    Shape:
        no tensors; returns a folder.
    """
    dist = repo / "node_modules" / "onnxruntime-web" / "dist"
    missing = [name for name in RUNTIME_FILES if not (dist / name).is_file()]
    if missing:
        raise FileNotFoundError(f"onnxruntime-web is not installed in {repo / 'node_modules'}: run `npm ci` in {repo}")
    return dist


def copy_runtime(dest: str | Path, *, repo: Path = REPO) -> list[Path]:
    """Copy onnxruntime-web's WASM runtime (:data:`RUNTIME_FILES`) into ``dest``.

    Raises:
        FileNotFoundError: onnxruntime-web is not in ``node_modules`` (the message names ``npm ci``).

    Shape:
        no tensors; returns the copied files.
    """
    dist = node_modules_runtime(repo)
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy2(dist / name, out / name)) for name in RUNTIME_FILES]


def write_engine_folder(
    dest: str | Path, models: Sequence[str | Path] = ("demo",), *, weights: str = "auto", repo: Path = REPO
) -> Path:
    """Write the plain static folder of the in-page engine (the layout in the module's docstring):
    the engine's modules under ``engine/``, the runtime under ``vendor/onnxruntime-web/`` and each
    translator of ``models`` (a shipped name or a model folder) under ``models/NAME/``.

    Raises:
        FileNotFoundError: onnxruntime-web is not installed (run ``npm ci``).
        FileExistsError: ``dest`` exists and is not empty.
        ValueError: two models of one name, a name that is not ``[A-Za-z0-9_.-]+`` (or is ``.``,
            ``..``), or a model the ONNX export cannot express. Nothing is left in ``dest`` then:
            the folder is written beside it and renamed into place at the end.

    Shape:
        no tensors; returns ``dest``.
    """
    out = Path(dest)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty: give a new folder")
    names = [Path(str(m)).name for m in models]
    if len(set(names)) != len(names):
        raise ValueError(f"two models share a name in {names}: each gets models/NAME/")
    bad = [n for n in names if not _MODEL_NAME.fullmatch(n) or n in (".", "..")]
    if bad:
        raise ValueError(f"not a model name the page can load: {bad} (letters, digits, _ . - only)")
    node_modules_runtime(repo)  # before exporting anything: the missing runtime is the quick error
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (work / "engine").mkdir()
        for name in ENGINE_FILES:
            shutil.copy2(ENGINE_DIR / name, work / "engine" / name)
        copy_runtime(work / "vendor" / "onnxruntime-web", repo=repo)
        for model, name in zip(models, names):
            # A model of SITE_MODELS by its own exporter (the GPT, ViT, GAT); a folder is a translator's.
            export = SITE_MODELS.get(str(model), export_translator_onnx)
            export(model, work / "models" / name, weights=weights)
        work.replace(out)  # an empty dest is replaced; a failed build leaves none of it there
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return out


class _Handler(SimpleHTTPRequestHandler):
    """Python's plain static file handler, quiet, with optional extra headers on every answer."""

    extra_headers: dict[str, str] = {}
    pretty = False  # answer /lesson/3 with lesson/3.html, as GitHub Pages and Netlify do
    # .mjs is not in every system's MIME table; a module script must come as JavaScript.
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".mjs": "text/javascript", ".wasm": "application/wasm"}

    def translate_path(self, path: str) -> str:
        local = super().translate_path(path)
        if self.pretty and not Path(local).exists() and Path(local + ".html").is_file():
            return local + ".html"
        return local

    def end_headers(self) -> None:
        for key, value in self.extra_headers.items():
            self.send_header(key, value)
        super().end_headers()

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base class's name)
        pass


@contextlib.contextmanager
def serve_folder(folder: str | Path, *, headers: dict[str, str] | None = None, pretty: bool = False) -> Iterator[str]:
    """Serve ``folder`` with Python's ``http.server`` (a plain static host) on a free loopback port,
    in a thread, while the ``with`` block runs; ``headers`` (e.g. :data:`ISOLATION_HEADERS`) are
    added to every answer. ``pretty``: an address without its ``.html`` finds the page
    (``/lesson/3`` → ``lesson/3.html``), as GitHub Pages and Netlify serve a folder.

    Raises:
        FileNotFoundError: ``folder`` is not a folder.

    Shape:
        no tensors; yields the base URL, ``http://127.0.0.1:PORT/``.
    """
    root = Path(folder).resolve()  # the server's directory must not follow a later chdir
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder to serve")
    handler = type("Handler", (_Handler,), {"extra_headers": dict(headers or {}), "pretty": pretty})
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
