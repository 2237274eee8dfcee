"""What a store and an outbox hold from before client metadata was refused the orchestrator's
own keys, read through the service over real files (the embedded store, the SQLite outbox):
a queued write is delivered with those keys moved aside, a read `as_of` and an export take
a correction from the store's mark only, and the export restores (the same ids, or ids the
store assigns) and imports as it was read (the faces and the inspector:
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
from memory_orchestrator.service.importing import ImportSummary
from memory_orchestrator.settings import Settings, load_settings
from memory_orchestrator.state.imports import Ledger
from memory_orchestrator.state.outbox import Outbox
from memory_orchestrator.text import content_hash
from memory_orchestrator.transfer.records import Export, read_export
from memory_orchestrator.transfer.sources import read_source

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


async def export_of(settings: Settings) -> Export:
    o = Orchestrator.from_settings(settings)
    try:
        out = io.StringIO()
        await o.transfer().export(out.write)
    finally:
        await o.close()
    return read_export(out.getvalue().splitlines(), "the export")


@pytest.mark.parametrize("kind", ["embedded", "mnemonic"])
async def test_an_older_stores_export_restores_as_it_read_and_exports_again_the_same(
    settings: Settings, tmp_path: Path, kind: str
) -> None:
    """Restored into an empty store (the same ids, or those Mnemonic assigns), the correction
    the mark confirmed is one there: marked, and on the embedded store under the
    orchestrator's key (Mnemonic keeps no free metadata), and reads take it so; the client's
    key stays the client's, as the export moved it aside (its value unmapped: the client's
    text). Exported again: the same records (on Mnemonic, the same marks), but for the ids."""
    was, fixed, client = await older_store(settings)
    first = await export_of(settings)
    again = load_settings(data_dir=tmp_path / "again", backend=kind)
    o = Orchestrator.from_settings(again)
    try:
        report = await o.transfer().restore(first)
        ids = {r.id: report.ids.get(r.id, r.id) for r in first.memories}
        assert report.marks == 1
        stored = {m.id: m for m in await o.memories(list(ids.values()))}
        assert stored[ids[was]].superseded_by == ids[fixed]
        if kind == "embedded":
            assert stored[ids[fixed]].metadata == {SUPERSEDES_KEY: was}
            assert stored[ids[client]].metadata == {"client:supersedes": fixed}
        now = SearchRequest(query="Lisbon office gate code", top_k=10)
        found = [i.memory_id for i in (await o.search(now)).items]
        assert ids[was] not in found
        assert {ids[fixed], ids[client]} <= set(found)
        if kind == "embedded":  # a read as_of knows the correction by its key
            asked = now.model_copy(update={"as_of": BETWEEN})
            found = [i.memory_id for i in (await o.search(asked)).items]
            assert ids[was] in found
            assert ids[fixed] not in found
            assert ids[client] in found
    finally:
        await o.close()
    second = await export_of(again)
    back = {new: old for old, new in ids.items()}

    def mapped(i: str | None) -> str | None:
        return None if i is None else back[i]

    if kind == "embedded":
        assert second.memories == first.memories
    marks = [(r.content, r.superseded_by) for r in first.memories]
    assert [(r.content, mapped(r.superseded_by)) for r in second.memories] == marks


async def test_an_older_stores_export_imports_judged_with_the_clients_key_kept(
    settings: Settings, tmp_path: Path
) -> None:
    """`import` of that export: nothing refused for the keys (the client's was moved aside);
    the correction is the write path's own judgement, under the orchestrator's key."""
    _, fixed, _ = await older_store(settings)
    o = Orchestrator.from_settings(settings)
    exported = tmp_path / "older.jsonl"
    try:
        with exported.open("w", encoding="utf-8") as out:
            await o.transfer().export(out.write)
    finally:
        await o.close()
    chosen, incoming = read_source(exported)
    other = Orchestrator.from_settings(load_settings(data_dir=tmp_path / "other"))
    try:
        summary = ImportSummary(str(exported), chosen, len(incoming))
        await other.transfer().bring_in(incoming, summary, Ledger(None))
        assert summary.counts == {"added": 2, "updated": 1}
        made = {i.where.rsplit(":", 1)[1]: i.id for i in summary.items}  # line -> memory
        first_id, fixed_id, client_id = (str(made[n]) for n in ("2", "3", "4"))
        stored = {m.id: m for m in await other.memories([fixed_id, client_id])}
        assert stored[fixed_id].metadata == {SUPERSEDES_KEY: first_id}
        assert stored[client_id].metadata == {"client:supersedes": fixed}
    finally:
        await other.close()
