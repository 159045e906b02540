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
  model defined identically on both sides (``tests/js/fake_model.mjs`` and :class:`TableModel`).

Node runs the scripts in ``tests/js/``; the tests skip, saying so, where ``node`` is not on PATH.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import unicodedata
from pathlib import Path

import pytest

from attnlab.data import load_tokenizer
from attnlab.data.tasks import make_task

REPO = Path(__file__).resolve().parent.parent
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


def _run_node(script: str, cases: dict, tmp_path: Path):
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    done = subprocess.run(
        [NODE, str(REPO / "tests" / "js" / script), str(path)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 0, f"node {script} failed:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout)


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
    for name, rel in TOKENIZERS.items():
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
