"""The service parts behind the inspector, over real stores: the memory catalog (pages with
filters over the store's listing, read back from the store), the trace index (one line per
kept trace, read page by page with `TraceStore.older`), one memory's view and forget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import Memory, MemoryType, NewMemory, Trace, WriteRequest
from memory_orchestrator.postgres.database import Database
from memory_orchestrator.postgres.state import PgTraceStore
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.service import catalog as catalog_module
from memory_orchestrator.service.catalog import Catalog, MemoryFilter, Quiet
from memory_orchestrator.service.store_calls import StoreCalls
from memory_orchestrator.service.trace_index import TraceIndex
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.traces import TraceStore

pytestmark = pytest.mark.integration

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _memories(count: int) -> list[NewMemory]:
    kinds = list(MemoryType)
    return [
        NewMemory(
            content=f"Note {i} about the Atlas rollout number {i}.",
            type=kinds[i % 4],
            entities=[f"Person{i % 3}"],
            created_at=T0 + timedelta(hours=i),
        )
        for i in range(count)
    ]


async def test_the_catalog_pages_newest_first_with_filters(settings: Settings) -> None:
    orchestrator = Orchestrator.from_settings(settings)
    try:
        # the embedded store dates a memory written without a time: now
        await orchestrator.ingest([*_memories(25), NewMemory(content="A note of today.")])
        catalog = orchestrator.inspection().catalog
        first = await catalog.page(MemoryFilter(), 0, 10)
        assert first.total == 26
        assert [m.content for m in first.memories[:3]] == [
            "A note of today.",
            "Note 24 about the Atlas rollout number 24.",
            "Note 23 about the Atlas rollout number 23.",
        ]
        last = await catalog.page(MemoryFilter(), 20, 10)
        assert len(last.memories) == 6
        assert last.memories[-1].content == "Note 0 about the Atlas rollout number 0."
        person = await catalog.page(MemoryFilter(entity="PERSON1"), 0, 50)
        assert person.total == 8
        assert all("Person1" in m.entities for m in person.memories)
        typed = MemoryFilter(types=frozenset({MemoryType.EPISODIC}), entity="person0")
        assert (await catalog.page(typed, 0, 50)).total == 3  # 0, 12, 24
        window = MemoryFilter(start=T0 + timedelta(hours=3), end=T0 + timedelta(hours=5))
        dated = await catalog.page(window, 0, 50)
        assert [m.content[:7] for m in dated.memories] == ["Note 5 ", "Note 4 ", "Note 3 "]
        assert catalog.entity_names()[:3] == ["Person0", "Person1", "Person2"]
    finally:
        await orchestrator.close()


class HeldListing:
    """Fault injection, named as such: the real store's listing, where every page after the
    first waits for `go` (a large store, listed slowly)."""

    def __init__(self, inner: EmbeddedBackend) -> None:
        self.inner = inner
        self.go = anyio.Event()
        self.first_taken = anyio.Event()  # the second page was asked for: the first is in

    async def list_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[Memory], str | None]:
        if cursor is not None:
            self.first_taken.set()
            await self.go.wait()
        return await self.inner.list_memories(cursor, limit)


async def test_while_a_server_lists_the_store_a_page_answers_at_once_from_what_is_listed(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(catalog_module, "_FILL_PAGE", 10)  # 25 memories: three listing pages
    orchestrator = Orchestrator.from_settings(settings)
    try:
        await orchestrator.ingest(_memories(25))
    finally:
        await orchestrator.close()
    store = EmbeddedBackend(settings.embedded_path())
    listing = HeldListing(store)
    catalog = Catalog(listing, store, StoreCalls(settings))
    try:
        async with anyio.create_task_group() as tasks:
            catalog.spawn = tasks.start_soon
            catalog.fill()
            with anyio.fail_after(30):
                await listing.first_taken.wait()
                early = await catalog.page(MemoryFilter(), 0, 50)  # does not wait for `go`
            assert early.indexing
            assert (early.listed, early.total, len(early.memories)) == (10, 10, 10)
            assert "Indexing the store: 10 memories listed so far." in early.notes[0]
            listing.go.set()
            with anyio.fail_after(30):
                await catalog.filled()
            done = await catalog.page(MemoryFilter(), 0, 50)
            assert not done.indexing
            assert (done.listed, done.total, done.notes) == (25, 25, ())
            assert done.memories[0].content.startswith("Note 24 ")
            catalog.spawn = None
    finally:
        await store.close()


async def test_work_beside_the_requests_waits_for_a_quiet_moment_and_no_longer_than_its_bound() -> (
    None
):
    quiet = Quiet(most_s=600)
    await quiet.wait()  # no request in flight: at once
    quiet.enter()
    quiet.enter()
    done: list[str] = []

    async def beside() -> None:
        await quiet.wait()
        done.append("step")

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(beside)
        await anyio.wait_all_tasks_blocked()
        quiet.leave()
        await anyio.wait_all_tasks_blocked()
        assert done == []  # one request still in flight
        quiet.leave()
    assert done == ["step"]
    quiet.wait_blocking()  # quiet again: at once, in a thread too
    bounded = Quiet(most_s=0)
    bounded.enter()
    await bounded.wait()  # a steady stream of requests cannot hold it back for ever
    bounded.wait_blocking()


async def test_a_memory_deleted_elsewhere_leaves_the_catalog_when_its_page_is_read(
    settings: Settings,
) -> None:
    orchestrator = Orchestrator.from_settings(settings)
    try:
        await orchestrator.ingest(_memories(5))
        catalog = orchestrator.inspection().catalog
        shown = await catalog.page(MemoryFilter(), 0, 10)
        assert shown.total == 5
        store = EmbeddedBackend(settings.embedded_path())  # the store's own delete
        assert await store.forget(shown.memories[0].id)
        await store.close()
        again = await catalog.page(MemoryFilter(), 0, 10)
        assert len(again.memories) == 4
        assert "1 memories on this page were deleted since they were listed" in again.notes
        assert (await catalog.page(MemoryFilter(), 0, 10)).total == 4
    finally:
        await orchestrator.close()


async def test_a_memory_forgotten_elsewhere_is_hidden_from_the_catalog_until_undone(
    settings: Settings,
) -> None:
    orchestrator = Orchestrator.from_settings(settings)
    other = Orchestrator.from_settings(settings)  # another process on the same data dir
    try:
        await orchestrator.ingest(_memories(5))
        catalog = orchestrator.inspection().catalog
        shown = await catalog.page(MemoryFilter(), 0, 10)
        victim = shown.memories[0].id
        assert (await other.inspection().forget(victim, "elsewhere")).done
        hidden = await catalog.page(MemoryFilter(), 0, 10)
        assert (hidden.total, len(hidden.memories)) == (4, 4)
        assert victim not in [m.id for m in hidden.memories]
        assert not hidden.notes  # hidden, not deleted: it stays listed for an undo
        assert (await other.inspection().forget(victim, "", undo=True)).done
        back = await catalog.page(MemoryFilter(), 0, 10)
        assert back.total == 5
        assert victim in [m.id for m in back.memories]
    finally:
        await other.close()
        await orchestrator.close()


async def test_a_correction_hides_the_memory_it_corrected_unless_asked(settings: Settings) -> None:
    orchestrator = Orchestrator.from_settings(settings)
    try:
        old = NewMemory(content="The Atlas API rate limit is 100 requests per minute.")
        first = (await orchestrator.ingest([old]))[0].id
        catalog = orchestrator.inspection().catalog
        assert (await catalog.page(MemoryFilter(), 0, 10)).total == 1
        new = NewMemory(content="The Atlas API rate limit is 500 requests per minute.")
        report = await orchestrator.write(WriteRequest(memory=new))
        assert report.supersedes == first
        catalog.stale()
        current = await catalog.page(MemoryFilter(), 0, 10)
        assert [m.id for m in current.memories] == [report.id]
        assert current.total == 1  # the correction's `supersedes` marks the old entry
        history = await catalog.page(MemoryFilter(corrected=True), 0, 10)
        assert {m.id for m in history.memories} == {report.id, first}
        view = await orchestrator.inspection().memory(first)
        assert view is not None
        assert view.corrected_by is not None
        assert view.correction is not None
        assert view.correction.startswith("changed on ")
    finally:
        await orchestrator.close()


def _trace(n: int, results: list[str], latency: float, error: str | None = None) -> Trace:
    return Trace(
        trace_id=f"tr_{n:016x}",
        tool="search" if n % 2 else "context",
        created_at=T0 + timedelta(seconds=n),
        backend="embedded",
        request={"query": f"question {n}"},
        result_ids=results,
        timings_ms={"total": latency},
        error=error,
    )


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def trace_store(request: pytest.FixtureRequest, tmp_path: Path) -> TraceStore:
    """Each kind of trace store: in memory, a SQLite file, the replicas' shared table."""
    if request.param == "postgres":
        return PgTraceStore(Database(request.getfixturevalue("pg_dsn")), keep=1000)
    return TraceStore(tmp_path / "traces.db" if request.param == "sqlite" else None, keep=1000)


def test_the_trace_index_reads_every_kept_trace_then_only_the_new_ones(
    trace_store: TraceStore,
) -> None:
    store = trace_store
    for n in range(450):  # more than two pages of `older`
        store.save(_trace(n, [f"mem_{n % 7}"], float(n), "boom" if n % 50 == 0 else None))
    store.flush()
    assert [t.trace_id for t in store.older(None, 2)] == [f"tr_{449:016x}", f"tr_{448:016x}"]
    assert [t.trace_id for t in store.older(f"tr_{2:016x}", 5)] == [
        f"tr_{1:016x}",
        f"tr_{0:016x}",
    ]
    assert store.older("tr_unknown", 5) == []
    index = TraceIndex(store, keep=1000, interval_s=0.0)
    index.refresh()
    lines, total = index.lines(0, 10)
    assert total == 450
    assert lines[0].trace_id == f"tr_{449:016x}"
    assert lines[0].asked == "question 449"
    assert index.lines(0, 10, tool="search")[1] == 225
    assert len(index.returning("mem_3", limit=1000)) == 64
    rows = {row.tool: row for row in index.stats()}
    assert rows["all"].count == 450
    assert rows["all"].errors == 9
    assert rows["all"].p50_ms == pytest.approx(224.5)
    store.save(_trace(450, ["mem_new"], 1.0))
    index.refresh()
    assert index.lines(0, 1)[0][0].trace_id == f"tr_{450:016x}"
    assert [line.trace_id for line in index.returning("mem_new")] == [f"tr_{450:016x}"]
    store.close()
