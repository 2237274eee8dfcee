"""What the inspector (`faces/ui`) reads and does beyond the six tools.

    Inspection
    +-- Catalog     (catalog.py)      every live memory, newest first: pages with filters
    +-- TraceIndex  (trace_index.py)  one line per kept trace: lists, per-tool percentiles,
                                      the requests that returned a memory
    memory(id)   one memory with its edges, what it corrected or what corrected it, and
                 the requests that returned it
    forget(id)   forget it, or bring it back (`undo`): the orchestrator's own forget, the
                 same as `memory_forget` and `orchestrator forget` (`forgetting.py`)
    forgotten(id) the tombstone of a forgotten memory (its page offers undo)
    graph(...)   the neighbourhood of an entity or a memory, within the hop budget of
                 `memory_expand`, with the edge each node was reached by

It is built by the `Orchestrator` (`Orchestrator.inspection`) over the same guarded store,
trace recorder and settings as the tools, and never asks which store it has: it reads the
capabilities (listing, graph) and says what it cannot do.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import anyio

from memory_orchestrator.backends.base import EnumerableBackend, MemoryBackend
from memory_orchestrator.errors import STORE_ERRORS, OrchestratorError, describe
from memory_orchestrator.models import (
    ForgetRequest,
    Memory,
    Neighbor,
    SearchFilters,
    legacy_supersedes,
    render,
    supersedes,
    to_utc,
)
from memory_orchestrator.pipeline.conflicts import compare
from memory_orchestrator.pipeline.currency import corrects as corrects_of
from memory_orchestrator.pipeline.currency import marks_of
from memory_orchestrator.pipeline.planner import HOP_BUDGET
from memory_orchestrator.pipeline.retriever import SubQuery, retrieve
from memory_orchestrator.service.catalog import Catalog, MemoryFilter, MemoryPage, Quiet, Spawn
from memory_orchestrator.service.forgetting import ForgetPath
from memory_orchestrator.service.recorder import TraceRecorder
from memory_orchestrator.service.store_calls import StoreCalls
from memory_orchestrator.service.trace_index import ToolLine, TraceIndex, TraceLine
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.forgotten import Tombstone

__all__ = [
    "Forgotten",
    "Graph",
    "GraphEdge",
    "GraphNode",
    "Inspection",
    "Linked",
    "MemoryFilter",
    "MemoryPage",
    "MemoryView",
    "Quiet",
    "ToolLine",
    "TraceLine",
]

MAX_GRAPH_NODES = 100
_EDGES_SHOWN = 50
_WAS_CHARS = 160


@dataclass(frozen=True)
class Linked:
    """A memory joined to another by an edge of the store's graph."""

    memory: Memory
    type: str
    weight: float


@dataclass(frozen=True)
class MemoryView:
    """One memory as the inspector shows it."""

    memory: Memory
    edges: tuple[Linked, ...]
    corrects: Memory | None  # the memory this one corrected
    corrected_by: Memory | None  # the memory that corrected this one
    change: str | None  # "changed on DATE: was '...' (100 -> 500)"
    correction: str | None  # "changed on DATE: now '...'"
    requests: tuple[TraceLine, ...]  # the newest requests that returned it
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Forgotten:
    done: bool
    message: str
    trace_id: str | None = None


@dataclass(frozen=True)
class GraphNode:
    id: str  # a memory id, or "entity:<name>" for the entity asked about
    label: str
    memory: Memory | None
    hops: int  # 0 for the centre (the entity, or the seeds)


@dataclass(frozen=True)
class GraphEdge:
    source: str
    target: str
    type: str
    weight: float


@dataclass(frozen=True)
class Graph:
    centre: str  # what was asked: the entity name or the memory id
    hops: int
    nodes: tuple[GraphNode, ...]
    edges: tuple[GraphEdge, ...]
    notes: tuple[str, ...] = ()


def _day(moment: datetime | None) -> str:
    return to_utc(moment).strftime("%Y-%m-%d") if moment else "an unknown date"


def _cut(text: str) -> str:
    return text if len(text) <= _WAS_CHARS else text[: _WAS_CHARS - 1] + "…"


class Inspection:
    """The inspector's reads and its one write (forget, and its undo) over one store."""

    def __init__(
        self,
        store: MemoryBackend,
        lister: EnumerableBackend | None,
        recorder: TraceRecorder,
        calls: StoreCalls,
        settings: Settings,
        forgets: ForgetPath,
    ) -> None:
        self._store, self._recorder, self._calls, self._settings = store, recorder, calls, settings
        self._forgets = forgets
        # a server counts its requests in flight here; the listing and the reading of the
        # traces beside them give way to them
        self.quiet = Quiet()
        hidden = forgets.tombstones  # the catalog lists the store itself: it leaves them out
        self.catalog = Catalog(lister, store, calls, quiet=self.quiet, hidden=hidden)
        self.traces = TraceIndex(recorder, keep=settings.traces.keep)
        self._reading_traces = False  # the first reading of the traces runs beside requests
        self._traces_read = anyio.Event()  # set when that reading has ended

    def serve(self, spawn: Spawn | None) -> None:
        """A server starts (`spawn`: its task group's `start_soon`): list the store and read
        the kept traces beside the requests, which meanwhile answer from what is there. None:
        the server stops (pages wait for what they need again)."""
        self.catalog.spawn = spawn
        if spawn is not None:
            self.catalog.fill()
            self._read_traces(spawn)

    async def settled(self) -> None:
        """Wait until what `serve` started has ended: the store listed, the traces read."""
        await self.catalog.filled()
        await self._traces_read.wait()

    @property
    def traces_loading(self) -> bool:
        """True while the kept traces are first read beside the requests: the trace list,
        the per-tool figures and "the requests that returned it" hold those read so far."""
        return not self.traces.loaded

    async def refresh_traces(self) -> None:
        """Take the traces stored since the last look. Until they have all been read once, a
        server reads them beside the requests (this returns at once); without one, this
        reads them all."""
        spawn = self.catalog.spawn
        if spawn is not None and not self.traces.loaded:
            self._read_traces(spawn)
            return
        await anyio.to_thread.run_sync(self.traces.refresh)

    def _read_traces(self, spawn: Spawn) -> None:
        if self._reading_traces or self.traces.loaded:
            return
        self._reading_traces = True

        async def read() -> None:
            try:
                await anyio.to_thread.run_sync(self.traces.refresh, self.quiet.wait_blocking)
            finally:
                self._reading_traces = False
                self._traces_read.set()

        spawn(read)

    async def memories(self, wanted: MemoryFilter, offset: int, limit: int) -> MemoryPage:
        return await self.catalog.page(wanted, offset, limit)

    async def trace_lines(
        self, offset: int, limit: int, tool: str | None = None
    ) -> tuple[list[TraceLine], int]:
        await self.refresh_traces()
        return self.traces.lines(offset, limit, tool)

    async def tool_stats(self) -> list[ToolLine]:
        await self.refresh_traces()
        return self.traces.stats()

    async def memory(self, memory_id: str) -> MemoryView | None:
        """The memory `memory_id` as the store holds it now, or None when it has none."""
        read = self._store.get_memories
        found = await self._calls.strict(lambda: read([memory_id]), "reading the memory")
        if not found:
            return None
        memory = found[0]
        # the orchestrator's key, or a bare one of an older record, confirmed below
        replaced = supersedes(memory) or legacy_supersedes(memory)
        related = [i for i in (replaced, memory.superseded_by) if i]
        others: dict[str, Memory] = {}
        if related:
            got = await self._calls.strict(lambda: read(related), "reading its corrections")
            others = {m.id: m for m in got}
        replaced = corrects_of(memory, marks_of(list(others.values())))
        corrects = others.get(replaced) if replaced is not None else None
        corrected_by = others.get(memory.superseded_by or "")
        edges, notes = await self._edges(memory_id)
        await self.refresh_traces()
        return MemoryView(
            memory=memory,
            edges=edges,
            corrects=corrects,
            corrected_by=corrected_by,
            change=_change(memory, corrects),
            correction=_correction(memory, corrected_by),
            requests=tuple(self.traces.returning(memory_id)),
            notes=notes,
        )

    async def forgotten(self, memory_id: str) -> Tombstone | None:
        """The tombstone of `memory_id` when it is forgotten, else None."""
        found = await self._forgets.entries([memory_id])
        return found[0] if found else None

    async def forget(self, memory_id: str, reason: str, *, undo: bool = False) -> Forgotten:
        """Forget `memory_id` (or bring it back) as `memory_forget` does; a failure is the
        answer's message."""
        try:
            request = ForgetRequest(ids=[memory_id], reason=reason or None, undo=undo)
            report = await self._forgets.forget(request)
        except (OrchestratorError, ValueError, TimeoutError) as exc:
            return Forgotten(False, f"not done: {describe(exc)}")
        finally:
            self.traces.stale()
        done = bool(report.done)
        if done and undo:
            self.catalog.stale()
        return Forgotten(done, report.summary, report.trace_id)

    async def graph(
        self, *, entity: str | None = None, memory_id: str | None = None, hops: int | None = None
    ) -> Graph:
        """The neighbourhood of `entity` (the memories that name it, as `memory_expand` seeds
        it) or of `memory_id`, within `hops` (default the planner's `HOP_BUDGET`, at most 4 and
        `max_hops`, as for `memory_expand`)."""
        exp = self._settings.expansion
        wanted = hops if hops is not None else HOP_BUDGET
        budget = max(1, min(wanted, 4, exp.max_hops))
        notes = [f"hops cut to {budget} (max_hops {exp.max_hops})"] if budget < wanted else []
        if entity:
            seeds = await self._entity_seeds(entity, notes)
            hub = GraphNode(id=f"entity:{entity}", label=entity, memory=None, hops=0)
            nodes = [hub, *(GraphNode(m.id, _label(m), m, 1) for m in seeds)]
            edges = [GraphEdge(hub.id, m.id, "mentions", 1.0) for m in seeds]
            offset, centre = 1, entity
        else:
            assert memory_id is not None
            read = self._store.get_memories
            seeds = await self._calls.strict(lambda: read([memory_id]), "reading the memory")
            nodes = [GraphNode(m.id, _label(m), m, 0) for m in seeds]
            edges, offset, centre = [], 0, memory_id
            if not seeds:
                notes.append(f"no memory with id {memory_id!r}")
        found = await self._walk([m.id for m in seeds], budget, notes)
        known = {n.id for n in nodes}
        for n in found:
            if n.memory.id not in known:
                known.add(n.memory.id)
                nodes.append(GraphNode(n.memory.id, _label(n.memory), n.memory, n.hops + offset))
            edges.append(GraphEdge(n.via_id, n.memory.id, n.edge_type, n.weight))
        return Graph(centre, budget, tuple(nodes), tuple(_unique(edges)), tuple(notes))

    # ------------------------------------------------------------------ internals

    async def _edges(self, memory_id: str) -> tuple[tuple[Linked, ...], tuple[str, ...]]:
        if not self._store.capabilities.graph:
            return (), ("the store keeps no graph: no edges to show",)
        notes: list[str] = []
        found = await self._neighbors("edges", [memory_id], None, 1, _EDGES_SHOWN, notes)
        linked = tuple(Linked(n.memory, n.edge_type, n.weight) for n in found)
        return linked, tuple(notes)

    async def _neighbors(
        self,
        what: str,
        seeds: list[str],
        edge_types: list[str] | None,
        hops: int,
        limit: int,
        notes: list[str],
    ) -> list[Neighbor]:
        """One bounded `neighbors` call; a failure is a note, not an error page."""
        try:
            return await self._calls.strict(
                lambda: self._store.neighbors(seeds, edge_types, hops, limit), what
            )
        except STORE_ERRORS as exc:
            notes.append(f"{what} unavailable: {describe(exc)}")
            return []

    async def _entity_seeds(self, entity: str, notes: list[str]) -> list[Memory]:
        exp = self._settings.expansion
        got = await retrieve(
            self._store,
            [SubQuery(entity, filters=SearchFilters(entity_ids=[entity]))],
            per_query=exp.seeds,
            timeout_s=self._calls.timeout_s,
            max_chars=self._settings.limits.max_query_chars,
        )
        notes.extend(render(e) for e in got.events)  # the page's notes are text
        if not got.candidates:
            notes.append(f"no memory names {entity!r}")
        return [c.memory for c in got.candidates[: exp.seeds]]

    async def _walk(self, seeds: list[str], hops: int, notes: list[str]) -> list[Neighbor]:
        caps = self._store.capabilities
        if not seeds:
            return []
        if not caps.graph:
            notes.append("the store keeps no graph: only the memories themselves are shown")
            return []
        allowed = [
            t
            for t in self._settings.expansion.edge_types
            if not caps.edge_types or t in caps.edge_types
        ]
        found = await self._neighbors("the graph", seeds, allowed, hops, MAX_GRAPH_NODES, notes)
        return [n for n in found if n.hops <= hops]


def _label(memory: Memory) -> str:
    return memory.content


def _unique(edges: list[GraphEdge]) -> list[GraphEdge]:
    seen: set[tuple[str, str, str]] = set()
    out = []
    for e in edges:
        key = (min(e.source, e.target), max(e.source, e.target), e.type)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def _change(memory: Memory, corrects: Memory | None) -> str | None:
    if corrects is None:
        return None
    detail = compare(corrects.content, memory.content).detail
    note = f"changed on {_day(memory.created_at)}: was {_cut(corrects.content)!r}"
    return f"{note} ({detail})" if detail else note


def _correction(memory: Memory, corrected_by: Memory | None) -> str | None:
    if memory.superseded_by is None:
        return None
    when = _day(memory.superseded_at or (corrected_by.created_at if corrected_by else None))
    if corrected_by is None:
        return f"changed on {when}: corrected by {memory.superseded_by} (no longer in the store)"
    return f"changed on {when}: now {_cut(corrected_by.content)!r}"
