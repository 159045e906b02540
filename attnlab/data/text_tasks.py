"""Generated text tasks for summarization and question answering: no download, deterministic by seed.

**Summarization** (:func:`make_summarization_task`, the "facts" task). A document is a handful of
news-like sentences: 1 to ``max_facts`` *fact* sentences, each stating one event about a rare
name or number, shuffled among 1 to ``max_fillers`` *filler* sentences that say nothing. The
summary keeps the facts, in document order, each compressed by a fixed rule (the padding words
of its template dropped), and leaves the fillers out::

    document: the weather in ostvik was mild and many visitors came . after a long debate ,
              dorvan kelimo was elected treasurer of the rowing club with 4821 votes . a
              spokesperson declined to comment further .
    summary:  dorvan kelimo elected treasurer of rowing club with 4821 votes .

Names are made of random syllables and numbers are random, so almost every one of them is
unseen in training (or too rare to enter a word vocabulary): a summarizer must *copy* them from
the document, which is what a pointer-generator (See et al. 2017) learns and a plain
vocabulary decoder cannot. Everything is lower-case with punctuation as separate words, so the
text splits on spaces. Each example also lists its ``rare`` words (the names and numbers of the
summary) so tests can measure copying directly.

**Question answering** (:func:`make_qa_task`). SQuAD v1.1-format JSON (``data → paragraphs →
context, qas → question, answers[text, answer_start]``): each paragraph states templated facts
about two or three invented people (born in a city in a year, founded a company, studied a
subject, moved somewhere to work), and each question asks for one slot of one fact, e.g.
"Arlen Voss was born in Kyoto in 1923." → "Where was Arlen Voss born?" → ``Kyoto``. The other
people's facts in the same paragraph are distractors, so the answer must be found by matching the
question to the right sentence.

Shape:
    ``make_summarization_task(n)``: N :class:`SummaryExample`; ``make_qa_task(n)``: a SQuAD dict
    with N paragraphs.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "SummaryExample",
    "make_qa_task",
    "make_summarization_task",
    "write_json",
    "write_jsonl",
]

# Syllables of invented names: consonant onset + vowel (+ optional coda).
_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
           "br", "dr", "kr", "st", "th", "sh", "gr", "tr")  # fmt: skip
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ei", "ou")
_CODAS = ("", "", "", "n", "r", "l", "s", "k", "m")


def _syllable(rng: random.Random) -> str:
    return rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)


def _word(rng: random.Random, lo: int = 2, hi: int = 3) -> str:
    return "".join(_syllable(rng) for _ in range(rng.randint(lo, hi)))


def _person(rng: random.Random) -> str:
    return f"{_word(rng)} {_word(rng)}"


# --------------------------------------------------------------------------------------------
# Summarization: the "facts" task.
# --------------------------------------------------------------------------------------------

_PLACES = ("ostvik", "marlow", "bredon", "kessel", "harlan", "tolby", "eastmere", "rivenford",
           "dunmore", "westcliff", "lowther", "ashby")  # fmt: skip
_ROLES = ("chair", "treasurer", "secretary", "president", "captain", "director")
_ORGS = ("rowing club", "city council", "farmers union", "chess society", "harbour board", "science academy")
_THINGS = ("budget", "debt", "population", "rainfall", "income", "turnover")
_UNITS = ("million", "thousand", "percent")
_TEAMS = ("rovers", "united", "wanderers", "athletic", "rangers", "city")
_JOBS = ("teacher", "baker", "nurse", "farmer", "pilot", "painter")
_PRIZES = ("poetry prize", "marathon", "chess open", "science medal", "art award")
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

_FILLERS = (
    "the weather in {place} was mild and many visitors came .",
    "a spokesperson declined to comment further .",
    "the event was broadcast live on local radio .",
    "more details are expected to be released on {day} .",
    "residents said they were not surprised by the news .",
    "the meeting ended shortly after noon .",
    "critics have questioned the decision in recent weeks .",
    "it was the first such event since the spring .",
    "local newspapers covered the story in detail .",
    "traffic in {place} was heavy for most of the day .",
)


def _number(rng: random.Random) -> str:
    return str(rng.randint(100, 99999))


def _fact(rng: random.Random) -> tuple[str, str, list[str]]:
    """One fact: (document sentence, its compressed summary sentence, the rare words in it)."""
    kind = rng.randrange(6)
    place, day = rng.choice(_PLACES), rng.choice(_DAYS)
    if kind == 0:
        name, role, org, votes = _person(rng), rng.choice(_ROLES), rng.choice(_ORGS), _number(rng)
        return (
            f"after a long debate , {name} was elected {role} of the {org} with {votes} votes .",
            f"{name} elected {role} of {org} with {votes} votes .",
            [*name.split(), votes],
        )
    if kind == 1:
        thing, unit, n = rng.choice(_THINGS), rng.choice(_UNITS), _number(rng)
        return (
            f"officials in {place} said the {thing} rose to {n} {unit} last year .",
            f"{place} {thing} rose to {n} {unit} .",
            [n],
        )
    if kind == 2:
        name, role, org = _person(rng), rng.choice(_ROLES), rng.choice(_ORGS)
        return (
            f"the {org} announced on {day} that it had hired {name} as its new {role} .",
            f"{org} hired {name} as {role} .",
            name.split(),
        )
    if kind == 3:
        name, age = _person(rng), str(rng.randint(18, 90))
        return (
            f"police said that {name} , aged {age} , was arrested in {place} on {day} .",
            f"{name} , {age} , arrested in {place} .",
            [*name.split(), age],
        )
    if kind == 4:
        home, away = rng.sample(_TEAMS, 2)
        fans = _number(rng)
        return (
            f"in front of {fans} fans , the {home} beat the {away} in {place} on {day} .",
            f"{home} beat {away} before {fans} fans .",
            [fans],
        )
    name, job, prize = _person(rng), rng.choice(_JOBS), rng.choice(_PRIZES)
    return (
        f"{name} , a {job} from {place} , won the {prize} for the second time .",
        f"{name} won {prize} .",
        name.split(),
    )


class SummaryExample(NamedTuple):
    """One generated document with its reference summary.

    Shape:
        strings; ``rare`` lists the names and numbers the summary must copy from the document.
    """

    document: str  # lower-case words and punctuation separated by single spaces
    summary: str  # the fact sentences of the document, compressed, in document order
    rare: list[str]  # words of the summary that are invented names or random numbers


def make_summarization_task(n: int, *, seed: int = 0, max_facts: int = 3, max_fillers: int = 3) -> list[SummaryExample]:
    """``n`` generated (document, summary) examples of the "facts" task (see the module docstring).

    The same arguments always give the same list, and the first ``k`` examples of
    ``make_summarization_task(n, seed=s)`` are ``make_summarization_task(k, seed=s)``.

    Args:
        n: number of examples.
        seed: random seed; different seeds give (almost surely) disjoint names and numbers.
        max_facts: each document has 1 to ``max_facts`` fact sentences.
        max_fillers: ... and 1 to ``max_fillers`` filler sentences.

    Shape:
        output: N :class:`SummaryExample`.
    """
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    if max_facts < 1 or max_fillers < 1:
        raise ValueError(f"max_facts and max_fillers must be ≥ 1, got {max_facts} and {max_fillers}")
    rng = random.Random(f"attnlab/summarize-facts/{seed}")
    out = []
    for _ in range(n):
        facts = [_fact(rng) for _ in range(rng.randint(1, max_facts))]
        fillers = [
            rng.choice(_FILLERS).format(place=rng.choice(_PLACES), day=rng.choice(_DAYS))
            for _ in range(rng.randint(1, max_fillers))
        ]
        # Shuffle fact and filler slots together; the facts keep their relative order.
        slots = [True] * len(facts) + [False] * len(fillers)
        rng.shuffle(slots)
        fact_iter, filler_iter = iter(facts), iter(fillers)
        sentences = [next(fact_iter)[0] if is_fact else next(filler_iter) for is_fact in slots]
        out.append(
            SummaryExample(
                document=" ".join(sentences),
                summary=" ".join(f[1] for f in facts),
                rare=[w for f in facts for w in f[2]],
            )
        )
    return out


# --------------------------------------------------------------------------------------------
# Question answering: templated facts in SQuAD v1.1 format.
# --------------------------------------------------------------------------------------------

_CITIES = ("Kyoto", "Lisbon", "Oslo", "Nairobi", "Lima", "Hanoi", "Dublin", "Quebec", "Porto", "Krakow",
           "Osaka", "Seville", "Tbilisi", "Accra", "Perth", "Bergen")  # fmt: skip
_FIELDS = ("chemistry", "law", "music", "medicine", "geology", "economics", "history", "architecture")
_QA_JOBS = ("engineer", "journalist", "surgeon", "translator", "librarian", "photographer", "chef")
_COMPANY_SUFFIX = ("Labs", "Works", "Systems", "Foods", "Press", "Motors")


def _title(words: str) -> str:
    return " ".join(w.capitalize() for w in words.split())


_QA_KINDS = 4  # born in, founded, studied, moved to


def _qa_fact(rng: random.Random, person: str, kind: int) -> tuple[str, list[tuple[str, str]]]:
    """Fact ``kind`` about ``person`` as a sentence, with its (question, answer) pairs; the answers occur in it."""
    city, year = rng.choice(_CITIES), str(rng.randint(1850, 2005))
    if kind == 0:
        return f"{person} was born in {city} in {year}.", [
            (f"Where was {person} born?", city),
            (f"In what year was {person} born?", year),
        ]
    if kind == 1:
        company = f"{_title(_word(rng))} {rng.choice(_COMPANY_SUFFIX)}"
        return f"{person} founded {company} in {year}.", [
            (f"Who founded {company}?", person),
            (f"What company did {person} found?", company),
            (f"When was {company} founded?", year),
        ]
    if kind == 2:
        field = rng.choice(_FIELDS)
        return f"{person} studied {field} at the University of {city}.", [
            (f"What did {person} study?", field),
            (f"Where did {person} study {field}?", f"University of {city}"),
        ]
    job = rng.choice(_QA_JOBS)
    return f"In {year}, {person} moved to {city} to work as a {job}.", [
        (f"Where did {person} move in {year}?", city),
        (f"What did {person} work as in {city}?", job),
    ]


def make_qa_task(n: int, *, seed: int = 0, questions_per_paragraph: int = 2) -> dict:
    """A SQuAD v1.1-format dataset of ``n`` generated paragraphs (see the module docstring).

    Each paragraph has 2–3 people and 3 fact sentences; ``questions_per_paragraph`` of its
    questions are kept (chosen at random, about different facts where possible). Every answer's
    ``answer_start`` is its character offset in the context (the first occurrence after the start
    of its sentence). Deterministic in ``(n, seed, questions_per_paragraph)``.

    Args:
        n: number of paragraphs (one article each).
        seed: random seed.
        questions_per_paragraph: questions asked about each paragraph (1–3).

    Shape:
        output: ``{"version": "1.1", "data": [n articles]}``, n·questions_per_paragraph questions.
    """
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    if not 1 <= questions_per_paragraph <= 3:
        raise ValueError(f"questions_per_paragraph must be 1, 2 or 3, got {questions_per_paragraph}")
    rng = random.Random(f"attnlab/qa-facts/{seed}")
    data = []
    for p in range(n):
        people = [_title(_person(rng)) for _ in range(rng.randint(2, 3))]
        # Distinct (person, kind) pairs, so that no question has two answers in the paragraph.
        facts = [
            _qa_fact(rng, people[i // _QA_KINDS], i % _QA_KINDS) for i in rng.sample(range(len(people) * _QA_KINDS), 3)
        ]
        context, qas = "", []
        candidates = []
        for sentence, questions in facts:
            start = len(context) + (1 if context else 0)
            context = f"{context} {sentence}" if context else sentence
            question, answer = rng.choice(questions)
            candidates.append((question, answer, context.index(answer, start)))
        for k, (question, answer, offset) in enumerate(rng.sample(candidates, questions_per_paragraph)):
            qas.append(
                {
                    "id": f"gen-{seed}-{p}-{k}",
                    "question": question,
                    "answers": [{"text": answer, "answer_start": offset}],
                }
            )
        data.append({"title": f"generated-{seed}-{p}", "paragraphs": [{"context": context, "qas": qas}]})
    return {"version": "1.1", "data": data}


# --------------------------------------------------------------------------------------------
# Writing.
# --------------------------------------------------------------------------------------------


def write_jsonl(records: Iterable[dict | SummaryExample], path: str | os.PathLike) -> Path:
    """Write ``{"document", "summary"}`` records (or :class:`SummaryExample`) as JSON lines.

    Shape:
        N records → N lines.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for r in records:
            row = {"document": r.document, "summary": r.summary} if isinstance(r, SummaryExample) else r
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def write_json(obj: dict, path: str | os.PathLike) -> Path:
    """Write one JSON document (e.g. a SQuAD dataset from :func:`make_qa_task`).

    Shape:
        one object → one file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path
