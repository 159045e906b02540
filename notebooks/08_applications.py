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
# # 08 応用: 翻訳・要約・質問応答・文章生成・穴埋め — それぞれのアテンション
#
# アテンションが使われる五つのタスクを、attnlab のモデルで一つずつ動かし、そのとき見ている場所を描きます。
#
# | タスク | モデル | アテンションの種類 |
# |---|---|---|
# | 翻訳 | Transformer エンコーダ・デコーダ | ソース・ターゲット注意（訳文 → 原文） |
# | 要約 | ポインタ生成ネットワーク（コピー機構） | ソース・ターゲット注意 = コピー元の分布 |
# | 質問応答 | MiniLM + 区間ヘッド | 質問と本文をつないだ文の自己注意 |
# | 文章生成 | GPT（文字単位） | 先を隠す工夫つきの自己注意 |
# | 穴埋め | BERT（マスク言語モデル） | 前後の両方を見る自己注意 |
#
# 同梱モデルがあるタスク（翻訳、文字単位の GPT）は名前で読み込みます。ないものは生成データで短く
# 学習します（更新の回数は各セルの `steps=` です。`notebooks/runs/` に残るので、二回目からは読み込むだけです）。
# 短い学習のモデルなので、図が教科書どおりの形になるとは限りません。各図の下の文は、この実行の出力から
# 言えることだけを書き、数はコードで数えて印刷します。
#
# チュートリアル 001 との対応: 「NLP における注意機構の応用」の四つの応用シーン（機械翻訳、テキスト要約、
# 質問応答、言語モデル）と、「BERT における注意」のマスク言語モデルです。

# %% [markdown]
# <details><summary>English summary (英語の要約)</summary>
#
# Five tasks, each with its attention: translation (source–target attention), summarization with
# the copy mechanism (the copy probability 1 − p_gen per summary word; the example shown is the
# one whose words other than [EOS] lean furthest towards generating, and the printout says how
# many words were generated at all — in this small model often only [EOS]), question answering
# (BERT-style: one self-attention over question + passage, where the tutorial describes
# cross-attention; the head that puts the most weight on the gold answer span, with that span
# marked and its own colour scale — chosen for that, so no evidence that it carries the answer),
# character-level generation (causal self-attention, checked: no weight on later characters) and
# fill-mask (each last-layer head's row of [MASK], for the first of the two sentences, with how
# many of them peak on the clue words a person would use; the BPE marker "▁" explained). The models that attnlab does not ship are trained for a
# few hundred steps, so each caption states only what the printed numbers of this run show.
# Exercises at the end, each with a collapsed answer.
# </details>

# %%
import torch
from helpers import (
    SHAKESPEARE,
    Loaded,
    check,
    load_gpt,
    load_masked_lm,
    load_question_answerer,
    load_summarizer,
    load_translator,
    shipped_model,
    show_solution,
    show_translation,
)

from attnlab import viz
from attnlab.data.squad import facts_splits as qa_splits
from attnlab.data.summaries import facts_splits as summary_splits
from attnlab.decode import generate
from attnlab.loading import load_model
from attnlab.models.bert import encode_with_masks, fill_mask

viz.display_options.lang = "ja"

# %% [markdown]
# ## 1. 翻訳
#
# 訳文の各トークンが原文のどこを見たか（最後の層、ヘッドの平均）。05 で詳しく見たものと同じモデルです。
# トークンの頭の「▁」は、そのトークンの前に空白がある（新しい語の始まりである）ことを表す印です（05 の 1 節）。

# %%
name = "ja-en" if shipped_model("ja-en") is not None else "en-ja"
translator = load_translator(name)  # 05 と同じモデル
print(translator.source)
sentence = {"ja-en": "この本はとても面白かった。", "en-ja": "nine thousand nine hundred ninety-nine"}[name]
if name == "en-ja" and translator.shipped:
    sentence = "This book was very interesting."
translation = translator.model.translate([sentence], return_attention=True)[0]
show_translation(translation)

# %% [markdown]
# ## 2. 要約とコピー機構
#
# ポインタ生成ネットワークは、毎ステップ、語彙から語を「生成」する確率 p_gen と、アテンションに従って
# 文書から語を「コピー」する確率 1 − p_gen を混ぜます。生成データの文書には作り話の名前と数が入っていて、
# 語彙にないのでコピーするしかありません。一方 `[EOS]`（要約の終わり）は文書にないので、その確率は
# すべて生成の側から来ます。
#
# テストの 8 例を要約し、`[EOS]` 以外の語で生成が勝った（コピーの確率が 0.5 未満の）語を数えます。描く例は、
# `[EOS]` 以外の語のコピーの確率の最小値がいちばん低い例、つまり生成にいちばん傾いた語を含む例です。

# %%
summarizer = (  # the lesson's §9 shows the same shipped model; a stand-in is trained where it is not built
    Loaded(load_model(shipped_model("facts-summarizer"), family="summarize"), "同梱モデル 'facts-summarizer'", shipped=True)
    if shipped_model("facts-summarizer") is not None
    else load_summarizer()
)
print(summarizer.source)
examples = summary_splits(1, seed=0, n_valid=1, n_test=8).test
summaries = summarizer.model.summarize([e.document for e in examples], return_attention=True)
words = [(w, 1 - p) for s in summaries for w, p in zip(s.tokens, s.p_gen) if w != "[EOS]"]  # (語, コピーの確率)
generated_words = [w for w, c in words if c < 0.5]
lowest = [min((1 - p for w, p in zip(s.tokens, s.p_gen) if w != "[EOS]"), default=1.0) for s in summaries]
best = min(range(len(summaries)), key=lambda i: lowest[i])
example, summary = examples[best], summaries[best]
print(f"8 例の要約の語（[EOS] を除く）: {len(words)} 語、そのうち生成が勝った語: {len(generated_words)} 語",
      " ".join(generated_words[:10]))  # fmt: skip
if not generated_words:
    print("→ この小さなモデルは、8 例とも [EOS] 以外のすべての語をコピーで書いています（生成が勝ったのは [EOS] だけ）")
print("各例の、[EOS] 以外の語のコピーの確率の最小値:", [round(x, 2) for x in lowest], f"→ 例 {best + 1} を描きます")
print("文書:", example.document)
print("正解の要約:", example.summary)
summary

# %% [markdown]
# 行のラベルの括弧の中が、その語を書いたときのコピーの確率です。同じ数を棒で並べます。

# %%
generated = [w for w, p in zip(summary.tokens, summary.p_gen) if 1 - p < 0.5]
copied = [w for w, p in zip(summary.tokens, summary.p_gen) if 1 - p >= 0.5]
print(f"コピーが勝った語（{len(copied)} 語）:", " ".join(copied))
print(f"生成が勝った語（{len(generated)} 語）:", " ".join(generated) or "なし")
copy = {f"{i}: {w}": 1 - p for i, (w, p) in enumerate(zip(summary.tokens, summary.p_gen))}
viz.plot_bars({"コピーの確率 1 − p_gen": copy}, ylabel="コピーの確率", title="要約の各語: コピーか生成か")

# %% [markdown]
# **図の見どころ:** 棒が低い語ほど、生成の側から書かれています。最後の `[EOS]` は文書にないので、その確率は
# 棒の高さにかかわらず、すべて生成の側から来ています。`[EOS]` 以外でいちばん低い棒の高さが、2 節の最初のセルで
# 印刷した、この例の最小値です。この例でコピーが勝った語と生成が勝った語の数は、上の二行のとおりです。`[EOS]` 以外に
# 生成が勝った語がなければ、この小さなモデルは文書の語をすべてコピーで書き、生成は `[EOS]` にしか使っていない
# ということです。

# %% [markdown]
# ## 3. 質問応答
#
# 質問と本文を `[CLS] 質問 [SEP] 本文 [SEP]` として一緒に読み、答えの始まりと終わりのトークンを当てます。
# チュートリアルは質問応答を「質問が本文に注意する」ソース・ターゲット注意として説明しますが、BERT の形の
# モデル（ここの MiniLM）は、質問と本文をつないだ一つの列の **自己注意** です。質問 → 本文の重みは、その
# 大きな自己注意の表の一部分（質問の行 × 本文の列）で、本文 → 質問の向きの重みも同じ表にあります。
#
# まず、最後の層のヘッドの平均で、質問の各トークンが本文のどこを見たかを表示します。行の重みの一部は
# [CLS] や [SEP]、質問そのものに行くので（本文に届く割合は表示の説明の行にあります）、本文の中での割合に
# 直して描きます。
#
# ここでの微調整は短い（更新の回数はセルの `steps=`）ので、答えを外すことがあります。
# `attnlab train qa`（既定の 6 エポック、数分）なら、生成データの未知の質問で完全一致 75% 以上になります
# （`tests/recipes/test_qa.py` の slow テスト）。

# %%
qa = load_question_answerer()
print(qa.source)
question = qa_splits(1, seed=0, n_valid=1, n_test=2).test[0]
gold = question.answers[0][0]
print("本文:", question.context)
print("正解:", gold)
answer = qa.model.answer([question.question], [question.context], return_attention=True)[0]
print("モデルの答え:", answer.text, "（正解と一致）" if answer.text == gold else "（正解と違う）")
answer

# %% [markdown]
# ヘッドの平均はぼやけます。そこで、ヘッドを一つずつ調べ、質問のトークンが **正解の区間**（本文の中の
# 正解のトークン）に置く重みの平均がいちばん大きいヘッドを選びます。図では、正解のトークンを【 】で囲みます。
#
# 注意: このヘッドは「正解の区間をいちばん見ている」ことで **選んだ** ので、選ばれたヘッドが正解を見ているのは
# 選び方の結果です。見ていることは、そのヘッドが答えの情報を運んでいる証拠にはなりません（運んでいるかを
# 確かめるには、そのヘッドを消して答えが変わるかを見るなど、重み以外の実験が要ります）。

# %%
context = answer.context_tokens
gold_pieces = [qa.model.tokenizer.id_to_token(i) for i in qa.model.tokenizer.encode(gold)]
starts = [i for i in range(len(context) - len(gold_pieces) + 1) if context[i : i + len(gold_pieces)] == gold_pieces]
assert starts, f"正解 {gold!r} のトークン {gold_pieces} が本文のトークンに見つからない"
span = list(range(starts[0], starts[0] + len(gold_pieces)))
on_gold = answer.attention[..., span].sum(-1).mean(-1)  # (L, H): 質問の各行が正解の区間に置く重みの、行の平均
qa_layer, qa_head = divmod(int(on_gold.argmax()), on_gold.shape[1])
chosen = answer.attention[qa_layer, qa_head]  # (Q, C): 選んだヘッドの、質問 → 本文の重み
rows_on_gold = int(sum(int(row.argmax()) in span for row in chosen))  # 本文の中でいちばん重いのが正解の区間の行
print(f"正解の区間への重み: 第{qa_layer + 1}層・ヘッド{qa_head + 1} が最大で {on_gold[qa_layer, qa_head]:.2f}"
      f"（全ヘッドの平均 {on_gold.mean():.2f} の {on_gold[qa_layer, qa_head] / on_gold.mean():.1f} 倍。"
      f"正解の区間は本文 {len(context)} トークン中 {len(span)} トークン）")  # fmt: skip
print(f"このヘッドで、本文の中でいちばん重いのが正解の区間である行: 質問 {len(chosen)} 行のうち {rows_on_gold} 行")
labels = [f"【{t}】" if i in span else t for i, t in enumerate(context)]
favourite = chosen.mean(0).topk(3)  # 質問の行の平均で、このヘッドが本文でいちばん重みを置くトークン
print("このヘッドが本文でいちばん重みを置くトークン（質問の行の平均）:",
      ", ".join(f"{labels[j]} {w:.2f}" for w, j in zip(favourite.values, favourite.indices)))  # fmt: skip
print(f"この図の色の目盛りは 0〜{float(chosen.max()):.2f}（この図のいちばん大きい重み）です")
viz.plot_attention(
    chosen, labels, answer.question_tokens, title=f"第{qa_layer + 1}層・ヘッド{qa_head + 1}: 質問 → 本文",
    row_label="クエリ（質問のトークン）", column_label="キー（本文のトークン）", vmax=None,
)  # fmt: skip

# %% [markdown]
# **図の見どころ:** 色の目盛りはこの図のいちばん大きい重み（上に印刷した値）までで、0〜1 ではありません。
# 一つの行の重みは本文のほかに質問、[CLS]、[SEP] にも配られるので、本文の中の重みは 1 よりずっと小さく、0〜1 の
# 目盛りでは全体が暗くなって読みにくいからです。いちばん明るいマスも、重みとしては上に印刷した値までです。【 】の列を上から下までたどり、その列が本文の中でいちばん明るい行の数と、
# 正解の区間への重みの平均（上に印刷した値）を見比べてください。このヘッドは正解の区間への重みが最大になる
# ように選んだので、【 】の列が明るいのは選び方によるところがあり、「このヘッドが答えを運んでいる」証拠では
# ありません。上に印刷したモデルの答えが正解と違うなら、正解を見ているヘッドがあっても答えの区間は別の所に
# 選ばれたということです（見ることと、区間として選ぶことは別の段階です）。

# %% [markdown]
# ## 4. 文章の続きを書く（GPT）
#
# GPT は先を隠す工夫つきの自己注意で、各文字がそれより前の文字だけを見ます。温度 0（毎回いちばん確からしい
# 文字）で続きを書かせ、書いた文全体の注意の重みを描きます。

# %%
gpt = load_gpt("shakespeare-char", steps=150)
print(gpt.source)
model, tokenizer = gpt.model
# tinyshakespeare のない環境の代わりのモデルは、数詞しか知らない
prompt = "ROMEO:\n" if gpt.shipped or SHAKESPEARE.is_file() else "three hundred "
ids = torch.tensor([tokenizer.encode(prompt)])
with torch.no_grad():
    full = generate(model, ids, max_new_tokens=20, temperature=0.0).tokens  # (1, T): プロンプトと、続きの 20 文字
    out = model(full, need_weights=True)
text = tokenizer.decode(full[0].tolist())
print(repr(text))
characters = [tokenizer.id_to_token(i) for i in full[0].tolist()]
characters = [{"\n": "↵", " ": "␣"}.get(c, c) for c in characters]
last = out.attentions[-1][0]  # (H, T, T)
viz.plot_attention(
    last.mean(0), characters, characters, title="最後の層・ヘッドの平均（↵ は改行、␣ は空白）",
    row_label="クエリ（見ている側）", column_label="キー（見られる側）",
)  # fmt: skip

# %% [markdown]
# **図の見どころ:** 対角線より右上がすべて 0 です。これが先を隠す工夫で、どの文字も自分より後ろを見ていません。

# %% [markdown]
# **確かめのセル（チェック）:** 上の文のとおり、どの層・どのヘッドでも、対角線より右上（自分より後ろの文字）の重みが
# ちょうど 0 であることを確かめます。`prompt` を変えても成り立ちます。

# %%
future = [torch.triu(w[0], diagonal=1).abs().max().item() for w in out.attentions]  # 層ごとの、右上の最大の重み
assert max(future) == 0, f"自分より後ろの文字に重みがある: {future}"
print(f"確かめました: {len(future)} 層のすべてのヘッドで、自分より後ろの文字への重みは 0")

# %% [markdown]
# ## 5. 穴埋め（マスク言語モデル）
#
# BERT は前後の両方を見て `[MASK]` の語を当てます。数詞の文で学習した小さな BERT に、数の一部を隠した
# 文を二つ与えます。「three _ forty-two thousand」の空欄は hundred、「nine million _ hundred thousand」の空欄は
# 一桁の数のはずです。
#
# 候補と図のトークンの頭の「▁」は、1 節と同じ語の始まりの印です（"▁thousand" は「空白 + thousand」）。

# %%
mlm = load_masked_lm()
print(mlm.source)
bert, bert_tokenizer = mlm.model
# BPE のトークンは前の空白を含む（"▁thousand" など）ので、[MASK] の前には空白を置かない
sentences = ("three[MASK] forty-two thousand", "nine million[MASK] hundred thousand")
for masked in sentences:
    with torch.no_grad():
        candidates = fill_mask(bert, bert_tokenizer, masked, top_k=3)[0]
    print(f"{masked!r} の [MASK] の候補:", ", ".join(f"{token!r} {p:.2f}" for token, p in candidates))

# %% [markdown]
# 図にするのは 1 つ目の文だけです。最後の層の各ヘッドについて、`[MASK]` の行（`[MASK]` がどこを見たか）を
# 一行ずつ並べます。人が空欄（hundred）を決めるなら、手がかりは前の three と後ろの forty-two です。
# モデルの重みがそこにあるかどうかは、下に印刷する数で確かめます。

# %%
masked = sentences[0]
ids = encode_with_masks(bert_tokenizer, masked)
with torch.no_grad():
    bert_out = bert(torch.tensor([ids]), need_weights=True)
pieces = [bert_tokenizer.id_to_token(i) for i in ids]
mask_row = pieces.index("[MASK]")
rows = torch.stack([w[0, :, mask_row] for w in bert_out.attentions])  # (L, H, S): 各層・各ヘッドの [MASK] の行
L, H = rows.shape[:2]
clues = [i for i, t in enumerate(pieces) if t.lstrip("▁").startswith(("three", "forty"))]
assert len(clues) == 2, f"手がかりの語が一語のトークンになっていない: {pieces}"
on_clues = rows[..., clues].sum(-1)  # (L, H): 手がかりの語に置いた重み
for layer in range(L):
    print(f"第{layer + 1}層: 手がかり（three, forty-two）への重み ヘッドごと", [round(x, 2) for x in on_clues[layer].tolist()])
layer, head = divmod(int(on_clues.argmax()), H)
top = rows[layer, head].topk(3)
print(f"手がかりへの重みが最大: 第{layer + 1}層・ヘッド{head + 1}（{on_clues[layer, head]:.2f}）。その行の上位:",
      ", ".join(f"{pieces[j]} {w:.2f}" for w, j in zip(top.values, top.indices)))  # fmt: skip
print(f"第{L}層の各ヘッドで、[MASK] の行がいちばん重みを置くキー:",
      ", ".join(f"ヘッド{h + 1} {pieces[int(rows[-1, h].argmax())]} {rows[-1, h].max():.2f}" for h in range(H)))  # fmt: skip
last_on_clues = [h for h in range(H) if int(rows[-1, h].argmax()) in clues]
print(f"第{L}層で、いちばん重いキーが手がかりの語（three, forty-two）であるヘッド: {len(last_on_clues)} / {H}",
      f"（{', '.join(f'ヘッド{h + 1}' for h in last_on_clues)}）" if last_on_clues else "")  # fmt: skip
print(f"図の色の目盛りは 0〜{float(rows[-1].max()):.2f}（この図のいちばん大きい重み）です")
viz.plot_attention(
    rows[-1], pieces, [f"ヘッド{h + 1}" for h in range(H)], title=f"第{L}層（最後の層）: [MASK] の行（1 つ目の文）",
    row_label="ヘッド", column_label="キー（見られる側）", vmax=None,
)  # fmt: skip

# %% [markdown]
# **図の見どころ:** 各行（ヘッド）でいちばん明るい列は、上に印刷した「いちばん重みを置くキー」です。
# 最後の層でいちばん重いキーが手がかりの語であるヘッドの数も、上の最後の行に印刷しました。それが 0 なら、
# 最後の層の [MASK] の行は、人が使う手がかり（three, forty-two）よりも、ほかの語や [BOS]・[EOS] のような
# 置き場に多くの重みを置いています。それでも候補の一番が正しい（hundred）なら、それは最後の層の重みだけでは
# 説明できません。各位置の状態は前の層ですでに周りのトークンを混ぜているので、[MASK] が受け取る情報には、
# 重みの小さい手がかりの語の情報も入っているかもしれません（確かめるには重み以外の実験が要ります）。どの層の
# どのヘッドが手がかりをいちばん見たかは、上の「手がかりへの重みが最大」の行のとおりです。色の目盛りは、上に
# 印刷したこの図のいちばん大きい重みまでです。2 つ目の文は描いていません。練習問題 2 で同じことを試せます。

# %% [markdown]
# ## 練習問題
#
# 1. 注意の一行（`(S,)`）から、重みの大きい順に上位 k 個のトークンと重みを返す `top_attended(weights, tokens, k)`
#    を書いてください。

# %%
def top_attended(weights, tokens, k=3):
    # ここに書く
    raise NotImplementedError


# %%
# 合格すればあなたの関数が、まだなら解答例が、この先のセルで使われます
top_fn = check("top_attended", top_attended)

# %% tags=["solution"] jupyter={"source_hidden": true, "outputs_hidden": true}
# 解答例（開くと見えます）
show_solution("top_attended")

# %% [markdown]
# 例として、4 節の GPT が最後に書いた文字の行（最後の層、ヘッドの平均）で、いちばん見られた文字を並べます。

# %%
print(f"最後の文字 {characters[-1]!r} が見た文字:", [(c, round(w, 2)) for c, w in top_fn(last.mean(0)[-1], characters)])

# %% [markdown]
# 2. （試す問題）それを使って、残りの四つの例（翻訳、要約、質問応答、穴埋めの 2 つ目の文）で「いちばん見られた
#    トークン」を並べてみましょう。コピーされた名前、質問の答え、`[MASK]` の手がかりは、重みの上位に入っていますか？

# %% [markdown]
# <details><summary>答えの例</summary>
#
# 行の取り出し方の例です。
#
# - 翻訳: `top_fn(translation.cross_attention[-1].mean(0)[t], translation.src_tokens)`（t は訳文の行）
# - 要約: `top_fn(summary.attention[t], summary.src_tokens)`（t はコピーされた名前の行）
# - 質問応答: `top_fn(answer.attention[qa_layer, qa_head].mean(0), answer.context_tokens)`（3 節で選んだヘッドの、質問の行の平均）
# - 穴埋め: 5 節のセルで `masked = sentences[1]` にして `rows` を作り直し、`top_fn(rows[l, h], pieces)`
#
# 見えるはずのこと: 要約でコピーが勝った語の行では、コピーの分布がアテンションそのものなので、上位 1 位は
# たいてい文書の中のその語そのもので、重みは 1 に近くなります（2 節のヒートマップの明るいマスと同じです）。
# 質問応答では、3 節で選んだヘッドでも、正解のトークンが上位に入るとは限りません（3 節で印刷した、そのヘッドが
# 本文でいちばん重みを置くトークンと比べてください）。`answer.attention` の列は本文のトークンだけなので、
# [CLS] や [SEP] は上位に出てきません。穴埋めの 2 つ目の文では、候補の確率が低くても、手がかりの million や
# hundred が上位に入るヘッドはありえます。重みが手がかりに届いていることと、空欄を正しく当てられることは
# 別です。上位に入っていても「その語を理由に答えた」とまでは言えないことは、02 の 2 節と同じです。
# </details>
