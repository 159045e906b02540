"""The in-page exports of the character GPT, the digits ViT and the karate-club GAT
(:mod:`attnlab.onnx_apps`): onnxruntime on the graphs gives what PyTorch gives on the shipped
models (the same argmax, logits and attention within 1e-4), the folders hold what the page reads
and are small, the explorer serves them at the static build's URLs (a model not built here is a
503 that says how to build it), and the three widgets' endpoints are gone.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from attnlab import assets
from attnlab.assets import locate
from attnlab.web import site
from attnlab.web.app import create_app

pytest.importorskip("onnx", reason="the ONNX export needs the onnx package: pip install 'attnlab[site]'")
ort = pytest.importorskip("onnxruntime", reason="the check needs onnxruntime: pip install 'attnlab[site]'")

from attnlab.onnx_apps import export_gat_onnx, export_gpt_onnx, export_vit_onnx  # noqa: E402

TOL = 1e-4
LOCAL = "http://127.0.0.1"


def need(name: str):
    try:
        return locate.shipped_model_dir(name)
    except FileNotFoundError:
        pytest.skip(f"needs the shipped model {name} (make models ONLY={name})")


def folder_size(folder) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    for name in ("shakespeare-char", "digits-vit", "karate-gat"):
        need(name)
    root = tmp_path_factory.mktemp("apps")
    return {
        "gpt": export_gpt_onnx("shakespeare-char", root / "gpt"),
        "vit": export_vit_onnx("digits-vit", root / "vit"),
        "gat": export_gat_onnx("karate-gat", root / "gat"),
    }


def session(folder):
    return ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])


@torch.inference_mode()
def test_the_gpt_graph_is_the_pytorch_gpt(exported):
    from attnlab.loading import load_model

    model, tok = load_model(need("shakespeare-char"), family="lm")
    folder = exported["gpt"]
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    assert meta["kind"] == "gpt" and meta["n_positions"] == model.config.n_positions == 128
    assert meta["weights"] == "fp16" and meta["vocab_size"] == tok.vocab_size == 70
    assert json.loads((folder / meta["tokenizer"]).read_text(encoding="utf-8"))["kind"] == "char"
    sess = session(folder)
    texts = ["K", "KING HENRY: My lord, the", "ROMEO:\nWhat light through yon", "x" * 127, "To be, or not" * 20]
    for text in texts:
        ids = tok.encode(text)[-128:]
        logits, attn = sess.run(None, {"ids": np.array([ids], np.int64)})  # (1, V), (L, 1, H, T)
        out = model(torch.tensor([ids]), need_weights=True)
        want = out.logits[0, -1]
        assert logits.shape == (1, 70) and attn.shape == (4, 1, 4, len(ids))
        assert int(logits[0].argmax()) == int(want.argmax())
        assert np.abs(logits[0] - want.numpy()).max() < TOL
        probs = torch.softmax(torch.from_numpy(logits[0]), -1)
        assert float((probs - torch.softmax(want, -1)).abs().max()) < TOL
        rows = torch.stack([w[0, :, -1] for w in out.attentions])  # (L, H, T)
        assert np.abs(attn[:, 0] - rows.numpy()).max() < TOL
        assert np.allclose(attn.sum(-1), 1.0, atol=1e-5)
    # The causal row: the first character of a text sees only itself.
    _, attn = sess.run(None, {"ids": np.array([tok.encode("a")], np.int64)})
    assert np.allclose(attn, 1.0)
    # A batch of rows gives each row what it gives alone.
    ids = np.array([tok.encode("abcdef"), tok.encode("ghijkl")], np.int64)
    logits, _ = sess.run(None, {"ids": ids})
    alone, _ = sess.run(None, {"ids": ids[1:]})
    assert np.abs(logits[1] - alone[0]).max() < 1e-5


@torch.inference_mode()
def test_the_vit_graph_is_the_pytorch_vit_on_every_held_out_digit(exported):
    from attnlab.data.digits import digits_splits
    from attnlab.loading import load_model
    from attnlab.models.vit import cls_attention

    model, config = load_model(need("digits-vit"), family="vision")
    folder = exported["vit"]
    data = json.loads((folder / "images.json").read_text(encoding="utf-8"))
    split = digits_splits(seed=config.get("split_seed", 0))
    assert torch.equal(torch.tensor(data["images"]), split.test_x.float())
    assert data["labels"] == split.test_y.tolist() and len(data["labels"]) == 359
    images = torch.tensor(data["images"])  # (N, 8, 8)
    logits, cls = session(folder).run(None, {"images": images.numpy()})  # (N, K), (L, N, H, 1 + P)
    out = model(images, need_weights=True)
    assert logits.argmax(-1).tolist() == out.logits.argmax(-1).tolist()
    assert np.abs(logits - out.logits.numpy()).max() < TOL
    assert cls.shape == (2, 359, 4, 17)
    assert np.abs(cls.transpose(1, 0, 2, 3) - cls_attention(out.attentions).numpy()).max() < TOL


@torch.inference_mode()
def test_the_gat_graph_is_the_pytorch_gat(exported):
    from attnlab.data.graphs import karate_club
    from attnlab.loading import load_model

    model, config = load_model(need("karate-gat"), family="graph")
    folder = exported["gat"]
    graph = json.loads((folder / "graph.json").read_text(encoding="utf-8"))
    club = karate_club()
    assert graph["mask"] == club.mask.int().tolist() and graph["truth"] == club.labels.tolist()
    assert graph["labelled"] == config["labelled"] and len(graph["positions"]) == 34
    feeds = {"features": np.array(graph["features"], np.float32), "mask": np.array(graph["mask"], bool)}
    logits, first, second = session(folder).run(None, feeds)
    out = model(club.features, club.mask, need_weights=True)
    assert logits.argmax(-1).tolist() == out.logits.argmax(-1).tolist()
    assert np.abs(logits - out.logits.numpy()).max() < TOL
    assert np.abs(first - out.attentions[0].numpy()).max() < TOL
    assert np.abs(second - out.attentions[1].numpy()).max() < TOL
    assert float(first[:, ~club.mask.numpy()].max()) == 0.0  # no weight outside a member's neighbours


def test_the_folders_are_small_and_registered(exported):
    sizes = {k: folder_size(v) for k, v in exported.items()}
    print("folder sizes (bytes):", sizes)
    assert sizes["gpt"] < 600_000 and sizes["vit"] < 300_000 and sizes["gat"] < 60_000
    assert site.SITE_MODELS["shakespeare-char"] is export_gpt_onnx
    assert site.SITE_MODELS["digits-vit"] is export_vit_onnx
    assert site.SITE_MODELS["karate-gat"] is export_gat_onnx


def test_exports_refuse_bad_settings_in_one_line(tmp_path):
    need("digits-vit")
    with pytest.raises(ValueError, match="unknown weights"):
        export_vit_onnx("digits-vit", tmp_path / "v", weights="int4")
    with pytest.raises(ValueError, match="not a GPT"):
        export_gpt_onnx(need("shakespeare-mlm"), tmp_path / "m")
    (tmp_path / "there").mkdir()
    with pytest.raises(FileExistsError, match="exists"):
        export_gat_onnx("karate-gat", tmp_path / "there")


def test_the_explorer_serves_the_folders_and_has_no_endpoint_for_them(tmp_path, monkeypatch):
    need("karate-gat")
    client = TestClient(create_app(), base_url=LOCAL)
    r = client.get("/static/models/karate-gat/meta.json")
    assert r.status_code == 200 and r.json()["kind"] == "gat"
    assert client.get("/static/models/karate-gat/graph.json").json()["class_names"] == ["Mr. Hi", "Officer"]
    for url in ("/api/lesson/next-token", "/api/lesson/apps/gpt", "/api/lesson/apps/vit", "/api/lesson/apps/gat"):
        assert client.post(url, json={}).status_code in (404, 405), url
    # A shipped model not built here: a 503 that names it and the command, which the page shows.
    monkeypatch.setattr(assets, "ROOT", tmp_path)
    bare = TestClient(create_app(), base_url=LOCAL)
    r = bare.get("/static/models/digits-vit/meta.json")
    assert r.status_code == 503 and "make models ONLY=digits-vit" in r.json()["detail"]
