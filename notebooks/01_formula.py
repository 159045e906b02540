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
# # 01 注意の式を手で計算する
#
# `Attention(Q, K, V) = softmax(QKᵀ / √d_k) · V` を PyTorch の数行で書き、attnlab と PyTorch の
# 実装が同じ数を出すことを確かめます。最後に、なぜ √d_k で割るのかを数で見ます。
#
# _English:_ we write the attention formula in a few lines of PyTorch, check that attnlab's and
# PyTorch's implementations give the same numbers, and then see in numbers why the scores are
# divided by √d_k.

# %%
import math

import torch
import torch.nn.functional as F
from helpers import check, show_solution, three_books_playground
from IPython.display import display

import attnlab
from attnlab import viz
from attnlab.explain import compute_steps, plot_steps

viz.display_options.lang = "ja"  # 図のラベルを日本語に / Japanese figure labels
_ = torch.manual_seed(0)

# %% [markdown]
# ## 1. 三冊の本
#
# 図書館で「注意機構の入門書」を探しているとします。探している内容がクエリ q、各本の背表紙の
# 説明がキー k、本の中身がバリュー v です。q と各 k の内積が「どれだけ合っているか」の点数になり、
# softmax で合計 1 の重みに変わり、その重みで中身を混ぜたものが出力です。
#
# _English:_ a query q (what we look for) is compared with each book's key k (its spine); the dot
# products are scores, the softmax turns them into weights that sum to 1, and the output mixes
# the books' values v by those weights.

# %%
d_k = 4
q = torch.tensor([[1.0, 0.0, 1.0, 0.0]])  # (1, d_k) 一つのクエリ / one query
K = torch.tensor(
    [
        [1.0, 0.0, 1.0, 0.0],  # 本1: クエリとよく合う / book 1 matches the query well
        [1.0, 0.0, 0.0, 0.0],  # 本2: 半分だけ合う / half a match
        [0.0, 1.0, 0.0, 1.0],  # 本3: 合わない / no match
    ]
)  # (S, d_k)
V = torch.eye(3)  # (S, Dv): 本 i の中身は i 番目の方向 / book i's content is direction i

scores = q @ K.T  # (1, d_k) x (d_k, S) -> (1, S)
scaled = scores / math.sqrt(d_k)
weights = torch.softmax(scaled, dim=-1)  # (1, S), 行の和は 1 / each row sums to 1
output = weights @ V  # (1, S) x (S, Dv) -> (1, Dv)
print("内積 q·k         :", scores)
print("÷√d_k           :", scaled)
print("重み softmax     :", weights, "合計", weights.sum().item())
print("出力 Σ 重み·v    :", output)

# %% [markdown]
# `attnlab.explain` は同じ手順を一歩ずつ計算します。結果のオブジェクトは Jupyter で表として表示されます
# （`attnlab explain --lang ja` が端末に出すのと同じ数です）。
#
# _English:_ `attnlab.explain` computes the same walk-through; its result shows itself as a table
# in Jupyter (the numbers `attnlab explain` prints in the terminal).

# %%
steps = compute_steps([8.0, 4.0, 2.0], d_k=64)
steps

# %%
plot_steps(steps, lang="ja")

# %% [markdown]
# ## 2. 一般の形: バッチとヘッドのある注意
#
# 実際のモデルでは q, k, v は `(B, H, T, Dh)`（バッチ、ヘッド、位置、ヘッドの幅）の形をしています。
# 式は同じで、`matmul` が先頭の次元をそのまま運んでくれます。
#
# _English:_ in a model, q, k and v have shape `(B, H, T, Dh)`; the formula is the same and
# `matmul` carries the leading dimensions along.


# %%
def attention_by_hand(q, k, v):
    """softmax(q·kᵀ/√d_k)·v — shapes (..., T, Dh), (..., S, Dh), (..., S, Dv) → (..., T, Dv)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, S)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


B, H, T, S, Dh = 2, 4, 5, 7, 16
q, k, v = torch.randn(B, H, T, Dh), torch.randn(B, H, S, Dh), torch.randn(B, H, S, Dh)
ours, our_weights = attention_by_hand(q, k, v)

# %% [markdown]
# 手で書いたものを三つの実装と比べます: attnlab の読みやすい参照実装 (`backend="math"`)、
# attnlab が PyTorch の融合カーネルを呼ぶもの (`backend="sdpa"`)、PyTorch そのもの。
# `torch.testing.assert_close` は違いがあると、どこがどれだけ違うかを言って止まります。
#
# _English:_ we compare ours with attnlab's reference (`"math"`), attnlab through PyTorch's fused
# kernel (`"sdpa"`) and PyTorch itself; `assert_close` stops with the location and size of any
# difference.

# %%
reference = attnlab.scaled_dot_product_attention(q, k, v, return_weights=True, backend="math")
fused = attnlab.scaled_dot_product_attention(q, k, v, backend="sdpa")
torch_out = F.scaled_dot_product_attention(q, k, v)

torch.testing.assert_close(ours, reference.output)
torch.testing.assert_close(our_weights, reference.weights)
torch.testing.assert_close(ours, fused.output)
torch.testing.assert_close(ours, torch_out)
print("一致 / all equal; 最大の差 / largest difference:", (ours - torch_out).abs().max().item())

# %% [markdown]
# 結果 (`AttentionResult`) はそのまま表示できます。最初のバッチの各ヘッドの重みがヒートマップになります
# （小さな行列なら数そのものが表になります）。
#
# _English:_ the result displays itself: each head's weights of the first batch item as a heatmap
# (a small map shows its numbers as a table instead).

# %%
reference

# %%
attnlab.scaled_dot_product_attention(q[0, 0, :2], k[0, 0, :3], v[0, 0, :3], return_weights=True)

# %% [markdown]
# ## 3. なぜ √d_k で割るのか
#
# 成分が平均 0・分散 1 の乱数なら、内積 q·k は d_k 個の積の和なので、分散は d_k、標準偏差は √d_k に
# なります。d_k が大きいほど点数の差が広がり、softmax はほとんど一つのキーだけを選ぶ（飽和する）ように
# なります。飽和した softmax は勾配がほぼ 0 なので、学習が進みません。√d_k で割ると点数の広がりが
# d_k によらず 1 程度に戻ります。
#
# _English:_ with unit-variance entries, q·k sums d_k products, so its standard deviation is √d_k.
# The larger d_k, the wider the scores, and the softmax picks almost one key (it saturates, with
# gradients near zero). Dividing by √d_k brings the spread back to about 1 whatever d_k is.

# %%
g = torch.Generator().manual_seed(0)
sizes = [4, 16, 64, 256, 1024]
spread, top_raw, top_scaled = [], [], []
for d in sizes:
    qs, ks = torch.randn(2000, 1, d, generator=g), torch.randn(2000, 8, d, generator=g)  # 8 keys per query
    raw = (qs @ ks.transpose(-2, -1))[:, 0]  # (2000, 8)
    spread.append(raw.std().item())
    top_raw.append(torch.softmax(raw, -1).max(-1).values.mean().item())
    top_scaled.append(torch.softmax(raw / math.sqrt(d), -1).max(-1).values.mean().item())
for d, s, a, b in zip(sizes, spread, top_raw, top_scaled):
    print(
        f"d_k={d:5d}  q·k の標準偏差 {s:6.2f} (√d_k={math.sqrt(d):5.1f})  最大の重み: 割らない {a:.3f} / 割る {b:.3f}"
    )

# %%
viz.plot_curves(
    {"÷√d_k なし / raw": (sizes, top_raw), "÷√d_k あり / scaled": (sizes, top_scaled)},
    xlabel="d_k",
    ylabel="最大の重みの平均 / mean largest weight",
    title="8 個のキーに対する softmax の飽和 / softmax saturation over 8 keys",
    logx=True,
)

# %% [markdown]
# ## 4. スライダーで試す（任意）
#
# `ipywidgets` が入っていれば（`pip install 'attnlab[notebooks]'`）、三冊の本の点数と d_k をスライダーで
# 動かせます。入っていなければ、下のセルが同じことを三つの d_k で表示します。
#
# _English:_ with `ipywidgets` installed, sliders move the three scores and d_k; without it the
# cell after shows the same for three values of d_k.

# %%
three_books_playground(lang="ja")

# %%
for d in (1, 64, 512):
    display(compute_steps([8.0, 4.0, 2.0], d_k=d, scale=True))

# %% [markdown]
# ## 5. マスク: 見てよい場所を決める
#
# attnlab のマスクは真偽値で、`True` が「注意してよい」です。因果マスク（未来を見ない）を付けると、
# 重みの上三角が 0 になります。
#
# _English:_ attnlab masks are boolean with `True` = may attend. With the causal mask (no looking
# ahead) the upper triangle of the weights is zero.

# %%
mask = attnlab.causal_mask(6)
viz.plot_mask(mask, title="因果マスク / causal mask")

# %%
x = torch.randn(1, 6, 8)
attnlab.scaled_dot_product_attention(x, x, x, mask, return_weights=True)

# %% [markdown]
# ## 練習問題 / Exercises
#
# 1. マスク付きの注意を手で書いてください。`mask` が `False` のキーは点数を `-inf` にして softmax から
#    外します。どのキーも見られないクエリは（NaN ではなく）0 のベクトルを返すこと — attnlab と同じ約束です。
#    下の `check` が attnlab と比べます。
# 2. （考える問題）3 節の表では、割らないと d_k = 1024 で最大の重みが 1 に近づきます。そのとき
#    softmax の勾配はどうなり、学習にどう響くでしょう？ `compute_steps([32, 16, 8], d_k=1024, scale=False)`
#    と `scale=True` を比べてみてください。
#
# _English:_ (1) write masked attention by hand: keys with `mask == False` get a score of `-inf`;
# a query with no key to attend to returns a zero vector, not NaN (attnlab's rule); `check`
# compares with attnlab. (2) (to think about) in section 3 the undivided scores make the largest
# weight approach 1 at d_k = 1024: what happens to the softmax's gradients, and to training?
# Compare `compute_steps([32, 16, 8], d_k=1024, scale=False)` with `scale=True`.


# %%
def masked_attention(q, k, v, mask):
    # ここに書く / your code here
    raise NotImplementedError


# %%
check("masked_attention", masked_attention)

# %% tags=["solution"] jupyter={"source_hidden": true, "outputs_hidden": true}
# 解答例（開くと見えます）/ model solution (expand to see)
show_solution("masked_attention")
