"""The embedded store's version (`data_version`) and the candidates kept by it, over real
SQLite files and a second process that writes to the same file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import NewMemory, SearchRequest
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.traces import TraceStore
from tests.factories import CHAT, NOW, chat_turns

pytestmark = pytest.mark.integration


def other_process(db: Path, sql: str, *args: object) -> None:
    """`sql` committed to `db` by another process, as another writer of the file would."""
    script = (
        "import sqlite3, sys, json\n"
        "conn = sqlite3.connect(sys.argv[1], timeout=5)\n"
        "with conn:\n"
        "    conn.execute(sys.argv[2], json.loads(sys.argv[3]))\n"
        "conn.close()\n"
    )
    subprocess.run(
        [sys.executable, "-c", script, str(db), sql, json.dumps(list(args))],
        check=True,
        timeout=30,
    )


async def test_the_version_moves_with_every_commit_from_this_process_or_another(
    tmp_path: Path,
) -> None:
    db = tmp_path / "memories.db"
    store = EmbeddedBackend(db)
    try:
        await store.write(NewMemory(content="The retro moved to Friday."))
        first = store.data_version()
        assert first is not None
        await store.search("retro", 5)
        assert store.data_version() == first  # a read changes nothing
        await store.write(NewMemory(content="The demo is on Monday."))
        second = store.data_version()
        assert second not in (None, first)
        other_process(db, "UPDATE memories SET content = ? WHERE content LIKE ?", "x", "%demo%")
        third = store.data_version()
        assert third not in (None, first, second)
        db.unlink()  # the file deleted while open: the store cannot tell any more
        assert store.data_version() is None
    finally:
        await store.close()


def test_an_in_memory_store_has_no_version() -> None:
    assert EmbeddedBackend(":memory:").data_version() is None


async def test_a_kept_candidate_changed_or_deleted_by_another_process_is_read_anew(
    settings: Settings,
) -> None:
    settings.ranking.context_seeds = 0  # the store's neighbour step off: only the index
    settings.ranking.local_context_weight = 1.0  # the turn after a match comes from the index
    db = settings.embedded_path()

    async def ask(o: Orchestrator) -> tuple[list[str], int]:
        result = await o.search(SearchRequest(query="painting", as_of=NOW))
        trace = o.trace(result.trace_id)
        assert trace is not None
        return [i.summary for i in result.items], trace.backend_calls

    o = Orchestrator(EmbeddedBackend(db), settings, traces=TraceStore(None))
    try:
        await o.ingest(chat_turns())
        found, calls = await ask(o)
        assert CHAT[1] in found  # never says "painting": the local index found it
        again, fewer = await ask(o)
        assert again == found
        assert fewer == calls - 1  # nothing changed: the candidates were not read again

        edited = CHAT[1].replace("lake", "sea")
        other_process(db, "UPDATE memories SET content = ? WHERE content = ?", edited, CHAT[1])
        found, calls = await ask(o)
        assert edited in found
        assert CHAT[1] not in found
        assert calls == fewer + 1  # read again

        other_process(db, "UPDATE memories SET deleted_at = 1 WHERE content = ?", edited)
        found, _ = await ask(o)
        assert edited not in found
        assert CHAT[1] not in found
    finally:
        await o.close()
