"""Text analysis shared by the planner, the re-ranker, the deduper and the embedded store.

One analyzer everywhere means a query term and an indexed term are always stemmed the same
way (the trap that makes some stores miss "family" or "July").
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from functools import lru_cache

import Stemmer

_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'"})
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*", re.UNICODE)
_LAST_GAP = re.compile(r"\s\S*\Z")
_stemmer = Stemmer.Stemmer("english")

# Function words and question words. Content words ("work", "family", "time") stay.
STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do
    does doesn't doing don't down during each few for from further had hadn't has hasn't
    have haven't having he he'd he'll he's her here here's hers herself him himself his how
    how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most
    mustn't my myself no nor not of off on once only or other ought our ours ourselves out
    over own same shan't she she'd she'll she's should shouldn't so some such than that
    that's the their theirs them themselves then there there's these they they'd they'll
    they're they've this those through to too under until up very was wasn't we we'd we'll
    we're we've were weren't what what's when when's where where's which while who who's
    whom why why's will with won't would wouldn't you you'd you'll you're you've your yours
    yourself yourselves also just did does do done ever still yet s t
    """.split()
)

QUESTION_WORDS: frozenset[str] = frozenset(
    {"what", "when", "where", "who", "whom", "whose", "why", "how", "which"}
)


def normalize(text: str) -> str:
    """NFKC, unify quotes, collapse whitespace."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    return " ".join(text.split())


def cut_at_word(text: str, max_chars: int) -> str:
    """`text` when it fits in `max_chars`, else its longest prefix that fits and ends at a word
    boundary (trailing space removed); a first word longer than the limit is cut inside."""
    if len(text) <= max_chars:
        return text
    head = text[:max_chars]
    if not text[max_chars].isspace():
        match = _LAST_GAP.search(head)
        if match is not None:
            head = head[: match.start()]
    return head.rstrip() or text[:max_chars]


def content_hash(text: str) -> str:
    """The hash a memory's content is recognised by (unicode and whitespace normalized):
    duplicate checks in the stores and the check before a write is retried."""
    return hashlib.sha256(normalize(text).encode()).hexdigest()


def words(text: str) -> list[str]:
    """Lower-cased word tokens, apostrophes kept inside words."""
    found: list[str] = _WORD.findall(text.lower())
    return [w.translate(_QUOTES) for w in found] if "\u2019" in text else found


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    # Possessives first: "Caroline's" -> "caroline".
    if word.endswith("'s"):
        word = word[:-2]
    return str(_stemmer.stemWord(word.replace("'", "")))


def content_words(text: str) -> list[str]:
    """Word tokens without stop words (order kept, duplicates kept)."""
    return [w for w in words(text) if w not in STOP_WORDS]


def terms(text: str) -> list[str]:
    """Stemmed content terms: the unit of lexical matching everywhere in the project."""
    return [s for s in (stem(w) for w in content_words(text)) if s]


@lru_cache(maxsize=32_768)
def term_set(text: str) -> frozenset[str]:
    """The set of stemmed content terms; cached, since the same memories recur across queries."""
    return frozenset(terms(text))


@lru_cache(maxsize=32_768)
def content_word_count(text: str) -> int:
    return len(content_words(text))


def all_stems(text: str) -> list[str]:
    """Every word stemmed, stop words included (for indexing, where recall matters)."""
    return [s for s in (stem(w) for w in words(text)) if s]


def duration(seconds: float) -> str:
    """A span of time for people: "45 s", "12 min", "2.5 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
