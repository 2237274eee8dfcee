"""What only the postgres store has to show, on a real server: migrations applied once and
refused when newer, a listing that never passes over a write committed late, one stored
copy of a write sent through two handles at once, and a clear, transient error (and a health
report) while the server cannot be reached."""

from __future__ import annotations

import random
import socket
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import psycopg
import pytest

from memory_orchestrator.backends import registry
from memory_orchestrator.backends.postgres import PostgresBackend
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import NewMemory, Status, WriteAction
from memory_orchestrator.postgres.database import migrate, migrations
from memory_orchestrator.settings import load_settings

pytestmark = pytest.mark.integration

T0 = datetime(2024, 7, 1, 12, 0, tzinfo=UTC)


def mem(content: str, minutes: int = 0) -> NewMemory:
    return NewMemory(content=content, created_at=T0 + timedelta(minutes=minutes))


async def test_the_registry_builds_it_from_settings_without_connecting(pg_dsn: str) -> None:
    nowhere = registry.create("postgres", load_settings(backend="postgres"))
    assert isinstance(nowhere, PostgresBackend)
    assert nowhere.open_error is not None
    assert "no dsn" in nowhere.open_error
    settings = load_settings(backend="postgres", postgres={"dsn": pg_dsn, "pool_max": 3})
    backend = registry.create("postgres", settings)
    assert (await backend.write(mem("configured by settings"))).action is WriteAction.ADDED
    await backend.close()


def test_migrations_are_applied_once_in_order_and_a_newer_schema_is_refused(pg_dsn: str) -> None:
    versions = [v for v, _, _ in migrations()]
    assert versions == sorted(versions)
    assert versions[0] == 1
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert migrate(conn) == versions
        assert migrate(conn) == []
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (9999, 'future')")
        with pytest.raises(BackendError, match="newer than this code"):
            migrate(conn)


async def test_listing_waits_for_a_transaction_that_commits_late(pg_dsn: str) -> None:
    """A change sequence must not be passed over: a write that began earlier and commits
    after a later one is listed after it, not lost behind the cursor."""
    backend = PostgresBackend(pg_dsn)
    await backend.write(mem("first", 0))
    _, cursor = await backend.list_memories(None, 10)
    with psycopg.connect(pg_dsn, autocommit=True) as slow:
        with slow.transaction():
            slow.execute("SELECT pg_current_xact_id()")  # began before the next write
            await backend.write(mem("committed first", 2))
            page, held = await backend.list_memories(cursor, 10)
            assert page == []
            assert held == cursor
            backend._insert(slow, [mem("committed late", 1)])
        page, cursor = await backend.list_memories(cursor, 10)
    assert [m.content for m in page] == ["committed late", "committed first"]
    await backend.close()


async def test_the_same_write_through_two_handles_at_once_is_stored_once(pg_dsn: str) -> None:
    one, two = PostgresBackend(pg_dsn), PostgresBackend(pg_dsn)
    outcomes: list[Any] = []
    await one.write(mem("warm up the schema"))

    async def write(backend: PostgresBackend, n: int) -> None:
        outcomes.append(await backend.write(mem(f"the very same note {n % 10}")))

    async with anyio.create_task_group() as tg:
        for n in range(40):
            tg.start_soon(write, one if n % 2 else two, n)
    await one.close()
    await two.close()
    added = [o for o in outcomes if o.action is WriteAction.ADDED]
    assert len(added) == 10
    assert all(o.existing_id in {a.id for a in added} for o in outcomes if o not in added)
    with psycopg.connect(pg_dsn) as conn:
        row = conn.execute("SELECT count(*) FROM memories WHERE content LIKE 'the very%'")
        assert row.fetchone() == (10,)


async def test_an_unreachable_server_gives_a_transient_error_and_an_error_in_health() -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    backend = PostgresBackend(
        f"postgresql://postgres:secret@127.0.0.1:{port}/x", connect_timeout_s=1
    )
    with pytest.raises(BackendError) as raised:
        await backend.search("anything", 5)
    assert raised.value.transient
    assert "secret" not in str(raised.value)
    checks = await backend.health()
    assert checks[0].status is Status.ERROR
    assert all(c.status is Status.ERROR for c in checks)
    await backend.close()


async def test_the_recursive_edge_query_walks_exactly_as_one_query_per_hop(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`neighbors` reads the materialized edges within the hop budget with one recursive CTE;
    the walk must be the same as when every hop asks for its frontier's edges."""
    backend = PostgresBackend(pg_dsn)
    rng = random.Random(7)
    kinds = ["causal", "related", "semantic"]

    async def walks() -> list[list[tuple[str, str, str, int]]]:
        found = []
        for seed in seeds:
            for types in (None, ["temporal"], ["causal", "related"], ["entity", "semantic"]):
                for hops in (1, 2, 3):
                    got = await backend.neighbors([seed], types, hops=hops, limit=12)
                    found.append([(n.memory.id, n.via_id, n.edge_type, n.hops) for n in got])
        return found

    async def main() -> tuple[list[Any], list[Any]]:
        people = ["Ana", "Bo", "Cy", "Di"]
        memories = [
            NewMemory(
                content=f"note {n} about {rng.choice(['apples', 'boats', 'clouds'])} {n * 7}",
                entities=rng.sample(people, rng.randint(0, 2)),
                created_at=T0 + timedelta(minutes=n),
            )
            for n in range(30)
        ]
        ids = [o.id for o in await backend.write_many(memories)]
        for _ in range(40):
            a, b = rng.sample(ids, 2)
            await backend.link(str(a), str(b), rng.choice(kinds), round(rng.random(), 2))
        await backend.forget(str(ids[5]))
        seeds.extend(str(i) for i in rng.sample(ids, 6))
        with_cte = await walks()
        monkeypatch.setattr(PostgresBackend, "_edges_within", staticmethod(lambda *_: {}))
        per_hop = await walks()
        await backend.close()
        return with_cte, per_hop

    seeds: list[str] = []
    with_cte, per_hop = await main()
    assert with_cte == per_hop
    assert any(len(w) > 3 for w in with_cte)
