"""What `memory_health` checks, in the order that keeps it within its bound.

The store's checks (its own, then a search probe: two calls of at most `retrieval.timeout_s`
each), then the outbox's (a replay within `writing.REPLAY_S`; after the store's, so that a
replay's write, which holds the store's writer, is not read as the store's own state), and
beside them all the wait for the traces stored behind the requests (at most `timeout_s`; a
failure to store one shows). So health answers within 2 x `timeout_s` + `REPLAY_S`, whatever
it waits on (docs/explanation/reliability.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.errors import unexpected_errors
from memory_orchestrator.models import HealthCheck, Status
from memory_orchestrator.service.recorder import TraceRecorder
from memory_orchestrator.service.store_calls import StoreCalls, store_checks

if TYPE_CHECKING:
    from memory_orchestrator.service.writing import WritePath


async def service_checks(
    store: MemoryBackend,
    calls: StoreCalls,
    indexes: Callable[[], HealthCheck | None],
    writes: WritePath | None,
    recorder: TraceRecorder,
    replay: bool = True,
) -> list[HealthCheck]:
    """The checks (see the module docstring); `writes` None: the outbox is off; `replay`
    off: the outbox's queue is read, not replayed. Bugs caught at the process edges since
    the service started (`errors.unexpected`) make one more check."""
    traces: list[HealthCheck | None] = []

    async def stored() -> None:
        traces.append(await recorder.stored_check(calls.timeout_s))

    async with anyio.create_task_group() as group:
        group.start_soon(stored)
        checks = await store_checks(store, calls)
        semantic = indexes()
        checks += [semantic] if semantic is not None else []
        if writes is not None:
            checks.append(await writes.health_check(replay=replay))
    return checks + [c for c in traces if c is not None] + bugs_check(recorder.bugs_before)


def bugs_check(before: dict[str, int]) -> list[HealthCheck]:
    """A degraded `unexpected_errors` check naming the places that caught a bug since
    `before`; none while there were none."""
    now = unexpected_errors()
    since = {place: n - before.get(place, 0) for place, n in sorted(now.items())}
    since = {place: n for place, n in since.items() if n > 0}
    if not since:
        return []
    where = ", ".join(f"{place} ({n})" for place, n in since.items())
    detail = f"{sum(since.values())} bug(s) caught, each logged with its traceback: {where}"
    return [HealthCheck(name="unexpected_errors", status=Status.DEGRADED, detail=detail)]
