"""Typed records shared by every part of the orchestrator.

Dependency direction: this module imports nothing from the project. Backends, pipeline
stages, the service and both faces (MCP, CLI) speak in these records.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

# Schema caps: a request above them is rejected before anything runs. A query below the cap
# but above `[limits] max_query_chars` (settings) is cut at a word boundary with a note.
MAX_QUERY_CHARS = 20_000
MAX_CONTENT_CHARS = 8_000
MAX_TOP_K = 100
MAX_IDS = 200
MAX_LIST_ITEMS = 50
MAX_LABEL_CHARS = 200

Label = Annotated[str, Field(min_length=1, max_length=MAX_LABEL_CHARS)]
MetaValue = str | int | float | bool | None


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MemoryType(StrEnum):
    """What kind of memory a record is; recency decay depends on it."""

    EPISODIC = "episodic"  # something that happened at a time: fades
    SEMANTIC = "semantic"  # a fact: does not fade
    PROCEDURAL = "procedural"  # how to do something: does not fade
    RESOURCE = "resource"  # a pointer to a document, file or link: fades slowly


class Memory(Frozen):
    """One memory as the store holds it."""

    id: str
    content: str
    type: MemoryType = MemoryType.SEMANTIC
    entities: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    created_at: datetime | None = None
    source: str | None = None
    importance: float | None = None
    confidence: float | None = None
    store: str = ""
    metadata: dict[str, MetaValue] = Field(default_factory=dict)


class NewMemory(Frozen):
    """A memory to write. Validated: bounded sizes, no empty content."""

    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    type: MemoryType = MemoryType.SEMANTIC
    entities: list[Label] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    tags: list[Label] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    created_at: Moment = None
    source: str | None = Field(default=None, max_length=MAX_LABEL_CHARS)
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    metadata: dict[str, MetaValue] = Field(default_factory=dict, max_length=MAX_LIST_ITEMS)

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("content must not be blank")
        return value

    @field_validator("metadata")
    @classmethod
    def _bounded_metadata(cls, values: dict[str, MetaValue]) -> dict[str, MetaValue]:
        for key, value in values.items():
            if len(key) > MAX_LABEL_CHARS:
                raise ValueError(f"metadata keys are at most {MAX_LABEL_CHARS} characters")
            if isinstance(value, str) and len(value) > MAX_CONTENT_CHARS:
                raise ValueError(f"metadata values are at most {MAX_CONTENT_CHARS} characters")
        return values

    @field_validator("entities", "tags")
    @classmethod
    def _no_commas(cls, values: list[str]) -> list[str]:
        # Several stores keep these as comma-separated lists.
        for value in values:
            if "," in value or not value.strip():
                raise ValueError(f"labels must be non-blank and contain no commas: {value!r}")
        return [v.strip() for v in values]


class Edge(Frozen):
    source_id: str
    target_id: str
    type: str
    weight: float = 1.0
    meta: dict[str, MetaValue] = Field(default_factory=dict)


class TimeRange(Frozen):
    start: datetime | None = None
    end: datetime | None = None

    @field_validator("start", "end")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else to_utc(value)

    @model_validator(mode="after")
    def _ordered(self) -> TimeRange:
        if self.start and self.end and self.start > self.end:
            raise ValueError("time_range.start must not be after time_range.end")
        return self

    def contains(self, when: datetime) -> bool:
        return (self.start is None or when >= self.start) and (self.end is None or when <= self.end)


class SearchFilters(Frozen):
    """Restricts retrieval. Empty lists mean no restriction."""

    entity_ids: list[Label] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    time_range: TimeRange | None = None
    memory_types: list[MemoryType] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)


class SearchHit(Frozen):
    """A backend's answer to a search: the memory, its rank (1-based) and native score."""

    memory: Memory
    rank: int
    score: float


class Neighbor(Frozen):
    """A memory reached from a seed along the graph."""

    memory: Memory
    seed_id: str
    via_id: str
    edge_type: str
    weight: float
    hops: int


class WriteAction(StrEnum):
    ADDED = "added"
    UPDATED = "updated"
    SKIPPED = "skipped"
    QUEUED = "queued"


class WriteOutcome(Frozen):
    """What a backend did with one write. When skipped, `existing_id` names the kept memory."""

    id: str
    action: WriteAction
    existing_id: str | None = None
    detail: str = ""


class Status(StrEnum):
    OK = "ok"
    DEGRADED = "degraded"
    ERROR = "error"


class HealthCheck(Frozen):
    name: str
    status: Status
    detail: str = ""
    latency_ms: float | None = None


class Capabilities(Frozen):
    """What a backend can do. The pipeline degrades (and notes it) when one is missing."""

    graph: bool = False
    timestamps: bool = False
    memory_types: bool = False
    bulk_write: bool = False
    link: bool = False
    time_filter: bool = False
    entity_filter: bool = False
    entity_index: bool = False
    soft_delete: bool = False
    listing: bool = False  # list_memories: pages of every live memory (`EnumerableBackend`)
    edge_types: tuple[str, ...] = ()


# ---------------------------------------------------------------- pipeline records


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


# ---------------------------------------------------------------- traces and outputs


class CandidateTrace(Frozen):
    id: str
    sources: tuple[SourceRank, ...]
    hops: int
    expanded_from: str | None
    breakdown: ScoreBreakdown | None = None
    final_rank: int | None = None


class Trace(BaseModel):
    """Everything a request did, kept so it can be explained and replayed."""

    model_config = ConfigDict(extra="forbid")

    trace_id: str
    tool: str
    created_at: datetime
    backend: str
    request: dict[str, Any]
    plan: QueryPlan | None = None
    candidates: list[CandidateTrace] = Field(default_factory=list)
    expansions: list[ExpansionDecision] = Field(default_factory=list)
    dropped: list[Dropped] = Field(default_factory=list)
    result_ids: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    backend_calls: int = 0
    cache_hits: int = 0
    error: str | None = None
    # work that only the stored trace needs (e.g. every candidate's record), done when the
    # trace is stored, behind the request, instead of on its path
    _deferred: list[Callable[[], None]] = PrivateAttr(default_factory=list)

    def defer(self, fill: Callable[[], None]) -> None:
        """Run `fill` (which completes this trace) before the trace is stored or read."""
        self._deferred.append(fill)

    def complete(self) -> Trace:
        """Run the deferred work, once; returns the trace."""
        while self._deferred:
            self._deferred.pop(0)()
        return self


class ContextItem(Frozen):
    memory_id: str
    summary: str
    score: float
    reasons: tuple[str, ...]
    linked_entities: tuple[str, ...]
    timestamp: datetime | None
    type: MemoryType
    store: str = ""
    cross_validated: bool = False
    merged_ids: tuple[str, ...] = ()
    hops: int = 0
    breakdown: ScoreBreakdown | None = None


class TraceSummary(Frozen):
    subqueries: tuple[str, ...]
    expanded_from: tuple[str, ...]
    dropped: tuple[Dropped, ...]
    notes: tuple[str, ...]


class SearchResult(Frozen):
    """The answer of `memory_search` and `memory_expand`."""

    query: str
    strategy: Strategy
    summary: str
    items: tuple[ContextItem, ...]
    trace_id: str
    passthrough: bool = False
    trace: TraceSummary


class ContextPackage(Frozen):
    """The answer of `memory_context`: ranked items plus a text block for the agent."""

    query: str
    task: str | None
    strategy: Strategy
    summary: str
    items: tuple[ContextItem, ...]
    linked_entities: tuple[str, ...]
    time_span: TimeRange | None
    context_block: str
    trace_id: str
    trace: TraceSummary


class WriteReport(Frozen):
    """The answer of `memory_write`: what was done and why."""

    id: str | None
    action: WriteAction
    reason: str
    duplicate_of: str | None = None
    similarity: float | None = None
    links: tuple[Edge, ...] = ()
    trace_id: str
    outbox_seq: int | None = None  # set when queued: the write's place in the outbox


class OutboxState(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"


class QueuedWrite(Frozen):
    """A write kept in the outbox until the store takes it (see `outbox.py`)."""

    seq: int
    request: WriteRequest
    content_hash: str
    state: OutboxState
    queued_at: datetime
    reason: str
    attempts: int = 0
    last_error: str | None = None
    delivered_at: datetime | None = None
    memory_id: str | None = None
    action: WriteAction | None = None


class OutboxReport(Frozen):
    """The answer of `orchestrator outbox flush|list`: what was replayed and what waits."""

    depth: int
    delivered: tuple[QueuedWrite, ...] = ()
    pending: tuple[QueuedWrite, ...] = ()
    note: str = ""


class HealthReport(Frozen):
    status: Status
    backend: str
    checks: tuple[HealthCheck, ...]
    capabilities: Capabilities


class Explanation(Frozen):
    """The answer of `memory_explain`: the stored trace and a readable account of it."""

    trace: Trace
    text: str


GroupBy = Literal["auto", "entity", "time", "none"]


# ---------------------------------------------------------------- requests (tool inputs)

Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)]
OptionalText = Annotated[str | None, Field(default=None, max_length=MAX_QUERY_CHARS)]


class Request(Frozen):
    @field_validator("query", check_fields=False)
    @classmethod
    def _query_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query must not be blank")
        return value


class SearchRequest(Request):
    query: Query
    task: OptionalText = None
    filters: SearchFilters | None = None
    top_k: int = Field(default=10, ge=1, le=MAX_TOP_K)
    expand: bool = False
    as_of: Moment = None
    passthrough: bool | None = None


class ResponseBudget(Frozen):
    max_items: int = Field(default=8, ge=1, le=MAX_TOP_K)
    max_chars: int = Field(default=3000, ge=200, le=100_000)


class ContextRequest(Request):
    query: Query
    task: OptionalText = None
    response_budget: ResponseBudget | None = None
    filters: SearchFilters | None = None
    expand: bool | None = None  # None: the planner decides
    as_of: Moment = None
    group_by: GroupBy | None = None


class ExpandRequest(Frozen):
    seed_ids: list[Label] = Field(default_factory=list, max_length=MAX_IDS)
    entities: list[Label] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    query: OptionalText = None
    hops: int = Field(default=1, ge=1, le=4)
    edge_types: list[Label] | None = Field(default=None, max_length=MAX_LIST_ITEMS)
    limit: int = Field(default=20, ge=1, le=MAX_TOP_K)

    @model_validator(mode="after")
    def _has_seeds(self) -> ExpandRequest:
        if not self.seed_ids and not self.entities:
            raise ValueError("give seed_ids or entities to expand from")
        return self


class WriteRequest(Frozen):
    memory: NewMemory
    on_duplicate: Literal["skip", "update"] | None = None
    link_related: bool = True
    dry_run: bool = False


class ExplainRequest(Frozen):
    trace_id: Annotated[str | None, Field(default=None, max_length=64)] = None
    query: OptionalText = None

    @model_validator(mode="after")
    def _one_of(self) -> ExplainRequest:
        if (self.trace_id is None) == (self.query is None):
            raise ValueError("give exactly one of trace_id or query")
        if self.query is not None and not self.query.strip():
            raise ValueError("query must not be blank")
        return self


class ReplayReport(Frozen):
    trace_id: str
    new_trace_id: str
    identical: bool
    added: tuple[str, ...]
    removed: tuple[str, ...]
    moved: tuple[str, ...]
    before: tuple[str, ...]
    after: tuple[str, ...]


def to_utc(moment: datetime) -> datetime:
    """Timezone-aware UTC; a naive datetime is taken to be UTC already. Raises ValueError
    (not OverflowError) for a moment that UTC cannot hold (year 1 or 9999 with an offset)."""
    if moment.tzinfo is UTC:  # the common case on the ranking hot path: nothing to do
        return moment
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{moment.isoformat()} is out of range once converted to UTC") from None


def _utc_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else to_utc(value)


Moment = Annotated[datetime | None, AfterValidator(_utc_or_none)]


def describe_errors(error: ValidationError) -> str:
    """Each bad field and what is wrong with it, on one line (no values, no URLs): the one
    wording both faces use for invalid input."""
    problems = []
    for item in error.errors(include_url=False, include_input=False, include_context=False):
        field = ".".join(str(part) for part in item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        problems.append(f"{field}: {message}" if field else message)
    return "; ".join(problems)
