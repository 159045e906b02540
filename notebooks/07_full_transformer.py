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
# 位置符号）から 40 行ほどで組み立てます。できたものを `attnlab.models.transformer.Transformer` と同じ
# 重みで比べ、出力とすべての注意の重みが一致することを確かめます。最後に小さな課題で学習させ、
# 自分の（毎回全部を計算し直す）貪欲デコードと attnlab の（キー・バリューをキャッシュする）
# デコードが同じ答えを出すことを見ます。
#
# _English:_ we assemble the encoder–decoder of "Attention Is All You Need" from attnlab's blocks
# in about 40 lines, check it against `attnlab.models.transformer.Transformer` under the same
# weights (outputs and every attention map), then train it briefly on a toy task and see that our
# greedy decoding (recomputing everything each step) and attnlab's (with a key/value cache) agree.

# %%
import math
import time

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
# - 埋め込み × √D + 位置符号（論文 §3.4, §3.5）。
# - エンコーダ: 自己注意 → フィードフォワード、それぞれ残差接続と LayerNorm（`EncoderBlock`）を N 段。
# - デコーダ: 因果的な自己注意 → 交差注意（キーとバリューはエンコーダの出力）→ フィードフォワード
#   （`DecoderBlock`）を N 段。
# - 出力: 線形層で語彙の点数に。重みは出力側の埋め込みと共有します（§3.4）。
#
# 部品の名前を attnlab のモデルと同じにしておくと、`state_dict` がそのまま写せます。
#
# _English:_ embeddings × √D plus positions; N encoder blocks (self-attention, feed-forward, each
# with a residual connection and LayerNorm); N decoder blocks (causal self-attention, cross-attention
# over the encoder output, feed-forward); a linear map to the vocabulary that shares the target
# embedding's weights. Naming the parts as attnlab's model does lets the `state_dict` copy over.


# %%
class MyTransformer(nn.Module):
    """The paper's encoder–decoder (post-norm), from attnlab's blocks."""

    def __init__(self, vocab: int, d_model: int, heads: int, layers: int, d_ff: int, pad_id: int = 0) -> None:
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        self.src_embed = nn.Embedding(vocab, d_model, padding_idx=pad_id)
        self.tgt_embed = nn.Embedding(vocab, d_model, padding_idx=pad_id)
        self.positions = SinusoidalPositionalEncoding(d_model)
        self.encoder = nn.ModuleList(EncoderBlock(d_model, heads, d_ff, norm="post") for _ in range(layers))
        self.decoder = nn.ModuleList(DecoderBlock(d_model, heads, d_ff, norm="post") for _ in range(layers))
        self.out_proj = nn.Linear(d_model, vocab, bias=False)
        self.out_proj.weight = self.tgt_embed.weight  # tied (§3.4)

    def embed(self, embedding: nn.Embedding, tokens):
        return self.positions(embedding(tokens) * math.sqrt(self.d_model))  # (B, L, D)

    def forward(self, src, tgt_in):
        """src (B, S), tgt_in (B, T) → logits (B, T, V) and the attention maps of every layer."""
        src_mask, tgt_mask = src != self.pad_id, tgt_in != self.pad_id  # True = real token
        x, encoder_maps = self.embed(self.src_embed, src), []
        for block in self.encoder:
            x, weights, _ = block(x, key_padding_mask=src_mask, need_weights=True)
            encoder_maps.append(weights)  # (B, H, S, S)
        y, decoder_maps, cross_maps = self.embed(self.tgt_embed, tgt_in), [], []
        for block in self.decoder:
            y, self_w, cross_w = block(
                y, x, memory_padding_mask=src_mask, target_padding_mask=tgt_mask, need_weights=True
            )
            decoder_maps.append(self_w)  # (B, H, T, T), causal
            cross_maps.append(cross_w)  # (B, H, T, S)
        return self.out_proj(y), {"encoder": encoder_maps, "decoder": decoder_maps, "cross": cross_maps}


# %% [markdown]
# ## 2. attnlab のモデルと比べる
#
# 同じ大きさの `Transformer`（論文どおりの post-norm、ドロップアウトなし）を作り、その重みを写して、
# パディングを含むバッチで比べます。
#
# _English:_ an attnlab `Transformer` of the same size (the paper's post-norm, no dropout); its
# weights are copied into ours and both run on a padded batch.

# %%
VOCAB, PAD, BOS, EOS = 13, 0, 1, 2  # 0 = パディング, 1 = 開始, 2 = 終わり, 3…12 = 数字 0…9
config = TransformerConfig(
    src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, d_model=64, n_heads=4, n_encoder_layers=2, n_decoder_layers=2,
    d_ff=128, dropout=0.0, norm="post", tie_output=True, pad_id=PAD,
)  # fmt: skip
torch.manual_seed(0)
reference = Transformer(config).eval()
mine = MyTransformer(VOCAB, d_model=64, heads=4, layers=2, d_ff=128).eval()
print(mine.load_state_dict(reference.state_dict()))  # 名前が同じなので、そのまま写せる / same names: copies as is

src = torch.tensor([[5, 6, 7, 8, 2], [9, 4, 2, 0, 0]])  # (B, S), 二つ目はパディング付き / second row padded
tgt_in = torch.tensor([[1, 8, 7, 6, 5], [1, 4, 9, 0, 0]])  # (B, T)
with torch.no_grad():
    logits, maps = mine(src, tgt_in)
    expected = reference(src, tgt_in, need_weights=True)
torch.testing.assert_close(logits, expected.logits)
for kind in ("encoder", "decoder", "cross"):
    for layer, (ours, theirs) in enumerate(zip(maps[kind], expected.attentions[kind])):
        torch.testing.assert_close(ours, theirs, msg=lambda m, k=kind, i=layer: f"{k} layer {i}: {m}")
print("出力と 3 種類 × 2 層の注意がすべて一致 / logits and all 3 × 2 attention maps match")

# %% [markdown]
# 出力オブジェクトは交差注意を表示します（最初のバッチ）。パディングの列（二つ目の文）には重みが 0 です。
#
# _English:_ the output object shows its cross-attention (first batch item); padded columns get
# weight 0 (second sentence).

# %%
expected

# %%
viz.plot_attention_grid(
    [w[1] for w in maps["decoder"]], title="デコーダの自己注意（2 つ目の文）/ decoder self-attention, causal + padding"
)

# %% [markdown]
# ## 3. 小さな課題で学習する: 数字の列を逆順に
#
# 数字 4〜8 個の列を逆順にする課題で、自分のモデルを数十秒だけ学習させます。デコーダの入力は
# 「開始記号 + 正解を一つずらしたもの」（teacher forcing）、損失はパディングを除いた交差エントロピーです。
#
# _English:_ we train our model for some seconds to reverse sequences of 4–8 digits: the decoder
# reads the start token plus the target shifted by one (teacher forcing); the loss is the
# cross-entropy over the non-padding positions.

# %%
SECONDS = 15  # CI の予算 / the CI budget


def batch(n: int, generator: torch.Generator):
    lengths = torch.randint(4, 9, (n,), generator=generator)
    S = int(lengths.max()) + 1
    src = torch.full((n, S), PAD)
    tgt_in, labels = torch.full((n, S), PAD), torch.full((n, S), PAD)
    for row, length in enumerate(lengths.tolist()):
        digits = torch.randint(3, 13, (length,), generator=generator)
        src[row, : length + 1] = torch.cat([digits, torch.tensor([EOS])])
        answer = torch.cat([digits.flip(0), torch.tensor([EOS])])  # reversed + end
        labels[row, : length + 1] = answer
        tgt_in[row, : length + 1] = torch.cat([torch.tensor([BOS]), answer[:-1]])
    return src, tgt_in, labels


generator = torch.Generator().manual_seed(0)
optimizer = torch.optim.Adam(mine.parameters(), lr=1e-3)
mine.train()
start, step, losses = time.perf_counter(), 0, []
while time.perf_counter() - start < SECONDS:
    src_b, tgt_b, labels_b = batch(64, generator)
    logits, _ = mine(src_b, tgt_b)
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), labels_b.reshape(-1), ignore_index=PAD)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
    step += 1
mine.eval()
print(f"{step} 更新 / updates in {SECONDS} s, 損失 / loss {losses[0]:.2f} → {sum(losses[-20:]) / 20:.3f}")
viz.plot_curves(
    {"学習の損失 / training loss": (list(range(1, step + 1)), losses)},
    xlabel="更新 / step",
    ylabel="損失 / loss",
    logy=True,
)

# %% [markdown]
# ## 4. 二つのデコードを比べる
#
# 自分のモデルでの貪欲デコードは、毎回それまでの出力全体をデコーダに通し直します。attnlab の
# `greedy_decode` は、エンコーダの出力を一度だけ射影し、デコーダの自己注意のキーとバリューを
# キャッシュして、新しい位置だけを計算します。学習した重みを attnlab のモデルに写して、同じ答えに
# なることを確かめます。
#
# _English:_ our greedy decoding runs the decoder over the whole output so far at every step;
# attnlab's `greedy_decode` projects the encoder output once and caches the decoder's keys and
# values, computing only the new position. With the trained weights copied into attnlab's model,
# both must give the same answers.


# %%
@torch.no_grad()
def my_greedy(model: MyTransformer, src, max_len: int = 12) -> list[list[int]]:
    out = torch.full((src.shape[0], 1), BOS)
    for _ in range(max_len):
        logits, _ = model(src, out)
        out = torch.cat([out, logits[:, -1].argmax(-1, keepdim=True)], dim=1)  # append the best next token
    answers = []
    for row in out[:, 1:].tolist():
        answers.append(row[: row.index(EOS)] if EOS in row else row)
    return answers


reference.load_state_dict(mine.state_dict())
test_src, _, test_labels = batch(200, torch.Generator().manual_seed(1))
ours = my_greedy(mine, test_src)
cached = [h.tokens for h in greedy_decode(reference, test_src, bos_id=BOS, eos_id=EOS, pad_id=PAD, max_len=12)]
truth = [[t for t in row if t not in (PAD, EOS)] for row in test_labels.tolist()]
print("二つのデコードが一致した文 / identical decodes:", sum(a == b for a, b in zip(ours, cached)), "/ 200")
print("正しく逆順にできた文 / correctly reversed:", sum(a == t for a, t in zip(ours, truth)), "/ 200")
digits = lambda ids: " ".join(str(i - 3) for i in ids)  # noqa: E731
print("例 / example:", digits(test_src[0].tolist()[: len(truth[0])]), "→", digits(ours[0]))

# %% [markdown]
# 逆順の課題では、交差注意が「反対側の対角線」を描くはずです。出力の i 番目の数字は、入力の後ろから
# i 番目を見ればよいからです。
#
# _English:_ for reversal the cross-attention should draw the anti-diagonal: output digit i needs
# input digit i from the end.

# %%
with torch.no_grad():
    row = test_src[:1, : len(truth[0]) + 1]
    answer = torch.tensor([[BOS] + ours[0]])
    _, maps = mine(row, answer)
labels_src = [digits([t]) if t != EOS else "</s>" for t in row[0].tolist()]
labels_out = [digits([t]) for t in ours[0]] + ["</s>"]
viz.plot_attention(
    maps["cross"][-1][0].mean(0),
    labels_src,
    labels_out[: answer.shape[1]],
    title="交差注意（最後の層の平均）/ cross-attention",
)

# %% [markdown]
# ## 練習問題 / Exercises
#
# 1. 位置符号の表を手で作ってください（論文 §3.5）: 偶数番目の列は `sin(pos / 10000^(2i/D))`、奇数番目は
#    同じ角度の `cos`。`check` が attnlab の `SinusoidalPositionalEncoding` と比べます。
# 2. （試す問題）`MyTransformer` を pre-norm（`norm="pre"` と最後の LayerNorm）に書き換え、attnlab の
#    `TransformerConfig(norm="pre")` と一致させてください。
#
# _English:_ (1) build the sinusoidal table by hand (§3.5): even columns `sin(pos / 10000^(2i/D))`,
# odd columns the `cos` of the same angle; `check` compares with attnlab's
# `SinusoidalPositionalEncoding`. (2) (to try) make `MyTransformer` pre-norm (`norm="pre"` plus a
# final LayerNorm on each side) and match `TransformerConfig(norm="pre")`.


# %%
def sinusoidal_table(length, d_model):
    # ここに書く / your code here
    raise NotImplementedError


# %%
check("sinusoidal_table", sinusoidal_table)

# %% tags=["solution"] jupyter={"source_hidden": true, "outputs_hidden": true}
# 解答例（開くと見えます）/ model solution (expand to see)
show_solution("sinusoidal_table")
