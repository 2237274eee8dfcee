"""A ranking's rows: each candidate's score as plain numbers (`Scored`), made into the
validated `ScoredItem` only when a stage reads what only the model holds, or changes it.

Of the ~70 candidates of a request the stages after the ranking look at the best ~20 and
return ~10; the rest are made behind the request, when the trace records them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

from memory_orchestrator.models import Candidate, ScoreBreakdown, ScoredItem


class Scored:
    """One candidate's score as plain numbers, for the request's hot path: its relevance and
    total (rounded as its breakdown shows them) and its other signals. `item` makes its
    `ScoredItem`, the validated model with the whole breakdown, on first use: of the ~70
    candidates of a request, the later stages look at the best ~20; the rest are made
    behind the request, when the trace records them."""

    __slots__ = (
        "_breakdown",
        "_item",
        "_reasons",
        "_signals",
        "_weights",
        "candidate",
        "recency_reason",
        "relevance",
        "total",
        "xref_entity",
    )

    def __init__(
        self,
        candidate: Candidate,
        relevance: float,
        total: float,
        signals: tuple[float, float, float, float, float, float, float, float | None],
        weights: dict[str, float],
        reasons: tuple[str, ...],
        why: tuple[str | None, str | None] = (None, None),
    ) -> None:
        self.candidate, self.relevance, self.total = candidate, relevance, total
        self._signals, self._weights, self._reasons = signals, weights, reasons
        # what its reasons say of its age and of the entity it shares (`with_reasons`)
        self.recency_reason, self.xref_entity = why
        self._item: ScoredItem | None = None
        self._breakdown: ScoreBreakdown | None = None

    @property
    def id(self) -> str:
        return self.candidate.memory.id

    @property
    def item(self) -> ScoredItem:
        if self._item is None:
            self._item = self.with_reasons(self._reasons)
        return self._item

    def with_reasons(self, reasons: tuple[str, ...]) -> ScoredItem:
        """Its `ScoredItem` with these reasons (made anew; one breakdown for all it makes)."""
        return ScoredItem(candidate=self.candidate, breakdown=self._made(), reasons=reasons)

    def _made(self) -> ScoreBreakdown:
        if self._breakdown is not None:
            return self._breakdown
        lexical, store, recency, graph, type_match, xref, noise, semantic = self._signals
        # Plain construction, not model_construct: with pydantic-core's validator it is
        # the faster of the two (measured), and it checks what we computed.
        self._breakdown = ScoreBreakdown(
            relevance=self.relevance,
            lexical=round(lexical, 6),
            fused=round(store, 6),
            recency=round(recency, 6),
            graph=round(graph, 6),
            type_match=type_match,
            cross_reference=round(xref, 6),
            noise_penalty=noise,
            duplicate_penalty=0.0,
            semantic=semantic,
            weights=self._weights,
            total=self.total,
        )
        return self._breakdown

    # Read as the `ScoredItem` it makes, without making it (the deduper and `newest_first`
    # read most rows only so far); a copy with changes is a `ScoredItem`.

    @property
    def score(self) -> float:
        return self.total

    @property
    def breakdown(self) -> ScoreBreakdown:
        return self.item.breakdown

    @property
    def reasons(self) -> tuple[str, ...]:
        return self._reasons

    @property
    def merged_ids(self) -> tuple[str, ...]:
        return ()

    @property
    def cross_validated(self) -> bool:
        return False

    @property
    def changed(self) -> str | None:
        return None

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> ScoredItem:
        return self.item.model_copy(update=update)

    def reason_signals(self) -> tuple[float, float, float | None]:
        """Its breakdown's lexical, noise_penalty and semantic, as `item` would hold them."""
        lexical, *_, noise, semantic = self._signals
        return round(lexical, 6), noise, semantic


Ranked = ScoredItem | Scored  # what the stages after the ranking read: rows until changed


def made(item: Ranked) -> ScoredItem:
    """The `ScoredItem` a ranked entry stands for."""
    return item.item if isinstance(item, Scored) else item


class Items(Sequence[ScoredItem]):
    """`Scored` rows (or entries of the stages after the ranking) read as `ScoredItem`s,
    each made when first read."""

    def __init__(self, rows: Sequence[Ranked]) -> None:
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> ScoredItem: ...
    @overload
    def __getitem__(self, index: slice) -> list[ScoredItem]: ...
    def __getitem__(self, index: int | slice) -> ScoredItem | list[ScoredItem]:
        if isinstance(index, slice):
            return [made(row) for row in self._rows[index]]
        return made(self._rows[index])

    def __iter__(self) -> Iterator[ScoredItem]:
        return (made(row) for row in self._rows)
