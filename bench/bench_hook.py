"""Benchmark: the prompt hook as an agent's client runs it, from its process's start to its
answer.

For each store (the 40-memory demo sample, and `--size` memories built as
`bench_footprint.py` builds them: LoCoMo's development turns, then synthetic ones, every
vector embedded beforehand), a project folder (with `.git`) whose memory (the data dir
`--project auto` derives from it, under a temporary `XDG_DATA_HOME`) is a copy of that store;
then the installed console script, `orchestrator hook prompt --client claude-code`, with
Claude Code's UserPromptSubmit payload (a LoCoMo question as the prompt) on stdin:

- `warm`: a shared process already serves the project (the first hook runs started it; they
  are repeated until one answers with memories, then 5 more, untimed), then `--rounds`
  hooks, each timed from `Popen` to the process's exit (its answer is complete then): p50,
  p95, max, and how many answered with memories;
- `cold`: nothing runs (every shared process stopped and gone before each round), `--cold`
  hooks timed the same way: each must add nothing and say so in its log within its budget.

Defaults as shipped (the semantic stage included, where its model is installed). Not a test:
it asserts nothing. Prints one JSON document.

    .venv/bin/python bench/bench_hook.py --size 10000 --keep DIR [--rounds 100] [--cold 10]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_context
import bench_footprint

from memory_orchestrator.faces.shared.project import data_dir_of

ORCHESTRATOR = str(Path(sys.executable).parent / "orchestrator")
START_S = 300.0
DEMO_QUESTIONS = [
    "recent issues with Vendor X",
    "what did Dana decide about the budget?",
    "which milestone did Vendor X miss?",
    "how do I flash the radio firmware?",
    "who reviews the design documents?",
]


def payload(root: Path, prompt: str) -> str:
    return json.dumps(
        {
            "session_id": "bench",
            "transcript_path": str(root / "transcript.jsonl"),
            "cwd": str(root),
            "permission_mode": "default",
            "hook_event_name": "UserPromptSubmit",
            "prompt": prompt,
        }
    )


def run_hook(root: Path, prompt: str, env: dict[str, str]) -> tuple[float, str]:
    """Milliseconds from the hook's start to its exit, and what it printed."""
    started = time.perf_counter()
    done = subprocess.run(
        [ORCHESTRATOR, "hook", "prompt", "--client", "claude-code"],
        input=payload(root, prompt),
        capture_output=True,
        text=True,
        cwd=root,
        env=env,
        timeout=60,
        check=True,
    )
    return (time.perf_counter() - started) * 1000, done.stdout


def last_outcome(runtime: Path) -> str:
    lines = (runtime / "memory-orchestrator" / "hooks.log").read_text().splitlines()
    return str(json.loads(lines[-1])["outcome"])


def started_in(runtime: Path) -> list[int]:
    """The shared processes started with `runtime` as their socket directory's parent (by
    their environment in /proc): those that have not written their pid file yet too."""
    wanted = f"XDG_RUNTIME_DIR={runtime}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError):
            if b"faces.shared.server" in (entry / "cmdline").read_bytes() and wanted in (
                entry / "environ"
            ).read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found


def stop_shared(runtime: Path) -> None:
    """Stop every shared process of `runtime` and wait until each is gone."""
    for pid in {*bench_footprint.shared_pids(runtime), *started_in(runtime)}:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while bench_footprint.status(pid) and time.monotonic() < deadline:
            time.sleep(0.05)


def wait_started(runtime: Path) -> None:
    deadline = time.monotonic() + START_S
    while not started_in(runtime) and time.monotonic() < deadline:
        time.sleep(0.05)


def summary(times: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(bench_footprint.percentile(times, 0.5), 1),
        "p95_ms": round(bench_footprint.percentile(times, 0.95), 1),
        "max_ms": round(max(times), 1),
    }


def measure(store: Path, label: str, rounds: int, cold: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-hook-", dir="/tmp"))
    runtime = Path(tempfile.mkdtemp(prefix="mo-bench-", dir="/tmp"))
    try:
        root = work / label
        (root / ".git").mkdir(parents=True)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(work),
            "XDG_DATA_HOME": str(work / "data"),
            "XDG_RUNTIME_DIR": str(runtime),
        }
        data = Path(data_dir_of(str(root), env))
        data.parent.mkdir(parents=True)
        shutil.copytree(store, data, ignore=shutil.ignore_patterns("traces.db*"))
        questions = (
            (DEMO_QUESTIONS * (rounds // len(DEMO_QUESTIONS) + 2))[: rounds + 1]
            if label == "demo"
            else bench_context.sample_questions(rounds + 1, seed=47)
        )
        deadline = time.monotonic() + START_S
        while True:  # start it and warm it up (until it answers, then 5 more): untimed
            _, out = run_hook(root, questions[0], env)
            if out:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"no answer after {START_S} s: {last_outcome(runtime)}")
            time.sleep(0.5)
        for question in questions[:5]:
            run_hook(root, question, env)
        warm: list[float] = []
        answered = 0
        for question in questions[1:]:
            elapsed, out = run_hook(root, question, env)
            warm.append(elapsed)
            answered += bool(out)
        cold_times: list[float] = []
        cold_outcomes: list[str] = []
        for question in questions[:cold]:
            stop_shared(runtime)
            elapsed, out = run_hook(root, question, env)
            cold_times.append(elapsed)
            cold_outcomes.append("nothing" if not out else "answered")
            cold_outcomes[-1] += f": {last_outcome(runtime)}"
            wait_started(runtime)  # (the one it started: stopped before the next round)
        stop_shared(runtime)
        return {
            "store": label,
            "warm": {"rounds": len(warm), "answered_with_memories": answered, **summary(warm)},
            "cold": {
                "rounds": len(cold_times),
                **summary(cold_times),
                "outcomes": sorted(set(cold_outcomes)),
            },
        }
    finally:
        stop_shared(runtime)
        shutil.rmtree(runtime, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--keep", type=Path, required=True, help="where the stores are built")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--cold", type=int, default=10)
    args = parser.parse_args()
    results = []
    for size, label in ((0, "demo"), (args.size, f"embedded-{args.size}")):
        store = args.keep / label
        bench_footprint.build_store(store, size)
        results.append(measure(store, label, args.rounds, args.cold))
    print(json.dumps({"command": " ".join(sys.argv), "results": results}, indent=2))


if __name__ == "__main__":
    main()
