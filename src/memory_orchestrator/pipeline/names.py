"""Names as people write them: a name in a question that the store does not know, read as
the known name it misspells or transliterates ("Muhhamed", "Mohammed" -> "Muhammad";
"Karoline" -> "Caroline"), so that the store is searched for the name it holds.

Two spellings are taken for one name when their consonant skeletons agree (the letters that
carry a name's sound: c/k/q, ph/f, z/s and doubled letters folded; vowels and h, w, y after
the first letter dropped) and their Jaro-Winkler similarity (`rapidfuzz`) is at least
`_SIMILAR`. A name the store knows as it is written is never changed; a question word that
matches no known name exactly is read as the closest one only when it is clearly the
closest (by `_MARGIN`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

from rapidfuzz.distance import JaroWinkler

from memory_orchestrator.models import EventKind, Stage, TraceEvent, event

__all__ = ["read_names", "skeleton"]

_SIMILAR = 0.82  # "Tom" and "Tim" (0.80) stay two people
_MARGIN = 0.03  # the closest name must beat the next by this much
_MIN_LETTERS = 3
_NAME = re.compile(r"\b[A-Z][a-z]+(?:'s)?\b")
_FOLD = (("ph", "f"), ("ck", "k"), ("c", "k"), ("q", "k"), ("z", "s"), ("x", "ks"))
_SILENT = frozenset("aeiouhwy")


@lru_cache(maxsize=4096)
def skeleton(name: str) -> str:
    """The consonants that carry a name's sound: "Muhammad" and "Mohammed" are both "mhmd"."""
    word = name.lower()
    for old, new in _FOLD:
        word = word.replace(old, new)
    if not word:
        return ""
    kept = [word[0]] + [c for c in word[1:] if c not in _SILENT and c.isalpha()]
    out = [kept[0]]
    for c in kept[1:]:
        if c != out[-1]:
            out.append(c)
    return "".join(out)


def _closest(word: str, names: Sequence[str]) -> str | None:
    """The one of `names` (those that sound like `word`: the same skeleton) it spells."""
    fits = sorted(
        ((JaroWinkler.similarity(word.lower(), n.lower()), n) for n in names), reverse=True
    )
    fits = [(s, n) for s, n in fits if s >= _SIMILAR]
    if not fits or (len(fits) > 1 and fits[0][0] - fits[1][0] < _MARGIN):
        return None
    return fits[0][1]


@lru_cache(maxsize=8)
def _known_forms(known: tuple[str, ...]) -> tuple[frozenset[str], Mapping[str, tuple[str, ...]]]:
    """The known names case-folded, and the one-word ones by skeleton: worked out once per
    list of names (the store's names change much less often than the questions)."""
    singles = dict.fromkeys(n for n in known if n.isalpha() and len(n) >= _MIN_LETTERS)
    by_sound: dict[str, tuple[str, ...]] = {}
    for name in singles:
        key = skeleton(name)
        by_sound[key] = (*by_sound.get(key, ()), name)
    return frozenset(n.lower() for n in known), by_sound


def read_names(
    text: str, known: Sequence[str], skip: frozenset[str] = frozenset()
) -> tuple[str, list[TraceEvent]]:
    """`text` with each capitalised word that names no known entity but spells one of the
    store's one-word names another way replaced by that name; and an event per replacement."""
    exact, by_sound = _known_forms(tuple(known))
    if not by_sound:
        return text, []
    notes: list[TraceEvent] = []

    def swap(match: re.Match[str]) -> str:
        word = match.group()
        base = word[:-2] if word.endswith("'s") else word
        if base.lower() in exact or base.lower() in skip or len(base) < _MIN_LETTERS:
            return word
        name = _closest(base, by_sound.get(skeleton(base), ()))
        if name is None:
            return word
        notes.append(event(Stage.NAMES, EventKind.NAME_READ_AS, written=base, name=name))
        return name + word[len(base) :]

    return _NAME.sub(swap, text), notes
