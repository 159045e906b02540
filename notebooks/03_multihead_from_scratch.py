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
# # 03 マルチヘッド注意を一から書く — そしてテストで誤りを見つける
#
# マルチヘッド注意は、幅 D のベクトルを H 個の細いベクトル（幅 D/H）に切り分け、ヘッドごとに別々に
# 注意を計算し、最後に並べ直して一つの線形層に通します。チュートリアルのコードをその構造のまま書き、
# attnlab の `MultiHeadAttention` と同じ重みで比べるテストを作ります。テストは誤りを見つけます。
#
# _English:_ multi-head attention cuts each width-D vector into H slices of width D/H, runs
# attention separately per head, then puts the slices back side by side and applies one linear
# map. We write the tutorial's code with its structure, and a test that compares it with attnlab's
# `MultiHeadAttention` under the same weights. The test finds a bug.

# %%
import math

import torch
import torch.nn.functional as F
from helpers import check, show_solution
from torch import nn

import attnlab
from attnlab import viz

viz.display_options.lang = "ja"


# %% [markdown]
# ## 1. チュートリアルの形のまま
#
# 線形変換のあと `view(B, -1, H, d_k)` で形を `(B, T, H, d_k)` にし、そのまま注意を計算します。
#
# _English:_ after the projections, `view(B, -1, H, d_k)` gives `(B, T, H, d_k)`, and attention is
# computed on that directly.


# %%
class TutorialMultiHead(nn.Module):
    """The structure of the tutorial's code (written here again): four linear maps, split, attend, merge."""

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def split(self, x):
        batch_size = x.size(0)
        return x.view(batch_size, -1, self.num_heads, self.d_k)  # (B, T, H, d_k)

    def forward(self, query, key, value, return_weights=False):
        batch_size = query.size(0)
        Q, K, V = self.split(self.W_q(query)), self.split(self.W_k(key)), self.split(self.W_v(value))
        scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(self.d_k)
        weights = F.softmax(scores, dim=-1)
        output = torch.matmul(weights, V)
        output = output.transpose(1, 2).contiguous().view(batch_size, -1, self.d_model)  # (B, T, D)
        output = self.W_o(output)
        return (output, weights) if return_weights else output  # weights returned, not stored


# %% [markdown]
# 形は合っています。ここが厄介なところで、形だけ見ても誤りはわかりません。
#
# _English:_ the shapes are right — which is exactly why the shapes alone do not reveal anything.

# %%
torch.manual_seed(0)
d_model, heads = 32, 4
x = torch.randn(2, 5, d_model)  # (B, T, D)
ours = TutorialMultiHead(d_model, heads)
print("出力の形 / output shape:", tuple(ours(x, x, x).shape))

# %% [markdown]
# ## 2. attnlab と同じ重みで比べるテスト
#
# attnlab の `MultiHeadAttention` は `q_proj`, `k_proj`, `v_proj`, `out_proj` の四つの線形層を持ちます。
# その重みを手書きのモジュールに写し、同じ入力で同じ出力が出るかを `torch.testing.assert_close` で
# 確かめます（litgpt や minGPT が参照実装と比べるときと同じやり方です）。
#
# _English:_ attnlab's `MultiHeadAttention` has four linear maps `q_proj`, `k_proj`, `v_proj`,
# `out_proj`. We copy their weights into the hand-written module and check with `assert_close`
# that the same input gives the same output (the equivalence tests of litgpt and minGPT).


# %%
def copy_weights(ours: nn.Module, reference: attnlab.MultiHeadAttention) -> None:
    pairs = {"W_q": "q_proj", "W_k": "k_proj", "W_v": "v_proj", "W_o": "out_proj"}
    with torch.no_grad():
        for mine, theirs in pairs.items():
            getattr(ours, mine).weight.copy_(getattr(reference, theirs).weight)
            getattr(ours, mine).bias.copy_(getattr(reference, theirs).bias)


def test_matches_attnlab(module_class, *, T: int = 5, heads: int = 4) -> None:
    """Self-attention of `module_class` equals attnlab.MultiHeadAttention with the same weights."""
    torch.manual_seed(0)
    reference = attnlab.MultiHeadAttention(d_model=32, n_heads=heads)
    ours = module_class(32, heads)
    copy_weights(ours, reference)
    x = torch.randn(2, T, 32)  # (B, T, D)
    expected = reference(x).output
    torch.testing.assert_close(ours(x, x, x), expected)


# %%
caught = None
try:
    test_matches_attnlab(TutorialMultiHead)
except AssertionError as error:
    caught = error
assert caught is not None, "the comparison with attnlab must fail for the tutorial's split"
print("テストが誤りを見つけました / the test caught a bug:\n")
print(str(caught)[:600])

# %% [markdown]
# ## 3. 何が起きていたか
#
# `(B, T, H, d_k)` のまま `matmul` すると、最後の二つの次元 `(H, d_k)` が行列として掛けられます。
# つまり点数は「位置 × 位置」ではなく「ヘッド × ヘッド」になり、各位置の中でヘッド同士が注意し合って
# います。重みの形を見るとわかります。
#
# _English:_ with `(B, T, H, d_k)`, `matmul` multiplies the last two dimensions `(H, d_k)`: the
# scores are head × head instead of position × position — within each position the heads attend
# to each other. The shape of the weights shows it.

# %%
_, buggy_weights = ours(x, x, x, return_weights=True)
print("手書き（誤り）の重み / weights of the buggy module:", tuple(buggy_weights.shape), "= (B, T, H, H)")
print(
    "正しい重み / correct weights:",
    tuple(attnlab.MultiHeadAttention(d_model, heads)(x, need_weights=True).weights.shape),
    "= (B, H, T, T)",
)

# %% [markdown]
# ヘッドを位置の前に出す `transpose(1, 2)` が抜けていました。`(B, T, H, d_k) → (B, H, T, d_k)` にすれば、
# `matmul` はヘッドごとに `(T, d_k) × (d_k, T)` を計算します。直すのは分割の一行だけです。
#
# _English:_ the missing piece is `transpose(1, 2)`, which moves the heads before the positions:
# `(B, T, H, d_k) → (B, H, T, d_k)`, so that `matmul` computes `(T, d_k) × (d_k, T)` per head. The
# fix is one line, in the split.


# %%
class FixedMultiHead(TutorialMultiHead):
    def split(self, x):
        batch_size = x.size(0)
        return x.view(batch_size, -1, self.num_heads, self.d_k).transpose(1, 2)  # (B, H, T, d_k)


test_matches_attnlab(FixedMultiHead)
print("修正版は attnlab と一致します / the fixed module matches attnlab")

# %% [markdown]
# ## 4. テストの入力も大事
#
# 位置が一つでヘッドも一つ（T = 1, H = 1）だと、誤った版も合格してしまいます。注意する相手が一つしか
# ないので、どちらも v をそのまま（重み 1 で）返すからです。比べるテストには「一つでは済まない」大きさ
# （T > 1、H > 1）を使います。また、クエリとキーの長さが違う交差注意では、誤った版は形が合わずに
# 止まります。黙って間違うのは自己注意のときだけです。
#
# _English:_ with one position and one head (T = 1, H = 1) the buggy module passes too: there is a
# single thing to attend to, so both return v with weight 1. Equivalence tests need sizes above one
# (T > 1, H > 1). In cross-attention (query and key lengths differ) the buggy module fails loudly
# on shapes; only self-attention is silently wrong.

# %%
test_matches_attnlab(TutorialMultiHead, T=1, heads=1)
print("T = 1, H = 1: 誤った版も合格してしまう / the buggy module passes")
for T, h in ((1, 4), (5, 1)):
    try:
        test_matches_attnlab(TutorialMultiHead, T=T, heads=h)
        raise RuntimeError(f"T = {T}, H = {h} should catch the bug")
    except AssertionError:
        print(f"T = {T}, H = {h}: 誤りを見つける / caught")
try:
    TutorialMultiHead(d_model, heads)(
        torch.randn(2, 5, d_model), torch.randn(2, 7, d_model), torch.randn(2, 7, d_model)
    )
except RuntimeError as error:
    print("交差注意では形の誤り / cross-attention fails on shapes:", str(error)[:120])

# %% [markdown]
# 修正版のヘッドごとの重みは attnlab が返すものと同じです（`need_weights=True`）。
#
# _English:_ the fixed module's per-head weights are the ones attnlab returns with `need_weights=True`.

# %%
torch.manual_seed(0)
reference = attnlab.MultiHeadAttention(d_model, heads)
fixed = FixedMultiHead(d_model, heads)
copy_weights(fixed, reference)
result = reference(x, need_weights=True)
_, fixed_weights = fixed(x, x, x, return_weights=True)
torch.testing.assert_close(fixed_weights, result.weights)
result

# %% [markdown]
# ## 練習問題 / Exercises
#
# 1. `split_heads(x, n_heads)`: `(B, T, D)` を `(B, H, T, D/H)` にし、ヘッド h が幅の h 番目の切れ端を
#    持つようにしてください。`check` は、転置を忘れた版（形は同じ）を見分けるテストです。
# 2. （考える問題）`view` の代わりに `reshape(B, H, T, d_k)` と一息に書くとどうなるでしょう？
#    形は正しいのに、なぜ誤りなのでしょう？
#
# _English:_ (1) write `split_heads(x, n_heads)`: `(B, T, D) → (B, H, T, D/H)` with head h holding
# the h-th slice of the width; `check` tells it apart from the untransposed version, which has the
# same shape. (2) (to think about) why is `reshape(B, H, T, d_k)` in one go wrong although its
# shape is right?


# %%
def split_heads(x, n_heads):
    # ここに書く / your code here
    raise NotImplementedError


# %%
check("split_heads", split_heads)

# %% tags=["solution"] jupyter={"source_hidden": true, "outputs_hidden": true}
# 解答例（開くと見えます）/ model solution (expand to see)
show_solution("split_heads")
