"""The local index's postings as numpy arrays (`derived.local_index` keeps them).

Each memory's weighted term frequencies (its own terms, plus its neighbours' in time at a
weight) are summed step by step, in the order a per-posting loop in Python would add them, and
kept by term: for each term, the positions (in time order) of the memories it occurs in or
near, and its frequency there. A query then adds each of its terms' BM25 contributions over
them with numpy, in the query's term order: the same numbers as a loop, to the last bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Floats = npt.NDArray[np.float64]
    Ints = npt.NDArray[np.int64]
    Positions = npt.NDArray[np.int32]
else:
    Floats = Ints = Positions = Any

__all__ = ["Postings", "Rows", "build", "lend_steps", "top"]

Step = tuple["Ints", "Ints", float]  # receiving positions, lending positions, weight


class Rows:
    """The terms of consecutive memories (in time order) as flat arrays: memory `i`'s term ids
    and counts are `term_ids[start[i]:start[i + 1]]` and the same slice of `counts`. Each
    memory's terms come packed as 32-bit (term id, count) pairs (`LocalIndex` keeps them
    so)."""

    def __init__(self, rows: Sequence[bytes]) -> None:
        import numpy as np

        width = np.fromiter((len(row) // 8 for row in rows), dtype=np.int64, count=len(rows))
        self.start = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(width, out=self.start[1:])
        pairs = np.frombuffer(b"".join(rows), dtype=np.int32).reshape(-1, 2)
        self.term_ids = pairs[:, 0].astype(np.int64)
        self.counts = pairs[:, 1].astype(np.float64)


class Postings:
    """Per term id, the positions of the memories it occurs in or near and its weighted
    frequency there (a compressed sparse row matrix, term by memory), and each memory's
    length (the sum of its frequencies)."""

    def __init__(self, start: Ints, position: Positions, tf: Floats, length: Floats) -> None:
        self.start, self.position, self.tf, self.length = start, position, tf, length

    def of(self, term_id: int, below: int | None = None) -> tuple[Positions, Floats]:
        """The term's positions and frequencies (only the positions under `below`)."""
        import numpy as np

        if term_id + 1 >= len(self.start):
            return self.position[:0], self.tf[:0]
        s, e = int(self.start[term_id]), int(self.start[term_id + 1])
        if below is not None:  # positions are in time order within a term
            e = s + int(np.searchsorted(self.position[s:e], below))
        return self.position[s:e], self.tf[s:e]


def lend_steps(session: Ints, radius: int, weight: float, receivers_from: int = 0) -> list[Step]:
    """The order a memory's term frequencies are added up in: for each distance from 1 to
    `radius`, the neighbour before and the one after (at `weight / distance`, within the
    same session), then its own terms (weight 1). Only the positions from `receivers_from`
    on receive (the ones before only lend)."""
    import numpy as np

    n = len(session)
    everyone = np.arange(receivers_from, n, dtype=np.int64)
    steps: list[Step] = []
    for distance in range(1, radius + 1) if weight > 0 else ():
        for side in (-distance, distance):
            lender = everyone + side
            ok = (lender >= 0) & (lender < n)
            ok[ok] = session[lender[ok]] == session[everyone[ok]]
            steps.append((everyone[ok], lender[ok], weight / distance))
    steps.append((everyone, everyone, 1.0))
    return steps


_CHUNK = 8192  # receiving positions summed at a time: the work arrays stay this small


def build(steps: list[Step], rows: Rows, vocabulary: int, offset: int = 0) -> Postings:
    """Weighted term frequencies per (memory, term), summed step by step (so each sum is
    made in the same order as a loop over the steps would), as postings by term; positions
    are `offset` plus the row's index. Worked out `_CHUNK` receiving positions at a time (a
    memory's sums never need another chunk's), so that the work arrays stay small however
    many memories there are; the chunks' results are the same numbers in the same order as
    one pass over everything."""
    import numpy as np

    n = len(rows.start) - 1
    memories: list[Positions] = []
    terms: list[Positions] = []
    sums: list[Floats] = []
    lengths: list[Floats] = []
    first = min((int(r[0]) for r, _, _ in steps if len(r)), default=n)
    for low in range(first, n, _CHUNK):
        memory, term, tf, length = _chunk(steps, rows, vocabulary, low, min(n, low + _CHUNK))
        memories.append(memory)
        terms.append(term)
        sums.append(tf)
        lengths.append(length)
    memory = np.concatenate(memories) if memories else np.zeros(0, np.int32)
    term = np.concatenate(terms) if terms else np.zeros(0, np.int32)
    del memories, terms
    length = np.zeros(n, dtype=np.float64)
    if lengths:
        length[first:] = np.concatenate(lengths)
    term_start = np.zeros(vocabulary + 1, dtype=np.int64)
    np.cumsum(np.bincount(term, minlength=vocabulary), out=term_start[1:])
    by_term = np.argsort(term, kind="stable")  # positions stay in time order within a term
    del term
    position = memory[by_term]
    del memory
    position += offset
    tf = np.concatenate(sums)[by_term] if sums else np.zeros(0, np.float64)
    return Postings(term_start, position, tf, length)


def _chunk(
    steps: list[Step], rows: Rows, vocabulary: int, low: int, high: int
) -> tuple[Positions, Positions, Floats, Floats]:
    """The (memory, term) sums of the receiving positions in [low, high), by memory then
    term: their memories and terms (32-bit), sums, and the memories' lengths (positions
    low to high - 1)."""
    import numpy as np

    start, term_ids, counts = rows.start, rows.term_ids, rows.counts
    keys: list[Ints] = []
    values: list[Floats] = []
    for receivers, lenders, weight in steps:
        a, b = np.searchsorted(receivers, (low, high))  # (receivers ascend in each step)
        receiver, lender = receivers[a:b], lenders[a:b]
        width = start[lender + 1] - start[lender]
        first_of = np.repeat(start[lender] - (np.cumsum(width) - width), width)
        source = first_of + np.arange(int(width.sum()), dtype=np.int64)
        keys.append(np.repeat(receiver - low, width) * vocabulary + term_ids[source])
        values.append(weight * counts[source])
    unique, first, where = np.unique(np.concatenate(keys), return_index=True, return_inverse=True)
    tf = np.zeros(len(unique), dtype=np.float64)
    done = 0
    for step_values in values:  # a step holds each (memory, term) once: no collisions
        tf[where[done : done + len(step_values)]] += step_values
        done += len(step_values)
    memory, term = np.divmod(unique, vocabulary)
    # a memory's length: its terms' frequencies added in the order the terms first came in
    added = np.lexsort((first, memory))
    length = np.bincount(memory[added], weights=tf[added], minlength=high - low)
    found_memory = (memory + low).astype(np.int32)
    return found_memory, term.astype(np.int32), tf, np.asarray(length, np.float64)


def top(positions: Ints, scores: Floats, ranks: Ints, k: int) -> Ints:
    """Indexes into `positions` of the `k` best scores, best first; ties by `ranks` (the
    order the store listed them in, per position)."""
    import numpy as np

    candidates = np.arange(len(scores))
    if len(scores) > k:  # everything tied with the k-th best is a candidate for the last places
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        candidates = np.flatnonzero(scores >= kth)
    ordered = np.lexsort((ranks[positions[candidates]], -scores[candidates]))
    best: Ints = candidates[ordered[:k]]
    return best
