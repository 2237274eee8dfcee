"""Forget, on every store kind the suite can start (embedded, the Mnemon double and the real
Mnemon, the real npm servers behind mnemon-mcp and kg-memory, mnemonic files, a real
PostgreSQL with its shared tombstones, fused): a forgotten memory never comes back from any
read (search and context, with history too, expand from its entity or from its id, a fresh
explain, the explanation of a request made before it was forgotten, the memory read by id,
the inspector's memory page, list and graph), and every read returns it again after an undo.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import anyio
import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import (
    ContextRequest,
    ExpandRequest,
    ExplainRequest,
    ForgetRequest,
    NewMemory,
    SearchRequest,
    WriteAction,
    WriteRequest,
)
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.service.inspecting import MemoryFilter
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.forgotten import Tombstones
from memory_orchestrator.state.traces import TraceStore
from tests.mnemon_double import real_binary
from tests.stores import make_store

pytestmark = pytest.mark.integration

T = TypeVar("T")
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
REAL = [pytest.param("mnemon-real", marks=pytest.mark.mnemon_real)] if real_binary() else []
STORES = ["embedded", "mnemon", *REAL, "mnemon-mcp", "kg-memory", "mnemonic", "postgres", "fused"]

KEPT = "The Lisbon office opens at eight in the morning."
SECRET = "The parking garage code for the Lisbon office is 4421."
OTHERS = (
    "Priya leads the Atlas migration project.",
    "Marco reviews the Atlas pull requests on Fridays.",
)
QUERY = "Lisbon office parking garage code"


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(fn)


def make_tombstones(kind: str, settings: Settings, pg_dsn: str | None) -> Tombstones:
    if kind != "postgres":
        return Tombstones(settings.forgotten_path())
    from memory_orchestrator.postgres.database import Database
    from memory_orchestrator.postgres.state import PgTombstones

    return PgTombstones(Database(pg_dsn, min_size=0, max_size=2))


@pytest.fixture(params=STORES)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def dsn(kind: str, request: pytest.FixtureRequest) -> str | None:
    return str(request.getfixturevalue("pg_dsn")) if kind == "postgres" else None


@pytest.fixture
def orch(kind: str, dsn: str | None, settings: Settings, tmp_path: Path) -> Iterator[Orchestrator]:
    o = Orchestrator(
        make_store(kind, tmp_path, dsn),
        settings,
        traces=TraceStore(settings.trace_path()),
        clock=lambda: NOW,
        tombstones=make_tombstones(kind, settings, dsn),
    )
    yield o
    run(o.close)


async def write(orch: Orchestrator, content: str, entities: list[str], days_ago: float) -> str:
    memory = NewMemory(
        content=content, entities=entities, created_at=NOW - timedelta(days=days_ago)
    )
    report = await orch.write(WriteRequest(memory=memory))
    assert report.action is WriteAction.ADDED, report
    assert report.id
    return report.id


async def every_read(
    orch: Orchestrator, secret: str, kept: str, before_trace: str
) -> dict[str, list[str]]:
    """The ids each read returns (or names) for the question that finds `secret`; `kept`
    shares its entity."""

    seen: dict[str, list[str]] = {}
    for history in (False, True):
        found = await orch.search(SearchRequest(query=QUERY, history=history))
        seen[f"search history={history}"] = [i.memory_id for i in found.items]
        package = await orch.context(ContextRequest(query=QUERY, history=history))
        seen[f"context history={history}"] = [i.memory_id for i in package.items]
        if secret in package.context_block:
            seen[f"context block history={history}"] = [secret]
    by_entity = await orch.expand(ExpandRequest(entities=["Lisbon office"], hops=2))
    seen["expand from the entity"] = [i.memory_id for i in by_entity.items]
    by_id = await orch.expand(ExpandRequest(seed_ids=[kept], hops=2))
    seen["expand from a neighbour"] = [i.memory_id for i in by_id.items]
    mine = await orch.expand(ExpandRequest(seed_ids=[secret], hops=2))
    seen["expand from its id"] = [i.memory_id for i in mine.items]
    if mine.items:  # seeded from it: what it reached
        seen["expand from its id"].append(secret)
    fresh = await orch.explain(ExplainRequest(query=QUERY))
    seen["explain (fresh)"] = [c.id for c in fresh.trace.candidates] + (
        [secret] if secret in fresh.text else []
    )
    old = await orch.explain(ExplainRequest(trace_id=before_trace))
    seen["explain (before)"] = [c.id for c in old.trace.candidates] + (
        [secret] if secret in old.text else []
    )
    seen["read by id"] = [m.id for m in await orch.memories([secret])]
    inspection = orch.inspection()
    page = await inspection.memory(secret)
    seen["inspector page"] = [page.memory.id] if page is not None else []
    listed = await inspection.memories(MemoryFilter(corrected=True), 0, 100)
    seen["inspector list"] = [m.id for m in listed.memories]
    graph = await inspection.graph(entity="Lisbon office", hops=2)
    seen["inspector graph"] = [n.memory.id for n in graph.nodes if n.memory is not None]
    return seen


async def test_a_forgotten_memory_never_comes_back_until_undone(
    kind: str, orch: Orchestrator
) -> None:
    kept = await write(orch, KEPT, ["Lisbon office"], days_ago=5)
    secret = await write(orch, SECRET, ["Lisbon office"], days_ago=4)
    for n, text in enumerate(OTHERS):
        await write(orch, text, ["Atlas"], days_ago=3 - n)
    before = await orch.search(SearchRequest(query=QUERY))
    assert secret in [i.memory_id for i in before.items]
    shown = await every_read(orch, secret, kept, before.trace_id)
    # it is there to be left out: each read that can reach it does before it is forgotten
    reached = {read for read, ids in shown.items() if secret in ids}
    assert {"search history=False", "context history=False", "explain (before)"} <= reached
    unlisted = set() if orch.capabilities.listing else {"inspector list"}
    assert reached == set(shown) - unlisted

    report = await orch.forget(ForgetRequest(ids=[secret, "no-such-id"], reason="a secret"))
    assert (report.done, report.not_found) == ((secret,), ("no-such-id",))
    hidden = await every_read(orch, secret, kept, before.trace_id)
    assert {read: ids for read, ids in hidden.items() if secret in ids} == {}
    assert kept in hidden["search history=False"]  # the rest is still there
    again = await orch.forget(ForgetRequest(ids=[secret], reason="twice"))
    assert (again.done, again.unchanged) == ((), (secret,))
    stone = await orch.inspection().forgotten(secret)
    assert stone is not None
    assert (stone.reason, stone.store) == ("a secret", orch.store_name)

    undone = await orch.forget(ForgetRequest(ids=[secret], undo=True))
    assert undone.done == (secret,)
    back = await every_read(orch, secret, kept, before.trace_id)
    assert {read for read, ids in back.items() if secret in ids} == reached


async def test_replicas_on_one_postgres_share_what_is_forgotten(
    pg_dsn: str, settings: Settings
) -> None:
    """A memory forgotten through one replica is left out by the other at its next read, and
    an undo on the other brings it back to the first (no wait: each read asks the database)."""

    def replica() -> Orchestrator:
        return Orchestrator(
            make_store("postgres", Path("."), pg_dsn),
            settings,
            traces=TraceStore(None),
            clock=lambda: NOW,
            tombstones=make_tombstones("postgres", settings, pg_dsn),
        )

    one, two = replica(), replica()
    try:
        secret = await write(one, SECRET, ["Lisbon office"], days_ago=4)
        await write(one, KEPT, ["Lisbon office"], days_ago=5)

        async def found(o: Orchestrator) -> list[str]:
            result = await o.search(SearchRequest(query=QUERY))
            return [i.memory_id for i in result.items]

        assert secret in await found(two)
        await one.forget(ForgetRequest(ids=[secret], reason="shared"))
        assert secret not in await found(two)
        assert secret not in await found(one)
        await two.forget(ForgetRequest(ids=[secret], undo=True))
        assert secret in await found(one)
    finally:
        await one.close()
        await two.close()


async def test_writing_a_forgotten_memory_s_text_again_brings_it_back(settings: Settings) -> None:
    o = Orchestrator(
        EmbeddedBackend(settings.embedded_path()),
        settings,
        traces=TraceStore(None),
        tombstones=Tombstones(settings.forgotten_path()),
    )
    try:
        secret = await write(o, SECRET, ["Lisbon office"], days_ago=4)
        await o.forget(ForgetRequest(ids=[secret], reason="for now"))
        memory = NewMemory(content=SECRET, entities=["Lisbon office"])
        again = await o.write(WriteRequest(memory=memory))
        assert (again.action, again.duplicate_of) == (WriteAction.SKIPPED, secret)
        assert [m.id for m in await o.memories([secret])] == [secret]
        assert await o.forgotten() == []
    finally:
        await o.close()
