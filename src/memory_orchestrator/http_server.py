"""The MCP server over streamable HTTP, behind bearer-token auth, with `/metrics`.

The SDK's streamable-HTTP endpoint (`/mcp`) is mounted in our own Starlette app, served by
uvicorn on loopback by default. Every HTTP request passes `BearerAuth` first:

- no or unknown token: 401, an empty JSON body and `WWW-Authenticate: Bearer` (nothing else);
- a token not allowed the served store: 403;
- a `tools/call` of a tool the token may not call (or `memory_write` with a read-only token):
  403 with a JSON-RPC error naming the tool, which MCP clients raise as an `MCPError`;
- `tools/list` answers list only the tools the token may call.

`/metrics` (Prometheus text) sits behind the same check: any valid token may read it. Without
tokens the server refuses to start unless `insecure_no_auth` is given, which opens everything.
"""

from __future__ import annotations

import ipaddress
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memory_orchestrator.auth import Denied, TokenBook, TokenSpec, bearer
from memory_orchestrator.errors import ConfigError
from memory_orchestrator.mcp_server import CALLER_KEY, create_server
from memory_orchestrator.observability import Metrics, Observer
from memory_orchestrator.settings import Settings

__all__ = ["MCP_PATH", "METRICS_PATH", "BearerAuth", "build_app", "is_loopback", "serve"]

MCP_PATH = "/mcp"
METRICS_PATH = "/metrics"
MAX_BODY_BYTES = 4 * 1024 * 1024
FORBIDDEN = -32003  # a JSON-RPC server error code: the caller may not do this

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

INSECURE_WARNING = (
    "WARNING: serving MCP over HTTP WITHOUT AUTHENTICATION (--insecure-no-auth): anyone who "
    "can reach {where} can read and write every memory. Configure [[http.tokens]] instead "
    "(`orchestrator token new`)."
)

EXPOSED_WARNING = (
    "WARNING: binding {host}, not loopback: other machines can reach this server, and bearer "
    "tokens cross the network in clear text unless a TLS proxy sits in front."
)


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and `localhost`; False for anything else (0.0.0.0 too)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class BearerAuth:
    """ASGI middleware: who is calling (401), on which store (403), which tool (403)."""

    def __init__(
        self, app: ASGIApp, book: TokenBook | None, store: str, observer: Observer | None = None
    ) -> None:
        self.app = app
        self.book = book  # None = --insecure-no-auth
        self.store = store
        self.observer = observer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" or self.book is None:
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websockets here: close rather than pass unchecked
            await send({"type": "websocket.close", "code": 1008})
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        token = self.book.authenticate(bearer(headers.get("authorization")))
        if token is None:
            self._refused(scope, 401, None, "missing or unknown bearer token")
            await _reply(send, 401, b"{}", {"www-authenticate": 'Bearer realm="memory"'})
            return
        denied = TokenBook.check_store(token, self.store)
        if denied is not None:
            self._refused(scope, denied.status, token.name, denied.reason)
            await _reply(send, denied.status, _error_body(None, denied))
            return
        scope.setdefault("state", {})[CALLER_KEY] = token.name
        if scope["method"] == "POST" and scope["path"] == MCP_PATH:
            checked = await self._checked_call(scope, receive, send, token)
            if checked is not None:
                await self.app(scope, *checked)
            return
        await self.app(scope, receive, send)

    async def _checked_call(
        self, scope: Scope, receive: Receive, send: Send, token: TokenSpec
    ) -> tuple[Receive, Send] | None:
        """Read the JSON-RPC body and refuse it (None), or hand back a `receive` that replays
        it and a `send` that shows a `tools/list` answer only the tools the token may call."""
        body = await _read_body(receive, MAX_BODY_BYTES)
        if body is None:
            self._refused(scope, 413, token.name, "request body too large")
            await _reply(send, 413, b'{"error": "request body too large"}')
            return None
        messages = _messages(body)
        refusal = _refusal(token, messages)
        if refusal is not None:
            self._refused(scope, refusal[1].status, token.name, refusal[1].reason)
            await _reply(send, refusal[1].status, _error_body(*refusal))
            return None
        if any(m.get("method") == "tools/list" for m in messages):
            send = _listing_for(token, send)
        return _replay(body, receive), send

    def _refused(self, scope: Scope, status: int, token: str | None, reason: str) -> None:
        if self.observer is not None:
            client = scope.get("client")
            peer = f"{client[0]}:{client[1]}" if client else None
            self.observer.refused(status, scope.get("path", ""), token, reason, peer)


def _messages(body: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages in a body; malformed JSON gives none (the SDK answers it)."""
    try:
        document = json.loads(body)
    except ValueError:
        return []
    found = document if isinstance(document, list) else [document]
    return [message for message in found if isinstance(message, dict)]


def _refusal(token: TokenSpec, messages: list[dict[str, Any]]) -> tuple[Any, Denied] | None:
    """The first `tools/call` the token may not make (JSON-RPC id, why)."""
    for message in messages:
        if message.get("method") != "tools/call":
            continue
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        denied = TokenBook.check_tool(token, name if isinstance(name, str) else "")
        if denied is not None:
            return message.get("id"), denied
    return None


def _listing_for(token: TokenSpec, send: Send) -> Send:
    """A `send` that drops the tools `token` may not call from a JSON `tools/list` answer."""
    start: Message | None = None
    chunks: list[bytes] = []

    async def filtered(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start" and _is_json(message):
            start = message
            return
        if start is None or message["type"] != "http.response.body":
            await send(message)
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        body = _visible_tools(b"".join(chunks), token)
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", b"%d" % len(body)))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    return filtered


def _is_json(start: Message) -> bool:
    for key, value in start.get("headers", []):
        if key.lower() == b"content-type":
            return bool(value.lower().startswith(b"application/json"))
    return False


def _visible_tools(body: bytes, token: TokenSpec) -> bytes:
    try:
        answer = json.loads(body)
        tools = answer["result"]["tools"]
    except (ValueError, KeyError, TypeError):
        return body
    if not isinstance(tools, list):
        return body
    answer["result"]["tools"] = [
        tool
        for tool in tools
        if isinstance(tool, dict) and TokenBook.check_tool(token, str(tool.get("name"))) is None
    ]
    return json.dumps(answer, separators=(",", ":")).encode()


def _error_body(request_id: Any, denied: Denied) -> bytes:
    error = {"code": FORBIDDEN, "message": f"forbidden: {denied.reason}"}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


async def _reply(send: Send, status: int, body: bytes, extra: dict[str, str] | None = None) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def build_app(
    settings: Settings,
    *,
    insecure_no_auth: bool = False,
    observer: Observer | None = None,
    host: str | None = None,
) -> Starlette:
    """The whole HTTP app: `/mcp` (the SDK's endpoint) and `/metrics`, behind `BearerAuth`.

    Raises ConfigError when no token is configured and `insecure_no_auth` is not set."""
    tokens = settings.http.tokens
    if not tokens and not insecure_no_auth:
        raise ConfigError(
            "refusing to serve HTTP without tokens: add [[http.tokens]] to the config "
            "(`orchestrator token new --name NAME` prints one), or pass --insecure-no-auth"
        )
    book = None if insecure_no_auth else _book(tokens)
    observer = observer or Observer(metrics=Metrics())
    server = create_server(settings, observer)
    # The SDK builds its session manager (and DNS-rebinding protection for loopback hosts)
    # here; we keep its `/mcp` route and run the manager in our own lifespan. Plain JSON
    # answers instead of one SSE stream per call: the tools send no progress notifications,
    # and in a side-by-side check over loopback calls were about 15% faster.
    sdk_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host or settings.http.host,
        max_request_body_size=MAX_BODY_BYTES,
        json_response=True,
    )
    metrics = observer.metrics

    async def metrics_endpoint(_: Request) -> Response:
        return Response(metrics.render(), media_type=metrics.content_type)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run():
            yield

    app = Starlette(
        routes=[*sdk_app.routes, Route(METRICS_PATH, metrics_endpoint, methods=["GET"])],
        lifespan=lifespan,
    )
    app.add_middleware(BearerAuth, book=book, store=settings.backend, observer=observer)
    return app


def _book(tokens: list[TokenSpec]) -> TokenBook:
    try:
        return TokenBook(tokens)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def serve(
    settings: Settings,
    *,
    host: str | None = None,
    port: int | None = None,
    insecure_no_auth: bool = False,
) -> None:
    """Serve until stopped (Ctrl-C)."""
    bind = host or settings.http.host
    app = build_app(settings, insecure_no_auth=insecure_no_auth, host=bind)
    where = f"http://{bind}:{port or settings.http.port}{MCP_PATH}"
    if not is_loopback(bind):
        print(EXPOSED_WARNING.format(host=bind), file=sys.stderr, flush=True)
    if insecure_no_auth:
        print(INSECURE_WARNING.format(where=where), file=sys.stderr, flush=True)
    else:
        print(
            f"memory-orchestrator: serving {where} for {len(settings.http.tokens)} token(s)",
            file=sys.stderr,
            flush=True,
        )
    config = uvicorn.Config(
        app,
        host=bind,
        port=port or settings.http.port,
        log_level="warning",
        access_log=False,
    )
    uvicorn.Server(config).run()
