"""Forgotten memories: the orchestrator's own tombstones, kept beside the store.

Forgetting a memory (`memory_forget`, `orchestrator forget`, the inspector's button) deletes
nothing in the store: its id is written here, with why and when, and every read leaves it out
(`service/forgetting.py`, the one place the store's answers come back through). Undo removes
the row. Erasing the memory from the store for good is a separate step (`purge`, on stores
that can delete), after which the row stays, marked purged, and undo is refused.

One SQLite file, `<data_dir>/forgotten.db`, shared by every process of the data dir (with
`[shared] state = "postgres"`, the `forgotten` table of the shared database: `postgres/state.py`).
A reader keeps the set of forgotten ids in memory and, before each use, asks whether another
process changed it: SQLite's `PRAGMA data_version`, which moves when another connection
commits (this process updates its own copy as it writes). The file is created by the first
forget; until then reading costs one `stat`.

`entries()` is the read API for whoever must carry the tombstones elsewhere (an export).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memory_orchestrator.errors import ForgetError

__all__ = ["Tombstone", "Tombstones"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS forgotten (
    memory_id    TEXT PRIMARY KEY,
    store        TEXT NOT NULL,
    reason       TEXT NOT NULL,
    forgotten_at TEXT NOT NULL,
    purged_at    TEXT
);
"""
_COLS = "memory_id, store, reason, forgotten_at, purged_at"
Row = tuple[str, str, str, str, str | None]


@dataclass(frozen=True)
class Tombstone:
    """One forgotten memory: its id in the store, why, when, and whether it was purged."""

    memory_id: str
    store: str  # the store it was forgotten in (`embedded`, `mnemon`, ...)
    reason: str
    forgotten_at: datetime
    purged_at: datetime | None = None  # erased from the store for good: undo is refused

    def row(self) -> Row:
        purged = self.purged_at.isoformat() if self.purged_at else None
        return (self.memory_id, self.store, self.reason, self.forgotten_at.isoformat(), purged)


def tombstone(row: Sequence[object]) -> Tombstone:
    memory_id, store, reason, at, purged = row
    return Tombstone(
        memory_id=str(memory_id),
        store=str(store),
        reason=str(reason),
        forgotten_at=_moment(at),
        purged_at=_moment(purged) if purged is not None else None,
    )


def _moment(value: object) -> datetime:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def now() -> datetime:
    return datetime.now(UTC)


class Tombstones:
    """The forgotten memories of one data dir (`path=None`: in memory only, for tests and
    throwaway orchestrators). Thread-safe; every method may raise `ForgetError`.

    `blocking` is False: `ids()` costs a `PRAGMA data_version` (microseconds) and may be
    called on the event loop. The shared version (`PgTombstones`) makes a round trip and
    sets it True."""

    blocking = False

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._seen: object = None  # the data_version the cached ids were read at
        self._ids: frozenset[str] = frozenset()
        self.generation = 0  # moves whenever the set this process sees changes

    # ------------------------------------------------------------------ reads

    def ids(self) -> frozenset[str]:
        """The ids forgotten now (purged ones included), by this process or any other."""
        with self._lock:
            db = self._conn(create=False)
            if db is None:
                return self._ids
            try:
                version = db.execute("PRAGMA data_version").fetchone()[0]
                if version != self._seen:
                    self._reload(db)
                    self._seen = version
            except sqlite3.Error as exc:
                raise self._error(exc) from exc
            return self._ids

    def entries(self, ids: Iterable[str] | None = None) -> list[Tombstone]:
        """Every tombstone, oldest first (or those of `ids`)."""
        wanted = None if ids is None else list(dict.fromkeys(ids))
        rows = self._select(wanted)
        return [tombstone(r) for r in rows]

    # ------------------------------------------------------------------ writes

    def add(self, entries: Sequence[Tombstone]) -> list[str]:
        """Keep `entries` (an id already forgotten keeps its first tombstone); the ids added."""
        if not entries:
            return []
        added = self._write(
            "INSERT INTO forgotten (" + _COLS + ") VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (memory_id) DO NOTHING RETURNING memory_id",
            [t.row() for t in entries],
        )
        return [i for i in (t.memory_id for t in entries) if i in added]

    def remove(self, ids: Sequence[str]) -> list[str]:
        """Lift the tombstones of `ids` that were not purged; the ids restored."""
        removed = self._write(
            "DELETE FROM forgotten WHERE memory_id = ? AND purged_at IS NULL RETURNING memory_id",
            [(i,) for i in dict.fromkeys(ids)],
        )
        return [i for i in ids if i in removed]

    def mark_purged(self, ids: Sequence[str], at: datetime) -> None:
        self._write(
            "UPDATE forgotten SET purged_at = ? WHERE memory_id = ? RETURNING memory_id",
            [(at.isoformat(), i) for i in dict.fromkeys(ids)],
        )

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._db.close()
                self._db = None

    # ------------------------------------------------------------------ storage (overridden
    # by the shared version)

    def _select(self, ids: list[str] | None) -> list[Row]:
        with self._lock:
            db = self._conn(create=False)
            if db is None:
                return []
            try:
                if ids is None:
                    sql = f"SELECT {_COLS} FROM forgotten ORDER BY forgotten_at, memory_id"
                    return list(db.execute(sql).fetchall())
                out: list[Row] = []
                for start in range(0, len(ids), 500):
                    chunk = ids[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    sql = f"SELECT {_COLS} FROM forgotten WHERE memory_id IN ({marks})"
                    out.extend(db.execute(sql, chunk).fetchall())
                return sorted(out, key=lambda r: (r[3], r[0]))
            except sqlite3.Error as exc:
                raise self._error(exc) from exc

    def _write(self, sql: str, rows: list[tuple[object, ...]]) -> set[str]:
        """Run `sql` once per row in one transaction; the ids it returned."""
        with self._lock:
            db = self._conn(create=True)
            assert db is not None
            done: set[str] = set()
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    for args in rows:
                        done.update(str(r[0]) for r in db.execute(sql, args).fetchall())
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
                self._reload(db)
                self._seen = db.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.Error as exc:
                raise self._error(exc) from exc
            return done

    def _reload(self, db: sqlite3.Connection) -> None:
        ids = frozenset(str(r[0]) for r in db.execute("SELECT memory_id FROM forgotten"))
        if ids != self._ids:
            self._ids = ids
            self.generation += 1

    def _conn(self, create: bool) -> sqlite3.Connection | None:
        if self._db is not None:
            return self._db
        path = self.path
        if path is not None and not create and not path.exists():
            return None  # nothing forgotten yet: the file is made by the first forget
        try:
            if path is None:
                db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(
                    path, timeout=5.0, check_same_thread=False, isolation_level=None
                )
                # a rollback journal, not WAL, as the outbox and the traces (an immutable
                # file then fails a write instead of killing the process)
                with contextlib.suppress(sqlite3.OperationalError):
                    db.execute("PRAGMA journal_mode=DELETE")
                db.execute("PRAGMA synchronous=FULL")  # a forget survives a power cut
            db.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise self._error(exc) from exc
        self._db = db
        return db

    def _error(self, exc: BaseException) -> ForgetError:
        return ForgetError(f"forgotten memories {self.path or ':memory:'}: {exc}")
