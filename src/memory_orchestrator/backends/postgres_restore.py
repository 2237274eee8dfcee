"""The postgres store's export and restore (`ExportingBackend`, `RestoringBackend`): every
edge between live memories, page by page, and an export written back verbatim into an empty
schema (see `service.transfer`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

from memory_orchestrator.backends.kit import edge_cursor, entity_key
from memory_orchestrator.backends.postgres_sql import INSERT, INSERT_ENTITY, UPSERT_EDGE
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import Edge, Memory, to_utc
from memory_orchestrator.text import content_hash

Conn = Connection[tuple[Any, ...]]

_EDGES = (
    "SELECT e.source_id, e.target_id, e.type, e.weight, e.meta FROM edges e"
    " JOIN memories s ON s.id = e.source_id AND s.deleted_at IS NULL"
    " JOIN memories t ON t.id = e.target_id AND t.deleted_at IS NULL"
    " WHERE (e.source_id, e.target_id, e.type) > (%s, %s, %s)"
    " ORDER BY e.source_id, e.target_id, e.type LIMIT %s"
)


def edge_page(conn: Conn, cursor: str | None, limit: int) -> tuple[list[Edge], str | None]:
    """Edges in key order after `cursor` (the last key listed, as JSON)."""
    after = edge_cursor(cursor)
    rows = conn.execute(_EDGES, (*after, max(1, min(limit, 10_000)))).fetchall()
    edges = [
        Edge(source_id=s, target_id=t, type=kind, weight=float(w), meta=dict(meta or {}))
        for s, t, kind, w, meta in rows
    ]
    return edges, json.dumps(list(rows[-1][:3])) if rows else cursor


def restore_rows(conn: Conn, memories: Sequence[Memory], edges: Sequence[Edge]) -> None:
    """Write `memories` and `edges` as they are (inside the caller's transaction); raises
    BackendError, before writing anything, when the schema holds a memory already."""
    row = conn.execute("SELECT count(*) FROM memories").fetchone()
    held = row[0] if row else 0
    if held:
        raise BackendError(
            f"the store is not empty ({held} memories, live or forgotten); a restore goes"
            " into an empty store only"
        )
    now = datetime.now(UTC)
    for memory in memories:
        created = to_utc(memory.created_at) if memory.created_at is not None else now
        names = " ".join(memory.entities)
        values: tuple[Any, ...] = (memory.id, memory.content, memory.type.value, created, now)
        values += (memory.source, memory.importance, memory.confidence)
        values += (list(memory.entities), list(memory.tags), Jsonb(memory.metadata))
        values += (content_hash(memory.content), f"{memory.content} {names}", names)
        if conn.execute(INSERT, values).fetchone() is None:
            raise BackendError(f"memory {memory.id}: its text is in the export twice")
        entity_rows = [(entity_key(e), memory.id, e, created) for e in memory.entities]
        with conn.cursor() as cur:
            cur.executemany(INSERT_ENTITY, [r for r in entity_rows if r[0]])
    with conn.cursor() as cur:
        cur.executemany(
            UPSERT_EDGE,
            [(e.source_id, e.target_id, e.type, e.weight, Jsonb(e.meta)) for e in edges],
        )
