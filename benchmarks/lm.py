"""Language-model benchmark: training tokens/s and greedy generation tokens/s, side by side.

Training (forward + backward + AdamW step, dropout 0, a character-sized vocabulary) for two sizes:

    small   4 layers, 4 heads, width 128, block 256, batch 16
    large   6 layers, 6 heads, width 384, block 256, batch 16

each in fp32 and under bf16 autocast, for

    attnlab   attnlab.models.gpt.GPT (its default settings: learned positions, tied embeddings)
    hf        HuggingFace transformers' GPT2LMHeadModel with attn_implementation="sdpa"
    minimal   the nanoGPT-style model written below (fused q/k/v projection, PyTorch's fused
              causal attention, tied embeddings): what a careful hand-written GPT costs

and prints tokens/s with the ratios attnlab/hf and attnlab/minimal in the same precision. The three
models of one case have the same shape and the same number of parameters (checked). Steps are run
round-robin (a few steps of each model in turn), so a busy machine slows them alike, and the
reported figure is the median over rounds. For bf16 it also prints how far attnlab's loss on a
fixed batch moves from fp32's.

Generation (the large size, batch 1, a 16-token prompt, 256 new tokens, greedy):

    attnlab (cache)      attnlab.decode.generate with key/value caches (prefill once, then one token per step)
    hf generate          GPT2LMHeadModel.generate(use_cache=True, do_sample=False)
    attnlab (no cache)   attnlab.decode.generate(use_cache=False): the whole sequence at every step
    ... bf16             the same two cached runs with the weights in bf16 (half the bytes per token)

The HuggingFace model's weights are converted into attnlab's GPT (attnlab.models.convert_hf), so
the fp32 runs must produce the same tokens; the benchmark checks it (and reports how much of the
bf16 runs' text matches).

One token of batch-1 decoding reads every weight once, so memory bandwidth bounds it. The
benchmark measures this machine's copy bandwidth (``dst.copy_(src)`` on 256 MB with the same
threads, counting the bytes read and written, as STREAM's Copy does) and reports each cached run's
fraction of the bound: weight bytes × tokens/s ÷ copy bandwidth.

Full run (the issue's tables; a few minutes on a quiet machine)::

    .venv/bin/python benchmarks/lm.py

Quick check that everything runs (seconds)::

    .venv/bin/python benchmarks/lm.py --quick

Options: ``--threads N`` (torch intra-op threads), ``--json FILE`` (write the results).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attnlab.decode import generate
from attnlab.models.convert_hf import load_gpt2
from attnlab.models.gpt import GPT, GPTConfig

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@dataclass(frozen=True)
class Size:
    name: str  # "small" or "large", as the tables print it
    n_layers: int  # Transformer blocks L
    n_heads: int  # attention heads H
    d_model: int  # model width D
    block: int  # tokens per training sequence T (and the models' context window)
    batch: int  # sequences per training batch B


SIZES = {
    "small": Size("small", 4, 4, 128, 256, 16),
    "large": Size("large", 6, 6, 384, 256, 16),
}
QUICK_SIZES = {
    "small": Size("small", 2, 2, 64, 64, 4),
    "large": Size("large", 2, 4, 128, 64, 4),
}


# --------------------------------------------------------------------------------------------
# The minimal nanoGPT-style model (written for this benchmark).
# --------------------------------------------------------------------------------------------


class MinimalBlock(nn.Module):
    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)  # (B, T, D) each
        q, k, v = (t.view(B, T, self.h, D // self.h).transpose(1, 2) for t in (q, k, v))  # (B, H, T, Dh)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, Dh)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, D))  # (B, T, D)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class MinimalGPT(nn.Module):
    def __init__(self, vocab: int, n_positions: int, d: int, n_layers: int, h: int) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(n_positions, d)
        self.blocks = nn.ModuleList(MinimalBlock(d, h) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))  # (B, T, D)
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # (B, T, V)
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), idx[:, 1:].reshape(-1))


# --------------------------------------------------------------------------------------------
# Models under test, each as "a function from a (B, T) batch to the loss".
# --------------------------------------------------------------------------------------------


def hf_config(size: Size, vocab: int, n_positions: int):
    from transformers import GPT2Config

    return GPT2Config(
        vocab_size=vocab,
        n_positions=n_positions,
        n_embd=size.d_model,  # GPT-2's names for D, L, H
        n_layer=size.n_layers,
        n_head=size.n_heads,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
        attn_implementation="sdpa",
    )


def build_models(size: Size, vocab: int) -> dict[str, tuple[nn.Module, callable]]:
    from transformers import GPT2LMHeadModel

    torch.manual_seed(0)
    ours = GPT(
        GPTConfig(
            vocab_size=vocab,
            n_positions=size.block,
            d_model=size.d_model,
            n_layers=size.n_layers,
            n_heads=size.n_heads,
            dropout=0.0,
        )
    )
    hf = GPT2LMHeadModel(hf_config(size, vocab, size.block))
    minimal = MinimalGPT(vocab, size.block, size.d_model, size.n_layers, size.n_heads)
    counts = {
        n: sum(p.numel() for p in m.parameters()) for n, m in (("attnlab", ours), ("hf", hf), ("minimal", minimal))
    }
    if len(set(counts.values())) != 1:
        raise RuntimeError(f"the three models differ in size: {counts}")
    return {
        "attnlab": (ours, lambda b: ours(b, labels=b).loss),
        "hf": (hf, lambda b: hf(b, labels=b).loss),
        "minimal": (minimal, lambda b: minimal(b)),
    }


def bench_training(size: Size, vocab: int, precision: str, rounds: int, steps_per_round: int, warmup: int) -> dict:
    models = build_models(size, vocab)
    g = torch.Generator().manual_seed(1)
    batches = [torch.randint(0, vocab, (size.batch, size.block), generator=g) for _ in range(4)]
    opts = {name: torch.optim.AdamW(m.parameters(), lr=1e-4) for name, (m, _) in models.items()}
    ctx = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if precision == "bf16" else None

    def step(name: str, batch: torch.Tensor) -> None:
        _, loss_fn = models[name]
        if ctx is None:
            loss = loss_fn(batch)
        else:
            with ctx():
                loss = loss_fn(batch)
        opts[name].zero_grad(set_to_none=True)
        loss.backward()
        opts[name].step()

    for name in models:
        models[name][0].train()
        for i in range(warmup):
            step(name, batches[i % len(batches)])
    rates: dict[str, list[float]] = {name: [] for name in models}
    tokens = size.batch * size.block
    for r in range(rounds):
        for name in models:
            t0 = time.perf_counter()
            for i in range(steps_per_round):
                step(name, batches[(r + i) % len(batches)])
            rates[name].append(tokens * steps_per_round / (time.perf_counter() - t0))
    result = {name: statistics.median(v) for name, v in rates.items()}
    if precision == "bf16":
        ours = models["attnlab"][0].eval()
        with torch.no_grad():
            ref = ours(batches[0], labels=batches[0]).loss.item()
            with ctx():
                low = ours(batches[0], labels=batches[0]).loss.item()
        result["bf16_loss_rel_diff"] = abs(low - ref) / ref
    return result


# --------------------------------------------------------------------------------------------
# Generation.
# --------------------------------------------------------------------------------------------


def bench_generation(
    size: Size, vocab: int, prompt_len: int, new_tokens: int, repeats: int, with_bf16: bool = True
) -> dict:
    from transformers import GPT2LMHeadModel

    torch.manual_seed(0)
    n_positions = 1 << math.ceil(math.log2(prompt_len + new_tokens))
    hf = GPT2LMHeadModel(hf_config(size, vocab, n_positions)).eval()
    with tempfile.TemporaryDirectory() as tmp:
        hf.save_pretrained(tmp)
        ours = load_gpt2(tmp)
    prompt = torch.randint(1, vocab, (1, prompt_len), generator=torch.Generator().manual_seed(2))

    ours_bf16 = copy.deepcopy(ours).to(torch.bfloat16)
    hf_bf16 = copy.deepcopy(hf).to(torch.bfloat16)

    def run_hf(model) -> torch.Tensor:
        with torch.no_grad():
            return model.generate(
                prompt,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=False,
                use_cache=True,
                eos_token_id=None,
                pad_token_id=0,
                attention_mask=torch.ones_like(prompt),
            )

    runs = {
        "attnlab (cache)": lambda: generate(ours, prompt, max_new_tokens=new_tokens, temperature=0).tokens,
        "hf generate": lambda: run_hf(hf),
        "attnlab (no cache)": lambda: (
            generate(ours, prompt, max_new_tokens=new_tokens, temperature=0, use_cache=False).tokens
        ),
        "attnlab (cache) bf16": lambda: generate(ours_bf16, prompt, max_new_tokens=new_tokens, temperature=0).tokens,
        "hf generate bf16": lambda: run_hf(hf_bf16),
    }
    if not with_bf16:
        runs = {name: fn for name, fn in runs.items() if "bf16" not in name}
    outputs = {name: fn() for name, fn in runs.items()}  # warm-up, and the tokens to compare
    reference = outputs["hf generate"]
    for name, tokens in outputs.items():
        if "bf16" not in name and not torch.equal(tokens, reference):
            raise RuntimeError(f"{name} generated different tokens from HuggingFace's greedy search")
    # bf16 weights round the logits, so a near-tie (common with random weights) can go either way:
    # report how much of the text matches rather than require it.
    agreement = {
        name: (outputs[name][0, prompt_len:] == reference[0, prompt_len:]).float().mean().item()
        for name in runs
        if "bf16" in name
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    rates = {name: new_tokens / statistics.median(v) for name, v in times.items()}
    weight_bytes = {
        "fp32": sum(p.numel() * p.element_size() for p in ours.parameters()),
        "bf16": sum(p.numel() * p.element_size() for p in ours_bf16.parameters()),
    }
    return {"tokens_per_s": rates, "bf16_agreement": agreement, "weight_bytes": weight_bytes}


def copy_bandwidth(megabytes: int = 256, repeats: int = 7) -> float:
    """This machine's memory bandwidth in bytes/s, measured as STREAM's Copy is: ``dst ← src``.

    Counts the bytes read plus the bytes written; the median of ``repeats`` copies after a warm-up.
    Uses torch's intra-op threads, as decoding does.

    Shape:
        two fp32 buffers of ``megabytes`` MB each → one float
    """
    n = megabytes * (1 << 20) // 4
    src, dst = torch.rand(n), torch.empty(n)
    dst.copy_(src)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - t0)
    return 2 * src.nbytes / statistics.median(times)


# --------------------------------------------------------------------------------------------
# Main.
# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes and few steps: proves it runs")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--vocab", type=int, default=65, help="vocabulary size (65: tinyshakespeare's characters)")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds per training case")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps per model per round")
    parser.add_argument("--gen-repeats", type=int, default=None, help="timed generations per model")
    parser.add_argument(
        "--sizes",
        nargs="+",
        choices=sorted(SIZES),
        default=sorted(SIZES),
        help="training sizes to run (generation always uses the large one)",
    )
    parser.add_argument(
        "--precisions",
        nargs="+",
        choices=["fp32", "bf16"],
        default=["fp32", "bf16"],
        help="precisions to run (bf16 is emulated, and very slow, on CPUs without bf16 instructions)",
    )
    parser.add_argument("--skip-training", action="store_true")
    parser.add_argument("--skip-generation", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    from attnlab.accel import calibrate

    print(f"attnlab lines: {calibrate.ensure()[0]}")  # measured (or read) here, never in a timed call
    sizes = QUICK_SIZES if args.quick else SIZES
    rounds = args.rounds or (2 if args.quick else 5)
    steps = args.steps or (2 if args.quick else 5)
    warmup = 1 if args.quick else 3
    gen_repeats = args.gen_repeats or (1 if args.quick else 3)
    prompt_len, new_tokens = (16, 32) if args.quick else (16, 256)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"CPU capability {torch.backends.cpu.get_cpu_capability()}"
    )
    results: dict = {"threads": torch.get_num_threads(), "training": {}, "generation": {}}

    if not args.skip_training:
        print("\nTraining tokens/s (forward + backward + AdamW), median of rounds")
        print(f"{'size':<7}{'precision':<11}{'attnlab':>10}{'hf':>10}{'minimal':>10}{'/hf':>8}{'/minimal':>10}")
        for size in (sizes[name] for name in ("small", "large") if name in args.sizes):
            for precision in args.precisions:
                r = bench_training(size, args.vocab, precision, rounds, steps, warmup)
                results["training"][f"{size.name}/{precision}"] = r
                extra = f"   (bf16 loss vs fp32: {r['bf16_loss_rel_diff']:.1e} relative)" if precision == "bf16" else ""
                print(
                    f"{size.name:<7}{precision:<11}{r['attnlab']:>10,.0f}{r['hf']:>10,.0f}{r['minimal']:>10,.0f}"
                    f"{r['attnlab'] / r['hf']:>7.2f}×{r['attnlab'] / r['minimal']:>9.2f}×{extra}",
                    flush=True,
                )

    if not args.skip_generation:
        size = sizes["large"]
        print(
            f"\nGreedy generation, {size.name} size, batch 1, {prompt_len}-token prompt, {new_tokens} new tokens "
            "(same tokens checked)"
        )
        g = bench_generation(size, args.vocab, prompt_len, new_tokens, gen_repeats, "bf16" in args.precisions)
        results["generation"] = g
        r = g["tokens_per_s"]
        base = r["hf generate"]
        for name, rate in r.items():
            print(f"  {name:<22}{rate:>9,.0f} tok/s  {rate / base:>6.2f}× hf (fp32)")
        print(f"  cache speed-up over no cache: {r['attnlab (cache)'] / r['attnlab (no cache)']:.2f}×")
        bandwidth = copy_bandwidth()
        g["copy_bandwidth_bytes_per_s"] = bandwidth
        print(f"  copy bandwidth ({torch.get_num_threads()} threads, read + write): {bandwidth / 1e9:.1f} GB/s")
        fractions = {}
        for name, rate in r.items():
            if "no cache" in name:
                continue  # it reads the weights once per position, not once per token
            nbytes = g["weight_bytes"]["bf16" if "bf16" in name else "fp32"]
            fractions[name] = nbytes * rate / bandwidth
            print(
                f"  {name:<22}{nbytes / 1e6:>6.1f} MB of weights per token × {rate:,.0f} tok/s = "
                f"{fractions[name]:.0%} of the bandwidth bound"
            )
        g["bandwidth_fraction"] = fractions
        if "bf16" in args.precisions:
            print(
                f"  bf16: attnlab / hf generate in bf16: {r['attnlab (cache) bf16'] / r['hf generate bf16']:.2f}×; "
                + ", ".join(
                    f"{name} matches fp32's greedy text on {a:.0%} of the new tokens"
                    for name, a in g["bf16_agreement"].items()
                )
            )

    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
