"""The stdio relay: `orchestrator serve` as an agent's MCP config runs it, carrying the
session to the shared process over its socket.

Standard library only (a test reads `python -X importtime` to keep it so): it starts in a few
tens of milliseconds and holds a few MB, however many sessions an agent opens.

It copies JSON-RPC lines both ways, unchanged, and reads only their envelopes (id, method),
never the tools' shapes, for three things:
- **A shared process that goes away costs at most the requests in flight.** When the
  connection ends (the shared process stopped or was killed), each request sent on it and
  not answered gets a JSON-RPC error that says so; the next request connects again, starting
  a shared process when none runs, and the session's `initialize` is replayed on the new
  connection (its answer kept from the client, which has had one), so the session goes on.
- **A request that cannot be delivered** (no shared process could be started within
  `[shared_process] start_timeout_s`) is answered with an error at once; the next one tries
  again.
- **The end of the session**: when stdin ends, the write side of the socket is closed and the
  shared process finishes and answers what is in flight (as the in-process server drains
  when stdin ends), then the relay exits.

When no shared process can be used at the start (off by setting, a socket directory that is
not the user's alone, a process that fails to start), `open_relay` says why and the caller
serves in its own process (`faces.launch`), which says so in `memory_health`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time

from memory_orchestrator.faces.shared.address import (
    Inputs,
    NotRunning,
    Unusable,
    alias_name,
    open_connection,
    socket_dir,
)
from memory_orchestrator.faces.shared.client import LOG_NAME, start_in_background

TYPE_CHECKING = False  # (`typing` is not imported at run time: mypy reads this as true)
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Mapping
    from typing import Any, BinaryIO

__all__ = ["Relay", "open_relay"]

MAX_LINE_BYTES = 4 * 1024 * 1024  # the stdio wire's own limit (`faces.mcp.wire`)
INTERNAL_ERROR = -32603
_ANSWER_START = b'{"jsonrpc":"2.0","id":'  # how the server's wire writes an answer
_POLL_S = 0.05  # between attempts to connect while a shared process starts


def open_relay(
    inputs: Inputs, env: Mapping[str, str] | None = None, cwd: str | None = None
) -> Relay:
    """A relay connected to the shared process for `inputs` (started when none runs, and
    waited for up to `[shared_process] start_timeout_s`). Raises `Unusable` with the reason
    when the session has to be served in this process instead."""
    from memory_orchestrator.faces.shared.address import shared_options

    env = os.environ if env is None else env
    cwd = cwd or os.getcwd()
    enabled, start_timeout_s = shared_options(inputs, env, cwd)
    if not enabled:
        raise Unusable("off ([shared_process] enabled = false)")
    relay = Relay(inputs, env, cwd, start_timeout_s)
    relay.connect_first()
    return relay


class Relay:
    """One MCP session between this process's stdio and the shared process."""

    def __init__(
        self, inputs: Inputs, env: Mapping[str, str], cwd: str, start_timeout_s: float
    ) -> None:
        self.inputs, self.env, self.cwd = inputs, env, cwd
        self.start_timeout_s = start_timeout_s
        self.key = inputs.key(env, cwd)
        self.directory = socket_dir(env)
        self.path = os.path.join(self.directory, f"{alias_name(self.key)}.sock")
        self._lock = threading.Lock()  # the connection, the requests in flight
        self._changed = threading.Condition(self._lock)
        self._sock: socket.socket | None = None
        self._reader: BinaryIO | None = None
        self._pid = 0  # the shared process on the current connection
        self._generation = 0  # counts connections
        self._pending: dict[str, tuple[int, Any]] = {}  # request id -> (connection, its id)
        self._initialize: dict[str, Any] | None = None  # the client's, replayed on reconnect
        self._initialized: bytes | None = None
        self._child: subprocess.Popen[bytes] | None = None
        self._ended = False  # stdin ended: no new connection
        self._out = threading.Lock()

    # ------------------------------------------------------------------ connecting

    def connect_first(self) -> None:
        """The first connection; what the shared process says at its start (that search is
        lexical only, ...) is said on this process's stderr, as a server of its own would."""
        with self._lock:
            said = self._connect()
        for line in said if isinstance(said, list) else ():
            print(f"memory-orchestrator: {line}", file=sys.stderr, flush=True)

    def _connect(self) -> object:
        """Connect (under the lock), starting a shared process when none answers, and replay
        the session's opening on the new connection; what its welcome says to say. Raises
        `Unusable`."""
        sock, reader, welcome = self._attach_or_start()
        try:
            self._replay(sock, reader)
        except (OSError, Unusable) as exc:
            sock.close()
            raise Unusable(f"the shared process broke the session's opening: {exc}") from exc
        self._generation += 1
        self._sock, self._reader, self._pid = sock, reader, int(welcome.get("pid", 0))
        self._changed.notify_all()
        return welcome.get("say")

    def _attach_or_start(self) -> tuple[socket.socket, BinaryIO, dict[str, Any]]:
        """A connection to the shared process; when none answers, one is started (once) and
        waited for, up to `start_timeout_s`. A process started here that fails ends the wait;
        one that ends with status 0 found another serving these settings."""
        deadline = time.monotonic() + self.start_timeout_s
        started = False
        while True:
            try:
                return open_connection(self.path, self.key, "mcp", self.start_timeout_s)
            except NotRunning as exc:
                child = self._child
                if child is None or child.poll() is not None:  # (an earlier one that ended)
                    if not started:
                        try:
                            self._child = start_in_background(
                                self.inputs, env=self.env, cwd=self.cwd
                            )
                        except OSError as failed:
                            raise Unusable(f"cannot start the shared process: {failed}") from exc
                        started = True
                    elif child is not None and child.returncode:
                        log = os.path.join(self.directory, LOG_NAME)
                        why = f"the shared process could not start (exit {child.returncode}; {log})"
                        raise Unusable(why) from exc
                if time.monotonic() >= deadline:
                    raise Unusable(
                        f"no shared process within {self.start_timeout_s:g} s ({exc})"
                    ) from exc
            time.sleep(_POLL_S)

    def _replay(self, sock: socket.socket, reader: BinaryIO) -> None:
        """The session's `initialize` and `initialized` again, on a new connection (nothing
        before the first: the client sends its own)."""
        if self._initialize is None:
            return
        rid = f"relay-initialize-{self._generation + 1}"
        opening = {**self._initialize, "id": rid}
        sock.settimeout(self.start_timeout_s)
        sock.sendall(json.dumps(opening).encode() + b"\n")
        while True:  # its answer; a notification meanwhile goes on to the client
            line = reader.readline(MAX_LINE_BYTES + 1)
            if not line:
                raise Unusable("the connection closed")
            found = _answer_id(line)
            if found == json.dumps(rid):
                break
            self._write(line)
        if self._initialized is not None:
            sock.sendall(self._initialized)
        sock.settimeout(None)

    # ------------------------------------------------------------------ serving

    def run(self) -> int:
        """Relay until stdin ends and the shared process has answered what was in flight;
        the exit status."""
        downstream = threading.Thread(target=self._downstream, name="relay-down", daemon=True)
        downstream.start()
        stdin = sys.stdin.buffer
        try:
            while line := stdin.readline(MAX_LINE_BYTES + 1):
                if len(line) > MAX_LINE_BYTES:  # passed on whole: the server answers it
                    while not line.endswith(b"\n") and (more := stdin.readline(MAX_LINE_BYTES)):
                        line += more  # (bounded by what the client sends in one line)
                elif not line.strip():
                    continue
                self._upstream(line)
        finally:
            self._end()
        downstream.join()
        return 0

    def _upstream(self, line: bytes) -> None:
        """One line from the client to the shared process."""
        message = _parse(line)
        rid = None
        if message is not None and isinstance(message.get("method"), str):
            method = message["method"]
            if "id" in message:
                rid = message["id"]
                if method == "initialize":
                    self._initialize = message
            elif method == "notifications/initialized":
                self._initialized = line if line.endswith(b"\n") else line + b"\n"
            elif method == "notifications/cancelled" and isinstance(message.get("params"), dict):
                with self._lock:
                    self._pending.pop(json.dumps(message["params"].get("requestId")), None)
        self._send(line if line.endswith(b"\n") else line + b"\n", rid)

    def _send(self, line: bytes, rid: Any) -> None:
        key = json.dumps(rid) if rid is not None else None
        with self._lock:
            for _attempt in range(2):
                if self._sock is None:
                    try:
                        self._connect()
                    except Unusable as exc:
                        if rid is not None:
                            self._fail(
                                rid,
                                f"the shared process is not available ({exc}); this"
                                " request was not carried out: the next one tries again",
                            )
                        return
                sock = self._sock
                assert sock is not None
                if key is not None:
                    self._pending[key] = (self._generation, rid)
                try:
                    sock.sendall(line)
                    return
                except OSError:  # it went away: its reader answers what was in flight
                    if key is not None:
                        self._pending.pop(key, None)
                    self._lost(sock)
            if rid is not None:
                self._fail(
                    rid,
                    "the shared process went away twice; this request was not"
                    " carried out: the next one tries again",
                )

    def _lost(self, sock: socket.socket) -> None:
        """The connection broke (under the lock): the next request makes a new one."""
        if self._sock is sock:
            self._sock = None
            self._changed.notify_all()
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

    def _downstream(self) -> None:
        """Lines from the shared process to the client, connection after connection."""
        seen = 0
        while True:
            with self._lock:
                while not self._ended and (self._sock is None or self._generation == seen):
                    self._changed.wait()
                if self._sock is None or self._generation == seen:
                    return  # stdin ended and every connection is done
                sock, reader, seen, pid = self._sock, self._reader, self._generation, self._pid
            assert reader is not None
            self._carry(reader)
            with self._lock:
                self._lost(sock)
                self._answer_lost(seen, pid)
                ended = self._ended
            reader.close()
            sock.close()
            if ended:
                return

    def _carry(self, reader: BinaryIO) -> None:
        try:
            while line := reader.readline(MAX_LINE_BYTES + 1):
                found = _answer_id(line)
                if found is not None:
                    with self._lock:
                        self._pending.pop(found, None)
                self._write(line)
        except OSError:
            pass  # the connection broke: as at its end

    def _answer_lost(self, generation: int, pid: int) -> None:
        """An error for each request sent on connection `generation` and not answered."""
        lost = [(k, rid) for k, (g, rid) in self._pending.items() if g == generation]
        for key, rid in lost:
            del self._pending[key]
            self._fail(
                rid,
                f"the shared process (pid {pid}) ended while this request was in flight: it"
                " may or may not have been carried out (a memory_write may be stored: writing"
                " it again is skipped as a duplicate); the next request starts a new one",
            )

    def _end(self) -> None:
        """stdin ended: close our side, so the shared process answers what is in flight and
        closes its side."""
        with self._lock:
            self._ended = True
            if self._sock is not None:
                with contextlib.suppress(OSError):
                    self._sock.shutdown(socket.SHUT_WR)
            self._changed.notify_all()

    # ------------------------------------------------------------------ writing to the client

    def _fail(self, rid: Any, message: str) -> None:
        error = {"code": INTERNAL_ERROR, "message": f"memory-orchestrator: {message}"}
        self._write(json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}).encode() + b"\n")

    def _write(self, data: bytes) -> None:
        with self._out:
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(1, view) :]
            except OSError:  # the client went away: the shared process finishes without it
                print(
                    "memory-orchestrator: the client closed the connection; stopping",
                    file=sys.stderr,
                    flush=True,
                )
                os._exit(0)


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        found = json.loads(line)
    except ValueError:
        return None  # not ours to answer: the shared process's wire does
    return found if isinstance(found, dict) else None


def _answer_id(line: bytes) -> str | None:
    """The id (as JSON text) of the request `line` answers; None for anything else (a
    notification, or a request from the server)."""
    if line.startswith(_ANSWER_START):  # the wire's own layout: read the id without parsing
        rest = line[len(_ANSWER_START) :]
        end = rest.find(b',"')
        if end > 0 and rest[end + 2 :].startswith((b'result"', b'error"')):
            try:
                return json.dumps(json.loads(rest[:end]))
            except ValueError:
                pass  # read the whole line below
    message = _parse(line)
    if message is None or "method" in message or "id" not in message:
        return None
    return json.dumps(message["id"])


def relay_main(inputs: Inputs) -> int | str:
    """Serve this process's stdio through the shared process: the exit status, or why the
    session must be served in this process instead."""
    try:
        relay = open_relay(inputs)
    except Unusable as exc:
        return str(exc)
    return relay.run()
