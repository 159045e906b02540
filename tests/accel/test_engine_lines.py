"""The engine's lines measured per machine (attnlab.accel.calibrate, rules.lines) and inference
precision "auto" (attnlab.accel.precision, Translator, GPT): chosen from given timings or on fake
clocks, so that nothing here depends on the machine's load."""

from __future__ import annotations

import dataclasses
import itertools
import json

import pytest
import torch
from pinned_lines import pin_lines

from attnlab.accel import calibrate, kernels, rules
from attnlab.accel import precision as P
from attnlab.cli import main
from attnlab.inference import translate as inf
from attnlab.models.gpt import GPT, gpt_config
from attnlab.recipes import lm
from attnlab.recipes import translate as tr


def products(small: dict, large: dict) -> dict:
    """Timings of products in :func:`calibrate.measure`'s layout: ``{rows: (panels, blas)}``."""
    cells = lambda d: {r: {"panels": p, "blas": b} for r, (p, b) in d.items()}  # noqa: E731
    return {"small": cells(small), "large": cells(large)}


def test_each_blas_line_is_where_the_blas_wins_from_there_on():
    fp32 = products(
        {1: (1, 2), 2: (2, 1.5), 4: (3, 4), 8: (5, 4), 16: (9, 6), 32: (17, 9)},  # wins at 2, loses at 4: from 8
        {1: (1, 2), 2: (2, 3), 4: (3, 4), 8: (5, 6), 16: (9, 8), 32: (17, 9)},  # from 16
    )
    bf16 = products(
        {r: (r, r / 2) for r in calibrate.PRODUCT_ROWS},  # from 1
        {1: (1, 2), 2: (2, 3), 4: (4, 3), 8: (8, 4), 16: (16, 5), 32: (32, 6)},  # from 4: the larger line holds
    )
    table = calibrate.choose({"products": {"float32": fp32, "bfloat16": bf16}}, 2)
    assert (table.blas_min_rows, table.blas_min_rows_large, table.blas_min_rows_bf16) == (8, 16, 4)
    never = products({r: (1, 2) for r in calibrate.PRODUCT_ROWS}, {r: (1, 2) for r in calibrate.PRODUCT_ROWS})
    assert calibrate.choose({"products": {"float32": never}}, 1).blas_min_rows == calibrate.NEVER
    # Lines without timings (no BLAS found, no bf16 product) keep their defaults.
    assert calibrate.choose({"products": {}, "step": {}}, 2) == rules.DEFAULTS


def test_one_thread_takes_the_steps_where_all_threads_are_not_measurably_faster():
    step = {"float32": {1: {"one": 1.0, "all": 1.2}, 2: {"one": 1.0, "all": 0.96}, 4: {"one": 2.0, "all": 1.5}}}
    step["float32"][8] = {"one": 2.0, "all": 2.5}  # (after a faster row count: not one thread again)
    table = calibrate.choose({"step": step}, 2)
    assert table.one_thread_max_rows == 2  # 1 row: one is faster; 2: 4% within the margin; 4: all 33% faster
    # Every precision measured must agree; on one thread there is nothing to choose.
    step["bfloat16"] = {1: {"one": 1.0, "all": 0.5}}
    assert calibrate.choose({"step": step}, 2).one_thread_max_rows == 0
    assert calibrate.choose({"step": {"float32": {1: {"one": 1.0, "all": 9.0}}}}, 1).one_thread_max_rows == 0


@pytest.mark.skipif(not kernels.available(), reason="no C compiler here: the native kernels are not built")
def test_the_measurement_runs_every_product_and_step_on_a_fake_clock():
    ticks = itertools.count()
    small = {"small": (64, 32), "large": (256, 32)}
    step_shape = {"D": 32, "H": 2, "F": 64, "L": 2, "V": 100, "S": 5}
    before = torch.get_num_threads()
    timings = calibrate.measure(
        2, repeats=2, step_repeats=2, timer=lambda: float(next(ticks)), shapes=small, step_shape=step_shape
    )
    assert torch.get_num_threads() == before  # (measure restored the thread count)
    assert set(timings["products"]["float32"]) == set(small)
    assert set(timings["products"]["float32"]["small"]) == set(calibrate.PRODUCT_ROWS)
    assert all(c == {"panels": 1.0, "blas": 1.0} for c in timings["products"]["float32"]["large"].values())
    assert set(timings["step"]["float32"]) == set(calibrate.STEP_ROWS)
    # Ties everywhere: the BLAS from one row, one thread for every step measured.
    table = calibrate.choose(timings, 2)
    assert table.blas_min_rows == table.blas_min_rows_large == 1
    assert table.one_thread_max_rows == max(calibrate.STEP_ROWS)


@pytest.fixture
def measuring(tmp_path, monkeypatch):
    """Measuring on, into a cache of this test's own, with injected timings; yields the calls."""
    monkeypatch.setenv("ATTNLAB_CALIBRATE", "1")
    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ATTNLAB_LINES", raising=False)
    calls = []
    fp32 = products({r: (1, 2 if r < 4 else 1) for r in calibrate.PRODUCT_ROWS}, {r: (1, 1) for r in (1, 32)})

    def fake(threads, **kw):
        calls.append(threads)
        return {"products": {"float32": fp32}, "step": {"float32": {1: {"one": 1.0, "all": 1.0}}}}

    monkeypatch.setattr(calibrate, "measure", fake)
    monkeypatch.setattr(calibrate.kernels, "available", lambda: True)
    monkeypatch.setattr(rules, "busy", lambda: False)  # a quiet machine, whatever the load here
    rules.forget()
    yield calls
    rules.forget()


def test_lines_are_measured_once_then_read_from_the_cache(measuring, tmp_path, capsys):
    torch.set_num_threads(torch.get_num_threads())
    table = rules.lines()
    assert measuring == [torch.get_num_threads()] and table.blas_min_rows == 4 and table.blas_min_rows_large == 1
    assert "calibrated the kernel lines" in capsys.readouterr().err
    assert rules.lines() is table and len(measuring) == 1  # this process: resolved once
    rules.forget()  # another process on this machine reads the cache
    assert rules.lines() == table and len(measuring) == 1
    cached = json.loads((tmp_path / "cache" / "lines.json").read_text())
    (entry,) = cached.values()
    assert entry["lines"]["blas_min_rows"] == 4 and set(entry["lines"]) == set(rules.CALIBRATED)
    assert not list((tmp_path / "cache").glob("*.tmp"))  # written atomically, nothing left behind
    calibrate.calibrated(torch.get_num_threads(), again=True, quiet=True)  # `attnlab calibrate`
    assert len(measuring) == 2


def test_a_table_measured_on_a_busy_machine_is_measured_again_once_it_is_quiet(measuring, monkeypatch):
    monkeypatch.setattr(rules, "busy", lambda: True)
    rules.lines()
    rules.forget()
    rules.lines()  # still busy: the provisional table holds
    assert len(measuring) == 1
    monkeypatch.setattr(rules, "busy", lambda: False)
    rules.forget()
    rules.lines()  # quiet now: measured again, and kept
    rules.forget()
    rules.lines()
    assert len(measuring) == 2


def test_the_environment_forces_lines_and_turns_measuring_off(measuring, monkeypatch):
    monkeypatch.setenv("ATTNLAB_LINES", "blas_min_rows=64, one_thread_max_rows=3")
    table = rules.lines()
    assert (table.blas_min_rows, table.one_thread_max_rows, table.blas_min_rows_large) == (64, 3, 1)
    rules.forget()
    monkeypatch.setenv("ATTNLAB_CALIBRATE", "0")
    assert rules.lines() == dataclasses.replace(rules.DEFAULTS, blas_min_rows=64, one_thread_max_rows=3)
    assert len(measuring) == 1
    rules.forget()
    monkeypatch.setenv("ATTNLAB_LINES", "blas_rows=2")
    with pytest.raises(ValueError, match="ATTNLAB_LINES: 'blas_rows=2' is not NAME=INTEGER"):
        rules.lines()


def test_a_retired_line_in_the_environment_is_ignored_with_a_warning(measuring, monkeypatch):
    # The lines of accel.linear's router (removed by issue 38) may still be in a user's environment:
    # they no longer steer anything, so the decode goes on, told once why they have no effect.
    monkeypatch.setenv("ATTNLAB_CALIBRATE", "0")
    monkeypatch.setenv("ATTNLAB_LINES", "onednn_max_rows=4, blas_min_rows=64, kernel_max_rows=2")
    with pytest.warns(UserWarning, match="is no longer a line of attnlab's engine; ignored") as caught:
        table = rules.lines()
    assert table == dataclasses.replace(rules.DEFAULTS, blas_min_rows=64)
    assert sorted(str(w.message).split()[1] for w in caught) == ["kernel_max_rows", "onednn_max_rows"]
    assert not hasattr(table, "onednn_max_rows") and rules.RETIRED.isdisjoint(f.name for f in dataclasses.fields(table))
    rules.forget()
    monkeypatch.setenv("ATTNLAB_LINES", "onednn_max_rows=many")  # still NAME=INTEGER or a clear error
    with pytest.raises(ValueError, match="ATTNLAB_LINES: 'onednn_max_rows=many' is not NAME=INTEGER"):
        rules.lines()


def test_a_cached_table_with_lines_of_another_version_is_measured_again(measuring, tmp_path):
    # A per-machine cache written by another version of attnlab (a line it no longer has) must not
    # break a decode: that entry is measured again and replaced.
    threads = torch.get_num_threads()
    path = tmp_path / "cache" / "lines.json"
    path.parent.mkdir(parents=True)
    old = {"lines": {"blas_min_rows": 7, "onednn_max_rows": 32}, "threads": threads, "busy": False}
    path.write_text(json.dumps({calibrate.key(threads): old}))
    table = rules.lines()
    assert measuring == [threads] and table.blas_min_rows == 4
    (entry,) = json.loads(path.read_text()).values()
    assert set(entry["lines"]) == set(rules.CALIBRATED)


def test_lines_not_measured_never_start_a_calibration(measuring):
    assert rules.lines(measured=False) == rules.DEFAULTS  # (attention, the one-call step: hot paths, training)
    assert measuring == []


def test_a_step_runs_on_one_thread_up_to_its_line(monkeypatch):
    before = torch.get_num_threads()
    pin_lines(monkeypatch, one_thread_max_rows=4)
    try:
        torch.set_num_threads(2)
        assert [rules.step_threads(r) for r in (1, 4, 5, 128)] == [1, 1, 2, 2]
        torch.set_num_threads(1)
        assert rules.step_threads(128) == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.skipif(not kernels.available(), reason="no C compiler here: the native kernels are not built")
def test_a_translator_step_on_one_thread_equals_all_threads(monkeypatch):
    from attnlab.models.transformer import Transformer, TransformerConfig

    torch.manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab_size=50, tgt_vocab_size=60, d_model=32, n_heads=2, d_ff=64)).eval()
    src = torch.randint(4, 50, (3, 7))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    got = {}
    try:
        for line in (0, 1 << 30):
            pin_lines(monkeypatch, one_thread_max_rows=line)
            with torch.inference_mode():
                state = model.start(src)
                tokens = torch.ones(3, 1, dtype=torch.long)
                got[line] = torch.stack([model.step(tokens, state).logits for _ in range(3)])
    finally:
        torch.set_num_threads(before)
    torch.testing.assert_close(got[0], got[1 << 30], atol=1e-5, rtol=1e-5)


# -- inference precision "auto" --------------------------------------------------------------------


def fake_clock(monkeypatch, durations):
    ticks = iter(x for d in durations for x in (0.0, d))
    return lambda: next(ticks)


@pytest.fixture
def native(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNLAB_CALIBRATE", "1")
    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(P, "native_bf16", lambda: True)
    monkeypatch.setattr(rules, "busy", lambda: False)  # a quiet machine, whatever the load here


@pytest.mark.parametrize(("fp32", "bf16", "chosen"), [(1.0, 0.5, "bf16"), (1.0, 0.96, "fp32"), (1.0, 2.0, "fp32")])
def test_auto_takes_bf16_only_when_measured_faster_and_caches_it(native, monkeypatch, fp32, bf16, chosen, capsys):
    runs = []
    model = torch.nn.Linear(3, 4)
    clock = fake_clock(monkeypatch, [fp32, bf16] * 3)
    got, why = P.resolve("auto", device="cpu", model=model, run=runs.append, timer=clock)
    assert got == chosen and runs == ["fp32", "bf16"] * 4  # one untimed run each, then three interleaved rounds
    assert "measured now" in why and f"precision auto → {chosen}" in capsys.readouterr().err
    again, why = P.resolve("auto", device="cpu", model=model, run=lambda p: pytest.fail("measured again"))
    assert again == chosen and "(cached)" in why
    P.forget_measurements()  # (`attnlab calibrate`): measured again on the next use
    runs.clear()
    assert (
        P.resolve("auto", device="cpu", model=model, run=runs.append, timer=fake_clock(monkeypatch, [1.0, 0.5] * 3))[0]
        == "bf16"
    )
    assert len(runs) == 8
    # Times taken on a busy machine hold while it stays busy, and are taken again once it is quiet.
    P.forget_measurements()
    monkeypatch.setattr(rules, "busy", lambda: True)
    got, why = P.resolve(
        "auto", device="cpu", model=model, run=runs.append, timer=fake_clock(monkeypatch, [1.0, 2.0] * 3)
    )
    assert got == "fp32" and "the machine busy" in why
    assert P.resolve("auto", device="cpu", model=model, run=lambda p: pytest.fail("measured again"))[0] == "fp32"
    monkeypatch.setattr(rules, "busy", lambda: False)
    clock = fake_clock(monkeypatch, [1.0, 0.5] * 3)
    assert P.resolve("auto", device="cpu", model=model, run=runs.append, timer=clock)[0] == "bf16"
    # Another model shape is another measurement.
    with pytest.raises(StopIteration):  # (the fake clock has run out: it did try to measure)
        P.resolve("auto", device="cpu", model=torch.nn.Linear(3, 5), run=runs.append, timer=clock)


def test_auto_is_fp32_without_native_bf16_measuring_or_the_cards_leave(monkeypatch, tmp_path):
    model, fail = torch.nn.Linear(3, 4), lambda p: pytest.fail("measured")
    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(P, "native_bf16", lambda: False)
    monkeypatch.setenv("ATTNLAB_CALIBRATE", "1")
    assert P.resolve("auto", device="cpu", model=model, run=fail)[0] == "fp32"
    monkeypatch.setattr(P, "native_bf16", lambda: True)
    assert P.resolve("auto", device="cpu", model=model, run=fail, allowed=False)[0] == "fp32"
    monkeypatch.setenv("ATTNLAB_CALIBRATE", "0")
    assert P.resolve("auto", device="cpu", model=model, run=fail) == (
        "fp32",
        "auto: measuring is off (ATTNLAB_CALIBRATE=0)",
    )
    assert P.resolve("bf16", device="cpu", model=model, run=fail) == ("bf16", "asked for")
    with pytest.raises(ValueError, match="precision must be one of auto, fp32, bf16, got 'fp16'"):
        P.resolve("fp16", device="cpu", model=model, run=fail)


def test_a_cards_bleu_in_both_precisions_decides_whether_auto_may_take_bf16(tmp_path):
    def card(**metrics):
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        (folder / "card.json").write_text(json.dumps({"metrics": metrics}))
        return folder

    assert tr.bf16_within_card(tmp_path)  # no card: a user's own run
    assert not tr.bf16_within_card(card(bleu=26.5))  # the card states fp32's quality only
    assert tr.bf16_within_card(card(bleu=26.5, bleu_bf16=26.1))
    assert not tr.bf16_within_card(card(bleu=26.5, bleu_bf16=25.9))  # more than BF16_MAX_BLEU_LOSS lost


def tiny_translator(precision):
    from attnlab.data.tasks import make_splits

    splits = make_splits("numbers-en-ja", 60, 5, 0, seed=5)
    src_tok, tgt_tok = tr.train_tokenizers(tr.PRESETS["tiny"], *map(list, zip(*splits.train)))
    model, _ = tr.build_model(tr.PRESETS["tiny"], src_tok.vocab_size, tgt_tok.vocab_size, src_tok.pad_id)
    return inf.Translator(model.eval(), src_tok, tgt_tok, precision=precision), splits


def test_a_translator_on_auto_decodes_a_bf16_copy_where_it_is_faster(native, monkeypatch):
    monkeypatch.setattr(P, "probe", lambda run, **kw: (run("fp32"), run("bf16"), {"fp32": 2.0, "bf16": 1.0})[-1])
    translator, splits = tiny_translator("auto")
    given = translator.model
    with torch.inference_mode():  # (as make models evaluates: the copy must still be ordinary tensors)
        out = translator.translate([s for s, _ in splits.valid], beam_size=2)
    assert translator.precision_used == "bf16" and translator.model.out_proj.weight.dtype == torch.bfloat16
    assert given.out_proj.weight.dtype == torch.float32  # the model given stays as it was
    assert len(out) == len(splits.valid) and all(isinstance(t.text, str) for t in out)
    # The model as it is (no precision asked): no copy, no measurement.
    plain = inf.Translator(given, translator.src_tok, translator.tgt_tok)
    assert plain.resolve_precision() == "fp32" and plain.model is given


def test_a_gpt_on_auto_generates_with_a_bf16_copy_where_it_is_faster(native, monkeypatch):
    monkeypatch.setattr(P, "probe", lambda run, **kw: (run("fp32"), run("bf16"), {"fp32": 2.0, "bf16": 1.0})[-1])
    model = GPT(gpt_config("tiny", vocab_size=37)).eval()
    with torch.inference_mode():
        fast, chosen, _ = lm.gpt_precision(model, "auto")
    assert chosen == "bf16" and {p.dtype for p in fast.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in model.parameters()} == {torch.float32}  # the model given stays as it was
    assert lm.gpt_precision(model, "fp32")[0] is model


def test_the_cli_takes_precision_and_calibrate(capsys):
    assert main(["calibrate", "--show", "--threads", "1"]) == 0  # ATTNLAB_CALIBRATE=0 here: the defaults
    printed = capsys.readouterr().out
    assert (
        "1 thread(s): blas_min_rows=2, blas_min_rows_large=16, blas_min_rows_bf16=8, one_thread_max_rows=0" in printed
    )
    assert "differs from the defaults in: nothing" in printed
    with pytest.raises(SystemExit) as exit:
        main(["translate", "--model", "demo", "--precision", "fp16", "x"])
    assert exit.value.code == 2 and "invalid choice: 'fp16'" in capsys.readouterr().err
    for command in ("translate", "evaluate", "explore", "generate"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "--precision {auto,fp32,bf16}" in capsys.readouterr().out, command


@pytest.mark.parametrize("name", ["ja-en", "en-ja", "demo", "rnn-attention", "rnn-plain"])
def test_every_shipped_translators_card_gives_its_bleu_in_both_precisions(name):
    from attnlab import assets

    folder = assets.asset_folder(name)
    card = json.loads((folder / "card.json").read_text())
    metrics = card["metrics"]
    assert {"bleu", "bleu_bf16"} <= set(metrics) and "bleu_bf16: the same BLEU decoded in bf16" in card["evaluation"]
    assert f"| bleu_bf16 | {metrics['bleu_bf16']:.2f} |" in (folder / "MODEL_CARD.md").read_text()
    assert tr.bf16_within_card(folder) == (metrics["bleu_bf16"] >= metrics["bleu"] - tr.BF16_MAX_BLEU_LOSS)
