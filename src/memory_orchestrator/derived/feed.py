"""Keeping a derived local index in step with the store it is derived from.

A `Feed` pulls, page by page, the memories a store has added since the last pull, when the
store can list them (`EnumerableBackend`) and at most every `interval_s`, or at once when the
store says a change committed since (a store that hears other writers, such as PostgreSQL's
LISTEN/NOTIFY, has a `change_generation` that moves). The indexes fed this way are caches
the orchestrator owns; the store stays the source of truth.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import anyio

from memory_orchestrator.backends.base import EnumerableBackend
from memory_orchestrator.errors import STORE_ERRORS
from memory_orchestrator.models import EventKind, Memory, Stage, TraceEvent, event

_PAGE = 2000


@dataclass
class Pulled:
    added: int
    listed: bool
    event: TraceEvent | None = None  # what went wrong, if anything


class Feed:
    def __init__(self) -> None:
        self._cursor: str | None = None
        self._pulled_at: float | None = None
        self._generation: int | None = None

    def stale(self) -> None:
        """Pull at the next chance (the orchestrator just wrote to the store)."""
        self._pulled_at = None

    async def pull(
        self,
        store: EnumerableBackend | None,
        add: Callable[[Sequence[Memory]], int],
        *,
        interval_s: float,
        timeout_s: float,
    ) -> Pulled:
        """Hand the store's new memories to `add` (run in a worker thread; returns how many
        it took). A store that fails leaves the index as it was, with a note."""
        if store is None:  # the store cannot list its memories
            return Pulled(0, listed=False)
        now = time.monotonic()
        generation = _generation(store)  # read before listing: a change meanwhile pulls again
        recent = self._pulled_at is not None and now - self._pulled_at < interval_s
        if recent and (generation is None or generation == self._generation):
            return Pulled(0, listed=True)
        added = 0
        try:
            with anyio.fail_after(timeout_s):
                while True:
                    page, cursor = await store.list_memories(self._cursor, _PAGE)
                    if page:
                        added += await anyio.to_thread.run_sync(add, page)
                    self._cursor = cursor
                    if len(page) < _PAGE:
                        break
        except STORE_ERRORS as exc:  # a cache: a failed pull only leaves it older
            failed = event(Stage.INDEXES, EventKind.LOCAL_SYNC_FAILED, error=str(exc))
            return Pulled(added, listed=True, event=failed)
        self._pulled_at, self._generation = now, generation
        return Pulled(added, listed=True)


def _generation(store: EnumerableBackend) -> int | None:
    value = getattr(store, "change_generation", None)
    return value if isinstance(value, int) else None
