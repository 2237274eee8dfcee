"""The derived indexes of one store, kept in step with it, and their candidate lists.

`DerivedIndexes` owns the local index (on by default) and the semantic index (when
`[semantic]` is on and its model loads; its vectors kept under the data dir). Before a query it
pulls what the store added since the last pull (`refresh`; the semantic index embeds it in the
background, and the query waits for that up to `INDEX_WAIT_S`); for a query it gives
their candidate lists, read back from the store so that a memory deleted or changed there never
comes back stale (`candidate_lists`; what was read is kept while the store says nothing changed:
`readback`). An evaluation waits, with no bound, until everything is embedded (`settle`), so
that its answers do not depend on the machine's speed.

Loaded lazily by the first query, or ahead of it by `warm_up`, which the servers start in the
background as they come up: the model, the kept vectors and the store's whole listing then load
off the event loop, and a query that comes meanwhile is served with the indexes that are ready
(its trace says which were still loading) instead of waiting for them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from concurrent.futures import wait as wait_for_futures
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from memory_orchestrator.backends.base import EnumerableBackend, MemoryBackend
from memory_orchestrator.derived.embedders import Embedder, load_embedder
from memory_orchestrator.derived.feed import Feed
from memory_orchestrator.derived.local_index import LocalIndex
from memory_orchestrator.derived.readback import ReadBack
from memory_orchestrator.derived.semantic import SemanticIndex
from memory_orchestrator.derived.vectors import VectorFile, vector_path
from memory_orchestrator.errors import (
    EmbeddingFailed,
    OrchestratorError,
    SemanticUnavailable,
    unexpected,
)
from memory_orchestrator.models import (
    LOCAL_SOURCE,
    SEMANTIC_SOURCE,
    EventKind,
    HealthCheck,
    Memory,
    SearchFilters,
    Stage,
    Status,
    Trace,
    TraceEvent,
    event,
)
from memory_orchestrator.pipeline.retriever import Listed, SubQuery
from memory_orchestrator.settings import Settings

# (the store calls come from the service, which builds this: an import at load time
# would make a circle through the service package)
if TYPE_CHECKING:
    from memory_orchestrator.service.store_calls import StoreCalls

log = logging.getLogger(__name__)

Embedding = Callable[[int, int], None]  # told (memories embedded, memories to embed)

# How often the store is asked for memories written around the orchestrator (another
# process, another replica): often enough that they join the lists within moments, rarely
# enough that an idle store's listing costs nothing. A write through this process pulls at
# once, whatever the interval.
SYNC_INTERVAL_S = 5.0
# How long a query (or a write) that handed the semantic index new memories waits for their
# embedding: a short note is embedded in milliseconds and joins the answer at once; a long
# backlog (a first start over a big store) must not hold a request, and joins in the
# background instead (a trace note says how many still wait).
INDEX_WAIT_S = 10.0


@dataclass(frozen=True)
class Indexes:
    """The derived indexes that are on for one request, up to date with the store."""

    local: LocalIndex | None
    semantic: SemanticIndex | None


class DerivedIndexes:
    """The local and semantic indexes derived from one store's listing."""

    def __init__(
        self,
        lister: EnumerableBackend | None,
        store: MemoryBackend,
        calls: StoreCalls,
        settings: Settings,
        *,
        version: Callable[[], Hashable | None] | None = None,
    ) -> None:
        # `lister`: the store's own listing, a bulk read outside the per-call retries; None
        # when the store cannot list its memories. `store`: the guarded store, for reads.
        # `settings`: read at each use (`local_index`, `semantic`). `version`: the store's
        # `data_version` when it has one (the memories read back are then kept while it
        # stays the same).
        self._lister, self._store, self._calls = lister, store, calls
        self._settings = settings
        self.read_back = ReadBack(version)
        self._feed = Feed()
        self._local: LocalIndex | None = None
        self._semantic: SemanticIndex | None = None
        self._semantic_error: str | None = None
        self._warming: anyio.Event | None = None  # set when a running `warm_up` is done

    def stale(self) -> None:
        """The store just took a write: pull it in at the next query."""
        self._feed.stale()

    @property
    def loading(self) -> bool:
        """Whether `warm_up` is still loading them (a query meanwhile goes without them)."""
        return self._warming is not None

    async def take(self) -> None:
        """After a write, in the writer's request: pull what the store added and wait, up to
        `INDEX_WAIT_S`, for the semantic index to embed it, so that the writer, not the next
        reader, waits for a long memory's embedding. Only once a query (or the warm-up) has
        loaded every index it would pull into: the pull moves one cursor for all of them, so
        an index made later would miss what this one took (and a process that only writes,
        an import, builds none)."""
        if self._warming is not None:
            return
        if self._settings.local_index.enabled and self._local is None:
            return
        semantic_on = self._settings.semantic.enabled is not False
        if semantic_on and self._semantic is None and self._semantic_error is None:
            return
        semantic = self._semantic if semantic_on else None
        await self._pull(Indexes(self._local_index(), semantic), wait=True)

    async def refresh(self, trace: Trace) -> Indexes:
        """The indexes that are on, brought up to date with the store (incrementally)."""
        if self._warming is not None:
            return self._ready(trace)
        indexes = Indexes(self._local_index(), self._semantic_index(trace))
        trace.add(*await self._pull(indexes, wait=True))
        return indexes

    def encode_ahead(self, query: str) -> None:
        """Start embedding `query` now, on a worker thread, when the semantic index is loaded
        and will be asked: its vector is then ready, or nearly, when the index needs it."""
        sem, semantic = self._settings.semantic, self._semantic
        wanted = sem.candidates > 0 or self._settings.ranking.semantic_share > 0
        if semantic is not None and sem.enabled is not False and wanted:
            semantic.encode_ahead(query)

    def rank_ahead(self, indexes: Indexes, query: str) -> None:
        """Start the semantic index's ranking for `query` on its worker thread (once the
        index is up to date for this request): `candidate_lists` takes it from there."""
        sem = self._settings.semantic
        if indexes.semantic is not None and sem.candidates > 0:
            indexes.semantic.rank_ahead(query, sem.candidates)

    async def warm_up(self, *, wait_s: float = 0.0) -> None:
        """Load what the first query would otherwise wait for, off the event loop: the
        semantic model and its kept vectors, then the store's whole listing into both indexes
        (the semantic index embeds what is new in the background, in batches), and the local
        index built. Queries that come meanwhile are served with what is ready. A second call
        waits for the first. With `wait_s`, it then waits up to that long for the semantic
        index to embed what is queued. Never raises: what fails here fails (and is reported)
        at first use again."""
        if self._warming is not None:
            await self._warming.wait()
        else:
            await self._warm()
        semantic = self._semantic
        if wait_s > 0 and semantic is not None and semantic.waiting():
            await anyio.to_thread.run_sync(semantic.wait, wait_s)

    async def settle(self, report: Embedding | None = None, *, every_s: float = 5.0) -> None:
        """Pull everything the store holds into the indexes and wait, with no bound, until
        the semantic index has embedded all of it: for an evaluation, whose every query must
        see the same indexes however busy the machine (an agent's request waits only up to
        `INDEX_WAIT_S`). `report(done, total)` is told how far the embedding has got, at the
        start and every `every_s` seconds while it lasts. Raises `EmbeddingFailed` when the
        model failed on memories meanwhile (the rest would be measured without them)."""
        if self._warming is not None:
            await self._warming.wait()
        semantic = self._load_semantic() if self._settings.semantic.enabled is not False else None
        indexes = Indexes(self._local_index(), semantic)
        self._feed.stale()
        failed = semantic.failed if semantic is not None else 0
        await self._pull(indexes, wait=False)
        await self._prepare(indexes)
        if semantic is None:
            return
        total = left = semantic.waiting()
        while left:
            if report is not None:
                report(total - left, total)
            left = await anyio.to_thread.run_sync(semantic.wait, every_s)
            total = max(total, left)
        if report is not None and total:
            report(total, total)
        if semantic.failed > failed:
            raise EmbeddingFailed(
                f"semantic index: {semantic.failed - failed} memories could not be embedded"
                f" ({semantic.failure}); the evaluation would measure without them"
            )

    async def _warm(self) -> None:
        self._warming = done = anyio.Event()
        try:
            if self._settings.semantic.enabled is not False:
                await anyio.to_thread.run_sync(self._load_semantic, abandon_on_cancel=True)
            indexes = Indexes(self._local_index(), self._semantic)
            await self._pull(indexes, wait=False)
            await self._prepare(indexes)
        except (OrchestratorError, OSError) as exc:  # caches: the first query loads them
            log.warning("derived indexes: warm-up failed: %s", exc)
        except Exception as exc:  # a process edge (a background task): a bug is reported
            unexpected("derived indexes warm-up", exc)
        finally:
            self._warming = None
            done.set()

    @staticmethod
    async def _prepare(indexes: Indexes) -> None:
        """Build, off the event loop, what the first query would: the local index, and the
        semantic index's first pass (at scale); what the listing and each build freed is
        given back to the system before the next one (`give_back_freed_memory`)."""
        await anyio.to_thread.run_sync(give_back_freed_memory)
        if indexes.local is not None:
            await anyio.to_thread.run_sync(indexes.local.prepare, abandon_on_cancel=True)
            await anyio.to_thread.run_sync(give_back_freed_memory)
        if indexes.semantic is not None:
            await anyio.to_thread.run_sync(indexes.semantic.prepare, abandon_on_cancel=True)
            await anyio.to_thread.run_sync(give_back_freed_memory)

    def _ready(self, trace: Trace) -> Indexes:
        """While `warm_up` loads: the semantic index once its model and vectors are in (it
        embeds the rest in the background), never the local index being filled."""
        semantic = self._semantic if self._settings.semantic.enabled is not False else None
        waiting = ["local index"] if self._settings.local_index.enabled else []
        if semantic is None and self._settings.semantic.enabled is not False:
            waiting.append("semantic model")
        if waiting:
            them = "them" if len(waiting) > 1 else "it"
            what = " and ".join(waiting)
            trace.add(event(Stage.INDEXES, EventKind.STILL_LOADING, what=what, them=them))
        return Indexes(None, semantic)

    async def candidate_lists(
        self, indexes: Indexes, query: str, filters: SearchFilters | None, trace: Trace
    ) -> list[tuple[SubQuery, list[Listed]]]:
        """The indexes' candidate lists for `query`, read back from the store in one call."""
        li, sem = self._settings.local_index, self._settings.semantic
        profile = self._settings.ranking
        lists: list[tuple[str, float, list[tuple[str, float]]]] = []  # (label, weight, ids)
        if indexes.local is not None:
            local = indexes.local.search(query, li.candidates)
            lists.append((LOCAL_SOURCE, profile.local_list_weight, local))
        if indexes.semantic is not None and sem.candidates > 0:
            # by id: vectors kept from an earlier run count before the store lists them again;
            # only memories close enough in meaning to be worth a look
            floor = float(getattr(indexes.semantic.embedder, "min_similarity", 0.0))
            await _finished(indexes.semantic.pending(query, sem.candidates))
            near = indexes.semantic.ranked(query, sem.candidates)
            lists.append(
                (
                    SEMANTIC_SOURCE,
                    profile.semantic_list_weight,
                    [(i, s) for i, s in near if s >= floor],
                )
            )
        wanted = list(dict.fromkeys(i for _, _, found in lists for i, _ in found))
        if not wanted:
            return []

        async def read(ids: list[str]) -> list[Memory] | None:
            get = self._store.get_memories
            what = "local index candidates"
            return await self._calls.bounded(trace, what, lambda: get(ids), None)

        live = await self.read_back.memories(wanted, read)
        if live is None:
            return []
        out = []
        for label, weight, found in lists:
            hits = [Listed(live[i], score) for i, score in found if i in live]
            out.append((SubQuery(label, weight=weight, filters=filters), hits))
        return out

    async def close(self) -> None:
        """Stop the semantic index's background workers (what is still queued is embedded
        at the next start), off the event loop."""
        if self._semantic is not None:
            await anyio.to_thread.run_sync(self._semantic.close)

    def embedder(self) -> Embedder | None:
        """The semantic model when `[semantic]` is on (or "auto") and it loads, else None."""
        if self._settings.semantic.enabled is False:
            return None
        index = self._load_semantic()
        return index.embedder if index is not None else None

    def health_check(self) -> HealthCheck | None:
        """The semantic index's check when `[semantic]` is on (or "auto"); None when off. "auto"
        without a model that can run is ok: off, and the detail says what is missing."""
        enabled = self._settings.semantic.enabled
        if enabled is False:
            return None
        if self._warming is not None and self._semantic is None:
            detail = "loading in the background (since the server started)"
            return HealthCheck(name="semantic", status=Status.OK, detail=detail)
        index = self._load_semantic()
        if index is None:
            if enabled == "auto":
                detail = f"off (auto): {self._semantic_error or ''}"
                return HealthCheck(name="semantic", status=Status.OK, detail=detail)
            return HealthCheck(
                name="semantic", status=Status.DEGRADED, detail=self._semantic_error or ""
            )
        detail = f"{index.embedder.name}, {len(index)} memories indexed"
        if fallback := getattr(index.embedder, "fallback", None):
            detail += f" (auto fell back to it: {fallback})"
        if waiting := index.waiting():
            detail += f", {waiting} being embedded{index.progress()}"
        if index.vectors is not None:
            detail += f"; vectors kept in {index.vectors.path} ({index.restored} loaded at start)"
        if self._warming is not None:
            detail += "; warming up: the store's listing and the local index still loading"
        return HealthCheck(name="semantic", status=Status.OK, detail=detail)

    # ------------------------------------------------------------------ internals

    def _local_index(self) -> LocalIndex | None:
        li, profile = self._settings.local_index, self._settings.ranking
        if not li.enabled:
            return None
        if self._local is None:
            # a memory's date indexed as words ("8 May 2023"): a question that names a date
            # or a month finds what was said then
            self._local = LocalIndex(max_memories=li.max_memories, date_terms=True)
        self._local.configure(
            context_weight=profile.local_context_weight,
            k1=profile.bm25_k1,
            b=profile.bm25_b,
            radius=profile.local_radius,
            context_gap_s=profile.context_gap_s,
        )
        return self._local

    def _semantic_index(self, trace: Trace) -> SemanticIndex | None:
        """The semantic index when `[semantic]` is on (or "auto") and its model loads (once).
        Asked for and not loaded: each trace says why; "auto": health says it, once."""
        enabled = self._settings.semantic.enabled
        if enabled is False:
            return None
        index = self._load_semantic()
        if index is None and enabled is True:
            off = event(Stage.INDEXES, EventKind.SEMANTIC_OFF, error=str(self._semantic_error))
            trace.add(off)
        return index

    def _load_semantic(self) -> SemanticIndex | None:
        """Load the model once, and the vectors kept under the data dir; a failure is kept
        (and reported) rather than retried. (`warm_up` runs it in a worker thread; queries
        do not call it while that runs.)"""
        if self._semantic is None and self._semantic_error is None:
            sem, data_dir = self._settings.semantic, self._settings.data_dir
            try:
                embedder = load_embedder(sem.model, model_dir=sem.model_dir, data_dir=data_dir)
            except SemanticUnavailable as exc:
                self._semantic_error = str(exc)
            else:
                vectors = VectorFile(
                    vector_path(data_dir, embedder.name),
                    model=embedder.name,
                    fingerprint=str(getattr(embedder, "fingerprint", embedder.name)),
                )
                self._semantic = SemanticIndex(
                    embedder,
                    max_memories=self._settings.local_index.max_memories,
                    vectors=vectors,
                )
        return self._semantic

    async def _pull(self, indexes: Indexes, *, wait: bool) -> list[TraceEvent]:
        """What the store added since the last pull, into `indexes`; with `wait`, wait up to
        `INDEX_WAIT_S` for the semantic index to embed what this pull queued. Its events."""
        local, semantic = indexes.local, indexes.semantic
        if local is None and semantic is None:
            return []

        queued = 0

        def add(page: Sequence[Memory]) -> int:
            # the semantic index embeds in the background (a contextual model is slow per
            # memory); a query that handed it new memories waits below, up to `INDEX_WAIT_S`
            nonlocal queued
            fresh = semantic.queue(page) if semantic is not None else 0
            queued += fresh
            return max(local.add(page) if local is not None else 0, fresh)

        pulled = await self._feed.pull(
            self._lister,
            add,
            interval_s=SYNC_INTERVAL_S,
            timeout_s=self._calls.timeout_s,
        )
        notes = [pulled.event] if pulled.event else []
        if not pulled.listed and local is not None:
            notes.append(event(Stage.INDEXES, EventKind.LOCAL_INDEX_OFF))
        if pulled.added:
            notes.append(event(Stage.INDEXES, EventKind.LOCAL_INDEX_ADDED, count=pulled.added))
        waiting = semantic.waiting() if semantic is not None else 0
        if wait and waiting and queued and semantic is not None:
            waiting = await anyio.to_thread.run_sync(semantic.wait, INDEX_WAIT_S)
        if waiting:
            notes.append(event(Stage.INDEXES, EventKind.SEMANTIC_EMBEDDING, count=waiting))
        return notes


def give_back_freed_memory() -> None:
    """Hand the heap memory freed since the start back to the system (glibc's
    `malloc_trim`; nothing elsewhere). The store's whole listing makes and drops objects by
    the hundred thousand (each memory parsed, then kept as a few numbers and its text), and
    the C allocator keeps what they freed for later use: a process that lives for days would
    hold its warm-up's garbage all along."""
    import ctypes

    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return
    trim(0)


async def _finished(future: Future[Any] | None) -> None:
    """Wait until `future` (worked on by another thread) is done, with the event loop free
    to serve other requests meanwhile; its result or error is for its owner to read. On
    another event loop (trio) a worker thread waits for it. The future is never cancelled
    from here: other requests may share it."""
    if future is None or future.done():
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        await anyio.to_thread.run_sync(wait_for_futures, [future])
        return
    done = loop.create_future()

    def wake(_: Future[Any]) -> None:
        with suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_settle, done)

    future.add_done_callback(wake)
    await done


def _settle(done: asyncio.Future[None]) -> None:
    if not done.done():  # (not when its waiter was cancelled)
        done.set_result(None)
