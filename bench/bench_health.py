"""Benchmark: how long `memory_health` takes over a store of 100,000 memories.

Starts the real `orchestrator serve` (stdio) on the embedded store `bench/bench_ui.py` builds
(once, under `.tools/bench-ui/N`), calls `memory_health` through the MCP SDK's client: the
first call after the server started, then `--calls` more, and prints the client's wall time
of each (p50, p95, max) and the store's own checks (name, status, time, detail) of the last
answer. Not a test: it asserts nothing.

    .venv/bin/python bench/bench_health.py --memories 100000 [--calls 30] [--json OUT]
        [--orchestrator PATH]   # another build's `orchestrator`, for an A/B in one run

The semantic stage is off, as in `bench/bench_ui.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_ui import ORCHESTRATOR, REPO, prepare

from memory_orchestrator.state.observability import percentile


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    env["ORCHESTRATOR_SEMANTIC__ENABLED"] = "false"
    return env


async def _measure(store: Path, calls: int, command: Path) -> dict[str, Any]:
    params = StdioServerParameters(
        command=str(command),
        args=["--data-dir", str(store), "serve"],
        env=_env(),
        cwd=store.parent,
    )
    times: list[float] = []
    last: dict[str, Any] = {}
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, read_timeout_seconds=None) as client,
        ):
            await client.initialize()
            for _ in range(calls + 1):
                sent = time.perf_counter()
                answer = await client.call_tool("memory_health", {})
                times.append((time.perf_counter() - sent) * 1000)
                assert not answer.is_error, answer.content
                assert isinstance(answer.structured_content, dict)
                last = answer.structured_content
    rest = times[1:]
    return {
        "first_call_ms": round(times[0], 1),
        "p50_ms": round(percentile(rest, 50) or 0.0, 1),
        "p95_ms": round(percentile(rest, 95) or 0.0, 1),
        "max_ms": round(max(rest), 1),
        "status": last.get("status"),
        "checks": [
            {k: c.get(k) for k in ("name", "status", "latency_ms", "detail")}
            for c in last.get("checks", [])
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=300, help="as for bench_ui.py")
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--data", type=Path, default=None, help="default .tools/bench-ui/N")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--orchestrator", type=Path, default=ORCHESTRATOR, help="the command run")
    args = parser.parse_args()
    data = prepare(
        args.data or REPO / ".tools" / "bench-ui" / str(args.memories), args.memories, args.requests
    )
    result = anyio.run(_measure, data / "store", args.calls, args.orchestrator)
    result.update(
        memories=args.memories,
        calls=args.calls,
        machine=f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
    )
    print(
        f"memory_health over {args.memories:,} memories ({result['machine']};"
        f" {args.orchestrator}): first call"
        f" {result['first_call_ms']} ms; then {args.calls} calls: p50 {result['p50_ms']} ms,"
        f" p95 {result['p95_ms']} ms, max {result['max_ms']} ms; status {result['status']}"
    )
    for check in result["checks"]:
        print(
            f"  {check['name']:12} {check['status']:9} {check['latency_ms'] or 0:9.1f} ms"
            f"  {check['detail']}"
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
