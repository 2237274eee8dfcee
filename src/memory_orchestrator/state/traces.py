"""Trace storage: every request's trace, kept in SQLite so it can be explained and replayed.

Traces are written behind the request: `save` hands the trace to a writer thread, which
serializes and stores it (many at a time, in one transaction) while the next request waits on
its store. Every read (`get`, `recent`, `since`) and `close` first waits until everything
saved before it is stored, so a trace id an answer carries can be explained at once; `flush`
takes a bound, for a caller that must answer in time (health).

A batch that cannot be stored is logged and counted (`errors`, `last_error`), and `failing`
says whether the latest batch failed: once one is stored again, the store is healthy again.
A failed write's own error is kept (SQLite ends a transaction itself on a full disk, so the
ROLLBACK after it would only say "no transaction is active").
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import sqlite3
import threading
import time
import weakref
from collections import OrderedDict
from datetime import UTC, datetime
from pathlib import Path

from memory_orchestrator.errors import OrchestratorError, unexpected
from memory_orchestrator.models import Trace

log = logging.getLogger(__name__)


class TraceStore:
    """Keeps the newest `keep` traces. With `path=None` they live in memory only."""

    def __init__(self, path: Path | None, *, keep: int = 5000) -> None:
        self._keep = keep
        self._lock = threading.Lock()  # the store: the memory dict or the connection
        self._memory: OrderedDict[str, str] = OrderedDict()
        self._db: sqlite3.Connection | None = None
        self._writes = 0
        self._queue: list[Trace] = []  # saved, not yet stored
        self._queued = threading.Condition()  # guards _queue, _busy and _writer
        self._busy = False  # the writer holds traces taken from the queue
        self._saved = 0  # traces handed to `save`, ever
        self._done = 0  # of those, stored or failed (in the order saved)
        self._writer: threading.Thread | None = None
        self.errors = 0  # traces that could not be stored (logged)
        self.last_error: str | None = None
        self.failing = False  # the latest batch could not be stored
        self.stored_at: float | None = None  # time.time() of the latest batch stored
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            # A rollback journal, not WAL: WAL maps the -shm file into memory, and a file made
            # immutable then kills the process (SIGBUS) instead of failing a write.
            with contextlib.suppress(sqlite3.OperationalError):  # an old WAL file in use
                self._db.execute("PRAGMA journal_mode=DELETE")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=2000")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS traces (seq INTEGER PRIMARY KEY AUTOINCREMENT,"
                " trace_id TEXT UNIQUE NOT NULL, tool TEXT, created_at TEXT, body TEXT NOT NULL)"
            )
        self._closed = False
        _OPEN.add(self)  # a process that exits without close() still stores what it saved

    def save(self, trace: Trace) -> None:
        """Queue `trace` for storage; returns at once. The caller must not change it after."""
        with self._queued:
            self._queue.append(trace)
            self._saved += 1
            self._closed = False
            if self._writer is None or not self._writer.is_alive():
                writer = threading.Thread(target=self._write_loop, name="trace-writer", daemon=True)
                try:
                    writer.start()
                except RuntimeError:  # no new threads (interpreter shutdown): flush() stores it
                    return
                self._writer = writer
            self._queued.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every trace saved so far is stored (or has failed and been logged);
        False when `timeout` seconds passed first (they are still being stored)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._queued:
            target = self._saved
            while self._done < target:
                if self._writer is None or not self._writer.is_alive():
                    self._busy = False
                    batch, self._queue = self._queue, []
                    self._store(batch)  # no writer (exiting): store them here
                    self._done += len(batch)
                    continue
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._queued.wait(0.1 if left is None else min(0.1, left))
        return True

    @property
    def waiting(self) -> int:
        """Traces saved and not yet stored (nor failed)."""
        return self._saved - self._done

    def _write_loop(self) -> None:
        while True:
            with self._queued:
                while not self._queue:
                    self._busy = False
                    self._queued.notify_all()
                    if self._closed:
                        return
                    self._queued.wait()
                batch, self._queue = self._queue, []
                self._busy = True
            try:
                self._store(batch)
            except Exception as exc:  # a process edge (the writer thread) outlives a bug
                unexpected("trace writer", exc)
                self._failed(len(batch), exc)
            with self._queued:
                self._done += len(batch)
                self._queued.notify_all()

    def _store(self, batch: list[Trace]) -> None:
        rows: list[tuple[str, str, str, str]] = []
        for t in batch:
            try:  # the deferred work runs here, behind the request
                rows.append(
                    (t.trace_id, t.tool, t.created_at.isoformat(), t.complete().model_dump_json())
                )
            except ValueError as exc:  # text JSON cannot carry (a lone surrogate)
                self._failed(1, exc)
            # Hand the GIL over after each trace: a request waiting for it would otherwise
            # wait out the interpreter's whole switch interval behind this thread's work.
            time.sleep(0)
        try:
            self._insert(rows)
        except (sqlite3.Error, OSError, OrchestratorError) as exc:  # logged, not raised
            self._failed(len(rows), exc)
        else:
            if rows:
                self.failing, self.stored_at = False, time.time()

    def _failed(self, count: int, exc: Exception) -> None:
        self.errors += count
        self.failing = True
        self.last_error = f"{type(exc).__name__}: {exc}"
        log.warning("%d trace(s) not stored: %s", count, self.last_error)

    def _insert(self, rows: list[tuple[str, str, str, str]]) -> None:
        with self._lock:
            if self._db is None:
                for trace_id, _, _, body in rows:
                    self._memory[trace_id] = body
                    self._memory.move_to_end(trace_id)
                while len(self._memory) > self._keep:
                    self._memory.popitem(last=False)
                return
            db = self._db
            db.execute("BEGIN")
            try:
                db.executemany(
                    "INSERT OR REPLACE INTO traces (trace_id, tool, created_at, body)"
                    " VALUES (?,?,?,?)",
                    rows,
                )
                before, self._writes = self._writes, self._writes + len(rows)
                if before // 100 != self._writes // 100:
                    db.execute(
                        "DELETE FROM traces WHERE seq <= (SELECT MAX(seq) FROM traces) - ?",
                        (self._keep,),
                    )
                db.execute("COMMIT")
            except BaseException:
                # SQLite ends the transaction itself on some errors (a full disk); the error
                # to report is the write's, not the ROLLBACK's
                if db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        db.execute("ROLLBACK")
                raise

    def get(self, trace_id: str) -> Trace | None:
        self.flush()
        with self._lock:
            if self._db is None:
                body = self._memory.get(trace_id)
            else:
                row = self._db.execute(
                    "SELECT body FROM traces WHERE trace_id = ?", (trace_id,)
                ).fetchone()
                body = row[0] if row else None
        return Trace.model_validate_json(body) if body else None

    def recent(self, limit: int = 20) -> list[Trace]:
        self.flush()
        with self._lock:
            if self._db is None:
                bodies = list(self._memory.values())[-limit:][::-1]
            else:
                rows = self._db.execute(
                    "SELECT body FROM traces ORDER BY seq DESC LIMIT ?", (limit,)
                ).fetchall()
                bodies = [r[0] for r in rows]
        return [Trace.model_validate_json(b) for b in bodies]

    def older(self, before: str | None = None, limit: int = 100) -> list[Trace]:
        """Up to `limit` kept traces stored before the trace `before` (from the newest when
        None), newest first: the whole store read page by page. An unknown `before` gives []."""
        if before is None:
            return self.recent(limit)
        self.flush()
        with self._lock:
            if self._db is None:
                ids = list(self._memory)
                end = ids.index(before) if before in ids else 0
                bodies = [self._memory[i] for i in ids[max(0, end - limit) : end]][::-1]
            else:
                rows = self._db.execute(
                    "SELECT body FROM traces WHERE seq < (SELECT seq FROM traces WHERE"
                    " trace_id = ?) ORDER BY seq DESC LIMIT ?",
                    (before, limit),
                ).fetchall()
                bodies = [r[0] for r in rows]
        return [Trace.model_validate_json(b) for b in bodies]

    def since(self, start: datetime | None = None) -> list[Trace]:
        """Every kept trace created at or after `start` (all when None), oldest first."""
        self.flush()
        with self._lock:
            if self._db is None:
                bodies = list(self._memory.values())
            else:
                rows = self._db.execute("SELECT body FROM traces ORDER BY seq").fetchall()
                bodies = [r[0] for r in rows]
        traces = [Trace.model_validate_json(b) for b in bodies]
        if start is None:
            return traces
        floor = start if start.tzinfo else start.replace(tzinfo=UTC)
        return [t for t in traces if t.created_at >= floor]

    def close(self) -> None:
        self.flush()
        with self._queued:
            self._closed = True  # the writer ends; a later save starts another
            self._queued.notify_all()
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


_OPEN: weakref.WeakSet[TraceStore] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    for store in list(_OPEN):
        store.flush()
