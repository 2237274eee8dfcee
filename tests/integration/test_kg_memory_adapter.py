"""The kg-memory adapter against the real `@modelcontextprotocol/server-memory` (`make
npm-servers`). One server process for the module; each test uses words of its own.
Skipped, with the reason, only when node is absent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from memory_orchestrator.backends import registry
from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.backends.kg_memory import PACKAGE, KgMemoryBackend, search_terms
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import (
    MemoryType,
    NewMemory,
    SearchFilters,
    Status,
    TimeRange,
    WriteAction,
)
from memory_orchestrator.settings import load_settings
from tests.npm_servers import child_pids, kill_children, require_script

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def graph_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kg-memory") / "memory.jsonl"


@pytest.fixture(scope="module")
def backend(graph_file: Path) -> Iterator[KgMemoryBackend]:
    store = KgMemoryBackend(graph_file, script=require_script(PACKAGE), timeout_s=20)
    yield store
    anyio.run(store.close)


async def test_a_memory_is_an_observation_of_its_entity_and_reads_back(
    backend: KgMemoryBackend, graph_file: Path
) -> None:
    when = datetime(2023, 5, 7, 10, 30, tzinfo=UTC)
    outcome = await backend.write(
        NewMemory(
            content="went to the axolotl support group",
            type=MemoryType.EPISODIC,
            entities=["Carolyn", "Axolotl Club"],
            created_at=when,
        )
    )
    assert outcome.action is WriteAction.ADDED
    (memory,) = await backend.get_memories([outcome.id])
    assert (memory.content, memory.entities, memory.created_at, memory.type) == (
        "went to the axolotl support group",
        ("Carolyn",),
        when,
        MemoryType.EPISODIC,
    )
    again = await backend.write(
        NewMemory(content="went to the axolotl support group", entities=["Carolyn"])
    )
    assert again.action is WriteAction.ADDED  # no time prefix: a different observation
    same = await backend.write(
        NewMemory(
            content="went to the axolotl support group", entities=["Carolyn"], created_at=when
        )
    )
    assert (same.action, same.existing_id) == (WriteAction.SKIPPED, outcome.id)
    lines = [json.loads(line) for line in graph_file.read_text().splitlines()]
    carolyn = next(x for x in lines if x.get("name") == "Carolyn")
    assert carolyn["observations"][0] == "[2023-05-07 10:30] went to the axolotl support group"
    assert {"type": "relation", "from": "Carolyn", "to": "Axolotl Club"} | {
        "relationType": "mentions"
    } in lines


async def test_a_question_finds_what_the_servers_substring_search_misses(
    backend: KgMemoryBackend,
) -> None:
    assert search_terms("hiking families") == ["hik", "famil"]
    outcome = await backend.write(
        NewMemory(content="Pelagio hiked with his family in July", entities=["Pelagio"])
    )
    await backend.write(NewMemory(content="Pelagio owns a red bicycle", entities=["Pelagio"]))
    raw = await backend.client.call("search_nodes", {"query": "Pelagio family hiking"})
    assert raw["entities"] == []  # one substring of the whole query: nothing
    hits = await backend.search("When did Pelagio go hiking with family?", 5)
    assert hits[0].memory.id == outcome.id
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    scoped = await backend.search("hiking", 5, SearchFilters(entity_ids=["nobody"]))
    assert scoped == []


async def test_native_search_is_the_bare_servers_substring_match(backend: KgMemoryBackend) -> None:
    await backend.write(NewMemory(content="Ximena sings in a choir", entities=["Ximena"]))
    await backend.write(NewMemory(content="Ximena likes jazz", entities=["Ximena"]))
    backend.native_search = True
    try:
        assert await backend.search("Does Ximena sing?", 5) == []
        hits = await backend.search("jazz", 5)
        assert [h.memory.content for h in hits] == [
            "Ximena likes jazz",
            "Ximena sings in a choir",
        ]
    finally:
        backend.native_search = False


async def test_time_windows_are_applied_by_the_adapter(backend: KgMemoryBackend) -> None:
    for year in (2021, 2023):
        await backend.write(
            NewMemory(
                content=f"Quokkaville fair in {year}",
                entities=["Quokkaville"],
                created_at=datetime(year, 6, 1, tzinfo=UTC),
            )
        )
    window = SearchFilters(time_range=TimeRange(start=datetime(2022, 1, 1, tzinfo=UTC)))
    hits = await backend.search("quokkaville fair", 5, window)
    assert [h.memory.content for h in hits] == ["Quokkaville fair in 2023"]


@pytest.mark.parametrize("query", ['"', "a AND (b", "*", "   ", "东京", "' OR 1=1 --"])
async def test_awkward_queries_never_raise(backend: KgMemoryBackend, query: str) -> None:
    assert isinstance(await backend.search(query, 5), list)


async def test_neighbours_follow_the_entity_and_its_relations(backend: KgMemoryBackend) -> None:
    a = await backend.write(NewMemory(content="Ravenna adopted a greyhound", entities=["Ravenna"]))
    b = await backend.write(NewMemory(content="Ravenna runs marathons", entities=["Ravenna"]))
    c = await backend.write(NewMemory(content="Tobiah coaches runners", entities=["Tobiah"]))
    edge = await backend.link(a.id, c.id, "friend_of")
    assert edge.type == "friend_of"
    found = await backend.neighbors([a.id], hops=1, limit=10)
    assert {(n.memory.id, n.edge_type) for n in found} == {
        (b.id, "entity"),
        (c.id, "friend_of"),
    }
    assert found[0].memory.id == c.id  # relations weigh more than a shared entity
    only = await backend.neighbors([a.id], edge_types=["entity"])
    assert [n.memory.id for n in only] == [b.id]
    d = await backend.write(NewMemory(content="Umberta swims at dawn", entities=["Umberta"]))
    await backend.link(c.id, d.id, "mentors")
    two = await backend.neighbors([a.id], hops=2, limit=10)
    assert {n.memory.id: n.hops for n in two} == {b.id: 1, c.id: 1, d.id: 2}
    assert "Ravenna" in await backend.known_entities()
    with pytest.raises(BackendError):
        await backend.link(a.id, "kg_nope", "x")


async def test_forget_removes_the_observation(backend: KgMemoryBackend) -> None:
    outcome = await backend.write(NewMemory(content="Zinnia's locker code is 4411"))
    assert await backend.forget(outcome.id) is True
    assert await backend.get_memories([outcome.id]) == []
    assert await backend.search("zinnia locker", 5) == []
    assert await backend.forget(outcome.id) is False


async def test_health_counts_the_graph(backend: KgMemoryBackend) -> None:
    (check,) = await backend.health()
    assert check.status is Status.OK, check.detail
    assert "observations" in check.detail


async def test_concurrent_writes_from_many_tasks_are_all_kept(
    backend: KgMemoryBackend, graph_file: Path
) -> None:
    """The server alone loses most overlapping adds (each rewrites its whole file); the
    adapter serializes them."""
    await backend.health()
    starts = backend.client.starts
    ids: list[str] = []

    async def main() -> None:
        async def add(n: int) -> None:
            memory = NewMemory(content=f"okapine fact {n}", entities=[f"Okapi{n % 3}"])
            ids.append((await backend.write(memory)).id)

        async with anyio.create_task_group() as tg:
            for n in range(20):
                tg.start_soon(add, n)

    await main()
    await main()  # a second event loop, the same process; all duplicates now
    assert len(set(ids)) == 20
    hits = await backend.search("okapine", 100)
    assert {h.memory.id for h in hits} == set(ids)
    assert backend.client.starts == starts
    assert len(child_pids(str(graph_file))) == 1


async def test_a_killed_server_is_restarted_on_the_next_call(
    backend: KgMemoryBackend, graph_file: Path
) -> None:
    outcome = await backend.write(NewMemory(content="The tapirine archive is durable"))
    starts = backend.client.starts
    assert kill_children(str(graph_file))
    hits = await backend.search("tapirine archive", 5)
    assert [h.memory.id for h in hits] == [outcome.id]
    assert backend.client.starts == starts + 1


async def test_the_registry_builds_it_from_settings(tmp_path: Path) -> None:
    require_script(PACKAGE)
    settings = load_settings(data_dir=tmp_path, backend="kg-memory")
    store: MemoryBackend = registry.create("kg-memory", settings)
    try:
        await store.write(NewMemory(content="a lemurish memory"))
        hits = await store.search("lemurish", 3)
        assert [h.memory.content for h in hits] == ["a lemurish memory"]
    finally:
        await store.close()
    native = registry.create(
        "kg-memory", load_settings(data_dir=tmp_path, kg_memory={"native_search": True})
    )
    assert isinstance(native, KgMemoryBackend)
    assert native.native_search
    assert (tmp_path / "kg-memory.jsonl").is_file()


async def test_a_missing_install_is_an_error_naming_the_make_target(tmp_path: Path) -> None:
    store = KgMemoryBackend(tmp_path / "g.jsonl", script=tmp_path / "missing" / "index.js")
    with pytest.raises(BackendError, match="make npm-servers"):
        await store.search("anything", 3)
    (check,) = await store.health()
    assert check.status is Status.ERROR
    await store.close()


async def test_listing_pages_through_every_observation_and_resumes_with_what_came_later(
    tmp_path: Path,
) -> None:
    store = KgMemoryBackend(tmp_path / "g.jsonl", script=require_script(PACKAGE), timeout_s=20)

    async def collect(cursor: str | None) -> tuple[list[str], str | None]:
        ids: list[str] = []
        while True:
            page, cursor = await store.list_memories(cursor, 2)
            assert len(page) <= 2
            ids += [m.id for m in page]
            if len(page) < 2:
                return ids, cursor

    try:
        assert await store.list_memories(None, 5) == ([], None)
        first = [
            await store.write(NewMemory(content=text, entities=entities))
            for text, entities in [
                ("Okapi keeps the ledger", ["Okapi"]),
                ("Okapi visits Lisbon", ["Okapi", "Lisbon"]),
                ("a note without an entity", []),
                ("Okapi sails in June", ["Okapi"]),
            ]
        ]
        listed, cursor = await collect(None)
        assert sorted(listed) == sorted(o.id for o in first)
        assert len(set(listed)) == len(listed)
        assert await store.list_memories(cursor, 5) == ([], cursor)
        # later: an observation of an old entity, and a new entity
        later = [
            await store.write(NewMemory(content="Okapi moved house", entities=["Okapi"])),
            await store.write(NewMemory(content="Quokka joined", entities=["Quokka"])),
        ]
        again, cursor = await collect(cursor)
        assert sorted(again) == sorted(o.id for o in later)
        # the last one handed out of an entity is forgotten: that entity comes again
        assert await store.forget(later[1].id)
        await store.write(NewMemory(content="Quokka left", entities=["Quokka"]))
        after_forget, _ = await collect(cursor)
        memories = await store.get_memories(after_forget)
        assert [m.content for m in memories] == ["Quokka left"]
        everything, _ = await collect("not a cursor")
        assert len(everything) == 6
    finally:
        await store.close()
