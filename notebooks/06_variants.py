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
# # 06 アテンションの変種: 局所・スライディングウィンドウ・グローバル
#
# 普通のアテンションは、すべてのクエリがすべてのキーにスコアを付けるので、長さ T の文で T² 個のスコアが
# 要ります。変種は「どのスコアを計算するか」を絞って、計算量とメモリを T に比例するところまで下げます。
# ここでは 1. マスクの形、2. スコアの数と実際の時間、3. 同じ GPT を同じ回数だけ更新したときの損失、を
# 比べ、4. 遠くの記号が要る課題で、ウィンドウ 16 が届かずに失敗するところを見ます。
#
# チュートリアル 001 との対応: 「注意機構の変種と拡張」の局所注意・スパース注意（スライディング
# ウィンドウ）が 1〜3 節、「自己注意の利点」の「RNN の O(n) 複雑度と比較して」の読み方が 2 節の後半です。

# %% [markdown]
# <details><summary>English summary (英語の要約)</summary>
#
# Masks of causal, sliding-window, dilated and global + window attention (with the causal mask a
# global position is seen by every later query but itself sees only what is before it; stacking L
# layers of a window w reaches L · (w − 1) positions back); the number of scores and measured
# times (the median of several runs; which one is faster at these lengths, and how the times
# grow, depend on the machine, so the notebook prints what this run measured instead of
# claiming a direction); what the tutorial's "compared with the RNN's O(n)" should say
# (attention does more work, O(n² · d), but in O(1) sequential steps, where an RNN needs n); and
# a short run of `attnlab experiment variants` with the same number of steps per variant (its
# loss and speed differences printed, and why a window is not faster at 64 characters); a
# long-range recall task (a signal 47 positions back) that a one-layer full attention solves and a
# window of 16 cannot (chance level), with a prediction asked first.
# Exercises at the end, each with a collapsed answer.
# </details>

# %%
import tempfile
import time
from pathlib import Path

import torch
from helpers import PRECISION, autocast, check, sample_text, show_solution, variant_label, variants_table_html
from IPython.display import HTML, display

import attnlab
from attnlab import viz
from attnlab.experiments.variants import VariantsSettings, run_variants
from attnlab.functional import dilated_window_mask, global_window_mask

viz.display_options.lang = "ja"

# %% [markdown]
# ## 1. マスクの形
#
# 色の付いたマスのスコアだけが計算されます（`True` = 見てよい）。どれも先を隠す工夫（因果マスク）付きです。
#
# - 全体（因果）: 自分と、それより前のすべて。
# - スライディングウィンドウ注意: クエリ i はキー `i − window < j ≤ i`、つまり自分と直前の window − 1 個。
#   一つの層で window − 1 個前まで届き、L 層重ねると L · (window − 1) 個前まで届きます。
# - 拡張（dilated）ウィンドウ: 間隔を空けて、同じマスの数でより遠くまで。
# - グローバル + ウィンドウ（Longformer）: グローバル位置の列は、それより後ろのすべてのクエリから見られます。
#   先を隠す工夫があるので、グローバル位置自身が見るのは自分より前だけです（位置 0 なら自分だけ）。

# %%
T = 16
masks = {
    "全体（因果）": attnlab.causal_mask(T),
    "ウィンドウ 4": attnlab.sliding_window_mask(T, window=4),
    "拡張ウィンドウ 4×2": dilated_window_mask(T, window=4, dilation=2),
    "グローバル 1 + ウィンドウ 4": global_window_mask(T, window=4, global_positions=[0]),
}
for title, mask in masks.items():
    print(f"{title}: {int(mask.sum())} / {T * T} マス")
glob = masks["グローバル 1 + ウィンドウ 4"]
extra = int(glob.sum() - masks["ウィンドウ 4"].sum())
print(f"グローバル位置 0 が足すマス: {extra}（列 0 のうち、ウィンドウに入っていなかった行 4〜15）")
viz.plot_mask(glob, title="グローバル 1 + ウィンドウ 4（先を隠す工夫つき）")

# %% [markdown]
# **図の見どころ:** 列 0 は上から下まで全部色が付いています（全員が位置 0 を見る）が、行 0 で色が付いているのは
# 自分のマスだけです。残りは幅 4 の帯です。

# %% [markdown]
# **確かめのセル（チェック）:** 上の文と、印刷した「足すマス」の説明を確かめます（`T` を変えても成り立ちます）。

# %%
assert glob[:, 0].all() and glob[0].sum() == 1 and extra == T - 4, "グローバル位置 0 の列・行が文のとおりでない"
print(f"確かめました: 列 0 は全部、行 0 は自分だけ、足すマスは T − 4 = {T - 4}")

# %%
viz.plot_mask(masks["拡張ウィンドウ 4×2"], title="拡張ウィンドウ（4 マス、間隔 2）")

# %% [markdown]
# **図の見どころ:** 帯が一つおきに空いていて、マスの数は同じ 4 個のまま、ほぼ倍の距離（6 個前）まで届きます。

# %% [markdown]
# ## 2. スコアの数と時間
#
# 全体（因果）のアテンションは T(T+1)/2 個、ウィンドウ w はおよそ T·w 個のスコアを計算します。T を倍に
# すると、前者は約 4 倍、後者は約 2 倍になります。

# %%
window = 64
lengths = [512, 1024, 2048, 4096]
dense_cells = [L * (L + 1) // 2 for L in lengths]
window_cells = [
    int(attnlab.sliding_window_mask(L, window=window).sum()) if L <= 2048 else L * window - window * (window - 1) // 2
    for L in lengths
]
viz.plot_curves(
    {"全体（因果）": (lengths, dense_cells), f"ウィンドウ {window}": (lengths, window_cells)},
    xlabel="系列長 T",
    ylabel="計算するスコアの数",
    title="計算するスコアの数（両対数の軸）",
    logx=True,
    logy=True,
)

# %% [markdown]
# **図の見どころ:** 両対数の図で、全体の線の傾きはウィンドウの線の倍です（T² と T）。
#
# 実際の時間も測ります（この機械の CPU で、5 回測った中央値。一回だけの測定は、同じ機械で動く他の仕事に
# 大きく揺らされます）。

# %%
def seconds(fn, repeats: int = 5) -> float:
    fn()  # 一回目は準備（メモリの確保など）が入るので測らない
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]  # 中央値


dense_name, window_name = "全体（因果）", f"ウィンドウ {window}"
timings = {dense_name: {}, window_name: {}}
with torch.no_grad():
    for L in lengths:
        q = torch.randn(1, 4, L, 32)  # (B, H, T, Dh); ここではキーとバリューもクエリと同じ
        timings[dense_name][str(L)] = 1000 * seconds(lambda q=q: attnlab.scaled_dot_product_attention(q, q, q, is_causal=True))
        timings[window_name][str(L)] = 1000 * seconds(lambda q=q: attnlab.sliding_window_attention(q, q, q, window=window))
faster = {}
for L in lengths:
    d, w = timings[dense_name][str(L)], timings[window_name][str(L)]
    faster[L] = "ウィンドウ" if w < d else "全体"
    print(f"T = {L:5d}: 全体 {d:7.2f} ms, ウィンドウ {w:7.2f} ms → {faster[L]}が速い（全体 ÷ ウィンドウ = {d / w:.2f}）")
for name in (dense_name, window_name):
    growth = [timings[name][str(b)] / timings[name][str(a)] for a, b in zip(lengths, lengths[1:])]
    expected = "×4" if name == dense_name else "×2"
    print(f"T を倍にしたときの時間の伸び（{name}）:", ", ".join(f"×{g:.1f}" for g in growth), f"（スコアの数では {expected}）")
window_wins = [L for L in lengths if faster[L] == "ウィンドウ"]
print("この機械のこの実行では、ウィンドウが速かった長さ:", window_wins or "なし",
      "／ 全体が速かった長さ:", [L for L in lengths if L not in window_wins] or "なし")  # fmt: skip
viz.plot_bars(timings, ylabel="ミリ秒（順伝播 1 回）", xlabel="系列長 T", title="1 回の順伝播の時間（5 回の中央値）")

# %% [markdown]
# **図の見どころ:** 棒の高さは上の行の数と同じです。スコアの数だけで決まるなら、系列長を倍にするごとに全体の棒は
# 4 倍、ウィンドウの棒は 2 倍に伸びるはずです。実際の伸び方と、どちらが速いかは、上に印刷した行のとおりで、
# 機械によって違います。時間にはスコアの数のほかに、ウィンドウ版がブロックに分ける手間、全体のアテンションが
# 使う融合カーネル（まとめて一度に計算する速い実装）の速さ、メモリの読み書き、同じ機械で動く他の仕事が入るから
# です。スコアの数の差は系列が長いほど大きくなるので、十分に長い系列では、いずれウィンドウが速くなります。
# どの長さから速くなるかは機械によって違い、この 4 つの長さより長いこともあります
# （`python benchmarks/long_context.py` はもっと長い系列で測ります）。
#
# ### チュートリアルの「RNN の O(n) 複雑度と比較して」について
#
# チュートリアルは自己注意の利点として「RNN の O(n) 複雑度と比較して、自己注意は並列計算が可能」と
# 書いていますが、二つの別の量が混ざっています。一つの層について:
#
# - **計算の量**: 自己注意は n² 個のスコア（それぞれ幅 d の内積）で O(n² · d)、RNN は n 回の行列とベクトルの
#   積で O(n · d²) です。n が d より大きければ、計算の量は自己注意のほうが **多い** のです。
# - **順番に待つ段数**: RNN は位置 t の計算に位置 t − 1 の結果が要るので n 段、自己注意はすべての位置を
#   一度に計算できるので（n によらない）定数段です。並列化できるのはこちらの違いです。

# %%
d_model = 64
print(f"{'n':>6} | {'自己注意の積和 n²·d':>20} | {'RNN の積和 n·d²':>16} | 順番に待つ段数（自己注意 / RNN）")
for n in (16, 64, 512, 4096):
    print(f"{n:>6} | {n * n * d_model:>20,} | {n * d_model * d_model:>16,} | 1 / {n}")

# %% [markdown]
# 幅 d = 64 では、n = 64 で両者の積和が等しくなり、それより長い系列では自己注意のほうが多く計算します。
# それでも Transformer が速く学習できるのは、段数が 1 なので GPU のような並列の計算機を使い切れるからです。
# ウィンドウ w の変種は、積和を O(n · w · d) に減らし、段数 1 はそのまま保ちます。

# %% [markdown]
# ## 3. 同じ回数だけ学習させると（`attnlab experiment variants` の小さな切れ端）
#
# 同じ小さな GPT（同じ種、同じ初期値）を変種ごとに同じ回数だけ更新し、検証損失（1 文字あたりの
# ナット）と速さを比べます。学習は時計ではなく更新の回数で止めるので、どの機械でも同じ学習になります
# （速さだけが機械によって違います）。ここでは一つあたり `STEPS` 回の、ごく短い学習です。結論を出すには
# `attnlab experiment variants`（`--steps` で更新の回数を決められます）を使ってください。

# %%
STEPS = 60  # 変種ごとの更新の回数（CI の予算）
text, text_name = sample_text(200_000)
print("テキスト:", text_name, f"（{len(text):,} 文字）")
settings = VariantsSettings(
    variants=("full", "sliding_window:16", "global_window:16:4"),
    steps=STEPS,
    model_preset="bench-small",
    block_size=64,
    batch_size=16,
    eval_tokens=8192,
    evals=3,
    progress=False,
    precision=PRECISION,  # helpers.PRECISION: fp32, or bf16 with ATTNLAB_NOTEBOOK_PRECISION=bf16
)
out_dir = Path(tempfile.mkdtemp(prefix="attnlab-variants-"))
report = run_variants(text, out_dir, settings)
display(HTML(variants_table_html(report)))
points = {variant_label(r.variant): r.curve_steps for r in report.results}
print("評価した更新の回数:", points)
full = report.results[0]
for r in report.results[1:]:
    difference, speed = r.best_valid_loss - full.best_valid_loss, r.tokens_per_s / full.tokens_per_s
    print(f"{variant_label(r.variant)}: 損失は全体より {abs(difference):.3f} {'低い' if difference < 0 else '高い'}、"
          f"速さは全体の {speed:.2f} 倍（{'速い' if speed > 1 else '遅い'}）")  # fmt: skip

# %% [markdown]
# **確かめのセル（チェック）:** どの変種も同じ `STEPS` 回だけ更新し、同じ回数のところで評価したことを確かめます。

# %%
assert all(r.steps == STEPS for r in report.results) and len({tuple(x) for x in points.values()}) == 1
print(f"確かめました: 3 つの変種とも {STEPS} 回更新し、同じ回数のところで評価")

# %% [markdown]
# 表の「全体との差」は全体のアテンションとの損失の差、「全体との速さの比」は 1 秒あたりのトークン数の比です。
# 上の二行が、その二つを言葉にしたものです。どの変種も同じ回数だけ更新したので、損失の差は同じ学習の量での
# 差です。ただし、これは一つの種（初期値とデータの順番）で `STEPS` 回だけの比較なので、損失の差（その向きも）が
# 変種の違いによるものか種の偶然によるものかは、この表だけでは決められません。確かな比較には、長い学習と
# 複数の種が要ります。
#
# 速さは 2 節と食い違うことがあります。2 節は T = 512〜4096 の順伝播だけを測り、ウィンドウ 64 が省くスコアは
# 全体の 77〜97% でした。ここは T = 64 の学習（順伝播と逆伝播）で、ウィンドウ 16 が省くのは 2080 個のうち
# 1176 個（約 57%）だけです。省ける計算が少ないと、ウィンドウ版がキーをブロックに分ける手間や、全体の
# アテンションが使う融合カーネル（まとめて一度に計算する速い実装）との差のほうが大きく効き、ウィンドウ版が
# 遅くなることがあります。短い文脈では、ウィンドウで得るものは小さいのです。

# %%
viz.plot_curves(
    {variant_label(r.variant): (r.curve_steps, [loss for _, loss in r.curve]) for r in report.results},
    xlabel="更新の回数",
    ylabel="検証損失（ナット/文字）",
    title="同じ GPT、同じ更新の回数",
)

# %% [markdown]
# **図の見どころ:** どの変種も同じ更新の回数（上に印刷した回数）で評価しているので、線の点は横に揃っています。
# 同じ横の位置で縦に並んだ点どうしが、同じ学習の量での損失の比べ合いです。線どうしの差のどこまでが変種の違いで
# どこからが種の偶然かは、一回のこの短い実行では決められません。

# %% [markdown]
# ## 4. 遠くの語が要る課題: ウィンドウ 16 では届かない
#
# 3 節の短い文脈（64 文字）の比べ合いからは、ウィンドウ 16 で何が失われるのかは見えてきません（表の損失の差は、
# 一つの種で 60 回だけ更新した比較です）。そこで、答えが **遠く** にしかない課題を作ります。長さ 48 の列の最初に「合図」の記号（8 種類のどれか）を置き、あとは関係のない記号で
# 埋め、最後の位置で合図を当てさせます（チュートリアルの言う「長距離依存」です）。モデルは注意の層を一つだけ
# 持つ小さなもので、同じ初期値・同じデータ・同じ回数で、全体（因果）とウィンドウ 16 の二つを学習させます。
#
# **予想してから実行:** 最後の位置（47 番目）からウィンドウ 16 で見えるのは、位置 32〜47 だけです。テストの
# 500 列で、ウィンドウ 16 のモデルの正解率はおよそ何 % になるでしょう？ 全体のモデルはどうでしょう？

# %%
RECALL_T, SIGNALS, FILLERS, WIDTH = 48, 8, 8, 32  # 列の長さ、合図の種類、埋める記号の種類、モデルの幅
RECALL_STEPS = 150  # 更新の回数（CI の予算）
QUERY_TOKEN = SIGNALS + FILLERS  # 最後の位置の「合図は？」の記号
N_SYMBOLS = SIGNALS + FILLERS + 1


def recall_batch(n: int, generator: torch.Generator):
    """(n, RECALL_T) の列と、その合図 (n,)。位置 0 が合図、最後が「合図は？」、間は関係のない記号。"""
    x = torch.randint(SIGNALS, SIGNALS + FILLERS, (n, RECALL_T), generator=generator)
    signal = torch.randint(0, SIGNALS, (n,), generator=generator)
    x[:, 0], x[:, -1] = signal, QUERY_TOKEN
    return x, signal


class OneLayerRecall(torch.nn.Module):
    """埋め込み + 学習する位置の埋め込み → 注意の層一つ（1 ヘッド、因果）→ 最後の位置で合図を当てる。"""

    def __init__(self, window: int | None):
        super().__init__()
        self.window = window  # None = 全体（因果）
        self.embed, self.positions = torch.nn.Embedding(N_SYMBOLS, WIDTH), torch.nn.Embedding(RECALL_T, WIDTH)
        self.qkv, self.out = torch.nn.Linear(WIDTH, 3 * WIDTH), torch.nn.Linear(WIDTH, SIGNALS)

    def forward(self, x):
        h = self.embed(x) + self.positions.weight[: x.shape[1]]  # (B, T, D)
        q, k, v = self.qkv(h).unsqueeze(1).chunk(3, dim=-1)  # 3 × (B, 1, T, D): ヘッド一つ
        if self.window is None:
            result = attnlab.scaled_dot_product_attention(q, k, v, is_causal=True, return_weights=True)
        else:
            result = attnlab.sliding_window_attention(q, k, v, window=self.window, return_weights=True)
        return self.out(result.output[:, 0, -1]), result.weights[:, 0, -1]  # (B, SIGNALS) と最後の行の重み (B, T)


recall_test = recall_batch(500, torch.Generator().manual_seed(1))
recall_accuracy, last_rows = {}, {}
for name, w in (("全体（因果）", None), ("ウィンドウ 16", 16)):
    torch.manual_seed(0)  # 同じ初期値
    model, generator = OneLayerRecall(w), torch.Generator().manual_seed(0)  # 同じデータの順番
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(RECALL_STEPS):
        x, signal = recall_batch(64, generator)
        with autocast():
            logits, _ = model(x)
        loss = torch.nn.functional.cross_entropy(logits.float(), signal)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        logits, rows = model(recall_test[0])
    recall_accuracy[name] = float((logits.argmax(-1) == recall_test[1]).float().mean())
    last_rows[name] = rows.mean(0)  # (T,): 最後の位置の重み、テストの列の平均
    print(f"{name}: テストの 500 列の正解率 {recall_accuracy[name]:.1%}、最後の位置が位置 0（合図）に置いた重みの平均 "
          f"{float(last_rows[name][0]):.2f}")  # fmt: skip
print(f"当てずっぽうの正解率: 1/{SIGNALS} = {1 / SIGNALS:.1%}")
viz.plot_bars({"正解率": recall_accuracy}, ylabel="テストの正解率", xlabel="注意の範囲", title="合図を 47 個前から思い出す")

# %% [markdown]
# **図の見どころ:** 全体（因果）のモデルは、最後の位置から位置 0 の合図を直接見られるので、ほぼすべての列で
# 合図を当てます（最後の位置の重みが位置 0 に集まっていることも、上の行に印刷しました）。ウィンドウ 16 の
# モデルは、同じ回数学習しても、当てずっぽう（1/8 = 12.5%）と同じくらいの正解率です。合図はウィンドウの外に
# あり、層が一つでは、どう学習しても見えないからです（位置 0 への重みは 0）。層を重ねれば 1 層あたり 15 個ずつ
# 遠くまで届きますが（練習問題 2）、47 個前に届くには 4 層が要ります。長い文脈で遠くの情報が要る課題では、
# ウィンドウの幅と層の数が「どこまで届くか」を決めます。

# %% [markdown]
# **確かめのセル（チェック）:** 上の文（全体はほぼ当て、ウィンドウ 16 は当てずっぽうの近く、位置 0 への重みは 0）を確かめます。

# %%
assert recall_accuracy["全体（因果）"] >= 0.9, recall_accuracy
assert recall_accuracy["ウィンドウ 16"] <= 0.25, recall_accuracy
assert float(last_rows["ウィンドウ 16"][0]) == 0.0 and RECALL_T - 1 >= 16
print("確かめました: 全体は 90% 以上、ウィンドウ 16 は 25% 以下、ウィンドウ 16 の位置 0 への重みは 0")

# %% [markdown]
# ## 練習問題
#
# 1. 先を隠す工夫つきのスライディングウィンドウのマスクを手で作ってください: クエリ i はキー
#    `i − window < j ≤ i` を見られます（`(T, T)` の真偽値）。`check` が `attnlab.sliding_window_mask` と比べます。

# %%
def window_mask(T, window):
    # ここに書く
    raise NotImplementedError


# %%
# 合格すればあなたの関数が、まだなら解答例が、この先のセルで使われます
mask_fn = check("window_mask", window_mask)

# %% tags=["solution"] jupyter={"source_hidden": true, "outputs_hidden": true}
# 解答例（開くと見えます）
show_solution("window_mask")

# %% [markdown]
# その関数で 1 節の「ウィンドウ 4」を作り直し、マスの数を比べます。

# %%
mine = mask_fn(16, 4)
print("マスの数:", int(mine.sum()), "（1 節:", int(masks["ウィンドウ 4"].sum()), "）")
assert torch.equal(mine, masks["ウィンドウ 4"]), "mask_fn(16, 4) が 1 節の「ウィンドウ 4」のマスクと違う"

# %% [markdown]
# 2. （考える問題）ウィンドウ 16 の層を 4 つ重ねると、最後の層の位置は何トークン前まで情報を受け取れますか？

# %% [markdown]
# <details><summary>答えの例</summary>
#
# **60 トークン前** までです。ウィンドウ 16 のクエリ i が見るのは `i − 16 < j ≤ i`、つまり自分と直前の
# 15 個なので、一つの層で届くのは 15 個前までです。層を一つ重ねるごとに、前の層の状態がすでに 15 個前
# までの情報を持っているので、届く距離が 15 ずつ伸びます。4 層で 4 × 15 = 60 個前です（4 × 16 = 64 では
# ありません）。手で確かめるなら、マスク M（真偽値）を 0/1 の行列にして M を 4 回掛けた積 M⁴ の、
# 最後の行で 0 でない最も左の列を見ます。
# </details>
