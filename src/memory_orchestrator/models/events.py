"""Trace events: what did not go as planned in a request, as typed records.

A stage that falls back, times out, skips a step or reads the question in a way worth saying
records a `TraceEvent`: the stage, the kind (`EventKind`), the memory ids it is about and a
few typed values. The text a trace shows (`Trace.notes`, the explain output, the context's
trace) is rendered from the events by one renderer (`render`, a template per kind), so that
code and tests read the kind and the values, never the sentence.

A trace stored before events existed kept its notes as text: each is read back as a `NOTE`
event holding that text (`legacy`).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from memory_orchestrator.models.memory import Frozen

__all__ = ["EventKind", "Stage", "TraceEvent", "Value", "event", "legacy", "render"]

Value = str | int | float | bool


class Stage(StrEnum):
    """The part of the orchestrator that recorded an event or dropped a candidate."""

    PLANNER = "planner"
    NAMES = "names"
    RETRIEVER = "retriever"
    INDEXES = "indexes"
    NEIGHBOURS = "neighbours"
    EXPANDER = "expander"
    CURRENCY = "currency"
    DEDUPER = "deduper"
    RERANKER = "reranker"
    PACKAGER = "packager"
    WRITER = "writer"
    OUTBOX = "outbox"
    STORE = "store"
    SERVICE = "service"


class EventKind(StrEnum):
    """What happened; `TEMPLATES` says how each reads."""

    # the planner, and the names it read another way
    CAPITALISATION_IGNORED = "capitalisation_ignored"
    ENTITY_KNOWN = "entity_known"
    NAME_READ_AS = "name_read_as"
    NO_CONTENT_TERMS = "no_content_terms"
    TIME_WINDOW = "time_window"
    EPISODIC_CUE = "episodic_cue"
    MULTI_HOP_ENTITIES = "multi_hop_entities"
    MULTI_HOP_CUE = "multi_hop_cue"
    MULTI_HOP_PARTS = "multi_hop_parts"
    NO_GRAPH_HOPS = "no_graph_hops"
    TASK_SUBQUERY = "task_subquery"
    # retrieval
    QUERY_CUT = "query_cut"
    SUBQUERY_CUT = "subquery_cut"
    FILTERED_AFTER = "filtered_after"
    SEARCH_TIMED_OUT = "search_timed_out"
    SEARCH_FAILED = "search_failed"
    SEARCH_LEFT_OUT = "search_left_out"
    STORE_UNREAD = "store_unread"
    STORE_PART_LEFT_OUT = "store_part_left_out"
    PASSTHROUGH = "passthrough"
    SUPERSEDED_LEFT_OUT = "superseded_left_out"
    # the derived indexes
    LOCAL_SYNC_FAILED = "local_sync_failed"
    LOCAL_INDEX_OFF = "local_index_off"
    LOCAL_INDEX_ADDED = "local_index_added"
    SEMANTIC_EMBEDDING = "semantic_embedding"
    SEMANTIC_OFF = "semantic_off"
    STILL_LOADING = "still_loading"
    # graph expansion and context neighbours
    NO_GRAPH = "no_graph"
    NO_EDGE_TYPE = "no_edge_type"
    EXPANSION_TIMED_OUT = "expansion_timed_out"
    EXPANSION_FAILED = "expansion_failed"
    NO_TEMPORAL_LINKS = "no_temporal_links"
    SEED_NOT_FOUND = "seed_not_found"
    MORE_DROPPED = "more_dropped"
    FORGOTTEN_HIDDEN = "forgotten_hidden"
    # an enrichment the store could not give
    UNAVAILABLE = "unavailable"
    # writes
    ENTITIES_EXTRACTED = "entities_extracted"
    WRITTEN = "written"
    NO_SUPERSEDED_MARK = "no_superseded_mark"
    SUPERSEDE_FAILED = "supersede_failed"
    CANNOT_LINK = "cannot_link"
    LINK_FAILED = "link_failed"
    RELATED_SEARCH_FAILED = "related_search_failed"
    QUEUED = "queued"
    IMPORTED = "imported"
    IMPORT_REASON = "import_reason"
    IMPORT_OTHER_REASONS = "import_other_reasons"
    REPLAYED = "replayed"
    # the store's guards (retries, answers checked)
    RETRY = "retry"
    GAVE_UP = "gave_up"
    ALREADY_WRITTEN = "already_written"
    MALFORMED = "malformed"
    NOT_A_LIST = "not_a_list"
    STORE_NOTE = "store_note"
    # a note of a trace stored before events existed
    NOTE = "note"


# How each kind reads: `str.format` over the event's values, `{id}` its first memory id.
TEMPLATES: dict[EventKind, str] = {
    EventKind.CAPITALISATION_IGNORED: "capitalisation ignored (title-case or all-caps query)",
    EventKind.ENTITY_KNOWN: "entity '{entity}' known to the store",
    EventKind.NAME_READ_AS: "name '{written}' read as '{name}' (known to the store)",
    EventKind.NO_CONTENT_TERMS: "no content terms: canonical query is the normalised text",
    EventKind.TIME_WINDOW: "time window from '{phrase}'",
    EventKind.EPISODIC_CUE: "episodic: '{cue}'",
    EventKind.MULTI_HOP_ENTITIES: "multi-hop: links {count} entities",
    EventKind.MULTI_HOP_CUE: "multi-hop: '{cue}'",
    EventKind.MULTI_HOP_PARTS: "multi-hop: {count}-part question",
    EventKind.NO_GRAPH_HOPS: "expand=False: no graph hops",
    EventKind.TASK_SUBQUERY: "task added as a low-priority subquery",
    EventKind.QUERY_CUT: (
        "{what} cut from {chars} to {kept} characters at a word boundary"
        " (limits.max_query_chars = {limit})"
    ),
    EventKind.SUBQUERY_CUT: "a subquery was cut to {chars} characters (max {limit})",
    EventKind.FILTERED_AFTER: "store cannot filter by {filter}; filtered after retrieval",
    EventKind.SEARCH_TIMED_OUT: "search {query!r} timed out after {timeout_s:g}s; partial results",
    EventKind.SEARCH_FAILED: "search {query!r} failed: {error}; partial results",
    EventKind.SEARCH_LEFT_OUT: (
        "search {query!r}: the store's list was not in {budget_s:g}s after the start and was"
        " left out (the local index's lists were in)"
    ),
    EventKind.STORE_UNREAD: (
        "Warning: the memory store could not be searched ({reason}); these memories come"
        " from the orchestrator's own indexes and may be incomplete."
    ),
    EventKind.STORE_PART_LEFT_OUT: (
        "Warning: part of the memory could not be searched ({reason}); these memories come"
        " from the rest of it and may be incomplete."
    ),
    EventKind.PASSTHROUGH: "passthrough: the store's own results, unchanged",
    EventKind.SUPERSEDED_LEFT_OUT: "{count} superseded memory(ies) left out",
    EventKind.LOCAL_SYNC_FAILED: "local index sync failed: {error}",
    EventKind.LOCAL_INDEX_OFF: "local index off: the store cannot list its memories",
    EventKind.LOCAL_INDEX_ADDED: "local index: {count} memories added",
    EventKind.SEMANTIC_EMBEDDING: (
        "semantic index: {count} memories still being embedded (in the background)"
    ),
    EventKind.SEMANTIC_OFF: "semantic relevance off: {error}",
    EventKind.STILL_LOADING: (
        "{what} still loading in the background (since the server started): this answer is"
        " without {them}"
    ),
    EventKind.NO_GRAPH: "store has no graph; expansion skipped",
    EventKind.NO_EDGE_TYPE: "no allowed edge type is supported by the store; expansion skipped",
    EventKind.EXPANSION_TIMED_OUT: "expansion timed out after {timeout_s:g}s; skipped",
    EventKind.EXPANSION_FAILED: "expansion failed: {error}; skipped",
    EventKind.NO_TEMPORAL_LINKS: "store has no temporal links; context neighbours skipped",
    EventKind.SEED_NOT_FOUND: "seed {id} not found",
    EventKind.MORE_DROPPED: "{count} more dropped; see memory_explain",
    EventKind.FORGOTTEN_HIDDEN: "{count} forgotten {memories} left out of this record",
    EventKind.UNAVAILABLE: "{what} unavailable: {error}{then}",
    EventKind.ENTITIES_EXTRACTED: "entities extracted: {entities}",
    EventKind.WRITTEN: "{reason}",
    EventKind.NO_SUPERSEDED_MARK: (
        "the store keeps no superseded mark; {id} is linked 'supersedes' only (a store that"
        " reads such links, as Mnemon does, flags it so)"
    ),
    EventKind.SUPERSEDE_FAILED: "marking {id} superseded failed: {error}",
    EventKind.CANNOT_LINK: "store cannot link; {relation} link to {id} not made",
    EventKind.LINK_FAILED: "link to {id} failed: {error}",
    EventKind.RELATED_SEARCH_FAILED: "related-memory search failed: {error}; no entity links",
    EventKind.QUEUED: (
        "queued as outbox #{seq}: {why}; it is written, in order, once the store is back"
        " (next write or health call, or `orchestrator outbox flush`)"
    ),
    EventKind.REPLAYED: "replayed from the outbox (#{seq}, queued {queued_at})",
    EventKind.IMPORTED: "{done} of {records} records: {counts}",
    EventKind.IMPORT_REASON: "{action} {count}: {why}",
    EventKind.IMPORT_OTHER_REASONS: "{action}: {count} other reasons (--json)",
    EventKind.RETRY: "{what}: transient error ({error}); retry {attempt} in {pause_s:.3f}s",
    EventKind.GAVE_UP: "{what}: gave up after {tries} tries: {error}",
    EventKind.ALREADY_WRITTEN: "write: the failed try had stored {id}; not written again",
    EventKind.MALFORMED: "{what}: ignored {count} malformed record(s) in the store's answer",
    EventKind.NOT_A_LIST: "{what}: the store answered with {kind}, not a list; {then}",
    EventKind.STORE_NOTE: "{text}",
    EventKind.NOTE: "{text}",
}


class TraceEvent(Frozen):
    """One thing that did not go as planned (or that the planner read), with its numbers."""

    stage: Stage = Field(description="The part of the orchestrator that recorded it.")
    kind: EventKind = Field(description="What happened (one name per kind of event).")
    ids: tuple[str, ...] = Field((), description="The memories it is about, if any.")
    values: dict[str, Value] = Field(
        default_factory=dict,
        description="Its numbers and names (a timeout in seconds, a count, the query, the error).",
    )

    @property
    def text(self) -> str:
        """The event as a trace note reads it (`render`)."""
        return render(self)


def event(stage: Stage, kind: EventKind, /, *ids: str, **values: Value) -> TraceEvent:
    """A `TraceEvent` (the shorthand every stage records with)."""
    return TraceEvent(stage=stage, kind=kind, ids=ids, values=values)


def render(ev: TraceEvent) -> str:
    """The event's text: its kind's template filled with its values (`{id}`: its first id,
    `{ids}`: all of them)."""
    first = ev.ids[0] if ev.ids else ""
    return TEMPLATES[ev.kind].format(id=first, ids=", ".join(ev.ids), **ev.values)


def legacy(text: str) -> TraceEvent:
    """A note of a trace stored before events existed, kept as it was written."""
    return event(Stage.SERVICE, EventKind.NOTE, text=text)
