"""§5 (multi-head attention) and §6 (positional encoding): the numbers behind the second edition's
corrections, each checked against attnlab's own computation done here another way, and the pages'
text where the corrections live.

- §5: tutorial 001's closing ``transpose(1, 2).view`` scrambles positions (where each head's piece
  lands, and which rows a word reaches after the join), and it is the same as joining correctly
  split heads with ``view`` and no transpose back.
- §6: a causal mask breaks self-attention's permutation symmetry (a word's output then depends on
  the set of words up to it); RoPE scores depend on the positions only through n − m, and still on
  q and k; the RoPE figure comes after the text that explains it.
"""

from __future__ import annotations

import dataclasses
import math
import re

import pytest
import torch
from fastapi.testclient import TestClient

from attnlab.positional import RotaryEmbedding, sinusoidal_encoding
from attnlab.web import lesson as L
from attnlab.web.app import create_app
from attnlab.web.lesson import s05_multi_head as S5


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), base_url="http://127.0.0.1:8000")


# --------------------------------------------------------------------------------------------
# §5: the tutorial's join.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("T, H, Dh", [(5, 2, 4), (6, 3, 4), (4, 4, 1), (7, 2, 3), (3, 1, 8)])
def test_the_tutorials_join_is_view_without_transposing_back(T, H, Dh):
    """The tutorial's closing line on an untransposed (B, T, H, Dh) tensor gives exactly what
    correctly split heads (B, H, T, Dh) joined by view alone give, and differs from the correct
    join unless there is one head."""
    g = torch.Generator().manual_seed(T * 100 + H)
    step = torch.randn(2, T, H, Dh, generator=g, dtype=torch.float64)  # (B, T, H, Dh) as the tutorial leaves it
    heads = step.transpose(1, 2).contiguous()  # (B, H, T, Dh): the same pieces, laid out as a correct split
    joined = S5.tutorial_join(step)  # (B, T, D)
    torch.testing.assert_close(joined, heads.view(2, T, H * Dh), atol=0, rtol=0)
    correct = torch.stack([S5.join_heads(heads[b]) for b in range(2)])  # (B, T, D)
    torch.testing.assert_close(correct, step.reshape(2, T, H * Dh), atol=0, rtol=0)  # row t = word t's heads
    assert torch.equal(joined, correct) == (H == 1)


@pytest.mark.parametrize(
    "text, d_model, n_heads", [("猫 が 魚 を 食べた", 8, 2), ("a b c d e f", 12, 3), ("x y", 8, 8)]
)
def test_the_pieces_and_the_rows_a_word_reaches_follow_the_join(text, d_model, n_heads):
    # The reference the page's lessonmath.js is held to (tests/web/lesson/test_lessonmath_parity.py).
    bad = S5.multihead_example(text, d_model, n_heads, seed=3).model_dump(mode="json")["without_transpose"]
    T, H, Dh = len(text.split()), n_heads, d_model // n_heads
    # Where the join puts each piece, read off the numbers: fill piece (t, h) of a tensor with
    # t·H + h + 1 and look at the joined rows' column blocks.
    labels = (torch.arange(T).view(T, 1, 1) * H + torch.arange(H).view(1, H, 1) + 1).expand(T, H, Dh).double()
    joined = S5.tutorial_join(labels.unsqueeze(0))[0].view(T, H, Dh)  # (T, H, Dh)
    expect = [[divmod(int(joined[i, b, 0]) - 1, H) for b in range(H)] for i in range(T)]
    assert [[tuple(p) for p in row] for row in bad["pieces"]] == expect
    # The rows a word reaches after the join are the rows holding its pieces, found by running the
    # tutorial's whole forward with that word's vector moved.
    mha = L.seeded_attention(d_model, n_heads, 3, decimals=2)
    x = torch.stack([L.word_vector(w, d_model, 3) for w in text.split()]).round(decimals=1)  # (T, D)
    with torch.no_grad():
        base = S5.tutorial_multihead(mha, x)
        for j in range(T):
            moved = x.clone()
            moved[j] += 0.5
            again = S5.tutorial_multihead(mha, moved)
            merged = (again["merged"] - base["merged"]).abs().amax(dim=1) > 1e-12  # (T,)
            assert merged.tolist() == bad["influence_merged"][j] == [any(t == j for t, _ in row) for row in expect]
            split = (again["step"] - base["step"]).flatten(1).abs().amax(dim=1) > 1e-12  # (T,)
            assert split.tolist() == bad["influence_split"][j] == [i == j for i in range(T)]
            # After W_o a row mixes only its own columns, so the output changes in the same rows.
            out = (again["output"] - base["output"]).abs().amax(dim=1) > 1e-12
            assert out.tolist() == merged.tolist()
    foreign = sum(t != i for i, row in enumerate(expect) for t, _ in row)
    assert (foreign == 0) == (H == 1)


def test_with_two_heads_the_first_row_holds_head_1_of_the_first_two_words():
    """What §5's text and its third question say about the default example."""
    bad = S5.multihead_example("猫 が 魚 を 食べた", n_heads=2).model_dump(mode="json")["without_transpose"]
    assert [tuple(p) for p in bad["pieces"][0]] == [(0, 0), (1, 0)]
    assert sum(t != i for i, row in enumerate(bad["pieces"]) for t, _ in row) == 8  # of 10 pieces
    one = S5.multihead_example("猫 が 魚 を 食べた", n_heads=1).model_dump(mode="json")
    assert one["without_transpose"]["weights"] == [[[1.0]]] * 5  # every word attends only to itself
    assert one["without_transpose"]["influence_merged"] == one["without_transpose"]["influence_split"]
    assert one["without_transpose"]["max_abs_diff"] > 0.1  # still wrong: nothing passes between words


# --------------------------------------------------------------------------------------------
# §6: the causal mask, RoPE.
# --------------------------------------------------------------------------------------------


def test_a_causal_mask_breaks_the_symmetry_only_where_the_earlier_words_differ():
    a, b = "猫 が 犬 を 追う", "犬 が 猫 を 追う"
    got = L.word_order_view(a=a, b=b).model_dump(mode="json")  # the page's wordOrder is held to it
    causal = got["causal_without_positions"]
    mha = L.seeded_attention(16, 2, 0)
    xa = torch.stack([L.word_vector(w, 16, 0) for w in a.split()])  # (T, D)
    xb = torch.stack([L.word_vector(w, 16, 0) for w in b.split()])
    with torch.no_grad():
        # Another way to the same numbers: row i of causal attention is unmasked attention over the first i + 1 words.
        prefix_a = torch.stack([mha(xa[: i + 1].unsqueeze(0))[0][0, -1] for i in range(5)])  # (T, D)
        prefix_b = torch.stack([mha(xb[: i + 1].unsqueeze(0))[0][0, -1] for i in range(5)])
    torch.testing.assert_close(torch.tensor(causal["out_a"], dtype=torch.float64), prefix_a, atol=1e-12, rtol=0)
    torch.testing.assert_close(torch.tensor(causal["out_b"], dtype=torch.float64), prefix_b, atol=1e-12, rtol=0)
    # 猫, が, 犬 see different sets of words in the two sentences; を and 追う see the same set.
    words_before = [{w for w in s.split()[: i + 1]} for s in (a, b) for i in range(5)]
    same_set = [words_before[i] == words_before[5 + got["match"][i]] for i in range(5)]
    assert same_set == [False, False, False, True, True]
    assert [d < 1e-9 for d in causal["diff"]] == same_set
    assert min(d for d, s in zip(causal["diff"], same_set, strict=True) if not s) > 0.1
    assert causal["sentence_diff"] > 0.1
    assert max(got["without_positions"]["diff"]) < 1e-12  # unmasked: only reordered


@pytest.mark.parametrize("length, d_model, seed", [(12, 8, 0), (12, 8, 1), (5, 2, 7), (32, 64, 3)])
def test_rope_scores_equal_rotary_embedding_at_each_pair_of_positions(length, d_model, seed):
    # The reference the page's lessonmath.js is held to (tests/web/lesson/test_lessonmath_parity.py).
    got = dataclasses.asdict(L.rope_scores(length, d_model, seed))
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, d_model, generator=g, dtype=torch.float64).round(decimals=2)
    assert got["q"] == q.tolist() and got["k"] == k.tolist()
    rot = RotaryEmbedding(d_model)
    # Each pair placed on its own: q alone at position m (offset m), k alone at position n.
    want = torch.tensor(
        [
            [float(rot(q.view(1, -1), offset=m)[0] @ rot(k.view(1, -1), offset=n)[0]) for n in range(length)]
            for m in range(length)
        ]
    ) / math.sqrt(d_model)
    scores = torch.tensor(got["scores"], dtype=torch.float64)  # (T, T)
    torch.testing.assert_close(scores, want.double(), atol=2e-5, rtol=0)
    for offset in range(-length + 1, length):  # the positions enter only through n − m
        diagonal = torch.diagonal(scores, offset)
        assert float(diagonal.max() - diagonal.min()) < 1e-4
    assert got["plain"] == pytest.approx(float(q @ k) / math.sqrt(d_model), abs=1e-6)
    torch.testing.assert_close(
        torch.diagonal(scores), torch.full((length,), got["plain"], dtype=torch.float64), atol=2e-5, rtol=0
    )


def test_rope_scores_still_depend_on_q_and_k():
    one = torch.tensor(L.rope_scores(seed=0).scores)
    two = torch.tensor(L.rope_scores(seed=1).scores)
    assert one.shape == two.shape == (12, 12)
    for offset in (-5, 0, 3):  # another q and k: other values on the same diagonal
        assert abs(float(torch.diagonal(one, offset)[0] - torch.diagonal(two, offset)[0])) > 0.05


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"d_model": 7}, "d_model must be even (RoPE turns pairs of components), got 7"),
        ({"length": 1}, "length must be a whole number from 2 to 32"),
        ({"length": 33}, "length must be a whole number from 2 to 32"),
        ({"seed": -1}, "seed must be a whole number from 0 to 1000000"),
        ({"seed": "1"}, "seed must be a whole number from 0 to 1000000"),
    ],
)
def test_rope_bad_input_is_a_one_line_error(kwargs, message):
    with pytest.raises(ValueError) as err:
        L.rope_scores(**kwargs)
    assert str(err.value) == message


def test_the_sinusoid_positions_nearby_are_alike_on_the_whole():
    """What §6 says of its similarity figure: 1 on the diagonal, and the neighbours are the most
    alike (the text does not claim more: farther positions are not always less alike)."""
    pe = sinusoidal_encoding(16, 32).double()
    unit = pe / pe.norm(dim=1, keepdim=True)
    sim = unit @ unit.T
    for p in range(1, 15):
        row = sim[p].clone()
        assert row[p] == pytest.approx(1.0)
        row[p] = -2
        assert int(row.argmax()) in (p - 1, p + 1)


# --------------------------------------------------------------------------------------------
# The pages' text.
# --------------------------------------------------------------------------------------------


def _texts(section, lang: str) -> str:
    pick = lambda t: getattr(t, lang)  # noqa: E731
    parts = [pick(section.title), pick(section.summary)]
    parts += [pick(t) for t in section.objectives + section.key_points]
    parts += [pick(b.html) for b in section.blocks if b.html is not None and b.type != "memo"]
    parts += [pick(b.code) for b in section.blocks if b.code is not None and b.source is None]
    parts += [pick(t.text) for t in section.try_]
    for q in section.check:
        parts += [pick(q.question), pick(q.hint), pick(q.explanation), *(pick(c) for c in q.choices)]
    parts += [pick(v) for k, v in section.strings.items() if not k.startswith("memo_")]
    return "\n".join(parts)


@pytest.fixture(scope="module")
def sections():
    return L.default_sections()


@pytest.mark.parametrize("lang", ["ja", "en"])
def test_section_5_says_what_the_join_does_and_labels_each_grid_truly(sections, lang):
    s5 = sections[5]
    text = _texts(s5, lang)
    assert "FIXME" not in text and "TODO" not in text
    strings = {k: getattr(v, lang) for k, v in s5.strings.items()}
    # Three grids, each named for the stage it is computed at; none claims "before W_o" wrongly.
    if lang == "ja":
        assert "つなげる前" in strings["influence_split"] and "W_o の前" not in strings["influence_split"]
        assert (
            "つなげたあと（W_o の前）" in strings["influence_merged"]
            and "つなげたあと（W_o の前）" in strings["influence_ok"]
        )
        assert "位置が入れ替わります" in text and "重み行列" in text and "注目の重み" not in text
        assert "マルチヘッド注意" in text and "ヘッド" in text
    else:
        assert "before the join" in strings["influence_split"] and "W_o" not in strings["influence_split"]
        assert (
            "after the join (before W_o)" in strings["influence_merged"]
            and "after the join (before W_o)" in strings["influence_ok"]
        )
        assert "scrambled" in text and "weight matrices" in text
        assert "multi-head attention" in text.lower() and "head" in text
    code = next(getattr(b.code, lang) for b in s5.blocks if b.type == "code" and b.source is None)
    comments = re.findall(r"#\s*(.+)", code)
    assert len(comments) >= 5
    for c in comments:  # code comments in the page's language
        has_japanese = re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", c) is not None
        assert has_japanese == (lang == "ja") or c.startswith(("out =", "(")), c


@pytest.mark.parametrize("lang", ["ja", "en"])
def test_section_6_says_where_the_symmetry_holds_and_what_rope_depends_on(sections, lang):
    s6 = sections[6]
    text = _texts(s6, lang)
    assert "FIXME" not in text and "上の MiniLM" not in text and "MiniLM above" not in text
    # §6 says 因果マスク, the lesson's one term; where §6 first uses it, 先を隠す工夫 explains it, once.
    if lang == "ja":
        assert text.count("先を隠す工夫") == 1
        body = re.sub(r"<[^>]+>", "", "\n".join(b.html.ja for b in s6.blocks if b.html is not None))
        uses = [m.start() for m in re.finditer("先を隠す工夫", body)]
        assert len(uses) == 1 and body[uses[0] - len("因果マスク（") : uses[0]] == "因果マスク（"
        assert body.index("因果マスク") == uses[0] - len("因果マスク（")  # at its first use on the page
    if lang == "ja":
        assert "マスクをかけない自己注意" in text and "並べ替えに対して同変" in text
        assert "差 n − m を通してだけ" in text and "q と k の中身" in text
        assert "位置エンコーディング" in text and "RoPE" in text
        assert "2 つの位置の差だけで決まります" not in text
    else:
        assert "unmasked self-attention" in text.lower() and "permutation-equivariant" in text
        assert "only through the difference n − m" in text and "what q and k hold" in text
        assert "positional encoding" in text and "RoPE" in text
        assert "depends only on how far apart" not in text
    # The figures: a title and, for the heatmaps, a colour key string each.
    for key in ("table_title", "sim_title", "sim_row", "rope_title", "key_table", "key_sim", "key_rope"):
        assert getattr(s6.strings[key], lang).strip(), key
    # The RoPE figure comes after the text that explains RoPE, the sinusoid figure before it.
    order = [(b.type, b.widget, getattr(b.html, lang) if b.html else "") for b in s6.blocks]
    rope_widget = next(i for i, (t, w, _) in enumerate(order) if w == "rope-scores")
    explained = next(i for i, (t, _, h) in enumerate(order) if t == "html" and "q · (R(n − m) k)" in h)
    # The formula is written readably, not as raw TeX subscripts.
    assert not any("R_{" in h or "R_m" in h for _, _, h in order) and "R_{" not in text
    pe_widget = next(i for i, (t, w, _) in enumerate(order) if w == "pe-table")
    assert pe_widget < explained < rope_widget
    # MiniLM is referred to by its section, with a link to it.
    assert any(link.href == "/lesson/5" for link in s6.links)
    minilm = [h for _, _, h in order if "MiniLM" in h]
    assert minilm and all(("第 5 節" if lang == "ja" else "section 5") in h for h in minilm)


@pytest.mark.parametrize("n", [5, 6])
def test_the_checks_of_sections_5_and_6_test_understanding(sections, n):
    check = sections[n].check
    assert 3 <= len(check) <= 5
    assert sum(q.kind in ("predict", "transfer") for q in check) >= len(check) / 2
    assert len({q.answer for q in check}) >= 3
    for q in check:
        for lang in ("ja", "en"):
            assert "FIXME" not in getattr(q.hint, lang) and len(getattr(q.hint, lang)) >= 20
    # A predict question's "now try it" sets parameters the section's widgets read.
    read = {
        5: {"words", "dm", "heads", "seed", "text", "layer", "head", "q", "hv"},
        6: {"a", "b", "len", "dm", "p", "rseed"},
    }[n]
    for q in check:
        assert set(q.params) <= read, q.params
    for item in sections[n].try_:
        assert set(item.params) <= read, item.params


@pytest.mark.parametrize("n", [5, 6])
def test_provenance_is_only_in_the_technical_notes(sections, n):
    s = sections[n]
    for key, value in s.strings.items():
        for lang in ("ja", "en"):
            if re.search(r"/api/|attnlab\.|POST ", getattr(value, lang)):
                assert key.startswith("memo_"), (n, key)
    for b in s.blocks:
        if b.html is not None and b.type != "memo":
            for lang in ("ja", "en"):
                assert "/api/lesson" not in getattr(b.html, lang), (n, b.type)


def test_sections_5_to_8_and_the_final_check_take_about_half_the_basic_path(sections):
    basic = sum(sections[n].teacher.minutes for n in (5, 6, 7, 8, max(sections)))
    assert 40 <= basic <= 50, basic  # of the basic path's 90 minutes
    assert all(sections[n].teacher.further_minutes > 0 for n in (5, 6, 7, 8))  # each has a 発展 part
