"""Whole texts through a translator (Translator.translate_text), the guards on its output (the
length bound, loops cut), cased input, and the metrics that measure them."""

from __future__ import annotations

import pytest

from attnlab.data import enja
from attnlab.inference import translate as inf
from attnlab.metrics import bleu, repeated_span, repetition_rate, sentence_form_share
from attnlab.recipes import translate as tr


class _Echo(inf.Translator):
    """A Translator whose sentence translation is a lookup: what translate_text does around it is tested."""

    def __init__(self, table: dict[str, str], src_lang: str, tgt_lang: str) -> None:
        super().__init__(model=None, src_tok=None, tgt_tok=None, src_lang=src_lang, tgt_lang=tgt_lang)
        self.table, self.calls = table, []

    def translate(self, texts, **kwargs):
        self.calls.append(list(texts))
        return [inf.Translation(t, self.table[t], [], []) for t in texts]


def test_a_text_of_several_sentences_and_lines_is_translated_in_one_batch_and_keeps_its_breaks():
    table = {"猫が鳴いた。": "The cat mewed.", "犬が走った。": "The dog ran.", "鳥だ！": "A bird!", "魚。": "A fish."}
    echo = _Echo(table, "ja", "en")
    texts = ["猫が鳴いた。犬が走った。\n\n鳥だ！", "魚。", ""]
    assert echo.translate_text(texts) == ["The cat mewed. The dog ran.\n\nA bird!", "A fish.", ""]
    assert echo.calls == [["猫が鳴いた。", "犬が走った。", "鳥だ！", "魚。"]]  # every sentence of every text at once


def test_english_to_japanese_joins_sentences_without_spaces():
    echo = _Echo({"The cat ran.": "猫が走った。", "Mr. Lee sat.": "李さんが座った。"}, "en", "ja")
    assert echo.translate_text(["The cat ran. Mr. Lee sat."]) == ["猫が走った。李さんが座った。"]


def test_a_model_without_languages_takes_each_text_whole():
    echo = _Echo({"a. b.": "x"}, None, None)
    assert echo.translate_text(["a. b."]) == ["x"] and echo.calls == [["a. b."]]


def test_cut_loops_keeps_one_occurrence_of_a_run_and_leaves_ordinary_repeats():
    assert inf.cut_loops([5, 7, 8, 7, 8, 7, 8, 7, 8, 9]) == [5, 7, 8, 9]
    assert inf.cut_loops([1, 1, 1, 1, 2, 3, 3, 3]) == [1, 2, 3]
    assert inf.cut_loops([4, 4, 5, 6, 5, 6]) == [4, 4, 5, 6, 5, 6]  # twice is not a loop
    assert inf.cut_loops([]) == []


def test_the_output_bound_follows_the_input_within_the_models_positions():
    assert inf.output_limit(5) == 20 and inf.output_limit(30) == 70
    assert inf.output_limit(400, max_len=512) == 511


def test_repeated_span_and_repetition_rate_find_loops_in_words_and_characters():
    assert repeated_span("a b c b c b c d".split()) == (1, 2, 3)
    assert repeated_span("very very good".split()) is None
    assert repetition_rate(
        ["毎朝コーヒーとコーヒーとコーヒーと飲みます。", "I like it.", "no no no no"]
    ) == pytest.approx(2 / 3)
    assert repetition_rate([]) == 0.0


def test_sentence_form_wants_a_capital_and_a_final_mark():
    texts = ["I like it.", "i like it.", '"Go!"', "Hello", "3 cats ran?", "It's over…"]
    assert sentence_form_share(texts) == pytest.approx(4 / 6)


def test_case_insensitive_bleu_ignores_only_case():
    assert bleu(["The Cat sat."], ["the cat sat."], lowercase=True) == pytest.approx(100)
    assert bleu(["The Cat sat."], ["the cat sat."]) < 50
    assert bleu(["A dog sat."], ["the cat sat."], lowercase=True) < 50


def test_cased_models_read_english_as_typed_and_old_ones_lower_case_it():
    assert enja.normalize_input("  The  Cat ran. ", "en", lowercase=False) == "The Cat ran."
    assert enja.normalize_input("The Cat ran.", "en") == "the cat ran."
    assert enja.normalize_input("私 は 猫 です 。", "ja", lowercase=False) == "私は猫です。"

    class Tok:
        pad_id, vocab_size = 0, 100

        def __init__(self):
            self.seen = []

        def encode_batch(self, texts):
            self.seen += texts
            return [[] for _ in texts]  # no tokens: translate stops right after normalising

    for lowercase, expected in ((False, "The Cat ran."), (True, "the cat ran.")):
        tok = Tok()
        translator = inf.Translator(_NoModel(), tok, tok, src_lang="en", tgt_lang="ja", lowercase=lowercase)
        with pytest.raises(ValueError, match="no tokens"):
            translator.translate(["The Cat ran."])
        assert tok.seen == [expected]


class _NoModel:
    training = False

    def eval(self):
        return self


def test_checkpoint_config_records_whether_the_english_was_lower_cased():
    setup = tr.PRESETS["ja-en"]
    config = tr.checkpoint_config(setup, tr.build_config(setup, 100, 100, 0))
    assert config["lowercase"] is False and config["src_lang"] == "ja" and config["tgt_lang"] == "en"
    old = tr.dataclasses.replace(setup, from_tokenized=True)
    assert tr.checkpoint_config(old, tr.build_config(old, 100, 100, 0))["lowercase"] is True
