"""`orchestrator import` over real sources and a real embedded store: JSON Lines, Mnemonic
and basic-memory notes (Mnemonic's written by its own adapter), a real Mnemon store, chat
transcripts (the LoCoMo development split, plain turns). Each through the write path, each
idempotent: importing twice adds nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memory_orchestrator.backends.mnemon import MnemonBackend
from memory_orchestrator.backends.mnemonic import MnemonicBackend
from memory_orchestrator.models import EventKind, MemoryType, NewMemory, WriteRequest
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.service.importing import ImportSummary, quiet_settings
from memory_orchestrator.settings import MnemonSettings, Settings, load_settings
from memory_orchestrator.state.imports import Ledger
from memory_orchestrator.state.traces import TraceStore
from memory_orchestrator.transfer.sources import read_source
from tests.events import said

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LOCOMO = REPO.parent / "shared" / "datasets" / "locomo" / "locomo-dev.json"


async def bring_in(settings: Settings, path: Path, *, ledger: Path | None = None) -> ImportSummary:
    """One import of `path`, as `orchestrator import` runs it."""
    chosen, incoming = read_source(path)
    kept = Ledger(ledger if ledger is not None else settings.data_dir / "imports.db")

    async def main() -> ImportSummary:
        orchestrator = Orchestrator.from_settings(quiet_settings(settings))
        try:
            summary = ImportSummary(str(path), chosen, len(incoming))
            return await orchestrator.transfer().bring_in(incoming, summary, kept)
        finally:
            await orchestrator.close()

    try:
        return await main()
    finally:
        kept.close()


async def live(settings: Settings) -> dict[str, Any]:
    """content -> memory, for every live memory of the store (superseded ones too)."""

    orchestrator = Orchestrator.from_settings(settings)
    try:
        found = await orchestrator.transfer().snapshot()
    finally:
        await orchestrator.close()
    return {r.content: r for r in found.memories}


def jsonl(path: Path, *records: object) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


async def test_memories_as_json_lines_are_judged_and_refused_with_why(
    settings: Settings, tmp_path: Path
) -> None:
    source = jsonl(
        tmp_path / "m.jsonl",
        {"content": "Dana moved the standup to 9:30.", "entities": ["Dana"]},
        {"text": "Ravi prefers tea over coffee.", "created_at": "2024-01-02T10:00:00Z"},
        {"memory": "Deploys run on Fridays.", "type": "procedural", "importance": 0.7},
        {"content": "Dana moved the standup to 10:00.", "entities": ["Dana"]},
        {"content": "   "},
        {"content": "x", "importance": 3},
    )
    first = await bring_in(settings, source)
    assert first.counts == {"added": 3, "updated": 1, "refused": 2}
    assert first.why["updated"] == {"corrects a stored memory": 1}
    refused = [i for i in first.items if i.action == "refused"]
    assert [i.where for i in refused] == ["m.jsonl:5", "m.jsonl:6"]
    assert "content" in refused[0].reason
    assert "importance" in refused[1].reason
    stored = await live(settings)
    assert stored["Deploys run on Fridays."].type is MemoryType.PROCEDURAL
    assert stored["Dana moved the standup to 9:30."].superseded_by is not None
    again = await bring_in(settings, source)
    assert again.counts == {"skipped": 4, "refused": 2}
    assert again.why["skipped"] == {"imported before": 4}
    assert (await live(settings)).keys() == stored.keys()


async def one_by_one(
    records: list[dict[str, Any]], data_dir: Path
) -> list[tuple[str, str, int | None]]:
    """What `memory_write` makes of `records` written one by one into a fresh store: each
    one's action and reason, the ids in the reason numbered in the order they were given."""
    alone = Orchestrator.from_settings(load_settings(data_dir=data_dir))
    try:
        written = [await alone.write(WriteRequest(memory=NewMemory(**r))) for r in records]
    finally:
        await alone.close()
    return numbered([(r.action.value, r.reason, r.id) for r in written])


def numbered(done: list[tuple[str, str, str | None]]) -> list[tuple[str, str, int | None]]:
    """Each write's action, reason and memory, each memory id (in the reason too) replaced by
    the place of the write that made it ("#n"): each store has its own ids."""
    places: dict[str, int] = {}
    for n, (_, _, memory_id) in enumerate(done):
        if memory_id is not None:
            places.setdefault(memory_id, n)
    out = []
    for action, reason, memory_id in done:
        for known, n in places.items():
            reason = reason.replace(known, f"#{n}")
        out.append((action, reason, places.get(memory_id or "")))
    return out


def identifier_pairs() -> list[dict[str, Any]]:
    """The memories of the first case of the identifier-pairs set (rooms, desks, lockers):
    pairs that differ only in an identifier (two facts), restatements and corrections."""
    lines = (REPO / "src/memory_orchestrator/eval/identifier_pairs.jsonl").read_text()
    rows = [json.loads(line) for line in lines.splitlines() if line and line[0] != "#"]
    first = [i for i, row in enumerate(rows) if "case" in row][:2]
    memories = [row["memory"] for row in rows[first[0] : first[1]] if "memory" in row]
    return [{"content": m["content"], "created_at": m["created_at"]} for m in memories]


async def test_each_record_is_judged_as_memory_write_judges_it_in_one_trace(
    settings: Settings, tmp_path: Path
) -> None:
    """The import's writes give what `memory_write` gives for the same records written one
    by one (actions and reasons, ids aside: each store has its own), and leave one trace,
    the import's, with its counts, not one per record."""
    records = [
        {"content": "The billing job runs at 02:00 every night.", "entities": ["billing"]},
        {"content": "Omar leads the data team.", "entities": ["Omar"]},
        {"content": "Every night the billing job runs at 02:00.", "entities": ["billing"]},
        {"content": "The billing job runs at 03:00 every night.", "entities": ["billing"]},
        {"content": "Omar leads the web team.", "entities": ["Omar"]},
        {"content": "Omar no longer leads the data team.", "entities": ["Omar"]},
    ]
    imported = await bring_in(settings, jsonl(tmp_path / "m.jsonl", *records))
    mine = numbered([(i.action, i.reason, i.id) for i in imported.items])
    assert mine == await one_by_one(records, tmp_path / "alone")
    assert imported.counts == {"added": 3, "skipped": 1, "updated": 2}
    kept = TraceStore(settings.trace_path())
    try:
        (trace,) = kept.recent(50)
    finally:
        kept.close()
    assert (trace.tool, trace.request["records"]) == ("import", 6)
    assert said(trace, EventKind.IMPORTED) == [
        {"done": 6, "records": 6, "counts": "3 added, 1 skipped, 2 updated"}
    ]
    assert trace.backend_calls > 6


async def test_identifier_pairs_restatements_and_corrections_as_memory_write(
    settings: Settings, tmp_path: Path
) -> None:
    """Facts that differ only in an identifier (a room, a desk, a locker: two facts, both
    added), restatements (skipped) and corrections (superseding): the import decides each
    as `memory_write` does, with the same reasons."""
    records = identifier_pairs()
    imported = await bring_in(settings, jsonl(tmp_path / "ids.jsonl", *records))
    mine = numbered([(i.action, i.reason, i.id) for i in imported.items])
    assert mine == await one_by_one(records, tmp_path / "alone")
    assert imported.counts == {"added": 20, "skipped": 2, "updated": 2}


async def test_importing_twice_adds_nothing_where_the_judge_alone_would(
    settings: Settings, tmp_path: Path
) -> None:
    """A restatement skipped the first time, whose memory a later record then corrected, is
    judged anew against the correction: the ledger keeps the second import from writing it
    back as a reversal (without it, the second import updates the store)."""
    source = jsonl(
        tmp_path / "m.jsonl",
        {"content": "The team meeting is on Tuesday."},
        {"content": "The team meeting is on Tuesday!"},
        {"content": "The team meeting is on Thursday."},
    )
    first = await bring_in(settings, source)
    assert first.counts == {"added": 1, "skipped": 1, "updated": 1}
    again = await bring_in(settings, source)
    assert again.counts == {"skipped": 3}
    without = await bring_in(settings, source, ledger=tmp_path / "fresh-ledger.db")
    assert without.counts.get("updated", 0) + without.counts.get("added", 0) > 0


async def test_a_folder_of_notes_mnemonic_and_basic_memory(
    settings: Settings, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    store = MnemonicBackend(notes / "mnemonic")  # Mnemonic's files, as its own adapter writes them
    await store.write(
        NewMemory(
            content="Use pnpm, never npm, in the web repo.",
            type=MemoryType.PROCEDURAL,
            tags=["tooling"],
            entities=["web"],
        )
    )
    await store.close()
    basic = notes / "basic" / "coffee.md"
    basic.parent.mkdir(parents=True)
    basic.write_text(
        "---\ntitle: Coffee brewing\ntype: note\npermalink: coffee-brewing\ntags:\n- coffee\n"
        "---\n\n# Coffee brewing\n\n- [method] Pour over gives the cleanest cup #brewing\n"
    )
    (notes / "plain.md").write_text("Keiko owns the billing service.\n")
    (notes / ".obsidian").mkdir()
    (notes / ".obsidian" / "ignored.md").write_text("not a note")
    first = await bring_in(settings, notes)
    assert first.format == "markdown"
    assert first.counts == {"added": 3}
    stored = await live(settings)
    pnpm = stored["Use pnpm, never npm, in the web repo."]
    assert pnpm.type is MemoryType.PROCEDURAL
    assert pnpm.tags == ("tooling",)
    assert pnpm.entities == ("web",)
    coffee = stored["- [method] Pour over gives the cleanest cup #brewing"]
    assert coffee.tags == ("coffee",)
    assert coffee.metadata["title"] == "Coffee brewing"
    assert coffee.metadata["path"] == "basic/coffee.md"
    assert "Keiko owns the billing service." in stored
    assert (await bring_in(settings, notes)).counts == {"skipped": 3}


@pytest.mark.mnemon_real
async def test_a_mnemon_store_file(settings: Settings, tmp_path: Path, mnemon_real: Path) -> None:
    data_dir = tmp_path / "mnemon"
    store = MnemonBackend(MnemonSettings(binary=mnemon_real, data_dir=data_dir))
    try:
        old, _, new = await store.write_many(
            [
                NewMemory(content="The billing job runs at 02:00.", importance=0.8),
                NewMemory(content="Omar leads the data team.", type=MemoryType.SEMANTIC),
                NewMemory(content="The billing job runs at 03:00.", importance=0.8),
            ]
        )
        await store.supersede(old.id, new.id)
    finally:
        await store.close()
    db = data_dir / "data" / "default" / "mnemon.db"
    first = await bring_in(settings, db)
    assert first.format == "mnemon"
    assert first.counts == {"added": 2, "skipped": 1}
    (skipped,) = [i for i in first.items if i.action == "skipped"]
    assert skipped.reason.startswith("superseded in the Mnemon store by ")
    stored = await live(settings)
    assert set(stored) == {"Omar leads the data team.", "The billing job runs at 03:00."}
    assert stored["The billing job runs at 03:00."].importance is not None
    assert (await bring_in(settings, db)).counts == {"skipped": 3}


async def test_a_transcript_of_plain_turns(settings: Settings, tmp_path: Path) -> None:
    source = jsonl(
        tmp_path / "chat.jsonl",
        {"speaker": "Dana", "text": "I moved to Lisbon last spring.", "date": "2024-04-02"},
        {"role": "assistant", "content": "Noted: Lisbon.", "timestamp": "2024-04-02T10:01"},
        {"speaker": "Dana", "text": ""},
    )
    first = await bring_in(settings, source)
    assert first.format == "transcript"
    assert first.counts == {"added": 2, "refused": 1}
    dana = (await live(settings))["Dana: I moved to Lisbon last spring."]
    assert dana.entities == ("Dana",)
    assert dana.type is MemoryType.EPISODIC
    assert dana.created_at is not None
    assert dana.created_at.isoformat().startswith("2024-04-02")


@pytest.mark.timeout(900)  # 2,760 writes on a shared machine: a bound on a hang only
@pytest.mark.skipif(not LOCOMO.is_file(), reason=f"no LoCoMo development split at {LOCOMO}")
async def test_the_locomo_development_split_as_transcripts(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "locomo")
    first = await bring_in(settings, LOCOMO)
    assert first.format == "transcript"
    assert first.stopped is None
    assert sum(first.counts.values()) == first.records == len(first.items)
    assert first.counts["added"] > 2000
    assert "refused" not in first.counts
    for item in first.items:  # every record says what was done and why
        assert item.reason
        if item.action == "skipped":
            assert item.why in {"restates a stored memory", "the store holds its text already"}
    again = await bring_in(settings, LOCOMO)
    assert again.counts == {"skipped": first.records}
    assert again.why["skipped"] == {"imported before": first.records}
