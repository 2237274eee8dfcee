"""Stage 2: run the subqueries concurrently against the store and fuse the lists with RRF.

A failed or slow call does not fail the request: the others still count, and the trace says
which call was lost and why. A store call still running `list_budget_s` after the start, when
the local index's lists are in, is stopped: it costs its list, not the request's time.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import anyio

from memory_orchestrator.backends.base import MemoryBackend, on_dispatched
from memory_orchestrator.errors import STORE_ERRORS
from memory_orchestrator.filtering import matches
from memory_orchestrator.models import (
    Candidate,
    EventKind,
    Memory,
    SearchFilters,
    SearchHit,
    Source,
    Stage,
    TraceEvent,
    event,
    render,
)
from memory_orchestrator.pipeline.filters import missing_filter_support
from memory_orchestrator.pipeline.fusion import rrf
from memory_orchestrator.pipeline.reranker import best_first
from memory_orchestrator.text import cut_at_word


@dataclass(frozen=True)
class SubQuery:
    text: str
    weight: float = 1.0
    filters: SearchFilters | None = None


class Listed(NamedTuple):
    """A hit of a list from elsewhere than the store (a derived index's): the memory, read back
    from the store, and the list's own score; its rank is its place in the list. (A plain
    tuple: the ~70 of each request's index lists are read once, by `_Listing.of`.)"""

    memory: Memory
    score: float


Hit = SearchHit | Listed
Prefetch = Callable[[], Awaitable[Sequence[tuple[SubQuery, Sequence[Hit]]]]]


DISPATCH_WAIT_S = 0.002  # the longest the prefetched lists wait for the store's searches


class Lost(NamedTuple):
    """A store search that failed or timed out: why, and whether a retry may work."""

    reason: str
    transient: bool


@dataclass
class Retrieval:
    candidates: list[Candidate]
    events: list[TraceEvent] = field(default_factory=list)
    calls: int = 0
    failed: int = 0  # store searches that brought no list (failed, timed out or cut)
    lost: list[Lost] = field(default_factory=list)  # those that failed or timed out

    @property
    def store_unread(self) -> Lost | None:
        """The first failure when no store search brought a list and one failed (a search
        cut by `list_budget_s` is slow, not failed); None when the store was searched."""
        if self.calls and self.failed == self.calls and self.lost:
            return self.lost[0]
        return None


async def retrieve(
    backend: MemoryBackend,
    subqueries: Sequence[SubQuery],
    *,
    per_query: int,
    timeout_s: float,
    rrf_k: int = 60,
    prefetch: Prefetch | None = None,
    max_chars: int | None = None,
    list_budget_s: float | None = None,
    dispatching: bool = False,
) -> Retrieval:
    """Search every subquery at once, and run `prefetch` (ranked lists from elsewhere, e.g.
    the derived local indexes') alongside; fuse them all; apply filters the store could not
    apply. `prefetch` must not raise (it reports its own failures).

    With `max_chars`, no store receives a longer query: a longer subquery is cut at a word
    boundary (a note says so). With `list_budget_s`, a store call still running that long
    after the start, once `prefetch` has given a non-empty list, is stopped and its list left
    out (a note says so): a slow or locked store costs a list, not the request's time.
    Without such a list every store call has its whole `timeout_s`.

    `dispatching`: the store says when each search's statement goes to its database
    (`backends.base.dispatching`); `prefetch` then waits for that (at most
    `DISPATCH_WAIT_S`), so that its Python runs while the database searches: a store's worker
    thread needs Python's lock for its own Python first, which this thread would hold."""
    calls = _Calls(backend, per_query, timeout_s, max_chars, list_budget_s, dispatching)
    await calls.run(subqueries, prefetch)
    notes = calls.notes
    for sub in subqueries:
        for name in missing_filter_support(sub.filters, backend.capabilities):
            notes.append(_said(EventKind.FILTERED_AFTER, filter=name))

    found = [
        _Listing.of(sub, hits)
        for sub, hits in zip(subqueries, calls.results, strict=True)
        if hits is not None
    ]
    candidates = _fuse([*found, *calls.prefetched], rrf_k)
    failed = sum(1 for hits in calls.results if hits is None)
    return Retrieval(
        candidates=candidates,
        events=sorted({render(e): e for e in notes}.values(), key=render),  # once each
        calls=len(subqueries),
        failed=failed,
        lost=calls.lost,
    )


class _Calls:
    """One retrieval's store calls and prefetch, run at once (see `retrieve`)."""

    def __init__(
        self,
        backend: MemoryBackend,
        per_query: int,
        timeout_s: float,
        max_chars: int | None,
        list_budget_s: float | None,
        dispatching: bool,
    ) -> None:
        self.backend, self.per_query, self.timeout_s = backend, per_query, timeout_s
        self.max_chars, self.budget, self.dispatching = max_chars, list_budget_s, dispatching
        self.results: list[list[SearchHit] | None] = []
        self.notes: list[TraceEvent] = []
        self.lost: list[Lost] = []
        self.prefetched: list[_Listing] = []
        self._running: dict[int, anyio.CancelScope] = {}
        self._started = 0.0
        self._cut_at = math.inf  # once the prefetched lists are in: when store calls stop
        self._dispatched: set[int] = set()  # the searches whose statement went to the store
        self._all_dispatched: asyncio.Event | anyio.Event = (
            asyncio.Event() if _on_asyncio() else anyio.Event()
        )

    async def run(self, subqueries: Sequence[SubQuery], prefetch: Prefetch | None) -> None:
        self.results = [None] * len(subqueries)
        self._started = anyio.current_time()
        # the store's searches first: they wait in worker threads (the store's own I/O)
        # while `prefetch` does its work on this one
        calls = [self._one(index, sub) for index, sub in enumerate(subqueries)]
        if prefetch is not None:
            calls.append(self._other(prefetch))
        await _together(calls)

    async def _one(self, index: int, sub: SubQuery) -> None:
        text = sub.text if self.max_chars is None else cut_at_word(sub.text, self.max_chars)
        if text != sub.text:
            self.notes.append(
                _said(EventKind.SUBQUERY_CUT, chars=len(text), limit=self.max_chars or 0)
            )
        hook = self._hook(index)
        with anyio.CancelScope(deadline=self._cut_at) as scope:
            self._running[index] = scope
            try:
                with (
                    anyio.fail_after(self.timeout_s),
                    on_dispatched(hook) if hook else nullcontext(),
                ):
                    found = await self.backend.search(text, self.per_query, sub.filters)
                self.results[index] = found
            except TimeoutError:
                self.notes.append(
                    _said(EventKind.SEARCH_TIMED_OUT, query=sub.text, timeout_s=self.timeout_s)
                )
                self.lost.append(Lost(f"it did not answer in {self.timeout_s:g}s", True))
            except STORE_ERRORS as exc:  # a store error must not fail the request (a bug does)
                error = f"{type(exc).__name__}: {exc}"
                self.notes.append(_said(EventKind.SEARCH_FAILED, query=sub.text, error=error))
                self.lost.append(Lost(str(exc) or type(exc).__name__, is_transient(exc)))
        self._running.pop(index, None)
        self._seen(index)  # (done: dispatched or not, nothing more to wait for)
        if scope.cancelled_caught:
            self.notes.append(
                _said(EventKind.SEARCH_LEFT_OUT, query=sub.text, budget_s=self.budget or 0.0)
            )

    def _hook(self, index: int) -> Callable[[], None] | None:
        """What the store's worker thread calls when search `index` is dispatched: a note
        to this loop (thread-safe); None when nothing waits for it (or not on asyncio)."""
        if not self.dispatching:
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # another event loop (trio): the lists are made at once
            return None

        def hook() -> None:
            with suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(self._seen, index)

        return hook

    def _seen(self, index: int) -> None:
        self._dispatched.add(index)
        if len(self._dispatched) >= len(self.results):
            self._all_dispatched.set()

    async def _other(self, fetch: Prefetch) -> None:
        """The prefetched lists; once they are in and one holds something, the store calls
        still running at `list_budget_s` after the start are stopped then (at once when that
        moment has passed): their scopes get that deadline. With a `dispatching` store, the
        lists are made once its searches are in its database's hands (or have ended)."""
        if self.dispatching and self.results:
            with anyio.move_on_after(DISPATCH_WAIT_S):
                await self._all_dispatched.wait()
        fetched = await fetch()
        # listed now, while the store's searches run (this thread would wait for them)
        self.prefetched.extend(_Listing.of(sub, hits) for sub, hits in fetched)
        if self.budget is not None and any(hits for _, hits in fetched):
            self._cut_at = self._started + self.budget
            for scope in list(self._running.values()):
                scope.deadline = self._cut_at


def _said(kind: EventKind, **values: str | int | float) -> TraceEvent:
    return event(Stage.RETRIEVER, kind, **values)


def is_transient(exc: Exception) -> bool:
    """Whether a retry may work: the store's own word, else a timeout's or an OS error's."""
    said = getattr(exc, "transient", None)
    return said if isinstance(said, bool) else isinstance(exc, TimeoutError | OSError)


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # another event loop (trio)
        return False
    return True


async def _together(calls: list[Coroutine[Any, Any, None]]) -> None:
    """Run `calls` at once, in that order, until all are done (none raises but when
    cancelled). On asyncio its own `gather`, which cancels them all when the caller is
    cancelled: anyio's task group costs more a task (each gets a cancel scope and an
    event), and a request runs one for every retrieval."""
    if _on_asyncio():
        tasks = [asyncio.ensure_future(call) for call in calls]
        try:
            await asyncio.gather(*tasks)
        except BaseException:  # (a bug, or cancelled): none is left running
            for task in tasks:
                task.cancel()
            raise
        return
    async with anyio.create_task_group() as group:
        for call in calls:
            group.start_soon(_awaited, call)


async def _awaited(call: Coroutine[Any, Any, None]) -> None:
    await call


class _Listing(NamedTuple):
    """A list's hits that pass its filters, in rank order, each as its memory's id, the
    memory and its `Source`."""

    sub: SubQuery
    entries: list[tuple[str, Memory, Source]]

    @classmethod
    def of(cls, sub: SubQuery, hits: Sequence[Hit]) -> _Listing:
        kept = [hit for hit in hits if matches(hit.memory, sub.filters)]
        return cls(
            sub,
            [
                (hit.memory.id, hit.memory, Source(sub.text, rank, hit.score, hit.memory.store))
                for rank, hit in enumerate(kept, start=1)
            ],
        )


def _fuse(lists: Sequence[_Listing], rrf_k: int) -> list[Candidate]:
    """One candidate per memory, with every list's rank for it, ordered by weighted RRF."""
    found: dict[str, tuple[Memory, list[Source]]] = {}
    rankings: list[list[str]] = []
    weights: list[float] = []
    for sub, entries in lists:
        rankings.append([memory_id for memory_id, _, _ in entries])
        weights.append(sub.weight)
        for memory_id, memory, source in entries:
            found.setdefault(memory_id, (memory, []))[1].append(source)
    fused = rrf(rankings, k=rrf_k, weights=weights)
    candidates = [
        Candidate(memory=memory, sources=tuple(sources), fused_score=fused[i])
        for i, (memory, sources) in found.items()
    ]
    best_first(candidates, lambda c: c.fused_score, lambda c: c.memory)
    return candidates
