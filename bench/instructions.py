"""Instructions per request, for A/B comparisons that the machine's drifting speed cannot blur.

Wall-clock timings on this shared 2-core machine move by 10-40% from run to run (the same
code's synthetic-data generation measured 0.36 s and 0.51 s in two profiles), so a change of a
few percent in `bench/bench_context.py` is noise. Valgrind's callgrind counts instructions,
which repeat for the same code and input. Run this script twice under callgrind, with 0 and
with N `memory_context` calls (direct, 2,000 LoCoMo turns, traces flushed after each call); the
difference of the two totals is the cost of N calls:

    for n in 0 60; do
      valgrind --tool=callgrind --callgrind-out-file=/tmp/cg-$n.out \\
        .venv/bin/python bench/instructions.py $n 2>&1 | grep Collected
    done

Put another checkout's `src` first on PYTHONPATH to measure it the same way (A/B).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_context

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import ContextRequest
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import load_settings
from memory_orchestrator.state.traces import TraceStore

MEMORIES = 2000
WARM = 5


async def main(calls: int) -> None:
    turns, questions = bench_context.locomo_turns()
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(data_dir=Path(tmp))
        backend = EmbeddedBackend(settings.embedded_path())
        traces = TraceStore(None)
        orch = Orchestrator(backend, settings, traces=traces)
        memories = turns[:MEMORIES]
        for start in range(0, len(memories), 1000):
            await backend.write_many(memories[start : start + 1000])
        for question in questions[:WARM]:
            await orch.context(ContextRequest(query=question, expand=False))
        traces.flush()
        for question in questions[WARM : WARM + calls]:
            await orch.context(ContextRequest(query=question, expand=False))
            traces.flush()
        await orch.close()


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 0)
