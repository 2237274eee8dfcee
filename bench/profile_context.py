"""Where a `memory_context` call spends its time at 10k memories, under cProfile.

Builds (once, in `--data`, kept for the next run: the semantic vectors too) an embedded store
of `--size` memories as `bench/bench_context.py` does, warms it, waits until the semantic
index (when on) has embedded everything, then profiles `--queries` direct `memory_context`
calls and prints the wall milliseconds per call and the top functions by cumulative time.
Not a test; it asserts nothing. Compare settings within one run of the machine's hour, e.g.

    .venv/bin/python bench/profile_context.py --data /tmp/p
    ORCHESTRATOR_SEMANTIC__CANDIDATES=20 .venv/bin/python bench/profile_context.py --data /tmp/p
    ORCHESTRATOR_SEMANTIC__ENABLED=false .venv/bin/python bench/profile_context.py --data /tmp/p
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_context as bc

from memory_orchestrator.models import ContextRequest


async def run(data: Path, size: int, queries: int, top: int, sort: str) -> None:
    questions = bc.sample_questions(queries + 15, seed=11)
    orch = await bc.kept_orchestrator(data, size, questions[:5])
    for q in questions[5:15]:
        await orch.context(ContextRequest(query=q, expand=False))
    profile = cProfile.Profile()
    started = time.perf_counter()
    profile.enable()
    for q in questions[15:]:
        await orch.context(ContextRequest(query=q, expand=False))
    profile.disable()
    calls = len(questions[15:])
    print(f"{(time.perf_counter() - started) * 1000 / max(calls, 1):.2f} ms per call ({calls})")
    pstats.Stats(profile).sort_stats(sort).print_stats(top)
    await orch.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    bc.kept_store_arguments(parser, queries=45)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--sort", choices=["cumulative", "tottime"], default="cumulative")
    args = parser.parse_args()
    anyio.run(run, args.data, args.size, args.queries, args.top, args.sort)


if __name__ == "__main__":
    main()
