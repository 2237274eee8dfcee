"""The stdio wire of the MCP face: our own stdio transport under the SDK's server loop.

- **Every line gets an answer.** A line that is not a JSON-RPC message (not JSON, text that is
  not valid Unicode such as a lone surrogate escape, a wrong shape, a line over
  `MAX_LINE_BYTES`) is answered with a JSON-RPC error (-32700 parse error, -32600 invalid
  request) carrying the request's id when one can be read from it; a request whose id is
  neither a string nor an integer (an object, null, a fraction), which the SDK would take for
  a notification and never answer, gets -32600 with id null. An answer that cannot be written
  as JSON becomes a -32603 error for the same id. Nothing a client sends ends the server.
- **A client that goes away loses no write.** When stdin ends, the requests already read are
  finished and answered (at most `drain_s`) before the server stops, instead of being
  cancelled. When an answer cannot be delivered (stdout closed: a broken pipe), no more
  requests are read, those in flight still finish, and the server says so once on stderr and
  exits with status 0.
- While serving, fd 0 points at the null device and fd 1 at stderr (as the SDK's own stdio
  transport does), so child processes and stray prints never touch the wire.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import sys
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from typing import BinaryIO

import anyio
import anyio.from_thread
import anyio.lowlevel
import mcp_types as types
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from anyio.lowlevel import EventLoopToken
from anyio.streams.memory import MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

PARSE_ERROR, INVALID_REQUEST, INTERNAL_ERROR = -32700, -32600, -32603
MAX_LINE_BYTES = 4 * 1024 * 1024  # the HTTP transport's body limit
_ID = re.compile(r'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')

Incoming = SessionMessage | Exception
Serve = Callable[[ObjectReceiveStream[Incoming], ObjectSendStream[SessionMessage]], Awaitable[None]]


def _valid_id(value: object) -> bool:
    """An id we can send back: an integer, or text that is valid Unicode."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: not text JSON can carry back
        return False
    return True


def request_id(exc: Exception) -> tuple[int | str | None, bool]:
    """The id of the request a line that failed to parse was meant to be (None when none can
    be read, or it is not valid Unicode), and whether the line was JSON at all."""
    if not isinstance(exc, ValidationError):
        return None, False
    raw: str | None = None
    for error in exc.errors():
        value = error.get("input")
        if isinstance(value, dict):
            found = value.get("id")
            return (found if _valid_id(found) else None), True
        if isinstance(value, str) and error.get("type") == "json_invalid":
            raw = value
    if raw is None:
        return None, True
    match = _ID.search(raw[:100_000])
    if match is None:
        return None, False
    try:
        found = json.loads(match.group(1))
    except ValueError:
        return None, False
    return (found if _valid_id(found) else None), False


def _error(rid: int | str | None, code: int, message: str) -> SessionMessage:
    error = types.ErrorData(code=code, message=message)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=rid, error=error))


def error_reply(exc: ValueError) -> SessionMessage:
    """The JSON-RPC error answering a line that is not a message."""
    rid, was_json = request_id(exc)
    if was_json:
        return _error(rid, INVALID_REQUEST, "Invalid request: the line is not a JSON-RPC message")
    if "surrogate" in str(exc):
        why = "holds a lone surrogate escape (such as \\udc00), which is not valid Unicode"
        return _error(rid, PARSE_ERROR, f"Parse error: the line {why}")
    return _error(rid, PARSE_ERROR, "Parse error: the line is not valid JSON")


def bad_id_reply(line: str) -> SessionMessage | None:
    """-32600 for a request whose id is not a string or an integer (the SDK reads such a
    line as a notification); None when the line really is a notification."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict) or "id" not in data:
        return None
    got = type(data["id"]).__name__.replace("dict", "object").replace("NoneType", "null")
    message = f'Invalid request: "id" must be a string or an integer, got {got}'
    return _error(None, INVALID_REQUEST, message)


def dump(item: SessionMessage) -> bytes | None:
    """The line to write for `item`; an answer that cannot be written as JSON becomes an
    internal error for its request (a notification that cannot is dropped: None)."""
    try:
        text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
    except ValueError as exc:  # e.g. text with a lone surrogate from a store
        rid = getattr(item.message, "id", None)
        if rid is None:
            print(f"memory-orchestrator: a notification was not sent: {exc}", file=sys.stderr)
            return None
        why = "Internal error: the answer could not be written as JSON (text that is not valid"
        reply = _error(rid if _valid_id(rid) else None, INTERNAL_ERROR, f"{why} Unicode)")
        text = reply.message.model_dump_json(by_alias=True, exclude_unset=True)
    return text.encode("utf-8") + b"\n"


def say_closed() -> None:
    print("memory-orchestrator: the client closed the connection; stopping", file=sys.stderr)


@contextlib.contextmanager
def claimed_stdio() -> Iterator[tuple[BinaryIO, int]]:
    """The wire's own duplicates of stdin and stdout, while fd 0 reads the null device and
    fd 1 writes to stderr; both are pointed back at the wire at the end. The duplicates are
    never closed: a reader thread may still block on stdin when serving ends."""
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        yield os.fdopen(wire_in, "rb", closefd=False), wire_out
    finally:
        sys.stdout.flush()
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)


class StdioWire:
    """Serves one client over the process's stdin and stdout (see the module docstring)."""

    def __init__(self, drain_s: float) -> None:
        self.drain_s = drain_s
        self.gone = False  # an answer met a closed stdout: the client went away
        self._in_flight: Counter[int | str] = Counter()  # requests read, not yet answered
        self._settled = anyio.Event()  # set (and renewed) each time an answer leaves
        self._listening = anyio.CancelScope()  # cancelled when the client is gone

    async def serve(self, serve: Serve) -> None:
        """`serve(read_stream, write_stream)` (the SDK's server loop) over stdio."""
        with claimed_stdio() as (wire_in, wire_out):
            await self.serve_on(wire_in, wire_out, serve)
        if self.gone:
            say_closed()

    async def serve_on(self, wire_in: BinaryIO, wire_out: int, serve: Serve) -> None:
        """`serve` over lines read from `wire_in` and written to the descriptor `wire_out`:
        stdio, or a connection of the shared process (`faces.shared.server`)."""
        to_server, from_wire = anyio.create_memory_object_stream[Incoming](0)
        from_server, to_wire = anyio.create_memory_object_stream[SessionMessage](0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._read, wire_in, to_server, from_server.clone())
            tg.start_soon(self._write, wire_out, to_wire)
            await serve(from_wire, from_server)
            self._listening.cancel()  # the server loop ended: nothing reads requests now

    # ------------------------------------------------------------------ reading

    async def _read(
        self,
        wire_in: BinaryIO,
        to_server: ObjectSendStream[Incoming],
        replies: ObjectSendStream[SessionMessage],
    ) -> None:
        lines_in, lines = anyio.create_memory_object_stream[bytes](0)
        token = anyio.lowlevel.current_token()
        threading.Thread(target=_pump, args=(wire_in, lines_in, token), daemon=True).start()
        async with to_server, replies, lines:
            with self._listening:
                async for raw in lines:
                    await self._take(raw, to_server, replies)
            await self._drain()

    async def _take(
        self,
        raw: bytes,
        to_server: ObjectSendStream[Incoming],
        replies: ObjectSendStream[SessionMessage],
    ) -> None:
        if len(raw) > MAX_LINE_BYTES:
            why = f"Parse error: the line is over {MAX_LINE_BYTES} bytes; it was not read"
            await replies.send(_error(None, PARSE_ERROR, why))
            return
        line = raw.decode("utf-8", errors="replace")
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:  # pydantic's ValidationError: not JSON, or not a message
            await replies.send(error_reply(exc))
            return
        if isinstance(message, types.JSONRPCNotification) and '"id"' in line:
            refused = bad_id_reply(line)
            if refused is not None:
                await replies.send(refused)
                return
        if isinstance(message, types.JSONRPCRequest | types.JSONRPCNotification):
            self._note(message)
        await to_server.send(SessionMessage(message))

    def _note(self, message: types.JSONRPCRequest | types.JSONRPCNotification) -> None:
        """Count a request in flight; a cancelled one will not be answered."""
        if isinstance(message, types.JSONRPCRequest):
            self._in_flight[message.id] += 1
        elif message.method == "notifications/cancelled" and isinstance(message.params, dict):
            self._answered(message.params.get("requestId"))

    async def _drain(self) -> None:
        """Wait (at most `drain_s`) until every request read has been answered."""
        with anyio.move_on_after(self.drain_s):
            while self._in_flight:
                await self._settled.wait()

    # ------------------------------------------------------------------ writing

    async def _write(self, wire_out: int, to_wire: ObjectReceiveStream[SessionMessage]) -> None:
        async with to_wire:
            async for item in to_wire:
                if not self.gone:
                    data = dump(item)
                    try:
                        if data is not None:
                            await anyio.to_thread.run_sync(_write_all, wire_out, data)
                    except OSError:
                        self.gone = True  # no more requests: their answers cannot arrive
                        self._listening.cancel()
                self._answered(getattr(item.message, "id", None))

    def _answered(self, rid: object) -> None:
        if not isinstance(rid, int | str) or self._in_flight[rid] <= 0:
            return
        self._in_flight[rid] -= 1
        if self._in_flight[rid] <= 0:
            del self._in_flight[rid]
        self._settled.set()
        self._settled = anyio.Event()


def _pump(wire_in: BinaryIO, lines: MemoryObjectSendStream[bytes], token: EventLoopToken) -> None:
    """The stdin reader thread (a daemon: a read blocked on a silent client never holds the
    process up): hands each line to the event loop, until end of input or nobody listens.
    A line longer than `MAX_LINE_BYTES` is skipped to its end and handed on cut, to be
    answered as too long."""
    try:
        while True:
            line = wire_in.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            if len(line) > MAX_LINE_BYTES:
                while (rest := wire_in.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                    pass
            elif not line.strip():
                continue
            anyio.from_thread.run(lines.send, line, token=token)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, RuntimeError, OSError):
        pass  # the server stopped listening, or the event loop has ended
    finally:
        with contextlib.suppress(RuntimeError):
            anyio.from_thread.run_sync(lines.close, token=token)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
