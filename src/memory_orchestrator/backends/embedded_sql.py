"""The embedded store's schema, SQL statements and row mapping (see `embedded.py`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

from memory_orchestrator import text
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import (
    Memory,
    MemoryType,
)

Row = tuple[Any, ...]

SCHEMA_VERSION = 2
# Version 2 adds `superseded_by` / `superseded_at` (a memory a later one corrected); a version 1
# file is upgraded in place when it is opened (`MIGRATE`), its memories kept.
MIGRATE = {
    2: (
        "ALTER TABLE memories ADD COLUMN superseded_by TEXT",
        "ALTER TABLE memories ADD COLUMN superseded_at INTEGER",
    ),
}


CHUNK = 500  # ids per IN (...) query


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, content TEXT NOT NULL,
    type TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, source TEXT,
    importance REAL, confidence REAL, entities TEXT NOT NULL DEFAULT '[]',
    tags TEXT NOT NULL DEFAULT '[]', metadata TEXT NOT NULL DEFAULT '{}',
    content_hash TEXT NOT NULL, deleted_at INTEGER, superseded_by TEXT, superseded_at INTEGER);
CREATE INDEX IF NOT EXISTS memories_hash ON memories(content_hash) WHERE deleted_at IS NULL;
CREATE INDEX IF NOT EXISTS memories_time ON memories(created_at) WHERE deleted_at IS NULL;
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(body, ents, tokenize='unicode61');
CREATE VIRTUAL TABLE IF NOT EXISTS memories_vocab USING fts5vocab(memories_fts, row);
CREATE TABLE IF NOT EXISTS entities (
    key TEXT NOT NULL, memory_id TEXT NOT NULL, name TEXT NOT NULL,
    created_at INTEGER NOT NULL, PRIMARY KEY (key, memory_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entities_time ON entities(key, created_at);
CREATE INDEX IF NOT EXISTS entities_memory ON entities(memory_id);
CREATE TABLE IF NOT EXISTS edges (
    source_id TEXT NOT NULL, target_id TEXT NOT NULL, type TEXT NOT NULL, weight REAL NOT NULL,
    meta TEXT NOT NULL DEFAULT '{}', created_at INTEGER NOT NULL,
    PRIMARY KEY (source_id, target_id, type)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS edges_target ON edges(target_id);
"""


COLS = (
    "id, content, type, created_at, source, importance, confidence, entities, tags, metadata,"
    " superseded_by, superseded_at"
)


MCOLS = ", ".join(f"m.{c.strip()}" for c in COLS.split(","))


LIST = (
    f"SELECT {COLS}, rowid FROM memories WHERE rowid > ? AND deleted_at IS NULL"
    " ORDER BY rowid LIMIT ?"
)


COUNT_LIVE = "SELECT count(*) FROM memories WHERE deleted_at IS NULL"


LIVE_ROWID = "SELECT rowid FROM memories WHERE id = ? AND deleted_at IS NULL"


SEARCH = (
    f"SELECT {MCOLS}, bm25(memories_fts, 1.0, 2.0) AS r FROM memories_fts JOIN memories m"
    " ON m.rowid = memories_fts.rowid WHERE memories_fts MATCH ? AND m.deleted_at IS NULL"
)


SEARCH_TOP = (  # unfiltered: rank in FTS alone, then read only the top rows (much faster)
    f"SELECT {MCOLS}, f.r FROM (SELECT rowid, bm25(memories_fts, 1.0, 2.0) AS r"
    " FROM memories_fts WHERE memories_fts MATCH ? ORDER BY r LIMIT ?) f"
    " JOIN memories m ON m.rowid = f.rowid WHERE m.deleted_at IS NULL ORDER BY f.r"
)


DUPLICATE = (  # a corrected memory written again (a reversal) is a new memory
    "SELECT id FROM memories WHERE content_hash = ? AND deleted_at IS NULL"
    " AND superseded_by IS NULL LIMIT 1"
)


SUPERSEDE = (
    "UPDATE memories SET superseded_by = ?1, updated_at = ?2,"
    " superseded_at = (SELECT created_at FROM memories WHERE id = ?1) WHERE id = ?3"
    " AND deleted_at IS NULL"
)


INSERT = (
    "INSERT INTO memories (id, content, type, created_at, updated_at, source, importance,"
    " confidence, entities, tags, metadata, content_hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
)


INSERT_FTS = "INSERT INTO memories_fts (rowid, body, ents) VALUES (?, ?, ?)"


INSERT_ENTITY = "INSERT OR IGNORE INTO entities (key, memory_id, name, created_at) VALUES (?,?,?,?)"


INSERT_TEMPORAL = (
    "INSERT OR IGNORE INTO edges (source_id, target_id, type, weight, meta, created_at)"
    " VALUES (?, ?, 'temporal', 1.0, '{}', ?)"
)


UPSERT_EDGE = (
    "INSERT INTO edges (source_id, target_id, type, weight, meta, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (source_id, target_id, type)"
    " DO UPDATE SET weight = excluded.weight, meta = excluded.meta"
)


EDGES_OF = (
    "SELECT target_id, type, weight FROM edges WHERE source_id = ?1 UNION ALL"
    " SELECT source_id, type, weight FROM edges WHERE target_id = ?1"
)


PREV = (
    "SELECT id FROM memories WHERE deleted_at IS NULL AND (created_at, rowid) < (?, ?)"
    " ORDER BY created_at DESC, rowid DESC LIMIT 1"
)


NEXT = (
    "SELECT id FROM memories WHERE deleted_at IS NULL AND (created_at, rowid) > (?, ?)"
    " ORDER BY created_at, rowid LIMIT 1"
)


SHARERS = (  # the nearest in time on each side, so a very common entity cannot explode
    "SELECT memory_id, created_at FROM (SELECT memory_id, created_at FROM entities"
    " WHERE key = ?1 AND created_at <= ?2 AND memory_id != ?3 ORDER BY created_at DESC LIMIT ?4)"
    " UNION ALL SELECT memory_id, created_at FROM (SELECT memory_id, created_at FROM entities"
    " WHERE key = ?1 AND created_at > ?2 ORDER BY created_at LIMIT ?4)"
)


KNOWN = "SELECT min(name) FROM entities GROUP BY key ORDER BY count(*) DESC, key LIMIT ?"


def to_us(when: datetime) -> int:
    """Microseconds since the epoch; naive datetimes are taken as UTC."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - EPOCH) // timedelta(microseconds=1)


def fts_values(content: str, entities: Sequence[str]) -> tuple[str, str]:
    """A memory's two FTS columns: content and entities stemmed, then the entities alone."""
    names = " ".join(entities)
    return " ".join(text.all_stems(f"{content} {names}")), " ".join(text.all_stems(names))


def now_us() -> int:
    return to_us(datetime.now(UTC))


def to_memory(row: Row) -> Memory:
    return parsed_row(row[:12])


@lru_cache(maxsize=8192)
def parsed_row(row: tuple[Any, ...]) -> Memory:
    """A memory row as a `Memory`, memoized on the row's values: the same memories come back
    query after query, and parsing three JSON columns and validating the model costs more than
    the query that found them. A changed row has other values, so it is parsed anew."""
    mem_id, content, kind, created, source, importance, confidence, ents, tags, meta = row[:10]
    by, at = row[10:12]
    return Memory(
        id=mem_id,
        content=content,
        source=source,
        importance=importance,
        confidence=confidence,
        type=MemoryType(kind),
        created_at=EPOCH + timedelta(microseconds=created),
        entities=tuple(json.loads(ents)),
        tags=tuple(json.loads(tags)),
        metadata=json.loads(meta),
        store="embedded",
        superseded_by=by,
        superseded_at=None if at is None else EPOCH + timedelta(microseconds=at),
    )


def migrate(conn: sqlite3.Connection, version: int) -> None:
    """Create the schema (a new file) or upgrade an older one, in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in filter(str.strip, SCHEMA.split(";")):
            conn.execute(statement)
        have = {row[1] for row in conn.execute("PRAGMA table_info(memories)")}
        for step in range(max(version, 1) + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATE.get(step, ()):
                column = statement.split("ADD COLUMN ")[1].split()[0]
                if column not in have:
                    conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise
    conn.execute("COMMIT")


def marks(values: Sequence[object]) -> str:
    return ",".join("?" * len(values))


# Errors of the file or the disk, not of the request: a retry may work, and a write that
# meets one is queued (locked or busy, an I/O error, a full disk, a read-only file).
UNAVAILABLE = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_IOERR", "SQLITE_FULL", "SQLITE_READONLY")


def store_error(exc: sqlite3.Error, path: Path) -> BackendError:
    message = str(exc)
    busy = getattr(exc, "sqlite_errorname", "").startswith(UNAVAILABLE)
    busy = busy or "is locked" in message or "is busy" in message
    return BackendError(f"embedded store {path}: {message}", transient=busy)


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise
    conn.execute("COMMIT")


def readable(conn: sqlite3.Connection) -> str:
    """The file opens as a database of this schema and its catalog reads (cheap at any size;
    the walk of every page is `embedded_check`'s)."""
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return "readable"


def fts_probe(conn: sqlite3.Connection) -> str:
    conn.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH '\"probe\"'")
    return "fts5 ok"


def count_rows(conn: sqlite3.Connection) -> str:
    (memories,) = conn.execute(COUNT_LIVE).fetchone()
    (edges,) = conn.execute("SELECT count(*) FROM edges").fetchone()
    return f"{memories} memories, {edges} edges"
