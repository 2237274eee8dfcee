"""The settings of the PostgreSQL store and of the state replicas share (`[postgres]`,
`[shared]`); see docs/how-to/deployment.md."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from memory_orchestrator.settings.base import Section


class PostgresSettings(Section):
    """The shared store on PostgreSQL (`backend = "postgres"`, see `backends/postgres.py`)."""

    dsn: str | None = Field(
        default=None,
        description="libpq connection string or URI, e.g. postgresql://user@host:5432/memories"
        " ($ORCHESTRATOR_POSTGRES__DSN; a password is better kept in PGPASSWORD or ~/.pgpass)",
    )
    pool_min: int = Field(default=1, ge=0, le=100, description="connections kept open")
    pool_max: int = Field(default=10, ge=1, le=500, description="connections at most, per replica")
    connect_timeout_s: float = Field(
        default=10.0, gt=0, le=300, description="to connect, and to wait for a free connection"
    )
    statement_timeout_ms: int = Field(
        default=30_000,
        ge=100,
        le=3_600_000,
        description="the server ends a longer statement; this side stops waiting for its"
        " answer a second later (a paused server never answers)",
    )
    stats_ttl_s: float = Field(
        default=5.0,
        ge=0,
        le=3600,
        description="how long BM25's collection statistics are reused (this replica's own"
        " writes refresh them at once)",
    )
    temporal_links: bool = Field(
        default=True, description="link each new memory to the one before it in time"
    )
    entity_fanout: int = Field(
        default=8, ge=1, le=100, description="memories sharing an entity followed per side"
    )


class SharedSettings(Section):
    """Where the state beside the store lives: the write outbox, the traces, the HTTP tokens.
    "local" (default): SQLite files under the data dir, one replica's own. "postgres": tables
    in a PostgreSQL database (`dsn`, default `[postgres] dsn`), shared by every replica: any
    replica explains any trace, and a queued write is replayed exactly once by one of them."""

    state: Literal["local", "postgres"] = Field(
        default="local",
        description="local: SQLite files under the data dir; postgres: tables every replica shares",
    )
    dsn: str | None = Field(
        default=None, description="the database for shared state; default [postgres] dsn"
    )
    pool_max: int = Field(default=4, ge=1, le=100, description="connections at most, per replica")
    tokens_refresh_s: float = Field(
        default=5.0, ge=0, le=3600, description="how often the shared token list is re-read"
    )
