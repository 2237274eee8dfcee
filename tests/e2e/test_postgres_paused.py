"""A paused PostgreSQL (every server process stopped with SIGSTOP: its TCP connections stay
open and nothing answers, as on a frozen host) holds no call: real orchestrator processes
(stdio, HTTP) on a real server of their own, paused while they serve.

Each call made during the pause must come back while the server is still stopped (checked
in /proc after the answer; the server is resumed only then), with a clear error or the write
queued; nothing acknowledged is lost once it is resumed. A call that hangs until the server
resumes never comes back here: the guard around it (far above the bounds) fails the test.
Bounds are small here (`[retrieval] timeout_s` 1 s) to keep the test short; the defaults,
paused for 60 s: bench/bench_postgres_pause.py.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult

from memory_orchestrator.postgres.server import LocalPostgres
from tests.http_load import http_server, make_token, mcp_session, text_of
from tests.pg_fixtures import new_schema, paused, still_stopped

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

# only catches a call that waits for the resume; the bounds here are a few seconds plus, for a
# write or health, one replay of the outbox (`writing.REPLAY_S`)
GUARD_S = 60.0
TOKEN = make_token("agent")
BEFORE = "The Orion release train leaves on Thursdays."
DURING = "The Orion staging database is rebuilt every Sunday night."
AFTER = "The Orion on-call rota changes every Monday at nine."


@pytest.fixture
def pg(own_pg_server: LocalPostgres) -> LocalPostgres:
    return own_pg_server


def settings_env(dsn: str, *, shared: bool) -> dict[str, str]:
    env = {
        "ORCHESTRATOR_BACKEND": "postgres",
        "ORCHESTRATOR_POSTGRES__DSN": dsn,
        "ORCHESTRATOR_RETRIEVAL__TIMEOUT_S": "1",
        "ORCHESTRATOR_RETRY__ATTEMPTS": "1",
    }
    if shared:
        env |= {"ORCHESTRATOR_SHARED__STATE": "postgres", "ORCHESTRATOR_SHARED__DSN": dsn}
    return env


@asynccontextmanager
async def stdio_session(data_dir: Path, env: dict[str, str]) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memory_orchestrator.faces.mcp.server"],
        env={"ORCHESTRATOR_DATA_DIR": str(data_dir), "PATH": os.environ.get("PATH", ""), **env},
        cwd=data_dir,
    )
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / "server.log", "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def during(session: ClientSession, tool: str, args: dict[str, Any]) -> CallToolResult:
    with anyio.fail_after(GUARD_S):
        return await session.call_tool(tool, args)


def stored(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT content FROM memories WHERE deleted_at IS NULL").fetchall()
    return sorted(str(r[0]) for r in rows)


def unanswered(said: str) -> bool:
    """The database's silence, as the orchestrator names it (a clear error, not a hang)."""
    return any(w in said for w in ("did not answer within", "could not connect within"))


def checks(answer: CallToolResult) -> dict[str, str]:
    report = answer.structured_content or {}
    return {c["name"]: f"{c['status']}: {c['detail']}" for c in report.get("checks", [])}


async def test_stdio_with_a_local_outbox_queues_writes_and_health_answers_while_paused(
    pg: LocalPostgres, tmp_path: Path
) -> None:
    _, dsn = new_schema(pg)
    async with stdio_session(tmp_path / "data", settings_env(dsn, shared=False)) as s:
        assert not (await s.call_tool("memory_write", {"content": BEFORE})).is_error
        with paused(pg) as pids:
            health = await during(s, "memory_health", {})
            wrote = await during(s, "memory_write", {"content": DURING})
            assert still_stopped(pids)  # both answered during the pause
        report = health.structured_content or {}
        assert report["status"] == "error", checks(health)
        said = checks(health)["retrieval"]
        assert "timed out" in said or unanswered(said), said
        assert (wrote.structured_content or {})["action"] == "queued", text_of(wrote)
        with anyio.fail_after(GUARD_S):  # resumed: health replays the queue
            while stored(dsn) != sorted([BEFORE, DURING]):
                await s.call_tool("memory_health", {})
                await anyio.sleep(0.2)
    assert stored(dsn) == sorted([BEFORE, DURING])  # the queued write delivered, once


async def test_stdio_with_the_outbox_in_the_paused_database_refuses_writes_clearly(
    pg: LocalPostgres, tmp_path: Path
) -> None:
    _, dsn = new_schema(pg)
    async with stdio_session(tmp_path / "data", settings_env(dsn, shared=True)) as s:
        assert not (await s.call_tool("memory_write", {"content": BEFORE})).is_error
        with paused(pg) as pids:
            health = await during(s, "memory_health", {})
            wrote = await during(s, "memory_write", {"content": DURING})
            assert still_stopped(pids)
        assert (health.structured_content or {})["status"] == "error", checks(health)
        assert unanswered(checks(health)["outbox"]), checks(health)
        assert wrote.is_error, text_of(wrote)
        assert "not written and not queued" in text_of(wrote), text_of(wrote)
        assert unanswered(text_of(wrote)), text_of(wrote)
        with anyio.fail_after(GUARD_S):
            after = await s.call_tool("memory_write", {"content": AFTER})
        assert (after.structured_content or {})["action"] == "added", text_of(after)
    assert stored(dsn) == sorted([BEFORE, AFTER])  # the refused write was never stored


async def test_http_with_sessions_in_the_paused_database_answers_503_on_an_open_session(
    pg: LocalPostgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, dsn = new_schema(pg)
    for key, value in settings_env(dsn, shared=True).items():
        monkeypatch.setenv(key, value)
    with http_server(tmp_path / "data", [TOKEN.spec]) as server:
        async with mcp_session(server.mcp_url, TOKEN.secret) as s:
            assert not (await s.call_tool("memory_write", {"content": BEFORE})).is_error
            refused: list[str] = []
            with paused(pg) as pids:
                for tool, args in (
                    ("memory_health", {}),
                    ("memory_write", {"content": DURING}),
                ):
                    with pytest.raises(MCPError) as error:
                        await during(s, tool, args)
                    refused.append(str(error.value))
                assert still_stopped(pids)
            for message in refused:
                assert "MCP sessions are unavailable for now" in message, message
                assert unanswered(message), message
            with anyio.fail_after(GUARD_S):  # the same session, once resumed
                after = await s.call_tool("memory_write", {"content": AFTER})
            assert (after.structured_content or {})["action"] == "added", text_of(after)
    assert stored(dsn) == sorted([BEFORE, AFTER])
