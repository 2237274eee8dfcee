"""What many MCP sessions opened in bulk cost the HTTP server: sessions kept, memory held.

Starts `orchestrator serve --transport http` in a subprocess (temp data dir, embedded store,
one bearer token, loopback), opens `--sessions` MCP sessions with that token the way a careless
or hostile client would (an `initialize` POST each, never closed), and reads the server's
resident memory (VmRSS, Linux) before and after. It reports how many sessions the server
opened and how many it refused.

    .venv/bin/python bench/bench_http_sessions.py --sessions 2000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from tempfile import TemporaryDirectory

import anyio
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.http_load import http_server, make_token

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}


def rss_mb(pid: int) -> float:
    """The resident memory of a process, in MB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS line: this measurement needs Linux")


async def open_sessions(url: str, secret: str, count: int, parallel: int) -> tuple[int, int]:
    """POST `count` initialize requests, `parallel` at a time: (opened, refused)."""
    headers = {
        "Authorization": f"Bearer {secret}",
        "Accept": "application/json, text/event-stream",
    }
    opened = refused = 0
    limiter = anyio.Semaphore(parallel)

    async def one(http: httpx2.AsyncClient) -> None:
        nonlocal opened, refused
        async with limiter:
            answer = await http.post(url, json=INITIALIZE, headers=headers)
        if answer.status_code == 200 and answer.headers.get("mcp-session-id"):
            opened += 1
        else:
            refused += 1

    async with httpx2.AsyncClient(timeout=60) as http, anyio.create_task_group() as group:
        for _ in range(count):
            group.start_soon(one, http)
    return opened, refused


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--parallel", type=int, default=16)
    args = parser.parse_args()
    token = make_token("bulk")
    with (
        TemporaryDirectory(prefix="bench-sessions-") as folder,
        http_server(Path(folder), [token.spec]) as server,
    ):
        before = rss_mb(server.process.pid)
        opened, refused = anyio.run(
            open_sessions, server.mcp_url, token.secret, args.sessions, args.parallel
        )
        after = rss_mb(server.process.pid)
    print(
        f"{args.sessions} sessions asked for: {opened} opened, {refused} refused; "
        f"server RSS {before:.0f} MB -> {after:.0f} MB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
