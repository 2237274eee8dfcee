"""The Orchestrator: the one object both faces (MCP, CLI) and the eval harness call.

It composes the pipeline stages over one backend. It never asks which backend it has: it
reads the backend's capabilities, and where one is missing it degrades and says so in the
trace.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

import anyio

from memory_orchestrator.backends import registry
from memory_orchestrator.backends.base import EnumerableBackend, MemoryBackend
from memory_orchestrator.errors import (
    BackendError,
    CapabilityMissing,
    InvalidRequest,
    SemanticUnavailable,
    TraceNotFound,
)
from memory_orchestrator.models import (
    Candidate,
    CandidateTrace,
    Capabilities,
    ContextItem,
    ContextPackage,
    ContextRequest,
    Dropped,
    DropReason,
    ExpandRequest,
    ExpansionDecision,
    ExplainRequest,
    Explanation,
    GroupBy,
    HealthCheck,
    HealthReport,
    Memory,
    NewMemory,
    OutboxReport,
    QueryPlan,
    QueuedWrite,
    ReplayReport,
    ScoredItem,
    SearchFilters,
    SearchHit,
    SearchRequest,
    SearchResult,
    Status,
    Strategy,
    Trace,
    TraceSummary,
    WriteAction,
    WriteReport,
    WriteRequest,
)
from memory_orchestrator.observability import Observer
from memory_orchestrator.outbox import Outbox
from memory_orchestrator.pipeline.deduper import dedupe
from memory_orchestrator.pipeline.expander import ExpansionLimits, expand
from memory_orchestrator.pipeline.explainer import explain_text, summarize
from memory_orchestrator.pipeline.feed import Feed
from memory_orchestrator.pipeline.filters import matches
from memory_orchestrator.pipeline.local_index import LOCAL_SOURCE, LocalIndex
from memory_orchestrator.pipeline.packager import Budget, package, to_context_item
from memory_orchestrator.pipeline.planner import plan_query
from memory_orchestrator.pipeline.reranker import (
    RankContext,
    by_relevance,
    rerank,
    slot_neighbors,
    with_reasons,
)
from memory_orchestrator.pipeline.retriever import SubQuery, retrieve
from memory_orchestrator.pipeline.semantic import SEMANTIC_SOURCE, SemanticIndex, load_embedder
from memory_orchestrator.pipeline.writer import WritePolicy, Written, write_memory
from memory_orchestrator.resilience import (
    GuardedBackend,
    RetryPolicy,
    begin_notes,
    find_written,
    take_notes,
)
from memory_orchestrator.settings import Settings
from memory_orchestrator.text import cut_at_word
from memory_orchestrator.traces import TraceStore

_SUMMARY_DROPS = 25
_HYBRID_DEPTH = 200  # nearest memories in meaning blended into the local index's ranking
_SUBQUERY_WEIGHT = 0.7
_ORDER = {Status.OK: 0, Status.DEGRADED: 1, Status.ERROR: 2}


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class _Run:
    """One pipeline run: its plan, ranked items and the trace being built."""

    trace: Trace
    plan: QueryPlan
    items: list[ScoredItem] = field(default_factory=list)
    candidate_count: int = 0


class Orchestrator:
    """Search, expand, context, write, explain, replay and health over one backend."""

    def __init__(
        self,
        backend: MemoryBackend,
        settings: Settings,
        *,
        traces: TraceStore | None = None,
        outbox: Outbox | None = None,
        clock: Callable[[], datetime] = _utcnow,
        observer: Observer | None = None,
    ) -> None:
        rs = settings.retry
        # Every store call goes through the retry wrapper (transient errors only; a write is
        # checked by content hash before it is tried again).
        self.backend: MemoryBackend = GuardedBackend(
            backend, RetryPolicy(rs.attempts, rs.base_delay_s, rs.max_delay_s)
        )
        self.observer = observer
        self.settings = settings
        self.traces = traces or TraceStore(None, keep=settings.traces.keep)
        self.outbox = outbox or Outbox(None)
        self._clock = clock
        self._entities: tuple[float, list[str]] | None = None
        self._semantic: SemanticIndex | None = None
        self._semantic_error: str | None = None
        self._local: LocalIndex | None = None
        self._feed = Feed()
        # The store's own listing feeds the derived local indexes: a bulk read, outside the
        # per-call retries; None when the store cannot list its memories.
        self._lister = backend if isinstance(backend, EnumerableBackend) else None
        self._replaying = False

    @classmethod
    def from_settings(cls, settings: Settings, *, observer: Observer | None = None) -> Orchestrator:
        backend = registry.create(settings.backend, settings)
        path = settings.trace_path() if settings.traces.enabled else None
        return cls(
            backend,
            settings,
            traces=TraceStore(path, keep=settings.traces.keep),
            outbox=Outbox(settings.outbox_path()),
            observer=observer,
        )

    @property
    def store_name(self) -> str:
        """The name of the store this orchestrator fronts (`embedded`, `mnemon`, ...)."""
        return self.backend.name

    @property
    def capabilities(self) -> Capabilities:
        """What the store can do; the pipeline degrades (and says so) where it cannot."""
        return self.backend.capabilities

    # ------------------------------------------------------------------ retrieval tools

    async def search(self, request: SearchRequest) -> SearchResult:
        passthrough = (
            self.settings.passthrough if request.passthrough is None else request.passthrough
        )
        if passthrough:
            return await self._passthrough(request)
        expand_flag = request.expand or self.settings.expansion.enabled
        run = await self._run(
            "search",
            request.model_dump(mode="json"),
            request.query,
            request.task,
            request.filters,
            expand_flag,
            request.as_of,
            request.top_k,
        )
        items = tuple(to_context_item(i, self.settings.packaging.item_chars) for i in run.items)
        summary = (
            f"{len(items)} of {run.candidate_count} candidates for {run.plan.canonical_query!r}"
        )
        return SearchResult(
            query=request.query,
            strategy=run.plan.strategy,
            summary=summary,
            items=items,
            trace_id=run.trace.trace_id,
            trace=self._summary(run.trace),
        )

    async def context(self, request: ContextRequest) -> ContextPackage:
        pack = self.settings.packaging
        budget = request.response_budget
        max_items = budget.max_items if budget else pack.max_items
        max_chars = budget.max_chars if budget else pack.max_chars
        expand_flag = request.expand
        if expand_flag is None and self.settings.expansion.enabled:
            expand_flag = True
        run = await self._run(
            "context",
            request.model_dump(mode="json"),
            request.query,
            request.task,
            request.filters,
            expand_flag,
            request.as_of,
            max_items,
        )
        group_by: GroupBy = request.group_by or pack.group_by
        packed = package(
            run.items,
            run.plan,
            Budget(max_items, max_chars, pack.item_chars, group_by),
            task=request.task,
            candidate_count=run.candidate_count,
        )
        for memory_id in packed.cut:
            run.trace.dropped.append(
                Dropped(
                    id=memory_id,
                    reason=DropReason.OVER_BUDGET,
                    stage="packager",
                    detail=f"did not fit max_items={max_items} / max_chars={max_chars}",
                )
            )
        run.trace.result_ids = [i.memory_id for i in packed.items]
        self._finish(run.trace)
        return ContextPackage(
            query=request.query,
            task=request.task,
            strategy=run.plan.strategy,
            summary=packed.summary,
            items=packed.items,
            linked_entities=packed.linked_entities,
            time_span=packed.time_span,
            context_block=packed.context_block,
            trace_id=run.trace.trace_id,
            trace=self._summary(run.trace),
        )

    async def expand(self, request: ExpandRequest) -> SearchResult:
        started = time.perf_counter()
        exp = self.settings.expansion
        most = self.settings.limits.max_seed_ids
        if len(request.seed_ids) > most:
            raise InvalidRequest(
                f"seed_ids: {len(request.seed_ids)} ids; the limit is {most} (limits.max_seed_ids)"
            )
        trace = self._new_trace("expand", request.model_dump(mode="json"))
        now = self._clock()
        query = request.query or " ".join(request.entities) or "related memories"
        query = self._cut(query, "query", trace)
        plan = plan_query(
            query,
            now=now,
            known_entities=await self._known_entities(trace),
            hop_budget=request.hops,
            max_hops=exp.max_hops,
            max_subqueries=self.settings.retrieval.max_subqueries,
            expand=True,
        )
        trace.plan = plan
        seeds: list[Candidate] = []
        if request.seed_ids:
            trace.backend_calls += 1
            try:
                with anyio.fail_after(self.settings.retrieval.timeout_s):
                    found = await self.backend.get_memories(request.seed_ids)
            except Exception as exc:  # a store error must not fail the request
                found = []
                trace.notes.append(f"seed memories unavailable: {_err(exc)}; partial results")
            seeds = [Candidate(memory=m, fused_score=1.0) for m in found]
            missing = set(request.seed_ids) - {m.id for m in found}
            if found or not missing:
                trace.notes.extend(f"seed {m} not found" for m in sorted(missing))
        entity_seeds: list[Candidate] = []
        if request.entities:
            filters = SearchFilters(entity_ids=list(request.entities))
            got = await retrieve(
                self.backend,
                [SubQuery(" ".join(request.entities), filters=filters)],
                per_query=exp.seeds,
                timeout_s=self.settings.retrieval.timeout_s,
                max_chars=self.settings.limits.max_query_chars,
            )
            trace.backend_calls += got.calls
            trace.notes.extend(got.notes)
            entity_seeds = got.candidates[: exp.seeds]
        limits = ExpansionLimits(
            hops=min(request.hops, exp.max_hops),
            edge_types=tuple(request.edge_types or exp.edge_types),
            fanout=request.limit,
            max_new=request.limit,
            timeout_s=self.settings.retrieval.timeout_s,
        )
        all_seeds = [*seeds, *entity_seeds]
        grown = await expand(
            self.backend,
            [c.memory.id for c in all_seeds],
            limits,
            present=[c.memory.id for c in all_seeds],
        )
        trace.backend_calls += grown.calls
        trace.expansions, trace.notes = grown.decisions, [*trace.notes, *grown.notes]
        ranked = rerank([*all_seeds, *grown.candidates], self._rank_context(plan, now))
        explicit = set(request.seed_ids)
        ranked = [i for i in ranked if i.id not in explicit][: request.limit]
        trace.defer(partial(self._fill_candidates, trace, ranked, []))
        trace.result_ids = [i.id for i in ranked]
        trace.timings_ms["total"] = _ms(started)
        self._finish(trace)
        items = tuple(to_context_item(i, self.settings.packaging.item_chars) for i in ranked)
        return SearchResult(
            query=query,
            strategy=Strategy.EXPANDED,
            summary=f"{len(items)} memories around {len(all_seeds)} seed(s)",
            items=items,
            trace_id=trace.trace_id,
            trace=self._summary(trace),
        )

    # ------------------------------------------------------------------ write, explain, health

    async def write(self, request: WriteRequest) -> WriteReport:
        """Raises InvalidRequest, before anything is written, when a limit is broken."""
        self._check_write(request.memory)
        started = time.perf_counter()
        trace = self._new_trace("write", request.model_dump(mode="json"))
        policy = WritePolicy(
            threshold=self.settings.dedup.threshold,
            on_duplicate=request.on_duplicate or self.settings.write.on_duplicate,
            link_related=self.settings.write.link_related if request.link_related else 0,
            timeout_s=self.settings.retrieval.timeout_s,
            dry_run=request.dry_run,
            max_query_chars=self.settings.limits.max_query_chars,
        )
        if self.settings.outbox.enabled and not request.dry_run:
            waiting = await self._replay_outbox()
            if waiting:
                behind = f"{waiting} earlier write(s) still queued; kept in order behind them"
                return self._queued(trace, request, behind, started)
        try:
            written = await write_memory(self.backend, request.memory, policy)
        except (BackendError, TimeoutError) as exc:
            if request.dry_run or not self.settings.outbox.enabled:
                raise
            why = await self._unavailable(exc)
            if why is None:  # the store is up and refused this write: an error, not queued
                raise
            return self._queued(trace, request, why, started)
        self._feed.stale()  # the next query pulls what was just written into local indexes
        trace.backend_calls = written.calls
        trace.notes = [written.reason, *written.notes]
        trace.result_ids = [written.id] if written.id else []
        trace.timings_ms["total"] = _ms(started)
        self._finish(trace)
        return WriteReport(
            id=written.id,
            action=written.action,
            reason=written.reason,
            duplicate_of=written.duplicate_of,
            similarity=written.similarity,
            links=tuple(written.links),
            trace_id=trace.trace_id,
        )

    async def explain(self, request: ExplainRequest) -> Explanation:
        """Raises TraceNotFound for an unknown trace id."""
        if request.trace_id is not None:
            trace = self.traces.get(request.trace_id)
            if trace is None:
                raise TraceNotFound(f"no trace with id {request.trace_id!r}")
        else:
            assert request.query is not None
            run = await self._run(
                "explain",
                request.model_dump(mode="json"),
                request.query,
                None,
                None,
                None,
                None,
                self.settings.retrieval.top_k,
            )
            trace = run.trace
        return Explanation(trace=trace, text=explain_text(trace))

    async def replay(self, trace_id: str) -> ReplayReport:
        """Re-run a stored request and compare its results. Raises TraceNotFound."""
        old = self.traces.get(trace_id)
        if old is None:
            raise TraceNotFound(f"no trace with id {trace_id!r}")
        new_id = await self._rerun(old)
        new = self.traces.get(new_id)
        after = new.result_ids if new else []
        before = old.result_ids
        moved = [i for i in after if i in before and before.index(i) != after.index(i)]
        return ReplayReport(
            trace_id=trace_id,
            new_trace_id=new_id,
            identical=before == after,
            added=tuple(i for i in after if i not in before),
            removed=tuple(i for i in before if i not in after),
            moved=tuple(moved),
            before=tuple(before),
            after=tuple(after),
        )

    async def health(self) -> HealthReport:
        timeout = self.settings.retrieval.timeout_s
        checks: list[HealthCheck] = []
        try:
            with anyio.fail_after(timeout):
                checks.extend(await self.backend.health())
        except Exception as exc:
            checks.append(HealthCheck(name="backend", status=Status.ERROR, detail=_err(exc)))
        started = time.perf_counter()
        try:
            with anyio.fail_after(timeout):
                await self.backend.search("health probe", 1)
            checks.append(
                HealthCheck(
                    name="retrieval",
                    status=Status.OK,
                    detail="search answers",
                    latency_ms=_ms(started),
                )
            )
        except Exception as exc:
            checks.append(HealthCheck(name="retrieval", status=Status.ERROR, detail=_err(exc)))
        semantic = self._semantic_check()
        if semantic is not None:
            checks.append(semantic)
        if self.settings.outbox.enabled:
            checks.append(await self._outbox_check())
        await anyio.to_thread.run_sync(self.traces.flush)  # traces are stored behind requests
        if self.traces.errors:  # and a failure to store one shows here
            detail = f"{self.traces.errors} trace(s) not stored; last: {self.traces.last_error}"
            checks.append(HealthCheck(name="traces", status=Status.DEGRADED, detail=detail))
        status = max((c.status for c in checks), key=_ORDER.__getitem__, default=Status.ERROR)
        return HealthReport(
            status=status,
            backend=self.backend.name,
            checks=tuple(checks),
            capabilities=self.backend.capabilities,
        )

    async def close(self) -> None:
        try:
            await self.backend.close()
        finally:
            self.traces.close()
            self.outbox.close()

    # ------------------------------------------------------------------ outbox

    async def flush_outbox(self) -> OutboxReport:
        """Replay queued writes, oldest first, until one fails or the queue is empty."""
        delivered: list[QueuedWrite] = []
        waiting = await self._replay_outbox(delivered)
        last = self.outbox.last_error() if waiting else None
        note = f"{len(delivered)} replayed, {waiting} waiting" + (
            f"; the oldest fails with: {last}" if last else ""
        )
        return OutboxReport(
            depth=waiting,
            delivered=tuple(delivered),
            pending=tuple(self.outbox.pending()),
            note=note,
        )

    async def _replay_outbox(self, delivered: list[QueuedWrite] | None = None) -> int:
        """Send queued writes in order within `outbox.replay_s`; returns how many still wait.

        Exactly once: before a queued write is sent, the store is searched for its content
        hash; one found there (an earlier try reached the store) is marked delivered instead.
        One replay at a time per process; a write meanwhile queues behind it."""
        if self._replaying:
            return self.outbox.depth()
        if self.outbox.depth() == 0:
            return 0
        self._replaying = True
        timeout = self.settings.retrieval.timeout_s
        try:
            with anyio.move_on_after(self.settings.outbox.replay_s):
                for item in self.outbox.pending():
                    trace = self._new_trace("write", item.request.model_dump(mode="json"))
                    try:
                        with anyio.fail_after(timeout):
                            found = await find_written(self.backend, item.request.memory)
                        if found is not None:
                            written = Written(
                                found.id, found.action, f"already stored as {found.id}"
                            )
                        else:
                            written = await write_memory(
                                self.backend, item.request.memory, self._policy(item.request)
                            )
                    except Exception as exc:
                        self.outbox.failed(item.seq, _err(exc))
                        break
                    done = self.outbox.delivered(item.seq, written.id, written.action)
                    trace.notes = [
                        f"replayed from the outbox (#{item.seq}, queued {item.queued_at:%c})",
                        written.reason,
                        *written.notes,
                    ]
                    trace.result_ids = [written.id] if written.id else []
                    self._finish(trace)
                    if delivered is not None:
                        delivered.append(done)
        finally:
            self._replaying = False
        return self.outbox.depth()

    def _policy(self, request: WriteRequest) -> WritePolicy:
        """The write policy of a replayed request (the same as `write` builds)."""
        return WritePolicy(
            threshold=self.settings.dedup.threshold,
            on_duplicate=request.on_duplicate or self.settings.write.on_duplicate,
            link_related=self.settings.write.link_related if request.link_related else 0,
            timeout_s=self.settings.retrieval.timeout_s,
            dry_run=request.dry_run,
        )

    async def _unavailable(self, exc: BaseException) -> str | None:
        """Why the store cannot take a write now, or None when it refused this write itself.

        Timeouts and transient errors mean unavailable; a permanent error counts only when
        the store's own health check fails too (a broken file, a missing binary)."""
        if isinstance(exc, TimeoutError):
            return f"store did not answer within {self.settings.retrieval.timeout_s:g}s"
        if not isinstance(exc, BackendError) or isinstance(exc, CapabilityMissing):
            return None
        if exc.transient:
            return _err(exc)
        try:
            with anyio.fail_after(self.settings.retrieval.timeout_s):
                checks = await self.backend.health()
        except Exception as health_exc:
            return f"{_err(exc)} (health check failed: {_err(health_exc)})"
        bad = [c for c in checks if c.status is Status.ERROR]
        if not bad:
            return None
        same = bad[0].detail in str(exc)
        return f"{_err(exc)} (health: {bad[0].name}: {'fails too' if same else bad[0].detail})"

    def _queued(self, trace: Trace, request: WriteRequest, why: str, started: float) -> WriteReport:
        item = self.outbox.put(request, why)
        reason = (
            f"queued as outbox #{item.seq}: {why}; it is written, in order, once the store"
            " is back (next write or health call, or `orchestrator outbox flush`)"
        )
        trace.notes = [reason]
        trace.timings_ms["total"] = _ms(started)
        self._finish(trace)
        return WriteReport(
            id=None,
            action=WriteAction.QUEUED,
            reason=reason,
            trace_id=trace.trace_id,
            outbox_seq=item.seq,
        )

    async def _outbox_check(self) -> HealthCheck:
        started = time.perf_counter()
        try:
            replayed: list[QueuedWrite] = []
            waiting = await self._replay_outbox(replayed)
            last = self.outbox.last_error() if waiting else None
        except Exception as exc:
            return HealthCheck(name="outbox", status=Status.ERROR, detail=_err(exc))
        done = f"; {len(replayed)} replayed now" if replayed else ""
        if not waiting:
            return HealthCheck(
                name="outbox", status=Status.OK, detail="empty" + done, latency_ms=_ms(started)
            )
        oldest = self.outbox.pending(1)[0]
        detail = (
            f"{waiting} write(s) queued since {oldest.queued_at:%Y-%m-%d %H:%M:%S} UTC{done};"
            f" waiting for the store: {last or oldest.reason}"
        )
        return HealthCheck(
            name="outbox", status=Status.DEGRADED, detail=detail, latency_ms=_ms(started)
        )

    # ------------------------------------------------------------------ internals

    async def _run(
        self,
        tool: str,
        request: dict[str, Any],
        query: str,
        task: str | None,
        filters: SearchFilters | None,
        expand_flag: bool | None,
        as_of: datetime | None,
        limit: int,
    ) -> _Run:
        started = time.perf_counter()
        trace = self._new_trace(tool, request)
        query = self._cut(query, "query", trace)
        task = self._cut(task, "task", trace) if task else task
        now = as_of or self._clock()
        exp, ret = self.settings.expansion, self.settings.retrieval
        plan = plan_query(
            query,
            task=task,
            now=now,
            known_entities=await self._known_entities(trace),
            hop_budget=exp.hop_budget,
            max_hops=exp.max_hops,
            max_subqueries=ret.max_subqueries,
            expand=expand_flag,
        )
        trace.plan = plan
        trace.timings_ms["plan"] = _ms(started)
        local, index = await self._derived_indexes(trace)
        got = await retrieve(
            self.backend,
            self._subqueries(plan, filters),
            per_query=max(ret.candidate_k, limit),
            timeout_s=ret.timeout_s,
            rrf_k=ret.rrf_k,
            prefetch=partial(self._prefetched, local, index, query, filters, trace),
            max_chars=self.settings.limits.max_query_chars,
        )
        trace.backend_calls += got.calls
        trace.notes.extend(got.notes)
        trace.timings_ms["retrieve"] = _ms(started)
        ctx = self._rank_context(plan, now)
        candidates = got.candidates
        ctx = _with_semantic(ctx, index, query, candidates)
        if self.settings.ranking.context_seeds > 0 and candidates:
            candidates, ctx = await self._with_context(candidates, ctx, filters, trace)
            ctx = _with_semantic(ctx, index, query, candidates)
            trace.timings_ms["context"] = _ms(started)
        if local is not None and self.settings.local_index.lend_context:
            ctx = _with_local_context(ctx, local, candidates)
        if plan.strategy is not Strategy.DIRECT and plan.hop_budget > 0 and candidates:
            seeds = by_relevance(candidates, ctx)[: exp.seeds]
            grown = await expand(
                self.backend,
                seeds,
                ExpansionLimits(
                    plan.hop_budget,
                    tuple(exp.edge_types),
                    exp.fanout,
                    exp.max_expanded,
                    ret.timeout_s,
                ),
                present=[c.memory.id for c in candidates],
                filters=filters,
            )
            trace.backend_calls += grown.calls
            trace.expansions = grown.decisions
            trace.notes.extend(grown.notes)
            candidates = [*candidates, *grown.candidates]
            ctx = _with_semantic(ctx, index, query, candidates)
            trace.timings_ms["expand"] = _ms(started)
        ranked = rerank(candidates, ctx, reasons=False)
        kept = self._above_floor(ranked, trace)
        dd = self.settings.dedup
        deduped = dedupe(
            kept,
            threshold=dd.threshold,
            soft_threshold=dd.soft_threshold,
            weights=self.settings.ranking.weights,
            limit=limit,
        )
        trace.dropped.extend(deduped.dropped)
        items = deduped.items
        slots = self.settings.ranking.neighbor_slots
        if slots > 0 and ctx.around:
            merged = {d.id for d in deduped.dropped}
            pool = [*deduped.items, *(i for i in kept if i.id not in merged)]
            items = slot_neighbors(items, pool, ctx.around, slots)
        items = with_reasons(items[:limit], candidates, ctx)
        # Later entries win: an item the deduper penalised is traced with that penalty, even
        # when the penalty pushed it out of the result. The records are made as it is stored.
        trace.defer(partial(self._fill_candidates, trace, items, [*ranked, *deduped.items]))
        trace.result_ids = [i.id for i in items]
        trace.timings_ms["total"] = _ms(started)
        if tool != "context":
            self._finish(trace)
        return _Run(trace=trace, plan=plan, items=items, candidate_count=len(candidates))

    def _above_floor(self, ranked: list[ScoredItem], trace: Trace) -> list[ScoredItem]:
        """The items at or above the relevance floor; the trace says what the floor cut."""
        floor = self.settings.ranking.relevance_floor
        kept = [i for i in ranked if i.breakdown.relevance >= floor]
        cut = [i for i in ranked if i.breakdown.relevance < floor]
        trace.dropped.extend(
            Dropped(
                id=i.id,
                reason=DropReason.BELOW_FLOOR,
                stage="reranker",
                score=i.score,
                detail=f"relevance {i.breakdown.relevance:.3f} < floor {floor:.3f}",
            )
            for i in cut
        )
        if cut:
            trace.notes.append(f"relevance floor {floor:g} cut {len(cut)} candidate(s)")
        return kept

    async def _with_context(
        self,
        candidates: list[Candidate],
        ctx: RankContext,
        filters: SearchFilters | None,
        trace: Trace,
    ) -> tuple[list[Candidate], RankContext]:
        """The memories just before and after the best candidates, in one store call: they
        lend their words to the candidates' term match (`context_window`) and, when
        `neighbor_share` > 0, join the candidates with a share of their seed's relevance.
        Conversations are local: the answer often sits in the turn next to the one that
        matches the question."""
        rk = self.settings.ranking
        caps = self.backend.capabilities
        if not caps.graph or (caps.edge_types and "temporal" not in caps.edge_types):
            trace.notes.append("store has no temporal links; context neighbours skipped")
            return candidates, ctx
        seeds = by_relevance(candidates, ctx)[: rk.context_seeds]
        try:
            with anyio.fail_after(self.settings.retrieval.timeout_s):
                trace.backend_calls += 1
                found = await self.backend.neighbors(seeds, ("temporal",), 1, 4 * len(seeds))
        except Exception as exc:
            trace.notes.append(f"context neighbours unavailable: {_err(exc)}")
            return candidates, ctx
        memories = {c.memory.id: c.memory for c in candidates}
        around: dict[str, list[Memory]] = {}
        context_of: dict[str, str] = {}
        added: list[Candidate] = []
        for n in found:
            if n.edge_type != "temporal" or n.hops != 1 or not matches(n.memory, filters):
                continue
            around.setdefault(n.seed_id, []).append(n.memory)
            if n.seed_id in memories:
                around.setdefault(n.memory.id, []).append(memories[n.seed_id])
            if rk.neighbor_share > 0:
                context_of.setdefault(n.memory.id, n.seed_id)
            if rk.neighbor_share > 0 and n.memory.id not in memories:
                memories[n.memory.id] = n.memory
                added.append(
                    Candidate(
                        memory=n.memory,
                        hops=1,
                        expanded_from=n.seed_id,
                        edge_type="temporal",
                        edge_weight=1.0,
                    )
                )
                trace.expansions.append(
                    ExpansionDecision(
                        seed_id=n.seed_id,
                        neighbor_id=n.memory.id,
                        edge_type="temporal",
                        hops=1,
                        accepted=True,
                        reason="context neighbour of a top candidate",
                    )
                )
        ctx = replace(ctx, around=around, context_of=context_of)
        return [*candidates, *added], ctx

    def _semantic_index(self, trace: Trace) -> SemanticIndex | None:
        """The semantic index when `[semantic]` is on and its model loads (once)."""
        if not self.settings.semantic.enabled:
            return None
        index = self._load_semantic()
        if index is None:
            trace.notes.append(f"semantic relevance off: {self._semantic_error}")
        return index

    def _load_semantic(self) -> SemanticIndex | None:
        """Load the model once; a failure is kept (and reported) rather than retried."""
        sem = self.settings.semantic
        if self._semantic is None and self._semantic_error is None:
            try:
                embedder = load_embedder(sem.model)
            except SemanticUnavailable as exc:
                self._semantic_error = str(exc)
            else:
                self._semantic = SemanticIndex(
                    embedder, max_memories=self.settings.local_index.max_memories
                )
        return self._semantic

    async def _derived_indexes(
        self, trace: Trace
    ) -> tuple[LocalIndex | None, SemanticIndex | None]:
        """The local and semantic indexes that are on, brought up to date with the store."""
        local, semantic = self._local_index(), self._semantic_index(trace)
        await self._pull(local, semantic, trace)
        return local, semantic

    def _local_index(self) -> LocalIndex | None:
        li = self.settings.local_index
        if not li.enabled:
            return None
        if self._local is None:
            self._local = LocalIndex(max_memories=li.max_memories)
        self._local.configure(
            context_weight=li.context_weight,
            k1=li.k1,
            b=li.b,
            radius=li.radius,
            date_terms=li.date_terms,
        )
        return self._local

    async def _pull(
        self, local: LocalIndex | None, semantic: SemanticIndex | None, trace: Trace
    ) -> None:
        """Bring the derived local indexes up to date with the store (incrementally)."""
        if local is None and semantic is None:
            return

        def add(page: Sequence[Memory]) -> int:
            return max(
                local.add(page) if local is not None else 0,
                semantic.add(page) if semantic is not None else 0,
            )

        pulled = await self._feed.pull(
            self._lister,
            add,
            interval_s=self.settings.local_index.sync_interval_s,
            timeout_s=self.settings.retrieval.timeout_s,
        )
        if pulled.note:
            trace.notes.append(pulled.note)
        if not pulled.listed and local is not None:
            trace.notes.append("local index off: the store cannot list its memories")
        if pulled.added:
            trace.notes.append(f"local index: {pulled.added} memories added")

    async def _prefetched(
        self,
        local: LocalIndex | None,
        semantic: SemanticIndex | None,
        query: str,
        filters: SearchFilters | None,
        trace: Trace,
    ) -> list[tuple[SubQuery, list[SearchHit]]]:
        """The derived indexes' candidate lists, read back from the store in one call (the
        source of truth: a memory deleted or changed there never comes back stale)."""
        lists: list[tuple[str, float, list[tuple[Memory, float]]]] = []
        li, sem = self.settings.local_index, self.settings.semantic
        if local is not None:
            meaning = None
            if semantic is not None and li.semantic_share > 0:
                meaning = semantic.nearest(query, _HYBRID_DEPTH)
            found = local.search(query, li.candidates, meaning=meaning, share=li.semantic_share)
            lists.append((LOCAL_SOURCE, li.weight, found))
        if semantic is not None and sem.candidates > 0:
            lists.append((SEMANTIC_SOURCE, sem.weight, semantic.search(query, sem.candidates)))
        wanted = list(dict.fromkeys(m.id for _, _, found in lists for m, _ in found))
        if not wanted:
            return []
        try:
            with anyio.fail_after(self.settings.retrieval.timeout_s):
                trace.backend_calls += 1
                live = {m.id: m for m in await self.backend.get_memories(wanted)}
        except Exception as exc:
            trace.notes.append(f"local index candidates unavailable: {_err(exc)}")
            return []
        out = []
        for label, weight, found in lists:
            kept = [(live[m.id], score) for m, score in found if m.id in live]
            hits = [SearchHit(memory=m, rank=n, score=s) for n, (m, s) in enumerate(kept, 1)]
            out.append((SubQuery(label, weight=weight, filters=filters), hits))
        return out

    def _semantic_check(self) -> HealthCheck | None:
        if not self.settings.semantic.enabled:
            return None
        index = self._load_semantic()
        if index is None:
            return HealthCheck(
                name="semantic", status=Status.DEGRADED, detail=self._semantic_error or ""
            )
        return HealthCheck(
            name="semantic",
            status=Status.OK,
            detail=f"{index.embedder.name}, {len(index)} memories indexed",
        )

    def _cut(self, text: str, what: str, trace: Trace) -> str:
        """`text` cut at a word boundary to `limits.max_query_chars`, with a trace note."""
        limit = self.settings.limits.max_query_chars
        cut = cut_at_word(text, limit)
        if cut != text:
            trace.notes.append(
                f"{what} cut from {len(text)} to {len(cut)} characters at a word boundary"
                f" (limits.max_query_chars = {limit})"
            )
        return cut

    def _check_write(self, memory: NewMemory) -> None:
        """Reject a memory over the configured limits: one message naming every problem."""
        lim = self.settings.limits
        problems: list[str] = []
        if len(memory.content) > lim.max_write_chars:
            problems.append(
                f"content: {len(memory.content)} characters; the limit is"
                f" {lim.max_write_chars} (limits.max_write_chars)"
            )
        for name, values in (("entities", memory.entities), ("tags", memory.tags)):
            if len(values) > lim.max_labels:
                problems.append(
                    f"{name}: {len(values)} values; the limit is {lim.max_labels}"
                    " (limits.max_labels)"
                )
            if any(len(v) > lim.max_label_chars for v in values):
                problems.append(
                    f"{name}: a value over {lim.max_label_chars} characters"
                    " (limits.max_label_chars)"
                )
        if memory.source is not None and len(memory.source) > lim.max_label_chars:
            problems.append(
                f"source: over {lim.max_label_chars} characters (limits.max_label_chars)"
            )
        if problems:
            raise InvalidRequest("; ".join(problems) + "; nothing written")

    def _subqueries(self, plan: QueryPlan, filters: SearchFilters | None) -> list[SubQuery]:
        subs = [
            SubQuery(text, weight=1.0 if index == 0 else _SUBQUERY_WEIGHT, filters=filters)
            for index, text in enumerate(plan.subqueries)
        ]
        window = plan.time_window
        has_window = filters is not None and filters.time_range is not None
        if window is not None and not has_window and self.backend.capabilities.time_filter:
            windowed = (filters or SearchFilters()).model_copy(update={"time_range": window})
            subs.append(SubQuery(plan.subqueries[-1], weight=_SUBQUERY_WEIGHT, filters=windowed))
        return subs

    def _rank_context(self, plan: QueryPlan, now: datetime) -> RankContext:
        return RankContext(plan=plan, now=now, settings=self.settings.ranking)

    async def _passthrough(self, request: SearchRequest) -> SearchResult:
        started = time.perf_counter()
        trace = self._new_trace("search", request.model_dump(mode="json"))
        trace.notes.append("passthrough: the store's own results, unchanged")
        trace.backend_calls = 1
        query = self._cut(request.query, "query", trace)
        with anyio.fail_after(self.settings.retrieval.timeout_s):
            hits = await self.backend.search(query, request.top_k, request.filters)
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
        trace.timings_ms["total"] = _ms(started)
        self._finish(trace)
        return SearchResult(
            query=request.query,
            strategy=Strategy.DIRECT,
            passthrough=True,
            summary=f"{len(items)} raw results from {self.backend.name}",
            items=items,
            trace_id=trace.trace_id,
            trace=self._summary(trace),
        )

    async def _rerun(self, old: Trace) -> str:
        tool, request = old.tool, old.request
        if tool == "search":
            return (await self.search(SearchRequest.model_validate(request))).trace_id
        if tool == "context":
            return (await self.context(ContextRequest.model_validate(request))).trace_id
        if tool == "expand":
            return (await self.expand(ExpandRequest.model_validate(request))).trace_id
        if tool == "explain":
            return (await self.explain(ExplainRequest.model_validate(request))).trace.trace_id
        raise TraceNotFound(f"trace {old.trace_id!r} is a {tool!r} request, which is not replayed")

    async def _known_entities(self, trace: Trace) -> list[str]:
        if not self.backend.capabilities.entity_index:
            return []
        now = time.monotonic()
        if self._entities and now - self._entities[0] < self.settings.cache_ttl_s:
            trace.cache_hits += 1
            return self._entities[1]
        try:
            with anyio.fail_after(self.settings.retrieval.timeout_s):
                names = await self.backend.known_entities()
            trace.backend_calls += 1
        except Exception as exc:
            trace.notes.append(f"known entities unavailable: {_err(exc)}")
            return []
        self._entities = (now, names)
        return names

    def _fill_candidates(
        self, trace: Trace, items: Sequence[ScoredItem], ranked: Sequence[ScoredItem]
    ) -> None:
        trace.candidates = self._candidate_traces(items, ranked)

    def _candidate_traces(
        self, items: Sequence[ScoredItem], ranked: Sequence[ScoredItem]
    ) -> list[CandidateTrace]:
        if self.settings.traces.verbosity == "minimal":
            return []
        final = {item.id: rank for rank, item in enumerate(items, start=1)}
        seen: dict[str, ScoredItem] = {i.id: i for i in ranked}
        seen.update({i.id: i for i in items})
        return [
            CandidateTrace(
                id=i.id,
                sources=i.candidate.sources,
                hops=i.candidate.hops,
                expanded_from=i.candidate.expanded_from,
                breakdown=i.breakdown,
                final_rank=final.get(i.id),
            )
            for i in seen.values()
        ]

    def _new_trace(self, tool: str, request: dict[str, Any]) -> Trace:
        begin_notes()
        return Trace(
            trace_id="tr_" + uuid.uuid4().hex[:16],
            tool=tool,
            created_at=_utcnow(),
            backend=self.backend.name,
            request=request,
        )

    def _finish(self, trace: Trace) -> None:
        trace.notes.extend(take_notes())
        trace.notes.extend(n for n in self.backend.notes if n not in trace.notes)
        if self.settings.traces.verbosity == "minimal":
            trace.expansions = [d for d in trace.expansions if d.accepted]
        if self.observer is not None:
            self.observer.finished(trace.complete())
        self.traces.save(trace)  # stored behind the request; a failure shows in health

    def record_failure(
        self, tool: str, request: dict[str, Any], error: str, latency_ms: float
    ) -> Trace:
        """Keep a trace (and a log line) for a request that failed before it had one."""
        trace = self._new_trace(tool, request)
        trace.error = error
        trace.timings_ms["total"] = round(latency_ms, 3)
        self._finish(trace)
        return trace

    @staticmethod
    def _summary(trace: Trace) -> TraceSummary:
        summary = summarize(trace)
        if len(summary.dropped) > _SUMMARY_DROPS:
            more = len(summary.dropped) - _SUMMARY_DROPS
            return summary.model_copy(
                update={
                    "dropped": summary.dropped[:_SUMMARY_DROPS],
                    "notes": (*summary.notes, f"{more} more dropped; see memory_explain"),
                }
            )
        return summary


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


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
