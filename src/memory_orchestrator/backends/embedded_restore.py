"""The embedded store's export and restore (`ExportingBackend`, `RestoringBackend`): every
edge between live memories, page by page, and an export written back verbatim into an empty
file (see `service.transfer`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from memory_orchestrator import text
from memory_orchestrator.backends.embedded_sql import (
    INSERT_ENTITY,
    INSERT_FTS,
    UPSERT_EDGE,
    fts_values,
    now_us,
    to_us,
)
from memory_orchestrator.backends.kit import edge_cursor, entity_key
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import Edge, Memory

_EDGES = (
    "SELECT e.source_id, e.target_id, e.type, e.weight, e.meta FROM edges e"
    " WHERE (e.source_id, e.target_id, e.type) > (?, ?, ?)"
    " AND EXISTS (SELECT 1 FROM memories WHERE id = e.source_id AND deleted_at IS NULL)"
    " AND EXISTS (SELECT 1 FROM memories WHERE id = e.target_id AND deleted_at IS NULL)"
    " ORDER BY e.source_id, e.target_id, e.type LIMIT ?"
)

_RESTORE = (
    "INSERT INTO memories (id, content, type, created_at, updated_at, source, importance,"
    " confidence, entities, tags, metadata, content_hash, superseded_by, superseded_at)"
    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)


def edge_page(
    conn: sqlite3.Connection, cursor: str | None, limit: int
) -> tuple[list[Edge], str | None]:
    """Edges in key order after `cursor` (the last key listed, as JSON)."""
    after = edge_cursor(cursor)
    rows = conn.execute(_EDGES, (*after, max(1, min(limit, 10_000)))).fetchall()
    edges = [
        Edge(source_id=s, target_id=t, type=kind, weight=float(w), meta=json.loads(meta))
        for s, t, kind, w, meta in rows
    ]
    last = json.dumps(list(rows[-1][:3])) if rows else cursor
    return edges, last


def restore_rows(
    conn: sqlite3.Connection, memories: Sequence[Memory], edges: Sequence[Edge]
) -> None:
    """Write `memories` and `edges` as they are (inside the caller's transaction); raises
    BackendError, before writing anything, when the file holds a memory already (a forgotten
    one too: its id could come back)."""
    (held,) = conn.execute("SELECT count(*) FROM memories").fetchone()
    if held:
        raise BackendError(
            f"the store is not empty ({held} memories, live or forgotten); a restore goes"
            " into an empty store only"
        )
    now = now_us()
    for memory in memories:
        created = to_us(memory.created_at) if memory.created_at is not None else now
        at = memory.superseded_at
        values = (
            memory.id,
            memory.content,
            memory.type.value,
            created,
            now,
            memory.source,
            memory.importance,
            memory.confidence,
            json.dumps(list(memory.entities)),
            json.dumps(list(memory.tags)),
            json.dumps(memory.metadata),
            text.content_hash(memory.content),
            memory.superseded_by,
            None if at is None else to_us(at),
        )
        rowid = conn.execute(_RESTORE, values).lastrowid
        conn.execute(INSERT_FTS, (rowid, *fts_values(memory.content, memory.entities)))
        names = [(entity_key(e), memory.id, e, created) for e in memory.entities]
        conn.executemany(INSERT_ENTITY, [r for r in names if r[0]])
    conn.executemany(
        UPSERT_EDGE,
        [(e.source_id, e.target_id, e.type, e.weight, json.dumps(e.meta), now) for e in edges],
    )
