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
# # 08 応用: 翻訳・要約・質問応答・文章生成・穴埋め — それぞれの注意
#
# 注意機構が使われる五つの仕事を、attnlab のモデルで一つずつ動かし、そのとき見ている場所を描きます。
#
# | 仕事 | モデル | 注意の種類 |
# |---|---|---|
# | 翻訳 | Transformer エンコーダ・デコーダ | 交差注意（出力 → 入力） |
# | 要約 | ポインタ生成ネットワーク（コピー機構） | 交差注意 = コピー元の分布 |
# | 質問応答 | MiniLM + 区間ヘッド | 質問と本文の自己注意 |
# | 文章生成 | GPT（文字単位） | マスク付き（因果）自己注意 |
# | 穴埋め | BERT（マスク言語モデル） | 双方向の自己注意 |
#
# 同梱モデルがある仕事（翻訳、文字単位の GPT）は名前で読み込みます。ないものは生成データで短く
# 学習します（時間は各セルに書いてあります。`notebooks/runs/` に残るので、二回目からは読み込むだけです）。
#
# _English:_ five jobs attention does, each run with an attnlab model and drawn with its
# attention: translation (cross-attention), summarization with the copy mechanism (the
# cross-attention is the copy distribution), question answering (question ↔ passage
# self-attention), generation (causal self-attention) and fill-mask (bidirectional). Models that
# attnlab ships are loaded by name; the others are trained briefly on generated data (the time is
# in each cell; they are kept in `notebooks/runs/`, so a second run only loads them).

# %%
import torch
from helpers import (
    check,
    load_gpt,
    load_masked_lm,
    load_question_answerer,
    load_summarizer,
    load_translator,
    shipped_model,
    show_solution,
)

from attnlab import viz
from attnlab.data.squad import facts_splits as qa_splits
from attnlab.data.summaries import facts_splits as summary_splits
from attnlab.decode import generate
from attnlab.models.bert import encode_with_masks, fill_mask

viz.display_options.lang = "ja"

# %% [markdown]
# ## 1. 翻訳
#
# _English:_ translation.

# %%
name = "ja-en" if shipped_model("ja-en") is not None else "en-ja"
translator = load_translator(name, seconds=30)  # 05 と同じ / the same as notebook 05
print(translator.source)
sentence = {"ja-en": "この本はとても面白かった。", "en-ja": "nine thousand nine hundred ninety-nine"}[name]
if name == "en-ja" and translator.source.startswith("shipped"):
    sentence = "This book was very interesting."
translator.model.translate([sentence], return_attention=True)[0]

# %% [markdown]
# ## 2. 要約とコピー機構
#
# ポインタ生成ネットワークは、語彙から単語を「生成」するか、注意の重みに従って文書から単語を「コピー」
# するかを毎ステップ混ぜます。生成データの文書には作り話の名前と数が入っていて、語彙にないので
# コピーするしかありません。行のラベルの「copy」は、その単語をコピーした確率 1 − p_gen です。
#
# _English:_ the pointer-generator mixes, at every step, generating a word from its vocabulary
# with copying one from the document along its attention. The generated documents hold invented
# names and numbers that are not in the vocabulary, so they can only be copied; "copy" in the row
# labels is the copy probability 1 − p_gen.

# %%
summarizer = load_summarizer(seconds=25)
print(summarizer.source)
example = summary_splits(1, seed=0, n_valid=1, n_test=3).test[0]
print("文書 / document:", example.document)
print("正解 / reference:", example.summary)
summary = summarizer.model.summarize([example.document], return_attention=True)[0]
summary

# %% [markdown]
# ## 3. 質問応答
#
# 質問と本文を `[CLS] 質問 [SEP] 本文 [SEP]` として一緒に読み、答えの始まりと終わりのトークンを当てます。
# 図は、質問の各トークンが本文のどこに注意したか（最後の層、ヘッドの平均。行の重みの多くは [CLS] や [SEP]、
# 質問そのものに行くので、本文の中での割合に直して描きます）です。
#
# 40 秒の微調整では答えを外すことがよくあります。`attnlab train qa`（既定の 6 エポック、数分）なら
# 生成データの未知の質問で完全一致 75% 以上になります（`tests/test_qa.py` の slow テスト）。
#
# _English:_ question and passage are read together as `[CLS] question [SEP] passage [SEP]`, and
# the model points at the answer's first and last tokens. The figure: where in the passage each
# question token looked (last layer, mean over heads, each row renormalised over the passage). After 40 seconds of fine-tuning the answer
# is often wrong; `attnlab train qa` (6 epochs, a few minutes) reaches 75%+ exact match on unseen
# generated questions (the slow test in `tests/test_qa.py`).

# %%
qa = load_question_answerer(seconds=40)
print(qa.source)
question = qa_splits(1, seed=0, n_valid=1, n_test=2).test[0]
print("本文 / passage:", question.context)
print("正解 / reference:", question.answers[0][0])
answer = qa.model.answer([question.question], [question.context], return_attention=True)[0]
answer

# %% [markdown]
# ヘッドの平均はぼやけます。一つ一つのヘッドでは、本文の一つのトークンに強く注目するものがあります。
# 本文への重みがいちばん大きいヘッドを探して、そのまま（割合に直さずに）描きます。質問のほとんどの
# トークンが答えのトークンを見ているなら、そのヘッドは答えの位置を運んでいると読めます。
#
# _English:_ the mean over heads is diffuse, but single heads can look hard at one passage token.
# We find the head with the largest weight on the passage and draw it as it is (not
# renormalised). If most question tokens look at the answer token, that head carries the answer's
# position.

# %%
peak = answer.attention.amax(dim=(-2, -1))  # (L, H): the largest question → passage weight of each head
layer, head = divmod(int(peak.argmax()), peak.shape[1])
viz.plot_attention(
    answer.attention[layer, head],
    answer.context_tokens,
    answer.question_tokens,
    title=f"第{layer}層・ヘッド{head} / layer {layer}, head {head}",
)

# %% [markdown]
# ## 4. 文章の続きを書く（GPT）
#
# GPT は因果マスク付きの自己注意で、各文字がそれより前の文字だけを見ます。温度 0（毎回いちばん確からしい
# 文字）で続きを書かせ、書いた文全体の注意を描きます。上三角が 0 なのが因果マスクです。
#
# _English:_ GPT's causal self-attention lets each character see only the ones before it. We
# continue a prompt at temperature 0 (always the most likely character) and draw the attention
# over the whole text; the zero upper triangle is the causal mask.

# %%
gpt = load_gpt("shakespeare-char", seconds=15)
print(gpt.source)
model, tokenizer = gpt.model
prompt = "three hundred " if "number words" in gpt.source else "ROMEO:\n"  # the stand-in knows only number words
ids = torch.tensor([tokenizer.encode(prompt)])
with torch.no_grad():
    full = generate(model, ids, max_new_tokens=20, temperature=0.0).tokens  # (1, T): the prompt, then 20 new characters
    out = model(full, need_weights=True)
text = tokenizer.decode(full[0].tolist())
print(repr(text))
characters = [tokenizer.id_to_token(i) for i in full[0].tolist()]
characters = [{"\n": "↵", " ": "␣"}.get(c, c) for c in characters]
last = out.attentions[-1][0]  # (H, T, T)
viz.plot_attention(last.mean(0), characters, characters, title="最後の層・ヘッド平均 / last layer, mean of heads")

# %% [markdown]
# ## 5. 穴埋め（マスク言語モデル）
#
# BERT は前後の両方を見て `[MASK]` の単語を当てます。数詞の文で学習した小さな BERT に、数の一部を隠した
# 文を与えます。「three _ forty-two thousand」の空欄は hundred、「nine million _ hundred thousand」の空欄は
# 一桁の数のはずです。`[MASK]` の行の注意が、どの単語を手がかりにしたかを示します。
#
# _English:_ BERT looks both ways to guess the `[MASK]` word. A small BERT trained on number words
# gets numbers with one word hidden: "three _ forty-two thousand" needs "hundred", "nine million _
# hundred thousand" a digit word. The row of `[MASK]` shows which words it used as clues.

# %%
mlm = load_masked_lm(seconds=20)
print(mlm.source)
bert, bert_tokenizer = mlm.model
# BPE のトークンは前の空白を含む（"▁forty"）ので、[MASK] の前には空白を置きません。
# A BPE token carries its leading space ("▁forty"), so no space goes before [MASK].
for masked in ("three[MASK] forty-two thousand", "nine million[MASK] hundred thousand"):
    with torch.no_grad():
        candidates = fill_mask(bert, bert_tokenizer, masked, top_k=3)[0]
    print(masked, "→", ", ".join(f"{token!r} {p:.2f}" for token, p in candidates))
ids = encode_with_masks(bert_tokenizer, masked)
with torch.no_grad():
    bert_out = bert(torch.tensor([ids]), need_weights=True)
pieces = [bert_tokenizer.id_to_token(i) for i in ids]
mask_row = pieces.index("[MASK]")
viz.plot_attention(
    bert_out.attentions[-1][0].mean(0)[mask_row : mask_row + 1],
    pieces,
    ["[MASK]"],
    title="[MASK] の行 / the [MASK] row",
)

# %% [markdown]
# ## 練習問題 / Exercises
#
# 1. 注意の一行（`(S,)`）から、重みの大きい順に上位 k 個のトークンと重みを返す `top_attended(weights, tokens, k)`
#    を書いてください。
# 2. （試す問題）それを使って、上の五つの例それぞれで「いちばん見られたトークン」を並べてみましょう。
#    コピーされた名前、質問の答え、`[MASK]` の手がかりは、重みの上位に入っていますか？
#
# _English:_ (1) write `top_attended(weights, tokens, k)`, the k tokens of one attention row
# `(S,)` with the largest weights, largest first. (2) (to try) list the most attended tokens in
# each of the five examples above: are the copied names, the answer and the `[MASK]`'s clues near
# the top?


# %%
def top_attended(weights, tokens, k=3):
    # ここに書く / your code here
    raise NotImplementedError


# %%
check("top_attended", top_attended)

# %% tags=["solution"] jupyter={"source_hidden": true, "outputs_hidden": true}
# 解答例（開くと見えます）/ model solution (expand to see)
show_solution("top_attended")

# %%
import solutions  # noqa: E402

print("[MASK]:", solutions.top_attended(bert_out.attentions[-1][0].mean(0)[mask_row], pieces))
if summary.attention is not None:
    first_copy = max(range(len(summary.p_gen)), key=lambda t: 1 - summary.p_gen[t])
    print(
        f"要約の '{summary.tokens[first_copy]}':",
        solutions.top_attended(summary.attention[first_copy], summary.src_tokens),
    )
