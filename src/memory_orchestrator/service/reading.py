"""The read path: one pipeline run from a query to ranked, explained items.

    plan -> retrieve (store subqueries + derived indexes, fused) -> context neighbours
         -> expand along the graph -> rerank -> dedupe
         -> newest first -> reasons

A run takes one frozen `ReadRequest` and returns the plan, the items and the trace being built;
`search`, `context` and `explain` are runs with other limits and other packaging. Every stage
that calls the store degrades on failure and says so in the trace; no stage fails the request
but the planner's input checks, and one rule: when every search of the store failed, an empty
answer would pass a broken store off as an empty memory, so the run raises `StoreUnreadable`
(the trace kept, with the error); when the derived indexes still found memories, they come back
with a `warning` that says the store itself could not be searched. A store made of several
(`fused`) that searched without a failing part says so (`base.left_out`), and the `warning`
says that part of the memory could not be searched.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from itertools import chain
from typing import Any

import anyio

from memory_orchestrator.backends.base import MemoryBackend, on_left_out
from memory_orchestrator.derived.entities import KnownEntities
from memory_orchestrator.derived.indexes import DerivedIndexes, Indexes
from memory_orchestrator.derived.local_index import LocalIndex
from memory_orchestrator.errors import StoreUnreadable
from memory_orchestrator.models import (
    ContextItem,
    EventKind,
    Memory,
    QueryPlan,
    ScoredItem,
    SearchFilters,
    SearchRequest,
    SearchResult,
    Stage,
    Strategy,
    ToolName,
    Trace,
    event,
    render,
)
from memory_orchestrator.pipeline.currency import current_only, newest_first
from memory_orchestrator.pipeline.deduper import dedupe
from memory_orchestrator.pipeline.expander import FANOUT, MAX_EXPANDED, ExpansionLimits, expand
from memory_orchestrator.pipeline.neighbours import NeighbourLimits, add_context_neighbours
from memory_orchestrator.pipeline.planner import plan_query
from memory_orchestrator.pipeline.relevance import RankContext
from memory_orchestrator.pipeline.reranker import by_relevance, rank, with_reasons
from memory_orchestrator.pipeline.retriever import Hit, Lost, SubQuery, retrieve
from memory_orchestrator.pipeline.table import CandidateTable
from memory_orchestrator.service.recorder import TraceRecorder
from memory_orchestrator.service.store_calls import unreadable
from memory_orchestrator.settings import Settings
from memory_orchestrator.text import cut_at_word


@dataclass(frozen=True)
class ReadRequest:
    """What one run reads: the request as the caller sent it (for the trace) and its parts."""

    tool: ToolName
    request: dict[str, Any]
    query: str
    limit: int
    task: str | None = None
    filters: SearchFilters | None = None
    expand: bool | None = None
    as_of: datetime | None = None
    history: bool = False  # corrected memories stay (`pipeline.currency`)


@dataclass
class ReadOutcome:
    """One run's plan, ranked items and the trace being built (not finished yet)."""

    trace: Trace
    plan: QueryPlan
    items: list[ScoredItem] = field(default_factory=list)
    candidate_count: int = 0
    warning: str | None = None  # the store could not be searched: these are the indexes' alone


def ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def cut_query(text: str, what: str, limit: int, trace: Trace) -> str:
    """`text` cut at a word boundary to `limit` characters, with a trace note."""
    cut = cut_at_word(text, limit)
    if cut != text:
        chars, kept = len(text), len(cut)
        trace.add(
            event(
                Stage.SERVICE, EventKind.QUERY_CUT, what=what, chars=chars, kept=kept, limit=limit
            )
        )
    return cut


@dataclass(frozen=True)
class _Read:
    """What the stages of one run read besides the candidate table: the request, its query
    (cut to the limit), the plan, what ranking reads, the derived indexes and the trace
    being built."""

    req: ReadRequest
    query: str
    plan: QueryPlan
    ctx: RankContext
    indexes: Indexes
    trace: Trace
    started: float

    def similarity(self, memories: Sequence[Memory]) -> Mapping[str, float]:
        semantic = self.indexes.semantic
        return semantic.similarities(self.query, memories) if semantic is not None else {}


def _left_out_warning(left_out: Sequence[str], trace: Trace) -> str | None:
    """The answer's first line when a store made of several (`fused`) searched without some
    of them (`base.left_out`); None when every part answered."""
    if not left_out:
        return None
    by_part = {why.partition(": ")[0]: why for why in left_out}  # one line per part
    short = cut_at_word("; ".join(by_part.values()), 200)
    warning = event(Stage.RETRIEVER, EventKind.STORE_PART_LEFT_OUT, reason=short)
    trace.add(warning)
    return render(warning)


class ReadPath:
    """Runs the read pipeline over one store."""

    def __init__(
        self,
        store: MemoryBackend,
        settings: Settings,
        recorder: TraceRecorder,
        indexes: DerivedIndexes,
        entities: KnownEntities,
        clock: Callable[[], datetime],
        *,
        dispatching: bool = False,
    ) -> None:
        # `settings` is read at each run (retrieval, expansion, ranking, dedup, local_index,
        # limits), so a changed setting takes effect on the next request.
        self._store, self._settings, self._recorder = store, settings, recorder
        self._indexes, self._entities, self._clock = indexes, entities, clock
        # `dispatching`: the store says when its searches reach its database
        # (`capabilities.dispatch_signal`)
        self._dispatching = dispatching

    async def run(self, req: ReadRequest, *, finish: bool = True) -> ReadOutcome:
        """Plan, retrieve, widen, expand and rank: stages over one candidate table. With
        `finish=False` the caller finishes the trace (the context tool adds the packager's
        drops first)."""
        started = time.perf_counter()
        trace = self._recorder.begin(req.tool, req.request)
        limit = self._settings.limits.max_query_chars
        query = cut_query(req.query, "query", limit, trace)
        now = req.as_of or self._clock()
        # the query's vector (when the semantic index will want it) is computed on a worker
        # thread while the request plans and waits for the store
        self._indexes.encode_ahead(query)
        task = cut_query(req.task, "task", limit, trace) if req.task else req.task
        left_out: list[str] = []  # parts of the store that failed
        with on_left_out(left_out.append):
            plan = await self._plan(req, query, task, now, trace, started)
            indexes = await self._indexes.refresh(trace)
            ctx = self.rank_context(plan, now)
            read = _Read(req, query, plan, ctx, indexes, trace, started)
            table, unread = await self._retrieve(read)
            table = await self._widen(table, read)
            table = await self._expand(table, read)
        items = self._rank(table, read)
        trace.result_ids = [i.id for i in items]
        trace.timings_ms["total"] = ms_since(started)
        warning = self._unread(unread, left_out, trace, items)
        if finish:
            self._recorder.finish(trace)
        return ReadOutcome(trace, plan, items, len(table), warning)

    def _unread(
        self,
        unread: Lost | None,
        left_out: Sequence[str],
        trace: Trace,
        items: Sequence[ScoredItem],
    ) -> str | None:
        """None when the store was searched. Otherwise the warning that goes with what the
        derived indexes found, or, when they found nothing, `StoreUnreadable` (the trace
        finished with the error first, so that it can be explained)."""
        if unread is None:
            return _left_out_warning(left_out, trace)
        reason, transient = unread
        if items:
            short = cut_at_word(reason.split("; ")[0], 160)  # the cause, not the remedy
            warning = event(Stage.RETRIEVER, EventKind.STORE_UNREAD, reason=short)
            trace.add(warning)
            return render(warning)
        if self._indexes.loading:  # they may hold it once loaded
            reason += "; the local index was still loading"
            transient = True
        error = unreadable(trace, Lost(reason, transient))
        self._recorder.finish(trace)
        raise error

    def rank_context(self, plan: QueryPlan, now: datetime) -> RankContext:
        """What ranking reads."""
        return RankContext(plan=plan, now=now, settings=self._settings.ranking)

    async def passthrough(self, request: SearchRequest) -> SearchResult:
        """The store's own results, unchanged (`passthrough`): one bounded call, a trace."""
        started = time.perf_counter()
        trace = self._recorder.begin(ToolName.SEARCH, request.model_dump(mode="json"))
        trace.add(event(Stage.RETRIEVER, EventKind.PASSTHROUGH))
        trace.backend_calls = 1
        query = cut_query(request.query, "query", self._settings.limits.max_query_chars, trace)
        try:
            with anyio.fail_after(self._timeout()):
                hits = await self._store.search(query, request.top_k, request.filters)
        except TimeoutError as exc:
            trace.error = f"the store did not answer in {self._timeout():g}s"
            self._recorder.finish(trace)
            raise StoreUnreadable(
                f"no search reached the store ({trace.error}); nothing was read, so this is"
                f" not an empty memory: ask again in a moment (trace {trace.trace_id})",
                transient=True,
                trace_id=trace.trace_id,
            ) from exc
        items = tuple(
            ContextItem(
                memory_id=h.memory.id,
                summary=h.memory.content,
                score=h.score,
                reasons=(f"store rank {h.rank}",),
                linked_entities=h.memory.entities,
                timestamp=h.memory.created_at,
                type=h.memory.type,
                store=h.memory.store,
            )
            for h in hits
        )
        trace.result_ids = [h.memory.id for h in hits]
        trace.timings_ms["total"] = ms_since(started)
        self._recorder.finish(trace)
        return SearchResult(
            query=request.query,
            strategy=Strategy.DIRECT,
            passthrough=True,
            summary=f"{len(items)} raw results from {self._store.name}",
            items=items,
            trace_id=trace.trace_id,
            trace=self._recorder.summary(trace),
        )

    # ------------------------------------------------------------------ stages

    async def _plan(
        self,
        req: ReadRequest,
        query: str,
        task: str | None,
        now: datetime,
        trace: Trace,
        started: float,
    ) -> QueryPlan:
        exp, ret = self._settings.expansion, self._settings.retrieval
        plan = plan_query(
            query,
            task=task,
            now=now,
            known_entities=await self._entities.names(trace),
            max_hops=exp.max_hops,
            expand=req.expand,
            fuzzy_names=ret.fuzzy_names,
            day_first=ret.date_order == "day-first",
        )
        trace.plan = plan
        trace.timings_ms["plan"] = ms_since(started)
        return plan

    async def _retrieve(self, read: _Read) -> tuple[CandidateTable, Lost | None]:
        """The store's searches and the derived indexes' lists, fused: the table's first
        rows, each with its semantic similarity; and why no search reached the store, if so."""
        ret, trace, indexes = self._settings.retrieval, read.trace, read.indexes
        # the semantic ranking (a product with every memory's vector) on its worker thread,
        # while the store searches and the local index works on this one
        self._indexes.rank_ahead(indexes, read.query)
        lists = partial(self._indexes.candidate_lists, indexes, read.query, read.req.filters, trace)
        ahead: dict[str, float] = {}

        async def prefetch() -> Sequence[tuple[SubQuery, Sequence[Hit]]]:
            found = await lists()
            # the lists' memories' similarities now, while the store's searches run (the
            # event loop's thread would otherwise wait for them)
            memories = {h.memory.id: h.memory for _, hits in found for h in hits}
            ahead.update(read.similarity([*memories.values()]))
            return found

        got = await retrieve(
            self._store,
            self._subqueries(read.plan, read.req.filters),
            per_query=max(ret.candidate_k, read.req.limit),
            timeout_s=ret.timeout_s,
            rrf_k=self._settings.ranking.rrf_k,
            prefetch=prefetch,
            max_chars=self._settings.limits.max_query_chars,
            list_budget_s=ret.list_budget_s or None,
            dispatching=self._dispatching,
        )
        trace.backend_calls += got.calls
        trace.add(*got.events)
        trace.timings_ms["retrieve"] = ms_since(read.started)
        table = CandidateTable.of(got.candidates, read.similarity, known=ahead)
        return table, got.store_unread

    async def _widen(self, table: CandidateTable, read: _Read) -> CandidateTable:
        """Context neighbours from the store, then from the local index."""
        rk, trace = self._settings.ranking, read.trace
        if rk.context_seeds > 0 and len(table):
            limits = NeighbourLimits(
                rk.context_seeds, rk.neighbor_share, self._timeout(), rk.context_gap_s
            )
            got = await add_context_neighbours(
                self._store, table, read.ctx, limits, read.req.filters, read.similarity
            )
            trace.backend_calls += got.calls
            trace.add(*got.events)
            trace.expansions.extend(got.decisions)
            table = got.table
            trace.timings_ms["context"] = ms_since(read.started)
        local = read.indexes.local
        if local is not None:  # every candidate's term match reads its neighbours' words
            table = _with_local_context(table, local)
        return table

    async def _expand(self, table: CandidateTable, read: _Read) -> CandidateTable:
        exp, trace, plan = self._settings.expansion, read.trace, read.plan
        if plan.strategy is Strategy.DIRECT or plan.hop_budget <= 0 or not len(table):
            return table
        seeds = by_relevance(table, read.ctx, exp.seeds)
        limits = ExpansionLimits(
            plan.hop_budget, tuple(exp.edge_types), FANOUT, MAX_EXPANDED, self._timeout()
        )
        grown = await expand(
            self._store, seeds, limits, present=table.ids, filters=read.req.filters
        )
        trace.backend_calls += grown.calls
        trace.expansions = [*trace.expansions, *grown.decisions]
        trace.add(*grown.events)
        trace.timings_ms["expand"] = ms_since(read.started)
        return table.extended(grown.candidates, read.similarity)

    def _rank(self, table: CandidateTable, read: _Read) -> list[ScoredItem]:
        """Leave out what was corrected, rerank, cut below the floor, merge near-duplicates,
        put the newer of two disagreeing memories first, and say why each item was chosen."""
        limit, trace = read.req.limit, read.trace
        current = current_only(table.candidates, read.req.as_of, read.req.history)
        trace.dropped.extend(current.dropped)
        if current.dropped:
            left = len(current.dropped)
            trace.add(event(Stage.CURRENCY, EventKind.SUPERSEDED_LEFT_OUT, count=left))
            table = table.take(current.rows)
        ranked = rank(table, read.ctx)
        dd = self._settings.dedup
        deduped = dedupe(
            ranked, threshold=dd.threshold, soft_threshold=dd.soft_threshold, limit=limit
        )
        trace.dropped.extend(deduped.dropped)
        top = deduped.table.take(range(min(2 * limit, len(deduped.table))))
        found = newest_first(top, self._settings.write.update_threshold)
        shown = range(min(limit, len(found)))
        items = with_reasons(found, read.ctx, shown, current.candidates)
        # the trace records every row, as the deduper left it where it changed it (later
        # entries win), made as the trace is stored, behind the request
        changed = deduped.table
        records = chain(
            (ranked.item(row) for row in range(len(ranked))),
            (changed.item(row) for row in range(len(changed)) if changed.notes[row]),
        )
        self._recorder.defer_candidates(trace, items, records)
        return items

    # ------------------------------------------------------------------ helpers

    def _timeout(self) -> float:
        return self._settings.retrieval.timeout_s

    def _subqueries(self, plan: QueryPlan, filters: SearchFilters | None) -> list[SubQuery]:
        # every subquery's list weighs as the whole question's (1)
        subs = [SubQuery(text, filters=filters) for text in plan.subqueries]
        window = plan.time_window
        has_window = filters is not None and filters.time_range is not None
        if window is not None and not has_window and self._store.capabilities.time_filter:
            windowed = (filters or SearchFilters()).model_copy(update={"time_range": window})
            subs.append(SubQuery(plan.subqueries[-1], filters=windowed))
        return subs


def _with_local_context(table: CandidateTable, local: LocalIndex) -> CandidateTable:
    """`table` with every row's neighbours in time from the local index (those the store
    did not already give), so that each one's term match can read its context."""
    missing = [i for i in table.ids if i not in table.around]
    found = local.around(missing)
    if not found:
        return table
    return replace(table, around={**table.around, **found})
