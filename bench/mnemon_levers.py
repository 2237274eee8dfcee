"""What this project measured that belongs in Mnemon itself (docs/explanation/upstream-mnemon.md).

Runs the real `mnemon` directly (no orchestrator, no adapter), each lever in a fresh scratch
data dir, and prints one figure per lever:

- `diff`: Mnemon's own near-duplicate check on `import` (no `--no-diff`): six "Sprint N retro"
  memories imported together, and every LoCoMo development conversation's turns imported
  into its own store: how many distinct memories were soft-deleted as `updated`, with the
  first replaced pairs;
- `anchors`: of `recall --limit 10 --verbose`'s results for the LoCoMo questions (one
  conversation's store), how many carry no keyword, entity or similarity signal (the recency
  anchors and what the walk reached from them);
- `locks`: N `remember` processes started at once on one store: how many failed with
  "database is locked" (no busy timeout); and a `recall` under another writer's lock: does
  it answer, and did its access-count write land;
- `cost`: per process, wall and CPU (user + system) medians of `status` (start and open
  alone), `search` and `recall` on stores of each `--sizes`;
- `readonly`: does `--readonly remember` write, and what journal mode does a store have
  after a `--readonly recall`.

    .venv/bin/python bench/mnemon_levers.py [--binary PATH] [--sizes 1000,10000]
        [--levers diff,anchors,locks,cost,readonly] [--questions 60] [--keep DIR] [--json OUT]

`--keep DIR` keeps the stores `cost` builds (and reuses a store bench/bench_mnemon_latency.py
kept there: the same memories). Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_context import LOCOMO, locomo_turns, synthetic
from tests.mnemon_double import real_binary

from memory_orchestrator.backends.mnemon import FAIL_FAST_ENDPOINT, MnemonBackend
from memory_orchestrator.backends.mnemon.mapping import import_row
from memory_orchestrator.models import MemoryType, NewMemory
from memory_orchestrator.settings import MnemonSettings

ENV = {**os.environ, "MNEMON_EMBED_ENDPOINT": FAIL_FAST_ENDPOINT, "MNEMON_MAX_INSIGHTS": "0"}
RETROS = [f"Sprint {n} retro: the deploy pipeline was slow" for n in range(1, 7)]


class Mnemon:
    """The binary over one data dir."""

    def __init__(self, binary: Path, data_dir: Path) -> None:
        self.binary, self.data_dir = binary, data_dir

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [str(self.binary), "--data-dir", str(self.data_dir), *args]
        return subprocess.run(argv, capture_output=True, text=True, env=ENV, check=check)

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args).stdout)

    def imported(self, memories: Sequence[NewMemory], *flags: str) -> dict[str, Any]:
        draft = {"schema_version": "1", "insights": [import_row(m) for m in memories]}
        path = self.data_dir.with_suffix(".draft.json")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(draft))
        result: dict[str, Any] = self.json("import", *flags, "--", str(path))
        return result

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        db = self.data_dir / "data" / "default" / "mnemon.db"
        with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True) as conn:
            rows = conn.execute(sql).fetchall()
        conn.close()
        return rows


def conversations() -> list[tuple[str, list[NewMemory], list[str]]]:
    """Each LoCoMo development conversation: its id, turns (as the eval ingests them) and
    questions of categories 1-4."""
    data = json.loads(LOCOMO.read_text())
    out = []
    for conv in data:
        turns = []
        for key, session in conv["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                for turn in session:
                    text = f"{turn['speaker']}: {turn['text']}"
                    if turn.get("blip_caption"):
                        text += f" [shared a photo: {turn['blip_caption']}]"
                    turns.append(NewMemory(content=text, type=MemoryType.EPISODIC))
        questions = [q["question"] for q in conv["qa"] if q.get("category") in (1, 2, 3, 4)]
        out.append((conv["sample_id"], turns, questions))
    return out


def lever_diff(binary: Path, home: Path) -> dict[str, Any]:
    retros = Mnemon(binary, home / "retros")
    summary = retros.imported([NewMemory(content=t) for t in RETROS])
    left = [r[0] for r in retros.query("SELECT content FROM insights WHERE deleted_at IS NULL")]
    per_conversation = {}
    examples: list[tuple[str, str]] = []
    for name, turns, _ in conversations():
        store = Mnemon(binary, home / f"diff-{name}")
        result = store.imported(turns)
        by_id = {r["id"]: r["content"] for r in result["results"] if r.get("id")}
        gone = store.query(
            "SELECT o.detail, i.content FROM oplog o JOIN insights i ON i.id = o.insight_id"
            " WHERE o.operation = 'import-replace'"
        )
        for detail, old in gone[: max(0, 3 - len(examples))]:
            new = by_id.get(str(detail).removeprefix("replaced by "), "?")
            examples.append((old, new))
        per_conversation[name] = {
            "turns": len(turns),
            "updated": result["updated"],
            "skipped": result["skipped"],
            "live": store.query("SELECT count(*) FROM insights WHERE deleted_at IS NULL")[0][0],
        }
    return {
        "retros": {"imported": 6, "updated": summary["updated"], "left": left},
        "locomo": per_conversation,
        "replaced_examples": examples,
    }


def lever_anchors(binary: Path, home: Path, questions: int) -> dict[str, Any]:
    """Recall's anchors and what reaches its top 20 (the adapter asks for 20 candidates)."""
    name, turns, asked = conversations()[0]
    store = Mnemon(binary, home / "anchors")
    store.imported(turns, "--no-diff")
    anchors, traversed, without, total = [], [], 0, 0
    via: Counter[str] = Counter()
    for question in asked[:questions]:
        data = store.json("recall", "--limit", "20", "--verbose", "--", question)
        anchors.append(data["meta"]["anchor_count"])
        traversed.append(data["meta"]["traversed"])
        for result in data["results"]:
            signals = result.get("signals") or {}
            total += 1
            via[str(result.get("via"))] += 1
            without += not any(signals.get(k, 0) > 0 for k in ("keyword", "entity", "similarity"))
    return {
        "conversation": name,
        "memories": len(turns),
        "questions": len(anchors),
        "anchor_count_mean": round(statistics.mean(anchors), 1),
        "traversed_mean": round(statistics.mean(traversed), 1),
        "top20_results": total,
        "top20_by_via": dict(via.most_common()),
        "top20_without_keyword_entity_or_similarity": without,
    }


def lever_locks(binary: Path, home: Path, writers: int = 8, rounds: int = 5) -> dict[str, Any]:
    store = Mnemon(binary, home / "locks")
    store.run("remember", "--", "the store exists")
    failed, started = 0, 0
    texts: list[str] = []
    for round_ in range(rounds):
        argv = [str(binary), "--data-dir", str(store.data_dir), "remember", "--no-diff", "--"]
        procs = [
            subprocess.Popen(
                [*argv, f"round {round_} writer {w}: a note"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                env=ENV,
            )
            for w in range(writers)
        ]
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            started += 1
            if proc.returncode != 0:
                failed += 1
                texts.append(err.strip().splitlines()[-1] if err.strip() else "")
    db = store.data_dir / "data" / "default" / "mnemon.db"
    before = store.query("SELECT sum(access_count) FROM insights")[0][0] or 0
    held = sqlite3.connect(db, timeout=0, isolation_level=None)
    held.execute("BEGIN IMMEDIATE")
    try:
        under = store.run("recall", "--limit", "10", "--", "note", check=False)
    finally:
        held.execute("ROLLBACK")
        held.close()
    after = store.query("SELECT sum(access_count) FROM insights")[0][0] or 0
    returned = len(json.loads(under.stdout)["results"]) if under.returncode == 0 else 0
    return {
        "writers_at_once": writers,
        "processes": started,
        "failed": failed,
        "first_failure": texts[0] if texts else None,
        "recall_under_a_held_lock": {
            "exit": under.returncode,
            "results": returned,
            "access_counts_added": after - before,
        },
    }


def timed(run: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU (user + system of the child processes) milliseconds of `run()`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    run()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall * 1000, cpu * 1000


def costs(store: Mnemon, questions: list[str]) -> dict[str, dict[str, float]]:
    """Wall and CPU medians per process of `status`, `search` and `recall` over `questions`."""
    argvs: dict[str, Callable[[str], list[str]]] = {
        "status": lambda q: ["status"],
        "search": lambda q: ["search", "--limit", "10", "--", q],
        "recall": lambda q: ["recall", "--limit", "10", "--verbose", "--", q],
    }
    rows = {}
    for name, argv in argvs.items():
        runs = [timed(partial(store.run, *argv(q))) for q in questions]
        rows[name] = {
            "wall_p50_ms": round(statistics.median(r[0] for r in runs), 1),
            "cpu_p50_ms": round(statistics.median(r[1] for r in runs), 1),
        }
    return rows


def lever_cost(binary: Path, home: Path, sizes: list[int], questions: int) -> dict[str, Any]:
    turns, asked = locomo_turns()
    out: dict[str, Any] = {}
    for size in sizes:
        data = home / f"mnemon-{size}"  # bench_mnemon_latency.py's layout, to reuse its store
        marker = data / "bench-size"
        if not (marker.is_file() and marker.read_text() == str(size)):
            os.environ["MNEMON_MAX_INSIGHTS"] = "0"  # Mnemon's own: keep every turn
            backend = MnemonBackend(MnemonSettings(binary=binary, data_dir=data))
            memories = (turns + synthetic(max(0, size - len(turns))))[:size]
            anyio.run(backend.write_many, memories)
            marker.write_text(str(size))
        rows = costs(Mnemon(binary, data), asked[:questions])
        out[str(size)] = rows
    return out


def lever_readonly(binary: Path, home: Path) -> dict[str, Any]:
    store = Mnemon(binary, home / "readonly")
    store.run("remember", "--", "written normally")
    write = store.run("--readonly", "remember", "--", "written under --readonly", check=False)
    landed = store.query("SELECT count(*) FROM insights WHERE content = 'written under --readonly'")
    store.run("--readonly", "recall", "--", "written")
    mode = store.query("PRAGMA journal_mode")[0][0]
    return {
        "readonly_remember_exit": write.returncode,
        "readonly_remember_landed": landed[0][0] == 1,
        "journal_mode_after_readonly_recall": mode,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--binary", type=Path, default=real_binary())
    parser.add_argument("--levers", default="diff,anchors,locks,cost,readonly")
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.binary is None or not args.binary.is_file():
        parser.error("no real mnemon binary: pass --binary or set MNEMON_REAL_BINARY")
    binary = args.binary.resolve()
    results: dict[str, Any] = {"binary": str(binary)}
    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        kept = args.keep or scratch
        for lever in args.levers.split(","):
            started = time.perf_counter()
            if lever == "diff":
                results[lever] = lever_diff(binary, scratch)
            elif lever == "anchors":
                results[lever] = lever_anchors(binary, scratch, args.questions)
            elif lever == "locks":
                results[lever] = lever_locks(binary, scratch)
            elif lever == "cost":
                sizes = [int(s) for s in args.sizes.split(",")]
                results[lever] = lever_cost(binary, kept, sizes, args.questions)
            elif lever == "readonly":
                results[lever] = lever_readonly(binary, scratch)
            else:
                parser.error(f"unknown lever {lever!r}")
            print(f"== {lever} ({time.perf_counter() - started:.0f} s)")
            print(json.dumps(results[lever], indent=2), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
