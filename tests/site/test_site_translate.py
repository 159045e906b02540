"""The in-page ja→en widgets' Python side (issue 36): the encoder's optional outputs
(:data:`attnlab.onnx_graphs.ENCODER_TAPS`, what §7's token walk prints) computed by onnxruntime
equal PyTorch's tensors within 1e-4 and leave the contract's outputs as they were; the site's ja-en
is exported with them; and §1's measurements are a data file labelled with their machine, which the
explorer measures on first ask and keeps (:class:`attnlab.web.site.DataFiles`).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from attnlab.onnx_graphs import ENCODER_TAPS, encoder_graph
from attnlab.web import site
from attnlab.web.lesson import s01_what_attention_does as S1
from attnlab.web.lesson import s07_whole_transformer as S7

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from export_models import padded, tiny_config  # noqa: E402

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (optional extra: attnlab[site])")
pytest.importorskip("onnx", reason="onnx is not installed (optional extra: attnlab[site])")

TOL = 1e-4


def _session(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _recorded(model, src):
    """PyTorch's tensors of the first encoder layer, by hooks: what token_walk_view reads."""
    block = model.encoder[0]
    calls = {}

    def keep(name, what):
        def hook(module, args, output) -> None:  # None: the module's output stays as it is
            calls.setdefault(name, what(args, output))

        return hook

    hooks = [
        block.ff.register_forward_hook(keep("ff", lambda a, o: (a[0], o))),
        block.ff.up_proj.register_forward_hook(keep("up", lambda a, o: o)),
        block.register_forward_hook(keep("block", lambda a, o: o.hidden)),
    ]
    try:
        with torch.no_grad():
            model.encode(src)
    finally:
        for h in hooks:
            h.remove()
    D = model.config.d_model
    S = src.shape[1]
    return {
        "src_embed": model.src_embed(src) * D**0.5,  # (B, S, D)
        "src_positions": model.positions.table[:S],  # (S, D)
        "enc0_ff_in": calls["ff"][0],  # (B, S, D)
        "enc0_ff_hidden": block.ff.act(calls["up"]),  # (B, S, F)
        "enc0_ff_out": calls["ff"][1],  # (B, S, D)
        "enc0_out": calls["block"],  # (B, S, D)
    }


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_encoder_taps_are_pytorchs_tensors_and_the_contract_is_unchanged(norm):
    from attnlab.models.transformer import Transformer

    torch.manual_seed(0)
    model = Transformer(tiny_config(norm, "relu", True, 40, 40)).eval()
    src = padded([[5, 7, 9, 11, 2], [3, 4, 6]])  # (2, S) with padding in the second row
    plain, tapped = _session(encoder_graph(model)), _session(encoder_graph(model, taps=True))
    assert [o.name for o in plain.get_outputs()] == ["cross_k", "cross_v", "enc_attn"]
    assert [o.name for o in tapped.get_outputs()] == ["cross_k", "cross_v", "enc_attn", *ENCODER_TAPS]
    feeds = {"src_ids": src.numpy()}
    for a, b in zip(plain.run(None, feeds), tapped.run(None, feeds)):
        np.testing.assert_array_equal(a, b)  # the taps change none of the contract's outputs
    got = dict(zip(ENCODER_TAPS, tapped.run(list(ENCODER_TAPS), feeds)))
    want = _recorded(model, src)
    for name in ENCODER_TAPS:
        w = want[name].detach().numpy()
        assert got[name].shape == w.shape, f"{name}: {got[name].shape} != {w.shape}"
        assert np.abs(got[name] - w).max() <= TOL, f"{name} differs by {np.abs(got[name] - w).max()}"
    assert (got["enc0_ff_hidden"] >= 0).all() and (got["enc0_ff_hidden"] > 0).any()


def test_site_ja_en_has_the_taps_and_the_models_config(tmp_path):
    from attnlab.assets.locate import shipped_model_dir

    try:
        shipped_model_dir("ja-en")
    except FileNotFoundError:
        pytest.skip("needs the shipped model ja-en")
    from attnlab.loading import load_model

    out = site.SITE_MODELS["ja-en"]("ja-en", tmp_path / "ja-en", weights="auto")
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    assert meta["taps"] == list(ENCODER_TAPS) and meta["weights"] == "int8"
    model = load_model("ja-en", precision="fp32", family="translate").model
    assert meta["config"] == S7.shapes_view(load_model("ja-en", family="translate"), S7.ShapesRequest()).config
    encoder = ort.InferenceSession(str(out / "encoder.onnx"), providers=["CPUExecutionProvider"])
    assert [o.name for o in encoder.get_outputs()][3:] == list(ENCODER_TAPS)
    src = torch.tensor([[5, 17, 300, 42, 8]])
    got = dict(zip(ENCODER_TAPS, encoder.run(list(ENCODER_TAPS), {"src_ids": src.numpy()})))
    for name, w in _recorded(model, src).items():
        assert np.abs(got[name] - w.detach().numpy()).max() <= TOL, name
    plain = site.SITE_MODELS["demo"]("demo", tmp_path / "demo", weights="auto")  # exported without taps
    assert json.loads((plain / "meta.json").read_text(encoding="utf-8"))["taps"] == []


def test_machine_label_names_the_cpu_cores_and_day():
    label = S1.machine_label()
    assert re.fullmatch(r".+, \d+ logical cores, \d{4}-\d\d-\d\d", label), label


def test_the_explorer_serves_the_measurements_with_their_machine(tmp_path, monkeypatch):
    monkeypatch.setattr(
        S1, "training_step_seconds", lambda b, lengths: ([0.002] * len(lengths), [0.001] * len(lengths))
    )
    monkeypatch.setattr(
        S1, "encoder_seconds", lambda models, lengths: [[0.0005] * len(lengths), [0.002] * len(lengths)]
    )
    files = site.DataFiles()
    path = files.file("parallel-steps.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert files.file("parallel-steps.json") == path  # measured once, then kept
    assert data["machine"] == S1.machine_label() and data["machine"].endswith(f"logical cores, {data['machine'][-10:]}")
    assert data["threads"] >= 1 and data["batches"] == [1, 8, 32] and data["lengths"] == list(S1.STEP_LENGTHS)
    assert data["train_ms"]["8"] == {"rnn": [2.0] * 5, "transformer": [1.0] * 5}
    assert data["shipped"]["rnn_ms"][str(S1.STEPS_MAX_TOKENS)] == 0.5 and data["shipped"]["transformer_ms"]["1"] == 2.0
    with pytest.raises(KeyError, match="no data file"):
        files.file("nothing.json")
    with pytest.raises(KeyError, match="no data file"):
        files.file("../parallel-steps.json")
    written = site.write_site_data(tmp_path / "data", ["parallel-steps.json"])
    assert [p.name for p in written] == ["parallel-steps.json"]
    assert json.loads(written[0].read_text(encoding="utf-8"))["train_ms"] == data["train_ms"]
    assert (tmp_path / "data" / "parallel-steps.json").is_file()
