"""No memory lost to two deduplicators: the orchestrator decides, Mnemon stores.

Over the contract double (v0.2.9), the double acting as the June 2026 build (which replaces
near-duplicates itself) and the real binary (`tests.mnemon_double.kinds`): distinct facts
are never replaced, a correction supersedes exactly the memory it corrects and `history`
still shows the old value, and a restatement is written once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import anyio
import pytest

from memory_orchestrator.backends.mnemon import MnemonBackend
from memory_orchestrator.models import (
    ContextRequest,
    NewMemory,
    SearchRequest,
    WriteAction,
    WriteRequest,
)
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import MnemonSettings, Settings
from memory_orchestrator.state.traces import TraceStore
from tests.mnemon_double import JUNE_2026, fast_launcher, kinds, real_binary

pytestmark = pytest.mark.integration

T = TypeVar("T")
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
RETROS = [f"Sprint {n} retro: the deploy pipeline was slow" for n in range(1, 7)]
RATE = "The API rate limit for the billing service is {} requests per minute."


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(fn)


@pytest.fixture(params=kinds("june"))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> MnemonBackend:
    if request.param == "real":
        binary = real_binary()
        assert binary is not None
    else:
        version = JUNE_2026 if request.param == "june" else None
        binary = fast_launcher(tmp_path / "bin", version)
    return MnemonBackend(MnemonSettings(binary=binary, data_dir=tmp_path / "mnemon"))


@pytest.fixture
def orch(store: MnemonBackend, settings: Settings) -> Iterator[Orchestrator]:
    o = Orchestrator(store, settings, traces=TraceStore(settings.trace_path()), clock=lambda: NOW)
    yield o
    run(o.close)


async def live(store: MnemonBackend) -> list[str]:
    memories, _ = await store.list_memories(None, 1000)
    return [m.content for m in memories if m.superseded_by is None]


def dated(content: str, days_ago: float) -> NewMemory:
    return NewMemory(content=content, created_at=NOW - timedelta(days=days_ago))


async def test_six_numbered_retros_ingested_together_stay_six(
    orch: Orchestrator, store: MnemonBackend
) -> None:
    outcomes = await orch.ingest([dated(t, 10 - n) for n, t in enumerate(RETROS)])
    assert [o.action for o in outcomes] == [WriteAction.ADDED] * 6
    assert sorted(await live(store)) == sorted(RETROS)


async def test_six_numbered_retros_written_one_by_one_stay_six(store: MnemonBackend) -> None:
    async def main() -> list[WriteAction]:
        return [(await store.write(NewMemory(content=t))).action for t in RETROS]

    assert await main() == [WriteAction.ADDED] * 6
    assert sorted(await live(store)) == sorted(RETROS)


async def test_six_numbered_retros_written_through_memory_write_stay_six(
    orch: Orchestrator, store: MnemonBackend
) -> None:
    """The orchestrator's check reads the sprint number as what each memory is about (another
    fact, not a correction), and Mnemon's own diff never sees them (`--no-diff`)."""
    requests = [WriteRequest(memory=dated(text, 1)) for text in RETROS]
    reports = [await orch.write(r) for r in requests]
    assert [r.action for r in reports] == [WriteAction.ADDED] * 6
    assert sorted(await live(store)) == sorted(RETROS)


async def test_a_correction_supersedes_exactly_the_memory_it_corrects_and_history_keeps_it(
    orch: Orchestrator, store: MnemonBackend
) -> None:
    other = await orch.write(WriteRequest(memory=dated(RETROS[0], 5)))
    old = await orch.write(WriteRequest(memory=dated(RATE.format(100), 3)))
    new = await orch.write(WriteRequest(memory=dated(RATE.format(500), 1)))
    assert (old.action, new.action) == (WriteAction.ADDED, WriteAction.UPDATED)
    assert new.supersedes == old.id
    (was,) = await store.get_memories([old.id or ""])
    assert was.superseded_by == new.id  # marked, not deleted: the old value is still there
    assert sorted(await live(store)) == sorted([RETROS[0], RATE.format(500)])
    assert other.id is not None
    assert (await store.get_memories([other.id or ""]))[0].superseded_by is None

    package = await orch.context(ContextRequest(query="billing API rate limit"))
    assert [i.memory_id for i in package.items][:1] == [new.id]
    assert old.id not in [i.memory_id for i in package.items]
    history = await orch.context(ContextRequest(query="billing API rate limit", history=True))
    shown = {i.memory_id: i for i in history.items}
    assert old.id in shown
    assert f"superseded by {new.id}" in (shown[old.id].changed or "")


async def test_a_reversal_read_as_of_a_past_day_leaves_both_corrected_memories_out(
    orch: Orchestrator, store: MnemonBackend
) -> None:
    """A correction dates from the correcting memory's own time, not from when the link was
    written: asked as of a day after the reversal (but before today), the first text, which
    the reversal repeats byte for byte, is not current any more."""
    on, off = (
        f"The async-export feature flag is {v} in production." for v in ("enabled", "disabled")
    )
    first, second, third = [
        await orch.write(WriteRequest(memory=m))
        for m in (dated(on, 10), dated(off, 5), dated(on, 3))
    ]
    assert (second.supersedes, third.supersedes) == (first.id, second.id)
    was = {m.id: m for m in await store.get_memories([first.id or "", second.id or ""])}
    assert was[first.id or ""].superseded_at == NOW - timedelta(days=5)
    assert was[second.id or ""].superseded_at == NOW - timedelta(days=3)

    request = SearchRequest(
        query="Is async-export turned on in production?", as_of=NOW - timedelta(days=1)
    )
    found = [i.memory_id for i in (await orch.search(request)).items]
    assert found[:1] == [third.id]
    assert first.id not in found
    assert second.id not in found


async def test_a_restatement_is_written_once(orch: Orchestrator, store: MnemonBackend) -> None:
    first = await orch.write(WriteRequest(memory=dated(RATE.format(100), 2)))
    again = await orch.write(WriteRequest(memory=dated(RATE.format(100), 1)))
    assert again.action is WriteAction.SKIPPED
    assert again.id == first.id
    assert await live(store) == [RATE.format(100)]
