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
# # 04 演習 1: アテンション・プーリングの分類器
#
# 文はトークンの数だけベクトルを持ちますが、分類器には一つのベクトルが要ります。アテンション・プーリング
# は、学習で決まる一本のクエリで全トークンにスコアを付け、ソフトマックスの注意の重みで平均します。重みを
# 見れば、分類器がどのトークンを読んだかがわかります。
#
# チュートリアル 001 の「演習 1: 基本的な注意機構の実装」の `SimpleAttention` がこれにあたります。1 節で
# それを attnlab の `AttentionPooling` と並べ、スコアの作り方（加法注意）とパディングの扱いを比べます。
# 2 節からは、日付の書き方からその言語を当てる分類器を作ります。データは attnlab がその場で作る日付
# （babel による 8 言語・多くの書式）で、ダウンロードはありません。

# %% [markdown]
# <details><summary>English summary (英語の要約)</summary>
#
# Attention pooling: one learned query scores every token, and the softmax weights average the
# states. §1 puts the tutorial's `SimpleAttention` (exercise 1) beside attnlab's
# `AttentionPooling`: attnlab's score `u · tanh(W h + b)` is additive attention (Bahdanau) with a
# constant query, checked against `attnlab.additive_attention`; the tutorial's score is a plain
# linear map, and it has no padding mask, so padded positions take weight and change the pooled
# vector. Additive attention also scores queries and keys of different widths (6 and 10 here;
# the dot product cannot), with the shapes to predict first. Then a classifier that tells the
# language of a written date, trained briefly (for a
# fixed number of epochs, so the run is the same on every machine), and the tokens it read.
# Exercises at the end, each with a collapsed answer.
# </details>

# %%
import datetime
import random
from collections import Counter

import torch
import torch.nn.functional as F
from helpers import PRECISION, check, show_solution
from IPython.display import display
from torch import nn

import attnlab
from attnlab import viz
from attnlab.data.tasks import DATE_FORMATS, FIRST_DATE, LAST_DATE, render_date
from attnlab.models.classifier import AttentionPooling
from attnlab.recipes.classify import ClassifySetup, train_classifier
from attnlab.train import TrainConfig

viz.display_options.lang = "ja"

# %% [markdown]
# ## 1. チュートリアルの `SimpleAttention` と attnlab の `AttentionPooling`
#
# チュートリアルの `SimpleAttention` は、各位置の状態 h_i に線形層 `nn.Linear(hidden, 1)` をかけた数を
# スコアにし、ソフトマックスで重みにして、状態の重み付き和（文脈ベクトル）を返します。下はその構造の
# まま書き直したものです。

# %%
class SimpleAttention(nn.Module):
    """チュートリアルの演習 1 と同じ構造: スコア = w · h_i + b、マスクなし。"""

    def __init__(self, hidden_size):
        super().__init__()
        self.attention = nn.Linear(hidden_size, 1)

    def forward(self, encoder_outputs):  # (B, S, D)
        scores = self.attention(encoder_outputs).squeeze(2)  # (B, S)
        weights = F.softmax(scores, dim=1)  # (B, S): パディングも含めた全位置で正規化
        context = torch.bmm(weights.unsqueeze(1), encoder_outputs)  # (B, 1, D)
        return context.squeeze(1), weights


# %% [markdown]
# attnlab の `AttentionPooling` のスコアは `u · tanh(W h_i + b)` です。これは **加法注意**（Bahdanau ら 2015、
# スコア = vᵀ tanh(W_q q + W_k k)）で、クエリが文ごとに変わらない一本のベクトルになったものです
# （W_q q は定数なので、バイアス b に吸収されます）。`attnlab.additive_attention` で同じ数になることを確かめます。
# チュートリアルのスコアは tanh も隠れ層もない一次式 w · h_i + b で、学習されるクエリ w との内積です
# （b はどの位置にも同じだけ足されるので、ソフトマックスの後には効きません）。

# %%
torch.manual_seed(0)
pool = AttentionPooling(8)
states = torch.randn(2, 5, 8)  # (B, S, D)
mask = torch.tensor([[True, True, True, True, True], [True, True, True, False, False]])  # (B, S): 2 つ目の文は後ろ二つがパディング
pooled = pool(states, mask)
zero = torch.zeros(1, 1, 8)  # クエリ q = 0 とし、W_q q の役はバイアスが担う
additive = attnlab.additive_attention(
    zero.expand(2, 1, 8), states, states, torch.eye(8), pool.k_proj.weight, pool.query,
    mask.unsqueeze(1), bias=pool.k_proj.bias,
)  # fmt: skip
torch.testing.assert_close(additive.output.squeeze(1), pooled.pooled)
torch.testing.assert_close(additive.weights.squeeze(1), pooled.weights)
print("AttentionPooling = 一定のクエリでの加法注意: 出力も重みも一致")

# %% [markdown]
# ### 加法注意は、クエリとキーの幅が違っても使える
#
# 内積のスコア q · k は、q と k の幅（次元の数）が同じでないと計算できません。加法注意のスコア
# vᵀ tanh(W_q q + W_k k) は、クエリを W_q で、キーを W_k で、それぞれ同じ幅 A に写してから足すので、
# クエリの幅 Dq とキーの幅 Dk が違っても計算できます（Bahdanau らの翻訳モデルでは、デコーダの状態が
# クエリ、エンコーダの状態がキーで、幅が違いました）。
#
# **予想してから実行:** クエリの幅 Dq = 6 のクエリ 2 個、キーの幅 Dk = 10 のキー 5 個、バリューの幅 3 で、
# 注意の幅 A = 4 とします。W_q と W_k の形、出力と重みの形はそれぞれ何でしょう？ 同じクエリとキーで内積の
# 注意を呼ぶと、どうなるでしょう？

# %%
Dq, Dk, A = 6, 10, 4
q_small, k_wide, v_small = torch.randn(1, 2, Dq), torch.randn(1, 5, Dk), torch.randn(1, 5, 3)  # (B, T, Dq), (B, S, Dk), (B, S, Dv)
w_q, w_k, score_v = torch.randn(A, Dq), torch.randn(A, Dk), torch.randn(A)  # W_q (A, Dq), W_k (A, Dk), v (A,)
mixed = attnlab.additive_attention(q_small, k_wide, v_small, w_q, w_k, score_v)
print("W_q", tuple(w_q.shape), "W_k", tuple(w_k.shape), "→ 出力", tuple(mixed.output.shape), "重み", tuple(mixed.weights.shape))
print("各クエリの行の重みの和:", [round(x, 4) for x in mixed.weights.sum(-1).flatten().tolist()])
try:
    attnlab.scaled_dot_product_attention(q_small, k_wide, v_small)
    dot_message = "（エラーにならなかった）"
except (RuntimeError, ValueError) as error:
    dot_message = str(error).splitlines()[0]
print("内積の注意では:", dot_message)

# %% [markdown]
# <details><summary>答え（予想と比べる）</summary>
#
# W_q は (4, 6)、W_k は (4, 10) で、出力は (1, 2, 3)（クエリ 2 個それぞれに幅 3 のバリューの混ぜ合わせ）、
# 重みは (1, 2, 5)（クエリ 2 個 × キー 5 個、各行の和は 1）です。内積の注意は幅 6 と幅 10 の内積を取れないので、
# 上に印刷したとおりエラーになります。
# </details>

# %% [markdown]
# **確かめのセル（チェック）:** 上の答えの形と、内積の注意がエラーになったことを確かめます。

# %%
assert tuple(mixed.output.shape) == (1, 2, 3) and tuple(mixed.weights.shape) == (1, 2, 5)
assert torch.allclose(mixed.weights.sum(-1), torch.ones(1, 2)) and dot_message != "（エラーにならなかった）"
print("確かめました: 出力 (1, 2, 3)、重み (1, 2, 5)、行の和は 1、内積の注意はエラー")

# %% [markdown]
# チュートリアルの `SimpleAttention` にはマスクがありません。2 つ目の文を、パディングを付けた形（バッチの中）と
# 付けない形（一文だけ）で入れて比べます。パディングの位置に何が入っていても（ここでは乱数。0 でも同じです）、
# その位置が重みを取ってしまうことがわかります。

# %%
torch.manual_seed(0)
simple = SimpleAttention(8)
short = states[1:, :3]  # 2 つ目の文の本物の 3 トークンだけ
with torch.no_grad():
    alone, alone_w = simple(short)
    batched, batched_w = simple(states)  # 2 つ目の文は後ろ二つがパディングのまま
    pooled_alone = pool(short).pooled
print("SimpleAttention: 2 つ目の文の重み（バッチの中）", [round(x, 3) for x in batched_w[1].tolist()])
print("  パディングに行った重み:", f"{batched_w[1, 3:].sum():.3f}",
      "/ 一文だけのときとの文脈ベクトルの差:", f"{(batched[1] - alone[0]).abs().max():.3f}")  # fmt: skip
print("AttentionPooling（マスクあり）: 2 つ目の文の重み", [round(x, 3) for x in pooled.weights[1].tolist()])
print("  一文だけのときとの差:", f"{(pooled.pooled[1] - pooled_alone[0]).abs().max():.1e}")

# %% [markdown]
# マスクがないと、同じ文でもバッチの中で一緒に並んだ文の長さによって結果が変わります。attnlab は
# パディングのスコアを −∞ にしてから（`mask == False`）ソフトマックスを取るので、重みはちょうど 0 です。

# %% [markdown]
# **確かめのセル（チェック）:** 上の二つのこと（マスクのないほうはパディングに重みが行き、マスクのあるほうは
# 一文だけのときと同じ）を確かめます。

# %%
assert batched_w[1, 3:].sum() > 0.01, "SimpleAttention のパディングの重みが小さすぎる"
assert torch.allclose(pooled.pooled[1], pooled_alone[0], atol=1e-6), "マスクありでも一文だけのときと違う"
print("確かめました: マスクなしはパディングに重み、マスクありは一文だけのときと同じ")

# %%
viz.plot_attention(
    pooled.weights.detach(), tgt_tokens=["1 つ目の文", "2 つ目の文"], title="プーリングの重み",
    row_label="文", column_label="トークンの位置",
)  # fmt: skip

# %% [markdown]
# **図の見どころ:** 2 つ目の文の行では、パディングの列 3 と 4 が 0（いちばん暗い色）で、重みは列 0〜2 だけに配られています。

# %% [markdown]
# ## 2. データ: 日付と言語
#
# 一つの日付をいろいろな言語と書式で書き、ラベルをその言語にします。数字だけの書式（`05/03/2024` など）は
# どの言語か決まらないので除きます。

# %%
rng = random.Random(0)
days = (LAST_DATE - FIRST_DATE).days
pairs, seen = [], set()
while len(pairs) < 6000:
    date = FIRST_DATE + datetime.timedelta(days=rng.randint(0, days))
    locale, fmt = rng.choice(DATE_FORMATS)
    text = render_date(date, locale, fmt)
    if any(ch.isalpha() for ch in text) and text not in seen:
        seen.add(text)
        pairs.append((locale.split("_")[0], text))  # (label, text)
test_pairs, train_pairs = pairs[:500], pairs[500:]
print(Counter(label for label, _ in pairs))
print(train_pairs[:6])

# %% [markdown]
# ## 3. 学習
#
# `attnlab train classify` と同じレシピです。学習は `EPOCHS` エポックで止まります（時計ではなくエポックの数で
# 止めるので、どの機械でも同じ学習になり、速さだけが機械によって違います）。
# `n_layers=0` にすると、プーリングはトークンの埋め込み（と位置エンコーディング）を直接見るので、重みが
# 一つ一つのトークンを指します。層を重ねると各状態が周りのトークンを混ぜるため、重みは「どの位置を
# 読んだか」になります。

# %%
EPOCHS = 50  # 学習データを何周するか（CI の予算）
setup = ClassifySetup(
    model_preset="tiny",
    model_overrides=dict(n_layers=0),
    tokenizer="bpe",
    vocab_size=300,
    max_tokens=512,
    train=TrainConfig(
        epochs=EPOCHS, lr=3e-3, warmup_steps=20, eval_every_steps=100, progress=False, precision=PRECISION
    ),
)
classifier, result = train_classifier(setup, train_pairs)
print(f"{result.steps} 回の更新、{result.epochs_done:.0f} エポックで停止（学習にかかった時間 {result.train_seconds:.0f} 秒）")
scores = classifier.evaluate(test_pairs)
print(f"テストの正解率: {scores['accuracy']:.1%}")
print({k.split("/")[1]: round(v, 3) for k, v in scores.items() if k.startswith("accuracy/")})

# %% [markdown]
# ## 4. どのトークンを読んだか
#
# 予測 (`Prediction`) は Jupyter で、ラベル（言語の略号）・確率と、重みで色付けしたトークンとして表示されます。
# 各トークンの下の数が、そのトークンの注意の重みです。

# %%
examples = [
    "Dienstag, 5. März 2024",
    "martes, 5 de marzo de 2024",
    "2024年3月5日火曜日",
    "5 mars 2024",
    "5 maart 2024",
    "Tuesday, March 5, 2024",
]
predictions = classifier.predict(examples)
for prediction in predictions:
    display(prediction)
# 数字（と空白）だけのトークンに行った重み: 日付の数字はどの言語でも同じなので、手がかりにならないはず
on_digits = [sum(w for t, w in zip(p.tokens, p.weights) if not any(c.isalpha() for c in t)) for p in predictions]
print("数字と記号だけのトークンに行った重み:", [round(x, 2) for x in on_digits])

# %% [markdown]
# 上の行の数が小さい例では、重みは曜日・月の名前（またはその一部）や「年」「月」「日」のような、言語を
# 表すトークンに集まっています。数字はどの言語でも同じなので、言語を当てる手がかりにはなりません。
#
# 誤りも見ておきます。二つの言語でまったく同じ文字列になる日付（略した月名「31 mar 2088」はスペイン語
# でもイタリア語でもありえます。「15 de agosto de 1953」はスペイン語でもポルトガル語でもありえます）では、
# どの分類器も当て推量になります。誤りの例で、重みがどこに集まったかを見てください。

# %%
mistakes = [
    (label, p) for (label, _), p in zip(test_pairs, classifier.predict([t for _, t in test_pairs])) if p.label != label
]
print(f"テスト {len(test_pairs)} 件のうち誤り {len(mistakes)} 件")
for label, prediction in mistakes[:3]:
    print("正解:", label)
    display(prediction)

# %% [markdown]
# ## 練習問題
#
# 1. アテンション・プーリングを手で書いてください: `attention_pool(states, mask, k_weight, k_bias, query)` は
#    `(pooled, weights)` を返します。スコアは `query · tanh(states @ k_weightᵀ + k_bias)`、パディングの重みは 0 です。
#    `check` が `AttentionPooling` と同じ重みで比べます。

# %%
def attention_pool(states, mask, k_weight, k_bias, query):
    # ここに書く
    raise NotImplementedError


# %%
# 合格すればあなたの関数が、まだなら解答例が、この先のセルで使われます
pool_fn = check("attention_pool", attention_pool)

# %% tags=["solution"] jupyter={"source_hidden": true, "outputs_hidden": true}
# 解答例（開くと見えます）
show_solution("attention_pool")

# %% [markdown]
# その関数で 1 節の例をもう一度プールし、パディングの重みが 0 になることを確かめます。

# %%
with torch.no_grad():
    mine, my_weights = pool_fn(states, mask, pool.k_proj.weight, pool.k_proj.bias, pool.query)
torch.testing.assert_close(mine, pooled.pooled)
print("2 つ目の文のパディングの重み:", my_weights[1, 3:].tolist())

# %% [markdown]
# 2. （試す問題）`n_layers=1` にして学び直し、同じ例の重みがどう変わるか見てください。

# %% [markdown]
# <details><summary>答えの例</summary>
#
# 3 節のセルの `model_overrides=dict(n_layers=0)` を `dict(n_layers=1)` にして、3 節と 4 節を実行し直します。
# 正解率は同じくらいか少し上がりますが、重みの読み方が変わります。層が一つあると、各位置の状態は
# 自己注意で周りのトークンをすでに混ぜているので、重みが数字や空白の位置に行っていても、その状態は
# 隣の月の名前の情報を運んでいるかもしれません。重みは「どの位置の状態を読んだか」であって、「どの文字が
# 決め手だったか」ではなくなります。n_layers=0 のときのようにトークンそのものを指すとは限らないので、
# 重みをトークンの説明として読むのは、層のないモデルでいちばん素直です。
# </details>
