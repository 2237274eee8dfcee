"""Traces and the answers the tools return."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
)

from memory_orchestrator.models.memory import (
    Capabilities,
    Edge,
    Frozen,
    HealthCheck,
    MemoryType,
    Status,
    TimeRange,
    WriteAction,
)
from memory_orchestrator.models.pipeline import (
    Dropped,
    ExpansionDecision,
    QueryPlan,
    ScoreBreakdown,
    SourceRank,
    Strategy,
)
from memory_orchestrator.models.requests import WriteRequest


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
    # "changed on 2026-03-02: was ..." when an older current memory disagrees with this one;
    # "superseded by mem_x on ..." when history was asked for and this one was corrected.
    changed: str | None = None


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
    entities: tuple[str, ...] = ()  # what the memory was stored with (extracted if none given)
    dry_run: bool = False  # `action` is what would have been done; nothing was written
    supersedes: str | None = None  # set when updated: the memory this one corrected
    changed: str | None = None  # what the update changed: "100 -> 500 requests per minute"


class OutboxState(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"


class QueuedWrite(Frozen):
    """A write kept in the outbox until the store takes it (see `state/outbox.py`)."""

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


class ReplayReport(Frozen):
    trace_id: str
    new_trace_id: str
    identical: bool
    added: tuple[str, ...]
    removed: tuple[str, ...]
    moved: tuple[str, ...]
    before: tuple[str, ...]
    after: tuple[str, ...]
