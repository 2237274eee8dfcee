"""Corrections are not duplicates: the write decisions and the read rules over the real
embedded store (the other stores: their adapter tests)."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import anyio
import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.backends.embedded_sql import MIGRATIONS, SCHEMA_VERSION
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import (
    ContextRequest,
    DropReason,
    NewMemory,
    SearchRequest,
    WriteAction,
    WriteReport,
    WriteRequest,
)
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.traces import TraceStore

pytestmark = pytest.mark.integration

T = TypeVar("T")
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
RATE = "The API rate limit for the billing service is {} requests per minute."
REVIEW = "Dana moved the Atlas review to {}."


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(fn)


def orchestrator(settings: Settings) -> Orchestrator:
    backend = EmbeddedBackend(settings.embedded_path())
    return Orchestrator(
        backend, settings, traces=TraceStore(settings.trace_path()), clock=lambda: NOW
    )


@pytest.fixture
def orch(settings: Settings) -> Iterator[Orchestrator]:
    o = orchestrator(settings)
    yield o
    run(o.close)


async def write(orch: Orchestrator, content: str, days_ago: float = 0.0) -> WriteReport:
    when = NOW - timedelta(days=days_ago)
    memory = NewMemory(content=content, created_at=when)
    return await orch.write(WriteRequest(memory=memory))


# ---------------------------------------------------------------- the issue's three cases


@pytest.mark.parametrize(
    ("first", "then", "changed", "query", "fresh"),
    [
        (
            RATE.format(100),
            RATE.format(500),
            "100 -> 500 requests per minute",
            "billing rate limit",
            "500",
        ),
        (
            REVIEW.format("Friday"),
            REVIEW.format("Monday"),
            "Friday -> Monday",
            "Atlas review",
            "Monday",
        ),
        (
            REVIEW.format("Friday"),
            "Dana did not move the Atlas review to Friday.",
            "negated",
            "Atlas review",
            "did not",
        ),
    ],
)
async def test_a_correction_is_written_as_an_update_and_read_first(
    orch: Orchestrator, first: str, then: str, changed: str, query: str, fresh: str
) -> None:
    old = await write(orch, first, days_ago=2)
    new = await write(orch, then)
    assert new.action is WriteAction.UPDATED
    assert (new.supersedes, new.changed) == (old.id, changed)
    assert new.reason == f"updated: {changed}; supersedes {old.id}"
    package = await orch.context(ContextRequest(query=query))
    assert package.items[0].memory_id == new.id
    assert fresh in package.context_block.split("Key recalled")[1].splitlines()[1]
    assert old.id not in [i.memory_id for i in package.items]


# ---------------------------------------------------------------- issue 32: by meaning

ISSUE_CORRECTIONS = [  # each on a fresh store: A, then B
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
        "Nightly tests run against the old schema.",
        "Nightly tests run against the new schema.",
        "old -> new",
    ),
    (
        "Maria prefers meetings in the morning.",
        "Maria no longer wants meetings in the morning.",
        "negated; prefers -> wants",
    ),
]
ISSUE_RESTATEMENTS = [
    (
        "The design review starts at 10:00 on Mondays.",
        "On Mondays the design review begins at 10:00.",
    ),
    ("Kim maintains the payments SDK.", "The payments SDK is maintained by Kim."),
]


@pytest.mark.parametrize(
    ("first", "then", "changed"), ISSUE_CORRECTIONS, ids=["branch", "cluster", "schema", "negation"]
)
async def test_a_one_word_correction_is_never_skipped_and_supersedes_the_old_value(
    orch: Orchestrator, first: str, then: str, changed: str
) -> None:
    old = await write(orch, first, days_ago=1)
    new = await write(orch, then)
    assert (new.action, new.supersedes, new.changed) == (WriteAction.UPDATED, old.id, changed)
    (kept,) = await orch.memories([old.id or ""])
    assert kept.superseded_by == new.id


@pytest.mark.parametrize(
    ("first", "then"), ISSUE_RESTATEMENTS, ids=["reordered-synonym", "passive"]
)
async def test_a_restatement_in_other_words_is_skipped_whatever_its_word_overlap(
    orch: Orchestrator, first: str, then: str
) -> None:
    old = await write(orch, first, days_ago=1)
    again = await write(orch, then)
    assert (again.action, again.duplicate_of) == (WriteAction.SKIPPED, old.id)
    assert "restates it" in again.reason


async def test_a_look_alike_of_another_subject_is_added_linked_and_supersedes_nothing(
    orch: Orchestrator,
) -> None:
    staging = await write(orch, "The staging cluster runs Postgres 15.", days_ago=1)
    prod = await write(orch, "The production cluster runs Postgres 15.")
    assert (prod.action, prod.supersedes) == (WriteAction.ADDED, None)
    assert "not the same fact (about something else: staging, production;" in prod.reason
    assert [(e.type, e.target_id) for e in prod.links][:1] == [("related", staging.id)]
    (kept,) = await orch.memories([staging.id or ""])
    assert kept.superseded_by is None


async def test_a_restatement_is_still_skipped(orch: Orchestrator) -> None:
    old = await write(orch, REVIEW.format("Friday"), days_ago=1)
    again = await write(orch, "The Atlas review was moved to Friday by Dana.")
    assert again.action is WriteAction.SKIPPED
    assert again.duplicate_of == old.id


async def test_a_look_alike_about_something_else_is_added_and_supersedes_nothing(
    orch: Orchestrator,
) -> None:
    staging = await write(orch, "The staging database password rotates every 30 days.", days_ago=1)
    prod = await write(orch, "The production database password rotates every 90 days.")
    assert prod.action is WriteAction.ADDED
    assert prod.supersedes is None
    (kept,) = await orch.memories([staging.id or ""])
    assert kept.superseded_by is None


async def test_a_reversal_back_to_an_old_value_is_written_again(orch: Orchestrator) -> None:
    first = await write(orch, RATE.format(100), days_ago=2)
    second = await write(orch, RATE.format(500), days_ago=1)
    back = await write(orch, RATE.format(100))
    assert back.action is WriteAction.UPDATED
    assert back.id not in (first.id, second.id)
    assert back.supersedes == second.id
    top = await orch.search(SearchRequest(query="billing rate limit", top_k=5))
    assert [i.memory_id for i in top.items][:1] == [back.id]


async def test_a_dry_run_says_what_it_would_supersede(orch: Orchestrator) -> None:
    old = await write(orch, RATE.format(100), days_ago=1)
    memory = NewMemory(content=RATE.format(500))
    report = await orch.write(WriteRequest(memory=memory, dry_run=True))
    assert (report.action, report.dry_run, report.id) == (WriteAction.UPDATED, True, None)
    assert report.reason == (
        f"dry run: would supersede {old.id} (100 -> 500 requests per minute); nothing written"
    )
    (kept,) = await orch.memories([old.id or ""])
    assert kept.superseded_by is None


@pytest.mark.parametrize(
    ("policy", "action", "marked"),
    [("supersede", WriteAction.UPDATED, True), ("keep_both", WriteAction.UPDATED, False)],
)
async def test_on_conflict_setting(
    settings: Settings, policy: str, action: WriteAction, marked: bool
) -> None:
    tuned = settings.model_copy(
        update={"write": settings.write.model_copy(update={"on_conflict": policy})}
    )
    o = orchestrator(tuned)
    try:
        old = await write(o, RATE.format(100), days_ago=1)
        new = await write(o, RATE.format(500))
        assert new.action is action
        (stored,) = await o.memories([old.id or ""])
        assert (stored.superseded_by == new.id) is marked
        package = await o.context(ContextRequest(query="billing rate limit"))
        assert package.items[0].memory_id == new.id  # the newest fact first either way
    finally:
        await o.close()


async def test_on_conflict_skip_keeps_the_old_behaviour(settings: Settings) -> None:
    tuned = settings.model_copy(
        update={"write": settings.write.model_copy(update={"on_conflict": "skip"})}
    )
    o = orchestrator(tuned)
    try:
        old = await write(o, RATE.format(100), days_ago=1)
        new = await write(o, RATE.format(500))
        assert (new.action, new.duplicate_of) == (WriteAction.SKIPPED, old.id)
    finally:
        await o.close()


# ---------------------------------------------------------------- reading


async def test_history_and_as_of_bring_back_what_was_true_then(orch: Orchestrator) -> None:
    old = await write(orch, RATE.format(100), days_ago=10)
    new = await write(orch, RATE.format(500), days_ago=2)
    now = await orch.search(SearchRequest(query="billing rate limit"))
    assert [i.memory_id for i in now.items] == [new.id]
    (drop,) = [d for d in now.trace.dropped if d.reason is DropReason.SUPERSEDED]
    assert drop.id == old.id
    assert drop.detail.startswith(f"superseded by {new.id} on ")
    history = await orch.search(SearchRequest(query="billing rate limit", history=True))
    assert [i.memory_id for i in history.items] == [new.id, old.id]  # the current one first
    assert (history.items[1].changed or "").startswith(f"superseded by {new.id} on ")
    back_then = NOW - timedelta(days=5)
    then = await orch.search(SearchRequest(query="billing rate limit", as_of=back_then))
    assert [i.memory_id for i in then.items] == [old.id]


async def test_two_unlinked_current_memories_that_disagree_newer_first_with_a_note(
    orch: Orchestrator,
) -> None:
    # Written straight into the store: nothing linked them, nothing marked either.
    store = EmbeddedBackend(orch.settings.embedded_path())
    try:
        older = NewMemory(
            content=REVIEW.format("Friday"), created_at=datetime(2026, 11, 2, tzinfo=UTC)
        )
        newer = NewMemory(
            content=REVIEW.format("Monday"), created_at=datetime(2026, 11, 9, tzinfo=UTC)
        )
        ids = [o.id for o in await store.write_many([newer, older])]
    finally:
        await store.close()
    package = await orch.context(ContextRequest(query="Atlas review Friday"))
    assert [i.memory_id for i in package.items][:2] == ids
    assert package.items[0].changed == (
        f"changed on 2026-11-09: was {REVIEW.format('Friday')!r} (Friday -> Monday; {ids[1]})"
    )
    assert "changed on 2026-11-09: was 'Dana moved the Atlas review to Friday.'" in (
        package.context_block
    )


# ---------------------------------------------------------------- the embedded store


async def test_a_version_1_file_is_upgraded_in_place_and_keeps_its_memories(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path)
    conn.executescript(MIGRATIONS[0].sql)  # schema version 1
    conn.execute(
        "INSERT INTO memories (id, content, type, created_at, updated_at, content_hash)"
        " VALUES ('mem_old', 'The limit is 100.', 'semantic', 1, 1, 'h')"
    )
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    backend = EmbeddedBackend(path)
    try:
        (old,) = await backend.get_memories(["mem_old"])
        assert old.superseded_by is None
        new = await backend.write(NewMemory(content="The limit is 500."))
        await backend.supersede("mem_old", new.id)
        (old,) = await backend.get_memories(["mem_old"])
        assert old.superseded_by == new.id
        with pytest.raises(BackendError, match="unknown memory id"):
            await backend.supersede("mem_old", "mem_nope")
    finally:
        await backend.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    conn.close()


async def test_two_unlinked_memories_that_differ_in_a_name_only_are_left_as_ranked(
    orch: Orchestrator,
) -> None:
    store = EmbeddedBackend(orch.settings.embedded_path())
    text = "The security team rejected the {} data export request."
    try:
        older = NewMemory(content=text.format("Hermes"), created_at=NOW - timedelta(days=9))
        newer = NewMemory(content=text.format("Orion"), created_at=NOW - timedelta(days=2))
        ids = [o.id for o in await store.write_many([older, newer])]
    finally:
        await store.close()
    found = await orch.search(SearchRequest(query="security decision on the Hermes export"))
    assert [i.memory_id for i in found.items][:1] == ids[:1]
    assert all(i.changed is None for i in found.items)
