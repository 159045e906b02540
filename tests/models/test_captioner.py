"""Cross-modal captioner: decoding protocol (cache, greedy, beam), cross-attention over patches,
training on real digit images, Japanese heatmaps, CLI."""

from __future__ import annotations

import dataclasses
import json
import warnings

import pytest
import torch

from attnlab import cli
from attnlab.data.digits import DigitsSplits, digits_splits
from attnlab.decode import beam_search, greedy_decode
from attnlab.inference.caption import DIGIT_NAMES
from attnlab.models.captioner import Captioner, CaptionerConfig, captioner_config
from attnlab.recipes import caption as cp
from attnlab.train import TrainConfig
from attnlab.viz import plot_image_attention

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def subset(data: DigitsSplits, digits: list[int]) -> DigitsSplits:
    parts = {}
    for name in ("train", "valid", "test"):
        x, y = getattr(data, f"{name}_x"), getattr(data, f"{name}_y")
        keep = torch.isin(y, torch.tensor(digits))
        parts[f"{name}_x"], parts[f"{name}_y"] = x[keep], y[keep]
    return DigitsSplits(**parts)


@pytest.fixture(scope="module")
def data():
    return subset(digits_splits(), [0, 1, 7])


@pytest.fixture(scope="module")
def trained(data):
    setup = dataclasses.replace(
        cp.PRESETS["tiny"],
        lang="ja",
        train=TrainConfig(
            epochs=1000,
            max_steps=120,
            lr=3e-3,
            warmup_steps=10,
            schedule="constant",
            eval_every_steps=120,
            progress=False,
            seed=0,
        ),
    )
    captioner, result, _ = cp.train_captioner(setup, data)
    return captioner, result


def test_learns_to_name_digits_in_japanese(trained, data):
    captioner, result = trained
    assert result.steps == 120
    # Three digits (れい, いち, なな) on held-out images, after ~4 s of training.
    assert captioner.evaluate(data.test_x, data.test_y)["exact_match"] >= 0.85
    assert captioner.evaluate(data.test_x, data.test_y, beam_size=3)["exact_match"] >= 0.85
    texts = {c.text for c in captioner.caption(data.test_x)}
    assert texts <= set(DIGIT_NAMES["ja"])


def test_cross_attention_is_a_distribution_over_the_patches(trained, data):
    captioner, _ = trained
    for c in captioner.caption(data.test_x[:5], return_attention=True):
        L, H, T, P = c.cross_attention.shape
        assert (L, H, P) == (1, 2, 16) and T == len(c.tokens) == len(c.text) + 1  # characters + end token
        torch.testing.assert_close(c.cross_attention.sum(-1), torch.ones(L, H, T))
        assert bool((c.cross_attention >= 0).all())


def tiny_model(**fields) -> Captioner:
    torch.manual_seed(0)
    return Captioner(captioner_config("tiny", vocab_size=12, n_decoder_layers=2, **fields)).eval()


def test_incremental_decoding_matches_the_full_forward_pass():
    model = tiny_model()
    images = torch.rand(3, 8, 8)
    tokens = torch.tensor([[2, 5, 6, 7, 8], [2, 9, 5, 4, 4], [2, 6, 6, 6, 10]])  # BOS = 2 first
    full = model(images, tokens, need_weights=True)
    state = model.start(images.flatten(1), model.patch_mask(images))
    for t in range(tokens.shape[1]):
        step = model.step(tokens[:, t : t + 1], state, need_weights=True)
        torch.testing.assert_close(step.logits, full.logits[:, t], rtol=1e-5, atol=1e-5)
        cross = torch.stack([w[:, :, t] for w in full.attentions["cross"]], dim=1)  # (B, L, H, P)
        torch.testing.assert_close(step.cross_weights, cross, rtol=1e-5, atol=1e-6)


def test_beam_of_one_is_greedy_and_beams_keep_valid_attention():
    model = tiny_model()
    images = torch.rand(4, 8, 8)
    kw = dict(bos_id=2, eos_id=3, pad_id=0, max_len=8, src_mask=model.patch_mask(images), return_attention=True)
    greedy = greedy_decode(model, images.flatten(1), **kw)
    beam1 = beam_search(model, images.flatten(1), beam_size=1, alpha=0.0, **kw)
    assert [h.tokens for h in greedy] == [h.tokens for h in beam1]
    for h in beam_search(model, images.flatten(1), beam_size=3, **kw):
        torch.testing.assert_close(h.cross_attention.sum(-1), torch.ones(h.cross_attention.shape[:-1]))


def test_errors_name_the_problem():
    model = tiny_model()
    images = torch.rand(2, 8, 8)
    with pytest.raises(ValueError, match="patch_mask"):
        model.start(images.flatten(1), torch.ones(2, 64, dtype=torch.bool))
    with pytest.raises(ValueError, match="caption language"):
        cp.train_captioner(dataclasses.replace(cp.PRESETS["tiny"], lang="fr"))
    with pytest.raises(ValueError, match="tokenizer"):
        cp.train_captioner(dataclasses.replace(cp.PRESETS["tiny"], model_overrides={"vocab_size": 5}))
    with pytest.raises(ValueError, match="vocab_size"):
        CaptionerConfig(vocab_size=0)


def test_japanese_token_titles_render_without_missing_glyphs(trained, data, tmp_path):
    captioner, _ = trained
    c = captioner.caption(data.test_x[:1], return_attention=True)[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = plot_image_attention(
            data.test_x[0],
            c.cross_attention[-1].mean(0),
            2,
            tmp_path / "ja.png",
            titles=c.tokens,
            title=f"「{c.text}」",
        )
    assert not [w for w in caught if "missing from" in str(w.message)]
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_cli_trains_captions_and_plots(tmp_path, capsys):
    out = tmp_path / "run"
    assert (
        cli.main(
            [
                "train",
                "caption",
                "--out",
                str(out),
                "--preset",
                "tiny",
                "--lang",
                "en",
                "--max-steps",
                "10",
                "--overrides",
                "train.progress=false",
            ]
        )
        == 0
    )
    scores = json.loads((out / "test.json").read_text())
    assert set(scores) == {"greedy", "beam4"} and scores["greedy"]["n"] > 300
    capsys.readouterr()
    plot = tmp_path / "cap.png"
    assert cli.main(["caption", "--model", str(out), "--index", "0", "3", "--beam", "2", "--plot", str(plot)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["test image 0", "test image 3"]
    assert plot.read_bytes()[:8] == PNG_MAGIC
