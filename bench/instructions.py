"""Instructions per request, for A/B comparisons that the machine's drifting speed cannot blur.

Wall-clock timings on a shared machine move from run to run by more than a change of a few
percent in `bench/bench_context.py`, which is then noise. Valgrind's callgrind counts instructions,
which repeat for the same code and input. Run this script twice under callgrind, with 0 and
with N `memory_context` calls (direct, 2,000 LoCoMo turns, traces flushed after each call); the
difference of the two totals is the cost of N calls:

    for n in 0 60; do
      valgrind --tool=callgrind --callgrind-out-file=/tmp/cg-$n.out \\
        .venv/bin/python bench/instructions.py $n --data /tmp/cg-store 2>&1 | grep Collected
    done

With the semantic stage on (the default where its model is installed), embedding 2,000
memories under valgrind takes most of an hour: `--data DIR` builds the store and its vectors
once, natively (run the script once without valgrind), and every later run reuses them. The
questions are asked once through `memory_search` before the counted calls, in both runs (so
they cancel out of the difference), which leaves their vectors cached: the figure is the
pipeline's cost with the query vector cached, as in `bench_context.py`'s runs where another
system saw the question first; the encoder's own cost per question is measured apart
(`bench/bench_embedder.py`). Set PYTHONHASHSEED=0: the same hash order every run.

Put another checkout's `src` first on PYTHONPATH to measure it the same way (A/B).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_context

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import ContextRequest, SearchRequest
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import load_settings
from memory_orchestrator.state.traces import TraceStore

MEMORIES = 2000
WARM = 5
QUESTIONS = 60  # at most this many counted calls


async def run(calls: int, data: Path) -> None:
    turns, questions = bench_context.locomo_turns()
    settings = load_settings(data_dir=data)
    fresh = not settings.embedded_path().exists()
    backend = EmbeddedBackend(settings.embedded_path())
    traces = TraceStore(None)
    orch = Orchestrator(backend, settings, traces=traces)
    if fresh:
        memories = turns[:MEMORIES]
        for start in range(0, len(memories), 1000):
            await backend.write_many(memories[start : start + 1000])
    for question in questions[:WARM]:
        await orch.context(ContextRequest(query=question, expand=False))
    await bench_context.settled(orch)  # every memory embedded (kept in `data` for next time)
    asked = questions[WARM : WARM + QUESTIONS]
    for question in asked:  # the same in both runs: cancels out of the difference
        await orch.search(SearchRequest(query=question, top_k=10))
    traces.flush()
    for question in asked[:calls]:
        await orch.context(ContextRequest(query=question, expand=False))
        traces.flush()
    await orch.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("calls", type=int, nargs="?", default=0)
    parser.add_argument("--data", type=Path, default=None, help="a folder kept between runs")
    args = parser.parse_args()
    if args.data is not None:
        args.data.mkdir(parents=True, exist_ok=True)
        anyio.run(run, args.calls, args.data)
        return
    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(run, args.calls, Path(tmp))


if __name__ == "__main__":
    main()
