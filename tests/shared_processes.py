"""The shared processes a test starts (`faces.shared`): where their sockets go, finding them,
stopping them.

Every test gets its own socket directory (`XDG_RUNTIME_DIR`, set by the autouse fixture in
tests/conftest.py: a short path under /tmp, as socket paths are limited to 107 bytes), and
every shared process started in it is stopped when the test ends (SIGTERM: it finishes what
it was asked, then exits), so none outlives its test.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memory_orchestrator.faces.shared import client

__all__ = ["alive", "pids", "runtime_dir", "socket_dir_of", "start", "stop_all"]


@contextmanager
def runtime_dir() -> Iterator[Path]:
    """A fresh `XDG_RUNTIME_DIR` (mode 0700); the shared processes started in it are stopped
    and it is removed at the end."""
    path = Path(tempfile.mkdtemp(prefix="mo-", dir="/tmp"))
    try:
        yield path
    finally:
        stop_all(path)
        if not os.environ.get("KEEP_RUNTIME_DIRS"):  # (to read a shared.log after a failure)
            shutil.rmtree(path, ignore_errors=True)


def start(env: dict[str, str], cwd: Path) -> None:
    """Start a shared process with `env` in `cwd`, as a hook does; the test's socket
    directory stops it at the end (its handle is dropped, as `client.start_detached` drops
    it: it runs on its own)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        client.start_in_background(env=env, cwd=str(cwd))


def socket_dir_of(runtime: Path) -> Path:
    return runtime / "memory-orchestrator"


def pids(runtime: Path) -> dict[str, int]:
    """The shared processes of `runtime`'s socket directory, by their pid files (`<name>.pid`
    beside each socket): socket name -> pid, for those still running."""
    directory = socket_dir_of(runtime)
    found: dict[str, int] = {}
    for entry in sorted(directory.glob("*.pid")) if directory.is_dir() else ():
        text = entry.read_text().strip()
        if text.isdigit() and alive(int(text)):
            found[entry.with_suffix(".sock").name] = int(text)
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    try:
        return "State:\tZ" not in status.read_text()
    except OSError:
        return False


def stop_all(runtime: Path, timeout_s: float = 60.0) -> None:
    """SIGTERM every shared process found in `runtime` and wait for each to end (SIGKILL
    after `timeout_s`)."""
    for pid in {*pids(runtime).values(), *starting(runtime)}:
        stop(pid, timeout_s)


def starting(runtime: Path) -> list[int]:
    """The shared processes started with `runtime` as their `XDG_RUNTIME_DIR` (by their
    environment in /proc), those that have not written their pid file yet included: a hook
    that starts one in the background may return just before its test ends."""
    wanted = f"XDG_RUNTIME_DIR={runtime}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            if b"memory_orchestrator.faces.shared.server" not in command:
                continue
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue  # gone meanwhile, or another user's
    return found


def stop(pid: int, timeout_s: float = 60.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)
