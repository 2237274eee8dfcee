"""`[mnemon] readonly = true`: reads that leave no trace, and no write ever sent.

Mnemon's `--readonly` is meant to open the store read-only. Some builds do not: the June 2026
source (`../shared/mnemon`) opens `<file>?mode=ro&_pragma=journal_mode(OFF)` without the
`file:` prefix, so its driver drops `mode=ro`: a `--readonly remember` writes, and a
`--readonly` read switches the store out of WAL mode. Which kind a binary is, is learned
from what it does, once, in a scratch data dir: `remember` there, then `--readonly remember`;
the binary honours `--readonly` when the second write did not land. A binary that does not
is never given `--readonly`: its reads run against a snapshot of the store (SQLite's backup,
taken again whenever the store file has changed), so that their access-count writes land in
the copy. Writes are refused by the adapter itself, before any process, on every build.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

import anyio.to_thread

from memory_orchestrator.backends.mnemon.process import MnemonRunner, PerLoop, error_message
from memory_orchestrator.backends.mnemon.store_file import snapshot
from memory_orchestrator.errors import BackendError

PROBE = "readonly probe: this memory is written only into a scratch store"
Signature = tuple[tuple[int, int], ...]


def refusal(command: str) -> BackendError:
    """Mnemon's own wording, for every build (some would write)."""
    return BackendError(
        f"{command} is unavailable with --readonly: database writes are disabled"
        " ([mnemon] readonly = true)"
    )


def _signature(db: Path) -> Signature:
    parts = []
    for path in (db, db.with_name(db.name + "-wal")):
        try:
            stat = path.stat()
        except OSError:
            parts.append((0, 0))
        else:
            parts.append((stat.st_mtime_ns, stat.st_size))
    return tuple(parts)


class ReadOnly:
    """Where CLI reads go under `readonly = true` (see the module docstring)."""

    def __init__(
        self, runner: MnemonRunner, db: Path, store: str, note: Callable[[str], None]
    ) -> None:
        self._runner, self._db, self._store, self._note = runner, db, store, note
        self.honoured: bool | None = None  # None: not probed yet
        self._root: Path | None = None
        self._copy: Path | None = None
        self._taken: Signature | None = None
        self._taking = 0
        self._lock = PerLoop(anyio.Lock)

    async def reads(self, data_dir: Path) -> tuple[Path, bool]:
        """The data dir CLI reads run against, and whether to pass `--readonly`."""
        async with self._lock.get():
            return await self._reads(data_dir)

    async def _reads(self, data_dir: Path) -> tuple[Path, bool]:
        if self.honoured is None:
            self.honoured = await self._probe()
            if not self.honoured:
                self._note(
                    "this mnemon's --readonly still writes (and takes the store out of WAL"
                    " mode): it is never passed; reads run on a snapshot of the store"
                )
        if self.honoured:
            return data_dir, True
        return await self._snapshot(), False

    async def _probe(self) -> bool:
        binary = str(self._runner.binary())
        with tempfile.TemporaryDirectory(prefix="mnemon-readonly-probe-") as folder:
            head = [binary, "--data-dir", folder]
            timeout = self._runner.settings.timeout_s
            code, _, err = await self._runner.spawn(
                [*head, "remember", "--", PROBE], "remember", timeout
            )
            if code != 0:
                raise BackendError(f"mnemon remember failed (exit {code}): {error_message(err)}")
            code, _, _ = await self._runner.spawn(
                [*head, "--readonly", "remember", "--", PROBE + " (again)"], "remember", timeout
            )
            db = Path(folder) / "data" / "default" / "mnemon.db"
            with sqlite3.connect(db.as_uri() + "?mode=ro", uri=True) as conn:
                (count,) = conn.execute("SELECT count(*) FROM insights").fetchone()
            conn.close()
        return code != 0 and count == 1

    async def _snapshot(self) -> Path:
        """A data dir holding a copy of the store as it is now: a new copy (in a new folder;
        the one before is removed, a process still reading it keeps its open files) only when
        the store file or its WAL changed since the last one."""
        if not self._db.is_file():
            raise BackendError(f"open database: database not found: {self._db}")
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="mnemon-readonly-"))
        now = _signature(self._db)
        if self._copy is None or now != self._taken:
            self._taking += 1
            fresh = self._root / str(self._taking)
            await anyio.to_thread.run_sync(
                snapshot, self._db, fresh / "data" / self._store / "mnemon.db"
            )
            if self._copy is not None:
                shutil.rmtree(self._copy, ignore_errors=True)
            self._copy, self._taken = fresh, now
        return self._copy

    def close(self) -> None:
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root, self._copy, self._taken = None, None, None
