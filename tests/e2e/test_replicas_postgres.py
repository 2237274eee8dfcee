"""Two replicas, one database: two real `orchestrator serve --transport http` processes on
loopback ports, each with its own data dir, both on one real PostgreSQL (store and shared
state: `backend = "postgres"`, `[shared] state = "postgres"`). Clients reach them directly,
or through a plain round-robin load balancer in a process of its own (`tests/balancer.py`:
each request to the next replica, no session affinity)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psycopg
import pytest

from tests.balancer import answered as balanced
from tests.balancer import balancer
from tests.http_load import (
    LoadResult,
    ServerProcess,
    http_server,
    lost_and_duplicated,
    make_token,
    mcp_session,
    orchestrator_command,
    run_load,
    text_of,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]  # real servers under load

TOKEN = make_token("team")
MIX = {"memory_write": 3, "memory_search": 3, "memory_context": 2}


def stored(dsn: str) -> Counter[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT content FROM memories WHERE deleted_at IS NULL").fetchall()
    return Counter(str(r[0]) for r in rows)


def answered(dsn: str) -> int:
    """Requests answered so far by the replicas sharing `dsn` (their shared traces)."""
    try:
        with psycopg.connect(dsn) as conn:
            row = conn.execute("SELECT count(*) FROM traces").fetchone()
    except psycopg.errors.UndefinedTable:  # no replica has stored a trace yet
        return 0
    return int(row[0]) if row else 0


def shared_env(dsn: str, store_dsn: str | None = None) -> dict[str, str]:
    """The settings of a replica, as environment variables (docs/how-to/deployment.md)."""
    return {
        "ORCHESTRATOR_BACKEND": "postgres",
        "ORCHESTRATOR_POSTGRES__DSN": store_dsn or dsn,
        "ORCHESTRATOR_SHARED__STATE": "postgres",
        "ORCHESTRATOR_SHARED__DSN": dsn,
        "ORCHESTRATOR_RETRY__ATTEMPTS": "1",
    }


@contextmanager
def replica(
    tmp: Path, name: str, dsn: str, monkeypatch: pytest.MonkeyPatch, *, store_dsn: str | None = None
) -> Iterator[ServerProcess]:
    """One replica: the store at `store_dsn` (default `dsn`), shared state at `dsn`."""
    with monkeypatch.context() as env:
        for key, value in shared_env(dsn, store_dsn).items():
            env.setenv(key, value)
        starting = http_server(tmp / name, [TOKEN.spec])
        server = starting.__enter__()
    try:
        yield server
    finally:
        starting.__exit__(None, None, None)


async def refused(server: ServerProcess, secret: str) -> bool:
    """Whether `server` turns `secret` away (401), asked off the event loop."""
    auth = {"Authorization": f"Bearer {secret}"}
    answer = await anyio.to_thread.run_sync(
        lambda: httpx2.post(server.mcp_url, headers=auth, json={}, timeout=30)
    )
    return answer.status_code == 401


async def until(servers: tuple[ServerProcess, ...], secret: str, *, refuse: bool) -> None:
    """Waits for every replica to re-read the shared token list (each does within
    `TOKENS_REFRESH_S`): then all of them accept `secret`, or all refuse it."""
    with anyio.fail_after(60):  # far above the refresh: only a replica that never re-reads
        for server in servers:
            while await refused(server, secret) is not refuse:
                await anyio.sleep(0.2)  # a poll interval, not a synchronisation


async def call(server: ServerProcess, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with mcp_session(server.mcp_url, TOKEN.secret) as session:
        answer = await session.call_tool(tool, arguments)
    assert not answer.is_error, text_of(answer)
    return answer.structured_content or {}


async def test_a_write_through_one_replica_is_found_explained_and_listed_through_the_other(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ExitStack() as stack:
        a = stack.enter_context(replica(tmp_path, "a", pg_dsn, monkeypatch))
        b = stack.enter_context(replica(tmp_path, "b", pg_dsn, monkeypatch))

        async def main() -> str:
            content = "Quokka firmware 7.2 ships on Friday after the vendor review"
            wrote = await call(a, "memory_write", {"content": content, "entities": ["Quokka"]})
            assert wrote["action"] == "added"
            found = await call(b, "memory_search", {"query": "when does quokka firmware ship"})
            assert [i["memory_id"] for i in found["items"]][:1] == [wrote["id"]]
            explained = await call(b, "memory_explain", {"trace_id": wrote["trace_id"]})
            assert explained["trace"]["trace_id"] == wrote["trace_id"]
            again = await call(b, "memory_write", {"content": content})
            assert again["action"] == "skipped"
            return str(found["trace_id"])

        search_trace = await main()
        # a trace taken on b is replayed by another process over the same database
        replayed = subprocess.run(
            [*orchestrator_command(), "replay", search_trace, "--json"],
            env={**os.environ, **shared_env(pg_dsn)},
            cwd=tmp_path,
            capture_output=True,
            timeout=60,
            check=True,
        )
        report = json.loads(replayed.stdout)
        assert report["identical"], report
        assert report["trace_id"] == search_trace
        # a token minted once into the shared list opens a session on either replica
        minted = subprocess.run(
            [*orchestrator_command(), "token", "new", "--name", "bot", "--shared", "--json"],
            env={**os.environ, **shared_env(pg_dsn)},
            capture_output=True,
            timeout=60,
            check=True,
        )
        secret = json.loads(minted.stdout)["secret"]
        await until((a, b), secret, refuse=False)

        async def with_minted() -> None:
            for server in (a, b):
                async with mcp_session(server.mcp_url, secret) as session:
                    assert not (await session.call_tool("memory_health", {})).is_error
            async with mcp_session(a.mcp_url, secret, terminate_on_close=False):
                pass  # a session left open

        await with_minted()
        # revoked once: refused by both replicas, its open session ended
        revoked = subprocess.run(
            [*orchestrator_command(), "token", "revoke", "--name", "bot", "--json"],
            env={**os.environ, **shared_env(pg_dsn)},
            capture_output=True,
            timeout=60,
            check=True,
        )
        assert json.loads(revoked.stdout) == {
            "name": "bot",
            "revoked": True,
            "sessions_ended": 1,
            "in_config": False,
        }
        await until((a, b), secret, refuse=True)


async def _load(a: ServerProcess, b: ServerProcess, requests: int) -> tuple[LoadResult, LoadResult]:
    """8 clients on each replica at once."""
    results: list[LoadResult] = []

    async def one(server: ServerProcess) -> None:
        results.append(
            await run_load(
                server.mcp_url, TOKEN.secret, clients=8, requests_per_client=requests, mix=MIX
            )
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, a)
        tg.start_soon(one, b)
    return results[0], results[1]


async def test_a_load_across_two_replicas_stores_every_acknowledged_write_once(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ExitStack() as stack:
        a = stack.enter_context(replica(tmp_path, "a", pg_dsn, monkeypatch))
        b = stack.enter_context(replica(tmp_path, "b", pg_dsn, monkeypatch))
        one, two = await _load(a, b, requests=25)
    assert (one.errors, two.errors) == (0, 0), one.error_samples + two.error_samples
    assert one.requests + two.requests == 16 * 25
    written = one.written + two.written
    assert written
    assert lost_and_duplicated(written, stored(pg_dsn)) == (0, 0)


async def test_one_replica_killed_mid_load_the_other_keeps_serving(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ExitStack() as stack:
        a = stack.enter_context(replica(tmp_path, "a", pg_dsn, monkeypatch))
        b = stack.enter_context(replica(tmp_path, "b", pg_dsn, monkeypatch))
        survivor: list[LoadResult] = []

        async def main() -> None:
            async def on_b() -> None:
                survivor.append(
                    await run_load(
                        b.mcp_url, TOKEN.secret, clients=8, requests_per_client=20, mix=MIX
                    )
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(on_b)
                with anyio.fail_after(60):  # b is under load: it has answered some calls
                    while await anyio.to_thread.run_sync(answered, pg_dsn) < 10:
                        await anyio.sleep(0.02)
                await call(a, "memory_write", {"content": "written just before the kill"})
                a.process.send_signal(signal.SIGKILL)  # mid-load: b's clients are running

        await main()
        a.process.wait(timeout=15)
    (result,) = survivor
    assert result.errors == 0, result.error_samples
    contents = stored(pg_dsn)
    assert lost_and_duplicated(result.written, contents) == (0, 0)
    assert contents["written just before the kill"] == 1


async def test_the_outbox_of_a_dead_replica_is_drained_by_a_living_one_exactly_once(
    tmp_path: Path, pg_dsn: str, pg_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replica a cannot reach the store (its store address is wrong) but shares the outbox:
    its writes are queued there. It dies; replica b replays them, each once, its background
    replay and two health calls racing for them."""
    nowhere = "postgresql://postgres@127.0.0.1:9/nowhere"
    with ExitStack() as stack:
        a = stack.enter_context(replica(tmp_path, "a", pg_dsn, monkeypatch, store_dsn=nowhere))
        b = stack.enter_context(replica(tmp_path, "b", pg_dsn, monkeypatch))
        contents = [  # unlike each other: the write path skips near-duplicates
            "Dana approved the firmware budget for the spring release",
            "Ravi moved the vendor review to Thursday morning",
            "Mei found a memory leak in the storage service",
            "Jonas hired two engineers for the security team",
        ]

        async def queue_on_a() -> None:
            for content in contents:
                assert (await call(a, "memory_write", {"content": content}))["action"] == "queued"

        await queue_on_a()
        a.process.send_signal(signal.SIGKILL)
        a.process.wait(timeout=15)
        # b replays them in the background too (`resilience.REPLAY_EVERY_S`): racing that

        async def drain_on_b() -> dict[str, Any]:
            async with anyio.create_task_group() as tg:  # two more replays racing on b
                for _ in range(2):
                    tg.start_soon(call, b, "memory_health", {})
            return await call(b, "memory_health", {})

        health = await drain_on_b()
        outbox = next(c for c in health["checks"] if c["name"] == "outbox")
        assert outbox["status"] == "ok", outbox
    with psycopg.connect(pg_dsn) as conn:
        states = conn.execute("SELECT state, attempts > 0 FROM outbox").fetchall()
    assert stored(pg_dsn) == Counter(dict.fromkeys(contents, 1))
    assert states == [("delivered", True)] * len(contents)


# ---------------------------------------------------------------- behind round-robin


async def found_on(server: ServerProcess, contents: list[str]) -> list[str]:
    """The contents a search through `server` does not find (each by its unique tag)."""

    missing = []
    async with mcp_session(server.mcp_url, TOKEN.secret) as session:
        for content in contents:
            tag = content.split(" item ")[1].split()[0]  # the uuid in `unique_memory`
            answer = await session.call_tool("memory_search", {"query": tag, "top_k": 3})
            items = (answer.structured_content or {}).get("items", [])
            if not any(tag in item["summary"] for item in items):
                missing.append(content)
    return missing


async def test_two_replicas_behind_round_robin_need_no_session_affinity(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every request of every session goes to the other replica than the one before:
    every call succeeds, and every write is found through both replicas."""
    with ExitStack() as stack:
        a = stack.enter_context(replica(tmp_path, "a", pg_dsn, monkeypatch))
        b = stack.enter_context(replica(tmp_path, "b", pg_dsn, monkeypatch))
        url = stack.enter_context(balancer([a.base_url, b.base_url], tmp_path / "balancer.log"))
        result = await run_load(
            url + "/mcp", TOKEN.secret, clients=8, requests_per_client=25, mix=MIX
        )
        assert result.errors == 0, result.error_samples
        assert result.requests == 8 * 25
        counts = balanced(url)
        assert min(counts.get(a.base_url, 0), counts.get(b.base_url, 0)) > 100, counts
        assert result.written
        assert await found_on(a, result.written) == []
        assert await found_on(b, result.written) == []
    assert lost_and_duplicated(result.written, stored(pg_dsn)) == (0, 0)


async def test_a_replica_killed_mid_load_behind_round_robin_loses_no_acknowledged_write(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replica a dies (SIGKILL) while 8 sessions run through the balancer: their sessions go
    on through b; only a call a was answering when it died can fail (the client never got
    an answer), and every acknowledged write is stored exactly once."""
    with ExitStack() as stack:
        a = stack.enter_context(replica(tmp_path, "a", pg_dsn, monkeypatch))
        b = stack.enter_context(replica(tmp_path, "b", pg_dsn, monkeypatch))
        url = stack.enter_context(balancer([a.base_url, b.base_url], tmp_path / "balancer.log"))
        results: list[LoadResult] = []

        async def main() -> None:
            async def load() -> None:
                results.append(
                    await run_load(
                        url + "/mcp", TOKEN.secret, clients=8, requests_per_client=25, mix=MIX
                    )
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(load)
                with anyio.fail_after(60):  # under load: some calls answered already
                    while await anyio.to_thread.run_sync(answered, pg_dsn) < 30:
                        await anyio.sleep(0.02)
                a.process.send_signal(signal.SIGKILL)

        await main()
        a.process.wait(timeout=15)
    (result,) = results
    assert result.requests == 8 * 25
    log = (tmp_path / "balancer.log").read_text()
    failures = [line for line in log.splitlines() if not line.startswith("405 GET")]
    assert result.errors <= 8, failures  # at most the calls a was answering
    assert lost_and_duplicated(result.written, stored(pg_dsn)) == (0, 0)
