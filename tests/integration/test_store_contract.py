"""The `MemoryBackend` contract, run the same way against the embedded store (a real SQLite
file) and the postgres store (a real PostgreSQL server, `tests/pg_fixtures.py`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from memory_orchestrator.backends.base import MemoryBackend, enumerable
from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import (
    MemoryType,
    NewMemory,
    SearchFilters,
    Status,
    TimeRange,
    WriteAction,
)

pytestmark = pytest.mark.integration

T = TypeVar("T")
T0 = datetime(2024, 7, 1, 12, 0, tzinfo=UTC)
Open = Callable[..., MemoryBackend]


@pytest.fixture(params=["embedded", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Open:
    """How to open the store under test (each call: a new handle on the same data)."""
    if request.param == "embedded":
        return lambda **options: EmbeddedBackend(tmp_path / "memories.db", **options)
    dsn: str = request.getfixturevalue("pg_dsn")
    from memory_orchestrator.backends.postgres import PostgresBackend

    return lambda **options: PostgresBackend(dsn, **options)


def run_with(open_: Open, body: Callable[[Any], Awaitable[T]], **options: Any) -> T:
    async def main() -> T:
        backend = open_(**options)
        try:
            return await body(backend)
        finally:
            await backend.close()

    return anyio.run(main)


def mem(content: str, minutes: int = 0, **fields: Any) -> NewMemory:
    return NewMemory(content=content, created_at=T0 + timedelta(minutes=minutes), **fields)


async def add(backend: MemoryBackend, *memories: NewMemory) -> list[str]:
    outcomes = await backend.write_many(memories)
    assert all(o.action is WriteAction.ADDED for o in outcomes)
    return [str(o.id) for o in outcomes]


def test_a_written_memory_round_trips_and_is_found_by_a_stemmed_search(store: Open) -> None:
    async def body(b: MemoryBackend) -> None:
        assert isinstance(b, MemoryBackend)
        assert enumerable(b) is not None
        assert b.capabilities.listing
        new = mem(
            "Caroline went hiking with her family in the mountains",
            0,
            type=MemoryType.EPISODIC,
            entities=["Caroline"],
            tags=["trip", "family"],
            metadata={"session": 3, "speaker": "Caroline"},
            source="chat",
            importance=0.7,
        )
        mid, _ = await add(b, new, mem("Melanie paints sunsets", 5))
        hits = await b.search("who hikes in mountain?", 5)
        assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
        got = hits[0].memory
        assert got.id == mid
        assert got.store == b.name
        assert (got.type, got.entities, got.tags) == (new.type, ("Caroline",), ("trip", "family"))
        assert (got.metadata, got.source, got.importance) == (new.metadata, "chat", 0.7)
        assert got.created_at == T0

    run_with(store, body)


def test_entities_weigh_more_than_body_text(store: Open) -> None:
    async def body(b: MemoryBackend) -> None:
        filler = [mem(f"unrelated filler note {i}", i) for i in range(10)]
        plain, named, *_ = await add(
            b,
            mem("we talked about Paris for a while", 100),
            mem("we talked about a trip for a while", 101, entities=["Paris"]),
            *filler,
        )
        hits = await b.search("Paris", 5)
        assert [h.memory.id for h in hits][:2] == [named, plain]

    run_with(store, body)


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "family*",
        "NEAR(family july)",
        "-family",
        "a & b | !c",
        "famille été 家族 😀",
        "'",
        "",
        "C:\\temp\\it's o'neil\\",
    ],
)
def test_query_syntax_never_raises(store: Open, query: str) -> None:
    async def body(b: MemoryBackend) -> None:
        await add(b, mem("Caroline's family in July", 0, entities=["Caroline"]))
        assert all(h.memory.store == b.name for h in await b.search(query, 5))

    run_with(store, body)


def test_search_filters_by_type_entity_and_time(store: Open) -> None:
    async def body(b: MemoryBackend) -> None:
        a, bb, c = await add(
            b,
            mem("project kickoff meeting", 0, type=MemoryType.EPISODIC, entities=["Ana"]),
            mem("project kickoff rules", 60, type=MemoryType.PROCEDURAL, entities=["Bo"]),
            mem("project kickoff retro", 120, type=MemoryType.EPISODIC, entities=["Bo"]),
        )

        async def ids(f: SearchFilters) -> set[str]:
            return {h.memory.id for h in await b.search("project kickoff", 10, f)}

        assert await ids(SearchFilters(memory_types=(MemoryType.EPISODIC,))) == {a, c}
        assert await ids(SearchFilters(entity_ids=("bo",))) == {bb, c}
        late = TimeRange(start=T0 + timedelta(minutes=30))
        assert await ids(SearchFilters(time_range=late)) == {bb, c}

    run_with(store, body)


def test_an_exact_duplicate_is_skipped_with_the_existing_id(store: Open) -> None:
    async def body(b: MemoryBackend) -> None:
        (first,) = await add(b, mem("the same words", 0))
        again = await b.write(mem("  the   same words ", 9))
        assert (again.action, again.existing_id) == (WriteAction.SKIPPED, first)
        batch = await b.write_many([mem("twice in a batch", 1), mem("twice in a batch", 2)])
        assert [o.action for o in batch] == [WriteAction.ADDED, WriteAction.SKIPPED]

    run_with(store, body)


def test_neighbors_respect_hops_edge_types_limit_and_exclude_seeds(store: Open) -> None:
    async def body(b: MemoryBackend) -> None:
        a, bb, c, d = await add(b, mem("a", 0), mem("b", 1), mem("c", 2), mem("d", 3))
        await b.link(a, d, "causal", 0.4)
        one = await b.neighbors([a], hops=1)
        assert [(n.memory.id, n.edge_type, n.hops) for n in one] == [
            (bb, "temporal", 1),
            (d, "causal", 1),
        ]
        two = await b.neighbors([a], ["temporal"], hops=2)
        assert [(n.memory.id, n.hops, n.via_id) for n in two] == [(bb, 1, a), (c, 2, bb)]
        assert await b.neighbors([a], ["semantic"], hops=3) == []
        assert {n.memory.id for n in await b.neighbors([a], hops=3)} == {bb, c, d}
        assert len(await b.neighbors([a], hops=3, limit=1)) == 1
        assert {n.memory.id for n in await b.neighbors([a, bb], hops=1)} == {c, d}

    run_with(store, body)


def test_neighbors_walk_shared_entities_nearest_in_time_with_a_capped_fanout(store: Open) -> None:
    async def body(b: MemoryBackend) -> None:
        ids = await add(
            b, *[mem(f"note {i}", i * 10, entities=["Speaker", f"Topic{i}"]) for i in range(30)]
        )
        topic, far = await add(
            b,
            mem("another take on topic 15", 5000, entities=["topic15"]),
            mem("only speaker", 9000, entities=["speaker"]),
        )
        found = await b.neighbors([ids[15]], ["entity"], hops=1, limit=50)
        got = [n.memory.id for n in found]
        assert topic in got
        assert ids[15] not in got
        assert {ids[14], ids[16]} <= set(got)
        assert far not in got
        assert len(got) == len(set(got)) <= 1 + 2 * 8
        assert all(n.edge_type == "entity" and 0 < n.weight <= 1 for n in found)

    run_with(store, body)


def test_link_validates_and_upserts(store: Open) -> None:
    async def body(b: MemoryBackend) -> None:
        a, bb = await add(b, mem("first", 0), mem("second", 500))
        with pytest.raises(BackendError, match="unknown memory"):
            await b.link(a, "mem_nope", "related")
        with pytest.raises(BackendError, match="weight"):
            await b.link(a, bb, "related", 2.0)
        await b.link(a, bb, "related", 0.3)
        await b.link(a, bb, "related", 0.9)
        (n,) = [n for n in await b.neighbors([a], ["related"]) if n.memory.id == bb]
        assert n.weight == 0.9

    run_with(store, body)


def test_forget_hides_a_memory_everywhere(store: Open) -> None:
    async def body(b: MemoryBackend) -> None:
        a, bb = await add(b, mem("forget me please", 0, entities=["Zed"]), mem("keep me", 1))
        assert await b.forget(a)
        assert not await b.forget(a)
        assert not await b.forget("mem_nope")
        assert await b.search("forget", 5) == []
        assert [m.id for m in await b.get_memories([a, bb])] == [bb]
        assert await b.neighbors([bb]) == []
        assert "Zed" not in await b.known_entities()
        again = await b.write(mem("forget me please", 2))
        assert again.action is WriteAction.ADDED  # a forgotten text may be written anew

    run_with(store, body)


def test_get_memories_keeps_the_order_asked_and_known_entities_count(store: Open) -> None:
    async def body(b: MemoryBackend) -> None:
        a, bb, c = await add(
            b,
            mem("x1", 0, entities=["Ana", "Bo"]),
            mem("x2", 1, entities=["ana"]),
            mem("x3", 2, entities=["Cy"]),
        )
        got = await b.get_memories([c, "nope", a, bb, a])
        assert [m.id for m in got] == [c, a, bb]
        names = await b.known_entities()
        assert names[0].casefold() == "ana"
        assert set(names[1:]) == {"Bo", "Cy"}

    run_with(store, body)


def test_data_outlives_the_handle(store: Open) -> None:
    (mid,) = run_with(store, lambda b: add(b, mem("durable words", 0)))
    hits = run_with(store, lambda b: b.search("durable", 3))
    assert [h.memory.id for h in hits] == [mid]


def test_health_is_ok(store: Open) -> None:
    checks = run_with(store, lambda b: b.health())
    assert checks
    assert all(c.status is Status.OK for c in checks), checks


def test_listing_pages_in_write_order_skips_deleted_and_resumes(store: Open) -> None:
    async def body(b: Any) -> None:
        ids = await add(b, *[mem(f"memory {i}", i) for i in range(5)])
        await b.forget(ids[1])
        first, cursor = await b.list_memories(None, 2)
        rest, cursor = await b.list_memories(cursor, 10)
        assert [m.id for m in first + rest] == [ids[0], *ids[2:]]
        assert await b.list_memories(cursor, 10) == ([], cursor)
        (later,) = await add(b, mem("written later", 9))
        assert [m.id for m in (await b.list_memories(cursor, 10))[0]] == [later]

    run_with(store, body)
