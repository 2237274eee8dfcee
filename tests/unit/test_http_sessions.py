"""The session book: how many sessions each token holds, and when one stops counting.

Driven by a clock the test sets (the book reads time only through it), so no test waits.
"""

from __future__ import annotations

from memory_orchestrator.faces.http.sessions import SessionBook


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _book(per_token: int = 2, idle_timeout_s: float = 10.0) -> tuple[SessionBook, Clock]:
    clock = Clock()
    return SessionBook(per_token, idle_timeout_s, clock), clock


def _opened(book: SessionBook, owner: str, session_id: str) -> None:
    """`owner` opens `session_id`, and the opening request is answered."""
    assert book.reserve(owner)
    book.settle(owner, session_id)
    book.end(session_id)


def test_a_token_gets_no_slot_past_its_cap_and_other_tokens_are_not_affected() -> None:
    book, _ = _book(per_token=2)
    _opened(book, "alice", "s1")
    assert book.reserve("alice")  # being opened: counts already
    assert book.open_count("alice") == 2
    assert not book.reserve("alice")
    assert book.reserve("bob")
    assert book.counts() == {"alice": 1}


def test_a_request_that_opened_nothing_gives_its_slot_back() -> None:
    book, _ = _book(per_token=1)
    assert book.reserve("alice")
    book.settle("alice", None)
    assert book.open_count("alice") == 0
    assert book.reserve("alice")


def test_a_session_belongs_to_the_token_that_opened_it() -> None:
    book, _ = _book()
    _opened(book, "alice", "s1")
    assert book.owns("alice", "s1")
    assert not book.owns("bob", "s1")
    assert not book.owns("alice", "s2")


def test_a_closed_session_no_longer_counts() -> None:
    book, _ = _book(per_token=1)
    _opened(book, "alice", "s1")
    book.close("s1")
    assert book.open_count("alice") == 0
    assert not book.owns("alice", "s1")


def test_a_session_idle_for_the_timeout_is_forgotten() -> None:
    book, clock = _book(idle_timeout_s=10.0)
    _opened(book, "alice", "s1")
    clock.now += 9.9
    assert book.owns("alice", "s1")
    clock.now += 0.1
    assert not book.owns("alice", "s1")
    assert book.open_count("alice") == 0


def test_a_request_in_flight_holds_the_session_and_its_end_restarts_the_idle_time() -> None:
    book, clock = _book(idle_timeout_s=10.0)
    _opened(book, "alice", "s1")
    book.begin("s1")  # e.g. an open GET stream
    clock.now += 60
    assert book.owns("alice", "s1")
    book.end("s1")
    clock.now += 9.9
    assert book.owns("alice", "s1")
    clock.now += 0.1
    assert not book.owns("alice", "s1")


def test_a_session_counts_from_its_answer_and_cannot_go_idle_before_that_answer_ends() -> None:
    book, clock = _book(idle_timeout_s=10.0)
    assert book.reserve("alice")
    book.settle("alice", "s1")  # the answer that gives the id has started
    assert book.owns("alice", "s1")
    clock.now += 60  # a slow answer
    assert book.owns("alice", "s1")
    book.end("s1")
    clock.now += 10
    assert not book.owns("alice", "s1")
