"""The Orchestrator: the one object the faces (MCP, HTTP, CLI), the demo and the eval call.

A facade over small parts, each built here with its collaborators handed in:

    Orchestrator
    +-- ReadPath     (reading.py)    search, context, explain: one pipeline run per request
    +-- ExpandPath   (expanding.py)  memory_expand: the graph around seeds
    +-- WritePath    (writing.py)    limits, near-duplicates, the outbox behind the store
    +-- ForgetPath   (forgetting.py) forget, undo, purge; ForgettingStore: every read's seam
    +-- DerivedIndexes, KnownEntities (derived/)  caches derived from the store
    +-- TraceRecorder (recorder.py)  begins, finishes, logs and keeps every trace
    +-- StoreCalls   (store_calls.py) bounded store calls with a trace note on failure
    +-- Transfer     (transfer.py)   export, restore and import (`transfer`)

It never asks which backend it has: it reads the backend's capabilities, and where one is
missing it degrades and says so in the trace. The backend itself stays private: the faces
reach the store only through the methods below.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import anyio

from memory_orchestrator.backends import registry
from memory_orchestrator.backends.base import (
    MemoryBackend,
    dispatching,
    enumerable,
    versioned,
)
from memory_orchestrator.derived.embedders import Embedder, load_embedder
from memory_orchestrator.derived.entities import KnownEntities
from memory_orchestrator.derived.indexes import DerivedIndexes
from memory_orchestrator.errors import SemanticUnavailable, TraceNotFound
from memory_orchestrator.models import (
    Capabilities,
    ContextPackage,
    ContextRequest,
    Dropped,
    DropReason,
    Edge,
    ExpandRequest,
    ExplainRequest,
    Explanation,
    ForgetReport,
    ForgetRequest,
    GroupBy,
    HealthCheck,
    HealthReport,
    Memory,
    NewMemory,
    OutboxReport,
    QueuedWrite,
    ReplayReport,
    SearchHit,
    SearchRequest,
    SearchResult,
    Stage,
    Status,
    Strategy,
    ToolName,
    Trace,
    WriteAction,
    WriteOutcome,
    WriteReport,
    WriteRequest,
)
from memory_orchestrator.pipeline.explainer import explain_text
from memory_orchestrator.pipeline.packager import (
    ITEM_CHARS,
    Budget,
    limits,
    package,
    to_context_item,
)
from memory_orchestrator.pipeline.paraphrase import Meaning
from memory_orchestrator.service.expanding import ExpandPath
from memory_orchestrator.service.forgetting import ForgetPath, ForgettingStore, redact
from memory_orchestrator.service.health import service_checks
from memory_orchestrator.service.inspecting import Inspection
from memory_orchestrator.service.reading import ReadPath, ReadRequest
from memory_orchestrator.service.recorder import TraceRecorder
from memory_orchestrator.service.resilience import GuardedBackend, RetryPolicy, replay_on_schedule
from memory_orchestrator.service.store_calls import StoreCalls
from memory_orchestrator.service.transfer import Transfer
from memory_orchestrator.service.writing import WritePath
from memory_orchestrator.settings import Settings
from memory_orchestrator.state import shared as shared_state
from memory_orchestrator.state.forgotten import Tombstone, Tombstones
from memory_orchestrator.state.observability import Observer, StatsReport, compute_stats
from memory_orchestrator.state.outbox import Outbox
from memory_orchestrator.state.traces import TraceStore

__all__ = ["Orchestrator", "queued_writes", "request_stats", "store_names"]

_ORDER = {Status.OK: 0, Status.DEGRADED: 1, Status.ERROR: 2}


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Orchestrator:
    """Search, expand, context, write, explain, replay and health over one backend."""

    def __init__(
        self,
        backend: MemoryBackend,
        settings: Settings,
        *,
        traces: TraceStore | None = None,
        outbox: Outbox | None = None,
        clock: Callable[[], datetime] = _utcnow,
        observer: Observer | None = None,
        tombstones: Tombstones | None = None,
    ) -> None:
        # Every store call goes through the retry wrapper (transient errors only; a write is
        # checked by content hash before it is tried again), every answer through forgetting.py
        guarded = GuardedBackend(
            backend,
            RetryPolicy.tries(settings.retry.attempts),
            max_query_chars=settings.limits.max_query_chars,
        )
        store = ForgettingStore(guarded, tombstones or Tombstones(None))
        self._store: MemoryBackend = store
        self._backend = backend  # its optional abilities (`transfer`)
        self.settings = settings
        self._recorder = TraceRecorder(
            traces or TraceStore(None, keep=settings.traces.keep),
            settings,
            store,
            observer,
        )
        calls = StoreCalls(settings)
        entities = KnownEntities(store, calls, lambda: settings.cache_ttl_s)
        # The store's own listing feeds the derived indexes: a bulk read, outside the
        # per-call retries.
        lister = enumerable(backend)
        watch = versioned(backend)
        version = store.versioned(watch.data_version) if watch else None
        self._indexes = DerivedIndexes(lister, store, calls, settings, version=version)
        self._reads = ReadPath(
            store,
            settings,
            self._recorder,
            self._indexes,
            entities,
            clock,
            dispatching=dispatching(backend),
        )
        self._expands = ExpandPath(store, settings, self._recorder, calls, entities, clock)
        self._writes = WritePath(
            store,
            outbox or Outbox(None),
            self._recorder,
            settings,
            entities,
            on_written=self._indexes.stale,
            taken=self._indexes.take,
            meaning=Meaning(self._indexes.embedder, words=self._word_vectors),
        )
        self._forgets = ForgetPath(store, self._recorder, calls)
        self._calls = calls
        self._entities = entities
        self._observer = observer
        self._lister = lister
        self._inspection: Inspection | None = None
        self.created_store: Path | None = None  # a store file this process created empty

    def _word_vectors(self) -> Embedder | None:
        """Static word vectors for the write path's reading of swapped verbs: the semantic
        model when it is wordllama, else wordllama where the extra is installed; None when
        the semantic stage is off or wordllama cannot load."""
        model = self._indexes.embedder()
        if model is None or model.name.startswith("wordllama"):
            return model
        try:
            return load_embedder("wordllama")
        except SemanticUnavailable:
            return None

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        observer: Observer | None = None,
        clock: Callable[[], datetime] = _utcnow,
    ) -> Orchestrator:
        """The orchestrator over the store `settings.backend` names, with its trace store
        (in memory when `traces.enabled` is off) and its outbox. Raises UnknownBackend.

        A store file that did not exist is created empty: a log line says so and health
        notes it (a mistyped data dir must not pass for an empty store unnoticed)."""
        store_file = settings.store_file()
        fresh = store_file is not None and not store_file.exists()
        backend = registry.create(settings.backend, settings)
        made = cls(
            backend,
            settings,
            traces=shared_state.trace_store(settings),
            outbox=shared_state.outbox(settings),
            clock=clock,
            observer=observer,
            tombstones=shared_state.tombstones(settings),
        )
        if fresh and store_file is not None and store_file.exists():
            made.created_store = store_file
            if observer is not None:  # the servers' log
                observer.store_created(store_file)
        return made

    def reconfigure(self, settings: Settings) -> None:
        """Take `settings`' values from the next request on (every part reads the same
        settings object at each use). The store and its retry policy stay as they were built:
        for tuning the pipeline over one loaded store."""
        for name in type(self.settings).model_fields:
            setattr(self.settings, name, getattr(settings, name))

    async def warm_up(self, *, wait_s: float = 0.0) -> None:
        """Load the derived indexes (model, kept vectors, the store's listing) off the event
        loop, and the request log's logger alongside; a query meanwhile is served with what
        is ready (the indexes say they are warming before anything is awaited). With
        `wait_s`: then wait up to that long for the semantic index to embed its backlog."""
        async with anyio.create_task_group() as group:
            # first the store's entity names, which the first request's plan reads (before
            # the listing below keeps the store's threads busy); a request meanwhile waits
            # for this answer instead of asking again
            group.start_soon(self._entities.names, self._recorder.begin(ToolName.WARM_UP, {}))
            if self._observer is not None:
                prepare = self._observer.prepare
                group.start_soon(partial(anyio.to_thread.run_sync, prepare, abandon_on_cancel=True))
            await self._indexes.warm_up(wait_s=wait_s)

    async def settle(self, report: Callable[[int, int], None] | None = None) -> None:
        """The derived indexes up to date, and every memory embedded, waited for with no bound
        (`report(done, total)` told how far): an evaluation's answers are then the same on a
        busy machine. Raises `EmbeddingFailed` when the model failed on memories."""
        await self._indexes.settle(report)

    @asynccontextmanager
    async def warming(self) -> AsyncIterator[None]:
        """`warm_up` in the background while the block runs (the servers' lifespans: the
        server answers at once and loads behind); cancelled when the block ends."""
        async with anyio.create_task_group() as group:
            group.start_soon(self.warm_up)
            try:
                yield
            finally:
                group.cancel_scope.cancel()

    @property
    def store_name(self) -> str:
        """The name of the store this orchestrator fronts (`embedded`, `mnemon`, ...)."""
        return self._store.name

    @property
    def capabilities(self) -> Capabilities:
        """What the store can do; the pipeline degrades (and says so) where it cannot."""
        return self._store.capabilities

    # ------------------------------------------------------------------ retrieval tools

    async def search(self, request: SearchRequest) -> SearchResult:
        passthrough = (
            self.settings.passthrough if request.passthrough is None else request.passthrough
        )
        if passthrough:
            return await self._reads.passthrough(request)
        run = await self._reads.run(
            ReadRequest(
                tool=ToolName.SEARCH,
                request=request.model_dump(mode="json"),
                query=request.query,
                limit=request.top_k,
                task=request.task,
                filters=request.filters,
                expand=request.expand or self.settings.expansion.enabled,
                as_of=request.as_of,
                history=request.history,
            )
        )
        items = tuple(to_context_item(i, ITEM_CHARS) for i in run.items)
        summary = (
            f"{len(items)} of {run.candidate_count} candidates for {run.plan.canonical_query!r}"
        )
        return SearchResult(
            query=request.query,
            strategy=run.plan.strategy,
            summary=summary,
            items=items,
            trace_id=run.trace.trace_id,
            trace=self._recorder.summary(run.trace),
            warning=run.warning,
        )

    async def context(self, request: ContextRequest) -> ContextPackage:
        pack = self.settings.packaging
        max_items, max_chars = limits(request.response_budget, pack.max_items, pack.max_chars)
        expand_flag = request.expand
        if expand_flag is None and self.settings.expansion.enabled:
            expand_flag = True
        run = await self._reads.run(
            ReadRequest(
                tool=ToolName.CONTEXT,
                request=request.model_dump(mode="json"),
                query=request.query,
                limit=max_items,
                task=request.task,
                filters=request.filters,
                expand=expand_flag,
                as_of=request.as_of,
                history=request.history,
            ),
            finish=False,
        )
        group_by: GroupBy = request.group_by or pack.group_by
        packed = package(
            run.items,
            run.plan,
            Budget(max_items, max_chars, ITEM_CHARS, group_by),
            task=request.task,
            candidate_count=run.candidate_count,
            warning=run.warning,
        )
        run.trace.dropped.extend(
            Dropped(
                id=memory_id,
                reason=DropReason.OVER_BUDGET,
                stage=Stage.PACKAGER,
                detail=f"did not fit max_items={max_items} / max_chars={max_chars}",
            )
            for memory_id in packed.cut
        )
        run.trace.result_ids = [i.memory_id for i in packed.items]
        self._recorder.finish(run.trace)
        return ContextPackage(
            query=request.query,
            task=request.task,
            strategy=run.plan.strategy,
            summary=packed.summary,
            items=packed.items,
            linked_entities=packed.linked_entities,
            time_span=packed.time_span,
            context_block=packed.context_block,
            trace_id=run.trace.trace_id,
            trace=self._recorder.summary(run.trace),
            warning=run.warning,
        )

    async def expand(self, request: ExpandRequest) -> SearchResult:
        """Raises InvalidRequest over `MAX_IDS` seed ids."""
        query, ranked, seeds, trace = await self._expands.run(request)
        items = tuple(to_context_item(i, ITEM_CHARS) for i in ranked)
        return SearchResult(
            query=query,
            strategy=Strategy.EXPANDED,
            summary=f"{len(items)} memories around {seeds} seed(s)",
            items=items,
            trace_id=trace.trace_id,
            trace=self._recorder.summary(trace),
        )

    # ------------------------------------------------------------------ write, explain, health

    async def write(self, request: WriteRequest) -> WriteReport:
        """Raises InvalidRequest, before anything is written, when a limit is broken."""
        return await self._writes.write(request)

    async def forget(self, request: ForgetRequest) -> ForgetReport:
        """Forget memories, or bring them back (`undo`): the tool, the CLI, the inspector."""
        return await self._forgets.forget(request)

    async def purge(self, ids: Sequence[str]) -> ForgetReport:
        """Erase forgotten memories from the store for good (see `ForgetPath.purge`)."""
        return await self._forgets.purge(ids)

    async def forgotten(self, ids: Sequence[str] | None = None) -> list[Tombstone]:
        """The forgotten memories (of `ids`), oldest first, with why and when."""
        return await self._forgets.entries(ids)

    async def explain(self, request: ExplainRequest) -> Explanation:
        """Raises TraceNotFound for an unknown trace id."""
        if request.trace_id is not None:
            trace = self._stored(request.trace_id)
        else:
            assert request.query is not None
            run = await self._reads.run(
                ReadRequest(
                    tool=ToolName.EXPLAIN,
                    request=request.model_dump(mode="json"),
                    query=request.query,
                    limit=self.settings.retrieval.top_k,
                )
            )
            # as stored: its candidate records are made behind the request, and an
            # explanation shows them all (it printed "Candidates (0)" before they were made)
            stored = await anyio.to_thread.run_sync(self._recorder.get, run.trace.trace_id)
            trace = stored or run.trace.complete()  # (not stored: the trace store failed)
        return Explanation(trace=trace, text=explain_text(trace))

    async def replay(self, trace_id: str) -> ReplayReport:
        """Re-run a stored request and compare its results. Raises TraceNotFound."""
        old = self._stored(trace_id)
        new_id = await self._rerun(old)
        new = self._recorder.get(new_id)
        after = new.result_ids if new else []
        before = old.result_ids
        moved = [i for i in after if i in before and before.index(i) != after.index(i)]
        return ReplayReport(
            trace_id=trace_id,
            new_trace_id=new_id,
            identical=before == after,
            added=tuple(i for i in after if i not in before),
            removed=tuple(i for i in before if i not in after),
            moved=tuple(moved),
            before=tuple(before),
            after=tuple(after),
        )

    async def health(self, *, replay: bool = True) -> HealthReport:
        """Queued writes are replayed first unless `replay` is off (a GET changes nothing)."""
        writes = self._writes if self.settings.outbox.enabled else None
        checks = await service_checks(
            self._store, self._calls, self._indexes.health_check, writes, self._recorder, replay
        )
        if self.created_store is not None:
            detail = f"store created empty at {self.created_store} by this process"
            checks.append(HealthCheck(name="store_created", status=Status.OK, detail=detail))
        status = max((c.status for c in checks), key=_ORDER.__getitem__, default=Status.ERROR)
        return HealthReport(
            status=status,
            backend=self._store.name,
            checks=tuple(checks),
            capabilities=self._store.capabilities,
        )

    async def flush_outbox(self) -> OutboxReport:
        """Replay queued writes, oldest first, until one fails or the queue is empty."""
        return await self._writes.flush()

    async def keep_replaying(self) -> None:
        """Replay queued writes in the background on the outbox's schedule
        (`resilience.REPLAY_EVERY_S`, doubling while nothing gets through) until cancelled;
        returns at once when the outbox is off. The servers run it beside their requests."""
        if not self.settings.outbox.enabled:
            return

        async def replay() -> tuple[int, int]:
            delivered: list[QueuedWrite] = []
            waiting = await self._writes.replay(delivered)
            return len(delivered), waiting

        await replay_on_schedule(replay)

    def inspection(self) -> Inspection:
        """What the inspector (faces/ui) reads beyond the tools: memory pages with filters,
        one memory with its edges and corrections, forget, the graph, the trace index."""
        if self._inspection is None:
            self._inspection = Inspection(
                self._store, self._lister, self._recorder, self._calls, self.settings, self._forgets
            )
        return self._inspection

    def transfer(self) -> Transfer:
        """Export, restore, backup and import over this store (`service.transfer`)."""
        forgotten = self._forgets.tombstones
        return Transfer(self._backend, self._store, self._indexes.stale, self._writes, forgotten)

    def trace(self, trace_id: str) -> Trace | None:
        """A stored trace, or None; the memories forgotten since are left out of it."""
        trace = self._recorder.get(trace_id)
        return redact(trace, self._forgets.tombstones.ids()) if trace is not None else None

    def record_failure(
        self, tool: ToolName, request: dict[str, object], error: str, latency_ms: float
    ) -> Trace:
        """Keep a trace (and a log line) for a request that failed before it had one."""
        return self._recorder.failure(tool, dict(request), error, latency_ms)

    # ------------------------------------------------------------------ bulk and raw access

    async def ingest(
        self,
        memories: Sequence[NewMemory],
        links: Sequence[tuple[int, int, str, float]] = (),
    ) -> list[WriteOutcome]:
        """Load memories as they are (no duplicate check, no outbox; those without entities
        get the names their text carries, as a write does), in one batch where the store
        allows, then add `links` between them (by position; skipped without a graph, and
        between two memories the store merged into one). For demos and evaluations."""
        caps = self._store.capabilities
        trace = self._recorder.begin(ToolName.INGEST, {"memories": len(memories)})
        memories = await self._writes.with_entities(memories, trace)
        if caps.bulk_write:
            outcomes = await self._store.write_many(memories)
        else:
            outcomes = [await self._store.write(m) for m in memories]
        self._indexes.stale()
        ids = [
            o.existing_id if o.action is WriteAction.SKIPPED and o.existing_id else o.id
            for o in outcomes
        ]
        if links and caps.link and len(ids) == len(memories):
            for source, target, relation, weight in links:
                if ids[source] != ids[target]:
                    await self._store.link(ids[source], ids[target], relation, weight)
        return outcomes

    async def link(self, source_id: str, target_id: str, relation: str, weight: float) -> Edge:
        """Add a typed, weighted edge in the store (CapabilityMissing without a graph)."""
        return await self._store.link(source_id, target_id, relation, weight)

    async def store_search(self, query: str, top_k: int) -> list[SearchHit]:
        """The store's own search, untouched and untraced: the baseline the eval compares."""
        return await self._store.search(query, top_k)

    async def memories(self, ids: Sequence[str]) -> list[Memory]:
        """The live memories among `ids`, in the order asked (unknown ids left out)."""
        return await self._store.get_memories(ids)

    async def close(self) -> None:
        try:
            await self._indexes.close()  # no embedding left running when the process exits
            await self._store.close()
        finally:
            self._recorder.close()
            self._writes.close()
            self._forgets.tombstones.close()
            if self._observer is not None:  # log lines still waiting for the logger
                await anyio.to_thread.run_sync(self._observer.flush)

    # ------------------------------------------------------------------ internals

    def _stored(self, trace_id: str) -> Trace:
        trace = self.trace(trace_id)
        if trace is None:
            raise TraceNotFound(f"no trace with id {trace_id!r}")
        return trace

    async def _rerun(self, old: Trace) -> str:
        tool, request = old.tool, old.request
        if tool is ToolName.SEARCH:
            return (await self.search(SearchRequest.model_validate(request))).trace_id
        if tool is ToolName.CONTEXT:
            return (await self.context(ContextRequest.model_validate(request))).trace_id
        if tool is ToolName.EXPAND:
            return (await self.expand(ExpandRequest.model_validate(request))).trace_id
        if tool is ToolName.EXPLAIN:
            return (await self.explain(ExplainRequest.model_validate(request))).trace.trace_id
        raise TraceNotFound(f"trace {old.trace_id!r} is a {tool!r} request, which is not replayed")


# ---------------------------------------------------------------- reads that start no store


def store_names() -> list[str]:
    """The stores `backend = "..."` can name (built-in and registered)."""
    return registry.names()


def queued_writes(settings: Settings, *, delivered: bool = False) -> OutboxReport:
    """The outbox as it stands (oldest first; with `delivered`, replayed writes too), read
    without starting the store. Raises OutboxError when the outbox file cannot be read."""
    outbox = shared_state.outbox(settings)
    try:
        items = outbox.entries(delivered=delivered)
        depth = outbox.depth()
    finally:
        outbox.close()
    waiting = [i for i in items if i.memory_id is None]
    done = [i for i in items if i.memory_id is not None]
    return OutboxReport(
        depth=depth, delivered=tuple(done), pending=tuple(waiting), note=f"{depth} waiting"
    )


def request_stats(settings: Settings, since: datetime | None = None) -> StatsReport:
    """Per-tool request statistics from the trace store, read without starting the store.
    Raises TraceNotFound when there is no trace store."""
    path = settings.trace_path()
    shared = settings.traces.enabled and shared_state.shared(settings)
    if not shared and (not settings.traces.enabled or not path.is_file()):
        raise TraceNotFound(
            f"no trace store at {path} (traces.enabled = {settings.traces.enabled})"
        )
    store = shared_state.trace_store(settings)  # the shared table, or the file
    try:
        return compute_stats(store.since(since), since=since.isoformat() if since else None)
    finally:
        store.close()
