"""The translation recipe end to end on tiny generated data: training, checkpoints, resume, CLI."""

import dataclasses
import json

import pytest
import torch

from attnlab import cli
from attnlab.data.tasks import make_splits
from attnlab.recipes import translate as tr
from attnlab.train import TrainConfig


@pytest.fixture(scope="module")
def splits():
    return make_splits("numbers-en-ja", 240, 20, 20, seed=3)


def tiny_setup(out_dir, **train_overrides):
    fields = dict(out_dir=str(out_dir), epochs=3, lr=3e-3, warmup_steps=5, log_every=1, progress=False, seed=7)
    fields.update(train_overrides)
    return dataclasses.replace(
        tr.PRESETS["tiny"],
        tokenizer="bpe",
        vocab_size=120,
        tgt_tokenizer="char",
        joint_vocab=False,
        max_tokens=300,
        eval_sentences=10,
        model_overrides={"dropout": 0.1},
        train=TrainConfig(**fields),
    )


def losses(out_dir):
    records = [json.loads(line) for line in (out_dir / "log.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in records if "loss" in r}


def test_resumed_run_reproduces_the_uninterrupted_losses(tmp_path, splits):
    full_dir, cut_dir = tmp_path / "full", tmp_path / "cut"
    tr.train_translation(tiny_setup(full_dir, max_steps=14, save_every_steps=6), splits.train, splits.valid)
    # "Interrupted" after step 6 (the last save), then resumed to the same end.
    tr.train_translation(tiny_setup(cut_dir, max_steps=6, save_every_steps=6), splits.train, splits.valid)
    tr.train_translation(tiny_setup(cut_dir, max_steps=14, save_every_steps=6), splits.train, splits.valid, resume=True)
    full, cut = losses(full_dir), losses(cut_dir)
    assert sorted(full) == sorted(cut) == list(range(1, 15))
    for step in range(1, 15):
        assert cut[step] == pytest.approx(full[step], rel=1e-6, abs=1e-7), step
    # dropout is on, so the match is not trivial: consecutive losses differ
    assert len({round(v, 6) for v in full.values()}) > 10


def test_resume_without_a_checkpoint_is_a_clear_error(tmp_path, splits):
    with pytest.raises(FileNotFoundError, match="resume"):
        tr.train_translation(tiny_setup(tmp_path / "none"), splits.train, splits.valid, resume=True)


def test_checkpoint_round_trip_gives_identical_translations(tmp_path, splits):
    model, result, translator = tr.train_translation(tiny_setup(tmp_path, max_steps=20), splits.train, splits.valid)
    assert (tmp_path / "best" / "config.json").is_file() and (tmp_path / "last" / "trainer_state.pt").is_file()
    sources = [s for s, _ in splits.test]
    before = translator.translate(sources, beam_size=2, return_attention=True)
    loaded = tr.load_translator(tmp_path)
    after = loaded.translate(sources, beam_size=2, return_attention=True)
    assert [t.text for t in after] == [t.text for t in before]
    for a, b in zip(after, before):
        torch.testing.assert_close(a.cross_attention, b.cross_attention)
        assert a.src_tokens == b.src_tokens and a.tgt_tokens == b.tgt_tokens
        L, H, T, S = a.cross_attention.shape
        assert (T, S) == (len(a.tgt_tokens), len(a.src_tokens))


def test_overrides_are_applied_and_checked():
    setup = tr.apply_overrides(tr.PRESETS["tiny"], ["model.d_model=48", "train.lr=0.01", "vocab_size=99"])
    assert setup.model_overrides["d_model"] == 48 and setup.train.lr == 0.01 and setup.vocab_size == 99
    assert tr.PRESETS["tiny"].train.lr != 0.01  # the named recipe itself is untouched
    with pytest.raises(ValueError, match="unknown model field 'widht'"):
        tr.apply_overrides(tr.PRESETS["tiny"], ["model.widht=3"])
    with pytest.raises(ValueError, match="not key=value"):
        tr.apply_overrides(tr.PRESETS["tiny"], ["lr"])


def test_cli_train_translate_then_translate_and_evaluate(tmp_path, splits, capsys):
    def write(name, lines):
        path = tmp_path / name
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    tsv = write("train.tsv", [f"{s}\t{t}" for s, t in splits.train])
    vsrc, vtgt = write("valid.en", [s for s, _ in splits.valid]), write("valid.ja", [t for _, t in splits.valid])
    out = tmp_path / "model"
    rc = cli.main(
        [
            "train",
            "translate",
            "--train-tsv",
            str(tsv),
            "--valid-src",
            str(vsrc),
            "--valid-tgt",
            str(vtgt),
            "--out",
            str(out),
            "--preset",
            "tiny",
            "--overrides",
            "train.max_steps=8",
            "train.progress=false",
        ]
    )
    assert rc == 0 and (out / "best" / "model.safetensors").is_file()
    assert "model saved in" in capsys.readouterr().out

    plot = tmp_path / "attn.png"
    rc = cli.main(["translate", "--model", str(out), "--beam", "2", "--attention-plot", str(plot), "five hundred"])
    assert rc == 0 and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "attn_grid.png").is_file()

    rc = cli.main(["evaluate", "--model", str(out), "--src", str(vsrc), "--ref", str(vtgt), "--beam", "1"])
    printed = capsys.readouterr().out
    assert (
        rc == 0
        and "BLEU" in printed
        and f"({len(splits.valid)} sentences, BLEU tokenizer 13a, decoded in fp32)" in printed
    )


def test_cli_reports_mismatched_corpus_line_counts(tmp_path, capsys):
    (tmp_path / "a.de").write_text("eins\nzwei\n", encoding="utf-8")
    (tmp_path / "a.en").write_text("one\n", encoding="utf-8")
    rc = cli.main(
        [
            "train",
            "translate",
            "--train-src",
            str(tmp_path / "a.de"),
            "--train-tgt",
            str(tmp_path / "a.en"),
            "--valid-tsv",
            str(tmp_path / "a.de"),
            "--out",
            str(tmp_path / "m"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "a.de" in err and "a.en" in err and "lines" in err


def test_demo_runs_in_a_reduced_size(tmp_path):
    from attnlab.experiments.demo import run_demo

    report = run_demo(tmp_path, minutes=0.05, n_train=300, n_test=20, progress=False, log=lambda *_: None)
    assert 0.0 <= report.exact_match <= 1.0 and report.steps > 0
    assert all(p.is_file() and p.stat().st_size > 1000 for p in report.heatmaps)
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["steps"] == report.steps and len(saved["examples"]) == 4
