"""What earlier imports did, per record: the import ledger that makes `orchestrator import`
idempotent.

One row per record key an import has seen (`transfer.sources.Incoming.key`): the memory it
became, or the one it was found to repeat, and what was done. A record whose row names a
memory the store still holds is skipped at once ("imported before"), so importing the same
source twice adds nothing, even where the write path would judge a record differently the
second time (a correction made since, a record that restated one now superseded). A row
whose memory is gone (a store emptied, another store behind the same data dir) does not
count: the record is imported again. Records refused or skipped by the source itself leave
no row. One SQLite file beside the store (`<data_dir>/imports.db`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

from memory_orchestrator.errors import TransferError

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS imported (key TEXT PRIMARY KEY, memory_id TEXT NOT NULL,"
    " action TEXT NOT NULL, source TEXT NOT NULL, at TEXT NOT NULL)"
)
_CHUNK = 500


class Ledger:
    """The ledger in one SQLite file (`path=None`: in memory only, for one run)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        try:
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path or ":memory:", timeout=30.0)
            self._db.execute(_SCHEMA)
            self._db.commit()
        except (sqlite3.Error, OSError) as exc:
            raise TransferError(f"the import ledger {path} cannot be used: {exc}") from exc

    def seen(self, keys: Sequence[str]) -> dict[str, tuple[str, str]]:
        """key -> (memory id, action) for the keys an earlier import recorded."""
        found: dict[str, tuple[str, str]] = {}
        try:
            for start in range(0, len(keys), _CHUNK):
                chunk = list(keys[start : start + _CHUNK])
                marks = ",".join("?" * len(chunk))
                sql = f"SELECT key, memory_id, action FROM imported WHERE key IN ({marks})"
                found.update((k, (m, a)) for k, m, a in self._db.execute(sql, chunk))
        except sqlite3.Error as exc:
            raise TransferError(f"the import ledger {self.path} cannot be read: {exc}") from exc
        return found

    def record(self, rows: Sequence[tuple[str, str, str]], source: str) -> None:
        """(key, memory id, action) rows, committed together."""
        now = datetime.now(UTC).isoformat()
        try:
            with self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO imported VALUES (?, ?, ?, ?, ?)",
                    [(k, m, a, source, now) for k, m, a in rows],
                )
        except sqlite3.Error as exc:
            raise TransferError(f"the import ledger {self.path} cannot be written: {exc}") from exc

    def close(self) -> None:
        with closing(self._db):
            pass
