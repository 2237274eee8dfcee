"""The seven memory tools of the MCP face, written for the model that calls them.

Each tool validates its arguments (the SDK checks the typed signature, then the request model
checks the rules that span fields) and calls one service method. The read tools answer
compactly (`models.views`: the context block, or one line per item, and the trace id; the
whole record with `detail=true`); the others return the service's Pydantic record. Either way
clients get `structured_content` that matches the tool's output schema. A failure the caller
can act on becomes one tool error, worded by `tool_error`, the MCP face's one mapping from the
error tree (`errors.py`) to messages: a store that could not be searched at all is such an
error, never an empty answer.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar, overload

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from memory_orchestrator.errors import (
    BackendError,
    ForgetError,
    InvalidRequest,
    OrchestratorError,
    OutboxError,
    StoreUnreadable,
    TraceNotFound,
)
from memory_orchestrator.models import (
    MAX_CONTENT_CHARS,
    MAX_IDS,
    MAX_LABEL_CHARS,
    MAX_LIST_ITEMS,
    MAX_QUERY_CHARS,
    MAX_REASON_CHARS,
    MAX_TOP_K,
    ContextRequest,
    ExpandRequest,
    ExplainRequest,
    ForgetReport,
    ForgetRequest,
    GroupBy,
    HealthReport,
    MemoryType,
    MetaValue,
    NewMemory,
    ResponseBudget,
    SearchFilters,
    SearchRequest,
    WriteReport,
    WriteRequest,
    describe_errors,
)
from memory_orchestrator.models.views import (
    ContextAnswer,
    ExplanationAnswer,
    SearchAnswer,
    context_answer,
    explanation_answer,
    search_answer,
)
from memory_orchestrator.service import Orchestrator

__all__ = ["TOOLS", "TOOL_NAMES", "AppState", "ToolContext", "tool_error"]

ModelT = TypeVar("ModelT", bound=BaseModel)
ResultT = TypeVar("ResultT")


@dataclass(frozen=True)
class AppState:
    """What the server shares across requests: one orchestrator over one store."""

    orchestrator: Orchestrator


ToolContext = Context[AppState, Any]

# ---------------------------------------------------------------- argument types
# The limits come from `models`, so the published schema and the request models agree.

QueryText = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="What to recall, in natural language (a question or topic).",
    ),
]
TaskText = Annotated[
    str | None,
    Field(
        max_length=MAX_QUERY_CHARS,
        description="The task you are working on; shapes what counts as relevant.",
    ),
]
Filters = Annotated[
    SearchFilters | None,
    Field(description="Restrict to entities, a time range (ISO 8601) and memory types."),
]
AsOf = Annotated[
    datetime | None,
    Field(description="Answer as if now were this instant (ISO 8601); default: now."),
]
History = Annotated[
    bool,
    Field(description="Also return memories a later one corrected (each says by which)."),
]
Detail = Annotated[
    bool,
    Field(description="Also return each item's reasons and score breakdown, and the trace."),
]
LabelText = Annotated[str, Field(min_length=1, max_length=MAX_LABEL_CHARS)]
Unit = Annotated[float | None, Field(ge=0.0, le=1.0)]

# memory_write's
WriteContent = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_CONTENT_CHARS,
        description="One self-contained statement, readable without this conversation.",
    ),
]
WriteType = Annotated[
    MemoryType,
    Field(
        description="semantic: a fact or preference; episodic: something that happened; "
        "procedural: how to do something; resource: a pointer to a document or link."
    ),
]
WriteEntities = Annotated[
    tuple[LabelText, ...],
    Field(max_length=MAX_LIST_ITEMS, description="People, projects, things it is about."),
]
WriteTags = Annotated[
    tuple[LabelText, ...], Field(max_length=MAX_LIST_ITEMS, description="Free labels.")
]
WriteCreatedAt = Annotated[
    datetime | None, Field(description="When it happened or was learned (ISO 8601).")
]
WriteSource = Annotated[
    str | None,
    Field(max_length=MAX_LABEL_CHARS, description="Where it came from (session, doc, url)."),
]
WriteMetadata = Annotated[
    dict[str, MetaValue] | None,
    Field(
        max_length=MAX_LIST_ITEMS,
        description="Extra key/value fields to keep. Keys under 'orchestrator:', and"
        " 'supersedes' and 'superseded', are the orchestrator's own: refused.",
    ),
]
OnDuplicate = Annotated[
    Literal["skip", "update"] | None,
    Field(description="When a near-duplicate exists: skip (keep the old) or update it."),
]
LinkRelated = Annotated[
    bool, Field(description="Link it to existing memories that share its entities.")
]
DryRun = Annotated[bool, Field(description="Report what would happen without writing anything.")]


@overload
def tool_error(error: ValidationError) -> str: ...
@overload
def tool_error(error: BaseException) -> str | None: ...
def tool_error(error: BaseException) -> str | None:
    """The tool-error message for an error a caller can act on; None for anything else (a bug,
    which the SDK reports as such). The one place the MCP face turns errors into words."""
    if isinstance(error, ValidationError):
        return "invalid arguments: " + describe_errors(error)
    if isinstance(error, InvalidRequest):
        return f"invalid arguments: {error}"
    if isinstance(error, TraceNotFound):
        return f"unknown trace id: {error}; use a trace_id returned by a tool"
    if isinstance(error, StoreUnreadable):  # says itself what to do
        return f"memory store error: {error}"
    if isinstance(error, BackendError):
        hint = " (transient; retrying may succeed)" if error.transient else ""
        return f"memory store error: {error}{hint}"
    if isinstance(error, OutboxError):
        return f"write outbox error: {error}"
    if isinstance(error, ForgetError):
        return f"forgotten-memory list error: {error}"
    return None


def _validated(model: type[ModelT], values: Mapping[str, Any]) -> ModelT:
    """Build a request model, leaving out unset values so the model's defaults apply."""
    try:
        return model.model_validate({k: v for k, v in values.items() if v is not None})
    except ValidationError as exc:
        raise ToolError(tool_error(exc)) from exc


def _orchestrator(ctx: ToolContext) -> Orchestrator:
    return ctx.request_context.lifespan_context.orchestrator


async def _call(call: Awaitable[ResultT]) -> ResultT:
    """Await a service call, turning the failures a caller can act on into tool errors."""
    try:
        return await call
    except OrchestratorError as exc:
        message = tool_error(exc)
        if message is None:
            raise
        raise ToolError(message) from exc


def _answer(text: str, content: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=content)


# ---------------------------------------------------------------- tools


async def memory_context(
    query: QueryText,
    ctx: ToolContext,
    task: TaskText = None,
    response_budget: Annotated[
        ResponseBudget | None,
        Field(description="Size limits of the package: max_items and max_chars."),
    ] = None,
    filters: Filters = None,
    expand: Annotated[
        bool | None,
        Field(description="Follow graph links from the best hits; default: decided per query."),
    ] = None,
    as_of: AsOf = None,
    group_by: Annotated[
        GroupBy | None, Field(description="How to group the context block; default: auto.")
    ] = None,
    history: History = False,
    detail: Detail = False,
) -> Annotated[CallToolResult, ContextAnswer]:
    """Call this before answering anything that may depend on past sessions: earlier decisions,
    user preferences, people, projects or events. Returns `context_block`: the relevant
    memories, best first, one line each with its id and date; cite the ids you rely on. Say
    what you are doing in `task`; bound the size with `response_budget`. An empty block means
    nothing relevant is stored. If the store cannot be searched this is an error, not an empty
    block (a block whose first line is a warning comes from local indexes alone).
    """
    request = _validated(
        ContextRequest,
        {
            "query": query,
            "task": task,
            "response_budget": response_budget,
            "filters": filters,
            "expand": expand,
            "as_of": as_of,
            "group_by": group_by,
            "history": history,
        },
    )
    package = await _call(_orchestrator(ctx).context(request))
    return _answer(*context_answer(package, detail=detail))


async def memory_search(
    query: QueryText,
    ctx: ToolContext,
    task: TaskText = None,
    filters: Filters = None,
    top_k: Annotated[
        int, Field(ge=1, le=MAX_TOP_K, description="How many items to return at most.")
    ] = 10,
    expand: Annotated[
        bool, Field(description="Also follow graph links from the best hits (multi-hop).")
    ] = False,
    as_of: AsOf = None,
    passthrough: Annotated[
        bool | None,
        Field(description="Return the store's raw ranking unchanged (for comparison)."),
    ] = None,
    history: History = False,
    detail: Detail = False,
) -> Annotated[CallToolResult, SearchAnswer]:
    """Look up stored memories, ranked: one line each with its date, text and memory_id. Use
    it to check what is already known (e.g. before memory_write) or to find ids for
    memory_expand; to answer a question, prefer memory_context. Nothing found means nothing
    matches; a store that cannot be searched is an error (a warning first line: local indexes
    alone). memory_explain with the trace_id shows why these.
    """
    request = _validated(
        SearchRequest,
        {
            "query": query,
            "task": task,
            "filters": filters,
            "top_k": top_k,
            "expand": expand,
            "as_of": as_of,
            "passthrough": passthrough,
            "history": history,
        },
    )
    result = await _call(_orchestrator(ctx).search(request))
    return _answer(*search_answer(result, detail=detail))


async def memory_expand(
    ctx: ToolContext,
    seed_ids: Annotated[
        tuple[LabelText, ...],
        Field(max_length=MAX_IDS, description="Memory ids to start from (from earlier results)."),
    ] = (),
    entities: Annotated[
        tuple[LabelText, ...],
        Field(max_length=MAX_LIST_ITEMS, description="Entity names to start from."),
    ] = (),
    query: Annotated[
        str | None,
        Field(max_length=MAX_QUERY_CHARS, description="Rank what is reached by this question."),
    ] = None,
    hops: Annotated[int, Field(ge=1, le=4, description="How many links to follow outward.")] = 1,
    edge_types: Annotated[
        tuple[LabelText, ...] | None,
        Field(
            max_length=MAX_LIST_ITEMS,
            description="Only follow these link types (temporal, entity, causal, semantic, "
            "related, update); default: all allowed.",
        ),
    ] = None,
    limit: Annotated[int, Field(ge=1, le=MAX_TOP_K, description="Most items to return.")] = 20,
    detail: Detail = False,
) -> Annotated[CallToolResult, SearchAnswer]:
    """Follow the memory graph outward from memories you already have (`seed_ids`, e.g. ids
    from memory_search or memory_context) or from entity names, and return the connected
    memories (same entity, same period, causes, later updates) ranked by relevance to the
    optional `query`. Use it when a first lookup found part of an answer and you need the
    linked facts: who was involved, why it happened, what happened next. Give seed_ids or
    entities (at least one). Seeds that a broken store could not read are an error.
    """
    request = _validated(
        ExpandRequest,
        {
            "seed_ids": seed_ids,
            "entities": entities,
            "query": query,
            "hops": hops,
            "edge_types": edge_types,
            "limit": limit,
        },
    )
    result = await _call(_orchestrator(ctx).expand(request))
    return _answer(*search_answer(result, detail=detail))


async def memory_write(
    content: WriteContent,
    ctx: ToolContext,
    type: WriteType = MemoryType.SEMANTIC,
    entities: WriteEntities = (),
    tags: WriteTags = (),
    created_at: WriteCreatedAt = None,
    source: WriteSource = None,
    importance: Annotated[Unit, Field(description="0..1, how much it matters.")] = None,
    confidence: Annotated[Unit, Field(description="0..1, how sure you are it is true.")] = None,
    metadata: WriteMetadata = None,
    on_duplicate: OnDuplicate = None,
    link_related: LinkRelated = True,
    dry_run: DryRun = False,
) -> WriteReport:
    """Store a memory worth recalling in later sessions: a decision, a fact, a preference, an
    event, a procedure. Write one self-contained statement per call, name its entities, and
    give `created_at` for events. Near-duplicates are detected first (skipped, or updated with
    on_duplicate="update") and the new memory is linked to related ones. A correction (the
    same fact with another number, date, name, negation or opposite) is written as `updated`:
    it supersedes the old memory (`supersedes`, `changed` say which and what changed), which
    reads then leave out. Returns the action taken (added, updated, skipped, queued), the
    memory id and `duplicate_of` when skipped. Use dry_run=true to preview. Never store
    secrets or passing chatter.
    """
    memory = _validated(
        NewMemory,
        {
            "content": content,
            "type": type,
            "entities": entities,
            "tags": tags,
            "created_at": created_at,
            "source": source,
            "importance": importance,
            "confidence": confidence,
            "metadata": metadata,
        },
    )
    request = _validated(
        WriteRequest,
        {
            "memory": memory,
            "on_duplicate": on_duplicate,
            "link_related": link_related,
            "dry_run": dry_run,
        },
    )
    return await _call(_orchestrator(ctx).write(request))


async def memory_explain(
    ctx: ToolContext,
    trace_id: Annotated[
        str | None,
        Field(max_length=64, description="The trace_id returned by an earlier memory tool call."),
    ] = None,
    query: Annotated[
        str | None,
        Field(max_length=MAX_QUERY_CHARS, description="Run a fresh search and explain it."),
    ] = None,
) -> Annotated[CallToolResult, ExplanationAnswer]:
    """Explain how a result was produced: the query plan and subqueries, every candidate with
    its score breakdown, graph expansion decisions, and why items were dropped. Pass exactly
    one of `trace_id` (from an earlier memory_search, memory_context, memory_expand or
    memory_write result) or `query` (runs a fresh search and explains it). Use it when results
    look wrong or to justify why a memory was used.
    """
    request = _validated(ExplainRequest, {"trace_id": trace_id, "query": query})
    explanation = await _call(_orchestrator(ctx).explain(request))
    return _answer(*explanation_answer(explanation))


async def memory_health(ctx: ToolContext) -> HealthReport:
    """Check that the memory store is reachable and ready. Returns the overall status (ok,
    degraded or error), each check with its detail and latency, and what the store can do
    (graph links, timestamps, filters). Call it when another memory tool fails, or before
    relying on memory_expand.
    """
    return await _call(_orchestrator(ctx).health())


async def memory_forget(
    ids: Annotated[
        tuple[LabelText, ...],
        Field(
            min_length=1,
            max_length=MAX_IDS,
            description="The ids of the memories to forget (memory_id from earlier results).",
        ),
    ],
    ctx: ToolContext,
    reason: Annotated[
        str | None,
        Field(
            max_length=MAX_REASON_CHARS,
            description="Why, in a few words; kept with them. Needed to forget, not to undo.",
        ),
    ] = None,
    undo: Annotated[
        bool, Field(description="Bring these forgotten memories back instead.")
    ] = False,
) -> ForgetReport:
    """Forget memories that are wrong, must not be recalled, or were stored by mistake: no
    memory tool returns them any more. Nothing is erased: the store keeps them, and
    undo=true brings them back. Give the memory ids and a short reason. To replace an
    outdated fact, write the new one with memory_write instead (a correction supersedes the
    old one and keeps the history). Returns which ids were forgotten (`done`), were already
    (`unchanged`) or do not exist (`not_found`).
    """
    request = _validated(ForgetRequest, {"ids": ids, "reason": reason, "undo": undo})
    return await _call(_orchestrator(ctx).forget(request))


_READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
# destructive: what it forgets leaves every answer (undo brings it back); forgetting twice
# is forgetting once
_FORGET = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
TOOLS: tuple[tuple[Callable[..., Any], ToolAnnotations], ...] = (
    (memory_context, _READ),
    (memory_search, _READ),
    (memory_expand, _READ),
    (memory_write, _WRITE),
    (memory_explain, _READ),
    (memory_health, _READ),
    (memory_forget, _FORGET),
)
TOOL_NAMES = frozenset(tool.__name__ for tool, _ in TOOLS)
# The arguments of each tool that have a default: sent as null, they are taken as not given
# (models often send every argument, the unused ones as null).
OPTIONAL = {
    tool.__name__: frozenset(
        p.name for p in inspect.signature(tool).parameters.values() if p.default is not p.empty
    )
    for tool, _ in TOOLS
}


def without_nulls(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """`arguments` less the optional ones sent as null (a required one stays, to be refused)."""
    optional = OPTIONAL.get(tool, frozenset())
    return {k: v for k, v in arguments.items() if v is not None or k not in optional}
