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
from typing import Any

import anyio

from memory_orchestrator.backends import registry
from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.models import (
    Candidate,
    CandidateTrace,
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
    InvalidRequest,
    Memory,
    NewMemory,
    QueryPlan,
    ReplayReport,
    ScoredItem,
    SearchFilters,
    SearchRequest,
    SearchResult,
    Status,
    Strategy,
    Trace,
    TraceSummary,
    WriteReport,
    WriteRequest,
)
from memory_orchestrator.pipeline.deduper import dedupe
from memory_orchestrator.pipeline.expander import ExpansionLimits, expand
from memory_orchestrator.pipeline.explainer import explain_text, summarize
from memory_orchestrator.pipeline.filters import matches
from memory_orchestrator.pipeline.packager import Budget, package, to_context_item
from memory_orchestrator.pipeline.planner import plan_query
from memory_orchestrator.pipeline.reranker import (
    RankContext,
    by_relevance,
    rerank,
    slot_neighbors,
)
from memory_orchestrator.pipeline.retriever import SubQuery, retrieve
from memory_orchestrator.pipeline.writer import WritePolicy, write_memory
from memory_orchestrator.settings import Settings
from memory_orchestrator.text import cut_at_word
from memory_orchestrator.traces import TraceStore

_SUMMARY_DROPS = 25
_SUBQUERY_WEIGHT = 0.7
_ORDER = {Status.OK: 0, Status.DEGRADED: 1, Status.ERROR: 2}


class TraceNotFound(LookupError):
    pass


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
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self.backend = backend
        self.settings = settings
        self.traces = traces or TraceStore(None, keep=settings.traces.keep)
        self._clock = clock
        self._entities: tuple[float, list[str]] | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> Orchestrator:
        backend = registry.create(settings.backend, settings)
        path = settings.trace_path() if settings.traces.enabled else None
        return cls(backend, settings, traces=TraceStore(path, keep=settings.traces.keep))

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
            found = await self.backend.get_memories(request.seed_ids)
            seeds = [Candidate(memory=m, fused_score=1.0) for m in found]
            missing = set(request.seed_ids) - {m.id for m in found}
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
        trace.candidates = self._candidate_traces(ranked, [])
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
        written = await write_memory(self.backend, request.memory, policy)
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
        got = await retrieve(
            self.backend,
            self._subqueries(plan, filters),
            per_query=max(ret.candidate_k, limit),
            timeout_s=ret.timeout_s,
            rrf_k=ret.rrf_k,
            max_chars=self.settings.limits.max_query_chars,
        )
        trace.backend_calls += got.calls
        trace.notes.extend(got.notes)
        trace.timings_ms["retrieve"] = _ms(started)
        ctx = self._rank_context(plan, now)
        candidates = got.candidates
        if self.settings.ranking.context_seeds > 0 and candidates:
            candidates, ctx = await self._with_context(candidates, ctx, filters, trace)
            trace.timings_ms["context"] = _ms(started)
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
            trace.timings_ms["expand"] = _ms(started)
        ranked = rerank(candidates, ctx)
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
        items = items[:limit]
        # Later entries win: an item the deduper penalised is traced with that penalty, even
        # when the penalty pushed it out of the result.
        trace.candidates = self._candidate_traces(items, [*ranked, *deduped.items])
        trace.result_ids = [i.id for i in items]
        trace.timings_ms["total"] = _ms(started)
        if tool != "context":
            self._finish(trace)
        return _Run(trace=trace, plan=plan, items=items, candidate_count=len(candidates))

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
        return Trace(
            trace_id="tr_" + uuid.uuid4().hex[:16],
            tool=tool,
            created_at=_utcnow(),
            backend=self.backend.name,
            request=request,
        )

    def _finish(self, trace: Trace) -> None:
        trace.notes.extend(n for n in self.backend.notes if n not in trace.notes)
        if self.settings.traces.verbosity == "minimal":
            trace.expansions = [d for d in trace.expansions if d.accepted]
        try:
            self.traces.save(trace)
        except Exception as exc:  # losing a trace must not lose the answer
            trace.notes.append(f"trace not stored: {_err(exc)}")

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


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
