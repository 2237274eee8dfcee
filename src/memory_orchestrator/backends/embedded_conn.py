"""The embedded store's connections and its file on disk (see `embedded.py`).

- Readers and the one writer have connections of their own (WAL): a read never waits for a
  write, and a write waits for another process's lock at most `write_wait_ms`, then fails
  transiently ("database is locked"), so the write path can queue it.
- Before each use the file on disk is checked: it must be the file that was opened (device
  and inode) and writable (the file, its -wal and its -shm). A file deleted while open is
  refused until a file is put back at its path: a write is never acknowledged into a file
  nobody will read again. A replaced file is reopened. Until then the old file's writer is
  kept open (the anchor), so its inode cannot be reused: a file at the path with the same
  device and inode is then really the same file put back (moved away and back, linked back),
  and its WAL is its own. A file that turned read-only or
  immutable is refused before SQLite touches it: SQLite maps the -shm file into memory, and
  writing to a mapped page of a file made immutable kills the process with SIGBUS (ext4),
  even for a read (a reader writes its read mark there) or a close (the last one
  checkpoints). So such a file's connections are never closed, only left behind.
- After "file is not a database" or "database disk image is malformed" the connections are
  dropped and the file is opened anew: at once when it changed on disk (a repair, a copy put
  back), else after a backoff that doubles up to `backoff_s[1]`.
- `opened` and `faults` count the files opened and the I/O errors met: the integrity check
  (`embedded_check.py`) runs again when either moved.
- `read_now` runs a short read on the caller's thread (an event loop's) when nothing can
  make it wait: the file fine without waiting for the writer's lock, an idle reader at hand,
  SQLite told to give up at once on a lock (busy timeout 0) and after a time budget; else it
  says "not now" and the caller reads through a worker thread. A worker thread's round trip
  (wake it, hand the answer back) costs more than such a read itself.
- `version` tells, on the caller's thread and without waiting, whether anything changed: a
  token from the file's identity and shape on disk, the connections' generation and SQLite's
  `PRAGMA data_version` on a connection kept for it (it moves when any other connection, of
  this process or another, commits).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, TypeVar

from memory_orchestrator.backends.embedded_sql import store_error
from memory_orchestrator.errors import BackendError

T = TypeVar("T")
Sig = tuple[int, int, int, int]  # device, inode, size, mtime (ns)
Version = tuple[int, int, int, Sig]  # generation, watch connection, data_version, the file

BROKEN = ("SQLITE_NOTADB", "SQLITE_CORRUPT")  # the file must be opened anew
GIVEN_UP = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_INTERRUPT")  # `read_now`: not now
NOT_NOW = object()  # `read_now`'s answer when the read must go through a worker thread
_STEPS = 1000  # SQLite's virtual machine steps between two looks at `read_now`'s budget


def signature(path: Path | str) -> Sig | None:
    """The file's identity and shape on disk; None when nothing is at `path`."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BackendError(f"embedded store {path}: {exc}", transient=True) from exc
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def store_files(path: Path) -> tuple[str, str, str]:
    """The store's files: the file, its -wal and its -shm (as strings: checked on every
    call, where making paths costs more than the system calls)."""
    return (str(path), f"{path}-wal", f"{path}-shm")


def unwritable(files: tuple[str, str, str]) -> list[str]:
    """Of the store's files (`store_files`), the names of those that exist and cannot be
    written."""
    # one syscall per file when it can be written (the common case, on every call)
    return [os.path.basename(f) for f in files if not os.access(f, os.W_OK) and os.path.exists(f)]


def set_aside(path: Path, old_inode: int) -> list[str]:
    """Move the -wal and -shm that the file once at `path` (inode `old_inode`) left behind
    out of the way, so that SQLite does not read that WAL as the new file's (it would copy
    the old file's pages into the new one). SQLite deletes them when the last connection
    closes, but not for a file deleted or replaced while open. Left alone while a process
    has them open (a lock on the -shm's DMS byte): then they are the new file's."""
    shm = path.with_name(path.name + "-shm")
    if shm.exists():
        try:
            fd = os.open(shm, os.O_RDWR)
        except OSError:
            return []
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 128)  # SQLite's DMS byte
        except OSError:
            return []  # in use
        finally:
            os.close(fd)  # and the lock with it
    moved: list[str] = []
    for suffix in ("-wal", "-shm"):
        old = path.with_name(path.name + suffix)
        if old.exists():
            aside = old.with_name(f"{old.name}.of-inode-{old_inode}")
            old.replace(aside)
            moved.append(aside.name)
    return moved


class Connection(sqlite3.Connection):
    """A connection that keeps what its reads found while the database stays the same."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._memo: tuple[tuple[int, int], dict[Hashable, Any]] | None = None

    def memo(self) -> dict[Hashable, Any]:
        """A dict for what reads on this connection found, emptied when the database may
        have changed since: a commit from another connection or process (SQLite's
        data_version, which moves for every change it did not make) or a change made on
        this one (its total_changes)."""
        (version,) = self.execute("PRAGMA data_version").fetchone()
        state = (int(version), self.total_changes)
        if self._memo is None or self._memo[0] != state:
            self._memo = (state, {})
        return self._memo[1]


def _leave_open(conn: sqlite3.Connection) -> None:
    """Never close `conn`, not even at exit: its files are not writable, and the last close
    of a WAL connection writes to the mapped -shm (SIGBUS on an immutable file)."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(conn))


class Connections:
    """One writer and a pool of readers over one SQLite file, checked on disk before use."""

    def __init__(
        self,
        path: Path,
        setup: Callable[[sqlite3.Connection], None],
        *,
        busy_ms: int,
        write_wait_ms: int,
        clock: Callable[[], float] = time.monotonic,
        backoff_s: tuple[float, float] = (0.25, 5.0),
    ) -> None:
        self.path = path
        self._files = store_files(path)  # (the file's first: what `signature` looks at)
        self._setup = setup  # pragmas and schema, run once on the writer when a file is opened
        self._busy_ms, self._wait_ms = busy_ms, write_wait_ms
        self._clock, self._backoff = clock, backoff_s
        self._memory = str(path) == ":memory:"  # one connection: readers use the writer
        self._state = threading.Lock()  # guards everything below
        self._writing = threading.Lock()  # one write at a time
        self._writer: sqlite3.Connection | None = None
        self._idle: list[sqlite3.Connection] = []
        self._gen = 0  # bumped when the connections are dropped; stale readers are closed
        self._ident: tuple[int, int] | None = None  # device, inode of the open file
        self._lost: str | None = None  # the file was deleted while open: why calls are refused
        self._gone: tuple[int, int] | None = None  # a file deleted or replaced while open
        self._anchor: sqlite3.Connection | None = None  # that file's writer, held open
        self._reading = 0  # readers in use
        self._failed: tuple[float, Sig | None, str, int] | None = None  # when, sig, why, count
        self._broken = False  # a call met a broken file: drop the connections, open anew
        self._closed = False
        self.event: str | None = None  # the last reopen, reported once by `file_check`
        self.opened = 0  # files opened so far (a reopen counts): the integrity check's cue
        self.faults = 0  # I/O errors met so far: the integrity check's cue too
        self._watching = threading.Lock()  # guards _watch and _watches
        self._watch: tuple[int, sqlite3.Connection] | None = None  # `version`'s, by generation
        self._watches = 0  # watch connections opened: a new one's data_version starts anew
        self.reads_now = 0  # reads `read_now` ran to the end on the caller's thread

    @property
    def writing(self) -> bool:
        return self._writing.locked()

    @property
    def write_wait_s(self) -> float:
        return self._wait_ms / 1000

    # ------------------------------------------------------------------ use

    def read(self, fn: Callable[[sqlite3.Connection], T], *, fresh: bool = False) -> T:
        """`fn` on a reader connection; `fresh`: a new one, whose cache holds no page yet
        (it reads the file as it is on disk; it joins the pool afterwards)."""
        if self._memory:
            return self.write(fn)
        with self._state:
            fine = self._check()
        if not fine:  # the slow way, with the locks in the writer's order
            with self._writing, self._state:
                self._ready()
        with self._state:
            gen = self._gen
            conn = self._idle.pop() if self._idle and not fresh else None
            self._reading += 1
        try:
            if conn is None:
                conn = self._connect(self._busy_ms, reader=True)
            return fn(conn)
        except sqlite3.Error as exc:
            raise self._failure(exc, gen) from exc
        finally:
            self._give_back(conn, gen)

    def read_now(self, fn: Callable[[sqlite3.Connection], T], budget_s: float) -> T | object:
        """`fn` on an idle reader connection, on this thread, when nothing makes it wait (see
        the module docstring); `NOT_NOW` when something would, or when SQLite met a lock or
        ran past `budget_s` (a read only: the caller runs it again through `read`)."""
        if self._memory:
            return NOT_NOW
        with self._state:
            if not self._idle or not self._check():
                return NOT_NOW
            gen, conn = self._gen, self._idle.pop()
            self._reading += 1
        deadline = time.perf_counter() + budget_s
        try:
            conn.execute("PRAGMA busy_timeout = 0")
            conn.set_progress_handler(lambda: time.perf_counter() > deadline, _STEPS)
            try:
                result = fn(conn)
            finally:
                conn.set_progress_handler(None, 0)
                conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        except sqlite3.Error as exc:
            if getattr(exc, "sqlite_errorname", "") in GIVEN_UP:
                return NOT_NOW
            raise self._failure(exc, gen) from exc
        finally:
            self._give_back(conn, gen)
        self.reads_now += 1
        return result

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` on the writer; raises a transient error when the file was deleted or replaced
        while it ran (the write went to the old file and is not acknowledged)."""
        with self._writing:
            with self._state:
                self._ready()
                gen, conn = self._gen, self._writer
            assert conn is not None
            try:
                result = fn(conn)
            except sqlite3.Error as exc:
                raise self._failure(exc, gen, writing=True) from exc
            if self._memory:
                return result
            sig = signature(self.path)
            if sig is None or sig[:2] != self._ident:
                raise BackendError(
                    f"embedded store {self.path}: the file was deleted or replaced during this"
                    " write, which went to the old file and is not kept",
                    transient=True,
                )
            return result

    def version(self) -> Version | None:
        """A token equal to an earlier one only when nothing committed to the store in
        between (from any connection, of this process or another), the file on disk is the
        same, unchanged in size and time, and was not opened anew; None when that cannot be
        told at once (a lock held, the file gone, replaced, unwritable or broken, the store
        in memory or closed). Never waits: safe on the event loop."""
        if self._memory or not self._state.acquire(blocking=False):
            return None
        try:
            sig, gen = self._on_disk(), self._gen
        except BackendError:
            return None
        finally:
            self._state.release()
        if sig is None or not self._watching.acquire(blocking=False):
            return None
        try:
            if self._watch is None or self._watch[0] != gen:
                if self._watch is not None:
                    self._dispose(self._watch[1])
                self._watch, self._watches = (gen, self._connect(0, reader=True)), self._watches + 1
            changed = int(self._watch[1].execute("PRAGMA data_version").fetchone()[0])
        except (sqlite3.Error, BackendError, OSError):
            if self._watch is not None:
                self._dispose(self._watch[1])
                self._watch = None
            return None
        finally:
            self._watching.release()
        return (gen, self._watches, changed, sig)

    def probe_write_lock(self) -> str | None:
        """None when a write could start now; else why not ("database is locked")."""
        if not self._writing.acquire(blocking=False):
            return None  # our own write is running: the lock is ours
        try:
            with self._state:
                self._ready()
                conn = self._writer
            assert conn is not None
            try:
                conn.execute("PRAGMA busy_timeout = 0")
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    conn.execute("ROLLBACK")
                finally:
                    conn.execute(f"PRAGMA busy_timeout = {self._wait_ms}")
            except sqlite3.Error as exc:
                return str(exc)
            return None
        finally:
            self._writing.release()

    def file_check(self) -> str:
        """What is on disk, for health; raises BackendError when calls are refused."""
        with self._state:
            fine = self._memory or self._check()  # no wait for a write that waits for a lock
        if not fine:
            with self._writing, self._state:
                try:
                    self._ready()
                except BackendError:
                    if self._closed or self._ident is not None or self._lost is not None:
                        raise
                    # not opened: the database checks say why (locked, not a database)
        with self._state:
            event, self.event = self.event, None
            opened = self._memory or self._ident is not None
        if self._memory:
            return "in memory"
        sig = signature(self.path)
        where = f"inode {sig[1]}" if sig is not None else "no file"
        state = "open, writable" if opened else "not open"
        return f"{self.path.name}: {where}, {state}" + (f"; {event}" if event else "")

    def close(self) -> None:
        with self._writing, self._state:
            self._closed = True
            self._drop()
        with self._watching:
            if self._watch is not None:
                self._dispose(self._watch[1])
                self._watch = None

    # ------------------------------------------------------------------ the file on disk

    def _check(self) -> bool:
        """True when the open file is still the one on disk and writable (the caller holds
        `_state`); False when something must be done (`_ready`). Raises when the file is
        there but not writable, or the store is closed."""
        return self._on_disk() is not None

    def _on_disk(self) -> Sig | None:
        """`_check`, with the open file's signature when it is fine."""
        if self._closed:
            raise BackendError(f"embedded store {self.path} is closed")
        if self._ident is None or self._broken:
            return None
        sig = signature(self._files[0])
        if sig is None or sig[:2] != self._ident:
            return None
        bad = unwritable(self._files)
        if bad:
            raise BackendError(
                f"embedded store {self.path}: {', '.join(bad)} not writable (read-only or"
                " immutable); the store is not touched until it is writable again",
                transient=True,
            )
        return sig

    def _ready(self) -> None:
        """Check the file on disk and open it when needed (the caller holds `_writing` and
        `_state`, in that order: the writer may be closed here)."""
        if self._memory:
            if self._closed:
                raise BackendError(f"embedded store {self.path} is closed")
            if self._writer is None:
                self._open()
            return
        if self._check():
            return
        sig = signature(self.path)
        if self._broken:
            self._drop()
        if self._ident is not None:
            self._gone = self._ident
            self._drop(anchor=True)
            if sig is None:
                self._lost = (
                    f"embedded store {self.path}: the file (inode {self._gone[1]}) was deleted"
                    " while open; no write is taken until a store file is put back at this"
                    " path (or the server restarts)"
                )
        if self._lost is not None and sig is None:
            raise BackendError(self._lost, transient=True)
        if self._failed is not None and not self._due(sig):
            raise BackendError(self._failed[2])
        if self._gone is not None and sig is not None:
            same = f"reopened: the same file (inode {sig[1]}) was put back; its WAL was kept"
            self.event = same if sig[:2] == self._gone else self._other_file(sig)
        self._open()
        self._gone = None
        self._release_anchor()

    def _other_file(self, sig: Sig) -> str:
        """Another file is at the path: set the old one's -wal and -shm aside (`set_aside`)
        once nothing of this process uses them; what happened, for health."""
        assert self._gone is not None
        if self._reading:  # their -shm locks would go with the set-aside check's (POSIX)
            raise BackendError(
                f"embedded store {self.path}: the file was replaced; it is opened once the"
                " reads of the old one end",
                transient=True,
            )
        self._release_anchor()  # it moved, so SQLite neither checkpoints nor deletes its WAL
        how = "put back after a deletion" if self._lost else "replaced"
        moved = set_aside(self.path, self._gone[1])
        aside = f"; the old file's {' and '.join(moved)} set aside" if moved else ""
        return f"reopened: the file was {how} (inode {self._gone[1]} -> {sig[1]}){aside}"

    def _release_anchor(self) -> None:
        anchor, self._anchor = self._anchor, None
        if anchor is not None:
            self._dispose(anchor)

    def _due(self, sig: Sig | None) -> bool:
        """Try to open again: the file changed on disk, or the backoff has passed."""
        assert self._failed is not None
        when, seen, _, count = self._failed
        base, cap = self._backoff
        return sig != seen or self._clock() - when >= min(cap, base * 2 ** (count - 1))

    def _open(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            if not self._memory:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = self._connect(self._busy_ms, reader=False)
            self._setup(conn)
            conn.execute(f"PRAGMA busy_timeout = {self._wait_ms}")
        except (sqlite3.Error, OSError, BackendError) as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, BackendError):
                error = exc
            elif isinstance(exc, sqlite3.Error):
                error = store_error(exc, self.path)
            else:
                error = BackendError(f"embedded store {self.path}: {exc}")
            if not error.transient:  # a broken file: tried again after a backoff
                count = self._failed[3] + 1 if self._failed is not None else 1
                sig = None if self._memory else signature(self.path)
                self._failed = (self._clock(), sig, str(error), count)
            raise error from exc
        sig = None if self._memory else signature(self.path)
        self._writer, self._failed, self._lost = conn, None, None
        self._ident = sig[:2] if sig is not None else None
        self.opened += 1

    def _connect(self, busy_ms: int, *, reader: bool) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=busy_ms / 1000,
            isolation_level=None,
            check_same_thread=False,
            factory=Connection,
        )
        conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
        if reader:
            conn.execute("PRAGMA query_only = 1")
        return conn

    def _give_back(self, conn: sqlite3.Connection | None, gen: int) -> None:
        with self._state:
            self._reading -= 1
            if conn is None:
                return
            if gen == self._gen and not self._closed:
                self._idle.append(conn)
                return
            self._dispose(conn)

    def _failure(self, exc: sqlite3.Error, gen: int, *, writing: bool = False) -> BackendError:
        """`exc` as a BackendError; a broken file drops the connections, to be opened anew.

        Dropped at once when the writer is free (`writing`: this thread holds it), else by
        the next `_ready`: closing checkpoints the WAL into the file, which must happen
        before a good copy is put back, not into it."""
        error = store_error(exc, self.path)
        name = getattr(exc, "sqlite_errorname", "")
        if name.startswith("SQLITE_IOERR"):
            with self._state:
                self.faults += 1
        if not name.startswith(BROKEN):
            return error
        with self._state:
            if gen != self._gen or self._broken:
                return error
            self._broken = True
            count = self._failed[3] + 1 if self._failed is not None else 1
            self._failed = (self._clock(), signature(self.path), str(error), count)
        if writing or self._writing.acquire(blocking=False):
            try:
                with self._state:
                    if self._broken and gen == self._gen:
                        self._drop()
            finally:
                if not writing:
                    self._writing.release()
        return error

    def _drop(self, *, anchor: bool = False) -> None:
        """Forget every connection (the caller holds `_state`); readers in use follow.
        `anchor`: keep the writer open as the anchor of a file that left the path."""
        self._gen += 1
        if anchor and self._writer is not None:
            self._release_anchor()
            self._anchor, self._writer = self._writer, None
        else:
            self._release_anchor()
        for conn in [*self._idle, *([self._writer] if self._writer is not None else [])]:
            self._dispose(conn)
        self._idle, self._writer, self._ident, self._broken = [], None, None, False

    def _dispose(self, conn: sqlite3.Connection) -> None:
        if not self._memory and unwritable(self._files):
            _leave_open(conn)
            return
        with contextlib.suppress(sqlite3.Error):
            conn.close()
