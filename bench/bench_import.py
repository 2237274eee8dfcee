"""Benchmark: `orchestrator import` of N memories as JSON Lines, in one process.

Writes N memories to a JSON Lines file (LoCoMo's development turns where the dataset is
beside the checkout, then deterministic synthetic ones, as `bench_context.py` makes them),
runs the real command twice over a fresh data dir, `orchestrator --data-dir D --json import
FILE`, and prints for each run: records, what was done, the import's own time (the loop over
the records, as the summary reports it: the process start, the model's loading and what the
semantic index embeds behind the writes once they are done are outside it), the rate, and
the command's wall time; and the process's CPU time over the loop (all its threads) with the
rate per CPU second, and the load average when it ended: on a shared machine the wall time
follows the others' load, the CPU time much less. The second run must add nothing. Not a
test: it asserts nothing.

    .venv/bin/python bench/bench_import.py [--count 10000] [--json OUT]
    .venv/bin/python bench/bench_import.py --breakdown 300 [--count 10000]

`--breakdown N`: in this process instead, the store loaded with the first count - N memories
(bulk, unjudged), then the last N imported through the service with timers around the write
path's judge and its store calls: per record, wall and CPU, and each part's calls, wall and
CPU time (the store's searches apart: the near-duplicate lookup, and "search (entities)", the
lookup of memories sharing an entity to link).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_context import locomo_turns, synthetic


def memories_file(path: Path, count: int) -> None:
    turns, _ = locomo_turns()
    chosen = (turns + synthetic(max(0, count - len(turns))))[:count]
    with path.open("w", encoding="utf-8") as out:
        for memory in chosen:
            out.write(memory.model_dump_json(exclude_defaults=True) + "\n")


def command() -> list[str]:
    script = Path(sys.executable).parent / "orchestrator"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "memory_orchestrator"]


def run(data: Path, source: Path) -> dict[str, Any]:
    started = time.perf_counter()
    done = subprocess.run(
        [*command(), "--data-dir", str(data), "--json", "import", str(source)],
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - started
    summary = json.loads(done.stdout)
    return {
        "records": summary["records"],
        "counts": summary["counts"],
        "import_s": summary["seconds"],
        "rate_per_s": round(summary["records"] / summary["seconds"], 1),
        "cpu_s": summary["cpu_seconds"],
        "rate_per_cpu_s": round(summary["records"] / max(summary["cpu_seconds"], 1e-9), 1),
        "load_1m": round(os.getloadavg()[0], 2),
        "wall_s": round(wall, 2),
    }


def timers() -> tuple[dict[str, float], Counter[str]]:
    """Seconds spent (wall, and the process's CPU as "<part> cpu") and calls made, per part,
    from now on: the write path's judge and the store calls (every store goes through
    `GuardedBackend`). The parts run one after the other, so the process's CPU time over one
    is that part's (its worker thread's included)."""
    from memory_orchestrator.pipeline import writer
    from memory_orchestrator.service.resilience import GuardedBackend

    spent: dict[str, float] = defaultdict(float)
    calls: Counter[str] = Counter()
    judge = writer.judge

    def timed_judge(*args: Any, **kwargs: Any) -> Any:
        started, cpu = time.perf_counter(), time.process_time()
        try:
            return judge(*args, **kwargs)
        finally:
            spent["judge"] += time.perf_counter() - started
            spent["judge cpu"] += time.process_time() - cpu
            calls["judge"] += 1

    writer.judge = timed_judge

    def timed(original: Any, name: str) -> Any:
        async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            started, cpu = time.perf_counter(), time.process_time()
            filtered = name == "search" and len(args) > 2 and args[2] is not None
            part = name + (" (entities)" if filtered else "")
            try:
                return await original(self, *args, **kwargs)
            finally:
                spent[part] += time.perf_counter() - started
                spent[part + " cpu"] += time.process_time() - cpu
                calls[part] += 1

        return call

    for name in ("search", "write", "link", "get_memories", "supersede"):
        setattr(GuardedBackend, name, timed(getattr(GuardedBackend, name), name))
    return spent, calls


def breakdown(count: int, last: int) -> None:
    """See the module docstring (`--breakdown`)."""
    import anyio

    from memory_orchestrator.service import Orchestrator
    from memory_orchestrator.service.importing import ImportSummary, quiet_settings
    from memory_orchestrator.settings import load_settings
    from memory_orchestrator.state.imports import Ledger
    from memory_orchestrator.transfer.sources import read_source

    spent, calls = timers()
    with tempfile.TemporaryDirectory(prefix="bench-import-") as folder:
        source = Path(folder) / "memories.jsonl"
        memories_file(source, count)
        settings = quiet_settings(load_settings(data_dir=Path(folder) / "data"))
        chosen, incoming = read_source(source)

        async def run() -> None:
            orchestrator = Orchestrator.from_settings(settings)
            try:
                await orchestrator.ingest([i.memory for i in incoming[:-last] if i.memory])
                spent.clear()
                calls.clear()
                summary = ImportSummary(str(source), chosen, last)
                wall, cpu = time.perf_counter(), time.process_time()
                await orchestrator.transfer().bring_in(incoming[-last:], summary, Ledger(None))
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            finally:
                await orchestrator.close()
            print(f"{summary.counts}; load {os.getloadavg()[0]:.1f}")
            print(f"per record: {wall / last * 1000:.1f} ms wall, {cpu / last * 1000:.1f} ms CPU")
            parts = [n for n in spent if not n.endswith(" cpu")]
            for name in sorted(parts, key=lambda n: -spent[n + " cpu"]):
                wall, cpu = (spent[n] / last * 1000 for n in (name, name + " cpu"))
                made = calls[name] / last
                print(f"  {name}: {made:.2f} calls, {wall:.2f} ms wall, {cpu:.2f} ms CPU")

        anyio.run(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--breakdown", type=int, help="time the parts of the last N imports")
    args = parser.parse_args()
    if args.breakdown:
        breakdown(args.count, args.breakdown)
        return
    with tempfile.TemporaryDirectory(prefix="bench-import-") as folder:
        source = Path(folder) / "memories.jsonl"
        memories_file(source, args.count)
        data = Path(folder) / "data"
        results = {"first": run(data, source), "again": run(data, source)}
    for name, row in results.items():
        print(f"{name:>6}: {json.dumps(row)}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
