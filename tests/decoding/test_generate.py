"""attnlab.decode's language-model sampling: the cache, the sampling rules, streaming.

The reference for cached generation is uncached generation (the whole sequence re-run at every
step); the sampling rules are checked against their definitions on hand-made distributions.
(Greedy generation against HuggingFace ``generate`` is in test_convert_hf.py.)
"""

from __future__ import annotations

import contextlib
import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import accel
from attnlab.accel import engine
from attnlab.decode import generate, iter_generate, sample_next, sampling_probs
from attnlab.models.gpt import GPT, gpt_config

SETTINGS = settings(max_examples=8, deadline=None)


def tiny(positions: str = "learned", n_positions: int = 64) -> GPT:
    torch.manual_seed(0)
    return GPT(gpt_config("tiny", vocab_size=29, positions=positions, n_positions=n_positions)).eval()


class CountingModel(torch.nn.Module):
    """Wraps a GPT and records the length of every input it is given."""

    def __init__(self, model: GPT) -> None:
        super().__init__()
        self.model, self.config, self.lengths = model, model.config, []

    def new_caches(self):
        return self.model.new_caches()

    def forward(self, input_ids, **kw):
        self.lengths.append(input_ids.shape[1])
        return self.model(input_ids, **kw)


@pytest.mark.parametrize("positions", ["learned", "rotary"])
@SETTINGS
@given(t0=st.integers(1, 8), n=st.integers(1, 20), seed=st.integers(0, 2**16))
def test_cached_generation_equals_uncached(positions, t0, n, seed):
    model = tiny(positions)
    prompt = torch.randint(0, 29, (2, t0), generator=torch.Generator().manual_seed(seed))
    a = generate(model, prompt, max_new_tokens=n, temperature=0, use_cache=True, return_logits=True)
    b = generate(model, prompt, max_new_tokens=n, temperature=0, use_cache=False, return_logits=True)
    assert torch.equal(a.tokens, b.tokens)
    assert a.tokens.shape == (2, t0 + n) and torch.equal(a.tokens[:, :t0], prompt)
    torch.testing.assert_close(a.logits, b.logits, atol=1e-5, rtol=1e-5)
    assert a.logits.shape == (2, n, 29)


@pytest.mark.parametrize("native", [True, False])
def test_generation_takes_the_token_stepper_with_the_same_result(native, monkeypatch):
    # The model's own stepper gives forward's numbers bit for bit; the native engine's (one C call
    # per step) up to rounding, and the same tokens.
    # (native=False: every native kernel switched off, as on a machine without a compiler)
    switch = contextlib.nullcontext() if native else accel.disabled()
    model = tiny()
    prompt = torch.randint(0, 29, (2, 5), generator=torch.Generator().manual_seed(0))
    with switch:
        assert engine.stepper(model).engine == ("native" if native and accel.isas() else "modules")
        with_stepper = generate(model, prompt, max_new_tokens=12, temperature=0, return_logits=True)
        calls = []
        real = GPT.token_stepper
        monkeypatch.setattr(GPT, "token_stepper", lambda self: calls.append(1) or real(self))
        generate(model, prompt, max_new_tokens=12, temperature=0)
        assert calls == [1]  # built once per generation
        monkeypatch.setattr(GPT, "token_stepper", lambda self: None)  # forward at every step
        plain = generate(model, prompt, max_new_tokens=12, temperature=0, return_logits=True)
    assert torch.equal(with_stepper.tokens, plain.tokens)
    if native:
        torch.testing.assert_close(with_stepper.logits, plain.logits, atol=1e-5, rtol=1e-5)
    else:
        assert torch.equal(with_stepper.logits, plain.logits)


def test_sampled_generation_with_cache_matches_uncached_for_the_same_seed():
    model = tiny()
    prompt = torch.tensor([[3, 4, 5]])
    runs = [
        generate(
            model,
            prompt,
            max_new_tokens=25,
            temperature=1.3,
            top_k=10,
            top_p=0.95,
            generator=torch.Generator().manual_seed(7),
            use_cache=cache,
        ).tokens
        for cache in (True, False)
    ]
    assert torch.equal(runs[0], runs[1])


def test_cache_prefills_once_then_feeds_one_token_per_step():
    counting = CountingModel(tiny())
    generate(counting, torch.zeros(1, 6, dtype=torch.long), max_new_tokens=5, temperature=0)
    assert counting.lengths == [6, 1, 1, 1, 1]
    counting.lengths.clear()
    generate(counting, torch.zeros(1, 6, dtype=torch.long), max_new_tokens=3, temperature=0, use_cache=False)
    assert counting.lengths == [6, 7, 8]


def test_generation_beyond_the_context_window():
    model = tiny(n_positions=16)
    counting = CountingModel(model)
    prompt = torch.randint(0, 29, (1, 5))
    a = generate(counting, prompt, max_new_tokens=40, temperature=0, return_logits=True)
    b = generate(model, prompt, max_new_tokens=40, temperature=0, use_cache=False, return_logits=True)
    assert a.tokens.shape == b.tokens.shape == (1, 45)
    # Until the window is full both see the same context.
    torch.testing.assert_close(a.logits[:, :12], b.logits[:, :12], atol=1e-5, rtol=1e-5)
    # The cache is re-filled from the last half window, never more than n_positions tokens.
    assert max(counting.lengths) <= 16
    assert 8 in counting.lengths[1:]


def test_prompt_longer_than_the_window_uses_its_end():
    model = tiny(n_positions=16)
    prompt = torch.randint(0, 29, (1, 30))
    a = generate(model, prompt, max_new_tokens=1, temperature=0, return_logits=True)
    ref = model(prompt[:, -16:]).logits[:, -1]
    torch.testing.assert_close(a.logits[:, 0], ref)


def test_stream_callback_and_iterator_give_tokens_as_they_come():
    model = tiny()
    prompt = torch.tensor([[1, 2, 3]])
    seen = []
    out = generate(model, prompt, max_new_tokens=7, temperature=0, stream=lambda tok: seen.append(int(tok[0])))
    assert seen == out.tokens[0, 3:].tolist()
    it = iter_generate(model, prompt, max_new_tokens=7, temperature=0)
    first_token, first_logits = next(it)
    assert int(first_token[0]) == seen[0] and first_logits.shape == (1, 29)
    assert [int(t[0]) for t, _ in it] == seen[1:]


def test_eos_stops_rows_and_generation():
    model = tiny()
    prompt = torch.tensor([[1, 2], [3, 4]])
    free = generate(model, prompt, max_new_tokens=10, temperature=0).tokens
    eos = int(free[0, 4])  # the third token of row 0
    out = generate(model, prompt, max_new_tokens=10, temperature=0, eos_id=eos).tokens
    row0 = out[0, 2:].tolist()
    first = row0.index(eos)
    assert all(t == eos for t in row0[first:])
    if eos not in free[1, 2:].tolist():
        assert out.shape[1] == 12  # row 1 never ends, so all steps run
    else:
        assert out.shape[1] <= 12


def test_generation_restores_training_mode_and_handles_zero_tokens():
    model = tiny().train()
    out = generate(model, torch.tensor([[1]]), max_new_tokens=0, return_logits=True)
    assert out.tokens.tolist() == [[1]] and out.logits.shape == (1, 0, 29)
    generate(model, torch.tensor([[1]]), max_new_tokens=2)
    assert model.training


def test_sample_next_greedy_top_k_and_top_p_follow_their_definitions():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert sample_next(logits, temperature=0).tolist() == [0]
    g = torch.Generator().manual_seed(0)
    draws = torch.stack([sample_next(logits, top_k=2, generator=g) for _ in range(2000)])
    assert set(draws.flatten().tolist()) == {0, 1}
    freq0 = (draws == 0).float().mean().item()
    assert freq0 == pytest.approx(0.5 / 0.8, abs=0.04)  # renormalised over the top 2
    # Nucleus 0.7: {0.5, 0.3} reaches it; token 2 and 3 are out.
    draws = torch.stack([sample_next(logits, top_p=0.7, generator=g) for _ in range(2000)])
    assert set(draws.flatten().tolist()) == {0, 1}
    # Nucleus 0.85 needs the third token too (0.5 + 0.3 < 0.85).
    draws = torch.stack([sample_next(logits, top_p=0.85, generator=g) for _ in range(3000)])
    assert set(draws.flatten().tolist()) == {0, 1, 2}
    # A tiny nucleus is the most likely token only.
    assert set(torch.stack([sample_next(logits, top_p=1e-3, generator=g) for _ in range(50)]).flatten().tolist()) == {0}


def test_sampling_probs_is_the_distribution_sample_next_draws_from():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.1, 0.2, 0.3, 0.4]]))
    greedy = sampling_probs(logits, temperature=0)
    assert greedy.tolist() == [[1, 0, 0, 0], [0, 0, 0, 1]]
    top2 = sampling_probs(logits, top_k=2)
    torch.testing.assert_close(top2[0], torch.tensor([0.5, 0.3, 0, 0]) / 0.8)
    torch.testing.assert_close(top2[1], torch.tensor([0, 0, 0.3, 0.4]) / 0.7)
    cold = sampling_probs(logits[:1], temperature=0.5)  # temperature 0.5 squares the probabilities
    squares = torch.tensor([0.5, 0.3, 0.15, 0.05]) ** 2
    torch.testing.assert_close(cold[0], squares / squares.sum())
    nucleus = sampling_probs(logits[:1], top_p=0.7)
    torch.testing.assert_close(nucleus[0], torch.tensor([0.5, 0.3, 0, 0]) / 0.8)
    # Same generator state, same draw: sample_next samples exactly this distribution.
    for kw in (dict(temperature=0.7), dict(top_k=3), dict(temperature=1.3, top_p=0.9)):
        g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
        drawn = [sample_next(logits, generator=g1, **kw) for _ in range(20)]
        want = [torch.multinomial(sampling_probs(logits, **kw), 1, generator=g2).squeeze(1) for _ in range(20)]
        assert torch.equal(torch.stack(drawn), torch.stack(want))
    with pytest.raises(ValueError, match="temperature"):
        sampling_probs(logits, temperature=-1)


def test_temperature_sharpens_and_flattens():
    logits = torch.log(torch.tensor([[0.6, 0.4]]))
    g = torch.Generator().manual_seed(1)

    def freq(temp: float) -> float:
        return (
            (torch.stack([sample_next(logits, temperature=temp, generator=g) for _ in range(3000)]) == 0)
            .float()
            .mean()
            .item()
        )

    p_cold = 0.6**2 / (0.6**2 + 0.4**2)  # temperature 0.5 squares the probabilities
    assert freq(0.5) == pytest.approx(p_cold, abs=0.03)
    assert freq(1.0) == pytest.approx(0.6, abs=0.03)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(temperature=-1.0), "temperature"),
        (dict(top_k=0), "top_k"),
        (dict(top_p=0.0), "top_p"),
        (dict(top_p=1.5), "top_p"),
    ],
)
def test_bad_sampling_settings_are_named(kw, match):
    with pytest.raises(ValueError, match=match):
        generate(tiny(), torch.tensor([[1]]), max_new_tokens=2, **kw)


def test_bad_prompts_are_named():
    with pytest.raises(ValueError, match="T0"):
        generate(tiny(), torch.zeros(1, 0, dtype=torch.long), max_new_tokens=2)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(tiny(), torch.tensor([[1]]), max_new_tokens=-1)


# --------------------------------------------------------------------------------------------
# The `attnlab generate` command on a tiny model trained here.
# --------------------------------------------------------------------------------------------

TEXT = "to be or not to be, that is the question.\n" * 40


@pytest.fixture(scope="module")
def tiny_lm_dir(tmp_path_factory):
    from attnlab.cli import main

    root = tmp_path_factory.mktemp("lm")
    (root / "text.txt").write_text(TEXT, encoding="utf-8")
    out = root / "run"
    assert (
        main(
            [
                "train",
                "lm",
                "--text",
                str(root / "text.txt"),
                "--out",
                str(out),
                "--preset",
                "tiny",
                "--max-steps",
                "30",
                "--overrides",
                "train.progress=false",
                "train.lr=0.01",
            ]
        )
        == 0
    )
    return out


def test_generate_command_streams_what_generate_returns(tiny_lm_dir, capsys):
    from attnlab.cli import main
    from attnlab.loading import load_model

    capsys.readouterr()
    assert (
        main(
            [
                "generate",
                "--model",
                str(tiny_lm_dir),
                "--prompt",
                "to be",
                "--max-new-tokens",
                "25",
                "--temperature",
                "0",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    model, tok = load_model(tiny_lm_dir, family="lm")
    prompt = torch.tensor([tok.encode("to be")])
    expected = tok.decode(generate(model, prompt, max_new_tokens=25, temperature=0).tokens[0])
    assert printed == expected + "\n"
    assert len(printed) > len("to be") + 10


def test_generate_command_seed_reproduces_samples(tiny_lm_dir, capsys):
    from attnlab.cli import main

    outs = []
    for _ in range(2):
        capsys.readouterr()
        assert (
            main(
                [
                    "generate",
                    "--model",
                    str(tiny_lm_dir),
                    "--prompt",
                    "the",
                    "--max-new-tokens",
                    "30",
                    "--temperature",
                    "1.0",
                    "--top-k",
                    "5",
                    "--top-p",
                    "0.9",
                    "--seed",
                    "3",
                ]
            )
            == 0
        )
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and outs[0].startswith("the")


def test_generate_command_errors_are_one_line(tiny_lm_dir, tmp_path, capsys):
    from attnlab.cli import main

    assert main(["generate", "--model", str(tmp_path), "--prompt", "x"]) == 2
    assert "no model found" in capsys.readouterr().err
    assert main(["generate", "--model", str(tiny_lm_dir), "--prompt", ""]) == 2
    assert "prompt is empty" in capsys.readouterr().err
    assert main(["generate", "--model", str(tiny_lm_dir), "--prompt", "to", "--top-p", "2"]) == 2
    assert "top_p" in capsys.readouterr().err


def test_bf16_generation_with_the_native_step_follows_the_modules():
    # A bf16 model's prompt is cached by its modules (bf16); the native step reads the weights as
    # they are and computes in fp32, so its logits are those of the modules up to bf16's rounding.
    model = tiny().to(torch.bfloat16)
    prompt = torch.randint(0, 29, (2, 5), generator=torch.Generator().manual_seed(1))
    native = generate(model, prompt, max_new_tokens=10, temperature=0, return_logits=True)
    plain = generate(copy.deepcopy(model).float(), prompt, max_new_tokens=10, temperature=0, return_logits=True)
    assert native.tokens.shape == (2, 15)
    torch.testing.assert_close(native.logits[:, 0].float(), plain.logits[:, 0], atol=2e-2, rtol=2e-2)
