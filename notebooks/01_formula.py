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
# # 01 アテンションの式を手で計算する
#
# `Attention(Q, K, V) = softmax(QKᵀ / √d_k) · V` を PyTorch の数行で書き、attnlab と PyTorch の実装が
# 同じ数を出すことを確かめます。続いて、なぜスコアを √d_k で割るのか、マスクが何をするのか、
# 位置エンコーディングのない自己注意が語順について何を知らないのかを、数と図で見ます。
#
# チュートリアル 001 との対応: 「数学的表現」と「自己注意機構」の例（`self_attention`）が 2 節、
# 「スケーリングドット積注意」の √d_k が 3・4 節、「自己注意の利点」の「位置非依存性」が 6 節です。

# %% [markdown]
# <details><summary>English summary (英語の要約)</summary>
#
# The attention formula written by hand, checked against attnlab and PyTorch (§2, including the
# tutorial's `self_attention` example); why the scores are divided by √d_k, with random queries
# and keys whose scores grow with d_k (§3–4); masks (§5); and what the tutorial calls
# "position independence", shown to be permutation equivariance: without positional encodings
# self-attention cannot tell word orders apart (§6). Exercises at the end, each with a collapsed
# answer.
# </details>

# %%
import math

import torch
import torch.nn.functional as F
from helpers import check, show_solution, three_books_playground

import attnlab
from attnlab import viz
from attnlab.explain import compute_steps, plot_steps
from attnlab.positional import SinusoidalPositionalEncoding

viz.display_options.lang = "ja"  # 図のラベルと表示を日本語に
_ = torch.manual_seed(0)

# %% [markdown]
# ## 1. 三冊の本
#
# 図書館で「アテンションの入門書」を探しているとします。探している内容がクエリ q、各本の背表紙の
# 説明がキー k、本の中身がバリュー v です。q と各 k の内積が「どれだけ合っているか」のスコアになり、
# ソフトマックスで合計 1 の注意の重みに変わり、その重みでバリューを混ぜたものが出力です。

# %%
d_k = 4
q = torch.tensor([[1.0, 0.0, 1.0, 0.0]])  # (1, d_k) 一つのクエリ
K = torch.tensor(
    [
        [1.0, 0.0, 1.0, 0.0],  # 本1: クエリとよく合う
        [1.0, 0.0, 0.0, 0.0],  # 本2: 半分だけ合う
        [0.0, 1.0, 0.0, 1.0],  # 本3: 合わない
    ]
)  # (S, d_k)
V = torch.eye(3)  # (S, Dv): 本 i の中身は i 番目の方向。出力を見れば重みがそのまま読める

scores = q @ K.T  # (1, d_k) x (d_k, S) -> (1, S)
scaled = scores / math.sqrt(d_k)
weights = torch.softmax(scaled, dim=-1)  # (1, S), 行の和は 1
output = weights @ V  # (1, S) x (S, Dv) -> (1, Dv)
print("スコア q·k        :", scores)
print("÷√d_k            :", scaled)
print("注意の重み        :", weights, "合計", round(weights.sum().item(), 6))
print("出力 Σ 重み·v     :", output)

# %% [markdown]
# `attnlab.explain` は同じ手順を一歩ずつ計算します。結果は Jupyter で表として表示されます
# （`attnlab explain --lang ja` が端末に出すのと同じ数です）。

# %%
steps = compute_steps([8.0, 4.0, 2.0], d_k=64)
steps

# %%
plot_steps(steps, lang="ja")

# %% [markdown]
# **図の見どころ:** 左から右へ、スコア → √d_k で割ったスコア → 注意の重みと進むと、差が縮まって
# 本1 が全部を取らず、三冊とも重みを持つことがわかります。

# %% [markdown]
# ## 2. 一般の形: バッチとヘッドのある注意
#
# 実際のモデルでは q, k, v は `(B, H, T, Dh)`（バッチ、ヘッド、位置、ヘッドの幅）の形をしています。
# 式は同じで、`matmul` が先頭の次元をそのまま運んでくれます。
#
# チュートリアルの「自己注意の実装例」`self_attention(query, key, value)` も同じ計算です
# （`key.transpose(-2, -1)` で最後の二つの次元だけを入れ替えるので、先頭にいくつ次元があっても動きます）。
# 下の `attention_by_hand` は重みも返すようにしたものです。


# %%
def attention_by_hand(q, k, v):
    """softmax(q·kᵀ/√d_k)·v — 形 (..., T, Dh), (..., S, Dh), (..., S, Dv) → (..., T, Dv) と重み (..., T, S)。"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, S)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def tutorial_self_attention(query, key, value):
    """チュートリアルの例と同じ手順（出力だけを返す）。"""
    scores = torch.matmul(query, key.transpose(-2, -1)) / (query.size(-1) ** 0.5)
    return torch.matmul(F.softmax(scores, dim=-1), value)


B, H, T, S, Dh = 2, 4, 5, 7, 16
q, k, v = torch.randn(B, H, T, Dh), torch.randn(B, H, S, Dh), torch.randn(B, H, S, Dh)
ours, our_weights = attention_by_hand(q, k, v)
torch.testing.assert_close(ours, tutorial_self_attention(q, k, v))

# %% [markdown]
# 手で書いたものを三つの実装と比べます: attnlab の読みやすい参照実装 (`backend="math"`)、
# attnlab が PyTorch の融合カーネルを呼ぶもの (`backend="sdpa"`)、PyTorch そのもの。
# `torch.testing.assert_close` は違いがあると、どこがどれだけ違うかを言って止まります。

# %%
reference = attnlab.scaled_dot_product_attention(q, k, v, return_weights=True, backend="math")
fused = attnlab.scaled_dot_product_attention(q, k, v, backend="sdpa")
torch_out = F.scaled_dot_product_attention(q, k, v)

torch.testing.assert_close(ours, reference.output)
torch.testing.assert_close(our_weights, reference.weights)
torch.testing.assert_close(ours, fused.output)
torch.testing.assert_close(ours, torch_out)
print("四つとも一致。最大の差:", f"{(ours - torch_out).abs().max().item():.1e}", "（浮動小数点の丸めの大きさ）")

# %% [markdown]
# 結果 (`AttentionResult`) はそのまま表示できます。バッチの最初の例の、ヘッドごとの注意の重みが
# 並びます（一回の注意の計算なので、層はありません）。

# %%
reference

# %% [markdown]
# **図の見どころ:** 4 枚はヘッド 1〜4 で、どの行（クエリ）も 7 個のキーに合計 1 の重みを配っています。
# 入力が乱数なので、決まった模様はありません。
#
# 小さな重みの表なら、図の代わりに数そのものが表になります。

# %%
attnlab.scaled_dot_product_attention(q[0, 0, :2], k[0, 0, :3], v[0, 0, :3], return_weights=True)

# %% [markdown]
# ## 3. なぜ √d_k で割るのか
#
# 成分が平均 0・分散 1 の乱数なら、内積 q·k は d_k 個の積の和なので、分散は d_k、標準偏差は √d_k に
# なります。d_k が大きいほどスコアの差が広がり、ソフトマックスはほとんど一つのキーだけを選ぶ
# （飽和する）ようになります。飽和したソフトマックスは勾配がほぼ 0 なので、学習が進みません。
# √d_k で割ると、スコアの広がりが d_k によらず 1 程度に戻ります。

# %%
g = torch.Generator().manual_seed(0)
sizes = [4, 16, 64, 256, 1024]
spread, top_raw, top_scaled = [], [], []
for d in sizes:
    qs, ks = torch.randn(2000, 1, d, generator=g), torch.randn(2000, 8, d, generator=g)  # クエリごとに 8 個のキー
    raw = (qs @ ks.transpose(-2, -1))[:, 0]  # (2000, 8)
    spread.append(raw.std().item())
    top_raw.append(torch.softmax(raw, -1).max(-1).values.mean().item())
    top_scaled.append(torch.softmax(raw / math.sqrt(d), -1).max(-1).values.mean().item())
for d, s, a, b in zip(sizes, spread, top_raw, top_scaled):
    print(
        f"d_k={d:5d}  q·k の標準偏差 {s:6.2f} (√d_k={math.sqrt(d):5.1f})  最大の重み: 割らない {a:.3f} / 割る {b:.3f}"
    )

# %% [markdown]
# **確かめのセル（チェック）:** 本文の主張（割らないと d_k とともに飽和へ近づき、割ると d_k によらずほぼ一定）を
# 上の数で確かめます。`sizes` を変えても成り立つはずです。

# %%
assert top_raw == sorted(top_raw) and top_raw[-1] > 0.9, "割らないときの最大の重みが d_k とともに 1 へ近づいていない"
assert max(top_scaled) - min(top_scaled) < 0.05, "割ったときの最大の重みが d_k によって変わる"
print("確かめました: 割らないと d_k とともに飽和へ、割るとほぼ一定（差 0.05 未満）")

# %%
viz.plot_curves(
    {"÷√d_k なし": (sizes, top_raw), "÷√d_k あり": (sizes, top_scaled)},
    xlabel="d_k",
    ylabel="最大の注意の重み（平均）",
    title="8 個のキーに対するソフトマックスの飽和",
    logx=True,
)

# %% [markdown]
# **図の見どころ:** 割らない線は d_k とともに 1 へ近づき（一つのキーがほぼ全部を取る）、割る線は
# d_k を変えても同じ高さにとどまります。

# %% [markdown]
# ## 4. d_k を変えると一つの例はどうなるか
#
# 3 節は 2000 個の平均でした。ここでは一つのクエリと三つのキーを乱数で作り、d_k だけを変えます。
# 乱数のベクトルでは **スコアそのものが d_k とともに大きくなる** ので、割らなければ重みは一つに集中します。
# √d_k で割ると、スコアの幅（最大 − 最小）は d_k を大きくしても 3 未満にとどまり、重みはどの d_k でも一つの
# キーに張り付きません。ただし、一つの例の重みの形は乱数しだいで、d_k ごとに同じにはなりません
# （d_k によらず一定になるのは、3 節のような多くの例の平均です）。

# %%
g = torch.Generator().manual_seed(3)
q_big, k_big = torch.randn(1024, generator=g), torch.randn(3, 1024, generator=g)
top, widths = {}, {}
for d in (4, 64, 1024):
    raw = k_big[:, :d] @ q_big[:d]  # (3,): 先頭の d 成分だけを使う内積
    for scale in (False, True):
        w = compute_steps(raw.tolist(), d_k=d, scale=scale).weights
        top[d, scale] = float(w.max())
    width, scaled_width = float(raw.max() - raw.min()), float(raw.max() - raw.min()) / math.sqrt(d)
    widths[d] = width, scaled_width
    print(f"d_k={d:5d}  スコア {[round(x, 1) for x in raw.tolist()]}（幅 {width:.1f}、÷√d_k で {scaled_width:.1f}）  "
          f"重み（割らない）{[round(x, 3) for x in compute_steps(raw.tolist(), d_k=d, scale=False).weights.tolist()]}  "
          f"重み（割る）{[round(x, 3) for x in compute_steps(raw.tolist(), d_k=d, scale=True).weights.tolist()]}")  # fmt: skip

# %% [markdown]
# **確かめのセル（チェック）:** 下の文の数（この乱数の種 3 の例のもの）を確かめます。種を変えて試したときは、
# 下の文はその例のことではないので、確かめずに先へ進みます。

# %%
if g.initial_seed() == 3:
    assert top[64, False] > 0.99 and top[1024, False] > 0.99 and all(top[d, True] < 0.9 for d in (4, 64, 1024))
    assert widths[64][0] > 10 and widths[1024][0] > 10 and all(w < 3 for _, w in widths.values())  # 幅
    print("確かめました: 割らないと d_k = 64, 1024 で最大の重みが 0.99 超、割るとどの d_k でも 0.9 未満、幅は 3 未満")
else:
    print("種を変えたので、下の文（種 3 の例の数）は確かめません。上の行の数で読んでください")

# %% [markdown]
# d_k = 64 と 1024 では、割らないとスコアの幅が 10 より大きく広がり（上の「幅」）、重みはほぼ一つのキーに
# 集まります（[0.0, 0.0, 1.0]）。√d_k で割ると幅は 3 未満に収まり（「÷√d_k で」の数）、どの d_k でも最大の重みは
# 0.9 未満です（上の確かめのセルがこれらを確かめています）。`ipywidgets` が入っていれば（`pip install 'attnlab[notebooks]'`）、スコアと d_k を
# スライダーで動かせます（入っていなければ、そう表示されるだけです）。

# %%
three_books_playground(lang="ja")

# %% [markdown]
# ## 5. マスク: 見てよい場所を決める
#
# attnlab のマスクは真偽値で、`True` が「見てよい」です。先を隠す工夫（因果マスク）を付けると、
# 各位置はそれより後ろを見ないので、注意の重みの上三角が 0 になります。

# %%
mask = attnlab.causal_mask(6)
viz.plot_mask(mask, title="先を隠す工夫（因果マスク）")

# %% [markdown]
# **図の見どころ:** 行 i（クエリ）で色の付いたマスは列 0〜i だけで、対角線より右上はすべて隠されています。

# %%
x = torch.randn(1, 6, 8)
causal = attnlab.scaled_dot_product_attention(x, x, x, mask, return_weights=True)
causal

# %% [markdown]
# 表の右上がすべて 0.000 で、各行の和は 1 のままです（隠したマスの分は、見てよいマスに配り直されます）。

# %% [markdown]
# ## 6. 自己注意は語順を知らない（チュートリアルの「位置非依存性」）
#
# チュートリアルは自己注意の利点として「位置非依存性: シーケンスの順序に依存しない」を挙げています。
# 正確に言うと、位置エンコーディングのない自己注意は **置換同変**（permutation equivariant）です。
# 入力のトークンを並べ替えると、出力も同じように並べ替わるだけで、中身は変わりません。
# つまり「犬が猫を追う」と「猫が犬を追う」を区別できません。これは利点ではなく、Transformer が
# 位置エンコーディングを足す理由です。確かめます。

# %%
torch.manual_seed(0)
layer = attnlab.MultiHeadAttention(d_model=8, n_heads=2).eval()
words = torch.randn(1, 5, 8)  # 5 トークンの埋め込み（位置エンコーディングなし）
perm = torch.tensor([3, 0, 4, 1, 2])  # 語順を入れ替える
with torch.no_grad():
    out_then_perm = layer(words).output[:, perm]
    perm_then_out = layer(words[:, perm]).output
torch.testing.assert_close(perm_then_out, out_then_perm)
print("並べ替えてから注意 = 注意してから並べ替え: 語順の違いは出力に現れません")

positions = SinusoidalPositionalEncoding(8)
with torch.no_grad():
    a = layer(positions(words)).output[:, perm]
    b = layer(positions(words[:, perm])).output
print(f"位置エンコーディングを足すと、並べ替えた文の出力は別物になります（最大の差 {(a - b).abs().max():.2f}）")

# %% [markdown]
# **確かめのセル（チェック）:** 位置エンコーディングを足すと、並べ替えた文の出力がはっきり（0.1 より大きく）変わることを確かめます。

# %%
assert (a - b).abs().max() > 0.1, "位置エンコーディングを足しても出力がほとんど変わらない"
print("確かめました: 位置エンコーディングありでは、並べ替えた文の出力の差が 0.1 より大きい")

# %% [markdown]
# ## 練習問題
#
# 1. マスク付きの注意を手で書いてください。`mask` が `False` のキーはスコアを `-inf` にして
#    ソフトマックスから外します。どのキーも見られないクエリは（NaN ではなく）0 のベクトルを返すこと
#    — attnlab と同じ約束です。下の `check` が attnlab と比べます。


# %%
def masked_attention(q, k, v, mask):
    # ここに書く
    raise NotImplementedError


# %%
# 合格すればあなたの関数が、まだなら解答例が、この先のセルで使われます
masked = check("masked_attention", masked_attention)

# %% tags=["solution"] jupyter={"source_hidden": true, "outputs_hidden": true}
# 解答例（開くと見えます）
show_solution("masked_attention")

# %% [markdown]
# 5 節の先を隠す工夫の例を、その関数でもう一度計算します。

# %%
torch.testing.assert_close(masked(x, x, x, mask), causal.output)
print("5 節の attnlab の出力と一致します")

# %% [markdown]
# 2. （考える問題）3 節の表では、割らないと d_k = 1024 で最大の重みが 1 に近づきます。そのとき
#    ソフトマックスの勾配はどうなり、学習にどう響くでしょう？ `compute_steps([32, 16, 8], d_k=1024, scale=False)`
#    と `scale=True` を比べてみてください。

# %% [markdown]
# <details><summary>答えの例</summary>
#
# ソフトマックスの出力 p の、スコア s についての微分は ∂p_i/∂s_j = p_i(δ_ij − p_j) です。p がほぼ
# [1, 0, 0] なら、どの成分も p_i(1 − p_i) か p_i·p_j で、ほぼ 0 になります。つまり、スコアを少し
# 動かしても重みはほとんど変わらず、誤差がクエリとキーの重み行列まで戻ってきません。最初に大きな
# スコアを取ったキーがそのまま選ばれ続け、学習が進みにくくなります。
# `scale=False` では重みが [1.000, 0.000, 0.000] に近く、`scale=True`（√1024 = 32 で割ってスコアは
# 1, 0.5, 0.25）では三つとも重みを持つので、勾配がどのキーにも流れます。
# </details>
