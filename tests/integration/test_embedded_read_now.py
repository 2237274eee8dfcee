"""Short reads of the embedded store on the caller's thread (`Connections.read_now`), against
real files: the same answers as through a worker thread, and through one when the read runs
past its budget. (The other reasons to go through a worker thread, a file to check or open
anew, a lock, are the store-fault tests' ground: `test_store_faults`, `test_store_files`.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_orchestrator.backends import embedded
from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.backends.embedded_sql import to_memory
from tests.integration.test_embedded_backend import add, mem, run_with

pytestmark = pytest.mark.integration


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memories.db"


async def test_a_short_read_runs_on_the_callers_thread_with_the_answer_a_worker_gives(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedded, "READ_NOW_BUDGET_S", 60.0)  # (however slow the machine)

    async def body(b: EmbeddedBackend) -> None:
        a, bb, c = await add(b, mem("a", 0), mem("b", 1), mem("c", 2))
        await b.search("a", 1)  # (a reader connection now waits idle in the pool)
        before = b._conns.reads_now
        near = await b.neighbors([bb], ["temporal"], hops=1)
        got = await b.get_memories([c, a, "missing"])
        assert b._conns.reads_now == before + 2  # neither went through a worker thread
        assert {(n.memory.id, n.seed_id) for n in near} == {(a, bb), (c, bb)}
        assert [m.id for m in got] == [c, a]
        worker = await b._call(lambda conn: b._rows(conn, [c, a]))  # the worker's answer
        assert {m.id: m for m in got} == {i: to_memory(r) for i, r in worker.items()}

    await run_with(db, body)


async def test_a_read_past_its_budget_goes_through_a_worker_thread_with_the_same_answer(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedded, "READ_NOW_BUDGET_S", 60.0)  # (however slow the machine)

    async def body(b: EmbeddedBackend) -> None:
        ids = await add(b, *(mem(f"memory number {n}", n) for n in range(300)))
        await b.get_memories(ids[:1])  # (a reader connection now waits idle in the pool)
        assert b._conns.reads_now == 0
        await b.get_memories(ids[:1])
        assert b._conns.reads_now == 1  # a short read runs on this thread
        monkeypatch.setattr(embedded, "READ_NOW_BUDGET_S", 0.0)  # SQLite gives up at once
        before = b._conns.reads_now
        got = await b.get_memories(ids[::-1])
        assert b._conns.reads_now == before
        assert [m.id for m in got] == ids[::-1]

    await run_with(db, body)
