"""Mnemon's store file: where it is, and the reads that need no `mnemon` process.

Where: Mnemon's own rules. The data dir is `[mnemon] data_dir`, else `$MNEMON_DATA_DIR`,
else `~/.mnemon`; the store is `[mnemon] store`, else `$MNEMON_STORE`, else the data dir's
`active` file (an invalid name there silently means `default`, as in Mnemon), else `default`;
the file is `<data_dir>/data/<store>/mnemon.db`.

Reads: read-only SQLite, never immutable (a live store is read safely as a WAL reader), and
only when the schema is one this adapter knows (tables and columns checked,
`PRAGMA user_version` <= 1): memories by id, the graph walk, entity names, the edge between
two memories, and pages of every memory in insertion order (the listing). Direct reads cost
no process and leave Mnemon's access counters alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread

from memory_orchestrator.backends import kit
from memory_orchestrator.backends.mnemon.mapping import Json, parse_time, to_memory
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import Edge, Memory, Neighbor
from memory_orchestrator.settings import MNEMON_STORE_NAME, MnemonSettings

T = TypeVar("T")
Read = Callable[[sqlite3.Connection | None], T]

SQL_CHUNK = 400
SCHEMA_VERSION = 1  # PRAGMA user_version this adapter knows (float32 vectors)
INSIGHT_COLUMNS = frozenset(
    "id content category importance tags entities source created_at deleted_at".split()
)
EDGE_COLUMNS = frozenset("source_id target_id edge_type weight metadata".split())
_COLS = "id, content, category, importance, tags, entities, source, access_count, created_at"
_KEYS = [k.strip() for k in _COLS.split(",")]
_STORE_NAME = re.compile(MNEMON_STORE_NAME)


@dataclass(frozen=True)
class Location:
    """Where a store lives; `store_error` says why its name cannot be used (nothing runs)."""

    data_dir: Path
    store: str
    store_error: str | None

    @property
    def db_path(self) -> Path:
        return self.data_dir / "data" / self.store / "mnemon.db"


def locate(settings: MnemonSettings) -> Location:
    """The data dir and store Mnemon itself would use (see the module docstring)."""
    configured = settings.data_dir or os.environ.get("MNEMON_DATA_DIR")
    if configured:
        data_dir = Path(configured).expanduser().absolute()
    else:
        data_dir = Path(os.environ.get("HOME") or "/tmp") / ".mnemon"
    name = settings.store or os.environ.get("MNEMON_STORE") or ""
    if not name:
        with contextlib.suppress(OSError):
            name = (data_dir / "active").read_text(encoding="utf-8").strip()
        if not _STORE_NAME.match(name):
            name = "default"
    if not _STORE_NAME.match(name):
        problem = (
            f"invalid mnemon store name {name!r}: use letters, digits, '_' and '-',"
            " starting with a letter or digit"
        )
        return Location(data_dir, name, problem)
    return Location(data_dir, name, None)


class NoDirectRead(Exception):
    """The store file cannot be read directly; the CLI is used instead."""


class StoreFile:
    """Read-only access to one store file (see the module docstring). `note` receives why
    the file is not read, when it cannot be."""

    def __init__(self, path: Path, *, enabled: bool, note: Callable[[str], None]) -> None:
        self.path = path
        self.enabled = enabled
        self._note = note

    async def read(self, read: Read[T]) -> T | None:
        """`read` on a read-only connection (None when there is no file yet), in a worker
        thread. None (and a note saying why) when direct reads are off or the schema is not
        one this adapter knows. Raises BackendError when the file cannot be read."""
        if not self.enabled:
            return None
        try:
            return await anyio.to_thread.run_sync(self._read, read, abandon_on_cancel=True)
        except NoDirectRead as exc:
            self._note(f"store file not read directly ({exc}); reads use the mnemon CLI")
            return None

    def _read(self, read: Read[T]) -> T:
        if not self.path.is_file():
            return read(None)
        try:
            conn = sqlite3.connect(
                self.path.as_uri() + "?mode=ro", uri=True, timeout=2.0, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise BackendError(f"mnemon store {self.path} cannot be opened: {exc}") from exc
        try:
            problem = schema_problem(conn)
            if problem is not None:
                raise NoDirectRead(problem)
            return read(conn)
        except sqlite3.Error as exc:
            busy = "locked" in str(exc) or "busy" in str(exc)
            raise BackendError(f"mnemon store {self.path}: {exc}", transient=busy) from exc
        finally:
            conn.close()

    async def probe(self) -> str:
        """Whether reads go to the file (for health); raises NoDirectRead saying why not."""
        if not self.enabled:
            return "off by configuration: reads use the mnemon CLI"

        def probe(conn: sqlite3.Connection | None) -> str:
            if conn is None:
                return f"no store file yet at {self.path}"
            return f"by-id, graph and entity reads from {self.path} (read-only)"

        try:
            return await anyio.to_thread.run_sync(self._read, probe, abandon_on_cancel=True)
        except NoDirectRead as exc:
            raise NoDirectRead(f"store file not read directly ({exc}); reads use the CLI") from exc


# ---------------------------------------------------------------- reads (run by StoreFile.read)


def schema_problem(conn: sqlite3.Connection) -> str | None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        return f"schema version {version} is newer than {SCHEMA_VERSION}"
    for table, needed in (("insights", INSIGHT_COLUMNS), ("edges", EDGE_COLUMNS)):
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        missing = needed - columns
        if missing:
            return f"table {table} lacks {', '.join(sorted(missing))}"
    return None


def _row(row: Sequence[Any]) -> Json:
    return dict(zip(_KEYS, row, strict=True))


def rows_by_id(conn: sqlite3.Connection | None, ids: Sequence[str]) -> dict[str, Json]:
    """The live insights among `ids`, as dicts keyed by id."""
    found: dict[str, Json] = {}
    if conn is None:
        return found
    for start in range(0, len(ids), SQL_CHUNK):
        chunk = list(ids[start : start + SQL_CHUNK])
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT {_COLS} FROM insights WHERE id IN ({marks}) AND deleted_at IS NULL"
        found.update((row[0], _row(row)) for row in conn.execute(sql, chunk))
    return found


def walk(conn: sqlite3.Connection | None, request: kit.Walk) -> list[Neighbor]:
    """Breadth-first over the edges table, both directions, live memories only; within a hop
    the strongest edge first, then the nearest in time (what `related` does, plus weights,
    the node each neighbour was reached through, and a limit)."""
    if conn is None:
        return []
    kinds = sorted(request.allowed) if request.allowed is not None else []

    def reach(frontier: Mapping[str, Json]) -> Iterator[kit.Reach]:
        nodes = list(frontier)
        for start in range(0, len(nodes), SQL_CHUNK):
            chunk = nodes[start : start + SQL_CHUNK]
            marks = ",".join("?" * len(chunk))
            sql = (
                "SELECT source_id, target_id, edge_type, weight FROM edges"
                f" WHERE (source_id IN ({marks}) OR target_id IN ({marks}))"
            )
            args: list[Any] = [*chunk, *chunk]
            if kinds:
                sql += f" AND edge_type IN ({','.join('?' * len(kinds))})"
                args += kinds
            for src, dst, kind, weight in conn.execute(sql, args):
                w = float(weight) if weight is not None else 0.0
                yield src, dst, str(kind), w
                yield dst, src, str(kind), w

    def nearest(cand: str, row: Json, via: Json) -> tuple[float, str]:
        return abs(_epoch(row) - _epoch(via)), cand

    return kit.walk_strongest_first(
        request,
        load=lambda ids: rows_by_id(conn, ids),
        reach=reach,
        memory=to_memory,
        tie_break=nearest,
    )


Anchor = tuple[int, str]  # a listing position: the rowid and id of the last row handed out


def list_page(
    conn: sqlite3.Connection | None, anchor: Anchor | None, limit: int
) -> tuple[list[Json], Anchor | None]:
    """Live insights after `anchor` in the order they were inserted (rowid), at most `limit`,
    and the anchor to go on from. Rows are never deleted but soft-deleted, so a new row comes
    after every older one; should the anchor's row be gone or hold another id (the table was
    rebuilt, rowids renumbered), the listing starts over rather than skip a row."""
    if conn is None:
        return [], anchor
    start = 0
    if anchor is not None:
        found = conn.execute("SELECT id FROM insights WHERE rowid = ?", (anchor[0],)).fetchone()
        start = anchor[0] if found is not None and found[0] == anchor[1] else 0
    rows = conn.execute(
        f"SELECT rowid, {_COLS} FROM insights WHERE rowid > ? AND deleted_at IS NULL"
        " ORDER BY rowid LIMIT ?",
        (start, limit),
    ).fetchall()
    if not rows:
        return [], anchor
    return [_row(r[1:]) for r in rows], (int(rows[-1][0]), str(rows[-1][1]))


def _epoch(row: Json) -> float:
    when = parse_time(row.get("created_at"))
    return when.timestamp() if when is not None else 0.0


def entity_names(conn: sqlite3.Connection | None, limit: int) -> list[str]:
    """Entity names of live insights, the most used first."""
    if conn is None:
        return []
    sql = (
        "SELECT je.value, count(*) AS n FROM insights i, json_each(i.entities) je"
        " WHERE i.deleted_at IS NULL AND je.type = 'text' AND je.value != ''"
        " GROUP BY je.value ORDER BY n DESC, je.value LIMIT ?"
    )
    return [str(name) for name, _ in conn.execute(sql, (limit,))]


def edge_between(
    conn: sqlite3.Connection | None, source: str, target: str, kind: str
) -> Edge | bool:
    """The edge of `kind` Mnemon already holds between the two, either way (False: none)."""
    if conn is None:
        return False
    row = conn.execute(
        "SELECT source_id, target_id, weight, metadata FROM edges WHERE edge_type = ?"
        " AND ((source_id = ? AND target_id = ?) OR (source_id = ? AND target_id = ?))"
        " ORDER BY source_id = ? DESC LIMIT 1",
        (kind, source, target, target, source, source),
    ).fetchone()
    if row is None:
        return False
    try:
        meta = json.loads(row[3] or "{}")
    except ValueError:
        meta = {}
    return Edge(
        source_id=row[0],
        target_id=row[1],
        type=kind,
        weight=min(max(float(row[2] or 0.0), 0.0), 1.0),
        meta={str(k): str(v) for k, v in meta.items()} if isinstance(meta, dict) else {},
    )


# What marks a correction of `e.target_id`: a `supersedes` edge into it, or a `semantic` edge
# into it that names it under `supersedes` (builds without that edge type), from a live
# memory, looked up by key after the edges found by target (a join let SQLite start from every
# live insight instead: seconds at 10k memories).
CORRECTION = """(e.edge_type = 'supersedes' OR (e.edge_type = 'semantic'
    AND json_valid(e.metadata) AND json_extract(e.metadata, '$.supersedes') = e.target_id))
  AND EXISTS (SELECT 1 FROM insights s WHERE s.id = e.source_id AND s.deleted_at IS NULL)"""
CORRECTED = f"EXISTS (SELECT 1 FROM edges e WHERE e.target_id = i.id AND {CORRECTION})"


def exact_copies(conn: sqlite3.Connection | None, contents: Sequence[str]) -> dict[str, str]:
    """The current insight holding each of `contents` byte for byte (the oldest when several
    do), keyed by content: the repeats a write skips (Mnemon's `--no-diff` would insert
    them). A memory a later one corrected does not count: writing its text again is a
    reversal, a new fact."""
    found: dict[str, str] = {}
    wanted = list(dict.fromkeys(contents))
    if conn is None:
        return found
    for start in range(0, len(wanted), SQL_CHUNK):
        chunk = wanted[start : start + SQL_CHUNK]
        marks = ",".join("?" * len(chunk))
        sql = (
            f"SELECT content, id FROM insights i WHERE content IN ({marks})"
            f" AND deleted_at IS NULL AND NOT {CORRECTED} ORDER BY rowid DESC"
        )
        found.update((str(content), str(mem_id)) for content, mem_id in conn.execute(sql, chunk))
    return found


# When: the correcting memory's own time (a memory written with its `created_at` corrects as
# of then, as on every store), else the edge's (when the link was written).
SUPERSEDED_BY = (
    "SELECT e.target_id, e.source_id,"
    " COALESCE((SELECT s.created_at FROM insights s WHERE s.id = e.source_id), e.created_at)"
    f" FROM edges e WHERE e.target_id IN ({{marks}}) AND {CORRECTION}"
)


def superseded_by(
    conn: sqlite3.Connection | None, ids: Sequence[str]
) -> dict[str, tuple[str, datetime | None]]:
    """For each of `ids` a live memory corrected, that memory and when: a `supersedes` edge
    into it, or (builds without that edge type) a `semantic` edge whose metadata names it
    under `supersedes` (`MnemonBackend.supersede` writes those). The latest correction wins."""
    marks: dict[str, tuple[str, datetime | None]] = {}
    wanted = list(dict.fromkeys(ids))
    if conn is None:
        return marks
    for start in range(0, len(wanted), SQL_CHUNK):
        chunk = wanted[start : start + SQL_CHUNK]
        sql = SUPERSEDED_BY.format(marks=",".join("?" * len(chunk)))
        for old, new, when in conn.execute(sql, chunk):
            moment = parse_time(when)
            known = marks.get(str(old))
            if known is None or (moment is not None and (known[1] is None or moment > known[1])):
                marks[str(old)] = (str(new), moment)
    return marks


def marked(conn: sqlite3.Connection | None, memories: list[Memory]) -> list[Memory]:
    """`memories` with `superseded_by` and `superseded_at` where the store file records a
    correction of them (`superseded_by`)."""
    marks = superseded_by(conn, [m.id for m in memories]) if memories else {}
    if not marks:
        return memories
    return [
        m.model_copy(update={"superseded_by": marks[m.id][0], "superseded_at": marks[m.id][1]})
        if m.id in marks
        else m
        for m in memories
    ]


_EDGE_PAGE = (
    "SELECT e.source_id, e.target_id, e.edge_type, e.weight, e.metadata FROM edges e"
    " JOIN insights s ON s.id = e.source_id AND s.deleted_at IS NULL"
    " JOIN insights t ON t.id = e.target_id AND t.deleted_at IS NULL"
    " WHERE (e.source_id, e.target_id, e.edge_type) > (?, ?, ?)"
    " ORDER BY e.source_id, e.target_id, e.edge_type LIMIT ?"
)


def edge_page(
    conn: sqlite3.Connection | None, cursor: str | None, limit: int
) -> tuple[list[Edge], str | None]:
    """Edges between live insights in key order after `cursor` (`kit.edge_cursor`), with
    their metadata's plain values."""
    if conn is None:
        return [], cursor
    rows = conn.execute(_EDGE_PAGE, (*kit.edge_cursor(cursor), max(1, limit))).fetchall()
    edges = []
    for src, dst, kind, weight, meta in rows:
        try:
            found = json.loads(meta) if isinstance(meta, str) and meta else {}
        except json.JSONDecodeError:
            found = {}
        plain = {
            str(k): v
            for k, v in (found.items() if isinstance(found, dict) else ())
            if v is None or isinstance(v, str | int | float | bool)
        }
        w = min(1.0, max(0.0, float(weight))) if weight is not None else 1.0
        edges.append(Edge(source_id=src, target_id=dst, type=str(kind), weight=w, meta=plain))
    return edges, json.dumps([str(v) for v in rows[-1][:3]]) if rows else cursor


def snapshot(source: Path, target: Path) -> None:
    """A consistent copy of the store file `source` at `target` (SQLite's backup, read-only
    on the source: a live WAL store is copied as any reader sees it)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(source.as_uri() + "?mode=ro", uri=True, timeout=2.0)
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
        finally:
            dst.close()
    except sqlite3.Error as exc:
        raise BackendError(f"mnemon store {source} cannot be copied: {exc}") from exc
    finally:
        src.close()
