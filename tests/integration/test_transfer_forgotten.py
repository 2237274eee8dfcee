"""A forgotten memory through export and restore, over real stores: the embedded store (the
same ids), Mnemonic's files and the real Mnemon (ids the store assigns): exported with its
tombstone, restored into an empty store it stays forgotten in every read, `history`
included, under the id it has there, and an undo brings it back. The embedded store's
backup copy keeps it forgotten too; an import of the export leaves it out."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from memory_orchestrator.models import ForgetRequest, NewMemory, SearchRequest
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.service.importing import ImportSummary
from memory_orchestrator.service.transfer import read_file
from memory_orchestrator.settings import Settings, load_settings
from memory_orchestrator.state.imports import Ledger
from memory_orchestrator.transfer.records import Export, read_export
from memory_orchestrator.transfer.sources import read_source

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

TEXTS = (
    "Omar leads the data team.",
    "The staging door code is 4412.",
    "The billing job runs at 02:00 every night.",
)
SECRET = TEXTS[1]


def store_settings(kind: str, folder: Path, binary: Path | None) -> Settings:
    # the lexical reads only: what is left out is decided by the tombstones, not the model
    extra: dict[str, Any] = {"semantic": {"enabled": False}}
    if kind == "mnemon":
        extra["mnemon"] = {"binary": binary, "data_dir": folder / "m"}
    return load_settings(data_dir=folder, backend=kind, **extra)


@pytest.fixture(params=["embedded", "mnemonic", "mnemon"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def binary_for(kind: str, request: pytest.FixtureRequest) -> Path | None:
    return request.getfixturevalue("mnemon_real") if kind == "mnemon" else None


async def forget_one(settings: Settings) -> str:
    """Three memories, the secret one forgotten; its id."""
    orchestrator = Orchestrator.from_settings(settings)
    try:
        outcomes = await orchestrator.ingest([NewMemory(content=t) for t in TEXTS])
        secret = outcomes[1].id
        request = ForgetRequest(ids=[secret], reason="the code must not be recalled")
        assert (await orchestrator.forget(request)).done == (secret,)
        return secret
    finally:
        await orchestrator.close()


async def export_of(settings: Settings) -> Export:
    orchestrator = Orchestrator.from_settings(settings)
    try:
        out = io.StringIO()
        summary = await orchestrator.transfer().export(out.write)
        assert summary.forgotten == 1
    finally:
        await orchestrator.close()
    return read_export(out.getvalue().splitlines(), "export")


async def seen(orchestrator: Orchestrator, memory_id: str) -> bool:
    """Whether any read returns `memory_id`: by id, and a search for its text with history."""
    by_id = [m.id for m in await orchestrator.memories([memory_id])]
    request = SearchRequest(query="staging door code", top_k=10, history=True)
    hits = [i.memory_id for i in (await orchestrator.search(request)).items]
    assert (memory_id in by_id) == (memory_id in hits)
    return memory_id in hits


async def stays_forgotten_until_undone(settings: Settings, memory_id: str) -> None:
    orchestrator = Orchestrator.from_settings(settings)
    try:
        assert not await seen(orchestrator, memory_id)
        (stone,) = await orchestrator.forgotten()
        assert (stone.memory_id, stone.reason) == (memory_id, "the code must not be recalled")
        others = await orchestrator.search(SearchRequest(query="data team", top_k=10))
        assert [i.summary for i in others.items][:1] == [TEXTS[0]]  # the rest is there
        undo = await orchestrator.forget(ForgetRequest(ids=[memory_id], undo=True))
        assert undo.done == (memory_id,)
        assert await seen(orchestrator, memory_id)
    finally:
        await orchestrator.close()


async def test_a_forgotten_memory_stays_forgotten_through_export_and_restore(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    binary = binary_for(kind, request)
    original = store_settings(kind, tmp_path / "original", binary)
    secret = await forget_one(original)
    found = await export_of(original)
    (record,) = [r for r in found.memories if r.forgotten is not None]
    assert (record.id, record.content) == (secret, SECRET)
    copy = store_settings(kind, tmp_path / "copy", binary)
    orchestrator = Orchestrator.from_settings(copy)
    try:
        report = await orchestrator.transfer().restore(found)
    finally:
        await orchestrator.close()
    assert (report.memories, report.forgotten) == (3, 1)
    assert report.verbatim is (kind == "embedded")
    assert (secret in report.ids) is (kind != "embedded")  # a new id there
    await stays_forgotten_until_undone(copy, report.ids.get(secret, secret))


async def test_the_embedded_stores_backup_copy_keeps_it_forgotten(tmp_path: Path) -> None:
    original = store_settings("embedded", tmp_path / "original", None)
    secret = await forget_one(original)
    orchestrator = Orchestrator.from_settings(original)
    try:
        report = await orchestrator.transfer().backup(tmp_path / "copy.db")
    finally:
        await orchestrator.close()
    assert report.kind == "copy"
    found = await read_file(tmp_path / "copy.db", original)
    assert [r.id for r in found.memories if r.forgotten is not None] == [secret]
    copy = store_settings("embedded", tmp_path / "copy", None)
    orchestrator = Orchestrator.from_settings(copy)
    try:
        await orchestrator.transfer().restore(found)
    finally:
        await orchestrator.close()
    await stays_forgotten_until_undone(copy, secret)


async def test_an_import_of_the_export_leaves_the_forgotten_memory_out(tmp_path: Path) -> None:
    original = store_settings("embedded", tmp_path / "original", None)
    await forget_one(original)
    orchestrator = Orchestrator.from_settings(original)
    exported = tmp_path / "export.jsonl"
    try:
        with exported.open("w", encoding="utf-8") as out:
            await orchestrator.transfer().export(out.write)
    finally:
        await orchestrator.close()
    chosen, incoming = read_source(exported)
    other = Orchestrator.from_settings(store_settings("embedded", tmp_path / "other", None))
    try:
        summary = ImportSummary(str(exported), chosen, len(incoming))
        await other.transfer().bring_in(incoming, summary, Ledger(None))
    finally:
        await other.close()
    assert summary.counts == {"added": 2, "skipped": 1}
    assert summary.why["skipped"] == {"forgotten in the store it was exported from": 1}
