"""General English synonyms: two words are one meaning when WordNet 3.0 lists a synset among
the two most frequent senses of each ("start"/"begin", "buy"/"purchase", "fix"/"repair").

The table (`synonyms.txt.gz`, built by `scripts/make_synonyms.py`, WordNet's notice at its
head) is read once, on first use. Inflected forms are taken back to their lemma as WordNet's
own `morphy` does: its irregular forms ("bought" -> "buy"), then its suffix rules, a
candidate kept only when the table knows it.
"""

from __future__ import annotations

import gzip
from functools import lru_cache
from importlib import resources

__all__ = ["lemmas", "synonyms"]

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


@lru_cache(maxsize=1)
def _table() -> tuple[dict[str, frozenset[int]], dict[str, tuple[str, ...]]]:
    raw = resources.files("memory_orchestrator.pipeline").joinpath(_TABLE).read_bytes()
    groups: dict[str, set[int]] = {}
    forms: dict[str, list[str]] = {}
    for number, line in enumerate(gzip.decompress(raw).decode("utf-8").splitlines()):
        if not line or line.startswith("#"):
            continue
        if line.startswith("~ "):
            _, form, lemma = line.split()
            forms.setdefault(form, []).append(lemma)
            continue
        for word in line.split():
            groups.setdefault(word, set()).add(number)
    return (
        {w: frozenset(g) for w, g in groups.items()},
        {f: tuple(lemma) for f, lemma in forms.items()},
    )


@lru_cache(maxsize=8192)
def lemmas(word: str) -> tuple[str, ...]:
    """The table's lemmas `word` (lower case) may be a form of: itself, an irregular form's
    lemma, a suffix taken off ("begins" -> "begin", "stopped" -> "stop")."""
    groups, forms = _table()
    found = [word] if word in groups else []
    found.extend(forms.get(word, ()))
    for suffix, ending in _SUFFIXES:
        if word.endswith(suffix) and len(word) > len(suffix) + 1:
            base = word[: -len(suffix)] + ending
            found.append(base)
            if not ending and len(base) > 2 and base[-1] == base[-2]:  # "stopped" -> "stop"
                found.append(base[:-1])
    return tuple(dict.fromkeys(w for w in found if w in groups))


def synonyms(a: str, b: str) -> bool:
    """Whether two single words (any case, any inflection) share one of their two most
    frequent senses."""
    x, y = a.casefold(), b.casefold()
    if x == y or " " in x or " " in y:
        return False
    groups, _ = _table()
    mine = {g for lemma in lemmas(x) for g in groups[lemma]}
    return any(mine & groups[lemma] for lemma in lemmas(y))
