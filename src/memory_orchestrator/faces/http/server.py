"""The MCP server over streamable HTTP, behind bearer-token auth, with `/metrics`.

The SDK's streamable-HTTP endpoint (`/mcp`) is mounted in our own Starlette app, served by
uvicorn on loopback by default. Every HTTP request passes `BearerAuth` first:

- no or unknown token: 401, an empty JSON body and `WWW-Authenticate: Bearer` (nothing else);
- a token not allowed the served store: 403.

A known token goes on in the request as a `TokenUser`. What it may do inside MCP is decided
where the SDK has parsed the JSON-RPC message (`faces.mcp.access.ToolAccess`: tool allowlist,
read-only tokens, the `tools/list` a token sees); which sessions it owns and how many it may
hold, in `faces.http.endpoint` (sessions kept in `faces.http.sessions`, or in the shared
database, so that replicas need no session affinity). `/metrics` (Prometheus text) sits
behind the same check: any valid token may read it. Without tokens the server refuses to
start unless `insecure_no_auth` is given, which opens everything.

This module never imports the MCP face (`faces.mcp.server`): the server to serve is built by the
`make_server` factory it is handed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import RequestBodyLimitMiddleware
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memory_orchestrator.errors import ConfigError
from memory_orchestrator.faces.http.endpoint import SessionGate
from memory_orchestrator.faces.http.sessions import LocalSessions, SessionGauge
from memory_orchestrator.faces.mcp.access import FORBIDDEN, TokenUser, peer_of
from memory_orchestrator.faces.sockets import listening
from memory_orchestrator.settings import Settings
from memory_orchestrator.state import shared as shared_state
from memory_orchestrator.state.observability import Metrics, Observer
from memory_orchestrator.state.tokens import Denied, TokenBook, TokenSpec, bearer, is_loopback

__all__ = [
    "MCP_PATH",
    "METRICS_PATH",
    "BearerAuth",
    "ServerFactory",
    "build_app",
    "serve",
]

MCP_PATH = "/mcp"
METRICS_PATH = "/metrics"
MAX_BODY_BYTES = 4 * 1024 * 1024

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


class BearerAuth:
    """ASGI middleware: who is calling (401) and on which store (403).

    A known token is left in the scope as a `TokenUser` (`scope["user"]`), where the SDK finds
    whom a session belongs to and the MCP face (`faces.mcp.access.ToolAccess`) which tools it may
    call."""

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
        secret = bearer(headers.get("authorization"))
        if self.book.shared:  # read over the network (bounded): off the event loop
            token = await anyio.to_thread.run_sync(self.book.authenticate, secret)
        else:
            token = self.book.authenticate(secret)
        if token is None:
            self._refused(scope, 401, None, "missing or unknown bearer token")
            await _reply(send, 401, b"{}", {"www-authenticate": 'Bearer realm="memory"'})
            return
        denied = TokenBook.check_store(token, self.store)
        if denied is not None:
            self._refused(scope, denied.status, token.name, denied.reason)
            await _reply(send, denied.status, _error_body(denied))
            return
        scope["user"] = TokenUser(token)
        await self.app(scope, receive, self._watch_size(scope, send, token.name))

    def _watch_size(self, scope: Scope, send: Send, token: str) -> Send:
        """A `send` that reports the SDK's 413 (a body over `MAX_BODY_BYTES`) as a refusal."""

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 413:
                self._refused(scope, 413, token, "request body too large")
            await send(message)

        return watched

    def _refused(self, scope: Scope, status: int, token: str | None, reason: str) -> None:
        if self.observer is not None:
            self.observer.refused(status, scope.get("path", ""), token, reason, peer_of(scope))


def _error_body(denied: Denied) -> bytes:
    error = {"code": FORBIDDEN, "message": f"forbidden: {denied.reason}"}
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()


async def _reply(send: Send, status: int, body: bytes, extra: dict[str, str] | None = None) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


ServerFactory = Callable[[Observer], MCPServer[Any]]
"""Builds the MCP server to serve, counting into the given observer (`faces.mcp.server` passes
one)."""


def build_app(
    settings: Settings,
    make_server: ServerFactory,
    *,
    insecure_no_auth: bool = False,
    observer: Observer | None = None,
    host: str | None = None,
) -> Starlette:
    """The whole HTTP app: `/mcp` (the SDK's endpoint, with a cap on sessions per token) and
    `/metrics`, behind `BearerAuth`.

    Raises ConfigError when no token is configured and `insecure_no_auth` is not set."""
    http = settings.http
    shared = shared_state.shared_tokens(settings)
    if not http.tokens and shared is None and not insecure_no_auth:
        raise ConfigError(
            "refusing to serve HTTP without tokens: add [[http.tokens]] to the config "
            "(`orchestrator token new --name NAME` prints one), or pass --insecure-no-auth"
        )
    book = None if insecure_no_auth else _book(http.tokens, shared)
    observer = observer or Observer(metrics=Metrics())
    server = make_server(observer)
    # The SDK builds its transport (and DNS-rebinding protection for loopback hosts) here, in
    # its stateless mode: sessions are ours (`faces.http.endpoint`), kept where every replica
    # finds them. Plain JSON answers instead of one SSE stream per call: the tools send no
    # progress notifications, so a stream per call is only overhead.
    server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host or http.host,
        max_request_body_size=MAX_BODY_BYTES,
        json_response=True,
        stateless_http=True,
    )
    manager = server.session_manager
    sessions = shared_state.shared_sessions(settings) or LocalSessions(
        http.max_sessions_per_token, http.session_idle_timeout_s
    )
    metrics = observer.metrics
    metrics.registry.register(SessionGauge(sessions))

    async def metrics_endpoint(_: Request) -> Response:
        text = await anyio.to_thread.run_sync(metrics.render)  # may read the shared sessions
        return Response(text, media_type=metrics.content_type)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            async with manager.run():
                yield
        finally:
            sessions.close()

    gate = SessionGate(
        StreamableHTTPASGIApp(manager), sessions, observer, manager.security_settings
    )
    mcp_endpoint = RequestBodyLimitMiddleware(gate, MAX_BODY_BYTES)
    app = Starlette(
        routes=[
            Route(MCP_PATH, mcp_endpoint),
            Route(METRICS_PATH, metrics_endpoint, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.add_middleware(BearerAuth, book=book, store=settings.backend, observer=observer)
    return app


def _book(
    tokens: list[TokenSpec], shared: Callable[[], Sequence[TokenSpec]] | None = None
) -> TokenBook:
    try:
        return TokenBook(tokens, shared=shared)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def serve(
    settings: Settings,
    make_server: ServerFactory,
    *,
    host: str | None = None,
    port: int | None = None,
    insecure_no_auth: bool = False,
) -> None:
    """Serve until stopped (Ctrl-C). Raises ConfigError (no tokens where they are needed)
    and OSError (the port in use), before anything is served."""
    bind = host or settings.http.host
    app = build_app(settings, make_server, insecure_no_auth=insecure_no_auth, host=bind)
    sock = listening(bind, settings.http.port if port is None else port)
    where = f"http://{bind}:{sock.getsockname()[1]}{MCP_PATH}"
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
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])
