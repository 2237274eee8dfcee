"""The read path: one pipeline run from a query to ranked, explained items.

    plan -> retrieve (store subqueries + derived indexes, fused) -> context neighbours
         -> expand along the graph -> rerank -> relevance floor -> dedupe
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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import Any

import anyio

from memory_orchestrator.backends.base import MemoryBackend, on_left_out
from memory_orchestrator.derived.entities import KnownEntities
from memory_orchestrator.derived.indexes import DerivedIndexes, Indexes
from memory_orchestrator.derived.local_index import LocalIndex
from memory_orchestrator.derived.semantic import SemanticIndex
from memory_orchestrator.errors import StoreUnreadable
from memory_orchestrator.models import (
    Candidate,
    ContextItem,
    Dropped,
    DropReason,
    QueryPlan,
    ScoredItem,
    SearchFilters,
    SearchRequest,
    SearchResult,
    Strategy,
    Trace,
)
from memory_orchestrator.pipeline.currency import current_only, newest_first
from memory_orchestrator.pipeline.deduper import dedupe
from memory_orchestrator.pipeline.expander import ExpansionLimits, expand
from memory_orchestrator.pipeline.neighbours import NeighbourLimits, add_context_neighbours
from memory_orchestrator.pipeline.planner import plan_query
from memory_orchestrator.pipeline.relevance import RankContext
from memory_orchestrator.pipeline.reranker import by_relevance, rank, with_reasons
from memory_orchestrator.pipeline.retriever import Hit, Lost, SubQuery, retrieve
from memory_orchestrator.pipeline.scored import Items, Scored
from memory_orchestrator.service.recorder import TraceRecorder
from memory_orchestrator.service.store_calls import unreadable
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.learned import load_learned_cached
from memory_orchestrator.text import cut_at_word


@dataclass(frozen=True)
class ReadRequest:
    """What one run reads: the request as the caller sent it (for the trace) and its parts."""

    tool: str
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
        trace.notes.append(
            f"{what} cut from {len(text)} to {len(cut)} characters at a word boundary"
            f" (limits.max_query_chars = {limit})"
        )
    return cut


@dataclass
class _Pass:
    """The state one run carries from stage to stage."""

    req: ReadRequest
    trace: Trace
    query: str
    now: datetime
    started: float
    plan: QueryPlan | None = None
    indexes: Indexes = field(default_factory=lambda: Indexes(None, None))
    candidates: list[Candidate] = field(default_factory=list)
    ctx: RankContext | None = None
    unread: Lost | None = None  # why no search reached the store (None: the store answered)
    left_out: list[str] = field(default_factory=list)  # parts of the store that failed


def _left_out_warning(run: _Pass) -> str | None:
    """The answer's first line when a store made of several (`fused`) searched without some
    of them (`base.left_out`); None when every part answered."""
    if not run.left_out:
        return None
    by_part = {why.partition(": ")[0]: why for why in run.left_out}  # one line per part
    short = cut_at_word("; ".join(by_part.values()), 200)
    warning = (
        f"Warning: part of the memory could not be searched ({short}); these memories come"
        " from the rest of it and may be incomplete."
    )
    run.trace.notes.append(warning)
    return warning


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
        """Plan, retrieve, widen, expand and rank. With `finish=False` the caller finishes the
        trace (the context tool adds the packager's drops first)."""
        trace = self._recorder.begin(req.tool, req.request)
        limit = self._settings.limits.max_query_chars
        run = _Pass(
            req=req,
            trace=trace,
            query=cut_query(req.query, "query", limit, trace),
            now=req.as_of or self._clock(),
            started=time.perf_counter(),
        )
        # the query's vector (when the semantic index will want it) is computed on a worker
        # thread while the request plans and waits for the store
        self._indexes.encode_ahead(run.query)
        task = cut_query(req.task, "task", limit, trace) if req.task else req.task
        with on_left_out(run.left_out.append):
            plan = await self._plan(run, task)
            await self._retrieve(run, plan)
            await self._widen(run, plan)
            await self._expand(run, plan)
        items = self._rank(run)
        trace.result_ids = [i.id for i in items]
        trace.timings_ms["total"] = ms_since(run.started)
        warning = self._unread(run, items)
        if finish:
            self._recorder.finish(trace)
        return ReadOutcome(trace, plan, items, len(run.candidates), warning)

    def _unread(self, run: _Pass, items: Sequence[ScoredItem]) -> str | None:
        """None when the store was searched. Otherwise the warning that goes with what the
        derived indexes found, or, when they found nothing, `StoreUnreadable` (the trace
        finished with the error first, so that it can be explained)."""
        if run.unread is None:
            return _left_out_warning(run)
        reason, transient = run.unread
        if items:
            short = cut_at_word(reason.split("; ")[0], 160)  # the cause, not the remedy
            warning = (
                f"Warning: the memory store could not be searched ({short}); these memories"
                " come from the orchestrator's own indexes and may be incomplete."
            )
            run.trace.notes.append(warning)
            return warning
        if self._indexes.loading:  # they may hold it once loaded
            reason += "; the local index was still loading"
            transient = True
        error = unreadable(run.trace, Lost(reason, transient))
        self._recorder.finish(run.trace)
        raise error

    def rank_context(
        self, plan: QueryPlan, now: datetime, trace: Trace | None = None
    ) -> RankContext:
        """What ranking reads; with `ranking.learned_weights`, the weights learned for the
        plan's question type (a trace note says which)."""
        ranking = self._settings.ranking
        path = ranking.learned_weights
        if path is not None:
            chosen, weights = load_learned_cached(path).for_question(plan.question_type.value)
            ranking = ranking.model_copy(update={"weights": weights})
            if trace is not None:
                trace.notes.append(f"weights learned for {chosen!r} questions ({path.name})")
        return RankContext(plan=plan, now=now, settings=ranking)

    async def passthrough(self, request: SearchRequest) -> SearchResult:
        """The store's own results, unchanged (`passthrough`): one bounded call, a trace."""
        started = time.perf_counter()
        trace = self._recorder.begin("search", request.model_dump(mode="json"))
        trace.notes.append("passthrough: the store's own results, unchanged")
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

    async def _plan(self, run: _Pass, task: str | None) -> QueryPlan:
        exp, ret = self._settings.expansion, self._settings.retrieval
        plan = plan_query(
            run.query,
            task=task,
            now=run.now,
            known_entities=await self._entities.names(run.trace),
            hop_budget=exp.hop_budget,
            max_hops=exp.max_hops,
            max_subqueries=ret.max_subqueries,
            expand=run.req.expand,
            fuzzy_names=ret.fuzzy_names,
            day_first=ret.date_order == "day-first",
        )
        run.trace.plan = plan
        run.trace.timings_ms["plan"] = ms_since(run.started)
        return plan

    async def _retrieve(self, run: _Pass, plan: QueryPlan) -> None:
        ret, trace = self._settings.retrieval, run.trace
        run.indexes = await self._indexes.refresh(trace)
        # the semantic ranking (a product with every memory's vector) on its worker thread,
        # while the store searches and the local index works on this one
        self._indexes.rank_ahead(run.indexes, run.query)
        lists = partial(
            self._indexes.candidate_lists, run.indexes, run.query, run.req.filters, trace
        )
        ahead: dict[str, float] = {}

        async def prefetch() -> Sequence[tuple[SubQuery, Sequence[Hit]]]:
            found = await lists()
            if run.indexes.semantic is not None:
                # the lists' memories' similarities now, while the store's searches run
                # (the event loop's thread would otherwise wait for them)
                memories = {h.memory.id: h.memory for _, hits in found for h in hits}
                ahead.update(run.indexes.semantic.similarities(run.query, [*memories.values()]))
            return found

        got = await retrieve(
            self._store,
            self._subqueries(plan, run.req.filters),
            per_query=max(ret.candidate_k, run.req.limit),
            timeout_s=ret.timeout_s,
            rrf_k=self._settings.ranking.rrf_k,
            prefetch=prefetch,
            max_chars=self._settings.limits.max_query_chars,
            list_budget_s=ret.list_budget_s or None,
            dispatching=self._dispatching,
        )
        trace.backend_calls += got.calls
        trace.notes.extend(got.notes)
        trace.timings_ms["retrieve"] = ms_since(run.started)
        run.candidates = got.candidates
        run.unread = got.store_unread
        ctx = self.rank_context(plan, run.now, trace)
        if ahead:  # (only the candidates': the same keys and values as one call over them)
            known = {i: ahead[i] for i in (c.memory.id for c in run.candidates) if i in ahead}
            ctx = replace(ctx, semantic=known)
        run.ctx = _with_semantic(ctx, run.indexes.semantic, run.query, run.candidates)

    async def _widen(self, run: _Pass, plan: QueryPlan) -> None:
        """Context neighbours from the store, then from the local index."""
        assert run.ctx is not None
        rk, trace = self._settings.ranking, run.trace
        if rk.context_seeds > 0 and run.candidates:
            limits = NeighbourLimits(
                rk.context_seeds, rk.neighbor_share, self._timeout(), rk.context_gap_s
            )
            got = await add_context_neighbours(
                self._store, run.candidates, run.ctx, limits, run.req.filters
            )
            trace.backend_calls += got.calls
            trace.notes.extend(got.notes)
            trace.expansions.extend(got.decisions)
            run.candidates = got.candidates
            run.ctx = _with_semantic(got.ctx, run.indexes.semantic, run.query, run.candidates)
            trace.timings_ms["context"] = ms_since(run.started)
        local = run.indexes.local
        if local is not None and self._settings.local_index.lend_context:
            run.ctx = _with_local_context(run.ctx, local, run.candidates)

    async def _expand(self, run: _Pass, plan: QueryPlan) -> None:
        assert run.ctx is not None
        exp, trace = self._settings.expansion, run.trace
        if plan.strategy is Strategy.DIRECT or plan.hop_budget <= 0 or not run.candidates:
            return
        seeds = by_relevance(run.candidates, run.ctx, exp.seeds)
        limits = ExpansionLimits(
            plan.hop_budget, tuple(exp.edge_types), exp.fanout, exp.max_expanded, self._timeout()
        )
        grown = await expand(
            self._store,
            seeds,
            limits,
            present=[c.memory.id for c in run.candidates],
            filters=run.req.filters,
        )
        trace.backend_calls += grown.calls
        trace.expansions = [*trace.expansions, *grown.decisions]
        trace.notes.extend(grown.notes)
        run.candidates = [*run.candidates, *grown.candidates]
        run.ctx = _with_semantic(run.ctx, run.indexes.semantic, run.query, run.candidates)
        trace.timings_ms["expand"] = ms_since(run.started)

    def _rank(self, run: _Pass) -> list[ScoredItem]:
        """Rerank, cut below the floor, merge near-duplicates, give neighbours their slots,
        and say why each item was chosen."""
        assert run.ctx is not None
        ctx, limit, trace = run.ctx, run.req.limit, run.trace
        current = current_only(run.candidates, run.req.as_of, run.req.history)
        trace.dropped.extend(current.dropped)
        if current.dropped:
            trace.notes.append(f"{len(current.dropped)} superseded memory(ies) left out")
        apart = self._settings.write.update_threshold
        # plain rows; each one's ScoredItem is made when a stage reads it (most never are,
        # but by the trace, behind the request)
        ranked = rank(current.candidates, ctx, reasons=False)
        kept = self._above_floor(ranked, trace)
        dd = self._settings.dedup
        deduped = dedupe(  # (rows in, rows out where it changed nothing)
            kept,
            threshold=dd.threshold,
            soft_threshold=dd.soft_threshold,
            weights=ctx.settings.weights,
            limit=limit,
        )
        trace.dropped.extend(deduped.dropped)
        found = newest_first(deduped.items[: 2 * limit], apart)[:limit]
        items = with_reasons(found, current.candidates, ctx, {row.id: row for row in ranked})
        # Later entries win: an item the deduper penalised is traced with that penalty, even
        # when the penalty pushed it out of the result. The records are made as it is stored.
        self._recorder.defer_candidates(trace, items, _Chain(Items(ranked), Items(deduped.items)))
        return items

    # ------------------------------------------------------------------ helpers

    def _timeout(self) -> float:
        return self._settings.retrieval.timeout_s

    def _above_floor(self, ranked: list[Scored], trace: Trace) -> list[Scored]:
        """The rows at or above the relevance floor; the trace says what the floor cut."""
        floor = self._settings.ranking.relevance_floor
        kept = [i for i in ranked if i.relevance >= floor]
        cut = [i for i in ranked if i.relevance < floor]
        trace.dropped.extend(
            Dropped(
                id=i.id,
                reason=DropReason.BELOW_FLOOR,
                stage="reranker",
                score=i.total,
                detail=f"relevance {i.relevance:.3f} < floor {floor:.3f}",
            )
            for i in cut
        )
        if cut:
            trace.notes.append(f"relevance floor {floor:g} cut {len(cut)} candidate(s)")
        return kept

    def _subqueries(self, plan: QueryPlan, filters: SearchFilters | None) -> list[SubQuery]:
        part = self._settings.ranking.subquery_weight
        subs = [
            SubQuery(text, weight=1.0 if index == 0 else part, filters=filters)
            for index, text in enumerate(plan.subqueries)
        ]
        window = plan.time_window
        has_window = filters is not None and filters.time_range is not None
        if window is not None and not has_window and self._store.capabilities.time_filter:
            windowed = (filters or SearchFilters()).model_copy(update={"time_range": window})
            subs.append(SubQuery(plan.subqueries[-1], weight=part, filters=windowed))
        return subs


class _Chain(Iterable[ScoredItem]):
    """Two sequences read one after the other, as often as asked, without copying (nor
    making) their items now."""

    def __init__(self, first: Iterable[ScoredItem], second: Iterable[ScoredItem]) -> None:
        self._first, self._second = first, second

    def __iter__(self) -> Iterator[ScoredItem]:
        yield from self._first
        yield from self._second


def _with_semantic(
    ctx: RankContext, index: SemanticIndex | None, query: str, candidates: Sequence[Candidate]
) -> RankContext:
    """`ctx` with the semantic similarity of every candidate not scored yet."""
    if index is None:
        return ctx
    missing = [c.memory for c in candidates if c.memory.id not in ctx.semantic]
    if not missing:
        return ctx
    return replace(ctx, semantic={**ctx.semantic, **index.similarities(query, missing)})


def _with_local_context(
    ctx: RankContext, local: LocalIndex, candidates: Sequence[Candidate]
) -> RankContext:
    """`ctx` with every candidate's neighbours in time from the local index (those the store
    did not already give), so that each one's term match can read its context."""
    missing = [c.memory.id for c in candidates if c.memory.id not in ctx.around]
    found = local.around(missing)
    if not found:
        return ctx
    return replace(ctx, around={**ctx.around, **found})
