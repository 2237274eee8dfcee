"""Does a new wording keep a memory's meaning? ("starts" -> "begins": yes; "staging" ->
"production", "opens" -> "closes", "maintains" -> "wrote": no.)

`pipeline.conflicts` asks this only of one content phrase swapped for another, everything
else (values, names, negation) equal. Two readings answer it:

- lexical, always: the two words share one of the two most frequent WordNet senses of each
  (`pipeline.synonyms`);
- the semantic model, where it runs: the old sentence is embedded as it is, with the new
  phrase in place of the old, and without the phrase. The *shift* of the swap (1 - cosine)
  is compared with that of the deletion: a synonym restores what deleting the word took
  away (shift ratio near 0); another word moves the sentence about as far as, or further
  than, deleting it. A WordNet synonym of the common senses whose swap moves the sentence
  further than `veto` times the deletion is read in another sense and refused; one of
  deeper senses (down to the `depth`-th) counts only at or below `deep`; a swap the table
  does not know, only at or below `sure`.

A sentence embedding tells synonyms from antonyms and co-hyponyms poorly (all-MiniLM-L6-v2
puts "old schema"/"new schema" closer than "fixed"/"repaired"), so the model alone decides
only the clearest cases; antonyms never reach it (`pipeline.wording.opposed`). Thresholds per
model were set on the development set of `scripts/make_knowledge_updates.py` and checked on
its held-out templates (docs/explanation/corrections.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from memory_orchestrator.pipeline.synonyms import sense_rank

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]
else:
    Matrix = Any

__all__ = ["Meaning", "Probe", "Thresholds", "thresholds_for"]


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> Matrix: ...


@dataclass(frozen=True)
class Thresholds:
    veto: float  # a synonym of the common senses: another sense above this shift ratio
    deep: float | None  # a synonym of deeper senses: the same at or below this ratio
    sure: float | None  # a swap the table does not know: the same at or below this ratio


_COMMON = 1  # the first two senses of each word
_DEPTH = 7  # the deepest sense the model may confirm
# By embedder name, set on the development templates (docs/explanation/corrections.md).
# wordllama averages static word vectors: its shifts say little about one swapped word, so
# it only vetoes.
_THRESHOLDS = {
    "all-MiniLM-L6-v2": Thresholds(veto=1.5, deep=0.75, sure=0.3),
    "wordllama": Thresholds(veto=3.0, deep=None, sure=None),
}


def thresholds_for(name: str) -> Thresholds | None:
    return next((t for prefix, t in _THRESHOLDS.items() if name.startswith(prefix)), None)


@dataclass(frozen=True)
class Probe:
    swap: float  # 1 - cosine(sentence, sentence with the new phrase)
    cut: float  # 1 - cosine(sentence, sentence without the phrase)

    @property
    def ratio(self) -> float:
        return self.swap / max(self.cut, 1e-6)


class Meaning:
    """`Meaning()(sentence, was, now)`: whether `now` in place of `was` keeps `sentence`'s
    meaning. `embedder` gives the semantic model, or None where it does not run; it is asked
    on the first question that needs it (loading a model costs a second or two), once."""

    def __init__(self, embedder: Callable[[], Embedder | None] = lambda: None) -> None:
        self._get = embedder
        self._model: Embedder | None = None
        self._asked = False

    @property
    def model(self) -> Embedder | None:
        if not self._asked:
            self._asked = True
            self._model = self._get()
        return self._model

    def __call__(self, sentence: str, was: str, now: str) -> bool:
        rank = sense_rank(was, now)
        common = rank is not None and rank <= _COMMON
        model = self.model
        limits = thresholds_for(model.name) if model is not None else None
        if model is None or limits is None:
            return common
        ratio = _probe(model, sentence, was, now).ratio
        if common:
            return ratio <= limits.veto
        limit = limits.deep if rank is not None and rank <= _DEPTH else limits.sure
        return limit is not None and ratio <= limit


def _probe(model: Embedder, sentence: str, was: str, now: str) -> Probe:
    pattern = re.compile(rf"\b{re.escape(was)}\b")
    swapped = pattern.sub(now, sentence, count=1)
    cut = " ".join(pattern.sub("", sentence, count=1).split())
    v = model.embed([sentence, swapped, cut])
    return Probe(swap=1.0 - float(v[0] @ v[1]), cut=1.0 - float(v[0] @ v[2]))
