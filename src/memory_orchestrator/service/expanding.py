"""The expand path: the memories around given seeds (ids, entity names, or both).

Seeds by id are read from the store; seeds by entity are the best matches of an
entity-filtered search. The graph is walked from all of them within the hop budget, the
memories found are ranked like any candidates, and the explicit seeds are never echoed back.
When a read of the seeds failed and no seed came back, the run raises `StoreUnreadable`, as
the read path does: an empty answer would pass a broken store off as an empty memory.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.derived.entities import KnownEntities
from memory_orchestrator.errors import InvalidRequest
from memory_orchestrator.models import (
    MAX_IDS,
    Candidate,
    EventKind,
    ExpandRequest,
    Memory,
    QueryPlan,
    ScoredItem,
    SearchFilters,
    Stage,
    ToolName,
    Trace,
    event,
)
from memory_orchestrator.pipeline.expander import ExpansionLimits, expand
from memory_orchestrator.pipeline.planner import plan_query
from memory_orchestrator.pipeline.relevance import RankContext
from memory_orchestrator.pipeline.reranker import rerank
from memory_orchestrator.pipeline.retriever import Lost, SubQuery, retrieve
from memory_orchestrator.service.reading import cut_query, ms_since
from memory_orchestrator.service.recorder import TraceRecorder
from memory_orchestrator.service.store_calls import StoreCalls, unreadable
from memory_orchestrator.settings import Settings

UNSEEDED = (
    "reading the seeds failed ({}); nothing was found around them, but this is not an empty memory"
)


class ExpandPath:
    """Serves `memory_expand` over one store."""

    def __init__(
        self,
        store: MemoryBackend,
        settings: Settings,
        recorder: TraceRecorder,
        calls: StoreCalls,
        entities: KnownEntities,
        clock: Callable[[], datetime],
    ) -> None:
        self._store, self._settings, self._recorder = store, settings, recorder
        self._calls, self._entities, self._clock = calls, entities, clock

    async def run(self, request: ExpandRequest) -> tuple[str, list[ScoredItem], int, Trace]:
        """The query used, the ranked memories around the seeds, the number of seeds, and
        the finished trace. Raises InvalidRequest over the schema's `MAX_IDS` seed ids (a
        caller in Python may grow the list after validation)."""
        if len(request.seed_ids) > MAX_IDS:
            raise InvalidRequest(f"seed_ids: {len(request.seed_ids)} ids; the limit is {MAX_IDS}")
        started = time.perf_counter()
        trace = self._recorder.begin(ToolName.EXPAND, request.model_dump(mode="json"))
        now = self._clock()
        query = request.query or " ".join(request.entities) or "related memories"
        query = cut_query(query, "query", self._settings.limits.max_query_chars, trace)
        plan = await self._plan(request, query, now, trace)
        by_id, lost_ids = await self._id_seeds(request, trace)
        by_entity, lost_entities = await self._entity_seeds(request, trace)
        seeds = [*by_id, *by_entity]
        failed = lost_ids or lost_entities
        if failed is not None and not seeds:
            # "nothing around them" would pass a broken store off as an empty memory
            error = unreadable(trace, failed, UNSEEDED)
            self._recorder.finish(trace)
            raise error
        exp = self._settings.expansion
        limits = ExpansionLimits(
            hops=min(request.hops, exp.max_hops),
            edge_types=tuple(request.edge_types or exp.edge_types),
            fanout=request.limit,
            max_new=request.limit,
            timeout_s=self._calls.timeout_s,
        )
        ids = [c.memory.id for c in seeds]
        grown = await expand(self._store, ids, limits, present=ids)
        trace.backend_calls += grown.calls
        trace.expansions = grown.decisions
        trace.add(*grown.events)
        ctx = RankContext(plan=plan, now=now, settings=self._settings.ranking)
        ranked = rerank([*seeds, *grown.candidates], ctx)
        explicit = set(request.seed_ids)
        ranked = [i for i in ranked if i.id not in explicit][: request.limit]
        self._recorder.defer_candidates(trace, ranked, [])
        trace.result_ids = [i.id for i in ranked]
        trace.timings_ms["total"] = ms_since(started)
        self._recorder.finish(trace)
        return query, ranked, len(seeds), trace

    async def _plan(
        self, request: ExpandRequest, query: str, now: datetime, trace: Trace
    ) -> QueryPlan:
        exp = self._settings.expansion
        plan = plan_query(
            query,
            now=now,
            known_entities=await self._entities.names(trace),
            hop_budget=request.hops,
            max_hops=exp.max_hops,
            expand=True,
            fuzzy_names=self._settings.retrieval.fuzzy_names,
            day_first=self._settings.retrieval.date_order == "day-first",
        )
        trace.plan = plan
        return plan

    async def _id_seeds(
        self, request: ExpandRequest, trace: Trace
    ) -> tuple[list[Candidate], Lost | None]:
        """The seeds read by id, and why the read failed (None when it did not)."""
        if not request.seed_ids:
            return [], None
        found: list[Memory] | Lost = await self._calls.attempt(
            trace,
            "seed memories",
            lambda: self._store.get_memories(request.seed_ids),
            then="; partial results",
        )
        if isinstance(found, Lost):
            return [], found
        missing = set(request.seed_ids) - {m.id for m in found}
        trace.add(*(event(Stage.SERVICE, EventKind.SEED_NOT_FOUND, m) for m in sorted(missing)))
        return [Candidate(memory=m, fused_score=1.0) for m in found], None

    async def _entity_seeds(
        self, request: ExpandRequest, trace: Trace
    ) -> tuple[list[Candidate], Lost | None]:
        """The best matches of an entity-filtered search, and why no search of it reached
        the store (None when one did)."""
        if not request.entities:
            return [], None
        exp = self._settings.expansion
        filters = SearchFilters(entity_ids=list(request.entities))
        got = await retrieve(
            self._store,
            [SubQuery(" ".join(request.entities), filters=filters)],
            per_query=exp.seeds,
            timeout_s=self._calls.timeout_s,
            max_chars=self._settings.limits.max_query_chars,
        )
        trace.backend_calls += got.calls
        trace.add(*got.events)
        return got.candidates[: exp.seeds], got.store_unread
