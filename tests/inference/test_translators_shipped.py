"""The shipped ja⇄en translators on what a learner types first: the lesson's example pairs, a long
sentence that must keep its clauses, paragraphs that keep their shape, English that reads as
sentences. Skipped where the weights are not built (`make models ONLY="ja-en en-ja"`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attnlab import assets
from attnlab import checkpoint as ckpt
from attnlab.loading import load_model
from attnlab.metrics import sentence_form_share


def _translator(name: str):
    folder = assets.asset_folder(name)
    if not (folder / ckpt.WEIGHTS_FILE).is_file():
        pytest.skip(f"{name}: weights not built yet (run `make models ONLY={name}`)")
    return load_model(folder, family="translate")


@pytest.fixture(scope="module")
def ja_en():
    return _translator("ja-en")


@pytest.fixture(scope="module")
def en_ja():
    return _translator("en-ja")


# Issue 27's goal for these sentences is not met yet: "chase" is in about ten of the 97,800
# training pairs, and the corpora mostly render 追いかける as "run after" (ja→en gives "A cat is
# after a dog.", "A cat takes after the dog."; en→ja gives 選んだ, "chose"). Strict: once a model
# translates them, the marker must go.
CHASE_GAP = pytest.mark.xfail(
    strict=True, reason="data-limited: 'chase' is rare in the training corpora (docs/translators.md)"
)


def _order(text: str, *words: str) -> list[int]:
    """Where each word (a regular expression) first occurs in ``text``; -1 if it does not."""
    return [m.start() if (m := re.search(w, text, flags=re.IGNORECASE)) else -1 for w in words]


@CHASE_GAP
@pytest.mark.parametrize(
    ("source", "first", "second"),
    [("猫が犬を追う。", "cat", "dog"), ("犬が猫を追う。", "dog", "cat"), ("猫が犬を追いかけている。", "cat", "dog")],
)
def test_the_lessons_chase_sentences_keep_who_chases_whom_into_english(ja_en, source, first, second):
    out = ja_en.translate_text([source], beam_size=4)[0]
    a, verb, b = _order(out, rf"\b{first}", r"\bchas", rf"\b{second}")
    assert -1 < a < verb < b, out  # subject, "chase", object: the roles survive the word order change


@CHASE_GAP
@pytest.mark.parametrize(
    ("source", "subject", "object_"),
    [
        ("The cat chases the dog.", "猫", "犬"),
        ("The dog chases the cat.", "犬", "猫"),
        ("The cat is chasing the dog.", "猫", "犬"),
    ],
)
def test_the_lessons_chase_sentences_keep_who_chases_whom_into_japanese(en_ja, source, subject, object_):
    out = en_ja.translate_text([source], beam_size=4)[0]
    # Japanese marks the roles with particles: the chaser with が/は, the chased with を.
    assert re.search(f"{subject}[がは]", out) and re.search(f"{object_}を", out) and "追" in out, out


@pytest.mark.xfail(
    strict=True,
    reason="not met yet: both models drop the last clause of this 33-word sentence (docs/translators.md); "
    "split into its sentences a paragraph keeps them, a single long sentence does not",
)
def test_a_thirty_word_sentence_keeps_each_of_its_clauses(ja_en, en_ja):
    ja = "昨日の朝、私は駅の近くの新しい喫茶店で友達とコーヒーを飲み、それから一緒に図書館へ行って、夕方まで日本の歴史についての本を静かに読みました。"
    en = (
        "Yesterday morning I had coffee with a friend at the new cafe near the station, and then we went "
        "to the library together and quietly read books about Japanese history until the evening."
    )
    assert len(en.split()) == 33
    to_en = ja_en.translate_text([ja], beam_size=4)[0]
    for clause_word in (r"coffee", r"librar", r"histor"):  # one content word from each of its three clauses
        assert re.search(clause_word, to_en, flags=re.IGNORECASE), (clause_word, to_en)
    to_ja = en_ja.translate_text([en], beam_size=4)[0]
    for clause_word in ("コーヒー", "図書館", "歴史"):
        assert clause_word in to_ja, (clause_word, to_ja)


def test_a_paragraph_comes_back_with_one_sentence_per_sentence_and_its_breaks(ja_en, en_ja):
    text = "昨日は雨が降った。私は駅まで歩いた。\n\n電車はとても混んでいた。"
    out = ja_en.translate_text([text], beam_size=4)[0]
    first, second = out.split("\n\n")
    assert len(re.findall(r"[.!?](\s|$)", first)) == 2 and len(re.findall(r"[.!?]$", second)) == 1, out
    back = en_ja.translate_text(["It rained yesterday. I walked to the station.\nThe train was crowded."], beam_size=4)[
        0
    ]
    assert back.count("\n") == 1 and back.split("\n")[0].count("。") == 2 and " " not in back, back


def test_english_outputs_read_as_sentences(ja_en):
    lines = (Path(__file__).parents[2] / "benchmarks" / "everyday" / "ja.txt").read_text(encoding="utf-8").splitlines()
    outputs = ja_en.translate_text(lines, beam_size=4)
    assert sentence_form_share(outputs) >= 0.95, [o for o in outputs if sentence_form_share([o]) < 1]
