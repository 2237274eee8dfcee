"""What the PostgreSQL parts share: the connection pool, the schema migrations, errors.

Migrations are the numbered files in `migrations/` (`0001_name.sql`, ...), applied in
order at start by whichever replica opens the database first: under a transaction-level
advisory lock, each file in the transaction that records it in `schema_migrations`, so
replicas starting together apply each file exactly once, and a database newer than this code
(a version it does not know) is refused.

Connections come from a `psycopg_pool.ConnectionPool` (synchronous: callers run in worker
threads, as the SQLite parts do, so any event loop can use them), each with UTC as its time
zone and a statement timeout.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from memory_orchestrator.errors import BackendError
from memory_orchestrator.migrations import Migration, numbered

__all__ = ["Database", "migrations", "transient"]

T = TypeVar("T")

_LOCK_KEY = 0x6D6F5F6D6967  # the advisory lock that serializes migrations


def migrations() -> list[Migration]:
    """(version, name, SQL) of every migration file, in order (`memory_orchestrator.migrations`)."""
    return numbered("memory_orchestrator.postgres.migrations")


def transient(exc: BaseException) -> bool:
    """Whether a retry may succeed: the server unreachable or restarting, a serialization
    failure or deadlock, a lock or statement timeout, or no pooled connection in time."""
    if isinstance(exc, PoolTimeout | psycopg.OperationalError):
        return True
    state = getattr(getattr(exc, "diag", None), "sqlstate", None) or ""
    return state in {"40001", "40P01", "55P03", "57014"} or state.startswith("08")


def _where(dsn: str) -> str:
    """The DSN without its password, for messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "postgres (an unreadable dsn)"
    host, port, db = info.get("host", "localhost"), info.get("port", 5432), info.get("dbname", "")
    return f"postgres {host}:{port}/{db}"


class Database:
    """One pool on one database, opened (and migrated) on first use; `close` ends it (the
    last `close`, when it was `share`d).

    Opening never raises here: `call` raises `BackendError` (transient while the server
    cannot be reached) and `open_error` keeps the last reason."""

    def __init__(
        self,
        dsn: str | None,
        *,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout_s: float = 10.0,
        statement_timeout_ms: int = 30_000,
        what: str = "postgres",
    ) -> None:
        self.dsn = dsn
        self.where = _where(dsn) if dsn else what
        self.open_error: str | None = None if dsn else f"{what}: no dsn is set"
        self._sizes = (min_size, max(min_size, max_size))
        self._timeout = connect_timeout_s
        # the DSN's own `options` (e.g. `-c search_path=team_a`: one schema per deployment)
        # come first; UTC and the statement timeout are added to them
        own = f"-c TimeZone=UTC -c statement_timeout={int(statement_timeout_ms)}"
        self._options = " ".join(filter(None, [_dsn_options(dsn), own]))
        self._pool: ConnectionPool | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._uses = 1  # `share` adds one; `close` ends the pool when the last use closes

    def _open(self) -> ConnectionPool:
        with self._lock:
            if self._pool is not None:
                return self._pool
            if self._closed:
                raise BackendError(f"{self.where} is closed")
            if not self.dsn:
                raise BackendError(self.open_error or f"{self.where}: no dsn is set")
            pool = ConnectionPool(
                self.dsn,
                min_size=self._sizes[0],
                max_size=self._sizes[1],
                open=False,
                timeout=self._timeout,
                kwargs={
                    "connect_timeout": max(1, round(self._timeout)),
                    "options": self._options,
                    "autocommit": True,
                },
                name="memory-orchestrator",
            )
            try:
                pool.open(wait=True, timeout=self._timeout)
                with pool.connection() as conn:
                    migrate(conn)
            except Exception as exc:
                pool.close()
                self.open_error = f"{self.where}: {_first_line(exc)}"
                raise BackendError(self.open_error, transient=transient(exc)) from exc
            self._pool, self.open_error = pool, None
            return pool

    def call(self, fn: Callable[[psycopg.Connection[tuple[object, ...]]], T]) -> T:
        """`fn(connection)` on a pooled connection (autocommit; use `conn.transaction()`);
        psycopg errors become `BackendError`."""
        with self.connection() as conn:
            return fn(conn)

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
        """A pooled connection held for a while (e.g. across a row lock); errors as `call`."""
        pool = self._open()
        try:
            with pool.connection() as conn:
                yield conn
        except (psycopg.Error, PoolTimeout) as exc:
            message = f"{self.where}: {_first_line(exc)}"
            raise BackendError(message, transient=transient(exc)) from exc

    def dedicated(self) -> psycopg.Connection[tuple[object, ...]]:
        """A connection of its own, outside the pool, with the pool's options (autocommit;
        e.g. to LISTEN on). psycopg errors are raised as they are."""
        if not self.dsn:
            raise BackendError(self.open_error or f"{self.where}: no dsn is set")
        return psycopg.connect(
            self.dsn,
            autocommit=True,
            connect_timeout=max(1, round(self._timeout)),
            options=self._options,
        )

    def share(self) -> bool:
        """One more use of this pool (its user calls `close` when done); False when it has
        been closed already (make a new one)."""
        with self._lock:
            if self._closed:
                return False
            self._uses += 1
            return True

    def close(self) -> None:
        with self._lock:
            self._uses -= 1
            if self._uses > 0:
                return
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


def _dsn_options(dsn: str | None) -> str:
    try:
        return str(psycopg.conninfo.conninfo_to_dict(dsn or "").get("options") or "")
    except psycopg.ProgrammingError:
        return ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def migrate(conn: psycopg.Connection[tuple[object, ...]]) -> list[int]:
    """Apply the migration files this database lacks; returns the versions applied."""
    files = migrations()
    known = max((v for v, _, _ in files), default=0)
    applied: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY,"
            " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {int(str(r[0])) for r in conn.execute("SELECT version FROM schema_migrations")}
        newer = sorted(v for v in done if v > known)
        if newer:
            raise BackendError(
                f"the database has schema version {newer[-1]}, newer than this code knows"
                f" ({known}); upgrade the orchestrator"
            )
        for version, name, sql in files:
            if version in done:
                continue
            conn.execute(sql.encode("utf-8"))
            conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name)
            )
            applied.append(version)
    return applied
