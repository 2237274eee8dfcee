"""Where a `memory_context` call's wall time goes, stage by stage, and when each stage ends.

Opens a store kept by `bench/bench_context.py --keep DIR` (e.g. DIR/embedded-10000), waits
until the semantic index holds every memory, then asks `--queries` LoCoMo questions as that
benchmark's `context_direct` does (the question's vector and semantic ranking kept by a
`memory_search` on the same question just before, untimed: what that benchmark meets three
times out of four; `--new-questions`: no such search, the question is embedded in the call's
time). It wraps the pipeline's stages with timers and prints, for each, the median
milliseconds it took and the median moment it ended, counted from the start of the read (the
worker threads' stages too), with the call's median wall and CPU time (the process's, all
threads) against the raw store search's. `--by-searches`: the same table again for the calls
that searched the store once and for those that searched it more (a question of two
subqueries and a time window, or naming two people, searches three times), and each
group's median call. The timers cost a few microseconds each. Not a test: it asserts nothing.

    .venv/bin/python bench/timeline_context.py --data DIR/embedded-10000 [--queries 200]
        [--by-searches]
    ORCHESTRATOR_SEMANTIC__ENABLED=false .venv/bin/python bench/timeline_context.py --data ...
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_context as bc

from memory_orchestrator.backends import embedded, embedded_conn
from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.derived import indexes, local_index, query_vectors, semantic
from memory_orchestrator.models import ContextRequest, SearchRequest
from memory_orchestrator.service import Orchestrator, reading
from memory_orchestrator.service import orchestrator as orchestrator_module
from memory_orchestrator.settings import load_settings
from memory_orchestrator.state.traces import TraceStore

TOOK: dict[str, list[float]] = {}  # label -> milliseconds each time
ENDED: dict[str, list[float]] = {}  # label -> milliseconds from the read's start
STATE = {"on": False, "start": 0.0, "searches": 0}
CALL: list[tuple[str, float, float]] = []  # this call's (label, took, ended)
CALLS: list[tuple[int, float, list[tuple[str, float, float]]]] = []  # searches, wall, events


def record(label: str, started: float) -> None:
    if STATE["on"]:
        now = time.perf_counter()
        took, ended = (now - started) * 1000, (now - STATE["start"]) * 1000
        TOOK.setdefault(label, []).append(took)
        ENDED.setdefault(label, []).append(ended)
        CALL.append((label, took, ended))


def timed(owner: Any, name: str, label: str) -> None:
    """Wrap `owner.name` (a function or an async one) with a timer named `label`."""
    fn: Callable[..., Any] = getattr(owner, name)
    if getattr(fn, "__code__", None) is not None and fn.__code__.co_flags & 0x80:  # async

        @functools.wraps(fn)
        async def waited(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                record(label, started)

        setattr(owner, name, waited)
        return

    @functools.wraps(fn)
    def ran(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            record(label, started)

    setattr(owner, name, ran)


def instrument() -> None:
    run = reading.ReadPath.run

    async def started_read(self: Any, *args: Any, **kwargs: Any) -> Any:
        STATE["start"] = time.perf_counter()
        return await run(self, *args, **kwargs)

    reading.ReadPath.run = started_read  # type: ignore[method-assign]
    timed(reading.ReadPath, "run", "read path (whole)")
    for name in ("plan_query", "retrieve", "add_context_neighbours", "current_only", "rank"):
        timed(reading, name, name)
    for name in ("dedupe", "newest_first", "with_reasons"):
        timed(reading, name, name)
    timed(orchestrator_module, "package", "package")
    timed(indexes.DerivedIndexes, "refresh", "indexes: refresh")
    timed(indexes.DerivedIndexes, "candidate_lists", "indexes: candidate lists")
    timed(local_index.LocalIndex, "search", "local index: search")
    timed(local_index.LocalIndex, "around", "local index: around")
    timed(query_vectors.QueryVectors, "_embed", "query worker: embed the question")
    timed(semantic.SemanticIndex, "_ranked", "query worker: rank the vectors")
    timed(semantic.SemanticIndex, "ranked", "semantic: take the ranking")
    timed(semantic.SemanticIndex, "similarities", "semantic: similarities")
    timed(embedded.EmbeddedBackend, "search", "store: search (awaited)")
    timed(embedded.EmbeddedBackend, "get_memories", "store: get_memories (awaited)")
    read = embedded_conn.Connections.read

    def store_thread(self: Any, fn: Callable[..., Any], **kwargs: Any) -> Any:
        what = getattr(fn, "__qualname__", "?").split(".<locals>")[0].split(".")[-1]
        started = time.perf_counter()
        if STATE["on"]:
            ended = (started - STATE["start"]) * 1000
            ENDED.setdefault(f"store thread: {what} starts", []).append(ended)
            TOOK.setdefault(f"store thread: {what} starts", []).append(0.0)
            CALL.append((f"store thread: {what} starts", 0.0, ended))
            STATE["searches"] += what == "search"
        try:
            return read(self, fn, **kwargs)
        finally:
            record(f"store thread: {what}", started)

    embedded_conn.Connections.read = store_thread  # type: ignore[method-assign]


async def measure(data: Path, queries: int, new_questions: bool, by_searches: bool) -> None:
    _, questions = bc.locomo_turns()
    questions = random.Random(11).sample(questions, min(len(questions), queries + 15))
    settings = load_settings(data_dir=data)
    backend = EmbeddedBackend(settings.embedded_path())
    traces = TraceStore(settings.trace_path())
    orch = Orchestrator(backend, settings, traces=traces)
    for q in questions[:5]:
        await orch.context(ContextRequest(query=q))
    print("semantic:", await bc.settled(orch))
    for q in questions[5:15]:
        await orch.context(ContextRequest(query=q, expand=False))
    wall: list[float] = []
    cpu: list[float] = []
    raw: list[float] = []
    for q in questions[15:]:
        started = time.perf_counter()
        await backend.search(q, 10, None)
        raw.append((time.perf_counter() - started) * 1000)
        if not new_questions:
            await orch.search(SearchRequest(query=q, top_k=10))
            await anyio.to_thread.run_sync(traces.flush)
        STATE["on"], STATE["searches"] = True, 0
        clock, started = time.process_time(), time.perf_counter()
        await orch.context(ContextRequest(query=q, expand=False))
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - clock) * 1000)
        STATE["on"] = False
        CALLS.append((int(STATE["searches"]), wall[-1], CALL[:]))
        CALL.clear()
        await anyio.to_thread.run_sync(traces.flush)  # behind the request, outside the timing
    await orch.close()
    raw_p50, wall_p50 = statistics.median(raw), statistics.median(wall)
    print(
        f"raw store search p50 {raw_p50:.2f} ms; memory_context direct p50 {wall_p50:.2f} ms"
        f" ({wall_p50 / raw_p50:.1f}x), CPU p50 {statistics.median(cpu):.2f} ms a call"
        f" (all threads), {len(wall)} calls"
    )
    table(TOOK, ENDED)
    for name, fewest, most in (("once", 1, 1), ("more than once", 2, 1_000)):
        group = [(w, events) for n, w, events in CALLS if fewest <= n <= most]
        group = group if by_searches else []
        if not group:
            continue
        took: dict[str, list[float]] = {}
        ended: dict[str, list[float]] = {}
        for _, events in group:
            for label, spent, end in events:
                took.setdefault(label, []).append(spent)
                ended.setdefault(label, []).append(end)
        median = statistics.median(w for w, _ in group)
        print(f"\nthe {len(group)} calls that searched the store {name}: p50 {median:.2f} ms")
        table(took, ended)


def table(took: dict[str, list[float]], ended: dict[str, list[float]]) -> None:
    """Each stage: how often it ran, its median time, and the median moment it ended."""
    print(f"{'stage':40s} {'calls':>6s} {'took p50':>9s} {'ends at p50':>12s}")
    for label in sorted(took, key=lambda k: statistics.median(ended[k])):
        print(
            f"{label:40s} {len(took[label]):6d} {statistics.median(took[label]):9.2f}"
            f" {statistics.median(ended[label]):12.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="a store kept by bench_context")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--new-questions", action="store_true")
    parser.add_argument(
        "--by-searches",
        action="store_true",
        help="also the table for the calls that searched the store once, and for the others",
    )
    args = parser.parse_args()
    instrument()
    anyio.run(measure, args.data, args.queries, args.new_questions, args.by_searches)


if __name__ == "__main__":
    main()
