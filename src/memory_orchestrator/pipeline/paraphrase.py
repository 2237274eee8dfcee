"""Does a new wording keep a memory's meaning? ("starts" -> "begins": yes; "staging" ->
"production", "opens" -> "closes", "maintains" -> "wrote": no.)

`pipeline.conflicts` asks this only of one content phrase swapped for another, everything
else (values, names, negation) equal, and says whether the phrase is the memory's verb (its
relation: "is *hosted* on", "*leads* the guild") in both wordings. Readings that answer it:

- lexical, always (`pipeline.synonyms`, from WordNet): the two words share one of the two
  most frequent senses of each; of two verbs, also one says the other in fewer words, within
  the first four senses of each ("to cap is to limit", "to wire is to send", "to schedule is
  to plan") or they share a sense down to the 4th;
- the semantic model, where it runs: the old sentence is embedded as it is, with the new
  phrase in place of the old, and without the phrase. The *shift* of the swap (1 - cosine)
  is compared with that of the deletion: a synonym restores what deleting the word took
  away (shift ratio near 0); another word moves the sentence about as far as, or further
  than, deleting it. A synonym of the common senses (or a linked verb) whose swap moves the
  sentence further than `veto` (`verb_veto`) times the deletion is read in another sense
  and refused; one of deeper senses (down to the 8th) counts only at or below `deep`; a
  swap the table does not know, only at or below `sure`;
- static word vectors (wordllama, part of the semantic extra), for two verbs WordNet does not
  tie: they count when each is among the other's `neighbours` nearest of WordNet's 2,000
  most frequent verbs, at a cosine of at least `near` ("deploys"/"ships", "uses"/"relies
  on", "priced"/"costs"). Static vectors of nouns put a tea beside a coffee and a bus beside
  a tram, the corrections this check must never swallow: they are asked of verbs only.

A sentence embedding tells synonyms from antonyms and co-hyponyms poorly (all-MiniLM-L6-v2
puts "old schema"/"new schema" closer than "fixed"/"repaired", and "reported the login bug"
as close to "fixed the login bug" as "repaired" is), so it only confirms or vetoes; antonyms
never reach any reading (`pipeline.wording.opposed`). Thresholds were set on the development
set of `scripts/make_knowledge_updates.py` and checked on its held-out sets
(docs/explanation/corrections.md).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from memory_orchestrator.pipeline.synonyms import (
    frequent_verbs,
    is_verb,
    sense_rank,
    verb_lemmas,
    verb_link,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]
else:
    Matrix = Any

__all__ = ["Meaning", "Probe", "SameMeaning", "Thresholds", "thresholds_for"]


class SameMeaning(Protocol):
    """(the old sentence, a phrase of it, the phrase the new one has in its place, whether
    that phrase is the verb of both) -> whether the new wording keeps the meaning."""

    def __call__(self, sentence: str, was: str, now: str, verb: bool = False) -> bool: ...

    def __hash__(self) -> int: ...  # a key of the comparisons' cache


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> Matrix: ...


@dataclass(frozen=True)
class Thresholds:
    veto: float  # a synonym of the common senses: another sense above this shift ratio
    deep: float | None  # a synonym of deeper senses: the same at or below this ratio
    sure: float | None  # a swap the table does not know: the same at or below this ratio
    verb_veto: float  # a linked verb, or word-vector neighbours: another sense above this


_COMMON = 1  # the first two senses of each word
_LINKED = 3  # two verbs tied within the first four senses: the same, the lexicon alone
_DEPTH = 7  # the deepest sense the model may confirm
# By embedder name, set on the development templates (docs/explanation/corrections.md).
# wordllama averages static word vectors: its shifts say little about one swapped word, so
# it only vetoes.
_THRESHOLDS = {
    "all-MiniLM-L6-v2": Thresholds(veto=1.5, deep=0.75, sure=0.3, verb_veto=2.5),
    "wordllama": Thresholds(veto=3.0, deep=None, sure=None, verb_veto=3.0),
}
_VOCABULARY = 2000  # the most frequent verbs a verb's neighbours are counted among
_NEIGHBOURS = 10  # each among the other's nearest this many
_NEAR = 0.2  # at a cosine of at least this


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
    """`Meaning()(sentence, was, now, verb)`: whether `now` in place of `was` keeps
    `sentence`'s meaning. `embedder` gives the semantic model and `words` static word vectors
    (wordllama), each None where it does not run; each is asked on the first question that
    needs it (loading a model costs a second or two), once."""

    def __init__(
        self,
        embedder: Callable[[], Embedder | None] = lambda: None,
        words: Callable[[], Embedder | None] = lambda: None,
    ) -> None:
        self._get, self._get_words = embedder, words
        self._model: Embedder | None = None
        self._asked = False
        self._vectors: WordVectors | None = None
        self._asked_words = False
        # The write path asks from worker threads: the first question loads each model
        # once, and no other question reads "not loaded" meanwhile.
        self._loading = threading.Lock()

    @property
    def model(self) -> Embedder | None:
        with self._loading:
            if not self._asked:
                self._model = self._get()
                self._asked = True
            return self._model

    @property
    def vectors(self) -> WordVectors | None:
        model = self.model
        with self._loading:
            if not self._asked_words:
                words = self._get_words() if model is not None else None
                self._vectors = WordVectors(words) if words is not None else None
                self._asked_words = True
            return self._vectors

    def __call__(self, sentence: str, was: str, now: str, verb: bool = False) -> bool:
        rank = sense_rank(was, now)
        common = rank is not None and rank <= _COMMON
        link = verb_link(was, now) if verb and is_verb(was) and is_verb(now) else None
        model = self.model
        limits = thresholds_for(model.name) if model is not None else None
        if model is None or limits is None:
            return common or (link is not None and link <= _LINKED)
        ratio = _probe(model, sentence, was, now).ratio
        if common:
            return ratio <= limits.veto
        if link is not None and link <= _LINKED:
            return ratio <= limits.verb_veto
        deep = link if link is not None else rank
        deep_ok = deep is not None and deep <= _DEPTH and limits.deep is not None
        if deep_ok and limits.deep is not None and ratio <= limits.deep:
            return True  # a deep sense the model confirms; unconfirmed, the checks below
        if verb and self._neighbours(was, now):
            return ratio <= limits.verb_veto
        return limits.sure is not None and ratio <= limits.sure

    def _neighbours(self, was: str, now: str) -> bool:
        vectors = self.vectors
        if vectors is None or not is_verb(was) or not is_verb(now):
            return False
        return vectors.neighbours(verb_lemmas(was)[0], verb_lemmas(now)[0])


class WordVectors:
    """Static word vectors of verbs: are two verbs each other's near neighbours among the most
    frequent verbs? (The vocabulary is embedded once, on the first question.)"""

    def __init__(self, model: Embedder) -> None:
        self._model = model
        self._vocabulary: list[str] = []
        self._matrix: Matrix | None = None

    def neighbours(self, a: str, b: str) -> bool:
        """Whether verbs `a` and `b` (lemmas; phrases with "_") lie within each other's
        `_NEIGHBOURS` nearest of the vocabulary at a cosine of at least `_NEAR`."""
        if self._matrix is None:
            self._vocabulary = list(frequent_verbs(_VOCABULARY))
            self._matrix = self._model.embed(self._vocabulary)
        x, y = self._model.embed([a.replace("_", " "), b.replace("_", " ")])
        cosine = float(x @ y)
        if cosine < _NEAR:
            return False
        skip = [i for i, v in enumerate(self._vocabulary) if v in (a, b)]
        for vector in (x, y):
            closer = self._matrix @ vector > cosine
            closer[skip] = False
            if int(closer.sum()) > _NEIGHBOURS:
                return False
        return True


def _probe(model: Embedder, sentence: str, was: str, now: str) -> Probe:
    pattern = re.compile(rf"\b{re.escape(was)}\b")
    swapped = pattern.sub(now, sentence, count=1)
    cut = " ".join(pattern.sub("", sentence, count=1).split())
    v = model.embed([sentence, swapped, cut])
    return Probe(swap=1.0 - float(v[0] @ v[1]), cut=1.0 - float(v[0] @ v[2]))
