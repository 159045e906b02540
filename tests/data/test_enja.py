"""small_parallel_enja as raw text: the normalisation, the detokenisation, the ja-mecab scorer, and
a translator trained with ``from_tokenized`` (tiny pairs written here, not the real corpus)."""

import dataclasses
import subprocess
import sys

import pytest
import sacrebleu

from attnlab import cli
from attnlab.data import enja
from attnlab.loading import load_model
from attnlab.metrics import bleu
from attnlab.recipes import translate as tr
from attnlab.train import TrainConfig

# Lines in the corpus's own form (tokenized; English lower-cased) and the raw text they stand for.
TOKENIZED = [
    ("i can 't tell who will arrive first .", "誰 が 一番 に 着 く か 私 に は 分か り ま せ ん 。"),
    ("you have eaten lunch , haven 't you ?", "お 弁当 食べ た ん で しょ う 。"),
    ('" i \'m home , " she said .', "「 ただいま 」 と 彼女 は 言 っ た 。"),
]
RAW = [
    ("i can't tell who will arrive first.", "誰が一番に着くか私には分かりません。"),
    ("you have eaten lunch, haven't you?", "お弁当食べたんでしょう。"),
    ('"i\'m home," she said.', "「ただいま」と彼女は言った。"),
]


@pytest.mark.parametrize("i", range(len(TOKENIZED)))
def test_tokenized_lines_become_raw_text(i):
    (en_tok, ja_tok), (en_raw, ja_raw) = TOKENIZED[i], RAW[i]
    assert enja.to_raw(en_tok, "en") == en_raw
    assert enja.to_raw(ja_tok, "ja") == ja_raw


@pytest.mark.parametrize("i", range(len(RAW)))
def test_raw_lines_are_left_as_they_are(i):
    en_raw, ja_raw = RAW[i]
    assert enja.to_raw(en_raw, "en") == en_raw
    assert enja.to_raw(ja_raw, "ja") == ja_raw


def test_japanese_keeps_spaces_between_latin_words_and_digits_only():
    assert enja.join_japanese("CD 2 枚 を 買 っ た 。") == "CD 2枚を買った。"
    assert enja.join_japanese("new york に 行 く") == "new yorkに行く"
    assert enja.join_japanese("  私 は  学生 で す 。 ") == "私は学生です。"


def test_user_input_is_normalised_like_the_training_text():
    assert enja.normalize_input("  The Cat  is HERE. ", "en") == "the cat is here."
    assert enja.normalize_input("猫 が 犬 を 追いかけ て いる 。", "ja") == "猫が犬を追いかけている。"
    assert enja.normalize_input("猫が犬を追いかけている。", "ja") == "猫が犬を追いかけている。"


@pytest.mark.parametrize("fn", [enja.to_raw, enja.normalize_input])
def test_unknown_language_is_a_clear_error(fn):
    with pytest.raises(ValueError, match="unknown language 'de'"):
        fn("hallo", "de")


def test_ja_mecab_bleu_equals_the_sacrebleu_command_line(tmp_path):
    hyps = ["猫が犬を追いかけている。", "私は学生です。", "今日はとても暑い日でした。"]
    refs = ["猫が犬を追っている。", "私は学生です。", "今日はとても暑かった。"]
    (tmp_path / "hyp.txt").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    (tmp_path / "ref.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    # sacreBLEU's own program, as a WAT-style evaluation would call it.
    out = subprocess.run(
        [sys.executable, "-m", "sacrebleu", str(tmp_path / "ref.txt"), "-i", str(tmp_path / "hyp.txt")]
        + ["-tok", "ja-mecab", "-b", "-w", "6"],
        capture_output=True,
        text=True,
        check=True,
    )
    expected = float(out.stdout.strip())
    assert bleu(hyps, refs, tokenize="ja-mecab") == pytest.approx(expected, abs=1e-6)
    # MeCab splits into words: the score differs from the character-level one.
    assert bleu(hyps, refs, tokenize="ja-mecab") != pytest.approx(bleu(hyps, refs, tokenize="char"))
    assert expected == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs], tokenize="ja-mecab").score, abs=1e-6)


def test_presets_score_each_target_language_as_wat_does():
    assert tr.PRESETS["en-ja"].bleu_tokenize == "ja-mecab"
    assert tr.PRESETS["ja-en"].bleu_tokenize == "13a"
    for name, (src, tgt) in {"ja-en": ("ja", "en"), "en-ja": ("en", "ja")}.items():
        setup = tr.PRESETS[name]
        # They train on data/enja_mix.py's raw, cased text: nothing to detokenize, nothing lower-cased.
        assert (setup.src_lang, setup.tgt_lang, setup.from_tokenized, setup.lowercase) == (src, tgt, False, False)


def test_from_tokenized_needs_both_languages():
    with pytest.raises(ValueError, match="from_tokenized needs src_lang and tgt_lang"):
        tr.TranslationSetup(from_tokenized=True, src_lang="en")
    with pytest.raises(ValueError, match="src_lang"):
        tr.TranslationSetup(src_lang="fr")


def tiny_enja_setup(out_dir):
    return dataclasses.replace(
        tr.PRESETS["tiny"],
        joint_vocab=False,
        src_lang="en",
        tgt_lang="ja",
        from_tokenized=True,
        bleu_tokenize="ja-mecab",
        eval_sentences=3,
        train=TrainConfig(out_dir=str(out_dir), max_steps=4, lr=3e-3, warmup_steps=2, progress=False, seed=1),
    )


def test_a_translator_trained_from_tokenized_text_reads_raw_input(tmp_path):
    pairs = TOKENIZED * 4
    _, _, translator = tr.train_translation(tiny_enja_setup(tmp_path / "run"), pairs, TOKENIZED)
    # The tokenizers learnt raw text: no word-splitting spaces in the Japanese vocabulary.
    assert " " not in translator.tgt_tok.chars and "。" in translator.tgt_tok.chars
    loaded = load_model(tmp_path / "run" / "best", family="translate")
    assert (loaded.src_lang, loaded.tgt_lang, loaded.bleu_tokenize) == ("en", "ja", "ja-mecab")
    # A user's capitals and extra spaces are normalised away, as the corpus is lower-cased.
    shouted, plain = loaded.translate(["I Can't TELL   who will arrive first.", "i can't tell who will arrive first."])
    assert shouted.text == plain.text
    assert shouted.src_tokens == plain.src_tokens
    assert shouted.source == "I Can't TELL   who will arrive first."


def test_evaluate_from_tokenized_scores_raw_text(tmp_path, capsys):
    tr.train_translation(tiny_enja_setup(tmp_path / "run"), TOKENIZED * 4, TOKENIZED)
    (tmp_path / "test.en").write_text("\n".join(en for en, _ in TOKENIZED) + "\n", encoding="utf-8")
    (tmp_path / "test.ja").write_text("\n".join(ja for _, ja in TOKENIZED) + "\n", encoding="utf-8")
    args = ["evaluate", "--model", str(tmp_path / "run" / "best"), "--src", str(tmp_path / "test.en")]
    args += ["--ref", str(tmp_path / "test.ja"), "--beam", "1"]
    assert cli.main(args + ["--from-tokenized"]) == 0
    out = capsys.readouterr().out
    assert "BLEU tokenizer ja-mecab" in out and "(3 sentences" in out
    # The score printed is the one of raw references, not of the tokenized ones.
    translator = load_model(tmp_path / "run" / "best", family="translate")
    hyps = [t.text for t in translator.translate([en for en, _ in RAW], beam_size=1)]
    expected = bleu(hyps, [ja for _, ja in RAW], tokenize="ja-mecab")
    assert f"BLEU {expected:.2f}" in out


def test_evaluate_from_tokenized_needs_a_model_that_knows_its_languages(tmp_path, capsys):
    setup = dataclasses.replace(tiny_enja_setup(tmp_path / "run"), src_lang=None, tgt_lang=None, from_tokenized=False)
    tr.train_translation(setup, [(en, ja) for en, ja in RAW] * 4, RAW)
    (tmp_path / "s").write_text("a\n", encoding="utf-8")
    (tmp_path / "r").write_text("b\n", encoding="utf-8")
    args = ["evaluate", "--model", str(tmp_path / "run" / "best"), "--src", str(tmp_path / "s")]
    assert cli.main(args + ["--ref", str(tmp_path / "r"), "--from-tokenized"]) != 0
    assert "--from-tokenized needs a model trained with src_lang and tgt_lang" in capsys.readouterr().err
