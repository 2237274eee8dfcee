"""The embedded store's integrity check (`PRAGMA quick_check`), off the path of `health`.

quick_check reads every page of the file, so it takes longer than any other check and grows
with the file. So `health` does not run it on every call; it reports the latest result with its
age, and the check runs, in a thread of its own, one at a time, on a reader connection of its
own (a read: it never waits for a write, nor holds one up):

- **due, and waited for** (at most `wait_s`): the first `health` after the file was opened or
  opened again (a new file, a replaced one, one put back), the first after an I/O error on any
  call, and every `health` while the latest check found a fault (so a repaired file is seen
  at once);
- **in the background**: a `health` that finds the latest result older than `every_s` (or
  than 100 times the check's own duration, so that the check never takes more than 1% of a
  core) starts one and answers with the result it has.

A file that cannot be opened or read is the plain probe's to report ("not a database",
"locked"): the check is for damage that only a walk of every page finds.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from memory_orchestrator.backends.embedded_conn import Connections
from memory_orchestrator.errors import BackendError, describe, unexpected
from memory_orchestrator.text import duration

__all__ = ["EVERY_S", "WAIT_S", "Integrity"]

EVERY_S = 600.0  # the background check's period (at least)
WAIT_S = 3.0  # how long a due check is waited for (below the store calls' 5 s bound)
_SHARE = 100  # the period is at least this many times the check's own duration
_SHOWN = 5  # problems named in a failed check


@dataclass(frozen=True)
class _Done:
    problems: tuple[str, ...]  # empty: ok
    at: float  # the clock's time when it finished
    took_ms: float
    why: str  # what made it due
    opened: int  # `Connections.opened` when it ran: which opening of the file it checked
    faults: int  # `Connections.faults` then


class Integrity:
    """The latest integrity check of one embedded store, and the next one (see the module
    docstring). Thread-safe; `report` is called from `health`'s worker thread."""

    def __init__(
        self,
        conns: Connections,
        *,
        every_s: float = EVERY_S,
        wait_s: float = WAIT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._conns, self.every_s, self.wait_s, self._clock = conns, every_s, wait_s, clock
        self._cond = threading.Condition()
        self._latest: _Done | None = None
        self._running: tuple[float, str] | None = None  # since (monotonic), why
        self._finished = 0  # checks finished so far
        self._thread: threading.Thread | None = None
        self._checking: sqlite3.Connection | None = None  # interrupted by `close`
        self._closed = False

    def report(self) -> str:
        """The latest result, after waiting (at most `wait_s`) for a check that is due;
        raises BackendError when it found the file damaged."""
        with self._cond:
            due = self._due()
            if due is not None:
                before = self._finished
                self._start(due)
                self._cond.wait_for(
                    lambda: self._finished > before or self._closed, timeout=self.wait_s
                )
            elif self._stale():
                self._start("scheduled")
            latest, running = self._latest, self._running
        return self._describe(latest, running)

    @property
    def runs(self) -> int:
        """Checks finished so far."""
        return self._finished

    def wait(self) -> None:
        """Wait until no check is under way (for tests: an event, not a sleep)."""
        with self._cond:
            self._cond.wait_for(lambda: self._running is None or self._closed)

    def close(self) -> None:
        """Stop a check under way (interrupted) and wait for its thread."""
        with self._cond:
            self._closed = True
            checking, thread = self._checking, self._thread
            self._cond.notify_all()
        if checking is not None:
            checking.interrupt()
        if thread is not None:
            thread.join(timeout=30)

    # ------------------------------------------------------------------ internals

    def _due(self) -> str | None:
        """Why a check must be waited for now (the caller holds `_cond`); None: it need not."""
        latest, conns = self._latest, self._conns
        if latest is None or latest.opened != conns.opened:
            return "the file was opened"
        if latest.faults != conns.faults:
            return "after an I/O error"
        if latest.problems:
            return "the last check found a fault"
        return None

    def _stale(self) -> bool:
        latest = self._latest
        assert latest is not None
        period = max(self.every_s, _SHARE * latest.took_ms / 1000)
        return self._clock() - latest.at >= period

    def _start(self, why: str) -> None:
        if self._running is not None or self._closed:
            return
        self._running = (self._clock(), why)
        self._thread = threading.Thread(
            target=self._run, args=(why,), name="embedded-integrity", daemon=True
        )
        self._thread.start()

    def _run(self, why: str) -> None:
        started = time.perf_counter()
        seen = (self._conns.opened, self._conns.faults)
        try:
            seen, problems = self._conns.read(self._check, fresh=True)
        except BackendError as exc:  # "malformed": a fault found; "locked": checked again
            problems = (f"could not run: {exc}" if exc.transient else str(exc),)
        except (sqlite3.Error, OSError) as exc:  # not run to the end: checked again later
            problems = (f"could not run: {describe(exc)}",)
        except Exception as exc:  # a process edge (a worker thread): a bug is reported
            unexpected("embedded integrity check", exc)
            problems = (f"could not run: {describe(exc)}",)
        took = round((time.perf_counter() - started) * 1000, 1)
        with self._cond:
            self._running = None
            self._finished += 1
            if not self._closed:
                self._latest = _Done(problems, self._clock(), took, why, *seen)
            self._cond.notify_all()

    def _check(self, conn: sqlite3.Connection) -> tuple[tuple[int, int], tuple[str, ...]]:
        seen = (self._conns.opened, self._conns.faults)  # the opening this connection reads
        with self._cond:
            if self._closed:
                return seen, ()
            self._checking = conn
        try:
            rows = conn.execute("PRAGMA quick_check").fetchall()
        finally:
            with self._cond:
                self._checking = None
        problems = tuple(str(row[0]) for row in rows)
        return seen, () if problems == ("ok",) else problems

    def _describe(self, latest: _Done | None, running: tuple[float, str] | None) -> str:
        now = self._clock()
        under_way = ""
        if running is not None:
            under_way = f"quick_check under way for {now - running[0]:.1f} s ({running[1]})"
        if latest is None or latest.opened != self._conns.opened:
            return f"readable; {under_way or 'quick_check not run yet'}"
        if latest.problems:
            shown = "; ".join(latest.problems[:_SHOWN])
            if shown.startswith("could not run"):
                raise BackendError(f"integrity check (quick_check) {shown}")
            raise BackendError(f"integrity check failed {duration(now - latest.at)} ago: {shown}")
        period = max(self.every_s, _SHARE * latest.took_ms / 1000)
        detail = (
            f"quick_check ok {duration(now - latest.at)} ago ({latest.took_ms:g} ms, {latest.why});"
        )
        return f"{detail} {under_way or f'checked again every {duration(period)}'}"
