"""The trace recorder: every request's trace is begun, finished, logged and stored here.

A trace is begun with the request (`begin`), filled by the part that serves it, and finished
once (`finish`): the store's retry notes and fallback notes are copied in, the observer logs
one line, and the trace store keeps it (behind the request; a failure to store shows in
health). Candidate records, the heaviest part, are made as the trace is stored (`defer`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol

import anyio.to_thread

from memory_orchestrator.errors import unexpected_errors
from memory_orchestrator.models import (
    CandidateTrace,
    EventKind,
    HealthCheck,
    ScoredItem,
    SourceRank,
    Stage,
    Status,
    ToolName,
    Trace,
    TraceEvent,
    TraceSummary,
    event,
    render,
)
from memory_orchestrator.pipeline.explainer import summarize
from memory_orchestrator.service.resilience import begin_notes, take_notes
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.observability import Observer
from memory_orchestrator.state.traces import TraceStore

_SUMMARY_DROPS = 25


class StoreNotes(Protocol):
    """What the recorder reads of the store: its name and its standing fallback notes."""

    name: str

    @property
    def notes(self) -> tuple[str, ...]: ...


class TraceRecorder:
    """Begins, finishes and keeps the traces of one orchestrator."""

    def __init__(
        self,
        traces: TraceStore,
        settings: Settings,
        store: StoreNotes,
        observer: Observer | None = None,
    ) -> None:
        self._traces, self._settings, self._store = traces, settings, store
        self._observer = observer
        # the process's bug tally as this service starts: its health reports the bugs since
        self.bugs_before = unexpected_errors()

    def begin(self, tool: ToolName, request: dict[str, Any]) -> Trace:
        begin_notes()
        return Trace(
            trace_id="tr_" + uuid.uuid4().hex[:16],
            tool=tool,
            created_at=datetime.now(UTC),
            backend=self._store.name,
            request=request,
        )

    def finish(self, trace: Trace) -> None:
        trace.add(*take_notes())
        said = set(trace.notes)
        store = [event(Stage.STORE, EventKind.STORE_NOTE, text=n) for n in self._store.notes]
        trace.add(*(e for e in store if e.values["text"] not in said))
        if self._observer is not None:
            self._observer.finished(trace.complete())
        self._traces.save(trace)  # stored behind the request; a failure shows in health

    def failure(
        self, tool: ToolName, request: dict[str, Any], error: str, latency_ms: float
    ) -> Trace:
        """Keep a trace (and a log line) for a request that failed before it had one."""
        trace = self.begin(tool, request)
        trace.error = error
        trace.timings_ms["total"] = round(latency_ms, 3)
        self.finish(trace)
        return trace

    def defer_candidates(
        self, trace: Trace, items: Sequence[ScoredItem], ranked: Iterable[ScoredItem]
    ) -> None:
        """Record every candidate (final rank and score breakdown) as the trace is stored.
        Later entries win: `items` over `ranked`."""
        trace.defer(partial(self._fill_candidates, trace, items, ranked))

    def get(self, trace_id: str) -> Trace | None:
        return self._traces.get(trace_id)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for the traces saved so far to be stored; False when `timeout` passed first."""
        return self._traces.flush(timeout)

    def recent(self, limit: int) -> list[Trace]:
        """The newest `limit` stored traces, newest first."""
        return self._traces.recent(limit)

    def older(self, before: str | None, limit: int) -> list[Trace]:
        """Up to `limit` stored traces before the trace `before`, newest first."""
        return self._traces.older(before, limit)

    async def stored_check(self, wait_s: float) -> HealthCheck | None:
        """`health_check` once the traces saved so far are stored, waited for at most
        `wait_s` (in a worker thread)."""
        flushed = await anyio.to_thread.run_sync(self._traces.flush, wait_s)
        return self.health_check(flushed, wait_s)

    def health_check(self, flushed: bool = True, waited_s: float = 0.0) -> HealthCheck | None:
        """Degraded while traces cannot be stored: the latest batch failed, or (`flushed`
        False) those saved before `flush` were not stored within `waited_s`. Once a batch is
        stored again it is healthy again, and says what was lost before. None when all
        were stored. Call `flush` first."""
        t = self._traces
        if not flushed:
            detail = (
                f"{t.waiting} trace(s) not stored after {waited_s:g}s: the trace store does"
                " not answer" + (f" (last error: {t.last_error})" if t.failing else "")
            )
            return HealthCheck(name="traces", status=Status.DEGRADED, detail=detail)
        if t.failing:
            detail = f"{t.errors} trace(s) not stored; last: {t.last_error}"
            return HealthCheck(name="traces", status=Status.DEGRADED, detail=detail)
        if not t.errors:
            return None
        since = datetime.fromtimestamp(t.stored_at or 0, UTC).strftime("%Y-%m-%d %H:%M:%S")
        detail = f"stored again since {since} UTC; {t.errors} trace(s) not stored before"
        detail += f" (last: {t.last_error})"
        return HealthCheck(name="traces", status=Status.OK, detail=detail)

    def close(self) -> None:
        self._traces.close()

    @staticmethod
    def summary(trace: Trace) -> TraceSummary:
        """The summary an answer carries, with at most 25 drops (the rest: memory_explain)."""
        summary = summarize(trace)
        if len(summary.dropped) > _SUMMARY_DROPS:
            more = len(summary.dropped) - _SUMMARY_DROPS
            return summary.model_copy(
                update={
                    "dropped": summary.dropped[:_SUMMARY_DROPS],
                    "notes": (*summary.notes, render(_more_dropped(more))),
                }
            )
        return summary

    def _fill_candidates(
        self, trace: Trace, items: Sequence[ScoredItem], ranked: Iterable[ScoredItem]
    ) -> None:
        trace.candidates = self.candidate_traces(items, ranked)

    def candidate_traces(
        self, items: Sequence[ScoredItem], ranked: Iterable[ScoredItem]
    ) -> list[CandidateTrace]:
        final = {item.id: rank for rank, item in enumerate(items, start=1)}
        seen: dict[str, ScoredItem] = {i.id: i for i in ranked}
        seen.update({i.id: i for i in items})
        return [
            CandidateTrace(
                id=i.id,
                sources=tuple(SourceRank(**s._asdict()) for s in i.candidate.sources),
                hops=i.candidate.hops,
                expanded_from=i.candidate.expanded_from,
                breakdown=i.breakdown,
                final_rank=final.get(i.id),
            )
            for i in seen.values()
        ]


def _more_dropped(count: int) -> TraceEvent:
    """The note of an answer whose summary leaves `count` drops to memory_explain."""
    return event(Stage.PACKAGER, EventKind.MORE_DROPPED, count=count)
