"""Fault injection: a wrapper backend that hangs, fails, returns junk or dies mid-call on
chosen operations.

Named as what it is. It wraps a real backend and only misbehaves where told to:
- "hang": never answers (the caller's timeout has to end the call);
- "error" / "transient": raises `BackendError` (transient=False / True) before acting;
- "junk": acts, then answers with malformed records: objects of the wrong type, NaN scores
  and weights, ranks out of order, repeated ids, ids no other call knows, naive timestamps;
- "die": acts (the write is stored, the edge made), then raises a transient `BackendError`
  as if the connection broke before the answer came back;
- "bug": raises a `TypeError` before acting, as an adapter with a bug in it would (not a
  store failure: the request has to fail with it, never answer without the store).
`times=N` limits each fault to the first N calls of its operation.
"""

from __future__ import annotations

import math
import os
import socket
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar, cast

import anyio

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.errors import BackendError, OutboxError
from memory_orchestrator.models import (
    Capabilities,
    Edge,
    HealthCheck,
    Memory,
    MetaValue,
    Neighbor,
    NewMemory,
    QueuedWrite,
    SearchFilters,
    SearchHit,
    WriteOutcome,
    WriteRequest,
)
from memory_orchestrator.state.outbox import Outbox
from memory_orchestrator.state.traces import TraceStore

Mode = Literal["hang", "error", "transient", "junk", "die", "bug"]
T = TypeVar("T")
JUNK_ID = "junk_unknown_id"


# The optional abilities that bring a method of their own, and that method
# (docs/explanation/store-abilities.md). A wrapper here forwards only the methods every store
# has, so it declares none of these, whatever its inner store can do.
METHOD_OF = {
    "listing": "list_memories",
    "supersede": "supersede",
    "versioned": "data_version",
    "export": "list_edges",
    "restore": "restore",
    "backup": "backup",
}


def forwarded(caps: Capabilities) -> Capabilities:
    """`caps` less the abilities a wrapper that forwards the required methods alone lacks
    (and less the dispatch signal: the wrapper's own work comes between)."""
    lacks = dict.fromkeys([*METHOD_OF, "dispatch_signal"], False)
    return caps.model_copy(update=lacks)


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
        times: int | None = None,
    ) -> None:
        self.inner = inner
        self.name = f"faulty-{inner.name}"
        self.capabilities = forwarded(capabilities or inner.capabilities)
        self.faults = faults
        self.fail_queries = tuple(fail_queries)
        self.calls: dict[str, int] = {}
        self.times = times
        self.injected: dict[str, int] = {}

    @property
    def notes(self) -> tuple[str, ...]:
        return self.inner.notes

    def _mode(self, op: str, query: str | None = None) -> Mode | None:
        self.calls[op] = self.calls.get(op, 0) + 1
        mode = self.faults.get(op)
        if mode is None:
            return None
        if (
            query is not None
            and self.fail_queries
            and not any(q in query for q in self.fail_queries)
        ):
            return None
        if self.times is not None and self.injected.get(op, 0) >= self.times:
            return None
        self.injected[op] = self.injected.get(op, 0) + 1
        return mode

    async def _around(
        self,
        op: str,
        act: Callable[[], Awaitable[T]],
        junk: Callable[[T], Any],
        query: str | None = None,
    ) -> T:
        """Run `act` on the real store under the fault configured for `op`."""
        mode = self._mode(op, query)
        if mode == "hang":
            await anyio.sleep(3600)
        if mode in ("error", "transient"):
            raise BackendError(f"injected {op} failure", transient=mode == "transient")
        if mode == "bug":
            raise TypeError(f"injected bug in {op}")
        result = await act()
        if mode == "die":
            raise BackendError(f"injected: connection lost after {op} acted", transient=True)
        if mode == "junk":
            return cast(T, junk(result))
        return result

    async def search(
        self, query: str, top_k: int, filters: SearchFilters | None = None
    ) -> list[SearchHit]:
        return await self._around(
            "search", lambda: self.inner.search(query, top_k, filters), _junk_hits, query
        )

    async def neighbors(
        self,
        node_ids: Sequence[str],
        edge_types: Sequence[str] | None = None,
        hops: int = 1,
        limit: int = 50,
    ) -> list[Neighbor]:
        return await self._around(
            "neighbors",
            lambda: self.inner.neighbors(node_ids, edge_types, hops, limit),
            lambda found: _junk_neighbors(found, node_ids),
        )

    async def get_memories(self, ids: Sequence[str]) -> list[Memory]:
        return await self._around(
            "get_memories", lambda: self.inner.get_memories(ids), _junk_memories
        )

    async def write(self, memory: NewMemory) -> WriteOutcome:
        return await self._around(
            "write", lambda: self.inner.write(memory), lambda _: {"id": None, "ok": "yes"}
        )

    async def write_many(self, memories: Sequence[NewMemory]) -> list[WriteOutcome]:
        return await self._around(
            "write_many", lambda: self.inner.write_many(memories), lambda got: [None, *got]
        )

    async def link(
        self,
        source_id: str,
        target_id: str,
        relation: str,
        weight: float = 1.0,
        meta: dict[str, MetaValue] | None = None,
    ) -> Edge:
        return await self._around(
            "link",
            lambda: self.inner.link(source_id, target_id, relation, weight, meta),
            lambda _: "linked",
        )

    async def forget(self, memory_id: str) -> bool:
        return await self._around("forget", lambda: self.inner.forget(memory_id), lambda _: "no")

    async def known_entities(self, limit: int = 500) -> list[str]:
        return await self._around(
            "known_entities",
            lambda: self.inner.known_entities(limit),
            lambda names: [None, 42, "", "x" * 5000, *names],
        )

    async def health(self) -> list[HealthCheck]:
        return await self._around(
            "health", self.inner.health, lambda checks: ["all good", None, *checks]
        )

    async def close(self) -> None:
        await self.inner.close()


# ---------------------------------------------------------------- junk answers


def _bad_memory() -> Memory:
    """A well-formed record with an id no other call knows, a naive timestamp and NaNs."""
    return Memory(
        id=JUNK_ID,
        content="a junk record no one wrote",
        created_at=datetime(2020, 1, 1),  # naive: no timezone
        importance=math.nan,
        confidence=math.inf,
    )


def _junk_hits(hits: list[SearchHit]) -> list[Any]:
    junk: list[Any] = [None, {"memory": "not a record"}, "hit"]
    junk.append(SearchHit(memory=_bad_memory(), rank=0, score=math.nan))
    for hit in hits:
        junk.append(hit.model_copy(update={"score": math.nan, "rank": -hit.rank}))
        junk.append(hit)  # the same id twice
    return junk


def _junk_neighbors(found: list[Neighbor], seeds: Sequence[str]) -> list[Any]:
    seed = seeds[0] if seeds else JUNK_ID
    junk: list[Any] = [None, 3.5]
    junk.append(
        Neighbor(
            memory=_bad_memory(),
            seed_id=seed,
            via_id=seed,
            edge_type="temporal",
            weight=math.nan,
            hops=0,
        )
    )
    junk.extend(n.model_copy(update={"weight": math.inf}) for n in found)
    return junk


def _junk_memories(found: list[Memory]) -> list[Any]:
    return [None, _bad_memory(), *found, *found]


class FailingTraceStore(TraceStore):
    """Fault injection: a trace store whose every write fails (a full or broken disk)."""

    def _insert(self, rows: list[tuple[str, str, str, str]]) -> None:
        raise sqlite3.OperationalError("disk I/O error")


class UnwritableOutbox(Outbox):
    """Fault injection: an outbox that reads but cannot take a write (a full disk, or a file
    made immutable; `tests/e2e/test_immutable_files.py` makes one for real where it can)."""

    def put(self, request: WriteRequest, reason: str) -> QueuedWrite:
        raise OutboxError(f"outbox {self.path}: disk I/O error")


def peer_of_another_user(sock: socket.socket) -> int:
    """Fault injection: the uid check of the shared process and its clients
    (`faces.shared.address.check_peer`) is told that the process at the other end of `sock`
    runs as another user (the kernel's answer, SO_PEERCRED, cannot be faked in a test)."""
    return os.getuid() + 1
