"""The read path's events over the candidate table: context neighbours, each recorded on the
trace that is stored."""

from __future__ import annotations

import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import EventKind, SearchRequest, Stage, Trace
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.traces import TraceStore
from tests.events import said
from tests.factories import NOW
from tests.faults import FaultyBackend
from tests.stores import demo_store

pytestmark = pytest.mark.integration

QUERY = "firmware instability"


@pytest.fixture
def store(settings: Settings) -> EmbeddedBackend:
    """The demo in an embedded store."""
    return EmbeddedBackend(demo_store(settings))


async def searched(backend: FaultyBackend | EmbeddedBackend, settings: Settings) -> Trace:
    """The stored trace of a direct search for `QUERY` (no graph expansion)."""
    o = Orchestrator(backend, settings, traces=TraceStore(settings.trace_path()), clock=lambda: NOW)
    try:
        result = await o.search(SearchRequest(query=QUERY, expand=False))
        assert result.items
        trace = o.trace(result.trace_id)
        assert trace is not None
        return trace
    finally:
        await o.close()


async def test_a_failed_neighbour_fetch_is_an_event_on_the_trace(
    store: EmbeddedBackend, settings: Settings
) -> None:
    assert settings.ranking.context_seeds > 0
    trace = await searched(FaultyBackend(store, {"neighbors": "error"}), settings)
    assert said(trace, EventKind.UNAVAILABLE) == [
        {
            "what": "context neighbours",
            "error": "BackendError: injected neighbors failure",
            "then": "",
        }
    ]
    assert all(e.stage is Stage.NEIGHBOURS for e in trace.events if e.kind is EventKind.UNAVAILABLE)


async def test_a_store_without_temporal_links_skips_the_neighbours_with_an_event(
    store: EmbeddedBackend, settings: Settings
) -> None:
    flat = FaultyBackend(
        store, {}, capabilities=store.capabilities.model_copy(update={"graph": False})
    )
    trace = await searched(flat, settings)
    assert said(trace, EventKind.NO_TEMPORAL_LINKS) == [{}]
    assert "neighbors" not in flat.calls
