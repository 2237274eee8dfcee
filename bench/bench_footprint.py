"""Benchmark: the resident memory of the orchestrator's processes, and what a relay costs.

Three measurements, each over real processes spoken to by the MCP SDK's stdio client:

- `workload`: one `orchestrator serve` over an embedded store of `--size` memories (LoCoMo's
  development turns, then synthetic ones, as `bench_context.py` builds them; every vector
  embedded and kept beforehand, untimed), once its warm-up is done, runs a fixed script:
  100 `memory_context` and 50 `memory_search` on LoCoMo questions (seeded), 10
  `memory_expand` from found ids, 10 `memory_write`, 5 `memory_explain`; then reads the
  peak (VmHWM) and current (VmRSS) resident memory of every process that serves it: the
  server in-process, or the relay and the shared process (`--way relay`).
- `pair`: two sessions on the 40-memory demo store at once, each calling `memory_context`;
  the resident memory of all the orchestrator's processes together (two servers in-process,
  or two relays and one shared process).
- `latency`: `memory_context` at `--size` through a relay and in-process, the same questions
  in alternating order (each question new to both), in one run: p50 and p95 of each and the
  difference of the p50s.
- `starts`: with a shared process warm at `--size`, a prompt hook (`client.call("context")` in
  a new Python process) and `orchestrator serve` (to its `initialize` answer), each timed from
  the process's start, `--rounds` times; and a server in its own process, for comparison.
- `breakdown`: where the memory of one in-process orchestrator goes, step by step (RSS after
  the imports, the model, the kept vectors, the store's listing into the indexes, a first
  query, 100 queries), in this process.

`--python` runs another checkout's interpreter (a snapshot of the old code, for a before/after
in one run): its in-process server is `python -m memory_orchestrator.faces.mcp.server`, which
both have. Stores are kept under `--keep` (a 100k store embeds for many minutes the first
time). The warm-up's listing is given `--listing-s` (the store call timeout, 5 s by default:
on a loaded machine a 100k listing takes longer, and each request would then go on with it).
Not a test: it asserts nothing. Memory is Linux's /proc accounting.

    .venv/bin/python bench/bench_footprint.py workload --size 10000 --keep DIR [--way relay]
    .venv/bin/python bench/bench_footprint.py pair [--way relay]
    .venv/bin/python bench/bench_footprint.py latency --size 10000 --keep DIR [--rounds 200]
    .venv/bin/python bench/bench_footprint.py starts --size 10000 --keep DIR [--rounds 30]
    .venv/bin/python bench/bench_footprint.py breakdown --size 10000 --keep DIR
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_context

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.settings import load_settings

CALL_S = 600.0
WORDS = ["budget", "vendor", "launch", "review", "firmware", "meeting", "design", "cache"]


def build_store(folder: Path, size: int) -> None:
    """`size` memories in an embedded store in `folder`, every vector embedded and kept (the
    demo sample for size 0)."""
    if (folder / "memories.db").exists():
        return
    python = Path(sys.executable).parent
    if size == 0:
        command = [str(python / "orchestrator"), "demo", "--data-dir", str(folder)]
        subprocess.run(command, check=True, capture_output=True)
        return
    turns, _ = bench_context.locomo_turns()
    memories = (turns + bench_context.synthetic(max(0, size - len(turns))))[:size]
    folder.mkdir(parents=True, exist_ok=True)

    async def write() -> None:
        backend = EmbeddedBackend(load_settings(data_dir=folder).embedded_path())
        for i in range(0, len(memories), 1000):
            await backend.write_many(memories[i : i + 1000])
        await backend.close()

    anyio.run(write)
    embed = (
        "import anyio, sys; from memory_orchestrator.service import Orchestrator;"
        " from memory_orchestrator.settings import load_settings\n"
        "async def main():\n"
        "    o = Orchestrator.from_settings(load_settings(data_dir=sys.argv[1]))\n"
        "    await o.settle(); await o.close()\n"
        "anyio.run(main)"
    )
    env = {**os.environ, "ORCHESTRATOR_RETRIEVAL__TIMEOUT_S": "600"}
    subprocess.run([sys.executable, "-c", embed, str(folder)], check=True, env=env)


# ---------------------------------------------------------------- processes


def status(pid: int) -> dict[str, int]:
    """VmHWM and VmRSS of `pid`, in MB."""
    found: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                found[key] = round(int(value.split()[0]) / 1024)
    return found


def children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    out.append(int(entry.name))
    return out


def shared_pids(runtime: Path) -> list[int]:
    folder = runtime / "memory-orchestrator"
    return [int(p.read_text()) for p in folder.glob("*.pid")] if folder.is_dir() else []


def command(way: str, python: Path) -> list[str]:
    if way == "relay":
        return [str(python.parent / "orchestrator"), "serve"]
    return [str(python), "-m", "memory_orchestrator.faces.mcp.server"]


@contextlib.contextmanager
def runtime_dir() -> Iterator[Path]:
    """A socket directory of its own; the shared processes in it are stopped at the end."""
    path = Path(tempfile.mkdtemp(prefix="mo-bench-", dir="/tmp"))
    try:
        yield path
    finally:
        for pid in shared_pids(path):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        time.sleep(1)
        shutil.rmtree(path, ignore_errors=True)


def server_env(data: Path, runtime: Path, listing_s: float) -> dict[str, str]:
    """The environment an agent's MCP config gives the server (and a hook would have)."""
    return {
        "ORCHESTRATOR_DATA_DIR": str(data),
        "ORCHESTRATOR_RETRIEVAL__TIMEOUT_S": str(listing_s),
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", str(data)),
        "XDG_RUNTIME_DIR": str(runtime),
    }


@contextlib.asynccontextmanager
async def session(
    way: str, python: Path, data: Path, runtime: Path, listing_s: float
) -> AsyncIterator[ClientSession]:
    env = server_env(data, runtime, listing_s)
    first, *args = command(way, python)
    params = StdioServerParameters(command=first, args=args, env=env, cwd=data)
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, read_timeout_seconds=CALL_S) as mcp,
        ):
            await mcp.initialize()
            yield mcp


async def call(mcp: ClientSession, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await mcp.call_tool(tool, arguments)
    if result.is_error or not isinstance(result.structured_content, dict):
        raise RuntimeError(f"{tool} failed: {str(result.content)[:300]}")
    return result.structured_content


async def ready(mcp: ClientSession) -> None:
    """Until the warm-up is done and nothing is being embedded."""
    while True:
        text = json.dumps(await call(mcp, "memory_health", {}))
        if not any(w in text for w in ("loading", "warming up", "being embedded")):
            return
        await anyio.sleep(0.2)


def memory_of(way: str, runtime: Path) -> dict[str, Any]:
    """The serving processes' memory: this process's children (the in-process servers, or
    the relays) and the shared processes."""
    started = {f"started {pid}": status(pid) for pid in children(os.getpid())}
    shared = {f"shared {pid}": status(pid) for pid in shared_pids(runtime)}
    servers = shared if way == "relay" else started
    return {
        "processes": started | shared,
        "rss_total_mb": sum(p.get("VmRSS", 0) for p in (started | shared).values()),
        "server_peak_mb": max((p.get("VmHWM", 0) for p in servers.values()), default=0),
    }


# ---------------------------------------------------------------- the measurements


@contextlib.contextmanager
def copied(data: Path) -> Iterator[Path]:
    """A copy of the kept store (and its vectors) for one run: the workload's writes, traces
    and outbox never reach the next run's store."""
    with tempfile.TemporaryDirectory(prefix="bench-footprint-") as folder:
        copy = Path(folder) / data.name
        shutil.copytree(data, copy, ignore=shutil.ignore_patterns("traces.db*", "outbox.db*"))
        yield copy


async def workload(way: str, python: Path, kept: Path, listing_s: float) -> dict[str, Any]:
    questions = bench_context.sample_questions(150, seed=29)
    with runtime_dir() as runtime, copied(kept) as data:
        async with session(way, python, data, runtime, listing_s) as mcp:
            phases: dict[str, int] = {}

            def after(phase: str) -> None:  # the serving processes' resident memory now
                phases[phase] = memory_of(way, runtime)["rss_total_mb"]

            started = time.perf_counter()
            await ready(mcp)
            warm_s = time.perf_counter() - started
            after("warmed up")
            found: list[str] = []
            traces: list[str] = []
            for q in questions[:100]:
                package = await call(mcp, "memory_context", {"query": q})
                found += [i["memory_id"] for i in package["items"][:1]]
                traces.append(package["trace_id"])
            after("100 memory_context")
            for q in questions[100:150]:
                await call(mcp, "memory_search", {"query": q, "top_k": 10})
            after("50 memory_search")
            for memory_id in found[:10]:
                await call(mcp, "memory_expand", {"seed_ids": [memory_id], "hops": 2})
            after("10 memory_expand")
            rng = random.Random(31)
            for n in range(10):
                words = " ".join(rng.choice(WORDS) for _ in range(6))
                content = f"Footprint note {n}: {words} {rng.random()}"
                await call(mcp, "memory_write", {"content": content})
            after("10 memory_write")
            for trace in traces[:5]:
                await call(mcp, "memory_explain", {"trace_id": trace})
            after("5 memory_explain")
            measured = memory_of(way, runtime)
            return {"way": way, "warm_up_s": round(warm_s, 1), "rss_after_mb": phases, **measured}


async def pair(way: str, python: Path, data: Path) -> dict[str, Any]:
    with runtime_dir() as runtime:
        async with (
            session(way, python, data, runtime, 5.0) as one,
            session(way, python, data, runtime, 5.0) as two,
        ):
            for mcp in (one, two):
                await call(mcp, "memory_context", {"query": "what happened with Vendor X?"})
            await ready(one)
            await ready(two)
            for mcp in (one, two):
                await call(mcp, "memory_context", {"query": "who decides on the radio supplier?"})
            return {"way": way, **memory_of(way, runtime)}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def latency(python: Path, data: Path, rounds: int, listing_s: float) -> dict[str, Any]:
    questions = bench_context.sample_questions(rounds, seed=37)
    times: dict[str, list[float]] = {"in-process": [], "relay": []}
    with runtime_dir() as runtime:
        async with (
            session("in-process", python, data, runtime, listing_s) as here,
            session("relay", python, data, runtime, listing_s) as relayed,
        ):
            sessions = {"in-process": here, "relay": relayed}
            for mcp in sessions.values():
                await ready(mcp)
                for q in bench_context.sample_questions(10, seed=41):  # warm both alike
                    await call(mcp, "memory_context", {"query": q})
            for n, q in enumerate(questions):
                order = ["in-process", "relay"] if n % 2 == 0 else ["relay", "in-process"]
                for way in order:
                    started = time.perf_counter()
                    await call(sessions[way], "memory_context", {"query": q})
                    times[way].append((time.perf_counter() - started) * 1000)
    summary = {
        way: {"p50_ms": round(percentile(t, 0.5), 2), "p95_ms": round(percentile(t, 0.95), 2)}
        for way, t in times.items()
    }
    delta = summary["relay"]["p50_ms"] - summary["in-process"]["p50_ms"]
    return {"rounds": rounds, **summary, "relay_minus_in_process_p50_ms": round(delta, 2)}


HOOK = """
import sys
from memory_orchestrator.faces.shared import client
answer = client.call("context", {"query": sys.argv[1]}, timeout_s=5.0)
sys.stdout.write("answered" if answer is not None and "context_block" in answer else "nothing")
"""
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench_footprint", "version": "1"},
    },
}


def started_and_answered(command: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds from starting `command` (an `orchestrator serve`) to its `initialize` answer."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - started
    proc.stdin.close()
    proc.wait(timeout=120)
    if b'"result"' not in line:
        raise RuntimeError(f"initialize failed: {line[:300]!r}")
    return elapsed


async def starts(python: Path, data: Path, runs: int, listing_s: float) -> dict[str, Any]:
    """With a shared process warm over `data`: a prompt hook (`client.call("context")` in a
    new Python process, from its start to its answer), and `orchestrator serve` (from its
    start to the `initialize` answer), each `runs` times; and the same `initialize` of a
    server in its own process, for comparison."""
    questions = bench_context.sample_questions(runs, seed=43)
    with runtime_dir() as runtime:
        env = server_env(data, runtime, listing_s)
        async with session("relay", python, data, runtime, listing_s) as mcp:
            await ready(mcp)
            hook: list[float] = []
            for q in questions:
                started = time.perf_counter()
                done = subprocess.run(
                    [str(python), "-c", HOOK, q],
                    env=env,
                    cwd=data,
                    capture_output=True,
                    text=True,
                    timeout=120,
                    check=True,
                )
                hook.append((time.perf_counter() - started) * 1000)
                if done.stdout != "answered":
                    raise RuntimeError(f"the hook got no answer: {done.stdout} {done.stderr}")
            relay = [
                started_and_answered(command("relay", python), env, data) * 1000
                for _ in range(runs)
            ]
        alone = [
            started_and_answered(command("in-process", python), env, data) * 1000
            for _ in range(min(runs, 5))
        ]

    def summary(times: list[float]) -> dict[str, float]:
        return {
            "p50_ms": round(percentile(times, 0.5), 1),
            "p95_ms": round(percentile(times, 0.95), 1),
        }

    return {
        "runs": runs,
        "hook_context_from_start": summary(hook),
        "relay_initialize_from_start": summary(relay),
        "in_process_initialize_from_start": summary(alone),
    }


def rss_mb() -> str:
    """This process's resident memory now and at its peak so far (MB)."""
    found = status(os.getpid())
    return f"{found['VmRSS']} (peak {found['VmHWM']})"


async def breakdown(data: Path, listing_s: float) -> list[tuple[str, str]]:
    steps = [("python and this script", rss_mb())]
    from memory_orchestrator.faces.mcp import server  # the server's imports
    from memory_orchestrator.models import ContextRequest
    from memory_orchestrator.service import Orchestrator

    steps.append((f"+ the server's imports ({server.__name__})", rss_mb()))
    settings = load_settings(data_dir=data, retrieval={"timeout_s": listing_s})
    orchestrator = Orchestrator.from_settings(settings)
    steps.append(("+ the orchestrator (store opened)", rss_mb()))
    embedder = orchestrator._indexes.embedder()  # the model (and its kept vectors) alone, first
    steps.append(
        (f"+ the model ({embedder.name if embedder else 'none'}) and kept vectors", rss_mb())
    )
    await orchestrator.warm_up()
    await orchestrator.settle()
    steps.append(("+ the store's listing into the indexes", rss_mb()))
    questions = bench_context.sample_questions(101, seed=29)
    await orchestrator.context(ContextRequest(query=questions[0]))
    steps.append(("+ a first memory_context", rss_mb()))
    for q in questions[1:]:
        await orchestrator.context(ContextRequest(query=q))
    steps.append(("+ 100 more memory_context", rss_mb()))
    await orchestrator.close()
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=["workload", "pair", "latency", "starts", "breakdown"])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--keep", type=Path, default=Path("/tmp/bench-footprint"))
    parser.add_argument("--way", choices=["in-process", "relay"], default="in-process")
    parser.add_argument("--python", type=Path, default=Path(sys.executable))
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--listing-s", type=float, default=120.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    size = 0 if args.what == "pair" else args.size
    data = args.keep / ("demo" if size == 0 else f"embedded-{size}")
    build_store(data, size)
    if args.what == "workload":
        result: Any = anyio.run(workload, args.way, args.python, data, args.listing_s)
    elif args.what == "pair":
        result = anyio.run(pair, args.way, args.python, data)
    elif args.what == "latency":
        result = anyio.run(latency, args.python, data, args.rounds, args.listing_s)
    elif args.what == "starts":
        result = anyio.run(starts, args.python, data, args.rounds, args.listing_s)
    else:
        result = anyio.run(breakdown, data, args.listing_s)
    result = {"what": args.what, "size": size, "python": str(args.python), "result": result}
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
