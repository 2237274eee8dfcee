"""Who may look, and what: the inspector's safety rules in one ASGI middleware.

- **Loopback, no token** (the default): only a Host header naming this machine is served
  (`localhost`, `127.0.0.1`, `[::1]`), so a web page cannot reach the inspector through a
  name it rebinds to 127.0.0.1 (DNS rebinding).
- **Off loopback** (or `token_required`): every request but `/login` and `/static` needs a
  bearer token of `[[http.tokens]]` (the HTTP server's token book, `state.tokens.TokenBook`:
  the same hashes, store allowlist and tool rules): an `Authorization: Bearer` header, or a
  session cookie the `/login` form sets (HttpOnly, SameSite=Strict; the session keeps the
  secret on the server and checks it again on every request, so a token removed from the
  config stops working at once).
- **Per page, per tool**: a token sees a page only where it may call the tool the page stands
  for (`PAGE_TOOLS`); forgetting (and its undo) needs `memory_forget`, so a read-only token
  sees no forget button and is refused (403) if it posts anyway.
- **Forms that change anything** (forget, login, logout) must come from this origin (the
  Origin header, else the Referer) and carry the session's CSRF token.
- **Every answer** carries a Content-Security-Policy without scripts or outside sources,
  `nosniff`, no framing, `no-store`, and a `Server-Timing` header (`app;dur=...`: the time
  the server spent, which `bench/bench_ui.py` reads).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import anyio.to_thread

from memory_orchestrator.service.inspecting import Quiet
from memory_orchestrator.state.tokens import TokenBook, TokenSpec, bearer

__all__ = [
    "COOKIE",
    "PAGE_TOOLS",
    "Access",
    "Guard",
    "Sessions",
    "same_origin",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "mo_inspector"
OPEN_PATHS = ("/login", "/static/")
LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
SESSION_IDLE_S = 8 * 3600
MAX_SESSIONS = 1000

# The tool each page stands for: a token sees the page only where it may call the tool.
PAGE_TOOLS = {
    "/": "memory_search",
    "/memories": "memory_search",
    "/traces": "memory_explain",
    "/graph": "memory_expand",
    "/health": "memory_health",
    "/eval": "memory_search",
}
FORGET_TOOL = "memory_forget"

SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self';"
        b" frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]


@dataclass(frozen=True)
class Access:
    """Who is looking: a token, or nobody (loopback without tokens: the machine's user)."""

    token: TokenSpec | None
    session: str | None = None

    @property
    def name(self) -> str | None:
        return self.token.name if self.token else None

    def denied(self, tool: str) -> str | None:
        """Why this caller may not use `tool` (None: it may)."""
        if self.token is None:
            return None
        refused = TokenBook.check_tool(self.token, tool)
        return refused.reason if refused else None

    def may(self, tool: str) -> bool:
        return self.denied(tool) is None

    @property
    def can_forget(self) -> bool:
        return self.may(FORGET_TOOL)


class Sessions:
    """Browser sessions made by `/login`: a random id (the cookie) -> the secret, on the
    server only; idle ones expire."""

    def __init__(self, *, idle_s: float = SESSION_IDLE_S, most: int = MAX_SESSIONS) -> None:
        self._idle_s, self._most = idle_s, most
        self._known: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._key = secrets.token_bytes(32)  # signs CSRF tokens; new with every process

    def open(self, secret: str) -> str:
        session = secrets.token_urlsafe(32)
        self._known[session] = (secret, time.monotonic())
        while len(self._known) > self._most:
            self._known.popitem(last=False)
        return session

    def secret(self, session: str | None) -> str | None:
        if not session:
            return None
        found = self._known.get(session)
        if found is None:
            return None
        secret, used = found
        now = time.monotonic()
        if now - used > self._idle_s:
            del self._known[session]
            return None
        self._known[session] = (secret, now)
        self._known.move_to_end(session)
        return secret

    def close(self, session: str | None) -> None:
        if session:
            self._known.pop(session, None)

    def csrf(self, session: str | None) -> str:
        """The CSRF token of a session (or of the local user without one)."""
        message = (session or "local").encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def csrf_ok(self, session: str | None, presented: str | None) -> bool:
        return bool(presented) and hmac.compare_digest(self.csrf(session), presented or "")


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _cookie(headers: dict[str, str], name: str) -> str | None:
    for part in headers.get("cookie", "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


def _hostname(host_header: str) -> str:
    return (urlsplit(f"//{host_header}").hostname or "").lower()


def same_origin(scope: Scope) -> bool:
    """Whether a request that changes something comes from a page of this server: its
    Origin (else its Referer) names the scheme and host the request was sent to."""
    headers = _headers(scope)
    own = f"{scope.get('scheme', 'http')}://{headers.get('host', '')}"
    origin = headers.get("origin")
    if origin and origin != "null":
        return origin == own
    referer = headers.get("referer") or ""
    return referer == own or referer.startswith(own + "/")


class Guard:
    """ASGI middleware: the rules of the module docstring, before any page runs. The
    `Access` it decides is left in `scope["state"]["access"]`."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        book: TokenBook | None,
        store: str,
        sessions: Sessions,
        local_only: bool,
        quiet: Quiet | None = None,
    ) -> None:
        self.app, self.book, self.store = app, book, store
        self.sessions, self.local_only = sessions, local_only
        self.quiet = quiet  # told of each request in flight: the start-up work gives way

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        send = _with_headers(send, started)
        headers = _headers(scope)
        if self.local_only and _hostname(headers.get("host", "")) not in LOCAL_NAMES:
            await _plain(send, 421, "this inspector answers only to localhost")
            return
        path: str = scope.get("path", "")
        access = Access(None)
        if self.book is not None and not path.startswith(OPEN_PATHS):
            session = _cookie(headers, COOKIE)
            presented = bearer(headers.get("authorization"))
            secret = presented or self.sessions.secret(session)
            if self.book.shared:  # read over the network (bounded): off the event loop
                token = await anyio.to_thread.run_sync(self.book.authenticate, secret)
            else:
                token = self.book.authenticate(secret)
            if token is None and presented:  # a script with a wrong token: no login page
                await _plain(send, 401, "unknown bearer token")
                return
            if token is None:
                await _to_login(send, path, scope.get("query_string", b""))
                return
            refused = TokenBook.check_store(token, self.store)
            if refused is not None:
                await _plain(send, refused.status, f"forbidden: {refused.reason}")
                return
            access = Access(token, session if self.sessions.secret(session) else None)
        scope.setdefault("state", {})["access"] = access
        if self.quiet is None:
            await self.app(scope, receive, send)
            return
        self.quiet.enter()
        try:
            await self.app(scope, receive, send)
        finally:
            self.quiet.leave()


def _with_headers(send: Send, started: float) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            took = (time.perf_counter() - started) * 1000
            extra = [*SECURITY_HEADERS, (b"server-timing", f"app;dur={took:.1f}".encode())]
            message["headers"] = [*message.get("headers", []), *extra]
        await send(message)

    return sending


async def _plain(send: Send, status: int, text: str) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8")],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _to_login(send: Send, path: str, query: bytes) -> None:
    wanted = path + ("?" + query.decode("latin-1") if query else "")
    where = "/login?next=" + quote(wanted, safe="")
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [(b"location", where.encode()), (b"www-authenticate", b"Bearer")],
        }
    )
    await send({"type": "http.response.body", "body": b""})
