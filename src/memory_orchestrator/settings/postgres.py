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
    pool_max: int = Field(default=10, ge=1, le=500, description="connections at most, per replica")


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
