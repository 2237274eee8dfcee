"""Long notes that resemble each other, as an agent that stores long notes leaves them: one
text of words per family, each note of the family with a share of its words replaced.
Deterministic. Shared by the long-write tests and `bench/bench_long_writes.py`."""

from __future__ import annotations

import random
from functools import lru_cache

from memory_orchestrator.pipeline.synonyms import frequent_verbs

__all__ = ["long_note"]

_SMALL = ("the", "a", "of", "to", "and", "in", "is", "for", "with", "on")


@lru_cache(maxsize=1)
def _words() -> tuple[str, ...]:
    return tuple(w for w in frequent_verbs(4000) if w.isalpha())


def long_note(family: int, variant: int, size: int = 7900, changed: float = 0.3) -> str:
    """Note `variant` of `family`: `size` characters at most, cut at a word; the family's
    text with `changed` of its words replaced (variant 0: none)."""
    words = _words()
    base = random.Random(family)
    out: list[str] = []
    length = -1
    while True:
        word = base.choice(words) if base.random() < 0.7 else base.choice(_SMALL)
        if length + 1 + len(word) > size:
            break
        out.append(word)
        length += 1 + len(word)
    swap = random.Random(family * 1000 + variant)
    if variant:
        out = [swap.choice(words) if swap.random() < changed else w for w in out]
    text = " ".join(out)
    while len(text) > size:
        text = text[: text.rfind(" ")]
    return text
