"""Benchmark: `orchestrator import` of N memories as JSON Lines, in one process.

Writes N memories to a JSON Lines file (LoCoMo's development turns where the dataset is
beside the checkout, then deterministic synthetic ones, as `bench_context.py` makes them),
runs the real command twice over a fresh data dir, `orchestrator --data-dir D --json import
FILE`, and prints for each run: records, what was done, the import's own time (the loop over
the records, as the summary reports it: the process start, the model's loading and what the
semantic index embeds behind the writes once they are done are outside it), the rate, and
the command's wall time; and the process's CPU time over the loop (all its threads) with the
rate per CPU second, and the load average when it ended: on a shared machine the wall time
follows the others' load, the CPU time much less. The second run must add nothing. Not a
test: it asserts nothing.

    .venv/bin/python bench/bench_import.py [--count 10000] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_context import locomo_turns, synthetic


def memories_file(path: Path, count: int) -> None:
    turns, _ = locomo_turns()
    chosen = (turns + synthetic(max(0, count - len(turns))))[:count]
    with path.open("w", encoding="utf-8") as out:
        for memory in chosen:
            out.write(memory.model_dump_json(exclude_defaults=True) + "\n")


def command() -> list[str]:
    script = Path(sys.executable).parent / "orchestrator"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "memory_orchestrator"]


def run(data: Path, source: Path) -> dict[str, Any]:
    started = time.perf_counter()
    done = subprocess.run(
        [*command(), "--data-dir", str(data), "--json", "import", str(source)],
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - started
    summary = json.loads(done.stdout)
    return {
        "records": summary["records"],
        "counts": summary["counts"],
        "import_s": summary["seconds"],
        "rate_per_s": round(summary["records"] / summary["seconds"], 1),
        "cpu_s": summary["cpu_seconds"],
        "rate_per_cpu_s": round(summary["records"] / max(summary["cpu_seconds"], 1e-9), 1),
        "load_1m": round(os.getloadavg()[0], 2),
        "wall_s": round(wall, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-import-") as folder:
        source = Path(folder) / "memories.jsonl"
        memories_file(source, args.count)
        data = Path(folder) / "data"
        results = {"first": run(data, source), "again": run(data, source)}
    for name, row in results.items():
        print(f"{name:>6}: {json.dumps(row)}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
