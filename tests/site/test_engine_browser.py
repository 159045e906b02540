"""The page's engine in a real browser: the static folder ``attnlab.web.site.write_engine_folder``
writes, served by Python's ``http.server`` (a plain static host: no cross-origin isolation, so
single-threaded WASM), opened in headless Chromium, then the network cut; the translators run
there through onnxruntime-web and the engine's own JavaScript must give what :mod:`attnlab.decode`
gives on the PyTorch model.

- The folder: the engine, onnxruntime-web's WASM runtime (no WebGL/WebGPU/JSEP builds) and the
  models; the page fetches nothing outside it, and runs one thread.
- Decoding (``engine/check.html``'s ``engineCheck.run``): the decode fixtures of
  :func:`attnlab.export_onnx.write_decode_fixture`, greedy and beam 4 ids identical, beam scores
  within 1e-4: the demo on its sentences, ja-en and en-ja on 50 sentences of small_parallel_enja's
  test split (``ATTNLAB_DATA``, default ``../shared/data``) in the default browser run, and on
  1,000 (its test and dev splits: the test split has 500) as ``slow`` tests.
- Attention: for one sentence, the cross-attention rows of greedy and beam 4 and the encoder's
  self-attention equal PyTorch's (``return_attention``, ``encode(need_weights=True)``) within 1e-4.
- Multi-threaded WASM: served with the cross-origin isolation headers, the page runs threads and
  gives the same ids.

The timings of the page are measured by ``benchmarks/site_engine.py``, not here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from lesson_browser import BROWSER_MARKS
from live_server import engine_folder, ensure_runtime, offline_page

from attnlab.data.tasks import make_task
from attnlab.web import site

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("ATTNLAB_DATA", REPO.parent / "shared" / "data"))
SPLIT = DATA / "small_parallel_enja"
MODELS = ("demo", "ja-en", "en-ja")
LANG = {"ja-en": "ja", "en-ja": "en"}
DEMO_SENTENCES = [src for src, _ in make_task("numbers-en-ja", 30, seed=11)]
TOL = 1e-4


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return engine_folder(tmp_path_factory, MODELS)


def ready(page, base: str) -> None:
    """The check page's runtime started (before the network is cut)."""
    page.evaluate("() => window.engineCheck.ready")


@pytest.fixture(scope="module")
def engine(browser, folder):
    """The check page with every model loaded, then offline: (page, errors, requested URLs, base)."""

    def load(page, base):
        ready(page, base)
        for name in MODELS:
            page.evaluate("(name) => window.engineCheck.load(name)", name)

    with offline_page(browser, folder, "engine/check.html?model=demo", load) as served:
        yield served.page, served.errors, served.requests, served.base


def _fixture(name: str, sentences: list[str], path: Path) -> list[dict]:
    from attnlab.export_onnx import write_decode_fixture

    return json.loads(write_decode_fixture(name, sentences, path).read_text(encoding="utf-8"))


def _check_decoding(page, name: str, sentences: list[str], path: Path) -> None:
    """The page decodes ``sentences`` with ``name`` as attnlab.decode does on the PyTorch model."""
    from attnlab.export_onnx import translator_alpha

    fixture = _fixture(name, sentences, path)
    records = [{"text": r["text"]} for r in fixture]
    run = "([name, records, opts]) => window.engineCheck.run(name, records, opts)"
    greedy = page.evaluate(run, [name, records, {"beam": 1}])
    beam = page.evaluate(run, [name, records, {"beam": 4, "alpha": translator_alpha()}])
    assert len(greedy) == len(beam) == len(fixture) == len(sentences)
    for want, g, b in zip(fixture, greedy, beam):
        text = want["text"]
        assert g["src_ids"] == want["src_ids"], f"{name} {text!r}: source ids {g['src_ids']} != {want['src_ids']}"
        assert g["ids"] == want["greedy"], f"{name} {text!r}: greedy {g['ids']} != {want['greedy']}"
        assert b["ids"] == want["beam4"], f"{name} {text!r}: beam 4 {b['ids']} != {want['beam4']}"
        assert b["score"] == pytest.approx(want["beam4_score"], abs=TOL), f"{name} {text!r}: beam 4 score"


def split_sentences(lang: str, n: int) -> list[str]:
    """``n`` sentences of small_parallel_enja in ``lang``: the test split spread evenly (its short
    and long sentences alike), then the dev split where ``n`` is more than the test split's 500."""
    lines = []
    for split in ("test", "dev"):
        path = SPLIT / f"{split}.{lang}"
        if not path.is_file():
            pytest.skip(f"needs {path} (set ATTNLAB_DATA to the corpora folder)")
        lines += [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        if split == "test" and n <= len(lines):
            return lines[:: len(lines) // n][:n]
    assert len(lines) >= n, f"small_parallel_enja has {len(lines)} {lang} sentences in test + dev, not {n}"
    return lines[:n]


# ---------------------------------------------------------------------------------------------


def test_runtime_missing_names_npm_ci(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"run `npm ci` in"):
        site.copy_runtime(tmp_path / "out", repo=tmp_path)
    with pytest.raises(FileNotFoundError, match=r"run `npm ci` in"):
        site.write_engine_folder(tmp_path / "site", ["demo"], repo=tmp_path)
    assert not (tmp_path / "site" / "models").exists(), "nothing is exported before the runtime is found"


def test_bad_model_names_and_unexportable_models_leave_no_folder(tmp_path):
    for bad in (".", "..", "a b", "x?y", "日本"):
        with pytest.raises(ValueError, match="not a model name"):
            site.write_engine_folder(tmp_path / "site", models=(bad,))
        assert not (tmp_path / "site").exists()
    ensure_runtime()
    (tmp_path / "empty").mkdir()
    # A model folder (not a shipped name, whose own exporter SITE_MODELS names) is a translator's:
    # an RNN's folder is one the Transformer graphs cannot express.
    from attnlab.assets.locate import shipped_model_dir

    with pytest.raises(ValueError, match="recurrent"):
        site.write_engine_folder(tmp_path / "empty", models=(shipped_model_dir("rnn-plain"),))
    assert list((tmp_path / "empty").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"], "the half-written folder beside it is gone"


def browser_test(test):
    """Mark ``test`` as a browser test (skipped without Chromium): all but the test above."""
    for mark in BROWSER_MARKS:
        test = mark(test)
    return test


@browser_test
def test_folder_is_the_engine_the_wasm_runtime_and_the_models(folder):
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    runtime = [f for f in files if f.startswith("vendor/")]
    assert runtime == sorted(f"vendor/onnxruntime-web/{n}" for n in site.RUNTIME_FILES)
    assert not any(k in f for f in runtime for k in ("webgl", "webgpu", "jsep", "jspi", "asyncify"))
    engine_dir = Path(site.__file__).parent / "static" / "engine"
    listing = sorted(f"engine/{p.name}" for p in engine_dir.iterdir() if p.suffix in (".js", ".html"))
    assert {"engine/lessonmath.js", "engine/pytext.js", "engine/check.html"} <= set(listing)
    assert sorted(f for f in files if f.startswith("engine/")) == listing
    for name in MODELS:
        meta = json.loads((folder / "models" / name / "meta.json").read_text(encoding="utf-8"))
        assert meta["format"] == "attnlab.onnx" and meta["name"] == name
        for f in ("encoder.onnx", "decoder.onnx", meta["src_tokenizer"], meta["tgt_tokenizer"]):
            assert f"models/{name}/{f}" in files
    with pytest.raises(FileExistsError, match="not empty"):
        site.write_engine_folder(folder, ["demo"])


@browser_test
def test_page_loads_from_the_folder_alone_single_threaded(engine):
    page, errors, requests, base = engine
    assert page.evaluate("() => [crossOriginIsolated, window.engineCheck.threads]") == [False, 1]
    assert "ready (1 thread)" in page.text_content("#status")
    assert requests and all(url.startswith(base) for url in requests), [u for u in requests if not u.startswith(base)]
    assert any(url.endswith("ort-wasm-simd-threaded.wasm") for url in requests)
    # Offline now: the form translates with what the page holds.
    page.fill("#text", "seven hundred")
    page.click("button[type=submit]")
    page.wait_for_function("() => document.getElementById('output').textContent !== ''")
    assert page.text_content("#output") == "七百"
    assert errors == []


@browser_test
def test_demo_decodes_in_the_browser_as_in_pytorch(engine, tmp_path):
    page, errors, _, _ = engine
    _check_decoding(page, "demo", DEMO_SENTENCES, tmp_path / "demo.json")
    assert errors == []


@browser_test
@pytest.mark.parametrize("name", ["ja-en", "en-ja"])
def test_translators_decode_in_the_browser_as_in_pytorch(engine, name, tmp_path):
    page, errors, _, _ = engine
    _check_decoding(page, name, split_sentences(LANG[name], 50), tmp_path / f"{name}.json")
    assert errors == []


@browser_test
@pytest.mark.slow
@pytest.mark.parametrize("name", ["ja-en", "en-ja"])
def test_translators_decode_1000_sentences_in_the_browser_as_in_pytorch(engine, name, tmp_path):
    page, errors, _, _ = engine
    _check_decoding(page, name, split_sentences(LANG[name], 1000), tmp_path / f"{name}.json")
    assert errors == []


@browser_test
def test_attention_in_the_browser_equals_pytorch(engine):
    """The page's cross-attention rows (greedy and beam 4) and encoder self-attention for one
    sentence equal PyTorch's within 1e-4."""
    from attnlab.decode import beam_search, greedy_decode
    from attnlab.export_onnx import source_ids, translator_alpha
    from attnlab.inference.translate import output_limit
    from attnlab.loading import load_model

    page, errors, _, _ = engine
    name, text = "ja-en", "猫が好きです。"
    translator = load_model(name, family="translate", precision="fp32")
    model, tgt = translator.model, translator.tgt_tok
    ids = source_ids(translator, [text])[0]
    src = torch.tensor([ids])  # (1, S)
    kw = dict(
        bos_id=tgt.bos_id, eos_id=tgt.eos_id, pad_id=tgt.pad_id, max_len=output_limit(len(ids), model.config.max_len)
    )
    alpha = translator_alpha()
    with torch.no_grad():
        want = {
            1: greedy_decode(model, src, return_attention=True, **kw)[0],
            4: beam_search(model, src, beam_size=4, alpha=alpha, return_attention=True, **kw)[0],
        }
        encoder = torch.stack(model.encode(src, need_weights=True)[1]).numpy()  # (Le, 1, H, S, S)
    run = "([name, records, opts]) => window.engineCheck.run(name, records, opts)"
    for beam, hyp in want.items():
        (got,) = page.evaluate(run, [name, [{"text": text}], {"beam": beam, "alpha": alpha, "attention": True}])
        assert got["ids"] == hyp.tokens, f"beam {beam}: {got['ids']} != {hyp.tokens}"
        cross = hyp.cross_attention.numpy()  # (L, H, T, S), the EOS step included
        L, H, T, S = cross.shape
        assert S == len(ids) and T == len(hyp.tokens) + 1
        rows = np.array(got["cross"], dtype=np.float32)  # (T, L·H·S): one row per decoded step
        assert rows.shape == (T, L * H * S)
        page_cross = rows.reshape(T, L, H, S).transpose(1, 2, 0, 3)  # (L, H, T, S)
        np.testing.assert_allclose(page_cross, cross, atol=TOL, rtol=0, err_msg=f"beam {beam} cross-attention")
        assert got["encoder"]["dims"] == list(encoder.shape)
        page_enc = np.array(got["encoder"]["data"], dtype=np.float32).reshape(encoder.shape)
        np.testing.assert_allclose(page_enc, encoder, atol=TOL, rtol=0, err_msg="encoder self-attention")
    assert errors == []


@browser_test
def test_multithreaded_where_the_host_isolates_the_page(browser, folder, tmp_path):
    """Served with COOP/COEP, the page is cross-origin isolated and runs WASM threads; the demo
    decodes as in PyTorch there too."""
    with offline_page(browser, folder, "engine/check.html?model=demo", ready, headers=site.ISOLATION_HEADERS) as served:
        page, errors = served.page, served.errors
        isolated, threads, cores = page.evaluate(
            "() => [crossOriginIsolated, window.engineCheck.threads, navigator.hardwareConcurrency]"
        )
        assert isolated is True
        assert threads == min(4, cores)
        _check_decoding(page, "demo", DEMO_SENTENCES[:10], tmp_path / "demo.json")
        assert errors == []
