"""Another replica's writes heard as they commit (LISTEN/NOTIFY), on a real PostgreSQL: the
store's change generation moves for a commit in its own schema only, and a replica's local
index takes a memory another replica wrote at its next request, not at its next polling
interval."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import psycopg
import pytest

from memory_orchestrator.backends.postgres import PostgresBackend
from memory_orchestrator.derived import indexes
from memory_orchestrator.models import EventKind, NewMemory, SearchRequest
from memory_orchestrator.postgres.server import LocalPostgres
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import load_settings
from memory_orchestrator.state.traces import TraceStore
from tests.events import said
from tests.pg_fixtures import new_schema

pytestmark = pytest.mark.integration

T0 = datetime(2024, 7, 1, 12, 0, tzinfo=UTC)
PATIENCE_S = 30.0  # how long a notice may take on a loaded machine before the test fails


def mem(content: str, minutes: int = 0) -> NewMemory:
    return NewMemory(content=content, created_at=T0 + timedelta(minutes=minutes))


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait for `condition` (checked every 20 ms), failing after PATIENCE_S."""
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {PATIENCE_S} s: {what}")
        await anyio.sleep(0.02)


def listening(store: PostgresBackend) -> Callable[[], bool]:
    return lambda: store.change_generation is not None


async def test_a_commit_in_its_own_schema_moves_the_generation_and_another_schemas_does_not(
    pg_server: LocalPostgres, pg_dsn: str
) -> None:
    other_schema, other_dsn = new_schema(pg_server)
    writer, reader, stranger = (PostgresBackend(d) for d in (pg_dsn, pg_dsn, other_dsn))
    await writer.write(mem("the migrations are applied first"))
    await until(listening(reader), "the reader listens")
    before = reader.change_generation
    assert before is not None
    await stranger.write(mem("another deployment's memory"))
    with psycopg.connect(other_dsn, autocommit=True) as conn:  # a commit seen by then
        conn.execute("SELECT pg_notify('memory_orchestrator_memories', 'nobody')")
    await writer.write(mem("the deploy pipeline moved to Jenkins", 1))
    await until(lambda: reader.change_generation != before, "the reader hears the write")
    heard = reader.change_generation
    assert heard is not None
    assert heard - before == 1
    for store in (writer, reader, stranger):
        await store.close()
    with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{other_schema}" CASCADE'.encode())


async def test_a_replica_indexes_another_replicas_write_at_its_next_request(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Polling alone (an hour here) would leave the write out of the reader's local index."""
    monkeypatch.setattr(indexes, "SYNC_INTERVAL_S", 3600.0)

    def replica(name: str) -> tuple[Orchestrator, PostgresBackend]:
        settings = load_settings(
            backend="postgres",
            data_dir=tmp_path / name,
            postgres={"dsn": pg_dsn},
            semantic={"enabled": False},
        )
        store = PostgresBackend(pg_dsn)
        return Orchestrator(store, settings, traces=TraceStore(None)), store

    (a, _), (b, store) = replica("a"), replica("b")
    await a.ingest([mem("Kim maintains the billing SDK")])
    first = await b.search(SearchRequest(query="billing SDK"))
    trace = b.trace(first.trace_id)
    assert trace is not None
    assert said(trace, EventKind.LOCAL_INDEX_ADDED) == [{"count": 1}]
    await until(listening(store), "replica b listens")
    before = store.change_generation
    await a.ingest([mem("Lee maintains the payments gateway", 1)])
    await until(lambda: store.change_generation != before, "replica b hears the write")
    second = await b.search(SearchRequest(query="payments gateway"))
    trace = b.trace(second.trace_id)
    assert trace is not None
    assert said(trace, EventKind.LOCAL_INDEX_ADDED) == [{"count": 1}]
    assert second.items[0].summary == "Lee maintains the payments gateway"
    await a.close()
    await b.close()


async def test_without_a_server_it_is_not_listening_and_says_why() -> None:
    """The feed then polls as before: None is 'ask again at the interval'."""
    store = PostgresBackend("postgresql://nobody@127.0.0.1:1/none?connect_timeout=1")
    assert store.change_generation is None
    await until(lambda: store._changes.error is not None, "the listener gives its reason")
    assert store.change_generation is None
    assert "not listening for changes" in (store._changes.error or "")
    await store.close()
