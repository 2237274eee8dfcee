"""General English synonyms from WordNet 3.0: two words share a synset ("start"/"begin",
"buy"/"purchase", "fix"/"repair"), and `sense_rank` says how far down the two words' senses
(WordNet lists them most frequent first) the shared one lies: 0 when it is the first sense of
both. Of verbs it knows more: which words are verbs, the most frequent first
(`frequent_verbs`), and what a sense says in fewer words (`verb_link`: "to cap is to limit",
"to wire is to send", "to schedule is to plan").

The table (`synonyms.txt.gz`, built by `scripts/make_synonyms.py`, WordNet's notice at its
head) is read once, on first use. Inflected forms are taken back to their lemma as WordNet's
own `morphy` does: its irregular forms ("bought" -> "buy"), then its suffix rules, a
candidate kept only when the table knows it.
"""

from __future__ import annotations

import gzip
from array import array
from functools import lru_cache
from importlib import resources
from sys import intern
from typing import TypeAlias

__all__ = [
    "antonyms",
    "antonyms_of",
    "base_form",
    "forms",
    "frequent_verbs",
    "is_verb",
    "known",
    "lemmas",
    "sense_rank",
    "synonyms",
    "verb_link",
]

_TABLE = "synonyms.txt.gz"
_SUFFIXES = (
    ("ies", "y"),
    ("ses", "s"),
    ("xes", "x"),
    ("zes", "z"),
    ("ches", "ch"),
    ("shes", "sh"),
    ("men", "man"),
    ("es", "e"),
    ("es", ""),
    ("s", ""),
    ("ied", "y"),
    ("ed", "e"),
    ("ed", ""),
    ("ing", "e"),
    ("ing", ""),
    ("er", ""),
    ("er", "e"),
    ("est", ""),
    ("est", "e"),
)


# A word's senses: (synset, rank) pairs flat in a 32-bit array (its synsets are lines of the
# table; the rank of that sense for the word). An array per word, not a dict: fifty thousand
# words, most with one sense, kept for the life of the process.
Senses: TypeAlias = "array[int]"


@lru_cache(maxsize=1)
def _table() -> tuple[dict[str, Senses], dict[str, tuple[str, ...]]]:
    groups: dict[str, Senses] = {}
    forms: dict[str, list[str]] = {}
    for number, line in enumerate(_lines()):
        if not line or line.startswith(("#", "! ", "% ", "> ")):
            continue
        if line.startswith("~ "):
            _, form, lemma = line.split()
            forms.setdefault(intern(form), []).append(intern(lemma))
            continue
        for entry in line.split():
            word, _, rank = entry.partition(":")
            groups.setdefault(intern(word), array("i")).extend((number, int(rank or 0)))
    return groups, {f: tuple(lemma) for f, lemma in forms.items()}


def _senses(found: Senses) -> zip[tuple[int, int]]:
    """A word's (synset, rank) pairs."""
    return zip(found[::2], found[1::2], strict=True)


def _lines() -> tuple[str, ...]:
    """The table's lines (read again by each of its few readers, each kept: the lines
    themselves are not)."""
    raw = resources.files("memory_orchestrator.pipeline").joinpath(_TABLE).read_bytes()
    return tuple(gzip.decompress(raw).decode("utf-8").splitlines())


@lru_cache(maxsize=1)
def _antonyms() -> frozenset[tuple[str, str]]:
    pairs = [tuple(line.split()[1:]) for line in _lines() if line.startswith("! ")]
    return frozenset((a, b) for a, b in pairs) | frozenset((b, a) for a, b in pairs)


@lru_cache(maxsize=1)
def _verbs() -> tuple[tuple[str, ...], dict[str, dict[int, dict[str, int]]]]:
    """WordNet's verbs, the most frequent first, and for each, per sense (its rank), the
    words that sense says in fewer words, each with the rank of that sense among its own."""
    ordered: list[str] = []
    said: dict[str, dict[int, dict[str, int]]] = {}
    for line in _lines():
        if line.startswith("% "):
            ordered.extend(map(intern, line.split()[1:]))
        elif line.startswith("> "):
            head, *words = line.split()[1:]
            verb, _, rank = head.partition(":")
            said.setdefault(intern(verb), {})[int(rank or 0)] = _ranked(words)
    return tuple(ordered), said


def _ranked(entries: list[str]) -> dict[str, int]:
    out = {}
    for entry in entries:
        word, _, rank = entry.partition(":")
        out[intern(word)] = int(rank or 0)
    return out


@lru_cache(maxsize=1)
def _verb_set() -> frozenset[str]:
    return frozenset(_verbs()[0])


def frequent_verbs(count: int) -> tuple[str, ...]:
    """The `count` most frequent of WordNet's single-word verbs."""
    return tuple(v for v in _verbs()[0] if "_" not in v)[:count]


def verb_lemmas(word: str) -> tuple[str, ...]:
    """The verbs `word` (lower case; a phrase: "relies on") may be a form of."""
    head, _, rest = " ".join(word.casefold().split()).partition(" ")
    tail = "_" + rest.replace(" ", "_") if rest else ""
    verbs = _verb_set()
    return tuple(dict.fromkeys(w + tail for w in _candidates(head) if w + tail in verbs))


def is_verb(word: str) -> bool:
    """Whether WordNet knows `word` (any inflection; a phrase: "looks after") as a verb."""
    return bool(verb_lemmas(word))


def verb_link(a: str, b: str, depth: int = 3) -> int | None:
    """How closely WordNet ties two verbs: the rank of their shared sense (`sense_rank`), or
    of a sense among the first `depth` + 1 of one that says the other in fewer words (its
    hypernym, its verb group, the verb its definition opens with: "capped"/"limited",
    "wired"/"sent"), whichever is lower; None when neither."""
    found = [r] if (r := sense_rank(a, b)) is not None else []
    for x, y in ((a, b), (b, a)):
        targets = verb_lemmas(y)
        for lemma in verb_lemmas(x):
            for rank, words in _verbs()[1].get(lemma, {}).items():
                found.extend(max(rank, words[t]) for t in targets if t in words and rank <= depth)
    return min(found, default=None)


@lru_cache(maxsize=8192)
def lemmas(word: str) -> tuple[str, ...]:
    """The table's lemmas `word` (lower case) may be a form of: itself, an irregular form's
    lemma, a suffix taken off ("begins" -> "begin", "stopped" -> "stop"); of a phrase, its
    first word so ("takes place" -> "take_place")."""
    groups, _ = _table()
    head, _, rest = word.partition(" ")
    tail = "_" + rest.replace(" ", "_") if rest else ""
    return tuple(dict.fromkeys(w + tail for w in _candidates(head) if w + tail in groups))


@lru_cache(maxsize=16384)
def _candidates(word: str) -> tuple[str, ...]:
    _, forms = _table()
    found = [word, *forms.get(word, ())]
    for suffix, ending in _SUFFIXES:
        if word.endswith(suffix) and len(word) > len(suffix) + 1:
            base = word[: -len(suffix)] + ending
            found.append(base)
            if not ending and len(base) > 2 and base[-1] == base[-2]:  # "stopped" -> "stop"
                found.append(base[:-1])
    return tuple(found)


def sense_rank(a: str, b: str) -> int | None:
    """How far down their senses two words or phrases (any case, any inflection) share one:
    the smallest, over shared synsets, of the larger of the two ranks; None when they share
    none (or are the same)."""
    x, y = " ".join(a.casefold().split()), " ".join(b.casefold().split())
    if x == y:
        return None
    groups, _ = _table()
    mine: dict[int, int] = {}
    for lemma in lemmas(x):
        for synset, rank in _senses(groups[lemma]):
            mine[synset] = min(rank, mine.get(synset, rank))
    ranks = [
        max(rank, mine[synset])
        for lemma in lemmas(y)
        for synset, rank in _senses(groups[lemma])
        if synset in mine
    ]
    return min(ranks, default=None)


@lru_cache(maxsize=16384)
def known(word: str) -> bool:
    """Whether the table knows `word` (lower case, any inflection): a word of a synset of two
    or more words, or a verb. A word it does not know ("mkumar", "rsa", "kubectl") may be a
    name or a code; `pipeline.sentences.identifier` reads it so."""
    return bool(lemmas(word)) or is_verb(word)


def antonyms(a: str, b: str) -> bool:
    """Whether WordNet lists two words (any inflection) as antonyms ("accepted"/"refused")."""
    pairs = _antonyms()
    x, y = a.casefold(), b.casefold()
    return any((p, q) in pairs for p in _candidates(x) for q in _candidates(y))


@lru_cache(maxsize=1)
def _antonym_map() -> dict[str, frozenset[str]]:
    found: dict[str, set[str]] = {}
    for a, b in _antonyms():
        found.setdefault(a, set()).add(b)
    return {a: frozenset(b) for a, b in found.items()}


def forms(word: str) -> tuple[str, ...]:
    """What `word` (lower case) may be a form of, as `antonyms` reads it: itself, an
    irregular form's lemma, a suffix taken off (kept whether the table knows it or not)."""
    return _candidates(word)


def antonyms_of(word: str) -> frozenset[str]:
    """The words WordNet lists as antonyms of any form of `word` (lower case): `antonyms(a,
    b)` is whether some form of `b` is among `antonyms_of(a)`."""
    table = _antonym_map()
    return frozenset().union(*(table.get(p, frozenset()) for p in _candidates(word)))


def synonyms(a: str, b: str, depth: int = 1) -> bool:
    """Whether two words share a synset within the first `depth` + 1 senses of each."""
    rank = sense_rank(a, b)
    return rank is not None and rank <= depth


@lru_cache(maxsize=8192)
def base_form(word: str) -> str:
    """The lemma of an irregular verb or noun form ("seen" -> "see", "led" -> "lead"),
    else the word itself."""
    _, forms = _table()
    found = forms.get(word.casefold())
    return found[0] if found else word
