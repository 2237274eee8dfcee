"""Context neighbours over the real embedded store: the turn after the one that matches."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import MemoryType, NewMemory, SearchRequest, SearchResult
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.traces import TraceStore
from tests.factories import NOW

pytestmark = pytest.mark.integration

TURNS = [
    "Dana: The weather was awful all weekend, rain everywhere",
    "Ravi: What did you end up doing about the broken bicycle?",
    "Dana: I took it to the shop on Fifth Street and they fixed it in a day",
    "Ravi: My cat knocked a plant off the shelf this morning",
    "Dana: Cats are like that, my neighbour's cat does the same",
]


async def ask(settings: Settings, query: str) -> tuple[SearchResult, int]:
    backend = EmbeddedBackend(settings.embedded_path())
    start = NOW - timedelta(days=1)
    await backend.write_many(
        [
            NewMemory(
                content=text,
                type=MemoryType.EPISODIC,
                entities=[text.split(":")[0]],
                created_at=start + timedelta(minutes=n),
            )
            for n, text in enumerate(TURNS)
        ]
    )
    orch = Orchestrator(backend, settings, traces=TraceStore(None), clock=lambda: NOW)
    try:
        result = await orch.search(SearchRequest(query=query, top_k=3))
        trace = orch.trace(result.trace_id)
        assert trace is not None
        return result, trace.backend_calls
    finally:
        await orch.close()


def with_ranking(settings: Settings, **values: object) -> Settings:
    return settings.model_copy(update={"ranking": settings.ranking.model_copy(update=values)})


async def test_the_turn_after_a_match_joins_the_results_with_one_more_store_call(
    settings: Settings,
) -> None:
    query = "What happened to the broken bicycle?"
    # the local index (on by default) finds the reply through its neighbours' words too;
    # off here, so that only the store's context neighbours can bring it in
    settings = settings.model_copy(
        update={"local_index": settings.local_index.model_copy(update={"enabled": False})}
    )
    off, off_calls = await ask(with_ranking(settings, context_seeds=0), query)
    on, on_calls = await ask(with_ranking(settings, context_seeds=1, neighbor_share=0.9), query)
    answer = "Dana: I took it to the shop on Fifth Street and they fixed it in a day"
    assert answer not in [i.summary for i in off.items]
    assert answer in [i.summary for i in on.items]
    assert on_calls == off_calls + 1


async def test_context_neighbours_stay_within_a_session(settings: Settings) -> None:
    """A memory written more than `ranking.context_gap_s` after its seed is no context."""
    settings = settings.model_copy(
        update={"local_index": settings.local_index.model_copy(update={"enabled": False})}
    )
    query = "What happened to the broken bicycle?"
    answer = "Dana: I took it to the shop on Fifth Street and they fixed it in a day"
    # the turns are a minute apart: one session at 30 min, none at 30 s
    within, _ = await ask(with_ranking(settings, context_seeds=1, neighbor_share=0.9), query)
    assert answer in [i.summary for i in within.items]
    apart, _ = await ask(
        with_ranking(settings, context_seeds=1, neighbor_share=0.9, context_gap_s=30.0), query
    )
    assert answer not in [i.summary for i in apart.items]
