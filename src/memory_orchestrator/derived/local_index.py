"""Optional stage: a derived local index with context, for candidates the store cannot find.

Conversations are local: the turn that answers a question often shares no word with it,
while the turn just before or after does ("What did she paint?" -> "Here's our latest work"
follows "We love painting together"). A store's search scores each memory alone. This index
scores each memory by BM25 over its own terms plus, at `context_weight`, the terms of the
memories just before and after it in time, and hands its top hits to the fusion as one more
ranked list. (On the LoCoMo development split this lever alone lifts plain BM25's recall
well beyond any other lexical one: `bench/lexical_levers.py`, figures in `bench/results/`.)

It is a cache the orchestrator owns, filled from the store's own listing (`Feed`), never
the source of truth: hits are read back from the store before use. On by default
(`[local_index] enabled`); it needs a store that can list its memories.

The postings are numpy arrays (`derived.postings`), built in one vectorised pass, and a query
adds up each of its terms' BM25 contributions over them: the same arithmetic, in the same
order, as a per-posting loop in Python, at a fraction of the time and memory. Memories that
come after all the others in time (what a store's new memories are) are added without
building everything again: only the last `radius` memories' frequencies change, and they and
the new ones are kept apart (a tail) until the tail is large. A native full-text engine
(SQLite FTS5, tantivy, bm25s) counts whole terms in a text: it cannot lend a memory its
neighbours' terms at fractional weights.
"""

from __future__ import annotations

import calendar
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memory_orchestrator.derived.postings import Postings, Rows, build, lend_steps, top
from memory_orchestrator.models import Memory, far_apart, to_utc
from memory_orchestrator.text import terms

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Floats = npt.NDArray[np.float64]
    Ints = npt.NDArray[np.int64]
else:
    Floats = Ints = Any

__all__ = ["LocalIndex", "date_words", "sessions"]

_NO_TIME = datetime.min.replace(tzinfo=UTC)
_TAIL = 2048  # memories worked out apart at most; past it, the next build is a whole one


class LocalIndex:
    """BM25 with a context window over the memories, in the order they happened."""

    def __init__(
        self,
        *,
        context_weight: float = 0.5,
        radius: int = 1,
        k1: float = 1.2,
        b: float = 0.75,
        max_memories: int = 200_000,
        date_terms: bool = False,
        context_gap_s: float | None = None,
    ) -> None:
        self.context_weight = context_weight
        self.context_gap_s = context_gap_s
        self.date_terms = date_terms
        self.radius = radius
        self.k1, self.b = k1, b
        self.max_memories = max_memories
        self._memories: dict[str, Memory] = {}
        # each memory's terms, as term ids and counts (`_vocabulary` numbers the terms)
        self._terms: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self._vocabulary: dict[str, int] = {}
        self._seq: dict[str, int] = {}
        self._dirty = False
        self._changed = False  # a memory's text or a setting changed: build everything again
        self._fresh: list[str] = []  # memories added since the last build
        self._main: Postings | None = None  # the positions under `_cut`
        self._tail: Postings | None = None  # the positions from `_cut` on
        self._cut = 0
        self._length: Floats | None = None  # per position, and BM25's normalisation of it
        self._norm: Floats | None = None
        self._order: list[str] = []
        self._ranks: Ints | None = None  # per position: the order the store listed it in
        self._position: dict[str, int] = {}
        self._session: list[int] = []  # per position in `_order`: the run of memories it is in
        self._last_time: datetime | None = None  # the last known time in `_order`
        self._around: dict[str, tuple[Memory, ...]] = {}  # `around`'s answers, until a change

    def __len__(self) -> int:
        return len(self._memories)

    def add(self, memories: Sequence[Memory]) -> int:
        """Index these memories (a changed one replaces the old); returns how many changed."""
        changed = 0
        for memory in memories:
            known = self._memories.get(memory.id)
            if known is not None and known.content == memory.content:
                continue
            if known is None and len(self._memories) >= self.max_memories:
                continue
            self._seq.setdefault(memory.id, len(self._seq))
            self._memories[memory.id] = memory
            self._terms[memory.id] = self._analyse(memory)
            if known is None:
                self._fresh.append(memory.id)
            else:
                self._changed = True
            changed += 1
        self._dirty = self._dirty or changed > 0
        return changed

    def _analyse(self, memory: Memory) -> tuple[tuple[int, ...], tuple[int, ...]]:
        text = f"{memory.content} {' '.join(memory.entities)}"
        if self.date_terms and memory.created_at is not None:
            text += f" {date_words(memory.created_at)}"
        counts = Counter(terms(text))
        vocabulary = self._vocabulary
        ids = tuple(vocabulary.setdefault(term, len(vocabulary)) for term in counts)
        return ids, tuple(counts.values())

    def configure(
        self,
        *,
        context_weight: float,
        k1: float,
        b: float,
        radius: int = 1,
        date_terms: bool | None = None,
        context_gap_s: float | None = None,
    ) -> None:
        wanted = (context_weight, k1, b, radius, context_gap_s)
        if wanted != (self.context_weight, self.k1, self.b, self.radius, self.context_gap_s):
            self.context_weight, self.k1, self.b, self.radius, self.context_gap_s = wanted
            self._dirty = self._changed = True
        if date_terms is not None and date_terms != self.date_terms:
            self.date_terms = date_terms
            self._terms = {i: self._analyse(m) for i, m in self._memories.items()}
            self._dirty = self._changed = True

    def prepare(self) -> None:
        """Bring the postings up to date now if anything changed (else the next query does):
        the new memories appended when they all come after the others in time, else
        everything built again."""
        if not self._dirty:
            return
        if self._changed or self._main is None or not self._append():
            self._build()
        self._fresh, self._changed, self._dirty = [], False, False
        self._around = {}

    def _key(self, memory: Memory) -> tuple[datetime, int]:
        return (to_utc(memory.created_at) if memory.created_at else _NO_TIME, self._seq[memory.id])

    def _build(self) -> None:
        """Each memory's terms plus its neighbours' (up to `radius` away, at `context_weight`
        divided by the distance, and only within its session), as postings."""
        import numpy as np

        order = sorted(self._memories.values(), key=self._key)
        session = sessions(order, self.context_gap_s)
        rows = Rows([self._terms[m.id] for m in order])
        steps = lend_steps(np.asarray(session, dtype=np.int64), self.radius, self.context_weight)
        self._main = build(steps, rows, len(self._vocabulary))
        self._tail, self._cut = None, len(order)
        self._order = [m.id for m in order]
        self._ranks = np.fromiter((self._seq[m.id] for m in order), np.int64, len(order))
        self._session = session
        self._position = {memory_id: i for i, memory_id in enumerate(self._order)}
        times = (m.created_at for m in reversed(order) if m.created_at is not None)
        self._last_time = next(times, None)
        self._normalise(self._main.length)

    def _append(self) -> bool:
        """Add the memories added since the last build when they all come after the others
        in time: the last `radius` positions get new neighbours, so they and the new ones
        are worked out again, apart (the tail), the same way `_build` would. False when they
        do not (a memory dated earlier), or the tail grew past `_TAIL`: build everything."""
        import numpy as np

        assert self._main is not None
        assert self._length is not None
        assert self._ranks is not None
        fresh = sorted((self._memories[i] for i in self._fresh), key=self._key)
        last = self._memories[self._order[-1]] if self._order else None
        if not fresh or (last is not None and self._key(fresh[0]) <= self._key(last)):
            return False
        before = len(self._order)
        reach = self.radius if self.context_weight > 0 else 0
        cut = min(self._cut, max(0, before - reach))
        if before + len(fresh) - cut > _TAIL:
            return False
        self._continue_sessions(fresh)
        self._order.extend(m.id for m in fresh)
        for position, memory in enumerate(fresh, start=before):
            self._position[memory.id] = position
        ranks = np.fromiter((self._seq[m.id] for m in fresh), np.int64, len(fresh))
        self._ranks = np.concatenate([self._ranks, ranks])
        lo = max(0, cut - reach)  # the positions that only lend their terms
        rows = Rows([self._terms[i] for i in self._order[lo:]])
        session = np.asarray(self._session[lo:], dtype=np.int64)
        steps = lend_steps(session, self.radius, self.context_weight, receivers_from=cut - lo)
        self._tail = build(steps, rows, len(self._vocabulary), offset=lo)
        self._cut = cut
        self._normalise(np.concatenate([self._length[:cut], self._tail.length[cut - lo :]]))
        return True

    def _continue_sessions(self, fresh: Sequence[Memory]) -> None:
        """`sessions`, carried on over memories that come after all the others."""
        current = self._session[-1] if self._session else 0
        before = self._last_time
        for memory in fresh:
            when = memory.created_at
            if far_apart(before, when, self.context_gap_s):
                current += 1
            before = when if when is not None else before
            self._session.append(current)
        self._last_time = before

    def _normalise(self, length: Floats) -> None:
        # the average as the builtin sum in time order makes it, then BM25's normalisation
        # as a per-posting loop computes it: k1 * (1 - b + b * length / average)
        lengths = length.tolist()
        average = (sum(lengths) / len(lengths) if lengths else 0.0) or 1.0
        self._length = length
        self._norm = self.k1 * (1 - self.b + self.b * length / average)

    def around(self, ids: Sequence[str]) -> dict[str, list[Memory]]:
        """The memories just before and after each of `ids` in time (those it knows); each
        one's kept until the index changes (the same candidates come back question after
        question)."""
        self.prepare()
        out: dict[str, list[Memory]] = {}
        known = self._around
        for memory_id in ids:
            near = known.get(memory_id)
            if near is None:
                i = self._position.get(memory_id)
                if i is None:
                    continue
                near = known[memory_id] = tuple(
                    self._memories[self._order[j]]
                    for j in (i - 1, i + 1)
                    if 0 <= j < len(self._order) and self._session[j] == self._session[i]
                )
            out[memory_id] = list(near)
        return out

    def search(
        self, query: str, k: int, *, meaning: Mapping[str, float] | None = None, share: float = 0.0
    ) -> list[tuple[Memory, float]]:
        """The `k` best memories for `query`, best first, with their score: BM25, or with
        `meaning` (a semantic similarity per memory id) a weighted hybrid of the two, each
        min-max scaled over the memories it scores (`share` is the semantic weight)."""
        self.prepare()
        wanted = list(dict.fromkeys(terms(query)))
        if not wanted or k < 1 or self._ranks is None or not self._order:
            return []
        positions, scores = self._bm25(wanted)
        if meaning and share > 0:
            found = (self._order[p] for p in positions.tolist())
            lexical = dict(zip(found, scores.tolist(), strict=True))
            return self._best_of(_hybrid(lexical, meaning, share), k)
        best = top(positions, scores, self._ranks, k)
        return [
            (self._memories[self._order[p]], round(s, 6))
            for p, s in zip(positions[best].tolist(), scores[best].tolist(), strict=True)
        ]

    def _bm25(self, wanted: list[str]) -> tuple[Ints, Floats]:
        """The positions of the memories that hold a query term, and their BM25 score: each
        term's contributions added in the query's term order (the order a per-posting loop
        adds them in, so the sums are the same to the last bit). A position is in the main
        postings or in the tail, never both."""
        import numpy as np

        assert self._main is not None
        assert self._norm is not None
        n, k1, norm = len(self._order), self.k1, self._norm
        scores = np.zeros(n, dtype=np.float64)
        touched = np.zeros(n, dtype=bool)
        for term in wanted:
            term_id = self._vocabulary.get(term)
            if term_id is None:
                continue
            parts = [self._main.of(term_id, below=self._cut)]
            if self._tail is not None:
                parts.append(self._tail.of(term_id))
            df = sum(len(position) for position, _ in parts)
            if not df:
                continue
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            for position, tf in parts:
                scores[position] += idf * tf * (k1 + 1) / (tf + norm[position])
                touched[position] = True
        found = np.flatnonzero(touched)
        return found, scores[found]

    def _best_of(self, scores: Mapping[str, float], k: int) -> list[tuple[Memory, float]]:
        # ties: in the order the store listed them (ids are often random)
        last = len(self._seq)
        ranked = sorted(scores.items(), key=lambda item: (-item[1], self._seq.get(item[0], last)))
        best = [(i, score) for i, score in ranked if i in self._memories][:k]
        return [(self._memories[i], round(score, 6)) for i, score in best]


def sessions(order: Sequence[Memory], gap_s: float | None) -> list[int]:
    """A session number per memory of `order` (sorted by time): a new session starts where
    more than `gap_s` seconds pass since the memory before (None or 0: one session). Conversation
    turns seconds apart share context; facts written days apart do not lend each other words."""
    out: list[int] = []
    current, before = 0, None
    for memory in order:
        when = memory.created_at
        if far_apart(before, when, gap_s):
            current += 1
        before = when if when is not None else before
        out.append(current)
    return out


def date_words(when: datetime) -> str:
    """A memory's date as the words a question names it by: "8 May 2023" (day without a
    leading zero; English month names, as Python keeps them unless a program changes its
    locale), so "What did she do in May 2023?" matches what was said then even though the
    words are not in the text."""
    return f"{when.day} {calendar.month_name[when.month]} {when.year}"


def _scaled(values: Mapping[str, float]) -> dict[str, float]:
    if not values:
        return {}
    low, high = min(values.values()), max(values.values())
    span = high - low
    return {i: (v - low) / span if span > 0 else 1.0 for i, v in values.items()}


def _hybrid(
    lexical: Mapping[str, float], meaning: Mapping[str, float], share: float
) -> dict[str, float]:
    words, sense = _scaled(lexical), _scaled(meaning)
    return {
        i: (1 - share) * words.get(i, 0.0) + share * sense.get(i, 0.0)
        for i in words.keys() | sense.keys()
    }
