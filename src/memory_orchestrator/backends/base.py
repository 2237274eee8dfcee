"""The one seam between the orchestrator and a memory store.

Every store sits behind `MemoryBackend`. The pipeline asks a backend what it can do through
`capabilities` and never asks which backend it is talking to. An optional ability that brings
a method (listing, marking corrections, a change token, the dispatch signal) is declared by
its flag alone; its Protocol below types the method and is not checked at run time: the code
reaches the method through the ability's accessor (`enumerable`, `superseding`, `versioned`,
`dispatching`), which reads the flag (docs/explanation/store-abilities.md).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol, cast, runtime_checkable

from memory_orchestrator.hooks import Hook, Tell
from memory_orchestrator.models import (
    Capabilities,
    Edge,
    HealthCheck,
    Memory,
    MetaValue,
    Neighbor,
    NewMemory,
    SearchFilters,
    SearchHit,
    WriteOutcome,
)


@runtime_checkable
class MemoryBackend(Protocol):
    """A memory store, seen from the orchestrator.

    Contract:
    - `search` returns at most `top_k` hits, best first, ranks 1..n, honouring `filters` where
      the capabilities say it can (otherwise the caller filters). Bad queries give `[]`.
    - `neighbors` walks up to `hops` edges from each seed (direction ignored), only along
      `edge_types` when given, and returns at most `limit` neighbours, nearest first, never a
      seed itself. A store without a graph returns `[]`.
    - `get_memories` returns the live memories among `ids`, in the order asked; unknown or
      deleted ids are left out.
    - `write` stores one memory and says whether it was added, updated or skipped;
      `write_many` does the same for many (one round trip where the store allows).
    - `link` adds a typed, weighted edge; raises `CapabilityMissing` without a graph.
    - `forget` soft-deletes; returns False when the id is unknown.
    - `known_entities` lists entity names the store has seen (most frequent first).
    - `health` never raises: it reports ok / degraded / error per check.
    - `list_memories(cursor, limit)` (see `EnumerableBackend`) is there to call when
      `capabilities.listing` is True, and only then; optional abilities are declared by the
      flags, not guessed from methods (a store may have the method yet not list in its
      configuration, and a wrapper has every method).
    - `notes` names the fallbacks the store runs with (e.g. an older build without a
      command), one line each; the service copies them into every trace. Usually empty.
    - Every method may raise `BackendError`; `transient=True` means a retry may succeed.
    """

    name: str
    capabilities: Capabilities

    @property
    def notes(self) -> tuple[str, ...]: ...

    async def search(
        self, query: str, top_k: int, filters: SearchFilters | None = None
    ) -> list[SearchHit]: ...

    async def neighbors(
        self,
        node_ids: Sequence[str],
        edge_types: Sequence[str] | None = None,
        hops: int = 1,
        limit: int = 50,
    ) -> list[Neighbor]: ...

    async def get_memories(self, ids: Sequence[str]) -> list[Memory]: ...

    async def write(self, memory: NewMemory) -> WriteOutcome: ...

    async def write_many(self, memories: Sequence[NewMemory]) -> list[WriteOutcome]: ...

    async def link(
        self,
        source_id: str,
        target_id: str,
        relation: str,
        weight: float = 1.0,
        meta: dict[str, MetaValue] | None = None,
    ) -> Edge: ...

    async def forget(self, memory_id: str) -> bool: ...

    async def known_entities(self, limit: int = 500) -> list[str]: ...

    async def health(self) -> list[HealthCheck]: ...

    async def close(self) -> None: ...


class EnumerableBackend(Protocol):
    """A store that can list its live memories page by page: the optional ability a backend
    declares with `capabilities.listing` (the derived local indexes are fed from it).

    Contract of `list_memories(cursor, limit)`: at most `limit` memories and the cursor to
    resume from. None starts at the beginning; passing the returned cursor back gives the
    next page, and later gives the memories added since. A page shorter than `limit` is the
    last one for now. A cursor is the store's own opaque string, only ever passed back; a
    memory may come again (a changed one, or after the store was rewritten) rather than be
    skipped."""

    async def list_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[Memory], str | None]: ...


def enumerable(backend: MemoryBackend) -> EnumerableBackend | None:
    """`backend` when it declares `capabilities.listing`; else None."""
    return cast(EnumerableBackend, backend) if backend.capabilities.listing else None


class VersionedBackend(Protocol):
    """A store that can tell at once whether anything in it changed: the optional ability
    a backend declares with `capabilities.versioned`, that lets the derived indexes keep the
    memories their candidates were read back as (`derived.readback`) instead of reading them
    again for every query.

    Contract of `data_version()`: a token (compared with `==`) equal to an earlier one only
    when no change committed in between, by this process or any other; None when the store
    cannot tell now. It is called on the event loop for every query: it never waits (for a
    lock, the disk's queue, the network) and takes microseconds."""

    def data_version(self) -> Hashable | None: ...


def versioned(backend: MemoryBackend) -> VersionedBackend | None:
    """`backend` when it declares `capabilities.versioned`; else None."""
    return cast(VersionedBackend, backend) if backend.capabilities.versioned else None


def dispatching(backend: MemoryBackend) -> bool:
    """Whether `backend` declares `capabilities.dispatch_signal`: its search runs on a worker
    thread and says when its statement goes to the database, which lets the retrieval run
    its own Python (the local index's lists) while the database searches, instead of before
    it (a worker thread needs Python's lock for its own Python first, which the event loop's
    thread would hold).

    Contract: each `search` calls `dispatched()` on its worker thread once its own Python work
    is done, just before the statement that does the search's work (it may not, when it
    fails before: the caller waits a bounded moment at most)."""
    return backend.capabilities.dispatch_signal


_DISPATCHED = Hook("on_dispatched")


def dispatched() -> None:
    """A store's worker thread: the search's statement goes to the database now (see
    `dispatching`); tells the caller that asked (`on_dispatched`), if any."""
    _DISPATCHED.now()


def on_dispatched(hook: Callable[[], None]) -> AbstractContextManager[None]:
    """Within the block, a store's `dispatched()` calls `hook` (from its worker thread: the
    hook must be thread-safe). The store's worker runs in a copy of the caller's context."""
    return _DISPATCHED.when(hook)


_LEFT_OUT = Tell("on_left_out")


def left_out(why: str) -> None:
    """A store that answers for several (`fused`): a search answered without one of them,
    which failed (`why` names it and the cause); tells the caller that asked
    (`on_left_out`), if any. A search that none answered raises instead."""
    _LEFT_OUT.now(why)


def on_left_out(hook: Callable[[str], None]) -> AbstractContextManager[None]:
    """Within the block, a store's `left_out(why)` calls `hook(why)` (from any task the block
    starts: the hook must be thread-safe)."""
    return _LEFT_OUT.when(hook)


class SupersedingBackend(Protocol):
    """A store that can mark a memory as corrected by a later one: the optional ability a
    backend declares with `capabilities.supersede` (see `pipeline.conflicts`).

    Contract of `supersede(old_id, new_id)`: afterwards the memories the store returns for
    `old_id` carry `superseded_by == new_id` and `superseded_at` (when the correction took
    effect: the new memory's time where the store keeps one, else when it was marked); both
    must exist (`BackendError` otherwise). Each store keeps the mark its own way (a column,
    a tool's supersede flag, a link, frontmatter, an observation)."""

    async def supersede(self, old_id: str, new_id: str) -> None: ...


def superseding(backend: MemoryBackend) -> SupersedingBackend | None:
    """`backend` when it declares `capabilities.supersede`; else None."""
    return cast(SupersedingBackend, backend) if backend.capabilities.supersede else None


class ExportingBackend(Protocol):
    """A store that can list every edge between its live memories, page by page: with
    `list_memories`, what a lossless export needs (`capabilities.export`; see
    `service.transfer`).

    Contract of `list_edges(cursor, limit)`: at most `limit` edges whose two ends are live
    memories, and the cursor to resume from (None starts at the beginning; a page shorter than
    `limit` is the last). The implicit edges a store computes (memories sharing an entity)
    are not listed: a restore computes them again."""

    async def list_edges(self, cursor: str | None, limit: int) -> tuple[list[Edge], str | None]: ...


def exporting(backend: MemoryBackend) -> ExportingBackend | None:
    """`backend` when it declares `capabilities.export`; else None."""
    return cast(ExportingBackend, backend) if backend.capabilities.export else None


class RestoringBackend(Protocol):
    """A store that can take an export verbatim (`capabilities.restore`; see
    `service.transfer`): nothing judged, nothing merged, no links of its own made.

    Contract of `restore(memories, edges)`: in one transaction, into a store that holds no
    memory at all (live or forgotten; `BackendError` otherwise, and nothing written): each
    memory with its id, time, type, labels, metadata and superseded mark, in the order given
    (the store's listing order afterwards), then each edge. Every edge and mark names a memory
    of `memories` (the caller checks)."""

    async def restore(self, memories: Sequence[Memory], edges: Sequence[Edge]) -> None: ...


def restoring(backend: MemoryBackend) -> RestoringBackend | None:
    """`backend` when it declares `capabilities.restore`; else None."""
    return cast(RestoringBackend, backend) if backend.capabilities.restore else None


class BackingUpBackend(Protocol):
    """A store kept in a file of its own that it can copy consistently while it is written
    (`capabilities.backup`; a SQLite file, through SQLite's online backup API).

    Contract of `backup(dest)`: `dest` (which must not exist) becomes a copy of the store as
    one committed moment left it, with every write acknowledged before the call; writers are
    not stopped meanwhile. Raises BackendError when the copy cannot be made (nothing is left
    at `dest` then)."""

    async def backup(self, dest: Path) -> None: ...


def backing_up(backend: MemoryBackend) -> BackingUpBackend | None:
    """`backend` when it declares `capabilities.backup`; else None."""
    return cast(BackingUpBackend, backend) if backend.capabilities.backup else None
