"""Where the state beside the store lives, chosen by `[shared] state`: "local" (SQLite files
under the data dir, one replica's own: `state/outbox.py`, `state/traces.py`,
`state/forgotten.py`) or "postgres"
(tables in one PostgreSQL database that every replica shares: `postgres/state.py`).

With shared state, any replica explains and replays any trace, a memory forgotten on one
replica is left out by all of them, a write queued by one replica
is replayed by whichever replica reaches the store first, exactly once (the row is claimed
with `FOR UPDATE SKIP LOCKED`), tokens added to the shared list work on every replica (and a
revoked one on none), and MCP sessions live in the database, so any replica serves any
request of any session. All of it goes through one connection pool per process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import TYPE_CHECKING

from memory_orchestrator.errors import ConfigError, MissingExtra
from memory_orchestrator.state.forgotten import Tombstones
from memory_orchestrator.state.outbox import Outbox
from memory_orchestrator.state.tokens import TokenSpec
from memory_orchestrator.state.traces import TraceStore

if TYPE_CHECKING:
    from memory_orchestrator.postgres.database import Database
    from memory_orchestrator.postgres.sessions import PgSessions
    from memory_orchestrator.settings import Settings

__all__ = [
    "add_shared_token",
    "outbox",
    "revoke_shared_token",
    "shared",
    "shared_sessions",
    "shared_tokens",
    "tombstones",
    "trace_store",
]

# Connections to the shared database, at most, per process: its calls are short (a trace, an
# outbox row, a token read), and every replica holds a pool on one server.
POOL_MAX = 4
# How often a replica re-reads the shared token list: a revoked token is refused everywhere
# within this, and authentication does not query the database on every request.
TOKENS_REFRESH_S = 5.0

_pools: dict[tuple[object, ...], Database] = {}
_pools_lock = threading.Lock()


def shared(settings: Settings) -> bool:
    return settings.shared.state == "postgres"


def _need_postgres() -> None:
    """psycopg is the optional `postgres` extra: MissingExtra naming it when absent, checked
    before any `postgres.*` module is imported."""
    try:
        import_module("memory_orchestrator.postgres.state")
    except ImportError as exc:
        raise MissingExtra(
            f'[shared] state = "postgres" needs the postgres extra: {exc}'
            " (pip install 'mnemon-memory-orchestrator[postgres]')"
        ) from exc


def _database(settings: Settings) -> Database:
    """The process's one pool on the shared database (one per set of connection settings):
    the outbox, the traces, the tokens and the sessions each hold a use of it, and the last
    `close` ends it."""
    _need_postgres()
    from memory_orchestrator.postgres.database import Database

    dsn = settings.shared.dsn or settings.postgres.dsn
    # Every call to the shared state is bounded like a store call (`[retrieval] timeout_s`),
    # from the wait for a connection to its last answer: the tools' documented bounds count
    # on it, and a paused server must not hold a write or a health check.
    bound = settings.retrieval.timeout_s
    key = (dsn, bound)
    with _pools_lock:
        db = _pools.get(key)
        if db is not None and db.share():
            return db
        db = Database(
            dsn,
            min_size=0,
            max_size=POOL_MAX,
            answer_timeout_s=bound,
            call_timeout_s=bound,
            what="shared state ([shared] dsn, else [postgres] dsn)",
        )
        _pools[key] = db
        return db


def trace_store(settings: Settings) -> TraceStore:
    """The trace store: shared when `[shared] state = "postgres"` (and traces are on), else
    the SQLite file (or memory only with `traces.enabled` off)."""
    keep = settings.traces.keep
    if not settings.traces.enabled:
        return TraceStore(None, keep=keep)
    if shared(settings):
        _need_postgres()
        from memory_orchestrator.postgres.state import PgTraceStore

        return PgTraceStore(_database(settings), keep=keep)
    return TraceStore(settings.trace_path(), keep=keep)


def outbox(settings: Settings) -> Outbox:
    """The write outbox: shared when `[shared] state = "postgres"`, else the SQLite file."""
    if shared(settings):
        _need_postgres()
        from memory_orchestrator.postgres.state import PgOutbox

        return PgOutbox(_database(settings))
    return Outbox(settings.outbox_path())


def tombstones(settings: Settings) -> Tombstones:
    """The forgotten memories: shared when `[shared] state = "postgres"`, else the SQLite file
    under the data dir (made by the first forget)."""
    if shared(settings):
        _need_postgres()
        from memory_orchestrator.postgres.state import PgTombstones

        return PgTombstones(_database(settings))
    return Tombstones(settings.forgotten_path())


def shared_tokens(settings: Settings) -> Callable[[], Sequence[TokenSpec]] | None:
    """The shared token list (read through a short cache) when state is shared, else None."""
    if not shared(settings):
        return None
    _need_postgres()
    from memory_orchestrator.postgres.state import SharedTokens

    book = SharedTokens(_database(settings), refresh_s=TOKENS_REFRESH_S)
    return book.tokens


def add_shared_token(settings: Settings, token: TokenSpec) -> None:
    """Adds `token` to the shared list (every replica accepts it within `TOKENS_REFRESH_S`).
    Raises ConfigError when state is not shared, BackendError when the database fails."""
    if not shared(settings):
        raise ConfigError('--shared needs [shared] state = "postgres"')
    _need_postgres()
    from memory_orchestrator.postgres.state import SharedTokens

    book = SharedTokens(_database(settings))
    try:
        book.add(token)
    finally:
        book.close()


def revoke_shared_token(settings: Settings, name: str) -> tuple[bool, int]:
    """Removes the shared token `name` and ends its sessions: every replica refuses it within
    `TOKENS_REFRESH_S` (its sessions at once). Returns whether it was there and how
    many sessions it held. Raises ConfigError when state is not shared, BackendError when
    the database fails."""
    if not shared(settings):
        raise ConfigError('--shared needs [shared] state = "postgres"')
    _need_postgres()
    from memory_orchestrator.postgres.sessions import PgSessions
    from memory_orchestrator.postgres.state import SharedTokens

    db = _database(settings)
    http = settings.http
    try:
        removed = SharedTokens(db).remove(name)
        ended = PgSessions(db, http.max_sessions_per_token, http.session_idle_timeout_s)
        return removed, ended.end_all(name)
    finally:
        db.close()


def shared_sessions(settings: Settings) -> PgSessions | None:
    """The MCP sessions in the shared database when state is shared, else None (each server
    keeps its own)."""
    if not shared(settings):
        return None
    _need_postgres()
    from memory_orchestrator.postgres.sessions import PgSessions

    http = settings.http
    return PgSessions(_database(settings), http.max_sessions_per_token, http.session_idle_timeout_s)
