"""attnlab's native decoding paths against the plain PyTorch models, for every configuration they take.

The reference is always the model's modules with every native kernel switched off
(``attnlab.accel.disabled()``), in fp32: for a bf16 model, the same weights widened to fp32 (exact),
since the native paths read bf16 weights as they are and compute in fp32. Every path runs on each
instruction set this machine has (``attnlab.accel.isas()``, forced by ``using_isa``), so that an
AVX-512 machine tests its AVX2 and generic kernels too. Under ``avx512_bf16`` the products of bf16
weights round the activations to bf16 (the AVX-512 BF16 dot product): there the tolerance is bf16's.
"""

from __future__ import annotations

import contextlib
import copy
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from pinned_lines import pin_lines

from attnlab import accel
from attnlab.accel import engine, kernels
from attnlab.accel.engine import NativeDecoderState
from attnlab.decode import beam_search
from attnlab.models.gpt import GPT, gpt_config
from attnlab.models.seq2seq import DecoderState
from attnlab.models.transformer import PRESETS, Transformer, TransformerConfig

BOS, EOS, PAD = 2, 3, 0
ISAS = list(accel.isas())
needs_kernels = pytest.mark.skipif(not ISAS, reason="no C compiler here: the native kernels are not built")
each_isa = pytest.mark.parametrize("isa", ISAS or ["none"])
WIDTHS = [(32, 2, 64), (80, 4, 200)]  # (D, H, d_ff): beyond 32, and widths that end a panel early
DTYPES = [torch.float32, torch.bfloat16]

# Every configuration on the best instruction set; each other one on a cover of them (every norm,
# activation, dtype and width at least once), which keeps the run short. The instruction set
# changes the products only (the layers' other code is built once for the machine).
TRANSLATOR_CASES = [
    (norm, activation, dtype, WIDTHS[i % 2], ISAS[-1] if ISAS else "none")
    for i, (norm, activation, dtype) in enumerate(
        (n, a, d) for n in ("pre", "post") for a in ("relu", "gelu", "gelu_tanh") for d in DTYPES
    )
] + [
    (norm, activation, dtype, width, isa)
    for isa in ISAS[:-1]
    for dtype in DTYPES
    for norm, activation, width in (
        ("pre", "relu", WIDTHS[0]),
        ("post", "gelu", WIDTHS[1]),
        ("pre", "gelu_tanh", WIDTHS[1]),
    )
]
GPT_KW = [{}, dict(activation="gelu"), dict(activation="relu", bias=False)]
GPT_CASES = [
    (kw, dtype, (32, 2) if i % 2 else (80, 4), ISAS[-1] if ISAS else "none")
    for i, (kw, dtype) in enumerate((k, d) for k in GPT_KW for d in DTYPES)
] + [(GPT_KW[i % 3], dtype, (80, 4) if i % 2 else (32, 2), isa) for i, isa in enumerate(ISAS[:-1]) for dtype in DTYPES]


def tolerance(dtype: torch.dtype, isa: str) -> dict:
    """fp32 arithmetic: fp32's rounding; the BF16 dot product of bf16 weights: bf16's."""
    if dtype == torch.bfloat16 and isa == "avx512_bf16":
        return dict(atol=5e-2, rtol=5e-2)
    return dict(atol=1e-4, rtol=1e-4) if dtype == torch.bfloat16 else dict(atol=1e-5, rtol=1e-5)


def translator(d_model=32, n_heads=2, d_ff=64, dtype=torch.float32, seed=0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    fields = dict(PRESETS["tiny"], d_model=d_model, n_heads=n_heads, d_ff=d_ff, n_encoder_layers=2, n_decoder_layers=2)
    model = Transformer(TransformerConfig(src_vocab_size=23, tgt_vocab_size=19, **dict(fields, **overrides)))
    return model.eval().to(dtype)


def sources(B=3, S=7, seed=1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(5, 23, (B, S), generator=g)
    src[0, S - 2 :] = PAD  # padded sources of different lengths
    src[1, S - 4 :] = PAD
    return src


def plain_state(model: Transformer, src: torch.Tensor) -> DecoderState:
    """The decoding state of the seq2seq contract computed by the modules alone."""
    mask = src != PAD
    memory, _ = model.encode(src, mask)
    return DecoderState([b.cross_attn.project_kv(memory) for b in model.decoder], mask, [b.self_attn.new_cache() for b in model.decoder])  # fmt: skip


def run_steps(model, fast: DecoderState, wide, plain: DecoderState, tol: dict, V: int = 19) -> None:
    """Steps of ``fast`` (the path under test) against ``plain`` (the modules, no kernels) over one
    row per sentence, then the beams of expand(), reorders that move hypotheses and drop
    sentences, and steps past the caches' first 16 positions (their storage grows)."""
    tokens = torch.full((3, 1), BOS)
    K = 2

    def both(tokens):
        a = model.step(tokens, fast).logits
        with accel.disabled():
            b = wide.step(tokens, plain).logits
        assert a.dtype == torch.float32 and a.shape == b.shape
        torch.testing.assert_close(a, b.float(), **tol)
        return a

    both(tokens)
    fast.expand(K)
    plain.expand(K)
    tokens = torch.tensor([[5], [6], [7], [8], [9], [10]])  # (B·K, 1)
    for index in (torch.tensor([1, 0, 2, 2, 5, 4]), torch.tensor([1, 1, 5, 4]), torch.tensor([0, 1, 2, 3])):
        both(tokens)
        fast.reorder(index)
        plain.reorder(index)
        tokens = (tokens[index] + 1) % V
    for _ in range(16):
        both(tokens)
        tokens = (tokens + 3) % V
    assert fast.length == plain.length == 20


def count_kernel_steps(monkeypatch) -> list[int]:
    """The rows of every call of the C decoder step (:class:`attnlab.accel.kernels.DecoderStep`)
    from now on, in a list that the calls fill."""
    rows_seen: list[int] = []
    real_call = kernels.DecoderStep.__call__

    def counted(self, tokens, *args):
        rows_seen.append(tokens.shape[0])
        return real_call(self, tokens, *args)

    monkeypatch.setattr(kernels.DecoderStep, "__call__", counted)
    return rows_seen


@needs_kernels
@pytest.mark.parametrize("norm, activation, dtype, width, isa", TRANSLATOR_CASES)
def test_translator_native_path_equals_the_modules(norm, activation, dtype, width, isa, monkeypatch):
    # start() encodes a small batch with one call of the C encoder (embeddings, every layer over
    # the real tokens of each sentence, the final norm, each decoder layer's source keys/values),
    # and each step is one call of the C decoder step. The instruction sets but the best run their
    # packed products at every row count (the BLAS's, from a few rows on, does not depend on them).
    D, H, d_ff = width
    model = translator(D, H, d_ff, dtype, norm=norm, activation=activation)
    wide = copy.deepcopy(model).float()
    src = sources()
    real = (src != PAD)[:, None, :, None]  # (B, 1, S, 1): padded positions are never attended to
    tol = tolerance(dtype, isa)
    with torch.no_grad(), accel.using_isa(isa), kernels.using_blas(isa == ISAS[-1]):
        native = engine.decoder(model)
        fast = native.start(src)
        assert isinstance(fast, NativeDecoderState) and fast.fast.engine == "native"
        with accel.disabled():
            plain = plain_state(wide, src)
        for (k, v), (rk, rv) in zip(fast.memory_kv, plain.memory_kv, strict=True):
            assert k.dtype == torch.float32 and k.is_contiguous()
            torch.testing.assert_close(k * real, rk * real, **tol)
            torch.testing.assert_close(v * real, rv * real, **tol)
        kernel_rows = count_kernel_steps(monkeypatch)
        run_steps(native, fast, wide, plain, tol)
    assert kernel_rows == [3, 6, 6, 4] + [4] * 16  # every step was the one C call (a few rows each)


@needs_kernels
@pytest.mark.parametrize("blas", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_many_rows_take_the_tensor_operations_step_only_without_a_blas(dtype, blas, monkeypatch):
    # Where the C step's products cannot go to a BLAS, an fp32 step past the table's
    # one_call_step_max_rows rows (attnlab.accel.rules.prefer_one_call_step) is the modules' (the
    # BLAS's products), with fewer it is the one C call again; both extend the same caches, so a
    # decoding that crosses the line either way keeps the modules' numbers. With the BLAS the one
    # call takes every row count, and bf16 weights always stay on the C step (its fp32
    # arithmetic). The rows of every C step are counted here.
    if blas and not kernels.blas():
        pytest.skip("no BLAS found for the kernels' products here")
    kernel_rows = count_kernel_steps(monkeypatch)
    pin_lines(monkeypatch, one_call_step_max_rows=4, one_call_step_max_rows_one_thread=4)  # run_steps: 3, 6, 4 rows
    model = translator(dtype=dtype)
    wide = copy.deepcopy(model).float()
    src = sources()
    with torch.no_grad(), kernels.using_blas(blas):
        native = engine.decoder(model)
        fast = native.start(src)
        assert isinstance(fast, NativeDecoderState) and fast.fast.engine == "native"
        with accel.disabled():
            plain = plain_state(wide, src)
        run_steps(native, fast, wide, plain, tolerance(dtype, ISAS[-1]))
    assert set(kernel_rows) == ({3, 4} if dtype == torch.float32 and not blas else {3, 4, 6})


@needs_kernels
@pytest.mark.parametrize("blas", [False, True])
def test_gpt_many_rows_take_the_tensor_operations_step_only_without_a_blas(blas, monkeypatch):
    # GPT's stepper as the translator's: without a BLAS, three rows past the line run forward
    # (its numbers bit for bit), two rows the one C call, on the same caches; with the BLAS the one
    # call takes both. The rows of every C step are counted here.
    if blas and not kernels.blas():
        pytest.skip("no BLAS found for the kernels' products here")
    kernel_rows = count_kernel_steps(monkeypatch)
    torch.manual_seed(0)
    model = GPT(gpt_config("tiny", vocab_size=37)).eval()
    ids = torch.randint(0, 37, (3, 20), generator=torch.Generator().manual_seed(3))
    pin_lines(monkeypatch, one_call_step_max_rows=2, one_call_step_max_rows_one_thread=2)
    tol = tolerance(torch.float32, ISAS[-1])
    with torch.inference_mode(), kernels.using_blas(blas):
        step = engine.stepper(model)
        assert step.engine == "native"
        a, b = model.new_caches(), model.new_caches()
        model(ids[:, :3], caches=a)
        model(ids[:, :3], caches=b)
        for t in range(3, 10):  # three rows: without the BLAS the tensor operations, forward's bits
            got, want = step(ids[:, t : t + 1], b), model(ids[:, t : t + 1], caches=a).logits[:, -1]
            if blas:
                torch.testing.assert_close(got, want, **tol)
            else:
                assert torch.equal(got, want)
        assert set(kernel_rows) == ({3} if blas else set())
        for c in a + b:
            c.reorder(torch.tensor([0, 2]))
        for t in range(10, 20):  # two rows: the C step on the caches the other step filled
            want = model(ids[[0, 2], t : t + 1], caches=a).logits[:, -1]
            torch.testing.assert_close(step(ids[[0, 2], t : t + 1], b), want, **tol)
    assert set(kernel_rows) == ({3, 2} if blas else {2})


@needs_kernels
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("blas", ["every row count", "never"])
@pytest.mark.parametrize("norm, width", [("pre", WIDTHS[0]), ("post", WIDTHS[1])])
def test_translator_native_path_equals_the_modules_with_and_without_the_blas(norm, width, blas, dtype, monkeypatch):
    # The C encoder's and step's products go to the BLAS from accel.rules' row lines; here at every
    # row count (one row and the vocabulary projection included), and at none (the packed panels
    # at every row count): the modules' numbers either way (a bf16 model's: the same weights in
    # fp32, to bf16's tolerance where the rows are rounded to bf16).
    if blas == "every row count":
        if not kernels.blas(dtype):
            pytest.skip(f"no BLAS for {dtype} products here")
        pin_lines(monkeypatch, blas_min_rows=1, blas_min_rows_large=1, blas_min_rows_bf16=1)
    D, H, d_ff = width
    model = translator(D, H, d_ff, dtype, norm=norm, activation="gelu")
    wide = copy.deepcopy(model).float()
    tol = tolerance(dtype, ISAS[-1])
    src = sources()
    with torch.no_grad(), kernels.using_blas(blas != "never"):
        native = engine.decoder(model)
        fast = native.start(src)
        assert isinstance(fast, NativeDecoderState) and fast.fast.engine == "native"
        with accel.disabled():
            plain = plain_state(wide, src)
        for (k, v), (rk, rv) in zip(fast.memory_kv, plain.memory_kv, strict=True):
            real = (src != PAD)[:, None, :, None]  # (B, 1, S, 1)
            torch.testing.assert_close(k * real, rk * real, **tol)
            torch.testing.assert_close(v * real, rv * real, **tol)
        run_steps(native, fast, wide, plain, tol)


@needs_kernels
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, out", [(40, 77), (257, 300), (64, 5000)])
@pytest.mark.parametrize("rows", [1, 2, 3, 8, 17, 40])
def test_blas_products_equal_torch_and_follow_the_row_lines(n, out, rows, dtype, monkeypatch):
    # An fp32 product of at least blas_min_rows rows (blas_min_rows_large for a matrix of more
    # than blas_large_weights weights; attnlab.accel.rules.Lines) goes to the BLAS, each thread computing its share of the
    # outputs; bf16 weights in pairs (avx512_bf16) from blas_min_rows_bf16 rows, by the BLAS's bf16
    # product, which rounds the rows to bf16 as the pairs' panels do. Fewer rows stay with the
    # packed panels. All give torch's numbers; which one ran shows in the bits, each being the same
    # call after call.
    if not kernels.blas(dtype):
        pytest.skip(f"no BLAS for {dtype} products here")
    # bf16 weights reach the BLAS only as avx512_bf16's pairs, whatever ATTNLAB_ISA makes the default
    pairs = "avx512_bf16" if dtype == torch.bfloat16 else None
    if pairs and pairs not in ISAS:
        pytest.skip("bf16 products go to the BLAS only in avx512_bf16's pairs, not built here")
    table = pin_lines(monkeypatch, blas_large_weights=100_000)  # (64, 5000) is "large" here
    gen = torch.Generator().manual_seed(n * rows + out)
    w, b, x = torch.randn(out, n, generator=gen), torch.randn(out, generator=gen), torch.randn(rows, n, generator=gen)
    w = w.to(dtype)
    packed = kernels.pack(w, pairs)
    assert packed.plain is not None and packed.plain.data_ptr() == w.data_ptr()  # the weights as they are, no copy
    default = kernels.packed_linear(x, packed, b)
    with kernels.using_blas(False):
        panels = kernels.packed_linear(x, packed, b)
    if dtype == torch.float32:
        line = table.blas_min_rows_large if out * n > 100_000 else table.blas_min_rows
        want = F.linear(x, w, b)
    else:
        line = table.blas_min_rows_bf16
        want = F.linear(x.bfloat16().float(), w.float(), b)
    pin_lines(monkeypatch, blas_large_weights=100_000, blas_min_rows=1, blas_min_rows_large=1, blas_min_rows_bf16=1)
    blas = kernels.packed_linear(x, packed, b)
    for y in (default, panels, blas):
        torch.testing.assert_close(y, want, atol=1e-4, rtol=1e-5)
    assert torch.equal(default, blas if rows >= line else panels)
    assert torch.equal(blas, kernels.packed_linear(x, packed, b))  # the same bits call after call
    with kernels.using_blas(False):
        assert not kernels.blas(dtype)
    assert kernels.blas(dtype)


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("norm", ["pre", "post"])
@pytest.mark.parametrize("kernels_on", [True, False])
def test_translator_engine_falls_back_to_the_modules(norm, activation, kernels_on):
    # Where the C step does not apply (here: LayerNorms of different eps, which it does not take),
    # or no kernel is in use (switched off: a machine without a C compiler), the "auto" engine
    # decodes by the model's modules: their state, their numbers bit for bit.
    model = translator(norm=norm, activation=activation)
    model.decoder[1].ff_norm.eps = 1e-6
    src = sources()
    with torch.no_grad(), contextlib.nullcontext() if kernels_on else accel.disabled():
        native = engine.decoder(model)
        fast = native.start(src)
        assert type(fast) is DecoderState
        plain = plain_state(model, src)
        run_steps(native, fast, model, plain, dict(atol=0, rtol=0))


def uncached_score(model: Transformer, src: torch.Tensor, tokens: list[int], max_len: int) -> float:
    """A hypothesis's log-probability by the full teacher-forced forward (no cache): its tokens, and
    EOS if it ended before max_len."""
    target = tokens + ([EOS] if len(tokens) < max_len else [])
    tgt_in = torch.tensor([[BOS] + target[:-1]])
    logp = model(src, tgt_in).logits.float().log_softmax(-1)[0]  # (T, V)
    return float(logp.gather(1, torch.tensor(target)[:, None]).sum())


@needs_kernels
@each_isa
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_beam_search_on_the_native_path_scores_as_the_uncached_modules(dtype, isa):
    # Beam search with the native step (cached, beams reordered every step, sentences leaving the
    # batch): each hypothesis's score is the log-probability the plain model gives its tokens in one
    # teacher-forced pass; and in fp32 arithmetic it finds the hypotheses the plain search finds.
    model = translator(64, 4, 128, dtype, norm="pre", activation="gelu", seed=3)
    wide = copy.deepcopy(model).float()
    src = sources(B=4, S=9, seed=5)
    kw = dict(bos_id=BOS, eos_id=EOS, beam_size=3, max_len=10, alpha=0.0)
    with torch.no_grad(), accel.using_isa(isa):
        hyps = beam_search(model, src, **kw)
        with accel.disabled():
            plain = beam_search(wide, src, **kw)
            scores = [uncached_score(wide, src[b : b + 1][:, src[b] != PAD], h.tokens, 10) for b, h in enumerate(hyps)]
    # ten steps' log-probabilities summed: ten times a step's rounding, and more for the BF16 dot product
    rounding = 0.3 if dtype == torch.bfloat16 and isa == "avx512_bf16" else 50 * tolerance(dtype, isa)["atol"]
    assert [h.score for h in hyps] == pytest.approx(scores, abs=rounding, rel=0)
    if not (dtype == torch.bfloat16 and isa == "avx512_bf16"):
        assert [h.tokens for h in hyps] == [h.tokens for h in plain]


@needs_kernels
@pytest.mark.parametrize("kw, dtype, width, isa", GPT_CASES)
def test_gpt_native_step_equals_forward(kw, dtype, width, isa):
    # GPT's C step (the decoder step without cross-attention) against forward with its caches; the
    # instruction sets but the best with their packed products at every row count.
    torch.manual_seed(0)
    D, H = width
    model = GPT(gpt_config("tiny", vocab_size=37, d_model=D, n_heads=H, **kw)).eval().to(dtype)
    wide = copy.deepcopy(model).float()
    ids = torch.randint(0, 37, (3, 24), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode(), accel.using_isa(isa), kernels.using_blas(isa == ISAS[-1]):
        step = engine.stepper(model)
        assert step.engine == "native"
        a, b = wide.new_caches(), model.new_caches()
        with accel.disabled():
            wide(ids[:, :4], caches=a)
            wide(ids[:, :4], caches=b)  # the prompt's keys and values by the modules, fp32 for both
        for t in range(4, 24):  # past the caches' first 16 positions
            with accel.disabled():
                want = wide(ids[:, t : t + 1], caches=a).logits[:, -1]  # (B, V)
            torch.testing.assert_close(step(ids[:, t : t + 1], b), want, **tolerance(dtype, isa))
    assert all(len(x) == len(y) == 24 for x, y in zip(a, b))


@pytest.mark.parametrize("positions", ["learned", "rotary"])
def test_gpt_stepper_without_the_c_step_is_forward_bit_for_bit(positions):
    # Without the C step (rotary positions; or every kernel switched off) the "auto" engine's
    # stepper is the model's own (forward): the same bits.
    torch.manual_seed(0)
    model = GPT(gpt_config("tiny", vocab_size=37, positions=positions)).eval()
    ids = torch.randint(0, 37, (2, 20), generator=torch.Generator().manual_seed(2))
    for off in (True, False):
        with torch.inference_mode(), accel.disabled() if off else contextlib.nullcontext():
            step = engine.stepper(model)
            assert step.engine == ("modules" if off or positions == "rotary" else "native")
            if step.engine != "modules":
                continue
            a, b = model.new_caches(), model.new_caches()
            model(ids[:, :3], caches=a)
            model(ids[:, :3], caches=b)
            for t in range(3, 20):
                assert torch.equal(step(ids[:, t : t + 1], b), model(ids[:, t : t + 1], caches=a).logits[:, -1])


def test_disabled_switches_every_kernel_off_inside_the_block_only():
    model = translator()
    src = sources()
    w = torch.randn(8, 16)
    with torch.no_grad():
        with accel.disabled():
            assert not kernels.available()
            assert kernels.pack(w) is None
            assert kernels.top_k_log_softmax(torch.randn(2, 9), 2) is None
            assert type(engine.decoder(model).start(src)) is DecoderState  # the modules' state
            assert engine.stepper(GPT(gpt_config("tiny", vocab_size=37)).eval()).engine == "modules"
        if ISAS:
            assert kernels.available() and kernels.pack(w) is not None
            assert engine.decoder(model).start(src).fast.engine == "native"


@needs_kernels
@pytest.mark.parametrize("n, out", [(3, 5), (40, 77), (257, 300)])
@pytest.mark.parametrize("rows", [1, 2, 5, 9, 13])
def test_packed_products_are_the_same_bits_on_every_instruction_set(n, out, rows):
    # A packed product is one multiply-add per input in order, whatever the vector width: the fp32
    # variants agree bit for bit (bf16 weights widened exactly too). The BF16 dot product is the
    # product of the rows rounded to bf16.
    gen = torch.Generator().manual_seed(n * rows + out)
    w, b, x = torch.randn(out, n, generator=gen), torch.randn(out, generator=gen), torch.randn(rows, n, generator=gen)
    w16 = w.bfloat16()
    with kernels.using_blas(False):  # the packed panels at every row count (the BLAS: below)
        fp32 = {isa: kernels.packed_linear(x, kernels.pack(w, isa), b, isa) for isa in ISAS}
        bf16 = {isa: kernels.packed_linear(x, kernels.pack(w16, isa), b, isa) for isa in ISAS if isa != "avx512_bf16"}
        for y in fp32.values():
            assert torch.equal(y, fp32["generic"])
        torch.testing.assert_close(fp32["generic"], F.linear(x, w, b), atol=1e-4, rtol=1e-5)
        for y in bf16.values():
            assert torch.equal(y, bf16["generic"])
        torch.testing.assert_close(bf16["generic"], F.linear(x, w16.float(), b), atol=1e-4, rtol=1e-5)
        if "avx512_bf16" in ISAS:
            packed = kernels.pack(w16, "avx512_bf16")
            assert packed.weights == "bf16_pairs" and packed.data.dtype == torch.int16
            pairs = kernels.packed_linear(x, packed, b, "avx512_bf16")
            torch.testing.assert_close(pairs, F.linear(x.bfloat16().float(), w16.float(), b), atol=1e-4, rtol=1e-5)
            alone = torch.cat([kernels.packed_linear(x[i : i + 1].contiguous(), packed, b) for i in range(rows)])
            assert torch.equal(pairs, alone)  # a row's numbers do not depend on its neighbours


def _isa_in_a_fresh_process(value: str) -> list[str]:
    code = (
        "from attnlab.accel import kernels; print(kernels.available()); print(kernels.isa()); print(kernels.status())"
    )
    env = {**os.environ, "ATTNLAB_ISA": value, "ATTNLAB_NATIVE": "1"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, check=True)
    return run.stdout.strip().splitlines()[-3:]


@needs_kernels
def test_the_environment_picks_the_instruction_set():
    assert kernels.isa() == os.environ.get("ATTNLAB_ISA", ISAS[-1])  # by default the best one
    available, isa, status = _isa_in_a_fresh_process("avx2" if "avx2" in ISAS else "generic")
    assert available == "True" and isa == ("avx2" if "avx2" in ISAS else "generic") and f"({isa})" in status
    available, _, status = _isa_in_a_fresh_process("sse9")
    assert available == "False" and "ATTNLAB_ISA=sse9 is not one this CPU runs" in status
    with pytest.raises(ValueError, match="no 'sse9' kernels here"):
        with accel.using_isa("sse9"):
            pass


@needs_kernels
def test_the_c_and_ctypes_sides_lay_the_structures_out_alike():
    # Both sides come from attnlab.accel.layout's tables; the compiler and ctypes each place the
    # fields by the platform's rules, so every offset and size must agree.
    from attnlab.accel import layout

    assert kernels.c_layout() == layout.ctypes_layout()
    assert "#define ACT_GELU_TANH 3" in layout.header()  # the activation codes, defined once


def test_decoding_picks_the_engine_by_key():
    # "auto" (the native engine where it can run) and "modules" (the reference) decode the same
    # sentences; the key is checked with a one-line error; "modules" hands the model itself to the
    # search, and a model other than a Transformer or GPT always decodes by its own steps.
    from attnlab.decode import generate, greedy_decode

    model = translator()
    src = sources()
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=8)
    assert engine.decoder(model, "modules") is model
    assert isinstance(engine.decoder(model), engine.NativeTranslator)
    with torch.no_grad():
        auto = greedy_decode(model, src, **kw)
        plain = greedy_decode(model, src, engine="modules", **kw)
        beams = beam_search(model, src, beam_size=2, engine="modules", **kw)
    assert [h.tokens for h in auto] == [h.tokens for h in plain]
    assert [h.score for h in auto] == pytest.approx([h.score for h in plain], abs=1e-4)
    assert len(beams) == len(src)
    with pytest.raises(ValueError, match="unknown decoding engine 'fast'"):
        greedy_decode(model, src, engine="fast", **kw)
    torch.manual_seed(0)
    lm = GPT(gpt_config("tiny", vocab_size=37)).eval()
    prompt = torch.randint(0, 37, (2, 4), generator=torch.Generator().manual_seed(4))
    runs = {
        e: generate(lm, prompt, max_new_tokens=6, temperature=0, return_logits=True, engine=e) for e in engine.ENGINES
    }
    assert torch.equal(runs["auto"].tokens, runs["modules"].tokens)
    torch.testing.assert_close(runs["auto"].logits, runs["modules"].logits, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="unknown decoding engine"):
        generate(lm, prompt, max_new_tokens=1, engine="native-only")
