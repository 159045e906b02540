"""Generated translation tasks: the embedded default data (no download), deterministic by seed.

Two small "languages" whose translation needs real attention — the output is built from
pieces scattered across the input, in a different order:

- **numbers**: English number words ↔ Japanese numerals, e.g.
  ``"three hundred forty-two thousand"`` ↔ ``"三十四万二千"``. English groups digits by
  thousands, Japanese by ten-thousands (万, 億, 兆), so the alignment is not monotone
  word-by-word. English comes from ``num2words`` (American style: no "and", no commas);
  Japanese numerals are written here (:func:`japanese_numeral`) and checked against
  ``num2words(n, lang="ja")`` in the tests. Magnitudes are sampled so the English side
  has 1 to ``MAX_EN_WORDS`` words.
- **dates**: one calendar date written in many languages and formats (``babel``:
  ``"5. März 2024"``, ``"Tue, Mar 5, 2024"``, ``"2024年3月5日(火)"``, ``"05/03/2024"`` …)
  → its ISO form ``"2024-03-05"``. Every format in :data:`DATE_FORMATS` shows a four-digit
  year and puts day before month whenever both are numbers (no US ``3/5/24``), so each
  source string names exactly one date; the tests check this.

Task names (:data:`TASKS`): ``"numbers-en-ja"``, ``"numbers-ja-en"``, ``"dates"``, and
``"mixed"`` (half English→Japanese numbers, half dates, interleaved at random).

Shape:
    ``make_task(name, n)``: N ``(source, target)`` string pairs with distinct sources.
"""

from __future__ import annotations

import datetime
import random
from functools import cache
from typing import NamedTuple

from babel import Locale
from babel.dates import format_date

__all__ = [
    "TASKS",
    "DATE_FORMATS",
    "MAX_EN_WORDS",
    "english_number",
    "japanese_numeral",
    "render_date",
    "make_task",
    "make_splits",
    "TaskSplits",
]

TASKS = ("numbers-en-ja", "numbers-ja-en", "number-lists-en-ja", "dates", "mixed")

MAX_EN_WORDS = 12  # longest English side of the numbers task, in words ("forty-two" is one)
MAX_DIGITS = 10  # numbers are sampled below 10**MAX_DIGITS (up to 九十九億…)

# (locale, babel format): a standard width ("short", "medium", "long", "full") or a CLDR pattern.
# "short" appears only where it has a four-digit year: en/de/es/it short formats use
# two-digit years, and en's "3/5/24" is month-first, which would make "05/03/2024" ambiguous.
DATE_FORMATS: tuple[tuple[str, str], ...] = (
    ("en", "medium"), ("en", "long"), ("en", "full"), ("en", "EEE, MMM d, y"), ("en", "d MMMM y"),
    ("en_GB", "short"), ("en_GB", "medium"), ("en_GB", "full"), ("en_GB", "EEE d MMM y"),
    ("de", "medium"), ("de", "long"), ("de", "full"), ("de", "EEE, d. MMMM y"),
    ("fr", "short"), ("fr", "long"), ("fr", "full"), ("fr", "EEE d MMM y"),
    ("es", "medium"), ("es", "long"), ("es", "full"), ("es", "d/M/y"),
    ("it", "medium"), ("it", "long"), ("it", "full"), ("it", "dd/MM/y"),
    ("ja", "medium"), ("ja", "long"), ("ja", "full"), ("ja", "y年M月d日(E)"), ("ja", "y/M/d"),
    ("nl", "short"), ("nl", "long"), ("nl", "full"),
    ("pt", "long"), ("pt", "full"),
)  # fmt: skip
FIRST_DATE = datetime.date(1900, 1, 1)  # sampled dates lie in [FIRST_DATE, LAST_DATE]
LAST_DATE = datetime.date(2099, 12, 31)

_JA_DIGITS = "零一二三四五六七八九"
# Japanese groups digits in fours: 万 = 10^4, 億 = 10^8, 兆 = 10^12, 京 = 10^16.
_JA_MYRIADS = ((10**16, "京"), (10**12, "兆"), (10**8, "億"), (10**4, "万"), (1, ""))
_EN_SCALES = tuple((10**k, k) for k in (12, 9, 6, 3, 0))


def japanese_numeral(n: int) -> str:
    """Write ``0 <= n < 10**20`` in Japanese kanji numerals: 342000 → 三十四万二千.

    Within a four-digit group 千, 百 and 十 take no 一 (1100 → 千百), but a group that
    multiplies 万/億/兆 does (10000 → 一万, 10**8 → 一億); zero groups are silent.

    Shape:
        int → str.
    """
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n < 10**20:
        raise ValueError(f"japanese_numeral needs an integer in [0, 10**20), got {n!r}")
    if n == 0:
        return _JA_DIGITS[0]
    parts = []
    for value, unit in _JA_MYRIADS:
        group = n // value % 10_000
        if group:
            parts.append(_ja_below_10000(group) + unit)
    return "".join(parts)


def _ja_below_10000(n: int) -> str:
    out = []
    for value, unit in ((1000, "千"), (100, "百"), (10, "十")):
        digit = n // value % 10
        if digit:
            out.append(("" if digit == 1 else _JA_DIGITS[digit]) + unit)
    if n % 10:
        out.append(_JA_DIGITS[n % 10])
    return "".join(out)


def _american(words: str) -> str:
    """num2words writes British English ("three hundred and forty-two, ..."); drop the "and"s and commas."""
    return " ".join(w for w in words.replace(",", "").split() if w != "and")


def _num2words(n: int) -> str:
    # Imported on first use: num2words loads every language it knows, which would slow down every
    # `import attnlab.data` (and so `attnlab --help`) for the generated tasks only.
    from num2words import num2words

    return num2words(n)


@cache
def _en_group(n: int) -> str:
    return _american(_num2words(n))


@cache
def _en_scale(k: int) -> str:
    return "" if k == 0 else _american(_num2words(10**k)).split(" ", 1)[1]  # "one thousand" → "thousand"


def english_number(n: int) -> str:
    """American English words for ``0 <= n < 10**15``: 342000 → "three hundred forty-two thousand".

    Equal to ``num2words(n)`` without "and" and commas; built from cached three-digit groups
    because calling ``num2words`` on every number dominates the time to generate a task.

    Shape:
        int → str.
    """
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n < 10**15:
        raise ValueError(f"english_number needs an integer in [0, 10**15), got {n!r}")
    if n == 0:
        return _en_group(0)
    parts = []
    for value, k in _EN_SCALES:
        group = n // value % 1000
        if group:
            parts.append(_en_group(group) + ("" if k == 0 else " " + _en_scale(k)))
    return " ".join(parts)


@cache
def _locale(name: str) -> Locale:
    return Locale.parse(name)


def render_date(date: datetime.date, locale: str, fmt: str) -> str:
    """Write ``date`` in ``locale`` with a babel width ("short"…"full") or CLDR pattern.

    Shape:
        date → str.
    """
    return format_date(date, fmt, locale=_locale(locale))


def _sample_number(rng: random.Random) -> int:
    """A number whose digit count is uniform in 1..MAX_DIGITS and whose other digits are zero
    with a random rate, so both round numbers ("twenty million") and long ones occur."""
    n_digits = rng.randint(1, MAX_DIGITS)
    keep = rng.choice((0.0, 0.25, 0.5, 0.75, 1.0))
    n = rng.randint(1, 9)
    for _ in range(n_digits - 1):
        n = n * 10 + (rng.randint(1, 9) if rng.random() < keep else 0)
    return n


def _number_pair(rng: random.Random) -> tuple[str, str]:
    while True:
        n = 0 if rng.random() < 0.002 else _sample_number(rng)
        en = english_number(n)
        if en.count(" ") < MAX_EN_WORDS:
            return en, japanese_numeral(n)


MAX_LIST = 5  # numbers in one "number-lists-en-ja" pair


def _number_list_pair(rng: random.Random) -> tuple[str, str]:
    """1 to MAX_LIST numbers in a row: sources from 1 to ~60 words, long enough that one
    fixed-length vector must hold a lot (the Seq2Seq bottleneck, Bahdanau et al. 2015, Fig. 2)."""
    pairs = [_number_pair(rng) for _ in range(rng.randint(1, MAX_LIST))]
    return " and ".join(en for en, _ in pairs), "、".join(ja for _, ja in pairs)


_DATE_SPAN = (LAST_DATE - FIRST_DATE).days


def _date_pair(rng: random.Random) -> tuple[str, str]:
    date = FIRST_DATE + datetime.timedelta(days=rng.randint(0, _DATE_SPAN))
    locale, fmt = DATE_FORMATS[rng.randrange(len(DATE_FORMATS))]
    return render_date(date, locale, fmt), date.isoformat()


def _generator(name: str):
    if name == "numbers-en-ja":
        return _number_pair
    if name == "numbers-ja-en":
        return lambda rng: _number_pair(rng)[::-1]
    if name == "number-lists-en-ja":
        return _number_list_pair
    if name == "dates":
        return _date_pair
    if name == "mixed":
        return lambda rng: _number_pair(rng) if rng.random() < 0.5 else _date_pair(rng)
    raise ValueError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")


def make_task(name: str, n: int, *, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` generated ``(source, target)`` pairs of task ``name``, all with different sources.

    The same ``(name, n, seed)`` always gives the same list, and the first ``k`` pairs of
    ``make_task(name, n, seed=s)`` are ``make_task(name, k, seed=s)``.

    Raises:
        ValueError: unknown task name, negative ``n``.

    Shape:
        output: N ``(source, target)`` string pairs.
    """
    generate = _generator(name)
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    rng = random.Random(f"attnlab/{name}/{seed}")
    seen: set[str] = set()
    pairs: list[tuple[str, str]] = []
    attempts = 0
    while len(pairs) < n:
        attempts += 1
        if attempts > 20 * n + 1000:
            raise ValueError(f"task {name!r} cannot produce {n} distinct pairs")
        src, tgt = generate(rng)
        if src not in seen:
            seen.add(src)
            pairs.append((src, tgt))
    return pairs


class TaskSplits(NamedTuple):
    """Train/valid/test pairs that share no source sentence.

    Shape:
        each field: a list of ``(source, target)`` string pairs.
    """

    train: list[tuple[str, str]]
    valid: list[tuple[str, str]]
    test: list[tuple[str, str]]


def make_splits(name: str, n_train: int, n_valid: int, n_test: int, seed: int = 0) -> TaskSplits:
    """Disjoint train/valid/test splits of a generated task (no source appears in two splits).

    Shape:
        output: ``TaskSplits`` with n_train, n_valid, n_test pairs.
    """
    for label, count in (("n_train", n_train), ("n_valid", n_valid), ("n_test", n_test)):
        if count < 0:
            raise ValueError(f"{label} must be non-negative, got {count}")
    pairs = make_task(name, n_train + n_valid + n_test, seed=seed)
    return TaskSplits(
        train=pairs[:n_train],
        valid=pairs[n_train : n_train + n_valid],
        test=pairs[n_train + n_valid :],
    )
