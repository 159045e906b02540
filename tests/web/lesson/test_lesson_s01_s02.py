"""§1 and §2 of the lesson, without a browser.

§1's second half compares one RNN layer with one Transformer layer: the steps that must wait (T and
1), the time of one training step of two same-width layers built from attnlab's own modules, and,
apart, the shipped encoders reading one sentence. These tests check the structure and the counts,
that the layers are what the page says they are, and that every time shown is the one the timing
functions returned. They never assert that one time is smaller than another: speed is measured in
benchmarks (benchmarks/lesson_latency.py), not asserted in timed tests.

The content checks hold §1 and §2 to the lesson's rules: the questions test prediction and
transfer, their answers sit at varied positions, every question has a hint, the terms are the
glossary's, and provenance lines stay in the folded 技術メモ.
"""

from __future__ import annotations

import re

import pytest
import torch
from fastapi.testclient import TestClient
from pydantic import ValidationError

from attnlab.assets import locate
from attnlab.data.enja import normalize_input
from attnlab.layers import EncoderBlock
from attnlab.web.app import create_app
from attnlab.web.lesson import content
from attnlab.web.lesson import s01_what_attention_does as S1

LOCAL = "http://127.0.0.1:8000"
SENTENCE = "彼は昨日駅で古い友達に会った。"  # 6 tokens, for the timing endpoint
DEFAULT = "彼女は毎日学校まで歩いて行く。"  # §1's default, "She walks to school every day."
MINE = ("01-what-attention-does.md", "02-seq2seq-bottleneck.md")


def present(*names: str) -> bool:
    try:
        for name in names:
            locate.shipped_model_dir(name)
    except FileNotFoundError:
        return False
    return True


needs_models = pytest.mark.skipif(
    not present("ja-en", "rnn-attention"),
    reason="needs the shipped models ja-en and rnn-attention (make models ONLY=ja-en, make models ONLY=rnn-attention)",
)


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), base_url=LOCAL)


@pytest.fixture(scope="module")
def ja_en():
    from attnlab.loading import load_model

    return load_model(locate.shipped_model_dir("ja-en"))


@pytest.fixture(scope="module")
def rnn_attention():
    from attnlab.loading import load_model

    return load_model(locate.shipped_model_dir("rnn-attention"))


@pytest.fixture(scope="module")
def rnn_pair():
    from attnlab.loading import load_model

    return {
        name: load_model(locate.shipped_model_dir(name), family="translate") for name in ("rnn-plain", "rnn-attention")
    }


def bottleneck(rnn_pair, body: dict) -> dict:
    """§2's bottleneck as the page receives it from engine/rnn.js: the Python reference it is
    tested against (the endpoint is gone)."""
    from attnlab.web.lesson import s02_seq2seq_bottleneck as S2

    req = S2.BottleneckRequest(**body)
    return S2.bottleneck_view(rnn_pair["rnn-plain"], rnn_pair["rnn-attention"], req).model_dump()


def parameters(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in {id(p): p for p in module.parameters()}.values())


# --------------------------------------------------------------------------------------------
# The two layers and one training step.
# --------------------------------------------------------------------------------------------


def test_the_compared_layers_are_one_gru_layer_and_one_transformer_layer_of_the_same_width():
    before = torch.random.get_rng_state()
    rnn, transformer = S1.comparison_layers()
    assert torch.equal(torch.random.get_rng_state(), before)  # the global random state is left alone
    assert isinstance(rnn, torch.nn.GRU) and isinstance(transformer, EncoderBlock)
    assert rnn.num_layers == 1 and not rnn.bidirectional and rnn.batch_first
    assert rnn.hidden_size == rnn.input_size == transformer.self_attn.d_model == S1.COMPARE_WIDTH
    assert transformer.self_attn.n_heads == S1.COMPARE_HEADS and transformer.norm == "pre"
    assert transformer.ff.up_proj.out_features == S1.COMPARE_FF == 2 * S1.COMPARE_WIDTH
    # The page says the Transformer layer has about 1.3 times the GRU's parameters.
    assert parameters(transformer) / parameters(rnn) == pytest.approx(1.3, abs=0.05)
    again = S1.comparison_layers()
    for a, b in zip((rnn, transformer), again):  # fixed seeds: the same weights every time
        for (name, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
            assert torch.equal(p, q), name


@pytest.mark.parametrize("kind", ["rnn", "transformer"])
def test_one_training_step_is_the_forward_and_the_backward_pass(kind):
    rnn, transformer = S1.comparison_layers(width=16, heads=2, ff_width=32, seed=3)
    layer = rnn if kind == "rnn" else transformer
    x = S1.comparison_input(batch=4, length=7, width=16)
    assert x.shape == (4, 7, 16) and torch.equal(x, S1.comparison_input(batch=4, length=7, width=16))
    assert S1.layer_output(layer, x).shape == (4, 7, 16)  # (B, T, D) for both
    loss = S1.training_step(layer, x)
    want_loss = S1.layer_output(layer, x).pow(2).mean()
    want = torch.autograd.grad(want_loss, list(layer.parameters()))
    assert loss.item() == pytest.approx(want_loss.item(), rel=1e-6)
    for (name, p), g in zip(layer.named_parameters(), want):
        assert p.grad is not None, name
        torch.testing.assert_close(p.grad, g, rtol=1e-5, atol=1e-7)
    S1.training_step(layer, x)  # the gradients are set anew, not added up
    for p, g in zip(layer.parameters(), want):
        torch.testing.assert_close(p.grad, g, rtol=1e-5, atol=1e-7)


def test_the_training_step_timings_are_measured_once_per_batch_and_length(monkeypatch):
    # Batch 2 is none of the widget's BATCHES: no other test or request of this process has
    # measured it, so the first call below measures everything.
    assert 2 not in S1.BATCHES
    calls: list[tuple[str, tuple[int, ...]]] = []
    real = S1.training_step

    def counted(layer, x):
        calls.append(("rnn" if isinstance(layer, torch.nn.RNNBase) else "transformer", tuple(x.shape)))
        return real(layer, x)

    monkeypatch.setattr(S1, "training_step", counted)
    rnn_s, tr_s = S1.training_step_seconds(2, [4, 6], repeats=2)
    assert len(rnn_s) == len(tr_s) == 2 and all(t > 0 for t in rnn_s + tr_s)
    width = S1.COMPARE_WIDTH
    # One warm-up per layer (at the longest length), then 2 rounds over both layers and lengths.
    assert sorted(calls[:2]) == [("rnn", (2, 6, width)), ("transformer", (2, 6, width))]
    assert sorted(calls[2:]) == sorted(2 * [(k, (2, n, width)) for k in ("rnn", "transformer") for n in (4, 6)])
    calls.clear()
    assert S1.training_step_seconds(2, [4, 6], repeats=2) == (rnn_s, tr_s)  # remembered
    assert calls == []
    S1.training_step_seconds(2, [4, 6, 5], repeats=2)  # only the new length is measured
    assert {shape[1] for _, shape in calls} == {5}


def test_which_is_faster_is_read_from_the_ratio():
    assert S1.which_is_faster(S1.CLOSE) == "transformer" and S1.which_is_faster(3.0) == "transformer"
    assert S1.which_is_faster(1 / S1.CLOSE) == "rnn" and S1.which_is_faster(0.2) == "rnn"
    assert S1.which_is_faster(1.0) == S1.which_is_faster(1.1) == S1.which_is_faster(0.9) == "close"


# --------------------------------------------------------------------------------------------
# The view (the page computes the same; tests/site/test_site_translate_browser.py).
# --------------------------------------------------------------------------------------------


@needs_models
def steps(rnn_attention, ja_en, **body) -> dict:
    """What §1's parallel-steps widget shows for ``body`` (the page computes the same from the
    site's measurements): :func:`S1.parallel_steps`, the view the page is tested against."""
    return S1.parallel_steps(rnn_attention, ja_en, S1.StepsRequest(**body)).model_dump()


def test_parallel_steps_counts_and_layers_come_from_the_models(ja_en, rnn_attention):
    got = steps(rnn_attention, ja_en, text=SENTENCE, batch=1)
    T = len(ja_en.src_tok.encode(normalize_input(SENTENCE, "ja")))
    assert got["sentence_tokens"] == T == 6
    assert (got["sentence_rnn_steps"], got["sentence_transformer_steps"]) == (T, 1)
    assert (got["training_rnn_steps"], got["training_transformer_steps"], got["generation_steps"]) == (T, 1, T)
    assert got["batch"] == 1 and got["batches"] == [1, 8, 32]
    assert got["lengths"] == list(S1.STEP_LENGTHS) == [8, 16, 32, 64, 128]
    assert got["rnn_steps"] == got["lengths"]  # T steps in a row for one RNN layer
    assert got["transformer_steps"] == [1] * 5  # one for one Transformer layer
    rnn, transformer = S1.comparison_layers()
    assert got["rnn_layer"] == {
        "kind": "rnn",
        "cell": "GRU",
        "width": rnn.hidden_size,
        "heads": None,
        "ff_width": None,
        "parameters": parameters(rnn),
    }
    assert got["transformer_layer"] == {
        "kind": "transformer",
        "cell": None,
        "width": transformer.self_attn.d_model,
        "heads": transformer.self_attn.n_heads,
        "ff_width": transformer.ff.up_proj.out_features,
        "parameters": parameters(transformer),
    }
    assert len(got["rnn_train_ms"]) == len(got["transformer_train_ms"]) == len(got["ratio"]) == 5
    assert got["repeats"] == S1.TRAIN_REPEATS and got["threads"] == torch.get_num_threads()
    shipped = got["shipped"]
    rc, tc = rnn_attention.model.config, ja_en.model.config
    assert shipped["tokens"] == T
    assert shipped["rnn"] == {
        "model": "rnn-attention",
        "kind": "rnn",
        "cell": rc.cell.upper(),
        "layers": rc.n_layers,
        "width": rc.hidden_size,
        "parameters": parameters(rnn_attention.model),
    }
    assert shipped["transformer"] == {
        "model": "ja-en",
        "kind": "transformer",
        "cell": None,
        "layers": tc.n_encoder_layers,
        "width": tc.d_model,
        "parameters": parameters(ja_en.model),
    }
    assert shipped["rnn_steps"] == T * rc.n_layers and shipped["transformer_steps"] == tc.n_encoder_layers == 4
    # The text quotes these sizes: one GRU layer 188 wide against four encoder layers 256 wide.
    assert (rc.n_layers, rc.hidden_size, tc.n_encoder_layers, tc.d_model) == (1, 188, 4, 256)
    again = steps(rnn_attention, ja_en, text=SENTENCE, batch=1)
    assert again["rnn_train_ms"] == got["rnn_train_ms"] and again["shipped"] == shipped  # measured once


@needs_models
def test_every_time_shown_is_what_the_timing_functions_returned(monkeypatch, ja_en, rnn_attention):
    asked: dict[str, object] = {}

    def training(batch, lengths):
        asked["training"] = (batch, list(lengths))
        return [0.002 * (i + 1) for i in range(len(lengths))], [0.001, 0.004, 0.003, 0.009, 0.005]

    def shipped(models, lengths):
        asked["shipped"] = (models, list(lengths))
        return [[0.0005], [0.0020]]

    monkeypatch.setattr(S1, "training_step_seconds", training)
    monkeypatch.setattr(S1, "encoder_seconds", shipped)
    text = "この本はとても面白い。"
    got = steps(rnn_attention, ja_en, text=text, batch=8)
    T = len(ja_en.src_tok.encode(normalize_input(text, "ja")))
    assert asked["training"] == (8, [8, 16, 32, 64, 128])
    rnn_model, transformer_model = asked["shipped"][0]  # the shipped models given to the view
    assert rnn_model.config == rnn_attention.model.config and transformer_model.config == ja_en.model.config
    assert asked["shipped"][1] == [T]
    assert got["rnn_train_ms"] == pytest.approx([2.0, 4.0, 6.0, 8.0, 10.0])
    assert got["transformer_train_ms"] == pytest.approx([1.0, 4.0, 3.0, 9.0, 5.0])
    assert got["ratio"] == pytest.approx([2.0, 1.0, 2.0, 8 / 9, 2.0])
    assert got["faster"] == ["transformer", "close", "transformer", "close", "transformer"]
    assert got["speedup"] == pytest.approx([2.0, 1.0, 2.0, 9 / 8, 2.0])
    sh = got["shipped"]
    assert (sh["rnn_ms"], sh["transformer_ms"]) == pytest.approx((0.5, 2.0))
    assert sh["faster"] == "rnn" and sh["speedup"] == pytest.approx(4.0)


@pytest.mark.parametrize(
    "body, pattern",
    [
        ({"batch": 2}, "batch must be one of \\[1, 8, 32\\]"),
        ({"batch": "32"}, "valid integer"),
        ({"batch": True}, "valid integer"),
        ({"batch": 32.0}, "valid integer"),
        ({"text": ""}, "at least 1 character"),
        ({"length": 8}, "Extra inputs"),
    ],
)
def test_parallel_steps_bad_input_is_refused(body, pattern):
    with pytest.raises(ValidationError) as refused:
        S1.StepsRequest(**body)
    assert re.search(pattern, str(refused.value)), str(refused.value)


# --------------------------------------------------------------------------------------------
# The content of §1 and §2.
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sections():
    every = content.load_sections()
    return {1: every[1], 2: every[2]}


@pytest.mark.parametrize("n", [1, 2])
def test_the_checks_test_understanding(sections, n):
    checks = sections[n].check
    assert 3 <= len(checks) <= 5
    assert sum(q.kind in ("predict", "transfer") for q in checks) * 2 >= len(checks)
    assert len({q.answer for q in checks}) >= 3  # the right answers are stored at varied positions
    for q in checks:
        for lang in ("ja", "en"):
            hint, answer = getattr(q.hint, lang), getattr(q.choices[q.answer], lang)
            assert "FIXME" not in hint and len(hint) > 15
            assert answer not in hint  # a hint helps without giving the answer away
        if q.kind == "predict" and q.params:  # its "now try it" link sets parameters the widgets read
            assert set(q.params) <= {"text", "tok", "batch", "nums"}


@pytest.mark.parametrize("name", MINE)
@pytest.mark.parametrize("lang", ["ja", "en"])
def test_no_placeholder_and_provenance_only_in_memos(name, lang):
    text = (content.CONTENT_DIR / lang / name).read_text(encoding="utf-8")
    assert not re.search(r"FIXME|TODO|できしだい|coming soon", text)
    front = text.split("\n---\n", 1)[0]
    for line in front.splitlines():  # a widget string naming an endpoint or a function is a memo
        if re.search(r"/api/|attnlab\.\w", line):
            assert re.match(r"\s+memo_\w+:", line), line


def test_the_japanese_terms_are_the_glossarys(sections):
    ja1 = (content.CONTENT_DIR / "ja" / MINE[0]).read_text(encoding="utf-8")
    ja2 = (content.CONTENT_DIR / "ja" / MINE[1]).read_text(encoding="utf-8")
    assert ja1.count("アテンション（注意機構）") == 1 and "注意機構" not in ja1.replace("アテンション（注意機構）", "")
    assert "注意機構" not in ja2
    for text in (ja1, ja2):
        assert "注目の重み" not in text
    body = ja1.split("\n---\n", 1)[1]
    assert "注意の重み" in body
    # 因果マスク is the term (issue 34): §1 names it once, its explanation 先を隠す工夫 beside it, never
    # the paraphrase alone; §2 needs neither.
    assert body.count("因果マスク（先を隠す工夫") == 1 and ja1.count("先を隠す工夫") == ja1.count("因果マスク") == 1
    assert "因果マスク" not in ja2 and "先を隠す工夫" not in ja2
    # Code comments in a literal block are in the page's language.
    for lang in ("ja", "en"):
        two = (content.CONTENT_DIR / lang / MINE[1]).read_text(encoding="utf-8")
        comments = re.findall(r"^# (.+)$", two.split("```bash", 1)[1].split("```", 1)[0], re.M)
        assert comments and all(bool(re.search(r"[ぁ-んァ-ヶ一-龠]", c)) == (lang == "ja") for c in comments)


def test_section_2_points_forward_to_additive_attention(sections):
    body = " ".join(b.html.ja for b in sections[2].blocks if b.type == "note" and b.html)
    assert "加法注意" in body and "内積注意" in body and "第 3 節" in body
    body_en = " ".join(b.html.en for b in sections[2].blocks if b.type == "note" and b.html)
    assert "additive attention" in body_en and "dot-product attention" in body_en and "Section 3" in body_en


def test_section_1_puts_the_caveat_before_the_comparison(sections):
    kinds = [(b.type, b.widget) for b in sections[1].blocks]
    caveat = kinds.index(("note", None))
    assert caveat < kinds.index(("widget", "parallel-steps"))
    ja, en = (re.sub(r"<[^>]+>", "", getattr(sections[1].blocks[caveat].html, lang)) for lang in ("ja", "en"))
    assert "バッチ 1 の推論" in ja and "ふつうは RNN（rnn-attention）のほうが" in ja and "速く読み終えます" in ja
    assert "batch 1, inference" in en and "the RNN (rnn-attention) usually finishes before" in en


# --------------------------------------------------------------------------------------------
# What §1's text says the shipped ja-en does, computed by the view the widget's page code mirrors.
# --------------------------------------------------------------------------------------------

needs_ja_en = pytest.mark.skipif(not present("ja-en"), reason="needs the shipped model ja-en (make models ONLY=ja-en)")


def translated(ja_en, text: str) -> dict:
    """What §1's translation widget shows for ``text``: :func:`S1.translation_view`, which the
    page's own computation is tested against (tests/site/test_site_translate_browser.py)."""
    return S1.translation_view(ja_en, S1.TranslationRequest(text=text)).model_dump()


def weights_of(view: dict, layer: int, token: str) -> dict[str, float]:
    """The row of the output ``token`` in decoder layer ``layer`` (counted from 1, as the page's
    layer menu counts), averaged over the heads (the page's default, head 0): input token → weight."""
    assert len(set(view["src_tokens"])) == len(view["src_tokens"])
    assert 1 <= layer <= view["n_decoder_layers"]
    t = view["tgt_tokens"].index(token)
    return dict(zip(view["src_tokens"], view["cross_mean"][layer - 1][t], strict=True))


def body(section, lang: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", getattr(b.html, lang)) for b in section.blocks if b.html)


@needs_ja_en
def test_section_1s_default_sentence_reads_as_the_text_says(ja_en, sections):
    """§1's default 「彼女は毎日学校まで歩いて行く。」 is translated "She walks to school every day."; the
    prediction above the map (as it opens: the last decoder layer, the mean of the heads) asks where
    '▁walk' (output token 2) looks, and its answer 歩いて takes nearly two thirds of the weight; the
    paragraph under the map: the rows of '▁walk' and 'day.' cross over to 歩いて and 毎日, the row of
    'every' weighs まで most, not 毎日; 'walks' comes out as '▁walk' + 's'."""
    s1 = sections[1]
    assert s1.strings["default_sentence"].ja == s1.strings["default_sentence"].en == DEFAULT
    view = translated(ja_en, DEFAULT)
    assert view["translation"] == "She walks to school every day."
    last = view["n_decoder_layers"]
    assert last == 3  # "decoder layer 3", the map as it opens
    walk = view["tgt_tokens"].index("▁walk")
    assert view["tgt_tokens"][walk + 1] == "s"  # 'walks' in two pieces, as the text explains

    p = s1.predict[0]
    assert p.widget == "translation" and view["tgt_tokens"][int(p.params["tok"]) - 1] == "▁walk"
    assert p.choices[p.answer].ja.startswith("文の終わり近くの「歩いて」") and "歩いて" in p.choices[p.answer].en
    row = weights_of(view, last, "▁walk")
    assert max(row, key=row.get) == "歩いて" and 0.6 < row["歩いて"] < 2 / 3, row  # "nearly two thirds"
    for token, source in (("▁She", "▁彼女は"), ("▁day.", "毎日"), ("▁walk", "歩いて"), ("▁every", "まで")):
        row = weights_of(view, last, token)
        assert max(row, key=row.get) == source, (token, row)
    src = view["src_tokens"]
    assert src.index("歩いて") == 4 and src.index("毎日") == 1  # "the fifth token", "second in Japanese"

    ja, en = body(s1, "ja"), body(s1, "en")
    assert "「▁walk」の行は「歩いて」で、「day.」の行は「毎日」でいちばん濃くなります" in ja
    assert "the row of '▁walk' is darkest at 歩いて, the row of 'day.' at 毎日" in en
    assert "「every」の行を見ると、重みのいちばん多くは「毎日」ではなく「まで」に置かれています" in ja
    assert "the row of 'every' puts most of its weight on まで (as far as), not on 毎日" in en


@needs_ja_en
def test_section_1s_try_item_on_the_book_sentence_holds(ja_en, sections):
    """The try item: 「この本はとても面白い。」 is translated "This book is very interesting.", and its
    output token ``tok`` (from 1) is 'interesting.', whose weights (as the map opens: last decoder
    layer, mean of the heads) are heaviest on 「面白い。」; the item asks, it does not tell."""
    item = next(t for t in sections[1].try_ if t.params.get("text") == "この本はとても面白い。")
    assert "「This book is very interesting.」の「interesting.」" in item.text.ja and "面白い" not in item.text.ja
    assert "'interesting.' in 'This book is very interesting.'" in item.text.en and "面白い" not in item.text.en

    view = translated(ja_en, item.params["text"])
    assert view["translation"] == "This book is very interesting."
    token = view["tgt_tokens"][int(item.params["tok"]) - 1]
    assert token == "▁interesting."
    row = weights_of(view, view["n_decoder_layers"], token)
    assert max(row, key=row.get) == "面白い。", row


def test_section_1_explains_the_t_128_dip_by_the_transformers_t_squared_cost(sections):
    assert S1.STEP_LENGTHS[-1] == 128
    ja, en = (
        " ".join(re.sub(r"<[^>]+>", "", getattr(b.html, lang)) for b in sections[1].blocks if b.html and b.further)
        for lang in ("ja", "en")
    )
    assert "T = 128" in en and "T × T scores in each head" in en and "quadruples" in en
    assert "T = 128" in ja and "ヘッドごとに T × T 個のスコア" in ja and "4 倍" in ja


@needs_models
def test_a_speedup_beside_two_times_follows_from_the_times_shown(monkeypatch, ja_en, rnn_attention):
    """3.76 ms against 0.59 ms reads 6.4 (3.76 / 0.59 = 6.37), not the 6.3 of the unrounded times."""
    monkeypatch.setattr(S1, "training_step_seconds", lambda batch, lengths: ([0.003764] * 5, [0.000594] * 5))
    monkeypatch.setattr(S1, "encoder_seconds", lambda models, lengths: [[0.0005944], [0.0037636]])
    got = steps(rnn_attention, ja_en, batch=1)
    assert got["rnn_train_ms"] == [3.76] * 5 and got["transformer_train_ms"] == [0.59] * 5
    assert got["speedup"] == pytest.approx([3.76 / 0.59] * 5) and f"{got['speedup'][0]:.1f}" == "6.4"
    sh = got["shipped"]
    assert (sh["rnn_ms"], sh["transformer_ms"]) == (0.59, 3.76) and f"{sh['speedup']:.1f}" == "6.4"


@needs_models
def test_the_bleu_drop_follows_from_the_two_scores_shown(tmp_path):
    """The line under the BLEU table: "loses {drop} points", computed from the one-decimal scores shown
    (89.6 − 31.5 reads 58.1, not the 58.2 of the unrounded scores)."""
    import json

    from attnlab.web.lesson.s02_seq2seq_bottleneck import write_bleu_by_length

    got = json.loads(write_bleu_by_length(tmp_path / "bleu-by-length.json").read_text(encoding="utf-8"))
    for m in got["models"]:
        shown = [b for b in m["by_length"] if b is not None]
        assert all(round(b, 1) == b for b in shown) and round(m["bleu"], 1) == m["bleu"]
        assert m["drop"] == round(shown[0] - shown[-1], 1)


@needs_models
def test_section_2s_prediction_holds_for_the_long_example_it_shows(rnn_pair, sections):
    """The prediction above the bottleneck widget: on the long example it opens with (31 words), the
    model without attention starts like the reference (八万四千百) and then goes wrong; the model with
    attention writes the reference exactly."""
    p = sections[2].predict[0]
    assert p.widget == "bottleneck" and not p.params
    got = bottleneck(rnn_pair, {})
    assert got["words"] == 31 and "31" in p.question.en and "31" in p.question.ja
    plain, reference = got["plain"]["translation"], got["reference"]
    assert plain != reference and plain[:5] == reference[:5] == "八万四千百"
    assert "八万四千百" in p.explanation.en and "八万四千百" in p.explanation.ja
    assert got["attention"]["translation"] == reference
    short = next(q for q in sections[2].check if q.params.get("nums") == "twelve and three hundred")
    assert bottleneck(rnn_pair, {"text": short.params["nums"]})["plain"]["translation"] == "十二、三百"


def test_section_2_describes_bleu_with_its_brevity_penalty(sections):
    en = " ".join(re.sub(r"<[^>]+>", "", b.html.en) for b in sections[2].blocks if b.html and b.further)
    ja = " ".join(re.sub(r"<[^>]+>", "", b.html.ja) for b in sections[2].blocks if b.html and b.further)
    assert "brevity penalty" in en and "a translation shorter than the reference loses points" in en
    assert "短さの罰（brevity penalty）" in ja and "正解より短い訳は点を減らされます" in ja
