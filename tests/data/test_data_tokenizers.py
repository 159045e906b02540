"""Tokenizers: round trips on English, German, raw and space-split Japanese; specials; save/load."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.data import (
    CharTokenizer,
    PretrainedTokenizer,
    SpecialTokens,
    SubwordTokenizer,
    Tokenizer,
    WordVocab,
    build_tokenizers,
    load_tokenizer,
    read_lines,
    train_subword_tokenizer,
)

ENGLISH = [
    "A man in a blue shirt is standing on a ladder.",
    "Two dogs are running through the snow.",
    "The children play football in the park.",
    "A woman sells fresh bread at the market.",
    "It's raining, so we'll stay inside today.",
    "She paid 342,000 yen for the old car in 2024.",
    "A group of people are waiting for the bus.",
    "The little girl is climbing into a wooden playhouse.",
    "My brother doesn't like cold coffee.",
    "Three musicians are playing on the street corner.",
]
GERMAN = [
    "Ein Mann in einem blauen Hemd steht auf einer Leiter.",
    "Zwei Hunde laufen durch den Schnee.",
    "Die Kinder spielen Fußball im Park.",
    "Eine Frau verkauft frisches Brot auf dem Markt.",
    "Mehrere Männer mit Schutzhelmen öffnen große Türen.",
    "Ein kleines Mädchen klettert in ein Spielhaus aus Holz.",
    "Die Straße ist nass, weil es regnet.",
    "Über der Brücke fliegen fünf weiße Vögel.",
    "Äpfel und Birnen liegen auf dem Tisch.",
    "Drei Musiker spielen an der Straßenecke.",
]
JAPANESE_RAW = [
    "青いシャツの男性がはしごの上に立っている。",
    "二匹の犬が雪の中を走っている。",
    "子供たちは公園でサッカーをしている。",
    "女性が市場で焼きたてのパンを売っている。",
    "雨が降っているので、今日は家にいます。",
    "彼女は二〇二四年にその古い車を三十四万二千円で買った。",
    "人々がバスを待っている。",
    "小さな女の子が木の遊び小屋に登っている。",
    "私の兄は冷たいコーヒーが好きではない。",
    "三人の音楽家が街角で演奏している。",
]
JAPANESE_SPLIT = [
    "青い シャツ の 男性 が はしご の 上 に 立っ て いる 。",
    "二 匹 の 犬 が 雪 の 中 を 走っ て いる 。",
    "子供 たち は 公園 で サッカー を し て いる 。",
    "女性 が 市場 で 焼きたて の パン を 売っ て いる 。",
    "雨 が 降っ て いる ので 、 今日 は 家 に い ます 。",
    "人々 が バス を 待っ て いる 。",
    "小さな 女の子 が 木 の 遊び 小屋 に 登っ て いる 。",
    "私 の 兄 は 冷たい コーヒー が 好き で は ない 。",
    "三 人 の 音楽家 が 街角 で 演奏 し て いる 。",
    "誰 が 一番 に 着く か 私 に は 分かり ませ ん 。",
]
CORPORA = {"en": ENGLISH, "de": GERMAN, "ja-raw": JAPANESE_RAW, "ja-split": JAPANESE_SPLIT}


def normalize_space(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def subword_tokenizers():
    return {
        (model, lang): train_subword_tokenizer(texts, 160, model=model)
        for model in ("bpe", "unigram")
        for lang, texts in CORPORA.items()
    }


@pytest.mark.parametrize("model", ["bpe", "unigram"])
@pytest.mark.parametrize("lang", list(CORPORA))
def test_subword_round_trip(subword_tokenizers, model, lang):
    tok = subword_tokenizers[(model, lang)]
    for text in CORPORA[lang]:
        ids = tok.encode(text)
        assert tok.unk_id not in ids
        assert normalize_space(tok.decode(ids)) == normalize_space(text)
    decoded = tok.decode_batch(tok.encode_batch(CORPORA[lang]))
    assert [normalize_space(d) for d in decoded] == [normalize_space(t) for t in CORPORA[lang]]


@pytest.mark.parametrize("model", ["bpe", "unigram"])
def test_raw_japanese_is_split_into_subwords_without_a_segmenter(subword_tokenizers, model):
    tok = subword_tokenizers[(model, "ja-raw")]
    for text in JAPANESE_RAW:
        pieces = tok.tokens(text)
        assert 1 < len(pieces) <= len(text) + 1  # +1 for a possible lone word-start marker
        # Display strings hold whole characters, so they spell the sentence.
        assert "".join(pieces).replace("▁", "") == text


@pytest.mark.parametrize("model", ["bpe", "unigram"])
@pytest.mark.parametrize("lang", ["en", "de", "ja-split"])
def test_tokens_spell_the_text_with_word_markers(subword_tokenizers, model, lang):
    tok = subword_tokenizers[(model, lang)]
    for text in CORPORA[lang]:
        assert "".join(tok.tokens(text)).replace("▁", " ").strip() == text


def test_unseen_text_from_seen_characters_round_trips(subword_tokenizers):
    tok = subword_tokenizers[("bpe", "de")]
    text = "Zwei große Hunde spielen im Schnee."
    assert tok.decode(tok.encode(text)) == text
    tok = subword_tokenizers[("unigram", "ja-raw")]
    assert tok.decode(tok.encode("犬が公園で走っている。")) == "犬が公園で走っている。"


def test_digits_are_single_tokens(subword_tokenizers):
    tok = subword_tokenizers[("bpe", "en")]
    pieces = [p.replace("▁", "") for p in tok.tokens("in 2024")]
    assert [p for p in pieces if p.isdigit()] == ["2", "0", "2", "4"]


def test_decomposed_umlauts_get_the_same_ids(subword_tokenizers):
    tok = subword_tokenizers[("bpe", "de")]
    text = "Zwei Männer öffnen Türen."
    assert tok.encode(unicodedata.normalize("NFD", text)) == tok.encode(text)


@pytest.mark.parametrize("kind", ["bpe", "unigram", "char"])
def test_special_ids_and_bos_eos(kind):
    src, _ = build_tokenizers(ENGLISH, GERMAN, kind=kind, joint=True, vocab_size=200)
    assert isinstance(src, Tokenizer)
    assert (src.pad_id, src.unk_id, src.bos_id, src.eos_id, src.mask_id) == (0, 1, 2, 3, 4)
    assert [src.id_to_token(i) for i in range(5)] == ["[PAD]", "[UNK]", "[BOS]", "[EOS]", "[MASK]"]
    assert src.token_to_id("[MASK]") == 4
    plain = src.encode("Two dogs.")
    wrapped = src.encode("Two dogs.", add_bos=True, add_eos=True)
    assert wrapped == [src.bos_id] + plain + [src.eos_id]
    labels = src.tokens("Two dogs.", add_bos=True, add_eos=True)
    assert labels[0] == "[BOS]" and labels[-1] == "[EOS]" and len(labels) == len(wrapped)
    assert src.decode(wrapped + [src.pad_id] * 3) == "Two dogs."
    shown = src.decode(wrapped, skip_special=False)
    assert "[BOS]" in shown and "[EOS]" in shown
    assert src.decode(torch.tensor(wrapped)) == "Two dogs."


def test_word_and_pretrained_tokenizers_implement_the_interface():
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, pre_tokenizers

    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "two": 4, "dogs": 5, ".": 6}
    hf = HFTokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    pretrained = PretrainedTokenizer(hf, pad="[PAD]", unk="[UNK]", bos="[CLS]", eos="[SEP]")
    words = WordVocab(["two", "dogs", "."])
    for tok in (pretrained, words):
        assert isinstance(tok, Tokenizer)
        wrapped = tok.encode("two cats.", add_bos=True, add_eos=True)
        assert tok.tokens("two cats.", add_bos=True, add_eos=True) == [tok.id_to_token(i) for i in wrapped]
        assert [tok.id_to_token(i) for i in wrapped] == [
            tok.id_to_token(tok.bos_id),
            "two",
            "[UNK]",
            ".",
            tok.id_to_token(tok.eos_id),
        ]
        assert tok.encode_batch(["two dogs.", "dogs"]) == [tok.encode("two dogs."), tok.encode("dogs")]
    assert words.kind == "word" and words.mask_id is None
    assert words.decode(words.encode("Two dogs .", add_bos=True, add_eos=True)) == "two dogs ."
    assert words.decode_batch([words.encode("dogs")]) == ["dogs"]
    ids, spans = pretrained.encode_with_offsets("two  dogs.")
    assert ids == pretrained.encode("two  dogs.") and spans == [(0, 3), (5, 9), (9, 10)]


def test_no_mask_token_when_disabled():
    tok = train_subword_tokenizer(ENGLISH, 120, special_tokens=SpecialTokens(mask=None))
    assert tok.mask_id is None
    assert tok.token_to_id("[MASK]") is None
    assert tok.id_to_token(3) == "[EOS]"


def test_unknown_characters_map_to_unk():
    for tok in (train_subword_tokenizer(ENGLISH, 120), CharTokenizer.train(ENGLISH)):
        ids = tok.encode("dog 犬")
        assert tok.unk_id in ids
        assert tok.decode(ids).strip() == "dog"


@pytest.mark.parametrize("kind", ["bpe", "unigram", "char"])
def test_save_load_gives_identical_ids(tmp_path, kind):
    texts = GERMAN + JAPANESE_RAW
    src, tgt = build_tokenizers(texts, ENGLISH, kind=kind, joint=False, vocab_size=220)
    path = src.save(tmp_path / "ckpt", "src")
    assert path == tmp_path / "ckpt" / "src.json"
    assert json.loads(path.read_text(encoding="utf-8"))["kind"] == kind
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    loaded = load_tokenizer(path)
    assert type(loaded) is type(src) and loaded.kind == kind
    assert loaded.vocab_size == src.vocab_size
    for text in texts + ["Unbekannt: ☃ und 猫"]:
        assert loaded.encode(text, add_bos=True, add_eos=True) == src.encode(text, add_bos=True, add_eos=True)
        assert loaded.tokens(text) == src.tokens(text)
        assert loaded.decode(src.encode(text)) == src.decode(src.encode(text))


def test_build_tokenizers_joint_and_separate():
    src, tgt = build_tokenizers(GERMAN, JAPANESE_RAW, kind="bpe", joint=True, vocab_size=300)
    assert src is tgt
    assert tgt.unk_id not in tgt.encode(JAPANESE_RAW[0]) and src.unk_id not in src.encode(GERMAN[0])
    src, tgt = build_tokenizers(GERMAN, JAPANESE_RAW, kind="unigram", joint=False, vocab_size=300)
    assert src is not tgt
    assert src.unk_id in src.encode("犬") and tgt.unk_id in tgt.encode("ß")
    src, tgt = build_tokenizers(GERMAN, ENGLISH, kind="char", joint=False, vocab_size=None)
    assert "ü" in src.chars and "ü" not in tgt.chars


def test_char_tokenizer_round_trip_vocab_and_display():
    tok = CharTokenizer.train(GERMAN + JAPANESE_RAW)
    for text in GERMAN + JAPANESE_RAW:
        ids = tok.encode(text)
        assert len(ids) == len(text)
        assert tok.decode(ids) == text
    assert tok.tokens("Ein Mann") == ["E", "i", "n", "▁", "M", "a", "n", "n"]
    assert tok.vocab_size == 5 + len(set("".join(GERMAN + JAPANESE_RAW)))
    small = CharTokenizer.train(["aaab", "ab c"], vocab_size=5 + 2)
    assert small.chars == ["a", "b"]  # the two most frequent characters
    assert small.encode("abc") == [small.token_to_id("a"), small.token_to_id("b"), small.unk_id]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=5))
def test_char_tokenizer_round_trips_any_nfc_text(texts):
    tok = CharTokenizer.train(texts)
    for text in texts:
        assert tok.decode(tok.encode(text)) == unicodedata.normalize("NFC", text)


def test_bad_arguments_raise_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="model must be"):
        train_subword_tokenizer(ENGLISH, 100, model="wordpiece")
    with pytest.raises(ValueError, match="no room"):
        train_subword_tokenizer(ENGLISH, 5)
    with pytest.raises(ValueError, match="empty text"):
        train_subword_tokenizer(["", " "], 100)
    with pytest.raises(ValueError, match="needs a vocab_size"):
        build_tokenizers(ENGLISH, GERMAN, kind="bpe", joint=True)
    with pytest.raises(ValueError, match="kind must be"):
        build_tokenizers(ENGLISH, GERMAN, kind="word", joint=True, vocab_size=100)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        CharTokenizer.train(ENGLISH).decode([10_000])
    other = tmp_path / "other.json"
    other.write_text('{"model": {}}', encoding="utf-8")
    with pytest.raises(ValueError, match="other.json: not an attnlab tokenizer"):
        load_tokenizer(other)
    with pytest.raises(FileNotFoundError, match="nothing.json"):
        load_tokenizer(tmp_path / "nothing.json")


DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


@pytest.mark.skipif(not (DATA / "small_parallel_enja").is_dir(), reason="real data not available")
@pytest.mark.parametrize("model", ["bpe", "unigram"])
def test_real_japanese_round_trip_raw_and_split(model):
    split = read_lines(DATA / "small_parallel_enja" / "train.ja")[:1500]
    raw = [line.replace(" ", "") for line in split]
    for texts in (split, raw):
        tok = train_subword_tokenizer(texts, 1000, model=model)
        assert isinstance(tok, SubwordTokenizer)
        decoded = tok.decode_batch(tok.encode_batch(texts))
        assert [normalize_space(d) for d in decoded] == [normalize_space(t) for t in texts]
