"""One line per stored trace, kept in memory: the request list, "the requests that returned
this memory" and per-tool latency percentiles, without parsing every trace on every page.

A stored trace is tens of kilobytes (every candidate with its score breakdown), and the store
keeps thousands; reading them all takes seconds. The index reads them once, page by page
(`older`), keeps a `TraceLine` of each (tool, what was asked, items, latency, error, the ids
returned), and then takes only the traces stored since (`recent`), at most every
`interval_s`. Traces written by other processes on the same store (an MCP server beside the
inspector) come in the same way. While the first reading runs (a server runs it beside the
requests), the lines read so far are there to show, newest first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from memory_orchestrator.models import ToolName, Trace
from memory_orchestrator.state.observability import percentile

__all__ = ["ToolLine", "TraceIndex", "TraceLine", "TraceSource"]

_PAGE = 50  # traces per read: small, so that the first reading gives way to requests often
_ASKED_CHARS = 200


class TraceSource(Protocol):
    """Where the traces are kept (the trace recorder's store)."""

    def recent(self, limit: int) -> list[Trace]: ...

    def older(self, before: str | None, limit: int) -> list[Trace]: ...


@dataclass(frozen=True)
class TraceLine:
    """One request, as the trace list shows it."""

    trace_id: str
    tool: ToolName
    created_at: datetime
    asked: str  # the query, or what an expand, write or forget was about
    items: int
    latency_ms: float | None
    error: str | None
    result_ids: tuple[str, ...]

    @classmethod
    def of(cls, trace: Trace) -> TraceLine:
        return cls(
            trace_id=trace.trace_id,
            tool=trace.tool,
            created_at=trace.created_at,
            asked=asked(trace.tool, trace.request)[:_ASKED_CHARS],
            items=len(trace.result_ids),
            latency_ms=trace.timings_ms.get("total"),
            error=trace.error,
            result_ids=tuple(trace.result_ids),
        )


@dataclass(frozen=True)
class ToolLine:
    """Requests of one tool: how many, how many failed, latency percentiles (ms)."""

    tool: str
    count: int
    errors: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None


def asked(tool: ToolName, request: dict[str, Any]) -> str:
    """What a request was about, in a few words."""
    query = request.get("query")
    if isinstance(query, str) and query:
        return query
    if tool is ToolName.EXPAND:
        parts = [*(request.get("entities") or []), *(request.get("seed_ids") or [])]
        return ", ".join(str(p) for p in parts)
    if tool is ToolName.WRITE:
        memory = request.get("memory")
        content = memory.get("content") if isinstance(memory, dict) else None
        return str(content or "")
    if tool is ToolName.FORGET:
        ids = request.get("ids")
        return (
            ", ".join(map(str, ids))
            if isinstance(ids, list)
            else str(request.get("memory_id") or "")
        )
    return ""


class TraceIndex:
    """The lines of the kept traces, newest first (see the module docstring)."""

    def __init__(self, source: TraceSource, *, keep: int, interval_s: float = 1.0) -> None:
        self._source, self._keep, self._interval_s = source, keep, interval_s
        self._lines: list[TraceLine] = []
        self._known: set[str] = set()
        self._loaded = False
        self._loading = False
        self._refreshed_at: float | None = None
        self._lock = threading.Lock()  # refreshes run in worker threads

    @property
    def loaded(self) -> bool:
        """True once every kept trace has been read once."""
        return self._loaded

    @property
    def loading(self) -> bool:
        """True while the first reading runs (the lines read so far are there)."""
        return self._loading

    def __len__(self) -> int:
        return len(self._lines)

    def stale(self) -> None:
        """Look for new traces at the next read."""
        self._refreshed_at = None

    def refresh(self, pause: Callable[[], None] | None = None) -> None:
        """Take the traces stored since the last refresh (all of them the first time; `pause`
        is called before each page of that first reading, to give way to requests).
        Blocking: call it from a worker thread."""
        with self._lock:
            now = time.monotonic()
            if self._refreshed_at is not None and now - self._refreshed_at < self._interval_s:
                return
            if self._loaded:
                self._take_new()
            else:
                self._load(pause)
            self._refreshed_at = now

    def lines(
        self, offset: int = 0, limit: int = 50, tool: str | None = None
    ) -> tuple[list[TraceLine], int]:
        """A page of lines, newest first, and how many match `tool` (all tools when None)."""
        lines = self._lines
        if tool:
            lines = [line for line in lines if line.tool == tool]
        return lines[offset : offset + limit], len(lines)

    def tools(self) -> list[str]:
        return sorted({line.tool for line in self._lines})

    def returning(self, memory_id: str, limit: int = 20) -> list[TraceLine]:
        """The newest requests whose results held `memory_id`."""
        found = [line for line in self._lines if memory_id in line.result_ids]
        return found[:limit]

    def stats(self) -> list[ToolLine]:
        """Per tool (and "all"): count, errors and latency percentiles of the kept traces."""
        by_tool: dict[str, list[TraceLine]] = {}
        for line in self._lines:
            by_tool.setdefault(line.tool, []).append(line)
        rows = [_tool_line(tool, by_tool[tool]) for tool in sorted(by_tool)]
        return [*rows, _tool_line("all", self._lines)] if rows else []

    # ------------------------------------------------------------------ internals

    def _load(self, pause: Callable[[], None] | None) -> None:
        lines: list[TraceLine] = []
        before: str | None = None
        self._loading = True
        try:
            while len(lines) < self._keep:
                if pause is not None:
                    pause()
                page = self._source.older(before, _PAGE)
                lines.extend(TraceLine.of(t) for t in page)
                self._lines = lines[: self._keep]  # a new list: readers see it, or the old
                if len(page) < _PAGE:
                    break
                before = page[-1].trace_id
        finally:
            self._loading = False
        self._set(lines)
        self._loaded = True

    def _take_new(self) -> None:
        limit = 20
        while True:
            page = self._source.recent(limit)
            fresh = [t for t in page if t.trace_id not in self._known]
            if len(fresh) < len(page) or len(page) < limit or limit >= self._keep:
                break
            limit *= 4  # every one of them new: look further back
        if fresh:
            self._set([*(TraceLine.of(t) for t in fresh), *self._lines])

    def _set(self, lines: list[TraceLine]) -> None:
        lines = lines[: self._keep]
        self._known = {line.trace_id for line in lines}
        self._lines = lines  # replaced whole: readers see the old list or the new


def _tool_line(tool: str, lines: Sequence[TraceLine]) -> ToolLine:
    latencies = [line.latency_ms for line in lines if line.latency_ms is not None]
    return ToolLine(
        tool=tool,
        count=len(lines),
        errors=sum(1 for line in lines if line.error),
        p50_ms=percentile(latencies, 50),
        p95_ms=percentile(latencies, 95),
        p99_ms=percentile(latencies, 99),
    )
