"""The semantic index's vectors kept on disk, so that a restart does not embed every memory
again.

One SQLite file per model under the data dir (`<data_dir>/semantic/<model>.db`): a row per
memory (its id, a digest of the text that was embedded, the vector as float32 bytes) and the
model that made them (name, fingerprint of its weights, dimension). It is a cache of a cache,
never the source of truth: each batch of new vectors is one transaction (a crash loses at most
the batch being written, never the file), and a file that cannot be read, was written by
another model or another format, or holds a malformed row is logged, dropped and rebuilt
from the memories as they are embedded again. When the file cannot be written (a read-only
data dir, a full disk) the index goes on in memory and says so once in the log.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sqlite3
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]
else:
    Matrix = Any

__all__ = ["Kept", "VectorFile", "vector_path"]

log = logging.getLogger(__name__)

FORMAT = "1"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS vectors (
    id TEXT PRIMARY KEY,
    digest BLOB NOT NULL,
    vector BLOB NOT NULL
);
"""


def vector_path(data_dir: Path, model: str) -> Path:
    """Where the vectors of `model` are kept under `data_dir`."""
    return data_dir / "semantic" / f"{re.sub(r'[^A-Za-z0-9._-]+', '_', model)}.db"


@dataclass(frozen=True)
class Kept:
    """The vectors read back from the file, in the order they were first written: row `i`
    of `matrix` is the vector of `ids[i]` (the matrix may have more rows, zeros, room for
    the index to grow into)."""

    ids: list[str]
    digests: list[bytes]
    matrix: Matrix


class VectorFile:
    """Memory id -> (text digest, vector) for one model, in one SQLite file."""

    def __init__(self, path: Path, *, model: str, fingerprint: str) -> None:
        self.path = path
        self._meta = {"format": FORMAT, "model": model, "fingerprint": fingerprint}
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()  # the feed writes from a worker thread, queries do not

    def load(self, *, limit: int, spare: Callable[[int], int] = int) -> Kept | None:
        """The kept vectors (at most `limit`), or None when there are none usable; a file
        that cannot be used is logged and started anew. The matrix has `spare(rows)` rows
        (room to grow), and is the only copy made: each vector is read into its row."""
        with self._lock:
            try:
                return self._read(limit, spare)
            except OSError as exc:  # its folder cannot be made
                log.warning("semantic vectors cannot be kept in %s (%s)", self.path, exc)
                return None
            except (sqlite3.Error, ValueError) as exc:
                log.warning("semantic vectors in %s are unusable (%s): rebuilding", self.path, exc)
            self._close()
            self._remove()
            try:
                self._open()
            except (sqlite3.Error, OSError) as exc:
                log.warning(
                    "semantic vectors cannot be kept in %s (%s): the index stays in memory",
                    self.path,
                    exc,
                )
            return None

    def save(self, rows: Sequence[tuple[str, bytes, Matrix]]) -> None:
        """Keep these (id, digest, vector) rows, replacing an id's older vector, in one
        transaction."""
        if not rows:
            return
        with self._lock:
            if self._db is None:
                return  # unusable: already logged
            try:
                with self._db:
                    self._db.executemany(
                        "INSERT INTO vectors (id, digest, vector) VALUES (?, ?, ?) "
                        "ON CONFLICT (id) DO UPDATE SET digest = excluded.digest, "
                        "vector = excluded.vector",
                        [(i, d, v.astype("<f4").tobytes()) for i, d, v in rows],
                    )
            except sqlite3.Error as exc:
                log.warning(
                    "semantic vectors not kept in %s (%s): the index goes on in memory",
                    self.path,
                    exc,
                )
                self._close()

    def close(self) -> None:
        with self._lock:
            self._close()

    # ------------------------------------------------------------------ internals

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, check_same_thread=False, timeout=2.0)
        try:
            # A rollback journal, not WAL: WAL maps the -shm file into memory, and a write to
            # a mapped page of a file made immutable kills the process (SIGBUS); with a
            # journal such a file gives an error like any other (the index goes on in memory)
            with contextlib.suppress(sqlite3.OperationalError):  # an old WAL file in use
                db.execute("PRAGMA journal_mode=DELETE")
            db.execute("PRAGMA synchronous=NORMAL")
            with db:
                db.executescript(_SCHEMA)
            found = dict(db.execute("SELECT key, value FROM meta").fetchall())
            if found != self._meta:
                if found:
                    log.info(
                        "semantic vectors in %s were made by %s: starting anew",
                        self.path,
                        found.get("model", "another model"),
                    )
                with db:
                    db.execute("DELETE FROM vectors")
                    db.execute("DELETE FROM meta")
                    db.executemany("INSERT INTO meta VALUES (?, ?)", list(self._meta.items()))
        except BaseException:
            db.close()
            raise
        self._db = db
        # closed with this object, or at exit, when no one called `close` (the orchestrator
        # has no close hook for its derived indexes)
        weakref.finalize(self, db.close)
        return db

    def _read(self, limit: int, spare: Callable[[int], int]) -> Kept | None:
        import numpy as np

        db = self._db or self._open()
        (check,) = db.execute("PRAGMA quick_check").fetchone()
        if check != "ok":
            raise ValueError(f"quick_check: {check}")
        ids: list[str] = []
        digests: list[bytes] = []
        (count,) = db.execute("SELECT count(*) FROM vectors").fetchone()
        count = min(int(count), limit)
        matrix: Matrix | None = None
        query = "SELECT id, digest, vector FROM vectors ORDER BY rowid LIMIT ?"
        for mem_id, digest, blob in db.execute(query, (count,)):
            if not (isinstance(mem_id, str) and isinstance(digest, bytes)):
                raise ValueError(f"a malformed row ({mem_id!r})")
            if not isinstance(blob, bytes) or not blob or len(blob) % 4:
                raise ValueError(f"the vector of {mem_id!r} is not float32")
            if matrix is None:
                matrix = np.zeros((max(spare(count), count), len(blob) // 4), dtype=np.float32)
            if len(blob) != 4 * matrix.shape[1]:
                raise ValueError(f"the vector of {mem_id!r} is not of the others' size")
            row = np.frombuffer(blob, dtype="<f4")
            if not np.isfinite(row).all():
                raise ValueError(f"the vector of {mem_id!r} holds NaN or infinity")
            matrix[len(ids)] = row
            ids.append(mem_id)
            digests.append(digest)
        if not ids or matrix is None:
            return None
        return Kept(ids, digests, matrix)

    def _close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    def _remove(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):
                Path(f"{self.path}{suffix}").unlink()
