"""What one call costs through an npm store's adapter (its MCP server kept open over stdio):
the median milliseconds of a write and of a search, on a fresh store in a temporary folder.

    .venv/bin/python bench/bench_npm_adapter.py [--backend mnemon-mcp|kg-memory] [--calls 200]

Needs the npm servers (`make npm-servers`). Not a test; it asserts nothing. The server starts
before the first timed call (an untimed search), so the figures are per call, not per start.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from memory_orchestrator.backends import registry
from memory_orchestrator.models import NewMemory
from memory_orchestrator.settings import Settings


async def measure(backend_name: str, calls: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as folder:
        backend = registry.create(backend_name, Settings(data_dir=Path(folder)))
        try:
            await backend.search("warm up", 5)
            writes, searches = [], []
            for i in range(calls):
                memory = NewMemory(
                    content=f"Memory {i}: the team met Vendor {i % 17} about firmware {i}."
                )
                started = time.perf_counter()
                await backend.write(memory)
                writes.append((time.perf_counter() - started) * 1000)
            for i in range(calls):
                started = time.perf_counter()
                await backend.search(f"vendor {i % 17} firmware", 10)
                searches.append((time.perf_counter() - started) * 1000)
        finally:
            await backend.close()
    return statistics.median(writes), statistics.median(searches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--backend", default="mnemon-mcp", choices=["mnemon-mcp", "kg-memory"])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    write_ms, search_ms = anyio.run(measure, args.backend, args.calls)
    print(
        f"{args.backend}: write p50 {write_ms:.1f} ms, search p50 {search_ms:.1f} ms"
        f" ({args.calls} calls each)"
    )


if __name__ == "__main__":
    main()
