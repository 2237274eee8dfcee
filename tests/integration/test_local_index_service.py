"""The derived local index in the whole pipeline, over the real embedded store."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import (
    LOCAL_SOURCE,
    EventKind,
    MemoryType,
    NewMemory,
    SearchRequest,
    Trace,
)
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.traces import TraceStore
from tests.events import said
from tests.factories import CHAT, NOW, chat_turns

pytestmark = pytest.mark.integration
EPISODIC = MemoryType.EPISODIC


@dataclass
class Why:
    """Why the items were chosen, and the request's trace."""

    reasons: list[str]
    trace: Trace


async def search(
    settings: Settings, query: str, **local: object
) -> tuple[list[str], Why, dict[str, float]]:
    settings = settings.model_copy(deep=True)
    settings.ranking.context_seeds = 0  # the store's own neighbour step off: only the index
    for key, value in local.items():
        if key == "context_weight":  # (the profile's: the local index's BM25 with context)
            settings.ranking.local_context_weight = value  # type: ignore[assignment]
        else:
            setattr(settings.local_index, key, value)

    o = Orchestrator(EmbeddedBackend(settings.embedded_path()), settings, traces=TraceStore(None))
    if not await o.store_search("lake", 1):  # an empty store: write the chat once
        await o.ingest(chat_turns())
    result = await o.search(SearchRequest(query=query, as_of=NOW))
    trace = o.trace(result.trace_id)
    await o.close()
    assert trace is not None
    reasons = [r for item in result.items for r in item.reasons]
    lexical = {i.summary: i.breakdown.lexical for i in result.items if i.breakdown}
    return [i.summary for i in result.items], Why(reasons, trace), lexical


async def test_the_turn_after_a_match_is_found_through_the_local_index(settings: Settings) -> None:
    plain, _, _ = await search(settings, "painting", enabled=False)
    assert CHAT[1] not in plain  # it never says "painting": the store cannot find it
    found, why, _ = await search(settings, "painting", enabled=True, context_weight=1.0)
    assert found[0] == CHAT[0]
    assert CHAT[1] in found
    assert any(r.startswith("local index rank") for r in why.reasons)
    assert said(why.trace, EventKind.LOCAL_INDEX_ADDED) == [{"count": 4}]


async def test_lent_context_lets_a_turn_read_its_neighbours_words(settings: Settings) -> None:
    """The store's neighbour step is off here: a turn's neighbours come from the local index,
    their words weighed by `ranking.context_window`."""
    settings.ranking.context_window = 0.0
    _, _, plain = await search(settings, "painting", enabled=True, context_weight=1.0)
    settings.ranking.context_window = 0.5
    _, _, lent = await search(settings, "painting", enabled=True, context_weight=1.0)
    assert plain[CHAT[1]] == 0.0  # its own words: no "painting"
    assert lent[CHAT[1]] > 0.0  # the turn before it says "painting"


async def test_a_question_that_names_a_date_finds_what_was_said_then(settings: Settings) -> None:
    """The local index reads each memory's date as words ("8 May 2023"): of two turns with
    the same words, the one said on the day the question names leads its list."""
    settings.dedup.threshold = 1.0  # the two turns stay two candidates
    said = [
        NewMemory(content="Mel: we went camping by the lake", created_at=day, type=EPISODIC)
        for day in (datetime(2023, 7, 2, 9, tzinfo=UTC), datetime(2023, 5, 8, 14, tzinfo=UTC))
    ]
    said[1] = said[1].model_copy(update={"content": "Mel: we went camping at the lake"})
    o = Orchestrator(EmbeddedBackend(settings.embedded_path()), settings, traces=TraceStore(None))
    _, may = [w.id for w in await o.ingest(said)]
    result = await o.search(SearchRequest(query="camping by the lake on 8 May 2023", as_of=NOW))
    trace = o.trace(result.trace_id)
    await o.close()
    assert trace is not None
    local = {c.id: s.rank for c in trace.candidates for s in c.sources if s.query == LOCAL_SOURCE}
    assert local[may] == 1, local
