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
from memory_orchestrator.migrations import numbered
from memory_orchestrator.models import (
    Memory,
    MemoryType,
)

Row = tuple[Any, ...]

# The schema is the numbered files of `embedded_migrations` (`migrate`); the file's version is
# its `PRAGMA user_version`, the number of the last file applied.
MIGRATIONS = numbered("memory_orchestrator.backends.embedded_migrations")
SCHEMA_VERSION = MIGRATIONS[-1].version


CHUNK = 500  # ids per IN (...) query


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


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


def listed_memory(row: Row) -> Memory:
    """`to_memory` for the whole listing: parsed without the memo, which a listing would
    fill with every memory the store holds, each one's object kept for nothing (the derived
    indexes keep what they need of it)."""
    return parsed_row.__wrapped__(row[:12])


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


def migrate(conn: sqlite3.Connection) -> list[int]:
    """Apply the migrations the file lacks, all in one transaction with its new version, and
    return the versions applied. The version is read again once the transaction holds the
    write lock: another process may have migrated the file meanwhile. Raises BackendError for
    a file newer than this code."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise BackendError(f"schema version {version} is newer than {SCHEMA_VERSION}")
        pending = [m for m in MIGRATIONS if m.version > version]
        for migration in pending:
            for statement in statements(migration.sql):
                conn.execute(statement)
        if pending:
            conn.execute(f"PRAGMA user_version = {pending[-1].version}")
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise
    conn.execute("COMMIT")
    return [m.version for m in pending]


def statements(script: str) -> list[str]:
    """The statements of an SQL script, each whole: cut after a `;` only where SQLite says the
    text so far is complete (a `;` in a string, a comment or a trigger's body does not end
    one). Raises ValueError when the script ends inside a statement."""
    found: list[str] = []
    start = 0
    for at, char in enumerate(script):
        if char == ";" and sqlite3.complete_statement(script[start : at + 1]):
            found.append(script[start : at + 1].strip())
            start = at + 1
    rest = "\n".join(
        line for line in script[start:].splitlines() if not line.strip().startswith("--")
    )
    if rest.strip():
        raise ValueError(f"the script ends inside a statement: {rest.strip()[:60]!r}")
    return found


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
