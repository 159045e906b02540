"""The RNN pair in the page (``static/engine/rnn.js``, ``bleu.js``) against the Python view
functions they replace, in headless Chromium on the explorer: §2's bottleneck
(:func:`bottleneck_view`) on long test examples and typed lists, §3's additive-vs-dot
(:func:`additive_vs_dot`) on its examples and typed lists, and sentence BLEU against sacreBLEU
(:func:`attnlab.metrics.bleu`, tokenize "char"). Ids, tokens, texts and labels identical; floats
within 1e-4 (the page's onnxruntime-web against PyTorch). The data files the page reads
(``static/data/*.json``) are the build's writers' output, checked against the references.
"""

from __future__ import annotations

import json
import random

import pytest
from lesson_browser import BROWSER_MARKS, shipped
from live_server import page_errors

from attnlab.metrics import bleu
from attnlab.web.lesson import s02_seq2seq_bottleneck as S2
from attnlab.web.lesson import s03_query_key_value as S3
from attnlab.web.lesson.content import default_sections

pytestmark = [*BROWSER_MARKS, pytest.mark.usefixtures("rnn_models")]

TOL = 1e-4
# The fixed vector is rounded to 4 decimals by both sides: a value within float32 noise of a
# rounding boundary lands one unit (1e-4, plus the binary representation's 1e-16) apart.
SLACK = 1e-12


@pytest.fixture(scope="module")
def rnn_models():
    pytest.importorskip("onnx")
    from attnlab.loading import load_model

    return {
        name: load_model(shipped(name), precision="fp32", family="translate") for name in ("rnn-plain", "rnn-attention")
    }


@pytest.fixture(scope="module")
def engine(browser, base_url):
    """A page of the explorer with rnn.js imported and both models loaded."""
    ctx = browser.new_context(base_url=base_url)
    pg = ctx.new_page()
    pg.set_default_timeout(120_000)
    errors = page_errors(pg)
    pg.goto("/static/engine/bleu.js")  # any page of the explorer's origin: the modules are imported into it
    pg.evaluate(
        """async () => {
          const rnn = await import('/static/engine/rnn.js');
          window.rnnEngine = rnn;
          window.rnnModels = { plain: await rnn.rnnTranslator('rnn-plain'), attention: await rnn.rnnTranslator('rnn-attention') };
          window.rnnTest = await rnn.dataJSON('bottleneck-test.json');
        }"""
    )
    yield pg
    ctx.close()
    assert not errors, errors


def assert_same(got, want, where=""):
    """Equal structure; floats within TOL; everything else exactly equal."""
    if isinstance(want, bool) or want is None or isinstance(want, str):
        assert got == want, f"{where}: {got!r} != {want!r}"
    elif isinstance(want, int) and not isinstance(want, bool) and isinstance(got, int):
        assert got == want, f"{where}: {got} != {want}"
    elif isinstance(want, (int, float)):
        assert isinstance(got, (int, float)) and abs(got - want) <= TOL + SLACK, f"{where}: {got} != {want}"
    elif isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            assert_same(got[k], want[k], f"{where}.{k}")
    else:
        assert isinstance(got, list) and len(got) == len(want), f"{where}: length {len(got)} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")


def _typed_lists(n: int, seed: int) -> list[str]:
    """Lists of numbers a learner might type: test sources cut at random words, joined by 'and'."""
    rng = random.Random(seed)
    words = [s for s, _ in S2.bottleneck_pairs()]
    out = ["twelve and three hundred", "one", "seven and seven and seven", "nine hundred ninety-nine"]
    out += ["and and and", "Twelve  and\tthree", "hello world", "一二三"]  # odd input the references accept
    while len(out) < n:
        a, b = rng.sample(words, 2)
        parts = (a.split(" and ")[: rng.randint(1, 3)]) + (b.split(" and ")[: rng.randint(0, 2)])
        out.append(" and ".join(parts))
    return out


def _js(engine, fn: str, arg):
    return engine.evaluate(
        f"""async (arg) => {{
          const r = window.rnnEngine, m = window.rnnModels;
          try {{ return {{ ok: await ({fn})(arg) }}; }} catch (e) {{ return {{ error: String(e.message) }}; }}
        }}""",
        arg,
    )


def test_bottleneck_in_the_page_is_the_view_function(engine, rnn_models):
    plain, attention = rnn_models["rnn-plain"], rnn_models["rnn-attention"]
    n_long = len(S2.long_examples())
    requests = [{"example": i} for i in range(0, 24)] + [{"example": n_long + 3}]
    requests += [{"text": t} for t in _typed_lists(40, seed=3)]
    requests += [{"text": S2.bottleneck_pairs()[k][0]} for k in (0, 5, 17)]  # typed test sources: references
    for req in requests:
        want = S2.bottleneck_view(plain, attention, S2.BottleneckRequest(**req)).model_dump()
        got = _js(engine, "(req) => r.bottleneck(m.plain, m.attention, window.rnnTest, req)", req)
        assert "ok" in got, (req, got)
        assert_same(got["ok"], want, json.dumps(req))


@pytest.mark.parametrize(
    "text",
    ["", "x" * 601, " ".join(["one and"] * 60) + " one"],
)
def test_bottleneck_refuses_what_the_reference_refuses(engine, rnn_models, text):
    from pydantic import ValidationError

    with pytest.raises((ValueError, ValidationError)):
        S2.bottleneck_view(rnn_models["rnn-plain"], rnn_models["rnn-attention"], S2.BottleneckRequest(text=text))
    got = _js(engine, "(req) => r.bottleneck(m.plain, m.attention, window.rnnTest, req)", {"text": text})
    assert "error" in got and "\n" not in got["error"], got


def test_additive_vs_dot_in_the_page_is_the_view_function(engine, rnn_models):
    attention = rnn_models["rnn-attention"]
    strings = default_sections()[3].strings
    examples = [getattr(strings[f"av_example_{k}"], lang) for lang in ("en", "ja") for k in "abc"]
    examples += [
        q.params["numbers"]
        for q in default_sections()[3].check + default_sections()[3].predict
        if "numbers" in q.params
    ]
    texts = list(dict.fromkeys(examples)) + [S3.DEFAULT_NUMBERS] + _typed_lists(30, seed=5)
    checked = 0
    for text in texts:
        try:
            want = S3.additive_vs_dot(attention, S3.AdditiveVsDotRequest(text=text)).model_dump()
        except ValueError as err:
            got = _js(engine, "(t) => r.additiveVsDot(m.attention, t)", text)
            assert "error" in got, (text, got, err)
            continue
        got = _js(engine, "(t) => r.additiveVsDot(m.attention, t)", text)
        assert "ok" in got, (text, got)
        assert_same(got["ok"], want, text)
        checked += 1
    assert checked >= 20


def test_sentence_bleu_is_sacrebleus(engine):
    rng = random.Random(7)
    chars = "一二三四五六七八九十百千万億、"
    pairs = [("", "一"), ("一", "一"), ("三百十二", "三百十二、五"), ("  三 百", "三百 "), ("九九九九九", "九")]
    for _ in range(300):
        ref = "".join(rng.choice(chars) for _ in range(rng.randint(1, 40)))
        hyp = list(ref)
        for _ in range(rng.randint(0, 8)):
            op = rng.random()
            i = rng.randrange(len(hyp) + 1)
            if op < 0.4:
                hyp.insert(i, rng.choice(chars))
            elif hyp and op < 0.8:
                del hyp[min(i, len(hyp) - 1)]
            elif hyp:
                hyp[min(i, len(hyp) - 1)] = rng.choice(chars)
        pairs.append(("".join(hyp), ref))
    got = engine.evaluate(
        "async (pairs) => { const b = await import('/static/engine/bleu.js'); return pairs.map(([h, r]) => b.sentenceBleu(h, r)); }",
        pairs,
    )
    for (h, r), g in zip(pairs, got):
        assert g == pytest.approx(bleu([h], [r], tokenize="char"), abs=1e-9), (h, r)


def test_the_data_files_are_the_references(engine, rnn_models, tmp_path):
    """bottleneck-test.json holds the test pairs; bleu-by-length.json is the view's table,
    labelled with the machine it was measured on."""
    test = engine.evaluate("() => window.rnnTest")
    assert [tuple(p) for p in test["pairs"]] == list(S2.bottleneck_pairs())
    assert (test["long_words"], test["max_chars"], test["max_tokens"]) == (
        S2.LONG_WORDS,
        S2.MAX_NUMBER_LIST_CHARS,
        S2.MAX_NUMBER_LIST_TOKENS,
    )
    got = engine.evaluate("() => window.rnnEngine.dataJSON('bleu-by-length.json')")
    directories = {name: shipped(name) for name in rnn_models}
    want = S2.bleu_by_length_view(rnn_models, directories).model_dump()
    measured = got.pop("measured")
    assert measured["machine"] and len(measured["date"]) == 10
    assert got == want


@pytest.fixture(scope="module")
def summarizer_py():
    from attnlab.loading import load_model

    s = load_model(shipped("facts-summarizer"), family="summarize")
    s.model.float()
    return s


def test_summary_in_the_page_is_the_view_function(engine, summarizer_py):
    """§9's summary (engine/summary.js) against summary_view: the three example documents, other
    generated documents (more than max_src_len words, words outside the vocabulary) and typed text."""
    from attnlab.data.text_tasks import make_summarization_task
    from attnlab.web.lesson import s09_transformers_at_work as S9

    engine.evaluate(
        """async () => {
          const sum = await import('/static/engine/summary.js');
          window.sumEngine = sum;
          window.sumModel = await sum.summarizer('facts-summarizer');
          window.sumDocs = await sum.summaryExamples();
        }"""
    )
    assert engine.evaluate("() => window.sumDocs") == S9.summary_examples()
    docs = [None] + S9.summary_examples() + [e.document for e in make_summarization_task(12, seed=11)]
    docs += [
        "Zorblax the mayor of Quibbleton won the chess debate on Friday, said the city.",
        "the the the the",
        "Hello!",
        "café, naïve — 3.5 votes; 1,200 fans don't rose.",
    ]
    for doc in docs:
        req = {} if doc is None else {"document": doc}
        want = S9.summary_view(summarizer_py, S9.SummaryRequest(**req)).model_dump()
        got = engine.evaluate("async (req) => window.sumEngine.summaryView(window.sumModel, window.sumDocs, req)", req)
        assert_same(got, want, repr(doc))
    got = engine.evaluate(
        "async () => { try { await window.sumEngine.summaryView(window.sumModel, window.sumDocs, {document: '   '}); return 'ok'; }"
        " catch (e) { return e.message; } }"
    )
    assert got == "the document has no words"
