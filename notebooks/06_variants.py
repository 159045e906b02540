# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 06 注意の変種: 局所・スライディングウィンドウ・グローバル
#
# 普通の注意は、すべてのクエリがすべてのキーに点数を付けるので、長さ T の文で T² 個の点数が要ります。
# 変種は「どの点数を計算するか」を絞って、計算量とメモリを T に比例するまで下げます。ここでは
# 1. マスクの形、2. 点数の数と実際の時間、3. 同じ GPT を同じ時間だけ学習させたときの損失、を比べます。
#
# _English:_ dense attention scores every query against every key, T² scores for length T. The
# variants restrict which scores are computed, bringing time and memory down to linear in T. We
# compare (1) the shapes of their masks, (2) the number of scores and the measured time, and
# (3) the loss of the same GPT trained for the same time with each.

# %%
import tempfile
import time
from pathlib import Path

import torch
from helpers import check, sample_text, show_solution

import attnlab
from attnlab import viz
from attnlab.experiments.variants import VariantsSettings, run_variants
from attnlab.functional import dilated_window_mask, global_window_mask

viz.display_options.lang = "ja"

# %% [markdown]
# ## 1. マスクの形
#
# 濃い色のマスの点数だけが計算されます（`True` = 注意できる）。
#
# - 因果（全体）: 自分と過去のすべて。
# - スライディングウィンドウ（局所）: 直前の `window` 個だけ。層を重ねると L · window 個前まで届きます。
# - 拡張（dilated）ウィンドウ: 間隔を空けて、同じ数で遠くまで。
# - グローバル + ウィンドウ（Longformer）: 少数のグローバル位置は全員を見て、全員から見られます。
#
# _English:_ only the dark cells are scored (`True` = may attend): causal (itself and everything
# before), a sliding window (the last `window` keys; stacking L layers reaches L · window back), a
# dilated window (spaced out: farther for the same count), and global + window (Longformer: a few
# global positions see and are seen by everyone).

# %%
T = 16
masks = {
    "因果 / causal": attnlab.causal_mask(T),
    "ウィンドウ 4 / window 4": attnlab.sliding_window_mask(T, window=4),
    "拡張 4×2 / dilated": dilated_window_mask(T, window=4, dilation=2),
    "グローバル 1 + ウィンドウ 4": global_window_mask(T, window=4, global_positions=[0]),
}
for title, mask in masks.items():
    print(f"{title}: {int(mask.sum())} / {T * T} マス")
viz.plot_mask(masks["グローバル 1 + ウィンドウ 4"], title="グローバル 1 + ウィンドウ 4 / global + window")

# %%
viz.plot_mask(masks["拡張 4×2 / dilated"], title="拡張ウィンドウ / dilated window (4, dilation 2)")

# %% [markdown]
# ## 2. 点数の数と時間
#
# 因果の全体注意は T(T+1)/2 個、ウィンドウ w は約 T·w 個の点数です。T を倍にすると、前者は 4 倍、後者は
# 2 倍になります。実際の時間も測ります（この環境の CPU で、一回ずつの粗い測定です）。
#
# _English:_ causal dense attention computes T(T+1)/2 scores, a window of w about T·w. Doubling T
# multiplies the first by 4 and the second by 2. We also time them (on this CPU, rough single runs).

# %%
window = 64
lengths = [512, 1024, 2048, 4096]
dense_cells = [L * (L + 1) // 2 for L in lengths]
window_cells = [
    int(attnlab.sliding_window_mask(L, window=window).sum()) if L <= 2048 else L * window - window * (window - 1) // 2
    for L in lengths
]
viz.plot_curves(
    {"因果・全体 / dense causal": (lengths, dense_cells), f"ウィンドウ {window} / window": (lengths, window_cells)},
    xlabel="系列長 T / length",
    ylabel="計算する点数 / scores computed",
    logx=True,
    logy=True,
)


# %%
def seconds(fn, repeats: int = 3) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


timings = {"dense": {}, "window": {}}
with torch.no_grad():
    for L in lengths:
        q = torch.randn(1, 4, L, 32)  # (B, H, T, Dh); keys and values = queries here
        timings["dense"][str(L)] = 1000 * seconds(
            lambda q=q: attnlab.scaled_dot_product_attention(q, q, q, is_causal=True)
        )
        timings["window"][str(L)] = 1000 * seconds(lambda q=q: attnlab.sliding_window_attention(q, q, q, window=window))
viz.plot_bars(
    timings, ylabel="ミリ秒 / ms (forward)", xlabel="系列長 T / length", title="1 回の順伝播 / one forward pass"
)

# %% [markdown]
# 短い系列では全体注意の方が速いことがあります。融合カーネルは T² の計算をとても速くこなし、
# ウィンドウ版はブロックに分ける手間がかかるからです。差が逆転するのは系列が長くなってからです
# （`python benchmarks/long_context.py` は 16k トークンで 10 倍の差を測っています）。
#
# _English:_ for short sequences dense attention can be faster: the fused kernel does the T² work
# quickly, while the window pays for cutting blocks. The window wins as sequences grow
# (`python benchmarks/long_context.py` measures 10× at 16k tokens).

# %% [markdown]
# ## 3. 同じ時間だけ学習させると（`attnlab experiment variants` の小さな切れ端）
#
# 同じ小さな GPT（同じ種、同じ初期値）を変種ごとに同じ時間だけ学習させ、検証損失（1 文字あたりの
# ナット）と速さを比べます。CI では一つあたり 8 秒の、ごく短い予算です。結論を出すには
# `attnlab experiment variants`（既定 15 分）を使ってください。
#
# _English:_ the same small GPT (same seed, same initial weights) trained for the same time with
# each variant; validation loss (nats per character) and speed. In CI each gets 8 seconds,
# a very short budget; for conclusions run `attnlab experiment variants` (15 minutes by default).

# %%
# 全体の予算（CI）。各変種はその 80% の等分 / the whole budget (CI); each variant trains 80% of an equal share
MINUTES = 0.5
text, text_name = sample_text(200_000)
print("テキスト / text:", text_name, f"({len(text):,} 文字)")
settings = VariantsSettings(
    variants=("full", "sliding_window:16", "global_window:16:4"),
    minutes=MINUTES,
    model_preset="bench-small",
    block_size=64,
    batch_size=16,
    eval_tokens=8192,
    evals=3,
    progress=False,
)
out_dir = Path(tempfile.mkdtemp(prefix="attnlab-variants-"))
report = run_variants(text, out_dir, settings)
report

# %% [markdown]
# 表の「Δ vs full」は全体注意との損失の差、「speed vs full」は速さの比です。一つ 8 秒ほどの学習では、
# 差の多くは雑音です（同じ機械で動く他の仕事、評価の回数）。64 トークンのような短い文脈では、
# ウィンドウ 16 が失うものも速さの得も小さく、どちらも文脈が長くなるほど大きくなります。確かな比較には
# 長い予算と複数の種が要ります。
#
# _English:_ "Δ vs full" is the loss difference to dense attention, "speed vs full" the speed
# ratio. After some 8 seconds of training most of the differences are noise (other work on the
# machine, the number of evaluations). With a 64-token context a 16-token window loses little and
# gains little; both grow with the context. A sound comparison needs long budgets and several
# seeds.

# %%
viz.plot_curves(
    {r.variant: ([t for t, _ in r.curve], [loss for _, loss in r.curve]) for r in report.results},
    xlabel="学習時間（秒）/ training time (s)",
    ylabel="検証損失（ナット/文字）/ validation loss",
    title="同じ GPT、同じ時間 / same GPT, same time",
)

# %% [markdown]
# ## 練習問題 / Exercises
#
# 1. 因果のスライディングウィンドウのマスクを手で作ってください: クエリ i はキー `i − window < j ≤ i` を
#    見られます（`(T, T)` の真偽値）。`check` が `attnlab.sliding_window_mask` と比べます。
# 2. （考える問題）ウィンドウ 16 の層を 4 つ重ねると、最後の層の位置は何トークン前まで情報を受け取れますか？
#
# _English:_ (1) build the causal sliding-window mask by hand: query i may attend to keys
# `i − window < j ≤ i` (`(T, T)` boolean); `check` compares with `attnlab.sliding_window_mask`.
# (2) (to think about) with 4 stacked layers of window 16, how far back can the last layer's
# positions receive information?


# %%
def window_mask(T, window):
    # ここに書く / your code here
    raise NotImplementedError


# %%
check("window_mask", window_mask)

# %% tags=["solution"] jupyter={"source_hidden": true, "outputs_hidden": true}
# 解答例（開くと見えます）/ model solution (expand to see)
show_solution("window_mask")
