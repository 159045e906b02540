"""§8 of the lesson (variants and exercises), through its Python references and in its content files:

- the attention-pooling exercise's reference (``pooling_view``, which the page's engine/pooling.js
  is held to in tests/site/test_site_pooling_browser.py) answers with exactly what the shipped classifier
  ``ja-sentence-type`` computes (its class probabilities and per-character pooling weights), a clear
  one-line error for bad input, and within the lesson's 300 ms; the explorer has no endpoint for it
  (nor for the heatmap's download) and serves the model's folder, a 503 naming the model and
  ``make models ONLY=ja-sentence-type`` where it is not installed;
- the variants widget: a window's label ("reach r") and its mask agree, and the measured times
  come as two tables, seconds apart from ratios;
- the content: no placeholder, the corrected statements (chunking saves memory, sparse attention
  named, which local attention is shown), checks that mostly ask to predict or transfer, and no
  English sentence on the Japanese page.
"""

from __future__ import annotations

import re
import statistics
import time

import pytest
import torch
from fastapi.testclient import TestClient

from attnlab import assets
from attnlab import functional as AF
from attnlab.assets import locate
from attnlab.assets.cards import read_model_card
from attnlab.data.sentence_types import LABELS, japanese_markers
from attnlab.web import lesson as L
from attnlab.web.app import create_app
from attnlab.web.lesson import s08_variants_and_exercises as S8

LOCAL = "http://127.0.0.1:8000"
NAME = "ja-sentence-type"
SECTION = L.load_sections()[8]


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), base_url=LOCAL)


@pytest.fixture(scope="module")
def classifier():
    try:
        locate.shipped_model_dir(NAME)
    except FileNotFoundError:
        pytest.skip(f"needs the shipped model {NAME} (make models ONLY={NAME})")
    from attnlab.loading import load_model

    return load_model(NAME)


# --------------------------------------------------------------------------------------------
# Exercise 2: attention pooling.
# --------------------------------------------------------------------------------------------


def pool(classifier, **body) -> dict:
    """What the page's widget shows for ``body`` (the reference of engine/pooling.js)."""
    return S8.pooling_view(classifier, S8.PoolingRequest(**body)).model_dump()


@pytest.mark.parametrize(
    "text", [*assets.ASSETS[NAME].examples, "明日は雨が降りますか。", "私は行きたい。", "𠮷野家は閉まっていない。"]
)
def test_the_pooling_widget_shows_the_classifiers_own_numbers(classifier, text):
    got = pool(classifier, text=text)
    want = classifier.predict([text])[0]
    assert got["model"] == NAME and got["text"] == text and got["labels"] == list(LABELS)
    assert got["label"] == want.label
    assert got["probs"] == [want.probs[label] for label in LABELS]  # the same floats, not recomputed
    assert got["weights"] == want.weights
    assert got["chars"] == list(text) and len(got["chars"]) == len(want.tokens)
    assert got["known"] == [tok != "[UNK]" for tok in want.tokens]
    assert got["peak"] == max(range(len(want.weights)), key=want.weights.__getitem__)
    assert got["markers"] == japanese_markers(text)
    assert sum(got["probs"]) == pytest.approx(1.0, abs=1e-5) and sum(got["weights"]) == pytest.approx(1.0, abs=1e-5)


def test_the_pooling_widget_names_its_examples_and_quotes_the_model_card(classifier):
    got = pool(classifier)
    assert got["text"] == assets.ASSETS[NAME].examples[0]
    assert got["examples"] == dict(zip(LABELS, assets.ASSETS[NAME].examples))
    metrics = read_model_card(assets.asset_folder(NAME)).metrics
    assert got["card"] == {
        "accuracy": metrics["accuracy"],
        "n": metrics["n"],
        "peak_on_marker": {label: metrics[f"peak_on_marker/{label}"] for label in ("question", "negation", "past")},
    }
    unknown = pool(classifier, text="𠮷は来た。")
    assert unknown["known"][0] is False and all(unknown["known"][1:])


@pytest.mark.parametrize(
    "body, pattern",
    [
        ({"text": "   "}, "blank"),
        ({"text": ""}, "at least 1 character"),
        ({"text": "あ" * 65}, "at most 64 characters"),
        ({"text": 3}, "valid string"),
        ({"text": "これは本ですか。", "model": "ja-en"}, "Extra inputs"),
    ],
)
def test_pooling_bad_input_is_a_one_line_error(classifier, body, pattern):
    # pydantic's ValidationError is a ValueError: the request's checks, then the view's own.
    with pytest.raises(ValueError, match=pattern):
        pool(classifier, **body)


def test_the_explorer_has_no_pooling_endpoint_and_serves_the_model_folder(monkeypatch, tmp_path):
    client = TestClient(create_app(), base_url=LOCAL)
    assert client.post("/api/lesson/pooling", json={}).status_code in (404, 405)
    for fmt in ("png", "svg"):  # the heatmap's download is drawn in the page too
        assert client.get(f"/api/lesson/figures/attention-map.{fmt}?variant=full").status_code == 404
    monkeypatch.setattr(assets, "ROOT", tmp_path)  # an installation whose assets are not built
    bare = TestClient(create_app(), base_url=LOCAL)
    r = bare.get(f"/static/models/{NAME}/meta.json")
    assert r.status_code == 503, r.text
    detail = r.json()["detail"]
    assert f"needs the shipped model {NAME}" in detail and f"make models ONLY={NAME}" in detail
    assert client.get("/static/data/lesson/sections/8.json").status_code == 200  # the rest of §8 works


def test_pooling_answers_within_the_lessons_300_ms(classifier):
    pool(classifier)  # the first call warms up
    times = []
    for text in assets.ASSETS[NAME].examples * 3:
        start = time.perf_counter()
        pool(classifier, text=text)
        times.append(time.perf_counter() - start)
    assert statistics.median(times) < 0.3, times


# --------------------------------------------------------------------------------------------
# The variants: the window's label and its mask agree; seconds and ratios apart.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("reach", [1, 2, 3, 8])
def test_a_window_of_reach_r_sees_what_its_label_says(reach, causal):
    got = L.variants_view(**{"length": 32, "reach": reach, "causal": causal}).model_dump(mode="json")
    keys = reach + 1 if causal else 2 * reach + 1  # itself and r back (causal), or r on each side
    mask = torch.tensor(got["masks"]["sliding_window"])
    middle = 16
    on = mask[middle].nonzero().flatten().tolist()
    assert on == (
        list(range(middle - reach, middle + 1)) if causal else list(range(middle - reach, middle + reach + 1))
    )
    assert got["keys_per_row"]["sliding_window"] == keys == int(mask.sum(dim=1).max())
    # The same number of keys, spaced 2 apart (a long reach runs off the 32 positions).
    assert got["keys_per_row"]["dilated"] == keys if 2 * 2 * reach < 32 else got["keys_per_row"]["dilated"] <= keys
    assert got["keys_per_row"]["local"] == 4  # the block size (default 4), set apart from the window


def test_the_measured_memory_covers_the_time_tables_lengths_and_tells_the_machine():
    got = L.variants_view(**{}).model_dump(mode="json")
    memory = got["measured"]["memory"]
    rows = memory["rows"]
    assert [r["length"] for r in rows] == [r["length"] for r in got["measured"]["rows"]]
    assert "Xeon" in memory["machine"] and "under load" in memory["machine"]  # lscpu's model name, and the load
    assert "fresh process" in memory["source"] and "fwd+bwd" in memory["source"]
    measured = [r for r in rows if r["full_mib"] is not None]
    assert [r["length"] for r in measured] == [1024, 4096]  # storing every score was run only while it fits
    for r in rows:
        assert 0 < r["sdpa_mib"] and 0 < r["chunked_mib"]
        if r["full_mib"] is not None:
            assert r["chunked_mib"] < r["full_mib"] and r["sdpa_mib"] < r["full_mib"]
    # Chunking saves memory: storing every score grows with T² (×16 from 1,024 to 4,096, measured ≥ ×8),
    # chunked and SDPA attention far less (< ×2) over the same step.
    small, large = rows[0], rows[1]
    assert large["full_mib"] / small["full_mib"] >= 8
    assert large["chunked_mib"] / small["chunked_mib"] < 2 and large["sdpa_mib"] / small["sdpa_mib"] < 2
    # Where the full version was not run, one copy of its scores alone would not fit this machine at 32,768.
    assert L.s08_variants_and_exercises.scores_gib(32768) == 32.0 > 23


def _tables(html: str) -> list[list[list[str]]]:
    """The Markdown tables of a block's HTML: rows of cell texts (header included)."""
    out = []
    for table in re.findall(r"<table>(.*?)</table>", html, re.S):
        rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)
        out.append(
            [
                [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r, re.S)]
                for r in rows
            ]
        )
    return out


@pytest.mark.parametrize("lang", ["ja", "en"])
def test_the_measured_memory_has_one_home_the_widgets_table(lang):
    """The measured peak memory is shown once, by the variants widget (drawn from the data file and
    checked cell by cell in tests/web/lesson/test_lesson_s08_browser.py): no Markdown table or sentence of the
    section repeats a measured figure by hand. The prose points to that table and gives, for the
    lengths where storing every score was not run, the arithmetic of one copy of the scores."""
    s08 = L.s08_variants_and_exercises
    memory = s08.Measured.model_validate_json(s08.LONG_CONTEXT_FILE.read_text(encoding="utf-8")).memory  # the data file
    blocks = [getattr(b.html, lang) for b in SECTION.blocks if b.html is not None]
    assert not any("MiB" in html for html in blocks)
    assert not [t for html in blocks for t in _tables(html) if "SDPA" in " ".join(t[0])]
    prose = next(re.sub(r"<[^>]+>", "", html) for html in blocks if "Xeon" in html)
    skipped = [m for m in memory.rows if m.full_mib is None]
    assert [m.length for m in skipped] == [16384, 32768]
    for m in skipped:
        gib = L.s08_variants_and_exercises.scores_gib(m.length)
        assert gib == 8 * m.length**2 * 4 / 2**30
        assert f"{m.length:,}" in prose and f"{gib:g} GiB" in prose
    # The machine the prose names is the data file's (its model name and memory).
    assert "Xeon" in memory.machine and "23 GiB" in memory.machine and "23 GiB" in prose
    # The prose that points to the table is itself Going further, as the table is (folded in the widget).
    where = {"ja": "最後のメモリの表", "en": "the memory table"}[lang]
    pointing = [b for b in SECTION.blocks if b.html is not None and where in getattr(b.html, lang)]
    assert len(pointing) == 1 and pointing[0].further


def _stacked_reach_back(reach: int, layers: int) -> tuple[int, int]:
    """How far back the top of ``layers`` stacked windows of reach r lets information come, causal and
    symmetric, from attnlab's own sliding_window_mask composed ``layers`` times (a product of masks:
    a path of allowed pairs, one per layer)."""
    T = 4 * reach * layers + 4  # long enough that the middle row's reach never runs off the edge
    out = []
    for causal in (True, False):
        window = reach + 1 if causal else 2 * reach  # the lesson's window_size for a reach r
        m = AF.sliding_window_mask(T, window=window, causal=causal).to(torch.int64)  # (T, T)
        seen = torch.linalg.matrix_power(m, layers)[T // 2] > 0  # (T,) who reaches the middle row
        on = seen.nonzero().flatten()
        out.append(T // 2 - int(on.min()))
    return out[0], out[1]


@pytest.mark.parametrize("reach", [1, 2, 4])
@pytest.mark.parametrize("layers", [1, 2, 3, 6])
def test_stacked_windows_reach_l_times_r(reach, layers):
    back, each_side = _stacked_reach_back(reach, layers)
    assert back == each_side == layers * reach  # L·r, with or without the causal mask
    width = reach + 1  # a causal window of width w: itself and the w − 1 before
    assert back == layers * (width - 1)


@pytest.mark.parametrize("lang", ["ja", "en"])
def test_section_8_teaches_the_stacked_reach_with_attnlabs_masks(lang):
    tables = [
        t for b in SECTION.blocks if b.html is not None and b.type == "html" for t in _tables(getattr(b.html, lang))
    ]
    table = next(t for t in tables if "SDPA" not in " ".join(t[0]))
    assert len(table) == 4  # a header and layers 1 to 3 (r = 2, causal, position 10)
    for row in table[1:]:
        layers, positions, back = int(row[0]), row[1], int(row[2])
        want = _stacked_reach_back(2, layers)[0]
        assert back == want and positions == f"{10 - want} – 10"
    text = _texts(lang)
    assert "L·r" in text and "L·(w − 1)" in text
    # The final check's stacking question asks exactly this rule, with other numbers.
    sections = L.load_sections()
    final = sections[max(sections)]
    q = next(q for q in final.check if q.section == 8)
    assert "w = 5" in q.question.en and "6 layers" in q.question.en and "6 層" in q.question.ja
    back, _ = _stacked_reach_back(5 - 1, 6)
    assert q.choices[q.answer].en == f"Up to {back} tokens back" and q.choices[q.answer].ja == f"{back} 語前まで"
    assert all("one window per layer" not in k.en for k in final.key_points)


def test_the_measured_times_come_as_seconds_and_ratios_apart():
    got = L.variants_view(**{}).model_dump(mode="json")
    rows, tables = got["measured"]["rows"], got["measured_tables"]
    assert tables["lengths"] == [r["length"] for r in rows] == [1024, 4096, 16384, 32768]
    assert tables["seconds"]["sdpa"] == [r["sdpa_s"] for r in rows]
    assert tables["speedup"]["sdpa"] == [1.0] * len(rows)
    for case in ("chunked", "sliding_window", "global_window"):
        assert tables["speedup"][case] == [r[f"{case}_speedup"] for r in rows]
        for r, seconds in zip(rows, tables["seconds"][case]):
            assert seconds == float(f"{r['sdpa_s'] / r[f'{case}_speedup']:.2g}")
    # Chunking is exact and saves memory, not time: it is never much faster than full attention.
    assert max(tables["speedup"]["chunked"]) < 1.1 and min(tables["speedup"]["chunked"]) < 1.0


def test_the_local_variant_is_the_block_mask():
    got = L.variants_view(**{"length": 12, "block": 3}).model_dump(mode="json")
    assert got["masks"]["local"] == AF.block_local_mask(12, block=3, causal=False).tolist()


# --------------------------------------------------------------------------------------------
# The content of §8.
# --------------------------------------------------------------------------------------------


def _texts(lang: str) -> str:
    """Every text of §8 a student reads in ``lang``: body, objectives, key points, try, checks, strings."""
    pick = lambda t: getattr(t, lang)  # noqa: E731
    parts = [pick(SECTION.title), pick(SECTION.summary)]
    parts += [pick(b.html) for b in SECTION.blocks if b.html is not None]
    parts += [pick(o) for o in SECTION.objectives] + [pick(k) for k in SECTION.key_points]
    parts += [pick(t.text) for t in SECTION.try_]
    for q in SECTION.check:
        parts += [pick(q.question), pick(q.hint), pick(q.explanation), *[pick(c) for c in q.choices]]
    parts += [pick(v) for v in SECTION.strings.values()]
    return "\n".join(re.sub(r"<[^>]+>", "", p) for p in parts)


def test_no_placeholder_is_left_and_the_pooling_exercise_is_live():
    for lang in ("ja", "en"):
        text = _texts(lang)
        for placeholder in ("できしだい", "FIXME", "TODO", "coming soon", "Once a shipped classifier"):
            assert placeholder not in text, (lang, placeholder)
    assert [b.widget for b in SECTION.blocks if b.type == "widget"] == ["variants", "attention-map", "pooling"]


def test_the_corrected_statements_are_there():
    ja, en = _texts("ja"), _texts("en")
    assert "スパース注意" in ja and "sparse attention" in en  # named, as the glossary has it
    assert "Luong" in ja and "Luong" in en  # which local attention is shown, and which is not
    assert "節約できるのはメモリ" in ja and "saves memory" in en  # chunking: memory, not time
    assert "時間は短くなりません" in ja and "not faster" in en
    assert "窓の幅 4" not in ja  # the old label whose mask had 5 keys per row
    assert "因果マスク" in ja and "先を隠す工夫" not in ja  # the term; §6 and §7 explain it
    # Full attention does not simply "run out of memory" at 32,768: SDPA finishes it; storing every score does not fit.
    checks = " ".join(q.question.en + q.explanation.en for q in SECTION.check)
    assert "runs out of memory" not in checks and "stores the whole T×T score table" in checks
    assert "fused kernel" in en and "never holds the whole table" in en
    # The Image Transformer's local attention: query blocks that also see a wider memory block.
    assert "as in the Image Transformer" not in en and "wider memory block" in en
    assert "より大きなメモリのブロック" in ja and "画像を生成する Transformer などで使われました" not in ja


def test_the_checks_mostly_ask_to_predict_or_transfer():
    kinds = [q.kind for q in SECTION.check]
    assert 3 <= len(kinds) <= 5
    assert sum(k in ("predict", "transfer") for k in kinds) * 2 >= len(kinds)
    assert len({q.answer for q in SECTION.check}) >= 3  # the stored answer is not always in one place
    for q in SECTION.check:
        assert q.hint.ja.strip() and q.hint.en.strip() and "FIXME" not in q.hint.en
        if q.kind == "predict":
            assert q.params, "a prediction links to the widget to try it"
    known = {"len", "r", "b", "dil", "g", "causal", "variant", "words", "seed", "pool"}
    for item in [*SECTION.try_, *SECTION.check]:
        assert set(item.params) <= known, item.params


def test_the_japanese_page_has_no_english_sentence():
    # Technical notes (技術メモ: the *_source strings) and code may name functions; the rest is Japanese.
    pick = lambda t: t.ja  # noqa: E731
    shown = [pick(v) for k, v in SECTION.strings.items() if not k.endswith("_source")]
    shown += [re.sub(r"<[^>]+>", "", pick(b.html)) for b in SECTION.blocks if b.type in ("html", "note")]
    for text in shown:
        words = re.findall(r"[A-Za-z]+(?:[ '-][A-Za-z]+){3,}", text)
        assert all("how about going" in w or "movies" in w for w in words), words  # only the quoted English example
