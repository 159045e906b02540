"""The lesson's drawn pictures (pictures.js) and §7's token walk (widgets/tokenwalk.js) in real
headless Chromium (Debian's, driven by Playwright), in Japanese and English, 1280 px and 375 px wide.

- Every section 1–8 opens with its schematic (after the header, before the text), an <svg
  role="img"> titled and described in the page's language; every label at least 12 px as drawn,
  inside the picture's viewBox, and no two labels on top of each other; the query, key and value
  drawn in one colour each wherever they appear.
- Every section page (the final check too) has the model map with exactly the section's part lit.
- The projector shows the picture on its own slide.
- The token walk steps forward and back, lights its step's part in the map, and every number it
  shows is the endpoint's (bars on a 0–1 scale, masked positions hatched, not 0).

Screenshots go to ``test-artifacts/lesson-pictures/`` (git-ignored). Without Chromium the tests skip.
"""

from __future__ import annotations

import functools

import pytest
from lesson_browser import ARTIFACTS_ROOT, BROWSER_MARKS, close, make_page, params, section_drawn, shipped

ARTIFACTS = ARTIFACTS_ROOT / "lesson-pictures"
pytestmark = BROWSER_MARKS
page = make_page(ARTIFACTS, timeout_ms=60_000)

# What each section's map lights (pictures.js LIT_PARTS), written out again here.
ATTENTION = ["enc_self", "dec_self", "dec_cross"]
ALL = ["src_embed", "enc_self", "enc_ffn", "memory", "tgt_embed", "dec_self", "dec_cross", "dec_ffn", "output"]
LIT = {
    1: ["dec_cross"],
    2: ["memory", "dec_cross"],
    3: ATTENTION,
    4: ATTENTION,
    5: ATTENTION,
    6: ["src_embed", "tgt_embed"],
    7: ALL,
    8: ["enc_self", "dec_self"],
    9: ALL,
    10: ALL,  # the final check covers the whole model
}
STEP_LIT = {
    1: ["src_embed"],
    2: ["enc_self"],
    3: ["enc_ffn"],
    4: ["tgt_embed", "dec_self"],
    5: ["memory", "dec_cross"],
    6: ["output"],
}
# The query, key and value colours (fill, ink) every picture uses.
QKV = {"q": ("#fde3cf", "#9a3d00"), "k": ("#d4e6f6", "#00518a"), "v": ("#d3efe2", "#006647")}

# For one <svg>: its viewBox, its title and description, and each label's text, drawn font size in
# CSS px (the font size times the drawing's scale), its box in the SVG's units (getBBox, with the
# rotation of a rotated label applied) and on the screen.
MEASURE = """(svg) => {
  const vb = svg.viewBox.baseVal;
  const scale = svg.getBoundingClientRect().width / vb.width;
  const labels = Array.from(svg.querySelectorAll('text')).filter((t) => t.textContent.trim()).map((t) => {
    const b = t.getBBox();
    const m = svg.getScreenCTM().inverse().multiply(t.getScreenCTM());
    const corners = [[b.x, b.y], [b.x + b.width, b.y], [b.x, b.y + b.height], [b.x + b.width, b.y + b.height]].map(([x, y]) => {
      const p = svg.createSVGPoint(); p.x = x; p.y = y;
      const q = p.matrixTransform(m);
      return [q.x, q.y];
    });
    const r = t.getBoundingClientRect();
    // a box's label (pictures.js draws a box as <g class=pic-box><rect/><text/>…</g>): the box on the screen
    const frame = t.parentNode.classList.contains('pic-box') ? t.parentNode.querySelector('rect').getBoundingClientRect() : null;
    return { text: t.textContent, frame: frame && [frame.left, frame.top, frame.right, frame.bottom], px: parseFloat(getComputedStyle(t).fontSize) * scale,
      x0: Math.min(...corners.map((c) => c[0])), x1: Math.max(...corners.map((c) => c[0])),
      y0: Math.min(...corners.map((c) => c[1])), y1: Math.max(...corners.map((c) => c[1])),
      screen: [r.left, r.top, r.right, r.bottom] };
  });
  const title = svg.querySelector(':scope > title');
  const desc = svg.querySelector(':scope > desc');
  const ids = (svg.getAttribute('aria-labelledby') || '').split(' ');
  return { w: vb.width, h: vb.height, role: svg.getAttribute('role'), lang: svg.getAttribute('lang'),
    title: title && title.textContent, desc: desc && desc.textContent,
    labelled: !!title && !!desc && ids.includes(title.id) && ids.includes(desc.id), labels };
}"""


def has_japanese(text: str) -> bool:
    return any("\u3040" <= ch <= "\u30ff" or "\u4e00" <= ch <= "\u9fff" for ch in text)


def check_svg(got: dict, lang: str, what: str) -> None:
    assert got["role"] == "img" and got["labelled"] and got["lang"] == lang, what
    assert got["title"] and len(got["desc"]) > 40, what
    if lang == "ja":
        assert has_japanese(got["title"]) and has_japanese(got["desc"]), what
    else:  # English, quoting a Japanese sentence at most
        assert not has_japanese(got["title"]), what
        assert sum(ch.isascii() for ch in got["desc"]) > 0.85 * len(got["desc"]), what
    assert got["labels"], what
    for lab in got["labels"]:
        assert lab["px"] >= 12 - 1e-6, (what, lab["text"], lab["px"])
        assert lab["x0"] >= -0.5 and lab["x1"] <= got["w"] + 0.5, (what, "cut left/right", lab)
        assert lab["y0"] >= -0.5 and lab["y1"] <= got["h"] + 0.5, (what, "cut top/bottom", lab)
        if lab["frame"]:  # a box's label stays inside its box (1 px allowed)
            x0, y0, x1, y1 = lab["screen"]
            fx0, fy0, fx1, fy1 = lab["frame"]
            assert x0 >= fx0 - 1 and x1 <= fx1 + 1 and y0 >= fy0 - 1 and y1 <= fy1 + 1, (what, "out of its box", lab)
    # no two labels drawn over each other (1 px of touching allowed)
    labels = got["labels"]
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            ax0, ay0, ax1, ay1 = a["screen"]
            bx0, by0, bx1, by1 = b["screen"]
            overlap_x = min(ax1, bx1) - max(ax0, bx0)
            overlap_y = min(ay1, by1) - max(ay0, by0)
            assert overlap_x <= 1 or overlap_y <= 1, (what, "labels overlap", a["text"], b["text"])


@pytest.mark.parametrize("width", [1280, 375])
def test_every_section_opens_with_its_picture_and_the_model_map(page, lang, width):
    page.set_viewport_size({"width": width, "height": 900})
    for n in range(1, 11):
        page.goto(f"/lesson/{n}?lang={lang}")
        section_drawn(page)
        page.evaluate("() => document.fonts.ready.then(() => true)")
        # the picture comes right after the header, before the section's text
        order = page.evaluate(
            "() => { const f = document.querySelector('#section-pictures'); const h = document.querySelector('.section-head');"
            " const t = document.querySelector('#block-0');"
            " return [!!f, !!(h.compareDocumentPosition(f) & Node.DOCUMENT_POSITION_FOLLOWING),"
            " !!(f.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING)]; }"
        )
        assert order == [True, True, True], (n, order)
        if n <= 9:
            svg = page.locator(f"#schematic-{n}")
            assert svg.count() == 1, n
            check_svg(svg.evaluate(MEASURE), lang, f"§{n} schematic ({lang}, {width} px)")
            look = page.locator("#schematic-look-at").inner_text()
            assert has_japanese(look) == (lang == "ja") and len(look) > 20, look
            # nothing wider than the screen
            box = svg.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width, (n, box)
        else:
            # the final check: the map only, in one column (no empty room for a picture)
            assert page.locator("svg[id^=schematic-]").count() == 0
            assert "map-only" in page.get_attribute("#section-pictures", "class")
        # The map's title in the page's language; §2 (an RNN) says where its idea sits in the Transformer.
        title = page.locator("#section-pictures .model-map-title").inner_text()
        assert has_japanese(title) == (lang == "ja"), title
        if n == 2:
            assert "Transformer" in title, title
        the_map = page.locator("#section-pictures svg.model-map")
        assert the_map.count() == 1, n
        check_svg(the_map.evaluate(MEASURE), lang, f"§{n} map ({lang}, {width} px)")
        lit = the_map.evaluate(
            "(svg) => Array.from(svg.querySelectorAll('[data-part]')).filter((g) => g.dataset.lit === 'true')"
            ".map((g) => [g.dataset.part, g.querySelector('rect').getAttribute('fill')])"
        )
        assert sorted(p for p, _ in lit) == sorted(LIT[n]), (n, lit)
        assert {fill for _, fill in lit} == {"#ffe08a"}  # lit in the one amber
        unlit = the_map.evaluate(
            "(svg) => Array.from(svg.querySelectorAll('[data-part]')).filter((g) => g.dataset.lit !== 'true')"
            ".map((g) => g.querySelector('rect').getAttribute('fill'))"
        )
        assert "#ffe08a" not in unlit and len(unlit) + len(lit) == len(ALL)
        if width == 1280 and n <= 9:
            page.locator("#section-pictures").screenshot(path=str(ARTIFACTS / f"section{n}-{lang}.png"))


def test_query_key_and_value_have_one_colour_in_every_picture(page, lang):
    """Every box or letter that names a query, key or value is drawn in that one's colour."""
    names = {
        "q": ["クエリ", "Query", "Q", "query"],
        "k": ["キー", "Key", "K", "keys"],
        "v": ["バリュー", "Value", "V", "values"],
    }
    seen = {"q": 0, "k": 0, "v": 0}
    for n in (3, 4, 5, 7):
        page.goto(f"/lesson/{n}?lang={lang}")
        section_drawn(page)
        drawn = page.locator(f"#schematic-{n}").evaluate(
            "(svg) => Array.from(svg.querySelectorAll('text')).map((t) => {"
            " const g = t.parentNode; const r = g.tagName === 'g' ? g.querySelector('rect') : null;"
            " return [t.textContent, t.getAttribute('fill'), r ? r.getAttribute('fill') : null, r ? r.getAttribute('stroke') : null]; })"
        )
        for label, ink, box_fill, box_stroke in drawn:
            for key, words in names.items():
                word = label.split(" ")[0].split("（")[0].split("(")[0]
                if word in words:
                    fill, dark = QKV[key]
                    assert ink == dark or (box_fill == fill and box_stroke == dark), (n, label, ink, box_fill)
                    seen[key] += 1
    assert all(seen.values()), seen


def test_the_projector_shows_the_picture_on_its_own_slide(page, lang):
    page.goto(f"/lesson/3?lang={lang}&view=present&slide=2")
    section_drawn(page)
    slide = page.locator("#slide-2")
    assert slide.is_visible()
    assert slide.locator("#schematic-3").count() == 1 and slide.locator("svg.model-map").count() == 1
    assert slide.locator("#schematic-3").is_visible()


def walk_answer(page, base_url: str, text: str | None = None) -> dict:
    """What the token walk must show: the Python view the page's own computation is held to
    (tests/site/test_site_translate_browser.py)."""
    from attnlab.web.lesson.s07_whole_transformer import TokenWalkRequest, token_walk_view

    return token_walk_view(_ja_en(), TokenWalkRequest(**({"text": text} if text else {}))).model_dump()


@functools.cache
def _ja_en():
    from attnlab.loading import load_model

    return load_model("ja-en", family="translate")


def bars(page) -> list[tuple[str, str, float]]:
    """The walk's bars: label, data-value ('' when masked) and the fill's width as a share of its track."""
    return page.eval_on_selector_all(
        "#tw-bars .tw-row",
        "rows => rows.map((r) => { const f = r.querySelector('.tw-fill'); const t = r.querySelector('.tw-track');"
        " return [r.querySelector('.tw-tok').textContent, r.dataset.value,"
        " f ? f.getBoundingClientRect().width / t.clientWidth : -1]; })",
    )


# The walk computes in the page (ja-en in onnxruntime-web, float32): its numbers equal the Python
# view's within 1e-4 (issue 36's parity bound, tests/site/test_site_translate_browser.py), no longer to
# the last digit the server sent.
PAGE_TOL = 1e-4


def check_bars(page, want: list[float | None]) -> None:
    got = bars(page)
    assert len(got) == len(want)
    for (_label, value, share), w in zip(got, want, strict=True):
        if w is None:
            assert value == "" and share == -1  # hatched, no number, no bar
        else:
            assert abs(float(value) - w) <= PAGE_TOL
            assert abs(share - w) < 0.01  # the 0–1 scale: the track is 1


def lit_parts(page) -> list[str]:
    return sorted(page.get_attribute("#tw-map svg.model-map", "data-lit").split())


@pytest.mark.parametrize("width", [1280, 375])
def test_the_token_walk_steps_through_the_models_numbers(page, lang, base_url, width):
    shipped("ja-en")
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"/lesson/7?lang={lang}")
    page.wait_for_function("() => { const n = document.querySelector('#tw-out'); return n && n.dataset.seq !== '0'; }")
    res = walk_answer(page, base_url)
    assert res["translation"] == "I drink coffee every morning."
    out = 2  # the default output word followed: "coffee"
    cross = res["cross"][-1][out]
    src = max(range(len(cross)), key=lambda j: cross[j])  # the piece "coffee" looks at most
    assert res["src_tokens"][src] == "コーヒーを"
    for step in range(1, 7):
        assert page.get_attribute("#tw-panel", "data-step") == str(step)
        assert lit_parts(page) == sorted(STEP_LIT[step])
        check_svg(page.locator("#tw-map svg.model-map").evaluate(MEASURE), lang, f"walk map step {step}")
        if step == 1:
            e = res["embeddings"][src]
            for row, key in (("tw-emb", "embedding"), ("tw-pos", "position"), ("tw-sum", "sum")):
                close(
                    [float(page.get_attribute(f"#{row}-{k}", "data-value")) for k in range(4)],
                    e[key + "_first"],
                    tol=PAGE_TOL,
                )
                assert float(page.get_attribute(f"#{row}-norm", "data-value")) == pytest.approx(
                    e[key + "_norm"], abs=PAGE_TOL
                )
            assert page.get_attribute(f"#tw-src-{src}", "aria-pressed") == "true"
        elif step == 2:
            check_bars(page, res["encoder_self"][0][src])
        elif step == 3:
            f = res["feed_forward"][src]
            assert int(page.get_attribute("#tw-ffn-active td", "data-value")) == f["active"]
            for row, key in (
                ("in", "in_norm"),
                ("max", "hidden_max"),
                ("out", "out_norm"),
                ("layer", "layer_out_norm"),
            ):
                assert float(page.get_attribute(f"#tw-ffn-{row} td", "data-value")) == pytest.approx(
                    f[key], abs=PAGE_TOL
                )
        elif step == 4:
            row = res["decoder_self"][0][out]
            check_bars(page, [w if j <= out else None for j, w in enumerate(row)])
            assert all(w == 0 for w in row[out + 1 :])
        elif step == 5:
            check_bars(page, cross)
        else:
            o = res["outputs"][out]
            check_bars(page, [c["p"] for c in o["top"]])
            assert o["chosen"] == "▁coffee" and o["top"][0]["token"] == o["chosen"]
            assert page.locator("#tw-bars .tw-top .tw-tok").inner_text() == o["chosen"]
        if step > 1:  # the address keeps the step (a link reproduces it)
            assert params(page)["walk_step"] == str(step)
        if step < 6:
            page.click("#tw-next")
    assert page.is_disabled("#tw-next")
    page.click("#tw-prev")
    assert page.get_attribute("#tw-panel", "data-step") == "5"
    # follow another output word: its row, and the source piece it looks at most
    page.click("#tw-out-1")
    check_bars(page, res["cross"][-1][1])
    assert params(page)["walk_out"] == "1"
    page.locator("#widget-token-walk").screenshot(path=str(ARTIFACTS / f"walk-{lang}-{width}.png"))


def test_the_token_walk_opens_where_its_address_says(page, lang, base_url):
    shipped("ja-en")
    text = "子供たちは公園で遊んでいる。"
    page.goto(f"/lesson/7?lang={lang}&walk={text}&walk_step=4&walk_out=3")
    page.wait_for_function("() => { const n = document.querySelector('#tw-out'); return n && n.dataset.seq !== '0'; }")
    res = walk_answer(page, base_url, text)
    assert page.get_attribute("#tw-panel", "data-step") == "4"
    assert page.get_attribute("#tw-out-3", "aria-pressed") == "true"
    check_bars(page, [w if j <= 3 else None for j, w in enumerate(res["decoder_self"][0][3])])
    assert page.input_value("#tw-text") == text
