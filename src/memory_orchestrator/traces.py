"""Trace storage: every request's trace, kept in SQLite so it can be explained and replayed."""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from datetime import UTC, datetime
from pathlib import Path

from memory_orchestrator.models import Trace


class TraceStore:
    """Keeps the newest `keep` traces. With `path=None` they live in memory only."""

    def __init__(self, path: Path | None, *, keep: int = 5000) -> None:
        self._keep = keep
        self._lock = threading.Lock()
        self._memory: OrderedDict[str, str] = OrderedDict()
        self._db: sqlite3.Connection | None = None
        self._writes = 0
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=2000")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS traces (seq INTEGER PRIMARY KEY AUTOINCREMENT,"
                " trace_id TEXT UNIQUE NOT NULL, tool TEXT, created_at TEXT, body TEXT NOT NULL)"
            )

    def save(self, trace: Trace) -> None:
        body = trace.model_dump_json()
        with self._lock:
            if self._db is None:
                self._memory[trace.trace_id] = body
                while len(self._memory) > self._keep:
                    self._memory.popitem(last=False)
                return
            self._db.execute(
                "INSERT OR REPLACE INTO traces (trace_id, tool, created_at, body) VALUES (?,?,?,?)",
                (trace.trace_id, trace.tool, trace.created_at.isoformat(), body),
            )
            self._writes += 1
            if self._writes % 100 == 0:
                self._db.execute(
                    "DELETE FROM traces WHERE seq <= (SELECT MAX(seq) FROM traces) - ?",
                    (self._keep,),
                )

    def get(self, trace_id: str) -> Trace | None:
        with self._lock:
            if self._db is None:
                body = self._memory.get(trace_id)
            else:
                row = self._db.execute(
                    "SELECT body FROM traces WHERE trace_id = ?", (trace_id,)
                ).fetchone()
                body = row[0] if row else None
        return Trace.model_validate_json(body) if body else None

    def recent(self, limit: int = 20) -> list[Trace]:
        with self._lock:
            if self._db is None:
                bodies = list(self._memory.values())[-limit:][::-1]
            else:
                rows = self._db.execute(
                    "SELECT body FROM traces ORDER BY seq DESC LIMIT ?", (limit,)
                ).fetchall()
                bodies = [r[0] for r in rows]
        return [Trace.model_validate_json(b) for b in bodies]

    def since(self, start: datetime | None = None) -> list[Trace]:
        """Every kept trace created at or after `start` (all when None), oldest first."""
        with self._lock:
            if self._db is None:
                bodies = list(self._memory.values())
            else:
                rows = self._db.execute("SELECT body FROM traces ORDER BY seq").fetchall()
                bodies = [r[0] for r in rows]
        traces = [Trace.model_validate_json(b) for b in bodies]
        if start is None:
            return traces
        floor = start if start.tzinfo else start.replace(tzinfo=UTC)
        return [t for t in traces if t.created_at >= floor]

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
