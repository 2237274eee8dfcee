"""The client of the shared process, for the CLI, the hooks and anything else that must answer
fast: connect, call the service within a time budget, start the shared process in the
background without waiting for it.

Standard library only (a test reads `python -X importtime` to keep it so). A hook that must
answer within a few hundred milliseconds of its start:

    from memory_orchestrator.faces.shared import client

    answer = client.call("context", {"query": prompt}, timeout_s=0.25)
    if answer is not None:      # None: nothing was running; one is starting now
        print(answer["context_block"])

`call` connects to the shared process that serves the settings this process would have
(the same root options, working directory, environment and config file: `address.Inputs`);
when none runs it starts one in the background and returns None at once; a failure of the
call itself raises `CallFailed` (what the service refused: `kind` is its error's class name)
or `Unavailable` (the time budget ran out, or the shared process went away).

The operations are the service's (`server.OPERATIONS`): "context", "search", "expand",
"explain", "write", "replay" and "health", each taking its request model as JSON
(`ContextRequest`, `SearchRequest`, ...; "replay" takes {"trace_id": ...}, "health" {}) and
answering its result model as JSON (`ContextPackage`, `SearchResult`, ...).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import warnings

from memory_orchestrator.faces.shared.address import (
    Inputs,
    Unusable,
    alias_name,
    open_connection,
    peer_uid,
    socket_dir,
)

TYPE_CHECKING = False  # (`typing` is not imported at run time: mypy reads this as true)
if TYPE_CHECKING:
    import socket
    import subprocess
    from collections.abc import Mapping
    from typing import Any, BinaryIO

    from memory_orchestrator.faces.shared.address import UidOf

__all__ = [
    "CallFailed",
    "Connection",
    "Inputs",
    "Unavailable",
    "call",
    "connect",
    "connect_to",
    "start_detached",
    "start_in_background",
]

Unavailable = Unusable
MAX_ANSWER_BYTES = 64 * 1024 * 1024
LOG_NAME = "shared.log"
MAX_LOG_BYTES = 4 * 1024 * 1024  # the start log is moved aside (to .1) past this


class CallFailed(Exception):
    """The shared process answered with an error: `kind` is the class name of the service's
    error (`InvalidRequest`, `TraceNotFound`, `BackendError`, ...), the message its text."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Connection:
    """One connection to the shared process, in "call" mode: one call at a time."""

    def __init__(self, sock: socket.socket, reader: BinaryIO, welcome: dict[str, Any]) -> None:
        self._sock, self._reader, self.welcome = sock, reader, welcome
        self._next = 0

    @property
    def pid(self) -> int:
        """The shared process's pid."""
        return int(self.welcome["pid"])

    def call(self, op: str, request: Mapping[str, Any], *, timeout_s: float) -> dict[str, Any]:
        """Ask the service `op` with `request` (its request model as JSON) and wait at most
        `timeout_s` for its answer (its result model as JSON). Raises `CallFailed` when the
        service refused; `Unavailable` when the time ran out or the connection broke (the
        connection is then closed: the call may still run to its end over there)."""
        self._next += 1
        line = json.dumps({"id": self._next, "op": op, "request": dict(request)}) + "\n"
        deadline = time.monotonic() + timeout_s
        try:
            self._sock.settimeout(max(0.001, timeout_s))
            self._sock.sendall(line.encode())
            self._sock.settimeout(max(0.001, deadline - time.monotonic()))
            raw = self._reader.readline(MAX_ANSWER_BYTES + 1)
        except OSError as exc:  # (TimeoutError is one)
            self.close()
            why = "no answer within the time budget" if isinstance(exc, TimeoutError) else exc
            raise Unavailable(f"shared process, {op}: {why}") from exc
        if not raw.endswith(b"\n"):
            self.close()
            raise Unavailable(f"shared process, {op}: the connection closed before the answer")
        answer = json.loads(raw)
        if answer.get("id") != self._next:
            self.close()
            raise Unavailable(f"shared process, {op}: an answer to another call")
        if "error" in answer:
            error = answer["error"]
            raise CallFailed(str(error.get("kind", "OrchestratorError")), str(error["message"]))
        result: dict[str, Any] = answer["result"]
        return result

    def close(self) -> None:
        try:
            self._reader.close()
        finally:
            self._sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _where(
    inputs: Inputs | None, env: Mapping[str, str] | None, cwd: str | None
) -> tuple[Inputs, Mapping[str, str], str]:
    return inputs or Inputs(), os.environ if env is None else env, cwd or os.getcwd()


def connect(
    inputs: Inputs | None = None,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    timeout_s: float = 1.0,
    uid_of: UidOf = peer_uid,
) -> Connection:
    """A connection to the shared process for these inputs (by default this process's own:
    no root options, its environment and working directory). Raises `Unavailable` when none
    runs, the socket directory cannot be used, or the process there is another user's or
    refuses."""
    inputs, env, cwd = _where(inputs, env, cwd)
    key = inputs.key(env, cwd)
    path = os.path.join(socket_dir(env), f"{alias_name(key)}.sock")
    return connect_to(path, key, timeout_s=timeout_s, uid_of=uid_of)


def connect_to(
    path: str, key: str, *, timeout_s: float = 1.0, uid_of: UidOf = peer_uid
) -> Connection:
    """A connection to the shared process listening at `path`, for the settings `key` names
    (the CLI's: `identity.socket_path` and `identity.settings_key`)."""
    sock, reader, welcome = open_connection(path, key, "call", timeout_s, uid_of)
    return Connection(sock, reader, welcome)


def start_in_background(
    inputs: Inputs | None = None,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start the shared process for these inputs, detached (its own session; its output to
    `shared.log` in the socket directory), and return at once. When one already serves
    these settings, or is starting, the new one only links these inputs to it and ends.
    Raises `Unavailable` when the socket directory cannot be used."""
    import subprocess  # (here: a caller that finds one running never needs it)

    inputs, env, cwd = _where(inputs, env, cwd)
    directory = socket_dir(env)
    log_path = os.path.join(directory, LOG_NAME)
    try:
        if os.path.getsize(log_path) > MAX_LOG_BYTES:
            os.replace(log_path, log_path + ".1")
    except OSError:
        pass  # no log yet
    command = [
        sys.executable,
        "-m",
        "memory_orchestrator.faces.shared.server",
        "--key",
        inputs.key(env, cwd),
        *inputs.options(),
    ]
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
            close_fds=True,
        )


def start_detached(inputs: Inputs | None = None) -> None:
    """`start_in_background`, the handle dropped: the process outlives this one (Popen warns
    of a child dropped while it runs; here that is the point)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        start_in_background(inputs)


def call(
    op: str,
    request: Mapping[str, Any],
    *,
    timeout_s: float,
    inputs: Inputs | None = None,
    start: bool = True,
) -> dict[str, Any] | None:
    """One call to the shared process of this process's settings, within `timeout_s` in all
    (connecting included). None when none runs (with `start`, one is started in the
    background first); raises `CallFailed` or `Unavailable` as `Connection.call` does."""
    deadline = time.monotonic() + timeout_s
    try:
        connection = connect(inputs, timeout_s=timeout_s)
    except Unavailable:
        if start:
            with contextlib.suppress(Unavailable, OSError):  # none can start: answer without
                start_detached(inputs)
        return None
    with connection:
        return connection.call(op, request, timeout_s=max(0.001, deadline - time.monotonic()))
