"""The bottleneck experiment: parameter matching, the computed finding, and a reduced end-to-end run."""

import csv
import json

import pytest

from attnlab.cli import main
from attnlab.data.tasks import make_splits
from attnlab.experiments.bottleneck import (
    MODELS,
    BottleneckSettings,
    ModelResult,
    count_parameters,
    describe_finding,
    length_buckets,
    match_rnn_config,
    run_bottleneck,
)
from attnlab.loading import load_model
from attnlab.models.rnn_seq2seq import RNNSeq2Seq
from attnlab.models.transformer import PRESETS as TRANSFORMER_PRESETS
from attnlab.models.transformer import Transformer, TransformerConfig


@pytest.mark.parametrize("attention", ["none", "additive"])
def test_matched_rnn_is_the_closest_width_to_the_transformer(attention):
    target = count_parameters(Transformer(TransformerConfig(40, 30, **TRANSFORMER_PRESETS["demo"])))
    config = match_rnn_config(target, src_vocab_size=40, tgt_vocab_size=30, pad_id=0, attention=attention)
    h = config.hidden_size
    assert config.attention == attention and config.bidirectional and config.embed_dim == h

    def count(width):
        fields = dict(config.__dict__, embed_dim=width, hidden_size=width, attn_dim=width)
        return sum(p.numel() for p in {id(p): p for p in RNNSeq2Seq(type(config)(**fields)).parameters()}.values())

    assert abs(count(h) - target) <= min(abs(count(h - 2) - target), abs(count(h + 2) - target))
    assert abs(count(h) - target) / target < 0.05


def test_count_parameters_counts_tied_weights_once():
    model = Transformer(TransformerConfig(50, 50, **TRANSFORMER_PRESETS["tiny"], tie_output=True))
    naive = sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False))
    assert count_parameters(model) == naive - model.out_proj.weight.numel()


def _result(name, bleus):
    by_length = [{"bucket": [lo, lo + 1], "n": 10, "bleu": b} for lo, b in zip(range(1, 20, 2), bleus)]
    return ModelResult(name, 1, {}, 1.0, 1, 1.0, "time_budget", 0.0, 0.0, 0.0, by_length)


def test_finding_is_computed_from_the_numbers():
    models = [
        _result("rnn-none", [80.0, 60.0, None, 42.5]),
        _result("rnn-additive", [85.0, 84.0, None, 83.0]),
        _result("transformer", [90.0, 91.0, None, 90.4]),
    ]
    text = describe_finding(models, "words")
    assert text.startswith("From the shortest source bucket (1–2 words) to the longest (7–8 words)")
    assert "falls by 37.5 points (from 80.0 to 42.5) for the RNN without attention" in text
    assert "falls by 2.0 points (from 85.0 to 83.0) for the RNN with additive attention" in text
    assert "rises by 0.4 points (from 90.0 to 90.4) for the Transformer" in text
    # 37.5 − (−0.4) = 37.9
    assert (
        "The RNN without attention loses the most on long sources: 37.9 BLEU points more than the Transformer." in text
    )


def test_finding_with_equal_drops_and_too_few_buckets():
    text = describe_finding([_result("rnn-none", [50.0, 40.0]), _result("transformer", [60.0, 50.0])], "chars")
    assert "All models lose about the same" in text
    text = describe_finding([_result("rnn-none", [50.0, None]), _result("transformer", [60.0, 50.0])], "chars")
    assert "cannot be compared for the RNN without attention" in text


def test_length_buckets_are_equal_width_with_thin_ones_merged():
    lengths = [n for n in range(1, 11) for _ in range(40)] + [20, 20, 20]
    # width ⌈20/5⌉ = 4: 1–4 (160), 5–8 (160), 9–12 (80), 13–16 (0), 17–20 (3); the empty and the
    # 3-sentence bucket fall below 30 and merge into their neighbours.
    assert length_buckets(lengths) == [(1, 4), (5, 8), (9, 20)]
    assert length_buckets(lengths, min_count=0) == [(1, 4), (5, 8), (9, 12), (13, 16), (17, 20)]
    assert length_buckets([3, 3, 3]) == [(3, 3)]
    with pytest.raises(ValueError, match="at least one length"):
        length_buckets([])


def test_reduced_run_writes_tables_plot_heatmaps_and_checkpoints(tmp_path):
    settings = BottleneckSettings(
        minutes=0.1,
        task="numbers-ja-en",
        n_train=200,
        n_valid=16,
        n_test=40,
        transformer_preset="tiny",
        max_tokens=1024,
        progress=False,
    )
    report = run_bottleneck(tmp_path, settings, log=lambda line: None)
    names = [m.name for m in report.models]
    assert names == list(MODELS)
    for f in (
        "report.md",
        "summary.csv",
        "bleu_by_length.csv",
        "results.json",
        "bleu_by_length.png",
        "attention_rnn-additive.png",
        "attention_transformer.png",
    ):
        assert (tmp_path / f).stat().st_size > 0, f
    assert not (tmp_path / "attention_rnn-none.png").exists()
    assert (tmp_path / "bleu_by_length.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    results = json.loads((tmp_path / "results.json").read_text())
    assert results["length_unit"] == "chars"  # Japanese numerals have no spaces
    params = {m["name"]: m["parameters"] for m in results["models"]}
    for rnn in ("rnn-none", "rnn-additive"):
        assert abs(params[rnn] - params["transformer"]) / params["transformer"] < 0.15
    budget = 0.8 * 0.1 * 60 / 3
    for m in results["models"]:
        assert m["stop_reason"] in ("time_budget", "epochs") and m["steps"] > 0
        assert sum(b["n"] for b in m["by_length"]) == 40  # the automatic buckets cover every test sentence
        assert m["train_seconds"] < budget + 30
    assert [b["bucket"] for b in results["models"][0]["by_length"]] == [
        b["bucket"] for b in results["models"][2]["by_length"]
    ]

    rows = list(csv.DictReader((tmp_path / "bleu_by_length.csv").open()))
    assert len(rows) == 3 * len(results["models"][0]["by_length"])
    summary = list(csv.DictReader((tmp_path / "summary.csv").open()))
    assert [r["model"] for r in summary] == names
    assert [int(r["parameters"]) for r in summary] == [params[n] for n in names]

    # The finding quotes each model's measured change, not a sentence written in advance.
    for m in report.models:
        filled = [b for b in m.by_length if b["bleu"] is not None]
        if len(filled) >= 2:
            change = filled[-1]["bleu"] - filled[0]["bleu"]
            assert (
                f"{abs(change):.1f} points" if abs(change) >= 0.05 else f"stays at {filled[0]['bleu']:.1f}"
            ) in report.finding
    md = (tmp_path / "report.md").read_text()
    assert report.finding in md and "| RNN with additive attention |" in md

    # The checkpoints load as ordinary translators; the RNN's heatmap is one layer, one head.
    translator = load_model(tmp_path / "models" / "rnn-additive", family="translate")
    out = translator.translate(["三百"], return_attention=True)[0]
    assert out.cross_attention.shape[:2] == (1, 1)
    plain = load_model(tmp_path / "models" / "rnn-none", family="translate")
    assert plain.translate(["三百"], return_attention=True)[0].cross_attention is None


def test_cli_runs_on_corpus_files_and_names_missing_ones(tmp_path, capsys):
    splits = make_splits("numbers-ja-en", 150, 12, 30, seed=1)
    args = []
    for name, pairs in zip(("train", "valid", "test"), splits):
        (tmp_path / f"{name}.src").write_text("\n".join(s for s, _ in pairs) + "\n")
        (tmp_path / f"{name}.tgt").write_text("\n".join(t for _, t in pairs) + "\n")
        args += [f"--{name}-src", str(tmp_path / f"{name}.src"), f"--{name}-tgt", str(tmp_path / f"{name}.tgt")]
    out = tmp_path / "report"
    rc = main(
        [
            "experiment",
            "bottleneck",
            "--out",
            str(out),
            "--minutes",
            "0.06",
            "--transformer-preset",
            "tiny",
            "--tokenizer",
            "char",
            "--buckets",
            "1-3",
            "4-6",
            "7-30",
            "--length-unit",
            "chars",
            "--no-progress",
            *args,
        ]
    )
    assert rc == 0
    results = json.loads((out / "results.json").read_text())
    assert results["data"] == {"source": "corpus", "train": 150, "valid": 12, "test": 30}
    assert [b["bucket"] for b in results["models"][0]["by_length"]] == [[1, 3], [4, 6], [7, 30]]
    assert "report:" in capsys.readouterr().out

    rc = main(["experiment", "bottleneck", "--out", str(out), *args[:8]])  # no test files
    assert rc == 2
    assert "--test-src and --test-tgt" in capsys.readouterr().err
    rc = main(["experiment", "bottleneck", "--out", str(out), "--buckets", "1to3"])
    assert rc == 2 and "bucket '1to3' is not LOW-HIGH" in capsys.readouterr().err


def test_train_translate_cli_accepts_the_rnn_and_its_attention(tmp_path, capsys):
    pairs = make_splits("numbers-ja-en", 60, 8, 0, seed=2)
    for name, split in (("train", pairs.train), ("valid", pairs.valid)):
        (tmp_path / f"{name}.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in split))
    for attention in ("additive", "none"):
        out = tmp_path / attention
        rc = main(
            [
                "train",
                "translate",
                "--out",
                str(out),
                "--train-tsv",
                str(tmp_path / "train.tsv"),
                "--valid-tsv",
                str(tmp_path / "valid.tsv"),
                "--preset",
                "tiny",
                "--arch",
                "rnn",
                "--attention",
                attention,
                "--epochs",
                "1",
            ]
        )
        assert rc == 0
        config = json.loads((out / "best" / "config.json").read_text())
        assert config["model_type"] == "rnn" and config["attention"] == attention
        plot = tmp_path / f"{attention}.png"
        rc = main(["translate", "--model", str(out), "--beam", "2", "--attention-plot", str(plot), "三百"])
        if attention == "additive":
            assert rc == 0 and plot.stat().st_size > 0
        else:
            assert rc == 2 and "has no attention" in capsys.readouterr().err
