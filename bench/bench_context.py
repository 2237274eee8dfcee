"""Benchmark: what does orchestration cost on top of the store's own search?

Builds stores (embedded, or postgres with `--backend postgres`) of 1k and 10k memories (LoCoMo
development turns where available, then deterministic synthetic memories), runs the same
questions through the raw backend search and through `memory_search` / `memory_context` (direct
and expanded), all in one run, and prints p50/p95 per system plus the overhead over raw; and the
first call's time (it lists the store and builds the local index), how long the semantic index
took to embed every memory (the first start over an existing store), and the process's memory.
Traces are stored behind the request: the benchmark waits for that between calls, outside the
timing (as an agent's pause between calls would), and prints its p50 apart ("behind ms"), and
the process's CPU time a call costs ("cpu p50": the column to compare two codes by on a busy
machine, where the wall time moves with the others' load). Each system meets a question after
others did three times out of four (the question's vector, and its semantic ranking while no
vector changed, are then kept, as after an agent's memory_search on the question it then asks
memory_context); `context_fresh_q` is `memory_context` direct on questions no other system asks,
as an agent's new question each turn: the query's embedding is in its time. Under the table,
where `context_direct`'s p50 falls: its calls that asked the question first (they embed it)
against the others, and the others by their store calls (a search a subquery, plus the context
neighbours' call). Not a test: it asserts nothing.

    .venv/bin/python bench/bench_context.py [--sizes 1000,10000] [--queries 200] [--json OUT]
        [--keep DIR]  # reuse the stores and their vectors from an earlier run
        [--dataset PATH]  # LoCoMo elsewhere (a copy of bench/ outside the checkout)
    make bench-postgres   # the same on a throwaway local PostgreSQL (--backend postgres)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from memory_orchestrator.backends import registry
from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import ContextRequest, MemoryType, NewMemory, SearchRequest
from memory_orchestrator.postgres.scratch import scratch_store
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import load_settings
from memory_orchestrator.state.traces import TraceStore

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "locomo" / "locomo-dev.json"
START = datetime(2023, 1, 1, tzinfo=UTC)


def locomo_turns(path: Path = LOCOMO) -> tuple[list[NewMemory], list[str]]:
    """LoCoMo's turns as memories and its questions; none when `path` is not there."""
    if not path.is_file():
        return [], []
    data = json.loads(path.read_text())
    memories: list[NewMemory] = []
    questions: list[str] = []
    for conv in data:
        c = conv["conversation"]
        for key, turns in c.items():
            if not key.startswith("session_") or not isinstance(turns, list):
                continue
            for turn in turns:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shared a photo: {turn['blip_caption']}]"
                memories.append(
                    NewMemory(
                        content=text,
                        type=MemoryType.EPISODIC,
                        entities=[turn["speaker"]],
                        created_at=START + timedelta(hours=len(memories)),
                    )
                )
        questions += [q["question"] for q in conv["qa"] if q.get("category") in (1, 2, 3, 4)]
    return memories, questions


def synthetic(count: int, seed: int = 7) -> list[NewMemory]:
    rng = random.Random(seed)
    words = (
        [f"w{i}" for i in range(3000)]
        + "project vendor firmware deploy release team budget \
        meeting customer launch design review incident database cache latency".split()
    )
    weights = [1 / (i + 1) for i in range(len(words))]
    people = [f"Person{i}" for i in range(60)]
    out = []
    for i in range(count):
        who = rng.choice(people)
        body = " ".join(rng.choices(words, weights, k=rng.randint(8, 30)))
        out.append(
            NewMemory(
                content=f"{who}: {body}",
                type=rng.choice(list(MemoryType)),
                entities=[who],
                created_at=START + timedelta(minutes=37 * i),
            )
        )
    return out


def sample_questions(count: int, seed: int) -> list[str]:
    """`count` LoCoMo questions drawn with `seed` (synthetic ones without the dataset)."""
    _, questions = locomo_turns()
    if not questions:
        questions = [f"what happened with project vendor w{i}" for i in range(count)]
    return random.Random(seed).sample(questions, min(len(questions), count))


def kept_store_arguments(parser: argparse.ArgumentParser, queries: int) -> None:
    """The options of a script that works on a store `kept_orchestrator` keeps."""
    parser.add_argument("--data", type=Path, required=True, help="a folder kept between runs")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=queries)


async def kept_orchestrator(data: Path, size: int, warm: list[str]) -> Orchestrator:
    """An orchestrator (traces in memory) over the embedded store kept in `data`, built first
    with `size` memories as `bench_size` builds them when there is none; warmed by `warm`
    and settled (its semantic index's state printed)."""
    data.mkdir(parents=True, exist_ok=True)
    settings = load_settings(data_dir=data)
    fresh = not settings.embedded_path().exists()
    backend = EmbeddedBackend(settings.embedded_path())
    orch = Orchestrator(backend, settings, traces=TraceStore(None))
    if fresh:
        turns, _ = locomo_turns()
        memories = (turns + synthetic(max(0, size - len(turns))))[:size]
        for i in range(0, len(memories), 1000):
            await backend.write_many(memories[i : i + 1000])
    for q in warm:
        await orch.context(ContextRequest(query=q))
    print("semantic:", await settled(orch))
    return orch


def _rss_mb() -> int:
    """The process's resident memory now, in MB (Linux; 0 elsewhere)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return round(pages * resource.getpagesize() / 2**20)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def timed(
    fn: Callable[[], Awaitable[Any]], runs: list[float], cpu: list[float] | None = None
) -> Any:
    """Run `fn`, appending its wall time (ms) to `runs` and the process's CPU time over the
    call to `cpu`: on a shared machine the wall time moves with the other jobs' load, the CPU
    a call costs much less, so an A/B of two codes at a busy hour reads the CPU column."""
    started, cpu_started = time.perf_counter(), time.process_time()
    result = await fn()
    runs.append((time.perf_counter() - started) * 1000)
    if cpu is not None:
        cpu.append((time.process_time() - cpu_started) * 1000)
    return result


def _store_calls(
    traces: TraceStore, questions: int, asked_new: set[str], calls: dict[str, list[int]]
) -> dict[str, int]:
    """Each system's store calls a request (added to `calls`), from the traces of the timed
    calls; and every stored trace's store calls by trace id."""
    stored = traces.recent(questions * 5)  # (newest first; a turn stores at most four)
    for trace in stored[: questions * 4]:
        key = {"search": "search_direct"}.get(trace.tool)
        if trace.tool == "context":
            key = "context_expanded" if trace.request.get("expand") else "context_direct"
            if trace.request.get("query") in asked_new:
                key = "context_fresh_q"
        if key:
            calls[key].append(trace.backend_calls)
    return {t.trace_id: t.backend_calls for t in stored}


def breakdown(direct: list[tuple[bool, float, int | None]]) -> dict[str, Any]:
    """Where `context_direct`'s p50 falls: its calls that were the first of the turn to ask
    the orchestrator the question (they embed it) against the others, and the others by the
    store calls they made (a search per subquery, and the context neighbours' call)."""
    first = [ms for asked_first, ms, _ in direct if asked_first]
    after = [(ms, calls) for asked_first, ms, calls in direct if not asked_first]
    by_calls: dict[str, list[float]] = {}
    for ms, calls in after:
        by_calls.setdefault(str(calls), []).append(ms)
    return {
        "asked_first": {"calls": len(first), "p50_ms": round(pct(first, 0.5), 3)} if first else {},
        "after_another": {
            "calls": len(after),
            "p50_ms": round(pct([ms for ms, _ in after], 0.5), 3),
            "p67_ms": round(pct([ms for ms, _ in after], 2 / 3), 3),
        }
        if after
        else {},
        "after_another_by_store_calls": {
            calls: {"calls": len(runs), "p50_ms": round(pct(runs, 0.5), 3)}
            for calls, runs in sorted(by_calls.items())
        },
    }


async def settled(orch: Orchestrator) -> str:
    """Wait (untimed) until the semantic index, when on, has embedded every memory, so that
    no background embedding runs under the timed calls (as the eval does); its health
    detail, or "off"."""
    await orch.settle()
    report = await orch.health()
    check = next((c for c in report.checks if c.name == "semantic"), None)
    return "off" if check is None else check.detail


async def bench_size(
    size: int,
    questions: list[str],
    turns: list[NewMemory],
    store: str = "embedded",
    keep: Path | None = None,
    new_questions: list[str] | None = None,
) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        if keep is None:
            data = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        else:
            data = keep / f"{store}-{size}"
        fresh = keep is None or not data.exists()
        settings = stack.enter_context(scratch_store(load_settings(data_dir=data, backend=store)))
        backend = registry.create(store, settings)
        traces = TraceStore(settings.trace_path())
        orch = Orchestrator(backend, settings, traces=traces)
        memories = (turns + synthetic(max(0, size - len(turns))))[:size]
        started = time.perf_counter()
        for i in range(0, len(memories), 1000) if fresh else ():
            await backend.write_many(memories[i : i + 1000])
        ingest_s = time.perf_counter() - started
        systems: dict[str, list[float]] = {
            "raw_search": [],
            "search_direct": [],
            "context_direct": [],
            "context_expanded": [],
            "context_fresh_q": [],
        }
        calls: dict[str, list[int]] = {k: [] for k in systems if k != "raw_search"}
        behind: dict[str, list[float]] = {k: [] for k in systems}
        cpu: dict[str, list[float]] = {k: [] for k in systems}
        flush = getattr(traces, "flush", lambda: None)  # (older trace stores wrote inline)
        asked_new = set(new_questions or ())
        direct: list[tuple[bool, float, str]] = []  # asked first, ms, trace id
        started = time.perf_counter()
        await orch.context(ContextRequest(query=questions[0]))  # lists the store, builds
        first_s = time.perf_counter() - started
        for q in questions[1:5]:  # warm caches (known entities, statements)
            await orch.context(ContextRequest(query=q))
        semantic = await settled(orch)  # the derived indexes have embedded every memory
        settled_s = time.perf_counter() - started
        for turn, q in enumerate(questions):
            runs: dict[str, Callable[[], Awaitable[Any]]] = {
                "raw_search": partial(backend.search, q, 10),
                "search_direct": partial(orch.search, SearchRequest(query=q, top_k=10)),
                "context_direct": partial(orch.context, ContextRequest(query=q, expand=False)),
                "context_expanded": partial(orch.context, ContextRequest(query=q, expand=True)),
            }
            # The first system to see a question pays for cold caches (the store's pages, the
            # stemmed terms of its candidates); each system goes first equally often.
            order = list(runs)
            order = order[turn % len(order) :] + order[: turn % len(order)]
            if new_questions and turn < len(new_questions):  # last; on its own: never cached
                new = ContextRequest(query=new_questions[turn], expand=False)
                order.append("context_fresh_q")
                runs["context_fresh_q"] = partial(orch.context, new)
            for at, name in enumerate(order):
                result = await timed(runs[name], systems[name], cpu[name])
                if name == "context_direct":  # (first: no system before it embedded the question)
                    first = all(n == "raw_search" for n in order[:at])
                    direct.append((first, systems[name][-1], result.trace_id))
                # Traces are stored behind the request: wait for that here, outside the timing,
                # so that it does not land in the next system's time; its cost is reported apart.
                await timed(partial(anyio.to_thread.run_sync, flush), behind[name])
        store_calls = _store_calls(traces, len(questions), asked_new, calls)
        rss_mb = _rss_mb()
        await orch.close()
    split = breakdown([(first, ms, store_calls.get(tid)) for first, ms, tid in direct])
    raw_p50 = pct(systems["raw_search"], 0.5)
    return {
        "memories": size,
        "queries": len(questions),
        "ingest_s": round(ingest_s, 3),
        "first_call_s": round(first_s, 3),
        "settled_s": round(settled_s, 3),
        "rss_mb": rss_mb,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "semantic": semantic,
        "context_direct_breakdown": split,
        "systems": {
            name: {
                "p50_ms": round(pct(runs, 0.5), 3),
                "p95_ms": round(pct(runs, 0.95), 3),
                "overhead_p50_ms": round(pct(runs, 0.5) - raw_p50, 3),
                "behind_p50_ms": round(pct(behind[name], 0.5), 3),
                "cpu_p50_ms": round(pct(cpu[name], 0.5), 3),
                "backend_calls_mean": round(statistics.mean(calls[name]), 2)
                if calls.get(name)
                else 1,
            }
            for name, runs in systems.items()
            if runs
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--dataset",
        type=Path,
        default=LOCOMO,
        help="LoCoMo's development split (default: ../shared/datasets/locomo/locomo-dev.json"
        " beside the checkout; a copy of bench/ elsewhere must be told): without it the"
        " questions are synthetic, which the output says",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="keep each store (and its semantic vectors) in DIR/<backend>-<size> and reuse it"
        " on the next run: a 100k store embeds for many minutes the first time (embedded only)",
    )
    parser.add_argument(
        "--backend",
        default="embedded",
        choices=["embedded", "postgres"],
        help="postgres: the database $ORCHESTRATOR_POSTGRES__DSN names (a scratch schema per"
        " size; `make bench-postgres` starts a throwaway server)",
    )
    args = parser.parse_args()
    turns, questions = locomo_turns(args.dataset)
    source = str(args.dataset)
    if not questions:
        print(f"LoCoMo not found at {args.dataset}; using synthetic questions", file=sys.stderr)
        questions = [f"what happened with project vendor w{i}" for i in range(args.queries)]
        source = "synthetic"
    rng = random.Random(11)
    chosen = rng.sample(questions, min(args.queries, len(questions)))
    # questions no other system asks: `context_fresh_q` meets no cached question vector
    others = sorted(set(questions) - set(chosen))
    fresh = random.Random(12).sample(others, min(len(chosen), len(others)))
    questions = chosen
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        print(f"benchmarking {size} memories x {len(questions)} questions ...", file=sys.stderr)
        result = anyio.run(bench_size, size, questions, turns, args.backend, args.keep, fresh)
        results.append({"questions_from": source, **result})
    print(
        f"{'memories':>8} {'system':<17} {'p50 ms':>8} {'p95 ms':>8}"
        f" {'+p50 vs raw':>11} {'calls':>5} {'behind ms':>9} {'cpu p50':>8}"
    )
    for r in results:
        print(f"{r['memories']:>8} questions: {r['questions_from']}")
        print(f"{r['memories']:>8} semantic: {r['semantic']}")
        print(
            f"{r['memories']:>8} first call {r['first_call_s']:.2f} s (lists the store, builds the"
            f" local index), semantic index settled after {r['settled_s']:.1f} s; memory"
            f" {r['rss_mb']} MB now, {r['peak_rss_mb']} MB at peak"
        )
        for name, s in r["systems"].items():
            print(
                f"{r['memories']:>8} {name:<17} {s['p50_ms']:>8.2f} {s['p95_ms']:>8.2f}"
                f" {s['overhead_p50_ms']:>11.2f} {s['backend_calls_mean']:>5}"
                f" {s['behind_p50_ms']:>9.2f} {s['cpu_p50_ms']:>8.2f}"
            )
        split = r["context_direct_breakdown"]
        if split.get("asked_first") and split.get("after_another"):
            first, after = split["asked_first"], split["after_another"]
            by = ", ".join(
                f"{calls} store calls: {v['calls']} at {v['p50_ms']:.2f}"
                for calls, v in split["after_another_by_store_calls"].items()
            )
            print(
                f"{r['memories']:>8} context_direct: {first['calls']} calls asked the question"
                f" first (p50 {first['p50_ms']:.2f} ms), {after['calls']} after another system"
                f" (p50 {after['p50_ms']:.2f}, p67 {after['p67_ms']:.2f} ms; by store calls, p50:"
                f" {by})"
            )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
