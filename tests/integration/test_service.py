"""The whole pipeline over the real embedded store, loaded with the built-in sample."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import anyio
import pytest

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.demo import SAMPLE, load_demo
from memory_orchestrator.errors import InvalidRequest, StoreUnreadable, TraceNotFound
from memory_orchestrator.models import (
    MAX_IDS,
    MAX_LIST_ITEMS,
    ContextRequest,
    EventKind,
    ExpandRequest,
    ExplainRequest,
    MemoryType,
    NewMemory,
    ResponseBudget,
    SearchFilters,
    SearchRequest,
    Status,
    Strategy,
    Trace,
    WriteAction,
    WriteRequest,
)
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.traces import TraceStore
from tests.events import said
from tests.factories import NOW
from tests.faults import FaultyBackend


def stored(o: Orchestrator, trace_id: str) -> Trace:
    trace = o.trace(trace_id)
    assert trace is not None
    return trace


pytestmark = pytest.mark.integration
T = TypeVar("T")


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(fn)


@pytest.fixture
def orch(settings: Settings) -> Iterator[Orchestrator]:
    backend = EmbeddedBackend(settings.embedded_path())
    o = Orchestrator(backend, settings, traces=TraceStore(settings.trace_path()), clock=lambda: NOW)
    run(lambda: load_demo(o))
    yield o
    run(o.close)


def store_of(orch: Orchestrator) -> EmbeddedBackend:
    """A second client of the store under `orch` (the orchestrator keeps its own private)."""
    return EmbeddedBackend(orch.settings.embedded_path())


def with_backend(orch: Orchestrator, backend: MemoryBackend, **overrides: object) -> Orchestrator:
    settings = orch.settings.model_copy(deep=True)
    for key, value in overrides.items():
        section, _, name = key.partition("__")
        setattr(getattr(settings, section), name, value)
    traces = TraceStore(settings.trace_path())
    return Orchestrator(backend, settings, traces=traces, clock=lambda: NOW)


async def test_context_packs_relevant_vendor_memories_within_budget(orch: Orchestrator) -> None:
    request = ContextRequest(
        query="recent issues with Vendor X",
        task="draft vendor update",
        response_budget=ResponseBudget(max_items=5, max_chars=1500),
    )
    pack = await orch.context(request)
    assert 0 < len(pack.items) <= 5
    assert len(pack.context_block) <= 1500
    assert "Vendor X" in pack.linked_entities
    assert all(item.reasons for item in pack.items)
    assert any("Vendor X" in item.linked_entities for item in pack.items[:2])
    assert pack.context_block.startswith("Memory context for task: draft vendor update")
    assert pack.strategy is Strategy.EPISODIC  # "recent" asks what happened


@pytest.mark.parametrize("asked", [{"max_items": 6}, {"max_chars": 900}])
async def test_a_budget_that_sets_one_limit_keeps_the_configured_other(
    orch: Orchestrator, asked: dict[str, int]
) -> None:
    """`{"max_items": 6}` bounds the items; the characters stay those configured (here 900),
    not the request model's own default."""
    tight = with_backend(orch, store_of(orch), packaging__max_chars=900, packaging__max_items=4)
    try:
        budget = ResponseBudget.model_validate(asked)
        request = ContextRequest(query="recent issues with Vendor X", response_budget=budget)
        pack = await tight.context(request)
        assert len(pack.context_block) <= 900
        assert len(pack.items) <= asked.get("max_items", 4)
    finally:
        await tight.close()


async def test_noise_and_duplicates_do_not_reach_the_context(orch: Orchestrator) -> None:
    pack = await orch.context(ContextRequest(query="Vendor X missed the March milestone"))
    texts = [i.summary for i in pack.items]
    assert len(texts) == len(set(texts))
    reasons = {d.reason.value for d in pack.trace.dropped}
    assert "duplicate" in reasons or any(i.cross_validated for i in pack.items)


async def test_search_returns_scored_items_and_a_stored_trace(orch: Orchestrator) -> None:
    result = await orch.search(SearchRequest(query="how do I deploy atlas-core?", top_k=3))
    assert len(result.items) <= 3
    assert result.items[0].type is MemoryType.PROCEDURAL
    assert result.items[0].breakdown is not None
    explanation = await orch.explain(ExplainRequest(trace_id=result.trace_id))
    assert explanation.trace.result_ids == [i.memory_id for i in result.items]
    assert "Subqueries:" in explanation.text
    assert "total" in explanation.text


async def test_passthrough_returns_the_stores_own_results_unchanged(orch: Orchestrator) -> None:
    raw = await orch.store_search("firmware", 5)
    result = await orch.search(SearchRequest(query="firmware", top_k=5, passthrough=True))
    assert result.passthrough
    assert [i.memory_id for i in result.items] == [h.memory.id for h in raw]
    assert [i.summary for i in result.items] == [h.memory.content for h in raw]


async def test_expansion_adds_graph_neighbours_and_records_decisions(orch: Orchestrator) -> None:
    result = await orch.search(SearchRequest(query="firmware instability", expand=True))
    trace = orch.trace(result.trace_id)
    assert trace is not None
    assert trace.expansions
    assert result.strategy in {Strategy.EXPANDED, Strategy.EPISODIC}
    assert any(d.accepted for d in trace.expansions)


async def test_expand_walks_from_seed_ids_and_entities(orch: Orchestrator) -> None:
    seed = (await orch.search(SearchRequest(query="firmware 2.2 LTE", top_k=1))).items[0]
    around = await orch.expand(ExpandRequest(seed_ids=[seed.memory_id], hops=2, limit=5))
    assert 0 < len(around.items) <= 5
    assert seed.memory_id not in [i.memory_id for i in around.items]
    by_entity = await orch.expand(ExpandRequest(entities=["Acme Corp"], limit=5))
    assert by_entity.items


async def test_filters_restrict_memory_types(orch: Orchestrator) -> None:
    filters = SearchFilters(memory_types=[MemoryType.RESOURCE])
    result = await orch.search(SearchRequest(query="atlas", filters=filters))
    assert result.items
    assert {i.type for i in result.items} == {MemoryType.RESOURCE}


async def test_write_adds_then_skips_a_near_duplicate(orch: Orchestrator) -> None:
    memory = NewMemory(content="Marco moved the Atlas demo to Thursday 3pm.", entities=["Marco"])
    first = await orch.write(WriteRequest(memory=memory))
    assert first.action is WriteAction.ADDED
    assert first.id
    again = NewMemory(content="Marco moved the Atlas demo to Thursday 3pm", entities=["Marco"])
    second = await orch.write(WriteRequest(memory=again))
    assert second.action is WriteAction.SKIPPED
    assert second.duplicate_of == first.id
    assert "near-duplicate" in second.reason


async def test_write_as_update_links_to_the_memory_it_revises(orch: Orchestrator) -> None:
    base = NewMemory(
        content="The Atlas pilot with Acme Corp starts on 1 December.", entities=["Acme Corp"]
    )
    first = await orch.write(WriteRequest(memory=base))
    restated = NewMemory(
        content="The Atlas pilot with Acme Corp will start on 1 December.", entities=["Acme Corp"]
    )
    second = await orch.write(WriteRequest(memory=restated, on_duplicate="update"))
    assert second.action is WriteAction.UPDATED
    assert second.duplicate_of == first.id
    assert second.supersedes is None  # a restatement revises; it corrects nothing
    assert any(e.type == "update" and e.target_id == first.id for e in second.links)


async def test_a_correction_supersedes_the_memory_it_corrects(orch: Orchestrator) -> None:
    base = NewMemory(
        content="The Atlas pilot with Acme Corp starts on 1 December.", entities=["Acme Corp"]
    )
    first = await orch.write(WriteRequest(memory=base))
    revised = NewMemory(
        content="The Atlas pilot with Acme Corp starts on 3 December.", entities=["Acme Corp"]
    )
    second = await orch.write(WriteRequest(memory=revised))
    assert second.action is WriteAction.UPDATED
    assert (second.supersedes, second.changed) == (first.id, "1 -> 3 December")
    assert any(e.type == "supersedes" and e.target_id == first.id for e in second.links)
    (old,) = await orch.memories([first.id or ""])
    assert old.superseded_by == second.id


async def test_dry_run_writes_nothing(orch: Orchestrator) -> None:
    before = await orch.store_search("zeppelin", 5)
    report = await orch.write(
        WriteRequest(memory=NewMemory(content="A zeppelin note"), dry_run=True)
    )
    assert report.id is None
    assert report.dry_run
    assert report.action is WriteAction.ADDED  # what would happen, marked as a dry run
    assert report.reason == "dry run: would be added; nothing written"
    assert await orch.store_search("zeppelin", 5) == before


async def test_lists_grown_past_the_schemas_caps_after_validation_are_refused(
    orch: Orchestrator,
) -> None:
    """A caller in Python can append to a validated request's lists: the service checks the
    schema's caps again, and writes or expands nothing."""
    request = WriteRequest(memory=NewMemory(content="A zeppelin over the lake", tags=["air"]))
    request.memory.tags.extend(f"tag{i}" for i in range(MAX_LIST_ITEMS))
    with pytest.raises(
        InvalidRequest, match=rf"tags: {MAX_LIST_ITEMS + 1} values.*nothing written"
    ):
        await orch.write(request)
    assert await orch.store_search("zeppelin", 5) == []
    expand = ExpandRequest(seed_ids=["m1"])
    expand.seed_ids.extend(f"m{i}" for i in range(MAX_IDS))
    with pytest.raises(InvalidRequest, match=rf"seed_ids: {MAX_IDS + 1} ids"):
        await orch.expand(expand)


async def test_a_failing_subquery_gives_partial_results_and_a_note(orch: Orchestrator) -> None:
    faulty = FaultyBackend(store_of(orch), {"search": "error"}, fail_queries=["Dana"])
    o = with_backend(orch, faulty)
    result = await o.search(SearchRequest(query="What did Dana and Priya decide about Vendor X?"))
    assert result.items
    failed = said(stored(o, result.trace_id), EventKind.SEARCH_FAILED)
    assert failed
    assert all("Dana" in str(v["query"]) for v in failed)


async def test_a_hanging_store_is_cut_off_at_the_timeout(orch: Orchestrator) -> None:
    o = with_backend(
        orch, FaultyBackend(store_of(orch), {"search": "hang"}), retrieval__timeout_s=0.2
    )
    started = time.perf_counter()
    with pytest.raises(StoreUnreadable, match=r"did not answer in 0\.2s") as raised:
        await o.search(SearchRequest(query="firmware"))
    assert time.perf_counter() - started < 5
    assert raised.value.transient  # nothing came back: not an empty memory
    timed_out = said(stored(o, raised.value.trace_id), EventKind.SEARCH_TIMED_OUT)
    assert timed_out
    assert all(v["timeout_s"] == 0.2 for v in timed_out)


async def test_a_hanging_store_under_passthrough_is_a_store_error_not_a_crash(
    orch: Orchestrator,
) -> None:
    o = with_backend(
        orch, FaultyBackend(store_of(orch), {"search": "hang"}), retrieval__timeout_s=0.2
    )
    with pytest.raises(StoreUnreadable, match=r"did not answer in 0\.2s") as raised:
        await o.search(SearchRequest(query="firmware", passthrough=True))
    assert raised.value.transient
    assert o.trace(raised.value.trace_id) is not None


async def test_failed_expansion_degrades_to_direct_results(orch: Orchestrator) -> None:
    o = with_backend(orch, FaultyBackend(store_of(orch), {"neighbors": "error"}))
    result = await o.search(SearchRequest(query="firmware instability", expand=True))
    assert result.items
    (failed,) = said(stored(o, result.trace_id), EventKind.EXPANSION_FAILED)
    assert failed["error"] == "BackendError: injected neighbors failure"


async def test_health_is_ok_on_a_good_store_and_error_when_the_store_fails(
    orch: Orchestrator,
) -> None:
    report = await orch.health()
    assert report.status is Status.OK
    assert {c.name for c in report.checks} >= {"retrieval"}
    broken = with_backend(
        orch, FaultyBackend(store_of(orch), {"search": "error", "health": "error"})
    )
    bad = await broken.health()
    assert bad.status is Status.ERROR


async def test_unknown_trace_ids_are_reported(orch: Orchestrator) -> None:
    with pytest.raises(TraceNotFound):
        await orch.explain(ExplainRequest(trace_id="tr_nope"))
    with pytest.raises(TraceNotFound):
        await orch.replay("tr_nope")


async def test_replay_reruns_a_stored_request_and_diffs_it(orch: Orchestrator) -> None:
    first = await orch.context(ContextRequest(query="who owns the Vendor X relationship?"))
    report = await orch.replay(first.trace_id)
    assert report.identical
    assert report.before == report.after
    orch.settings.ranking.weights.recency = 5.0  # change the formula: the replay shows it
    changed = await orch.replay(first.trace_id)
    assert changed.new_trace_id != report.new_trace_id


async def test_explain_a_fresh_query(orch: Orchestrator) -> None:
    explanation = await orch.explain(ExplainRequest(query="Atlas blockers"))
    assert explanation.trace.tool == "explain"
    assert "Candidates" in explanation.text


async def test_the_sample_is_fully_loaded(orch: Orchestrator) -> None:
    report = await orch.health()
    assert any(str(len(SAMPLE)) in c.detail for c in report.checks) or report.status is Status.OK


ATLAS_FACTS = [
    "Project Atlas kickoff is on Monday with the Acme Corp team.",
    "The blocker for Project Atlas is the firmware from Vendor Q.",
    "We moved the Project Atlas demo to the Lisbon office.",
    "Budget for Project Atlas was approved by Helena.",
    "Project Atlas needs two more gateway prototypes.",
    "The Project Atlas retro happens every second Friday.",
]


async def test_memories_written_without_entities_get_the_names_their_text_carries(
    settings: Settings,
) -> None:
    """Agents send content only; expand-by-entity, links and the cross-reference boost then
    need the entities the orchestrator extracts (it answered "0 memories" before)."""
    o = Orchestrator(EmbeddedBackend(settings.embedded_path()), settings, clock=lambda: NOW)
    reports = [await o.write(WriteRequest(memory=NewMemory(content=c))) for c in ATLAS_FACTS]
    assert all("Project Atlas" in r.entities for r in reports)
    assert "Vendor Q" in reports[1].entities
    assert any(e.type == "related" for r in reports[1:] for e in r.links)
    around = await o.expand(ExpandRequest(entities=["Project Atlas"], limit=10))
    assert len(around.items) >= 3
    trace = o.trace(reports[0].trace_id)
    assert trace is not None
    (extracted,) = said(trace, EventKind.ENTITIES_EXTRACTED)
    assert "Project Atlas" in str(extracted["entities"])
    await o.close()


async def test_entity_extraction_can_be_switched_off_and_given_entities_are_kept(
    settings: Settings,
) -> None:
    settings.write.extract_entities = False
    o = Orchestrator(EmbeddedBackend(settings.embedded_path()), settings, clock=lambda: NOW)
    plain = await o.write(WriteRequest(memory=NewMemory(content=ATLAS_FACTS[0])))
    assert plain.entities == ()
    settings.write.extract_entities = True
    given = NewMemory(content=ATLAS_FACTS[1], entities=["firmware"])
    assert (await o.write(WriteRequest(memory=given))).entities == ("firmware",)
    await o.close()


async def test_ingest_gives_content_only_memories_their_entities_too(settings: Settings) -> None:
    o = Orchestrator(EmbeddedBackend(settings.embedded_path()), settings, clock=lambda: NOW)
    outcomes = await o.ingest([NewMemory(content=c) for c in ATLAS_FACTS])
    stored = await o.memories([x.id for x in outcomes if x.id])
    assert all("Project Atlas" in m.entities for m in stored)
    await o.close()


async def test_the_trace_records_a_penalised_restatement_with_its_penalty(
    settings: Settings,
) -> None:
    """The deduper's changes reach the trace: a restatement it kept with a duplicate penalty
    is recorded with that penalty, also when the penalty left it out of the result."""
    from memory_orchestrator.models import NewMemory

    backend = EmbeddedBackend(settings.embedded_path())
    await backend.write_many(  # (the write path would skip the second as a restatement)
        [
            NewMemory(content="Dana prefers short written updates"),
            NewMemory(content="Short written updates are preferred by Dana"),
        ]
    )
    settings.dedup.threshold, settings.dedup.soft_threshold = 0.99, 0.5
    o = Orchestrator(backend, settings, traces=TraceStore(settings.trace_path()), clock=lambda: NOW)
    result = await o.search(SearchRequest(query="what updates does Dana prefer?", top_k=1))
    found = await o.explain(ExplainRequest(trace_id=result.trace_id))
    await o.close()
    assert len(result.items) == 1
    (record,) = [c for c in found.trace.candidates if c.id != result.items[0].memory_id]
    assert record.final_rank is None
    assert record.breakdown is not None
    assert record.breakdown.duplicate_penalty > 0
