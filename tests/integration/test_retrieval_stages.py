"""Retriever and expander over a real embedded store: fusion, partial results, hop budget,
edge-type allowlist and fan-out cap."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from memory_orchestrator.backends import base, embedded
from memory_orchestrator.backends.base import MemoryBackend, dispatching
from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import EventKind, MemoryType, NewMemory, SearchFilters, SearchHit
from memory_orchestrator.pipeline import retriever
from memory_orchestrator.pipeline.expander import ExpansionLimits, expand
from memory_orchestrator.pipeline.retriever import Hit, Prefetch, Retrieval, SubQuery, retrieve
from tests.events import kinds, said
from tests.factories import NOW
from tests.faults import FaultyBackend

pytestmark = pytest.mark.integration


@pytest.fixture
def chain(tmp_path: Path) -> Iterator[tuple[EmbeddedBackend, list[str]]]:
    """Ten memories in a temporal chain m0 - m1 - ... - m9, plus a causal link m0 -> m5."""
    backend = EmbeddedBackend(tmp_path / "m.db")

    async def load() -> list[str]:
        outcomes = await backend.write_many(
            [
                NewMemory(
                    content=f"note {i} about topic{i} and the shared project",
                    type=MemoryType.EPISODIC,
                    created_at=NOW - timedelta(days=10 - i),
                )
                for i in range(10)
            ]
        )
        ids = [o.id for o in outcomes]
        await backend.link(ids[0], ids[5], "causal", 0.9)
        return ids

    ids = anyio.run(load)
    yield backend, ids
    anyio.run(backend.close)


def limits(**kw: object) -> ExpansionLimits:
    base: dict[str, object] = {
        "hops": 1,
        "edge_types": ("temporal", "causal"),
        "fanout": 10,
        "max_new": 30,
        "timeout_s": 5.0,
    }
    base.update(kw)
    return ExpansionLimits(**base)  # type: ignore[arg-type]


async def test_subqueries_are_fused_and_sources_kept(
    chain: tuple[EmbeddedBackend, list[str]],
) -> None:
    backend, ids = chain
    got = await retrieve(
        backend, [SubQuery("topic3"), SubQuery("topic3 topic4")], per_query=5, timeout_s=5
    )
    assert got.candidates[0].memory.id == ids[3]
    assert len(got.candidates[0].sources) == 2  # found by both subqueries
    assert got.calls == 2
    assert not got.events


async def test_one_failed_subquery_leaves_the_others(
    chain: tuple[EmbeddedBackend, list[str]],
) -> None:
    backend, ids = chain
    faulty = FaultyBackend(backend, {"search": "error"}, fail_queries=["topic4"])
    got = await retrieve(faulty, [SubQuery("topic3"), SubQuery("topic4")], per_query=5, timeout_s=5)
    assert [c.memory.id for c in got.candidates] == [ids[3]]
    assert got.failed == 1
    assert [v["query"] for v in said(got, EventKind.SEARCH_FAILED)] == ["topic4"]


async def test_filters_a_store_cannot_apply_are_applied_after_retrieval(
    chain: tuple[EmbeddedBackend, list[str]],
) -> None:
    backend, _ = chain
    blind = FaultyBackend(
        backend, {}, capabilities=backend.capabilities.model_copy(update={"memory_types": False})
    )
    sub = SubQuery("shared project", filters=SearchFilters(memory_types=[MemoryType.SEMANTIC]))
    got = await retrieve(blind, [sub], per_query=10, timeout_s=5)
    assert got.candidates == []
    assert said(got, EventKind.FILTERED_AFTER) == [{"filter": "memory_types"}]


async def test_expansion_stops_at_the_hop_budget(chain: tuple[EmbeddedBackend, list[str]]) -> None:
    backend, ids = chain
    one = await expand(backend, [ids[3]], limits(edge_types=("temporal",)))
    assert {c.memory.id for c in one.candidates} == {ids[2], ids[4]}
    two = await expand(backend, [ids[3]], limits(hops=2, edge_types=("temporal",)))
    assert {c.memory.id for c in two.candidates} == {ids[1], ids[2], ids[4], ids[5]}
    assert all(d.accepted for d in two.decisions)


async def test_only_allowed_edge_types_are_followed(
    chain: tuple[EmbeddedBackend, list[str]],
) -> None:
    backend, ids = chain
    causal = await expand(backend, [ids[0]], limits(edge_types=("causal",)))
    assert [c.memory.id for c in causal.candidates] == [ids[5]]
    assert causal.candidates[0].edge_type == "causal"


async def test_fan_out_cap_limits_neighbours_per_seed_and_says_so(
    chain: tuple[EmbeddedBackend, list[str]],
) -> None:
    backend, ids = chain
    capped = await expand(backend, [ids[0]], limits(fanout=1))
    assert len(capped.candidates) == 1
    assert any("fan-out cap" in d.reason and not d.accepted for d in capped.decisions)


async def test_present_candidates_are_not_added_twice(
    chain: tuple[EmbeddedBackend, list[str]],
) -> None:
    backend, ids = chain
    got = await expand(backend, [ids[3]], limits(edge_types=("temporal",)), present=[ids[4]])
    assert [c.memory.id for c in got.candidates] == [ids[2]]
    assert any(d.neighbor_id == ids[4] and d.reason == "already a candidate" for d in got.decisions)


async def test_a_store_without_a_graph_skips_expansion_with_a_note(
    chain: tuple[EmbeddedBackend, list[str]],
) -> None:
    backend, ids = chain
    flat = FaultyBackend(
        backend, {}, capabilities=backend.capabilities.model_copy(update={"graph": False})
    )
    got = await expand(flat, [ids[3]], limits())
    assert got.candidates == []
    assert kinds(got) == [EventKind.NO_GRAPH]


def _listed(memory_ids: list[str], backend: EmbeddedBackend) -> Prefetch:
    async def fetch() -> list[tuple[SubQuery, list[SearchHit]]]:
        found = await backend.get_memories(memory_ids)
        hits = [SearchHit(memory=m, rank=n, score=1.0) for n, m in enumerate(found, start=1)]
        return [(SubQuery("local index"), hits)]

    return fetch


async def _bounded(
    backend: MemoryBackend, subqueries: list[SubQuery], prefetch: Prefetch, **options: Any
) -> Retrieval:
    """`retrieve` (per_query 5, a minute's timeout) within a 30 s bound on a hang: not a speed
    assertion."""

    with anyio.fail_after(30):
        return await retrieve(
            backend, subqueries, per_query=5, timeout_s=60, prefetch=prefetch, **options
        )


async def test_a_store_list_late_past_the_budget_is_left_out_once_the_local_lists_are_in(
    chain: tuple[EmbeddedBackend, list[str]],
) -> None:
    """A store that never answers costs its list, not the request's time (`timeout_s` is a
    minute here): with the local index's list in, the call is stopped at the budget."""
    backend, ids = chain
    stuck = FaultyBackend(backend, {"search": "hang"})

    got = await _bounded(
        stuck, [SubQuery("topic3")], prefetch=_listed([ids[7]], backend), list_budget_s=0
    )
    assert [c.memory.id for c in got.candidates] == [ids[7]]
    assert got.failed == 1
    assert said(got, EventKind.SEARCH_LEFT_OUT) == [{"query": "topic3", "budget_s": 0.0}]


async def test_without_local_lists_the_store_is_waited_for(
    chain: tuple[EmbeddedBackend, list[str]],
) -> None:
    backend, ids = chain
    gate = anyio.Event()

    class Gated(FaultyBackend):
        async def search(
            self, query: str, top_k: int, filters: SearchFilters | None = None
        ) -> list[SearchHit]:
            await gate.wait()
            return await backend.search(query, top_k, filters)

    async def nothing() -> list[tuple[SubQuery, list[SearchHit]]]:
        gate.set()  # the store answers only once the (empty) local lists are in
        return []

    got = await retrieve(
        Gated(backend, {}),
        [SubQuery("topic3")],
        per_query=5,
        timeout_s=60,
        prefetch=nothing,
        list_budget_s=0,
    )
    assert [c.memory.id for c in got.candidates][:1] == [ids[3]]
    assert got.failed == 0


async def test_the_lists_are_made_once_the_stores_searches_are_in_its_database(
    chain: tuple[EmbeddedBackend, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store that says when its search reaches its database (`capabilities.dispatch_signal`): the
    local lists' Python runs only then, so that it overlaps SQLite's work instead of
    keeping the store's worker thread from Python's lock. (The wait's bound is an hour here:
    the order is the mechanism's, not the machine's speed.)"""
    backend, ids = chain
    assert dispatching(backend)
    order: list[str] = []
    real = base.dispatched

    def noted() -> None:
        order.append("dispatched")  # (on the store's worker thread)
        real()

    monkeypatch.setattr(embedded, "dispatched", noted)
    monkeypatch.setattr(retriever, "DISPATCH_WAIT_S", 3600.0)
    lists = _listed([ids[7]], backend)

    async def prefetch() -> Sequence[tuple[SubQuery, Sequence[Hit]]]:
        order.append("lists")
        return await lists()

    got = await _bounded(
        backend, [SubQuery("topic3"), SubQuery("topic4")], prefetch=prefetch, dispatching=True
    )
    assert order[:3] == ["dispatched", "dispatched", "lists"], order
    assert {ids[3], ids[4], ids[7]} <= {c.memory.id for c in got.candidates}


async def test_a_search_that_fails_before_its_database_does_not_hold_the_lists(
    chain: tuple[EmbeddedBackend, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search that ends without saying it was dispatched (a store error first) counts as
    done: the lists do not wait out the bound for it (an hour here)."""
    backend, ids = chain
    monkeypatch.setattr(retriever, "DISPATCH_WAIT_S", 3600.0)
    faulty = FaultyBackend(backend, {"search": "error"})

    got = await _bounded(
        faulty, [SubQuery("topic3")], prefetch=_listed([ids[7]], backend), dispatching=True
    )
    assert [c.memory.id for c in got.candidates] == [ids[7]]
    assert got.failed == 1


async def test_a_retrieval_cancelled_from_outside_leaves_no_call_running(
    chain: tuple[EmbeddedBackend, list[str]],
) -> None:
    """The request's own cancellation (a client gone, a deadline) reaches every store call
    and the lists of a retrieval: none runs on after it."""
    backend, _ = chain
    started: list[str] = []
    ended: list[str] = []
    outside: list[anyio.CancelScope] = []  # (made on the event loop, in main)

    async def hang(name: str) -> None:
        started.append(name)
        if len(started) == 3:  # every call is under way: now the caller goes
            outside[0].cancel()
        try:
            await anyio.sleep_forever()
        finally:
            ended.append(name)

    class Hanging(FaultyBackend):  # fault injection: a store that never answers
        async def search(
            self, query: str, top_k: int, filters: SearchFilters | None = None
        ) -> list[SearchHit]:
            await hang(query)
            raise AssertionError("unreachable")

    async def lists() -> list[tuple[SubQuery, list[SearchHit]]]:
        await hang("lists")
        raise AssertionError("unreachable")

    outside.append(anyio.CancelScope())
    with anyio.fail_after(30), outside[0]:  # (30 s: a bound on a hang, not a speed)
        await retrieve(
            Hanging(backend, {}),
            [SubQuery("topic1"), SubQuery("topic2")],
            per_query=5,
            timeout_s=60,
            prefetch=lists,
        )
    assert outside[0].cancelled_caught
    assert sorted(ended) == ["lists", "topic1", "topic2"]  # all ended, before it returned
