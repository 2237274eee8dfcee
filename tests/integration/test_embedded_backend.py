"""The embedded SQLite store against real files."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from memory_orchestrator.backends import embedded_conn, registry
from memory_orchestrator.backends.base import MemoryBackend, enumerable
from memory_orchestrator.backends.embedded import EmbeddedBackend, from_settings
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import (
    MemoryType,
    NewMemory,
    SearchFilters,
    Status,
    TimeRange,
    WriteAction,
)
from memory_orchestrator.settings import EmbeddedSettings, Settings

pytestmark = pytest.mark.integration

T = TypeVar("T")
T0 = datetime(2024, 7, 1, 12, 0, tzinfo=UTC)


async def run_with(
    path: Path, body: Callable[[EmbeddedBackend], Awaitable[T]], **options: Any
) -> T:
    """Open a backend on `path`, run `body` with it, and always close it."""

    backend = EmbeddedBackend(path, **options)
    try:
        return await body(backend)
    finally:
        await backend.close()


def mem(content: str, minutes: int = 0, **fields: Any) -> NewMemory:
    return NewMemory(content=content, created_at=T0 + timedelta(minutes=minutes), **fields)


async def add(backend: EmbeddedBackend, *memories: NewMemory) -> list[str]:
    outcomes = await backend.write_many(memories)
    assert all(o.action is WriteAction.ADDED for o in outcomes)
    return [o.id for o in outcomes]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "dir" / "memories.db"


async def test_backend_satisfies_the_protocol_and_settings_factory_uses_the_configured_path(
    tmp_path: Path,
) -> None:
    path = tmp_path / "from-settings.db"
    settings = Settings(data_dir=tmp_path, embedded=EmbeddedSettings(path=path))
    backend = from_settings(settings)
    via_registry = registry.create("embedded", settings)
    try:
        assert isinstance(via_registry, EmbeddedBackend)
        assert via_registry.path == path
        assert isinstance(backend, MemoryBackend)
        assert backend.name == "embedded"
        assert backend.capabilities.graph
        assert backend.capabilities.entity_index
        assert backend.path == path
    finally:
        await backend.close()
        await via_registry.close()
    assert path.exists()


async def test_written_memory_is_found_by_stemmed_search_and_round_trips(db: Path) -> None:
    async def body(b: EmbeddedBackend) -> None:
        naive = datetime(2024, 7, 14, 9, 30, 0, 123456)
        outcome = await b.write(
            NewMemory(
                content="Caroline visited her family in july",
                type=MemoryType.EPISODIC,
                entities=["Caroline", "Family Trip"],
                tags=["travel", "personal"],
                created_at=naive,
                source="chat",
                importance=0.7,
                confidence=0.9,
                metadata={"session": 3, "speaker": "Caroline", "flag": True, "none": None},
            )
        )
        assert outcome.action is WriteAction.ADDED
        assert outcome.id.startswith("mem_")
        assert len(outcome.id) == 16
        for query in ("families", "July", "Who did Caroline visit?"):
            hits = await b.search(query, 5)
            assert [h.memory.id for h in hits] == [outcome.id], query
            assert hits[0].rank == 1
            assert hits[0].score > 0
        memory = (await b.search("families", 5))[0].memory
        assert memory.store == "embedded"
        assert memory.type is MemoryType.EPISODIC
        assert memory.entities == ("Caroline", "Family Trip")
        assert memory.tags == ("travel", "personal")
        assert memory.created_at == naive.replace(tzinfo=UTC)
        assert memory.metadata == {"session": 3, "speaker": "Caroline", "flag": True, "none": None}
        assert (memory.source, memory.importance, memory.confidence) == ("chat", 0.7, 0.9)

    await run_with(db, body)
    assert db.exists()


async def test_search_ranks_better_matches_first_with_consecutive_ranks(db: Path) -> None:
    async def body(b: EmbeddedBackend) -> None:
        await add(
            b,
            mem("painting a sunset over the lake", 0),
            mem("the lake was cold", 1),
            mem("a painting of a painting of a sunset lake", 2),
            mem("nothing relevant here", 3),
        )
        hits = await b.search("sunset painting", 10)
        assert [h.rank for h in hits] == [1, 2]
        assert hits[0].score >= hits[1].score
        assert len(await b.search("lake", 2)) == 2
        assert await b.search("lake", 0) == []

    await run_with(db, body)


async def test_entities_are_searchable_and_weigh_more_than_body_text(db: Path) -> None:
    async def body(b: EmbeddedBackend) -> None:
        tagged, _ = await add(
            b, mem("went hiking", 0, entities=["Melanie"]), mem("melanie is a name", 1)
        )
        hits = await b.search("Melanie", 5)
        assert hits[0].memory.id == tagged

    await run_with(db, body)


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '"family',
        "family*",
        "*",
        "NEAR(family july)",
        "family NEAR july",
        "-family",
        "family - july",
        "body:family",
        "ents:caroline",
        "(family",
        "family)",
        "AND OR NOT",
        "^family",
        "{body ents}: family",
        "famille été naïve 家族 😀",
        "'",
        "caroline's",
        "",
        "   ",
        "?!.,;",
    ],
)
async def test_fts_syntax_in_queries_never_raises(db: Path, query: str) -> None:
    async def body(b: EmbeddedBackend) -> None:
        await add(b, mem("Caroline's family in July", 0, entities=["Caroline"]))
        hits = await b.search(query, 5)
        assert all(h.memory.store == "embedded" for h in hits)

    await run_with(db, body)


async def test_a_query_of_only_punctuation_returns_nothing(db: Path) -> None:
    async def body(b: EmbeddedBackend) -> None:
        await add(b, mem("some content", 0))
        assert await b.search("?!*()\"'-:", 5) == []

    await run_with(db, body)


async def test_very_common_terms_are_pruned_without_losing_the_rare_match(db: Path) -> None:
    async def body(b: EmbeddedBackend) -> None:
        await add(b, *[mem(f"daily standup note {i}", i) for i in range(1200)])
        (rare,) = await add(b, mem("the standup about the kubernetes outage", 2000))
        hits = await b.search("standup kubernetes", 10)
        assert [h.memory.id for h in hits] == [rare]  # hits matching only "standup" are dropped
        assert len(await b.search("standup", 10)) == 10  # a lone common term is still searched
        assert len(await b.search("note", 10)) == 10

    await run_with(db, body)


@pytest.mark.parametrize("in_memory", [False, True], ids=["file", "in-memory"])
async def test_term_counts_are_kept_until_the_store_changes(
    db: Path, monkeypatch: pytest.MonkeyPatch, in_memory: bool
) -> None:
    """The pruning's counts are read once while the store is unchanged, and anew after a
    write: a term grown common since is pruned (a count kept past the write would keep it).
    In memory the reads share the writer's connection: its own changes count too."""
    counted: list[str] = []
    connect = embedded_conn.Connections._connect

    def traced(self: embedded_conn.Connections, busy_ms: int, *, reader: bool) -> Any:
        conn = connect(self, busy_ms, reader=reader)
        conn.set_trace_callback(
            lambda sql: counted.append(sql) if "FROM memories_vocab" in sql else None
        )
        return conn

    monkeypatch.setattr(embedded_conn.Connections, "_connect", traced)

    async def body(b: EmbeddedBackend) -> None:
        await add(b, *[mem(f"daily note {i}", i) for i in range(1000)])
        beta, kube = await add(b, mem("beta rollout", 1001), mem("kubernetes outage", 1002))
        for _ in range(3):
            hits = await b.search("beta kubernetes", 10)
            assert {h.memory.id for h in hits} == {beta, kube}
        assert len(counted) == 1  # one count of the two terms, then kept
        await add(b, *[mem(f"beta filler {i}", 2000 + i) for i in range(1100)])
        hits = await b.search("beta kubernetes", 10)
        assert [h.memory.id for h in hits] == [kube]  # "beta" is now in over half
        assert len(counted) == 2

    await run_with(Path(":memory:") if in_memory else db, body)


async def test_unicode_content_is_found_by_unicode_queries(db: Path) -> None:
    async def body(b: EmbeddedBackend) -> None:
        (mid,) = await add(b, mem("Zoë a visité le café à Zürich", 0))
        assert [h.memory.id for h in await b.search("zürich café", 5)] == [mid]

    await run_with(db, body)


async def test_search_filters_by_type_entity_and_time_range(db: Path) -> None:
    async def body(b: EmbeddedBackend) -> None:
        early, fact, late = await add(
            b,
            mem("talked about work", 0, type=MemoryType.EPISODIC, entities=["Alice"]),
            mem("work starts at nine", 60, type=MemoryType.SEMANTIC, entities=["Bob"]),
            mem("more work talk", 120, type=MemoryType.EPISODIC, entities=["alice", "Carol"]),
        )

        async def ids(filters: SearchFilters) -> set[str]:
            return {h.memory.id for h in await b.search("work", 10, filters)}

        assert await ids(SearchFilters()) == {early, fact, late}
        assert await ids(SearchFilters(memory_types=[MemoryType.EPISODIC])) == {early, late}
        assert await ids(SearchFilters(entity_ids=["ALICE"])) == {early, late}
        assert await ids(SearchFilters(entity_ids=["bob", "carol"])) == {fact, late}
        assert await ids(SearchFilters(entity_ids=["nobody"])) == set()
        window = TimeRange(start=T0 + timedelta(minutes=30), end=T0 + timedelta(minutes=90))
        assert await ids(SearchFilters(time_range=window)) == {fact}
        naive_start = TimeRange(start=datetime(2024, 7, 1, 13, 0))  # naive = UTC
        assert await ids(SearchFilters(time_range=naive_start)) == {fact, late}
        combined = SearchFilters(
            memory_types=[MemoryType.EPISODIC],
            entity_ids=["alice"],
            time_range=TimeRange(end=T0 + timedelta(minutes=10)),
        )
        assert await ids(combined) == {early}

    await run_with(db, body)


async def test_exact_duplicate_write_is_skipped_with_the_existing_id(db: Path) -> None:
    async def body(b: EmbeddedBackend) -> None:
        first = await b.write(mem("I like tea", 0))
        again = await b.write(mem("I like tea", 5, entities=["Tea"]))
        assert again.action is WriteAction.SKIPPED
        assert again.id == first.id
        assert again.existing_id == first.id
        assert first.id in again.detail
        batch = await b.write_many([mem("new one", 1), mem("new one", 2), mem("I like tea", 3)])
        skipped = WriteAction.SKIPPED
        assert [o.action for o in batch] == [WriteAction.ADDED, skipped, skipped]
        assert batch[1].existing_id == batch[0].id
        assert batch[2].existing_id == first.id
        assert len(await b.search("tea", 10)) == 1

    await run_with(db, body)


async def test_write_many_stores_700_memories_in_one_call_and_chains_them_in_time(
    db: Path,
) -> None:
    async def body(b: EmbeddedBackend) -> None:
        order = list(range(700))
        shuffled = order[::2] + order[1::2]  # written out of time order
        batch = [
            mem(f"message number {i} about topic {i % 7}", i, entities=[f"Speaker{i % 2}"])
            for i in shuffled
        ]
        # How fast this goes is bench/bench_import.py's question, not a test's.
        outcomes = await b.write_many(batch)
        assert all(o.action is WriteAction.ADDED for o in outcomes)
        by_minute = {m: o.id for m, o in zip(shuffled, outcomes, strict=True)}
        for minute in (0, 1, 350, 698):
            found = await b.neighbors([by_minute[minute]], ["temporal"], hops=1, limit=10)
            expected = {by_minute[m] for m in (minute - 1, minute + 1) if m in by_minute}
            assert {n.memory.id for n in found} == expected
            assert all(n.edge_type == "temporal" and n.weight == 1.0 for n in found)
        health = {c.name: c for c in await b.health()}
        assert health["counts"].detail == "700 memories, 699 edges"

    await run_with(db, body)


async def test_out_of_order_single_writes_keep_the_temporal_chain_sensible(db: Path) -> None:
    async def body(b: EmbeddedBackend) -> None:
        (first,) = await add(b, mem("first", 0))
        (third,) = await add(b, mem("third", 20))
        (second,) = await add(b, mem("second", 10))
        (zeroth,) = await add(b, mem("zeroth", -10))

        async def temporal(mid: str) -> set[str]:
            return {n.memory.id for n in await b.neighbors([mid], ["temporal"], 1, 10)}

        assert second in await temporal(first)
        assert await temporal(second) == {first, third}
        assert await temporal(zeroth) == {first}

    await run_with(db, body)


async def test_neighbors_respect_hops_edge_types_limit_and_exclude_seeds(db: Path) -> None:
    async def body(b: EmbeddedBackend) -> None:
        a, bb, c, d = await add(b, mem("a", 0), mem("b", 1), mem("c", 2), mem("d", 3))
        await b.link(a, d, "causal", 0.4)
        one = await b.neighbors([a], hops=1)
        assert [(n.memory.id, n.edge_type, n.hops) for n in one] == [
            (bb, "temporal", 1),
            (d, "causal", 1),
        ]
        assert all(n.seed_id == a and n.via_id == a for n in one)
        two = await b.neighbors([a], ["temporal"], hops=2)
        assert [(n.memory.id, n.hops, n.via_id) for n in two] == [(bb, 1, a), (c, 2, bb)]
        assert [n.memory.id for n in await b.neighbors([a], ["causal"], hops=3)] == [d]
        assert await b.neighbors([a], ["semantic"], hops=3) == []
        assert await b.neighbors([a], [], hops=3) == []
        everything = await b.neighbors([a], hops=3)
        assert {n.memory.id for n in everything} == {bb, c, d}
        assert len(await b.neighbors([a], hops=3, limit=1)) == 1
        both = await b.neighbors([a, bb], hops=1)
        assert {n.memory.id for n in both} == {c, d}
        assert await b.neighbors([a], hops=0) == []

    await run_with(db, body)


async def test_neighbors_walk_shared_entities_with_a_capped_fanout(db: Path) -> None:
    async def body(b: EmbeddedBackend) -> None:
        ids = await add(
            b, *[mem(f"note {i}", i * 10, entities=["Speaker", f"Topic{i}"]) for i in range(50)]
        )
        topic, far = await add(
            b,
            mem("another take on topic 25", 5000, entities=["topic25"]),
            mem("only speaker", 9000, entities=["speaker"]),
        )
        found = await b.neighbors([ids[25]], ["entity"], hops=1, limit=50)
        got = [n.memory.id for n in found]
        assert topic in got
        assert ids[25] not in got
        assert all(n.edge_type == "entity" and 0 < n.weight <= 1 for n in found)
        assert len(got) == len(set(got)) <= 1 + 2 * b.entity_fanout
        assert {ids[24], ids[26]} <= set(got)  # nearest in time first
        assert far not in got  # a sharer far away in time is left out
        assert len(await b.neighbors([ids[25]], ["entity"], hops=1, limit=3)) == 3

    await run_with(db, body)


async def test_link_validates_ids_and_weight_and_upserts(db: Path) -> None:
    async def body(b: EmbeddedBackend) -> None:
        a, c = await add(b, mem("cause", 0), mem("effect", 1))
        edge = await b.link(a, c, "causal", 0.8, {"why": "because"})
        assert (edge.source_id, edge.target_id, edge.type, edge.weight) == (a, c, "causal", 0.8)
        assert edge.meta == {"why": "because"}
        await b.link(a, c, "causal", 0.3)
        (n,) = await b.neighbors([c], ["causal"])
        assert (n.memory.id, n.weight) == (a, 0.3)
        for bad in [(a, "mem_missing", 0.5), ("", c, 0.5), (a, a, 0.5), (a, c, 1.5), (a, c, -0.1)]:
            with pytest.raises(BackendError):
                await b.link(bad[0], bad[1], "causal", bad[2])
        with pytest.raises(BackendError):
            await b.link(a, c, " ", 0.5)

    await run_with(db, body)


async def test_forget_hides_a_memory_from_search_get_and_neighbors(db: Path) -> None:
    async def body(b: EmbeddedBackend) -> None:
        a, gone, c = await add(
            b,
            mem("apples are red", 0, entities=["Fruit"]),
            mem("apples are green", 1, entities=["Fruit"]),
            mem("apples are yellow", 2, entities=["Fruit"]),
        )
        await b.link(a, gone, "semantic", 0.9)
        assert await b.forget(gone) is True
        assert await b.forget(gone) is False
        assert await b.forget("mem_unknown") is False
        assert await b.forget("") is False
        assert gone not in {h.memory.id for h in await b.search("apples green", 10)}
        assert await b.get_memories([gone]) == []
        reached = {n.memory.id for n in await b.neighbors([a], hops=3)}
        assert gone not in reached
        assert c in reached
        assert await b.neighbors([gone]) == []
        with pytest.raises(BackendError):
            await b.link(a, gone, "related")
        again = await b.write(mem("apples are green", 5))
        assert again.action is WriteAction.ADDED
        assert again.id != gone

    await run_with(db, body)


async def test_get_memories_returns_live_ones_in_the_order_asked(db: Path) -> None:
    async def body(b: EmbeddedBackend) -> None:
        ids = await add(b, *[mem(f"memory {i}", i) for i in range(600)])
        wanted = [ids[599], "nope", ids[3], ids[3], ids[0], *ids[100:560]]
        got = await b.get_memories(wanted)
        assert [m.id for m in got] == [ids[599], ids[3], ids[0], *ids[100:560]]
        bad: list[Any] = [None, 3, "", ids[1]]
        assert [m.id for m in await b.get_memories(bad)] == [ids[1]]
        assert await b.get_memories([]) == []

    await run_with(db, body)


async def test_known_entities_lists_display_names_most_frequent_first(db: Path) -> None:
    async def body(b: EmbeddedBackend) -> None:
        await add(
            b,
            mem("one", 0, entities=["Bob", "Alice"]),
            mem("two", 1, entities=["alice", "Carol"]),
            mem("three", 2, entities=["ALICE", "Bob"]),
        )
        assert await b.known_entities() == ["ALICE", "Bob", "Carol"]
        assert await b.known_entities(limit=1) == ["ALICE"]

    await run_with(db, body)


async def test_data_persists_after_close_and_reopen(db: Path) -> None:
    async def write(b: EmbeddedBackend) -> list[str]:
        return await add(b, mem("persistent fact", 0, entities=["Disk"]), mem("second", 1))

    first, second = await run_with(db, write)

    async def read(b: EmbeddedBackend) -> None:
        assert [h.memory.id for h in await b.search("persistent", 5)] == [first]
        assert [n.memory.id for n in await b.neighbors([first], ["temporal"])] == [second]
        assert await b.known_entities() == ["Disk"]
        assert (await b.write(mem("persistent fact", 9))).action is WriteAction.SKIPPED

    await run_with(db, read)


async def test_health_is_ok_on_a_good_file(db: Path) -> None:
    async def body(b: EmbeddedBackend) -> None:
        await add(b, mem("one", 0), mem("two", 1))
        checks = {c.name: c for c in await b.health()}
        assert set(checks) == {"file", "sqlite", "fts", "counts", "writes"}
        assert all(c.status is Status.OK for c in checks.values())
        assert checks["counts"].detail == "2 memories, 1 edges"

    await run_with(db, body)


@pytest.mark.parametrize("offset", [0, 4096])
async def test_health_reports_an_error_on_a_corrupted_file(db: Path, offset: int) -> None:
    async def fill(b: EmbeddedBackend) -> None:
        await add(b, *[mem(f"memory number {i} " + "x" * 500, i) for i in range(200)])

    await run_with(db, fill)
    with db.open("r+b") as handle:
        handle.seek(offset)
        handle.write(b"\xde\xad\xbe\xef garbage " * 4000)

    async def check(b: EmbeddedBackend) -> None:
        checks = {c.name: c for c in await b.health()}
        assert checks["sqlite"].status is Status.ERROR
        assert checks["sqlite"].detail
        if offset == 0:  # not even a database any more: every call fails clearly
            assert checks["fts"].status is Status.ERROR
            with pytest.raises(BackendError, match="not a database"):
                await b.search("memory", 5)
            with pytest.raises(BackendError, match="not a database"):
                await b.write(mem("new", 1))

    await run_with(db, check)


async def test_a_locked_file_gives_a_transient_error_instead_of_hanging(db: Path) -> None:
    await run_with(db, lambda b: add(b, mem("existing", 0)))
    other = sqlite3.connect(db, isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")

        async def body(b: EmbeddedBackend) -> None:
            start = time.perf_counter()
            with pytest.raises(BackendError) as caught:
                await b.write(mem("blocked", 1))
            assert caught.value.transient
            assert "locked" in str(caught.value)
            assert time.perf_counter() - start < 2.0

        await run_with(db, body, busy_timeout_ms=100, write_wait_ms=100)
    finally:
        other.rollback()
        other.close()


async def test_a_caller_can_time_out_while_the_store_is_busy(db: Path) -> None:
    await run_with(db, lambda b: add(b, mem("existing", 0)))
    other = sqlite3.connect(db, isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")

        async def body(b: EmbeddedBackend) -> None:
            with pytest.raises(TimeoutError), anyio.fail_after(0.1):
                await b.write(mem("blocked", 1))
            # the caller is back while the write still waits for the lock (the store's own
            # wait is 30 s): it did not wait for it; then the lock goes and the write ends
            assert b.writing
            other.rollback()

        await run_with(db, body, busy_timeout_ms=30_000, write_wait_ms=30_000)
    finally:
        other.rollback()
        other.close()


async def test_list_memories_pages_in_write_order_skips_deleted_and_resumes(db: Path) -> None:
    async def body(b: EmbeddedBackend) -> None:
        assert enumerable(b) is b
        outcomes = await b.write_many([mem(f"note {i} about topic {i}", i) for i in range(5)])
        await b.forget(outcomes[1].id)
        first, cursor = await b.list_memories(None, 2)
        second, cursor = await b.list_memories(cursor, 2)
        assert [m.content for m in [*first, *second]] == [
            "note 0 about topic 0",
            "note 2 about topic 2",
            "note 3 about topic 3",
            "note 4 about topic 4",
        ]
        done, cursor = await b.list_memories(cursor, 2)
        assert done == []
        await b.write(mem("note 5 written later", 9))
        later, _ = await b.list_memories(cursor, 2)
        assert [m.content for m in later] == ["note 5 written later"]

    await run_with(db, body)
