"""The candidate table: one read's candidates as columns, which every stage of the read path
takes and gives back (`(table, plan) -> table`).

Row `i` is `candidates[i]`: its memory and where it came from (the lists that found it, or the
hop that reached it), its semantic similarity to the question (a column, worked out once a
row), and, once the ranking ran, one number per signal of the score. A result's score
breakdown is its row (`breakdown`); the `ScoredItem` a caller gets is made from its row only
for the rows returned (`item`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np
import numpy.typing as npt

from memory_orchestrator.models import Candidate, Memory, ScoreBreakdown, ScoredItem

Column = npt.NDArray[np.float64]

# Memory id -> cosine with the question, for the memories given (the semantic index's
# `similarities` for one query); none where there is no semantic index.
Similarity = Callable[[Sequence[Memory]], Mapping[str, float]]


class Text(Protocol):
    """What ranking reads of a memory next to another in time: its id and its text (a
    `Memory`, or the local index's `Neighbour`)."""

    @property
    def id(self) -> str: ...

    @property
    def content(self) -> str: ...


def column(values: Sequence[float] | Column = ()) -> Column:
    return np.asarray(values, dtype=np.float64)


@dataclass(frozen=True)
class Scores:
    """The ranking's columns, one value per row (see `reranker.rank`); `total` is the weighted
    sum the rows are ordered by. The reasons' parts that the score worked out on the way (the
    age a reason names, the entity shared) are kept beside them."""

    lexical: Column
    store: Column
    relevance: Column
    recency: Column
    graph: Column
    type_match: Column
    cross_reference: Column
    noise: Column
    duplicate: Column
    total: Column
    weights: Mapping[str, float]
    recency_reason: tuple[str | None, ...]
    xref_entity: tuple[str | None, ...]

    def take(self, rows: Sequence[int]) -> Scores:
        index = np.asarray(rows, dtype=np.intp)
        return Scores(
            **{name: getattr(self, name)[index] for name in _COLUMNS},
            weights=self.weights,
            recency_reason=tuple(self.recency_reason[i] for i in rows),
            xref_entity=tuple(self.xref_entity[i] for i in rows),
        )


_COLUMNS = (
    "lexical",
    "store",
    "relevance",
    "recency",
    "graph",
    "type_match",
    "cross_reference",
    "noise",
    "duplicate",
    "total",
)


@dataclass(frozen=True)
class CandidateTable:
    """One read's candidates, a row each. `around` maps a memory id to the memories next to
    it in time (lent words for its term match); `context_of` maps a neighbour fetched that
    way to its seed. `scores` is None until the ranking ran; `merged_ids`, `cross_validated`,
    `notes` (reasons a later stage adds) and `changed` are what the deduper and
    `currency.newest_first` say of a row."""

    candidates: tuple[Candidate, ...]
    semantic: Column  # cosine with the question; NaN where not known
    around: Mapping[str, Sequence[Text]] = field(default_factory=dict)
    context_of: Mapping[str, str] = field(default_factory=dict)
    scores: Scores | None = None
    merged_ids: tuple[tuple[str, ...], ...] = ()
    cross_validated: tuple[bool, ...] = ()
    notes: tuple[tuple[str, ...], ...] = ()
    changed: tuple[str | None, ...] = ()

    @classmethod
    def of(
        cls,
        candidates: Sequence[Candidate],
        similarity: Similarity | None = None,
        *,
        known: Mapping[str, float] | None = None,
        around: Mapping[str, Sequence[Text]] | None = None,
        context_of: Mapping[str, str] | None = None,
    ) -> CandidateTable:
        """A table of `candidates`, each one's similarity from `known`, else `similarity`."""
        empty = cls((), column(), around or {}, context_of or {})
        return empty.extended(candidates, similarity, known=known)

    def __len__(self) -> int:
        return len(self.candidates)

    @property
    def ids(self) -> list[str]:
        return [c.memory.id for c in self.candidates]

    def extended(
        self,
        candidates: Sequence[Candidate],
        similarity: Similarity | None = None,
        *,
        known: Mapping[str, float] | None = None,
    ) -> CandidateTable:
        """The table with rows for `candidates` added below; their similarity is worked out
        now (the one place it is), for the memories `known` does not hold."""
        if not candidates:
            return self
        cosines: Mapping[str, float] = known or {}
        if similarity is not None:
            missing = [c.memory for c in candidates if c.memory.id not in cosines]
            if missing:
                cosines = {**cosines, **similarity(missing)}
        added = column([cosines.get(c.memory.id, np.nan) for c in candidates])
        return self._rows((*self.candidates, *candidates), np.concatenate((self.semantic, added)))

    def take(self, rows: Sequence[int]) -> CandidateTable:
        """The table of these rows, in this order."""
        index = np.asarray(rows, dtype=np.intp)
        return replace(
            self,
            candidates=tuple(self.candidates[i] for i in rows),
            semantic=self.semantic[index],
            scores=self.scores.take(rows) if self.scores is not None else None,
            merged_ids=tuple(self.merged_ids[i] for i in rows) if self.merged_ids else (),
            cross_validated=tuple(self.cross_validated[i] for i in rows)
            if self.cross_validated
            else (),
            notes=tuple(self.notes[i] for i in rows) if self.notes else (),
            changed=tuple(self.changed[i] for i in rows) if self.changed else (),
        )

    def _rows(self, candidates: tuple[Candidate, ...], semantic: Column) -> CandidateTable:
        # rows added before the ranking: nothing scored yet
        return replace(self, candidates=candidates, semantic=semantic, scores=None)

    # ------------------------------------------------------------------ rows

    def cosine(self, row: int) -> float | None:
        value = float(self.semantic[row])
        return None if np.isnan(value) else value

    def breakdown(self, row: int) -> ScoreBreakdown:
        """Row `row`'s score breakdown (the ranking must have run)."""
        s = self.scores
        assert s is not None, "the table is not scored yet"
        # (relevance, total and the duplicate penalty are kept rounded: the stages order,
        # cut and penalise by the values a breakdown shows)
        return ScoreBreakdown(
            relevance=float(s.relevance[row]),
            lexical=round(float(s.lexical[row]), 6),
            fused=round(float(s.store[row]), 6),
            recency=round(float(s.recency[row]), 6),
            graph=round(float(s.graph[row]), 6),
            type_match=float(s.type_match[row]),
            cross_reference=round(float(s.cross_reference[row]), 6),
            noise_penalty=float(s.noise[row]),
            duplicate_penalty=float(s.duplicate[row]),
            semantic=self.cosine(row),
            weights=dict(s.weights),
            total=float(s.total[row]),
        )

    def item(self, row: int, reasons: tuple[str, ...] = ()) -> ScoredItem:
        """Row `row` as the `ScoredItem` a caller gets, with `reasons` ahead of the notes a
        later stage added."""
        return ScoredItem(
            candidate=self.candidates[row],
            breakdown=self.breakdown(row),
            reasons=(*reasons, *(self.notes[row] if self.notes else ())),
            merged_ids=self.merged_ids[row] if self.merged_ids else (),
            cross_validated=self.cross_validated[row] if self.cross_validated else False,
            changed=self.changed[row] if self.changed else None,
        )
