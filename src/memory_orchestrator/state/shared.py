"""Where the state beside the store lives, chosen by `[shared] state`: "local" (SQLite files
under the data dir, one replica's own: `state/outbox.py`, `state/traces.py`) or "postgres"
(tables in one PostgreSQL database that every replica shares: `postgres/state.py`).

With shared state, any replica explains and replays any trace, a write queued by one replica
is replayed by whichever replica reaches the store first, exactly once (the row is claimed
with `FOR UPDATE SKIP LOCKED`), and tokens added to the shared list work on every replica.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib import import_module
from typing import TYPE_CHECKING

from memory_orchestrator.errors import ConfigError, MissingExtra
from memory_orchestrator.state.outbox import Outbox
from memory_orchestrator.state.tokens import TokenSpec
from memory_orchestrator.state.traces import TraceStore

if TYPE_CHECKING:
    from memory_orchestrator.postgres.database import Database
    from memory_orchestrator.settings import Settings

__all__ = ["add_shared_token", "outbox", "shared", "shared_tokens", "trace_store"]


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


def _database(settings: Settings, what: str) -> Database:
    _need_postgres()
    from memory_orchestrator.postgres.database import Database

    pg = settings.postgres
    return Database(
        settings.shared.dsn or pg.dsn,
        min_size=0,
        max_size=settings.shared.pool_max,
        connect_timeout_s=pg.connect_timeout_s,
        statement_timeout_ms=pg.statement_timeout_ms,
        what=f"shared {what} ([shared] dsn, else [postgres] dsn)",
    )


def trace_store(settings: Settings) -> TraceStore:
    """The trace store: shared when `[shared] state = "postgres"` (and traces are on), else
    the SQLite file (or memory only with `traces.enabled` off)."""
    keep = settings.traces.keep
    if not settings.traces.enabled:
        return TraceStore(None, keep=keep)
    if shared(settings):
        _need_postgres()
        from memory_orchestrator.postgres.state import PgTraceStore

        return PgTraceStore(_database(settings, "traces"), keep=keep)
    return TraceStore(settings.trace_path(), keep=keep)


def outbox(settings: Settings) -> Outbox:
    """The write outbox: shared when `[shared] state = "postgres"`, else the SQLite file."""
    if shared(settings):
        _need_postgres()
        from memory_orchestrator.postgres.state import PgOutbox

        return PgOutbox(_database(settings, "outbox"))
    return Outbox(settings.outbox_path())


def shared_tokens(settings: Settings) -> Callable[[], Sequence[TokenSpec]] | None:
    """The shared token list (read through a short cache) when state is shared, else None."""
    if not shared(settings):
        return None
    _need_postgres()
    from memory_orchestrator.postgres.state import SharedTokens

    book = SharedTokens(_database(settings, "tokens"), refresh_s=settings.shared.tokens_refresh_s)
    return book.tokens


def add_shared_token(settings: Settings, token: TokenSpec) -> None:
    """Adds `token` to the shared list (every replica accepts it within `tokens_refresh_s`).
    Raises ConfigError when state is not shared, BackendError when the database fails."""
    if not shared(settings):
        raise ConfigError('--shared needs [shared] state = "postgres"')
    _need_postgres()
    from memory_orchestrator.postgres.state import SharedTokens

    book = SharedTokens(_database(settings, "tokens"))
    try:
        book.add(token)
    finally:
        book.close()
