"""Semantic relevance in the whole pipeline: the real embedded store and the real wordllama
model (the `semantic` extra, installed in the dev group)."""

from __future__ import annotations

import anyio
import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.derived import indexes
from memory_orchestrator.errors import SemanticUnavailable
from memory_orchestrator.models import (
    LOCAL_SOURCE,
    SEMANTIC_SOURCE,
    ContextRequest,
    EventKind,
    MemoryType,
    NewMemory,
    SearchRequest,
    Status,
    WriteRequest,
)
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.traces import TraceStore
from tests.events import kinds, said
from tests.factories import NOW, TOPICS

pytestmark = pytest.mark.integration

MEMORIES = TOPICS


def orchestrator(settings: Settings, *, semantic: bool) -> Orchestrator:
    settings = settings.model_copy(deep=True)
    settings.semantic.enabled = semantic
    backend = EmbeddedBackend(settings.embedded_path())
    return Orchestrator(backend, settings, traces=TraceStore(None), clock=lambda: NOW)


@pytest.fixture
def loaded(settings: Settings) -> Settings:
    async def load() -> None:
        o = orchestrator(settings, semantic=False)
        await o.ingest([NewMemory(content=c, type=MemoryType.EPISODIC) for c in MEMORIES])
        await o.close()

    anyio.run(load)
    return settings


async def ask(o: Orchestrator, query: str) -> list[str]:
    pack = await o.context(ContextRequest(query=query))
    return [i.summary for i in pack.items]


async def test_a_memory_sharing_no_word_with_the_question_is_found_only_with_semantics(
    loaded: Settings,
) -> None:
    plain = orchestrator(loaded, semantic=False)
    assert (
        await ask(plain, "dog playing outside") == []
    )  # no word in common: the store finds nothing
    await plain.close()

    o = orchestrator(loaded, semantic=True)

    result = await o.search(SearchRequest(query="dog playing outside"))
    top = result.items[0]
    assert top.summary == MEMORIES[0]
    assert "semantic index rank 1" in top.reasons
    assert top.breakdown is not None
    assert top.breakdown.semantic is not None
    assert top.breakdown.semantic > 0.3
    trace = o.trace(result.trace_id)
    assert trace is not None
    assert said(trace, EventKind.LOCAL_INDEX_ADDED) == [{"count": 4}]
    await o.close()


async def test_the_index_follows_the_store_writes_and_deletes(loaded: Settings) -> None:
    o = orchestrator(loaded, semantic=True)
    await o.context(ContextRequest(query="anything at all"))  # first sync
    report = await o.write(
        WriteRequest(memory=NewMemory(content="My kitten sleeps on the sofa all day"))
    )
    assert report.id is not None
    found = await o.search(SearchRequest(query="cat napping"))
    assert found.items[0].memory_id == report.id  # written just now, found at once
    assert await EmbeddedBackend(loaded.embedded_path()).forget(report.id)  # by another client
    again = await o.search(SearchRequest(query="cat napping"))
    assert report.id not in {i.memory_id for i in again.items}  # read back from the store
    await o.close()


async def test_health_reports_the_index_and_a_missing_model_degrades_with_the_reason(
    loaded: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    o = orchestrator(loaded, semantic=True)

    await o.context(ContextRequest(query="dog"))
    report = await o.health()
    check = next(c for c in report.checks if c.name == "semantic")
    assert check.status is Status.OK
    assert "4 memories indexed" in check.detail
    await o.close()

    def missing(model: str, **where: object) -> None:  # fault injection: no extra installed
        raise SemanticUnavailable("semantic relevance needs the optional extra")

    monkeypatch.setattr(indexes, "load_embedder", missing)
    broken = orchestrator(loaded, semantic=True)

    pack = await broken.context(ContextRequest(query="revenue in Europe"))
    assert pack.items[0].summary == MEMORIES[1]  # words still work
    trace = broken.trace(pack.trace_id)
    assert trace is not None
    assert EventKind.SEMANTIC_OFF in kinds(trace)
    report = await broken.health()
    check = next(c for c in report.checks if c.name == "semantic")
    assert check.status is Status.DEGRADED
    assert report.status is Status.DEGRADED
    await broken.close()


async def test_each_candidates_similarity_is_the_indexes_whichever_list_found_it(
    loaded: Settings,
) -> None:
    """The similarities of the derived lists' memories are worked out while the store's
    searches run, the others' after: each candidate's is still the index's own cosine for it,
    found by the store's search or by the derived lists alone."""
    o = orchestrator(loaded, semantic=True)
    query = "revenue in Europe and a dog playing outside"
    await o.search(SearchRequest(query=query))  # the indexes loaded
    pack = await o.context(ContextRequest(query=query))
    trace = o.trace(pack.trace_id)
    assert trace is not None
    index = o._indexes._semantic
    assert index is not None
    found = {c.id: c for c in trace.candidates}
    memories = await o._store.get_memories(list(found))
    expected = index.similarities(query, memories)
    derived = {LOCAL_SOURCE, SEMANTIC_SOURCE}
    by_store = [c for c in found.values() if any(s.query not in derived for s in c.sources)]
    by_lists_only = [
        c for c in found.values() if c.sources and {s.query for s in c.sources} <= derived
    ]
    assert by_store
    assert by_lists_only  # (the local index's list and the semantic one)
    for c in found.values():
        assert c.breakdown is not None
        assert c.breakdown.semantic == expected.get(c.id), c.id
    await o.close()
