"""Running `mnemon`: one process per command, never through a shell.

- The binary: `[mnemon] binary` (a bare name is looked up on PATH), else `.tools/bin/mnemon`
  under the working directory (where `make mnemon` installs it), else `mnemon` on PATH.
  Missing, not executable, or not one this system can run (garbage, a busy file): each is
  the installation's fault, never the request's, so the error is transient (a write waits in
  the outbox until it is fixed) and health's `binary` check names it.
- The environment: this process's, so Mnemon's own variables (`MNEMON_MAX_INSIGHTS`,
  `MNEMON_EMBED_MODEL`, `MNEMON_EMBED_ENDPOINT`...) reach it; its embedding probe (2 s per
  call) is pointed at an address that fails at once unless `MNEMON_EMBED_ENDPOINT` is set.
- A timeout per process: a late process is stopped, and so is one whose caller gave up. Each
  process starts in its own process group, and the whole group is stopped (SIGTERM, then
  SIGKILL after `KILL_GRACE_S`): Mnemon's npm launcher runs the real binary as a child and
  forwards only SIGINT, SIGTERM and SIGHUP, so killing the launcher alone would leave the
  binary running.
- At most `MAX_PROCESSES` at once; writes to one store one at a time (a lock per store file,
  shared by every backend in the event loop); "database is locked" retried with bounded
  backoff (Mnemon sets no busy timeout): writes `LOCK_RETRIES` times, reads for up to
  `READ_LOCK_WAIT_S` (every Mnemon open briefly takes the write lock, so concurrent reads
  meet it often).
- Mnemon's error text: the `Error: ...` line of stderr, else its last non-empty line.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Generic, TypeVar

import anyio
import anyio.lowlevel
from anyio.abc import ByteReceiveStream, Process

from memory_orchestrator.errors import BackendError, StoreTimeout
from memory_orchestrator.settings import MnemonSettings

T = TypeVar("T")

LOCAL_BINARY = Path(".tools/bin/mnemon")  # under the working directory: `make mnemon`
INSTALL_HINT = (
    "install it with `go install github.com/mnemon-dev/mnemon@v0.2.9` (Go >= 1.24; or"
    " `make mnemon`, which puts it in ./.tools/bin), or set [mnemon] binary"
)
FAIL_FAST_ENDPOINT = "http://127.0.0.1:1"  # connection refused at once: no 2 s probe
KILL_GRACE_S = 1.0  # between SIGTERM and SIGKILL to a late process group
# Each mnemon process is a Go binary opening SQLite: a few at once keep the CPU busy
# without queueing every read behind one; more only contend for the store's lock.
MAX_PROCESSES = 4
# "database is locked": a writer waits out another writer's short transaction, and gives up
# soon after (the write then waits in the outbox); the first delay is about one short
# transaction, doubling up to MAX_RETRY_DELAY_S.
LOCK_RETRIES = 3
FIRST_RETRY_DELAY_S = 0.05
MAX_RETRY_DELAY_S = 0.4
# A read retries longer than a write: every Mnemon open briefly takes the write lock, so
# concurrent reads meet it often, and a read has no outbox to wait in.
READ_LOCK_WAIT_S = 3.0
LOCKED = ("database is locked", "sqlite_busy", "database table is locked", "sqlite_locked")

_STORE_LOCKS: anyio.lowlevel.RunVar[dict[str, anyio.Lock]] = anyio.lowlevel.RunVar(
    "mnemon_store_locks"
)


class MnemonTimeout(StoreTimeout):
    """A mnemon process ran past its timeout and was killed."""


class _Locked(BackendError):
    """The store was locked by another writer (retried with backoff)."""


def find_binary(configured: Path | None) -> Path:
    """The `mnemon` to run (see the module docstring). Raises BackendError saying where it
    looked and how to install one."""
    looked: list[str] = []
    if configured is not None:
        path = configured.expanduser()
        if path.parent == Path() and not str(configured).startswith("."):
            found = shutil.which(str(path))
            looked.append(f"{path} on PATH")
            candidates = [Path(found)] if found else []
        else:
            looked.append(str(path))
            candidates = [path]
    else:
        local = Path.cwd() / LOCAL_BINARY
        looked += [str(local), "PATH"]
        found = shutil.which("mnemon")
        candidates = [local, *([Path(found)] if found else [])]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate.absolute()
    for candidate in candidates:
        if candidate.is_file():
            raise BackendError(_not_executable(candidate), transient=True)
    raise BackendError(
        f"mnemon binary not found (looked in: {', '.join(looked)}); {INSTALL_HINT}",
        transient=True,
    )


def _not_executable(path: Path) -> str:
    mode = f"{path.stat().st_mode & 0o777:o}" if path.exists() else "?"
    return f"mnemon binary {path} is not executable (mode {mode}; chmod +x it)"


def error_message(stderr: bytes) -> str:
    """Mnemon's error text: the `Error: ...` line, else the last non-empty stderr line."""
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines()]
    lines = [line for line in lines if line]
    for line in lines:
        if line.startswith("Error: "):
            return line.removeprefix("Error: ")
    return lines[-1] if lines else "no error text"


async def _drain(stream: ByteReceiveStream | None, into: bytearray) -> None:
    if stream is None:
        return
    async for chunk in stream:
        into.extend(chunk)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def _stop_group(process: Process) -> None:
    """SIGTERM to the process's group (it leads one), SIGKILL to the group once the process
    has exited or `KILL_GRACE_S` has passed: no child it started survives it."""
    _signal_group(process.pid, signal.SIGTERM)
    with anyio.move_on_after(KILL_GRACE_S):
        await process.wait()
    _signal_group(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()


class PerLoop(Generic[T]):
    """One `make()` per running event loop: anyio locks and semaphores cannot cross loops
    (the CLI, the eval harness and the tests each run their own)."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._loop: object = None
        self._value: T | None = None

    def get(self) -> T:
        loop = anyio.lowlevel.current_token().native_token
        if self._value is None or self._loop is not loop:
            self._loop, self._value = loop, self._make()
        return self._value


class Cached(Generic[T]):
    """An answer reused for `ttl_s` seconds; concurrent first askers in one event loop wait
    for one fetch."""

    def __init__(self, fetch: Callable[[], Awaitable[T]], ttl_s: float) -> None:
        self._fetch = fetch
        self.ttl_s = ttl_s
        self._value: tuple[float, T] | None = None
        self._lock = PerLoop(anyio.Lock)

    def clear(self) -> None:
        self._value = None

    def _fresh(self) -> T | None:
        value = self._value
        if value is not None and time.monotonic() - value[0] < self.ttl_s:
            return value[1]
        return None

    async def get(self, *, fresh: bool = False) -> T:
        """The cached answer, else a new one (always a new one with `fresh`)."""
        found = None if fresh else self._fresh()
        if found is not None:
            return found
        async with self._lock.get():
            found = None if fresh else self._fresh()
            if found is not None:
                return found
            now = time.monotonic()
            answer = await self._fetch()
            self._value = (now, answer)
            return answer


class MnemonRunner:
    """Starts `mnemon` processes for one backend (see the module docstring).

    `process_calls` counts the processes started, `calls_by_command` per command."""

    def __init__(self, settings: MnemonSettings) -> None:
        self.settings = settings
        self.process_calls = 0
        self.calls_by_command: Counter[str] = Counter()
        self._binary: Path | None = None
        self._processes = PerLoop(lambda: anyio.Semaphore(MAX_PROCESSES))

    def binary(self) -> Path:
        """The binary to run (found once, checked each time: it may be removed or made
        unexecutable meanwhile). Raises BackendError (transient) when there is none."""
        found = self._binary
        if found is None or not found.is_file() or not os.access(found, os.X_OK):
            self._binary = found = find_binary(self.settings.binary)
        return found

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        if not env.get("MNEMON_EMBED_ENDPOINT"):
            env["MNEMON_EMBED_ENDPOINT"] = FAIL_FAST_ENDPOINT
        return env

    async def spawn(
        self, argv: list[str], command: str, timeout: float
    ) -> tuple[int, bytes, bytes]:
        """Run `argv` to the end: exit code, stdout, stderr. Raises `MnemonTimeout` (the
        process killed) or BackendError when it cannot start."""
        async with self._processes.get():
            self.process_calls += 1
            self.calls_by_command[command] += 1
            try:
                process = await anyio.open_process(
                    argv, stdin=subprocess.DEVNULL, env=self._env(), start_new_session=True
                )
            except OSError as exc:  # gone, unexecutable, garbage: the installation's fault
                raise BackendError(f"cannot start {argv[0]}: {exc}", transient=True) from exc
            out, err = bytearray(), bytearray()
            try:
                with anyio.fail_after(timeout):
                    async with anyio.create_task_group() as group:
                        group.start_soon(_drain, process.stdout, out)
                        group.start_soon(_drain, process.stderr, err)
                        await process.wait()
            except TimeoutError:
                raise MnemonTimeout(
                    f"mnemon {command} timed out after {timeout:g}s and was killed",
                    transient=True,
                ) from None
            finally:  # on our timeout or the caller's cancellation: never leave it running
                with anyio.CancelScope(shield=True):
                    if process.returncode is None:
                        await _stop_group(process)
                    await process.aclose()
            return process.returncode or 0, bytes(out), bytes(err)

    @asynccontextmanager
    async def write_lock(self, store: Path) -> AsyncIterator[None]:
        """One writer per store at a time, across every backend in this event loop (hold it
        around a check and the write it decides, then `run(..., held=True)`)."""
        locks = _STORE_LOCKS.get(None)
        if locks is None:
            locks = {}
            _STORE_LOCKS.set(locks)
        async with locks.setdefault(str(store), anyio.Lock()):
            yield

    async def run(
        self,
        argv: list[str],
        command: str,
        *,
        store: Path,
        write: bool = False,
        timeout: float | None = None,
        held: bool = False,
    ) -> str:
        """`argv`'s stdout. "database is locked" (on `store`) is retried with exponential
        backoff: a `write` `LOCK_RETRIES` times (holding the store's write lock, unless the
        caller `held` it already), a read until `READ_LOCK_WAIT_S` has passed (and at least
        `LOCK_RETRIES` times). Raises BackendError with Mnemon's error text."""
        limit = timeout or self.settings.timeout_s
        attempt = 0
        started = time.monotonic()
        while True:
            try:
                if write and not held:
                    async with self.write_lock(store):
                        return await self._once(argv, command, limit)
                return await self._once(argv, command, limit)
            except _Locked as exc:
                delay = min(FIRST_RETRY_DELAY_S * (2**attempt), MAX_RETRY_DELAY_S)
                waited = time.monotonic() - started
                more_time = not write and waited + delay < READ_LOCK_WAIT_S
                if attempt >= LOCK_RETRIES and not more_time:
                    tries = attempt + 1
                    raise BackendError(
                        f"mnemon {command}: the store {store} stayed locked by another"
                        f" writer ({exc}); gave up after {tries} tries in {waited:.1f}s",
                        transient=True,
                    ) from exc
                await anyio.sleep(delay * (1 + random.random() / 2))
                attempt += 1

    async def _once(self, argv: list[str], command: str, timeout: float) -> str:
        code, out, err = await self.spawn(argv, command, timeout)
        if code == 0:
            return out.decode(errors="replace")
        message = error_message(err)
        if any(marker in message.lower() for marker in LOCKED):
            raise _Locked(message, transient=True)
        raise BackendError(f"mnemon {command} failed (exit {code}): {message}")
