"""Long writes on one HTTP server: what a write of the maximum size costs, and what it costs
the other clients.

Starts `orchestrator serve --transport http` in a subprocess over a temp data dir whose
embedded store holds `--short` short memories (a person noted a topic: what the searching
client asks about) and `--similar` long notes of one family (`tests/long_notes.py`: ~7,900
characters each, 30 % of their words replaced from note to note, so the store's closest
memories for a new note are all long and alike: the write path compares each of them with
it). The server runs with the defaults (the semantic stage as it is set up on the machine).

Once the server has settled (memory_health: every memory embedded, nothing loading):

1. `alone`: `--searches` memory_search calls, one after another, nothing else running.
2. `writes`: `--writes` long notes of the same family written one after another (each one
   compared with the store's 10 closest: `write.candidates`).
3. `in flight`: `--writers` clients each write `--writes` long notes back to back while one
   more client sends memory_search calls one after another until the writers are done.

Reports latency percentiles per phase (the wall time of each call at the client).

    .venv/bin/python bench/bench_long_writes.py --similar 1000 --writes 5 --writers 2
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.http_load import PEOPLE, TOPICS, http_server, make_token, mcp_session, unique_memory
from tests.long_notes import long_note

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import NewMemory
from memory_orchestrator.state.observability import percentile

QUERIES = tuple(f"{person} {topic}" for person, topic in zip(PEOPLE, TOPICS, strict=False))


def _row(values: list[float]) -> dict[str, Any]:
    return {
        "count": len(values),
        "p50_ms": round(percentile(values, 50) or 0.0, 1),
        "p95_ms": round(percentile(values, 95) or 0.0, 1),
        "max_ms": round(max(values, default=0.0), 1),
    }


async def _preload(path: Path, count: int, short: int) -> None:
    store = EmbeddedBackend(path)
    rng = random.Random(1)
    try:
        await store.write_many(
            [NewMemory(**unique_memory(rng, 0, n)) for n in range(short)]  # the searcher's
        )
        for start in range(0, count, 100):
            notes = [
                NewMemory(content=long_note(1, n)) for n in range(start, min(count, start + 100))
            ]
            await store.write_many(notes)
    finally:
        await store.close()


async def _settled(url: str, secret: str, limit_s: float = 900.0) -> float:
    """Wait until the server's derived indexes hold every memory (memory_health says
    nothing is being embedded or loaded), so that the phases measure the calls, not the
    warm-up; the seconds waited."""
    started = time.perf_counter()
    async with mcp_session(url, secret) as session:
        while time.perf_counter() - started < limit_s:
            health = await session.call_tool("memory_health", {})
            text = json.dumps(health.structured_content or {})
            if not any(busy in text for busy in ("being embedded", "loading", "warming up")):
                break
            await anyio.sleep(2)
    return round(time.perf_counter() - started, 1)


async def _searches(
    url: str, secret: str, count: int | None, until: anyio.Event | None
) -> list[float]:
    took: list[float] = []
    async with mcp_session(url, secret) as session:
        n = 0
        while (count is None or n < count) and not (until is not None and until.is_set()):
            started = time.perf_counter()
            result = await session.call_tool("memory_search", {"query": QUERIES[n % len(QUERIES)]})
            took.append((time.perf_counter() - started) * 1000)
            if result.is_error:
                raise RuntimeError(f"search failed: {result.content}")
            n += 1
    return took


async def _writes(url: str, secret: str, first: int, count: int, actions: list[str]) -> list[float]:
    took: list[float] = []
    async with mcp_session(url, secret) as session:
        for n in range(first, first + count):
            started = time.perf_counter()
            result = await session.call_tool("memory_write", {"content": long_note(1, n)})
            took.append((time.perf_counter() - started) * 1000)
            if result.is_error:
                raise RuntimeError(f"write failed: {result.content}")
            actions.append(str((result.structured_content or {}).get("action")))
    return took


async def _in_flight(
    url: str, secret: str, writers: int, writes: int, first: int
) -> dict[str, Any]:
    done = anyio.Event()
    searched: list[float] = []
    wrote: list[float] = []
    actions: list[str] = []

    async def writer(n: int) -> None:
        wrote.extend(await _writes(url, secret, first + n * writes, writes, actions))

    async def searcher() -> None:
        searched.extend(await _searches(url, secret, None, done))

    async with anyio.create_task_group() as group:
        group.start_soon(searcher)
        async with anyio.create_task_group() as writing:
            for n in range(writers):
                writing.start_soon(writer, n)
        done.set()
    return {"search": _row(searched), "write": _row(wrote), "actions": sorted(set(actions))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--similar", type=int, default=1000, help="long notes stored first")
    parser.add_argument("--short", type=int, default=200, help="short memories stored first")
    parser.add_argument("--writes", type=int, default=5, help="long writes (per writer)")
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--searches", type=int, default=50, help="searches alone")
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args()

    token = make_token("bench")
    summary: dict[str, Any] = {
        "machine": f"{platform.node()} {platform.machine()} {platform.python_version()}",
        "similar": args.similar,
        "note_chars": [len(long_note(1, n)) for n in (0, 1)],
    }
    with tempfile.TemporaryDirectory(prefix="bench-long-") as folder:
        started = time.perf_counter()
        anyio.run(_preload, Path(folder) / "memories.db", args.similar, args.short)
        summary["preload_s"] = round(time.perf_counter() - started, 1)
        with http_server(Path(folder), [token.spec]) as server:
            url, secret = server.mcp_url, token.secret
            summary["settled_s"] = anyio.run(_settled, url, secret)
            summary["alone"] = _row(anyio.run(_searches, url, secret, args.searches, None))
            actions: list[str] = []
            first = args.similar
            wrote = anyio.run(_writes, url, secret, first, args.writes, actions)
            summary["writes"] = {**_row(wrote), "actions": sorted(set(actions))}
            first += args.writes
            summary["in_flight"] = anyio.run(
                _in_flight, url, secret, args.writers, args.writes, first
            )
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
