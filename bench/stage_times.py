"""Where the added time goes: `bench/bench_context.py`, with each pipeline stage timed.

Wraps the stage functions the service calls (planning, seed ordering, re-ranking, dedup,
reasons; and, behind the request, candidate traces and trace storage) with a timer, runs the
context benchmark unchanged, and prints the median and mean milliseconds per call of each
stage after its own table. Not a test; it asserts nothing. The timers cost a few
microseconds per call.

    .venv/bin/python bench/stage_times.py [--sizes 10000] [--queries 200]
"""

from __future__ import annotations

import runpy
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory_orchestrator.pipeline import neighbours
from memory_orchestrator.service import reading, recorder
from memory_orchestrator.state import traces

TIMES: dict[str, list[float]] = {}


def timed(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            TIMES.setdefault(label, []).append((time.perf_counter() - started) * 1000)

    return wrapper


def main() -> None:
    for name in ("plan_query", "by_relevance", "rank", "dedupe", "with_reasons"):
        setattr(reading, name, timed(name, getattr(reading, name)))
    neighbours.by_relevance = timed("by_relevance", neighbours.by_relevance)  # type: ignore[attr-defined]
    # these two run behind the request, in the trace writer (not in the request's time)
    rec = recorder.TraceRecorder
    rec.candidate_traces = timed("candidate traces*", rec.candidate_traces)  # type: ignore[method-assign]
    traces.TraceStore._store = timed("trace store*", traces.TraceStore._store)  # type: ignore[method-assign]
    sys.argv = ["bench_context.py", *(sys.argv[1:] or ["--sizes", "10000"])]
    runpy.run_path(str(Path(__file__).with_name("bench_context.py")), run_name="__main__")
    print(f"{'stage':18s} {'calls':>6s} {'median ms':>10s} {'mean ms':>8s}")
    for label, values in TIMES.items():
        median, mean = statistics.median(values), statistics.mean(values)
        print(f"{label:18s} {len(values):6d} {median:10.2f} {mean:8.2f}")
    print("* behind the request: in the trace writer thread, not in the request's time")


if __name__ == "__main__":
    main()
