"""Export, restore, backup and import: memories in and out of a store.

    export   every memory the store lists (in its order) and every edge between them, with
             their ids, times, types, labels, metadata and supersession marks
             (`transfer.records`), and a forgotten memory with its tombstone (the data dir's
             `Tombstones`). Needs the store's listing; the edges need `list_edges`
             (`capabilities.export`), and an export without them says so in its header.
    restore  an export into an empty store, nothing judged: verbatim where the store can take
             it so (`capabilities.restore`: the same ids, order, times and marks); elsewhere
             each memory written as it is (the store assigns its ids), then the edges and the
             marks through the store's own `link` and `supersede`, with the ids mapped; the
             mapping is reported. Then the tombstones, under the ids the memories have now.
             A store that holds any memory is refused.
    backup   a consistent copy while writers go on: the store's own file where it can copy
             it (`capabilities.backup`; the embedded store's copy holds the tombstones too,
             as the `forgotten` table of `state/forgotten.py`), else its export.
    import   records of another source through the write path (`service.importing`).

Built by the `Orchestrator` (`Orchestrator.transfer`) over its store; it never asks which
store it has, only what the store can do.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, cast

import anyio

from memory_orchestrator.backends import registry
from memory_orchestrator.backends.base import (
    EnumerableBackend,
    MemoryBackend,
    backing_up,
    exporting,
    restoring,
    superseding,
)
from memory_orchestrator.errors import BackendError, ForgetError, TransferError
from memory_orchestrator.models import Memory, NewMemory, WriteAction, WriteOutcome
from memory_orchestrator.service.importing import Importer, ImportSummary
from memory_orchestrator.service.writing import WritePath
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.forgotten import Tombstone, Tombstones
from memory_orchestrator.state.imports import Ledger
from memory_orchestrator.transfer.records import (
    EdgeRecord,
    Export,
    Header,
    MemoryRecord,
    edge_from,
    edge_of,
    forgotten_of,
    lines,
    memory_of,
    new_memory,
    read_export,
    record_of,
    tombstone_of,
)
from memory_orchestrator.transfer.sources import Incoming

PAGE = 1000  # memories or edges per listing call
WRITE_CHUNK = 500  # memories per write_many call of a restore that maps ids

Progress = Callable[[str, int, int | None], None]  # (phase, done, total or None)


def _quiet(phase: str, done: int, total: int | None) -> None:
    return None


@dataclass
class ExportSummary:
    memories: int
    edges: int
    lossless: bool
    notes: list[str] = field(default_factory=list)
    forgotten: int = 0  # memories exported with their tombstone


@dataclass
class BackupReport:
    """Where a backup went and what it is: the store's own file copied (`copy`, restored by
    `orchestrator restore`, or put in the store's place), or its export (`export`)."""

    store: str
    path: Path
    kind: Literal["copy", "export"]
    size: int
    export: ExportSummary | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class RestoreReport:
    """What a restore did: counts, whether ids were kept, and the mapping where they were not
    (old id -> new id, only for the ids that changed)."""

    store: str
    memories: int
    edges: int
    marks: int
    verbatim: bool
    ids: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    forgotten: int = 0  # tombstones re-created: memories restored forgotten


class Transfer:
    """Export and restore over one store (see the module docstring)."""

    def __init__(
        self,
        backend: MemoryBackend,
        store: MemoryBackend,
        on_written: Callable[[], None],
        writes: WritePath | None = None,
        tombstones: Tombstones | None = None,
    ) -> None:
        # `backend`: the store itself, for its optional abilities; `store`: the same behind
        # the retry wrapper, for the calls every store has; `writes`: the write path of
        # `memory_write`, which an import goes through; `tombstones`: the data dir's
        # forgotten memories, which an export carries and a restore re-creates
        self._backend, self._store, self._on_written = backend, store, on_written
        self._writes = writes
        self._tombstones = tombstones

    # ------------------------------------------------------------------ import

    async def bring_in(
        self,
        incoming: Sequence[Incoming],
        summary: ImportSummary,
        ledger: Ledger,
        progress: Progress = _quiet,
    ) -> ImportSummary:
        """`incoming` through the write path, one by one (`service.importing`)."""
        assert self._writes is not None, "an import needs the orchestrator's write path"
        return await Importer(self._writes, self._store, ledger).run(incoming, summary, progress)

    def _listing(self) -> EnumerableBackend:
        """The store's listing (the callers check `capabilities.listing` first)."""
        return cast(EnumerableBackend, self._store)

    # ------------------------------------------------------------------ export

    async def snapshot(self, progress: Progress = _quiet) -> Export:
        """Every live memory and every edge between them, as an export holds them. Raises
        TransferError when the store cannot list its memories."""
        records = await self._with_tombstones(await self._memories(progress))
        ids = {r.id for r in records}
        edges, notes = await self._edges(ids, progress)
        records, dropped = _marks_within(records, ids)
        header = Header(
            store=self._store.name,
            exported_at=datetime.now(UTC),
            lossless=exporting(self._backend) is not None,
            notes=tuple(notes + dropped),
        )
        return Export(header, records, edges)

    async def export(
        self, write: Callable[[str], object], progress: Progress = _quiet
    ) -> ExportSummary:
        """Write the export file, a line at a time, through `write` (see `snapshot`)."""
        found = await self.snapshot(progress)
        for line in lines(found.header, found.memories, found.edges):
            write(line)
        header, records = found.header, found.memories
        forgotten = sum(r.forgotten is not None for r in records)
        return ExportSummary(
            len(records), len(found.edges), header.lossless, list(header.notes), forgotten
        )

    async def _memories(self, progress: Progress) -> list[MemoryRecord]:
        if not self._store.capabilities.listing:
            raise TransferError(
                f"the {self._store.name} store cannot list its memories; nothing exported"
            )
        found: dict[str, Memory] = {}  # a memory listed again (changed) keeps its place
        cursor: str | None = None
        while True:
            page, cursor = await self._listing().list_memories(cursor, PAGE)
            for memory in page:
                found[memory.id] = memory
            progress("memories", len(found), None)
            if len(page) < PAGE:
                break
        # the store's marks confirm a bare `supersedes` of a record stored before the prefix
        marks = frozenset((m.id, m.superseded_by) for m in found.values() if m.superseded_by)
        return [record_of(m, marks) for m in found.values()]

    async def _with_tombstones(self, records: list[MemoryRecord]) -> list[MemoryRecord]:
        """`records`, each forgotten one with its tombstone (a purged memory is not listed)."""
        stones = {t.memory_id: t for t in await self._entries() if t.purged_at is None}
        if not stones:
            return records
        return [
            r.model_copy(update={"forgotten": forgotten_of(stones[r.id])}) if r.id in stones else r
            for r in records
        ]

    async def _entries(self) -> list[Tombstone]:
        tombstones = self._tombstones
        if tombstones is None:
            return []
        return await anyio.to_thread.run_sync(tombstones.entries)

    async def _edges(self, ids: set[str], progress: Progress) -> tuple[list[EdgeRecord], list[str]]:
        lister = exporting(self._backend)
        if lister is None:
            why = "with no edges: the store cannot list them"
            graph = self._store.capabilities.graph
            return [], [
                f"memories only, {why}" if graph else "memories only: the store keeps no edges"
            ]
        edges: list[EdgeRecord] = []
        outside = 0
        cursor: str | None = None
        while True:
            page, cursor = await lister.list_edges(cursor, PAGE)
            for edge in page:
                if edge.source_id in ids and edge.target_id in ids:
                    edges.append(edge_of(edge))
                else:  # a memory written while the export ran: it is not in the file
                    outside += 1
            progress("edges", len(edges), None)
            if len(page) < PAGE:
                break
        notes = (
            [f"{outside} edge(s) to memories written during the export left out"] if outside else []
        )
        return edges, notes

    # ------------------------------------------------------------------ backup

    async def backup(self, dest: Path, progress: Progress = _quiet) -> BackupReport:
        """A consistent copy of the store at `dest` (which must not exist) while writers go
        on: the store's own copy of its file where it has one (`capabilities.backup`), else
        its export. Raises TransferError when `dest` exists."""
        if dest.exists():
            raise TransferError(f"{dest} exists already; a backup never overwrites a file")
        copier = backing_up(self._backend)
        if copier is not None:
            await copier.backup(dest)
            notes = await self._tombstones_into(dest)
            return BackupReport(self._store.name, dest, "copy", dest.stat().st_size, None, notes)
        partial = dest.with_name(dest.name + ".partial")
        try:
            with partial.open("w", encoding="utf-8") as out:
                summary = await self.export(out.write, progress)
            partial.replace(dest)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise TransferError(f"backup to {dest} failed: {exc}") from exc
        notes = summary.notes
        if self._store.name == "postgres":
            notes = [*notes, "a copy of the whole database: pg_dump (docs/how-to/import-export.md)"]
        return BackupReport(self._store.name, dest, "export", dest.stat().st_size, summary, notes)

    async def _tombstones_into(self, dest: Path) -> list[str]:
        """The tombstones into a copy of the store's file: only the embedded store's copy,
        which `restore` reads (`read_backup`); another program's file is left as it is."""
        stones = [t for t in await self._entries() if t.purged_at is None]
        if not stones:
            return []
        if self._store.name != "embedded":
            return [
                f"{len(stones)} forgotten memor{'y' if len(stones) == 1 else 'ies'}: the"
                " tombstones are not in this copy (an export carries them)"
            ]
        copy = Tombstones(dest)
        try:
            await anyio.to_thread.run_sync(copy.add, stones)
        except ForgetError as exc:
            dest.unlink(missing_ok=True)
            raise TransferError(f"backup to {dest} failed: {exc}") from exc
        finally:
            copy.close()
        return [f"{len(stones)} forgotten memories kept forgotten in the copy"]

    # ------------------------------------------------------------------ restore

    async def restore(self, export: Export, progress: Progress = _quiet) -> RestoreReport:
        """`export` into this store, which must hold no memory. Raises TransferError when it
        holds some, or cannot say (no listing)."""
        await self._require_empty()
        target = restoring(self._backend)
        if target is not None:
            total = len(export.memories)
            progress("memories", 0, total)
            await target.restore(
                [memory_of(r) for r in export.memories],
                [edge_from(e) for e in export.edges],
            )
            progress("memories", total, total)
            self._on_written()
            marks = sum(r.superseded_by is not None for r in export.memories)
            notes: list[str] = []
            if marks and not self._store.capabilities.supersede:
                notes.append(f"{marks} superseded mark(s) not kept: the store keeps none")
                marks = 0
            same = {r.id: r.id for r in export.memories}
            forgotten = await self._forget_again(export.memories, same, notes)
            edges = len(export.edges)
            return RestoreReport(self._store.name, total, edges, marks, True, {}, notes, forgotten)
        report = await self._restore_mapped(export, progress)
        self._on_written()
        return report

    async def _forget_again(
        self, records: Sequence[MemoryRecord], ids: dict[str, str], notes: list[str]
    ) -> int:
        """The tombstones `records` carry, re-created under the ids their memories have now
        (`ids`: old -> new). One the store merged into a memory the file holds live (the same
        text) is left out: forgetting it would hide that one too."""
        carried = [r for r in records if r.forgotten is not None and r.id in ids]
        if not carried:
            return 0
        if self._tombstones is None:
            notes.append(f"{len(carried)} tombstone(s) not kept: no forgotten memories here")
            return 0
        live = {ids[r.id] for r in records if r.forgotten is None and r.id in ids}
        merged = [r for r in carried if ids[r.id] in live]
        if merged:
            notes.append(
                f"{len(merged)} forgotten memor{'y' if len(merged) == 1 else 'ies'} not kept"
                " forgotten: the store holds it as a live memory of the file (the same text)"
            )
        name = self._store.name
        stones = [
            stone
            for r in carried
            if ids[r.id] not in live and (stone := tombstone_of(r, ids[r.id], name)) is not None
        ]
        added = await anyio.to_thread.run_sync(self._tombstones.add, stones)
        return len(added)

    async def _require_empty(self) -> None:
        caps = self._store.capabilities
        if not caps.listing:
            raise TransferError(
                f"the {self._store.name} store cannot list its memories, so it cannot be seen to"
                " be empty; nothing restored"
            )
        held, _ = await self._listing().list_memories(None, 1)
        if held:
            raise TransferError(
                f"the {self._store.name} store is not empty; a restore goes into an empty store"
                " only (give another --data-dir, or use `orchestrator import`, which judges"
                " each memory against what the store holds); nothing restored"
            )

    async def _restore_mapped(self, export: Export, progress: Progress) -> RestoreReport:
        """Each memory written as it is, in order (the store assigns ids), then the edges and
        marks with the ids mapped."""
        store, caps = self._store, self._store.capabilities
        ids: dict[str, str] = {}
        notes: list[str] = []
        records = export.memories
        step = WRITE_CHUNK if caps.bulk_write else 1
        progress("memories", 0, len(records))
        for start in range(0, len(records), step):
            chunk = records[start : start + step]
            batch = [new_memory(r, ids) for r in chunk]
            outcomes = await (store.write_many(batch) if step > 1 else _one(store, batch))
            for record, outcome in zip(chunk, outcomes, strict=True):
                kept = outcome.existing_id if outcome.action is WriteAction.SKIPPED else None
                if kept or outcome.id:
                    ids[record.id] = kept or outcome.id
                if kept:
                    notes.append(f"{record.id}: the store holds its text already, as {kept}")
            progress("memories", start + len(chunk), len(records))
        edges = await self._link(export.edges, ids, notes)
        marks = await self._mark(records, ids, notes)
        forgotten = await self._forget_again(records, ids, notes)
        if not caps.timestamps:
            notes.append("the store keeps no times: the memories' times are not kept")
        changed = {old: new for old, new in ids.items() if old != new}
        count = len(set(ids.values()))
        return RestoreReport(store.name, count, edges, marks, False, changed, notes, forgotten)

    async def _link(
        self, edges: Sequence[EdgeRecord], ids: dict[str, str], notes: list[str]
    ) -> int:
        if not edges:
            return 0
        if not self._store.capabilities.link:
            notes.append(f"{len(edges)} edge(s) not kept: the store makes no links")
            return 0
        made = 0
        for edge in edges:
            source, target = ids.get(edge.source_id), ids.get(edge.target_id)
            if source is None or target is None or source == target:
                continue
            # an edge's metadata may name memories too (Mnemon's mark of a correction)
            meta = {k: ids.get(v, v) if isinstance(v, str) else v for k, v in edge.meta.items()}
            await self._store.link(source, target, edge.type, edge.weight, meta)
            made += 1
        return made

    async def _mark(
        self, records: Sequence[MemoryRecord], ids: dict[str, str], notes: list[str]
    ) -> int:
        pairs = [
            (ids[r.id], ids[r.superseded_by])
            for r in records
            if r.superseded_by is not None and r.id in ids and r.superseded_by in ids
        ]
        if not pairs:
            return 0
        marker = superseding(self._backend)
        if marker is None:
            notes.append(
                f"{len(pairs)} superseded mark(s) not kept: the store keeps none (the"
                " 'supersedes' links are)"
            )
            return 0
        for old, new in pairs:
            await marker.supersede(old, new)
        return len(pairs)


def _marks_within(
    records: list[MemoryRecord], ids: set[str]
) -> tuple[list[MemoryRecord], list[str]]:
    """Marks naming a memory the listing did not reach (written while the export ran) are
    left out, so the file restores."""
    out, dropped = [], 0
    for record in records:
        update: dict[str, object] = {}
        if record.supersedes is not None and record.supersedes not in ids:
            update["supersedes"] = None
        if record.superseded_by is not None and record.superseded_by not in ids:
            update.update(superseded_by=None, superseded_at=None)
        if update:
            dropped += 1
            record = record.model_copy(update=update)
        out.append(record)
    note = f"{dropped} mark(s) naming memories written during the export left out"
    return out, [note] if dropped else []


async def _one(store: MemoryBackend, batch: Sequence[NewMemory]) -> list[WriteOutcome]:
    return [await store.write(m) for m in batch]


__all__ = ["BackupReport", "ExportSummary", "RestoreReport", "Transfer", "read_backup", "read_file"]


SQLITE_MAGIC = b"SQLite format 3\x00"


def is_sqlite(path: Path) -> bool:
    """Whether `path` is a SQLite file (a backup of a store kept in one) by its first bytes."""
    try:
        with path.open("rb") as handle:
            return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


async def read_backup(path: Path, settings: Settings) -> Export:
    """A copy of the embedded store's file (`orchestrator backup`) read as an export: opened
    as a store on a copy of its own (the backup is left as it is). Raises TransferError when
    it is no such file."""
    with tempfile.TemporaryDirectory(prefix="orchestrator-restore-") as folder:
        copy = Path(folder) / "memories.db"
        try:
            await anyio.to_thread.run_sync(shutil.copyfile, path, copy)
        except OSError as exc:
            raise TransferError(f"{path}: cannot be read: {exc}") from exc
        embedded = settings.embedded.model_copy(update={"path": copy})
        scratch = settings.model_copy(update={"backend": "embedded", "embedded": embedded})
        store = registry.create("embedded", scratch)
        stones = Tombstones(copy)  # the copy's own (`backup`), read once it opened as a store
        try:
            return await Transfer(store, store, lambda: None, tombstones=stones).snapshot()
        except BackendError as exc:
            why = str(exc).replace(f"embedded store {copy}: ", "")
            raise TransferError(f"{path}: not a backup of the embedded store: {why}") from exc
        except ForgetError as exc:
            raise TransferError(f"{path}: its forgotten memories cannot be read: {exc}") from exc
        finally:
            stones.close()
            await store.close()


async def read_file(path: Path, settings: Settings) -> Export:
    """An export file, or a copy of the embedded store's file (`orchestrator backup`), read
    and checked. Raises TransferError."""
    if is_sqlite(path):
        return await read_backup(path, settings)
    return await anyio.to_thread.run_sync(_read_export, path)


def _read_export(path: Path) -> Export:
    try:
        with path.open(encoding="utf-8") as handle:
            return read_export(handle, str(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise TransferError(f"{path}: cannot be read: {exc}") from exc
