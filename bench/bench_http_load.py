"""Load on the streamable-HTTP server: concurrent MCP clients, mixed tools, writes counted after.

Starts `orchestrator serve --transport http` in a subprocess (temp data dir, embedded store,
a freshly generated bearer token, loopback), preloads `--seed` unique memories so reads have
something to rank, then runs `--clients` concurrent MCP sessions (the SDK's streamable-HTTP
client), each making `--requests` calls drawn from the mix (context:search:write, default
2:2:1). It reports throughput, latency percentiles per tool and overall, errors, the server
process's CPU time per call in the timed phase (Linux: a figure other jobs on a shared machine
disturb far less than wall time), and then reads the store's SQLite file: every acknowledged
write must be there exactly once.

    make bench-http
    .venv/bin/python bench/bench_http_load.py --clients 16 --requests 200

Exit status 1 when a write was lost or duplicated, or a request failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.http_load import (
    LoadResult,
    http_server,
    lost_and_duplicated,
    make_token,
    run_load,
    stored_contents,
)

from memory_orchestrator.state.observability import percentile


def _mix(text: str) -> dict[str, int]:
    context, search, write = (int(part) for part in text.split(":"))
    return {"memory_context": context, "memory_search": search, "memory_write": write}


def _row(name: str, values: list[float]) -> dict[str, Any]:
    return {
        "tool": name,
        "count": len(values),
        "p50_ms": round(percentile(values, 50) or 0.0, 1),
        "p95_ms": round(percentile(values, 95) or 0.0, 1),
        "p99_ms": round(percentile(values, 99) or 0.0, 1),
    }


def _summary(result: LoadResult, stored: int, lost: int, duplicated: int) -> dict[str, Any]:
    rows = [_row(tool, values) for tool, values in sorted(result.latencies_ms.items())]
    return {
        "clients": result.clients,
        "requests": result.requests,
        "errors": result.errors,
        "error_samples": result.error_samples,
        "seconds": round(result.seconds, 2),
        "throughput_rps": round(result.requests / result.seconds, 1) if result.seconds else 0.0,
        "latency": [*rows, _row("all", result.all_latencies())],
        "writes_acknowledged": len(result.written),
        "write_actions": dict(result.write_actions),
        "memories_stored": stored,
        "lost": lost,
        "duplicated": duplicated,
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cpu, "
        f"Python {platform.python_version()}",
    }


def _print(summary: dict[str, Any]) -> None:
    print(
        f"{summary['requests']} requests from {summary['clients']} clients in "
        f"{summary['seconds']} s: {summary['throughput_rps']} req/s, "
        f"{summary['errors']} errors"
    )
    print(f"{'tool':<16}{'count':>7}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}")
    for row in summary["latency"]:
        print(
            f"{row['tool']:<16}{row['count']:>7}{row['p50_ms']:>9}{row['p95_ms']:>9}"
            f"{row['p99_ms']:>9}"
        )
    print(
        f"writes acknowledged {summary['writes_acknowledged']} {summary['write_actions']}, "
        f"memories stored {summary['memories_stored']}, lost {summary['lost']}, "
        f"duplicated {summary['duplicated']}"
    )
    for sample in summary["error_samples"]:
        print(f"  error: {sample}")
    print(f"server /metrics counted {summary.get('server_counted_requests')} tool calls")
    print(f"server CPU per call: {summary.get('server_cpu_ms_per_call')} ms")
    print(summary["machine"])


def _cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process `pid` so far (Linux /proc); None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _counted(exposition: str) -> int:
    """Tool calls the server's own /metrics counted (seed and timed phases together)."""
    prefix = "orchestrator_requests_total{"
    return int(
        sum(
            float(line.rsplit(" ", 1)[1])
            for line in exposition.splitlines()
            if line.startswith(prefix)
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=200, help="per client")
    parser.add_argument("--mix", type=_mix, default=_mix("2:2:1"), help="context:search:write")
    parser.add_argument("--seed", type=int, default=200, help="memories written before timing")
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args()

    token = make_token("bench")
    with (
        tempfile.TemporaryDirectory(prefix="bench-http-") as folder,
        http_server(Path(folder), [token.spec]) as server,
    ):
        seeded = anyio.run(
            lambda: run_load(
                server.mcp_url,
                token.secret,
                clients=4,
                requests_per_client=max(1, args.seed // 4),
                mix={"memory_write": 1},
            )
        )
        cpu_before = _cpu_s(server.process.pid)
        result = anyio.run(
            lambda: run_load(
                server.mcp_url,
                token.secret,
                clients=args.clients,
                requests_per_client=args.requests,
                mix=args.mix,
            )
        )
        cpu_after = _cpu_s(server.process.pid)
        metrics = httpx2.get(
            server.base_url + "/metrics",
            headers={"Authorization": f"Bearer {token.secret}"},
            timeout=10,
        )
        metrics.raise_for_status()
        stored = stored_contents(server.data_dir)
    written = [*seeded.written, *result.written]
    lost, duplicated = lost_and_duplicated(written, stored)
    summary = _summary(result, sum(stored.values()), lost, duplicated)
    summary["seed_writes"] = len(seeded.written)
    summary["server_counted_requests"] = _counted(metrics.text)
    if cpu_before is not None and cpu_after is not None and result.requests:
        per_call = (cpu_after - cpu_before) * 1000 / result.requests
        summary["server_cpu_ms_per_call"] = round(per_call, 1)
    _print(summary)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    failed = lost or duplicated or result.errors or seeded.errors
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
