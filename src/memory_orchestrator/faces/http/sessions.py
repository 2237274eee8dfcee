"""MCP sessions over HTTP: each belongs to one token, a token may hold only so many, idle ones end.

- **Ownership** is the SDK's: the HTTP face leaves the caller in `scope["user"]`, and the SDK's
  session manager answers a request that names another token's `mcp-session-id` (a DELETE too)
  with 404 "Session not found", exactly as if the session did not exist.
- **Idle timeout** is the SDK's too (`session_idle_timeout`): a session with no request in
  flight (an open GET stream counts as one) for `[http] session_idle_timeout_s` is closed.
- **The cap per token** is ours: `SessionLimits` wraps the SDK's endpoint and keeps a
  `SessionBook` of the sessions each token opened, by the SDK's own rule for when a session
  ends (a DELETE, a 404 for it, or that idle time). A request that would open one more session
  than `[http] max_sessions_per_token` is answered 429 with a JSON-RPC error, before the SDK
  creates anything.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from memory_orchestrator.faces.mcp.access import caller_of, peer_of
from memory_orchestrator.state.observability import Observer

__all__ = ["TOO_MANY_SESSIONS", "SessionBook", "SessionGauge", "SessionLimits"]

TOO_MANY_SESSIONS = -32004  # a JSON-RPC server error code: the token holds its most sessions
SESSION_HEADER = b"mcp-session-id"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass
class _Session:
    owner: str
    in_flight: int
    idle_since: float


class SessionBook:
    """The open MCP sessions of each token, and the slots being opened right now.

    A session is open from the answer that gave its id until it is closed (DELETE, or the SDK
    no longer knows it) or has had no request in flight for `idle_timeout_s` (when the SDK
    closes it). Pure bookkeeping over a clock: no I/O."""

    def __init__(
        self,
        per_token: int,
        idle_timeout_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_token = per_token
        self.idle_timeout_s = idle_timeout_s
        self._clock = clock
        self._sessions: dict[str, _Session] = {}
        self._opening: Counter[str] = Counter()

    def open_count(self, owner: str) -> int:
        """Sessions `owner` holds, those being opened included."""
        self._forget_idle()
        held = sum(1 for session in self._sessions.values() if session.owner == owner)
        return held + self._opening[owner]

    def counts(self) -> dict[str, int]:
        """Open sessions per owner (owners with none left out)."""
        self._forget_idle()
        return dict(Counter(session.owner for session in self._sessions.values()))

    def reserve(self, owner: str) -> bool:
        """Take a slot for a request that may open a session; False when `owner` has none left."""
        if self.open_count(owner) >= self.per_token:
            return False
        self._opening[owner] += 1
        return True

    def settle(self, owner: str, session_id: str | None) -> None:
        """The reserved slot's request is being answered: it opened `session_id`, or nothing
        (None). The opening request counts as in flight until `end(session_id)`."""
        self._opening[owner] -= 1
        if self._opening[owner] <= 0:
            del self._opening[owner]
        if session_id is not None:
            self._sessions[session_id] = _Session(owner, 1, self._clock())

    def owns(self, owner: str, session_id: str) -> bool:
        self._forget_idle()
        session = self._sessions.get(session_id)
        return session is not None and session.owner == owner

    def begin(self, session_id: str) -> None:
        """A request of the session is in flight: it cannot go idle meanwhile."""
        session = self._sessions.get(session_id)
        if session is not None:
            session.in_flight += 1

    def end(self, session_id: str) -> None:
        """A request of the session is answered: its idle time starts again when none is left."""
        session = self._sessions.get(session_id)
        if session is not None:
            session.in_flight -= 1
            session.idle_since = self._clock()

    def close(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def _forget_idle(self) -> None:
        now = self._clock()
        idle = [
            session_id
            for session_id, session in self._sessions.items()
            if session.in_flight <= 0 and now - session.idle_since >= self.idle_timeout_s
        ]
        for session_id in idle:
            del self._sessions[session_id]


class SessionLimits:
    """ASGI wrapper around the SDK's MCP endpoint that keeps `book` and applies its cap."""

    def __init__(self, app: ASGIApp, book: SessionBook, observer: Observer | None = None) -> None:
        self.app = app
        self.book = book
        self.observer = observer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = caller_of(scope) if scope["type"] == "http" else None
        if token is None:  # no auth (--insecure-no-auth): the SDK's overall cap applies
            await self.app(scope, receive, send)
            return
        session_id = _header(scope, SESSION_HEADER)
        if session_id is None:
            await self._opening(scope, receive, send, token.name)
        elif self.book.owns(token.name, session_id):
            await self._in_session(scope, receive, send, session_id)
        else:  # someone else's session, or one that ended: the SDK answers 404
            await self.app(scope, receive, send)

    async def _opening(self, scope: Scope, receive: Receive, send: Send, owner: str) -> None:
        if not self.book.reserve(owner):
            await self._refuse(scope, send, owner)
            return

        # Settled as the answer starts, so a client that has its session id finds it counted.
        def started(status: int, session_id: str | None) -> None:
            self.book.settle(owner, session_id if status < 400 else None)

        answer = _Answer(send, started)
        try:
            await self.app(scope, receive, answer)
        finally:
            if answer.status is None:  # no answer at all: nothing was opened
                self.book.settle(owner, None)
            elif answer.status < 400 and answer.session_id is not None:
                self.book.end(answer.session_id)

    async def _in_session(
        self, scope: Scope, receive: Receive, send: Send, session_id: str
    ) -> None:
        # Closed as the answer starts, so a client told its session ended has the slot back.
        def started(status: int, _: str | None) -> None:
            if status == 404 or (scope["method"] == "DELETE" and status < 300):
                self.book.close(session_id)

        self.book.begin(session_id)
        try:
            await self.app(scope, receive, _Answer(send, started))
        finally:
            self.book.end(session_id)

    async def _refuse(self, scope: Scope, send: Send, owner: str) -> None:
        reason = (
            f"too many open sessions: token {owner!r} already holds {self.book.per_token}, the "
            "most [http] max_sessions_per_token allows; end one (HTTP DELETE with its "
            "mcp-session-id) or wait until one has been idle for "
            f"{self.book.idle_timeout_s:g} s"
        )
        if self.observer is not None:
            self.observer.refused(429, scope.get("path", ""), owner, reason, peer_of(scope))
        error = {"code": TOO_MANY_SESSIONS, "message": reason}
        body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 429, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class _Answer:
    """A `send` that passes everything on, noting the status and any session id given, and
    calling `started(status, session_id)` before the answer leaves."""

    def __init__(self, send: Send, started: Callable[[int, str | None], None]) -> None:
        self._send = send
        self._started = started
        self.status: int | None = None
        self.session_id: str | None = None

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            self.session_id = _header(message, SESSION_HEADER)
            self._started(self.status, self.session_id)
        await self._send(message)


def _header(holder: Scope | Message, name: bytes) -> str | None:
    for key, value in holder.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


class SessionGauge(Collector):
    """`orchestrator_http_sessions{token}`: open MCP sessions per token, read at scrape time."""

    def __init__(self, book: SessionBook) -> None:
        self.book = book

    def collect(self) -> Iterator[GaugeMetricFamily]:
        gauge = GaugeMetricFamily(
            "orchestrator_http_sessions", "Open MCP sessions over HTTP, by token", labels=["token"]
        )
        for owner, count in sorted(self.book.counts().items()):
            gauge.add_metric([owner], count)
        yield gauge
