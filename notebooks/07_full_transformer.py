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
# # 07 Transformer 全体を部品から組み立てる
#
# "Attention Is All You Need" のエンコーダ・デコーダを、attnlab の部品（`EncoderBlock`, `DecoderBlock`,
# 位置エンコーディング）から 40 行ほどで組み立てます。できたものを `attnlab.models.transformer.Transformer` と
# 同じ重みで比べ、出力とすべての注意の重みが一致することを確かめます。最後に小さな課題で学習させ、
# 自分の（毎回全部を計算し直す）貪欲デコードと attnlab の（キーとバリューをキャッシュする）デコードが
# 同じ答えを出すことを見ます。
#
# チュートリアル 001 との対応: 「まとめと発展的学習」の実践プロジェクト「完全な Transformer モデルを実装する」
# にあたります。中のマルチヘッド注意は、03 で直した形（`transpose(1, 2)` あり）です。

# %% [markdown]
# <details><summary>English summary (英語の要約)</summary>
#
# The paper's encoder–decoder assembled from attnlab's blocks and checked against attnlab's
# `Transformer` with copied weights, on a batch whose second sentence is padded (its padded
# columns get weight 0, shown for that sentence); trained for a few hundred steps to reverse digits;
# our greedy decoding against attnlab's cached one; the source–target attention of a reversal.
# Exercises at the end, each with a collapsed answer.
# </details>

# %%
import math

import torch
import torch.nn.functional as F
from helpers import check, show_solution
from torch import nn

from attnlab import viz
from attnlab.decode import greedy_decode
from attnlab.layers import DecoderBlock, EncoderBlock
from attnlab.models.transformer import Transformer, TransformerConfig
from attnlab.positional import SinusoidalPositionalEncoding

viz.display_options.lang = "ja"


# %% [markdown]
# ## 1. 組み立てる
#
# - 埋め込み × √D + 位置エンコーディング（論文 §3.4, §3.5）。
# - エンコーダ: 自己注意 → フィードフォワード層、それぞれ残差接続と層正規化（`EncoderBlock`）を N 段。
# - デコーダ: 先を隠す工夫つきの自己注意 → ソース・ターゲット注意（キーとバリューはエンコーダの出力）→
#   フィードフォワード層（`DecoderBlock`）を N 段。
# - 出力: 線形層で語彙のロジットに。その重み行列は出力側の埋め込みと共有します（§3.4）。
#
# 部品の名前を attnlab のモデルと同じにしておくと、`state_dict` がそのまま写せます。


# %%
class MyTransformer(nn.Module):
    """論文のエンコーダ・デコーダ（post-norm）を attnlab の部品で。"""

    def __init__(self, vocab: int, d_model: int, heads: int, layers: int, d_ff: int, pad_id: int = 0) -> None:
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        self.src_embed = nn.Embedding(vocab, d_model, padding_idx=pad_id)
        self.tgt_embed = nn.Embedding(vocab, d_model, padding_idx=pad_id)
        self.positions = SinusoidalPositionalEncoding(d_model)
        self.encoder = nn.ModuleList(EncoderBlock(d_model, heads, d_ff, norm="post") for _ in range(layers))
        self.decoder = nn.ModuleList(DecoderBlock(d_model, heads, d_ff, norm="post") for _ in range(layers))
        self.out_proj = nn.Linear(d_model, vocab, bias=False)
        self.out_proj.weight = self.tgt_embed.weight  # 共有（§3.4）: 語彙の表を一つで済ませる

    def embed(self, embedding: nn.Embedding, tokens):
        return self.positions(embedding(tokens) * math.sqrt(self.d_model))  # (B, L, D)

    def forward(self, src, tgt_in):
        """src (B, S), tgt_in (B, T) → ロジット (B, T, V) と、全層の注意の重み。"""
        src_mask, tgt_mask = src != self.pad_id, tgt_in != self.pad_id  # True = 本物のトークン
        x, encoder_maps = self.embed(self.src_embed, src), []
        for block in self.encoder:
            x, weights, _ = block(x, key_padding_mask=src_mask, need_weights=True)
            encoder_maps.append(weights)  # (B, H, S, S)
        y, decoder_maps, cross_maps = self.embed(self.tgt_embed, tgt_in), [], []
        for block in self.decoder:
            y, self_w, cross_w = block(
                y, x, memory_padding_mask=src_mask, target_padding_mask=tgt_mask, need_weights=True
            )
            decoder_maps.append(self_w)  # (B, H, T, T), 先を隠す工夫つき
            cross_maps.append(cross_w)  # (B, H, T, S)
        return self.out_proj(y), {"encoder": encoder_maps, "decoder": decoder_maps, "cross": cross_maps}


# %% [markdown]
# ## 2. attnlab のモデルと比べる
#
# 同じ大きさの `Transformer`（論文どおりの post-norm、ドロップアウトなし）を作り、その重みを写して、
# パディングを含むバッチで比べます。

# %%
VOCAB, PAD, BOS, EOS = 13, 0, 1, 2  # 0 = パディング, 1 = 開始, 2 = 終わり, 3…12 = 数字 0…9
config = TransformerConfig(
    src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, d_model=64, n_heads=4, n_encoder_layers=2, n_decoder_layers=2,
    d_ff=128, dropout=0.0, norm="post", tie_output=True, pad_id=PAD,
)  # fmt: skip
torch.manual_seed(0)
reference = Transformer(config).eval()
mine = MyTransformer(VOCAB, d_model=64, heads=4, layers=2, d_ff=128).eval()
loaded = mine.load_state_dict(reference.state_dict())  # 名前が同じなので、そのまま写せる
assert not loaded.missing_keys and not loaded.unexpected_keys
print(f"重みを写しました: {len(reference.state_dict())} 個のテンソルの名前がすべて一致（足りない名前も余分な名前もなし）")

src = torch.tensor([[5, 6, 7, 8, 2], [9, 4, 2, 0, 0]])  # (B, S), 二つ目の文は後ろ二つがパディング
tgt_in = torch.tensor([[1, 8, 7, 6, 5], [1, 4, 9, 0, 0]])  # (B, T)
with torch.no_grad():
    logits, maps = mine(src, tgt_in)
    expected = reference(src, tgt_in, need_weights=True)
torch.testing.assert_close(logits, expected.logits)
for kind in ("encoder", "decoder", "cross"):
    for layer, (ours, theirs) in enumerate(zip(maps[kind], expected.attentions[kind])):
        torch.testing.assert_close(ours, theirs, msg=lambda m, k=kind, i=layer: f"{k} 第{i + 1}層: {m}")
print("ロジットと、3 種類 × 2 層の注意の重みがすべて一致")

# %% [markdown]
# パディングのある 2 つ目の文（`src[1]`）で、注意の重みを見ます。原文の最後の二つ（列 3, 4）と
# 訳文の最後の二つはパディングです。

# %%
name = {PAD: "[PAD]", BOS: "[BOS]", EOS: "[EOS]"}
label = lambda ids: [name.get(i, str(i - 3)) for i in ids]  # noqa: E731  トークン番号 → 数字 0…9 か記号
src_labels, tgt_labels = label(src[1].tolist()), label(tgt_in[1].tolist())
padded = src[1] == PAD
assert padded.any() and all(w[1][..., padded].abs().max() == 0 for w in maps["cross"])  # 下の文の主張
viz.plot_attention_grid(
    maps["cross"][-1][1:2], src_labels, tgt_labels, layer_names=[1],
    title="ソース・ターゲット注意 第2層（2 つ目の文、パディングつき）",
)  # fmt: skip

# %% [markdown]
# **図の見どころ:** どのヘッドでも、原文のパディングの列 [PAD] は 0（いちばん暗い色）で、重みは本物の三つの
# トークンだけに配られています。

# %%
viz.plot_attention_grid(
    maps["decoder"][-1][1:2], tgt_labels, tgt_labels, layer_names=[1],
    title="デコーダの自己注意 第2層（2 つ目の文）: 先を隠す工夫とパディング",
)  # fmt: skip

# %% [markdown]
# **図の見どころ:** 対角線より右上（先のトークン）と、[PAD] の列が 0 です。[PAD] の行にもどこかへの重みが
# ありますが、その行の出力は損失から外されるので、学習には効きません。

# %% [markdown]
# ## 3. 小さな課題で学習する: 数字の列を逆順に
#
# 数字 4〜8 個の列を逆順にする課題で、自分のモデルを `STEPS` 回の更新だけ学習させます。デコーダの入力は
# 「開始記号 + 正解を一つずらしたもの」（teacher forcing）、損失はパディングを除いた交差エントロピーです。

# %%
STEPS = 340  # 更新の回数（CI の予算）。時計ではなく回数で止めるので、どの機械でも同じ学習になる


def batch(n: int, generator: torch.Generator):
    lengths = torch.randint(4, 9, (n,), generator=generator)
    S = int(lengths.max()) + 1
    src = torch.full((n, S), PAD)
    tgt_in, labels = torch.full((n, S), PAD), torch.full((n, S), PAD)
    for row, length in enumerate(lengths.tolist()):
        digits = torch.randint(3, 13, (length,), generator=generator)
        src[row, : length + 1] = torch.cat([digits, torch.tensor([EOS])])
        answer = torch.cat([digits.flip(0), torch.tensor([EOS])])  # 逆順 + 終わりの記号
        labels[row, : length + 1] = answer
        tgt_in[row, : length + 1] = torch.cat([torch.tensor([BOS]), answer[:-1]])
    return src, tgt_in, labels


generator = torch.Generator().manual_seed(0)
optimizer = torch.optim.Adam(mine.parameters(), lr=1e-3)
mine.train()
losses = []
for _ in range(STEPS):
    src_b, tgt_b, labels_b = batch(64, generator)
    logits, _ = mine(src_b, tgt_b)
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), labels_b.reshape(-1), ignore_index=PAD)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
mine.eval()
print(f"{STEPS} 回の更新で、損失 {losses[0]:.2f} → {sum(losses[-20:]) / 20:.3f}（最後の 20 回の平均）")
print(f"最初の 10 回の平均 {sum(losses[:10]) / 10:.2f}、次の 90 回の平均 {sum(losses[10:100]) / 90:.2f}、"
      f"最後の 100 回の平均 {sum(losses[-100:]) / 100:.3f}")  # fmt: skip
viz.plot_curves(
    {"学習の損失": (list(range(1, STEPS + 1)), losses)},
    xlabel="更新の回数",
    ylabel="損失（交差エントロピー）",
    title="逆順の課題の学習",
    logy=True,
)

# %% [markdown]
# **図の見どころ:** 縦軸は対数です。損失は最初の数回で急に下がり、そのあとは揺れながら、おおむね直線に沿って
# （対数の軸で直線なので、一定の割合で）下がります。途中で一時的に跳ね上がることがあり（学習率を下げない Adam では
# 珍しくありません）、そのあとはまた下がり続けます。どのくらい下がったかは、上の二行の平均の数で確かめてください。

# %% [markdown]
# ## 4. 二つのデコードを比べる
#
# 自分のモデルでの貪欲デコードは、毎回それまでの出力全体をデコーダに通し直します。attnlab の
# `greedy_decode` は、エンコーダの出力を一度だけ射影し、デコーダの自己注意のキーとバリューを
# キャッシュして、新しい位置だけを計算します。学習した重みを attnlab のモデルに写して、同じ答えに
# なることを確かめます。


# %%
@torch.no_grad()
def my_greedy(model: MyTransformer, src, max_len: int = 12) -> list[list[int]]:
    out = torch.full((src.shape[0], 1), BOS)
    for _ in range(max_len):
        logits, _ = model(src, out)
        out = torch.cat([out, logits[:, -1].argmax(-1, keepdim=True)], dim=1)  # いちばん確からしい次のトークンを足す
    answers = []
    for row in out[:, 1:].tolist():
        answers.append(row[: row.index(EOS)] if EOS in row else row)
    return answers


reference.load_state_dict(mine.state_dict())
test_src, _, test_labels = batch(200, torch.Generator().manual_seed(1))
ours = my_greedy(mine, test_src)
cached = [h.tokens for h in greedy_decode(reference, test_src, bos_id=BOS, eos_id=EOS, pad_id=PAD, max_len=12)]
truth = [[t for t in row if t not in (PAD, EOS)] for row in test_labels.tolist()]
print("二つのデコードが一致した文:", sum(a == b for a, b in zip(ours, cached)), "/ 200")
print("正しく逆順にできた文:", sum(a == t for a, t in zip(ours, truth)), "/ 200")
digits = lambda ids: " ".join(str(i - 3) for i in ids)  # noqa: E731
print("例:", digits(test_src[0].tolist()[: len(truth[0])]), "→", digits(ours[0]))

# %% [markdown]
# 逆順の課題では、ソース・ターゲット注意が「反対向きの対角線」を描くはずです。出力の i 番目の数字は、
# 入力の後ろから i 番目を見ればよいからです。テストの最初の例で確かめます。

# %%
with torch.no_grad():
    row = test_src[:1, : len(truth[0]) + 1]
    answer = torch.tensor([[BOS] + ours[0]])
    _, maps = mine(row, answer)
labels_src = label(row[0].tolist())
labels_out = label(ours[0]) + ["[EOS]"]
cross = maps["cross"][-1][0].mean(0)  # (T, S): 最後の層、ヘッドの平均
n = len(ours[0])
heaviest = [int(cross[i].argmax()) for i in range(n)]  # 数字の行ごとに、いちばん重い列
mirrored = sum(j == n - 1 - i for i, j in enumerate(heaviest))
print(f"数字の行 {n} 行のうち {mirrored} 行で、いちばん重い列が反対側の位置（上から i 番目の行なら、原文の後ろから i 番目）")
for i, j in enumerate(heaviest):
    if j != n - 1 - i:
        print(f"  反対側でない行: {labels_out[i]} の行 → いちばん重いのは原文の {labels_src[j]}（反対側は {labels_src[n - 1 - i]}）")
viz.plot_attention(cross, labels_src, labels_out[: answer.shape[1]], title="最後の層・ヘッドの平均")

# %% [markdown]
# **図の見どころ:** 各行でいちばん明るいマスが右上から左下への斜めの線（反対向きの対角線）に乗っていれば、その
# 訳の数字は原文の反対側の数字を見て書かれています。乗っている行の数と、乗っていない行がどこを見たかは、上に
# 印刷したとおりです。乗っていない行でも答えが正しいことはあります（ヘッドの平均は、一つのヘッドの鋭い対応を
# 薄めます。各位置の状態は、自己注意ですでに隣の位置の情報も混ぜています）。

# %% [markdown]
# ## 練習問題
#
# 1. 正弦波の位置エンコーディングの表を手で作ってください（論文 §3.5）: 偶数番目の列は
#    `sin(pos / 10000^(2i/D))`、奇数番目は同じ角度の `cos`。`check` が attnlab の `SinusoidalPositionalEncoding` と比べます。

# %%
def sinusoidal_table(length, d_model):
    # ここに書く
    raise NotImplementedError


# %%
# 合格すればあなたの関数が、まだなら解答例が、この先のセルで使われます
table_fn = check("sinusoidal_table", sinusoidal_table)

# %% tags=["solution"] jupyter={"source_hidden": true, "outputs_hidden": true}
# 解答例（開くと見えます）
show_solution("sinusoidal_table")

# %% [markdown]
# その関数で、このノートブックのモデルの幅（64）の表を 32 位置分作り、`MyTransformer` が使っている表と比べます。

# %%
table = table_fn(32, 64)
torch.testing.assert_close(table, mine.positions.table[:32])
print("MyTransformer の位置エンコーディングの表と一致:", tuple(table.shape))

# %% [markdown]
# 2. （試す問題）`MyTransformer` を pre-norm（`norm="pre"` と、エンコーダとデコーダそれぞれの最後の層正規化）
#    に書き換え、attnlab の `TransformerConfig(norm="pre")` と一致させてください。

# %% [markdown]
# <details><summary>答えの例</summary>
#
# ブロックを `EncoderBlock(..., norm="pre")`、`DecoderBlock(..., norm="pre")` で作り、pre-norm では各ブロックの
# 出力が正規化されないまま積み重なるので、エンコーダの最後とデコーダの最後に `nn.LayerNorm(d_model)` を
# 一つずつ足します。`forward` では、エンコーダのループのあとで `x = self.encoder_norm(x)`、デコーダの
# ループのあとで `y = self.decoder_norm(y)` とします。一致させるには、その二つの名前を attnlab のモデルと
# 同じにします（`print(Transformer(TransformerConfig(..., norm="pre")).state_dict().keys())` で名前を
# 確かめ、`load_state_dict` の結果の `missing_keys`（足りない名前）と `unexpected_keys`（余分な名前）が
# どちらも空になるまで合わせます。2 節のセルと同じ確かめ方です）。そのうえで 2 節と同じ `assert_close` を
# 実行します。名前が違うままだと、その二つのリストに名前が並ぶので、それが手がかりになります。
# </details>
