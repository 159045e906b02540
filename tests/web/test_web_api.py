"""The explorer's JSON API: numbers equal attnlab's own, bad input gets a clear 4xx, work is bounded."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import threading
import time
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient  # noqa: E402

from attnlab import functional as AF  # noqa: E402
from attnlab.cli import main as cli_main  # noqa: E402
from attnlab.explain import compute_steps  # noqa: E402
from attnlab.web.app import STATIC_DIR, create_app  # noqa: E402
from attnlab.web.models import ModelRun, load_explorer_model  # noqa: E402
from attnlab.web.security import Limits  # noqa: E402

# The explorer answers only the Host names of its address (DNS rebinding); TestClient's default
# Host is "testserver", so the in-process clients name the loopback address instead.
LOCAL = "http://127.0.0.1:8000"


# --------------------------------------------------------------------------------------------
# A tiny real translator, trained for a few steps (shared with the fuzz and browser tests).
# --------------------------------------------------------------------------------------------


def train_tiny_translator(out: Path, steps: int = 40, arch: str = "transformer") -> Path:
    """Train the "tiny" recipe on generated number pairs; returns the checkpoint folder."""
    from attnlab.data.tasks import make_splits
    from attnlab.recipes.translate import PRESETS, train_translation
    from attnlab.train import TrainConfig

    splits = make_splits("numbers-en-ja", 300, 8, 0, seed=0)
    setup = dataclasses.replace(
        PRESETS["tiny"],
        arch=arch,
        eval_sentences=4,
        metric="loss",
        train=TrainConfig(
            out_dir=str(out), max_steps=steps, epochs=100, lr=3e-3, warmup_steps=10, log_every=1000, progress=False
        ),
    )
    train_translation(setup, splits.train, splits.valid)
    return out


@pytest.fixture(scope="module")
def translator_dir(tmp_path_factory) -> Path:
    return train_tiny_translator(tmp_path_factory.mktemp("tiny-translator"))


@pytest.fixture(scope="module")
def client(translator_dir) -> TestClient:
    return TestClient(create_app([load_explorer_model(translator_dir)]), base_url=LOCAL)


class BlockingModel:
    """A stand-in model whose run() waits until the test releases it (to fill the work slots)."""

    kind = "translator"

    def __init__(self, name: str = "blocking") -> None:
        self.name = name
        self.started = threading.Event()
        self.release = threading.Event()

    def run(self, text: str) -> ModelRun:
        self.started.set()
        self.release.wait(10)
        return ModelRun(output=text, tokens={"src": ["a"]}, attentions={"self": torch.ones(1, 1, 1, 1)})


# --------------------------------------------------------------------------------------------
# Playground: the numbers are attnlab's.
# --------------------------------------------------------------------------------------------

PLAYGROUND_CASES = [
    {"scores": [8, 4, 2], "d_k": 64, "scale": True},
    {"scores": [8, 4, 2], "d_k": 1024, "scale": False},
    {"scores": [-3.5, 0.25, 9.75], "d_k": 1, "scale": True, "values": [[1, 2], [3, -4], [0.5, 0]]},
    {"query": [1, 2, 0, 1], "keys": [[2, 1, 0, 1], [0, 1, 1, 0], [1, 0, 2, -1]], "scale": True},
    {"query": [0.3], "keys": [[1], [2], [3], [4]], "scale": False, "values": [[1], [2], [3], [4]]},
]


@pytest.mark.parametrize("body", PLAYGROUND_CASES)
def test_playground_equals_compute_steps(client, body):
    r = client.post("/api/playground", json=body)
    assert r.status_code == 200, r.text
    got = r.json()
    rows = lambda m: None if m is None else [",".join(str(float(x)) for x in row) for row in m]  # noqa: E731
    steps = compute_steps(
        body.get("scores"),
        query=body.get("query"),
        keys=rows(body.get("keys")),
        values=rows(body.get("values")),
        d_k=body.get("d_k", 64),
        scale=body["scale"],
    )
    for name in ("raw", "scaled", "weights", "output"):
        torch.testing.assert_close(torch.tensor(got[name], dtype=torch.float64), getattr(steps, name), rtol=0, atol=0)
    assert got["d_k"] == steps.d_k


@pytest.mark.parametrize("body", PLAYGROUND_CASES)
def test_playground_matches_the_formula(client, body):
    """Independent of attnlab: softmax(q·k / √d_k) with torch.softmax, mixed values by hand."""
    got = client.post("/api/playground", json=body).json()
    if "scores" in body:
        raw = torch.tensor(body["scores"], dtype=torch.float64)
        d_k = body["d_k"]
    else:
        raw = torch.tensor(body["keys"], dtype=torch.float64) @ torch.tensor(body["query"], dtype=torch.float64)
        d_k = len(body["query"])
    factor = 1 / math.sqrt(d_k) if body["scale"] else 1.0
    weights = torch.softmax(raw * factor, dim=0)
    values = torch.tensor(body.get("values") or torch.eye(len(raw)).tolist(), dtype=torch.float64)
    torch.testing.assert_close(torch.tensor(got["raw"], dtype=torch.float64), raw)
    torch.testing.assert_close(torch.tensor(got["weights"], dtype=torch.float64), weights)
    torch.testing.assert_close(torch.tensor(got["output"], dtype=torch.float64), weights @ values)
    assert got["factor"] == pytest.approx(factor)
    assert sum(got["weights"]) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "body, pattern",
    [
        ({"scores": [1, 2], "d_k": 0}, r"d_k.*greater than or equal to 1"),
        ({"scores": [1, 2], "d_k": 1025}, r"d_k.*less than or equal to 1024"),
        ({"scores": [1, 2], "d_k": "wide"}, r"d_k.*valid integer"),
        ({"scores": [1e5]}, r"scores.*less than or equal to 10000"),
        ({"scores": [1.0] * 17}, r"scores.*at most 16"),
        ({"scores": []}, r"scores.*at least 1"),
        ({"scores": [1], "colour": "red"}, r"colour.*Extra inputs"),
        ({"query": [1, 2], "keys": [[1, 2, 3]]}, r"query has 2 numbers but each key has 3"),
        ({"query": [1, 2]}, r"--query and --keys together"),
        ({"scores": [1, 2], "values": [[1], [2], [3]]}, r"3 value vectors for 2 keys"),
        ({"scores": [1], "query": [1], "keys": [[1]]}, r"either --scores or --query"),
        ({"query": [1], "keys": [[1], [1, 2]]}, r"same length"),
    ],
)
def test_playground_bad_input_is_422_with_a_message(client, body, pattern):
    r = client.post("/api/playground", json=body)
    assert r.status_code == 422, r.text
    assert re.search(pattern, json.dumps(r.json()["detail"], ensure_ascii=False)), r.text


@pytest.mark.parametrize("raw", [b'{"scores": [NaN]}', b'{"scores": [Infinity]}', b'{"scores": [1e400]}'])
def test_playground_rejects_non_finite_numbers(client, raw):
    r = client.post("/api/playground", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert "finite" in r.text


@pytest.mark.parametrize("path", ["/api/playground", "/api/mask", "/api/run"])
@pytest.mark.parametrize("raw", [b"{bad", b'{"scores": [1, 2]', b"\xff\xfe"])
def test_malformed_json_is_400(client, path, raw):
    r = client.post(path, content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert r.json()["detail"].startswith("malformed JSON")


def test_body_over_the_limit_is_413(client):
    r = client.post(
        "/api/playground", content=b"[" + b"1," * 40000 + b"1]", headers={"content-type": "application/json"}
    )
    assert r.status_code == 413
    assert "larger than" in r.json()["detail"]


# --------------------------------------------------------------------------------------------
# Masks: built by the helpers.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"length": 6, "causal": True},
        {"length": 6, "causal": False, "padding": 2},
        {"length": 7, "causal": True, "window": 3, "window_causal": True, "padding": 1},
        {"length": 5, "key_length": 9, "causal": True, "window": 4, "window_causal": False},
        {"length": 4, "causal": False},
    ],
)
def test_masks_equal_the_helpers(client, body):
    r = client.post("/api/mask", json=body)
    assert r.status_code == 200, r.text
    got = r.json()
    T = body["length"]
    S = body.get("key_length", T)
    expected = torch.ones(T, S, dtype=torch.bool)
    if body.get("causal"):
        expected &= AF.causal_mask(T, S)
        assert got["parts"]["causal"] == AF.causal_mask(T, S).tolist()
    if body.get("window"):
        window = AF.sliding_window_mask(T, S, window=body["window"], causal=body.get("window_causal", True))
        expected &= window
        assert got["parts"]["window"] == window.tolist()
    if body.get("padding"):
        keep = AF.padding_mask(torch.tensor([S - body["padding"]]), max_len=S)  # (1, S)
        expected &= keep
        assert got["parts"]["padding"] == keep.expand(T, S).tolist()
    assert got["mask"] == expected.tolist()
    # Equal scores: uniform weights over the allowed keys, zeros elsewhere.
    allowed = expected.double()
    uniform = allowed / allowed.sum(-1, keepdim=True).clamp(min=1)
    torch.testing.assert_close(torch.tensor(got["weights"], dtype=torch.float64), uniform)


def test_toggled_cells_flip_the_mask_and_an_empty_row_gets_zero_weights(client):
    r = client.post("/api/mask", json={"length": 3, "causal": True, "toggled": [[0, 0], [2, 1], [0, 2]]})
    got = r.json()
    assert got["mask"] == [[False, False, True], [True, True, False], [True, False, True]]
    r = client.post("/api/mask", json={"length": 3, "causal": True, "toggled": [[0, 0]]})
    assert r.json()["weights"][0] == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "body, status, pattern",
    [
        ({"length": 0}, 422, r"greater than or equal to 1"),
        ({"length": 33}, 422, r"less than or equal to 32"),
        ({"length": 4, "window": 0}, 422, r"window"),
        ({"length": 4, "padding": 5}, 422, r"padding=5 is more than the 4 keys"),
        ({"length": 4, "toggled": [[0, 4]]}, 422, r"\[0, 4\] is outside the 4×4 grid"),
        ({"length": 4, "toggled": [[-1, 0]]}, 422, r"greater than or equal to 0"),
        ({"length": 4, "toggled": [[1, 2, 3]]}, 422, r"toggled"),
    ],
)
def test_mask_bad_input(client, body, status, pattern):
    r = client.post("/api/mask", json=body)
    assert r.status_code == status, r.text
    assert re.search(pattern, json.dumps(r.json()["detail"], ensure_ascii=False)), r.text


# --------------------------------------------------------------------------------------------
# Models: only those named at start-up; the maps are the model's own.
# --------------------------------------------------------------------------------------------


def test_models_lists_the_startup_models(client, translator_dir):
    assert client.get("/api/models").json() == [
        {"name": translator_dir.name, "kind": "translator", "description": None, "examples": []}
    ]


def test_run_translates_and_returns_every_map(client, translator_dir):
    from attnlab.loading import load_model

    text = "three hundred"
    r = client.post("/api/run", json={"model": translator_dir.name, "text": text})
    assert r.status_code == 200, r.text
    got = r.json()
    reference = load_model(translator_dir, family="translate").translate([text], return_attention=True)[0]
    assert got["output"] == reference.text
    assert got["tokens"]["src"] == reference.src_tokens
    assert got["tokens"]["tgt"] == reference.tgt_tokens
    assert got["tokens"]["tgt_in"][0] == "[BOS]" and got["tokens"]["tgt_in"][1:] == reference.tgt_tokens[:-1]
    S, T = len(reference.src_tokens), len(reference.tgt_tokens)
    shapes = {g["name"]: (g["layers"], g["heads"], g["rows"], g["cols"]) for g in got["groups"]}
    assert shapes == {
        "encoder_self": (1, 2, "src", "src"),
        "decoder_self": (1, 2, "tgt", "tgt_in"),
        "cross": (1, 2, "tgt", "src"),
    }
    for name, size in (("encoder_self", (1, 2, S, S)), ("decoder_self", (1, 2, T, T)), ("cross", (1, 2, T, S))):
        weights = torch.tensor(got["attentions"][name], dtype=torch.float64)
        assert weights.shape == size
        torch.testing.assert_close(weights.sum(-1), torch.ones(size[:-1], dtype=torch.float64), atol=1e-4, rtol=0)
    # The teacher-forced pass reproduces the cross-attention of incremental decoding.
    torch.testing.assert_close(
        torch.tensor(got["attentions"]["cross"], dtype=torch.float64),
        reference.cross_attention.double(),
        atol=1e-4,
        rtol=0,
    )
    # Decoder self-attention is causal: row i sees inputs 0..i only.
    dec = torch.tensor(got["attentions"]["decoder_self"])
    assert torch.all(dec.masked_select(~AF.causal_mask(T, T)) == 0)


@pytest.mark.parametrize(
    "body, status, pattern",
    [
        ({"model": "nope", "text": "one"}, 404, r"unknown model 'nope'; available: "),
        ({"model": "/tmp", "text": "one"}, 404, r"unknown model '/tmp'"),
        ({"model": "../tiny", "text": "one"}, 404, r"unknown model"),
        ({"model": "M", "text": "x" * 401}, 422, r"at most 400 characters"),
        ({"model": "M", "text": ""}, 422, r"at least 1 character"),
        ({"model": "M", "text": "   "}, 422, r"text is empty"),
        ({"model": "M"}, 422, r"text.*Field required"),
        ({"model": "M", "text": 3}, 422, r"valid string"),
        ({"model": "M", "text": "one", "path": "/etc"}, 422, r"path.*Extra inputs"),
    ],
)
def test_run_bad_input(client, translator_dir, body, status, pattern):
    if body.get("model") == "M":
        body = dict(body, model=translator_dir.name)
    r = client.post("/api/run", json=body)
    assert r.status_code == status, r.text
    assert re.search(pattern, json.dumps(r.json()["detail"], ensure_ascii=False)), r.text


def test_text_limit_follows_the_limits_and_the_schema():
    app = create_app([BlockingModel()], limits=Limits(max_text_chars=10))
    schema = TestClient(app, base_url=LOCAL).get("/openapi.json").json()["components"]["schemas"]
    assert schema["RunRequest"]["properties"]["text"]["maxLength"] == 10
    assert schema["PlaygroundRequest"]["properties"]["d_k"]["maximum"] == 1024
    r = TestClient(app, base_url=LOCAL).post("/api/run", json={"model": "blocking", "text": "x" * 11})
    assert r.status_code == 422 and "at most 10 characters" in r.text


def test_model_errors_for_unusable_input_are_422(translator_dir):
    class Picky(BlockingModel):
        def run(self, text):
            raise ValueError(f"cannot translate {text!r}: it has no tokens")

    r = TestClient(create_app([Picky("picky")]), base_url=LOCAL).post("/api/run", json={"model": "picky", "text": "?"})
    assert r.status_code == 422 and r.json()["detail"] == "cannot translate '?': it has no tokens"


def _post_in_thread(client, body, results):
    t = threading.Thread(target=lambda: results.append(client.post("/api/run", json=body)))
    t.start()
    return t


def test_saturated_model_work_is_429_busy_not_a_hang_or_a_5xx():
    model = BlockingModel()
    app = create_app([model], limits=Limits(max_concurrent=1, max_waiting=0))
    with TestClient(app, base_url=LOCAL) as c:
        results: list = []
        first = _post_in_thread(c, {"model": "blocking", "text": "a"}, results)
        assert model.started.wait(5)
        busy = c.post("/api/run", json={"model": "blocking", "text": "b"})
        assert busy.status_code == 429  # the class is busy: the page retries (common.js)
        assert busy.headers["retry-after"] == "1"
        assert "already waiting" in busy.json()["detail"]
        model.release.set()
        first.join(10)
    assert results[0].status_code == 200


def test_queued_request_gives_up_after_the_timeout():
    model = BlockingModel()
    app = create_app([model], limits=Limits(max_concurrent=1, max_waiting=4, wait_timeout_s=0.3))
    with TestClient(app, base_url=LOCAL) as c:
        results: list = []
        first = _post_in_thread(c, {"model": "blocking", "text": "a"}, results)
        assert model.started.wait(5)
        start = time.monotonic()
        late = c.post("/api/run", json={"model": "blocking", "text": "b"})
        assert late.status_code == 429 and "within 0.3 s" in late.json()["detail"]
        assert time.monotonic() - start < 5
        model.release.set()
        first.join(10)
    assert results[0].status_code == 200


# --------------------------------------------------------------------------------------------
# Pages, assets, loading, the command.
# --------------------------------------------------------------------------------------------


def test_pages_and_assets_are_served(client):
    for path in ("/", "/lesson/3", "/playground", "/model", "/masks"):
        r = client.get(path)
        assert r.status_code == 200 and "text/html" in r.headers["content-type"]
        assert 'class="lang-switch"' not in r.text  # the header is built by common.js on every page
        assert "/static/common.js" in r.text and "/static/i18n.js" in r.text
    font = client.get("/fonts/ipaexg.ttf")
    assert font.status_code == 200 and font.headers["content-type"] == "font/ttf"
    assert font.content[:4] in (b"\x00\x01\x00\x00", b"OTTO", b"true")


def test_no_page_that_needs_a_cdn(client):
    assert client.get("/docs").status_code == 404 and client.get("/redoc").status_code == 404
    assert client.get("/openapi.json").json()["info"]["title"] == "attnlab explorer"


def static_files() -> list[Path]:
    """Every text file the explorer serves (the lesson's pages, scripts and sections included)."""
    files = sorted(
        p for p in STATIC_DIR.rglob("*") if p.is_file() and p.suffix in (".html", ".js", ".css", ".svg", ".json")
    )
    assert len(files) > 20
    return files


def test_static_assets_fetch_nothing_from_the_network():
    for path in static_files():
        text = path.read_text(encoding="utf-8")
        urls = set(re.findall(r"(?:https?:)?//[\w.-]+\.[a-z]{2,}[^\s\"')]*", text))
        # XML namespace names (SVG's, and MathML's for the lesson's formulas) identify, never fetch.
        assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1998/Math/MathML"}, (path.name, urls)


def test_every_ui_string_exists_in_both_languages():
    from attnlab.web import i18n  # the catalogs strings/{en,ja}.yaml, served as /static/i18n.js

    en_keys, ja_keys = set(i18n.catalog("en")), set(i18n.catalog("ja"))
    assert en_keys == ja_keys and len(en_keys) > 80
    used = set()
    for path in static_files():
        source = path.read_text(encoding="utf-8")
        used |= set(re.findall(r'data-i18n="([\w-]+)"', source))
        used |= set(re.findall(r'\bt\("([\w-]+)"', source))
        used |= set(re.findall(r':([\w-]+)"', " ".join(re.findall(r'data-i18n-attr="[^"]+"', source))))
    # Keys built at run time ("group_" + name) are checked as prefixes.
    prefixes = {k for k in used if k.endswith("_")}
    assert prefixes and all(any(key.startswith(p) for key in en_keys) for p in prefixes)
    assert used - prefixes <= en_keys, (used - prefixes) - en_keys


def test_load_explorer_model_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="model directory not found"):
        load_explorer_model(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="config.json not found"):
        load_explorer_model(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "telepathy"}')
    with pytest.raises(ValueError, match="no adapter for model_type 'telepathy'"):
        load_explorer_model(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": ')
    with pytest.raises(ValueError, match=r"config.json:1: not valid JSON"):
        load_explorer_model(tmp_path)


def test_a_training_folder_resolves_to_its_best_checkpoint(translator_dir):
    model = load_explorer_model(translator_dir)
    assert model.name == translator_dir.name and model.kind == "translator"


def test_model_run_checks_shapes_against_tokens():
    with pytest.raises(ValueError, match=r"tokens\['src'\] has 2 entries"):
        ModelRun(output="", tokens={"src": ["a", "b"]}, attentions={"self": torch.ones(1, 1, 3, 3)})
    with pytest.raises(ValueError, match="unknown attention group"):
        ModelRun(output="", tokens={"src": ["a"]}, attentions={"sideways": torch.ones(1, 1, 1, 1)})


def test_explore_command_refuses_a_bad_model_before_serving(tmp_path, capsys):
    assert cli_main(["explore", "--model", str(tmp_path / "nowhere"), "--port", "1"]) == 2
    assert "model directory not found" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# GPT and BERT through the same page and API.
# --------------------------------------------------------------------------------------------

LM_TEXT = " ".join(["the cat sat on the mat and the dog sat on the log."] * 40)


@pytest.fixture(scope="module")
def lm_dirs(tmp_path_factory) -> dict[str, Path]:
    from attnlab.recipes.lm import LM_PRESETS, MLM_PRESETS, train_lm, train_mlm

    out = {}
    for name, recipes, train_fn in (("gpt", LM_PRESETS, train_lm), ("bert", MLM_PRESETS, train_mlm)):
        setup = recipes["tiny"]
        out[name] = tmp_path_factory.mktemp(f"tiny-{name}")
        train_cfg = dataclasses.replace(setup.train, out_dir=str(out[name]), max_steps=15, progress=False)
        train_fn(dataclasses.replace(setup, train=train_cfg), LM_TEXT)
    return out


def test_gpt_continuation_is_greedy_and_its_maps_are_causal(lm_dirs):
    from attnlab.loading import load_model

    model = load_explorer_model(lm_dirs["gpt"])
    assert model.kind == "generator"
    client = TestClient(create_app([model]), base_url=LOCAL)
    got = client.post("/api/run", json={"model": model.name, "text": "the cat"}).json()
    gpt, tok = load_model(lm_dirs["gpt"], family="lm")
    ids = tok.encode("the cat")
    with torch.no_grad():
        for _ in range(len(got["tokens"]["src"]) - len(ids)):  # greedy by hand: full passes, no cache
            ids.append(int(gpt(torch.tensor([ids])).logits[0, -1].argmax()))
    assert got["tokens"]["src"] == [tok.id_to_token(i) for i in ids]
    assert got["output"] == tok.decode(ids[len(tok.encode("the cat")) :])
    weights = torch.tensor(got["attentions"]["self"])  # (L, H, T, T)
    T = len(ids)
    assert weights.shape == (gpt.config.n_layers, gpt.config.n_heads, T, T)
    assert torch.all(weights.masked_select(~AF.causal_mask(T, T)) == 0)


def test_bert_fill_mask_and_embedding(lm_dirs):
    from attnlab.loading import load_model
    from attnlab.models.bert import sentence_embeddings

    model = load_explorer_model(lm_dirs["bert"])
    client = TestClient(create_app([model]), base_url=LOCAL)
    bert, tok = load_model(lm_dirs["bert"], family="lm")
    got = client.post("/api/run", json={"model": model.name, "text": "the [MASK] sat"}).json()
    ids = [tok.bos_id] + tok.encode("the ") + [tok.mask_id] + tok.encode(" sat") + [tok.eos_id]
    assert got["tokens"]["src"] == [tok.id_to_token(i) for i in ids]
    with torch.no_grad():
        logits = bert(torch.tensor([ids])).logits[0, ids.index(tok.mask_id)]  # (V,)
    best = tok.id_to_token(int(logits.argmax()))
    assert got["output"].startswith(f"[MASK] 1: {best} ({float(logits.softmax(-1).max()):.2f})")
    S = len(ids)
    assert torch.tensor(got["attentions"]["self"]).shape == (bert.config.n_layers, bert.config.n_heads, S, S)
    plain = client.post("/api/run", json={"model": model.name, "text": "the cat"}).json()
    vec = sentence_embeddings(bert, tok, ["the cat"])[0]
    assert plain["output"].startswith(f"embedding ({vec.numel()} numbers, length 1.000): [{vec[0]:.3f}, ")


def test_packaged_minilm_by_name():
    model = load_explorer_model(Path("minilm"))
    assert (model.name, model.kind) == ("minilm", "encoder")
    client = TestClient(create_app([model]), base_url=LOCAL)
    got = client.post("/api/run", json={"model": "minilm", "text": "A cat sits."}).json()
    assert got["tokens"]["src"][0] == "[CLS]" and got["tokens"]["src"][-1] == "[SEP]"
    weights = torch.tensor(got["attentions"]["self"])
    assert weights.shape[:2] == (6, 12)
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-4, rtol=0)


def test_rnn_translator_shows_its_single_cross_attention_map(tmp_path):
    from attnlab.loading import load_model

    model = load_explorer_model(train_tiny_translator(tmp_path / "rnn", steps=10, arch="rnn"))
    assert model.kind == "rnn-translator"
    got = TestClient(create_app([model]), base_url=LOCAL).post("/api/run", json={"model": "rnn", "text": "five"}).json()
    reference = load_model(tmp_path / "rnn", family="translate").translate(["five"], return_attention=True)[0]
    assert got["output"] == reference.text
    assert [g["name"] for g in got["groups"]] == ["cross"]
    torch.testing.assert_close(
        torch.tensor(got["attentions"]["cross"], dtype=torch.float64),
        reference.cross_attention.double(),
        atol=1e-4,
        rtol=0,
    )
