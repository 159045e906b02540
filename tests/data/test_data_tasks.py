"""Generated tasks: known values, independent parse-back, determinism, disjoint splits."""

from __future__ import annotations

import datetime
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from num2words import num2words

from attnlab.data import DATE_FORMATS, TASKS, english_number, japanese_numeral, make_splits, make_task, render_date
from attnlab.data.tasks import MAX_EN_WORDS

# ---- independent parsers, written from the rules of each language -------------------------

EN_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen".split()
    )
}
EN_WORDS.update({w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)})
EN_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}


def parse_english(text: str) -> int:
    total = current = 0
    for word in text.split():
        if word in EN_SCALES:
            total += current * EN_SCALES[word]
            current = 0
        elif word == "hundred":
            current *= 100
        else:
            current += sum(EN_WORDS[part] for part in word.split("-"))
    return total + current


JA_DIGITS = {c: i for i, c in enumerate("零一二三四五六七八九")}
JA_SMALL = {"十": 10, "百": 100, "千": 1000}
JA_BIG = {"万": 10**4, "億": 10**8, "兆": 10**12}


def parse_japanese(text: str) -> int:
    total = group = 0
    digit = None
    for ch in text:
        if ch in JA_DIGITS:
            digit = JA_DIGITS[ch]
        elif ch in JA_SMALL:
            group += (1 if digit is None else digit) * JA_SMALL[ch]
            digit = None
        else:
            total += (group + (digit or 0)) * JA_BIG[ch]
            group, digit = 0, None
    return total + group + (digit or 0)


# ---- numbers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n, kanji",
    [
        (0, "零"),
        (7, "七"),
        (10, "十"),
        (100, "百"),
        (1000, "千"),
        (1001, "千一"),
        (1100, "千百"),
        (9999, "九千九百九十九"),
        (10000, "一万"),
        (11000, "一万千"),
        (342000, "三十四万二千"),
        (10_000_000, "千万"),
        (20_000_000, "二千万"),
        (100_000_000, "一億"),
        (100_000_001, "一億一"),
        (1_234_567_890, "十二億三千四百五十六万七千八百九十"),
        (10**12, "一兆"),
    ],
)
def test_japanese_numeral_known_values(n, kanji):
    assert japanese_numeral(n) == kanji


@pytest.mark.parametrize(
    "n, words",
    [
        (0, "zero"),
        (15, "fifteen"),
        (342, "three hundred forty-two"),
        (1100, "one thousand one hundred"),
        (342000, "three hundred forty-two thousand"),
        (20_000_000, "twenty million"),
        (100_000_001, "one hundred million one"),
        (2_000_000_017, "two billion seventeen"),
    ],
)
def test_english_number_known_values(n, words):
    assert english_number(n) == words


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=10**14))
def test_numbers_agree_with_num2words_and_parse_back(n):
    assert japanese_numeral(n) == num2words(n, lang="ja")
    british = num2words(n).replace(",", "").split()
    assert english_number(n) == " ".join(w for w in british if w != "and")
    assert parse_japanese(japanese_numeral(n)) == n
    assert parse_english(english_number(n)) == n


def test_number_functions_reject_bad_input():
    with pytest.raises(ValueError, match="japanese_numeral"):
        japanese_numeral(-1)
    with pytest.raises(ValueError, match="english_number"):
        english_number(10**15)
    with pytest.raises(ValueError):
        japanese_numeral(3.0)


def test_numbers_task_pairs_are_translations_of_varied_length():
    pairs = make_task("numbers-en-ja", 2000, seed=3)
    for en, ja in pairs:
        assert parse_english(en) == parse_japanese(ja)
    n_words = [len(en.split()) for en, _ in pairs]
    assert min(n_words) == 1 and max(n_words) == MAX_EN_WORDS
    assert len(set(n_words)) == MAX_EN_WORDS  # every length from 1 to 12 occurs
    ja_lengths = [len(ja) for _, ja in pairs]
    assert min(ja_lengths) <= 2 and max(ja_lengths) >= 15
    reverse = make_task("numbers-ja-en", 300, seed=3)
    assert all(parse_japanese(ja) == parse_english(en) for ja, en in reverse)


# ---- dates -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "locale, fmt, text",
    [
        ("en", "long", "March 5, 2024"),
        ("en", "full", "Tuesday, March 5, 2024"),
        ("en_GB", "medium", "5 Mar 2024"),
        ("de", "long", "5. März 2024"),
        ("de", "medium", "05.03.2024"),
        ("fr", "long", "5 mars 2024"),
        ("es", "long", "5 de marzo de 2024"),
        ("it", "dd/MM/y", "05/03/2024"),
        ("ja", "long", "2024年3月5日"),
        ("ja", "y年M月d日(E)", "2024年3月5日(火)"),
    ],
)
def test_known_date_in_several_locales(locale, fmt, text):
    assert (locale, fmt) in DATE_FORMATS
    assert render_date(datetime.date(2024, 3, 5), locale, fmt) == text


STRPTIME_FORMATS = [
    "%B %d, %Y", "%b %d, %Y", "%A, %B %d, %Y", "%a, %b %d, %Y", "%d %B %Y", "%d %b %Y",
    "%A, %d %B %Y", "%a %d %b %Y", "%d/%m/%Y", "%d.%m.%Y", "%d-%m-%Y", "%Y/%m/%d", "%Y年%m月%d日",
]  # fmt: skip


def parse_date(text: str) -> datetime.date | None:
    text = re.sub(r"(\(.\)|.曜日)$", "", text)  # Japanese weekday suffixes
    for fmt in STRPTIME_FORMATS:
        try:
            return datetime.datetime.strptime(text, fmt).date()
        except ValueError:
            continue
    return None


def test_dates_task_parses_back_to_its_target():
    pairs = make_task("dates", 1500, seed=5)
    parsed = 0
    for src, iso in pairs:
        date = datetime.date.fromisoformat(iso)
        assert iso == f"{date.year:04d}-{date.month:02d}-{date.day:02d}"
        assert str(date.year) in src
        back = parse_date(src)
        if back is not None:
            assert back == date, src
            parsed += 1
    assert parsed > len(pairs) // 3  # English, numeric and Japanese forms are checked independently
    locales_seen = {src for src, _ in pairs if re.search(r"[äéìçãú]|März|mars|maart", src)}
    assert locales_seen  # non-English formats occur too


def test_every_date_format_names_exactly_one_date():
    """No string is produced by two different dates, even a century apart (1950 vs 2050)."""
    seen: dict[str, datetime.date] = {}
    for year in (1950, 2050):
        date = datetime.date(year, 1, 1)
        while date.year == year:
            for locale, fmt in DATE_FORMATS:
                text = render_date(date, locale, fmt)
                assert seen.setdefault(text, date) == date, f"{text!r} is both {seen[text]} and {date}"
            date += datetime.timedelta(days=1)


# ---- task API --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TASKS)
def test_make_task_is_deterministic_by_seed(name):
    a = make_task(name, 300, seed=11)
    assert a == make_task(name, 300, seed=11)
    assert a != make_task(name, 300, seed=12)
    assert make_task(name, 100, seed=11) == a[:100]
    assert len({src for src, _ in a}) == len(a)


def test_mixed_contains_numbers_and_dates():
    pairs = make_task("mixed", 400, seed=0)
    iso = re.compile(r"^\d{4}-\d{2}-\d{2}$")
    n_dates = sum(bool(iso.match(tgt)) for _, tgt in pairs)
    assert 120 < n_dates < 280
    assert all(parse_english(src) == parse_japanese(tgt) for src, tgt in pairs if not iso.match(tgt))


def test_make_splits_are_disjoint_and_sized():
    splits = make_splits("mixed", 500, 100, 120, seed=4)
    assert (len(splits.train), len(splits.valid), len(splits.test)) == (500, 100, 120)
    sources = [{src for src, _ in part} for part in splits]
    assert not sources[0] & sources[1] and not sources[0] & sources[2] and not sources[1] & sources[2]
    assert make_splits("mixed", 500, 100, 120, seed=4) == splits


def test_generation_is_fast():
    start = time.perf_counter()
    make_task("mixed", 20_000, seed=0)
    assert time.perf_counter() - start < 5.0  # about 0.2 s on a laptop core


def test_task_errors():
    with pytest.raises(ValueError, match="unknown task 'numbers'"):
        make_task("numbers", 10)
    with pytest.raises(ValueError, match="n_valid"):
        make_splits("dates", 10, -1, 0)


def test_number_lists_are_lists_of_number_translations_with_long_sources():
    pairs = make_task("number-lists-en-ja", 1500, seed=4)
    counts = set()
    for src, tgt in pairs:
        en_parts, ja_parts = src.split(" and "), tgt.split("、")
        assert len(en_parts) == len(ja_parts)
        counts.add(len(en_parts))
        assert [parse_english(e) for e in en_parts] == [parse_japanese(j) for j in ja_parts]
    assert counts == {1, 2, 3, 4, 5}
    assert max(len(src.split()) for src, _ in pairs) >= 40  # far longer than one number
