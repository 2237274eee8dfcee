"""Hearing the other replicas' writes as they commit (PostgreSQL LISTEN/NOTIFY).

Every change to `memories` is announced on the channel `memory_orchestrator_memories` with
its schema as the payload (migration `0004_memories_notify.sql`). A `Changes` holds one
connection of its own (outside the pool), LISTENs on it in a daemon thread and counts the
notices of its own schema: `generation`. The derived indexes' feed (`derived/feed.py`) pulls
the store's listing again as soon as the generation moved, instead of waiting for its
polling interval (`derived.indexes.SYNC_INTERVAL_S`), so a memory written on one replica is in
another's local and semantic indexes at its next request.

It is an accelerator, never a dependency: while the connection is down `generation` is None
and the feed polls as before; the thread reconnects with a backoff (0.5 s doubling to 10 s),
and a new connection moves the generation once (notices sent while it was down are lost).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psycopg

from memory_orchestrator.errors import BackendError, describe, unexpected

__all__ = ["CHANNEL", "Changes"]

CHANNEL = "memory_orchestrator_memories"
_WAKE_S = 1.0  # how often the listening thread looks whether it was closed
_BACKOFF = (0.5, 10.0)

log = logging.getLogger(__name__)

Connect = Callable[[], "psycopg.Connection[tuple[object, ...]]"]


class Changes:
    """Notices of changes to the store's `memories` in this connection's schema (see the
    module docstring). `start` is idempotent and never raises; `close` ends the thread."""

    def __init__(self, connect: Connect) -> None:
        self._connect = connect
        self._count = 0
        self._listening = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.error: str | None = None  # why it is not listening, when it is not

    @property
    def generation(self) -> int | None:
        """A number that moves each time another writer's change commits (and on each new
        connection); None while not listening (poll instead). Starts the thread."""
        self.start()
        return self._count if self._listening else None

    def start(self) -> None:
        if self._thread is not None:  # asked on every pull: no lock once it runs
            return
        with self._lock:
            if self._thread is not None or self._closed.is_set():
                return
            self._thread = threading.Thread(target=self._run, name="postgres-changes", daemon=True)
            self._thread.start()

    def close(self, timeout_s: float = 2 * _WAKE_S) -> None:
        self._closed.set()
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout_s)

    def _run(self) -> None:
        delay = _BACKOFF[0]
        while not self._closed.is_set():
            try:
                self._listen()
                delay = _BACKOFF[0]
            except (psycopg.Error, OSError, BackendError) as exc:  # the server gone: retry later
                self.error = f"not listening for changes: {str(exc).strip() or type(exc).__name__}"
                log.info("postgres changes: %s", self.error)
            except Exception as exc:  # a process edge (a worker thread): it outlives a bug
                self.error = f"not listening for changes: {describe(exc)}"
                unexpected("postgres change listener", exc)
            self._listening = False
            if self._closed.wait(delay):
                return
            delay = min(delay * 2, _BACKOFF[1])

    def _listen(self) -> None:
        with self._connect() as conn:
            row = conn.execute("SELECT current_schema()").fetchone()
            schema = str(row[0]) if row is not None else "public"
            conn.execute(f"LISTEN {CHANNEL}")
            self._count += 1  # whatever was sent while not listening is not known
            self._listening, self.error = True, None
            while not self._closed.is_set():
                for notice in conn.notifies(timeout=_WAKE_S):
                    if notice.payload == schema:
                        self._count += 1
                    if self._closed.is_set():
                        return
