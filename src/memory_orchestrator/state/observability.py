"""Structured request logs, Prometheus metrics and trace statistics.

- `Observer.finished(trace)` writes one JSON line per request (structlog, to stderr by default:
  the stdio MCP transport owns stdout). The service calls it when a request's trace is done.
- `Metrics` keeps its own `CollectorRegistry` (never the process-global one), so two servers
  in one process, or a test, never share counters. The MCP face records every tool call.
- `compute_stats(traces)` summarises stored traces for `orchestrator stats`.
"""

from __future__ import annotations

import math
import re
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector
from pydantic import BaseModel, ConfigDict

from memory_orchestrator.errors import unexpected_errors
from memory_orchestrator.models import DropReason, Trace

__all__ = [
    "Metrics",
    "Observer",
    "StatsReport",
    "ToolStats",
    "calling",
    "compute_stats",
    "parse_since",
    "percentile",
    "request_fields",
]

# Who is calling (the HTTP token's name), set by the MCP face around a tool call; the service
# reports the finished request inside that call, so the log line can name the caller.
_caller: ContextVar[str | None] = ContextVar("caller", default=None)


@contextmanager
def calling(name: str | None) -> Iterator[None]:
    """Log requests finished inside this block as made by `name`."""
    token = _caller.set(name)
    try:
        yield
    finally:
        _caller.reset(token)


_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class UnexpectedErrors(Collector):
    """`orchestrator_unexpected_errors_total{place}`: the bugs the process edges caught
    (`errors.unexpected`) since this collector was made, read at scrape time (the tally is
    the process's; each registry counts from its own start, as its other counters do)."""

    def __init__(self) -> None:
        self._before = unexpected_errors()

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "orchestrator_unexpected_errors",
            "Bugs caught at a process edge (logged with their traceback), by place",
            labels=["place"],
        )
        for place, count in sorted(unexpected_errors().items()):
            since = count - self._before.get(place, 0)
            if since > 0:
                family.add_metric([place], since)
        yield family


class Metrics:
    """Request count by tool and status, latency by tool, backend errors by backend, bugs
    caught by place."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "orchestrator_requests",
            "MCP tool calls by tool and status (ok, error)",
            ["tool", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "orchestrator_request_latency_seconds",
            "MCP tool call latency by tool",
            ["tool"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.refusals = Counter(
            "orchestrator_http_refusals",
            "Requests refused by the auth checks, by status (401, 403, 413, 429; a tool call: 403)",
            ["status"],
            registry=self.registry,
        )
        self.backend_errors = Counter(
            "orchestrator_backend_errors",
            "Tool calls that failed in the memory store, by backend",
            ["backend"],
            registry=self.registry,
        )
        self.registry.register(UnexpectedErrors())

    def render(self) -> bytes:
        """The Prometheus text exposition of this registry."""
        return generate_latest(self.registry)


def request_fields(trace: Trace) -> dict[str, Any]:
    """The figures one request log line carries, read from its trace."""
    candidates = len(trace.candidates)
    duplicates = sum(1 for d in trace.dropped if d.reason is DropReason.DUPLICATE)
    expanded = sum(1 for c in trace.candidates if c.hops > 0)
    return {
        "trace_id": trace.trace_id,
        "tool": trace.tool,
        "backend": trace.backend,
        "status": "error" if trace.error else "ok",
        "latency_ms": trace.timings_ms.get("total"),
        "candidates": candidates,
        "results": len(trace.result_ids),
        "dropped": len(trace.dropped),
        "dedup_ratio": round(duplicates / candidates, 4) if candidates else 0.0,
        "expansion_rate": round(expanded / candidates, 4) if candidates else 0.0,
        "expansions": sum(1 for e in trace.expansions if e.accepted),
        "cache_hits": trace.cache_hits,
        "backend_calls": trace.backend_calls,
        "notes": len(trace.notes),
        "error": trace.error,
    }


class Observer:
    """Where the service reports finished requests and the MCP face reports tool calls."""

    def __init__(self, stream: TextIO | None = None, *, metrics: Metrics | None = None) -> None:
        self.metrics = metrics or Metrics()
        self._stream = stream
        self._logger: Any = None
        self._lock = threading.Lock()  # the logger, the lines waiting for it, and the writing
        self._making = threading.Condition(self._lock)  # told when `prepare` is done
        self._busy = False  # `prepare` is making the logger (on the warm-up's thread)
        self._waiting: list[tuple[str, str, dict[str, Any]]] = []  # (level, event, fields)

    def prepare(self) -> None:
        """Make the logger now (the servers' warm-up does, behind `initialize`): structlog
        brings rich along, a quarter of a second of imports an agent would otherwise wait
        for when the server starts. A request that finishes meanwhile does not wait for it:
        its line is written, in order, as soon as the logger is made."""
        with self._lock:
            if self._logger is not None or self._busy:
                return
            self._busy = True
        made: Any = None
        try:
            made = _make_logger(self._stream)
        finally:
            with self._lock:
                self._busy = False
                if made is not None:
                    self._logger = made
                    self._write_waiting()
                self._making.notify_all()

    def flush(self, timeout_s: float = 30.0) -> None:
        """Write the lines still waiting for the logger (at close): wait up to `timeout_s` for
        a `prepare` under way, else make the logger here."""
        with self._lock:
            if not self._waiting:
                return
            self._making.wait_for(lambda: not self._busy, timeout_s)
            if self._logger is None:
                self._logger = _make_logger(self._stream)
            self._write_waiting()

    def _emit(self, level: str, event: str, **fields: Any) -> None:
        """One log line; while `prepare` makes the logger, queued behind it instead of
        waiting (written by `prepare` when it is done, or by `flush`)."""
        with self._lock:
            if self._logger is None and self._busy:
                self._waiting.append((level, event, fields))
                return
            if self._logger is None:
                self._logger = _make_logger(self._stream)
            self._waiting.append((level, event, fields))
            self._write_waiting()

    def _write_waiting(self) -> None:
        """(Under the lock, with a logger.)"""
        waiting, self._waiting = self._waiting, []
        for level, event, fields in waiting:
            getattr(self._logger, level)(event, **fields)

    def finished(self, trace: Trace) -> None:
        """One JSON log line for a finished (or failed) request."""
        fields = request_fields(trace)
        fields["caller"] = _caller.get()
        self._emit("error" if trace.error else "info", "request", **fields)

    def refused(
        self, status: int, path: str, token: str | None, reason: str, peer: str | None
    ) -> None:
        """A request the HTTP auth check turned away: a warning line and a count."""
        self.metrics.refusals.labels(status=str(status)).inc()
        self._emit(
            "warning", "refused", status=status, path=path, token=token, reason=reason, peer=peer
        )

    def store_created(self, path: Path) -> None:
        """A warning line: the store file did not exist and was created empty (a mistyped
        data dir shows here, not as an agent that finds no memories)."""
        self._emit("warning", "store created empty", path=str(path))

    def tool_call(self, tool: str, seconds: float, *, ok: bool, backend: str | None) -> None:
        """Count one tool call; `backend` names the store when the store made it fail."""
        self.metrics.requests.labels(tool=tool, status="ok" if ok else "error").inc()
        self.metrics.latency.labels(tool=tool).observe(seconds)
        if backend is not None:
            self.metrics.backend_errors.labels(backend=backend).inc()


# ---------------------------------------------------------------- stats over stored traces


class ToolStats(BaseModel):
    model_config = ConfigDict(frozen=True)

    tool: str
    count: int
    errors: int
    error_rate: float
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    avg_candidates: float
    dedup_ratio: float


class StatsReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    since: str | None
    total: ToolStats
    tools: tuple[ToolStats, ...]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) of `values`, linear between the closest ranks (numpy's
    default; the median of an even count is the mean of the middle two); None when empty.
    The one percentile of the project: request stats and the eval's latencies use it."""
    if not values:
        return None
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _tool_stats(tool: str, traces: Sequence[Trace]) -> ToolStats:
    latencies = [t.timings_ms["total"] for t in traces if "total" in t.timings_ms]
    errors = sum(1 for t in traces if t.error)
    fields = [request_fields(t) for t in traces if not t.error]
    count = len(traces)
    return ToolStats(
        tool=tool,
        count=count,
        errors=errors,
        error_rate=round(errors / count, 4) if count else 0.0,
        p50_ms=percentile(latencies, 50),
        p95_ms=percentile(latencies, 95),
        p99_ms=percentile(latencies, 99),
        avg_candidates=round(sum(f["candidates"] for f in fields) / len(fields), 2)
        if fields
        else 0.0,
        dedup_ratio=round(sum(f["dedup_ratio"] for f in fields) / len(fields), 4)
        if fields
        else 0.0,
    )


def compute_stats(traces: Iterable[Trace], *, since: str | None = None) -> StatsReport:
    """Count, latency percentiles, error rate, candidates and dedup ratio, per tool and overall."""
    everything = list(traces)
    by_tool: dict[str, list[Trace]] = {}
    for trace in everything:
        by_tool.setdefault(trace.tool, []).append(trace)
    return StatsReport(
        since=since,
        total=_tool_stats("all", everything),
        tools=tuple(_tool_stats(tool, by_tool[tool]) for tool in sorted(by_tool)),
    )


_AGO = re.compile(r"^(\d{1,6})([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """`30m`, `2h`, `7d` (ago) or an ISO date/time (UTC when it has no zone).

    Raises ValueError with a readable message for anything else."""
    found = _AGO.match(text.strip())
    if found:
        amount, unit = int(found.group(1)), _UNITS[found.group(2)]
        return (now or datetime.now(UTC)) - timedelta(**{unit: amount})
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"invalid --since {text!r}: use 30m, 2h, 7d or an ISO date/time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _make_logger(stream: TextIO | None) -> Any:
    import structlog

    # A private logger (wrap_logger), not structlog.configure(): the host process keeps its
    # own logging setup.
    return structlog.wrap_logger(
        structlog.PrintLogger(stream or sys.stderr),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(sort_keys=False),
        ],
    )
