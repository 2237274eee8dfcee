"""Retries for transient store errors: bounded exponential backoff with jitter.

`RetryingBackend` wraps the store the service talks to:
- reads (`search`, `neighbors`, `get_memories`, `known_entities`) and `forget` (idempotent)
  are retried when the store raises `BackendError(transient=True)`, at most
  `attempts` tries, sleeping `min(max_delay, base_delay * 2**n)` times a random factor in
  [0.5, 1] between them; any other error, and the caller's timeout, end the call at once;
- `write` is never retried blindly: a failed write may have happened, so before another try
  the store is searched for a memory with exactly this content (the content hash, see
  `content_key`), and when one is there its id is the answer and nothing is written again;
- `write_many` and `link` go through once (a batch or an edge cannot be checked cheaply).

Every retry leaves a note; the service copies the notes of a request into its trace
(`begin_notes`, `take_notes`).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

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
    WriteAction,
    WriteOutcome,
)
from memory_orchestrator.text import normalize

T = TypeVar("T")

_notes: ContextVar[list[str] | None] = ContextVar("retry_notes", default=None)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a transient error is retried."""

    attempts: int = 3
    base_delay_s: float = 0.05
    max_delay_s: float = 1.0

    def delay(self, retry: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait before retry number `retry` (1-based): exponential, capped at
        `max_delay_s`, with jitter (a random factor in [0.5, 1])."""
        ceiling = min(self.max_delay_s, self.base_delay_s * 2.0 ** (retry - 1))
        return ceiling * (0.5 + 0.5 * rand())


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, BackendError) and exc.transient


def content_key(content: str) -> str:
    """The content hash writes are recognised by (whitespace and unicode normalized)."""
    return hashlib.sha256(normalize(content).encode()).hexdigest()


def begin_notes() -> None:
    """Start collecting retry notes for the request this task now serves."""
    _notes.set([])


def take_notes() -> list[str]:
    """The retry notes made since `begin_notes` (in this task and the tasks it started)."""
    notes = _notes.get()
    if notes is None:
        return []
    taken = list(notes)
    notes.clear()
    return taken


def _note(text: str) -> None:
    notes = _notes.get()
    if notes is not None:
        notes.append(text)


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def retry(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    what: str,
    *,
    before_retry: Callable[[], Awaitable[T | None]] | None = None,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> T:
    """`call()`, retried on transient `BackendError`s only (see the module docstring).

    `before_retry` runs before each new try; when it returns a value, that is the answer
    (used by writes: the failed try may have stored the memory already)."""
    for attempt in range(1, policy.attempts + 1):
        try:
            return await call()
        except BackendError as exc:
            if not exc.transient or attempt >= policy.attempts:
                if exc.transient and attempt > 1:
                    _note(f"{what}: gave up after {attempt} tries: {_err(exc)}")
                raise
            pause = policy.delay(attempt)
            _note(f"{what}: transient error ({_err(exc)}); retry {attempt} in {pause:.3f}s")
        await sleep(pause)
        if before_retry is not None:
            found = await before_retry()
            if found is not None:
                return found
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


class RetryingBackend:
    """A `MemoryBackend` that retries the inner store's transient errors (module docstring)."""

    def __init__(self, inner: MemoryBackend, policy: RetryPolicy) -> None:
        self.inner = inner
        self.policy = policy
        self.name = inner.name
        self.capabilities: Capabilities = inner.capabilities

    @property
    def notes(self) -> tuple[str, ...]:
        return self.inner.notes

    async def search(
        self, query: str, top_k: int, filters: SearchFilters | None = None
    ) -> list[SearchHit]:
        return await retry(lambda: self.inner.search(query, top_k, filters), self.policy, "search")

    async def neighbors(
        self,
        node_ids: Sequence[str],
        edge_types: Sequence[str] | None = None,
        hops: int = 1,
        limit: int = 50,
    ) -> list[Neighbor]:
        return await retry(
            lambda: self.inner.neighbors(node_ids, edge_types, hops, limit),
            self.policy,
            "neighbors",
        )

    async def get_memories(self, ids: Sequence[str]) -> list[Memory]:
        return await retry(lambda: self.inner.get_memories(ids), self.policy, "get_memories")

    async def known_entities(self, limit: int = 500) -> list[str]:
        return await retry(lambda: self.inner.known_entities(limit), self.policy, "known_entities")

    async def forget(self, memory_id: str) -> bool:
        return await retry(lambda: self.inner.forget(memory_id), self.policy, "forget")

    async def write(self, memory: NewMemory) -> WriteOutcome:
        async def already_there() -> WriteOutcome | None:
            found = await find_written(self.inner, memory)
            if found is not None:
                _note(f"write: the failed try had stored {found.id}; not written again")
            return found

        return await retry(
            lambda: self.inner.write(memory), self.policy, "write", before_retry=already_there
        )

    async def write_many(self, memories: Sequence[NewMemory]) -> list[WriteOutcome]:
        return await self.inner.write_many(memories)

    async def link(
        self,
        source_id: str,
        target_id: str,
        relation: str,
        weight: float = 1.0,
        meta: dict[str, MetaValue] | None = None,
    ) -> Edge:
        return await self.inner.link(source_id, target_id, relation, weight, meta)

    async def health(self) -> list[HealthCheck]:
        return await self.inner.health()

    async def close(self) -> None:
        await self.inner.close()


async def find_written(backend: MemoryBackend, memory: NewMemory) -> WriteOutcome | None:
    """The live memory holding exactly `memory`'s content (same content hash), if any.

    The check before a write is tried again: searching is safe to repeat, a write is not.
    A search error here propagates (then nothing is known, and nothing is written)."""
    key = content_key(memory.content)
    for hit in await backend.search(memory.content, 5):
        if isinstance(hit, SearchHit) and content_key(hit.memory.content) == key:
            return WriteOutcome(
                id=hit.memory.id,
                action=WriteAction.ADDED,
                detail=f"added (found by content hash {key[:12]} after a failed try)",
            )
    return None
