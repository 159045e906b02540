"""The character GPT, the digits ViT and the karate-club GAT computed in the page (engine/gpt.js,
vit.js, gat.js over the ONNX exports of :mod:`attnlab.onnx_apps`) in headless Chromium give what
their Python references give: §7's ``next_token_view`` and §9's ``gpt_view``, ``vit_view`` and
``gat_view``, on the widgets' examples and many typed-style inputs.

The folder is the one :func:`attnlab.web.site.write_engine_folder` writes (the engine, the WASM
runtime, the three models), served by Python's ``http.server`` (no cross-origin isolation: one
WASM thread) with the network cut once the models are loaded. Ids, tokens, labels, counts and the
seeded draw must be identical; floats within 1e-4. Run with
``pytest -m browser tests/site/test_site_gpt_browser.py``.
"""

from __future__ import annotations

import random

import pytest
import torch
from lesson_browser import BROWSER_MARKS, shipped
from live_server import engine_folder, offline_page

from attnlab.web import lesson as L
from attnlab.web.lesson import s07_whole_transformer as S7
from attnlab.web.lesson import s09_transformers_at_work as S9

pytestmark = BROWSER_MARKS

MODELS = ("shakespeare-char", "digits-vit", "karate-gat")
TOL = 1e-4
SECTIONS = L.load_sections()


def assert_same(got, want, where: str = "") -> None:
    """Equal structure; floats within TOL; ints, strings, booleans and None exactly equal."""
    if isinstance(want, bool) or want is None or isinstance(want, str):
        assert got == want and type(got) is type(want), f"{where}: {got!r} != {want!r}"
    elif isinstance(want, int):
        assert got == want, f"{where}: {got!r} != {want!r}"
    elif isinstance(want, float):
        assert isinstance(got, (int, float)) and abs(got - want) <= TOL, f"{where}: {got!r} != {want!r}"
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: length {len(got)} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            assert_same(got[k], want[k], f"{where}.{k}")
    else:  # pragma: no cover - the references answer JSON
        raise TypeError(f"{where}: {type(want)}")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    for name in MODELS:
        shipped(name)
    return engine_folder(tmp_path_factory, MODELS)


LOAD = """async (base) => {
    const [gpt, vit, gat] = await Promise.all(
        ["gpt.js", "vit.js", "gat.js"].map((m) => import(base + "engine/" + m)));
    window.apps = { gpt, vit, gat,
        models: { gpt: await gpt.loadGPT(), vit: await vit.loadViT(), gat: await gat.loadGAT() } };
}"""


@pytest.fixture(scope="module")
def engine(browser, folder):
    """A page of the static folder with the three models loaded, then offline: (page, errors)."""
    # The folder's listing: a page of the site that runs nothing itself.
    with offline_page(browser, folder, "engine/", lambda page, base: page.evaluate(LOAD, base)) as served:
        yield served.page, served.errors


@pytest.fixture(scope="module")
def gpt():
    from attnlab.loading import load_model

    return load_model(shipped("shakespeare-char"), family="lm")


def run_js(page, fn: str, reqs: list[dict]) -> list[dict]:
    """``fn`` of the page's modules on each request: ``{"ok": response}`` or ``{"error": message}``."""
    return page.evaluate(
        """async ([fn, reqs]) => {
            const [mod, name] = fn.split(".");
            const model = window.apps.models[mod];
            const out = [];
            for (const req of reqs) {
                try { out.push({ ok: await window.apps[mod][name](model, req) }); }
                catch (err) { out.push({ error: String(err.message) }); }
            }
            return out;
        }""",
        [fn, reqs],
    )


def texts() -> list[str]:
    """The widgets' examples in both languages, the try items' texts, and typed-style lines:
    punctuation, line breaks, characters the model never read, one character, and texts longer
    than the model's 128 characters (truncated)."""
    out = []
    for n in (7, 9):
        for key, value in SECTIONS[n].strings.items():
            if key in ("default_prompt", "gpt_ex_0", "gpt_ex_1"):
                out += [value.en, value.ja]
    rng = random.Random(0)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ ,.;:!?'-\n"
    out += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60))) for _ in range(20)]
    out += [
        "a",
        "Z",
        " ",
        "\n",
        "ROMEO:\nWhat light",
        "To be, or not to be, that is the quest",
        "Café — naïve “quotes” 123",
        "KING 日本 HENRY",
        "x" * 127,
        "ROMEO:\n" + "x" * 200,
        ("Now is the winter of our discontent made glorious summer by this sun of York. " * 3)[:199],
    ]
    return list(dict.fromkeys(t for t in out if t))


def test_next_token_is_next_token_view(engine, gpt):
    page, errors = engine
    model, tok = gpt
    rng = random.Random(1)
    reqs = []
    for i, text in enumerate(texts()):
        reqs.append({"text": text})  # the widget's first request: temperature 1, every token
        reqs.append(
            {
                "text": text,
                "temperature": rng.choice([0.0, 0.1, 0.5, 1.0, 1.3, 2.0]),
                "top_k": rng.choice([None, 1, 2, 3, 5, 10, 20]),
                "sample": True,
                "seed": rng.randint(0, 1_000_000) if i % 2 else i,
            }
        )
    # The widget's sampling buttons at its own settings, seed after seed (state.seed += 1 per draw).
    text = SECTIONS[7].strings["default_prompt"].en
    for temperature in (0.0, 0.5, 1.0, 2.0):
        for top_k in (None, 3, 10):
            for seed in range(6):
                reqs.append({"text": text, "temperature": temperature, "top_k": top_k, "sample": True, "seed": seed})
    got = run_js(page, "gpt.nextToken", reqs)
    assert len(got) == len(reqs) > 120
    drawn = set()
    for req, g in zip(reqs, got):
        want = S7.next_token_view(model, tok, S7.NextTokenRequest(**req)).model_dump()
        assert "ok" in g, (req, g)
        assert [t["id"] for t in g["ok"]["tokens"]] == [t["id"] for t in want["tokens"]], req
        assert_same(g["ok"], want, repr(req))
        if want["sampled"] is not None:
            drawn.add(want["sampled"]["id"])
    assert len(drawn) > 10, "the seeded draws must pick many different characters (the test would miss a fixed draw)"
    assert not errors, errors


def test_next_token_refuses_what_the_reference_refuses(engine, gpt):
    page, _ = engine
    model, tok = gpt
    bad = [
        {"text": ""},
        {"text": "a", "temperature": -0.1},
        {"text": "a", "temperature": 6},
        {"text": "a", "top_k": 0},
        {"text": "a", "top_k": 2.5},
        {"text": "a", "seed": -1},
        {"text": "x" * 1001},
    ]
    got = run_js(page, "gpt.nextToken", bad)
    for req, g in zip(bad, got):
        with pytest.raises(ValueError):
            S7.next_token_view(model, tok, S7.NextTokenRequest(**req))
        assert "error" in g and g["error"], (req, g)


def test_the_gpt_app_is_gpt_view(engine, gpt):
    page, errors = engine
    model, tok = gpt
    reqs = [{"text": t} for t in texts() if len(t) <= S9.MAX_LINE_CHARS]
    got = run_js(page, "gpt.gptApp", reqs)
    for req, g in zip(reqs, got):
        want = S9.gpt_view(model, tok, S9.GPTRequest(**req)).model_dump()
        assert "ok" in g, (req, g)
        assert [c["token"] for c in g["ok"]["candidates"]] == [c["token"] for c in want["candidates"]], req
        assert_same(g["ok"], want, repr(req))
    # What the reference refuses, the page refuses with the same sentence.
    for text in ("日本語だけ", "x" * 201):
        (g,) = run_js(page, "gpt.gptApp", [{"text": text}])
        with pytest.raises(ValueError) as err:
            S9.gpt_view(model, tok, S9.GPTRequest(text=text))
        assert "error" in g
        if len(text) <= S9.MAX_LINE_CHARS:
            assert g["error"] == str(err.value)
    assert not errors, errors


def test_the_vit_app_is_vit_view_on_every_held_out_digit(engine):
    from attnlab.loading import load_model

    page, errors = engine
    loaded = load_model(shipped("digits-vit"), family="vision")
    n = 359
    reqs = [{"index": i} for i in range(n)]
    got = run_js(page, "vit.vitApp", reqs)
    right = 0
    for req, g in zip(reqs, got):
        want = S9.vit_view(loaded, S9.VitRequest(**req)).model_dump()
        assert "ok" in g, (req, g)
        assert_same(g["ok"], want, repr(req))
        probs = torch.tensor(g["ok"]["probs"])
        right += int(probs.argmax()) == want["label"]
    assert right / n > 0.8, "the page's ViT reads most held-out digits right, as the PyTorch model does"
    (g,) = run_js(page, "vit.vitApp", [{"index": n}])
    with pytest.raises(ValueError) as err:
        S9.vit_view(loaded, S9.VitRequest(index=n))
    assert g["error"] == str(err.value)
    assert not errors, errors


def test_the_gat_app_is_gat_view_for_every_member(engine):
    from attnlab.loading import load_model

    page, errors = engine
    loaded = load_model(shipped("karate-gat"), family="graph")
    reqs = [{"node": i} for i in range(34)]
    got = run_js(page, "gat.gatApp", reqs)
    for req, g in zip(reqs, got):
        want = S9.gat_view(loaded, S9.GatRequest(**req)).model_dump()
        assert "ok" in g, (req, g)
        assert [nb["node"] for nb in g["ok"]["neighbours"]] == [nb["node"] for nb in want["neighbours"]]
        assert g["ok"]["predicted"] == want["predicted"]
        assert_same(g["ok"], want, repr(req))
    (g,) = run_js(page, "gat.gatApp", [{"node": 34}])
    with pytest.raises(ValueError) as err:
        S9.gat_view(loaded, S9.GatRequest(node=34))
    assert g["error"] == str(err.value)
    assert not errors, errors
