"""Retry policy and the outbox file, on their own."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import NewMemory, OutboxState, WriteAction, WriteRequest
from memory_orchestrator.service.resilience import RetryPolicy, replay_on_schedule, retry
from memory_orchestrator.state.outbox import Outbox
from memory_orchestrator.text import content_hash


def test_backoff_grows_exponentially_is_capped_and_jittered() -> None:
    policy = RetryPolicy(attempts=10, base_delay_s=0.1, max_delay_s=1.0)
    highs = [policy.delay(n, rand=lambda: 1.0) for n in range(1, 8)]
    lows = [policy.delay(n, rand=lambda: 0.0) for n in range(1, 8)]
    assert highs == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0])
    assert lows == pytest.approx([h / 2 for h in highs])


class Flaky:
    """Fails `failures` times with `error`, then answers "ok"."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "ok"


async def go(flaky: Flaky, policy: RetryPolicy, slept: list[float], **options: object) -> str:
    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    return await retry(flaky, policy, "op", sleep=sleep, **options)  # type: ignore[arg-type]


async def test_a_transient_error_is_retried_until_it_succeeds() -> None:
    slept: list[float] = []
    flaky = Flaky(2, BackendError("busy", transient=True))
    assert (
        await go(flaky, RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.05), slept) == "ok"
    )
    assert flaky.calls == 3
    assert len(slept) == 2
    assert all(0 < s <= 0.05 for s in slept)


async def test_retries_are_bounded_by_attempts() -> None:
    slept: list[float] = []
    flaky = Flaky(10, BackendError("busy", transient=True))
    with pytest.raises(BackendError, match="busy"):
        await go(flaky, RetryPolicy(attempts=4, base_delay_s=0.0), slept)
    assert flaky.calls == 4
    assert len(slept) == 3


@pytest.mark.parametrize("error", [BackendError("refused"), TimeoutError(), ValueError("bug")])
async def test_other_errors_are_never_retried(error: Exception) -> None:
    slept: list[float] = []
    flaky = Flaky(1, error)
    with pytest.raises(type(error)):
        await go(flaky, RetryPolicy(attempts=5, base_delay_s=0.0), slept)
    assert flaky.calls == 1
    assert slept == []


async def test_a_check_before_the_retry_can_answer_instead_of_a_second_try() -> None:
    slept: list[float] = []
    flaky = Flaky(1, BackendError("lost answer", transient=True))

    async def already_there() -> str:
        return "found"

    assert (
        await go(flaky, RetryPolicy(base_delay_s=0.0), slept, before_retry=already_there) == "found"
    )
    assert flaky.calls == 1


def test_the_content_hash_ignores_whitespace_and_unicode_form() -> None:
    assert content_hash("Café  opens\tat 8") == content_hash("Cafe\u0301 opens at 8")
    assert content_hash("a") != content_hash("b")


def request(content: str) -> WriteRequest:
    return WriteRequest(memory=NewMemory(content=content))


def test_the_outbox_keeps_order_across_reopening_and_delivers_once(tmp_path: Path) -> None:
    path = tmp_path / "box" / "outbox.db"
    box = Outbox(path)
    assert box.depth() == 0
    assert not path.exists()  # reading never creates the file
    seqs = [box.put(request(c), "store down").seq for c in ("one", "two", "three")]
    box.failed(seqs[0], "still down")
    box.close()
    again = Outbox(path)
    pending = again.pending()
    assert [p.seq for p in pending] == seqs
    assert [p.request.memory.content for p in pending] == ["one", "two", "three"]
    assert pending[0].attempts == 1
    assert again.last_error() == "still down"
    done = again.delivered(seqs[0], "mem_1", WriteAction.ADDED)
    assert done.state is OutboxState.DELIVERED
    assert [p.seq for p in again.pending()] == seqs[1:]
    assert again.depth() == 2
    assert [e.seq for e in again.entries(delivered=True)] == seqs
    again.close()


async def test_the_background_replay_backs_off_while_nothing_gets_through_and_never_stops() -> None:
    """(delivered, waiting) per replay: down twice, an outbox error, down, then a delivery,
    then empty; the pause doubles while writes wait undelivered, up to its cap."""
    answers: list[tuple[int, int] | Exception] = [
        (0, 2), (0, 2), OSError("outbox unreadable"), (0, 2), (1, 1), (1, 0), (0, 0),
    ]  # fmt: skip
    slept: list[float] = []

    async def replay() -> tuple[int, int]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def sleep(seconds: float) -> None:
        if not answers:
            raise anyio.get_cancelled_exc_class()
        slept.append(seconds)

    with pytest.raises(anyio.get_cancelled_exc_class()):
        await replay_on_schedule(replay, 1.0, most_s=5.0, sleep=sleep)
    assert slept == [1.0, 2.0, 4.0, 5.0, 5.0, 1.0, 1.0]
