"""The health page's report: the latest check, kept, with the time it was made.

A store's own health checks can be slow (a store behind a process or a network; the embedded
store keeps its whole-file integrity check off the health call, but another store may not),
so the page shows the latest report with its age instead of checking on every visit: the
server checks once at start, again in the background after a visit finds the report older
than `max_age_s`, and at once when asked (`/health?fresh=1`, the page's "Check now"). A
visit before the first check is done does not wait for it: the page says it is under way.
A check changes nothing (the pages are GETs): the outbox's queue is shown, not replayed
(the servers replay it on their schedule, `memory_health` and `orchestrator outbox flush` at
once).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.background import BackgroundTask

from memory_orchestrator.models import HealthReport
from memory_orchestrator.service import Orchestrator

__all__ = ["Checked", "HealthChecks"]

MAX_AGE_S = 30.0


@dataclass(frozen=True)
class Checked:
    report: HealthReport
    at: float  # time.monotonic() when the check finished
    took_ms: float

    def age_s(self) -> float:
        return time.monotonic() - self.at


class HealthChecks:
    """The latest health report of one orchestrator; one check at a time."""

    def __init__(self, orchestrator: Orchestrator, *, max_age_s: float = MAX_AGE_S) -> None:
        self._orchestrator, self.max_age_s = orchestrator, max_age_s
        self._latest: Checked | None = None
        self._lock = anyio.Lock()
        self._first = anyio.Event()  # set when the first check has ended
        # starts a task beside the requests (the server's task group, set at start); None: a
        # check runs after the answer that asked for it (in-process tests have no server)
        self.spawn: Callable[[Callable[[], Coroutine[Any, Any, None]]], object] | None = None

    @property
    def stale(self) -> bool:
        return self._latest is None or self._latest.age_s() > self.max_age_s

    async def check(self) -> Checked:
        """Check now (or wait for the check under way and take its report)."""
        before = self._latest
        async with self._lock:
            if self._latest is not None and self._latest is not before:
                return self._latest  # checked while this one waited
            started = time.perf_counter()
            try:
                # a page is a GET: the outbox is read, its writes not replayed
                report = await self._orchestrator.health(replay=False)
            finally:
                self._first.set()
            took = round((time.perf_counter() - started) * 1000, 1)
            self._latest = Checked(report, time.monotonic(), took)
            return self._latest

    async def first(self) -> Checked | None:
        """Wait for the first check to end (an event); its report."""
        await self._first.wait()
        return self._latest

    async def latest(self) -> Checked | None:
        """The latest report. When there is none yet: None while a server checks beside the
        requests (the page says the first check is under way), else a check now."""
        if self._latest is not None:
            return self._latest
        if self.spawn is not None:
            if not self._lock.locked():
                self.spawn(self.refresh)
            return None
        return await self.check()

    async def refresh(self) -> None:
        """A background check, skipped when one is under way."""
        if not self._lock.locked():
            await self.check()

    def again_if_stale(self) -> BackgroundTask | None:
        """Check again in the background when the report is old: a task beside the requests,
        or (without a server) a task for the answer to run once it is sent."""
        if not self.stale or self._lock.locked():
            return None
        if self.spawn is not None:
            self.spawn(self.refresh)
            return None
        return BackgroundTask(self.refresh)
