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
import hashlib
import math
from array import array
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

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

__all__ = ["LocalIndex", "Neighbour", "date_words", "sessions"]

_TAIL = 2048  # memories worked out apart at most; past it, the next build is a whole one
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NO_TIME = -(2**63)  # a memory without a time: before every other (microseconds)
_AROUND_KEPT = 50_000  # `around`'s answers kept at most, until the index changes


class Neighbour(NamedTuple):
    """A memory next to another in time, as the local index keeps it: its id and its text
    (what lends its words to the other's context)."""

    id: str
    content: str


class LocalIndex:
    """BM25 with a context window over the memories, in the order they happened.

    What it keeps per memory is array-shaped: by the order the store listed them in (a
    memory's `seq`), its id, its text, a digest of the text, its time in microseconds and its
    terms packed as 32-bit (term id, count) pairs; and, once built, the time order and each
    memory's place in it as numpy arrays. No `Memory` object is kept: hits are read back
    from the store before use (`derived.indexes`)."""

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
        self._clear()

    def _clear(self) -> None:
        self._seq: dict[str, int] = {}  # id -> seq
        self._ids: list[str] = []  # by seq
        self._texts: list[str] = []
        self._digests = array("Q")
        self._times = array("q")  # microseconds since the epoch, `_NO_TIME` when none
        self._terms: list[bytes] = []  # int32 (term id, count) pairs (`_vocabulary` numbers them)
        self._vocabulary: dict[str, int] = {}
        self._dirty = False
        self._changed = False  # a memory's text or a setting changed: build everything again
        self._fresh: list[int] = []  # memories (seqs) added since the last build
        self._main: Postings | None = None  # the positions under `_cut`
        self._tail: Postings | None = None  # the positions from `_cut` on
        self._cut = 0
        self._length: Floats | None = None  # per position, and BM25's normalisation of it
        self._norm: Floats | None = None
        self._order: Ints | None = None  # per position: its memory's seq (the listing order)
        self._position: Ints | None = None  # per seq: its position
        self._session = array("q")  # per position: the run of memories it is in
        self._last_time: int | None = None  # the last known time in the order
        self._around: dict[str, tuple[Neighbour, ...]] = {}  # `around`'s answers, until a change

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, memories: Sequence[Memory]) -> int:
        """Index these memories (a changed one replaces the old); returns how many changed."""
        changed = 0
        for memory in memories:
            digest = _digest(memory.content)
            seq = self._seq.get(memory.id)
            if seq is not None and self._digests[seq] == digest:
                continue
            if seq is None and len(self._ids) >= self.max_memories:
                continue
            when = _microseconds(memory.created_at)
            packed = self._analyse(memory)
            if seq is None:
                self._seq[memory.id] = len(self._ids)
                self._fresh.append(len(self._ids))
                self._ids.append(memory.id)
                self._texts.append(memory.content)
                self._digests.append(digest)
                self._times.append(when)
                self._terms.append(packed)
            else:
                self._texts[seq], self._digests[seq] = memory.content, digest
                self._times[seq], self._terms[seq] = when, packed
                self._changed = True
            changed += 1
        self._dirty = self._dirty or changed > 0
        return changed

    def _analyse(self, memory: Memory) -> bytes:
        text = f"{memory.content} {' '.join(memory.entities)}"
        if self.date_terms and memory.created_at is not None:
            text += f" {date_words(memory.created_at)}"
        counts = Counter(terms(text))
        vocabulary = self._vocabulary
        pairs = array("i")
        for term, count in counts.items():
            pairs.append(vocabulary.setdefault(term, len(vocabulary)))
            pairs.append(count)
        return pairs.tobytes()

    def configure(
        self,
        *,
        context_weight: float,
        k1: float,
        b: float,
        radius: int = 1,
        context_gap_s: float | None = None,
    ) -> None:
        """Take these settings (the scores change; the texts' terms stay)."""
        wanted = (context_weight, k1, b, radius, context_gap_s)
        if wanted != (self.context_weight, self.k1, self.b, self.radius, self.context_gap_s):
            self.context_weight, self.k1, self.b, self.radius, self.context_gap_s = wanted
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

    def _key(self, seq: int) -> tuple[int, int]:
        return (self._times[seq], seq)

    def _build(self) -> None:
        """Each memory's terms plus its neighbours' (up to `radius` away, at `context_weight`
        divided by the distance, and only within its session), as postings."""
        import numpy as np

        count = len(self._ids)
        seqs = np.arange(count, dtype=np.int64)
        order = np.lexsort((seqs, np.array(self._times, dtype=np.int64)))
        self._session = _sessions([self._times[s] for s in order.tolist()], self.context_gap_s)
        rows = Rows([self._terms[s] for s in order.tolist()])
        session = np.array(self._session, dtype=np.int64)
        steps = lend_steps(session, self.radius, self.context_weight)
        self._main = build(steps, rows, len(self._vocabulary))
        self._tail, self._cut = None, count
        self._order = order
        self._position = np.empty(count, dtype=np.int64)
        self._position[order] = seqs
        known = [t for t in (self._times[s] for s in reversed(order.tolist())) if t != _NO_TIME]
        self._last_time = known[0] if known else None
        self._normalise(self._main.length)

    def _append(self) -> bool:
        """Add the memories added since the last build when they all come after the others
        in time: the last `radius` positions get new neighbours, so they and the new ones
        are worked out again, apart (the tail), the same way `_build` would. False when they
        do not (a memory dated earlier), or the tail grew past `_TAIL`: build everything."""
        import numpy as np

        assert self._main is not None
        assert self._length is not None
        assert self._order is not None
        assert self._position is not None
        fresh = sorted(self._fresh, key=self._key)
        before = len(self._order)
        last = int(self._order[-1]) if before else None
        if not fresh or (last is not None and self._key(fresh[0]) <= self._key(last)):
            return False
        reach = self.radius if self.context_weight > 0 else 0
        cut = min(self._cut, max(0, before - reach))
        if before + len(fresh) - cut > _TAIL:
            return False
        self._continue_sessions(fresh)
        added = np.asarray(fresh, dtype=np.int64)
        self._order = np.concatenate([self._order, added])
        self._position = np.concatenate([self._position, np.zeros(len(fresh), np.int64)])
        self._position[added] = np.arange(before, before + len(fresh), dtype=np.int64)
        lo = max(0, cut - reach)  # the positions that only lend their terms
        rows = Rows([self._terms[s] for s in self._order[lo:].tolist()])
        session = np.array(self._session[lo:], dtype=np.int64)
        steps = lend_steps(session, self.radius, self.context_weight, receivers_from=cut - lo)
        self._tail = build(steps, rows, len(self._vocabulary), offset=lo)
        self._cut = cut
        self._normalise(np.concatenate([self._length[:cut], self._tail.length[cut - lo :]]))
        return True

    def _continue_sessions(self, fresh: Sequence[int]) -> None:
        """`sessions`, carried on over memories that come after all the others."""
        current = self._session[-1] if self._session else 0
        before = self._last_time
        for seq in fresh:
            when = self._times[seq]
            if _far_apart(before, when, self.context_gap_s):
                current += 1
            before = when if when != _NO_TIME else before
            self._session.append(current)
        self._last_time = before

    def _normalise(self, length: Floats) -> None:
        # the average as the builtin sum in time order makes it, then BM25's normalisation
        # as a per-posting loop computes it: k1 * (1 - b + b * length / average)
        lengths = length.tolist()
        average = (sum(lengths) / len(lengths) if lengths else 0.0) or 1.0
        self._length = length
        self._norm = self.k1 * (1 - self.b + self.b * length / average)

    def id_at(self, position: int) -> str:
        """The id of the memory at `position` in time order (after `prepare`)."""
        assert self._order is not None
        return self._ids[int(self._order[position])]

    def around(self, ids: Sequence[str]) -> dict[str, list[Neighbour]]:
        """The memories just before and after each of `ids` in time (those it knows); each
        one's kept until the index changes (the same candidates come back question after
        question)."""
        self.prepare()
        out: dict[str, list[Neighbour]] = {}
        known = self._around
        order, position, session = self._order, self._position, self._session
        for memory_id in ids:
            near = known.get(memory_id)
            if near is None:
                seq = self._seq.get(memory_id)
                if seq is None or order is None or position is None:
                    continue
                i = int(position[seq])
                near = tuple(
                    Neighbour(self._ids[s], self._texts[s])
                    for s in (int(order[j]) for j in (i - 1, i + 1) if 0 <= j < len(order))
                    if session[int(position[s])] == session[i]
                )
                if len(known) < _AROUND_KEPT:
                    known[memory_id] = near
            out[memory_id] = list(near)
        return out

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """The ids of the `k` best memories for `query`, best first, with their BM25 score."""
        self.prepare()
        wanted = list(dict.fromkeys(terms(query)))
        if not wanted or k < 1 or self._order is None or not len(self._order):
            return []
        positions, scores = self._bm25(wanted)
        order = self._order
        best = top(positions, scores, order, k)
        return [
            (self._ids[int(order[p])], round(s, 6))
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
        assert self._order is not None
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


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def _microseconds(when: datetime | None) -> int:
    """`when` in whole microseconds since the epoch (exact: no float rounds a gap)."""
    if when is None:
        return _NO_TIME
    return (to_utc(when) - _EPOCH) // timedelta(microseconds=1)


def _far_apart(a: int | None, b: int, gap_s: float | None) -> bool:
    """`models.far_apart` over microseconds: more than `gap_s` seconds between two known
    moments."""
    if not gap_s or a is None or _NO_TIME in (a, b):
        return False
    return abs(timedelta(microseconds=a - b).total_seconds()) > gap_s


def _sessions(times: Sequence[int], gap_s: float | None) -> array[int]:
    """`sessions` over the times (microseconds) of memories in time order."""
    out = array("q")
    current, before = 0, None
    for when in times:
        if _far_apart(before, when, gap_s):
            current += 1
        before = when if when != _NO_TIME else before
        out.append(current)
    return out


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
