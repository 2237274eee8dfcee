"""Who is calling over MCP, and which tools they may call.

The HTTP face checks the bearer token (a missing or unknown one never gets this far: 401) and
leaves it in the request's ASGI scope as a `TokenUser`, the SDK's own `AuthenticatedUser`. The
SDK compares that user to decide whom an MCP session belongs to; `ToolAccess` reads it to decide
what the caller may do. `ToolAccess` is a server middleware of the MCP SDK: it runs once the SDK
has parsed a JSON-RPC request (`ctx.method`, `ctx.params`) and before any handler, so

- a `tools/call` of a tool the token may not call (one not in its `tools`, or `memory_write` for
  a read-only token) is answered with the JSON-RPC error `FORBIDDEN` (-32003, "forbidden: token
  'x' is read-only and may not call memory_write"), and the tool never runs;
- a `tools/list` answer names only the tools the token may call.

On stdio, and over HTTP with `--insecure-no-auth`, there is no token and nothing is checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import ListToolsResult

from memory_orchestrator.state.observability import Observer
from memory_orchestrator.state.tokens import Denied, TokenBook, TokenSpec

__all__ = ["FORBIDDEN", "TokenUser", "ToolAccess", "caller_of", "peer_of", "request_scope"]

FORBIDDEN = -32003  # a JSON-RPC server error code: the caller may not do this


class TokenUser(AuthenticatedUser):
    """The authenticated caller as the SDK sees it (`scope["user"]`), with its token's rules.

    Sessions are owned by `client_id`, the token's name (names are unique); the secret is never
    kept here."""

    def __init__(self, token: TokenSpec) -> None:
        super().__init__(AccessToken(token="", client_id=token.name, scopes=[]))
        self.token = token


def caller_of(scope: Mapping[str, Any] | None) -> TokenSpec | None:
    """The token the HTTP face authenticated for this ASGI scope; None on stdio or without auth."""
    user = scope.get("user") if scope is not None else None
    return user.token if isinstance(user, TokenUser) else None


def request_scope(request: object) -> Mapping[str, Any] | None:
    """The ASGI scope of the HTTP request behind an MCP message (None on stdio)."""
    scope = getattr(request, "scope", None)
    return scope if isinstance(scope, Mapping) else None


def peer_of(scope: Mapping[str, Any] | None) -> str | None:
    """`host:port` of the client that sent the request, for refusal logs."""
    client = scope.get("client") if scope is not None else None
    return f"{client[0]}:{client[1]}" if client else None


class ToolAccess:
    """MCP server middleware: per-token tool permissions on `tools/call` and `tools/list`."""

    def __init__(self, observer: Observer | None = None) -> None:
        self.observer = observer

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        scope = request_scope(ctx.request)
        token = caller_of(scope)
        if token is None:
            return await call_next(ctx)
        if ctx.method == "tools/call":
            denied = TokenBook.check_tool(token, _tool_name(ctx.params))
            if denied is not None:
                self._refused(scope, token, denied)
                raise MCPError(code=FORBIDDEN, message=f"forbidden: {denied.reason}")
        result = await call_next(ctx)
        if ctx.method == "tools/list":
            return _visible_tools(result, token)
        return result

    def _refused(self, scope: Mapping[str, Any] | None, token: TokenSpec, denied: Denied) -> None:
        if self.observer is not None:
            path = str(scope.get("path", "")) if scope is not None else ""
            self.observer.refused(denied.status, path, token.name, denied.reason, peer_of(scope))


def _tool_name(params: object) -> str:
    name = params.get("name") if isinstance(params, Mapping) else None
    return name if isinstance(name, str) else ""


def _visible_tools(result: HandlerResult, token: TokenSpec) -> HandlerResult:
    """A `tools/list` result without the tools `token` may not call."""

    def allowed(name: object) -> bool:
        return TokenBook.check_tool(token, str(name)) is None

    if isinstance(result, ListToolsResult):
        return result.model_copy(update={"tools": [t for t in result.tools if allowed(t.name)]})
    if isinstance(result, dict) and isinstance(result.get("tools"), list):
        tools = [t for t in result["tools"] if isinstance(t, Mapping) and allowed(t.get("name"))]
        return {**result, "tools": tools}
    return result
