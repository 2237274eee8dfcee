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
    computed_field,
    field_validator,
    model_validator,
)

from memory_orchestrator.models.events import TraceEvent, render
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
    events_from_notes,
)
from memory_orchestrator.models.requests import WriteRequest


class CandidateTrace(Frozen):
    """One candidate a request considered, kept or not, with where it came from."""

    id: str = Field(description="The memory's id in the store.")
    sources: tuple[SourceRank, ...] = Field(
        description="Each subquery or index that found it, with its rank and score there."
    )
    hops: int = Field(description="Graph steps from a seed: 0 when a search found it directly.")
    expanded_from: str | None = Field(
        description="The memory it was reached from by graph expansion; null when searched."
    )
    breakdown: ScoreBreakdown | None = Field(
        default=None, description="Its score part by part; null when it was not scored."
    )
    final_rank: int | None = Field(
        default=None, description="Its place in the answer (1 = first); null when dropped."
    )


class ToolName(StrEnum):
    """What made a trace: a tool (`memory_<tool>` over MCP, the CLI command of that name), or
    the service's own work (`ingest`, `warm-up`)."""

    SEARCH = "search"
    CONTEXT = "context"
    EXPAND = "expand"
    WRITE = "write"
    EXPLAIN = "explain"
    FORGET = "forget"
    HEALTH = "health"
    INGEST = "ingest"
    WARM_UP = "warm-up"
    IMPORT = "import"
    UNKNOWN = "unknown"  # a tool name a client made up (its failure is still kept)

    @classmethod
    def named(cls, name: str) -> ToolName:
        """The tool called `name` (with or without `memory_`); UNKNOWN for any other name."""
        try:
            return cls(name.removeprefix("memory_"))
        except ValueError:
            return cls.UNKNOWN


REPLAYED = frozenset({ToolName.SEARCH, ToolName.CONTEXT, ToolName.EXPAND, ToolName.EXPLAIN})
"""The requests `replay` can run again (reads, answered the same from the same store)."""


class Trace(BaseModel):
    """Everything a request did, kept so it can be explained and replayed."""

    model_config = ConfigDict(extra="forbid")

    trace_id: str = Field(description="The trace's id: pass it to memory_explain.")
    tool: ToolName = Field(description="What made it: search, context, expand, write, forget...")
    created_at: datetime = Field(description="When the request came (UTC).")
    backend: str = Field(description="The store that answered (embedded, mnemon, postgres...).")
    request: dict[str, Any] = Field(description="The request's arguments, as they were sent.")
    plan: QueryPlan | None = Field(
        default=None, description="How the request was read and what was asked of the store."
    )
    candidates: list[CandidateTrace] = Field(
        default_factory=list, description="Every memory considered, with its sources and scores."
    )
    expansions: list[ExpansionDecision] = Field(
        default_factory=list, description="Each graph step taken or refused, with the reason."
    )
    dropped: list[Dropped] = Field(
        default_factory=list, description="The candidates left out, each with why and where."
    )
    result_ids: list[str] = Field(
        default_factory=list, description="The ids returned, in the order of the answer."
    )
    events: list[TraceEvent] = Field(
        default_factory=list,
        description="What did not go as planned (a store fallback, a timeout, a missing"
        " ability), each as a typed record; `notes` reads them.",
    )
    timings_ms: dict[str, float] = Field(
        default_factory=dict, description="Milliseconds per stage, and the total."
    )
    backend_calls: int = Field(default=0, description="How many calls were made to the store.")
    cache_hits: int = Field(
        default=0, description="Store calls saved by a cache (the store's list of names)."
    )
    error: str | None = Field(
        default=None, description="Why the request failed; null when it succeeded."
    )
    # work that only the stored trace needs (e.g. every candidate's record), done when the
    # trace is stored, behind the request, instead of on its path
    _deferred: list[Callable[[], None]] = PrivateAttr(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _older_notes(cls, data: Any) -> Any:
        """A trace stored before events kept its notes as text: read back as events."""
        return events_from_notes(data)

    @field_validator("tool", mode="before")
    @classmethod
    def _any_tool(cls, value: Any) -> Any:
        """A stored trace made by a tool not named here reads back as `unknown`."""
        return ToolName.named(value) if isinstance(value, str) else value

    @computed_field(  # type: ignore[prop-decorator]
        description="What did not go as planned: a store fallback, a timeout, a missing ability."
    )
    @property
    def notes(self) -> tuple[str, ...]:
        """The events as text (`models.events.render`)."""
        return tuple(render(e) for e in self.events)

    def add(self, *events: TraceEvent) -> None:
        """Record `events`."""
        self.events.extend(events)

    def defer(self, fill: Callable[[], None]) -> None:
        """Run `fill` (which completes this trace) before the trace is stored or read."""
        self._deferred.append(fill)

    def complete(self) -> Trace:
        """Run the deferred work, once; returns the trace."""
        while self._deferred:
            self._deferred.pop(0)()
        return self


class ContextItem(Frozen):
    """One memory in an answer, with its score and why it was chosen."""

    memory_id: str = Field(description="The memory's id in the store: cite it, or expand from it.")
    summary: str = Field(description="The memory's text (cut to the budget when it is long).")
    score: float = Field(description="The final score (higher is better): the breakdown's total.")
    reasons: tuple[str, ...] = Field(description="Why it was chosen, in a few words each.")
    linked_entities: tuple[str, ...] = Field(description="The names (people, things) it mentions.")
    timestamp: datetime | None = Field(
        description="When it happened or was written (UTC); null when the store keeps no time."
    )
    type: MemoryType = Field(description="The kind of memory: episodic, semantic, procedural...")
    store: str = Field(default="", description="The store it came from (with several stores).")
    cross_validated: bool = Field(
        default=False, description="True when another memory or store says the same."
    )
    merged_ids: tuple[str, ...] = Field(
        default=(), description="Near-duplicates folded into this item (their ids)."
    )
    hops: int = Field(
        default=0, description="Graph steps from a searched memory: 0 when a search found it."
    )
    breakdown: ScoreBreakdown | None = Field(
        default=None, description="The score part by part (relevance, recency, graph...)."
    )
    changed: str | None = Field(
        default=None,
        description=(
            "What changed: 'changed on DATE: was ...' when this memory replaced an older one;"
            " 'superseded by ID on DATE' when history was asked for and a later one corrected it."
        ),
    )


class TraceSummary(Frozen):
    """The short account of a request that comes with its answer (memory_explain: the whole)."""

    subqueries: tuple[str, ...] = Field(description="What was asked of the store.")
    expanded_from: tuple[str, ...] = Field(
        description="The memories the graph expansion started from."
    )
    dropped: tuple[Dropped, ...] = Field(
        description="Candidates left out of the answer, each with the reason."
    )
    notes: tuple[str, ...] = Field(
        description="What did not go as planned (a fallback, a timeout, a missing ability)."
    )


class SearchResult(Frozen):
    """The answer of `memory_search` and `memory_expand`."""

    query: str = Field(description="The query as it was asked.")
    strategy: Strategy = Field(description="How it was answered: direct, expanded or episodic.")
    summary: str = Field(description="One line on what was found.")
    items: tuple[ContextItem, ...] = Field(description="The memories found, best first.")
    trace_id: str = Field(description="The request's trace: memory_explain shows why these.")
    passthrough: bool = Field(
        default=False, description="True when the store's own ranking was returned as it was."
    )
    trace: TraceSummary = Field(description="A short account of how the answer was made.")
    warning: str | None = Field(
        default=None,
        description="Set when the store itself could not be searched: the items come from"
        " the orchestrator's own indexes alone and may be incomplete.",
    )


class ContextPackage(Frozen):
    """The answer of `memory_context`: ranked items plus a text block for the agent."""

    query: str = Field(description="The question as it was asked.")
    task: str | None = Field(description="The task it was asked for, when one was given.")
    strategy: Strategy = Field(description="How it was answered: direct, expanded or episodic.")
    summary: str = Field(description="One line on what was found.")
    items: tuple[ContextItem, ...] = Field(description="The memories chosen, best first.")
    linked_entities: tuple[str, ...] = Field(
        description="The names the chosen memories mention, most mentioned first."
    )
    time_span: TimeRange | None = Field(
        description="From the oldest to the newest chosen memory; null without times."
    )
    context_block: str = Field(
        description="The memories as one text to put in the prompt, each with its id to cite."
    )
    trace_id: str = Field(description="The request's trace: memory_explain shows why these.")
    trace: TraceSummary = Field(description="A short account of how the package was made.")
    warning: str | None = Field(
        default=None,
        description="Set when the store itself could not be searched (also the block's first"
        " line): the items come from the orchestrator's own indexes alone.",
    )


class WriteReport(Frozen):
    """The answer of `memory_write`: what was done and why."""

    id: str | None = Field(
        description="The stored memory's id (the kept one when skipped); null when queued."
    )
    action: WriteAction = Field(
        description="What was done: added, updated (it corrects an older one), skipped, queued."
    )
    reason: str = Field(description="Why, in a sentence.")
    duplicate_of: str | None = Field(
        default=None, description="The memory it repeats, when it was found to be a duplicate."
    )
    similarity: float | None = Field(
        default=None, description="How close it came to that memory (0 to 1)."
    )
    links: tuple[Edge, ...] = Field(default=(), description="The edges made to related memories.")
    trace_id: str = Field(description="The write's trace: memory_explain shows how it was decided.")
    outbox_seq: int | None = Field(
        default=None,
        description="Set when queued: its place in the outbox, delivered once the store is back.",
    )
    entities: tuple[str, ...] = Field(
        default=(), description="The names it was stored with (found in its text if none given)."
    )
    dry_run: bool = Field(
        default=False, description="True: `action` is what would have been done; nothing written."
    )
    supersedes: str | None = Field(
        default=None, description="Set when updated: the older memory this one corrected."
    )
    changed: str | None = Field(
        default=None, description="What the update changed, e.g. '100 -> 500 requests per minute'."
    )


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
    """The answer of `memory_health`: each check, and what the store can do."""

    status: Status = Field(description="The worst of the checks: ok, degraded or error.")
    backend: str = Field(description="The store behind the orchestrator.")
    checks: tuple[HealthCheck, ...] = Field(
        description="Each check (the store's file, its index, retrieval, the outbox...)."
    )
    capabilities: Capabilities = Field(
        description="What the store can do; the pipeline works around what it cannot."
    )


class ForgetAction(StrEnum):
    FORGET = "forget"
    UNDO = "undo"
    PURGE = "purge"


class ForgetReport(Frozen):
    """The answer of `memory_forget` (and `orchestrator forget`): which ids changed, by id."""

    action: ForgetAction = Field(description="forget, undo (bring back) or purge (erase).")
    done: tuple[str, ...] = Field(
        description="The ids this call forgot (undo: brought back; purge: erased)."
    )
    unchanged: tuple[str, ...] = Field(
        default=(), description="Already so: forgotten before (forget), not forgotten (undo)."
    )
    not_found: tuple[str, ...] = Field(default=(), description="No memory with this id.")
    refused: tuple[str, ...] = Field(
        default=(), description="Not done; `summary` says why (e.g. purged: cannot come back)."
    )
    summary: str = Field(description="One line on what was done.")
    trace_id: str = Field(description="The request's trace.")


class Explanation(Frozen):
    """The answer of `memory_explain`: the stored trace and a readable account of it."""

    trace: Trace = Field(description="The stored trace, whole.")
    text: str = Field(description="The same, told in plain words.")


class ReplayReport(Frozen):
    trace_id: str
    new_trace_id: str
    identical: bool
    added: tuple[str, ...]
    removed: tuple[str, ...]
    moved: tuple[str, ...]
    before: tuple[str, ...]
    after: tuple[str, ...]
