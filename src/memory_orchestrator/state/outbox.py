"""The durable outbox: writes the store cannot take now, kept in SQLite until it can.

A write is queued when the store is unavailable (a transient error after retries, a timeout,
or a store whose health check fails) and the caller is told "queued". The service replays
the queue oldest first on the next write and health call and on `orchestrator outbox flush`;
a write waiting here holds back every later write, so they reach the store in order.

Exactly once: a queued row is committed before the caller hears "queued" (so a crash after
that loses nothing), and before a replayed write is sent the store is searched for its
content hash, so a write that reached the store just before a crash (or whose answer was
lost) is marked delivered instead of being written again. Delivered rows are kept (newest
`keep`) so `orchestrator outbox list --all` can show what happened.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from pathlib import Path

import anyio.to_thread
from pydantic import ValidationError

from memory_orchestrator.errors import OutboxError
from memory_orchestrator.models import (
    OutboxState,
    QueuedWrite,
    WriteAction,
    WriteRequest,
    moved_aside,
)
from memory_orchestrator.text import content_hash

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    request TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    queued_at TEXT NOT NULL,
    reason TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    delivered_at TEXT,
    memory_id TEXT,
    action TEXT
);
CREATE INDEX IF NOT EXISTS outbox_state ON outbox (state, seq);
"""
_COLS = (
    "seq, request, content_hash, state, queued_at, reason, attempts, last_error,"
    " delivered_at, memory_id, action"
)
Row = tuple[int, str, str, str, str, str, int, str | None, str | None, str | None, str | None]


def _now() -> str:
    return datetime.now(UTC).isoformat()


class Outbox:
    """A FIFO of `WriteRequest`s in one SQLite file (`path=None`: in memory only).

    The file is created by the first `put`; reading a missing file reports an empty queue."""

    def __init__(self, path: Path | None, *, keep: int = 1000) -> None:
        self.path = path
        self.keep = keep
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    # ------------------------------------------------------------------ plumbing

    def _conn(self, create: bool) -> sqlite3.Connection | None:
        if self._db is not None:
            return self._db
        if self.path is not None and not create and not self.path.exists():
            return None
        try:
            if self.path is None:
                db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(
                    self.path, timeout=5.0, check_same_thread=False, isolation_level=None
                )
                # A rollback journal, not WAL: WAL maps the -shm file into memory, and a
                # write to a mapped page of a file made immutable kills the process (SIGBUS);
                # with a journal such a file gives an error like any other.
                with contextlib.suppress(sqlite3.OperationalError):  # an old WAL file in use
                    db.execute("PRAGMA journal_mode=DELETE")
                db.execute("PRAGMA synchronous=FULL")  # a queued write survives a power cut
            db.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise OutboxError(f"outbox {self.path or ':memory:'}: {exc}") from exc
        self._db = db
        return db

    def _run(self, sql: str, args: tuple[object, ...] = (), *, create: bool = False) -> list[Row]:
        with self._lock:
            db = self._conn(create)
            if db is None:
                return []
            try:
                return db.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise OutboxError(f"outbox {self.path or ':memory:'}: {exc}") from exc

    # ------------------------------------------------------------------ queue

    def put(self, request: WriteRequest, reason: str) -> QueuedWrite:
        """Keep `request`; committed (fsync'd) before this returns."""
        body = request.model_dump_json()
        rows = self._run(
            "INSERT INTO outbox (request, content_hash, queued_at, reason) VALUES (?, ?, ?, ?)"
            f" RETURNING {_COLS}",
            (body, content_hash(request.memory.content), _now(), reason),
            create=True,
        )
        return _record(rows[0])

    def depth(self) -> int:
        rows = self._run("SELECT count(*) FROM outbox WHERE state = 'pending'")
        return int(rows[0][0]) if rows else 0

    def pending(self, limit: int = 1000) -> list[QueuedWrite]:
        """Waiting writes, oldest first."""
        rows = self._run(
            f"SELECT {_COLS} FROM outbox WHERE state = 'pending' ORDER BY seq LIMIT ?", (limit,)
        )
        return [_record(r) for r in rows]

    def entries(self, *, delivered: bool = False, limit: int = 1000) -> list[QueuedWrite]:
        """Waiting writes (and, with `delivered`, those already replayed), oldest first."""
        where = "" if delivered else "WHERE state = 'pending'"
        rows = self._run(
            f"SELECT {_COLS} FROM (SELECT {_COLS} FROM outbox {where} ORDER BY seq DESC LIMIT ?)"
            " ORDER BY seq",
            (limit,),
        )
        return [_record(r) for r in rows]

    @contextmanager
    def claim(self, item: QueuedWrite) -> Iterator[QueuedWrite | None]:
        """`item`, this process's to replay until the block ends (None: another replica
        holds it; only a shared outbox, `postgres.state.PgOutbox`, ever says so)."""
        yield item

    def _on(self, seq: int, sql: str, args: tuple[object, ...]) -> list[Row]:
        """`sql` about queued write `seq` (a shared outbox runs it where `seq` is claimed)."""
        return self._run(sql, args)

    def failed(self, seq: int, error: str) -> None:
        """A replay of `seq` failed; it stays at the head of the queue."""
        self._on(
            seq,
            "UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE seq = ?",
            (error, seq),
        )

    def delivered(self, seq: int, memory_id: str | None, action: WriteAction) -> QueuedWrite:
        """`seq` reached the store; it is never replayed again."""
        rows = self._on(
            seq,
            "UPDATE outbox SET state = 'delivered', attempts = attempts + 1, delivered_at = ?,"
            f" memory_id = ?, action = ? WHERE seq = ? RETURNING {_COLS}",
            (_now(), memory_id, action.value, seq),
        )
        self._on(
            seq,
            "DELETE FROM outbox WHERE state = 'delivered' AND seq NOT IN (SELECT seq FROM outbox"
            " WHERE state = 'delivered' ORDER BY seq DESC LIMIT ?)",
            (self.keep,),
        )
        return _record(rows[0])

    def last_error(self) -> str | None:
        rows = self._run(
            "SELECT last_error FROM outbox WHERE state = 'pending' AND last_error IS NOT NULL"
            " ORDER BY seq LIMIT 1"
        )
        return str(rows[0][0]) if rows else None

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


class AsyncOutbox:
    """An `Outbox` as the service uses it from the event loop: every call in a worker thread,
    so that an outbox waiting on its file or its database (a shared outbox: within its
    bound, `postgres.database`) holds that caller only, never every other request."""

    def __init__(self, outbox: Outbox) -> None:
        self.outbox = outbox

    async def put(self, request: WriteRequest, reason: str) -> QueuedWrite:
        return await anyio.to_thread.run_sync(self.outbox.put, request, reason)

    async def depth(self) -> int:
        return await anyio.to_thread.run_sync(self.outbox.depth)

    async def pending(self, limit: int = 1000) -> list[QueuedWrite]:
        return await anyio.to_thread.run_sync(self.outbox.pending, limit)

    async def last_error(self) -> str | None:
        return await anyio.to_thread.run_sync(self.outbox.last_error)

    async def failed(self, seq: int, error: str) -> None:
        await anyio.to_thread.run_sync(self.outbox.failed, seq, error)

    async def delivered(self, seq: int, memory_id: str | None, action: WriteAction) -> QueuedWrite:
        return await anyio.to_thread.run_sync(self.outbox.delivered, seq, memory_id, action)

    @asynccontextmanager
    async def claim(self, item: QueuedWrite) -> AsyncIterator[QueuedWrite | None]:
        """`Outbox.claim`, entered and left in worker threads."""
        held = self.outbox.claim(item)
        mine = await anyio.to_thread.run_sync(held.__enter__)
        try:
            yield mine
        except BaseException as exc:
            # left even when the replay's time ran out: a claim is a row lock
            with anyio.CancelScope(shield=True):
                kept = await anyio.to_thread.run_sync(
                    held.__exit__, type(exc), exc, exc.__traceback__
                )
            if not kept:
                raise
        else:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(held.__exit__, None, None, None)

    def close(self) -> None:
        self.outbox.close()


def _request(body: str) -> WriteRequest:
    """A queued request as it was kept. One queued before client metadata was refused the
    orchestrator's own keys is delivered with those keys moved aside (`client:<key>`)."""
    try:
        return WriteRequest.model_validate_json(body)
    except ValidationError:
        kept = json.loads(body)
        memory = kept.get("memory") if isinstance(kept, dict) else None
        if not isinstance(memory, dict) or not isinstance(memory.get("metadata"), dict):
            raise
        memory["metadata"] = moved_aside(memory["metadata"])
        return WriteRequest.model_validate(kept)


def _record(row: Row) -> QueuedWrite:
    seq, body, digest, state, queued, reason, attempts, error, done, mem_id, action = row
    return QueuedWrite(
        seq=seq,
        request=_request(body),
        content_hash=digest,
        state=OutboxState(state),
        queued_at=datetime.fromisoformat(queued),
        reason=reason,
        attempts=attempts,
        last_error=error,
        delivered_at=datetime.fromisoformat(done) if done else None,
        memory_id=mem_id,
        action=WriteAction(action) if action else None,
    )
