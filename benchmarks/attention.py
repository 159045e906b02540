"""Time and peak memory of attention on the CPU: attnlab's backends and modules against PyTorch's.

For each sequence length L (B=4, H=8, Dh=64, so D=512), causal and not, forward and
forward+backward, it measures:

- ``math``        attnlab.functional.scaled_dot_product_attention(backend="math"), the readable
                  reference ``softmax(q kᵀ/√d) v``: O(L²) memory by construction;
- ``sdpa``        the same function with backend="sdpa" (torch's fused kernel);
- ``attnlab.MHA`` attnlab.MultiHeadAttention (default backend, no weights requested);
- ``minimal``     the minimal equivalent written below: the four projections and a bare
                  ``torch.nn.functional.scaled_dot_product_attention``;
- ``nn.MHA``      torch.nn.MultiheadAttention with its default need_weights=True (which falls
                  back to the O(L²) math path to materialise the weights).

``math``/``sdpa`` take ready-made (B, H, L, Dh) queries/keys/values; the three modules take
(B, L, D) inputs and include the projections. Forward runs under ``torch.no_grad()`` with the
modules in eval mode; forward+backward back-propagates a fixed output gradient into the inputs
and the parameters (grads set to None before each run, as ``zero_grad()`` does).

Time: the median of ``--repeats`` runs after ``--warmup`` runs. The implementations of one
(L, causal, mode) are timed round-robin, so a busy machine slows them alike and the ratios hold.

Peak memory (CPU): the growth of the process's resident set during one run, above what it held
just before (inputs and parameters are already allocated then, so they are not counted). On
Linux the kernel's high-water mark is reset before the run by writing ``5`` to
``/proc/self/clear_refs`` and read back afterwards as ``VmHWM`` from ``/proc/self/status``; just
before the reset, glibc's free lists are returned to the OS with ``malloc_trim(0)`` so that memory
freed by an earlier case cannot be silently reused and hide this case's allocations. tracemalloc
would not work: it does not see torch's allocations. Where that reset is unavailable, or another
allocator (jemalloc, tcmalloc, mimalloc: they keep freed pages) is preloaded, or with
``--isolate``, every case runs in a fresh subprocess and the peak is ``ru_maxrss`` after the run
minus the resident set before it.

The allocator matters for speed, too: glibc returns large freed blocks (≥ 32 MiB) to the OS, so
every big fresh tensor page-faults again; the math backend, which allocates several (B, H, L, L)
tensors per call, pays that at every call. Try ``LD_PRELOAD=/path/to/libjemalloc.so.2``.

Usage::

    python benchmarks/attention.py --quick       # 2 lengths, 3 repeats: about a minute
    python benchmarks/attention.py               # L = 128 … 4096; writes outputs/bench/attention.{json,png}
    python benchmarks/attention.py --crossover   # math vs fused in fp32 and bf16: where backend="auto" switches

Shape letters: B batch, H heads, L length (T = S = L), D model width, Dh head width.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.functional import causal_mask, scaled_dot_product_attention
from attnlab.layers import MultiHeadAttention

B, H, DH = 4, 8, 64
D = H * DH
IMPLS = ("math", "sdpa", "attnlab.MHA", "minimal", "nn.MHA")
MODES = ("fwd", "fwd+bwd")
FULL_LENGTHS = (128, 256, 512, 1024, 2048, 4096)
QUICK_LENGTHS = (128, 512)
MIB = 2**20


class MinimalMHA(nn.Module):
    """The least code that computes multi-head attention: four projections and the fused kernel.

    Shape:
        x ``(B, L, D)`` → ``(B, L, D)``
    """

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, is_causal: bool) -> torch.Tensor:
        Bx, L, Dx = x.shape
        heads = (Bx, L, self.n_heads, Dx // self.n_heads)
        q = self.q_proj(x).view(heads).transpose(1, 2)  # (B, L, D) -> (B, H, L, Dh)
        k = self.k_proj(x).view(heads).transpose(1, 2)  # (B, H, L, Dh)
        v = self.v_proj(x).view(heads).transpose(1, 2)  # (B, H, L, Dh)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)  # (B, H, L, Dh)
        return self.out_proj(out.transpose(1, 2).reshape(Bx, L, Dx))  # (B, H, L, Dh) -> (B, L, D)


def build_modules(seed: int = 0) -> tuple[MultiHeadAttention, MinimalMHA, nn.MultiheadAttention]:
    """The three modules with the same weights, so that they compute the same function."""
    torch.manual_seed(seed)
    ours = MultiHeadAttention(D, H)
    minimal, theirs = MinimalMHA(D, H), nn.MultiheadAttention(D, H, batch_first=True)
    with torch.no_grad():
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            getattr(minimal, name).load_state_dict(getattr(ours, name).state_dict())
        theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        theirs.out_proj.load_state_dict(ours.out_proj.state_dict())
    return ours, minimal, theirs


def check_equivalence() -> None:
    """The compared implementations agree (L = 16), so the table compares like with like."""
    ours, minimal, theirs = build_modules()
    x = torch.randn(2, 16, D)
    for causal in (False, True):
        ref = minimal(x, causal)
        torch.testing.assert_close(ours(x, is_causal=causal).output, ref, atol=1e-5, rtol=1e-5)
        mask = ~causal_mask(16) if causal else None  # torch: True = may NOT attend
        torch.testing.assert_close(theirs(x, x, x, attn_mask=mask)[0], ref, atol=1e-5, rtol=1e-5)
        q, k, v = torch.randn(3, 2, H, 16, DH).unbind(0)
        math_out = scaled_dot_product_attention(q, k, v, is_causal=causal, backend="math").output
        sdpa_out = scaled_dot_product_attention(q, k, v, is_causal=causal, backend="sdpa").output
        torch.testing.assert_close(math_out, sdpa_out, atol=1e-5, rtol=1e-5)


@dataclass
class Case:
    impl: str
    L: int
    causal: bool
    mode: str


@dataclass
class Result(Case):
    ms: float  # median wall time of one run, milliseconds
    ms_all: list[float]  # every timed run
    peak_mib: float  # resident-set growth during one run, MiB
    memory_method: str


def make_run(case: Case) -> Callable[[], None]:
    """A closure doing one forward (or forward+backward) of ``case`` on pre-allocated inputs."""
    gen = torch.Generator().manual_seed(1)
    grad_mode = case.mode == "fwd+bwd"
    if case.impl in ("math", "sdpa"):
        qkv = [torch.randn(B, H, case.L, DH, generator=gen).requires_grad_(grad_mode) for _ in range(3)]
        g = torch.randn(B, H, case.L, DH, generator=gen)

        def call() -> torch.Tensor:
            return scaled_dot_product_attention(*qkv, is_causal=case.causal, backend=case.impl).output

        params: list[torch.Tensor] = qkv
    else:
        ours, minimal, theirs = build_modules()
        x = torch.randn(B, case.L, D, generator=gen).requires_grad_(grad_mode)
        g = torch.randn(B, case.L, D, generator=gen)
        mask = ~causal_mask(case.L) if case.causal else None  # torch's convention: True = masked
        module: nn.Module
        if case.impl == "attnlab.MHA":
            module = ours

            def call() -> torch.Tensor:
                return ours(x, is_causal=case.causal).output

        elif case.impl == "minimal":
            module = minimal

            def call() -> torch.Tensor:
                return minimal(x, case.causal)

        else:
            module = theirs

            def call() -> torch.Tensor:
                return theirs(x, x, x, attn_mask=mask, is_causal=case.causal)[0]  # need_weights=True (default)

        module.train(grad_mode)
        params = [x, *module.parameters()]

    if not grad_mode:

        def run() -> None:
            with torch.no_grad():
                call()

        return run

    def run_bwd() -> None:
        for p in params:
            p.grad = None
        call().backward(g)

    return run_bwd


# --------------------------------------------------------------------------------------------
# Peak memory
# --------------------------------------------------------------------------------------------


def allocator() -> str:
    """Which malloc serves this process: a preloaded jemalloc/tcmalloc/mimalloc, else the libc's."""
    names = ("jemalloc", "tcmalloc", "mimalloc")
    preload = os.environ.get("LD_PRELOAD", "")
    maps = Path("/proc/self/maps").read_text() if Path("/proc/self/maps").exists() else ""
    for name in names:
        if name in preload or f"lib{name}" in maps:
            return name
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        return f"glibc {platform.libc_ver()[1]} malloc (ptmalloc2)"
    return f"system malloc ({platform.system()})"


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def can_reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        _status_kib("VmHWM")
        return True
    except OSError:
        return False


def _trim() -> None:
    gc.collect()
    if allocator().startswith("glibc"):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def peak_growth_mib(run: Callable[[], None]) -> tuple[float, str]:
    """Resident-set growth during ``run()``, MiB, and how it was measured."""
    _trim()
    if can_reset_peak():
        before = _status_kib("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        run()
        return (_status_kib("VmHWM") - before) / 1024, "VmHWM after clear_refs, minus VmRSS before"
    # ru_maxrss: KiB on Linux, bytes on macOS. In a fresh process the mark before the run is the
    # import's footprint, so the growth is this run's allocations.
    unit = 1 if sys.platform == "darwin" else 1024
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return (after - before) * unit / MIB, "ru_maxrss growth in a fresh process"


def measure_peak(case: Case, warmup: int) -> tuple[float, str]:
    """Peak memory growth of one run of ``case``, after ``warmup`` runs, in this process."""
    run = make_run(case)
    for _ in range(max(warmup, 1)):
        run()
    return peak_growth_mib(run)


def measure_peak_isolated(case: Case, warmup: int, threads: int) -> tuple[float, str]:
    """:func:`measure_peak` in a fresh Python process, so no earlier case's freed pages are around."""
    spec = json.dumps({"case": asdict(case), "warmup": warmup, "threads": threads})
    proc = subprocess.run([sys.executable, __file__, "--worker", spec], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"worker for {case} failed:\n{proc.stderr}")
    peak, method = json.loads(proc.stdout.strip().splitlines()[-1])
    return peak, method + " (fresh subprocess)"


def measure_group(cases: list[Case], warmup: int, repeats: int, isolate: bool, threads: int) -> list[Result]:
    """Time the cases of one (L, causal, mode) *interleaved*, then measure their peak memory.

    Round-robin timing (the order rotating every repeat) exposes every implementation to the same
    background load, so the ratios between them hold even on a busy machine.
    """
    runs = {c.impl: make_run(c) for c in cases}
    for run in runs.values():
        for _ in range(warmup):
            run()
    times: dict[str, list[float]] = {c.impl: [] for c in cases}
    names = list(runs)
    for rep in range(repeats):
        for impl in names[rep % len(names) :] + names[: rep % len(names)]:
            t0 = time.perf_counter()
            runs[impl]()
            times[impl].append((time.perf_counter() - t0) * 1e3)
    results = []
    for c in cases:
        if isolate:
            peak, method = measure_peak_isolated(c, warmup, threads)
        else:
            peak, method = peak_growth_mib(runs[c.impl])
        results.append(
            Result(
                **asdict(c),
                ms=statistics.median(times[c.impl]),
                ms_all=times[c.impl],
                peak_mib=peak,
                memory_method=method,
            )
        )
    return results


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def environment(threads: int, method: str) -> dict:
    cpu = platform.processor() or platform.machine()
    if Path("/proc/cpuinfo").exists():
        names = [
            l.split(":", 1)[1].strip()
            for l in Path("/proc/cpuinfo").read_text().splitlines()
            if l.startswith("model name")
        ]
        cpu = names[0] if names else cpu
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": threads,
        "allocator": allocator(),
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "shape": {"B": B, "H": H, "Dh": DH, "D": D},
        "memory_method": method,
    }


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "-"


def table(results: list[Result]) -> str:
    by_key = {(r.impl, r.L, r.causal, r.mode): r for r in results}
    rows = sorted({(r.mode, r.causal, r.L) for r in results}, key=lambda k: (MODES.index(k[0]), k[1], k[2]))
    impls = [i for i in IMPLS if any(r.impl == i for r in results)]
    lines = []
    for title, fmt, field in (("time, ms (median)", "{:.2f}", "ms"), ("peak memory growth, MiB", "{:.1f}", "peak_mib")):
        head = f"{'mode':8} {'causal':6} {'L':>5} " + " ".join(f"{i:>12}" for i in impls)
        head += f" {'MHA/minimal':>12} {'MHA/nn.MHA':>11}"
        lines += ["", title, head, "-" * len(head)]
        for mode, causal, L in rows:
            cells = []
            for impl in impls:
                r = by_key.get((impl, L, causal, mode))
                cells.append(f"{fmt.format(getattr(r, field)) if r else '-':>12}")
            mha, mini, nnm = (by_key.get((i, L, causal, mode)) for i in ("attnlab.MHA", "minimal", "nn.MHA"))
            r1 = ratio(getattr(mha, field), getattr(mini, field)) if mha and mini else "-"
            r2 = ratio(getattr(mha, field), getattr(nnm, field)) if mha and nnm else "-"
            lines.append(f"{mode:8} {'yes' if causal else 'no':6} {L:>5} " + " ".join(cells) + f" {r1:>12} {r2:>11}")
    return "\n".join(lines)


def targets(results: list[Result]) -> list[str]:
    """The issue's targets for attnlab.MHA forward+backward, checked on this run's numbers."""
    by_key = {(r.impl, r.L, r.causal, r.mode): r for r in results}
    notes = []
    for (impl, L, causal, mode), r in sorted(by_key.items(), key=lambda kv: (kv[0][2], kv[0][1])):
        if impl != "attnlab.MHA" or mode != "fwd+bwd":
            continue
        mini, nnm = by_key.get(("minimal", L, causal, mode)), by_key.get(("nn.MHA", L, causal, mode))
        if mini and L >= 512:
            ok = r.ms <= 1.10 * mini.ms
            notes.append(
                f"L={L} causal={causal}: MHA/minimal = {r.ms / mini.ms:.3f} ({'ok' if ok else 'MISSED'}, target ≤ 1.10)"
            )
        if nnm:
            ok = r.ms < nnm.ms
            notes.append(
                f"L={L} causal={causal}: MHA/nn.MHA = {r.ms / nnm.ms:.3f} ({'ok' if ok else 'MISSED'}, target < 1)"
            )
    return notes


def plot(results: list[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 4, figsize=(16, 7), sharex=True)
    panels = [(m, c) for m in MODES for c in (False, True)]
    for col, (mode, causal) in enumerate(panels):
        for row, (field, label) in enumerate((("ms", "time (ms)"), ("peak_mib", "peak memory growth (MiB)"))):
            ax = axes[row, col]
            for impl in IMPLS:
                pts = sorted(
                    (r.L, getattr(r, field)) for r in results if (r.impl, r.causal, r.mode) == (impl, causal, mode)
                )
                if pts:
                    ax.plot(*zip(*pts), marker="o", label=impl)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{mode}, {'causal' if causal else 'not causal'}", fontsize=10)
            ax.set_ylabel(label)
            if row == 1:
                ax.set_xlabel("sequence length L")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(f"attention on CPU, B={B} H={H} Dh={DH}, torch {torch.__version__}, {allocator()}")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def crossover(lengths: list[int], repeats: int, warmup: int) -> list[dict]:
    """fp32 and bf16, causal forward+backward at B·L = 4096 tokens, H = 6, Dh = 64: the math
    backend against the fused one, and what ``backend="auto"`` picks (:func:`attnlab.accel.prefer_math`:
    math for bf16 on a CPU up to ``attnlab.accel.MATH_MAX_KEYS_LOW_PRECISION`` keys)."""
    from attnlab.accel import prefer_math

    rows = []
    for L in lengths:
        b = max(1, 4096 // L)
        for dtype in (torch.float32, torch.bfloat16):
            gen = torch.Generator().manual_seed(L)
            q, k, v = (torch.randn(b, 6, L, 64, generator=gen).to(dtype).requires_grad_() for _ in range(3))
            grad = torch.randn(b, 6, L, 64, generator=gen).to(dtype)

            def fwd_bwd(name: str) -> None:
                q.grad = k.grad = v.grad = None  # as zero_grad(): no accumulation into old gradients
                scaled_dot_product_attention(q, k, v, is_causal=True, backend=name).output.backward(grad)

            runs = {name: (lambda name=name: fwd_bwd(name)) for name in ("math", "sdpa")}
            times: dict[str, list[float]] = {name: [] for name in runs}
            for i in range(warmup + repeats):
                for name, run in runs.items():  # round-robin, as the main table
                    t0 = time.perf_counter()
                    run()
                    if i >= warmup:
                        times[name].append(time.perf_counter() - t0)
            ms = {name: 1e3 * statistics.median(t) for name, t in times.items()}
            auto = "math" if prefer_math(q, k) else "sdpa"
            rows.append(
                dict(
                    L=L,
                    batch=b,
                    dtype=str(dtype).removeprefix("torch."),
                    math_ms=ms["math"],
                    sdpa_ms=ms["sdpa"],
                    auto=auto,
                    auto_is_faster=ms[auto] <= min(ms.values()),
                )
            )
            r = rows[-1]
            print(
                f"  L={L:<5} B={b:<3} {r['dtype']:9} math {r['math_ms']:8.1f} ms  sdpa {r['sdpa_ms']:8.1f} ms  "
                f"math/sdpa {r['math_ms'] / r['sdpa_ms']:5.2f}  auto → {auto}{'' if r['auto_is_faster'] else '  (the slower one)'}",
                flush=True,
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="L in {128, 512}, 1 warm-up, 3 repeats (about a minute)")
    parser.add_argument("--lengths", type=int, nargs="+", help="sequence lengths (default 128 … 4096)")
    parser.add_argument("--impls", nargs="+", choices=IMPLS, default=list(IMPLS))
    parser.add_argument("--repeats", type=int, help="timed runs per case (default 5; --quick 3)")
    parser.add_argument("--warmup", type=int, help="untimed runs first (default 2; --quick 1)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch intra-op threads")
    parser.add_argument("--isolate", action="store_true", help="run every case in a fresh subprocess")
    parser.add_argument("--out", type=Path, default=Path("outputs/bench"), help="folder for the JSON and PNG")
    parser.add_argument(
        "--crossover",
        action="store_true",
        help="only the math-vs-fused table in fp32 and bf16 that backend='auto' follows",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.crossover:
        torch.set_num_threads(args.threads)
        lengths = args.lengths or [128, 256, 512, 1024, 2048]
        print(f"torch {torch.__version__}, {args.threads} threads; causal forward+backward, B·L=4096, H=6, Dh=64")
        rows = crossover(lengths, args.repeats or 5, args.warmup if args.warmup is not None else 2)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "attention-crossover.json").write_text(json.dumps(rows, indent=1))
        print(f"wrote {args.out / 'attention-crossover.json'}")
        return 0

    if args.worker:  # one case's memory in this fresh process; the parent reads the last stdout line
        spec = json.loads(args.worker)
        torch.set_num_threads(spec["threads"])
        print(json.dumps(measure_peak(Case(**spec["case"]), spec["warmup"])))
        return 0

    torch.set_num_threads(args.threads)
    lengths = args.lengths or (QUICK_LENGTHS if args.quick else FULL_LENGTHS)
    repeats = args.repeats or (3 if args.quick else 5)
    warmup = args.warmup if args.warmup is not None else (1 if args.quick else 2)
    isolate = args.isolate or not can_reset_peak() or not allocator().startswith("glibc")
    method = "fresh subprocess per case" if isolate else "one process, malloc_trim + clear_refs per case"
    method += "; timing in one process, implementations interleaved"

    check_equivalence()
    env = environment(args.threads, method)
    print(f"torch {env['torch']}, {env['threads']} threads, allocator: {env['allocator']}, CPU: {env['cpu']}")
    print(f"B={B} H={H} Dh={DH} D={D}; memory: {method}")
    results = []
    t_start = time.perf_counter()
    for L in lengths:
        for causal in (False, True):
            for mode in MODES:
                group = measure_group(
                    [Case(i, L, causal, mode) for i in args.impls], warmup, repeats, isolate, args.threads
                )
                results += group
                for r in group:
                    print(
                        f"  {r.impl:12} L={L:<5} causal={causal!s:5} {mode:8} {r.ms:9.2f} ms {r.peak_mib:9.1f} MiB",
                        flush=True,
                    )
    print(table(results))
    notes = targets(results)
    if notes:
        print("\ntargets (attnlab.MHA forward+backward):")
        print("\n".join("  " + n for n in notes))
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s")

    args.out.mkdir(parents=True, exist_ok=True)
    stem = "attention-quick" if args.quick else "attention"
    (args.out / f"{stem}.json").write_text(
        json.dumps({"environment": env, "results": [asdict(r) for r in results], "targets": notes}, indent=1)
    )
    plot(results, args.out / f"{stem}.png")
    print(f"wrote {args.out / (stem + '.json')} and {args.out / (stem + '.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
