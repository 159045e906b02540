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
# # 05 演習 2: 翻訳モデルのソース・ターゲット注意をヒートマップで見る
#
# エンコーダ・デコーダの翻訳モデルでは、デコーダが訳文の各トークンを書くとき、ソース・ターゲット注意で
# 原文のどこを見るかを決めます。その注意の重みを「訳文のトークン × 原文のトークン」の表にしたのが
# ヒートマップです。
#
# attnlab に同梱の日英・英日翻訳モデル（`ja-en`, `en-ja`）を名前で読み込みます。このインストールに
# 同梱モデルがなければ、代わりに生成データ（英語の数詞 ⇄ 漢数字）で小さなモデルを `STEPS` 回の更新だけ
# 学習します。下の出力に、どちらを使ったかが表示されます。
#
# チュートリアル 001 との対応: 「演習 2: 注意重みの可視化」の `plot_attention` を 3 節で本物の重みに使い、
# その使用例の `torch.rand(7, 6)` が注意の重みになっていない理由を確かめます。5 節は「なぜ注意機構が必要なのか」の
# 長距離依存を、注意のない RNN と注意のある RNN の比べ合いで見ます。

# %% [markdown]
# <details><summary>English summary (英語の要約)</summary>
#
# The source–target (cross-) attention of attnlab's shipped ja⇄en translators (or a stand-in
# trained for a few hundred steps where this install has none): the last layer's mean as a table
# or heatmap, then each layer's heads in its own figure (§1–2); the tutorial's `plot_attention`
# (exercise 2) drawn with these real weights, and why its example's `torch.rand(7, 6)` is not
# attention (rows do not sum to 1) (§3); how to read the maps, including the `[EOS]` row, whose
# heaviest source tokens are printed (§4); why source–target attention exists: the two shipped
# RNN translators of `attnlab experiment bottleneck`, without attention (one fixed-length
# vector) and with additive attention, scored by source length (exact match), with a
# prediction asked first, and the attention RNN's alignment on a long input (§5). Exercises at
# the end, each with a collapsed answer.
# </details>

# %%
import re

import torch
from helpers import check, load_translator, shipped_model, show_solution, show_translation

from attnlab import viz

viz.display_options.lang = "ja"

STEPS = 900  # 同梱モデルがないときに代わりのモデルを学習する更新の回数（開発機で約 30 秒）
names = ["ja-en", "en-ja"] if shipped_model("ja-en") is not None else ["en-ja"]
translators = {}
for name in names:
    translators[name] = load_translator(name, steps=STEPS)
    print(f"{name}: {translators[name].source}")

# %% [markdown]
# ## 1. 訳して、注意の重みを見る
#
# `translate(..., return_attention=True)` の結果 (`Translation`) には、訳文と、全層・全ヘッドの
# ソース・ターゲット注意 `cross_attention` が入っています。下では最後の層のヘッドの平均を表にします
# （行が訳文のトークン、列が原文のトークンで、各行の和は 1 です）。

# %%
REAL = {
    "ja-en": ["私は毎朝コーヒーを飲みます。", "兄は東京に住んでいる。"],
    "en-ja": ["He goes to school by bus.", "She borrowed a book from the library yesterday."],
}
NUMBERS = {
    "ja-en": ["三十四万二千", "二千五百万六百"],
    "en-ja": ["three hundred forty-two thousand", "twenty million five hundred six"],
}
shipped = {name: loaded.shipped for name, loaded in translators.items()}
results = {}
for name, loaded in translators.items():
    sentences = REAL[name] if shipped[name] else NUMBERS[name]
    results[name] = loaded.model.translate(sentences, return_attention=True)
    for translation in results[name]:
        show_translation(translation)

# %% [markdown]
# 表の濃い色のマスが、その訳語を書くときにいちばん見た原文のトークンです。
#
# トークンの頭の「▁」は、そのトークンの前に空白がある（新しい語の始まりである）ことを表す印です（BPE という
# 分け方のトークン）。"▁book" は「空白 + book」、印のないトークンは前のトークンの続き（語の途中）です。空白で
# 語を区切らない日本語の文では、文の最初のトークンにだけ付きます（"▁私は" や、一つだけの "▁"）。

# %% [markdown]
# ## 2. 層とヘッドごとに
#
# `cross_attention` の形は `(L, H, T, S)`（層、ヘッド、訳文、原文）です。一つの図に一つの層を描きます。
# ヘッドによって見方が違い、平均では薄まってしまう鋭い対応が一つのヘッドに現れることがあります。

# %%
name = names[0]
first = results[name][0]
print(first.source, "→", first.text, "| cross_attention", tuple(first.cross_attention.shape))
figures = [
    viz.plot_attention_grid(
        first.cross_attention[layer : layer + 1], first.src_tokens, first.tgt_tokens, layer_names=[layer],
        title=f"ソース・ターゲット注意 第{layer + 1}層: {first.source}",
    )
    for layer in range(first.cross_attention.shape[0])
]  # fmt: skip
figures[0]

# %% [markdown]
# **図の見どころ:** 各パネルの行ごとに、いちばん明るいマスが、その訳語を書くときに最も見た原文のトークンです。
# 同じ行でも、ヘッドによって明るいマスの位置が違うことがあります。

# %%
# 層が一つだけのモデル（代わりのモデル）では、上の図がそのまま最後の層なので、同じ図を二度は描かない
figures[-1] if len(figures) > 1 else print("このモデルの層は一つだけです。上の図が最後の層です。")

# %% [markdown]
# **図の見どころ:** 最初の層の図と同じ行を見比べてください。層が変わると、同じ訳語でも見る相手が変わることが
# あります。1 節の表は、この最後の層のヘッドをすべて平均したものです（途中の層は `figures[1]` などで見られます）。

# %%
last = first.cross_attention[-1]  # (H, T, S)
sharpness = last.max(-1).values.mean(-1)  # (H,): 各行の最大の重みの、行についての平均
head = int(sharpness.argmax())
print("最後の層のヘッドごとの鋭さ（各行の最大の重みの平均）:", [round(x, 2) for x in sharpness.tolist()])
viz.plot_attention(last[head], first.src_tokens, first.tgt_tokens, title=f"最後の層・いちばん鋭いヘッド（ヘッド{head + 1}）")

# %% [markdown]
# **図の見どころ:** 一つのヘッドだけを見ると、平均の表よりも一つのマスに重みが集まった行が増えます。

# %% [markdown]
# ## 3. チュートリアルの `plot_attention` を本物の重みで
#
# チュートリアルの演習 2 は、seaborn のヒートマップで重みを描く `plot_attention(attention_weights,
# source_tokens, target_tokens)` です。この環境には seaborn がないので、同じ図を matplotlib の `imshow` で
# 描きます（色の地図 "YlGnBu" と図の大きさ 10 × 8 インチはチュートリアルのまま、ラベルは日本語）。
# 使用例の `torch.rand(7, 6)` の代わりに、1 節の訳の本物の重みを渡します。

# %%
def plot_attention(attention_weights, source_tokens, target_tokens):
    """チュートリアルの plot_attention と同じ図（seaborn の代わりに matplotlib）。"""
    fig = viz.new_figure(10, 8)
    ax = fig.add_subplot()
    image = ax.imshow(attention_weights, cmap="YlGnBu", aspect="auto")
    ax.set_xticks(range(len(source_tokens)), source_tokens)
    for tick in ax.get_xticklabels():  # 英語のトークンは縦に回して幅に収め、日本語は横書きのまま（回すと読めない）
        tick.set_rotation(0 if re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", tick.get_text()) else 90)
    ax.set_yticks(range(len(target_tokens)), target_tokens)
    ax.set_xlabel("原文のトークン（キー）")
    ax.set_ylabel("訳文のトークン（クエリ）")
    ax.set_title("注意の重みの可視化")
    fig.colorbar(image, ax=ax)
    return viz.Plot(fig)  # plt.show() の代わりに、図をノートブックに返す


plot_attention(first.cross_attention[-1].mean(0), first.src_tokens, first.tgt_tokens)

# %% [markdown]
# **図の見どころ:** 1 節の表と同じ数が、色の濃さで描かれています（濃い青ほど重い）。
#
# チュートリアルの使用例は `attention = torch.rand(7, 6)` を「模擬的な注意重み」として描きます。しかし
# 注意の重みは各行（一つのクエリ）の和が 1 になるはずで、`torch.rand` の行の和は 1 になりません。
# 模擬の重みを作るなら、乱数のスコアにソフトマックスをかけます。

# %%
g = torch.Generator().manual_seed(0)
fake = torch.rand(7, 6, generator=g)
softened = torch.softmax(torch.randn(7, 6, generator=g), dim=-1)
print("torch.rand(7, 6) の行の和:", [round(x, 2) for x in fake.sum(-1).tolist()])
print("softmax(乱数のスコア) の行の和:", [round(x, 2) for x in softened.sum(-1).tolist()])
print("本物の重み（1 節）の行の和:", [round(x, 2) for x in first.cross_attention[-1].mean(0).sum(-1).tolist()])

# %% [markdown]
# **確かめのセル（チェック）:** `torch.rand` の行の和は 1 でなく、ソフトマックスと本物の重みの行の和は 1 であることを確かめます。

# %%
assert not torch.allclose(fake.sum(-1), torch.ones(7)) and torch.allclose(softened.sum(-1), torch.ones(7))
real_sums = first.cross_attention[-1].float().mean(0).sum(-1)
assert torch.allclose(real_sums, torch.ones_like(real_sums), atol=1e-3)
print("確かめました: torch.rand の行の和は 1 でない、ソフトマックスと本物の重みの行の和は 1")

# %% [markdown]
# ## 4. 読み方の注意
#
# - 語順の違う言語の間では、対応は対角線になりません（日本語の動詞は文末、英語では主語の次）。
#   同梱モデルがないときの数の課題では、英語は千ごと、日本語は万ごとに区切るので、一つの漢字が
#   英語の二語にまたがることがあります。
# - 終わりの記号 `[EOS]` の行には、対訳になる原文のトークンがありません。下に、1 節の各訳の `[EOS]` の行で
#   重みの大きい三つを印刷します。どこかに重みが集まっていても、それは訳語の対応ではなく、書き終えるときに
#   どこから情報を取ったかの手がかりにすぎません。
# - 注意の重みは「どこから情報を取ったか」の手がかりで、単語の対訳表そのものではありません。

# %%
for translations in results.values():
    for translation in translations:
        if translation.tgt_tokens[-1] != "[EOS]":  # 長さの上限で切れた訳には [EOS] の行がない
            continue
        row = translation.cross_attention[-1].float().mean(0)[-1]  # (S,): 最後の層・ヘッドの平均の、最後の行
        top = row.topk(min(3, row.shape[0]))
        print(f"{translation.source} → {translation.tgt_tokens[-1]} の行:",
              ", ".join(f"{translation.src_tokens[j]} {w:.2f}" for w, j in zip(top.values, top.indices)))  # fmt: skip

# %% [markdown]
# ## 5. なぜソース・ターゲット注意が要るのか: 注意のない RNN と比べる
#
# Transformer より前の翻訳モデル（RNN のエンコーダ・デコーダ）は、原文全体を読み終えたエンコーダの最後の
# 状態 **一本の固定長のベクトル** だけをデコーダに渡していました。原文が長くなるほど、その一本に全部を
# 詰め込むのは難しくなります（ボトルネック）。離れた位置の情報が要る **長距離依存** ほど失われやすいのです。
# Bahdanau ら（2015）は、デコーダが毎ステップ、エンコーダの **すべての** 状態に加法注意をかけられるようにして、
# この問題を解きました。これがソース・ターゲット注意の始まりです。
#
# attnlab は、この比較の実験（`attnlab experiment bottleneck`）で学習した RNN の翻訳モデルを二つ同梱しています。
# どちらも同じ大きさの GRU のエンコーダ・デコーダで、違いは注意の有無だけです。課題は英語の数の並び
# （"forty-seven thousand ninety-three and four hundred five and nine"）を漢数字（「四万七千九十三、四百五、九」）に
# することで、並べる数が多いほど原文が長くなります。学習に使っていないテストの例を、原文の語の数で分けて、
# 訳がまるごと正しい割合（完全一致）を数えます。
#
# **予想してから実行:** 注意のないモデルの完全一致の割合は、原文が長くなるとどう変わるでしょう？ 30 語以上の
# 原文ではおよそ何 % でしょう？ 注意のあるモデルはどうでしょう？

# %%
from attnlab.build_assets import BUILDS  # noqa: E402
from attnlab.data.tasks import make_splits  # noqa: E402
from attnlab.loading import load_model  # noqa: E402

rnn_models = {label: load_model(shipped_model(name), family="translate") for label, name in (("注意なし", "rnn-plain"), ("注意あり", "rnn-attention"))}
rnn_build = BUILDS["rnn-attention"]  # 二つのモデルを作った実験の設定（データの種類・数・種）
settings = rnn_build.settings()
test_pairs = make_splits(settings.task, rnn_build.n_train, rnn_build.n_valid, rnn_build.n_test, seed=rnn_build.seed).test
BUCKETS = [(1, 9), (10, 19), (20, 29), (30, 99)]  # 原文の語の数の範囲
PER_BUCKET = 24  # 範囲ごとに数えるテストの例の数（時間の予算）
chosen_pairs = []
for low, high in BUCKETS:
    chosen_pairs += [p for p in test_pairs if low <= len(p[0].split()) <= high][:PER_BUCKET]
exact = {}
for label, model in rnn_models.items():
    outputs = model.translate([src for src, _ in chosen_pairs])
    exact[label] = {}
    for low, high in BUCKETS:
        hits = [o.text == tgt for (src, tgt), o in zip(chosen_pairs, outputs) if low <= len(src.split()) <= high]
        exact[label][f"{low}〜{high}語" if high < 99 else f"{low}語以上"] = sum(hits) / len(hits)
    print(label + ":", ", ".join(f"{k} {v:.0%}" for k, v in exact[label].items()), f"（範囲ごとに {PER_BUCKET} 例）")
viz.plot_bars(exact, ylabel="完全一致の割合", xlabel="原文の長さ（語の数）", title="注意のない RNN と、ある RNN: 原文の長さごとの完全一致")

# %% [markdown]
# **図の見どころ:** 注意のない RNN（一本のベクトルだけを渡す）は、原文が長くなるほど完全一致が減り、上に
# 印刷したとおり、長い原文ではほとんど、あるいはまったく正しく訳せません。注意のある RNN は、同じ大きさで
# どの長さでもほぼ正しく訳します。デコーダが訳の各文字を書くときに、原文の中の今訳している数のあたりを
# 直接見られるからです。次の図で、その見ている場所を描きます。

# %%
long_source, long_target = next(p for p in test_pairs if len(p[0].split()) >= 30)
aligned = rnn_models["注意あり"].translate([long_source], return_attention=True)[0]
plain_text = rnn_models["注意なし"].translate([long_source])[0].text
print("原文:", long_source)
print("正解:", long_target)
print("注意あり:", aligned.text, "（正解）" if aligned.text == long_target else "（正解と違う）")
print("注意なし:", plain_text, "（正解）" if plain_text == long_target else "（正解と違う）")
print("注意ありの重みの形 (層, ヘッド, 訳文, 原文):", tuple(aligned.cross_attention.shape))
viz.plot_attention(aligned.cross_attention[0, 0], aligned.src_tokens, aligned.tgt_tokens, title="注意ありの RNN の加法注意（長い原文）")

# %% [markdown]
# **図の見どころ:** 行が訳文の文字（クエリ）、列が原文のトークン（キー）です。英語と漢数字では語順がほぼ同じ
# なので、明るいマスは左上から右下へ進みます。訳の文字を書くたびに、デコーダは原文の今の位置のあたりを
# 見ています。注意のないモデルには、この図にあたるものがありません（デコーダが見られるのは一本のベクトルだけ）。

# %% [markdown]
# **確かめのセル（チェック）:** 上の二つの図の文（注意なしは長いほど悪くなり、30 語以上ではほぼ訳せない。
# 注意ありはどの長さでもほぼ正しい）を確かめます。

# %%
plain_scores, attention_scores = list(exact["注意なし"].values()), list(exact["注意あり"].values())
assert plain_scores[-1] <= 0.1 and plain_scores[0] >= plain_scores[-1] + 0.5, plain_scores
assert min(attention_scores) >= 0.9, attention_scores
print("確かめました: 注意なしは最短の範囲より 50 ポイント以上低く 30 語以上で 10% 以下、注意ありはどの範囲も 90% 以上")

# %% [markdown]
# ## 練習問題
#
# 1. ソフトな重みから「硬い」対応を作る関数 `hard_alignment(weights, src_tokens, tgt_tokens)` を書いて
#    ください。各訳文のトークンに、最も重みの大きい原文のトークンを組にして返します（`(T, S)` → `T` 組）。

# %%
def hard_alignment(weights, src_tokens, tgt_tokens):
    # ここに書く
    raise NotImplementedError


# %%
# 合格すればあなたの関数が、まだなら解答例が、この先のセルで使われます
align = check("hard_alignment", hard_alignment)

# %% tags=["solution"] jupyter={"source_hidden": true, "outputs_hidden": true}
# 解答例（開くと見えます）
show_solution("hard_alignment")

# %% [markdown]
# その関数を、1 節にない新しい文の訳に使ってみます（1 節の訳で数えるのは、下の練習問題 2 です）。

# %%
NEW = {"ja-en": "猫は窓のそばで眠っている。", "en-ja": "The dog runs in the park."}
new_sentence = NEW[name] if shipped[name] else {"ja-en": "五千三百", "en-ja": "five thousand three hundred"}[name]
new = translators[name].model.translate([new_sentence], return_attention=True)[0]
print(new.source, "→", new.text)
for target, source in align(new.cross_attention[-1].mean(0), new.src_tokens, new.tgt_tokens):
    print(f"訳文 {target!r:>14} ← 原文 {source!r}")

# %% [markdown]
# 2. （試す問題）1 節の訳について、最後の層の平均で対応を作り、どの組が正しい対訳になっているか数えて
#    ください。ヘッドを一つ選んだ場合と比べてどうでしょう？

# %% [markdown]
# <details><summary>答えの例</summary>
#
# `for t in results[name]: align(t.cross_attention[-1].mean(0), t.src_tokens, t.tgt_tokens)` で平均の対応を、
# `t.cross_attention[-1][h]` で一つのヘッド h の対応を作り、組を一つずつ自分の目で判定して数えます。
# `[EOS]` の行と句読点だけのトークンは、対訳がないので数えません。数えるときの見方:
#
# - 内容語（名詞、動詞）は、平均でもたいてい正しい相手に付きます。一つのヘッドは、ある種類の語には
#   平均より正確でも、別の種類の語では外れることが多く、全体の正解数は平均と同じか少ないのがふつうです。
# - 日本語の助詞と英語の前置詞（「に」と in、「で」と by など）は一対一に対応しないので、正解の数え方
#   自体を決めておく必要があります。
# - 正しい組の割合が高くても、モデルがその対応を「使って」訳したとは限りません（4 節）。
# </details>
