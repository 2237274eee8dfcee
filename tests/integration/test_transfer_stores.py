"""Export and restore on stores that assign their own ids (the real Mnemon, Mnemonic's
files, the npm servers kg-memory and mnemon-mcp): written as they are into an empty store of
the same kind, the ids mapped and the mapping reported, the links and the correction marks
kept through the mapping where the store keeps them."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from memory_orchestrator.errors import TransferError
from memory_orchestrator.models import Capabilities, NewMemory, WriteRequest
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings, load_settings
from memory_orchestrator.transfer.records import Export, read_export
from tests.npm_servers import require_script

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def store_settings(kind: str, folder: Path, binary: Path | None) -> Settings:
    if kind == "mnemon":
        return load_settings(
            data_dir=folder, backend="mnemon", mnemon={"binary": binary, "data_dir": folder / "m"}
        )
    return load_settings(data_dir=folder, backend=kind)


async def fill(settings: Settings) -> None:
    """Three memories, one corrected by another through the write path (a mark), and a
    causal link."""
    orchestrator = Orchestrator.from_settings(settings)
    try:
        (other,) = await orchestrator.ingest([NewMemory(content="Omar leads the data team.")])
        for hour in ("02:00", "03:00"):
            text = f"The billing job runs at {hour} every night."
            report = await orchestrator.write(WriteRequest(memory=NewMemory(content=text)))
        assert report.supersedes is not None
        assert report.id is not None
        if orchestrator.capabilities.link:
            await orchestrator.link(other.id, report.id, "causal", 0.5)
    finally:
        await orchestrator.close()


async def export_of(settings: Settings) -> Export:
    orchestrator = Orchestrator.from_settings(settings)
    try:
        out = io.StringIO()
        await orchestrator.transfer().export(out.write)
    finally:
        await orchestrator.close()
    return read_export(out.getvalue().splitlines(), "export")


async def restore(settings: Settings, found: Export) -> tuple[Any, Capabilities]:
    orchestrator = Orchestrator.from_settings(settings)
    try:
        return await orchestrator.transfer().restore(found), orchestrator.capabilities
    finally:
        await orchestrator.close()


NPM = {"kg-memory": "@modelcontextprotocol/server-memory", "mnemon-mcp": "mnemon-mcp"}


@pytest.fixture(params=["mnemon", "mnemonic", "kg-memory", "mnemon-mcp"])
def kind(request: pytest.FixtureRequest) -> str:
    if request.param in NPM:
        require_script(NPM[request.param])
    return str(request.param)


async def test_a_store_that_assigns_ids_is_restored_through_the_mapping(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    binary = request.getfixturevalue("mnemon_real") if kind == "mnemon" else None
    original = store_settings(kind, tmp_path / "original", binary)
    copy = store_settings(kind, tmp_path / "copy", binary)
    await fill(original)
    found = await export_of(original)
    assert found.header.lossless is (kind == "mnemon")  # Mnemonic lists no edges
    report, caps = await restore(copy, found)
    assert not report.verbatim
    assert report.marks == (1 if caps.supersede else 0)
    # ids that changed are reported (kg-memory names a memory by its text: the same id)
    ids = {r.id: report.ids.get(r.id, r.id) for r in found.memories}
    again = await export_of(copy)
    by_text = {r.content: r for r in again.memories}
    assert set(by_text) == {r.content for r in found.memories}
    for record in found.memories:  # each mark names the mapped memory
        restored = by_text[record.content]
        assert restored.id == ids[record.id]
        if caps.supersede:
            mark = record.superseded_by
            assert restored.superseded_by == (None if mark is None else ids[mark])
    causal = [e for e in found.edges if e.type == "causal"]
    kept = {(e.source_id, e.target_id) for e in again.edges if e.type == "causal"}
    assert {(ids[e.source_id], ids[e.target_id]) for e in causal} <= kept
    with pytest.raises(TransferError, match="not empty"):
        await restore(copy, found)


@pytest.mark.mnemon_real
async def test_a_mnemon_backup_is_a_copy_of_its_store_file(
    tmp_path: Path, mnemon_real: Path
) -> None:
    settings = store_settings("mnemon", tmp_path / "original", mnemon_real)
    await fill(settings)
    orchestrator = Orchestrator.from_settings(settings)
    try:
        report = await orchestrator.transfer().backup(tmp_path / "mnemon-copy.db")
    finally:
        await orchestrator.close()
    assert report.kind == "copy"
    # the copy is a Mnemon store as it was: put in place, it reads the same
    moved = store_settings("mnemon", tmp_path / "moved", mnemon_real)
    target = tmp_path / "moved" / "m" / "data" / "default" / "mnemon.db"
    target.parent.mkdir(parents=True)
    (tmp_path / "mnemon-copy.db").rename(target)
    before, after = await export_of(settings), await export_of(moved)
    assert after.memories == before.memories
    assert after.edges == before.edges
