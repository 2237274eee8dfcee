"""Guards around the store: retries of transient errors (bounded exponential backoff with
jitter) and a check of what comes back.

`GuardedBackend` wraps the store the service talks to:
- reads (`search`, `neighbors`, `get_memories`, `known_entities`) and `forget` (idempotent)
  are retried when the store raises `BackendError(transient=True)`, at most
  `attempts` tries, sleeping `min(max_delay, base_delay * 2**n)` times a random factor in
  [0.5, 1] between them; any other error, and the caller's timeout, end the call at once;
- `write` is never retried blindly: a failed write may have happened, so before another try
  the store is searched for a memory with exactly this content (the content hash, see
  `text.content_hash`), and when one is there its id is the answer and nothing is written again;
- `write_many` and `link` go through once (a batch or an edge cannot be checked cheaply), and
  so does `list_memories` (a bulk read its caller repeats), for stores declaring `listing`;
- malformed answers never reach the pipeline: records of the wrong type, repeated ids,
  non-finite scores, weights and confidences, naive timestamps, memories that were not asked
  for and entity names that are not short strings are dropped or repaired, with a note; a
  write answered with junk is looked up by its content hash (it may have happened).

Every retry leaves a note; the service copies the notes of a request into its trace
(`begin_notes`, `take_notes`).

`replay_on_schedule` is the outbox's own schedule: a server replays queued writes in the
background, so a write queued while the store was down reaches it once the store is back,
whether or not anyone writes again or asks for health.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Awaitable, Callable, Hashable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

import anyio

from memory_orchestrator.backends.base import MemoryBackend, enumerable, superseding, versioned
from memory_orchestrator.errors import (
    BackendError,
    CapabilityMissing,
    OrchestratorError,
    unexpected,
)
from memory_orchestrator.models import (
    MAX_LABEL_CHARS,
    Capabilities,
    Edge,
    EventKind,
    HealthCheck,
    Memory,
    MetaValue,
    Neighbor,
    NewMemory,
    SearchFilters,
    SearchHit,
    Stage,
    Status,
    TraceEvent,
    Value,
    WriteAction,
    WriteOutcome,
    event,
    to_utc,
)
from memory_orchestrator.text import content_hash, cut_at_word

T = TypeVar("T")

_log = logging.getLogger(__name__)
_notes: ContextVar[list[TraceEvent] | None] = ContextVar("retry_notes", default=None)


# The first pause before a retry: long enough for a store's busy lock or a restarting
# process to clear, short enough that a retried call still fits well inside its
# `retrieval.timeout_s`. It doubles with each retry.
BASE_DELAY_S = 0.05
# The longest pause: a store that is still down after it is one the outbox waits for, not
# one a request should keep waiting on.
MAX_DELAY_S = 1.0


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a transient error is retried."""

    attempts: int = 3
    base_delay_s: float = BASE_DELAY_S
    max_delay_s: float = MAX_DELAY_S

    @classmethod
    def tries(cls, attempts: int) -> RetryPolicy:
        """`attempts` tries with the module's pauses (read at call time, so that a test can
        shorten them)."""
        return cls(attempts, BASE_DELAY_S, MAX_DELAY_S)

    def delay(self, retry: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait before retry number `retry` (1-based): exponential, capped at
        `max_delay_s`, with jitter (a random factor in [0.5, 1])."""
        ceiling = min(self.max_delay_s, self.base_delay_s * 2.0 ** (retry - 1))
        return ceiling * (0.5 + 0.5 * rand())


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, BackendError) and exc.transient


def begin_notes() -> None:
    """Start collecting retry notes for the request this task now serves."""
    _notes.set([])


def take_notes() -> list[TraceEvent]:
    """The retry notes made since `begin_notes` (in this task and the tasks it started)."""
    notes = _notes.get()
    if notes is None:
        return []
    taken = list(notes)
    notes.clear()
    return taken


def _note(what_happened: EventKind, /, *ids: str, **values: Value) -> None:
    notes = _notes.get()
    if notes is not None:
        notes.append(event(Stage.STORE, what_happened, *ids, **values))


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
                    _note(EventKind.GAVE_UP, what=what, tries=attempt, error=_err(exc))
                raise
            pause = policy.delay(attempt)
            error = _err(exc)
            _note(EventKind.RETRY, what=what, error=error, attempt=attempt, pause_s=pause)
        await sleep(pause)
        if before_retry is not None:
            found = await before_retry()
            if found is not None:
                return found
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


# How often a server replays queued writes in the background: soon enough that a write
# queued while the store was briefly away shows up in searches within a moment of its
# return; the pause doubles while the store takes none, so a store that is down is not
# hammered.
REPLAY_EVERY_S = 2.0


async def replay_on_schedule(
    replay: Callable[[], Awaitable[tuple[int, int]]],
    every_s: float = REPLAY_EVERY_S,
    *,
    most_s: float = 60.0,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> None:
    """Replay queued writes until cancelled: every `every_s`; while writes wait and a replay
    delivers none, the pause doubles up to `most_s` (a store that is down is not hammered);
    a replay that delivers something, or an empty queue, brings it back to `every_s`.

    `replay()` answers (delivered, still waiting). A failing replay (the outbox itself
    unusable) is logged and tried again on the same schedule: the loop never ends by itself.
    A background worker: a bug is logged with its traceback and counted (`unexpected`)."""
    pause = every_s
    while True:
        await sleep(pause)
        try:
            delivered, waiting = await replay()
        except (OrchestratorError, OSError) as exc:
            _log.warning("background replay of the outbox failed: %s", _err(exc))
            delivered, waiting = 0, 1
        except Exception as exc:  # a process edge: the loop outlives a bug in one replay
            unexpected("background outbox replay", exc)
            delivered, waiting = 0, 1
        stuck = waiting and not delivered
        pause = min(max(most_s, every_s), pause * 2) if stuck else every_s


class GuardedBackend:
    """A `MemoryBackend` that retries the inner store's transient errors and checks its
    answers (see the module docstring)."""

    def __init__(
        self, inner: MemoryBackend, policy: RetryPolicy, *, max_query_chars: int | None = None
    ) -> None:
        self.inner = inner
        self.policy = policy
        self.max_query_chars = max_query_chars  # of the content-hash lookup before a retry
        self.name = inner.name
        self.capabilities: Capabilities = inner.capabilities

    @property
    def notes(self) -> tuple[str, ...]:
        return self.inner.notes

    async def search(
        self, query: str, top_k: int, filters: SearchFilters | None = None
    ) -> list[SearchHit]:
        hits = await retry(lambda: self.inner.search(query, top_k, filters), self.policy, "search")
        return _clean_hits(hits, top_k)

    async def neighbors(
        self,
        node_ids: Sequence[str],
        edge_types: Sequence[str] | None = None,
        hops: int = 1,
        limit: int = 50,
    ) -> list[Neighbor]:
        found = await retry(
            lambda: self.inner.neighbors(node_ids, edge_types, hops, limit),
            self.policy,
            "neighbors",
        )
        return _clean_neighbors(found, node_ids, limit)

    async def get_memories(self, ids: Sequence[str]) -> list[Memory]:
        found = await retry(lambda: self.inner.get_memories(ids), self.policy, "get_memories")
        return _clean_memories(found, ids)

    async def known_entities(self, limit: int = 500) -> list[str]:
        names = await retry(lambda: self.inner.known_entities(limit), self.policy, "known_entities")
        return _clean_names(names, limit)

    async def list_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[Memory], str | None]:
        """The inner store's page (`EnumerableBackend`), asked once: a bulk read that its
        caller repeats on its own schedule. Raises CapabilityMissing when the store does not
        declare `listing`."""
        inner = enumerable(self.inner)
        if inner is None:
            raise CapabilityMissing(f"{self.name} cannot list its memories")
        page, after = await inner.list_memories(cursor, limit)
        if after is not None and not isinstance(after, str):
            raise BackendError(f"the store answered a listing with {_kind(after)} as its cursor")
        return _clean_page(page), after

    async def forget(self, memory_id: str) -> bool:
        gone = await retry(lambda: self.inner.forget(memory_id), self.policy, "forget")
        if isinstance(gone, bool):
            return gone
        return not await self.get_memories([memory_id])  # junk answer: gone if not live

    async def write(self, memory: NewMemory) -> WriteOutcome:
        async def already_there() -> WriteOutcome | None:
            found = await find_written(self.inner, memory, self.max_query_chars)
            if found is not None:
                _note(EventKind.ALREADY_WRITTEN, found.id)
            return found

        outcome = await retry(
            lambda: self.inner.write(memory), self.policy, "write", before_retry=already_there
        )
        if isinstance(outcome, WriteOutcome) and outcome.id:
            return outcome
        found = await already_there()
        if found is None:
            raise BackendError(f"the store answered a write with {_kind(outcome)}, not an outcome")
        return found

    async def write_many(self, memories: Sequence[NewMemory]) -> list[WriteOutcome]:
        outcomes = await self.inner.write_many(memories)
        if not isinstance(outcomes, list) or not all(isinstance(o, WriteOutcome) for o in outcomes):
            raise BackendError(f"the store answered a batch write with {_kind(outcomes)} of junk")
        return outcomes

    async def link(
        self,
        source_id: str,
        target_id: str,
        relation: str,
        weight: float = 1.0,
        meta: dict[str, MetaValue] | None = None,
    ) -> Edge:
        edge = await self.inner.link(source_id, target_id, relation, weight, meta)
        if not isinstance(edge, Edge):
            raise BackendError(f"the store answered a link with {_kind(edge)}, not an edge")
        return edge

    def data_version(self) -> Hashable | None:
        """The inner store's change token (`VersionedBackend`): a local read, never retried.
        Raises CapabilityMissing when the store does not declare `versioned`."""
        inner = versioned(self.inner)
        if inner is None:
            raise CapabilityMissing(f"{self.name} cannot tell whether it changed")
        return inner.data_version()

    async def supersede(self, old_id: str, new_id: str) -> None:
        """The inner store's mark (`SupersedingBackend`), retried on transient errors (marking
        twice is harmless). Raises CapabilityMissing when the store does not declare it."""
        inner = superseding(self.inner)
        if inner is None:
            raise CapabilityMissing(f"{self.name} cannot mark a memory superseded")
        await retry(lambda: inner.supersede(old_id, new_id), self.policy, "supersede")

    async def health(self) -> list[HealthCheck]:
        checks = await self.inner.health()
        if not isinstance(checks, list):
            checks = [checks]
        return [
            c
            if isinstance(c, HealthCheck)
            else HealthCheck(
                name="backend",
                status=Status.ERROR,
                detail=f"the store's health answer held {_kind(c)}, not a check",
            )
            for c in checks
        ]

    async def close(self) -> None:
        await self.inner.close()


async def find_written(
    backend: MemoryBackend, memory: NewMemory, max_chars: int | None = None
) -> WriteOutcome | None:
    """The live memory holding exactly `memory`'s content (same content hash), if any.

    The check before a write is tried again: searching is safe to repeat, a write is not.
    The search sends the content cut at a word boundary to `max_chars` (the limit no store
    query may pass). A search error here propagates (then nothing is known, and nothing is
    written)."""
    key = content_hash(memory.content)
    query = memory.content if max_chars is None else cut_at_word(memory.content, max_chars)
    for hit in await backend.search(query, 5):
        if not isinstance(hit, SearchHit) or hit.memory.superseded_by is not None:
            continue  # a corrected memory written again (a reversal) is a new write
        if content_hash(hit.memory.content) == key:
            return WriteOutcome(
                id=hit.memory.id,
                action=WriteAction.ADDED,
                detail=f"added (found by content hash {key[:12]} after a failed try)",
            )
    return None


# ---------------------------------------------------------------- checking answers


def _kind(value: object) -> str:
    return "None" if value is None else f"a {type(value).__name__}"


def _clean_memory(memory: Memory) -> Memory:
    """A memory with finite numbers and an aware timestamp (naive taken as UTC)."""
    update: dict[str, object] = {}
    for name in ("importance", "confidence"):
        value = getattr(memory, name)
        if isinstance(value, float) and not math.isfinite(value):
            update[name] = None
    for name in ("created_at", "superseded_at"):
        moment = getattr(memory, name)
        if moment is not None and moment.tzinfo is None:
            update[name] = to_utc(moment)
    return memory.model_copy(update=update) if update else memory


def _not_a_list(what: str, found: object, then: str) -> None:
    _note(EventKind.NOT_A_LIST, what=what, kind=_kind(found), then=then)


def _dropped(what: str, count: int) -> None:
    if count:
        _note(EventKind.MALFORMED, what=what, count=count)


def _clean_hits(hits: object, top_k: int) -> list[SearchHit]:
    if not isinstance(hits, list):
        _not_a_list("search", hits, "no hits")
        return []
    kept: list[SearchHit] = []
    seen: set[str] = set()
    bad = 0
    for hit in hits:
        if not isinstance(hit, SearchHit) or not hit.memory.id or hit.memory.id in seen:
            bad += 1
            continue
        seen.add(hit.memory.id)
        memory, rank = _clean_memory(hit.memory), len(kept) + 1
        if not math.isfinite(hit.score):
            bad += 1
            hit = hit.model_copy(update={"score": 0.0})
        if memory is not hit.memory or rank != hit.rank:  # copy only what needs repair
            hit = hit.model_copy(update={"memory": memory, "rank": rank})
        kept.append(hit)
    _dropped("search", bad)
    return kept[:top_k]


def _clean_neighbors(found: object, seeds: Sequence[str], limit: int) -> list[Neighbor]:
    if not isinstance(found, list):
        _not_a_list("neighbors", found, "none")
        return []
    seed_set = set(seeds)
    kept: list[Neighbor] = []
    bad = 0
    for n in found:
        if (
            not isinstance(n, Neighbor)
            or n.hops < 1
            or n.memory.id in seed_set
            or not math.isfinite(n.weight)
        ):
            bad += 1
            continue
        memory = _clean_memory(n.memory)
        kept.append(n if memory is n.memory else n.model_copy(update={"memory": memory}))
    _dropped("neighbors", bad)
    return kept[:limit]


def _clean_memories(found: object, ids: Sequence[str]) -> list[Memory]:
    if not isinstance(found, list):
        _not_a_list("get_memories", found, "none")
        return []
    asked = set(ids)
    by_id: dict[str, Memory] = {}
    bad = 0
    for m in found:
        if not isinstance(m, Memory) or m.id not in asked or m.id in by_id:
            bad += 1
            continue
        by_id[m.id] = _clean_memory(m)
    _dropped("get_memories", bad)
    return [by_id[i] for i in dict.fromkeys(ids) if i in by_id]


def _clean_page(found: object) -> list[Memory]:
    if not isinstance(found, list):
        _not_a_list("list_memories", found, "none")
        return []
    kept: dict[str, Memory] = {}
    for m in found:
        if isinstance(m, Memory) and m.id and m.id not in kept:
            kept[m.id] = _clean_memory(m)
    _dropped("list_memories", len(found) - len(kept))
    return list(kept.values())


def _clean_names(names: object, limit: int) -> list[str]:
    if not isinstance(names, list):
        _not_a_list("known_entities", names, "none")
        return []
    kept = [n for n in names if isinstance(n, str) and n.strip() and len(n) <= MAX_LABEL_CHARS]
    _dropped("known_entities", len(names) - len(kept))
    return list(dict.fromkeys(kept))[:limit]
