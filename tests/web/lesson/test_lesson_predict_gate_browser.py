"""Predict, then see (issue 34): the text that reads a covered widget's result is held back with the
widget. On every section of the shipped lesson, in Japanese and English, in real headless Chromium:
before a prediction is committed no text after its widget, up to the next heading, is shown (nor
read out: it is not displayed); after, all of it is, and what follows the heading never was hidden.

Screenshots go to ``test-artifacts/lesson-predict-gate/``. Run with
``pytest -m browser tests/web/lesson/test_lesson_predict_gate_browser.py``.
"""

from __future__ import annotations

import pytest
from lesson_browser import ARTIFACTS_ROOT, BROWSER_MARKS, assert_accessible, make_page, section_drawn

from attnlab.web import lesson as L

ARTIFACTS = ARTIFACTS_ROOT / "lesson-predict-gate"
pytestmark = BROWSER_MARKS
page = make_page(ARTIFACTS, timeout_ms=60_000, uncovered=False)  # the covers are what it tests

SECTIONS = L.load_sections()
PREDICTED = sorted(sid for sid, s in SECTIONS.items() if s.predict)

# The widgets whose result the text right after them reads (their prediction's answer is written
# there), and a phrase of that text that would give the answer away: exactly these are held back.
READ_AFTER = {
    (1, "translation"): {"ja": "「▁walk」の行は「歩いて」", "en": "the row of '▁walk' is darkest at 歩いて"},
    (2, "bottleneck"): {
        "ja": "アテンションなしのデコーダが受け取る数そのもの",
        "en": "the decoder without attention receives",
    },
    (3, "qkv"): {"ja": "重みは 0.481 と 0.292 です", "en": "its weight is 0.481 against 0.292"},
    (4, "self-vs-cross"): {"ja": "「それ」にいちばん大きな重み", "en": "puts its largest weight on それ"},
    (5, "multihead-steps"): {"ja": "増えるのは注意の重みの表の枚数です", "en": "what grows is the number of tables"},
    (6, "word-order"): {
        "ja": "それぞれの語の出力ベクトルは変わりません",
        "en": "each word keeping the same output vector",
    },
    (7, "next-token"): {"ja": "top-k は、確率の高い k 個だけを残し", "en": "Top-k keeps only the k most likely"},
    (9, "apps-summary"): {"ja": "ほとんどの語をコピーします", "en": "copies almost every word"},
}

# What follows a gate, as a reader sees it: the text of every sibling after it up to the next
# heading (a heading of its own, or one inside a block), each text with whether it is shown; a
# closed 発展 fold is passed over (only its title shows, and its title is not running text).
TEXT_AFTER = """(gate) => {
  const heading = (n) => /^H[1-6]$/.test(n.tagName);
  const shown = (t) => {
    const r = document.createRange();
    r.selectNodeContents(t);
    return Array.from(r.getClientRects()).some((b) => b.width > 0 && b.height > 0)
      && getComputedStyle(t.parentElement).visibility !== 'hidden';
  };
  const out = { texts: [], shown: [], heading: null, headingShown: null };
  const stop = (h) => { out.heading = h.textContent; out.headingShown = h.getClientRects().length > 0; };
  const take = (root) => {
    const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT | NodeFilter.SHOW_ELEMENT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      if (n.nodeType === Node.ELEMENT_NODE) {
        if (heading(n)) { stop(n); return true; }
        continue;
      }
      if (!n.textContent.trim()) continue;
      out.texts.push(n.textContent);
      if (shown(n)) out.shown.push(n.textContent);
    }
    return false;
  };
  for (let s = gate.nextElementSibling; s; s = s.nextElementSibling) {
    if (heading(s)) { stop(s); break; }
    if (s.matches('details.further:not([open])')) continue;
    if (take(s)) break;
  }
  return out;
}"""


def after(pg, k: int) -> dict:
    return pg.eval_on_selector(f"#predict-{k}-gate", TEXT_AFTER)


@pytest.mark.parametrize("sid", PREDICTED)
def test_the_text_after_a_covered_widget_waits_for_the_prediction(page, lang, sid):
    section = SECTIONS[sid]
    page.goto(f"/lesson/{sid}")
    section_drawn(page)
    assert page.locator(".predict-gate").count() == len(section.predict)
    held = set()
    for k, p in enumerate(section.predict):
        before = after(page, k)
        assert page.get_attribute(f"#predict-{k}-gate", "data-revealed") == "0"
        # Covered: nothing of the text after the widget shows, up to the next heading.
        assert before["shown"] == [], (p.widget, before["shown"])
        # The heading that ends it (and all after it) is not held back.
        if before["heading"] is not None:
            assert before["headingShown"], (p.widget, before["heading"])
        text = "".join(before["texts"])
        if text:
            held.add((sid, p.widget))
        phrase = READ_AFTER.get((sid, p.widget))
        if phrase:
            assert phrase[lang] in text, (p.widget, text[:200])
            told = page.locator(".lesson-text > *", has_text=phrase[lang])
            assert told.count() >= 1 and not any(told.nth(i).is_visible() for i in range(told.count()))
        page.locator(f"#predict-{k} input[type=radio]").first.check()
        page.click(f"#predict-{k}-submit")
        assert page.get_attribute(f"#predict-{k}-gate", "data-revealed") == "1"
        revealed = after(page, k)
        # Committed: the widget and all the text that reads it, together.
        assert revealed["texts"] == before["texts"]
        assert revealed["shown"] == revealed["texts"], p.widget
        assert page.is_visible(f"#widget-{p.widget}")
        if phrase:
            assert page.locator(".lesson-text > *", has_text=phrase[lang]).first.is_visible()
        # The later predictions' texts are still held back.
        for later in range(k + 1, len(section.predict)):
            assert after(page, later)["shown"] == []
    assert held == {key for key in READ_AFTER if key[0] == sid}


def test_a_held_text_comes_back_after_the_language_is_switched_only_once_committed(page, lang):
    """Switching the language redraws the text: still held while covered, shown once committed."""
    other = "en" if lang == "ja" else "ja"
    phrases = READ_AFTER[(3, "qkv")]
    page.goto("/lesson/3")
    section_drawn(page)
    page.click(f"#lang-{other}")
    page.wait_for_function("(l) => document.documentElement.lang === l", arg=other)
    assert after(page, 0)["shown"] == []
    assert phrases[other] in "".join(after(page, 0)["texts"])
    assert_accessible(page)  # covered: nothing of the held text reaches a screen reader
    page.locator("#predict-0 input[type=radio]").first.check()
    page.click("#predict-0-submit")
    assert page.locator(".lesson-text > *", has_text=phrases[other]).first.is_visible()


def test_the_answer_key_and_paper_hold_nothing_back(page, lang):
    for url in ("/lesson/3?teacher=1", "/lesson/3?print=1"):
        page.goto(url)
        section_drawn(page)
        assert page.locator("[data-held]").count() == 0
        assert page.locator(".lesson-text > *", has_text=READ_AFTER[(3, "qkv")][lang]).first.is_visible()
