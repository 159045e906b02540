"""The page's JavaScript engine (attnlab/web/static/engine/) against attnlab's Python, run in Node.

- Tokenizers: every tokenizer file the in-page models use gives, in JavaScript, the same ids as
  the Python tokenizer on the same text (with and without BOS/EOS), and decodes ids to the same
  text (special tokens skipped or kept), on more than 1,000 sentences each: the real corpora of
  ``../shared/data`` (``ATTNLAB_DATA``) where they are here, always the package's generated task
  sentences and a list of hard cases (digits of every kind, runs of spaces, tabs and newlines,
  the special tokens written in the text, characters outside the vocabulary, the empty string,
  decomposed kana and accents that NFC composes).
- Decoding: greedy and beam search in JavaScript (decode.js) equal :func:`attnlab.decode.greedy_decode`
  and :func:`attnlab.decode.beam_search` (ids exactly, scores within 1e-5) on a deterministic fake
  model defined identically on both sides (``tests/js/fake_model.mjs`` and :class:`TableModel`),
  and stop at the same step.
- The ONNX adapter (onnx_translator.js): through a stand-in for onnxruntime-web that checks
  ONNX_CONTRACT.md's inputs and keeps each row's tokens in its cache, it decodes as the table
  model does (the cache follows the beam); its text steps equal the Python Translator's.
- Exported translators (once ``attnlab.export_onnx`` is here and ``npm ci`` has installed
  onnxruntime-web): the page's engine on onnxruntime-web's WASM backend in Node reproduces the
  decode fixture of the PyTorch model, the demo in the default run, ja-en and en-ja as slow tests.
- The runtime's early start (models.js's ``START_GRAPH``, whose failure the page only warns about):
  a session of its bytes runs in onnxruntime-web and computes what the graph says (Identity).

Node runs the scripts in ``tests/js/``; the tests skip, saying so, where ``node`` is not on PATH.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shutil
import subprocess
import unicodedata
from collections import Counter
from pathlib import Path

import pytest
import torch

from attnlab import decode
from attnlab.accel import kernels
from attnlab.data import enja, load_tokenizer
from attnlab.data.tasks import make_task
from attnlab.inference.translate import cut_loops, output_limit
from attnlab.models.seq2seq import StepOutput

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("ATTNLAB_DATA", REPO.parent / "shared" / "data"))
ASSETS = REPO / "attnlab" / "assets"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None, reason="node (Node.js ≥ 18) is not on PATH: the JS engine cannot run")

# The tokenizer files of the models the page runs (the translators share one joint file, and so
# do the RNN pair's source and target sides with each other's).
TOKENIZERS = {
    "ja-en": "ja-en/src_tokenizer.json",
    "en-ja": "en-ja/src_tokenizer.json",
    "demo-src": "demo/src_tokenizer.json",
    "demo-tgt": "demo/tgt_tokenizer.json",
    "rnn-attention-src": "rnn-attention/src_tokenizer.json",
    "rnn-attention-tgt": "rnn-attention/tgt_tokenizer.json",
    "rnn-plain-src": "rnn-plain/src_tokenizer.json",
    "rnn-plain-tgt": "rnn-plain/tgt_tokenizer.json",
    "shakespeare-char": "shakespeare-char/tokenizer.json",
}

HARD = [
    "",
    " ",
    "   ",
    "a  b",
    " leading space",
    "trailing space ",
    "tab\there",
    "new\nline",
    "It cost 342,000 yen in 2024.",
    "①②③ Ⅳ ½ ５６７ ٣ ௫ 〇",  # numbers of every Unicode kind: circled, Roman, fractions, full-width, Arabic, Tamil
    "phone: 090-1234-5678",
    "x[BOS]y",
    "[EOS]",
    " [EOS] a",
    "a[PAD][PAD]b",
    "[UNK]a",
    "[UN",
    "[MASK]",
    "▁already▁marked",
    "▁",
    "😀 emoji 🇯🇵 and 𠮷",  # outside the BMP: one character, two UTF-16 units
    "Zürich, Ångström, naïve café",
    unicodedata.normalize("NFD", "Zürich, Ångström, naïve café"),  # decomposed: NFC composes it back
    "ガギグゲゴ パピプペポ",
    unicodedata.normalize("NFD", "ガギグゲゴ パピプペポ"),  # カ + combining dakuten
    "私は昨日、東京で３２歳の友達に会いました。",
    "ｶﾀｶﾅ half-width",
    'Don\'t stop!? (Really...) "quoted" — dash…',
    "ALL CAPS AND lower",
    "mixed日本語and English 混在",
    "\u3000全角スペース\u3000",
    "zero\u200bwidth",
    "!!!???...",
    "0",
    "3.14159 and -42",
    # Runs of one letter whose pair merges (ll, oo, いい, …): of two equal pairs BPE merges the leftmost.
    "helllo cooool ppppp eeeee cccc gggg '''quoted'''",
    "xlllx zooo いいいい かかか ままま こここ",
]


def _corpus_lines(path: Path, n: int) -> list[str]:
    """``n`` lines spread evenly over a corpus file (its short and long sentences alike)."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    step = max(1, len(lines) // n)
    return lines[::step][:n]


def _sentences() -> tuple[list[str], str]:
    """The texts every tokenizer is checked on, and where they came from."""
    texts = list(HARD)
    for task in ("numbers-en-ja", "dates", "number-lists-en-ja"):
        for src, tgt in make_task(task, 300, seed=7):
            texts += [src, tgt]
    origin = "generated tasks and hard cases"
    real = [
        (DATA / "tatoeba-jpn" / "train.en", 400),
        (DATA / "tatoeba-jpn" / "train.ja", 400),
        (DATA / "small_parallel_enja" / "test.ja", 150),
        (DATA / "multi30k" / "test_2016_flickr.de", 150),
        (DATA / "tinyshakespeare" / "input.txt", 300),
    ]
    here = [(path, n) for path, n in real if path.is_file()]
    for path, n in here:
        texts += _corpus_lines(path, n)
    if here:
        origin += " + " + ", ".join(str(p.relative_to(DATA)) for p, _ in here)
    return texts, origin


def _node(script: str, *args: str, timeout: float = 120):
    """``node tests/js/SCRIPT ARGS…`` run at the repository root; what it wrote to stdout, as JSON."""
    done = subprocess.run(
        [NODE, str(REPO / "tests" / "js" / script), *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        cwd=REPO,
    )
    assert done.returncode == 0, f"node {script} failed:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout)


def _run_node(script: str, cases: dict, tmp_path: Path):
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    return _node(script, str(path))


def _python_decode(tok, ids, skip):
    try:
        return tok.decode(ids, skip_special=skip)
    except ValueError:
        return {"error": True}


def test_tokenizers_match_python_token_for_token(tmp_path):
    texts, origin = _sentences()
    assert len(texts) >= 1000, origin
    rng = random.Random(36)
    cases: dict = {"tokenizers": {}, "encode": [], "decode": []}
    expected_enc, expected_dec = [], []
    distinct: dict[bytes, str] = {}  # a file shipped twice (ja-en's is en-ja's) is checked once
    for name, rel in TOKENIZERS.items():
        content = (ASSETS / rel).read_bytes()
        if content in distinct:
            continue
        distinct[content] = name
        tok = load_tokenizer(ASSETS / rel)
        cases["tokenizers"][name] = str(ASSETS / rel)
        for i, text in enumerate(texts):
            bos, eos = i % 3 == 1, i % 2 == 1  # every combination of the wrapping options
            ids = tok.encode(text, add_bos=bos, add_eos=eos)
            cases["encode"].append([name, text, bos, eos])
            expected_enc.append(ids)
            for skip in (True, False):
                cases["decode"].append([name, ids, skip])
                expected_dec.append(tok.decode(ids, skip_special=skip))
        # Arbitrary id sequences (specials anywhere, runs of ▁ tokens, ids past the vocabulary:
        # the subword decoder leaves them out, the character tokenizer refuses them).
        V = tok.vocab_size
        for _ in range(200):
            ids = [rng.randrange(V) if rng.random() < 0.8 else rng.randrange(6) for _ in range(rng.randrange(12))]
            if rng.random() < 0.1:
                ids.insert(rng.randrange(len(ids) + 1), V + rng.randrange(3))
            skip = rng.random() < 0.5
            cases["decode"].append([name, ids, skip])
            expected_dec.append(_python_decode(tok, ids, skip))
    got = _run_node("tokenizer_parity.mjs", cases, tmp_path)
    for (name, text, bos, eos), want, have in zip(cases["encode"], expected_enc, got["encode"]):
        assert have == want, f"{name} encode({text!r}, bos={bos}, eos={eos}): JS {have} != Python {want}"
    for (name, ids, skip), want, have in zip(cases["decode"], expected_dec, got["decode"]):
        if isinstance(want, dict):
            assert isinstance(have, dict) and "error" in have, f"{name} decode({ids}) should refuse, JS gave {have!r}"
        else:
            assert have == want, f"{name} decode({ids}, skip_special={skip}): JS {have!r} != Python {want!r}"
    assert len(got["encode"]) == len(expected_enc) and len(got["decode"]) == len(expected_dec)


# ---------------------------------------------------------------------------------------------
# Decoding: the page's greedy and beam search against attnlab.decode on a table model.
# ---------------------------------------------------------------------------------------------

HASH = 1_000_003  # as tests/js/fake_model.mjs
PAD, BOS, EOS = 0, 2, 3


class _TableState:
    """The rows' prefix hashes and the step; ``reorder`` follows beam search's hypotheses."""

    def __init__(self, h: torch.Tensor, t: int) -> None:
        self.h, self.t = h, t  # (R,) int64, the step

    def reorder(self, index: torch.Tensor) -> None:
        self.h = self.h.index_select(0, index)


class TableModel:
    """A seq2seq model for :mod:`attnlab.decode` whose next-token logits come from a table indexed by
    the step and a hash of the row's prefix, and whose cross-attention row is a function of that
    hash: the Python twin of ``tests/js/fake_model.mjs``.

    Shape:
        table ``(T, R, V)``; step: tokens ``(R', 1)`` → logits ``(R', V)``, cross_weights ``(R', 1, 1, 3)``
    """

    def __init__(self, table: torch.Tensor) -> None:
        self.table = table  # (T, R, V) float32
        self.steps = 0  # calls of step so far: where the search stopped

    def start(self, src, src_mask=None):
        return _TableState(torch.zeros(src.shape[0], dtype=torch.long), 0)

    def step(self, tokens, state, *, need_weights=False):
        T, R, _ = self.table.shape
        state.h = (state.h * 31 + tokens[:, -1] + 1) % HASH  # (R',)
        logits = self.table[state.t % T].index_select(0, state.h % R).contiguous()  # (R', V)
        state.t += 1
        self.steps += 1
        cross = None
        if need_weights:
            h = state.h.double()
            cross = torch.stack([(h % 7) / 8, (h % 5) / 8, (h % 3) / 8], dim=-1).float().view(-1, 1, 1, 3)
        return StepOutput(logits, cross)


def _log_probs(logits: torch.Tensor) -> torch.Tensor:
    """The log-probabilities attnlab.decode takes from these logits: its search kernel's where it
    is built (the same numbers for every K), else PyTorch's log_softmax.

    Shape:
        ``(N, V)`` → ``(N, V)``
    """
    fast = kernels.top_k_log_softmax(logits, logits.shape[1])
    if fast is None:
        return torch.log_softmax(logits, dim=-1)
    return torch.empty_like(logits).scatter_(1, fast[1], fast[0])


@contextlib.contextmanager
def final_beams():
    """Every hypothesis :func:`attnlab.decode.beam_search` chooses from when a sentence is done,
    as it chooses (its ``_finish``, observed, not replaced): a list that gets, per finished
    sentence, its K hypotheses in beam order, each ``{"ids", "score", "final"}`` (ids cut before
    EOS; the float32 log-probability and that divided by the length penalty, as ``_finish``
    computes them; None where the score is -inf), what decode.js's beamSearch returns as ``beams``.

    Shape:
        per sentence K entries of ids (T_k,)
    """
    seen: list[list[dict]] = []
    finish = decode._finish

    def recording(hyps, gone, sentence, scores, lengths, ended, history, attn_hist, src_mask, alpha):
        K, t = scores.shape[1], history.shape[1]
        penalty = ((5.0 + lengths.double()) / 6.0).pow(alpha).to(scores.dtype)  # (n, K), as _finish
        for j in gone.tolist():
            beams = []
            for i in range(K):
                score, row = scores[j, i], j * K + i
                finite = bool(torch.isfinite(score))
                beams.append(
                    {
                        "ids": history[row, : min(int(ended[row]), t)].tolist(),
                        "score": float(score) if finite else None,
                        "final": float(score / penalty[j, i]) if finite else None,
                    }
                )
            seen.append(beams)
        return finish(hyps, gone, sentence, scores, lengths, ended, history, attn_hist, src_mask, alpha)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(decode, "_finish", recording)
        yield seen


def _tables(n: int, ties: bool) -> list[torch.Tensor]:
    """``n`` logit tables of different sizes; with ``ties``, logits on a grid of 0.5 so that equal
    scores meet within a row and across rows. EOS grows likelier with the step at a rate of its
    own per table (some hypotheses end at once, some never), padding is impossible (-∞)."""
    gen = torch.Generator().manual_seed(36)
    tables = []
    for i in range(n):
        V = (5, 6, 9, 14)[i % 4]
        R = (1, 2, 3, 5, 11)[i % 5]
        T = 40
        logits = torch.randn((T, R, V), generator=gen) * 1.5  # (T, R, V)
        if ties:
            logits = (logits * 2).round() / 2
        rate = (0.0, 0.1, 0.3, 1.0)[(i // 4) % 4]
        logits[:, :, EOS] += torch.arange(T).view(T, 1) * rate - 2.0
        logits[:, :, PAD] = float("-inf")
        tables.append(logits)
    return tables


def test_greedy_and_beam_search_match_attnlab_decode(tmp_path):
    ties = kernels.available()  # the kernel fixes the order of equal scores; torch.topk does not
    tables = _tables(24, ties)
    rng = random.Random(7)
    cases, expected = [], []
    src = torch.tensor([[5, 6, 7]])  # (1, S): the table model ignores the source
    for i, logits in enumerate(tables):
        model = TableModel(logits)
        max_len = (1, 3, 6, 10, 16, 24)[i % 6]
        alphas = rng.sample([0.0, 0.6, 1.0, 2.0], 3)
        runs = [("greedy", 1, 0.0)] + [("beam", k, a) for k in (1, 2, 3, 4) for a in alphas]
        for kind, beam, alpha in runs:
            attn = rng.random() < 0.5
            model.steps = 0
            common = dict(bos_id=BOS, eos_id=EOS, pad_id=PAD, max_len=max_len, return_attention=attn)
            if kind == "greedy":
                (hyp,) = decode.greedy_decode(model, src, **common)
                beams = None
            else:
                with final_beams() as seen:
                    (hyp,) = decode.beam_search(model, src, beam_size=beam, alpha=alpha, **common)
                (beams,) = seen
            cases.append(dict(table=i, kind=kind, beam=beam, alpha=alpha, maxLen=max_len, bos=BOS, eos=EOS, pad=PAD))
            cross = None if hyp.cross_attention is None else hyp.cross_attention[0, 0].tolist()  # (T, 3)
            expected.append((hyp.tokens, hyp.score, cross if attn else None, model.steps, beams))
    # A beam wider than the vocabulary is refused on both sides.
    with pytest.raises(ValueError, match="larger than the vocabulary"):
        decode.beam_search(TableModel(tables[0]), src, bos_id=BOS, eos_id=EOS, beam_size=6)
    cases.append(dict(table=0, kind="beam", beam=6, alpha=0.6, maxLen=10, bos=BOS, eos=EOS, pad=PAD))
    expected.append("error")

    spec = {"tables": [], "cases": cases}
    for logits in tables:
        T, R, V = logits.shape
        logp = _log_probs(logits.view(T * R, V).contiguous())  # (T·R, V) what the search sees
        flat = [None if math.isinf(x) else x for x in logp.view(-1).tolist()]
        spec["tables"].append({"table": flat, "T": T, "R": R, "V": V})
    got = _run_node("decode_parity.mjs", spec, tmp_path)
    assert len(got) == len(expected)
    lengths = Counter()
    for case, want, have in zip(cases, expected, got):
        where = (
            f"{case['kind']} beam={case['beam']} alpha={case['alpha']} max_len={case['maxLen']} table {case['table']}"
        )
        if want == "error":
            assert "error" in have and "larger than the vocabulary" in have["error"], f"{where}: JS gave {have}"
            continue
        ids, score, cross, steps, beams = want
        assert "error" not in have, f"{where}: JS failed: {have}"
        assert have["ids"] == ids, f"{where}: JS ids {have['ids']} != Python {ids}"
        js_score = float("-inf") if have["score"] is None else have["score"]
        # The same float32 sums in the same order: equal, not merely close (the brief's bound is 1e-5).
        assert js_score == score, f"{where}: JS score {js_score} != Python {score}"
        # The search stops at the same step (the early exit once no live hypothesis can win).
        assert have["steps"] == steps, f"{where}: JS decoded {have['steps']} steps, Python {steps}"
        if cross is not None:
            assert have["attention"] == cross, f"{where}: JS attention {have['attention']} != Python {cross}"
        # Every hypothesis the final choice was made from: the same ids in the same beam order (ties
        # included), the same float32 scores.
        assert have.get("beams") == beams, f"{where}: JS beams {have.get('beams')} != Python {beams}"
        if beams is not None:
            assert [b for b in beams if b["final"] == score][:1] and len(beams) == case["beam"]
        lengths[len(ids) == case["maxLen"]] += 1
    # The cases reach both ends: translations that stop at EOS and ones cut at max_len.
    assert lengths[True] >= 50 and lengths[False] >= 50, lengths


# ---------------------------------------------------------------------------------------------
# The ONNX translator adapter (onnx_translator.js) and the translator's text helpers.
# ---------------------------------------------------------------------------------------------


def test_onnx_translator_follows_the_contract_and_the_beam(tmp_path):
    """Through a stand-in for onnxruntime-web that checks the contract's inputs and keeps each row's
    tokens in its cache, the adapter decodes as the table model does (so the cache is gathered
    along the beam's rows); the helpers equal normalize_input, cut_loops and output_limit."""
    tables = _tables(6, kernels.available())
    spec: dict = {"tables": []}
    for logits in tables:
        T, R, V = logits.shape
        logp = _log_probs(logits.view(T * R, V).contiguous())
        spec["tables"].append(
            {"table": [None if math.isinf(x) else x for x in logp.view(-1).tolist()], "T": T, "R": R, "V": V}
        )
    rng = random.Random(5)
    texts = HARD + [
        " ".join(rng.choice(["猫", "が", "cat", "Tokyo", "2024", "  ", "。", "A1"]) for _ in range(6))
        for _ in range(100)
    ]
    # White space where Python's str.split()/strip() and JavaScript's \s/trim() disagree (\x85 and
    # \x1c-\x1f are Python's, U+FEFF is JavaScript's), and runs of spaces between Latin words.
    texts += [
        "a\x85b",
        "\ufeffa b",
        "a b\ufeff",
        "\x1cx\x1dy\x1e z\x1f",
        "\u2028line\u2029para\u202fnnbsp\u205fmath\u1680ogham\xa0nbsp",
        "\u180emongolian\u200b zw",
        "\x85 猫 が \x85",
        "a   b 猫  c 1 2  x",
        " A  猫 ",
    ]
    spec["normalize"] = [[t, lang, lower] for t in texts for lang in ("ja", "en") for lower in (False, True)]
    spec["cutLoops"] = [[rng.randrange(4) for _ in range(rng.randrange(20))] for _ in range(300)] + [
        [7, 8] * 5,
        [1] * 9,
    ]
    spec["outputLimit"] = [[s, m] for s in (1, 7, 40, 300) for m in (32, 128, 512)]
    got = _run_node("onnx_translator_check.mjs", spec, tmp_path)
    assert got["compared"] == len(tables) * 16
    assert got["tooLongError"] == "sequence of 5 positions exceeds max_len=3"
    for (text, lang, lower), have in zip(spec["normalize"], got["normalize"]):
        assert have == enja.normalize_input(text, lang, lower), (text, lang, lower)
    for ids, have in zip(spec["cutLoops"], got["cutLoops"]):
        assert have == cut_loops(ids), ids
    assert got["outputLimit"] == [output_limit(s, m) for s, m in spec["outputLimit"]]


# ---------------------------------------------------------------------------------------------
# The real thing: a translator exported to ONNX (attnlab.export_onnx), run by onnxruntime-web's
# WASM backend in Node through the page's engine, against attnlab.decode on the PyTorch model.
# ---------------------------------------------------------------------------------------------


def _need_onnxruntime_web() -> None:
    if not (REPO / "node_modules" / "onnxruntime-web").is_dir():
        pytest.skip("onnxruntime-web is not installed: run `npm ci` at the repository root")


def _check_exported(name: str, sentences: list[str], tmp_path: Path) -> None:
    export_onnx = pytest.importorskip("attnlab.export_onnx", reason="attnlab.export_onnx (the ONNX export) is not here")
    pytest.importorskip("onnx", reason="the ONNX export needs the onnx package: pip install 'attnlab[site]'")
    _need_onnxruntime_web()
    folder = tmp_path / name
    export_onnx.export_translator_onnx(name, folder)
    export_onnx.write_decode_fixture(name, sentences, folder / "decode_fixture.json")
    fixture = json.loads((folder / "decode_fixture.json").read_text(encoding="utf-8"))
    report = _node("onnx_fixture_check.mjs", str(folder), timeout=600)
    sizes = sum((folder / f).stat().st_size for f in ("encoder.onnx", "decoder.onnx"))
    assert report["progress"] == [sizes, sizes], "the download's progress should reach the models' size"
    got = report["results"]
    assert len(got) == len(fixture) == len(sentences)
    for want, have in zip(fixture, got):
        text = want["text"]
        assert have["src_ids"] == want["src_ids"], f"{name} {text!r}: source ids"
        assert have["greedy"] == want["greedy"], f"{name} {text!r}: greedy {have['greedy']} != {want['greedy']}"
        assert have["beam4"] == want["beam4"], f"{name} {text!r}: beam 4 {have['beam4']} != {want['beam4']}"
        assert have["beam4_score"] == pytest.approx(want["beam4_score"], abs=1e-4), f"{name} {text!r}: beam score"


def test_exported_demo_translates_in_node_as_in_pytorch(tmp_path):
    sentences = [src for src, _ in make_task("numbers-en-ja", 12, seed=11)]
    _check_exported("demo", sentences, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name, lang", [("ja-en", "ja"), ("en-ja", "en")])
def test_exported_translators_translate_in_node_as_in_pytorch(name, lang, tmp_path):
    path = DATA / "tatoeba-jpn" / f"train.{lang}"
    if not path.is_file():
        pytest.skip(f"needs {path} (set ATTNLAB_DATA to the corpora folder)")
    _check_exported(name, _corpus_lines(path, 200), tmp_path)


def test_the_runtime_start_graph_runs_in_onnxruntime_web():
    """models.js's ``START_GRAPH``: the page makes a session of it as soon as onnxruntime-web is
    imported, so that the runtime's WebAssembly starts while the models download, and only warns
    when that fails; nothing in the page would notice a broken graph. Its bytes pass the ONNX
    checker, and in onnxruntime-web's WASM backend (in Node) a session of them runs and computes
    what the graph says: its one node is Identity of a float32 vector of one element, x → y."""
    onnx = pytest.importorskip("onnx", reason="reading the graph needs the onnx package: pip install 'attnlab[site]'")
    _need_onnxruntime_web()
    value = -3.25  # exact in float32: the identity must give it back bit for bit
    got = _node("start_graph_check.mjs", repr(value))
    model = onnx.load_from_string(bytes(got["bytes"]))
    onnx.checker.check_model(model, full_check=True)
    assert [(n.op_type, list(n.input), list(n.output)) for n in model.graph.node] == [("Identity", ["x"], ["y"])]
    for io in (*model.graph.input, *model.graph.output):
        assert io.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
        assert [d.dim_value for d in io.type.tensor_type.shape.dim] == [1]
    assert got["inputNames"] == ["x"] and got["outputNames"] == ["y"]
    assert got["outputs"] == {"y": {"type": "float32", "dims": [1], "data": [value]}}
