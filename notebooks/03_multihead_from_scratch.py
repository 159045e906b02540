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
# アテンションを計算し、最後に並べ直して一つの線形層（重み行列 W_o）に通します。チュートリアル 001 の
# 「マルチヘッド注意」の例のコードをその構造のまま書き、attnlab の `MultiHeadAttention` と同じ重みで
# 比べるテストを作ります。テストは、チュートリアルのコードの誤り（`transpose(1, 2)` の抜け）を見つけます。

# %% [markdown]
# <details><summary>English summary (英語の要約)</summary>
#
# The tutorial's multi-head attention, written with its structure, is compared with attnlab's
# `MultiHeadAttention` under copied weights; the test catches the missing `transpose(1, 2)` (the
# scores become head × head within each position), and a one-line fix passes. Test sizes matter:
# only with T = 1 and H = 1 together does the bug hide (T = 1, H = 4 and T = 5, H = 1 both catch
# it), and it is silent in self-attention and in any
# source–target attention whose two lengths are equal; only unequal lengths fail on shapes.
# Exercises at the end, each with a collapsed answer: among them, adding the mask the tutorial's
# multi-head attention lacks (predict the 15 non-zero weights of a causal 5 × 5 map first) and
# source–target attention with T = 3 queries and S = 7 keys (predict the shapes first), each
# checked against attnlab.
# </details>

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
# 線形変換のあと `view(B, -1, H, d_k)` で形を `(B, T, H, d_k)` にし、そのままアテンションを計算します。
# チュートリアルのコードと同じく、位置とヘッドの次元を入れ替える `transpose(1, 2)` は分割の側にはありません。


# %%
class TutorialMultiHead(nn.Module):
    """チュートリアルのコードの構造（ここで書き直したもの）: 四つの線形層、分割、アテンション、結合。"""

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
        return (output, weights) if return_weights else output  # 重みは返すだけで、保存しない


# %% [markdown]
# 出力の形は合っています。ここが厄介なところで、形だけ見ても誤りはわかりません。

# %%
torch.manual_seed(0)
d_model, heads = 32, 4
x = torch.randn(2, 5, d_model)  # (B, T, D)
ours = TutorialMultiHead(d_model, heads)
print("出力の形:", tuple(ours(x, x, x).shape))

# %% [markdown]
# ## 2. attnlab と同じ重みで比べるテスト
#
# attnlab の `MultiHeadAttention` は `q_proj`, `k_proj`, `v_proj`, `out_proj` の四つの線形層を持ちます。
# その重みを手書きのモジュールに写し、同じ入力で同じ出力が出るかを `torch.testing.assert_close` で
# 確かめます（litgpt や minGPT が参照実装と比べるときと同じやり方です）。


# %%
def copy_weights(ours: nn.Module, reference: attnlab.MultiHeadAttention) -> None:
    pairs = {"W_q": "q_proj", "W_k": "k_proj", "W_v": "v_proj", "W_o": "out_proj"}
    with torch.no_grad():
        for mine, theirs in pairs.items():
            getattr(ours, mine).weight.copy_(getattr(reference, theirs).weight)
            getattr(ours, mine).bias.copy_(getattr(reference, theirs).bias)


def outputs_of(module_class, *, T: int = 5, heads: int = 4):
    """同じ重みで、`module_class` と attnlab.MultiHeadAttention の自己注意の出力を返す（この順）。"""
    torch.manual_seed(0)
    reference = attnlab.MultiHeadAttention(d_model=32, n_heads=heads)
    ours = module_class(32, heads)
    copy_weights(ours, reference)
    x = torch.randn(2, T, 32)  # (B, T, D)
    with torch.no_grad():
        return ours(x, x, x), reference(x).output


def test_matches_attnlab(module_class, *, T: int = 5, heads: int = 4) -> None:
    """同じ重みなら、`module_class` の自己注意は attnlab.MultiHeadAttention と同じ出力になる。"""
    actual, expected = outputs_of(module_class, T=T, heads=heads)
    torch.testing.assert_close(actual, expected)


# %%
caught = None
try:
    test_matches_attnlab(TutorialMultiHead)
except AssertionError as error:
    caught = error
assert caught is not None, "チュートリアルの分割では attnlab との比較が失敗するはずが、合格した"
actual, expected = outputs_of(TutorialMultiHead)
wrong = ~torch.isclose(actual, expected, rtol=1.3e-6, atol=1e-5)  # assert_close と同じ許容差（float32）
print("テストが誤りを見つけました（torch.testing.assert_close が AssertionError を出しました）")
print(f"出力の {int(wrong.sum())} / {wrong.numel()} 個の値が違い、差の最大は {(actual - expected).abs().max():.2f}")
print("assert_close のメッセージの最初の行:", repr(str(caught).splitlines()[0]))

# %% [markdown]
# ## 3. 何が起きていたか
#
# `(B, T, H, d_k)` のまま `matmul` すると、最後の二つの次元 `(H, d_k)` が行列として掛けられます。
# つまりスコアは「位置 × 位置」ではなく「ヘッド × ヘッド」になり、各位置の中でヘッド同士が注意し合って
# います。注意の重みの形を見るとわかります。

# %%
_, buggy_weights = ours(x, x, x, return_weights=True)
print("手書き（誤り）の注意の重み:", tuple(buggy_weights.shape), "= (B, T, H, H)")
print(
    "正しい注意の重み:",
    tuple(attnlab.MultiHeadAttention(d_model, heads)(x, need_weights=True).weights.shape),
    "= (B, H, T, T)",
)

# %% [markdown]
# ヘッドを位置の前に出す `transpose(1, 2)` が抜けていました。`(B, T, H, d_k) → (B, H, T, d_k)` にすれば、
# `matmul` はヘッドごとに `(T, d_k) × (d_k, T)` を計算します。直すのは分割の一行だけです。
# （チュートリアルのコードは結合のときには `transpose(1, 2)` を使っています。分割と結合は対になるはずで、
# 片方にだけあるのが誤りのしるしです。）


# %%
class FixedMultiHead(TutorialMultiHead):
    def split(self, x):
        batch_size = x.size(0)
        return x.view(batch_size, -1, self.num_heads, self.d_k).transpose(1, 2)  # (B, H, T, d_k)


test_matches_attnlab(FixedMultiHead)
print("修正版は attnlab と一致します")

# %% [markdown]
# ## 4. テストの入力も大事
#
# 位置が一つでヘッドも一つ（T = 1, H = 1）だと、誤った版も合格してしまいます。注意する相手が一つしか
# ないので、どちらも v をそのまま（重み 1 で）返すからです。見逃すのは T と H の両方が 1 のときだけで、
# 下のとおり、どちらか一方でも 1 より大きければテストは誤りを見つけます。それでも比べるテストには、どちらも
# 「一つでは済まない」大きさ（T > 1、H > 1）を使うのが安全です。
#
# 誤った版が形の誤りで止まるのは、クエリの長さ T とキーの長さ S が違うときだけです。自己注意でも、
# T = S のソース・ターゲット注意（例えば同じ長さの原文と訳文）でも、形は合ったまま黙って間違います。

# %%
test_matches_attnlab(TutorialMultiHead, T=1, heads=1)
print("T = 1, H = 1: 誤った版も合格してしまう")
for T, h in ((1, 4), (5, 1)):
    try:
        test_matches_attnlab(TutorialMultiHead, T=T, heads=h)
        raise RuntimeError(f"T = {T}, H = {h} should catch the bug")
    except AssertionError:
        print(f"T = {T}, H = {h}: 誤りを見つける")
try:
    TutorialMultiHead(d_model, heads)(
        torch.randn(2, 5, d_model), torch.randn(2, 7, d_model), torch.randn(2, 7, d_model)
    )
    raise RuntimeError("T = 5, S = 7 should fail on shapes")
except RuntimeError as error:
    print("ソース・ターゲット注意 T = 5, S = 7: 形の誤りで止まる —", str(error)[:100])

# T = S = 5 のソース・ターゲット注意: 形は合うが、値は attnlab と違う
torch.manual_seed(0)
reference = attnlab.MultiHeadAttention(d_model, heads)
buggy = TutorialMultiHead(d_model, heads)
copy_weights(buggy, reference)
target, source = torch.randn(2, 5, d_model), torch.randn(2, 5, d_model)
got, expected = buggy(target, source, source), reference(target, source).output
assert got.shape == expected.shape and not torch.allclose(got, expected), "T = S で形が同じなのに値が違う、のはずが違った"
print(f"ソース・ターゲット注意 T = S = 5: 形は {tuple(got.shape)} で同じ、値の最大の差 {(got - expected).abs().max():.2f}（黙って間違う）")

# %% [markdown]
# 修正版のヘッドごとの注意の重みは、attnlab が `need_weights=True` で返すものと同じです。

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
# **図の見どころ:** 4 枚はバッチの最初の文のヘッド 1〜4 で、どれも 5 × 5（位置 × 位置）です。誤った版の
# 重みは 4 × 4（ヘッド × ヘッド）で、この図にはなりません。

# %% [markdown]
# ## 練習問題
#
# 1. `split_heads(x, n_heads)`: `(B, T, D)` を `(B, H, T, D/H)` にし、ヘッド h が幅の h 番目の切れ端を
#    持つようにしてください。`check` は、転置を忘れた版（形は同じ）を見分けるテストです。

# %%
def split_heads(x, n_heads):
    # ここに書く
    raise NotImplementedError


# %%
# 合格すればあなたの関数が、まだなら解答例が、この先のセルで使われます
split_fn = check("split_heads", split_heads)

# %% tags=["solution"] jupyter={"source_hidden": true, "outputs_hidden": true}
# 解答例（開くと見えます）
show_solution("split_heads")

# %% [markdown]
# その関数を分割に使ったモジュールも、2 節のテストに合格します。

# %%
class MyMultiHead(TutorialMultiHead):
    def split(self, x):
        return split_fn(x, self.num_heads)  # (B, T, D) -> (B, H, T, d_k)


test_matches_attnlab(MyMultiHead)
test_matches_attnlab(MyMultiHead, T=3, heads=8)
print("split_fn（合格したあなたの関数か、解答例）を使ったモジュールは attnlab と一致します")

# %% [markdown]
# 2. （考える問題）`view` の代わりに `reshape(B, H, T, d_k)` と一息に書くとどうなるでしょう？
#    形は正しいのに、なぜ誤りなのでしょう？

# %% [markdown]
# <details><summary>答えの例</summary>
#
# `reshape` は要素を並んでいる順（行優先: 最後の次元がいちばん速く変わる）に読み直すだけです。
# `(B, T, D)` のメモリでは、位置 0 の幅 D 個、位置 1 の幅 D 個……の順に並んでいます。それを
# `(B, H, T, d_k)` と読むと、最初のヘッドには位置 0〜(T/H)−1 あたりの幅全体が切れ切れに入り、ヘッドが
# 幅の切れ端ではなく位置の塊になってしまいます（T と H と d_k の関係によって混ざり方は変わります）。
# 形が同じなので、エラーにはなりません。正しくは、まず幅を `(H, d_k)` に分けて `(B, T, H, d_k)` とし、
# それから位置とヘッドを `transpose(1, 2)` で入れ替えます。`check` のテストは、このような「形だけ正しい」
# 答えを値で見分けます。
# </details>

# %% [markdown]
# 3. （試す問題）チュートリアルのマルチヘッド注意には、マスクの引数がありません。`FixedMultiHead` に
#    `mask`（真偽値、True = 見てよい、形 `(T, S)`）を足し、スコアの `mask == False` の所を −∞ にしてから
#    ソフトマックスを取るように書き換えてください。**書く前に予想:** T = 5 の因果マスク（`attnlab.causal_mask(5)`）
#    を渡すと、一つのヘッドの 5 × 5 の重みのうち、0 でないものはいくつでしょう？ 1 行目（最初のクエリ）の
#    重みはどうなるでしょう？

# %% [markdown]
# <details><summary>答えの例</summary>
#
# `forward` に `mask=None` を足し、スコアを計算した直後に
# `if mask is not None: scores = scores.masked_fill(~mask, float("-inf"))` と一行入れます。`mask` の形 `(T, S)` は
# スコアの形 `(B, H, T, S)` の最後の二つに合わせて自動で広がります（ブロードキャスト）。予想の答えは、
# 0 でない重みが **15 個**（1 + 2 + 3 + 4 + 5 = 5 · 6 / 2）で、1 行目は **[1, 0, 0, 0, 0]** です。最初のクエリが
# 見てよいのは自分だけなので、ソフトマックスは自分に 1 を配ります。attnlab の `MultiHeadAttention` に同じ
# マスクを `attn_mask=` で渡すと同じ出力になることで確かめられます（下のセル）。−∞ の代わりに大きな負の数
# （−1e9 など）でも、ふつうは同じ結果になりますが、行のすべてが隠されたときの扱いが変わります（attnlab は
# そのような行の出力を 0 にします）。
# </details>

# %%
class MaskedMultiHead(FixedMultiHead):
    """FixedMultiHead にマスクを足したもの（練習問題 3 の答えの例）。"""

    def forward(self, query, key, value, mask=None, return_weights=False):
        batch_size = query.size(0)
        Q, K, V = self.split(self.W_q(query)), self.split(self.W_k(key)), self.split(self.W_v(value))  # (B, H, T/S, d_k)
        scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(self.d_k)  # (B, H, T, S)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))  # 見てはいけない所は −∞ → 重み 0
        weights = F.softmax(scores, dim=-1)
        output = torch.matmul(weights, V).transpose(1, 2).contiguous().view(batch_size, -1, self.d_model)  # (B, T, D)
        output = self.W_o(output)
        return (output, weights) if return_weights else output


torch.manual_seed(0)
reference = attnlab.MultiHeadAttention(d_model, heads)
masked_mine = MaskedMultiHead(d_model, heads)
copy_weights(masked_mine, reference)
causal = attnlab.causal_mask(5)  # (T, S), True = 見てよい
masked_out, masked_weights = masked_mine(x, x, x, mask=causal, return_weights=True)
nonzero = int((masked_weights[0, 0] > 0).sum())
print("ヘッド1 の 0 でない重み:", nonzero, "個 / 1 行目:", [round(w, 3) for w in masked_weights[0, 0, 0].tolist()])
masked_difference = (masked_out - reference(x, attn_mask=causal).output).abs().max().item()
print(f"attnlab（attn_mask=因果マスク）との出力の最大の差: {masked_difference:.1e}")

# %% [markdown]
# **確かめのセル（チェック）:** 答えの例の数（15 個、1 行目は [1, 0, 0, 0, 0]、attnlab と一致）を確かめます。

# %%
assert nonzero == 15 and masked_weights[0, 0, 0].tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
assert masked_difference < 1e-5, masked_difference
print("確かめました: 0 でない重みは 15 個、1 行目は [1, 0, 0, 0, 0]、attnlab と一致")

# %% [markdown]
# 4. （試す問題）ソース・ターゲット注意では、クエリ（訳文の側）とキー・バリュー（原文の側）の長さが違います。
#    `FixedMultiHead(32, 4)` に、クエリ `torch.randn(2, 3, 32)`（T = 3）とキー・バリュー `torch.randn(2, 7, 32)`
#    （S = 7）を入れます。**実行する前に予想:** 出力の形、重みの形、重みの各行の和はいくつでしょう？
#    誤った版（`TutorialMultiHead`）ではどうなるでしょう？

# %% [markdown]
# <details><summary>答えの例</summary>
#
# 出力は **(2, 3, 32)**（クエリ一つにつき幅 32 のベクトル一つ。長さはクエリの T = 3 に従い、S = 7 には
# よりません）、重みは **(2, 4, 3, 7)**（バッチ 2 × ヘッド 4 × クエリ 3 × キー 7）で、各行の和は **1** です
# （一つのクエリの重みを、7 個のキーの上で足すと 1）。誤った版は、4 節で見たとおり、T と S が違うと行列の
# 積の形が合わずにエラーで止まります（T = S なら黙って間違います）。attnlab の
# `MultiHeadAttention(target, source)` と同じ出力になることを下のセルで確かめます。
# </details>

# %%
torch.manual_seed(0)
reference = attnlab.MultiHeadAttention(d_model, heads)
fixed = FixedMultiHead(d_model, heads)
copy_weights(fixed, reference)
target, source = torch.randn(2, 3, d_model), torch.randn(2, 7, d_model)  # (B, T, D), (B, S, D)
cross_out, cross_weights = fixed(target, source, source, return_weights=True)
print("出力", tuple(cross_out.shape), "重み", tuple(cross_weights.shape), "各行の和の最小と最大:",
      f"{cross_weights.sum(-1).min():.4f}, {cross_weights.sum(-1).max():.4f}")  # fmt: skip
cross_difference = (cross_out - reference(target, source).output).abs().max().item()
print(f"attnlab のソース・ターゲット注意との出力の最大の差: {cross_difference:.1e}")

# %% [markdown]
# **確かめのセル（チェック）:** 答えの例の形と和、attnlab との一致を確かめます。

# %%
assert tuple(cross_out.shape) == (2, 3, 32) and tuple(cross_weights.shape) == (2, 4, 3, 7)
assert torch.allclose(cross_weights.sum(-1), torch.ones(2, 4, 3)) and cross_difference < 1e-5
print("確かめました: 出力 (2, 3, 32)、重み (2, 4, 3, 7)、各行の和 1、attnlab と一致")
