"""The memory catalog: every live memory of the store, newest first, for paging with filters.

The inspector (`faces/ui`) lists memories page by page with filters (type, entity, time
range, corrected memories shown or hidden). No store answers that directly, and walking a
store's cursor to page 2,000 would read everything before it, so the catalog keeps one light
entry per memory (id, time, type, entity keys, corrected) in memory, pulled from the store's
own listing (`EnumerableBackend`, by its cursor, incrementally), sorted newest
first. A page is a slice of the matching entries; the memories on it are then read back from
the store, so what is shown is the store's current record (a memory deleted since it was
listed leaves the catalog there; one corrected since is marked).

The first whole listing takes seconds on a large store. A server (`fill`, with its task group's
`spawn`) runs it beside the requests, and until it is done a page answers at once from the
memories listed so far, with a note saying how many that is; without a server a page waits for
it. That listing gives way to the requests (`Quiet`): before each listing page it waits for a
moment without one.

Like the derived indexes, it is a cache the orchestrator owns, never the source of truth.
The memories forgotten through the orchestrator (`hidden`, `state/forgotten.py`) stay in it,
left out of every page and count, so that an undo shows them again at once.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter
from typing import Any

import anyio

from memory_orchestrator.backends.base import EnumerableBackend, MemoryBackend
from memory_orchestrator.errors import STORE_ERRORS, describe
from memory_orchestrator.models import Memory, MemoryType, supersedes, to_utc
from memory_orchestrator.pipeline.currency import superseded
from memory_orchestrator.service.store_calls import StoreCalls
from memory_orchestrator.state.forgotten import Tombstones

__all__ = ["Catalog", "MemoryFilter", "MemoryPage", "Quiet", "Spawn"]

_NO_TIME = -math.inf
Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], object]
_CACHED_FILTERS = 32
_PAGE = 2000
_RESORT_S = 1.0  # while the first listing runs, new entries join the sorted ones this often
_FILL_PAGE = 500  # memories per listing page while requests may be waiting (the first fill)


class Quiet:
    """The requests a server is answering, so that work beside them (the first listing of the
    store, the first reading of the traces) gives way: before each of its steps it waits for a
    moment without a request, at most `most_s` (so it still ends under a steady stream).
    `enter` and `leave` are called in the event loop; `wait_blocking` in a worker thread."""

    def __init__(self, *, most_s: float = 0.25) -> None:
        self.most_s = most_s
        self._busy = 0
        self._calm: anyio.Event | None = None  # set when the last request in flight ends
        self._calm_thread = threading.Event()
        self._calm_thread.set()

    def enter(self) -> None:
        if self._busy == 0:
            self._calm = anyio.Event()
            self._calm_thread.clear()
        self._busy += 1

    def leave(self) -> None:
        self._busy -= 1
        if self._busy == 0:
            self._calm_thread.set()
            if self._calm is not None:
                self._calm.set()

    async def wait(self) -> None:
        calm = self._calm
        if self._busy and calm is not None:
            with anyio.move_on_after(self.most_s):
                await calm.wait()

    def wait_blocking(self) -> None:
        self._calm_thread.wait(self.most_s)


@dataclass(slots=True)
class _Entry:
    id: str
    when: float  # created_at as a UTC timestamp; -inf without one (listed last)
    type: MemoryType
    entities: frozenset[str]  # case folded
    timed: bool
    corrected: bool  # changed in place when the store's record says otherwise
    order: tuple[float, int]  # the sort key: newest first, then the later listed first


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories a page shows. Empty means no restriction; a memory without a time
    passes a time range (as in `filtering.matches`)."""

    types: frozenset[MemoryType] = frozenset()
    entity: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    corrected: bool = False  # True: memories a later one corrected are shown too

    def _key(self) -> tuple[object, ...]:
        return (
            tuple(sorted(self.types)),
            self.entity.casefold() if self.entity else None,
            self.start,
            self.end,
            self.corrected,
        )


@dataclass(frozen=True)
class MemoryPage:
    """One page of the catalog: the memories as the store holds them now, and where it is."""

    memories: tuple[Memory, ...]
    offset: int
    limit: int
    total: int  # entries matching the filter
    listed: int  # entries in the catalog
    listing: bool  # False: the store cannot list its memories (the page is empty)
    notes: tuple[str, ...] = ()
    indexing: bool = False  # the first listing is under way: the page holds what it has


@dataclass
class _State:
    entries: list[_Entry] = field(default_factory=list)  # sorted, newest first: what pages see
    pending: list[_Entry] = field(default_factory=list)  # listed since, not sorted in yet
    by_id: dict[str, _Entry] = field(default_factory=dict)  # every entry listed
    entities: Counter[str] = field(default_factory=Counter)
    names: dict[str, str] = field(default_factory=dict)  # key -> a spelling seen
    version: int = 0  # bumped when what pages see changes
    rebuild: bool = False  # an entry was listed again: `entries` is made anew from `by_id`
    sorted_at: float = -math.inf  # time.monotonic() of the last sort


class Catalog:
    """The light catalog of one store's live memories (see the module docstring)."""

    def __init__(
        self,
        lister: EnumerableBackend | None,
        store: MemoryBackend,
        calls: StoreCalls,
        *,
        interval_s: float = 2.0,
        timeout_s: float = 120.0,
        quiet: Quiet | None = None,
        hidden: Tombstones | None = None,
    ) -> None:
        self._lister, self._store, self._calls = lister, store, calls
        self._hidden = hidden
        self._quiet = quiet or Quiet()
        self._interval_s, self._timeout_s = interval_s, timeout_s
        self._cursor: str | None = None
        self._pulled_at: float | None = None
        self._listed = False  # one whole listing done: later pages need not wait for one
        self._state = _State()
        self._seq = 0
        self._lock = anyio.Lock()
        self._note: str | None = None
        self._matches: OrderedDict[tuple[object, ...], tuple[int, list[_Entry]]] = OrderedDict()
        self._by_entity: tuple[int, dict[str, list[_Entry]]] = (-1, {})
        # starts a task beside the requests (a server's task group, set while it runs); None:
        # a page waits for the first listing itself
        self.spawn: Spawn | None = None
        self._filling = False
        self._filled = anyio.Event()  # set when the first listing beside the requests ended

    @property
    def listing(self) -> bool:
        return self._lister is not None

    def __len__(self) -> int:
        return len(self._state.by_id)

    @property
    def indexing(self) -> bool:
        """True while the first whole listing runs beside the requests."""
        return self._filling and not self._listed

    def stale(self) -> None:
        """Pull at the next chance (a memory was just written or forgotten)."""
        self._pulled_at = None

    def fill(self) -> None:
        """Start the first whole listing beside the requests (with `spawn`; once at a time)."""
        if self._lister is None or self._listed or self._filling or self.spawn is None:
            return
        self._filling = True
        self.spawn(self._fill)

    async def filled(self) -> None:
        """Wait until the first listing beside the requests has ended (done, or failed with a
        note); at once for a store that cannot list. An event, not a sleep."""
        if self._lister is not None:
            await self._filled.wait()

    async def _fill(self) -> None:
        try:
            await self.refresh(beside=True)
        finally:
            self._filling = False
            self._filled.set()

    async def refresh(self, *, wait: bool = True, beside: bool = False) -> None:
        """Pull what the store added since the last pull (at most every `interval_s`; at once
        after `stale`). With `wait` off, a pull already under way is not waited for. `beside`:
        run beside the requests (smaller listing pages, each after a quiet moment). Never
        raises: a failed pull keeps what it got, with a note on the next pages."""
        lister = self._lister
        if lister is None or (not wait and self._lock.locked()):
            return
        async with self._lock:
            now = time.monotonic()
            if self._pulled_at is not None and now - self._pulled_at < self._interval_s:
                return
            size = _FILL_PAGE if beside else _PAGE
            try:
                while True:
                    if beside:
                        await self._quiet.wait()  # give way to the requests in flight
                    with anyio.fail_after(self._timeout_s):
                        page, cursor = await lister.list_memories(self._cursor, size)
                    self._add(page)  # here, in the event loop: pages never race a pull
                    self._cursor = cursor
                    if len(page) < size:
                        break
                    await anyio.sleep(0)  # let pages be served between listing pages
            except STORE_ERRORS as exc:  # a cache: a failed pull only leaves it older
                self._note = f"listing the store failed: {describe(exc)}"
            else:
                self._note = None
                self._pulled_at = now
                self._listed = True
            finally:
                self._sorted()

    def entity_names(self, limit: int = 200) -> list[str]:
        """The entity names the catalog has seen, most frequent first."""
        state = self._state
        common = state.entities.most_common(limit)
        return [state.names.get(key, key) for key, count in common if count > 0]

    async def page(self, wanted: MemoryFilter, offset: int, limit: int) -> MemoryPage:
        """The memories matching `wanted`, newest first, from `offset`; read back from the
        store (those deleted since they were listed leave the catalog and the page). Until
        the store has been listed whole once, the page holds the memories listed so far
        while a server lists it (`fill`), or waits for that listing (no server)."""
        if self._listed:
            await self.refresh(wait=False)
        elif self.spawn is not None:
            self.fill()
        else:
            await self.refresh()
        indexing = self.indexing
        matching = self._matching(wanted)
        hidden = await self._forgotten()
        if hidden:
            matching = [e for e in matching if e.id not in hidden]
        ids = [e.id for e in matching[offset : offset + limit]]
        notes = [self._note] if self._note else []
        if indexing:
            notes.append(
                f"Indexing the store: {len(self):,} memories listed so far. Until it is done,"
                " this list, its filters and its count cover only those; reload to see more."
            )
        elif self._lock.locked():
            notes.append(f"still listing the store: {len(self):,} memories so far")
        memories: list[Memory] = []
        if ids:
            read = self._store.get_memories
            memories = await self._calls.strict(lambda: read(ids), "reading the page's memories")
        gone = self._reconcile(ids, memories, await self._forgotten())
        if gone:
            notes.append(f"{gone} memories on this page were deleted since they were listed")
        if not wanted.corrected:
            memories = [m for m in memories if not superseded(m)]
        return MemoryPage(
            memories=tuple(memories),
            offset=offset,
            limit=limit,
            total=len(matching),
            listed=len(self),
            listing=self.listing,
            notes=tuple(notes),
            indexing=indexing,
        )

    def forgotten(self, memory_id: str) -> None:
        """`memory_id` was deleted: it leaves the catalog at once."""
        self._drop([memory_id])

    # ------------------------------------------------------------------ internals

    async def _forgotten(self) -> frozenset[str]:
        hidden = self._hidden
        if hidden is None:
            return frozenset()
        if hidden.blocking:
            return await anyio.to_thread.run_sync(hidden.ids)
        return hidden.ids()

    def _add(self, memories: Sequence[Memory]) -> None:
        """Take a page of the store's listing."""
        state = self._state
        again = False
        for memory in memories:
            old = state.by_id.get(memory.id)
            entry = self._entry(memory)
            if old is not None:
                self._count(old, -1)
                again = True
            else:
                state.pending.append(entry)
            state.by_id[memory.id] = entry
            self._count(entry, +1)
            for name in memory.entities:
                state.names.setdefault(name.casefold(), name)
            # the orchestrator's own key (a client cannot write it): a hint until the store's
            # record of that memory is read back; an older record's bare key is no hint
            replaced = supersedes(memory)
            if replaced is not None:
                self._mark(replaced)
        if again:  # a memory listed again (changed) replaces its old entry
            state.rebuild = True

    def _entry(self, memory: Memory) -> _Entry:
        self._seq += 1  # the order the store listed it in (ties: the later listed first)
        when = memory.created_at
        stamp = to_utc(when).timestamp() if when is not None else _NO_TIME
        return _Entry(
            id=memory.id,
            when=stamp,
            type=memory.type,
            entities=frozenset(e.casefold() for e in memory.entities),
            timed=when is not None,
            corrected=superseded(memory),
            order=(-stamp, -self._seq),
        )

    def _count(self, entry: _Entry, step: int) -> None:
        self._state.entities.update(dict.fromkeys(entry.entities, step))

    def _mark(self, memory_id: str, corrected: bool = True) -> None:
        state = self._state
        entry = state.by_id.get(memory_id)
        if entry is None or entry.corrected == corrected:
            return
        entry.corrected = corrected  # the same object sits in `entries`
        state.version += 1

    def _drop(self, ids: Sequence[str]) -> None:
        state = self._state
        gone = {i for i in ids if i in state.by_id}
        if not gone:
            return
        for memory_id in gone:
            self._count(state.by_id.pop(memory_id), -1)
        state.entries = [e for e in state.entries if e.id not in gone]
        state.pending = [e for e in state.pending if e.id not in gone]
        state.version += 1

    def _reconcile(
        self, ids: Sequence[str], memories: Sequence[Memory], hidden: frozenset[str]
    ) -> int:
        """Bring the entries of one page in line with what the store returned for it (one
        forgotten meanwhile is only hidden: it stays for an undo)."""
        found = {m.id: m for m in memories}
        gone = [i for i in ids if i not in found and i not in hidden]
        self._drop(gone)
        for memory in memories:  # the store's mark is the truth (as on the read path)
            self._mark(memory.id, superseded(memory))
        return len(gone)

    def _sorted(self) -> list[_Entry]:
        """The entries, newest first, with those listed since sorted in. While the first
        listing runs, at most every `_RESORT_S`: a page then need not sort them all each
        time (a sort of every entry, on a large store), and may miss the last second's."""
        state = self._state
        if not state.pending and not state.rebuild:
            return state.entries
        now = time.monotonic()
        if self.indexing and now - state.sorted_at < _RESORT_S:
            return state.entries
        if state.rebuild:
            state.entries, state.rebuild = list(state.by_id.values()), False
        else:
            state.entries.extend(state.pending)
        state.pending = []
        state.entries.sort(key=_ORDER)
        state.sorted_at = now
        state.version += 1
        return state.entries

    def _matching(self, wanted: MemoryFilter) -> list[_Entry]:
        entries = self._sorted()
        key = wanted._key()
        if key == ((), None, None, None, True):
            return entries
        version = self._state.version
        cached = self._matches.get(key)
        if cached is not None and cached[0] == version:
            self._matches.move_to_end(key)
            return cached[1]
        if wanted.entity:  # only that entity's memories are looked at
            entries = self._entity_entries(wanted.entity.casefold())
        found = _select(entries, wanted)
        self._matches[key] = (version, found)
        while len(self._matches) > _CACHED_FILTERS:
            self._matches.popitem(last=False)
        return found

    def _entity_entries(self, key: str) -> list[_Entry]:
        """The entries naming entity `key`, newest first (the index is rebuilt, in one pass,
        after the catalog changed)."""
        version = self._state.version
        if self._by_entity[0] != version:
            index: dict[str, list[_Entry]] = {}
            for entry in self._sorted():
                for name in entry.entities:
                    index.setdefault(name, []).append(entry)
            self._by_entity = (version, index)
        return self._by_entity[1].get(key, [])


_ORDER = attrgetter("order")


def _select(entries: Sequence[_Entry], wanted: MemoryFilter) -> list[_Entry]:
    types = wanted.types
    entity = wanted.entity.casefold() if wanted.entity else None
    start = to_utc(wanted.start).timestamp() if wanted.start else -math.inf
    end = to_utc(wanted.end).timestamp() if wanted.end else math.inf
    timed = wanted.start is not None or wanted.end is not None
    return [
        e
        for e in entries
        if (wanted.corrected or not e.corrected)
        and (not types or e.type in types)
        and (entity is None or entity in e.entities)
        and (not timed or not e.timed or start <= e.when <= end)
    ]
