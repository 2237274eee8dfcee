"""The built-in demo sample is valid and tells the story the demo relies on."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

import anyio
from rapidfuzz import fuzz

from memory_orchestrator.demo import DEFAULT_QUERY, DEFAULT_TASK, LINKS, SAMPLE, load_demo
from memory_orchestrator.models import (
    Capabilities,
    Edge,
    MemoryType,
    NewMemory,
    WriteAction,
    WriteOutcome,
)

if TYPE_CHECKING:
    from memory_orchestrator.service import Orchestrator

START = datetime(2026, 7, 1, tzinfo=UTC)
END = datetime(2026, 11, 20, 23, 59, 59, tzinfo=UTC)


def test_sample_is_sized_and_valid() -> None:
    assert 30 <= len(SAMPLE) <= 60
    for memory in SAMPLE:
        assert isinstance(memory, NewMemory)
        # round-trips through validation unchanged
        assert NewMemory.model_validate(memory.model_dump()) == memory


def test_every_memory_type_is_present() -> None:
    assert {memory.type for memory in SAMPLE} == set(MemoryType)


def test_every_memory_has_entities_and_tags() -> None:
    for memory in SAMPLE:
        assert memory.entities, memory.content
        assert memory.tags, memory.content


def test_dates_are_aware_in_range_and_in_order() -> None:
    dates = [memory.created_at for memory in SAMPLE]
    assert all(d is not None and d.utcoffset() == timedelta(0) for d in dates)
    known = [d for d in dates if d is not None]
    assert all(START <= d <= END for d in known)
    assert known == sorted(known)
    assert max(known).date() == END.date()
    assert max(known) - min(known) >= timedelta(days=100)


def test_links_point_inside_the_sample() -> None:
    assert LINKS
    for source, target, relation, weight in LINKS:
        assert 0 <= source < len(SAMPLE)
        assert 0 <= target < len(SAMPLE)
        assert source != target
        assert relation
        assert 0.0 < weight <= 1.0
    assert "causal" in {relation for _, _, relation, _ in LINKS}


def test_has_a_near_duplicate_pair() -> None:
    pairs = [
        (a.content, b.content)
        for a, b in itertools.combinations(SAMPLE, 2)
        if a.content != b.content and fuzz.token_set_ratio(a.content, b.content) >= 85
    ]
    assert pairs


def test_vendor_x_is_recent() -> None:
    cutoff = datetime(2026, 11, 22, tzinfo=UTC) - timedelta(days=30)
    recent = [
        memory
        for memory in SAMPLE
        if memory.created_at is not None
        and memory.created_at >= cutoff
        and ("Vendor X" in memory.content or "Vendor X" in memory.entities)
    ]
    assert recent


def test_default_query_and_task() -> None:
    assert "Vendor X" in DEFAULT_QUERY
    assert DEFAULT_TASK


class _RecordingBackend:
    """Just enough of a store for `load_demo`: numbered writes, recorded links."""

    name = "recording"

    def __init__(self, *, link: bool) -> None:
        self.capabilities = Capabilities(link=link, graph=link)
        self.written: list[NewMemory] = []
        self.edges: list[Edge] = []

    async def write_many(self, memories: Sequence[NewMemory]) -> list[WriteOutcome]:
        outcomes = []
        for memory in memories:
            self.written.append(memory)
            outcomes.append(WriteOutcome(id=f"m{len(self.written)}", action=WriteAction.ADDED))
        return outcomes

    async def link(self, source_id: str, target_id: str, relation: str, weight: float) -> Edge:
        edge = Edge(source_id=source_id, target_id=target_id, type=relation, weight=weight)
        self.edges.append(edge)
        return edge


def _orchestrator(backend: _RecordingBackend) -> Orchestrator:
    # `load_demo` only touches `orchestrator.backend`; this keeps the test independent of
    # the service and of any real store.
    return cast("Orchestrator", SimpleNamespace(backend=backend))


def test_load_demo_writes_sample_and_links() -> None:
    backend = _RecordingBackend(link=True)
    orchestrator = _orchestrator(backend)
    written = anyio.run(load_demo, orchestrator)
    assert written == len(SAMPLE)
    assert backend.written == list(SAMPLE)
    assert [(e.source_id, e.target_id, e.type) for e in backend.edges] == [
        (f"m{source + 1}", f"m{target + 1}", relation) for source, target, relation, _ in LINKS
    ]


def test_load_demo_skips_links_without_a_graph() -> None:
    backend = _RecordingBackend(link=False)
    assert anyio.run(load_demo, _orchestrator(backend)) == len(SAMPLE)
    assert backend.edges == []
