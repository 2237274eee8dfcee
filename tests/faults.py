"""Fault injection: a wrapper backend that hangs, fails or returns junk on chosen operations.

Named as what it is. It wraps a real backend and only misbehaves where told to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import anyio

from memory_orchestrator.backends.base import BackendError, MemoryBackend
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

Mode = Literal["hang", "error", "transient"]


class FaultyBackend:
    """Delegates to `inner`; operations in `faults` hang, raise, or raise transiently.

    `fail_queries` restricts search faults to queries containing one of those strings.
    """

    def __init__(
        self,
        inner: MemoryBackend,
        faults: dict[str, Mode],
        *,
        fail_queries: Sequence[str] = (),
        capabilities: Capabilities | None = None,
    ) -> None:
        self.inner = inner
        self.name = f"faulty-{inner.name}"
        self.capabilities = capabilities or inner.capabilities
        self.faults = faults
        self.fail_queries = tuple(fail_queries)
        self.calls: dict[str, int] = {}

    @property
    def notes(self) -> tuple[str, ...]:
        return self.inner.notes

    async def _maybe_fail(self, op: str, query: str | None = None) -> None:
        self.calls[op] = self.calls.get(op, 0) + 1
        mode = self.faults.get(op)
        if mode is None:
            return
        if (
            query is not None
            and self.fail_queries
            and not any(q in query for q in self.fail_queries)
        ):
            return
        if mode == "hang":
            await anyio.sleep(3600)
        raise BackendError(f"injected {op} failure", transient=mode == "transient")

    async def search(
        self, query: str, top_k: int, filters: SearchFilters | None = None
    ) -> list[SearchHit]:
        await self._maybe_fail("search", query)
        return await self.inner.search(query, top_k, filters)

    async def neighbors(
        self,
        node_ids: Sequence[str],
        edge_types: Sequence[str] | None = None,
        hops: int = 1,
        limit: int = 50,
    ) -> list[Neighbor]:
        await self._maybe_fail("neighbors")
        return await self.inner.neighbors(node_ids, edge_types, hops, limit)

    async def get_memories(self, ids: Sequence[str]) -> list[Memory]:
        await self._maybe_fail("get_memories")
        return await self.inner.get_memories(ids)

    async def write(self, memory: NewMemory) -> WriteOutcome:
        await self._maybe_fail("write")
        return await self.inner.write(memory)

    async def write_many(self, memories: Sequence[NewMemory]) -> list[WriteOutcome]:
        await self._maybe_fail("write_many")
        return await self.inner.write_many(memories)

    async def link(
        self,
        source_id: str,
        target_id: str,
        relation: str,
        weight: float = 1.0,
        meta: dict[str, MetaValue] | None = None,
    ) -> Edge:
        await self._maybe_fail("link")
        return await self.inner.link(source_id, target_id, relation, weight, meta)

    async def forget(self, memory_id: str) -> bool:
        await self._maybe_fail("forget")
        return await self.inner.forget(memory_id)

    async def known_entities(self, limit: int = 500) -> list[str]:
        await self._maybe_fail("known_entities")
        return await self.inner.known_entities(limit)

    async def health(self) -> list[HealthCheck]:
        await self._maybe_fail("health")
        return await self.inner.health()

    async def close(self) -> None:
        await self.inner.close()
