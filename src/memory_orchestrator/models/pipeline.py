"""Pipeline records: the plan, candidates, scores with their breakdown, drops."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from pydantic import Field, computed_field, model_validator

from memory_orchestrator.models.events import Stage, TraceEvent, legacy, render
from memory_orchestrator.models.memory import Frozen, Memory, MemoryType, TimeRange


class Intent(StrEnum):
    DIRECT = "direct"
    MULTI_HOP = "multi_hop"
    EPISODIC = "episodic"


class QuestionType(StrEnum):
    WHY = "why"
    WHEN = "when"
    WHO = "who"
    WHERE = "where"
    HOW = "how"
    WHAT = "what"
    OTHER = "other"


class Strategy(StrEnum):
    DIRECT = "direct"
    EXPANDED = "expanded"
    EPISODIC = "episodic"


class QueryPlan(Frozen):
    """The planner's reading of a request: what to ask the store, and how broadly."""

    raw_query: str = Field(description="The question as it was asked.")
    canonical_query: str = Field(description="Its content words in their base form, in order.")
    terms: tuple[str, ...] = Field(
        description=(
            "Its stemmed content terms (Snowball), stop words removed: what relevance matches."
        )
    )
    keywords: tuple[str, ...] = Field(description="The same content words, unstemmed.")
    entities: tuple[str, ...] = Field(
        description=(
            "The names found in it: the store's known entities, identifiers, capitalised names."
        )
    )
    intent: Intent = Field(
        description="direct, multi_hop (needs facts joined) or episodic (about a time)."
    )
    question_type: QuestionType = Field(
        description="why, when, who, where, how, what or other: read from its first words."
    )
    time_window: TimeRange | None = Field(
        None, description='The window a time phrase named ("last week", "in March 2023"), if any.'
    )
    time_phrase: str | None = Field(None, description="The words the time window was read from.")
    subqueries: tuple[str, ...] = Field(
        description=(
            "What was asked of the store: the question and its parts (one list each, fused by RRF)."
        )
    )
    strategy: Strategy = Field(
        description="direct, expanded (graph expansion from the best candidates) or episodic."
    )
    hop_budget: int = Field(description="How many hops graph expansion may walk from a seed.")
    preferred_types: tuple[MemoryType, ...] = Field(
        (), description="Memory types the question points at (they gain type_match)."
    )
    confidence: float = Field(
        description=(
            "How much the planner had to go on (terms, names, question word, time), 0 to 0.95."
        )
    )
    events: tuple[TraceEvent, ...] = Field(
        (), description="The planner's remarks (e.g. a name it read another way), as records."
    )

    @model_validator(mode="before")
    @classmethod
    def _older_notes(cls, data: Any) -> Any:
        """A plan stored before events kept its remarks as text: read back as events."""
        return events_from_notes(data)

    @computed_field(  # type: ignore[prop-decorator]
        description="The planner's remarks (e.g. a time phrase it could not place)."
    )
    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(render(e) for e in self.events)


def events_from_notes(data: Any) -> Any:
    """`data` with its `notes` (text a record kept before events existed) read as `events`,
    unless it has events: then the notes, rendered from them, are dropped."""
    if not isinstance(data, dict) or "notes" not in data:
        return data
    data = dict(data)
    notes = data.pop("notes")
    if "events" not in data and isinstance(notes, list | tuple):
        data["events"] = [legacy(n) if isinstance(n, str) else n for n in notes]
    return data


# The query labels of the derived indexes' candidate lists (`derived/`), as a SourceRank names them.
LOCAL_SOURCE = "(local index)"
SEMANTIC_SOURCE = "(semantic index)"


class SourceRank(Frozen):
    """Where a candidate came from: which subquery (or expansion) and at what rank."""

    query: str = Field(
        description=(
            'The subquery whose list found it, or the derived index\'s label ("(local index)", '
            '"(semantic index)").'
        )
    )
    rank: int = Field(description="Its rank in that list, from 1.")
    score: float = Field(description="The list's own score for it (the store's, or the index's).")
    store: str = Field("", description="The store that answered, where several are fused.")


class Source(NamedTuple):
    """Where a candidate came from, as the pipeline carries it (a plain tuple: ~100 are made
    a request); a trace shows it as a `SourceRank`."""

    query: str  # the subquery whose list found it, or a derived index's label
    rank: int  # its rank in that list, from 1
    score: float  # the list's own score for it
    store: str = ""  # the store that answered, where several are fused


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory the retrieval found (or a stage added), with every list's rank for it: a
    plain frozen record on the request's hot path (~70 a request), read by the ranking."""

    memory: Memory
    sources: tuple[Source, ...] = ()
    fused_score: float = 0.0
    hops: int = 0
    expanded_from: str | None = None
    edge_type: str | None = None
    edge_weight: float = 1.0


class ScoreBreakdown(Frozen):
    """Each signal in [0, 1] and the weight it got. `total` is the weighted sum."""

    relevance: float = Field(
        description=(
            "How well it answers the question, 0 to 1: its own words, the store's signal, the "
            "local index and the semantic similarity blended (see the score formula)."
        )
    )
    lexical: float = Field(
        description=(
            "The IDF-weighted share of the question's terms in its text and entities (and, at a "
            "discount, in its neighbours in time)."
        )
    )
    fused: float = Field(
        description=(
            "The store's signal: its fused rank across the lists that found it, blended with the "
            "store's own scores."
        )
    )
    recency: float = Field(
        description=(
            "1 inside an asked time window (fading outside it); else halving every half-life of "
            "its memory type; 0.5 without a time."
        )
    )
    graph: float = Field(
        description=(
            "1 for a memory the retrieval found; for one reached by expansion, the edge weight "
            "divided by 1 + its hops."
        )
    )
    type_match: float = Field(description="1 when its memory type is one the question points at.")
    cross_reference: float = Field(
        description=(
            "How much its entities recur among the other candidates (full at three), the "
            "question's names counted as far as they are trusted; 0 to 1."
        )
    )
    duplicate_penalty: float = Field(
        0.0,
        description=(
            "0 at dedup.soft_threshold similarity to a better-ranked item, rising to 1 at "
            "dedup.threshold (where the two merge)."
        ),
    )
    noise_penalty: float = Field(
        0.0,
        description=(
            "1 for a store hit that shares no term with the question; 0.5 for fewer than three "
            "content words; else 0."
        ),
    )
    semantic: float | None = Field(
        None,
        description="The cosine similarity of question and memory, when the semantic stage ran.",
    )
    weights: dict[str, float] = Field(
        description="The weight each signal got (`[ranking.weights]`)."
    )
    total: float = Field(description="The weighted sum: the score it was ranked by.")


class ScoredItem(Frozen):
    candidate: Candidate
    breakdown: ScoreBreakdown
    reasons: tuple[str, ...] = ()
    merged_ids: tuple[str, ...] = ()
    cross_validated: bool = False
    changed: str | None = None  # see `pipeline.currency`: what this memory replaced

    @property
    def id(self) -> str:
        return self.candidate.memory.id

    @property
    def score(self) -> float:
        return self.breakdown.total


class DropReason(StrEnum):
    DUPLICATE = "duplicate"
    BELOW_FLOOR = "below_relevance_floor"  # no longer given: kept for traces already stored
    FILTERED = "filtered"
    OVER_BUDGET = "over_budget"
    FANOUT_CAP = "fanout_cap"
    EDGE_TYPE = "edge_type_not_allowed"
    ALREADY_PRESENT = "already_present"
    SUPERSEDED = "superseded"


class Dropped(Frozen):
    id: str = Field(description="The memory left out.")
    reason: DropReason = Field(
        description=(
            "Why: duplicate, below_relevance_floor, filtered, over_budget, fanout_cap, "
            "edge_type_not_allowed, already_present or superseded."
        )
    )
    stage: Stage = Field(description="The pipeline stage that dropped it.")
    detail: str = Field(
        "", description="What exactly (e.g. the memory it duplicates and how alike they are)."
    )
    score: float | None = Field(
        None, description="Its score when it was dropped, where it had one."
    )


class ExpansionDecision(Frozen):
    seed_id: str = Field(description="The memory expansion walked from.")
    neighbor_id: str = Field(description="The memory the edge leads to.")
    edge_type: str = Field(description="The edge's type (temporal, entity, causal, semantic, ...).")
    hops: int = Field(description="How far from the seed.")
    accepted: bool = Field(description="Whether the neighbour was added to the candidates.")
    reason: str = Field(description="Why it was or was not added.")
