"""The shared process: one orchestrator for every session, hook and CLI call on one memory.

`python -m memory_orchestrator.faces.shared.server --key KEY [root options]` is what a relay
or a hook starts, detached (`client.start_in_background`). It builds the settings those
options give, and then:

- when no process serves these settings (the lock `<name>.lock` beside the socket is free),
  it opens the orchestrator once (the MCP server's own lifespan: the warm-up, the outbox's
  replays), listens on `<name>.sock` and links the caller's inputs to it (`address`), and
  serves each connection: an MCP session (`mode` "mcp": the MCP face's tools, over the same
  wire as stdio) or service calls (`mode` "call": `OPERATIONS`);
- when one does (or is starting), it waits for it, links the caller's inputs to it, and ends
  (status 0).

Who may connect: the socket directory is the user's alone (mode 0700, `address.socket_dir`),
and each connection's peer uid is checked (`address.check_peer`) before a line is read.

It stops after `[shared_process] idle_stop_s` with no connection (the relays of open agent
sessions hold theirs; the CLI and the hooks connect for a call), or on SIGTERM or SIGINT:
it stops listening and removes its names first, lets the connections still open finish what
they asked, then closes the orchestrator. `memory_health` says which process answers, its
sessions and when it stops.

Exit status: 0 served (or another process serves these settings), 2 bad settings, 3 the
shared process is off by setting, 4 the socket directory cannot be used, 5 another process
holds these settings and never answered.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, TextIO, cast

import anyio
import anyio.to_thread
from pydantic import BaseModel, ValidationError

from memory_orchestrator.errors import ConfigError, OrchestratorError
from memory_orchestrator.faces.mcp.server import create_server, said_at_start, serving
from memory_orchestrator.faces.shared import address
from memory_orchestrator.faces.shared.client import LOG_NAME, MAX_LOG_BYTES
from memory_orchestrator.faces.shared.identity import settings_key
from memory_orchestrator.models import (
    ContextRequest,
    ExpandRequest,
    ExplainRequest,
    HealthCheck,
    SearchRequest,
    Status,
    WriteRequest,
    describe_errors,
)
from memory_orchestrator.service import Orchestrator, store_names
from memory_orchestrator.settings import Settings, load_settings
from memory_orchestrator.state.observability import Observer

__all__ = ["OPERATIONS", "SharedServer", "listen", "main"]

MAX_CALL_BYTES = 4 * 1024 * 1024
_HELLO_S = 10.0  # a connection that sends no opening line within this is closed


class _TraceId(BaseModel):
    trace_id: str


class _Nothing(BaseModel):
    pass


Operation = Callable[[Orchestrator, Any], Awaitable[BaseModel]]

OPERATIONS: dict[str, tuple[type[BaseModel], Operation]] = {
    "context": (ContextRequest, lambda o, r: o.context(r)),
    "search": (SearchRequest, lambda o, r: o.search(r)),
    "expand": (ExpandRequest, lambda o, r: o.expand(r)),
    "explain": (ExplainRequest, lambda o, r: o.explain(r)),
    "write": (WriteRequest, lambda o, r: o.write(r)),
    "replay": (_TraceId, lambda o, r: o.replay(r.trace_id)),
    "health": (_Nothing, lambda o, _: o.health()),
}
"""What a connection in mode "call" may ask: the service's calls, by name, with their
request model as JSON (`client.Connection.call`)."""


class SharedServer:
    """Serves connections on `listener` with one orchestrator until idle or told to stop."""

    def __init__(
        self,
        settings: Settings,
        listener: socket.socket,
        directory: str,
        name: str,
        *,
        peer_uid: Callable[[socket.socket], int] = address.peer_uid,
        signals: bool = True,
    ) -> None:
        # `signals`: stop on SIGTERM and SIGINT (only the main thread can listen for them)
        self.settings = settings
        self.signals = signals
        self.listener, self.directory, self.name = listener, directory, name
        self.peer_uid = peer_uid
        self.key = settings_key(settings)
        self.said = said_at_start(settings)  # for each relay to say on its own stderr
        self.started = datetime.now(UTC)
        self.sessions = 0  # MCP sessions open now
        self._open: set[socket.socket] = set()  # every connection open now
        self._changed = anyio.Event()  # set (and renewed) when a connection opens or closes
        self._last_change = time.monotonic()
        self._stop = anyio.Event()
        self._orchestrator: Orchestrator | None = None

    @property
    def socket_path(self) -> str:
        return os.path.join(self.directory, f"{self.name}.sock")

    async def serve(self) -> None:
        """Serve until idle for `idle_stop_s`, or `stop()`."""
        log = _Log(os.path.join(self.directory, LOG_NAME))
        try:
            await self._serve(Observer(cast(TextIO, log)))
        finally:
            log.close()

    async def _serve(self, observer: Observer) -> None:
        server = create_server(self.settings, observer)
        server.health_notes.append(self.health_check)
        async with serving(server) as (orchestrator, session):
            self._orchestrator = orchestrator
            listening = anyio.CancelScope()
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._accept, tasks, session, listening)
                if self.signals:
                    tasks.start_soon(self._signals)
                await self._until_stopped()
                listening.cancel()
                self._unlisten()
                if self._stop.is_set():
                    self._hang_up()
                await self._until_closed()
                tasks.cancel_scope.cancel()

    def stop(self) -> None:
        """Stop (from the event loop's thread): as on SIGTERM."""
        self._stop.set()
        self._touch()

    def health_check(self) -> HealthCheck:
        idle = self.settings.shared_process.idle_stop_s
        detail = (
            f"pid {os.getpid()}, shared by {self.sessions} MCP session(s) and"
            f" {len(self._open) - self.sessions} other connection(s), since"
            f" {self.started.isoformat(timespec='seconds')}; socket {self.socket_path};"
            f" stops after {idle:g} s without a connection; settings {self.key[:12]}"
        )
        return HealthCheck(name="shared_process", status=Status.OK, detail=detail)

    # ------------------------------------------------------------------ lifetime

    async def _until_stopped(self) -> None:
        """Until `stop()`, or `idle_stop_s` since the last connection closed (or the start)
        with none open."""
        idle_s = self.settings.shared_process.idle_stop_s
        while not self._stop.is_set():
            changed = self._changed
            if self._open:
                await changed.wait()
                continue
            left = idle_s - (time.monotonic() - self._last_change)
            if left <= 0:
                return
            with anyio.move_on_after(left):
                await changed.wait()

    def _touch(self) -> None:
        self._last_change = time.monotonic()
        self._changed.set()
        self._changed = anyio.Event()

    async def _signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
            async for _ in received:
                self.stop()
                return

    def _unlisten(self) -> None:
        """Stop listening and remove our names, so that a caller from now on starts a new
        process rather than reaching this one as it stops."""
        for name in _names_of(self.directory, self.name):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.directory, name))
        self.listener.close()

    def _hang_up(self) -> None:
        """Stop reading from the connections still open (on a signal): each finishes and
        answers what it asked, then closes."""
        for conn in list(self._open):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RD)

    async def _until_closed(self) -> None:
        while self._open:
            await self._changed.wait()

    # ------------------------------------------------------------------ connections

    async def _accept(
        self,
        tasks: anyio.abc.TaskGroup,
        session: Callable[[BinaryIO, int], Awaitable[None]],
        listening: anyio.CancelScope,
    ) -> None:
        self.listener.setblocking(False)
        with listening:
            await self._accept_each(tasks, session)

    async def _accept_each(
        self, tasks: anyio.abc.TaskGroup, session: Callable[[BinaryIO, int], Awaitable[None]]
    ) -> None:
        while True:
            await anyio.wait_readable(self.listener)
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                continue
            conn.setblocking(True)
            self._open.add(conn)
            self._touch()
            tasks.start_soon(self._connection, conn, session)

    async def _connection(
        self, conn: socket.socket, session: Callable[[BinaryIO, int], Awaitable[None]]
    ) -> None:
        reader: BinaryIO = conn.makefile("rb")
        try:
            mode = await self._opening(conn, reader)
            if mode == "mcp":
                self.sessions += 1
                try:
                    await session(reader, conn.fileno())
                finally:
                    self.sessions -= 1
            elif mode == "call":
                await self._calls(conn, reader)
        finally:
            reader.close()
            conn.close()
            self._open.discard(conn)
            self._touch()

    async def _opening(self, conn: socket.socket, reader: BinaryIO) -> str | None:
        """Check the peer and its opening line; welcome it (its mode) or refuse it (None)."""
        try:
            address.check_peer(conn, self.peer_uid)
            conn.settimeout(_HELLO_S)
            hello = await anyio.to_thread.run_sync(address.read_line, reader)
            refusal = self._refusal(hello)
        except address.Unusable as exc:
            refusal = str(exc)
        except OSError:
            return None  # gone, or silent for too long
        if refusal is not None:
            await _send(conn, {"refused": refusal})
            return None
        conn.settimeout(None)
        welcome = {"version": address.package_version(), "pid": os.getpid(), "say": self.said}
        await _send(conn, {**welcome, "settings": self.key[:12]})
        return str(hello["mode"])

    def _refusal(self, hello: dict[str, object]) -> str | None:
        if hello.get("hello") != "memory-orchestrator":
            return "not a memory-orchestrator opening line"
        if hello.get("version") != address.package_version():
            return f"version {hello.get('version')} is not {address.package_version()}"
        if hello.get("mode") not in ("mcp", "call"):
            return f"unknown mode {hello.get('mode')!r}"
        key = str(hello.get("key", ""))
        if key != self.key and not _links_to(self.directory, address.alias_name(key), self.name):
            return "these are not the settings this process serves"
        return None

    async def _calls(self, conn: socket.socket, reader: BinaryIO) -> None:
        while line := await anyio.to_thread.run_sync(reader.readline, MAX_CALL_BYTES + 1):
            answer = await self._call(line)
            try:
                await anyio.to_thread.run_sync(conn.sendall, answer)
            except OSError:
                return  # the caller went away (its time budget ran out)

    async def _call(self, line: bytes) -> bytes:
        rid: object = None
        try:
            message = json.loads(line)
            rid = message.get("id") if isinstance(message, dict) else None
            if not isinstance(message, dict) or message.get("op") not in OPERATIONS:
                raise _BadCall(f"unknown operation; known: {', '.join(OPERATIONS)}")
            model, operation = OPERATIONS[message["op"]]
            request = model.model_validate(message.get("request") or {})
            assert self._orchestrator is not None
            result = await operation(self._orchestrator, request)
            answer: dict[str, object] = {"id": rid, "result": result.model_dump(mode="json")}
        except ValidationError as exc:
            answer = _error(rid, "InvalidRequest", describe_errors(exc))
        except (ValueError, _BadCall) as exc:  # (json's error is a ValueError)
            answer = _error(rid, "InvalidRequest", str(exc) or "not a JSON call")
        except OrchestratorError as exc:
            answer = _error(rid, type(exc).__name__, str(exc))
        return json.dumps(answer).encode() + b"\n"


class _BadCall(Exception):
    pass


class _Log:
    """The request log (one JSON line per request): `shared.log` in the socket directory,
    moved aside to `shared.log.1` when it grows past `MAX_LOG_BYTES` (a process may live for
    days)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept for the process

    def write(self, text: str) -> int:
        if self._file.tell() > MAX_LOG_BYTES:
            self._file.close()
            with contextlib.suppress(OSError):  # (else written on where it is)
                os.replace(self.path, f"{self.path}.1")
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        return self._file.write(text)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _error(rid: object, kind: str, message: str) -> dict[str, object]:
    return {"id": rid, "error": {"kind": kind, "message": message}}


async def _send(conn: socket.socket, message: dict[str, object]) -> None:
    data = json.dumps(message).encode() + b"\n"
    with contextlib.suppress(OSError):  # it went away: its own read says so
        await anyio.to_thread.run_sync(conn.sendall, data)


def _links_to(directory: str, alias: str, name: str) -> bool:
    try:
        return os.readlink(os.path.join(directory, f"{alias}.sock")) == f"{name}.sock"
    except OSError:
        return False


def _names_of(directory: str, name: str) -> list[str]:
    """Our socket, its pid file and the links to it."""
    found = [f"{name}.sock", f"{name}.pid"]
    try:
        entries = os.listdir(directory)
    except OSError:
        return found
    alias = address.alias_name("")
    found += [
        e
        for e in entries
        if e.startswith(alias) and e.endswith(".sock") and _links_to(directory, e[:-5], name)
    ]
    return found


# ---------------------------------------------------------------- starting


def link(directory: str, alias: str, name: str) -> None:
    """Point `<alias>.sock` at `<name>.sock` (replacing what was there, atomically)."""
    final = os.path.join(directory, f"{alias}.sock")
    temporary = f"{final}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    os.symlink(f"{name}.sock", temporary)
    os.replace(temporary, final)


def _take(lock_path: str) -> int | None:
    """The lock file's descriptor when we hold it now; None when another process does."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def listen(path: str) -> socket.socket:
    with contextlib.suppress(FileNotFoundError):  # left by a process that was killed
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(64)
    return listener


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="memory_orchestrator.faces.shared.server")
    parser.add_argument("--key", required=True, help="the caller's inputs (`address.Inputs.key`)")
    parser.add_argument("--config", "-c", default=None)
    parser.add_argument("--backend", "-b", default=None)
    parser.add_argument("--data-dir", default=None)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    said = f"memory-orchestrator shared process {os.getpid()}:"
    try:
        settings = load_settings(
            None if args.config is None else Path(args.config),
            backend=args.backend,
            data_dir=args.data_dir,
        )
    except ConfigError as exc:
        print(f"{said} {exc}", file=sys.stderr, flush=True)
        return 2
    except ValidationError as exc:
        print(f"{said} settings: {describe_errors(exc)}", file=sys.stderr, flush=True)
        return 2
    if not settings.shared_process.enabled:
        print(f"{said} off ([shared_process] enabled = false)", file=sys.stderr, flush=True)
        return 3
    if settings.backend not in store_names():
        print(f"{said} unknown backend {settings.backend!r}", file=sys.stderr, flush=True)
        return 2
    try:
        directory = address.socket_dir()
    except address.Unusable as exc:
        print(f"{said} {exc}", file=sys.stderr, flush=True)
        return 4
    name = address.server_name(settings_key(settings))
    alias = address.alias_name(args.key)
    return _start(settings, directory, name, alias, said)


def _start(settings: Settings, directory: str, name: str, alias: str, said: str) -> int:
    """Serve these settings, or link `alias` to the process that does."""
    deadline = time.monotonic() + settings.shared_process.start_timeout_s
    path = os.path.join(directory, f"{name}.sock")
    while (lock := _take(os.path.join(directory, f"{name}.lock"))) is None:
        if _answers(path):
            link(directory, alias, name)
            return 0
        if time.monotonic() > deadline:
            print(f"{said} another process holds {name} and does not answer", file=sys.stderr)
            return 5
        time.sleep(0.05)
    try:
        listener = listen(path)
        link(directory, alias, name)
        _write_pid(os.path.join(directory, f"{name}.pid"))
        print(f"{said} serving {path}", file=sys.stderr, flush=True)
        anyio.run(SharedServer(settings, listener, directory, name).serve)
        print(f"{said} stopped", file=sys.stderr, flush=True)
    finally:
        os.close(lock)
    return 0


def _write_pid(path: str) -> None:
    """`<name>.pid`: which process serves (for `kill` and the tests; `memory_health` says it
    too); removed when it stops."""
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="ascii") as file:
        file.write(f"{os.getpid()}\n")
    os.replace(temporary, path)


def _answers(path: str) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(path)
        return True
    except OSError:
        return False
    finally:
        probe.close()


if __name__ == "__main__":
    sys.exit(main())
