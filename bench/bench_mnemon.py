"""Benchmark: how many `mnemon` processes does each tool start per request?

Over Mnemon a process start is the real cost (tens of ms on the real binary), so this counts
them: for `memory_search`, `memory_context` (direct and expanded), `memory_expand`,
`memory_write` and `memory_health`, with the adapter's direct store-file reads on (the
default) and off (CLI only). It runs against the contract double (tests/mnemon_double), or a
real binary with `--binary`; it reports process counts only (timings over a real Mnemon are
bench/bench_mnemon_latency.py's). Not a test: it asserts nothing.

    .venv/bin/python bench/bench_mnemon.py [--memories 200] [--queries 30] [--binary PATH]
        [--json OUT]

`--concurrent N` instead runs `--queries` searches from N clients at once (one backend) and
reports processes per search and failures, for a read lock wait of 0 (retries only) and the
default (`READ_LOCK_WAIT_S` in backends/mnemon/process.py): every Mnemon open briefly takes
the write lock, so concurrent reads meet it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_context import locomo_turns
from tests.mnemon_double import fast_launcher

from memory_orchestrator.backends.mnemon import MnemonBackend, process
from memory_orchestrator.models import (
    ContextRequest,
    ExpandRequest,
    MemoryType,
    NewMemory,
    SearchRequest,
    WriteRequest,
)
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import MnemonSettings, load_settings
from memory_orchestrator.state.traces import TraceStore

TOOLS = (
    "search",
    "context_direct",
    "context_expanded",
    "expand",
    "write",
    "health",
)


def sample(size: int) -> tuple[list[NewMemory], list[str]]:
    turns, questions = locomo_turns()
    if turns:
        return turns[:size], questions
    start = datetime(2023, 1, 1, tzinfo=UTC)
    memories = [
        NewMemory(
            content=f"Person{i % 9} talked about project vendor firmware item {i}",
            type=MemoryType.EPISODIC,
            entities=[f"Person{i % 9}"],
            created_at=start + timedelta(hours=i),
        )
        for i in range(size)
    ]
    return memories, [f"what did Person{i % 9} say about firmware" for i in range(size)]


async def measure(
    direct: bool, size: int, queries: int, folder: Path, real: Path | None = None
) -> dict[str, Any]:
    binary = real or fast_launcher(folder / "bin")
    settings = load_settings(data_dir=folder / "orch", backend="mnemon")
    backend = MnemonBackend(
        MnemonSettings(binary=binary, data_dir=folder / f"mnemon-{direct}", direct_reads=direct)
    )
    orch = Orchestrator(backend, settings, traces=TraceStore(settings.trace_path()))
    memories, questions = sample(size)
    await backend.write_many(memories)
    ingest = backend.process_calls
    calls: dict[str, list[int]] = {tool: [] for tool in TOOLS}
    commands: dict[str, Counter[str]] = {tool: Counter() for tool in TOOLS}
    first: dict[str, int] = {}

    async def count(tool: str, request: Callable[[], Awaitable[Any]]) -> Any:
        before, by_command = backend.process_calls, Counter(backend.calls_by_command)
        result = await request()
        spent = backend.process_calls - before
        if tool not in first:
            first[tool] = spent  # includes one-off costs: --version, status, known entities
        else:
            calls[tool].append(spent)
            commands[tool].update(backend.calls_by_command - by_command)
        return result

    for index, question in enumerate(questions[: queries + 1]):
        found = await count("search", partial(orch.search, SearchRequest(query=question)))
        direct_request = ContextRequest(query=question, expand=False)
        await count("context_direct", partial(orch.context, direct_request))
        expanded_request = ContextRequest(query=question, expand=True)
        await count("context_expanded", partial(orch.context, expanded_request))
        seeds = [item.memory_id for item in found.items[:3]] or [question]
        await count("expand", partial(orch.expand, ExpandRequest(seed_ids=seeds, hops=2)))
        note = NewMemory(
            content=f"Benchmark note {index}: {question}",
            entities=[memories[index % len(memories)].entities[0]],
        )
        await count("write", partial(orch.write, WriteRequest(memory=note)))
        await count("health", orch.health)
    await orch.close()
    rows = {}
    for tool in TOOLS:
        runs = calls[tool]
        rows[tool] = {
            "mean": round(statistics.mean(runs), 2) if runs else 0.0,
            "min": min(runs, default=0),
            "max": max(runs, default=0),
            "first_request": first.get(tool, 0),
            "by_command": {k: round(v / max(len(runs), 1), 2) for k, v in commands[tool].items()},
        }
    return {
        "direct_reads": direct,
        "memories": len(memories),
        "ingest_calls": ingest,
        "tools": rows,
    }


async def measure_concurrent(
    clients: int, size: int, queries: int, folder: Path, lock_wait_s: float, real: Path | None
) -> dict[str, Any]:
    binary = real or fast_launcher(folder / "bin")
    process.READ_LOCK_WAIT_S = lock_wait_s  # a bench process of its own: set for this run
    backend = MnemonBackend(MnemonSettings(binary=binary, data_dir=folder / "mnemon"))
    memories, questions = sample(size)
    await backend.write_many(memories)
    before = backend.calls_by_command["recall"]
    failed: list[str] = []
    todo = iter(range(queries))

    async def client() -> None:
        for index in todo:
            try:
                await backend.search(questions[index % len(questions)], 10)
            except Exception as exc:
                failed.append(str(exc)[-160:])

    async with anyio.create_task_group() as group:
        for _ in range(clients):
            group.start_soon(client)
    recalls = backend.calls_by_command["recall"] - before
    return {
        "clients": clients,
        "read_lock_wait_s": lock_wait_s,
        "searches": queries,
        "recall_processes": recalls,
        "per_search": round(recalls / queries, 2),
        "failed": len(failed),
        "first_failure": failed[0] if failed else None,
    }


def concurrent(args: argparse.Namespace) -> None:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for wait in (0.0, process.READ_LOCK_WAIT_S):
            folder = Path(tmp) / f"wait-{wait}"
            run = partial(measure_concurrent, args.concurrent, args.memories, args.queries)
            results.append(anyio.run(run, folder, wait, args.binary))
    print(f"{args.queries} searches from {args.concurrent} concurrent clients ({_over(args)})")
    for row in results:
        print(
            f"read_lock_wait_s={row['read_lock_wait_s']:<4g} recall processes"
            f" {row['recall_processes']} ({row['per_search']} per search), failed"
            f" {row['failed']}" + (f": {row['first_failure']}" if row["failed"] else "")
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))


def _over(args: argparse.Namespace) -> str:
    return f"real mnemon {args.binary}" if args.binary else "contract double"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memories", type=int, default=200)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--concurrent", type=int, default=0, help="clients searching at once")
    parser.add_argument(
        "--binary", type=Path, default=None, help="a real mnemon (default: the contract double)"
    )
    args = parser.parse_args()
    if args.concurrent:
        concurrent(args)
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for direct in (True, False):
            print(f"measuring direct_reads={direct} ...", file=sys.stderr)
            folder = Path(tmp) / f"direct-{direct}"
            results.append(
                anyio.run(measure, direct, args.memories, args.queries, folder, args.binary)
            )
    print(f"mnemon process starts per request ({_over(args)}; counts only, no timings)")
    print(f"{'tool':<17} {'reads':<10} {'mean':>5} {'min':>4} {'max':>4} {'first':>5}  by command")
    for result in results:
        reads = "file" if result["direct_reads"] else "cli"
        for tool, row in result["tools"].items():
            detail = ", ".join(f"{k} {v:g}" for k, v in sorted(row["by_command"].items()))
            print(
                f"{tool:<17} {reads:<10} {row['mean']:>5} {row['min']:>4} {row['max']:>4}"
                f" {row['first_request']:>5}  {detail}"
            )
        ingest = f"{result['ingest_calls']:>5}  ({result['memories']} memories, write_many)"
        print(f"{'ingest':<17} {reads:<10} {ingest}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
