"""Pointer-generator summarization: the copy distribution, decoding, the recipe and the CLI.

References are independent of the code under test: hand-computed mixtures, explicit Python loops
over the extended vocabulary, and the generated task's own record of which names and numbers a
summary must contain.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.cli import main
from attnlab.data.summaries import facts_splits, read_jsonl
from attnlab.data.text_tasks import make_summarization_task, write_jsonl
from attnlab.data.tokenizers import WordVocab
from attnlab.decode import beam_search, greedy_decode
from attnlab.models.pointer_generator import (
    PRESETS,
    PointerGenerator,
    PointerGeneratorConfig,
    mix_copy_distribution,
)
from attnlab.recipes import apply_overrides
from attnlab.recipes import summarize as sm

V = 12  # vocabulary of the unit-test models: ids 0..11, extended ids from 12
PAD, UNK, BOS, EOS = 0, 1, 2, 3


def tiny_model(*, cell: str = "lstm", coverage: bool = False, seed: int = 0) -> PointerGenerator:
    torch.manual_seed(seed)
    config = PointerGeneratorConfig(vocab_size=V, cell=cell, coverage=coverage, **PRESETS["tiny"])
    return PointerGenerator(config).eval()


def batch_with_oovs():
    # Row 0 copies extended ids 12 and 13 (two rare words, 12 twice); row 1 is padded.
    src = torch.tensor([[5, 12, 6, 13, 12, 7], [8, 9, 12, 0, 0, 0]])  # (B, S)
    tgt_in = torch.tensor([[BOS, 12, 6, 13], [BOS, 12, 9, 0]])  # (B, T)
    labels = torch.tensor([[12, 6, 13, EOS], [12, 9, EOS, 0]])  # (B, T)
    return src, tgt_in, labels


# --------------------------------------------------------------------------------------------
# The generated task.
# --------------------------------------------------------------------------------------------


def test_facts_task_is_deterministic_and_its_summaries_keep_the_rare_words():
    a = make_summarization_task(50, seed=3)
    assert a == make_summarization_task(50, seed=3)
    assert make_summarization_task(20, seed=3) == a[:20]
    for ex in a:
        doc, summary = ex.document.split(), ex.summary.split()
        assert ex.rare and all(w in doc and w in summary for w in ex.rare)
        assert len(summary) < len(doc)
    other = {w for ex in make_summarization_task(50, seed=4) for w in ex.rare if not w.isdigit()}
    names = {w for ex in a for w in ex.rare if not w.isdigit()}
    assert len(names & other) <= 2  # invented names almost never repeat across seeds


# --------------------------------------------------------------------------------------------
# The extended vocabulary.
# --------------------------------------------------------------------------------------------


def test_word_vocab_extends_per_document_and_round_trips(tmp_path):
    vocab = WordVocab(["the", "cat", "sat", "."])
    assert vocab.vocab_size == 8 and vocab.token_to_id("the") == 4
    words = vocab.split("The zorg sat, the blip zorg.")
    assert words == ["the", "zorg", "sat", ",", "the", "blip", "zorg", "."]
    ids, oovs = vocab.encode_source(words)
    assert oovs == ["zorg", ",", "blip"]
    assert ids == [4, 8, 6, 9, 4, 10, 8, 7]
    assert vocab.encode_target(["zorg", "ate", "the", "blip"], oovs) == [8, vocab.unk_id, 4, 10]
    assert vocab.decode([8, 6, vocab.eos_id, 10], oovs) == ["zorg", "sat", "blip"]
    with pytest.raises(ValueError, match="only 3 rare words"):
        vocab.decode([11], oovs)
    vocab.save(tmp_path, "vocab")
    again = WordVocab.load(tmp_path / "vocab.json")
    assert again.encode_source(words) == (ids, oovs) and again.lowercase


def test_word_vocab_build_keeps_frequent_words():
    vocab = WordVocab.build(["a b b c c c", "c d"], max_size=6, min_count=2)
    assert [vocab.id_to_token(i) for i in range(4, vocab.vocab_size)] == ["c", "b"]


# --------------------------------------------------------------------------------------------
# The copy distribution (eq. 9).
# --------------------------------------------------------------------------------------------


def test_mix_copy_distribution_equals_a_hand_computed_mixture():
    p_vocab = torch.tensor([[[0.1, 0.2, 0.3, 0.4]]])  # (1, 1, V=4)
    weights = torch.tensor([[[0.5, 0.25, 0.25, 0.0]]])  # (1, 1, S=4); the last position is padding
    src_ext = torch.tensor([[2, 5, 2, 0]])  # word 2 twice, one rare word (extended id 5)
    p_gen = torch.tensor([[0.6]])
    out = mix_copy_distribution(p_vocab, weights, p_gen, src_ext, 6)[0, 0]
    expected = [0.6 * 0.1, 0.6 * 0.2, 0.6 * 0.3 + 0.4 * 0.75, 0.6 * 0.4, 0.0, 0.4 * 0.25]
    torch.testing.assert_close(out, torch.tensor(expected))


@settings(max_examples=12, deadline=None)
@given(
    cell=st.sampled_from(["lstm", "gru"]),
    coverage=st.booleans(),
    lengths=st.lists(st.integers(1, 7), min_size=1, max_size=3),
    n_rare=st.integers(0, 3),
    seed=st.integers(0, 1000),
)
def test_final_distribution_sums_to_one_and_attention_is_a_distribution_over_real_positions(
    cell, coverage, lengths, n_rare, seed
):
    g = torch.Generator().manual_seed(seed)
    B, S, T = len(lengths), max(lengths), 5
    src = torch.randint(4, V + n_rare, (B, S), generator=g)  # (B, S) incl. extended ids
    mask = torch.arange(S).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)  # (B, S) right padding
    src = src.masked_fill(~mask, PAD)
    n_ext = max(V, int(src.max()) + 1)
    tgt_in = torch.randint(4, n_ext, (B, T), generator=g)
    model = tiny_model(cell=cell, coverage=coverage, seed=seed)
    out = model(src, tgt_in, need_weights=True)
    probs = out.logits.exp()  # (B, T, V_ext)
    assert probs.shape == (B, T, n_ext)
    torch.testing.assert_close(probs.sum(-1), torch.ones(B, T))
    weights = out.attentions["cross"][0][:, 0]  # (B, T, S)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, T))
    assert bool((weights >= 0).all()) and bool((weights[~mask.unsqueeze(1).expand_as(weights)] == 0).all())
    assert bool(((out.p_gen > 0) & (out.p_gen < 1)).all())
    # A rare word can only be copied: its probability is (1 − p_gen) × its attention mass.
    for b in range(B):
        for rare in range(V, n_ext):
            where = src[b] == rare
            copy = (1 - out.p_gen[b]) * weights[b][:, where].sum(-1)  # (T,)
            torch.testing.assert_close(probs[b, :, rare], copy)


# --------------------------------------------------------------------------------------------
# Loss, coverage, decoding.
# --------------------------------------------------------------------------------------------


def test_loss_is_the_mean_negative_log_probability_of_the_gold_words():
    src, tgt_in, labels = batch_with_oovs()
    out = tiny_model()(src, tgt_in, labels=labels)
    terms = [-out.logits[b, t, labels[b, t]] for b in range(2) for t in range(4) if labels[b, t] != PAD]
    torch.testing.assert_close(out.loss, torch.stack(terms).mean())
    assert out.coverage_loss is None


def test_coverage_loss_is_the_overlap_of_attention_with_past_attention():
    src, tgt_in, labels = batch_with_oovs()
    model = tiny_model(coverage=True)
    model.config.coverage_weight = 0.5
    with torch.no_grad():
        out = model(src, tgt_in, labels=labels, need_weights=True)
    a = out.attentions["cross"][0][:, 0]  # (B, T, S)
    total, n = 0.0, 0
    for b in range(2):
        past = torch.zeros(src.shape[1])
        for t in range(4):
            if labels[b, t] != PAD:
                total += float(torch.minimum(a[b, t], past).sum())
                n += 1
            past = past + a[b, t]
    assert out.coverage_loss.item() == pytest.approx(total / n, rel=1e-5)
    assert out.loss.item() == pytest.approx(out.nll.item() + 0.5 * total / n, rel=1e-5)


def test_rare_source_words_are_read_as_unk():
    src, _, _ = batch_with_oovs()
    model = tiny_model()
    as_unk = src.masked_fill(src >= V, UNK)
    torch.testing.assert_close(model.start(src).memory, model.start(as_unk).memory)


def test_labels_outside_the_extended_vocabulary_are_rejected():
    src, tgt_in, labels = batch_with_oovs()
    labels[0, 0] = V + 5
    with pytest.raises(ValueError, match="extended vocabulary"):
        tiny_model()(src, tgt_in, labels=labels)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("coverage", [False, True])
def test_step_by_step_decoding_equals_the_teacher_forced_pass(cell, coverage):
    src, tgt_in, _ = batch_with_oovs()
    model = tiny_model(cell=cell, coverage=coverage)
    full = model(src, tgt_in, need_weights=True)
    state = model.start(src)
    for t in range(tgt_in.shape[1]):
        step = model.step(tgt_in[:, t : t + 1], state, need_weights=True)
        finite = torch.isfinite(full.logits[:, t])
        assert torch.equal(finite, torch.isfinite(step.logits))
        torch.testing.assert_close(step.logits[finite], full.logits[:, t][finite])
        torch.testing.assert_close(step.cross_weights[:, 0, 0], full.attentions["cross"][0][:, 0, t])


def test_greedy_and_beam_search_decode_into_the_extended_vocabulary():
    src, _, _ = batch_with_oovs()
    model = tiny_model(coverage=True)
    greedy = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, pad_id=PAD, max_len=6, return_attention=True)
    beam1 = beam_search(model, src, bos_id=BOS, eos_id=EOS, pad_id=PAD, max_len=6, beam_size=1, alpha=0.0)
    beam3 = beam_search(model, src, bos_id=BOS, eos_id=EOS, pad_id=PAD, max_len=6, beam_size=3, return_attention=True)
    for b, (g, one) in enumerate(zip(greedy, beam1)):
        assert g.tokens == one.tokens
        n_real = int((src[b] != PAD).sum())
        assert g.cross_attention.shape[-1] == n_real
        torch.testing.assert_close(g.cross_attention.sum(-1), torch.ones(g.cross_attention.shape[:-1]))
    rare_of_row = [set((src[b][src[b] >= V]).tolist()) for b in range(2)]
    for b, h in enumerate(beam3):
        assert all(t < V or t in rare_of_row[b] for t in h.tokens)  # only this document's rare words


# --------------------------------------------------------------------------------------------
# Data files.
# --------------------------------------------------------------------------------------------


def test_read_jsonl_reads_records_and_names_bad_lines(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text('{"document": "a b c", "summary": "a"}\n\n{"document": "d e", "summary": "e", "id": 3}\n')
    assert read_jsonl(good) == [("a b c", "a"), ("d e", "e")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"document": "a", "summary": "b"}\n{"document": "a"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: \"summary\""):
        read_jsonl(bad)
    assert read_jsonl(bad, require_summary=False)[1] == ("a", None)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"document": "a", "summary": "b"}\n{oops\n')
    with pytest.raises(ValueError, match="broken.jsonl:2: not valid JSON"):
        read_jsonl(broken)


# --------------------------------------------------------------------------------------------
# Training on the generated task (one model shared by the tests below).
# --------------------------------------------------------------------------------------------

FAST = ["train.epochs=4", "max_tokens=512", "eval_examples=30", "train.progress=false", "train.log_every=1000"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("summarize")
    splits = facts_splits(600, seed=0, n_valid=30, n_test=60, max_facts=1, max_fillers=2)
    setup = apply_overrides(
        sm.PRESETS["facts"], FAST + [f"train.out_dir={json.dumps(str(out))}"], PointerGeneratorConfig
    )
    summarizer, result = sm.train_summarizer(setup, splits.train, splits.valid)
    return summarizer, result, splits.test, out


def test_trains_to_high_rouge_and_copies_unseen_names(trained):
    summarizer, result, test, _ = trained
    scores = sm.evaluate_facts(summarizer, test, beam_size=1)
    assert scores["rougeL"] >= 0.8, scores
    assert scores["rouge2"] >= 0.7, scores
    assert scores["copy_recall"] >= 0.8, scores
    # The names and numbers are (almost all) outside the vocabulary: they can only have been copied.
    rare = [w for e in test for w in e.rare]
    assert sum(summarizer.vocab.token_to_id(w) is None for w in rare) >= 0.9 * len(rare)
    assert result.best["rougeL"] >= 0.8


def test_copied_words_get_low_p_gen_and_attention_on_their_source_position(trained):
    summarizer, _, test, _ = trained
    s = summarizer.summarize([test[0].document], beam_size=1, return_attention=True)[0]
    assert s.attention.shape == (len(s.tokens), len(s.src_tokens))
    torch.testing.assert_close(s.attention.sum(-1), torch.ones(len(s.tokens)))
    copied = [i for i, w in enumerate(s.tokens[:-1]) if summarizer.vocab.token_to_id(w) is None]
    assert copied, s.text
    for i in copied:
        assert s.p_gen[i] < 0.5
        assert s.src_tokens[int(s.attention[i].argmax())] == s.tokens[i]


def test_checkpoint_round_trip_and_beam_search(trained):
    summarizer, _, test, out = trained
    loaded = sm.load_summarizer(out)
    docs = [e.document for e in test[:8]]
    assert [s.text for s in loaded.summarize(docs, beam_size=1)] == [
        s.text for s in summarizer.summarize(docs, beam_size=1)
    ]
    beam = sm.evaluate_facts(loaded, test[:20], beam_size=3)
    assert beam["rougeL"] >= 0.75


def test_summarize_cli_prints_summaries_rouge_and_writes_the_plot(trained, tmp_path, capsys):
    _, _, test, out = trained
    data = write_jsonl(test[:5], tmp_path / "test.jsonl")
    plot = tmp_path / "attn.png"
    assert (
        main(["summarize", "--model", str(out), "--input", str(data), "--beam", "1", "--attention-plot", str(plot)])
        == 0
    )
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert len(lines) == 5 and all(lines)
    assert "ROUGE-L" in captured.err
    assert plot.stat().st_size > 1000
    assert main(["summarize", "--model", str(out), test[0].document]) == 0
    assert test[0].rare[0] in capsys.readouterr().out


def test_train_summarize_cli_on_jsonl_and_on_the_generated_task(tmp_path, capsys):
    examples = make_summarization_task(40, seed=9, max_facts=1, max_fillers=1)
    train_file = write_jsonl(examples[:32], tmp_path / "train.jsonl")
    valid_file = write_jsonl(examples[32:], tmp_path / "valid.jsonl")
    small = ["--overrides", "max_tokens=256", "eval_examples=4", "train.progress=false"]
    out = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "summarize",
                "--train",
                str(train_file),
                "--valid",
                str(valid_file),
                "--out",
                str(out),
                "--preset",
                "facts",
                "--epochs",
                "1",
                "--device",
                "cpu",
                *small,
            ]
        )
        == 0
    )
    assert (out / "best" / "vocab.json").is_file() and (out / "log.jsonl").is_file()
    assert sm.load_summarizer(out).model.config.vocab_size > 4
    gen = tmp_path / "gen"
    assert (
        main(["train", "summarize", "--out", str(gen), "--n-train", "40", "--epochs", "1", "--device", "cpu", *small])
        == 0
    )
    scores = json.loads((gen / "test.json").read_text())
    assert set(scores) >= {"rouge1", "rouge2", "rougeL", "copy_recall"}
    assert all(0.0 <= scores[k] <= 1.0 for k in ("rouge1", "rouge2", "rougeL", "copy_recall"))
    assert "ROUGE-L" in capsys.readouterr().out
    assert main(["train", "summarize", "--out", str(gen), "--valid", str(valid_file)]) == 2


def test_summarizer_rejects_bad_input():
    with pytest.raises(ValueError, match="hidden_size"):
        PointerGenerator(PointerGeneratorConfig(vocab_size=10, hidden_size=7))
    with pytest.raises(ValueError, match="unk_id"):
        PointerGenerator(PointerGeneratorConfig(vocab_size=10, unk_id=10))
    assert math.isclose(sm.copy_recall(["a b", "c"], [["a", "x"], ["c"]]), 2 / 3)
