"""Shared state on a real PostgreSQL (`postgres/state.py`): an outbox row claimed by one replica is
skipped by the others until it is settled, and released when its replica dies; traces saved
by one replica are read by another; tokens added once are seen by every replica and revoked
once for all of them; MCP sessions opened through one replica are used through another,
within each token's cap; a process holds one pool for all of it. With the default settings
everything stays in local SQLite files."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from memory_orchestrator.models import NewMemory, Trace, WriteAction, WriteRequest
from memory_orchestrator.postgres.database import Database
from memory_orchestrator.postgres.sessions import PgSessions
from memory_orchestrator.postgres.state import PgOutbox, PgTraceStore, SharedTokens
from memory_orchestrator.settings import load_settings
from memory_orchestrator.state import shared as shared_state
from memory_orchestrator.state.outbox import Outbox
from memory_orchestrator.state.tokens import TokenSpec, hash_token
from memory_orchestrator.state.traces import TraceStore

pytestmark = pytest.mark.integration


def request(content: str) -> WriteRequest:
    return WriteRequest(memory=NewMemory(content=content))


def test_local_state_is_the_default_and_postgres_is_chosen_by_config(
    tmp_path: Path, pg_dsn: str
) -> None:
    local = load_settings(data_dir=tmp_path)
    assert type(shared_state.outbox(local)) is Outbox
    assert type(shared_state.trace_store(local)) is TraceStore
    shared = load_settings(data_dir=tmp_path, shared={"state": "postgres", "dsn": pg_dsn})
    box, traces = shared_state.outbox(shared), shared_state.trace_store(shared)
    assert isinstance(box, PgOutbox)
    assert isinstance(traces, PgTraceStore)
    box.close()
    traces.close()


def test_a_claimed_outbox_row_is_skipped_by_another_replica_until_settled(pg_dsn: str) -> None:
    one, two = PgOutbox(Database(pg_dsn)), PgOutbox(Database(pg_dsn))
    first = one.put(request("first queued write"), "store down")
    second = one.put(request("second queued write"), "store down")
    assert [q.seq for q in two.pending()] == [first.seq, second.seq]
    with one.claim(first) as mine:
        assert mine is not None
        with two.claim(first) as theirs:
            assert theirs is None  # held by `one`: `two` stops there, order kept
        one.delivered(first.seq, "mem_1", WriteAction.ADDED)
    with two.claim(first) as theirs:
        assert theirs is None  # delivered: never replayed again
    with two.claim(second) as theirs:
        assert theirs is not None
        two.failed(second.seq, "still down")
    assert [(q.seq, q.attempts, q.last_error) for q in one.pending()] == [
        (second.seq, 1, "still down")
    ]
    one.close()
    two.close()


def test_a_replica_that_dies_holding_a_claim_releases_it(pg_dsn: str) -> None:
    box = PgOutbox(Database(pg_dsn))
    queued = box.put(request("claimed by a replica that dies"), "store down")
    with psycopg.connect(pg_dsn, autocommit=True) as dying:
        dying_pid = dying.info.backend_pid
        dying.execute("BEGIN")
        dying.execute("SELECT seq FROM outbox WHERE seq = %s FOR UPDATE", (queued.seq,))
        with box.claim(queued) as mine:
            assert mine is None
    # the connection is gone (as with a killed process): once the server has ended its
    # session (waited for, not assumed), the row is free again
    with psycopg.connect(pg_dsn, autocommit=True) as watcher:
        deadline = time.monotonic() + 30
        while (
            time.monotonic() < deadline
            and watcher.execute(
                "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (dying_pid,)
            ).fetchone()
        ):
            time.sleep(0.01)
    with box.claim(queued) as mine:
        assert mine is not None
        box.delivered(queued.seq, "mem_x", WriteAction.ADDED)
    assert box.depth() == 0
    box.close()


def test_a_trace_saved_by_one_replica_is_read_by_another(pg_dsn: str) -> None:
    one, two = PgTraceStore(Database(pg_dsn)), PgTraceStore(Database(pg_dsn), keep=10)
    traces = [
        Trace(
            trace_id=f"tr_{n}",
            tool="search",
            created_at=datetime(2024, 7, 1, n, tzinfo=UTC),
            backend="postgres",
            request={"query": f"q{n}"},
        )
        for n in range(3)
    ]
    for trace in traces:
        one.save(trace)
    one.flush()
    got = two.get(traces[1].trace_id)
    assert got is not None
    assert got.request == {"query": "q1"}
    assert [t.trace_id for t in two.recent(2)] == [traces[2].trace_id, traces[1].trace_id]
    assert [t.trace_id for t in two.since()] == [t.trace_id for t in traces]
    assert two.get("tr_missing") is None
    one.close()
    two.close()


def test_a_token_added_once_is_seen_by_every_replica(pg_dsn: str) -> None:
    one = SharedTokens(Database(pg_dsn), refresh_s=0)
    two = SharedTokens(Database(pg_dsn), refresh_s=0)
    spec = TokenSpec(name="ci-bot", hash=hash_token("mo_secret"), read_only=True)
    one.add(spec)
    assert two.tokens() == [spec]
    assert two.remove("ci-bot")
    assert not two.remove("ci-bot")
    assert one.tokens() == []
    one.close()
    two.close()


def test_a_session_opened_through_one_replica_is_used_and_ended_through_another(
    pg_dsn: str,
) -> None:
    one, two = PgSessions(Database(pg_dsn), 2, 600), PgSessions(Database(pg_dsn), 2, 600)
    session_id = one.open("alice")
    assert session_id is not None
    assert not two.use("alice", session_id)  # its initialize has not succeeded yet
    one.confirm(session_id)
    assert two.use("alice", session_id)
    two.done(session_id)
    assert not two.use("bob", session_id)  # another token: as if it did not exist
    assert not one.end("bob", session_id)
    assert one.counts() == {"alice": 1}
    assert two.end("alice", session_id)
    assert not one.use("alice", session_id)
    failed = two.open("alice")
    assert failed is not None
    two.discard(failed)  # its initialize failed: nothing held
    assert one.counts() == {}
    one.close()
    two.close()


def test_a_token_cap_holds_across_replicas_opening_at_the_same_moment(pg_dsn: str) -> None:
    """Eight threads on two replicas race to open sessions for one token whose cap is 3."""
    replicas = [PgSessions(Database(pg_dsn, max_size=4), 3, 600) for _ in range(2)]
    opened: list[str | None] = []
    start = threading.Barrier(8)

    def race(store: PgSessions) -> None:
        start.wait(timeout=30)
        for _ in range(2):
            opened.append(store.open("carol"))

    threads = [threading.Thread(target=race, args=(replicas[n % 2],)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len([s for s in opened if s is not None]) == 3
    assert len(opened) == 16
    for store in replicas:
        store.close()


def test_sessions_idle_for_the_timeout_end_by_the_database_clock(pg_dsn: str) -> None:
    sessions = PgSessions(Database(pg_dsn), 1, 600)
    session_id = sessions.open("dave")
    assert session_id is not None
    sessions.confirm(session_id)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # as if last used 11 minutes ago
        conn.execute(
            "UPDATE mcp_sessions SET used_at = now() - interval '11 minutes' WHERE id = %s",
            (session_id,),
        )
    assert not sessions.use("dave", session_id)
    assert sessions.counts() == {}
    assert sessions.open("dave") is not None  # its slot is free: the idle one was dropped
    sessions.close()


def test_one_pool_serves_all_shared_state_of_a_process(tmp_path: Path, pg_dsn: str) -> None:
    settings = load_settings(data_dir=tmp_path, shared={"state": "postgres", "dsn": pg_dsn})
    box, traces = shared_state.outbox(settings), shared_state.trace_store(settings)
    sessions = shared_state.shared_sessions(settings)
    assert isinstance(box, PgOutbox)
    assert isinstance(traces, PgTraceStore)
    assert sessions is not None
    assert box._pg is traces._pg is sessions._pg
    assert box.depth() == 0
    box.close()
    traces.close()
    assert sessions.counts() == {}  # the pool lives on for its last user
    sessions.close()
    again = shared_state.outbox(settings)  # all closed: a new pool
    assert isinstance(again, PgOutbox)
    assert again._pg is not box._pg
    assert again.depth() == 0
    again.close()


def test_a_revoked_shared_token_is_refused_and_its_sessions_end(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shared_state, "TOKENS_REFRESH_S", 0)
    settings = load_settings(data_dir=tmp_path, shared={"state": "postgres", "dsn": pg_dsn})
    spec = TokenSpec(name="leaked", hash=hash_token("mo_leaked"))
    shared_state.add_shared_token(settings, spec)
    sessions = shared_state.shared_sessions(settings)
    assert sessions is not None
    held = sessions.open("leaked")
    assert held is not None
    sessions.confirm(held)
    tokens = shared_state.shared_tokens(settings)
    assert tokens is not None
    assert [t.name for t in tokens()] == ["leaked"]
    assert shared_state.revoke_shared_token(settings, "leaked") == (True, 1)
    assert tokens() == []
    assert not sessions.use("leaked", held)
    assert shared_state.revoke_shared_token(settings, "leaked") == (False, 0)
    sessions.close()


def test_request_stats_read_the_shared_traces(tmp_path: Path, pg_dsn: str) -> None:
    from memory_orchestrator.service import request_stats

    settings = load_settings(data_dir=tmp_path, shared={"state": "postgres", "dsn": pg_dsn})
    traces = shared_state.trace_store(settings)
    for n in range(3):
        traces.save(
            Trace(
                trace_id=f"tr_s{n}",
                tool="search",
                created_at=datetime(2024, 7, 1, n, tzinfo=UTC),
                backend="postgres",
                request={"query": "q"},
            )
        )
    traces.close()
    report = request_stats(settings)
    assert report.model_dump()["total"]["count"] == 3


async def test_each_replica_derived_index_pulls_what_another_replica_wrote(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local index of replica b is fed from the store's change sequence: a memory written
    through replica a reaches b's index (the candidate list named "(local index)")."""
    from memory_orchestrator.derived import indexes

    monkeypatch.setattr(indexes, "SYNC_INTERVAL_S", 0.0)  # b asks the store at each request

    from memory_orchestrator.models import LOCAL_SOURCE, SearchRequest, WriteRequest
    from memory_orchestrator.service import Orchestrator

    def replica(name: str) -> Orchestrator:
        return Orchestrator.from_settings(
            load_settings(
                data_dir=tmp_path / name,
                backend="postgres",
                postgres={"dsn": pg_dsn},
                shared={"state": "postgres"},
                local_index={"enabled": True},
            )
        )

    a, b = replica("a"), replica("b")
    await b.search(SearchRequest(query="anything at all"))  # b's index: empty, in sync
    wrote = await a.write(
        WriteRequest(memory=NewMemory(content="Zanzibar ferry tickets were booked by Omar"))
    )
    found = await b.search(SearchRequest(query="who booked the Zanzibar ferry"))
    trace = b.trace(found.trace_id)
    assert trace is not None
    sources = {s.query for c in trace.candidates if c.id == wrote.id for s in c.sources}
    assert LOCAL_SOURCE in sources, sources
    await a.close()
    await b.close()
