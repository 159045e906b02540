"""Vision Transformer on scikit-learn's digits: patches, [CLS] attention, rollout, training, CLI, plot."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from attnlab import cli
from attnlab.data.digits import digits_splits
from attnlab.loading import load_model
from attnlab.models.vit import (
    ViT,
    ViTConfig,
    attention_rollout,
    cls_attention,
    patchify,
    vit_config,
)
from attnlab.recipes import vision
from attnlab.train import TrainConfig
from attnlab.viz import plot_image_attention

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_patchify_cuts_raster_order_patches():
    images = torch.arange(2 * 3 * 8 * 8, dtype=torch.float32).view(2, 3, 8, 8)
    p = 4
    patches = patchify(images, p)
    assert patches.shape == (2, 4, 3 * p * p)
    for b in range(2):
        for r in range(2):
            for c in range(2):
                expected = images[b, :, r * p : (r + 1) * p, c * p : (c + 1) * p].reshape(-1)
                torch.testing.assert_close(patches[b, r * 2 + c], expected)


def test_digits_split_is_stratified_disjoint_and_fixed():
    a, b = digits_splits(seed=0), digits_splits(seed=0)
    torch.testing.assert_close(a.test_x, b.test_x)
    sizes = (len(a.train_y), len(a.valid_y), len(a.test_y))
    assert sum(sizes) == 1797 and 350 <= sizes[2] <= 370 and 170 <= sizes[1] <= 190
    for digit in range(10):
        share = float((a.test_y == digit).float().mean())
        assert 0.08 <= share <= 0.12
    train_images = {tuple(row.tolist()) for row in a.train_x.flatten(1)}
    assert not any(tuple(row.tolist()) in train_images for row in a.test_x.flatten(1))  # test images are unseen
    assert float(a.train_x.min()) == 0.0 and float(a.train_x.max()) == 1.0


def test_cls_attention_and_rollout_are_distributions():
    torch.manual_seed(0)
    model = ViT(vit_config("tiny", n_layers=2)).eval()
    out = model(torch.rand(3, 8, 8), need_weights=True)
    assert len(out.attentions) == 2 and out.attentions[0].shape == (3, 2, 17, 17)
    rows = cls_attention(out.attentions)  # (B, L, H, 1+P)
    assert rows.shape == (3, 2, 2, 17)
    torch.testing.assert_close(rows.sum(-1), torch.ones(3, 2, 2))
    rollout = attention_rollout(out.attentions)
    torch.testing.assert_close(rollout.sum(-1), torch.ones(3, 17))
    assert bool((rollout >= 0).all())
    # Written out for two layers: (½A₂ + ½I)(½A₁ + ½I) with head-averaged maps.
    eye = torch.eye(17)
    a1, a2 = (0.5 * w.mean(1) + 0.5 * eye for w in out.attentions)
    torch.testing.assert_close(rollout, a2 @ a1)


def test_accepts_grey_channel_and_flat_images_alike():
    torch.manual_seed(0)
    model = ViT(vit_config("tiny")).eval()
    x = torch.rand(2, 8, 8)
    ref = model(x).logits
    torch.testing.assert_close(model(x.unsqueeze(1)).logits, ref)
    torch.testing.assert_close(model(x.flatten(1)).logits, ref)
    with pytest.raises(ValueError, match="images must have shape"):
        model(torch.rand(2, 7, 7))
    with pytest.raises(TypeError, match="floating-point"):
        model(torch.ones(2, 8, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="does not divide"):
        ViTConfig(patch_size=3)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("vit")
    setup = dataclasses.replace(
        vision.PRESETS["tiny"],
        train=TrainConfig(
            out_dir=str(out),
            epochs=100,
            max_steps=200,
            lr=3e-3,
            warmup_steps=10,
            schedule="constant",
            eval_every_steps=100,
            log_every=50,
            progress=False,
            seed=0,
        ),
    )
    model, result, data = vision.train_vit(setup)
    return out, model, result, data


def test_tiny_vit_learns_the_digits(trained):
    _, model, result, data = trained
    assert result.steps == 200
    # 200 steps of a one-block, 32-wide ViT: well above the 10% of chance on the held-out images.
    assert vision.evaluate_vit(model, data.test_x, data.test_y)["accuracy"] >= 0.75


def test_patch_attention_of_a_trained_model(trained, tmp_path):
    out, _, _, data = trained
    model, config = load_model(out, family="vision")
    for method in ("rollout", "last"):
        weights, probs = vision.patch_attention(model, data.test_x[0], method)
        assert weights.shape == (16,) and probs.shape == (10,)
        assert 0.0 < float(weights.sum()) <= 1.0 + 1e-6 and bool((weights >= 0).all())
    assert config["patch_size"] == 2 and config["model_type"] == "vit"
    path = plot_image_attention(
        data.test_x[0], torch.stack([weights, weights]), 2, tmp_path / "a.png", titles=["一", "two"]
    )
    assert path.read_bytes()[:8] == PNG_MAGIC
    with pytest.raises(ValueError, match="do not fit"):
        plot_image_attention(data.test_x[0], weights[:4], 2, tmp_path / "b.png")
    with pytest.raises(ValueError, match="method"):
        vision.patch_attention(model, data.test_x[0], "mean")


def test_cli_trains_and_plots(tmp_path, capsys):
    out = tmp_path / "run"
    assert (
        cli.main(
            [
                "train",
                "vit",
                "--out",
                str(out),
                "--preset",
                "tiny",
                "--max-steps",
                "20",
                "--patch-size",
                "4",
                "--overrides",
                "train.progress=false",
            ]
        )
        == 0
    )
    scores = json.loads((out / "test.json").read_text())
    assert 0.0 <= scores["accuracy"] <= 1.0 and scores["n"] > 300
    assert "test accuracy" in capsys.readouterr().out
    plot = tmp_path / "attn.png"
    assert cli.main(["vit", "--model", str(out), "--index", "5", "--method", "last", "--plot", str(plot)]) == 0
    printed = capsys.readouterr().out
    assert "test image 5" in printed and printed.count("\n") >= 4  # header lines + a 2×2 grid
    assert plot.read_bytes()[:8] == PNG_MAGIC
    assert cli.main(["vit", "--model", str(out), "--index", "100000"]) == 2
