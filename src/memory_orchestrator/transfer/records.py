"""The export file: JSON Lines, one record a line, what `orchestrator export` writes and
`orchestrator restore` reads.

    {"kind": "header", "format": "memory-orchestrator-export", "version": 1, "store": ...}
    {"kind": "memory", "id": ..., "content": ..., "type": ..., "created_at": ..., ...}
    {"kind": "edge", "source_id": ..., "target_id": ..., "type": ..., "weight": ..., ...}
    {"kind": "end", "memories": N, "edges": M}

Memories come in the store's listing order (a restore keeps it), then the edges. The last
line counts what came before it: a file cut short is refused, not half restored.

Supersession is the product's own record, never client metadata: a memory that corrected
another names it in `supersedes`, and one a later memory corrected carries `superseded_by`
and `superseded_at`; both are checked on reading (they must name a memory of the file).
`memory_of` and `record_of` are the one place where those fields meet the way the stores
keep them today (`metadata["orchestrator:supersedes"]` on the corrector, or the bare
`supersedes` of a record stored before that key, where the store's mark on the memory it
names confirms it; `Memory.superseded_by`). A record's free metadata never holds the
orchestrator's own keys: any found there (an older file, a bare key no mark confirms) is
moved aside to `client:<key>` on reading, as a client could have written it.

A forgotten memory (`orchestrator forget`: a tombstone of the orchestrator's own, kept beside
the store, `state/forgotten.py`) is exported with its tombstone as a field of its own,
`forgotten` (why and when), so that a restore re-creates the tombstone and the restored store
shows what the exported one showed; an undo there brings the memory back. A purged memory is
no longer in the store, so not in the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, ValidationError

from memory_orchestrator.errors import TransferError
from memory_orchestrator.models import (
    MAX_CONTENT_CHARS,
    MAX_LABEL_CHARS,
    MAX_REASON_CHARS,
    SUPERSEDES_KEY,
    Edge,
    Memory,
    MemoryType,
    MetaValue,
    Moment,
    NewMemory,
    describe_errors,
    legacy_supersedes,
    moved_aside,
    supersedes,
    to_utc,
)
from memory_orchestrator.models.memory import Frozen, finite_metadata
from memory_orchestrator.state.forgotten import Tombstone

FORMAT: Literal["memory-orchestrator-export"] = "memory-orchestrator-export"
VERSION: Literal[1] = 1
MAX_LINE_CHARS = 1_000_000  # a longer line is refused: no record of ours is near it
_ID = Field(min_length=1, max_length=MAX_LABEL_CHARS)
# metadata JSON can hold: NaN and Infinity are refused
Meta = Annotated[dict[str, MetaValue], AfterValidator(finite_metadata)]
# a memory's free metadata: the orchestrator's own keys moved aside (they travel as fields)
FreeMeta = Annotated[Meta, AfterValidator(moved_aside)]


class Header(Frozen):
    kind: Literal["header"] = "header"
    format: Literal["memory-orchestrator-export"] = FORMAT
    version: Literal[1] = VERSION
    store: str = Field(description="The store kind it was exported from.")
    exported_at: Moment = None
    lossless: bool = Field(
        default=True, description="False when the store could not list everything (edges)."
    )
    notes: tuple[str, ...] = ()


class Forgotten(Frozen):
    """A forget tombstone as an export carries it: why, and when."""

    reason: str = Field(default="", max_length=MAX_REASON_CHARS)
    at: Annotated[datetime, AfterValidator(to_utc)] = Field(description="When (UTC).")


class MemoryRecord(Frozen):
    """One memory, as `Memory` holds it, with the product's supersession fields apart."""

    kind: Literal["memory"] = "memory"
    id: str = _ID
    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    type: MemoryType = MemoryType.SEMANTIC
    entities: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    created_at: Moment = None
    source: str | None = None
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    metadata: FreeMeta = Field(default_factory=dict)
    supersedes: str | None = None  # the memory this one corrected
    superseded_by: str | None = None  # the memory that corrected this one
    superseded_at: Moment = None
    forgotten: Forgotten | None = None  # left out of every read until an undo


class EdgeRecord(Frozen):
    kind: Literal["edge"] = "edge"
    source_id: str = _ID
    target_id: str = _ID
    type: str = Field(min_length=1, max_length=MAX_LABEL_CHARS)
    weight: float = Field(default=1.0, ge=0.0, le=1.0)
    meta: Meta = Field(default_factory=dict)


class End(Frozen):
    kind: Literal["end"] = "end"
    memories: int = Field(ge=0)
    edges: int = Field(ge=0)


# ---------------------------------------------------------------- the stores' records


# What a memory and its record share, field for field (the marks and ids are mapped apart).
_SHARED: tuple[str, ...] = ("content", "type", "entities", "tags", "created_at", "source")
_SHARED += ("importance", "confidence", "superseded_at")
_EDGE: tuple[str, ...] = ("source_id", "target_id", "type", "weight", "meta")


def _fields(value: Frozen, names: tuple[str, ...]) -> dict[str, object]:
    return {name: getattr(value, name) for name in names}


def record_of(memory: Memory, marks: frozenset[tuple[str, str]] = frozenset()) -> MemoryRecord:
    """A store's memory as a record: the corrector's mark lifted out of its metadata.
    `marks`: (corrected, corrector) as the store marks them, which confirm a bare
    `supersedes` of an older record (see the module docstring)."""
    corrected = supersedes(memory)
    legacy = legacy_supersedes(memory)
    if corrected is None and legacy is not None and (legacy, memory.id) in marks:
        corrected = legacy
    metadata = {
        k: v
        for k, v in memory.metadata.items()
        if k != SUPERSEDES_KEY and not (k == "supersedes" and legacy and corrected == legacy)
    }
    return MemoryRecord(
        **_fields(memory, _SHARED),
        id=memory.id,
        metadata=metadata,
        supersedes=corrected,
        superseded_by=memory.superseded_by,
    )


def forgotten_of(tombstone: Tombstone) -> Forgotten:
    return Forgotten(reason=tombstone.reason, at=tombstone.forgotten_at)


def tombstone_of(record: MemoryRecord, memory_id: str, store: str) -> Tombstone | None:
    """The tombstone `record` carries, for the memory it became (`memory_id`) in `store`."""
    mark = record.forgotten
    return None if mark is None else Tombstone(memory_id, store, mark.reason, mark.at)


def edge_of(edge: Edge) -> EdgeRecord:
    return EdgeRecord(**_fields(edge, _EDGE))


def edge_from(record: EdgeRecord) -> Edge:
    return Edge(**_fields(record, _EDGE))


def memory_of(record: MemoryRecord, ids: dict[str, str] | None = None) -> Memory:
    """A record as the store keeps it, its ids through `ids` (old -> new) when given."""
    new = (lambda i: ids.get(i, i)) if ids is not None else (lambda i: i)
    metadata = dict(record.metadata)
    if record.supersedes is not None:
        metadata[SUPERSEDES_KEY] = new(record.supersedes)
    by = record.superseded_by
    return Memory(
        **_fields(record, _SHARED),
        id=new(record.id),
        metadata=metadata,
        superseded_by=None if by is None else new(by),
    )


def new_memory(record: MemoryRecord, ids: dict[str, str]) -> NewMemory:
    """A record as a write to a store that assigns its own ids: the memory it corrected
    named by its new id (`ids`: old -> new, of the memories written before it)."""
    fields = _fields(record, _SHARED[:-1])  # a new memory has no mark of its own
    memory = NewMemory(**fields, metadata=record.metadata)
    if record.supersedes is None or record.supersedes not in ids:
        return memory
    # the product's own key, added past the validation that refuses it from clients
    metadata = {**memory.metadata, SUPERSEDES_KEY: ids[record.supersedes]}
    return memory.model_copy(update={"metadata": metadata})


# ---------------------------------------------------------------- writing and reading


def lines(
    header: Header, memories: Iterable[MemoryRecord], edges: Iterable[EdgeRecord]
) -> Iterator[str]:
    """The file, a line at a time (each ends with a newline)."""
    yield header.model_dump_json() + "\n"
    counts = [0, 0]
    for memory in memories:
        counts[0] += 1
        yield memory.model_dump_json() + "\n"
    for edge in edges:
        counts[1] += 1
        yield edge.model_dump_json() + "\n"
    yield End(memories=counts[0], edges=counts[1]).model_dump_json() + "\n"


@dataclass
class Export:
    """A whole export file, read and checked."""

    header: Header
    memories: list[MemoryRecord] = field(default_factory=list)
    edges: list[EdgeRecord] = field(default_factory=list)


_KINDS: dict[str, type[Frozen]] = {
    "header": Header,
    "memory": MemoryRecord,
    "edge": EdgeRecord,
    "end": End,
}


def read_export(source: Iterable[str], name: str) -> Export:
    """Every record of an export file, checked: a header first, an end last whose counts
    match, ids once each, and every edge and mark naming a memory of the file. Raises
    TransferError naming the line and what is wrong."""
    found: Export | None = None
    end: End | None = None
    for number, line in enumerate(source, start=1):
        if not line.strip():
            continue
        where = f"{name}, line {number}"
        if end is not None:
            raise TransferError(f"{where}: a record after the end record")
        record = _parse(line, where, first=found is None)
        if found is None:
            assert isinstance(record, Header)
            found = Export(record)
        elif isinstance(record, MemoryRecord):
            found.memories.append(record)
        elif isinstance(record, EdgeRecord):
            found.edges.append(record)
        elif isinstance(record, End):
            end = record
        else:
            raise TransferError(f"{where}: a second header")
    if found is None:
        raise TransferError(f"{name}: empty; an export has a header, its records and an end")
    if end is None:
        raise TransferError(f"{name}: no end record: the file was cut short; nothing restored")
    if (end.memories, end.edges) != (len(found.memories), len(found.edges)):
        raise TransferError(
            f"{name}: the end record counts {end.memories} memories and {end.edges} edges,"
            f" the file holds {len(found.memories)} and {len(found.edges)}; nothing restored"
        )
    _check_ids(found, name)
    return found


def _parse(line: str, where: str, *, first: bool) -> Frozen:
    if len(line) > MAX_LINE_CHARS:
        raise TransferError(f"{where}: over {MAX_LINE_CHARS} characters")
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise TransferError(f"{where}: not JSON ({exc.msg})") from None
    kind = data.get("kind") if isinstance(data, dict) else None
    if first and kind != "header":
        raise TransferError(
            f"{where}: not an export of this program (the first line is no {FORMAT!r}"
            " header); to bring memories in, use `orchestrator import`"
        )
    model = _KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise TransferError(f"{where}: expected an object whose kind is one of {', '.join(_KINDS)}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise TransferError(f"{where}: {describe_errors(exc)}") from None


def _check_ids(export: Export, name: str) -> None:
    ids: set[str] = set()
    for memory in export.memories:
        if memory.id in ids:
            raise TransferError(f"{name}: memory {memory.id!r} comes twice")
        ids.add(memory.id)
    for memory in export.memories:
        for mark, other in (
            ("supersedes", memory.supersedes),
            ("superseded_by", memory.superseded_by),
        ):
            if other is not None and other not in ids:
                raise TransferError(
                    f"{name}: memory {memory.id!r} has {mark} {other!r}, which is no memory of"
                    " the file"
                )
    for edge in export.edges:
        for end in (edge.source_id, edge.target_id):
            if end not in ids:
                raise TransferError(
                    f"{name}: an edge {edge.source_id} -> {edge.target_id} ({edge.type}) names"
                    f" {end!r}, which is no memory of the file"
                )
