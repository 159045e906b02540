"""attnlab.recipes.lm: data splits and batches for LM/MLM training, exact resume, model loading."""

from __future__ import annotations

import dataclasses
import itertools
import json

import pytest
import torch

from attnlab.models.bert import BertConfig, BertForMaskedLM, bert_config
from attnlab.models.gpt import GPT, GPTConfig, gpt_config
from attnlab.recipes import lm
from attnlab.train import TrainConfig, lr_multiplier

TEXT = "".join(f"line {i}: the quick brown fox jumps over the lazy dog.\n" for i in range(60))


def lm_setup(**kw) -> lm.LMSetup:
    return dataclasses.replace(lm.LM_PRESETS["tiny"], **kw)


def test_split_is_by_position_and_the_tokenizer_sees_only_training_text():
    train_text, valid_text = lm.split_text(TEXT, 0.1)
    assert train_text + valid_text == TEXT
    assert len(valid_text) == len(TEXT) - int(0.9 * len(TEXT))
    with pytest.raises(ValueError, match="valid_fraction"):
        lm.split_text(TEXT, 1.0)
    with pytest.raises(ValueError, match="empty"):
        lm.split_text("   ", 0.1)


def test_lm_batches_are_contiguous_blocks_covering_the_stream_once():
    setup = lm_setup(block_size=16, batch_size=4)
    ids = torch.arange(1000)
    task = lm.LMTask(setup, gpt_config("tiny", vocab_size=1000), None, ids, torch.arange(50))
    batches = task.batches(0, 0, 1)
    blocks = torch.cat(batches)  # (n, T)
    assert blocks.shape[1] == 16
    assert (blocks[:, 1:] - blocks[:, :-1] == 1).all()  # each block is a contiguous slice
    starts = sorted(blocks[:, 0].tolist())
    assert all(b - a == 16 for a, b in itertools.pairwise(starts))  # no overlap, no gap
    assert len(starts) >= (1000 - 16) // 16
    assert [b.tolist() for b in task.batches(0, 0, 1)] == [b.tolist() for b in batches]  # reproducible
    assert [b.tolist() for b in task.batches(1, 0, 1)] != [b.tolist() for b in batches]  # reshuffled
    halves = task.batches(0, 0, 2) + task.batches(0, 1, 2)
    assert sorted(torch.cat(halves)[:, 0].tolist()) == starts


def test_lm_task_validation_and_loss_counts():
    cfg = gpt_config("tiny", vocab_size=50)
    with pytest.raises(ValueError, match="exceeds the model's n_positions"):
        lm.LMTask(lm_setup(block_size=65), cfg, None, torch.arange(500) % 50, torch.arange(20))
    with pytest.raises(ValueError, match="fewer than one block"):
        lm.LMTask(lm_setup(block_size=32), cfg, None, torch.arange(20), torch.arange(20))
    task = lm.LMTask(lm_setup(block_size=8, batch_size=3), cfg, None, torch.arange(500) % 50, torch.arange(40) % 50)
    model = GPT(cfg)
    batch = task.batches(0, 0, 1)[0]
    loss, n = task.loss(model, batch)
    assert n == 3 * 7 and loss.item() == pytest.approx(model(batch, labels=batch).loss.item())
    metrics = task.evaluate(model.eval())
    blocks = (torch.arange(40) % 50).view(5, 8)
    assert metrics["loss"] == pytest.approx(model(blocks, labels=blocks).loss.item(), rel=1e-5)


def test_train_lm_resume_reproduces_the_uninterrupted_run(tmp_path):
    def run(out, max_steps, resume=False):
        setup = lm_setup(
            block_size=16,
            batch_size=4,
            train=dataclasses.replace(
                lm.LM_PRESETS["tiny"].train,
                out_dir=str(out),
                epochs=50,
                max_steps=max_steps,
                progress=False,
                save_every_steps=1,
                log_every=1,
            ),
        )
        return lm.train_lm(setup, TEXT, resume=resume)

    full, _, _ = run(tmp_path / "a", 6)
    run(tmp_path / "b", 3)
    resumed, result, tok = run(tmp_path / "b", 6, resume=True)
    assert result.steps == 6
    for (name, p), q in zip(full.state_dict().items(), resumed.state_dict().values()):
        torch.testing.assert_close(p, q, msg=name)
    logs = [(tmp_path / d / "log.jsonl").read_text().splitlines() for d in ("a", "b")]
    losses = [[json.loads(l)["loss"] for l in log if '"loss"' in l and '"eval"' not in l] for log in logs]
    assert losses[0] == pytest.approx(losses[1])
    assert tok.kind == "char"


def test_cosine_schedule_by_steps_or_by_the_time_budget():
    cfg = TrainConfig(lr=1.0, warmup_steps=10, schedule="cosine")
    assert lr_multiplier(5, cfg, 110) == pytest.approx(0.5)  # warm-up
    assert lr_multiplier(10, cfg, 110) == pytest.approx(1.0)
    assert lr_multiplier(60, cfg, 110) == pytest.approx(0.55)  # half-way: the mean of 1 and 0.1
    assert lr_multiplier(500, cfg, 110) == pytest.approx(0.1)
    # Without a step count the share of the time budget spent decides, whatever the step.
    assert lr_multiplier(60, cfg, None, progress=0.0) == pytest.approx(1.0)
    assert lr_multiplier(60, cfg, None, progress=0.5) == pytest.approx(0.55)
    assert lr_multiplier(7, cfg, None, progress=0.5) == pytest.approx(0.7)  # warm-up still counts in steps
    assert lr_multiplier(60, cfg, None, progress=1.3) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="needs max_steps or time_budget_s"):
        lr_multiplier(60, cfg)


def test_time_budgeted_cosine_run_anneals_when_the_clock_runs_out(tmp_path):
    setup = lm_setup(
        block_size=16,
        batch_size=4,
        train=dataclasses.replace(
            lm.LM_PRESETS["tiny"].train,
            out_dir=str(tmp_path),
            epochs=10_000,
            time_budget_s=2.0,
            progress=False,
            schedule="cosine",
            warmup_steps=2,
            lr=1e-3,
            log_every=1,
        ),
    )
    _, result, _ = lm.train_lm(setup, TEXT)
    assert result.stop_reason == "time_budget" and result.steps > 20
    lrs = [r["lr"] for r in result.history if "lr" in r]
    assert lrs[2] > 0.9e-3  # just after warm-up: near the peak
    assert all(b <= a + 1e-12 for a, b in itertools.pairwise(lrs[2:]))  # then only down
    assert lrs[-1] < 0.2e-3  # close to the 10% floor when the budget is spent


def test_mlm_sequences_and_next_sentence_pairs():
    cfg = bert_config("tiny", vocab_size=2000)
    setup = dataclasses.replace(lm.MLM_PRESETS["tiny"], max_len=11, next_sentence=True, batch_size=1000)

    class Tok:
        pad_id, unk_id, bos_id, eos_id, mask_id, vocab_size = 0, 1, 2, 3, 4, 2000

    stream = torch.arange(5, 5 + 4 * 400)  # every segment distinct
    task = lm.MLMTask(setup, cfg, Tok(), stream, stream[:100])
    assert task.seg == 4
    (batch,) = task.batches(0, 0, 1)
    n = batch.input_ids.shape[0]
    assert batch.input_ids.shape == (n, 11)
    originals = torch.where(batch.labels == -100, batch.input_ids, batch.labels)  # undo the masking
    assert (originals[:, 0] == 2).all() and (originals[:, 5] == 3).all() and (originals[:, 10] == 3).all()
    assert (batch.token_type_ids[:, :6] == 0).all() and (batch.token_type_ids[:, 6:] == 1).all()
    segs = task.train_segments
    a, b = originals[:, 1:5], originals[:, 6:10]
    index = {tuple(s.tolist()): i for i, s in enumerate(segs)}
    follows = torch.tensor([index[tuple(y.tolist())] == index[tuple(x.tolist())] + 1 for x, y in zip(a, b)])
    assert torch.equal(follows, batch.next_sentence_labels == 0)
    assert batch.next_sentence_labels.float().mean().item() == pytest.approx(0.5, abs=0.08)
    # Special tokens are never selected for prediction.
    assert not (batch.labels[:, [0, 5, 10]] != -100).any()
    selected = (batch.labels != -100).float().sum() / (n * 8)
    assert selected.item() == pytest.approx(0.15, abs=0.03)


def test_train_mlm_then_load_it_as_masked_lm_and_as_sentence_encoder(tmp_path):
    setup = dataclasses.replace(
        lm.MLM_PRESETS["tiny"],
        train=dataclasses.replace(lm.MLM_PRESETS["tiny"].train, out_dir=str(tmp_path), max_steps=3, progress=False),
    )
    model, result, tok = lm.train_mlm(setup, TEXT)
    assert isinstance(model, BertForMaskedLM) and result.steps == 3
    assert {"loss", "accuracy"} <= set(result.best)
    loaded, loaded_tok = lm.load_language_model(tmp_path)
    assert isinstance(loaded, BertForMaskedLM) and loaded_tok.vocab_size == tok.vocab_size
    for p, q in zip(model.state_dict().values(), loaded.state_dict().values()):
        assert torch.equal(p, q)
    enc = lm.load_encoder(tmp_path)
    vectors = enc.embed(["the quick fox", "lazy dog"])
    assert vectors.shape == (2, model.config.d_model)
    torch.testing.assert_close(vectors.norm(dim=-1), torch.ones(2))


def test_load_language_model_rejects_other_checkpoints(tmp_path):
    from attnlab import checkpoint as ckpt
    from attnlab.data.tokenizers import CharTokenizer

    tok = CharTokenizer.train(["abc"])
    ckpt.save_checkpoint(
        tmp_path / "x", model=torch.nn.Linear(2, 2), config={"model_type": "transformer"}, tokenizers={"tokenizer": tok}
    )
    with pytest.raises(ValueError, match="not a language model"):
        lm.load_language_model(tmp_path / "x")


def test_overrides_are_checked():
    setup = lm.apply_overrides(
        lm.LM_PRESETS["tiny"],
        ["model.n_layers=3", "train.lr=0.01", "batch_size=5", "train.betas=[0.9, 0.95]"],
        GPTConfig,
    )
    assert setup.model_overrides == {"n_layers": 3} and setup.train.lr == 0.01 and setup.batch_size == 5
    assert setup.train.betas == (0.9, 0.95)
    assert lm.LM_PRESETS["tiny"].train.lr != 0.01  # the recipe itself is untouched
    for bad, match in (
        ("model.width=3", "unknown model field"),
        ("train.speed=1", "unknown training field"),
        ("colour=red", "unknown setting"),
        ("n_layers", "key=value"),
        ("model.n_layer=3", r"^model.n_layer is now called model.n_layers .*; write model.n_layers=...$"),
        ("model.n_embd=64", r"^model.n_embd is now called model.d_model "),
    ):
        with pytest.raises(ValueError, match=match):
            lm.apply_overrides(lm.LM_PRESETS["tiny"], [bad], GPTConfig)
    with pytest.raises(ValueError, match=r"^model.n_head is now called model.n_heads "):
        lm.apply_overrides(lm.MLM_PRESETS["tiny"], ["model.n_head=2"], BertConfig)
    mlm_setup = lm.apply_overrides(lm.MLM_PRESETS["tiny"], ["model.type_vocab_size=3"], BertConfig)
    assert mlm_setup.model_overrides == {"type_vocab_size": 3}
    assert isinstance(lm.LM_PRESETS["shakespeare-char"].train, TrainConfig)


# GPT-2's names, which GPTConfig and BertConfig had before issue 38 and old config.json files hold.
OLD_NAMES = {"d_model": "n_embd", "n_layers": "n_layer", "n_heads": "n_head"}


def with_old_field_names(shipped: str, folder) -> None:
    """Copy the shipped model ``shipped`` to ``folder`` with its config.json written as before issue 38."""
    import shutil

    from attnlab import assets

    shutil.copytree(assets.asset_folder(shipped), folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    old = {OLD_NAMES.get(k, k): v for k, v in config.items()}
    assert set(OLD_NAMES.values()) <= set(old) and not set(OLD_NAMES) & set(old)
    (folder / "config.json").write_text(json.dumps(old, indent=2), encoding="utf-8")


@pytest.mark.parametrize("shipped", ["shakespeare-char", "shakespeare-mlm"])
def test_a_checkpoint_with_the_old_field_names_loads_to_the_same_model(shipped, tmp_path):
    with_old_field_names(shipped, tmp_path / "old")
    new_model, new_tok = lm.load_language_model(shipped)
    old_model, old_tok = lm.load_language_model(tmp_path / "old")
    assert type(old_model) is type(new_model) and old_model.config == new_model.config
    assert (old_model.config.d_model, old_model.config.n_heads) == (64, 4)
    ids = torch.tensor([new_tok.encode("To be, or not to be: that is the question.")])
    assert old_tok.encode("To be") == new_tok.encode("To be")
    with torch.no_grad():
        assert torch.equal(old_model(ids).logits, new_model(ids).logits)
