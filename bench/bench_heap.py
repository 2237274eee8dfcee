"""What Python's cyclic garbage collector costs a warmed-up server, before and after
`service.heap.settle_heap` (what the servers call once warmed up).

Opens (or builds, once, in `--data`) an embedded store of `--size` memories as
`bench/bench_context.py` does, warms it and waits until the semantic index has embedded
everything, then asks `--queries` direct `memory_context` calls and prints: the collections
each generation ran during a call (Python's default thresholds), the objects the collector
tracks, and how long one full collection takes (what a request that triggers one waits for);
then the same full collection after `settle_heap`. Not a test; it asserts nothing.

    .venv/bin/python bench/bench_heap.py --data /tmp/keep/embedded-10000
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_context as bc

from memory_orchestrator.models import ContextRequest
from memory_orchestrator.service.heap import settle_heap


def full_collection_ms() -> float:
    started = time.perf_counter()
    gc.collect()
    return (time.perf_counter() - started) * 1000


async def run(data: Path, size: int, queries: int) -> None:
    questions = bc.sample_questions(queries + 5, seed=3)
    orch = await bc.kept_orchestrator(data, size, questions[:5])
    ran: Counter[int] = Counter()
    asking = [False]

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and asking[0]:
            ran[info["generation"]] += 1

    gc.callbacks.append(count)
    for q in questions[5:]:
        asking[0] = True
        await orch.context(ContextRequest(query=q, expand=False))
        asking[0] = False
    gc.callbacks.remove(count)
    calls = len(questions[5:])
    per_call = {f"gen{g}": round(ran[g] / calls, 2) for g in range(3)}
    print(f"collections a call (thresholds {gc.get_threshold()}): {per_call} over {calls} calls")
    print(f"objects tracked: {len(gc.get_objects()):,}")
    print(
        f"one full collection: {full_collection_ms():.1f} ms, again {full_collection_ms():.1f} ms"
    )
    settle_heap()
    print(f"after settle_heap (thresholds {gc.get_threshold()}): {full_collection_ms():.1f} ms")
    await orch.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    bc.kept_store_arguments(parser, queries=100)
    args = parser.parse_args()
    anyio.run(run, args.data, args.size, args.queries)


if __name__ == "__main__":
    main()
