"""Benchmark: the server time of every inspector page over a store of 100,000 memories.

Builds (once, kept under `--data`) an embedded store of `--memories` deterministic synthetic
memories (`bench_context.synthetic`: 60 people, four memory types, one every 37 minutes) with
a few corrections, leaves `--requests` searches and context packages in its trace store, and
writes an `eval --out` folder (the shipped golden set). Then it starts the real
`orchestrator ui` process on it and asks for every page: the first page at once after start
(it answers from the memories listed so far, while the inspector lists the store beside the
requests), `/` again every 0.2 s until that listing is done, then `--rounds` times each page,
page after page in turn so that the machine's load drifts over all pages alike. The time is
the server's own, from the `Server-Timing: app;dur=...` header every answer carries (the
guard's entry to the answer's start); the client's wall time (a new connection per request)
is printed beside it. Not a test: it asserts nothing.

    make bench-ui
    .venv/bin/python bench/bench_ui.py --memories 100000 [--rounds 20] [--json OUT]
        [--orchestrator PATH]   # another build's `orchestrator`, for an A/B in one run

The semantic stage is off (`ORCHESTRATOR_SEMANTIC__ENABLED=false`): embedding 100,000
memories takes hours on a CPU the first time (it is kept afterwards); the figures measure the
inspector, not the model.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_context import synthetic
from tests.inspector_process import inspector

from memory_orchestrator.models import (
    ContextRequest,
    NewMemory,
    SearchRequest,
    WriteRequest,
)
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import load_settings
from memory_orchestrator.state.observability import percentile

REPO = Path(__file__).resolve().parents[1]
ORCHESTRATOR = Path(sys.executable).parent / "orchestrator"
_TIMING = re.compile(r"app;dur=([0-9.]+)")
_INDEXING = "Indexing the store"
_CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')
# asked once each right after the first page, while the inspector still lists the store
_FIRST_VISITS = ("/traces", "/health", "/eval", "/graph?entity=Person1", "/search q=Person1 budget")
_WORDS = "project vendor firmware deploy release team budget meeting customer launch design".split()


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    env["ORCHESTRATOR_SEMANTIC__ENABLED"] = "false"
    return env


async def _build(data: Path, count: int, requests: int) -> None:
    os.environ["ORCHESTRATOR_SEMANTIC__ENABLED"] = "false"
    orchestrator = Orchestrator.from_settings(load_settings(data_dir=data))
    rng = random.Random(11)
    try:
        memories = synthetic(count)
        started = time.perf_counter()
        for i in range(0, len(memories), 2000):
            await orchestrator.ingest(memories[i : i + 2000])
        print(f"  stored {count:,} memories in {time.perf_counter() - started:.1f} s", flush=True)
        for n in range(20):  # corrections: the old memory superseded by the write path
            who = f"Person{n}"
            old = f"{who} says the Atlas budget review is on day {n + 1} of the month."
            await orchestrator.ingest([NewMemory(content=old, entities=[who])])
            new = old.replace(f"day {n + 1} ", f"day {n + 3} ")
            await orchestrator.write(WriteRequest(memory=NewMemory(content=new, entities=[who])))
        started = time.perf_counter()
        for n in range(requests):
            query = f"Person{rng.randrange(60)} {' '.join(rng.sample(_WORDS, 3))}"
            if n % 2:
                await orchestrator.context(ContextRequest(query=query))
            else:
                await orchestrator.search(SearchRequest(query=query))
        print(f"  made {requests} requests in {time.perf_counter() - started:.1f} s", flush=True)
    finally:
        await orchestrator.close()


def prepare(data: Path, count: int, requests: int) -> Path:
    """The store, its traces and an eval folder under `data` (built once, then reused)."""
    marker = data / f".bench-ui-{count}-{requests}"
    if not marker.is_file():
        print(f"building the bench store in {data} (once) ...", flush=True)
        if data.exists():
            shutil.rmtree(data)
        data.mkdir(parents=True)
        anyio.run(_build, data / "store", count, requests)
        subprocess.run(
            [str(ORCHESTRATOR), "--data-dir", str(data / "eval-data"), "eval", "--dataset",
             "golden", "--format", "json", "--out", str(data / "eval-out")],
            env=_env(), capture_output=True, check=True, timeout=600,
        )  # fmt: skip
        marker.write_text("built by bench/bench_ui.py\n")
    return data


def _server_ms(answer: httpx2.Response) -> float:
    found = _TIMING.search(answer.headers.get("server-timing", ""))
    assert found, f"no Server-Timing on {answer.request.url}"
    return float(found.group(1))


def _get(client: httpx2.Client, variant: str) -> httpx2.Response:
    """One page: a path, or a form that is posted (`/search q=...`, `.../replay`): a search
    and a replay are kept as requests, so the inspector runs them from its own forms only."""
    path, _, query = variant.partition(" q=")
    if not (path == "/search" or path.endswith("/replay")):
        return client.get(variant)
    csrf = _CSRF.search(client.get("/").text)
    assert csrf, "no CSRF field on the memories page"
    fields = {"csrf": csrf.group(1), **({"q": query} if query else {})}
    return client.post(path, data=fields, headers={"origin": str(client.base_url).rstrip("/")})


def _pages(client: httpx2.Client, count: int) -> dict[str, list[str]]:
    """Every page, each with a few variants (other ids, other queries) to go round."""
    listing = client.get(f"/?offset={count // 2}").text
    ids = re.findall(r'href="/memories/(mem_[0-9a-f]+)"', listing)[:10]
    traces = client.get("/traces?tool=search").text
    trace_ids = re.findall(r'href="/traces/(tr_[0-9a-f]+)"', traces)[:10]
    rng = random.Random(5)
    queries = [f"Person{rng.randrange(60)} {' '.join(rng.sample(_WORDS, 3))}" for _ in range(10)]
    return {
        "/ (first page)": ["/"],
        f"/?offset={count // 2}": [f"/?offset={count // 2}"],
        f"/?offset={count - 50} (last)": [f"/?offset={count - 50}"],
        "/?type=episodic&entity=PersonN": [f"/?type=episodic&entity=Person{n}" for n in range(10)],
        "/?since..until (a month)": ["/?since=2023-01-01&until=2023-01-31"],
        "/?corrected=1": ["/?corrected=1"],
        "/search (memory_search, posted)": [f"/search q={q}" for q in queries],
        "/memories/<id>": [f"/memories/{i}" for i in ids],
        "/memories/<id>/forget (confirm)": [f"/memories/{i}/forget" for i in ids],
        "/traces": ["/traces"],
        "/traces?offset=200": ["/traces?offset=200"],
        "/traces/<id>": [f"/traces/{t}" for t in trace_ids],
        "/traces/<id>/replay (posted)": [f"/traces/{t}/replay" for t in trace_ids],
        "/graph?entity=PersonN": [f"/graph?entity=Person{n}" for n in range(10)],
        "/graph?entity=PersonN&hops=2": [f"/graph?entity=Person{n}&hops=2" for n in range(10)],
        "/graph?memory=<id>": [f"/graph?memory={i}" for i in ids],
        "/health": ["/health"],
        "/health?fresh=1 (check now)": ["/health?fresh=1"],
        "/eval": ["/eval"],
    }


def _cold(client: httpx2.Client) -> dict[str, Any]:
    """The first page after start, the first visit of a few others, then `/` every 0.2 s
    while the store is being listed."""
    started = time.perf_counter()
    first = client.get("/")
    cold: dict[str, Any] = {
        "first_page_server_ms": _server_ms(first),
        "first_page_wall_ms": round((time.perf_counter() - started) * 1000, 1),
        "first_page_indexing": _INDEXING in first.text,
    }
    visits = {}
    for path in _FIRST_VISITS:
        answer = _get(client, path)
        answer.raise_for_status()
        visits[path] = _server_ms(answer)
    cold["first_visits_server_ms"] = visits
    during: list[float] = []
    answer = first
    while _INDEXING in answer.text:
        time.sleep(0.2)
        answer = client.get("/")
        answer.raise_for_status()
        during.append(_server_ms(answer))
    cold["listed_whole_after_s"] = round(time.perf_counter() - started, 1)
    if during:
        cold["while_indexing"] = {
            "pages": len(during),
            "p50_ms": round(percentile(during, 50) or 0.0, 1),
            "max_ms": round(max(during), 1),
        }
    return cold


def measure(url: str, rounds: int, count: int) -> dict[str, Any]:
    # a new connection per request: on a kept-alive connection this client stalls on each
    # answer (a delayed-ACK stall of its own; curl and chromium do not), which is not the
    # server's time
    none_kept = httpx2.Limits(max_keepalive_connections=0)
    with httpx2.Client(base_url=url, timeout=600, limits=none_kept) as client:
        cold = _cold(client)
        pages = _pages(client, count)
        for variants in pages.values():  # one untimed pass: each page's first use
            for path in variants:
                _get(client, path).raise_for_status()
        server: dict[str, list[float]] = {name: [] for name in pages}
        wall: dict[str, list[float]] = {name: [] for name in pages}
        for turn in range(rounds):
            for name, variants in pages.items():
                path = variants[turn % len(variants)]
                sent = time.perf_counter()
                answer = _get(client, path)
                wall[name].append((time.perf_counter() - sent) * 1000)
                answer.raise_for_status()
                server[name].append(_server_ms(answer))
    rows = [
        {
            "page": name,
            "p50_ms": round(percentile(server[name], 50) or 0.0, 1),
            "p95_ms": round(percentile(server[name], 95) or 0.0, 1),
            "max_ms": round(max(server[name]), 1),
            "wall_p50_ms": round(percentile(wall[name], 50) or 0.0, 1),
        }
        for name in pages
    ]
    return {"cold": cold, "pages": rows}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=300, help="traces left in the store")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--data", type=Path, default=None, help="default .tools/bench-ui/N")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--orchestrator", type=Path, default=ORCHESTRATOR, help="the command run")
    args = parser.parse_args()
    data = prepare(
        args.data or REPO / ".tools" / "bench-ui" / str(args.memories), args.memories, args.requests
    )
    argv = [
        str(args.orchestrator), "ui", "--data-dir", str(data / "store"), "--port", "0",
        "--eval-dir", str(data / "eval-out"),
    ]  # fmt: skip
    started = time.perf_counter()
    with inspector(argv, cwd=data, env=_env(), start_timeout_s=600, ready=False) as url:
        print(f"inspector up in {time.perf_counter() - started:.1f} s at {url}", flush=True)
        result = measure(url, args.rounds, args.memories)
    result.update(
        memories=args.memories,
        requests=args.requests,
        rounds=args.rounds,
        machine=f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
    )
    cold = result["cold"]
    during = cold.get("while_indexing")
    print(
        f"\n{args.memories:,} memories, {args.requests} kept requests, {args.rounds} rounds"
        f" ({result['machine']}; {args.orchestrator}); first page after start: server"
        f" {cold['first_page_server_ms']} ms, wall {cold['first_page_wall_ms']} ms"
        f" ({'indexing' if cold['first_page_indexing'] else 'the whole listing'}); the store"
        f" listed whole {cold['listed_whole_after_s']} s after it"
        + (
            f"; `/` while indexing: {during['pages']} pages, p50 {during['p50_ms']} ms, max"
            f" {during['max_ms']} ms"
            if during
            else ""
        )
        + "\n"
        + "first visits meanwhile (server ms): "
        + ", ".join(f"{path} {ms}" for path, ms in cold["first_visits_server_ms"].items())
        + "\n"
    )
    print(f"{'page':40} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'wall p50':>9}")
    for row in result["pages"]:
        print(
            f"{row['page']:40} {row['p50_ms']:8.1f} {row['p95_ms']:8.1f} {row['max_ms']:8.1f}"
            f" {row['wall_p50_ms']:9.1f}"
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
