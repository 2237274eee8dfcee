"""The stdio wire of the MCP face: what the SDK's stdio transport leaves unanswered.

- A line that is not a JSON-RPC message (not JSON, or JSON of the wrong shape) is answered
  with a JSON-RPC error (-32700 parse error, -32600 invalid request) carrying the request's
  id when one can be read from it, so the client is not left waiting for an answer; the SDK
  alone drops such a line.
- A client that closes its pipes mid-call ends the server cleanly: one line on stderr and
  exit status 0, not a traceback of the task group.
"""

from __future__ import annotations

import errno
import json
import re
import sys
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

PARSE_ERROR, INVALID_REQUEST = -32700, -32600
_ID = re.compile(r'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')

Send = Callable[[SessionMessage], Awaitable[None]]


def request_id(exc: Exception) -> tuple[int | str | None, bool]:
    """The id of the request a line that failed to parse was meant to be (None when none can
    be read), and whether the line was JSON at all."""
    if not isinstance(exc, ValidationError):
        return None, False
    raw: str | None = None
    for error in exc.errors():
        value = error.get("input")
        if isinstance(value, dict):
            found = value.get("id")
            return (found if isinstance(found, int | str) else None), True
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
    return (found if isinstance(found, int | str) else None), False


def error_reply(exc: Exception) -> SessionMessage:
    """The JSON-RPC error answering a line that is not a message."""
    rid, was_json = request_id(exc)
    code = INVALID_REQUEST if was_json else PARSE_ERROR
    what = "not a valid JSON-RPC message" if was_json else "not valid JSON"
    error = types.ErrorData(
        code=code, message=f"{'Invalid request' if was_json else 'Parse error'}: the line is {what}"
    )
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=rid, error=error))


class AnsweringReader:
    """The SDK's read stream, less the lines that failed to parse: each is answered with a
    JSON-RPC error on `send` instead (duck-typed like the SDK's context stream)."""

    def __init__(self, inner: Any, send: Send) -> None:
        self._inner = inner
        self._send = send

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def __aenter__(self) -> AnsweringReader:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        result: bool | None = await self._inner.__aexit__(exc_type, exc, tb)
        return result

    def __aiter__(self) -> AnsweringReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item: SessionMessage | Exception = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            await self._send(error_reply(item))

    async def aclose(self) -> None:
        await self._inner.aclose()


def closed_pipe(exc: BaseException) -> bool:
    """True when `exc` (or every leaf of an exception group) is the client hanging up."""
    if isinstance(exc, BaseExceptionGroup):
        return all(closed_pipe(e) for e in exc.exceptions)
    if isinstance(exc, BrokenPipeError | ConnectionResetError):
        return True
    return isinstance(exc, OSError) and exc.errno in (errno.EPIPE, errno.ECONNRESET)


def say_closed() -> None:
    print("memory-orchestrator: the client closed the connection; stopping", file=sys.stderr)
