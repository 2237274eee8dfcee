"""What the PostgreSQL parts share: the connection pool, the schema migrations, errors.

Migrations are the numbered files in `migrations/` (`0001_name.sql`, ...), applied in
order at start by whichever replica opens the database first: under a transaction-level
advisory lock, each file in the transaction that records it in `schema_migrations`, so
replicas starting together apply each file exactly once, and a database newer than this code
(a version it does not know) is refused.

Connections come from a `psycopg_pool.ConnectionPool` (synchronous: callers run in worker
threads, as the SQLite parts do, so any event loop can use them), each with UTC as its time
zone and a statement timeout.

Every call is bounded on this side too, since the server's own statement timeout cannot fire
when the server is paused (SIGSTOP) or cut off: the kernel keeps its TCP connection open and
nothing ever answers. Connecting is bounded by `CONNECT_TIMEOUT_S` (libpq's connect_timeout),
the wait for a pooled connection by the same or what is left of the call's bound, and every
wait for the server's answer (a statement, a commit) by `answer_timeout_s` and what is left of
`call_timeout_s` (`_Answering.wait`). A wait that runs out ends the connection, which leaves
the pool, and the call fails with `BackendError(transient=True)`: "... did not answer within
<the bound>s".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg.abc import PQGen
from psycopg_pool import ConnectionPool, PoolTimeout

from memory_orchestrator.errors import BackendError, OrchestratorError
from memory_orchestrator.migrations import Migration, numbered

__all__ = ["Database", "NoAnswer", "migrations", "transient"]

T = TypeVar("T")
RV = TypeVar("RV")
Conn = psycopg.Connection[tuple[Any, ...]]
_WAIT_INTERVAL = 0.1  # psycopg's own: how often a wait looks up from the socket
_ANSWER_GRACE_S = 1.0  # past the server's statement timeout: it would have answered by then
# libpq's connect timeout, and the longest wait for a pooled connection: a server that takes
# longer to accept a connection is down or unreachable, and the caller's write is queued.
CONNECT_TIMEOUT_S = 10.0
# The server ends a longer statement: far above any single query of these tables, so only a
# runaway statement (or a locked table) hits it, and the pool does not fill with them.
STATEMENT_TIMEOUT_MS = 30_000


class NoAnswer(psycopg.OperationalError):
    """The server did not answer within the client-side bound (the connection was ended)."""


def _timed_out(exc: BaseException) -> bool:
    """psycopg's own wait timeout (a private subclass of OperationalError)."""
    return type(exc).__name__ == "_WaitTimeout"


class _Answering(psycopg.Connection[tuple[Any, ...]]):
    """A connection whose every wait for the server is bounded here (see the module
    docstring): `answer_s` per wait, and `deadline` (a `time.monotonic` instant, set while
    a call holds it) for them all. A wait given its own timeout (LISTEN's `notifies`) keeps
    it."""

    answer_s: float | None = None
    deadline: float | None = None

    def wait(
        self, gen: PQGen[RV], interval: float = _WAIT_INTERVAL, timeout: float | None = None
    ) -> RV:
        if timeout is not None:
            return super().wait(gen, interval, timeout)
        limit = self.answer_s
        if self.deadline is not None:
            left = max(0.0, self.deadline - time.monotonic())
            limit = left if limit is None else min(limit, left)
        if limit is None:
            return super().wait(gen, interval)
        try:
            return super().wait(gen, interval, limit)
        except psycopg.OperationalError as exc:
            if not _timed_out(exc):
                raise
            # The exchange stopped midway: the connection cannot be used again.
            self.pgconn.finish()
            raise NoAnswer(
                f"did not answer within {limit:.2g}s (a client-side bound: the server may be"
                " paused, overloaded or cut off); the connection was dropped"
            ) from None


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
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        statement_timeout_ms: int = STATEMENT_TIMEOUT_MS,
        answer_timeout_s: float | None = None,
        call_timeout_s: float | None = None,
        what: str = "postgres",
    ) -> None:
        """`answer_timeout_s`: the longest wait for one answer of the server (default: its
        statement timeout and a second); `call_timeout_s`: the longest one call may take,
        from the wait for a pooled connection to its last answer (None: no bound but the
        answers' and the connect timeout)."""
        self.dsn = dsn
        self.where = _where(dsn) if dsn else what
        self.open_error: str | None = None if dsn else f"{what}: no dsn is set"
        self._sizes = (min_size, max(min_size, max_size))
        bound = call_timeout_s if call_timeout_s is not None else connect_timeout_s
        self._timeout = min(connect_timeout_s, bound)
        self._answer_s = (
            answer_timeout_s
            if answer_timeout_s is not None
            else statement_timeout_ms / 1000 + _ANSWER_GRACE_S
        )
        self._call_s = call_timeout_s
        # the DSN's own `options` (e.g. `-c search_path=team_a`: one schema per deployment)
        # come first; UTC and the statement timeout are added to them
        own = f"-c TimeZone=UTC -c statement_timeout={int(statement_timeout_ms)}"
        self._options = " ".join(filter(None, [_dsn_options(dsn), own]))
        self._pool: ConnectionPool[_Answering] | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._uses = 1  # `share` adds one; `close` ends the pool when the last use closes

    def _open(self) -> ConnectionPool[_Answering]:
        with self._lock:
            if self._pool is not None:
                return self._pool
            if self._closed:
                raise BackendError(f"{self.where} is closed")
            if not self.dsn:
                raise BackendError(self.open_error or f"{self.where}: no dsn is set")
            pool: ConnectionPool[_Answering] = ConnectionPool(
                self.dsn,
                connection_class=_Answering,
                min_size=self._sizes[0],
                max_size=self._sizes[1],
                open=False,
                timeout=self._timeout,
                kwargs=self._connect_args(),
                configure=self._configure,
                # a connection that keeps failing is given up soon (its retries back off to
                # a minute and more); the next call that needs one starts again at once, so
                # a server back from a pause is used within a connect, not a backoff
                reconnect_timeout=2 * self._timeout,
                name="memory-orchestrator",
            )
            try:
                pool.open(wait=True, timeout=self._timeout)
                with pool.connection() as conn:
                    migrate(conn)
            except (psycopg.Error, OSError, OrchestratorError) as exc:
                pool.close()
                self.open_error = f"{self.where}: {_first_line(exc)}"
                raise BackendError(self.open_error, transient=transient(exc)) from exc
            except BaseException:  # a bug (or a cancel) leaves no pool open behind it
                pool.close()
                raise
            self._pool, self.open_error = pool, None
            return pool

    @property
    def call_timeout_s(self) -> float | None:
        """The bound of one call (None: only each answer is bounded)."""
        return self._call_s

    def _connect_args(self) -> dict[str, Any]:
        return {
            "connect_timeout": max(1, round(self._timeout)),  # libpq takes whole seconds
            "options": self._options,
            "autocommit": True,
        }

    def _configure(self, conn: _Answering) -> None:
        conn.answer_s = self._answer_s

    def call(self, fn: Callable[[Conn], T]) -> T:
        """`fn(connection)` on a pooled connection (autocommit; use `conn.transaction()`),
        within the call's bound; psycopg errors become `BackendError`."""
        with self.connection() as conn:
            return fn(conn)

    @contextmanager
    def connection(self, *, held: bool = False) -> Iterator[Conn]:
        """A pooled connection, within the call's bound; `held`: kept across other work (a
        row lock while its write is delivered), so only each answer is bounded. Errors as
        `call`."""
        started = time.monotonic()
        deadline = None if held or self._call_s is None else started + self._call_s
        try:
            pool = self._open()
            wait = self._timeout if deadline is None else max(0.0, deadline - time.monotonic())
            with pool.connection(timeout=wait) as conn:
                conn.deadline = deadline
                try:
                    yield conn
                finally:
                    conn.deadline = None
        except PoolTimeout as exc:
            raise BackendError(self._no_connection(started), transient=True) from exc
        except psycopg.Error as exc:
            message = f"{self.where}: {_first_line(exc)}"
            raise BackendError(message, transient=transient(exc)) from exc

    def _no_connection(self, started: float) -> str:
        waited = f"{time.monotonic() - started:.2g}s"
        return (
            f"{self.where}: could not connect within {waited} (the server does not answer,"
            f" or all {self._sizes[1]} connections are busy)"
        )

    def dedicated(self) -> Conn:
        """A connection of its own, outside the pool, with the pool's options (autocommit;
        e.g. to LISTEN on), each answer bounded. psycopg errors are raised as they are."""
        if not self.dsn:
            raise BackendError(self.open_error or f"{self.where}: no dsn is set")
        conn = _Answering.connect(self.dsn, **self._connect_args())
        self._configure(conn)
        return conn

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


def migrate(conn: Conn) -> list[int]:
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
