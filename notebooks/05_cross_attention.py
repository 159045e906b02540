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
# # 05 演習 2: 翻訳モデルの交差注意をヒートマップで見る
#
# エンコーダ・デコーダの翻訳モデルでは、デコーダが出力の各トークンを書くとき、交差注意で入力文の
# どこを見るかを決めます。その重みを「出力トークン × 入力トークン」の表にしたのがヒートマップです。
#
# attnlab に同梱の日英・英日翻訳モデル（`ja-en`, `en-ja`）を名前で読み込みます。このインストールに
# まだ同梱モデルがなければ、代わりに生成データ（英語の数詞 ⇄ 漢数字）で小さなモデルを 30 秒だけ
# 学習します。下の出力に、どちらを使ったかが表示されます。
#
# _English:_ in an encoder–decoder translator, the decoder decides through cross-attention where
# in the source to look while writing each output token; the heatmap is that table of weights,
# output tokens × source tokens. We load attnlab's shipped Japanese⇄English translators by name;
# where this install has none yet, a small stand-in is trained for 30 seconds on generated data
# (English number words ⇄ kanji numerals). The output below says which one is used.

# %%
from helpers import check, load_translator, shipped_model, show_solution
from IPython.display import display

from attnlab import viz

viz.display_options.lang = "ja"

SECONDS = 30  # 同梱モデルがないときの学習時間 / training time of the stand-in
names = ["ja-en", "en-ja"] if shipped_model("ja-en") is not None else ["en-ja"]
translators = {}
for name in names:
    translators[name] = load_translator(name, seconds=SECONDS)
    print(f"{name}: {translators[name].source}")

# %% [markdown]
# ## 1. 訳して、重みを見る
#
# `translate(..., return_attention=True)` の結果 (`Translation`) は、訳文と、最後の層の交差注意
# （ヘッドの平均）を表示します。行が出力トークン、列が入力トークンです。
#
# _English:_ a `Translation` from `translate(..., return_attention=True)` shows the output and the
# last layer's cross-attention (mean over heads): rows are output tokens, columns source tokens.

# %%
REAL = {
    "ja-en": ["私は毎朝コーヒーを飲みます。", "兄は東京に住んでいる。"],
    "en-ja": ["He goes to school by bus.", "She borrowed a book from the library yesterday."],
}
NUMBERS = {
    "ja-en": ["三十四万二千", "二千五百万六百"],
    "en-ja": ["three hundred forty-two thousand", "twenty million five hundred six"],
}
results = {}
for name, loaded in translators.items():
    sentences = REAL[name] if loaded.source.startswith("shipped") else NUMBERS[name]
    results[name] = loaded.model.translate(sentences, return_attention=True)
    for translation in results[name]:
        display(translation)

# %% [markdown]
# ## 2. 層とヘッドごとに
#
# `cross_attention` の形は `(L, H, T, S)`（層、ヘッド、出力、入力）です。`plot_attention_grid` は全部を
# 一度に描きます。ヘッドによって見方が違い、平均では消えてしまう鋭い対応が一つのヘッドに現れることが
# あります。
#
# _English:_ `cross_attention` has shape `(L, H, T, S)` (layers, heads, output, source);
# `plot_attention_grid` draws all of it. Heads differ, and a sharp alignment averaged away in the
# mean may show in a single head.

# %%
name = names[0]
first = results[name][0]
print(first.source, "→", first.text, "| cross_attention", tuple(first.cross_attention.shape))
viz.plot_attention_grid(
    first.cross_attention, first.src_tokens, first.tgt_tokens, title=f"{first.source} → {first.text}"
)

# %%
last = first.cross_attention[-1]  # (H, T, S)
sharpness = last.max(-1).values.mean(-1)  # (H,): 各行の最大の重みの平均 / mean of each row's largest weight
head = int(sharpness.argmax())
print("最後の層のヘッドごとの鋭さ / sharpness per head:", [round(x, 2) for x in sharpness.tolist()])
viz.plot_attention(
    last[head], first.src_tokens, first.tgt_tokens, title=f"最後の層・ヘッド {head} / last layer, head {head}"
)

# %% [markdown]
# ## 3. 読み方の注意
#
# - 語順の違う言語の間では、対応は対角線になりません（日本語の動詞は文末、英語では主語の次）。
#   数の場合、英語は千ごと、日本語は万ごとに区切るので、一つの漢字が英語の二語にまたがることがあります。
# - 終わりの記号 `</s>` の行や、句読点に重みが集まることがあります。見るべき相手がないときの置き場です。
# - 重みは「どこから情報を取ったか」の手がかりで、単語の対訳表そのものではありません。
#
# _English:_ between languages of different word order the alignment is not a diagonal (the
# Japanese verb comes last); numbers group by thousands in English and by ten-thousands in
# Japanese, so one kanji may span two English words. The end token's row and punctuation often
# collect weight when there is nothing in particular to look at. The weights hint where
# information came from; they are not a word-by-word dictionary.

# %% [markdown]
# ## 練習問題 / Exercises
#
# 1. ソフトな重みから「硬い」対応を作る関数 `hard_alignment(weights, src_tokens, tgt_tokens)` を書いて
#    ください。各出力トークンに、最も重みの大きい入力トークンを組にして返します（`(T, S)` → `T` 組）。
# 2. （試す問題）上の訳の最後の層の平均で対応を作り、どの組が正しい対訳になっているか数えてください。
#    ヘッドを一つ選んだ場合と比べてどうでしょう？
#
# _English:_ (1) write `hard_alignment(weights, src_tokens, tgt_tokens)`, pairing every output
# token with the source token it weighs most (`(T, S)` → `T` pairs). (2) (to try) build the
# alignment of the translations above from the last layer's mean and count the pairs that are
# right; compare with a single head.


# %%
def hard_alignment(weights, src_tokens, tgt_tokens):
    # ここに書く / your code here
    raise NotImplementedError


# %%
check("hard_alignment", hard_alignment)

# %% tags=["solution"] jupyter={"source_hidden": true, "outputs_hidden": true}
# 解答例（開くと見えます）/ model solution (expand to see)
show_solution("hard_alignment")

# %%
import solutions  # noqa: E402

for target, source in solutions.hard_alignment(first.cross_attention[-1].mean(0), first.src_tokens, first.tgt_tokens):
    print(f"{target:>8} ← {source}")
