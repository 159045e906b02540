"""The BERT-style widgets computed in the page (``static/engine/bert.js``, ``static/engine/wordpiece.js``)
equal their Python references, in headless Chromium on the site's own folders, the network cut
after load:

- the WordPiece tokenizer: ids and character offsets identical to attnlab's PretrainedTokenizer
  (HuggingFace ``tokenizers``) for MiniLM's and facts-qa's tokenizer.json, on several hundred
  sentences (tatoeba's English and Japanese when ``ATTNLAB_DATA`` has them, the lesson's sentences,
  and hand-made hard cases: accents, CJK, control characters, special tokens, long words);
- §9's masked LM (``mlmView`` ↔ ``mlm_view``) and question answerer (``qaView`` ↔ ``qa_view``) on the
  widgets' examples and typed-style inputs: tokens, ids, answers and argmaxes identical, every
  number within 1e-4 (the ONNX graphs store the shipped models' fp32 weights exactly), and the
  same refusals for bad input;
- §4's pronoun (``pronounView`` ↔ ``pronoun_view``) and §5's heads (``headsView`` ↔ ``head_view``)
  for every sentence the site carries MiniLM's views of, every pronoun token, several layers,
  heads and query tokens: tokens identical, numbers within 1e-4; a sentence outside them is
  refused with a sentence saying so.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from lesson_browser import BROWSER_MARKS, shipped
from live_server import page_errors

from attnlab.models.bert import encode_with_masks
from attnlab.onnx_bert import MINILM_SENTENCES
from attnlab.web import lesson as L
from attnlab.web import site

pytestmark = BROWSER_MARKS

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("ATTNLAB_DATA", REPO.parent / "shared" / "data"))
NAMES = ("minilm", "shakespeare-mlm", "facts-qa")
TOL = 1e-4
HARD = [
    "Hello, naïve world! Café au lait costs $3.50 — yes?",
    "ÀÉÎÕÜ straße İstanbul ΣΊΣΥΦΟΣ",
    "tab\there\nnew\r\x00null\ufffd\u200bzero\u00a0nbsp",
    "[MASK] and [CLS]x[SEP] [mask]",
    "don't won't it's U.S.A. e-mail 3.14",
    "a" * 120 + " supercalifragilisticexpialidocious",
    "😀 emoji ☃ snow ∑ sum",
    "ﬁ ligature ½ Ⅻ ①",
    "   ",
    "",
    "Ω≈ç√∫˜µ≤≥÷",
    "日本語とEnglish混在テキスト。",
]


def _lines(name: str, n: int) -> list[str]:
    path = DATA / "tatoeba-jpn" / name
    if not path.is_file():
        return []
    return path.read_text(encoding="utf-8").splitlines()[:n]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    pytest.importorskip("onnx", reason="the ONNX export needs the onnx package: pip install 'attnlab[site]'")
    for name in ("shakespeare-mlm", "facts-qa"):
        shipped(name)
    out = site.write_engine_folder(tmp_path_factory.mktemp("site") / "site", ())
    for name in NAMES:
        site.SITE_MODELS[name](name, out / "models" / name)
    return out


@pytest.fixture(scope="module")
def engine(browser, folder):
    """A page of the folder with engine/bert.js imported and every model loaded, then offline."""
    with site.serve_folder(folder) as base:
        context = browser.new_context()
        page = context.new_page()
        errors = page_errors(page)
        page.goto(base + "engine/")
        page.evaluate(
            """async () => {
                window.bert = await import('./bert.js');
                window.wp = await import('./wordpiece.js');
                await window.bert.mlmView({ text: 'a[MASK]' });
                await window.bert.qaView({});
                await window.bert.minilm();
                const m = await import('./models.js');
                window.tokenizers = {
                    minilm: new window.wp.WordPieceTokenizer(await m.modelJSON('minilm', 'tokenizer.json')),
                    qa: new window.wp.WordPieceTokenizer(await m.modelJSON('facts-qa', 'tokenizer.json')),
                };
            }"""
        )
        context.set_offline(True)
        yield page
        assert not errors, errors
        context.close()


RUN = """async ([fn, reqs]) => {
    const out = [];
    for (const req of reqs) {
        try { out.push({ ok: await window.bert[fn](req) }); }
        catch (err) { out.push({ error: err.message, name: err.name }); }
    }
    return out;
}"""


def _close(got, want, where: str) -> None:
    """Same structure; floats within TOL, everything else identical."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            _close(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: length {len(got)} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            _close(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        assert isinstance(got, (int, float)) and abs(got - want) <= TOL, f"{where}: {got} != {want}"
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def _py(fn, req) -> dict:
    try:
        return {"ok": fn(req).model_dump()}
    except ValueError as err:
        return {"error": str(err)}


def test_wordpiece_ids_and_offsets_equal_pythons(engine):
    from attnlab.data.tokenizers import load_hf_tokenizer
    from attnlab.loading import load_model
    from attnlab.models.convert_hf import minilm_dir

    texts = _lines("train.en", 400) + _lines("train.ja", 50) + HARD + list(MINILM_SENTENCES)
    texts += [q for ex in L.qa_examples() for q in [ex["passage"], *ex["questions"]]]
    assert len(texts) >= 30
    toks = {"minilm": load_model(minilm_dir(), family="lm")[1], "qa": load_hf_tokenizer(shipped("facts-qa"), "bert")}
    for key, tok in toks.items():
        got = engine.evaluate(
            "([key, texts]) => texts.map((t) => window.tokenizers[key].encodeWithOffsets(t))", [key, texts]
        )
        for text, g in zip(texts, got):
            ids, offsets = tok.encode_with_offsets(text)
            assert g["ids"] == ids, f"{key} {text!r}: {g['ids']} != {ids}"
            assert g["offsets"] == [list(o) for o in offsets], f"{key} {text!r}: offsets"
            assert [tok.id_to_token(i) for i in ids] == engine.evaluate(
                "([key, ids]) => ids.map((i) => window.tokenizers[key].idToToken(i))", [key, ids]
            )


def test_the_masked_lm_in_the_page_equals_mlm_view(engine):
    from attnlab.loading import load_model

    model, tok = load_model(shipped("shakespeare-mlm"), family="lm")
    texts = [L.load_sections()[9].strings[f"mlm_ex_{i}"].en for i in range(3)]
    texts += [
        "O my l[MASK]rd",
        "[MASK]",
        "KING HENRY: What news is th[MASK]s?",
        "JULIET: Wherefore art thou Rom[MASK]o?",
        "to be or not to b[MASK], that is the question",
        "Café [MASK] naïve — ünïcode ☃",  # characters the model never read: [UNK]
        "a" * 58 + "[MASK]",  # 61 tokens with [CLS] and [SEP]: fits its 64
        # refused, with the reference's message
        "no mask here",
        "[MASK] and [MASK]",
        "a" * 70 + "[MASK]",
        "x" * 201,
        "",
    ]
    reqs = [{"text": t} for t in texts]
    got = engine.evaluate(RUN, ["mlmView", reqs])
    for req, g in zip(reqs, got):
        want = _py(lambda r: L.mlm_view(model, tok, L.MLMRequest(**r)), req)
        if "error" in want:
            assert "error" in g, f"{req}: the page answered {g}"
            if "Validation" not in want["error"] and "validation" not in want["error"]:
                assert g["error"] == want["error"], req
        else:
            assert "ok" in g, f"{req}: {g}"
            _close(g["ok"], want["ok"], str(req))


def test_the_question_answerer_in_the_page_equals_qa_view(engine):
    from attnlab.loading import load_model

    qa = load_model(shipped("facts-qa"), family="qa")
    examples = L.qa_examples()
    reqs = [{}] + [{"passage": ex["passage"], "question": q} for ex in examples for q in ex["questions"]]
    passage = "Lirma Tovaskel was born in Oslo in 1962. Brunt Okelavi founded Harrow Labs in 1990."
    reqs += [
        {"passage": passage, "question": "When did Brunt Okelavi found Harrow Labs?"},
        {"passage": passage, "question": "Where was Lirma Tovaskel born?"},
        {"passage": "Zoë Ångström (née Müller) moved to Kraków in 2001.", "question": "Where did Zoë move?"},
        {"passage": passage, "question": "who " * 20},
        # refused
        {"passage": "   ", "question": "Who?"},
        {"passage": "a " * 190, "question": "Who?"},
        {"passage": "x" * 401, "question": "Who?"},
        {"passage": "Oslo.", "question": "q" * 121},
        {"passage": "Oslo.", "question": "!!!"},
    ]
    got = engine.evaluate(RUN, ["qaView", reqs])
    for req, g in zip(reqs, got):
        want = _py(lambda r: L.qa_view(qa, L.QARequest(**r)), req)
        if "error" in want:
            assert "error" in g, f"{req}: the page answered {g}"
            if "alidation" not in want["error"]:
                assert g["error"] == want["error"], req
        else:
            assert "ok" in g, f"{req}: {g}"
            _close(g["ok"], want["ok"], str(req))


@pytest.fixture(scope="module")
def minilm():
    from attnlab.models.convert_hf import minilm_dir
    from attnlab.web.models import load_explorer_model

    model = load_explorer_model(minilm_dir())
    model.name = "minilm"
    return model


def test_the_pronoun_in_the_page_equals_pronoun_view(engine, minilm):
    reqs = []
    for text in MINILM_SENTENCES:
        tokens = [minilm.tokenizer.id_to_token(i) for i in encode_with_masks(minilm.tokenizer, text)]
        reqs += [{"text": text, "pronoun": p} for p in dict.fromkeys(tokens[1:-1])]
    reqs += [
        {"text": "  THE ANIMAL didn't cross the street because it was too tired ", "pronoun": " It "},
        {"text": MINILM_SENTENCES[0], "pronoun": "she"},  # not one of its tokens
        {"text": "!!!", "pronoun": "it"},  # tokens, but not a sentence the site carries
        {"text": " ".join(["it"] * 45), "pronoun": "it"},  # too long
    ]
    got = engine.evaluate(RUN, ["pronounView", reqs])
    for req, g in zip(reqs, got):
        want = _py(lambda r: L.pronoun_view(minilm, L.PronounRequest(**r)), req)
        if req["text"] == "!!!":  # Python answers for any sentence; the page for the ones it carries
            assert "example sentences only" in g["error"], g
        elif "error" in want:
            assert g.get("error") == want["error"], f"{req}: {g}"
        else:
            assert "ok" in g, f"{req}: {g}"
            _close(g["ok"], want["ok"], str(req))
    assert len(reqs) > 90


def test_the_heads_in_the_page_equal_head_view(engine, minilm):
    reqs = []
    for n, text in enumerate(MINILM_SENTENCES):
        S = len(encode_with_masks(minilm.tokenizer, text))
        for layer, head, query in ((0, 0, 0), (1, 3, 10 % S), (5, 11, S - 1), (n % 6, (5 * n) % 12, (3 * n) % S)):
            reqs.append({"text": text, "layer": layer, "head": head, "query": query})
    reqs += [
        {"text": MINILM_SENTENCES[0], "layer": 6, "head": 0, "query": 0},
        {"text": MINILM_SENTENCES[0], "layer": 0, "head": 12, "query": 0},
        {"text": MINILM_SENTENCES[0], "layer": 0, "head": 0, "query": 39},
    ]
    got = engine.evaluate(RUN, ["headsView", reqs])
    for req, g in zip(reqs, got):
        want = _py(lambda r: L.head_view(minilm, L.HeadsRequest(**r)), req)
        if "error" in want:
            assert g.get("error") == want["error"], f"{req}: {g}"
        else:
            assert "ok" in g, f"{req}: {g}"
            _close(g["ok"], want["ok"], str(req))


def test_the_minilm_folder_holds_pytorchs_own_maps(folder, minilm):
    """What the page reads is MiniLM's attention as PyTorch computes it (float32, unrounded)."""
    import base64

    import numpy as np

    views = json.loads((folder / "models" / "minilm" / "views.json").read_text(encoding="utf-8"))["sentences"]
    assert [v["text"] for v in views] == list(MINILM_SENTENCES)
    for v in views[:3]:
        maps = minilm.run(v["text"]).attentions["self"].detach()  # (L, H, S, S)
        stored = np.frombuffer(base64.b64decode(v["attn"]), dtype="<f4").reshape(maps.shape)
        assert torch.equal(torch.from_numpy(stored.copy()), maps.float())
