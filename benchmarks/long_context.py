"""Long-context attention benchmark: time and peak memory against the sequence length.

For ``L`` in 1k … 32k (``B=1, H=8, Dh=64`` by default, float32, causal), forward and
forward+backward, it times

    sdpa            dense causal ``torch.nn.functional.scaled_dot_product_attention`` (the baseline)
    math            attnlab's readable reference (a dense (L, L) score matrix; only while it fits)
    chunked         attnlab's exact online-softmax attention (``chunked_attention``)
    sliding_window  attnlab's blocked local attention, window ``w`` (default 256)
    global_window   sliding window + the first ``g`` positions global (Longformer; default 16)

and writes ``outputs/bench/long_context.json`` and ``long_context.png``, printing each case's
speed-up and memory ratio against dense causal SDPA measured in the same run.

Peak memory (CPU): every (case, L, mode) runs in a fresh Python subprocess. After the inputs
are allocated, the process's resident-set high-water mark is reset (Linux ``/proc/self/clear_refs``
← ``5``), so ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` equals the current RSS; the reported
peak is ``ru_maxrss`` after the warm-up and timed runs minus that baseline: the extra memory the
attention itself needed (outputs, gradients, temporaries), the inputs excluded. Where the reset is
unavailable the baseline is the high-water mark so far (recorded as ``hwm_reset: false``), which
can under-state small peaks. On CUDA (``--device cuda``) it is ``torch.cuda.max_memory_allocated``
above the allocation after the inputs.

Forward runs under ``torch.inference_mode()``; forward+backward backpropagates a fixed random
output gradient into ``q, k, v``. Times are medians of ``--repeats`` runs after one warm-up.

Full run (the issue's table; about half an hour on one quiet core, less with more threads):

    .venv/bin/python benchmarks/long_context.py --threads 1

Quick check (seconds):

    .venv/bin/python benchmarks/long_context.py --max-len 4096 --repeats 1 --threads 1

Targets at L=16k, forward+backward: sliding window ≥ 8× faster than dense causal SDPA with
peak memory within 2× of SDPA's, and its time growing ≤ 2.3× from 16k to 32k.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

CASES = ["sdpa", "math", "chunked", "sliding_window", "global_window"]
MODES = ["fwd", "fwd+bwd"]
DEFAULT_LENGTHS = [1024, 2048, 4096, 8192, 16384, 32768]


def _rss_peak_kib() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def _reset_peak() -> bool:
    """Reset the RSS high-water mark to the current RSS (Linux ≥ 4.0); False if unavailable."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _attention_call(case: str, args: argparse.Namespace):
    """The function ``(q, k, v) -> output`` that ``case`` benchmarks."""
    import torch.nn.functional as F

    from attnlab import functional as AF
    from attnlab import variants as AV

    if case == "sdpa":
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if case == "math":
        return lambda q, k, v: AF.scaled_dot_product_attention(q, k, v, is_causal=True, backend="math").output
    if case == "chunked":
        return lambda q, k, v: AV.chunked_attention(q, k, v, is_causal=True).output
    if case == "sliding_window":
        return lambda q, k, v: AV.sliding_window_attention(q, k, v, window=args.window).output
    if case == "global_window":
        positions = list(range(args.n_global))
        return lambda q, k, v: (
            AV.global_window_attention(q, k, v, window=args.window, global_positions=positions).output
        )
    raise ValueError(f"unknown case {case!r}; choose from {CASES}")


def worker(args: argparse.Namespace) -> dict:
    """Run one (case, L, mode) in this process and return its measurements."""
    import gc

    import torch

    torch.manual_seed(0)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    fn = _attention_call(args.case, args)
    backward = args.mode == "fwd+bwd"
    shape = (1, args.heads, args.length, args.head_dim)  # (B, H, L, Dh)
    q, k, v = (torch.randn(shape, device=device, requires_grad=backward) for _ in range(3))
    grad = torch.randn(shape, device=device)  # (B, H, L, Dh) fixed output gradient

    def run() -> None:
        if backward:
            fn(q, k, v).backward(grad)
            q.grad = k.grad = v.grad = None
        else:
            with torch.inference_mode():
                fn(q, k, v)
        if device.type == "cuda":
            torch.cuda.synchronize()

    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        reset = True
    else:
        reset = _reset_peak()
        base = _rss_peak_kib() * 1024
    run()  # warm-up (its peak counts: it is the same computation)
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    peak = (torch.cuda.max_memory_allocated() if device.type == "cuda" else _rss_peak_kib() * 1024) - base
    return {
        "case": args.case,
        "length": args.length,
        "mode": args.mode,
        "time_s": statistics.median(times),
        "times_s": times,
        "peak_mib": max(peak, 0) / 2**20,
        "hwm_reset": reset,
    }


def _run_case(case: str, length: int, mode: str, args: argparse.Namespace) -> dict:
    """Measure one case in a fresh subprocess (so that peak memory is its own)."""
    cmd = [
        sys.executable, __file__, "--worker", "--case", case, "--length", str(length), "--mode", mode,
        "--repeats", str(args.repeats), "--heads", str(args.heads), "--head-dim", str(args.head_dim),
        "--window", str(args.window), "--n-global", str(args.n_global), "--device", args.device,
        "--threads", str(args.threads),
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.case_timeout)
    except subprocess.TimeoutExpired:
        return {"case": case, "length": length, "mode": mode, "skipped": f"timed out after {args.case_timeout} s"}
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"case": case, "length": length, "mode": mode, "skipped": f"failed: {reason}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _find(results: list[dict], case: str, length: int, mode: str) -> dict | None:
    for r in results:
        if (r["case"], r["length"], r["mode"]) == (case, length, mode) and "skipped" not in r:
            return r
    return None


def _report(results: list[dict], lengths: list[int], cases: list[str]) -> list[str]:
    """The printed table and the target checks."""
    lines = [
        f"{'L':>6} {'case':<15} {'fwd ms':>9} {'fwd+bwd ms':>11} {'fwd MiB':>8} {'f+b MiB':>8} "
        f"{'speed-up':>9} {'mem ratio':>9}   (speed-up and memory ratio: fwd+bwd vs dense causal SDPA)"
    ]
    for L in lengths:
        base = _find(results, "sdpa", L, "fwd+bwd")
        for case in cases:
            f, fb = _find(results, case, L, "fwd"), _find(results, case, L, "fwd+bwd")
            if f is None and fb is None:
                lines.append(f"{L:>6} {case:<15} {'skipped':>9}")
                continue
            cell = lambda r, key, scale: "—" if r is None else f"{r[key] * scale:.1f}"  # noqa: E731
            speed = mem = "—"
            if base is not None and fb is not None:
                speed = f"{base['time_s'] / fb['time_s']:.2f}×"
                mem = f"{fb['peak_mib'] / base['peak_mib']:.2f}×" if base["peak_mib"] > 0 else "—"
            lines.append(
                f"{L:>6} {case:<15} {cell(f, 'time_s', 1e3):>9} {cell(fb, 'time_s', 1e3):>11} "
                f"{cell(f, 'peak_mib', 1):>8} {cell(fb, 'peak_mib', 1):>8} {speed:>9} {mem:>9}"
            )
    sw16, sd16 = _find(results, "sliding_window", 16384, "fwd+bwd"), _find(results, "sdpa", 16384, "fwd+bwd")
    sw32 = _find(results, "sliding_window", 32768, "fwd+bwd")
    if sw16 and sd16:
        speed, mem = sd16["time_s"] / sw16["time_s"], sw16["peak_mib"] / max(sd16["peak_mib"], 1e-9)
        lines.append(
            f"target L=16k fwd+bwd: sliding window {speed:.1f}× faster than SDPA (≥ 8×): "
            f"{'PASS' if speed >= 8 else 'FAIL'}"
        )
        lines.append(
            f"target L=16k fwd+bwd: sliding window peak memory {mem:.2f}× SDPA's (≤ 2×): "
            f"{'PASS' if mem <= 2 else 'FAIL'}"
        )
    if sw16 and sw32:
        growth = sw32["time_s"] / sw16["time_s"]
        lines.append(
            f"target sliding-window time 16k → 32k grows {growth:.2f}× (≤ 2.3×): {'PASS' if growth <= 2.3 else 'FAIL'}"
        )
    return lines


def _plot(results: list[dict], cases: list[str], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(12, 4.8))
    for i, case in enumerate(cases):
        color = f"C{i}"
        for mode, style in (("fwd+bwd", "-"), ("fwd", "--")):
            rows = sorted(
                (r for r in results if r["case"] == case and r["mode"] == mode and "skipped" not in r),
                key=lambda r: r["length"],
            )
            if not rows:
                continue
            xs = [r["length"] for r in rows]
            label = f"{case} ({mode})"
            ax_t.plot(xs, [r["time_s"] for r in rows], style, marker="o", color=color, label=label)
            ax_m.plot(xs, [max(r["peak_mib"], 1e-2) for r in rows], style, marker="o", color=color, label=label)
    for ax, ylabel in ((ax_t, "time per call (s)"), (ax_m, "peak memory above inputs (MiB)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length L")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    ax_t.legend(fontsize=7, ncol=2)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=DEFAULT_LENGTHS, help="sequence lengths")
    parser.add_argument("--max-len", type=int, default=None, help="drop lengths above this")
    parser.add_argument("--cases", nargs="+", default=CASES, choices=CASES)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per case (after one warm-up)")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--window", type=int, default=256, help="sliding-window size")
    parser.add_argument("--n-global", type=int, default=16, help="global positions (the first n) of global_window")
    parser.add_argument(
        "--math-max-len",
        type=int,
        default=4096,
        help="longest L for the dense math reference (its (L, L) scores need O(L²) memory)",
    )
    parser.add_argument("--threads", type=int, default=0, help="torch threads per case (0: torch's default)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--case-timeout", type=float, default=1800.0, help="seconds before a case is skipped")
    parser.add_argument("--out", type=Path, default=Path("outputs/bench"), help="output folder")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--length", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args)))
        return
    if args.repeats < 1:
        parser.error("--repeats must be ≥ 1")

    lengths = sorted(L for L in args.lengths if args.max_len is None or L <= args.max_len)
    if not lengths:
        parser.error(f"no length ≤ --max-len {args.max_len} in --lengths {args.lengths}")
    results: list[dict] = []
    for L in lengths:
        for case in args.cases:
            for mode in MODES:
                if case == "math" and L > args.math_max_len:
                    r = {"case": case, "length": L, "mode": mode, "skipped": f"L > --math-max-len {args.math_max_len}"}
                else:
                    r = _run_case(case, L, mode, args)
                results.append(r)
                shown = r.get("skipped") or f"{r['time_s'] * 1e3:.1f} ms, {r['peak_mib']:.1f} MiB"
                print(f"  L={L:<6} {case:<15} {mode:<8} {shown}", flush=True)

    lines = _report(results, lengths, args.cases)
    print("\n".join(lines))
    args.out.mkdir(parents=True, exist_ok=True)
    config = {
        "B": 1, "H": args.heads, "Dh": args.head_dim, "dtype": "float32", "causal": True,
        "window": args.window, "n_global": args.n_global, "repeats": args.repeats, "threads": args.threads,
        "device": args.device, "lengths": lengths, "python": platform.python_version(),
        "machine": platform.machine(), "cpus": os.cpu_count(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }  # fmt: skip
    try:
        import torch

        config["torch"] = torch.__version__
    except ImportError:
        pass
    json_path, png_path = args.out / "long_context.json", args.out / "long_context.png"
    json_path.write_text(json.dumps({"config": config, "results": results, "report": lines}, indent=2))
    title = f"attention, B=1 H={args.heads} Dh={args.head_dim}, causal; window {args.window}, {args.n_global} global"
    _plot(results, args.cases, png_path, title)
    print(f"wrote {json_path} and {png_path}")


if __name__ == "__main__":
    main()
