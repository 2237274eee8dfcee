"""Identifiers are facts: a code, a number, a host, a user or a path that differs makes two
memories two facts, never a restatement (`pipeline.sentences`, `pipeline.conflicts`); and
the comparison of two long memories is linear in their length."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import pytest

from memory_orchestrator.pipeline import conflicts, sentences, wording
from memory_orchestrator.pipeline.conflicts import compare, same_fact
from memory_orchestrator.pipeline.paraphrase import Meaning
from memory_orchestrator.pipeline.sentences import analyse, identifier, marked
from memory_orchestrator.pipeline.synonyms import known

LEXICAL = Meaning()


class _Everything:
    """A reading of meaning that takes every swapped phrase for a synonym: what the semantic
    model did with "bob77 ~ bob78" (fault injection: the worst reading there can be)."""

    def __call__(self, sentence: str, was: str, now: str, verb: bool = False) -> bool:
        return True

    def __hash__(self) -> int:
        return 1


EVERYTHING = _Everything()


@pytest.mark.parametrize(
    "text",
    ["db-stage-05", "alice_w", "web.key", "dev.ops@example.com", "s3://logs-eu/raw", "C++"],
)
def test_a_code_is_one_token(text: str) -> None:
    toks = analyse(f"Host {text} is down").tokens
    assert [t.text for t in toks] == ["Host", text, "is", "down"]


def test_what_counts_as_an_identifier() -> None:
    for word in ("bob77", "db-stage-05", "alice_w", "web.key", "a@b", "C#", "mkumar", "rsa"):
        assert identifier(word), word
    for word in ("starts", "begins", "cluster", "production", "the"):
        assert not identifier(word), word
    assert marked("gh-pages")
    assert not marked("mkumar")
    assert known("deploy")
    assert not known("mkumar")


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("User bob77 has admin rights on the wiki.", "User bob78 has admin rights on the wiki."),
        (
            "Pipeline deploy-web-17 is stuck in review.",
            "Pipeline deploy-web-19 is stuck in review.",
        ),
        ("User alice_w can approve invoices.", "User alice_v can approve invoices."),
        ("User mkumar has write access to the repo.", "User mkumaar has write access to the repo."),
        (
            "File ~/.ssh/id_rsa is shared with the agent.",
            "File ~/.ssh/id_dsa is shared with the agent.",
        ),
        ("Key /etc/ssl/web.key expires in March.", "Key /etc/ssl/api.key expires in March."),
        ("Host api-hosts needs a reboot.", "Host api-host needs a reboot."),
        ("Team A uses C++ for the engine.", "Team A uses C# for the engine."),
        ("Host k8s-worker-12 was cordoned.", "Host k8s-worker-21 was cordoned."),
    ],
)
def test_an_identifier_that_differs_is_never_read_as_the_same_meaning(
    first: str, then: str
) -> None:
    """Even a reading that takes every swap for a synonym is never asked about two codes."""
    for meaning in (None, LEXICAL, EVERYTHING):
        change = compare(first, then, meaning)
        assert change.kind == "other", (meaning, change)
        assert not change.same_meaning
    assert not same_fact(first, then)


def test_a_word_swap_is_still_read_by_meaning() -> None:
    old, new = "The design review starts at 10:00.", "The design review begins at 10:00."
    assert compare(old, new, LEXICAL).kind == "same"
    assert compare(old, new, EVERYTHING).same_meaning == ("starts ~ begins",)


@pytest.mark.parametrize(
    ("first", "then"),
    [
        (
            "Table orders_2025 has no index on customer_id.",
            "Table orders_2026 has no index on customer_id.",
        ),
        ("Patient in bed 12 needs a blood test.", "Patient in bed 21 needs a blood test."),
    ],
)
def test_an_identifier_before_the_verb_names_what_the_memory_is_about(
    first: str, then: str
) -> None:
    """Not a correction: "orders" is no verb once the code is one token, and "bed 12"
    names the patient's bed before "needs"."""
    assert compare(first, then).kind == "other"


def test_an_identifier_as_the_value_is_still_corrected() -> None:
    change = compare(
        "The primary database runs on host pg-main-01.",
        "The primary database runs on host pg-main-02.",
        EVERYTHING,
    )
    assert (change.kind, change.detail) == ("update", "pg-main-01 -> pg-main-02")


# ---------------------------------------------------------------- linear in the text length


def _note(seed: int, size: int, words: list[str]) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    small = ["the", "a", "of", "to", "and", "in", "is", "for"]
    while sum(len(w) + 1 for w in out) < size:
        out.append(rng.choice(words) if rng.random() < 0.7 else rng.choice(small))
    return " ".join(out)[:size]


def _vocabulary() -> list[str]:
    from memory_orchestrator.pipeline.synonyms import _table

    words = sorted(w for w in _table()[0] if w.isalpha() and 3 <= len(w) <= 9)
    return random.Random(7).sample(words, 20000)  # more words than a note holds


@contextmanager
def _counting() -> Iterator[Callable[[], int]]:
    """Counts the Python function calls made in the block (the profiler hook): a measure of
    work that does not depend on the machine's speed."""
    calls = 0

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(hook)
    try:
        yield lambda: calls
    finally:
        sys.setprofile(None)


def _work(old: str, new: str) -> int:
    compare.cache_clear()
    analyse.cache_clear()
    wording.opposed.cache_clear()
    with _counting() as calls:
        compare(old, new)
    return calls()


@pytest.mark.parametrize(
    "kind", ["random", "capitalised", "no-function-words", "codes", "swapped-names"]
)
def test_comparing_two_long_memories_is_linear_in_their_length(kind: str) -> None:
    """Twice the text, about twice the work (quadratic would be four times): the whole of
    both texts is read, none cut."""
    words = _vocabulary()

    def texts(size: int, seed: int) -> tuple[str, str]:
        if kind == "random":
            return _note(seed, size, words), _note(seed + 1, size, words)
        if kind == "capitalised":
            a, b = (_note(s, size, [w.title() for w in words]) for s in (seed, seed + 1))
            return a, b
        if kind == "no-function-words":
            rng = random.Random(seed)
            a, b = (" ".join(rng.choice(words) for _ in range(size // 7)) for _ in "ab")
            return a, b
        if kind == "codes":
            a = " ".join(f"host-{i:05d}" for i in range(size // 11))
            return a, " ".join(f"host-{i + 1:05d}" for i in range(size // 11))
        a = " ".join(f"Name{i} meets Other{i}" for i in range(size // 22))
        return a, " ".join(f"Other{i} meets Name{i}" for i in range(size // 22))

    _work(*texts(8000, 1))  # the word tables loaded, the words' forms known
    _work(*texts(16000, 2))
    small, large = _work(*texts(8000, 1)), _work(*texts(16000, 2))
    assert large < 2.6 * small, (small, large)


def test_the_opposites_of_two_long_memories_are_looked_up_not_compared_pairwise() -> None:
    """`wording.opposed` is asked only of the pairs that may be opposites (it was asked of
    every pair of words: hundreds of thousands for two long notes)."""
    words = _vocabulary()
    old, new = _note(1, 7900, words), _note(2, 7900, words)
    _work(old, new)
    asked = wording.opposed.cache_info()
    tokens = len(analyse(old).tokens) + len(analyse(new).tokens)
    assert asked.hits + asked.misses < tokens


def test_a_difference_at_the_last_character_of_a_long_memory_counts() -> None:
    words = _vocabulary()
    body = _note(5, 7890, words)
    old = f"{body} Host db-stage-05"
    new = f"{body} Host db-stage-06"
    assert new.index("06") >= 7900
    assert len(new) <= 8000
    change = compare(old, new, EVERYTHING)
    assert change.kind != "same"
    assert "db-stage-05 -> db-stage-06" in change.detail


def test_the_pairs_found_by_lookup_are_the_pairs_opposed_finds() -> None:
    """`opposite_pairs` returns what comparing every pair with `opposed` returns, in order."""
    rng = random.Random(3)
    base = ["enable", "lock", "upload", "login", "accept", "start", "public", "active", "full"]
    made = [
        *base,
        "disable",
        "unlock",
        "download",
        "logout",
        "reject",
        "stop",
        "private",
        "inactive",
        "empty",
        "non-active",
        "dis-able",
        "preorder",
        "postorder",
        "careful",
        "careless",
        "able",
        "unable",
        "shallow",  # opposites by WordNet alone (not in the table of opposites)
        "deep",
        "rich",
        "poor",
        *_vocabulary()[:200],
    ]
    for _ in range(30):
        xs = [rng.choice(made) for _ in range(rng.randint(0, 40))]
        ys = [rng.choice(made) for _ in range(rng.randint(0, 40))]
        brute = [
            (i, j) for i, x in enumerate(xs) for j, y in enumerate(ys) if wording.opposed(x, y)
        ]
        assert wording.opposite_pairs(xs, ys) == brute
    assert wording.opposite_pairs(["enable", "lock"], ["unlock", "disable"]) == [(0, 1), (1, 0)]
    # each way an opposite is found: WordNet, a prefix, a suffix, a negating prefix
    assert wording.opposite_pairs(["shallow", "rich"], ["poor", "deep"]) == [(0, 1), (1, 0)]
    assert wording.opposite_pairs(["preorder", "careful"], ["careless", "postorder"]) == [
        (0, 1),
        (1, 0),
    ]
    assert wording.opposite_pairs(["zorble", "checkin"], ["checkout", "unzorble"]) == [
        (0, 1),
        (1, 0),
    ]


def test_the_reading_of_names_changing_places_still_holds() -> None:
    assert conflicts.compare("Kim reports to Lee", "Lee reports to Kim").why == "roles"
    assert sentences.analyse("the frontend repository uses npm").verb == 3
