"""The `MemoryBackend` contract, run the same way against every kind of store, each real:

- `embedded`: a SQLite file; `postgres`: a real PostgreSQL server (`tests/pg_fixtures.py`);
- `mnemon`: the `mnemon` CLI, as the contract double (`tests/mnemon_double`) and, where one
  is found, the real build (`../shared/mnemon/bin/mnemon`, marked `mnemon_real`);
- `mnemon-mcp` and `kg-memory`: the npm MCP servers (`make npm-servers`, `.tools/npm`);
- `mnemonic`: a folder of markdown files; `fused`: an embedded store and a Mnemonic folder
  behind one `FusedBackend`.

What every store must do is checked for all of them. What a store may lack is read from its
`capabilities` (a filter it does not apply, a graph, links, listing, corrections), and what
differs between stores without a flag (which fields round-trip, whether its own search
stems words, whether it skips an exact duplicate itself) is written per kind in `KINDS`,
each with its reason. The SQL stores' own promises (entity weights, the temporal chain, the
entity walk) are the last tests, over `embedded` and `postgres`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from memory_orchestrator.backends.base import (
    MemoryBackend,
    backing_up,
    enumerable,
    exporting,
    superseding,
)
from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.errors import BackendError, CapabilityMissing
from memory_orchestrator.models import (
    MemoryType,
    NewMemory,
    SearchFilters,
    Status,
    TimeRange,
    WriteAction,
)
from tests.mnemon_double import fast_launcher, real_binary
from tests.npm_servers import require_script

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

T = TypeVar("T")
T0 = datetime(2024, 7, 1, 12, 0, tzinfo=UTC)
Open = Callable[[], MemoryBackend]


@dataclass(frozen=True)
class Kind:
    """What one kind of store keeps and does beyond the flags of its `capabilities`."""

    name: str
    # the optional fields of a memory that come back as written
    keeps: frozenset[str]
    # the store's own search finds "went hiking in the mountains" for "who hikes in mountain?"
    stems: bool = True
    # a second write of the same text is SKIPPED by the store itself, naming the first
    skips_duplicates: bool = False
    # the entities a memory comes back with: all of those written, or the first only
    all_entities: bool = True
    # the type a link is made with is the type an export lists (else the store's own name)
    edge_types_as_linked: bool = True


ALL_FIELDS = frozenset({"type", "tags", "metadata", "source", "importance", "created_at"})
KINDS = {
    "embedded": Kind("embedded", ALL_FIELDS, skips_duplicates=True),
    "postgres": Kind("postgres", ALL_FIELDS, skips_duplicates=True),
    # a category and tags of its own, no metadata beyond the category; importance on its
    # 1-5 scale (backends/mnemon/mapping.py); its recall matches words as written
    # a link takes one of Mnemon's own edge types ("related" -> "entity": mapping.RELATIONS)
    "mnemon": Kind(
        "mnemon",
        frozenset({"type", "tags", "source", "created_at"}),
        stems=False,
        edge_types_as_linked=False,
    ),
    # a layer and one entity_name per memory (the other entities in its meta); no tags
    "mnemon-mcp": Kind(
        "mnemon-mcp",
        frozenset({"type", "importance", "source", "created_at"}),
        all_entities=False,
    ),
    # an observation of its first entity (the others are related entities): text and time,
    # and the type as the entity's type when the write makes the entity
    "kg-memory": Kind("kg-memory", frozenset({"type", "created_at"}), all_entities=False),
    # frontmatter of its own: namespace and title are read from metadata, the rest is not kept
    "mnemonic": Kind("mnemonic", ALL_FIELDS - {"metadata"}),
    # writes go to the primary member, the embedded store
    "fused": Kind("fused", ALL_FIELDS, skips_duplicates=True),
}


def _mnemon(binary: Path, data: Path) -> Open:
    from memory_orchestrator.backends.mnemon import MnemonBackend
    from memory_orchestrator.settings import MnemonSettings

    return lambda: MnemonBackend(MnemonSettings(binary=binary, data_dir=data))


def _opener(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Open:
    """How to open a store of `kind` (each call: a new handle on the same data)."""
    if kind == "embedded":
        return lambda: EmbeddedBackend(tmp_path / "memories.db")
    if kind == "postgres":
        from memory_orchestrator.backends.postgres import PostgresBackend

        dsn: str = request.getfixturevalue("pg_dsn")
        return lambda: PostgresBackend(dsn)
    if kind == "mnemon":
        return _mnemon(fast_launcher(tmp_path / "bin"), tmp_path / "mnemon-data")
    if kind == "mnemon-real":
        binary = real_binary()
        assert binary is not None
        return _mnemon(binary, tmp_path / "mnemon-data")
    if kind == "mnemon-mcp":
        from memory_orchestrator.backends.mnemon_mcp import PACKAGE, MnemonMcpBackend

        script = require_script(PACKAGE)
        return lambda: MnemonMcpBackend(tmp_path / "store.db", script=script, timeout_s=20)
    if kind == "kg-memory":
        from memory_orchestrator.backends.kg_memory import PACKAGE, KgMemoryBackend

        script = require_script(PACKAGE)
        return lambda: KgMemoryBackend(tmp_path / "memory.jsonl", script=script, timeout_s=20)
    if kind == "mnemonic":
        from memory_orchestrator.backends.mnemonic import MnemonicBackend

        return lambda: MnemonicBackend(tmp_path / "notes")
    assert kind == "fused"
    from memory_orchestrator.backends.fused import FusedBackend, Member
    from memory_orchestrator.backends.mnemonic import MnemonicBackend

    return lambda: FusedBackend(
        [
            Member("embedded", EmbeddedBackend(tmp_path / "memories.db"), 1.0),
            Member("mnemonic", MnemonicBackend(tmp_path / "notes"), 0.5),
        ],
        primary="embedded",
    )


MNEMON_REAL = [pytest.param("mnemon-real", marks=pytest.mark.mnemon_real)] if real_binary() else []


@pytest.fixture(params=[*KINDS, *MNEMON_REAL])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Open:
    return _opener(kind, request, tmp_path)


@pytest.fixture
def expect(kind: str) -> Kind:
    return KINDS["mnemon" if kind == "mnemon-real" else kind]


async def run_with(open_: Open, body: Callable[[Any], Awaitable[T]]) -> T:
    backend = open_()
    try:
        return await body(backend)
    finally:
        await backend.close()


def mem(content: str, minutes: int = 0, **fields: Any) -> NewMemory:
    return NewMemory(content=content, created_at=T0 + timedelta(minutes=minutes), **fields)


async def add(backend: MemoryBackend, *memories: NewMemory) -> list[str]:
    outcomes = await backend.write_many(memories)
    assert [o.action for o in outcomes] == [WriteAction.ADDED] * len(memories)
    return [str(o.id) for o in outcomes]


# ---------------------------------------------------------------- every store


async def test_a_written_memory_round_trips_as_far_as_the_store_keeps_it(
    store: Open, expect: Kind
) -> None:
    new = mem(
        "Caroline went hiking with her family in the mountains",
        0,
        type=MemoryType.EPISODIC,
        entities=["Caroline", "Rockies"],
        tags=["trip", "family"],
        metadata={"session": 3, "speaker": "Caroline"},
        source="chat",
        importance=0.7,
    )

    async def body(b: MemoryBackend) -> None:
        assert isinstance(b, MemoryBackend)
        mid, _ = await add(b, new, mem("Melanie paints sunsets", 5))
        (got,) = await b.get_memories([mid])
        assert (got.id, got.content) == (mid, new.content)
        assert got.store.startswith(b.name) or b.name == "fused"
        written = ("Caroline", "Rockies") if expect.all_entities else ("Caroline",)
        assert tuple(e.casefold() for e in got.entities) == tuple(w.casefold() for w in written)
        kept = {
            "type": got.type == new.type,
            "tags": got.tags == ("trip", "family"),
            "metadata": {k: got.metadata.get(k) for k in new.metadata} == new.metadata,
            "source": got.source == "chat",
            "importance": got.importance == 0.7,
            "created_at": got.created_at == T0,
        }
        assert {name for name, same in kept.items() if same} == expect.keeps, sorted(kept.items())

    await run_with(store, body)


async def test_search_ranks_from_one_within_top_k_and_finds_a_written_memory(
    store: Open, expect: Kind
) -> None:
    async def body(b: MemoryBackend) -> None:
        mid, *_ = await add(
            b,
            mem("Caroline went hiking with her family in the mountains", 0),
            *[mem(f"Melanie paints sunset number {i}", i + 1) for i in range(6)],
        )
        query = "who hikes in mountain?" if expect.stems else "hiking mountains"
        hits = await b.search(query, 5)
        assert hits
        assert hits[0].memory.id == mid
        assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
        assert len(await b.search("Melanie sunset", 3)) <= 3

    await run_with(store, body)


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
async def test_query_syntax_never_raises(store: Open, query: str) -> None:
    async def body(b: MemoryBackend) -> None:
        await add(b, mem("Caroline's family in July", 0, entities=["Caroline"]))
        assert all(h.memory.content for h in await b.search(query, 5))

    await run_with(store, body)


async def test_filters_the_store_declares_are_applied_and_the_others_never_lose_a_match(
    store: Open,
) -> None:
    """A filter the store applies itself (`capabilities`) gives exactly the matches; one it
    does not may come back unfiltered (the pipeline filters), but never loses a match."""

    async def body(b: MemoryBackend) -> None:
        a, bb, c = await add(
            b,
            mem("project kickoff meeting", 0, type=MemoryType.EPISODIC, entities=["Ana"]),
            mem("project kickoff rules", 60, type=MemoryType.PROCEDURAL, entities=["Bo"]),
            mem("project kickoff retro", 120, type=MemoryType.EPISODIC, entities=["Bo"]),
        )
        caps = b.capabilities

        async def check(f: SearchFilters, want: set[str], applied: bool) -> None:
            got = {h.memory.id for h in await b.search("project kickoff", 10, f)}
            assert got == want if applied else got >= want

        await check(SearchFilters(memory_types=(MemoryType.EPISODIC,)), {a, c}, caps.memory_types)
        await check(SearchFilters(entity_ids=("bo",)), {bb, c}, caps.entity_filter)
        late = TimeRange(start=T0 + timedelta(minutes=30))
        await check(SearchFilters(time_range=late), {bb, c}, caps.time_filter)

    await run_with(store, body)


async def test_a_duplicate_is_skipped_by_the_stores_that_say_so_and_otherwise_added(
    store: Open, expect: Kind
) -> None:
    async def body(b: MemoryBackend) -> None:
        (first,) = await add(b, mem("the same words", 0))
        again = await b.write(mem("the same words", 9))
        if expect.skips_duplicates:
            assert (again.action, again.existing_id) == (WriteAction.SKIPPED, first)
        else:
            assert again.action in {WriteAction.ADDED, WriteAction.SKIPPED, WriteAction.UPDATED}
            assert again.id

    await run_with(store, body)


async def test_neighbors_are_never_a_seed_within_the_limit_and_of_the_types_asked(
    store: Open,
) -> None:
    async def body(b: MemoryBackend) -> None:
        ids = await add(
            b, *[mem(f"note {i} about the Atlas launch", i, entities=["Atlas"]) for i in range(4)]
        )
        found = await b.neighbors(ids[:1], hops=2, limit=50)
        if not b.capabilities.graph:
            assert found == []
            return
        assert ids[0] not in {n.memory.id for n in found}
        assert len(await b.neighbors(ids[:1], hops=2, limit=1)) <= 1
        types = b.capabilities.edge_types or ("entity",)
        for edge_type in types:
            got = await b.neighbors(ids[:1], [edge_type], hops=1)
            assert all(n.edge_type == edge_type for n in got)
        assert await b.neighbors(ids[:1], ["no-such-edge"], hops=3) == []

    await run_with(store, body)


async def test_link_is_kept_by_a_store_that_links_and_refused_by_the_others(store: Open) -> None:
    async def body(b: MemoryBackend) -> None:
        a, bb = await add(b, mem("first", 0, entities=["Ana"]), mem("second", 500))
        if not b.capabilities.link:
            with pytest.raises(CapabilityMissing):
                await b.link(a, bb, "related")
            return
        with pytest.raises(BackendError):
            await b.link(a, "mem_nope", "related")
        edge = await b.link(a, bb, "related", 0.9)
        assert (edge.source_id, edge.target_id) == (a, bb)
        walked = await b.neighbors([a], hops=1)
        assert bb in {n.memory.id for n in walked}

    await run_with(store, body)


async def test_forget_hides_a_memory_from_reads_and_search(store: Open) -> None:
    async def body(b: MemoryBackend) -> None:
        a, bb = await add(b, mem("forget me please", 0, entities=["Zed"]), mem("keep me", 1))
        assert await b.forget(a)
        assert not await b.forget(a)
        assert not await b.forget("mem_nope")
        assert a not in {h.memory.id for h in await b.search("forget please", 5)}
        assert [m.id for m in await b.get_memories([a, bb])] == [bb]
        assert a not in {n.memory.id for n in await b.neighbors([bb], hops=2)}

    await run_with(store, body)


async def test_get_memories_keeps_the_order_asked_and_leaves_unknown_ids_out(store: Open) -> None:
    async def body(b: MemoryBackend) -> None:
        a, bb, c = await add(
            b,
            mem("x1 apples", 0, entities=["Ana", "Bo"]),
            mem("x2 pears", 1, entities=["Ana"]),
            mem("x3 plums", 2, entities=["Cy"]),
        )
        got = await b.get_memories([c, "nope", a, bb])
        assert [m.id for m in got] == [c, a, bb]
        if b.capabilities.entity_index:
            names = {n.casefold() for n in await b.known_entities()}
            assert "ana" in names

    await run_with(store, body)


async def test_data_outlives_the_handle(store: Open) -> None:
    (mid,) = await run_with(store, lambda b: add(b, mem("durable words", 0)))
    got = await run_with(store, lambda b: b.get_memories([mid]))
    assert [m.content for m in got] == ["durable words"]


async def test_health_is_ok(store: Open) -> None:
    checks = await run_with(store, lambda b: b.health())
    assert checks
    assert all(c.status is not Status.ERROR for c in checks), checks


async def test_listing_pages_every_live_memory_and_resumes_where_the_store_can_list(
    store: Open,
) -> None:
    async def body(b: MemoryBackend) -> None:
        ids = await add(b, *[mem(f"memory number {i}", i) for i in range(5)])
        lister = enumerable(b)
        if not b.capabilities.listing:
            assert lister is None
            return
        assert lister is not None
        await b.forget(ids[1])
        first, cursor = await lister.list_memories(None, 2)
        assert len(first) <= 2
        rest, cursor = await lister.list_memories(cursor, 10)
        listed = [m.id for m in first + rest]
        assert set(listed) == {ids[0], *ids[2:]}
        (later,) = await add(b, mem("written later", 9))
        after = [m.id for m in (await lister.list_memories(cursor, 10))[0]]
        assert later in after

    await run_with(store, body)


async def test_a_correction_is_marked_where_the_store_can_mark_one(store: Open) -> None:
    async def body(b: MemoryBackend) -> None:
        old, new = await add(
            b, mem("The limit is 100.", 0, entities=["Atlas"]), mem("The limit is 500.", 5)
        )
        marker = superseding(b)
        if not b.capabilities.supersede:
            assert marker is None
            return
        assert marker is not None
        await marker.supersede(old, new)
        (got,) = await b.get_memories([old])
        assert got.superseded_by == new

    await run_with(store, body)


async def test_an_export_lists_the_links_where_the_store_can_export(
    store: Open, expect: Kind
) -> None:
    async def body(b: MemoryBackend) -> None:
        a, bb = await add(b, mem("first", 0, entities=["Ana"]), mem("second", 500))
        if b.capabilities.link:
            await b.link(a, bb, "related", 0.5)
        lister = exporting(b)
        if not b.capabilities.export:
            assert lister is None
            return
        assert lister is not None
        edges, _ = await lister.list_edges(None, 100)
        assert all({e.source_id, e.target_id} <= {a, bb} for e in edges)
        if b.capabilities.link:
            listed = {(e.source_id, e.target_id, e.type) for e in edges}
            if expect.edge_types_as_linked:
                assert (a, bb, "related") in listed
            else:
                assert (a, bb) in {(source, target) for source, target, _ in listed}

    await run_with(store, body)


async def test_a_backup_is_a_file_where_the_store_can_copy_itself(
    store: Open, tmp_path: Path
) -> None:
    async def body(b: MemoryBackend) -> None:
        await add(b, mem("kept in the copy", 0))
        copier = backing_up(b)
        if not b.capabilities.backup:
            assert copier is None
            return
        assert copier is not None
        await copier.backup(tmp_path / "copy.db")
        assert (tmp_path / "copy.db").stat().st_size > 0

    await run_with(store, body)


# ---------------------------------------------------------------- the SQL stores' own promises


@pytest.fixture(params=["embedded", "postgres"])
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Open:
    return _opener(str(request.param), request, tmp_path)


async def test_entities_weigh_more_than_body_text(sql_store: Open) -> None:
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

    await run_with(sql_store, body)


async def test_an_exact_duplicate_in_a_batch_is_skipped(sql_store: Open) -> None:
    async def body(b: MemoryBackend) -> None:
        (first,) = await add(b, mem("the same words", 0))
        again = await b.write(mem("  the   same words ", 9))
        assert (again.action, again.existing_id) == (WriteAction.SKIPPED, first)
        batch = await b.write_many([mem("twice in a batch", 1), mem("twice in a batch", 2)])
        assert [o.action for o in batch] == [WriteAction.ADDED, WriteAction.SKIPPED]

    await run_with(sql_store, body)


async def test_neighbors_follow_the_temporal_chain_hops_edge_types_and_limit(
    sql_store: Open,
) -> None:
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

    await run_with(sql_store, body)


async def test_neighbors_walk_shared_entities_nearest_in_time_with_a_capped_fanout(
    sql_store: Open,
) -> None:
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

    await run_with(sql_store, body)


async def test_link_validates_and_upserts(sql_store: Open) -> None:
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

    await run_with(sql_store, body)


async def test_forget_hides_a_memory_everywhere(sql_store: Open) -> None:
    async def body(b: MemoryBackend) -> None:
        a, bb = await add(b, mem("forget me please", 0, entities=["Zed"]), mem("keep me", 1))
        assert await b.forget(a)
        assert await b.search("forget", 5) == []
        assert await b.neighbors([bb]) == []
        assert "Zed" not in await b.known_entities()
        again = await b.write(mem("forget me please", 2))
        assert again.action is WriteAction.ADDED  # a forgotten text may be written anew

    await run_with(sql_store, body)


async def test_known_entities_count_names_case_folded(sql_store: Open) -> None:
    async def body(b: MemoryBackend) -> None:
        await add(
            b,
            mem("x1", 0, entities=["Ana", "Bo"]),
            mem("x2", 1, entities=["ana"]),
            mem("x3", 2, entities=["Cy"]),
        )
        names = await b.known_entities()
        assert names[0].casefold() == "ana"
        assert set(names[1:]) == {"Bo", "Cy"}

    await run_with(sql_store, body)


async def test_listing_is_in_write_order_and_stops_at_the_end(sql_store: Open) -> None:
    async def body(b: Any) -> None:
        ids = await add(b, *[mem(f"memory {i}", i) for i in range(5)])
        await b.forget(ids[1])
        first, cursor = await b.list_memories(None, 2)
        rest, cursor = await b.list_memories(cursor, 10)
        assert [m.id for m in first + rest] == [ids[0], *ids[2:]]
        assert await b.list_memories(cursor, 10) == ([], cursor)

    await run_with(sql_store, body)
