"""ノートブックの練習問題の解答例と、答えが合格すべきテスト。

まずノートブックで自分で書いてみてください。:func:`helpers.check` が :data:`TESTS` のテストを
あなたの関数で実行し、合格すればこの先のセルはあなたの関数を使います。解答例はここにあり、
各ノートブックの折りたたんだ「解答例」のセルが必要なものを表示します。各解答の docstring が、
なぜそう書くのかを日本語で説明します。``tests/notebooks/test_notebook_exercises.py`` が、どの解答例もテストに
合格すること、テストがよくある誤答（``transpose(1, 2)`` を忘れた分割など）を見分けることを確かめます。

(English: the model solutions of the notebooks' exercises and the test each answer must pass;
the explanations in the docstrings are in Japanese, the language of the notebooks.)

形の記号: ``B`` バッチ, ``H`` ヘッド, ``T`` クエリ, ``S`` キー, ``D`` 幅, ``Dh`` ヘッドの幅。
"""

from __future__ import annotations

import math

import torch

Tensor = torch.Tensor


# --------------------------------------------------------------------------------------------
# 01 — the formula: attention with a boolean mask, by hand
# --------------------------------------------------------------------------------------------


def masked_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    """マスク付きのアテンション ``softmax(q·kᵀ/√d_k)·v``。``mask == True`` のキーだけを数えます。

    見てはいけないキーのスコアを ``-inf`` にすると、ソフトマックスの exp(−∞) = 0 でその重みがちょうど 0 に
    なり、残りのキーで合計 1 に配り直されます。どのキーも見られないクエリは、行がすべて ``-inf`` になり
    0/0 = NaN が出るので、``nan_to_num`` で 0 にします（出力は 0 のベクトル。attnlab と同じ約束です）。

    Shape:
        q ``(..., T, Dh)``, k ``(..., S, Dh)``, v ``(..., S, Dv)``, mask ``(T, S)`` boolean → ``(..., T, Dv)``
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, S)
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a row of -inf only: NaN -> 0
    return weights @ v  # (..., T, Dv)


def _test_masked_attention(fn) -> None:
    from attnlab import causal_mask, scaled_dot_product_attention

    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g, dtype=torch.float64) for _ in range(3))
    for mask in (causal_mask(5), torch.rand(5, 5, generator=g) > 0.5, torch.ones(5, 5, dtype=torch.bool)):
        mask[1] = False  # a query with nothing to attend to
        expected, _ = scaled_dot_product_attention(q, k, v, mask, backend="math")
        got = fn(q, k, v, mask)
        assert not torch.isnan(got).any(), "どのキーも見られないクエリは NaN ではなく 0 のベクトルを返します"
        torch.testing.assert_close(got, expected, msg=lambda m: "attnlab と一致しません: " + m)


# --------------------------------------------------------------------------------------------
# 02 — MiniLM: which head looks at the previous token?
# --------------------------------------------------------------------------------------------


def previous_token_score(weights: Tensor) -> Tensor:
    """ヘッドごとに、各トークンが一つ前のトークンに置く注意の重みの平均（位置 1…S−1 の平均）。

    クエリ i がキー i−1 に置く重みは、行列の対角線の一つ下（``offset=-1``）に並んでいます。そこを
    取り出して足し、その個数 S−1 で割ります。位置 0 には一つ前がないので数えません。

    Shape:
        weights ``(H, S, S)`` → ``(H,)``
    """
    S = weights.shape[-1]
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).sum(-1) / (S - 1)  # (H, S-1) -> (H,)


def _test_previous_token_score(fn) -> None:
    S = 6
    previous = torch.zeros(S, S)
    previous[0, 0] = 1.0
    previous[torch.arange(1, S), torch.arange(S - 1)] = 1.0  # every token looks one back
    uniform = torch.full((S, S), 1.0 / S)
    itself = torch.eye(S)
    got = fn(torch.stack([previous, uniform, itself]))
    torch.testing.assert_close(got, torch.tensor([1.0, 1.0 / S, 0.0]))


# --------------------------------------------------------------------------------------------
# 03 — multi-head attention: splitting and merging heads
# --------------------------------------------------------------------------------------------


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """幅を ``n_heads`` 個の切れ端に分け、ヘッドの次元を位置の前に出します。

    ``view(B, T, H, Dh)`` で各位置の幅を H 個の切れ端に分け（ここまでは各位置の中の並べ替えだけ）、
    ``transpose(1, 2)`` で位置とヘッドを入れ替えます。これで最後の二つの次元が ``(T, Dh)`` になり、
    ``matmul`` がヘッドごとに「位置 × 位置」のスコアを計算します。一息に ``reshape(B, H, T, Dh)`` と
    書くと、形は同じでも、ヘッドに幅の切れ端ではなく位置の塊が入ってしまいます。

    Shape:
        x ``(B, T, D)`` → ``(B, H, T, D/H)``
    """
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, T, H, Dh) -> (B, H, T, Dh)


def _test_split_heads(fn) -> None:
    B, T, H, Dh = 2, 5, 3, 4
    x = torch.arange(B * T * H * Dh, dtype=torch.float32).reshape(B, T, H * Dh)
    got = fn(x, H)
    assert tuple(got.shape) == (B, H, T, Dh), f"形は (B, H, T, Dh) = {(B, H, T, Dh)} のはずが {tuple(got.shape)}"
    for h in range(H):  # ヘッド h は、すべての位置を、幅の h 番目の切れ端を通して見る
        torch.testing.assert_close(
            got[:, h], x[:, :, h * Dh : (h + 1) * Dh], msg=lambda m, h=h: f"ヘッド {h} が x の幅の {h} 番目の切れ端になっていません: {m}"
        )


# --------------------------------------------------------------------------------------------
# 04 — attention pooling
# --------------------------------------------------------------------------------------------


def attention_pool(states: Tensor, mask: Tensor, k_weight: Tensor, k_bias: Tensor, query: Tensor):
    """アテンション・プーリング（Yang ら 2016）: 学習で決まる一本のクエリで各状態にスコアを付け、
    本物のトークンだけでソフトマックスを取り、重み付き和と重みを返します。

    スコアは ``query · tanh(W_k h_i + b)``（クエリが一定の加法注意）。パディング（``mask == False``）の
    スコアを ``-inf`` にしてからソフトマックスを取るので、パディングの重みはちょうど 0 になり、同じ文は
    バッチの中で何と一緒に並んでも同じベクトルにまとまります。

    Shape:
        states ``(B, S, D)``, mask ``(B, S)`` boolean, k_weight ``(D, D)``, k_bias ``(D,)``,
        query ``(D,)`` → pooled ``(B, D)``, weights ``(B, S)``
    """
    keys = torch.tanh(states @ k_weight.T + k_bias)  # (B, S, D)
    scores = keys @ query  # (B, S)
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # (B, S)
    pooled = (weights.unsqueeze(-1) * states).sum(1)  # (B, S, 1) * (B, S, D) -> (B, D)
    return pooled, weights


def _test_attention_pool(fn) -> None:
    from attnlab.models.classifier import AttentionPooling

    torch.manual_seed(0)
    pool = AttentionPooling(8)
    states = torch.randn(3, 6, 8)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2, [True] + [False] * 5])
    expected = pool(states, mask)
    pooled, weights = fn(states, mask, pool.k_proj.weight, pool.k_proj.bias, pool.query)
    torch.testing.assert_close(weights, expected.weights, msg=lambda m: "重みが AttentionPooling と違います: " + m)
    torch.testing.assert_close(pooled, expected.pooled, msg=lambda m: "まとめたベクトルが違います: " + m)


# --------------------------------------------------------------------------------------------
# 05 — source-target attention: a hard alignment from the soft one
# --------------------------------------------------------------------------------------------


def hard_alignment(weights: Tensor, src_tokens: list[str], tgt_tokens: list[str]) -> list[tuple[str, str]]:
    """訳文の各トークンを、いちばん重みを置いた原文のトークンと組にします。

    行（訳文のトークン）ごとに ``argmax`` で最大の列を選ぶだけです。ソフトな重みの情報（二番目の相手、
    重みの大きさ）は捨てるので、対応の「硬い」要約にすぎません。

    Shape:
        weights ``(T, S)`` → ``T`` pairs ``(target token, source token)``
    """
    return [(t, src_tokens[int(j)]) for t, j in zip(tgt_tokens, weights.argmax(dim=-1))]


def _test_hard_alignment(fn) -> None:
    w = torch.tensor([[0.1, 0.8, 0.1], [0.7, 0.2, 0.1], [0.2, 0.5, 0.3]])  # rows: targets
    got = fn(w, ["three", "hundred", "[EOS]"], ["百", "三", "[EOS]"])
    assert list(got) == [("百", "hundred"), ("三", "three"), ("[EOS]", "hundred")], got


# --------------------------------------------------------------------------------------------
# 06 — variants: the sliding-window mask by hand
# --------------------------------------------------------------------------------------------


def window_mask(T: int, window: int) -> Tensor:
    """先を隠す工夫つきのスライディングウィンドウ: クエリ ``i`` はキー ``i − window < j ≤ i`` を見られます。

    行の番号 i を縦に、列の番号 j を横に並べてブロードキャストで比べると、``(T, T)`` の表が一度に
    できます。``j <= i`` が先を隠す条件、``j > i − window`` が窓の条件で、窓には自分と直前の
    window − 1 個が入ります。

    Shape:
        → ``(T, T)`` boolean, ``True`` = may attend
    """
    i = torch.arange(T).unsqueeze(1)  # (T, 1)
    j = torch.arange(T).unsqueeze(0)  # (1, T)
    return (j <= i) & (j > i - window)


def _test_window_mask(fn) -> None:
    from attnlab import sliding_window_mask

    for T, window in ((6, 1), (6, 3), (10, 4), (5, 8)):
        got = fn(T, window)
        assert got.dtype == torch.bool, f"マスクは真偽値です（True = 見てよい）。{got.dtype} ではなく"
        assert torch.equal(got, sliding_window_mask(T, window=window)), f"T={T}, window={window}"


# --------------------------------------------------------------------------------------------
# 07 — the Transformer: sinusoidal positions
# --------------------------------------------------------------------------------------------


def sinusoidal_table(length: int, d_model: int) -> Tensor:
    """"Attention Is All You Need" §3.5 の位置エンコーディング: 偶数番目の列は ``sin(pos/10000^(2i/D))``、
    奇数番目の列は同じ角度の ``cos``。

    列の組 (2i, 2i+1) ごとに周波数 1/10000^(2i/D) が決まり、位置はその周波数で回る角度になります。
    角度を位置 × 周波数の外積（ブロードキャスト）で一度に作り、sin と cos を交互の列に入れます。
    桁落ちを避けるため float64 で計算してから float32 に戻します。

    Shape:
        → ``(length, D)``
    """
    pos = torch.arange(length, dtype=torch.float64).unsqueeze(1)  # (L, 1)
    freq = 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (D/2,)
    table = torch.zeros(length, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(pos / freq)
    table[:, 1::2] = torch.cos(pos / freq)
    return table.float()


def _test_sinusoidal_table(fn) -> None:
    from attnlab.positional import SinusoidalPositionalEncoding

    for length, d in ((7, 4), (50, 32)):
        expected = SinusoidalPositionalEncoding(d, max_len=length)(torch.zeros(1, length, d))[0]
        torch.testing.assert_close(fn(length, d), expected, msg=lambda m: "attnlab の表と一致しません: " + m)


# --------------------------------------------------------------------------------------------
# 08 — applications: where does one row of attention look?
# --------------------------------------------------------------------------------------------


def top_attended(weights: Tensor, tokens: list[str], k: int = 3) -> list[tuple[str, float]]:
    """注意の一行で重みの大きい ``k`` 個のトークンを、重みと一緒に大きい順に返します。

    ``topk`` は値と位置を大きい順に返すので、位置をトークンの文字列に引き直すだけです。行が k より
    短いときは、あるだけ返します（``min(k, S)``）。

    Shape:
        weights ``(S,)`` → ``min(k, S)`` pairs
    """
    values, index = weights.topk(min(k, weights.shape[-1]))
    return [(tokens[int(i)], float(v)) for v, i in zip(values, index)]


def _test_top_attended(fn) -> None:
    got = fn(torch.tensor([0.1, 0.5, 0.05, 0.35]), ["a", "b", "c", "d"], k=2)
    assert [t for t, _ in got] == ["b", "d"], got
    assert [round(w, 6) for _, w in got] == [0.5, 0.35], got
    assert len(fn(torch.tensor([1.0]), ["x"], k=3)) == 1


#: Exercise name → its test (called with the reader's function; raises on a wrong answer).
TESTS = {
    "masked_attention": _test_masked_attention,
    "previous_token_score": _test_previous_token_score,
    "split_heads": _test_split_heads,
    "attention_pool": _test_attention_pool,
    "hard_alignment": _test_hard_alignment,
    "window_mask": _test_window_mask,
    "sinusoidal_table": _test_sinusoidal_table,
    "top_attended": _test_top_attended,
}
