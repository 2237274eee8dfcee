"""Every part that talks to PostgreSQL ends its call on this side when the server is paused
(SIGSTOP: its connections stay open and nothing answers): the pool (an answer awaited on a
held connection, a new connection), the store, the shared outbox, traces, tokens and MCP
sessions, and the change listener's own connection. Each call must end, with a clear error,
while the server is still stopped (checked in /proc afterwards); once it is resumed, every
part works again. A call that waited for the resume would hold the test past its timeout.
The processes end to end: tests/e2e/test_postgres_paused.py."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.backends.postgres import PostgresBackend
from memory_orchestrator.errors import BackendError, OutboxError
from memory_orchestrator.models import NewMemory, Trace, WriteRequest
from memory_orchestrator.postgres.database import Database, NoAnswer
from memory_orchestrator.postgres.server import LocalPostgres
from memory_orchestrator.postgres.sessions import PgSessions
from memory_orchestrator.postgres.state import PgOutbox, PgTraceStore, SharedTokens
from memory_orchestrator.service import Orchestrator, writing
from memory_orchestrator.settings import load_settings
from memory_orchestrator.state.tokens import TokenSpec, hash_token
from tests.faults import FaultyBackend
from tests.pg_fixtures import new_schema, paused, still_stopped

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SILENT = ("did not answer within", "could not connect within")


def said_silent(call: Callable[[], object], kind: type[Exception] = BackendError) -> str:
    with pytest.raises(kind) as raised:
        call()
    return silent(raised.value)


def silent(error: BaseException) -> str:
    message = str(error)
    assert any(w in message for w in SILENT), message
    return message


def trace() -> Trace:
    return Trace(
        trace_id=f"tr_{datetime.now(UTC).timestamp():.6f}",
        tool="search",
        created_at=datetime.now(UTC),
        backend="postgres",
        request={},
    )


async def test_every_postgres_call_ends_with_a_clear_error_while_the_server_is_paused(
    own_pg_server: LocalPostgres,
) -> None:
    _, dsn = new_schema(own_pg_server)
    state = Database(dsn, min_size=1, max_size=2, connect_timeout_s=1, call_timeout_s=1)
    box, traces = PgOutbox(state), PgTraceStore(state)
    state.share(), state.share()
    tokens, sessions = SharedTokens(state, refresh_s=0), PgSessions(state, 4, 600)
    state.share()
    store = PostgresBackend(dsn, connect_timeout_s=1, statement_timeout_ms=1000, pool_min=1)
    box.put(WriteRequest(memory=NewMemory(content="queued before the pause")), "test")
    tokens.add(TokenSpec(name="team", hash=hash_token("s" * 32)))
    session = sessions.open("team")
    assert session is not None
    sessions.confirm(session)
    await store.write(NewMemory(content="The Orion gate code is 4412."))
    listener = Database(dsn, connect_timeout_s=1, answer_timeout_s=1).dedicated()
    try:
        with paused(own_pg_server) as pids:
            said_silent(lambda: state.call(lambda c: c.execute("SELECT 1")))  # held, then new
            said_silent(lambda: state.call(lambda c: c.execute("SELECT 1")))
            said_silent(box.depth, OutboxError)
            said_silent(lambda: sessions.use("team", session))
            first = said_silent(tokens.tokens)
            assert said_silent(tokens.tokens) == first  # not asked again at once
            traces.save(trace())
            assert traces.flush(timeout=30)  # stored or failed: failed
            assert traces.errors == 1
            assert traces.last_error is not None
            assert any(w in traces.last_error for w in SILENT), traces.last_error
            with pytest.raises(BackendError) as raised:
                await store.search("Orion gate code", 5)
            silent(raised.value)
            said_silent(lambda: listener.execute("SELECT 1"), NoAnswer)
            assert still_stopped(pids)  # every call above ended during the pause
        assert state.call(lambda c: c.execute("SELECT 1").fetchone()) == (1,)
        assert box.depth() == 1
        assert sessions.use("team", session)
        traces.save(trace())
        assert traces.flush(timeout=30)
        assert traces.errors == 1  # the trace saved after the resume was stored
        hits = await store.search("Orion gate code", 5)
        assert [h.memory.content for h in hits] == ["The Orion gate code is 4412."]
    finally:
        listener.close()
        await store.close()
        for part in (box, traces, tokens, sessions):
            part.close()


async def test_a_replay_whose_time_runs_out_releases_its_claim_on_the_shared_outbox(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay's time budget cancels it mid-delivery (the store's lookup hangs: a fault
    hook); the row it claimed (a lock held by a transaction) is released all the same, so
    another replica can take it at once."""
    box = PgOutbox(Database(pg_dsn))
    queued = box.put(WriteRequest(memory=NewMemory(content="queued while it hung")), "down")
    settings = load_settings(data_dir=tmp_path)
    monkeypatch.setattr(writing, "REPLAY_S", 0.5)
    settings.retrieval.timeout_s = 60  # only the replay's budget can end the delivery
    store = FaultyBackend(EmbeddedBackend(settings.embedded_path()), {"search": "hang"})
    o = Orchestrator(store, settings, outbox=box)
    other = PgOutbox(Database(pg_dsn))
    try:
        assert (await o.flush_outbox()).depth == 1
        with other.claim(queued) as theirs:
            assert theirs is not None  # the cancelled replay's claim was let go
    finally:
        other.close()
        await o.close()
