"""`orchestrator backup` while a real server writes: the copy restores (`orchestrator
restore`) with every write the server acknowledged before the backup began.

The server is `orchestrator serve --transport http` over a temp data dir; two MCP clients
write unique memories without pause; once they have 20 acknowledged writes, the backup runs
(through the service, over the same files, from this process: it starts at a known moment)
while they go on writing, and they stop only when it has ended. Decided by order (what was
acknowledged before the backup started), never by timing. The first writes are still in
SQLite's write-ahead log then: a copy of the database file alone would miss them."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import anyio
import pytest

from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import load_settings
from tests.http_load import (
    http_server,
    make_token,
    mcp_session,
    orchestrator_command,
    stored_contents,
    text_of,
    unique_memory,
)

pytestmark = pytest.mark.integration

TOKEN = make_token("writer")
BEFORE = 20  # acknowledged writes before the backup starts


def cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*orchestrator_command(), "--data-dir", str(data_dir), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


async def test_a_backup_taken_while_a_server_writes_restores_every_acknowledged_write(
    tmp_path: Path,
) -> None:
    data_dir, copy = tmp_path / "served", tmp_path / "backup.db"
    acked: list[str] = []
    during: list[str] = []  # acknowledged while the backup ran (not asserted: timing)

    async def main(url: str) -> list[str]:
        enough, done = anyio.Event(), anyio.Event()
        before: list[str] = []

        async def writer(client: int) -> None:
            rng = random.Random(client)
            async with mcp_session(url, TOKEN.secret) as session:
                index = 0
                while not done.is_set():
                    memory = unique_memory(rng, client, index)
                    index += 1
                    answer = await session.call_tool("memory_write", memory)
                    assert not answer.is_error, text_of(answer)
                    report = answer.structured_content or {}
                    assert report.get("action") == "added", report
                    (during if enough.is_set() else acked).append(memory["content"])
                    if len(acked) >= BEFORE:
                        enough.set()

        async def backup() -> None:
            orchestrator = Orchestrator.from_settings(load_settings(data_dir=data_dir))
            try:
                await enough.wait()
                before.extend(acked)  # every write acknowledged before the backup starts
                report = await orchestrator.transfer().backup(copy)
                assert report.kind == "copy"
            finally:
                done.set()
                await orchestrator.close()

        async with anyio.create_task_group() as group:
            for client in range(2):
                group.start_soon(writer, client)
            group.start_soon(backup)
        return before

    with http_server(data_dir, [TOKEN.spec]) as server:
        before = await main(server.mcp_url)
    restored = tmp_path / "restored"
    ran = cli(restored, "restore", str(copy))
    assert ran.returncode == 0, ran.stderr
    stored = stored_contents(restored)
    assert len(before) >= BEFORE
    assert [c for c in before if stored[c] != 1] == []
    # nothing the clients did not write, and nothing twice
    assert set(stored) <= set(acked) | set(during)
    assert max(stored.values()) == 1
