"""Forgetting: the one seam where forgotten memories leave every read, and forget, undo and
purge themselves.

`ForgettingStore` wraps the guarded store, and the whole service talks to the store through
it: every answer the store gives (search hits, graph neighbours, memories read by id) comes
back through it, and the memories forgotten now (`state/forgotten.py`, by this process or
any other sharing the data dir or the shared database) are left out there. The derived
indexes are caches fed by the store's raw listing, so they may hold a forgotten memory; their
candidates count only once read back from the store, through this seam, and the memories kept
from earlier read-backs are dropped whenever the forgotten set changes (`versioned`). What a
forgotten memory was part of in a stored trace is left out of it when it is shown again
(`redact`: explain, replay, the inspector's request pages).

Nothing in the store changes when a memory is forgotten, so `undo` brings it back at once, in
every read. `ForgetPath.purge` erases forgotten memories from the store for good (stores whose
capabilities say `delete`); their tombstones stay, marked purged, and undo refuses them.

A write the store skips as the same text as a forgotten memory brings that memory back: it was
said again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import TypeVar, cast

import anyio

from memory_orchestrator.backends.base import EnumerableBackend, MemoryBackend, SupersedingBackend
from memory_orchestrator.errors import CapabilityMissing, OrchestratorError
from memory_orchestrator.models import (
    Capabilities,
    Edge,
    EventKind,
    ForgetAction,
    ForgetReport,
    ForgetRequest,
    HealthCheck,
    Memory,
    MetaValue,
    Neighbor,
    NewMemory,
    SearchFilters,
    SearchHit,
    Stage,
    ToolName,
    Trace,
    WriteAction,
    WriteOutcome,
    event,
)
from memory_orchestrator.service.recorder import TraceRecorder
from memory_orchestrator.service.store_calls import StoreCalls
from memory_orchestrator.state.forgotten import Tombstone, Tombstones, now

__all__ = ["ForgetPath", "ForgettingStore", "redact"]

T = TypeVar("T")


class ForgettingStore:
    """A `MemoryBackend` whose reads leave out the forgotten memories (see the module
    docstring). `inner` is the guarded store; forget and purge reach it directly."""

    def __init__(self, inner: MemoryBackend, tombstones: Tombstones) -> None:
        self.inner = inner
        self.tombstones = tombstones
        self.name = inner.name
        self.capabilities: Capabilities = inner.capabilities

    @property
    def notes(self) -> tuple[str, ...]:
        return self.inner.notes

    async def forgotten(self) -> frozenset[str]:
        """The ids forgotten now (a worker thread asks the shared database)."""
        tombstones = self.tombstones
        if tombstones.blocking:
            return await anyio.to_thread.run_sync(tombstones.ids)
        return tombstones.ids()

    def versioned(self, version: Callable[[], Hashable | None]) -> Callable[[], Hashable | None]:
        """The store's `data_version`, joined with the forgotten set's generation: memories
        kept at one version are read again (through this seam) once either moved."""
        tombstones = self.tombstones

        def joined() -> Hashable | None:
            at = version()
            if at is None:
                return None
            if not tombstones.blocking:  # cheap: look at once (the shared set is looked at
                tombstones.ids()  # before each read, in a worker thread)
            return (at, tombstones.generation)

        return joined

    # ------------------------------------------------------------------ reads

    async def search(
        self, query: str, top_k: int, filters: SearchFilters | None = None
    ) -> list[SearchHit]:
        gone = await self.forgotten()
        if not gone:
            return await self.inner.search(query, top_k, filters)
        # as many more as there are forgotten memories (up to top_k), so that they do not
        # take the places of live ones
        hits = await self.inner.search(query, top_k + min(len(gone), top_k), filters)
        kept = [h for h in hits if h.memory.id not in gone][:top_k]
        return [
            h if h.rank == n else h.model_copy(update={"rank": n}) for n, h in enumerate(kept, 1)
        ]

    async def neighbors(
        self,
        node_ids: Sequence[str],
        edge_types: Sequence[str] | None = None,
        hops: int = 1,
        limit: int = 50,
    ) -> list[Neighbor]:
        gone = await self.forgotten()
        if not gone:
            return await self.inner.neighbors(node_ids, edge_types, hops, limit)
        seeds = [i for i in node_ids if i not in gone]
        if not seeds:
            return []
        found = await self.inner.neighbors(seeds, edge_types, hops, limit + min(len(gone), limit))
        return [n for n in found if n.memory.id not in gone][:limit]

    async def get_memories(self, ids: Sequence[str]) -> list[Memory]:
        gone = await self.forgotten()
        wanted = [i for i in ids if i not in gone]
        if not wanted:
            return []
        return [m for m in await self.inner.get_memories(wanted) if m.id not in gone]

    async def known_entities(self, limit: int = 500) -> list[str]:
        return await self.inner.known_entities(limit)

    async def list_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[Memory], str | None]:
        """The store's listing, whole (`EnumerableBackend`), forgotten memories included: a
        bulk read for what must see the store as it is (an export, the check that a restore
        goes into an empty store), which takes the tombstones from `Tombstones.entries`."""
        return await cast(EnumerableBackend, self.inner).list_memories(cursor, limit)

    # ------------------------------------------------------------------ writes and the rest

    async def write(self, memory: NewMemory) -> WriteOutcome:
        return (await self._said_again([await self.inner.write(memory)]))[0]

    async def write_many(self, memories: Sequence[NewMemory]) -> list[WriteOutcome]:
        return await self._said_again(await self.inner.write_many(memories))

    async def _said_again(self, outcomes: list[WriteOutcome]) -> list[WriteOutcome]:
        """Skipped as a forgotten memory's text: that memory comes back (it was said again)."""
        skipped = [o.existing_id for o in outcomes if o.action is WriteAction.SKIPPED]
        if not any(skipped):
            return outcomes
        gone = await self.forgotten()
        back = [i for i in skipped if i and i in gone]
        if not back:
            return outcomes
        restored = set(await anyio.to_thread.run_sync(self.tombstones.remove, back))
        note = "; it had been forgotten, and is back now that it was written again"
        return [
            o.model_copy(update={"detail": (o.detail + note).lstrip("; ")})
            if o.existing_id in restored and o.action is WriteAction.SKIPPED
            else o
            for o in outcomes
        ]

    async def link(
        self,
        source_id: str,
        target_id: str,
        relation: str,
        weight: float = 1.0,
        meta: dict[str, MetaValue] | None = None,
    ) -> Edge:
        return await self.inner.link(source_id, target_id, relation, weight, meta)

    async def supersede(self, old_id: str, new_id: str) -> None:
        await cast(SupersedingBackend, self.inner).supersede(old_id, new_id)

    async def forget(self, memory_id: str) -> bool:
        """The store's own delete (a purge): the service calls it only through `ForgetPath`."""
        return await self.inner.forget(memory_id)

    async def health(self) -> list[HealthCheck]:
        return await self.inner.health()

    async def close(self) -> None:
        await self.inner.close()


def redact(trace: Trace, gone: frozenset[str]) -> Trace:
    """`trace` without the forgotten memories it named (a copy; the stored one is kept as
    it was), with a note saying how many were left out."""
    named = {c.id for c in trace.candidates} | set(trace.result_ids)
    named |= {d.id for d in trace.dropped}
    named |= {i for e in trace.expansions for i in (e.seed_id, e.neighbor_id)}
    hidden = named & gone
    if not hidden:
        return trace
    shown = trace.model_copy(
        update={
            "candidates": [c for c in trace.candidates if c.id not in hidden],
            "result_ids": [i for i in trace.result_ids if i not in hidden],
            "dropped": [d for d in trace.dropped if d.id not in hidden],
            "expansions": [
                e
                for e in trace.expansions
                if e.seed_id not in hidden and e.neighbor_id not in hidden
            ],
            "events": [
                *trace.events,
                event(
                    Stage.SERVICE,
                    EventKind.FORGOTTEN_HIDDEN,
                    count=len(hidden),
                    memories="memory" if len(hidden) == 1 else "memories",
                ),
            ],
        }
    )
    return shown


class ForgetPath:
    """Forget, undo and purge over one store, each traced (tool "forget")."""

    def __init__(self, store: ForgettingStore, recorder: TraceRecorder, calls: StoreCalls) -> None:
        self._store, self._recorder, self._calls = store, recorder, calls

    @property
    def tombstones(self) -> Tombstones:
        return self._store.tombstones

    async def entries(self, ids: Sequence[str] | None = None) -> list[Tombstone]:
        """The tombstones (of `ids`), oldest first: what an export carries."""
        return await self._off_loop(lambda: self.tombstones.entries(ids))

    async def forget(self, request: ForgetRequest) -> ForgetReport:
        """Forget `request.ids` (or bring them back, with `undo`). Raises BackendError when the
        store cannot say whether a memory exists, ForgetError when the list cannot be kept."""
        started = time.perf_counter()
        trace = self._recorder.begin(ToolName.FORGET, request.model_dump(mode="json"))
        ids = list(dict.fromkeys(request.ids))
        try:
            if request.undo:
                report = await self._undo(ids, trace)
            else:
                report = await self._forget(ids, request.reason or "", trace)
        except (OrchestratorError, OSError) as exc:  # a bug: the server keeps its trace
            trace.error = str(exc)[:500]
            self._finish(trace, started)
            raise
        self._finish(trace, started)
        return report

    async def purge(self, ids: Sequence[str]) -> ForgetReport:
        """Erase forgotten memories from the store for good (its own delete). Raises
        CapabilityMissing when the store cannot delete; ids not forgotten first are refused."""
        store = self._store
        if not store.capabilities.delete:
            raise CapabilityMissing(
                f"the {store.name} store cannot delete memories: forgotten ones stay in it,"
                " left out of every read"
            )
        started = time.perf_counter()
        wanted = list(dict.fromkeys(ids))
        trace = self._recorder.begin(ToolName.FORGET, {"ids": wanted, "purge": True})
        try:
            kept = {t.memory_id: t for t in await self.entries(wanted)}
            refused = [i for i in wanted if i not in kept]
            unchanged = [i for i in wanted if i in kept and kept[i].purged_at is not None]
            todo = [i for i in wanted if i in kept and kept[i].purged_at is None]
            done, absent = [], 0
            erase = store.inner.forget
            for memory_id in todo:
                gone = await self._calls.strict(partial(erase, memory_id), "purge")
                absent += not gone
                done.append(memory_id)
                # marked one by one: a failure later leaves the ones erased marked
                await self._off_loop(partial(self.tombstones.mark_purged, [memory_id], now()))
        except (OrchestratorError, OSError) as exc:  # a bug: the server keeps its trace
            trace.error = str(exc)[:500]
            self._finish(trace, started)
            raise
        parts = [
            f"{len(done)} purged: erased from the {store.name} store for good"
            if done
            else "nothing purged"
        ]
        if absent:
            parts.append(f"{absent} of them no longer in the store")
        if unchanged:
            parts.append(f"{len(unchanged)} purged before")
        if refused:
            parts.append(f"{len(refused)} refused: not forgotten (forget them first)")
        trace.result_ids = done
        self._finish(trace, started)
        return ForgetReport(
            action=ForgetAction.PURGE,
            done=tuple(done),
            unchanged=tuple(unchanged),
            refused=tuple(refused),
            summary="; ".join(parts),
            trace_id=trace.trace_id,
        )

    # ------------------------------------------------------------------ internals

    async def _forget(self, ids: list[str], reason: str, trace: Trace) -> ForgetReport:
        before = {t.memory_id for t in await self.entries(ids)}
        asked = [i for i in ids if i not in before]
        found: set[str] = set()
        if asked:
            read = self._store.inner.get_memories
            trace.backend_calls += 1
            got = await self._calls.strict(lambda: read(asked), "reading the memories to forget")
            found = {m.id for m in got}
        at, store = now(), self._store.name
        stones = [Tombstone(i, store, reason.strip(), at) for i in asked if i in found]
        added = await self._off_loop(lambda: self.tombstones.add(stones))
        unchanged = [i for i in ids if i in before or (i in found and i not in added)]
        not_found = [i for i in asked if i not in found]
        parts = [
            f"{len(added)} forgotten: left out of every read (undo brings them back)"
            if added
            else "nothing forgotten"
        ]
        if unchanged:
            parts.append(f"{len(unchanged)} forgotten before")
        if not_found:
            parts.append(f"{len(not_found)} not found in the {store} store")
        trace.result_ids = list(added)
        return ForgetReport(
            action=ForgetAction.FORGET,
            done=tuple(added),
            unchanged=tuple(unchanged),
            not_found=tuple(not_found),
            summary="; ".join(parts),
            trace_id=trace.trace_id,
        )

    async def _undo(self, ids: list[str], trace: Trace) -> ForgetReport:
        kept = {t.memory_id: t for t in await self.entries(ids)}
        restored = await self._off_loop(lambda: self.tombstones.remove(ids))
        refused = [i for i in ids if i in kept and kept[i].purged_at is not None]
        unchanged = [i for i in ids if i not in kept]
        parts = [
            f"{len(restored)} back: every read returns them again" if restored else "nothing back"
        ]
        if unchanged:
            parts.append(f"{len(unchanged)} not forgotten")
        if refused:
            parts.append(f"{len(refused)} refused: purged from the store, they cannot come back")
        trace.result_ids = list(restored)
        return ForgetReport(
            action=ForgetAction.UNDO,
            done=tuple(restored),
            unchanged=tuple(unchanged),
            refused=tuple(refused),
            summary="; ".join(parts),
            trace_id=trace.trace_id,
        )

    @staticmethod
    async def _off_loop(work: Callable[[], T]) -> T:
        """`work()` on a worker thread: a write waits for the disk (or the shared database)."""
        return await anyio.to_thread.run_sync(work)

    def _finish(self, trace: Trace, started: float) -> None:
        trace.timings_ms["total"] = round((time.perf_counter() - started) * 1000, 3)
        self._recorder.finish(trace)
