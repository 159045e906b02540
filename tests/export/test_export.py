"""`attnlab export --to ctranslate2`: CTranslate2 computes what attnlab computes.

On tiny random Transformers (pre-norm and post-norm, relu and gelu, one shared vocabulary and two
separate ones), CTranslate2 running the exported weights in fp32 must give the same first-step
log-probabilities (within 1e-4), the same log-probability for every token of a whole output, and
the same greedy and beam-4 token ids as attnlab's own decoders, one sentence at a time and in padded
batches. Then the command itself, on the shipped ``demo`` model, and what it refuses.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from attnlab.cli import main as cli_main
from attnlab.decode import beam_search, greedy_decode
from attnlab.export import CTranslate2Translator, check_exportable, export_ctranslate2, require_ctranslate2
from attnlab.loading import load_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ for export_models
from export_models import BOS, EOS, MAX_LEN, padded, random_sources, tiny  # noqa: E402

ctranslate2 = pytest.importorskip(
    "ctranslate2", reason="CTranslate2 is not installed (optional extra: pip install 'attnlab[ctranslate2]')"
)

# name: (norm, activation, shared vocabulary)
VARIANTS = {
    "pre-relu-shared": ("pre", "relu", True),
    "post-relu-shared": ("post", "relu", True),
    "pre-gelu-separate": ("pre", "gelu", False),
    "post-gelu-separate": ("post", "gelu", False),
}


@pytest.fixture(scope="module", params=list(VARIANTS))
def exported(request, tmp_path_factory):
    model, src_tok, tgt_tok = tiny(*VARIANTS[request.param])
    out = export_ctranslate2(model, src_tok, tgt_tok, tmp_path_factory.mktemp(request.param) / "ct2")
    return model, src_tok, tgt_tok, ctranslate2.Translator(str(out), device="cpu", compute_type="float32")


def _ct2(translator, src_tok, tgt_tok, sources, **options) -> list[list[int]]:
    results = translator.translate_batch(
        [[src_tok.id_to_token(i) for i in s] for s in sources],
        max_decoding_length=MAX_LEN,
        min_decoding_length=0,  # attnlab may end at once; CTranslate2's default of 1 forbids that
        **options,
    )
    return [[tgt_tok.token_to_id(t) for t in r.hypotheses[0]] for r in results]


def test_first_step_log_probs_agree(exported):
    model, src_tok, tgt_tok, translator = exported
    sources = random_sources(src_tok, n=8)
    results = translator.translate_batch(
        [[src_tok.id_to_token(i) for i in s] for s in sources],
        beam_size=1,
        max_decoding_length=1,
        min_decoding_length=0,
        return_logits_vocab=True,
    )
    theirs = torch.stack([torch.from_numpy(np.asarray(r.logits[0][0])).reshape(-1) for r in results])  # (B, V)
    state = model.start(padded(sources))
    ours = model.step(torch.full((len(sources), 1), BOS), state).logits  # (B, V)
    assert theirs.shape == ours.shape == (len(sources), tgt_tok.vocab_size)
    diff = (torch.log_softmax(theirs, -1) - torch.log_softmax(ours, -1)).abs().max().item()
    assert diff < 1e-4, f"first-step log-probs differ by {diff:.2e}"


def test_every_token_log_prob_agrees(exported):
    # score_batch gives CTranslate2's log-probability of each token of a given output (EOS last):
    # the whole greedy output of attnlab, position table and cache included, step by step.
    model, src_tok, tgt_tok, translator = exported
    sources = random_sources(src_tok, n=8, seed=2)
    hyps = [greedy_decode(model, torch.tensor([s]), bos_id=BOS, eos_id=EOS, max_len=MAX_LEN)[0] for s in sources]
    scored = translator.score_batch(
        [[src_tok.id_to_token(i) for i in s] for s in sources],
        [[tgt_tok.id_to_token(i) for i in h.tokens] for h in hyps],
    )
    for s, h, r in zip(sources, hyps, scored):
        out = model(torch.tensor([s]), torch.tensor([[BOS] + h.tokens]))
        logp = torch.log_softmax(out.logits[0], -1)  # (T, V)
        ours = logp.gather(1, torch.tensor(h.tokens + [EOS])[: logp.shape[0], None]).squeeze(1)
        theirs = torch.tensor(r.log_probs)[: ours.shape[0]]
        assert theirs.shape == ours.shape
        assert torch.allclose(theirs, ours, atol=1e-4), (theirs - ours).abs().max()


def test_greedy_and_beam4_token_ids_identical(exported):
    model, src_tok, tgt_tok, translator = exported
    sources = random_sources(src_tok)
    greedy = [
        greedy_decode(model, torch.tensor([s]), bos_id=BOS, eos_id=EOS, max_len=MAX_LEN)[0].tokens for s in sources
    ]
    assert greedy == _ct2(translator, src_tok, tgt_tok, sources, beam_size=1)
    # α = 0: CTranslate2 divides by |Y|^α and attnlab by GNMT's ((5 + |Y|) / 6)^α, another
    # function of the length; without a penalty both rank hypotheses by their log-probability.
    beam = [
        beam_search(model, torch.tensor([s]), bos_id=BOS, eos_id=EOS, beam_size=4, alpha=0.0, max_len=MAX_LEN)[0].tokens
        for s in sources
    ]
    assert beam == _ct2(translator, src_tok, tgt_tok, sources, beam_size=4, length_penalty=0.0)
    # Not a vacuous match: outputs end by EOS at many lengths, and the beam changes a good part of them.
    assert len({len(t) for t in greedy + beam if len(t) < MAX_LEN}) >= 5
    assert sum(b != g for b, g in zip(beam, greedy)) >= len(sources) // 5


def test_padded_batch_equals_one_by_one(exported):
    # The source padding: CTranslate2 reads lengths, attnlab a mask; a batch must not change a sentence.
    model, src_tok, tgt_tok, translator = exported
    sources = random_sources(src_tok, n=12, seed=3)
    one_by_one = [
        greedy_decode(model, torch.tensor([s]), bos_id=BOS, eos_id=EOS, max_len=MAX_LEN)[0].tokens for s in sources
    ]
    batched_ours = [h.tokens for h in greedy_decode(model, padded(sources), bos_id=BOS, eos_id=EOS, max_len=MAX_LEN)]
    assert batched_ours == one_by_one == _ct2(translator, src_tok, tgt_tok, sources, beam_size=1)


def test_export_command_on_the_demo_model(tmp_path, capsys):
    out = tmp_path / "demo-ct2"
    assert cli_main(["export", "--model", "demo", "--to", "ctranslate2", str(out)]) == 0
    assert "exported demo" in capsys.readouterr().out
    assert {"model.bin", "config.json", "src_tokenizer.json", "tgt_tokenizer.json", "attnlab_export.json"} <= {
        p.name for p in out.iterdir()
    }
    config = json.loads((out / "config.json").read_text())
    assert (config["bos_token"], config["eos_token"], config["layer_norm_epsilon"]) == ("[BOS]", "[EOS]", 1e-5)
    assert json.loads((out / "source_vocabulary.json").read_text())[:4] == ["[PAD]", "[UNK]", "[BOS]", "[EOS]"]
    texts = ["three hundred forty-two thousand", "seven", "nineteen thousand and five", "two million one hundred"]
    ours = [t.text for t in load_model("demo", family="translate").translate(texts, beam_size=1)]
    theirs = CTranslate2Translator(out).translate(texts, beam_size=1)
    assert theirs == ours
    assert ours[0] == "三十四万二千"  # the model does translate: the comparison is not of two empty outputs
    # An existing folder is left alone unless --force.
    assert cli_main(["export", "--model", "demo", "--to", "ctranslate2", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert (
        cli_main(["export", "--model", "demo", "--to", "ctranslate2", "--quantization", "int8", "--force", str(out)])
        == 0
    )
    assert json.loads((out / "attnlab_export.json").read_text())["quantization"] == "int8"
    assert CTranslate2Translator(out, compute_type="int8").translate(texts[:1]) == ours[:1]


def test_what_cannot_be_exported(tmp_path, capsys):
    assert cli_main(["export", "--model", "rnn-plain", "--to", "ctranslate2", str(tmp_path / "rnn")]) == 2
    assert "recurrent" in capsys.readouterr().err
    assert not (tmp_path / "rnn").exists()
    model, _, _ = tiny("pre", "relu", True)
    model.config.attention = "sliding_window"  # the check reads the config, as the export does
    with pytest.raises(ValueError, match="windowed"):
        check_exportable(model)


def test_missing_ctranslate2_says_how_to_install(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # `import ctranslate2` now raises ImportError
    with pytest.raises(ImportError, match=r"attnlab\[ctranslate2\]"):
        require_ctranslate2()
    assert cli_main(["export", "--model", "demo", "--to", "ctranslate2", str(tmp_path / "x")]) == 2
    assert "pip install 'attnlab[ctranslate2]'" in capsys.readouterr().err
