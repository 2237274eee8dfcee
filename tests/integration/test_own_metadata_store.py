"""What a store and an outbox hold from before client metadata was refused the orchestrator's
own keys, read through the service over real files (the embedded store, the SQLite outbox):
a queued write is delivered with those keys moved aside, a read `as_of` and an export take
a correction from the store's mark only (the faces and the inspector:
tests/e2e/test_own_metadata.py)."""

from __future__ import annotations

import io
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import (
    SUPERSEDES_KEY,
    NewMemory,
    SearchRequest,
    WriteRequest,
)
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings, load_settings
from memory_orchestrator.state.outbox import Outbox
from memory_orchestrator.text import content_hash
from memory_orchestrator.transfer.records import read_export

pytestmark = pytest.mark.integration

EARLY = datetime(2026, 3, 1, tzinfo=UTC)
LATE = datetime(2026, 6, 1, tzinfo=UTC)
BETWEEN = datetime(2026, 4, 1, tzinfo=UTC)


def old(content: str, metadata: dict[str, Any], when: datetime) -> NewMemory:
    """A memory as a write before the change was stored: its metadata was not checked."""
    return NewMemory(content=content, created_at=when).model_copy(update={"metadata": metadata})


async def older_store(settings: Settings) -> tuple[str, str, str]:
    """An embedded store as the orchestrator left it before the prefix: a correction it
    wrote (the bare `supersedes` key, and its mark on the memory corrected), and a client's
    bare `supersedes` with no mark. The ids: corrected, its correction, the client's."""
    store = EmbeddedBackend(settings.embedded_path())
    try:
        was = (await store.write(old("The Lisbon office gate code is 4412.", {}, EARLY))).id
        now = "The Lisbon office gate code is 9031."
        fixed = (await store.write(old(now, {"supersedes": was}, LATE))).id
        await store.supersede(was, fixed)
        claims = "The Lisbon office gate opens at seven."
        client = (await store.write(old(claims, {"supersedes": fixed}, LATE))).id
        return was, fixed, client
    finally:
        await store.close()


async def test_a_write_queued_before_with_a_reserved_key_is_delivered_with_it_moved_aside(
    settings: Settings,
) -> None:
    box = settings.outbox_path()
    Outbox(box).depth()  # nothing made yet; the row is put as an older release put it
    body = WriteRequest(memory=old("Gate B closes at nine.", {"supersedes": "mem_x"}, EARLY))
    with sqlite3.connect(box) as db:
        db.executescript(
            "CREATE TABLE outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, request TEXT NOT NULL,"
            " content_hash TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending', queued_at"
            " TEXT NOT NULL, reason TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,"
            " last_error TEXT, delivered_at TEXT, memory_id TEXT, action TEXT)"
        )
        db.execute(
            "INSERT INTO outbox (request, content_hash, queued_at, reason) VALUES (?,?,?,?)",
            (
                body.model_dump_json(),
                content_hash("Gate B closes at nine."),
                EARLY.isoformat(),
                "x",
            ),
        )
    o = Orchestrator.from_settings(settings)
    try:
        report = await o.flush_outbox()
        assert (report.depth, len(report.delivered)) == (0, 1)
        (stored,) = await o.memories([str(report.delivered[0].memory_id)])
        assert stored.metadata == {"client:supersedes": "mem_x"}
    finally:
        await o.close()


async def test_as_of_reads_take_an_older_correction_from_the_stores_mark_only(
    settings: Settings,
) -> None:
    was, fixed, client = await older_store(settings)
    o = Orchestrator.from_settings(settings)
    try:
        asked = SearchRequest(query="Lisbon office gate code", top_k=10, as_of=BETWEEN)
        ids = [i.memory_id for i in (await o.search(asked)).items]
        assert was in ids  # the truth on that day
        assert fixed not in ids  # its correction came later: confirmed by the mark
        assert client in ids  # a client's key corrects nothing
        now = await o.search(SearchRequest(query="Lisbon office gate code", top_k=10))
        assert {i.memory_id for i in now.items} >= {fixed, client}
        assert was not in {i.memory_id for i in now.items}
    finally:
        await o.close()


async def test_a_correction_carries_the_orchestrators_own_key(settings: Settings) -> None:
    o = Orchestrator.from_settings(settings)
    try:
        first = await o.write(WriteRequest(memory=NewMemory(content="Kim leads the audit.")))
        second = await o.write(
            WriteRequest(memory=NewMemory(content="Kim no longer leads the audit."))
        )
        assert second.supersedes == first.id
        (stored,) = await o.memories([str(second.id)])
        assert stored.metadata.get(SUPERSEDES_KEY) == first.id
        assert "supersedes" not in stored.metadata
    finally:
        await o.close()


async def test_an_older_store_exports_its_corrections_as_fields_and_restores(
    settings: Settings, tmp_path: Path
) -> None:
    """The export takes a bare `supersedes` as a correction where the store's mark confirms
    it, and a client's as metadata moved aside; the file restores into an empty store."""
    was, fixed, client = await older_store(settings)
    o = Orchestrator.from_settings(settings)
    try:
        out = io.StringIO()
        await o.transfer().export(out.write)
    finally:
        await o.close()
    found = read_export(io.StringIO(out.getvalue()).readlines(), "the export")
    records = {r.id: r for r in found.memories}
    assert (records[fixed].supersedes, records[fixed].metadata) == (was, {})
    assert (records[client].supersedes, records[client].metadata) == (
        None,
        {"client:supersedes": fixed},
    )
    again = Orchestrator.from_settings(load_settings(data_dir=tmp_path / "again"))
    try:
        await again.transfer().restore(found)
        (restored,) = await again.memories([client])
        assert restored.metadata == {"client:supersedes": fixed}
    finally:
        await again.close()
