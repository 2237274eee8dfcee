"""Where MCP sessions over HTTP live: each belongs to one token, a token may hold only so many,
idle ones end.

The SDK serves each HTTP request on its own (its stateless mode), so nothing of a session is
kept in a server process: what a session is (its id, the token that opened it, when it was
last used) lives in a `SessionStore`. `LocalSessions` keeps them in this process (one server);
with `[shared] state = "postgres"` they live in the database every replica shares
(`postgres.sessions.PgSessions`), so any replica serves any request of any session and a
load balancer needs no affinity. `faces.http.endpoint` applies the rules:

- a session is opened only by an `initialize` that succeeds, and counts against its token's
  cap (`[http] max_sessions_per_token`) from the moment it is being opened;
- it is used only by the token that opened it, and ends with a DELETE or after
  `[http] session_idle_timeout_s` without a request.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from memory_orchestrator.errors import BackendError

__all__ = ["LocalSessions", "SessionGauge", "SessionStore", "new_session_id"]


def new_session_id() -> str:
    """A session id: 128 random bits as hex, as the SDK makes them."""
    return uuid.uuid4().hex


class SessionStore(Protocol):
    """The MCP sessions of every token. Ids are `new_session_id()`s; `owner` is a token's
    name. `blocking`: the methods do I/O (the endpoint calls them in a worker thread)."""

    blocking: bool
    per_token: int
    idle_timeout_s: float

    def open(self, owner: str) -> str | None:
        """A new session id for `owner`, counted against its cap at once (an `initialize`
        is being answered); None when `owner` already holds `per_token` sessions."""
        ...

    def confirm(self, session_id: str) -> None:
        """The `initialize` that `open` was for succeeded: the session can be used."""
        ...

    def discard(self, session_id: str) -> None:
        """The `initialize` failed: the slot is free again."""
        ...

    def use(self, owner: str, session_id: str) -> bool:
        """True (and the session marked used now) when `owner` holds this open session and
        it has not been idle for `idle_timeout_s`; else False, whoever holds it."""
        ...

    def done(self, session_id: str) -> None:
        """A request of the session was answered: its idle time starts again."""
        ...

    def end(self, owner: str, session_id: str) -> bool:
        """Close `owner`'s session (DELETE); False when `owner` holds no such session."""
        ...

    def end_all(self, owner: str) -> int:
        """Close every session of `owner` (its token was revoked); how many there were."""
        ...

    def counts(self) -> dict[str, int]:
        """Open sessions per owner (owners with none left out)."""
        ...

    def close(self) -> None: ...


@dataclass
class _Session:
    owner: str
    opened: bool
    used_at: float
    in_flight: int = 0


class LocalSessions:
    """The sessions of one server process, in memory, over a clock (no I/O)."""

    blocking = False

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

    def open(self, owner: str) -> str | None:
        self._forget_idle()
        if sum(s.owner == owner for s in self._sessions.values()) >= self.per_token:
            return None
        session_id = new_session_id()
        self._sessions[session_id] = _Session(owner, False, self._clock(), in_flight=1)
        return session_id

    def confirm(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.opened, session.in_flight = True, 0
            session.used_at = self._clock()

    def discard(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def use(self, owner: str, session_id: str) -> bool:
        self._forget_idle()
        session = self._sessions.get(session_id)
        if session is None or not session.opened or session.owner != owner:
            return False
        session.in_flight += 1
        session.used_at = self._clock()
        return True

    def done(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.in_flight = max(0, session.in_flight - 1)
            session.used_at = self._clock()

    def end(self, owner: str, session_id: str) -> bool:
        if not self.use(owner, session_id):
            return False
        del self._sessions[session_id]
        return True

    def end_all(self, owner: str) -> int:
        mine = [i for i, s in self._sessions.items() if s.owner == owner]
        for session_id in mine:
            del self._sessions[session_id]
        return len(mine)

    def counts(self) -> dict[str, int]:
        self._forget_idle()
        return dict(Counter(s.owner for s in self._sessions.values() if s.opened))

    def close(self) -> None:
        self._sessions.clear()

    def _forget_idle(self) -> None:
        """Sessions with no request in flight and none for `idle_timeout_s` end."""
        now = self._clock()
        idle = [
            session_id
            for session_id, s in self._sessions.items()
            if s.in_flight <= 0 and now - s.used_at >= self.idle_timeout_s
        ]
        for session_id in idle:
            del self._sessions[session_id]


class SessionGauge(Collector):
    """`orchestrator_http_sessions{token}`: open MCP sessions per token, read at scrape time
    (the metrics endpoint renders in a worker thread: a shared store is read over the
    network)."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    def collect(self) -> Iterator[GaugeMetricFamily]:
        gauge = GaugeMetricFamily(
            "orchestrator_http_sessions", "Open MCP sessions over HTTP, by token", labels=["token"]
        )
        try:
            counts = self.store.counts()
        except (BackendError, OSError):  # the shared store unreachable: no sample, metrics go on
            counts = {}
        for owner, count in sorted(counts.items()):
            gauge.add_metric([owner], count)
        yield gauge
