"""The `/mcp` endpoint: MCP sessions (`faces.http.sessions`) in front of the SDK's streamable
HTTP transport, which serves each request on its own (its stateless mode).

Since no server process keeps a session, any replica answers any request of any session when
the sessions live in the shared database: a plain round-robin load balancer will do. The rules,
all applied before the SDK sees a request (after its Host/Origin check):

- **Opening.** An `initialize` without a session id reserves a slot of its token's cap
  (`[http] max_sessions_per_token`; past it: 429 with the JSON-RPC error -32004, and the SDK
  never runs). The answer carries a new `mcp-session-id` only when the initialize succeeded
  (a JSON-RPC result): a failed one (-32602, bad parameters) gives its slot back and no id.
- **Using.** A request with an `mcp-session-id` must name a session its token opened that
  has not been idle for `[http] session_idle_timeout_s`: otherwise 404 "Session not found",
  exactly as if it did not exist (another token's session too). Any other request without
  a session id gets 400, as the SDK's own sessions answer.
- **Ending.** DELETE with the id ends it (200) and frees its slot; another token's DELETE
  gets 404.
- **No stream.** GET (a stream for messages the server starts) gets 405, which the protocol
  allows: the tools send no notifications, and a held stream would tie a client to a replica.
- **Ids.** A request whose `id` is neither a string nor an integer (an object, null, a
  fraction), which the SDK would take for a notification and answer 202 with nothing, gets
  400 with the JSON-RPC error -32600.

A request of the 2026 protocol era (an `mcp-protocol-version` header past the handshake
versions) carries its own envelope and no session: it goes to the SDK as it is.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeVar

import anyio.to_thread
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import TypeAdapter
from starlette.requests import Request

from memory_orchestrator.errors import BackendError
from memory_orchestrator.faces.http.sessions import SessionStore
from memory_orchestrator.faces.mcp.access import caller_of, peer_of
from memory_orchestrator.state.observability import Observer

__all__ = ["ANONYMOUS", "TOO_MANY_SESSIONS", "SessionGate"]

TOO_MANY_SESSIONS = -32004  # a JSON-RPC server error code: the token holds its most sessions
SESSIONS_UNAVAILABLE = -32005  # the session store cannot be reached: try again
INVALID_REQUEST = -32600
ANONYMOUS = ""  # the owner of every session without auth (--insecure-no-auth)
SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = b"mcp-protocol-version"
_MAX_ANSWER_HELD = 1024 * 1024  # an initialize answer read before it is let out
_JSON: TypeAdapter[Any] = TypeAdapter(Any)

T = TypeVar("T")
log = logging.getLogger(__name__)
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class SessionGate:
    """ASGI wrapper around the SDK's stateless MCP endpoint (see the module docstring).
    Expects the body already bounded (the SDK's `RequestBodyLimitMiddleware` around it)."""

    def __init__(
        self,
        app: ASGIApp,
        store: SessionStore,
        observer: Observer | None = None,
        security: TransportSecuritySettings | None = None,
    ) -> None:
        self.app = app
        self.store = store
        self.observer = observer
        self._security = TransportSecurityMiddleware(security)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _modern(scope):
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        refused = await self._security.validate_request(
            Request(scope, receive), is_post=method == "POST"
        )
        if refused is not None:
            await refused(scope, receive, send)
            return
        token = caller_of(scope)
        owner = token.name if token is not None else ANONYMOUS
        session_id = _header(scope, SESSION_HEADER)
        try:
            if method == "POST":
                await self._post(scope, receive, send, owner, session_id)
            elif method == "DELETE":
                await self._delete(send, owner, session_id)
            else:  # GET: no stream of server-started messages is offered
                await _reply(send, 405, _error(INVALID_REQUEST, "Method Not Allowed"), allow=True)
        except BackendError as exc:  # the shared session store cannot be reached
            message = f"MCP sessions are unavailable for now: {exc}"
            await _reply(send, 503, _error(SESSIONS_UNAVAILABLE, message))

    async def _call(self, fn: Callable[..., T], *args: str) -> T:
        if self.store.blocking:
            return await anyio.to_thread.run_sync(fn, *args)
        return fn(*args)

    async def _done(self, session_id: str) -> None:
        """Mark the session used at the end of a request. The answer is out already: a
        session store that cannot be reached now (within its bound) is logged, not raised."""
        try:
            await self._call(self.store.done, session_id)
        except BackendError as exc:
            log.warning("MCP session %s not marked used: %s", session_id[:8], exc)

    async def _post(
        self, scope: Scope, receive: Receive, send: Send, owner: str, session_id: str | None
    ) -> None:
        body, replay = await _read_body(receive)
        message = _parsed(body)
        bad_id = _bad_id(message)
        if bad_id is not None:
            why = f'Invalid request: "id" must be a string or an integer, got {bad_id}'
            await _reply(send, 400, _error(INVALID_REQUEST, why))
            return
        if session_id is not None:
            if not _well_formed(session_id) or not await self._call(
                self.store.use, owner, session_id
            ):
                await _reply(send, 404, _error(INVALID_REQUEST, "Session not found"))
                return
            try:
                await self.app(scope, replay, send)
            finally:
                with anyio.CancelScope(shield=True):
                    await self._done(session_id)
            return
        if isinstance(message, dict) and message.get("method") == "initialize":
            await self._initialize(scope, replay, send, owner)
        elif message is None:  # not JSON: the SDK answers the parse error
            await self.app(scope, replay, send)
        else:
            await _reply(send, 400, _error(INVALID_REQUEST, "Bad Request: Missing session ID"))

    async def _initialize(self, scope: Scope, receive: Receive, send: Send, owner: str) -> None:
        session_id = await self._call(self.store.open, owner)
        if session_id is None:
            await self._refuse(scope, send, owner)
            return
        held = _HeldAnswer(send, session_id, lambda: self._call(self.store.confirm, session_id))
        try:
            await self.app(scope, receive, held)
        finally:
            if not held.confirmed:
                with anyio.CancelScope(shield=True):
                    await self._call(self.store.discard, session_id)

    async def _delete(self, send: Send, owner: str, session_id: str | None) -> None:
        if session_id is None:
            await _reply(send, 400, _error(INVALID_REQUEST, "Bad Request: Missing session ID"))
        elif _well_formed(session_id) and await self._call(self.store.end, owner, session_id):
            await _reply(send, 200, b"")
        else:
            await _reply(send, 404, _error(INVALID_REQUEST, "Session not found"))

    async def _refuse(self, scope: Scope, send: Send, owner: str) -> None:
        store = self.store
        reason = (
            f"too many open sessions: token {owner!r} already holds {store.per_token}, the "
            "most [http] max_sessions_per_token allows; end one (HTTP DELETE with its "
            f"mcp-session-id) or wait until one has been idle for {store.idle_timeout_s:g} s"
        )
        if self.observer is not None:
            self.observer.refused(429, scope.get("path", ""), owner, reason, peer_of(scope))
        await _reply(send, 429, _error(TOO_MANY_SESSIONS, reason))


class _HeldAnswer:
    """The `send` of an `initialize`: the answer is held until its body is complete; when it
    is a JSON-RPC result the session is confirmed and its id added to the headers, else the
    answer goes out as it is (no session)."""

    def __init__(self, send: Send, session_id: str, confirm: Callable[[], Awaitable[None]]):
        self._send, self._session_id, self._confirm = send, session_id, confirm
        self._start: Message | None = None
        self._body = bytearray()
        self._released = False
        self.confirmed = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start" and not self._released:
            self._start = message
            return
        if message["type"] != "http.response.body" or self._start is None or self._released:
            await self._send(message)
            return
        self._body += message.get("body", b"")
        if message.get("more_body", False) and len(self._body) < _MAX_ANSWER_HELD:
            return
        start, body = self._start, bytes(self._body)
        if int(start["status"]) == 200 and _succeeded(body):
            await self._confirm()
            self.confirmed = True
            headers = [*start.get("headers", []), (SESSION_HEADER, self._session_id.encode())]
            start = {**start, "headers": headers}
        self._released = True
        await self._send(start)
        await self._send({**message, "body": body})


def _succeeded(body: bytes) -> bool:
    try:
        answer = json.loads(body)
    except ValueError:
        return False
    return isinstance(answer, dict) and "result" in answer and "error" not in answer


async def _read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The request body (already bounded upstream), and a `receive` that gives it again."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


def _parsed(body: bytes) -> Any:
    """The JSON-RPC message in `body`, read by the SDK's own JSON parser (pydantic's), or
    None when it is not JSON to it (broken, nested too deep, a lone surrogate): the SDK
    answers those with a parse error."""
    try:
        return _JSON.validate_json(body)
    except ValueError:
        return None


def _bad_id(message: Any) -> str | None:
    """What the `id` of a request is when it is neither a string nor an integer (the SDK
    would take such a request for a notification), else None."""
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    value = message["id"]
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return None
    names = {bool: "a boolean", float: "a fraction", dict: "an object", list: "an array"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _well_formed(session_id: str) -> bool:
    return 0 < len(session_id) <= 64 and all(c in "0123456789abcdef" for c in session_id)


def _modern(scope: Scope) -> bool:
    version = _header(scope, VERSION_HEADER)
    return version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _error(code: int, message: str) -> bytes:
    error = {"code": code, "message": message}
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()


async def _reply(send: Send, status: int, body: bytes, *, allow: bool = False) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if allow:
        headers.append((b"allow", b"POST, DELETE"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
