"""The ja⇄en translators' data (attnlab.data.enja_mix) and paragraph splitting (attnlab.data.sentences),
on small corpora written here: no ../shared needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnlab.data import enja_mix, sentences
from attnlab.data.enja_mix import TrueCaser, concatenations, normalize


def test_normalize_ignores_case_width_spaces_and_punctuation():
    assert normalize("I can't tell.") == normalize("i can 't tell .") == normalize("I cant tell") == "icanttell"
    assert normalize("私 は テニス 部員 で す 。") == normalize("私はテニス部員です") == "私はテニス部員です"
    assert normalize("ＡＢＣ！") == normalize("abc") == "abc"  # full-width letters are the same letters
    assert normalize("Tom ran.") != normalize("Tom runs.")


def test_truecaser_learns_casing_inside_sentences_not_at_their_start():
    cased = [
        "I saw Tom in Tokyo.",
        "Yesterday I met Tom.",
        "We went to Tokyo. Tom was there.",
        "The cat sat. The dog ran.",  # "The" starts both sentences: never seen inside one
        "He said the cat ran.",
        "Then I left.",
    ]
    tc = TrueCaser.learn(cased)
    assert tc.forms["i"] == "I" and tc.forms["tom"] == "Tom" and tc.forms["tokyo"] == "Tokyo"
    assert "the" not in tc.forms  # its usual form inside a sentence is "the"
    assert tc("i saw tom's cat in tokyo. the cat ran.") == "I saw Tom's cat in Tokyo. The cat ran."
    assert tc("unknown words stay.") == "Unknown words stay."


def test_concatenations_join_whole_sentences_as_each_language_writes_them():
    pairs = [
        ("猫が鳴いた。", "The cat mewed."),
        ("犬が走った。", "The dog ran."),
        ("鳥だ！", "A bird!"),
        ("途中", "half"),
    ]
    joined = concatenations(pairs, 50, seed=1)
    assert len(joined) == 50
    for ja, en in joined:
        assert "途中" not in ja and "half" not in en  # not a whole sentence: never joined
        parts = [s for s in ("猫が鳴いた。", "犬が走った。", "鳥だ！") if s in ja]
        assert 2 <= len(parts) <= 3 and " " not in ja  # Japanese joined without spaces
        assert en.count(" ") >= 3 and en[0].isupper() and en.endswith((".", "!"))
    assert concatenations(pairs, 5, seed=1) == concatenations(pairs, 5, seed=1)  # seeded


def _write_corpora(root: Path) -> None:
    tatoeba = [(f"猫{i}匹が走った。", f"{i} cats ran.") for i in range(60)]
    tatoeba += [("東京に行った。", "I went to Tokyo."), ("トムは走った。", "Tom ran."), ("トムは走った。", "Tom ran.")]
    (root / "tatoeba-jpn").mkdir(parents=True)
    (root / "tatoeba-jpn" / "train.ja").write_text("".join(ja + "\n" for ja, _ in tatoeba), encoding="utf-8")
    (root / "tatoeba-jpn" / "train.en").write_text("".join(en + "\n" for _, en in tatoeba), encoding="utf-8")
    sp = root / "small_parallel_enja"
    sp.mkdir()
    train = [("トム は 走 っ た 。", "tom ran ."), ("私 は 東京 に 行 っ た 。", "i went to tokyo .")]
    train += [(f"犬 {i} 匹 が い る 。", f"there are {i} dogs .") for i in range(40)]
    for split, rows in (("train", train), ("dev", [("鳥 が い る 。", "there is a bird .")]), ("test", train[2:4])):
        (sp / f"{split}.ja").write_text("".join(ja + "\n" for ja, _ in rows), encoding="utf-8")
        (sp / f"{split}.en").write_text("".join(en + "\n" for _, en in rows), encoding="utf-8")


def test_build_holds_out_sentences_that_no_training_pair_shares(tmp_path):
    _write_corpora(tmp_path)
    splits = enja_mix.build(tmp_path, n_dev=5, n_test=10, concat_fraction=0.2)
    assert len(splits.dev) == 5 and len(splits.test) == 10 and len(splits.sp_test) == 2
    held_ja = {normalize(ja) for ja, _ in splits.dev + splits.test + splits.sp_test}
    held_en = {normalize(en) for _, en in splits.dev + splits.test + splits.sp_test}
    for ja, en in splits.train:
        for piece in sentences.split_japanese(ja):  # concatenated pairs too: no held-out sentence inside
            assert normalize(piece) not in held_ja, ja
        for piece in sentences.split_english(en):
            assert normalize(piece) not in held_en, en
    # small_parallel_enja's English comes back cased; a pair both corpora hold is kept once.
    english = [en for _, en in splits.train]
    assert not any(en[0].islower() for en in english)
    assert "Tom ran." in english and "tom ran." not in english
    held_tom = normalize("Tom ran.") in held_en
    assert english.count("Tom ran.") == (0 if held_tom else 1) + sum(
        "Tom ran. " in e or e.endswith(" Tom ran.") for e in english
    )
    assert splits.stats["tatoeba_duplicates"] == 1 and splits.stats["concatenated"] > 0
    assert enja_mix.build(tmp_path, n_dev=5, n_test=10).test == splits.test  # the same draw every time


def test_the_command_writes_line_aligned_splits_and_names_a_missing_corpus(tmp_path, capsys):
    _write_corpora(tmp_path / "data")
    small = ["--n-dev", "5", "--n-test", "10"]
    assert enja_mix.main(["--data", str(tmp_path / "data"), "--out", str(tmp_path / "out"), *small]) == 0
    for name in ("train", "dev", "test", "sp_test"):
        ja = (tmp_path / "out" / f"{name}.ja").read_text(encoding="utf-8").splitlines()
        en = (tmp_path / "out" / f"{name}.en").read_text(encoding="utf-8").splitlines()
        assert len(ja) == len(en) > 0
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["train"] == len((tmp_path / "out" / "train.en").read_text(encoding="utf-8").splitlines())
    assert enja_mix.main(["--data", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o2")]) == 2
    assert "tatoeba-jpn" in capsys.readouterr().err
    assert enja_mix.main(["--data", str(tmp_path / "data"), "--out", str(tmp_path / "o3")]) == 2  # 500 + 1000
    assert "too few to hold out 500 + 1000" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# Paragraphs
# --------------------------------------------------------------------------------------------


def test_japanese_sentences_end_at_sentence_marks_but_not_inside_quotes():
    assert sentences.split_japanese("彼は「もう帰る。」と言った。今日は晴れです！明日は？") == [
        "彼は「もう帰る。」と言った。",
        "今日は晴れです！",
        "明日は？",
    ]


def test_english_sentences_keep_abbreviations_and_quoted_speech():
    assert sentences.split_english('Mr. Smith arrived at 3 p.m. today. He said, "Go home." Then he left.') == [
        "Mr. Smith arrived at 3 p.m. today.",
        'He said, "Go home."',
        "Then he left.",
    ]


@pytest.mark.parametrize(
    ("text", "lang", "out_lang", "fake", "expected"),
    [
        ("猫が鳴いた。犬が走った。\n\n鳥だ。", "ja", "en", ["A.", "B.", "C."], "A. B.\n\nC."),
        ("The cat ran. The dog sat.\nA bird!", "en", "ja", ["甲。", "乙。", "丙！"], "甲。乙。\n丙！"),
        ("  \n一つだけ。\n", "ja", "en", ["One."], "\nOne.\n"),
        ("", "ja", "en", [], ""),
    ],
)
def test_a_text_comes_back_with_its_line_and_paragraph_breaks(text, lang, out_lang, fake, expected):
    segments = sentences.split_text(text, lang)
    assert [s.text for s in segments if s.is_sentence] == [
        x for line in text.split("\n") for x in sentences.split_sentences(line, lang) if line.strip()
    ]
    assert sentences.join_text(segments, fake, out_lang) == expected


def test_join_text_wants_one_translation_per_sentence():
    segments = sentences.split_text("一。二。", "ja")
    with pytest.raises(ValueError, match="1 translations for 2 sentences"):
        sentences.join_text(segments, ["One."], "en")
    with pytest.raises(ValueError, match="unknown language 'de'"):
        sentences.split_sentences("Hallo.", "de")
