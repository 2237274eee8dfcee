"""The sessions of one server (`LocalSessions`): how many each token holds, whose they are,
and when one stops counting.

Driven by a clock the test sets (the store reads time only through it), so no test waits.
"""

from __future__ import annotations

from memory_orchestrator.faces.http.sessions import LocalSessions


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _store(per_token: int = 2, idle_timeout_s: float = 10.0) -> tuple[LocalSessions, Clock]:
    clock = Clock()
    return LocalSessions(per_token, idle_timeout_s, clock), clock


def _opened(store: LocalSessions, owner: str) -> str:
    """`owner` opens a session, and its initialize succeeds."""
    session_id = store.open(owner)
    assert session_id is not None
    store.confirm(session_id)
    return session_id


def test_a_token_gets_no_session_past_its_cap_and_other_tokens_are_not_affected() -> None:
    store, _ = _store(per_token=2)
    _opened(store, "alice")
    assert store.open("alice") is not None  # being opened: counts already
    assert store.open("alice") is None
    assert store.open("bob") is not None
    assert store.counts() == {"alice": 1}


def test_an_initialize_that_failed_gives_its_slot_back_and_opens_nothing() -> None:
    store, _ = _store(per_token=1)
    session_id = store.open("alice")
    assert session_id is not None
    assert not store.use("alice", session_id)  # not confirmed: not a session yet
    store.discard(session_id)
    assert store.counts() == {}
    assert store.open("alice") is not None


def test_a_session_belongs_to_the_token_that_opened_it() -> None:
    store, _ = _store()
    session_id = _opened(store, "alice")
    assert store.use("alice", session_id)
    assert not store.use("bob", session_id)
    assert not store.end("bob", session_id)
    assert not store.use("alice", "0" * 32)


def test_an_ended_session_no_longer_counts() -> None:
    store, _ = _store(per_token=1)
    session_id = _opened(store, "alice")
    assert store.end("alice", session_id)
    assert store.counts() == {}
    assert not store.use("alice", session_id)
    assert store.open("alice") is not None


def test_a_session_idle_for_the_timeout_is_forgotten() -> None:
    store, clock = _store(idle_timeout_s=10.0)
    session_id = _opened(store, "alice")
    clock.now += 9.9
    assert store.use("alice", session_id)
    store.done(session_id)
    clock.now += 10.0
    assert not store.use("alice", session_id)
    assert store.counts() == {}


def test_a_request_in_flight_holds_the_session_and_its_end_restarts_the_idle_time() -> None:
    store, clock = _store(idle_timeout_s=10.0)
    session_id = _opened(store, "alice")
    assert store.use("alice", session_id)
    clock.now += 60  # a long call
    assert store.counts() == {"alice": 1}
    store.done(session_id)
    clock.now += 9.9
    assert store.use("alice", session_id)


def test_revoking_a_token_ends_all_its_sessions() -> None:
    store, _ = _store(per_token=3)
    for _ in range(2):
        _opened(store, "alice")
    kept = _opened(store, "bob")
    assert store.end_all("alice") == 2
    assert store.counts() == {"bob": 1}
    assert store.use("bob", kept)
