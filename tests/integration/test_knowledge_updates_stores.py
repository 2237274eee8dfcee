"""A correction through every store: written as `updated`, marked the way the store can, and
left out of what is read (the real npm servers, real files, the Mnemon contract double)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import anyio
import pytest

from memory_orchestrator.models import (
    ContextRequest,
    NewMemory,
    SearchRequest,
    WriteAction,
    WriteReport,
    WriteRequest,
)
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.traces import TraceStore
from tests.mnemon_double import real_binary
from tests.stores import make_store

pytestmark = pytest.mark.integration

T = TypeVar("T")
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
RATE = "The API rate limit for the billing service is {} requests per minute."
REAL = [pytest.param("mnemon-real", marks=pytest.mark.mnemon_real)] if real_binary() else []
STORES = ["mnemon-mcp", "kg-memory", "mnemonic", "mnemon", "mnemon-june", *REAL, "fused"]


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(fn)


@pytest.fixture(params=STORES)
def orch(
    request: pytest.FixtureRequest, settings: Settings, tmp_path: Path
) -> Iterator[Orchestrator]:
    store = make_store(request.param, tmp_path)
    o = Orchestrator(store, settings, traces=TraceStore(settings.trace_path()), clock=lambda: NOW)
    yield o
    run(o.close)


async def write(
    orch: Orchestrator, content: str, days_ago: float
) -> tuple[str, WriteAction, str | None, str | None]:
    memory = NewMemory(content=content, created_at=NOW - timedelta(days=days_ago))
    report = await orch.write(WriteRequest(memory=memory))
    return report.id or "", report.action, report.supersedes, report.changed


CASES = [  # the three writes: a number, a date, a negation
    (
        RATE.format(100),
        RATE.format(500),
        "100 -> 500 requests per minute",
        "billing API rate limit",
    ),
    (
        "Dana moved the Atlas review to Friday.",
        "Dana moved the Atlas review to Monday.",
        "Friday -> Monday",
        "Atlas review",
    ),
    (
        "Dana moved the Atlas review to Friday.",
        "Dana did not move the Atlas review to Friday.",
        "negated",
        "Atlas review",
    ),
]


@pytest.mark.parametrize(
    ("first", "then", "detail", "query"), CASES, ids=["number", "date", "negation"]
)
async def test_a_correction_is_an_update_the_store_marks_and_reads_leave_out(
    orch: Orchestrator, first: str, then: str, detail: str, query: str
) -> None:
    old, action, _, _ = await write(orch, first, days_ago=3)
    assert action is WriteAction.ADDED
    new, action, supersedes, changed = await write(orch, then, days_ago=1)
    assert (action, supersedes, changed) == (WriteAction.UPDATED, old, detail)
    package = await orch.context(ContextRequest(query=query))
    ids = [i.memory_id for i in package.items]
    assert ids[:1] == [new]
    assert old not in ids
    assert then.rstrip(".") in package.context_block
    assert first.rstrip(".") not in package.context_block


async def test_a_restatement_is_skipped_in_every_store(orch: Orchestrator) -> None:
    old, _, _, _ = await write(orch, RATE.format(100), days_ago=3)
    again, action, supersedes, _ = await write(
        orch, "The billing service's API rate limit is 100 requests per minute.", days_ago=1
    )
    assert (action, again, supersedes) == (WriteAction.SKIPPED, old, None)


# issue 32: the write path's reading by meaning, over every store
SWAPS = [
    (
        "We publish the docs site from the gh-pages branch.",
        "We publish the docs site from the main branch.",
        "gh-pages -> main",
    ),
    (
        "The API is hosted on the staging cluster.",
        "The API is hosted on the production cluster.",
        "staging -> production",
    ),
    (
        "Maria prefers meetings in the morning.",
        "Maria no longer wants meetings in the morning.",
        "negated; prefers -> wants",
    ),
]


@pytest.mark.parametrize(("first", "then", "changed"), SWAPS, ids=["branch", "cluster", "negation"])
async def test_a_one_word_correction_supersedes_in_every_store(
    orch: Orchestrator, first: str, then: str, changed: str
) -> None:
    old, _, _, _ = await write(orch, first, days_ago=3)
    new, action, supersedes, detail = await write(orch, then, days_ago=1)
    assert (action, supersedes, detail) == (WriteAction.UPDATED, old, changed)
    found = await orch.search(SearchRequest(query=then))
    ids = [i.memory_id for i in found.items]
    assert ids[:1] == [new]
    assert old not in ids


@pytest.mark.parametrize(
    ("first", "then"),
    [
        (
            "The design review starts at 10:00 on Mondays.",
            "On Mondays the design review begins at 10:00.",
        ),
        ("Kim maintains the payments SDK.", "The payments SDK is maintained by Kim."),
    ],
    ids=["reordered-synonym", "passive"],
)
async def test_a_restatement_in_other_words_is_skipped_in_every_store(
    orch: Orchestrator, first: str, then: str
) -> None:
    old, _, _, _ = await write(orch, first, days_ago=3)
    again, action, supersedes, _ = await write(orch, then, days_ago=1)
    assert (action, again, supersedes) == (WriteAction.SKIPPED, old, None)


async def test_a_look_alike_is_added_in_every_store_and_both_stay_current(
    orch: Orchestrator,
) -> None:
    staging, _, _, _ = await write(orch, "The staging cluster runs Postgres 15.", days_ago=3)
    prod, action, supersedes, _ = await write(orch, "The production cluster runs Postgres 15.", 1)
    assert (action, supersedes) == (WriteAction.ADDED, None)
    found = await orch.search(SearchRequest(query="cluster runs Postgres 15"))
    assert {staging, prod} <= {i.memory_id for i in found.items}


@pytest.mark.parametrize("kind", ["kg-memory", "mnemonic", "mnemon", "mnemon-june", *REAL, "fused"])
async def test_history_brings_the_corrected_memory_back_where_the_store_keeps_it(
    kind: str, settings: Settings, tmp_path: Path
) -> None:
    o = Orchestrator(
        make_store(kind, tmp_path),
        settings,
        traces=TraceStore(settings.trace_path()),
        clock=lambda: NOW,
    )
    try:
        old, _, _, _ = await write(o, RATE.format(100), days_ago=3)
        new, _, _, _ = await write(o, RATE.format(500), days_ago=1)
        found = await o.search(SearchRequest(query="billing API rate limit", history=True))
        assert [i.memory_id for i in found.items][:2] == [new, old]
        assert (found.items[1].changed or "").startswith(f"superseded by {new} on ")
    finally:
        await o.close()


@pytest.mark.parametrize("kind", STORES)
async def test_a_reversal_back_to_a_corrected_value_is_written_again(
    kind: str, settings: Settings, tmp_path: Path
) -> None:
    on = "The new-checkout feature flag is enabled in production."
    off = "The new-checkout feature flag is disabled in production."
    store = make_store(kind, tmp_path)
    o = Orchestrator(store, settings, traces=TraceStore(settings.trace_path()), clock=lambda: NOW)
    try:
        reports: list[WriteReport] = []
        for content in (on, off, on):  # no created_at: the store dates them (or not)
            request = WriteRequest(memory=NewMemory(content=content))
            reports.append(await o.write(request))
        actions = [r.action for r in reports]
        assert actions == [WriteAction.ADDED, WriteAction.UPDATED, WriteAction.UPDATED]
        assert reports[2].supersedes == reports[1].id
        assert reports[2].id not in (reports[0].id, reports[1].id)
        found = await o.search(SearchRequest(query="new-checkout flag production"))
        assert [i.memory_id for i in found.items][:1] == [reports[2].id]
    finally:
        await o.close()
