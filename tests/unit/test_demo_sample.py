"""The built-in demo sample is valid and tells the story the demo relies on."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rapidfuzz import fuzz

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.demo import DEFAULT_QUERY, DEFAULT_TASK, LINKS, SAMPLE, load_demo
from memory_orchestrator.models import MemoryType, NewMemory
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import load_settings
from tests.faults import FaultyBackend

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


async def _loaded(tmp_path: Path, *, link: bool) -> tuple[Orchestrator, int]:
    backend = EmbeddedBackend(tmp_path / "demo.db")
    store: MemoryBackend = backend
    if not link:  # the same real store, declaring no link support
        caps = backend.capabilities.model_copy(update={"link": False, "graph": False})
        store = FaultyBackend(backend, {}, capabilities=caps)
    orchestrator = Orchestrator(store, load_settings(data_dir=tmp_path))
    return orchestrator, await load_demo(orchestrator)


async def test_load_demo_writes_sample_and_links(tmp_path: Path) -> None:
    orchestrator, written = await _loaded(tmp_path, link=True)
    backend = EmbeddedBackend(tmp_path / "demo.db")  # a second client of the same store

    async def id_of(index: int) -> str:
        hits = await backend.search(SAMPLE[index].content, 5)
        return next(h.memory.id for h in hits if h.memory.content == SAMPLE[index].content)

    try:
        assert written == len(SAMPLE)
        for source, target, relation, _ in LINKS:
            source_id = await id_of(source)

            async def around(source_id: str = source_id, relation: str = relation) -> set[str]:
                found = await backend.neighbors([source_id], [relation], 1, 100)
                return {n.memory.id for n in found}

            assert await id_of(target) in await around(), (source, target, relation)
    finally:
        await orchestrator.close()


async def test_load_demo_skips_links_without_a_graph(tmp_path: Path) -> None:
    orchestrator, written = await _loaded(tmp_path, link=False)
    try:
        assert written == len(SAMPLE)
    finally:
        await orchestrator.close()
