"""`attnlab export --to hf`: HuggingFace ``transformers`` computes what attnlab computes.

On tiny trained Transformers (pre-norm → Pegasus, post-norm → Marian; relu, gelu and gelu_tanh; one
shared vocabulary, two separate ones, and an untied output), the exported folder, loaded back with
``AutoModelForSeq2SeqLM.from_pretrained``, must hold the position table attnlab's sinusoid implies
in ``transformers``' layout, give the same first-step logits and the same log-probability for every
token of a whole output (within 1e-4), and ``generate`` must give attnlab's greedy token ids exactly,
in padded batches. Beam search is compared for what holds (see its test). Then the command itself,
on the shipped ``demo`` model, and what it refuses.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from attnlab.cli import main as cli_main
from attnlab.decode import beam_search, greedy_decode
from attnlab.export_hf import HFTranslator, export_hf, hf_architecture, hf_permutation, require_transformers
from attnlab.loading import load_model
from attnlab.positional import sinusoidal_encoding

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ for export_models
from export_models import BOS, EOS, MAX_LEN, padded, random_sources, tiny  # noqa: E402

transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install 'attnlab[hf]')")

# name: (norm, activation, shared vocabulary, tied output)
VARIANTS = {
    "pre-relu-shared": ("pre", "relu", True, True),
    "post-relu-shared": ("post", "relu", True, True),
    "pre-gelu-separate": ("pre", "gelu", False, True),
    "post-gelu-separate": ("post", "gelu", False, True),
    "post-gelu_tanh-shared-untied": ("post", "gelu_tanh", True, False),
}


@pytest.fixture(scope="module", params=list(VARIANTS))
def exported(request, tmp_path_factory):
    norm, activation, shared, tied = VARIANTS[request.param]
    model, src_tok, tgt_tok = tiny(norm, activation, shared, tie_output=tied)
    out = export_hf(model, src_tok, tgt_tok, tmp_path_factory.mktemp(request.param) / "hf")
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(out, dtype=torch.float32).eval()
    return model, src_tok, tgt_tok, hf, out


def _hf_generate(hf, sources: list[list[int]], **options) -> list[list[int]]:
    src = padded(sources)  # (B, S)
    # max_length counts the start token: MAX_LEN new tokens at most, as attnlab's max_len.
    out = hf.generate(
        input_ids=src, attention_mask=(src != 0).long(), do_sample=False, max_length=1 + MAX_LEN, **options
    )  # (B, 1 + T)
    assert bool((out[:, 0] == BOS).all())  # decoder_start_token_id
    rows = out[:, 1:].tolist()
    return [row[: row.index(EOS)] if EOS in row else row for row in rows]


def test_architecture_and_position_table(exported):
    model, _, tgt_tok, hf, out = exported
    arch = {"pre": "pegasus", "post": "marian"}[model.config.norm]
    assert hf_architecture(model) == arch == hf.config.model_type
    c = model.config
    # Positions: attnlab's sinusoid with the hidden dimensions permuted is transformers' own table,
    # and it is what the loaded model uses (Marian does not even save it: it is recomputed on load).
    ours = sinusoidal_encoding(c.max_len, c.d_model)[:, hf_permutation(c.d_model)]  # (max_len, D)
    for side in (hf.model.encoder, hf.model.decoder):
        table = side.embed_positions.weight
        assert table.shape == ours.shape
        assert torch.allclose(table, ours, atol=1e-6)
        assert torch.allclose(side.embed_positions.create_weight(), ours, atol=1e-6)
    # Nothing of what generate reads is left at transformers' defaults.
    cfg, gen = hf.config, hf.generation_config
    assert (gen.decoder_start_token_id, gen.eos_token_id, gen.pad_token_id) == (BOS, EOS, 0)
    assert gen.forced_eos_token_id is None and cfg.forced_eos_token_id is None
    assert cfg.scale_embedding and cfg.max_position_embeddings == c.max_len
    # Marian ties the output to the target embedding even with separate vocabularies; Pegasus only
    # when one matrix serves all three.
    assert cfg.tie_word_embeddings == (c.tie_output if arch == "marian" else c.share_embeddings and c.tie_output)
    # Logits past the target vocabulary (Pegasus, separate vocabularies) are −∞ as exported.
    bias = hf.final_logits_bias[0]
    assert bool((bias[: tgt_tok.vocab_size] == 0).all())
    assert bool(torch.isneginf(bias[tgt_tok.vocab_size :]).all())
    if arch == "pegasus" and not c.share_embeddings:
        assert bias.shape[0] == max(c.src_vocab_size, c.tgt_vocab_size) > tgt_tok.vocab_size
    info = json.loads((out / "attnlab_export.json").read_text())
    assert info["format"] == "attnlab.hf" and info["architecture"] == hf.config.architectures[0]


@torch.no_grad()
def test_first_step_logits_agree(exported):
    model, src_tok, tgt_tok, hf, _ = exported
    sources = random_sources(src_tok, n=8)
    src = padded(sources)
    theirs = hf(input_ids=src, attention_mask=(src != 0).long(), decoder_input_ids=torch.full((8, 1), BOS)).logits
    theirs = theirs[:, 0]  # (B, V_hf)
    ours = model.step(torch.full((8, 1), BOS), model.start(src)).logits  # (B, V)
    V = tgt_tok.vocab_size
    assert ours.shape == (8, V)
    diff = (theirs[:, :V] - ours).abs().max().item()
    assert diff < 1e-4, f"first-step logits differ by {diff:.2e}"
    assert bool(torch.isneginf(theirs[:, V:]).all())  # padding columns, if any, never win


@torch.no_grad()
def test_every_token_log_prob_agrees(exported):
    # Teacher-forced: the whole greedy output of attnlab, so every position of the table and the
    # causal mask are exercised; padded batch on both sides of the model.
    model, src_tok, tgt_tok, hf, _ = exported
    sources = random_sources(src_tok, n=8, seed=2)
    hyps = [h.tokens for h in greedy_decode(model, padded(sources), bos_id=BOS, eos_id=EOS, max_len=MAX_LEN)]
    src, tgt_in = padded(sources), padded([[BOS] + h for h in hyps])  # (B, S), (B, T)
    ours = torch.log_softmax(model(src, tgt_in).logits, -1)  # (B, T, V)
    theirs = hf(input_ids=src, attention_mask=(src != 0).long(), decoder_input_ids=tgt_in).logits
    theirs = torch.log_softmax(theirs, -1)[..., : tgt_tok.vocab_size]  # (B, T, V)
    for row, h in enumerate(hyps):
        n = len(h) + 1  # the output and EOS (or the length limit)
        n = min(n, tgt_in.shape[1])
        diff = (theirs[row, :n] - ours[row, :n]).abs().max().item()
        assert diff < 1e-4, f"sentence {row}: log-probs differ by {diff:.2e}"


def test_greedy_generate_identical(exported):
    model, src_tok, _, hf, out = exported
    sources = random_sources(src_tok)
    one_by_one = [
        greedy_decode(model, torch.tensor([s]), bos_id=BOS, eos_id=EOS, max_len=MAX_LEN)[0].tokens for s in sources
    ]
    with torch.inference_mode():
        assert _hf_generate(hf, sources, num_beams=1) == one_by_one  # one padded batch
    # HFTranslator: the same, batched and length-limited as attnlab's Translator.
    assert HFTranslator(out).translate_tokens(sources, max_len=MAX_LEN, batch_size=16) == one_by_one
    # Not a vacuous match: outputs end by EOS at many lengths.
    assert len({len(t) for t in one_by_one if len(t) < MAX_LEN}) >= 5


def test_beam4(exported):
    # What holds by construction: generate scores hypotheses with the same log-probabilities as
    # attnlab (its sequence score, α = 0, is attnlab's teacher-forced log-probability of the same
    # tokens, within 1e-4). What the algorithms do not guarantee: which hypotheses the two searches
    # keep. generate moves a finished hypothesis out of the beam and keeps K live ones; attnlab keeps
    # it in its slot. They pick the same output unless a hypothesis that only one of them kept alive
    # ends better (docs/export.md). On these models that never happened (0 of 600 sentences over
    # three seeds when this test was written), so the outputs are asserted identical; should a
    # transformers release change that, the score checks say whether it is that bookkeeping.
    model, src_tok, _, hf, _ = exported
    sources = random_sources(src_tok)
    ours = [
        beam_search(model, torch.tensor([s]), bos_id=BOS, eos_id=EOS, beam_size=4, alpha=0.0, max_len=MAX_LEN)[0]
        for s in sources
    ]
    src = padded(sources)
    with torch.inference_mode():
        out = hf.generate(
            input_ids=src,
            attention_mask=(src != 0).long(),
            num_beams=4,
            do_sample=False,
            max_length=1 + MAX_LEN,
            length_penalty=0.0,
            early_stopping="never",
            output_scores=True,
            return_dict_in_generate=True,
        )
    rows = out.sequences[:, 1:].tolist()
    theirs = [row[: row.index(EOS)] if EOS in row else row for row in rows]

    def log_prob(source: list[int], tokens: list[int]) -> float:
        with torch.no_grad():
            full = tokens + [EOS] if len(tokens) < MAX_LEN else tokens
            logits = model(torch.tensor([source]), torch.tensor([[BOS] + full[:-1]])).logits[0]  # (T, V)
            return torch.log_softmax(logits, -1).gather(1, torch.tensor(full)[:, None]).sum().item()

    for s, t, score in zip(sources, theirs, out.sequences_scores.tolist()):
        assert abs(log_prob(s, t) - score) < 1e-4
    for s, o in zip(sources, ours):
        assert abs(log_prob(s, o.tokens) - o.score) < 1e-4
    differ = [i for i, (o, t) in enumerate(zip(ours, theirs)) if o.tokens != t]
    assert not differ, f"beam-4 outputs differ on sentences {differ}"
    greedy = [
        greedy_decode(model, torch.tensor([s]), bos_id=BOS, eos_id=EOS, max_len=MAX_LEN)[0].tokens for s in sources
    ]
    # Not vacuous: the beam changes a good part of the greedy outputs.
    assert sum(o.tokens != g for o, g in zip(ours, greedy)) >= len(sources) // 5


def test_export_command_on_the_demo_model(tmp_path, capsys):
    # demo: pre-norm with separate vocabularies (200 source, 20 target tokens), the padded Pegasus layout.
    out = tmp_path / "demo-hf"
    assert cli_main(["export", "--model", "demo", "--to", "hf", str(out)]) == 0
    assert "exported demo" in capsys.readouterr().out
    assert {"config.json", "generation_config.json", "model.safetensors", "src_tokenizer.json"} <= {
        p.name for p in out.iterdir()
    }
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(out)
    assert type(hf) is transformers.PegasusForConditionalGeneration
    texts = ["three hundred forty-two thousand", "seven", "nineteen thousand and five", "two million one hundred"]
    attnlab_translator = load_model("demo", family="translate")
    ours = [t.text for t in attnlab_translator.translate(texts, beam_size=1)]
    theirs = HFTranslator(out).translate(texts, beam_size=1)
    assert theirs == ours
    assert ours[0] == "三十四万二千"  # the model does translate: the comparison is not of two empty outputs
    # Beam 4, α = 0: the same translations here (the bookkeeping difference does not arise on these).
    ours4 = [t.text for t in attnlab_translator.translate(texts, beam_size=4, alpha=0.0)]
    assert HFTranslator(out).translate(texts, beam_size=4, length_penalty=0.0) == ours4
    # An existing folder is left alone unless --force; --quantization is CTranslate2's.
    assert cli_main(["export", "--model", "demo", "--to", "hf", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert cli_main(["export", "--model", "demo", "--to", "hf", "--quantization", "int8", "--force", str(out)]) == 2
    assert "ctranslate2 only" in capsys.readouterr().err
    assert (out / "model.safetensors").is_file()  # a refused command changed nothing


def test_what_cannot_be_exported(tmp_path, capsys):
    assert cli_main(["export", "--model", "rnn-plain", "--to", "hf", str(tmp_path / "rnn")]) == 2
    assert "recurrent" in capsys.readouterr().err
    assert not (tmp_path / "rnn").exists()
    model, src_tok, tgt_tok = tiny("pre", "relu", True)
    model.encoder[0].attn_norm.eps = 1e-6
    with pytest.raises(ValueError, match="eps=1e-06"):
        export_hf(model, src_tok, tgt_tok, tmp_path / "eps")
    assert not (tmp_path / "eps").exists()
    model.encoder[0].attn_norm.eps = 1e-5
    model.config.attention = "sliding_window"  # the check reads the config, as the export does
    with pytest.raises(ValueError, match="windowed"):
        hf_architecture(model)


def test_missing_transformers_says_how_to_install(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now raises ImportError
    with pytest.raises(ImportError, match=r"attnlab\[hf\]"):
        require_transformers()
    assert cli_main(["export", "--model", "demo", "--to", "hf", str(tmp_path / "x")]) == 2
    assert "pip install 'attnlab[hf]'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
