"""Benchmark: what an agent waits for over a real Mnemon, at 1k and 10k memories, in one run.

For each size, a store of LoCoMo development turns then deterministic synthetic memories (as
bench/bench_context.py builds them) is imported into the real `mnemon` (`write_many`: one
`import --no-diff` per 1,000, auto-prune off). Then every question goes, in rotating order,
to:
- `lone_recall`: one `mnemon recall --limit 10 --verbose` process started with
  `subprocess.run` and timed around the process (what Mnemon alone costs);
- `raw`: the adapter's `search` (that `recall`, through the adapter);
- `context_direct` / `context_expanded`: `memory_context` with expansion off / on, with the
  shipped `retrieval.list_budget_s` (a store list still running that long after the start,
  once the local index's lists are in, is left out and noted);
- `context_unbudgeted`: `memory_context`, expansion off, waiting for every store list
  (`list_budget_s = 0`: what the agent waited for before).
It prints p50 / p95 per system, `mnemon` processes per request, how many store lists the
budget cut, and the ratio of `context_direct` p50 to `lone_recall` p50. Not a test: it
asserts nothing. Timings move with the machine's load: compare only within one run.

    .venv/bin/python bench/bench_mnemon_latency.py [--binary PATH] [--sizes 1000,10000]
        [--queries 60] [--keep DIR] [--json OUT]

`--keep DIR` keeps the imported stores in DIR and reuses them in a later run (the 10k import
takes minutes). The semantic stage runs where its model can (as shipped); the benchmark waits,
untimed, until it has embedded every memory.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_context import locomo_turns, pct, settled, synthetic
from tests.mnemon_double import real_binary

from memory_orchestrator.backends.mnemon import FAIL_FAST_ENDPOINT, MnemonBackend
from memory_orchestrator.models import ContextRequest
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import MnemonSettings, load_settings
from memory_orchestrator.state.traces import TraceStore

SYSTEMS = ("lone_recall", "raw", "context_direct", "context_expanded", "context_unbudgeted")
CUT = "was left out (the local index's lists were in)"


def lone_recall(binary: Path, data_dir: Path, question: str) -> None:
    """One `mnemon recall` process, as a user runs it (no orchestrator, no adapter)."""
    env = {**os.environ, "MNEMON_EMBED_ENDPOINT": FAIL_FAST_ENDPOINT}
    argv = [str(binary), "--data-dir", str(data_dir), "recall", "--limit", "10", "--verbose"]
    subprocess.run([*argv, "--", question], check=True, capture_output=True, env=env, timeout=120)


async def build(backend: MnemonBackend, size: int, marker: Path) -> float | None:
    """Import `size` memories unless `marker` says an earlier run did; the seconds it took."""
    if marker.is_file() and marker.read_text() == str(size):
        return None
    turns, _ = locomo_turns()
    memories = (turns + synthetic(max(0, size - len(turns))))[:size]
    started = time.perf_counter()
    await backend.write_many(memories)
    marker.write_text(str(size))
    return time.perf_counter() - started


async def timed(fn: Callable[[], Awaitable[Any]], runs: list[float]) -> None:
    started = time.perf_counter()
    await fn()
    runs.append((time.perf_counter() - started) * 1000)


async def bench_size(binary: Path, size: int, questions: list[str], home: Path) -> dict[str, Any]:
    data = home / f"mnemon-{size}"
    settings = load_settings(data_dir=home / f"orchestrator-{size}", backend="mnemon")
    os.environ["MNEMON_MAX_INSIGHTS"] = "0"  # Mnemon's own auto-prune off: keep every turn
    settings.mnemon = MnemonSettings(binary=binary, data_dir=data)
    backend = MnemonBackend(settings.mnemon)
    data.mkdir(parents=True, exist_ok=True)
    ingest_s = await build(backend, size, data / "bench-size")
    traces = TraceStore(settings.trace_path())
    orch = Orchestrator(backend, settings, traces=traces)
    for question in questions[:5]:  # the local index is built from the listing here
        await orch.context(ContextRequest(query=question))
    semantic = await settled(orch)
    budget = settings.retrieval.list_budget_s
    runs: dict[str, list[float]] = {name: [] for name in SYSTEMS}
    processes: dict[str, list[int]] = {name: [] for name in SYSTEMS if name != "lone_recall"}
    cut: dict[str, int] = dict.fromkeys(processes, 0)

    async def context(expand: bool, unbudgeted: bool = False) -> None:
        settings.retrieval.list_budget_s = 0 if unbudgeted else budget
        try:
            package = await orch.context(ContextRequest(query=question, expand=expand))
        finally:
            settings.retrieval.list_budget_s = budget
        name = (
            "context_unbudgeted" if unbudgeted else f"context_{'expanded' if expand else 'direct'}"
        )
        cut[name] += sum(CUT in note for note in package.trace.notes)

    for turn, question in enumerate(questions):
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "lone_recall": partial(anyio.to_thread.run_sync, lone_recall, binary, data, question),
            "raw": partial(backend.search, question, 10),
            "context_direct": partial(context, False),
            "context_expanded": partial(context, True),
            "context_unbudgeted": partial(context, False, True),
        }
        order = list(calls)
        order = order[turn % len(order) :] + order[: turn % len(order)]
        for name in order:
            before = backend.process_calls
            await timed(calls[name], runs[name])
            if name in processes:
                processes[name].append(backend.process_calls - before)
            await anyio.to_thread.run_sync(getattr(traces, "flush", lambda: None))
    await orch.close()
    lone_p50 = pct(runs["lone_recall"], 0.5)
    return {
        "memories": size,
        "queries": len(questions),
        "ingest_s": None if ingest_s is None else round(ingest_s, 1),
        "semantic": semantic,
        "list_budget_s": budget,
        "systems": {
            name: {
                "p50_ms": round(pct(values, 0.5), 1),
                "p95_ms": round(pct(values, 0.95), 1),
                "processes_mean": round(sum(processes[name]) / len(processes[name]), 2)
                if name in processes
                else 1,
                "lists_cut": cut.get(name, 0),
            }
            for name, values in runs.items()
        },
        "context_direct_p50_over_lone_recall_p50": round(
            pct(runs["context_direct"], 0.5) / lone_p50, 2
        ),
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        f"{result['memories']} memories, {result['queries']} questions"
        f" (ingest {result['ingest_s']} s; semantic: {result['semantic']};"
        f" list_budget_s {result['list_budget_s']})",
        f"{'system':20s} {'p50 ms':>9s} {'p95 ms':>9s} {'processes':>10s} {'lists cut':>10s}",
    ]
    for name, row in result["systems"].items():
        lines.append(
            f"{name:20s} {row['p50_ms']:9.1f} {row['p95_ms']:9.1f}"
            f" {row['processes_mean']:10} {row['lists_cut']:10d}"
        )
    ratio = result["context_direct_p50_over_lone_recall_p50"]
    lines.append(f"context_direct p50 / lone_recall p50 = {ratio}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--binary", type=Path, default=real_binary())
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.binary is None or not args.binary.is_file():
        parser.error("no real mnemon binary: pass --binary or set MNEMON_REAL_BINARY")
    _, questions = locomo_turns()
    if not questions:
        parser.error("needs the LoCoMo development split (../shared/datasets/locomo)")
    questions = questions[: args.queries]
    results = []
    with ExitStack() as stack:
        home = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        for size in (int(s) for s in args.sizes.split(",")):
            result = anyio.run(bench_size, args.binary.resolve(), size, questions, home)
            print(table(result), flush=True)
            results.append(result)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
