"""Fault injection over every tool: a store that hangs, errors, errors transiently, answers
junk or dies mid-call (`tests.faults.FaultyBackend` around the real embedded store).

Every tool answers, within its bound (a few rounds of `retrieval.timeout_s`, set short here),
with partial results and a trace note where it can, a read that reached no store with an
error that says so (never an empty answer), and health turns degraded or error with the
reason. Timing asserts are generous upper bounds, never speed claims.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.errors import BackendError, StoreUnreadable
from memory_orchestrator.models import (
    ContextRequest,
    EventKind,
    ExpandRequest,
    ExplainRequest,
    NewMemory,
    SearchRequest,
    Status,
    Trace,
    WriteAction,
    WriteRequest,
)
from memory_orchestrator.service import Orchestrator, queued_writes, writing
from memory_orchestrator.service.resilience import GuardedBackend, RetryPolicy
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.outbox import Outbox
from memory_orchestrator.state.traces import TraceStore
from tests.events import about, kinds, said
from tests.factories import NOW
from tests.faults import JUNK_ID, FailingTraceStore, FaultyBackend, Mode
from tests.stores import demo_store

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("quick_retries")]
T = TypeVar("T")

TIMEOUT_S = 0.3
# A tool makes at most four rounds of store calls one after another (entities, retrieval,
# context neighbours, expansion; or health, probe, outbox), each bounded by the timeout.
BOUND_S = 4 * TIMEOUT_S + 2.0  # + generous slack for a loaded machine
ALL_OPS = ("search", "neighbors", "get_memories", "known_entities", "write", "link", "health")
MODES: tuple[Mode, ...] = ("hang", "error", "transient", "junk", "die")
TOOLS = ("search", "context", "expand", "write", "explain", "health")
READS = ("search", "context", "explain", "expand")


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(fn)


def fast(settings: Settings) -> Settings:
    short = settings.model_copy(deep=True)
    short.retrieval.timeout_s = TIMEOUT_S
    return short


@pytest.fixture(autouse=True)
def _short_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    """One replay of the outbox within a few rounds of the short timeout."""
    monkeypatch.setattr(writing, "REPLAY_S", TIMEOUT_S * 3)


@pytest.fixture
def loaded(settings: Settings) -> Path:
    """The embedded store holding the built-in sample."""
    return demo_store(settings)


@pytest.fixture
def make(settings: Settings, loaded: Path) -> Iterator[Callable[..., Orchestrator]]:
    """An orchestrator over the loaded store with `faults` injected (and a file outbox)."""
    made: list[Orchestrator] = []

    def build(faults: dict[str, Mode], **options: Any) -> Orchestrator:
        faulty = FaultyBackend(EmbeddedBackend(loaded), faults, **options)
        o = Orchestrator(
            faulty,
            fast(settings),
            traces=TraceStore(settings.trace_path()),
            outbox=Outbox(settings.outbox_path()),
            clock=lambda: NOW,
        )
        made.append(o)
        STORE_OF[id(o)] = faulty
        return o

    yield build
    for o in made:
        run(o.close)
    STORE_OF.clear()


# The fault-injecting store under each orchestrator `make` built (the orchestrator keeps its
# store private; the tests count the calls that reached it).
STORE_OF: dict[int, FaultyBackend] = {}


def faulty_of(o: Orchestrator) -> FaultyBackend:
    return STORE_OF[id(o)]


async def call_tool(o: Orchestrator, tool: str) -> Any:
    """One call of `tool` as the MCP face makes it; returns the answer (a read that reached
    no store: the error, which the face turns into a tool error)."""
    try:
        return await _call_tool(o, tool)
    except StoreUnreadable as exc:
        return exc


async def _call_tool(o: Orchestrator, tool: str) -> Any:
    if tool == "search":
        return await o.search(SearchRequest(query="Vendor X firmware", expand=True))
    if tool == "context":
        return await o.context(ContextRequest(query="recent issues with Vendor X"))
    if tool == "expand":
        return await o.expand(ExpandRequest(seed_ids=["mem_x"], entities=["Vendor X"], hops=2))
    if tool == "write":
        memory = NewMemory(
            content="Vendor X shipped firmware 2.3 to Acme Corp.", entities=["Vendor X"]
        )
        return await o.write(WriteRequest(memory=memory))
    if tool == "explain":
        return await o.explain(ExplainRequest(query="why did the milestone slip?"))
    return await o.health()


def trace_of(o: Orchestrator, answer: Any, tool: str) -> Trace:
    """The whole trace of `answer` (an answer carries its summary; explain, the trace)."""
    if tool == "explain":
        whole: Trace = answer.trace
        return whole
    trace = o.trace(answer.trace_id)
    assert trace is not None
    return trace


def ids_of(answer: Any, tool: str) -> list[str]:
    if tool == "explain":
        return list(answer.trace.result_ids)
    return [i.memory_id for i in answer.items]


FAILED = {
    EventKind.SEARCH_TIMED_OUT,
    EventKind.SEARCH_FAILED,
    EventKind.UNAVAILABLE,
    EventKind.GAVE_UP,
    EventKind.EXPANSION_TIMED_OUT,
    EventKind.EXPANSION_FAILED,
    EventKind.LINK_FAILED,
    EventKind.RELATED_SEARCH_FAILED,
    EventKind.SUPERSEDE_FAILED,
    EventKind.LOCAL_SYNC_FAILED,
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool", TOOLS)
async def test_every_tool_answers_in_time_under_every_fault(
    make: Callable[..., Orchestrator], tool: str, mode: Mode
) -> None:
    o = make(dict.fromkeys(ALL_OPS, mode))
    bound = BOUND_S + (writing.REPLAY_S if tool in {"write", "health"} else 0)
    started = time.perf_counter()
    answer = await call_tool(o, tool)
    assert time.perf_counter() - started < bound
    if tool == "health":
        assert answer.status in {Status.DEGRADED, Status.ERROR}
        bad = [c for c in answer.checks if c.status is not Status.OK]
        assert bad
        assert all(c.detail for c in bad)
        return
    if tool == "write":
        if mode == "junk":  # the store wrote, then answered junk: found by its content hash
            assert answer.action is WriteAction.ADDED
            assert answer.id
            assert answer.id != JUNK_ID
        else:  # the store cannot take it now: kept in the outbox, the caller told so
            assert answer.action is WriteAction.QUEUED
            assert answer.outbox_seq is not None
            assert "queued" in answer.reason
        return
    if tool in READS and mode != "junk":
        # no search reached the store and nothing came back: an error that says so (kept as a
        # trace), never an answer that looks like an empty memory
        assert isinstance(answer, StoreUnreadable), answer
        said = "reading the seeds failed" if tool == "expand" else "no search reached the store"
        assert said in str(answer)
        assert answer.transient == (mode != "error"), str(answer)
        seen = kinds(o.trace(answer.trace_id))  # type: ignore[arg-type]
        assert FAILED & set(seen), seen
        if mode == "transient":
            assert EventKind.RETRY in seen, seen
        return
    seen = kinds(trace_of(o, answer, tool))
    ids = ids_of(answer, tool)
    if mode == "junk":
        assert len(ids) == len(set(ids))
        assert JUNK_ID not in ids or tool != "expand"
        assert EventKind.MALFORMED in seen, seen
        if tool != "explain":
            assert all(math.isfinite(i.score) for i in answer.items)
    else:
        assert FAILED & set(seen), seen
    if mode == "transient":
        assert EventKind.RETRY in seen, seen


# ---------------------------------------------------------------- retries and idempotency


def count(path: Path, content: str) -> int:
    """Live memories holding exactly `content`, read from the store file itself."""
    import sqlite3

    with sqlite3.connect(path) as db:
        row = db.execute(
            "SELECT count(*) FROM memories WHERE content = ? AND deleted_at IS NULL", (content,)
        ).fetchone()
    return int(row[0])


async def write(o: Orchestrator, content: str, **options: Any) -> Any:
    return await o.write(WriteRequest(memory=NewMemory(content=content), **options))


async def test_a_transient_error_is_retried_and_the_write_lands_once(
    make: Callable[..., Orchestrator], loaded: Path
) -> None:
    o = make({"write": "transient", "search": "transient"}, times=1)
    report = await write(o, "The zeppelin hangar lease was renewed for two years.")
    assert report.action is WriteAction.ADDED
    assert count(loaded, "The zeppelin hangar lease was renewed for two years.") == 1
    trace = o.trace(report.trace_id)
    assert trace is not None
    assert said(trace, EventKind.RETRY)[0]["attempt"] == 1


async def test_a_write_that_died_after_storing_is_not_written_twice(
    make: Callable[..., Orchestrator], loaded: Path
) -> None:
    """The store wrote, then the answer was lost: the retry finds the memory by its content
    hash and does not write again (a blind retry would call the store's write twice)."""
    o = make({"write": "die"}, times=1)
    content = "The hangar crane was inspected on Monday by Vendor Q."
    report = await write(o, content, on_duplicate="update")
    assert report.action is WriteAction.ADDED
    assert report.id is not None
    assert count(loaded, content) == 1
    faulty = faulty_of(o)
    assert faulty.calls["write"] == 1  # never sent again
    trace = o.trace(report.trace_id)
    assert trace is not None
    assert about(trace, EventKind.ALREADY_WRITTEN) == [(report.id,)]


async def test_a_permanent_error_is_not_retried(make: Callable[..., Orchestrator]) -> None:
    o = make({"search": "error"})
    with pytest.raises(StoreUnreadable) as raised:  # and nothing found elsewhere
        await o.search(SearchRequest(query="zeppelin"))
    faulty = faulty_of(o)
    assert faulty.calls["search"] == faulty.injected["search"]  # one try per subquery
    assert EventKind.RETRY not in kinds(o.trace(raised.value.trace_id))  # type: ignore[arg-type]


async def test_a_write_the_store_refuses_is_an_error_not_queued(
    make: Callable[..., Orchestrator],
) -> None:
    """A permanent error while the store is healthy: this write itself was refused."""
    o = make({"write": "error"})
    with pytest.raises(BackendError, match="injected write failure"):
        await write(o, "A fact the store refuses.")
    assert queued_writes(o.settings).depth == 0


# ---------------------------------------------------------------- the outbox


async def test_writes_queue_while_the_store_is_down_and_replay_in_order_exactly_once(
    make: Callable[..., Orchestrator], loaded: Path
) -> None:
    down = make({"write": "transient", "search": "transient"})
    contents = [
        "The red valve on pump three was replaced by Ines.",
        "Quarterly budget review moved to the Lisbon office.",
        "Our cat Miso learned to open the pantry door.",
    ]
    reports = [await write(down, c) for c in contents]
    assert [r.action for r in reports] == [WriteAction.QUEUED] * 3
    assert [r.outbox_seq for r in reports] == sorted(r.outbox_seq for r in reports)
    assert all(count(loaded, c) == 0 for c in contents)
    health = await down.health()
    outbox = {c.name: c for c in health.checks}["outbox"]
    assert outbox.status is Status.DEGRADED
    assert "3 write(s) queued" in outbox.detail
    assert "injected" in outbox.detail  # why it waits
    await down.close()

    back = make({})  # the store is back: the next write replays the queue first, in order
    last = await write(back, "Marta ordered fresh croissants for the Friday retro.")
    assert last.action is WriteAction.ADDED
    assert all(count(loaded, c) == 1 for c in contents)
    ids = [h.memory.id for c in contents for h in await back.store_search(c, 1)]
    rows = queued_writes(back.settings, delivered=True).delivered
    assert [r.memory_id for r in rows] == ids
    assert [r.seq for r in rows] == [r.outbox_seq for r in reports]
    assert queued_writes(back.settings).depth == 0
    again = await back.flush_outbox()  # nothing is sent twice
    assert again.depth == 0
    assert again.delivered == ()
    assert all(count(loaded, c) == 1 for c in contents)
    health = await back.health()
    assert {c.name: c for c in health.checks}["outbox"].status is Status.OK


async def test_a_new_write_waits_behind_queued_ones(make: Callable[..., Orchestrator]) -> None:
    o = make({"write": "transient"})  # the first write fails all 3 tries: queued
    first = await write(o, "The first queued memory about the kiln.")
    assert first.action is WriteAction.QUEUED
    # The replay before the next write cannot finish, however fast the machine: its lookup
    # of the queued write's content hash never answers (a fault hook, not a tiny time limit).
    faulty_of(o).faults = {"search": "hang"}
    behind = await write(o, "The second memory about the kiln, written later.")
    assert behind.action is WriteAction.QUEUED
    assert "earlier write(s) still queued" in behind.reason
    faulty_of(o).faults = {}  # the store works again
    report = await o.flush_outbox()
    assert [d.seq for d in report.delivered] == [first.outbox_seq, behind.outbox_seq]


async def test_junk_answers_to_forget_and_batch_writes_are_checked(
    make: Callable[..., Orchestrator],
) -> None:
    o = make({"forget": "junk", "write_many": "junk"})
    first = await write(o, "The sauna on deck two closes at ten.")
    assert first.id is not None
    guarded = GuardedBackend(faulty_of(o), RetryPolicy())  # the wrapper the service uses
    assert await guarded.forget(first.id or "") is True  # junk "no", but it is gone
    assert await o.memories([first.id or ""]) == []
    with pytest.raises(BackendError, match="batch write"):
        await o.ingest([NewMemory(content="A batch the store garbles.")])


async def test_a_trace_store_that_fails_loses_no_answer_and_health_says_so(
    settings: Settings, loaded: Path
) -> None:
    o = Orchestrator(
        EmbeddedBackend(loaded),
        fast(settings),
        traces=FailingTraceStore(settings.trace_path()),
        clock=lambda: NOW,
    )
    try:
        answer = await o.context(ContextRequest(query="recent issues with Vendor X"))
        assert answer.items
        report = await o.health()
        traces = [c for c in report.checks if c.name == "traces"]
        assert [c.status for c in traces] == [Status.DEGRADED]
        assert "1 trace(s) not stored" in traces[0].detail
        assert "disk I/O error" in traces[0].detail
        assert report.status is Status.DEGRADED
    finally:
        await o.close()
