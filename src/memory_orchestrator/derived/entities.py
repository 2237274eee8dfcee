"""The entity names a store knows, cached for `cache_ttl_s` (the planner matches them)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.models import Trace

# (the store calls come from the service, which builds this: an import at load time
# would make a circle through the service package)
if TYPE_CHECKING:
    from memory_orchestrator.service.store_calls import StoreCalls


class KnownEntities:
    """The store's entity names, fetched at most once per `ttl_s()` seconds."""

    def __init__(
        self,
        store: MemoryBackend,
        calls: StoreCalls,
        ttl_s: Callable[[], float],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store, self._calls, self._ttl_s, self._clock = store, calls, ttl_s, clock
        self._cached: tuple[float, list[str]] | None = None
        self._asking: anyio.Event | None = None  # set when the store call under way is done

    async def names(self, trace: Trace) -> list[str]:
        """The names (most frequent first); [] when the store keeps no entity index or the
        call fails (with a note). A request that comes while another (or the servers'
        warm-up) is asking the store waits for that answer instead of asking again."""
        if not self._store.capabilities.entity_index:
            return []
        now = self._clock()
        if self._asking is not None:
            await self._asking.wait()
        if self._cached and now - self._cached[0] < self._ttl_s():
            trace.cache_hits += 1
            return self._cached[1]
        self._asking = asking = anyio.Event()
        try:
            names = await self._calls.bounded(
                trace, "known entities", self._store.known_entities, None
            )
        finally:
            self._asking = None
            asking.set()
        if names is None:
            return []
        self._cached = (now, names)
        return names

    def forget(self) -> None:
        """Drop the cache: the next call asks the store (a write may have added names)."""
        self._cached = None
