"""Every user mistake is one line, ``attnlab: error: …``, exit code 2, and no work done first.

Issue 17's reproducers ("settings checked only after training time is spent", "tracebacks
instead of a one-line error", "no limits where a user can ask too much") and their neighbours,
as a table of command lines. Each case checks the exit code, that stderr is exactly one line
starting with ``attnlab: error:`` and holding the expected fragment, that no traceback is
printed, and, for training, that nothing was written: the settings are checked before any data
is read (the training file of the settings cases does not even exist).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch

from attnlab import cli
from attnlab.checkpoint import save_checkpoint
from attnlab.data.tokenizers import CharTokenizer
from attnlab.decode import MAX_BEAM, beam_search, check_beam
from attnlab.loading import load_model
from attnlab.models.config import MAX_PARAMETERS
from attnlab.models.transformer import Transformer, TransformerConfig
from attnlab.recipes import translate as tr
from attnlab.train import TrainConfig, train

SENTENCES = ["ab", "ba", "abc", "cab", "bca"]


def write_translator(directory: Path) -> Path:
    """A tiny untrained translator checkpoint (character vocabulary of the letters a, b, c)."""
    tok = CharTokenizer.train(SENTENCES)
    config = TransformerConfig(
        src_vocab_size=tok.vocab_size,
        tgt_vocab_size=tok.vocab_size,
        pad_id=tok.pad_id,
        **tr.ARCHS["transformer"].presets["tiny"],
    )
    torch.manual_seed(0)
    save_checkpoint(
        directory,
        model=Transformer(config),
        config={**dataclasses.asdict(config), "bleu_tokenize": "13a"},
        tokenizers={"src_tokenizer": tok, "tgt_tokenizer": tok},
    )
    return directory


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return write_translator(tmp_path_factory.mktemp("cli-errors") / "model")


@pytest.fixture
def paths(tmp_path, model_dir) -> dict[str, Path]:
    """The files the command lines name: {model}, {out}, {train} (missing), {valid}, {empty}, {dir}, {file}, ..."""
    (tmp_path / "folder").mkdir()
    (tmp_path / "a-file.txt").write_text("not a folder\n", encoding="utf-8")
    (tmp_path / "valid.tsv").write_text("ab\tba\ncab\tbac\n", encoding="utf-8")
    (tmp_path / "train.tsv").write_text("".join(f"{s}\t{s[::-1]}\n" for s in SENTENCES * 4), encoding="utf-8")
    (tmp_path / "empty.tsv").write_text("", encoding="utf-8")
    return {
        "model": model_dir,
        "out": tmp_path / "run",
        "missing": tmp_path / "no-such-train.tsv",
        "train": tmp_path / "train.tsv",
        "valid": tmp_path / "valid.tsv",
        "empty": tmp_path / "empty.tsv",
        "dir": tmp_path / "folder",
        "file": tmp_path / "a-file.txt",
        "tmp": tmp_path,
    }


def fill(argv: list[str], paths: dict[str, Path]) -> list[str]:
    return [a.format(**{k: str(v) for k, v in paths.items()}) for a in argv]


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(code: int, err: str, fragment: str) -> None:
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("attnlab: error: "), err
    assert fragment in lines[0], err
    assert "Traceback" not in err


# `train translate` on a training file that does not exist: a setting that is refused must be
# refused before the data is read, or the error would be "no such file".
TRAIN = [
    "train",
    "translate",
    "--out",
    "{out}",
    "--train-tsv",
    "{missing}",
    "--valid-tsv",
    "{valid}",
    "--preset",
    "tiny",
]

SETTINGS_CASES = [
    # issue 17: settings checked only after training time is spent
    (
        ["--overrides", "metric=perplexity"],
        "unknown metric 'perplexity'; choose from ['bleu', 'chrf', 'exact_match', 'loss']",
    ),
    (["--overrides", "train.schedule=foo"], "unknown schedule 'foo'"),
    (["--minutes", "-1"], "--minutes must be a finite number ≥ 0, got -1.0"),
    (["--minutes", "nan"], "--minutes must be a finite number ≥ 0, got nan"),
    (["--minutes", "inf"], "--minutes must be a finite number ≥ 0, got inf"),
    # issue 17: tracebacks instead of a one-line error
    (["--overrides", "model.d_model=-8"], "d_model must be ≥ 1, got -8"),
    (["--overrides", "train.lr=abc"], "override train.lr=abc: expected a number"),
    # neighbours: every TrainConfig field
    (["--overrides", "train.lr=-1"], "lr must be > 0, got -1.0"),
    (["--overrides", "train.lr=0"], "lr must be > 0, got 0.0"),
    (["--overrides", "train.lr=nan"], "lr must be a finite number, got nan"),
    (["--overrides", "train.lr=inf"], "lr must be a finite number, got inf"),
    (["--epochs", "-1"], "epochs must be ≥ 0, got -1"),
    (["--overrides", "train.max_steps=-5"], "max_steps must be ≥ 0, got -5"),
    (["--overrides", "train.time_budget_s=-3"], "time_budget_s must be ≥ 0, got -3.0"),
    (["--overrides", "train.warmup_steps=-1"], "warmup_steps must be ≥ 0"),
    (["--overrides", "train.weight_decay=-0.1"], "weight_decay must be ≥ 0"),
    (["--overrides", "train.eps=0"], "eps must be > 0"),
    (["--overrides", "train.clip_norm=0"], "clip_norm must be > 0"),
    (["--overrides", "train.betas=[0.9, 1.5]"], "betas must each be in [0, 1)"),
    (["--overrides", "train.betas=[0.9, NaN]"], "betas must be a list whose items are each a finite number"),
    (["--grad-accum", "0"], "grad_accum must be ≥ 1, got 0"),
    (["--overrides", "train.log_every=0"], "log_every must be ≥ 1, got 0"),
    (["--overrides", "train.eval_every_steps=0"], "eval_every_steps must be ≥ 1"),
    (["--overrides", "train.save_every_steps=-2"], "save_every_steps must be ≥ 1"),
    (["--overrides", "train.patience=0"], "patience must be ≥ 1"),
    (["--overrides", "train.precision=fp16"], "unknown precision 'fp16'; choose from ['fp32', 'bf16', 'auto']"),
    (["--overrides", "train.strategy=zero3"], "unknown strategy 'zero3'"),
    (["--overrides", "train.schedule=cosine"], "schedule='cosine' needs max_steps or time_budget_s"),
    (["--device", "tpu"], "unknown device 'tpu'"),
    # neighbours: the model config (the "tiny" Transformer)
    (["--overrides", "model.d_model=0"], "d_model must be ≥ 1, got 0"),
    (["--overrides", "model.d_model=abc"], "override model.d_model=abc: expected an integer"),
    (["--overrides", "model.n_heads=0"], "n_heads must be ≥ 1, got 0"),
    (["--overrides", "model.n_heads=3"], "d_model=32 is not divisible by n_heads=3"),
    (["--overrides", "model.dropout=nan"], "dropout must be a finite number, got nan"),
    (["--overrides", "model.dropout=1.5"], "dropout must be in [0, 1), got 1.5"),
    (["--overrides", "model.dropout=-0.1"], "dropout must be in [0, 1), got -0.1"),
    (["--overrides", "model.d_ff=1000000000000"], "MAX_PARAMETERS"),
    (["--overrides", "model.max_len=0"], "max_len must be ≥ 1"),
    (["--overrides", "model.n_encoder_layers=-1"], "n_encoder_layers must be ≥ 0"),
    (["--overrides", "model.n_encoder_layers=100000000"], "MAX_PARAMETERS"),
    (["--overrides", "model.norm=sideways"], "unknown norm 'sideways'"),
    (["--overrides", "model.activation=swish"], "unknown activation 'swish'"),
    (["--overrides", "model.attention=sliding_window"], "window"),
    (["--overrides", "model.src_vocab_size=10"], "come from the tokenizers"),
    (["--overrides", "model.colour=red"], "unknown model field 'colour'"),
    (["--overrides", "arch=lstm"], "unknown architecture 'lstm'"),
    (["--arch", "rnn", "--overrides", "model.hidden_size=-4"], "hidden_size must be a positive integer"),
    (["--arch", "rnn", "--overrides", "model.cell=rnn"], "unknown RNN cell 'rnn'"),
    # neighbours: the translation setup
    (["--overrides", "eval_beam=0"], "beam size must be an integer ≥ 1, got 0"),
    (["--overrides", "eval_beam=100000"], f"over the limit of {MAX_BEAM}"),
    (["--overrides", "label_smoothing=1.5"], "label_smoothing must be in [0, 1)"),
    (["--overrides", "vocab_size=0"], "vocab_size must be ≥ 1"),
    (["--overrides", "max_tokens=-1"], "max_tokens must be ≥ 1"),
    (["--overrides", "tokenizer=words"], "unknown tokenizer 'words'"),
    (["--overrides", "colour=red"], "unknown setting 'colour'"),
    (["--overrides", "lr"], "override 'lr' is not key=value"),
    (["--preset", "huge"], "unknown preset 'huge'"),
]


@pytest.mark.parametrize("extra, fragment", SETTINGS_CASES, ids=[" ".join(c[0]) for c in SETTINGS_CASES])
def test_a_bad_training_setting_stops_before_any_data_is_read(extra, fragment, paths, capsys):
    code, out, err = run(fill(TRAIN + extra, paths), capsys)
    assert_one_line_error(code, err, fragment)
    assert not paths["out"].exists() and out == ""


FILE_CASES = [
    # issue 17: a directory given as a file; --out naming an existing file
    (["translate", "--model", "{model}", "--input", "{dir}"], "folder: is a directory"),
    (
        ["train", "translate", "--out", "{out}", "--train-tsv", "{dir}", "--valid-tsv", "{valid}", "--preset", "tiny"],
        "folder",
    ),
    (
        ["train", "translate", "--out", "{file}", "--train-tsv", "{train}", "--valid-tsv", "{valid}"],
        "a file of that name exists",
    ),
    (["demo", "--out", "{file}"], "a file of that name exists"),
    # issue 17: an empty validation set, found before training (after reading the data)
    (
        [
            "train",
            "translate",
            "--out",
            "{out}",
            "--train-tsv",
            "{train}",
            "--valid-tsv",
            "{empty}",
            "--preset",
            "tiny",
        ],
        "the validation set is empty",
    ),
    # neighbours
    (["translate", "--model", "{model}", "--input", "{tmp}/nothing.txt"], "nothing.txt"),
    (["translate", "--model", "{tmp}/no-model", "hello"], "no-model"),
    (["translate", "--model", "{file}", "hello"], "a-file.txt"),
    (["evaluate", "--model", "{model}", "--src", "{dir}", "--ref", "{valid}"], "folder"),
    (["generate", "--model", "{tmp}/no-model", "--prompt", "hello"], "no-model"),
]


@pytest.mark.parametrize(
    "argv, fragment", FILE_CASES, ids=[" ".join(c[0][:3]) + f" #{i}" for i, c in enumerate(FILE_CASES)]
)
def test_a_bad_path_is_one_line(argv, fragment, paths, capsys):
    code, out, err = run(fill(argv, paths), capsys)
    assert_one_line_error(code, err, fragment)
    assert not paths["out"].exists()


INFERENCE_CASES = [
    # issue 17: translate --device tpu (cuda: below); --beam 100000; --alpha nan
    (["translate", "--model", "{model}", "--device", "tpu", "ab"], "unknown device 'tpu'"),
    (
        ["translate", "--model", "{model}", "--beam", "100000", "ab"],
        f"beam size 100000 is over the limit of {MAX_BEAM}",
    ),
    (
        ["translate", "--model", "{model}", "--alpha", "nan", "ab"],
        "alpha (the length-penalty exponent) must be a finite",
    ),
    # neighbours
    (["translate", "--model", "{model}", "--device", "gpu", "ab"], "unknown device 'gpu'"),
    (["translate", "--model", "{model}", "--device", "cuda:x", "ab"], "unknown device 'cuda:x'"),
    (["evaluate", "--model", "{model}", "--src", "{valid}", "--ref", "{valid}", "--device", "tpu"], "unknown device"),
    (["generate", "--model", "{model}", "--device", "tpu", "--prompt", "ab"], "unknown device 'tpu'"),
    (["classify", "--model", "{model}", "--device", "tpu", "ab"], "unknown device 'tpu'"),
    (["translate", "--model", "{model}", "--beam", "0", "ab"], "beam size must be an integer ≥ 1, got 0"),
    (["translate", "--model", "{model}", "--beam", "-3", "ab"], "beam size must be an integer ≥ 1, got -3"),
    (["translate", "--model", "{model}", "--beam", "60", "ab"], "beam size 60 is larger than the vocabulary"),
    (["translate", "--model", "{model}", "--alpha", "-1", "ab"], "must be a finite number ≥ 0, got -1.0"),
    (["translate", "--model", "{model}", "--alpha", "inf", "ab"], "must be a finite number ≥ 0, got inf"),
    (["evaluate", "--model", "{model}", "--src", "{valid}", "--ref", "{valid}", "--beam", "100000"], "over the limit"),
    (["summarize", "--model", "{model}", "--beam", "100000", "ab"], "over the limit"),
    (["caption", "--model", "{model}", "--beam", "0"], "beam size must be an integer ≥ 1"),
    (["translate", "--model", "{model}"], "nothing to translate"),
    (["translate", "--model", "{model}", "--input", "{empty}"], "nothing to translate"),
]


@pytest.mark.parametrize("argv, fragment", INFERENCE_CASES, ids=[" ".join(c[0][3:]) for c in INFERENCE_CASES])
def test_a_bad_inference_option_is_one_line(argv, fragment, paths, capsys):
    code, out, err = run(fill(argv, paths), capsys)
    assert_one_line_error(code, err, fragment)
    assert out == ""


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_translate_on_a_device_this_machine_lacks_is_the_same_error_as_train(device, paths, capsys):
    code, _, err = run(fill(["translate", "--model", "{model}", "--device", device, "ab"], paths), capsys)
    assert_one_line_error(code, err, "CUDA is not available on this machine")
    code, _, train_err = run(fill(TRAIN + ["--device", device], paths), capsys)
    assert_one_line_error(code, train_err, "CUDA is not available on this machine")


# config.json of a model folder: (key, value written) → the field in the one-line error naming the file.
CONFIG_CASES = [
    ("dropout", float("nan"), "dropout must be a finite number, got nan"),
    ("n_heads", 0, "n_heads must be ≥ 1, got 0"),
    ("d_model", "abc", "d_model must be an integer, got 'abc'"),
    ("d_ff", 10**12, "MAX_PARAMETERS"),
    ("d_model", True, "d_model must be an integer, got True"),
    ("d_model", 12.5, "d_model must be an integer, got 12.5"),
    ("dropout", "0.1", "dropout must be a finite number, got '0.1'"),
    ("dropout", float("inf"), "dropout must be a finite number, got inf"),
    ("n_heads", 5, "is not divisible by n_heads=5"),
    ("norm", None, "norm must be text, got None"),
    ("share_embeddings", "yes", "share_embeddings must be true or false"),
    ("src_vocab_size", None, "src_vocab_size must be an integer, got None"),
    ("pad_id", 10**6, "pad_id=1000000 is outside"),
    ("tgt_vocab_size", 10**12, "MAX_PARAMETERS"),
    ("window", "wide", "window must be an integer or null"),
]


@pytest.mark.parametrize("key, value, fragment", CONFIG_CASES, ids=[f"{k}={v!r}" for k, v, _ in CONFIG_CASES])
def test_a_bad_config_json_is_one_line_naming_the_file_and_field(key, value, fragment, tmp_path, capsys):
    model = write_translator(tmp_path / "model")
    config = json.loads((model / "config.json").read_text())
    config[key] = value
    (model / "config.json").write_text(json.dumps(config))  # NaN/Infinity as Python's json writes them
    code, _, err = run(["translate", "--model", str(model), "ab"], capsys)
    assert_one_line_error(code, err, fragment)
    assert f"{model / 'config.json'}: " in err
    with pytest.raises(ValueError, match="config.json: "):  # the Python API says the same
        load_model(model, family="translate")


def test_a_config_json_without_a_required_field_names_it(tmp_path, capsys):
    model = write_translator(tmp_path / "model")
    config = json.loads((model / "config.json").read_text())
    del config["src_vocab_size"]
    (model / "config.json").write_text(json.dumps(config))
    code, _, err = run(["translate", "--model", str(model), "ab"], capsys)
    assert_one_line_error(code, err, "src_vocab_size")
    assert "config.json" in err


# src_tokenizer.json of a model folder: a change to its JSON → the fragment of the error naming the file.
TOKENIZER_CASES = [
    (lambda t: t.update(chars=5), "chars must be a list of single characters"),
    (lambda t: t.update(chars=["a", 7]), "chars must be a list of single characters"),
    (lambda t: t.update(chars=["ab"]), "entries must be single characters"),
    (lambda t: t.update(special_tokens=["[PAD]"]), "special_tokens must be a JSON object"),
    (lambda t: t["special_tokens"].update(pad=0), "special token pad must be a non-empty string, got 0"),
    (lambda t: t["special_tokens"].update(colour="red"), "colour"),
    (lambda t: t.pop("chars"), "no 'chars' entry"),
    (lambda t: t.update(kind=3), "unknown tokenizer kind 3"),
    (lambda t: t.update(kind="bpe", hf_tokenizer="x"), "hf_tokenizer must be a JSON object"),
    (lambda t: t.update(kind="bpe", hf_tokenizer={"model": 1}), "not a valid HuggingFace tokenizer"),
]


@pytest.mark.parametrize("edit, fragment", TOKENIZER_CASES, ids=[f for _, f in TOKENIZER_CASES])
def test_a_tokenizer_file_with_fields_of_the_wrong_type_is_one_line_naming_it(edit, fragment, tmp_path, capsys):
    model = write_translator(tmp_path / "model")
    path = model / "src_tokenizer.json"
    payload = json.loads(path.read_text())
    edit(payload)
    path.write_text(json.dumps(payload))
    code, _, err = run(["translate", "--model", str(model), "ab"], capsys)
    assert_one_line_error(code, err, fragment)
    assert f"{path}: " in err


@pytest.mark.parametrize("name, content, fragment", [
    ("model.safetensors", b"not safetensors", "not a readable safetensors file"),
    ("config.json", b"{", "not valid JSON"),
    ("config.json", b"[1, 2]", "config"),
    ("src_tokenizer.json", b"\xff\xfe", "src_tokenizer.json"),
])  # fmt: skip
def test_a_damaged_model_file_is_one_line(name, content, fragment, tmp_path, capsys):
    model = write_translator(tmp_path / "model")
    (model / name).write_bytes(content)
    code, _, err = run(["translate", "--model", str(model), "ab"], capsys)
    assert_one_line_error(code, err, fragment)


def test_beam_search_checks_the_beam_for_python_callers_too(model_dir):
    translator = load_model(model_dir, family="translate")
    src = torch.tensor([translator.src_tok.encode("ab")])
    t = translator.tgt_tok
    kw = dict(bos_id=t.bos_id, eos_id=t.eos_id, pad_id=t.pad_id, max_len=5)
    with pytest.raises(ValueError, match="over the limit of 64"):
        beam_search(translator.model, src, beam_size=100_000, **kw)
    with pytest.raises(ValueError, match="larger than the vocabulary"):
        beam_search(translator.model, src, beam_size=MAX_BEAM, **kw)
    for alpha in (math.nan, -0.5, math.inf):
        with pytest.raises(ValueError, match="alpha"):
            beam_search(translator.model, src, beam_size=2, alpha=alpha, **kw)
    with pytest.raises(ValueError, match="alpha"):
        translator.translate(["ab"], beam_size=1, alpha=math.nan)
    assert len(beam_search(translator.model, src, beam_size=4, **kw)) == 1
    check_beam(MAX_BEAM)
    with pytest.raises(ValueError, match="beam size must be an integer"):
        check_beam(2.5)


def test_configs_refuse_bad_values_when_made():
    with pytest.raises(ValueError, match="lr must be a finite number"):
        TrainConfig(lr=math.nan)
    with pytest.raises(ValueError, match="unknown schedule"):
        TrainConfig(schedule="linear")
    with pytest.raises(ValueError, match="time_budget_s must be ≥ 0"):
        dataclasses.replace(TrainConfig(), time_budget_s=-60.0)
    with pytest.raises(ValueError, match="needs max_steps or time_budget_s"):
        TrainConfig(schedule="cosine").check_schedule()
    TrainConfig(schedule="cosine", max_steps=10).check_schedule()
    with pytest.raises(ValueError, match="unknown metric"):
        dataclasses.replace(tr.PRESETS["tiny"], metric="accuracy")
    with pytest.raises(ValueError, match="MAX_PARAMETERS"):
        TransformerConfig(src_vocab_size=10, tgt_vocab_size=10, d_model=MAX_PARAMETERS, n_heads=1)


def test_a_task_whose_evaluate_lacks_its_metric_is_a_clear_error():
    class Task:  # a Python caller's own task: its metric is not among what it evaluates
        metric, maximize = "bleu", True

        def batches(self, epoch, rank, world_size):
            return [torch.ones(2, 3)]

        def loss(self, model, batch):
            return model(batch).pow(2).mean(), 2

        def evaluate(self, model):
            return {"loss": 1.0}

        def checkpoint_payload(self):
            return {}, {}

    with pytest.raises(
        ValueError,
        match=r"metric 'bleu' is not among the metrics its evaluate\(\) returns: "
        r"\['loss'\]",
    ):
        train(torch.nn.Linear(3, 1), Task(), TrainConfig(epochs=1, progress=False))


def test_debug_and_attnlab_debug_show_the_traceback(paths, monkeypatch, capsys):
    argv = fill(["translate", "--model", "{model}", "--beam", "100000", "ab"], paths)
    with pytest.raises(ValueError, match="over the limit"):
        cli.main(["--debug", *argv])
    with pytest.raises(ValueError, match="over the limit"):
        cli.main([*argv, "--debug"])
    monkeypatch.setenv("ATTNLAB_DEBUG", "1")
    with pytest.raises(ValueError, match="over the limit"):
        cli.main(argv)
    monkeypatch.setenv("ATTNLAB_DEBUG", "0")
    assert cli.main(argv) == 2


def test_a_bug_is_one_line_that_says_so_and_how_to_see_the_traceback(monkeypatch, capsys):
    def broken() -> int:
        """Fail as a bug would: a KeyError no user input causes."""
        return {}["missing"]

    monkeypatch.setitem(cli.COMMANDS, "explain", broken)
    code, _, err = run(["explain"], capsys)
    assert code == 1
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith("attnlab: internal error, a bug in attnlab: KeyError")
    assert "--debug" in lines[0] and "ATTNLAB_DEBUG=1" in lines[0]
    with pytest.raises(KeyError):
        cli.main(["--debug", "explain"])


def test_ctrl_c_exits_130_quietly(monkeypatch, capsys):
    def interrupted() -> int:
        """Stopped by Ctrl-C."""
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, "explain", interrupted)
    code, out, err = run(["explain"], capsys)
    assert code == 130 and err == "" and out == ""


def test_every_case_here_is_a_distinct_bad_input():
    argvs = [tuple(c[0]) for c in SETTINGS_CASES + FILE_CASES + INFERENCE_CASES]
    assert len(set(argvs)) == len(argvs)
    assert len({(k, repr(v)) for k, v, _ in CONFIG_CASES}) == len(CONFIG_CASES)
