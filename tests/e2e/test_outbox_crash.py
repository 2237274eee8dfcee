"""No write is lost: a process queues a write while the store is down and is killed (SIGKILL)
before it replays it; afterwards `orchestrator outbox list|flush` shows it and delivers it,
exactly once. A server replays its queue in the background, on the outbox's own schedule:
nobody has to call health or write again for a queued write to reach the store."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from memory_orchestrator.faces.cli.app import app
from tests.http_load import http_server, make_token, mcp_session
from tests.integration.test_store_files import write_locked

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CONTENT = "The backup generator at the Porto site was tested on Sunday."

# Runs in its own process: a store whose writes fail transiently (fault injection around the
# real embedded store), one write (queued in the file outbox), then it waits to be killed.
SCRIPT = """
import sys
import anyio
from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import NewMemory, WriteRequest
from memory_orchestrator.state.outbox import Outbox
from memory_orchestrator.service import Orchestrator, resilience
from memory_orchestrator.settings import load_settings
from tests.faults import FaultyBackend

settings = load_settings(data_dir=sys.argv[1])
resilience.BASE_DELAY_S = 0.01  # retries that pause milliseconds

async def main() -> None:
    store = FaultyBackend(EmbeddedBackend(settings.embedded_path()), {"write": "transient"})
    o = Orchestrator(store, settings, outbox=Outbox(settings.outbox_path()))
    report = await o.write(WriteRequest(memory=NewMemory(content=sys.argv[2])))
    print(report.action.value, report.outbox_seq, flush=True)
    await anyio.sleep(3600)  # killed here, before any replay

anyio.run(main)
"""


def live_copies(db: Path, content: str) -> int:
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT count(*) FROM memories WHERE content = ? AND deleted_at IS NULL", (content,)
        ).fetchone()
    return int(row[0])


def cli(data: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["--data-dir", str(data), *args])
    return result.exit_code, result.stdout


def test_a_queued_write_survives_sigkill_and_arrives_exactly_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(data), CONTENT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert line[0] == "queued", proc.stderr.read() if proc.stderr else ""
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert proc.returncode == -signal.SIGKILL
    db = data / "memories.db"
    assert live_copies(db, CONTENT) == 0  # not written yet: only queued

    code, out = cli(data, "outbox", "list", "--json")
    assert code == 0
    listed = json.loads(out)
    assert listed["depth"] == 1
    assert listed["pending"][0]["request"]["memory"]["content"] == CONTENT
    assert listed["pending"][0]["seq"] == int(line[1])

    code, out = cli(data, "outbox", "flush", "--json")
    assert code == 0, out
    flushed = json.loads(out)
    assert flushed["depth"] == 0
    assert [d["seq"] for d in flushed["delivered"]] == [int(line[1])]
    assert live_copies(db, CONTENT) == 1

    code, out = cli(data, "outbox", "flush", "--json")  # a second flush sends nothing
    assert code == 0
    assert json.loads(out)["delivered"] == []
    assert live_copies(db, CONTENT) == 1
    code, out = cli(data, "outbox", "list", "--all")
    assert code == 0
    assert "delivered" in out


def test_the_cli_says_queued_and_health_shows_the_depth(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "memories.db").write_bytes(b"not a database at all " * 100)  # the store is broken
    code, out = cli(data, "write", "A memory written while the store file was broken.")
    assert code == 0, out
    assert out.startswith("queued outbox #1")
    code, out = cli(data, "--json", "health")
    assert code == 2  # the store is down: error
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert checks["outbox"]["status"] == "degraded"
    assert "1 write(s) queued" in checks["outbox"]["detail"]
    (data / "memories.db").unlink()  # repaired (a fresh store)
    code, out = cli(data, "--json", "health")  # health replays the queue
    assert code == 0, out
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert "1 replayed now" in checks["outbox"]["detail"]
    assert (
        live_copies(data / "memories.db", "A memory written while the store file was broken.") == 1
    )


async def test_a_server_replays_queued_writes_in_the_background_without_a_health_call(
    tmp_path: Path,
) -> None:
    """A real HTTP server; another process holds the store's write lock, so a write is
    queued. Once the lock is gone, only searches are made: the queued write shows up in
    them, and in the file, once."""
    token = make_token("writer")
    data = tmp_path / "data"
    queued = "The Porto generator fuel was topped up by Amara."

    async def main() -> None:
        async with mcp_session(server.mcp_url, token.secret) as session:
            seed = await session.call_tool("memory_write", {"content": CONTENT})
            assert (seed.structured_content or {})["action"] == "added"
            with write_locked(data / "memories.db"):
                answer = await session.call_tool("memory_write", {"content": queued})
                assert (answer.structured_content or {})["action"] == "queued", answer
            with anyio.fail_after(30):  # the event: a search finds it; no health, no write
                while True:
                    found = await session.call_tool("memory_search", {"query": "generator fuel"})
                    items = (found.structured_content or {})["items"]
                    if any(queued in item["summary"] for item in items):
                        break
                    await anyio.sleep(0.1)  # a poll interval, not a synchronisation

    with http_server(data, [token.spec]) as server:
        await main()
    assert live_copies(data / "memories.db", queued) == 1
    assert "memory_health" not in (data / "server.log").read_text()
