"""Pipeline records: the plan, candidates, scores with their breakdown, drops."""

from __future__ import annotations

from enum import StrEnum

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

    raw_query: str
    canonical_query: str
    terms: tuple[str, ...]  # stemmed content terms, stop words removed
    keywords: tuple[str, ...]  # the same content words, unstemmed
    entities: tuple[str, ...]
    intent: Intent
    question_type: QuestionType
    time_window: TimeRange | None = None
    time_phrase: str | None = None
    subqueries: tuple[str, ...]
    strategy: Strategy
    hop_budget: int
    preferred_types: tuple[MemoryType, ...] = ()
    confidence: float
    notes: tuple[str, ...] = ()


# The query labels of the derived indexes' candidate lists (`derived/`), as a SourceRank names them.
LOCAL_SOURCE = "(local index)"
SEMANTIC_SOURCE = "(semantic index)"


class SourceRank(Frozen):
    """Where a candidate came from: which subquery (or expansion) and at what rank."""

    query: str
    rank: int
    score: float
    store: str = ""


class Candidate(Frozen):
    memory: Memory
    sources: tuple[SourceRank, ...] = ()
    fused_score: float = 0.0
    hops: int = 0
    expanded_from: str | None = None
    edge_type: str | None = None
    edge_weight: float = 1.0


class ScoreBreakdown(Frozen):
    """Each signal in [0, 1] and the weight it got. `total` is the weighted sum."""

    relevance: float
    lexical: float
    fused: float
    recency: float
    graph: float
    type_match: float
    cross_reference: float
    duplicate_penalty: float = 0.0
    noise_penalty: float = 0.0
    semantic: float | None = None  # cosine to the question, when semantic relevance is on
    weights: dict[str, float]
    total: float


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
    BELOW_FLOOR = "below_relevance_floor"
    FILTERED = "filtered"
    OVER_BUDGET = "over_budget"
    FANOUT_CAP = "fanout_cap"
    EDGE_TYPE = "edge_type_not_allowed"
    ALREADY_PRESENT = "already_present"
    SUPERSEDED = "superseded"


class Dropped(Frozen):
    id: str
    reason: DropReason
    stage: str
    detail: str = ""
    score: float | None = None


class ExpansionDecision(Frozen):
    seed_id: str
    neighbor_id: str
    edge_type: str
    hops: int
    accepted: bool
    reason: str
