"""Request log lines, metrics registries and trace statistics, on small typed inputs."""

from __future__ import annotations

import io
import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import pytest
from prometheus_client import REGISTRY

from memory_orchestrator.models import CandidateTrace, Dropped, DropReason, Trace
from memory_orchestrator.state import observability
from memory_orchestrator.state.observability import (
    Metrics,
    Observer,
    calling,
    compute_stats,
    parse_since,
    percentile,
    request_fields,
)
from memory_orchestrator.state.traces import TraceStore

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _trace(
    tool: str = "search",
    *,
    total_ms: float = 10.0,
    candidates: int = 4,
    duplicates: int = 0,
    expanded: int = 0,
    error: str | None = None,
    at: datetime = T0,
    n: int = 0,
) -> Trace:
    return Trace(
        trace_id=f"tr_{tool}_{n}_{total_ms}",
        tool=tool,
        created_at=at,
        backend="embedded",
        request={},
        candidates=[
            CandidateTrace(
                id=f"m{i}", sources=(), hops=1 if i < expanded else 0, expanded_from=None
            )
            for i in range(candidates)
        ],
        dropped=[
            Dropped(id=f"d{i}", reason=DropReason.DUPLICATE, stage="deduper")
            for i in range(duplicates)
        ],
        result_ids=[f"m{i}" for i in range(min(2, candidates))],
        timings_ms={"total": total_ms},
        cache_hits=1,
        error=error,
    )


def test_a_log_line_carries_the_request_figures() -> None:
    fields = request_fields(_trace(candidates=10, duplicates=2, expanded=3))
    assert fields["candidates"] == 10
    assert fields["results"] == 2
    assert fields["dedup_ratio"] == 0.2
    assert fields["expansion_rate"] == 0.3
    assert fields["cache_hits"] == 1
    assert fields["latency_ms"] == 10.0
    assert fields["status"] == "ok"
    assert request_fields(_trace(candidates=0))["dedup_ratio"] == 0.0


def test_the_observer_writes_one_json_line_per_request_and_nothing_to_stdout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stream = io.StringIO()
    observer = Observer(stream)
    observer.finished(_trace())
    observer.finished(_trace(error="BackendError: down", n=1))
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    ok, failed = (json.loads(line) for line in lines)
    assert ok["event"] == "request"
    assert ok["level"] == "info"
    assert ok["trace_id"].startswith("tr_")
    assert failed["level"] == "error"
    assert failed["error"] == "BackendError: down"
    assert capsys.readouterr().out == ""


def test_each_metrics_object_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()
    Observer(io.StringIO(), metrics=first).tool_call(
        "memory_search", 0.02, ok=False, backend="embedded"
    )
    text = first.render().decode()
    assert 'orchestrator_requests_total{status="error",tool="memory_search"} 1.0' in text
    assert 'orchestrator_backend_errors_total{backend="embedded"} 1.0' in text
    assert 'orchestrator_request_latency_seconds_count{tool="memory_search"} 1.0' in text
    assert "memory_search" not in second.render().decode()
    assert (
        REGISTRY.get_sample_value(
            "orchestrator_requests_total", {"tool": "memory_search", "status": "error"}
        )
        is None
    )


def test_percentiles_interpolate_between_closest_ranks() -> None:
    """One definition for request stats and the eval's latencies (they disagreed before)."""
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 50) == 2.5  # halfway between 2 and 3
    assert percentile(values, 95) == pytest.approx(3.85)  # position 2.85: 3 + 0.85
    assert percentile(values, 100) == 4.0
    hundred = [float(v) for v in range(1, 101)]
    assert percentile(hundred, 99) == pytest.approx(99.01)
    assert percentile([7.0], 95) == 7.0
    assert percentile([], 50) is None
    with pytest.raises(ValueError, match=r"0\.\.100"):
        percentile(values, 101)


def test_the_eval_report_uses_the_same_percentile() -> None:
    from memory_orchestrator.eval import report

    assert report.percentile is percentile  # type: ignore[attr-defined]


def test_stats_count_latency_and_errors_per_tool() -> None:
    traces = [_trace("search", total_ms=float(ms), n=ms) for ms in range(1, 11)]
    traces += [_trace("context", total_ms=5.0, duplicates=2, candidates=4)]
    traces += [_trace("write", total_ms=3.0, error="store down")]
    report = compute_stats(traces)
    tools = {row.tool: row for row in report.tools}
    assert set(tools) == {"search", "context", "write"}
    assert tools["search"].count == 10
    assert tools["search"].p50_ms == 5.5  # the median of 1..10
    assert tools["search"].p99_ms == pytest.approx(9.91)
    assert tools["write"].error_rate == 1.0
    assert tools["context"].dedup_ratio == 0.5
    assert report.total.count == 12
    assert report.total.errors == 1
    assert report.total.error_rate == round(1 / 12, 4)


def test_since_accepts_durations_and_iso_times() -> None:
    now = datetime(2026, 5, 2, tzinfo=UTC)
    assert parse_since("30m", now) == now - timedelta(minutes=30)
    assert parse_since("2d", now) == now - timedelta(days=2)
    assert parse_since("2026-05-01T08:00:00") == datetime(2026, 5, 1, 8, tzinfo=UTC)
    assert parse_since("2026-05-01T08:00:00+02:00").utcoffset() == timedelta(hours=2)
    with pytest.raises(ValueError, match="invalid --since"):
        parse_since("yesterday-ish")


def test_the_trace_store_returns_traces_since_a_time(tmp_path: object) -> None:
    store = TraceStore(None)
    store.save(_trace(at=T0 - timedelta(hours=2), n=1))
    store.save(_trace(at=T0, n=2))
    assert [t.trace_id for t in store.since(T0 - timedelta(hours=1))] == [
        _trace(at=T0, n=2).trace_id
    ]
    assert len(store.since(None)) == 2


def test_a_request_finished_inside_a_call_names_its_caller() -> None:
    stream = io.StringIO()
    observer = Observer(stream)
    with calling("dashboard"):
        observer.finished(_trace(n=1))
    observer.finished(_trace(n=2))
    inside, outside = (json.loads(line) for line in stream.getvalue().splitlines())
    assert inside["caller"] == "dashboard"
    assert outside["caller"] is None


class HeldLogger:
    """Fault injection: making the request log's logger (structlog's imports: slow) waits
    until the test lets it go, as it does on a busy machine while the server starts."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.started, self.release = threading.Event(), threading.Event()
        self.real = real = observability._make_logger

        def held(stream: TextIO | None) -> Any:
            self.started.set()
            assert self.release.wait(30)
            return real(stream)

        monkeypatch.setattr(observability, "_make_logger", held)


def _lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_line_does_not_wait_while_the_warm_up_makes_the_logger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first request after start finished while the warm-up was still importing
    structlog, and waited for it (most of that first call's time): its line now waits instead,
    and is written, in order, as soon as the logger is made."""
    held, out = HeldLogger(monkeypatch), io.StringIO()
    observer = Observer(out)
    warm_up = threading.Thread(target=observer.prepare)
    warm_up.start()
    assert held.started.wait(30)

    def requests() -> None:
        observer.store_created(Path("/data/one"))
        observer.finished(_trace())
        observer.store_created(Path("/data/two"))

    served = threading.Thread(target=requests)
    served.start()
    served.join(30)
    assert not served.is_alive()  # (it would still wait for the logger)
    assert out.getvalue() == ""
    held.release.set()
    warm_up.join(30)
    lines = _lines(out)
    assert [(line["event"], line.get("path")) for line in lines] == [
        ("store created empty", "/data/one"),
        ("request", None),
        ("store created empty", "/data/two"),
    ]
    observer.store_created(Path("/data/three"))  # the logger is made: written at once
    assert _lines(out)[-1]["path"] == "/data/three"


def test_lines_still_waiting_for_the_logger_are_written_at_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    held, out = HeldLogger(monkeypatch), io.StringIO()
    observer = Observer(out)
    warm_up = threading.Thread(target=observer.prepare)
    warm_up.start()
    assert held.started.wait(30)
    observer.store_created(Path("/data/one"))
    monkeypatch.setattr(observability, "_make_logger", held.real)
    observer.flush(timeout_s=0.01)  # the warm-up still held: close makes the logger itself
    assert [line["path"] for line in _lines(out)] == ["/data/one"]
    held.release.set()
    warm_up.join(30)
    observer.store_created(Path("/data/two"))
    assert [line["path"] for line in _lines(out)] == ["/data/one", "/data/two"]
