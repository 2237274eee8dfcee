"""The outbox, the traces and the token list in PostgreSQL, shared by every replica
(`[shared] state = "postgres"`; tables from `postgres/migrations/0002_shared_state.sql`).

`PgOutbox` keeps the SQLite outbox's queue and rules (`state/outbox.py`) in a shared table. A
replica replaying a queued write first claims its row (`SELECT ... FOR UPDATE SKIP LOCKED`,
held until the write is marked delivered or failed): another replica skips a claimed row and
stops there, so writes still reach the store in order and each exactly once. A replica that
dies mid-replay loses its connection, which releases the row for the others.

`PgTraceStore` keeps the trace store's behaviour (saved behind the request, read after a
flush) with the rows in a shared table, so any replica explains or replays any trace.

`PgTombstones` keeps the forgotten memories (`state/forgotten.py`) in a shared table: a
memory forgotten on one replica is left out by every replica's next read (each read asks the
one-row version first, and the ids only when it moved).

`SharedTokens` is the token list in the database: tokens added there are accepted by every
replica (next to those in its config), without a restart.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import Connection
from psycopg.types.json import Jsonb

from memory_orchestrator.errors import BackendError, ForgetError, OutboxError
from memory_orchestrator.models import QueuedWrite, Trace
from memory_orchestrator.postgres.database import Database
from memory_orchestrator.state.forgotten import Row as TombstoneRow
from memory_orchestrator.state.forgotten import Tombstones
from memory_orchestrator.state.outbox import _COLS, Outbox, Row, _record
from memory_orchestrator.state.tokens import TokenSpec
from memory_orchestrator.state.traces import TraceStore

__all__ = ["PgOutbox", "PgTombstones", "PgTraceStore", "SharedTokens"]

Conn = Connection[tuple[Any, ...]]


def _fetch(conn: Conn, sql: str, args: Sequence[object]) -> list[Any]:
    cur = conn.execute(sql.replace("?", "%s").encode(), args)
    return cur.fetchall() if cur.description else []


class PgOutbox(Outbox):
    """The outbox in a shared table (see the module docstring)."""

    def __init__(self, db: Database, *, keep: int = 1000) -> None:
        super().__init__(None, keep=keep)
        self._pg = db
        self._held: dict[int, Conn] = {}  # seq -> the connection whose transaction claims it
        self._held_lock = threading.Lock()

    def _run(self, sql: str, args: tuple[object, ...] = (), *, create: bool = False) -> list[Row]:
        try:
            rows: list[Row] = self._pg.call(lambda conn: _fetch(conn, sql, args))
        except BackendError as exc:
            raise OutboxError(f"shared outbox: {exc}") from exc
        return rows

    def _on(self, seq: int, sql: str, args: tuple[object, ...]) -> list[Row]:
        """`sql` on the claiming transaction when `seq` is claimed here (it holds the row
        lock), else on any connection."""
        with self._held_lock:
            conn = self._held.get(seq)
        if conn is None:
            return self._run(sql, args)
        try:
            return _fetch(conn, sql, args)
        except (psycopg.Error, OSError) as exc:
            raise OutboxError(f"shared outbox: {exc}") from exc

    @contextmanager
    def claim(self, item: QueuedWrite) -> Iterator[QueuedWrite | None]:
        """The queued write, locked for this replica until the block ends; None when another
        replica holds it or has delivered it."""
        try:
            # held across the delivery of the write: each answer is bounded, not the whole
            with self._pg.connection(held=True) as conn, conn.transaction():
                row = conn.execute(
                    f"SELECT {_COLS} FROM outbox WHERE seq = %s AND state = 'pending'"
                    " FOR UPDATE SKIP LOCKED",
                    (item.seq,),
                ).fetchone()
                if row is None:
                    yield None
                    return
                with self._held_lock:
                    self._held[item.seq] = conn
                try:
                    yield _record(row)
                finally:
                    with self._held_lock:
                        self._held.pop(item.seq, None)
        except BackendError as exc:
            raise OutboxError(f"shared outbox: {exc}") from exc

    def close(self) -> None:
        self._pg.close()


class PgTraceStore(TraceStore):
    """The trace store in a shared table (see the module docstring)."""

    def __init__(self, db: Database, *, keep: int = 5000) -> None:
        super().__init__(None, keep=keep)
        self._pg = db
        self._stored = 0

    def _insert(self, rows: list[tuple[str, str, str, str]]) -> None:
        if not rows:
            return

        def run(conn: Conn) -> None:
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO traces (trace_id, tool, created_at, body) VALUES (%s,%s,%s,%s)"
                    " ON CONFLICT (trace_id) DO UPDATE SET body = excluded.body",
                    rows,
                )
                before, self._stored = self._stored, self._stored + len(rows)
                if before // 100 != self._stored // 100:
                    cur.execute(
                        "DELETE FROM traces WHERE seq <= (SELECT max(seq) FROM traces) - %s",
                        (self._keep,),
                    )

        self._pg.call(run)

    def _bodies(self, sql: str, args: tuple[object, ...] = ()) -> list[str]:
        self.flush(self._pg.call_timeout_s)  # then read, even when the newest are not in yet
        rows = self._pg.call(lambda conn: conn.execute(sql.encode(), args).fetchall())
        return [str(r[0]) for r in rows]

    def get(self, trace_id: str) -> Trace | None:
        bodies = self._bodies("SELECT body FROM traces WHERE trace_id = %s", (trace_id,))
        return Trace.model_validate_json(bodies[0]) if bodies else None

    def recent(self, limit: int = 20) -> list[Trace]:
        bodies = self._bodies("SELECT body FROM traces ORDER BY seq DESC LIMIT %s", (limit,))
        return [Trace.model_validate_json(b) for b in bodies]

    def older(self, before: str | None = None, limit: int = 100) -> list[Trace]:
        if before is None:
            return self.recent(limit)
        bodies = self._bodies(
            "SELECT body FROM traces WHERE seq < (SELECT seq FROM traces WHERE trace_id = %s)"
            " ORDER BY seq DESC LIMIT %s",
            (before, limit),
        )
        return [Trace.model_validate_json(b) for b in bodies]

    def since(self, start: datetime | None = None) -> list[Trace]:
        bodies = self._bodies("SELECT body FROM traces ORDER BY seq")
        traces = [Trace.model_validate_json(b) for b in bodies]
        if start is None:
            return traces
        floor = start if start.tzinfo else start.replace(tzinfo=UTC)
        return [t for t in traces if t.created_at >= floor]

    def close(self) -> None:
        super().close()
        self._pg.close()


_TOMBSTONE_COLS = "memory_id, store, reason, forgotten_at, purged_at"


class PgTombstones(Tombstones):
    """The forgotten memories in a shared table (see the module docstring)."""

    blocking = True  # every `ids()` is a round trip: callers run it in a worker thread

    def __init__(self, db: Database) -> None:
        super().__init__(None)
        self._pg = db
        self._version: int | None = None

    def ids(self) -> frozenset[str]:
        def read(conn: Conn) -> None:
            row = conn.execute("SELECT version FROM forgotten_version").fetchone()
            version = int(row[0]) if row else 0
            if version != self._version:
                ids = frozenset(str(r[0]) for r in conn.execute("SELECT memory_id FROM forgotten"))
                self._take(ids, version)

        self._call(read)
        return self._ids

    def _take(self, ids: frozenset[str], version: int) -> None:
        with self._lock:
            if ids != self._ids:
                self._ids = ids
                self.generation += 1
            self._version = version

    def _select(self, ids: list[str] | None) -> list[TombstoneRow]:
        sql = f"SELECT {_TOMBSTONE_COLS} FROM forgotten"
        args: tuple[object, ...] = ()
        if ids is not None:
            sql, args = sql + " WHERE memory_id = ANY(%s)", (ids,)
        rows: list[TombstoneRow] = self._call(
            lambda conn: conn.execute(
                (sql + " ORDER BY forgotten_at, memory_id").encode(), args
            ).fetchall()
        )
        return rows

    def _write(self, sql: str, rows: list[tuple[object, ...]]) -> set[str]:
        statement = sql.replace("?", "%s").encode()

        def run(conn: Conn) -> set[str]:
            done: set[str] = set()
            with conn.transaction():
                row = conn.execute(
                    "UPDATE forgotten_version SET version = version + 1 RETURNING version"
                ).fetchone()
                for args in rows:
                    done.update(str(r[0]) for r in conn.execute(statement, args).fetchall())
                ids = frozenset(str(r[0]) for r in conn.execute("SELECT memory_id FROM forgotten"))
            self._take(ids, int(row[0]) if row else 0)
            return done

        done: set[str] = self._call(run)
        return done

    def _call(self, fn: Any) -> Any:
        try:
            return self._pg.call(fn)
        except BackendError as exc:
            raise ForgetError(f"forgotten memories (shared): {exc}") from exc

    def close(self) -> None:
        self._pg.close()


class SharedTokens:
    """The bearer tokens kept in the shared database (as hashes, like the config's)."""

    def __init__(self, db: Database, *, refresh_s: float = 5.0) -> None:
        self._pg = db
        self._refresh_s = refresh_s
        self._cached: tuple[float, list[TokenSpec]] | None = None
        # a failed read, raised again without asking until the time given (at least a second
        # later): while the database does not answer, authentication waits on it once a while
        self._failed: tuple[float, BackendError] | None = None

    def add(self, token: TokenSpec) -> None:
        """Adds `token`, or replaces the one of the same name."""
        self._pg.call(
            lambda conn: conn.execute(
                "INSERT INTO http_tokens (name, spec) VALUES (%s, %s) ON CONFLICT (name)"
                " DO UPDATE SET spec = excluded.spec",
                (token.name, Jsonb(token.model_dump(mode="json"))),
            )
        )
        self._cached = None

    def remove(self, name: str) -> bool:
        rows = self._pg.call(
            lambda conn: conn.execute(
                "DELETE FROM http_tokens WHERE name = %s RETURNING name", (name,)
            ).fetchall()
        )
        self._cached = None
        return bool(rows)

    def tokens(self) -> list[TokenSpec]:
        """The shared tokens, re-read at most every `refresh_s`."""
        now = time.monotonic()
        if self._cached is not None and now - self._cached[0] < self._refresh_s:
            return self._cached[1]
        if self._failed is not None and now < self._failed[0]:
            raise self._failed[1]
        try:
            rows = self._pg.call(
                lambda conn: conn.execute("SELECT spec FROM http_tokens ORDER BY name").fetchall()
            )
        except BackendError as exc:
            self._failed = (time.monotonic() + max(self._refresh_s, 1.0), exc)
            raise
        specs = [TokenSpec.model_validate(r[0]) for r in rows]  # jsonb: read as a dict
        self._cached, self._failed = (now, specs), None
        return specs

    def close(self) -> None:
        self._pg.close()
