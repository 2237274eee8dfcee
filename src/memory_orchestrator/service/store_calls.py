"""One bounded store call: a time limit, a count in the trace, and a note when it fails.

Reads that only enrich an answer (known entities, context neighbours, the derived indexes'
candidates, seed memories) must not fail the request when the store fails (a bug does):
`StoreCalls.bounded` runs one within
`retrieval.timeout_s`, counts it in the trace, and on a store failure (`STORE_ERRORS`) notes
"<what> unavailable: <error>" and returns the caller's fallback.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.errors import STORE_ERRORS, OrchestratorError, StoreUnreadable, describe
from memory_orchestrator.models import EventKind, HealthCheck, Stage, Status, Trace, event
from memory_orchestrator.pipeline.retriever import Lost, is_transient
from memory_orchestrator.settings import Settings

T = TypeVar("T")
F = TypeVar("F")


class StoreCalls:
    """Time limit and trace bookkeeping for store calls (the limit is read at each call)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings  # read at each call: `retrieval.timeout_s`

    @property
    def timeout_s(self) -> float:
        return self._settings.retrieval.timeout_s

    async def bounded(
        self,
        trace: Trace,
        what: str,
        call: Callable[[], Awaitable[T]],
        fallback: F,
        *,
        then: str = "",
    ) -> T | F:
        """`await call()` within the time limit; on a store failure an `UNAVAILABLE` event
        ("<what> unavailable: <error><then>") and `fallback`."""
        got = await self.attempt(trace, what, call, then=then)
        return fallback if isinstance(got, Lost) else got

    async def attempt(
        self, trace: Trace, what: str, call: Callable[[], Awaitable[T]], *, then: str = ""
    ) -> T | Lost:
        """As `bounded`, the failure returned as a `Lost` (why, and whether a retry may
        work), for a caller that must tell a failed read from an empty one."""
        trace.backend_calls += 1
        try:
            with anyio.fail_after(self.timeout_s):
                return await call()
        except STORE_ERRORS as exc:  # an enrichment: a store failure must not fail the request
            lost = describe(exc)
            trace.add(event(Stage.SERVICE, EventKind.UNAVAILABLE, what=what, error=lost, then=then))
            if isinstance(exc, TimeoutError):
                return Lost(f"it did not answer in {self.timeout_s:g}s", True)
            return Lost(str(exc) or type(exc).__name__, is_transient(exc))

    async def strict(self, call: Callable[[], Awaitable[T]], what: str = "the store call") -> T:
        """`await call()` within the time limit; failures propagate (a `TimeoutError` that
        names `what` and the limit too)."""
        try:
            with anyio.fail_after(self.timeout_s):
                return await call()
        except TimeoutError:
            raise TimeoutError(f"{what} timed out after {self.timeout_s:g}s") from None


UNREAD = "no search reached the store ({}); nothing was read, so this is not an empty memory"


def unreadable(trace: Trace, lost: Lost, said: str = UNREAD) -> StoreUnreadable:
    """The error of a read that found nothing because the store failed (`lost`, the first
    failure, fills `said`), with what to do; set as the trace's error (the caller finishes
    the trace, then raises)."""
    todo = (
        "ask again in a moment, and check the store's health if it persists"
        if lost.transient
        else "check the store's health, fix it and ask again"
    )
    message = f"{said.format(lost.reason)}: {todo} (trace {trace.trace_id})"
    trace.error = message
    return StoreUnreadable(message, transient=lost.transient, trace_id=trace.trace_id)


async def store_checks(store: MemoryBackend, calls: StoreCalls) -> list[HealthCheck]:
    """The store's own health checks, then a one-hit search probe (`retrieval`), each
    bounded; a failure of the error tree is an `error` check (a bug is raised)."""
    checks: list[HealthCheck] = []
    try:
        checks.extend(await calls.strict(store.health, f"{store.name} health"))
    except (OrchestratorError, OSError) as exc:  # the error tree: an error check
        checks.append(HealthCheck(name="backend", status=Status.ERROR, detail=describe(exc)))
    started = time.perf_counter()
    try:
        await calls.strict(lambda: store.search("health probe", 1), f"{store.name} search")
        checks.append(
            HealthCheck(
                name="retrieval",
                status=Status.OK,
                detail="search answers",
                latency_ms=round((time.perf_counter() - started) * 1000, 3),
            )
        )
    except (OrchestratorError, OSError) as exc:  # the error tree: an error check
        checks.append(HealthCheck(name="retrieval", status=Status.ERROR, detail=describe(exc)))
    return checks
