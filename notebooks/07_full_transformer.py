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
# columns get weight 0, shown for that sentence); trained to reverse digits with the paper's
# warm-up and decay, gradient clipping and the best weights kept (a check cell asserts that at
# least 95% of 200 test sequences come out reversed, in fp32 or, with
# `ATTNLAB_NOTEBOOK_PRECISION=bf16`, bf16); our greedy decoding against attnlab's cached one;
# the source–target attention of a reversal.
# Exercises at the end, each with a collapsed answer.
# </details>

# %%
import copy
import math

import torch
import torch.nn.functional as F
from helpers import PRECISION, autocast, check, show_solution
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

    def forward(self, src, tgt_in, need_weights: bool = True):
        """src (B, S), tgt_in (B, T) → ロジット (B, T, V) と、全層の注意の重み（need_weights=False なら None の並び）。"""
        src_mask, tgt_mask = src != self.pad_id, tgt_in != self.pad_id  # True = 本物のトークン
        x, encoder_maps = self.embed(self.src_embed, src), []
        for block in self.encoder:
            x, weights, _ = block(x, key_padding_mask=src_mask, need_weights=need_weights)
            encoder_maps.append(weights)  # (B, H, S, S)
        y, decoder_maps, cross_maps = self.embed(self.tgt_embed, tgt_in), [], []
        for block in self.decoder:
            y, self_w, cross_w = block(
                y, x, memory_padding_mask=src_mask, target_padding_mask=tgt_mask, need_weights=need_weights
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
assert not loaded.missing_keys and not loaded.unexpected_keys, f"名前が合わない重み: {loaded}"
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
padded = src[1] == PAD  # 原文のパディングの列
viz.plot_attention_grid(
    maps["cross"][-1][1:2], src_labels, tgt_labels, layer_names=[1],
    title="ソース・ターゲット注意 第2層（2 つ目の文、パディングつき）",
)  # fmt: skip

# %% [markdown]
# **図の見どころ:** どのヘッドでも、原文のパディングの列 [PAD] は 0（いちばん暗い色）で、重みは本物の三つの
# トークンだけに配られています。

# %% [markdown]
# **確かめのセル（チェック）:** 上の文のとおり、どの層・どのヘッドでも、パディングの列の重みがちょうど 0 であることを確かめます。

# %%
assert padded.any() and all(w[1][..., padded].abs().max() == 0 for w in maps["cross"]), "パディングの列に重みがある"
print("ソース・ターゲット注意の 2 層 × 4 ヘッドで、パディングの列の重みはちょうど 0")

# %%
viz.plot_attention_grid(
    maps["decoder"][-1][1:2], tgt_labels, tgt_labels, layer_names=[1],
    title="デコーダの自己注意 第2層（2 つ目の文）: 先を隠す工夫とパディング",
    row_label="クエリ（見ている側）", column_label="キー（見られる側）",
)  # fmt: skip

# %% [markdown]
# **図の見どころ:** 対角線より右上（先のトークン）と、[PAD] の列が 0 です。[PAD] の行にもどこかへの重みが
# ありますが、その行の出力は損失から外されるので、学習には効きません。

# %% [markdown]
# ## 3. 小さな課題で学習する: 数字の列を逆順に
#
# 数字 4〜8 個の列を逆順にする課題で、自分のモデルを `STEPS` 回の更新だけ学習させます。デコーダの入力は
# 「開始記号 + 正解を一つずらしたもの」（teacher forcing）、損失はパディングを除いた交差エントロピーです。
#
# 学習率を一定にした Adam は、損失が十分小さくなったあとで急に跳ね上がり、戻らないことがあります（更新の
# 大きさが学習率で決まったままなので、鋭い谷の底で一歩が大きすぎるのです）。そこで論文（§5.3）と同じ三つの
# 工夫を入れます。
#
# - **ウォームアップと減衰:** 学習率を最初の `WARMUP` 回で 0 から `PEAK_LR` まで直線で上げ、そのあとは
#   更新の回数の平方根に反比例して下げます（Adam の β₂ = 0.98, ε = 10⁻⁹ も論文の値）。
# - **勾配のクリッピング:** 勾配全体の大きさ（ノルム）が 1 を超えたら 1 に縮め、一回の更新が飛びすぎないようにします。
# - **いちばんよい重みを残す:** `EVAL_EVERY` 回ごとに、学習に使わない 200 個の検証の列で正しく逆順にできた
#   割合を測り、いちばん高かったときの重みを最後に戻します。
#
# 学習の精度（数の細かさ）は `PRECISION` です。既定は fp32 で、環境変数 `ATTNLAB_NOTEBOOK_PRECISION=bf16` で
# 開くと、学習の一歩（順伝播と損失）を bfloat16 で計算します（重みは fp32 のまま。検証とデコードは fp32）。


# %%
STEPS = 600  # 更新の回数（CI の予算）。時計ではなく回数で止めるので、どの機械でも同じ学習になる
SEED = 0  # 初期値と学習のデータの順番の種（0 なら初期値は 2 節で比べた重みと同じ）
WARMUP, PEAK_LR = 40, 2e-3  # ウォームアップの回数と、そのときの学習率
EVAL_EVERY = 50  # 検証の正解率を測る間隔（更新の回数）
print("学習の精度:", PRECISION)


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


@torch.no_grad()
def my_greedy(model: MyTransformer, src, max_len: int = 10) -> list[list[int]]:
    """貪欲デコード: 毎回それまでの出力全体をデコーダに通し、いちばん確からしい次のトークンを足す。"""
    out = torch.full((src.shape[0], 1), BOS)
    for _ in range(max_len):
        logits, _ = model(src, out, need_weights=False)  # 重みは要らないので、速い計算の道を使う
        out = torch.cat([out, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    answers = []
    for row in out[:, 1:].tolist():
        answers.append(row[: row.index(EOS)] if EOS in row else row)
    return answers


def answers_of(labels) -> list[list[int]]:
    return [[t for t in row if t not in (PAD, EOS)] for row in labels.tolist()]


def reversed_share(model: MyTransformer, src, labels) -> float:
    """正しく逆順にできた列の割合（0〜1）。"""
    was_training = model.training
    model.eval()
    share = sum(a == t for a, t in zip(my_greedy(model, src), answers_of(labels))) / len(src)
    model.train(was_training)
    return share


valid_src, _, valid_labels = batch(200, torch.Generator().manual_seed(2))  # 検証用（学習にもテストにも使わない）
torch.manual_seed(SEED)
mine.load_state_dict(Transformer(config).state_dict())  # 種 SEED の初期値から始める
generator = torch.Generator().manual_seed(SEED)
optimizer = torch.optim.Adam(mine.parameters(), lr=PEAK_LR, betas=(0.9, 0.98), eps=1e-9)
# 論文の式 d^−0.5 · min(step^−0.5, step · warmup^−1.5) と同じ形で、ピークを PEAK_LR にしたもの
schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: min((i + 1) / WARMUP, math.sqrt(WARMUP / (i + 1))))
mine.train()
losses, evaluations, best = [], [], (-1.0, 0, None)  # (検証の正解率, 更新の回数, 重み)
for step in range(1, STEPS + 1):
    src_b, tgt_b, labels_b = batch(64, generator)
    with autocast():  # PRECISION が bf16 のときだけ bfloat16
        logits, _ = mine(src_b, tgt_b, need_weights=False)
    loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), labels_b.reshape(-1), ignore_index=PAD)
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(mine.parameters(), max_norm=1.0)
    optimizer.step()
    schedule.step()
    losses.append(loss.item())
    if step % EVAL_EVERY == 0 or step == STEPS:
        share = reversed_share(mine, valid_src, valid_labels)
        evaluations.append((step, share))
        if share > best[0]:
            best = (share, step, copy.deepcopy(mine.state_dict()))
        print(f"更新 {step:3d} 回: 損失（直前 {EVAL_EVERY} 回の平均） {sum(losses[-EVAL_EVERY:]) / EVAL_EVERY:.3f}, "
              f"検証の列を正しく逆順にできた割合 {share:.1%}")  # fmt: skip
mine.load_state_dict(best[2])
mine.eval()
print(f"いちばんよかったのは更新 {best[1]} 回のとき（検証 {best[0]:.1%}）。その重みに戻しました")
late = losses[-100:]
print(f"損失: 1 回目 {losses[0]:.2f}、ウォームアップの終わり（{WARMUP} 回目）{losses[WARMUP - 1]:.2f}、"
      f"最後の 100 回の平均 {sum(late) / len(late):.3f}・最大 {max(late):.3f}")  # fmt: skip
viz.plot_curves(
    {"学習の損失": (list(range(1, STEPS + 1)), losses)},
    xlabel="更新の回数",
    ylabel="損失（交差エントロピー）",
    title=f"逆順の課題の学習（{PRECISION}）",
    logy=True,
)

# %% [markdown]
# **図の見どころ:** 縦軸は対数です。損失は、上に印刷した三つの数のとおり下がっていきます。ウォームアップのあとは
# 学習率が少しずつ小さくなるので、線は揺れながらも下がり続け、最後の 100 回でいちばん大きい損失（上の「最大」）も
# 小さいままです（学習の終わりに跳ね上がって戻らない、ということが起きていません）。検証の正解率は、印刷した行のとおり、更新の回数とともに上がります（途中で下がることも
# あるので、いちばんよかったときの重みを残します）。

# %% [markdown]
# **確かめのセル（チェック）:** 上の学習が課題を覚え、最後まで跳ね上がらなかった（最後の 100 回の損失がどれも
# 0.5 未満）ことを確かめます。設定（`STEPS`, `PEAK_LR` など）を変えて試したときにここで止まったら、その設定では
# 届かなかったということです。

# %%
assert max(late) < 0.5, f"最後の 100 回の損失の最大が {max(late):.2f}: 学習が終わりで跳ね上がった"
test_src, _, test_labels = batch(200, torch.Generator().manual_seed(1))  # テスト用: 学習にも検証にも使っていない
test_share = reversed_share(mine, test_src, test_labels)
print(f"テストの 200 列のうち、正しく逆順にできた割合: {test_share:.1%}")
assert test_share >= 0.95, f"テストの列を逆順にできた割合が {test_share:.1%} で、95% に届いていない"

# %% [markdown]
# ## 4. 二つのデコードを比べる
#
# 上の `my_greedy` は、毎回それまでの出力全体をデコーダに通し直します。attnlab の
# `greedy_decode` は、エンコーダの出力を一度だけ射影し、デコーダの自己注意のキーとバリューを
# キャッシュして、新しい位置だけを計算します。学習した重みを attnlab のモデルに写して、同じ答えに
# なることを確かめます。

# %%
reference.load_state_dict(mine.state_dict())
ours = my_greedy(mine, test_src)
cached = [h.tokens for h in greedy_decode(reference, test_src, bos_id=BOS, eos_id=EOS, pad_id=PAD, max_len=10)]
truth = answers_of(test_labels)
agree = sum(a == b for a, b in zip(ours, cached))
correct = sum(a == t for a, t in zip(ours, truth))
print("二つのデコードが一致した列:", agree, "/ 200")
print("正しく逆順にできた列:", correct, "/ 200")
digits = lambda ids: " ".join(str(i - 3) for i in ids)  # noqa: E731
print("例:", digits(truth[0][::-1]), "→", digits(ours[0]), "（正解）" if ours[0] == truth[0] else f"（正解は {digits(truth[0])}）")

# %% [markdown]
# **確かめのセル（チェック）:** 二つのデコードは同じ重みで同じ計算をしているので、すべての列で一致するはずです。

# %%
assert agree == 200, f"二つのデコードが {200 - agree} 列で違う"

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
n_src, n_out = len(truth[0]), len(ours[0])  # 原文の数字の数と、出力の数字の数（正しく逆順なら同じ）
heaviest = [int(cross[i].argmax()) for i in range(n_out)]  # 出力の数字の行ごとに、いちばん重い列
mirrored = sum(j == n_src - 1 - i for i, j in enumerate(heaviest))
print(f"原文の数字 {n_src} 個、出力の数字 {n_out} 個（" + ("正しく逆順" if ours[0] == truth[0] else "正解と違う") + "）")
print(f"出力の数字の行 {n_out} 行のうち {mirrored} 行で、いちばん重い列が反対側の位置（上から i 番目の行なら、原文の後ろから i 番目）")
for i, j in enumerate(heaviest):
    if j != n_src - 1 - i:
        print(f"  反対側でない行: {labels_out[i]} の行 → いちばん重いのは原文の {labels_src[j]}（反対側は {labels_src[n_src - 1 - i]}）")
viz.plot_attention(cross, labels_src, labels_out[: answer.shape[1]], title="ソース・ターゲット注意\n最後の層・ヘッドの平均")

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
