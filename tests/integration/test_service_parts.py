"""Each part behind the Orchestrator facade, on its own, over a real embedded store.

The facade's own tests (`test_service.py`) drive all parts together; these pin what each part
promises to the others: the bounded store call, the trace recorder, the known-entity cache,
the derived indexes, the context-neighbour stage and the write path's one policy builder.
"""

from __future__ import annotations

import io
import json
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import anyio
import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.derived.entities import KnownEntities
from memory_orchestrator.derived.indexes import DerivedIndexes
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import (
    LOCAL_SOURCE,
    Candidate,
    Dropped,
    DropReason,
    EventKind,
    NewMemory,
    Stage,
    ToolName,
    Trace,
    WriteAction,
    WriteRequest,
    event,
    render,
)
from memory_orchestrator.pipeline.neighbours import NeighbourLimits, add_context_neighbours
from memory_orchestrator.pipeline.relevance import RankContext
from memory_orchestrator.pipeline.table import CandidateTable
from memory_orchestrator.service.recorder import TraceRecorder
from memory_orchestrator.service.resilience import GuardedBackend, RetryPolicy
from memory_orchestrator.service.store_calls import StoreCalls
from memory_orchestrator.service.writing import WritePath
from memory_orchestrator.settings import RankingProfile, Settings
from memory_orchestrator.state.observability import Observer
from memory_orchestrator.state.outbox import Outbox
from memory_orchestrator.state.traces import TraceStore
from tests.events import said
from tests.factories import NOW, plan
from tests.faults import FaultyBackend
from tests.property.support import RecordingBackend

pytestmark = pytest.mark.integration
T = TypeVar("T")


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(fn)


@pytest.fixture
def store(settings: Settings) -> Iterator[EmbeddedBackend]:
    backend = EmbeddedBackend(settings.embedded_path())
    day = timedelta(days=1)
    run(
        lambda: backend.write_many(
            [
                NewMemory(content="Dana booked the Lisbon offsite venue", entities=["Dana"]),
                NewMemory(
                    content="The offsite agenda has three workshops", created_at=NOW - 2 * day
                ),
                NewMemory(content="Priya will run the firmware workshop", created_at=NOW - day),
                NewMemory(content="Lunch is at the harbour on day two", created_at=NOW),
            ]
        )
    )
    yield backend
    run(backend.close)


def blank_trace(tool: str = "search") -> Trace:
    return Trace(trace_id="t", tool=tool, created_at=NOW, backend="x", request={})


def recorder(settings: Settings, store: EmbeddedBackend, stream: io.StringIO) -> TraceRecorder:
    return TraceRecorder(TraceStore(None), settings, store, Observer(stream))


# ---------------------------------------------------------------- StoreCalls


async def test_a_bounded_call_that_fails_notes_why_and_gives_the_fallback(
    settings: Settings,
) -> None:
    calls = StoreCalls(settings)
    trace = blank_trace()

    async def broken() -> list[str]:
        raise BackendError("disk on fire")

    got: list[str] = await calls.bounded(trace, "known entities", broken, [], then="; partial")
    assert got == []
    assert said(trace, EventKind.UNAVAILABLE) == [
        {"what": "known entities", "error": "BackendError: disk on fire", "then": "; partial"}
    ]
    assert trace.backend_calls == 1


async def test_a_bounded_call_is_cut_off_at_the_configured_time(settings: Settings) -> None:
    settings.retrieval.timeout_s = 0.05
    calls = StoreCalls(settings)
    trace = blank_trace()

    async def hangs() -> int:
        await anyio.sleep(3600)
        return 1

    assert await calls.bounded(trace, "seed memories", hangs, None) is None
    assert said(trace, EventKind.UNAVAILABLE) == [
        {"what": "seed memories", "error": "TimeoutError", "then": ""}
    ]


# ---------------------------------------------------------------- TraceRecorder


def test_the_recorder_finishes_a_trace_once_logs_it_and_keeps_it(
    settings: Settings, store: EmbeddedBackend
) -> None:
    stream = io.StringIO()
    rec = recorder(settings, store, stream)
    trace = rec.begin(ToolName.SEARCH, {"query": "offsite"})
    rec.finish(trace)
    assert rec.get(trace.trace_id) == trace
    line = json.loads(stream.getvalue())
    assert (line["trace_id"], line["tool"], line["backend"]) == (
        trace.trace_id,
        "search",
        "embedded",
    )


def test_an_answer_carries_at_most_25_drops_and_says_where_the_rest_are() -> None:
    trace = blank_trace("context")
    trace.dropped = [
        Dropped(id=f"m{i}", reason=DropReason.OVER_BUDGET, stage=Stage.PACKAGER) for i in range(30)
    ]
    summary = TraceRecorder.summary(trace)
    assert len(summary.dropped) == 25
    more = event(Stage.PACKAGER, EventKind.MORE_DROPPED, count=5)
    assert summary.notes[-1] == render(more)


def test_a_failed_request_is_kept_with_its_error(
    settings: Settings, store: EmbeddedBackend
) -> None:
    rec = recorder(settings, store, io.StringIO())
    failed = rec.failure(ToolName.WRITE, {"content": ""}, "invalid arguments", 2.5)
    kept = rec.get(failed.trace_id)
    assert kept is not None
    assert (kept.error, kept.timings_ms["total"]) == ("invalid arguments", 2.5)


# ---------------------------------------------------------------- KnownEntities


async def test_known_entities_are_cached_for_their_ttl(
    settings: Settings, store: EmbeddedBackend
) -> None:
    now = [0.0]
    spy = RecordingBackend(store)
    asked: list[int] = []

    async def known(limit: int = 500) -> list[str]:
        asked.append(limit)
        return await store.known_entities(limit)

    spy.known_entities = known  # type: ignore[method-assign]
    entities = KnownEntities(spy, StoreCalls(settings), lambda: 60.0, clock=lambda: now[0])
    trace = blank_trace()
    assert await entities.names(trace) == ["Dana"]
    now[0] = 59.0
    assert await entities.names(trace) == ["Dana"]
    assert (len(asked), trace.cache_hits) == (1, 1)
    now[0] = 61.0
    await entities.names(trace)
    assert len(asked) == 2


async def test_a_request_while_the_names_are_being_asked_for_waits_for_that_answer(
    settings: Settings, store: EmbeddedBackend
) -> None:
    """The servers' warm-up asks the store for its entity names first: a request that comes
    meanwhile takes that answer instead of asking again (on a store still being listed, a
    second call waited behind the listing in the first request after start)."""
    spy = RecordingBackend(store)
    asked: list[int] = []
    entered, gate = anyio.Event(), anyio.Event()

    async def known(limit: int = 500) -> list[str]:
        asked.append(limit)
        entered.set()
        await gate.wait()  # fault injection: the store's answer held back
        return await store.known_entities(limit)

    spy.known_entities = known  # type: ignore[method-assign]
    entities = KnownEntities(spy, StoreCalls(settings), lambda: 60.0)
    first, second = blank_trace(), blank_trace()
    got: list[list[str]] = []

    async with anyio.create_task_group() as group:
        group.start_soon(entities.names, first)
        await entered.wait()  # the first call is at the store
        group.start_soon(lambda: _append(got, entities.names(second)))
        await anyio.wait_all_tasks_blocked()  # the second one waits too
        gate.set()
    assert got == [["Dana"]]
    assert asked == [500]
    assert second.cache_hits == 1


async def _append(into: list[list[str]], names: Awaitable[list[str]]) -> None:
    into.append(await names)


# ---------------------------------------------------------------- DerivedIndexes


async def test_the_derived_indexes_pull_the_store_and_read_hits_back_from_it(
    settings: Settings, store: EmbeddedBackend
) -> None:
    settings.local_index.enabled = True
    calls = StoreCalls(settings)
    guarded = GuardedBackend(store, RetryPolicy())
    indexes = DerivedIndexes(store, guarded, calls, settings)
    trace = blank_trace()

    async def main() -> list[str]:
        got = await indexes.refresh(trace)
        lists = await indexes.candidate_lists(got, "workshop", None, trace)
        assert [sub.text for sub, _ in lists] == [LOCAL_SOURCE]
        first = [h.memory.content for h in lists[0][1]]
        hit = lists[0][1][0].memory
        assert await store.forget(hit.id)  # gone from the store: never served from the cache
        again = await indexes.candidate_lists(got, "workshop", None, trace)
        assert hit.id not in {h.memory.id for h in again[0][1]}
        return first

    found = await main()
    assert any("workshop" in text for text in found)
    assert said(trace, EventKind.LOCAL_INDEX_ADDED) == [{"count": 4}]
    assert indexes.health_check() is None  # semantic off: nothing to report


# ---------------------------------------------------------------- the context-neighbour stage


async def test_context_neighbours_join_with_their_seed_and_lend_it_their_words(
    store: EmbeddedBackend,
) -> None:
    hits = await store.search("firmware workshop", 1)
    seed = Candidate(memory=hits[0].memory, fused_score=1.0)
    ctx = RankContext(plan=plan("firmware workshop"), now=NOW, settings=RankingProfile())
    got = await add_context_neighbours(
        store, CandidateTable.of([seed]), ctx, NeighbourLimits(4, 0.5, 5.0)
    )
    added = [c for c in got.table.candidates if c.memory.id != seed.memory.id]
    assert added
    assert all(c.expanded_from == seed.memory.id for c in added)
    assert {m.id for m in got.table.around[seed.memory.id]} == {c.memory.id for c in added}
    assert all(got.table.context_of[c.memory.id] == seed.memory.id for c in added)
    assert [d.neighbor_id for d in got.decisions] == [c.memory.id for c in added]
    assert got.calls == 1


async def test_without_a_neighbour_share_context_neighbours_only_lend_their_words(
    store: EmbeddedBackend,
) -> None:
    hits = await store.search("firmware workshop", 1)
    seed = Candidate(memory=hits[0].memory, fused_score=1.0)
    ctx = RankContext(plan=plan("firmware workshop"), now=NOW, settings=RankingProfile())
    got = await add_context_neighbours(
        store, CandidateTable.of([seed]), ctx, NeighbourLimits(4, 0.0, 5.0)
    )
    assert got.table.candidates == (seed,)
    assert got.table.around[seed.memory.id]
    assert got.decisions == []


# ---------------------------------------------------------------- WritePath


async def test_a_replayed_write_sends_the_store_no_query_over_the_limit(
    settings: Settings, tmp_path: Path
) -> None:
    """The replay builds its policy with the same builder as the first try: its duplicate
    lookup and its content-hash check are cut to `limits.max_query_chars` (the replay's own
    copy of the policy left that limit out)."""
    settings.limits.max_query_chars = 60
    content = " ".join(f"word{i}" for i in range(80))  # ~600 characters
    outbox = Outbox(tmp_path / "outbox.db")
    real = EmbeddedBackend(settings.embedded_path())
    down = FaultyBackend(real, {"write": "transient"})
    rec = recorder(settings, real, io.StringIO())
    entities = KnownEntities(real, StoreCalls(settings), lambda: 60.0)
    path = WritePath(
        GuardedBackend(down, RetryPolicy(2, 0.001, 0.001)), outbox, rec, settings, entities
    )
    queued = await path.write(WriteRequest(memory=NewMemory(content=content)))
    assert queued.action is WriteAction.QUEUED

    spy = RecordingBackend(real)
    back = WritePath(spy, outbox, rec, settings, entities)
    report = await back.flush()
    assert [d.action for d in report.delivered] == [WriteAction.ADDED]
    assert spy.queries
    assert max(len(q) for q in spy.queries) <= 60
    assert path.policy(WriteRequest(memory=NewMemory(content="x"))).max_query_chars == 60
    outbox.close()
