"""The mnemon-mcp adapter against the real npm server (`mnemon-mcp@1.3.0`, `make npm-servers`).

One server process for the whole module (the backend keeps it open across `anyio.run` calls);
every test writes words of its own so the shared store does not blur the assertions.
Skipped, with the reason, only when node is absent.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from memory_orchestrator.backends import registry
from memory_orchestrator.backends.base import MemoryBackend, enumerable
from memory_orchestrator.backends.mnemon_mcp import PACKAGE, MnemonMcpBackend, query_terms
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import (
    MemoryType,
    NewMemory,
    SearchFilters,
    Status,
    TimeRange,
    WriteAction,
    correcting,
)
from memory_orchestrator.settings import load_settings
from tests.npm_servers import child_pids, kill_children, require_script

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mnemon-mcp") / "store.db"


@pytest.fixture(scope="module")
def backend(db: Path) -> Iterator[MnemonMcpBackend]:
    script = require_script(PACKAGE)
    store = MnemonMcpBackend(db, script=script, timeout_s=20)
    yield store
    anyio.run(store.close)


async def test_a_written_memory_is_found_with_its_layer_entity_and_event_time(
    backend: MnemonMcpBackend,
) -> None:
    when = datetime(2023, 5, 7, 10, 0, tzinfo=UTC)
    outcome = await backend.write(
        NewMemory(
            content="Caroline went to the zebracorn support group with her family",
            type=MemoryType.EPISODIC,
            entities=["Caroline"],
            created_at=when,
            importance=0.7,
            source="chat",
        )
    )
    assert outcome.action is WriteAction.ADDED
    hits = await backend.search("zebracorn support group", 5)
    assert [h.memory.id for h in hits] == [outcome.id]
    memory = hits[0].memory
    assert memory.type is MemoryType.EPISODIC
    assert memory.entities == ("Caroline",)
    assert memory.created_at == when
    assert (memory.importance, memory.store) == (0.7, "mnemon-mcp")
    assert hits[0].rank == 1
    (full,) = await backend.get_memories([outcome.id])  # search rows carry no source
    assert (full.source, full.created_at, full.entities) == ("chat", when, ("Caroline",))


async def test_words_its_stemmer_misses_are_found_through_the_adapter(
    backend: MnemonMcpBackend,
) -> None:
    """'family' stays 'family' in the server's query while its index holds 'famili'."""
    assert query_terms("What did Anthony's family do?") == "anthoni famili"
    outcome = await backend.write(NewMemory(content="Quillon hiked with family in July"))
    raw = await backend.client.call("memory_search", {"query": "family July"})
    assert raw["memories"] == []  # the trap, seen raw
    hits = await backend.search("Who did Quillon go hiking with in July? family?", 5)
    assert outcome.id in [h.memory.id for h in hits]


async def test_native_search_sends_the_query_as_is(backend: MnemonMcpBackend) -> None:
    outcome = await backend.write(NewMemory(content="Yusuf's family visited in July"))
    backend.native_search = True
    try:
        assert await backend.search("family July", 5) == []  # the stemmer trap, bare
    finally:
        backend.native_search = False
    assert outcome.id in [h.memory.id for h in await backend.search("family July", 5)]


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "a AND (b OR", "NEAR(x y)", "*", "-", "col:val", "' OR 1=1 --", "   ", "东京"],
)
async def test_awkward_queries_never_raise(backend: MnemonMcpBackend, query: str) -> None:
    hits = await backend.search(query, 5)
    assert isinstance(hits, list)


async def test_time_window_layer_and_entity_filters_are_sent_to_the_server(
    backend: MnemonMcpBackend,
) -> None:
    old = await backend.write(
        NewMemory(
            content="Melanie painted a gryphonlake sunrise",
            type=MemoryType.EPISODIC,
            entities=["Melanie"],
            created_at=datetime(2022, 3, 1, tzinfo=UTC),
        )
    )
    new = await backend.write(
        NewMemory(
            content="Melanie painted a gryphonlake sunset",
            type=MemoryType.SEMANTIC,
            entities=["Mel"],
            created_at=datetime(2023, 8, 1, tzinfo=UTC),
        )
    )
    window = TimeRange(start=datetime(2023, 1, 1, tzinfo=UTC))
    in_2023 = await backend.search("gryphonlake", 5, SearchFilters(time_range=window))
    assert [h.memory.id for h in in_2023] == [new.id]
    episodic = SearchFilters(memory_types=[MemoryType.EPISODIC])
    assert [h.memory.id for h in await backend.search("gryphonlake", 5, episodic)] == [old.id]
    by_entity = SearchFilters(entity_ids=["Mel"])
    assert [h.memory.id for h in await backend.search("gryphonlake", 5, by_entity)] == [new.id]


async def test_supersede_replaces_a_memory_in_search_results(backend: MnemonMcpBackend) -> None:
    first = await backend.write(NewMemory(content="The wombatoid deploy runs on Tuesdays"))
    fridays = NewMemory(content="The wombatoid deploy runs on Fridays")
    second = await backend.write(correcting(fridays, first.id))
    assert second.action is WriteAction.UPDATED
    assert second.existing_id == first.id
    assert second.id != first.id
    hits = await backend.search("wombatoid deploy", 5)
    assert [h.memory.content for h in hits] == ["The wombatoid deploy runs on Fridays"]


async def test_memories_sharing_an_entity_are_neighbours_nearest_in_time_first(
    backend: MnemonMcpBackend,
) -> None:
    ids = [
        (
            await backend.write(
                NewMemory(
                    content=f"Jolene note {n} about kayaks",
                    entities=["Jolene"],
                    created_at=datetime(2023, 1, 1 + n, tzinfo=UTC),
                )
            )
        ).id
        for n in range(4)
    ]
    found = await backend.neighbors([ids[0]], hops=1, limit=10)
    assert [n.memory.id for n in found] == ids[1:]
    assert {(n.seed_id, n.edge_type, n.hops) for n in found} == {(ids[0], "entity", 1)}
    assert await backend.neighbors([ids[0]], edge_types=["causal"]) == []
    assert await backend.neighbors([ids[0]], limit=2) == found[:2]
    assert "Jolene" in await backend.known_entities()
    got = await backend.get_memories([ids[2], "nope", ids[1]])
    assert [m.id for m in got] == [ids[2], ids[1]]


async def test_forget_hides_a_memory(backend: MnemonMcpBackend) -> None:
    outcome = await backend.write(NewMemory(content="The marmoset password hint is teal"))
    assert await backend.forget(outcome.id) is True
    assert await backend.search("marmoset password", 5) == []
    assert await backend.get_memories([outcome.id]) == []
    assert await backend.forget("no-such-id") is False


async def test_list_memories_pages_through_the_store_and_resumes_after_new_writes(
    backend: MnemonMcpBackend,
) -> None:
    assert enumerable(backend) is backend
    listed, cursor = [], None
    while True:
        page, cursor = await backend.list_memories(cursor, 3)
        listed += page
        if len(page) < 3:
            break
    ids = [m.id for m in listed]
    assert len(ids) == len(set(ids))
    everything = {m.id for m in await backend.get_memories(ids)}
    assert everything == set(ids)  # all live, none repeated
    outcome = await backend.write(NewMemory(content="The ocelot listing marker is amber"))
    later, _ = await backend.list_memories(cursor, 3)
    assert [m.id for m in later] == [outcome.id]


async def test_health_reports_the_store(backend: MnemonMcpBackend) -> None:
    (check,) = await backend.health()
    assert check.status is Status.OK, check.detail
    assert "active memories" in check.detail


async def test_calls_from_many_tasks_and_event_loops_share_one_process_and_lose_nothing(
    backend: MnemonMcpBackend, db: Path
) -> None:
    await backend.health()
    starts = backend.client.starts
    ids: list[str] = []

    async def main() -> None:
        async def add(n: int) -> None:
            ids.append((await backend.write(NewMemory(content=f"ocelotine fact {n}"))).id)

        async with anyio.create_task_group() as tg:
            for n in range(20):
                tg.start_soon(add, n)

    await main()
    await main()  # a second event loop: the same session serves it
    assert len(set(ids)) == 40
    hits = await backend.search("ocelotine fact", 100)
    assert {h.memory.id for h in hits} == set(ids)
    assert backend.client.starts == starts
    assert len(child_pids(str(db))) == 1


async def test_a_killed_server_is_restarted_on_the_next_call(
    backend: MnemonMcpBackend, db: Path
) -> None:
    outcome = await backend.write(NewMemory(content="The capybarine vault survives crashes"))
    starts = backend.client.starts
    (pid,) = kill_children(str(db))
    hits = await backend.search("capybarine vault", 5)  # a read is retried on a new process
    assert [h.memory.id for h in hits] == [outcome.id]
    assert backend.client.starts == starts + 1
    assert child_pids(str(db)) != [pid]
    kill_children(str(db))
    with pytest.raises(BackendError):  # a write is not retried blindly...
        await backend.write(NewMemory(content="written after a crash"))
    again = await backend.write(NewMemory(content="written after a restart"))  # ...restarts
    assert again.action is WriteAction.ADDED


async def test_a_hung_server_times_out_and_is_replaced(tmp_path: Path) -> None:
    db = tmp_path / "hung.db"
    store = MnemonMcpBackend(db, script=require_script(PACKAGE), timeout_s=1.0)
    try:
        outcome = await store.write(NewMemory(content="The dugongish log is kept"))
        (pid,) = child_pids(str(db))
        os.kill(pid, signal.SIGSTOP)  # alive, answering nothing
        try:
            with pytest.raises(BackendError, match="timed out") as caught:
                await store.search("dugongish", 3)
            assert caught.value.transient
        finally:
            if _alive(pid):
                os.kill(pid, signal.SIGCONT)
        hits = await store.search("dugongish", 3)
        assert [h.memory.id for h in hits] == [outcome.id]
        assert store.client.starts == 2
        assert pid not in child_pids(str(db))
    finally:
        await store.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_the_registry_builds_it_from_settings(tmp_path: Path) -> None:
    require_script(PACKAGE)
    settings = load_settings(data_dir=tmp_path, backend="mnemon-mcp")
    store: MemoryBackend = registry.create("mnemon-mcp", settings)
    try:
        await store.write(NewMemory(content="a lemurish memory"))
        assert [h.memory.content for h in await store.search("lemurish", 3)] == [
            "a lemurish memory"
        ]
    finally:
        await store.close()
    native = registry.create(
        "mnemon-mcp", load_settings(data_dir=tmp_path, mnemon_mcp={"native_search": True})
    )
    assert isinstance(native, MnemonMcpBackend)
    assert native.native_search
    assert (tmp_path / "mnemon-mcp.db").is_file()


async def test_a_missing_install_is_an_error_naming_the_make_target(tmp_path: Path) -> None:
    store = MnemonMcpBackend(tmp_path / "x.db", script=tmp_path / "missing" / "index.js")
    with pytest.raises(BackendError, match="make npm-servers"):
        await store.search("anything", 3)
    (check,) = await store.health()
    assert check.status is Status.ERROR
    await store.close()
